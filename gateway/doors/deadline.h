/* deadline.h: the deadlines of an HTTP/1.1 exchange under way (state
 * EXCHANGE), each of which ends in an answer while one can still be given.
 *
 * The connection has one timer; while a request is relayed it is armed for
 * the earliest deadline of what the exchange waits on:
 *
 *  - the client's request body (sluice wants its bytes): the whole body
 *    within gateway.limits.body_timeout_ms of its start (0: no limit);
 *    from body_min_rate_grace_ms on, at least body_min_rate bytes per
 *    second on average (0: no minimum), the time sluice did not ask for
 *    bytes (the origin not taking them, a 100-continue awaited) not
 *    counted; and no byte for idle_timeout_ms. Answered 408 body-timeout,
 *    body-too-slow or idle-timeout, the request to the origin aborted.
 *  - the origin (it owes the request's take or its response):
 *    response_timeout_ms without progress, where progress is bytes of the
 *    request taken, a whole response head (1xx or final) or bytes of the
 *    response's body. Answered 504 upstream-timeout.
 *  - the client reading the response: idle_timeout_ms without a byte
 *    taken, then the connection ends (idle-timeout).
 *
 * A body held whole before anything is dialled (state HOLD, hold.h) has
 * the request body's deadlines, answered the same way.
 *
 * Once a byte of the final response (or part of a 1xx head) has reached
 * the client, no answer can follow: the connection ends and its access
 * line says why. Everything here runs on the connection's worker. */
#ifndef SLUICE_GW_DEADLINE_H
#define SLUICE_GW_DEADLINE_H

#include "exchange-t.h"

/* The exchange of x->reqh has begun (EXCHANGE): its clocks start now. */
void gw_h1x_deadline_start(struct gw_h1x *x);

/* After a run in EXCHANGE: notes what moved and (re)arms the
 * connection's timer for the earliest deadline that applies now. */
void gw_h1x_deadline_arm(struct gw_h1x *x);

/* The timer fired in EXCHANGE: ends the request for the deadline that
 * passed (gw_h1x_fail(), or gw_conn_close() for a client that does not
 * read), or arms again if none has. */
void gw_h1x_deadline_fired(struct gw_h1x *x);

#endif

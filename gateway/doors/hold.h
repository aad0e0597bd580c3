/* hold.h: a request body held whole before anything is dialled.
 *
 * SigV4 for a client that sends no X-Amz-Content-SHA256 (every AWS
 * service but S3) signs hex(SHA-256(body)), so sluice can sign such a
 * request again only once it has the body (inject.h). The exchange then
 * holds the body in the request's own buffer, right after its head, as
 * the client framed it: checked by the strict body parser as it comes,
 * bounded (GW_INJECT_HOLD_MAX payload bytes, GW_INJECT_HOLD_FRAMING of
 * chunk framing more: past either, 413 sigv4-body-too-large), with the
 * buffer grown as bytes arrive, never ahead of them. When it is whole the
 * request is signed and goes on as any other (dial, then the rebuilt head
 * and the held body, relayed as they came: the framing is the client's,
 * which it may have signed). Nothing reaches an origin before that.
 *
 * A client that sent "Expect: 100-continue" is told 100 Continue by
 * sluice, since the body is needed before the origin is even known to
 * answer; the origin may say it again (a client takes several 1xx).
 *
 * A malformed body is 400 bad-request (nothing was sent anywhere yet); a
 * client that closes before its body ended is client-closed. The buffer
 * is the exchange's (x->up), so it is freed with the connection, and
 * shrunk back once the exchange ends (gw_half_shrink()).
 *
 * What the buffers of every held body have grown by, across every worker,
 * is bounded by GW_HOLD_BUDGET: a growth past it is refused with 503
 * sigv4-hold-busy (nothing dialled), so that many clients holding bodies
 * at once cannot take the gateway's memory. The growth is given back
 * when the buffer shrinks (gw_hold_release()). */
#ifndef SLUICE_GW_HOLD_H
#define SLUICE_GW_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "exchange-t.h"

/* The request's head is routed and planned with x->inj.hold set: holds
 * its body (state HOLD). On the event loop's thread, as every call here. */
void gw_hold_start(struct gw_h1x *x);

/* HOLD: reads, checks and keeps the body; when whole, signs the request
 * (gw_inject_sign_held()) and carries it on (gw_h1x_forward()). Returns
 * true if it should be called again now; else it has added the client
 * events it waits for to *cev. May refuse (state REFUSE) or close. */
bool gw_hold_run(struct gw_h1x *x, uint32_t *cev);

#define GW_HOLD_BUDGET (256u << 20)

/* Gives back what x's held body took of the budget (its buffer shrank
 * or is freed). Idempotent; any thread. */
void gw_hold_release(struct gw_h1x *x);

/* Bytes of the budget in use now, and (tests only) a budget other than
 * GW_HOLD_BUDGET; 0 restores it. */
uint64_t gw_hold_in_use(void);
void gw_hold_set_budget(uint64_t bytes);

#endif

/* exchange.h: one HTTP/1.1 exchange, the engine of every HTTP door.
 *
 * Request heads are read and parsed from the client's transport, each
 * request is routed and checked by the door (gw_h1x_route_fn), an upstream
 * is dialled (every address checked) or an idle one of the same origin and
 * client reused, and the request and response are relayed as a rebuilt
 * head (hop-by-hop fields dropped, framing from the parser's decision, Via
 * added) plus a body streamed through the strict body parser. CONNECT and
 * WebSocket upgrades become tunnels. Refusals are answered with a status,
 * a Sluice-Reason header and a one-line body; nothing of a refused request
 * is ever sent upstream. The exchange knows transports only: the forward
 * door runs it over TCP, the intercepting door will run it over TLS. */
#ifndef SLUICE_GW_EXCHANGE_H
#define SLUICE_GW_EXCHANGE_H

#include "conn.h"
#include "exchange-t.h"

/* The state names, for the door's struct gw_door. */
extern const char *const gw_h1x_state_names[];

/* Starts the exchange on a newly accepted connection (its door's hooks are
 * the gw_h1x_* below): the first head is awaited. */
void gw_h1x_start(struct gw_h1x *x, gw_h1x_route_fn route);

/* The struct gw_door of a door that is "a transport + the exchange": its
 * connection type begins with struct gw_h1x. */
#define GW_H1X_DOOR(door_name, type)                                                    \
	{ .name = (door_name), .states = gw_h1x_state_names, .size = sizeof(type),      \
	  .run = gw_h1x_run, .event = gw_h1x_event, .timeout = gw_h1x_timeout,          \
	  .closing = gw_h1x_closing, .fini = gw_h1x_fini, .busy = gw_h1x_busy }

/* The door hooks GW_H1X_DOOR names. */
void gw_h1x_run(struct gw_conn *c);
bool gw_h1x_event(struct gw_conn *c, bool upstream, uint32_t events);
void gw_h1x_timeout(struct gw_conn *c);
void gw_h1x_closing(struct gw_conn *c, enum gw_reason why);
void gw_h1x_fini(struct gw_conn *c);

/* Answers the request under way with `status`, Sluice-Reason: reason and
 * a one-line body (the detail, control characters replaced), logs it, and
 * closes after it is written. */
void gw_h1x_refuse(struct gw_h1x *x, unsigned status, enum gw_reason reason, const char *fmt,
		   ...) __attribute__((format(printf, 4, 5)));

/* The request under way cannot go on (its body broke the rules, the
 * origin failed or went silent, a deadline passed): answered as by
 * gw_h1x_refuse() if nothing of a final response has reached the client
 * yet (the request to the origin, if begun, is cut by dropping the
 * upstream), else the connection ends and its line says `reason` (with
 * the status already sent). For the exchange's own parts (deadline.c). */
void gw_h1x_fail(struct gw_h1x *x, unsigned status, enum gw_reason reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The request is routed, planned and, if its body had to be held first,
 * signed (hold.h): carries it over the idle upstream connection of the
 * same origin and client, or dials. */
void gw_h1x_forward(struct gw_h1x *x);

/* The request is routed and the upstream connected: rebuild its head
 * and relay (state EXCHANGE). */
void gw_h1x_start_exchange(struct gw_h1x *x);

/* Resolves, checks and connects to c->req.host:port (state DIALING); the
 * exchange goes on when the dial ends. */
void gw_h1x_dial(struct gw_h1x *x);

/* Checks c->req.host:port against c->policy. 0, or -1 after refusing. */
int gw_h1x_check_host(struct gw_h1x *x);

/* The answer to a connection the gateway cannot serve (503), then the close. */
void gw_h1x_busy(int fd, const char *src, enum gw_reason why);

#endif

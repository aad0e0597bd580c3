/* message.h: one direction of an HTTP/1.1 exchange: its buffer, its body
 * checked as it streams, and the heads the exchange rebuilds. The
 * exchange's own parts (exchange.c), apart so that each file holds one
 * thing; no door uses them. */
#ifndef SLUICE_GW_MESSAGE_H
#define SLUICE_GW_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "exchange-t.h"

struct gw_xprt;

/* A buffer grows by doubling from this, up to the caller's limit. */
#define H1X_BUF 16384

int gw_half_reserve(struct gw_h1x_half *h, size_t want);
/* Drops the bytes already written, so reads have room. */
void gw_half_compact(struct gw_h1x_half *h);
/* Gives back what the buffer holds beyond cap bytes, when its bytes fit
 * (after gw_half_compact(); nothing may point into it). */
void gw_half_shrink(struct gw_h1x_half *h, size_t cap);
/* Forgets the rebuilt head and the message's progress. */
void gw_half_reset(struct gw_h1x_half *h);
void gw_half_free(struct gw_h1x_half *h);
/* Bytes ready to write: the rebuilt head or checked body. */
bool gw_half_pending(const struct gw_h1x_half *h);
/* Reads from t into h (growing it up to limit). Returns bytes read, 0 on
 * EOF, -EAGAIN, -ENOBUFS when full at the limit, or -errno. */
ssize_t gw_half_read(struct gw_h1x_half *h, struct gw_xprt *t, size_t limit);
/* Writes what is ready, the rebuilt head and the body after it in one
 * gather write. 1 if all was written, 0 if it would block, -errno. */
int gw_half_write(struct gw_h1x_half *h, struct gw_xprt *t);
/* Checks body bytes past `parsed` and makes them ready to write. 0, or
 * -EPROTO for a body the strict parser refuses. */
int gw_half_body(struct gw_h1x_half *h);

/* Rebuilds x->reqh for the origin into x->up.hbuf: origin-form target,
 * Host from the checked destination, hop-by-hop fields dropped, framing
 * from the parser's decision, Via added. 0, -ENOMEM or -ENOSPC. */
int gw_h1x_build_request(struct gw_h1x *x);
/* Rebuilds x->resph for the client into x->down.hbuf (decode_chunked:
 * the client is HTTP/1.0, the body goes out decoded, ended by close). */
int gw_h1x_build_response(struct gw_h1x *x, bool decode_chunked);

#endif

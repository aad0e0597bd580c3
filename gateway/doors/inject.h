/* inject.h: credentials on the requests sluice sends upstream itself.
 *
 * A policy's credentials (docs/credentials.md) are added only where the
 * gateway makes the upstream connection's security itself: the origin is
 * reached over sluice's TLS, its certificate verified (an intercepted
 * host, an https:// URL on the forward door), or in the clear for a
 * credential that says `cleartext: true`; the request's authority is the
 * connection's destination (the intercepting door's Host rule), the host
 * and port match the credential's pattern, and the method is not TRACE or
 * TRACK. Never on a plain tunnel, which sluice cannot read.
 *
 * Placeholders: the guest holds a sentinel (CONF_SENTINEL_PREFIX...) in a
 * variable; where a request header value (or the user:password inside an
 * Authorization: Basic value) holds this layer's sentinel and the request
 * is in that credential's scope, the real value replaces it. A sentinel
 * anywhere else (another layer's, a stale one, one out of scope, one in
 * the request-target) refuses the request, 403 credential-scope, with a
 * credential-violation log line: a sentinel is never forwarded. */
#ifndef SLUICE_GW_INJECT_H
#define SLUICE_GW_INJECT_H

#include <stdbool.h>

#include "exchange-t.h"
#include "http1-t.h"

struct gw_h1_writer;

/* SigV4 for a client that sends no X-Amz-Content-SHA256 (every AWS
 * service but S3): what is signed is the SHA-256 of the body, so a body
 * is held whole before anything is dialled, up to this many payload bytes
 * (a Content-Length, or a chunked body's data), and chunk framing up to
 * GW_INJECT_HOLD_FRAMING more; past either: 413 sigv4-body-too-large.
 * AWS's JSON and query APIs send far less; an upload belongs to S3,
 * which takes UNSIGNED-PAYLOAD, streamed. */
#define GW_INJECT_HOLD_MAX (1024 * 1024)
#define GW_INJECT_HOLD_FRAMING (64 * 1024)

/* Plans x->inj for the request routed (c->req.host:port, c->policy): the
 * credentials in scope, and the sentinels checked. 0, or -1 once it has
 * refused (gw_h1x_refuse(): 403 credential-scope; for SigV4 400, 501, or
 * 413 for a Content-Length over GW_INJECT_HOLD_MAX). On 0 with
 * x->inj.hold set, the request is not signed yet: its body must be held
 * (hold.h) and given to gw_inject_sign_held(). */
int gw_inject_plan(struct gw_h1x *x);

/* Refuses x's request: 413 sigv4-body-too-large, saying the bound and
 * what to do instead. Returns -1. */
int gw_inject_too_large(struct gw_h1x *x);

/* The held body, whole: body[0..n), as the client framed it (x->reqh's
 * Content-Length or chunked coding, already checked). Signs the request
 * again with hex(SHA-256(its payload)) as the hashed payload. 0, or -1
 * once it has refused (as gw_inject_plan()). Borrows body for the call. */
int gw_inject_sign_held(struct gw_h1x *x, const char *body, size_t n);

/* While the request head is rebuilt (message.c): the request-target with
 * the planned query credentials (client parameters of the same names
 * removed) into out; its length, or -ENOSPC. */
int gw_inject_target(const struct gw_h1x *x, const char *target, size_t tlen, char *out,
		     size_t outsz);

/* Writes header h as it goes upstream: not at all when a planned
 * credential sets it (every client copy, any case), with this layer's
 * sentinels replaced, or as it is. */
void gw_inject_header(struct gw_h1x *x, struct gw_h1_writer *wr, const struct gw_h1_header *h);

/* Writes the planned header and Basic credentials, and notes for the
 * access line (c->req.inject) those that did something. */
void gw_inject_finish(struct gw_h1x *x, struct gw_h1_writer *wr);

#endif

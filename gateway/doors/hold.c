/* hold.c: a request body held whole before anything is dialled (hold.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "conf.h"
#include "conn.h"
#include "deadline.h"
#include "exchange.h"
#include "hold.h"
#include "http1.h"
#include "inject.h"
#include "loop.h"
#include "message.h"
#include "reason.h"
#include "worker.h"
#include "xprt_tls.h"

static const char hold_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* What held bodies' buffers have grown by, every worker's (hold.h). */
static _Atomic uint64_t hold_bytes;
static _Atomic uint64_t hold_budget = GW_HOLD_BUDGET;

/* Takes n bytes of the budget for x: 0, or -EBUSY (nothing taken). */
static int
hold_reserve(struct gw_h1x *x, uint64_t n)
{
	uint64_t was = atomic_fetch_add(&hold_bytes, n);

	if (was + n > atomic_load(&hold_budget)) {
		atomic_fetch_sub(&hold_bytes, n);
		return -EBUSY;
	}
	x->inj.reserved += n;
	return 0;
}

void
gw_hold_release(struct gw_h1x *x)
{
	if (x->inj.reserved) {
		atomic_fetch_sub(&hold_bytes, x->inj.reserved);
		x->inj.reserved = 0;
	}
}

uint64_t
gw_hold_in_use(void)
{
	return atomic_load(&hold_bytes);
}

void
gw_hold_set_budget(uint64_t bytes)
{
	atomic_store(&hold_budget, bytes ? bytes : GW_HOLD_BUDGET);
}

/* The most x->up may hold while holding: the bytes before the body (its
 * head, after any already relayed), then the body at its longest. */
static size_t
hold_limit(const struct gw_h1x *x)
{
	if (x->reqh.body == GW_H1_BODY_LENGTH)
		return x->inj.held_at + (size_t)x->reqh.content_length;
	return x->inj.held_at + GW_INJECT_HOLD_MAX + GW_INJECT_HOLD_FRAMING;
}

/* Moves x->up's bytes to a buffer of `want` bytes; the parsed head and
 * target, which point into them, move along. 0, -EBUSY (past the
 * gateway's budget), or -ENOMEM. */
static int
hold_grow(struct gw_h1x *x, size_t want)
{
	struct gw_h1x_half *up = &x->up;
	char *nb;

	if (hold_reserve(x, want - up->cap) < 0)
		return -EBUSY;
	if (!(nb = malloc(want)))
		return -ENOMEM;
	if (up->len)
		memcpy(nb, up->buf, up->len);
	/* (while the old bytes are still allocated: their address is
	 * compared) */
	gw_h1_head_rebase(&x->reqh, up->buf, up->len, nb);
	gw_h1_target_rebase(&x->target, up->buf, up->len, nb);
	free(up->buf);
	up->buf = nb;
	up->cap = want;
	return 0;
}

void
gw_hold_start(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct gw_inject *inj = &x->inj;

	inj->held_at = inj->held_to = x->up.parsed + x->reqh.head_len;
	gw_h1_body_init(&inj->held, x->reqh.body, x->reqh.content_length, GW_H1_RAW);
	inj->continued = false;
	gw_half_reset(&x->down);
	x->down.len = x->down.parsed = x->down.wpos = x->down.fend = 0;
	/* The body's deadlines (deadline.h), from now. */
	gw_conn_set_state(c, H1X_HOLD);
	gw_h1x_deadline_start(x);
	gw_h1x_deadline_arm(x);
}

/* A request that ends here: its line counts the body bytes read (a
 * request that goes on counts what is relayed, as any other). */
static void
hold_count(struct gw_h1x *x)
{
	x->base.req.bytes_in = x->reqh.head_len + (x->inj.held_to - x->inj.held_at);
}

static int
hold_too_large(struct gw_h1x *x)
{
	hold_count(x);
	return gw_inject_too_large(x);
}

/* Checks the bytes read since the last call. 1: the body is whole, 0: not
 * yet, -1: refused. */
static int
hold_check(struct gw_h1x *x)
{
	struct gw_h1x_half *up = &x->up;
	struct gw_inject *inj = &x->inj;

	while (inj->held_to < up->len) {
		struct gw_h1_span data;
		size_t used = 0;
		enum gw_h1_result r = gw_h1_body_feed(&inj->held, up->buf + inj->held_to,
						      up->len - inj->held_to, &used, &data);

		if (r == GW_H1_ERROR) {
			hold_count(x);
			gw_h1x_refuse(x, 400, GW_R_BAD_REQUEST, "the request body: %s",
				      inj->held.err.msg ? inj->held.err.msg : "malformed");
			return -1;
		}
		inj->held_to += used;
		if (inj->held.payload > GW_INJECT_HOLD_MAX ||
		    inj->held_to - inj->held_at > GW_INJECT_HOLD_MAX + GW_INJECT_HOLD_FRAMING)
			return hold_too_large(x);
		if (r == GW_H1_DONE)
			return 1;
		if (used == 0)
			break;
	}
	return 0;
}

/* Writes our 100 Continue. 1: out (or none), 0: wait for the client to
 * read, -1: closed. */
static int
hold_say_continue(struct gw_h1x *x, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	int rc;

	if (!x->inj.continued)
		return 1;
	rc = gw_half_write(&x->down, c->cli.x);
	/* A TLS layer may keep the record under back-pressure. */
	if (rc == 1 && gw_xprt_is_tls(c->cli.x))
		rc = gw_xprt_tls_flush(c->cli.x) == -EAGAIN ? 0 : 1;
	if (rc < 0) {
		gw_conn_close(c, GW_R_CLIENT_CLOSED);
		return -1;
	}
	if (rc == 0)
		*cev |= gw_xprt_want(c->cli.x, EPOLLOUT);
	return rc;
}

bool
gw_hold_run(struct gw_h1x *x, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	struct gw_h1x_half *up = &x->up;
	struct gw_inject *inj = &x->inj;
	int whole;
	ssize_t n;

	if ((whole = hold_check(x)) < 0)
		return true;
	if (!whole && !inj->continued && x->reqh.expect_100_continue &&
	    x->reqh.version_minor == 1) {
		if (!(x->down.hbuf = malloc(sizeof(hold_continue)))) {
			gw_h1x_refuse(x, 503, GW_R_INTERNAL, "out of memory");
			return true;
		}
		memcpy(x->down.hbuf, hold_continue, sizeof(hold_continue) - 1);
		x->down.hlen = sizeof(hold_continue) - 1;
		x->down.hpos = 0;
		inj->continued = true;
	}
	/* The 100 goes out whole before anything else is read or said (a
	 * refusal must not follow half of it). */
	if (hold_say_continue(x, cev) <= 0)
		return false;
	if (whole) {
		gw_half_reset(&x->down);
		if (gw_inject_sign_held(x, up->buf + inj->held_at, inj->held_to - inj->held_at) < 0)
			return true;
		gw_h1x_forward(x);
		return true;
	}
	if (up->len == up->cap) {
		size_t limit = hold_limit(x), want = up->cap < H1X_BUF ? H1X_BUF : up->cap * 2;

		/* (hold_check() refuses a body past its bound first) */
		if (up->cap >= limit) {
			hold_too_large(x);
			return true;
		}
		int rc = hold_grow(x, want < limit ? want : limit);

		if (rc == -EBUSY) {
			hold_count(x);
			gw_h1x_refuse(x, 503, GW_R_SIGV4_HOLD_BUSY,
				      "sluice holds %llu MiB of SigV4 request bodies to sign them, its "
				      "bound: try again shortly",
				      (unsigned long long)(atomic_load(&hold_budget) >> 20));
			return true;
		}
		if (rc < 0) {
			gw_h1x_refuse(x, 503, GW_R_INTERNAL, "out of memory");
			return true;
		}
	}
	/* (room is left: the read neither moves nor grows the buffer, which
	 * the head's spans point into) */
	n = gw_half_read(up, c->cli.x, up->cap);
	if (n == -EAGAIN) {
		*cev |= EPOLLIN;
		return false;
	}
	if (n <= 0) {
		/* The client went away before its body ended: nothing was
		 * sent anywhere. */
		hold_count(x);
		gw_conn_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	return true;
}

/* deadline.c: the deadlines of an exchange under way (deadline.h).
 *
 * Nothing is kept per deadline but where it counts from (struct
 * gw_h1x_clock): after each run the deadlines of what the exchange waits
 * on are worked out again and the one timer armed for the earliest, as
 * HAProxy's tasks take the nearest of their expiry dates. */
#include <stdint.h>

#include "conf.h"
#include "conn.h"
#include "deadline.h"
#include "exchange.h"
#include "loop.h"
#include "message.h"
#include "worker.h"

#define NEVER UINT64_MAX

/* What an exchange waits on. */
enum {
	W_BODY = 1,     /* the client's request body */
	W_ORIGIN = 2,   /* the origin: to take the request, or to answer */
	W_READER = 4,   /* the client: to take the response */
};

static unsigned
waits(const struct gw_h1x *x)
{
	const struct gw_h1x_half *up = &x->up, *down = &x->down;
	/* Expect: 100-continue: the client holds its body back until the
	 * origin's first word (or a moment of its own). */
	bool hold = x->reqh.expect_100_continue && x->interim == 0 && !down->in_body;
	/* Request bytes the origin has not taken (the write would block). */
	bool sending = gw_half_pending(up);
	unsigned w = 0;

	/* Holding a body whole before anything is dialled (hold.h): the
	 * client's body, or the client taking our 100 Continue. */
	if (x->base.state == H1X_HOLD)
		return gw_half_pending(down) ? W_READER : W_BODY;

	if (gw_half_pending(down))
		w |= W_READER;
	if (sending || (!(w & W_READER) && !down->done && (up->done || down->in_body || hold)))
		w |= W_ORIGIN;
	if (!up->done && !sending && !hold)
		w |= W_BODY;
	return w;
}

static uint64_t
add(uint64_t a, uint64_t b)
{
	return a > NEVER - b ? NEVER : a + b;
}

struct due {
	uint64_t at;
	enum gw_reason why;
	unsigned w;
};

static void
consider(struct due *d, uint64_t at, enum gw_reason why, unsigned w)
{
	if (at < d->at) {
		d->at = at;
		d->why = why;
		d->w = w;
	}
}

/* The earliest deadline of what `w` says the exchange waits on. */
static void
earliest(const struct gw_h1x *x, unsigned w, struct due *d)
{
	const struct conf_gateway *g = gw_conn_gateway(&x->base);
	const struct gw_h1x_clock *k = &x->clock;

	d->at = NEVER;
	if (w & W_BODY) {
		if (g->body_timeout_ms)
			consider(d, add(k->body_start, g->body_timeout_ms), GW_R_BODY_TIMEOUT, W_BODY);
		/* By t past the grace, rate x t bytes: each byte read buys
		 * 1/rate s more (Apache's mod_reqtimeout MinRate). */
		if (g->body_min_rate)
			consider(d,
				 add(add(k->rate_start, g->body_min_rate_grace_ms),
				     (x->up.in - k->body_in0) * 1000 / g->body_min_rate),
				 GW_R_BODY_TOO_SLOW, W_BODY);
		consider(d, add(k->cli_at, g->idle_timeout_ms), GW_R_IDLE_TIMEOUT, W_BODY);
	}
	if (w & W_ORIGIN)
		consider(d, add(k->up_at, g->response_timeout_ms), GW_R_UPSTREAM_TIMEOUT, W_ORIGIN);
	/* (W_READER, and the backstop should nothing be waited on) */
	consider(d, add(k->cli_at, g->idle_timeout_ms), GW_R_IDLE_TIMEOUT, W_READER);
}

/* Notes the counts progress is judged by next time. */
static void
look(struct gw_h1x *x)
{
	struct gw_h1x_clock *k = &x->clock;

	k->seen_up_in = x->up.in;
	k->seen_up_out = x->up.out;
	k->seen_down_in = x->down.in;
	k->seen_down_out = x->down.out;
	k->seen_interim = x->interim;
}

void
gw_h1x_deadline_start(struct gw_h1x *x)
{
	struct gw_h1x_clock *k = &x->clock;
	uint64_t now = gw_loop_now(x->base.w->loop);

	k->body_start = k->rate_start = k->up_at = k->cli_at = now;
	k->paused_at = 0;
	k->body_in0 = x->up.in;
	look(x);
	/* The exchange's own deadlines from now (a TLS handshake's fixed
	 * one, say, ends here). */
	x->deadline_fixed = false;
}

void
gw_h1x_deadline_arm(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct gw_h1x_clock *k = &x->clock;
	uint64_t now = gw_loop_now(c->w->loop);
	unsigned w = waits(x);
	struct due d;

	if (x->up.in != k->seen_up_in || x->down.out != k->seen_down_out)
		k->cli_at = now;
	/* The origin's progress: request bytes taken, a whole head, bytes of
	 * the body; not the bytes of a head still short (a head comes whole
	 * within one response_timeout_ms, or not at all). */
	if (x->up.out != k->seen_up_out || x->interim != k->seen_interim ||
	    (x->down.in_body && x->down.in != k->seen_down_in))
		k->up_at = now;
	look(x);
	/* The minimum rate counts only the time the client was asked for
	 * bytes: a pause moves the rate's start on by its length. */
	if (!(w & W_BODY) && !x->up.done) {
		if (!k->paused_at)
			k->paused_at = now;
	} else if (k->paused_at) {
		k->rate_start = add(k->rate_start, now - k->paused_at);
		k->paused_at = 0;
	}
	earliest(x, w, &d);
	gw_timer_arm(c->w->loop, &c->timer, d.at > now ? d.at - now : 0);
}

void
gw_h1x_deadline_fired(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	const struct conf_gateway *g = gw_conn_gateway(c);
	uint64_t now = gw_loop_now(c->w->loop);
	struct due d;

	earliest(x, waits(x), &d);
	if (d.at > now) {
		gw_timer_arm(c->w->loop, &c->timer, d.at - now);
		return;
	}
	switch (d.why) {
	case GW_R_BODY_TIMEOUT:
		gw_h1x_fail(x, 408, d.why,
			    "the request body took longer than %u ms "
			    "(gateway.limits.body_timeout_ms)", g->body_timeout_ms);
		break;
	case GW_R_BODY_TOO_SLOW:
		gw_h1x_fail(x, 408, d.why,
			    "the request body arrives slower than %u bytes/s "
			    "(gateway.limits.body_min_rate)", g->body_min_rate);
		break;
	case GW_R_UPSTREAM_TIMEOUT:
		gw_h1x_fail(x, 504, d.why,
			    "%s:%u sent nothing for %u ms (gateway.limits.response_timeout_ms)",
			    c->req.host, c->req.port, g->response_timeout_ms);
		break;
	default:
		if (d.w == W_BODY)
			gw_h1x_fail(x, 408, GW_R_IDLE_TIMEOUT,
				    "no byte of the request body for %u ms "
				    "(gateway.limits.idle_timeout_ms)", g->idle_timeout_ms);
		else
			gw_conn_close(c, GW_R_IDLE_TIMEOUT);
		break;
	}
}

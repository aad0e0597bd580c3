/* exchange.c: one HTTP/1.1 exchange (exchange.h).
 *
 * Each direction of an exchange has one buffer read from its source's
 * transport; the head at its front is parsed and replaced by a rebuilt
 * head (hop-by-hop fields dropped, Via added), and the body after it is
 * checked by the streaming body parser and forwarded as it arrives.
 * Nothing is sent upstream before the request was allowed, resolved,
 * every address checked and the connection made.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "conf.h"
#include "conn.h"
#include "deadline.h"
#include "dial.h"
#include "exchange.h"
#include "hold.h"
#include "message.h"
#include "http1.h"
#include "inject.h"
#include "intercept.h"
#include "xprt_tls.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "tunnel.h"
#include "worker.h"

#define H1X_LINGER_MS 2000
#define H1X_HEAD_TIMEOUT_MS 30000

const char *const gw_h1x_state_names[] = {
#define GW_H1X_STATE_NAME(id, name) name,
	GW_H1X_STATES(GW_H1X_STATE_NAME)
#undef GW_H1X_STATE_NAME
};

static void h1x_touch(struct gw_conn *c);

static struct gw_h1x *
h1x(struct gw_conn *c)
{
	return (struct gw_h1x *)(void *)c;
}

/* ---- responses of our own ---- */

static const char *
status_text(unsigned status)
{
	switch (status) {
	case 200: return "Connection established";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 405: return "Method Not Allowed";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 421: return "Misdirected Request";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

void
gw_h1x_refuse(struct gw_h1x *x, unsigned status, enum gw_reason reason, const char *fmt, ...)
{
	struct gw_conn *c = &x->base;
	char detail[512], body[700];
	const char *extra = "";
	va_list ap;
	int blen, n;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	/* The detail may quote what the client sent: keep the line a line. */
	for (char *p = detail; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	blen = snprintf(body, sizeof(body), "sluice: %s: %s\n", gw_reason_name(reason), detail);
	if (status == 407)
		extra = "Proxy-Authenticate: Basic realm=\"sluice\"\r\n";
	gw_half_reset(&x->down);
	x->down.len = x->down.wpos = x->down.fend = x->down.parsed = 0;
	x->down.hbuf = malloc(1024 + sizeof(body));
	if (!x->down.hbuf) {
		gw_conn_close(c, GW_R_INTERNAL);
		return;
	}
	n = snprintf(x->down.hbuf, 1024 + sizeof(body),
		     "HTTP/1.1 %u %s\r\nSluice-Reason: %s\r\n%sContent-Type: text/plain\r\n"
		     "Content-Length: %d\r\nConnection: close\r\nVia: 1.1 sluice\r\n\r\n%s",
		     status, status_text(status), gw_reason_name(reason), extra, blen, body);
	x->down.hlen = (size_t)n;
	/* The access line counts what is sent: in an exchange, the 1xx
	 * heads that went before too. */
	x->down.out = (c->state == H1X_EXCHANGE ? x->down.out : 0) + x->down.hlen;
	c->req.status = status;
	/* 502 and 504: allowed, but the way there failed; 408: allowed, but
	 * the client did not keep up. */
	c->req.denied = status != 502 && status != 504 && status != 408;
	c->req.bytes_out = x->down.out;
	gw_conn_log(c, reason);
	gw_conn_upstream_drop(c);
	x->u_idle = false;
	gw_dial_cancel(&c->dial);
	/* A client that does not read its refusal is not waited for long. */
	x->deadline_fixed = true;
	gw_timer_arm(c->w->loop, &c->timer, H1X_HEAD_TIMEOUT_MS);
	gw_conn_set_state(c, H1X_REFUSE);
}

/* Nothing of a final response has reached the client, and no 1xx head
 * is half written: it can still be answered. */
static bool
h1x_answerable(const struct gw_h1x *x)
{
	const struct gw_h1x_half *d = &x->down;

	return (x->base.state == H1X_EXCHANGE || x->base.state == H1X_HOLD) &&
	       (d->hpos == 0 || (d->hpos == d->hlen && !d->in_body));
}

void
gw_h1x_fail(struct gw_h1x *x, unsigned status, enum gw_reason reason, const char *fmt, ...)
{
	struct gw_conn *c = &x->base;
	char detail[512];
	va_list ap;

	/* The request body that went upstream is the client's too; a held
	 * one is all the client's. */
	if (c->state == H1X_HOLD)
		c->req.bytes_in = x->reqh.head_len + (x->up.len - x->inj.held_at);
	else if (x->up.out > x->up.hlen)
		c->req.bytes_in += x->up.out - x->up.hlen;
	if (!h1x_answerable(x)) {
		gw_conn_close(c, reason);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	/* (gw_h1x_refuse() drops the upstream: a request cut short there
	 * ends with the connection, never as a whole one.) */
	gw_h1x_refuse(x, status, reason, "%s", detail);
}

/* ---- teardown ---- */

void
gw_h1x_fini(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);

	gw_half_free(&x->up);
	gw_hold_release(x);
	gw_half_free(&x->down);
	free(x->inj.authz);
	x->inj.authz = NULL;
}

/* The teardown's first step (conn.h): a request cut short still gets its
 * line, with what reached the client. A tunnel's line is the request head
 * plus what went through the tunnel (gw_conn_close() adds those). */
void
gw_h1x_closing(struct gw_conn *c, enum gw_reason why)
{
	struct gw_h1x *x = h1x(c);

	(void)why;
	if (!c->tunneling)
		c->req.bytes_out = x->down.out;
}

/* ---- policy ---- */

int
gw_h1x_check_host(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct gw_policy_decision d;

	if (gw_policy_check(c->policy, c->req.host, c->req.port, &d) == 0) {
		c->req.report_only = d.report_only;
		c->req.report_reason = d.reason;
		return 0;
	}
	if (d.reason == GW_R_DENIED)
		gw_h1x_refuse(x, 403, d.reason, "%s:%u is denied by rule '%s' (line %u) of policy '%s'",
			   c->req.host, c->req.port, d.rule ? d.rule : "?", d.pos.line,
			   gw_policy_name(c->policy));
	else if (d.reason == GW_R_NOT_ALLOWED)
		gw_h1x_refuse(x, 403, d.reason, "%s:%u is not allowed by policy '%s'", c->req.host, c->req.port,
			   gw_policy_name(c->policy));
	else
		gw_h1x_refuse(x, d.reason == GW_R_BAD_PORT ? 400 : 403, d.reason, "%s:%u", c->req.host, c->req.port);
	return -1;
}


/* ---- connecting ---- */

static void h1x_start_tunnel(struct gw_conn *c, bool upgrade);

/* The dial ended: a connected upstream, or why not. */
static void
h1x_dialed(struct gw_conn *c, enum gw_reason why, int err, const char *detail)
{
	struct gw_h1x *x = h1x(c);

	if (why != GW_R_NONE) {
		/* Before the guest's TLS is ours, the way's own answer; after,
		 * an HTTP answer inside it, whatever door it came by. */
		if (!x->intercept && (x->way != GW_WAY_HTTP || x->by_sni))
			gw_intercept_refuse_early(x, why, err, detail);
		else
			gw_h1x_refuse(x, gw_dial_status(why), why, "%s", detail);
		gw_h1x_run(c);
		return;
	}
	x->u_idle = false;
	snprintf(x->u_addr, sizeof(x->u_addr), "%s", c->req.upstream);
	snprintf(x->u_host, sizeof(x->u_host), "%s", c->req.host);
	x->u_port = c->req.port;
	x->u_client = c->client_idx;
	x->u_tls = x->up_tls;
	gw_timer_cancel(c->w->loop, &c->timer);
	x->deadline_fixed = false;
	if (x->is_connect && gw_intercept_wanted(x)) {
		snprintf(x->dest, sizeof(x->dest), "%s", c->req.host);
		x->dest_port = c->req.port;
		x->u_tls = x->up_tls = true;
		gw_intercept_upstream(x);
	} else if (x->up_tls) {
		/* An https:// URL: the origin's name is D for this request
		 * (inside an intercepted tunnel it is D already). */
		if (!x->intercept) {
			snprintf(x->dest, sizeof(x->dest), "%s", c->req.host);
			x->dest_port = c->req.port;
		}
		gw_intercept_upstream(x);
	} else if (x->is_connect) {
		h1x_start_tunnel(c, false);
	} else {
		gw_h1x_start_exchange(x);
	}
	gw_h1x_run(c);
}

/* An idle upstream may carry the next request if it said nothing since
 * the last response. A TLS one may have received records that are no
 * data (TLS 1.3 session tickets): a read consumes those and tells. */
static bool
upstream_fit(struct gw_conn *c)
{
	char b;

	if (gw_xprt_is_tls(c->up.x))
		return gw_xprt_recv(c->up.x, &b, 1) == -EAGAIN && gw_xprt_quiet(c->up.x);
	return gw_xprt_quiet(c->up.x);
}

/* ---- the request ---- */

static bool
is_websocket_upgrade(const struct gw_h1_head *h)
{
	const struct gw_h1_header *u = gw_h1_header_find(h, "Upgrade");

	return u && h->version_minor == 1 && gw_h1_conn_has(h, "upgrade") &&
	       u->value.len == 9 && strncasecmp(u->value.p, "websocket", 9) == 0 &&
	       h->method_id == GW_H1_M_GET;
}

/* TRACE (and TRACK, its IIS twin) is never relayed: an origin echoes the
 * request it got, with whatever a hop added (credentials, cookies: XST).
 * An OPTIONS (or TRACE) with Max-Forwards: 0 is for this hop to answer
 * (RFC 9110 7.6.2). Both get a 405 here. Method names are compared in any
 * case: an origin may take "trace" for TRACE. True once answered. */
static bool
h1x_answered_here(struct gw_h1x *x)
{
	const struct gw_h1_head *h = &x->reqh;

	if (gw_h1_method_ieq(h, "TRACE") || gw_h1_method_ieq(h, "TRACK")) {
		gw_h1x_refuse(x, 405, GW_R_METHOD_NOT_ALLOWED, "%.*s is not relayed by sluice",
			      (int)h->method.len, h->method.p);
		return true;
	}
	if (gw_h1_method_ieq(h, "OPTIONS") && h->has_max_forwards && h->max_forwards == 0) {
		gw_h1x_refuse(x, 405, GW_R_METHOD_NOT_ALLOWED,
			      "OPTIONS with Max-Forwards: 0 ends here (RFC 9110 7.6.2)");
		return true;
	}
	return false;
}

/* A request head is complete: the door decides, then resolve and connect
 * (or reuse the idle upstream connection of the same origin and client). */
static void
h1x_request(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	char method[sizeof(c->req.method)];
	size_t mlen = x->reqh.method.len < sizeof(method) - 1 ? x->reqh.method.len
							       : sizeof(method) - 1;

	memcpy(method, x->reqh.method.p, mlen);
	method[mlen] = '\0';
	gw_conn_req_begin(c, method);
	x->is_connect = x->reqh.method_id == GW_H1_M_CONNECT;
	/* A CONNECT's mode is known when its tunnel or interception starts. */
	c->req.mode = x->intercept    ? GW_MODE_INTERCEPT
		      : x->is_connect ? GW_MODE_NONE
				      : GW_MODE_HTTP;
	c->req.bytes_in = x->reqh.head_len;
	x->down.out = 0;
	x->head_timed = false;
	x->requests++;
	if ((x->intercept ? gw_intercept_route(x) : x->route(x)) != 0)
		return;
	/* The credentials it gets, and every sentinel it holds checked,
	 * before anything is dialled (a sentinel in a TRACE is a violation
	 * first). */
	if (gw_inject_plan(x) < 0 || h1x_answered_here(x))
		return;
	x->is_upgrade = !x->is_connect && is_websocket_upgrade(&x->reqh);
	if (x->reqh.upgrade && !x->is_upgrade)
		gw_log_debug("forward %s: dropping a non-WebSocket Upgrade", c->src);
	/* A request SigV4 signs over its body is signed once that is read. */
	if (x->inj.hold) {
		gw_hold_start(x);
		return;
	}
	gw_h1x_forward(x);
}

void
gw_h1x_forward(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;

	/* Keep-alive reuse: same origin, same client identity. */
	if (c->up.x && x->u_idle && !x->is_connect && x->u_port == c->req.port &&
	    x->u_client == c->client_idx && x->u_tls == x->up_tls &&
	    strcmp(x->u_host, c->req.host) == 0 &&
	    upstream_fit(c)) {
		x->u_idle = false;
		snprintf(c->req.upstream, sizeof(c->req.upstream), "%s", x->u_addr);
		gw_h1x_start_exchange(x);
		return;
	}
	gw_h1x_dial(x);
}

void
gw_h1x_dial(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;

	gw_conn_upstream_drop(c);
	x->u_idle = false;
	/* The dial has its own deadlines (DNS, then connect). */
	gw_timer_cancel(c->w->loop, &c->timer);
	x->deadline_fixed = true;
	gw_conn_set_state(c, H1X_DIALING);
	gw_conn_dial(c, c->req.host, c->req.port, h1x_dialed);
}

void
gw_h1x_start_exchange(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct gw_h1x_half *up = &x->up, *down = &x->down;

	if (gw_h1x_build_request(x) < 0) {
		gw_h1x_refuse(x, 431, GW_R_HEADER_TOO_LARGE, "the rebuilt request head is too large");
		return;
	}
	/* The original head is replaced by the rebuilt one. */
	up->parsed += x->reqh.head_len;
	up->wpos = up->fend = up->parsed;
	gw_h1_body_init(&up->body, x->reqh.body, x->reqh.content_length, GW_H1_RAW);
	up->in_body = true;
	up->done = x->reqh.body == GW_H1_BODY_NONE ||
		   (x->reqh.body == GW_H1_BODY_LENGTH && x->reqh.content_length == 0);
	up->out = 0;
	gw_half_reset(down);
	down->out = 0;
	gw_h1_parser_init(&x->parser, GW_H1_RESPONSE, gw_conn_gateway(c)->max_header_bytes);
	gw_h1_parser_set_request_method(&x->parser, x->reqh.method_id);
	x->client_keep = x->reqh.keep_alive;
	x->close_after = false;
	x->skip_up_read = true;         /* the request is not even sent yet */
	x->resp_short = false;
	x->interim = 0;
	gw_conn_set_state(c, H1X_EXCHANGE);
	gw_h1x_deadline_start(x);
}

/* A response head arrived from the origin. */
static int
h1x_response_head(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	struct gw_h1x_half *down = &x->down;
	bool decode = false;

	down->parsed += x->resph.head_len;
	down->wpos = down->fend = down->parsed;
	if (x->resph.status == 101) {
		if (!x->is_upgrade)
			return -EPROTO;
		if (gw_h1x_build_response(x, false) < 0)
			return -ENOMEM;
		c->req.status = 101;
		h1x_start_tunnel(c, true);
		return 1;
	}
	if (x->resph.status < 200) {
		/* 100 Continue and friends: pass on, then read the next head;
		 * an origin that never comes to a final one is cut off. */
		if (++x->interim > GW_H1X_MAX_INTERIM)
			return -E2BIG;
		if (x->reqh.version_minor == 0 && x->resph.status == 100) {
			/* An HTTP/1.0 client never asked for it. */
			gw_h1_parser_init(&x->parser, GW_H1_RESPONSE, gw_conn_gateway(c)->max_header_bytes);
			gw_h1_parser_set_request_method(&x->parser, x->reqh.method_id);
			return 0;
		}
		if (gw_h1x_build_response(x, false) < 0)
			return -ENOMEM;
		gw_h1_parser_init(&x->parser, GW_H1_RESPONSE, gw_conn_gateway(c)->max_header_bytes);
		gw_h1_parser_set_request_method(&x->parser, x->reqh.method_id);
		return 0;
	}
	c->req.status = x->resph.status;
	if (x->resph.body == GW_H1_BODY_UNTIL_CLOSE || !x->reqh.keep_alive)
		x->close_after = true;
	if (x->resph.body == GW_H1_BODY_CHUNKED && x->reqh.version_minor == 0) {
		/* HTTP/1.0 knows no chunks: decode, and end by closing. */
		decode = true;
		x->close_after = true;
	}
	if (gw_h1x_build_response(x, decode) < 0)
		return -ENOMEM;
	gw_h1_body_init(&down->body, x->resph.body, x->resph.content_length,
			decode ? GW_H1_DECODE : GW_H1_RAW);
	down->in_body = true;
	down->done = x->resph.body == GW_H1_BODY_NONE ||
		     (x->resph.body == GW_H1_BODY_LENGTH && x->resph.content_length == 0);
	return 0;
}

/* Ends a connection whose client may still be sending (a pipelined
 * request, the rest of an upload the origin answered early): closing with
 * unread input would reset the connection and could destroy the response
 * in flight, so stop sending and read for a while first. */
static void
h1x_linger(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	gw_conn_upstream_drop(c);
	x->u_idle = false;
	gw_xprt_shutdown(c->cli.x);
	x->linger_left = 1 << 20;
	x->deadline_fixed = false;
	gw_conn_set_state(c, H1X_LINGER);
	h1x_touch(c);
	x->deadline_fixed = true;
}

/* The response went out in full: log, then wait for the next request or
 * close. */
static void
h1x_exchange_done(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	/* Bytes past the response's end mean the origin is confused: do not
	 * send it another request. */
	bool upstream_keep = x->resph.keep_alive && x->resph.body != GW_H1_BODY_UNTIL_CLOSE &&
			     x->up.done && x->down.parsed == x->down.len;

	c->req.bytes_in += x->up.out > x->up.hlen ? x->up.out - x->up.hlen : 0;
	c->req.bytes_out = x->down.out;
	gw_conn_log(c, GW_R_NONE);
	if (x->close_after || !x->client_keep || !x->up.done) {
		h1x_linger(c);
		return;
	}
	if (!upstream_keep) {
		gw_conn_upstream_drop(c);
	} else {
		x->u_idle = true;
	}
	/* What the client sent after this request is the next one. */
	x->up.wpos = x->up.fend = x->up.parsed;
	gw_half_compact(&x->up);
	/* A body held to sign its request (hold.h) grew the buffer: back
	 * to a head's size while the connection idles. */
	gw_half_shrink(&x->up, gw_conn_gateway(c)->max_header_bytes + H1X_BUF);
	gw_hold_release(x);
	gw_half_reset(&x->up);
	gw_half_reset(&x->down);
	x->down.len = x->down.parsed = x->down.wpos = x->down.fend = 0;
	c->req.method[0] = c->req.host[0] = '\0';
	gw_h1_parser_init(&x->parser, GW_H1_REQUEST, gw_conn_gateway(c)->max_header_bytes);
	/* A client reading our response has not sent its next request yet,
	 * unless it pipelined it (then it is in the buffer already). */
	x->skip_client_read = true;
	gw_conn_set_state(c, H1X_HEAD);
}

/* ---- tunnels ---- */

static void
h1x_start_tunnel(struct gw_conn *c, bool upgrade)
{
	struct gw_h1x *x = h1x(c);
	static const char established[] =
		"HTTP/1.1 200 Connection established\r\nVia: 1.1 sluice\r\n\r\n";
	struct gw_h1x_half *up = &x->up, *down = &x->down;
	int rc = 0;

	gw_conn_tunnel_start(c);
	/* The line: the request head, then what goes through the tunnel. */
	c->req.bytes_in = x->reqh.head_len;
	c->req.bytes_out = 0;
	if (upgrade) {
		/* Our rebuilt 101 head, then whatever the origin sent after it. */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, down->hbuf + down->hpos,
					down->hlen - down->hpos, false);
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, down->buf + down->parsed,
					down->len - down->parsed, false);
		/* The request went out in full (a GET has no body). */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, up->buf + up->wpos,
					up->len - up->wpos, false);
	} else if (x->by_sni) {
		/* The opening is out; the hello read is the tunnel's first. */
		gw_conn_tunnel_gate(c);
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, up->buf, up->len, false);
	} else {
		c->req.status = 200;
		gw_conn_tunnel_gate(c);
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, established,
					sizeof(established) - 1, false);
		/* Bytes the client sent right after CONNECT (a TLS hello). */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, up->buf + up->parsed + x->reqh.head_len,
					up->len - up->parsed - x->reqh.head_len, false);
	}
	gw_half_free(up);
	gw_half_free(down);
	gw_conn_set_state(c, H1X_TUNNEL);
	if (rc)
		gw_conn_close(c, GW_R_INTERNAL);
}

/* ---- the engine ---- */

/* How long a request head may take from its first byte: the head
 * timeout, or the idle timeout when that is shorter. */
static uint64_t
h1x_head_timeout_ms(const struct gw_conn *c)
{
	uint64_t ms = gw_conn_gateway(c)->idle_timeout_ms;

	return ms < H1X_HEAD_TIMEOUT_MS ? ms : H1X_HEAD_TIMEOUT_MS;
}

static void
h1x_touch(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	uint64_t ms = gw_conn_gateway(c)->idle_timeout_ms;

	if (x->deadline_fixed)
		return;
	/* A head must arrive whole within the head timeout, counted from its
	 * first byte (a byte now and then does not extend it), except that a
	 * kept-alive connection may idle before its next request starts. */
	if (c->state == H1X_HEAD && !(x->requests > 0 && x->up.len == 0)) {
		if (x->head_timed)
			return;
		x->head_timed = true;
		x->head_t0 = gw_loop_now(c->w->loop);
		ms = h1x_head_timeout_ms(c);
	} else if (c->state == H1X_LINGER)
		ms = H1X_LINGER_MS;
	gw_timer_arm(c->w->loop, &c->timer, ms);
}

/* HEAD: read and parse a request head. Returns true if it should go on. */
static bool
h1x_run_head(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	struct gw_h1x_half *up = &x->up;
	size_t limit = gw_conn_gateway(c)->max_header_bytes + H1X_BUF;

	for (;;) {
		enum gw_h1_result r = GW_H1_AGAIN;
		ssize_t n;

		if (up->len > up->parsed) {
			r = gw_h1_head_parse(&x->parser, up->buf + up->parsed, up->len - up->parsed, &x->reqh);
			if (r == GW_H1_DONE) {
				h1x_request(x);
				return c->state != H1X_HEAD;
			}
			if (r == GW_H1_ERROR) {
				gw_conn_req_begin(c, "-");
				gw_h1x_refuse(x, x->reqh.err.reason == GW_R_HEADER_TOO_LARGE ? 431 : 400,
					   x->reqh.err.reason, "%s", x->reqh.err.msg);
				return true;
			}
		}
		if (x->skip_client_read && !gw_xprt_pending(c->cli.x))
			return false;
		n = gw_half_read(up, c->cli.x, limit);
		if (n == -EAGAIN)
			return false;
		if (n == 0) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
		if (n < 0) {
			gw_conn_close(c, n == -ENOBUFS ? GW_R_HEADER_TOO_LARGE : GW_R_CLIENT_CLOSED);
			return false;
		}
	}
}

/* The origin failed (reset, closed, errored) during an exchange. Before
 * any of the response reached the client it can still be told why, with
 * a 502; after, the connection can only end. */
static void
h1x_upstream_failed(struct gw_conn *c, int err)
{
	struct gw_h1x *x = h1x(c);

	if (err)
		gw_h1x_fail(x, 502, GW_R_UPSTREAM_RESET,
			    "the origin reset the connection without a response: %s", strerror(err));
	else
		gw_h1x_fail(x, 502, GW_R_UPSTREAM_RESET, "the origin closed without a response");
}

/* The request's body broke its framing (a bad chunk size or line, data
 * longer or shorter than its chunk, a forbidden trailer): 400 while the
 * client can still be told, and the request upstream, begun, is cut. */
static bool
h1x_bad_request_body(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);

	gw_h1x_fail(x, 400, GW_R_BAD_REQUEST, "bad request body: %s", x->up.body.err.msg);
	return c->state == H1X_REFUSE;
}

/* EXCHANGE: move request and response bytes. Returns false when nothing
 * more can happen now. */
static bool
h1x_run_exchange(struct gw_conn *c, uint32_t *cev, uint32_t *uev)
{
	struct gw_h1x *x = h1x(c);
	struct gw_h1x_half *up = &x->up, *down = &x->down;
	bool moved = false, dry;
	int rc;

	/* client -> upstream: body bytes already read are checked first */
	if (gw_half_body(up) < 0)
		return h1x_bad_request_body(c);
	rc = gw_half_write(up, c->up.x);
	if (rc < 0) {
		h1x_upstream_failed(c, -rc);
		return c->state == H1X_REFUSE;
	}
	if (rc == 0)
		*uev |= EPOLLOUT;
	if (rc == 1 && !up->done) {
		ssize_t n = gw_half_read(up, c->cli.x, H1X_BUF);

		if (n > 0) {
			moved = true;
			if (gw_half_body(up) < 0)
				return h1x_bad_request_body(c);
		} else if (n == 0) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return false;
		} else if (n == -EAGAIN) {
			*cev |= EPOLLIN;
		} else {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
	}

	/* upstream -> client */
	rc = gw_half_write(down, c->cli.x);
	if (rc < 0) {
		gw_conn_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	if (rc == 0) {
		*cev |= EPOLLOUT;
		return moved;
	}
	if (down->done) {
		h1x_exchange_done(c);
		return c->state == H1X_HEAD;
	}
	/* Read when nothing checkable is left: all of it went through, or
	 * what is there is the start of a head. */
	dry = down->parsed == down->len || x->resp_short;
	if (x->skip_up_read && dry && !gw_xprt_pending(c->up.x)) {
		*uev |= EPOLLIN;
		return moved;
	}
	if (dry) {
		ssize_t n = gw_half_read(down, c->up.x, down->in_body ? H1X_BUF
							     : gw_conn_gateway(c)->max_header_bytes + H1X_BUF);

		if (n == -EAGAIN) {
			*uev |= EPOLLIN;
			x->skip_up_read = true;
			return moved;
		}
		if (n == -ENOBUFS && x->resp_short) {
			/* (The head parser's own limit is lower: not reached.) */
			gw_h1x_fail(x, 502, GW_R_UPSTREAM_HEADER_TOO_LARGE,
				    "the origin's response head does not fit");
			return c->state == H1X_REFUSE;
		}
		if (n > 0)
			x->resp_short = false;
		if (n < 0 && n != -ENOBUFS && n != -EAGAIN) {
			h1x_upstream_failed(c, (int)-n);
			return c->state == H1X_REFUSE;
		}
		if (n == 0) {
			if (!down->in_body) {
				h1x_upstream_failed(c, 0);
				return c->state == H1X_REFUSE;
			}
			if (gw_h1_body_eof(&down->body) == GW_H1_DONE) {
				down->done = true;
				return true;
			}
			h1x_upstream_failed(c, 0);
			return c->state == H1X_REFUSE;
		}
		if (n > 0)
			moved = true;
	}
	while (!down->in_body) {
		enum gw_h1_result r = gw_h1_head_parse(&x->parser, down->buf + down->parsed,
						       down->len - down->parsed, &x->resph);

		if (r == GW_H1_AGAIN) {
			x->resp_short = true;
			return true;
		}
		if (r == GW_H1_ERROR) {
			gw_h1x_fail(x, 502,
				    x->resph.err.reason == GW_R_HEADER_TOO_LARGE
					    ? GW_R_UPSTREAM_HEADER_TOO_LARGE
					    : GW_R_UPSTREAM_BAD_RESPONSE,
				    "the origin's response: %s", x->resph.err.msg);
			return c->state == H1X_REFUSE;
		}
		rc = h1x_response_head(c);
		if (rc == -E2BIG) {
			gw_h1x_fail(x, 502, GW_R_UPSTREAM_TOO_MANY_1XX,
				    "the origin sent more than %d 1xx heads without a final one",
				    GW_H1X_MAX_INTERIM);
			return c->state == H1X_REFUSE;
		}
		if (rc < 0) {
			gw_h1x_fail(x, 502, GW_R_UPSTREAM_BAD_RESPONSE,
				    "the origin's response is not usable");
			return c->state == H1X_REFUSE;
		}
		if (rc > 0)
			return true;    /* a tunnel now */
		if (!down->in_body && gw_half_pending(down))
			return true;    /* send the 1xx first */
	}
	if (gw_half_body(down) < 0) {
		gw_h1x_fail(x, 502, GW_R_UPSTREAM_BAD_RESPONSE, "the origin's response body: %s",
			    down->body.err.msg);
		return c->state == H1X_REFUSE;
	}
	return true;
}

void
gw_h1x_run(struct gw_conn *c)
{
	struct gw_h1x *x = h1x(c);
	uint32_t cev = 0, uev = 0;
	bool again = false;
	uint64_t io = x->up.in + x->up.out + x->down.in + x->down.out;

	for (int rounds = 0; rounds < 64; rounds++) {
		again = false;

		cev = uev = 0;
		switch ((enum gw_h1x_state)c->state) {
		case H1X_HEAD:
			again = h1x_run_head(c);
			if (c->state == H1X_HEAD) {
				cev = EPOLLIN;
				if (c->up.x)
					uev = EPOLLIN;  /* notice an idle upstream closing */
			}
			break;
		case H1X_DIALING:
			break;
		case H1X_EXCHANGE:
			again = h1x_run_exchange(c, &cev, &uev);
			break;
		case H1X_HOLD:
			again = gw_hold_run(x, &cev);
			if (c->state == H1X_HOLD && c->up.x)
				uev = EPOLLIN;  /* notice an idle upstream closing */
			break;
		case H1X_TUNNEL:
			gw_conn_tunnel_run(c);
			return;
		case H1X_TLS_UP:
		case H1X_TLS_HELLO:
		case H1X_TLS_DOWN:
		case H1X_SNI_PEEK:
			again = gw_intercept_run(x, &cev, &uev);
			break;
		case H1X_REFUSE: {
			int rc = gw_half_write(&x->down, c->cli.x);

			/* A TLS layer may still hold the answer's last record. */
			if (rc == 1 && gw_xprt_is_tls(c->cli.x))
				rc = gw_xprt_tls_flush(c->cli.x) == -EAGAIN ? 0 : 1;
			if (rc < 0) {
				gw_conn_close(c, GW_R_CLIENT_CLOSED);
				return;
			}
			if (rc == 0) {
				cev = gw_xprt_want(c->cli.x, EPOLLOUT);
				break;
			}
			/* Written: stop sending, and read what the client still
			 * sends for a while, so that closing with unread bytes
			 * does not reset the connection before our answer is
			 * read (a lingering close). */
			h1x_linger(c);
			again = true;
			break;
		}
		case H1X_LINGER: {
			char sink[4096];
			ssize_t n = gw_xprt_recv(c->cli.x, sink, sizeof(sink));

			if (n > 0 && (size_t)n < x->linger_left) {
				x->linger_left -= (size_t)n;
				again = true;
			} else if (n == -EAGAIN) {
				cev = EPOLLIN;
			} else {
				gw_conn_close(c, GW_R_NONE);
				return;
			}
			break;
		}
		}
		if (c->closed)
			return;
		if (!again)
			break;
	}
	if (c->state == H1X_EXCHANGE && (cev | uev) == 0 && !again)
		gw_log_debug("forward %s: exchange waits on nothing", c->src);
	if (again) {
		/* Still work to do after a fair share: let other connections
		 * run first, and come back when the loop says the sockets are
		 * ready (level-triggered, so at once if they still are). */
		cev = EPOLLIN | EPOLLOUT;
		uev = c->up.x ? EPOLLIN | EPOLLOUT : 0;
	}
	/* An exchange's deadlines follow what it waits on (deadline.h); for a
	 * head or a held body, any byte in or out is activity. */
	if (c->state == H1X_EXCHANGE || c->state == H1X_HOLD)
		gw_h1x_deadline_arm(x);
	else if (c->state == H1X_HEAD && io != x->up.in + x->up.out + x->down.in + x->down.out)
		h1x_touch(c);
	gw_conn_watch(c, cev, uev);
}

bool
gw_h1x_event(struct gw_conn *c, bool upstream, uint32_t events)
{
	struct gw_h1x *x = h1x(c);

	if (!upstream) {
		x->skip_client_read = false;
		/* During the guest's TLS handshake its alert (a refused leaf)
		 * may be queued ahead of the reset that raised the error: the
		 * handshake reads it first and ends the connection with the
		 * reason it gives (client-rejected-cert, not client-closed). */
		if ((events & EPOLLERR) && c->state != H1X_TLS_DOWN) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
		return true;
	}
	x->skip_up_read = false;
	/* (An idle upstream's error is handled below; a tunnel finds its
	 * errors in send and recv.) */
	if ((events & EPOLLERR) && c->state == H1X_EXCHANGE) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->up.tcp.fd, SOL_SOCKET, SO_ERROR, &err, &len);
		h1x_upstream_failed(c, err);
		return c->state == H1X_REFUSE;
	}
	if ((c->state == H1X_HEAD || c->state == H1X_HOLD) && x->u_idle &&
	    (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) &&
	    !((events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) == 0 && upstream_fit(c))) {
		/* An idle upstream connection spoke or closed: it cannot
		 * carry a next request any more. */
		gw_conn_upstream_drop(c);
		x->u_idle = false;
		return false;
	}
	return true;
}

void
gw_h1x_timeout(struct gw_conn *c)
{
	/* An exchange's deadlines (a held body's too) end in an answer while
	 * one can be given; idle, refusal and linger deadlines end the
	 * connection, and a head's answers 408 once it began; a dial keeps
	 * its own (DNS, connect) and answers 504 itself. */
	if (c->state == H1X_EXCHANGE || c->state == H1X_HOLD) {
		unsigned was = c->state;

		gw_h1x_deadline_fired(h1x(c));
		if (!c->closed && c->state != was)
			gw_h1x_run(c);
		return;
	}
	/* A head that began and never ended (a byte now and then) is told
	 * why; a connection that sent nothing of one just ends. */
	if (c->state == H1X_HEAD && h1x(c)->up.len > 0) {
		gw_conn_req_begin(c, "-");
		c->req.t_start = h1x(c)->head_t0;
		c->req.bytes_in = h1x(c)->up.len;
		gw_h1x_refuse(h1x(c), 408, GW_R_HEAD_TIMEOUT,
			      "the request head did not arrive whole within %u s",
			      (unsigned)(h1x_head_timeout_ms(c) / 1000));
		gw_h1x_run(c);
		return;
	}
	gw_conn_close(c, c->state == H1X_LINGER || c->state == H1X_REFUSE ? GW_R_NONE
									  : GW_R_IDLE_TIMEOUT);
}

void
gw_h1x_busy(int fd, const char *src, enum gw_reason why)
{
#define BUSY_BODY "sluice: too-many-connections: the gateway is full\n"
	static const char busy[] =
		"HTTP/1.1 503 Service Unavailable\r\nSluice-Reason: too-many-connections\r\n"
		"Content-Type: text/plain\r\nContent-Length: 50\r\nConnection: close\r\n\r\n"
		BUSY_BODY;
	_Static_assert(sizeof(BUSY_BODY) - 1 == 50, "Content-Length of the busy answer");

	(void)src;
	(void)why;
	(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

void
gw_h1x_start(struct gw_h1x *x, gw_h1x_route_fn route)
{
	struct gw_conn *c = &x->base;

	x->route = route;
	gw_h1_parser_init(&x->parser, GW_H1_REQUEST, gw_conn_gateway(c)->max_header_bytes);
	c->state = H1X_HEAD;
	gw_conn_arm(c, H1X_HEAD_TIMEOUT_MS);
	/* Most clients send at once: try before waiting for an event. */
	gw_h1x_run(c);
}

/* intercept.c: the intercepting side of the HTTP exchange (intercept.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <openssl/x509.h>

#include "certs.h"
#include "conf.h"
#include "addr.h"
#include "bind.h"
#include "conn.h"
#include "dial.h"
#include "exchange.h"
#include "http1.h"
#include "intercept.h"
#include "log.h"
#include "message.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "socks5.h"
#include "tlshello.h"
#include "worker.h"
#include "xprt_tls.h"

/* The guest's first record, read whole before the leaf is chosen. */
#define HELLO_MAX (GW_TLSHELLO_HEADER + 16384)
/* Upstream TLS sessions kept per worker. */
#define SESSIONS 1024
/* From the origin's connection to the end of the guest's handshake. */
#define HANDSHAKE_MS 30000

static const uint8_t alpn_h1[] = "\x08http/1.1";

static struct {
	struct certs_cache *cache;
	EVP_PKEY *leaf_key;
	X509 *ca;
	X509_STORE *trust;
} kit;

int
gw_intercept_setup(struct certs_cache *cache, EVP_PKEY *leaf_key, X509 *ca,
		   const char *upstream_ca, char *err, size_t errsz)
{
	kit.trust = gw_tls_trust_new(upstream_ca, true, err, errsz);
	if (!kit.trust)
		return -1;
	kit.cache = cache;
	kit.leaf_key = leaf_key;
	kit.ca = ca;
	return 0;
}

void
gw_intercept_teardown(void)
{
	gw_tls_trust_free(kit.trust);
	memset(&kit, 0, sizeof(kit));
}

int
gw_intercept_worker_init(struct gw_worker *w, char *err, size_t errsz)
{
	if (!kit.cache)
		return 0;
	w->tls_server = gw_tls_ctx_server_new(err, errsz);
	if (!w->tls_server)
		return -1;
	w->tls_client = gw_tls_ctx_client_new(kit.trust, SESSIONS, err, errsz);
	if (!w->tls_client) {
		gw_tls_ctx_free(w->tls_server);
		w->tls_server = NULL;
		return -1;
	}
	return 0;
}

void
gw_intercept_worker_fini(struct gw_worker *w)
{
	gw_tls_ctx_free(w->tls_client);
	gw_tls_ctx_free(w->tls_server);
	w->tls_client = w->tls_server = NULL;
}

bool
gw_intercept_wants(const struct gw_conn *c, const char *host, uint16_t port)
{
	return c->w->tls_server && c->policy && gw_policy_intercepts(c->policy, host, port);
}

bool
gw_intercept_wanted(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;

	return x->is_connect && gw_intercept_wants(c, c->req.host, c->req.port);
}

/* ---- ways in from other doors ---- */

/* The connections the SOCKS5 and SNI doors hand over: the exchange's,
 * under the door's own name (door= in the access line). */
static const struct gw_door socks_icpt_door = GW_H1X_DOOR("socks", struct gw_h1x);
static const struct gw_door sni_icpt_door = GW_H1X_DOOR("sni", struct gw_h1x);

void
gw_intercept_enter(struct gw_conn *from, enum gw_h1x_way way, const void *pre, size_t npre)
{
	struct gw_conn *c = gw_conn_hand_over(from, way == GW_WAY_SNI ? &sni_icpt_door
								       : &socks_icpt_door);
	struct gw_h1x *x;

	if (!c) {
		if (!from->closed)
			gw_conn_close(from, GW_R_INTERNAL);
		return;
	}
	x = (struct gw_h1x *)(void *)c;
	x->way = way;
	x->is_connect = true;
	x->route = gw_intercept_route;
	gw_h1_parser_init(&x->parser, GW_H1_REQUEST, gw_conn_gateway(c)->max_header_bytes);
	c->state = H1X_DIALING;
	if (npre) {
		if (gw_half_reserve(&x->up, npre) < 0) {
			gw_conn_close(c, GW_R_INTERNAL);
			return;
		}
		memcpy(x->up.buf, pre, npre);
		x->up.len = npre;
	}
	if (gw_intercept_literal(x))
		gw_h1x_run(c);          /* the opening, then the hello */
	else
		gw_h1x_dial(x);
}

void
gw_intercept_refuse_early(struct gw_h1x *x, enum gw_reason why, int err, const char *detail)
{
	struct gw_conn *c = &x->base;
	unsigned status = gw_dial_status(why);

	gw_log_info("%s %s: %s:%u: %s: %s", c->door->name, c->src, c->req.host, c->req.port,
		    gw_reason_name(why), detail);
	gw_half_reset(&x->down);
	x->down.len = x->down.wpos = x->down.fend = x->down.parsed = 0;
	if (x->way == GW_WAY_SOCKS5 && !x->by_sni) {
		uint8_t rep = err && why == GW_R_CONNECT_FAILED ? gw_socks5_rep_for_errno(err)
							       : gw_socks5_rep_for(why);
		int n;

		x->down.hbuf = malloc(32);
		n = x->down.hbuf ? gw_socks5_reply((uint8_t *)x->down.hbuf, 32, rep, NULL) : -1;
		if (n < 0) {
			gw_conn_close(c, GW_R_INTERNAL);
			return;
		}
		x->down.hlen = (size_t)n;
		status = rep;
	}
	c->req.status = status;
	c->req.reason = why;
	/* 502 and 504 (SOCKS: the dial's replies): allowed, the way failed. */
	c->req.denied = gw_dial_status(why) != 502 && gw_dial_status(why) != 504;
	gw_conn_log(c, why);
	gw_conn_upstream_drop(c);
	x->deadline_fixed = true;
	gw_conn_arm(c, HANDSHAKE_MS);
	c->drain = true;
	gw_conn_set_state(c, H1X_REFUSE);
}

/* ---- upstream: our TLS to the origin ---- */

void
gw_intercept_upstream(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	char key[GW_TLS_SESS_KEY_MAX], err[GW_TLS_ERR_MAX];
	struct gw_tls_client_params p = {
		.host = x->dest,
		.alpn = alpn_h1,
		.alpn_len = sizeof(alpn_h1) - 1,
		.session_key = key,
	};
	struct gw_tlshello h;
	struct gw_xprt *t;

	/* The origin is offered the guest's list cut to what sluice relays
	 * (http/1.1), when the guest's hello is known already (the SNI door,
	 * an IP literal); else http/1.1, which every HTTP/1.1 guest takes. */
	if ((x->way == GW_WAY_SNI || x->by_sni) && x->up.len &&
	    gw_tlshello_parse((const uint8_t *)x->up.buf, x->up.len,
			      HELLO_MAX - GW_TLSHELLO_HEADER, &h) == GW_TLSHELLO_OK &&
	    !h.alpn_http11) {
		p.alpn = NULL;
		p.alpn_len = 0;
	}

	/* Sessions are kept per client (or sandbox) and destination. */
	if (snprintf(key, sizeof(key), "%.60s:%s:%u",
		     c->client_idx >= 0 ? gw_conn_gateway(c)->clients[c->client_idx].name
					: c->who.name,
		     x->dest, x->dest_port) >= (int)sizeof(key))
		p.session_key = NULL;   /* (cannot be: 60 + 253 + 7 bytes) */
	t = gw_xprt_tls_client_new(c->w->tls_client, &p, err, sizeof(err));
	if (!t) {
		gw_log_warnx("%s %s: intercept %s: %s", c->door->name, c->src, x->dest, err);
		gw_conn_close(c, GW_R_INTERNAL);
		return;
	}
	gw_xprt_push(&c->up.x, t);
	/* The origin's handshake and the guest's, within one deadline. */
	x->deadline_fixed = true;
	gw_conn_arm(c, HANDSHAKE_MS);
	if (x->is_connect || x->intercept)
		c->req.mode = GW_MODE_INTERCEPT;
	gw_conn_set_state(c, H1X_TLS_UP);
}

/* The origin's TLS failed: say why in the log, keep it for the answer. */
static void
up_failed(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;

	x->up_fail = gw_xprt_tls_verify_result(c->up.x) != 0 ? GW_R_UPSTREAM_CERT_INVALID
							      : GW_R_UPSTREAM_TLS_FAILED;
	snprintf(x->up_err, sizeof(x->up_err), "%s", gw_xprt_tls_error(c->up.x));
	gw_log_info("%s %s: %s:%u: %s: %s", c->door->name, c->src, x->dest, x->dest_port,
		    gw_reason_name(x->up_fail), x->up_err);
	gw_conn_tls_handshake(c, true, x->up_fail);
	gw_conn_upstream_drop(c);
	x->u_idle = false;
}

/* What opens the guest's side, queued: the CONNECT's 200, the SOCKS5
 * success reply, or nothing (the SNI door's guest is waiting for our
 * ServerHello already). The up buffer then holds only what the guest sent
 * after its request: its hello, or the start of it. */
static int
queue_opening(struct gw_h1x *x)
{
	static const char established[] =
		"HTTP/1.1 200 Connection established\r\nVia: 1.1 sluice\r\n\r\n";
	struct gw_conn *c = &x->base;
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	int n;

	gw_half_reset(&x->down);
	switch (x->way) {
	case GW_WAY_HTTP:
		x->down.hbuf = malloc(sizeof(established));
		if (!x->down.hbuf)
			return -ENOMEM;
		memcpy(x->down.hbuf, established, sizeof(established) - 1);
		x->down.hlen = sizeof(established) - 1;
		c->req.status = 200;
		x->up.parsed += x->reqh.head_len;
		x->up.wpos = x->up.fend = x->up.parsed;
		gw_half_compact(&x->up);
		break;
	case GW_WAY_SOCKS5:
		/* BND.ADDR: the address the gateway connected from. */
		if (!c->up.x || getsockname(c->up.tcp.fd, (struct sockaddr *)&bound, &bl) < 0)
			memset(&bound, 0, sizeof(bound));
		if (!(x->down.hbuf = malloc(32)))
			return -ENOMEM;
		n = gw_socks5_reply((uint8_t *)x->down.hbuf, 32, GW_SOCKS5_REP_SUCCEEDED,
				    bound.ss_family ? (struct sockaddr *)&bound : NULL);
		if (n < 0)
			return -EINVAL;
		x->down.hlen = (size_t)n;
		c->req.status = GW_SOCKS5_REP_SUCCEEDED;
		break;
	case GW_WAY_SNI:
		c->req.status = 200;
		break;
	}
	x->down.hpos = 0;
	return 0;
}

static bool
run_up(struct gw_h1x *x, uint32_t *uev)
{
	struct gw_conn *c = &x->base;
	int rc = gw_xprt_tls_handshake(c->up.x);

	if (rc == -EAGAIN) {
		*uev = gw_xprt_want(c->up.x, EPOLLIN);
		return false;
	}
	if (rc < 0)
		up_failed(x);
	else
		gw_conn_tls_handshake(c, true, GW_R_NONE);
	/* What an optimistic SOCKS5 client sent after its request, before our
	 * reply, is its hello: read and checked as such in TLS_HELLO. */
	if (x->intercept || !x->is_connect) {
		/* A new connection for a later request (the guest's TLS is
		 * ours already), or for an https:// URL sent in the clear. */
		if (x->up_fail != GW_R_NONE) {
			gw_h1x_refuse(x, 502, x->up_fail, "%s:%u: %s", x->dest, x->dest_port,
				      x->up_err);
			return true;
		}
		gw_h1x_start_exchange(x);
		return true;
	}
	if (!x->by_sni && queue_opening(x) < 0) {
		gw_conn_close(c, GW_R_INTERNAL);
		return false;
	}
	gw_conn_set_state(c, H1X_TLS_HELLO);
	return true;
}

/* ---- the guest: its hello, then our TLS ---- */

/* Writes the opening, then reads the guest's first record whole into the
 * up buffer and parses it (*r, *h). Returns true when it did, false when
 * it waits (*cev) or the connection ended. */
static bool
read_hello(struct gw_h1x *x, struct gw_tlshello *h, enum gw_tlshello_result *r, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	struct gw_h1x_half *up = &x->up;
	int rc = gw_half_write(&x->down, c->cli.x);

	if (rc < 0) {
		gw_conn_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	if (rc == 0) {
		*cev = EPOLLOUT;
		return false;
	}
	for (;;) {
		ssize_t n;

		*r = up->len ? gw_tlshello_parse((const uint8_t *)up->buf, up->len,
						 HELLO_MAX - GW_TLSHELLO_HEADER, h)
			     : GW_TLSHELLO_NEED_MORE;
		if (*r != GW_TLSHELLO_NEED_MORE)
			return true;
		n = gw_half_read(up, c->cli.x, HELLO_MAX);
		if (n == -EAGAIN) {
			*cev = EPOLLIN;
			return false;
		}
		if (n <= 0) {
			gw_conn_close(c, n == -ENOBUFS ? GW_R_TLS_TOO_BIG : GW_R_CLIENT_CLOSED);
			return false;
		}
	}
}

/* SNI_PEEK: an IP-literal CONNECT's hello names where it goes. */
static bool
run_peek(struct gw_h1x *x, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	struct gw_policy_decision d;
	struct gw_tlshello h;
	enum gw_tlshello_result r;
	enum gw_reason why;
	char lit[GW_HOST_MAX];

	if (!read_hello(x, &h, &r, cev))
		return false;
	snprintf(lit, sizeof(lit), "%s", c->req.host);
	c->req.denied = true;
	if (r != GW_TLSHELLO_OK) {
		gw_log_info("%s %s: %s:%u is not allowed, and the guest's first record names no "
			    "host: %s", c->door->name, c->src, lit, c->req.port, h.msg);
		gw_conn_close(c, GW_R_NOT_ALLOWED);
		return false;
	}
	snprintf(c->req.sni, sizeof(c->req.sni), "%s", h.sni);
	if (gw_host_normalize(h.sni, h.sni_len, c->req.host, sizeof(c->req.host), &why) < 0 ||
	    strcmp(c->req.host, h.sni) != 0) {
		snprintf(c->req.host, sizeof(c->req.host), "%s", lit);
		gw_conn_close(c, GW_R_TLS_BAD_SNI);
		return false;
	}
	if (gw_policy_check(c->policy, c->req.host, c->req.port, &d) < 0) {
		gw_log_info("%s %s: %s:%u (the hello's name for %s) refused by policy '%s': %s",
			    c->door->name, c->src, c->req.host, c->req.port, lit,
			    gw_policy_name(c->policy), gw_reason_name(d.reason));
		gw_conn_close(c, d.reason);
		return false;
	}
	c->req.denied = false;
	c->req.report_only = d.report_only;
	c->req.report_reason = d.reason;
	/* The name is what is checked and dialled; the literal is the only
	 * address of it that may be connected to. */
	gw_h1x_dial(x);
	gw_dial_pin(&c->dial, (const struct sockaddr *)&x->lit);
	return false;
}

bool
gw_intercept_literal_wanted(const struct gw_conn *c, struct sockaddr_storage *lit)
{
	struct gw_policy_decision d, ad;
	struct sockaddr_storage ss;

	if (!lit)
		lit = &ss;
	/* Only an address the policy's address rules let through (a private
	 * or loopback one stays refused as such: no name makes it right). */
	return gw_addr_parse_literal(c->req.host, strlen(c->req.host), lit) == 1 &&
	       gw_policy_check(c->policy, c->req.host, c->req.port, &d) < 0 &&
	       d.reason == GW_R_NOT_ALLOWED &&
	       gw_policy_check_addr(c->policy, (const struct sockaddr *)lit, &ad) == 0;
}

bool
gw_intercept_literal(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;

	if (!gw_intercept_literal_wanted(c, &x->lit))
		return false;
	x->by_sni = true;
	if (queue_opening(x) < 0) {
		gw_conn_close(c, GW_R_INTERNAL);
		return true;
	}
	x->deadline_fixed = true;
	gw_conn_arm(c, HANDSHAKE_MS);
	gw_conn_set_state(c, H1X_SNI_PEEK);
	return true;
}

static bool
run_hello(struct gw_h1x *x, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	struct gw_h1x_half *up = &x->up;
	struct gw_tls_answer a = { 0 };
	struct gw_tls_server_params p = { 0 };
	struct gw_tlshello h;
	enum gw_tlshello_result r;
	char err[GW_TLS_ERR_MAX];
	struct gw_xprt *t;
	STACK_OF(X509) *chain;
	X509 *leaf = NULL;
	enum gw_reason why;

	if (!read_hello(x, &h, &r, cev))
		return false;
	/* A hello without SNI is answered for D; one naming another host is
	 * refused, as for a tunnel: the guest does not get to pick (bind.h). */
	why = gw_bind_sni(x->dest, r, &h);
	if (r == GW_TLSHELLO_OK)
		snprintf(c->req.sni, sizeof(c->req.sni), "%s", h.sni);
	if (why != GW_R_NONE) {
		if (why == GW_R_TLS_SNI_MISMATCH)
			gw_log_info("%s %s: intercept %s: the guest's SNI names %s",
				    c->door->name, c->src, x->dest, h.sni);
		else
			gw_log_info("%s %s: intercept %s: the guest's hello: %s", c->door->name,
				    c->src, x->dest, h.msg);
		gw_conn_close(c, why);
		return false;
	}
	if (certs_cache_get(kit.cache, x->dest, &leaf, err, sizeof(err)) < 0) {
		gw_log_warnx("%s %s: intercept %s: no leaf: %s", c->door->name, c->src, x->dest, err);
		gw_conn_close(c, GW_R_INTERNAL);
		return false;
	}
	chain = sk_X509_new_null();
	if (chain)
		sk_X509_push(chain, kit.ca);
	a.cert = leaf;
	a.key = kit.leaf_key;
	a.chain = chain;
	/* Only HTTP/1.1 is relayed: the guest is answered with what the
	 * origin picked, when the guest offered it (and with http/1.1 for our
	 * own 502 when the origin failed); else no ALPN: a client offering
	 * h2 alone falls back to HTTP/1.1. */
	a.alpn = h.alpn_http11 && (x->up_fail != GW_R_NONE ||
				   strcmp(gw_xprt_tls_alpn(c->up.x), "http/1.1") == 0)
			 ? "http/1.1" : NULL;
	p.answer = &a;
	p.pre = up->buf;
	p.npre = up->len;
	t = gw_xprt_tls_server_new(c->w->tls_server, &p, err, sizeof(err));
	sk_X509_free(chain);
	X509_free(leaf);
	if (!t) {
		gw_log_warnx("%s %s: intercept %s: %s", c->door->name, c->src, x->dest, err);
		gw_conn_close(c, GW_R_INTERNAL);
		return false;
	}
	gw_xprt_push(&c->cli.x, t);
	up->len = up->parsed = up->wpos = up->fend = 0;
	gw_conn_set_state(c, H1X_TLS_DOWN);
	return true;
}

static bool
run_down(struct gw_h1x *x, uint32_t *cev)
{
	struct gw_conn *c = &x->base;
	int rc = gw_xprt_tls_handshake(c->cli.x);

	if (rc == -EAGAIN) {
		*cev = gw_xprt_want(c->cli.x, EPOLLIN);
		return false;
	}
	if (rc < 0) {
		int alert = gw_xprt_tls_peer_alert(c->cli.x);
		enum gw_reason why = alert == 42 || alert == 48 ? GW_R_CLIENT_REJECTED_CERT
							       : GW_R_CLIENT_TLS_FAILED;

		gw_log_info("%s %s: intercept %s: %s: %s", c->door->name, c->src, x->dest,
			    gw_reason_name(why), gw_xprt_tls_error(c->cli.x));
		gw_conn_tls_handshake(c, false, why);
		gw_conn_close(c, why);
		return false;
	}
	gw_conn_tls_handshake(c, false, GW_R_NONE);
	/* The CONNECT's line; each request inside gets its own. */
	gw_conn_log(c, GW_R_NONE);
	x->intercept = true;
	/* The handshake's deadline runs on until the first request's bytes
	 * start the exchange's own. */
	x->deadline_fixed = false;
	if (x->up_fail != GW_R_NONE) {
		gw_conn_req_begin(c, "-");
		snprintf(c->req.host, sizeof(c->req.host), "%s", x->dest);
		c->req.port = x->dest_port;
		gw_h1x_refuse(x, 502, x->up_fail, "%s:%u: %s", x->dest, x->dest_port, x->up_err);
		return true;
	}
	/* The origin's connection carries the first request. */
	x->u_idle = true;
	snprintf(x->u_host, sizeof(x->u_host), "%s", x->dest);
	x->u_port = x->dest_port;
	x->u_client = c->client_idx;
	x->u_tls = true;
	snprintf(x->u_addr, sizeof(x->u_addr), "%s", c->req.upstream);
	gw_h1_parser_init(&x->parser, GW_H1_REQUEST, gw_conn_gateway(c)->max_header_bytes);
	gw_conn_set_state(c, H1X_HEAD);
	return true;
}

bool
gw_intercept_run(struct gw_h1x *x, uint32_t *cev, uint32_t *uev)
{
	switch ((enum gw_h1x_state)x->base.state) {
	case H1X_TLS_UP:
		return run_up(x, uev);
	case H1X_TLS_HELLO:
		return run_hello(x, cev);
	case H1X_TLS_DOWN:
		return run_down(x, cev);
	case H1X_SNI_PEEK:
		return run_peek(x, cev);
	default:
		return false;
	}
}

/* ---- requests inside ---- */

int
gw_intercept_route(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	const struct gw_h1_header *hh = gw_h1_header_find(&x->reqh, "Host");
	struct gw_h1_error terr = { 0 };

	/* (TRACE and TRACK: refused for every door by the exchange.) */
	if (gw_h1_method_ieq(&x->reqh, "CONNECT")) {
		gw_h1x_refuse(x, 405, GW_R_METHOD_NOT_ALLOWED, "%.*s is not relayed here",
			      (int)x->reqh.method.len, x->reqh.method.p);
		return -1;
	}
	if (gw_h1_target_parse(x->reqh.target.p, x->reqh.target.len, x->reqh.method_id,
			       &x->target, &terr) < 0) {
		gw_h1x_refuse(x, 400, terr.reason, "bad request-target: %s", terr.msg);
		return -1;
	}
	if (x->target.form != GW_H1_TARGET_ORIGIN) {
		gw_h1x_refuse(x, 400, GW_R_BAD_REQUEST, "inside the tunnel, requests are origin-form");
		return -1;
	}
	/* Host: D, or D:port; the port only as the CONNECT named it. */
	if (hh && gw_h1_header_next(&x->reqh, hh, "Host"))
		hh = NULL;
	if (gw_bind_host(x->dest, x->dest_port, hh ? hh->value.p : NULL,
			 hh ? hh->value.len : 0) != GW_R_NONE) {
		snprintf(c->req.host, sizeof(c->req.host), "%s", x->dest);
		c->req.port = x->dest_port;
		gw_h1x_refuse(x, 421, GW_R_HOST_MISMATCH, "Host must be %s:%u here", x->dest,
			      x->dest_port);
		return -1;
	}
	snprintf(c->req.host, sizeof(c->req.host), "%s", x->dest);
	c->req.port = x->dest_port;
	x->up_tls = true;
	x->target.port_explicit = x->dest_port != 443;
	x->target.port = x->dest_port;
	return gw_h1x_check_host(x);
}

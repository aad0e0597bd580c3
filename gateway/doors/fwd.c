/* fwd.c: the forward door: TCP transport + the HTTP/1.1 exchange.
 *
 * What is the forward door's own is who asks and where a request goes:
 * a host door's static clients are known by source address or
 * Proxy-Authorization (Basic), a lane door's sandboxes by source address
 * (asked again for every request, so that a lock takes effect at the
 * next); requests are absolute-form or CONNECT, and on a lane door also
 * origin-form (transparent port 80), routed by Host. Everything else,
 * from the head to keep-alive and upgrades, is the exchange's
 * (exchange.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "conf.h"
#include "conn.h"
#include "exchange.h"
#include "fwd.h"
#include "http1.h"
#include "intercept.h"
#include "lanes.h"
#include "log.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "worker.h"

struct fwd_conn {
	struct gw_h1x x;
	char hostbuf[GW_HOST_MAX + 16]; /* origin-form: the Host value */
};

/* ---- identity and policy ---- */

/* A lane door: the sandbox by source address, asked for every request so
 * that a lock takes effect at the next one. */
static int
fwd_identify_lane(struct fwd_conn *f)
{
	struct gw_conn *c = &f->x.base;
	int rc;

	gw_who_clear(&c->who);
	rc = gw_lane_who(c->lane, (const struct sockaddr *)&c->peer, &c->who);
	if (rc == -EACCES) {
		gw_h1x_refuse(&f->x, 403, GW_R_SANDBOX_LOCKED, "sandbox %s is locked", c->who.name);
		return -1;
	}
	if (rc < 0) {
		gw_h1x_refuse(&f->x, 403, GW_R_NOT_A_SANDBOX, "%s is no sandbox of this lane", c->src);
		return -1;
	}
	c->policy = c->who.policy;
	return 0;
}

/* Finds the client: by source address, else by Proxy-Authorization.
 * Returns 0, or refuses and returns -1. */
static int
fwd_identify(struct fwd_conn *f)
{
	struct gw_conn *c = &f->x.base;
	const struct gw_h1_header *pa = gw_h1_header_find(&f->x.reqh, "Proxy-Authorization");
	char buf[512];
	const char *user, *pass;
	size_t ulen, plen;
	int idx;

	if (c->lane >= 0)
		return fwd_identify_lane(f);
	idx = gw_ident_by_source(c->snap, (const struct sockaddr *)&c->peer);
	if (idx < 0 && pa) {
		if (gw_ident_basic_decode(pa->value.p, pa->value.len, buf, sizeof(buf),
					  &user, &ulen, &pass, &plen) < 0) {
			explicit_bzero(buf, sizeof(buf));
			gw_h1x_refuse(&f->x, 407, GW_R_AUTH_FAILED, "Proxy-Authorization is not valid Basic credentials");
			return -1;
		}
		idx = gw_ident_by_user(c->snap, user, ulen, pass, plen);
		explicit_bzero(buf, sizeof(buf));
		if (idx < 0) {
			gw_h1x_refuse(&f->x, 407, GW_R_AUTH_FAILED, "unknown user or wrong password");
			return -1;
		}
	}
	if (idx < 0) {
		if (gw_ident_has_users(c->snap))
			gw_h1x_refuse(&f->x, 407, GW_R_AUTH_REQUIRED, "give proxy credentials (Basic)");
		else
			gw_h1x_refuse(&f->x, 403, GW_R_UNKNOWN_CLIENT, "%s matches no client", c->src);
		return -1;
	}
	c->client_idx = idx;
	c->policy = c->snap->client_policy[idx];
	return 0;
}

/* Transparent HTTP (a guest's TCP to port 80 redirected to a lane's
 * forward door): an origin-form request is routed by its Host field, which
 * must be there, once, and be a valid authority. */
static int
fwd_route_by_host(struct fwd_conn *f)
{
	const struct gw_h1_header *h = gw_h1_header_find(&f->x.reqh, "Host");
	struct gw_h1_target t;
	struct gw_h1_error terr = { 0 };
	const char *v;
	size_t n;
	bool has_port;

	if (!h || gw_h1_header_next(&f->x.reqh, h, "Host")) {
		gw_h1x_refuse(&f->x, 400, GW_R_BAD_REQUEST,
			   h ? "more than one Host field" : "an origin-form request needs a Host field");
		return -1;
	}
	v = h->value.p;
	n = h->value.len;
	if (n == 0 || n + 4 >= sizeof(f->hostbuf)) {
		gw_h1x_refuse(&f->x, 400, GW_R_BAD_HOST, "bad Host field");
		return -1;
	}
	/* "host", "host:port", "[v6]" or "[v6]:port": add the default port
	 * so that the authority parser, which wants one, can check it. */
	has_port = v[n - 1] != ']' && memchr(v, ':', n) &&
		   (v[0] == '[' || memchr(v, ':', n) == memrchr(v, ':', n));
	memcpy(f->hostbuf, v, n);
	if (!has_port) {
		memcpy(f->hostbuf + n, ":80", 3);
		n += 3;
	}
	f->hostbuf[n] = '\0';
	if (gw_h1_target_parse(f->hostbuf, n, GW_H1_M_CONNECT, &t, &terr) < 0 ||
	    t.form != GW_H1_TARGET_AUTHORITY) {
		gw_h1x_refuse(&f->x, 400, terr.reason ? terr.reason : GW_R_BAD_HOST, "bad Host field: %s",
			   terr.msg ? terr.msg : "not host[:port]");
		return -1;
	}
	f->x.target.form = GW_H1_TARGET_ABSOLUTE;
	f->x.target.scheme = GW_H1_SCHEME_HTTP;
	f->x.target.host = t.host;
	f->x.target.host_ipv6 = t.host_ipv6;
	f->x.target.port = t.port;
	f->x.target.port_explicit = has_port;
	return 0;
}

/* The forward door's part of a request (gw_h1x_route_fn): who, where,
 * and the policy's word. */
static int
fwd_route(struct gw_h1x *x)
{
	struct fwd_conn *f = (struct fwd_conn *)(void *)x;
	struct gw_conn *c = &x->base;
	struct gw_h1_error terr = { 0 };
	enum gw_reason why;

	c->policy = NULL;
	c->client_idx = -1;
	if (gw_h1_target_parse(x->reqh.target.p, x->reqh.target.len, x->reqh.method_id,
			       &x->target, &terr) < 0) {
		gw_h1x_refuse(x, 400, terr.reason, "bad request-target: %s", terr.msg);
		return -1;
	}
	if (c->lane >= 0 && x->target.form == GW_H1_TARGET_ORIGIN && fwd_route_by_host(f) < 0)
		return -1;
	if (!x->is_connect && x->target.form != GW_H1_TARGET_ABSOLUTE &&
	    !(c->lane >= 0 && x->target.form == GW_H1_TARGET_ORIGIN)) {
		gw_h1x_refuse(x, 400, GW_R_BAD_REQUEST,
			   "not a proxy request: use an absolute URL (http://host/path) or CONNECT");
		return -1;
	}
	/* An https:// URL sent in the clear: sluice makes the TLS connection
	 * to the origin itself (verified as for an intercepted host). */
	x->up_tls = x->target.scheme == GW_H1_SCHEME_HTTPS;
	if (x->up_tls && !c->w->tls_client) {
		gw_h1x_refuse(x, 501, GW_R_UNSUPPORTED,
			   "https:// URLs need sluice's TLS, which is off here: use CONNECT");
		return -1;
	}
	if (gw_host_normalize(x->target.host.p, x->target.host.len, c->req.host, sizeof(c->req.host),
			      &why) < 0) {
		c->req.host[0] = '\0';
		gw_h1x_refuse(x, 400, why, "bad host in the request-target");
		return -1;
	}
	c->req.port = x->target.port;
	if (fwd_identify(f) < 0)
		return -1;
	if (x->is_connect && gw_intercept_literal(x))
		return 1;
	if (gw_h1x_check_host(x) < 0)
		return -1;
	return 0;
}

static const struct gw_door fwd_door = GW_H1X_DOOR("forward", struct fwd_conn);

void
gw_fwd_accept(struct gw_worker *w, int fd, int lane)
{
	struct gw_conn *c = gw_conn_accept(w, fd, lane, &fwd_door);

	if (c)
		gw_h1x_start((struct gw_h1x *)(void *)c, fwd_route);
}

/* socks.c: the SOCKS5 door (RFC 1928, RFC 1929).
 *
 *   GREETING ──▶ AUTH ──▶ REQUEST ──▶ DIALING ──▶ TUNNEL
 *       │         │          │           │
 *       └─────────┴──────────┴───────────┴──▶ REFUSE (reply, close)
 *
 * The same connection core (conn.h: accept, identity, dial, tunnel,
 * teardown, access line) as the other doors; only the framing differs. A
 * client matched by source address may use no authentication; otherwise it
 * must authenticate as a static client with a user and password.
 *
 * Optimistic clients send the greeting, the authentication, the request
 * and the first payload without waiting for our replies (RFC 1928 does
 * not forbid it): what arrives past a message is kept for the next one,
 * and what arrives past the request is held, never read as anything,
 * until the request is allowed and its upstream connected; then it is the
 * tunnel's first bytes (or, intercepted, the guest's hello). A refusal
 * drops it unsent. Bytes still in the socket wait there meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "conf.h"
#include "conn.h"
#include "dial.h"
#include "intercept.h"
#include "lanes.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "socks.h"
#include "socks5.h"
#include "tunnel.h"
#include "worker.h"

#define SOCKS_HANDSHAKE_MS 30000
#define SOCKS_IN 600            /* the largest message is 513 bytes (auth) */

#define SOCKS_STATES(X)                                                      \
	X(GREETING, "greeting")                                              \
	X(AUTH, "auth")                                                      \
	X(REQUEST, "request")                                                \
	X(DIALING, "dialing")                                                \
	X(TUNNEL, "tunnel")                                                  \
	X(REFUSE, "refuse")

enum socks_state {
#define SOCKS_STATE_ENUM(id, name) SOCKS_##id,
	SOCKS_STATES(SOCKS_STATE_ENUM)
#undef SOCKS_STATE_ENUM
};

static const char *const socks_state_names[] = {
#define SOCKS_STATE_NAME(id, name) name,
	SOCKS_STATES(SOCKS_STATE_NAME)
#undef SOCKS_STATE_NAME
};

struct socks_conn {
	struct gw_conn base;
	struct gw_socks5_parser parser;
	int source_client;      /* matched by source address, or -1 */
	int lane_rc;            /* lane doors: gw_lane_who()'s answer */
	uint8_t out[32];        /* a reply being written */
	size_t outlen;
	size_t outpos;
	bool close_after_reply;
	/* Read, not used yet: in[inpos, inlen). The rest of a message, the
	 * next one, or after the request the held first payload. */
	uint8_t in[SOCKS_IN];
	size_t inpos, inlen;
};

/* Forgets what the client sent ahead: the connection is refused. */
static void
socks_drop_held(struct socks_conn *s)
{
	explicit_bzero(s->in, sizeof(s->in));
	s->inpos = s->inlen = 0;
}

/* A request was read (or could not be): its access line is owed. The
 * handshake's bytes so far are the line's. */
static void
socks_req_begin(struct gw_conn *c)
{
	c->req.open = true;
	c->req.t_start = gw_loop_now(c->w->loop);
}

/* Sends a final reply (rep) and closes after it; why goes to the log. */
static void
socks_refuse(struct socks_conn *s, uint8_t rep, enum gw_reason why, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
socks_refuse(struct socks_conn *s, uint8_t rep, enum gw_reason why, const char *fmt, ...)
{
	struct gw_conn *c = &s->base;
	char detail[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	gw_log_debug("socks %s: refused (%s): %s", c->src, gw_socks5_rep_name(rep), detail);
	c->req.status = rep;
	c->req.reason = why;
	/* 0x03..0x06 are failures on the way, after the policy allowed. */
	c->req.denied = rep == GW_SOCKS5_REP_NOT_ALLOWED || rep == GW_SOCKS5_REP_GENERAL_FAILURE ||
			rep == GW_SOCKS5_REP_CMD_UNSUPPORTED || rep == GW_SOCKS5_REP_ATYP_UNSUPPORTED;
	n = gw_socks5_reply(s->out, sizeof(s->out), rep, NULL);
	s->outlen = n > 0 ? (size_t)n : 0;
	s->outpos = 0;
	s->close_after_reply = true;
	/* What came after the request goes nowhere. */
	socks_drop_held(s);
	/* The client may have sent more than we read: drain it on closing,
	 * so that the close does not reset the connection over our reply. */
	c->drain = true;
	gw_dial_cancel(&c->dial);
	gw_conn_set_state(c, SOCKS_REFUSE);
}

/* Queues a short handshake reply (method choice, auth status). */
static void
socks_say(struct socks_conn *s, const uint8_t *p, size_t n, bool then_close)
{
	memcpy(s->out, p, n);
	s->outlen = n;
	s->outpos = 0;
	s->close_after_reply = then_close;
	if (then_close) {
		/* A refusal: what the client sent ahead goes nowhere, and
		 * what it is still sending is drained so that our close does
		 * not reset the connection over the reply. */
		socks_drop_held(s);
		s->base.drain = true;
	}
}

/* Writes the pending reply. 1 done, 0 blocked, -1 failed (closed). */
static int
socks_flush(struct socks_conn *s)
{
	struct gw_conn *c = &s->base;

	while (s->outpos < s->outlen) {
		ssize_t n = gw_xprt_send(c->cli.x, s->out + s->outpos, s->outlen - s->outpos);

		if (n == -EAGAIN)
			return 0;
		if (n < 0) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return -1;
		}
		s->outpos += (size_t)n;
		c->req.bytes_out += (uint64_t)n;
	}
	s->outpos = s->outlen = 0;
	if (s->close_after_reply) {
		gw_conn_close(c, c->req.reason);
		return -1;
	}
	return 1;
}

/* ---- the request ---- */

static void
socks_dialed(struct gw_conn *c, enum gw_reason why, int err, const char *detail)
{
	struct socks_conn *s = gw_conn_door(c, struct socks_conn);
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	int n;

	if (why != GW_R_NONE) {
		uint8_t rep = err && why == GW_R_CONNECT_FAILED ? gw_socks5_rep_for_errno(err)
							       : gw_socks5_rep_for(why);

		socks_refuse(s, rep, why, "%s", detail);
		c->door->run(c);
		return;
	}
	/* BND.ADDR: the address the gateway connected from, as RFC 1928 asks. */
	if (getsockname(c->up.tcp.fd, (struct sockaddr *)&bound, &bl) < 0)
		memset(&bound, 0, sizeof(bound));
	n = gw_socks5_reply(s->out, sizeof(s->out), GW_SOCKS5_REP_SUCCEEDED,
			    bound.ss_family ? (struct sockaddr *)&bound : NULL);
	c->req.status = GW_SOCKS5_REP_SUCCEEDED;
	gw_conn_disarm(c);
	/* The success reply goes out through the tunnel, first. */
	gw_conn_tunnel_start(c);
	gw_conn_tunnel_gate(c);
	gw_conn_set_state(c, SOCKS_TUNNEL);
	/* Then what the client sent ahead of our reply, allowed now: first
	 * upstream, through the tunnel's hello gate like anything it sends
	 * later (counted already, in the handshake's bytes). */
	if (n < 0 ||
	    gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, (const char *)s->out, (size_t)n, false) < 0 ||
	    gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, (const char *)s->in + s->inpos,
			      s->inlen - s->inpos, true) < 0) {
		gw_conn_close(c, GW_R_INTERNAL);
		return;
	}
	socks_drop_held(s);
	c->door->run(c);
}

/* Hands the connection to the intercepting exchange, with what the
 * client sent ahead of our reply (the start of its hello): copied, as the
 * hand-over may free s before it reads them. */
static void
socks_intercept(struct socks_conn *s)
{
	uint8_t pre[SOCKS_IN];
	size_t n = s->inlen - s->inpos;

	memcpy(pre, s->in + s->inpos, n);
	gw_conn_disarm(&s->base);
	gw_intercept_enter(&s->base, GW_WAY_SOCKS5, pre, n);
	explicit_bzero(pre, n);
}

/* A request was parsed: identity is settled; check and dial. */
static void
socks_request(struct socks_conn *s, const struct gw_socks5_request *req)
{
	struct gw_conn *c = &s->base;
	struct gw_policy_decision d;
	enum gw_reason why;
	char raw[GW_SOCKS5_MAX_FIELD + 1];
	size_t rawlen;

	socks_req_begin(c);
	c->req.port = req->port;
	/* (Only a CONNECT parses: the parser refuses any other command.) */
	if (req->atyp == GW_SOCKS5_ATYP_DOMAIN) {
		rawlen = req->host_len;
		memcpy(raw, req->host, rawlen);
	} else {
		inet_ntop(req->atyp == GW_SOCKS5_ATYP_IPV4 ? AF_INET : AF_INET6, req->addr, raw,
			  sizeof(raw));
		rawlen = strlen(raw);
	}
	raw[rawlen] = '\0';
	if (gw_host_normalize(raw, rawlen, c->req.host, sizeof(c->req.host), &why) < 0) {
		snprintf(c->req.host, sizeof(c->req.host), "-");
		socks_refuse(s, gw_socks5_rep_for(why), why, "bad host in the request");
		return;
	}
	if (gw_policy_check(c->policy, c->req.host, c->req.port, &d) < 0) {
		if (req->atyp != GW_SOCKS5_ATYP_DOMAIN && gw_intercept_literal_wanted(c, NULL)) {
			/* An address the client resolved itself: its hello's
			 * server name may say where it goes (intercept.h). */
			socks_intercept(s);
			return;
		}
		socks_refuse(s, gw_socks5_rep_for(d.reason), d.reason,
			     "%s:%u refused by policy '%s'", c->req.host, c->req.port,
			     gw_policy_name(c->policy));
		return;
	}
	c->req.report_only = d.report_only;
	c->req.report_reason = d.reason;
	if (gw_intercept_wants(c, c->req.host, c->req.port)) {
		/* The intercepting exchange dials and answers from here. */
		socks_intercept(s);
		return;
	}
	gw_conn_set_state(c, SOCKS_DIALING);
	gw_conn_dial(c, c->req.host, c->req.port, socks_dialed);
}

/* ---- the engine ---- */

/* Parses what the client sent in the current handshake phase: what is
 * left of the last read, or a new one. Returns true to go on. */
static bool
socks_handshake(struct socks_conn *s)
{
	struct gw_conn *c = &s->base;
	const uint8_t *in;
	uint8_t reply[2];
	size_t used = 0, n;
	enum gw_socks5_result r;

	if (s->inpos == s->inlen) {
		ssize_t k = gw_xprt_recv(c->cli.x, s->in, sizeof(s->in));

		if (k == -EAGAIN)
			return false;
		if (k <= 0) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
		c->req.bytes_in += (uint64_t)k;
		s->inpos = 0;
		s->inlen = (size_t)k;
	}
	in = s->in + s->inpos;
	n = s->inlen - s->inpos;
	switch (c->state) {
	case SOCKS_GREETING: {
		const struct gw_socks5_greeting *g;
		uint8_t m;

		r = gw_socks5_parse_greeting(&s->parser, in, n, &used, &g);
		s->inpos += used;
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR) {
			gw_log_debug("socks %s: bad greeting: %s", c->src, s->parser.err.msg);
			gw_conn_close(c, GW_R_BAD_REQUEST);
			return false;
		}
		if (c->lane >= 0) {
			/* A lane door: the source address is the identity;
			 * there is nothing to authenticate. */
			m = s->lane_rc == 0 ? gw_socks5_choose_method(g, true, false)
					    : GW_SOCKS5_METHOD_NONE;
			if (s->lane_rc < 0) {
				gw_socks5_method_reply(reply, m);
				c->req.reason = s->lane_rc == -EACCES ? GW_R_SANDBOX_LOCKED
								  : GW_R_NOT_A_SANDBOX;
				gw_log_info("socks %s: refused: %s%s%s", c->src,
					    gw_reason_name(c->req.reason), c->who.name[0] ? " " : "",
					    c->who.name);
				socks_say(s, reply, 2, true);
				return true;
			}
		} else {
			m = gw_socks5_choose_method(g, s->source_client >= 0,
						    gw_ident_has_users(c->snap));
		}
		gw_socks5_method_reply(reply, m);
		if (m == GW_SOCKS5_METHOD_NONE) {
			c->req.reason = s->source_client < 0 && c->lane < 0 ? GW_R_AUTH_REQUIRED
									  : GW_R_UNSUPPORTED;
			gw_log_debug("socks %s: no acceptable method offered", c->src);
			socks_say(s, reply, 2, true);
			return true;
		}
		socks_say(s, reply, 2, false);
		if (m == GW_SOCKS5_METHOD_NOAUTH && c->lane >= 0) {
			c->policy = c->who.policy;
			gw_conn_set_state(c, SOCKS_REQUEST);
		} else if (m == GW_SOCKS5_METHOD_NOAUTH) {
			c->client_idx = s->source_client;
			c->policy = c->snap->client_policy[c->client_idx];
			gw_conn_set_state(c, SOCKS_REQUEST);
		} else {
			gw_conn_set_state(c, SOCKS_AUTH);
		}
		return true;
	}
	case SOCKS_AUTH: {
		const struct gw_socks5_auth *a;
		int idx;

		r = gw_socks5_parse_auth(&s->parser, in, n, &used, &a);
		s->inpos += used;
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR) {
			gw_socks5_auth_reply(reply, false);
			c->req.reason = GW_R_BAD_REQUEST;
			socks_say(s, reply, 2, true);
			return true;
		}
		idx = gw_ident_by_user(c->snap, a->user, a->user_len, a->pass, a->pass_len);
		gw_socks5_forget_password(&s->parser);
		gw_socks5_auth_reply(reply, idx >= 0);
		if (idx < 0) {
			gw_log_info("socks %s: authentication failed", c->src);
			c->req.reason = GW_R_AUTH_FAILED;
			socks_say(s, reply, 2, true);
			return true;
		}
		c->client_idx = idx;
		c->policy = c->snap->client_policy[idx];
		socks_say(s, reply, 2, false);
		gw_conn_set_state(c, SOCKS_REQUEST);
		return true;
	}
	case SOCKS_REQUEST: {
		const struct gw_socks5_request *req;

		r = gw_socks5_parse_request(&s->parser, in, n, &used, &req);
		s->inpos += used;
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR) {
			socks_req_begin(c);
			snprintf(c->req.method, sizeof(c->req.method), "%s",
				 gw_socks5_cmd_name(s->parser.req.cmd));
			snprintf(c->req.host, sizeof(c->req.host), "-");
			socks_refuse(s, s->parser.err.has_rep ? s->parser.err.rep
							       : GW_SOCKS5_REP_GENERAL_FAILURE,
				     s->parser.err.reason, "%s", s->parser.err.msg);
			return true;
		}
		/* in[inpos, inlen) is held: the client's first payload. */
		socks_request(s, req);
		return true;
	}
	default:
		return false;
	}
}

static void
socks_run(struct gw_conn *c)
{
	struct socks_conn *s = gw_conn_door(c, struct socks_conn);

	for (int rounds = 0; rounds < 8; rounds++) {
		switch ((enum socks_state)c->state) {
		case SOCKS_GREETING:
		case SOCKS_AUTH:
		case SOCKS_REQUEST: {
			int rc = socks_flush(s);

			if (rc < 0)
				return;
			if (rc == 0) {
				gw_conn_watch(c, EPOLLOUT, 0);
				return;
			}
			if (!socks_handshake(s)) {
				gw_conn_watch(c, EPOLLIN, 0);
				return;
			}
			if (c->closed)
				return;
			continue;
		}
		case SOCKS_DIALING:
			/* Nothing may arrive before our reply; what does is
			 * found when the dial ends (socks_dialed looks). */
			gw_conn_watch(c, 0, 0);
			return;
		case SOCKS_REFUSE:
			if (socks_flush(s) == 0)
				gw_conn_watch(c, EPOLLOUT, 0);
			return;
		case SOCKS_TUNNEL:
			gw_conn_tunnel_run(c);
			return;
		}
	}
	/* A fair share done: come back when the loop says so. */
	gw_conn_watch(c, EPOLLIN | EPOLLOUT, EPOLLIN | EPOLLOUT);
}

static void
socks_fini(struct gw_conn *c)
{
	struct socks_conn *s = gw_conn_door(c, struct socks_conn);

	gw_socks5_parser_wipe(&s->parser);
	socks_drop_held(s);
}

static void
socks_busy(int fd, const char *src, enum gw_reason why)
{
	/* RFC 1928 has no "busy" before the greeting: close. */
	gw_log_warnx("socks door: refusing a connection: %s (from %s)", gw_reason_name(why), src);
	close(fd);
}

static const struct gw_door socks_door = {
	.name = "socks", .states = socks_state_names, .size = sizeof(struct socks_conn),
	.run = socks_run, .fini = socks_fini, .busy = socks_busy,
};

void
gw_socks_accept(struct gw_worker *w, int fd, int lane)
{
	struct gw_conn *c = gw_conn_accept(w, fd, lane, &socks_door);
	struct socks_conn *s;

	if (!c)
		return;
	s = gw_conn_door(c, struct socks_conn);
	gw_socks5_parser_init(&s->parser);
	snprintf(c->req.method, sizeof(c->req.method), "CONNECT");
	if (lane >= 0) {
		s->source_client = -1;
		s->lane_rc = gw_lane_who(lane, (struct sockaddr *)&c->peer, &c->who);
	} else {
		s->source_client = gw_ident_by_source(c->snap, (struct sockaddr *)&c->peer);
	}
	/* The whole handshake, not each step, has a deadline. */
	gw_conn_arm(c, SOCKS_HANDSHAKE_MS);
	socks_run(c);
}

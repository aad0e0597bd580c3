/* socks.c: the SOCKS5 door (RFC 1928, RFC 1929).
 *
 *   GREETING ──▶ AUTH ──▶ REQUEST ──▶ DIALING ──▶ TUNNEL
 *       │         │          │           │
 *       └─────────┴──────────┴───────────┴──▶ REFUSE (reply, close)
 *
 * The same identity, policy, dial path, limits, tunnel and access log as
 * the forward door; only the framing differs. A client matched by source
 * address may use no authentication; otherwise it must authenticate as a
 * static client with a user and password. Every message must wait for our
 * reply: a byte past a message before the reply is an error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access.h"
#include "addr.h"
#include "conf.h"
#include "dial.h"
#include "log.h"
#include "loop.h"
#include "lanes.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "socks.h"
#include "socks5.h"
#include "tunnel.h"
#include "worker.h"

#define SOCKS_HANDSHAKE_MS 30000
#define SOCKS_IN 600            /* the largest message is 262 bytes */

#define SOCKS_STATES(X)                                                      \
	X(GREETING, "greeting")                                              \
	X(AUTH, "auth")                                                      \
	X(REQUEST, "request")                                                \
	X(DIALING, "dialing")                                                \
	X(TUNNEL, "tunnel")                                                  \
	X(REFUSE, "refuse")                                                  \
	X(CLOSED, "closed")

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

struct gw_socks_conn {
	struct gw_worker *w;
	struct gw_conn_node node;       /* on the worker's list */
	enum socks_state state;
	struct gw_snap *snap;
	int cfd;
	int ufd;
	struct gw_io cio;
	struct gw_io uio;
	struct gw_timer timer;
	struct gw_defer defer;
	struct gw_dial dial;
	struct gw_tunnel tun;
	struct gw_socks5_parser parser;

	char src[GW_ADDR_FMT_MAX];
	struct sockaddr_storage peer;
	int source_client;      /* matched by source address, or -1 */
	int client_idx;
	int lane;               /* -1: a host door */
	int lane_rc;            /* lane doors: gw_lane_who()'s answer */
	struct gw_who who;      /* lane doors: the sandbox */
	const struct gw_policy *policy;

	uint8_t out[32];        /* a reply being written */
	size_t outlen;
	size_t outpos;
	bool close_after_reply;

	char host[GW_HOST_MAX];
	uint16_t port;
	bool requested;         /* a request was parsed: log a line */
	bool report_only;
	enum gw_reason report_reason;
	enum gw_reason reason;  /* why refused, for the access line */
	uint8_t rep;
	bool denied;
	char upstream[GW_ADDR_FMT_MAX];
	uint64_t t_start;
	uint64_t bytes_in;
	uint64_t bytes_out;
};

static void socks_run(struct gw_socks_conn *c);
static void socks_io(struct gw_loop *l, struct gw_io *io, uint32_t events);

static void
socks_set_state(struct gw_socks_conn *c, enum socks_state s)
{
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("socks %s: %s -> %s", c->src, socks_state_names[c->state],
			     socks_state_names[s]);
	c->state = s;
}

static const struct conf_gateway *
gwconf(const struct gw_socks_conn *c)
{
	return &c->snap->conf->gateway;
}

static void
socks_log(struct gw_socks_conn *c)
{
	const struct conf_gateway *g = gwconf(c);
	struct gw_access a = {
		.door = "socks",
		.client = c->client_idx >= 0 ? g->clients[c->client_idx].name
			  : c->who.name[0]  ? c->who.name
					    : NULL,
		.src = c->src,
		.policy = c->policy ? gw_policy_name(c->policy) : NULL,
		.method = "CONNECT",
		.host = c->host[0] ? c->host : NULL,
		.port = c->port,
		.decision = c->denied ? "deny" : c->report_only ? "report" : "allow",
		.reason = c->reason == GW_R_NONE && c->report_only ? c->report_reason : c->reason,
		.upstream = c->upstream[0] ? c->upstream : NULL,
		.status = c->rep,
		.bytes_in = c->bytes_in,
		.bytes_out = c->bytes_out,
		.duration_ms = gw_loop_now(c->w->loop) - c->t_start,
	};

	if (!c->requested)
		return;
	c->requested = false;
	gw_access_write(&a);
}

static void
socks_free(void *arg)
{
	struct gw_socks_conn *c = arg;

	gw_who_clear(&c->who);
	gw_snap_unref(c->snap);
	free(c);
}

/* The one way a connection ends. */
static void
socks_close(struct gw_socks_conn *c, enum gw_reason why)
{
	struct gw_worker *w = c->w;

	if (c->state == SOCKS_CLOSED)
		return;
	if (c->state == SOCKS_TUNNEL) {
		/* The handshake's bytes, then the tunnel's (our success
		 * reply is the first of those). */
		c->bytes_in += c->tun.dir[GW_TUNNEL_C2U].bytes;
		c->bytes_out += c->tun.dir[GW_TUNNEL_U2C].bytes;
		if (c->reason == GW_R_NONE)
			c->reason = why;
		gw_tunnel_fini(&c->tun);
	} else if (c->reason == GW_R_NONE) {
		c->reason = why;
	}
	socks_log(c);
	gw_dial_cancel(&c->dial);
	gw_timer_cancel(w->loop, &c->timer);
	gw_io_del(w->loop, &c->cio);
	close(c->cfd);
	if (c->ufd >= 0) {
		gw_io_del(w->loop, &c->uio);
		close(c->ufd);
	}
	gw_socks5_parser_wipe(&c->parser);
	socks_set_state(c, SOCKS_CLOSED);
	gw_worker_conn_leave(w, &c->node);
	gw_defer(w->loop, &c->defer, socks_free, c);
}

static void
socks_shutdown(struct gw_conn_node *n)
{
	socks_close(gw_conn_of(n, struct gw_socks_conn), GW_R_SHUTDOWN);
}

/* Sends a final reply (rep) and closes after it; why goes to the log. */
static void
socks_refuse(struct gw_socks_conn *c, uint8_t rep, enum gw_reason why, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
socks_refuse(struct gw_socks_conn *c, uint8_t rep, enum gw_reason why, const char *fmt, ...)
{
	char detail[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	gw_log_debug("socks %s: refused (%s): %s", c->src, gw_socks5_rep_name(rep), detail);
	c->rep = rep;
	c->reason = why;
	/* 0x03..0x06 are failures on the way, after the policy allowed. */
	c->denied = rep == GW_SOCKS5_REP_NOT_ALLOWED || rep == GW_SOCKS5_REP_GENERAL_FAILURE ||
		    rep == GW_SOCKS5_REP_CMD_UNSUPPORTED || rep == GW_SOCKS5_REP_ATYP_UNSUPPORTED;
	n = gw_socks5_reply(c->out, sizeof(c->out), rep, NULL);
	c->outlen = n > 0 ? (size_t)n : 0;
	c->outpos = 0;
	c->close_after_reply = true;
	gw_dial_cancel(&c->dial);
	socks_set_state(c, SOCKS_REFUSE);
}

/* Queues a short handshake reply (method choice, auth status). */
static void
socks_say(struct gw_socks_conn *c, const uint8_t *p, size_t n, bool then_close)
{
	memcpy(c->out, p, n);
	c->outlen = n;
	c->outpos = 0;
	c->close_after_reply = then_close;
}

/* Writes the pending reply. 1 done, 0 blocked, -1 failed (closed). */
static int
socks_flush(struct gw_socks_conn *c)
{
	while (c->outpos < c->outlen) {
		ssize_t n = send(c->cfd, c->out + c->outpos, c->outlen - c->outpos, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			socks_close(c, GW_R_CLIENT_CLOSED);
			return -1;
		}
		c->outpos += (size_t)n;
		c->bytes_out += (uint64_t)n;
	}
	c->outpos = c->outlen = 0;
	if (c->close_after_reply) {
		socks_close(c, c->reason);
		return -1;
	}
	return 1;
}

/* ---- the request ---- */

static void
socks_dialed(struct gw_dial *d, int fd, enum gw_reason why, int err, const char *detail, void *arg)
{
	struct gw_socks_conn *c = arg;
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	int n;

	snprintf(c->upstream, sizeof(c->upstream), "%s", d->upstream);
	if (fd < 0) {
		uint8_t rep = err && why == GW_R_CONNECT_FAILED ? gw_socks5_rep_for_errno(err)
							       : gw_socks5_rep_for(why);

		socks_refuse(c, rep, why, "%s", detail);
		socks_run(c);
		return;
	}
	c->ufd = fd;
	/* Nothing may arrive before our reply: bytes sent while we dialled
	 * would otherwise go upstream unchecked as the tunnel's first. */
	{
		char b;

		if (recv(c->cfd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 || errno != EAGAIN) {
			close(fd);
			c->ufd = -1;
			socks_refuse(c, GW_SOCKS5_REP_GENERAL_FAILURE, GW_R_BAD_REQUEST,
				     "bytes after the request before our reply");
			socks_run(c);
			return;
		}
	}
	/* BND.ADDR: the address the gateway connected from, as RFC 1928 asks. */
	if (getsockname(fd, (struct sockaddr *)&bound, &bl) < 0)
		memset(&bound, 0, sizeof(bound));
	n = gw_socks5_reply(c->out, sizeof(c->out), GW_SOCKS5_REP_SUCCEEDED,
			    bound.ss_family ? (struct sockaddr *)&bound : NULL);
	c->rep = GW_SOCKS5_REP_SUCCEEDED;
	gw_timer_cancel(c->w->loop, &c->timer);
	/* The success reply goes out through the tunnel, first. */
	gw_tunnel_init(&c->tun, c->cfd, c->ufd, c->w->use_splice);
	socks_set_state(c, SOCKS_TUNNEL);
	if (n < 0 || gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, (const char *)c->out, (size_t)n) < 0 ||
	    gw_io_add(c->w->loop, &c->uio, fd, 0, socks_io, c) < 0) {
		socks_close(c, GW_R_INTERNAL);
		return;
	}
	socks_run(c);
}

/* A request was parsed: identity is settled; check and dial. */
static void
socks_request(struct gw_socks_conn *c, const struct gw_socks5_request *req)
{
	struct gw_policy_decision d;
	enum gw_reason why;
	char raw[GW_SOCKS5_MAX_FIELD + 1];
	size_t rawlen;

	c->requested = true;
	c->t_start = gw_loop_now(c->w->loop);
	c->port = req->port;
	if (req->cmd != GW_SOCKS5_CMD_CONNECT) {
		snprintf(c->host, sizeof(c->host), "-");
		socks_refuse(c, GW_SOCKS5_REP_CMD_UNSUPPORTED, GW_R_UNSUPPORTED,
			     "%s is not supported: only CONNECT",
			     req->cmd == GW_SOCKS5_CMD_BIND ? "BIND" : "UDP ASSOCIATE");
		return;
	}
	if (req->atyp == GW_SOCKS5_ATYP_DOMAIN) {
		rawlen = req->host_len;
		memcpy(raw, req->host, rawlen);
	} else {
		inet_ntop(req->atyp == GW_SOCKS5_ATYP_IPV4 ? AF_INET : AF_INET6, req->addr, raw,
			  sizeof(raw));
		rawlen = strlen(raw);
	}
	raw[rawlen] = '\0';
	if (gw_host_normalize(raw, rawlen, c->host, sizeof(c->host), &why) < 0) {
		snprintf(c->host, sizeof(c->host), "-");
		socks_refuse(c, gw_socks5_rep_for(why), why, "bad host in the request");
		return;
	}
	if (gw_policy_check(c->policy, c->host, c->port, &d) < 0) {
		socks_refuse(c, gw_socks5_rep_for(d.reason), d.reason, "%s:%u refused by policy '%s'",
			     c->host, c->port, gw_policy_name(c->policy));
		return;
	}
	c->report_only = d.report_only;
	c->report_reason = d.reason;
	socks_set_state(c, SOCKS_DIALING);
	gw_dial_start(&c->dial, c->w, gwconf(c), c->policy, c->host, c->port, socks_dialed, c);
}

/* ---- the engine ---- */

/* Parses what the client sent in the current handshake phase. Returns
 * true to go on. */
static bool
socks_handshake(struct gw_socks_conn *c)
{
	uint8_t in[SOCKS_IN], reply[2];
	size_t used = 0;
	ssize_t n;
	enum gw_socks5_result r;

	n = recv(c->cfd, in, sizeof(in), 0);
	if (n == 0) {
		socks_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return false;
		socks_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	c->bytes_in += (uint64_t)n;
	switch (c->state) {
	case SOCKS_GREETING: {
		const struct gw_socks5_greeting *g;
		uint8_t m;

		r = gw_socks5_parse_greeting(&c->parser, in, (size_t)n, &used, &g);
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR) {
			gw_log_debug("socks %s: bad greeting: %s", c->src, c->parser.err.msg);
			socks_close(c, GW_R_BAD_REQUEST);
			return false;
		}
		if (used != (size_t)n) {
			gw_log_debug("socks %s: bytes after the greeting before our reply", c->src);
			socks_close(c, GW_R_BAD_REQUEST);
			return false;
		}
		if (c->lane >= 0) {
			/* A lane door: the source address is the identity;
			 * there is nothing to authenticate. */
			m = c->lane_rc == 0 ? gw_socks5_choose_method(g, true, false)
					    : GW_SOCKS5_METHOD_NONE;
			if (c->lane_rc < 0) {
				gw_socks5_method_reply(reply, m);
				c->reason = c->lane_rc == -EACCES ? GW_R_SANDBOX_LOCKED
								  : GW_R_NOT_A_SANDBOX;
				gw_log_info("socks %s: refused: %s%s%s", c->src,
					    gw_reason_name(c->reason), c->who.name[0] ? " " : "",
					    c->who.name);
				socks_say(c, reply, 2, true);
				return true;
			}
		} else {
			m = gw_socks5_choose_method(g, c->source_client >= 0,
						    gw_ident_has_users(c->snap));
		}
		gw_socks5_method_reply(reply, m);
		if (m == GW_SOCKS5_METHOD_NONE) {
			c->reason = c->source_client < 0 && c->lane < 0 ? GW_R_AUTH_REQUIRED
									  : GW_R_UNSUPPORTED;
			gw_log_debug("socks %s: no acceptable method offered", c->src);
			socks_say(c, reply, 2, true);
			return true;
		}
		socks_say(c, reply, 2, false);
		if (m == GW_SOCKS5_METHOD_NOAUTH && c->lane >= 0) {
			c->policy = c->who.policy;
			socks_set_state(c, SOCKS_REQUEST);
		} else if (m == GW_SOCKS5_METHOD_NOAUTH) {
			c->client_idx = c->source_client;
			c->policy = c->snap->client_policy[c->client_idx];
			socks_set_state(c, SOCKS_REQUEST);
		} else {
			socks_set_state(c, SOCKS_AUTH);
		}
		return true;
	}
	case SOCKS_AUTH: {
		const struct gw_socks5_auth *a;
		int idx;

		r = gw_socks5_parse_auth(&c->parser, in, (size_t)n, &used, &a);
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR || used != (size_t)n) {
			gw_socks5_auth_reply(reply, false);
			c->reason = GW_R_BAD_REQUEST;
			socks_say(c, reply, 2, true);
			return true;
		}
		idx = gw_ident_by_user(c->snap, a->user, a->user_len, a->pass, a->pass_len);
		gw_socks5_forget_password(&c->parser);
		gw_socks5_auth_reply(reply, idx >= 0);
		if (idx < 0) {
			gw_log_info("socks %s: authentication failed", c->src);
			c->reason = GW_R_AUTH_FAILED;
			socks_say(c, reply, 2, true);
			return true;
		}
		c->client_idx = idx;
		c->policy = c->snap->client_policy[idx];
		socks_say(c, reply, 2, false);
		socks_set_state(c, SOCKS_REQUEST);
		return true;
	}
	case SOCKS_REQUEST: {
		const struct gw_socks5_request *req;

		r = gw_socks5_parse_request(&c->parser, in, (size_t)n, &used, &req);
		if (r == GW_SOCKS5_AGAIN)
			return true;
		if (r == GW_SOCKS5_ERROR) {
			c->requested = true;
			c->t_start = gw_loop_now(c->w->loop);
			snprintf(c->host, sizeof(c->host), "-");
			socks_refuse(c, c->parser.err.has_rep ? c->parser.err.rep
							       : GW_SOCKS5_REP_GENERAL_FAILURE,
				     c->parser.err.reason, "%s", c->parser.err.msg);
			return true;
		}
		if (used != (size_t)n) {
			c->requested = true;
			c->t_start = gw_loop_now(c->w->loop);
			snprintf(c->host, sizeof(c->host), "-");
			socks_refuse(c, GW_SOCKS5_REP_GENERAL_FAILURE, GW_R_BAD_REQUEST,
				     "bytes after the request before our reply");
			return true;
		}
		socks_request(c, req);
		return true;
	}
	default:
		return false;
	}
}

static void
socks_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_socks_conn *c = io->arg;

	(void)l;
	if (c->state == SOCKS_CLOSED)
		return;
	if ((events & EPOLLERR) && c->state != SOCKS_TUNNEL) {
		socks_close(c, GW_R_CLIENT_CLOSED);
		return;
	}
	socks_run(c);
}

static void
socks_run(struct gw_socks_conn *c)
{
	for (int rounds = 0; rounds < 8; rounds++) {
		switch (c->state) {
		case SOCKS_GREETING:
		case SOCKS_AUTH:
		case SOCKS_REQUEST: {
			int rc = socks_flush(c);

			if (rc < 0)
				return;
			if (rc == 0) {
				gw_io_mod(c->w->loop, &c->cio, EPOLLOUT);
				return;
			}
			if (!socks_handshake(c)) {
				if (c->state != SOCKS_CLOSED)
					gw_io_mod(c->w->loop, &c->cio, EPOLLIN);
				return;
			}
			continue;
		}
		case SOCKS_DIALING:
			/* Nothing may arrive before our reply; what does is
			 * found when the dial ends (socks_dialed peeks). */
			gw_io_mod(c->w->loop, &c->cio, 0);
			return;
		case SOCKS_REFUSE: {
			int rc = socks_flush(c);

			if (rc == 0)
				gw_io_mod(c->w->loop, &c->cio, EPOLLOUT);
			return;
		}
		case SOCKS_TUNNEL: {
			uint32_t cev, uev;
			bool moved;
			enum gw_tunnel_status ts = gw_tunnel_run(&c->tun, &cev, &uev, &moved);

			if (ts != GW_TUNNEL_RUNNING) {
				socks_close(c, ts == GW_TUNNEL_DONE ? GW_R_NONE : c->tun.reason);
				return;
			}
			if (moved)
				gw_timer_arm(c->w->loop, &c->timer, gwconf(c)->idle_timeout_ms);
			gw_io_mod(c->w->loop, &c->cio, cev);
			gw_io_mod(c->w->loop, &c->uio, uev);
			return;
		}
		case SOCKS_CLOSED:
			return;
		}
	}
	/* A fair share done: come back when the loop says so. */
	gw_io_mod(c->w->loop, &c->cio, EPOLLIN | EPOLLOUT);
	if (c->ufd >= 0)
		gw_io_mod(c->w->loop, &c->uio, EPOLLIN | EPOLLOUT);
}

static void
socks_timeout(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_socks_conn *c = t->arg;

	(void)l;
	socks_close(c, GW_R_IDLE_TIMEOUT);
}

void
gw_socks_accept(struct gw_worker *w, int fd, int lane)
{
	struct gw_snap *s = gw_snap_current();
	struct gw_socks_conn *c;
	socklen_t sl = sizeof(struct sockaddr_storage);
	int one = 1;

	if (!s || !gw_conn_take(s->conf->gateway.max_connections)) {
		/* RFC 1928 has no "busy" before the greeting: close. */
		if (s)
			gw_log_warnx("socks door: refusing a connection: %s",
				     gw_reason_name(GW_R_TOO_MANY_CONNECTIONS));
		close(fd);
		gw_snap_unref(s);
		return;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		gw_conn_release();
		close(fd);
		gw_snap_unref(s);
		return;
	}
	c->w = w;
	c->snap = s;
	c->cfd = fd;
	c->ufd = -1;
	c->client_idx = -1;
	c->state = SOCKS_GREETING;
	gw_dial_init(&c->dial);
	gw_socks5_parser_init(&c->parser);
	getpeername(fd, (struct sockaddr *)&c->peer, &sl);
	gw_addr_format((struct sockaddr *)&c->peer, c->src, sizeof(c->src));
	c->lane = lane;
	if (lane >= 0) {
		c->source_client = -1;
		c->lane_rc = gw_lane_who(lane, (struct sockaddr *)&c->peer, &c->who);
	} else {
		c->source_client = gw_ident_by_source(s, (struct sockaddr *)&c->peer);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	gw_timer_init(&c->timer, socks_timeout, c);
	gw_worker_conn_join(w, &c->node, socks_shutdown);
	c->t_start = gw_loop_now(w->loop);
	if (gw_io_add(w->loop, &c->cio, fd, EPOLLIN, socks_io, c) < 0) {
		socks_close(c, GW_R_INTERNAL);
		return;
	}
	/* The whole handshake, not each step, has a deadline. */
	gw_timer_arm(w->loop, &c->timer, SOCKS_HANDSHAKE_MS);
	socks_run(c);
}

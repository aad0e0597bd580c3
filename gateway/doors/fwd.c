/* fwd.c: the forward door.
 *
 * A connection moves through these states:
 *
 *   HEAD ──▶ DIALING ──▶ EXCHANGE ──▶ HEAD (keep-alive)
 *     │         │           └──────▶ TUNNEL (CONNECT, 101)
 *     └─────────┴──▶ REFUSE ──▶ LINGER ──▶ closed
 *
 * Each direction of an exchange has one buffer read from its source; the
 * head at its front is parsed and replaced by a rebuilt head (hop-by-hop
 * fields dropped, Via added), and the body after it is checked by the
 * streaming body parser and forwarded as it arrives. Nothing is sent
 * upstream before the request was allowed, resolved, every address checked
 * and the connection made.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "addr.h"
#include "conf.h"
#include "dial.h"
#include "dns.h"
#include "fwd.h"
#include "http1.h"
#include "log.h"
#include "loop.h"
#include "lanes.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "tunnel.h"
#include "worker.h"

#define FWD_BUF 16384
#define FWD_HEAD_EXTRA 512      /* a rebuilt head: the original plus this */
#define FWD_LINGER_MS 2000
#define FWD_HEAD_TIMEOUT_MS 30000

#define FWD_STATES(X)                                                        \
	X(HEAD, "head")                                                      \
	X(DIALING, "dialing")           /* resolve, check, connect */        \
	X(EXCHANGE, "exchange")                                              \
	X(TUNNEL, "tunnel")                                                  \
	X(REFUSE, "refuse")                                                  \
	X(LINGER, "linger")                                                  \
	X(CLOSED, "closed")

enum fwd_state {
#define FWD_STATE_ENUM(id, name) FWD_##id,
	FWD_STATES(FWD_STATE_ENUM)
#undef FWD_STATE_ENUM
};

static const char *const fwd_state_names[] = {
#define FWD_STATE_NAME(id, name) name,
	FWD_STATES(FWD_STATE_NAME)
#undef FWD_STATE_NAME
};

/* One direction of an HTTP exchange. buf[0..len) holds bytes read from the
 * source; [wpos..fend) are checked and ready to write to the destination,
 * after the rebuilt head in hbuf; [parsed..len) are not checked yet. */
struct fwd_half {
	char *buf;
	size_t cap;
	size_t len;
	size_t parsed;
	size_t wpos;
	size_t fend;
	char *hbuf;
	size_t hlen;
	size_t hpos;
	struct gw_h1_body body;
	bool in_body;           /* head done, body under way */
	bool done;              /* the message is complete (checked) */
	bool eof;               /* the source closed */
	uint64_t out;           /* bytes written to the destination */
	uint64_t in;            /* bytes read from the source */
};

struct gw_fwd_conn {
	struct gw_worker *w;
	struct gw_conn_node node;       /* on the worker's list */
	enum fwd_state state;
	struct gw_snap *snap;

	int cfd;
	int ufd;
	struct gw_io cio;
	struct gw_io uio;
	struct gw_timer timer;
	struct gw_defer defer;
	bool deadline_fixed;    /* the timer is a connect/head deadline */

	char src[GW_ADDR_FMT_MAX];
	struct sockaddr_storage peer;

	/* the request under way */
	struct gw_h1_parser parser;
	struct gw_h1_head req;
	struct gw_h1_head resp;
	struct gw_h1_target target;
	struct fwd_half up;     /* client -> upstream */
	struct fwd_half down;   /* upstream -> client */
	int client_idx;
	int lane;                       /* -1: a host door */
	struct gw_who who;              /* lane doors: the sandbox */
	char hostbuf[GW_HOST_MAX + 16]; /* origin-form: the Host value */
	struct gw_policy *policy;       /* borrowed from snap or who */
	char method[24];
	char host[GW_HOST_MAX];
	uint16_t port;
	bool is_connect;
	bool is_upgrade;
	bool report_only;
	enum gw_reason report_reason;
	bool client_keep;       /* the client may send another request */
	bool close_after;       /* close the client once the response is out */
	unsigned status;
	bool logged;            /* the request's access line is written */
	bool denied;            /* refused by us before going upstream */
	unsigned requests;      /* heads read on this connection */
	uint64_t t_start;
	uint64_t bytes_in;

	/* resolution and connection */
	struct gw_dial dial;
	char upstream[GW_ADDR_FMT_MAX];
	/* an idle upstream connection kept for the same origin and client */
	bool u_idle;
	char u_host[GW_HOST_MAX];
	uint16_t u_port;
	int u_client;

	struct gw_tunnel tun;
	size_t linger_left;
	/* A read that cannot find anything is skipped: the response to a
	 * request sent a moment ago, or the next request of a client that is
	 * still reading our response. Saves a recv() per message. */
	bool skip_up_read;
	bool skip_client_read;
	bool head_timed;        /* the head deadline is armed */
};

static void fwd_run(struct gw_fwd_conn *c);
static void fwd_close(struct gw_fwd_conn *c, enum gw_reason why);
static void fwd_touch(struct gw_fwd_conn *c);

static void
fwd_set_state(struct gw_fwd_conn *c, enum fwd_state s)
{
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("forward %s: %s -> %s", c->src, fwd_state_names[c->state],
			     fwd_state_names[s]);
	c->state = s;
}

static const struct gw_snap *
snap(const struct gw_fwd_conn *c)
{
	return c->snap;
}

static const struct conf_gateway *
gwconf(const struct gw_fwd_conn *c)
{
	return &c->snap->conf->gateway;
}

/* ---- buffers ---- */

static int
half_reserve(struct fwd_half *h, size_t want)
{
	char *b;

	if (h->cap >= want)
		return 0;
	b = realloc(h->buf, want);
	if (!b)
		return -ENOMEM;
	h->buf = b;
	h->cap = want;
	return 0;
}

/* Drops the bytes already written, so reads have room. */
static void
half_compact(struct fwd_half *h)
{
	if (h->wpos == 0)
		return;
	memmove(h->buf, h->buf + h->wpos, h->len - h->wpos);
	h->len -= h->wpos;
	h->parsed -= h->wpos;
	h->fend -= h->wpos;
	h->wpos = 0;
}

static void
half_reset(struct fwd_half *h)
{
	free(h->hbuf);
	h->hbuf = NULL;
	h->hlen = h->hpos = 0;
	h->in_body = h->done = false;
}

static void
half_free(struct fwd_half *h)
{
	free(h->buf);
	free(h->hbuf);
	memset(h, 0, sizeof(*h));
}

static bool
half_pending(const struct fwd_half *h)
{
	return h->hpos < h->hlen || h->wpos < h->fend;
}

/* Reads from fd into h. Returns bytes read, 0 on EOF, -EAGAIN, or -errno. */
static ssize_t
half_read(struct fwd_half *h, int fd, size_t limit)
{
	ssize_t n;

	if (h->len == h->cap) {
		half_compact(h);
		if (h->len == h->cap) {
			size_t want = h->cap ? h->cap * 2 : FWD_BUF;

			if (want > limit)
				want = limit;
			if (want <= h->cap || half_reserve(h, want) < 0)
				return -ENOBUFS;
		}
	}
	do {
		n = recv(fd, h->buf + h->len, h->cap - h->len, 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	h->len += (size_t)n;
	h->in += (uint64_t)n;
	return n;
}

/* Writes what is ready, the rebuilt head and the body after it in one
 * sendmsg(2). Returns 1 if all was written, 0 if it would block, -errno on
 * error. */
static int
half_write(struct fwd_half *h, int fd)
{
	while (half_pending(h)) {
		struct iovec iov[2];
		struct msghdr msg = { .msg_iov = iov };
		size_t head = h->hlen - h->hpos;
		ssize_t r;

		if (head) {
			iov[msg.msg_iovlen].iov_base = h->hbuf + h->hpos;
			iov[msg.msg_iovlen++].iov_len = head;
		}
		if (h->wpos < h->fend) {
			iov[msg.msg_iovlen].iov_base = h->buf + h->wpos;
			iov[msg.msg_iovlen++].iov_len = h->fend - h->wpos;
		}
		r = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		h->out += (uint64_t)r;
		if ((size_t)r <= head) {
			h->hpos += (size_t)r;
		} else {
			h->hpos = h->hlen;
			h->wpos += (size_t)r - head;
		}
	}
	if (h->wpos == h->len) {
		h->wpos = h->fend = h->parsed = h->len = 0;
	}
	return 1;
}

/* Checks body bytes past `parsed` and makes them ready to write. */
static int
half_body(struct fwd_half *h)
{
	while (!h->done && h->parsed < h->len) {
		struct gw_h1_span data;
		size_t used = 0;
		enum gw_h1_result r;

		r = gw_h1_body_feed(&h->body, h->buf + h->parsed, h->len - h->parsed, &used, &data);
		if (r == GW_H1_ERROR)
			return -EPROTO;
		if (h->body.mode == GW_H1_RAW) {
			h->parsed += used;
			h->fend = h->parsed;
		} else {
			/* Decoded payload moves down over the framing it came in. */
			if (data.len && data.p != h->buf + h->fend)
				memmove(h->buf + h->fend, data.p, data.len);
			h->fend += data.len;
			h->parsed += used;
		}
		if (r == GW_H1_DONE)
			h->done = true;
		if (used == 0 && r == GW_H1_AGAIN)
			break;
	}
	return 0;
}

/* ---- responses of our own ---- */

static const char *
status_text(unsigned status)
{
	switch (status) {
	case 200: return "Connection established";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 407: return "Proxy Authentication Required";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

static const char *
decision_name(const struct gw_fwd_conn *c)
{
	if (c->denied)
		return "deny";
	return c->report_only ? "report" : "allow";
}

static void
fwd_log(struct gw_fwd_conn *c, enum gw_reason reason)
{
	const struct conf_gateway *g = gwconf(c);
	struct gw_access a = {
		.door = "forward",
		.client = c->client_idx >= 0 ? g->clients[c->client_idx].name
			  : c->who.name[0]  ? c->who.name
					    : NULL,
		.src = c->src,
		.policy = c->policy ? gw_policy_name(c->policy) : NULL,
		.method = c->method,
		.host = c->host[0] ? c->host : NULL,
		.port = c->port,
		.decision = decision_name(c),
		.reason = reason == GW_R_NONE && c->report_only ? c->report_reason : reason,
		.upstream = c->upstream[0] ? c->upstream : NULL,
		.status = c->status,
		.bytes_in = c->bytes_in,
		.bytes_out = c->down.out,
		.duration_ms = gw_loop_now(c->w->loop) - c->t_start,
	};

	if (c->logged)
		return;
	c->logged = true;
	gw_access_write(&a);
}

/* Answers the request with a refusal and closes after it is written. */
static void
fwd_refuse(struct gw_fwd_conn *c, unsigned status, enum gw_reason reason,
	   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
fwd_refuse(struct gw_fwd_conn *c, unsigned status, enum gw_reason reason, const char *fmt, ...)
{
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
	half_reset(&c->down);
	c->down.len = c->down.wpos = c->down.fend = c->down.parsed = 0;
	c->down.hbuf = malloc(1024 + sizeof(body));
	if (!c->down.hbuf) {
		fwd_close(c, GW_R_INTERNAL);
		return;
	}
	n = snprintf(c->down.hbuf, 1024 + sizeof(body),
		     "HTTP/1.1 %u %s\r\nSluice-Reason: %s\r\n%sContent-Type: text/plain\r\n"
		     "Content-Length: %d\r\nConnection: close\r\nVia: 1.1 sluice\r\n\r\n%s",
		     status, status_text(status), gw_reason_name(reason), extra, blen, body);
	c->down.hlen = (size_t)n;
	c->down.out = c->down.hlen;     /* the access line counts what is sent */
	c->status = status;
	/* 502 and 504: allowed, but the way there failed. */
	c->denied = status != 502 && status != 504;
	if (c->method[0])
		fwd_log(c, reason);
	if (c->ufd >= 0) {
		gw_io_del(c->w->loop, &c->uio);
		close(c->ufd);
		c->ufd = -1;
		c->u_idle = false;
	}
	gw_dial_cancel(&c->dial);
	/* A client that does not read its refusal is not waited for long. */
	c->deadline_fixed = true;
	gw_timer_arm(c->w->loop, &c->timer, FWD_HEAD_TIMEOUT_MS);
	fwd_set_state(c, FWD_REFUSE);
}

/* ---- teardown ---- */

static void
fwd_free(void *arg)
{
	struct gw_fwd_conn *c = arg;

	half_free(&c->up);
	half_free(&c->down);
	gw_who_clear(&c->who);
	gw_snap_unref(c->snap);
	free(c);
}

/* The one way a connection ends: unregisters, closes, logs an unfinished
 * request, and frees after the current batch of events. */
static void
fwd_close(struct gw_fwd_conn *c, enum gw_reason why)
{
	struct gw_worker *w = c->w;

	if (c->state == FWD_CLOSED)
		return;
	if (c->state == FWD_TUNNEL) {
		/* The request head, then what went through the tunnel. */
		c->bytes_in = c->req.head_len + c->tun.dir[GW_TUNNEL_C2U].bytes;
		c->down.out = c->tun.dir[GW_TUNNEL_U2C].bytes;
		gw_tunnel_fini(&c->tun);
	}
	/* A request cut short still gets its line, with why it ended. */
	if (c->method[0] && c->state != FWD_HEAD)
		fwd_log(c, why);
	gw_dial_cancel(&c->dial);
	gw_timer_cancel(w->loop, &c->timer);
	gw_io_del(w->loop, &c->cio);
	close(c->cfd);
	if (c->ufd >= 0) {
		gw_io_del(w->loop, &c->uio);
		close(c->ufd);
	}
	fwd_set_state(c, FWD_CLOSED);
	gw_worker_conn_leave(w, &c->node);
	gw_defer(w->loop, &c->defer, fwd_free, c);
}

static void
fwd_shutdown(struct gw_conn_node *n)
{
	fwd_close(gw_conn_of(n, struct gw_fwd_conn), GW_R_SHUTDOWN);
}

/* ---- identity and policy ---- */

/* A lane door: the sandbox by source address, asked for every request so
 * that a lock takes effect at the next one. */
static int
fwd_identify_lane(struct gw_fwd_conn *c)
{
	int rc;

	gw_who_clear(&c->who);
	rc = gw_lane_who(c->lane, (const struct sockaddr *)&c->peer, &c->who);
	if (rc == -EACCES) {
		fwd_refuse(c, 403, GW_R_SANDBOX_LOCKED, "sandbox %s is locked", c->who.name);
		return -1;
	}
	if (rc < 0) {
		fwd_refuse(c, 403, GW_R_NOT_A_SANDBOX, "%s is no sandbox of this lane", c->src);
		return -1;
	}
	c->policy = c->who.policy;
	return 0;
}

/* Finds the client: by source address, else by Proxy-Authorization.
 * Returns 0, or refuses and returns -1. */
static int
fwd_identify(struct gw_fwd_conn *c)
{
	const struct gw_h1_header *pa = gw_h1_header_find(&c->req, "Proxy-Authorization");
	char buf[512];
	const char *user, *pass;
	size_t ulen, plen;
	int idx;

	if (c->lane >= 0)
		return fwd_identify_lane(c);
	idx = gw_ident_by_source(snap(c), (const struct sockaddr *)&c->peer);
	if (idx < 0 && pa) {
		if (gw_ident_basic_decode(pa->value.p, pa->value.len, buf, sizeof(buf),
					  &user, &ulen, &pass, &plen) < 0) {
			explicit_bzero(buf, sizeof(buf));
			fwd_refuse(c, 407, GW_R_AUTH_FAILED, "Proxy-Authorization is not valid Basic credentials");
			return -1;
		}
		idx = gw_ident_by_user(snap(c), user, ulen, pass, plen);
		explicit_bzero(buf, sizeof(buf));
		if (idx < 0) {
			fwd_refuse(c, 407, GW_R_AUTH_FAILED, "unknown user or wrong password");
			return -1;
		}
	}
	if (idx < 0) {
		if (gw_ident_has_users(snap(c)))
			fwd_refuse(c, 407, GW_R_AUTH_REQUIRED, "give proxy credentials (Basic)");
		else
			fwd_refuse(c, 403, GW_R_UNKNOWN_CLIENT, "%s matches no client", c->src);
		return -1;
	}
	c->client_idx = idx;
	c->policy = snap(c)->client_policy[idx];
	return 0;
}

static int
fwd_check_host(struct gw_fwd_conn *c)
{
	struct gw_policy_decision d;

	if (gw_policy_check(c->policy, c->host, c->port, &d) == 0) {
		c->report_only = d.report_only;
		c->report_reason = d.reason;
		return 0;
	}
	if (d.reason == GW_R_DENIED)
		fwd_refuse(c, 403, d.reason, "%s:%u is denied by rule '%s' (line %u) of policy '%s'",
			   c->host, c->port, d.rule ? d.rule : "?", d.pos.line,
			   gw_policy_name(c->policy));
	else if (d.reason == GW_R_NOT_ALLOWED)
		fwd_refuse(c, 403, d.reason, "%s:%u is not allowed by policy '%s'", c->host, c->port,
			   gw_policy_name(c->policy));
	else
		fwd_refuse(c, d.reason == GW_R_BAD_PORT ? 400 : 403, d.reason, "%s:%u", c->host, c->port);
	return -1;
}

/* ---- connecting ---- */

static void fwd_io(struct gw_loop *l, struct gw_io *io, uint32_t events);
static void fwd_start_exchange(struct gw_fwd_conn *c);
static void fwd_start_tunnel(struct gw_fwd_conn *c, bool upgrade);

/* The dial ended: a connected upstream, or why not. */
static void
fwd_dialed(struct gw_dial *d, int fd, enum gw_reason why, int err, const char *detail, void *arg)
{
	struct gw_fwd_conn *c = arg;

	(void)err;
	snprintf(c->upstream, sizeof(c->upstream), "%s", d->upstream);
	if (fd < 0) {
		fwd_refuse(c, gw_dial_status(why), why, "%s", detail);
		fwd_run(c);
		return;
	}
	c->ufd = fd;
	if (gw_io_add(c->w->loop, &c->uio, fd, 0, fwd_io, c) < 0) {
		close(fd);
		c->ufd = -1;
		fwd_refuse(c, 502, GW_R_INTERNAL, "cannot watch the upstream connection");
		fwd_run(c);
		return;
	}
	c->u_idle = false;
	snprintf(c->u_host, sizeof(c->u_host), "%s", c->host);
	c->u_port = c->port;
	c->u_client = c->client_idx;
	gw_timer_cancel(c->w->loop, &c->timer);
	c->deadline_fixed = false;
	if (c->is_connect)
		fwd_start_tunnel(c, false);
	else
		fwd_start_exchange(c);
	fwd_run(c);
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

/* An idle upstream connection may carry the next request only if it has
 * said nothing since the last response (no stray bytes, no close). */
static bool
upstream_quiet(int fd)
{
	char b;

	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

/* Transparent HTTP (a guest's TCP to port 80 redirected to a lane's
 * forward door): an origin-form request is routed by its Host field, which
 * must be there, once, and be a valid authority. */
static int
fwd_route_by_host(struct gw_fwd_conn *c)
{
	const struct gw_h1_header *h = gw_h1_header_find(&c->req, "Host");
	struct gw_h1_target t;
	struct gw_h1_error terr = { 0 };
	const char *v;
	size_t n;
	bool has_port;

	if (!h || gw_h1_header_next(&c->req, h, "Host")) {
		fwd_refuse(c, 400, GW_R_BAD_REQUEST,
			   h ? "more than one Host field" : "an origin-form request needs a Host field");
		return -1;
	}
	v = h->value.p;
	n = h->value.len;
	if (n == 0 || n + 4 >= sizeof(c->hostbuf)) {
		fwd_refuse(c, 400, GW_R_BAD_HOST, "bad Host field");
		return -1;
	}
	/* "host", "host:port", "[v6]" or "[v6]:port": add the default port
	 * so that the authority parser, which wants one, can check it. */
	has_port = v[n - 1] != ']' && memchr(v, ':', n) &&
		   (v[0] == '[' || memchr(v, ':', n) == memrchr(v, ':', n));
	memcpy(c->hostbuf, v, n);
	if (!has_port) {
		memcpy(c->hostbuf + n, ":80", 3);
		n += 3;
	}
	c->hostbuf[n] = '\0';
	if (gw_h1_target_parse(c->hostbuf, n, GW_H1_M_CONNECT, &t, &terr) < 0 ||
	    t.form != GW_H1_TARGET_AUTHORITY) {
		fwd_refuse(c, 400, terr.reason ? terr.reason : GW_R_BAD_HOST, "bad Host field: %s",
			   terr.msg ? terr.msg : "not host[:port]");
		return -1;
	}
	c->target.form = GW_H1_TARGET_ABSOLUTE;
	c->target.scheme = GW_H1_SCHEME_HTTP;
	c->target.host = t.host;
	c->target.host_ipv6 = t.host_ipv6;
	c->target.port = t.port;
	c->target.port_explicit = has_port;
	return 0;
}

/* A request head is complete: decide, then resolve and connect (or reuse
 * the idle upstream connection of the same origin and client). */
static void
fwd_request(struct gw_fwd_conn *c)
{
	struct gw_h1_error terr = { 0 };
	enum gw_reason why;
	size_t mlen = c->req.method.len < sizeof(c->method) - 1 ? c->req.method.len
								  : sizeof(c->method) - 1;

	memcpy(c->method, c->req.method.p, mlen);
	c->method[mlen] = '\0';
	c->host[0] = '\0';
	c->port = 0;
	c->upstream[0] = '\0';
	c->status = 0;
	c->report_only = false;
	c->report_reason = GW_R_NONE;
	c->policy = NULL;
	c->client_idx = -1;
	c->is_connect = c->req.method_id == GW_H1_M_CONNECT;
	c->bytes_in = c->req.head_len;
	c->down.out = 0;
	c->logged = false;
	c->denied = false;
	c->head_timed = false;
	c->requests++;
	c->t_start = gw_loop_now(c->w->loop);

	if (gw_h1_target_parse(c->req.target.p, c->req.target.len, c->req.method_id,
			       &c->target, &terr) < 0) {
		fwd_refuse(c, 400, terr.reason, "bad request-target: %s", terr.msg);
		return;
	}
	if (c->lane >= 0 && c->target.form == GW_H1_TARGET_ORIGIN && fwd_route_by_host(c) < 0)
		return;
	if (!c->is_connect && c->target.form != GW_H1_TARGET_ABSOLUTE &&
	    !(c->lane >= 0 && c->target.form == GW_H1_TARGET_ORIGIN)) {
		fwd_refuse(c, 400, GW_R_BAD_REQUEST,
			   "not a proxy request: use an absolute URL (http://host/path) or CONNECT");
		return;
	}
	if (c->target.scheme == GW_H1_SCHEME_HTTPS) {
		fwd_refuse(c, 501, GW_R_UNSUPPORTED,
			   "https:// URLs are not proxied yet: use CONNECT (curl and browsers do)");
		return;
	}
	if (gw_host_normalize(c->target.host.p, c->target.host.len, c->host, sizeof(c->host),
			      &why) < 0) {
		c->host[0] = '\0';
		fwd_refuse(c, 400, why, "bad host in the request-target");
		return;
	}
	c->port = c->target.port;
	if (fwd_identify(c) < 0)
		return;
	if (fwd_check_host(c) < 0)
		return;
	c->is_upgrade = !c->is_connect && is_websocket_upgrade(&c->req);
	if (c->req.upgrade && !c->is_upgrade)
		gw_log_debug("forward %s: dropping a non-WebSocket Upgrade", c->src);

	/* Keep-alive reuse: same origin, same client identity. */
	if (c->ufd >= 0 && c->u_idle && !c->is_connect && c->u_port == c->port &&
	    c->u_client == c->client_idx && strcmp(c->u_host, c->host) == 0 &&
	    upstream_quiet(c->ufd)) {
		c->u_idle = false;
		fwd_start_exchange(c);
		return;
	}
	if (c->ufd >= 0) {
		gw_io_del(c->w->loop, &c->uio);
		close(c->ufd);
		c->ufd = -1;
		c->u_idle = false;
	}
	/* The dial has its own deadlines (DNS, then connect). */
	gw_timer_cancel(c->w->loop, &c->timer);
	c->deadline_fixed = true;
	fwd_set_state(c, FWD_DIALING);
	gw_dial_start(&c->dial, c->w, gwconf(c), c->policy, c->host, c->port, fwd_dialed, c);
}

/* Rebuilds the request head for the origin in c->up.hbuf. */
static int
fwd_build_request(struct gw_fwd_conn *c)
{
	struct gw_h1_writer wr;
	char target[8192], hostv[GW_HOST_MAX + 16];
	size_t cap = c->req.head_len + FWD_HEAD_EXTRA;
	int tl, hl;
	static const struct gw_h1_span via_n = { "Via", 3 }, via_v = { "1.1 sluice", 10 };

	tl = snprintf(target, sizeof(target), "%.*s%s%.*s", (int)c->target.path.len,
		      c->target.path.p, c->target.has_query ? "?" : "",
		      (int)c->target.query.len, c->target.query.p);
	if (tl < 0 || (size_t)tl >= sizeof(target))
		return -ENOSPC;
	if (c->target.port_explicit)
		hl = snprintf(hostv, sizeof(hostv), strchr(c->host, ':') ? "[%s]:%u" : "%s:%u",
			      c->host, c->port);
	else
		hl = snprintf(hostv, sizeof(hostv), strchr(c->host, ':') ? "[%s]" : "%s", c->host);
	c->up.hbuf = malloc(cap);
	if (!c->up.hbuf)
		return -ENOMEM;
	gw_h1_writer_init(&wr, c->up.hbuf, cap);
	gw_h1_write_request_line(&wr, c->req.method, (struct gw_h1_span){ target, (size_t)tl }, 1);
	gw_h1_write_header(&wr, (struct gw_h1_span){ "Host", 4 }, (struct gw_h1_span){ hostv, (size_t)hl });
	for (size_t i = 0; i < c->req.nheaders; i++) {
		const struct gw_h1_header *h = &c->req.headers[i];

		if (h->name.len == 4 && strncasecmp(h->name.p, "Host", 4) == 0)
			continue;
		/* Framing is written from what the parser decided, never
		 * copied: a Connection field naming Content-Length must not
		 * strip the framing the body is relayed by. */
		if (h->name.len == 14 && strncasecmp(h->name.p, "Content-Length", 14) == 0)
			continue;
		if (gw_h1_hop_by_hop(&c->req, h->name.p, h->name.len))
			continue;
		gw_h1_write_header(&wr, h->name, h->value);
	}
	if (c->req.has_content_length) {
		char cl[24];
		int n = snprintf(cl, sizeof(cl), "%llu", (unsigned long long)c->req.content_length);

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Content-Length", 14 },
				   (struct gw_h1_span){ cl, (size_t)n });
	}
	if (c->req.body == GW_H1_BODY_CHUNKED)
		gw_h1_write_header(&wr, (struct gw_h1_span){ "Transfer-Encoding", 17 },
				   (struct gw_h1_span){ "chunked", 7 });
	if (c->is_upgrade) {
		const struct gw_h1_header *u = gw_h1_header_find(&c->req, "Upgrade");

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
				   (struct gw_h1_span){ "Upgrade", 7 });
		gw_h1_write_header(&wr, u->name, u->value);
	}
	gw_h1_write_header(&wr, via_n, via_v);
	if (gw_h1_write_end(&wr) < 0)
		return -ENOSPC;
	c->up.hlen = wr.len;
	c->up.hpos = 0;
	return 0;
}

static void
fwd_start_exchange(struct gw_fwd_conn *c)
{
	struct fwd_half *up = &c->up, *down = &c->down;

	if (fwd_build_request(c) < 0) {
		fwd_refuse(c, 431, GW_R_HEADER_TOO_LARGE, "the rebuilt request head is too large");
		return;
	}
	/* The original head is replaced by the rebuilt one. */
	up->parsed += c->req.head_len;
	up->wpos = up->fend = up->parsed;
	gw_h1_body_init(&up->body, c->req.body, c->req.content_length, GW_H1_RAW);
	up->in_body = true;
	up->done = c->req.body == GW_H1_BODY_NONE ||
		   (c->req.body == GW_H1_BODY_LENGTH && c->req.content_length == 0);
	up->out = 0;
	half_reset(down);
	down->out = 0;
	gw_h1_parser_init(&c->parser, GW_H1_RESPONSE, gwconf(c)->max_header_bytes);
	gw_h1_parser_set_request_method(&c->parser, c->req.method_id);
	c->client_keep = c->req.keep_alive;
	c->close_after = false;
	c->skip_up_read = true;         /* the request is not even sent yet */
	fwd_set_state(c, FWD_EXCHANGE);
}

/* Rebuilds the response head for the client in c->down.hbuf. */
static int
fwd_build_response(struct gw_fwd_conn *c, bool decode_chunked)
{
	struct gw_h1_writer wr;
	size_t cap = c->resp.head_len + FWD_HEAD_EXTRA;
	static const struct gw_h1_span via_n = { "Via", 3 }, via_v = { "1.1 sluice", 10 };
	bool switching = c->resp.status == 101;

	free(c->down.hbuf);
	c->down.hbuf = malloc(cap);
	if (!c->down.hbuf)
		return -ENOMEM;
	gw_h1_writer_init(&wr, c->down.hbuf, cap);
	gw_h1_write_status_line(&wr, c->resp.status, c->resp.status_text, 1);
	for (size_t i = 0; i < c->resp.nheaders; i++) {
		const struct gw_h1_header *h = &c->resp.headers[i];

		if (h->name.len == 14 && strncasecmp(h->name.p, "Content-Length", 14) == 0)
			continue;
		if (gw_h1_hop_by_hop(&c->resp, h->name.p, h->name.len))
			continue;
		gw_h1_write_header(&wr, h->name, h->value);
	}
	/* As for requests: framing from the parser's decision. A HEAD or 304
	 * answer keeps the length it announces. */
	if (c->resp.has_content_length && !decode_chunked && !switching) {
		char cl[24];
		int n = snprintf(cl, sizeof(cl), "%llu", (unsigned long long)c->resp.content_length);

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Content-Length", 14 },
				   (struct gw_h1_span){ cl, (size_t)n });
	}
	if (switching) {
		const struct gw_h1_header *u = gw_h1_header_find(&c->resp, "Upgrade");

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
				   (struct gw_h1_span){ "Upgrade", 7 });
		if (u)
			gw_h1_write_header(&wr, u->name, u->value);
	} else if (c->resp.status >= 200) {
		if (c->resp.body == GW_H1_BODY_CHUNKED && !decode_chunked)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Transfer-Encoding", 17 },
					   (struct gw_h1_span){ "chunked", 7 });
		if (c->close_after)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
					   (struct gw_h1_span){ "close", 5 });
		else if (c->req.version_minor == 0)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
					   (struct gw_h1_span){ "keep-alive", 10 });
	}
	gw_h1_write_header(&wr, via_n, via_v);
	if (gw_h1_write_end(&wr) < 0)
		return -ENOSPC;
	c->down.hlen = wr.len;
	c->down.hpos = 0;
	return 0;
}

/* A response head arrived from the origin. */
static int
fwd_response_head(struct gw_fwd_conn *c)
{
	struct fwd_half *down = &c->down;
	bool decode = false;

	down->parsed += c->resp.head_len;
	down->wpos = down->fend = down->parsed;
	if (c->resp.status == 101) {
		if (!c->is_upgrade)
			return -EPROTO;
		if (fwd_build_response(c, false) < 0)
			return -ENOMEM;
		c->status = 101;
		fwd_start_tunnel(c, true);
		return 1;
	}
	if (c->resp.status < 200) {
		/* 100 Continue and friends: pass on, then read the next head. */
		if (c->req.version_minor == 0 && c->resp.status == 100) {
			/* An HTTP/1.0 client never asked for it. */
			gw_h1_parser_init(&c->parser, GW_H1_RESPONSE, gwconf(c)->max_header_bytes);
			gw_h1_parser_set_request_method(&c->parser, c->req.method_id);
			return 0;
		}
		if (fwd_build_response(c, false) < 0)
			return -ENOMEM;
		gw_h1_parser_init(&c->parser, GW_H1_RESPONSE, gwconf(c)->max_header_bytes);
		gw_h1_parser_set_request_method(&c->parser, c->req.method_id);
		return 0;
	}
	c->status = c->resp.status;
	if (c->resp.body == GW_H1_BODY_UNTIL_CLOSE || !c->req.keep_alive)
		c->close_after = true;
	if (c->resp.body == GW_H1_BODY_CHUNKED && c->req.version_minor == 0) {
		/* HTTP/1.0 knows no chunks: decode, and end by closing. */
		decode = true;
		c->close_after = true;
	}
	if (fwd_build_response(c, decode) < 0)
		return -ENOMEM;
	gw_h1_body_init(&down->body, c->resp.body, c->resp.content_length,
			decode ? GW_H1_DECODE : GW_H1_RAW);
	down->in_body = true;
	down->done = c->resp.body == GW_H1_BODY_NONE ||
		     (c->resp.body == GW_H1_BODY_LENGTH && c->resp.content_length == 0);
	return 0;
}

/* Ends a connection whose client may still be sending (a pipelined
 * request, the rest of an upload the origin answered early): closing with
 * unread input would reset the connection and could destroy the response
 * in flight, so stop sending and read for a while first. */
static void
fwd_linger(struct gw_fwd_conn *c)
{
	if (c->ufd >= 0) {
		gw_io_del(c->w->loop, &c->uio);
		close(c->ufd);
		c->ufd = -1;
		c->u_idle = false;
	}
	shutdown(c->cfd, SHUT_WR);
	c->linger_left = 1 << 20;
	c->deadline_fixed = false;
	fwd_set_state(c, FWD_LINGER);
	fwd_touch(c);
	c->deadline_fixed = true;
}

/* The response went out in full: log, then wait for the next request or
 * close. */
static void
fwd_exchange_done(struct gw_fwd_conn *c)
{
	/* Bytes past the response's end mean the origin is confused: do not
	 * send it another request. */
	bool upstream_keep = c->resp.keep_alive && c->resp.body != GW_H1_BODY_UNTIL_CLOSE &&
			     c->up.done && c->down.parsed == c->down.len;

	c->bytes_in += c->up.out > c->up.hlen ? c->up.out - c->up.hlen : 0;
	fwd_log(c, GW_R_NONE);
	if (c->close_after || !c->client_keep || !c->up.done) {
		fwd_linger(c);
		return;
	}
	if (!upstream_keep) {
		gw_io_del(c->w->loop, &c->uio);
		close(c->ufd);
		c->ufd = -1;
	} else {
		c->u_idle = true;
	}
	/* What the client sent after this request is the next one. */
	c->up.wpos = c->up.fend = c->up.parsed;
	half_compact(&c->up);
	half_reset(&c->up);
	half_reset(&c->down);
	c->down.len = c->down.parsed = c->down.wpos = c->down.fend = 0;
	c->method[0] = c->host[0] = '\0';
	gw_h1_parser_init(&c->parser, GW_H1_REQUEST, gwconf(c)->max_header_bytes);
	/* A client reading our response has not sent its next request yet,
	 * unless it pipelined it (then it is in the buffer already). */
	c->skip_client_read = true;
	fwd_set_state(c, FWD_HEAD);
}

/* ---- tunnels ---- */

static void
fwd_start_tunnel(struct gw_fwd_conn *c, bool upgrade)
{
	static const char established[] =
		"HTTP/1.1 200 Connection established\r\nVia: 1.1 sluice\r\n\r\n";
	struct fwd_half *up = &c->up, *down = &c->down;
	int rc = 0;

	gw_tunnel_init(&c->tun, c->cfd, c->ufd, c->w->use_splice);
	if (upgrade) {
		/* Our rebuilt 101 head, then whatever the origin sent after it. */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, down->hbuf + down->hpos,
					down->hlen - down->hpos);
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, down->buf + down->parsed,
					down->len - down->parsed);
		/* The request went out in full (a GET has no body). */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, up->buf + up->wpos,
					up->len - up->wpos);
	} else {
		c->status = 200;
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_U2C, established, sizeof(established) - 1);
		/* Bytes the client sent right after CONNECT (a TLS hello). */
		rc |= gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, up->buf + up->parsed + c->req.head_len,
					up->len - up->parsed - c->req.head_len);
	}
	half_free(up);
	half_free(down);
	fwd_set_state(c, FWD_TUNNEL);
	if (rc)
		fwd_close(c, GW_R_INTERNAL);
}

/* ---- the engine ---- */

static void
fwd_watch(struct gw_fwd_conn *c, uint32_t cev, uint32_t uev)
{
	if (c->state == FWD_CLOSED)
		return;
	gw_io_mod(c->w->loop, &c->cio, cev);
	if (c->ufd >= 0)
		gw_io_mod(c->w->loop, &c->uio, uev);
}

static void
fwd_touch(struct gw_fwd_conn *c)
{
	uint64_t ms = gwconf(c)->idle_timeout_ms;

	if (c->deadline_fixed)
		return;
	/* A head must arrive whole within the head timeout, counted from its
	 * first byte (a byte now and then does not extend it), except that a
	 * kept-alive connection may idle before its next request starts. */
	if (c->state == FWD_HEAD && !(c->requests > 0 && c->up.len == 0)) {
		if (c->head_timed)
			return;
		c->head_timed = true;
		ms = ms < FWD_HEAD_TIMEOUT_MS ? ms : FWD_HEAD_TIMEOUT_MS;
	} else if (c->state == FWD_LINGER)
		ms = FWD_LINGER_MS;
	gw_timer_arm(c->w->loop, &c->timer, ms);
}

/* HEAD: read and parse a request head. Returns true if it should go on. */
static bool
fwd_run_head(struct gw_fwd_conn *c)
{
	struct fwd_half *up = &c->up;
	size_t limit = gwconf(c)->max_header_bytes + FWD_BUF;

	for (;;) {
		enum gw_h1_result r = GW_H1_AGAIN;
		ssize_t n;

		if (up->len > up->parsed) {
			r = gw_h1_head_parse(&c->parser, up->buf + up->parsed, up->len - up->parsed, &c->req);
			if (r == GW_H1_DONE) {
				fwd_request(c);
				return c->state != FWD_HEAD;
			}
			if (r == GW_H1_ERROR) {
				c->t_start = gw_loop_now(c->w->loop);
				snprintf(c->method, sizeof(c->method), "-");
				fwd_refuse(c, c->req.err.reason == GW_R_HEADER_TOO_LARGE ? 431 : 400,
					   c->req.err.reason, "%s", c->req.err.msg);
				return true;
			}
		}
		if (c->skip_client_read)
			return false;
		n = half_read(up, c->cfd, limit);
		if (n == -EAGAIN)
			return false;
		if (n == 0) {
			fwd_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
		if (n < 0) {
			fwd_close(c, n == -ENOBUFS ? GW_R_HEADER_TOO_LARGE : GW_R_CLIENT_CLOSED);
			return false;
		}
	}
}

/* The origin failed (reset, closed, errored) during an exchange. Before
 * any of the response reached the client it can still be told why, with
 * a 502; after, the connection can only end. */
static void
fwd_upstream_failed(struct gw_fwd_conn *c, int err)
{
	if (c->state == FWD_EXCHANGE && c->status == 0 && !c->down.in_body && c->down.out == 0) {
		if (err)
			fwd_refuse(c, 502, GW_R_UPSTREAM_RESET,
				   "the origin reset the connection without a response: %s", strerror(err));
		else
			fwd_refuse(c, 502, GW_R_UPSTREAM_RESET, "the origin closed without a response");
		return;
	}
	fwd_close(c, GW_R_UPSTREAM_RESET);
}

/* EXCHANGE: move request and response bytes. Returns false when nothing
 * more can happen now. */
static bool
fwd_run_exchange(struct gw_fwd_conn *c, uint32_t *cev, uint32_t *uev)
{
	struct fwd_half *up = &c->up, *down = &c->down;
	bool moved = false;
	int rc;

	/* client -> upstream: body bytes already read are checked first */
	if (half_body(up) < 0) {
		fwd_close(c, GW_R_BAD_REQUEST);
		return false;
	}
	rc = half_write(up, c->ufd);
	if (rc < 0) {
		fwd_upstream_failed(c, -rc);
		return c->state == FWD_REFUSE;
	}
	if (rc == 0)
		*uev |= EPOLLOUT;
	if (rc == 1 && !up->done) {
		ssize_t n = half_read(up, c->cfd, FWD_BUF);

		if (n > 0) {
			moved = true;
			if (half_body(up) < 0) {
				fwd_close(c, GW_R_BAD_REQUEST);
				return false;
			}
		} else if (n == 0) {
			fwd_close(c, GW_R_CLIENT_CLOSED);
			return false;
		} else if (n == -EAGAIN) {
			*cev |= EPOLLIN;
		} else {
			fwd_close(c, GW_R_CLIENT_CLOSED);
			return false;
		}
	}

	/* upstream -> client */
	rc = half_write(down, c->cfd);
	if (rc < 0) {
		fwd_close(c, GW_R_CLIENT_CLOSED);
		return false;
	}
	if (rc == 0) {
		*cev |= EPOLLOUT;
		return moved;
	}
	if (down->done) {
		fwd_exchange_done(c);
		return c->state == FWD_HEAD;
	}
	if (c->skip_up_read && down->parsed == down->len) {
		*uev |= EPOLLIN;
		return moved;
	}
	if (down->parsed == down->len) {
		ssize_t n = half_read(down, c->ufd, down->in_body ? FWD_BUF
							     : gwconf(c)->max_header_bytes + FWD_BUF);

		if (n == -EAGAIN) {
			*uev |= EPOLLIN;
			c->skip_up_read = true;
			if (down->parsed == down->len)
				return moved;
		}
		if (n < 0 && n != -ENOBUFS && n != -EAGAIN) {
			fwd_upstream_failed(c, (int)-n);
			return c->state == FWD_REFUSE;
		}
		if (n == 0) {
			down->eof = true;
			if (!down->in_body) {
				fwd_upstream_failed(c, 0);
				return c->state == FWD_REFUSE;
			}
			if (gw_h1_body_eof(&down->body) == GW_H1_DONE) {
				down->done = true;
				return true;
			}
			fwd_close(c, GW_R_UPSTREAM_RESET);
			return false;
		}
		if (n > 0)
			moved = true;
	}
	while (!down->in_body) {
		enum gw_h1_result r = gw_h1_head_parse(&c->parser, down->buf + down->parsed,
						       down->len - down->parsed, &c->resp);

		if (r == GW_H1_AGAIN)
			return true;
		if (r == GW_H1_ERROR) {
			fwd_refuse(c, 502, GW_R_UPSTREAM_BAD_RESPONSE, "the origin's response: %s",
				   c->resp.err.msg);
			return true;
		}
		rc = fwd_response_head(c);
		if (rc < 0) {
			fwd_refuse(c, 502, GW_R_UPSTREAM_BAD_RESPONSE, "the origin's response is not usable");
			return true;
		}
		if (rc > 0)
			return true;    /* a tunnel now */
		if (!down->in_body && half_pending(down))
			return true;    /* send the 1xx first */
	}
	if (half_body(down) < 0) {
		fwd_close(c, GW_R_UPSTREAM_BAD_RESPONSE);
		return false;
	}
	return true;
}

static void
fwd_run(struct gw_fwd_conn *c)
{
	uint32_t cev = 0, uev = 0;
	bool again = false;
	uint64_t io = c->up.in + c->up.out + c->down.in + c->down.out;

	for (int rounds = 0; rounds < 64; rounds++) {
		again = false;

		cev = uev = 0;
		switch (c->state) {
		case FWD_HEAD:
			again = fwd_run_head(c);
			if (c->state == FWD_HEAD) {
				cev = EPOLLIN;
				if (c->ufd >= 0)
					uev = EPOLLIN;  /* notice an idle upstream closing */
			}
			break;
		case FWD_DIALING:
			break;
		case FWD_EXCHANGE:
			again = fwd_run_exchange(c, &cev, &uev);
			break;
		case FWD_TUNNEL: {
			bool moved;
			enum gw_tunnel_status ts = gw_tunnel_run(&c->tun, &cev, &uev, &moved);

			if (ts == GW_TUNNEL_DONE) {
				fwd_close(c, GW_R_NONE);
				return;
			}
			if (ts == GW_TUNNEL_ERROR) {
				fwd_close(c, c->tun.reason);
				return;
			}
			if (moved)
				fwd_touch(c);
			break;
		}
		case FWD_REFUSE: {
			int rc = half_write(&c->down, c->cfd);

			if (rc < 0) {
				fwd_close(c, GW_R_CLIENT_CLOSED);
				return;
			}
			if (rc == 0) {
				cev = EPOLLOUT;
				break;
			}
			/* Written: stop sending, and read what the client still
			 * sends for a while, so that closing with unread bytes
			 * does not reset the connection before our answer is
			 * read (a lingering close). */
			fwd_linger(c);
			again = true;
			break;
		}
		case FWD_LINGER: {
			char sink[4096];
			ssize_t n = recv(c->cfd, sink, sizeof(sink), 0);

			if (n > 0 && (size_t)n < c->linger_left) {
				c->linger_left -= (size_t)n;
				again = true;
			} else if (n < 0 && errno == EAGAIN) {
				cev = EPOLLIN;
			} else {
				fwd_close(c, GW_R_NONE);
				return;
			}
			break;
		}
		case FWD_CLOSED:
			return;
		}
		if (c->state == FWD_CLOSED)
			return;
		if (!again)
			break;
	}
	if (c->state == FWD_EXCHANGE && (cev | uev) == 0 && !again)
		gw_log_debug("forward %s: exchange waits on nothing", c->src);
	if (again) {
		/* Still work to do after a fair share: let other connections
		 * run first, and come back when the loop says the sockets are
		 * ready (level-triggered, so at once if they still are). */
		cev = EPOLLIN | EPOLLOUT;
		uev = c->ufd >= 0 ? EPOLLIN | EPOLLOUT : 0;
	}
	/* Any byte in or out is activity: a slow but moving transfer is not
	 * idle. */
	if ((c->state == FWD_EXCHANGE || c->state == FWD_HEAD) &&
	    io != c->up.in + c->up.out + c->down.in + c->down.out)
		fwd_touch(c);
	fwd_watch(c, cev, uev);
}

static void
fwd_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_fwd_conn *c = io->arg;

	(void)l;
	if (c->state == FWD_CLOSED)
		return;
	if (io == &c->cio) {
		c->skip_client_read = false;
		if (events & EPOLLERR) {
			fwd_close(c, GW_R_CLIENT_CLOSED);
			return;
		}
	}
	if (io == &c->uio) {
		c->skip_up_read = false;
		/* (An idle upstream's error is handled below; a tunnel finds
		 * its errors in send and recv.) */
		if ((events & EPOLLERR) && c->state == FWD_EXCHANGE) {
			int err = 0;
			socklen_t len = sizeof(err);

			getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len);
			fwd_upstream_failed(c, err);
			if (c->state == FWD_REFUSE)
				fwd_run(c);
			return;
		}
		if (c->state == FWD_HEAD && c->u_idle &&
			   (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) {
			/* An idle upstream connection spoke or closed: it
			 * cannot carry a next request any more. */
			gw_io_del(l, &c->uio);
			close(c->ufd);
			c->ufd = -1;
			c->u_idle = false;
			return;
		}
	}
	fwd_run(c);
}

static void
fwd_timeout(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_fwd_conn *c = t->arg;

	(void)l;
	/* Head, idle, refusal and linger deadlines all end the connection;
	 * a dial keeps its own (DNS, connect) and answers 504 itself. */
	fwd_close(c, c->state == FWD_LINGER || c->state == FWD_REFUSE ? GW_R_NONE
								      : GW_R_IDLE_TIMEOUT);
}

void
gw_fwd_accept(struct gw_worker *w, int fd, int lane)
{
#define BUSY_BODY "sluice: too-many-connections: the gateway is full\n"
	static const char busy[] =
		"HTTP/1.1 503 Service Unavailable\r\nSluice-Reason: too-many-connections\r\n"
		"Content-Type: text/plain\r\nContent-Length: 50\r\nConnection: close\r\n\r\n"
		BUSY_BODY;
	_Static_assert(sizeof(BUSY_BODY) - 1 == 50, "Content-Length of the busy answer");
	struct gw_snap *s = gw_snap_current();
	struct gw_fwd_conn *c;
	socklen_t sl = sizeof(struct sockaddr_storage);
	int one = 1;

	if (!s || !gw_conn_take(s->conf->gateway.max_connections)) {
		(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		gw_snap_unref(s);
		return;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		gw_conn_release();
		(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		gw_snap_unref(s);
		return;
	}
	c->w = w;
	c->snap = s;
	c->cfd = fd;
	c->ufd = -1;
	c->client_idx = -1;
	c->lane = lane;
	c->state = FWD_HEAD;
	gw_dial_init(&c->dial);
	getpeername(fd, (struct sockaddr *)&c->peer, &sl);
	gw_addr_format((struct sockaddr *)&c->peer, c->src, sizeof(c->src));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	gw_timer_init(&c->timer, fwd_timeout, c);
	gw_h1_parser_init(&c->parser, GW_H1_REQUEST, s->conf->gateway.max_header_bytes);
	gw_worker_conn_join(w, &c->node, fwd_shutdown);
	if (gw_io_add(w->loop, &c->cio, fd, EPOLLIN, fwd_io, c) < 0) {
		fwd_close(c, GW_R_INTERNAL);
		return;
	}
	c->t_start = gw_loop_now(w->loop);
	gw_timer_arm(w->loop, &c->timer, FWD_HEAD_TIMEOUT_MS);
	/* Most clients send at once: try before waiting for an event. */
	fwd_run(c);
}

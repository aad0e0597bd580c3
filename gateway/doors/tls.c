/* tls.c: the TLS door (SNI passthrough on a lane).
 *
 *   identity ──▶ HELLO ──▶ DIALING ──▶ TUNNEL
 *      │           │          │
 *      └───────────┴──────────┴──▶ closed: a log line (and, from HELLO
 *                                  on, an access line)
 *
 * Transparent guest TCP/443 lands here. The sandbox is known by source
 * address (nftables keeps sources honest); then the door reads, without
 * answering, up to the end of the ClientHello's record, and takes the
 * destination from its server name only: no SNI, or a hello it cannot read
 * strictly, and the connection is closed, never routed by a guess. The
 * name goes through the same policy check and dial (every resolved address
 * checked) as the other doors; the bytes read are then the tunnel's first,
 * and nothing is ever decrypted or changed.
 */
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
#include "lanes.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "tls.h"
#include "tlshello.h"
#include "tunnel.h"
#include "worker.h"

#define TLS_PORT     443
#define TLS_HELLO_MS 10000 /* accept to the end of the ClientHello */
/* Everything read before the tunnel is preloaded into it, so the buffer,
 * and with it the first record, can be no larger than a tunnel buffer. */
#define TLS_IN         GW_TUNNEL_BUF
#define TLS_MAX_RECORD (TLS_IN - GW_TLSHELLO_HEADER)
/* How much a refusal reads and drops before closing, so that unread bytes
 * do not turn the close into a reset. */
#define TLS_DRAIN 65536

#define TLS_STATES(X)                                                                              \
	X(HELLO, "hello")                                                                          \
	X(DIALING, "dialing")                                                                      \
	X(TUNNEL, "tunnel")                                                                        \
	X(CLOSED, "closed")

enum tls_state {
#define TLS_STATE_ENUM(id, name) TLS_##id,
	TLS_STATES(TLS_STATE_ENUM)
#undef TLS_STATE_ENUM
};

static const char *const tls_state_names[] = {
#define TLS_STATE_NAME(id, name) name,
    TLS_STATES(TLS_STATE_NAME)
#undef TLS_STATE_NAME
};

struct gw_tls_conn {
	struct gw_worker *w;
	struct gw_conn_node node; /* on the worker's list */
	enum tls_state state;
	struct gw_snap *snap;
	int lane;
	int cfd;
	int ufd;
	struct gw_io cio;
	struct gw_io uio;
	struct gw_timer timer; /* the hello deadline, then the idle timeout */
	struct gw_defer defer;
	struct gw_dial dial;
	struct gw_tunnel tun;
	struct gw_who who; /* the sandbox, with a reference on its policy */

	char src[GW_ADDR_FMT_MAX];
	struct sockaddr_storage peer;

	uint8_t *in; /* what the client sent before the tunnel */
	size_t inlen;
	size_t preloaded; /* of it, handed to the tunnel */

	char host[GW_HOST_MAX]; /* the server name, once read */
	bool report_only;
	enum gw_reason report_reason;
	enum gw_reason reason; /* why refused or ended, for the access line */
	unsigned status;       /* 200 tunnel, 403 policy, 502/504 dial, 0 hello */
	bool denied;
	char upstream[GW_ADDR_FMT_MAX];
	uint64_t t_start;
	uint64_t bytes_in;
	uint64_t bytes_out;
};

static void tls_run(struct gw_tls_conn *c);
static void tls_io(struct gw_loop *l, struct gw_io *io, uint32_t events);

static void
tls_set_state(struct gw_tls_conn *c, enum tls_state s)
{
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("tls %s: %s -> %s", c->src, tls_state_names[c->state],
		             tls_state_names[s]);
	c->state = s;
}

static const struct conf_gateway *
gwconf(const struct gw_tls_conn *c)
{
	return &c->snap->conf->gateway;
}

static const char *
lane_name(const struct gw_snap *s, int lane)
{
	if (lane >= 0 && (size_t)lane < s->conf->nlanes && s->conf->lanes[lane].name)
		return s->conf->lanes[lane].name;
	return "?";
}

static void
tls_log(struct gw_tls_conn *c)
{
	struct gw_access a = {
	    .door = "tls",
	    .client = c->who.name[0] ? c->who.name : NULL,
	    .src = c->src,
	    .policy = c->who.policy ? gw_policy_name(c->who.policy) : NULL,
	    .method = "TLS",
	    .host = c->host[0] ? c->host : NULL,
	    .port = TLS_PORT,
	    .decision = c->denied        ? "deny"
	                : c->report_only ? "report"
	                                 : "allow",
	    .reason = c->reason == GW_R_NONE && c->report_only ? c->report_reason : c->reason,
	    .upstream = c->upstream[0] ? c->upstream : NULL,
	    .status = c->status,
	    .bytes_in = c->bytes_in,
	    .bytes_out = c->bytes_out,
	    .duration_ms = gw_loop_now(c->w->loop) - c->t_start,
	};

	gw_access_write(&a);
}

/* Reads and drops what the client already sent (a bounded amount), then
 * closes: with unread bytes queued, close(2) would send a reset. */
static void
drain_close(int fd)
{
	char buf[4096];
	size_t total = 0;

	shutdown(fd, SHUT_WR);
	while (total < TLS_DRAIN) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (size_t)n;
	}
	close(fd);
}

static void
tls_free(void *arg)
{
	struct gw_tls_conn *c = arg;

	gw_snap_unref(c->snap);
	free(c);
}

/* The one way a connection ends: the access line, then every resource. */
static void
tls_close(struct gw_tls_conn *c, enum gw_reason why)
{
	struct gw_worker *w = c->w;
	uint64_t c2u;

	if (c->state == TLS_CLOSED)
		return;
	if (c->state == TLS_TUNNEL) {
		/* The tunnel counts the preloaded hello again: count it once. */
		c2u = c->tun.dir[GW_TUNNEL_C2U].bytes;
		c->bytes_in += c2u > c->preloaded ? c2u - c->preloaded : 0;
		c->bytes_out += c->tun.dir[GW_TUNNEL_U2C].bytes;
		gw_tunnel_fini(&c->tun);
	}
	if (c->reason == GW_R_NONE)
		c->reason = why;
	if (c->state == TLS_HELLO)
		c->denied = true; /* nothing was allowed: no name was read */
	tls_log(c);
	gw_dial_cancel(&c->dial);
	gw_timer_cancel(w->loop, &c->timer);
	gw_io_del(w->loop, &c->cio);
	if (c->state == TLS_TUNNEL)
		close(c->cfd);
	else
		drain_close(c->cfd);
	if (c->ufd >= 0) {
		gw_io_del(w->loop, &c->uio);
		close(c->ufd);
	}
	free(c->in);
	c->in = NULL;
	gw_who_clear(&c->who);
	tls_set_state(c, TLS_CLOSED);
	gw_worker_conn_leave(w, &c->node);
	gw_defer(w->loop, &c->defer, tls_free, c);
}

static void
tls_shutdown(struct gw_conn_node *n)
{
	tls_close(gw_conn_of(n, struct gw_tls_conn), GW_R_SHUTDOWN);
}

/* Refuses before the tunnel: one log line naming the sandbox and the
 * reason, then the close (and its access line). status: 0 for a hello we
 * would not route, 403 for the policy, 502/504 for the way there. */
static void tls_refuse(struct gw_tls_conn *c, unsigned status, enum gw_reason why, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static void
tls_refuse(struct gw_tls_conn *c, unsigned status, enum gw_reason why, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	gw_log_info("tls door: sandbox %s (%s, lane %s) refused: %s: %s", c->who.name, c->src,
	            lane_name(c->snap, c->lane), gw_reason_name(why), detail);
	c->status = status;
	c->reason = why;
	/* 502 and 504: allowed, but the way there failed */
	c->denied = status != 502 && status != 504;
	tls_close(c, why);
}

/* ---- the hello ---- */

static enum gw_reason
hello_reason(enum gw_tlshello_result r)
{
	switch (r) {
	case GW_TLSHELLO_NOT_TLS:
		return GW_R_TLS_NOT_TLS;
	case GW_TLSHELLO_NOT_CLIENT_HELLO:
		return GW_R_TLS_NOT_CLIENT_HELLO;
	case GW_TLSHELLO_NO_SNI:
		return GW_R_TLS_NO_SNI;
	case GW_TLSHELLO_BAD_SNI:
		return GW_R_TLS_BAD_SNI;
	case GW_TLSHELLO_FRAGMENTED:
		return GW_R_TLS_FRAGMENTED;
	case GW_TLSHELLO_TOO_BIG:
		return GW_R_TLS_TOO_BIG;
	case GW_TLSHELLO_MALFORMED:
		return GW_R_TLS_MALFORMED;
	default:
		return GW_R_INTERNAL;
	}
}

static void
tls_dialed(struct gw_dial *d, int fd, enum gw_reason why, int err, const char *detail, void *arg)
{
	struct gw_tls_conn *c = arg;

	(void)err;
	snprintf(c->upstream, sizeof(c->upstream), "%s", d->upstream);
	if (fd < 0) {
		tls_refuse(c, gw_dial_status(why), why, "%s:%u: %s", c->host, TLS_PORT, detail);
		return;
	}
	c->ufd = fd;
	c->status = 200;
	/* The hello, and anything the client sent after it, go first. */
	gw_tunnel_init(&c->tun, c->cfd, c->ufd, c->w->use_splice);
	tls_set_state(c, TLS_TUNNEL);
	if (gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, (const char *)c->in, c->inlen) < 0 ||
	    gw_io_add(c->w->loop, &c->uio, fd, 0, tls_io, c) < 0) {
		tls_close(c, GW_R_INTERNAL);
		return;
	}
	c->preloaded = c->inlen;
	free(c->in);
	c->in = NULL;
	c->inlen = 0;
	gw_timer_arm(c->w->loop, &c->timer, gwconf(c)->idle_timeout_ms);
	tls_run(c);
}

/* A ClientHello with a server name: check it and dial. */
static void
tls_hello_done(struct gw_tls_conn *c, const struct gw_tlshello *h)
{
	struct gw_policy_decision d;
	enum gw_reason why;

	/* The reader's rules are the stricter; the policy's spelling is the
	 * one checked, so insist the two agree. */
	if (gw_host_normalize(h->sni, h->sni_len, c->host, sizeof(c->host), &why) < 0 ||
	    strcmp(c->host, h->sni) != 0) {
		c->host[0] = '\0';
		tls_refuse(c, 0, GW_R_TLS_BAD_SNI, "server name not usable as a host");
		return;
	}
	if (gw_policy_check(c->who.policy, c->host, TLS_PORT, &d) < 0) {
		tls_refuse(c, 403, d.reason, "%s:%u refused by policy '%s'", c->host, TLS_PORT,
		           gw_policy_name(c->who.policy));
		return;
	}
	c->report_only = d.report_only;
	c->report_reason = d.reason;
	/* The dial keeps its own deadlines (DNS, connect). */
	gw_timer_cancel(c->w->loop, &c->timer);
	tls_set_state(c, TLS_DIALING);
	gw_io_mod(c->w->loop, &c->cio, 0);
	gw_dial_start(&c->dial, c->w, gwconf(c), c->who.policy, c->host, TLS_PORT, tls_dialed, c);
}

/* Reads until the hello is whole or refused, or the socket is dry. The
 * reader is re-run on the whole buffer each time (tlshello.h). */
static void
tls_read(struct gw_tls_conn *c)
{
	struct gw_tlshello h;
	enum gw_tlshello_result r;
	ssize_t n;

	if (!c->in && !(c->in = malloc(TLS_IN))) {
		tls_close(c, GW_R_INTERNAL);
		return;
	}
	for (;;) {
		n = recv(c->cfd, c->in + c->inlen, TLS_IN - c->inlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			gw_io_mod(c->w->loop, &c->cio, EPOLLIN);
			return;
		}
		if (n <= 0) {
			tls_close(c, GW_R_CLIENT_CLOSED);
			return;
		}
		c->inlen += (size_t)n;
		c->bytes_in += (uint64_t)n;
		r = gw_tlshello_parse(c->in, c->inlen, TLS_MAX_RECORD, &h);
		if (r == GW_TLSHELLO_OK) {
			tls_hello_done(c, &h);
			return;
		}
		if (r == GW_TLSHELLO_NO_SNI || r == GW_TLSHELLO_NOT_TLS) {
			tls_refuse(c, 0, hello_reason(r), "%s", h.msg);
			return;
		}
		if (r != GW_TLSHELLO_NEED_MORE) {
			tls_refuse(c, 0, hello_reason(r), "%s, at byte %zu", h.msg, h.at);
			return;
		}
		/* NEED_MORE always wants at most TLS_IN bytes (the record
		 * limit), so a full buffer is a bug. */
		if (c->inlen >= TLS_IN) {
			tls_close(c, GW_R_INTERNAL);
			return;
		}
	}
}

/* ---- the engine ---- */

static void
tls_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_tls_conn *c = io->arg;

	(void)l;
	if (c->state == TLS_CLOSED)
		return;
	if ((events & EPOLLERR) && c->state != TLS_TUNNEL) {
		tls_close(c, GW_R_CLIENT_CLOSED);
		return;
	}
	tls_run(c);
}

static void
tls_run(struct gw_tls_conn *c)
{
	switch (c->state) {
	case TLS_HELLO:
		tls_read(c);
		return;
	case TLS_DIALING:
		/* What the client sends meanwhile waits in the socket and
		 * becomes the tunnel's, after the hello. */
		gw_io_mod(c->w->loop, &c->cio, 0);
		return;
	case TLS_TUNNEL: {
		uint32_t cev, uev;
		bool moved;
		enum gw_tunnel_status ts = gw_tunnel_run(&c->tun, &cev, &uev, &moved);

		if (ts != GW_TUNNEL_RUNNING) {
			tls_close(c, ts == GW_TUNNEL_DONE ? GW_R_NONE : c->tun.reason);
			return;
		}
		if (moved)
			gw_timer_arm(c->w->loop, &c->timer, gwconf(c)->idle_timeout_ms);
		gw_io_mod(c->w->loop, &c->cio, cev);
		gw_io_mod(c->w->loop, &c->uio, uev);
		return;
	}
	case TLS_CLOSED:
		return;
	}
}

static void
tls_timeout(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_tls_conn *c = t->arg;

	(void)l;
	if (c->state == TLS_HELLO)
		gw_log_info("tls door: sandbox %s (%s, lane %s): no whole ClientHello in %u ms",
		            c->who.name, c->src, lane_name(c->snap, c->lane), TLS_HELLO_MS);
	tls_close(c, GW_R_IDLE_TIMEOUT);
}

void
gw_tls_accept(struct gw_worker *w, int fd, int lane)
{
	struct sockaddr_storage peer;
	socklen_t sl = sizeof(peer);
	char src[GW_ADDR_FMT_MAX];
	struct gw_who who;
	struct gw_snap *s = gw_snap_current();
	struct gw_tls_conn *c;
	int rc, one = 1;

	memset(&who, 0, sizeof(who));
	memset(&peer, 0, sizeof(peer));
	if (getpeername(fd, (struct sockaddr *)&peer, &sl) < 0 ||
	    gw_addr_format((struct sockaddr *)&peer, src, sizeof(src)) < 0)
		snprintf(src, sizeof(src), "-");
	if (!s) {
		close(fd);
		return;
	}
	/* Identity first: nothing is read from a stranger. */
	rc = gw_lane_who(lane, (struct sockaddr *)&peer, &who);
	if (rc < 0) {
		enum gw_reason why = rc == -EACCES ? GW_R_SANDBOX_LOCKED : GW_R_NOT_A_SANDBOX;

		gw_log_info("tls door: refusing %s%s%s on lane %s: %s", src,
		            who.name[0] ? ", sandbox " : "", who.name, lane_name(s, lane),
		            gw_reason_name(why));
		gw_who_clear(&who);
		drain_close(fd);
		gw_snap_unref(s);
		return;
	}
	if (!gw_conn_take(s->conf->gateway.max_connections)) {
		gw_log_warnx("tls door: refusing sandbox %s (%s): %s", who.name, src,
		             gw_reason_name(GW_R_TOO_MANY_CONNECTIONS));
		goto refuse;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		gw_conn_release();
		gw_log_warnx("tls door: refusing sandbox %s (%s): out of memory", who.name, src);
		goto refuse;
	}
	c->w = w;
	c->snap = s;
	c->lane = lane;
	c->cfd = fd;
	c->ufd = -1;
	c->who = who; /* the reference moves to c */
	c->peer = peer;
	memcpy(c->src, src, sizeof(c->src));
	c->state = TLS_HELLO;
	gw_dial_init(&c->dial);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	gw_timer_init(&c->timer, tls_timeout, c);
	gw_worker_conn_join(w, &c->node, tls_shutdown);
	c->t_start = gw_loop_now(w->loop);
	if (gw_io_add(w->loop, &c->cio, fd, EPOLLIN, tls_io, c) < 0) {
		tls_close(c, GW_R_INTERNAL);
		return;
	}
	gw_timer_arm(w->loop, &c->timer, TLS_HELLO_MS);
	tls_run(c);
	return;

refuse:
	gw_who_clear(&who);
	drain_close(fd);
	gw_snap_unref(s);
}

/* conn.c: what every door's connection shares (conn.h). */
#include <errno.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access.h"
#include "addr.h"
#include "conf.h"
#include "conn.h"
#include "dial.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "policy.h"
#include "reason.h"
#include "snap.h"
#include "tunnel.h"
#include "worker.h"
#include "xprt_tls.h"

/* How much a draining close reads and drops. */
#define DRAIN_MAX 65536

/* Connections over every door and worker, against max_connections. */
static uint64_t conns_live;

static bool
conn_take(uint32_t max)
{
	if (__atomic_add_fetch(&conns_live, 1, __ATOMIC_RELAXED) > max) {
		__atomic_sub_fetch(&conns_live, 1, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

static void
conn_release(void)
{
	__atomic_sub_fetch(&conns_live, 1, __ATOMIC_RELAXED);
}

uint64_t
gw_conns_live(void)
{
	return __atomic_load_n(&conns_live, __ATOMIC_RELAXED);
}

const struct conf_gateway *
gw_conn_gateway(const struct gw_conn *c)
{
	return &c->snap->conf->gateway;
}

void
gw_conn_set_state(struct gw_conn *c, unsigned state)
{
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("%s %s: %s -> %s", c->door->name, c->src, c->door->states[c->state],
			     c->door->states[state]);
	c->state = state;
}

static void
conn_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_conn *c = io->arg;
	bool upstream = io == &c->up.io;

	(void)l;
	if (c->closed)
		return;
	if (c->door->event) {
		if (!c->door->event(c, upstream, events) || c->closed)
			return;
	} else if (!upstream && (events & EPOLLERR) && !c->tunneling) {
		gw_conn_close(c, GW_R_CLIENT_CLOSED);
		return;
	}
	c->door->run(c);
}

static void
conn_timeout(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_conn *c = t->arg;

	(void)l;
	if (c->door->timeout)
		c->door->timeout(c);
	else
		gw_conn_close(c, GW_R_IDLE_TIMEOUT);
}

struct gw_conn *
gw_conn_accept(struct gw_worker *w, int fd, int lane, const struct gw_door *door)
{
	struct gw_snap *s = gw_snap_current();
	struct sockaddr_storage peer;
	socklen_t sl = sizeof(peer);
	char src[GW_ADDR_FMT_MAX];
	struct gw_conn *c = NULL;
	enum gw_reason why = GW_R_TOO_MANY_CONNECTIONS;
	int one = 1;

	memset(&peer, 0, sizeof(peer));
	if (getpeername(fd, (struct sockaddr *)&peer, &sl) < 0 ||
	    gw_addr_format((struct sockaddr *)&peer, src, sizeof(src)) < 0)
		snprintf(src, sizeof(src), "-");
	if (!s || !conn_take(s->conf->gateway.max_connections))
		goto busy;
	if (!(c = calloc(1, door->size))) {
		conn_release();
		why = GW_R_INTERNAL;
		goto busy;
	}
	c->door = door;
	c->w = w;
	c->snap = s;
	c->lane = lane;
	c->peer = peer;
	memcpy(c->src, src, sizeof(c->src));
	c->client_idx = -1;
	gw_xprt_tcp_init(&c->cli.tcp, fd);
	c->cli.x = &c->cli.tcp;
	gw_dial_init(&c->dial);
	gw_timer_init(&c->timer, conn_timeout, c);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->req.t_start = gw_loop_now(w->loop);
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	if (w->stack)
		w->stack(c, false);
	if (gw_io_add(w->loop, &c->cli.io, fd, EPOLLIN, conn_io, c) < 0) {
		gw_conn_close(c, GW_R_INTERNAL);
		return NULL;
	}
	return c;

busy:
	if (door->busy && s)
		door->busy(fd, src, why);
	else
		close(fd);
	gw_snap_unref(s);
	return NULL;
}

void
gw_conn_req_begin(struct gw_conn *c, const char *method)
{
	struct gw_conn_req *r = &c->req;
	/* Once intercepted, every request of the connection is. */
	enum gw_conn_mode keep = r->mode == GW_MODE_INTERCEPT ? GW_MODE_INTERCEPT : GW_MODE_NONE;

	/* The TLS facts are the connection's: every line of it has them. */
	memset(r, 0, offsetof(struct gw_conn_req, sni));
	r->mode = keep;
	snprintf(c->req.method, sizeof(c->req.method), "%s", method);
	c->req.open = true;
	c->req.t_start = gw_loop_now(c->w->loop);
}

void
gw_conn_req_inject(const struct gw_conn_req *r, char *out, size_t outsz)
{
	unsigned n = r->ninject < GW_INJECT_MAX ? r->ninject : GW_INJECT_MAX;
	size_t o = 0, need = 0;

	if (outsz == 0)
		return;
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		need += (i > 0) + strlen(r->inject[i]->name);
	for (unsigned i = 0; i < n; i++) {
		const char *name = r->inject[i]->name;
		size_t nl = strlen(name), sep = i > 0;

		/* All of it, or as many as leave room for "...". */
		if (need + 1 > outsz && o + sep + nl + 4 + 1 > outsz) {
			if (o + sep + 3 + 1 <= outsz)
				memcpy(out + o, sep ? ",..." : "...", sep + 3 + 1);
			return;
		}
		if (sep)
			out[o++] = ',';
		memcpy(out + o, name, nl + 1);
		o += nl;
	}
}

const char *
gw_conn_mode_name(enum gw_conn_mode m)
{
	static const char *const names[GW_MODE__COUNT] = {
		[GW_MODE_NONE] = NULL,
		[GW_MODE_HTTP] = "http",
		[GW_MODE_TUNNEL] = "tunnel",
		[GW_MODE_INTERCEPT] = "intercept",
	};

	return (unsigned)m < GW_MODE__COUNT ? names[m] : NULL;
}

void
gw_conn_tls_handshake(struct gw_conn *c, bool upstream, enum gw_reason why)
{
	struct gw_xprt *x = upstream ? c->up.x : c->cli.x;
	char *alpn = upstream ? c->req.alpn_up : c->req.alpn_down;
	bool ok = why == GW_R_NONE && x && gw_xprt_is_tls(x);

	snprintf(alpn, GW_CONN_ALPN_MAX, "%s", ok ? gw_xprt_tls_alpn(x) : "");
	gw_metrics_tls_handshake(upstream, why, ok && upstream && gw_xprt_tls_resumed(x));
}

void
gw_conn_log(struct gw_conn *c, enum gw_reason why)
{
	const struct conf_gateway *g = gw_conn_gateway(c);
	struct gw_conn_req *r = &c->req;
	enum gw_reason reason = r->reason != GW_R_NONE ? r->reason : why;
	char inject[GW_CONN_INJECT_MAX];
	struct gw_access a = {
		.door = c->door->name,
		.client = c->client_idx >= 0 ? g->clients[c->client_idx].name
			  : c->who.name[0]  ? c->who.name
					    : NULL,
		.src = c->src,
		.policy = c->policy ? gw_policy_name(c->policy) : NULL,
		.method = r->method,
		.host = r->host[0] ? r->host : NULL,
		.port = r->port,
		.decision = r->denied ? "deny" : r->report_only ? "report" : "allow",
		.reason = reason == GW_R_NONE && r->report_only ? r->report_reason : reason,
		.upstream = r->upstream[0] ? r->upstream : NULL,
		.status = r->status,
		.bytes_in = r->bytes_in,
		.bytes_out = r->bytes_out,
		.duration_ms = gw_loop_now(c->w->loop) - r->t_start,
		.mode = gw_conn_mode_name(r->mode),
		.sni = r->sni[0] ? r->sni : NULL,
		.alpn_down = r->alpn_down[0] ? r->alpn_down : NULL,
		.alpn_up = r->alpn_up[0] ? r->alpn_up : NULL,
		.layer = c->policy ? gw_policy_version(c->policy) : NULL,
		.inject = inject,
	};

	if (!r->open)
		return;
	gw_conn_req_inject(r, inject, sizeof(inject));
	if (!inject[0])
		a.inject = NULL;
	r->open = false;
	gw_access_write(&a);
}

void
gw_conn_drain_close(int fd)
{
	char buf[4096];
	size_t total = 0;

	shutdown(fd, SHUT_WR);
	while (total < DRAIN_MAX) {
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
conn_free(void *arg)
{
	struct gw_conn *c = arg;

	if (c->door->fini)
		c->door->fini(c);
	gw_who_clear(&c->who);
	gw_snap_unref(c->snap);
	free(c);
}

void
gw_conn_close(struct gw_conn *c, enum gw_reason why)
{
	struct gw_worker *w = c->w;

	if (c->closed)
		return;
	if (c->door->closing)
		c->door->closing(c, why);
	if (c->tunneling) {
		c->req.bytes_in += gw_tunnel_bytes(&c->tun, GW_TUNNEL_C2U);
		c->req.bytes_out += gw_tunnel_bytes(&c->tun, GW_TUNNEL_U2C);
		gw_tunnel_fini(&c->tun);
		c->tunneling = false;
	}
	gw_conn_log(c, why);
	gw_dial_cancel(&c->dial);
	gw_timer_cancel(w->loop, &c->timer);
	gw_io_del(w->loop, &c->cli.io);
	if (c->drain && c->cli.x == &c->cli.tcp) {
		gw_conn_drain_close(c->cli.tcp.fd);
		c->cli.tcp.fd = -1;
	}
	gw_xprt_close(c->cli.x);
	c->cli.x = NULL;
	gw_conn_upstream_drop(c);
	c->closed = true;
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("%s %s: %s -> closed", c->door->name, c->src,
			     c->door->states[c->state]);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	conn_release();
	/* Its descriptors are free: listeners paused for want of them
	 * need not wait for their back-off. */
	gw_worker_accept_resume(w);
	gw_defer(w->loop, &c->defer, conn_free, c);
}

struct gw_conn *
gw_conn_hand_over(struct gw_conn *c, const struct gw_door *door)
{
	struct gw_worker *w = c->w;
	struct gw_conn *n = calloc(1, door->size);
	struct gw_xprt *t;

	if (!n)
		return NULL;
	n->door = door;
	n->w = w;
	n->snap = gw_snap_ref(c->snap);
	n->lane = c->lane;
	n->peer = c->peer;
	memcpy(n->src, c->src, sizeof(n->src));
	n->client_idx = c->client_idx;
	n->who = c->who;
	memset(&c->who, 0, sizeof(c->who));     /* the reference moved */
	n->policy = c->policy;
	n->req = c->req;
	c->req.open = false;
	n->drain = c->drain;
	gw_dial_init(&n->dial);
	gw_timer_init(&n->timer, conn_timeout, n);

	/* The client's stack: the bottom is embedded, so the layer resting
	 * on it is pointed at the new one. */
	gw_timer_cancel(w->loop, &c->timer);
	gw_io_del(w->loop, &c->cli.io);
	n->cli.tcp = c->cli.tcp;
	n->cli.x = c->cli.x == &c->cli.tcp ? &n->cli.tcp : c->cli.x;
	for (t = n->cli.x; t && t != &n->cli.tcp; t = t->below)
		if (t->below == &c->cli.tcp)
			t->below = &n->cli.tcp;
	c->cli.x = NULL;
	c->cli.tcp.fd = -1;

	/* n takes c's place on the worker's list and in the count. */
	n->prev = c->prev;
	n->next = c->next;
	if (c->prev)
		c->prev->next = n;
	else
		w->conns = n;
	if (c->next)
		c->next->prev = n;
	c->prev = c->next = NULL;
	c->closed = true;
	if (gw_log_enabled(CONF_LOG_DEBUG))
		gw_log_debug("%s %s: %s -> handed to the %s door", c->door->name, c->src,
			     c->door->states[c->state], door->name);
	gw_defer(w->loop, &c->defer, conn_free, c);

	if (gw_io_add(w->loop, &n->cli.io, n->cli.tcp.fd, 0, conn_io, n) < 0) {
		gw_conn_close(n, GW_R_INTERNAL);
		return NULL;
	}
	return n;
}

void
gw_conns_close_all(struct gw_worker *w)
{
	while (w->conns)
		gw_conn_close(w->conns, GW_R_SHUTDOWN);
}

void
gw_conn_watch(struct gw_conn *c, uint32_t cev, uint32_t uev)
{
	if (c->closed)
		return;
	gw_io_mod(c->w->loop, &c->cli.io, cev);
	if (c->up.x)
		gw_io_mod(c->w->loop, &c->up.io, uev);
}

void
gw_conn_arm(struct gw_conn *c, uint64_t ms)
{
	gw_timer_arm(c->w->loop, &c->timer, ms);
}

void
gw_conn_disarm(struct gw_conn *c)
{
	gw_timer_cancel(c->w->loop, &c->timer);
}

static int conn_upstream_attach(struct gw_conn *c, int fd);

/* The dial's end, passed to the door with the upstream attached. */
static void
conn_dialed(struct gw_dial *d, int fd, enum gw_reason why, int err, const char *detail,
	    void *arg)
{
	struct gw_conn *c = arg;

	snprintf(c->req.upstream, sizeof(c->req.upstream), "%s", d->upstream);
	if (fd >= 0 && conn_upstream_attach(c, fd) < 0) {
		why = GW_R_INTERNAL;
		err = 0;
		detail = "cannot watch the upstream connection";
	}
	c->dialed(c, why, err, detail);
}

void
gw_conn_dial(struct gw_conn *c, const char *host, uint16_t port, gw_conn_dialed_fn dialed)
{
	c->dialed = dialed;
	if (c->w->dial)
		c->w->dial(&c->dial, c->w, host, port, conn_dialed, c);
	else
		gw_dial_start(&c->dial, c->w, gw_conn_gateway(c), c->policy, host, port,
			      conn_dialed, c);
}

/* Takes a connected upstream socket as c's upstream side. 0, or -1 with
 * fd closed. */
static int
conn_upstream_attach(struct gw_conn *c, int fd)
{
	gw_xprt_tcp_init(&c->up.tcp, fd);
	c->up.x = &c->up.tcp;
	if (c->w->stack)
		c->w->stack(c, true);
	if (gw_io_add(c->w->loop, &c->up.io, fd, 0, conn_io, c) < 0) {
		gw_xprt_close(c->up.x);
		c->up.x = NULL;
		return -1;
	}
	return 0;
}

void
gw_conn_upstream_drop(struct gw_conn *c)
{
	if (!c->up.x)
		return;
	gw_io_del(c->w->loop, &c->up.io);
	gw_xprt_close(c->up.x);
	c->up.x = NULL;
}

void
gw_conn_tunnel_gate(struct gw_conn *c)
{
	struct sockaddr_storage ss;

	if (gw_addr_parse_literal(c->req.host, strlen(c->req.host), &ss) == 0)
		gw_tunnel_gate_sni(&c->tun, c->req.host);
}

void
gw_conn_tunnel_start(struct gw_conn *c)
{
	gw_tunnel_init(&c->tun, c->cli.x, c->up.x, c->w->use_splice);
	/* A byte tunnel, unless the request was HTTP (an upgrade) or is
	 * inside an interception. */
	if (c->req.mode == GW_MODE_NONE)
		c->req.mode = GW_MODE_TUNNEL;
	c->tunneling = true;
	c->drain = false;
}

bool
gw_conn_tunnel_run(struct gw_conn *c)
{
	uint32_t cev, uev;
	bool moved;
	enum gw_tunnel_status ts = gw_tunnel_run(&c->tun, &cev, &uev, &moved);

	if (ts != GW_TUNNEL_RUNNING) {
		if (c->tun.refused) {
			/* The hello gate: the guest's first record named
			 * another host, or could not be read strictly. */
			gw_log_info("%s %s: %s:%u: %s: the guest's hello names %s", c->door->name,
				    c->src, c->req.host, c->req.port, gw_reason_name(c->tun.reason),
				    c->tun.seen);
			c->req.denied = true;
			if (c->tun.reason == GW_R_TLS_SNI_MISMATCH)
				snprintf(c->req.sni, sizeof(c->req.sni), "%.*s",
					 (int)sizeof(c->req.sni) - 1, c->tun.seen);
		}
		gw_conn_close(c, ts == GW_TUNNEL_DONE ? GW_R_NONE : c->tun.reason);
		return false;
	}
	if (moved)
		gw_conn_arm(c, gw_conn_gateway(c)->idle_timeout_ms);
	gw_conn_watch(c, cev, uev);
	return true;
}

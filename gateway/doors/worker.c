/* worker.c: worker threads, each with its own loop and listeners. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "addr.h"
#include "conn.h"
#include "dns.h"
#include "dnsd.h"
#include "named.h"
#include "fleet.h"
#include "intercept.h"
#include "fwd.h"
#include "log.h"
#include "loop.h"
#include "socks.h"
#include "sni.h"
#include "worker.h"

unsigned
gw_workers_auto(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

static const char *const door_names[] = {
	[GW_DOOR_FORWARD] = "forward",
	[GW_DOOR_SOCKS] = "socks",
	[GW_DOOR_SNI] = "sni",
	[GW_DOOR_DNS] = "dns",
	[GW_DOOR_DNS_UDP] = "dns",
	[GW_DOOR_NAMES] = "names",
};
/* The same, as the listener a failed accept names (accept.h). */
static const char *const door_listener_names[] = {
	[GW_DOOR_FORWARD] = "forward door",
	[GW_DOOR_SOCKS] = "socks door",
	[GW_DOOR_SNI] = "sni door",
	[GW_DOOR_DNS] = "dns door",
	[GW_DOOR_DNS_UDP] = "dns door",
	[GW_DOOR_NAMES] = "name door",
};
_Static_assert(sizeof(door_listener_names) / sizeof(door_listener_names[0]) == GW_DOOR_NAMES + 1,
	       "a name for every kind of listener");

/* A listening socket on sa, made in the fleet namespace when there is a
 * fleet (a lane door) or here (a host door). */
static int
listen_on(struct gw_fleet *fleet, const struct sockaddr *sa, socklen_t salen, const char *what,
	  bool udp, char *err, size_t errsz)
{
	int fd, one = 1, type = udp ? SOCK_DGRAM : SOCK_STREAM;

	if (fleet)
		fd = gw_fleet_socket(fleet, sa->sa_family, type | SOCK_NONBLOCK, 0);
	else
		fd = socket(sa->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		errno = fleet ? -fd : errno;
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, sa, salen) < 0)
		goto fail;
	if (!udp && listen(fd, 4096) < 0)
		goto fail;
	return fd;
fail:
	snprintf(err, errsz, "cannot listen on %s: %s", what, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Puts every listener of w in epoll (on) or takes them out. True when
 * all are where asked. */
static bool
listeners_watch(struct gw_worker *w, bool on)
{
	bool ok = true;

	for (size_t i = 0; i < w->nls; i++)
		if (gw_io_mod(w->loop, &w->ls[i].io, on ? EPOLLIN : 0) < 0)
			ok = false;
	return ok;
}

static void
accept_pause(struct gw_worker *w)
{
	/* Taken out of epoll, a listener with connections waiting no longer
	 * wakes the loop: nothing spins while the pause lasts. A timer that
	 * cannot be armed would leave the doors shut for good: then the
	 * listeners stay watched, and the next wake-up tries again. */
	if (gw_timer_arm(w->loop, &w->accept_timer,
			 gw_accept_backoff_next(&w->accept_backoff)) < 0)
		return;
	listeners_watch(w, false);
	w->accept_paused = true;
}

void
gw_worker_accept_resume(struct gw_worker *w)
{
	if (!w->accept_paused)
		return;
	gw_timer_cancel(w->loop, &w->accept_timer);
	w->accept_paused = false;
	/* epoll itself out of memory: try again at the next back-off. */
	if (!listeners_watch(w, true))
		accept_pause(w);
}

static void
on_accept_timer(struct gw_loop *l, struct gw_timer *t)
{
	(void)l;
	gw_worker_accept_resume(t->arg);
}

static void
on_accept(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_listener *ls = io->arg;
	struct gw_worker *w = ls->w;

	(void)l;
	(void)events;
	/* A bounded batch, so one busy listener cannot starve the rest. */
	for (int i = 0; i < 64; i++) {
		int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			enum gw_accept_next next =
				gw_accept_failed(errno, door_listener_names[ls->kind]);

			if (next == GW_ACCEPT_NEXT)
				continue;
			if (next == GW_ACCEPT_PAUSE)
				accept_pause(w);
			break;
		}
		gw_accept_ok();
		gw_accept_backoff_reset(&w->accept_backoff);
		switch (ls->kind) {
		case GW_DOOR_FORWARD:
			gw_fwd_accept(w, fd, ls->lane);
			break;
		case GW_DOOR_SOCKS:
			gw_socks_accept(w, fd, ls->lane);
			break;
		case GW_DOOR_SNI:
			gw_sni_accept(w, fd, ls->lane);
			break;
		case GW_DOOR_DNS:
			gw_dnsd_tcp_accept(w->dnsd, fd, ls->lane);
			break;
		case GW_DOOR_DNS_UDP:
			close(fd);      /* (never: no accept on a datagram socket) */
			break;
		case GW_DOOR_NAMES:
			gw_named_accept(w, fd, ls->lane);
			break;
		}
	}
}

static void
on_datagram(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_listener *ls = io->arg;

	(void)events;
	gw_dnsd_udp_ready(l, io->fd, ls->lane);
}

/* Adds one listener to w. */
static int
add_listener(struct gw_worker *w, struct gw_fleet *fleet, enum gw_door_kind kind, int lane,
	     const struct sockaddr *sa, socklen_t salen, const char *what, char *err, size_t errsz)
{
	struct gw_listener *ls = &w->ls[w->nls];

	ls->w = w;
	ls->kind = kind;
	ls->lane = lane;
	ls->fd = listen_on(fleet, sa, salen, what, kind == GW_DOOR_DNS_UDP, err, errsz);
	if (ls->fd < 0)
		return -1;
	w->nls++;
	if (gw_io_add(w->loop, &ls->io, ls->fd, EPOLLIN,
		      kind == GW_DOOR_DNS_UDP ? on_datagram : on_accept, ls) < 0) {
		snprintf(err, errsz, "epoll: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The host doors, then every egress lane's doors on its gateway address. */
static int
add_listeners(struct gw_worker *w, const struct conf *c, struct gw_fleet *fleet, char *err,
	      size_t errsz)
{
	const struct conf_hostport *hp[2] = { &c->gateway.listen_forward, &c->gateway.listen_socks };

	w->ls = calloc(2 + 6 * c->nlanes, sizeof(*w->ls));
	if (!w->ls) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		char what[300];

		if (!hp[k]->set)
			continue;
		snprintf(what, sizeof(what), "%s:%u", hp[k]->host, hp[k]->port);
		if (add_listener(w, NULL, k ? GW_DOOR_SOCKS : GW_DOOR_FORWARD, -1,
				 (const struct sockaddr *)&hp[k]->addr, hp[k]->addrlen, what, err,
				 errsz) < 0)
			return -1;
	}
	for (size_t i = 0; fleet && i < c->nlanes; i++) {
		const struct conf_lane *l = &c->lanes[i];
		const uint16_t ports[6] = { l->door_forward, l->door_socks, l->door_intercept,
					    l->door_dns, l->door_dns, l->door_names };
		const enum gw_door_kind kinds[6] = { GW_DOOR_FORWARD, GW_DOOR_SOCKS, GW_DOOR_SNI,
						     GW_DOOR_DNS, GW_DOOR_DNS_UDP, GW_DOOR_NAMES };
		struct sockaddr_in sin = { .sin_family = AF_INET };

		if (!l->egress)
			continue;
		memcpy(&sin.sin_addr, l->subnet.addr, 4);
		sin.sin_addr.s_addr = htonl(ntohl(sin.sin_addr.s_addr) + 1);
		for (int k = 0; k < 6; k++) {
			char what[160], a[INET_ADDRSTRLEN];

			if (!ports[k])
				continue;
			sin.sin_port = htons(ports[k]);
			inet_ntop(AF_INET, &sin.sin_addr, a, sizeof(a));
			snprintf(what, sizeof(what), "lane %s %s door %s:%u%s", l->name,
				 door_names[kinds[k]], a, ports[k],
				 kinds[k] == GW_DOOR_DNS_UDP ? "/udp" : "");
			if (add_listener(w, fleet, kinds[k], (int)i, (struct sockaddr *)&sin,
					 sizeof(sin), what, err, errsz) < 0)
				return -1;
		}
	}
	return 0;
}

static void
on_stop(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	uint64_t v;

	(void)events;
	(void)!read(io->fd, &v, sizeof(v));
	gw_loop_stop(l);
}

static void *
worker_main(void *arg)
{
	struct gw_worker *w = arg;
	int rc = gw_loop_run(w->loop);

	if (rc < 0) {
		errno = -rc;
		gw_log_err("worker %u: event loop failed", w->id);
	}
	gw_conns_close_all(w);
	return NULL;
}

static void
worker_fini(struct gw_worker *w)
{
	if (w->loop)
		gw_timer_cancel(w->loop, &w->accept_timer);
	for (size_t i = 0; i < w->nls; i++) {
		gw_io_del(w->loop, &w->ls[i].io);
		close(w->ls[i].fd);
	}
	free(w->ls);
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	gw_dnsd_free(w->dnsd);
	gw_dns_free(w->dns);
	gw_intercept_worker_fini(w);
	gw_loop_free(w->loop);
}

static int
worker_init(struct gw_worker *w, unsigned id, const struct conf *c, struct gw_fleet *fleet,
	    char *err, size_t errsz)
{
	char derr[256];

	memset(w, 0, sizeof(*w));
	w->id = id;
	w->stop_fd = -1;
	w->use_splice = !getenv("SLUICE_NO_SPLICE");
	gw_timer_init(&w->accept_timer, on_accept_timer, w);
	w->loop = gw_loop_new();
	if (!w->loop) {
		snprintf(err, errsz, "cannot create an event loop: %s", strerror(errno));
		return -1;
	}
	w->dns = gw_dns_new(w->loop, &c->gateway, derr, sizeof(derr));
	if (!w->dns) {
		snprintf(err, errsz, "DNS: %s", derr);
		goto fail;
	}
	w->dnsd = gw_dnsd_new(w->loop);
	if (!w->dnsd) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->stop_fd < 0 || gw_io_add(w->loop, &w->stop_io, w->stop_fd, EPOLLIN, on_stop, w) < 0) {
		snprintf(err, errsz, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (gw_intercept_worker_init(w, err, errsz) < 0)
		goto fail;
	if (add_listeners(w, c, fleet, err, errsz) < 0)
		goto fail;
	return 0;
fail:
	worker_fini(w);
	return -1;
}

/* Stops the first `started` workers' threads, then frees all n. */
static void
workers_teardown(struct gw_worker *ws, unsigned n, unsigned started)
{
	uint64_t one = 1;

	for (unsigned i = 0; i < started; i++)
		(void)!write(ws[i].stop_fd, &one, sizeof(one));
	for (unsigned i = 0; i < started; i++)
		pthread_join(ws[i].thread, NULL);
	for (unsigned i = 0; i < n; i++)
		worker_fini(&ws[i]);
	free(ws);
}

struct gw_worker *
gw_workers_start(const struct conf *c, struct gw_fleet *fleet, unsigned n, char *err,
		 size_t errsz)
{
	struct gw_worker *ws = calloc(n, sizeof(*ws));
	sigset_t all, old;
	unsigned i;

	if (!ws) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (worker_init(&ws[i], i, c, fleet, err, errsz) < 0) {
			workers_teardown(ws, i, 0);
			return NULL;
		}
	}
	/* Workers take no signals: the main thread's signalfd gets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < n; i++)
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0)
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (i < n) {
		snprintf(err, errsz, "cannot start worker thread %u", i);
		workers_teardown(ws, n, i);
		return NULL;
	}
	return ws;
}

void
gw_workers_stop(struct gw_worker *ws, unsigned n)
{
	if (ws)
		workers_teardown(ws, n, n);
}

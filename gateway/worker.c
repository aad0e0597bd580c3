/* worker.c: worker threads, each with its own loop and listeners. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "dns.h"
#include "fwd.h"
#include "log.h"
#include "loop.h"
#include "socks.h"
#include "worker.h"

static uint64_t conns_live;

bool
gw_conn_take(uint32_t max)
{
	if (__atomic_add_fetch(&conns_live, 1, __ATOMIC_RELAXED) > max) {
		__atomic_sub_fetch(&conns_live, 1, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

void
gw_conn_release(void)
{
	__atomic_sub_fetch(&conns_live, 1, __ATOMIC_RELAXED);
}

uint64_t
gw_conns_live(void)
{
	return __atomic_load_n(&conns_live, __ATOMIC_RELAXED);
}

void
gw_worker_conn_join(struct gw_worker *w, struct gw_conn_node *n,
		    void (*shutdown)(struct gw_conn_node *n))
{
	n->shutdown = shutdown;
	n->prev = NULL;
	n->next = w->conns;
	if (w->conns)
		w->conns->prev = n;
	w->conns = n;
}

void
gw_worker_conn_leave(struct gw_worker *w, struct gw_conn_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		w->conns = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->prev = n->next = NULL;
	gw_conn_release();
}

unsigned
gw_workers_auto(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

static int
listen_on(const struct conf_hostport *hp, char *err, size_t errsz)
{
	int fd, one = 1;

	fd = socket(hp->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, (const struct sockaddr *)&hp->addr, hp->addrlen) < 0)
		goto fail;
	if (listen(fd, 4096) < 0)
		goto fail;
	return fd;
fail:
	snprintf(err, errsz, "cannot listen on %s:%u: %s", hp->host, hp->port, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static void
on_accept(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_worker *w = io->arg;
	bool socks = io == &w->socks_io;

	(void)l;
	(void)events;
	/* A bounded batch, so one busy listener cannot starve the rest. */
	for (int i = 0; i < 64; i++) {
		int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				gw_log_warn("%s door: cannot accept", socks ? "socks" : "forward");
			break;
		}
		w->accepted++;
		if (socks)
			gw_socks_accept(w, fd);
		else
			gw_fwd_accept(w, fd);
	}
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
	while (w->conns)
		w->conns->shutdown(w->conns);
	return NULL;
}

static void
worker_fini(struct gw_worker *w)
{
	if (w->forward_fd >= 0) {
		gw_io_del(w->loop, &w->forward_io);
		close(w->forward_fd);
	}
	if (w->socks_fd >= 0) {
		gw_io_del(w->loop, &w->socks_io);
		close(w->socks_fd);
	}
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	gw_dns_free(w->dns);
	gw_loop_free(w->loop);
}

static int
worker_init(struct gw_worker *w, unsigned id, const struct conf *c, char *err, size_t errsz)
{
	char derr[256];

	memset(w, 0, sizeof(*w));
	w->id = id;
	w->forward_fd = w->socks_fd = w->stop_fd = -1;
	w->use_splice = !getenv("SLUICE_NO_SPLICE");
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
	w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->stop_fd < 0 || gw_io_add(w->loop, &w->stop_io, w->stop_fd, EPOLLIN, on_stop, w) < 0) {
		snprintf(err, errsz, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (c->gateway.listen_forward.set) {
		w->forward_fd = listen_on(&c->gateway.listen_forward, err, errsz);
		if (w->forward_fd < 0)
			goto fail;
		if (gw_io_add(w->loop, &w->forward_io, w->forward_fd, EPOLLIN, on_accept, w) < 0) {
			snprintf(err, errsz, "epoll: %s", strerror(errno));
			goto fail;
		}
	}
	if (c->gateway.listen_socks.set) {
		w->socks_fd = listen_on(&c->gateway.listen_socks, err, errsz);
		if (w->socks_fd < 0)
			goto fail;
		if (gw_io_add(w->loop, &w->socks_io, w->socks_fd, EPOLLIN, on_accept, w) < 0) {
			snprintf(err, errsz, "epoll: %s", strerror(errno));
			goto fail;
		}
	}
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
gw_workers_start(const struct conf *c, unsigned n, char *err, size_t errsz)
{
	struct gw_worker *ws = calloc(n, sizeof(*ws));
	sigset_t all, old;
	unsigned i;

	if (!ws) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (worker_init(&ws[i], i, c, err, errsz) < 0) {
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

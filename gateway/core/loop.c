/* loop.c: epoll, one timerfd for every timer (a binary min-heap of
 * deadlines), one signalfd, and a defer list run after each batch. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"

#define GW_LOOP_BATCH 256

struct gw_loop {
	int epfd;
	bool stop;
	bool in_batch;
	bool in_timers;
	uint64_t now;

	struct gw_io tfd_io;            /* the timerfd */
	uint64_t tfd_armed;             /* deadline the timerfd holds; 0: none */
	struct gw_timer **heap;
	size_t nheap;
	size_t capheap;

	struct gw_io sig_io;            /* the signalfd, fd -1 until asked */
	gw_signal_cb sig_cb;
	void *sig_arg;

	struct gw_defer *defer_head;
	struct gw_defer **defer_tail;
};

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t
gw_loop_now(struct gw_loop *l)
{
	return l->now;
}

/* ---- fd watches ---- */

int
gw_io_add(struct gw_loop *l, struct gw_io *io, int fd, uint32_t events,
	  gw_io_cb cb, void *arg)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	io->fd = fd;
	io->events = events;
	io->cb = cb;
	io->arg = arg;
	/* No interest yet: not in epoll (see gw_io_mod). */
	if (events && epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	io->added = true;
	io->in_epoll = events != 0;
	return 0;
}

int
gw_io_mod(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	int op;

	if (!io->added)
		return -EINVAL;
	if (io->events == events && io->in_epoll == (events != 0))
		return 0;
	if (events == 0)
		op = EPOLL_CTL_DEL;
	else
		op = io->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(l->epfd, op, io->fd, op == EPOLL_CTL_DEL ? NULL : &ev) < 0)
		return -errno;
	io->events = events;
	io->in_epoll = events != 0;
	return 0;
}

void
gw_io_del(struct gw_loop *l, struct gw_io *io)
{
	if (!io->added)
		return;
	if (io->in_epoll)
		(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->added = false;
	io->in_epoll = false;
	io->events = 0;
}

/* ---- timers ---- */

static void
heap_set(struct gw_loop *l, size_t i, struct gw_timer *t)
{
	l->heap[i] = t;
	t->slot = i;
}

static void
heap_up(struct gw_loop *l, size_t i)
{
	struct gw_timer *t = l->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (l->heap[parent]->deadline <= t->deadline)
			break;
		heap_set(l, i, l->heap[parent]);
		i = parent;
	}
	heap_set(l, i, t);
}

static void
heap_down(struct gw_loop *l, size_t i)
{
	struct gw_timer *t = l->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= l->nheap)
			break;
		if (c + 1 < l->nheap && l->heap[c + 1]->deadline < l->heap[c]->deadline)
			c++;
		if (t->deadline <= l->heap[c]->deadline)
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

static void
heap_remove(struct gw_loop *l, struct gw_timer *t)
{
	size_t i = t->slot;
	struct gw_timer *last = l->heap[--l->nheap];

	t->slot = SIZE_MAX;
	if (last == t)
		return;
	heap_set(l, i, last);
	heap_up(l, i);
	heap_down(l, last->slot);
}

/* Points the timerfd at the earliest deadline, touching it only when that
 * changed: most arms (idle timeouts pushed forward) do not move the head. */
static void
timerfd_sync(struct gw_loop *l)
{
	uint64_t want = l->nheap ? l->heap[0]->deadline : 0;
	struct itimerspec its = { 0 };

	if (want == l->tfd_armed)
		return;
	if (want) {
		/* 0 would disarm: a deadline already due fires in 1 ns. */
		its.it_value.tv_sec = (time_t)(want / 1000);
		its.it_value.tv_nsec = (long)(want % 1000) * 1000000L;
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(l->tfd_io.fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		l->tfd_armed = want;
}

void
gw_timer_init(struct gw_timer *t, gw_timer_cb cb, void *arg)
{
	t->deadline = 0;
	t->slot = SIZE_MAX;
	t->cb = cb;
	t->arg = arg;
}

bool
gw_timer_armed(const struct gw_timer *t)
{
	return t->slot != SIZE_MAX;
}

int
gw_timer_arm(struct gw_loop *l, struct gw_timer *t, uint64_t after_ms)
{
	uint64_t deadline = l->now + after_ms;

	if (deadline < l->now)
		deadline = UINT64_MAX;
	/* Armed from a timer callback for "now": wait for the next turn, so
	 * a timer re-arming itself with 0 cannot starve the fds. */
	if (l->in_timers && deadline <= l->now)
		deadline = l->now + 1;
	if (gw_timer_armed(t)) {
		uint64_t old = t->deadline;

		t->deadline = deadline;
		if (deadline < old)
			heap_up(l, t->slot);
		else
			heap_down(l, t->slot);
	} else {
		if (l->nheap == l->capheap) {
			size_t cap = l->capheap ? l->capheap * 2 : 64;
			struct gw_timer **h = realloc(l->heap, cap * sizeof(*h));

			if (!h)
				return -ENOMEM;
			l->heap = h;
			l->capheap = cap;
		}
		t->deadline = deadline;
		heap_set(l, l->nheap++, t);
		heap_up(l, t->slot);
	}
	if (!l->in_batch)
		timerfd_sync(l);
	return 0;
}

void
gw_timer_cancel(struct gw_loop *l, struct gw_timer *t)
{
	if (!gw_timer_armed(t))
		return;
	heap_remove(l, t);
	if (!l->in_batch)
		timerfd_sync(l);
}

static void
timers_run(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	uint64_t expirations;

	(void)events;
	while (read(io->fd, &expirations, sizeof(expirations)) > 0)
		;
	l->tfd_armed = 0;       /* it fired: it holds nothing now */
	l->now = mono_ms();
	l->in_timers = true;
	while (l->nheap && l->heap[0]->deadline <= l->now) {
		struct gw_timer *t = l->heap[0];

		heap_remove(l, t);
		t->cb(l, t);
	}
	l->in_timers = false;
}

/* ---- signals ---- */

int
gw_loop_signals(struct gw_loop *l, const int *sigs, size_t n,
		gw_signal_cb cb, void *arg)
{
	sigset_t set;
	int fd, rc;

	if (l->sig_io.added)
		return -EBUSY;
	sigemptyset(&set);
	for (size_t i = 0; i < n; i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	l->sig_cb = cb;
	l->sig_arg = arg;
	rc = gw_io_add(l, &l->sig_io, fd, EPOLLIN, NULL, NULL);
	if (rc < 0)
		close(fd);
	return rc;
}

static void
signals_run(struct gw_loop *l)
{
	struct signalfd_siginfo si;

	while (read(l->sig_io.fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		l->sig_cb(l, (int)si.ssi_signo, l->sig_arg);
}

/* ---- deferred work ---- */

void
gw_defer(struct gw_loop *l, struct gw_defer *d, gw_defer_cb cb, void *arg)
{
	if (d->queued)
		return;
	d->cb = cb;
	d->arg = arg;
	if (!l->in_batch) {
		cb(arg);
		return;
	}
	d->queued = true;
	d->next = NULL;
	*l->defer_tail = d;
	l->defer_tail = &d->next;
}

static void
defer_run(struct gw_loop *l)
{
	while (l->defer_head) {
		struct gw_defer *d = l->defer_head;

		l->defer_head = d->next;
		if (!l->defer_head)
			l->defer_tail = &l->defer_head;
		d->queued = false;
		d->cb(d->arg);
	}
}

/* ---- the loop ---- */

struct gw_loop *
gw_loop_new(void)
{
	struct gw_loop *l = calloc(1, sizeof(*l));
	int tfd;

	if (!l)
		return NULL;
	l->sig_io.fd = -1;
	l->defer_tail = &l->defer_head;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		goto fail;
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tfd < 0)
		goto fail;
	if (gw_io_add(l, &l->tfd_io, tfd, EPOLLIN, timers_run, NULL) < 0) {
		close(tfd);
		goto fail;
	}
	l->now = mono_ms();
	return l;
fail:
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
	return NULL;
}

void
gw_loop_free(struct gw_loop *l)
{
	if (!l)
		return;
	if (l->sig_io.fd >= 0)
		close(l->sig_io.fd);
	close(l->tfd_io.fd);
	close(l->epfd);
	for (size_t i = 0; i < l->nheap; i++)
		l->heap[i]->slot = SIZE_MAX;
	free(l->heap);
	free(l);
}

void
gw_loop_stop(struct gw_loop *l)
{
	l->stop = true;
}

int
gw_loop_run(struct gw_loop *l)
{
	struct epoll_event evs[GW_LOOP_BATCH];

	l->stop = false;
	while (!l->stop) {
		int n;

		timerfd_sync(l);
		n = epoll_wait(l->epfd, evs, GW_LOOP_BATCH, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		l->now = mono_ms();
		l->in_batch = true;
		for (int i = 0; i < n; i++) {
			struct gw_io *io = evs[i].data.ptr;

			/* Removed (or silenced) by an earlier callback of
			 * this batch. */
			if (!io->added || !io->in_epoll)
				continue;
			if (io == &l->sig_io)
				signals_run(l);
			else if (io == &l->tfd_io)
				timers_run(l, io, evs[i].events);
			else
				io->cb(l, io, evs[i].events);
		}
		defer_run(l);
		l->in_batch = false;
	}
	return 0;
}

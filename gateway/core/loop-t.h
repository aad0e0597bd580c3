/* loop-t.h: the event loop's types. */
#ifndef SLUICE_GW_LOOP_T_H
#define SLUICE_GW_LOOP_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_loop;
struct gw_io;
struct gw_timer;

/* `events` is the EPOLL* mask that fired. */
typedef void (*gw_io_cb)(struct gw_loop *l, struct gw_io *io, uint32_t events);
typedef void (*gw_timer_cb)(struct gw_loop *l, struct gw_timer *t);
typedef void (*gw_signal_cb)(struct gw_loop *l, int signo, void *arg);
typedef void (*gw_defer_cb)(void *arg);

/* An fd watch. Owned by the caller (usually embedded in a connection); the
 * loop only points at it between gw_io_add() and gw_io_del(). */
struct gw_io {
	int fd;
	uint32_t events;
	gw_io_cb cb;
	void *arg;
	bool added;             /* between gw_io_add() and gw_io_del() */
	bool in_epoll;          /* false while its interest is 0 */
};

/* A one-shot timer, also caller-owned. Deadlines are CLOCK_MONOTONIC ms. */
struct gw_timer {
	uint64_t deadline;
	size_t slot;            /* index in the loop's heap; SIZE_MAX: idle */
	gw_timer_cb cb;
	void *arg;
};

/* Work to run after the current batch of events: frees that must not happen
 * while a later event of the same batch may still name the object. */
struct gw_defer {
	struct gw_defer *next;
	gw_defer_cb cb;
	void *arg;
	bool queued;
};

#endif

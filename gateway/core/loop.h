/* loop.h: one epoll event loop per thread, with timers on one timerfd and
 * signals on a signalfd. Nothing in it is thread-safe: a loop belongs to the
 * thread that runs it. */
#ifndef SLUICE_GW_LOOP_H
#define SLUICE_GW_LOOP_H

#include "loop-t.h"

/* Returns a new loop, or NULL with errno set. */
struct gw_loop *gw_loop_new(void);
/* Frees the loop; watches and timers still registered are forgotten, not
 * called. NULL is a no-op. */
void gw_loop_free(struct gw_loop *l);

/* Runs until gw_loop_stop(). Returns 0, or -errno if epoll itself fails. */
int gw_loop_run(struct gw_loop *l);
void gw_loop_stop(struct gw_loop *l);

/* The loop's clock: CLOCK_MONOTONIC in ms, read once per wakeup. */
uint64_t gw_loop_now(struct gw_loop *l);

/* Watches io->fd for `events` (EPOLLIN, EPOLLOUT, ...). 0 or -errno. */
int gw_io_add(struct gw_loop *l, struct gw_io *io, int fd, uint32_t events,
	      gw_io_cb cb, void *arg);
/* Changes the interest. An interest of 0 takes the fd out of epoll
 * altogether, so that EPOLLHUP and EPOLLERR, which epoll reports whatever
 * the interest, cannot wake a connection that waits on something else. */
int gw_io_mod(struct gw_loop *l, struct gw_io *io, uint32_t events);
/* Stops watching; does not close the fd. Safe on an io never added. An io
 * removed inside a callback may still be named by a later event of the same
 * batch: free its owner through gw_defer(), never directly. */
void gw_io_del(struct gw_loop *l, struct gw_io *io);

void gw_timer_init(struct gw_timer *t, gw_timer_cb cb, void *arg);
/* (Re)arms t to fire once, `after_ms` from now. 0 or -ENOMEM. */
int gw_timer_arm(struct gw_loop *l, struct gw_timer *t, uint64_t after_ms);
void gw_timer_cancel(struct gw_loop *l, struct gw_timer *t);
bool gw_timer_armed(const struct gw_timer *t);

/* Blocks `sigs` for the calling thread and delivers them through a signalfd
 * to cb. Call once per loop. 0 or -errno. */
int gw_loop_signals(struct gw_loop *l, const int *sigs, size_t n,
		    gw_signal_cb cb, void *arg);

/* Queues d to run after the current batch (at once, if none is running).
 * Queuing an already queued d is a no-op. */
void gw_defer(struct gw_loop *l, struct gw_defer *d, gw_defer_cb cb, void *arg);

#endif

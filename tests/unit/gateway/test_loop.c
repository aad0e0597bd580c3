/* test_loop.c: the event loop's timers, fds, signals and deferred work. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "loop.h"

static int order[16];
static int norder;

static void
record(struct gw_loop *l, struct gw_timer *t)
{
	order[norder++] = (int)(intptr_t)t->arg;
	if (norder == 4)
		gw_loop_stop(l);
}

/* Timers fire in deadline order whatever the arming order; a cancelled
 * one never fires; re-arming moves a timer. */
static void
test_timers_order(void **state)
{
	struct gw_loop *l = gw_loop_new();
	struct gw_timer t[6];

	(void)state;
	assert_non_null(l);
	norder = 0;
	for (int i = 0; i < 6; i++)
		gw_timer_init(&t[i], record, (void *)(intptr_t)i);
	assert_int_equal(gw_timer_arm(l, &t[0], 40), 0);
	assert_int_equal(gw_timer_arm(l, &t[1], 10), 0);
	assert_int_equal(gw_timer_arm(l, &t[2], 30), 0);
	assert_int_equal(gw_timer_arm(l, &t[3], 20), 0);
	assert_int_equal(gw_timer_arm(l, &t[4], 5), 0);
	assert_int_equal(gw_timer_arm(l, &t[5], 1), 0);
	gw_timer_cancel(l, &t[4]);
	assert_false(gw_timer_armed(&t[4]));
	assert_int_equal(gw_timer_arm(l, &t[5], 100000), 0);   /* moved late */
	assert_int_equal(gw_loop_run(l), 0);
	assert_int_equal(norder, 4);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 3);
	assert_int_equal(order[2], 2);
	assert_int_equal(order[3], 0);
	assert_true(gw_timer_armed(&t[5]));
	gw_timer_cancel(l, &t[5]);
	gw_loop_free(l);
}

static int rearms;

static void
rearm_zero(struct gw_loop *l, struct gw_timer *t)
{
	if (++rearms == 3) {
		gw_loop_stop(l);
		return;
	}
	gw_timer_arm(l, t, 0);
}

/* A timer re-arming itself for "now" runs again on a later turn instead
 * of spinning inside one. */
static void
test_timer_rearm_zero(void **state)
{
	struct gw_loop *l = gw_loop_new();
	struct gw_timer t;

	(void)state;
	rearms = 0;
	gw_timer_init(&t, rearm_zero, NULL);
	gw_timer_arm(l, &t, 0);
	assert_int_equal(gw_loop_run(l), 0);
	assert_int_equal(rearms, 3);
	gw_loop_free(l);
}

struct pipe_state {
	struct gw_io io;
	struct gw_defer defer;
	int reads;
	int deferred;
};

static void
deferred(void *arg)
{
	struct pipe_state *ps = arg;

	ps->deferred++;
}

static void
on_read(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct pipe_state *ps = io->arg;
	char buf[16];

	assert_true(events & EPOLLIN);
	assert_int_equal(read(io->fd, buf, sizeof(buf)), 5);
	ps->reads++;
	gw_io_del(l, io);
	/* Queued twice, runs once, and only after the batch. */
	gw_defer(l, &ps->defer, deferred, ps);
	gw_defer(l, &ps->defer, deferred, ps);
	assert_int_equal(ps->deferred, 0);
	gw_loop_stop(l);
}

static void
test_io_and_defer(void **state)
{
	struct gw_loop *l = gw_loop_new();
	struct pipe_state ps = { 0 };
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(gw_io_add(l, &ps.io, fds[0], EPOLLIN, on_read, &ps), 0);
	assert_int_equal(gw_io_add(l, &ps.io, fds[0], EPOLLIN, on_read, &ps), -EEXIST);
	assert_int_equal(write(fds[1], "hello", 5), 5);
	assert_int_equal(gw_loop_run(l), 0);
	assert_int_equal(ps.reads, 1);
	assert_int_equal(ps.deferred, 1);
	assert_false(ps.io.added);
	gw_io_del(l, &ps.io);   /* a second del is harmless */
	close(fds[0]);
	close(fds[1]);
	gw_loop_free(l);
}

static int hup_wakeups;

static void
count_hup(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	(void)l;
	(void)io;
	(void)events;
	hup_wakeups++;
}

static void
stop_timer(struct gw_loop *l, struct gw_timer *t)
{
	(void)t;
	gw_loop_stop(l);
}

/* epoll reports EPOLLHUP whatever the interest: an fd whose interest is 0
 * must be out of epoll, or a hung-up peer busy-loops its connection. */
static void
test_io_mod_zero_silences_hup(void **state)
{
	struct gw_loop *l = gw_loop_new();
	struct gw_io io = { 0 };
	struct gw_timer t;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);                   /* sv[0] is hung up now */
	hup_wakeups = 0;
	assert_int_equal(gw_io_add(l, &io, sv[0], EPOLLIN, count_hup, NULL), 0);
	assert_int_equal(gw_io_mod(l, &io, 0), 0);
	gw_timer_init(&t, stop_timer, NULL);
	gw_timer_arm(l, &t, 50);
	assert_int_equal(gw_loop_run(l), 0);
	assert_int_equal(hup_wakeups, 0);
	/* Interest back: it is reported again. */
	assert_int_equal(gw_io_mod(l, &io, EPOLLIN), 0);
	gw_timer_arm(l, &t, 20);
	assert_int_equal(gw_loop_run(l), 0);
	assert_true(hup_wakeups > 0);
	gw_io_del(l, &io);
	close(sv[0]);
	gw_loop_free(l);
}

static int got_signal;

static void
on_sig(struct gw_loop *l, int signo, void *arg)
{
	(void)arg;
	got_signal = signo;
	gw_loop_stop(l);
}

static void
test_signals(void **state)
{
	static const int sigs[] = { SIGUSR1 };
	struct gw_loop *l = gw_loop_new();

	(void)state;
	assert_int_equal(gw_loop_signals(l, sigs, 1, on_sig, NULL), 0);
	assert_int_equal(gw_loop_signals(l, sigs, 1, on_sig, NULL), -EBUSY);
	kill(getpid(), SIGUSR1);
	assert_int_equal(gw_loop_run(l), 0);
	assert_int_equal(got_signal, SIGUSR1);
	gw_loop_free(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timers_order),
		cmocka_unit_test(test_timer_rearm_zero),
		cmocka_unit_test(test_io_and_defer),
		cmocka_unit_test(test_signals),
		cmocka_unit_test(test_io_mod_zero_silences_hup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

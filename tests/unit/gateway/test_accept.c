/* test_accept.c: gateway/core/accept.c. What each accept(2) error means
 * (bad inputs first: the errors a listener must never pause on, and those
 * it must), then episodes (one log line and one count however many
 * failures and listeners, closed only after the quiet time, on a fake
 * clock), many threads failing at once, and the back-off's steps.
 *
 * The file includes accept.c to replace its clock; the library's copy is
 * then never linked in. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../gateway/core/accept.c"

#include "../sl_test.h"
#include "conf.h"

static uint64_t fake_ms = 1000000;

static uint64_t
fake_now(void)
{
	return fake_ms;
}

/* The log goes to a pipe; lines() counts what came since the last call. */
static int logp[2] = {-1, -1};

static int
setup(void **state)
{
	(void)state;
	if (pipe2(logp, O_NONBLOCK | O_CLOEXEC) < 0)
		return -1;
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, logp[1]);
	accept_now = fake_now;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, 2);
	close(logp[0]);
	close(logp[1]);
	return 0;
}

static char last_line[16384];

static int
lines(void)
{
	char buf[16384];
	ssize_t n;
	int count = 0;

	while ((n = read(logp[0], buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		for (char *p = buf; (p = strchr(p, '\n')); p++)
			count++;
		snprintf(last_line, sizeof(last_line), "%s", buf);
	}
	return count;
}

/* Ends any open episode (a success after the quiet time). */
static void
close_episode(void)
{
	fake_ms += GW_ACCEPT_QUIET_MS;
	gw_accept_ok();
	assert_false(gw_accept_exhausted());
	(void)lines();
}

/* ---- what each error means -------------------------------------------- */

static void
test_per_connection_errors_never_pause(void **state)
{
	/* Linux hands a network error pending on the new socket to accept();
	 * none of them says anything about the listener. */
	static const int next[] = {EINTR,        ECONNABORTED, EPERM,       EPROTO,
	                           ENETDOWN,     ENOPROTOOPT,  EHOSTDOWN,   ENONET,
	                           EHOSTUNREACH, EOPNOTSUPP,   ENETUNREACH, ETIMEDOUT};
	uint64_t before = gw_accept_episodes();

	(void)state;
	close_episode();
	for (size_t i = 0; i < sizeof(next) / sizeof(next[0]); i++)
		assert_int_equal(gw_accept_failed(next[i], "t"), GW_ACCEPT_NEXT);
	assert_int_equal(gw_accept_failed(EAGAIN, "t"), GW_ACCEPT_DRAINED);
	assert_int_equal(gw_accept_failed(EWOULDBLOCK, "t"), GW_ACCEPT_DRAINED);
	assert_false(gw_accept_exhausted());
	assert_int_equal(gw_accept_episodes(), before);
	assert_int_equal(lines(), 0);
}

static void
test_exhaustion_and_the_unexpected_pause(void **state)
{
	/* Descriptors and memory, and anything unknown (a broken listener):
	 * retrying at once cannot help, and would spin. */
	static const int pause[] = {EMFILE, ENFILE, ENOBUFS, ENOMEM, EBADF, EINVAL, ENOTSOCK};

	(void)state;
	for (size_t i = 0; i < sizeof(pause) / sizeof(pause[0]); i++) {
		uint64_t before = gw_accept_episodes();

		close_episode();
		assert_int_equal(gw_accept_failed(pause[i], "socks door"), GW_ACCEPT_PAUSE);
		assert_true(gw_accept_exhausted());
		assert_int_equal(gw_accept_episodes(), before + 1);
		assert_int_equal(lines(), 1);
	}
}

/* ---- episodes ------------------------------------------------------------ */

static void
test_one_line_and_one_count_per_episode(void **state)
{
	uint64_t before;

	(void)state;
	close_episode();
	before = gw_accept_episodes();
	/* Many failures, several listeners, EMFILE and ENFILE mixed. */
	for (int i = 0; i < 10000; i++) {
		assert_int_equal(gw_accept_failed(i % 3 ? EMFILE : ENFILE,
		                                  i % 2 ? "socks door" : "API 127.0.0.1:8080"),
		                 GW_ACCEPT_PAUSE);
		fake_ms += 3;
	}
	assert_int_equal(gw_accept_episodes(), before + 1);
	assert_int_equal(lines(), 1);
	/* The line names the listener, the cause and the fix. */
	assert_non_null(strstr(last_line, "warn"));
	assert_non_null(strstr(last_line, "API 127.0.0.1:8080: cannot accept connections: the "
	                                  "system's file table is full (ENFILE)"));
	assert_non_null(strstr(last_line, "logged once per episode"));
	assert_non_null(strstr(last_line, "fs.file-max"));

	/* A success inside the quiet time does not end it: at the edge of
	 * the limit every freed descriptor is taken, and the next accept
	 * fails again, in the same episode. */
	for (int i = 0; i < 100; i++) {
		fake_ms += GW_ACCEPT_QUIET_MS / 4;
		gw_accept_ok();
		assert_true(gw_accept_exhausted());
		assert_int_equal(gw_accept_failed(EMFILE, "forward door"), GW_ACCEPT_PAUSE);
	}
	assert_int_equal(gw_accept_episodes(), before + 1);
	assert_int_equal(lines(), 0);

	/* Quiet for long enough: the next success ends it, and the next
	 * failure is a new episode, logged and counted again. */
	fake_ms += GW_ACCEPT_QUIET_MS - 1;
	gw_accept_ok();
	assert_true(gw_accept_exhausted());
	fake_ms += 1;
	gw_accept_ok();
	assert_false(gw_accept_exhausted());
	gw_accept_ok();
	assert_false(gw_accept_exhausted());
	assert_int_equal(gw_accept_failed(EMFILE, "forward door"), GW_ACCEPT_PAUSE);
	assert_int_equal(gw_accept_episodes(), before + 2);
	assert_int_equal(lines(), 1);
	assert_non_null(strstr(last_line, "forward door: cannot accept connections: out of file "
	                                  "descriptors (the process's limit, EMFILE)"));
	assert_non_null(strstr(last_line, "LimitNOFILE"));
}

/* Every worker of the daemon hits the limit at the same moment. */
static void *
fail_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++)
		(void)gw_accept_failed(EMFILE, "sni door");
	return NULL;
}

static void
test_threads_open_one_episode(void **state)
{
	pthread_t t[4];
	uint64_t before;

	(void)state;
	close_episode();
	before = gw_accept_episodes();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, fail_many, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(gw_accept_episodes(), before + 1);
	assert_int_equal(lines(), 1);
}

/* ---- back-off ------------------------------------------------------------ */

static void
test_backoff_doubles_to_its_cap_and_resets(void **state)
{
	struct gw_accept_backoff b = {0};
	uint32_t prev = 0;

	(void)state;
	assert_int_equal(gw_accept_backoff_next(&b), GW_ACCEPT_BACKOFF_MIN);
	prev = GW_ACCEPT_BACKOFF_MIN;
	for (int i = 0; i < 40; i++) {
		uint32_t ms = gw_accept_backoff_next(&b);

		assert_true(ms == prev * 2 || ms == GW_ACCEPT_BACKOFF_MAX);
		assert_true(ms <= GW_ACCEPT_BACKOFF_MAX);
		assert_true(ms >= prev);
		prev = ms;
	}
	assert_int_equal(prev, GW_ACCEPT_BACKOFF_MAX);
	gw_accept_backoff_reset(&b);
	assert_int_equal(gw_accept_backoff_next(&b), GW_ACCEPT_BACKOFF_MIN);
	/* A value out of range (never written here) starts over, too. */
	b.ms = 3;
	assert_int_equal(gw_accept_backoff_next(&b), GW_ACCEPT_BACKOFF_MIN);
	b.ms = UINT32_MAX;
	assert_int_equal(gw_accept_backoff_next(&b), GW_ACCEPT_BACKOFF_MAX);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_per_connection_errors_never_pause),
	    cmocka_unit_test(test_exhaustion_and_the_unexpected_pause),
	    cmocka_unit_test(test_one_line_and_one_count_per_episode),
	    cmocka_unit_test(test_threads_open_one_episode),
	    cmocka_unit_test(test_backoff_doubles_to_its_cap_and_resets),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, teardown));
}

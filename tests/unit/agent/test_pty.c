/* test_pty.c: agent/pty.c: the size fields of an exec with a pty and of
 * a RESIZE frame (bad values first), and a real pty: the child's
 * controlling terminal and its size. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "../sl_test.h"

#include "agent.h"

static int
get(const char *text, bool required, unsigned *rows, unsigned *cols)
{
	char err[256];
	json_t *j = json_loads(text, 0, NULL);
	int rc;

	assert_non_null(j);
	rc = agent_winsize_get(j, required, rows, cols, err, sizeof(err));
	if (rc < 0)
		assert_true(strlen(err) > 0);
	json_decref(j);
	return rc;
}

static void
test_winsize(void **st)
{
	unsigned r = 24, c = 80;
	char err[64];

	(void)st;
	/* refusals */
	assert_int_equal(get("{}", true, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": 10}", true, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": 0, \"cols\": 10}", true, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": 10, \"cols\": 65536}", true, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": -1, \"cols\": 10}", false, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": \"10\", \"cols\": 10}", false, &r, &c), -EINVAL);
	assert_int_equal(get("{\"rows\": 10.5, \"cols\": 10}", false, &r, &c), -EINVAL);
	assert_int_equal(agent_winsize_get(NULL, false, &r, &c, err, sizeof(err)), -EINVAL);
	/* nothing changed by a refusal */
	assert_int_equal(r, 24);
	assert_int_equal(c, 80);
	/* defaults kept when optional */
	assert_int_equal(get("{\"argv\": [\"sh\"]}", false, &r, &c), 0);
	assert_int_equal(r, 24);
	assert_int_equal(c, 80);
	assert_int_equal(get("{\"rows\": 50, \"cols\": 65535}", true, &r, &c), 0);
	assert_int_equal(r, 50);
	assert_int_equal(c, 65535);
}

static int
mode(const char *text, bool *pty, bool *det, unsigned *r, unsigned *c)
{
	char err[256] = "";
	json_t *j = json_loads(text, 0, NULL);
	int rc;

	assert_non_null(j);
	rc = agent_exec_mode(j, pty, det, r, c, err, sizeof(err));
	if (rc < 0)
		assert_true(strlen(err) > 0);
	json_decref(j);
	return rc;
}

static void
test_exec_mode(void **st)
{
	bool pty = false, det = false;
	unsigned r = 24, c = 80;

	(void)st;
	assert_int_equal(mode("{\"pty\": 1}", &pty, &det, &r, &c), -EINVAL);
	assert_int_equal(mode("{\"detach\": \"yes\"}", &pty, &det, &r, &c), -EINVAL);
	assert_int_equal(mode("{\"pty\": true, \"detach\": true}", &pty, &det, &r, &c), -EINVAL);
	assert_int_equal(mode("{\"rows\": 10}", &pty, &det, &r, &c), -EINVAL);
	assert_int_equal(mode("{\"pty\": true, \"cols\": 0}", &pty, &det, &r, &c), -EINVAL);
	assert_int_equal(mode("{}", &pty, &det, &r, &c), 0);
	assert_false(pty || det);
	assert_int_equal(mode("{\"detach\": true}", &pty, &det, &r, &c), 0);
	assert_true(det);
	assert_int_equal(mode("{\"pty\": true, \"rows\": 5}", &pty, &det, &r, &c), 0);
	assert_true(pty);
	assert_int_equal(r, 5);
	assert_int_equal(c, 80);
}

static void
test_pty_real(void **st)
{
	char slave[64], buf[256];
	int m, status;
	size_t got = 0;
	pid_t pid;

	(void)st;
	if (agent_pty_open(33, 101, &m, slave, sizeof(slave)) < 0) {
		sl_skip("no pty here: %s", strerror(errno));
		return;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct winsize ws;
		int ok;

		setsid();
		if (agent_pty_attach(slave) < 0)
			_exit(2);
		ok = isatty(0) && isatty(1) && isatty(2) && ioctl(0, TIOCGWINSZ, &ws) == 0 &&
		     tcgetpgrp(0) == getpid();
		dprintf(1, "size %u %u\n", ws.ws_row, ws.ws_col);
		_exit(ok ? 0 : 3);
	}
	for (;;) {
		ssize_t n = read(m, buf + got, sizeof(buf) - 1 - got);

		if (n <= 0)
			break; /* EIO: the slave is closed */
		got += (size_t)n;
	}
	buf[got] = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_non_null(strstr(buf, "size 33 101"));
	close(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_winsize),
		cmocka_unit_test(test_exec_mode),
		cmocka_unit_test(test_pty_real),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* test_wsexec.c: the exec stream's pure parts (api/wsexec.h): the first
 * message, the control messages, signal names, header tokens. Refusals
 * first. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "wsexec.h"

static int
start(const char *text, struct gw_wsx_start *s, char *err)
{
	return gw_wsx_start_parse(text, strlen(text), s, err, 256);
}

static void
test_start_refused(void **st)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{\"argv\": [\"sh\"]}",                                 /* no type */
		"{\"type\": \"resize\", \"argv\": [\"sh\"]}",
		"{\"type\": \"exec\"}",                                 /* no argv */
		"{\"type\": \"exec\", \"argv\": []}",
		"{\"type\": \"exec\", \"argv\": [\"\"]}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"stdin\": \"x\"}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"stream\": true}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"tty\": 1}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"detach\": \"yes\"}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"tty\": true, \"detach\": true}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"rows\": 10}",     /* without tty */
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"tty\": true, \"rows\": 0}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"tty\": true, \"cols\": 65536}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"cwd\": \"rel\"}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"nope\": 1}",
		"{\"type\": \"exec\", \"type\": \"exec\", \"argv\": [\"sh\"]}",
		"{\"type\": \"exec\", \"argv\": [\"sh\"], \"env\": {\"HTTP_PROXY\": \"x\"}}",
	};
	struct gw_wsx_start s;
	char err[256];

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (start(bad[i], &s, err) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_true(strlen(err) > 0);
		assert_null(s.body);
	}
}

static void
test_start_ok(void **st)
{
	struct gw_wsx_start s;
	char err[256];

	(void)st;
	assert_int_equal(start("{\"type\": \"exec\", \"argv\": [\"sh\", \"-l\"], \"tty\": true, "
			       "\"rows\": 50, \"cols\": 132, \"env\": {\"A\": \"b\"}, "
			       "\"cwd\": \"/tmp\", \"timeout_seconds\": 9}",
			       &s, err),
			 0);
	assert_true(s.tty);
	assert_false(s.detach);
	assert_int_equal(s.rows, 50);
	assert_int_equal(s.cols, 132);
	assert_string_equal(s.a.argv[1], "-l");
	assert_string_equal(s.a.cwd, "/tmp");
	assert_int_equal(s.a.nenv, 1);
	assert_true(s.has_timeout);
	assert_int_equal(s.a.timeout_s, 9);
	gw_wsx_start_fini(&s);
	assert_int_equal(start("{\"type\": \"exec\", \"argv\": [\"x\"], \"detach\": true}", &s, err),
			 0);
	assert_true(s.detach);
	assert_false(s.has_timeout);
	gw_wsx_start_fini(&s);
}

static int
ctl(const char *text, struct gw_wsx_ctl *c)
{
	char err[256] = "";
	int rc = gw_wsx_ctl_parse(text, strlen(text), c, err, sizeof(err));

	if (rc < 0)
		assert_true(strlen(err) > 0);
	return rc;
}

static void
test_ctl(void **st)
{
	static const char *const bad[] = {
		"", "nope", "{}", "{\"type\": 1}", "{\"type\": \"exit\"}",
		"{\"type\": \"resize\", \"rows\": 10}",
		"{\"type\": \"resize\", \"rows\": 10, \"cols\": 0}",
		"{\"type\": \"resize\", \"rows\": 10, \"cols\": 10, \"x\": 1}",
		"{\"type\": \"signal\"}",
		"{\"type\": \"signal\", \"signal\": \"NOPE\"}",
		"{\"type\": \"signal\", \"signal\": 0}",
		"{\"type\": \"signal\", \"signal\": 65}",
		"{\"type\": \"signal\", \"signal\": \"INT\", \"pid\": 1}",
		"{\"type\": \"eof\", \"now\": true}",
	};
	struct gw_wsx_ctl c;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ctl(bad[i], &c) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
	assert_int_equal(ctl("{\"type\": \"resize\", \"rows\": 40, \"cols\": 120}", &c), 0);
	assert_int_equal(c.kind, GW_WSX_RESIZE);
	assert_int_equal(c.rows, 40);
	assert_int_equal(c.cols, 120);
	assert_int_equal(ctl("{\"type\": \"signal\", \"signal\": \"INT\"}", &c), 0);
	assert_int_equal(c.signal, SIGINT);
	assert_int_equal(ctl("{\"type\": \"signal\", \"signal\": \"SIGTERM\"}", &c), 0);
	assert_int_equal(c.signal, SIGTERM);
	assert_int_equal(ctl("{\"type\": \"signal\", \"signal\": 9}", &c), 0);
	assert_int_equal(c.signal, 9);
	assert_int_equal(ctl("{\"type\": \"eof\"}", &c), 0);
	assert_int_equal(c.kind, GW_WSX_EOF);
	assert_int_equal(gw_wsx_signal_num("SIG"), 0);
	assert_string_equal(gw_wsx_signal_name(SIGWINCH), "WINCH");
}

static void
test_tokens(void **st)
{
	(void)st;
	assert_false(gw_wsx_has_token(NULL, 0, "upgrade"));
	assert_false(gw_wsx_has_token("keep-alive", 10, "upgrade"));
	assert_false(gw_wsx_has_token("upgrades", 8, "upgrade"));
	assert_false(gw_wsx_has_token("websocketx, h2c", 15, "websocket"));
	assert_true(gw_wsx_has_token("keep-alive, Upgrade", 19, "upgrade"));
	assert_true(gw_wsx_has_token(" WebSocket ", 11, "websocket"));
	assert_true(gw_wsx_has_token("a,,websocket\t", 13, "websocket"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_refused),
		cmocka_unit_test(test_start_ok),
		cmocka_unit_test(test_ctl),
		cmocka_unit_test(test_tokens),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

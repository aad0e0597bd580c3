/* test_cli_ws.c: the CLI's side of the exec stream: the 101 check of the
 * handshake (every way it can be wrong first) and which exec command
 * lines ask for the stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "exec_stream.h"
#include "ws_client.h"

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACC "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static int
head(const char *h)
{
	char err[256] = "";
	int rc = cli_ws_check_head(h, strlen(h), KEY, err, sizeof(err));

	if (rc < 0)
		assert_true(strlen(err) > 0);
	return rc;
}

static void
test_head(void **st)
{
	(void)st;
	assert_int_equal(head(""), -1);
	assert_int_equal(head("HTTP/1.1 200 OK\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
			      "Sec-WebSocket-Accept: " ACC "\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			      "Sec-WebSocket-Accept: " ACC "\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			      "Connection: Upgrade\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			      "Connection: Upgrade\r\nSec-WebSocket-Accept: x" ACC "\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
			      "Connection: Upgrade\r\nSec-WebSocket-Accept: " ACC "\r\n\r\n"), -1);
	assert_int_equal(head("HTTP/1.1 101 Switching Protocols\r\nupgrade:  WebSocket \r\n"
			      "CONNECTION: keep-alive, Upgrade\r\nSec-WebSocket-Accept: " ACC
			      "\r\n\r\n"),
			 0);
}

static void
test_wanted(void **st)
{
	char *no1[] = { "exec", "ID", "--", "cat", "-i", NULL };
	char *no2[] = { "exec", "--env", "-i", "ID", "--", "cat", NULL };
	char *no3[] = { "exec", "--stdin", "ID", "--", "cat", NULL };
	char *no4[] = { "exec", "-x", "ID", "--", "cat", NULL };
	char *yes1[] = { "exec", "-i", "ID", "--", "cat", NULL };
	char *yes2[] = { "exec", "-ti", "ID", "--", "cat", NULL };
	char *yes3[] = { "exec", "--cwd", "/", "--detach", "ID", "--", "cat", NULL };
	char *yes4[] = { "exec", "--tty", "ID", "--", "sh", NULL };

	(void)st;
	assert_false(cli_xs_wanted(5, no1));
	assert_false(cli_xs_wanted(6, no2));
	assert_false(cli_xs_wanted(5, no3));
	assert_false(cli_xs_wanted(5, no4));
	assert_true(cli_xs_wanted(5, yes1));
	assert_true(cli_xs_wanted(5, yes2));
	assert_true(cli_xs_wanted(7, yes3));
	assert_true(cli_xs_wanted(5, yes4));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_wanted),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

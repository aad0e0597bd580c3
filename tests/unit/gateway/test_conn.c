/* test_conn.c: the connection core (gateway/doors/conn.c) under the SOCKS5
 * and SNI doors, and the one teardown, over loopback TCP with the fake
 * layers and dial of doors_harness.h. Bad inputs and errors first. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "doors_harness.h"
#include "fwd.h"
#include "log.h"
#include "reason.h"
#include "sni.h"
#include "socks.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (lit), (sizeof(lit) - 1)

static const char yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: local, match: { source: 127.0.0.1/32 }, policy: p }\n"
	"    - { name: bob, match: { user: bob, password: pw }, policy: p }\n"
	"  limits: { idle_timeout_ms: 600000, connect_timeout_ms: 600000 }\n"
	"policies:\n"
	"  - { name: p, allow: [a.test], deny: [evil.a.test] }\n";

/* SOCKS5 messages: no-auth greeting, user/password greeting and auth, a
 * CONNECT to a.test:443 and to evil.a.test:443; the replies. */
static const char greet[] = "\x05\x01\x00";
static const char greet_up[] = "\x05\x01\x02";
static const char auth[] = "\x01\x03" "bob" "\x02" "pw";
static const char request[] = "\x05\x01\x00\x03\x06" "a.test" "\x01\xbb";
static const char request_evil[] = "\x05\x01\x00\x03\x0b" "evil.a.test" "\x01\xbb";
#define REPLY_LEN 10    /* VER REP RSV ATYP=1 BND.ADDR(4) BND.PORT(2) */

static int
setup(void **state)
{
	(void)state;
	dh_global_setup(yaml);
	return 0;
}

/* ---- SOCKS5: bad inputs, errors ---- */

/* Bytes after the request before our reply are refused: in the same read
 * as the request (no layer), or found when the dial ends (K=1: the
 * request is whole at its last byte and the rest waits in the socket). */
static void
test_socks_early_bytes(void **state)
{
	static char req_x[sizeof(request) - 1 + 1];

	(void)state;
	memcpy(req_x, request, sizeof(request) - 1);
	req_x[sizeof(req_x) - 1] = 'X';
	for (int split = 0; split < 2; split++) {
		struct dh h;
		char lines[8][512];

		dh_init(&h);
		if (split)
			dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, S(greet));
		dh_client_send(&h, 2, req_x, sizeof(req_x));
		dh_connect(&h, gw_socks_accept, -1);
		dh_run(&h, dh_ended);
		dh_run(&h, dh_client_eof);
		assert_true(h.client.rxlen >= 4);
		assert_memory_equal(h.client.rx, "\x05\x00\x05\x01", 4);   /* general failure */
		assert_int_equal(h.dials, split ? 1 : 0);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "door", "socks");
		dh_expect_field(lines[0], "reason", "bad-request");
		dh_expect_field(lines[0], "status", "1");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* An error in each phase: one teardown, and a line only once a request
 * was read. */
static void
test_socks_errors(void **state)
{
	static const struct {
		const char *name;
		bool upstream;
		enum dh_op op;
		size_t byte;
		bool userpass;
		const char *reason;     /* NULL: no line */
	} steps[] = {
		{ "greeting", false, DH_RECV, 1, false, NULL },
		{ "method reply", false, DH_SENDV, 1, false, NULL },
		{ "auth", false, DH_RECV, 3 + 4, true, NULL },
		{ "auth reply", false, DH_SENDV, 2 + 1, true, NULL },
		{ "request", false, DH_RECV, 3 + 5, false, NULL },
		{ "success reply", false, DH_SENDV, 2 + 3, false, "client-closed" },
		{ "tunnel, client recv", false, DH_RECV, 3 + sizeof(request) - 1 + 2, false,
		  "client-closed" },
		{ "tunnel, upstream recv", true, DH_RECV, 0, false, "upstream-reset" },
		{ "tunnel, upstream sendv", true, DH_SENDV, 1, false, "upstream-reset" },
	};

	(void)state;
	for (size_t i = 0; i < N(steps); i++) {
		struct dh h;
		char lines[8][512];

		print_message("%s\n", steps[i].name);
		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		dh_fail_byte(steps[i].upstream ? &h.up : &h.cli, steps[i].op, steps[i].byte,
			     -ECONNRESET);
		if (steps[i].userpass) {
			dh_client_send(&h, 0, S(greet_up));
			dh_client_send(&h, 2, S(auth));
			dh_client_send(&h, 4, S(request));
			dh_client_send(&h, 4 + REPLY_LEN, "ping", 4);
		} else {
			dh_client_send(&h, 0, S(greet));
			dh_client_send(&h, 2, S(request));
			dh_client_send(&h, 2 + REPLY_LEN, "ping", 4);
		}
		dh_origin_send(&h, 2, "pong", 4);
		dh_connect(&h, gw_socks_accept, -1);
		dh_run(&h, dh_ended);
		assert_true(steps[i].upstream ? h.up.fired : h.cli.fired);
		dh_expect_lines(&h, lines, steps[i].reason ? 1 : 0);
		if (steps[i].reason)
			dh_expect_field(lines[0], "reason", steps[i].reason);
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* ---- SOCKS5: the handshake split byte by byte ---- */

static void
run_socks(bool userpass)
{
	struct dh h;
	char lines[8][512];
	size_t pre = userpass ? 4 : 2;

	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	if (userpass) {
		dh_client_send(&h, 0, S(greet_up));
		dh_client_send(&h, 2, S(auth));
	} else {
		dh_client_send(&h, 0, S(greet));
	}
	dh_client_send(&h, pre, S(request));
	dh_client_send(&h, pre + REPLY_LEN, "ping", 4);
	dh_client_shut(&h);
	dh_origin_send(&h, 4, "pong", 4);
	dh_origin_shut(&h);
	dh_connect(&h, gw_socks_accept, -1);
	dh_run(&h, dh_ended);
	assert_int_equal(h.client.rxlen, pre + REPLY_LEN + 4);
	assert_memory_equal(h.client.rx, userpass ? "\x05\x02\x01\x00" : "\x05\x00", pre);
	assert_memory_equal(h.client.rx + pre, "\x05\x00\x00\x01", 4);
	assert_memory_equal(h.client.rx + pre + REPLY_LEN, "pong", 4);
	assert_int_equal(h.origin.rxlen, 4);
	assert_memory_equal(h.origin.rx, "ping", 4);
	assert_string_equal(h.dialled, "a.test:443");
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "door", "socks");
	dh_expect_field(lines[0], "client", userpass ? "bob" : "local");
	dh_expect_field(lines[0], "method", "CONNECT");
	dh_expect_field(lines[0], "host", "a.test");
	dh_expect_field(lines[0], "port", "443");
	dh_expect_field(lines[0], "status", "0");
	dh_expect_field(lines[0], "reason", "none");
	dh_expect_field(lines[0], "mode", "tunnel");
	dh_expect_field(lines[0], "sni", "-");
	dh_expect_clean(&h);
	dh_fini(&h);
}

static void
test_socks_split(void **state)
{
	(void)state;
	run_socks(false);
	run_socks(true);
}

/* ---- the teardown ---- */

/* An error arrives while a refusal is being written (one byte at a time):
 * the connection ends once, with the refusal's one line. */
static void
test_error_during_refusal(void **state)
{
	for (int door = 0; door < 2; door++) {
		struct dh h;
		char lines[8][512];

		(void)state;
		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		if (door == 0) {
			dh_fail_byte(&h.cli, DH_SENDV, 20, -EPIPE);
			dh_client_send(&h, 0, S("GET http://evil.a.test/ HTTP/1.1\r\nHost: evil.a.test\r\n\r\n"));
			dh_connect(&h, gw_fwd_accept, -1);
		} else {
			dh_fail_byte(&h.cli, DH_SENDV, 2 + 1, -EPIPE);
			dh_client_send(&h, 0, S(greet));
			dh_client_send(&h, 2, S(request_evil));
			dh_connect(&h, gw_socks_accept, -1);
		}
		dh_run(&h, dh_ended);
		assert_true(h.cli.fired);
		assert_int_equal(h.dials, 0);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "reason", "denied");
		dh_expect_field(lines[0], "decision", "deny");
		/* a refused plain request is http; a refused SOCKS request
		 * never became a tunnel */
		dh_expect_field(lines[0], "mode", door == 0 ? "http" : "-");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

static void
close_twice(struct gw_loop *l, struct gw_timer *t)
{
	struct dh *h = t->arg;
	struct gw_conn *c = h->w.conns;

	(void)l;
	assert_non_null(c);
	gw_conn_close(c, GW_R_SHUTDOWN);
	/* inside a callback the memory stays until the batch ends */
	gw_conn_close(c, GW_R_INTERNAL);
}

static bool
dialled(struct dh *h)
{
	return h->dials == 1;
}

/* gw_conn_close() twice in one callback: the second is a no-op (one line,
 * one release, each layer closed once); the dial under way is cancelled. */
static void
test_close_twice(void **state)
{
	struct dh h;
	struct gw_timer t;
	char lines[8][512];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	h.dial_hold = true;
	dh_client_send(&h, 0, S("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dialled);
	assert_int_equal(gw_conns_live(), h.live0 + 1);
	gw_timer_init(&t, close_twice, &h);
	gw_timer_arm(h.w.loop, &t, 0);
	dh_run(&h, dh_ended);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "reason", "shutdown");
	dh_expect_field(lines[0], "host", "a.test");
	assert_int_equal(h.cli.pushed, 1);
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* The SNI door on a lane with no sandbox at the source: closed at once,
 * with no access line (there was no request) and nothing read. */
static void
test_sni_stranger(void **state)
{
	struct dh h;
	char lines[8][512];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	dh_client_send(&h, 0, S("\x16\x03\x01"));
	dh_connect(&h, gw_sni_accept, 0);
	dh_run(&h, dh_ended);
	dh_run(&h, dh_client_eof);
	assert_int_equal(h.client.rxlen, 0);
	assert_int_equal(h.cli.calls[DH_RECV], 0);
	assert_int_equal(h.dials, 0);
	dh_expect_lines(&h, lines, 0);
	dh_expect_clean(&h);
	dh_fini(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socks_early_bytes),
		cmocka_unit_test(test_socks_errors),
		cmocka_unit_test(test_error_during_refusal),
		cmocka_unit_test(test_close_twice),
		cmocka_unit_test(test_sni_stranger),
		cmocka_unit_test(test_socks_split),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

/* test_conn.c: the connection core (gateway/doors/conn.c) under the SOCKS5
 * and SNI doors, and the one teardown, over loopback TCP with the fake
 * layers and dial of doors_harness.h. Bad inputs and errors first; SOCKS5
 * clients that do not wait for replies (optimistic) and what a refusal
 * does with what they sent ahead. */
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
#include "tlshello_build.h"
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

/* An optimistic client: greeting, request and first payload in one write
 * (or, with K=1, read a byte at a time: the payload then waits in the
 * socket, not in the door's buffer). Served; the payload is the origin's
 * first bytes, after the dial, and counted once. */
static void
test_socks_optimistic(void **state)
{
	static char all[64], all_up[64];
	size_t n = 0, n_up = 0;

	(void)state;
	memcpy(all, greet, sizeof(greet) - 1);
	n = sizeof(greet) - 1;
	memcpy(all + n, request, sizeof(request) - 1);
	n += sizeof(request) - 1;
	memcpy(all + n, "ping", 4);
	n += 4;
	memcpy(all_up, greet_up, sizeof(greet_up) - 1);
	n_up = sizeof(greet_up) - 1;
	memcpy(all_up + n_up, auth, sizeof(auth) - 1);
	n_up += sizeof(auth) - 1;
	memcpy(all_up + n_up, request, sizeof(request) - 1);
	n_up += sizeof(request) - 1;
	memcpy(all_up + n_up, "ping", 4);
	n_up += 4;
	for (int i = 0; i < 4; i++) {
		bool split = i & 1, userpass = i & 2;
		size_t pre = userpass ? 4 : 2;
		struct dh h;
		char lines[8][512], v[64];

		print_message("%s%s\n", userpass ? "user/password" : "no auth",
			      split ? ", a byte a read" : "");
		dh_init(&h);
		if (split)
			dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, userpass ? all_up : all, userpass ? n_up : n);
		dh_client_shut(&h);
		dh_origin_send(&h, 4, "pong", 4);
		dh_origin_shut(&h);
		dh_connect(&h, gw_socks_accept, -1);
		dh_run(&h, dh_ended);
		assert_int_equal(h.dials, 1);
		assert_string_equal(h.dialled, "a.test:443");
		dh_expect_bytes("the origin's", h.origin.rx, h.origin.rxlen, "ping", 4);
		assert_int_equal(h.client.rxlen, pre + REPLY_LEN + 4);
		assert_memory_equal(h.client.rx, userpass ? "\x05\x02\x01\x00" : "\x05\x00", pre);
		assert_memory_equal(h.client.rx + pre, "\x05\x00\x00\x01", 4);
		assert_memory_equal(h.client.rx + pre + REPLY_LEN, "pong", 4);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "client", userpass ? "bob" : "local");
		dh_expect_field(lines[0], "status", "0");
		dh_expect_field(lines[0], "mode", "tunnel");
		/* the handshake and the payload, each byte once */
		snprintf(v, sizeof(v), "%zu", userpass ? n_up : n);
		dh_expect_field(lines[0], "bytes_in", v);
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* A payload sent with a request that is then refused reaches no
 * upstream: refused by the policy (no dial), by a failed dial, or by the
 * hello gate once connected (the payload, a ClientHello, names another
 * host than the request: the origin gets a connection and not one byte).
 * Each case first proves the origin hears what is allowed. */
static void
test_socks_optimistic_refused(void **state)
{
	static const struct {
		const char *name;
		const char *req;
		size_t reqlen;
		bool hello;             /* the payload is a hello for evil.test */
		enum gw_reason dial_fail;
		unsigned dials;
		const char *rep;        /* the reply's first 4 bytes */
		const char *reason;
	} cases[] = {
		{ "denied by the policy", S(request_evil), false, GW_R_NONE, 0,
		  "\x05\x02\x00\x01", "denied" },
		{ "the dial fails", S(request), false, GW_R_CONNECT_FAILED, 1,
		  "\x05\x05\x00\x01", "connect-failed" },
		{ "a hello for another host", S(request), true, GW_R_NONE, 1,
		  "\x05\x00\x00\x01", "tls-sni-mismatch" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		struct hb hello = { .n = 0 };
		static char all[HB_BUF + 64];
		size_t n;
		struct dh h;
		char lines[8][512];

		print_message("%s\n", cases[i].name);
		hello_for(&hello, cases[i].hello ? "evil.test" : "a.test");
		memcpy(all, greet, sizeof(greet) - 1);
		n = sizeof(greet) - 1;
		memcpy(all + n, cases[i].req, cases[i].reqlen);
		n += cases[i].reqlen;

		/* The setup: the same with an allowed request and a hello for
		 * its own name reaches the origin whole. */
		dh_init(&h);
		memcpy(all + sizeof(greet) - 1, request, sizeof(request) - 1);
		memcpy(all + sizeof(greet) - 1 + sizeof(request) - 1, hello.b, hello.n);
		if (!cases[i].hello) {
			dh_client_send(&h, 0, all, sizeof(greet) - 1 + sizeof(request) - 1 + hello.n);
			dh_client_shut(&h);
			dh_connect(&h, gw_socks_accept, -1);
			dh_run(&h, dh_ended);
			dh_expect_bytes("the origin's", h.origin.rx, h.origin.rxlen,
					(const char *)hello.b, hello.n);
			dh_fini(&h);
			dh_init(&h);
		}

		memcpy(all + sizeof(greet) - 1, cases[i].req, cases[i].reqlen);
		memcpy(all + n, hello.b, hello.n);
		h.dial_fail = cases[i].dial_fail;
		h.dial_err = ECONNREFUSED;
		dh_client_send(&h, 0, all, n + hello.n);
		dh_connect(&h, gw_socks_accept, -1);
		dh_run(&h, dh_ended);
		assert_int_equal(h.dials, cases[i].dials);
		assert_int_equal(h.origin.rxlen, 0);
		assert_true(h.client.rxlen >= 2 + 4);
		assert_memory_equal(h.client.rx, "\x05\x00", 2);
		assert_memory_equal(h.client.rx + 2, cases[i].rep, 4);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "reason", cases[i].reason);
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* The corners of RFC 1928 the door answers rather than drops: a greeting
 * with no methods gets 05 ff; a command it does not serve gets 07
 * whatever its address (an unknown ATYP, UDP ASSOCIATE's zeros), also
 * with a payload behind it, and nothing is dialled. */
static void
test_socks_corners(void **state)
{
	static const struct {
		const char *name;
		const char *p;
		size_t n;
		const char *want;
		size_t wantlen;
		const char *reason;     /* NULL: no line (no request) */
	} cases[] = {
		{ "no methods", S("\x05\x00"), S("\x05\xff"), NULL },
		{ "no methods, then a request", S("\x05\x00\x05\x01\x00\x03\x06" "a.test" "\x01\xbb"),
		  S("\x05\xff"), NULL },
		{ "BIND, ATYP 5", S("\x05\x01\x00" "\x05\x02\x00\x05\x7f\x00\x00\x01\x00\x50"),
		  S("\x05\x00" "\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00"), "unsupported" },
		{ "UDP ASSOCIATE, 0.0.0.0:0", S("\x05\x01\x00" "\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00"),
		  S("\x05\x00" "\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00"), "unsupported" },
		{ "command 9 and a payload", S("\x05\x01\x00" "\x05\x09\x00\x01\x7f\x00\x00\x01\x00\x50" "GET /"),
		  S("\x05\x00" "\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00"), "unsupported" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		for (int split = 0; split < 2; split++) {
			struct dh h;
			char lines[8][512];

			print_message("%s%s\n", cases[i].name, split ? ", a byte a read" : "");
			dh_init(&h);
			if (split)
				dh_layers(&h, 1, 1, 0);
			dh_client_send(&h, 0, cases[i].p, cases[i].n);
			dh_connect(&h, gw_socks_accept, -1);
			dh_run(&h, dh_ended);
			dh_run(&h, dh_client_eof);
			dh_expect_bytes("the client's", h.client.rx, h.client.rxlen, cases[i].want,
					cases[i].wantlen);
			assert_int_equal(h.dials, 0);
			dh_expect_lines(&h, lines, cases[i].reason ? 1 : 0);
			if (cases[i].reason) {
				dh_expect_field(lines[0], "reason", cases[i].reason);
				dh_expect_field(lines[0], "status", "7");
				dh_expect_field(lines[0], "host", "-");
			}
			dh_expect_clean(&h);
			dh_fini(&h);
		}
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
		cmocka_unit_test(test_socks_optimistic),
		cmocka_unit_test(test_socks_optimistic_refused),
		cmocka_unit_test(test_socks_corners),
		cmocka_unit_test(test_socks_errors),
		cmocka_unit_test(test_error_during_refusal),
		cmocka_unit_test(test_close_twice),
		cmocka_unit_test(test_sni_stranger),
		cmocka_unit_test(test_socks_split),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

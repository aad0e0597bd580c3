/* test_deadline.c: the deadlines of an exchange under way
 * (gateway/doors/deadline.c) through the forward door (doors_harness.h),
 * with short limits: an origin that goes silent (before its head, inside
 * it, after a 1xx, inside its body, while a 100-continue is awaited) and a
 * request body that trickles in below the minimum rate or past its whole
 * time. Each ends in an answer while one can be given (504, 408) and in
 * one access line that says which deadline passed. Nothing here measures
 * time: a case waits for its end, and the harness's deadline is only a
 * safety net. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "doors_harness.h"
#include "fwd.h"
#include "loop.h"

#define S(lit) (lit), (sizeof(lit) - 1)

static const char yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: local, match: { source: 127.0.0.1/32 }, policy: p }\n"
	"  limits: { idle_timeout_ms: 5000, connect_timeout_ms: 600000, response_timeout_ms: 200,\n"
	"            body_min_rate: 1000, body_min_rate_grace_ms: 200, body_timeout_ms: 1000 }\n"
	"policies:\n"
	"  - { name: p, allow: [a.test] }\n";

static const char req_get[] = "GET http://a.test/g HTTP/1.1\r\nHost: a.test\r\n\r\n";
static const char up_get[] = "GET /g HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 sluice\r\n\r\n";

static int
setup(void **state)
{
	(void)state;
	dh_global_setup(yaml);
	return 0;
}

/* The client's answer starts with `status` and names `reason`; the one
 * line says both, with `decision`. */
static void
expect_end(struct dh *h, const char *status, const char *reason, const char *decision,
	   const char *client_starts)
{
	char lines[8][512];

	assert_non_null(h->client.rx);
	if (strncmp(h->client.rx, client_starts, strlen(client_starts)) != 0)
		fail_msg("the client got [%.*s], want it to start [%s]", (int)h->client.rxlen,
			 h->client.rx, client_starts);
	if (strcmp(status, "200") != 0) {
		char want[96];

		snprintf(want, sizeof(want), "\r\nSluice-Reason: %s\r\n", reason);
		assert_non_null(strstr(h->client.rx, want));
	}
	dh_expect_lines(h, lines, 1);
	dh_expect_field(lines[0], "status", status);
	dh_expect_field(lines[0], "reason", reason);
	dh_expect_field(lines[0], "decision", decision);
	dh_expect_clean(h);
}

/* ---- the origin goes silent ---- */

/* Where the origin stops: it sends `what` (maybe nothing) after the
 * request, then nothing. Before any final head reached the client: 504
 * upstream-timeout (after a whole 1xx too: a final answer may follow
 * one); inside a body: the connection ends, its line keeps 200. */
static void
test_silent_origin(void **state)
{
	static const struct {
		const char *name, *what, *client_starts, *status;
	} cases[] = {
		{ "never a byte", NULL, "HTTP/1.1 504 Gateway Timeout\r\n", "504" },
		{ "half a head", "HTTP/1.1 200 OK\r\nX-A: 1\r\n", "HTTP/1.1 504 Gateway Timeout\r\n",
		  "504" },
		{ "a 100 Continue", "HTTP/1.1 100 Continue\r\n\r\n",
		  "HTTP/1.1 100 Continue\r\nVia: 1.1 sluice\r\n\r\nHTTP/1.1 504 Gateway Timeout\r\n",
		  "504" },
		{ "part of a body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc",
		  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nVia: 1.1 sluice\r\n\r\nabc", "200" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dh h;

		print_message("%s\n", cases[i].name);
		dh_init(&h);
		dh_client_send(&h, 0, S(req_get));
		if (cases[i].what)
			dh_origin_send(&h, sizeof(up_get) - 1, cases[i].what, strlen(cases[i].what));
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, dh_ended);
		assert_int_equal(h.dials, 1);
		dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, S(up_get));
		assert_true(h.origin.eof);
		if (strcmp(cases[i].status, "200") == 0)
			/* what came, then the end: no answer of ours after it */
			dh_expect_bytes("client", h.client.rx, h.client.rxlen, cases[i].client_starts,
					strlen(cases[i].client_starts));
		expect_end(&h, cases[i].status, "upstream-timeout", "allow", cases[i].client_starts);
		dh_fini(&h);
	}
}

/* A client that sent Expect: 100-continue holds its body back for the
 * origin's word: the silence is the origin's (504), not a slow body. */
static void
test_silent_origin_expect(void **state)
{
	static const char req[] = "POST http://a.test/e HTTP/1.1\r\nHost: a.test\r\n"
				  "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n";
	struct dh h;

	(void)state;
	dh_init(&h);
	dh_client_send(&h, 0, S(req));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	expect_end(&h, "504", "upstream-timeout", "allow", "HTTP/1.1 504 Gateway Timeout\r\n");
	dh_fini(&h);
}

/* ---- the client's body trickles ---- */

/* The client sends one more byte of its body every 20 ms, up to `left`
 * of them, until it reads an answer. */
static struct {
	size_t left;
	uint64_t last;
} drip;

static bool
drip_until_ended(struct dh *h)
{
	uint64_t now = gw_loop_now(h->w.loop);

	if (h->accepted && drip.left && !h->client.rxlen && !h->client.eof && now - drip.last >= 20) {
		if (send(h->client.fd, "a", 1, MSG_NOSIGNAL) == 1)
			drip.left--;
		drip.last = now;
	}
	return dh_ended(h);
}

/* Below the minimum rate from the start: 408 body-too-slow. With a
 * first burst worth far more than the rate asks, then the same trickle:
 * past the body's whole time, 408 body-timeout. Either way the request
 * went up and was cut: the origin read its head, then EOF. */
static void
test_trickling_body(void **state)
{
	static const char head_slow[] =
		"POST http://a.test/t HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100000\r\n\r\n";
	static const char head_long[] =
		"POST http://a.test/t HTTP/1.1\r\nHost: a.test\r\nContent-Length: 400000\r\n\r\n";
	static const char up_head[] = "POST /t HTTP/1.1\r\nHost: a.test\r\nContent-Length: ";
	size_t nburst = 200000;
	char *burst = malloc(nburst);

	(void)state;
	assert_non_null(burst);
	memset(burst, 'b', nburst);
	for (int pass = 0; pass < 2; pass++) {
		const char *reason = pass ? "body-timeout" : "body-too-slow";
		struct dh h;

		dh_init(&h);
		if (pass) {
			dh_client_send(&h, 0, S(head_long));
			dh_client_send(&h, 0, burst, nburst);
		} else {
			dh_client_send(&h, 0, S(head_slow));
		}
		drip.left = 10000;
		drip.last = 0;
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, drip_until_ended);
		assert_true(h.origin.rxlen > sizeof(up_head) - 1);
		assert_memory_equal(h.origin.rx, up_head, sizeof(up_head) - 1);
		assert_true(h.origin.eof);
		assert_non_null(strstr(h.client.rx, pass ? "body_timeout_ms" : "body_min_rate"));
		expect_end(&h, "408", reason, "allow", "HTTP/1.1 408 Request Timeout\r\n");
		dh_fini(&h);
	}
	free(burst);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_silent_origin),
		cmocka_unit_test(test_silent_origin_expect),
		cmocka_unit_test(test_trickling_body),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

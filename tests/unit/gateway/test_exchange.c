/* test_exchange.c: the HTTP/1.1 exchange (gateway/doors/exchange.c) under
 * the forward door, over loopback TCP with a fake transport layer on each
 * side (doors_harness.h): split reads, short writes, an error at every
 * step. Bad inputs and errors first; the SOCKS5 and SNI doors and the
 * teardown are in test_conn.c. DH_DEBUG=1 in the environment shows the
 * doors' debug lines. */
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
#include "exchange-t.h"
#include "fwd.h"
#include "log.h"
#include "metrics.h"
#include "reason.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (lit), (sizeof(lit) - 1)

static const char yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: local, match: { source: 127.0.0.1/32 }, policy: p }\n"
	"  limits: { idle_timeout_ms: 600000, connect_timeout_ms: 600000 }\n"
	"policies:\n"
	"  - { name: p, allow: [a.test, \"b.test:8080\", \"*.a.test\"], deny: [evil.a.test] }\n";

/* A GET with every kind of hop-by-hop field, and what the origin gets. */
static const char req_get[] =
	"GET http://a.test/p?q=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t\r\n"
	"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nProxy-Connection: keep-alive\r\n"
	"Keep-Alive: timeout=5\r\nTE: trailers\r\nAccept: */*\r\n\r\n";
static const char up_get[] =
	"GET /p?q=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t\r\nAccept: */*\r\n"
	"Via: 1.1 sluice\r\n\r\n";
/* Its response, and what the client gets. */
#define RESP_OK_HEAD                                                                \
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: X-Resp\r\n"      \
	"X-Resp: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\n"
static const char resp_ok[] = RESP_OK_HEAD "hello";
static const char down_ok[] =
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
	"Via: 1.1 sluice\r\n\r\nhello";

/* A request with a body that closes the connection after its answer. */
#define REQ_POST_HEAD                                                               \
	"POST http://a.test/u HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n"   \
	"Connection: close\r\n\r\n"
static const char req_post[] = REQ_POST_HEAD "0123456789";
#define UP_POST_HEAD "POST /u HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\nVia: 1.1 sluice\r\n\r\n"
static const char up_post[] = UP_POST_HEAD "0123456789";
#define RESP_CL_HEAD "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
static const char resp_cl[] = RESP_CL_HEAD "world";
static const char down_cl[] =
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\nVia: 1.1 sluice\r\n\r\nworld";

static int
setup(void **state)
{
	(void)state;
	dh_global_setup(yaml);
	return 0;
}

/* ---- refusals ---- */

/* A malformed head (a request line with no version), fed byte by byte:
 * 400, Sluice-Reason, one line, nothing dialled. */
static void
test_malformed_head(void **state)
{
	struct dh h;
	char lines[8][512];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	dh_client_send(&h, 0, S("GET http://a.test/\r\nHost: a.test\r\n\r\n"));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	assert_non_null(h.client.rx);
	assert_true(strncmp(h.client.rx, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
	assert_non_null(strstr(h.client.rx, "\r\nSluice-Reason: bad-request\r\n"));
	assert_int_equal(h.dials, 0);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "400");
	dh_expect_field(lines[0], "decision", "deny");
	dh_expect_field(lines[0], "reason", "bad-request");
	/* no head, so no telling how it would have gone */
	dh_expect_field(lines[0], "mode", "-");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* Denied (a deny rule) and not allowed (no allow rule): 403 with the
 * reason, and the origin never dialled. */
static void
test_denied_host(void **state)
{
	static const struct {
		const char *req, *reason;
	} cases[] = {
		{ "GET http://evil.a.test/ HTTP/1.1\r\nHost: evil.a.test\r\n\r\n", "denied" },
		{ "GET http://c.test/ HTTP/1.1\r\nHost: c.test\r\n\r\n", "not-allowed" },
		{ "CONNECT evil.a.test:443 HTTP/1.1\r\nHost: evil.a.test:443\r\n\r\n", "denied" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		struct dh h;
		char lines[8][512], sr[64];

		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, cases[i].req, strlen(cases[i].req));
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, dh_ended);
		assert_true(strncmp(h.client.rx, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
		snprintf(sr, sizeof(sr), "\r\nSluice-Reason: %s\r\n", cases[i].reason);
		assert_non_null(strstr(h.client.rx, sr));
		assert_int_equal(h.dials, 0);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "status", "403");
		dh_expect_field(lines[0], "decision", "deny");
		dh_expect_field(lines[0], "reason", cases[i].reason);
		/* A plain request is http from its head; a CONNECT refused
		 * before its tunnel began has no mode. */
		dh_expect_field(lines[0], "mode",
				strncmp(cases[i].req, "CONNECT", 7) == 0 ? "-" : "http");
		dh_expect_field(lines[0], "sni", "-");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* The dial fails: 502 or 504 (403 for a forbidden address), the reason in
 * Sluice-Reason and in the line; "allow" for failures on the way. */
static void
test_dial_failures(void **state)
{
	static const struct {
		enum gw_reason why;
		int err;
		const char *status, *decision;
	} cases[] = {
		{ GW_R_CONNECT_FAILED, ECONNREFUSED, "502", "allow" },
		{ GW_R_CONNECT_TIMEOUT, ETIMEDOUT, "504", "allow" },
		{ GW_R_DNS_TIMEOUT, ETIMEDOUT, "504", "allow" },
		{ GW_R_DNS_NXDOMAIN, ENOENT, "502", "allow" },
		{ GW_R_PRIVATE_ADDRESS, 0, "403", "deny" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		for (int connect = 0; connect < 2; connect++) {
			struct dh h;
			char lines[8][512], want[128];

			dh_init(&h);
			dh_layers(&h, 1, 1, 0);
			h.dial_fail = cases[i].why;
			h.dial_err = cases[i].err;
			if (connect)
				dh_client_send(&h, 0, S("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"));
			else
				dh_client_send(&h, 0, S(req_get));
			dh_connect(&h, gw_fwd_accept, -1);
			dh_run(&h, dh_ended);
			snprintf(want, sizeof(want), "HTTP/1.1 %s ", cases[i].status);
			assert_true(strncmp(h.client.rx, want, strlen(want)) == 0);
			snprintf(want, sizeof(want), "\r\nSluice-Reason: %s\r\n",
				 gw_reason_name(cases[i].why));
			assert_non_null(strstr(h.client.rx, want));
			assert_int_equal(h.dials, 1);
			assert_string_equal(h.dialled, connect ? "a.test:443" : "a.test:80");
			dh_expect_lines(&h, lines, 1);
			dh_expect_field(lines[0], "status", cases[i].status);
			dh_expect_field(lines[0], "decision", cases[i].decision);
			dh_expect_field(lines[0], "reason", gw_reason_name(cases[i].why));
			dh_expect_field(lines[0], "mode", connect ? "-" : "http");
			dh_expect_clean(&h);
			dh_fini(&h);
		}
	}
}

/* Heads the parser refuses for what hops would read differently, and
 * methods answered here: the status and reason, one line, nothing
 * dialled. */
static void
test_refused_heads(void **state)
{
	static const struct {
		const char *req, *status, *reason;
	} cases[] = {
		{ "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nContent-Length: 5\r\n\r\n"
		  "hello", "400", "bad-request" },
		{ "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\n"
		  "Connection: Content-Length\r\n\r\nhi", "400", "bad-request" },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: host\r\n\r\n",
		  "400", "bad-request" },
		{ "GET http://a.test/a{b}|c HTTP/1.1\r\nHost: a.test\r\n\r\n", "400", "bad-request" },
		{ "GET http://a.test/%zz HTTP/1.1\r\nHost: a.test\r\n\r\n", "400", "bad-request" },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: me@a.test\r\n\r\n", "400", "userinfo" },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: \xc3\xa4.test\r\n\r\n", "400", "non-ascii-host" },
		{ "TRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "405", "method-not-allowed" },
		{ "trace http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "405", "method-not-allowed" },
		{ "TRACK http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "405", "method-not-allowed" },
		{ "TRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 5\r\n\r\n", "405",
		  "method-not-allowed" },
		{ "OPTIONS http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 0\r\n\r\n", "405",
		  "method-not-allowed" },
		{ "options http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 0\r\n\r\n", "405",
		  "method-not-allowed" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		struct dh h;
		char lines[8][512], want[96];

		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, cases[i].req, strlen(cases[i].req));
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, dh_ended);
		assert_non_null(h.client.rx);
		snprintf(want, sizeof(want), "HTTP/1.1 %s ", cases[i].status);
		if (strncmp(h.client.rx, want, strlen(want)) != 0)
			fail_msg("%s: got %.40s", cases[i].req, h.client.rx);
		snprintf(want, sizeof(want), "\r\nSluice-Reason: %s\r\n", cases[i].reason);
		assert_non_null(strstr(h.client.rx, want));
		assert_int_equal(h.dials, 0);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "status", cases[i].status);
		dh_expect_field(lines[0], "reason", cases[i].reason);
		dh_expect_field(lines[0], "decision", "deny");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

#define CH_HEAD "POST http://a.test/u HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
#define CH_UP "POST /u HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nVia: 1.1 sluice\r\n\r\n"

/* A chunked body that breaks its framing once its head went upstream:
 * the origin's request is cut (it reads the head and the good chunks,
 * then EOF), the client gets 400 bad-request, the line says so. */
static void
test_bad_request_body(void **state)
{
	static const char *const bodies[] = {
		"5\r\nhello\r\nzz\r\n",                     /* a bad size */
		"5\r\nhello\r\n3\nabc\r\n",                /* a bare LF ends the size line */
		"5\r\nhello\r\n3\r\nabcd\r\n0\r\n\r\n",   /* longer than its size */
		"5\r\nhello\r\n5\r\nabc\r\n0\r\n\r\n",    /* shorter: no CRLF where due */
		"5\r\nhello\r\n3\r\nabc0\r\n\r\n",         /* no CRLF after the data */
		"5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n", /* a framing trailer */
		"5\r\nhello\r\n0\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
	};

	(void)state;
	for (size_t i = 0; i < N(bodies); i++) {
		char req[512], lines[8][512];
		struct dh h;

		snprintf(req, sizeof(req), CH_HEAD "%s", bodies[i]);
		print_message("%s\n", bodies[i]);
		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, req, strlen(req));
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, dh_ended);
		assert_non_null(h.client.rx);
		assert_true(strncmp(h.client.rx, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
		assert_non_null(strstr(h.client.rx, "\r\nSluice-Reason: bad-request\r\n"));
		assert_non_null(strstr(h.client.rx, "bad request body"));
		assert_int_equal(h.dials, 1);
		/* the head went up, then the connection was cut */
		assert_true(h.origin.rxlen >= sizeof(CH_UP) - 1);
		assert_memory_equal(h.origin.rx, CH_UP, sizeof(CH_UP) - 1);
		assert_true(h.origin.eof);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "method", "POST");
		dh_expect_field(lines[0], "status", "400");
		dh_expect_field(lines[0], "reason", "bad-request");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* The same once the origin's answer has begun reaching the client: no
 * 400 can follow, the connection ends, the line keeps the status sent and
 * says why it ended. */
static void
test_bad_request_body_after_response(void **state)
{
#define EARLY_HEAD "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
	static const char early[] = EARLY_HEAD "abc";
	static const char down_head[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nVia: 1.1 sluice\r\n\r\n";
	static const char down[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nVia: 1.1 sluice\r\n\r\nabc";
	char lines[8][512];
	struct dh h;

	(void)state;
	dh_init(&h);
	dh_client_send(&h, 0, S(CH_HEAD "5\r\nhello\r\n"));
	dh_client_send(&h, sizeof(down_head) - 1 + 3, S("zz\r\n"));
	dh_origin_send(&h, sizeof(CH_UP) - 1, S(early));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	/* the head and what came of the body, then the end */
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down));
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "200");
	dh_expect_field(lines[0], "reason", "bad-request");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* An origin that never comes to a final response (1xx after 1xx), or
 * whose head outgrows max_header_bytes: 502 with its own reason. Up to
 * GW_H1X_MAX_INTERIM 1xx heads pass on first; that many and then a final
 * head is a good answer. */
static void
test_origin_head_limits(void **state)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	size_t nbig = 70000;
	char *flood = malloc((GW_H1X_MAX_INTERIM + 1) * (sizeof(cont) - 1) + 64);
	char *big = malloc(nbig + 64);
	char lines[8][512];
	size_t n = 0;

	(void)state;
	assert_non_null(flood && big);
	for (int i = 0; i < GW_H1X_MAX_INTERIM + 1; i++) {
		memcpy(flood + n, cont, sizeof(cont) - 1);
		n += sizeof(cont) - 1;
	}
	for (int pass = 0; pass < 3; pass++) {
		struct dh h;
		const char *why = pass == 2 ? "upstream-header-too-large" : "upstream-too-many-1xx";
		size_t got100 = 0;

		dh_init(&h);
		dh_client_send(&h, 0, S(req_get));
		if (pass == 0) {
			dh_origin_send(&h, sizeof(up_get) - 1, flood, n);
		} else if (pass == 1) {
			/* the most allowed, then the answer */
			dh_origin_send(&h, sizeof(up_get) - 1, flood, n - (sizeof(cont) - 1));
			dh_origin_send(&h, sizeof(up_get) - 1, S(resp_ok));
		} else {
			size_t k = (size_t)snprintf(big, 64, "HTTP/1.1 200 OK\r\n");

			while (k < nbig)
				k += (size_t)snprintf(big + k, 64, "X-Fill: %08zu\r\n", k);
			dh_origin_send(&h, sizeof(up_get) - 1, big, k);
		}
		dh_connect(&h, gw_fwd_accept, -1);
		if (pass == 1) {
			h.want_client = GW_H1X_MAX_INTERIM * (sizeof(cont) - 1) + sizeof(down_ok) - 1;
			dh_run(&h, dh_client_has);
			dh_client_close(&h);
		}
		dh_run(&h, dh_ended);
		assert_non_null(h.client.rx);
		for (const char *p = h.client.rx; (p = strstr(p, "HTTP/1.1 100 Continue\r\n")); p++)
			got100++;
		if (pass == 1) {
			assert_int_equal(got100, GW_H1X_MAX_INTERIM);
			assert_non_null(strstr(h.client.rx, down_ok));
			dh_expect_lines(&h, lines, 1);
			dh_expect_field(lines[0], "status", "200");
			dh_expect_field(lines[0], "reason", "none");
		} else {
			char want[96];

			assert_int_equal(got100, pass == 0 ? GW_H1X_MAX_INTERIM : 0);
			assert_non_null(strstr(h.client.rx, "HTTP/1.1 502 Bad Gateway\r\n"));
			snprintf(want, sizeof(want), "\r\nSluice-Reason: %s\r\n", why);
			assert_non_null(strstr(h.client.rx, want));
			dh_expect_lines(&h, lines, 1);
			dh_expect_field(lines[0], "status", "502");
			dh_expect_field(lines[0], "reason", why);
			dh_expect_field(lines[0], "decision", "allow");
		}
		dh_expect_clean(&h);
		dh_fini(&h);
	}
	free(flood);
	free(big);
}

/* Who the client is and how it came are not the client's to say: the
 * forgeable fields never reach the origin; Sluice-* from the origin
 * never reaches the client (it would pass for sluice's own word). An
 * OPTIONS counts its Max-Forwards down; another method's passes as is. */
static void
test_forged_fields_dropped(void **state)
{
	static const char req[] =
		"GET http://a.test/s HTTP/1.1\r\nHost: a.test\r\nForwarded: for=1.2.3.4\r\n"
		"X-Forwarded-For: 1.2.3.4\r\nx-forwarded-proto: https\r\nX-Real-IP: 1.2.3.4\r\n"
		"X-Upstream-Addr: 10.0.0.1\r\nSluice-Reason: none\r\nTrue-Client-IP: 1.2.3.4\r\n"
		"X-Original-URL: /admin\r\nX-Keep: 1\r\nMax-Forwards: 0\r\n\r\n";
	static const char up[] = "GET /s HTTP/1.1\r\nHost: a.test\r\nX-Keep: 1\r\nMax-Forwards: 0\r\n"
				 "Via: 1.1 sluice\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 OK\r\nSluice-Reason: denied\r\nsluice-other: x\r\n"
				   "X-Forwarded-For: 9.9.9.9\r\nContent-Length: 2\r\n\r\nok";
	static const char down[] = "HTTP/1.1 200 OK\r\nX-Forwarded-For: 9.9.9.9\r\nContent-Length: 2\r\n"
				   "Via: 1.1 sluice\r\n\r\nok";
	static const char opt[] = "OPTIONS http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 3\r\n"
				  "X-A: 1\r\n\r\n";
	static const char opt_up[] = "OPTIONS / HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\nMax-Forwards: 2\r\n"
				     "Via: 1.1 sluice\r\n\r\n";

	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		const char *rq = pass ? opt : req, *u = pass ? opt_up : up;
		struct dh h;

		dh_init(&h);
		dh_layers(&h, 1, 1, 0);
		dh_client_send(&h, 0, rq, strlen(rq));
		dh_origin_send(&h, strlen(u), S(resp));
		dh_connect(&h, gw_fwd_accept, -1);
		h.want_client = sizeof(down) - 1;
		dh_run(&h, dh_client_has);
		dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, u, strlen(u));
		dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down));
		dh_client_close(&h);
		dh_run(&h, dh_ended);
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* ---- an error at every step ---- */

/* One named step of a POST with a body and its answer, failed there with
 * each error: the connection ends, one teardown, at most one line with
 * the reason, nothing left behind. */
static void
test_error_steps(void **state)
{
	static const int errs[] = { -ECONNRESET, -EPIPE, -EIO };
	static const struct {
		const char *name;
		bool upstream;
		enum dh_op op;
		size_t byte;
		size_t lines;           /* 0: no request was read yet */
		const char *reason;
		const char *status;     /* of the line; what the client got */
	} steps[] = {
		{ "client recv during the head", false, DH_RECV, 10, 0, NULL, NULL },
		{ "client recv during the body", false, DH_RECV, sizeof(REQ_POST_HEAD) - 1 + 3, 1,
		  "client-closed", "0" },
		{ "upstream sendv of the head", true, DH_SENDV, 5, 1, "upstream-reset", "502" },
		{ "upstream sendv of the body", true, DH_SENDV, sizeof(UP_POST_HEAD) - 1 + 2, 1,
		  "upstream-reset", "502" },
		{ "upstream recv of the response head", true, DH_RECV, 0, 1, "upstream-reset", "502" },
		{ "upstream recv of the body", true, DH_RECV, sizeof(RESP_CL_HEAD) - 1 + 2, 1,
		  "upstream-reset", "200" },
		{ "client sendv of the response", false, DH_SENDV, 5, 1, "client-closed", "200" },
	};

	(void)state;
	for (size_t i = 0; i < N(steps); i++) {
		for (size_t e = 0; e < N(errs); e++) {
			struct dh h;
			char lines[8][512];

			print_message("%s, error %d\n", steps[i].name, errs[e]);
			dh_init(&h);
			dh_layers(&h, 1, 1, sizeof(RESP_CL_HEAD) - 1);
			dh_fail_byte(steps[i].upstream ? &h.up : &h.cli, steps[i].op, steps[i].byte,
				     errs[e]);
			dh_client_send(&h, 0, S(req_post));
			dh_origin_send(&h, sizeof(up_post) - 1, S(resp_cl));
			dh_connect(&h, gw_fwd_accept, -1);
			dh_run(&h, dh_ended);
			assert_true(steps[i].upstream ? h.up.fired : h.cli.fired);
			dh_expect_lines(&h, lines, steps[i].lines);
			if (steps[i].lines) {
				dh_expect_field(lines[0], "reason", steps[i].reason);
				dh_expect_field(lines[0], "status", steps[i].status);
				dh_expect_field(lines[0], "method", "POST");
			}
			if (steps[i].status && strcmp(steps[i].status, "502") == 0) {
				assert_non_null(h.client.rx);
				assert_true(strncmp(h.client.rx, "HTTP/1.1 502 Bad Gateway\r\n", 26) == 0);
				assert_non_null(strstr(h.client.rx, "\r\nSluice-Reason: upstream-reset\r\n"));
			}
			dh_expect_clean(&h);
			dh_fini(&h);
		}
	}
}

/* The same exchange failed at the n-th call of each operation on each
 * side, for every n until the exchange completes before it: whatever the
 * step, one teardown, at most one line (none only if the head was never
 * whole), a reason that says who failed, nothing left behind. */
static void
test_error_sweep(void **state)
{
	static const struct {
		bool upstream;
		enum dh_op op;
	} ops[] = {
		{ false, DH_RECV },
		{ false, DH_SENDV },
		{ true, DH_RECV },
		{ true, DH_SENDV },
	};

	(void)state;
	for (size_t o = 0; o < N(ops); o++) {
		unsigned n;

		for (n = 1; n < 400; n++) {
			struct dh h;
			struct dh_side *s;
			char lines[8][512], reason[64];
			size_t nl;
			bool fired;

			dh_init(&h);
			dh_layers(&h, 3, 3, sizeof(RESP_CL_HEAD) - 1);
			s = ops[o].upstream ? &h.up : &h.cli;
			dh_fail_call(s, ops[o].op, n, -ECONNRESET);
			dh_client_send(&h, 0, S(req_post));
			dh_origin_send(&h, sizeof(up_post) - 1, S(resp_cl));
			dh_connect(&h, gw_fwd_accept, -1);
			dh_run(&h, dh_ended);
			fired = s->fired;
			nl = dh_lines(&h, lines, 8);
			if (nl > 1 || (nl == 0 && !(fired && !ops[o].upstream && ops[o].op == DH_RECV)))
				fail_msg("%s %s fails at call %u: %zu lines",
					 ops[o].upstream ? "upstream" : "client",
					 ops[o].op == DH_RECV ? "recv" : "sendv", n, nl);
			if (nl == 1) {
				dh_field(lines[0], "reason", reason, sizeof(reason));
				if (strcmp(reason, "none") != 0 && strcmp(reason, "client-closed") != 0 &&
				    strcmp(reason, "upstream-reset") != 0)
					fail_msg("call %u: reason=%s in %s", n, reason, lines[0]);
				if (!fired)
					assert_string_equal(reason, "none");
			}
			dh_expect_clean(&h);
			if (!fired)
				dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down_cl));
			dh_fini(&h);
			if (!fired)
				break;
		}
		print_message("%s %s: failed at each of calls 1..%u\n",
			      ops[o].upstream ? "upstream" : "client",
			      ops[o].op == DH_RECV ? "recv" : "sendv", n - 1);
		assert_true(n > 1 && n < 400);
	}
}

/* ---- exchanges ---- */

/* A response head that arrives in many reads (K=1) is read to its end.
 * (Once a bug: the upstream was read only when down->parsed ==
 * down->len, but parsed stays at the head's start until the whole head is
 * parsed, so the engine spun until the idle timeout; a real origin does
 * it by sending its head in two TCP segments.) */
static void
test_response_head_split(void **state)
{
	struct dh h;
	bool ok;

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	h.deadline_ms = 3000;
	dh_client_send(&h, 0, S(req_get));
	dh_origin_send(&h, sizeof(up_get) - 1, S(resp_ok));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_client = sizeof(down_ok) - 1;
	ok = dh_try_run(&h, dh_client_has);
	dh_fini(&h);
	if (!ok)
		fail_msg("a response head read in pieces (K=1) never reached the client");
}

/* A head split byte by byte and written back byte by byte: the origin
 * gets exactly the rebuilt head (Host, Via, no hop-by-hop field), the
 * client exactly the rebuilt response, both ways byte by byte. */
static void
test_split_byte_by_byte(void **state)
{
	struct dh h;
	char lines[8][512], num[24];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, 0);
	dh_client_send(&h, 0, S(req_get));
	dh_origin_send(&h, sizeof(up_get) - 1, S(resp_ok));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_client = sizeof(down_ok) - 1;
	dh_run(&h, dh_client_has);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, S(up_get));
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down_ok));
	assert_int_equal(h.dials, 1);
	assert_string_equal(h.dialled, "a.test:80");
	/* byte by byte, really */
	assert_true(h.cli.calls[DH_RECV] >= sizeof(req_get) - 1);
	assert_true(h.cli.calls[DH_SENDV] >= sizeof(down_ok) - 1);
	assert_true(h.up.calls[DH_SENDV] >= sizeof(up_get) - 1);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "door", "forward");
	dh_expect_field(lines[0], "client", "local");
	dh_expect_field(lines[0], "method", "GET");
	dh_expect_field(lines[0], "host", "a.test");
	dh_expect_field(lines[0], "port", "80");
	dh_expect_field(lines[0], "decision", "allow");
	dh_expect_field(lines[0], "reason", "none");
	dh_expect_field(lines[0], "status", "200");
	snprintf(num, sizeof(num), "%zu", sizeof(req_get) - 1);
	dh_expect_field(lines[0], "bytes_in", num);
	snprintf(num, sizeof(num), "%zu", sizeof(down_ok) - 1);
	dh_expect_field(lines[0], "bytes_out", num);
	/* plain HTTP: no TLS of ours on either side */
	dh_expect_field(lines[0], "mode", "http");
	dh_expect_field(lines[0], "sni", "-");
	dh_expect_field(lines[0], "alpn_down", "-");
	dh_expect_field(lines[0], "alpn_up", "-");
	/* keep-alive: the client ends it, and no second line comes */
	dh_client_close(&h);
	dh_run(&h, dh_ended);
	dh_expect_lines(&h, lines, 1);
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* A chunked request body (framing passed on as is) and a Content-Length
 * response body, both through K=1/M=1. */
static void
test_chunked_body(void **state)
{
#define CH_BODY "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
	static const char req[] = "POST http://b.test:8080/up HTTP/1.1\r\nHost: b.test:8080\r\n"
				  "Transfer-Encoding: chunked\r\nX-A: 1\r\n\r\n" CH_BODY;
	static const char up[] = "POST /up HTTP/1.1\r\nHost: b.test:8080\r\nX-A: 1\r\n"
				 "Transfer-Encoding: chunked\r\nVia: 1.1 sluice\r\n\r\n" CH_BODY;
#define CREATED_HEAD "HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n"
	static const char resp[] = CREATED_HEAD "hello world";
	static const char down[] = "HTTP/1.1 201 Created\r\nContent-Length: 11\r\n"
				   "Via: 1.1 sluice\r\n\r\nhello world";
	struct dh h;
	char lines[8][512], num[24];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, sizeof(CREATED_HEAD) - 1);
	dh_client_send(&h, 0, S(req));
	dh_origin_send(&h, sizeof(up) - 1, S(resp));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_client = sizeof(down) - 1;
	dh_run(&h, dh_client_has);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, S(up));
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down));
	assert_string_equal(h.dialled, "b.test:8080");
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "method", "POST");
	dh_expect_field(lines[0], "port", "8080");
	dh_expect_field(lines[0], "status", "201");
	snprintf(num, sizeof(num), "%zu", sizeof(req) - 1);
	dh_expect_field(lines[0], "bytes_in", num);
	dh_client_close(&h);
	dh_run(&h, dh_ended);
	dh_expect_lines(&h, lines, 1);
	dh_expect_clean(&h);
	dh_fini(&h);
}

static const char req_get2[] = "GET http://a.test/two HTTP/1.1\r\nHost: a.test\r\n\r\n";
static const char up_get2[] = "GET /two HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 sluice\r\n\r\n";

/* Two requests on one client connection, the second after the first
 * answer (keep_alive) or right behind the first (pipelined): one upstream
 * connection carries both (one dial), two lines. Every read byte by
 * byte. */
static void
run_two(bool pipelined)
{
	struct dh h;
	char lines[8][512], up2[512], down2[512];

	dh_init(&h);
	h.cli = (struct dh_side){ .layer = true, .k = 1, .m = 1 };
	h.up = (struct dh_side){ .layer = true, .k = 1, .m = 1 };
	dh_client_send(&h, 0, S(req_get));
	dh_client_send(&h, pipelined ? 0 : sizeof(down_ok) - 1, S(req_get2));
	dh_origin_send(&h, sizeof(up_get) - 1, S(resp_ok));
	dh_origin_send(&h, sizeof(up_get) - 1 + sizeof(up_get2) - 1, S(resp_ok));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_client = 2 * (sizeof(down_ok) - 1);
	dh_run(&h, dh_client_has);
	snprintf(up2, sizeof(up2), "%s%s", up_get, up_get2);
	snprintf(down2, sizeof(down2), "%s%s", down_ok, down_ok);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, up2, strlen(up2));
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, down2, strlen(down2));
	assert_int_equal(h.dials, 1);
	assert_int_equal(h.up.pushed, 1);
	dh_client_close(&h);
	dh_run(&h, dh_ended);
	dh_expect_lines(&h, lines, 2);
	dh_expect_field(lines[0], "status", "200");
	dh_expect_field(lines[0], "reason", "none");
	dh_expect_field(lines[1], "status", "200");
	dh_expect_field(lines[1], "reason", "none");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* The line of a request carried by a reused upstream connection names
 * that connection's address, as the first did. (Once a bug: it said
 * upstream=-, the address being set only by a dial.) */
static void
test_reused_upstream_line(void **state)
{
	struct dh h;
	char lines[8][512], u0[64], u1[64];

	(void)state;
	dh_init(&h);
	dh_client_send(&h, 0, S(req_get));
	dh_client_send(&h, sizeof(down_ok) - 1, S(req_get2));
	dh_origin_send(&h, sizeof(up_get) - 1, S(resp_ok));
	dh_origin_send(&h, sizeof(up_get) - 1 + sizeof(up_get2) - 1, S(resp_ok));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_client = 2 * (sizeof(down_ok) - 1);
	dh_run(&h, dh_client_has);
	dh_client_close(&h);
	dh_run(&h, dh_ended);
	assert_int_equal(h.dials, 1);
	dh_expect_lines(&h, lines, 2);
	dh_field(lines[0], "upstream", u0, sizeof(u0));
	dh_field(lines[1], "upstream", u1, sizeof(u1));
	dh_fini(&h);
	/* The first names the dial's address (else both could say "-"). */
	assert_string_not_equal(u0, "-");
	assert_true(strchr(u0, ':') != NULL);
	if (strcmp(u0, u1) != 0)
		fail_msg("the second request went over the same upstream connection "
			 "(%s) but its line says upstream=%s", u0, u1);
}

static void
test_keep_alive(void **state)
{
	(void)state;
	run_two(false);
}

static void
test_pipelined(void **state)
{
	(void)state;
	run_two(true);
}

static char *
pattern(size_t n, unsigned seed)
{
	char *p = malloc(n);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (char)((i * 31u + seed) ^ (i >> 9));
	return p;
}

/* CONNECT: 200 Connection established, then a tunnel through the fake
 * layers both ways. A tunnel must copy, not splice, when a side has a
 * layer: past the splice threshold (64 KiB) every byte still went through
 * both layers, intact. */
static void
run_connect(size_t k, size_t bulk)
{
	static const char est[] = "HTTP/1.1 200 Connection established\r\nVia: 1.1 sluice\r\n\r\n";
	static const char conn_req[] = "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\nping";
	char *bu = pattern(bulk, 7), *bc = pattern(bulk, 11);
	char *want_c = malloc(sizeof(est) - 1 + 4 + bulk), *want_o = malloc(4 + bulk);
	struct dh h;
	char lines[8][512];
	int64_t active = gw_metrics_tunnels_active();

	assert_non_null(want_c);
	assert_non_null(want_o);
	memcpy(want_c, est, sizeof(est) - 1);
	memcpy(want_c + sizeof(est) - 1, "pong", 4);
	memcpy(want_c + sizeof(est) - 1 + 4, bu, bulk);
	memcpy(want_o, "ping", 4);
	memcpy(want_o + 4, bc, bulk);
	dh_init(&h);
	dh_layers(&h, k, k, 0);
	dh_client_send(&h, 0, S(conn_req));
	dh_client_send(&h, sizeof(est) - 1 + 4 + bulk, bc, bulk);
	dh_client_shut(&h);
	dh_origin_send(&h, 4, "pong", 4);
	dh_origin_send(&h, 4, bu, bulk);
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, want_c, sizeof(est) - 1 + 4 + bulk);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, want_o, 4 + bulk);
	/* every byte through the layers: nothing went around them */
	assert_int_equal(h.cli.bytes[DH_RECV], sizeof(conn_req) - 1 + bulk);
	assert_int_equal(h.cli.bytes[DH_SENDV], sizeof(est) - 1 + 4 + bulk);
	assert_int_equal(h.up.bytes[DH_RECV], 4 + bulk);
	assert_int_equal(h.up.bytes[DH_SENDV], 4 + bulk);
	assert_int_equal(gw_metrics_tunnels_active(), active);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "method", "CONNECT");
	dh_expect_field(lines[0], "host", "a.test");
	dh_expect_field(lines[0], "port", "443");
	dh_expect_field(lines[0], "status", "200");
	dh_expect_field(lines[0], "reason", "none");
	/* a tunnel reads no hello: no sni, no ALPN */
	dh_expect_field(lines[0], "mode", "tunnel");
	dh_expect_field(lines[0], "sni", "-");
	dh_expect_field(lines[0], "alpn_down", "-");
	dh_expect_field(lines[0], "alpn_up", "-");
	dh_expect_clean(&h);
	dh_fini(&h);
	free(bu);
	free(bc);
	free(want_c);
	free(want_o);
}

static void
test_connect_tunnel(void **state)
{
	(void)state;
	run_connect(1, 300);
	run_connect(999, 300000);
}

/* A WebSocket upgrade: the 101 goes back rebuilt, then the connection is
 * a tunnel through both layers. */
static void
test_websocket(void **state)
{
	static const char req[] = "GET http://a.test/ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
				  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n";
	static const char up[] = "GET /ws HTTP/1.1\r\nHost: a.test\r\nSec-WebSocket-Version: 13\r\n"
				 "Connection: Upgrade\r\nUpgrade: websocket\r\nVia: 1.1 sluice\r\n\r\n";
#define SWITCH_HEAD "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" \
		    "Connection: Upgrade\r\nSec-WebSocket-Accept: y\r\n\r\n"
	static const char resp[] = SWITCH_HEAD "srv1";
	static const char down[] = "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: y\r\n"
				   "Connection: Upgrade\r\nUpgrade: websocket\r\nVia: 1.1 sluice\r\n\r\nsrv1";
	char want_o[512];
	struct dh h;
	char lines[8][512];

	(void)state;
	dh_init(&h);
	dh_layers(&h, 1, 1, sizeof(SWITCH_HEAD) - 1);
	dh_client_send(&h, 0, S(req));
	dh_client_send(&h, sizeof(down) - 1, "cli1", 4);
	dh_client_shut(&h);
	dh_origin_send(&h, sizeof(up) - 1, S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	snprintf(want_o, sizeof(want_o), "%scli1", up);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, want_o, strlen(want_o));
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, S(down));
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "101");
	dh_expect_field(lines[0], "reason", "none");
	/* an upgraded HTTP request stays http */
	dh_expect_field(lines[0], "mode", "http");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* Bytes that came with the 101, more than a tunnel buffer holds (a server
 * that speaks first, its frames in the same read as its head; the
 * client's first frames sent before the 101, in the same read as its
 * GET): all of it goes through, in order, ahead of what follows. It once
 * ended the connection as internal-error: the 101 rebuilt (Via added)
 * plus the rest of the read did not fit the tunnel's buffer. */
static void
test_websocket_data_with_101(void **state)
{
	static const char req[] = "GET http://a.test/ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
				  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n";
	static const char up[] = "GET /ws HTTP/1.1\r\nHost: a.test\r\nSec-WebSocket-Version: 13\r\n"
				 "Connection: Upgrade\r\nUpgrade: websocket\r\nVia: 1.1 sluice\r\n\r\n";
	static const char down_head[] = "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: y\r\n"
					"Connection: Upgrade\r\nUpgrade: websocket\r\nVia: 1.1 sluice\r\n\r\n";
	const size_t nsrv = 40000, ncli = 12000, nlate = 5000;
	size_t nresp = sizeof(SWITCH_HEAD) - 1 + nsrv, nreq = sizeof(req) - 1 + ncli;
	char *resp = malloc(nresp), *creq = malloc(nreq), *late = malloc(nlate);
	char *want_c = malloc(sizeof(down_head) - 1 + nsrv);
	char *want_o = malloc(sizeof(up) - 1 + ncli + nlate);
	char lines[8][512];
	struct dh h;

	(void)state;
	assert_non_null(resp && creq && late && want_c && want_o);
	memcpy(resp, SWITCH_HEAD, sizeof(SWITCH_HEAD) - 1);
	for (size_t i = 0; i < nsrv; i++)
		resp[sizeof(SWITCH_HEAD) - 1 + i] = (char)('a' + i % 23);
	memcpy(creq, req, sizeof(req) - 1);
	for (size_t i = 0; i < ncli; i++)
		creq[sizeof(req) - 1 + i] = (char)('A' + i % 19);
	for (size_t i = 0; i < nlate; i++)
		late[i] = (char)('0' + i % 10);
	memcpy(want_c, down_head, sizeof(down_head) - 1);
	memcpy(want_c + sizeof(down_head) - 1, resp + sizeof(SWITCH_HEAD) - 1, nsrv);
	memcpy(want_o, up, sizeof(up) - 1);
	memcpy(want_o + sizeof(up) - 1, creq + sizeof(req) - 1, ncli);
	memcpy(want_o + sizeof(up) - 1 + ncli, late, nlate);

	dh_init(&h);
	dh_client_send(&h, 0, creq, nreq);
	dh_client_send(&h, sizeof(down_head) - 1 + nsrv, late, nlate);
	dh_client_shut(&h);
	dh_origin_send(&h, sizeof(up) - 1, resp, nresp);
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	dh_expect_bytes("origin", h.origin.rx, h.origin.rxlen, want_o, sizeof(up) - 1 + ncli + nlate);
	dh_expect_bytes("client", h.client.rx, h.client.rxlen, want_c, sizeof(down_head) - 1 + nsrv);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "101");
	dh_expect_field(lines[0], "reason", "none");
	dh_expect_clean(&h);
	dh_fini(&h);
	free(resp);
	free(creq);
	free(late);
	free(want_c);
	free(want_o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malformed_head),
		cmocka_unit_test(test_denied_host),
		cmocka_unit_test(test_dial_failures),
		cmocka_unit_test(test_refused_heads),
		cmocka_unit_test(test_bad_request_body),
		cmocka_unit_test(test_bad_request_body_after_response),
		cmocka_unit_test(test_origin_head_limits),
		cmocka_unit_test(test_forged_fields_dropped),
		cmocka_unit_test(test_error_steps),
		cmocka_unit_test(test_error_sweep),
		cmocka_unit_test(test_response_head_split),
		cmocka_unit_test(test_split_byte_by_byte),
		cmocka_unit_test(test_chunked_body),
		cmocka_unit_test(test_keep_alive),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_reused_upstream_line),
		cmocka_unit_test(test_connect_tunnel),
		cmocka_unit_test(test_websocket),
		cmocka_unit_test(test_websocket_data_with_101),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

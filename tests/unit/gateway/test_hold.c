/* test_hold.c: SigV4 for requests signed over their body
 * (gateway/doors/hold.c, and gw_inject_plan()'s decision in inject.c),
 * through the forward door (doors_harness.h) with a `cleartext: true`
 * sigv4 credential, so that the fake origin reads what sluice sends.
 *
 * A client that sends no X-Amz-Content-SHA256 (every AWS service but S3)
 * signed hex(SHA-256(body)). Refusals first, each before any dial, with
 * nothing at any origin: a Content-Length over GW_INJECT_HOLD_MAX (413
 * sigv4-body-too-large at once), a chunked body past it (payload, or
 * framing), a malformed chunked body (400), a client gone before its body
 * ended, a body that stops coming (408 body-timeout). Then what the origin reads: no body (signed at once, not held),
 * a body by Content-Length and chunked (the framing as the client sent
 * it) at every read size, with botocore's signature (test_sigv4.c's
 * post-body-hash vector); a body of exactly the bound; Expect:
 * 100-continue answered by sluice; a request pipelined after a held one;
 * a request that does send X-Amz-Content-SHA256 streamed, not held. */
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

#include "conf.h"
#include "doors_harness.h"
#include "exchange-t.h"
#include "fwd.h"
#include "hold.h"
#include "http1.h"
#include "inject.h"
#include "message.h"
#include "policy.h"
#include "sigv4.h"
#include "snap.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (lit), (sizeof(lit) - 1)

/* The real keys. SECRET and the two signatures are test_sigv4.c's (from
 * botocore, get-vanilla being AWS's own example): a signature does not
 * depend on the access key id. */
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SIG_GET "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
#define SIG_POST "0921b22518f626dbfe93fcd28201d070bc4808c30294698b54fc2581755cd68d"
#define BODY "{\"TableName\": \"t\"}"
#define DDB "dynamodb.us-west-2.amazonaws.com"
#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

static const char yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: local, match: { source: 127.0.0.1/32 }, policy: p }\n"
	"  limits: { idle_timeout_ms: 600000, connect_timeout_ms: 600000, body_timeout_ms: 1000 }\n"
	"policies:\n"
	"  - name: p\n"
	"    allow: [\"*.amazonaws.com\"]\n"
	"    credentials:\n"
	"      - { name: aws, kind: sigv4, host: \"*.amazonaws.com\", access_key_id: " AKID ",\n"
	"          secret: \"${env:SL_HOLD_SECRET}\", cleartext: true }\n";

static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/* The client's placeholder access key id (the published layer's). */
static char ph[32];

static void
grab(void *arg, const char *env, const char *v)
{
	(void)arg;
	if (strcmp(env, "AWS_ACCESS_KEY_ID") == 0)
		snprintf(ph, sizeof(ph), "%s", v);
}

static int
setup(void **state)
{
	struct gw_snap *s;

	(void)state;
	setenv("SL_HOLD_SECRET", SECRET, 1);
	dh_global_setup(yaml);
	s = gw_snap_current();
	assert_non_null(s);
	gw_policy_placeholders(s->client_policy[0], grab, NULL);
	gw_snap_unref(s);
	return strncmp(ph, "SLUICE", 6) == 0 ? 0 : -1;
}

/* The DynamoDB request the client signed with its placeholder keys: head
 * (framing: Content-Length or chunked, and an extra field) into out. */
static size_t
ddb_head(char *out, size_t outsz, const char *framing, const char *extra)
{
	int n = snprintf(out, outsz,
			 "POST http://" DDB "/ HTTP/1.1\r\nHost: " DDB "\r\n"
			 "X-Amz-Date: 20150830T123600Z\r\nContent-Type: application/x-amz-json-1.0\r\n"
			 "X-Amz-Target: DynamoDB_20120810.DescribeTable\r\n%s"
			 "Authorization: AWS4-HMAC-SHA256 Credential=%s/20150830/us-west-2/dynamodb/"
			 "aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
			 "Signature=" ZEROS "\r\n%s\r\n",
			 extra, ph, framing);

	assert_true(n > 0 && (size_t)n < outsz);
	return (size_t)n;
}

/* ... and what the origin must read of its head, signed with the real
 * keys (botocore's signature). */
static size_t
ddb_up(char *out, size_t outsz, const char *framing, const char *extra)
{
	int n = snprintf(out, outsz,
			 "POST / HTTP/1.1\r\nHost: " DDB "\r\n"
			 "X-Amz-Date: 20150830T123600Z\r\nContent-Type: application/x-amz-json-1.0\r\n"
			 "X-Amz-Target: DynamoDB_20120810.DescribeTable\r\n%s"
			 "Authorization: AWS4-HMAC-SHA256 Credential=" AKID "/20150830/us-west-2/dynamodb/"
			 "aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
			 "Signature=" SIG_POST "\r\n%sVia: 1.1 sluice\r\n\r\n",
			 extra, framing);

	assert_true(n > 0 && (size_t)n < outsz);
	return (size_t)n;
}

/* ---- refusals: nothing dialled, nothing at any origin ---- */

/* req (n bytes; shut after it or not) is answered `status` with
 * Sluice-Reason: reason, and its line says so, with bytes_in at least
 * min_in (what was read of the body counts). */
static void
expect_refused_in(const char *what, const char *req, size_t n, bool shut, const char *status,
		  const char *reason, unsigned long long min_in)
{
	struct dh h;
	char lines[8][512], want[128];

	dh_init(&h);
	dh_client_send(&h, 0, req, n);
	if (shut)
		dh_client_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	snprintf(want, sizeof(want), "HTTP/1.1 %s", status);
	if (!h.client.rx || strncmp(h.client.rx, want, strlen(want)) != 0)
		fail_msg("%s: not refused %s: %.*s", what, status, (int)(h.client.rxlen > 300 ? 300 : h.client.rxlen),
			 h.client.rx ? h.client.rx : "");
	snprintf(want, sizeof(want), "\r\nSluice-Reason: %s\r\n", reason);
	assert_non_null(strstr(h.client.rx, want));
	if (h.dials != 0)
		fail_msg("%s: dialled %s", what, h.dialled);
	assert_int_equal(h.origin.rxlen, 0);
	dh_expect_lines(&h, lines, 1);
	snprintf(want, sizeof(want), "%.3s", status);
	dh_expect_field(lines[0], "status", want);
	/* (408: allowed, but the client did not keep up) */
	dh_expect_field(lines[0], "decision", strncmp(status, "408", 3) == 0 ? "allow" : "deny");
	dh_expect_field(lines[0], "reason", reason);
	dh_expect_field(lines[0], "inject", "-");
	if (strtoull(dh_field(lines[0], "bytes_in", want, sizeof(want)), NULL, 10) < min_in)
		fail_msg("%s: bytes_in=%s, want at least %llu", what, want, min_in);
	dh_expect_clean(&h);
	dh_fini(&h);
}

#define expect_refused(what, req, n, shut, status, reason)                                         \
	expect_refused_in((what), (req), (n), (shut), (status), (reason), 0)

static void
test_too_large(void **state)
{
	char head[2048], cl[64];
	size_t hl, n, o;
	char *req;

	(void)state;
	/* a Content-Length past the bound: refused at once, the body not read
	 * (nor even sent: a client that waits for 100 Continue gets 413) */
	snprintf(cl, sizeof(cl), "Content-Length: %u\r\n", GW_INJECT_HOLD_MAX + 1);
	hl = ddb_head(head, sizeof(head), cl, "Expect: 100-continue\r\n");
	expect_refused("Content-Length over the bound", head, hl, true, "413 Content Too Large",
		       "sigv4-body-too-large");
	snprintf(cl, sizeof(cl), "Content-Length: 99999999999\r\n");
	hl = ddb_head(head, sizeof(head), cl, "");
	expect_refused("a huge Content-Length", head, hl, true, "413 Content Too Large",
		       "sigv4-body-too-large");

	/* chunked, one byte of payload past the bound, in 64 KiB chunks: the
	 * client's bytes are read up to the bound and no further */
	hl = ddb_head(head, sizeof(head), "Transfer-Encoding: chunked\r\n", "");
	n = hl + 2 * GW_INJECT_HOLD_MAX;
	req = malloc(n);
	assert_non_null(req);
	memcpy(req, head, hl);
	o = hl;
	for (int i = 0; i < 16; i++) {
		o += (size_t)sprintf(req + o, "10000\r\n");
		memset(req + o, 'a', 65536);
		o += 65536;
		o += (size_t)sprintf(req + o, "\r\n");
	}
	o += (size_t)sprintf(req + o, "1\r\nb\r\n0\r\n\r\n");
	expect_refused_in("chunked past the bound", req, o, true, "413 Content Too Large",
			  "sigv4-body-too-large", hl + GW_INJECT_HOLD_MAX);

	/* ... or whose framing is (the body as sent is bounded too): tiny
	 * chunks with long extensions, 1.1 MiB of them for 280 bytes */
	o = hl;
	while (o - hl < GW_INJECT_HOLD_MAX + GW_INJECT_HOLD_FRAMING + 4096) {
		o += (size_t)sprintf(req + o, "1;e=");
		memset(req + o, 'x', 4000);
		o += 4000;
		o += (size_t)sprintf(req + o, "\r\nb\r\n");
	}
	o += (size_t)sprintf(req + o, "0\r\n\r\n");
	expect_refused("chunk framing past the bound", req, o, true, "413 Content Too Large",
		       "sigv4-body-too-large");
	free(req);
}

/* A held body that stops coming has the request body's deadlines
 * (deadline.h): 408 body-timeout, before any dial, with nothing at any
 * origin, whether or not sluice said 100 Continue. */
static void
test_held_body_deadline(void **state)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	char req[2048], lines[8][512];
	size_t hl = ddb_head(req, sizeof(req), "Content-Length: 100\r\n", "");
	struct dh h;

	(void)state;
	snprintf(req + hl, sizeof(req) - hl, "{\"TableName\": ");
	expect_refused_in("a held body that stops", req, strlen(req), false, "408 Request Timeout",
			  "body-timeout", hl + 14);

	/* The same after sluice's own 100 Continue: the 408 follows it. */
	hl = ddb_head(req, sizeof(req), "Content-Length: 100\r\n", "Expect: 100-continue\r\n");
	snprintf(req + hl, sizeof(req) - hl, "{\"TableName\": ");
	dh_init(&h);
	dh_client_send(&h, 0, req, strlen(req));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	assert_non_null(h.client.rx);
	assert_true(h.client.rxlen > sizeof(cont) - 1);
	assert_memory_equal(h.client.rx, cont, sizeof(cont) - 1);
	assert_true(strncmp(h.client.rx + sizeof(cont) - 1, "HTTP/1.1 408 Request Timeout\r\n", 30) == 0);
	assert_non_null(strstr(h.client.rx, "\r\nSluice-Reason: body-timeout\r\n"));
	assert_int_equal(h.dials, 0);
	assert_int_equal(h.origin.rxlen, 0);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "408");
	dh_expect_field(lines[0], "reason", "body-timeout");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* Held bodies past the gateway's budget: 503 sigv4-hold-busy before any
 * dial; what was taken of the budget is given back with the connection
 * (every test ends with none in use). */
static void
test_hold_budget(void **state)
{
	char cl[64], *req;
	size_t hl, n = 200 * 1024;

	(void)state;
	assert_int_equal(gw_hold_in_use(), 0);
	gw_hold_set_budget(1024);
	req = malloc(2048 + n);
	assert_non_null(req);
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", n);
	hl = ddb_head(req, 2048, cl, "");
	memset(req + hl, 'a', n);
	expect_refused_in("a held body past the budget", req, hl + n, true,
			  "503 Service Unavailable", "sigv4-hold-busy", hl);
	gw_hold_set_budget(0);
	assert_int_equal(gw_hold_in_use(), 0);
	free(req);
}

/* A body the strict parser refuses: 400, before any dial. */
static void
test_malformed(void **state)
{
	static const char *const bodies[] = {
		"zz\r\nab\r\n0\r\n\r\n",         /* not a chunk size */
		"2\r\nabc\r\n0\r\n\r\n",         /* no CRLF after the data */
		"2\r\nab\r\n0\r\nX-Bad\r\n\r\n", /* a trailer without ':' */
	};
	char req[2048];

	(void)state;
	for (size_t i = 0; i < N(bodies); i++) {
		size_t hl = ddb_head(req, sizeof(req), "Transfer-Encoding: chunked\r\n", "");

		snprintf(req + hl, sizeof(req) - hl, "%s", bodies[i]);
		expect_refused(bodies[i], req, strlen(req), true, "400 Bad Request", "bad-request");
	}
}

/* The client goes away before its body ended: the connection ends,
 * nothing was dialled, the line says client-closed. */
static void
test_cut_short(void **state)
{
	static const char *const cases[][2] = {
		{ "Content-Length: 100\r\n", "{\"TableName\": " },
		{ "Transfer-Encoding: chunked\r\n", "12\r\n{\"TableName\": \"t\"}\r\n" },
		{ "Content-Length: 18\r\n", "" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		struct dh h;
		char req[2048], lines[8][512];
		size_t hl = ddb_head(req, sizeof(req), cases[i][0], "");

		snprintf(req + hl, sizeof(req) - hl, "%s", cases[i][1]);
		dh_init(&h);
		dh_client_send(&h, 0, req, strlen(req));
		dh_client_shut(&h);
		dh_connect(&h, gw_fwd_accept, -1);
		dh_run(&h, dh_ended);
		assert_int_equal(h.client.rxlen, 0);
		assert_int_equal(h.dials, 0);
		assert_int_equal(h.origin.rxlen, 0);
		dh_expect_lines(&h, lines, 1);
		dh_expect_field(lines[0], "reason", "client-closed");
		dh_expect_field(lines[0], "inject", "-");
		dh_expect_clean(&h);
		dh_fini(&h);
	}
}

/* ---- what the origin reads ---- */

/* Sends req (n bytes) through the forward door, reads k bytes at a time
 * on both sides (0: as they come), and checks the origin read exactly
 * up[0..upn), the client the origin's answer, the line inject=aws. */
static void
expect_upstream(const char *what, const char *req, size_t n, const char *up, size_t upn, size_t k)
{
	struct dh h;
	char lines[8][512];

	dh_init(&h);
	if (k)
		dh_layers(&h, k, k, 0);
	dh_client_send(&h, 0, req, n);
	dh_client_shut(&h);
	dh_origin_send(&h, upn, S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_origin = upn;
	dh_run(&h, dh_ended);
	if (h.origin.rxlen != upn || memcmp(h.origin.rx, up, upn) != 0)
		fail_msg("%s (reads of %zu): the origin read\n%.*s\nwant\n%.*s", what, k,
			 (int)h.origin.rxlen, h.origin.rx ? h.origin.rx : "", (int)upn, up);
	assert_non_null(h.client.rx);
	assert_true(strncmp(h.client.rx, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_int_equal(h.dials, 1);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "200");
	dh_expect_field(lines[0], "inject", "aws");
	assert_null(strstr(lines[0], SECRET));
	dh_expect_clean(&h);
	dh_fini(&h);
	assert_int_equal(gw_hold_in_use(), 0);
}

/* No body (none, or Content-Length: 0): the hash of nothing, signed at
 * once; AWS's get-vanilla signature. */
static void
test_no_body(void **state)
{
	char req[1024], up[1024];

	(void)state;
	for (int cl0 = 0; cl0 < 2; cl0++) {
		snprintf(req, sizeof(req),
			 "GET http://example.amazonaws.com/ HTTP/1.1\r\nHost: example.amazonaws.com\r\n"
			 "X-Amz-Date: 20150830T123600Z\r\nAuthorization: AWS4-HMAC-SHA256 "
			 "Credential=%s/20150830/us-east-1/service/aws4_request, "
			 "SignedHeaders=host;x-amz-date, Signature=" ZEROS "\r\n%s\r\n",
			 ph, cl0 ? "Content-Length: 0\r\n" : "");
		snprintf(up, sizeof(up),
			 "GET / HTTP/1.1\r\nHost: example.amazonaws.com\r\nX-Amz-Date: 20150830T123600Z\r\n"
			 "Authorization: AWS4-HMAC-SHA256 Credential=" AKID
			 "/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "
			 "Signature=" SIG_GET "\r\n%sVia: 1.1 sluice\r\n\r\n",
			 cl0 ? "Content-Length: 0\r\n" : "");
		expect_upstream("no body", req, strlen(req), up, strlen(up), 0);
	}
}

/* The body by Content-Length and chunked, read in pieces of every size
 * from 1: the origin reads the signed head, then the body framed as the
 * client framed it. */
static void
test_body_held(void **state)
{
	static const char chunked[] = "5\r\n{\"Tab\r\nd;ext=1\r\nleName\": \"t\"}\r\n0\r\nX-T: 1\r\n\r\n";
	static const size_t ks[] = { 0, 1, 2, 3, 5, 7, 13, 64, 1000 };
	char req[2048], up[2048];
	size_t rn, un;

	(void)state;
	for (size_t i = 0; i < N(ks); i++) {
		rn = ddb_head(req, sizeof(req), "Content-Length: 18\r\n", "");
		memcpy(req + rn, BODY, sizeof(BODY) - 1);
		rn += sizeof(BODY) - 1;
		un = ddb_up(up, sizeof(up), "Content-Length: 18\r\n", "");
		memcpy(up + un, BODY, sizeof(BODY) - 1);
		un += sizeof(BODY) - 1;
		expect_upstream("Content-Length", req, rn, up, un, ks[i]);

		rn = ddb_head(req, sizeof(req), "Transfer-Encoding: chunked\r\n", "");
		memcpy(req + rn, chunked, sizeof(chunked) - 1);
		rn += sizeof(chunked) - 1;
		un = ddb_up(up, sizeof(up), "Transfer-Encoding: chunked\r\n", "");
		memcpy(up + un, chunked, sizeof(chunked) - 1);
		un += sizeof(chunked) - 1;
		expect_upstream("chunked", req, rn, up, un, ks[i]);
	}
}

/* A body of exactly GW_INJECT_HOLD_MAX bytes is held and signed: the
 * signature the origin gets checks out with the real secret over the
 * SHA-256 of what it read. */
static void
test_body_at_the_bound(void **state)
{
	struct dh h;
	char head[2048], cl[64], hash[GW_SIGV4_SIG_LEN + 1], err[256];
	size_t hl, n = GW_INJECT_HOLD_MAX;
	char *req;
	const char *body;
	struct gw_h1_parser ps;
	struct gw_h1_head rh;
	struct gw_h1_target t;
	struct gw_h1_error terr;
	struct gw_sigv4_auth a;
	struct gw_sigv4_request rq = { 0 };
	const struct gw_h1_header *az;
	size_t upn;

	(void)state;
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", n);
	hl = ddb_head(head, sizeof(head), cl, "");
	upn = ddb_up(head + hl, sizeof(head) - hl, cl, "") + n; /* (as long as what goes up) */
	req = malloc(hl + n);
	assert_non_null(req);
	memcpy(req, head, hl);
	for (size_t i = 0; i < n; i++)
		req[hl + i] = (char)('a' + i % 26);
	dh_init(&h);
	dh_client_send(&h, 0, req, hl + n);
	dh_client_shut(&h);
	dh_origin_send(&h, upn, S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	assert_true(strncmp(h.client.rx, "HTTP/1.1 200 OK\r\n", 17) == 0);

	gw_h1_parser_init(&ps, GW_H1_REQUEST, 65536);
	assert_int_equal(gw_h1_head_parse(&ps, h.origin.rx, h.origin.rxlen, &rh), GW_H1_DONE);
	assert_int_equal(rh.content_length, n);
	assert_int_equal(h.origin.rxlen, rh.head_len + n);
	assert_int_equal(h.origin.rxlen, upn);
	body = h.origin.rx + rh.head_len;
	assert_memory_equal(body, req + hl, n);
	assert_int_equal(gw_h1_target_parse(rh.target.p, rh.target.len, rh.method_id, &t, &terr), 0);
	az = gw_h1_header_find(&rh, "Authorization");
	assert_non_null(az);
	assert_int_equal(gw_sigv4_parse(az->value.p, az->value.len, &a, err, sizeof(err)), GW_SIGV4_OK);
	assert_string_equal(a.akid, AKID);
	assert_int_equal(gw_sigv4_payload_hash(body, n, hash), GW_SIGV4_OK);
	rq.method = rh.method;
	rq.path = t.path;
	rq.headers = rh.headers;
	rq.nheaders = rh.nheaders;
	rq.payload_hash = (struct gw_h1_span){ hash, strlen(hash) };
	assert_int_equal(gw_sigv4_verify(&a, &rq, SECRET, strlen(SECRET), err, sizeof(err)),
			 GW_SIGV4_OK);
	dh_expect_clean(&h);
	dh_fini(&h);
	free(req);
}

/* Expect: 100-continue: sluice says 100 Continue itself (it needs the
 * body before it dials), then relays the origin's answer. */
static void
test_expect_continue(void **state)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct dh h;
	char req[2048], up[2048];
	size_t rn = ddb_head(req, sizeof(req), "Content-Length: 18\r\n", "Expect: 100-continue\r\n");
	size_t un = ddb_up(up, sizeof(up), "Content-Length: 18\r\n", "Expect: 100-continue\r\n");

	(void)state;
	memcpy(up + un, BODY, sizeof(BODY) - 1);
	un += sizeof(BODY) - 1;
	dh_init(&h);
	dh_client_send(&h, 0, req, rn);
	dh_client_send(&h, sizeof(cont) - 1, S(BODY)); /* once told to go on */
	dh_client_shut(&h);
	dh_origin_send(&h, un, S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	dh_expect_bytes("the origin read", h.origin.rx, h.origin.rxlen, up, un);
	assert_true(h.client.rxlen > sizeof(cont) - 1);
	assert_memory_equal(h.client.rx, cont, sizeof(cont) - 1);
	assert_true(strncmp(h.client.rx + sizeof(cont) - 1, "HTTP/1.1 200 OK\r\n", 17) == 0);
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* A request pipelined right after a held one (in the same read) is the
 * next request, over the same upstream connection. */
static void
test_pipelined(void **state)
{
	struct dh h;
	char req[4096], up[4096];
	char lines[8][512];
	size_t rn, un, un1;

	(void)state;
	rn = ddb_head(req, sizeof(req), "Content-Length: 18\r\n", "");
	rn += (size_t)snprintf(req + rn, sizeof(req) - rn,
			       BODY "GET http://" DDB "/two HTTP/1.1\r\nHost: " DDB "\r\n\r\n");
	un1 = un = ddb_up(up, sizeof(up), "Content-Length: 18\r\n", "");
	un += (size_t)snprintf(up + un, sizeof(up) - un,
			       BODY "GET /two HTTP/1.1\r\nHost: " DDB "\r\nVia: 1.1 sluice\r\n\r\n");
	un1 += sizeof(BODY) - 1;
	dh_init(&h);
	dh_client_send(&h, 0, req, rn);
	dh_client_shut(&h);
	dh_origin_send(&h, un1, S(resp));
	dh_origin_send(&h, un, S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	dh_expect_bytes("the origin read", h.origin.rx, h.origin.rxlen, up, un);
	assert_int_equal(h.dials, 1);
	/* two answers, each as sluice rebuilds it */
	assert_true(strncmp(h.client.rx, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_int_equal(h.client.rxlen % 2, 0);
	assert_true(strncmp(h.client.rx + h.client.rxlen / 2, "HTTP/1.1 200 OK\r\n", 17) == 0);
	dh_expect_lines(&h, lines, 2);
	dh_expect_field(lines[0], "inject", "aws");
	dh_expect_field(lines[1], "inject", "-");
	dh_expect_clean(&h);
	dh_fini(&h);
}

/* A client that sends X-Amz-Content-SHA256 (S3's UNSIGNED-PAYLOAD) is
 * signed at once and its body streamed: the origin has the head before
 * the client sent its body. */
static void
test_streamed_when_hashed(void **state)
{
	static const char up_head[] =
		"PUT /k HTTP/1.1\r\nHost: b.s3.amazonaws.com\r\nX-Amz-Date: 20150830T123600Z\r\n"
		"X-Amz-Content-SHA256: UNSIGNED-PAYLOAD\r\nAuthorization: AWS4-HMAC-SHA256 "
		"Credential=" AKID "/20150830/us-east-1/s3/aws4_request, "
		"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=";
	struct dh h;
	char req[2048];

	(void)state;
	snprintf(req, sizeof(req),
		 "PUT http://b.s3.amazonaws.com/k HTTP/1.1\r\nHost: b.s3.amazonaws.com\r\n"
		 "X-Amz-Date: 20150830T123600Z\r\nX-Amz-Content-SHA256: UNSIGNED-PAYLOAD\r\n"
		 "Authorization: AWS4-HMAC-SHA256 Credential=%s/20150830/us-east-1/s3/aws4_request, "
		 "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" ZEROS "\r\n"
		 "Content-Length: 4\r\n\r\n", ph);
	dh_init(&h);
	dh_client_send(&h, 0, req, strlen(req));
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_origin = sizeof(up_head) - 1;
	dh_run(&h, dh_origin_has);
	assert_memory_equal(h.origin.rx, up_head, sizeof(up_head) - 1);
	dh_fini(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* refusals */
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_cut_short),
		cmocka_unit_test(test_held_body_deadline),
		cmocka_unit_test(test_hold_budget),
		/* what the origin reads */
		cmocka_unit_test(test_no_body),
		cmocka_unit_test(test_body_held),
		cmocka_unit_test(test_body_at_the_bound),
		cmocka_unit_test(test_expect_continue),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_streamed_when_hashed),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

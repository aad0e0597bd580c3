/* test_inject.c: credentials on the requests sluice sends upstream
 * (gateway/doors/inject.c). Refusals first, through the forward door
 * (doors_harness.h) with a fake origin that must never be dialled: a
 * sentinel of another layer, out of its credential's scope (another host,
 * no TLS), in the request-target, cut short or forged: 403
 * credential-scope. Then what the origin reads over plain HTTP for
 * `cleartext: true` credentials (header, Basic, placeholder, query; the
 * client's copies removed), TRACE getting nothing; then, driving
 * gw_inject_plan() and gw_h1x_build_request() directly on an exchange
 * whose upstream is sluice's TLS (up_tls), scope matching (exact host,
 * wildcard, port), TLS required unless cleartext, every case variant and
 * duplicate of the credential's header removed and one injected, Basic
 * built right, sentinels replaced in a header value and inside a Basic
 * pair, query parameters %XX-encoded with the client's same-name ones
 * removed (others kept, in order), and the inject= names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "../sl_test.h"

#include "access.h"
#include "conf.h"
#include "conn.h"
#include "doors_harness.h"
#include "exchange-t.h"
#include "fwd.h"
#include "http1.h"
#include "inject.h"
#include "message.h"
#include "policy.h"
#include "snap.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (lit), (sizeof(lit) - 1)

/* Resolved values: what the origin may read, never the client. */
#define KEY "key-V4lue-1"
#define TOKEN "tok-V4lue-2"
#define PW "pw-V4lue-3"
#define QV "v a/l+u&e=~." /* %XX-encoded: v%20a%2Fl%2Bu%26e%3D~. */
#define QV_ENC "v%20a%2Fl%2Bu%26e%3D~."

/* The forward door's policy: cleartext credentials (it reaches origins
 * over plain HTTP here) and two that need TLS. */
static const char yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: local, match: { source: 127.0.0.1/32 }, policy: p }\n"
	"  limits: { idle_timeout_ms: 600000, connect_timeout_ms: 600000 }\n"
	"policies:\n"
	"  - name: p\n"
	"    allow: [a.test, \"a.test:8080\", w.test, \"*.w.test\", \"b.test:8080\", plain.test, other.test]\n"
	"    credentials:\n"
	"      - { host: a.test, header: X-Key, value: \"${env:SL_INJ_KEY}\", cleartext: true }\n"
	"      - { kind: placeholder, host: a.test, env: A_TOKEN, value: \"${env:SL_INJ_TOKEN}\",\n"
	"          cleartext: true }\n"
	"      - { kind: placeholder, host: plain.test, env: P_TOKEN, value: \"${env:SL_INJ_TOKEN}\" }\n"
	"      - { host: plain.test, header: X-Tls-Only, value: \"${env:SL_INJ_KEY}\" }\n"
	"      - { kind: query, host: \"*.w.test\", param: key, value: \"${env:SL_INJ_QV}\",\n"
	"          cleartext: true }\n"
	"      - { kind: basic, host: \"b.test:8080\", user: x-access-token,\n"
	"          password: \"${env:SL_INJ_PW}\", cleartext: true }\n";

/* The sentinels of the published layer (the client's policy). */
static char sent_a[CONF_SENTINEL_LEN], sent_p[CONF_SENTINEL_LEN];
/* A sentinel of another layer compiled from the same policy. */
static char sent_other[CONF_SENTINEL_LEN];

static void
grab(void *arg, const char *env, const char *sentinel)
{
	(void)arg;
	if (strcmp(env, "A_TOKEN") == 0)
		snprintf(sent_a, sizeof(sent_a), "%s", sentinel);
	else if (strcmp(env, "P_TOKEN") == 0)
		snprintf(sent_p, sizeof(sent_p), "%s", sentinel);
}

static void
grab_other(void *arg, const char *env, const char *sentinel)
{
	(void)arg;
	if (strcmp(env, "A_TOKEN") == 0)
		snprintf(sent_other, sizeof(sent_other), "%s", sentinel);
}

static int
setup(void **state)
{
	struct gw_snap *s;
	struct gw_policy *other;

	(void)state;
	setenv("SL_INJ_KEY", KEY, 1);
	setenv("SL_INJ_TOKEN", TOKEN, 1);
	setenv("SL_INJ_PW", PW, 1);
	setenv("SL_INJ_QV", QV, 1);
	dh_global_setup(yaml);
	s = gw_snap_current();
	assert_non_null(s);
	gw_policy_placeholders(s->client_policy[0], grab, NULL);
	other = gw_policy_new(conf_policy_find(s->conf, "p"), NULL);
	assert_non_null(other);
	gw_policy_placeholders(other, grab_other, NULL);
	gw_policy_free(other);
	gw_snap_unref(s);
	if (!conf_cred_sentinel_ok(sent_a) || !conf_cred_sentinel_ok(sent_p) ||
	    !conf_cred_sentinel_ok(sent_other) || strcmp(sent_a, sent_other) == 0)
		return -1;
	return 0;
}

/* base64 of s, into out. */
static const char *
b64(const char *s, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)strlen(s));
	return out;
}

/* Does buf[0..n) hold s? */
static bool
has(const char *buf, size_t n, const char *s)
{
	return buf && memmem(buf, n, s, strlen(s)) != NULL;
}

/* ---- refusals (the forward door) ---- */

/* A request the gateway must refuse, 403 credential-scope, before any
 * dial: nothing reaches any origin, the line says why. */
static void
expect_scope_refusal(const char *what, const char *req)
{
	struct dh h;
	char lines[8][512];

	dh_init(&h);
	dh_client_send(&h, 0, req, strlen(req));
	dh_connect(&h, gw_fwd_accept, -1);
	dh_run(&h, dh_ended);
	if (!h.client.rx || strncmp(h.client.rx, "HTTP/1.1 403 Forbidden\r\n", 24) != 0)
		fail_msg("%s: not refused: %.*s", what, (int)h.client.rxlen,
			 h.client.rx ? h.client.rx : "");
	assert_non_null(strstr(h.client.rx, "\r\nSluice-Reason: credential-scope\r\n"));
	/* the refusal never echoes a value or a sentinel */
	assert_false(has(h.client.rx, h.client.rxlen, "sluice-ph-"));
	assert_false(has(h.client.rx, h.client.rxlen, TOKEN));
	if (h.dials != 0)
		fail_msg("%s: dialled %s", what, h.dialled);
	assert_int_equal(h.origin.rxlen, 0);
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "403");
	dh_expect_field(lines[0], "decision", "deny");
	dh_expect_field(lines[0], "reason", "credential-scope");
	dh_expect_field(lines[0], "inject", "-");
	assert_null(strstr(lines[0], "sluice-ph-"));
	dh_expect_clean(&h);
	dh_fini(&h);
}

static void
test_sentinel_refusals(void **state)
{
	char req[1024], pair[256], enc[512];

	(void)state;
	/* a.test's sentinel to another host (allowed, no credentials) */
	snprintf(req, sizeof(req),
		 "GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n"
		 "Authorization: Bearer %s\r\n\r\n", sent_a);
	expect_scope_refusal("another host", req);
	/* ... inside a Basic pair */
	snprintf(pair, sizeof(pair), "x-access-token:%s", sent_a);
	snprintf(req, sizeof(req),
		 "GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n"
		 "Authorization: Basic %s\r\n\r\n", b64(pair, enc));
	expect_scope_refusal("another host, Basic", req);
	/* another layer's sentinel, to the host its credential is for */
	snprintf(req, sizeof(req),
		 "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Auth: %s\r\n\r\n", sent_other);
	expect_scope_refusal("another layer's", req);
	/* a forged one, and one cut short */
	expect_scope_refusal("forged", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
				       "X-Auth: sluice-ph-0123456789abcdef0123456789abcdef\r\n\r\n");
	snprintf(req, sizeof(req),
		 "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Auth: %.30s\r\n\r\n", sent_a);
	expect_scope_refusal("cut short", req);
	/* the right host, in the request-target (path, query) */
	snprintf(req, sizeof(req), "GET http://a.test/x?t=%s HTTP/1.1\r\nHost: a.test\r\n\r\n",
		 sent_a);
	expect_scope_refusal("in the query", req);
	snprintf(req, sizeof(req), "GET http://a.test/%s HTTP/1.1\r\nHost: a.test\r\n\r\n", sent_a);
	expect_scope_refusal("in the path", req);
	/* plain.test's placeholder needs TLS: over http:// it is out of scope */
	snprintf(req, sizeof(req),
		 "GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n"
		 "Authorization: Bearer %s\r\n\r\n", sent_p);
	expect_scope_refusal("no TLS", req);
	/* TRACE gets no credential, so its sentinel is out of scope */
	snprintf(req, sizeof(req),
		 "TRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Auth: %s\r\n\r\n", sent_a);
	expect_scope_refusal("TRACE", req);
	/* ... spelled with %XX in the target */
	snprintf(req, sizeof(req), "GET http://a.test/x?t=sluice%%2Dph-%s HTTP/1.1\r\nHost: a.test\r\n\r\n",
		 sent_a + 10);
	expect_scope_refusal("%-encoded in the query", req);
	/* another host, in a Basic pair without its '=' padding, and with a
	 * tab after the scheme: origins take both */
	snprintf(pair, sizeof(pair), "x:%s", sent_a);
	b64(pair, enc);
	for (char *e = strchr(enc, '='); e; e = strchr(enc, '='))
		*e = '\0';
	snprintf(req, sizeof(req),
		 "GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n"
		 "Authorization: basic\t%s\r\n\r\n", enc);
	expect_scope_refusal("Basic without padding, a tab", req);
	/* in a hop-by-hop field (Upgrade is written as it came) */
	snprintf(req, sizeof(req),
		 "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: upgrade\r\n"
		 "Upgrade: websocket, %s\r\n\r\n", sent_a);
	expect_scope_refusal("in Upgrade", req);
	/* trace, in any case */
	snprintf(req, sizeof(req),
		 "trace http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Auth: %s\r\n\r\n", sent_a);
	expect_scope_refusal("trace, lowercase", req);
	/* a placeholder access key id's shape outside a SigV4 Authorization */
	expect_scope_refusal("an access key id in another field",
			     "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
			     "X-Amz-Credential: SLUICE0123456789ABCD/20261204/us-east-1/s3/aws4_request\r\n\r\n");
	expect_scope_refusal("an access key id in the query (presigned)",
			     "GET http://a.test/k?X-Amz-Credential=SLUICE0123456789ABCD%2F20261204 HTTP/1.1\r\n"
			     "Host: a.test\r\n\r\n");
	/* a CONNECT's head too */
	snprintf(req, sizeof(req),
		 "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nProxy-Note: %s\r\n\r\n",
		 sent_a);
	expect_scope_refusal("CONNECT", req);
}

/* ---- what the origin reads (the forward door, plain HTTP) ---- */

/* Sends req through the forward door to an origin answering 200, and
 * checks what the origin read is exactly `up` and the line's inject=. */
static void
expect_upstream(const char *what, const char *req, const char *up, const char *inject)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct dh h;
	char lines[8][512];

	dh_init(&h);
	dh_client_send(&h, 0, req, strlen(req));
	dh_client_shut(&h);
	dh_origin_send(&h, strlen(up), S(resp));
	dh_origin_shut(&h);
	dh_connect(&h, gw_fwd_accept, -1);
	h.want_origin = strlen(up);
	dh_run(&h, dh_ended);
	if (!h.origin.rx || h.origin.rxlen != strlen(up) || memcmp(h.origin.rx, up, strlen(up)) != 0)
		fail_msg("%s: the origin read\n%.*s\nwant\n%s", what, (int)h.origin.rxlen,
			 h.origin.rx ? h.origin.rx : "", up);
	assert_non_null(h.client.rx);
	assert_true(strncmp(h.client.rx, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_false(has(h.client.rx, h.client.rxlen, TOKEN));
	dh_expect_lines(&h, lines, 1);
	dh_expect_field(lines[0], "status", "200");
	dh_expect_field(lines[0], "inject", inject);
	/* the line names credentials, never their values */
	assert_null(strstr(lines[0], KEY));
	assert_null(strstr(lines[0], TOKEN));
	dh_expect_clean(&h);
	dh_fini(&h);
}

static void
test_cleartext_header_and_placeholder(void **state)
{
	char req[1024], up[1024], pair[256], enc[256], enc2[256];

	(void)state;
	/* every client copy of X-Key (any case) goes, one goes up; the
	 * sentinel in a header value is replaced */
	snprintf(req, sizeof(req),
		 "GET http://a.test/p HTTP/1.1\r\nHost: a.test\r\nX-Key: mine\r\n"
		 "Accept: */*\r\nx-key: again\r\nX-KEY: third\r\nAuthorization: Bearer %s\r\n"
		 "X-Two: %s,%s\r\n\r\n", sent_a, sent_a, sent_a);
	snprintf(up, sizeof(up),
		 "GET /p HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\n"
		 "Authorization: Bearer " TOKEN "\r\nX-Two: " TOKEN "," TOKEN "\r\n"
		 "X-Key: " KEY "\r\nVia: 1.1 sluice\r\n\r\n");
	/* (in the order applied: header values first, then what is added) */
	expect_upstream("header and placeholder", req, up, "a.test/$a_token,a.test/x-key");

	/* the sentinel inside a Basic pair, e.g. a git client's */
	snprintf(pair, sizeof(pair), "x-access-token:%s", sent_a);
	snprintf(req, sizeof(req),
		 "GET http://a.test/r HTTP/1.1\r\nHost: a.test\r\nAuthorization: basic %s\r\n\r\n",
		 b64(pair, enc));
	snprintf(up, sizeof(up),
		 "GET /r HTTP/1.1\r\nHost: a.test\r\nAuthorization: Basic %s\r\n"
		 "X-Key: " KEY "\r\nVia: 1.1 sluice\r\n\r\n",
		 b64("x-access-token:" TOKEN, enc2));
	expect_upstream("Basic pair", req, up, "a.test/$a_token,a.test/x-key");

	/* no sentinel: the header credential alone */
	expect_upstream("no sentinel",
			"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
			"GET / HTTP/1.1\r\nHost: a.test\r\nX-Key: " KEY "\r\nVia: 1.1 sluice\r\n\r\n",
			"a.test/x-key");
	/* another port than 80/443: the pattern has none, so nothing */
	expect_upstream("another port",
			"GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test:8080\r\nX-Key: mine\r\n\r\n",
			"GET / HTTP/1.1\r\nHost: a.test:8080\r\nX-Key: mine\r\nVia: 1.1 sluice\r\n\r\n",
			"-");
}

static void
test_cleartext_basic_and_query(void **state)
{
	char up[1024], enc[256];

	(void)state;
	/* the client's Authorization (any case) goes, Basic of user:password */
	snprintf(up, sizeof(up),
		 "GET /repo HTTP/1.1\r\nHost: b.test:8080\r\nAccept: */*\r\n"
		 "Authorization: Basic %s\r\nVia: 1.1 sluice\r\n\r\n",
		 b64("x-access-token:" PW, enc));
	expect_upstream("Basic", "GET http://b.test:8080/repo HTTP/1.1\r\nHost: b.test:8080\r\n"
				 "authorization: Basic Zm9vOmJhcg==\r\nAccept: */*\r\n"
				 "AUTHORIZATION: Bearer x\r\n\r\n",
			up, "b.test:8080/authorization");

	/* the client's key= (each) goes, the others stay in order, ours last */
	expect_upstream("query", "GET http://x.w.test/p?a=1&key=mine&b=2&key&c&key=3&keys=4 HTTP/1.1\r\n"
				 "Host: x.w.test\r\n\r\n",
			"GET /p?a=1&b=2&c&keys=4&key=" QV_ENC " HTTP/1.1\r\nHost: x.w.test\r\n"
			"Via: 1.1 sluice\r\n\r\n",
			"*.w.test/?key");
	expect_upstream("query, none before", "GET http://x.w.test/p HTTP/1.1\r\nHost: x.w.test\r\n\r\n",
			"GET /p?key=" QV_ENC " HTTP/1.1\r\nHost: x.w.test\r\nVia: 1.1 sluice\r\n\r\n",
			"*.w.test/?key");
	expect_upstream("query, only ours", "GET http://y.w.test/?key=1 HTTP/1.1\r\nHost: y.w.test\r\n\r\n",
			"GET /?key=" QV_ENC " HTTP/1.1\r\nHost: y.w.test\r\nVia: 1.1 sluice\r\n\r\n",
			"*.w.test/?key");
	/* the wildcard is not the apex */
	expect_upstream("query, apex", "GET http://w.test/?key=1 HTTP/1.1\r\nHost: w.test\r\n\r\n",
			"GET /?key=1 HTTP/1.1\r\nHost: w.test\r\nVia: 1.1 sluice\r\n\r\n", "-");
}

/* TRACE (and TRACK) get nothing; a credential that needs TLS is not sent
 * in the clear. The client's headers then go as they are. */
static void
test_nothing_injected(void **state)
{
	(void)state;
	/* (TRACE and TRACK never go upstream at all: test_exchange.c) */
	expect_upstream("needs TLS", "GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n",
			"GET / HTTP/1.1\r\nHost: plain.test\r\nVia: 1.1 sluice\r\n\r\n", "-");
}

/* ---- over sluice's TLS: the exchange driven directly ---- */

struct built {
	int rc;                 /* gw_h1x_build_request() */
	char head[20000];
	size_t len;
	char inject[GW_CONN_INJECT_MAX];
};

/* Plans and rebuilds `req` as the exchange would for host:port (the
 * routed destination) with the layer p, over TLS or not; the plan must
 * not refuse (refusals are the door's, above). */
static void
build(const struct gw_policy *p, const char *host, uint16_t port, bool tls, const char *req,
      struct built *out)
{
	struct gw_h1x *x = calloc(1, sizeof(*x));
	struct gw_h1_parser ps;
	struct gw_h1_error terr;

	assert_non_null(x);
	gw_h1_parser_init(&ps, GW_H1_REQUEST, 65536);
	assert_int_equal(gw_h1_head_parse(&ps, req, strlen(req), &x->reqh), GW_H1_DONE);
	assert_int_equal(gw_h1_target_parse(x->reqh.target.p, x->reqh.target.len,
					    x->reqh.method_id, &x->target, &terr), 0);
	x->base.policy = p;
	snprintf(x->base.req.host, sizeof(x->base.req.host), "%s", host);
	x->base.req.port = port;
	x->up_tls = tls;
	assert_int_equal(gw_inject_plan(x), 0);
	out->rc = gw_h1x_build_request(x);
	out->len = 0;
	out->head[0] = '\0';
	if (out->rc == 0) {
		assert_true(x->up.hlen < sizeof(out->head));
		memcpy(out->head, x->up.hbuf, x->up.hlen);
		out->len = x->up.hlen;
		out->head[out->len] = '\0';
		/* a head with a credential in it is wiped when freed */
		assert_true(x->up.hsecret == (x->inj.n > 0 || x->inj.sentinels));
	}
	gw_conn_req_inject(&x->base.req, out->inject, sizeof(out->inject));
	gw_half_free(&x->up);
	gw_half_free(&x->down);
	free(x);
}

/* A layer compiled from `entries` (the credentials of policy p). */
static struct gw_policy *
layer(const char *entries)
{
	char text[16384];
	struct conf_diag d;
	struct conf *c;
	struct gw_policy *p;

	snprintf(text, sizeof(text), "policies:\n  - name: p\n    credentials:\n%s", entries);
	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", text, strlen(text), &d);
	if (!c)
		fail_msg("refused: %s", d.n ? d.lines[0] : "?");
	conf_diag_fini(&d);
	p = gw_policy_new(conf_policy_find(c, "p"), NULL);
	assert_non_null(p);
	conf_unref(c);
	return p;
}

static void
expect_head(const struct built *b, const char *want)
{
	assert_int_equal(b->rc, 0);
	if (strcmp(b->head, want) != 0)
		fail_msg("rebuilt\n%s\nwant\n%s", b->head, want);
}

/* Exact host, wildcard (not the apex), port: each only where it matches;
 * TLS needed unless cleartext. */
static void
test_scope(void **state)
{
	struct gw_policy *p = layer(
		"      - { host: api.test, header: X-A, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { host: \"*.w.test\", header: X-W, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { host: \"p.test:8443\", header: X-P, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { host: c.test, header: X-C, value: \"${env:SL_INJ_KEY}\", cleartext: true }\n");
	static const struct {
		const char *host;
		uint16_t port;
		bool tls;
		const char *inject;
	} cases[] = {
		{ "api.test", 443, true, "api.test/x-a" },
		{ "api.test", 80, true, "api.test/x-a" },
		{ "api.test", 8443, true, "" },
		{ "x.api.test", 443, true, "" },
		{ "api.test", 443, false, "" },         /* TLS needed */
		{ "a.w.test", 443, true, "*.w.test/x-w" },
		{ "b.a.w.test", 443, true, "*.w.test/x-w" },
		{ "w.test", 443, true, "" },
		{ "a.w.test", 443, false, "" },
		{ "p.test", 8443, true, "p.test:8443/x-p" },
		{ "p.test", 443, true, "" },
		{ "p.test", 8443, false, "" },
		{ "c.test", 443, true, "c.test/x-c" },
		{ "c.test", 80, false, "c.test/x-c" },  /* cleartext: true */
		{ "c.test", 8080, false, "" },
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char req[256];
		struct built b;

		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", cases[i].host);
		build(p, cases[i].host, cases[i].port, cases[i].tls, req, &b);
		assert_int_equal(b.rc, 0);
		if (strcmp(b.inject, cases[i].inject) != 0)
			fail_msg("%s:%u tls %d: inject '%s', want '%s'", cases[i].host,
				 cases[i].port, cases[i].tls, b.inject, cases[i].inject);
		assert_int_equal(strstr(b.head, ": " KEY "\r\n") != NULL, cases[i].inject[0] != '\0');
	}
	gw_policy_free(p);
}

/* Every copy of the credential's header, any case, goes; exactly one
 * goes up, after the client's other headers. Basic is Authorization. */
static void
test_strip_and_inject(void **state)
{
	struct gw_policy *p = layer(
		"      - { host: h.test, header: X-Api-Key, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { kind: basic, host: h.test, user: bob, password: \"${env:SL_INJ_PW}\" }\n");
	struct built b;
	char want[1024], enc[128];

	(void)state;
	build(p, "h.test", 443, true,
	      "POST /u HTTP/1.1\r\nHost: h.test\r\nx-api-key: 1\r\nX-API-KEY: 2\r\n"
	      "Accept: */*\r\nX-Api-Key: 3\r\nx-Api-kEY: 4\r\nauthorization: Basic eDp5\r\n"
	      "Authorization: Bearer z\r\nX-Api-Key-2: kept\r\nContent-Length: 2\r\n\r\nhi",
	      &b);
	snprintf(want, sizeof(want),
		 "POST /u HTTP/1.1\r\nHost: h.test\r\nAccept: */*\r\nX-Api-Key-2: kept\r\n"
		 "X-Api-Key: " KEY "\r\nAuthorization: Basic %s\r\nContent-Length: 2\r\n"
		 "Via: 1.1 sluice\r\n\r\n", b64("bob:" PW, enc));
	expect_head(&b, want);
	assert_string_equal(enc, "Ym9iOnB3LVY0bHVlLTM=");
	assert_string_equal(b.inject, "h.test/x-api-key,h.test/authorization");
	gw_policy_free(p);
}

struct two {
	char s[2][CONF_SENTINEL_LEN];
	size_t n;
};

static void
grab_two(void *arg, const char *env, const char *sentinel)
{
	struct two *t = arg;

	(void)env;
	if (t->n < 2)
		snprintf(t->s[t->n++], CONF_SENTINEL_LEN, "%s", sentinel);
}

/* This layer's sentinels are replaced where a header value has them (any
 * number of times, in any header) and inside a Basic pair; a header with
 * none goes as it is; inject= names the placeholders used. */
static void
test_sentinels_replaced(void **state)
{
	struct gw_policy *p = layer(
		"      - { kind: placeholder, host: s.test, env: GH_TOKEN, value: \"${env:SL_INJ_TOKEN}\" }\n"
		"      - { kind: placeholder, name: second, host: s.test, env: OTHER_TOKEN,\n"
		"          value: \"${env:SL_INJ_KEY}\" }\n");
	struct two t = { .n = 0 };
	char req[1024], want[1024], pair[256], enc[512], enc2[512];
	struct built b;

	(void)state;
	gw_policy_placeholders(p, grab_two, &t);
	assert_int_equal(t.n, 2);

	snprintf(req, sizeof(req),
		 "GET /x HTTP/1.1\r\nHost: s.test\r\nAuthorization: token %s\r\n"
		 "X-Both: %s-%s-%s\r\nX-None: plain\r\n\r\n", t.s[0], t.s[1], t.s[0], t.s[1]);
	build(p, "s.test", 443, true, req, &b);
	expect_head(&b, "GET /x HTTP/1.1\r\nHost: s.test\r\nAuthorization: token " TOKEN "\r\n"
			"X-Both: " KEY "-" TOKEN "-" KEY "\r\nX-None: plain\r\nVia: 1.1 sluice\r\n\r\n");
	assert_string_equal(b.inject, "s.test/$gh_token,second");

	/* inside a Basic pair: decoded, replaced, encoded again */
	snprintf(pair, sizeof(pair), "x-access-token:%s", t.s[0]);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic %s\r\n\r\n",
		 b64(pair, enc));
	build(p, "s.test", 443, true, req, &b);
	snprintf(want, sizeof(want),
		 "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic %s\r\nVia: 1.1 sluice\r\n\r\n",
		 b64("x-access-token:" TOKEN, enc2));
	expect_head(&b, want);
	assert_string_equal(b.inject, "s.test/$gh_token");

	/* a sentinel as the password and the user both */
	snprintf(pair, sizeof(pair), "%s:%s", t.s[1], t.s[0]);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic %s\r\n\r\n",
		 b64(pair, enc));
	build(p, "s.test", 443, true, req, &b);
	snprintf(want, sizeof(want),
		 "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic %s\r\nVia: 1.1 sluice\r\n\r\n",
		 b64(KEY ":" TOKEN, enc2));
	expect_head(&b, want);
	assert_string_equal(b.inject, "second,s.test/$gh_token");

	/* no sentinel: nothing changes, nothing noted */
	build(p, "s.test", 443, true,
	      "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic eDp5\r\n\r\n", &b);
	expect_head(&b, "GET / HTTP/1.1\r\nHost: s.test\r\nAuthorization: Basic eDp5\r\n"
			"Via: 1.1 sluice\r\n\r\n");
	assert_string_equal(b.inject, "");
	gw_policy_free(p);
}

/* Query credentials over TLS: %XX for all but unreserved bytes, the
 * client's parameters of that name (exactly that name, as sent or
 * spelled with %XX) removed, the others kept in order, a fragment-less
 * target otherwise unchanged. */
static void
test_query(void **state)
{
	struct gw_policy *p = layer(
		"      - { kind: query, host: q.test, param: api_key, value: \"${env:SL_INJ_QV}\" }\n"
		"      - { kind: query, host: q.test, param: sig, value: \"${env:SL_INJ_KEY}\" }\n");
	struct built b;

	(void)state;
	build(p, "q.test", 443, true,
	      "GET /a/b?x=1&api_key=mine&API_KEY=case&sig&y=&api_key=&api_keys=2&=z HTTP/1.1\r\n"
	      "Host: q.test\r\n\r\n", &b);
	expect_head(&b, "GET /a/b?x=1&API_KEY=case&y=&api_keys=2&=z&api_key=" QV_ENC "&sig=" KEY
			" HTTP/1.1\r\nHost: q.test\r\nVia: 1.1 sluice\r\n\r\n");
	assert_string_equal(b.inject, "q.test/?api_key,q.test/?sig");
	/* empty parameters and a bare '?' leave nothing behind */
	build(p, "q.test", 443, true, "GET /?&&api_key=1&& HTTP/1.1\r\nHost: q.test\r\n\r\n", &b);
	expect_head(&b, "GET /?api_key=" QV_ENC "&sig=" KEY " HTTP/1.1\r\nHost: q.test\r\n"
			"Via: 1.1 sluice\r\n\r\n");
	build(p, "q.test", 443, true, "GET /? HTTP/1.1\r\nHost: q.test\r\n\r\n", &b);
	expect_head(&b, "GET /?api_key=" QV_ENC "&sig=" KEY " HTTP/1.1\r\nHost: q.test\r\n"
			"Via: 1.1 sluice\r\n\r\n");
	/* the client's copy spelled with %XX (either case of hex) is the same
	 * parameter to the origin: removed too; a name that only decodes to a
	 * longer or shorter one is not (a '%' without two hex digits never
	 * gets here: the parser refuses the target, test_http1.c) */
	build(p, "q.test", 443, true,
	      "GET /?api%5Fkey=1&api%5fkey=2&%61%70%69_key&%73ig=3&api%5Fkeys=5"
	      "&api%5Fke=6 HTTP/1.1\r\nHost: q.test\r\n\r\n", &b);
	expect_head(&b, "GET /?api%5Fkeys=5&api%5Fke=6&api_key=" QV_ENC "&sig=" KEY
			" HTTP/1.1\r\nHost: q.test\r\nVia: 1.1 sluice\r\n\r\n");
	/* the absolute form, as the forward door has it */
	build(p, "q.test", 443, true, "GET https://q.test/p?sig=1&z HTTP/1.1\r\nHost: q.test\r\n\r\n",
	      &b);
	expect_head(&b, "GET /p?z&api_key=" QV_ENC "&sig=" KEY " HTTP/1.1\r\nHost: q.test\r\n"
			"Via: 1.1 sluice\r\n\r\n");
	gw_policy_free(p);
}

/* inject= lists each credential that did something once, in the order
 * they were applied, whatever their names look like (one a prefix of
 * another). */
static void
test_inject_names(void **state)
{
	struct gw_policy *p = layer(
		"      - { name: tok2, host: n.test, header: X-A, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { name: tok, host: n.test, header: X-B, value: \"${env:SL_INJ_KEY}\" }\n"
		"      - { name: to, host: n.test, header: X-C, value: \"${env:SL_INJ_KEY}\" }\n");
	struct built b;

	(void)state;
	build(p, "n.test", 443, true, "GET / HTTP/1.1\r\nHost: n.test\r\n\r\n", &b);
	expect_head(&b, "GET / HTTP/1.1\r\nHost: n.test\r\nX-A: " KEY "\r\nX-B: " KEY "\r\n"
			"X-C: " KEY "\r\nVia: 1.1 sluice\r\n\r\n");
	assert_string_equal(b.inject, "tok2,tok,to");
	gw_policy_free(p);
}

/* inject= holds every name a request can get: GW_INJECT_MAX credentials
 * whose names sluice made from a long host pattern and a long header
 * name (each over 300 bytes), none dropped, none cut; and the access
 * line carries the whole list, in text and in JSON. */
static void
test_inject_names_all(void **state)
{
	char host[260], entries[16384], want[GW_CONN_INJECT_MAX], req[512], line[GW_ACCESS_LINE_MAX];
	size_t o = 0, w = 0;
	struct gw_policy *p;
	struct built b;
	struct gw_access a = { .door = "forward", .decision = "allow" };

	(void)state;
	/* four labels of 61 and ".test": 254 bytes, the longest host */
	for (int i = 0; i < 4; i++)
		o += (size_t)snprintf(host + o, sizeof(host) - o, "%.61s.",
				      "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh");
	snprintf(host + o, sizeof(host) - o, "test");
	assert_int_equal(strlen(host), 252);
	o = 0;
	for (int i = 0; i < GW_INJECT_MAX; i++) {
		o += (size_t)snprintf(entries + o, sizeof(entries) - o,
				      "      - { host: %s, header: X-%d-%.60s, value: \"${env:SL_INJ_KEY}\" }\n",
				      host, i, "Long-Header-Name-Long-Header-Name-Long-Header-Name-Long-H");
		w += (size_t)snprintf(want + w, sizeof(want) - w, "%s%s/x-%d-%.60s", i ? "," : "", host,
				      i, "long-header-name-long-header-name-long-header-name-long-h");
	}
	assert_true(strlen(want) > 8 * 300);
	p = layer(entries);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host);
	build(p, host, 443, true, req, &b);
	assert_int_equal(b.rc, 0);
	assert_string_equal(b.inject, want);

	a.inject = b.inject;
	a.host = host;
	a.sni = host;
	assert_true(gw_access_format(&a, false, NULL, line, sizeof(line)) > 0);
	assert_non_null(strstr(line, " inject="));
	assert_string_equal(strstr(line, " inject=") + 8, want);
	assert_true(gw_access_format(&a, true, "t", line, sizeof(line)) > 0);
	assert_non_null(strstr(line, want));
	gw_policy_free(p);
}

static void
grab_akid(void *arg, const char *env, const char *v)
{
	if (strcmp(env, "AWS_ACCESS_KEY_ID") == 0)
		snprintf(arg, 32, "%s", v);
}

/* SigV4's plan for a client that sends no X-Amz-Content-SHA256 (what
 * test_hold.c drives through the door): no body, signed at once; a body
 * (by length or chunked) within the bound, held, not signed yet, and its
 * Authorization never sent unsigned; with the field, signed at once and
 * streamed. (A Content-Length past the bound is refused: test_hold.c.) */
static void
test_sigv4_plan(void **state)
{
	struct gw_policy *p = layer(
		"      - { name: aws, kind: sigv4, host: \"*.amazonaws.com\", access_key_id: "
		"AKIAIOSFODNN7EXAMPLE, secret: \"${env:SL_INJ_KEY}\" }\n");
	static const struct {
		const char *extra;
		bool hold;
	} cases[] = {
		{ "", false },
		{ "Content-Length: 0\r\n", false },
		{ "Content-Length: 2\r\n", true },
		{ "Content-Length: 1048576\r\n", true },
		{ "Transfer-Encoding: chunked\r\n", true },
		{ "X-Amz-Content-SHA256: UNSIGNED-PAYLOAD\r\nContent-Length: 2\r\n", false },
		{ "X-Amz-Content-SHA256: " "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		  "\r\nTransfer-Encoding: chunked\r\n", false },
	};
	char akid[32] = "";

	(void)state;
	gw_policy_placeholders(p, grab_akid, akid);
	assert_int_equal(strlen(akid), 20);
	for (size_t i = 0; i < N(cases); i++) {
		struct gw_h1x *x = calloc(1, sizeof(*x));
		struct gw_h1_parser ps;
		struct gw_h1_error terr;
		char req[1024];

		assert_non_null(x);
		snprintf(req, sizeof(req),
			 "POST /?Action=X HTTP/1.1\r\nHost: sts.amazonaws.com\r\n"
			 "X-Amz-Date: 20150830T123600Z\r\n%sAuthorization: AWS4-HMAC-SHA256 "
			 "Credential=%s/20150830/us-east-1/sts/aws4_request, "
			 "SignedHeaders=host;x-amz-date, Signature=%064d\r\n\r\n",
			 cases[i].extra, akid, 0);
		gw_h1_parser_init(&ps, GW_H1_REQUEST, 65536);
		assert_int_equal(gw_h1_head_parse(&ps, req, strlen(req), &x->reqh), GW_H1_DONE);
		assert_int_equal(gw_h1_target_parse(x->reqh.target.p, x->reqh.target.len,
						    x->reqh.method_id, &x->target, &terr), 0);
		x->base.policy = p;
		snprintf(x->base.req.host, sizeof(x->base.req.host), "sts.amazonaws.com");
		x->base.req.port = 443;
		x->up_tls = true;
		assert_int_equal(gw_inject_plan(x), 0);
		if (x->inj.hold != cases[i].hold || (x->inj.authz != NULL) == cases[i].hold)
			fail_msg("%s: hold %d, signed %d", cases[i].extra, x->inj.hold,
				 x->inj.authz != NULL);
		assert_ptr_equal(x->inj.sigv4, x->inj.c[0]);
		/* a head built before the body came (not done, but were it):
		 * no Authorization, never the placeholder-signed one */
		assert_int_equal(gw_h1x_build_request(x), 0);
		x->up.hbuf[x->up.hlen - 1] = '\0';
		if (cases[i].hold) {
			assert_null(strstr(x->up.hbuf, "Authorization"));
			assert_null(strstr(x->up.hbuf, "SLUICE"));
		} else {
			assert_non_null(strstr(x->up.hbuf, "\r\nAuthorization: AWS4-HMAC-SHA256 "
							   "Credential=AKIAIOSFODNN7EXAMPLE/"));
		}
		free(x->inj.authz);
		gw_half_free(&x->up);
		gw_half_free(&x->down);
		free(x);
	}
	gw_policy_free(p);
}

/* A credential as long as allowed fits the rebuilt head: a Basic user of
 * 8000 bytes and a one-byte password (base64 grows the pair by a third),
 * a query parameter's long name. */
static void
test_long_values_fit(void **state)
{
	char entries[9000], user[8001];
	struct gw_policy *p;
	struct built b;

	(void)state;
	memset(user, 'u', sizeof(user) - 1);
	user[sizeof(user) - 1] = '\0';
	setenv("SL_INJ_ONE", "1", 1);
	snprintf(entries, sizeof(entries),
		 "      - { kind: basic, host: l.test, user: %s, password: \"${env:SL_INJ_ONE}\" }\n"
		 "      - { kind: query, host: l.test, param: %.200s, value: \"${env:SL_INJ_ONE}\" }\n",
		 user, user);
	p = layer(entries);
	build(p, "l.test", 443, true, "GET / HTTP/1.1\r\nHost: l.test\r\n\r\n", &b);
	assert_int_equal(b.rc, 0);
	assert_true(strncmp(b.inject, "l.test/authorization,l.test/?uuuuuuuu", 37) == 0);
	snprintf(entries, sizeof(entries), "GET /?%.200s=1 HTTP/1.1\r\nHost: l.test\r\n", user);
	assert_true(strncmp(b.head, entries, strlen(entries)) == 0);
	assert_non_null(strstr(b.head, "\r\nAuthorization: Basic dXV1"));
	gw_policy_free(p);
	unsetenv("SL_INJ_ONE");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* refusals */
		cmocka_unit_test(test_sentinel_refusals),
		/* the forward door, in the clear */
		cmocka_unit_test(test_cleartext_header_and_placeholder),
		cmocka_unit_test(test_cleartext_basic_and_query),
		cmocka_unit_test(test_nothing_injected),
		/* over TLS */
		cmocka_unit_test(test_scope),
		cmocka_unit_test(test_strip_and_inject),
		cmocka_unit_test(test_sentinels_replaced),
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_inject_names),
		cmocka_unit_test(test_inject_names_all),
		cmocka_unit_test(test_sigv4_plan),
		cmocka_unit_test(test_long_values_fit),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, setup, dh_group_teardown));
}

/* test_api.c: the REST API server. The pure helpers first, bad inputs
 * first (token comparison, route patterns, percent-decoding), then a real
 * server on 127.0.0.1 and on a unix socket in a temporary directory, with a
 * small route table and a configuration loaded from YAML, driven by a
 * client that parses answers with the strict parser. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"
#include <jansson.h>

#include "api.h"
#include "conf.h"
#include "http1.h"
#include "metrics.h"

#define OP_TOKEN  "op-7f3a9c2e51d04b86"
#define ACME_KEY  "acme-k1-0b6e2f"
#define BETA_KEY1 "beta-k1-c41d"
#define BETA_KEY2 "beta-k2-9e07"

/* ---- gw_api_token_eq ------------------------------------------------ */

static void
test_token_different(void **state)
{
	(void)state;
	assert_false(gw_api_token_eq("secret", 6, "secreT", 6));
	assert_false(gw_api_token_eq("Xecret", 6, "secret", 6));
	assert_false(gw_api_token_eq("a\0b", 3, "a\0c", 3));
}

static void
test_token_different_lengths(void **state)
{
	(void)state;
	assert_false(gw_api_token_eq("secret", 6, "secret2", 7));
	assert_false(gw_api_token_eq("secret2", 7, "secret", 6));
	/* a prefix is not a match, whichever side is longer */
	assert_false(gw_api_token_eq("secret", 5, "secret", 6));
	assert_false(gw_api_token_eq("secret", 6, "secret", 5));
}

static void
test_token_empty(void **state)
{
	(void)state;
	assert_false(gw_api_token_eq("", 0, "secret", 6));
	assert_false(gw_api_token_eq("secret", 6, "", 0));
	assert_false(gw_api_token_eq(NULL, 0, "x", 1));
	assert_true(gw_api_token_eq("", 0, "", 0));
}

static void
test_token_equal(void **state)
{
	char big[4096];

	(void)state;
	assert_true(gw_api_token_eq("secret", 6, "secret", 6));
	assert_true(gw_api_token_eq("a\0b", 3, "a\0b", 3));
	memset(big, 'k', sizeof(big));
	assert_true(gw_api_token_eq(big, sizeof(big), big, sizeof(big)));
}

/* ---- gw_api_route_match --------------------------------------------- */

#define P_ID   "/v1/sandboxes/{id}"
#define P_EXEC "/v1/sandboxes/{id}/exec"

static void
no_match(const char *pattern, const char *path)
{
	char id[49] = "untouched";

	if (gw_api_route_match(pattern, path, id, sizeof(id)))
		fail_msg("'%s' matched '%s'", path, pattern);
	assert_string_equal(id, "");
}

static void
test_route_bad_id_chars(void **state)
{
	(void)state;
	no_match(P_ID, "/v1/sandboxes/a.b");
	no_match(P_ID, "/v1/sandboxes/a b");
	no_match(P_ID, "/v1/sandboxes/a%2Fb");
	no_match(P_ID, "/v1/sandboxes/..");
	no_match(P_ID, "/v1/sandboxes/sbx\xc3\xa9");
	no_match(P_ID, "/v1/sandboxes/a:b");
	no_match(P_EXEC, "/v1/sandboxes/a+b/exec");
}

static void
test_route_id_too_long(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "/v1/sandboxes/%.*s", 49,
	         "0123456789012345678901234567890123456789012345678901234567890");
	no_match(P_ID, path);
}

static void
test_route_empty_id(void **state)
{
	(void)state;
	no_match(P_ID, "/v1/sandboxes/");
	no_match(P_EXEC, "/v1/sandboxes//exec");
}

static void
test_route_extra_segments(void **state)
{
	(void)state;
	no_match(P_ID, "/v1/sandboxes/a/exec");
	no_match(P_EXEC, "/v1/sandboxes/a/exec/more");
	no_match(P_EXEC, "/v1/sandboxes/a");
	no_match("/v1/sandboxes", "/v1/sandboxes/a");
	no_match("/v1/sandboxes", "/v1");
	no_match("/v1/sandboxes", "/v1/sandboxe");
	no_match("/v1/sandboxes", "/v1/sandboxesX");
	no_match("/v1/sandboxes", "//v1/sandboxes");
	no_match("/v1/sandboxes", "/v1//sandboxes");
	no_match("/v1/sandboxes", "v1/sandboxes");
	no_match("/v1/sandboxes", "");
}

static void
test_route_trailing_slash(void **state)
{
	(void)state;
	no_match("/v1/sandboxes", "/v1/sandboxes/");
	no_match(P_EXEC, "/v1/sandboxes/a/exec/");
	no_match("/v1/sandboxes/", "/v1/sandboxes");
}

static void
test_route_id_buffer_small(void **state)
{
	char id[4];

	(void)state;
	assert_false(gw_api_route_match(P_ID, "/v1/sandboxes/abcd", id, sizeof(id)));
	assert_true(gw_api_route_match(P_ID, "/v1/sandboxes/abc", id, sizeof(id)));
	assert_string_equal(id, "abc");
}

static void
test_route_good(void **state)
{
	char id[49], path[128], want[49];

	(void)state;
	assert_true(gw_api_route_match("/v1/sandboxes", "/v1/sandboxes", id, sizeof(id)));
	assert_string_equal(id, "");
	assert_true(gw_api_route_match("/", "/", id, sizeof(id)));
	assert_true(gw_api_route_match(P_ID, "/v1/sandboxes/sbx-5f2a_9C", id, sizeof(id)));
	assert_string_equal(id, "sbx-5f2a_9C");
	assert_true(gw_api_route_match(P_EXEC, "/v1/sandboxes/x/exec", id, sizeof(id)));
	assert_string_equal(id, "x");
	memset(want, 'z', 48);
	want[48] = '\0';
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", want);
	assert_true(gw_api_route_match(P_EXEC, path, id, sizeof(id)));
	assert_string_equal(id, want);
	assert_true(gw_api_route_match(P_EXEC, path, NULL, 0));
}

/* ---- gw_api_pct_decode ---------------------------------------------- */

static void
bad_pct(const char *s, int want)
{
	char out[64];

	if (gw_api_pct_decode(s, strlen(s), out, sizeof(out)) != want)
		fail_msg("'%s' did not give %d", s, want);
}

static void
test_pct_bad_escapes(void **state)
{
	(void)state;
	bad_pct("%zz", -EINVAL);
	bad_pct("a%G1", -EINVAL);
	bad_pct("a%1G", -EINVAL);
	bad_pct("%%", -EINVAL);
	bad_pct("%%41", -EINVAL);
	bad_pct("% 1", -EINVAL);
	bad_pct("%-1", -EINVAL);
}

static void
test_pct_nul(void **state)
{
	char out[16];

	(void)state;
	bad_pct("%00", -EINVAL);
	bad_pct("a%00b", -EINVAL);
	assert_int_equal(gw_api_pct_decode("a\0b", 3, out, sizeof(out)), -EINVAL);
}

static void
test_pct_truncated(void **state)
{
	char out[16];

	(void)state;
	bad_pct("%", -EINVAL);
	bad_pct("%4", -EINVAL);
	bad_pct("abc%", -EINVAL);
	bad_pct("abc%4", -EINVAL);
	/* the span ends inside an escape even though the string goes on */
	assert_int_equal(gw_api_pct_decode("a%41", 3, out, sizeof(out)), -EINVAL);
}

static void
test_pct_small_out(void **state)
{
	char out[4];

	(void)state;
	assert_int_equal(gw_api_pct_decode("abcd", 4, out, sizeof(out)), -ENOSPC);
	assert_int_equal(gw_api_pct_decode("abc", 3, out, 0), -ENOSPC);
	assert_int_equal(gw_api_pct_decode("abc", 3, out, sizeof(out)), 0);
	assert_string_equal(out, "abc");
	/* "%41%42%43" decodes to 3 bytes: it fits */
	assert_int_equal(gw_api_pct_decode("%41%42%43", 9, out, sizeof(out)), 0);
	assert_string_equal(out, "ABC");
}

static void
test_pct_good(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(gw_api_pct_decode("", 0, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(gw_api_pct_decode("a%20b", 5, out, sizeof(out)), 0);
	assert_string_equal(out, "a b");
	assert_int_equal(gw_api_pct_decode("%2f%2F", 6, out, sizeof(out)), 0);
	assert_string_equal(out, "//");
	assert_int_equal(gw_api_pct_decode("a+b", 3, out, sizeof(out)), 0);
	assert_string_equal(out, "a+b");
	assert_int_equal(gw_api_pct_decode("%c3%A9", 6, out, sizeof(out)), 0);
	assert_string_equal(out, "\xc3\xa9");
	assert_int_equal(gw_api_pct_decode("%25", 3, out, sizeof(out)), 0);
	assert_string_equal(out, "%");
}

/* ---- the server: handlers ------------------------------------------- */

static json_t *
who(const struct gw_api_req_info *i)
{
	return json_pack("{s:s,s:s?,s:s?,s:s}", "role",
	                 i->role == GW_API_OPERATOR ? "operator" : "tenant", "tenant", i->tenant,
	                 "id", i->id, "path", i->path);
}

static void
h_who(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	json_t *v = who(i);
	const char *q = gw_api_query(r, "q");

	(void)arg;
	if (q)
		json_object_set_new(v, "q", json_string(q));
	gw_api_reply_json(r, 200, v);
}

static void
h_echo(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	json_t *v = gw_api_body_json(r);

	(void)i;
	(void)arg;
	if (v)
		gw_api_reply_json(r, 201, json_pack("{s:o}", "got", v));
}

/* raw: counts the body's bytes and sums them */
static void
h_put(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	char buf[1000];
	uint64_t n = 0, sum = 0;
	ssize_t k;

	(void)arg;
	while ((k = gw_api_body_read(r, buf, sizeof(buf))) > 0) {
		n += (uint64_t)k;
		for (ssize_t j = 0; j < k; j++)
			sum += (unsigned char)buf[j];
	}
	if (k < 0) {
		gw_api_reply_error(r, 400, "bad-request", "body: %s", strerror((int)-k));
		return;
	}
	gw_api_reply_json(r, 201,
	                  json_pack("{s:s,s:I,s:I,s:I}", "id", i->id, "bytes", (json_int_t)n, "sum",
	                            (json_int_t)sum, "declared",
	                            (json_int_t)gw_api_body_length(r)));
}

/* raw, and reads none of the body */
static void
h_lazy(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	(void)i;
	(void)arg;
	gw_api_reply_raw(r, 200, "text/plain", "lazy\n", 5);
}

static void
h_stream(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	int bad = 0;

	(void)i;
	(void)arg;
	/* A server thread: cmocka's asserts belong to the test's thread, so
	 * a failure here shows as a wrong stream. */
	if (!gw_api_accepts(r, "application/x-ndjson") || gw_api_accepts(r, "text/html") ||
	    gw_api_accepts(r, "application/json")) {
		gw_api_reply_error(r, 406, "bad-accept", "Accept was misread");
		return;
	}
	if (gw_api_stream_begin(r, 200, "application/x-ndjson") != 0)
		return;
	for (int k = 0; k < 3; k++)
		bad |= gw_api_stream_json(r, json_pack("{s:i}", "n", k));
	bad |= gw_api_stream_write(r, "", 0);
	/* too late for anything else */
	gw_api_reply_json(r, 500, json_object());
	bad |= gw_api_stream_begin(r, 200, "text/plain") != -EALREADY;
	if (bad)
		gw_api_stream_write(r, "bad\n", 4);
	gw_api_stream_end(r);
	if (gw_api_stream_end(r) != -EINVAL)
		gw_api_stream_write(r, "bad\n", 4);
}

static void
h_silent(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	(void)r;
	(void)i;
	(void)arg;
}

static void
h_details(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	(void)i;
	(void)arg;
	gw_api_reply_error_json(r, 400,
	                        json_pack("{s:s,s:s,s:[s,s]}", "code", "bad-request", "message",
	                                  "2 errors", "details",
	                                  "pools[0].warm_max: 1 is below warm (2)",
	                                  "pools[1].policy: no policy named \"strict\""));
}

static const struct gw_api_route routes[] = {
    {"GET", "/v1/info", true, false, h_who},
    {"GET", "/v1/sandboxes", false, false, h_who},
    {"GET", "/v1/sandboxes/{id}", false, false, h_who},
    {"DELETE", "/v1/sandboxes/{id}", false, false, h_who},
    {"PUT", "/v1/sandboxes/{id}/files", false, true, h_put},
    {"GET", "/v1/pools", true, false, h_who},
    {"PUT", "/v1/pools", true, false, h_echo},
    {"POST", "/v1/echo", false, false, h_echo},
    {"POST", "/v1/lazy", false, true, h_lazy},
    {"GET", "/v1/stream", false, false, h_stream},
    {"GET", "/v1/silent", false, false, h_silent},
    {"POST", "/v1/details", false, false, h_details},
    {NULL, NULL, false, false, NULL},
};

/* ---- the server: fixture -------------------------------------------- */

struct fix {
	char dir[64];
	char sock[96];
	struct conf *conf;
	struct gw_api *api;
	char addr[64];
};

static struct fix F;

/* arg: the server's configuration */
static struct conf *
conf_now(void *arg)
{
	return conf_ref(arg);
}

static struct conf *
load_conf(const char *sock)
{
	char yaml[2048];
	struct conf_diag d;
	struct conf *c;

	setenv("SL_TEST_API_OP", OP_TOKEN, 1);
	setenv("SL_TEST_API_ACME", ACME_KEY, 1);
	snprintf(yaml, sizeof(yaml),
	         "api:\n"
	         "  listen: 127.0.0.1:1\n"
	         "  socket: %s\n"
	         "  operator_token: ${env:SL_TEST_API_OP}\n"
	         "tenants:\n"
	         "  - name: acme\n"
	         "    keys: [\"${env:SL_TEST_API_ACME}\"]\n"
	         "  - name: beta\n"
	         "    keys: [\"" BETA_KEY1 "\", \"" BETA_KEY2 "\"]\n",
	         sock);
	conf_diag_init(&d);
	c = conf_load_mem("test.yaml", yaml, strlen(yaml), &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	conf_diag_fini(&d);
	assert_non_null(c);
	/* The loader refuses port 0; this copy is the test's own, so the
	 * listener can take any free port. */
	((struct sockaddr_in *)&c->api.listen.addr)->sin_port = 0;
	return c;
}

static int
setup(void **state)
{
	char err[256];

	(void)state;
	snprintf(F.dir, sizeof(F.dir), "/tmp/sl-api-XXXXXX");
	assert_non_null(mkdtemp(F.dir));
	/* a directory the server creates */
	snprintf(F.sock, sizeof(F.sock), "%s/run/api.sock", F.dir);
	F.conf = load_conf(F.sock);
	err[0] = '\0';
	F.api = gw_api_start(F.conf, routes, conf_now, F.conf, err, sizeof(err));
	if (!F.api)
		fail_msg("gw_api_start: %s", err);
	snprintf(F.addr, sizeof(F.addr), "%s", gw_api_tcp_address(F.api));
	return 0;
}

static int
teardown(void **state)
{
	char run[96];
	struct stat st;

	(void)state;
	gw_api_stop(F.api);
	F.api = NULL;
	assert_int_equal(lstat(F.sock, &st), -1);
	conf_unref(F.conf);
	F.conf = NULL;
	snprintf(run, sizeof(run), "%s/run", F.dir);
	rmdir(run);
	rmdir(F.dir);
	return 0;
}

/* ---- the server: a client ------------------------------------------- */

struct client {
	int fd;
	bool tcp;
	size_t len;
	char buf[1 << 16];
};

struct resp {
	unsigned status;
	char head[4096];
	char *body;
	size_t blen;
	bool eof_after; /* the server closed after this answer */
};

static void
timeouts(int fd)
{
	struct timeval tv = {.tv_sec = 10};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static struct client *
dial_tcp(void)
{
	struct client *cl = calloc(1, sizeof(*cl));
	struct sockaddr_in sin = {.sin_family = AF_INET};
	char host[64];
	char *colon;

	assert_non_null(cl);
	snprintf(host, sizeof(host), "%s", F.addr);
	colon = strrchr(host, ':');
	assert_non_null(colon);
	*colon = '\0';
	assert_int_equal(inet_pton(AF_INET, host, &sin.sin_addr), 1);
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cl->tcp = true;
	assert_true(cl->fd >= 0);
	timeouts(cl->fd);
	assert_int_equal(connect(cl->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return cl;
}

static struct client *
dial_unix(void)
{
	struct client *cl = calloc(1, sizeof(*cl));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	assert_non_null(cl);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", F.sock);
	cl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(cl->fd >= 0);
	timeouts(cl->fd);
	assert_int_equal(connect(cl->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return cl;
}

static void
client_close(struct client *cl)
{
	close(cl->fd);
	free(cl);
}

static void
send_raw(struct client *cl, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t k = send(cl->fd, s, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			fail_msg("send: %s", strerror(errno));
		s += k;
		n -= (size_t)k;
	}
}

/* The requests here say "Host: x"; a TCP client sends the listener's
 * own address instead, the one Host the server takes there (site.h). */
static void
send_str(struct client *cl, const char *s, size_t n)
{
	static const char hx[] = "Host: x\r\n";
	const char *at;

	while (cl->tcp && (at = memmem(s, n, hx, sizeof(hx) - 1))) {
		char h[96];
		int k = snprintf(h, sizeof(h), "Host: %s\r\n", F.addr);

		send_raw(cl, s, (size_t)(at - s));
		send_raw(cl, h, (size_t)k);
		n -= (size_t)(at - s) + sizeof(hx) - 1;
		s = at + sizeof(hx) - 1;
	}
	send_raw(cl, s, n);
}

static void sendf(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sendf(struct client *cl, const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	send_str(cl, buf, (size_t)n);
}

static ssize_t
client_recv(struct client *cl)
{
	ssize_t k;

	assert_true(cl->len < sizeof(cl->buf));
	do
		k = recv(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - cl->len, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		fail_msg("recv: %s", strerror(errno));
	cl->len += (size_t)k;
	return k;
}

static void
resp_free(struct resp *rs)
{
	free(rs->body);
	rs->body = NULL;
}

/* Reads one answer (the bytes after it stay in cl->buf). */
static void
read_resp(struct client *cl, struct resp *rs)
{
	struct gw_h1_parser p;
	struct gw_h1_head *h = calloc(1, sizeof(*h));
	struct gw_h1_body b;
	enum gw_h1_result rc = GW_H1_AGAIN;
	size_t off, cap = 1 << 16;

	assert_non_null(h);
	memset(rs, 0, sizeof(*rs));
	gw_h1_parser_init(&p, GW_H1_RESPONSE, 1 << 16);
	for (;;) {
		if (cl->len)
			rc = gw_h1_head_parse(&p, cl->buf, cl->len, h);
		if (rc == GW_H1_ERROR)
			fail_msg("bad answer: %s", h->err.msg);
		if (rc == GW_H1_DONE)
			break;
		if (client_recv(cl) == 0)
			fail_msg("EOF before an answer");
	}
	rs->status = h->status;
	assert_true(h->head_len < sizeof(rs->head));
	memcpy(rs->head, cl->buf, h->head_len);
	rs->head[h->head_len] = '\0';
	rs->body = malloc(cap);
	assert_non_null(rs->body);
	gw_h1_body_init(&b, h->body, h->content_length, GW_H1_DECODE);
	off = h->head_len;
	rc = h->body == GW_H1_BODY_NONE || (h->body == GW_H1_BODY_LENGTH && h->content_length == 0)
	         ? GW_H1_DONE
	         : GW_H1_AGAIN;
	while (rc == GW_H1_AGAIN) {
		if (off < cl->len) {
			size_t used = 0;
			struct gw_h1_span d = {0};

			rc = gw_h1_body_feed(&b, cl->buf + off, cl->len - off, &used, &d);
			assert_int_not_equal(rc, GW_H1_ERROR);
			off += used;
			assert_true(rs->blen + d.len < cap);
			memcpy(rs->body + rs->blen, d.p, d.len);
			rs->blen += d.len;
			continue;
		}
		memmove(cl->buf, cl->buf + off, cl->len - off);
		cl->len -= off;
		off = 0;
		if (client_recv(cl) == 0) {
			rc = gw_h1_body_eof(&b);
			assert_int_equal(rc, GW_H1_DONE);
			rs->eof_after = true;
		}
	}
	rs->body[rs->blen] = '\0';
	memmove(cl->buf, cl->buf + off, cl->len - off);
	cl->len -= off;
	if (!rs->eof_after && !h->keep_alive) {
		/* the server must close now */
		assert_int_equal(cl->len, 0);
		assert_int_equal(client_recv(cl), 0);
		rs->eof_after = true;
	}
	free(h);
}

static void
assert_has(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("'%s' not in:\n%s", needle, hay);
}

static void
assert_error(const struct resp *rs, unsigned status, const char *code)
{
	json_error_t e;
	json_t *v;
	char reason[96];

	if (rs->status != status)
		fail_msg("status %u, want %u:\n%s%s", rs->status, status, rs->head, rs->body);
	assert_has(rs->head, "Content-Type: application/json\r\n");
	snprintf(reason, sizeof(reason), "Sluice-Reason: %s\r\n", code);
	assert_has(rs->head, reason);
	assert_true(rs->blen > 0 && rs->body[rs->blen - 1] == '\n');
	v = json_loadb(rs->body, rs->blen, 0, &e);
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "error"), "code")),
	                    code);
	assert_non_null(json_string_value(json_object_get(json_object_get(v, "error"), "message")));
	json_decref(v);
}

/* One request on a new connection; returns the answer. */
static void once(struct client *cl, struct resp *rs, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
once(struct client *cl, struct resp *rs, const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	send_str(cl, buf, (size_t)n);
	read_resp(cl, rs);
}

static const char *
json_get_str(const struct resp *rs, const char *key)
{
	static char out[256];
	json_t *v = json_loadb(rs->body, rs->blen, 0, NULL);
	const char *s;

	assert_non_null(v);
	s = json_string_value(json_object_get(v, key));
	snprintf(out, sizeof(out), "%s", s ? s : "(null)");
	json_decref(v);
	return out;
}

#define H "Host: x\r\n"

/* ---- the server: refusals ------------------------------------------- */

/* tmpl with every "PORT" replaced by the TCP listener's port. */
static void
with_port(const char *tmpl, char *out, size_t outsz)
{
	const char *port = strrchr(F.addr, ':') + 1, *at;
	size_t o = 0;

	while ((at = strstr(tmpl, "PORT"))) {
		o += (size_t)snprintf(out + o, outsz - o, "%.*s%s", (int)(at - tmpl), tmpl, port);
		assert_true(o < outsz);
		tmpl = at + 4;
	}
	snprintf(out + o, outsz - o, "%s", tmpl);
}

/* A web page's request (site.h): 403 before anything else (the target,
 * the token, the route, the body, the handler), then closed. Each case
 * carries a good operator token, and would be answered otherwise. */
static void
test_srv_403_browser(void **state)
{
	static const struct {
		bool tcp;
		const char *head; /* the request's head but its token */
		const char *code;
	} cases[] = {
	    {true, "GET /v1/info HTTP/1.1\r\nHost: evil.test:PORT\r\n", "bad-host"},
	    {true, "GET /v1/info HTTP/1.1\r\nHost: localhost.evil.test:PORT\r\n", "bad-host"},
	    {true, "GET /v1/info HTTP/1.0\r\n", "bad-host"},
	    {true, "GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: http://evil.test\r\n",
	     "bad-origin"},
	    {true, "GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: null\r\n", "bad-origin"},
	    {true, "GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nSec-Fetch-Site: cross-site\r\n",
	     "cross-site"},
	    {true, "GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nSec-Fetch-Site: same-site\r\n",
	     "cross-site"},
	    /* before the target (400), the route (404) */
	    {true, "GET http://x/v1/info HTTP/1.1\r\nHost: evil.test:PORT\r\n", "bad-host"},
	    {true, "GET /nope HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: http://evil.test\r\n",
	     "bad-origin"},
	    /* before the body is read, before the handler runs */
	    {true,
	     "POST /v1/echo HTTP/1.1\r\nHost: evil.test:PORT\r\nContent-Length: 7\r\n"
	     "Content-Type: application/json\r\n",
	     "bad-host"},
	    /* the unix socket: no web origin, and Sec-Fetch-Site as on TCP */
	    {false, "GET /v1/info HTTP/1.1\r\nHost: x\r\nOrigin: http://localhost\r\n",
	     "bad-origin"},
	    {false, "GET /v1/info HTTP/1.1\r\nHost: x\r\nSec-Fetch-Site: cross-site\r\n",
	     "cross-site"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct client *cl = cases[i].tcp ? dial_tcp() : dial_unix();
		uint64_t n0 = gw_metrics_api_browser_refusals(cases[i].code);
		struct resp rs;
		char head[512];

		with_port(cases[i].head, head, sizeof(head));
		once(cl, &rs, "%sAuthorization: Bearer " OP_TOKEN "\r\n\r\n%s", head,
		     strstr(head, "Content-Length") ? "{\"a\":1}" : "");
		if (rs.status != 403)
			fail_msg("case %zu: %u:\n%s%s", i, rs.status, rs.head, rs.body);
		assert_error(&rs, 403, cases[i].code);
		assert_has(rs.head, "Connection: close\r\n");
		assert_true(rs.eof_after);
		/* counted before the answer went out */
		assert_int_equal(gw_metrics_api_browser_refusals(cases[i].code), n0 + 1);
		resp_free(&rs);
		client_close(cl);
	}
}

/* What a browser-free client sends passes: the CLI's Host for
 * http://127.0.0.1:PORT and http://localhost:PORT, a typed navigation, a
 * same-origin page, any Host (or none) on the unix socket. */
static void
test_srv_browser_checks_pass(void **state)
{
	static const char *const tcp[] = {
	    "Host: 127.0.0.1:PORT\r\n",
	    "Host: localhost:PORT\r\n",
	    "Host: LOCALHOST:PORT\r\nSec-Fetch-Site: none\r\n",
	    "Host: 127.0.0.1:PORT\r\nOrigin: http://127.0.0.1:PORT\r\nSec-Fetch-Site: same-origin\r\n",
	};
	struct resp rs;

	(void)state;
	for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]); i++) {
		struct client *cl = dial_tcp();
		char hdrs[256];

		with_port(tcp[i], hdrs, sizeof(hdrs));
		once(cl, &rs, "GET /v1/info HTTP/1.1\r\n%sAuthorization: Bearer " OP_TOKEN "\r\n\r\n",
		     hdrs);
		if (rs.status != 200)
			fail_msg("case %zu: %u:\n%s%s", i, rs.status, rs.head, rs.body);
		resp_free(&rs);
		client_close(cl);
	}
	{
		struct client *cl = dial_unix();

		once(cl, &rs, "GET /v1/info HTTP/1.1\r\nHost: evil.test:1\r\n\r\n");
		assert_int_equal(rs.status, 200);
		resp_free(&rs);
		once(cl, &rs, "GET /v1/info HTTP/1.0\r\n\r\n");
		assert_int_equal(rs.status, 200);
		resp_free(&rs);
		client_close(cl);
	}
}

static void
test_srv_401_no_token_tcp(void **state)
{
	struct client *cl = dial_tcp();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/sandboxes HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 401, "unauthorized");
	assert_has(rs.head, "WWW-Authenticate: Bearer\r\n");
	assert_false(rs.eof_after); /* an error is no reason to close */
	resp_free(&rs);
	/* 401 before 404: an unknown path tells nothing */
	once(cl, &rs, "GET /nope HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 401, "unauthorized");
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_401_bad_token(void **state)
{
	static const char *const bad[] = {
	    "Authorization: Bearer nope\r\n",
	    "Authorization: Bearer " OP_TOKEN "x\r\n",
	    "Authorization: Bearer op-7f3a9c2e51d04b8\r\n",
	    "Authorization: Basic " OP_TOKEN "\r\n",
	    "Authorization: Bearer\r\n",
	    "Authorization: " OP_TOKEN "\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct client *cl = dial_tcp();
		struct resp rs;

		once(cl, &rs, "GET /v1/sandboxes HTTP/1.1\r\n" H "%s\r\n", bad[i]);
		assert_error(&rs, 401, "unauthorized");
		resp_free(&rs);
		client_close(cl);
	}
	/* on the unix socket, a wrong token is not the operator either */
	{
		struct client *cl = dial_unix();
		struct resp rs;

		once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "Authorization: Bearer nope\r\n\r\n");
		assert_error(&rs, 401, "unauthorized");
		resp_free(&rs);
		client_close(cl);
	}
}

static void
test_srv_403_tenant_on_operator_route(void **state)
{
	struct client *cl = dial_tcp();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "Authorization: Bearer " ACME_KEY "\r\n\r\n");
	assert_error(&rs, 403, "operator-only");
	resp_free(&rs);
	once(cl, &rs,
	     "PUT /v1/pools HTTP/1.1\r\n" H "Authorization: bearer " BETA_KEY2 "\r\n"
	     "Content-Length: 2\r\n\r\n{}");
	assert_error(&rs, 403, "operator-only");
	assert_false(rs.eof_after);
	resp_free(&rs);
	/* the body of the refused request was skipped: the next one works */
	once(cl, &rs,
	     "GET /v1/sandboxes HTTP/1.1\r\n" H "Authorization: Bearer " BETA_KEY2 "\r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "tenant"), "beta");
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_404_405(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/nope HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 404, "not-found");
	resp_free(&rs);
	once(cl, &rs, "GET /v1/sandboxes/ HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 404, "not-found");
	resp_free(&rs);
	once(cl, &rs, "GET /v1/sandboxes/a.b HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 404, "not-found");
	resp_free(&rs);
	once(cl, &rs, "POST /v1/info HTTP/1.1\r\n" H "Content-Length: 0\r\n\r\n");
	assert_error(&rs, 405, "method-not-allowed");
	assert_has(rs.head, "Allow: GET\r\n");
	resp_free(&rs);
	once(cl, &rs, "POST /v1/sandboxes/abc HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 405, "method-not-allowed");
	assert_has(rs.head, "Allow: GET, DELETE\r\n");
	resp_free(&rs);
	once(cl, &rs, "DELETE /v1/pools HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 405, "method-not-allowed");
	assert_has(rs.head, "Allow: GET, PUT\r\n");
	assert_false(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_400_malformed(void **state)
{
	static const char *const bad[] = {
	    "GET /v1/info HTTP/1.1\r\n\r\n", /* no Host */
	    "GET /v1/info HTTP/1.1\r\n" H "Bad Header: x\r\n\r\n",
	    "GET http://x/v1/info HTTP/1.1\r\n" H "\r\n", /* not origin-form */
	    "OPTIONS * HTTP/1.1\r\n" H "\r\n",
	    "GET /v1/%zz HTTP/1.1\r\n" H "\r\n",
	    "GET /v1/a%00b HTTP/1.1\r\n" H "\r\n",
	    "GET /v1/sandboxes?q=1&q=2 HTTP/1.1\r\n" H "\r\n", /* duplicate */
	    "GET /v1/sandboxes?=1 HTTP/1.1\r\n" H "\r\n",
	    "GET /v1/sandboxes?q=%4 HTTP/1.1\r\n" H "\r\n",
	    "POST /v1/echo HTTP/1.1\r\n" H
	    "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "GET /v1/info HTTP/1.1\r\n" H
	    "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct client *cl = dial_unix();
		struct resp rs;

		once(cl, &rs, "%s", bad[i]);
		if (rs.status != 400)
			fail_msg("case %zu: %u", i, rs.status);
		assert_error(&rs, 400, "bad-request");
		resp_free(&rs);
		client_close(cl);
	}
	/* a head too large: 431, closed */
	{
		struct client *cl = dial_unix();
		struct resp rs;
		char *big = malloc(70000);

		assert_non_null(big);
		memset(big, 'a', 69999);
		big[69999] = '\0';
		sendf(cl, "GET /v1/info HTTP/1.1\r\n" H "X-Big: ");
		send_str(cl, big, strlen(big));
		read_resp(cl, &rs);
		assert_error(&rs, 431, "too-large");
		assert_true(rs.eof_after);
		resp_free(&rs);
		free(big);
		client_close(cl);
	}
}

static void
test_srv_413(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;
	char chunk[8192 + 16];

	(void)state;
	/* declared too large: refused before any byte of it is read */
	once(cl, &rs, "POST /v1/echo HTTP/1.1\r\n" H "Content-Length: %u\r\n\r\n",
	     API_MAX_BODY + 1);
	assert_error(&rs, 413, "too-large");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);

	/* chunked, growing past the limit */
	cl = dial_unix();
	sendf(cl, "POST /v1/echo HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n");
	memcpy(chunk, "2000\r\n", 6);
	memset(chunk + 6, ' ', 8192);
	memcpy(chunk + 6 + 8192, "\r\n", 2);
	for (unsigned sent = 0; sent <= API_MAX_BODY; sent += 8192)
		send_str(cl, chunk, 6 + 8192 + 2);
	read_resp(cl, &rs);
	assert_error(&rs, 413, "too-large");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_bad_json(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;

	(void)state;
	once(cl, &rs, "POST /v1/echo HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\n{\"a\":");
	assert_error(&rs, 400, "bad-json");
	resp_free(&rs);
	once(cl, &rs, "POST /v1/echo HTTP/1.1\r\n" H "Content-Length: 2\r\n\r\n[]");
	assert_error(&rs, 400, "bad-json");
	resp_free(&rs);
	once(cl, &rs, "POST /v1/echo HTTP/1.1\r\n" H "Content-Length: 13\r\n\r\n{\"a\":1,\"a\":2}");
	assert_error(&rs, 400, "bad-json");
	resp_free(&rs);
	once(cl, &rs, "POST /v1/echo HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 400, "bad-json");
	resp_free(&rs);
	once(cl, &rs,
	     "POST /v1/echo HTTP/1.1\r\n" H "Content-Type: text/plain\r\n"
	     "Content-Length: 2\r\n\r\n{}");
	assert_error(&rs, 415, "unsupported-media-type");
	assert_false(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_500_no_answer(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/silent HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 500, "internal");
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_error_details(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;
	json_t *v, *e;

	(void)state;
	once(cl, &rs, "POST /v1/details HTTP/1.1\r\n" H "\r\n");
	assert_error(&rs, 400, "bad-request");
	v = json_loads(rs.body, 0, NULL);
	e = json_object_get(v, "error");
	assert_string_equal(json_string_value(json_object_get(e, "message")), "2 errors");
	assert_int_equal(json_array_size(json_object_get(e, "details")), 2);
	json_decref(v);
	resp_free(&rs);
	client_close(cl);
}

/* ---- the server: good requests -------------------------------------- */

static void
test_srv_operator_unix_no_token(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;
	struct stat st;

	(void)state;
	assert_int_equal(stat(F.sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "\r\n");
	assert_int_equal(rs.status, 200);
	assert_has(rs.head, "Content-Type: application/json\r\n");
	assert_string_equal(rs.body + rs.blen - 1, "\n");
	assert_string_equal(json_get_str(&rs, "role"), "operator");
	assert_string_equal(json_get_str(&rs, "tenant"), "(null)");
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_tokens_tcp(void **state)
{
	struct client *cl = dial_tcp();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "Authorization: Bearer " OP_TOKEN "\r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "role"), "operator");
	resp_free(&rs);
	once(cl, &rs,
	     "GET /v1/sandboxes/sbx-1?q=a%%20b&x HTTP/1.1\r\n" H
	     "Authorization:   Bearer   " ACME_KEY "  \r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "role"), "tenant");
	assert_string_equal(json_get_str(&rs, "tenant"), "acme");
	assert_string_equal(json_get_str(&rs, "id"), "sbx-1");
	assert_string_equal(json_get_str(&rs, "q"), "a b");
	resp_free(&rs);
	once(cl, &rs,
	     "GET /v1/sandboxes HTTP/1.1\r\n" H "Authorization: Bearer " BETA_KEY1 "\r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "tenant"), "beta");
	assert_string_equal(json_get_str(&rs, "id"), "(null)");
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_keep_alive(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;

	(void)state;
	/* two requests, one after the other */
	once(cl, &rs, "GET /v1/sandboxes/one HTTP/1.1\r\n" H "\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "id"), "one");
	assert_false(rs.eof_after);
	resp_free(&rs);
	once(cl, &rs, "GET /v1/sandboxes/two HTTP/1.1\r\n" H "\r\n");
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "id"), "two");
	resp_free(&rs);

	/* pipelined in one write: a body, then the next request right after */
	sendf(cl, "POST /v1/echo HTTP/1.1\r\n" H "Content-Length: 7\r\n\r\n{\"a\":1}"
	          "PUT /v1/sandboxes/p/files HTTP/1.1\r\n" H "Content-Length: 3\r\n\r\nabc"
	          "POST /v1/lazy HTTP/1.1\r\n" H "Content-Length: 4\r\n\r\nzzzz"
	          "GET /v1/sandboxes/three HTTP/1.1\r\n" H "Connection: close\r\n\r\n");
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 201);
	assert_string_equal(rs.body, "{\"got\":{\"a\":1}}\n");
	resp_free(&rs);
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 201);
	assert_has(rs.body, "\"bytes\":3,");
	resp_free(&rs);
	read_resp(cl, &rs); /* the lazy handler's body was skipped */
	assert_int_equal(rs.status, 200);
	assert_string_equal(rs.body, "lazy\n");
	assert_has(rs.head, "Content-Type: text/plain\r\n");
	resp_free(&rs);
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 200);
	assert_string_equal(json_get_str(&rs, "id"), "three");
	assert_has(rs.head, "Connection: close\r\n");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_http10_closes(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;

	(void)state;
	once(cl, &rs, "GET /v1/sandboxes HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_has(rs.head, "Connection: close\r\n");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_chunked_raw_body(void **state)
{
	struct client *cl = dial_unix();
	struct resp rs;
	char big[5000];
	uint64_t sum = 0;
	char want[128];

	(void)state;
	/* sent in pieces, a chunk split across writes, with an extension
	 * and a trailer */
	sendf(cl, "PUT /v1/sandboxes/f1/files?path=/a HTTP/1.1\r\n" H
	          "Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhel");
	usleep(20000);
	sendf(cl, "lo\r\n");
	memset(big, 'b', sizeof(big));
	sendf(cl, "%zx\r\n", sizeof(big));
	send_str(cl, big, sizeof(big));
	sendf(cl, "\r\n0\r\nX-T: 1\r\n\r\n");
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 201);
	for (const char *p = "hello"; *p; p++)
		sum += (unsigned char)*p;
	sum += (uint64_t)'b' * sizeof(big);
	snprintf(want, sizeof(want), "\"bytes\":%zu,\"sum\":%" PRIu64 ",\"declared\":-1",
	         5 + sizeof(big), sum);
	assert_has(rs.body, want);
	assert_false(rs.eof_after);
	resp_free(&rs);

	/* Expect: 100-continue is answered when the handler reads */
	sendf(cl, "PUT /v1/sandboxes/f2/files HTTP/1.1\r\n" H "Expect: 100-continue\r\n"
	          "Content-Length: 4\r\n\r\n");
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 100);
	resp_free(&rs);
	sendf(cl, "abcd");
	read_resp(cl, &rs);
	assert_int_equal(rs.status, 201);
	assert_has(rs.body, "\"bytes\":4,");
	assert_has(rs.body, "\"declared\":4");
	resp_free(&rs);

	/* a malformed chunk: the handler sees -EPROTO, the connection ends */
	once(cl, &rs,
	     "PUT /v1/sandboxes/f3/files HTTP/1.1\r\n" H
	     "Transfer-Encoding: chunked\r\n\r\nzz\r\n");
	assert_error(&rs, 400, "bad-request");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
}

static void
test_srv_stream(void **state)
{
	struct client *cl = dial_tcp();
	struct resp rs;

	(void)state;
	once(cl, &rs,
	     "GET /v1/stream HTTP/1.1\r\n" H "Authorization: Bearer " ACME_KEY "\r\n"
	     "Accept: text/plain, application/x-ndjson;q=0.5\r\n"
	     "Accept: application/json;q=0, text/html ; q=0.000\r\n\r\n");
	assert_int_equal(rs.status, 200);
	assert_has(rs.head, "Transfer-Encoding: chunked\r\n");
	assert_has(rs.head, "Content-Type: application/x-ndjson\r\n");
	assert_string_equal(rs.body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
	assert_false(rs.eof_after);
	resp_free(&rs);
	/* the connection goes on after a stream */
	once(cl, &rs,
	     "GET /v1/sandboxes HTTP/1.1\r\n" H "Authorization: Bearer " ACME_KEY "\r\n\r\n");
	assert_int_equal(rs.status, 200);
	resp_free(&rs);
	client_close(cl);
}

/* ---- the server: start and stop ------------------------------------- */

static void
test_srv_socket_in_use(void **state)
{
	char err[256] = "";
	struct gw_api *b;

	(void)state;
	b = gw_api_start(F.conf, routes, conf_now, F.conf, err, sizeof(err));
	assert_null(b);
	assert_has(err, "in use");
	/* the first server's socket is still there and answers */
	{
		struct client *cl = dial_unix();
		struct resp rs;

		once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "\r\n");
		assert_int_equal(rs.status, 200);
		resp_free(&rs);
		client_close(cl);
	}
}

static void
test_start_not_a_socket(void **state)
{
	char dir[64], path[96], err[256] = "";
	struct conf *c;
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sl-api-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	c = load_conf(path);
	assert_null(gw_api_start(c, routes, conf_now, c, err, sizeof(err)));
	assert_has(err, "not a socket");
	assert_int_equal(unlink(path), 0); /* left alone */

	/* a stale socket is replaced */
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		struct gw_api *a;

		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
		a = gw_api_start(c, routes, conf_now, c, err, sizeof(err));
		if (!a)
			fail_msg("%s", err);
		gw_api_stop(a);
		assert_int_equal(access(path, F_OK), -1);
	}
	conf_unref(c);
	rmdir(dir);
}

static void
test_stop_with_open_connections(void **state)
{
	char dir[64], path[96], err[256] = "";
	struct conf *c;
	struct gw_api *a;
	int fds[3];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sl-api-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	c = load_conf(path);
	a = gw_api_start(c, routes, conf_now, c, err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	for (int i = 0; i < 3; i++) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		timeouts(fds[i]);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	/* one idle, one mid-head, one mid-body */
	{
		static const char head[] = "GET /v1/info HTTP/1.1\r\n";
		static const char body[] = "PUT /v1/sandboxes/x/files HTTP/1.1\r\nHost: x\r\n"
		                           "Content-Length: 9\r\n\r\nab";

		assert_int_equal(send(fds[1], head, strlen(head), MSG_NOSIGNAL), strlen(head));
		assert_int_equal(send(fds[2], body, strlen(body), MSG_NOSIGNAL), strlen(body));
	}
	usleep(50000);
	gw_api_stop(a); /* returns: every thread was woken and joined */
	for (int i = 0; i < 3; i++) {
		char b[512];
		ssize_t k;

		/* EOF, or the 400 of the handler whose body was cut, then EOF */
		while ((k = recv(fds[i], b, sizeof(b), 0)) > 0)
			;
		assert_int_equal(k, 0);
		close(fds[i]);
	}
	assert_int_equal(access(path, F_OK), -1);
	conf_unref(c);
	rmdir(dir);
}

static void
test_srv_busy(void **state)
{
	struct rlimit rl;
	int *fds;
	struct client *cl;
	struct resp rs;

	(void)state;
	/* API_MAX_CONNS connections, and as many on the server's side */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * API_MAX_CONNS + 64) {
		/* root may raise the hard limit too */
		if (rl.rlim_max < 2 * API_MAX_CONNS + 64 && geteuid() != 0)
			sl_skip("srv_busy: needs %d descriptors, the hard limit is %llu (run as root)",
				2 * API_MAX_CONNS + 64, (unsigned long long)rl.rlim_max);
		if (rl.rlim_max < 2 * API_MAX_CONNS + 64)
			rl.rlim_max = 2 * API_MAX_CONNS + 64;
		rl.rlim_cur = 2 * API_MAX_CONNS + 64;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	fds = calloc(API_MAX_CONNS, sizeof(*fds));
	assert_non_null(fds);
	for (int i = 0; i < API_MAX_CONNS; i++) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		timeouts(fds[i]);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", F.sock);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	/* each is served (so counted) before the next one is tried */
	for (int i = 0; i < API_MAX_CONNS; i++) {
		char b[4096];
		ssize_t k;

		static const char req[] = "GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n";

		assert_int_equal(send(fds[i], req, strlen(req), MSG_NOSIGNAL), strlen(req));
		k = recv(fds[i], b, sizeof(b), 0);
		assert_true(k > 12);
		assert_memory_equal(b, "HTTP/1.1 200", 12);
	}
	cl = dial_unix();
	read_resp(cl, &rs);
	assert_error(&rs, 503, "busy");
	assert_true(rs.eof_after);
	resp_free(&rs);
	client_close(cl);
	for (int i = 0; i < API_MAX_CONNS; i++)
		close(fds[i]);
	free(fds);
	/* the slots come back */
	for (int tries = 0;; tries++) {
		cl = dial_unix();
		once(cl, &rs, "GET /v1/info HTTP/1.1\r\n" H "\r\n");
		client_close(cl);
		if (rs.status == 200 || tries == 100) {
			assert_int_equal(rs.status, 200);
			resp_free(&rs);
			break;
		}
		resp_free(&rs);
		usleep(10000);
	}
}

int
main(void)
{
	const struct CMUnitTest pure[] = {
	    cmocka_unit_test(test_token_different),
	    cmocka_unit_test(test_token_different_lengths),
	    cmocka_unit_test(test_token_empty),
	    cmocka_unit_test(test_token_equal),
	    cmocka_unit_test(test_route_bad_id_chars),
	    cmocka_unit_test(test_route_id_too_long),
	    cmocka_unit_test(test_route_empty_id),
	    cmocka_unit_test(test_route_extra_segments),
	    cmocka_unit_test(test_route_trailing_slash),
	    cmocka_unit_test(test_route_id_buffer_small),
	    cmocka_unit_test(test_route_good),
	    cmocka_unit_test(test_pct_bad_escapes),
	    cmocka_unit_test(test_pct_nul),
	    cmocka_unit_test(test_pct_truncated),
	    cmocka_unit_test(test_pct_small_out),
	    cmocka_unit_test(test_pct_good),
	    cmocka_unit_test(test_start_not_a_socket),
	    cmocka_unit_test(test_stop_with_open_connections),
	};
	const struct CMUnitTest server[] = {
	    cmocka_unit_test(test_srv_403_browser),
	    cmocka_unit_test(test_srv_browser_checks_pass),
	    cmocka_unit_test(test_srv_401_no_token_tcp),
	    cmocka_unit_test(test_srv_401_bad_token),
	    cmocka_unit_test(test_srv_403_tenant_on_operator_route),
	    cmocka_unit_test(test_srv_404_405),
	    cmocka_unit_test(test_srv_400_malformed),
	    cmocka_unit_test(test_srv_413),
	    cmocka_unit_test(test_srv_bad_json),
	    cmocka_unit_test(test_srv_500_no_answer),
	    cmocka_unit_test(test_srv_error_details),
	    cmocka_unit_test(test_srv_operator_unix_no_token),
	    cmocka_unit_test(test_srv_tokens_tcp),
	    cmocka_unit_test(test_srv_keep_alive),
	    cmocka_unit_test(test_srv_http10_closes),
	    cmocka_unit_test(test_srv_chunked_raw_body),
	    cmocka_unit_test(test_srv_stream),
	    cmocka_unit_test(test_srv_socket_in_use),
	    cmocka_unit_test(test_srv_busy),
	};
	int rc;

	rc = cmocka_run_group_tests_name("pure", pure, NULL, NULL);
	rc |= cmocka_run_group_tests_name("server", server, setup, teardown);
	return sl_main_exit(rc);
}

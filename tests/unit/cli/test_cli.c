/* test_cli.c: the sluice client's pure parts (cli/cli_util.h): the API
 * address, base64, ids and ID:PATH, percent-encoding, the response head,
 * the chunked decoder and YAML to JSON for `pools apply`. Bad inputs first
 * (one case per refusal, each message checked), then good ones; the head
 * and the chunked decoder are also fed split at every offset and byte by
 * byte. */
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

#include "cli_util.h"

/* ---- helpers -------------------------------------------------------- */

static char errbuf[1024];

static void
bad_url(const char *s, const char *msg)
{
	struct cli_url u;

	errbuf[0] = '\0';
	assert_int_equal(cli_url_parse(s, &u, errbuf, sizeof(errbuf)), -EINVAL);
	if (!strstr(errbuf, msg))
		fail_msg("url '%s': error \"%s\" lacks \"%s\"", s, errbuf, msg);
}

static int
b64(const char *s, unsigned char *out, size_t cap, size_t *n)
{
	return cli_b64_decode(s, strlen(s), out, cap, n);
}

/* Encodes for round trips (the client only decodes). */
static size_t
b64_encode(const unsigned char *in, size_t n, char *out)
{
	static const char a[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? a[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

/* Feeds the head in growing prefixes (the way bytes arrive), the parser
 * resuming, and returns the first result that is not AGAIN. `step` is the
 * prefix growth; len+1 means "all at once". */
static enum cli_rc
head_feed(const char *s, size_t len, size_t step, struct cli_resp *r)
{
	struct cli_head_parser p;
	enum cli_rc rc = CLI_AGAIN;

	cli_head_parser_init(&p, CLI_MAX_HEAD);
	for (size_t k = step > len ? len : step;; k += step) {
		if (k > len)
			k = len;
		errbuf[0] = '\0';
		rc = cli_head_parse(&p, s, k, r, errbuf, sizeof(errbuf));
		if (rc != CLI_AGAIN || k == len)
			return rc;
	}
}

static void
bad_head(const char *s, const char *msg)
{
	struct cli_resp r;
	size_t n = strlen(s);

	for (size_t step = 1; step <= n + 1; step++) {
		if (head_feed(s, n, step, &r) != CLI_ERROR)
			fail_msg("head \"%s\" (step %zu): not refused", s, step);
		if (strcmp(errbuf, msg) != 0)
			fail_msg("head \"%s\" (step %zu): \"%s\" != \"%s\"", s, step, errbuf, msg);
	}
}

#define BAD_HEAD(name, input, msg)                                                                \
	static void name(void **state)                                                            \
	{                                                                                         \
		(void)state;                                                                      \
		bad_head(input, msg);                                                             \
	}

/* Decodes all of s[0..n) fed in pieces of `step` bytes; returns the last
 * result, the payload in out (NUL-terminated) and the bytes consumed. */
static enum cli_rc
chunk_feed(const char *s, size_t n, size_t step, char *out, size_t *outlen, size_t *consumed,
	   const char **why)
{
	struct cli_chunked c;
	enum cli_rc rc = CLI_AGAIN;
	size_t off = 0, o = 0;

	cli_chunked_init(&c);
	while (off < n) {
		size_t end = off + step < n ? off + step : n;

		/* the caller hands the unconsumed rest of a piece back with
		 * the next bytes, as cli_conn_read_body() does */
		while (off < end) {
			const char *d;
			size_t used, dl;

			rc = cli_chunked_step(&c, s + off, end - off, &used, &d, &dl);
			assert_true(used <= end - off);
			memcpy(out + o, d ? d : "", dl);
			o += dl;
			off += used;
			if (rc != CLI_AGAIN)
				goto done;
			if (used == 0 && dl == 0)
				fail_msg("no progress at %zu", off);
		}
	}
done:
	out[o] = '\0';
	*outlen = o;
	*consumed = off;
	*why = c.err;
	return rc;
}

static void
bad_chunked(const char *s, size_t n, const char *msg)
{
	char *out = malloc(n + 1);

	for (size_t step = 1; step <= n; step++) {
		size_t ol, used;
		const char *why;

		if (chunk_feed(s, n, step, out, &ol, &used, &why) != CLI_ERROR)
			fail_msg("chunked \"%s\" (step %zu): not refused", s, step);
		if (strcmp(why, msg) != 0)
			fail_msg("chunked \"%s\" (step %zu): \"%s\" != \"%s\"", s, step, why, msg);
	}
	free(out);
}

#define BAD_CHUNKED(name, input, msg)                                                             \
	static void name(void **state)                                                            \
	{                                                                                         \
		(void)state;                                                                      \
		bad_chunked(input, sizeof(input) - 1, msg);                                       \
	}

static void
bad_yaml(const char *s, const char *msg)
{
	json_t *j;

	errbuf[0] = '\0';
	j = cli_yaml_to_json("f.yaml", s, strlen(s), NULL, errbuf, sizeof(errbuf));
	if (j) {
		char *d = json_dumps(j, JSON_ENCODE_ANY);

		fail_msg("yaml \"%s\" accepted as %s", s, d);
	}
	if (strncmp(errbuf, msg, strlen(msg)) != 0)
		fail_msg("yaml \"%s\": \"%s\" does not start with \"%s\"", s, errbuf, msg);
}

#define BAD_YAML(name, input, msg)                                                                \
	static void name(void **state)                                                            \
	{                                                                                         \
		(void)state;                                                                      \
		bad_yaml(input, msg);                                                             \
	}

/* Converts and compares with the JSON text `want` (keys sorted). */
static void
good_yaml(const char *s, const char *want)
{
	json_t *j, *w;
	json_error_t je;

	errbuf[0] = '\0';
	j = cli_yaml_to_json("f.yaml", s, strlen(s), NULL, errbuf, sizeof(errbuf));
	if (!j)
		fail_msg("yaml \"%s\" refused: %s", s, errbuf);
	w = json_loads(want, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!w)
		fail_msg("bad expected JSON %s: %s", want, je.text);
	if (!json_equal(j, w)) {
		char *d = json_dumps(j, JSON_ENCODE_ANY | JSON_SORT_KEYS);

		fail_msg("yaml \"%s\" -> %s, want %s", s, d, want);
	}
	/* integers stay integers, reals reals (json_equal already checks
	 * the type) */
	json_decref(j);
	json_decref(w);
}

/* ---- bad: the API address --------------------------------------------- */

static void
test_bad_urls(void **state)
{
	char longpath[200];

	(void)state;
	bad_url("", "is not an API address");
	bad_url("127.0.0.1:8080", "is not an API address");
	bad_url("ftp://h:1", "is not an API address");
	bad_url("https://127.0.0.1:8080", "https is not supported");
	bad_url("unix:", "needs a socket path");
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	{
		char u[256];

		snprintf(u, sizeof(u), "unix:/%s", longpath);
		bad_url(u, "socket path longer than 107 bytes");
	}
	bad_url("http://", "no host");
	bad_url("http://:80", "no host");
	bad_url("http://h:", "bad port");
	bad_url("http://h:0", "port out of range");
	bad_url("http://h:65536", "port out of range");
	bad_url("http://h:123456", "bad port");
	bad_url("http://h:8a", "bad port");
	bad_url("http://h:-1", "bad port");
	bad_url("http://u:p@h:1", "no user info");
	bad_url("http://h:1/v1", "no path, query or fragment");
	bad_url("http://h:1//", "no path, query or fragment");
	bad_url("http://h:1?x", "no path, query or fragment");
	bad_url("http://h:1#f", "no path, query or fragment");
	bad_url("http://[::1", "unterminated '['");
	bad_url("http://[::1]x", "junk after ']'");
	bad_url("http://[zz]:1", "bad IPv6 address");
	bad_url("http://[]:1", "no host");
	bad_url("http://h_x:1", "bad character in the host");
	bad_url("http://h x:1", "bad character in the host");
}

/* ---- bad: base64 ------------------------------------------------------ */

static void
test_bad_base64(void **state)
{
	static const char *const bad[] = {
		"A", "AA", "AAA", "AAAAA", "A===", "=AAA", "AA=A", "====", "AA==AA==",
		"AB==",         /* unused bits set */
		"AAB=",         /* unused bits set */
		"AA!A", "AA A", "AA-_", "AAA\n",
		NULL,
	};
	unsigned char out[64];
	size_t n;

	(void)state;
	for (size_t i = 0; bad[i]; i++) {
		if (b64(bad[i], out, sizeof(out), &n) != -EINVAL)
			fail_msg("base64 \"%s\" accepted", bad[i]);
		assert_int_equal(n, 0);
	}
	/* a NUL inside */
	assert_int_equal(cli_b64_decode("AA\0A", 4, out, sizeof(out), &n), -EINVAL);
	/* too little room */
	assert_int_equal(b64("Zm9vYmFy", out, 5, &n), -ENOSPC);
	assert_int_equal(b64("Zm8=", out, 1, &n), -ENOSPC);
	assert_int_equal(b64("Zm8=", out, 2, &n), 0);
	assert_int_equal(n, 2);
}

/* ---- bad: ids and ID:PATH ---------------------------------------------- */

static void
test_bad_ids(void **state)
{
	static const char *const notremote[] = {
		"file", "./a:/b", "a:b", "a:", ":/x", "sbx 1:/x", "sbx.1:/x", "sbx/1:/x",
		"/abs/path", "sbx-1:relative", "é:/x", "-", NULL,
	};
	size_t idlen;
	const char *path;

	(void)state;
	assert_false(cli_id_valid("", 0));
	assert_false(cli_id_valid("a b", 3));
	assert_false(cli_id_valid("a/b", 3));
	assert_false(cli_id_valid("..", 2));
	assert_false(cli_id_valid("a\0b", 3));
	for (size_t i = 0; notremote[i]; i++)
		if (cli_remote_parse(notremote[i], &idlen, &path))
			fail_msg("\"%s\" taken for ID:PATH", notremote[i]);
}

/* ---- bad: response heads ---------------------------------------------- */

#define OKL "HTTP/1.1 200 OK\r\n"

BAD_HEAD(test_bad_head_lf_status, "HTTP/1.1 200 OK\n\r\n", "bare LF in the response head")
BAD_HEAD(test_bad_head_lf_field, OKL "X: y\n\r\n", "bare LF in the response head")
BAD_HEAD(test_bad_head_lf_end, OKL "X: y\r\n\n", "bare LF in the response head")
BAD_HEAD(test_bad_head_lf_first, "\nHTTP/1.1 200 OK\r\n\r\n", "bare LF in the response head")
BAD_HEAD(test_bad_head_version2, "HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line")
BAD_HEAD(test_bad_head_version12, "HTTP/1.2 200 OK\r\n\r\n", "not an HTTP/1.x status line")
BAD_HEAD(test_bad_head_lowercase, "http/1.1 200 OK\r\n\r\n", "not an HTTP/1.x status line")
BAD_HEAD(test_bad_head_empty_line, "\r\nHTTP/1.1 200 OK\r\n\r\n", "not an HTTP/1.x status line")
BAD_HEAD(test_bad_head_status_short, "HTTP/1.1 20 OK\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_status_long, "HTTP/1.1 2000 OK\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_status_600, "HTTP/1.1 600 X\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_status_099, "HTTP/1.1 099 X\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_status_alpha, "HTTP/1.1 2x0 X\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_no_reason_sp, "HTTP/1.1 200\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_two_sp, "HTTP/1.1  200 OK\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_tab, "HTTP/1.1\t200 OK\r\n\r\n", "bad status line")
BAD_HEAD(test_bad_head_reason_ctl, "HTTP/1.1 200 O\x01K\r\n\r\n",
	 "control byte in the reason phrase")
BAD_HEAD(test_bad_head_reason_cr, "HTTP/1.1 200 OK\rX\r\n\r\n", "bare CR in the status line")
BAD_HEAD(test_bad_head_obs_fold, OKL "X: a\r\n b\r\n\r\n", "obs-fold in the head")
BAD_HEAD(test_bad_head_obs_fold_tab, OKL "X: a\r\n\tb\r\n\r\n", "obs-fold in the head")
BAD_HEAD(test_bad_head_ws_first, OKL " X: a\r\n\r\n", "obs-fold in the head")
BAD_HEAD(test_bad_head_ws_colon, OKL "X : a\r\n\r\n", "bad header field name")
BAD_HEAD(test_bad_head_empty_name, OKL ": a\r\n\r\n", "bad header field name")
BAD_HEAD(test_bad_head_no_colon, OKL "Xa\r\n\r\n", "bad header field name")
BAD_HEAD(test_bad_head_name_bad, OKL "X(y): a\r\n\r\n", "bad header field name")
BAD_HEAD(test_bad_head_name_8bit, OKL "X\xc3\xa9: a\r\n\r\n", "bad header field name")
BAD_HEAD(test_bad_head_value_ctl, OKL "X: a\x01b\r\n\r\n", "control byte in a header value")
BAD_HEAD(test_bad_head_value_del, OKL "X: a\x7f\r\n\r\n", "control byte in a header value")
BAD_HEAD(test_bad_head_value_cr, OKL "X: a\rb\r\n\r\n", "bare CR in the head")
BAD_HEAD(test_bad_head_end_cr, OKL "X: a\r\n\r\r\n\r\n", "bare CR in the head")
BAD_HEAD(test_bad_cl_repeated, OKL "Content-Length: 5\r\ncontent-length: 5\r\n\r\n",
	 "repeated Content-Length")
BAD_HEAD(test_bad_cl_empty, OKL "Content-Length: \r\n\r\n", "empty Content-Length")
BAD_HEAD(test_bad_cl_alpha, OKL "Content-Length: 5a\r\n\r\n", "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_plus, OKL "Content-Length: +5\r\n\r\n", "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_minus, OKL "Content-Length: -1\r\n\r\n", "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_hex, OKL "Content-Length: 0x5\r\n\r\n", "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_list, OKL "Content-Length: 5, 5\r\n\r\n", "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_inner_space, OKL "Content-Length: 1 2\r\n\r\n",
	 "non-numeric Content-Length")
BAD_HEAD(test_bad_cl_2_63, OKL "Content-Length: 9223372036854775808\r\n\r\n",
	 "Content-Length too large")
BAD_HEAD(test_bad_cl_huge, OKL "Content-Length: 99999999999999999999999\r\n\r\n",
	 "Content-Length too large")
BAD_HEAD(test_bad_te_gzip, OKL "Transfer-Encoding: gzip\r\n\r\n",
	 "Transfer-Encoding other than chunked")
BAD_HEAD(test_bad_te_list, OKL "Transfer-Encoding: gzip, chunked\r\n\r\n",
	 "Transfer-Encoding other than chunked")
BAD_HEAD(test_bad_te_twice_list, OKL "Transfer-Encoding: chunked, chunked\r\n\r\n",
	 "Transfer-Encoding other than chunked")
BAD_HEAD(test_bad_te_lookalike, OKL "Transfer-Encoding: chunkedx\r\n\r\n",
	 "Transfer-Encoding other than chunked")
BAD_HEAD(test_bad_te_empty, OKL "Transfer-Encoding: \r\n\r\n",
	 "Transfer-Encoding other than chunked")
BAD_HEAD(test_bad_te_repeated, OKL "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	 "repeated Transfer-Encoding")
BAD_HEAD(test_bad_cl_and_te, OKL "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	 "both Content-Length and Transfer-Encoding")
BAD_HEAD(test_bad_te_and_cl, OKL "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
	 "both Content-Length and Transfer-Encoding")
BAD_HEAD(test_bad_te_http10, "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	 "Transfer-Encoding in HTTP/1.0")

static void
test_bad_head_too_large(void **state)
{
	size_t n = CLI_MAX_HEAD + 100;
	char *s = malloc(n + 1);
	struct cli_head_parser p;
	struct cli_resp r;
	enum cli_rc rc;

	(void)state;
	memcpy(s, OKL, strlen(OKL));
	memset(s + strlen(OKL), 'a', n - strlen(OKL));
	/* a header line that never ends */
	memcpy(s + strlen(OKL), "X: ", 3);
	s[n] = '\0';
	cli_head_parser_init(&p, CLI_MAX_HEAD);
	rc = cli_head_parse(&p, s, n, &r, errbuf, sizeof(errbuf));
	assert_int_equal(rc, CLI_ERROR);
	assert_string_equal(errbuf, "response head over 65536 bytes");
	/* exactly at the limit it is still fine */
	{
		const char *tail = "\r\n\r\n";
		size_t m = CLI_MAX_HEAD;

		memcpy(s + m - 4, tail, 4);
		cli_head_parser_init(&p, CLI_MAX_HEAD);
		rc = cli_head_parse(&p, s, m, &r, errbuf, sizeof(errbuf));
		assert_int_equal(rc, CLI_DONE);
		assert_int_equal(r.head_len, CLI_MAX_HEAD);
		/* one byte more is not */
		memcpy(s + m - 4, "aaaa", 4);
		memcpy(s + m - 3, tail, 4);
		cli_head_parser_init(&p, CLI_MAX_HEAD);
		rc = cli_head_parse(&p, s, m + 1, &r, errbuf, sizeof(errbuf));
		assert_int_equal(rc, CLI_ERROR);
	}
	free(s);
}

/* ---- bad: chunked bodies ---------------------------------------------- */

BAD_CHUNKED(test_bad_chunk_no_digits, "\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_alpha, "x\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_lead_space, " 5\r\nhello\r\n0\r\n\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_trail_space, "5 \r\nhello\r\n0\r\n\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_sign, "+5\r\nhello\r\n0\r\n\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_0x, "0x5\r\nhello\r\n0\r\n\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_ext_empty_size, ";a\r\n", "bad chunk size")
BAD_CHUNKED(test_bad_chunk_lf, "5\nhello\r\n", "bare LF in a chunk size line")
BAD_CHUNKED(test_bad_chunk_ext_lf, "5;a\nhello\r\n", "bare LF in a chunk size line")
BAD_CHUNKED(test_bad_chunk_cr, "5\rxhello\r\n", "bare CR in a chunk size line")
BAD_CHUNKED(test_bad_chunk_ext_ctl, "5;a\x01\r\nhello\r\n", "control byte in a chunk extension")
BAD_CHUNKED(test_bad_chunk_too_large, "8000000000000000\r\n", "chunk size too large")
BAD_CHUNKED(test_bad_chunk_too_large2, "fffffffffffffffff\r\n", "chunk size too large")
BAD_CHUNKED(test_bad_chunk_longer, "5\r\nhelloX\r\n0\r\n\r\n", "chunk data longer than its size")
BAD_CHUNKED(test_bad_chunk_no_crlf, "5\r\nhello5\r\nhello\r\n", "chunk data longer than its size")
BAD_CHUNKED(test_bad_chunk_data_cr, "5\r\nhello\r\r\n", "bare CR after chunk data")
BAD_CHUNKED(test_bad_chunk_data_lf, "5\r\nhello\n0\r\n\r\n", "chunk data longer than its size")
BAD_CHUNKED(test_bad_trailer_no_colon, "0\r\nX\r\n\r\n", "bad trailer field")
BAD_CHUNKED(test_bad_trailer_empty_name, "0\r\n: y\r\n\r\n", "bad trailer field name")
BAD_CHUNKED(test_bad_trailer_bad_name, "0\r\nX y: z\r\n\r\n", "bad trailer field name")
BAD_CHUNKED(test_bad_trailer_fold, "0\r\nX: y\r\n z\r\n\r\n", "obs-fold in trailers")
BAD_CHUNKED(test_bad_trailer_ctl, "0\r\nX: \x01\r\n\r\n", "control byte in a trailer")
BAD_CHUNKED(test_bad_trailer_lf, "0\r\nX: y\n\r\n", "bare LF in trailers")
BAD_CHUNKED(test_bad_trailer_cr, "0\r\nX: y\rz\r\n", "bare CR in trailers")
BAD_CHUNKED(test_bad_final_lf, "0\r\n\n", "bare LF in trailers")
BAD_CHUNKED(test_bad_final_cr, "0\r\n\rx", "bare CR after the last chunk")

static void
test_bad_chunk_line_too_long(void **state)
{
	size_t n = CLI_MAX_CHUNK_LINE + 10;
	char *s = malloc(n);

	(void)state;
	memset(s, 'a', n);
	s[0] = '5';
	s[1] = ';';
	bad_chunked(s, n, "chunk size line too long");
	free(s);
}

static void
test_bad_trailers_too_large(void **state)
{
	size_t n = CLI_MAX_TRAILERS + 100;
	char *s = malloc(n);

	(void)state;
	memset(s, 'a', n);
	memcpy(s, "0\r\nX: ", 6);
	{
		struct cli_chunked c;
		const char *d;
		size_t used, dl;

		cli_chunked_init(&c);
		assert_int_equal(cli_chunked_step(&c, s, n, &used, &d, &dl), CLI_ERROR);
		assert_string_equal(c.err, "trailers too large");
		/* an error sticks */
		assert_int_equal(cli_chunked_step(&c, "0\r\n\r\n", 5, &used, &d, &dl), CLI_ERROR);
		assert_int_equal(used, 0);
	}
	free(s);
}

/* ---- bad: YAML ------------------------------------------------------- */

BAD_YAML(test_bad_yaml_empty, "", "f.yaml: no YAML document in the file")
BAD_YAML(test_bad_yaml_comment_only, "# nothing\n", "f.yaml: no YAML document in the file")
BAD_YAML(test_bad_yaml_alias, "a: &x 1\nb: *x\n", "f.yaml:1:4: YAML anchors (&name)")
BAD_YAML(test_bad_yaml_alias_only, "a: [1]\nb: *x\n", "f.yaml:2:")
BAD_YAML(test_bad_yaml_anchor_map, "a: &x {b: 1}\n", "f.yaml:1:4: YAML anchors (&name)")
BAD_YAML(test_bad_yaml_anchor_seq, "a: &x [1]\n", "f.yaml:1:4: YAML anchors (&name)")
BAD_YAML(test_bad_yaml_anchor_key, "&k a: 1\n", "f.yaml:1:1: YAML anchors and tags")
BAD_YAML(test_bad_yaml_tag, "a: !!str 1\n", "f.yaml:1:4: YAML tags (!tag)")
BAD_YAML(test_bad_yaml_tag_map, "a: !foo {b: 1}\n", "f.yaml:1:4: YAML tags (!tag)")
BAD_YAML(test_bad_yaml_dup_key, "a: 1\nb: 2\na: 3\n", "f.yaml:3:1: duplicate key 'a'")
BAD_YAML(test_bad_yaml_dup_key_nested, "p:\n  - x: 1\n    x: 2\n",
	 "f.yaml:3:5: duplicate key 'x'")
BAD_YAML(test_bad_yaml_dup_quoted, "a: 1\n'a': 2\n", "f.yaml:2:1: duplicate key 'a'")
BAD_YAML(test_bad_yaml_two_docs, "a: 1\n---\nb: 2\n", "f.yaml:2:1: a second YAML document")
BAD_YAML(test_bad_yaml_two_docs_end, "a: 1\n...\n---\nb: 2\n",
	 "f.yaml:3:1: a second YAML document")
BAD_YAML(test_bad_yaml_seq_key, "? [a]\n: 1\n", "f.yaml:1:3: mapping keys must be scalars")
BAD_YAML(test_bad_yaml_map_key, "? {a: 1}\n: 1\n", "f.yaml:1:3: mapping keys must be scalars")
BAD_YAML(test_bad_yaml_syntax, "a: [1, 2\n", "f.yaml:2:1: YAML syntax error:")
BAD_YAML(test_bad_yaml_tab, "a:\n\tb: 1\n", "f.yaml:2:1: YAML syntax error:")
BAD_YAML(test_bad_yaml_int_range, "a: 9223372036854775808\n",
	 "f.yaml:1:4: integer 9223372036854775808 does not fit in 64 bits")
BAD_YAML(test_bad_yaml_int_range_neg, "a: -9223372036854775809\n",
	 "f.yaml:1:4: integer -9223372036854775809 does not fit in 64 bits")
BAD_YAML(test_bad_yaml_real_range, "a: 1e999\n", "f.yaml:1:4: number 1e999 is out of range")
BAD_YAML(test_bad_yaml_nul_key, "\"a\\0b\": 1\n", "f.yaml:1:1: a NUL byte in a mapping key")
BAD_YAML(test_bad_yaml_bad_utf8, "a: \xff\n", "f.yaml:")

/* 33 nested collections are refused, 32 are fine. */
static void
test_bad_yaml_depth(void **state)
{
	char s[200];
	size_t o = 0;

	(void)state;
	for (int i = 0; i < 33; i++)
		s[o++] = '[';
	for (int i = 0; i < 33; i++)
		s[o++] = ']';
	s[o] = '\0';
	bad_yaml(s, "f.yaml:1:33: nesting deeper than 32 levels");
	o = 0;
	for (int i = 0; i < 32; i++)
		s[o++] = '[';
	for (int i = 0; i < 32; i++)
		s[o++] = ']';
	s[o] = '\0';
	{
		json_t *j = cli_yaml_to_json("f.yaml", s, o, NULL, errbuf, sizeof(errbuf));

		if (!j)
			fail_msg("32 levels refused: %s", errbuf);
		json_decref(j);
	}
}

static void
test_bad_pools_body(void **state)
{
	static const struct {
		const char *yaml;
		const char *msg;
	} cases[] = {
		{ "5\n", "f.yaml: the top level must be a mapping with a 'pools:' key, or a list "
			 "of pools" },
		{ "~\n", "f.yaml: the top level must be a mapping" },
		{ "'x'\n", "f.yaml: the top level must be a mapping" },
		{ "listen: x\n", "f.yaml: no 'pools:' key" },
		{ "a: 1\npools: 5\n", "f.yaml:2:8: 'pools:' must be a list of pools" },
		{ "pools:\n  name: x\n", "f.yaml:2:3: 'pools:' must be a list of pools" },
		{ "pools:\n", "f.yaml:1:7: 'pools:' must be a list of pools" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cli_yposv pos = { 0 };
		char warn[256];
		json_t *doc = cli_yaml_to_json("f.yaml", cases[i].yaml, strlen(cases[i].yaml),
					       &pos, errbuf, sizeof(errbuf));
		json_t *body;

		if (!doc)
			fail_msg("\"%s\": %s", cases[i].yaml, errbuf);
		errbuf[0] = '\0';
		body = cli_pools_body("f.yaml", doc, &pos, warn, sizeof(warn), errbuf,
				      sizeof(errbuf));
		assert_null(body);
		if (strncmp(errbuf, cases[i].msg, strlen(cases[i].msg)) != 0)
			fail_msg("\"%s\": \"%s\" does not start with \"%s\"", cases[i].yaml,
				 errbuf, cases[i].msg);
		json_decref(doc);
		cli_yposv_fini(&pos);
	}
}

/* ---- good: the API address -------------------------------------------- */

static void
test_good_urls(void **state)
{
	struct cli_url u;

	(void)state;
	assert_int_equal(cli_url_parse("unix:/run/sluice/api.sock", &u, errbuf, sizeof(errbuf)), 0);
	assert_int_equal(u.kind, CLI_URL_UNIX);
	assert_string_equal(u.path, "/run/sluice/api.sock");
	assert_string_equal(u.hosthdr, "localhost");
	assert_int_equal(cli_url_parse("unix:rel.sock", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.path, "rel.sock");

	assert_int_equal(cli_url_parse("http://127.0.0.1:8080", &u, errbuf, sizeof(errbuf)), 0);
	assert_int_equal(u.kind, CLI_URL_TCP);
	assert_string_equal(u.host, "127.0.0.1");
	assert_string_equal(u.port, "8080");
	assert_string_equal(u.hosthdr, "127.0.0.1:8080");

	assert_int_equal(cli_url_parse("HTTP://localhost/", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.host, "localhost");
	assert_string_equal(u.port, "80");
	assert_string_equal(u.hosthdr, "localhost");

	assert_int_equal(cli_url_parse("http://[::1]:9/", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.host, "::1");
	assert_string_equal(u.port, "9");
	assert_string_equal(u.hosthdr, "[::1]:9");

	assert_int_equal(cli_url_parse("http://[::ffff:127.0.0.1]", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.host, "::ffff:127.0.0.1");
	assert_string_equal(u.port, "80");

	assert_int_equal(cli_url_parse("http://h:65535", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.port, "65535");
	assert_int_equal(cli_url_parse("http://h:00080", &u, errbuf, sizeof(errbuf)), 0);
	assert_string_equal(u.port, "80");
}

/* ---- good: base64 ----------------------------------------------------- */

static void
test_good_base64(void **state)
{
	static const char *const vec[][2] = {
		{ "", "" },         { "Zg==", "f" },         { "Zm8=", "fo" },
		{ "Zm9v", "foo" },  { "Zm9vYg==", "foob" }, { "Zm9vYmE=", "fooba" },
		{ "Zm9vYmFy", "foobar" }, { "aGkK", "hi\n" }, { "b29wcwo=", "oops\n" },
	};
	unsigned char out[1024], all[256];
	char enc[512];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		assert_int_equal(b64(vec[i][0], out, sizeof(out), &n), 0);
		assert_int_equal(n, strlen(vec[i][1]));
		assert_memory_equal(out, vec[i][1], n);
	}
	/* every byte value, every length, exact room */
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)(255 - i);
	for (size_t len = 0; len <= 256; len++) {
		size_t el = b64_encode(all, len, enc);

		assert_int_equal(cli_b64_decode(enc, el, out, len, &n), 0);
		assert_int_equal(n, len);
		assert_memory_equal(out, all, len);
		assert_true(CLI_B64_DECODED_MAX(el) >= len);
	}
}

/* ---- good: ids, ID:PATH, percent-encoding ------------------------------ */

static void
test_good_ids(void **state)
{
	size_t idlen;
	const char *path;
	char *e;

	(void)state;
	assert_true(cli_id_valid("sbx-5f2a9c01d3e4b7a8", 20));
	assert_true(cli_id_valid("A_b-9", 5));
	assert_true(cli_remote_parse("sbx-1:/etc/hosts", &idlen, &path));
	assert_int_equal(idlen, 5);
	assert_string_equal(path, "/etc/hosts");
	assert_true(cli_remote_parse("x:/", &idlen, &path));
	assert_string_equal(path, "/");
	assert_true(cli_remote_parse("x://a:b", &idlen, &path));
	assert_string_equal(path, "//a:b");

	e = cli_pct_encode("/a b/ü&x=%/~._-");
	assert_string_equal(e, "/a%20b/%C3%BC%26x%3D%25/~._-");
	free(e);
	e = cli_pct_encode("");
	assert_string_equal(e, "");
	free(e);
	e = cli_pct_encode("?#+\n");
	assert_string_equal(e, "%3F%23%2B%0A");
	free(e);
}

/* ---- good: response heads --------------------------------------------- */

/* Parses s at every split step and checks that each gives the same head. */
static void
good_head(const char *s, struct cli_resp *out)
{
	size_t n = strlen(s);

	for (size_t step = 1; step <= n + 1; step++) {
		struct cli_resp r;

		if (head_feed(s, n, step, &r) != CLI_DONE)
			fail_msg("head \"%s\" (step %zu): %s", s, step, errbuf);
		if (step == 1)
			*out = r;
		assert_int_equal(r.status, out->status);
		assert_int_equal(r.framing, out->framing);
		assert_int_equal(r.length, out->length);
		assert_int_equal(r.head_len, out->head_len);
		assert_string_equal(r.content_type, out->content_type);
	}
}

static void
test_good_heads(void **state)
{
	struct cli_resp r;
	struct cli_head_parser p;
	const char *s;

	(void)state;
	good_head("HTTP/1.1 200 OK\r\nContent-Type: Application/JSON; charset=utf-8\r\n"
		  "Content-Length: 12\r\n\r\n{\"a\": true}\n",
		  &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.minor, 1);
	assert_string_equal(r.reason, "OK");
	assert_int_equal(r.framing, CLI_BODY_LENGTH);
	assert_int_equal(r.length, 12);
	assert_string_equal(r.content_type, "application/json");
	assert_int_equal(r.head_len, strlen(s = "HTTP/1.1 200 OK\r\nContent-Type: Application/JSON; "
					       "charset=utf-8\r\nContent-Length: 12\r\n\r\n"));

	good_head("HTTP/1.1 200 OK\r\ncontent-type:application/x-ndjson\r\n"
		  "transfer-encoding: Chunked\r\n\r\n",
		  &r);
	assert_int_equal(r.framing, CLI_BODY_CHUNKED);
	assert_string_equal(r.content_type, "application/x-ndjson");

	good_head("HTTP/1.0 503 Service Unavailable\r\nSluice-Reason: no-capacity \r\n"
		  "X-Empty:\r\nX-Tab:\tv\t\r\n\r\n",
		  &r);
	assert_int_equal(r.status, 503);
	assert_int_equal(r.minor, 0);
	assert_int_equal(r.framing, CLI_BODY_CLOSE);
	assert_string_equal(r.reason, "Service Unavailable");
	assert_string_equal(r.sluice_reason, "no-capacity");

	good_head("HTTP/1.1 204 \r\nContent-Length: 7\r\n\r\n", &r);
	assert_int_equal(r.framing, CLI_BODY_NONE);
	assert_string_equal(r.reason, "");
	good_head("HTTP/1.1 304 Not Modified\r\n\r\n", &r);
	assert_int_equal(r.framing, CLI_BODY_NONE);
	good_head("HTTP/1.1 100 Continue\r\n\r\n", &r);
	assert_int_equal(r.status, 100);
	assert_int_equal(r.framing, CLI_BODY_NONE);
	good_head("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", &r);
	assert_int_equal(r.framing, CLI_BODY_LENGTH);
	assert_int_equal(r.length, 0);
	good_head("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n", &r);
	assert_int_equal(r.length, INT64_MAX);
	good_head("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\n"
		  "X-8bit: caf\xc3\xa9\r\n!#$%&'*+-.^_`|~: tchars\r\n\r\n",
		  &r);
	assert_int_equal(r.status, 401);

	/* the parser resumes: a second call scans only the new bytes, and a
	 * body after the head is not the head's */
	s = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
	cli_head_parser_init(&p, CLI_MAX_HEAD);
	assert_int_equal(cli_head_parse(&p, s, 10, &r, errbuf, sizeof(errbuf)), CLI_AGAIN);
	assert_int_equal(p.scanned, 10);
	assert_int_equal(cli_head_parse(&p, s, strlen(s), &r, errbuf, sizeof(errbuf)), CLI_DONE);
	assert_int_equal(r.head_len, strlen(s) - 2);
	/* a long reason is cut, not refused */
	{
		char big[400];

		memset(big, 0, sizeof(big));
		strcpy(big, "HTTP/1.1 200 ");
		memset(big + 13, 'r', 300);
		strcat(big, "\r\nContent-Type: ");
		memset(big + strlen(big), 't', 50);
		strcat(big, "\r\n\r\n");
		cli_head_parser_init(&p, CLI_MAX_HEAD);
		assert_int_equal(cli_head_parse(&p, big, strlen(big), &r, errbuf, sizeof(errbuf)),
				 CLI_DONE);
		assert_int_equal(strlen(r.reason), sizeof(r.reason) - 1);
	}
}

/* ---- good: chunked bodies --------------------------------------------- */

static void
good_chunked(const char *s, size_t n, const char *want, size_t consumed)
{
	char *out = malloc(n + 1);

	for (size_t step = 1; step <= n; step++) {
		size_t ol, used;
		const char *why;
		enum cli_rc rc = chunk_feed(s, n, step, out, &ol, &used, &why);

		if (rc != CLI_DONE)
			fail_msg("chunked \"%s\" (step %zu): rc %d (%s)", s, step, rc,
				 why ? why : "-");
		assert_int_equal(ol, strlen(want));
		assert_memory_equal(out, want, ol);
		assert_int_equal(used, consumed);
	}
	free(out);
}

#define GOOD_CHUNKED(s, want) good_chunked(s, sizeof(s) - 1, want, sizeof(s) - 1)

static void
test_good_chunked(void **state)
{
	(void)state;
	GOOD_CHUNKED("0\r\n\r\n", "");
	GOOD_CHUNKED("5\r\nhello\r\n0\r\n\r\n", "hello");
	GOOD_CHUNKED("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world");
	GOOD_CHUNKED("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n",
		     "0123456789abcdefghij");
	GOOD_CHUNKED("000005\r\nhello\r\n000\r\n\r\n", "hello");
	GOOD_CHUNKED("5;name=value;x\r\nhello\r\n0;last\r\n\r\n", "hello");
	GOOD_CHUNKED("5\r\nhello\r\n0\r\nX-Trailer: v\r\nY:\r\n\r\n", "hello");
	/* data that looks like framing is data */
	GOOD_CHUNKED("7\r\n0\r\n\r\n\r\n\r\n0\r\n\r\n", "0\r\n\r\n\r\n");
	GOOD_CHUNKED("1\r\n\n\r\n1\r\n\r\r\n0\r\n\r\n", "\n\r");
	/* NDJSON the way the server streams it */
	GOOD_CHUNKED("1f\r\n{\"event\": \"started\", \"pid\": 12}\r\n"
		     "24\r\n{\"event\": \"stdout\", \"data\": \"aGkK\"}\n\r\n0\r\n\r\n",
		     "{\"event\": \"started\", \"pid\": 12}"
		     "{\"event\": \"stdout\", \"data\": \"aGkK\"}\n");
	/* bytes after the end are not consumed */
	{
		static const char s[] = "2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK";

		good_chunked(s, sizeof(s) - 1, "hi", sizeof(s) - 1 - strlen("HTTP/1.1 200 OK"));
	}
	/* a big chunk in one piece */
	{
		size_t n = 100000;
		char *s = malloc(n + 32), *want = malloc(n + 1);
		int h = sprintf(s, "%zx\r\n", n);
		struct cli_chunked c;
		const char *d;
		size_t used, dl, off = 0, got = 0;
		enum cli_rc rc;

		memset(s + h, 'z', n);
		memcpy(s + h + n, "\r\n0\r\n\r\n", 7);
		memset(want, 'z', n);
		want[n] = '\0';
		cli_chunked_init(&c);
		do {
			rc = cli_chunked_step(&c, s + off, (size_t)h + n + 7 - off, &used, &d, &dl);
			off += used;
			got += dl;
		} while (rc == CLI_AGAIN);
		assert_int_equal(rc, CLI_DONE);
		assert_int_equal(got, n);
		assert_int_equal(off, (size_t)h + n + 7);
		/* done sticks, consuming nothing */
		assert_int_equal(cli_chunked_step(&c, "x", 1, &used, &d, &dl), CLI_DONE);
		assert_int_equal(used, 0);
		free(s);
		free(want);
	}
	/* the largest size accepted */
	{
		struct cli_chunked c;
		const char *d;
		size_t used, dl;

		cli_chunked_init(&c);
		assert_int_equal(cli_chunked_step(&c, "7fffffffffffffff\r\nab", 20, &used, &d, &dl),
				 CLI_AGAIN);
		assert_int_equal(dl, 2);
		assert_int_equal(c.left, INT64_MAX - 2);
	}
}

/* ---- good: YAML ------------------------------------------------------ */

static void
test_good_yaml_scalars(void **state)
{
	(void)state;
	good_yaml("a: null\nb: ~\nc:\nd: Null\ne: NULL\nf: nULL\n",
		  "{\"a\": null, \"b\": null, \"c\": null, \"d\": null, \"e\": null, "
		  "\"f\": \"nULL\"}");
	good_yaml("[true, True, TRUE, false, False, FALSE, tRUE, yes, no, on, off, y, n]",
		  "[true, true, true, false, false, false, \"tRUE\", \"yes\", \"no\", \"on\", "
		  "\"off\", \"y\", \"n\"]");
	good_yaml("[0, 7, -7, +7, 0644, 9223372036854775807, -9223372036854775808]",
		  "[0, 7, -7, 7, 644, 9223372036854775807, -9223372036854775808]");
	good_yaml("[1.0, -1.5, .5, +.5, 1., 1e3, 1E-3, 2.5e+2]",
		  "[1.0, -1.5, 0.5, 0.5, 1.0, 1000.0, 0.001, 250.0]");
	good_yaml("[0x10, 0o7, 1_000, .inf, .nan, 1.2.3, 1e, e3, '-', +, -, ., 12:30]",
		  "[\"0x10\", \"0o7\", \"1_000\", \".inf\", \".nan\", \"1.2.3\", \"1e\", "
		  "\"e3\", \"-\", \"+\", \"-\", \".\", \"12:30\"]");
	good_yaml("['5', \"5\", 'true', \"null\", '', \"~\", \"1.5\"]",
		  "[\"5\", \"5\", \"true\", \"null\", \"\", \"~\", \"1.5\"]");
	good_yaml("a: |\n  line1\n  line2\nb: >\n  folded\n  text\n",
		  "{\"a\": \"line1\\nline2\\n\", \"b\": \"folded text\\n\"}");
	good_yaml("caf\xc3\xa9: \"\\u00e9\\t\"\n", "{\"caf\xc3\xa9\": \"\xc3\xa9\\t\"}");
	good_yaml("5: int key\ntrue: bool key\n~: null key\n",
		  "{\"5\": \"int key\", \"true\": \"bool key\", \"~\": \"null key\"}");
	good_yaml("hello\n", "\"hello\"");
	good_yaml("---\n[]\n...\n", "[]");
	good_yaml("%YAML 1.1\n---\n{}\n", "{}");
	good_yaml("a: \"x\\0y\"\n", "{\"a\": \"x\\u0000y\"}");
}

static void
test_good_yaml_types(void **state)
{
	json_t *j;

	(void)state;
	j = cli_yaml_to_json("f.yaml", "[1, 1.0, '1']", 13, NULL, errbuf, sizeof(errbuf));
	assert_non_null(j);
	assert_true(json_is_integer(json_array_get(j, 0)));
	assert_true(json_is_real(json_array_get(j, 1)));
	assert_true(json_is_string(json_array_get(j, 2)));
	json_decref(j);
}

static const char pools_yaml[] =
	"listen: 127.0.0.1:3128\n"
	"pools:\n"
	"  - name: default\n"
	"    backend: ns\n"
	"    warm: 2\n"
	"    warm_max: 1\n"
	"    limits: { memory_mb: 256, cpus: 1.0 }\n"
	"  - name: strict\n"
	"    policy: strict\n"
	"tenants: []\n";

static void
test_good_pools_body(void **state)
{
	struct cli_yposv pos = { 0 };
	char warn[256];
	json_t *doc, *body, *want;
	const struct cli_ypos *p;
	const char *d;

	(void)state;
	doc = cli_yaml_to_json("s.yaml", pools_yaml, strlen(pools_yaml), &pos, errbuf,
			       sizeof(errbuf));
	assert_non_null(doc);
	body = cli_pools_body("s.yaml", doc, &pos, warn, sizeof(warn), errbuf, sizeof(errbuf));
	assert_non_null(body);
	assert_string_equal(warn, "s.yaml: ignoring top-level keys other than pools: listen, "
				  "tenants");
	want = json_loads("{\"pools\": [{\"name\": \"default\", \"backend\": \"ns\", \"warm\": 2,"
			  " \"warm_max\": 1, \"limits\": {\"memory_mb\": 256, \"cpus\": 1.0}},"
			  " {\"name\": \"strict\", \"policy\": \"strict\"}]}",
			  0, NULL);
	assert_true(json_equal(body, want));
	json_decref(want);
	/* error details point back into the file */
	d = "pools[0].warm_max: 1 is below warm (2)";
	p = cli_ypos_find(&pos, d, strlen("pools[0].warm_max"));
	assert_non_null(p);
	assert_string_equal(p->path, "pools[0].warm_max");
	assert_int_equal(p->line, 6);
	assert_int_equal(p->col, 15);
	p = cli_ypos_find(&pos, "pools[1].policy", 15);
	assert_int_equal(p->line, 9);
	assert_int_equal(p->col, 13);
	/* a path the file lacks falls back to its nearest parent */
	p = cli_ypos_find(&pos, "pools[1].ttl.max_seconds", 24);
	assert_string_equal(p->path, "pools[1]");
	assert_int_equal(p->line, 8);
	assert_int_equal(p->col, 5);
	p = cli_ypos_find(&pos, "pools[0].limits.cpus", 20);
	assert_int_equal(p->line, 7);
	assert_int_equal(p->col, 37);
	p = cli_ypos_find(&pos, "pools[7]", 8);
	assert_string_equal(p->path, "pools");
	assert_null(cli_ypos_find(&pos, "other", 5));
	assert_null(cli_ypos_find(NULL, "pools", 5));
	json_decref(body);
	json_decref(doc);
	cli_yposv_fini(&pos);

	/* a bare list of pools */
	doc = cli_yaml_to_json("l.yaml", "- name: a\n  warm: 1\n", 20, &pos, errbuf,
			       sizeof(errbuf));
	assert_non_null(doc);
	body = cli_pools_body("l.yaml", doc, &pos, warn, sizeof(warn), errbuf, sizeof(errbuf));
	assert_non_null(body);
	assert_string_equal(warn, "");
	assert_int_equal(json_array_size(json_object_get(body, "pools")), 1);
	p = cli_ypos_find(&pos, "pools[0].warm", 13);
	assert_non_null(p);
	assert_int_equal(p->line, 2);
	assert_int_equal(p->col, 9);
	json_decref(body);
	json_decref(doc);
	cli_yposv_fini(&pos);
	cli_yposv_fini(NULL);
}

/* The shipped configuration converts, and its pools come out. */
static void
test_good_sluice_yaml(void **state)
{
	const char *dir = getenv("SL_TESTDATA");
	char path[4096], warn[512], *buf;
	FILE *f;
	long n;
	json_t *doc, *body, *pool;

	(void)state;
	if (!dir)
		sl_skip("good_sluice_yaml: SL_TESTDATA is not set (ctest sets it)");
	snprintf(path, sizeof(path), "%s/../conf/sluice.yaml", dir);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	doc = cli_yaml_to_json("sluice.yaml", buf, (size_t)n, NULL, errbuf, sizeof(errbuf));
	if (!doc)
		fail_msg("%s", errbuf);
	body = cli_pools_body("sluice.yaml", doc, NULL, warn, sizeof(warn), errbuf, sizeof(errbuf));
	assert_non_null(body);
	assert_non_null(strstr(warn, "ignoring top-level keys other than pools: "));
	pool = json_array_get(json_object_get(body, "pools"), 0);
	assert_string_equal(json_string_value(json_object_get(pool, "name")), "default");
	assert_true(json_is_integer(json_object_get(pool, "warm")));
	assert_true(json_is_real(json_object_get(json_object_get(pool, "limits"), "cpus")));
	json_decref(body);
	json_decref(doc);
	free(buf);
}

/* sluice metrics PREFIX: which lines are the prefix's. Bad and edge
 * lines first. */
static void
test_metric_lines(void **state)
{
	static const struct {
		const char *line, *prefix;
		bool want;
	} cases[] = {
		{ "", "sluice_", false },
		{ "#", "sluice_", false },
		{ "# HELP", "sluice_", false },
		{ "# HELP ", "sluice_", false },
		{ "# EOF", "sluice_", false },
		{ "# a comment sluice_claims_total", "sluice_", false },
		{ "#HELP sluice_claims_total x", "sluice_", false },
		{ "sluice_claims_total 1", "", false },
		{ "sluice_clai", "sluice_claims", false },
		{ "other_total 1", "sluice_", false },
		{ " sluice_claims_total 1", "sluice_", false },
		{ "sluice_claims_total{pool=\"a\",tier=\"warm\"} 1", "sluice_claims", true },
		{ "sluice_claims_total 1", "sluice_claims_total", true },
		{ "# HELP sluice_claims_total Claims by pool and tier.", "sluice_claims", true },
		{ "# TYPE sluice_claims_total counter", "sluice_claims", true },
		{ "# TYPE sluice_boot_seconds histogram", "sluice_claims", false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool got = cli_metric_line_matches(cases[i].line, strlen(cases[i].line),
						   cases[i].prefix);

		if (got != cases[i].want)
			fail_msg("'%s' with prefix '%s': %d, wanted %d", cases[i].line,
				 cases[i].prefix, got, cases[i].want);
	}
	/* n bounds the line: bytes past it are not looked at */
	assert_false(cli_metric_line_matches("sluice_claims", 6, "sluice_claims"));
	assert_true(cli_metric_line_matches("sluice_claimsXYZ", 13, "sluice_claims"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* refused */
		cmocka_unit_test(test_metric_lines),
		cmocka_unit_test(test_bad_urls),
		cmocka_unit_test(test_bad_base64),
		cmocka_unit_test(test_bad_ids),
		cmocka_unit_test(test_bad_head_lf_status),
		cmocka_unit_test(test_bad_head_lf_field),
		cmocka_unit_test(test_bad_head_lf_end),
		cmocka_unit_test(test_bad_head_lf_first),
		cmocka_unit_test(test_bad_head_version2),
		cmocka_unit_test(test_bad_head_version12),
		cmocka_unit_test(test_bad_head_lowercase),
		cmocka_unit_test(test_bad_head_empty_line),
		cmocka_unit_test(test_bad_head_status_short),
		cmocka_unit_test(test_bad_head_status_long),
		cmocka_unit_test(test_bad_head_status_600),
		cmocka_unit_test(test_bad_head_status_099),
		cmocka_unit_test(test_bad_head_status_alpha),
		cmocka_unit_test(test_bad_head_no_reason_sp),
		cmocka_unit_test(test_bad_head_two_sp),
		cmocka_unit_test(test_bad_head_tab),
		cmocka_unit_test(test_bad_head_reason_ctl),
		cmocka_unit_test(test_bad_head_reason_cr),
		cmocka_unit_test(test_bad_head_obs_fold),
		cmocka_unit_test(test_bad_head_obs_fold_tab),
		cmocka_unit_test(test_bad_head_ws_first),
		cmocka_unit_test(test_bad_head_ws_colon),
		cmocka_unit_test(test_bad_head_empty_name),
		cmocka_unit_test(test_bad_head_no_colon),
		cmocka_unit_test(test_bad_head_name_bad),
		cmocka_unit_test(test_bad_head_name_8bit),
		cmocka_unit_test(test_bad_head_value_ctl),
		cmocka_unit_test(test_bad_head_value_del),
		cmocka_unit_test(test_bad_head_value_cr),
		cmocka_unit_test(test_bad_head_end_cr),
		cmocka_unit_test(test_bad_cl_repeated),
		cmocka_unit_test(test_bad_cl_empty),
		cmocka_unit_test(test_bad_cl_alpha),
		cmocka_unit_test(test_bad_cl_plus),
		cmocka_unit_test(test_bad_cl_minus),
		cmocka_unit_test(test_bad_cl_hex),
		cmocka_unit_test(test_bad_cl_list),
		cmocka_unit_test(test_bad_cl_inner_space),
		cmocka_unit_test(test_bad_cl_2_63),
		cmocka_unit_test(test_bad_cl_huge),
		cmocka_unit_test(test_bad_te_gzip),
		cmocka_unit_test(test_bad_te_list),
		cmocka_unit_test(test_bad_te_twice_list),
		cmocka_unit_test(test_bad_te_lookalike),
		cmocka_unit_test(test_bad_te_empty),
		cmocka_unit_test(test_bad_te_repeated),
		cmocka_unit_test(test_bad_cl_and_te),
		cmocka_unit_test(test_bad_te_and_cl),
		cmocka_unit_test(test_bad_te_http10),
		cmocka_unit_test(test_bad_head_too_large),
		cmocka_unit_test(test_bad_chunk_no_digits),
		cmocka_unit_test(test_bad_chunk_alpha),
		cmocka_unit_test(test_bad_chunk_lead_space),
		cmocka_unit_test(test_bad_chunk_trail_space),
		cmocka_unit_test(test_bad_chunk_sign),
		cmocka_unit_test(test_bad_chunk_0x),
		cmocka_unit_test(test_bad_chunk_ext_empty_size),
		cmocka_unit_test(test_bad_chunk_lf),
		cmocka_unit_test(test_bad_chunk_ext_lf),
		cmocka_unit_test(test_bad_chunk_cr),
		cmocka_unit_test(test_bad_chunk_ext_ctl),
		cmocka_unit_test(test_bad_chunk_too_large),
		cmocka_unit_test(test_bad_chunk_too_large2),
		cmocka_unit_test(test_bad_chunk_longer),
		cmocka_unit_test(test_bad_chunk_no_crlf),
		cmocka_unit_test(test_bad_chunk_data_cr),
		cmocka_unit_test(test_bad_chunk_data_lf),
		cmocka_unit_test(test_bad_trailer_no_colon),
		cmocka_unit_test(test_bad_trailer_empty_name),
		cmocka_unit_test(test_bad_trailer_bad_name),
		cmocka_unit_test(test_bad_trailer_fold),
		cmocka_unit_test(test_bad_trailer_ctl),
		cmocka_unit_test(test_bad_trailer_lf),
		cmocka_unit_test(test_bad_trailer_cr),
		cmocka_unit_test(test_bad_final_lf),
		cmocka_unit_test(test_bad_final_cr),
		cmocka_unit_test(test_bad_chunk_line_too_long),
		cmocka_unit_test(test_bad_trailers_too_large),
		cmocka_unit_test(test_bad_yaml_empty),
		cmocka_unit_test(test_bad_yaml_comment_only),
		cmocka_unit_test(test_bad_yaml_alias),
		cmocka_unit_test(test_bad_yaml_alias_only),
		cmocka_unit_test(test_bad_yaml_anchor_map),
		cmocka_unit_test(test_bad_yaml_anchor_seq),
		cmocka_unit_test(test_bad_yaml_anchor_key),
		cmocka_unit_test(test_bad_yaml_tag),
		cmocka_unit_test(test_bad_yaml_tag_map),
		cmocka_unit_test(test_bad_yaml_dup_key),
		cmocka_unit_test(test_bad_yaml_dup_key_nested),
		cmocka_unit_test(test_bad_yaml_dup_quoted),
		cmocka_unit_test(test_bad_yaml_two_docs),
		cmocka_unit_test(test_bad_yaml_two_docs_end),
		cmocka_unit_test(test_bad_yaml_seq_key),
		cmocka_unit_test(test_bad_yaml_map_key),
		cmocka_unit_test(test_bad_yaml_syntax),
		cmocka_unit_test(test_bad_yaml_tab),
		cmocka_unit_test(test_bad_yaml_int_range),
		cmocka_unit_test(test_bad_yaml_int_range_neg),
		cmocka_unit_test(test_bad_yaml_real_range),
		cmocka_unit_test(test_bad_yaml_nul_key),
		cmocka_unit_test(test_bad_yaml_bad_utf8),
		cmocka_unit_test(test_bad_yaml_depth),
		cmocka_unit_test(test_bad_pools_body),
		/* accepted */
		cmocka_unit_test(test_good_urls),
		cmocka_unit_test(test_good_base64),
		cmocka_unit_test(test_good_ids),
		cmocka_unit_test(test_good_heads),
		cmocka_unit_test(test_good_chunked),
		cmocka_unit_test(test_good_yaml_scalars),
		cmocka_unit_test(test_good_yaml_types),
		cmocka_unit_test(test_good_pools_body),
		cmocka_unit_test(test_good_sluice_yaml),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* fuzz_cli.c: libFuzzer target for the sluice client's pure parsers
 * (cli/cli_util.h).
 *
 * Input: one selector byte, then the text. The selector's low nibble picks
 * the piece size (1..16 bytes) the incremental parsers are fed in; bits
 * 4..6 pick what the text is taken as (so a seed is readable after its
 * first byte):
 *   '0'..'?' (0x30-0x3f, mode 3), 'p'..'z' (0x70-0x7f, mode 7):
 *        YAML, as `sluice pools apply` reads a file;
 *   'P'..'_' (0x50-0x5f, mode 5): a bare chunked body;
 *   anything else: an HTTP response: the head, then its body by its
 *        framing (an NDJSON body's lines as the exec stream's events).
 * Whatever the mode, every line of the text is also tried as an API
 * address (cli_url_parse), as base64, as an ID:PATH argument, through
 * the percent-encoder and as a line of /metrics (cli_metric_line_matches).
 *
 * Besides memory errors and leaks it checks the contracts:
 *  - the head parser gives the same answer fed in pieces as fed whole, and
 *    a parsed head is within the input with sane fields;
 *  - the chunked decoder gives the same payload, the same end and the same
 *    error fed in pieces, byte by byte and whole; every data span lies
 *    inside the bytes it consumed, and it always makes progress;
 *  - base64 that decodes encodes back to the same text (the decoder is
 *    strict, so an encoding is unique); a too small buffer gives -ENOSPC;
 *  - a parsed address printed back as "http://HOSTHDR" or "unix:PATH"
 *    parses to the same address;
 *  - YAML: one position per JSON value, each found again by its path; the
 *    JSON, written back as (flow) YAML, converts to the same JSON.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "fuzz.h"

#include "cli_util.h"

/* ---- a growing byte buffer ------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

static void
buf_add(struct buf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = (b->len + n) * 2 + 16;

		b->p = realloc(b->p, cap);
		CHECK(b->p != NULL);
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* ---- the chunked decoder ---------------------------------------------- */

struct ch_out {
	enum cli_rc rc;
	size_t consumed;        /* bytes of the input the body took */
	const char *err;
	struct buf payload;
};

/* Decodes in[0..len) given `step` more bytes at a time (as a socket would),
 * checking every call's spans. */
static void
chunked_feed(const char *in, size_t len, size_t step, struct ch_out *o)
{
	struct cli_chunked c;
	size_t avail = 0;

	memset(o, 0, sizeof(*o));
	o->rc = CLI_AGAIN;
	cli_chunked_init(&c);
	while (o->rc == CLI_AGAIN) {
		const char *d = (const char *)1;
		size_t used = (size_t)-1, dl = (size_t)-1, given;

		if (o->consumed == avail) {
			if (avail == len)
				break;
			avail = len - avail > step ? avail + step : len;
		}
		given = avail - o->consumed;
		o->rc = cli_chunked_step(&c, in + o->consumed, given, &used, &d, &dl);
		CHECK(used <= given);
		CHECK(dl <= used);
		CHECK(dl == 0 || (d >= in + o->consumed && d + dl <= in + o->consumed + used));
		CHECK(dl != 0 || d == NULL);
		CHECK(o->rc != CLI_AGAIN || used > 0);
		if (o->rc == CLI_ERROR)
			CHECK(c.state == CLI_CH_ERROR && c.err != NULL && dl == 0);
		if (o->rc == CLI_DONE)
			CHECK(c.state == CLI_CH_DONE && dl == 0);
		buf_add(&o->payload, d ? d : "", dl);
		o->consumed += used;
	}
	o->err = c.err;
	/* a finished decoder stays finished */
	if (o->rc != CLI_AGAIN) {
		const char *d;
		size_t used, dl;
		enum cli_rc again = cli_chunked_step(&c, in + o->consumed, len - o->consumed,
						     &used, &d, &dl);

		CHECK(again == o->rc && used == 0 && dl == 0);
	}
}

static void
chunked_all(const char *in, size_t len, size_t step, struct buf *payload)
{
	struct ch_out a, b, w;

	chunked_feed(in, len, step, &a);
	chunked_feed(in, len, 1, &b);
	chunked_feed(in, len, len ? len : 1, &w);
	CHECK(a.rc == b.rc && a.rc == w.rc);
	CHECK(a.consumed == b.consumed && a.consumed == w.consumed);
	CHECK(a.err == b.err && a.err == w.err);
	CHECK(a.payload.len == b.payload.len && a.payload.len == w.payload.len);
	CHECK(a.payload.len == 0 || (memcmp(a.payload.p, b.payload.p, a.payload.len) == 0 &&
				     memcmp(a.payload.p, w.payload.p, a.payload.len) == 0));
	CHECK(a.payload.len <= a.consumed);
	free(b.payload.p);
	free(w.payload.p);
	if (payload)
		*payload = a.payload;
	else
		free(a.payload.p);
}

/* ---- base64 ----------------------------------------------------------- */

static size_t
b64_encode(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	return o;
}

/* Decodes s[0..n) the way the exec stream does, and checks it. */
static void
b64_check(const char *s, size_t n)
{
	size_t cap = CLI_B64_DECODED_MAX(n), outlen = (size_t)-1;
	unsigned char *out = malloc(cap + 1);
	int rc;

	CHECK(out != NULL);
	rc = cli_b64_decode(s, n, out, cap, &outlen);
	CHECK(rc == 0 || rc == -EINVAL);
	if (rc == 0) {
		char *enc = malloc(n + 4);

		CHECK(outlen <= cap && outlen + 2 >= cap);
		CHECK(enc != NULL);
		CHECK(b64_encode(out, outlen, enc) == n && memcmp(enc, s, n) == 0);
		free(enc);
		if (outlen > 0) {
			size_t l2;

			CHECK(cli_b64_decode(s, n, out, outlen - 1, &l2) == -ENOSPC);
		}
	} else {
		CHECK(outlen == 0);
	}
	free(out);
}

/* ---- one line: address, base64, ID:PATH, percent-encoding ---------------- */

static void
url_check(const char *s)
{
	struct cli_url u, u2;
	char err[512] = "", again[400];
	int rc = cli_url_parse(s, &u, err, sizeof(err));

	if (rc < 0) {
		CHECK(rc == -EINVAL && err[0] != '\0');
		return;
	}
	CHECK(rc == 0);
	CHECK(memchr(u.host, 0, sizeof(u.host)) && memchr(u.port, 0, sizeof(u.port)) &&
	      memchr(u.hosthdr, 0, sizeof(u.hosthdr)) && memchr(u.path, 0, sizeof(u.path)));
	if (u.kind == CLI_URL_UNIX) {
		CHECK(u.path[0] != '\0');
		snprintf(again, sizeof(again), "unix:%s", u.path);
	} else {
		unsigned long port;
		char *end;

		CHECK(u.kind == CLI_URL_TCP);
		CHECK(u.host[0] != '\0' && u.hosthdr[0] != '\0');
		port = strtoul(u.port, &end, 10);
		CHECK(*end == '\0' && port >= 1 && port <= 65535);
		snprintf(again, sizeof(again), "http://%s", u.hosthdr);
	}
	CHECK(cli_url_parse(again, &u2, err, sizeof(err)) == 0);
	CHECK(u2.kind == u.kind && strcmp(u2.host, u.host) == 0 &&
	      strcmp(u2.port, u.port) == 0 && strcmp(u2.hosthdr, u.hosthdr) == 0 &&
	      strcmp(u2.path, u.path) == 0);
}

static void
line_check(const char *p, size_t n)
{
	char *s = malloc(n + 1), *enc;
	size_t idlen;
	const char *path;

	CHECK(s != NULL);
	memcpy(s, p, n);
	s[n] = '\0';
	if (n > 0 && s[n - 1] == '\r')
		s[--n] = '\0';

	b64_check(s, n);
	url_check(s);

	/* a metrics line: the line is its own prefix unless it is another
	 * comment; a prefix never matches beyond the n bytes given */
	if (n > 0 && s[0] != '#' && !memchr(s, '\0', n))
		CHECK(cli_metric_line_matches(s, n, s));
	if (n > 1)
		CHECK(!cli_metric_line_matches(s, n - 1, s) || strlen(s) < n);

	if (cli_remote_parse(s, &idlen, &path)) {
		CHECK(cli_id_valid(s, idlen) && s[idlen] == ':' && path == s + idlen + 1 &&
		      path[0] == '/');
	}

	/* the encoding is plain and decodes back to s (up to its first NUL) */
	enc = cli_pct_encode(s);
	CHECK(enc != NULL);
	{
		size_t o = 0;

		for (const char *q = enc; *q; q++) {
			if (*q == '%') {
				unsigned v;

				CHECK(sscanf(q + 1, "%2X", &v) == 1);
				CHECK(s[o++] == (char)v);
				q += 2;
			} else {
				CHECK(strchr("-._~/", *q) || (*q >= '0' && *q <= '9') ||
				      (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'));
				CHECK(s[o++] == *q);
			}
		}
		CHECK(o == strlen(s));
	}
	free(enc);
	free(s);
}

static void
lines_check(const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t l = nl ? (size_t)(nl - p) : n;

		line_check(p, l);
		if (!nl)
			break;
		p += l + 1;
		n -= l + 1;
	}
}

/* ---- the response ------------------------------------------------------- */

static enum cli_rc
head_pieces(const char *s, size_t len, size_t step, size_t max, struct cli_resp *r,
	    char *err, size_t errsz)
{
	struct cli_head_parser p;
	enum cli_rc rc = CLI_AGAIN;
	size_t n = 0;

	cli_head_parser_init(&p, max);
	while (rc == CLI_AGAIN && n < len) {
		n = len - n > step ? n + step : len;
		rc = cli_head_parse(&p, s, n, r, err, errsz);
	}
	if (rc == CLI_DONE)
		CHECK(r->head_len >= 4 && r->head_len <= n && r->head_len <= max);
	if (rc == CLI_ERROR)
		CHECK(err[0] != '\0');
	return rc;
}

/* The exec stream's events, one JSON object a line, as `sluice exec` reads
 * them. */
static void
ndjson(const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t l = nl ? (size_t)(nl - p) : n;
		json_error_t je;
		json_t *ev = json_loadb(p, l, 0, &je);
		const json_t *d = json_object_get(ev, "data");

		if (json_is_string(d))
			b64_check(json_string_value(d), json_string_length(d));
		json_decref(ev);
		if (!nl)
			break;
		p += l + 1;
		n -= l + 1;
	}
}

static void
response(const char *s, size_t len, size_t step)
{
	static struct cli_resp r, w;
	char err[256] = "", werr[256] = "";
	enum cli_rc rc, wrc;
	const char *body;
	size_t blen;
	struct buf payload = { 0 };

	rc = head_pieces(s, len, step, CLI_MAX_HEAD, &r, err, sizeof(err));
	wrc = head_pieces(s, len, len ? len : 1, CLI_MAX_HEAD, &w, werr, sizeof(werr));
	CHECK(rc == wrc);
	if (rc == CLI_ERROR)
		CHECK(strcmp(err, werr) == 0);
	if (rc != CLI_DONE)
		return;
	CHECK(memcmp(&r, &w, sizeof(r)) == 0);
	CHECK(r.status >= 100 && r.status <= 599 && (r.minor == 0 || r.minor == 1));
	CHECK(memchr(r.reason, 0, sizeof(r.reason)) &&
	      memchr(r.content_type, 0, sizeof(r.content_type)) &&
	      memchr(r.sluice_reason, 0, sizeof(r.sluice_reason)));
	for (const char *q = r.content_type; *q; q++)
		CHECK(!(*q >= 'A' && *q <= 'Z'));
	CHECK(r.framing != CLI_BODY_NONE || r.status < 200 || r.status == 204 ||
	      r.status == 304);
	CHECK(r.framing != CLI_BODY_CHUNKED || r.minor == 1);

	body = s + r.head_len;
	blen = len - r.head_len;
	switch (r.framing) {
	case CLI_BODY_CHUNKED:
		chunked_all(body, blen, step, &payload);
		break;
	case CLI_BODY_LENGTH:
		buf_add(&payload, body, r.length < blen ? (size_t)r.length : blen);
		break;
	case CLI_BODY_CLOSE:
		buf_add(&payload, body, blen);
		break;
	case CLI_BODY_NONE:
		break;
	}
	if (strcmp(r.content_type, "application/x-ndjson") == 0 ||
	    strcmp(r.content_type, "application/json") == 0)
		ndjson(payload.p ? payload.p : "", payload.len);
	free(payload.p);
}

/* ---- YAML --------------------------------------------------------------- */

/* Counts the JSON values in j (keys not counted): one position each. */
static size_t
values(const json_t *j)
{
	size_t n = 1, i;
	const char *k;
	json_t *v;

	if (json_is_object(j)) {
		json_object_foreach((json_t *)(uintptr_t)j, k, v)
			n += values(v);
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			n += values(v);
	}
	return n;
}

/* Can libyaml read s[0..n), written by json_dumps(JSON_ENSURE_ASCII), back
 * as a double-quoted scalar? Not an astral character (escaped as a
 * surrogate pair, which libyaml refuses), not a raw DEL (jansson does not
 * escape it, libyaml refuses it), and for a key not so long that it is no
 * simple key to libyaml (1024 characters, escapes counted). */
static bool
str_safe(const char *p, size_t n, bool key)
{
	const unsigned char *s = (const unsigned char *)p;

	if (key && n >= 150)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 0xf0 || s[i] == 0x7f)
			return false;
	return true;
}

static bool
yaml_safe(const json_t *j)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(j))
		return str_safe(json_string_value(j), json_string_length(j), false);
	if (json_is_object(j)) {
		json_object_foreach((json_t *)(uintptr_t)j, k, v)
			if (!str_safe(k, strlen(k), true) || !yaml_safe(v))
				return false;
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if (!yaml_safe(v))
				return false;
	}
	return true;
}

static void
yaml(const char *s, size_t len)
{
	struct cli_yposv pos = { 0 };
	char err[1024] = "x", warn[600], perr[600];
	json_t *doc, *body;
	bool was_list;

	doc = cli_yaml_to_json("f.yaml", s, len, &pos, err, sizeof(err));
	if (!doc) {
		CHECK(err[0] != '\0');
		cli_yposv_fini(&pos);
		return;
	}
	CHECK(err[0] == '\0');
	CHECK(pos.n == values(doc));
	for (size_t i = 0; i < pos.n; i++) {
		const struct cli_ypos *p = cli_ypos_find(&pos, pos.v[i].path, strlen(pos.v[i].path));

		CHECK(p != NULL && strcmp(p->path, pos.v[i].path) == 0);
		CHECK(pos.v[i].line >= 1 && pos.v[i].col >= 1);
	}

	/* JSON is (flow) YAML: the conversion reads its own output back. */
	if (yaml_safe(doc)) {
		char *text = json_dumps(doc, JSON_ENCODE_ANY | JSON_ENSURE_ASCII), *t2;
		char err2[1024] = "";
		json_t *again;

		CHECK(text != NULL);
		again = cli_yaml_to_json("g.yaml", text, strlen(text), NULL, err2, sizeof(err2));
		CHECK(again != NULL);
		t2 = json_dumps(again, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
		CHECK(t2 != NULL && strcmp(text, t2) == 0);
		free(t2);
		free(text);
		json_decref(again);
	}

	was_list = json_is_array(doc);
	body = cli_pools_body("f.yaml", doc, &pos, warn, sizeof(warn), perr, sizeof(perr));
	if (body) {
		const json_t *list = json_object_get(body, "pools");

		CHECK(json_is_array(list) && json_object_size(body) == 1);
		CHECK(list == doc || list == json_object_get(doc, "pools"));
		/* a list's positions are rewritten to be the body's */
		for (size_t i = 0; was_list && i < pos.n; i++)
			CHECK(strncmp(pos.v[i].path, "pools", 5) == 0);
		(void)cli_ypos_find(&pos, "pools[0].warm_max", 17);
		json_decref(body);
	} else {
		CHECK(perr[0] != '\0');
	}
	json_decref(doc);
	cli_yposv_fini(&pos);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s;
	size_t len, step;
	unsigned mode;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] & 0x0f) + 1;
	mode = (data[0] >> 4) & 7;
	s = (const char *)data + 1;
	len = size - 1;

	switch (mode) {
	case 3:
	case 7:
		yaml(s, len);
		break;
	case 5:
		chunked_all(s, len, step, NULL);
		break;
	default:
		response(s, len, step);
		break;
	}
	lines_check(s, len);
	return 0;
}

/* fuzz_http1.c: libFuzzer target for gateway/http1.c.
 *
 * The first input byte picks the piece sizes and the request method a
 * response answers; the rest is fed as a request head then its body, as a
 * response head then its body, as a bare chunked body, and as a
 * request-target. Besides memory errors it checks the contracts: spans
 * stay inside the input, DECODE and RAW modes agree on where a body ends,
 * a parsed request head serialised again parses to the same framing, and
 * what a head or target that parses may hold (issue 20): no Connection
 * token naming a framing or routing field, a Host without userinfo or
 * non-ASCII bytes, no CONNECT with a body, only RFC 3986 bytes and whole
 * %XX escapes in a target's path and query.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* by path: the CMake target links no library that exports gateway/ */
#include "http1.h"


struct feed_out {
	enum gw_h1_result rc;
	size_t consumed;
	uint64_t payload;
};

/* Feeds in[0..len) in pieces of `step` bytes, checking every span. */
static struct feed_out feed_body(enum gw_h1_body_kind kind, uint64_t cl,
				 enum gw_h1_body_mode mode, const char *in,
				 size_t len, size_t step)
{
	struct gw_h1_body b;
	struct feed_out o = { GW_H1_AGAIN, 0, 0 };
	size_t avail = 0;

	gw_h1_body_init(&b, kind, cl, mode);
	while (o.rc == GW_H1_AGAIN) {
		struct gw_h1_span d;
		size_t used;

		if (o.consumed == avail) {
			if (avail == len)
				break;
			avail = avail + step < len ? avail + step : len;
		}
		o.rc = gw_h1_body_feed(&b, in + o.consumed, avail - o.consumed,
				       &used, &d);
		CHECK(used <= avail - o.consumed);
		CHECK(used > 0 || o.rc != GW_H1_AGAIN ||
		      avail == o.consumed);
		CHECK(d.len <= used);
		CHECK(d.len == 0 || (d.p >= in + o.consumed &&
				     d.p + d.len <= in + o.consumed + used));
		if (o.rc == GW_H1_ERROR)
			CHECK(d.len == 0 && b.err.msg != NULL);
		if (mode == GW_H1_RAW && o.rc != GW_H1_ERROR)
			CHECK(d.len == used);
		o.payload += mode == GW_H1_DECODE ? d.len : 0;
		o.consumed += used;
	}
	if (o.rc == GW_H1_AGAIN)
		(void)gw_h1_body_eof(&b);
	if (mode == GW_H1_DECODE)
		CHECK(o.payload == b.payload);
	return o;
}

/* Both modes, two piece sizes: all must agree. */
static void body_all(enum gw_h1_body_kind kind, uint64_t cl, const char *in,
		     size_t len, size_t step)
{
	struct feed_out a = feed_body(kind, cl, GW_H1_DECODE, in, len, step);
	struct feed_out b = feed_body(kind, cl, GW_H1_RAW, in, len, len + 1);
	struct feed_out c = feed_body(kind, cl, GW_H1_DECODE, in, len, 1);

	CHECK(a.rc == b.rc && a.rc == c.rc);
	CHECK(a.consumed == b.consumed && a.consumed == c.consumed);
	CHECK(a.payload == c.payload);
}

static enum gw_h1_result head_pieces(struct gw_h1_parser *p, const char *s,
				     size_t len, size_t step,
				     struct gw_h1_head *h)
{
	enum gw_h1_result rc = GW_H1_AGAIN;
	size_t n = 0;

	while (rc == GW_H1_AGAIN && n < len) {
		n = n + step < len ? n + step : len;
		rc = gw_h1_head_parse(p, s, n, h);
	}
	if (rc == GW_H1_DONE)
		CHECK(h->head_len <= n && h->nheaders <= GW_H1_MAX_HEADERS);
	if (rc == GW_H1_ERROR)
		CHECK(h->err.msg != NULL);
	return rc;
}

/* What a request head that parsed may hold. */
static void check_request_rules(const struct gw_h1_head *h)
{
	static const char *const named[] = { "content-length", "transfer-encoding", "host",
					     "max-forwards", "via", "forwarded" };

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		CHECK(!gw_h1_conn_has(h, named[i]));
	if (h->has_host)
		for (size_t i = 0; i < h->host.len; i++)
			CHECK(h->host.p[i] != '@' && (unsigned char)h->host.p[i] < 0x80);
	if (h->method_id == GW_H1_M_CONNECT)
		CHECK(!h->has_transfer_encoding && h->content_length == 0);
	for (size_t i = 0; i < h->nheaders; i++)
		(void)gw_h1_spoofable(GW_H1_REQUEST, h->headers[i].name.p, h->headers[i].name.len);
}

/* A path or query that parsed: RFC 3986 bytes, every '%' an escape. */
static void check_rfc3986(struct gw_h1_span s, bool query)
{
	static const char ok[] = "-._~!$&'()*+,;=:@/%";

	for (size_t i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.p[i];

		CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (c && strchr(ok, c)) || (query && c == '?'));
		if (c == '%') {
			CHECK(i + 2 < s.len);
			CHECK(isxdigit((unsigned char)s.p[i + 1]) &&
			      isxdigit((unsigned char)s.p[i + 2]));
		}
	}
}

static void check_spans(const struct gw_h1_head *h, const char *s, size_t n)
{
	for (size_t i = 0; i < h->nheaders; i++) {
		const struct gw_h1_header *x = &h->headers[i];

		CHECK(x->name.p >= s && x->name.p + x->name.len <= s + n);
		CHECK(x->value.p >= s && x->value.p + x->value.len <= s + n);
		CHECK(gw_h1_header_find(h, "content-length") == NULL ||
		      h->has_content_length);
		(void)gw_h1_hop_by_hop(h, x->name.p, x->name.len);
	}
}

/* Writes the head again and parses it: the same framing must come out. */
static void round_trip(const struct gw_h1_head *h)
{
	static char buf[65536];
	static struct gw_h1_head h2;
	struct gw_h1_writer w;
	struct gw_h1_parser p;

	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_request_line(&w, h->method, h->target, h->version_minor);
	for (size_t i = 0; i < h->nheaders; i++)
		gw_h1_write_header(&w, h->headers[i].name, h->headers[i].value);
	CHECK(gw_h1_write_end(&w) == 0);
	gw_h1_parser_init(&p, GW_H1_REQUEST, sizeof(buf));
	CHECK(gw_h1_head_parse(&p, buf, w.len, &h2) == GW_H1_DONE);
	CHECK(h2.head_len == w.len && h2.nheaders == h->nheaders);
	CHECK(h2.body == h->body && h2.content_length == h->content_length);
	CHECK(h2.keep_alive == h->keep_alive &&
	      h2.nconn_tokens == h->nconn_tokens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gw_h1_head h;
	struct gw_h1_parser p;
	struct gw_h1_target t;
	struct gw_h1_error err;
	const char *s;
	size_t step;
	enum gw_h1_method rm;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] & 0x0f) + 1;
	rm = (enum gw_h1_method)((data[0] >> 4) % GW_H1_M__COUNT);
	s = (const char *)data + 1;
	size--;

	/* a request, then its body */
	gw_h1_parser_init(&p, GW_H1_REQUEST, 4096);
	if (head_pieces(&p, s, size, step, &h) == GW_H1_DONE) {
		check_spans(&h, s, size);
		check_request_rules(&h);
		(void)gw_h1_target_parse(h.target.p, h.target.len, h.method_id,
					 &t, &err);
		round_trip(&h);
		body_all(h.body, h.content_length, s + h.head_len,
			 size - h.head_len, step);
	}

	/* a response to a request of method rm */
	gw_h1_parser_init(&p, GW_H1_RESPONSE, 4096);
	gw_h1_parser_set_request_method(&p, rm);
	if (head_pieces(&p, s, size, step, &h) == GW_H1_DONE) {
		check_spans(&h, s, size);
		body_all(h.body, h.content_length, s + h.head_len,
			 size - h.head_len, step);
	}

	/* a bare chunked body, and a target */
	body_all(GW_H1_BODY_CHUNKED, 0, s, size, step);
	if (gw_h1_target_parse(s, size, rm, &t, &err) == 0) {
		CHECK(t.path.len > 0 || t.form == GW_H1_TARGET_ASTERISK ||
		      t.form == GW_H1_TARGET_AUTHORITY);
		CHECK(t.form != GW_H1_TARGET_ABSOLUTE || t.port != 0);
		if (t.form == GW_H1_TARGET_ORIGIN || t.form == GW_H1_TARGET_ABSOLUTE) {
			check_rfc3986(t.path, false);
			check_rfc3986(t.query, true);
		}
	} else {
		CHECK(err.msg != NULL);
	}
	return 0;
}

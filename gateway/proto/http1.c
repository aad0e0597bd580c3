/* http1.c: strict HTTP/1.1 message parsing (RFC 9112): heads, header
 * lookups and the head writer. Request-targets are in http1_target.c, the
 * body decoder in http1_body.c. See http1.h.
 *
 * Strictness is the point: a proxy and its upstream must agree on where a
 * message ends, so anything two implementations could read differently
 * (CL+TE, repeated CL, obs-fold, bare CR or LF, odd chunk sizes) is
 * refused rather than interpreted.
 *
 * Every read of the caller's bytes goes through the bounded reader
 * (rd.h); the byte classes below are its scan tables.
 */
#include <errno.h>
#include <string.h>

#include "http1-int.h"

/* ---- character classes ---------------------------------------------- */

const struct gw_rd_class gw_h1_tchar = { .in = {
	['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1,
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
	['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
	['`'] = 1, ['|'] = 1, ['~'] = 1,
} };

/* field-vchar / SP / HTAB: VCHAR, obs-text, SP, HTAB; no controls, no DEL */
const struct gw_rd_class gw_h1_field = { .in = {
	['\t'] = 1, [0x20 ... 0x7e] = 1, [0x80 ... 0xff] = 1,
} };

const struct gw_rd_class gw_h1_ows = { .in = { [' '] = 1, ['\t'] = 1 } };

const struct gw_rd_class gw_h1_digit = { .in = { ['0' ... '9'] = 1 } };

const struct gw_rd_class gw_h1_vchar = { .in = { [0x21 ... 0x7e] = 1 } };

static const struct gw_rd_class crlf = { .in = { ['\r'] = 1, ['\n'] = 1 } };

/* bytes a Host value may not hold */
static const struct gw_rd_class host_bad = { .in = {
	[' '] = 1, ['\t'] = 1, [','] = 1,
} };

/* Splits a comma list: returns the next element (OWS-trimmed, maybe empty)
 * and takes it and its comma from r. */
static struct gw_h1_span list_next(struct gw_rd *r)
{
	struct gw_rd_span s = gw_rd_until(r, ',', SIZE_MAX);

	(void)gw_rd_getc(r);
	return h1_span(gw_rd_span_trim(s, &gw_h1_ows));
}

/* ---- methods -------------------------------------------------------- */

static const char *const method_names[] = {
#define GW_H1_METHOD_NAME(id, name) [GW_H1_M_##id] = name,
	GW_H1_METHODS(GW_H1_METHOD_NAME)
#undef GW_H1_METHOD_NAME
};

const char *gw_h1_method_name(enum gw_h1_method m)
{
	if ((unsigned)m >= GW_H1_M__COUNT)
		return "";
	return method_names[m];
}

enum gw_h1_method gw_h1_method_parse(const char *s, size_t len)
{
	for (unsigned m = 1; m < GW_H1_M__COUNT; m++)
		if (strlen(method_names[m]) == len &&
		    memcmp(method_names[m], s, len) == 0)
			return (enum gw_h1_method)m;
	return GW_H1_M_OTHER;
}

bool gw_h1_method_ieq(const struct gw_h1_head *h, const char *name)
{
	return h1_span_ieq(h->method, name);
}

/* ---- head ----------------------------------------------------------- */

void gw_h1_parser_init(struct gw_h1_parser *p, enum gw_h1_kind kind,
		       size_t max_head_bytes)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->state = GW_H1_PS_SCAN;
	p->req_method = GW_H1_M_OTHER;
	p->max_head = max_head_bytes;
}

void gw_h1_parser_set_request_method(struct gw_h1_parser *p,
				     enum gw_h1_method m)
{
	p->req_method = m;
}

static enum gw_h1_result head_fail(struct gw_h1_head *out, enum gw_reason r,
				   const char *msg)
{
	out->err.reason = r;
	out->err.msg = msg;
	return GW_H1_ERROR;
}

#define FAIL(msg) head_fail(out, GW_R_BAD_REQUEST, (msg))

/* request-line = method SP request-target SP HTTP-version */
static enum gw_h1_result parse_request_line(struct gw_rd *r,
					    struct gw_h1_head *out)
{
	struct gw_rd_span v;
	int c;

	out->method = h1_span(gw_rd_while(r, &gw_h1_tchar));
	c = gw_rd_peek(r);
	if (out->method.len == 0 || (c >= 0 && c != ' '))
		return FAIL("method is not a token");
	if (c != ' ')
		return FAIL("request line must have two single spaces");
	out->method_id = gw_h1_method_parse(out->method.p, out->method.len);
	(void)gw_rd_getc(r);

	/* the target runs to the next SP; anything else but VCHAR is refused */
	out->target = h1_span(gw_rd_while(r, &gw_h1_vchar));
	c = gw_rd_peek(r);
	if (c >= 0x80)
		return FAIL("non-ASCII byte in request-target");
	if (c >= 0 && c != ' ')
		return FAIL("control byte in request-target");
	if (out->target.len == 0 || c != ' ')
		return FAIL("request line must have two single spaces");
	(void)gw_rd_getc(r);

	v = gw_rd_until(r, ' ', SIZE_MAX);
	if (!gw_rd_empty(r))
		return FAIL("request line must have two single spaces");
	if (v.len == 8 && memcmp(v.p, "HTTP/1.1", 8) == 0)
		out->version_minor = 1;
	else if (v.len == 8 && memcmp(v.p, "HTTP/1.0", 8) == 0)
		out->version_minor = 0;
	else
		return FAIL("unsupported HTTP version");
	return GW_H1_AGAIN;
}

/* status-line = HTTP-version SP status-code SP [ reason-phrase ]; the
 * second SP may be missing when the phrase is (common in the wild). */
static enum gw_h1_result parse_status_line(struct gw_rd *r,
					   struct gw_h1_head *out)
{
	unsigned st = 0;
	int c;

	if (gw_rd_match(r, "HTTP/1.1 ", 9))
		out->version_minor = 1;
	else if (gw_rd_match(r, "HTTP/1.0 ", 9))
		out->version_minor = 0;
	else
		return FAIL("bad or unsupported HTTP version in status line");
	for (int i = 0; i < 3; i++) {
		c = gw_rd_getc(r);
		if (c < 0 || !h1_is(&gw_h1_digit, (unsigned char)c))
			return FAIL("status code must be three digits");
		st = st * 10 + (unsigned)(c - '0');
	}
	if (st < 100 || st > 599)
		return FAIL("status code out of range");
	out->status = st;
	c = gw_rd_getc(r);
	if (c >= 0 && c != ' ')
		return FAIL("status code must be three digits");
	out->status_text = h1_span(gw_rd_rest(r));
	if (!gw_rd_span_all(h1_rd_span(out->status_text), &gw_h1_field))
		return FAIL("control byte in reason phrase");
	return GW_H1_AGAIN;
}

/* field-line = field-name ":" OWS field-value OWS */
static enum gw_h1_result parse_field_line(struct gw_rd *r,
					  struct gw_h1_header *h,
					  struct gw_h1_head *out)
{
	int c = gw_rd_peek(r);

	if (c == ' ' || c == '\t')
		return FAIL("obs-fold");
	h->name = h1_span(gw_rd_while(r, &gw_h1_tchar));
	c = gw_rd_getc(r);
	if (c != ':') {
		if (c == ' ' || c == '\t')
			return FAIL("whitespace between header name and colon");
		if (c < 0)
			return FAIL("header line without colon");
		return FAIL("invalid byte in header name");
	}
	if (h->name.len == 0)
		return FAIL("empty header name");
	h->value = h1_span(gw_rd_rest(r));
	if (!gw_rd_span_all(h1_rd_span(h->value), &gw_h1_field))
		return FAIL("control byte in header value");
	h->value = h1_span(gw_rd_span_trim(h1_rd_span(h->value), &gw_h1_ows));
	return GW_H1_AGAIN;
}

/* What the framing fields said, gathered over all fields. */
struct framing {
	unsigned ncodings;
	unsigned nchunked;
	bool last_chunked;
	unsigned nhost;
	bool keep_alive_tok;
};

static enum gw_h1_result on_content_length(struct gw_h1_head *out,
					   struct gw_h1_span v)
{
	uint64_t n = 0;
	struct gw_rd r;
	int c;

	if (out->has_content_length)
		return FAIL("repeated Content-Length");
	out->has_content_length = true;
	if (v.len == 0)
		return FAIL("empty Content-Length");
	gw_rd_init(&r, v.p, v.len);
	while ((c = gw_rd_getc(&r)) >= 0) {
		if (c == ',')
			return FAIL("Content-Length list");
		if (c == '+' || c == '-')
			return FAIL("signed Content-Length");
		if (!h1_is(&gw_h1_digit, (unsigned char)c))
			return FAIL("non-numeric Content-Length");
		if (n > ((uint64_t)INT64_MAX - (unsigned)(c - '0')) / 10)
			return FAIL("Content-Length too large");
		n = n * 10 + (unsigned)(c - '0');
	}
	out->content_length = n;
	return GW_H1_AGAIN;
}

static enum gw_h1_result on_transfer_encoding(struct gw_h1_head *out,
					      struct framing *f,
					      struct gw_h1_span v)
{
	struct gw_rd r;

	if (out->version_minor == 0)
		return FAIL("Transfer-Encoding in HTTP/1.0");
	out->has_transfer_encoding = true;
	/* the list's last element, empty after a trailing comma, is never
	 * split off below: refuse it first */
	if (v.len > 0 && v.p[v.len - 1] == ',')
		return FAIL("empty Transfer-Encoding element");
	gw_rd_init(&r, v.p, v.len);
	do {
		struct gw_h1_span e = list_next(&r);
		bool chunked;

		if (e.len == 0)
			return FAIL("empty Transfer-Encoding element");
		if (memchr(e.p, ';', e.len))
			return FAIL("Transfer-Encoding parameters");
		if (!h1_span_is_token(e))
			return FAIL("bad Transfer-Encoding");
		chunked = h1_span_ieq(e, "chunked");
		if (f->ncodings < 1000)
			f->ncodings++;
		f->nchunked += chunked;
		f->last_chunked = chunked;
	} while (!gw_rd_empty(&r));
	return GW_H1_AGAIN;
}

/* Fields a Connection header may not name. */
static const struct h1_name_rule conn_forbidden[] = {
	H1_EXACT("content-length"), H1_EXACT("transfer-encoding"), H1_EXACT("host"),
	H1_EXACT("max-forwards"), H1_EXACT("via"), H1_EXACT("forwarded"),
};

static enum gw_h1_result on_connection(struct gw_h1_head *out,
				       struct framing *f, struct gw_h1_span v)
{
	struct gw_rd r;

	gw_rd_init(&r, v.p, v.len);
	while (!gw_rd_empty(&r)) {
		struct gw_h1_span t = list_next(&r);

		if (t.len == 0)
			continue;       /* empty list elements are ignored */
		if (!h1_span_is_token(t))
			return FAIL("bad Connection token");
		/* Every token must be kept: a dropped one would let a header
		 * named in Connection slip through a proxy. */
		if (out->nconn_tokens >= GW_H1_MAX_CONN_TOKENS)
			return FAIL("too many Connection tokens");
		out->conn_tokens[out->nconn_tokens++] = t;
		/* A field named here is dropped by the next hop: naming one
		 * that frames or routes the message would have hops disagree
		 * on where it ends or where it goes (RFC 9110 7.6.1). */
		if (h1_name_in(conn_forbidden, sizeof(conn_forbidden) / sizeof(conn_forbidden[0]),
			       t.p, t.len, false))
			return FAIL("Connection names a framing or routing field");
		if (h1_span_ieq(t, "close"))
			out->conn_close = true;
		else if (h1_span_ieq(t, "keep-alive"))
			f->keep_alive_tok = true;
	}
	return GW_H1_AGAIN;
}

/* Max-Forwards = 1*DIGIT; a hop decrements it (RFC 9110 7.6.2), so two
 * readings of it must not differ. */
static enum gw_h1_result on_max_forwards(struct gw_h1_head *out, struct gw_h1_span v)
{
	uint64_t n = 0;
	struct gw_rd r;
	int c;

	if (out->has_max_forwards)
		return FAIL("repeated Max-Forwards");
	out->has_max_forwards = true;
	if (v.len == 0)
		return FAIL("bad Max-Forwards");
	gw_rd_init(&r, v.p, v.len);
	while ((c = gw_rd_getc(&r)) >= 0) {
		if (!h1_is(&gw_h1_digit, (unsigned char)c))
			return FAIL("bad Max-Forwards");
		if (n < UINT32_MAX)
			n = n * 10 + (unsigned)(c - '0');
	}
	out->max_forwards = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
	return GW_H1_AGAIN;
}

static enum gw_h1_result on_field(struct gw_h1_head *out, struct framing *f,
				  const struct gw_h1_header *h)
{
	if (h1_span_ieq(h->name, "content-length"))
		return on_content_length(out, h->value);
	if (h1_span_ieq(h->name, "transfer-encoding"))
		return on_transfer_encoding(out, f, h->value);
	if (h1_span_ieq(h->name, "connection"))
		return on_connection(out, f, h->value);
	if (h1_span_ieq(h->name, "upgrade"))
		out->upgrade = true;
	else if (h1_span_ieq(h->name, "expect")) {
		if (h1_span_ieq(h->value, "100-continue"))
			out->expect_100_continue = true;
	} else if (h1_span_ieq(h->name, "host") && out->kind == GW_H1_REQUEST) {
		struct gw_h1_error err;

		if (++f->nhost > 1)
			return FAIL("repeated Host");
		if (!gw_rd_span_none(h1_rd_span(h->value), &host_bad))
			return FAIL("bad Host value");
		/* What an origin would route by must be what sluice checks:
		 * no userinfo, no raw UTF-8, nothing but host[:port]. */
		if (h1_host_value_check(h->value, &err) < 0)
			return head_fail(out, err.reason, err.msg);
		out->host = h->value;
		out->has_host = true;
	} else if (h1_span_ieq(h->name, "max-forwards") && out->kind == GW_H1_REQUEST) {
		return on_max_forwards(out, h->value);
	}
	return GW_H1_AGAIN;
}

/* RFC 9112 6.3, with the ambiguous cases refused. */
static enum gw_h1_result derive_framing(const struct gw_h1_parser *p,
					struct gw_h1_head *out,
					const struct framing *f)
{
	bool no_body = false;

	if (out->has_content_length && out->has_transfer_encoding)
		return FAIL("both Content-Length and Transfer-Encoding");
	if (out->kind == GW_H1_REQUEST) {
		if (out->version_minor == 1 && f->nhost == 0)
			return FAIL("missing Host");
		/* Requests take a sole "chunked": other codings are unknown
		 * to most origins (RFC 9112 6.1 asks for 501) and lists are
		 * where front and back ends disagree. */
		if (out->has_transfer_encoding &&
		    !(f->ncodings == 1 && f->last_chunked))
			return FAIL("Transfer-Encoding other than chunked");
		/* A CONNECT has no content (RFC 9110 9.3.6): bytes after its
		 * head belong to the tunnel, so a body would go through
		 * unchecked as the tunnel's first bytes. */
		if (out->method_id == GW_H1_M_CONNECT &&
		    (out->has_transfer_encoding || out->content_length > 0))
			return FAIL("CONNECT with a body");
	} else {
		if (f->nchunked > 1 || (f->nchunked == 1 && !f->last_chunked))
			return FAIL("chunked is not the final transfer coding");
		no_body = out->status < 200 || out->status == 204 ||
			  out->status == 304 || p->req_method == GW_H1_M_HEAD ||
			  (p->req_method == GW_H1_M_CONNECT &&
			   out->status < 300);
	}

	if (no_body)
		out->body = GW_H1_BODY_NONE;
	else if (out->has_transfer_encoding)
		out->body = f->last_chunked ? GW_H1_BODY_CHUNKED
					    : GW_H1_BODY_UNTIL_CLOSE;
	else if (out->has_content_length)
		out->body = GW_H1_BODY_LENGTH;
	else if (out->kind == GW_H1_RESPONSE)
		out->body = GW_H1_BODY_UNTIL_CLOSE;
	else
		out->body = GW_H1_BODY_NONE;
	if (out->body != GW_H1_BODY_LENGTH)
		out->content_length = 0;

	if (out->version_minor == 1)
		out->keep_alive = !out->conn_close;
	else
		out->keep_alive = f->keep_alive_tok && !out->conn_close;
	if (out->body == GW_H1_BODY_UNTIL_CLOSE)
		out->keep_alive = false;
	return GW_H1_AGAIN;
}

/* Parses the complete head buf[p->start .. head_len): every CR in it is
 * followed by LF and every LF preceded by CR (checked while scanning). */
static enum gw_h1_result parse_head(const struct gw_h1_parser *p,
				    const char *buf, size_t head_len,
				    struct gw_h1_head *out)
{
	struct framing f = { 0 };
	enum gw_h1_result rc;
	bool first = true;
	struct gw_rd all;

	memset(out, 0, sizeof(*out));
	out->kind = p->kind;
	out->head_len = head_len;
	gw_rd_init(&all, buf, head_len - 2);    /* without the last CRLF */
	(void)gw_rd_skip(&all, p->start);

	while (!gw_rd_empty(&all)) {
		struct gw_rd_span l = gw_rd_until(&all, '\r', SIZE_MAX);
		struct gw_rd line;

		(void)gw_rd_skip(&all, 2);      /* its CRLF, unless the last */
		gw_rd_init(&line, l.p, l.len);
		if (first) {
			rc = p->kind == GW_H1_REQUEST
				     ? parse_request_line(&line, out)
				     : parse_status_line(&line, out);
			first = false;
		} else {
			struct gw_h1_header *h;

			if (out->nheaders >= GW_H1_MAX_HEADERS)
				return head_fail(out, GW_R_HEADER_TOO_LARGE,
						 "too many header fields");
			h = &out->headers[out->nheaders++];
			rc = parse_field_line(&line, h, out);
		}
		if (rc != GW_H1_AGAIN)
			return rc;
	}
	/* Meaning only once every line is known to be well-formed, so a
	 * syntax error is reported as such whatever field it follows. */
	for (size_t i = 0; i < out->nheaders; i++) {
		rc = on_field(out, &f, &out->headers[i]);
		if (rc != GW_H1_AGAIN)
			return rc;
	}
	rc = derive_framing(p, out, &f);
	return rc == GW_H1_AGAIN ? GW_H1_DONE : rc;
}

#undef FAIL

/* Where scan_head() stopped. */
enum scan_end {
	SCAN_MORE = 0,  /* no end yet: need more bytes (or the limit hit) */
	SCAN_HEAD,      /* the empty line that ends the head */
	SCAN_BARE_CR,
	SCAN_BARE_LF,
	SCAN_EMPTY_LINES,
};

/* Checks line endings from r's cursor up to `lim`, one line at a time,
 * keeping p's line bookkeeping. A CR whose LF has not arrived leaves the
 * cursor on it, so the next call looks at it again. */
static enum scan_end scan_head(struct gw_h1_parser *p, struct gw_rd *r,
			       size_t lim, size_t *head_len)
{
	while (gw_rd_pos(r) < lim) {
		uint16_t pair;
		size_t lf;

		/* past lim only when lim is the size limit: then it is an
		 * error whatever is found there */
		(void)gw_rd_until_any(r, &crlf);
		if (gw_rd_pos(r) >= lim || gw_rd_empty(r))
			break;
		if (gw_rd_peek(r) == '\n')
			return SCAN_BARE_LF;    /* a CR before it was taken */
		if (gw_rd_fetch_be16(r, &pair) != GW_RD_OK)
			break;                  /* a CR, its LF not here yet */
		if (pair != ('\r' << 8 | '\n'))
			return SCAN_BARE_CR;
		lf = gw_rd_pos(r) - 1;
		if (lf >= lim)
			break;
		if (lf - 1 == p->line_start) {
			if (p->have_start) {
				p->line_start = lf + 1;
				*head_len = lf + 1;
				return SCAN_HEAD;
			}
			if (++p->empty_lines > GW_H1_MAX_EMPTY_LINES)
				return SCAN_EMPTY_LINES;
		} else if (!p->have_start) {
			p->have_start = true;
			p->start = p->line_start;
		}
		p->line_start = lf + 1;
	}
	return SCAN_MORE;
}

enum gw_h1_result gw_h1_head_parse(struct gw_h1_parser *p, const char *buf,
				   size_t len, struct gw_h1_head *out)
{
	size_t lim = len < p->max_head ? len : p->max_head;
	size_t head_len = 0;
	enum scan_end end = SCAN_MORE;
	enum gw_h1_result rc;
	struct gw_rd r;

	if (p->state != GW_H1_PS_SCAN)
		return head_fail(out, GW_R_INTERNAL,
				 "head parser used again without init");

	/* Only line endings are checked here, from where the last call
	 * stopped: finding the end costs O(new bytes). */
	gw_rd_init(&r, buf, len);
	if (gw_rd_skip(&r, p->scanned) == GW_RD_OK) {
		end = scan_head(p, &r, lim, &head_len);
		/* the scan may look past lim, never report past it */
		if ((end == SCAN_MORE || end == SCAN_HEAD) &&
		    gw_rd_pos(&r) > p->scanned)
			p->scanned = gw_rd_pos(&r) < lim ? gw_rd_pos(&r) : lim;
	}
	switch (end) {
	case SCAN_MORE:
		if (len >= p->max_head) {
			p->state = GW_H1_PS_ERROR;
			return head_fail(out, GW_R_HEADER_TOO_LARGE,
					 "head too large");
		}
		return GW_H1_AGAIN;
	case SCAN_HEAD:
		rc = parse_head(p, buf, head_len, out);
		p->state = rc == GW_H1_DONE ? GW_H1_PS_DONE : GW_H1_PS_ERROR;
		return rc;
	case SCAN_BARE_CR:
		p->state = GW_H1_PS_ERROR;
		return head_fail(out, GW_R_BAD_REQUEST, "bare CR in head");
	case SCAN_BARE_LF:
		p->state = GW_H1_PS_ERROR;
		return head_fail(out, GW_R_BAD_REQUEST, "bare LF in head");
	default:
		p->state = GW_H1_PS_ERROR;
		return head_fail(out, GW_R_BAD_REQUEST,
				 "too many empty lines before the start line");
	}
}

const struct gw_h1_header *gw_h1_header_next(const struct gw_h1_head *h,
					     const struct gw_h1_header *prev,
					     const char *name)
{
	size_t i = prev ? (size_t)(prev - h->headers) + 1 : 0;

	for (; i < h->nheaders; i++)
		if (h1_span_ieq(h->headers[i].name, name))
			return &h->headers[i];
	return NULL;
}

const struct gw_h1_header *gw_h1_header_find(const struct gw_h1_head *h,
					     const char *name)
{
	return gw_h1_header_next(h, NULL, name);
}

bool gw_h1_conn_has(const struct gw_h1_head *h, const char *tok)
{
	for (size_t i = 0; i < h->nconn_tokens; i++)
		if (h1_span_ieq(h->conn_tokens[i], tok))
			return true;
	return false;
}

bool h1_name_in(const struct h1_name_rule *rules, size_t n, const char *name, size_t len,
		bool cut)
{
	for (size_t i = 0; i < n; i++) {
		if (rules[i].prefix ? len >= rules[i].len
				    : !cut && len == rules[i].len)
			if (h1_mem_ieq(name, rules[i].len, rules[i].name, rules[i].len))
				return true;
	}
	return false;
}

/* Who sent a request and through what: what an origin (or a proxy behind
 * it) may believe about the client, and sluice's own namespace. */
const struct h1_name_rule h1_spoof_rules[] = {
	H1_EXACT("forwarded"), H1_PREFIX("x-forwarded-"), H1_EXACT("x-real-ip"),
	H1_PREFIX("x-upstream-"), H1_PREFIX("sluice-"),
	H1_EXACT("true-client-ip"), H1_EXACT("x-client-ip"), H1_EXACT("client-ip"),
	H1_EXACT("x-cluster-client-ip"), H1_EXACT("cf-connecting-ip"),
	H1_EXACT("fastly-client-ip"), H1_EXACT("x-originating-ip"), H1_EXACT("x-remote-ip"),
	H1_EXACT("x-remote-addr"), H1_EXACT("x-original-url"), H1_EXACT("x-rewrite-url"),
	H1_EXACT("x-host"),
};
const size_t h1_nspoof_rules = sizeof(h1_spoof_rules) / sizeof(h1_spoof_rules[0]);

bool gw_h1_spoofable(enum gw_h1_kind kind, const char *name, size_t len)
{
	static const struct h1_name_rule ours[] = { H1_PREFIX("sluice-") };

	if (kind == GW_H1_RESPONSE)
		return h1_name_in(ours, 1, name, len, false);
	return h1_name_in(h1_spoof_rules, h1_nspoof_rules, name, len, false);
}

bool gw_h1_hop_by_hop(const struct gw_h1_head *h, const char *name,
		      size_t len)
{
	static const char *const fixed[] = {
		"connection", "proxy-connection", "keep-alive", "te",
		"trailer", "transfer-encoding", "upgrade",
		"proxy-authorization", "proxy-authenticate",
	};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (h1_mem_ieq(name, len, fixed[i], strlen(fixed[i])))
			return true;
	for (size_t i = 0; i < h->nconn_tokens; i++)
		if (h1_mem_ieq(name, len, h->conn_tokens[i].p,
			    h->conn_tokens[i].len))
			return true;
	return false;
}

/* ---- the caller's buffer moved --------------------------------------- */

void gw_h1_head_rebase(struct gw_h1_head *h, const char *from, size_t n,
		       const char *to)
{
	h1_span_move(&h->method, from, n, to);
	h1_span_move(&h->target, from, n, to);
	h1_span_move(&h->host, from, n, to);
	h1_span_move(&h->status_text, from, n, to);
	for (size_t i = 0; i < h->nheaders && i < GW_H1_MAX_HEADERS; i++) {
		h1_span_move(&h->headers[i].name, from, n, to);
		h1_span_move(&h->headers[i].value, from, n, to);
	}
	for (size_t i = 0; i < h->nconn_tokens && i < GW_H1_MAX_CONN_TOKENS; i++)
		h1_span_move(&h->conn_tokens[i], from, n, to);
}

/* ---- writer --------------------------------------------------------- */

void gw_h1_writer_init(struct gw_h1_writer *w, char *buf, size_t size)
{
	w->buf = buf;
	w->size = size;
	w->len = 0;
	w->err = 0;
}

static void w_put(struct gw_h1_writer *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (w->size - w->len < n) {
		w->err = -ENOSPC;
		return;
	}
	if (n)
		memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void w_str(struct gw_h1_writer *w, const char *s)
{
	w_put(w, s, strlen(s));
}

static void w_check(struct gw_h1_writer *w, bool ok)
{
	if (!ok && !w->err)
		w->err = -EINVAL;
}

static bool span_is_field_value(struct gw_h1_span s)
{
	return gw_rd_span_all(h1_rd_span(s), &gw_h1_field);
}

void gw_h1_write_request_line(struct gw_h1_writer *w, struct gw_h1_span method,
			      struct gw_h1_span target, unsigned version_minor)
{
	bool ok = h1_span_is_token(method) && target.len > 0 &&
		  version_minor <= 1 &&
		  gw_rd_span_all(h1_rd_span(target), &gw_h1_vchar);

	w_check(w, ok);
	w_put(w, method.p, method.len);
	w_str(w, " ");
	w_put(w, target.p, target.len);
	w_str(w, version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
}

void gw_h1_write_status_line(struct gw_h1_writer *w, unsigned status,
			     struct gw_h1_span text, unsigned version_minor)
{
	char code[4];

	w_check(w, status >= 100 && status <= 599 && version_minor <= 1 &&
			   span_is_field_value(text));
	code[0] = (char)('0' + status / 100 % 10);
	code[1] = (char)('0' + status / 10 % 10);
	code[2] = (char)('0' + status % 10);
	code[3] = ' ';
	w_str(w, version_minor ? "HTTP/1.1 " : "HTTP/1.0 ");
	w_put(w, code, 4);
	w_put(w, text.p, text.len);
	w_str(w, "\r\n");
}

void gw_h1_write_header(struct gw_h1_writer *w, struct gw_h1_span name,
			struct gw_h1_span value)
{
	w_check(w, h1_span_is_token(name) && span_is_field_value(value));
	w_put(w, name.p, name.len);
	w_str(w, ": ");
	w_put(w, value.p, value.len);
	w_str(w, "\r\n");
}

int gw_h1_write_end(struct gw_h1_writer *w)
{
	w_str(w, "\r\n");
	return w->err;
}

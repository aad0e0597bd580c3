/* http1.c: strict HTTP/1.1 message parsing (RFC 9112). See http1.h.
 *
 * Strictness is the point: a proxy and its upstream must agree on where a
 * message ends, so anything two implementations could read differently
 * (CL+TE, repeated CL, obs-fold, bare CR or LF, odd chunk sizes) is
 * refused rather than interpreted.
 */
#include <errno.h>
#include <string.h>

#include "http1.h"

/* ---- character classes and the bounded reader ---------------------- */

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* field-vchar / SP / HTAB: VCHAR, obs-text, SP, HTAB; no controls, no DEL */
static bool is_field_byte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static unsigned char lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static bool mem_ieq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return false;
	return true;
}

static bool span_ieq(struct gw_h1_span s, const char *lit)
{
	return mem_ieq(s.p, s.len, lit, strlen(lit));
}

/* Every fetch from untrusted bytes goes through this: it cannot step past
 * `len`, and a fetch past the end returns -1. */
struct h1_rd {
	const char *p;
	size_t len;
	size_t pos;
};

static struct h1_rd rd_make(const char *p, size_t len)
{
	struct h1_rd r = { .p = p, .len = len, .pos = 0 };
	return r;
}

static bool rd_end(const struct h1_rd *r)
{
	return r->pos >= r->len;
}

static int rd_peek(const struct h1_rd *r)
{
	return r->pos < r->len ? (unsigned char)r->p[r->pos] : -1;
}

static int rd_get(struct h1_rd *r)
{
	int c = rd_peek(r);

	if (c >= 0)
		r->pos++;
	return c;
}

/* Takes the longest run of bytes accepted by `pred`. */
static struct gw_h1_span rd_while(struct h1_rd *r,
				  bool (*pred)(unsigned char))
{
	struct gw_h1_span s = { r->p + r->pos, 0 };

	while (r->pos < r->len && pred((unsigned char)r->p[r->pos])) {
		r->pos++;
		s.len++;
	}
	return s;
}

/* The remaining bytes, all of them. */
static struct gw_h1_span rd_rest(struct h1_rd *r)
{
	struct gw_h1_span s = { r->p + r->pos, r->len - r->pos };

	r->pos = r->len;
	return s;
}

static bool rd_lit(struct h1_rd *r, const char *lit)
{
	size_t n = strlen(lit);

	if (r->len - r->pos < n || memcmp(r->p + r->pos, lit, n) != 0)
		return false;
	r->pos += n;
	return true;
}

static struct gw_h1_span span_trim(struct gw_h1_span s)
{
	while (s.len > 0 && is_ows((unsigned char)s.p[0])) {
		s.p++;
		s.len--;
	}
	while (s.len > 0 && is_ows((unsigned char)s.p[s.len - 1]))
		s.len--;
	return s;
}

static bool span_is_token(struct gw_h1_span s)
{
	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
		if (!is_tchar((unsigned char)s.p[i]))
			return false;
	return true;
}

/* Splits a comma list: returns the next element (OWS-trimmed, maybe empty)
 * and advances *r past it and its comma. */
static struct gw_h1_span list_next(struct h1_rd *r)
{
	struct gw_h1_span s = { r->p + r->pos, 0 };
	int c;

	while ((c = rd_get(r)) >= 0 && c != ',')
		s.len++;
	return span_trim(s);
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
static enum gw_h1_result parse_request_line(struct h1_rd *r,
					    struct gw_h1_head *out)
{
	struct gw_h1_span v;
	int c;

	out->method = rd_while(r, is_tchar);
	c = rd_peek(r);
	if (out->method.len == 0 || (c >= 0 && c != ' '))
		return FAIL("method is not a token");
	if (c != ' ')
		return FAIL("request line must have two single spaces");
	out->method_id = gw_h1_method_parse(out->method.p, out->method.len);
	rd_get(r);

	out->target.p = r->p + r->pos;
	out->target.len = 0;
	while ((c = rd_peek(r)) >= 0 && c != ' ') {
		if (c < 0x20 || c == 0x7f)
			return FAIL("control byte in request-target");
		if (c >= 0x80)
			return FAIL("non-ASCII byte in request-target");
		rd_get(r);
		out->target.len++;
	}
	if (out->target.len == 0 || c != ' ')
		return FAIL("request line must have two single spaces");
	rd_get(r);

	v = rd_rest(r);
	for (size_t i = 0; i < v.len; i++)
		if (v.p[i] == ' ')
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
static enum gw_h1_result parse_status_line(struct h1_rd *r,
					   struct gw_h1_head *out)
{
	unsigned st = 0;
	int c;

	if (rd_lit(r, "HTTP/1.1 "))
		out->version_minor = 1;
	else if (rd_lit(r, "HTTP/1.0 "))
		out->version_minor = 0;
	else
		return FAIL("bad or unsupported HTTP version in status line");
	for (int i = 0; i < 3; i++) {
		c = rd_get(r);
		if (c < 0 || !is_digit((unsigned char)c))
			return FAIL("status code must be three digits");
		st = st * 10 + (unsigned)(c - '0');
	}
	if (st < 100 || st > 599)
		return FAIL("status code out of range");
	out->status = st;
	c = rd_get(r);
	if (c >= 0 && c != ' ')
		return FAIL("status code must be three digits");
	out->status_text = rd_rest(r);
	for (size_t i = 0; i < out->status_text.len; i++)
		if (!is_field_byte((unsigned char)out->status_text.p[i]))
			return FAIL("control byte in reason phrase");
	return GW_H1_AGAIN;
}

/* field-line = field-name ":" OWS field-value OWS */
static enum gw_h1_result parse_field_line(struct h1_rd *r,
					  struct gw_h1_header *h,
					  struct gw_h1_head *out)
{
	int c = rd_peek(r);

	if (c == ' ' || c == '\t')
		return FAIL("obs-fold");
	h->name = rd_while(r, is_tchar);
	c = rd_get(r);
	if (c != ':') {
		if (c == ' ' || c == '\t')
			return FAIL("whitespace between header name and colon");
		if (c < 0)
			return FAIL("header line without colon");
		return FAIL("invalid byte in header name");
	}
	if (h->name.len == 0)
		return FAIL("empty header name");
	h->value = rd_rest(r);
	for (size_t i = 0; i < h->value.len; i++)
		if (!is_field_byte((unsigned char)h->value.p[i]))
			return FAIL("control byte in header value");
	h->value = span_trim(h->value);
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

	if (out->has_content_length)
		return FAIL("repeated Content-Length");
	out->has_content_length = true;
	if (v.len == 0)
		return FAIL("empty Content-Length");
	for (size_t i = 0; i < v.len; i++) {
		unsigned char c = (unsigned char)v.p[i];

		if (c == ',')
			return FAIL("Content-Length list");
		if (c == '+' || c == '-')
			return FAIL("signed Content-Length");
		if (!is_digit(c))
			return FAIL("non-numeric Content-Length");
		if (n > ((uint64_t)INT64_MAX - (c - '0')) / 10)
			return FAIL("Content-Length too large");
		n = n * 10 + (c - '0');
	}
	out->content_length = n;
	return GW_H1_AGAIN;
}

static enum gw_h1_result on_transfer_encoding(struct gw_h1_head *out,
					      struct framing *f,
					      struct gw_h1_span v)
{
	struct h1_rd r = rd_make(v.p, v.len);

	if (out->version_minor == 0)
		return FAIL("Transfer-Encoding in HTTP/1.0");
	out->has_transfer_encoding = true;
	if (v.len > 0 && v.p[v.len - 1] == ',')
		return FAIL("empty Transfer-Encoding element");
	do {
		struct gw_h1_span e = list_next(&r);
		bool chunked;

		if (e.len == 0)
			return FAIL("empty Transfer-Encoding element");
		for (size_t i = 0; i < e.len; i++)
			if (e.p[i] == ';')
				return FAIL("Transfer-Encoding parameters");
		if (!span_is_token(e))
			return FAIL("bad Transfer-Encoding");
		chunked = span_ieq(e, "chunked");
		if (f->ncodings < 1000)
			f->ncodings++;
		f->nchunked += chunked;
		f->last_chunked = chunked;
	} while (!rd_end(&r));
	return GW_H1_AGAIN;
}

static enum gw_h1_result on_connection(struct gw_h1_head *out,
				       struct framing *f, struct gw_h1_span v)
{
	struct h1_rd r = rd_make(v.p, v.len);

	while (!rd_end(&r)) {
		struct gw_h1_span t = list_next(&r);

		if (t.len == 0)
			continue;       /* empty list elements are ignored */
		if (!span_is_token(t))
			return FAIL("bad Connection token");
		/* Every token must be kept: a dropped one would let a header
		 * named in Connection slip through a proxy. */
		if (out->nconn_tokens >= GW_H1_MAX_CONN_TOKENS)
			return FAIL("too many Connection tokens");
		out->conn_tokens[out->nconn_tokens++] = t;
		if (span_ieq(t, "close"))
			out->conn_close = true;
		else if (span_ieq(t, "keep-alive"))
			f->keep_alive_tok = true;
	}
	return GW_H1_AGAIN;
}

static enum gw_h1_result on_field(struct gw_h1_head *out, struct framing *f,
				  const struct gw_h1_header *h)
{
	if (span_ieq(h->name, "content-length"))
		return on_content_length(out, h->value);
	if (span_ieq(h->name, "transfer-encoding"))
		return on_transfer_encoding(out, f, h->value);
	if (span_ieq(h->name, "connection"))
		return on_connection(out, f, h->value);
	if (span_ieq(h->name, "upgrade"))
		out->upgrade = true;
	else if (span_ieq(h->name, "expect")) {
		if (span_ieq(h->value, "100-continue"))
			out->expect_100_continue = true;
	} else if (span_ieq(h->name, "host") && out->kind == GW_H1_REQUEST) {
		if (++f->nhost > 1)
			return FAIL("repeated Host");
		for (size_t i = 0; i < h->value.len; i++)
			if (is_ows((unsigned char)h->value.p[i]) ||
			    h->value.p[i] == ',')
				return FAIL("bad Host value");
		out->host = h->value;
		out->has_host = true;
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
	struct h1_rd all = rd_make(buf, head_len - 2);
	struct framing f = { 0 };
	enum gw_h1_result rc;
	bool first = true;

	memset(out, 0, sizeof(*out));
	out->kind = p->kind;
	out->head_len = head_len;
	all.pos = p->start;

	while (!rd_end(&all)) {
		const char *nl = memchr(all.p + all.pos, '\r',
					all.len - all.pos);
		size_t llen = nl ? (size_t)(nl - (all.p + all.pos))
				 : all.len - all.pos;
		struct h1_rd line = rd_make(all.p + all.pos, llen);

		all.pos += llen + (nl ? 2 : 0);
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

enum gw_h1_result gw_h1_head_parse(struct gw_h1_parser *p, const char *buf,
				   size_t len, struct gw_h1_head *out)
{
	size_t lim = len < p->max_head ? len : p->max_head;
	size_t i = p->scanned;
	size_t head_len = 0;
	enum gw_h1_result rc;

	if (p->state != GW_H1_PS_SCAN)
		return head_fail(out, GW_R_INTERNAL,
				 "head parser used again without init");

	/* Only line endings are checked here, one byte at a time from where
	 * the last call stopped; a CR at the end waits for its LF. */
	while (i < lim && head_len == 0) {
		char c = buf[i];

		if (c == '\r') {
			if (i + 1 >= len)
				break;
			if (buf[i + 1] != '\n')
				goto bare_cr;
		} else if (c == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				goto bare_lf;
			if (i - 1 == p->line_start) {
				if (p->have_start)
					head_len = i + 1;
				else if (++p->empty_lines >
					 GW_H1_MAX_EMPTY_LINES)
					goto too_many_empty;
			} else if (!p->have_start) {
				p->have_start = true;
				p->start = p->line_start;
			}
			p->line_start = i + 1;
		}
		i++;
	}
	p->scanned = i;
	if (head_len == 0) {
		if (len >= p->max_head) {
			p->state = GW_H1_PS_ERROR;
			return head_fail(out, GW_R_HEADER_TOO_LARGE,
					 "head too large");
		}
		return GW_H1_AGAIN;
	}
	rc = parse_head(p, buf, head_len, out);
	p->state = rc == GW_H1_DONE ? GW_H1_PS_DONE : GW_H1_PS_ERROR;
	return rc;

bare_cr:
	p->state = GW_H1_PS_ERROR;
	return head_fail(out, GW_R_BAD_REQUEST, "bare CR in head");
bare_lf:
	p->state = GW_H1_PS_ERROR;
	return head_fail(out, GW_R_BAD_REQUEST, "bare LF in head");
too_many_empty:
	p->state = GW_H1_PS_ERROR;
	return head_fail(out, GW_R_BAD_REQUEST,
			 "too many empty lines before the start line");
}

const struct gw_h1_header *gw_h1_header_next(const struct gw_h1_head *h,
					     const struct gw_h1_header *prev,
					     const char *name)
{
	size_t i = prev ? (size_t)(prev - h->headers) + 1 : 0;

	for (; i < h->nheaders; i++)
		if (span_ieq(h->headers[i].name, name))
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
		if (span_ieq(h->conn_tokens[i], tok))
			return true;
	return false;
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
		if (mem_ieq(name, len, fixed[i], strlen(fixed[i])))
			return true;
	for (size_t i = 0; i < h->nconn_tokens; i++)
		if (mem_ieq(name, len, h->conn_tokens[i].p,
			    h->conn_tokens[i].len))
			return true;
	return false;
}

/* ---- request-target ------------------------------------------------- */

static int target_fail(struct gw_h1_error *err, enum gw_reason r,
		       const char *msg)
{
	err->reason = r;
	err->msg = msg;
	return -EINVAL;
}

/* reg-name / IPv4 bytes: unreserved, pct-encoded, sub-delims */
static bool is_regname(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
		return true;
	return c != 0 && strchr("-._~%!$&'()*+,;=", c) != NULL;
}

static bool is_v6char(unsigned char c)
{
	return hex_value(c) >= 0 || c == ':' || c == '.';
}

/* host [ ":" port ] in a[0..len); port_required for authority-form. */
static int parse_authority(const char *a, size_t len, bool port_required,
			   struct gw_h1_target *out, struct gw_h1_error *err)
{
	struct h1_rd r = rd_make(a, len);
	int c;

	if (memchr(a, '@', len))
		return target_fail(err, GW_R_USERINFO, "userinfo in URL");
	if (rd_peek(&r) == '[') {
		rd_get(&r);
		out->host = rd_while(&r, is_v6char);
		if (rd_get(&r) != ']' || out->host.len < 2)
			return target_fail(err, GW_R_BAD_HOST,
					   "bad IPv6 literal");
		out->host_ipv6 = true;
	} else {
		out->host = rd_while(&r, is_regname);
	}
	c = rd_peek(&r);
	if (c >= 0x80)
		return target_fail(err, GW_R_NON_ASCII_HOST,
				   "non-ASCII byte in host");
	if (c >= 0 && c != ':')
		return target_fail(err, GW_R_BAD_HOST, "bad byte in host");
	if (out->host.len == 0)
		return target_fail(err, GW_R_BAD_HOST, "empty host");
	if (c == ':') {
		struct gw_h1_span d;
		unsigned port = 0;

		rd_get(&r);
		d = rd_while(&r, is_digit);
		if (!rd_end(&r) || d.len == 0 || d.len > 5)
			return target_fail(err, GW_R_BAD_PORT, "bad port");
		for (size_t i = 0; i < d.len; i++)
			port = port * 10 + (unsigned)(d.p[i] - '0');
		if (port == 0 || port > 65535)
			return target_fail(err, GW_R_BAD_PORT,
					   "port out of range");
		out->port = (uint16_t)port;
		out->port_explicit = true;
	} else if (port_required) {
		return target_fail(err, GW_R_BAD_PORT,
				   "CONNECT target needs a port");
	}
	return 0;
}

static bool is_path_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '#' && c != '?';
}

static bool is_query_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '#';
}

/* path-abempty [ "?" query ] from r to its end; path defaults to "/". */
static int parse_path_query(struct h1_rd *r, struct gw_h1_target *out,
			    struct gw_h1_error *err)
{
	int c;

	out->path = rd_while(r, is_path_byte);
	if (out->path.len == 0) {
		out->path.p = "/";
		out->path.len = 1;
	}
	if (rd_peek(r) == '?') {
		rd_get(r);
		out->query = rd_while(r, is_query_byte);
		out->has_query = true;
	}
	c = rd_peek(r);
	if (c == '#')
		return target_fail(err, GW_R_BAD_REQUEST, "fragment in target");
	if (c >= 0)
		return target_fail(err, GW_R_BAD_REQUEST,
				   "bad byte in request-target");
	return 0;
}

int gw_h1_target_parse(const char *s, size_t len, enum gw_h1_method m,
		       struct gw_h1_target *out, struct gw_h1_error *err)
{
	struct h1_rd r = rd_make(s, len);
	size_t alen;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return target_fail(err, GW_R_BAD_REQUEST, "empty target");
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
			return target_fail(err, GW_R_BAD_REQUEST,
					   "space or control in target");

	if (m == GW_H1_M_CONNECT) {
		out->form = GW_H1_TARGET_AUTHORITY;
		return parse_authority(s, len, true, out, err);
	}
	if (len == 1 && s[0] == '*') {
		if (m != GW_H1_M_OPTIONS)
			return target_fail(err, GW_R_BAD_REQUEST,
					   "* target is for OPTIONS only");
		out->form = GW_H1_TARGET_ASTERISK;
		return 0;
	}
	if (s[0] == '/') {
		out->form = GW_H1_TARGET_ORIGIN;
		return parse_path_query(&r, out, err);
	}

	out->form = GW_H1_TARGET_ABSOLUTE;
	{
		struct gw_h1_span scheme = rd_while(&r, is_tchar);

		/* tchar covers the scheme alphabet; ':' ends it */
		if (!rd_lit(&r, "://"))
			return target_fail(err, GW_R_BAD_REQUEST,
					   "bad request-target");
		if (span_ieq(scheme, "http")) {
			out->scheme = GW_H1_SCHEME_HTTP;
			out->port = 80;
		} else if (span_ieq(scheme, "https")) {
			out->scheme = GW_H1_SCHEME_HTTPS;
			out->port = 443;
		} else {
			return target_fail(err, GW_R_UNSUPPORTED,
					   "unsupported URL scheme");
		}
	}
	for (alen = 0; r.pos + alen < len; alen++) {
		char c = s[r.pos + alen];

		if (c == '/' || c == '?' || c == '#')
			break;
	}
	rc = parse_authority(s + r.pos, alen, false, out, err);
	if (rc < 0)
		return rc;
	r.pos += alen;
	if (rd_peek(&r) == '#')
		return target_fail(err, GW_R_BAD_REQUEST, "fragment in target");
	return parse_path_query(&r, out, err);
}

/* ---- body ----------------------------------------------------------- */

static const char *const body_state_names[] = {
#define GW_H1_BODY_STATE_NAME(id, name) [GW_H1_BS_##id] = name,
	GW_H1_BODY_STATES(GW_H1_BODY_STATE_NAME)
#undef GW_H1_BODY_STATE_NAME
};

const char *gw_h1_body_state_name(enum gw_h1_body_state s)
{
	if ((unsigned)s >= GW_H1_BS__COUNT)
		return "?";
	return body_state_names[s];
}

/* The one place the decoder changes state; a leaf does not log, so a
 * trace hook would go here. */
static void body_set_state(struct gw_h1_body *b, enum gw_h1_body_state s)
{
	b->state = s;
}

static enum gw_h1_body_state body_after_size(const struct gw_h1_body *b)
{
	return b->chunk_size == 0 ? GW_H1_BS_TRAILER : GW_H1_BS_DATA;
}

void gw_h1_body_init(struct gw_h1_body *b, enum gw_h1_body_kind kind,
		     uint64_t content_length, enum gw_h1_body_mode mode)
{
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->mode = mode;
	switch (kind) {
	case GW_H1_BODY_LENGTH:
		b->remaining = content_length;
		body_set_state(b, content_length ? GW_H1_BS_DATA
						 : GW_H1_BS_DONE);
		break;
	case GW_H1_BODY_CHUNKED:
		body_set_state(b, GW_H1_BS_SIZE);
		break;
	case GW_H1_BODY_UNTIL_CLOSE:
		body_set_state(b, GW_H1_BS_UNTIL_CLOSE);
		break;
	default:
		body_set_state(b, GW_H1_BS_DONE);
		break;
	}
}

static const char *body_fail(struct gw_h1_body *b, const char *msg)
{
	b->err.reason = GW_R_BAD_REQUEST;
	b->err.msg = msg;
	body_set_state(b, GW_H1_BS_ERROR);
	return msg;
}

/* Steps the chunked framing machine over one byte that is not payload.
 * Returns NULL, or the error message (state already ERROR). */
static const char *chunk_byte(struct gw_h1_body *b, unsigned char c)
{
	int h;

	switch (b->state) {
	case GW_H1_BS_SIZE:
		h = hex_value(c);
		if (h < 0)
			return body_fail(b, c == '\r' || c == '\n' || c == ';'
						    ? "empty chunk size"
						    : "bad chunk size");
		b->chunk_size = (uint64_t)h;
		b->hex_digits = 1;
		b->line_len = 1;
		body_set_state(b, GW_H1_BS_SIZE_DIGITS);
		return NULL;
	case GW_H1_BS_SIZE_DIGITS:
	case GW_H1_BS_SIZE_WS:
	case GW_H1_BS_EXT:
		if (++b->line_len > GW_H1_MAX_CHUNK_LINE)
			return body_fail(b, "chunk line too long");
		if (c == '\n')
			return body_fail(b, "bare LF in chunk line");
		if (b->state == GW_H1_BS_SIZE_WS && c != ';' && !is_ows(c))
			return body_fail(b, "whitespace after chunk size");
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_SIZE_LF);
			return NULL;
		}
		if (b->state == GW_H1_BS_EXT) {
			if (!is_field_byte(c))
				return body_fail(
					b, "control byte in chunk extension");
			return NULL;
		}
		if (c == ';') {
			body_set_state(b, GW_H1_BS_EXT);
			return NULL;
		}
		if (is_ows(c)) {
			body_set_state(b, GW_H1_BS_SIZE_WS);
			return NULL;
		}
		h = hex_value(c);
		if (h < 0)
			return body_fail(b, "bad chunk size");
		if (++b->hex_digits > 16)
			return body_fail(b, "chunk size has too many digits");
		if (b->chunk_size > ((uint64_t)INT64_MAX - (uint64_t)h) >> 4)
			return body_fail(b, "chunk size too large");
		b->chunk_size = b->chunk_size << 4 | (uint64_t)h;
		return NULL;
	case GW_H1_BS_SIZE_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in chunk line");
		b->remaining = b->chunk_size;
		body_set_state(b, body_after_size(b));
		return NULL;
	case GW_H1_BS_DATA_CR:
		if (c != '\r')
			return body_fail(b, "missing CRLF after chunk data");
		body_set_state(b, GW_H1_BS_DATA_LF);
		return NULL;
	case GW_H1_BS_DATA_LF:
		if (c != '\n')
			return body_fail(b, "missing CRLF after chunk data");
		body_set_state(b, GW_H1_BS_SIZE);
		return NULL;
	default:
		break;
	}

	/* trailer section: field lines like a head's, then CRLF */
	if (++b->trailer_bytes > GW_H1_MAX_TRAILER_BYTES)
		return body_fail(b, "trailer section too large");
	switch (b->state) {
	case GW_H1_BS_TRAILER:
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_FINAL_LF);
			return NULL;
		}
		if (c == '\n')
			return body_fail(b, "bare LF in trailer");
		if (is_ows(c))
			return body_fail(b, "obs-fold");
		if (c == ':')
			return body_fail(b, "empty header name");
		if (!is_tchar(c))
			return body_fail(b, "invalid byte in header name");
		if (++b->ntrailers > GW_H1_MAX_HEADERS)
			return body_fail(b, "too many trailer fields");
		body_set_state(b, GW_H1_BS_TRAILER_NAME);
		return NULL;
	case GW_H1_BS_TRAILER_NAME:
		if (c == ':') {
			body_set_state(b, GW_H1_BS_TRAILER_VALUE);
			return NULL;
		}
		if (is_ows(c))
			return body_fail(
				b, "whitespace between header name and colon");
		if (c == '\r' || c == '\n')
			return body_fail(b, "header line without colon");
		if (!is_tchar(c))
			return body_fail(b, "invalid byte in header name");
		return NULL;
	case GW_H1_BS_TRAILER_VALUE:
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_TRAILER_LF);
			return NULL;
		}
		if (c == '\n')
			return body_fail(b, "bare LF in trailer");
		if (!is_field_byte(c))
			return body_fail(b, "control byte in header value");
		return NULL;
	case GW_H1_BS_TRAILER_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in trailer");
		body_set_state(b, GW_H1_BS_TRAILER);
		return NULL;
	case GW_H1_BS_FINAL_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in trailer");
		body_set_state(b, GW_H1_BS_DONE);
		return NULL;
	default:
		return body_fail(b, "body decoder in a bad state");
	}
}

enum gw_h1_result gw_h1_body_feed(struct gw_h1_body *b, const char *in,
				  size_t len, size_t *consumed,
				  struct gw_h1_span *data)
{
	struct h1_rd r = rd_make(in, len);
	bool raw = b->mode == GW_H1_RAW;

	data->p = in;
	data->len = 0;
	*consumed = 0;
	if (b->state == GW_H1_BS_ERROR)
		return GW_H1_ERROR;

	while (!rd_end(&r) && b->state != GW_H1_BS_DONE) {
		if (b->state == GW_H1_BS_UNTIL_CLOSE ||
		    b->state == GW_H1_BS_DATA) {
			size_t avail = r.len - r.pos;
			size_t n = avail;

			if (b->state == GW_H1_BS_DATA && b->remaining < avail)
				n = (size_t)b->remaining;
			if (!raw) {
				data->p = in + r.pos;
				data->len = n;
			}
			r.pos += n;
			b->payload += n;
			if (b->state == GW_H1_BS_DATA) {
				b->remaining -= n;
				if (b->remaining == 0)
					body_set_state(
						b, b->kind == GW_H1_BODY_LENGTH
							   ? GW_H1_BS_DONE
							   : GW_H1_BS_DATA_CR);
			}
			if (!raw)
				break;  /* one payload run per call */
			continue;
		}
		if (chunk_byte(b, (unsigned char)rd_peek(&r)) != NULL) {
			*consumed = r.pos;
			data->len = 0;
			return GW_H1_ERROR;
		}
		rd_get(&r);
	}
	*consumed = r.pos;
	if (raw)
		data->len = r.pos;
	return b->state == GW_H1_BS_DONE ? GW_H1_DONE : GW_H1_AGAIN;
}

enum gw_h1_result gw_h1_body_eof(struct gw_h1_body *b)
{
	if (b->state == GW_H1_BS_UNTIL_CLOSE)
		body_set_state(b, GW_H1_BS_DONE);
	if (b->state == GW_H1_BS_DONE)
		return GW_H1_DONE;
	if (b->state != GW_H1_BS_ERROR)
		body_fail(b, "truncated body");
	return GW_H1_ERROR;
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
	for (size_t i = 0; i < s.len; i++)
		if (!is_field_byte((unsigned char)s.p[i]))
			return false;
	return true;
}

void gw_h1_write_request_line(struct gw_h1_writer *w, struct gw_h1_span method,
			      struct gw_h1_span target, unsigned version_minor)
{
	bool ok = span_is_token(method) && target.len > 0 &&
		  version_minor <= 1;

	for (size_t i = 0; ok && i < target.len; i++)
		ok = (unsigned char)target.p[i] > 0x20 &&
		     (unsigned char)target.p[i] < 0x7f;
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
	w_check(w, span_is_token(name) && span_is_field_value(value));
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

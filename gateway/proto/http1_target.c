/* http1_target.c: request-target classification (RFC 9112 3.2): origin,
 * absolute (http and https only), authority (CONNECT) and asterisk
 * (OPTIONS) forms. Syntax only; see http1.h.
 */
#include <errno.h>

#include "http1-int.h"

/* ---- request-target ------------------------------------------------- */

static int target_fail(struct gw_h1_error *err, enum gw_reason r,
		       const char *msg)
{
	err->reason = r;
	err->msg = msg;
	return -EINVAL;
}

/* reg-name / IPv4 bytes: unreserved, pct-encoded, sub-delims */
static const struct gw_rd_class regname = { .in = {
	['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1,
	['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['%'] = 1, ['!'] = 1,
	['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
	['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1,
} };

static const struct gw_rd_class v6char = { .in = {
	['0' ... '9'] = 1, ['a' ... 'f'] = 1, ['A' ... 'F'] = 1,
	[':'] = 1, ['.'] = 1,
} };

/* RFC 3986 3.3, 3.4: path = *( pchar / "/" ), query = *( pchar / "/" /
 * "?" ), pchar = unreserved / pct-encoded / sub-delims / ":" / "@". What
 * else a client sends raw (", <, >, \, ^, `, {, |, }, [, ]) is left for
 * each hop to escape or not, and so to read differently. */
static const struct gw_rd_class path_byte = { .in = {
	['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1,
	['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['%'] = 1, ['!'] = 1,
	['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
	['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['@'] = 1,
	['/'] = 1,
} };
static const struct gw_rd_class query_byte = { .in = {
	['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1,
	['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['%'] = 1, ['!'] = 1,
	['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
	['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['@'] = 1,
	['/'] = 1, ['?'] = 1,
} };

/* what ends the authority of an absolute-form target */
static const struct gw_rd_class authority_end = { .in = {
	['/'] = 1, ['?'] = 1, ['#'] = 1,
} };

/* SP, controls and DEL: never in a target */
static const struct gw_rd_class target_bad = { .in = {
	[0x00 ... 0x20] = 1, [0x7f] = 1,
} };

/* host [ ":" port ] in a; port_required for authority-form. */
static int parse_authority(struct gw_rd_span a, bool port_required,
			   struct gw_h1_target *out, struct gw_h1_error *err)
{
	struct gw_rd r;
	int c;

	if (a.len && memchr(a.p, '@', a.len))
		return target_fail(err, GW_R_USERINFO, "userinfo in URL");
	gw_rd_init(&r, a.p, a.len);
	if (gw_rd_peek(&r) == '[') {
		(void)gw_rd_getc(&r);
		out->host = h1_span(gw_rd_while(&r, &v6char));
		if (gw_rd_getc(&r) != ']' || out->host.len < 2)
			return target_fail(err, GW_R_BAD_HOST,
					   "bad IPv6 literal");
		out->host_ipv6 = true;
	} else {
		out->host = h1_span(gw_rd_while(&r, &regname));
	}
	c = gw_rd_peek(&r);
	if (c >= 0x80)
		return target_fail(err, GW_R_NON_ASCII_HOST,
				   "non-ASCII byte in host");
	if (c >= 0 && c != ':')
		return target_fail(err, GW_R_BAD_HOST, "bad byte in host");
	if (out->host.len == 0)
		return target_fail(err, GW_R_BAD_HOST, "empty host");
	if (c == ':') {
		struct gw_rd_span digits;
		struct gw_rd d;
		unsigned port = 0;

		(void)gw_rd_getc(&r);
		digits = gw_rd_while(&r, &gw_h1_digit);
		if (!gw_rd_empty(&r) || digits.len == 0 || digits.len > 5)
			return target_fail(err, GW_R_BAD_PORT, "bad port");
		gw_rd_init(&d, digits.p, digits.len);
		while ((c = gw_rd_getc(&d)) >= 0)
			port = port * 10 + (unsigned)(c - '0');
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

/* Every '%' in s starts pct-encoded = "%" HEXDIG HEXDIG: a lone one is
 * decoded by some hops and passed by others. */
static bool pct_ok(struct gw_rd_span s)
{
	struct gw_rd r;

	gw_rd_init(&r, s.p, s.len);
	for (;;) {
		(void)gw_rd_until(&r, '%', SIZE_MAX);
		if (gw_rd_getc(&r) < 0)
			return true;
		if (h1_hex_value((unsigned char)gw_rd_getc(&r)) < 0 ||
		    h1_hex_value((unsigned char)gw_rd_getc(&r)) < 0)
			return false;
	}
}

/* path-abempty [ "?" query ] from r to its end; path defaults to "/". */
static int parse_path_query(struct gw_rd *r, struct gw_h1_target *out,
			    struct gw_h1_error *err)
{
	struct gw_rd_span path, query = { NULL, 0 };
	int c;

	path = gw_rd_while(r, &path_byte);
	out->path = h1_span(path);
	if (out->path.len == 0) {
		out->path.p = "/";
		out->path.len = 1;
	}
	if (gw_rd_peek(r) == '?') {
		(void)gw_rd_getc(r);
		query = gw_rd_while(r, &query_byte);
		out->query = h1_span(query);
		out->has_query = true;
	}
	c = gw_rd_peek(r);
	if (c == '#')
		return target_fail(err, GW_R_BAD_REQUEST, "fragment in target");
	if (c >= 0)
		return target_fail(err, GW_R_BAD_REQUEST,
				   "bad byte in request-target");
	if (!pct_ok(path) || !pct_ok(query))
		return target_fail(err, GW_R_BAD_REQUEST,
				   "bad percent-encoding in request-target");
	return 0;
}

int gw_h1_target_parse(const char *s, size_t len, enum gw_h1_method m,
		       struct gw_h1_target *out, struct gw_h1_error *err)
{
	struct gw_rd r;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return target_fail(err, GW_R_BAD_REQUEST, "empty target");
	gw_rd_init(&r, s, len);
	if (!gw_rd_span_none(h1_rd_span((struct gw_h1_span){ s, len }),
			     &target_bad))
		return target_fail(err, GW_R_BAD_REQUEST,
				   "space or control in target");

	if (m == GW_H1_M_CONNECT) {
		out->form = GW_H1_TARGET_AUTHORITY;
		return parse_authority(gw_rd_rest(&r), true, out, err);
	}
	if (len == 1 && gw_rd_peek(&r) == '*') {
		if (m != GW_H1_M_OPTIONS)
			return target_fail(err, GW_R_BAD_REQUEST,
					   "* target is for OPTIONS only");
		out->form = GW_H1_TARGET_ASTERISK;
		return 0;
	}
	if (gw_rd_peek(&r) == '/') {
		out->form = GW_H1_TARGET_ORIGIN;
		return parse_path_query(&r, out, err);
	}

	out->form = GW_H1_TARGET_ABSOLUTE;
	{
		struct gw_h1_span scheme = h1_span(gw_rd_while(&r, &gw_h1_tchar));

		/* tchar covers the scheme alphabet; ':' ends it */
		if (!gw_rd_match(&r, "://", 3))
			return target_fail(err, GW_R_BAD_REQUEST,
					   "bad request-target");
		if (h1_span_ieq(scheme, "http")) {
			out->scheme = GW_H1_SCHEME_HTTP;
			out->port = 80;
		} else if (h1_span_ieq(scheme, "https")) {
			out->scheme = GW_H1_SCHEME_HTTPS;
			out->port = 443;
		} else {
			return target_fail(err, GW_R_UNSUPPORTED,
					   "unsupported URL scheme");
		}
	}
	rc = parse_authority(gw_rd_until_any(&r, &authority_end), false, out,
			     err);
	if (rc < 0)
		return rc;
	if (gw_rd_peek(&r) == '#')
		return target_fail(err, GW_R_BAD_REQUEST, "fragment in target");
	return parse_path_query(&r, out, err);
}

/* bytes past ASCII */
static const struct gw_rd_class high_byte = { .in = { [0x80 ... 0xff] = 1 } };

int h1_host_value_check(struct gw_h1_span v, struct gw_h1_error *err)
{
	struct gw_h1_target t;

	if (v.len == 0)
		return 0;       /* RFC 9112 3.2: a target without authority */
	if (memchr(v.p, '@', v.len))
		return target_fail(err, GW_R_USERINFO, "userinfo in Host");
	if (!gw_rd_span_none(h1_rd_span(v), &high_byte))
		return target_fail(err, GW_R_NON_ASCII_HOST,
				   "non-ASCII byte in Host");
	memset(&t, 0, sizeof(t));
	if (parse_authority(h1_rd_span(v), false, &t, err) < 0)
		return target_fail(err, err->reason, "bad Host value");
	return 0;
}

void gw_h1_target_rebase(struct gw_h1_target *t, const char *from, size_t n,
			 const char *to)
{
	h1_span_move(&t->host, from, n, to);
	h1_span_move(&t->path, from, n, to);
	h1_span_move(&t->query, from, n, to);
}

/* test_http1.c: the HTTP/1.1 parser. Bad inputs first (one test per
 * refusal, smuggling cases among them), then good messages, each also fed
 * split at every offset and byte by byte. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http1.h"

#define MAX_HEAD 8192

/* ---- helpers -------------------------------------------------------- */

static enum gw_h1_result parse_n(enum gw_h1_kind k, enum gw_h1_method rm,
				 const char *s, size_t n, struct gw_h1_head *h)
{
	struct gw_h1_parser p;

	gw_h1_parser_init(&p, k, MAX_HEAD);
	gw_h1_parser_set_request_method(&p, rm);
	return gw_h1_head_parse(&p, s, n, h);
}

static enum gw_h1_result parse_req(const char *s, struct gw_h1_head *h)
{
	return parse_n(GW_H1_REQUEST, GW_H1_M_OTHER, s, strlen(s), h);
}

static enum gw_h1_result parse_resp(const char *s, enum gw_h1_method rm,
				    struct gw_h1_head *h)
{
	return parse_n(GW_H1_RESPONSE, rm, s, strlen(s), h);
}

static void check_error(enum gw_h1_result rc, const struct gw_h1_head *h,
			enum gw_reason reason, const char *msg)
{
	assert_int_equal(rc, GW_H1_ERROR);
	assert_int_equal(h->err.reason, reason);
	assert_non_null(h->err.msg);
	assert_string_equal(h->err.msg, msg);
}

static void bad_req_r(const char *s, enum gw_reason r, const char *msg)
{
	struct gw_h1_head h;
	size_t n = strlen(s);

	check_error(parse_req(s, &h), &h, r, msg);
	/* the same refusal when the bytes arrive one at a time */
	{
		struct gw_h1_parser p;
		enum gw_h1_result rc = GW_H1_AGAIN;

		gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
		for (size_t k = 1; k <= n && rc == GW_H1_AGAIN; k++)
			rc = gw_h1_head_parse(&p, s, k, &h);
		check_error(rc, &h, r, msg);
	}
}

static void bad_req(const char *s, const char *msg)
{
	bad_req_r(s, GW_R_BAD_REQUEST, msg);
}

static void bad_resp(const char *s, enum gw_h1_method rm, const char *msg)
{
	struct gw_h1_head h;

	check_error(parse_resp(s, rm, &h), &h, GW_R_BAD_REQUEST, msg);
}

static bool span_is(struct gw_h1_span s, const char *lit)
{
	return s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

#define assert_span(s, lit)                                                  \
	do {                                                                 \
		if (!span_is((s), (lit)))                                    \
			fail_msg("span \"%.*s\" != \"%s\"", (int)(s).len,    \
				 (s).p, (lit));                              \
	} while (0)

/* ---- bad request heads: smuggling and framing ----------------------- */

#define BAD_REQ(name, input, msg)                                            \
	static void name(void **state)                                       \
	{                                                                    \
		(void)state;                                                 \
		bad_req(input, msg);                                         \
	}

#define HOST "Host: example.com\r\n"

BAD_REQ(test_bad_cl_and_te,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5\r\n"
	"Transfer-Encoding: chunked\r\n\r\n",
	"both Content-Length and Transfer-Encoding")
BAD_REQ(test_bad_te_and_cl,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
	"Content-Length: 0\r\n\r\n",
	"both Content-Length and Transfer-Encoding")
BAD_REQ(test_bad_cl_repeated_equal,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5\r\n"
	"Content-Length: 5\r\n\r\n",
	"repeated Content-Length")
BAD_REQ(test_bad_cl_repeated_differ,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5\r\n"
	"content-length: 6\r\n\r\n",
	"repeated Content-Length")
BAD_REQ(test_bad_cl_list,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5, 5\r\n\r\n",
	"Content-Length list")
BAD_REQ(test_bad_cl_non_numeric,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5a\r\n\r\n",
	"non-numeric Content-Length")
BAD_REQ(test_bad_cl_hex,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 0x5\r\n\r\n",
	"non-numeric Content-Length")
BAD_REQ(test_bad_cl_inner_space,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 1 2\r\n\r\n",
	"non-numeric Content-Length")
BAD_REQ(test_bad_cl_plus,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: +5\r\n\r\n",
	"signed Content-Length")
BAD_REQ(test_bad_cl_minus,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: -1\r\n\r\n",
	"signed Content-Length")
BAD_REQ(test_bad_cl_empty,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: \r\n\r\n",
	"empty Content-Length")
BAD_REQ(test_bad_cl_2_63,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 9223372036854775808\r\n\r\n",
	"Content-Length too large")
BAD_REQ(test_bad_cl_huge,
	"POST / HTTP/1.1\r\n" HOST
	"Content-Length: 99999999999999999999999999\r\n\r\n",
	"Content-Length too large")
BAD_REQ(test_bad_te_gzip_chunked,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: gzip, chunked\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_chunked_gzip,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked, gzip\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_identity,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: identity\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_chunked_twice_list,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked, chunked\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_chunked_two_fields,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
	"Transfer-Encoding: chunked\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_chunked_lookalike,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunkedx\r\n\r\n",
	"Transfer-Encoding other than chunked")
BAD_REQ(test_bad_te_trailing_comma,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked,\r\n\r\n",
	"empty Transfer-Encoding element")
BAD_REQ(test_bad_te_empty,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: \r\n\r\n",
	"empty Transfer-Encoding element")
BAD_REQ(test_bad_te_params,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked;q=1\r\n\r\n",
	"Transfer-Encoding parameters")
BAD_REQ(test_bad_te_quoted,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: \"chunked\"\r\n\r\n",
	"bad Transfer-Encoding")
BAD_REQ(test_bad_te_http10,
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	"Transfer-Encoding in HTTP/1.0")
BAD_REQ(test_bad_obs_fold,
	"GET / HTTP/1.1\r\n" HOST "X-A: b\r\n c\r\n\r\n", "obs-fold")
BAD_REQ(test_bad_obs_fold_tab,
	"GET / HTTP/1.1\r\n" HOST "X-A: b\r\n\tc\r\n\r\n", "obs-fold")
BAD_REQ(test_bad_ws_after_start_line,
	"GET / HTTP/1.1\r\n " HOST "\r\n", "obs-fold")
BAD_REQ(test_bad_obs_fold_te,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding:\r\n chunked\r\n\r\n",
	"obs-fold")
BAD_REQ(test_bad_lf_request_line,
	"GET / HTTP/1.1\n" HOST "\r\n", "bare LF in head")
BAD_REQ(test_bad_lf_header_line,
	"GET / HTTP/1.1\r\n" "Host: example.com\n\r\n", "bare LF in head")
BAD_REQ(test_bad_lf_end_of_head,
	"GET / HTTP/1.1\r\n" HOST "\n", "bare LF in head")
BAD_REQ(test_bad_lf_first_byte, "\nGET / HTTP/1.1\r\n" HOST "\r\n",
	"bare LF in head")
BAD_REQ(test_bad_lf_in_value,
	"GET / HTTP/1.1\r\n" HOST "X: a\nb\r\n\r\n", "bare LF in head")
BAD_REQ(test_bad_cr_in_value,
	"GET / HTTP/1.1\r\n" HOST "X: a\rb\r\n\r\n", "bare CR in head")
BAD_REQ(test_bad_cr_end_of_head,
	"GET / HTTP/1.1\r\n" HOST "\r\r\n", "bare CR in head")
BAD_REQ(test_bad_cr_request_line,
	"GET /\r HTTP/1.1\r\n" HOST "\r\n", "bare CR in head")
BAD_REQ(test_bad_ctrl_in_value,
	"GET / HTTP/1.1\r\n" HOST "X: a\x01" "b\r\n\r\n",
	"control byte in header value")
BAD_REQ(test_bad_del_in_value,
	"GET / HTTP/1.1\r\n" HOST "X: a\x7f\r\n\r\n",
	"control byte in header value")
BAD_REQ(test_bad_esc_in_value,
	"GET / HTTP/1.1\r\n" HOST "X: \x1b[0m\r\n\r\n",
	"control byte in header value")
BAD_REQ(test_bad_ctrl_in_name,
	"GET / HTTP/1.1\r\n" HOST "X\x01: a\r\n\r\n",
	"invalid byte in header name")
BAD_REQ(test_bad_space_before_colon,
	"GET / HTTP/1.1\r\n" HOST "Content-Length : 5\r\n\r\n",
	"whitespace between header name and colon")
BAD_REQ(test_bad_tab_before_colon,
	"GET / HTTP/1.1\r\n" HOST "Transfer-Encoding\t: chunked\r\n\r\n",
	"whitespace between header name and colon")
BAD_REQ(test_bad_empty_name,
	"GET / HTTP/1.1\r\n" HOST ": a\r\n\r\n", "empty header name")
BAD_REQ(test_bad_name_paren,
	"GET / HTTP/1.1\r\n" HOST "X(a): b\r\n\r\n",
	"invalid byte in header name")
BAD_REQ(test_bad_name_slash,
	"GET / HTTP/1.1\r\n" HOST "X/y: b\r\n\r\n",
	"invalid byte in header name")
BAD_REQ(test_bad_name_obs_text,
	"GET / HTTP/1.1\r\n" HOST "X\xc3\xa9: b\r\n\r\n",
	"invalid byte in header name")
BAD_REQ(test_bad_no_colon,
	"GET / HTTP/1.1\r\n" HOST "Foo\r\n\r\n", "header line without colon")
BAD_REQ(test_bad_method_not_token,
	"G(T / HTTP/1.1\r\n" HOST "\r\n", "method is not a token")
BAD_REQ(test_bad_method_leading_space,
	" GET / HTTP/1.1\r\n" HOST "\r\n", "method is not a token")
BAD_REQ(test_bad_method_tab,
	"GET\t/ HTTP/1.1\r\n" HOST "\r\n", "method is not a token")
BAD_REQ(test_bad_line_double_space,
	"GET  / HTTP/1.1\r\n" HOST "\r\n",
	"request line must have two single spaces")
BAD_REQ(test_bad_line_space_in_target,
	"GET /a b HTTP/1.1\r\n" HOST "\r\n",
	"request line must have two single spaces")
BAD_REQ(test_bad_line_trailing_space,
	"GET / HTTP/1.1 \r\n" HOST "\r\n",
	"request line must have two single spaces")
BAD_REQ(test_bad_line_one_space,
	"GET /\r\n" HOST "\r\n", "request line must have two single spaces")
BAD_REQ(test_bad_line_method_only,
	"GET\r\n" HOST "\r\n", "request line must have two single spaces")
BAD_REQ(test_bad_target_ctrl,
	"GET /a\x01" "b HTTP/1.1\r\n" HOST "\r\n",
	"control byte in request-target")
BAD_REQ(test_bad_target_tab,
	"GET /a\tb HTTP/1.1\r\n" HOST "\r\n", "control byte in request-target")
BAD_REQ(test_bad_target_non_ascii,
	"GET /\xc3\xa9 HTTP/1.1\r\n" HOST "\r\n",
	"non-ASCII byte in request-target")
BAD_REQ(test_bad_version_12,
	"GET / HTTP/1.2\r\n" HOST "\r\n", "unsupported HTTP version")
BAD_REQ(test_bad_version_20,
	"GET / HTTP/2.0\r\n" HOST "\r\n", "unsupported HTTP version")
BAD_REQ(test_bad_version_lower,
	"GET / http/1.1\r\n" HOST "\r\n", "unsupported HTTP version")
BAD_REQ(test_bad_version_long,
	"GET / HTTP/1.10\r\n" HOST "\r\n", "unsupported HTTP version")
BAD_REQ(test_bad_missing_host, "GET / HTTP/1.1\r\n\r\n", "missing Host")
BAD_REQ(test_bad_two_hosts,
	"GET / HTTP/1.1\r\n" HOST "host: evil.example\r\n\r\n", "repeated Host")
BAD_REQ(test_bad_two_hosts_http10,
	"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", "repeated Host")
BAD_REQ(test_bad_host_space,
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "bad Host value")
BAD_REQ(test_bad_host_list,
	"GET / HTTP/1.1\r\nHost: a,b\r\n\r\n", "bad Host value")
BAD_REQ(test_bad_many_empty_lines,
	"\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\n" HOST "\r\n",
	"too many empty lines before the start line")
BAD_REQ(test_bad_connection_token,
	"GET / HTTP/1.1\r\n" HOST "Connection: close, x y\r\n\r\n",
	"bad Connection token")

/* ---- bad request heads: what hops would read differently (issue 20) -- */

#define CONN_NAMES "Connection names a framing or routing field"

BAD_REQ(test_bad_conn_names_cl,
	"POST / HTTP/1.1\r\n" HOST "Content-Length: 5\r\n"
	"Connection: close, Content-Length\r\n\r\nhello", CONN_NAMES)
BAD_REQ(test_bad_conn_names_te,
	"POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
	"Connection: transfer-encoding\r\n\r\n0\r\n\r\n", CONN_NAMES)
BAD_REQ(test_bad_conn_names_host,
	"GET / HTTP/1.1\r\n" HOST "Connection: keep-alive\r\nConnection: HOST\r\n\r\n",
	CONN_NAMES)

/* Routing fields too, and in a response (the same rule, either way). */
static void test_bad_conn_names_routing(void **state)
{
	static const char *const names[] = { "Max-Forwards", "via", "Forwarded" };
	char buf[256];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n" HOST "Connection: %s\r\n\r\n",
			 names[i]);
		bad_req(buf, CONN_NAMES);
	}
	bad_resp("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Content-Length\r\n\r\nok",
		 0, CONN_NAMES);
}

/* A Host is host[:port]: no userinfo, no raw UTF-8, nothing else. */
static void test_bad_host_values(void **state)
{
	(void)state;
	bad_req_r("GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n", GW_R_USERINFO,
		  "userinfo in Host");
	bad_req_r("GET http://a.example/ HTTP/1.1\r\nHost: u:p@a.example:80\r\n\r\n",
		  GW_R_USERINFO, "userinfo in Host");
	bad_req_r("GET / HTTP/1.1\r\nHost: ex\xc3\xa4mple.com\r\n\r\n", GW_R_NON_ASCII_HOST,
		  "non-ASCII byte in Host");
	bad_req_r("GET / HTTP/1.1\r\nHost: a.example/x\r\n\r\n", GW_R_BAD_HOST,
		  "bad Host value");
	bad_req_r("GET / HTTP/1.1\r\nHost: a.example\\x\r\n\r\n", GW_R_BAD_HOST,
		  "bad Host value");
	bad_req_r("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", GW_R_BAD_HOST, "bad Host value");
	bad_req_r("GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n", GW_R_BAD_PORT,
		  "bad Host value");
	bad_req_r("GET / HTTP/1.1\r\nHost: a.example:8o\r\n\r\n", GW_R_BAD_PORT,
		  "bad Host value");
	bad_req_r("GET / HTTP/1.1\r\nHost: a.example:99999\r\n\r\n", GW_R_BAD_PORT,
		  "bad Host value");
}

BAD_REQ(test_bad_max_forwards_letters,
	"OPTIONS * HTTP/1.1\r\n" HOST "Max-Forwards: x1\r\n\r\n", "bad Max-Forwards")
BAD_REQ(test_bad_max_forwards_empty,
	"OPTIONS * HTTP/1.1\r\n" HOST "Max-Forwards:\r\n\r\n", "bad Max-Forwards")
BAD_REQ(test_bad_max_forwards_list,
	"OPTIONS * HTTP/1.1\r\n" HOST "Max-Forwards: 1, 0\r\n\r\n", "bad Max-Forwards")
BAD_REQ(test_bad_max_forwards_signed,
	"TRACE / HTTP/1.1\r\n" HOST "Max-Forwards: -1\r\n\r\n", "bad Max-Forwards")
BAD_REQ(test_bad_max_forwards_repeated,
	"OPTIONS * HTTP/1.1\r\n" HOST "Max-Forwards: 1\r\nmax-forwards: 0\r\n\r\n",
	"repeated Max-Forwards")
BAD_REQ(test_bad_connect_length,
	"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nContent-Length: 5\r\n\r\n"
	"hello", "CONNECT with a body")
BAD_REQ(test_bad_connect_chunked,
	"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n"
	"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "CONNECT with a body")

/* NUL bytes need an explicit length. */
static void test_bad_nul(void **state)
{
	static const char req1[] = "GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char req2[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
	static const char req3[] = "GET / HTTP/1.1\r\nHost: a\r\nX\0: b\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 O\0K\r\n\r\n";
	struct gw_h1_head h;

	(void)state;
	check_error(parse_n(GW_H1_REQUEST, 0, req1, sizeof(req1) - 1, &h), &h,
		    GW_R_BAD_REQUEST, "control byte in request-target");
	check_error(parse_n(GW_H1_REQUEST, 0, req2, sizeof(req2) - 1, &h), &h,
		    GW_R_BAD_REQUEST, "control byte in header value");
	check_error(parse_n(GW_H1_REQUEST, 0, req3, sizeof(req3) - 1, &h), &h,
		    GW_R_BAD_REQUEST, "invalid byte in header name");
	check_error(parse_n(GW_H1_RESPONSE, 0, resp, sizeof(resp) - 1, &h), &h,
		    GW_R_BAD_REQUEST, "control byte in reason phrase");
}

static void test_bad_too_many_conn_tokens(void **state)
{
	char buf[2048];
	int n;

	(void)state;
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n"
				       "Connection: ");
	for (int i = 0; i <= GW_H1_MAX_CONN_TOKENS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "t%d,", i);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n\r\n");
	bad_req(buf, "too many Connection tokens");
}

static void test_bad_head_too_large(void **state)
{
	const char *req = "GET / HTTP/1.1\r\nHost: example.com\r\n"
			  "X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	struct gw_h1_parser p;
	struct gw_h1_head h;
	size_t n = strlen(req);
	enum gw_h1_result rc = GW_H1_AGAIN;
	size_t k;

	(void)state;
	/* exactly the head's size is fine, one byte less is not */
	gw_h1_parser_init(&p, GW_H1_REQUEST, n);
	assert_int_equal(gw_h1_head_parse(&p, req, n, &h), GW_H1_DONE);
	gw_h1_parser_init(&p, GW_H1_REQUEST, n - 1);
	check_error(gw_h1_head_parse(&p, req, n, &h), &h,
		    GW_R_HEADER_TOO_LARGE, "head too large");

	/* byte by byte: refused as soon as the bound is reached */
	gw_h1_parser_init(&p, GW_H1_REQUEST, 32);
	for (k = 1; k <= n && rc == GW_H1_AGAIN; k++)
		rc = gw_h1_head_parse(&p, req, k, &h);
	check_error(rc, &h, GW_R_HEADER_TOO_LARGE, "head too large");
	assert_int_equal(k - 1, 32);

	/* a flood of bare-CRLF-free bytes never grows past the bound */
	{
		static char junk[100000];

		memset(junk, 'a', sizeof(junk));
		gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
		check_error(gw_h1_head_parse(&p, junk, sizeof(junk), &h), &h,
			    GW_R_HEADER_TOO_LARGE, "head too large");
	}
}

static void test_bad_too_many_headers(void **state)
{
	static char buf[8192];
	struct gw_h1_parser p;
	struct gw_h1_head h;
	int n;

	(void)state;
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 1; i <= GW_H1_MAX_HEADERS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "X%d: v\r\n", i);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	gw_h1_parser_init(&p, GW_H1_REQUEST, sizeof(buf));
	check_error(gw_h1_head_parse(&p, buf, strlen(buf), &h), &h,
		    GW_R_HEADER_TOO_LARGE, "too many header fields");

	/* exactly GW_H1_MAX_HEADERS is fine */
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 2; i <= GW_H1_MAX_HEADERS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "X%d: v\r\n", i);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	gw_h1_parser_init(&p, GW_H1_REQUEST, sizeof(buf));
	assert_int_equal(gw_h1_head_parse(&p, buf, strlen(buf), &h), GW_H1_DONE);
	assert_int_equal(h.nheaders, GW_H1_MAX_HEADERS);
}

/* A CR at the end of the input waits for its LF; a non-LF then fails. */
static void test_bad_cr_split(void **state)
{
	const char *req = "GET / HTTP/1.1\r\nHost: a\rX\r\n\r\n";
	struct gw_h1_parser p;
	struct gw_h1_head h;
	size_t cr = strlen("GET / HTTP/1.1\r\nHost: a");

	(void)state;
	gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
	assert_int_equal(gw_h1_head_parse(&p, req, cr + 1, &h), GW_H1_AGAIN);
	assert_int_equal(p.scanned, cr);
	check_error(gw_h1_head_parse(&p, req, cr + 2, &h), &h,
		    GW_R_BAD_REQUEST, "bare CR in head");
}

static void test_bad_parser_reuse(void **state)
{
	const char *req = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	struct gw_h1_parser p;
	struct gw_h1_head h;

	(void)state;
	gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
	assert_int_equal(gw_h1_head_parse(&p, req, strlen(req), &h), GW_H1_DONE);
	check_error(gw_h1_head_parse(&p, req, strlen(req), &h), &h,
		    GW_R_INTERNAL, "head parser used again without init");
}

/* ---- bad response heads --------------------------------------------- */

static void test_bad_responses(void **state)
{
	(void)state;
	bad_resp("HTTP/1.1 20 OK\r\n\r\n", 0, "status code must be three digits");
	bad_resp("HTTP/1.1 2000 OK\r\n\r\n", 0,
		 "status code must be three digits");
	bad_resp("HTTP/1.1 200OK\r\n\r\n", 0, "status code must be three digits");
	bad_resp("HTTP/1.1 2x0 OK\r\n\r\n", 0,
		 "status code must be three digits");
	bad_resp("HTTP/1.1 099 OK\r\n\r\n", 0, "status code out of range");
	bad_resp("HTTP/1.1 600 OK\r\n\r\n", 0, "status code out of range");
	bad_resp("HTTP/2 200 OK\r\n\r\n", 0,
		 "bad or unsupported HTTP version in status line");
	bad_resp("HTTP/1.1  200 OK\r\n\r\n", 0,
		 "status code must be three digits");
	bad_resp("HTTP/1.1 200 O\x01K\r\n\r\n", 0, "control byte in reason phrase");
	bad_resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n",
		 0, "both Content-Length and Transfer-Encoding");
	bad_resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
		 "Content-Length: 1\r\n\r\n",
		 0, "repeated Content-Length");
	bad_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		 0, "chunked is not the final transfer coding");
	bad_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n",
		 0, "chunked is not the final transfer coding");
	bad_resp("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0,
		 "Transfer-Encoding in HTTP/1.0");
	bad_resp("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 0, "obs-fold");
	/* framing is checked even where the status means no body */
	bad_resp("HTTP/1.1 204 No Content\r\nContent-Length: 1, 1\r\n\r\n", 0,
		 "Content-Length list");
}

/* ---- bad chunked bodies --------------------------------------------- */

struct body_run {
	enum gw_h1_result rc;
	size_t consumed;        /* total input consumed */
	char payload[16384];
	size_t npayload;
	char raw[16384];
	size_t nraw;
	struct gw_h1_error err;
};

/* Feeds in[0..len) in pieces cut at `cuts` (ascending offsets; 0-length
 * pieces allowed), looping on each piece as the API asks. */
static void body_feed_cuts(struct gw_h1_body *b, const char *in, size_t len,
			   const size_t *cuts, size_t ncuts,
			   struct body_run *out)
{
	size_t from = 0;

	memset(out, 0, sizeof(*out));
	out->rc = GW_H1_AGAIN;
	for (size_t c = 0; c <= ncuts && out->rc == GW_H1_AGAIN; c++) {
		size_t to = c < ncuts ? cuts[c] : len;
		size_t pos = from;

		do {
			struct gw_h1_span d;
			size_t used = 0;

			out->rc = gw_h1_body_feed(b, in + pos, to - pos, &used,
						  &d);
			assert_true(used <= to - pos);
			if (out->rc == GW_H1_ERROR) {
				assert_int_equal(d.len, 0);
				out->err = b->err;
				pos += used;
				break;
			}
			assert_true(d.len <= used);
			assert_true(d.len == 0 ||
				    (d.p >= in + pos &&
				     d.p + d.len <= in + pos + used));
			if (b->mode == GW_H1_DECODE) {
				assert_true(out->npayload + d.len <=
					    sizeof(out->payload));
				memcpy(out->payload + out->npayload, d.p, d.len);
				out->npayload += d.len;
			} else {
				assert_int_equal(d.len, used);
				assert_true(d.p == in + pos);
				assert_true(out->nraw + d.len <= sizeof(out->raw));
				memcpy(out->raw + out->nraw, d.p, d.len);
				out->nraw += d.len;
			}
			/* progress or a wait for more input, never a spin */
			assert_true(used > 0 || pos == to ||
				    out->rc != GW_H1_AGAIN);
			pos += used;
		} while (out->rc == GW_H1_AGAIN && pos < to);
		out->consumed = pos;
		from = to;
	}
}

static void body_once(enum gw_h1_body_kind kind, uint64_t cl,
		      enum gw_h1_body_mode mode, const char *in, size_t len,
		      struct body_run *out)
{
	struct gw_h1_body b;

	gw_h1_body_init(&b, kind, cl, mode);
	body_feed_cuts(&b, in, len, NULL, 0, out);
}

static void bad_chunked(const char *in, const char *msg)
{
	static struct body_run r;
	size_t len = strlen(in);

	for (int mode = 0; mode < 2; mode++) {
		struct gw_h1_body b;

		body_once(GW_H1_BODY_CHUNKED, 0, (enum gw_h1_body_mode)mode, in,
			  len, &r);
		assert_int_equal(r.rc, GW_H1_ERROR);
		assert_int_equal(r.err.reason, GW_R_BAD_REQUEST);
		assert_string_equal(r.err.msg, msg);
		/* the same refusal byte by byte */
		gw_h1_body_init(&b, GW_H1_BODY_CHUNKED, 0,
				(enum gw_h1_body_mode)mode);
		{
			static size_t cuts[16384];

			assert_true(len <= 16384);
			for (size_t i = 0; i < len; i++)
				cuts[i] = i + 1;
			body_feed_cuts(&b, in, len, cuts, len, &r);
		}
		assert_int_equal(r.rc, GW_H1_ERROR);
		assert_string_equal(b.err.msg, msg);
		/* errors stick */
		{
			struct gw_h1_span d;
			size_t used;

			assert_int_equal(gw_h1_body_feed(&b, "0\r\n\r\n", 5,
							 &used, &d),
					 GW_H1_ERROR);
			assert_int_equal(used, 0);
		}
	}
}

#define BAD_CHUNK(name, input, msg)                                          \
	static void name(void **state)                                       \
	{                                                                    \
		(void)state;                                                 \
		bad_chunked(input, msg);                                     \
	}

BAD_CHUNK(test_bad_chunk_empty_size, "\r\nhello\r\n0\r\n\r\n",
	  "empty chunk size")
BAD_CHUNK(test_bad_chunk_ext_no_size, ";a=b\r\n", "empty chunk size")
BAD_CHUNK(test_bad_chunk_non_hex, "g\r\n", "bad chunk size")
BAD_CHUNK(test_bad_chunk_non_hex_later, "5g\r\nhello\r\n", "bad chunk size")
BAD_CHUNK(test_bad_chunk_0x, "0x5\r\nhello\r\n", "bad chunk size")
BAD_CHUNK(test_bad_chunk_negative, "-5\r\n", "bad chunk size")
BAD_CHUNK(test_bad_chunk_leading_space, " 5\r\nhello\r\n", "bad chunk size")
BAD_CHUNK(test_bad_chunk_17_digits, "00000000000000005\r\nhello\r\n",
	  "chunk size has too many digits")
BAD_CHUNK(test_bad_chunk_2_63, "8000000000000000\r\n", "chunk size too large")
BAD_CHUNK(test_bad_chunk_2_64, "ffffffffffffffff\r\n", "chunk size too large")
BAD_CHUNK(test_bad_chunk_ws_then_crlf, "5 \r\nhello\r\n0\r\n\r\n",
	  "whitespace after chunk size")
BAD_CHUNK(test_bad_chunk_ws_in_size, "1 0\r\n", "whitespace after chunk size")
BAD_CHUNK(test_bad_chunk_size_lf, "5\nhello\r\n0\r\n\r\n",
	  "bare LF in chunk line")
BAD_CHUNK(test_bad_chunk_ext_lf, "5;a\nhello\r\n", "bare LF in chunk line")
BAD_CHUNK(test_bad_chunk_size_cr, "5\rhello\r\n", "bare CR in chunk line")
BAD_CHUNK(test_bad_chunk_ext_ctrl, "5;a=\x01\r\nhello\r\n",
	  "control byte in chunk extension")
BAD_CHUNK(test_bad_chunk_data_too_long, "5\r\nhelloX\r\n0\r\n\r\n",
	  "missing CRLF after chunk data")
BAD_CHUNK(test_bad_chunk_data_lf_only, "5\r\nhello\n0\r\n\r\n",
	  "missing CRLF after chunk data")
BAD_CHUNK(test_bad_chunk_data_cr_only, "5\r\nhello\r0\r\n\r\n",
	  "missing CRLF after chunk data")
BAD_CHUNK(test_bad_chunk_last_lf, "0\r\n\n", "bare LF in trailer")
BAD_CHUNK(test_bad_chunk_last_cr, "0\r\n\rX", "bare CR in trailer")
BAD_CHUNK(test_bad_trailer_obs_fold, "0\r\nX: a\r\n b\r\n\r\n", "obs-fold")
BAD_CHUNK(test_bad_trailer_lf, "0\r\nX: a\n\r\n", "bare LF in trailer")
BAD_CHUNK(test_bad_trailer_cr, "0\r\nX: a\rb\r\n\r\n", "bare CR in trailer")
BAD_CHUNK(test_bad_trailer_ws_colon, "0\r\nX : a\r\n\r\n",
	  "whitespace between header name and colon")
BAD_CHUNK(test_bad_trailer_empty_name, "0\r\n: a\r\n\r\n", "empty header name")
BAD_CHUNK(test_bad_trailer_bad_name, "0\r\nX(: a\r\n\r\n",
	  "invalid byte in header name")
BAD_CHUNK(test_bad_trailer_no_colon, "0\r\nXa\r\n\r\n",
	  "header line without colon")
BAD_CHUNK(test_bad_trailer_ctrl, "0\r\nX: a\x01\r\n\r\n",
	  "control byte in header value")

/* Trailers that frame, route, authenticate or forge an identity
 * (RFC 9110 6.5.1), in any case, refused wherever the input splits. */
static void test_bad_trailer_forbidden(void **state)
{
	static const char *const names[] = {
		"Content-Length", "transfer-encoding", "Trailer", "Content-Type",
		"Content-Encoding", "Host", "Connection", "TE", "Upgrade", "Max-Forwards",
		"Authorization", "Proxy-Authorization", "WWW-Authenticate", "Cookie",
		"Set-Cookie", "Forwarded", "X-Forwarded-For", "x-forwarded-host",
		"X-Real-IP", "X-Upstream-Addr", "Sluice-Reason", "SLUICE-anything",
		"True-Client-IP", "X-Original-URL",
		/* past the bytes kept of a name: its prefix still tells */
		"X-Forwarded-With-A-Very-Long-Name-Beyond-Thirty-Two-Bytes",
	};
	char in[256];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(in, sizeof(in), "5\r\nhello\r\n0\r\nX-Ok: 1\r\n%s: v\r\n\r\n",
			 names[i]);
		bad_chunked(in, "forbidden trailer field");
	}
}

static void test_bad_chunk_ext_too_long(void **state)
{
	static char in[GW_H1_MAX_CHUNK_LINE + 64];
	size_t n;

	(void)state;
	n = (size_t)snprintf(in, sizeof(in), "5;x=");
	while (n < GW_H1_MAX_CHUNK_LINE)
		in[n++] = 'a';
	memcpy(in + n, "\r\nhello\r\n0\r\n\r\n", 15);
	bad_chunked(in, "chunk line too long");
	/* one byte less fits: the line is GW_H1_MAX_CHUNK_LINE with its CR */
	in[GW_H1_MAX_CHUNK_LINE - 1] = '\r';
	in[GW_H1_MAX_CHUNK_LINE] = '\n';
	memcpy(in + GW_H1_MAX_CHUNK_LINE + 1, "hello\r\n0\r\n\r\n", 13);
	{
		static struct body_run r;

		body_once(GW_H1_BODY_CHUNKED, 0, GW_H1_DECODE, in, strlen(in),
			  &r);
		assert_int_equal(r.rc, GW_H1_DONE);
	}
}

static void test_bad_trailer_too_large(void **state)
{
	static char in[GW_H1_MAX_TRAILER_BYTES + 64];
	size_t n;

	(void)state;
	n = (size_t)snprintf(in, sizeof(in), "0\r\nX: ");
	while (n < GW_H1_MAX_TRAILER_BYTES + 10)
		in[n++] = 'a';
	memcpy(in + n, "\r\n\r\n", 5);
	bad_chunked(in, "trailer section too large");
}

static void test_bad_too_many_trailers(void **state)
{
	static char in[4096];
	int n;

	(void)state;
	n = snprintf(in, sizeof(in), "0\r\n");
	for (int i = 0; i <= GW_H1_MAX_HEADERS; i++)
		n += snprintf(in + n, sizeof(in) - (size_t)n, "T%d:\r\n", i);
	snprintf(in + n, sizeof(in) - (size_t)n, "\r\n");
	bad_chunked(in, "too many trailer fields");
}

static void test_bad_truncated_body(void **state)
{
	struct gw_h1_body b;
	struct gw_h1_span d;
	size_t used;

	(void)state;
	gw_h1_body_init(&b, GW_H1_BODY_LENGTH, 10, GW_H1_DECODE);
	assert_int_equal(gw_h1_body_feed(&b, "hello", 5, &used, &d),
			 GW_H1_AGAIN);
	assert_int_equal(gw_h1_body_eof(&b), GW_H1_ERROR);
	assert_string_equal(b.err.msg, "truncated body");

	gw_h1_body_init(&b, GW_H1_BODY_CHUNKED, 0, GW_H1_RAW);
	assert_int_equal(gw_h1_body_feed(&b, "5\r\nhello\r\n", 10, &used, &d),
			 GW_H1_AGAIN);
	assert_int_equal(gw_h1_body_eof(&b), GW_H1_ERROR);
}

/* ---- bad request-targets -------------------------------------------- */

static void bad_target(const char *t, enum gw_h1_method m, enum gw_reason r,
		       const char *msg)
{
	struct gw_h1_target out;
	struct gw_h1_error err = { 0 };

	assert_int_equal(gw_h1_target_parse(t, strlen(t), m, &out, &err),
			 -EINVAL);
	assert_int_equal(err.reason, r);
	assert_string_equal(err.msg, msg);
}

static void test_bad_targets(void **state)
{
	const enum gw_h1_method G = GW_H1_M_GET, C = GW_H1_M_CONNECT;

	(void)state;
	bad_target("http://user@example.com/", G, GW_R_USERINFO,
		   "userinfo in URL");
	bad_target("http://user:pw@example.com:80/", G, GW_R_USERINFO,
		   "userinfo in URL");
	bad_target("http://@example.com/", G, GW_R_USERINFO, "userinfo in URL");
	bad_target("user@example.com:443", C, GW_R_USERINFO, "userinfo in URL");
	bad_target("/a#frag", G, GW_R_BAD_REQUEST, "fragment in target");
	bad_target("/a?b#frag", G, GW_R_BAD_REQUEST, "fragment in target");
	bad_target("http://example.com#x", G, GW_R_BAD_REQUEST,
		   "fragment in target");
	bad_target("http://example.com/#x", G, GW_R_BAD_REQUEST,
		   "fragment in target");
	bad_target("ftp://example.com/", G, GW_R_UNSUPPORTED,
		   "unsupported URL scheme");
	bad_target("example.com:443", G, GW_R_BAD_REQUEST, "bad request-target");
	bad_target("http:/example.com", G, GW_R_BAD_REQUEST,
		   "bad request-target");
	bad_target("*", G, GW_R_BAD_REQUEST, "* target is for OPTIONS only");
	bad_target("", G, GW_R_BAD_REQUEST, "empty target");
	bad_target("/a b", G, GW_R_BAD_REQUEST, "space or control in target");
	bad_target("/a\x01", G, GW_R_BAD_REQUEST, "space or control in target");
	bad_target("/\xc3\xa9", G, GW_R_BAD_REQUEST,
		   "bad byte in request-target");
	bad_target("http://", G, GW_R_BAD_HOST, "empty host");
	bad_target("http:///x", G, GW_R_BAD_HOST, "empty host");
	bad_target("http://:80/", G, GW_R_BAD_HOST, "empty host");
	bad_target("http://ex\xc3\xa9.com/", G, GW_R_NON_ASCII_HOST,
		   "non-ASCII byte in host");
	bad_target("http://ex<a>.com/", G, GW_R_BAD_HOST, "bad byte in host");
	bad_target("http://[::1/", G, GW_R_BAD_HOST, "bad IPv6 literal");
	bad_target("http://[]/", G, GW_R_BAD_HOST, "bad IPv6 literal");
	bad_target("http://[v1.x]/", G, GW_R_BAD_HOST, "bad IPv6 literal");
	bad_target("http://[::1]x/", G, GW_R_BAD_HOST, "bad byte in host");
	bad_target("http://a:/", G, GW_R_BAD_PORT, "bad port");
	bad_target("http://a:0/", G, GW_R_BAD_PORT, "port out of range");
	bad_target("http://a:65536/", G, GW_R_BAD_PORT, "port out of range");
	bad_target("http://a:123456/", G, GW_R_BAD_PORT, "bad port");
	bad_target("http://a:+80/", G, GW_R_BAD_PORT, "bad port");
	bad_target("http://a:8o/", G, GW_R_BAD_PORT, "bad port");
	bad_target("example.com", C, GW_R_BAD_PORT,
		   "CONNECT target needs a port");
	bad_target("[::1]", C, GW_R_BAD_PORT, "CONNECT target needs a port");
	bad_target("example.com:", C, GW_R_BAD_PORT, "bad port");
	bad_target("example.com:443/x", C, GW_R_BAD_PORT, "bad port");
	bad_target("/", C, GW_R_BAD_HOST, "bad byte in host");
}

/* Bytes RFC 3986 leaves out of a path and a query, raw, and lone '%'s:
 * one hop escapes or decodes them, the next does not. */
static void test_bad_targets_rfc3986(void **state)
{
	static const char raw[] = "\"<>\\^`{|}[]";
	static const char *const pct[] = { "%", "%2", "%zz", "%2g", "%%41" };
	const enum gw_h1_method G = GW_H1_M_GET;
	char t[64];

	(void)state;
	for (size_t i = 0; raw[i]; i++) {
		snprintf(t, sizeof(t), "/a%cb", raw[i]);
		bad_target(t, G, GW_R_BAD_REQUEST, "bad byte in request-target");
		snprintf(t, sizeof(t), "/a?q=%c", raw[i]);
		bad_target(t, G, GW_R_BAD_REQUEST, "bad byte in request-target");
		snprintf(t, sizeof(t), "http://a.example/x?%cy", raw[i]);
		bad_target(t, G, GW_R_BAD_REQUEST, "bad byte in request-target");
	}
	for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++) {
		snprintf(t, sizeof(t), "/a%s", pct[i]);
		bad_target(t, G, GW_R_BAD_REQUEST, "bad percent-encoding in request-target");
		snprintf(t, sizeof(t), "http://a.example/?q=%s-", pct[i]);
		bad_target(t, G, GW_R_BAD_REQUEST, "bad percent-encoding in request-target");
	}
}

/* ---- good heads ----------------------------------------------------- */

/* Compares two parses of the same bytes. */
static void assert_same_head(const struct gw_h1_head *a,
			     const struct gw_h1_head *b)
{
	assert_int_equal(a->head_len, b->head_len);
	assert_int_equal(a->version_minor, b->version_minor);
	assert_int_equal(a->method.len, b->method.len);
	assert_int_equal(a->target.len, b->target.len);
	assert_ptr_equal(a->target.p, b->target.p);
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->nheaders, b->nheaders);
	for (size_t i = 0; i < a->nheaders; i++) {
		assert_ptr_equal(a->headers[i].name.p, b->headers[i].name.p);
		assert_int_equal(a->headers[i].name.len, b->headers[i].name.len);
		assert_ptr_equal(a->headers[i].value.p, b->headers[i].value.p);
		assert_int_equal(a->headers[i].value.len,
				 b->headers[i].value.len);
	}
	assert_int_equal(a->body, b->body);
	assert_int_equal(a->content_length, b->content_length);
	assert_int_equal(a->keep_alive, b->keep_alive);
	assert_int_equal(a->nconn_tokens, b->nconn_tokens);
	assert_int_equal(a->has_host, b->has_host);
	assert_int_equal(a->upgrade, b->upgrade);
	assert_int_equal(a->expect_100_continue, b->expect_100_continue);
}

/* Parses s fully, then split at every offset, then byte by byte, and
 * checks every way gives the same head and that scanning resumes. */
static void good_head(enum gw_h1_kind k, enum gw_h1_method rm, const char *s,
		      size_t len, struct gw_h1_head *h)
{
	static struct gw_h1_head h2;
	struct gw_h1_parser p;

	assert_int_equal(parse_n(k, rm, s, len, h), GW_H1_DONE);
	for (size_t cut = 0; cut <= len; cut++) {
		enum gw_h1_result rc;

		gw_h1_parser_init(&p, k, MAX_HEAD);
		gw_h1_parser_set_request_method(&p, rm);
		rc = gw_h1_head_parse(&p, s, cut, &h2);
		if (cut < h->head_len) {
			assert_int_equal(rc, GW_H1_AGAIN);
			rc = gw_h1_head_parse(&p, s, len, &h2);
		}
		assert_int_equal(rc, GW_H1_DONE);
		assert_same_head(h, &h2);
	}
	gw_h1_parser_init(&p, k, MAX_HEAD);
	gw_h1_parser_set_request_method(&p, rm);
	for (size_t n = 1; n <= len; n++) {
		enum gw_h1_result rc = gw_h1_head_parse(&p, s, n, &h2);

		if (rc == GW_H1_DONE) {
			assert_int_equal(n, h->head_len);
			assert_same_head(h, &h2);
			return;
		}
		assert_int_equal(rc, GW_H1_AGAIN);
		/* resumes where it stopped: all but a trailing CR scanned */
		assert_int_equal(p.scanned, s[n - 1] == '\r' ? n - 1 : n);
	}
	fail_msg("head never completed byte by byte");
}

/* Byte-by-byte arrival: each call examines only the new byte (a CR at the
 * end waits for its LF), never the whole buffer again. */
static void test_head_scan_resumes(void **state)
{
	static char buf[6000];
	static struct gw_h1_head h;
	struct gw_h1_parser p;
	size_t n = 0, calls = 0;
	enum gw_h1_result rc = GW_H1_AGAIN;

	(void)state;
	n += (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      "X-Header-%03d: %040d\r\n", i, i);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
	gw_h1_parser_init(&p, GW_H1_REQUEST, sizeof(buf));
	for (size_t k = 1; k <= n && rc == GW_H1_AGAIN; k++) {
		size_t before = p.scanned;

		rc = gw_h1_head_parse(&p, buf, k, &h);
		calls++;
		if (rc == GW_H1_AGAIN) {
			assert_true(p.scanned >= before);
			assert_true(p.scanned - before <= 2);
			assert_true(p.scanned + 1 >= k);
		}
	}
	assert_int_equal(rc, GW_H1_DONE);
	assert_int_equal(calls, n);
	assert_int_equal(h.nheaders, 101);
}

static void test_good_get(void **state)
{
	const char *s = "GET /index.html?q=1 HTTP/1.1\r\n"
			"Host: example.com\r\n"
			"User-Agent: test/1.0\r\n"
			"Accept: */*\r\n"
			"X-Empty:\r\n"
			"X-Pad: \t padded value\t \r\n"
			"X-Obs: caf\xc3\xa9\r\n"
			"\r\n";
	static struct gw_h1_head h;
	const struct gw_h1_header *x;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.head_len, strlen(s));
	assert_span(h.method, "GET");
	assert_int_equal(h.method_id, GW_H1_M_GET);
	assert_span(h.target, "/index.html?q=1");
	assert_int_equal(h.version_minor, 1);
	assert_true(h.has_host);
	assert_span(h.host, "example.com");
	assert_int_equal(h.nheaders, 6);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_true(h.keep_alive);
	assert_false(h.upgrade);
	assert_false(h.expect_100_continue);
	x = gw_h1_header_find(&h, "x-pad");
	assert_non_null(x);
	assert_span(x->value, "padded value");
	x = gw_h1_header_find(&h, "X-EMPTY");
	assert_non_null(x);
	assert_int_equal(x->value.len, 0);
	assert_span(gw_h1_header_find(&h, "x-obs")->value, "caf\xc3\xa9");
	assert_null(gw_h1_header_find(&h, "X-Missing"));
	assert_null(gw_h1_header_find(&h, "X-Pa"));
}

static void test_good_post_length(void **state)
{
	const char *s = "POST /upload HTTP/1.1\r\nHost: a\r\n"
			"Content-Length: 0005\r\nExpect: 100-Continue\r\n\r\n";
	static struct gw_h1_head h;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.method_id, GW_H1_M_POST);
	assert_int_equal(h.body, GW_H1_BODY_LENGTH);
	assert_int_equal(h.content_length, 5);
	assert_true(h.has_content_length);
	assert_true(h.expect_100_continue);
}

static void test_good_cl_max(void **state)
{
	const char *s = "PUT / HTTP/1.1\r\nHost: a\r\n"
			"Content-Length: 9223372036854775807\r\n\r\n";
	const char *z = "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
	static struct gw_h1_head h;

	(void)state;
	assert_int_equal(parse_req(s, &h), GW_H1_DONE);
	assert_int_equal(h.content_length, INT64_MAX);
	assert_int_equal(parse_req(z, &h), GW_H1_DONE);
	assert_int_equal(h.body, GW_H1_BODY_LENGTH);
	assert_int_equal(h.content_length, 0);
}

static void test_good_chunked_request(void **state)
{
	const char *s = "POST / HTTP/1.1\r\nHost: a\r\n"
			"Transfer-Encoding: Chunked\r\n\r\n";
	static struct gw_h1_head h;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_CHUNKED);
	assert_true(h.has_transfer_encoding);
}

static void test_good_proxy_request(void **state)
{
	const char *s = "GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\n"
			"Host: example.com:8080\r\n"
			"Proxy-Connection: keep-alive\r\n"
			"Proxy-Authorization: Basic dTpw\r\n"
			"Connection: Keep-Alive, X-Secret,, ,TE\r\n"
			"Connection: Upgrade\r\n"
			"Upgrade: websocket\r\n"
			"X-Secret: 1\r\n"
			"Keep-Alive: timeout=5\r\n"
			"TE: trailers\r\n"
			"Accept: */*\r\n\r\n";
	static struct gw_h1_head h;
	struct gw_h1_target t;
	struct gw_h1_error err;
	static const char *const hop[] = {
		"Connection", "proxy-connection", "Keep-Alive", "te", "Trailer",
		"Transfer-Encoding", "upgrade", "Proxy-Authorization",
		"Proxy-Authenticate", "x-secret",
	};
	size_t kept = 0;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.nconn_tokens, 4);
	assert_span(h.conn_tokens[0], "Keep-Alive");
	assert_span(h.conn_tokens[1], "X-Secret");
	assert_span(h.conn_tokens[2], "TE");
	assert_span(h.conn_tokens[3], "Upgrade");
	assert_true(gw_h1_conn_has(&h, "upgrade"));
	assert_false(gw_h1_conn_has(&h, "close"));
	assert_true(h.upgrade);
	assert_true(h.keep_alive);
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		assert_true(gw_h1_hop_by_hop(&h, hop[i], strlen(hop[i])));
	assert_false(gw_h1_hop_by_hop(&h, "Accept", 6));
	assert_false(gw_h1_hop_by_hop(&h, "Host", 4));
	assert_false(gw_h1_hop_by_hop(&h, "X-Secre", 7));
	for (size_t i = 0; i < h.nheaders; i++)
		kept += !gw_h1_hop_by_hop(&h, h.headers[i].name.p,
					  h.headers[i].name.len);
	assert_int_equal(kept, 2);      /* Host, Accept */

	assert_int_equal(gw_h1_target_parse(h.target.p, h.target.len,
					    h.method_id, &t, &err),
			 0);
	assert_int_equal(t.form, GW_H1_TARGET_ABSOLUTE);
	assert_int_equal(t.scheme, GW_H1_SCHEME_HTTP);
	assert_span(t.host, "Example.com");
	assert_int_equal(t.port, 8080);
	assert_true(t.port_explicit);
	assert_span(t.path, "/a/b");
	assert_true(t.has_query);
	assert_span(t.query, "c=d");
}

static void test_good_connect(void **state)
{
	const char *s = "CONNECT example.com:443 HTTP/1.1\r\n"
			"Host: example.com:443\r\n\r\n";
	static struct gw_h1_head h;
	struct gw_h1_target t;
	struct gw_h1_error err;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.method_id, GW_H1_M_CONNECT);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_int_equal(gw_h1_target_parse(h.target.p, h.target.len,
					    h.method_id, &t, &err),
			 0);
	assert_int_equal(t.form, GW_H1_TARGET_AUTHORITY);
	assert_span(t.host, "example.com");
	assert_int_equal(t.port, 443);
}

static void test_good_http10(void **state)
{
	const char *a = "GET / HTTP/1.0\r\n\r\n";
	const char *b = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
	const char *c = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
	static struct gw_h1_head h;

	(void)state;
	good_head(GW_H1_REQUEST, 0, a, strlen(a), &h);
	assert_int_equal(h.version_minor, 0);
	assert_false(h.has_host);
	assert_false(h.keep_alive);
	good_head(GW_H1_REQUEST, 0, b, strlen(b), &h);
	assert_true(h.keep_alive);
	good_head(GW_H1_REQUEST, 0, c, strlen(c), &h);
	assert_false(h.keep_alive);
	assert_true(h.conn_close);
}

static void test_good_leading_crlf(void **state)
{
	const char *s = "\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
	static struct gw_h1_head h;

	(void)state;
	good_head(GW_H1_REQUEST, 0, s, strlen(s), &h);
	assert_int_equal(h.head_len, strlen(s));
	assert_span(h.method, "GET");
}

static void test_good_methods(void **state)
{
	static struct gw_h1_head h;

	(void)state;
	assert_int_equal(parse_req("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_int_equal(h.method_id, GW_H1_M_OPTIONS);
	assert_int_equal(parse_req("get / HTTP/1.1\r\nHost: a\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_int_equal(h.method_id, GW_H1_M_OTHER);
	assert_int_equal(parse_req("M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_span(h.method, "M-SEARCH");
	assert_int_equal(gw_h1_method_parse("PATCH", 5), GW_H1_M_PATCH);
	assert_int_equal(gw_h1_method_parse("PATC", 4), GW_H1_M_OTHER);
	assert_string_equal(gw_h1_method_name(GW_H1_M_TRACE), "TRACE");
	assert_string_equal(gw_h1_method_name(GW_H1_M_OTHER), "");
}

static void test_good_pipelined(void **state)
{
	const char *s = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
			"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n";
	static struct gw_h1_head h;
	struct gw_h1_parser p;
	size_t first;

	(void)state;
	gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
	assert_int_equal(gw_h1_head_parse(&p, s, strlen(s), &h), GW_H1_DONE);
	assert_span(h.target, "/1");
	first = h.head_len;
	gw_h1_parser_init(&p, GW_H1_REQUEST, MAX_HEAD);
	assert_int_equal(gw_h1_head_parse(&p, s + first, strlen(s) - first, &h),
			 GW_H1_DONE);
	assert_span(h.target, "/2");
}

static void test_good_responses(void **state)
{
	static struct gw_h1_head h;
	const char *s;

	(void)state;
	s = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.status, 200);
	assert_span(h.status_text, "OK");
	assert_int_equal(h.body, GW_H1_BODY_LENGTH);
	assert_int_equal(h.content_length, 5);
	assert_true(h.keep_alive);

	s = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_CHUNKED);
	assert_span(h.status_text, "Not Found");

	s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_CHUNKED);

	s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_UNTIL_CLOSE);
	assert_false(h.keep_alive);

	s = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_UNTIL_CLOSE);
	assert_int_equal(h.version_minor, 0);
	assert_false(h.keep_alive);

	s = "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.status_text.len, 0);

	s = "HTTP/1.1 204 No Content\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_true(h.keep_alive);

	s = "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);

	s = "HTTP/1.1 100 Continue\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_POST, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_int_equal(h.status, 100);

	s = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: upgrade\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_true(h.upgrade);

	s = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_HEAD, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);
	assert_true(h.has_content_length);

	s = "HTTP/1.1 200 Connection established\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_CONNECT, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_NONE);

	s = "HTTP/1.1 407 Proxy Auth\r\nContent-Length: 3\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_CONNECT, s, strlen(s), &h);
	assert_int_equal(h.body, GW_H1_BODY_LENGTH);

	s = "HTTP/1.1 200 caf\xc3\xa9\tok\r\nHost: a\r\nHost: b\r\n\r\n";
	good_head(GW_H1_RESPONSE, GW_H1_M_GET, s, strlen(s), &h);
	assert_false(h.has_host);       /* Host means nothing in a response */
}

/* ---- good targets --------------------------------------------------- */

static void test_good_targets(void **state)
{
	struct gw_h1_target t;
	struct gw_h1_error err;
	const char *s;

	(void)state;
	s = "/";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_int_equal(t.form, GW_H1_TARGET_ORIGIN);
	assert_span(t.path, "/");
	assert_false(t.has_query);

	s = "/a/b?x=1&y=%20?";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_span(t.path, "/a/b");
	assert_span(t.query, "x=1&y=%20?");

	s = "HTTPS://example.com";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_int_equal(t.scheme, GW_H1_SCHEME_HTTPS);
	assert_int_equal(t.port, 443);
	assert_false(t.port_explicit);
	assert_span(t.host, "example.com");
	assert_span(t.path, "/");

	s = "http://example.com?q";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_int_equal(t.port, 80);
	assert_span(t.path, "/");
	assert_true(t.has_query);
	assert_span(t.query, "q");

	s = "http://[2001:db8::1]:8443/x";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_true(t.host_ipv6);
	assert_span(t.host, "2001:db8::1");
	assert_int_equal(t.port, 8443);
	assert_span(t.path, "/x");

	s = "http://10.0.0.1:65535/";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_span(t.host, "10.0.0.1");
	assert_int_equal(t.port, 65535);

	s = "[::1]:22";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_CONNECT, &t,
					    &err), 0);
	assert_int_equal(t.form, GW_H1_TARGET_AUTHORITY);
	assert_true(t.host_ipv6);
	assert_span(t.host, "::1");
	assert_int_equal(t.port, 22);

	s = "*";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_OPTIONS, &t,
					    &err), 0);
	assert_int_equal(t.form, GW_H1_TARGET_ASTERISK);

	s = "/x@y";     /* '@' in a path is not userinfo */
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	s = "http://h/p@q";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t,
					    &err), 0);
	assert_span(t.path, "/p@q");
}

/* What the issue-20 rules let through. */
static void test_good_issue20(void **state)
{
	struct gw_h1_head h;
	struct gw_h1_target t;
	struct gw_h1_error err;
	const char *s;

	(void)state;
	/* every byte RFC 3986 allows in a path and a query */
	s = "/~a/b-c_d.e!$&'()*+,;=:@%2F%7b?x=%7B%7D&y=a/b?c:@!$&'()*+,;=";
	assert_int_equal(gw_h1_target_parse(s, strlen(s), GW_H1_M_GET, &t, &err), 0);
	assert_span(t.query, "x=%7B%7D&y=a/b?c:@!$&'()*+,;=");
	/* Connection naming what it may: hop-by-hop fields, an upgrade */
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade,"
				   " TE, X-Foo\r\nUpgrade: websocket\r\nTE: trailers\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_int_equal(h.nconn_tokens, 4);
	/* Hosts: a port, an IPv6 literal, empty, %-escapes (a unix socket's
	 * path, as some clients send it) */
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost: a.example:8443\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", &h),
			 GW_H1_DONE);
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost:\r\n\r\n", &h), GW_H1_DONE);
	assert_true(h.has_host && h.host.len == 0);
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost: %2Frun%2Fsluice.sock\r\n\r\n", &h),
			 GW_H1_DONE);
	/* Max-Forwards, read; a huge one saturates */
	assert_int_equal(parse_req("OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 007\r\n\r\n",
				   &h), GW_H1_DONE);
	assert_true(h.has_max_forwards);
	assert_int_equal(h.max_forwards, 7);
	assert_int_equal(parse_req("OPTIONS * HTTP/1.1\r\nHost: a\r\n"
				   "Max-Forwards: 99999999999999999999999\r\n\r\n", &h), GW_H1_DONE);
	assert_int_equal(h.max_forwards, UINT32_MAX);
	assert_int_equal(parse_req("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &h), GW_H1_DONE);
	assert_false(h.has_max_forwards);
	/* a CONNECT that says its body is empty */
	assert_int_equal(parse_req("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n"
				   "Content-Length: 0\r\n\r\n", &h), GW_H1_DONE);
	assert_int_equal(h.content_length, 0);
	/* methods in any case */
	assert_int_equal(parse_req("trace / HTTP/1.1\r\nHost: a\r\n\r\n", &h), GW_H1_DONE);
	assert_int_equal(h.method_id, GW_H1_M_OTHER);
	assert_true(gw_h1_method_ieq(&h, "TRACE"));
	assert_false(gw_h1_method_ieq(&h, "TRACK"));
}

/* Which fields are an identity a sender could forge. */
static void test_good_spoofable(void **state)
{
	static const char *const req_yes[] = {
		"Forwarded", "X-Forwarded-For", "x-forwarded-proto", "X-FORWARDED-HOST",
		"X-Real-IP", "X-Upstream-Addr", "Sluice-Reason", "sluice-x", "True-Client-IP",
		"X-Client-IP", "Client-IP", "X-Cluster-Client-IP", "CF-Connecting-IP",
		"Fastly-Client-IP", "X-Originating-IP", "X-Remote-IP", "X-Remote-Addr",
		"X-Original-URL", "X-Rewrite-URL", "X-Host",
	};
	static const char *const req_no[] = {
		"X-Forwarded", "Forwarded-For", "Sluice", "X-Real-IPs", "Host", "Via",
		"X-Hosts", "Authorization", "User-Agent",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(req_yes) / sizeof(req_yes[0]); i++)
		if (!gw_h1_spoofable(GW_H1_REQUEST, req_yes[i], strlen(req_yes[i])))
			fail_msg("%s is not taken for forgeable", req_yes[i]);
	for (size_t i = 0; i < sizeof(req_no) / sizeof(req_no[0]); i++)
		if (gw_h1_spoofable(GW_H1_REQUEST, req_no[i], strlen(req_no[i])))
			fail_msg("%s is taken for forgeable", req_no[i]);
	/* a response: sluice's own fields only */
	assert_true(gw_h1_spoofable(GW_H1_RESPONSE, "Sluice-Reason", 13));
	assert_true(gw_h1_spoofable(GW_H1_RESPONSE, "sluice-anything", 15));
	assert_false(gw_h1_spoofable(GW_H1_RESPONSE, "X-Forwarded-For", 15));
	assert_false(gw_h1_spoofable(GW_H1_RESPONSE, "Sluice", 6));
}

/* ---- good bodies, split at every offset ----------------------------- */

/* Decodes `in` whole, split in two at every offset, in three at every
 * pair of offsets (short inputs), and byte by byte, in both modes; every
 * way must agree with `payload` and end after `end` bytes. */
static void good_body(enum gw_h1_body_kind kind, uint64_t cl, const char *in,
		      size_t len, size_t end, const char *payload,
		      enum gw_h1_result want)
{
	static struct body_run r;
	static size_t cuts[8192];
	size_t plen = strlen(payload);

	for (int mode = 0; mode < 2; mode++) {
		struct gw_h1_body b;

		for (size_t cut = 0; cut <= len + 1; cut++) {
			size_t ncuts = 0;

			if (cut <= len)
				cuts[ncuts++] = cut;
			else
				for (size_t i = 1; i <= len; i++)
					cuts[ncuts++] = i;   /* byte by byte */
			gw_h1_body_init(&b, kind, cl, (enum gw_h1_body_mode)mode);
			body_feed_cuts(&b, in, len, cuts, ncuts, &r);
			assert_int_equal(r.rc, want);
			assert_int_equal(r.consumed, end);
			if (mode == GW_H1_DECODE) {
				assert_int_equal(r.npayload, plen);
				assert_memory_equal(r.payload, payload, plen);
			} else {
				assert_int_equal(r.nraw, end);
				assert_memory_equal(r.raw, in, end);
			}
			assert_int_equal(b.payload, plen);
		}
		if (len > 64)
			continue;
		for (size_t c1 = 0; c1 <= len; c1++)
			for (size_t c2 = c1; c2 <= len; c2++) {
				cuts[0] = c1;
				cuts[1] = c2;
				gw_h1_body_init(&b, kind, cl,
						(enum gw_h1_body_mode)mode);
				body_feed_cuts(&b, in, len, cuts, 2, &r);
				assert_int_equal(r.rc, want);
				assert_int_equal(r.consumed, end);
			}
	}
}

static void test_good_body_length(void **state)
{
	const char *in = "helloGET /next";

	(void)state;
	good_body(GW_H1_BODY_LENGTH, 5, in, strlen(in), 5, "hello", GW_H1_DONE);
	good_body(GW_H1_BODY_LENGTH, 0, in, strlen(in), 0, "", GW_H1_DONE);
	good_body(GW_H1_BODY_NONE, 0, in, strlen(in), 0, "", GW_H1_DONE);
	good_body(GW_H1_BODY_LENGTH, 100, in, strlen(in), strlen(in), in,
		  GW_H1_AGAIN);
}

static void test_good_body_until_close(void **state)
{
	const char *in = "all of this\r\n0\r\n\r\n is payload";
	struct gw_h1_body b;

	(void)state;
	good_body(GW_H1_BODY_UNTIL_CLOSE, 0, in, strlen(in), strlen(in), in,
		  GW_H1_AGAIN);
	gw_h1_body_init(&b, GW_H1_BODY_UNTIL_CLOSE, 0, GW_H1_DECODE);
	assert_int_equal(gw_h1_body_eof(&b), GW_H1_DONE);
}

static void test_good_chunked_simple(void **state)
{
	const char *in = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT";

	(void)state;
	good_body(GW_H1_BODY_CHUNKED, 0, in, strlen(in), strlen(in) - 4,
		  "hello world", GW_H1_DONE);
}

static void test_good_chunked_ext_trailers(void **state)
{
	const char *in = "A;name=value;q=\"a b\"\r\n0123456789\r\n"
			 "005 ;x\r\nabcde\r\n"
			 "000000000000000f\r\nfifteen bytes!!\r\n"
			 "1\r\n\r\r\n"
			 "0;last\r\nExpires: never\r\nX-Sum: \t1\r\nX-E:\r\n\r\n";

	(void)state;
	good_body(GW_H1_BODY_CHUNKED, 0, in, strlen(in), strlen(in),
		  "0123456789abcdefifteen bytes!!\r", GW_H1_DONE);
}

/* Trailers outside the refused list pass, whatever their length. */
static void test_good_trailers_allowed(void **state)
{
	const char *in = "0\r\nX-Checksum: abc\r\nContent-MD5: x\r\nContent-Lengthy: 1\r\n"
			 "Sluice: 1\r\nX-Forwarded: 1\r\n"
			 "X-A-Name-Longer-Than-The-Thirty-Two-Bytes-Kept: 1\r\n"
			 "Server-Timing: db;dur=53\r\n\r\n";

	(void)state;
	good_body(GW_H1_BODY_CHUNKED, 0, in, strlen(in), strlen(in), "", GW_H1_DONE);
}

static void test_good_chunked_data_looks_like_framing(void **state)
{
	/* payload holding CRLFs and a fake last chunk */
	const char *in = "6\r\n0\r\n\r\nX\r\n0\r\n\r\n";

	(void)state;
	good_body(GW_H1_BODY_CHUNKED, 0, in, strlen(in), strlen(in),
		  "0\r\n\r\nX", GW_H1_DONE);
}

static void test_good_chunk_size_max(void **state)
{
	const char *in = "7fffffffffffffff\r\nabc";
	struct gw_h1_body b;
	static struct body_run r;

	(void)state;
	gw_h1_body_init(&b, GW_H1_BODY_CHUNKED, 0, GW_H1_DECODE);
	body_feed_cuts(&b, in, strlen(in), NULL, 0, &r);
	assert_int_equal(r.rc, GW_H1_AGAIN);
	assert_int_equal(r.npayload, 3);
	assert_int_equal(b.remaining, INT64_MAX - 3);
}

/* A whole exchange arriving in pieces through a growing receive buffer,
 * the way a door uses the API: head first, then the body from the bytes
 * after head_len. */
static void run_message(enum gw_h1_kind k, enum gw_h1_method rm,
			const char *msg, size_t len, const size_t *cuts,
			size_t ncuts, const char *want_payload, size_t want_end)
{
	static char rx[4096];
	static struct gw_h1_head h;
	static char payload[4096];
	struct gw_h1_parser p;
	struct gw_h1_body b;
	size_t have = 0, body_at = 0, np = 0, done_at = 0;
	bool in_body = false, done = false;

	gw_h1_parser_init(&p, k, MAX_HEAD);
	gw_h1_parser_set_request_method(&p, rm);
	for (size_t c = 0; c <= ncuts && !done; c++) {
		size_t to = c < ncuts ? cuts[c] : len;

		memcpy(rx + have, msg + have, to - have);
		have = to;
		if (!in_body) {
			enum gw_h1_result rc = gw_h1_head_parse(&p, rx, have,
								&h);

			if (rc == GW_H1_AGAIN)
				continue;
			assert_int_equal(rc, GW_H1_DONE);
			gw_h1_body_init(&b, h.body, h.content_length,
					GW_H1_DECODE);
			body_at = h.head_len;
			in_body = true;
		}
		while (body_at < have || b.state == GW_H1_BS_DONE) {
			struct gw_h1_span d;
			size_t used;
			enum gw_h1_result rc = gw_h1_body_feed(
				&b, rx + body_at, have - body_at, &used, &d);

			assert_int_not_equal(rc, GW_H1_ERROR);
			memcpy(payload + np, d.p, d.len);
			np += d.len;
			body_at += used;
			if (rc == GW_H1_DONE) {
				done = true;
				done_at = body_at;
				break;
			}
		}
	}
	assert_true(done);
	assert_int_equal(done_at, want_end);
	assert_int_equal(np, strlen(want_payload));
	assert_memory_equal(payload, want_payload, np);
}

static void every_split(enum gw_h1_kind k, enum gw_h1_method rm,
			const char *msg, const char *want_payload,
			size_t want_end)
{
	static size_t cuts[4096];
	size_t len = strlen(msg);

	run_message(k, rm, msg, len, NULL, 0, want_payload, want_end);
	for (size_t cut = 0; cut <= len; cut++) {
		cuts[0] = cut;
		run_message(k, rm, msg, len, cuts, 1, want_payload, want_end);
	}
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	run_message(k, rm, msg, len, cuts, len, want_payload, want_end);
}

static void test_good_messages_split(void **state)
{
	const char *m;

	(void)state;
	m = "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"
	    "hello worldGET";
	every_split(GW_H1_REQUEST, 0, m, "hello world", strlen(m) - 3);
	m = "\r\nPOST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n3;e=1\r\nabc\r\n2\r\nde\r\n0\r\nT: x\r\n\r\nGET";
	every_split(GW_H1_REQUEST, 0, m, "abcde", strlen(m) - 3);
	m = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n";
	every_split(GW_H1_REQUEST, 0, m, "", 27);
	m = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n";
	every_split(GW_H1_RESPONSE, GW_H1_M_GET, m, "wikipedia", strlen(m));
	m = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP";
	every_split(GW_H1_RESPONSE, GW_H1_M_GET, m, "ok", strlen(m) - 4);
	m = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nHTTP";
	every_split(GW_H1_RESPONSE, GW_H1_M_HEAD, m, "", strlen(m) - 4);
}

/* ---- writer ---------------------------------------------------------- */

static struct gw_h1_span S(const char *s)
{
	struct gw_h1_span sp = { s, strlen(s) };
	return sp;
}

static void test_writer(void **state)
{
	char buf[256];
	struct gw_h1_writer w;
	static struct gw_h1_head h;
	const char *want = "GET /x HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n";

	(void)state;
	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_request_line(&w, S("GET"), S("/x"), 1);
	gw_h1_write_header(&w, S("Host"), S("a"));
	gw_h1_write_header(&w, S("X"), S("1"));
	assert_int_equal(gw_h1_write_end(&w), 0);
	assert_int_equal(w.len, strlen(want));
	assert_memory_equal(buf, want, w.len);
	assert_int_equal(parse_n(GW_H1_REQUEST, 0, buf, w.len, &h), GW_H1_DONE);

	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_status_line(&w, 404, S("Not Found"), 0);
	assert_int_equal(gw_h1_write_end(&w), 0);
	assert_memory_equal(buf, "HTTP/1.0 404 Not Found\r\n\r\n", w.len);

	/* too small: exactly one byte short */
	gw_h1_writer_init(&w, buf, strlen(want) - 1);
	gw_h1_write_request_line(&w, S("GET"), S("/x"), 1);
	gw_h1_write_header(&w, S("Host"), S("a"));
	gw_h1_write_header(&w, S("X"), S("1"));
	assert_int_equal(gw_h1_write_end(&w), -ENOSPC);

	/* header injection refused */
	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_status_line(&w, 200, S("OK"), 1);
	gw_h1_write_header(&w, S("X"), S("a\r\nSet-Cookie: x"));
	assert_int_equal(gw_h1_write_end(&w), -EINVAL);
	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_request_line(&w, S("GET"), S("/a b"), 1);
	assert_int_equal(gw_h1_write_end(&w), -EINVAL);
	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_status_line(&w, 200, S("OK"), 1);
	gw_h1_write_header(&w, S("X Y"), S("a"));
	assert_int_equal(gw_h1_write_end(&w), -EINVAL);
	gw_h1_writer_init(&w, buf, sizeof(buf));
	gw_h1_write_status_line(&w, 1000, S("OK"), 1);
	assert_int_equal(gw_h1_write_end(&w), -EINVAL);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(gw_h1_body_state_name(GW_H1_BS_TRAILER_LF),
			    "trailer-lf");
	assert_string_equal(gw_h1_body_state_name(GW_H1_BS__COUNT), "?");
}

/* The caller's buffer moved: every span of the head and of the target
 * follows it (the old bytes wiped, then freed: nothing reads them after),
 * and a span pointing elsewhere stays. */
static void test_rebase(void **state)
{
	static const char req[] =
		"POST http://h.test:81/p/a?q=1&r HTTP/1.1\r\nHost: h.test:81\r\n"
		"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nContent-Length: 3\r\n\r\nabc";
	static const char elsewhere[] = "/";
	struct gw_h1_parser p;
	struct gw_h1_head h, h0;
	struct gw_h1_target t;
	struct gw_h1_error err;
	size_t n = sizeof(req) - 1;
	char *a = malloc(n), *b = malloc(2 * n);

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	memcpy(a, req, n);
	gw_h1_parser_init(&p, GW_H1_REQUEST, 8192);
	assert_int_equal(gw_h1_head_parse(&p, a, n, &h), GW_H1_DONE);
	assert_int_equal(gw_h1_target_parse(h.target.p, h.target.len, h.method_id, &t, &err), 0);
	h0 = h;
	t.query = (struct gw_h1_span){ elsewhere, 1 };
	memcpy(b, a, n);
	gw_h1_head_rebase(&h, a, n, b);
	gw_h1_target_rebase(&t, a, n, b);
	memset(a, 'x', n);
	free(a);
	assert_true(h.method.p == b);
	assert_memory_equal(h.target.p, "http://h.test:81/p/a?q=1&r", h.target.len);
	assert_memory_equal(h.host.p, "h.test:81", h.host.len);
	assert_int_equal(h.nheaders, h0.nheaders);
	assert_int_equal(h.nheaders, 4);
	for (size_t i = 0; i < h.nheaders; i++) {
		assert_true(h.headers[i].name.p > b && h.headers[i].name.p < b + n);
		assert_true(h.headers[i].value.p > b && h.headers[i].value.p < b + n);
		assert_int_equal(h.headers[i].value.len, h0.headers[i].value.len);
	}
	assert_memory_equal(h.headers[3].value.p, "3", 1);
	assert_true(gw_h1_hop_by_hop(&h, "x-hop", 5));
	assert_memory_equal(t.host.p, "h.test", t.host.len);
	assert_memory_equal(t.path.p, "/p/a", t.path.len);
	assert_ptr_equal(t.query.p, elsewhere);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* refused request heads */
		cmocka_unit_test(test_bad_cl_and_te),
		cmocka_unit_test(test_bad_te_and_cl),
		cmocka_unit_test(test_bad_cl_repeated_equal),
		cmocka_unit_test(test_bad_cl_repeated_differ),
		cmocka_unit_test(test_bad_cl_list),
		cmocka_unit_test(test_bad_cl_non_numeric),
		cmocka_unit_test(test_bad_cl_hex),
		cmocka_unit_test(test_bad_cl_inner_space),
		cmocka_unit_test(test_bad_cl_plus),
		cmocka_unit_test(test_bad_cl_minus),
		cmocka_unit_test(test_bad_cl_empty),
		cmocka_unit_test(test_bad_cl_2_63),
		cmocka_unit_test(test_bad_cl_huge),
		cmocka_unit_test(test_bad_te_gzip_chunked),
		cmocka_unit_test(test_bad_te_chunked_gzip),
		cmocka_unit_test(test_bad_te_identity),
		cmocka_unit_test(test_bad_te_chunked_twice_list),
		cmocka_unit_test(test_bad_te_chunked_two_fields),
		cmocka_unit_test(test_bad_te_chunked_lookalike),
		cmocka_unit_test(test_bad_te_trailing_comma),
		cmocka_unit_test(test_bad_te_empty),
		cmocka_unit_test(test_bad_te_params),
		cmocka_unit_test(test_bad_te_quoted),
		cmocka_unit_test(test_bad_te_http10),
		cmocka_unit_test(test_bad_obs_fold),
		cmocka_unit_test(test_bad_obs_fold_tab),
		cmocka_unit_test(test_bad_ws_after_start_line),
		cmocka_unit_test(test_bad_obs_fold_te),
		cmocka_unit_test(test_bad_lf_request_line),
		cmocka_unit_test(test_bad_lf_header_line),
		cmocka_unit_test(test_bad_lf_end_of_head),
		cmocka_unit_test(test_bad_lf_first_byte),
		cmocka_unit_test(test_bad_lf_in_value),
		cmocka_unit_test(test_bad_cr_in_value),
		cmocka_unit_test(test_bad_cr_end_of_head),
		cmocka_unit_test(test_bad_cr_request_line),
		cmocka_unit_test(test_bad_cr_split),
		cmocka_unit_test(test_bad_nul),
		cmocka_unit_test(test_bad_ctrl_in_value),
		cmocka_unit_test(test_bad_del_in_value),
		cmocka_unit_test(test_bad_esc_in_value),
		cmocka_unit_test(test_bad_ctrl_in_name),
		cmocka_unit_test(test_bad_space_before_colon),
		cmocka_unit_test(test_bad_tab_before_colon),
		cmocka_unit_test(test_bad_empty_name),
		cmocka_unit_test(test_bad_name_paren),
		cmocka_unit_test(test_bad_name_slash),
		cmocka_unit_test(test_bad_name_obs_text),
		cmocka_unit_test(test_bad_no_colon),
		cmocka_unit_test(test_bad_method_not_token),
		cmocka_unit_test(test_bad_method_leading_space),
		cmocka_unit_test(test_bad_method_tab),
		cmocka_unit_test(test_bad_line_double_space),
		cmocka_unit_test(test_bad_line_space_in_target),
		cmocka_unit_test(test_bad_line_trailing_space),
		cmocka_unit_test(test_bad_line_one_space),
		cmocka_unit_test(test_bad_line_method_only),
		cmocka_unit_test(test_bad_target_ctrl),
		cmocka_unit_test(test_bad_target_tab),
		cmocka_unit_test(test_bad_target_non_ascii),
		cmocka_unit_test(test_bad_version_12),
		cmocka_unit_test(test_bad_version_20),
		cmocka_unit_test(test_bad_version_lower),
		cmocka_unit_test(test_bad_version_long),
		cmocka_unit_test(test_bad_missing_host),
		cmocka_unit_test(test_bad_two_hosts),
		cmocka_unit_test(test_bad_two_hosts_http10),
		cmocka_unit_test(test_bad_host_space),
		cmocka_unit_test(test_bad_host_list),
		cmocka_unit_test(test_bad_many_empty_lines),
		cmocka_unit_test(test_bad_connection_token),
		cmocka_unit_test(test_bad_conn_names_cl),
		cmocka_unit_test(test_bad_conn_names_te),
		cmocka_unit_test(test_bad_conn_names_host),
		cmocka_unit_test(test_bad_conn_names_routing),
		cmocka_unit_test(test_bad_host_values),
		cmocka_unit_test(test_bad_max_forwards_letters),
		cmocka_unit_test(test_bad_max_forwards_empty),
		cmocka_unit_test(test_bad_max_forwards_list),
		cmocka_unit_test(test_bad_max_forwards_signed),
		cmocka_unit_test(test_bad_max_forwards_repeated),
		cmocka_unit_test(test_bad_connect_length),
		cmocka_unit_test(test_bad_connect_chunked),
		cmocka_unit_test(test_bad_too_many_conn_tokens),
		cmocka_unit_test(test_bad_head_too_large),
		cmocka_unit_test(test_bad_too_many_headers),
		cmocka_unit_test(test_bad_parser_reuse),
		/* refused response heads */
		cmocka_unit_test(test_bad_responses),
		/* refused chunked bodies */
		cmocka_unit_test(test_bad_chunk_empty_size),
		cmocka_unit_test(test_bad_chunk_ext_no_size),
		cmocka_unit_test(test_bad_chunk_non_hex),
		cmocka_unit_test(test_bad_chunk_non_hex_later),
		cmocka_unit_test(test_bad_chunk_0x),
		cmocka_unit_test(test_bad_chunk_negative),
		cmocka_unit_test(test_bad_chunk_leading_space),
		cmocka_unit_test(test_bad_chunk_17_digits),
		cmocka_unit_test(test_bad_chunk_2_63),
		cmocka_unit_test(test_bad_chunk_2_64),
		cmocka_unit_test(test_bad_chunk_ws_then_crlf),
		cmocka_unit_test(test_bad_chunk_ws_in_size),
		cmocka_unit_test(test_bad_chunk_size_lf),
		cmocka_unit_test(test_bad_chunk_ext_lf),
		cmocka_unit_test(test_bad_chunk_size_cr),
		cmocka_unit_test(test_bad_chunk_ext_ctrl),
		cmocka_unit_test(test_bad_chunk_ext_too_long),
		cmocka_unit_test(test_bad_chunk_data_too_long),
		cmocka_unit_test(test_bad_chunk_data_lf_only),
		cmocka_unit_test(test_bad_chunk_data_cr_only),
		cmocka_unit_test(test_bad_chunk_last_lf),
		cmocka_unit_test(test_bad_chunk_last_cr),
		cmocka_unit_test(test_bad_trailer_obs_fold),
		cmocka_unit_test(test_bad_trailer_lf),
		cmocka_unit_test(test_bad_trailer_cr),
		cmocka_unit_test(test_bad_trailer_ws_colon),
		cmocka_unit_test(test_bad_trailer_empty_name),
		cmocka_unit_test(test_bad_trailer_bad_name),
		cmocka_unit_test(test_bad_trailer_no_colon),
		cmocka_unit_test(test_bad_trailer_ctrl),
		cmocka_unit_test(test_bad_trailer_too_large),
		cmocka_unit_test(test_bad_too_many_trailers),
		cmocka_unit_test(test_bad_trailer_forbidden),
		cmocka_unit_test(test_bad_truncated_body),
		/* refused targets */
		cmocka_unit_test(test_bad_targets),
		cmocka_unit_test(test_bad_targets_rfc3986),
		/* good messages */
		cmocka_unit_test(test_head_scan_resumes),
		cmocka_unit_test(test_good_get),
		cmocka_unit_test(test_good_post_length),
		cmocka_unit_test(test_good_cl_max),
		cmocka_unit_test(test_good_chunked_request),
		cmocka_unit_test(test_good_proxy_request),
		cmocka_unit_test(test_good_connect),
		cmocka_unit_test(test_good_http10),
		cmocka_unit_test(test_good_leading_crlf),
		cmocka_unit_test(test_good_methods),
		cmocka_unit_test(test_good_pipelined),
		cmocka_unit_test(test_good_responses),
		cmocka_unit_test(test_good_targets),
		cmocka_unit_test(test_good_issue20),
		cmocka_unit_test(test_good_spoofable),
		cmocka_unit_test(test_good_body_length),
		cmocka_unit_test(test_good_body_until_close),
		cmocka_unit_test(test_good_chunked_simple),
		cmocka_unit_test(test_good_chunked_ext_trailers),
		cmocka_unit_test(test_good_trailers_allowed),
		cmocka_unit_test(test_good_chunked_data_looks_like_framing),
		cmocka_unit_test(test_good_chunk_size_max),
		cmocka_unit_test(test_good_messages_split),
		cmocka_unit_test(test_writer),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_rebase),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

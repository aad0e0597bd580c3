/* test_socks5.c: the SOCKS5 parser. Bad inputs first (one test per
 * refusal), then good messages of every kind; every message is also fed
 * whole, split at every offset and byte by byte, with trailing bytes after
 * it, and must give the same result and the same consumed count. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "socks5.h"

/* ---- helpers -------------------------------------------------------- */

enum kind { GREETING, AUTH, REQUEST };

/* What one run produced, in a form that compares with memcmp. */
struct outcome {
	enum gw_socks5_result rc;
	size_t consumed;        /* over all calls */
	enum gw_reason reason;
	char msg[64];
	bool has_rep;
	uint8_t rep;
	uint8_t byte;
	enum gw_socks5_phase phase;
	struct gw_socks5_greeting greeting;
	struct gw_socks5_auth auth;
	struct gw_socks5_request req;
};

static const uint8_t greet_noauth[] = { 5, 1, 0 };
static const uint8_t greet_userpass[] = { 5, 1, 2 };

/* A parser ready to read a message of kind k. */
static void setup(struct gw_socks5_parser *p, enum kind k)
{
	const struct gw_socks5_greeting *g;
	size_t used;

	gw_socks5_parser_init(p);
	if (k == GREETING)
		return;
	assert_int_equal(gw_socks5_parse_greeting(
				 p, k == AUTH ? greet_userpass : greet_noauth,
				 3, &used, &g),
			 GW_SOCKS5_DONE);
	assert_int_equal(used, 3);
}

static enum gw_socks5_result call(struct gw_socks5_parser *p, enum kind k,
				  const uint8_t *in, size_t len, size_t *used)
{
	const struct gw_socks5_greeting *g;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	enum gw_socks5_result rc;

	switch (k) {
	case GREETING:
		rc = gw_socks5_parse_greeting(p, in, len, used, &g);
		assert_true((rc == GW_SOCKS5_DONE) == (g != NULL));
		if (g)
			assert_ptr_equal(g, &p->greeting);
		break;
	case AUTH:
		rc = gw_socks5_parse_auth(p, in, len, used, &a);
		assert_true((rc == GW_SOCKS5_DONE) == (a != NULL));
		if (a)
			assert_ptr_equal(a, &p->auth);
		break;
	default:
		rc = gw_socks5_parse_request(p, in, len, used, &q);
		assert_true((rc == GW_SOCKS5_DONE) == (q != NULL));
		if (q)
			assert_ptr_equal(q, &p->req);
		break;
	}
	assert_true(*used <= len);
	if (rc == GW_SOCKS5_AGAIN)
		assert_int_equal(*used, len);
	return rc;
}

/* Feeds in[0..n) in pieces ending at the offsets cuts[0..ncuts) (then n). */
static void feed(enum kind k, const uint8_t *in, size_t n,
		 const size_t *cuts, size_t ncuts, struct outcome *o)
{
	struct gw_socks5_parser p;
	size_t at = 0, used;

	memset(o, 0, sizeof(*o));
	setup(&p, k);
	o->rc = GW_SOCKS5_AGAIN;
	for (size_t i = 0; i <= ncuts && o->rc == GW_SOCKS5_AGAIN; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		o->rc = call(&p, k, in + at, end - at, &used);
		o->consumed += used;
		at = end;
	}
	o->phase = p.phase;
	if (o->rc == GW_SOCKS5_ERROR) {
		assert_non_null(p.err.msg);
		assert_true(strlen(p.err.msg) < sizeof(o->msg));
		strcpy(o->msg, p.err.msg);
		o->reason = p.err.reason;
		o->has_rep = p.err.has_rep;
		o->rep = p.err.rep;
		o->byte = p.err.byte;
		/* sticky */
		assert_int_equal(call(&p, k, in, n, &used), GW_SOCKS5_ERROR);
		assert_int_equal(used, 0);
	}
	if (o->rc == GW_SOCKS5_DONE) {
		o->greeting = p.greeting;
		o->auth = p.auth;
		o->req = p.req;
	}
}

static void assert_same(const struct outcome *a, const struct outcome *b)
{
	assert_int_equal(a->rc, b->rc);
	assert_int_equal(a->consumed, b->consumed);
	assert_string_equal(a->msg, b->msg);
	assert_memory_equal(a, b, sizeof(*a));
}

/* The whole message, then every two-piece split, then byte by byte; all
 * with `trail` extra bytes after it. Returns the whole-input outcome. */
static void every_split(enum kind k, const uint8_t *msg, size_t n,
			struct outcome *whole)
{
	static const uint8_t trail[] = { 0x05, 0x01, 0x00, 0xde, 0xad };
	uint8_t buf[1024];
	size_t cuts[sizeof(buf)];
	size_t len = n + sizeof(trail);
	struct outcome o;

	assert_true(len <= sizeof(buf));
	memcpy(buf, msg, n);
	memcpy(buf + n, trail, sizeof(trail));

	/* without trailing bytes, fed whole */
	feed(k, buf, n, NULL, 0, whole);
	/* with them: the same, the trailing bytes left alone */
	feed(k, buf, len, NULL, 0, &o);
	assert_same(whole, &o);
	for (size_t c = 0; c <= len; c++) {
		cuts[0] = c;
		feed(k, buf, len, cuts, 1, &o);
		assert_same(whole, &o);
	}
	for (size_t c = 0; c < len; c++)
		cuts[c] = c + 1;
	feed(k, buf, len, cuts, len, &o);
	assert_same(whole, &o);
	/* an empty call first changes nothing */
	cuts[0] = 0;
	cuts[1] = 0;
	feed(k, buf, len, cuts, 2, &o);
	assert_same(whole, &o);
}

static void bad(enum kind k, const uint8_t *msg, size_t n, const char *emsg,
		enum gw_reason reason, bool has_rep, uint8_t rep, uint8_t byte,
		size_t consumed)
{
	struct outcome o;

	every_split(k, msg, n, &o);
	assert_int_equal(o.rc, GW_SOCKS5_ERROR);
	assert_string_equal(o.msg, emsg);
	assert_int_equal(o.reason, reason);
	assert_int_equal(o.has_rep, has_rep);
	if (has_rep)
		assert_int_equal(o.rep, rep);
	assert_int_equal(o.byte, byte);
	assert_int_equal(o.consumed, consumed);
	assert_int_equal(o.phase, GW_SOCKS5_PH_ERROR);
}

/* A message whose length is known, NULs included. */
#define M(lit) (const uint8_t *)(lit), sizeof(lit) - 1

#define BAD_GREETING(name, lit, emsg, byte, consumed)                         \
	static void name(void **state)                                       \
	{                                                                    \
		(void)state;                                                 \
		bad(GREETING, M(lit), emsg, GW_R_BAD_REQUEST, false, 0,      \
		    byte, consumed);                                         \
	}
#define BAD_AUTH(name, lit, emsg, byte, consumed)                             \
	static void name(void **state)                                       \
	{                                                                    \
		(void)state;                                                 \
		bad(AUTH, M(lit), emsg, GW_R_BAD_REQUEST, true, 0x01, byte,  \
		    consumed);                                               \
	}
#define BAD_REQUEST(name, lit, emsg, reason, rep, byte, consumed)             \
	static void name(void **state)                                       \
	{                                                                    \
		(void)state;                                                 \
		bad(REQUEST, M(lit), emsg, reason, true, rep, byte,          \
		    consumed);                                               \
	}
#define MALFORMED(name, lit, emsg, byte, consumed)                            \
	BAD_REQUEST(name, lit, emsg, GW_R_BAD_REQUEST, 0x01, byte, consumed)

/* ---- bad greetings --------------------------------------------------- */

BAD_GREETING(test_bad_greeting_version_4, "\x04\x01\x00", "wrong version 4",
	     4, 0)
BAD_GREETING(test_bad_greeting_version_0, "\x00\x01\x00", "wrong version 0",
	     0, 0)
BAD_GREETING(test_bad_greeting_version_6, "\x06\x01\x00", "wrong version 6",
	     6, 0)
BAD_GREETING(test_bad_greeting_version_255, "\xff\x01\x00",
	     "wrong version 255", 0xff, 0)
BAD_GREETING(test_bad_greeting_http, "CONNECT a:1 HTTP/1.1\r\n",
	     "wrong version 67", 'C', 0)

/* ---- bad auth -------------------------------------------------------- */

BAD_AUTH(test_bad_auth_version_5, "\x05\x01u\x01p", "wrong auth version 5",
	 5, 0)
BAD_AUTH(test_bad_auth_version_0, "\x00\x01u\x01p", "wrong auth version 0",
	 0, 0)
BAD_AUTH(test_bad_auth_version_2, "\x02\x01u\x01p", "wrong auth version 2",
	 2, 0)
BAD_AUTH(test_bad_ulen_0, "\x01\x00\x01p", "username length 0", 0, 1)
BAD_AUTH(test_bad_plen_0, "\x01\x01u\x00", "password length 0", 0, 3)
BAD_AUTH(test_bad_nul_in_user, "\x01\x03u\x00v\x01p", "NUL in username", 0,
	 3)
BAD_AUTH(test_bad_nul_user_first, "\x01\x02\x00v\x01p", "NUL in username",
	 0, 2)
BAD_AUTH(test_bad_nul_user_last, "\x01\x02u\x00\x01p", "NUL in username", 0,
	 3)
BAD_AUTH(test_bad_nul_in_password, "\x01\x01u\x03p\x00q",
	 "NUL in password", 0, 5)
BAD_AUTH(test_bad_nul_password_last, "\x01\x01u\x02p\x00",
	 "NUL in password", 0, 5)

/* ---- bad requests ---------------------------------------------------- */

#define V4 "\x01\x7f\x00\x00\x01\x00\x50"       /* ATYP 127.0.0.1:80 */

MALFORMED(test_bad_request_version_4, "\x04\x01\x00" V4, "wrong version 4",
	  4, 0)
MALFORMED(test_bad_request_version_1, "\x01\x01\x00" V4, "wrong version 1",
	  1, 0)
MALFORMED(test_bad_request_version_0, "\x00\x01\x00" V4, "wrong version 0",
	  0, 0)
MALFORMED(test_bad_rsv, "\x05\x01\x01" V4, "reserved byte not zero", 1, 2)
MALFORMED(test_bad_rsv_ff, "\x05\x01\xff" V4, "reserved byte not zero",
	  0xff, 2)
#define UNKNOWN_CMD "unknown command: only CONNECT"
#define NO_BIND "BIND is not supported: only CONNECT"
#define NO_UDP "UDP ASSOCIATE is not supported: only CONNECT"
BAD_REQUEST(test_bad_cmd_0, "\x05\x00\x00" V4, UNKNOWN_CMD,
	    GW_R_UNSUPPORTED, 0x07, 0, 1)
BAD_REQUEST(test_bad_cmd_4, "\x05\x04\x00" V4, UNKNOWN_CMD,
	    GW_R_UNSUPPORTED, 0x07, 4, 1)
BAD_REQUEST(test_bad_cmd_ff, "\x05\xff\x00" V4, UNKNOWN_CMD,
	    GW_R_UNSUPPORTED, 0x07, 0xff, 1)
/* A command the door does not serve gets 0x07 at its CMD byte, whatever
 * its address: a good one, an unknown ATYP (0x08 for a CONNECT), a bad
 * reserved byte or port (0x01 for a CONNECT), UDP ASSOCIATE's all-zero
 * address and port (RFC 1928 7), or nothing yet. */
BAD_REQUEST(test_bad_bind, "\x05\x02\x00" V4, NO_BIND, GW_R_UNSUPPORTED, 0x07, 2, 1)
BAD_REQUEST(test_bad_bind_atyp_5, "\x05\x02\x00\x05\x7f\x00\x00\x01\x00\x50", NO_BIND,
	    GW_R_UNSUPPORTED, 0x07, 2, 1)
BAD_REQUEST(test_bad_bind_rsv, "\x05\x02\x01" V4, NO_BIND, GW_R_UNSUPPORTED, 0x07, 2, 1)
BAD_REQUEST(test_bad_bind_domain_len_0, "\x05\x02\x00\x03\x00\x00\x50", NO_BIND,
	    GW_R_UNSUPPORTED, 0x07, 2, 1)
BAD_REQUEST(test_bad_bind_alone, "\x05\x02", NO_BIND, GW_R_UNSUPPORTED, 0x07, 2, 1)
BAD_REQUEST(test_bad_udp, "\x05\x03\x00" V4, NO_UDP, GW_R_UNSUPPORTED, 0x07, 3, 1)
BAD_REQUEST(test_bad_udp_zero_address, "\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00", NO_UDP,
	    GW_R_UNSUPPORTED, 0x07, 3, 1)
BAD_REQUEST(test_bad_udp_atyp_2, "\x05\x03\x00\x02\x7f\x00\x00\x01\x00\x50", NO_UDP,
	    GW_R_UNSUPPORTED, 0x07, 3, 1)
BAD_REQUEST(test_bad_cmd_9_atyp_5, "\x05\x09\x00\x05", UNKNOWN_CMD, GW_R_UNSUPPORTED, 0x07, 9,
	    1)
BAD_REQUEST(test_bad_cmd_9_port_0, "\x05\x09\x00\x01\x7f\x00\x00\x01\x00\x00", UNKNOWN_CMD,
	    GW_R_UNSUPPORTED, 0x07, 9, 1)
BAD_REQUEST(test_bad_atyp_0, "\x05\x01\x00\x00\x7f\x00\x00\x01\x00\x50",
	    "address type not supported", GW_R_UNSUPPORTED, 0x08, 0, 3)
BAD_REQUEST(test_bad_atyp_2, "\x05\x01\x00\x02\x7f\x00\x00\x01\x00\x50",
	    "address type not supported", GW_R_UNSUPPORTED, 0x08, 2, 3)
BAD_REQUEST(test_bad_atyp_5, "\x05\x01\x00\x05\x7f\x00\x00\x01\x00\x50",
	    "address type not supported", GW_R_UNSUPPORTED, 0x08, 5, 3)
MALFORMED(test_bad_domain_len_0, "\x05\x01\x00\x03\x00\x00\x50",
	  "domain length 0", 0, 4)
MALFORMED(test_bad_nul_in_domain, "\x05\x01\x00\x03\x03" "a\x00" "c\x00\x50",
	  "NUL in domain", 0, 6)
MALFORMED(test_bad_nul_domain_first, "\x05\x01\x00\x03\x01\x00\x00\x50",
	  "NUL in domain", 0, 5)
MALFORMED(test_bad_port_0_v4, "\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x00",
	  "port 0", 0, 9)
MALFORMED(test_bad_port_0_v6,
	  "\x05\x01\x00\x04" "\x20\x01\x0d\xb8\x00\x00\x00\x00"
	  "\x00\x00\x00\x00\x00\x00\x00\x01" "\x00\x00",
	  "port 0", 0, 21)
MALFORMED(test_bad_port_0_domain, "\x05\x01\x00\x03\x01" "a" "\x00\x00",
	  "port 0", 0, 7)

/* Every other version byte is named in decimal, in all three messages. */
static void test_bad_every_version(void **state)
{
	struct gw_socks5_parser p;
	const struct gw_socks5_greeting *g;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	char want[64];
	size_t used;

	(void)state;
	for (unsigned v = 0; v < 256; v++) {
		uint8_t b = (uint8_t)v;

		gw_socks5_parser_init(&p);
		if (v != 5) {
			assert_int_equal(gw_socks5_parse_greeting(&p, &b, 1,
								  &used, &g),
					 GW_SOCKS5_ERROR);
			snprintf(want, sizeof(want), "wrong version %u", v);
			assert_string_equal(p.err.msg, want);
			setup(&p, REQUEST);
			assert_int_equal(gw_socks5_parse_request(&p, &b, 1,
								 &used, &q),
					 GW_SOCKS5_ERROR);
			assert_string_equal(p.err.msg, want);
		}
		if (v != 1) {
			setup(&p, AUTH);
			assert_int_equal(gw_socks5_parse_auth(&p, &b, 1, &used,
							      &a),
					 GW_SOCKS5_ERROR);
			snprintf(want, sizeof(want), "wrong auth version %u",
				 v);
			assert_string_equal(p.err.msg, want);
		}
	}
}

/* ---- misuse ---------------------------------------------------------- */

/* A refused request still says which command it was (the access line's
 * method); one refused before its command byte says none. */
static void test_bad_request_names_its_command(void **state)
{
	static const struct {
		const char *msg;
		size_t len;
		const char *name;
	} cases[] = {
		{ "\x05\x02\x00" V4, 10, "BIND" },
		{ "\x05\x03\x00" V4, 10, "UDP-ASSOCIATE" },
		{ "\x05\x09\x00" V4, 10, "-" },
		{ "\x05\x01\x07" V4, 10, "CONNECT" },
		{ "\x04\x01\x00" V4, 10, "-" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gw_socks5_parser p;
		const struct gw_socks5_request *q;
		size_t used;

		setup(&p, REQUEST);
		assert_int_equal(gw_socks5_parse_request(&p, (const uint8_t *)cases[i].msg,
							 cases[i].len, &used, &q),
				 GW_SOCKS5_ERROR);
		assert_string_equal(gw_socks5_cmd_name(p.req.cmd), cases[i].name);
	}
	assert_string_equal(gw_socks5_cmd_name(0), "-");
	assert_string_equal(gw_socks5_cmd_name(1), "CONNECT");
}

static void test_bad_out_of_order(void **state)
{
	struct gw_socks5_parser p;
	const struct gw_socks5_request *q;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_greeting *g;
	size_t used = 99;

	(void)state;
	/* a request before the greeting */
	gw_socks5_parser_init(&p);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x05\x01\x00" V4),
						 &used, &q),
			 GW_SOCKS5_ERROR);
	assert_int_equal(used, 0);
	assert_null(q);
	assert_int_equal(p.err.reason, GW_R_INTERNAL);
	assert_false(p.err.has_rep);
	assert_string_equal(p.err.msg, "parser used out of order");

	/* auth after the request started */
	setup(&p, REQUEST);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x05"), &used, &q),
			 GW_SOCKS5_AGAIN);
	assert_int_equal(gw_socks5_parse_auth(&p, M("\x01\x01u\x01p"), &used,
					      &a),
			 GW_SOCKS5_ERROR);
	assert_int_equal(p.err.reason, GW_R_INTERNAL);

	/* a second greeting, a second auth */
	setup(&p, REQUEST);
	assert_int_equal(gw_socks5_parse_greeting(&p, greet_noauth, 3, &used,
						  &g),
			 GW_SOCKS5_ERROR);
	setup(&p, AUTH);
	assert_int_equal(gw_socks5_parse_auth(&p, M("\x01\x01u\x01p"), &used,
					      &a),
			 GW_SOCKS5_DONE);
	assert_int_equal(gw_socks5_parse_auth(&p, M("\x01\x01u\x01p"), &used,
					      &a),
			 GW_SOCKS5_ERROR);
	assert_null(a);

	/* a request after the request */
	setup(&p, REQUEST);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x05\x01\x00" V4),
						 &used, &q),
			 GW_SOCKS5_DONE);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x05\x01\x00" V4),
						 &used, &q),
			 GW_SOCKS5_ERROR);

	/* a wiped parser refuses everything */
	gw_socks5_parser_wipe(&p);
	assert_int_equal(gw_socks5_parse_greeting(&p, greet_noauth, 3, &used,
						  &g),
			 GW_SOCKS5_ERROR);
	assert_int_equal(used, 0);
	assert_string_equal(gw_socks5_phase_name(p.phase), "error");
}

/* ---- good greetings -------------------------------------------------- */

static void good_greeting(const uint8_t *methods, size_t n,
			  struct outcome *o)
{
	uint8_t buf[2 + 255];

	buf[0] = 5;
	buf[1] = (uint8_t)n;
	memcpy(buf + 2, methods, n);
	every_split(GREETING, buf, 2 + n, o);
	assert_int_equal(o->rc, GW_SOCKS5_DONE);
	assert_int_equal(o->consumed, 2 + n);
	assert_int_equal(o->phase, GW_SOCKS5_PH_METHOD);
	assert_int_equal(o->greeting.nmethods, n);
	assert_memory_equal(o->greeting.methods, methods, n);
}

/* No methods: a whole greeting (its two bytes, not one more), that
 * offers nothing: whatever the door accepts, the answer is 0xff. */
static void test_good_greeting_zero_methods(void **state)
{
	static const uint8_t none[1];
	struct outcome o;

	(void)state;
	good_greeting(none, 0, &o);
	assert_false(gw_socks5_offers(&o.greeting, 0x00));
	assert_false(gw_socks5_offers(&o.greeting, 0x02));
	for (unsigned caps = 0; caps < 4; caps++)
		assert_int_equal(gw_socks5_choose_method(&o.greeting, caps & 1, caps & 2), 0xff);
	{
		uint8_t reply[2];

		gw_socks5_method_reply(reply, gw_socks5_choose_method(&o.greeting, true, true));
		assert_memory_equal(reply, "\x05\xff", 2);
	}
}

static void test_good_greeting_each_method(void **state)
{
	struct outcome o;

	(void)state;
	for (unsigned m = 0; m < 256; m++) {
		uint8_t b = (uint8_t)m;

		good_greeting(&b, 1, &o);
		assert_true(gw_socks5_offers(&o.greeting, b));
		assert_false(gw_socks5_offers(&o.greeting, (uint8_t)(b + 1)));
		assert_int_equal(gw_socks5_choose_method(&o.greeting, true,
							 true),
				 m == 0 || m == 2 ? m : 0xff);
		assert_int_equal(gw_socks5_choose_method(&o.greeting, false,
							 false),
				 0xff);
	}
}

static void test_good_greeting_255_methods(void **state)
{
	uint8_t m[255];
	struct outcome o;

	(void)state;
	for (unsigned i = 0; i < 255; i++)
		m[i] = (uint8_t)(255 - i);      /* 255, 254, ..., 1 */
	good_greeting(m, 255, &o);
	assert_int_equal(gw_socks5_choose_method(&o.greeting, true, true),
			 0x02);
	assert_false(gw_socks5_offers(&o.greeting, 0));
	assert_int_equal(gw_socks5_choose_method(&o.greeting, true, false),
			 0xff);
	for (unsigned i = 0; i < 255; i++)
		m[i] = (uint8_t)i;              /* 0, 1, ..., 254 */
	good_greeting(m, 255, &o);
	assert_int_equal(gw_socks5_choose_method(&o.greeting, true, true),
			 0x00);
	assert_int_equal(gw_socks5_choose_method(&o.greeting, false, true),
			 0x02);
}

/* Every list over {0x00, 0x01, 0x02, 0x80} of 1..4 methods (duplicates
 * included), against every pair of door capabilities: the choice is the
 * first acceptable method in the client's order. */
static void test_good_greeting_method_lists(void **state)
{
	static const uint8_t alphabet[] = { 0x00, 0x01, 0x02, 0x80 };
	struct outcome o;

	(void)state;
	for (unsigned n = 1; n <= 4; n++) {
		unsigned total = 1;

		for (unsigned i = 0; i < n; i++)
			total *= 4;
		for (unsigned code = 0; code < total; code++) {
			uint8_t m[4];
			unsigned c = code;

			for (unsigned i = 0; i < n; i++, c /= 4)
				m[i] = alphabet[c % 4];
			good_greeting(m, n, &o);
			for (unsigned caps = 0; caps < 4; caps++) {
				bool na = caps & 1, up = caps & 2;
				uint8_t want = 0xff;

				for (unsigned i = 0; i < n; i++)
					if ((m[i] == 0 && na) ||
					    (m[i] == 2 && up)) {
						want = m[i];
						break;
					}
				assert_int_equal(gw_socks5_choose_method(
							 &o.greeting, na, up),
						 want);
			}
		}
	}
}

/* ---- good auth ------------------------------------------------------- */

static void good_auth(const char *user, size_t ulen, const char *pass,
		      size_t plen)
{
	uint8_t buf[3 + 255 + 255];
	struct outcome o;

	buf[0] = 1;
	buf[1] = (uint8_t)ulen;
	memcpy(buf + 2, user, ulen);
	buf[2 + ulen] = (uint8_t)plen;
	memcpy(buf + 3 + ulen, pass, plen);
	every_split(AUTH, buf, 3 + ulen + plen, &o);
	assert_int_equal(o.rc, GW_SOCKS5_DONE);
	assert_int_equal(o.consumed, 3 + ulen + plen);
	assert_int_equal(o.phase, GW_SOCKS5_PH_AUTHED);
	assert_int_equal(o.auth.user_len, ulen);
	assert_memory_equal(o.auth.user, user, ulen);
	assert_int_equal(o.auth.user[ulen], '\0');
	assert_int_equal(o.auth.pass_len, plen);
	assert_memory_equal(o.auth.pass, pass, plen);
	assert_int_equal(o.auth.pass[plen], '\0');
}

static void test_good_auth(void **state)
{
	char u[255], pw[255];

	(void)state;
	good_auth("u", 1, "p", 1);
	good_auth("alice", 5, "correct horse battery staple", 28);
	for (unsigned i = 0; i < 255; i++) {
		u[i] = (char)(1 + i);           /* 0x01..0xff: every non-NUL */
		pw[i] = (char)(255 - i);
	}
	good_auth(u, 255, pw, 255);
	good_auth(u, 255, "x", 1);
	good_auth("x", 1, pw, 255);
}

static void test_good_auth_then_request(void **state)
{
	struct gw_socks5_parser p;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	size_t used;

	(void)state;
	setup(&p, AUTH);
	assert_int_equal(gw_socks5_parse_auth(&p, M("\x01\x02us\x02pw"), &used,
					      &a),
			 GW_SOCKS5_DONE);
	assert_string_equal(a->user, "us");
	assert_string_equal(a->pass, "pw");
	gw_socks5_forget_password(&p);
	assert_int_equal(a->pass_len, 0);
	assert_string_equal(a->pass, "");
	assert_string_equal(a->user, "us");

	/* starting the request wipes the password even if the door did not */
	setup(&p, AUTH);
	assert_int_equal(gw_socks5_parse_auth(&p, M("\x01\x02us\x02pw"), &used,
					      &a),
			 GW_SOCKS5_DONE);
	assert_int_equal(p.phase, GW_SOCKS5_PH_AUTHED);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x05"), &used, &q),
			 GW_SOCKS5_AGAIN);
	assert_int_equal(p.auth.pass_len, 0);
	assert_int_equal(p.auth.pass[0], 0);
	assert_int_equal(p.auth.pass[1], 0);
	assert_int_equal(gw_socks5_parse_request(&p, M("\x01\x00" V4), &used,
						 &q),
			 GW_SOCKS5_DONE);
	assert_int_equal(used, 9);
	assert_int_equal(q->port, 80);
	assert_int_equal(p.phase, GW_SOCKS5_PH_DONE);
	assert_string_equal(p.auth.user, "us");
}

/* ---- good requests --------------------------------------------------- */

static void good_request(const uint8_t *msg, size_t n, struct outcome *o)
{
	every_split(REQUEST, msg, n, o);
	assert_int_equal(o->rc, GW_SOCKS5_DONE);
	assert_int_equal(o->consumed, n);
	assert_int_equal(o->phase, GW_SOCKS5_PH_DONE);
}

static void test_good_request_ipv4(void **state)
{
	struct outcome o;
	struct sockaddr_storage ss;
	struct sockaddr_in sin;
	socklen_t sl;

	(void)state;
	good_request(M("\x05\x01\x00\x01\xc0\x00\x02\x01\x01\xbb"), &o);
	assert_int_equal(o.req.cmd, GW_SOCKS5_CMD_CONNECT);
	assert_int_equal(o.req.atyp, GW_SOCKS5_ATYP_IPV4);
	assert_memory_equal(o.req.addr, "\xc0\x00\x02\x01", 4);
	assert_int_equal(o.req.port, 443);
	assert_int_equal(o.req.host_len, 0);
	assert_int_equal(gw_socks5_request_sockaddr(&o.req, &ss, &sl), 0);
	assert_int_equal(sl, sizeof(sin));
	memcpy(&sin, &ss, sizeof(sin));
	assert_int_equal(sin.sin_family, AF_INET);
	assert_int_equal(ntohs(sin.sin_port), 443);
	assert_int_equal(ntohl(sin.sin_addr.s_addr), 0xc0000201);

	/* port bytes 0x01 0x00, 0xff 0xff, 0x00 0x01 */
	good_request(M("\x05\x01\x00\x01\x00\x00\x00\x00\x01\x00"), &o);
	assert_int_equal(o.req.port, 256);
	good_request(M("\x05\x01\x00\x01\xff\xff\xff\xff\xff\xff"), &o);
	assert_int_equal(o.req.port, 65535);
	good_request(M("\x05\x01\x00\x01\x00\x00\x00\x00\x00\x01"), &o);
	assert_int_equal(o.req.port, 1);
}

static void test_good_request_ipv6(void **state)
{
	static const uint8_t a6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
					0, 0, 0, 0, 0, 0, 0, 0x01 };
	struct outcome o;
	struct sockaddr_storage ss;
	struct sockaddr_in6 sin6;
	socklen_t sl;

	(void)state;
	good_request(M("\x05\x01\x00\x04"
		       "\x20\x01\x0d\xb8\x00\x00\x00\x00"
		       "\x00\x00\x00\x00\x00\x00\x00\x01"
		       "\x00\x50"),
		     &o);
	assert_int_equal(o.req.atyp, GW_SOCKS5_ATYP_IPV6);
	assert_memory_equal(o.req.addr, a6, 16);
	assert_int_equal(o.req.port, 80);
	assert_int_equal(gw_socks5_request_sockaddr(&o.req, &ss, &sl), 0);
	assert_int_equal(sl, sizeof(sin6));
	memcpy(&sin6, &ss, sizeof(sin6));
	assert_int_equal(sin6.sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6.sin6_port), 80);
	assert_memory_equal(&sin6.sin6_addr, a6, 16);

	/* all zeros but the port; all ones */
	good_request(M("\x05\x01\x00\x04"
		       "\x00\x00\x00\x00\x00\x00\x00\x00"
		       "\x00\x00\x00\x00\x00\x00\x00\x00"
		       "\x00\x01"),
		     &o);
	good_request(M("\x05\x01\x00\x04"
		       "\xff\xff\xff\xff\xff\xff\xff\xff"
		       "\xff\xff\xff\xff\xff\xff\xff\xff"
		       "\xff\xff"),
		     &o);
	assert_int_equal(o.req.port, 65535);
}

static void good_domain(const char *name, size_t n, uint16_t port)
{
	uint8_t buf[5 + 255 + 2];
	struct outcome o;
	struct sockaddr_storage ss;
	socklen_t sl;

	buf[0] = 5;
	buf[1] = 1;
	buf[2] = 0;
	buf[3] = 3;
	buf[4] = (uint8_t)n;
	memcpy(buf + 5, name, n);
	buf[5 + n] = (uint8_t)(port >> 8);
	buf[6 + n] = (uint8_t)port;
	good_request(buf, 7 + n, &o);
	assert_int_equal(o.req.atyp, GW_SOCKS5_ATYP_DOMAIN);
	assert_int_equal(o.req.host_len, n);
	assert_memory_equal(o.req.host, name, n);
	assert_int_equal(o.req.host[n], '\0');
	assert_int_equal(o.req.port, port);
	assert_int_equal(gw_socks5_request_sockaddr(&o.req, &ss, &sl),
			 -EINVAL);
}

static void test_good_request_domain(void **state)
{
	char name[255];

	(void)state;
	good_domain("a", 1, 80);
	good_domain("example.com", 11, 443);
	/* not validated here: the policy module does */
	good_domain("..UPPER_ and spaces..", 21, 8080);
	for (unsigned i = 0; i < 255; i++)
		name[i] = (char)(1 + i);
	good_domain(name, 255, 65535);
	memset(name, 'x', sizeof(name));
	good_domain(name, 255, 1);
}

/* ---- mapping, names, replies ----------------------------------------- */

static void test_rep_for(void **state)
{
	static const enum gw_reason ruleset[] = {
		GW_R_NOT_ALLOWED, GW_R_DENIED,     GW_R_PRIVATE_ADDRESS,
		GW_R_BAD_HOST,    GW_R_NON_ASCII_HOST, GW_R_USERINFO,
		GW_R_BAD_PORT,    GW_R_UNKNOWN_CLIENT, GW_R_AUTH_REQUIRED,
		GW_R_AUTH_FAILED,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ruleset) / sizeof(ruleset[0]); i++)
		assert_int_equal(gw_socks5_rep_for(ruleset[i]), 0x02);
	assert_int_equal(gw_socks5_rep_for(GW_R_NONE), 0x00);
	assert_int_equal(gw_socks5_rep_for(GW_R_DNS_NXDOMAIN), 0x04);
	assert_int_equal(gw_socks5_rep_for(GW_R_DNS_FAILED), 0x04);
	assert_int_equal(gw_socks5_rep_for(GW_R_CONNECT_FAILED), 0x05);
	assert_int_equal(gw_socks5_rep_for(GW_R_CONNECT_TIMEOUT), 0x06);
	assert_int_equal(gw_socks5_rep_for(GW_R_DNS_TIMEOUT), 0x06);
	assert_int_equal(gw_socks5_rep_for(GW_R_UNSUPPORTED), 0x07);
	assert_int_equal(gw_socks5_rep_for(GW_R_TOO_MANY_CONNECTIONS), 0x01);
	assert_int_equal(gw_socks5_rep_for(GW_R_INTERNAL), 0x01);
	assert_int_equal(gw_socks5_rep_for(GW_R_BAD_REQUEST), 0x01);
	assert_int_equal(gw_socks5_rep_for(GW_R__COUNT), 0x01);
	for (int r = 0; r < GW_R__COUNT; r++)
		assert_true(gw_socks5_rep_for((enum gw_reason)r) <= 0x08);

	assert_int_equal(gw_socks5_rep_for_errno(ECONNREFUSED), 0x05);
	assert_int_equal(gw_socks5_rep_for_errno(-ECONNREFUSED), 0x05);
	assert_int_equal(gw_socks5_rep_for_errno(ENETUNREACH), 0x03);
	assert_int_equal(gw_socks5_rep_for_errno(-ENETDOWN), 0x03);
	assert_int_equal(gw_socks5_rep_for_errno(EHOSTUNREACH), 0x04);
	assert_int_equal(gw_socks5_rep_for_errno(EHOSTDOWN), 0x04);
	assert_int_equal(gw_socks5_rep_for_errno(-ETIMEDOUT), 0x06);
	assert_int_equal(gw_socks5_rep_for_errno(EACCES), 0x01);
	assert_int_equal(gw_socks5_rep_for_errno(0), 0x01);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(gw_socks5_rep_name(0x00), "succeeded");
	assert_string_equal(gw_socks5_rep_name(0x02),
			    "not-allowed-by-ruleset");
	assert_string_equal(gw_socks5_rep_name(0x06), "ttl-expired");
	assert_string_equal(gw_socks5_rep_name(0x08),
			    "address-type-not-supported");
	assert_string_equal(gw_socks5_rep_name(0x09), "?");
	assert_string_equal(gw_socks5_rep_name(0xff), "?");
	for (unsigned r = 0; r <= 8; r++)
		assert_true(strlen(gw_socks5_rep_name((uint8_t)r)) > 1);
	assert_string_equal(gw_socks5_phase_name(GW_SOCKS5_PH_GREETING),
			    "greeting");
	assert_string_equal(gw_socks5_phase_name(GW_SOCKS5_PH_AUTHED),
			    "authed");
	assert_string_equal(gw_socks5_phase_name(GW_SOCKS5_PH__COUNT), "?");
}

static void test_replies(void **state)
{
	uint8_t out[GW_SOCKS5_REPLY_MAX];
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_storage ss;

	(void)state;
	gw_socks5_method_reply(out, 0x02);
	assert_memory_equal(out, "\x05\x02", 2);
	gw_socks5_method_reply(out, 0xff);
	assert_memory_equal(out, "\x05\xff", 2);
	gw_socks5_auth_reply(out, true);
	assert_memory_equal(out, "\x01\x00", 2);
	gw_socks5_auth_reply(out, false);
	assert_memory_equal(out, "\x01\x01", 2);

	assert_int_equal(gw_socks5_reply(out, sizeof(out), 0x02, NULL), 10);
	assert_memory_equal(out, "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00",
			    10);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(40000);
	sin.sin_addr.s_addr = htonl(0x0a000001);
	assert_int_equal(gw_socks5_reply(out, sizeof(out), 0x00,
					 (struct sockaddr *)&sin),
			 10);
	assert_memory_equal(out, "\x05\x00\x00\x01\x0a\x00\x00\x01\x9c\x40",
			    10);
	assert_int_equal(gw_socks5_reply(out, 9, 0x00,
					 (struct sockaddr *)&sin),
			 -ENOSPC);
	assert_int_equal(gw_socks5_reply(out, 10, 0x00,
					 (struct sockaddr *)&sin),
			 10);

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(1080);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::2", &sin6.sin6_addr),
			 1);
	assert_int_equal(gw_socks5_reply(out, sizeof(out), 0x05,
					 (struct sockaddr *)&sin6),
			 22);
	assert_memory_equal(out,
			    "\x05\x05\x00\x04"
			    "\x20\x01\x0d\xb8\x00\x00\x00\x00"
			    "\x00\x00\x00\x00\x00\x00\x00\x02"
			    "\x04\x38",
			    22);
	assert_int_equal(gw_socks5_reply(out, 21, 0x00,
					 (struct sockaddr *)&sin6),
			 -ENOSPC);

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(gw_socks5_reply(out, sizeof(out), 0x00,
					 (struct sockaddr *)&ss),
			 -EAFNOSUPPORT);
	assert_int_equal(out[0], 0xaa);
}

/* A whole conversation in one buffer, as a door reading greedily would
 * see it: each call stops at its message's end. */
static void test_consumed_stops_at_message_end(void **state)
{
	static const uint8_t all[] = {
		5, 2, 0, 2,                     /* greeting */
		1, 1, 'u', 1, 'p',              /* auth */
		5, 1, 0, 3, 1, 'h', 0, 80,      /* request */
		0xee,                           /* trailing */
	};
	struct gw_socks5_parser p;
	const struct gw_socks5_greeting *g;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	size_t at = 0, used;

	(void)state;
	gw_socks5_parser_init(&p);
	assert_int_equal(gw_socks5_parse_greeting(&p, all, sizeof(all), &used,
						  &g),
			 GW_SOCKS5_DONE);
	assert_int_equal(used, 4);
	assert_int_equal(gw_socks5_choose_method(g, false, true), 2);
	at += used;
	assert_int_equal(gw_socks5_parse_auth(&p, all + at, sizeof(all) - at,
					      &used, &a),
			 GW_SOCKS5_DONE);
	assert_int_equal(used, 5);
	at += used;
	assert_int_equal(gw_socks5_parse_request(&p, all + at,
						 sizeof(all) - at, &used, &q),
			 GW_SOCKS5_DONE);
	assert_int_equal(used, 8);
	at += used;
	assert_int_equal(sizeof(all) - at, 1);
	assert_string_equal(q->host, "h");

	/* a zero-length call is harmless and needs no buffer */
	gw_socks5_parser_init(&p);
	assert_int_equal(gw_socks5_parse_greeting(&p, NULL, 0, &used, &g),
			 GW_SOCKS5_AGAIN);
	assert_int_equal(used, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_greeting_version_4),
		cmocka_unit_test(test_bad_greeting_version_0),
		cmocka_unit_test(test_bad_greeting_version_6),
		cmocka_unit_test(test_bad_greeting_version_255),
		cmocka_unit_test(test_bad_greeting_http),
		cmocka_unit_test(test_bad_auth_version_5),
		cmocka_unit_test(test_bad_auth_version_0),
		cmocka_unit_test(test_bad_auth_version_2),
		cmocka_unit_test(test_bad_ulen_0),
		cmocka_unit_test(test_bad_plen_0),
		cmocka_unit_test(test_bad_nul_in_user),
		cmocka_unit_test(test_bad_nul_user_first),
		cmocka_unit_test(test_bad_nul_user_last),
		cmocka_unit_test(test_bad_nul_in_password),
		cmocka_unit_test(test_bad_nul_password_last),
		cmocka_unit_test(test_bad_request_version_4),
		cmocka_unit_test(test_bad_request_version_1),
		cmocka_unit_test(test_bad_request_version_0),
		cmocka_unit_test(test_bad_rsv),
		cmocka_unit_test(test_bad_rsv_ff),
		cmocka_unit_test(test_bad_cmd_0),
		cmocka_unit_test(test_bad_cmd_4),
		cmocka_unit_test(test_bad_cmd_ff),
		cmocka_unit_test(test_bad_bind),
		cmocka_unit_test(test_bad_bind_atyp_5),
		cmocka_unit_test(test_bad_bind_rsv),
		cmocka_unit_test(test_bad_bind_domain_len_0),
		cmocka_unit_test(test_bad_bind_alone),
		cmocka_unit_test(test_bad_udp),
		cmocka_unit_test(test_bad_udp_zero_address),
		cmocka_unit_test(test_bad_udp_atyp_2),
		cmocka_unit_test(test_bad_cmd_9_atyp_5),
		cmocka_unit_test(test_bad_cmd_9_port_0),
		cmocka_unit_test(test_bad_atyp_0),
		cmocka_unit_test(test_bad_atyp_2),
		cmocka_unit_test(test_bad_atyp_5),
		cmocka_unit_test(test_bad_domain_len_0),
		cmocka_unit_test(test_bad_nul_in_domain),
		cmocka_unit_test(test_bad_nul_domain_first),
		cmocka_unit_test(test_bad_port_0_v4),
		cmocka_unit_test(test_bad_port_0_v6),
		cmocka_unit_test(test_bad_port_0_domain),
		cmocka_unit_test(test_bad_every_version),
		cmocka_unit_test(test_bad_out_of_order),
		cmocka_unit_test(test_bad_request_names_its_command),
		cmocka_unit_test(test_good_greeting_zero_methods),
		cmocka_unit_test(test_good_greeting_each_method),
		cmocka_unit_test(test_good_greeting_255_methods),
		cmocka_unit_test(test_good_greeting_method_lists),
		cmocka_unit_test(test_good_auth),
		cmocka_unit_test(test_good_auth_then_request),
		cmocka_unit_test(test_good_request_ipv4),
		cmocka_unit_test(test_good_request_ipv6),
		cmocka_unit_test(test_good_request_domain),
		cmocka_unit_test(test_rep_for),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_replies),
		cmocka_unit_test(test_consumed_stops_at_message_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

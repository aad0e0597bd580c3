/* fuzz_socks5.c: libFuzzer target for gateway/socks5.c.
 *
 * Input: two header bytes, then the client's byte stream. The header picks
 * the piece sizes (a cycle the bytes define) and what the door accepts
 * (bit 0 of the second byte: no-auth, bit 1: username/password). The stream
 * is read as a greeting, then, if the door would choose 0x02, an RFC 1929
 * sub-negotiation, then a request, each message where the previous one
 * ended (an optimistic client sends them all at once). Two parsers run
 * side by side: one fed the stream in pieces, one fed all that remains at
 * once. Besides memory errors it checks the contracts: consumed never
 * exceeds the input, AGAIN consumes everything, both parsers agree on
 * result, consumed count, error and fields, only CONNECT parses, and any
 * other command is refused with 0x07 at its CMD byte.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "fuzz.h"

/* by path: the CMake target links no library that exports gateway/ */
#include "socks5.h"


enum kind { GREETING, AUTH, REQUEST };

struct pieces {
	uint8_t a, b;
	unsigned i;
};

/* 1..16 bytes, varying call by call */
static size_t next_piece(struct pieces *ps)
{
	size_t n = 1 + (size_t)((ps->a + ps->i * ps->b) & 0x0f);

	ps->i++;
	return n;
}

static enum gw_socks5_result call(struct gw_socks5_parser *p, enum kind k,
				  const uint8_t *in, size_t len, size_t *used)
{
	const struct gw_socks5_greeting *g;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	enum gw_socks5_result rc;
	const void *out;

	*used = (size_t)-1;
	if (k == GREETING) {
		rc = gw_socks5_parse_greeting(p, in, len, used, &g);
		out = g;
	} else if (k == AUTH) {
		rc = gw_socks5_parse_auth(p, in, len, used, &a);
		out = a;
	} else {
		rc = gw_socks5_parse_request(p, in, len, used, &q);
		out = q;
	}
	CHECK(*used <= len);
	CHECK(rc != GW_SOCKS5_AGAIN || *used == len);
	CHECK((rc == GW_SOCKS5_DONE) == (out != NULL));
	if (rc == GW_SOCKS5_ERROR) {
		CHECK(p->phase == GW_SOCKS5_PH_ERROR && p->err.msg != NULL);
		CHECK(!p->err.has_rep || p->err.rep <= 0x08);
	}
	return rc;
}

/* Whole: one call with everything. */
static enum gw_socks5_result whole(struct gw_socks5_parser *p, enum kind k,
				   const uint8_t *in, size_t len,
				   size_t *consumed)
{
	return call(p, k, in, len, consumed);
}

/* In pieces until the message ends or the input does. */
static enum gw_socks5_result split(struct gw_socks5_parser *p, enum kind k,
				   const uint8_t *in, size_t len,
				   struct pieces *ps, size_t *consumed)
{
	enum gw_socks5_result rc = GW_SOCKS5_AGAIN;
	size_t at = 0, used;

	*consumed = 0;
	do {
		size_t n = next_piece(ps);

		if (n > len - at)
			n = len - at;
		rc = call(p, k, in + at, n, &used);
		*consumed += used;
		at += n;
	} while (rc == GW_SOCKS5_AGAIN && at < len);
	return rc;
}

static void check_fields(const struct gw_socks5_parser *p, enum kind k)
{
	if (k == GREETING) {
		CHECK(p->greeting.nmethods <= GW_SOCKS5_MAX_FIELD);
	} else if (k == AUTH) {
		const struct gw_socks5_auth *a = &p->auth;

		CHECK(a->user_len >= 1 && a->user_len <= GW_SOCKS5_MAX_FIELD);
		CHECK(a->pass_len >= 1 && a->pass_len <= GW_SOCKS5_MAX_FIELD);
		CHECK(strlen(a->user) == a->user_len);
		CHECK(strlen(a->pass) == a->pass_len);
	} else {
		const struct gw_socks5_request *q = &p->req;
		struct sockaddr_storage ss;
		socklen_t sl;
		uint8_t out[GW_SOCKS5_REPLY_MAX];
		int n;

		/* only CONNECT parses */
		CHECK(q->cmd == GW_SOCKS5_CMD_CONNECT && q->port != 0);
		CHECK(q->atyp == 1 || q->atyp == 3 || q->atyp == 4);
		if (q->atyp == GW_SOCKS5_ATYP_DOMAIN) {
			CHECK(q->host_len >= 1 && strlen(q->host) == q->host_len);
			CHECK(gw_socks5_request_sockaddr(q, &ss, &sl) < 0);
		} else {
			CHECK(gw_socks5_request_sockaddr(q, &ss, &sl) == 0);
			n = gw_socks5_reply(out, sizeof(out), 0,
					    (const struct sockaddr *)&ss);
			CHECK(n == (q->atyp == GW_SOCKS5_ATYP_IPV4 ? 10 : 22));
			CHECK(memcmp(out + 4, q->addr, (size_t)n - 6) == 0);
			CHECK(out[n - 2] == q->port >> 8 &&
			      out[n - 1] == (q->port & 0xff));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_socks5_parser pw, ps;
	struct pieces pcs;
	const uint8_t *s;
	size_t len, at = 0;
	bool can_noauth, can_userpass;
	enum kind k = GREETING;

	if (size < 2)
		return 0;
	pcs.a = data[0];
	pcs.b = data[1];
	pcs.i = 0;
	can_noauth = data[1] & 1;
	can_userpass = data[1] & 2;
	s = data + 2;
	len = size - 2;

	gw_socks5_parser_init(&pw);
	gw_socks5_parser_init(&ps);
	for (;;) {
		enum gw_socks5_result rw, rs;
		size_t cw, cs;
		uint8_t m;

		rw = whole(&pw, k, s + at, len - at, &cw);
		rs = split(&ps, k, s + at, len - at, &pcs, &cs);
		CHECK(rw == rs && cw == cs && pw.phase == ps.phase);
		CHECK(at + cw <= len);
		if (rw == GW_SOCKS5_ERROR) {
			CHECK(pw.err.reason == ps.err.reason &&
			      strcmp(pw.err.msg, ps.err.msg) == 0 &&
			      pw.err.has_rep == ps.err.has_rep &&
			      pw.err.rep == ps.err.rep &&
			      pw.err.byte == ps.err.byte);
			CHECK(pw.err.has_rep == (k != GREETING));
			/* A request whose CMD is not CONNECT gets 0x07 at
			 * its CMD byte, whatever follows it. */
			if (k == REQUEST && len - at > 1 && s[at] == GW_SOCKS5_VERSION &&
			    s[at + 1] != GW_SOCKS5_CMD_CONNECT)
				CHECK(cw == 1 && pw.err.reason == GW_R_UNSUPPORTED &&
				      pw.err.rep == GW_SOCKS5_REP_CMD_UNSUPPORTED);
			(void)gw_socks5_rep_name(pw.err.rep);
			break;
		}
		if (rw == GW_SOCKS5_AGAIN) {
			CHECK(at + cw == len);
			break;
		}
		at += cw;
		check_fields(&pw, k);
		if (k == GREETING) {
			CHECK(memcmp(&pw.greeting, &ps.greeting,
				     sizeof(pw.greeting)) == 0);
			m = gw_socks5_choose_method(&pw.greeting, can_noauth,
						    can_userpass);
			if (m == GW_SOCKS5_METHOD_NONE)
				break;
			CHECK(gw_socks5_offers(&pw.greeting, m));
			k = m == GW_SOCKS5_METHOD_USERPASS ? AUTH : REQUEST;
		} else if (k == AUTH) {
			CHECK(memcmp(&pw.auth, &ps.auth, sizeof(pw.auth)) == 0);
			gw_socks5_forget_password(&pw);
			k = REQUEST;
		} else {
			CHECK(memcmp(&pw.req, &ps.req, sizeof(pw.req)) == 0);
			CHECK(pw.phase == GW_SOCKS5_PH_DONE);
			break;
		}
	}
	gw_socks5_parser_wipe(&pw);
	gw_socks5_parser_wipe(&ps);
	return 0;
}

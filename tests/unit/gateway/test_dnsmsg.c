/* test_dnsmsg.c: the DNS door's message parser and writer. Bad inputs
 * first (each refusal, with what the door answers), then good queries and
 * the answers written for them, read back by an independent decoder of
 * the wire format written here. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dnsmsg.h"

/* A query: header (id 0x1234, RD), then the given question bytes and
 * additional records; counts given. */
static size_t
build(uint8_t *out, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns, uint16_t ar,
      const void *rest, size_t restlen)
{
	uint8_t h[12] = { 0x12, 0x34, (uint8_t)(flags >> 8), (uint8_t)flags, (uint8_t)(qd >> 8),
			  (uint8_t)qd, (uint8_t)(an >> 8), (uint8_t)an, (uint8_t)(ns >> 8),
			  (uint8_t)ns, (uint8_t)(ar >> 8), (uint8_t)ar };

	memcpy(out, h, 12);
	memcpy(out + 12, rest, restlen);
	return 12 + restlen;
}

/* example.com A IN */
static const uint8_t q_example[] = { 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
				     0, 1, 0, 1 };
/* ... with an OPT: udp 4096, version 0, DO */
static const uint8_t q_example_opt[] = { 7, 'E', 'x', 'A', 'm', 'p', 'l', 'e', 3, 'C', 'O', 'M', 0,
					 0, 1, 0, 1,
					 0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 4, 0, 10, 0, 0 };

static enum gw_dns_parse
parse(const uint8_t *m, size_t n, struct gw_dns_query *q)
{
	return gw_dns_query_parse(m, n, q);
}

static void
expect(const uint8_t *m, size_t n, enum gw_dns_parse want, enum gw_dns_rcode rc,
       const char *why)
{
	struct gw_dns_query q;
	enum gw_dns_parse got = parse(m, n, &q);

	if (got != want || (want == GW_DNS_ERROR && q.rcode != rc) ||
	    (why && (!q.why || strcmp(q.why, why) != 0)))
		fail_msg("got %d rcode %d (%s), wanted %d rcode %d (%s)", got, q.rcode,
			 q.why ? q.why : "-", want, rc, why ? why : "-");
}

static void
test_refused(void **state)
{
	uint8_t m[600], big[300];
	size_t n;

	(void)state;
	expect(NULL, 0, GW_DNS_DROP, 0, "shorter than a header");
	expect((const uint8_t *)"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00", 11, GW_DNS_DROP, 0,
	       "shorter than a header");
	n = build(m, 0x8180, 1, 0, 0, 0, q_example, sizeof(q_example));
	expect(m, n, GW_DNS_DROP, 0, "a response, not a query");
	n = build(m, 0x2100, 1, 0, 0, 0, q_example, sizeof(q_example));   /* opcode 4 NOTIFY */
	expect(m, n, GW_DNS_ERROR, GW_DNS_NOTIMP, "an opcode other than QUERY");
	n = build(m, 0x0100, 0, 0, 0, 0, "", 0);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "not exactly one question");
	n = build(m, 0x0100, 2, 0, 0, 0, q_example, sizeof(q_example));
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "not exactly one question");
	n = build(m, 0x0100, 1, 1, 0, 0, q_example, sizeof(q_example));
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "answer or authority records in a query");
	n = build(m, 0x0100, 1, 0, 1, 0, q_example, sizeof(q_example));
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "answer or authority records in a query");
	n = build(m, 0x0100, 1, 0, 0, 2, q_example, sizeof(q_example));
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "additional records other than one OPT");
	n = build(m, 0x0100, 1, 0, 0, 0, "\xc0\x0c\x00\x01\x00\x01", 6);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "a compression pointer in the question");
	n = build(m, 0x0100, 1, 0, 0, 0, "\x41\x61\x00\x00\x01\x00\x01", 7);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "a reserved label type");
	n = build(m, 0x0100, 1, 0, 0, 0, "\x07\x65\x78", 3);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "a truncated name");
	n = build(m, 0x0100, 1, 0, 0, 0, q_example, sizeof(q_example) - 1);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "a truncated question");
	n = build(m, 0x0100, 1, 0, 0, 0, q_example, sizeof(q_example));
	m[n++] = 0;
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "bytes after the message");
	/* 4 labels of 63 and the root: 257 octets */
	for (size_t i = 0; i < 4; i++) {
		big[64 * i] = 63;
		memset(big + 64 * i + 1, 'a', 63);
	}
	big[256] = 0;
	n = build(m, 0x0100, 1, 0, 0, 0, big, 257);
	expect(m, n, GW_DNS_ERROR, GW_DNS_FORMERR, "a name over 255 octets");
	/* ... and 255 exactly is a name */
	big[192] = 61;
	big[254] = 0;
	n = build(m, 0x0100, 1, 0, 0, 0, big, 255);
	memcpy(m + n, "\x00\x01\x00\x01", 4);
	expect(m, n + 4, GW_DNS_QUERY, 0, NULL);
	/* OPT: not OPT, truncated, bad options, version 1 */
	n = build(m, 0x0100, 1, 0, 0, 1, q_example, sizeof(q_example));
	memcpy(m + n, "\x00\x00\x01\x00\x01\x00\x00\x00\x00\x00\x00", 11);
	expect(m, n + 11, GW_DNS_ERROR, GW_DNS_FORMERR, "an additional record that is not OPT");
	memcpy(m + n, "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00", 10);
	expect(m, n + 10, GW_DNS_ERROR, GW_DNS_FORMERR, "a truncated additional record");
	memcpy(m + n, "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x05\x00\x0a\x00\x05\x01", 16);
	expect(m, n + 16, GW_DNS_ERROR, GW_DNS_FORMERR, "a malformed EDNS option");
	memcpy(m + n, "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x08\x00\x0a\x00\x04\x01", 16);
	expect(m, n + 16, GW_DNS_ERROR, GW_DNS_FORMERR, "a truncated OPT record");
	memcpy(m + n, "\x00\x00\x29\x10\x00\x00\x01\x00\x00\x00\x00", 11);
	expect(m, n + 11, GW_DNS_ERROR, GW_DNS_BADVERS, "an EDNS version other than 0");
}

/* Names that parse but are no host. */
static void
test_names_not_hosts(void **state)
{
	static const struct {
		const uint8_t *q;
		size_t n;
		const char *name;
	} cases[] = {
		{ (const uint8_t *)"\x00\x00\x01\x00\x01", 5, "" },
		{ (const uint8_t *)"\x03\x61\x2e\x62\x03\x63\x6f\x6d\x00\x00\x01\x00\x01", 13, "a.b.com" },
		{ (const uint8_t *)"\x03\x61\x00\x62\x00\x00\x01\x00\x01", 9, "a?b" },
		{ (const uint8_t *)"\x02\x61\x20\x00\x00\x01\x00\x01", 8, "a?" },
		{ (const uint8_t *)"\x02\xc3\xa9\x00\x00\x01\x00\x01", 8, "??" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t m[64];
		struct gw_dns_query q;
		size_t n = build(m, 0x0100, 1, 0, 0, 0, cases[i].q, cases[i].n);

		assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
		assert_false(q.name_ok);
		assert_string_equal(q.name, cases[i].name);
	}
}

static void
test_good(void **state)
{
	uint8_t m[128];
	struct gw_dns_query q;
	size_t n;

	(void)state;
	n = build(m, 0x0110, 1, 0, 0, 0, q_example, sizeof(q_example));
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	assert_int_equal(q.id, 0x1234);
	assert_true(q.rd);
	assert_true(q.cd);
	assert_true(q.name_ok);
	assert_string_equal(q.name, "example.com");
	assert_int_equal(q.name_len, 11);
	assert_int_equal(q.qtype, GW_DNS_T_A);
	assert_int_equal(q.qclass, 1);
	assert_false(q.edns);
	assert_int_equal(q.qlen, sizeof(q_example));
	n = build(m, 0x0000, 1, 0, 0, 1, q_example_opt, sizeof(q_example_opt));
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	assert_string_equal(q.name, "example.com");  /* 0x20 case, lowered */
	assert_true(q.edns);
	assert_int_equal(q.edns_udp, 4096);
	assert_true(q.edns_do);
	assert_false(q.rd);
	/* a name with '_' and digits (SRV-style labels) is a host here */
	n = build(m, 0x0100, 1, 0, 0, 0, "\x05_acme\x03""a-1\x00\x00\x10\x00\x01", 15);
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	assert_true(q.name_ok);
	assert_string_equal(q.name, "_acme.a-1");
	assert_int_equal(q.qtype, GW_DNS_T_TXT);
}

/* An independent reading of an answer. */
struct reply {
	uint16_t id, flags, qd, an, ns, ar;
	uint8_t rcode;
	struct in_addr a[8];
	uint32_t ttl;
	bool opt;
	uint8_t ext;
	uint16_t udp;
};

static void
read_reply(const uint8_t *r, size_t n, const uint8_t *query, size_t qlen, struct reply *out)
{
	size_t off = 12;

	memset(out, 0, sizeof(*out));
	assert_true(n >= 12);
	out->id = (uint16_t)(r[0] << 8 | r[1]);
	out->flags = (uint16_t)(r[2] << 8 | r[3]);
	out->rcode = r[3] & 0xf;
	out->qd = (uint16_t)(r[4] << 8 | r[5]);
	out->an = (uint16_t)(r[6] << 8 | r[7]);
	out->ns = (uint16_t)(r[8] << 8 | r[9]);
	out->ar = (uint16_t)(r[10] << 8 | r[11]);
	if (out->qd) {
		assert_memory_equal(r + 12, query + 12, qlen);
		off += qlen;
	}
	for (uint16_t i = 0; i < out->an; i++) {
		assert_true(off + 16 <= n);
		assert_int_equal(r[off], 0xc0);
		assert_int_equal(r[off + 1], 12);
		assert_int_equal(r[off + 3], 1);
		assert_int_equal(r[off + 5], 1);
		out->ttl = (uint32_t)r[off + 6] << 24 | (uint32_t)r[off + 7] << 16 |
			   (uint32_t)r[off + 8] << 8 | r[off + 9];
		assert_int_equal(r[off + 11], 4);
		memcpy(&out->a[i].s_addr, r + off + 12, 4);
		off += 16;
	}
	if (out->ar) {
		assert_true(off + 11 <= n);
		assert_int_equal(r[off], 0);
		assert_int_equal(r[off + 2], 41);
		out->opt = true;
		out->udp = (uint16_t)(r[off + 3] << 8 | r[off + 4]);
		out->ext = r[off + 5];
		off += 11;
	}
	assert_int_equal(off, n);
}

static void
test_answers(void **state)
{
	uint8_t m[128], out[1024];
	struct gw_dns_query q;
	struct in_addr a[2];
	struct reply r;
	size_t n, len;

	(void)state;
	inet_pton(AF_INET, "198.18.0.7", &a[0]);
	inet_pton(AF_INET, "198.18.0.8", &a[1]);
	n = build(m, 0x0100, 1, 0, 0, 0, q_example, sizeof(q_example));
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	len = gw_dns_answer(&q, m, GW_DNS_NOERROR, a, 2, 5, true, out, sizeof(out));
	read_reply(out, len, m, q.qlen, &r);
	assert_int_equal(r.id, 0x1234);
	assert_int_equal(r.flags & 0x8000, 0x8000);             /* QR */
	assert_int_equal(r.flags & 0x0100, 0x0100);             /* RD echoed */
	assert_int_equal(r.flags & 0x0200, 0);                  /* not cut */
	assert_int_equal(r.rcode, 0);
	assert_int_equal(r.an, 2);
	assert_int_equal(r.ttl, 5);
	assert_memory_equal(&r.a[1], &a[1], 4);
	assert_false(r.opt);
	/* NXDOMAIN: the question, no answer, whatever addresses are given */
	len = gw_dns_answer(&q, m, GW_DNS_NXDOMAIN, a, 2, 5, true, out, sizeof(out));
	read_reply(out, len, m, q.qlen, &r);
	assert_int_equal(r.rcode, 3);
	assert_int_equal(r.an, 0);
	/* with EDNS: an OPT back; the guest's spelling echoed */
	n = build(m, 0x0100, 1, 0, 0, 1, q_example_opt, sizeof(q_example_opt));
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	len = gw_dns_answer(&q, m, GW_DNS_NOERROR, a, 1, 5, true, out, sizeof(out));
	read_reply(out, len, m, q.qlen, &r);
	assert_true(r.opt);
	assert_int_equal(r.udp, GW_DNS_EDNS_UDP);
	assert_int_equal(r.an, 1);
	assert_memory_equal(out + 12, "\x07""ExAmple", 8);
	/* BADVERS: the extended rcode in the OPT */
	m[n - 15 + 6] = 1;   /* the OPT (15 bytes with its option): version */
	assert_int_equal(parse(m, n, &q), GW_DNS_ERROR);
	len = gw_dns_answer(&q, m, q.rcode, NULL, 0, 0, true, out, sizeof(out));
	read_reply(out, len, m, q.qlen, &r);
	assert_int_equal(r.rcode, 0);
	assert_int_equal(r.ext, 1);
	/* an error before the question was read: no question echoed */
	n = build(m, 0x2100, 1, 0, 0, 0, q_example, sizeof(q_example));
	assert_int_equal(parse(m, n, &q), GW_DNS_ERROR);
	len = gw_dns_answer(&q, m, q.rcode, NULL, 0, 0, true, out, sizeof(out));
	read_reply(out, len, m, 0, &r);
	assert_int_equal(r.rcode, GW_DNS_NOTIMP);
	assert_int_equal(r.qd, 0);
	/* too small a buffer for the answers: cut, TC set, the question kept */
	n = build(m, 0x0100, 1, 0, 0, 0, q_example, sizeof(q_example));
	assert_int_equal(parse(m, n, &q), GW_DNS_QUERY);
	len = gw_dns_answer(&q, m, GW_DNS_NOERROR, a, 2, 5, true, out, 12 + q.qlen + 20);
	read_reply(out, len, m, q.qlen, &r);
	assert_int_equal(r.flags & 0x0200, 0x0200);
	assert_int_equal(r.an, 0);
	assert_int_equal(gw_dns_answer(&q, m, GW_DNS_NOERROR, a, 2, 5, true, out, 11), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_names_not_hosts),
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

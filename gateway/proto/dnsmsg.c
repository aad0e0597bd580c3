/* dnsmsg.c: the DNS door's messages (dnsmsg.h). */
#include <stdio.h>
#include <string.h>

#include "dnsmsg.h"

#define QR     0x8000
#define RD     0x0100
#define RA     0x0080
#define CD     0x0010
#define TC     0x0200
#define OPT_LEN 11                      /* root name, type, class, ttl, rdlen */
#define A_LEN   16                      /* pointer, type, class, ttl, rdlen, address */

static uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static enum gw_dns_parse
drop(struct gw_dns_query *q, const char *why)
{
	q->why = why;
	return GW_DNS_DROP;
}

static enum gw_dns_parse
fail(struct gw_dns_query *q, enum gw_dns_rcode rc, const char *why)
{
	q->rcode = rc;
	q->why = why;
	return GW_DNS_ERROR;
}

static bool
host_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The question's name at *off, into q->name. NULL, or why it is refused. */
static const char *
read_name(const uint8_t *m, size_t n, size_t *off, struct gw_dns_query *q)
{
	size_t at = *off, wire = 0, out = 0;

	q->name_ok = true;
	for (;;) {
		uint8_t l;

		if (at >= n)
			return "a truncated name";
		l = m[at++];
		wire++;
		if ((l & 0xc0) == 0xc0)
			return "a compression pointer in the question";
		if (l & 0xc0)
			return "a reserved label type";
		if (l == 0)
			break;
		wire += l;
		if (wire + 1 > GW_DNS_NAME_MAX)
			return "a name over 255 octets";
		if (at + l > n)
			return "a truncated name";
		if (out)
			q->name[out++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			uint8_t c = m[at + i];

			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			q->name_ok &= host_byte(c);
			/* (a byte that is no name's is kept as '?': the name is
			 * only shown then, never looked up) */
			q->name[out++] = (char)(c >= 0x21 && c < 0x7f ? c : '?');
		}
		at += l;
	}
	q->name[out] = '\0';
	q->name_len = out;
	/* The root, or a name of one label of nothing, is no host. */
	if (out == 0)
		q->name_ok = false;
	*off = at;
	return NULL;
}

/* The OPT record at *off (RFC 6891 6.1.2). NULL, or why it is refused. */
static const char *
read_opt(const uint8_t *m, size_t n, size_t *off, struct gw_dns_query *q, uint8_t *version)
{
	size_t at = *off, rdlen, end;

	if (n - at < OPT_LEN)
		return "a truncated additional record";
	if (m[at] != 0 || rd16(m + at + 1) != GW_DNS_T_OPT)
		return "an additional record that is not OPT";
	q->edns = true;
	q->edns_udp = rd16(m + at + 3) < GW_DNS_UDP_MAX ? GW_DNS_UDP_MAX : rd16(m + at + 3);
	*version = m[at + 6];
	q->edns_do = (m[at + 7] & 0x80) != 0;
	rdlen = rd16(m + at + 9);
	at += OPT_LEN;
	if (n - at < rdlen)
		return "a truncated OPT record";
	/* Its options: code, length, data, exactly filling it. */
	end = at + rdlen;
	while (at < end) {
		if (end - at < 4 || end - at - 4 < rd16(m + at + 2))
			return "a malformed EDNS option";
		at += 4 + rd16(m + at + 2);
	}
	*off = end;
	return NULL;
}

enum gw_dns_parse
gw_dns_query_parse(const uint8_t *m, size_t n, struct gw_dns_query *q)
{
	uint16_t flags, qd, an, ns, ar;
	uint8_t version = 0;
	size_t off = GW_DNS_HEADER_LEN;
	const char *why;

	memset(q, 0, sizeof(*q));
	if (!m || n < GW_DNS_HEADER_LEN)
		return drop(q, "shorter than a header");
	q->id = rd16(m);
	flags = rd16(m + 2);
	if (flags & QR)
		return drop(q, "a response, not a query");
	q->rd = (flags & RD) != 0;
	q->cd = (flags & CD) != 0;
	if ((flags >> 11 & 0xf) != 0)
		return fail(q, GW_DNS_NOTIMP, "an opcode other than QUERY");
	qd = rd16(m + 4);
	an = rd16(m + 6);
	ns = rd16(m + 8);
	ar = rd16(m + 10);
	if (qd != 1)
		return fail(q, GW_DNS_FORMERR, "not exactly one question");
	if (an || ns)
		return fail(q, GW_DNS_FORMERR, "answer or authority records in a query");
	if (ar > 1)
		return fail(q, GW_DNS_FORMERR, "additional records other than one OPT");
	if ((why = read_name(m, n, &off, q))) {
		q->name[0] = '\0';     /* (what was read of it is no name) */
		q->name_len = 0;
		q->name_ok = false;
		return fail(q, GW_DNS_FORMERR, why);
	}
	if (n - off < 4)
		return fail(q, GW_DNS_FORMERR, "a truncated question");
	q->qtype = rd16(m + off);
	q->qclass = rd16(m + off + 2);
	off += 4;
	q->qoff = GW_DNS_HEADER_LEN;
	q->qlen = off - GW_DNS_HEADER_LEN;
	if (ar && (why = read_opt(m, n, &off, q, &version)))
		return fail(q, GW_DNS_FORMERR, why);
	if (off != n)
		return fail(q, GW_DNS_FORMERR, "bytes after the message");
	if (q->edns && version != 0)
		return fail(q, GW_DNS_BADVERS, "an EDNS version other than 0");
	return GW_DNS_QUERY;
}

size_t
gw_dns_answer(const struct gw_dns_query *q, const uint8_t *msg, enum gw_dns_rcode rcode,
	      const struct in_addr *a, size_t nanswers, uint32_t ttl, bool udp, uint8_t *out,
	      size_t outsz)
{
	size_t limit = outsz, off = GW_DNS_HEADER_LEN, opt = q->edns ? OPT_LEN : 0;
	uint16_t flags = QR | RA | (q->rd ? RD : 0) | (q->cd ? CD : 0);
	size_t qlen = q->qlen;

	if (udp) {
		size_t allowed = q->edns ? (q->edns_udp < GW_DNS_EDNS_UDP ? q->edns_udp
									  : GW_DNS_EDNS_UDP)
					 : GW_DNS_UDP_MAX;

		limit = allowed < outsz ? allowed : outsz;
	}
	if (limit < GW_DNS_HEADER_LEN)
		return 0;
	/* BADVERS is spelled in the OPT record: without one, FORMERR. */
	if (rcode > 15 && !q->edns)
		rcode = GW_DNS_FORMERR;
	if (rcode != GW_DNS_NOERROR || !a)
		nanswers = 0;
	if (nanswers > GW_DNS_ANSWERS_MAX)
		nanswers = GW_DNS_ANSWERS_MAX;
	if (off + qlen + opt > limit) {
		/* (cannot happen for a question sluice parsed: 12 + 259 + 11
		 * fit in 512) */
		qlen = 0;
		opt = 0;
	}
	if (off + qlen + opt + nanswers * A_LEN > limit) {
		/* Cut whole: the guest asks again over TCP. */
		flags |= TC;
		nanswers = 0;
	}
	memset(out, 0, GW_DNS_HEADER_LEN);
	wr16(out, q->id);
	wr16(out + 2, (uint16_t)(flags | (rcode & 0xf)));
	wr16(out + 4, qlen ? 1 : 0);
	wr16(out + 6, (uint16_t)nanswers);
	wr16(out + 10, opt ? 1 : 0);
	if (qlen) {
		memcpy(out + off, msg + q->qoff, qlen);
		off += qlen;
	}
	for (size_t i = 0; i < nanswers; i++) {
		uint8_t *r = out + off;

		wr16(r, 0xc000 | GW_DNS_HEADER_LEN);    /* the question's name */
		wr16(r + 2, GW_DNS_T_A);
		wr16(r + 4, 1);                          /* IN */
		wr16(r + 6, (uint16_t)(ttl >> 16));
		wr16(r + 8, (uint16_t)ttl);
		wr16(r + 10, 4);
		memcpy(r + 12, &a[i].s_addr, 4);
		off += A_LEN;
	}
	if (opt) {
		uint8_t *r = out + off;

		r[0] = 0;
		wr16(r + 1, GW_DNS_T_OPT);
		wr16(r + 3, GW_DNS_EDNS_UDP);
		r[5] = (uint8_t)(rcode >> 4);            /* the extended rcode */
		r[6] = 0;                                /* version */
		r[7] = q->edns_do ? 0x80 : 0;
		r[8] = 0;
		wr16(r + 9, 0);
		off += OPT_LEN;
	}
	return off;
}

const char *
gw_dns_type_name(uint16_t type, char *buf, size_t bufsz)
{
	switch (type) {
	case GW_DNS_T_A: return "A";
	case GW_DNS_T_NS: return "NS";
	case GW_DNS_T_CNAME: return "CNAME";
	case GW_DNS_T_SOA: return "SOA";
	case GW_DNS_T_PTR: return "PTR";
	case GW_DNS_T_MX: return "MX";
	case GW_DNS_T_TXT: return "TXT";
	case GW_DNS_T_AAAA: return "AAAA";
	case GW_DNS_T_SRV: return "SRV";
	case GW_DNS_T_HTTPS: return "HTTPS";
	case GW_DNS_T_ANY: return "ANY";
	default:
		snprintf(buf, bufsz, "TYPE%u", (unsigned)type);
		return buf;
	}
}

const char *
gw_dns_rcode_name(enum gw_dns_rcode r)
{
	switch (r) {
	case GW_DNS_NOERROR: return "NOERROR";
	case GW_DNS_FORMERR: return "FORMERR";
	case GW_DNS_SERVFAIL: return "SERVFAIL";
	case GW_DNS_NXDOMAIN: return "NXDOMAIN";
	case GW_DNS_NOTIMP: return "NOTIMP";
	case GW_DNS_REFUSED: return "REFUSED";
	case GW_DNS_BADVERS: return "BADVERS";
	}
	return "?";
}

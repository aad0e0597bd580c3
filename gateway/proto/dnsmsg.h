/* dnsmsg.h: the DNS door's messages (RFC 1035, RFC 6891): a strict parser
 * for the one kind of message a guest's stub resolver sends (a standard
 * query with one question, perhaps an EDNS(0) OPT record) and a writer for
 * the answers the door gives (A records, an empty answer, an error code).
 *
 * Pure: no I/O, no allocation, no logging. A message is read whole from the
 * caller's buffer (a UDP datagram, or a TCP message without its two length
 * bytes); nothing is kept between calls.
 *
 * What is refused, and how the door answers it (rcode in *out):
 *   - shorter than a header, or a response (QR set): nothing at all
 *     (GW_DNS_DROP): answering a response invites reflection loops;
 *   - an opcode other than QUERY: NOTIMP;
 *   - QDCOUNT other than 1, any answer or authority record, additional
 *     records other than one OPT, a compression pointer or a reserved
 *     label type in the question, a name over 255 octets, a truncated
 *     message or bytes after its end, an OPT whose name is not the root,
 *     two OPTs: FORMERR;
 *   - an EDNS version other than 0: BADVERS (RFC 6891 6.1.3), as an
 *     extended rcode the writer spells in the OPT record;
 *   - a class other than IN: REFUSED (decided by the door; the parser
 *     reports the class).
 * A name whose labels hold bytes other than letters, digits, '-' and '_'
 * parses (it is a well-formed question) but has name_ok false: the door
 * refuses it as it refuses any host that does not normalise.
 */
#ifndef SLUICE_GW_DNSMSG_H
#define SLUICE_GW_DNSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

#define GW_DNS_HEADER_LEN 12
#define GW_DNS_NAME_MAX 255             /* wire octets (RFC 1035 2.3.4) */
#define GW_DNS_UDP_MAX 512              /* a reply to a query without EDNS */
#define GW_DNS_EDNS_UDP 1232            /* the payload size sluice offers */
#define GW_DNS_ANSWERS_MAX 8

enum gw_dns_type {
	GW_DNS_T_A = 1,
	GW_DNS_T_NS = 2,
	GW_DNS_T_CNAME = 5,
	GW_DNS_T_SOA = 6,
	GW_DNS_T_PTR = 12,
	GW_DNS_T_MX = 15,
	GW_DNS_T_TXT = 16,
	GW_DNS_T_AAAA = 28,
	GW_DNS_T_SRV = 33,
	GW_DNS_T_OPT = 41,
	GW_DNS_T_HTTPS = 65,
	GW_DNS_T_ANY = 255,
};

enum gw_dns_rcode {
	GW_DNS_NOERROR = 0,
	GW_DNS_FORMERR = 1,
	GW_DNS_SERVFAIL = 2,
	GW_DNS_NXDOMAIN = 3,
	GW_DNS_NOTIMP = 4,
	GW_DNS_REFUSED = 5,
	GW_DNS_BADVERS = 16,            /* extended: needs an OPT record */
};

enum gw_dns_parse {
	GW_DNS_QUERY = 0,               /* a question to decide */
	GW_DNS_ERROR,                   /* answer q->rcode, no question decided */
	GW_DNS_DROP,                    /* answer nothing */
};

struct gw_dns_query {
	uint16_t id;
	bool rd;                        /* recursion desired, echoed */
	bool cd;                        /* checking disabled, echoed */
	enum gw_dns_rcode rcode;        /* GW_DNS_ERROR: what to answer */
	const char *why;                /* GW_DNS_ERROR/DROP: a static string */
	/* The question, when it could be read (qlen > 0 even on some errors,
	 * so the error answer can echo it). */
	size_t qoff, qlen;              /* the question's bytes in the message */
	char name[GW_DNS_NAME_MAX + 1]; /* lowercase, dotted, no final dot;
					 * "" for the root */
	size_t name_len;
	bool name_ok;                   /* every label [a-z0-9-_], 1..63 bytes */
	uint16_t qtype, qclass;
	bool edns;                      /* an OPT record came */
	uint16_t edns_udp;              /* its payload size (at least 512) */
	bool edns_do;                   /* DNSSEC OK, echoed */
};

/* Reads msg[0..n) into *q. Returns what the door does with it; q->why says
 * why for the last two. */
enum gw_dns_parse gw_dns_query_parse(const uint8_t *msg, size_t n, struct gw_dns_query *q);

/* Writes the answer to q (parsed from msg, which is read again for the
 * question's bytes, so the guest's spelling of the name, 0x20 case
 * included, is echoed) into out[0..outsz): rcode, and for NOERROR the
 * nanswers addresses of a[] as A records of the question's name with ttl
 * (none: an empty answer, "no data"). An OPT record is added when the
 * query had one. udp: the answer goes in a datagram, which is cut to the
 * size the query allowed with TC set (the guest asks again over TCP).
 * Returns the length, or 0 when outsz is too small for even a header. */
size_t gw_dns_answer(const struct gw_dns_query *q, const uint8_t *msg, enum gw_dns_rcode rcode,
		     const struct in_addr *a, size_t nanswers, uint32_t ttl, bool udp,
		     uint8_t *out, size_t outsz);

/* "A", "AAAA", "TXT", ... or "TYPE123" into buf (at least 12 bytes);
 * returns buf or a static string. For access lines. */
const char *gw_dns_type_name(uint16_t type, char *buf, size_t bufsz);
const char *gw_dns_rcode_name(enum gw_dns_rcode r);

#endif

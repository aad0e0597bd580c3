/* addr.h: IP literal parsing, address classification and the private
 * address check.
 *
 * Pure functions: no I/O, no allocation, no global state; safe on any
 * thread. The rule they serve: nothing private may be reached through any
 * spelling of an address, whether a client wrote it (decimal, octal, hex,
 * short forms, IPv4-mapped IPv6, NAT64, 6to4, Teredo, ...) or DNS returned it.
 */
#ifndef SLUICE_GW_ADDR_H
#define SLUICE_GW_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "addr-t.h"
#include "conf-t.h"
#include "reason-t.h"

/* Decides whether the `len` bytes at `s` (no NUL needed) are an IP literal
 * in any spelling a resolver or URL parser would accept, and normalises it.
 *
 * IPv4 follows inet_aton()/WHATWG URL: 1 to 4 parts, each decimal, octal
 * (leading 0) or hex (0x), so "127.1", "2130706433", "0x7f.1" and
 * "017700000001" are all 127.0.0.1; one trailing dot is allowed. A host is
 * taken as IPv4 when its last label is numeric ("123", "0x1f") or it holds
 * only digits and dots; it must then parse, or it is refused.
 * IPv6 is taken with or without brackets, with an embedded dotted quad;
 * zone ids ("%eth0") are refused. IPv4-mapped IPv6 (::ffff:a.b.c.d) comes
 * back as AF_INET: it is the same destination, and one spelling per
 * destination keeps IP rules from being bypassed.
 *
 * Returns 1: a literal, *out holds an AF_INET or AF_INET6 address, port 0;
 *         0: not a literal, a name (still to be validated as one);
 *   -EINVAL: neither: numeric-looking but malformed or ambiguous ("1.2.3.4.5",
 *            "256.1.1.1", "08", "0x", "a.1"), any IPv6 syntax that does not
 *            parse, brackets around a non-IPv6, whitespace, control bytes or
 *            NUL anywhere (resolvers stop at them), or len 0.
 * *out is written only when 1 is returned. */
int gw_addr_parse_literal(const char *s, size_t len, struct sockaddr_storage *out);

/* True when a and b are the same AF_INET or AF_INET6 address (ports
 * aside). IPv4-mapped IPv6 is the IPv4 address. */
bool gw_addr_same(const struct sockaddr *a, const struct sockaddr *b);

/* The class of an AF_INET or AF_INET6 address (other families:
 * GW_ADDR_RESERVED). IPv6 forms that embed an IPv4 address (mapped
 * ::ffff:0:0/96, translated ::ffff:0:0:0/96, compatible ::/96, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) take
 * the class of the embedded address; where several readings exist, the
 * first non-public one. IPv6 outside 2000::/3 that is not otherwise named
 * is GW_ADDR_RESERVED. */
enum gw_addr_class gw_addr_classify(const struct sockaddr *sa);

/* "public", "loopback", ...; "?" for a value out of range. Static storage. */
const char *gw_addr_class_name(enum gw_addr_class c);

/* The IPv4 addresses `a` embeds (see gw_addr_classify), written to out in
 * network order. Returns how many, 0..GW_ADDR_EMBED_MAX; 0 for :: and ::1.
 * Only the local-use NAT64 prefix 64:ff9b:1::/48 gives several: its prefix
 * length (/48, /56, /64, /96) is the operator's, so every layout's reading
 * is returned, except readings inside 0.0.0.0/8 (another layout's zero
 * padding; a translator does not forward there) unless all are. */
size_t gw_addr_embedded_v4(const struct in6_addr *a,
			   struct in_addr out[GW_ADDR_EMBED_MAX]);

/* The address check every connection makes before connect(). Returns 0 when
 * `sa` is public or exempt, else -EACCES with *why = GW_R_PRIVATE_ADDRESS
 * (why may be NULL; on success it is set to GW_R_NONE).
 * An address is exempt when an allow_private CIDR (may be NULL: none)
 * contains it; for IPv6 that embeds IPv4, also when every non-public
 * embedded address is contained by one; an IPv4 address is also exempt
 * through a CIDR holding its ::ffff: form. A GW_ADDR_METADATA address is
 * exempt only through a host entry naming it exactly (/32 or /128), so that
 * allowing 169.254.0.0/16 or 0.0.0.0/0 never exposes instance credentials. */
int gw_addr_check(const struct sockaddr *sa, const struct conf_cidrs *allow_private,
		  enum gw_reason *why);

/* True if `c` contains the `family` address at `addr` (4 or 16 bytes,
 * network order). Does its own arithmetic; host bits of c are ignored. */
bool gw_addr_cidr_contains(const struct conf_cidr *c, int family, const void *addr);

/* Writes "1.2.3.4", "1.2.3.4:80", "::1" or "[::1]:443" (the port only when
 * nonzero) and a NUL into buf. GW_ADDR_FMT_MAX bytes always suffice.
 * Returns 0, -ENOSPC (buf too small; buf holds "" if bufsz > 0) or
 * -EAFNOSUPPORT. IPv6 text is RFC 5952 canonical, so formatting a parsed
 * literal gives one spelling per address. */
int gw_addr_format(const struct sockaddr *sa, char *buf, size_t bufsz);

#endif

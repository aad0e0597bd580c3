/* addr.c: IP literal parsing, address classification, the private address
 * check. See addr.h for the contracts. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"

/* Longest IPv6 text inet_pton() can accept: 8 groups, or 6 and a dotted
 * quad ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"). */
#define V6_TEXT_MAX 45

static const char *const class_names[GW_ADDR__COUNT] = {
#define GW_ADDR_CLASS_NAME(id, name) [GW_ADDR_##id] = name,
	GW_ADDR_CLASSES(GW_ADDR_CLASS_NAME)
#undef GW_ADDR_CLASS_NAME
};

const char *gw_addr_class_name(enum gw_addr_class c)
{
	if ((unsigned)c >= GW_ADDR__COUNT)
		return "?";
	return class_names[c];
}

/* ---- parsing ---------------------------------------------------------- */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool has_hex_prefix(const char *s, size_t len)
{
	return len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

/* WHATWG "ends in a number", widened: the last label (after dropping one
 * trailing dot) is all digits or 0x followed by hex digits, or the whole
 * host is digits and dots. Such a host must parse as IPv4 or be refused:
 * resolving it as a name would let a library somewhere read it as an
 * address we never checked. */
static bool looks_numeric(const char *s, size_t len)
{
	bool only_digits_dots = true, any_digit = false;
	size_t i, n, start;

	for (i = 0; i < len; i++) {
		if (is_digit(s[i]))
			any_digit = true;
		else if (s[i] != '.')
			only_digits_dots = false;
	}
	if (only_digits_dots && any_digit)
		return true;

	n = len;
	if (n > 0 && s[n - 1] == '.')
		n--;
	start = n;
	while (start > 0 && s[start - 1] != '.')
		start--;
	if (start == n)
		return false;           /* empty last label: a bad name, not ours */
	if (has_hex_prefix(s + start, n - start)) {
		for (i = start + 2; i < n; i++)
			if (hex_value(s[i]) < 0)
				return false;
		return true;
	}
	for (i = start; i < n; i++)
		if (!is_digit(s[i]))
			return false;
	return true;
}

/* One inet_aton part: decimal, octal with a leading 0, hex with 0x. Refuses
 * an empty part, "0x" with no digits (WHATWG reads it as 0, others refuse:
 * ambiguous), digits outside the radix ("08") and values over 32 bits. */
static int parse_v4_part(const char *s, size_t len, uint32_t *out)
{
	unsigned radix = 10;
	uint64_t v = 0;
	size_t i;

	if (len == 0)
		return -EINVAL;
	if (has_hex_prefix(s, len)) {
		radix = 16;
		s += 2;
		len -= 2;
		if (len == 0)
			return -EINVAL;
	} else if (len >= 2 && s[0] == '0') {
		radix = 8;
		s++;
		len--;
	}
	for (i = 0; i < len; i++) {
		int d = hex_value(s[i]);

		if (d < 0 || (unsigned)d >= radix)
			return -EINVAL;
		v = v * radix + (unsigned)d;
		if (v > 0xffffffffu)    /* checked each digit: no overflow */
			return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* inet_aton's 1..4 part forms: a, a.b (b 24 bits), a.b.c (c 16 bits),
 * a.b.c.d. One trailing dot allowed. Host byte order out. */
static int parse_v4(const char *s, size_t len, uint32_t *out)
{
	uint32_t parts[4];
	size_t n = 0, start = 0, i;
	uint32_t v;

	if (len > 1 && s[len - 1] == '.')
		len--;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (n == 4)
			return -EINVAL;
		if (parse_v4_part(s + start, i - start, &parts[n]) < 0)
			return -EINVAL;
		n++;
		start = i + 1;
	}
	for (i = 0; i + 1 < n; i++)
		if (parts[i] > 255)
			return -EINVAL;
	/* the last part fills the remaining 5 - n bytes */
	if (n > 1 && parts[n - 1] >= (1u << (8 * (5 - n))))
		return -EINVAL;
	v = parts[n - 1];
	for (i = 0; i + 1 < n; i++)
		v |= parts[i] << (24 - 8 * i);
	*out = v;
	return 0;
}

static bool v6_is_mapped(const uint8_t *b)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(b, pfx, sizeof(pfx)) == 0;
}

static int parse_v6(const char *s, size_t len, struct sockaddr_storage *out)
{
	char buf[V6_TEXT_MAX + 1];
	struct in6_addr a;

	if (len == 0 || len > V6_TEXT_MAX)
		return -EINVAL;
	if (memchr(s, '%', len))
		return -EINVAL;         /* zone ids name an interface of ours */
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET6, buf, &a) != 1)
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	if (v6_is_mapped(a.s6_addr)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a.s6_addr + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = a;
	}
	return 1;
}

int gw_addr_parse_literal(const char *s, size_t len, struct sockaddr_storage *out)
{
	struct sockaddr_in *sin;
	uint32_t v4;
	size_t i;

	if (!s || len == 0)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		/* inet_aton() stops at whitespace and accepts what came
		 * before; a NUL would cut the string for every C API. */
		if (c <= 0x20 || c == 0x7f)
			return -EINVAL;
	}
	if (s[0] == '[') {
		if (len < 2 || s[len - 1] != ']')
			return -EINVAL;
		return parse_v6(s + 1, len - 2, out);
	}
	if (memchr(s, ':', len) || memchr(s, ']', len))
		return parse_v6(s, len, out);
	if (!looks_numeric(s, len))
		return 0;
	if (parse_v4(s, len, &v4) < 0)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	sin = (struct sockaddr_in *)out;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(v4);
	return 1;
}

/* ---- classification --------------------------------------------------- */

struct range4 {
	uint32_t net;           /* host order */
	uint8_t prefix;
	enum gw_addr_class cls;
};

/* First match wins: the specific entries (metadata inside link-local and
 * CGNAT) come before the blocks that contain them. */
static const struct range4 ranges4[] = {
	{ 0xa9fea9fe, 32, GW_ADDR_METADATA },      /* 169.254.169.254 AWS GCP Azure OCI */
	{ 0x646464c8, 32, GW_ADDR_METADATA },      /* 100.100.100.200 Alibaba */
	{ 0xa83f8110, 32, GW_ADDR_METADATA },      /* 168.63.129.16 Azure WireServer */
	{ 0xffffffff, 32, GW_ADDR_BROADCAST },
	{ 0x00000000, 8, GW_ADDR_UNSPECIFIED },    /* "this network"; 0.0.0.0 is local */
	{ 0x0a000000, 8, GW_ADDR_PRIVATE },
	{ 0x64400000, 10, GW_ADDR_CGNAT },
	{ 0x7f000000, 8, GW_ADDR_LOOPBACK },
	{ 0xa9fe0000, 16, GW_ADDR_LINK_LOCAL },
	{ 0xac100000, 12, GW_ADDR_PRIVATE },
	{ 0xc0000000, 24, GW_ADDR_RESERVED },      /* 192.0.0/24 IETF protocol */
	{ 0xc0000200, 24, GW_ADDR_DOCUMENTATION }, /* 192.0.2/24 */
	{ 0xc0586300, 24, GW_ADDR_RESERVED },      /* 192.88.99/24 6to4 relay */
	{ 0xc0a80000, 16, GW_ADDR_PRIVATE },
	{ 0xc6120000, 15, GW_ADDR_RESERVED },      /* 198.18/15 benchmarking */
	{ 0xc6336400, 24, GW_ADDR_DOCUMENTATION }, /* 198.51.100/24 */
	{ 0xcb007100, 24, GW_ADDR_DOCUMENTATION }, /* 203.0.113/24 */
	{ 0xe0000000, 4, GW_ADDR_MULTICAST },
	{ 0xf0000000, 4, GW_ADDR_RESERVED },       /* 240/4 */
};

static enum gw_addr_class classify4(uint32_t a)
{
	size_t i;

	for (i = 0; i < sizeof(ranges4) / sizeof(ranges4[0]); i++) {
		const struct range4 *r = &ranges4[i];
		uint32_t mask = r->prefix ? 0xffffffffu << (32 - r->prefix) : 0;

		if ((a & mask) == r->net)
			return r->cls;
	}
	return GW_ADDR_PUBLIC;
}

struct range6 {
	uint8_t net[16];
	uint8_t prefix;
	enum gw_addr_class cls;
};

static const struct range6 ranges6[] = {
	/* fd00:ec2::254 AWS IMDS */
	{ { 0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 }, 128, GW_ADDR_METADATA },
	/* fd20:ce::254 GCP metadata */
	{ { 0xfd, 0x20, 0, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 }, 128, GW_ADDR_METADATA },
	{ { 0xfe, 0x80 }, 10, GW_ADDR_LINK_LOCAL },
	{ { 0xfe, 0xc0 }, 10, GW_ADDR_PRIVATE },           /* site-local, deprecated */
	{ { 0xfc }, 7, GW_ADDR_ULA },
	{ { 0xff }, 8, GW_ADDR_MULTICAST },
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, GW_ADDR_DOCUMENTATION },
	{ { 0x3f, 0xff }, 20, GW_ADDR_DOCUMENTATION },     /* RFC 9637 */
	{ { 0x20, 0x01, 0, 0x02, 0, 0 }, 48, GW_ADDR_RESERVED }, /* benchmarking */
	{ { 0x20, 0x01, 0, 0x10 }, 28, GW_ADDR_RESERVED },  /* ORCHID */
	{ { 0x20, 0x01, 0, 0x20 }, 28, GW_ADDR_RESERVED },  /* ORCHIDv2 */
	{ { 0x01 }, 64, GW_ADDR_RESERVED },                 /* 100::/64 discard */
};

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((a[full] & mask) != (net[full] & mask))
			return false;
	}
	return true;
}

static void put_v4(struct in_addr *out, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint8_t bytes[4] = { a, b, c, d };

	memcpy(&out->s_addr, bytes, 4);
}

size_t gw_addr_embedded_v4(const struct in6_addr *in, struct in_addr out[GW_ADDR_EMBED_MAX])
{
	static const uint8_t zero[12];
	static const uint8_t translated[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t nat64_local[6] = { 0, 0x64, 0xff, 0x9b, 0, 0x01 };
	const uint8_t *b = in->s6_addr;

	if (memcmp(b, zero, 12) == 0) {
		/* ::/96 compatible; :: and ::1 are themselves */
		static const uint8_t one[4] = { 0, 0, 0, 1 };

		if (memcmp(b + 12, zero, 4) == 0 || memcmp(b + 12, one, 4) == 0)
			return 0;
		put_v4(&out[0], b[12], b[13], b[14], b[15]);
		return 1;
	}
	if (v6_is_mapped(b) || memcmp(b, translated, 12) == 0 || memcmp(b, nat64, 12) == 0) {
		put_v4(&out[0], b[12], b[13], b[14], b[15]);
		return 1;
	}
	if (memcmp(b, nat64_local, 6) == 0) {
		/* RFC 6052 2.2: the operator's prefix may be /48, /56, /64 or
		 * /96 here (bits 64..71 skipped) and we cannot know which, so
		 * every reading counts. Readings inside 0.0.0.0/8 are dropped:
		 * they are another layout's zero padding, and a translator does
		 * not forward to "this network". */
		struct in_addr r[4];
		size_t n = 0, i;

		put_v4(&r[0], b[6], b[7], b[9], b[10]);
		put_v4(&r[1], b[7], b[9], b[10], b[11]);
		put_v4(&r[2], b[9], b[10], b[11], b[12]);
		put_v4(&r[3], b[12], b[13], b[14], b[15]);
		for (i = 0; i < 4; i++) {
			const uint8_t *first = (const uint8_t *)&r[i].s_addr;

			if (first[0] != 0)
				out[n++] = r[i];
		}
		if (n == 0)
			out[n++] = r[3];
		return n;
	}
	if (b[0] == 0x20 && b[1] == 0x02) {                     /* 6to4 */
		put_v4(&out[0], b[2], b[3], b[4], b[5]);
		return 1;
	}
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) { /* Teredo */
		put_v4(&out[0], (uint8_t)~b[12], (uint8_t)~b[13], (uint8_t)~b[14],
		       (uint8_t)~b[15]);
		return 1;
	}
	return 0;
}

static enum gw_addr_class classify6(const struct in6_addr *a)
{
	static const uint8_t zero[16];
	static const uint8_t loop[16] = { [15] = 1 };
	struct in_addr v4[GW_ADDR_EMBED_MAX];
	size_t n, i;

	if (memcmp(a->s6_addr, zero, 16) == 0)
		return GW_ADDR_UNSPECIFIED;
	if (memcmp(a->s6_addr, loop, 16) == 0)
		return GW_ADDR_LOOPBACK;

	n = gw_addr_embedded_v4(a, v4);
	if (n > 0) {
		for (i = 0; i < n; i++) {
			enum gw_addr_class c = classify4(ntohl(v4[i].s_addr));

			if (c != GW_ADDR_PUBLIC)
				return c;
		}
		return GW_ADDR_PUBLIC;
	}

	for (i = 0; i < sizeof(ranges6) / sizeof(ranges6[0]); i++)
		if (prefix_match(a->s6_addr, ranges6[i].net, ranges6[i].prefix))
			return ranges6[i].cls;
	/* Only 2000::/3 is global unicast; whatever else is not named
	 * above (::/8 leftovers, 100::/8, 5f00::/16 SRv6, ...) is not ours to
	 * reach. */
	if ((a->s6_addr[0] & 0xe0) != 0x20)
		return GW_ADDR_RESERVED;
	return GW_ADDR_PUBLIC;
}

enum gw_addr_class gw_addr_classify(const struct sockaddr *sa)
{
	if (!sa)
		return GW_ADDR_RESERVED;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		return classify4(ntohl(sin->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		return classify6(&sin6->sin6_addr);
	}
	return GW_ADDR_RESERVED;
}

/* ---- the check -------------------------------------------------------- */

bool gw_addr_cidr_contains(const struct conf_cidr *c, int family, const void *addr)
{
	unsigned bits = family == AF_INET ? 32 : 128;

	if (!c || !addr || c->family != family || (family != AF_INET && family != AF_INET6))
		return false;
	if (c->prefix > bits)
		return false;
	return prefix_match(addr, c->addr, c->prefix);
}

/* An allow_private entry covering `addr`. `exact`: only a host entry
 * (/32, /128) counts, for metadata addresses. */
static bool exempt_by(const struct conf_cidrs *l, int family, const void *addr, bool exact)
{
	unsigned bits = family == AF_INET ? 32 : 128;
	size_t i;

	for (i = 0; i < l->n; i++) {
		if (exact && l->v[i].prefix != bits)
			continue;
		if (gw_addr_cidr_contains(&l->v[i], family, addr))
			return true;
	}
	return false;
}

static bool exempt(const struct sockaddr *sa, enum gw_addr_class cls,
		   const struct conf_cidrs *l)
{
	bool exact = cls == GW_ADDR_METADATA;

	if (!l || l->n == 0)
		return false;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
		uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff };

		if (exempt_by(l, AF_INET, &sin->sin_addr, exact))
			return true;
		memcpy(mapped + 12, &sin->sin_addr, 4);
		return exempt_by(l, AF_INET6, mapped, exact);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
		struct in_addr v4[GW_ADDR_EMBED_MAX];
		size_t n, i;

		if (exempt_by(l, AF_INET6, &sin6->sin6_addr, exact))
			return true;
		n = gw_addr_embedded_v4(&sin6->sin6_addr, v4);
		if (n == 0)
			return false;
		for (i = 0; i < n; i++) {
			enum gw_addr_class c = classify4(ntohl(v4[i].s_addr));

			if (c == GW_ADDR_PUBLIC)
				continue;
			if (!exempt_by(l, AF_INET, &v4[i], c == GW_ADDR_METADATA))
				return false;
		}
		return true;
	}
	return false;
}

int gw_addr_check(const struct sockaddr *sa, const struct conf_cidrs *allow_private,
		  enum gw_reason *why)
{
	enum gw_addr_class cls = gw_addr_classify(sa);

	if (cls == GW_ADDR_PUBLIC || (sa && exempt(sa, cls, allow_private))) {
		if (why)
			*why = GW_R_NONE;
		return 0;
	}
	if (why)
		*why = GW_R_PRIVATE_ADDRESS;
	return -EACCES;
}

/* ---- formatting ------------------------------------------------------- */

int gw_addr_format(const struct sockaddr *sa, char *buf, size_t bufsz)
{
	char text[INET6_ADDRSTRLEN];
	uint16_t port;
	int n;

	if (bufsz > 0)
		buf[0] = '\0';
	if (!sa)
		return -EAFNOSUPPORT;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		if (!inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text)))
			return -EAFNOSUPPORT;
		port = ntohs(sin->sin_port);
		n = port ? snprintf(buf, bufsz, "%s:%u", text, (unsigned)port)
			 : snprintf(buf, bufsz, "%s", text);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		if (!inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof(text)))
			return -EAFNOSUPPORT;
		port = ntohs(sin6->sin6_port);
		n = port ? snprintf(buf, bufsz, "[%s]:%u", text, (unsigned)port)
			 : snprintf(buf, bufsz, "%s", text);
	} else {
		return -EAFNOSUPPORT;
	}
	if (n < 0 || (size_t)n >= bufsz) {
		if (bufsz > 0)
			buf[0] = '\0';
		return -ENOSPC;
	}
	return 0;
}

/* a's IPv4 address, also when it is IPv4-mapped IPv6. */
static bool
addr_v4(const struct sockaddr *a, struct in_addr *out)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)a;

	if (a->sa_family == AF_INET) {
		*out = ((const struct sockaddr_in *)(const void *)a)->sin_addr;
		return true;
	}
	if (a->sa_family == AF_INET6 && memcmp(s6->sin6_addr.s6_addr, mapped, 12) == 0) {
		memcpy(out, s6->sin6_addr.s6_addr + 12, 4);
		return true;
	}
	return false;
}

bool
gw_addr_same(const struct sockaddr *a, const struct sockaddr *b)
{
	struct in_addr x, y;
	bool av4 = addr_v4(a, &x), bv4 = addr_v4(b, &y);

	if (av4 || bv4)
		return av4 && bv4 && x.s_addr == y.s_addr;
	return a->sa_family == AF_INET6 && b->sa_family == AF_INET6 &&
	       memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

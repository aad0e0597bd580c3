/* test_addr.c: IP literal parsing, classification, the private address
 * check, formatting. Bad inputs first. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "addr.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Parses s and returns the rc; on 1 writes the canonical text to canon. */
static int parse(const char *s, size_t len, char *canon, int *family)
{
	struct sockaddr_storage ss;
	int rc;

	memset(&ss, 0xa5, sizeof(ss));
	rc = gw_addr_parse_literal(s, len, &ss);
	if (rc == 1) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		assert_int_equal(gw_addr_format((struct sockaddr *)&ss, canon, GW_ADDR_FMT_MAX), 0);
		*family = ss.ss_family;
		/* port 0 whatever the family: sin_port and sin6_port overlap */
		assert_int_equal(sin->sin_port, 0);
	}
	return rc;
}

/* A sockaddr as DNS would hand it back: no normalisation. */
static struct sockaddr_storage raw(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, text, &sin6->sin6_addr) != 1)
			fail_msg("bad test address %s", text);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		if (inet_pton(AF_INET, text, &sin->sin_addr) != 1)
			fail_msg("bad test address %s", text);
	}
	return ss;
}

static struct conf_cidr cidr(const char *text, unsigned prefix)
{
	struct conf_cidr c;

	memset(&c, 0, sizeof(c));
	c.family = strchr(text, ':') ? AF_INET6 : AF_INET;
	c.prefix = (uint8_t)prefix;
	if (inet_pton(c.family, text, c.addr) != 1)
		fail_msg("bad test cidr %s", text);
	return c;
}

/* ---- parsing: refusals ------------------------------------------------ */

static void test_parse_malformed(void **state)
{
	static const char *const bad[] = {
		"1.2.3.4.5", "0x", "0X", "256.1.1.1", "1.256.1.1", "1.2.3.256", "08",
		"09.1.1.1", "0.0.0.08", "019", "1.2.65536", "1.16777216", "4294967296",
		"0x100000000", "99999999999999999999", "1..2", ".1", "1.2.3.4..",
		"1.2.3.4...", "a.1", "example.123", "example.0x1f", "0xg.1", "0x7f.0x",
		"1.2.3.0x", "0x.1", "[1.2.3.4]", "[example.com]",
		"[::1", "::1]", "[]", "[", "fe80::1%eth0", "[fe80::1%25eth0]", "fe80::1%",
		"1:2:3:4:5:6:7:8:9", ":::", "1::2::3", "::ffff:127.000.0.1",
		"::ffff:0177.0.0.1", "::ffff:1.2.3", "::g", "foo:80", "127.0.0.1:80",
		"12345::", "::ffff:1.2.3.4.5",
		"1.2.3.4 ", " 1.2.3.4", "1.2.3.4\t", "1.2.3.4\n", "127.0.0.1 x",
		"1.2.3.4\x7f", "exa mple.com",
		"ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255x",
	};
	char canon[GW_ADDR_FMT_MAX];
	size_t i;
	int fam;

	(void)state;
	for (i = 0; i < N(bad); i++) {
		int rc = parse(bad[i], strlen(bad[i]), canon, &fam);

		if (rc != -EINVAL)
			fail_msg("\"%s\": rc %d, want -EINVAL", bad[i], rc);
	}
	/* an embedded NUL ends the string for every C API after us */
	assert_int_equal(parse("127.0.0.1\0.evil", 15, canon, &fam), -EINVAL);
	assert_int_equal(parse("", 0, canon, &fam), -EINVAL);
	assert_int_equal(gw_addr_parse_literal(NULL, 3, NULL), -EINVAL);
	/* len bounds the read: the bytes after it are not looked at */
	assert_int_equal(parse("1.2.3.4.5", 7, canon, &fam), 1);
	assert_string_equal(canon, "1.2.3.4");
}

static void test_parse_names(void **state)
{
	static const char *const names[] = {
		"example.com", "example.com.", "localhost", "a", "xn--bcher-kva.example",
		"127.0.0.1.nip.io", "0xg", "1e1", "cafe", "deadbeef", "0x7f.example",
		"a_b.example", "-", "1.2.3.-1", "1.2.3.+1", "1.2.3.4.example", "x.0xg", ".", "..", "a..b",
	};
	char canon[GW_ADDR_FMT_MAX];
	size_t i;
	int fam;

	(void)state;
	for (i = 0; i < N(names); i++) {
		int rc = parse(names[i], strlen(names[i]), canon, &fam);

		if (rc != 0)
			fail_msg("\"%s\": rc %d, want 0 (a name)", names[i], rc);
	}
}

/* ---- parsing: every spelling ------------------------------------------ */

struct spelling {
	const char *in;
	const char *canon;
	int family;
};

static void test_parse_spellings(void **state)
{
	static const struct spelling v[] = {
		{ "127.0.0.1", "127.0.0.1", AF_INET },
		{ "2130706433", "127.0.0.1", AF_INET },
		{ "0177.0.0.1", "127.0.0.1", AF_INET },
		{ "0x7f000001", "127.0.0.1", AF_INET },
		{ "0X7F000001", "127.0.0.1", AF_INET },
		{ "017700000001", "127.0.0.1", AF_INET },
		{ "127.1", "127.0.0.1", AF_INET },
		{ "127.0.1", "127.0.0.1", AF_INET },
		{ "0x7f.1", "127.0.0.1", AF_INET },
		{ "0x7f.0.0.1", "127.0.0.1", AF_INET },
		{ "0x7F.0.0.0x1", "127.0.0.1", AF_INET },
		{ "0177.1", "127.0.0.1", AF_INET },
		{ "0x0000007f.1", "127.0.0.1", AF_INET },
		{ "127.0.0.1.", "127.0.0.1", AF_INET },
		{ "2130706433.", "127.0.0.1", AF_INET },
		{ "0", "0.0.0.0", AF_INET },
		{ "00", "0.0.0.0", AF_INET },
		{ "0x0", "0.0.0.0", AF_INET },
		{ "0.0.0.0", "0.0.0.0", AF_INET },
		{ "255.255.255.255", "255.255.255.255", AF_INET },
		{ "4294967295", "255.255.255.255", AF_INET },
		{ "0xffffffff", "255.255.255.255", AF_INET },
		{ "037777777777", "255.255.255.255", AF_INET },
		{ "2852039166", "169.254.169.254", AF_INET },
		{ "0xa9fea9fe", "169.254.169.254", AF_INET },
		{ "0251.0376.0251.0376", "169.254.169.254", AF_INET },
		{ "169.254.43518", "169.254.169.254", AF_INET },
		{ "169.16689662", "169.254.169.254", AF_INET },
		{ "10.1", "10.0.0.1", AF_INET },
		{ "1.2.3", "1.2.0.3", AF_INET },
		{ "1.65535", "1.0.255.255", AF_INET },
		{ "1.2.3.255", "1.2.3.255", AF_INET },
		/* IPv6 */
		{ "::1", "::1", AF_INET6 },
		{ "[::1]", "::1", AF_INET6 },
		{ "0:0:0:0:0:0:0:1", "::1", AF_INET6 },
		{ "::", "::", AF_INET6 },
		{ "[::]", "::", AF_INET6 },
		{ "2001:DB8:0:0:0:0:0:1", "2001:db8::1", AF_INET6 },
		{ "[2001:db8::0:1]", "2001:db8::1", AF_INET6 },
		{ "fd00:ec2::254", "fd00:ec2::254", AF_INET6 },
		{ "64:ff9b::7f00:1", "64:ff9b::7f00:1", AF_INET6 },
		{ "64:ff9b::127.0.0.1", "64:ff9b::7f00:1", AF_INET6 },
		{ "::127.0.0.1", "::127.0.0.1", AF_INET6 },
		{ "2002:7f00:1::", "2002:7f00:1::", AF_INET6 },
		/* IPv4-mapped comes back as the IPv4 address it is */
		{ "::ffff:127.0.0.1", "127.0.0.1", AF_INET },
		{ "::ffff:7f00:1", "127.0.0.1", AF_INET },
		{ "[::FFFF:7F00:1]", "127.0.0.1", AF_INET },
		{ "0:0:0:0:0:ffff:a9fe:a9fe", "169.254.169.254", AF_INET },
	};
	char canon[GW_ADDR_FMT_MAX];
	size_t i;
	int fam;

	(void)state;
	for (i = 0; i < N(v); i++) {
		int rc = parse(v[i].in, strlen(v[i].in), canon, &fam);

		if (rc != 1)
			fail_msg("\"%s\": rc %d, want 1", v[i].in, rc);
		if (strcmp(canon, v[i].canon) != 0 || fam != v[i].family)
			fail_msg("\"%s\": got %s (family %d), want %s", v[i].in, canon, fam,
				 v[i].canon);
	}
}

/* ---- classification --------------------------------------------------- */

struct cls_case {
	const char *in;
	enum gw_addr_class cls;
};

static void check_classes(const struct cls_case *v, size_t n, bool use_parse)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		enum gw_addr_class c;

		if (use_parse) {
			if (gw_addr_parse_literal(v[i].in, strlen(v[i].in), &ss) != 1)
				fail_msg("\"%s\" did not parse", v[i].in);
		} else {
			ss = raw(v[i].in);
		}
		c = gw_addr_classify((struct sockaddr *)&ss);
		if (c != v[i].cls)
			fail_msg("\"%s\": class %s, want %s", v[i].in, gw_addr_class_name(c),
				 gw_addr_class_name(v[i].cls));
	}
}

static void test_classify_v4_spellings(void **state)
{
	static const struct cls_case v[] = {
		{ "127.0.0.1", GW_ADDR_LOOPBACK },
		{ "2130706433", GW_ADDR_LOOPBACK },
		{ "0177.0.0.1", GW_ADDR_LOOPBACK },
		{ "0x7f000001", GW_ADDR_LOOPBACK },
		{ "127.1", GW_ADDR_LOOPBACK },
		{ "0x7f.0.0.1", GW_ADDR_LOOPBACK },
		{ "127.0.0.1.", GW_ADDR_LOOPBACK },
		{ "127.255.255.254", GW_ADDR_LOOPBACK },
		{ "[::ffff:127.0.0.1]", GW_ADDR_LOOPBACK },
		{ "::ffff:7f00:1", GW_ADDR_LOOPBACK },
		{ "::127.0.0.1", GW_ADDR_LOOPBACK },
		{ "64:ff9b::7f00:1", GW_ADDR_LOOPBACK },
		{ "64:ff9b::a9fe:a9fe", GW_ADDR_METADATA },
		{ "2002:7f00:1::", GW_ADDR_LOOPBACK },
		{ "[::1]", GW_ADDR_LOOPBACK },
		{ "0", GW_ADDR_UNSPECIFIED },
		{ "0.0.0.0", GW_ADDR_UNSPECIFIED },
		{ "255.255.255.255", GW_ADDR_BROADCAST },
		{ "4294967295", GW_ADDR_BROADCAST },
		{ "169.254.169.254", GW_ADDR_METADATA },
		{ "2852039166", GW_ADDR_METADATA },
		{ "0251.0376.0251.0376", GW_ADDR_METADATA },
		{ "100.100.100.200", GW_ADDR_METADATA },
		{ "1684301000", GW_ADDR_METADATA },     /* 100.100.100.200 */
		{ "fd00:ec2::254", GW_ADDR_METADATA },
		{ "10.1", GW_ADDR_PRIVATE },
		{ "0xc0a80001", GW_ADDR_PRIVATE },      /* 192.168.0.1 */
	};

	(void)state;
	check_classes(v, N(v), true);
}

static void test_classify_v4_ranges(void **state)
{
	static const struct cls_case v[] = {
		{ "0.1.2.3", GW_ADDR_UNSPECIFIED },
		{ "0.255.255.255", GW_ADDR_UNSPECIFIED },
		{ "10.0.0.0", GW_ADDR_PRIVATE },
		{ "10.255.255.255", GW_ADDR_PRIVATE },
		{ "9.255.255.255", GW_ADDR_PUBLIC },
		{ "11.0.0.0", GW_ADDR_PUBLIC },
		{ "100.63.255.255", GW_ADDR_PUBLIC },
		{ "100.64.0.0", GW_ADDR_CGNAT },
		{ "100.127.255.255", GW_ADDR_CGNAT },
		{ "100.128.0.0", GW_ADDR_PUBLIC },
		{ "100.100.100.199", GW_ADDR_CGNAT },
		{ "100.100.100.200", GW_ADDR_METADATA },
		{ "126.255.255.255", GW_ADDR_PUBLIC },
		{ "127.0.0.0", GW_ADDR_LOOPBACK },
		{ "128.0.0.0", GW_ADDR_PUBLIC },
		{ "169.254.0.0", GW_ADDR_LINK_LOCAL },
		{ "169.254.255.255", GW_ADDR_LINK_LOCAL },
		{ "169.254.169.253", GW_ADDR_LINK_LOCAL },
		{ "169.254.169.254", GW_ADDR_METADATA },
		{ "169.255.0.0", GW_ADDR_PUBLIC },
		{ "168.63.129.16", GW_ADDR_METADATA },
		{ "172.15.255.255", GW_ADDR_PUBLIC },
		{ "172.16.0.0", GW_ADDR_PRIVATE },
		{ "172.31.255.255", GW_ADDR_PRIVATE },
		{ "172.32.0.0", GW_ADDR_PUBLIC },
		{ "192.0.0.0", GW_ADDR_RESERVED },
		{ "192.0.0.170", GW_ADDR_RESERVED },
		{ "192.0.1.0", GW_ADDR_PUBLIC },
		{ "192.0.2.0", GW_ADDR_DOCUMENTATION },
		{ "192.0.2.255", GW_ADDR_DOCUMENTATION },
		{ "192.88.99.1", GW_ADDR_RESERVED },
		{ "192.167.255.255", GW_ADDR_PUBLIC },
		{ "192.168.0.0", GW_ADDR_PRIVATE },
		{ "192.168.255.255", GW_ADDR_PRIVATE },
		{ "192.169.0.0", GW_ADDR_PUBLIC },
		{ "198.17.255.255", GW_ADDR_PUBLIC },
		{ "198.18.0.0", GW_ADDR_RESERVED },
		{ "198.19.255.255", GW_ADDR_RESERVED },
		{ "198.20.0.0", GW_ADDR_PUBLIC },
		{ "198.51.100.7", GW_ADDR_DOCUMENTATION },
		{ "203.0.113.9", GW_ADDR_DOCUMENTATION },
		{ "203.0.114.0", GW_ADDR_PUBLIC },
		{ "223.255.255.255", GW_ADDR_PUBLIC },
		{ "224.0.0.0", GW_ADDR_MULTICAST },
		{ "239.255.255.255", GW_ADDR_MULTICAST },
		{ "240.0.0.0", GW_ADDR_RESERVED },
		{ "255.255.255.254", GW_ADDR_RESERVED },
		{ "255.255.255.255", GW_ADDR_BROADCAST },
		{ "8.8.8.8", GW_ADDR_PUBLIC },
		{ "1.1.1.1", GW_ADDR_PUBLIC },
		{ "93.184.216.34", GW_ADDR_PUBLIC },
	};

	(void)state;
	check_classes(v, N(v), false);
}

/* As DNS would return them: AF_INET6 sockaddrs, never normalised. */
static void test_classify_v6(void **state)
{
	static const struct cls_case v[] = {
		{ "::", GW_ADDR_UNSPECIFIED },
		{ "::1", GW_ADDR_LOOPBACK },
		/* mapped, translated, compatible */
		{ "::ffff:127.0.0.1", GW_ADDR_LOOPBACK },
		{ "::ffff:7f00:1", GW_ADDR_LOOPBACK },
		{ "::ffff:10.0.0.1", GW_ADDR_PRIVATE },
		{ "::ffff:169.254.169.254", GW_ADDR_METADATA },
		{ "::ffff:0.0.0.0", GW_ADDR_UNSPECIFIED },
		{ "::ffff:8.8.8.8", GW_ADDR_PUBLIC },
		{ "::ffff:0:127.0.0.1", GW_ADDR_LOOPBACK },
		{ "::ffff:0:8.8.8.8", GW_ADDR_PUBLIC },
		{ "::127.0.0.1", GW_ADDR_LOOPBACK },
		{ "::192.168.1.1", GW_ADDR_PRIVATE },
		{ "::0.0.0.2", GW_ADDR_UNSPECIFIED },
		{ "::8.8.8.8", GW_ADDR_PUBLIC },
		/* NAT64 well-known and local-use */
		{ "64:ff9b::7f00:1", GW_ADDR_LOOPBACK },
		{ "64:ff9b::a9fe:a9fe", GW_ADDR_METADATA },
		{ "64:ff9b::10.0.0.1", GW_ADDR_PRIVATE },
		{ "64:ff9b::100.100.100.200", GW_ADDR_METADATA },
		{ "64:ff9b::8.8.8.8", GW_ADDR_PUBLIC },
		{ "64:ff9b:1::a9fe:a9fe", GW_ADDR_METADATA },   /* /96 layout */
		{ "64:ff9b:1::7f00:1", GW_ADDR_LOOPBACK },
		{ "64:ff9b:1:7f00:0:100::", GW_ADDR_LOOPBACK }, /* /48 layout */
		{ "64:ff9b:1:a:0:1::", GW_ADDR_PRIVATE },       /* /56: 10.0.0.1 */
		{ "64:ff9b:1::808:808", GW_ADDR_PUBLIC },
		{ "64:ff9b:1:808:8:800::", GW_ADDR_PUBLIC },    /* /48: 8.8.8.8 */
		{ "64:ff9b:1::", GW_ADDR_UNSPECIFIED },
		/* 6to4 */
		{ "2002:7f00:1::", GW_ADDR_LOOPBACK },
		{ "2002:a9fe:a9fe::1", GW_ADDR_METADATA },
		{ "2002:c0a8:101::1", GW_ADDR_PRIVATE },
		{ "2002:808:808::1", GW_ADDR_PUBLIC },
		/* Teredo: client address is the last 32 bits, inverted */
		{ "2001:0:4136:e378:8000:63bf:80ff:fffe", GW_ADDR_LOOPBACK },
		{ "2001:0:4136:e378:8000:63bf:f5ff:fffe", GW_ADDR_PRIVATE },
		{ "2001:0:4136:e378:8000:63bf:5601:5601", GW_ADDR_METADATA },
		{ "2001:0:4136:e378:8000:63bf:f7f7:f7f7", GW_ADDR_PUBLIC },
		/* native ranges */
		{ "fe80::1", GW_ADDR_LINK_LOCAL },
		{ "febf:ffff::1", GW_ADDR_LINK_LOCAL },
		{ "fec0::1", GW_ADDR_PRIVATE },
		{ "fc00::1", GW_ADDR_ULA },
		{ "fd12:3456::1", GW_ADDR_ULA },
		{ "fd00:ec2::254", GW_ADDR_METADATA },
		{ "fd00:ec2::253", GW_ADDR_ULA },
		{ "fd20:ce::254", GW_ADDR_METADATA },
		{ "ff02::1", GW_ADDR_MULTICAST },
		{ "ff0e::101", GW_ADDR_MULTICAST },
		{ "2001:db8::1", GW_ADDR_DOCUMENTATION },
		{ "2001:db8:ffff::1", GW_ADDR_DOCUMENTATION },
		{ "3fff::1", GW_ADDR_DOCUMENTATION },
		{ "100::1", GW_ADDR_RESERVED },
		{ "2001:2::1", GW_ADDR_RESERVED },
		{ "2001:10::1", GW_ADDR_RESERVED },
		{ "2001:20::1", GW_ADDR_RESERVED },
		{ "5f00::1", GW_ADDR_RESERVED },
		{ "::2:0:0:1", GW_ADDR_RESERVED },
		{ "4000::1", GW_ADDR_RESERVED },
		{ "e000::1", GW_ADDR_RESERVED },
		{ "2606:4700:4700::1111", GW_ADDR_PUBLIC },
		{ "2a00:1450:4001::200e", GW_ADDR_PUBLIC },
		{ "2001:db9::1", GW_ADDR_PUBLIC },
		{ "3ffe::1", GW_ADDR_PUBLIC },
	};

	(void)state;
	check_classes(v, N(v), false);
}

static void test_classify_other_family(void **state)
{
	struct sockaddr_un sun;

	(void)state;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	assert_int_equal(gw_addr_classify((struct sockaddr *)&sun), GW_ADDR_RESERVED);
	assert_int_equal(gw_addr_classify(NULL), GW_ADDR_RESERVED);
}

static void test_class_names(void **state)
{
	(void)state;
	assert_string_equal(gw_addr_class_name(GW_ADDR_PUBLIC), "public");
	assert_string_equal(gw_addr_class_name(GW_ADDR_METADATA), "metadata");
	assert_string_equal(gw_addr_class_name(GW_ADDR_LINK_LOCAL), "link-local");
	assert_string_equal(gw_addr_class_name(GW_ADDR__COUNT), "?");
	assert_string_equal(gw_addr_class_name((enum gw_addr_class)-1), "?");
}

static void test_embedded(void **state)
{
	struct in_addr v4[GW_ADDR_EMBED_MAX];
	struct in6_addr a;
	char text[INET_ADDRSTRLEN];

	(void)state;
	assert_int_equal(inet_pton(AF_INET6, "::", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 0);
	assert_int_equal(inet_pton(AF_INET6, "::1", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 0);
	assert_int_equal(inet_pton(AF_INET6, "2606:4700::1", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 0);
	assert_int_equal(inet_pton(AF_INET6, "2001:0:4136:e378:8000:63bf:80ff:fffe", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 1);
	inet_ntop(AF_INET, &v4[0], text, sizeof(text));
	assert_string_equal(text, "127.0.0.1");
	assert_int_equal(inet_pton(AF_INET6, "2002:c000:201::", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 1);
	inet_ntop(AF_INET, &v4[0], text, sizeof(text));
	assert_string_equal(text, "192.0.2.1");
	/* local-use NAT64: every layout's reading outside 0/8 */
	assert_int_equal(inet_pton(AF_INET6, "64:ff9b:1:808:8:800::", &a), 1);
	assert_int_equal(gw_addr_embedded_v4(&a, v4), 3);
	inet_ntop(AF_INET, &v4[0], text, sizeof(text));
	assert_string_equal(text, "8.8.8.8");
}

/* ---- the check -------------------------------------------------------- */

static void test_check_refuses_private(void **state)
{
	static const char *const refused[] = {
		"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1",
		"169.254.1.1", "169.254.169.254", "100.100.100.200", "168.63.129.16",
		"224.0.0.1", "255.255.255.255", "0.0.0.0", "192.0.2.1", "240.0.0.1",
		"198.18.0.1", "::", "::1", "::ffff:127.0.0.1", "::127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::",
		"2001:0:4136:e378:8000:63bf:80ff:fffe", "fe80::1", "fc00::1",
		"fd00:ec2::254", "ff02::1", "2001:db8::1", "100::1",
	};
	static const char *const allowed[] = {
		"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8",
		"64:ff9b::8.8.8.8", "2002:808:808::1",
	};
	struct conf_cidrs none = { NULL, 0 };
	size_t i;

	(void)state;
	for (i = 0; i < N(refused); i++) {
		struct sockaddr_storage ss = raw(refused[i]);
		enum gw_reason why = GW_R_NONE;

		if (gw_addr_check((struct sockaddr *)&ss, NULL, &why) != -EACCES ||
		    why != GW_R_PRIVATE_ADDRESS)
			fail_msg("%s was not refused", refused[i]);
		if (gw_addr_check((struct sockaddr *)&ss, &none, NULL) != -EACCES)
			fail_msg("%s was not refused (empty list)", refused[i]);
	}
	for (i = 0; i < N(allowed); i++) {
		struct sockaddr_storage ss = raw(allowed[i]);
		enum gw_reason why = GW_R_INTERNAL;

		if (gw_addr_check((struct sockaddr *)&ss, NULL, &why) != 0 || why != GW_R_NONE)
			fail_msg("%s was refused", allowed[i]);
	}
	assert_int_equal(gw_addr_check(NULL, NULL, NULL), -EACCES);
}

struct check_case {
	const char *addr;
	bool ok;
};

static void run_checks(const struct conf_cidrs *l, const struct check_case *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct sockaddr_storage ss = raw(v[i].addr);
		int rc = gw_addr_check((struct sockaddr *)&ss, l, NULL);

		if ((rc == 0) != v[i].ok)
			fail_msg("%s: rc %d, want %s", v[i].addr, rc, v[i].ok ? "allowed" : "refused");
	}
}

static void test_check_exemptions_v4(void **state)
{
	struct conf_cidr v[] = { cidr("10.0.0.0", 8), cidr("127.0.0.0", 8) };
	struct conf_cidrs l = { v, N(v) };
	static const struct check_case c[] = {
		{ "10.1.2.3", true },
		{ "127.0.0.1", true },
		{ "::ffff:10.1.2.3", true },            /* v4 rule, mapped form */
		{ "::ffff:127.0.0.1", true },
		{ "::ffff:0:10.1.2.3", true },
		{ "::10.1.2.3", true },
		{ "64:ff9b::a01:203", true },           /* NAT64 of 10.1.2.3 */
		{ "2002:a01:203::", true },             /* 6to4 of 10.1.2.3 */
		{ "2001:0:4136:e378:8000:63bf:f5fe:fdfc", true }, /* Teredo */
		{ "::1", false },                       /* v6 loopback: not 127/8 */
		{ "192.168.1.1", false },
		{ "172.16.0.1", false },
		{ "::ffff:192.168.1.1", false },
		{ "64:ff9b::a9fe:a9fe", false },
		{ "fd00::1", false },
		{ "8.8.8.8", true },
	};

	(void)state;
	run_checks(&l, c, N(c));
}

static void test_check_exemptions_v6(void **state)
{
	struct conf_cidr v[] = { cidr("::1", 128), cidr("fd00::", 8), cidr("64:ff9b::", 96),
				 cidr("::ffff:192.168.0.0", 112) };
	struct conf_cidrs l = { v, N(v) };
	static const struct check_case c[] = {
		{ "::1", true },
		{ "fd00::1", true },
		{ "fdff:ffff::1", true },
		{ "fc00::1", false },
		{ "fe80::1", false },
		{ "127.0.0.1", false },                 /* ::1 says nothing of 127/8 */
		{ "64:ff9b::7f00:1", true },            /* the v6 range holds it */
		{ "64:ff9b::a9fe:a9fe", false },        /* metadata: exact entry only */
		{ "fd00:ec2::254", false },             /* same, under fd00::/8 */
		{ "192.168.3.4", true },                /* v4 through a mapped v6 rule */
		{ "192.169.3.4", true },                /* public anyway */
		{ "10.0.0.1", false },
	};

	(void)state;
	run_checks(&l, c, N(c));
}

static void test_check_metadata_needs_exact(void **state)
{
	struct conf_cidr broad[] = { cidr("0.0.0.0", 0), cidr("169.254.0.0", 16),
				     cidr("::", 0), cidr("100.64.0.0", 10) };
	struct conf_cidrs lb = { broad, N(broad) };
	static const struct check_case cb[] = {
		{ "127.0.0.1", true },
		{ "169.254.1.1", true },
		{ "fe80::1", true },
		{ "100.64.0.1", true },
		{ "169.254.169.254", false },
		{ "100.100.100.200", false },
		{ "fd00:ec2::254", false },
		{ "64:ff9b::a9fe:a9fe", false },
		{ "::ffff:169.254.169.254", false },
	};
	struct conf_cidr exact[] = { cidr("169.254.169.254", 32), cidr("fd00:ec2::254", 128) };
	struct conf_cidrs le = { exact, N(exact) };
	static const struct check_case ce[] = {
		{ "169.254.169.254", true },
		{ "::ffff:169.254.169.254", true },
		{ "64:ff9b::a9fe:a9fe", true },
		{ "2002:a9fe:a9fe::", true },
		{ "fd00:ec2::254", true },
		{ "169.254.169.253", false },
		{ "100.100.100.200", false },
	};
	struct sockaddr_storage ss;

	(void)state;
	run_checks(&lb, cb, N(cb));
	run_checks(&le, ce, N(ce));
	/* the decimal spelling is the same address */
	assert_int_equal(gw_addr_parse_literal("2852039166", 10, &ss), 1);
	assert_int_equal(gw_addr_check((struct sockaddr *)&ss, &le, NULL), 0);
	assert_int_equal(gw_addr_check((struct sockaddr *)&ss, &lb, NULL), -EACCES);
}

static void test_cidr_contains(void **state)
{
	struct conf_cidr c = cidr("172.16.0.0", 12);
	struct conf_cidr bad = cidr("10.0.0.0", 8);
	uint8_t a[4] = { 172, 31, 255, 255 }, b[4] = { 172, 32, 0, 0 };
	uint8_t v6[16] = { 0 };

	(void)state;
	assert_true(gw_addr_cidr_contains(&c, AF_INET, a));
	assert_false(gw_addr_cidr_contains(&c, AF_INET, b));
	assert_false(gw_addr_cidr_contains(&c, AF_INET6, v6));
	assert_false(gw_addr_cidr_contains(NULL, AF_INET, a));
	bad.prefix = 33;
	assert_false(gw_addr_cidr_contains(&bad, AF_INET, a));
}

/* ---- formatting ------------------------------------------------------- */

static void test_format(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_un sun;
	char buf[GW_ADDR_FMT_MAX];

	(void)state;
	ss = raw("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	((struct sockaddr_in6 *)&ss)->sin6_port = htons(65535);
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, 10), -ENOSPC);
	assert_string_equal(buf, "");
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, 0), -ENOSPC);

	ss = raw("::ffff:1.2.3.4");
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "::ffff:1.2.3.4");

	ss = raw("192.0.2.1");
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "192.0.2.1");
	((struct sockaddr_in *)&ss)->sin_port = htons(8080);
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "192.0.2.1:8080");
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, 14), -ENOSPC);
	assert_int_equal(gw_addr_format((struct sockaddr *)&ss, buf, 15), 0);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	assert_int_equal(gw_addr_format((struct sockaddr *)&sun, buf, sizeof(buf)),
			 -EAFNOSUPPORT);
	assert_int_equal(gw_addr_format(NULL, buf, sizeof(buf)), -EAFNOSUPPORT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_names),
		cmocka_unit_test(test_parse_spellings),
		cmocka_unit_test(test_classify_v4_spellings),
		cmocka_unit_test(test_classify_v4_ranges),
		cmocka_unit_test(test_classify_v6),
		cmocka_unit_test(test_classify_other_family),
		cmocka_unit_test(test_class_names),
		cmocka_unit_test(test_embedded),
		cmocka_unit_test(test_check_refuses_private),
		cmocka_unit_test(test_check_exemptions_v4),
		cmocka_unit_test(test_check_exemptions_v6),
		cmocka_unit_test(test_check_metadata_needs_exact),
		cmocka_unit_test(test_cidr_contains),
		cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

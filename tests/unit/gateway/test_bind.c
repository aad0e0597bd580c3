/* test_bind.c: the binding rules of proto/bind.h as one table: the
 * destination D a way in bound (a CONNECT's, a SOCKS5 request's, the SNI
 * door's name), what the guest's hello then said, and the Host of a
 * request inside; the answer is the first refusal, or none. Refusals
 * first. Every row runs the two rules in the order the door does (the hello,
 * then each request). Also gw_addr_same(), which binds an IP literal to a
 * name's addresses. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "addr.h"
#include "bind.h"
#include "reason.h"
#include "tlshello.h"

#define NOHOST ((const char *)0)

struct row {
	const char *d;                  /* the bound destination */
	uint16_t port;                  /* the CONNECT's port */
	enum gw_tlshello_result hello;  /* what the reader made of the hello */
	const char *sni;                /* its server name (hello OK) */
	const char *host;               /* the inner Host (NOHOST: none, or two) */
	enum gw_reason want;
};

static const struct row rows[] = {
	/* the hello refuses */
	{ "origin.test", 443, GW_TLSHELLO_OK, "other.test", "origin.test", GW_R_TLS_SNI_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test.evil", "origin.test", GW_R_TLS_SNI_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "rigin.test", "origin.test", GW_R_TLS_SNI_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "evil.origin.test", "origin.test", GW_R_TLS_SNI_MISMATCH },
	{ "origin.test", 8443, GW_TLSHELLO_OK, "other.test", "origin.test:8443", GW_R_TLS_SNI_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_NOT_TLS, NULL, "origin.test", GW_R_TLS_NOT_TLS },
	{ "origin.test", 443, GW_TLSHELLO_NOT_CLIENT_HELLO, NULL, "origin.test", GW_R_TLS_NOT_CLIENT_HELLO },
	{ "origin.test", 443, GW_TLSHELLO_BAD_SNI, NULL, "origin.test", GW_R_TLS_BAD_SNI },
	{ "origin.test", 443, GW_TLSHELLO_FRAGMENTED, NULL, "origin.test", GW_R_TLS_FRAGMENTED },
	{ "origin.test", 443, GW_TLSHELLO_TOO_BIG, NULL, "origin.test", GW_R_TLS_TOO_BIG },
	{ "origin.test", 443, GW_TLSHELLO_MALFORMED, NULL, "origin.test", GW_R_TLS_MALFORMED },
	/* the hello agrees; the Host refuses */
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", NOHOST, GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "other.test", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test.", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.tes", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.testx", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:8443", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:0443", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:44", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:443 ", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "user@origin.test", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "10.99.0.10", GW_R_HOST_MISMATCH },
	{ "origin.test", 8443, GW_TLSHELLO_OK, "origin.test", "origin.test", GW_R_HOST_MISMATCH },
	{ "origin.test", 8443, GW_TLSHELLO_OK, "origin.test", "origin.test:443", GW_R_HOST_MISMATCH },
	{ "origin.test", 443, GW_TLSHELLO_NO_SNI, NULL, "other.test", GW_R_HOST_MISMATCH },
	/* bound */
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test", GW_R_NONE },
	{ "origin.test", 443, GW_TLSHELLO_OK, "ORIGIN.test", "Origin.Test", GW_R_NONE },
	{ "origin.test", 443, GW_TLSHELLO_OK, "origin.test", "origin.test:443", GW_R_NONE },
	{ "origin.test", 8443, GW_TLSHELLO_OK, "origin.test", "origin.test:8443", GW_R_NONE },
	{ "origin.test", 443, GW_TLSHELLO_NO_SNI, NULL, "origin.test", GW_R_NONE },
	{ "origin.test", 8443, GW_TLSHELLO_NO_SNI, NULL, "ORIGIN.TEST:8443", GW_R_NONE },
};

static void
test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct gw_tlshello h;
		enum gw_reason got;

		memset(&h, 0, sizeof(h));
		if (r->sni)
			snprintf(h.sni, sizeof(h.sni), "%s", r->sni);
		got = gw_bind_sni(r->d, r->hello, &h);
		if (got == GW_R_NONE)
			got = gw_bind_host(r->d, r->port, r->host, r->host ? strlen(r->host) : 0);
		if (got != r->want)
			fail_msg("row %zu (D %s:%u, hello %d sni %s, Host %s): %s, want %s", i, r->d,
				 r->port, r->hello, r->sni ? r->sni : "-", r->host ? r->host : "(none)",
				 gw_reason_name(got), gw_reason_name(r->want));
	}
}

/* Host is counted, not terminated: a value with bytes past D is not D. */
static void
test_host_counted(void **state)
{
	static const char v[] = "origin.test\0evil";

	(void)state;
	assert_int_equal(gw_bind_host("origin.test", 443, v, sizeof(v) - 1), GW_R_HOST_MISMATCH);
	assert_int_equal(gw_bind_host("origin.test", 443, v, 11), GW_R_NONE);
}

static void
sa(const char *s, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	assert_int_equal(gw_addr_parse_literal(s, strlen(s), ss), 1);
}

static void
test_addr_same(void **state)
{
	struct sockaddr_storage a, b;
	struct sockaddr_in6 m;

	(void)state;
	sa("10.99.0.10", &a);
	sa("10.99.0.11", &b);
	assert_false(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	sa("fd99::10", &b);
	assert_false(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	sa("fd99::11", &a);
	assert_false(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	/* same */
	sa("fd99::10", &a);
	assert_true(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	sa("10.99.0.10", &a);
	sa("0x0a63000a", &b);   /* another spelling of the same address */
	assert_true(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	/* IPv4-mapped IPv6 from a resolver is the IPv4 address */
	memset(&m, 0, sizeof(m));
	m.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.99.0.10", &m.sin6_addr), 1);
	assert_true(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&m));
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.99.0.11", &m.sin6_addr), 1);
	assert_false(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&m));
	/* ports do not matter */
	((struct sockaddr_in *)&b)->sin_port = htons(443);
	assert_true(gw_addr_same((struct sockaddr *)&a, (struct sockaddr *)&b));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_host_counted),
		cmocka_unit_test(test_addr_same),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

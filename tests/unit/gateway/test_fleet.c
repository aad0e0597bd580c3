/* test_fleet.c: the lane address allocator and the sandbox environment
 * (the pure parts of gateway/fleet.c). Bad inputs first. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "conf-t.h"
#include "fleet.h"

static struct in_addr
A(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a;
}

static const char *
S(struct in_addr a)
{
	static char buf[4][INET_ADDRSTRLEN];
	static int k;

	k = (k + 1) % 4;
	return inet_ntop(AF_INET, &a, buf[k], sizeof(buf[k]));
}

static void
test_pool_bad_prefix(void **state)
{
	struct gw_addr_pool p;

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.0.0.0"), 7), -EINVAL);
	assert_int_equal(gw_addr_pool_init(&p, A("10.0.0.0"), 31), -EINVAL);
	assert_int_equal(gw_addr_pool_init(&p, A("10.0.0.0"), 32), -EINVAL);
	assert_int_equal(gw_addr_pool_init(&p, A("10.0.0.0"), 200), -EINVAL);
}

static void
test_pool_claim_out_of_range(void **state)
{
	struct gw_addr_pool p;

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.88.1.0"), 24), 0);
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.2.5")), -ERANGE);
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.0.255")), -ERANGE);
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.1.0")), -ERANGE);   /* network */
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.1.1")), -ERANGE);   /* gateway */
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.1.255")), -ERANGE); /* broadcast */
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.1.9")), 0);
	assert_int_equal(gw_addr_pool_claim(&p, A("10.88.1.9")), -EEXIST);
	assert_int_equal(p.used, 1);
	/* Freeing what is not taken, or is reserved, changes nothing. */
	gw_addr_pool_put(&p, A("10.88.1.1"));
	gw_addr_pool_put(&p, A("10.88.1.10"));
	gw_addr_pool_put(&p, A("192.168.0.1"));
	assert_int_equal(p.used, 1);
	gw_addr_pool_fini(&p);
}

static void
test_pool_exhaustion_29(void **state)
{
	struct gw_addr_pool p;
	struct in_addr a;
	const char *want[] = { "10.1.2.10", "10.1.2.11", "10.1.2.12", "10.1.2.13", "10.1.2.14" };

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.1.2.8"), 29), 0);
	assert_string_equal(S(gw_addr_pool_gateway(&p)), "10.1.2.9");
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(gw_addr_pool_take(&p, &a), 0);
		assert_string_equal(S(a), want[i]);
	}
	assert_int_equal(gw_addr_pool_take(&p, &a), -ENOSPC);
	gw_addr_pool_put(&p, A("10.1.2.12"));
	assert_int_equal(gw_addr_pool_take(&p, &a), 0);
	assert_string_equal(S(a), "10.1.2.12");
	assert_int_equal(gw_addr_pool_take(&p, &a), -ENOSPC);
	gw_addr_pool_fini(&p);
}

static void
test_pool_host_bits_ignored(void **state)
{
	struct gw_addr_pool p;
	struct in_addr a;

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.88.1.77"), 24), 0);
	assert_string_equal(S(gw_addr_pool_gateway(&p)), "10.88.1.1");
	assert_int_equal(gw_addr_pool_take(&p, &a), 0);
	assert_string_equal(S(a), "10.88.1.2");
	gw_addr_pool_fini(&p);
}

/* A freed address comes back only after every other one was used. */
static void
test_pool_round_robin(void **state)
{
	struct gw_addr_pool p;
	struct in_addr a, first;

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.88.1.0"), 24), 0);
	assert_int_equal(gw_addr_pool_take(&p, &first), 0);
	assert_string_equal(S(first), "10.88.1.2");
	gw_addr_pool_put(&p, first);
	assert_int_equal(gw_addr_pool_take(&p, &a), 0);
	assert_string_equal(S(a), "10.88.1.3");
	for (int i = 0; i < 251; i++)
		assert_int_equal(gw_addr_pool_take(&p, &a), 0);
	assert_string_equal(S(a), "10.88.1.254");
	assert_int_equal(gw_addr_pool_take(&p, &a), 0);
	assert_string_equal(S(a), "10.88.1.2");   /* wrapped past .255, .0, .1 */
	assert_int_equal(gw_addr_pool_take(&p, &a), -ENOSPC);
	assert_int_equal(p.used, 253);
	gw_addr_pool_fini(&p);
}

/* A /8 covers its first 65,536 addresses; the last of those is a host. */
static void
test_pool_wide_subnet(void **state)
{
	struct gw_addr_pool p;
	struct in_addr a;
	uint32_t n = 0;

	(void)state;
	assert_int_equal(gw_addr_pool_init(&p, A("10.0.0.0"), 8), 0);
	while (gw_addr_pool_take(&p, &a) == 0)
		n++;
	assert_int_equal(n, 65536 - 2);
	assert_string_equal(S(a), "10.0.255.255");
	gw_addr_pool_fini(&p);
}

static struct conf_lane
lane(bool fwd, bool socks)
{
	struct conf_lane l = { .name = "egress" };

	l.door_forward = fwd ? 3128 : 0;
	l.door_socks = socks ? 1080 : 0;
	l.egress = fwd || socks;
	return l;
}

static void
test_env_none_lane(void **state)
{
	char env[GW_FLEET_ENV_MAX][GW_FLEET_ENV_LEN];
	struct conf_lane l = lane(false, false);

	(void)state;
	assert_int_equal(gw_fleet_env(&l, A("10.88.0.1"), env, GW_FLEET_ENV_MAX), 0);
	assert_int_equal(gw_fleet_env(NULL, A("10.88.0.1"), env, GW_FLEET_ENV_MAX), 0);
}

static void
test_env_egress_lane(void **state)
{
	char env[GW_FLEET_ENV_MAX][GW_FLEET_ENV_LEN];
	struct conf_lane l = lane(true, true);
	static const char *const want[] = {
		"HTTP_PROXY=http://10.88.1.1:3128",   "HTTPS_PROXY=http://10.88.1.1:3128",
		"ALL_PROXY=socks5h://10.88.1.1:1080", "NO_PROXY=localhost,127.0.0.1,::1",
		"http_proxy=http://10.88.1.1:3128",   "https_proxy=http://10.88.1.1:3128",
		"all_proxy=socks5h://10.88.1.1:1080", "no_proxy=localhost,127.0.0.1,::1",
	};

	(void)state;
	assert_int_equal(gw_fleet_env(&l, A("10.88.1.1"), env, GW_FLEET_ENV_MAX), 8);
	for (size_t i = 0; i < 8; i++)
		assert_string_equal(env[i], want[i]);
	/* A short array gets what fits. */
	assert_int_equal(gw_fleet_env(&l, A("10.88.1.1"), env, 3), 3);
	assert_string_equal(env[2], want[2]);
}

static void
test_env_forward_only(void **state)
{
	char env[GW_FLEET_ENV_MAX][GW_FLEET_ENV_LEN];
	struct conf_lane l = lane(true, false);

	(void)state;
	assert_int_equal(gw_fleet_env(&l, A("10.88.1.1"), env, GW_FLEET_ENV_MAX), 8);
	assert_string_equal(env[2], "ALL_PROXY=http://10.88.1.1:3128");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_bad_prefix),
		cmocka_unit_test(test_pool_claim_out_of_range),
		cmocka_unit_test(test_pool_exhaustion_29),
		cmocka_unit_test(test_pool_host_bits_ignored),
		cmocka_unit_test(test_pool_round_robin),
		cmocka_unit_test(test_pool_wide_subnet),
		cmocka_unit_test(test_env_none_lane),
		cmocka_unit_test(test_env_egress_lane),
		cmocka_unit_test(test_env_forward_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

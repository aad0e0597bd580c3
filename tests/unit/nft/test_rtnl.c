/* test_rtnl.c: nft/rtnl.c's pure part, the "ADDR/PREFIX" parser. The
 * requests themselves are exercised against real namespaces by the
 * sandbox and fleet end-to-end suites. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "rtnl.h"
#include "../sl_test.h"

static void
test_cidr(void **st)
{
	unsigned char a[16];
	unsigned p;

	(void)st;
	assert_int_equal(fw_rtnl_parse_cidr(NULL, a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1/", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1/-1", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1/+1", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1/33", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.0.0.1/24x", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("010.0.0.1/24", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("::1/129", a, &p), -EINVAL);
	assert_int_equal(fw_rtnl_parse_cidr("10.88.1.7/24", a, &p), AF_INET);
	assert_int_equal(p, 24);
	assert_int_equal(a[0], 10);
	assert_int_equal(a[3], 7);
	assert_int_equal(fw_rtnl_parse_cidr("fd00::7/64", a, &p), AF_INET6);
	assert_int_equal(p, 64);
	assert_int_equal(a[15], 7);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cidr),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

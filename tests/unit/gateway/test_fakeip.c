/* test_fakeip.c: one sandbox's synthetic addresses. Bad arguments first,
 * then the reuse rules, then a long random run checked against a model:
 * no address ever stands for two names at once, and a name keeps its
 * address while it is held. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakeip.h"

#define BASE 0xc6120000u        /* 198.18.0.0 */

static void
test_refused(void **state)
{
	struct gw_fakeip *f;
	char long_name[300];
	uint32_t a;

	(void)state;
	errno = 0;
	assert_null(gw_fakeip_new(BASE, 0, 4, 1000));
	assert_int_equal(errno, EINVAL);
	assert_null(gw_fakeip_new(BASE, 4, 0, 1000));
	assert_null(gw_fakeip_new(0xffffff00u, 0x200, 4, 1000));       /* past 2^32 */
	f = gw_fakeip_new(BASE, 4, 4, 1000);
	assert_non_null(f);
	assert_int_equal(gw_fakeip_get(f, "", 0, &a), -EINVAL);
	assert_int_equal(gw_fakeip_get(f, NULL, 0, &a), -EINVAL);
	memset(long_name, 'a', 254);
	long_name[254] = '\0';
	assert_int_equal(gw_fakeip_get(f, long_name, 0, &a), -EINVAL);
	long_name[253] = '\0';
	assert_int_equal(gw_fakeip_get(f, long_name, 0, &a), 0);
	gw_fakeip_free(f);
	gw_fakeip_free(NULL);
}

static void
test_lookup(void **state)
{
	struct gw_fakeip *f = gw_fakeip_new(BASE, 16, 8, 1000);
	char name[GW_FAKEIP_NAME_MAX + 1];
	uint32_t a, b, a2;

	(void)state;
	assert_int_equal(gw_fakeip_get(f, "github.com", 0, &a), 0);
	assert_int_equal(gw_fakeip_get(f, "pypi.org", 0, &b), 0);
	assert_int_equal(gw_fakeip_get(f, "github.com", 5, &a2), 0);
	assert_int_equal(a, a2);
	assert_int_not_equal(a, b);
	assert_true(a >= BASE && a < BASE + 16 && b >= BASE && b < BASE + 16);
	assert_true(gw_fakeip_name(f, b, 6, name));
	assert_string_equal(name, "pypi.org");
	assert_false(gw_fakeip_name(f, BASE + 15, 6, name));   /* never given */
	assert_false(gw_fakeip_name(f, BASE + 16, 6, name));   /* out of range */
	assert_false(gw_fakeip_name(f, BASE - 1, 6, name));
	assert_int_equal(gw_fakeip_count(f), 2);
	gw_fakeip_free(f);
}

/* Full while every name is held; then the least recently used goes, and
 * its address is not the next one given while fresh ones remain. */
static void
test_hold_and_reuse(void **state)
{
	struct gw_fakeip *f = gw_fakeip_new(BASE, 8, 3, 1000);
	char name[GW_FAKEIP_NAME_MAX + 1];
	uint32_t a, b, c, d, e;

	(void)state;
	assert_int_equal(gw_fakeip_get(f, "a.test", 0, &a), 0);
	assert_int_equal(gw_fakeip_get(f, "b.test", 10, &b), 0);
	assert_int_equal(gw_fakeip_get(f, "c.test", 20, &c), 0);
	assert_int_equal(gw_fakeip_get(f, "d.test", 500, &d), -ENOSPC);
	/* a used (a connection to it) at 900: b is now the oldest */
	assert_true(gw_fakeip_name(f, a, 900, name));
	assert_int_equal(gw_fakeip_get(f, "d.test", 1009, &d), -ENOSPC);      /* b held */
	assert_int_equal(gw_fakeip_get(f, "d.test", 1010, &d), 0);
	assert_false(gw_fakeip_name(f, b, 1010, name));                         /* b let go */
	assert_true(gw_fakeip_name(f, a, 1010, name));
	assert_string_equal(name, "a.test");
	assert_int_not_equal(d, b);             /* fresh addresses first */
	assert_int_equal(d, BASE + 3);
	/* b asked again: a new address, c goes (oldest, held since 20) */
	assert_int_equal(gw_fakeip_get(f, "b.test", 1100, &e), 0);
	assert_int_not_equal(e, b);
	assert_false(gw_fakeip_name(f, c, 1100, name));
	assert_int_equal(gw_fakeip_count(f), 3);
	gw_fakeip_free(f);
}

/* A clock that goes backwards holds everything (never reuses early). */
static void
test_clock_backwards(void **state)
{
	struct gw_fakeip *f = gw_fakeip_new(BASE, 1, 1, 1000);
	uint32_t a;

	(void)state;
	assert_int_equal(gw_fakeip_get(f, "a.test", 5000, &a), 0);
	assert_int_equal(gw_fakeip_get(f, "b.test", 100, &a), -ENOSPC);
	assert_int_equal(gw_fakeip_get(f, "b.test", 6000, &a), 0);
	assert_int_equal(a, BASE);              /* size 1: the one address */
	gw_fakeip_free(f);
}

/* Random names and lookups against a model. */
static void
test_model(void **state)
{
	enum { SIZE = 64, MAX = 24, NAMES = 80, HOLD = 50 };
	struct gw_fakeip *f = gw_fakeip_new(BASE, SIZE, MAX, HOLD);
	uint32_t addr_of[NAMES];          /* 0: none */
	uint64_t last[NAMES] = { 0 };
	char name[GW_FAKEIP_NAME_MAX + 1];
	uint64_t now = 0;
	unsigned seed = 12345;

	(void)state;
	memset(addr_of, 0, sizeof(addr_of));
	for (int step = 0; step < 200000; step++) {
		int k = (int)(rand_r(&seed) % NAMES);
		char nm[16];
		uint32_t a;
		int rc;

		now += rand_r(&seed) % 4;
		snprintf(nm, sizeof(nm), "n%d.test", k);
		if (rand_r(&seed) % 3) {
			rc = gw_fakeip_get(f, nm, now, &a);
			if (rc == -ENOSPC) {
				/* only when every name the model has is held */
				size_t held = 0;

				for (int j = 0; j < NAMES; j++)
					held += addr_of[j] && now - last[j] < HOLD;
				assert_int_equal(held, MAX);
				continue;
			}
			assert_int_equal(rc, 0);
			/* a name still held keeps its address */
			if (addr_of[k] && now - last[k] < HOLD)
				assert_int_equal(a, addr_of[k]);
			/* no other name has it now */
			for (int j = 0; j < NAMES; j++)
				if (j != k && addr_of[j] == a)
					addr_of[j] = 0;
			addr_of[k] = a;
			last[k] = now;
		} else if (addr_of[k]) {
			if (gw_fakeip_name(f, addr_of[k], now, name)) {
				if (strcmp(name, nm) == 0) {
					last[k] = now;
				} else {
					/* let go, and given to another: only after the hold */
					assert_true(now - last[k] >= HOLD);
					addr_of[k] = 0;
				}
			} else {
				assert_true(now - last[k] >= HOLD);
				addr_of[k] = 0;
			}
		}
		assert_true(gw_fakeip_count(f) <= MAX);
	}
	gw_fakeip_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_hold_and_reuse),
		cmocka_unit_test(test_clock_backwards),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

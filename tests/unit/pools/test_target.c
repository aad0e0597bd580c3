/* test_target.c: the pool target function with a fake clock, and lease
 * clamping at its edges. Bad and edge inputs first. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "target.h"

static void
test_ttl_edges(void **state)
{
	(void)state;
	/* absent or 0: the pool's default */
	assert_int_equal(pool_ttl(false, 0, 3600, 86400), 3600);
	assert_int_equal(pool_ttl(false, 99, 3600, 86400), 3600);
	assert_int_equal(pool_ttl(true, 0, 3600, 86400), 3600);
	/* negative: 1, never a wrap to a huge lease */
	assert_int_equal(pool_ttl(true, -1, 3600, 86400), 1);
	assert_int_equal(pool_ttl(true, INT64_MIN, 3600, 86400), 1);
	assert_int_equal(pool_ttl(true, -4294967296LL, 3600, 86400), 1);
	/* huge: the maximum, never a truncation to something small */
	assert_int_equal(pool_ttl(true, 2147483648LL, 3600, 86400), 86400);
	assert_int_equal(pool_ttl(true, 4294967296LL + 5, 3600, 86400), 86400);
	assert_int_equal(pool_ttl(true, INT64_MAX, 3600, 86400), 86400);
	/* in range, and the edges */
	assert_int_equal(pool_ttl(true, 1, 3600, 86400), 1);
	assert_int_equal(pool_ttl(true, 600, 3600, 86400), 600);
	assert_int_equal(pool_ttl(true, 86400, 3600, 86400), 86400);
	assert_int_equal(pool_ttl(true, 86401, 3600, 86400), 86400);
	/* a default above the maximum is held to it */
	assert_int_equal(pool_ttl(false, 0, 90000, 86400), 86400);
}

static void
test_target_bad_numbers(void **state)
{
	struct pool_lead l = { .ms = 500, .n = 3 };

	(void)state;
	assert_int_equal(pool_target(NAN, &l, 1.5, 1, 8), 1);
	assert_int_equal(pool_target(-5, &l, 1.5, 1, 8), 1);
	assert_int_equal(pool_target(INFINITY, &l, 1.5, 0, 8), 8);
	assert_int_equal(pool_target(1e300, &l, 1e300, 0, 8), 8);
	assert_int_equal(pool_target(2, &l, NAN, 2, 8), 2);
	assert_int_equal(pool_target(2, &l, -1, 2, 8), 2);
	/* warm above warm_max: warm_max */
	assert_int_equal(pool_target(0, &l, 1.5, 9, 4), 4);
	/* a lead of NaN counts as unmeasured: one */
	l.ms = NAN;
	assert_int_equal(pool_target(3, &l, 1.5, 0, 8), 1);
}

static void
test_target_formula(void **state)
{
	struct pool_lead l = { 0 };

	(void)state;
	pool_lead_record(&l, 2000);     /* 2 s */
	/* 1 claim/s x 2 s x 1.5 = 3 */
	assert_int_equal(pool_target(1.0, &l, 1.5, 0, 8), 3);
	/* 0.5 x 2 x 1.5 = 1.5 -> 2 */
	assert_int_equal(pool_target(0.5, &l, 1.5, 0, 8), 2);
	/* clamped to warm_max */
	assert_int_equal(pool_target(10, &l, 1.5, 0, 8), 8);
	/* never under warm */
	assert_int_equal(pool_target(0.1, &l, 1.5, 2, 8), 2);
	/* no claims: warm */
	assert_int_equal(pool_target(0, &l, 1.5, 0, 8), 0);
	assert_int_equal(pool_target(0, &l, 1.5, 1, 8), 1);
}

static void
test_target_bootstrap_unmeasured(void **state)
{
	struct pool_lead l = { 0 };

	(void)state;
	assert_int_equal(pool_target(0, &l, 1.5, 0, 8), 0);
	assert_int_equal(pool_target(0.2, &l, 1.5, 0, 8), 1);
	assert_int_equal(pool_target(50, &l, 1.5, 0, 8), 1);
	assert_int_equal(pool_target(50, NULL, 1.5, 0, 8), 1);
	assert_int_equal(pool_target(50, &l, 1.5, 3, 8), 3);
}

static void
test_lead_average(void **state)
{
	struct pool_lead l = { 0 };

	(void)state;
	pool_lead_record(&l, 1000);
	assert_true(fabs(l.ms - 1000) < 1e-9);
	pool_lead_record(&l, 2000);     /* 1000 + 0.25 x 1000 */
	assert_true(fabs(l.ms - 1250) < 1e-9);
	assert_int_equal(l.n, 2);
}

/* warm 0 / warm_max 8: a burst grows the target, silence drains it to 0. */
static void
test_grows_and_drains(void **state)
{
	struct pool_rate r = { 0 };
	struct pool_lead l = { 0 };
	uint64_t t = 1000000;
	uint32_t peak = 0, tg;

	(void)state;
	pool_lead_record(&l, 1500);
	/* 10 claims a second for three minutes (six half-lives) */
	for (int i = 0; i < 1800; i++, t += 100) {
		pool_rate_arrival(&r, t);
		tg = pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 0, 8);
		peak = tg > peak ? tg : peak;
	}
	assert_int_equal(peak, 8);
	/* the rate settles near the real one */
	assert_true(pool_rate_at(&r, t) > 8 && pool_rate_at(&r, t) < 12);
	/* then silence: 10 minutes later the pool wants nothing */
	t += 600000;
	assert_true(pool_rate_at(&r, t) == 0);
	assert_int_equal(pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 0, 8), 0);
}

/* warm 1: never below one, whatever the silence. */
static void
test_floor_one_never_undercut(void **state)
{
	struct pool_rate r = { 0 };
	struct pool_lead l = { .ms = 100, .n = 1 };
	uint64_t t = 5000;

	(void)state;
	pool_rate_arrival(&r, t);
	for (int i = 0; i < 100; i++, t += 60000)
		assert_true(pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 1, 8) >= 1);
	assert_int_equal(pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 1, 8), 1);
}

/* An idle pool's target decays step by step to its floor, never jumps up. */
static void
test_idle_decays_to_floor(void **state)
{
	struct pool_rate r = { 0 };
	struct pool_lead l = { .ms = 4000, .n = 5 };
	uint64_t t = 0;
	uint32_t prev, tg;

	(void)state;
	for (int i = 0; i < 300; i++, t += 200)
		pool_rate_arrival(&r, t);
	prev = pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 2, 8);
	assert_int_equal(prev, 8);
	for (int i = 0; i < 200; i++, t += 5000) {
		tg = pool_target(pool_rate_at(&r, t), &l, POOL_SAFETY, 2, 8);
		assert_true(tg <= prev);
		prev = tg;
	}
	assert_int_equal(prev, 2);
}

/* A clock that steps back does not add or lose anything. */
static void
test_clock_backwards(void **state)
{
	struct pool_rate r = { 0 };

	(void)state;
	pool_rate_arrival(&r, 10000);
	pool_rate_arrival(&r, 5000);
	assert_int_equal(r.at_ms, 10000);
	assert_true(pool_rate_at(&r, 1000) == r.value);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ttl_edges),
		cmocka_unit_test(test_target_bad_numbers),
		cmocka_unit_test(test_target_formula),
		cmocka_unit_test(test_target_bootstrap_unmeasured),
		cmocka_unit_test(test_lead_average),
		cmocka_unit_test(test_grows_and_drains),
		cmocka_unit_test(test_floor_one_never_undercut),
		cmocka_unit_test(test_idle_decays_to_floor),
		cmocka_unit_test(test_clock_backwards),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

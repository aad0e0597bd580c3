/* test_diff.c: what a new pool set would change (pools/diff.h), the pure
 * part behind PUT /v1/pools?dry_run=1 and `sluice pools diff`. Edge inputs
 * first (no sets, unknown counts, an empty new set), then each kind of
 * change with its keys, drains and kept claims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>
#include <jansson.h>

#include "conf.h"
#include "diff.h"

static const char base_yaml[] = "lanes:\n"
				"  - { name: none, subnet: 10.88.0.0/24 }\n"
				"  - name: egress\n"
				"    subnet: 10.88.1.0/24\n"
				"    doors: { forward: 3128 }\n"
				"policies:\n"
				"  - { name: default, allow: [\"example.com\"] }\n"
				"  - { name: open, mode: report }\n"
				"pools:\n"
				"  - { name: web, lane: egress, policy: default, warm: 2 }\n"
				"  - { name: batch, lane: none, policy: default, warm: 1 }\n"
				"  - { name: idle, lane: none, policy: open, warm: 0 }\n";

static struct conf *
load_base(void)
{
	struct conf_diag d;
	struct conf *c;

	conf_diag_init(&d);
	c = conf_load_mem("base.yaml", base_yaml, strlen(base_yaml), &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "base: %s\n", d.lines[i]);
	assert_non_null(c);
	conf_diag_fini(&d);
	return c;
}

/* base's pools replaced by those of the JSON text `pools` (a list). */
static struct conf *
with_pools(const struct conf *base, const char *pools)
{
	struct conf_diag d;
	json_error_t je;
	json_t *list = json_loads(pools, 0, &je), *body;
	struct conf *c;

	assert_non_null(list);
	body = json_pack("{s:o}", "pools", list);
	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "pools: %s\n", d.lines[i]);
	assert_non_null(c);
	conf_diag_fini(&d);
	json_decref(body);
	return c;
}

static json_int_t
summary(const json_t *diff, const char *key)
{
	const json_t *v = json_object_get(json_object_get(diff, "summary"), key);

	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* The entry for pool `name`; fails when there is none. */
static json_t *
change_of(const json_t *diff, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(diff, "changes"), i, e) {
		if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
			return e;
	}
	fail_msg("no change for pool %s", name);
	return NULL;
}

static void
expect_change(const json_t *diff, const char *name, const char *change, json_int_t drained,
	      json_int_t kept, const char *keys)
{
	json_t *e = change_of(diff, name);
	char *k;

	assert_string_equal(json_string_value(json_object_get(e, "change")), change);
	assert_int_equal(json_integer_value(json_object_get(e, "warm_drained")), drained);
	assert_int_equal(json_integer_value(json_object_get(e, "claims_kept")), kept);
	if (!keys) {
		assert_null(json_object_get(e, "keys"));
		return;
	}
	k = json_dumps(json_object_get(e, "keys"), JSON_COMPACT);
	assert_string_equal(k, keys);
	free(k);
}

static const struct pool_diff_live live3[] = {
	{ "web", 2, 1 },
	{ "batch", 1, 0 },
	{ "idle", 0, 3 },
	{ NULL, 9, 9 },                 /* a nameless row is never matched */
};

static void
test_no_sets(void **state)
{
	json_t *d;

	(void)state;
	d = pool_diff(NULL, NULL, NULL, 0);
	assert_non_null(d);
	assert_int_equal(json_array_size(json_object_get(d, "changes")), 0);
	assert_int_equal(summary(d, "added"), 0);
	assert_int_equal(summary(d, "warm_drained"), 0);
	assert_false(pool_diff_destructive(d));
	json_decref(d);
	assert_false(pool_diff_destructive(NULL));
}

/* pools: [] against three pools: every one removed, every warm sandbox
 * drained, every live claim kept. The case that once drained unasked. */
static void
test_empty_set_removes_all(void **state)
{
	struct conf *base = load_base(), *empty = with_pools(base, "[]");
	json_t *d = pool_diff(base, empty, live3, 4);

	(void)state;
	assert_non_null(d);
	assert_int_equal(json_array_size(json_object_get(d, "changes")), 3);
	expect_change(d, "web", "removed", 2, 1, NULL);
	expect_change(d, "batch", "removed", 1, 0, NULL);
	expect_change(d, "idle", "removed", 0, 3, NULL);
	assert_int_equal(summary(d, "removed"), 3);
	assert_int_equal(summary(d, "warm_drained"), 3);
	assert_int_equal(summary(d, "claims_kept"), 4);
	assert_true(pool_diff_destructive(d));
	json_decref(d);
	/* the same without counts: still removals, nothing known to drain */
	d = pool_diff(base, empty, NULL, 0);
	expect_change(d, "web", "removed", 0, 0, NULL);
	assert_true(pool_diff_destructive(d));
	json_decref(d);
	/* and from no set at all to base: three added */
	d = pool_diff(NULL, base, live3, 4);
	expect_change(d, "web", "added", 0, 0, NULL);
	assert_int_equal(summary(d, "added"), 3);
	assert_false(pool_diff_destructive(d));
	json_decref(d);
	conf_unref(empty);
	conf_unref(base);
}

static void
test_same_set_unchanged(void **state)
{
	struct conf *base = load_base();
	json_t *j = conf_pools_to_json(base);
	char *text = json_dumps(json_object_get(j, "pools"), JSON_COMPACT);
	struct conf *same = with_pools(base, text);
	json_t *d = pool_diff(base, same, live3, 4);

	(void)state;
	expect_change(d, "web", "unchanged", 0, 0, NULL);
	expect_change(d, "idle", "unchanged", 0, 0, NULL);
	assert_int_equal(summary(d, "unchanged"), 3);
	assert_int_equal(summary(d, "claims_kept"), 0);
	assert_false(pool_diff_destructive(d));
	json_decref(d);
	json_decref(j);
	free(text);
	conf_unref(same);
	conf_unref(base);
}

/* Policy and sizes keep the warm sandboxes; lane and limits replace them.
 * Order: the new set's, then the removed. */
static void
test_changes_and_keys(void **state)
{
	struct conf *base = load_base();
	struct conf *neu = with_pools(
	    base, "[{\"name\": \"fresh\", \"lane\": \"none\", \"policy\": \"open\"},"
		  " {\"name\": \"web\", \"lane\": \"egress\", \"policy\": \"open\", \"warm\": 3},"
		  " {\"name\": \"batch\", \"lane\": \"egress\", \"policy\": \"default\", \"warm\": 1,"
		  "  \"limits\": {\"memory_mb\": 128}}]");
	json_t *d = pool_diff(base, neu, live3, 4);
	json_t *ch = json_object_get(d, "changes");

	(void)state;
	assert_int_equal(json_array_size(ch), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ch, 0), "name")),
			    "fresh");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ch, 3), "name")),
			    "idle");
	expect_change(d, "fresh", "added", 0, 0, NULL);
	expect_change(d, "web", "changed", 0, 1, "[\"policy\",\"warm\"]");
	expect_change(d, "batch", "changed", 1, 0, "[\"lane\",\"limits.memory_mb\"]");
	expect_change(d, "idle", "removed", 0, 3, NULL);
	assert_int_equal(summary(d, "added"), 1);
	assert_int_equal(summary(d, "changed"), 2);
	assert_int_equal(summary(d, "removed"), 1);
	assert_int_equal(summary(d, "warm_drained"), 1);
	assert_int_equal(summary(d, "claims_kept"), 4);
	assert_true(pool_diff_destructive(d));
	json_decref(d);
	conf_unref(neu);
	conf_unref(base);
}

static void
test_boot_same(void **state)
{
	struct conf *base = load_base();
	struct conf_pool a = base->pools[0], b = base->pools[0];

	(void)state;
	assert_true(pool_boot_same(&a, &b));
	b.warm = 7;
	b.policy = "open";
	b.ttl_default_s = 5;
	assert_true(pool_boot_same(&a, &b));
	b = a;
	b.memory_mb++;
	assert_false(pool_boot_same(&a, &b));
	b = a;
	b.lane = "none";
	assert_false(pool_boot_same(&a, &b));
	b = a;
	b.pids++;
	assert_false(pool_boot_same(&a, &b));
	conf_unref(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_sets),
		cmocka_unit_test(test_empty_set_removes_all),
		cmocka_unit_test(test_same_set_unchanged),
		cmocka_unit_test(test_changes_and_keys),
		cmocka_unit_test(test_boot_same),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

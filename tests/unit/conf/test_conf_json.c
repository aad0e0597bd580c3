/* test_conf_json.c: the pool set as JSON (PUT/GET /v1/pools). Bad bodies
 * first, each with the exact "JSON.PATH: message" line it must produce; then
 * the bounds on depth and size; then round trips, an empty set, and the other
 * sections surviving the copy. */
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

/* Two lanes, two policies (one with a credential), a tenant with a key, an
 * operator token: what the copy must carry over unchanged. */
static const char base_yaml[] = "api: { operator_token: \"${env:SL_JSON_OP}\" }\n"
                                "lanes:\n"
                                "  - { name: none, subnet: 10.88.0.0/24 }\n"
                                "  - name: egress\n"
                                "    subnet: 10.88.1.0/24\n"
                                "    doors: { forward: 3128, socks: 1080, intercept: 3129 }\n"
                                "policies:\n"
                                "  - name: default\n"
                                "    allow: [\"example.com\", \"*.example.org:443\"]\n"
                                "    credentials:\n"
                                "      - { host: api.github.com, header: Authorization, value: "
                                "\"Bearer ${env:SL_JSON_TOKEN}\" }\n"
                                "    allow_private: [192.168.0.0/16]\n"
                                "  - { name: open, mode: report }\n"
                                "tenants:\n"
                                "  - { name: acme, keys: [\"${env:SL_JSON_KEY}\"], egress: "
                                "[\"*.github.com\"], max_claims: 4 }\n"
                                "gateway:\n"
                                "  clients: [{ name: ci, match: { user: ci, password: "
                                "\"${env:SL_JSON_KEY}x\" }, policy: open }]\n"
                                "pools:\n"
                                "  - { name: web, lane: egress, policy: default, warm: 1 }\n";

static struct conf *
load_base(const char *yaml)
{
	struct conf_diag d;
	struct conf *c;

	setenv("SL_JSON_OP", "op-secret", 1);
	setenv("SL_JSON_TOKEN", "gh-secret", 1);
	setenv("SL_JSON_KEY", "tenant-key", 1);
	conf_diag_init(&d);
	c = conf_load_mem("base.yaml", yaml, strlen(yaml), &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "base: %s\n", d.lines[i]);
	assert_non_null(c);
	conf_diag_fini(&d);
	return c;
}

/* Expects conf_with_pools_json(base, body) to fail with exactly `want`. */
static void
expect_errors(const struct conf *base, const json_t *body, const char *name,
              const char *const *want, size_t nwant)
{
	struct conf_diag d;
	struct conf *c;
	bool ok;

	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	ok = !c && d.n == nwant;
	for (size_t i = 0; ok && i < nwant; i++)
		ok = strcmp(d.lines[i], want[i]) == 0;
	if (!ok) {
		fprintf(stderr, "case %s:\n", name);
		for (size_t i = 0; i < nwant; i++)
			fprintf(stderr, "  want: %s\n", want[i]);
		for (size_t i = 0; i < d.n; i++)
			fprintf(stderr, "  got:  %s\n", d.lines[i]);
		conf_unref(c);
		fail_msg("case %s", name);
	}
	conf_diag_fini(&d);
}

struct bad_case {
	const char *name;
	const char *json;
	const char *want; /* the one diagnostic line expected */
};

#define P(rest)                                                                                    \
	"{\"pools\": [{\"name\": \"a\", \"lane\": \"egress\", \"policy\": \"default\"" rest "}]}"

static const struct bad_case bad_cases[] = {
    {"not_object", "[]", "body: expected a JSON object {\"pools\": [...]}, got an array"},
    {"string_body", "\"pools\"", "body: expected a JSON object {\"pools\": [...]}, got a string"},
    {"no_pools", "{}", "pools: missing: the body is {\"pools\": [...]}"},
    {"extra_key", "{\"pools\": [], \"lanes\": []}",
     "lanes: unknown key: the body holds only \"pools\", a list of pools"},
    {"extra_key_odd", "{\"pools\": [], \"a.b\\\"c\": 1}",
     "[\"a.b?c\"]: unknown key: the body holds only \"pools\", a list of pools"},
    {"pools_object", "{\"pools\": {\"name\": \"a\"}}",
     "pools: expected an array of pools, got an object"},
    {"pools_null", "{\"pools\": null}", "pools: expected an array of pools, got null"},
    {"pools_number", "{\"pools\": 3}", "pools: expected an array of pools, got a number"},
    {"pool_null", "{\"pools\": [null]}", "pools[0]: expected a mapping, got nothing"},
    {"pool_list", "{\"pools\": [[]]}", "pools[0]: expected a mapping, got a list"},
    {"unknown_key", P(", \"wram\": 1"),
     "pools[0].wram: unknown key 'wram' in pools[0] (did you mean 'warm'?)"},
    {"unknown_nested_key", P(", \"ttl\": {\"max_second\": 5}"),
     "pools[0].ttl.max_second: unknown key 'max_second' in pools[0].ttl (did you mean "
     "'max_seconds'?)"},
    {"unknown_key_nosuggest", P(", \"zzzzqqq\": 1"),
     "pools[0].zzzzqqq: unknown key 'zzzzqqq' in pools[0]"},
    {"missing_name", "{\"pools\": [{\"lane\": \"egress\", \"policy\": \"default\"}]}",
     "pools[0]: missing required key 'name'"},
    {"missing_lane", "{\"pools\": [{\"name\": \"a\", \"policy\": \"default\"}]}",
     "pools[0]: missing required key 'lane'"},
    {"bad_name",
     "{\"pools\": [{\"name\": \"Web\", \"lane\": \"egress\", \"policy\": \"default\"}]}",
     "pools[0].name: 'Web' is not a name: use a-z, 0-9, '-' and '_', starting with a letter or "
     "digit"},
    {"warm_gt_max", P(", \"warm\": 5, \"warm_max\": 4"),
     "pools[0].warm: warm (5) is greater than warm_max (4)"},
    {"warm_max_range", P(", \"warm_max\": 1001"),
     "pools[0].warm_max: 1001 is out of range 0..1000"},
    {"warm_string", P(", \"warm\": \"2\""),
     "pools[0].warm: expected an integer in 0..1000, got a quoted string (write numbers without "
     "quotes)"},
    {"warm_real", P(", \"warm\": 2.0"), "pools[0].warm: expected an integer in 0..1000, got '2.0'"},
    {"warm_bool", P(", \"warm\": true"),
     "pools[0].warm: expected an integer in 0..1000, got 'true'"},
    {"warm_null", P(", \"warm\": null"), "pools[0].warm: missing value (expected an integer)"},
    {"warm_object", P(", \"warm\": {}"), "pools[0].warm: expected an integer, got a mapping"},
    {"negative", P(", \"limits\": {\"pids\": -1}"),
     "pools[0].limits.pids: -1 is out of range 8..4194304"},
    {"int64_max", P(", \"warm\": 9223372036854775807"),
     "pools[0].warm: 9223372036854775807 is out of range 0..1000"},
    {"int64_min", P(", \"ttl\": {\"max_seconds\": -9223372036854775808}"),
     "pools[0].ttl.max_seconds: -9223372036854775808 is out of range 1..31536000"},
    {"huge_real", P(", \"warm_max\": 1e300"),
     "pools[0].warm_max: expected an integer in 0..1000, got '1e+300'"},
    {"huge_cpus", P(", \"limits\": {\"cpus\": 1e300}"),
     "pools[0].limits.cpus: 1e+300 is out of range 0.01..1024"},
    {"tiny_cpus", P(", \"limits\": {\"cpus\": 0.001}"),
     "pools[0].limits.cpus: 0.001 is out of range 0.01..1024"},
    {"negative_cpus", P(", \"limits\": {\"cpus\": -1}"),
     "pools[0].limits.cpus: expected a number of CPUs like 0.5 or 2, got '-1'"},
    {"string_cpus", P(", \"limits\": {\"cpus\": \"2\"}"),
     "pools[0].limits.cpus: expected a number of CPUs like 0.5 or 2, got '2'"},
    {"limits_list", P(", \"limits\": [256]"), "pools[0].limits: expected a mapping, got a list"},
    {"ttl_order", P(", \"ttl\": {\"default_seconds\": 100, \"max_seconds\": 10}"),
     "pools[0].ttl.default_seconds: default_seconds (100) is greater than max_seconds (10)"},
    {"backend", P(", \"backend\": \"docker\""),
     "pools[0].backend: expected one of ns, vm, rpc; got 'docker'"},
    /* the API runs no command as root: a supervisor command is the file's */
    {"rpc_command", P(", \"backend\": \"rpc\", \"supervisor\": {\"command\": [\"/bin/sh\"]}"),
     "pools[0].supervisor.command: a supervisor command is set only in the configuration file (the API may name one of its commands, or a socket)"},
    {"template_relative", P(", \"template\": \"./rootfs\""),
     "pools[0].template: expected busybox, host or an absolute directory path"},
    {"template_ref", P(", \"template\": \"${env:HOME}\""),
     "pools[0].template: ${...} references are resolved only in secret fields (tokens, passwords, "
     "keys, credential values)"},
    {"template_nul", P(", \"template\": \"/srv/a\\u0000b\""),
     "pools[0].template: a NUL byte inside a string"},
    {"undef_lane", "{\"pools\": [{\"name\": \"a\", \"lane\": \"egres\", \"policy\": \"default\"}]}",
     "pools[0].lane: no lane named 'egres' (did you mean 'egress'?)"},
    {"undef_policy",
     "{\"pools\": [{\"name\": \"a\", \"lane\": \"none\", \"policy\": \"open\"},"
     " {\"name\": \"b\", \"lane\": \"egress\", \"policy\": \"strict\"}]}",
     "pools[1].policy: no policy named 'strict'"},
    {"lane_number", "{\"pools\": [{\"name\": \"a\", \"lane\": 7, \"policy\": \"default\"}]}",
     "pools[0].lane: no lane named '7'"},
    {"dup_name",
     "{\"pools\": [{\"name\": \"a\", \"lane\": \"none\", \"policy\": \"open\"},"
     " {\"name\": \"a\", \"lane\": \"egress\", \"policy\": \"default\"}]}",
     "pools[1].name: duplicate pool name 'a' (first at pools[0].name)"},
};

static void
test_bad_bodies(void **state)
{
	struct conf *base = load_base(base_yaml);

	(void)state;
	assert_true(sizeof(bad_cases) / sizeof(bad_cases[0]) >= 30);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		json_error_t jerr;
		json_t *body = json_loads(bc->json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);

		if (!body)
			fail_msg("case %s: bad test JSON: %s", bc->name, jerr.text);
		expect_errors(base, body, bc->name, &bc->want, 1);
		json_decref(body);
	}
	expect_errors(
	    base, NULL, "null_body",
	    (const char *const[]){"body: expected a JSON object {\"pools\": [...]}, got nothing"},
	    1);
	assert_int_equal(base->npools, 1);
	conf_unref(base);
}

/* Numbers JSON text cannot carry into a json_t: 2^63 as a real. */
static void
test_huge_numbers(void **state)
{
	struct conf *base = load_base(base_yaml);
	json_t *body = json_pack("{s:[{s:s, s:s, s:s, s:f}]}", "pools", "name", "a", "lane",
	                         "egress", "policy", "default", "warm", 9223372036854775808.0);

	(void)state;
	assert_non_null(body);
	expect_errors(base, body, "two_to_the_63",
	              (const char *const[]){"pools[0].warm: expected an integer in 0..1000, "
	                                    "got '9.223372036854776e+18'"},
	              1);
	json_decref(body);
	conf_unref(base);
}

/* A NUL inside a key would otherwise let "warm\0x" pass as "warm". */
static void
test_nul_in_key(void **state)
{
	struct conf *base = load_base(base_yaml);
	json_t *body = json_loads(P(""), 0, NULL);
	json_t *pool = json_array_get(json_object_get(body, "pools"), 0);

	(void)state;
	assert_int_equal(json_object_setn_new(pool, "warm\0x", 6, json_integer(1)), 0);
	expect_errors(base, body, "nul_key",
	              (const char *const[]){"pools[0][\"warm?x\"]: a NUL byte inside a key"}, 1);
	json_decref(body);
	conf_unref(base);
}

/* Every error at once, in body order, the top level first. */
static void
test_all_errors_at_once(void **state)
{
	static const char json[] =
	    "{\"extra\": 1, \"pools\": ["
	    " {\"name\": \"a\", \"lane\": \"nope\", \"policy\": \"default\", \"warm\": -3},"
	    " {\"name\": \"b\", \"lane\": \"egress\", \"policy\": \"strict\", \"warm\": 3,"
	    "  \"warm_max\": 2, \"limits\": {\"memory_mb\": 8}},"
	    " {\"name\": \"a\", \"lane\": \"none\", \"policy\": \"open\", \"wram\": 1}]}";
	static const char *const want[] = {
	    "extra: unknown key: the body holds only \"pools\", a list of pools",
	    "pools[0].lane: no lane named 'nope' (did you mean 'none'?)",
	    "pools[0].warm: -3 is out of range 0..1000",
	    "pools[1].policy: no policy named 'strict'",
	    "pools[1].warm: warm (3) is greater than warm_max (2)",
	    "pools[1].limits.memory_mb: 8 is out of range 16..1048576",
	    "pools[2].name: duplicate pool name 'a' (first at pools[0].name)",
	    "pools[2].wram: unknown key 'wram' in pools[2] (did you mean 'warm'?)",
	};
	struct conf *base = load_base(base_yaml);
	json_t *body = json_loads(json, 0, NULL);

	(void)state;
	assert_non_null(body);
	expect_errors(base, body, "all", want, sizeof(want) / sizeof(want[0]));
	json_decref(body);
	conf_unref(base);
}

/* A pool a tenant names may not go, as a YAML file may not name a missing
 * pool. */
static void
test_tenant_pool_must_stay(void **state)
{
	static const char yaml[] = "lanes: [{ name: egress, subnet: 10.88.1.0/24 }]\n"
	                           "policies: [{ name: default }]\n"
	                           "tenants: [{ name: acme, keys: [k1], pools: [web] }]\n"
	                           "pools: [{ name: web, lane: egress, policy: default }]\n";
	struct conf *base = load_base(yaml);
	json_t *body = json_loads("{\"pools\": [{\"name\": \"db\", \"lane\": \"egress\","
	                          " \"policy\": \"default\"}]}",
	                          0, NULL);
	struct conf_diag d;
	struct conf *c;

	(void)state;
	expect_errors(
	    base, body, "tenant_pool",
	    (const char *const[]){"pools: tenant 'acme' may claim pool 'web' "
	                          "(tenants[0].pools[0] of the configuration), which this set "
	                          "lacks: keep that pool, or edit the tenant first"},
	    1);
	json_decref(body);
	body = json_loads(
	    "{\"pools\": [{\"name\": \"db\", \"lane\": \"egress\", \"policy\": \"default\"},"
	    " {\"name\": \"web\", \"lane\": \"egress\", \"policy\": \"default\", \"warm\": 3}]}",
	    0, NULL);
	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	assert_non_null(c);
	assert_int_equal(d.n, 0);
	assert_int_equal(conf_pool_find(c, "web")->warm, 3);
	conf_unref(c);
	conf_diag_fini(&d);
	json_decref(body);
	conf_unref(base);
}

/* Nesting is bounded as in YAML, and refused before any check runs. */
static void
test_depth_bomb(void **state)
{
	struct conf *base = load_base(base_yaml);
	json_t *body = json_loads(P(""), 0, NULL);
	json_t *pool = json_array_get(json_object_get(body, "pools"), 0);
	json_t *deep = json_array();
	struct conf_diag d;
	const char *tail = ": nesting deeper than 32 levels";

	(void)state;
	for (int i = 0; i < 5000; i++) {
		json_t *outer = json_array();

		json_array_append_new(outer, deep);
		deep = outer;
	}
	json_object_set_new(pool, "limits", deep);
	conf_diag_init(&d);
	assert_null(conf_with_pools_json(base, body, &d));
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "  %s\n", d.lines[i]);
	assert_int_equal(d.n, 1);
	/* pools 1, pools[0] 2, limits 3: the 33rd level is limits' 30th list. */
	assert_string_equal(
	    d.lines[0],
	    "pools[0].limits[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"
	    "[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nesting deeper than 32 levels");
	assert_non_null(strstr(d.lines[0], tail));
	conf_diag_fini(&d);
	json_decref(body);

	/* A cycle is a depth bomb too. */
	body = json_loads(P(""), 0, NULL);
	pool = json_array_get(json_object_get(body, "pools"), 0);
	deep = json_object();
	json_object_set_new(pool, "ttl", deep);
	json_object_set(deep, "x", pool);
	conf_diag_init(&d);
	assert_null(conf_with_pools_json(base, body, &d));
	assert_int_equal(d.n, 1);
	assert_non_null(strstr(d.lines[0], tail));
	assert_non_null(strstr(d.lines[0], "pools[0].ttl.x.ttl.x.ttl"));
	conf_diag_fini(&d);
	json_object_del(deep, "x"); /* break the cycle to free it */
	json_decref(body);
	conf_unref(base);
}

/* The node count is bounded as in YAML. */
static void
test_node_bomb(void **state)
{
	struct conf *base = load_base(base_yaml);
	json_t *list = json_array();
	json_t *body;
	struct conf_diag d;

	(void)state;
	for (int i = 0; i < 200001; i++)
		json_array_append_new(list, json_null());
	body = json_pack("{s:o}", "pools", list);
	conf_diag_init(&d);
	assert_null(conf_with_pools_json(base, body, &d));
	assert_int_equal(d.n, 1);
	assert_string_equal(d.lines[0], "pools[199999]: more than 200000 JSON values");
	conf_diag_fini(&d);
	json_decref(body);
	conf_unref(base);
}

static void
assert_pools_equal(const struct conf *a, const struct conf *b)
{
	assert_int_equal(a->npools, b->npools);
	for (size_t i = 0; i < a->npools; i++) {
		const struct conf_pool *p = &a->pools[i], *q = &b->pools[i];

		assert_string_equal(p->name, q->name);
		assert_int_equal(p->backend, q->backend);
		assert_int_equal(p->template_kind, q->template_kind);
		if (p->template_dir || q->template_dir)
			assert_string_equal(p->template_dir, q->template_dir);
		assert_string_equal(p->lane, q->lane);
		assert_int_equal(p->lane_idx, q->lane_idx);
		assert_string_equal(p->policy, q->policy);
		assert_int_equal(p->policy_idx, q->policy_idx);
		assert_int_equal(p->warm, q->warm);
		assert_int_equal(p->warm_max, q->warm_max);
		assert_int_equal(p->memory_mb, q->memory_mb);
		assert_int_equal(p->cpus_milli, q->cpus_milli);
		assert_int_equal(p->pids, q->pids);
		assert_int_equal(p->ttl_default_s, q->ttl_default_s);
		assert_int_equal(p->ttl_max_s, q->ttl_max_s);
	}
}

/* GET's body fed back to PUT changes nothing; the shape is docs/api.md's. */
static void
test_round_trip_default(void **state)
{
	struct conf_diag d;
	struct conf *base, *c;
	json_t *j, *j2;
	char *text;

	(void)state;
	conf_diag_init(&d);
	base = conf_load_mem("<default>", conf_default_yaml, conf_default_yaml_len, &d);
	assert_non_null(base);
	j = conf_pools_to_json(base);
	assert_non_null(j);
	text = json_dumps(j, 0);
	assert_string_equal(
	    text,
	    "{\"pools\": [{\"name\": \"default\", \"backend\": \"ns\", \"template\": \"host\", "
	    "\"lane\": \"egress\", \"policy\": \"default\", \"warm\": 2, \"warm_max\": 8, "
	    "\"limits\": {\"memory_mb\": 256, \"cpus\": 1.0, \"pids\": 256}, "
	    "\"ttl\": {\"default_seconds\": 3600, \"max_seconds\": 86400}}]}");
	free(text);
	c = conf_with_pools_json(base, j, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "  %s\n", d.lines[i]);
	assert_non_null(c);
	assert_int_equal(d.n, 0);
	assert_pools_equal(base, c);
	assert_int_equal(c->pools[0].pos.line, 0);
	j2 = conf_pools_to_json(c);
	assert_true(json_equal(j, j2));
	json_decref(j2);
	json_decref(j);
	conf_unref(c);
	conf_unref(base);
	conf_diag_fini(&d);
}

/* Every template kind, both backends, fractional CPUs, through text. */
static void
test_round_trip_varied(void **state)
{
	static const char json[] =
	    "{\"pools\": ["
	    " {\"name\": \"a\", \"lane\": \"egress\", \"policy\": \"default\"},"
	    " {\"name\": \"vm-1\", \"backend\": \"vm\", \"template\": \"/srv/rootfs\", \"lane\": "
	    "\"none\","
	    "  \"policy\": \"open\", \"warm\": 6, \"limits\": {\"memory_mb\": 2048, \"cpus\": 0.33,"
	    "  \"pids\": 4194304}, \"ttl\": {\"default_seconds\": 1, \"max_seconds\": 31536000}},"
	    " {\"name\": \"h\", \"template\": \"host\", \"lane\": \"egress\", \"policy\": \"open\","
	    "  \"limits\": {\"cpus\": 1024}}]}";
	struct conf *base = load_base(base_yaml), *c, *c2;
	json_t *body = json_loads(json, 0, NULL), *j;
	struct conf_diag d;
	char *text;

	(void)state;
	assert_non_null(body);
	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "  %s\n", d.lines[i]);
	assert_non_null(c);
	assert_int_equal(c->npools, 3);
	/* Defaults as in YAML. */
	assert_int_equal(c->pools[0].backend, CONF_BACKEND_NS);
	assert_int_equal(c->pools[0].template_kind, CONF_TEMPLATE_BUSYBOX);
	assert_int_equal(c->pools[0].warm, 0);
	assert_int_equal(c->pools[0].warm_max, 4);
	assert_int_equal(c->pools[0].memory_mb, 256);
	assert_int_equal(c->pools[0].cpus_milli, 1000);
	assert_int_equal(c->pools[0].ttl_default_s, 3600);
	assert_int_equal(c->pools[0].lane_idx, 1);
	assert_int_equal(c->pools[0].policy_idx, 0);
	/* warm over the default warm_max raises it, as in YAML. */
	assert_int_equal(c->pools[1].warm_max, 6);
	assert_int_equal(c->pools[1].backend, CONF_BACKEND_VM);
	assert_int_equal(c->pools[1].template_kind, CONF_TEMPLATE_DIR);
	assert_string_equal(c->pools[1].template_dir, "/srv/rootfs");
	assert_int_equal(c->pools[1].cpus_milli, 330);
	assert_int_equal(c->pools[1].lane_idx, 0);
	assert_int_equal(c->pools[1].policy_idx, 1);
	assert_int_equal(c->pools[2].template_kind, CONF_TEMPLATE_HOST);
	assert_int_equal(c->pools[2].cpus_milli, 1024000);

	j = conf_pools_to_json(c);
	text = json_dumps(j, 0);
	json_decref(j);
	j = json_loads(text, 0, NULL);
	free(text);
	c2 = conf_with_pools_json(base, j, &d);
	assert_non_null(c2);
	assert_int_equal(d.n, 0);
	assert_pools_equal(c, c2);
	json_decref(j);
	conf_unref(c2);
	conf_unref(c);
	json_decref(body);
	conf_diag_fini(&d);
	conf_unref(base);
}

static void
test_empty_set(void **state)
{
	struct conf *base = load_base(base_yaml), *c;
	json_t *body = json_loads("{\"pools\": []}", 0, NULL), *j;
	struct conf_diag d;
	char *text;

	(void)state;
	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	assert_non_null(c);
	assert_int_equal(d.n, 0);
	assert_int_equal(c->npools, 0);
	assert_null(conf_pool_find(c, "web"));
	j = conf_pools_to_json(c);
	text = json_dumps(j, 0);
	assert_string_equal(text, "{\"pools\": []}");
	free(text);
	json_decref(j);
	conf_unref(c);
	json_decref(body);
	conf_diag_fini(&d);
	conf_unref(base);
}

/* The new configuration owns a copy of every other section: it outlives the
 * base, secrets included. */
static void
test_other_sections_copied(void **state)
{
	struct conf *base = load_base(base_yaml), *c;
	json_t *body = json_loads(P(""), 0, NULL);
	const struct conf_policy *po;
	struct conf_diag d;

	(void)state;
	conf_diag_init(&d);
	c = conf_with_pools_json(base, body, &d);
	assert_non_null(c);
	json_decref(body);
	assert_int_equal(c->refs, 1);
	assert_ptr_not_equal(c->arena, base->arena);
	assert_ptr_not_equal(c->tenants, base->tenants);
	assert_ptr_not_equal(c->tenants[0].keys[0].value, base->tenants[0].keys[0].value);
	assert_ptr_not_equal(c->policies[0].credentials[0].value.value,
	                     base->policies[0].credentials[0].value.value);
	assert_int_equal(base->npools, 1);
	assert_string_equal(base->pools[0].name, "web");
	conf_unref(base);

	assert_string_equal(c->path, "base.yaml");
	assert_string_equal(c->daemon.data_dir, "/var/lib/sluice");
	assert_string_equal(c->daemon.control_socket, "/run/sluice/control.sock");
	assert_string_equal(c->api.socket, "/run/sluice/api.sock");
	assert_string_equal(c->api.listen.host, "127.0.0.1");
	assert_int_equal(c->api.listen.port, 8080);
	assert_string_equal(c->api.operator_token.value, "op-secret");
	assert_string_equal(c->api.operator_token.ref, "${env:SL_JSON_OP}");
	assert_int_equal(c->gateway.nclients, 1);
	assert_string_equal(c->gateway.clients[0].name, "ci");
	assert_string_equal(c->gateway.clients[0].user, "ci");
	assert_string_equal(c->gateway.clients[0].password.value, "tenant-keyx");
	assert_int_equal(c->gateway.clients[0].policy_idx, 1);
	assert_int_equal(c->gateway.ndns_servers, 1);
	assert_string_equal(c->gateway.access_log, "stderr");
	assert_string_equal(c->gateway.listen_socks.host, "127.0.0.1");
	assert_int_equal(c->nlanes, 2);
	assert_string_equal(c->lanes[1].name, "egress");
	assert_int_equal(c->lanes[1].door_intercept, 3129);
	assert_int_equal(c->npolicies, 2);
	po = conf_policy_find(c, "default");
	assert_non_null(po);
	assert_int_equal(po->allow.n, 2);
	assert_string_equal(po->allow.v[1].host, "example.org");
	assert_true(po->allow.v[1].wildcard);
	assert_int_equal(po->ncredentials, 1);
	assert_string_equal(po->credentials[0].host.host, "api.github.com");
	assert_string_equal(po->credentials[0].header, "Authorization");
	assert_string_equal(po->credentials[0].value.value, "Bearer gh-secret");
	assert_int_equal(po->credentials[0].value.len, strlen("Bearer gh-secret"));
	assert_string_equal(po->credentials[0].value.ref, "Bearer ${env:SL_JSON_TOKEN}");
	assert_int_equal(po->allow_private.n, 1);
	assert_int_equal(po->allow_private.v[0].prefix, 16);
	assert_int_equal(conf_policy_find(c, "open")->mode, CONF_POLICY_REPORT);
	assert_int_equal(c->ntenants, 1);
	assert_string_equal(c->tenants[0].name, "acme");
	assert_int_equal(c->tenants[0].nkeys, 1);
	assert_string_equal(c->tenants[0].keys[0].value, "tenant-key");
	assert_int_equal(c->tenants[0].keys[0].len, strlen("tenant-key"));
	assert_true(c->tenants[0].has_egress);
	assert_string_equal(c->tenants[0].egress.v[0].host, "github.com");
	assert_int_equal(c->tenants[0].max_claims, 4);
	assert_string_equal(c->certs.ca_key, "/var/lib/sluice/ca.key");
	assert_null(c->preview.domain);
	assert_string_equal(c->preview.listen.host, "127.0.0.1");
	assert_int_equal(c->npools, 1);
	assert_string_equal(c->pools[0].name, "a");
	assert_ptr_equal(conf_ref(c), c);
	conf_unref(c);
	conf_unref(c);
	conf_diag_fini(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_bodies),
	    cmocka_unit_test(test_huge_numbers),
	    cmocka_unit_test(test_nul_in_key),
	    cmocka_unit_test(test_all_errors_at_once),
	    cmocka_unit_test(test_tenant_pool_must_stay),
	    cmocka_unit_test(test_depth_bomb),
	    cmocka_unit_test(test_node_bomb),
	    cmocka_unit_test(test_round_trip_default),
	    cmocka_unit_test(test_round_trip_varied),
	    cmocka_unit_test(test_empty_set),
	    cmocka_unit_test(test_other_sections_copied),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

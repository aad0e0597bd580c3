/* test_conf_psl.c: wildcards that cover a public suffix (conf/conf_psl.c,
 * cs_get_hostpat() in conf/conf.c). Refusals first, each with the exact
 * FILE:LINE:COL (or JSON path) and message naming the suffix: '*.com',
 * '*.co.uk', '*.github.io' (the list's private section), '*.COM.' (case
 * and the root's dot), with a port, in allow, intercept, a credential's
 * host, a tenant's egress list and a tenant's credentials in a claim's
 * body. Then what stays accepted: wildcards below a suffix
 * ('*.example.com', '*.github.com'), names the list lacks ('*.internal'),
 * exact names, any wildcard in deny, and saved layers pinned before the
 * rule. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "conf.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The message's tail, after "'PATTERN' covers the public suffix S". */
#define TAIL(s) ": every site under it would match; name the domains meant ('*.example." s "')"

static struct conf *
load(const char *yaml, struct conf_diag *d)
{
	conf_diag_init(d);
	return conf_load_mem("t.yaml", yaml, strlen(yaml), d);
}

static void
test_public_suffix(void **state)
{
	static const char *const yes[] = { "com", "org", "co.uk", "uk", "github.io",
					   "s3.amazonaws.com", "xn--p1ai", "foo.ck" };
	static const char *const no[] = { "example.com", "github.com", "example.co.uk",
					  "a.github.io", "amazonaws.com", "www.ck",
					  "internal", "corp", "home.arpa" };

	(void)state;
	for (size_t i = 0; i < N(yes); i++)
		if (conf_public_suffix(yes[i]) != 1)
			fail_msg("'%s' is a public suffix", yes[i]);
	for (size_t i = 0; i < N(no); i++)
		if (conf_public_suffix(no[i]) != 0)
			fail_msg("'%s' is no public suffix", no[i]);
}

struct bad_case {
	const char *yaml;
	const char *want; /* the one diagnostic line expected */
};

static void
test_refused_in_file(void **state)
{
	static const struct bad_case bad[] = {
		{ "policies: [{ name: p, allow: [a.com, \"*.com\"] }]\n",
		  "t.yaml:1:38: policies[0].allow[1]: '*.com' covers the public suffix com" TAIL("com") },
		{ "policies:\n"
		  "  - name: p\n"
		  "    allow:\n"
		  "      - \"*.co.uk\"\n",
		  "t.yaml:4:9: policies[0].allow[0]: '*.co.uk' covers the public suffix co.uk" TAIL("co.uk") },
		{ "policies: [{ name: p, allow: [\"*.github.io\"] }]\n",
		  "t.yaml:1:31: policies[0].allow[0]: '*.github.io' covers the public suffix github.io"
		  TAIL("github.io") },
		{ "policies: [{ name: p, allow: [\"*.COM.\"] }]\n",
		  "t.yaml:1:31: policies[0].allow[0]: '*.COM.' covers the public suffix com" TAIL("com") },
		{ "policies: [{ name: p, allow: [\"*.co.uk:8443\"] }]\n",
		  "t.yaml:1:31: policies[0].allow[0]: '*.co.uk:8443' covers the public suffix co.uk"
		  TAIL("co.uk") },
		{ "policies: [{ name: p, allow: [\"*.s3.amazonaws.com\"] }]\n",
		  "t.yaml:1:31: policies[0].allow[0]: '*.s3.amazonaws.com' covers the public suffix "
		  "s3.amazonaws.com" TAIL("s3.amazonaws.com") },
		{ "policies: [{ name: p, intercept: [\"*.org\"] }]\n",
		  "t.yaml:1:35: policies[0].intercept[0]: '*.org' covers the public suffix org"
		  TAIL("org") },
		{ "policies:\n"
		  "  - name: p\n"
		  "    credentials:\n"
		  "      - { host: \"*.github.io\", header: X, value: \"${env:SL_PSL}\" }\n",
		  "t.yaml:4:17: policies[0].credentials[0].host: '*.github.io' covers the public "
		  "suffix github.io" TAIL("github.io") },
		{ "tenants: [{ name: t, keys: [k], egress: [\"*.com\"] }]\n",
		  "t.yaml:1:42: tenants[0].egress[0]: '*.com' covers the public suffix com" TAIL("com") },
	};

	(void)state;
	setenv("SL_PSL", "psl-s3cret", 1);
	for (size_t i = 0; i < N(bad); i++) {
		struct conf_diag d;
		struct conf *c = load(bad[i].yaml, &d);

		if (c || d.n != 1)
			fail_msg("case %zu: %s, %zu errors%s%s", i, c ? "accepted" : "refused", d.n,
				 d.n ? ", first: " : "", d.n ? d.lines[0] : "");
		assert_string_equal(d.lines[0], bad[i].want);
		conf_diag_fini(&d);
	}
}

/* Every error of a file at once, as with any other mistake. */
static void
test_all_at_once(void **state)
{
	static const char yaml[] = "policies:\n"
				   "  - name: p\n"
				   "    allow: [\"*.com\", \"*.example.com\", \"*.net\"]\n"
				   "tenants: [{ name: t, keys: [k], egress: [\"*.org\"] }]\n";
	struct conf_diag d;

	(void)state;
	assert_null(load(yaml, &d));
	assert_int_equal(d.n, 3);
	assert_non_null(strstr(d.lines[0], "t.yaml:3:13: policies[0].allow[0]: '*.com'"));
	assert_non_null(strstr(d.lines[1], "t.yaml:3:39: policies[0].allow[2]: '*.net'"));
	assert_non_null(strstr(d.lines[2], "t.yaml:4:42: tenants[0].egress[0]: '*.org'"));
	conf_diag_fini(&d);
}

static void
test_accepted_in_file(void **state)
{
	static const char yaml[] =
	    "policies:\n"
	    "  - name: p\n"
	    "    allow: [\"*.example.com\", \"*.GitHub.com.\", \"*.example.co.uk:8443\",\n"
	    "            \"*.user.github.io\", \"*.amazonaws.com\", \"*.internal\",\n"
	    "            com, github.io]\n"
	    "    deny: [\"*.com\", \"*.co.uk\", \"*.github.io\", \"*.zip:1\"]\n"
	    "    intercept: [\"*.example.org\"]\n"
	    "    credentials:\n"
	    "      - { host: \"*.github.com\", header: X, value: \"${env:SL_PSL}\" }\n"
	    "tenants: [{ name: t, keys: [k], egress: [\"*.github.com\", pypi.org] }]\n";
	const struct conf_policy *po;
	struct conf_diag d;
	struct conf *c;

	(void)state;
	setenv("SL_PSL", "psl-s3cret", 1);
	c = load(yaml, &d);
	if (!c)
		fail_msg("refused: %s", d.lines[0]);
	po = conf_policy_find(c, "p");
	assert_non_null(po);
	assert_int_equal(po->allow.n, 8);
	assert_true(po->allow.v[1].wildcard);
	assert_string_equal(po->allow.v[1].host, "github.com");
	assert_false(po->allow.v[6].wildcard);
	assert_string_equal(po->allow.v[6].host, "com");
	/* deny takes any wildcard: it only takes away */
	assert_int_equal(po->deny.n, 4);
	assert_true(po->deny.v[0].wildcard);
	assert_string_equal(po->deny.v[0].host, "com");
	assert_string_equal(po->deny.v[2].host, "github.io");
	assert_int_equal(c->tenants[0].egress.n, 2);
	conf_unref(c);
	conf_diag_fini(&d);
}

/* A tenant's credentials in a claim's body (conf_creds_from_json). */
static void
test_tenant_credentials(void **state)
{
	struct conf_diag d;
	struct conf_creds *l;
	json_error_t je;
	json_t *j;

	(void)state;
	j = json_loads("[{\"host\": \"api.example.com\", \"header\": \"X\", \"value\": \"v1\"},"
		       " {\"host\": \"*.github.io\", \"header\": \"Y\", \"value\": \"v2\"}]",
		       0, &je);
	assert_non_null(j);
	conf_diag_init(&d);
	assert_null(conf_creds_from_json(j, "credentials", &d));
	assert_int_equal(d.n, 1);
	assert_string_equal(d.lines[0], "credentials[1].host: '*.github.io' covers the public "
					"suffix github.io" TAIL("github.io"));
	conf_diag_fini(&d);
	json_decref(j);

	j = json_loads("[{\"host\": \"*.github.com\", \"header\": \"X\", \"value\": \"v1\"}]", 0,
		       &je);
	assert_non_null(j);
	conf_diag_init(&d);
	l = conf_creds_from_json(j, "credentials", &d);
	assert_non_null(l);
	assert_int_equal(d.n, 0);
	assert_int_equal(l->n, 1);
	assert_true(l->v[0].host.wildcard);
	assert_string_equal(l->v[0].host.host, "github.com");
	conf_creds_free(l);
	conf_diag_fini(&d);
	json_decref(j);
}

/* A layer pinned before the rule, read back from the state file at a
 * restart: accepted as it was, or the restart would end its claim. */
static void
test_saved_layer_kept(void **state)
{
	static const char saved[] =
	    "{\"name\": \"old\", \"mode\": \"enforce\", \"allow\": [\"*.com\", \"*.co.uk:443\"],"
	    " \"deny\": [\"*.net\"], \"intercept\": [\"*.github.io\"],"
	    " \"credentials\": [{\"name\": \"c\", \"host\": \"*.org\", \"header\": \"X\","
	    "                    \"value\": \"${env:SL_PSL}\"}],"
	    " \"allow_private\": [], \"tenant_egress\": [\"*.com\"]}";
	struct conf_layer *l;
	struct conf_diag d;
	json_error_t je;
	json_t *j = json_loads(saved, 0, &je);

	(void)state;
	setenv("SL_PSL", "psl-s3cret", 1);
	assert_non_null(j);
	conf_diag_init(&d);
	l = conf_layer_from_json(j, &d);
	if (!l)
		fail_msg("refused: %s", d.lines[0]);
	assert_int_equal(l->policy->allow.n, 2);
	assert_true(l->policy->allow.v[0].wildcard);
	assert_string_equal(l->policy->allow.v[0].host, "com");
	assert_string_equal(l->policy->intercept.v[0].host, "github.io");
	assert_int_equal(l->policy->ncredentials, 1);
	assert_string_equal(l->policy->credentials[0].host.host, "org");
	assert_true(l->has_narrow);
	assert_string_equal(l->narrow.v[0].host, "com");
	conf_layer_free(l);
	conf_diag_fini(&d);
	json_decref(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_public_suffix),
		cmocka_unit_test(test_refused_in_file),
		cmocka_unit_test(test_all_at_once),
		cmocka_unit_test(test_accepted_in_file),
		cmocka_unit_test(test_tenant_credentials),
		cmocka_unit_test(test_saved_layer_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

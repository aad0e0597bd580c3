/* test_apiv1.c: the API's request validators (claims, exec), the UTF-8
 * sanitiser for command output, and the TTL a claim ends up with. Bad
 * inputs first. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "apiv1.h"
#include "target.h"

static json_t *
J(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);

	if (!j)
		fail_msg("bad test JSON %s: %s", text, e.text);
	return j;
}

/* Parses text as a claim body; returns the rc and leaves err. The
 * strings in *a borrow from the JSON, which lives until the next call. */
static json_t *last;

static int
claim(const char *text, struct gw_claim_args *a, char *err, size_t errsz)
{
	json_decref(last);
	last = J(text);
	return gw_claim_args_parse(last, a, err, errsz);
}

static void
claim_bad(const char *text, const char *want)
{
	struct gw_claim_args a;
	char err[256] = "";
	json_t *j = J(text);

	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want))
		fail_msg("%s: error \"%s\" does not name \"%s\"", text, err, want);
	json_decref(j);
}

static void
test_claim_bad(void **state)
{
	(void)state;
	claim_bad("[]", "JSON object");
	claim_bad("{}", "pool");
	claim_bad("{\"pool\": 3}", "pool");
	claim_bad("{\"pool\": \"\"}", "pool");
	claim_bad("{\"pool\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
		  "pool");
	claim_bad("{\"pool\": \"p\", \"tll_seconds\": 5}", "tll_seconds: unknown key");
	claim_bad("{\"pool\": \"p\", \"ttl_seconds\": \"60\"}", "ttl_seconds");
	claim_bad("{\"pool\": \"p\", \"ttl_seconds\": 1.5}", "ttl_seconds");
	claim_bad("{\"pool\": \"p\", \"ttl_seconds\": 1e300}", "ttl_seconds");
	claim_bad("{\"pool\": \"p\", \"ttl_seconds\": true}", "ttl_seconds");
	claim_bad("{\"pool\": \"p\", \"ttl_seconds\": [1]}", "ttl_seconds");
	claim_bad("{\"pool\": \"p\", \"env\": []}", "env: must be an object");
	claim_bad("{\"pool\": \"p\", \"env\": {\"A\": 1}}", "env.A: must be a string");
	claim_bad("{\"pool\": \"p\", \"env\": {\"1A\": \"x\"}}", "env.1A");
	claim_bad("{\"pool\": \"p\", \"env\": {\"A-B\": \"x\"}}", "env.A-B");
	claim_bad("{\"pool\": \"p\", \"env\": {\"\": \"x\"}}", "env.");
	claim_bad("{\"pool\": \"p\", \"env\": {\"HTTP_PROXY\": \"http://evil\"}}", "HTTP_PROXY");
	claim_bad("{\"pool\": \"p\", \"env\": {\"https_proxy\": \"x\"}}", "https_proxy");
	claim_bad("{\"pool\": \"p\", \"env\": {\"SSL_CERT_FILE\": \"/x\"}}", "SSL_CERT_FILE");
	claim_bad("{\"pool\": \"p\", \"env\": {\"CARGO_HTTP_CAINFO\": \"/x\"}}", "CARGO_HTTP_CAINFO");
	claim_bad("{\"pool\": \"p\", \"env\": {\"AWS_CA_BUNDLE\": \"/x\"}}", "AWS_CA_BUNDLE");
	claim_bad("{\"pool\": \"p\", \"env\": {\"A\": \"x\\u0000y\"}}", "NUL");
	claim_bad("{\"pool\": \"p\", \"labels\": {\"a=b\": \"x\"}}", "labels");
	claim_bad("{\"pool\": \"p\", \"labels\": {\"\": \"x\"}}", "labels");
	claim_bad("{\"pool\": \"p\", \"labels\": {\"a\": 5}}", "labels.a");
}

static void
test_claim_bounds(void **state)
{
	struct gw_claim_args a;
	char err[256], *big;
	json_t *j, *env;

	(void)state;
	/* 65 variables: one too many. */
	env = json_object();
	for (int i = 0; i < 65; i++) {
		char k[16];

		snprintf(k, sizeof(k), "V%d", i);
		json_object_set_new(env, k, json_string("x"));
	}
	j = json_pack("{s:s, s:o}", "pool", "p", "env", env);
	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "at most 64"));
	/* 64 is fine, and they come back as NAME=value. */
	json_object_del(env, "V64");
	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), 0);
	assert_int_equal(a.nenv, 64);
	assert_non_null(strchr(a.env[0], '='));
	gw_claim_args_fini(&a);
	json_decref(j);

	/* A value over 4 KiB. */
	big = malloc(GW_ENV_VALUE_MAX + 2);
	memset(big, 'a', GW_ENV_VALUE_MAX + 1);
	big[GW_ENV_VALUE_MAX + 1] = 0;
	j = json_pack("{s:s, s:{s:s}}", "pool", "p", "env", "BIG", big);
	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), -EINVAL);
	json_decref(j);
	big[GW_ENV_VALUE_MAX] = 0;
	j = json_pack("{s:s, s:{s:s}}", "pool", "p", "env", "BIG", big);
	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), 0);
	gw_claim_args_fini(&a);
	json_decref(j);
	free(big);

	/* Many values near the limit: bounded as a whole (the claim's
	 * journal event carries them). */
	big = malloc(2001);
	memset(big, 'b', 2000);
	big[2000] = 0;
	env = json_object();
	for (int i = 0; i < 40; i++) {
		char k[16];

		snprintf(k, sizeof(k), "V%d", i);
		json_object_set_new(env, k, json_string(big));
	}
	j = json_pack("{s:s, s:o}", "pool", "p", "env", env);
	assert_int_equal(gw_claim_args_parse(j, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "in all"));
	json_decref(j);
	free(big);
}

/* Numbers beyond 64 bits never reach the validator: the JSON parser
 * refuses them, and the API answers bad-json. */
static void
test_claim_huge_numbers(void **state)
{
	json_error_t e;

	(void)state;
	assert_null(json_loads("{\"pool\": \"p\", \"ttl_seconds\": 99999999999999999999}", 0, &e));
	assert_null(json_loads("{\"pool\": \"p\", \"ttl_seconds\": -99999999999999999999}", 0, &e));
}

static void
test_claim_good(void **state)
{
	struct gw_claim_args a;
	char err[256];

	(void)state;
	assert_int_equal(claim("{\"pool\": \"default\"}", &a, err, sizeof(err)), 0);
	assert_string_equal(a.pool, "default");
	assert_false(a.ttl_present);
	gw_claim_args_fini(&a);

	assert_int_equal(claim("{\"pool\": \"p\", \"ttl_seconds\": null}", &a, err, sizeof(err)),
			 0);
	assert_false(a.ttl_present);
	gw_claim_args_fini(&a);

	assert_int_equal(claim("{\"pool\": \"p\", \"ttl_seconds\": 9223372036854775807, \"env\": "
			       "{\"FOO\": \"bar\", \"_x1\": \"\"}, \"labels\": {\"job\": \"42\"}}",
			       &a, err, sizeof(err)),
			 0);
	assert_true(a.ttl_present);
	assert_true(a.ttl == INT64_MAX);
	assert_int_equal(a.nenv, 2);
	assert_int_equal(a.nlabels, 1);
	assert_string_equal(a.labels[0], "job=42");
	gw_claim_args_fini(&a);

	assert_int_equal(claim("{\"pool\": \"p\", \"ttl_seconds\": -9223372036854775808}", &a, err,
			       sizeof(err)),
			 0);
	assert_true(a.ttl == INT64_MIN);
	gw_claim_args_fini(&a);
}

/* What a claim's lease ends up as: the validator's value through
 * pool_ttl() with a pool of default 3600 and max 86400. */
static uint32_t
lease_of(const char *text)
{
	struct gw_claim_args a;
	char err[256];
	uint32_t t;

	assert_int_equal(claim(text, &a, err, sizeof(err)), 0);
	t = pool_ttl(a.ttl_present, a.ttl, 3600, 86400);
	gw_claim_args_fini(&a);
	return t;
}

static void
test_claim_lease(void **state)
{
	(void)state;
	assert_int_equal(lease_of("{\"pool\": \"p\"}"), 3600);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 0}"), 3600);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 1}"), 1);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": -1}"), 1);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": -9223372036854775808}"), 1);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 2147483648}"), 86400);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 4294967297}"), 86400);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 9223372036854775807}"), 86400);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 86400}"), 86400);
	assert_int_equal(lease_of("{\"pool\": \"p\", \"ttl_seconds\": 86401}"), 86400);
}

static void
exec_bad(const char *text, const char *want)
{
	struct gw_exec_args a;
	char err[256] = "";
	json_t *j = J(text);

	assert_int_equal(gw_exec_args_parse(j, &a, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want))
		fail_msg("%s: error \"%s\" does not name \"%s\"", text, err, want);
	json_decref(j);
}

static void
test_exec_bad(void **state)
{
	(void)state;
	exec_bad("\"sh\"", "JSON object");
	exec_bad("{}", "argv");
	exec_bad("{\"argv\": []}", "argv");
	exec_bad("{\"argv\": \"sh -c x\"}", "argv");
	exec_bad("{\"argv\": [\"\"]}", "argv[0]");
	exec_bad("{\"argv\": [\"sh\", 3]}", "argv[1]");
	exec_bad("{\"argv\": [\"sh\", \"a\\u0000b\"]}", "argv[1]");
	exec_bad("{\"argv\": [\"sh\"], \"cwd\": \"tmp\"}", "cwd");
	exec_bad("{\"argv\": [\"sh\"], \"cwd\": 1}", "cwd");
	exec_bad("{\"argv\": [\"sh\"], \"stdin\": 1}", "stdin");
	exec_bad("{\"argv\": [\"sh\"], \"timeout_seconds\": \"30\"}", "timeout_seconds");
	exec_bad("{\"argv\": [\"sh\"], \"timeout_seconds\": 0.5}", "timeout_seconds");
	exec_bad("{\"argv\": [\"sh\"], \"stream\": \"yes\"}", "stream");
	exec_bad("{\"argv\": [\"sh\"], \"env\": {\"NO_PROXY\": \"*\"}}", "NO_PROXY");
	exec_bad("{\"argv\": [\"sh\"], \"argz\": 1}", "argz");
}

static void
test_exec_good(void **state)
{
	struct gw_exec_args a;
	char err[256];
	json_t *j;

	(void)state;
	j = J("{\"argv\": [\"sh\", \"-c\", \"echo hi\"]}");
	assert_int_equal(gw_exec_args_parse(j, &a, err, sizeof(err)), 0);
	assert_string_equal(a.argv[0], "sh");
	assert_string_equal(a.argv[2], "echo hi");
	assert_null(a.argv[3]);
	assert_null(a.cwd);
	assert_null(a.stdin_data);
	assert_int_equal(a.timeout_s, GW_EXEC_TIMEOUT_DEFAULT_S);
	assert_false(a.stream);
	gw_exec_args_fini(&a);
	json_decref(j);

	j = J("{\"argv\": [\"cat\"], \"cwd\": \"/tmp\", \"stdin\": \"\", \"timeout_seconds\": "
	      "-4, \"stream\": true, \"env\": {\"A\": \"1\"}}");
	assert_int_equal(gw_exec_args_parse(j, &a, err, sizeof(err)), 0);
	assert_string_equal(a.cwd, "/tmp");
	assert_non_null(a.stdin_data);
	assert_int_equal(a.stdin_len, 0);
	assert_int_equal(a.timeout_s, 1);
	assert_true(a.stream);
	assert_string_equal(a.env[0], "A=1");
	gw_exec_args_fini(&a);
	json_decref(j);

	j = J("{\"argv\": [\"cat\"], \"timeout_seconds\": 9223372036854775807}");
	assert_int_equal(gw_exec_args_parse(j, &a, err, sizeof(err)), 0);
	assert_int_equal(a.timeout_s, GW_EXEC_TIMEOUT_MAX_S);
	gw_exec_args_fini(&a);
	json_decref(j);
}

static void
test_env_names(void **state)
{
	(void)state;
	assert_false(gw_env_name_ok("", 0));
	assert_false(gw_env_name_ok("1A", 2));
	assert_false(gw_env_name_ok("A B", 3));
	assert_false(gw_env_name_ok("A=B", 3));
	assert_false(gw_env_name_ok("ALL_PROXY", 9));
	assert_false(gw_env_name_ok("all_proxy", 9));
	assert_false(gw_env_name_ok("PIP_CERT", 8));
	assert_true(gw_env_name_ok("_", 1));
	assert_true(gw_env_name_ok("PATH", 4));
	assert_true(gw_env_name_ok("HTTP_PROXYX", 11));
	assert_true(gw_env_name_ok("a1_B2", 5));
}

static void
sanitized(const char *in, size_t len, const char *want)
{
	size_t n;
	char *s = gw_utf8_sanitize(in, len, &n);

	assert_non_null(s);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(s, want, n);
	assert_int_equal(s[n], 0);
	free(s);
}

#define RC "\xef\xbf\xbd"

static void
test_utf8(void **state)
{
	(void)state;
	sanitized("\xff", 1, RC);
	sanitized("a\x80z", 3, "a" RC "z");
	sanitized("\xc3", 1, RC);                       /* truncated */
	sanitized("\xc0\xaf", 2, RC RC);                /* overlong '/' */
	sanitized("\xe0\x80\xaf", 3, RC RC RC);         /* overlong */
	sanitized("\xed\xa0\x80", 3, RC RC RC);         /* a surrogate */
	sanitized("\xf4\x90\x80\x80", 4, RC RC RC RC);  /* beyond U+10FFFF */
	sanitized("a\0b", 3, "a" RC "b");               /* NUL: JSON could, C strings cannot */
	sanitized("", 0, "");
	sanitized("hi\n", 3, "hi\n");
	sanitized("\xc3\xa9", 2, "\xc3\xa9");
	sanitized("\xe2\x82\xac", 3, "\xe2\x82\xac");
	sanitized("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_bad),
		cmocka_unit_test(test_claim_bounds),
		cmocka_unit_test(test_claim_huge_numbers),
		cmocka_unit_test(test_claim_good),
		cmocka_unit_test(test_claim_lease),
		cmocka_unit_test(test_exec_bad),
		cmocka_unit_test(test_exec_good),
		cmocka_unit_test(test_env_names),
		cmocka_unit_test(test_utf8),
	};

	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	json_decref(last);
	return rc;
}

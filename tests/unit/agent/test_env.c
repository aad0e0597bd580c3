/* test_env.c: a command's environment (agent/env.c). Bad names first. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"

static const char *
get(char **env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static size_t
count(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	return n;
}

static void
test_bad_names(void **state)
{
	const char *bad1[] = { "=x" };
	const char *bad2[] = { "NOEQUALS" };
	char **env = (char **)1;
	char err[128];

	(void)state;
	assert_int_equal(agent_env_build(NULL, NULL, bad1, 1, &env, err, sizeof(err)),
			 -EINVAL);
	assert_null(env);
	assert_int_equal(agent_env_build(NULL, NULL, bad2, 1, &env, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "NAME=value"));
}

static void
test_filtered_and_defaults(void **state)
{
	char *agent_env[] = { "HTTP_PROXY=http://gw:3128", "no_proxy=localhost",
			      "SECRET=x", "LD_PRELOAD=/evil.so", "PIP_CERT=/ca",
			      "NODE_EXTRA_CA_CERTS=/ca", "HOME=/home/a",
			      "JUNK", NULL };
	char **env;
	char err[128];

	(void)state;
	assert_int_equal(agent_env_build(agent_env, NULL, NULL, 0, &env, err,
					 sizeof(err)),
			 0);
	assert_string_equal(get(env, "HTTP_PROXY"), "http://gw:3128");
	assert_string_equal(get(env, "no_proxy"), "localhost");
	assert_string_equal(get(env, "PIP_CERT"), "/ca");
	assert_string_equal(get(env, "HOME"), "/home/a");
	assert_non_null(get(env, "PATH"));
	assert_null(get(env, "SECRET"));
	assert_null(get(env, "LD_PRELOAD"));
	assert_null(get(env, "JUNK"));
	assert_int_equal(count(env), 6);
	agent_env_free(env);
	assert_true(agent_env_inherited("ALL_PROXY", 9));
	assert_true(agent_env_inherited("CURL_CA_BUNDLE", 14));
	assert_false(agent_env_inherited("ALL_PROX", 8));
}

static void
test_request_overrides(void **state)
{
	char *agent_env[] = { "PATH=/bin", "TERM=xterm", NULL };
	const char *set[] = { "PATH=/opt/bin", "FOO=a=b", "FOO=c", "EMPTY=" };
	char **env;
	char err[128];

	(void)state;
	assert_int_equal(agent_env_build(agent_env, NULL, set, 4, &env, err,
					 sizeof(err)),
			 0);
	assert_string_equal(get(env, "PATH"), "/opt/bin");
	assert_string_equal(get(env, "FOO"), "c");
	assert_string_equal(get(env, "EMPTY"), "");
	assert_string_equal(get(env, "TERM"), "xterm");
	assert_string_equal(get(env, "HOME"), "/root");
	assert_int_equal(count(env), 5);
	agent_env_free(env);
	agent_env_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_filtered_and_defaults),
		cmocka_unit_test(test_request_overrides),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_rpc_backend.c: the rpc backend's parts that need no supervisor
 * (sandbox/rpc_sup.c, rpc.c): bad supervisor descriptions and saved
 * records first, the back-off, one instance per supervisor, caps. */
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

#include "rpc-int.h"
#include "sandbox.h"

static void
expect_conf_bad(const struct sbx_rpc_conf *c, const char *needle)
{
	char err[256] = "";

	assert_null(sbx_rpc_backend_get(c, err, sizeof(err)));
	if (!strstr(err, needle))
		fail_msg("\"%s\" lacks \"%s\"", err, needle);
}

static void
test_conf_bad(void **st)
{
	const char *rel[] = { "sup", "-v" };
	const char *abs[] = { "/usr/bin/sup" };

	(void)st;
	expect_conf_bad(NULL, "exactly one");
	expect_conf_bad(&(struct sbx_rpc_conf){ 0 }, "exactly one");
	expect_conf_bad(&(struct sbx_rpc_conf){ .argv = abs, .argc = 1, .socket = "/s" },
	                "exactly one");
	expect_conf_bad(&(struct sbx_rpc_conf){ .argv = rel, .argc = 2 }, "ABSOLUTE");
	expect_conf_bad(&(struct sbx_rpc_conf){ .socket = "rel.sock" }, "absolute");
}

static void
test_one_instance_per_supervisor(void **st)
{
	const char *a1[] = { "/usr/bin/sup", "--x" }, *a2[] = { "/usr/bin/sup", "--y" };
	const struct sbx_backend *b1, *b2, *b3, *b4;
	struct sbx_caps caps;
	char err[256];

	(void)st;
	b1 = sbx_rpc_backend_get(&(struct sbx_rpc_conf){ .argv = a1, .argc = 2 }, err, sizeof(err));
	b2 = sbx_rpc_backend_get(&(struct sbx_rpc_conf){ .argv = a1, .argc = 2 }, err, sizeof(err));
	b3 = sbx_rpc_backend_get(&(struct sbx_rpc_conf){ .argv = a2, .argc = 2 }, err, sizeof(err));
	b4 = sbx_rpc_backend_get(&(struct sbx_rpc_conf){ .socket = "/run/x.sock" }, err,
	                         sizeof(err));
	assert_non_null(b1);
	assert_ptr_equal(b1, b2);
	assert_non_null(b3);
	assert_true(b1 != b3);
	assert_non_null(b4);
	assert_true(b4 != b1 && b4 != b3);
	sbx_caps(b1, &caps);
	assert_string_equal(caps.name, "rpc");
	assert_false(caps.park); /* nothing known yet: no pausing */
	assert_true(caps.network && caps.files && caps.mounts);
}

static void
test_backoff(void **st)
{
	(void)st;
	assert_int_equal(sbx_rpc_backoff_ms(1), 250);
	assert_int_equal(sbx_rpc_backoff_ms(2), 500);
	assert_int_equal(sbx_rpc_backoff_ms(3), 1000);
	assert_int_equal(sbx_rpc_backoff_ms(8), 30000);
	assert_int_equal(sbx_rpc_backoff_ms(1000), 30000);
}

static void
expect_saved_bad(const char *js, const char *needle)
{
	json_t *j = json_loads(js, 0, NULL);
	char err[256] = "";

	assert_non_null(j);
	assert_null(sbx_rpc_backend_from_saved(j, err, sizeof(err)));
	if (!strstr(err, needle))
		fail_msg("%s: \"%s\" lacks \"%s\"", js, err, needle);
	json_decref(j);
}

static void
test_saved_bad(void **st)
{
	(void)st;
	expect_saved_bad("{}", "bad id");
	expect_saved_bad("{\"id\":\"a/b\"}", "bad id");
	expect_saved_bad("{\"id\":\"s1\"}", "bad handle");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\\n\"}", "bad handle");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/elsewhere/s1\"}",
	                 "state_dir");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/tmp/sbx-t/s1\","
	                 "\"netns\":\"other\"}",
	                 "netns is not sl-rpc-s1");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/tmp/sbx-t/s1\","
	                 "\"netns\":\"sl-rpc-s1\",\"net\":{\"netns\":\"a/b\",\"ifname\":\"x\"}}",
	                 "bad net");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/tmp/sbx-t/s1\","
	                 "\"netns\":\"sl-rpc-s1\"}",
	                 "no supervisor");
	expect_saved_bad("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/tmp/sbx-t/s1\","
	                 "\"netns\":\"sl-rpc-s1\",\"supervisor\":{\"command\":[\"rel\"]}}",
	                 "ABSOLUTE");
}

static void
test_saved_ok(void **st)
{
	json_t *j = json_loads("{\"id\":\"s1\",\"handle\":\"h\",\"state_dir\":\"/tmp/sbx-t/s1\","
	                       "\"netns\":\"sl-rpc-s1\",\"supervisor\":{\"socket\":\"/run/x.sock\"}}",
	                       0, NULL);
	const struct sbx_backend *b;
	char err[256] = "";

	(void)st;
	b = sbx_rpc_backend_from_saved(j, err, sizeof(err));
	assert_non_null(b);
	assert_ptr_equal(b, sbx_rpc_backend_get(&(struct sbx_rpc_conf){ .socket = "/run/x.sock" },
	                                        err, sizeof(err)));
	json_decref(j);
}

static int
setup(void **st)
{
	struct sbx_init_opts o = { .state_dir = "/tmp/sbx-t" };
	char err[256];

	(void)st;
	return sbx_init(&o, err, sizeof(err));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conf_bad),
		cmocka_unit_test(test_saved_bad),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_one_instance_per_supervisor),
		cmocka_unit_test(test_saved_ok),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}

/* test_init.c: the VM init's pure parts (agent/init.c): the kernel
 * command line and the virtio port lookup. Bad inputs first. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

static int
parse(const char *s, struct agent_cmdline *cl, char *err, size_t errsz)
{
	err[0] = 0;
	return agent_cmdline_parse(s, strlen(s), cl, err, errsz);
}

static void
bad(const char *s, const char *want_in_err)
{
	struct agent_cmdline cl;
	char err[256];

	assert_int_equal(parse(s, &cl, err, sizeof(err)), -EINVAL);
	if (strstr(err, want_in_err) == NULL)
		fail_msg("%s: \"%s\" lacks \"%s\"", s, err, want_in_err);
	/* the bad value is dropped, the port keeps its default */
	assert_string_equal(cl.port[0] ? "x" : "", "x");
}

static void
test_bad(void **state)
{
	char big[600];

	(void)state;
	/* missing '=' or value */
	bad("console=ttyS0 sluice.port", "sluice.port");
	bad("sluice.root= quiet", "sluice.root");
	bad("sluice.hostname=", "sluice.hostname");
	/* quotes */
	bad("sluice.port=\"a b\"", "quotes");
	bad("sluice.root=\"/dev/vda\"", "quotes");
	bad("\"sluice.hostname=x\"", "quotes");
	/* characters */
	bad("sluice.hostname=a_b", "sluice.hostname");
	bad("sluice.port=a/b", "sluice.port");
	bad("sluice.root=vda", "sluice.root");
	bad("sluice.root=/", "sluice.root");
	/* overlong values */
	memset(big, 'a', sizeof(big));
	memcpy(big, "sluice.hostname=", 16);
	big[16 + 65] = 0;
	bad(big, "over 64");
	memset(big, 'a', sizeof(big));
	memcpy(big, "sluice.port=", 12);
	big[12 + 64] = 0;
	bad(big, "over 63");
	memcpy(big, "sluice.root=/", 13);
	memset(big + 13, 'a', 300);
	big[13 + 300] = 0;
	bad(big, "over 255");
}

static void
test_bad_keeps_good(void **state)
{
	struct agent_cmdline cl;
	char err[256];

	(void)state;
	assert_int_equal(parse("sluice.root=/dev/vda sluice.port=\"x\" "
			       "sluice.hostname=h1", &cl, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(cl.root, "/dev/vda");
	assert_string_equal(cl.port, AGENT_PORT_DEFAULT);
	assert_string_equal(cl.hostname, "h1");
}

static void
test_empty_and_default(void **state)
{
	struct agent_cmdline cl;
	char err[256];

	(void)state;
	assert_int_equal(agent_cmdline_parse(NULL, 0, &cl, err, sizeof(err)),
			 0);
	assert_string_equal(cl.port, AGENT_PORT_DEFAULT);
	assert_string_equal(cl.root, "");
	assert_string_equal(cl.hostname, "");
	assert_int_equal(parse("   \n", &cl, err, sizeof(err)), 0);
	assert_int_equal(parse("console=ttyS0 quiet panic=-1 sluice.rootx=1 "
			       "xsluice.port=2 sluice=3 sluice.", &cl, err,
			       sizeof(err)), 0);
	assert_string_equal(cl.port, AGENT_PORT_DEFAULT);
	assert_string_equal(cl.root, "");
}

static void
test_good(void **state)
{
	struct agent_cmdline cl;
	char err[256];
	const char *s = "console=ttyS0 quiet panic=-1 tsc_early_khz=2000000 "
			"tsc=reliable sluice.root=/dev/vda "
			"sluice.port=sluice.agent2 sluice.hostname=sbx-42 "
			"foo=\"a b sluice.port=no\"\n";

	(void)state;
	assert_int_equal(parse(s, &cl, err, sizeof(err)), 0);
	assert_string_equal(cl.root, "/dev/vda");
	assert_string_equal(cl.port, "sluice.agent2");
	assert_string_equal(cl.hostname, "sbx-42");
	/* the last one wins; a NUL ends the line like a space */
	assert_int_equal(agent_cmdline_parse("sluice.port=a sluice.port=b\0"
					     "sluice.port=c", 41, &cl, err,
					     sizeof(err)), 0);
	assert_string_equal(cl.port, "c");
	assert_int_equal(parse("sluice.hostname=a=b", &cl, err, sizeof(err)),
			 -EINVAL);
}

/* Every split of a good line parses the same up to the split. */
static void
test_prefixes(void **state)
{
	const char *s = "a=1 sluice.root=/dev/vda sluice.hostname=h";
	struct agent_cmdline cl;
	char err[256];

	(void)state;
	for (size_t i = 0; i <= strlen(s); i++) {
		int rc = agent_cmdline_parse(s, i, &cl, err, sizeof(err));

		/* "sluice.root=" cut short is a bad word, never a crash */
		assert_true(rc == 0 || rc == -EINVAL);
	}
}

static void
test_vport(void **state)
{
	char dir[] = "/tmp/test_init.XXXXXX", p[512], path[64];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(agent_vport_find(dir, "sluice.agent", path,
					  sizeof(path)), -ENOENT);
	assert_int_equal(agent_vport_find("/nonexistent/x", "a", path,
					  sizeof(path)), -ENOENT);
	snprintf(p, sizeof(p), "%s/vport0p1", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/vport0p1/name", dir);
	f = fopen(p, "w");
	fputs("other\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/vport1p3", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/vport1p3/name", dir);
	f = fopen(p, "w");
	fputs("sluice.agent\n", f);
	fclose(f);
	assert_int_equal(agent_vport_find(dir, "sluice.agen", path,
					  sizeof(path)), -ENOENT);
	assert_int_equal(agent_vport_find(dir, "sluice.agent", path,
					  sizeof(path)), 0);
	assert_string_equal(path, "/dev/vport1p3");
	assert_int_equal(agent_vport_find(dir, "sluice.agent", path, 8),
			 -ENAMETOOLONG);
	assert_int_equal(agent_vport_find(dir, "other", path, sizeof(path)),
			 0);
	assert_string_equal(path, "/dev/vport0p1");
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	assert_int_equal(system(p), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_bad_keeps_good),
		cmocka_unit_test(test_empty_and_default),
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_vport),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

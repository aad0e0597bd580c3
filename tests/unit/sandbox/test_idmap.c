/* test_idmap.c: the `ns` backend's host id ranges (sandbox/idmap.c): the
 * space's checks, the map and tmpfs option texts, the registry of ranges
 * in use (in a scratch directory: reserve, exhaustion, stale holders,
 * claim, release, and processes reserving at once), and which guest path
 * hides a daemon directory a bind would show (template.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* cmocka needs stdarg, stddef and setjmp first. */
#include <cmocka.h>

#include "sandbox-int.h"

static void
expect_space(uint32_t base, uint32_t ranges, int want, const char *needle)
{
	char err[256] = "";

	assert_int_equal(sbx_idmap_check(base, ranges, err, sizeof(err)), want);
	if (needle && !strstr(err, needle))
		fail_msg("base %u ranges %u: \"%s\" lacks \"%s\"", base, ranges, err, needle);
}

static void
test_check(void **st)
{
	(void)st;
	/* bad first */
	expect_space(0, 1, -EINVAL, "at least 65536");
	expect_space(65535, 1, -EINVAL, "multiple of 65536");
	expect_space(65537, 1, -EINVAL, "multiple of 65536");
	expect_space(1073741824u + 1, 8, -EINVAL, "multiple of 65536");
	expect_space(1073741824u, 0, -EINVAL, "at least 1");
	/* past 4294967294: the last range would hold (uid_t)-1 */
	expect_space(0xffff0000u, 1, -EINVAL, "4294967294");
	expect_space(0x80000000u, 32768, -EINVAL, "4294967294");
	expect_space(65536, 65535, -EINVAL, "4294967294");
	/* good */
	expect_space(SBX_IDMAP_BASE, SBX_IDMAP_RANGES, 0, NULL);
	expect_space(65536, 1, 0, NULL);
	expect_space(65536, 65534, 0, NULL);
	expect_space(0xfffe0000u, 1, 0, NULL);
	expect_space(0x80000000u, 32767, 0, NULL);

	assert_false(sbx_idmap_first_ok(0));
	assert_false(sbx_idmap_first_ok(65535));
	assert_false(sbx_idmap_first_ok(65537));
	assert_false(sbx_idmap_first_ok(0xffff0000u));
	assert_true(sbx_idmap_first_ok(65536));
	assert_true(sbx_idmap_first_ok(SBX_IDMAP_BASE));
	assert_true(sbx_idmap_first_ok(0xfffe0000u));
}

static void
test_texts(void **st)
{
	char buf[64];

	(void)st;
	/* too small: refused, never cut short into another map */
	assert_int_equal(sbx_idmap_map_text(buf, 10, 1073741824u), -ENAMETOOLONG);
	assert_int_equal(sbx_idmap_map_text(buf, 19, 1073741824u), -ENAMETOOLONG);
	assert_int_equal(sbx_idmap_map_text(buf, 20, 1073741824u), 0);
	assert_string_equal(buf, "0 1073741824 65536\n");
	assert_int_equal(sbx_idmap_map_text(buf, sizeof(buf), 4294836224u), 0);
	assert_string_equal(buf, "0 4294836224 65536\n");
	assert_int_equal(sbx_idmap_tmpfs_opts(buf, sizeof(buf), "mode=1777", 1073807360u), 0);
	assert_string_equal(buf, "mode=1777,uid=1073807360,gid=1073807360");
	assert_int_equal(sbx_idmap_tmpfs_opts(buf, sizeof(buf), "", 65536), 0);
	assert_string_equal(buf, "uid=65536,gid=65536");
	assert_int_equal(sbx_idmap_tmpfs_opts(buf, 12, "mode=1777", 65536), -ENAMETOOLONG);
}

static void
test_mask_path(void **st)
{
	char out[128];

	(void)st;
	/* not under the bind: nothing to hide */
	assert_false(sbx_tpl_mask_path("/usr", "/r/usr", "/var/lib/sluice", out, sizeof(out)));
	assert_false(sbx_tpl_mask_path("/usr", "/r/usr", "/usrx/sluice", out, sizeof(out)));
	assert_false(sbx_tpl_mask_path("/usr/lib", "/r/usr/lib", "/usr", out, sizeof(out)));
	/* under it: where it shows in the guest */
	assert_true(sbx_tpl_mask_path("/usr", "/r/usr", "/usr/local/sluice", out, sizeof(out)));
	assert_string_equal(out, "/r/usr/local/sluice");
	assert_true(sbx_tpl_mask_path("/usr/", "/r/usr", "/usr/local/sl", out, sizeof(out)));
	assert_string_equal(out, "/r/usr/local/sl");
	assert_true(sbx_tpl_mask_path("/srv/data", "/r/mnt", "/srv/data", out, sizeof(out)));
	assert_string_equal(out, "/r/mnt");
	assert_true(sbx_tpl_mask_path("/", "/r/host", "/var/lib/sluice", out, sizeof(out)));
	assert_string_equal(out, "/r/host/var/lib/sluice");
	/* does not fit: not hidden half-way, refused */
	assert_false(sbx_tpl_mask_path("/usr", "/r/usr", "/usr/local/sluice", out, 10));
}

/* ---- the registry ----------------------------------------------------------- */

static char scratch[64];

static void
mk(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", scratch, name);
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", out, strerror(errno));
}

static int
setup_scratch(void **st)
{
	(void)st;
	snprintf(scratch, sizeof(scratch), "/tmp/sl-test-idmap.XXXXXX");
	return mkdtemp(scratch) ? 0 : -1;
}

static int
teardown_scratch(void **st)
{
	(void)st;
	return sbx_rm_tree(scratch);
}

static void
test_registry(void **st)
{
	const uint32_t base = 1073741824u, n = 3;
	char reg[128], a[128], b[128], c[128], d[128], e[128], err[256];
	uint32_t fa, fb, fc, fd, fe, f;

	(void)st;
	snprintf(reg, sizeof(reg), "%s/reg", scratch); /* made on first use */
	mk(a, sizeof(a), "a");
	mk(b, sizeof(b), "b");
	mk(c, sizeof(c), "c");
	mk(d, sizeof(d), "d");
	mk(e, sizeof(e), "e");
	assert_int_equal(sbx_idmap_reserve(reg, base, n, a, &fa, err, sizeof(err)), 0);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, b, &fb, err, sizeof(err)), 0);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, c, &fc, err, sizeof(err)), 0);
	/* three different ranges of the space, each on its boundary */
	assert_true(fa != fb && fb != fc && fa != fc);
	for (uint32_t i = 0, *v[] = {&fa, &fb, &fc}; i < 3; i++)
		assert_true(*v[i] >= base && *v[i] < base + n * SBX_IDMAP_SIZE &&
		            (*v[i] - base) % SBX_IDMAP_SIZE == 0);
	{
		struct stat sst;
		assert_int_equal(stat(reg, &sst), 0);
		assert_int_equal(sst.st_mode & 0777, 0700);
	}
	/* all held by live sandboxes: none for d, and said so */
	assert_int_equal(sbx_idmap_reserve(reg, base, n, d, &fd, err, sizeof(err)), -ENOSPC);
	assert_non_null(strstr(err, "all 3 id ranges"));
	/* b's state directory is gone (stopped, swept): its range is free */
	assert_int_equal(rmdir(b), 0);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, d, &fd, err, sizeof(err)), 0);
	assert_int_equal(fd, fb);
	/* a release by another owner does nothing; by the owner it frees */
	sbx_idmap_release(reg, fa, e);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, e, &fe, err, sizeof(err)), -ENOSPC);
	sbx_idmap_release(reg, fa, a);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, e, &fe, err, sizeof(err)), 0);
	assert_int_equal(fe, fa);
	/* claim (adoption): one's own again is fine; a live other's is not */
	assert_int_equal(sbx_idmap_claim(reg, fc, c, err, sizeof(err)), 0);
	assert_int_equal(sbx_idmap_claim(reg, fc, a, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, c));
	/* a lost entry is put back; then it is held */
	{
		char name[160];
		snprintf(name, sizeof(name), "%s/%u", reg, fc);
		assert_int_equal(unlink(name), 0);
	}
	assert_int_equal(sbx_idmap_claim(reg, fc, c, err, sizeof(err)), 0);
	assert_int_equal(sbx_idmap_reserve(reg, base, n, a, &f, err, sizeof(err)), -ENOSPC);
	/* a holder that is not a directory any more is gone too */
	assert_int_equal(rmdir(c), 0);
	{
		FILE *fp = fopen(c, "w");
		assert_non_null(fp);
		fclose(fp);
	}
	assert_int_equal(sbx_idmap_reserve(reg, base, n, a, &f, err, sizeof(err)), 0);
	assert_int_equal(f, fc);
	/* a registry that cannot be made (c is a file now): refused, named */
	{
		char bad[160];
		snprintf(bad, sizeof(bad), "%s/reg", c);
		assert_int_equal(sbx_idmap_reserve(bad, base, n, a, &f, err, sizeof(err)),
		                 -ENOTDIR);
		assert_non_null(strstr(err, bad));
	}
}

/* Processes reserving at once, through the registry's lock: every range
 * goes to exactly one of them. */
static void
test_registry_concurrent(void **st)
{
	enum { PROCS = 8, EACH = 4, RANGES = PROCS * EACH };
	const uint32_t base = 2147483648u;
	char reg[128];
	int pfd[2];
	uint32_t got[RANGES + 1];
	size_t ngot = 0;
	bool seen[RANGES] = {false};

	(void)st;
	snprintf(reg, sizeof(reg), "%s/creg", scratch);
	assert_int_equal(pipe(pfd), 0);
	for (int i = 0; i < PROCS; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			for (int k = 0; k < EACH; k++) {
				char own[128], err[256];
				uint32_t f;
				snprintf(own, sizeof(own), "%s/p%d-%d", scratch, i, k);
				if (mkdir(own, 0700) < 0 ||
				    sbx_idmap_reserve(reg, base, RANGES, own, &f, err,
				                      sizeof(err)) < 0)
					_exit(1);
				if (write(pfd[1], &f, sizeof(f)) != sizeof(f))
					_exit(1);
			}
			_exit(0);
		}
	}
	close(pfd[1]);
	while (ngot <= RANGES && read(pfd[0], &got[ngot], sizeof(got[0])) == sizeof(got[0]))
		ngot++;
	close(pfd[0]);
	for (int i = 0; i < PROCS; i++) {
		int status;
		assert_true(wait(&status) > 0);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(ngot, RANGES);
	for (size_t i = 0; i < ngot; i++) {
		uint32_t slot = (got[i] - base) / SBX_IDMAP_SIZE;
		assert_true(got[i] >= base && slot < RANGES);
		if (seen[slot])
			fail_msg("range %u given twice", got[i]);
		seen[slot] = true;
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check),
	    cmocka_unit_test(test_texts),
	    cmocka_unit_test(test_mask_path),
	    cmocka_unit_test_setup_teardown(test_registry, setup_scratch, teardown_scratch),
	    cmocka_unit_test_setup_teardown(test_registry_concurrent, setup_scratch,
	                                    teardown_scratch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_tar.c: the tar codec (agent/tar.c) and the tree walker and
 * extractor (agent/tarfs.c). Bad archives first: each refused with its
 * reason and nothing written outside the root; then hostile trees
 * (links on the way), then round trips fed at every split. */
#include <errno.h>
#include <fcntl.h>
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

#include "../sl_test.h"
#include "tar.h"
#include "tarfs.h"

/* ---- building archives by hand ---------------------------------------- */

struct arc {
	uint8_t b[1 << 16];
	size_t n;
};

static void
fix_sum(uint8_t *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* A raw ustar header: any name, type and size. */
static uint8_t *
raw(struct arc *a, const char *name, char type, uint64_t size, const char *link)
{
	uint8_t *h = a->b + a->n;

	memset(h, 0, 512);
	memcpy(h, name, strnlen(name, 100));
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = (uint8_t)type;
	if (link)
		memcpy(h + 157, link, strnlen(link, 100));
	memcpy(h + 257, "ustar\0" "00", 8);
	fix_sum(h);
	a->n += 512;
	return h;
}

static void
data(struct arc *a, const char *s, size_t n)
{
	memcpy(a->b + a->n, s, n);
	a->n += n;
	memset(a->b + a->n, 0, agent_tar_pad(n));
	a->n += agent_tar_pad(n);
}

static void
end(struct arc *a)
{
	memset(a->b + a->n, 0, 1024);
	a->n += 1024;
}

static void
ent(struct arc *a, enum agent_tar_type t, const char *name, const char *link, const char *body,
    unsigned mode)
{
	static struct agent_tar_entry e;
	long n;

	memset(&e, 0, sizeof(e));
	e.type = t;
	snprintf(e.name, sizeof(e.name), "%s", name);
	snprintf(e.link, sizeof(e.link), "%s", link ? link : "");
	e.size = body ? strlen(body) : 0;
	e.mode = mode;
	e.mtime = 1700000000;
	n = agent_tar_header(a->b + a->n, sizeof(a->b) - a->n, &e);
	assert_true(n > 0);
	a->n += (size_t)n;
	if (body)
		data(a, body, strlen(body));
}

/* Decodes a whole archive, fed in pieces of `step` bytes. Returns the
 * last result (END on success) and the reason in why. */
static enum agent_tar_dec_result
decode(const struct arc *a, size_t step, char *why, size_t whysz, unsigned *entries)
{
	static struct agent_tar_dec d;
	size_t off = 0;
	enum agent_tar_dec_result r = AGENT_TAR_AGAIN;

	agent_tar_dec_init(&d);
	*entries = 0;
	while (off < a->n) {
		size_t len = a->n - off < step ? a->n - off : step, used;
		const uint8_t *p;
		size_t dl;

		r = agent_tar_dec_feed(&d, a->b + off, len, &used, &p, &dl);
		off += used;
		if (r == AGENT_TAR_ERROR)
			break;
		if (r == AGENT_TAR_ENTRY)
			(*entries)++;
		if (r == AGENT_TAR_END)
			break;
	}
	if (r != AGENT_TAR_ERROR && r != AGENT_TAR_END && !agent_tar_dec_finish(&d))
		r = AGENT_TAR_ERROR;
	snprintf(why, whysz, "%s", d.err);
	return r;
}

static void
expect_refused(const struct arc *a, const char *reason)
{
	char why[AGENT_TAR_ERR_MAX];
	unsigned n;

	for (size_t step = 1; step <= a->n; step = step * 3 + 1) {
		assert_int_equal(decode(a, step, why, sizeof(why), &n), AGENT_TAR_ERROR);
		if (!strstr(why, reason))
			fail_msg("step %zu: reason \"%s\", wanted \"%s\"", step, why, reason);
	}
}

/* ---- bad archives ----------------------------------------------------- */

static void
test_bad_names(void **st)
{
	static const struct {
		const char *name, *why;
	} bad[] = {
		{ "/etc/passwd", "absolute" },   { "../x", "'..'" },
		{ "a/../../x", "'..'" },         { "a/..", "'..'" },
		{ "a//b", "empty component" },   { "a/./b", "'.' component" },
	};
	static struct arc a;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a.n = 0;
		raw(&a, bad[i].name, '0', 0, NULL);
		end(&a);
		expect_refused(&a, bad[i].why);
	}
	/* a name that is the root, as a file */
	a.n = 0;
	raw(&a, "./", '0', 3, NULL);
	data(&a, "abc", 3);
	end(&a);
	expect_refused(&a, "root");
	a.n = 0;
	raw(&a, ".", '2', 0, "x");
	end(&a);
	expect_refused(&a, "root");
}

static void
test_bad_types(void **st)
{
	static const struct {
		char t;
		const char *why;
	} bad[] = {
		{ '1', "hard link" }, { '3', "device" }, { '4', "device" },
		{ '6', "FIFO" },      { 'S', "type 'S'" }, { 'V', "type 'V'" },
	};
	static struct arc a;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a.n = 0;
		raw(&a, "x", bad[i].t, 0, "target");
		end(&a);
		expect_refused(&a, bad[i].why);
	}
}

static void
test_bad_headers(void **st)
{
	static struct arc a;
	uint8_t *h;

	(void)st;
	/* checksum */
	a.n = 0;
	h = raw(&a, "x", '0', 0, NULL);
	h[0] = 'y';
	end(&a);
	expect_refused(&a, "checksum");
	/* not ustar */
	a.n = 0;
	h = raw(&a, "x", '0', 0, NULL);
	memcpy(h + 257, "nope\0\0\0\0", 8);
	fix_sum(h);
	end(&a);
	expect_refused(&a, "not a ustar header");
	/* a bad size field */
	a.n = 0;
	h = raw(&a, "x", '0', 0, NULL);
	memcpy(h + 124, "0000000009x", 11);
	fix_sum(h);
	end(&a);
	expect_refused(&a, "size field");
	/* a size past the stream */
	a.n = 0;
	raw(&a, "x", '0', 100000, NULL);
	data(&a, "abc", 3);
	expect_refused(&a, "truncated");
	/* no end blocks */
	a.n = 0;
	ent(&a, AGENT_TAR_FILE, "x", NULL, "abc", 0644);
	expect_refused(&a, "truncated");
	/* a lone zero block, then more */
	a.n = 0;
	memset(a.b, 0, 512);
	a.n = 512;
	raw(&a, "x", '0', 0, NULL);
	end(&a);
	expect_refused(&a, "lone zero block");
	/* a directory with a size; a link without a target */
	a.n = 0;
	raw(&a, "d/", '5', 3, NULL);
	data(&a, "abc", 3);
	end(&a);
	expect_refused(&a, "directory with a size");
	a.n = 0;
	raw(&a, "l", '2', 0, NULL);
	end(&a);
	expect_refused(&a, "without a target");
	/* an extended header larger than the bound */
	a.n = 0;
	raw(&a, "PaxHeader", 'x', AGENT_TAR_EXT_MAX + 1, NULL);
	end(&a);
	expect_refused(&a, "extended header of");
	/* a malformed pax record */
	a.n = 0;
	raw(&a, "PaxHeader", 'x', 12, NULL);
	data(&a, "99 path=abc\n", 12);
	raw(&a, "x", '0', 0, NULL);
	end(&a);
	expect_refused(&a, "malformed pax");
	/* a pax path that escapes */
	a.n = 0;
	raw(&a, "PaxHeader", 'x', 20, NULL);
	data(&a, "20 path=../../etc/x\n", 20);
	raw(&a, "innocent", '0', 0, NULL);
	end(&a);
	expect_refused(&a, "'..'");
	/* two pax headers for one entry */
	a.n = 0;
	raw(&a, "PaxHeader", 'x', 11, NULL);
	data(&a, "11 path=ab\n", 11);
	raw(&a, "PaxHeader", 'x', 11, NULL);
	data(&a, "11 path=cd\n", 11);
	raw(&a, "x", '0', 0, NULL);
	end(&a);
	expect_refused(&a, "two extended headers");
	/* a GNU long name that escapes */
	a.n = 0;
	raw(&a, "././@LongLink", 'L', 9, NULL);
	data(&a, "/abs/x\0\0\0", 9);
	raw(&a, "x", '0', 0, NULL);
	end(&a);
	expect_refused(&a, "absolute");
}

/* ---- good archives ---------------------------------------------------- */

static void
test_good_decode(void **st)
{
	static struct arc a;
	char why[AGENT_TAR_ERR_MAX], longname[300];
	unsigned n;

	(void)st;
	memset(longname, 'n', sizeof(longname));
	memcpy(longname, "dir/", 4);
	longname[150] = '/';
	longname[sizeof(longname) - 1] = '\0';
	a.n = 0;
	ent(&a, AGENT_TAR_DIR, "", NULL, NULL, 0755);
	ent(&a, AGENT_TAR_DIR, "dir", NULL, NULL, 0700);
	ent(&a, AGENT_TAR_FILE, "dir/a file", NULL, "hello\n", 0600);
	ent(&a, AGENT_TAR_FILE, longname, NULL, "long", 0644);
	ent(&a, AGENT_TAR_SYMLINK, "dir/l", longname, NULL, 0777);
	/* a GNU long name and old-style "./" names */
	raw(&a, "././@LongLink", 'L', 12, NULL);
	data(&a, "./g/longer\0\0", 12);
	raw(&a, "g/short", '0', 2, NULL);
	data(&a, "ok", 2);
	raw(&a, "./v7dir/", '0', 0, NULL);
	end(&a);
	memset(a.b + a.n, 0, 9000); /* record padding after the end */
	a.n += 9000;
	for (size_t step = 1; step < 2000; step = step * 2 + 1) {
		if (decode(&a, step, why, sizeof(why), &n) != AGENT_TAR_END)
			fail_msg("step %zu: %s", step, why);
		assert_int_equal(n, 7);
	}
}

/* The fuzz seeds that python's tarfile made (ustar, pax, GNU; first byte
 * the fuzz target's step): good ones end, hostile ones are refused. */
static void
test_seeds(void **st)
{
	static const struct {
		const char *file, *why;
	} seeds[] = {
		{ "good-pax", NULL },        { "good-gnu", NULL },
		{ "good-ustar", NULL },      { "long-pax", NULL },
		{ "long-gnu", NULL },        { "dotdot", "'..'" },
		{ "absolute", "absolute" },  { "hardlink", "hard link" },
		{ "device", "device" },      { "truncated", "truncated" },
		{ "bad-checksum", "checksum" },
	};
	const char *dir = getenv("SL_TESTDATA");
	static struct arc a;
	char path[512], why[AGENT_TAR_ERR_MAX];
	unsigned n;

	(void)st;
	assert_non_null(dir);
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/fuzz/corpus/tar/%s", dir, seeds[i].file);
		f = fopen(path, "rb");
		assert_non_null(f);
		a.n = fread(a.b, 1, sizeof(a.b), f);
		fclose(f);
		assert_true(a.n > 1);
		memmove(a.b, a.b + 1, --a.n);
		if (!seeds[i].why) {
			if (decode(&a, 100, why, sizeof(why), &n) != AGENT_TAR_END)
				fail_msg("%s: %s", seeds[i].file, why);
			assert_true(n >= 2);
		} else {
			expect_refused(&a, seeds[i].why);
		}
	}
}

/* ---- the extractor ---------------------------------------------------- */

static char tmpl[] = "/tmp/test_tar.XXXXXX";
static char *top;

static int
setup(void **st)
{
	(void)st;
	strcpy(tmpl, "/tmp/test_tar.XXXXXX");
	top = mkdtemp(tmpl);
	return top ? 0 : -1;
}

static int
teardown(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s; rm -rf %s", top, top);
	return system(cmd) == 0 ? 0 : -1;
}

/* Extracts a into top/sub, fed in `step` pieces. 0 or -errno. */
static int
extract(const struct arc *a, const char *sub, size_t step, char *err, size_t errsz,
	struct agent_tarfs_stats *stats)
{
	struct agent_tarfs_x *x;
	char root[512];
	int rc;

	snprintf(root, sizeof(root), "%s/%s", top, sub);
	rc = agent_tarfs_x_open(&x, root, true, err, errsz);
	if (rc < 0)
		return rc;
	for (size_t off = 0; off < a->n && rc == 0; off += step)
		rc = agent_tarfs_x_feed(x, a->b + off, a->n - off < step ? a->n - off : step, err,
					errsz);
	if (rc == 0)
		rc = agent_tarfs_x_finish(x, err, errsz);
	if (stats)
		agent_tarfs_x_stats(x, stats);
	agent_tarfs_x_free(x);
	return rc;
}

static bool
exists(const char *rel)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	return lstat(p, &st) == 0;
}

static void
test_hostile_links(void **st)
{
	static struct arc a;
	struct agent_tarfs_stats s;
	char err[512];

	(void)st;
	/* a link out, then a file through it */
	a.n = 0;
	ent(&a, AGENT_TAR_SYMLINK, "l", "../outside", NULL, 0777);
	ent(&a, AGENT_TAR_FILE, "l/evil", NULL, "x", 0644);
	end(&a);
	assert_int_equal(mkdir(strcat(strcpy((char[512]){ 0 }, top), "/outside"), 0755), 0);
	assert_int_equal(extract(&a, "in", 7, err, sizeof(err), &s), -EBADMSG);
	assert_non_null(strstr(err, "symbolic link"));
	assert_non_null(strstr(err, "l/evil"));
	assert_false(exists("outside/evil"));
	assert_true(exists("in/l"));    /* what came before stays */
	assert_int_equal(s.entries, 1);
	/* an absolute link, then a directory and a file through it */
	a.n = 0;
	ent(&a, AGENT_TAR_SYMLINK, "abs", top, NULL, 0777);
	ent(&a, AGENT_TAR_DIR, "abs/d", NULL, NULL, 0755);
	end(&a);
	assert_int_equal(extract(&a, "in2", 512, err, sizeof(err), NULL), -EBADMSG);
	assert_false(exists("d"));
	/* a link already there in the target */
	snprintf(err, sizeof(err), "%s/in3", top);
	assert_int_equal(mkdir(err, 0755), 0);
	snprintf(err, sizeof(err), "%s/in3/pre", top);
	assert_int_equal(symlink("../outside", err), 0);
	a.n = 0;
	ent(&a, AGENT_TAR_FILE, "pre/x", NULL, "x", 0644);
	end(&a);
	assert_int_equal(extract(&a, "in3", 512, err, sizeof(err), NULL), -EBADMSG);
	assert_false(exists("outside/x"));
	a.n = 0;
	ent(&a, AGENT_TAR_DIR, "sub", NULL, NULL, 0755);
	ent(&a, AGENT_TAR_SYMLINK, "sub/up", "../..", NULL, 0777);
	ent(&a, AGENT_TAR_FILE, "sub/up/x", NULL, "x", 0644);
	end(&a);
	assert_int_equal(extract(&a, "in4", 3, err, sizeof(err), NULL), -EBADMSG);
	assert_false(exists("x"));
	/* a directory entry where a link is */
	a.n = 0;
	ent(&a, AGENT_TAR_SYMLINK, "d", "/", NULL, 0777);
	ent(&a, AGENT_TAR_DIR, "d", NULL, NULL, 0755);
	end(&a);
	assert_int_equal(extract(&a, "in5", 512, err, sizeof(err), NULL), -EBADMSG);
	assert_non_null(strstr(err, "not a directory"));
	/* a file where a directory is */
	a.n = 0;
	ent(&a, AGENT_TAR_DIR, "d", NULL, NULL, 0755);
	ent(&a, AGENT_TAR_FILE, "d", NULL, "x", 0644);
	end(&a);
	assert_int_equal(extract(&a, "in6", 512, err, sizeof(err), NULL), -EISDIR);
	/* a bad archive after a good entry: counted, reported */
	a.n = 0;
	ent(&a, AGENT_TAR_FILE, "ok", NULL, "fine", 0644);
	raw(&a, "/etc/shadow", '0', 0, NULL);
	end(&a);
	assert_int_equal(extract(&a, "in7", 100, err, sizeof(err), &s), -EBADMSG);
	assert_non_null(strstr(err, "/etc/shadow"));
	assert_int_equal(s.files, 1);
	assert_true(exists("in7/ok"));
}

static void
test_modes_masked(void **st)
{
	static struct arc a;
	char err[512], p[512];
	struct stat sb;

	(void)st;
	a.n = 0;
	ent(&a, AGENT_TAR_FILE, "suid", NULL, "x", 06755);
	ent(&a, AGENT_TAR_DIR, "ro", NULL, NULL, 0500);
	ent(&a, AGENT_TAR_FILE, "ro/inside", NULL, "y", 0400);
	end(&a);
	assert_int_equal(extract(&a, "m", 512, err, sizeof(err), NULL), 0);
	snprintf(p, sizeof(p), "%s/m/suid", top);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);
	assert_int_equal(sb.st_mtime, 1700000000);
	snprintf(p, sizeof(p), "%s/m/ro", top);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0500);
	assert_true(exists("m/ro/inside"));
}

/* ---- the walker, round trips ------------------------------------------ */

static void
put(const char *rel, const char *body, unsigned mode)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
test_round_trip(void **st)
{
	static struct arc a;
	struct agent_tarfs_walk *w;
	struct agent_tarfs_stats s;
	char err[512], p[1024], longdir[600];
	long n;
	int rc;

	(void)st;
	snprintf(p, sizeof(p), "%s/src", top);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/src/sub", top);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/src/empty", top);
	assert_int_equal(mkdir(p, 0755), 0);
	put("src/run.sh", "#!/bin/sh\necho hi\n", 0755);
	put("src/sub/secret", "s3cret", 0600);
	put("src/a file with spaces", "", 0644);
	snprintf(p, sizeof(p), "%s/src/sub/rel", top);
	assert_int_equal(symlink("../run.sh", p), 0);
	snprintf(p, sizeof(p), "%s/src/abs", top);
	assert_int_equal(symlink("/etc/hostname", p), 0);
	snprintf(p, sizeof(p), "%s/src/fifo", top);
	assert_int_equal(mkfifo(p, 0644), 0);
	/* a path longer than ustar's 100 bytes */
	memset(longdir, 'd', 150);
	longdir[150] = '\0';
	snprintf(p, sizeof(p), "%s/src/%s", top, longdir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "src/%s/deep", longdir);
	put(p, "deep", 0644);

	snprintf(p, sizeof(p), "%s/src", top);
	assert_int_equal(agent_tarfs_walk_open(&w, p, err, sizeof(err)), 0);
	a.n = 0;
	/* odd read sizes: headers and data cut anywhere */
	while ((n = agent_tarfs_walk_read(w, a.b + a.n, 333 < sizeof(a.b) - a.n ? 333 : 1, err,
					  sizeof(err))) > 0)
		a.n += (size_t)n;
	assert_int_equal(n, 0);
	agent_tarfs_walk_stats(w, &s);
	agent_tarfs_walk_free(w);
	assert_int_equal(s.skipped, 1);
	assert_int_equal(s.files, 4);
	assert_int_equal(s.links, 2);
	assert_int_equal(s.dirs, 3);
	assert_int_equal(a.n % 512, 0);

	rc = extract(&a, "dst", 1, err, sizeof(err), &s);
	if (rc != 0)
		fail_msg("extract: %s", err);
	assert_int_equal(s.entries, 10); /* the root too */
	snprintf(p, sizeof(p), "cd %s/src && find . ! -type p -printf '%%y %%m %%l %%P\\n' -type f -printf '%%s\\n' | sort"
		 " > ../a && cd ../dst && find . -printf '%%y %%m %%l %%P\\n' -type f -printf '%%s\\n' | sort > ../b &&"
		 " cmp ../a ../b && cmp ../src/sub/secret sub/secret", top);
	assert_int_equal(system(p), 0);
}

static void
test_walk_errors(void **st)
{
	struct agent_tarfs_walk *w;
	char err[512], p[512];

	(void)st;
	snprintf(p, sizeof(p), "%s/nope", top);
	assert_int_equal(agent_tarfs_walk_open(&w, p, err, sizeof(err)), -ENOENT);
	put("file", "x", 0644);
	snprintf(p, sizeof(p), "%s/file", top);
	assert_int_equal(agent_tarfs_walk_open(&w, p, err, sizeof(err)), -ENOTDIR);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_bad_types),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_good_decode),
		cmocka_unit_test(test_seeds),
		cmocka_unit_test_setup_teardown(test_hostile_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modes_masked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_walk_errors, setup, teardown),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

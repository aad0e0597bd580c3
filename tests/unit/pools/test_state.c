/* test_state.c: the state file codec (validation with JSON paths), its
 * atomic write and read, and the retrier with a fake clock. Bad inputs
 * first. Files live in a mkdtemp() directory under /tmp, removed at the
 * end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "state.h"

static char dir[64];

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/sl-state-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The number of entries in d whose name starts with '.' (temporary files),
 * "." and ".." aside. */
static int
dot_files(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	assert_non_null(dp);
	while ((e = readdir(dp)))
		if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dp);
	return n;
}

static const char good_text[] =
	"{\"format\": 1, \"journal_seq\": 42, \"written_ms\": 1700000000000, \"future\": [1],"
	" \"sandboxes\": ["
	"  {\"id\": \"sbx-a\", \"pool\": \"default\", \"state\": \"warm\", \"tier\": \"warm\","
	"   \"ref\": {\"pid\": 12}, \"lane\": \"egress\", \"address\": \"10.88.1.7\","
	"   \"ifname\": \"sl-a\", \"created_ms\": 1, \"expires_ms\": 0, \"ttl_s\": 0,"
	"   \"labels\": {}, \"env\": {\"HTTP_PROXY\": \"http://10.88.1.1:3128\"}},"
	"  {\"id\": \"sbx-B_9\", \"pool\": \"default\", \"state\": \"claimed\","
	"   \"tenant\": \"acme\", \"tier\": \"cold\", \"ref\": {}, \"lane\": \"none\","
	"   \"address\": null, \"ifname\": \"\", \"created_ms\": 5, \"expires_ms\": 60005,"
	"   \"ttl_s\": 60, \"labels\": {\"job\": \"ci\"}, \"env\": {},"
	"   \"layer\": {\"version\": \"v3\", \"credentials\": [\"github\"]}, \"new_key\": true},"
	"  {\"id\": \"sbx-c\", \"pool\": \"p2\", \"state\": \"claimed\", \"tenant\": null,"
	"   \"tier\": \"warm\", \"ref\": {}, \"lane\": \"egress\", \"address\": \"10.88.1.8\","
	"   \"ifname\": \"sl-c\", \"created_ms\": -5, \"expires_ms\": 9, \"ttl_s\": 4294967295,"
	"   \"labels\": {}, \"env\": {}, \"layer\": {}}"
	"]}";

static json_t *
good(void)
{
	json_error_t je;
	json_t *d = json_loads(good_text, JSON_REJECT_DUPLICATES, &je);

	if (!d)
		fail_msg("good_text: %d:%d: %s", je.line, je.column, je.text);
	return d;
}

/* One change to the good document and the error it must give. */
struct bad {
	int entry;                      /* -1: the top level; -2: replace it all */
	const char *key;
	const char *value;              /* JSON text; NULL: delete the key */
	const char *err;
};

static const struct bad bads[] = {
	{ -2, NULL, "[]", "(top): not an object" },
	{ -2, NULL, "null", "(top): not an object" },
	{ -1, "format", NULL, "format: missing" },
	{ -1, "format", "\"1\"", "format: not an integer" },
	{ -1, "format", "2", "format: 2 is not a version this daemon reads (1)" },
	{ -1, "journal_seq", "-1", "journal_seq: negative" },
	{ -1, "journal_seq", NULL, "journal_seq: missing" },
	{ -1, "written_ms", "1.5", "written_ms: not an integer" },
	{ -1, "sandboxes", "{}", "sandboxes: not an array" },
	{ -1, "sandboxes", NULL, "sandboxes: missing" },
	{ -1, "sandboxes", "[1]", "sandboxes[0]: not an object" },
	{ 0, "id", NULL, "sandboxes[0].id: missing" },
	{ 0, "id", "7", "sandboxes[0].id: not a string" },
	{ 1, "id", "\"bad id\"", "sandboxes[1].id: not an id: 1 to 48 of A-Z, a-z, 0-9, '-' and '_'" },
	{ 1, "id", "\"\"", "sandboxes[1].id: not an id: 1 to 48 of A-Z, a-z, 0-9, '-' and '_'" },
	{ 1, "id", "\"sbx-\\u0000x\"",
	  "sandboxes[1].id: not an id: 1 to 48 of A-Z, a-z, 0-9, '-' and '_'" },
	{ 1, "id", "\"sbx-0123456789012345678901234567890123456789abcde\"",
	  "sandboxes[1].id: not an id: 1 to 48 of A-Z, a-z, 0-9, '-' and '_'" },
	{ 2, "id", "\"sbx-a\"", "sandboxes[2].id: 'sbx-a' repeats sandboxes[0]" },
	{ 0, "pool", "\"\"", "sandboxes[0].pool: empty" },
	{ 0, "pool", "null", "sandboxes[0].pool: not a string" },
	{ 0, "state", "\"busy\"", "sandboxes[0].state: 'busy' is neither 'warm' nor 'claimed'" },
	{ 0, "tenant", "5", "sandboxes[0].tenant: not a string or null" },
	{ 1, "tenant", NULL, "sandboxes[1].tenant: missing" },
	{ 0, "tier", "\"hot\"", "sandboxes[0].tier: 'hot' is neither 'warm' nor 'cold'" },
	{ 0, "ref", "null", "sandboxes[0].ref: not an object" },
	{ 0, "ref", NULL, "sandboxes[0].ref: missing" },
	{ 0, "lane", "[]", "sandboxes[0].lane: not a string" },
	{ 0, "address", "\"10.0.0.256\"", "sandboxes[0].address: '10.0.0.256' is not an IPv4 address" },
	{ 0, "address", "\"::1\"", "sandboxes[0].address: '::1' is not an IPv4 address" },
	{ 0, "address", NULL, "sandboxes[0].address: missing" },
	{ 0, "ifname", "\"0123456789abcdef\"", "sandboxes[0].ifname: longer than 15 bytes" },
	{ 0, "created_ms", "\"1\"", "sandboxes[0].created_ms: not an integer" },
	{ 1, "expires_ms", "\"x\"", "sandboxes[1].expires_ms: not an integer" },
	{ 1, "expires_ms", "1e3", "sandboxes[1].expires_ms: not an integer" },
	{ 0, "ttl_s", "-1", "sandboxes[0].ttl_s: out of range (0 to 4294967295)" },
	{ 0, "ttl_s", "4294967296", "sandboxes[0].ttl_s: out of range (0 to 4294967295)" },
	{ 0, "labels", "{\"a\": 1}", "sandboxes[0].labels.a: not a string" },
	{ 0, "labels", NULL, "sandboxes[0].labels: missing" },
	{ 0, "env", "[]", "sandboxes[0].env: not an object" },
	{ 0, "env", "{\"A\": \"1\", \"B\": null}", "sandboxes[0].env.B: not a string" },
	{ 0, "layer", "[]", "sandboxes[0].layer: not an object or null" },
	{ 1, "layer", "null", "sandboxes[1].layer: not an object" },
	{ 1, "layer", NULL, "sandboxes[1].layer: missing" },
};

static void
test_validate_bad(void **state)
{
	char err[256], p[128];

	(void)state;
	assert_int_equal(pool_state_validate(NULL, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "(top): not an object");
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		json_t *doc = good(), *target, *v = NULL;

		if (b->value) {
			v = json_loads(b->value, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
			assert_non_null(v);
		}
		if (b->entry == -2) {
			json_decref(doc);
			doc = v;
		} else {
			target = b->entry < 0 ? doc
					      : json_array_get(json_object_get(doc, "sandboxes"),
							       (size_t)b->entry);
			if (v)
				json_object_set_new(target, b->key, v);
			else
				json_object_del(target, b->key);
		}
		err[0] = '\0';
		if (pool_state_validate(doc, err, sizeof(err)) != -EINVAL)
			fail_msg("case %zu (%s): accepted", i, b->err);
		if (strcmp(err, b->err))
			fail_msg("case %zu: '%s', want '%s'", i, err, b->err);
		/* nor is it written */
		assert_int_equal(pool_state_write(dir, "bad.json", doc, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, b->err));
		snprintf(p, sizeof(p), "%s/bad.json", dir);
		assert_int_equal(access(p, F_OK), -1);
		json_decref(doc);
	}
	assert_int_equal(dot_files(dir), 0);
}

/* Forward compatible: unknown keys, optional warm fields, edge values. */
static void
test_validate_good(void **state)
{
	char err[256] = "";
	json_t *doc = good(), *e;

	(void)state;
	assert_int_equal(pool_state_validate(doc, err, sizeof(err)), 0);
	/* a warm entry with a tenant key (null) and a null layer */
	e = json_array_get(json_object_get(doc, "sandboxes"), 0);
	json_object_set_new(e, "tenant", json_null());
	json_object_set_new(e, "layer", json_null());
	assert_int_equal(pool_state_validate(doc, err, sizeof(err)), 0);
	/* no sandboxes at all */
	json_object_set_new(doc, "sandboxes", json_array());
	json_object_set_new(doc, "journal_seq", json_integer(0));
	assert_int_equal(pool_state_validate(doc, err, sizeof(err)), 0);
	json_decref(doc);
}

static void
test_read_bad(void **state)
{
	static const char notstate[] = "{\"format\":1,\"journal_seq\":1,\"written_ms\":2,"
				       "\"sandboxes\":[{\"id\":\"x\"}]}";
	char err[256], p[128];
	int fd;

	(void)state;
	/* missing: NULL with an empty err */
	strcpy(err, "x");
	assert_null(pool_state_read(dir, "state.json", err, sizeof(err)));
	assert_string_equal(err, "");
	assert_null(pool_state_read("/nonexistent-sl", "state.json", err, sizeof(err)));
	assert_string_equal(err, "");
	/* not a plain name */
	assert_null(pool_state_read(dir, "../x", err, sizeof(err)));
	assert_non_null(strstr(err, "not a plain file name"));
	assert_null(pool_state_read(dir, "", err, sizeof(err)));
	assert_true(err[0]);
	/* not JSON, truncated, a repeated key */
	snprintf(p, sizeof(p), "%s/s.json", dir);
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_int_equal(write(fd, "{\"format\": 1,", 13), 13);
	close(fd);
	assert_null(pool_state_read(dir, "s.json", err, sizeof(err)));
	assert_non_null(strstr(err, p));
	assert_non_null(strstr(err, "line 1, column 13"));
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_int_equal(write(fd, "{\"format\": 1, \"format\": 1}", 26), 26);
	close(fd);
	assert_null(pool_state_read(dir, "s.json", err, sizeof(err)));
	assert_non_null(strstr(err, "duplicate"));
	/* valid JSON, not a state document: the path of the error */
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_int_equal(write(fd, notstate, strlen(notstate)), (ssize_t)strlen(notstate));
	close(fd);
	assert_null(pool_state_read(dir, "s.json", err, sizeof(err)));
	assert_non_null(strstr(err, "sandboxes[0].pool: missing"));
	/* too big (sparse) */
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_int_equal(ftruncate(fd, (off_t)POOL_STATE_MAX_BYTES + 1), 0);
	close(fd);
	assert_null(pool_state_read(dir, "s.json", err, sizeof(err)));
	assert_non_null(strstr(err, "more than"));
	/* a directory */
	assert_null(pool_state_read("/", "tmp", err, sizeof(err)));
	assert_non_null(strstr(err, "/tmp"));
	unlink(p);
}

static void
test_write_bad(void **state)
{
	char err[512], sub[128], p[128];
	json_t *doc = good();
	struct stat st;

	(void)state;
	/* a directory that does not exist: the step and the path */
	assert_int_equal(pool_state_write("/nonexistent-sl/d", "state.json", doc, err, sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "state /nonexistent-sl/d/state.json: open of "
				 "/nonexistent-sl/d/.state.json.tmp failed: No such file or directory");
	/* a bad name */
	assert_int_equal(pool_state_write(dir, "a/b", doc, err, sizeof(err)), -EINVAL);
	assert_int_equal(pool_state_write(dir, "..", doc, err, sizeof(err)), -EINVAL);
	/* the rename fails (a non-empty directory is in the way): no
	 * temporary file is left */
	snprintf(sub, sizeof(sub), "%s/busy", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(p, sizeof(p), "%s/busy/x", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_true(pool_state_write(dir, "busy", doc, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "rename of"));
	assert_int_equal(dot_files(dir), 0);
	assert_int_equal(stat(sub, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	rmdir(p);
	rmdir(sub);
	/* a read-only directory cannot take the temporary file; root is not
	 * stopped by permissions, so as root the write runs in a child under
	 * an unprivileged uid */
	{
		char ro[] = "/tmp/sl-state-ro.XXXXXX";
		int status, rc;
		pid_t kid;

		assert_non_null(mkdtemp(ro));
		assert_int_equal(chmod(ro, 0555), 0);
		kid = fork();
		assert_true(kid >= 0);
		if (kid == 0) {
			if (geteuid() == 0 &&
			    (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
			     setresuid(65534, 65534, 65534) < 0))
				_exit(100);
			rc = pool_state_write(ro, "s", doc, err, sizeof(err));
			_exit(rc == -EACCES && strstr(err, "Permission denied") ? 0 : 101);
		}
		assert_int_equal(waitpid(kid, &status, 0), kid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(dot_files(ro), 0);
		assert_int_equal(rmdir(ro), 0);
	}
	json_decref(doc);
}

static void
test_round_trip(void **state)
{
	char err[256] = "", p[128], text[8192];
	json_t *doc = good(), *back;
	struct stat st;
	ssize_t n;
	int fd;

	(void)state;
	assert_int_equal(pool_state_write(dir, "state.json", doc, err, sizeof(err)), 0);
	assert_int_equal(dot_files(dir), 0);
	snprintf(p, sizeof(p), "%s/state.json", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* compact, sorted keys, one final newline */
	fd = open(p, O_RDONLY);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	assert_true(n > 0);
	text[n] = '\0';
	assert_int_equal(strncmp(text, "{\"format\":1,\"future\":[1],\"journal_seq\":42,", 42), 0);
	assert_int_equal(text[n - 1], '\n');
	assert_true(strchr(text, '\n') == text + n - 1);
	assert_null(strstr(text, ": "));
	assert_null(strstr(text, ", "));
	back = pool_state_read(dir, "state.json", err, sizeof(err));
	assert_non_null(back);
	assert_true(json_equal(doc, back));
	json_decref(back);
	/* replaced by a newer one */
	json_object_set_new(doc, "journal_seq", json_integer(43));
	json_array_remove(json_object_get(doc, "sandboxes"), 0);
	assert_int_equal(pool_state_write(dir, "state.json", doc, err, sizeof(err)), 0);
	back = pool_state_read(dir, "state.json", err, sizeof(err));
	assert_non_null(back);
	assert_int_equal(json_integer_value(json_object_get(back, "journal_seq")), 43);
	assert_int_equal(json_array_size(json_object_get(back, "sandboxes")), 2);
	json_decref(back);
	/* a stale temporary file from a crash is replaced, then gone */
	snprintf(p, sizeof(p), "%s/.state.json.tmp", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	assert_int_equal(pool_state_write(dir, "state.json", doc, err, sizeof(err)), 0);
	assert_int_equal(dot_files(dir), 0);
	snprintf(p, sizeof(p), "%s/state.json", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	unlink(p);
	json_decref(doc);
}

/* ---- the retrier, with a fake clock ---- */

static void
test_saver_nothing_to_do(void **state)
{
	struct pool_saver s;
	uint64_t gen = 77;

	(void)state;
	pool_saver_init(&s, 500, 4000);
	assert_false(pool_saver_should_write(&s, 0, &gen));
	assert_int_equal(gen, 77);
	assert_int_equal(pool_saver_next_ms(&s, 0), UINT64_MAX);
	assert_true(pool_saver_clean(&s));
	/* a 0 minimum and a maximum below it are made sane */
	pool_saver_init(&s, 0, 0);
	assert_int_equal(s.backoff_min_ms, 1);
	assert_int_equal(s.backoff_max_ms, 1);
}

static void
test_saver_change_during_write(void **state)
{
	struct pool_saver s;
	uint64_t gen = 0;
	bool log_it = true;

	(void)state;
	pool_saver_init(&s, 500, 4000);
	pool_saver_changed(&s);
	assert_int_equal(pool_saver_next_ms(&s, 10), 0);
	assert_true(pool_saver_should_write(&s, 10, &gen));
	assert_int_equal(gen, 1);
	/* one write at a time */
	assert_false(pool_saver_should_write(&s, 10, &gen));
	assert_int_equal(pool_saver_next_ms(&s, 10), UINT64_MAX);
	/* changes while it runs */
	pool_saver_changed(&s);
	pool_saver_changed(&s);
	assert_false(pool_saver_should_write(&s, 11, &gen));
	pool_saver_done(&s, 1, 0, 20, &log_it);
	assert_false(log_it);
	assert_false(pool_saver_clean(&s));
	/* the newest state goes next, at once */
	assert_int_equal(pool_saver_next_ms(&s, 20), 0);
	assert_true(pool_saver_should_write(&s, 20, &gen));
	assert_int_equal(gen, 3);
	pool_saver_done(&s, gen, 0, 30, NULL);
	assert_true(pool_saver_clean(&s));
	assert_false(pool_saver_should_write(&s, 30, &gen));
	assert_int_equal(pool_saver_next_ms(&s, 30), UINT64_MAX);
	/* a late report of an older write does not go back */
	pool_saver_done(&s, 1, 0, 31, NULL);
	assert_true(pool_saver_clean(&s));
	assert_int_equal(s.written, 3);
}

static void
test_saver_backoff(void **state)
{
	static const uint64_t want[] = { 500, 1000, 2000, 4000, 4000, 4000 };
	struct pool_saver s;
	uint64_t gen = 0, now = 1000;
	bool log_it;
	int logs = 0;

	(void)state;
	pool_saver_init(&s, 500, 4000);
	pool_saver_changed(&s);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_true(pool_saver_should_write(&s, now, &gen));
		pool_saver_changed(&s);         /* changes keep coming */
		pool_saver_done(&s, gen, -EROFS, now, &log_it);
		logs += log_it;
		assert_int_equal(pool_saver_next_ms(&s, now), want[i]);
		assert_int_equal(pool_saver_next_ms(&s, now + 1), want[i] - 1);
		assert_false(pool_saver_should_write(&s, now + want[i] - 1, &gen));
		now += want[i];
		assert_int_equal(pool_saver_next_ms(&s, now), 0);
		assert_int_equal(pool_saver_next_ms(&s, now + 99999), 0);
	}
	/* logged once for the whole run */
	assert_int_equal(logs, 1);
	/* another error: logged again, the back-off goes on */
	assert_true(pool_saver_should_write(&s, now, &gen));
	pool_saver_done(&s, gen, -ENOSPC, now, &log_it);
	assert_true(log_it);
	assert_int_equal(pool_saver_next_ms(&s, now), 4000);
	now += 4000;
	assert_true(pool_saver_should_write(&s, now, &gen));
	pool_saver_done(&s, gen, -ENOSPC, now, &log_it);
	assert_false(log_it);
	/* success: the newest generation, logged as a recovery, back-off
	 * gone */
	now += 4000;
	assert_true(pool_saver_should_write(&s, now, &gen));
	assert_int_equal(gen, s.gen);
	pool_saver_done(&s, gen, 0, now, &log_it);
	assert_true(log_it);
	assert_true(pool_saver_clean(&s));
	pool_saver_changed(&s);
	assert_int_equal(pool_saver_next_ms(&s, now), 0);
	assert_true(pool_saver_should_write(&s, now, &gen));
	/* the next failure starts from the minimum and is logged */
	pool_saver_done(&s, gen, -EROFS, now, &log_it);
	assert_true(log_it);
	assert_int_equal(pool_saver_next_ms(&s, now), 500);
	/* a stop's last write skips the wait */
	pool_saver_retry_now(&s);
	assert_int_equal(pool_saver_next_ms(&s, now), 0);
	assert_true(pool_saver_should_write(&s, now, &gen));
}

/* A huge maximum: doubling never overflows. */
static void
test_saver_backoff_huge(void **state)
{
	struct pool_saver s;
	uint64_t gen, now = 0;

	(void)state;
	pool_saver_init(&s, UINT64_MAX / 4, UINT64_MAX - 1);
	pool_saver_changed(&s);
	for (int i = 0; i < 5; i++) {
		s.next_ms = 0;
		assert_true(pool_saver_should_write(&s, now, &gen));
		pool_saver_done(&s, gen, -EIO, now, NULL);
		assert_true(s.backoff_ms >= UINT64_MAX / 4 && s.backoff_ms <= UINT64_MAX - 1);
	}
	assert_int_equal(s.backoff_ms, UINT64_MAX - 1);
}

/* The manager's loop, simulated: a disk that fails for a while, changes
 * arriving at every tick; the state written at the end is the newest,
 * attempts follow the back-off, memory does not grow (there is none). */
static void
test_saver_simulated(void **state)
{
	struct pool_saver s;
	uint64_t gen, now = 0, failed = 0, file_gen = 0;
	bool log_it;
	int logs = 0;

	(void)state;
	pool_saver_init(&s, 500, 30000);
	for (int tick = 0; tick < 4000; tick++, now += 250) {
		bool disk_ok = now >= 600000;   /* 10 minutes of failure */

		if (tick % 3 == 0 && now < 700000)
			pool_saver_changed(&s);
		if (pool_saver_should_write(&s, now, &gen)) {
			failed += !disk_ok;
			if (disk_ok)
				file_gen = gen;
			pool_saver_done(&s, gen, disk_ok ? 0 : -EROFS, now, &log_it);
			logs += log_it;
		}
	}
	assert_true(pool_saver_clean(&s));
	assert_int_equal(file_gen, s.gen);
	assert_int_equal(logs, 2);      /* the failure, the recovery */
	/* 10 minutes at most 30 s apart: about 25 attempts, not 2400 */
	assert_true(failed < 60);
	assert_true(failed > 15);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validate_bad),
		cmocka_unit_test(test_read_bad),
		cmocka_unit_test(test_write_bad),
		cmocka_unit_test(test_saver_nothing_to_do),
		cmocka_unit_test(test_validate_good),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_saver_change_during_write),
		cmocka_unit_test(test_saver_backoff),
		cmocka_unit_test(test_saver_backoff_huge),
		cmocka_unit_test(test_saver_simulated),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

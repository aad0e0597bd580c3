/* test_journal.c: the journal (open, append, group commit, failing
 * writes), its reader (torn lines, garbage, gaps, order) and the usage
 * fold. Bad inputs first. Files live in a mkdtemp() directory under /tmp,
 * removed at the end. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
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

#include "journal.h"

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
	strcpy(dir, "/tmp/sl-journal-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *
at(const char *name)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static void
put_file(const char *path, const char *data, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static off_t
file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

/* The log callback: counts lines, keeps them all in one string. */
struct logs {
	int n;
	char all[8192];
};

static void
logcb(void *arg, int level, const char *msg)
{
	struct logs *l = arg;
	size_t used = strlen(l->all);

	(void)level;
	l->n++;
	snprintf(l->all + used, sizeof(l->all) - used, "%s\n", msg);
}

/* Collects what the reader delivers. */
struct seen {
	uint64_t seqs[4096];
	size_t n;
	bool seq_matches;               /* the "seq" member equals the argument */
};

static void
collect(void *arg, const json_t *ev, uint64_t seq)
{
	struct seen *s = arg;

	if ((uint64_t)json_integer_value(json_object_get(ev, "seq")) != seq)
		s->seq_matches = false;
	if (s->n < 4096)
		s->seqs[s->n++] = seq;
}

static json_t *
ev_new(const char *type, int a, int b)
{
	return json_pack("{s:s, s:i, s:i}", "event", type, "a", a, "b", b);
}

/* ---- bad inputs ---- */

static void
test_open_bad(void **state)
{
	char err[256] = "";
	struct pool_journal *j;

	(void)state;
	j = pool_journal_open("/nonexistent-dir-sl/journal", NULL, NULL, err, sizeof(err));
	assert_null(j);
	assert_non_null(strstr(err, "/nonexistent-dir-sl/journal"));
	assert_non_null(strstr(err, "No such file"));
	/* a directory is not a journal */
	err[0] = '\0';
	assert_null(pool_journal_open(dir, NULL, NULL, err, sizeof(err)));
	assert_true(err[0]);
}

static void
test_read_bad(void **state)
{
	struct pool_journal_stats st;
	struct seen s = { .n = 0 };
	char err[256] = "";

	(void)state;
	/* missing: zero events, no error */
	memset(&st, 0xff, sizeof(st));
	assert_int_equal(pool_journal_read(at("missing"), collect, &s, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 0);
	assert_int_equal(st.last_seq, 0);
	assert_int_equal(s.n, 0);
	/* a directory: a read error with the path */
	assert_true(pool_journal_read(dir, collect, &s, &st, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, dir));
	/* an empty file */
	put_file(at("empty"), "", 0);
	assert_int_equal(pool_journal_read(at("empty"), collect, &s, NULL, err, sizeof(err)), 0);
	assert_int_equal(s.n, 0);
}

static void
test_append_bad(void **state)
{
	struct pool_journal *j;
	char err[256];

	(void)state;
	j = pool_journal_open(at("bad-append"), NULL, NULL, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(pool_journal_append(j, NULL), 0);
	assert_int_equal(pool_journal_append(j, json_integer(3)), 0);
	assert_int_equal(pool_journal_append(j, json_pack("[s]", "claim")), 0);
	assert_int_equal(pool_journal_append(j, json_object()), 0);
	assert_int_equal(pool_journal_append(j, json_pack("{s:i}", "event", 1)), 0);
	assert_int_equal(pool_journal_append(j, json_pack("{s:s}", "claim", "x")), 0);
	assert_int_equal(pool_journal_append(NULL, ev_new("x", 1, 1)), 0);
	/* none used up a seq */
	assert_int_equal(pool_journal_last(j), 0);
	assert_int_equal(pool_journal_sync(j, 0, -1), 0);
	assert_int_equal(pool_journal_sync(j, 1, -1), -EINVAL);
	assert_int_equal(pool_journal_append(j, ev_new("x", 1, 1)), 1);
	assert_int_equal(pool_journal_sync(j, 2, -1), -EINVAL);
	assert_int_equal(pool_journal_sync(j, 1, -1), 0);
	pool_journal_close(j);
	pool_journal_close(NULL);
	assert_int_equal(file_size(at("bad-append")) > 0, 1);
}

/* A line longer than POOL_JOURNAL_LINE_MAX is never appended. */
static void
test_append_too_long(void **state)
{
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256], *big;

	(void)state;
	j = pool_journal_open(at("long"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	big = malloc(POOL_JOURNAL_LINE_MAX + 1);
	memset(big, 'x', POOL_JOURNAL_LINE_MAX);
	big[POOL_JOURNAL_LINE_MAX] = '\0';
	assert_int_equal(pool_journal_append(j, json_pack("{s:s, s:s}", "event", "x", "big", big)),
			 0);
	assert_non_null(strstr(l.all, "not recorded"));
	free(big);
	assert_int_equal(pool_journal_append(j, ev_new("x", 1, 1)), 1);
	pool_journal_close(j);
}

/* ---- the reader ---- */

static char *
line_of(uint64_t seq)
{
	char *s;

	assert_true(asprintf(&s, "{\"seq\":%llu,\"event\":\"x\"}\n", (unsigned long long)seq) > 0);
	return s;
}

/* Builds a file from pieces; NULL ends the list. */
static void
build(const char *path, ...)
{
	FILE *f = fopen(path, "w");
	const char *p;
	va_list ap;

	assert_non_null(f);
	va_start(ap, path);
	while ((p = va_arg(ap, const char *)))
		fputs(p, f);
	va_end(ap);
	assert_int_equal(fclose(f), 0);
}

static char *
long_line(size_t n, bool nl)
{
	char *s = malloc(n + 2);

	memset(s, 'g', n);
	s[0] = '{';
	s[n] = nl ? '\n' : '\0';
	s[n + 1] = '\0';
	return s;
}

static void
test_read_garbage_gaps_order(void **state)
{
	struct pool_journal_stats st;
	struct seen *s = calloc(1, sizeof(*s));
	char err[256] = "";
	char *l1 = line_of(1), *l2 = line_of(2), *l5 = line_of(5), *l6 = line_of(6);
	char *big = long_line(2u << 20, true);  /* 2 MiB: garbage */
	uint64_t want[] = { 1, 2, 5, 6 };

	(void)state;
	s->seq_matches = true;
	build(at("mixed"), l1, "not json\n", "[1,2]\n", "{\"event\":\"x\"}\n",
	      "{\"seq\":\"3\"}\n", "{\"seq\":0}\n", "{\"seq\":-4}\n", "{\"seq\":1.5}\n", "\n",
	      l2, l2, l1, l5, big, "{\"seq\":9,\"x\":1} trailing\n", l6,
	      "{\"seq\":7,\"event\":\"tor", (char *)NULL);
	assert_int_equal(pool_journal_read(at("mixed"), collect, s, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 4);
	assert_int_equal(s->n, 4);
	assert_memory_equal(s->seqs, want, sizeof(want));
	assert_true(s->seq_matches);
	assert_int_equal(st.garbage, 10);
	assert_int_equal(st.backwards, 2);   /* 2 repeated, then 1 */
	assert_int_equal(st.gaps, 1);
	assert_int_equal(st.missing, 2);     /* 3 and 4 */
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.torn_len, strlen("{\"seq\":7,\"event\":\"tor"));
	assert_int_equal(st.torn_offset, (uint64_t)file_size(at("mixed")) - st.torn_len);
	assert_int_equal(st.last_seq, 6);
	free(l1);
	free(l2);
	free(l5);
	free(l6);
	free(big);
	free(s);
}

/* The last line, garbage though ended by a newline, counts as torn; a
 * long last line without one too; a first seq above 1 is a gap. */
static void
test_read_torn_variants(void **state)
{
	struct pool_journal_stats st;
	char err[256];
	char *l3 = line_of(3), *big = long_line(3u << 20, false);

	(void)state;
	build(at("t1"), l3, "garbage\n", (char *)NULL);
	assert_int_equal(pool_journal_read(at("t1"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 1);
	assert_int_equal(st.garbage, 0);
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.torn_offset, strlen(l3));
	assert_int_equal(st.torn_len, strlen("garbage\n"));
	assert_int_equal(st.gaps, 1);
	assert_int_equal(st.missing, 2);

	build(at("t2"), l3, big, (char *)NULL);
	assert_int_equal(pool_journal_read(at("t2"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 1);
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.torn_offset, strlen(l3));
	assert_int_equal(st.torn_len, 3u << 20);

	/* exactly at the bound: whole; one above: garbage */
	free(big);
	big = long_line(POOL_JOURNAL_LINE_MAX, true);
	memcpy(big, "{\"seq\":4,\"p\":\"", 14);
	big[POOL_JOURNAL_LINE_MAX - 2] = '"';
	big[POOL_JOURNAL_LINE_MAX - 1] = '}';
	build(at("t3"), l3, big, l3, (char *)NULL);
	assert_int_equal(pool_journal_read(at("t3"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 2);
	assert_int_equal(st.last_seq, 4);
	assert_int_equal(st.backwards, 1);
	free(big);
	big = long_line(POOL_JOURNAL_LINE_MAX + 1, true);
	memcpy(big, "{\"seq\":4,\"p\":\"", 14);
	big[POOL_JOURNAL_LINE_MAX - 1] = '"';
	big[POOL_JOURNAL_LINE_MAX] = '}';
	big[POOL_JOURNAL_LINE_MAX + 1] = '\n';
	build(at("t4"), l3, big, l3, (char *)NULL);
	assert_int_equal(pool_journal_read(at("t4"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 1);
	assert_int_equal(st.garbage, 1);
	assert_int_equal(st.backwards, 1);
	free(big);
	free(l3);
}

/* ---- open ---- */

static void
test_open_cuts_torn_last_line(void **state)
{
	struct pool_journal_stats st;
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256], want[128];
	char *l1 = line_of(1), *l2 = line_of(2), *l3 = line_of(3);
	off_t whole;

	(void)state;
	build(at("torn"), l1, l2, l3, "{\"seq\":4,\"ev", (char *)NULL);
	whole = (off_t)(strlen(l1) + strlen(l2) + strlen(l3));
	j = pool_journal_open(at("torn"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(file_size(at("torn")), whole);
	snprintf(want, sizeof(want), "at offset %lld (12 bytes)", (long long)whole);
	assert_non_null(strstr(l.all, want));
	assert_non_null(strstr(l.all, "torn"));
	assert_int_equal(pool_journal_last(j), 3);
	assert_int_equal(pool_journal_durable(j), 3);
	assert_int_equal(pool_journal_append(j, ev_new("claim", 1, 2)), 4);
	assert_int_equal(pool_journal_sync(j, 4, -1), 0);
	pool_journal_close(j);
	assert_int_equal(pool_journal_read(at("torn"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 4);
	assert_int_equal(st.torn + st.garbage + st.gaps + st.backwards, 0);

	/* a garbage last line with its newline is cut too */
	build(at("torn2"), l1, l2, "{not json}\n", (char *)NULL);
	memset(&l, 0, sizeof(l));
	j = pool_journal_open(at("torn2"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(file_size(at("torn2")), (off_t)(strlen(l1) + strlen(l2)));
	assert_int_equal(l.n, 2);       /* the cut, and the debug summary */
	assert_int_equal(pool_journal_last(j), 2);
	pool_journal_close(j);
	free(l1);
	free(l2);
	free(l3);
}

/* Events and garbage lines as the reader reports them, in order. */
struct order {
	char text[256];
	uint64_t off[8];
	size_t nbad;
};

static void
order_ev(void *arg, const json_t *ev, uint64_t seq)
{
	struct order *o = arg;
	size_t n = strlen(o->text);

	(void)ev;
	snprintf(o->text + n, sizeof(o->text) - n, "e%llu ", (unsigned long long)seq);
}

static void
order_bad(void *arg, uint64_t off)
{
	struct order *o = arg;
	size_t n = strlen(o->text);

	snprintf(o->text + n, sizeof(o->text) - n, "bad ");
	if (o->nbad < 8)
		o->off[o->nbad++] = off;
}

static void
test_open_garbage_middle_kept(void **state)
{
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256];
	char *l1 = line_of(1), *l2 = line_of(2), *l7 = line_of(7);
	off_t before;

	(void)state;
	build(at("mid"), l1, "junk\n", l2, "[]\n", "{}\n", l7, l2, (char *)NULL);
	before = file_size(at("mid"));
	j = pool_journal_open(at("mid"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(file_size(at("mid")), before);
	assert_non_null(strstr(l.all, "DAMAGED: 3 unreadable lines in the middle of the file, "
				      "the first at offset"));
	assert_non_null(strstr(l.all, "1 events out of order skipped, 1 gaps (4 events missing)"));
	assert_null(strstr(l.all, "torn"));
	/* continues after the highest seq, not the last line's */
	assert_int_equal(pool_journal_last(j), 7);
	assert_int_equal(pool_journal_append(j, ev_new("x", 0, 0)), 8);
	pool_journal_close(j);
	/* the reader names each garbage line, in file order among the
	 * events: after seq 1, after seq 2 (twice) */
	{
		struct order o = { 0 };
		struct pool_journal_stats st;
		size_t o1 = strlen(l1), o2 = o1 + 5 + strlen(l2);

		assert_int_equal(pool_journal_read_ex(at("mid"), order_ev, order_bad, &o, &st, err,
						      sizeof(err)),
				 0);
		assert_string_equal(o.text, "e1 bad e2 bad bad e7 e8 ");
		assert_int_equal(o.off[0], o1);
		assert_int_equal(o.off[1], o2);
		assert_int_equal(o.off[2], o2 + 3);
		assert_int_equal(st.garbage_offset, o1);
	}
	free(l1);
	free(l2);
	free(l7);
}

/* ---- append, sync, reopen ---- */

static void
test_append_reopen(void **state)
{
	struct pool_journal_stats st;
	struct pool_journal *j;
	char err[256], *text;
	json_t *ev;
	FILE *f;
	size_t cap = 0;
	ssize_t n;
	int k = 0;

	(void)state;
	j = pool_journal_open(at("j1"), NULL, NULL, err, sizeof(err));
	assert_non_null(j);
	for (int i = 1; i <= 100; i++) {
		ev = ev_new(i % 2 ? "claim" : "release", i, -i);
		json_object_set_new(ev, "seq", json_integer(999));   /* replaced */
		json_object_set_new(ev, "note", json_string("line\nbreak \"q\""));
		assert_int_equal(pool_journal_append(j, ev), (uint64_t)i);
	}
	assert_int_equal(pool_journal_durable(j), 0);
	assert_int_equal(pool_journal_sync(j, 50, -1), 0);
	assert_int_equal(pool_journal_durable(j), 100);      /* one commit took all */
	assert_int_equal(pool_journal_commits(j), 1);
	assert_int_equal(pool_journal_sync(j, 100, 0), 0);
	assert_int_equal(pool_journal_commits(j), 1);
	pool_journal_close(j);

	j = pool_journal_open(at("j1"), NULL, NULL, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(pool_journal_last(j), 100);
	assert_int_equal(pool_journal_append(j, ev_new("reap", 0, 0)), 101);
	pool_journal_close(j);          /* the final sync */
	assert_int_equal(pool_journal_read(at("j1"), NULL, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, 101);
	assert_int_equal(st.garbage + st.torn + st.gaps + st.backwards, 0);

	/* every line: seq first, an RFC 3339 UTC time with milliseconds */
	f = fopen(at("j1"), "r");
	text = NULL;
	while ((n = getline(&text, &cap, f)) > 0) {
		json_t *o = json_loads(text, 0, NULL);
		const char *ts;
		int64_t ms;
		char want[64];

		k++;
		assert_non_null(o);
		assert_int_equal(strncmp(text, "{\"seq\":", 7), 0);
		assert_int_equal(json_integer_value(json_object_get(o, "seq")), k);
		ts = json_string_value(json_object_get(o, "ts"));
		ms = json_integer_value(json_object_get(o, "ts_ms"));
		assert_non_null(ts);
		assert_int_equal(strlen(ts), 24);
		assert_true(ts[10] == 'T' && ts[19] == '.' && ts[23] == 'Z');
		snprintf(want, sizeof(want), ".%03dZ", (int)(ms % 1000));
		assert_string_equal(ts + 19, want);
		assert_true(ms > 1600000000000LL);
		if (k <= 100) {
			assert_int_equal(json_integer_value(json_object_get(o, "a")), k);
			assert_string_equal(json_string_value(json_object_get(o, "note")),
					    "line\nbreak \"q\"");
		}
		json_decref(o);
	}
	free(text);
	fclose(f);
	assert_int_equal(k, 101);
}

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_ROUNDS 50
#define GC_FREE 200

struct gc {
	struct pool_journal *j;
	pthread_barrier_t *bar;
	int id;
	int errors;
};

static void *
gc_locked_step(void *arg)
{
	struct gc *g = arg;

	for (int r = 0; r < GC_ROUNDS; r++) {
		uint64_t seq;

		pthread_barrier_wait(g->bar);
		seq = pool_journal_append(g->j, ev_new("claim", g->id, r));
		pthread_barrier_wait(g->bar);
		if (!seq || pool_journal_sync(g->j, seq, -1) != 0 ||
		    pool_journal_durable(g->j) < seq)
			g->errors++;
	}
	return NULL;
}

static void *
gc_free_run(void *arg)
{
	struct gc *g = arg;

	for (int r = 0; r < GC_FREE; r++) {
		uint64_t seq = pool_journal_append(g->j, ev_new("release", g->id, r));

		if (!seq || pool_journal_sync(g->j, seq, 10000) != 0 ||
		    pool_journal_durable(g->j) < seq)
			g->errors++;
	}
	return NULL;
}

static bool gc_seen[GC_THREADS][GC_FREE][2];
static int gc_dups;

static void
gc_collect(void *arg, const json_t *ev, uint64_t seq)
{
	int a = (int)json_integer_value(json_object_get(ev, "a"));
	int b = (int)json_integer_value(json_object_get(ev, "b"));
	int kind = strcmp(json_string_value(json_object_get(ev, "event")), "claim") == 0;
	uint64_t *expect = arg;

	assert_int_equal(seq, *expect);
	(*expect)++;
	assert_true(a >= 0 && a < GC_THREADS && b >= 0 && b < GC_FREE);
	if (gc_seen[a][b][kind])
		gc_dups++;
	gc_seen[a][b][kind] = true;
}

static void
test_group_commit(void **state)
{
	struct pool_journal_stats st;
	struct pool_journal *j;
	pthread_barrier_t bar;
	pthread_t t[GC_THREADS];
	struct gc g[GC_THREADS];
	char err[256];
	uint64_t expect = 1, commits;

	(void)state;
	j = pool_journal_open(at("gc"), NULL, NULL, err, sizeof(err));
	assert_non_null(j);
	/* Lock-step rounds: every event of a round is pending before anyone
	 * syncs, so one fdatasync() serves the whole round. */
	pthread_barrier_init(&bar, NULL, GC_THREADS);
	for (int i = 0; i < GC_THREADS; i++) {
		g[i] = (struct gc){ .j = j, .bar = &bar, .id = i };
		pthread_create(&t[i], NULL, gc_locked_step, &g[i]);
	}
	for (int i = 0; i < GC_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(g[i].errors, 0);
	}
	pthread_barrier_destroy(&bar);
	assert_int_equal(pool_journal_commits(j), GC_ROUNDS);
	assert_int_equal(pool_journal_durable(j), GC_THREADS * GC_ROUNDS);
	/* Free running: correct whatever the interleaving, and fewer
	 * commits than events as soon as two threads overlap. */
	commits = pool_journal_commits(j);
	for (int i = 0; i < GC_THREADS; i++) {
		g[i] = (struct gc){ .j = j, .id = i };
		pthread_create(&t[i], NULL, gc_free_run, &g[i]);
	}
	for (int i = 0; i < GC_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(g[i].errors, 0);
	}
	commits = pool_journal_commits(j) - commits;
	print_message("free-running: %d events, %llu commits\n", GC_THREADS * GC_FREE,
		      (unsigned long long)commits);
	assert_true(commits <= GC_THREADS * GC_FREE);
	assert_int_equal(pool_journal_durable(j), GC_THREADS * (GC_ROUNDS + GC_FREE));
	pool_journal_close(j);

	memset(gc_seen, 0, sizeof(gc_seen));
	gc_dups = 0;
	assert_int_equal(pool_journal_read(at("gc"), gc_collect, &expect, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, GC_THREADS * (GC_ROUNDS + GC_FREE));
	assert_int_equal(st.garbage + st.torn + st.gaps + st.backwards, 0);
	assert_int_equal(gc_dups, 0);
	for (int a = 0; a < GC_THREADS; a++)
		for (int b = 0; b < GC_FREE; b++) {
			assert_true(gc_seen[a][b][0]);
			assert_true(gc_seen[a][b][1] == (b < GC_ROUNDS));
		}
}

/* ---- failing writes ---- */

static void
expect_file(const char *path, uint64_t n)
{
	struct pool_journal_stats st;
	struct seen *s = calloc(1, sizeof(*s));
	char err[256];

	s->seq_matches = true;
	assert_int_equal(pool_journal_read(path, collect, s, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, n);
	assert_int_equal(st.garbage + st.torn + st.gaps + st.backwards, 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(s->seqs[i], i + 1);
	assert_true(s->seq_matches);
	free(s);
}

/* The events of the file, exactly: seqs[0..n). */
static void
expect_seqs(const char *path, const uint64_t *seqs, uint64_t n)
{
	struct pool_journal_stats st;
	struct seen *s = calloc(1, sizeof(*s));
	char err[256];

	s->seq_matches = true;
	assert_int_equal(pool_journal_read(path, collect, s, &st, err, sizeof(err)), 0);
	assert_int_equal(st.events, n);
	assert_int_equal(st.garbage + st.torn + st.backwards, 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(s->seqs[i], seqs[i]);
	assert_true(s->seq_matches);
	free(s);
}

/* A fake file layer over the real calls: each call can be made to fail. */
static struct fake {
	int write_err;                  /* write() fails with it ... */
	size_t write_ok;                /* ... after this many more bytes went out */
	int fdatasync_err, ftruncate_err, open_err, rename_err;
	unsigned writes, fdatasyncs, ftruncates, opens, renames;
} fk;

static ssize_t
fk_write(int fd, const void *b, size_t n)
{
	fk.writes++;
	if (fk.write_err) {
		if (!fk.write_ok) {
			errno = fk.write_err;
			return -1;
		}
		if (n > fk.write_ok)
			n = fk.write_ok;
		fk.write_ok -= n;
	}
	return write(fd, b, n);
}

static int
fk_fdatasync(int fd)
{
	fk.fdatasyncs++;
	if (fk.fdatasync_err) {
		errno = fk.fdatasync_err;
		return -1;
	}
	return fdatasync(fd);
}

static int
fk_ftruncate(int fd, off_t len)
{
	fk.ftruncates++;
	if (fk.ftruncate_err) {
		errno = fk.ftruncate_err;
		return -1;
	}
	return ftruncate(fd, len);
}

static int
fk_open(const char *path, int flags, mode_t mode)
{
	fk.opens++;
	if (fk.open_err) {
		errno = fk.open_err;
		return -1;
	}
	return open(path, flags, mode);
}

static int
fk_rename(const char *from, const char *to)
{
	fk.renames++;
	if (fk.rename_err) {
		errno = fk.rename_err;
		return -1;
	}
	return rename(from, to);
}

static ssize_t
fk_pread(int fd, void *b, size_t n, off_t off)
{
	return pread(fd, b, n, off);
}

static const struct pool_journal_io fake_io = {
	.write = fk_write,
	.pread = fk_pread,
	.fsync = fsync,
	.fdatasync = fk_fdatasync,
	.ftruncate = fk_ftruncate,
	.open = fk_open,
	.rename = fk_rename,
};

static ino_t
inode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

/* A failed write drops its whole batch: every waiter gets the error, also
 * after a later commit succeeded; the half line it wrote is cut off; the
 * descriptor is kept (the cut was made durable). */
static void
test_write_failure_drops_batch(void **state)
{
	static const uint64_t want[] = { 9 };
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256];
	ino_t ino;

	(void)state;
	memset(&fk, 0, sizeof(fk));
	j = pool_journal_open(at("fail"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	pool_journal_set_io(j, &fake_io);
	ino = inode_of(at("fail"));
	memset(&l, 0, sizeof(l));       /* the summary of the scan */
	for (int i = 0; i < 5; i++)
		pool_journal_append(j, ev_new("claim", i, i));
	/* 30 bytes go out (half a line), then the disk fails */
	fk.write_err = EIO;
	fk.write_ok = 30;
	assert_int_equal(pool_journal_sync(j, 5, -1), -EIO);
	assert_int_equal(pool_journal_sync(j, 1, -1), -EIO);
	assert_int_equal(pool_journal_durable(j), 0);
	assert_int_equal(pool_journal_dropped(j), 5);
	assert_int_equal(file_size(at("fail")), 0);
	assert_int_equal(l.n, 1);
	assert_non_null(strstr(l.all, "write failed"));
	assert_non_null(strstr(l.all, "5 events of this commit were not recorded"));
	/* nothing goes out at all: dropped too, no more log */
	for (int i = 5; i < 8; i++)
		pool_journal_append(j, ev_new("claim", i, i));
	fk.write_err = ENOSPC;
	assert_int_equal(pool_journal_sync(j, 8, -1), -ENOSPC);
	assert_int_equal(file_size(at("fail")), 0);
	assert_int_equal(l.n, 1);
	/* the disk is back: only what comes now is recorded; the dropped
	 * seqs stay failed, and are never used again */
	fk.write_err = 0;
	assert_int_equal(pool_journal_append(j, ev_new("reap", 9, 9)), 9);
	assert_int_equal(pool_journal_sync(j, 9, -1), 0);
	assert_int_equal(pool_journal_durable(j), 9);
	assert_int_equal(pool_journal_sync(j, 2, -1), -EIO);
	assert_int_equal(pool_journal_sync(j, 7, -1), -ENOSPC);
	assert_int_equal(l.n, 2);
	assert_non_null(strstr(l.all, "written again"));
	assert_int_equal(inode_of(at("fail")), ino);    /* no rewrite was needed */
	pool_journal_close(j);
	expect_seqs(at("fail"), want, 1);
}

/* A failed fdatasync drops its batch, cuts its bytes, and the descriptor
 * is not trusted again: the next commit writes a new file (the durable
 * part, then its own events) and renames it over the journal. A later
 * success on the old descriptor never counts the failed bytes. */
static void
test_fdatasync_failure_rewrites(void **state)
{
	static const uint64_t want[] = { 1, 2, 3, 6, 7 };
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256];
	off_t size;
	ino_t ino;

	(void)state;
	memset(&fk, 0, sizeof(fk));
	j = pool_journal_open(at("sync"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	pool_journal_set_io(j, &fake_io);
	for (int i = 0; i < 3; i++)
		pool_journal_append(j, ev_new("claim", i, i));
	assert_int_equal(pool_journal_sync(j, 3, -1), 0);
	size = file_size(at("sync"));
	ino = inode_of(at("sync"));
	memset(&l, 0, sizeof(l));
	pool_journal_append(j, ev_new("claim", 4, 4));
	pool_journal_append(j, ev_new("claim", 5, 5));
	fk.fdatasync_err = EIO;
	assert_int_equal(pool_journal_sync(j, 5, -1), -EIO);
	assert_int_equal(pool_journal_sync(j, 4, -1), -EIO);
	assert_int_equal(pool_journal_durable(j), 3);
	assert_int_equal(file_size(at("sync")), size);  /* the best-effort cut */
	assert_int_equal(l.n, 1);
	assert_non_null(strstr(l.all, "fdatasync failed"));
	assert_non_null(strstr(l.all, "rewritten before the next commit"));
	/* a flush (the state file's writer) while the disk still fails:
	 * the rewrite fails, and so does the flush */
	assert_int_equal(pool_journal_flush(j, 5, -1), -EIO);
	assert_int_equal(inode_of(at("sync")), ino);
	/* the disk answers again: a flush of what is settled (the newest
	 * event was dropped) rewrites the file, with nothing new to write */
	fk.fdatasync_err = 0;
	fk.opens = fk.renames = 0;
	usleep(1100 * 1000);            /* past the rewrite's back-off */
	assert_int_equal(pool_journal_flush(j, 5, -1), 0);
	assert_int_equal(fk.opens, 2);  /* PATH.repair, and its directory */
	assert_int_equal(fk.renames, 1);
	assert_true(inode_of(at("sync")) != ino);
	assert_int_equal(pool_journal_flush(j, 5, -1), 0);
	assert_int_equal(fk.opens, 2);  /* trusted again: nothing more to do */
	assert_int_equal(pool_journal_append(j, ev_new("claim", 6, 6)), 6);
	assert_int_equal(pool_journal_sync(j, 6, -1), 0);
	assert_int_equal(access(at("sync.repair"), F_OK), -1);
	assert_int_equal(pool_journal_sync(j, 5, -1), -EIO);
	assert_non_null(strstr(l.all, "rewritten into a new file"));
	/* and it goes on in the new file */
	assert_int_equal(pool_journal_append(j, ev_new("claim", 7, 7)), 7);
	assert_int_equal(pool_journal_sync(j, 7, -1), 0);
	pool_journal_close(j);
	expect_seqs(at("sync"), want, 5);
}

/* The rewrite itself fails (the disk still fails): nothing is
 * acknowledged, no new attempt for a second (commits fail at once), then
 * one that works. Also: a failed cut after a failed write makes the
 * descriptor untrusted too. */
static void
test_rewrite_failure_backs_off(void **state)
{
	static const uint64_t want[] = { 1, 5 };
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256];
	unsigned opens;
	ino_t ino;

	(void)state;
	memset(&fk, 0, sizeof(fk));
	j = pool_journal_open(at("rw"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	pool_journal_set_io(j, &fake_io);
	pool_journal_append(j, ev_new("claim", 1, 1));
	assert_int_equal(pool_journal_sync(j, 1, -1), 0);
	ino = inode_of(at("rw"));
	/* a failed write whose cut fails too */
	fk.write_err = ENOSPC;
	fk.ftruncate_err = EIO;
	pool_journal_append(j, ev_new("claim", 2, 2));
	assert_int_equal(pool_journal_sync(j, 2, -1), -ENOSPC);
	fk.write_err = 0;
	fk.ftruncate_err = 0;
	/* the rewrite fails: its fdatasync */
	fk.fdatasync_err = EIO;
	fk.opens = 0;
	pool_journal_append(j, ev_new("claim", 3, 3));
	assert_int_equal(pool_journal_sync(j, 3, -1), -EIO);
	assert_int_equal(fk.opens, 1);
	assert_int_equal(access(at("rw.repair"), F_OK), -1);
	/* within the back-off: refused without an attempt */
	fk.fdatasync_err = 0;
	opens = fk.opens;
	pool_journal_append(j, ev_new("claim", 4, 4));
	assert_int_equal(pool_journal_sync(j, 4, -1), -EIO);
	assert_int_equal(fk.opens, opens);
	assert_int_equal(inode_of(at("rw")), ino);
	/* after it: rewritten, recorded */
	usleep(1100 * 1000);
	pool_journal_append(j, ev_new("claim", 5, 5));
	assert_int_equal(pool_journal_sync(j, 5, -1), 0);
	assert_true(inode_of(at("rw")) != ino);
	assert_int_equal(pool_journal_dropped(j), 3);
	pool_journal_close(j);
	expect_seqs(at("rw"), want, 2);
}

/* Beyond POOL_JOURNAL_PENDING_MAX waiting bytes, append refuses (seq 0),
 * logs once, and takes events again once the backlog is written. */
static void
test_pending_cap(void **state)
{
	struct logs l = { 0 };
	struct pool_journal *j;
	char err[256], *big;
	size_t per = POOL_JOURNAL_LINE_MAX - 200, k = 0;
	uint64_t seq;

	(void)state;
	j = pool_journal_open(at("cap"), logcb, &l, err, sizeof(err));
	assert_non_null(j);
	memset(&l, 0, sizeof(l));       /* the summary of the scan */
	big = malloc(per + 1);
	memset(big, 'p', per);
	big[per] = '\0';
	while ((seq = pool_journal_append(j, json_pack("{s:s, s:s}", "event", "x", "p", big))))
		assert_int_equal(seq, ++k);
	assert_int_equal(k, 64);        /* lines of about 1 MiB, 64 MiB */
	assert_int_equal(l.n, 1);
	assert_non_null(strstr(l.all, "not recorded"));
	/* refused again, logged no more */
	assert_int_equal(pool_journal_append(j, json_pack("{s:s, s:s}", "event", "x", "p", big)),
			 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(pool_journal_sync(j, k, -1), 0);
	assert_int_equal(pool_journal_append(j, ev_new("x", 1, 1)), k + 1);
	assert_int_equal(l.n, 2);
	pool_journal_close(j);
	free(big);
	expect_file(at("cap"), k + 1);
}

/* ---- usage ---- */

struct rows {
	char text[2048];
};

static void
row(void *arg, const char *tenant, const char *pool, double secs, uint64_t claims)
{
	struct rows *r = arg;
	size_t used = strlen(r->text);

	snprintf(r->text + used, sizeof(r->text) - used, "%s/%s=%.3f/%llu;", tenant, pool, secs,
		 (unsigned long long)claims);
}

static void
feed(struct pool_usage *u, const char *event, const char *claim, const char *tenant,
     const char *pool, int64_t ts)
{
	json_t *ev = json_pack("{s:s, s:s, s:I}", "event", event, "claim", claim, "ts_ms",
			       (json_int_t)ts);

	if (tenant)
		json_object_set_new(ev, "tenant", strcmp(tenant, "null") ? json_string(tenant)
									 : json_null());
	if (pool)
		json_object_set_new(ev, "pool", json_string(pool));
	pool_usage_event(u, ev);
	json_decref(ev);
}

static const char *
result(struct pool_usage *u, const char *tenant, int64_t since, int64_t now)
{
	static struct rows r;

	r.text[0] = '\0';
	pool_usage_result(u, tenant, since, now, row, &r);
	return r.text;
}

static void
test_usage_bad_events(void **state)
{
	struct pool_usage *u = pool_usage_new();
	json_t *ev;

	(void)state;
	pool_usage_event(u, NULL);
	ev = json_integer(1);
	pool_usage_event(u, ev);
	json_decref(ev);
	/* no ts_ms, a string ts_ms, no claim, no pool, a numeric tenant */
	ev = json_pack("{s:s, s:s, s:s}", "event", "claim", "claim", "a", "pool", "p");
	pool_usage_event(u, ev);
	json_decref(ev);
	ev = json_pack("{s:s, s:s, s:s, s:s}", "event", "claim", "claim", "a", "pool", "p",
		       "ts_ms", "5");
	pool_usage_event(u, ev);
	json_decref(ev);
	feed(u, "claim", "", NULL, "p", 1);     /* "" is an id like any other */
	ev = json_pack("{s:s, s:s, s:I}", "event", "claim", "pool", "p", "ts_ms", (json_int_t)1);
	pool_usage_event(u, ev);
	json_decref(ev);
	feed(u, "claim", "b", "acme", NULL, 1);
	ev = json_pack("{s:s, s:s, s:s, s:i, s:I}", "event", "claim", "claim", "c", "pool", "p",
		       "tenant", 7, "ts_ms", (json_int_t)1);
	pool_usage_event(u, ev);
	json_decref(ev);
	/* unknown events, ends without starts */
	feed(u, "boot", "d", "acme", "p", 1);
	feed(u, "drain", "d", "acme", "p", 1);
	feed(u, "release", "zz", NULL, NULL, 5);
	feed(u, "reap", "zz", NULL, NULL, 5);
	assert_string_equal(result(u, NULL, 0, 1001), "-/p=1.000/1;");
	/* a window that ends before it starts */
	assert_string_equal(result(u, NULL, 10, 5), "");
	/* an unknown tenant */
	assert_string_equal(result(u, "nobody", 0, 1001), "");
	pool_usage_result(NULL, NULL, 0, 1, row, NULL);
	pool_usage_event(NULL, NULL);
	pool_usage_free(u);
	pool_usage_free(NULL);
	u = pool_usage_new();
	assert_string_equal(result(u, NULL, 0, 1000), "");
	pool_usage_free(u);
}

static void
test_usage_intervals(void **state)
{
	struct pool_usage *u = pool_usage_new();

	(void)state;
	feed(u, "claim", "a", "acme", "p", 1000);
	feed(u, "claim", "b", "acme", "q", 2000);
	feed(u, "claim", "c", "null", "p", 3000);       /* the operator's */
	feed(u, "claim", "d", NULL, "p", 3500);         /* no tenant key: the operator's */
	feed(u, "claim", "e", "bob", "p", 4000);
	feed(u, "release", "c", NULL, NULL, 4000);
	feed(u, "claim", "a", "bob", "z", 5000);        /* a second start: ignored */
	feed(u, "reap", "d", NULL, NULL, 6500);
	feed(u, "adopt", "a", NULL, NULL, 9000);        /* still running */
	feed(u, "release", "a", NULL, NULL, 11000);
	feed(u, "release", "a", NULL, NULL, 15000);     /* ended already: ignored */
	feed(u, "gone", "e", NULL, NULL, 3000);         /* before its start: 0 s */
	feed(u, "adopt", "f", "acme", "q", 12000);      /* unseen: starts at the adopt */
	feed(u, "adopt", "g", "acme", NULL, 12000);     /* unseen, no pool: ignored */

	/* everything up to 20 s */
	assert_string_equal(result(u, NULL, 0, 20000),
			    "-/p=4.000/2;acme/p=10.000/1;acme/q=26.000/2;bob/p=0.000/1;");
	/* clipped at the start: c ended before, d and a overlap */
	assert_string_equal(result(u, NULL, 5000, 20000),
			    "-/p=1.500/1;acme/p=6.000/1;acme/q=23.000/2;");
	/* clipped at the end: open intervals end at now */
	assert_string_equal(result(u, NULL, 0, 8000),
			    "-/p=4.000/2;acme/p=7.000/1;acme/q=6.000/1;bob/p=0.000/1;");
	/* one tenant; the operator */
	assert_string_equal(result(u, "acme", 5000, 20000), "acme/p=6.000/1;acme/q=23.000/2;");
	assert_string_equal(result(u, POOL_USAGE_OPERATOR, 0, 20000), "-/p=4.000/2;");
	/* a claim that ended exactly when the window starts is not in it;
	 * one that starts exactly when it ends is (for 0 s) */
	assert_string_equal(result(u, "-", 4000, 6500), "-/p=2.500/1;");
	assert_string_equal(result(u, "acme", 0, 1000), "acme/p=0.000/1;");
	/* a window after everything ended but b and f */
	assert_string_equal(result(u, NULL, 30000, 31000), "acme/q=2.000/2;");
	pool_usage_free(u);
}

/* The fold over a real journal. */
static void
fold_ev(void *arg, const json_t *ev, uint64_t seq)
{
	(void)seq;
	pool_usage_event(arg, ev);
}

static void
test_usage_from_journal(void **state)
{
	struct pool_usage *u = pool_usage_new();
	struct pool_journal *j;
	struct rows r = { "" };
	char err[256];
	uint64_t seq = 0;

	(void)state;
	j = pool_journal_open(at("usage"), NULL, NULL, err, sizeof(err));
	assert_non_null(j);
	pool_journal_append(j, json_pack("{s:s, s:s, s:s, s:s}", "event", "claim", "claim", "x",
					 "pool", "p", "tenant", "acme"));
	pool_journal_append(j, json_pack("{s:s, s:s, s:s, s:n}", "event", "claim", "claim", "y",
					 "pool", "p", "tenant"));
	seq = pool_journal_append(j, json_pack("{s:s, s:s}", "event", "release", "claim", "x"));
	assert_int_equal(pool_journal_sync(j, seq, -1), 0);
	pool_journal_close(j);
	assert_int_equal(pool_journal_read(at("usage"), fold_ev, u, NULL, err, sizeof(err)), 0);
	pool_usage_result(u, NULL, 0, INT64_MAX / 2, row, &r);
	assert_non_null(strstr(r.text, "-/p="));
	assert_non_null(strstr(r.text, "acme/p=0.0"));
	pool_usage_free(u);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_bad),
		cmocka_unit_test(test_read_bad),
		cmocka_unit_test(test_append_bad),
		cmocka_unit_test(test_append_too_long),
		cmocka_unit_test(test_usage_bad_events),
		cmocka_unit_test(test_read_garbage_gaps_order),
		cmocka_unit_test(test_read_torn_variants),
		cmocka_unit_test(test_open_cuts_torn_last_line),
		cmocka_unit_test(test_open_garbage_middle_kept),
		cmocka_unit_test(test_append_reopen),
		cmocka_unit_test(test_group_commit),
		cmocka_unit_test(test_write_failure_drops_batch),
		cmocka_unit_test(test_fdatasync_failure_rewrites),
		cmocka_unit_test(test_rewrite_failure_backs_off),
		cmocka_unit_test(test_pending_cap),
		cmocka_unit_test(test_usage_intervals),
		cmocka_unit_test(test_usage_from_journal),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

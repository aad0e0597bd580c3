/* journal.c: the claim journal (group-committed appends), its reader and
 * the usage fold. See journal.h for the contracts. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"
#include "manager.h"

/* A growable byte buffer. */
struct jbuf {
	char *p;
	size_t len, cap;
};

static int
jbuf_reserve(struct jbuf *b, size_t add)
{
	size_t want, cap;
	char *p;

	if (add > SIZE_MAX - b->len)
		return -ENOMEM;
	want = b->len + add;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < want)
		cap = cap > SIZE_MAX / 2 ? want : cap * 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* The byte stream of events goes: file (lines up to `written`, the last
 * of them durable up to `durable`), then `flight` (a batch being written
 * by the leader, or the part of a failed batch still to write), then
 * `pend` (appended since). Every line ends in exactly one '\n' (JSON
 * escapes newlines inside strings), so counting the '\n' of the bytes a
 * write took tells which lines are whole in the file. */
struct pool_journal {
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* a commit finished */
	int fd;
	char *path;
	pool_journal_log_fn log;
	void *log_arg;

	uint64_t last;                  /* the highest seq handed out (atomic reads) */
	uint64_t written;               /* the highest seq whose line is whole in the file */
	uint64_t durable;               /* the highest seq fdatasync'd (atomic reads) */
	uint64_t commits;               /* fdatasync() calls (atomic reads) */
	int64_t last_ts_ms;             /* ts never goes back along seq */
	struct jbuf pend;
	struct jbuf flight;             /* touched by the leader alone while committing */
	bool committing;
	uint64_t commit_gen;            /* commits finished */
	int commit_err;                 /* the last finished commit's result */
	bool failing;                   /* inside a run of failed commits (logged) */
	bool refusing;                  /* inside a run of refused appends (logged) */
	int fail_err;                   /* test hook */
	size_t fail_partial;
};

#define JBUF_KEEP (1u << 20)            /* an idle buffer above this is freed */

static void __attribute__((format(printf, 3, 4)))
jlog(const struct pool_journal *j, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!j->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j->log(j->log_arg, level, msg);
}

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errsz)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

/* ---- scanning: shared by open and the reader ---- */

/* A bounded line reader over an fd: lines up to POOL_JOURNAL_LINE_MAX
 * bytes come back whole; longer ones are skipped and reported as too
 * long, with their length. */
struct lreader {
	int fd;
	char *buf;
	size_t cap, start, end;
	uint64_t base;                  /* the file offset of buf[0] */
	bool eof;
};

#define LR_CHUNK 65536u

static int
lr_fill(struct lreader *r)
{
	ssize_t n;

	for (;;) {
		n = read(r->fd, r->buf + r->end, r->cap - r->end);
		if (n >= 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	if (n == 0)
		r->eof = true;
	r->end += (size_t)n;
	return 0;
}

/* 1 with a line (*line, *len without the '\n'; *line NULL when too long),
 * its offset and whether a '\n' ended it; 0 at the end; -errno. */
static int
lr_next(struct lreader *r, const char **line, size_t *len, uint64_t *off, bool *nl)
{
	size_t scanned = 0, have;
	const char *p;
	int rc;

	for (;;) {
		have = r->end - r->start;
		p = memchr(r->buf + r->start + scanned, '\n', have - scanned);
		if (p) {
			*line = r->buf + r->start;
			*len = (size_t)(p - *line);
			*off = r->base + r->start;
			*nl = true;
			r->start += *len + 1;
			if (*len > POOL_JOURNAL_LINE_MAX)
				*line = NULL;   /* too long, though whole in the buffer */
			return 1;
		}
		scanned = have;
		if (have > POOL_JOURNAL_LINE_MAX)
			break;
		if (r->eof) {
			if (!have)
				return 0;
			*line = r->buf + r->start;
			*len = have;
			*off = r->base + r->start;
			*nl = false;
			r->start = r->end;
			return 1;
		}
		if (r->start) {
			memmove(r->buf, r->buf + r->start, have);
			r->base += r->start;
			r->start = 0;
			r->end = have;
		}
		if ((rc = lr_fill(r)) < 0)
			return rc;
	}
	/* Too long: drop what is buffered and read on to its end. */
	*line = NULL;
	*off = r->base + r->start;
	*len = have;
	for (;;) {
		r->base += r->end;
		r->start = r->end = 0;
		if (r->eof) {
			*nl = false;
			return 1;
		}
		if ((rc = lr_fill(r)) < 0)
			return rc;
		p = memchr(r->buf, '\n', r->end);
		if (p) {
			*len += (size_t)(p - r->buf);
			r->start = (size_t)(p - r->buf) + 1;
			*nl = true;
			return 1;
		}
		*len += r->end;
	}
}

typedef void (*scan_fn)(void *arg, const json_t *ev, uint64_t seq);

/* Scans fd from where it is, filling *st and calling fn (may be NULL) for
 * every event delivered. 0 or -errno. */
static int
scan_fd(int fd, scan_fn fn, void *arg, struct pool_journal_stats *st)
{
	struct lreader r = { .fd = fd };
	const char *line;
	size_t len;
	uint64_t off, bad_off = 0, bad_len = 0;
	bool nl, bad = false;
	int rc;

	memset(st, 0, sizeof(*st));
	r.cap = POOL_JOURNAL_LINE_MAX + LR_CHUNK + 1;
	r.buf = malloc(r.cap);
	if (!r.buf)
		return -ENOMEM;
	/* A garbage line is only known to be garbage (not a torn last line)
	 * once another line follows it. */
	while ((rc = lr_next(&r, &line, &len, &off, &nl)) > 0) {
		json_t *ev = NULL, *jseq;
		json_int_t seq = 0;

		if (bad) {
			st->garbage++;
			bad = false;
		}
		if (!nl) {
			st->torn = 1;
			st->torn_offset = off;
			st->torn_len = len;
			break;
		}
		if (line)
			ev = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
		jseq = json_object_get(ev, "seq");
		if (json_is_integer(jseq))
			seq = json_integer_value(jseq);
		if (!json_is_object(ev) || seq < 1) {
			json_decref(ev);
			bad = true;
			bad_off = off;
			bad_len = len + 1;
			continue;
		}
		if ((uint64_t)seq <= st->last_seq) {
			st->backwards++;
		} else {
			if ((uint64_t)seq > st->last_seq + 1) {
				st->gaps++;
				st->missing += (uint64_t)seq - st->last_seq - 1;
			}
			st->last_seq = (uint64_t)seq;
			st->events++;
			if (fn)
				fn(arg, ev, (uint64_t)seq);
		}
		json_decref(ev);
	}
	if (bad && rc == 0) {
		st->torn = 1;
		st->torn_offset = bad_off;
		st->torn_len = bad_len;
	}
	free(r.buf);
	return rc < 0 ? rc : 0;
}

int
pool_journal_read(const char *path,
		  void (*fn)(void *arg, const struct json_t *ev, uint64_t seq), void *arg,
		  struct pool_journal_stats *st, char *err, size_t errsz)
{
	struct pool_journal_stats mine;
	int fd, rc;

	if (!st)
		st = &mine;
	memset(st, 0, sizeof(*st));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		seterr(err, errsz, "journal %s: open: %s", path, strerror(-rc));
		return rc;
	}
	rc = scan_fd(fd, fn, arg, st);
	if (rc < 0)
		seterr(err, errsz, "journal %s: read: %s", path, strerror(-rc));
	close(fd);
	return rc;
}

/* ---- open and close ---- */

/* fsync()s the directory holding path, so that a new file's name lasts. */
static int
fsync_parent(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	size_t n;
	int fd, rc = 0;

	if (!slash) {
		strcpy(dir, ".");
	} else {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

struct pool_journal *
pool_journal_open(const char *path, pool_journal_log_fn log, void *log_arg, char *err,
		  size_t errsz)
{
	struct pool_journal *j = NULL;
	struct pool_journal_stats st;
	pthread_condattr_t ca;
	bool created = true;
	int fd, rc;

	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
	}
	if (fd < 0) {
		seterr(err, errsz, "journal %s: open: %s", path, strerror(errno));
		return NULL;
	}
	if (created && (rc = fsync_parent(path)) < 0) {
		seterr(err, errsz, "journal %s: fsync of its directory: %s", path, strerror(-rc));
		goto fail;
	}
	rc = scan_fd(fd, NULL, NULL, &st);
	if (rc < 0) {
		seterr(err, errsz, "journal %s: read: %s", path, strerror(-rc));
		goto fail;
	}
	if (st.torn) {
		if (ftruncate(fd, (off_t)st.torn_offset) < 0 || fdatasync(fd) < 0) {
			seterr(err, errsz, "journal %s: cutting a torn last line at offset %llu: %s",
			       path, (unsigned long long)st.torn_offset, strerror(errno));
			goto fail;
		}
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->path = strdup(path))) {
		seterr(err, errsz, "journal %s: out of memory", path);
		goto fail;
	}
	pthread_mutex_init(&j->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cv, &ca);
	pthread_condattr_destroy(&ca);
	j->fd = fd;
	j->log = log;
	j->log_arg = log_arg;
	j->last = j->written = j->durable = st.last_seq;
	if (st.torn)
		jlog(j, POOL_LOG_WARN,
		     "journal %s: cut off a torn last line at offset %llu (%llu bytes)", path,
		     (unsigned long long)st.torn_offset, (unsigned long long)st.torn_len);
	if (st.garbage)
		jlog(j, POOL_LOG_WARN,
		     "journal %s: %llu garbage lines skipped (left in place; readers skip them)",
		     path, (unsigned long long)st.garbage);
	if (st.backwards || st.gaps)
		jlog(j, POOL_LOG_WARN,
		     "journal %s: %llu events out of order skipped, %llu gaps (%llu events missing)",
		     path, (unsigned long long)st.backwards, (unsigned long long)st.gaps,
		     (unsigned long long)st.missing);
	jlog(j, POOL_LOG_DEBUG, "journal %s: %llu events, continuing after seq %llu", path,
	     (unsigned long long)st.events, (unsigned long long)st.last_seq);
	return j;
fail:
	if (j)
		free(j->path);
	free(j);
	close(fd);
	return NULL;
}

void
pool_journal_close(struct pool_journal *j)
{
	uint64_t last;
	int rc;

	if (!j)
		return;
	last = pool_journal_last(j);
	rc = pool_journal_sync(j, last, -1);
	if (rc < 0)
		jlog(j, POOL_LOG_ERR, "journal %s: closing: %llu events lost: %s", j->path,
		     (unsigned long long)(last - j->durable), strerror(-rc));
	close(j->fd);
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->mu);
	free(j->pend.p);
	free(j->flight.p);
	free(j->path);
	free(j);
}

uint64_t
pool_journal_durable(const struct pool_journal *j)
{
	return __atomic_load_n(&j->durable, __ATOMIC_ACQUIRE);
}

uint64_t
pool_journal_last(const struct pool_journal *j)
{
	return __atomic_load_n(&j->last, __ATOMIC_ACQUIRE);
}

uint64_t
pool_journal_commits(const struct pool_journal *j)
{
	return __atomic_load_n(&j->commits, __ATOMIC_RELAXED);
}

void
pool_journal_set_fail(struct pool_journal *j, int err, size_t partial)
{
	pthread_mutex_lock(&j->mu);
	j->fail_err = err < 0 ? -err : err;
	j->fail_partial = partial;
	pthread_mutex_unlock(&j->mu);
}

/* ---- append ---- */

uint64_t
pool_journal_append(struct pool_journal *j, struct json_t *ev)
{
	char *body = NULL, head[128], ts[40];
	struct timespec now;
	struct tm tm;
	size_t blen, hlen, need;
	uint64_t seq = 0;
	int64_t ms;
	time_t secs;

	if (!j || !json_is_object(ev) || !json_is_string(json_object_get(ev, "event")))
		goto out;
	json_object_del(ev, "seq");
	json_object_del(ev, "ts");
	json_object_del(ev, "ts_ms");
	/* Serialised outside the mutex; the seq and time are spliced in
	 * front under it, so that both follow the order of the file. */
	body = json_dumps(ev, JSON_COMPACT);
	if (!body || body[0] != '{' || body[1] == '}')
		goto out;
	blen = strlen(body + 1);

	pthread_mutex_lock(&j->mu);
	clock_gettime(CLOCK_REALTIME, &now);
	ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	if (ms < j->last_ts_ms)
		ms = j->last_ts_ms;     /* the clock went back: hold still */
	secs = (time_t)(ms / 1000);
	gmtime_r(&secs, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	hlen = (size_t)snprintf(head, sizeof(head), "{\"seq\":%llu,\"ts\":\"%s.%03dZ\",\"ts_ms\":%lld,",
				(unsigned long long)(j->last + 1), ts, (int)(ms % 1000),
				(long long)ms);
	need = hlen + blen + 1;
	if (need > POOL_JOURNAL_LINE_MAX) {
		pthread_mutex_unlock(&j->mu);
		jlog(j, POOL_LOG_ERR, "journal %s: a '%s' event of %zu bytes not recorded: "
		     "longer than %u bytes", j->path,
		     json_string_value(json_object_get(ev, "event")), need,
		     POOL_JOURNAL_LINE_MAX);
		goto out;
	}
	if (j->pend.len + j->flight.len + need > POOL_JOURNAL_PENDING_MAX ||
	    jbuf_reserve(&j->pend, need) < 0) {
		if (!j->refusing)
			jlog(j, POOL_LOG_ERR,
			     "journal %s: %zu bytes wait to be written: events are not recorded "
			     "until the disk takes them (see the earlier write error)",
			     j->path, j->pend.len + j->flight.len);
		j->refusing = true;
		pthread_mutex_unlock(&j->mu);
		goto out;
	}
	if (j->refusing) {
		jlog(j, POOL_LOG_WARN, "journal %s: recording events again", j->path);
		j->refusing = false;
	}
	memcpy(j->pend.p + j->pend.len, head, hlen);
	memcpy(j->pend.p + j->pend.len + hlen, body + 1, blen);
	j->pend.p[j->pend.len + hlen + blen] = '\n';
	j->pend.len += need;
	j->last_ts_ms = ms;
	seq = j->last + 1;
	__atomic_store_n(&j->last, seq, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&j->mu);
out:
	free(body);
	json_decref(ev);
	return seq;
}

/* ---- commit ---- */

/* Writes buf[*off, limit) (short writes and EINTR handled). */
static int
write_all(int fd, const char *buf, size_t limit, size_t *off)
{
	ssize_t n;

	while (*off < limit) {
		n = write(fd, buf + *off, limit - *off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		*off += (size_t)n;
	}
	return 0;
}

static size_t
count_lines(const char *p, size_t n)
{
	size_t c = 0;
	const char *e = p + n, *q;

	while (p < e && (q = memchr(p, '\n', (size_t)(e - p)))) {
		c++;
		p = q + 1;
	}
	return c;
}

/* One commit, led by the caller: called and returns with j->mu held, but
 * does its I/O without it. Writes the leftover of a failed batch, then
 * everything pending, and fdatasync()s. 0 or -errno. */
static int
commit(struct pool_journal *j)
{
	struct jbuf tmp;
	size_t off = 0, limit;
	int rc = 0, ferr;
	bool synced = false;

	if (!j->flight.len) {
		tmp = j->flight;
		j->flight = j->pend;
		j->pend = tmp;
	} else if (j->pend.len && jbuf_reserve(&j->flight, j->pend.len) == 0) {
		/* Without memory for that, the leftover goes alone this time;
		 * the caller's loop comes back for the rest. */
		memcpy(j->flight.p + j->flight.len, j->pend.p, j->pend.len);
		j->flight.len += j->pend.len;
		j->pend.len = 0;
	}
	ferr = j->fail_err;
	limit = j->flight.len;
	if (ferr && j->fail_partial != SIZE_MAX && j->fail_partial < limit)
		limit = j->fail_partial;
	j->committing = true;
	pthread_mutex_unlock(&j->mu);

	rc = write_all(j->fd, j->flight.p, limit, &off);
	if (!rc && off < j->flight.len)
		rc = -ferr;             /* the test hook's failing write */
	if (!rc) {
		/* Note: after a failed fdatasync() Linux may have dropped the
		 * dirty pages, so a later successful one does not prove those
		 * bytes reached the disk; rewriting them would duplicate lines
		 * when they did. We keep the file free of duplicates. */
		synced = true;
		if (ferr && j->fail_partial == SIZE_MAX)
			rc = -ferr;
		else if (fdatasync(j->fd) < 0)
			rc = -errno;
	}

	pthread_mutex_lock(&j->mu);
	if (synced)
		__atomic_add_fetch(&j->commits, 1, __ATOMIC_RELAXED);
	j->written += count_lines(j->flight.p, off);
	/* What was not written stays first in line, for the next commit. */
	memmove(j->flight.p, j->flight.p + off, j->flight.len - off);
	j->flight.len -= off;
	if (!rc)
		__atomic_store_n(&j->durable, j->written, __ATOMIC_RELEASE);
	if (!j->flight.len && j->flight.cap > JBUF_KEEP) {
		free(j->flight.p);
		j->flight = (struct jbuf){ 0 };
	}
	if (rc && !j->failing) {
		j->failing = true;
		jlog(j, POOL_LOG_ERR,
		     "journal %s: %s failed: %s; %zu bytes kept to write again (check the disk "
		     "holding the data directory)",
		     j->path, synced ? "fdatasync" : "write", strerror(-rc),
		     j->flight.len + j->pend.len);
	} else if (!rc && j->failing) {
		j->failing = false;
		jlog(j, POOL_LOG_WARN, "journal %s: written again, durable up to seq %llu",
		     j->path, (unsigned long long)j->durable);
	}
	j->committing = false;
	j->commit_err = rc;
	j->commit_gen++;
	pthread_cond_broadcast(&j->cv);
	return rc;
}

int
pool_journal_sync(struct pool_journal *j, uint64_t seq, int timeout_ms)
{
	struct timespec dl;
	uint64_t gen;
	int rc = 0, w;

	if (!seq)
		return 0;
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&j->mu);
	if (seq > j->last) {
		rc = -EINVAL;
		goto out;
	}
	while (j->durable < seq) {
		if (!j->committing) {
			if ((rc = commit(j)) < 0)
				break;
			continue;
		}
		/* A follower: wait for the commit under way. */
		gen = j->commit_gen;
		while (j->commit_gen == gen) {
			if (timeout_ms < 0) {
				pthread_cond_wait(&j->cv, &j->mu);
				continue;
			}
			w = pthread_cond_timedwait(&j->cv, &j->mu, &dl);
			if (w == ETIMEDOUT && j->commit_gen == gen) {
				rc = -ETIMEDOUT;
				goto out;
			}
		}
		if (j->durable < seq && j->commit_err) {
			rc = j->commit_err;
			break;
		}
	}
out:
	pthread_mutex_unlock(&j->mu);
	return rc;
}

/* ---- usage ---- */

/* An open-addressing map from owned strings to indices. */
struct smap_slot {
	char *key;
	uint32_t val;
};

struct smap {
	struct smap_slot *s;
	size_t cap, n;                  /* cap: a power of two, or 0 */
};

static uint64_t
str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static struct smap_slot *
smap_slot(const struct smap *m, const char *key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = str_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (!m->s[i].key || strcmp(m->s[i].key, key) == 0)
			return &m->s[i];
}

static bool
smap_get(const struct smap *m, const char *key, uint32_t *val)
{
	struct smap_slot *s = smap_slot(m, key);

	if (!s || !s->key)
		return false;
	*val = s->val;
	return true;
}

/* Adds key (not present; a copy is taken): its stored copy, or NULL. */
static const char *
smap_add(struct smap *m, const char *key, uint32_t val)
{
	struct smap_slot *s;

	if ((m->n + 1) * 10 > m->cap * 7) {
		struct smap bigger = { .cap = m->cap ? m->cap * 2 : 64 };

		bigger.s = calloc(bigger.cap, sizeof(*bigger.s));
		if (!bigger.s)
			return NULL;
		for (size_t i = 0; i < m->cap; i++)
			if (m->s[i].key)
				*smap_slot(&bigger, m->s[i].key) = m->s[i];
		bigger.n = m->n;
		free(m->s);
		*m = bigger;
	}
	s = smap_slot(m, key);
	if (!(s->key = strdup(key)))
		return NULL;
	s->val = val;
	m->n++;
	return s->key;
}

static void
smap_free(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->s[i].key);
	free(m->s);
}

#define IV_OPEN INT64_MAX

struct usage_iv {
	uint32_t tenant, pool;          /* indices in names */
	int64_t start, end;             /* end IV_OPEN: running */
};

struct pool_usage {
	struct smap ids;                /* claim id -> index in iv */
	struct usage_iv *iv;
	size_t niv, civ;
	struct smap names;              /* tenant or pool name -> index in name */
	const char **name;              /* borrowed from names */
	size_t nname, cname;
};

struct pool_usage *
pool_usage_new(void)
{
	return calloc(1, sizeof(struct pool_usage));
}

void
pool_usage_free(struct pool_usage *u)
{
	if (!u)
		return;
	smap_free(&u->ids);
	smap_free(&u->names);
	free(u->iv);
	free(u->name);
	free(u);
}

static bool
intern(struct pool_usage *u, const char *s, uint32_t *idx)
{
	const char *k;

	if (smap_get(&u->names, s, idx))
		return true;
	if (u->nname == u->cname) {
		size_t c = u->cname ? u->cname * 2 : 16;
		const char **p = realloc(u->name, c * sizeof(*p));

		if (!p)
			return false;
		u->name = p;
		u->cname = c;
	}
	if (!(k = smap_add(&u->names, s, (uint32_t)u->nname)))
		return false;
	u->name[u->nname] = k;
	*idx = (uint32_t)u->nname++;
	return true;
}

static void
usage_start(struct pool_usage *u, const json_t *ev, const char *id, int64_t ts)
{
	const json_t *jt = json_object_get(ev, "tenant");
	const char *pool = json_string_value(json_object_get(ev, "pool"));
	const char *tenant = json_is_string(jt) ? json_string_value(jt) : POOL_USAGE_OPERATOR;
	struct usage_iv *v;
	uint32_t t, p;

	if (!pool || (jt && !json_is_string(jt) && !json_is_null(jt)))
		return;
	if (!intern(u, tenant, &t) || !intern(u, pool, &p))
		return;
	if (u->niv == u->civ) {
		size_t c = u->civ ? u->civ * 2 : 64;

		if (c > UINT32_MAX || !(v = realloc(u->iv, c * sizeof(*v))))
			return;
		u->iv = v;
		u->civ = c;
	}
	if (!smap_add(&u->ids, id, (uint32_t)u->niv))
		return;
	u->iv[u->niv++] = (struct usage_iv){ .tenant = t, .pool = p, .start = ts, .end = IV_OPEN };
}

void
pool_usage_event(struct pool_usage *u, const struct json_t *ev)
{
	const char *what = json_string_value(json_object_get(ev, "event"));
	const char *id = json_string_value(json_object_get(ev, "claim"));
	const json_t *jts = json_object_get(ev, "ts_ms");
	struct usage_iv *v;
	uint32_t i;
	int64_t ts;

	if (!u || !what || !id || !json_is_integer(jts))
		return;
	ts = json_integer_value(jts);
	/* An adopt names a claim only when it says so: a warm sandbox
	 * re-adopted at a restart is nobody's claim. */
	if (strcmp(what, "adopt") == 0) {
		const char *st = json_string_value(json_object_get(ev, "state"));

		if (st && strcmp(st, "claimed") != 0)
			return;
	}
	if (strcmp(what, "claim") == 0 || strcmp(what, "adopt") == 0) {
		if (!smap_get(&u->ids, id, &i))
			usage_start(u, ev, id, ts);
		return;
	}
	if (strcmp(what, "release") && strcmp(what, "reap") && strcmp(what, "gone"))
		return;
	if (!smap_get(&u->ids, id, &i))
		return;
	v = &u->iv[i];
	if (v->end == IV_OPEN)
		v->end = ts < v->start ? v->start : ts;
}

struct usage_part {
	uint32_t tenant, pool;
	int64_t ms;
};

static int
part_cmp(const void *a, const void *b, void *arg)
{
	const struct usage_part *x = a, *y = b;
	const char *const *name = arg;
	int c = strcmp(name[x->tenant], name[y->tenant]);

	return c ? c : strcmp(name[x->pool], name[y->pool]);
}

void
pool_usage_result(struct pool_usage *u, const char *tenant, int64_t since_ms, int64_t now_ms,
		  void (*cb)(void *arg, const char *tenant, const char *pool,
			     double claim_seconds, uint64_t claims),
		  void *arg)
{
	struct usage_part *part;
	uint32_t only = 0;
	size_t n = 0;

	if (!u || !u->niv || now_ms < since_ms)
		return;
	if (tenant && !smap_get(&u->names, tenant, &only))
		return;
	part = malloc(u->niv * sizeof(*part));
	if (!part)
		return;
	for (size_t i = 0; i < u->niv; i++) {
		const struct usage_iv *v = &u->iv[i];
		int64_t s = v->start, e = v->end < now_ms ? v->end : now_ms;

		if (tenant && v->tenant != only)
			continue;
		/* Started in the window, or running when it began. */
		if (!(s >= since_ms && s <= now_ms) && !(s < since_ms && e > since_ms))
			continue;
		if (s < since_ms)
			s = since_ms;
		part[n++] = (struct usage_part){ v->tenant, v->pool, e > s ? e - s : 0 };
	}
	qsort_r(part, n, sizeof(*part), part_cmp, u->name);
	for (size_t i = 0; i < n;) {
		int64_t ms = 0;
		size_t k = i;

		while (k < n && part[k].tenant == part[i].tenant && part[k].pool == part[i].pool)
			ms += part[k++].ms;
		cb(arg, u->name[part[i].tenant], u->name[part[i].pool], (double)ms / 1000.0,
		   (uint64_t)(k - i));
		i = k;
	}
	free(part);
}

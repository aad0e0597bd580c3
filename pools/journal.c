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

/* The byte stream of events goes: the file (durable up to `durable`, its
 * first `durable_off` bytes), then `flight` (the batch a leader is
 * committing), then `pend` (appended since). Every line ends in exactly
 * one '\n' (JSON escapes newlines inside strings).
 *
 * A batch is all or nothing: when its write or fdatasync() fails, its
 * events are dropped (their seqs recorded in `drop`, so that every waiter
 * learns it) and the bytes it may have left are cut off the file. After a
 * failed fdatasync() the descriptor is not trusted again (Linux may have
 * dropped the dirty pages and reports the error only once, so a later
 * success would prove nothing): the journal is `broken` until a commit
 * rewrites the durable part into a new file and renames it over the old
 * one. The caller of a dropped event was never told it was recorded. */
#define JDROP_KEEP 64                   /* dropped seq ranges remembered */
#define JREPAIR_BACKOFF_MS 1000         /* between attempts to rewrite the file */

struct jdrop {
	uint64_t lo, hi;
	int err;
};

struct pool_journal {
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* a commit finished */
	int fd;
	char *path;
	pool_journal_log_fn log;
	void *log_arg;
	struct pool_journal_io io;

	uint64_t last;                  /* the highest seq handed out (atomic reads) */
	uint64_t durable;               /* the highest seq fdatasync'd (atomic reads) */
	uint64_t durable_off;           /* the file's length up to that line */
	uint64_t settled;               /* the highest seq durable or dropped */
	uint64_t commits;               /* fdatasync() calls that succeeded (atomic reads) */
	uint64_t dropped;               /* events dropped by failed commits (atomic reads) */
	int64_t last_ts_ms;             /* ts never goes back along seq */
	struct jbuf pend;
	struct jbuf flight;             /* touched by the leader alone while committing */
	bool committing;
	uint64_t commit_gen;            /* commits finished */
	bool failing;                   /* inside a run of failed commits (logged) */
	bool refusing;                  /* inside a run of refused appends (logged) */
	bool broken;                    /* fd not trusted: rewrite the file first */
	int64_t repair_after_ms;        /* monotonic: no rewrite attempt before */
	struct jdrop drop[JDROP_KEEP];  /* a ring of the last dropped ranges */
	unsigned ndrop;                 /* ranges ever dropped */
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

/* ---- the file layer ---- */

static ssize_t
sys_write(int fd, const void *buf, size_t n)
{
	return write(fd, buf, n);
}

static ssize_t
sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return pread(fd, buf, n, off);
}

static int
sys_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

static const struct pool_journal_io sys_io = {
	.write = sys_write,
	.pread = sys_pread,
	.fsync = fsync,
	.fdatasync = fdatasync,
	.ftruncate = ftruncate,
	.open = sys_open,
	.rename = rename,
};

typedef void (*scan_fn)(void *arg, const json_t *ev, uint64_t seq);

/* Scans fd from where it is, filling *st and calling fn (may be NULL) for
 * every event delivered and bad (may be NULL) for every garbage line. 0 or
 * -errno. */
static int
scan_fd(int fd, scan_fn fn, pool_journal_bad_fn bad_fn, void *arg, struct pool_journal_stats *st)
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
			if (!st->garbage++)
				st->garbage_offset = bad_off;
			if (bad_fn)
				bad_fn(arg, bad_off);
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
	return pool_journal_read_ex(path, fn, NULL, arg, st, err, errsz);
}

int
pool_journal_read_ex(const char *path,
		     void (*fn)(void *arg, const struct json_t *ev, uint64_t seq),
		     pool_journal_bad_fn bad, void *arg, struct pool_journal_stats *st, char *err,
		     size_t errsz)
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
	rc = scan_fd(fd, fn, bad, arg, st);
	if (rc < 0)
		seterr(err, errsz, "journal %s: read: %s", path, strerror(-rc));
	close(fd);
	return rc;
}

/* ---- open and close ---- */

/* fsync()s the directory holding path, so that a new file's name lasts. */
static int
fsync_parent(const struct pool_journal_io *io, const char *path)
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
	fd = io->open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (io->fsync(fd) < 0)
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
	struct stat sb;
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
	if (created && (rc = fsync_parent(&sys_io, path)) < 0) {
		seterr(err, errsz, "journal %s: fsync of its directory: %s", path, strerror(-rc));
		goto fail;
	}
	rc = scan_fd(fd, NULL, NULL, NULL, &st);
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
	if (fstat(fd, &sb) < 0) {
		seterr(err, errsz, "journal %s: stat: %s", path, strerror(errno));
		goto fail;
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
	j->io = sys_io;
	j->last = j->durable = j->settled = st.last_seq;
	j->durable_off = (uint64_t)sb.st_size;
	if (st.torn)
		jlog(j, POOL_LOG_WARN,
		     "journal %s: cut off a torn last line at offset %llu (%llu bytes)", path,
		     (unsigned long long)st.torn_offset, (unsigned long long)st.torn_len);
	if (st.garbage)
		jlog(j, POOL_LOG_ERR,
		     "journal %s: DAMAGED: %llu unreadable lines in the middle of the file, the "
		     "first at offset %llu (left in place; readers skip them; see "
		     "docs/operations.md, \"A corrupt journal\")",
		     path, (unsigned long long)st.garbage,
		     (unsigned long long)st.garbage_offset);
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
	rc = pool_journal_flush(j, last, -1);
	if (rc < 0)
		jlog(j, POOL_LOG_ERR, "journal %s: closing: the last events were not recorded: %s",
		     j->path, strerror(-rc));
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
pool_journal_set_io(struct pool_journal *j, const struct pool_journal_io *io)
{
	pthread_mutex_lock(&j->mu);
	j->io = io ? *io : sys_io;
	pthread_mutex_unlock(&j->mu);
}

uint64_t
pool_journal_dropped(const struct pool_journal *j)
{
	return __atomic_load_n(&j->dropped, __ATOMIC_RELAXED);
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

static int64_t
mono_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes buf[0, n) (short writes and EINTR handled). 0 or -errno. */
static int
write_all(const struct pool_journal_io *io, int fd, const char *buf, size_t n)
{
	size_t off = 0;
	ssize_t w;

	while (off < n) {
		w = io->write(fd, buf + off, n - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += (size_t)w;
	}
	return 0;
}

/* The leader, without j->mu, while j->broken: the durable part of the
 * file is copied into PATH.repair, made durable, and renamed over PATH;
 * the new descriptor replaces the untrusted one. 0 or -errno (nothing
 * changed then; PATH.repair is removed). */
static int
repair(struct pool_journal *j)
{
	const struct pool_journal_io *io = &j->io;
	char tmp[4096], buf[65536];
	uint64_t off = 0;
	ssize_t n;
	int nfd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.repair", j->path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	nfd = io->open(tmp, O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (nfd < 0)
		return -errno;
	while (off < j->durable_off) {
		size_t want = j->durable_off - off < sizeof(buf) ? (size_t)(j->durable_off - off)
								 : sizeof(buf);

		n = io->pread(j->fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;     /* the file is shorter than we know */
			goto fail;
		}
		if ((rc = write_all(io, nfd, buf, (size_t)n)) < 0)
			goto fail;
		off += (uint64_t)n;
	}
	if (io->fdatasync(nfd) < 0 || io->rename(tmp, j->path) < 0) {
		rc = -errno;
		goto fail;
	}
	/* Renamed: the new file is the journal whatever happens next; a
	 * failure to make its name durable keeps it broken (tried again). */
	close(j->fd);
	j->fd = nfd;
	return fsync_parent(io, j->path);
fail:
	close(nfd);
	unlink(tmp);
	return rc;
}

static void
drop_range(struct pool_journal *j, uint64_t lo, uint64_t hi, int err)
{
	struct jdrop *d;

	if (lo > hi)
		return;
	d = &j->drop[j->ndrop++ % JDROP_KEEP];
	d->lo = lo;
	d->hi = hi;
	d->err = err;
	__atomic_add_fetch(&j->dropped, hi - lo + 1, __ATOMIC_RELAXED);
}

/* Under j->mu: the error that dropped seq, or 0. */
static int
dropped_err(const struct pool_journal *j, uint64_t seq)
{
	unsigned n = j->ndrop < JDROP_KEEP ? j->ndrop : JDROP_KEEP;

	for (unsigned i = 0; i < n; i++)
		if (seq >= j->drop[i].lo && seq <= j->drop[i].hi)
			return j->drop[i].err;
	return 0;
}

/* One commit, led by the caller: called and returns with j->mu held, but
 * does its I/O without it. Takes every pending event, rewrites the file
 * first if it is broken, writes and fdatasync()s. On failure the batch is
 * dropped (see struct pool_journal). 0 or -errno. */
static int
commit(struct pool_journal *j)
{
	struct jbuf tmp = j->flight;
	uint64_t lo = j->settled + 1, hi = j->last;
	bool broken = j->broken, synced = false, untrusted = false, repaired = false;
	const char *step = "write";
	int64_t now = mono_now_ms();
	int rc = 0;

	j->flight = j->pend;
	j->pend = tmp;
	j->committing = true;
	if (broken && now < j->repair_after_ms) {
		rc = -EIO;              /* a rewrite failed less than a second ago */
		step = "rewriting the journal";
		goto done;
	}
	pthread_mutex_unlock(&j->mu);

	if (broken) {
		step = "rewriting the journal";
		rc = repair(j);
		untrusted = rc < 0;
		repaired = rc == 0;
	}
	if (!rc && j->flight.len) {
		step = "write";
		rc = write_all(&j->io, j->fd, j->flight.p, j->flight.len);
		if (!rc) {
			step = "fdatasync";
			if (j->io.fdatasync(j->fd) < 0) {
				rc = -errno;
				untrusted = true;
			} else {
				synced = true;
			}
		}
		/* Cut what the failed batch may have left. After a failed
		 * fdatasync() this is only a best effort on a descriptor we
		 * no longer trust (the file is rewritten before the next
		 * commit); after a failed write() a durable cut keeps the
		 * descriptor in use. */
		if (rc && (j->io.ftruncate(j->fd, (off_t)j->durable_off) < 0 || untrusted ||
			   j->io.fdatasync(j->fd) < 0))
			untrusted = true;
	}

	pthread_mutex_lock(&j->mu);
	if (synced)
		__atomic_add_fetch(&j->commits, 1, __ATOMIC_RELAXED);
done:
	if (repaired)
		j->broken = false;
	j->settled = hi;
	if (!rc) {
		j->durable_off += j->flight.len;
		__atomic_store_n(&j->durable, hi, __ATOMIC_RELEASE);
		if (repaired)
			jlog(j, POOL_LOG_WARN, "journal %s: rewritten into a new file after the "
			     "failure; durable up to seq %llu", j->path, (unsigned long long)hi);
	} else {
		drop_range(j, lo, hi, rc);
		if (untrusted) {
			if (broken)
				j->repair_after_ms = mono_now_ms() + JREPAIR_BACKOFF_MS;
			j->broken = true;
		}
	}
	j->flight.len = 0;
	if (j->flight.cap > JBUF_KEEP) {
		free(j->flight.p);
		j->flight = (struct jbuf){ 0 };
	}
	if (rc && !j->failing) {
		j->failing = true;
		jlog(j, POOL_LOG_ERR,
		     "journal %s: %s failed: %s; the %llu events of this commit were not recorded "
		     "(their claims and releases are refused)%s (check the disk holding the data "
		     "directory)",
		     j->path, step, strerror(-rc), (unsigned long long)(hi - lo + 1),
		     j->broken ? "; the file is rewritten before the next commit" : "");
	} else if (!rc && j->failing) {
		j->failing = false;
		jlog(j, POOL_LOG_WARN, "journal %s: written again, durable up to seq %llu",
		     j->path, (unsigned long long)j->durable);
	}
	j->committing = false;
	j->commit_gen++;
	pthread_cond_broadcast(&j->cv);
	return rc;
}

/* The wait of sync and flush: leads a commit, or waits for the one under
 * way, until seq is acknowledged (ack: durable, or its drop's error) or
 * settled with the file trusted (!ack: a failed commit is the answer). */
static int
wait_for_seq(struct pool_journal *j, uint64_t seq, int timeout_ms, bool ack)
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
	for (;;) {
		/* Dropped first: a later commit's success covers higher
		 * seqs, never a dropped one. */
		if (ack && ((rc = dropped_err(j, seq)) || j->durable >= seq))
			break;
		if (!ack && j->settled >= seq && !j->broken)
			break;
		if (!j->committing) {
			if ((rc = commit(j)) < 0 && !ack)
				break;
			rc = 0;
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
	}
out:
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int
pool_journal_sync(struct pool_journal *j, uint64_t seq, int timeout_ms)
{
	return wait_for_seq(j, seq, timeout_ms, true);
}

int
pool_journal_flush(struct pool_journal *j, uint64_t seq, int timeout_ms)
{
	return wait_for_seq(j, seq, timeout_ms, false);
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
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->s[i].key)
				continue;
			/* (never NULL: bigger has slots) */
			if (!(s = smap_slot(&bigger, m->s[i].key))) {
				free(bigger.s);
				return NULL;
			}
			*s = m->s[i];
		}
		bigger.n = m->n;
		free(m->s);
		*m = bigger;
	}
	s = smap_slot(m, key);
	if (!s || !(s->key = strdup(key)))
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

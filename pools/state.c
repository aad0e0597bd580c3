/* state.c: the claims state file (atomic replace, codec) and its retrier.
 * See state.h for the contracts. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager.h"
#include "state.h"

static int __attribute__((format(printf, 3, 4)))
fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* ---- the codec ---- */

enum kind {
	K_STR,
	K_STR_NULL,
	K_OBJ,
	K_OBJ_NULL,
	K_INT,
	K_ARR,
};

static const char *const kind_want[] = {
	[K_STR] = "not a string",
	[K_STR_NULL] = "not a string or null",
	[K_OBJ] = "not an object",
	[K_OBJ_NULL] = "not an object or null",
	[K_INT] = "not an integer",
	[K_ARR] = "not an array",
};

/* The member key of o, of the given kind: 0 with *out, or -EINVAL with
 * "pfx.key: why" in err and *out NULL. */
static int
member(const json_t *o, const char *pfx, const char *key, enum kind k, const json_t **out,
       char *err, size_t errsz)
{
	const json_t *v = json_object_get(o, key);
	const char *dot = *pfx ? "." : "";
	bool ok;

	*out = NULL;
	if (!v)
		return fail(err, errsz, "%s%s%s: missing", pfx, dot, key);
	switch (k) {
	case K_STR: ok = json_is_string(v); break;
	case K_STR_NULL: ok = json_is_string(v) || json_is_null(v); break;
	case K_OBJ: ok = json_is_object(v); break;
	case K_OBJ_NULL: ok = json_is_object(v) || json_is_null(v); break;
	case K_INT: ok = json_is_integer(v); break;
	case K_ARR: ok = json_is_array(v); break;
	default: ok = false; break;
	}
	if (!ok)
		return fail(err, errsz, "%s%s%s: %s", pfx, dot, key, kind_want[k]);
	*out = v;
	return 0;
}

static bool
is_id(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	if (n < 1 || n > POOL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* A {string: string} map. */
static int
string_map(const json_t *o, const char *pfx, const char *key, char *err, size_t errsz)
{
	const json_t *m, *v;
	const char *k;
	int rc;

	if ((rc = member(o, pfx, key, K_OBJ, &m, err, errsz)) < 0)
		return rc;
	json_object_foreach((json_t *)(uintptr_t)m, k, v) {
		if (!json_is_string(v))
			return fail(err, errsz, "%s.%s.%.64s: not a string", pfx, key, k);
	}
	return 0;
}

static int
one_of(const json_t *v, const char *pfx, const char *key, const char *a, const char *b,
       char *err, size_t errsz)
{
	const char *s = json_string_value(v);

	if (strcmp(s, a) && strcmp(s, b))
		return fail(err, errsz, "%s.%s: '%.32s' is neither '%s' nor '%s'", pfx, key, s, a,
			    b);
	return 0;
}

static int
check_entry(const json_t *e, const char *pfx, char *err, size_t errsz)
{
	const json_t *v, *state;
	struct in_addr a;
	bool claimed;
	int rc;

	if (!json_is_object(e))
		return fail(err, errsz, "%s: not an object", pfx);
	if ((rc = member(e, pfx, "id", K_STR, &v, err, errsz)) < 0)
		return rc;
	if (!is_id(v))
		return fail(err, errsz, "%s.id: not an id: 1 to %d of A-Z, a-z, 0-9, '-' and '_'",
			    pfx, POOL_ID_MAX);
	if ((rc = member(e, pfx, "pool", K_STR, &v, err, errsz)) < 0)
		return rc;
	if (!json_string_length(v))
		return fail(err, errsz, "%s.pool: empty", pfx);
	if ((rc = member(e, pfx, "state", K_STR, &state, err, errsz)) < 0 ||
	    (rc = one_of(state, pfx, "state", "warm", "claimed", err, errsz)) < 0)
		return rc;
	claimed = strcmp(json_string_value(state), "claimed") == 0;
	if (claimed || json_object_get(e, "tenant")) {
		if ((rc = member(e, pfx, "tenant", K_STR_NULL, &v, err, errsz)) < 0)
			return rc;
	}
	if ((rc = member(e, pfx, "tier", K_STR, &v, err, errsz)) < 0 ||
	    (rc = one_of(v, pfx, "tier", "warm", "cold", err, errsz)) < 0)
		return rc;
	if ((rc = member(e, pfx, "ref", K_OBJ, &v, err, errsz)) < 0 ||
	    (rc = member(e, pfx, "lane", K_STR, &v, err, errsz)) < 0 ||
	    (rc = member(e, pfx, "address", K_STR_NULL, &v, err, errsz)) < 0)
		return rc;
	if (json_is_string(v) && inet_pton(AF_INET, json_string_value(v), &a) != 1)
		return fail(err, errsz, "%s.address: '%.48s' is not an IPv4 address", pfx,
			    json_string_value(v));
	if ((rc = member(e, pfx, "ifname", K_STR, &v, err, errsz)) < 0)
		return rc;
	if (json_string_length(v) > 15)
		return fail(err, errsz, "%s.ifname: longer than 15 bytes", pfx);
	if ((rc = member(e, pfx, "created_ms", K_INT, &v, err, errsz)) < 0 ||
	    (rc = member(e, pfx, "expires_ms", K_INT, &v, err, errsz)) < 0 ||
	    (rc = member(e, pfx, "ttl_s", K_INT, &v, err, errsz)) < 0)
		return rc;
	if (json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)UINT32_MAX)
		return fail(err, errsz, "%s.ttl_s: out of range (0 to %u)", pfx, UINT32_MAX);
	if ((rc = string_map(e, pfx, "labels", err, errsz)) < 0 ||
	    (rc = string_map(e, pfx, "env", err, errsz)) < 0)
		return rc;
	if (claimed || json_object_get(e, "layer")) {
		if ((rc = member(e, pfx, "layer", claimed ? K_OBJ : K_OBJ_NULL, &v, err, errsz)) < 0)
			return rc;
	}
	return 0;
}

int
pool_state_validate(const struct json_t *doc, char *err, size_t errsz)
{
	const json_t *v, *list;
	json_t *seen;
	char pfx[40];
	int rc;

	if (!json_is_object(doc))
		return fail(err, errsz, "(top): not an object");
	if ((rc = member(doc, "", "format", K_INT, &v, err, errsz)) < 0)
		return rc;
	if (json_integer_value(v) != POOL_STATE_FORMAT)
		return fail(err, errsz, "format: %lld is not a version this daemon reads (%d)",
			    (long long)json_integer_value(v), POOL_STATE_FORMAT);
	if ((rc = member(doc, "", "journal_seq", K_INT, &v, err, errsz)) < 0)
		return rc;
	if (json_integer_value(v) < 0)
		return fail(err, errsz, "journal_seq: negative");
	if ((rc = member(doc, "", "written_ms", K_INT, &v, err, errsz)) < 0 ||
	    (rc = member(doc, "", "sandboxes", K_ARR, &list, err, errsz)) < 0)
		return rc;
	if (!(seen = json_object()))
		return fail(err, errsz, "out of memory");
	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *e = json_array_get(list, i);
		const char *id;
		json_t *first;

		snprintf(pfx, sizeof(pfx), "sandboxes[%zu]", i);
		if ((rc = check_entry(e, pfx, err, errsz)) < 0)
			break;
		id = json_string_value(json_object_get(e, "id"));
		if ((first = json_object_get(seen, id))) {
			rc = fail(err, errsz, "%s.id: '%s' repeats sandboxes[%lld]", pfx, id,
				  (long long)json_integer_value(first));
			break;
		}
		if (json_object_set_new(seen, id, json_integer((json_int_t)i)) < 0) {
			rc = fail(err, errsz, "out of memory");
			break;
		}
	}
	json_decref(seen);
	return rc;
}

/* ---- the file ---- */

static int
paths(const char *dir, const char *name, char *path, char *tmp, char *err, size_t errsz)
{
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return fail(err, errsz, "state file name '%.64s': not a plain file name", name);
	if (snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX ||
	    (tmp && snprintf(tmp, PATH_MAX, "%s/.%s.tmp", dir, name) >= PATH_MAX)) {
		fail(err, errsz, "state file %.64s/%.64s: path too long", dir, name);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n) {
		w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
pool_state_write(const char *dir, const char *name, const struct json_t *doc, char *err,
		 size_t errsz)
{
	char path[PATH_MAX], tmp[PATH_MAX], why[256];
	const char *step = NULL;
	char *text = NULL;
	bool made = false;
	int fd = -1, rc;

	if ((rc = paths(dir, name, path, tmp, err, errsz)) < 0)
		return rc;
	if ((rc = pool_state_validate(doc, why, sizeof(why))) < 0) {
		fail(err, errsz, "state %s: not written, the document is invalid: %s", path, why);
		return rc;
	}
	if (!(text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS))) {
		fail(err, errsz, "state %s: out of memory", path);
		return -ENOMEM;
	}
	fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		step = "open";
		goto out;
	}
	made = true;
	if (fchmod(fd, 0600) < 0) {
		rc = -errno;
		step = "chmod";
		goto out;
	}
	if ((rc = write_all(fd, text, strlen(text))) < 0 || (rc = write_all(fd, "\n", 1)) < 0) {
		step = "write";
		goto out;
	}
	if (fsync(fd) < 0) {
		rc = -errno;
		step = "fsync";
		goto out;
	}
	rc = close(fd);
	fd = -1;
	if (rc < 0) {
		rc = -errno;
		step = "close";
		goto out;
	}
	if (rename(tmp, path) < 0) {
		rc = -errno;
		step = "rename";
		goto out;
	}
	made = false;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		rc = -errno;
		step = "fsync of the directory";
		fail(err, errsz, "state %s: replaced, but %s %s failed: %s", path, step, dir,
		     strerror(-rc));
		step = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	if (step)
		fail(err, errsz, "state %s: %s of %s failed: %s", path, step, tmp,
		     strerror(-rc));
	if (made)
		unlink(tmp);
	free(text);
	return rc;
}

struct json_t *
pool_state_read(const char *dir, const char *name, char *err, size_t errsz)
{
	char path[PATH_MAX], why[256];
	json_error_t je;
	struct stat st;
	json_t *doc = NULL;
	char *buf = NULL;
	size_t got = 0, cap = 0;
	ssize_t n;
	int fd, r;

	if (err && errsz)
		*err = '\0';
	if ((r = paths(dir, name, path, NULL, err, errsz)) < 0)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r != -ENOENT)
			fail(err, errsz, "state %s: open: %s", path, strerror(-r));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		fail(err, errsz, "state %s: stat: %s", path, strerror(-r));
		goto out_fd;
	}
	if (st.st_size > (off_t)POOL_STATE_MAX_BYTES) {
		r = -EFBIG;
		fail(err, errsz, "state %s: %lld bytes, more than %u", path,
		     (long long)st.st_size, POOL_STATE_MAX_BYTES);
		goto out_fd;
	}
	/* Read to the end, bounded: the size may have changed since. */
	for (;;) {
		if (got == cap) {
			size_t c = cap ? cap * 2 : (size_t)st.st_size + 4096;
			char *p;

			if (c > POOL_STATE_MAX_BYTES + 1)
				c = POOL_STATE_MAX_BYTES + 1;
			if (!(p = realloc(buf, c))) {
				r = -ENOMEM;
				fail(err, errsz, "state %s: out of memory", path);
				goto out_fd;
			}
			buf = p;
			cap = c;
		}
		n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			fail(err, errsz, "state %s: read: %s", path, strerror(-r));
			goto out_fd;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > POOL_STATE_MAX_BYTES) {
			r = -EFBIG;
			fail(err, errsz, "state %s: more than %u bytes", path,
			     POOL_STATE_MAX_BYTES);
			goto out_fd;
		}
	}
	doc = json_loadb(buf, got, JSON_REJECT_DUPLICATES, &je);
	if (!doc) {
		r = -EINVAL;
		fail(err, errsz, "state %s: line %d, column %d: %s", path, je.line, je.column,
		     je.text);
		goto out_fd;
	}
	if ((r = pool_state_validate(doc, why, sizeof(why))) < 0) {
		fail(err, errsz, "state %s: %s", path, why);
		json_decref(doc);
		doc = NULL;
	}
out_fd:
	close(fd);
out:
	free(buf);
	return doc;
}

/* ---- the retrier ---- */

void
pool_saver_init(struct pool_saver *s, uint64_t backoff_min_ms, uint64_t backoff_max_ms)
{
	memset(s, 0, sizeof(*s));
	s->backoff_min_ms = backoff_min_ms ? backoff_min_ms : 1;
	s->backoff_max_ms = backoff_max_ms < s->backoff_min_ms ? s->backoff_min_ms
							       : backoff_max_ms;
}

void
pool_saver_changed(struct pool_saver *s)
{
	s->gen++;
}

bool
pool_saver_should_write(struct pool_saver *s, uint64_t now_ms, uint64_t *gen)
{
	if (s->busy || s->written == s->gen)
		return false;
	if (s->backoff_ms && now_ms < s->next_ms)
		return false;
	s->busy = true;
	*gen = s->gen;
	return true;
}

void
pool_saver_done(struct pool_saver *s, uint64_t gen, int rc, uint64_t now_ms, bool *log_it)
{
	bool log = false;

	s->busy = false;
	if (rc == 0) {
		if (gen > s->written)
			s->written = gen;
		log = s->failures > 0;
		s->failures = 0;
		s->backoff_ms = 0;
		s->last_rc = 0;
	} else {
		log = s->failures == 0 || rc != s->last_rc;
		s->failures++;
		s->last_rc = rc;
		if (!s->backoff_ms)
			s->backoff_ms = s->backoff_min_ms;
		else if (s->backoff_ms > s->backoff_max_ms / 2)
			s->backoff_ms = s->backoff_max_ms;
		else
			s->backoff_ms *= 2;
		s->next_ms = s->backoff_ms > UINT64_MAX - now_ms ? UINT64_MAX
								    : now_ms + s->backoff_ms;
	}
	if (log_it)
		*log_it = log;
}

uint64_t
pool_saver_next_ms(const struct pool_saver *s, uint64_t now_ms)
{
	if (s->busy || s->written == s->gen)
		return UINT64_MAX;
	if (s->backoff_ms && now_ms < s->next_ms)
		return s->next_ms - now_ms;
	return 0;
}

void
pool_saver_retry_now(struct pool_saver *s)
{
	s->next_ms = 0;
}

bool
pool_saver_clean(const struct pool_saver *s)
{
	return s->written == s->gen;
}

/* files.c: files as trees for the `sluice` client: `cp -r` both ways (a
 * tar stream, built and extracted here with agent/tarfs.c's strict rules,
 * the same the agent uses) and `ls ID:PATH`. See docs/api.md "Files". */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sluice-int.h"
#include "tarfs.h"

#define EXIT_API 1
#define TAR_CHUNK 65536

static void
fwarn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
fwarn(const char *fmt, ...)
{
	va_list ap;

	fputs("sluice: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static char *
xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		fputs("sluice: out of memory\n", stderr);
		exit(EXIT_API);
	}
	return s;
}

/* "/v1/sandboxes/ID/files?path=P" plus extra. */
static char *
files_target(const char *id, const char *path, const char *extra)
{
	char *enc = cli_pct_encode(path), *t;

	if (!enc) {
		fputs("sluice: out of memory\n", stderr);
		exit(EXIT_API);
	}
	t = xasprintf("/v1/sandboxes/%s/files?path=%s%s", id, enc, extra);
	free(enc);
	return t;
}

/* The last non-empty component of a path ("/a/b/" -> "b"), in buf; ""
 * for "/". */
static const char *
last_name(const char *path, char *buf, size_t cap)
{
	size_t n = strlen(path), e;

	while (n > 0 && path[n - 1] == '/')
		n--;
	e = n;
	while (n > 0 && path[n - 1] != '/')
		n--;
	snprintf(buf, cap, "%.*s", (int)(e - n), path + n);
	return buf;
}

/* stat=1 of ID:PATH: 0 with *st (a new reference), 1 after printing why,
 * or -ENOENT (nothing printed) when missing_ok and it does not exist. */
static int
remote_stat(struct sl_opts *o, const char *id, const char *path, bool missing_ok, json_t **st)
{
	struct sl_req r = { .method = "GET", .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	char *target = files_target(id, path, "&stat=1");
	int rc;

	r.target = target;
	rc = sl_request(o, &c, &r);
	if (rc == 0) {
		if (c.resp.status == 404 && missing_ok &&
		    strcmp(c.resp.sluice_reason, "not-found") == 0)
			rc = -ENOENT;
		else if (c.resp.status / 100 == 2)
			rc = sl_read_json(o, &c, st);
		else
			rc = sl_api_fail(o, &c);
	}
	cli_conn_close(&c);
	free(target);
	return rc;
}

/* ---- ls ID:PATH ------------------------------------------------------- */

static void
mode_str(const char *type, long long mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = strcmp(type, "dir") == 0    ? 'd'
		 : strcmp(type, "link") == 0 ? 'l'
		 : strcmp(type, "file") == 0 ? '-'
					     : '?';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400 >> i)) ? rwx[i] : '-';
	if (mode & 04000)
		out[3] = (mode & 0100) ? 's' : 'S';
	if (mode & 02000)
		out[6] = (mode & 010) ? 's' : 'S';
	if (mode & 01000)
		out[9] = (mode & 01) ? 't' : 'T';
	out[10] = '\0';
}

/* Printable: control bytes become '?', so a guest's names cannot drive
 * the terminal. */
static void
put_clean(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

static void
ls_line(const json_t *e, const char *name)
{
	const char *type = json_string_value(json_object_get(e, "type"));
	const char *target = json_string_value(json_object_get(e, "target"));
	time_t mt = (time_t)json_integer_value(json_object_get(e, "mtime"));
	char m[11], when[32];
	struct tm tm;

	mode_str(type ? type : "?", json_integer_value(json_object_get(e, "mode")), m);
	if (gmtime_r(&mt, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	else
		snprintf(when, sizeof(when), "?");
	printf("%s %10lld %s ", m, (long long)json_integer_value(json_object_get(e, "size")), when);
	put_clean(name);
	if (target) {
		fputs(" -> ", stdout);
		put_clean(target);
	}
	putchar('\n');
}

static int
by_name(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	const char *p = json_string_value(json_object_get(x, "name"));
	const char *q = json_string_value(json_object_get(y, "name"));

	return strcmp(p ? p : "", q ? q : "");
}

int
sl_files_ls(struct sl_opts *o, int argc, char **argv)
{
	const char *arg = NULL, *path, *type;
	struct sl_req r = { .method = "GET", .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	json_t *st = NULL, *res = NULL, *ents;
	char id[256], *target;
	size_t idlen;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			o->json = true;
		else if (arg)
			return sl_usage_err("ls: give one ID:PATH");
		else
			arg = argv[i];
	}
	if (!arg || !cli_remote_parse(arg, &idlen, &path))
		return sl_usage_err("ls: give ID:PATH, PATH absolute (or nothing: the sandboxes)");
	if (idlen >= sizeof(id))
		return sl_usage_err("ls: sandbox id too long");
	memcpy(id, arg, idlen);
	id[idlen] = '\0';
	rc = remote_stat(o, id, path, false, &st);
	if (rc != 0)
		return rc;
	type = json_string_value(json_object_get(st, "type"));
	if (!type || strcmp(type, "dir") != 0) {
		if (o->json) {
			sl_print_json(st);
		} else {
			ls_line(st, path);
		}
		json_decref(st);
		return 0;
	}
	json_decref(st);
	target = files_target(id, path, "");
	r.target = target;
	r.accept = "application/json";
	rc = sl_request(o, &c, &r);
	if (rc == 0)
		rc = c.resp.status / 100 == 2 ? sl_read_json(o, &c, &res) : sl_api_fail(o, &c);
	cli_conn_close(&c);
	free(target);
	if (rc != 0)
		return rc;
	ents = json_object_get(res, "entries");
	if (o->json) {
		sl_print_json(res);
	} else if (json_is_array(ents)) {
		size_t n = json_array_size(ents);
		json_t **v = calloc(n ? n : 1, sizeof(*v));

		if (!v) {
			json_decref(res);
			fputs("sluice: out of memory\n", stderr);
			return EXIT_API;
		}
		for (size_t k = 0; k < n; k++)
			v[k] = json_array_get(ents, k);
		qsort(v, n, sizeof(*v), by_name);
		for (size_t k = 0; k < n; k++) {
			const char *name = json_string_value(json_object_get(v[k], "name"));

			ls_line(v[k], name ? name : "?");
		}
		free(v);
	}
	json_decref(res);
	return 0;
}

/* ---- cp -r ID:DIR LOCAL ----------------------------------------------- */

int
sl_files_cp_down(struct sl_opts *o, const char *id, const char *rpath, const char *local)
{
	struct sl_req r = { .method = "GET", .accept = "application/x-tar", .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	struct agent_tarfs_x *x = NULL;
	struct agent_tarfs_stats stats;
	char base[256], err[1024], *dest, *buf = NULL, *target;
	struct stat st;
	int rc = EXIT_API;
	bool made = false;

	if (stat(local, &st) == 0 && S_ISDIR(st.st_mode) &&
	    last_name(rpath, base, sizeof(base))[0])
		dest = xasprintf("%s/%s", local, base);
	else
		dest = xasprintf("%s", local);
	target = files_target(id, rpath, "");
	r.target = target;
	if (sl_request(o, &c, &r) != 0)
		goto out;
	if (c.resp.status / 100 != 2) {
		rc = sl_api_fail(o, &c);
		goto out;
	}
	if (strcmp(c.resp.content_type, "application/x-tar") != 0) {
		fwarn("cp: %s:%s: the server sent %s, not an archive", id, rpath,
		      c.resp.content_type[0] ? c.resp.content_type : "no content type");
		goto out;
	}
	if (mkdir(dest, 0755) == 0)
		made = true;
	else if (errno != EEXIST) {
		fwarn("cp: cannot create the directory %s: %s", dest, strerror(errno));
		goto out;
	}
	if (agent_tarfs_x_open(&x, dest, false, err, sizeof(err)) < 0) {
		fwarn("cp: %s", err);
		goto out;
	}
	buf = malloc(TAR_CHUNK);
	if (!buf) {
		fwarn("out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = cli_conn_read_body(&c, buf, TAR_CHUNK, err, sizeof(err));

		if (n < 0) {
			fwarn("cp: %s:%s: %s", id, rpath, err);
			agent_tarfs_x_finish(x, err, sizeof(err));
			goto partial;
		}
		if (n == 0)
			break;
		if (agent_tarfs_x_feed(x, (const uint8_t *)buf, (size_t)n, err, sizeof(err)) < 0) {
			fwarn("cp: %s:%s: refused: %s", id, rpath, err);
			agent_tarfs_x_finish(x, err, sizeof(err));
			goto partial;
		}
	}
	if (agent_tarfs_x_finish(x, err, sizeof(err)) < 0) {
		fwarn("cp: %s:%s: %s", id, rpath, err);
		goto partial;
	}
	agent_tarfs_x_stats(x, &stats);
	if (o->json) {
		json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path", dest, "entries",
				      (json_int_t)stats.entries, "files", (json_int_t)stats.files,
				      "dirs", (json_int_t)stats.dirs, "links",
				      (json_int_t)stats.links, "bytes", (json_int_t)stats.bytes);

		sl_print_json(j);
		json_decref(j);
	}
	rc = 0;
	goto out;
partial:
	agent_tarfs_x_stats(x, &stats);
	fwarn("cp: %llu %s written to %s%s before that", (unsigned long long)stats.entries,
	      stats.entries == 1 ? "entry was" : "entries were", dest,
	      made ? " (made by this copy)" : "");
out:
	agent_tarfs_x_free(x);
	cli_conn_close(&c);
	free(buf);
	free(target);
	free(dest);
	return rc;
}

/* ---- cp -r LOCALDIR ID:DIR -------------------------------------------- */

/* The child: the archive of root into fd. Exits 0, or 1 after saying
 * why (a closed pipe says nothing: the server's answer will). */
static void
walk_child(const char *root, int fd)
{
	struct agent_tarfs_walk *w;
	char err[1024];
	uint8_t *buf = malloc(TAR_CHUNK);
	long n;

	if (!buf || agent_tarfs_walk_open(&w, root, err, sizeof(err)) < 0) {
		fwarn("cp: %s", buf ? err : "out of memory");
		_exit(1);
	}
	while ((n = agent_tarfs_walk_read(w, buf, TAR_CHUNK, err, sizeof(err))) > 0) {
		for (long off = 0; off < n;) {
			ssize_t k = write(fd, buf + off, (size_t)(n - off));

			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				_exit(errno == EPIPE ? 1 : (fwarn("cp: %s", strerror(errno)), 1));
			off += k;
		}
	}
	if (n < 0) {
		fwarn("cp: %s", err);
		_exit(1);
	}
	_exit(0);
}

int
sl_files_cp_up(struct sl_opts *o, const char *local, const char *id, const char *rpath)
{
	struct sl_req r = { .method = "PUT", .ctype = "application/x-tar", .upload_fd = -1,
			    .upload_len = -1 };
	struct cli_conn c = { .fd = -1 };
	char base[256], *dest = NULL, *real = NULL, *target = NULL;
	json_t *rst = NULL, *res = NULL;
	struct stat st;
	int rc, p[2] = { -1, -1 }, status = 0;
	pid_t pid = -1;

	if (stat(local, &st) < 0) {
		fwarn("cp: %s: %s", local, strerror(errno));
		return EXIT_API;
	}
	if (!S_ISDIR(st.st_mode)) {
		fwarn("cp: %s is not a directory: use cp without -r", local);
		return EXIT_API;
	}
	real = realpath(local, NULL);
	if (!real) {
		fwarn("cp: %s: %s", local, strerror(errno));
		return EXIT_API;
	}
	rc = remote_stat(o, id, rpath, true, &rst);
	if (rc > 0)
		goto out;
	if (rc == 0) {
		const char *t = json_string_value(json_object_get(rst, "type"));

		if (!t || strcmp(t, "dir") != 0) {
			fwarn("cp: %s:%s exists and is not a directory", id, rpath);
			rc = EXIT_API;
			goto out;
		}
		last_name(real, base, sizeof(base));
		dest = xasprintf("%s%s%s", rpath, rpath[strlen(rpath) - 1] == '/' ? "" : "/",
				 base[0] ? base : "root");
	} else {
		dest = xasprintf("%s", rpath);
	}
	rc = EXIT_API;
	if (pipe2(p, O_CLOEXEC) < 0) {
		fwarn("cp: pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		fwarn("cp: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		signal(SIGPIPE, SIG_IGN);
		walk_child(real, p[1]);
	}
	close(p[1]);
	p[1] = -1;
	target = files_target(id, dest, "");
	r.target = target;
	r.upload_fd = p[0];
	r.upload_name = local;
	if (sl_request(o, &c, &r) == 0) {
		if (c.resp.status / 100 != 2)
			rc = sl_api_fail(o, &c);
		else if ((rc = sl_read_json(o, &c, &res)) == 0 && o->json)
			sl_print_json(res);
	}
	close(p[0]);
	p[0] = -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		rc = EXIT_API; /* it said why */
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	cli_conn_close(&c);
	free(target);
	json_decref(rst);
	json_decref(res);
	free(dest);
	free(real);
	return rc;
}

/* fsops.c: read, write, list, stat, mkdir, remove. See agent.h.
 *
 * Paths must be absolute. Writes go to a temporary file in the target's
 * directory, are fsync'd and renamed into place, then the directory is
 * fsync'd: a reader sees the old file or the whole new one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "agent.h"

#define LIST_BATCH_BYTES (48u * 1024) /* entries per RESULT frame, about */

static const char *
req_path(struct agent *a, uint32_t id, const json_t *req, const char *op)
{
	const char *p = json_string_value(json_object_get(req, AGENT_F_PATH));

	if (p == NULL || p[0] != '/') {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "%s: \"path\" must be an absolute path", op);
		return NULL;
	}
	return p;
}

static bool
req_mode(struct agent *a, uint32_t id, const json_t *req, const char *op,
	 unsigned def, unsigned *mode)
{
	json_t *m = json_object_get(req, AGENT_F_MODE);

	*mode = def;
	if (m == NULL)
		return true;
	if (!json_is_integer(m) || json_integer_value(m) < 0 ||
	    json_integer_value(m) > 07777) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "%s: \"mode\" must be 0..07777", op);
		return false;
	}
	*mode = (unsigned)json_integer_value(m);
	return true;
}

static void
send_errno(struct agent *a, uint32_t id, int e, const char *op,
	   const char *path)
{
	agent_send_error(a, id, agent_err_code(e), e, "%s %s: %s", op, path,
			 strerror(e));
}

static void
send_result(struct agent *a, uint32_t id, json_t *j)
{
	if (j == NULL)
		j = json_object();
	agent_send_json(a, AGENT_FT_RESULT, id, j);
	json_decref(j);
}

static const char *
type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "link";
	return "other";
}

static json_t *
stat_json(const struct stat *st)
{
	return json_pack("{s:s, s:I, s:i, s:I, s:i, s:i}", AGENT_F_TYPE,
			 type_name(st->st_mode), AGENT_F_SIZE,
			 (json_int_t)st->st_size, AGENT_F_MODE,
			 (int)(st->st_mode & 07777), AGENT_F_MTIME,
			 (json_int_t)st->st_mtime, "uid", (int)st->st_uid,
			 "gid", (int)st->st_gid);
}

/* A link's target into e ("target"), read without following it. */
static void
link_target(json_t *e, const struct stat *st, int dfd, const char *name)
{
	char t[4097];
	ssize_t n;

	if (e == NULL || !S_ISLNK(st->st_mode))
		return;
	n = readlinkat(dfd, name, t, sizeof(t) - 1);
	if (n < 0)
		return;
	json_object_set_new(e, AGENT_F_TARGET, json_stringn(t, (size_t)n));
}

/* ---- read -------------------------------------------------------------- */

void
agent_op_read(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "read");
	json_t *jwin = json_object_get(req, AGENT_F_WINDOW);
	struct agent_stream *s;
	struct stat st;
	int fd;

	if (path == NULL)
		return;
	if (jwin && (!json_is_integer(jwin) || json_integer_value(jwin) < 1 ||
		     json_integer_value(jwin) > AGENT_WINDOW_MAX)) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "read: \"window\" must be 1..%u",
				 AGENT_WINDOW_MAX);
		return;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		send_errno(a, id, errno, "read", path);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;

		close(fd);
		agent_send_error(a, id, agent_err_code(e), e,
				 "read %s: not a regular file", path);
		return;
	}
	s = agent_stream_new(a, id, AGENT_SK_READ);
	if (s == NULL) {
		close(fd);
		agent_send_error(a, id, AGENT_E_TOO_MANY, 0,
				 "more than %d open streams",
				 AGENT_MAX_STREAMS);
		return;
	}
	s->file_fd = fd;
	s->window = jwin ? (uint64_t)json_integer_value(jwin)
			 : AGENT_WINDOW_DEFAULT;
}

bool
agent_read_pump(struct agent *a, struct agent_stream *s)
{
	size_t want = s->window < AGENT_DATA_MAX ? (size_t)s->window
						 : AGENT_DATA_MAX;
	uint8_t *buf;
	ssize_t n;

	if (s->tarw)
		return agent_tar_read_pump(a, s);
	buf = malloc(want);
	if (buf == NULL)
		return false;
	do
		n = read(s->file_fd, buf, want);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		agent_send(a, AGENT_FT_OUT, s->id, buf, (size_t)n);
		s->window -= (uint64_t)n;
		s->total += (uint64_t)n;
		free(buf);
		return false;
	}
	free(buf);
	if (n < 0)
		send_errno(a, s->id, errno, "read", "file");
	else
		send_result(a, s->id,
			    json_pack("{s:I}", AGENT_F_SIZE,
				      (json_int_t)s->total));
	agent_stream_free(a, s);
	return true;
}

/* ---- write ------------------------------------------------------------- */

void
agent_op_write(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "write");
	struct agent_stream *s;
	char *dup = NULL, *tmp = NULL;
	unsigned mode;
	int fd;

	if (path == NULL || !req_mode(a, id, req, "write", 0644, &mode))
		return;
	dup = strdup(path);
	if (dup == NULL ||
	    asprintf(&tmp, "%s/.sluice-write-XXXXXX", dirname(dup)) < 0) {
		free(dup);
		agent_send_error(a, id, AGENT_E_IO, ENOMEM, "out of memory");
		return;
	}
	free(dup);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		send_errno(a, id, errno, "write", path);
		free(tmp);
		return;
	}
	if (fchmod(fd, mode) < 0) {
		send_errno(a, id, errno, "write", path);
		close(fd);
		unlink(tmp);
		free(tmp);
		return;
	}
	s = agent_stream_new(a, id, AGENT_SK_WRITE);
	if (s == NULL) {
		close(fd);
		unlink(tmp);
		free(tmp);
		agent_send_error(a, id, AGENT_E_TOO_MANY, 0,
				 "more than %d open streams",
				 AGENT_MAX_STREAMS);
		return;
	}
	s->file_fd = fd;
	s->tmp_path = tmp;
	s->path = strdup(path);
	s->mode = mode;
	if (s->path == NULL) {
		agent_send_error(a, id, AGENT_E_IO, ENOMEM, "out of memory");
		agent_stream_free(a, s);
		return;
	}
	s->in_credit = AGENT_WINDOW_DEFAULT;
	{
		uint8_t p[4];

		agent_put_u32(p, AGENT_WINDOW_DEFAULT);
		agent_send(a, AGENT_FT_WINDOW, id, p, 4);
	}
}

static void
write_fail(struct agent *a, struct agent_stream *s, int e)
{
	send_errno(a, s->id, e, "write", s->path);
	agent_stream_free(a, s);
}

void
agent_write_in(struct agent *a, struct agent_stream *s, const uint8_t *p,
	       size_t len)
{
	size_t off = 0;

	if (s->tarx) {
		agent_tar_write_in(a, s, p, len);
		return;
	}
	if (len > s->in_credit) {
		agent_send_error(a, s->id, AGENT_E_FLOW, 0,
				 "write: data beyond the window");
		agent_stream_free(a, s);
		return;
	}
	while (off < len) {
		ssize_t n = write(s->file_fd, p + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			write_fail(a, s, errno);
			return;
		}
		off += (size_t)n;
	}
	if (len > 0) {
		uint8_t w[4];

		s->total += len;
		/* written already: the credit goes straight back */
		agent_put_u32(w, (uint32_t)len);
		agent_send(a, AGENT_FT_WINDOW, s->id, w, 4);
		return;
	}
	/* the end: make it durable, then visible */
	if (fsync(s->file_fd) < 0 || close(s->file_fd) < 0) {
		s->file_fd = -1;
		write_fail(a, s, errno);
		return;
	}
	s->file_fd = -1;
	if (rename(s->tmp_path, s->path) < 0) {
		write_fail(a, s, errno);
		return;
	}
	free(s->tmp_path);
	s->tmp_path = NULL;
	{
		char *dup = strdup(s->path);
		int dfd = dup ? open(dirname(dup), O_RDONLY | O_DIRECTORY |
							   O_CLOEXEC)
			      : -1;

		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dup);
	}
	send_result(a, s->id,
		    json_pack("{s:I}", AGENT_F_SIZE, (json_int_t)s->total));
	agent_stream_free(a, s);
}

/* ---- list, stat, mkdir, remove ----------------------------------------- */

void
agent_op_list(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "list");
	json_t *entries;
	size_t bytes = 0;
	struct dirent *de;
	DIR *d;

	if (path == NULL)
		return;
	d = opendir(path);
	if (d == NULL) {
		send_errno(a, id, errno, "list", path);
		return;
	}
	entries = json_array();
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		json_t *e;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0)
			continue;       /* gone meanwhile */
		e = stat_json(&st);
		link_target(e, &st, dirfd(d), de->d_name);
		json_object_set_new(e, AGENT_F_NAME,
				    json_stringn(de->d_name,
						 strlen(de->d_name)));
		json_array_append_new(entries, e);
		/* a name is at most 255 bytes (escaped: 6x); the rest ~120 */
		bytes += 6 * strlen(de->d_name) + 160;
		if (bytes >= LIST_BATCH_BYTES) {
			send_result(a, id,
				    json_pack("{s:o, s:b}", AGENT_F_ENTRIES,
					      entries, AGENT_F_MORE, 1));
			entries = json_array();
			bytes = 0;
		}
	}
	closedir(d);
	send_result(a, id,
		    json_pack("{s:o, s:b}", AGENT_F_ENTRIES, entries,
			      AGENT_F_MORE, 0));
}

void
agent_op_stat(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "stat");
	struct stat st;

	if (path == NULL)
		return;
	if (lstat(path, &st) < 0) {
		send_errno(a, id, errno, "stat", path);
		return;
	}
	{
		json_t *j = stat_json(&st);

		link_target(j, &st, AT_FDCWD, path);
		send_result(a, id, j);
	}
}

static int
mkdir_parents(char *p, unsigned mode)
{
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			*s = '/';
			return -1;
		}
		*s = '/';
	}
	if (mkdir(p, mode) < 0) {
		struct stat st;

		if (errno == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return -1;
	}
	return 0;
}

void
agent_op_mkdir(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "mkdir");
	unsigned mode;
	int rc;

	if (path == NULL || !req_mode(a, id, req, "mkdir", 0755, &mode))
		return;
	if (json_is_true(json_object_get(req, AGENT_F_PARENTS))) {
		char *dup = strdup(path);

		rc = dup ? mkdir_parents(dup, mode) : -1;
		free(dup);
	} else {
		rc = mkdir(path, mode);
	}
	if (rc < 0) {
		send_errno(a, id, errno, "mkdir", path);
		return;
	}
	send_result(a, id, NULL);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 ? -1 : 0;
}

void
agent_op_remove(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "remove");
	struct stat st;
	int rc;

	if (path == NULL)
		return;
	if (strcmp(path, "/") == 0) {
		agent_send_error(a, id, AGENT_E_PERMISSION, EPERM,
				 "remove /: refused");
		return;
	}
	if (lstat(path, &st) < 0) {
		send_errno(a, id, errno, "remove", path);
		return;
	}
	if (S_ISDIR(st.st_mode) &&
	    json_is_true(json_object_get(req, AGENT_F_RECURSIVE)))
		rc = nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	else if (S_ISDIR(st.st_mode))
		rc = rmdir(path);
	else
		rc = unlink(path);
	if (rc < 0) {
		send_errno(a, id, errno, "remove", path);
		return;
	}
	send_result(a, id, NULL);
}

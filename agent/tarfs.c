/* tarfs.c: the tree walker and the extractor. See tarfs.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "tar.h"
#include "tarfs.h"

/* ---- the walker ------------------------------------------------------- */

/* Kernel pseudo file systems: their files lie about their sizes (or are
 * endless), so a tree below "/" leaves them out (skipped). */
static bool
pseudo_fs(int fd)
{
	static const unsigned long magic[] = {
		0x9fa0,         /* proc */
		0x62656572,     /* sysfs */
		0x64626720,     /* debugfs */
		0x74726163,     /* tracefs */
		0x73636673,     /* securityfs */
		0x63677270,     /* cgroup2 */
		0x27e0eb,       /* cgroup */
		0xcafe4a11,     /* bpf */
		0x6e736673,     /* nsfs */
		0x42494e4d,     /* binfmt_misc */
		0x1cd1,         /* devpts */
		0x67596969,     /* rpc_pipefs */
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if ((unsigned long)sf.f_type == magic[i])
			return true;
	return false;
}

struct walk_level {
	DIR *d;
	size_t plen;            /* length of path[] for this directory's
				   entries ("" or "a/b/") */
};

struct agent_tarfs_walk {
	struct walk_level lv[AGENT_TARFS_DEPTH_MAX + 1];
	int depth;              /* lv[0..depth) open; 0: done with entries */
	char path[AGENT_TAR_NAME_MAX + 2];
	struct agent_tar_entry ent;
	uint8_t hdr[AGENT_TAR_HDR_MAX];
	size_t hoff, hlen;
	int fd;                 /* the file whose data is being sent */
	uint64_t left;          /* its data bytes still to send */
	size_t pad;
	bool root_done, end_done, finished;
	struct agent_tarfs_stats st;
};

int
agent_tarfs_walk_open(struct agent_tarfs_walk **out, const char *root, char *err,
		      size_t errsz)
{
	struct agent_tarfs_walk *w;
	struct stat st;
	int fd;

	*out = NULL;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		snprintf(err, errsz, "%s: %s", root, strerror(e));
		return -e;
	}
	w = calloc(1, sizeof(*w));
	if (!w || fstat(fd, &st) < 0) {
		int e = w ? errno : ENOMEM;

		close(fd);
		free(w);
		snprintf(err, errsz, "%s: %s", root, strerror(e));
		return -e;
	}
	w->lv[0].d = fdopendir(fd);
	if (!w->lv[0].d) {
		int e = errno;

		close(fd);
		free(w);
		snprintf(err, errsz, "%s: %s", root, strerror(e));
		return -e;
	}
	w->depth = 1;
	w->fd = -1;
	/* the root's own entry, "./" */
	w->ent.type = AGENT_TAR_DIR;
	w->ent.mode = st.st_mode & 07777;
	w->ent.mtime = st.st_mtime;
	*out = w;
	return 0;
}

static int
queue_header(struct agent_tarfs_walk *w, char *err, size_t errsz)
{
	long n = agent_tar_header(w->hdr, sizeof(w->hdr), &w->ent);

	if (n < 0) {
		snprintf(err, errsz, "%s: cannot be stored: %s", w->ent.name, strerror((int)-n));
		return (int)n;
	}
	w->hoff = 0;
	w->hlen = (size_t)n;
	w->st.entries++;
	return 0;
}

/* The next entry's header into w->hdr, or the end blocks. 0, or -errno. */
static int
next_entry(struct agent_tarfs_walk *w, char *err, size_t errsz)
{
	while (w->depth > 0) {
		struct walk_level *l = &w->lv[w->depth - 1];
		struct dirent *de;
		struct stat st;
		size_t nlen;
		int dfd = dirfd(l->d);

		errno = 0;
		de = readdir(l->d);
		if (!de) {
			if (errno) {
				int e = errno;

				snprintf(err, errsz, "reading the directory %.*s: %s",
					 (int)(l->plen ? l->plen - 1 : 1), l->plen ? w->path : ".",
					 strerror(e));
				return -e;
			}
			closedir(l->d);
			l->d = NULL;
			w->depth--;
			continue;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		nlen = strlen(de->d_name);
		if (l->plen + nlen + 1 > AGENT_TAR_NAME_MAX) {
			snprintf(err, errsz, "%.*s%s: a path longer than %d bytes", (int)l->plen,
				 w->path, de->d_name, AGENT_TAR_NAME_MAX);
			return -ENAMETOOLONG;
		}
		memcpy(w->path + l->plen, de->d_name, nlen + 1);
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;       /* gone meanwhile */
			snprintf(err, errsz, "%s: %s", w->path, strerror(errno));
			return -errno;
		}
		memset(&w->ent, 0, offsetof(struct agent_tar_entry, name));
		memcpy(w->ent.name, w->path, l->plen + nlen + 1);
		w->ent.link[0] = '\0';
		w->ent.mode = st.st_mode & 07777;
		w->ent.mtime = st.st_mtime;
		w->ent.size = 0;
		if (S_ISREG(st.st_mode)) {
			int fd = openat(dfd, de->d_name,
					O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

			if (fd < 0 && errno == ENOENT)
				continue;
			if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
				int e = fd < 0 ? errno : EAGAIN;

				if (fd >= 0)
					close(fd);
				snprintf(err, errsz, "%s: %s", w->path,
					 e == EAGAIN ? "changed while read" : strerror(e));
				return -e;
			}
			w->ent.type = AGENT_TAR_FILE;
			w->ent.size = (uint64_t)st.st_size;
			w->ent.mode = st.st_mode & 07777;
			w->ent.mtime = st.st_mtime;
			w->fd = fd;
			w->left = w->ent.size;
			w->pad = agent_tar_pad(w->ent.size);
			w->st.files++;
			w->st.bytes += w->ent.size;
		} else if (S_ISDIR(st.st_mode)) {
			int fd;
			DIR *d;

			if (w->depth > AGENT_TARFS_DEPTH_MAX) {
				snprintf(err, errsz, "%s: deeper than %d levels", w->path,
					 AGENT_TARFS_DEPTH_MAX);
				return -ELOOP;
			}
			fd = openat(dfd, de->d_name,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 && errno == ENOENT)
				continue;
			if (fd >= 0 && pseudo_fs(fd)) {
				close(fd);
				w->st.skipped++;
				continue;
			}
			if (fd < 0 || !(d = fdopendir(fd))) {
				int e = errno;

				if (fd >= 0)
					close(fd);
				snprintf(err, errsz, "%s: %s", w->path, strerror(e));
				return -e;
			}
			w->ent.type = AGENT_TAR_DIR;
			w->path[l->plen + nlen] = '/';
			w->path[l->plen + nlen + 1] = '\0';
			w->lv[w->depth].d = d;
			w->lv[w->depth].plen = l->plen + nlen + 1;
			w->depth++;
			w->st.dirs++;
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dfd, de->d_name, w->ent.link, AGENT_TAR_NAME_MAX + 1);

			if (n < 0 && errno == ENOENT)
				continue;
			if (n <= 0 || n > AGENT_TAR_NAME_MAX) {
				snprintf(err, errsz, "%s: %s", w->path,
					 n < 0 ? strerror(errno) : "a link target too long");
				return n < 0 ? -errno : -ENAMETOOLONG;
			}
			w->ent.link[n] = '\0';
			w->ent.type = AGENT_TAR_SYMLINK;
			w->st.links++;
		} else {
			w->st.skipped++;
			continue;
		}
		return queue_header(w, err, errsz);
	}
	/* the end: two zero blocks */
	memset(w->hdr, 0, 2 * AGENT_TAR_BLOCK);
	w->hoff = 0;
	w->hlen = 2 * AGENT_TAR_BLOCK;
	w->end_done = true;
	return 0;
}

long
agent_tarfs_walk_read(struct agent_tarfs_walk *w, uint8_t *buf, size_t cap, char *err,
		      size_t errsz)
{
	size_t o = 0;
	int rc;

	while (o < cap) {
		if (w->hoff < w->hlen) {
			size_t n = w->hlen - w->hoff;

			if (n > cap - o)
				n = cap - o;
			memcpy(buf + o, w->hdr + w->hoff, n);
			w->hoff += n;
			o += n;
			continue;
		}
		if (w->fd >= 0 && w->left > 0) {
			size_t want = cap - o;
			ssize_t n;

			if (want > w->left)
				want = (size_t)w->left;
			n = read(w->fd, buf + o, want);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = -errno;
				snprintf(err, errsz, "reading %s: %s", w->ent.name, strerror(errno));
				return rc;
			}
			if (n == 0) {
				/* it shrank: zeros keep the archive whole */
				memset(buf + o, 0, want);
				n = (ssize_t)want;
				if (!w->finished)
					w->st.changed++;
				w->finished = true;
			}
			o += (size_t)n;
			w->left -= (uint64_t)n;
			continue;
		}
		if (w->pad > 0) {
			size_t n = w->pad < cap - o ? w->pad : cap - o;

			memset(buf + o, 0, n);
			w->pad -= n;
			o += n;
			continue;
		}
		if (w->fd >= 0) {
			struct stat st;

			if (!w->finished && fstat(w->fd, &st) == 0 &&
			    (uint64_t)st.st_size != w->ent.size)
				w->st.changed++;
			close(w->fd);
			w->fd = -1;
			w->finished = false;
			continue;
		}
		if (w->end_done)
			break;
		if (!w->root_done) {
			w->root_done = true;
			rc = queue_header(w, err, errsz);
		} else {
			rc = next_entry(w, err, errsz);
		}
		if (rc < 0)
			return rc;
	}
	return (long)o;
}

void
agent_tarfs_walk_stats(const struct agent_tarfs_walk *w, struct agent_tarfs_stats *st)
{
	*st = w->st;
}

void
agent_tarfs_walk_free(struct agent_tarfs_walk *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->depth; i++)
		if (w->lv[i].d)
			closedir(w->lv[i].d);
	if (w->fd >= 0)
		close(w->fd);
	free(w);
}

/* ---- the extractor ---------------------------------------------------- */

struct dir_fix {
	char *name;             /* below the root; "" the root */
	unsigned mode;
	int64_t mtime;
};

struct agent_tarfs_x {
	int root;               /* O_PATH of the root */
	struct agent_tar_dec dec;
	int fd;                 /* the file being written, or -1 */
	uint64_t left;          /* its bytes still to come */
	char cur_dir[AGENT_TAR_NAME_MAX + 1]; /* cur_fd's name */
	int cur_fd;             /* an O_PATH of the last parent, or -1 */
	struct dir_fix *fix;
	size_t nfix, capfix;
	bool failed;
	int fail_rc;
	char entry[AGENT_TAR_NAME_MAX + 1];
	struct agent_tarfs_stats st;
};

static int
mkdir_p(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
agent_tarfs_x_open(struct agent_tarfs_x **out, const char *root, bool create, char *err,
		   size_t errsz)
{
	struct agent_tarfs_x *x;
	int fd, rc;

	*out = NULL;
	if (create && (rc = mkdir_p(root)) < 0) {
		snprintf(err, errsz, "creating %s: %s", root, strerror(-rc));
		return rc;
	}
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "%s: %s", root, strerror(errno));
		return rc;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		close(fd);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	x->root = fd;
	x->fd = -1;
	x->cur_fd = -1;
	agent_tar_dec_init(&x->dec);
	*out = x;
	return 0;
}

static int
xfail(struct agent_tarfs_x *x, int rc, const char *entry, char *err, size_t errsz,
      const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int
xfail(struct agent_tarfs_x *x, int rc, const char *entry, char *err, size_t errsz,
      const char *fmt, ...)
{
	va_list ap;

	snprintf(x->entry, sizeof(x->entry), "%s", entry ? entry : "");
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	x->failed = true;
	x->fail_rc = rc;
	if (x->fd >= 0) {
		close(x->fd);
		x->fd = -1;
	}
	return rc;
}

/* An O_PATH descriptor of the directory `dir` below the root ("" the root
 * itself), made (0700) where missing, never through a link. The caller
 * must not close it (it is cached). 0, or -errno; *bad names the
 * component at fault. */
static int
parent_fd(struct agent_tarfs_x *x, const char *dir, int *out, const char **why)
{
	char comp[256];
	const char *p = dir;
	int fd;

	if (x->cur_fd >= 0 && strcmp(x->cur_dir, dir) == 0) {
		*out = x->cur_fd;
		return 0;
	}
	if (x->cur_fd >= 0)
		close(x->cur_fd);
	x->cur_fd = -1;
	fd = dup(x->root);
	if (fd < 0)
		return -errno;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		int nfd;
		struct stat st;

		memcpy(comp, p, n); /* n <= 255: the decoder checked */
		comp[n] = '\0';
		p += n + (slash ? 1 : 0);
		nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT) {
			if (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) {
				int e = errno;

				close(fd);
				*why = "cannot make a parent directory";
				return -e;
			}
			nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0) {
			int e = errno;

			if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
				*why = "it goes through a symbolic link";
				close(fd);
				return -EBADMSG;
			}
			if (e == ENOTDIR || e == ELOOP) {
				*why = "a parent is not a directory";
				close(fd);
				return -EBADMSG;
			}
			*why = "cannot open a parent directory";
			close(fd);
			return -e;
		}
		close(fd);
		fd = nfd;
	}
	snprintf(x->cur_dir, sizeof(x->cur_dir), "%s", dir);
	x->cur_fd = fd;
	*out = fd;
	return 0;
}

static int
fix_add(struct agent_tarfs_x *x, const char *name, unsigned mode, int64_t mtime)
{
	if (x->nfix == x->capfix) {
		size_t cap = x->capfix ? x->capfix * 2 : 64;
		struct dir_fix *f;

		if (x->nfix >= AGENT_TARFS_DIRS_MAX)
			return -E2BIG;
		f = realloc(x->fix, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		x->fix = f;
		x->capfix = cap;
	}
	x->fix[x->nfix].name = strdup(name);
	if (!x->fix[x->nfix].name)
		return -ENOMEM;
	x->fix[x->nfix].mode = mode & 0777;
	x->fix[x->nfix].mtime = mtime;
	x->nfix++;
	return 0;
}

/* Removes what is at name (a file or link) so that it can be made anew;
 * a directory there is refused. 0 or -errno. */
static int
clear_name(int pfd, const char *name)
{
	struct stat st;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static void
set_times(int dfd, const char *name, int fd, int64_t mtime)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t)mtime } };

	if (fd >= 0)
		futimens(fd, ts);
	else if (name)
		utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

static int
entry_begin(struct agent_tarfs_x *x, const struct agent_tar_entry *e, char *err, size_t errsz)
{
	char dir[AGENT_TAR_NAME_MAX + 1];
	const char *slash = strrchr(e->name, '/'), *base = slash ? slash + 1 : e->name;
	const char *why = NULL;
	struct stat st;
	int pfd, rc;

	if (e->name[0] == '\0') {
		/* the root: its mode and mtime at the end */
		rc = fix_add(x, "", e->mode, e->mtime);
		if (rc < 0)
			return xfail(x, rc, e->name, err, errsz, "%s", strerror(-rc));
		x->st.entries++;
		return 0;
	}
	if (slash) {
		memcpy(dir, e->name, (size_t)(slash - e->name));
		dir[slash - e->name] = '\0';
	} else {
		dir[0] = '\0';
	}
	rc = parent_fd(x, dir, &pfd, &why);
	if (rc < 0)
		return xfail(x, rc, e->name, err, errsz, "\"%s\": %s%s%s", e->name, why,
			     rc == -EBADMSG ? "" : ": ", rc == -EBADMSG ? "" : strerror(-rc));
	switch (e->type) {
	case AGENT_TAR_DIR:
		if (mkdirat(pfd, base, 0700) < 0) {
			if (errno != EEXIST)
				return xfail(x, -errno, e->name, err, errsz, "\"%s\": %s", e->name,
					     strerror(errno));
			if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
				return xfail(x, -EBADMSG, e->name, err, errsz,
					     "\"%s\": exists and is not a directory", e->name);
		}
		rc = fix_add(x, e->name, e->mode, e->mtime);
		if (rc < 0)
			return xfail(x, rc, e->name, err, errsz, "\"%s\": %s", e->name,
				     rc == -E2BIG ? "too many directories" : strerror(-rc));
		x->st.dirs++;
		break;
	case AGENT_TAR_SYMLINK:
		rc = clear_name(pfd, base);
		if (rc < 0 || symlinkat(e->link, pfd, base) < 0)
			return xfail(x, rc < 0 ? rc : -errno, e->name, err, errsz, "\"%s\": %s",
				     e->name, rc == -EISDIR ? "exists and is a directory"
							    : strerror(rc < 0 ? -rc : errno));
		set_times(pfd, base, -1, e->mtime);
		x->st.links++;
		break;
	case AGENT_TAR_FILE:
		rc = clear_name(pfd, base);
		if (rc == 0) {
			x->fd = openat(pfd, base,
				       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (x->fd < 0)
				rc = -errno;
		}
		if (rc < 0)
			return xfail(x, rc, e->name, err, errsz, "\"%s\": %s", e->name,
				     rc == -EISDIR ? "exists and is a directory" : strerror(-rc));
		x->left = e->size;
		x->st.files++;
		break;
	}
	x->st.entries++;
	return 0;
}

static int
file_end(struct agent_tarfs_x *x, const struct agent_tar_entry *e, char *err, size_t errsz)
{
	if (fchmod(x->fd, e->mode & 0777) < 0)
		return xfail(x, -errno, e->name, err, errsz, "\"%s\": %s", e->name, strerror(errno));
	set_times(-1, NULL, x->fd, e->mtime);
	if (close(x->fd) < 0) {
		x->fd = -1;
		return xfail(x, -errno, e->name, err, errsz, "\"%s\": %s", e->name, strerror(errno));
	}
	x->fd = -1;
	return 0;
}

int
agent_tarfs_x_feed(struct agent_tarfs_x *x, const uint8_t *p, size_t len, char *err,
		   size_t errsz)
{
	size_t off = 0;

	if (x->failed) {
		snprintf(err, errsz, "the extraction failed already");
		return x->fail_rc;
	}
	while (off < len) {
		const uint8_t *data;
		size_t used, dlen;
		enum agent_tar_dec_result r =
			agent_tar_dec_feed(&x->dec, p + off, len - off, &used, &data, &dlen);
		int rc;

		off += used;
		switch (r) {
		case AGENT_TAR_AGAIN:
		case AGENT_TAR_END:
			break;
		case AGENT_TAR_ERROR:
			return xfail(x, -EBADMSG, x->dec.err_entry, err, errsz, "%s", x->dec.err);
		case AGENT_TAR_ENTRY:
			rc = entry_begin(x, &x->dec.ent, err, errsz);
			if (rc < 0)
				return rc;
			if (x->dec.ent.type == AGENT_TAR_FILE && x->left == 0 &&
			    (rc = file_end(x, &x->dec.ent, err, errsz)) < 0)
				return rc;
			break;
		case AGENT_TAR_DATA:
			while (dlen > 0) {
				ssize_t n = write(x->fd, data, dlen);

				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					return xfail(x, -errno, x->dec.ent.name, err, errsz,
						     "\"%s\": %s", x->dec.ent.name, strerror(errno));
				data += n;
				dlen -= (size_t)n;
				x->left -= (uint64_t)n;
				x->st.bytes += (uint64_t)n;
			}
			if (x->left == 0 && (rc = file_end(x, &x->dec.ent, err, errsz)) < 0)
				return rc;
			break;
		}
	}
	return 0;
}

int
agent_tarfs_x_finish(struct agent_tarfs_x *x, char *err, size_t errsz)
{
	int rc = 0;

	if (!x->failed && !agent_tar_dec_finish(&x->dec))
		rc = xfail(x, -EBADMSG, x->dec.err_entry, err, errsz, "%s", x->dec.err);
	if (x->fd >= 0) {
		close(x->fd);
		x->fd = -1;
	}
	/* deepest (latest) first: a parent's mode never stops a child's */
	for (size_t i = x->nfix; i-- > 0;) {
		struct dir_fix *f = &x->fix[i];
		const char *why;
		char dir[AGENT_TAR_NAME_MAX + 1];
		const char *slash = strrchr(f->name, '/');
		int pfd, fd;

		if (f->name[0] == '\0') {
			fd = openat(x->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		} else {
			if (slash) {
				memcpy(dir, f->name, (size_t)(slash - f->name));
				dir[slash - f->name] = '\0';
			} else {
				dir[0] = '\0';
			}
			if (parent_fd(x, dir, &pfd, &why) < 0)
				continue;
			fd = openat(pfd, slash ? slash + 1 : f->name,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0)
			continue;
		fchmod(fd, f->mode);
		set_times(-1, NULL, fd, f->mtime);
		close(fd);
	}
	return rc;
}

void
agent_tarfs_x_stats(const struct agent_tarfs_x *x, struct agent_tarfs_stats *st)
{
	*st = x->st;
}

const char *
agent_tarfs_x_entry(const struct agent_tarfs_x *x)
{
	return x->entry;
}

void
agent_tarfs_x_free(struct agent_tarfs_x *x)
{
	if (!x)
		return;
	if (x->fd >= 0)
		close(x->fd);
	if (x->cur_fd >= 0)
		close(x->cur_fd);
	close(x->root);
	for (size_t i = 0; i < x->nfix; i++)
		free(x->fix[i].name);
	free(x->fix);
	free(x);
}

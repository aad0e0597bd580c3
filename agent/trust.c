/* trust.c: sluice's CA inside the guest ("configure" "ca"). See agent.h.
 *
 * The CA goes where the sandbox's own writable layer is, never onto a file
 * the guest shares with the host: a directory or file is changed only when
 * it is writable and on the root's own overlay (the writable layer of an
 * ns sandbox and of a vm guest) or on a tmpfs/ramfs, the guest's memory.
 * The `host` template's /etc/ssl and /usr are read-only binds of the
 * host's own (another mount): they are read (the bundle holds their
 * roots) and left alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "agent.h"

#define OVERLAYFS_MAGIC 0x794c7630
#define TMPFS_MAGIC_    0x01021994
#define RAMFS_MAGIC_    0x858458f6
/* The largest system bundle read (Debian's is about 220 KiB). */
#define ROOTS_MAX (8u * 1024 * 1024)

static const char pem_begin[] = "-----BEGIN CERTIFICATE-----";
static const char pem_end[] = "-----END CERTIFICATE-----";

/* The system bundles, in the order they are looked for: Debian and
 * Alpine, Fedora and RHEL, and the OpenSSL default some others use. */
static const char *const roots_paths[] = {
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
};

/* Directories whose *.crt / *.pem an update tool adds to the bundle:
 * written when they exist, so that a later update-ca-certificates or
 * update-ca-trust keeps sluice's CA. */
static const char *const anchor_paths[] = {
	"/usr/local/share/ca-certificates/sluice.crt",
	"/etc/pki/ca-trust/source/anchors/sluice.pem",
};

/* ---- pure --------------------------------------------------------------- */

static bool
b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '=';
}

/* The line at s[*i..len) without its '\n' (the last may lack one); moves
 * *i past it. */
static size_t
line_at(const char *s, size_t len, size_t *i, const char **out)
{
	const char *nl = memchr(s + *i, '\n', len - *i);
	size_t n = nl ? (size_t)(nl - (s + *i)) : len - *i;

	*out = s + *i;
	*i += n + (nl != NULL);
	return n;
}

static bool
line_is(const char *l, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(l, want, n) == 0;
}

bool
agent_ca_pem_ok(const char *s, size_t len)
{
	size_t i = 0, blocks = 0;

	if (s == NULL || len == 0 || len > AGENT_CA_MAX)
		return false;
	while (i < len) {
		const char *l;
		size_t n = line_at(s, len, &i, &l), body = 0;

		if (!line_is(l, n, pem_begin))
			return false;
		for (;;) {
			if (i >= len)
				return false; /* no END line */
			n = line_at(s, len, &i, &l);
			if (line_is(l, n, pem_end))
				break;
			if (n == 0 || n > 76)
				return false;
			for (size_t k = 0; k < n; k++)
				if (!b64_char(l[k]))
					return false;
			body += n;
		}
		if (body == 0)
			return false;
		blocks++;
	}
	return blocks > 0;
}

static const void *
find_bytes(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
	if (nlen == 0 || hlen < nlen)
		return NULL;
	return memmem(hay, hlen, needle, nlen);
}

/* ca without the newline it may end with: what "contains" compares. */
static size_t
ca_core(const char *ca, size_t calen)
{
	while (calen && (ca[calen - 1] == '\n' || ca[calen - 1] == '\r'))
		calen--;
	return calen;
}

bool
agent_ca_contains(const char *roots, size_t rlen, const char *ca,
		  size_t calen)
{
	return find_bytes(roots, rlen, ca, ca_core(ca, calen)) != NULL;
}

int
agent_ca_bundle(const char *roots, size_t rlen, const char *ca, size_t calen,
		char **out, size_t *outlen)
{
	size_t core = ca_core(ca, calen), n = 0;
	bool has = agent_ca_contains(roots, rlen, ca, calen);
	char *b = malloc(rlen + core + 3);

	*out = NULL;
	*outlen = 0;
	if (b == NULL)
		return -ENOMEM;
	if (rlen) {
		memcpy(b, roots, rlen);
		n = rlen;
		if (b[n - 1] != '\n')
			b[n++] = '\n';
	}
	if (!has) {
		memcpy(b + n, ca, core);
		n += core;
		b[n++] = '\n';
	}
	b[n] = 0;
	*out = b;
	*outlen = n;
	return 0;
}

/* ---- the guest's files -------------------------------------------------- */

static void parent_of(const char *path, char *dir, size_t cap);

/* tmpfs and ramfs are the guest's own memory; an overlay is the
 * sandbox's own only when it is the root's (a bind of another overlay,
 * the host's say, has a device of its own). A file is judged by the
 * directory it really is in (after links). */
static bool
private_fs(const char *path)
{
	char real[PATH_MAX], dir[PATH_MAX];
	struct statfs f;
	struct stat st, rs;

	if (realpath(path, real) == NULL || statfs(real, &f) < 0)
		return false;
	if ((unsigned long)f.f_type == TMPFS_MAGIC_ ||
	    (unsigned long)f.f_type == RAMFS_MAGIC_)
		return true;
	if ((unsigned long)f.f_type != OVERLAYFS_MAGIC || stat(real, &st) < 0)
		return false;
	if (!S_ISDIR(st.st_mode)) {
		parent_of(real, dir, sizeof(dir));
		if (stat(dir, &st) < 0)
			return false;
	}
	return stat("/", &rs) == 0 && rs.st_dev == st.st_dev;
}

bool (*agent_ca_private)(const char *path) = private_fs;

static int
pathf(char *buf, size_t cap, const char *root, const char *p)
{
	if ((size_t)snprintf(buf, cap, "%s%s", root, p) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

/* The directory part of path, in dir. */
static void
parent_of(const char *path, char *dir, size_t cap)
{
	char *slash;

	snprintf(dir, cap, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
}

/* mkdir -p of path below root (which exists), each new level made only
 * inside a private file system. */
static int
mkdirs_private(const char *path)
{
	char p[PATH_MAX];
	struct stat st;

	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	parent_of(path, p, sizeof(p));
	if (strcmp(p, path) == 0)
		return -ENOENT;
	if (mkdirs_private(p) < 0)
		return -EROFS;
	if (!agent_ca_private(p))
		return -EROFS;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Writes data to path whole (a temporary file, fsync, rename). */
static int
write_whole(const char *path, const char *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.sluice-tmp", path) >=
	    sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  mode);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = w < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)w;
	}
	if (rc == 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* Reads a regular file of at most ROOTS_MAX bytes. */
static int
read_all(const char *path, char **out, size_t *outlen)
{
	struct stat st;
	char *b;
	size_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	*out = NULL;
	*outlen = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)ROOTS_MAX) {
		close(fd);
		return -EINVAL;
	}
	b = malloc((size_t)st.st_size + 1);
	if (b == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, b + n, (size_t)st.st_size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (rc < 0) {
		free(b);
		return rc;
	}
	b[n] = 0;
	*out = b;
	*outlen = n;
	return 0;
}

/* Appends the CA to the system bundle at path (following a link, as
 * update tools do), unless it holds it already. Only a private file is
 * changed; a shared one is left as it is (0). */
static int
append_system(const char *path, const char *roots, size_t rlen,
	      const char *ca, size_t calen)
{
	size_t core = ca_core(ca, calen);
	int fd, rc = 0;

	if (agent_ca_contains(roots, rlen, ca, calen))
		return 0;
	if (!agent_ca_private(path) || access(path, W_OK) < 0)
		return 0;
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	errno = 0;
	if ((rlen && roots[rlen - 1] != '\n' && write(fd, "\n", 1) != 1) ||
	    write(fd, ca, core) != (ssize_t)core || write(fd, "\n", 1) != 1)
		rc = errno ? -errno : -EIO;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

#define FAIL(rc_, ...)                                                        \
	do {                                                                  \
		rc = (rc_);                                                   \
		snprintf(err, errsz, __VA_ARGS__);                            \
		goto out;                                                     \
	} while (0)

int
agent_ca_install(const char *root, const char *ca, size_t calen,
		 char *dir, size_t dircap, char *err, size_t errsz)
{
	static const char *const dirs[] = { AGENT_CA_DIR, AGENT_CA_DIR_ALT };
	char p[PATH_MAX], q[PATH_MAX];
	char *roots = NULL, *bundle = NULL;
	size_t rlen = 0, blen = 0;
	const char *sys = NULL;
	int rc = -EROFS;

	dir[0] = 0;
	/* 1. the sandbox's own place for ca.pem and bundle.pem */
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (pathf(p, sizeof(p), root, dirs[i]) < 0)
			FAIL(-ENAMETOOLONG, "%s: path too long", root);
		if (mkdirs_private(p) == 0 && agent_ca_private(p) &&
		    access(p, W_OK) == 0) {
			snprintf(dir, dircap, "%s", dirs[i]);
			break;
		}
	}
	if (!dir[0])
		FAIL(-EROFS, "neither %s nor %s is the sandbox's own (both are "
		     "read-only or shared with the host)", AGENT_CA_DIR,
		     AGENT_CA_DIR_ALT);
	if (pathf(q, sizeof(q), p, "/" AGENT_CA_FILE) < 0)
		FAIL(-ENAMETOOLONG, "%s: path too long", p);
	if ((rc = write_whole(q, ca, calen, 0644)) < 0)
		FAIL(rc, "write %s: %s", q, strerror(-rc));

	/* 2. the guest's system roots, as they are before we add to them */
	for (size_t i = 0; i < sizeof(roots_paths) / sizeof(roots_paths[0]);
	     i++) {
		if (pathf(q, sizeof(q), root, roots_paths[i]) < 0)
			continue;
		rc = read_all(q, &roots, &rlen);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			FAIL(rc, "read %s: %s", q, strerror(-rc));
		sys = roots_paths[i];
		break;
	}

	/* 3. the bundle: those roots, then the CA */
	if ((rc = agent_ca_bundle(roots, rlen, ca, calen, &bundle, &blen)) < 0)
		FAIL(rc, "out of memory");
	if (pathf(q, sizeof(q), p, "/" AGENT_CA_BUNDLE) < 0)
		FAIL(-ENAMETOOLONG, "%s: path too long", p);
	if ((rc = write_whole(q, bundle, blen, 0644)) < 0)
		FAIL(rc, "write %s: %s", q, strerror(-rc));

	/* 4. the system store, where it is the sandbox's own: the bundle
	 * gets the CA appended, or is created when the guest has none */
	if (sys) {
		if (pathf(q, sizeof(q), root, sys) == 0 &&
		    (rc = append_system(q, roots, rlen, ca, calen)) < 0)
			FAIL(rc, "append to %s: %s", q, strerror(-rc));
	} else if (pathf(q, sizeof(q), root, roots_paths[0]) == 0) {
		char d[PATH_MAX];

		parent_of(q, d, sizeof(d));
		if (mkdirs_private(d) == 0 && agent_ca_private(d) &&
		    (rc = write_whole(q, bundle, blen, 0644)) < 0)
			FAIL(rc, "write %s: %s", q, strerror(-rc));
	}
	for (size_t i = 0; i < sizeof(anchor_paths) / sizeof(anchor_paths[0]);
	     i++) {
		char d[PATH_MAX];
		struct stat st;

		if (pathf(q, sizeof(q), root, anchor_paths[i]) < 0)
			continue;
		parent_of(q, d, sizeof(d));
		if (stat(d, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    !agent_ca_private(d) || access(d, W_OK) < 0)
			continue;
		if ((rc = write_whole(q, ca, calen, 0644)) < 0)
			FAIL(rc, "write %s: %s", q, strerror(-rc));
	}
	rc = 0;
out:
	free(roots);
	free(bundle);
	if (rc < 0)
		dir[0] = 0;
	return rc;
}

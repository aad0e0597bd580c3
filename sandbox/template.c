/* template.c: the `ns` backend's templates. A template is a read-only
 * root directory (the overlay's lower layer) plus, for `host`, host
 * directories bound read-only over it. Templates hold programs only: no
 * secrets, no user data, nothing per-sandbox. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-int.h"

int
sbx_mkdir_p(const char *path, mode_t mode)
{
	char p[PATH_MAX];

	if (sbx_pathf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
		errno = ENAMETOOLONG;
		return -ENAMETOOLONG;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_err;

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT && !rm_err)
		rm_err = -errno;
	return 0;
}

int
sbx_rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	rm_err = 0;
	/* FTW_MOUNT: never descend into something mounted below (a stale
	 * bind would otherwise lose its contents). */
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
		return -errno;
	return rm_err;
}

static int
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -errno;
}

/* Is path a static ELF (no PT_INTERP)? A dynamic busybox would not run in
 * a root with no libraries. */
static bool
is_static_elf(const char *path)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = false;

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr)) {
		ok = true;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			        sizeof(ph) ||
			    ph.p_type == PT_INTERP) {
				ok = false;
				break;
			}
		}
	}
	close(fd);
	return ok;
}

static int
copy_file(const char *src, const char *dst, mode_t mode)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out, e = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0) {
		e = -errno;
		close(in);
		return e;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			e = -EIO;
			break;
		}
	if (n < 0)
		e = -errno;
	close(in);
	if (close(out) < 0 && !e)
		e = -errno;
	return e;
}

static const char passwd_txt[] = "root:x:0:0:root:/root:/bin/sh\n"
                                 "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
static const char group_txt[] = "root:x:0:\nnogroup:x:65534:\n";

/* The skeleton every template root gets: mount points and /etc basics. */
static int
skeleton(const char *root)
{
	static const char *const dirs[] = {"proc", "dev",     "tmp",  "etc", "root",
	                                   "run",  "var/tmp", "home", "sys"};
	char p[PATH_MAX];
	int rc;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		sbx_pathf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if ((rc = sbx_mkdir_p(p, 0755)) < 0)
			return rc;
	}
	sbx_pathf(p, sizeof(p), "%s/tmp", root);
	chmod(p, 01777);
	sbx_pathf(p, sizeof(p), "%s/etc/passwd", root);
	if ((rc = write_text(p, passwd_txt)) < 0)
		return rc;
	sbx_pathf(p, sizeof(p), "%s/etc/group", root);
	if ((rc = write_text(p, group_txt)) < 0)
		return rc;
	sbx_pathf(p, sizeof(p), "%s/etc/hosts", root);
	return write_text(p, "127.0.0.1 localhost\n::1 localhost\n");
}

/* Runs `busybox --list-full` and links every applet to /bin/busybox. */
static int
busybox_links(const char *bb, const char *root, char *err, size_t errsz)
{
	int pfd[2], st, rc = 0;
	pid_t pid;
	FILE *f;
	char line[256];

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		execl(bb, "busybox", "--list-full", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	if (!f) {
		close(pfd[0]);
		waitpid(pid, &st, 0);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		char p[PATH_MAX], *slash;
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || strstr(line, "..") || strcmp(line, "bin/busybox") == 0)
			continue;
		sbx_pathf(p, sizeof(p), "%s/%s", root, line);
		slash = strrchr(p, '/');
		*slash = 0;
		sbx_mkdir_p(p, 0755);
		*slash = '/';
		if (symlink("/bin/busybox", p) < 0 && errno != EEXIST && !rc)
			rc = -errno;
	}
	fclose(f);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return sbx_fail(err, errsz, -EIO, "template busybox: %s --list-full failed", bb);
	return rc;
}

static int
build_busybox(const char *tmp, char *err, size_t errsz)
{
	static const char *const cands[] = {"/bin/busybox", "/usr/bin/busybox"};
	const char *bb = NULL;
	char p[PATH_MAX];
	int rc;

	for (size_t i = 0; i < 2; i++)
		if (is_static_elf(cands[i])) {
			bb = cands[i];
			break;
		}
	if (!bb)
		return sbx_fail(err, errsz, -ENOENT,
		                "template busybox: no static busybox in /bin or "
		                "/usr/bin; install the busybox-static package");
	if ((rc = skeleton(tmp)) < 0)
		return sbx_fail(err, errsz, rc, "template busybox: %s: %s", tmp, strerror(-rc));
	sbx_pathf(p, sizeof(p), "%s/bin", tmp);
	sbx_mkdir_p(p, 0755);
	sbx_pathf(p, sizeof(p), "%s/bin/busybox", tmp);
	if ((rc = copy_file(bb, p, 0755)) < 0)
		return sbx_fail(err, errsz, rc, "template busybox: copy %s: %s", bb, strerror(-rc));
	return busybox_links(bb, tmp, err, errsz);
}

/* Host paths the `host` template binds read-only (idmapped: what the
 * host's root owns, the guest's root owns), when they exist. Programs,
 * libraries and public certificates only: never a directory that holds
 * or may hold a secret. /etc/ssl is not bound whole: its private/ holds
 * TLS keys (build_host() copies openssl.cnf instead). */
static const char *const host_binds[] = {
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ssl/certs",
    "/etc/alternatives",
    "/etc/ca-certificates",
};

static int
build_host(const char *tmp, char *err, size_t errsz)
{
	char p[PATH_MAX], lnk[PATH_MAX];
	int rc;

	if ((rc = skeleton(tmp)) < 0)
		return sbx_fail(err, errsz, rc, "template host: %s: %s", tmp, strerror(-rc));
	for (size_t i = 0; i < sizeof(host_binds) / sizeof(host_binds[0]); i++) {
		struct stat st;
		const char *h = host_binds[i];
		if (lstat(h, &st) < 0)
			continue;
		sbx_pathf(p, sizeof(p), "%s%s", tmp, h);
		if (S_ISLNK(st.st_mode)) {
			/* Merged /usr: /bin -> usr/bin stays a link. */
			ssize_t n = readlink(h, lnk, sizeof(lnk) - 1);
			if (n < 0)
				continue;
			lnk[n] = 0;
			if (symlink(lnk, p) < 0 && errno != EEXIST)
				return sbx_fail(err, errsz, -errno, "template host: link %s: %s", p,
				                strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			if ((rc = sbx_mkdir_p(p, 0755)) < 0)
				return sbx_fail(err, errsz, rc, "template host: %s: %s", p,
				                strerror(-rc));
		}
	}
	sbx_pathf(p, sizeof(p), "%s/etc/ld.so.cache", tmp);
	copy_file("/etc/ld.so.cache", p, 0644); /* optional: speeds up ld.so */
	sbx_pathf(p, sizeof(p), "%s/etc/ssl/openssl.cnf", tmp);
	copy_file("/etc/ssl/openssl.cnf", p, 0644); /* optional: OpenSSL's defaults */
	return 0;
}

bool
sbx_tpl_mask_path(const char *src, const char *dst, const char *dir, char *out, size_t cap)
{
	size_t n = strlen(src);

	while (n > 1 && src[n - 1] == '/')
		n--;
	if (n == 1 && src[0] == '/')
		n = 0; /* the host's root: everything is under it */
	else if (strncmp(dir, src, n) != 0 || (dir[n] != 0 && dir[n] != '/'))
		return false;
	return sbx_pathf(out, cap, "%s%s", dst, dir + n) == 0;
}

static void
host_fill_binds(struct sbx_template *t)
{
	for (size_t i = 0;
	     i < sizeof(host_binds) / sizeof(host_binds[0]) && t->nbinds < SBX_TPL_BINDS; i++) {
		struct stat st;
		if (lstat(host_binds[i], &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		sbx_pathf(t->binds[t->nbinds].src, sizeof(t->binds[0].src), "%s", host_binds[i]);
		sbx_pathf(t->binds[t->nbinds].dst, sizeof(t->binds[0].dst), "%s", host_binds[i]);
		t->nbinds++;
	}
}

int
sbx_tpl_dir_check(const char *dir, char *err, size_t errsz)
{
	struct stat st;

	if (!dir || dir[0] != '/' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return sbx_fail(err, errsz, -ENOENT,
		                "template: \"%s\" is not a directory; give the absolute path of "
		                "a root file system",
		                dir ? dir : "");
	return 0;
}

int
sbx_tpl_ensure(const struct sbx_template_req *req, struct sbx_template **out, char *err,
               size_t errsz)
{
	struct sbx_template *t;
	const char *name;
	char dir[PATH_MAX], tmp[PATH_MAX + 32];
	struct stat st;
	int rc;

	t = sbx_calloc(1, sizeof(*t));
	if (!t)
		return sbx_fail(err, errsz, -ENOMEM, "template: out of memory");
	t->kind = req->kind;
	switch (req->kind) {
	case SBX_TEMPLATE_DIR:
		if ((rc = sbx_tpl_dir_check(req->dir, err, errsz)) < 0) {
			free(t);
			return rc;
		}
		sbx_pathf(t->lower, sizeof(t->lower), "%s", req->dir);
		*out = t;
		return 0;
	case SBX_TEMPLATE_BUSYBOX:
		name = "busybox";
		break;
	case SBX_TEMPLATE_HOST:
		name = "host";
		host_fill_binds(t);
		break;
	default:
		free(t);
		return sbx_fail(err, errsz, -EINVAL, "template: unknown kind %d", (int)req->kind);
	}
	sbx_pathf(dir, sizeof(dir), "%s/%s", sbx_g.cache_dir, name);
	sbx_pathf(t->lower, sizeof(t->lower), "%s", dir);
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		*out = t;
		return 0;
	}
	/* Build beside it and rename, so a crash never leaves half a
	 * template where a whole one is expected. */
	if ((rc = sbx_mkdir_p(sbx_g.cache_dir, 0755)) < 0) {
		free(t);
		return sbx_fail(err, errsz, rc, "template: cannot create %s: %s", sbx_g.cache_dir,
		                strerror(-rc));
	}
	sbx_pathf(tmp, sizeof(tmp), "%s.tmp.%d", dir, (int)gettid());
	sbx_rm_tree(tmp);
	if (mkdir(tmp, 0755) < 0) {
		rc = -errno;
		free(t);
		return sbx_fail(err, errsz, rc, "template: cannot create %s: %s", tmp,
		                strerror(-rc));
	}
	rc = req->kind == SBX_TEMPLATE_BUSYBOX ? build_busybox(tmp, err, errsz)
	                                       : build_host(tmp, err, errsz);
	if (rc == 0 && rename(tmp, dir) < 0 && errno != ENOTEMPTY && errno != EEXIST)
		rc = sbx_fail(err, errsz, -errno, "template: rename to %s: %s", dir,
		              strerror(errno));
	sbx_rm_tree(tmp); /* lost a race to another builder: theirs wins */
	if (rc < 0) {
		free(t);
		return rc;
	}
	sbx_log(SBX_LOG_INFO, "template %s built in %s", name, dir);
	*out = t;
	return 0;
}

void
sbx_tpl_free(struct sbx_template *t)
{
	free(t);
}

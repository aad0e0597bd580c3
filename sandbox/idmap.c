/* idmap.c: the host ids an `ns` sandbox runs as. Guest ids 0..65535 of
 * every sandbox map to a range of 65536 host ids of its own, one of
 * `ranges` consecutive ones from `base` (sbx_init_opts.idmap_*), so that
 * guest root is an unprivileged host uid no other sandbox shares.
 *
 * Which ranges are taken is kept in a registry directory shared by every
 * sluice process on the host (sbx_init_opts.idmap_dir): one symlink per
 * range in use, named by the range's first host id and pointing at the
 * state directory of the sandbox that holds it. A range is free when its
 * link is absent, or names a state directory that no longer exists (the
 * sandbox was stopped, swept or forgotten: each of them removes it), so
 * nothing but the state directory has to be kept in step. Every change is
 * made under an flock of <dir>/.lock: threads and processes alike.
 *
 * The user namespace itself is made here too, by a short-lived helper
 * (the parent of a user namespace writes its maps; an existing namespace
 * cannot be made from nothing), and handed back as an fd: ns.c uses it to
 * idmap the template's mounts and the sandbox's first process joins it. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-int.h"

/* ---- pure ---------------------------------------------------------------- */

int
sbx_idmap_check(uint32_t base, uint32_t ranges, char *err, size_t errsz)
{
	uint64_t end = (uint64_t)base + (uint64_t)ranges * SBX_IDMAP_SIZE;

	if (base % SBX_IDMAP_SIZE || base < SBX_IDMAP_SIZE)
		return sbx_fail(err, errsz, -EINVAL,
		                "idmap: base %u must be a multiple of 65536 and at least 65536 "
		                "(0..65535 are the host's own users)",
		                base);
	if (ranges < 1)
		return sbx_fail(err, errsz, -EINVAL, "idmap: ranges must be at least 1");
	/* 4294967295 is (uid_t)-1, "no id", in every interface */
	if (end > 0xffffffffull)
		return sbx_fail(err, errsz, -EINVAL,
		                "idmap: base %u + %u ranges of 65536 go past 4294967294, the "
		                "last host id",
		                base, ranges);
	return 0;
}

bool
sbx_idmap_first_ok(uint32_t first)
{
	return first >= SBX_IDMAP_SIZE && first % SBX_IDMAP_SIZE == 0 &&
	       (uint64_t)first + SBX_IDMAP_SIZE <= 0xffffffffull;
}

int
sbx_idmap_map_text(char *out, size_t cap, uint32_t first)
{
	return sbx_pathf(out, cap, "0 %u %u\n", first, (unsigned)SBX_IDMAP_SIZE);
}

int
sbx_idmap_tmpfs_opts(char *out, size_t cap, const char *opts, uint32_t first)
{
	return sbx_pathf(out, cap, "%s%suid=%u,gid=%u", opts, opts[0] ? "," : "", first, first);
}

/* ---- the registry ----------------------------------------------------------- */

/* Where the next search starts: spread over the ranges, so that a process
 * does not walk every range the others hold before it finds a free one. */
static uint32_t next_hint;

static int
reg_open(const char *dir, int *dfd, int *lk, char *err, size_t errsz)
{
	int rc;

	*dfd = *lk = -1;
	if ((rc = sbx_mkdir_p(dir, 0700)) < 0)
		return sbx_fail(err, errsz, rc, "idmap: registry %s: %s", dir, strerror(-rc));
	*dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dfd >= 0)
		*lk = openat(*dfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*dfd < 0 || *lk < 0) {
		rc = -errno;
		sbx_close_fd(dfd);
		return sbx_fail(err, errsz, rc, "idmap: registry %s: %s", dir, strerror(-rc));
	}
	while (flock(*lk, LOCK_EX) < 0)
		if (errno != EINTR) {
			rc = -errno;
			sbx_close_fd(dfd);
			sbx_close_fd(lk);
			return sbx_fail(err, errsz, rc, "idmap: lock %s/.lock: %s", dir,
			                strerror(-rc));
		}
	return 0;
}

static void
reg_close(int *dfd, int *lk)
{
	sbx_close_fd(lk); /* the lock goes with the last fd of its open file */
	sbx_close_fd(dfd);
}

/* What the entry for first names: 1 a live holder (its target in *who),
 * 0 none (absent, or a holder whose state directory is gone), < 0 an
 * error. */
static int
reg_holder(int dfd, const char *name, char *who, size_t cap)
{
	struct stat st;
	ssize_t n = readlinkat(dfd, name, who, cap - 1);

	if (n < 0) /* EINVAL: not a link; someone else's, left alone */
		return errno == ENOENT ? 0 : errno == EINVAL ? 1 : -errno;
	who[n] = 0;
	if (who[0] != '/')
		return 1;
	/* Gone, or no longer a directory: the sandbox is gone. Any other
	 * failure (EACCES, ELOOP) keeps the range: better a range lost than
	 * a range shared. */
	if (lstat(who, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : 1;
	return S_ISDIR(st.st_mode) ? 1 : 0;
}

/* Makes the entry for name point at owner, replacing a stale one:
 * 0, -EBUSY (a live holder, *who names it) or -errno. */
static int
reg_take(int dfd, const char *name, const char *owner, char *who, size_t cap)
{
	int h;

	if (symlinkat(owner, dfd, name) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if ((h = reg_holder(dfd, name, who, cap)) != 0)
		return h < 0 ? h : strcmp(who, owner) == 0 ? 0 : -EBUSY;
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return symlinkat(owner, dfd, name) == 0 ? 0 : -errno;
}

int
sbx_idmap_reserve(const char *dir, uint32_t base, uint32_t ranges, const char *owner,
                  uint32_t *first, char *err, size_t errsz)
{
	char name[16], who[PATH_MAX];
	uint32_t start = __atomic_load_n(&next_hint, __ATOMIC_RELAXED);
	int dfd, lk, rc;

	if ((rc = reg_open(dir, &dfd, &lk, err, errsz)) < 0)
		return rc;
	/* 0: the first search of this process (a stored hint is slot + 1) */
	if (start == 0)
		start = (uint32_t)getpid() * 2654435761u; /* Knuth's multiplicative hash */
	rc = -ENOSPC;
	for (uint32_t i = 0; i < ranges; i++) {
		uint32_t slot = (start + i) % ranges;
		uint32_t f = base + slot * SBX_IDMAP_SIZE;
		snprintf(name, sizeof(name), "%u", f);
		rc = reg_take(dfd, name, owner, who, sizeof(who));
		if (rc == -EBUSY)
			continue;
		if (rc == 0) {
			*first = f;
			__atomic_store_n(&next_hint, slot + 1, __ATOMIC_RELAXED);
		}
		break;
	}
	reg_close(&dfd, &lk);
	if (rc == -ENOSPC || rc == -EBUSY)
		return sbx_fail(err, errsz, -ENOSPC,
		                "idmap: all %u id ranges from %u are in use (see %s); give "
		                "daemon.idmap more ranges",
		                ranges, base, dir);
	if (rc < 0)
		return sbx_fail(err, errsz, rc, "idmap: %s/%s: %s", dir, name, strerror(-rc));
	return 0;
}

int
sbx_idmap_claim(const char *dir, uint32_t first, const char *owner, char *err, size_t errsz)
{
	char name[16], who[PATH_MAX];
	int dfd, lk, rc;

	if ((rc = reg_open(dir, &dfd, &lk, err, errsz)) < 0)
		return rc;
	snprintf(name, sizeof(name), "%u", first);
	rc = reg_take(dfd, name, owner, who, sizeof(who));
	reg_close(&dfd, &lk);
	if (rc == -EBUSY)
		return sbx_fail(err, errsz, -EBUSY, "idmap: range %u is held by %s too", first,
		                who);
	if (rc < 0)
		return sbx_fail(err, errsz, rc, "idmap: %s/%s: %s", dir, name, strerror(-rc));
	return 0;
}

void
sbx_idmap_release(const char *dir, uint32_t first, const char *owner)
{
	char name[16], who[PATH_MAX];
	ssize_t n;
	int dfd, lk;

	if (reg_open(dir, &dfd, &lk, NULL, 0) < 0)
		return;
	snprintf(name, sizeof(name), "%u", first);
	n = readlinkat(dfd, name, who, sizeof(who) - 1);
	if (n >= 0) {
		who[n] = 0;
		if (strcmp(who, owner) == 0)
			unlinkat(dfd, name, 0);
	}
	reg_close(&dfd, &lk);
}

/* ---- the user namespace -------------------------------------------------------- */

#define HELPER_STACK (16 * 1024)

struct helper_arg {
	int rfd;
};

/* The helper: in the new user namespace, it only waits for the parent to
 * be done with it. It shares our memory (CLONE_VM, so that the clone
 * copies no page table) and runs with every signal blocked. It makes raw
 * system calls only: libc's wrappers for cancellation points would write
 * to the thread of ours whose thread pointer it inherited. */
static int
helper_main(void *arg)
{
	const struct helper_arg *a = arg;
	char c;

	/* Our fds are a copy of the parent's: keep none but our pipe end, so
	 * that nothing of the parent's lives on in us. */
	if (a->rfd > 3)
		syscall(SYS_close_range, 3u, (unsigned)a->rfd - 1, 0);
	syscall(SYS_close_range, (unsigned)a->rfd + 1, ~0u, 0);
	while (syscall(SYS_read, a->rfd, &c, 1) > 0)
		;
	syscall(SYS_exit, 0);
	return 0;
}

static int
write_map(pid_t pid, const char *file, const char *text)
{
	char p[64];
	size_t len = strlen(text);
	int fd, rc = 0;

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		rc = -errno;
	close(fd);
	return rc;
}

void
sbx_userns_done(struct sbx_userns *u)
{
	int st;

	sbx_close_fd(&u->wfd);
	if (u->helper > 0)
		while (waitpid(u->helper, &st, __WALL) < 0 && errno == EINTR)
			;
	u->helper = -1;
	if (u->stack) {
		munmap(u->stack, HELPER_STACK);
		u->stack = NULL;
	}
}

void
sbx_userns_close(struct sbx_userns *u)
{
	sbx_userns_done(u);
	sbx_close_fd(&u->fd);
}

int
sbx_userns_open(uint32_t first, struct sbx_userns *u, char *err, size_t errsz)
{
	struct helper_arg *a;
	char map[64], p[64];
	sigset_t all, old;
	int pfd[2], rc;

	u->fd = u->wfd = -1;
	u->helper = -1;
	u->stack = mmap(NULL, HELPER_STACK, PROT_READ | PROT_WRITE,
	                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (u->stack == MAP_FAILED) {
		u->stack = NULL;
		return sbx_fail(err, errsz, -errno, "start: user namespace: %s", strerror(errno));
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		sbx_userns_done(u);
		return sbx_fail(err, errsz, rc, "start: user namespace: %s", strerror(-rc));
	}
	/* The argument lives at the bottom of the helper's own stack. */
	a = u->stack;
	a->rfd = pfd[0];
	u->wfd = pfd[1];
	/* No handler of ours may run in the helper: it shares our memory. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	u->helper = clone(helper_main, (char *)u->stack + HELPER_STACK,
	                  CLONE_NEWUSER | CLONE_VM | SIGCHLD, a);
	rc = u->helper < 0 ? -errno : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(pfd[0]);
	if (rc < 0) {
		u->helper = -1;
		sbx_userns_done(u);
		return sbx_fail(err, errsz, rc, "start: user namespace: clone: %s", strerror(-rc));
	}
	/* setgroups stays "allow": see docs/sandboxes.md, "User namespace". */
	sbx_idmap_map_text(map, sizeof(map), first);
	if ((rc = write_map(u->helper, "uid_map", map)) < 0 ||
	    (rc = write_map(u->helper, "gid_map", map)) < 0) {
		sbx_userns_done(u);
		return sbx_fail(err, errsz, rc, "start: user namespace: writing its map (%.*s): %s",
		                (int)strcspn(map, "\n"), map, strerror(-rc));
	}
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)u->helper);
	if ((u->fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = -errno;
		sbx_userns_done(u);
		return sbx_fail(err, errsz, rc, "start: user namespace: %s: %s", p, strerror(-rc));
	}
	/* The helper may go now; it is reaped later (sbx_userns_done()),
	 * when it has had time to exit without us waiting for it. */
	sbx_close_fd(&u->wfd);
	return 0;
}

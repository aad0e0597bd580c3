/* faultfs: an LD_PRELOAD shim for tests/e2e/faults.sh. While the file
 * named by the environment variable SL_FAULT_CTL exists, fdatasync() and
 * fsync() fail with EIO (a failing disk); otherwise they are the real
 * ones (dlsym(RTLD_NEXT)). SL_FAULT_CTL unset or empty: always the real
 * ones. The variable is read once, when the library is loaded (a daemon
 * may change its environment later; the control file is what the test
 * flips). Each injected failure bumps a counter written, best effort, to
 * SL_FAULT_CTL.count (so the test can see the shim was in play). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char ctl[4096];
static char cnt[4096 + 8];
static unsigned long nfail;

__attribute__((constructor)) static void
faultfs_init(void)
{
	const char *p = getenv("SL_FAULT_CTL");

	if (p && *p && strlen(p) < sizeof(ctl)) {
		snprintf(ctl, sizeof(ctl), "%s", p);
		snprintf(cnt, sizeof(cnt), "%s.count", p);
	}
}

/* The control file exists: this call fails (errno EIO, and counted). */
static int
faulty(void)
{
	int saved = errno, fd, n;
	unsigned long k;
	char buf[32];

	if (!ctl[0] || access(ctl, F_OK) != 0) {
		errno = saved;
		return 0;
	}
	k = __atomic_add_fetch(&nfail, 1, __ATOMIC_RELAXED);
	fd = open(cnt, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		n = snprintf(buf, sizeof(buf), "%lu\n", k);
		if (write(fd, buf, (size_t)n) < 0) {
			/* best effort */
		}
		close(fd);
	}
	errno = EIO;
	return 1;
}

typedef int (*sync_fn)(int);

static sync_fn
real(const char *name, sync_fn *slot)
{
	sync_fn f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!f) {
		f = (sync_fn)dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

int
fdatasync(int fd)
{
	static sync_fn slot;
	sync_fn f;

	if (faulty())
		return -1;
	f = real("fdatasync", &slot);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(fd);
}

int
fsync(int fd)
{
	static sync_fn slot;
	sync_fn f;

	if (faulty())
		return -1;
	f = real("fsync", &slot);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(fd);
}

/* ns_child.c: an `ns` sandbox's first process, from clone() to exec. It
 * starts as the host's root in new mount, pid, net, uts and ipc
 * namespaces that the host's user namespace owns, and waits on a pipe
 * while the parent puts it in its cgroup and wires its network. Then,
 * still the host's root (only that may idmap a mount of a host file
 * system, mknod, or set the host name of a namespace the host owns), it
 * builds the guest's root; last it joins the sandbox's user namespace as
 * its root, that is, an unprivileged host uid, keeps a few capabilities
 * there, and execs the agent.
 *
 * Every namespace but the user namespace stays owned by the host's: what
 * the guest's root can do is what its capabilities allow over its own
 * user namespace, which owns nothing but the guest's own processes and
 * the files its ids own. No mount, no network setting, no host name.
 *
 * The child runs in a copy of the parent's memory, which may have had
 * threads: it allocates nothing and calls nothing that takes a lock.
 * A failure writes a struct ns_child_err to the error pipe, exit 127. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ns-int.h"

/* What the guest's PID 1 keeps, in its own user namespace: enough to run
 * commands as any guest user and manage the files its ids own anywhere in
 * its root. No SYS_ADMIN, NET_ADMIN, NET_RAW, SYS_PTRACE, SYS_MODULE,
 * MKNOD, SYS_RAWIO, ... NET_BIND_SERVICE is kept for the documented set,
 * but the network namespace is the host's: ports below 1024 are opened
 * by the sysctl child_proc() sets instead. */
#define KEEP_CAPS                                                                                  \
	((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_FOWNER) |                 \
	 (1ull << CAP_FSETID) | (1ull << CAP_KILL) | (1ull << CAP_SETGID) | (1ull << CAP_SETUID) | \
	 (1ull << CAP_NET_BIND_SERVICE))

static size_t
cpy(char *dst, const char *src, size_t cap)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
	return n;
}

static __attribute__((noreturn)) void
child_fail(const struct ns_plan *p, const char *step, const char *what)
{
	struct ns_child_err e = {.err = errno};
	size_t n = cpy(e.step, step, sizeof(e.step));

	if (what && n + 2 < sizeof(e.step)) {
		e.step[n++] = ' ';
		cpy(e.step + n, what, sizeof(e.step) - n);
	}
	if (write(p->err_fd, &e, sizeof(e)) < 0) {
		/* nothing more to say */
	}
	_exit(127);
}

static void
child_mount(const struct ns_plan *p, const char *src, const char *dst, const char *type,
            unsigned long flags, const char *data)
{
	if (mount(src, dst, type, flags, data) < 0)
		child_fail(p, "mount", dst);
}

/* A bind of path onto itself, made read-only (inside /proc). */
static void
ro_self_bind(const struct ns_plan *p, const char *path)
{
	child_mount(p, path, path, NULL, MS_BIND | MS_REC, NULL);
	child_mount(p, NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
	            NULL);
}

/* src, cloned (detached: not attached anywhere yet) and idmapped through
 * the sandbox's user namespace: a file host uid 0 owns appears owned by
 * the guest's root, uid N by guest uid N (N < 65536), anything else by
 * nobody. The clone is the guest's only; the host's own mount of src is
 * unchanged. An fd for attach(). */
static int
idmapped(const struct ns_plan *p, const char *src, uint64_t attr, bool recursive)
{
	struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | attr,
	                       .userns_fd = (uint64_t)p->userns_fd};
	unsigned rec = recursive ? AT_RECURSIVE : 0;
	int fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | rec);

	if (fd < 0)
		child_fail(p, "open_tree", src);
	/* EINVAL here: src's file system cannot be idmapped (ns.c says so) */
	if (mount_setattr(fd, "", AT_EMPTY_PATH | rec, &a, sizeof(a)) < 0)
		child_fail(p, "idmap", src);
	return fd;
}

static void
attach(const struct ns_plan *p, int fd, const char *dst)
{
	if (move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		child_fail(p, "move_mount", dst);
	close(fd);
}

static void
join(char *out, size_t cap, const char *a, const char *b)
{
	size_t n = cpy(out, a, cap);

	cpy(out + n, b, cap - n);
}

static void
child_dev(const struct ns_plan *p)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"/null", 1, 3},   {"/zero", 1, 5},    {"/full", 1, 7},
	             {"/random", 1, 8}, {"/urandom", 1, 9}, {"/tty", 5, 0}};
	static const char *const links[][2] = {{"pts/ptmx", "/ptmx"},
	                                       {"/proc/self/fd", "/fd"},
	                                       {"/proc/self/fd/0", "/stdin"},
	                                       {"/proc/self/fd/1", "/stdout"},
	                                       {"/proc/self/fd/2", "/stderr"}};
	char path[PATH_MAX + 32];

	child_mount(p, "tmpfs", p->dev, "tmpfs", MS_NOSUID | MS_NOEXEC, p->dev_opts);
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		join(path, sizeof(path), p->dev, nodes[i].name);
		if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0)
			child_fail(p, "mknod", path);
		/* the guest's root owns its devices, as a host's root does */
		if (chown(path, p->idmap, p->idmap) < 0)
			child_fail(p, "chown", path);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		join(path, sizeof(path), p->dev, links[i][1]);
		if (symlink(links[i][0], path) < 0)
			child_fail(p, "symlink", path);
	}
	join(path, sizeof(path), p->dev, "/pts");
	if (mkdir(path, 0755) < 0)
		child_fail(p, "mkdir", path);
	child_mount(p, "devpts", path, "devpts", MS_NOSUID | MS_NOEXEC,
	            "newinstance,ptmxmode=0666,mode=0620");
	join(path, sizeof(path), p->dev, "/shm");
	if (mkdir(path, 01777) < 0)
		child_fail(p, "mkdir", path);
	child_mount(p, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, p->tmp_opts);
}

/* After child_dev(): the masks are binds of the guest's own /dev/null. */
static void
child_proc(const struct ns_plan *p)
{
	static const char *const ro[] = {"/sys", "/sysrq-trigger", "/irq", "/bus", "/fs"};
	static const char *const masked[] = {"/kcore", "/keys", "/timer_list", "/sched_debug",
	                                     "/kallsyms"};
	char path[PATH_MAX + 64], null[PATH_MAX + 32];
	struct stat st;
	int fd;

	/* Mounted before pivot_root, while the new pid namespace's proc
	 * can still be reached from the old root. */
	child_mount(p, "proc", p->proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	/* The network namespace is the host's (its user namespace owns it),
	 * so CAP_NET_BIND_SERVICE in the guest's user namespace opens no
	 * port: every port is, in this namespace only. Absent before 4.11. */
	join(path, sizeof(path), p->proc, "/sys/net/ipv4/ip_unprivileged_port_start");
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "0", 1) != 1)
			child_fail(p, "write", path);
		close(fd);
	} else if (errno != ENOENT) {
		child_fail(p, "open", path);
	}
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		join(path, sizeof(path), p->proc, ro[i]);
		if (lstat(path, &st) == 0)
			ro_self_bind(p, path);
	}
	join(null, sizeof(null), p->dev, "/null");
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
		join(path, sizeof(path), p->proc, masked[i]);
		if (lstat(path, &st) == 0)
			child_mount(p, null, path, NULL, MS_BIND, NULL);
	}
}

/* Joins the sandbox's user namespace as its root. Before: no host group
 * may stay among the supplementary ones (the map cannot name it, so the
 * guest could never drop it). After: every capability, in that namespace
 * only; child_caps() keeps a few. */
static void
child_userns(const struct ns_plan *p)
{
	/* Raw system calls: libc's set*id and setgroups would signal the
	 * parent's other threads, copied into our memory but not running. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		child_fail(p, "setgroups", NULL);
	if (setns(p->userns_fd, CLONE_NEWUSER) < 0)
		child_fail(p, "join the user namespace", NULL);
	/* From the host's uid 0, unmapped here, to the namespace's 0: a
	 * change to root, so no capability is lost. */
	if (syscall(SYS_setresgid, 0, 0, 0) < 0)
		child_fail(p, "setresgid", NULL);
	if (syscall(SYS_setresuid, 0, 0, 0) < 0)
		child_fail(p, "setresuid", NULL);
}

static void
child_caps(const struct ns_plan *p)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	unsigned long long keep = KEEP_CAPS;

	for (int c = 0; c <= p->cap_last; c++)
		if (!(keep & (1ull << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			child_fail(p, "drop capability", NULL);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int i = 0; i < 2; i++) {
		d[i].effective = d[i].permitted = d[i].inheritable = (uint32_t)(keep >> (32 * i));
	}
	if (syscall(SYS_capset, &h, d) < 0)
		child_fail(p, "capset", NULL);
}

/* The child's first step: closes every fd above 2 but the plan's. The
 * child has a copy of the parent's table (no exec yet, so close-on-exec
 * does not apply): the write end of its own go pipe, and of any sibling
 * start's, and the parent's other fds (other sandboxes' agent streams,
 * listening sockets). Kept, they would outlive a parent that dies before
 * it says go: the read of go would never see EOF, and the child, stuck,
 * would hold the other agents' first streams open, so that they never
 * take the next host's connection. */
static void
child_close_others(const struct ns_plan *p)
{
	int keep[5] = {p->go_fd, p->sock_fd, p->err_fd, p->exe_fd, p->userns_fd};
	unsigned lo = 3;

	for (int i = 1; i < 5; i++)
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (int i = 0; i < 5; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0u, 0);
}

/* The guest's root: the template's root idmapped (read-only) as the
 * overlay's lower layer, the sandbox's upper directory (owned by the
 * guest's root on the host) above it. The layers are named relative to
 * the state directory, so that the guest's /proc/mounts names no host
 * path ("sluice / overlay ...,lowerdir=lower,upperdir=upper,..."). */
static void
child_root(const struct ns_plan *p)
{
	int fds[sizeof(p->binds) / sizeof(p->binds[0])];

	/* The binds are cloned first, from the host's tree as it is: a bind
	 * of a directory above our state directory must not take in this
	 * sandbox's own lower and overlay mounts (an idmapped mount or an
	 * overlay cannot be idmapped again). Recursive: the host's mounts
	 * below a bound directory come along. */
	for (size_t i = 0; i < p->nbinds; i++)
		fds[i] = idmapped(
		    p, p->binds[i].src,
		    p->binds[i].ro ? MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV : 0,
		    true);
	if (chdir(p->dir) < 0)
		child_fail(p, "chdir", p->dir);
	attach(p, idmapped(p, p->lower, MOUNT_ATTR_RDONLY, false), "lower");
	child_mount(p, "sluice", "root", "overlay", 0,
	            "lowerdir=lower,upperdir=upper,workdir=work");
	for (size_t i = 0; i < p->nbinds; i++)
		attach(p, fds[i], p->binds[i].dst);
	for (size_t i = 0; i < p->nmasks; i++)
		child_mount(p, "tmpfs", p->masks[i], "tmpfs",
		            MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, p->mask_opts);
}

int
sbx_ns_child_main(void *arg)
{
	struct ns_plan *p = arg;
	struct sock_fprog prog = {.len = p->nfilter, .filter = p->filter};
	char c;
	int nul;

	child_close_others(p);
	umask(0);
	/* Wait for the parent: cgroup and network come from outside. */
	if (read(p->go_fd, &c, 1) != 1)
		_exit(126);
	/* Our own session and process group: a terminal's SIGINT or SIGHUP
	 * to the starter's group must not reach the sandbox, which outlives
	 * its starter. (No PR_SET_PDEATHSIG either, on purpose.) */
	if (setsid() < 0)
		child_fail(p, "setsid", NULL);
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_fail(p, "unshare cgroup namespace", NULL);
	child_mount(p, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	child_root(p);
	child_dev(p);
	child_proc(p);
	child_mount(p, "tmpfs", p->tmp, "tmpfs", MS_NOSUID | MS_NODEV, p->tmp_opts);
	if (chdir(p->root) < 0)
		child_fail(p, "chdir", p->root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(p, "pivot_root", NULL);
	if (umount2(".", MNT_DETACH) < 0)
		child_fail(p, "umount old root", NULL);
	if (chdir("/") < 0)
		child_fail(p, "chdir /", NULL);
	if (sethostname(p->hostname, strlen(p->hostname)) < 0)
		child_fail(p, "sethostname", NULL);
	child_userns(p);

	/* fds: 0-2 /dev/null, 3 the agent stream, 4 the agent executable,
	 * 5 the error pipe (close-on-exec), nothing else (the user
	 * namespace's fd goes too: we are in it). */
	nul = open("/dev/null", O_RDWR);
	if (nul < 0)
		child_fail(p, "open /dev/null", NULL);
	if (dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 || dup2(p->sock_fd, 3) < 0 ||
	    dup2(p->err_fd, 5) < 0 || (p->exe_fd >= 0 && dup2(p->exe_fd, 4) < 0))
		child_fail(p, "dup2", NULL);
	fcntl(5, F_SETFD, FD_CLOEXEC);
	if (p->exe_fd >= 0)
		fcntl(4, F_SETFD, FD_CLOEXEC);
	p->err_fd = 5;
	syscall(SYS_close_range, 6, ~0u, 0);
	if (nul > 5)
		close(nul);
	/* As the guest's root: a directory it may not enter fails here. */
	if (chdir(p->cwd) < 0)
		child_fail(p, "chdir", p->cwd);
	/* The guest's processes get the usual 022 (a vm guest's kernel
	 * default), not the 0 the set-up above ran with. */
	umask(022);

	child_caps(p);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(p, "no_new_privs", NULL);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		child_fail(p, "seccomp", NULL);
	if (p->exe_fd >= 0)
		syscall(SYS_execveat, 4, "", p->argv, p->envp, AT_EMPTY_PATH);
	else
		execve("/bin/sh", p->argv, p->envp);
	child_fail(p, "exec", p->argv[0]);
}

/* vm.c: the `vm` backend. A sandbox is a QEMU microVM (KVM where usable,
 * else TCG) booted from vmlinux + initramfs.cpio (sluice-agent as /init)
 * with the template's erofs image as its read-only root, a virtio-serial
 * port for the agent stream (a unix socket in its state directory), a
 * tap in the peer namespace, and a QMP socket.
 *
 * Starts are clones: per (template, memory, vcpus, accel, images, qemu)
 * one VM is booted once with its RAM in a shared file and migrated to a
 * state file (x-ignore-shared: RAM stays in the file); each start maps
 * that RAM privately (copy on write), loads the state, and the agent is
 * made unique ("configure": time, entropy, hostname, network, env, cwd).
 * Where a snapshot cannot be made or loaded, the same flow runs on a cold
 * boot. QEMU runs in the peer network namespace, its own session, the
 * sandbox's cgroup, and outlives us; sbx_save() records how to find it.
 * State dirs are <state_dir>/<id>; each has sandbox.json saying "vm" from
 * the moment it is made. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "rtnl.h"
#include "sandbox.h"
#include "vm-int.h"
#include "vm_img.h"

#define MEM_DEFAULT_MB 256
#define MEM_MIN_MB     128
#define TB_MB          64  /* TCG translation cache bound */
#define OVERHEAD_MB    256 /* QEMU, its TCG cache, page cache of the RAM file */
#define PIDS_MAX       128
#define CONSOLE_KB     64 /* the console is a ring buffer this size */
#define HELLO_COLD_MS  60000
#define HELLO_CLONE_MS 15000
#define HELLO_KVM_MS   5000
#define QMP_MS         10000

struct sbx {
	struct sbx_head head; /* first: see sandbox.c */
	pid_t pid;
	int pidfd;
	bool child; /* ours to waitpid */
	unsigned long long start_time;
	int agent_fd;
	int tap_fd; /* during a start: the tap, given to QEMU */
	struct sbx_qmp *qmp;
	int nl_peer;
	struct sbx_link peer;
	struct sbx_cg cg;
	char dir[PATH_MAX];
	char snap[80];
	bool stopped, parked;
};

/* ---- host facts, found once ---------------------------------------------- */

static pthread_mutex_t vm_lock = PTHREAD_MUTEX_INITIALIZER; /* snapshots, accel */
static int accel_kvm = -1;                                  /* -1 unknown, 0 TCG, 1 KVM */

static int64_t
now_ms(void)
{
	return sbx_agent_now_ms();
}

static const char *
qemu_bin(void)
{
	static const char *const c[] = {"/usr/bin/qemu-system-x86_64",
	                                "/usr/local/bin/qemu-system-x86_64"};
	const char *e = getenv("SLUICE_QEMU");

	if (e && e[0] == '/' && access(e, X_OK) == 0)
		return e;
	for (size_t i = 0; i < 2; i++)
		if (access(c[i], X_OK) == 0)
			return c[i];
	return NULL;
}

/* The image directory (CONTRACT 1): $SLUICE_VM_DIR, <agent dir>/../vm,
 * /usr/lib/sluice/vm; the first holding both files. */
static bool
image_dir(char *out, size_t cap)
{
	char cand[3][PATH_MAX];
	int n = 0;
	const char *e = getenv("SLUICE_VM_DIR");

	if (e && e[0])
		snprintf(cand[n++], PATH_MAX, "%s", e);
	if (sbx_g.agent_path[0]) {
		char a[PATH_MAX], *sl;
		snprintf(a, sizeof(a), "%s", sbx_g.agent_path);
		if ((sl = strrchr(a, '/'))) {
			*sl = 0;
			sbx_pathf(cand[n++], PATH_MAX, "%s/../vm", a[0] ? a : "/");
		}
	}
	snprintf(cand[n++], PATH_MAX, "/usr/lib/sluice/vm");
	for (int i = 0; i < n; i++) {
		char k[PATH_MAX + 16], r[PATH_MAX + 16];
		sbx_pathf(k, sizeof(k), "%s/vmlinux", cand[i]);
		sbx_pathf(r, sizeof(r), "%s/initramfs.cpio", cand[i]);
		if (access(k, R_OK) == 0 && access(r, R_OK) == 0) {
			if (!realpath(cand[i], out))
				sbx_pathf(out, cap, "%s", cand[i]);
			return true;
		}
	}
	return false;
}

bool
sbx_vm_available(void)
{
	char d[PATH_MAX];

	return qemu_bin() && image_dir(d, sizeof(d));
}

static unsigned long
host_khz(void)
{
	static unsigned long khz;
	char buf[8192];
	int fd;
	ssize_t n;

	if (khz)
		return khz;
	if ((fd = open("/sys/devices/system/cpu/cpu0/tsc_freq_khz", O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			khz = strtoul(buf, NULL, 10);
		}
	}
	if (!khz && (fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			khz = sbx_vm_cpuinfo_khz(buf);
		}
	}
	return khz;
}

/* SLUICE_VM_SNAPSHOTS=off: every start is a cold boot (for measuring
 * one, or where a host's QEMU cannot restore its own snapshots). */
static bool
snapshots_off(void)
{
	const char *e = getenv("SLUICE_VM_SNAPSHOTS");

	return e && strcmp(e, "off") == 0;
}

static bool
kvm_opens(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ---- launching QEMU ----------------------------------------------------- */

struct args {
	int n;
	bool overflow; /* an argument did not fit: the command line is wrong */
	char *v[80];
	size_t used;
	char buf[16384];
};

static void __attribute__((format(printf, 2, 3))) arg(struct args *a, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (a->n >= (int)(sizeof(a->v) / sizeof(a->v[0])) - 1 || a->used >= sizeof(a->buf)) {
		a->overflow = true;
		return;
	}
	va_start(ap, fmt);
	k = vsnprintf(a->buf + a->used, sizeof(a->buf) - a->used, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof(a->buf) - a->used) {
		a->overflow = true;
		return;
	}
	a->v[a->n++] = a->buf + a->used;
	a->v[a->n] = NULL;
	a->used += (size_t)k + 1;
}

#define TAP_FD 4 /* the tap's fd number in QEMU (3: the exec error pipe) */

struct boot {
	const char *dir;   /* state dir: sockets */
	const char *image; /* template erofs */
	const char *img_dir;
	unsigned mem_mb, vcpus;
	bool kvm;
	const char *ram; /* memory-backend-file path, or NULL (anonymous) */
	bool ram_shared; /* share=on (the template) */
	bool incoming;   /* -incoming defer */
	bool tap;        /* a tap at TAP_FD, else a hubport (no network) */
	const char *hostname;
};

/* QEMU's command line for b into a: 0, or -E2BIG (a path too long). Every
 * path inside an option value goes through sbx_vm_opt_escape(). */
static int
build_args(struct args *a, const struct boot *b)
{
	char cl[512], dir[PATH_MAX * 2], img[PATH_MAX * 2], ram[PATH_MAX * 2];

	a->n = 0;
	a->used = 0;
	a->overflow = false;
	if (sbx_vm_cmdline(cl, sizeof(cl), b->hostname, b->kvm ? 0 : host_khz()) < 0 ||
	    sbx_vm_opt_escape(dir, sizeof(dir), b->dir) < 0 ||
	    sbx_vm_opt_escape(img, sizeof(img), b->image) < 0 ||
	    sbx_vm_opt_escape(ram, sizeof(ram), b->ram ? b->ram : "") < 0)
		return -E2BIG;
	arg(a, "%s", qemu_bin());
	/* seccomp: no obsolete calls, no set*id, no fork/exec, no
	 * priorities or affinities */
	arg(a, "-sandbox");
	arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	arg(a, "-M");
	arg(a, "microvm,acpi=on,pit=off,pic=off%s", b->ram ? ",memory-backend=ram" : "");
	arg(a, "-nodefaults");
	arg(a, "-no-user-config");
	arg(a, "-display");
	arg(a, "none");
	arg(a, "-no-reboot");
	arg(a, "-accel");
	if (b->kvm)
		arg(a, "kvm");
	else
		arg(a, "tcg,tb-size=%d", TB_MB);
	arg(a, "-cpu");
	arg(a, "%s", b->kvm ? "host" : "max");
	arg(a, "-smp");
	arg(a, "%u", b->vcpus);
	arg(a, "-m");
	arg(a, "%uM", b->mem_mb);
	if (b->ram) {
		arg(a, "-object");
		arg(a, "memory-backend-file,id=ram,size=%uM,mem-path=%s,share=%s", b->mem_mb, ram,
		    b->ram_shared ? "on" : "off");
	}
	/* -kernel, -initrd and -append take their value whole */
	arg(a, "-kernel");
	arg(a, "%s/vmlinux", b->img_dir);
	arg(a, "-initrd");
	arg(a, "%s/initramfs.cpio", b->img_dir);
	arg(a, "-append");
	arg(a, "%s", cl);
	arg(a, "-chardev");
	arg(a, "ringbuf,id=con,size=%d", CONSOLE_KB * 1024);
	arg(a, "-serial");
	arg(a, "chardev:con");
	arg(a, "-device");
	arg(a, "virtio-serial-device");
	arg(a, "-chardev");
	arg(a, "socket,id=agent,path=%s/agent.sock,server=on,wait=off", dir);
	arg(a, "-device");
	arg(a, "virtserialport,chardev=agent,name=sluice.agent");
	arg(a, "-drive");
	arg(a, "if=none,id=root,file=%s,format=raw,readonly=on", img);
	arg(a, "-device");
	arg(a, "virtio-blk-device,drive=root");
	arg(a, "-device");
	arg(a, "virtio-rng-device");
	arg(a, "-netdev");
	if (b->tap)
		arg(a, "tap,id=net0,fd=%d,vhost=off", TAP_FD);
	else
		arg(a, "hubport,id=net0,hubid=0");
	arg(a, "-device");
	arg(a, "virtio-net-device,netdev=net0");
	arg(a, "-chardev");
	arg(a, "socket,id=qmp,path=%s/qmp.sock,server=on,wait=off", dir);
	arg(a, "-mon");
	arg(a, "chardev=qmp,mode=control");
	if (b->incoming) {
		arg(a, "-incoming");
		arg(a, "defer");
	}
	return a->overflow ? -E2BIG : 0;
}

/* How a QEMU is launched beyond its arguments. */
struct launch_opt {
	int netns;                      /* enter it (-1: stay in ours) */
	int tap_fd;                     /* given to QEMU as TAP_FD (-1: none) */
	char (*cgprocs)[PATH_MAX + 16]; /* "<dir>/cgroup.procs" paths to join */
	size_t ncg;
	unsigned long long fsize; /* RLIMIT_FSIZE: bounds qemu.log and any file */
	bool die_with_us;         /* PR_SET_PDEATHSIG: the template builder */
};

static int
cap_last_cap(void)
{
	char buf[32];
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return CAP_LAST_CAP;
	buf[n] = 0;
	return atoi(buf) > 0 ? atoi(buf) : CAP_LAST_CAP;
}

/* Forks QEMU: the child enters the netns, its own session and the
 * cgroups, keeps only stdio (QEMU's messages to <dir>/qemu.log) and the
 * tap, bounds file sizes, drops every capability (bounding, ambient,
 * effective, permitted, inheritable) under no_new_privs, and execs with
 * PATH as its whole environment. The parent gets the pid and a pidfd. */
static int
launch(const struct args *a, const char *dir, const struct launch_opt *o, pid_t *pid, int *pidfd,
       char *err, size_t errsz)
{
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	char logp[PATH_MAX + 16];
	int ep[2], logfd, nul, e = 0, last = cap_last_cap();
	pid_t parent = getpid();
	ssize_t n;
	pid_t p;

	sbx_pathf(logp, sizeof(logp), "%s/qemu.log", dir);
	logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (logfd < 0 || nul < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		e = -errno;
		if (logfd >= 0)
			close(logfd);
		if (nul >= 0)
			close(nul);
		return sbx_fail(err, errsz, e, "start: %s: %s", logp, strerror(-e));
	}
	p = fork();
	if (p < 0) {
		e = -errno;
		close(ep[0]);
		close(ep[1]);
		close(logfd);
		close(nul);
		return sbx_fail(err, errsz, e, "start: fork: %s", strerror(-e));
	}
	if (p == 0) {
		const char *step = "setns";
		struct __user_cap_header_struct ch = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct cd[2];
		sigset_t all;
		int hi_ep, hi_tap = -1;
		if (o->die_with_us && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)) {
			step = "pdeathsig";
			errno = errno ? errno : ESRCH;
			goto cfail;
		}
		if (o->netns >= 0 && setns(o->netns, CLONE_NEWNET) < 0)
			goto cfail;
		step = "setsid";
		if (setsid() < 0)
			goto cfail;
		step = "cgroup";
		for (size_t i = 0; i < o->ncg; i++) {
			int fd = open(o->cgprocs[i], O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "0", 1) != 1)
				goto cfail;
			close(fd);
		}
		step = "dup2";
		/* above every target first, so no dup2 below clobbers a source */
		if ((hi_ep = fcntl(ep[1], F_DUPFD_CLOEXEC, 16)) < 0 ||
		    (o->tap_fd >= 0 && (hi_tap = fcntl(o->tap_fd, F_DUPFD_CLOEXEC, 16)) < 0))
			goto cfail;
		ep[1] = hi_ep;
		if (dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 ||
		    dup2(hi_ep, 3) < 0 || (hi_tap >= 0 && dup2(hi_tap, TAP_FD) < 0))
			goto cfail;
		ep[1] = 3;
		fcntl(3, F_SETFD, FD_CLOEXEC);
		syscall(SYS_close_range, TAP_FD + 1, ~0u, 0);
		if (hi_tap < 0)
			close(TAP_FD);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		step = "rlimit";
		signal(SIGXFSZ, SIG_IGN); /* a full log: EFBIG, not death */
		if (setrlimit(RLIMIT_FSIZE, &(struct rlimit){o->fsize, o->fsize}) < 0)
			goto cfail;
		step = "no_new_privs";
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			goto cfail;
		step = "drop capabilities";
		for (int c = 0; c <= last; c++)
			if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
				goto cfail;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
			goto cfail;
		memset(cd, 0, sizeof(cd));
		if (syscall(SYS_capset, &ch, cd) < 0)
			goto cfail;
		step = "exec";
		execve(a->v[0], a->v, envp);
	cfail:
		e = errno;
		if (write(ep[1], &e, sizeof(e)) < 0 || write(ep[1], step, strlen(step)) < 0) {
		}
		_exit(127);
	}
	close(ep[1]);
	close(logfd);
	close(nul);
	{
		char buf[64] = {0};
		do
			n = read(ep[0], buf, sizeof(buf) - 1);
		while (n < 0 && errno == EINTR);
		close(ep[0]);
		if (n > 0) {
			int ce = 0;
			memcpy(&ce, buf, sizeof(ce) <= (size_t)n ? sizeof(ce) : 0);
			while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
				;
			return sbx_fail(err, errsz, ce ? -ce : -EIO, "start: qemu: %s: %s",
			                n > (ssize_t)sizeof(int) ? buf + sizeof(int) : "?",
			                strerror(ce));
		}
	}
	if ((*pidfd = (int)syscall(SYS_pidfd_open, p, 0)) < 0) {
		/* without it, teardown cannot tell QEMU from a reused pid */
		e = -errno;
		kill(p, SIGKILL);
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		return sbx_fail(err, errsz, e, "start: pidfd_open(%d): %s", (int)p, strerror(-e));
	}
	*pid = p;
	return 0;
}

/* The last line of QEMU's own log (why it refused to run), into out. */
static void
qemu_log_tail(const char *dir, char *out, size_t cap)
{
	char p[PATH_MAX + 16], buf[2048];
	int fd;
	ssize_t n;

	out[0] = 0;
	sbx_pathf(p, sizeof(p), "%s/qemu.log", dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = 0;
	char *l = strrchr(buf, '\n');
	sbx_pathf(out, cap, "%s", l ? l + 1 : buf);
}

/* Saves the console ring buffer to <dir>/console.log (debugging a boot),
 * in reads of 8 KiB (each reply is a QMP line; keep them well short of
 * SBX_QMP_LINE_MAX even with JSON escapes). */
static void
dump_console(struct sbx_qmp *q, const char *dir)
{
	char p[PATH_MAX + 16];
	FILE *f = NULL;
	int64_t deadline = now_ms() + 2000;

	if (!q)
		return;
	for (int i = 0; i < CONSOLE_KB / 8 + 1; i++) {
		json_t *args =
		    json_pack("{s:s, s:i, s:s}", "device", "con", "size", 8192, "format", "utf8");
		json_t *ret = NULL;
		int rc =
		    args ? sbx_qmp_cmd(q, "ringbuf-read", args, &ret, deadline, NULL, 0) : -ENOMEM;
		const char *txt = json_string_value(ret);
		json_decref(args);
		if (rc == 0 && txt && txt[0] && !f) {
			sbx_pathf(p, sizeof(p), "%s/console.log", dir);
			f = fopen(p, "we");
		}
		if (rc == 0 && txt && txt[0] && f)
			fputs(txt, f);
		json_decref(ret);
		if (rc < 0 || !txt || !txt[0])
			break;
	}
	if (f)
		fclose(f);
}

/* Connects to the agent's socket (QEMU's chardev; one client at a time),
 * checking the listener is QEMU itself. fd (O_NONBLOCK) or -errno. */
static int
agent_connect(const char *dir, pid_t pid, int64_t deadline, char *err, size_t errsz)
{
	char p[PATH_MAX + 16];

	if (sbx_pathf(p, sizeof(p), "%s/agent.sock", dir) < 0)
		return sbx_fail(err, errsz, -ENAMETOOLONG, "%s/agent.sock is too long", dir);
	return sbx_vm_unix_connect(p, (int)pid, deadline, err, errsz);
}

/* Waits for an incoming or outgoing migration to end. */
static int
migrate_wait(struct sbx_qmp *q, const char *cmd, int64_t deadline, char *err, size_t errsz)
{
	for (;;) {
		json_t *r = NULL;
		int rc = sbx_qmp_cmd(q, cmd, NULL, &r, deadline, err, errsz);
		if (rc < 0)
			return rc;
		const char *st = json_string_value(json_object_get(r, "status"));
		if (st && strcmp(st, "completed") == 0) {
			json_decref(r);
			return 0;
		}
		if (st && (strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)) {
			const char *d = json_string_value(json_object_get(r, "error-desc"));
			rc = sbx_fail(err, errsz, -EIO, "migration %s: %s", st, d ? d : "");
			json_decref(r);
			return rc;
		}
		json_decref(r);
		if (now_ms() > deadline)
			return sbx_fail(err, errsz, -ETIMEDOUT,
			                "migration did not complete in time");
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
}

/* Ends a QEMU we launched without a cgroup (the snapshot builder). */
static void
reap(pid_t pid, int pidfd, struct sbx_qmp *q)
{
	if (q)
		sbx_qmp_cmd(q, "quit", NULL, NULL, now_ms() + 1000, NULL, 0);
	if (!sbx_pidfd_wait(pidfd, 2000))
		kill(pid, SIGKILL); /* our unreaped child: the pid is still its */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (pidfd >= 0)
		close(pidfd);
}

/* ---- snapshots ------------------------------------------------------------ */

struct snapkey {
	char key[17];
	char dir[PATH_MAX];
};

static void
snap_key(const struct sbx_vm_tpl *t, const char *img_dir, unsigned mem, unsigned vcpus, bool kvm,
         struct snapkey *k)
{
	char p[PATH_MAX + 32];
	uint64_t h = SBX_VM_HASH_INIT;

	sbx_pathf(p, sizeof(p), "%s/vmlinux", img_dir);
	h = sbx_vm_hash_stat(h, p);
	sbx_pathf(p, sizeof(p), "%s/initramfs.cpio", img_dir);
	h = sbx_vm_hash_stat(h, p);
	h = sbx_vm_hash_stat(h, t->image);
	h = sbx_vm_hash_stat(h, qemu_bin());
	h = sbx_vm_hash(h, &mem, sizeof(mem));
	h = sbx_vm_hash(h, &vcpus, sizeof(vcpus));
	h = sbx_vm_hash(h, &kvm, sizeof(kvm));
	h = sbx_vm_hash(h, "v1", 2); /* the device set and command line below */
	snprintf(k->key, sizeof(k->key), "%016llx", (unsigned long long)h);
	sbx_pathf(k->dir, sizeof(k->dir), "%s/vm/snap-%s", sbx_g.cache_dir, k->key);
}

#define LOG_FSIZE (1ull << 20) /* qemu.log; a clone or cold boot writes no other file */

/* Hands fd to QEMU as "mig" (getfd over the monitor) for an fd: migration,
 * so that QEMU needs neither a shell (exec:) nor to open the file. */
static int
pass_mig_fd(struct sbx_qmp *q, int fd, char *err, size_t errsz)
{
	json_t *args = json_pack("{s:s}", "fdname", "mig");
	int rc = args ? sbx_qmp_cmd_fd(q, "getfd", args, fd, NULL, now_ms() + QMP_MS, err, errsz)
	              : sbx_fail(err, errsz, -ENOMEM, "out of memory");

	json_decref(args);
	return rc;
}

static int
migrate_start(struct sbx_qmp *q, const char *cmd, char *err, size_t errsz)
{
	json_t *caps = json_pack("{s:[{s:s, s:b}]}", "capabilities", "capability",
	                         "x-ignore-shared", "state", 1);
	json_t *args = json_pack("{s:s}", "uri", "fd:mig");
	int rc = caps && args ? 0 : sbx_fail(err, errsz, -ENOMEM, "out of memory");

	if (rc == 0)
		rc = sbx_qmp_cmd(q, "migrate-set-capabilities", caps, NULL, now_ms() + QMP_MS, err,
		                 errsz);
	if (rc == 0)
		rc = sbx_qmp_cmd(q, cmd, args, NULL, now_ms() + QMP_MS, err, errsz);
	json_decref(caps);
	json_decref(args);
	return rc;
}

/* Boots the template VM and waits for the agent. With save, its RAM is in
 * dir/ram (shared) and the device state is saved to dir/state; without,
 * it is a plain boot (the accelerator probe). The QEMU dies with this
 * thread (PR_SET_PDEATHSIG) so a daemon killed mid-snapshot leaves none. */
static int
boot_template(const struct sbx_vm_tpl *t, const char *img_dir, unsigned mem, unsigned vcpus,
              bool kvm, const char *dir, bool save, int hello_ms, char *err, size_t errsz)
{
	struct args *a = sbx_calloc(1, sizeof(*a));
	struct boot b = {.dir = dir,
	                 .image = t->image,
	                 .img_dir = img_dir,
	                 .mem_mb = mem,
	                 .vcpus = vcpus,
	                 .kvm = kvm,
	                 .ram_shared = true,
	                 .hostname = "sluice"};
	/* QEMU grows the RAM file to mem MiB (ftruncate) and writes the
	 * state through the fd: both count against RLIMIT_FSIZE. */
	struct launch_opt lo = {.netns = -1,
	                        .tap_fd = -1,
	                        .fsize = save ? ((unsigned long long)mem + 64) << 20 : LOG_FSIZE,
	                        .die_with_us = true};
	char ram[PATH_MAX + 16], sp[PATH_MAX + 16], tail[256];
	struct sbx_qmp *q = NULL;
	pid_t pid = -1;
	int pidfd = -1, fd = -1, sfd = -1, rc;
	int64_t t0 = now_ms();

	if (!a)
		return sbx_fail(err, errsz, -ENOMEM, "out of memory");
	sbx_pathf(ram, sizeof(ram), "%s/ram", dir);
	b.ram = save ? ram : NULL;
	if ((rc = build_args(a, &b)) < 0) {
		rc =
		    sbx_fail(err, errsz, rc, "snapshot: QEMU's command line is too long (%s)", dir);
		goto out;
	}
	if ((rc = launch(a, dir, &lo, &pid, &pidfd, err, errsz)) < 0)
		goto out;
	{
		char qp[PATH_MAX + 16];
		sbx_pathf(qp, sizeof(qp), "%s/qmp.sock", dir);
		if ((rc = sbx_qmp_open(qp, pid, now_ms() + QMP_MS, &q, err, errsz)) < 0)
			goto out;
	}
	if ((rc = fd = agent_connect(dir, pid, now_ms() + QMP_MS, err, errsz)) < 0)
		goto out;
	if ((rc = sbx_agent_hello_fd(fd, hello_ms, err, errsz)) < 0)
		goto out;
	sbx_log(SBX_LOG_INFO, "vm: template booted to agent hello in %lld ms (%s)",
	        (long long)(now_ms() - t0), kvm ? "kvm" : "tcg");
	if (!save)
		goto out;
	/* The agent goes back to waiting for a host; let it get there, so
	 * that every clone wakes up waiting. */
	close(fd);
	fd = -1;
	nanosleep(&(struct timespec){0, 200000000}, NULL);
	if ((rc = sbx_qmp_cmd(q, "stop", NULL, NULL, now_ms() + QMP_MS, err, errsz)) < 0)
		goto out;
	sbx_pathf(sp, sizeof(sp), "%s/state", dir);
	if ((sfd = open(sp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		rc = sbx_fail(err, errsz, -errno, "snapshot: %s: %s", sp, strerror(errno));
		goto out;
	}
	if ((rc = pass_mig_fd(q, sfd, err, errsz)) < 0 ||
	    (rc = migrate_start(q, "migrate", err, errsz)) < 0)
		goto out;
	rc = migrate_wait(q, "query-migrate", now_ms() + 60000, err, errsz);
	if (rc == 0 && fsync(sfd) < 0)
		rc = sbx_fail(err, errsz, -errno, "snapshot: fsync %s: %s", sp, strerror(errno));
out:
	if (rc < 0 && q)
		dump_console(q, dir);
	if (rc < 0 && pid > 0 && sbx_pidfd_wait(pidfd, 0)) {
		qemu_log_tail(dir, tail, sizeof(tail));
		if (tail[0] && err && errsz) {
			size_t n = strlen(err);
			snprintf(err + n, errsz - n, " (qemu: %s)", tail);
		}
	}
	if (fd >= 0)
		close(fd);
	if (sfd >= 0)
		close(sfd);
	if (pid > 0)
		reap(pid, pidfd, q);
	sbx_qmp_close(q);
	free(a);
	return rc;
}

/* Removes <cache>/vm/{snap-*,probe}.tmp.<pid> left by a process that
 * died mid-snapshot (its QEMU died with it). Once per process, under
 * vm_lock. */
static void
sweep_stale_tmp(void)
{
	static bool done;
	char root[PATH_MAX + 8], p[PATH_MAX * 2];
	struct dirent *e;
	DIR *d;

	if (done)
		return;
	done = true;
	sbx_pathf(root, sizeof(root), "%s/vm", sbx_g.cache_dir);
	if (!(d = opendir(root)))
		return;
	while ((e = readdir(d))) {
		const char *t = strstr(e->d_name, ".tmp.");
		char *end;
		long pid;
		if (!t ||
		    (strncmp(e->d_name, "snap-", 5) != 0 && strncmp(e->d_name, "probe", 5) != 0))
			continue;
		pid = strtol(t + 5, &end, 10);
		if (*end || pid <= 0 || pid == (long)getpid() ||
		    (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		if (sbx_pathf(p, sizeof(p), "%s/%s", root, e->d_name) == 0 && sbx_rm_tree(p) == 0)
			sbx_log(SBX_LOG_INFO, "vm: removed %s (left by pid %ld)", p, pid);
	}
	closedir(d);
}

/* The snapshot for k, made now if there is none (under vm_lock). */
static int
snap_ensure(const struct sbx_vm_tpl *t, const char *img_dir, unsigned mem, unsigned vcpus, bool kvm,
            const struct snapkey *k, char *err, size_t errsz)
{
	char p[PATH_MAX + 32], tmp[PATH_MAX + 32];
	struct stat st;
	int rc;
	int64_t t0;

	sbx_pathf(p, sizeof(p), "%s/meta", k->dir);
	if (stat(p, &st) == 0)
		return 0;
	sweep_stale_tmp();
	sbx_pathf(tmp, sizeof(tmp), "%s.tmp.%d", k->dir, (int)getpid());
	sbx_rm_tree(tmp);
	if ((rc = sbx_mkdir_p(tmp, 0700)) < 0)
		return sbx_fail(err, errsz, rc, "snapshot: %s: %s", tmp, strerror(-rc));
	t0 = now_ms();
	rc = boot_template(t, img_dir, mem, vcpus, kvm, tmp, true,
	                   kvm ? HELLO_KVM_MS : HELLO_COLD_MS, err, errsz);
	if (rc == 0) {
		FILE *f;
		sbx_pathf(p, sizeof(p), "%s/meta", tmp);
		f = fopen(p, "we");
		if (!f || fprintf(f,
		                  "{\"key\":\"%s\",\"image\":\"%s\",\"mem_mb\":%u,\"vcpus\":%u,"
		                  "\"accel\":\"%s\"}\n",
		                  k->key, t->image, mem, vcpus, kvm ? "kvm" : "tcg") < 0)
			rc = sbx_fail(err, errsz, -EIO, "snapshot: write %s", p);
		if (f && fclose(f) != 0 && rc == 0)
			rc = sbx_fail(err, errsz, -EIO, "snapshot: write %s", p);
		/* the sockets are of no use to a clone */
		sbx_pathf(p, sizeof(p), "%s/qmp.sock", tmp);
		unlink(p);
		sbx_pathf(p, sizeof(p), "%s/agent.sock", tmp);
		unlink(p);
	}
	if (rc == 0 && rename(tmp, k->dir) < 0 && errno != ENOTEMPTY && errno != EEXIST)
		rc = sbx_fail(err, errsz, -errno, "snapshot: rename to %s: %s", k->dir,
		              strerror(errno));
	sbx_rm_tree(tmp);
	if (rc == 0)
		sbx_log(SBX_LOG_INFO, "vm: snapshot %s made in %lld ms (%u MiB, %u vCPU, %s)",
		        k->key, (long long)(now_ms() - t0), mem, vcpus, kvm ? "kvm" : "tcg");
	return rc;
}

/* Snapshot keys that failed lately: until `until`, starts with that key
 * cold-boot instead of paying a template boot each (under vm_lock). */
static struct {
	char key[17];
	unsigned fails;
	int64_t until;
} snap_fail[16];

static bool
snap_backing_off(const char *key)
{
	for (size_t i = 0; i < sizeof(snap_fail) / sizeof(snap_fail[0]); i++)
		if (strcmp(snap_fail[i].key, key) == 0)
			return now_ms() < snap_fail[i].until;
	return false;
}

/* Records the outcome of a snapshot attempt for key; the delay until the
 * next one, or 0 after a success. */
static int64_t
snap_outcome(const char *key, bool ok)
{
	size_t n = sizeof(snap_fail) / sizeof(snap_fail[0]), slot = n;

	for (size_t i = 0; i < n && slot == n; i++)
		if (strcmp(snap_fail[i].key, key) == 0)
			slot = i;
	if (ok) {
		if (slot < n)
			memset(&snap_fail[slot], 0, sizeof(snap_fail[slot]));
		return 0;
	}
	if (slot == n) { /* a free slot, else the one whose wait ends first */
		slot = 0;
		for (size_t i = 0; i < n; i++) {
			if (!snap_fail[i].key[0]) {
				slot = i;
				break;
			}
			if (snap_fail[i].until < snap_fail[slot].until)
				slot = i;
		}
		memset(&snap_fail[slot], 0, sizeof(snap_fail[slot]));
		snprintf(snap_fail[slot].key, sizeof(snap_fail[slot].key), "%s", key);
	}
	snap_fail[slot].fails++;
	int64_t wait = sbx_vm_backoff_ms(snap_fail[slot].fails);
	snap_fail[slot].until = now_ms() + wait;
	return wait;
}

/* Decides KVM or TCG once per process: SLUICE_VM_ACCEL, else KVM if
 * /dev/kvm opens and a plain KVM boot reaches the agent's hello, else
 * TCG. Making a snapshot is a separate matter: its failure does not
 * change the accelerator. Called with vm_lock held. */
static bool
decide_accel(const struct sbx_vm_tpl *t, const char *img_dir, unsigned mem, unsigned vcpus)
{
	const char *e = getenv("SLUICE_VM_ACCEL");
	char err[512];

	if (accel_kvm >= 0)
		return accel_kvm;
	if (e && strcmp(e, "tcg") == 0) {
		accel_kvm = 0;
	} else if (e && strcmp(e, "kvm") == 0) {
		accel_kvm = 1;
	} else if (!kvm_opens()) {
		accel_kvm = 0;
	} else {
		char dir[PATH_MAX + 32];
		int rc;
		sweep_stale_tmp();
		sbx_pathf(dir, sizeof(dir), "%s/vm/probe.tmp.%d", sbx_g.cache_dir, (int)getpid());
		sbx_rm_tree(dir);
		rc = sbx_mkdir_p(dir, 0700);
		if (rc < 0)
			sbx_fail(err, sizeof(err), rc, "%s: %s", dir, strerror(-rc));
		else
			rc = boot_template(t, img_dir, mem, vcpus, true, dir, false, HELLO_KVM_MS,
			                   err, sizeof(err));
		sbx_rm_tree(dir);
		accel_kvm = rc == 0;
		if (!accel_kvm)
			sbx_log(SBX_LOG_WARN, "vm: /dev/kvm opens but a KVM boot failed (%s): TCG",
			        err);
	}
	sbx_log(SBX_LOG_INFO, "vm: accelerator %s%s", accel_kvm ? "kvm" : "tcg",
	        e ? " (SLUICE_VM_ACCEL)" : "");
	return accel_kvm;
}

/* ---- the tap ---------------------------------------------------------------- */

/* Creates tap `name` inside netns (this thread enters it and comes back)
 * and returns its fd, or -errno. Not persistent: it lives while an fd to
 * it does (ours during the start, then QEMU's), so a failed start or a
 * dead QEMU leaves no tap behind. QEMU gets the fd (fd=) and needs no
 * CAP_NET_ADMIN. */
static int
tap_create(int netns, const char *name)
{
	struct ifreq ifr;
	int self, fd, rc = 0;

	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	if (setns(netns, CLONE_NEWNET) < 0) {
		rc = -errno;
		close(self);
		return rc;
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
	} else {
		memset(&ifr, 0, sizeof(ifr));
		ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
		if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
			rc = -errno;
			close(fd);
		} else {
			rc = fd;
		}
	}
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* this thread would stay in the wrong namespace */
	close(self);
	return rc;
}

static int
setup_tap(struct sbx *s, const struct sbx_net *n, int peerns, char *err, size_t errsz)
{
	const char *step = "create tap";
	struct stat st;
	int rc;

	if ((rc = s->tap_fd = tap_create(peerns, n->peer_ifname)) < 0)
		goto out;
	sbx_pathf(s->peer.ifname, sizeof(s->peer.ifname), "%s", n->peer_ifname);
	step = "netlink in the peer namespace";
	if ((rc = s->nl_peer = fw_rtnl_open_in(peerns)) < 0)
		goto out;
	rc = fw_rtnl_ifindex(s->nl_peer, n->peer_ifname);
	s->peer.ifindex = rc > 0 ? rc : 0;
	if (fstat(peerns, &st) == 0)
		s->peer.netns_ino = (unsigned long long)st.st_ino;
	if (n->peer_netns_fd < 0)
		sbx_pathf(s->peer.netns, sizeof(s->peer.netns), "%s", n->peer_netns);
	step = "tap up";
	if ((rc = fw_rtnl_link_up(s->nl_peer, n->peer_ifname, n->mtu)) < 0)
		goto out;
	step = "peer address";
	if (n->peer_address && n->address &&
	    (rc = fw_rtnl_addr_add_p2p(s->nl_peer, n->peer_ifname, n->peer_address, n->address)) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		return sbx_fail(err, errsz, rc, "start: network: %s %s: %s", step, n->peer_ifname,
		                strerror(-rc));
	return 0;
}

/* ---- start ----------------------------------------------------------------- */

static json_t *
vm_save(const struct sbx *s)
{
	struct sbx_vm_saved *sv;
	json_t *j;

	if (s->stopped || s->pid <= 0 || !s->dir[0] || !s->cg.ndirs)
		return NULL;
	if (!(sv = sbx_calloc(1, sizeof(*sv))))
		return NULL;
	sbx_rec_fill(&sv->r, s->head.id, s->pid, s->start_time, s->dir, &s->cg, &s->peer);
	snprintf(sv->snap, sizeof(sv->snap), "%s", s->snap);
	j = sbx_vm_saved_to_json(sv);
	free(sv);
	return j;
}
/* Ends QEMU and removes everything (one teardown path). */
static int
teardown(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
{
	int rc = 0;

	sbx_close_fd(&s->agent_fd);
	sbx_close_fd(&s->tap_fd);
	if (s->pid > 0) {
		if (grace_ms && s->qmp &&
		    sbx_qmp_cmd(s->qmp, "quit", NULL, NULL, now_ms() + grace_ms, NULL, 0) == 0)
			sbx_pidfd_wait(s->pidfd, (int)grace_ms);
		if (s->pidfd < 0 || syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0) < 0)
			kill(s->pid, SIGKILL);
		if (s->child) {
			while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
				;
		} else if (!sbx_pidfd_wait(s->pidfd, 10000)) {
			rc = sbx_fail(err, errsz, -ETIMEDOUT,
			              "stop %s: pid %d did not end 10 s after SIGKILL", s->head.id,
			              (int)s->pid);
		}
		s->pid = -1;
	}
	sbx_qmp_close(s->qmp);
	s->qmp = NULL;
	sbx_close_fd(&s->pidfd);
	/* The tap goes with QEMU's fd; a tap of an older version was
	 * persistent: it is deleted by name and index (ENODEV: gone). */
	rc =
	    sbx_stop_rest(s->head.id, "tap", &s->nl_peer, &s->peer, &s->cg, s->dir, rc, err, errsz);
	s->stopped = true;
	return rc;
}

static void
vm_caps(const struct sbx_backend *b, struct sbx_caps *c)
{
	(void)b;
	c->name = "vm";
	c->limit_memory = true;
	c->limit_pids = false; /* the guest's own processes are not limited */
	c->network = c->files = c->park = true;
	c->mounts = false;
}

static int
vm_template_ensure(const struct sbx_backend *b, const struct sbx_template_req *req,
                   struct sbx_template **out, char *err, size_t errsz)
{
	(void)b;
	struct sbx_vm_tpl *t;
	int rc = sbx_vm_tpl_ensure(req, &t, err, errsz);

	*out = rc == 0 ? (struct sbx_template *)(void *)t : NULL;
	return rc;
}

static void
vm_template_free(struct sbx_template *t)
{
	free(t);
}

/* Launches QEMU for s (clone of snapshot k when k, else a cold boot),
 * connects QMP and the agent, says hello. */
static int
boot_sandbox(struct sbx *s, const struct sbx_vm_tpl *t, const char *img_dir, unsigned mem,
             unsigned vcpus, bool kvm, const struct snapkey *k, const struct sbx_spec *spec,
             int peerns, char *err, size_t errsz)
{
	struct args *a = sbx_calloc(1, sizeof(*a));
	char ram[PATH_MAX + 16], qp[PATH_MAX + 16], sp[PATH_MAX + 16];
	char cgp[SBX_CG__N][PATH_MAX + 16];
	struct launch_opt lo = {.netns = peerns,
	                        .tap_fd = s->tap_fd,
	                        .cgprocs = cgp,
	                        .ncg = s->cg.ndirs,
	                        .fsize = LOG_FSIZE};
	struct boot b = {.dir = s->dir,
	                 .image = t->image,
	                 .img_dir = img_dir,
	                 .mem_mb = mem,
	                 .vcpus = vcpus,
	                 .kvm = kvm,
	                 .hostname = k ? "sluice" : spec->id,
	                 .tap = s->tap_fd >= 0};
	int rc, sfd;

	if (!a)
		return sbx_fail(err, errsz, -ENOMEM, "out of memory");
	if (k) {
		sbx_pathf(ram, sizeof(ram), "%s/ram", k->dir);
		b.ram = ram;
		b.incoming = true;
	}
	if ((rc = build_args(a, &b)) < 0) {
		free(a);
		return sbx_fail(err, errsz, rc, "start: QEMU's command line is too long (%s)",
		                s->dir);
	}
	for (size_t i = 0; i < s->cg.ndirs; i++)
		sbx_pathf(cgp[i], sizeof(cgp[i]), "%s/cgroup.procs", s->cg.dirs[i]);
	rc = launch(a, s->dir, &lo, &s->pid, &s->pidfd, err, errsz);
	free(a);
	if (rc < 0)
		return rc;
	s->child = true;
	sbx_pathf(qp, sizeof(qp), "%s/qmp.sock", s->dir);
	if ((rc = sbx_qmp_open(qp, s->pid, now_ms() + QMP_MS, &s->qmp, err, errsz)) < 0)
		return rc;
	if (k) {
		sbx_pathf(sp, sizeof(sp), "%s/state", k->dir);
		if ((sfd = open(sp, O_RDONLY | O_CLOEXEC)) < 0)
			return sbx_fail(err, errsz, -errno, "start: %s: %s", sp, strerror(errno));
		rc = pass_mig_fd(s->qmp, sfd, err, errsz);
		close(sfd); /* QEMU has its own */
		if (rc < 0 || (rc = migrate_start(s->qmp, "migrate-incoming", err, errsz)) < 0)
			return rc;
		if ((rc = migrate_wait(s->qmp, "query-migrate", now_ms() + 30000, err, errsz)) < 0)
			return rc;
		/* Running after an incoming migration is QEMU's default, but
		 * only with autostart; say it. */
		json_t *st = NULL;
		if (sbx_qmp_cmd(s->qmp, "query-status", NULL, &st, now_ms() + QMP_MS, NULL, 0) ==
		        0 &&
		    !json_is_true(json_object_get(st, "running")))
			rc = sbx_qmp_cmd(s->qmp, "cont", NULL, NULL, now_ms() + QMP_MS, err, errsz);
		json_decref(st);
		if (rc < 0)
			return rc;
	}
	if ((rc = s->agent_fd = agent_connect(s->dir, s->pid, now_ms() + QMP_MS, err, errsz)) < 0)
		return rc;
	return sbx_agent_hello_fd(
	    s->agent_fd, k ? HELLO_CLONE_MS : (kvm ? HELLO_KVM_MS * 4 : HELLO_COLD_MS), err, errsz);
}

/* Undoes a failed boot attempt so another can run in the same dir. */
static void
boot_undo(struct sbx *s)
{
	sbx_close_fd(&s->agent_fd);
	if (s->qmp)
		dump_console(s->qmp, s->dir);
	sbx_qmp_close(s->qmp);
	s->qmp = NULL;
	if (s->pid > 0) {
		/* our unreaped child: its pid cannot be reused before waitpid */
		if (s->pidfd < 0 || syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0) < 0)
			kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	s->pid = -1;
	sbx_close_fd(&s->pidfd);
	char p[PATH_MAX + 16];
	sbx_pathf(p, sizeof(p), "%s/qmp.sock", s->dir);
	unlink(p);
	sbx_pathf(p, sizeof(p), "%s/agent.sock", s->dir);
	unlink(p);
}

static int
vm_start(const struct sbx_template *tpl, const struct sbx_spec *spec, struct sbx **out, char *err,
         size_t errsz)
{
	const struct sbx_vm_tpl *t = (const void *)tpl;
	struct sbx_limits lim = spec->limits;
	char img_dir[PATH_MAX], path[PATH_MAX * 2];
	unsigned mem, vcpus;
	struct snapkey k;
	bool kvm, use_snap = true;
	struct sbx *s;
	int rc, peerns = -1;
	int64_t t0 = now_ms();
	static bool cold_logged;

	if (t->magic != SBX_VM_TPL_MAGIC)
		return sbx_fail(err, errsz, -EINVAL, "start: the template is not a vm template");
	if (spec->nmounts)
		return sbx_fail(err, errsz, -ENOTSUP,
		                "start: the vm backend cannot mount host directories (mount %s); "
		                "use files, or the ns backend",
		                spec->mounts[0].target);
	if (!qemu_bin() || !image_dir(img_dir, sizeof(img_dir)))
		return sbx_fail(err, errsz, -ENOENT,
		                "start: no qemu-system-x86_64 or no guest images (vmlinux, "
		                "initramfs.cpio in $SLUICE_VM_DIR, <agent dir>/../vm or "
		                "/usr/lib/sluice/vm)");
	mem = lim.memory_mb ? lim.memory_mb : MEM_DEFAULT_MB;
	if (mem < MEM_MIN_MB)
		mem = MEM_MIN_MB;
	vcpus = lim.cpus_milli ? (lim.cpus_milli + 999) / 1000 : 1;
	if (!vcpus)
		vcpus = 1;
	lim.memory_mb = mem + OVERHEAD_MB;
	lim.pids = PIDS_MAX;

	if (!(s = sbx_calloc(1, sizeof(*s))))
		return sbx_fail(err, errsz, -ENOMEM, "start: out of memory");
	sbx_pathf(s->head.id, sizeof(s->head.id), "%s", spec->id);
	s->pid = -1;
	s->pidfd = s->agent_fd = s->nl_peer = s->tap_fd = -1;
	if ((rc = sbx_mkdir_p(sbx_g.state_dir, 0700)) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: state dir %s: %s", sbx_g.state_dir,
		              strerror(-rc));
		goto fail;
	}
	sbx_pathf(path, sizeof(path), "%s/%s", sbx_g.state_dir, spec->id);
	if (strlen(path) + sizeof("/agent.sock") > 108) {
		rc = sbx_fail(err, errsz, -ENAMETOOLONG,
		              "start: %s is too long for a unix socket path; shorten the state "
		              "directory",
		              path);
		goto fail;
	}
	if (mkdir(path, 0700) < 0) {
		rc = sbx_fail(err, errsz, -errno,
		              errno == EEXIST ? "start: sandbox id %s is in use (%s)"
		                              : "start: sandbox id %s: %s",
		              spec->id, errno == EEXIST ? path : strerror(errno));
		goto fail;
	}
	sbx_pathf(s->dir, sizeof(s->dir), "%s", path);
	/* Mark the directory ours at once (sweep tells backends apart): a
	 * start that cannot do that would leave orphans no sweep claims. */
	if ((rc = sbx_saved_write(s->dir, json_pack("{s:s, s:s}", "backend", "vm", "id",
	                                            spec->id))) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: %s/%s: %s", s->dir, SBX_SAVED_FILE,
		              strerror(-rc));
		goto fail;
	}
	if ((rc = sbx_cg_create(spec->id, &lim, &s->cg, err, errsz)) < 0)
		goto fail;
	if (spec->net.kind == SBX_NET_LINK) {
		if ((rc = peerns = sbx_open_peer_ns(&spec->net, err, errsz)) < 0)
			goto fail;
		if ((rc = setup_tap(s, &spec->net, peerns, err, errsz)) < 0)
			goto fail;
	}

	pthread_mutex_lock(&vm_lock);
	kvm = decide_accel(t, img_dir, mem, vcpus);
	snap_key(t, img_dir, mem, vcpus, kvm, &k);
	if (snapshots_off()) {
		use_snap = false;
	} else if (snap_backing_off(k.key)) {
		use_snap = false; /* logged when it failed */
	} else {
		char e2[512];
		bool ok = snap_ensure(t, img_dir, mem, vcpus, kvm, &k, e2, sizeof(e2)) == 0;
		int64_t wait = snap_outcome(k.key, ok);
		if (!ok) {
			use_snap = false;
			sbx_log(SBX_LOG_WARN,
			        "vm: no snapshot (%s): cold boots; next attempt in %lld s", e2,
			        (long long)(wait / 1000));
		}
	}
	pthread_mutex_unlock(&vm_lock);

	if (use_snap) {
		char e2[512];
		rc = boot_sandbox(s, t, img_dir, mem, vcpus, kvm, &k, spec, peerns, e2, sizeof(e2));
		if (rc == 0) {
			snprintf(s->snap, sizeof(s->snap), "%s", k.key);
		} else {
			if (!cold_logged)
				sbx_log(SBX_LOG_WARN,
				        "vm: clone of snapshot %s failed (%s): cold boot", k.key,
				        e2);
			cold_logged = true;
			boot_undo(s);
			use_snap = false;
		}
	}
	if (!use_snap &&
	    (rc = boot_sandbox(s, t, img_dir, mem, vcpus, kvm, NULL, spec, peerns, err, errsz)) < 0)
		goto fail;
	if ((rc = sbx_agent_setup(s->agent_fd, spec, true, HELLO_CLONE_MS, err, errsz)) < 0)
		goto fail;
	if ((rc = sbx_read_start_time(s->pid, &s->start_time)) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: /proc/%d/stat: %s", (int)s->pid,
		              strerror(-rc));
		goto fail;
	}
	if ((rc = sbx_saved_write(s->dir, vm_save(s))) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: %s/%s: %s", s->dir, SBX_SAVED_FILE,
		              strerror(-rc));
		goto fail;
	}
	sbx_close_fd(&peerns);
	sbx_close_fd(&s->tap_fd); /* QEMU holds it now */
	sbx_log(SBX_LOG_INFO, "sandbox %s: started (%s, %s) in %lld ms, pid %d", spec->id,
	        s->snap[0] ? "clone" : "cold boot", kvm ? "kvm" : "tcg", (long long)(now_ms() - t0),
	        (int)s->pid);
	*out = s;
	return 0;
fail:
	if (s->qmp && s->dir[0])
		dump_console(s->qmp, s->dir);
	if (s->pid > 0 && sbx_pidfd_wait(s->pidfd, 0) && err && errsz) {
		char tail[256];
		qemu_log_tail(s->dir, tail, sizeof(tail));
		if (tail[0]) {
			size_t n = strlen(err);
			snprintf(err + n, errsz - n, " (qemu: %s)", tail);
		}
	}
	sbx_close_fd(&peerns);
	teardown(s, 0, NULL, 0);
	sbx_log(SBX_LOG_WARN, "sandbox %s: start failed: %s", spec->id, err && errsz ? err : "");
	free(s);
	return rc;
}

static int
vm_agent_fd(const struct sbx *s)
{
	return s->agent_fd >= 0 ? s->agent_fd : -EBADF;
}

static int
vm_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
{
	int rc;

	if (s->stopped && !s->dir[0] && s->cg.ndirs == 0)
		return 0;
	rc = teardown(s, grace_ms, err, errsz);
	sbx_log(rc ? SBX_LOG_WARN : SBX_LOG_INFO, "sandbox %s: stopped%s%s", s->head.id,
	        rc ? ": " : "", rc && err ? err : "");
	return rc;
}

static void
vm_free(struct sbx *s)
{
	if (!s->stopped)
		teardown(s, 0, NULL, 0);
	free(s);
}

static void
vm_release(struct sbx *s)
{
	sbx_close_fd(&s->agent_fd);
	sbx_close_fd(&s->pidfd);
	sbx_close_fd(&s->nl_peer);
	sbx_close_fd(&s->tap_fd);
	sbx_qmp_close(s->qmp);
	sbx_log(SBX_LOG_INFO, "sandbox %s: left running, pid %d", s->head.id, (int)s->pid);
	free(s);
}

static int
vm_park(struct sbx *s, char *err, size_t errsz)
{
	int rc;

	if (s->stopped)
		return sbx_fail(err, errsz, -ESRCH, "park %s: stopped", s->head.id);
	if (s->parked)
		return 0;
	rc = sbx_qmp_cmd(s->qmp, "stop", NULL, NULL, now_ms() + QMP_MS, err, errsz);
	if (rc == 0)
		s->parked = true;
	return rc;
}

static int
vm_unpark(struct sbx *s, char *err, size_t errsz)
{
	int rc;

	if (s->stopped)
		return sbx_fail(err, errsz, -ESRCH, "unpark %s: stopped", s->head.id);
	rc = sbx_qmp_cmd(s->qmp, "cont", NULL, NULL, now_ms() + QMP_MS, err, errsz);
	if (rc == 0)
		s->parked = false;
	return rc;
}

/* ---- adopt, forget, sweep ---------------------------------------------------- */

static int
vm_adopt(const struct sbx_backend *b, const json_t *saved, struct sbx **out, char *err,
         size_t errsz)
{
	struct sbx_vm_saved *sv;
	struct sbx *s = NULL;
	json_t *st = NULL;
	int rc, pidfd = -1;

	(void)b;
	if (!(sv = sbx_calloc(1, sizeof(*sv))) || !(s = sbx_calloc(1, sizeof(*s)))) {
		free(sv);
		return sbx_fail(err, errsz, -ENOMEM, "adopt: out of memory");
	}
	s->pid = -1;
	s->pidfd = s->agent_fd = s->nl_peer = s->tap_fd = -1;
	if ((rc = sbx_vm_saved_parse(saved, sv, err, errsz)) < 0)
		goto out;
	if ((rc = sbx_rec_check(&sv->r, "adopt", "QEMU ", &pidfd, err, errsz)) < 0)
		goto out;
	{
		char qp[PATH_MAX + 16];
		sbx_pathf(qp, sizeof(qp), "%s/qmp.sock", sv->r.state_dir);
		if ((rc = sbx_qmp_open(qp, sv->r.pid, now_ms() + QMP_MS, &s->qmp, err, errsz)) < 0)
			goto out;
	}
	if ((rc = sbx_qmp_cmd(s->qmp, "query-status", NULL, &st, now_ms() + QMP_MS, err, errsz)) <
	    0)
		goto out;
	if (!json_is_true(json_object_get(st, "running")) &&
	    (rc = sbx_qmp_cmd(s->qmp, "cont", NULL, NULL, now_ms() + QMP_MS, err, errsz)) < 0)
		goto out;
	if ((rc = s->agent_fd =
	         agent_connect(sv->r.state_dir, sv->r.pid, now_ms() + QMP_MS, err, errsz)) < 0)
		goto out;
	snprintf(s->head.id, sizeof(s->head.id), "%s", sv->r.id);
	s->pid = sv->r.pid;
	s->pidfd = pidfd;
	pidfd = -1;
	s->start_time = sv->r.start_time;
	sbx_rec_get_cg(&sv->r, &s->cg);
	if (sbx_state_dir_ours(sv->r.state_dir, sv->r.id))
		snprintf(s->dir, sizeof(s->dir), "%s", sv->r.state_dir);
	snprintf(s->snap, sizeof(s->snap), "%s", sv->snap);
	sbx_rec_get_link(&sv->r, &s->peer);
	s->nl_peer = sbx_rec_peer_open(&sv->r);
	sbx_log(SBX_LOG_INFO, "sandbox %s: adopted, pid %d", s->head.id, (int)s->pid);
	*out = s;
	s = NULL;
	rc = 0;
out:
	json_decref(st);
	if (s) {
		sbx_close_fd(&s->agent_fd);
		sbx_qmp_close(s->qmp);
		free(s);
	}
	if (pidfd >= 0)
		close(pidfd);
	free(sv);
	return rc;
}

static int
vm_parse(const json_t *j, void *out, char *err, size_t errsz)
{
	return sbx_vm_saved_parse(j, out, err, errsz);
}

/* Only directories whose record says "vm": the start writes an early one
 * as soon as the state directory exists. */
static const struct sbx_durable vm_durable = {
    .backend = "vm",
    .unrecorded = false,
    .link = "tap",
    .saved_size = sizeof(struct sbx_vm_saved),
    .parse = vm_parse,
};

static int
vm_forget(const struct sbx_backend *b, const json_t *saved, char *err, size_t errsz)
{
	(void)b;
	return sbx_durable_forget(&vm_durable, saved, err, errsz);
}

static int
vm_sweep(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err,
         size_t errsz)
{
	(void)b;
	return sbx_durable_sweep(&vm_durable, keep, nkeep, err, errsz);
}

const struct sbx_backend_ops sbx_vm_ops = {
    .name = "vm",
    .caps = vm_caps,
    .template_ensure = vm_template_ensure,
    .template_free = vm_template_free,
    .start = vm_start,
    .agent_fd = vm_agent_fd,
    .stop = vm_stop,
    .free = vm_free,
    .save = vm_save,
    .adopt = vm_adopt,
    .forget = vm_forget,
    .sweep = vm_sweep,
    .release = vm_release,
    .park = vm_park,
    .unpark = vm_unpark,
};

/* test_sandbox.c: the pure parts of sandbox/: spec validation, cgroup
 * detection, paths and values, CIDR parsing, the seccomp filter run
 * through a small classic-BPF interpreter, and re-adoption's pure parts:
 * the start time from /proc/PID/stat, /proc/PID/cgroup matching, the
 * saved record and its checks. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

/* cmocka needs stdarg, stddef and setjmp first. */
#include <cmocka.h>

#include <jansson.h>

#include "sandbox-int.h"
#include "sandbox.h"

/* ---- spec validation ---------------------------------------------------- */

static struct sbx_spec
good_spec(void)
{
	struct sbx_spec s = {.id = "sbx-1", .net.peer_netns_fd = -1};
	return s;
}

static void
expect_bad(const struct sbx_spec *s, const char *needle)
{
	char err[256] = "";

	assert_int_equal(sbx_spec_validate(s, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

static void
test_spec_bad(void **st)
{
	struct sbx_spec s;
	struct sbx_mount m = {.source = "/srv", .target = "/data"};
	struct sbx_file f = {.path = "/etc/x", .data = "x", .len = 1};
	const char *env[] = {"NOEQUALS"};
	char longid[SBX_ID_MAX + 2];

	(void)st;
	assert_int_equal(sbx_spec_validate(NULL, NULL, 0), -EINVAL);
	s = good_spec();
	s.ca_pem = "";
	expect_bad(&s, "ca_pem");
	s.ca_pem = "hello";
	expect_bad(&s, "ca_pem");
	s.ca_pem = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
	           "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n";
	expect_bad(&s, "private key");
	s.ca_pem = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n";
	assert_int_equal(sbx_spec_validate(&s, NULL, 0), 0);
	s = good_spec();
	s.id = NULL;
	expect_bad(&s, "id");
	s.id = "";
	expect_bad(&s, "id");
	s.id = "a/b";
	expect_bad(&s, "id");
	s.id = "../x";
	expect_bad(&s, "id");
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = 0;
	s.id = longid;
	expect_bad(&s, "id");
	s = good_spec();
	s.hostname = "bad host";
	expect_bad(&s, "hostname");
	s.hostname = "-x";
	expect_bad(&s, "hostname");
	s = good_spec();
	s.limits.memory_mb = 1;
	expect_bad(&s, "memory_mb");
	s.limits.memory_mb = 2u * 1024 * 1024;
	expect_bad(&s, "memory_mb");
	s = good_spec();
	s.limits.cpus_milli = 5;
	expect_bad(&s, "cpus");
	s = good_spec();
	s.limits.pids = 1;
	expect_bad(&s, "pids");
	s = good_spec();
	s.nmounts = 1;
	expect_bad(&s, "mounts");
	s.mounts = &m;
	m.source = "relative";
	expect_bad(&s, "source");
	m.source = "/srv";
	m.target = "/";
	expect_bad(&s, "target");
	m.target = "/a/../etc";
	expect_bad(&s, "target");
	m.target = "/a/./b";
	expect_bad(&s, "target");
	m.target = "data";
	expect_bad(&s, "target");
	s = good_spec();
	s.nenv = 1;
	expect_bad(&s, "env");
	s.env = env;
	expect_bad(&s, "NAME=value");
	env[0] = "=x";
	expect_bad(&s, "NAME=value");
	s = good_spec();
	s.cwd = "work";
	expect_bad(&s, "cwd");
	s.cwd = "/..";
	expect_bad(&s, "cwd");
	s = good_spec();
	s.nfiles = 1;
	s.files = &f;
	f.path = "/";
	expect_bad(&s, "file 0");
	f.path = "/etc/x";
	f.data = NULL;
	expect_bad(&s, "no data");
	f.data = "x";
	f.mode = 010000;
	expect_bad(&s, "mode");
	s = good_spec();
	s.net.kind = SBX_NET_LINK;
	expect_bad(&s, "namespace");
	s.net.peer_netns = "../../etc";
	expect_bad(&s, "namespace");
	s.net.peer_netns = "fleet";
	expect_bad(&s, "peer_ifname");
	s.net.peer_ifname = "sixteen-bytes-xx";
	expect_bad(&s, "peer_ifname");
	s.net.peer_ifname = "a/b";
	expect_bad(&s, "peer_ifname");
	s.net.peer_ifname = "veth0";
	s.net.address = "10.0.0.1";
	expect_bad(&s, "address");
	s.net.address = "10.0.0.1/33";
	expect_bad(&s, "address");
	s.net.address = NULL;
	s.net.gateway = "10.0.0.1";
	expect_bad(&s, "gateway needs");
	s.net.address = "10.0.0.2/24";
	s.net.gateway = "10.0.0.300";
	expect_bad(&s, "gateway");
	s.net.gateway = "10.0.0.1";
	s.net.mtu = 100;
	expect_bad(&s, "mtu");
	s.net.mtu = 0;
	s.net.kind = (enum sbx_net_kind)7;
	expect_bad(&s, "kind");
}

/* Enhanced isolation from a backend that has none (ns): refused before
 * anything is touched (the template is never looked at), not downgraded;
 * rpc says it takes it. */
static void
test_isolation_refused(void **st)
{
	struct sbx_spec s = {.id = "sbx-iso", .isolation = SBX_ISOLATION_ENHANCED};
	const struct sbx_backend *ns = sbx_backend_get("ns");
	struct sbx_caps c;
	struct sbx *out = (struct sbx *)&s;
	char err[256] = "";

	(void)st;
	assert_non_null(ns);
	sbx_caps(ns, &c);
	assert_false(c.isolation_enhanced);
	assert_int_equal(sbx_start(ns, (const struct sbx_template *)&s, &s, &out, err, sizeof(err)),
			 -ENOTSUP);
	assert_null(out);
	assert_non_null(strstr(err, "no enhanced isolation"));
}

static void
test_spec_good(void **st)
{
	struct sbx_mount m = {.source = "/srv", .target = "/data", .read_only = true};
	struct sbx_file f = {.path = "/etc/resolv.conf", .data = "x", .len = 1};
	const char *env[] = {"HTTP_PROXY=http://10.88.1.1:3128", "EMPTY="};
	struct sbx_spec s = {
	    .id = "sbx-Abc_9",
	    .hostname = "box.example",
	    .limits = {.memory_mb = 256, .cpus_milli = 1500, .pids = 256},
	    .mounts = &m,
	    .nmounts = 1,
	    .env = env,
	    .nenv = 2,
	    .cwd = "/work/..x", /* "..x" is a name, not a climb */
	    .files = &f,
	    .nfiles = 1,
	    .net = {.kind = SBX_NET_LINK,
	            .peer_netns_fd = 5,
	            .peer_ifname = "sbx0",
	            .address = "fd00::7/64",
	            .gateway = "fd00::1",
	            .mtu = 1500},
	};
	char err[128] = "";

	(void)st;
	assert_int_equal(sbx_spec_validate(&s, err, sizeof(err)), 0);
	s.net.kind = SBX_NET_NONE;
	assert_int_equal(sbx_spec_validate(&s, err, sizeof(err)), 0);
}

/* ---- cgroups -------------------------------------------------------------- */

static const char mi_v1[] =
    "24 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
    "30 24 0:26 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw\n"
    "33 30 0:29 / /sys/fs/cgroup/cpu rw shared:12 - cgroup cgroup rw,cpu\n"
    "34 30 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
    "35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    "36 30 0:32 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,relatime,pids\n";

static const char mi_v1_joined[] =
    "33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    "35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";

static const char mi_v2[] =
    "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "29 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

static void
test_cg_detect(void **st)
{
	struct sbx_cg_layout l;

	(void)st;
	/* Bad and empty input first. */
	assert_int_equal(sbx_cg_detect("", &l), -ENOENT);
	assert_int_equal(sbx_cg_detect("garbage\n\n - - -\n", &l), -ENOENT);
	assert_int_equal(sbx_cg_detect("1 2 3 / /x rw - cgroup\n", &l), -ENOENT);
	assert_int_equal(sbx_cg_detect(mi_v1 + 10, &l), 0); /* split mid-line */

	assert_int_equal(sbx_cg_detect(mi_v1, &l), 0);
	assert_int_equal(l.version, 1);
	assert_string_equal(l.mount[SBX_CG_MEMORY], "/sys/fs/cgroup/memory");
	assert_string_equal(l.mount[SBX_CG_CPU], "/sys/fs/cgroup/cpu");
	assert_string_equal(l.mount[SBX_CG_PIDS], "/sys/fs/cgroup/pids");

	assert_int_equal(sbx_cg_detect(mi_v1_joined, &l), 0);
	assert_int_equal(l.version, 1);
	assert_string_equal(l.mount[SBX_CG_CPU], "/sys/fs/cgroup/cpu,cpuacct");
	assert_string_equal(l.mount[SBX_CG_PIDS], "");

	assert_int_equal(sbx_cg_detect(mi_v2, &l), 0);
	assert_int_equal(l.version, 2);
	assert_string_equal(l.v2mount, "/sys/fs/cgroup");

	/* Octal escapes in the mount point. */
	assert_int_equal(sbx_cg_detect("1 2 0:1 / /c\\040g rw - cgroup2 none rw\n", &l), 0);
	assert_string_equal(l.v2mount, "/c g");
}

static void
test_cg_self(void **st)
{
	static const char pc1[] = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n"
	                          "2:cpu,cpuacct:/x\n0::/\n";
	static const char pc2[] = "0::/user.slice/session-1.scope\n";
	char out[64];

	(void)st;
	assert_int_equal(sbx_cg_self("", 1, SBX_CG_MEMORY, out, sizeof(out)), -ENOENT);
	assert_int_equal(sbx_cg_self("4memory/x\n", 1, SBX_CG_MEMORY, out, sizeof(out)), -ENOENT);
	assert_int_equal(sbx_cg_self(pc1, 1, SBX_CG_MEMORY, out, 5), -ENAMETOOLONG);
	assert_int_equal(sbx_cg_self(pc1, 1, SBX_CG_MEMORY, out, sizeof(out)), 0);
	assert_string_equal(out, "/process_api/abc");
	assert_int_equal(sbx_cg_self(pc1, 1, SBX_CG_PIDS, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(sbx_cg_self(pc1, 1, SBX_CG_CPU, out, sizeof(out)), 0);
	assert_string_equal(out, "/x");
	assert_int_equal(sbx_cg_self(pc1, 2, SBX_CG_CPU, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(sbx_cg_self(pc2, 2, SBX_CG_MEMORY, out, sizeof(out)), 0);
	assert_string_equal(out, "/user.slice/session-1.scope");
	assert_int_equal(sbx_cg_self(pc2, 1, SBX_CG_MEMORY, out, sizeof(out)), -ENOENT);
}

static const struct sbx_cg_kv *
find_kv(const struct sbx_cg_kv *kv, size_t n, const char *file)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].file, file) == 0)
			return &kv[i];
	static const struct sbx_cg_kv none = {.file = "", .value = ""};

	fail_msg("no %s", file);
	return &none;
}

static void
test_cg_values(void **st)
{
	struct sbx_cg_kv kv[SBX_CG_KV_MAX];
	struct sbx_limits none = {0}, l = {.memory_mb = 64, .cpus_milli = 1500, .pids = 64};
	struct sbx_limits big = {.memory_mb = 1024u * 1024, .cpus_milli = 1024000};
	size_t n;

	(void)st;
	assert_int_equal(sbx_cg_values(1, &none, kv), 0);
	assert_int_equal(sbx_cg_values(2, &none, kv), 0);
	n = sbx_cg_values(1, &l, kv);
	assert_true(n <= SBX_CG_KV_MAX);
	assert_string_equal(find_kv(kv, n, "memory.limit_in_bytes")->value, "67108864");
	assert_true(find_kv(kv, n, "memory.memsw.limit_in_bytes")->optional);
	assert_string_equal(find_kv(kv, n, "cpu.cfs_period_us")->value, "100000");
	assert_string_equal(find_kv(kv, n, "cpu.cfs_quota_us")->value, "150000");
	assert_int_equal(find_kv(kv, n, "cpu.cfs_quota_us")->ctrl, SBX_CG_CPU);
	assert_string_equal(find_kv(kv, n, "pids.max")->value, "64");
	assert_int_equal(find_kv(kv, n, "pids.max")->ctrl, SBX_CG_PIDS);
	n = sbx_cg_values(2, &l, kv);
	assert_string_equal(find_kv(kv, n, "memory.max")->value, "67108864");
	assert_string_equal(find_kv(kv, n, "cpu.max")->value, "150000 100000");
	assert_string_equal(find_kv(kv, n, "pids.max")->value, "64");
	/* The largest valid limits do not overflow. */
	n = sbx_cg_values(2, &big, kv);
	assert_string_equal(find_kv(kv, n, "memory.max")->value, "1099511627776");
	assert_string_equal(find_kv(kv, n, "cpu.max")->value, "102400000 100000");
}

static void
test_cg_path(void **st)
{
	char out[64];

	(void)st;
	assert_int_equal(sbx_cg_path("/sys/fs/cgroup/memory", "/a/b", "sluice", "sbx-1", out, 20),
	                 -ENAMETOOLONG);
	assert_int_equal(
	    sbx_cg_path("/sys/fs/cgroup/memory", "", "sluice", "sbx-1", out, sizeof(out)), 0);
	assert_string_equal(out, "/sys/fs/cgroup/memory/sluice/sbx-1");
	assert_int_equal(sbx_cg_path("/sys/fs/cgroup", "/svc", "/fleet", "x", out, sizeof(out)), 0);
	assert_string_equal(out, "/sys/fs/cgroup/svc/fleet/x");
}

/* ---- seccomp ---------------------------------------------------------------- */

/* Runs a classic BPF seccomp program over d, checking every jump stays in
 * the program; returns the action. */
static uint32_t
bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d)
{
	uint32_t A = 0;

	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(i->k + 4 <= sizeof(*d));
			memcpy(&A, (const char *)d + i->k, 4);
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += A == i->k ? i->jt : i->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += A >= i->k ? i->jt : i->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += (A & i->k) ? i->jt : i->jf;
			break;
		case BPF_RET | BPF_K:
			return i->k;
		default:
			fail_msg("unexpected opcode %#x at %zu", i->code, pc);
		}
		assert_true(pc + 1 < n);
	}
	fail_msg("fell off the end");
	return 0;
}

static uint32_t
verdict(const struct sock_filter *f, size_t n, uint32_t arch, int nr, uint64_t arg0)
{
	struct seccomp_data d = {.nr = nr, .arch = arch};

	d.args[0] = arg0;
	return bpf_run(f, n, &d);
}

static void
test_seccomp(void **st)
{
	struct sock_filter f[SBX_SECCOMP_MAX];
	size_t n = sbx_seccomp_build(f);
	const uint32_t arch = AUDIT_ARCH_X86_64;
	static const int allowed[] = {SYS_read,   SYS_write, SYS_openat,     SYS_execve, SYS_ptrace,
	                              SYS_socket, SYS_mmap,  SYS_exit_group, SYS_wait4,  SYS_kill};

	(void)st;
	assert_true(n > 10 && n <= SBX_SECCOMP_MAX);
	assert_true(sbx_seccomp_ndenied > 30);
	/* Foreign architectures and x32 are killed. */
	assert_int_equal(verdict(f, n, AUDIT_ARCH_I386, SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(verdict(f, n, arch, 0x40000000 | SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	for (size_t i = 0; i < sbx_seccomp_ndenied; i++)
		assert_int_equal(verdict(f, n, arch, sbx_seccomp_denied[i], 0),
		                 SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_mount, 0), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_finit_module, 0), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_kexec_load, 0), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_bpf, 0), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_keyctl, 0), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_clone3, 0), SECCOMP_RET_ERRNO | ENOSYS);
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		assert_int_equal(verdict(f, n, arch, allowed[i], 0), SECCOMP_RET_ALLOW);
	/* fork() and pthread_create() are fine; new namespaces are not. */
	assert_int_equal(verdict(f, n, arch, SYS_clone, SIGCHLD), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(f, n, arch, SYS_clone,
	                         CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
	                             CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
	                             CLONE_CHILD_CLEARTID),
	                 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(f, n, arch, SYS_clone, CLONE_NEWUSER | SIGCHLD),
	                 SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_clone, CLONE_NEWNET), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(verdict(f, n, arch, SYS_clone, CLONE_NEWNS), SECCOMP_RET_ERRNO | EPERM);
}

/* ---- re-adoption: /proc/PID/stat, /proc/PID/cgroup ---------------------- */

/* A stat line with comm and starttime (field 22) as given. */
static void
stat_line(char *out, size_t cap, const char *comm, const char *start)
{
	snprintf(out, cap,
	         "4242 (%s) S 1 4242 4242 0 -1 4194560 1209 0 0 0 3 1 0 0 20 0 1 0 %s "
	         "17592320 806 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n",
	         comm, start);
}

static void
test_stat_starttime(void **st)
{
	static const char *const comms[] = {"agent",
	                                    "a b",
	                                    ") S 1 2 3 (",
	                                    "x) (y",
	                                    "((",
	                                    "",
	                                    "sluice-agent --fd 3) 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9"};
	char line[512];
	unsigned long long v = 0;

	(void)st;
	/* bad input first */
	assert_int_equal(sbx_stat_starttime("", 0, &v), -EINVAL);
	assert_int_equal(sbx_stat_starttime("4242 agent S 1", 14, &v), -EINVAL);
	assert_int_equal(sbx_stat_starttime("4242 (agent) S 1 2", 18, &v), -EINVAL);
	assert_int_equal(sbx_stat_starttime(")(", 2, &v), -EINVAL);
	stat_line(line, sizeof(line), "agent", "x12");
	assert_int_equal(sbx_stat_starttime(line, strlen(line), &v), -EINVAL);
	stat_line(line, sizeof(line), "agent", "");
	assert_int_equal(sbx_stat_starttime(line, strlen(line), &v), -EINVAL);
	stat_line(line, sizeof(line), "agent", "99999999999999999999999");
	assert_int_equal(sbx_stat_starttime(line, strlen(line), &v), -EINVAL);
	/* cut anywhere before field 22 ends: never a value */
	stat_line(line, sizeof(line), "agent", "4352993");
	for (size_t cut = 0; cut < (size_t)(strstr(line, "4352993") - line) + 1; cut++)
		assert_int_equal(sbx_stat_starttime(line, cut, &v), -EINVAL);
	/* comms with spaces and parentheses */
	for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
		v = 0;
		stat_line(line, sizeof(line), comms[i], "4352993");
		assert_int_equal(sbx_stat_starttime(line, strlen(line), &v), 0);
		assert_true(v == 4352993ull);
	}
	/* the last field, with and without its newline */
	snprintf(line, sizeof(line), "1 (a) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77");
	assert_int_equal(sbx_stat_starttime(line, strlen(line), &v), 0);
	assert_true(v == 77);
	/* the real thing: our own start time */
	{
		FILE *f = fopen("/proc/self/stat", "r");
		size_t n;
		assert_non_null(f);
		n = fread(line, 1, sizeof(line) - 1, f);
		fclose(f);
		line[n] = 0;
		assert_int_equal(sbx_stat_starttime(line, n, &v), 0);
		assert_true(v > 0);
	}
}

static void
test_cgroup_names(void **st)
{
	(void)st;
	assert_false(sbx_cgroup_names(NULL, "sbx-1"));
	assert_false(sbx_cgroup_names("", "sbx-1"));
	assert_false(sbx_cgroup_names("0::/sluice/sbx-1", ""));
	assert_false(sbx_cgroup_names("0::/sluice/sbx-12", "sbx-1"));
	assert_false(sbx_cgroup_names("0::/sluice/xsbx-1", "sbx-1"));
	assert_false(sbx_cgroup_names("0::/sluice/sbx-1/sub", "sbx-1"));
	assert_false(sbx_cgroup_names("0::sbx-1", "sbx-1"));
	assert_false(sbx_cgroup_names("garbage sbx-1\n", "sbx-1"));
	assert_true(sbx_cgroup_names("0::/sluice/sbx-1", "sbx-1"));
	assert_true(sbx_cgroup_names("0::/sluice/sbx-1\n", "sbx-1"));
	assert_true(
	    sbx_cgroup_names("9:name=systemd:/\n8:pids:/sluice/sbx-1\n7:blkio:/\n", "sbx-1"));
}

/* ---- re-adoption: the saved record ------------------------------------------ */

static struct sbx_saved
good_saved(void)
{
	struct sbx_saved sv;

	memset(&sv, 0, sizeof(sv));
	snprintf(sv.id, sizeof(sv.id), "sbx-7");
	sv.pid = 31337;
	sv.start_time = 4352993;
	snprintf(sv.state_dir, sizeof(sv.state_dir), "/run/sluice/sandboxes/sbx-7");
	sv.cg_version = 1;
	sv.ncg = 2;
	snprintf(sv.cg[0], sizeof(sv.cg[0]), "/sys/fs/cgroup/memory/sluice/sbx-7");
	snprintf(sv.cg[1], sizeof(sv.cg[1]), "/sys/fs/cgroup/pids/sluice/sbx-7");
	snprintf(sv.sock, sizeof(sv.sock), "%s", SBX_AGENT_SOCK);
	snprintf(sv.peer_ifname, sizeof(sv.peer_ifname), "sbx7");
	sv.peer_ifindex = 12;
	snprintf(sv.peer_netns, sizeof(sv.peer_netns), "fleet");
	sv.peer_netns_ino = 4026532178ull;
	sv.idmap = 1073807360u; /* the second default range */
	return sv;
}

/* good_saved() as JSON with key set to v (NULL: removed), parsed. */
static int
parse_with(const char *key, json_t *v, char *err, size_t errsz)
{
	struct sbx_saved in = good_saved(), out;
	json_t *j = sbx_saved_to_json(&in);
	int rc;

	assert_non_null(j);
	if (v)
		json_object_set_new(j, key, v);
	else
		json_object_del(j, key);
	rc = sbx_saved_parse(j, &out, err, errsz);
	json_decref(j);
	return rc;
}

static void
expect_bad_saved(const char *key, json_t *v, const char *needle)
{
	char err[256] = "";

	assert_int_equal(parse_with(key, v, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("%s: error \"%s\" lacks \"%s\"", key, err, needle);
}

static void
test_saved_bad(void **st)
{
	struct sbx_saved out;
	char err[256], longp[200];

	(void)st;
	assert_int_equal(sbx_saved_parse(NULL, &out, err, sizeof(err)), -EINVAL);
	{
		json_t *a = json_array();
		assert_int_equal(sbx_saved_parse(a, &out, err, sizeof(err)), -EINVAL);
		json_decref(a);
	}
	expect_bad_saved("backend", json_string("vm"), "backend");
	expect_bad_saved("backend", NULL, "backend");
	expect_bad_saved("version", json_integer(2), "version");
	expect_bad_saved("version", json_string("1"), "version");
	expect_bad_saved("id", json_string("../etc"), "id");
	expect_bad_saved("id", json_string(""), "id");
	expect_bad_saved("id", json_integer(7), "id");
	expect_bad_saved("pid", json_integer(1), "pid");
	expect_bad_saved("pid", json_integer(0), "pid");
	expect_bad_saved("pid", json_integer(-5), "pid");
	expect_bad_saved("pid", json_integer(4194305), "pid");
	expect_bad_saved("pid", json_string("31337"), "pid");
	expect_bad_saved("pid", json_real(31337.0), "pid");
	expect_bad_saved("start_time", json_integer(-1), "start_time");
	expect_bad_saved("start_time", json_null(), "start_time");
	expect_bad_saved("state_dir", json_string("run/sluice/sandboxes/sbx-7"), "state_dir");
	expect_bad_saved("state_dir", json_string("/run/sluice/sandboxes/other"), "state_dir");
	expect_bad_saved("state_dir", json_string("/run/../etc/sbx-7"), "state_dir");
	expect_bad_saved("state_dir", json_string("/sbx-7/.."), "state_dir");
	expect_bad_saved("state_dir", json_string("sbx-7"), "state_dir");
	expect_bad_saved("cgroup_version", json_integer(3), "cgroup_version");
	expect_bad_saved("cgroups", json_array(), "cgroups");
	expect_bad_saved("cgroups", json_string("/sys/fs/cgroup/sbx-7"), "cgroups");
	expect_bad_saved("cgroups",
	                 json_pack("[s,s,s,s]", "/a/sbx-7", "/b/sbx-7", "/c/sbx-7", "/d/sbx-7"),
	                 "cgroups");
	expect_bad_saved("cgroups", json_pack("[s]", "/sys/fs/cgroup/sluice/sbx-8"), "cgroup 0");
	expect_bad_saved("cgroups", json_pack("[s]", "/sys/fs/cgroup/../../sbx-7"), "cgroup 0");
	expect_bad_saved("cgroups", json_pack("[s,i]", "/a/sbx-7", 3), "cgroup 1");
	expect_bad_saved("cgroups", json_pack("[s,s]", "/a/sbx-7", "/a/sbx-7"), "twice");
	expect_bad_saved("agent_socket", json_string("run/agent.sock"), "agent_socket");
	expect_bad_saved("agent_socket", json_string("/run/../agent.sock"), "agent_socket");
	expect_bad_saved("agent_socket", json_string("/"), "agent_socket");
	/* "/proc/PID/root" + the path must fit sun_path (108) */
	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	longp[108 - strlen("/proc/31337/root")] = 0; /* exactly 108 with the NUL: too long */
	expect_bad_saved("agent_socket", json_string(longp), "agent_socket");
	longp[107 - strlen("/proc/31337/root")] = 0; /* 107: fits */
	assert_int_equal(parse_with("agent_socket", json_string(longp), err, sizeof(err)), 0);
	expect_bad_saved("net", json_string("x"), "net");
	expect_bad_saved("net", json_pack("{s:s, s:i}", "peer_ifname", "a/b", "peer_ifindex", 2),
	                 "peer_ifname");
	expect_bad_saved(
	    "net", json_pack("{s:s, s:i}", "peer_ifname", "0123456789abcdef", "peer_ifindex", 2),
	    "peer_ifname");
	expect_bad_saved("net", json_pack("{s:s, s:i}", "peer_ifname", "sbx7", "peer_ifindex", -1),
	                 "peer_ifindex");
	expect_bad_saved("net", json_pack("{s:s}", "peer_ifname", "sbx7"), "peer_ifindex");
	expect_bad_saved("net",
	                 json_pack("{s:s, s:i, s:s}", "peer_ifname", "sbx7", "peer_ifindex", 2,
	                           "peer_netns", "../x"),
	                 "peer_netns");
	expect_bad_saved("net",
	                 json_pack("{s:s, s:i, s:s}", "peer_ifname", "sbx7", "peer_ifindex", 2,
	                           "peer_netns", ""),
	                 "peer_netns");
	/* the host ids: a whole range of 65536 on a 65536 boundary, past
	 * the host's own 0..65535 and short of (uid_t)-1 */
	expect_bad_saved("idmap", json_integer(1073807360), "idmap");
	expect_bad_saved("idmap", json_pack("{s:i}", "first", 1073807360), "idmap");
	expect_bad_saved("idmap", json_pack("{s:i, s:i}", "first", 1073807360, "size", 65535),
	                 "idmap");
	expect_bad_saved("idmap", json_pack("{s:i, s:i}", "first", 0, "size", 65536), "idmap");
	expect_bad_saved("idmap", json_pack("{s:i, s:i}", "first", 65535, "size", 65536), "idmap");
	expect_bad_saved("idmap", json_pack("{s:i, s:i}", "first", 1073807361, "size", 65536),
	                 "idmap");
	expect_bad_saved("idmap", json_pack("{s:I, s:i}", "first", 0xffff0000ll, "size", 65536),
	                 "idmap");
	expect_bad_saved("idmap", json_pack("{s:I, s:i}", "first", 0x100000000ll, "size", 65536),
	                 "idmap");
	expect_bad_saved("idmap", json_pack("{s:i, s:i}", "first", -65536, "size", 65536),
	                 "idmap");
	expect_bad_saved("idmap", json_pack("{s:s, s:i}", "first", "1073807360", "size", 65536),
	                 "idmap");
	/* v2 has exactly one cgroup */
	{
		struct sbx_saved in = good_saved();
		json_t *j;
		in.cg_version = 2;
		j = sbx_saved_to_json(&in);
		assert_int_equal(sbx_saved_parse(j, &out, err, sizeof(err)), -EINVAL);
		json_decref(j);
	}
}

static void
test_saved_good(void **st)
{
	struct sbx_saved in = good_saved(), out;
	char err[256] = "";
	json_t *j;
	char *txt;

	(void)st;
	j = sbx_saved_to_json(&in);
	assert_non_null(j);
	/* no secrets: only these keys */
	{
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v)
		{
			static const char *const ok[] = {
			    "backend",   "version",        "id",      "pid",          "start_time",
			    "state_dir", "cgroup_version", "cgroups", "agent_socket", "net",
			    "idmap"};
			bool found = false;
			for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
				found |= strcmp(k, ok[i]) == 0;
			if (!found)
				fail_msg("unexpected key %s", k);
		}
	}
	/* a round trip through text */
	txt = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	j = json_loads(txt, 0, NULL);
	free(txt);
	assert_int_equal(sbx_saved_parse(j, &out, err, sizeof(err)), 0);
	json_decref(j);
	assert_memory_equal(&in, &out, sizeof(in));
	/* no link, no named namespace, v2 */
	in = good_saved();
	memset(in.peer_ifname, 0, sizeof(in.peer_ifname));
	memset(in.peer_netns, 0, sizeof(in.peer_netns));
	in.peer_ifindex = 0;
	in.peer_netns_ino = 0;
	in.cg_version = 2;
	in.ncg = 1;
	memset(in.cg[1], 0, sizeof(in.cg[1]));
	j = sbx_saved_to_json(&in);
	assert_null(json_object_get(j, "net"));
	assert_int_equal(sbx_saved_parse(j, &out, err, sizeof(err)), 0);
	json_decref(j);
	assert_memory_equal(&in, &out, sizeof(in));
	/* a sandbox from before user namespaces: no "idmap", adopted as is */
	in = good_saved();
	in.idmap = 0;
	j = sbx_saved_to_json(&in);
	assert_null(json_object_get(j, "idmap"));
	assert_int_equal(sbx_saved_parse(j, &out, err, sizeof(err)), 0);
	json_decref(j);
	assert_int_equal(out.idmap, 0);
	/* the last range there is */
	assert_int_equal(parse_with("idmap",
	                            json_pack("{s:I, s:i}", "first", 0xfffe0000ll, "size", 65536),
	                            err, sizeof(err)),
	                 0);
	/* a trailing slash in the configured state dir makes "//": fine */
	assert_int_equal(
	    parse_with("state_dir", json_string("/run/sluice/sandboxes//sbx-7"), err, sizeof(err)),
	    0);
}

static void
test_durable_api_bad(void **st)
{
	const struct sbx_backend *b = sbx_backend_get("ns");
	struct sbx *s = (struct sbx *)(uintptr_t)1;
	char err[256] = "";
	json_t *j;

	(void)st;
	assert_int_equal(sbx_init(NULL, err, sizeof(err)), 0);
	assert_null(sbx_save(NULL));
	sbx_release(NULL);
	j = json_pack("{s:s}", "backend", "vm");
	assert_int_equal(sbx_adopt(b, j, &s, err, sizeof(err)), -EINVAL);
	assert_null(s);
	assert_non_null(strstr(err, "backend"));
	assert_int_equal(sbx_forget(b, j, err, sizeof(err)), -EINVAL);
	json_decref(j);
	j = json_string("x");
	assert_int_equal(sbx_adopt(b, j, &s, err, sizeof(err)), -EINVAL);
	json_decref(j);
	/* a malformed ns record: -EINVAL, never -ESRCH */
	j = json_pack("{s:s, s:i}", "backend", "ns", "version", 1);
	assert_int_equal(sbx_adopt(b, j, &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(sbx_forget(b, j, err, sizeof(err)), -EINVAL);
	json_decref(j);
	assert_int_equal(sbx_sweep(b, NULL, 1, err, sizeof(err)), -EINVAL);
	sbx_fini();
}

/* ---- registry ------------------------------------------------------------- */

static void
test_registry(void **st)
{
	struct sbx_caps c;
	char err[64];

	(void)st;
	assert_null(sbx_backend_get(NULL));
	assert_null(sbx_backend_get("qemu-flags"));
	assert_non_null(sbx_backend_get("ns"));
	assert_int_equal(sbx_init(NULL, err, sizeof(err)), 0);
	sbx_caps(sbx_backend_get("ns"), &c);
	assert_string_equal(c.name, "ns");
	assert_true(c.limit_memory && c.limit_pids && c.network);
	sbx_fini();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spec_bad),     cmocka_unit_test(test_spec_good),
	    cmocka_unit_test(test_isolation_refused),
	    cmocka_unit_test(test_cg_detect),    cmocka_unit_test(test_cg_self),
	    cmocka_unit_test(test_cg_values),    cmocka_unit_test(test_cg_path),         cmocka_unit_test(test_seccomp),
	    cmocka_unit_test(test_registry),     cmocka_unit_test(test_stat_starttime),
	    cmocka_unit_test(test_cgroup_names), cmocka_unit_test(test_saved_bad),
	    cmocka_unit_test(test_saved_good),   cmocka_unit_test(test_durable_api_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

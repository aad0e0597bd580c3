/* ns.c: the `ns` backend. A sandbox is a process tree in new mount, pid,
 * net, uts, ipc and cgroup namespaces and a user namespace of its own, in
 * which its root is an unprivileged host uid (idmap.c), rooted in an
 * overlay (the template, idmapped and read-only, below; a per-sandbox
 * upper directory the guest's root owns above), limited by a cgroup, with
 * a reduced capability bounding set, no_new_privs and a seccomp filter.
 * Its PID 1 is sluice-agent (or, until one is configured, a placeholder
 * shell), talking over an inherited socket on fd 3 and listening on
 * SBX_AGENT_SOCK inside the guest for the next host.
 *
 * A sandbox outlives the process that started it: nothing ties it to us
 * (no parent-death signal, its own session, mounts only in its own mount
 * namespace, its cgroup ours by name only). sbx_save() records how to find
 * it again (pid and start time, cgroups, state directory, link) and
 * ns_adopt() does, connecting to the agent through /proc/PID/root; a copy
 * of the record lives in its state directory for ns_sweep().
 *
 * Start: the parent reserves the sandbox's host id range, makes its
 * writable layer (owned by the guest's root) and its user namespace,
 * prepares everything that needs memory (a `plan`, ns-int.h), clones the
 * child (ns_child.c), which blocks on a pipe while the parent puts it in
 * its cgroup and wires its network from outside (setns into each
 * namespace from the calling thread: no `ip netns exec`, which would lose
 * /sys/fs/cgroup); then the child mounts, pivots, joins the user
 * namespace, drops privilege and execs. The child allocates nothing (the
 * parent may have threads). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ns-int.h"
#include "rtnl.h"
#include "sandbox.h"

#define NS_CA_MS 5000 /* the agent's "configure" of the CA */

/* The stand-in PID 1 while no agent is configured: runs each line read
 * from fd 3 with sh and answers its output, then a marker with the
 * status. For debugging and tests only. */
static const char placeholder_sh[] = "exec 0</dev/null\n"
                                     "while IFS= read -r line <&3; do\n"
                                     "  ( eval \"$line\" ) </dev/null >&3 2>&3\n"
                                     "  printf '\\n@@sbx-exit:%d@@\\n' $? >&3\n"
                                     "done\n";

struct sbx {
	struct sbx_head head; /* first: see sandbox.c */
	pid_t pid;            /* the guest's PID 1, -1 once reaped */
	int pidfd;
	int agent_fd;
	bool child;                    /* ours to waitpid; adopted ones are waited on by pidfd */
	unsigned long long start_time; /* /proc/PID/stat field 22 */
	int nl_peer;                   /* netlink socket in the peer's namespace */
	struct sbx_link peer;          /* the link as sbx_save() records it */
	struct sbx_cg cg;
	char dir[PATH_MAX]; /* state_dir/<id> */
	uint32_t idmap;     /* host id of guest 0; 0: none (adopted from before) */
	bool stopped;
};

/* ---- the parent -------------------------------------------------------- */

static void
ns_caps(const struct sbx_backend *b, struct sbx_caps *c)
{
	(void)b;
	c->name = "ns";
	c->limit_memory = c->limit_pids = true;
	c->network = c->mounts = c->files = true;
}

static int
ns_template_ensure(const struct sbx_backend *b, const struct sbx_template_req *req,
                   struct sbx_template **out, char *err, size_t errsz)
{
	(void)b;
	return sbx_tpl_ensure(req, out, err, errsz);
}

static void
ns_template_free(struct sbx_template *t)
{
	sbx_tpl_free(t);
}

/* mkdir -p of guest path g (absolute, checked) under upper, a fresh
 * writable layer (no link in it but ours): every directory it makes is
 * owned by the guest's root, host id `id`, as what the guest makes there
 * later will be. */
static int
upper_mkdir(const char *upper, const char *g, uint32_t id)
{
	char p[PATH_MAX * 2];
	char *c;

	if (sbx_pathf(p, sizeof(p), "%s%s", upper, g) < 0)
		return -ENAMETOOLONG;
	for (c = p + strlen(upper) + 1;; c++) {
		char was = *c;
		if (was && was != '/')
			continue;
		*c = 0;
		if (mkdir(p, 0755) == 0) {
			if (lchown(p, id, id) < 0)
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (!was)
			return 0;
		*c = '/';
	}
}

/* Creates guest file g in upper (its parents with upper_mkdir()), owned
 * by the guest's root: an fd, or -errno. */
static int
upper_create(const char *upper, const char *g, uint32_t id, int flags, mode_t mode)
{
	char up[PATH_MAX * 2], *slash;
	int fd;

	if (sbx_pathf(up, sizeof(up), "%s", g) < 0)
		return -ENAMETOOLONG;
	slash = strrchr(up, '/');
	*slash = 0;
	if (up[0] && (fd = upper_mkdir(upper, up, id)) < 0)
		return fd;
	sbx_pathf(up, sizeof(up), "%s%s", upper, g);
	fd = open(up, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, mode);
	if (fd < 0)
		return -errno;
	if (fchown(fd, id, id) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Makes guest path g exist in the upper layer unless the template has it:
 * a directory, or an empty file when as_file. */
static int
ensure_guest_path(const struct sbx_template *t, const char *upper, const char *g, bool as_file,
                  uint32_t id)
{
	char lp[PATH_MAX * 2];
	struct stat st;
	int fd;

	sbx_pathf(lp, sizeof(lp), "%s%s", t->lower, g);
	if (lstat(lp, &st) == 0)
		return 0;
	if (!as_file)
		return upper_mkdir(upper, g, id);
	if ((fd = upper_create(upper, g, id, 0, 0644)) < 0)
		return fd;
	close(fd);
	return 0;
}

static int
write_guest_file(const char *upper, const struct sbx_file *f, uint32_t id)
{
	const char *d = f->data;
	size_t off = 0;
	int fd, e = 0;

	fd = upper_create(upper, f->path, id, O_TRUNC, f->mode ? f->mode : 0644);
	if (fd < 0)
		return fd;
	fchmod(fd, f->mode ? f->mode : 0644);
	while (off < f->len) {
		ssize_t n = write(fd, d + off, f->len - off);
		if (n < 0) {
			e = -errno;
			break;
		}
		off += (size_t)n;
	}
	close(fd);
	return e;
}

static int
cap_last(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int v = CAP_LAST_CAP;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = CAP_LAST_CAP;
		fclose(f);
	}
	return v;
}

/* A signal to the guest's PID 1, through its pidfd when we have one (no
 * pid reuse race for an adopted sandbox, which is not our child). */
static int
send_sig(const struct sbx *s, int sig)
{
	if (s->pidfd >= 0)
		return (int)syscall(SYS_pidfd_send_signal, s->pidfd, sig, NULL, 0);
	return kill(s->pid, sig);
}

/* Ends the guest (SIGTERM, grace, SIGKILL) and removes everything. */
static int
teardown(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
{
	char owner[PATH_MAX];
	int rc = 0, st;

	/* The agent outlives its stream (it waits for the next host), so
	 * it is asked with SIGTERM; grace_ms later it is killed. */
	sbx_close_fd(&s->agent_fd);
	if (s->pid > 0) {
		if (grace_ms && send_sig(s, SIGTERM) == 0 && s->pidfd >= 0)
			sbx_pidfd_wait(s->pidfd, (int)grace_ms);
		/* PID 1 dying ends every process in its pid namespace. */
		send_sig(s, SIGKILL);
		if (s->child) {
			while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
				;
		} else if (s->pidfd >= 0 && !sbx_pidfd_wait(s->pidfd, 10000)) {
			/* not our child: its reaper collects it; we only wait */
			rc = sbx_fail(err, errsz, -ETIMEDOUT,
			              "stop %s: pid %d did not end 10 s after SIGKILL", s->head.id,
			              (int)s->pid);
		}
		s->pid = -1;
	}
	sbx_close_fd(&s->pidfd);
	/* The peer goes with the guest's namespace, but that happens later,
	 * in a kernel worker; it is deleted now so its name is free when we
	 * return. A process that may still run keeps its writable layer, and
	 * its ids: the range is free only once the state directory is gone. */
	sbx_pathf(owner, sizeof(owner), "%s", s->dir);
	rc = sbx_stop_rest(s->head.id, "link", &s->nl_peer, &s->peer, &s->cg, s->dir, rc, err,
	                   errsz);
	if (s->idmap && owner[0] && !s->dir[0]) {
		sbx_idmap_release(sbx_g.idmap_dir, s->idmap, owner);
		s->idmap = 0;
	}
	s->stopped = true;
	return rc;
}

/* Is path a, or something below it, under b (both host-side paths)? */
static bool
path_under(const char *a, const char *b)
{
	size_t n = strlen(b);

	return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/');
}

/* Hides g under an empty tmpfs, unless a mask above it does already; a
 * mask below it goes (it would be hidden, and its mount point with it). */
static int
add_mask(struct ns_plan *p, const char *g, char *err, size_t errsz)
{
	size_t keep = 0;

	for (size_t m = 0; m < p->nmasks; m++)
		if (path_under(g, p->masks[m]))
			return 0;
	for (size_t m = 0; m < p->nmasks; m++)
		if (!path_under(p->masks[m], g))
			memmove(p->masks[keep++], p->masks[m], sizeof(p->masks[0]));
	p->nmasks = keep;
	if (p->nmasks == NS_MASKS_MAX)
		return sbx_fail(err, errsz, -E2BIG,
		                "start: binds show too many of the daemon's "
		                "directories to the guest; bind less");
	sbx_pathf(p->masks[p->nmasks++], sizeof(p->masks[0]), "%s", g);
	return 0;
}

/* The daemon's own directories a bind would show the guest (a state or
 * template directory under /usr, say): each one hidden by an empty tmpfs.
 * Their parents too: the daemon's data_dir, with its journal and CA key,
 * holds both. */
static int
plan_masks(struct ns_plan *p, const char *src, const char *dst, char *err, size_t errsz)
{
	const char *dirs[] = {sbx_g.state_dir, sbx_g.cache_dir};
	char parent[PATH_MAX], g[PATH_MAX];
	int rc;

	for (size_t i = 0; i < 2; i++) {
		const char *cand[2] = {dirs[i], parent};
		char *slash;
		sbx_pathf(parent, sizeof(parent), "%s", dirs[i]);
		slash = strrchr(parent, '/');
		if (slash && slash != parent)
			*slash = 0;
		for (size_t k = 0; k < 2; k++) {
			struct stat st;
			if (!sbx_tpl_mask_path(src, dst, cand[k], g, sizeof(g)) ||
			    lstat(cand[k], &st) < 0 || !S_ISDIR(st.st_mode))
				continue;
			if ((rc = add_mask(p, g, err, errsz)) < 0)
				return rc;
		}
	}
	return 0;
}

static int
fill_plan(struct ns_plan *p, const struct sbx_template *t, const struct sbx_spec *spec,
          const char *dir, uint32_t idmap, int userns_fd, char *err, size_t errsz)
{
	size_t ne = 0;
	bool have_path = false;
	int rc;

	p->idmap = idmap;
	p->userns_fd = userns_fd;
	if (sbx_pathf(p->dir, sizeof(p->dir), "%s", dir) < 0 ||
	    sbx_pathf(p->lower, sizeof(p->lower), "%s", t->lower) < 0 ||
	    sbx_pathf(p->root, sizeof(p->root), "%s/root", dir) < 0)
		return sbx_fail(err, errsz, -ENAMETOOLONG,
		                "start: template or state paths too long; move them");
	sbx_pathf(p->proc, sizeof(p->proc), "%s/proc", p->root);
	sbx_pathf(p->tmp, sizeof(p->tmp), "%s/tmp", p->root);
	sbx_pathf(p->dev, sizeof(p->dev), "%s/dev", p->root);
	sbx_idmap_tmpfs_opts(p->dev_opts, sizeof(p->dev_opts), "mode=755,size=256k", idmap);
	sbx_idmap_tmpfs_opts(p->tmp_opts, sizeof(p->tmp_opts), "mode=1777", idmap);
	/* an ordinary empty directory, read-only */
	sbx_idmap_tmpfs_opts(p->mask_opts, sizeof(p->mask_opts), "size=4k,mode=755", idmap);
	for (size_t i = 0; i < t->nbinds; i++) {
		struct ns_bind *b = &p->binds[p->nbinds++];
		sbx_pathf(b->src, sizeof(b->src), "%s", t->binds[i].src);
		sbx_pathf(b->dst, sizeof(b->dst), "%s%s", p->root, t->binds[i].dst);
		b->ro = true;
		if ((rc = plan_masks(p, b->src, b->dst, err, errsz)) < 0)
			return rc;
	}
	if (spec->nmounts > NS_MOUNTS_MAX)
		return sbx_fail(err, errsz, -E2BIG, "start: more than %d mounts", NS_MOUNTS_MAX);
	for (size_t i = 0; i < spec->nmounts; i++) {
		struct ns_bind *b = &p->binds[p->nbinds++];
		struct stat st;
		if (stat(spec->mounts[i].source, &st) < 0)
			return sbx_fail(err, errsz, -errno, "start: mount source %s: %s",
			                spec->mounts[i].source, strerror(errno));
		sbx_pathf(b->src, sizeof(b->src), "%s", spec->mounts[i].source);
		sbx_pathf(b->dst, sizeof(b->dst), "%s%s", p->root, spec->mounts[i].target);
		b->ro = spec->mounts[i].read_only;
		if ((rc = plan_masks(p, b->src, b->dst, err, errsz)) < 0)
			return rc;
	}
	sbx_pathf(p->hostname, sizeof(p->hostname), "%s",
	          spec->hostname ? spec->hostname : spec->id);
	sbx_pathf(p->cwd, sizeof(p->cwd), "%s", spec->cwd ? spec->cwd : "/");
	if (spec->nenv > NS_ENV_MAX)
		return sbx_fail(err, errsz, -E2BIG, "start: more than %d env", NS_ENV_MAX);
	for (size_t i = 0; i < spec->nenv; i++) {
		p->envp[ne++] = (char *)(uintptr_t)spec->env[i];
		if (strncmp(spec->env[i], "PATH=", 5) == 0)
			have_path = true;
	}
	if (!have_path)
		p->envp[ne++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		                "/usr/bin:/sbin:/bin";
	p->envp[ne] = NULL;
	if (spec->ca_pem && !sbx_g.agent_path[0])
		return sbx_fail(err, errsz, -ENOTSUP,
		                "start: a CA needs sluice-agent in the sandbox; "
		                "give the agent path");
	if (sbx_g.agent_path[0]) {
		p->exe_fd = open(sbx_g.agent_path, O_PATH | O_CLOEXEC);
		if (p->exe_fd < 0)
			return sbx_fail(err, errsz, -errno,
			                "start: agent %s: %s; build agent/ or fix "
			                "the agent path",
			                sbx_g.agent_path, strerror(errno));
		rc = fcntl(p->exe_fd, F_DUPFD_CLOEXEC, 10);
		close(p->exe_fd);
		p->exe_fd = rc;
		p->argv[0] = "sluice-agent";
		p->argv[1] = "--fd";
		p->argv[2] = "3";
		p->argv[3] = "--listen";
		p->argv[4] = SBX_AGENT_SOCK;
		p->argv[5] = NULL;
	} else {
		p->exe_fd = -1;
		p->argv[0] = "sh";
		p->argv[1] = "-c";
		p->argv[2] = (char *)(uintptr_t)placeholder_sh;
		p->argv[3] = NULL;
	}
	p->cap_last = cap_last();
	p->nfilter = (unsigned short)sbx_seccomp_build(p->filter);
	return 0;
}

/* Wires the guest's network from outside, while it waits. */
static int
setup_net(struct sbx *s, const struct sbx_net *n, char *err, size_t errsz)
{
	char p[64];
	int childns, rc;

	sbx_pathf(p, sizeof(p), "/proc/%d/ns/net", (int)s->pid);
	childns = open(p, O_RDONLY | O_CLOEXEC);
	if (childns < 0)
		return sbx_fail(err, errsz, -errno, "start: %s: %s", p, strerror(errno));
	rc = sbx_link_setup(childns, n, &s->nl_peer, &s->peer, err, errsz);
	close(childns);
	return rc;
}

/* ---- finding a sandbox again ------------------------------------------ */

static json_t *
ns_save(const struct sbx *s)
{
	struct sbx_saved *sv;
	json_t *j;

	if (s->stopped || s->pid <= 0 || !s->dir[0] || !s->cg.ndirs)
		return NULL;
	if (!(sv = sbx_calloc(1, sizeof(*sv))))
		return NULL;
	sbx_rec_fill(&sv->r, s->head.id, s->pid, s->start_time, s->dir, &s->cg, &s->peer);
	snprintf(sv->sock, sizeof(sv->sock), "%s", SBX_AGENT_SOCK);
	sv->idmap = s->idmap;
	j = sbx_saved_to_json(sv);
	free(sv);
	return j;
}

static int
ns_start(const struct sbx_template *t, const struct sbx_spec *spec, struct sbx **out, char *err,
         size_t errsz)
{
	struct sbx *s;
	struct ns_plan *p = NULL;
	struct sbx_userns uns = {.fd = -1, .wfd = -1, .helper = -1};
	int sv[2] = {-1, -1}, go[2] = {-1, -1}, ep[2] = {-1, -1}, rc;
	char path[PATH_MAX * 2];
	void *stack = MAP_FAILED;
	const size_t stack_sz = 256 * 1024;
	struct ns_child_err ce;
	ssize_t n;

	s = sbx_calloc(1, sizeof(*s));
	if (!s)
		return sbx_fail(err, errsz, -ENOMEM, "start: out of memory");
	sbx_pathf(s->head.id, sizeof(s->head.id), "%s", spec->id);
	s->pid = -1;
	s->pidfd = s->agent_fd = s->nl_peer = -1;

	/* The writable layer. */
	if ((rc = sbx_mkdir_p(sbx_g.state_dir, 0700)) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: state dir %s: %s", sbx_g.state_dir,
		              strerror(-rc));
		goto fail;
	}
	sbx_pathf(path, sizeof(path), "%s/%s", sbx_g.state_dir, spec->id);
	if (mkdir(path, 0700) < 0) {
		rc = sbx_fail(err, errsz, -errno,
		              errno == EEXIST ? "start: sandbox id %s is in use (%s)"
		                              : "start: sandbox id %s: %s",
		              spec->id, errno == EEXIST ? path : strerror(errno));
		goto fail;
	}
	sbx_pathf(s->dir, sizeof(s->dir), "%s", path);
	/* Its host ids, before anything is made with them. */
	if ((rc = sbx_idmap_reserve(sbx_g.idmap_dir, sbx_g.idmap_base, sbx_g.idmap_ranges, s->dir,
	                            &s->idmap, err, errsz)) < 0)
		goto fail;
	{
		/* lower and root: mount points; upper: the guest's root dir */
		static const char *const sub[] = {"upper", "work", "root", "lower"};
		for (size_t i = 0; i < 4; i++) {
			sbx_pathf(path, sizeof(path), "%s/%s", s->dir, sub[i]);
			if (mkdir(path, 0755) < 0 ||
			    (i == 0 && chown(path, s->idmap, s->idmap) < 0)) {
				rc = sbx_fail(err, errsz, -errno, "start: %s: %s", path,
				              strerror(errno));
				goto fail;
			}
		}
	}
	sbx_pathf(path, sizeof(path), "%s/upper", s->dir);
	{
		static const char *const mp[] = {"/proc", "/dev", "/tmp"};
		for (size_t i = 0; i < 3; i++)
			ensure_guest_path(t, path, mp[i], false, s->idmap);
		for (size_t i = 0; i < t->nbinds; i++)
			ensure_guest_path(t, path, t->binds[i].dst, false, s->idmap);
		for (size_t i = 0; i < spec->nmounts; i++) {
			struct stat st;
			bool file = stat(spec->mounts[i].source, &st) == 0 && !S_ISDIR(st.st_mode);
			ensure_guest_path(t, path, spec->mounts[i].target, file, s->idmap);
		}
		if (spec->cwd)
			ensure_guest_path(t, path, spec->cwd, false, s->idmap);
		for (size_t i = 0; i < spec->nfiles; i++) {
			if ((rc = write_guest_file(path, &spec->files[i], s->idmap)) < 0) {
				rc = sbx_fail(err, errsz, rc, "start: write %s: %s",
				              spec->files[i].path, strerror(-rc));
				goto fail;
			}
		}
	}
	if ((rc = sbx_userns_open(s->idmap, &uns, err, errsz)) < 0)
		goto fail;

	p = sbx_calloc(1, sizeof(*p));
	if (!p) {
		rc = sbx_fail(err, errsz, -ENOMEM, "start: out of memory");
		goto fail;
	}
	p->exe_fd = -1;
	if ((rc = fill_plan(p, t, spec, s->dir, s->idmap, uns.fd, err, errsz)) < 0)
		goto fail;
	if ((rc = sbx_cg_create(spec->id, &spec->limits, &s->cg, err, errsz)) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(go, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		rc = sbx_fail(err, errsz, -errno, "start: %s", strerror(errno));
		goto fail;
	}
	/* The child renumbers to 3, 4, 5: keep its fds clear of those. */
	p->sock_fd = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
	p->go_fd = go[0];
	p->err_fd = fcntl(ep[1], F_DUPFD_CLOEXEC, 10);
	if (p->sock_fd < 0 || p->err_fd < 0) {
		rc = sbx_fail(err, errsz, -errno, "start: %s", strerror(errno));
		goto fail_fds;
	}
	stack = mmap(NULL, stack_sz, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		rc = sbx_fail(err, errsz, -errno, "start: %s", strerror(errno));
		goto fail_fds;
	}
	/* Not CLONE_NEWUSER: these namespaces belong to the host's user
	 * namespace, the child joins its own only at the end (ns_child.c). */
	s->pid = clone(
	    sbx_ns_child_main, (char *)stack + stack_sz,
	    CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD, p);
	if (s->pid < 0) {
		rc = sbx_fail(err, errsz, -errno,
		              "start: clone: %s (sluiced needs root for the ns "
		              "backend)",
		              strerror(errno));
		goto fail_fds;
	}
	s->child = true;
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	sbx_close_fd(&p->sock_fd);
	sbx_close_fd(&p->err_fd);
	sbx_close_fd(&go[0]);
	sbx_close_fd(&sv[1]);
	sbx_close_fd(&ep[1]);
	if ((rc = sbx_cg_attach(&s->cg, s->pid, err, errsz)) < 0)
		goto fail_fds;
	if ((rc = setup_net(s, &spec->net, err, errsz)) < 0)
		goto fail_fds;
	if (write(go[1], "g", 1) != 1) {
		rc = sbx_fail(err, errsz, -EPIPE, "start: the sandbox died early");
		goto fail_fds;
	}
	sbx_close_fd(&go[1]);
	/* EOF: the exec happened (the pipe is close-on-exec). */
	do {
		n = read(ep[0], &ce, sizeof(ce));
	} while (n < 0 && errno == EINTR);
	if (n != 0) {
		if (n == (ssize_t)sizeof(ce)) {
			ce.step[sizeof(ce.step) - 1] = 0;
			rc = sbx_fail(err, errsz, -ce.err, "start: in the sandbox: %s: %s%s",
			              ce.step, strerror(ce.err),
			              strncmp(ce.step, "idmap ", 6) == 0 && ce.err == EINVAL
			                  ? " (its file system cannot be idmapped: keep templates "
			                    "and binds on ext4, xfs, btrfs or tmpfs)"
			                  : "");
		} else {
			rc = sbx_fail(err, errsz, -EIO, "start: the sandbox failed before exec");
		}
		goto fail_fds;
	}
	sbx_close_fd(&ep[0]);
	sbx_userns_close(&uns); /* the agent is in it now */
	s->agent_fd = sv[0];
	sv[0] = -1;
	fcntl(s->agent_fd, F_SETFL, O_NONBLOCK);
	/* sluice's CA: the agent installs it in the guest's own layer */
	if (spec->ca_pem &&
	    (rc = sbx_agent_trust_sync(s->agent_fd, spec->ca_pem, NS_CA_MS, err, errsz)) < 0)
		goto fail_fds;
	if ((rc = sbx_read_start_time(s->pid, &s->start_time)) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: /proc/%d/stat: %s", (int)s->pid,
		              strerror(-rc));
		goto fail_fds;
	}
	if ((rc = sbx_saved_write(s->dir, ns_save(s))) < 0) {
		rc = sbx_fail(err, errsz, rc, "start: %s/%s: %s", s->dir, SBX_SAVED_FILE,
		              strerror(-rc));
		goto fail_fds;
	}
	munmap(stack, stack_sz);
	sbx_close_fd(&p->exe_fd);
	free(p);
	sbx_log(SBX_LOG_INFO, "sandbox %s: started, pid %d, host ids %u-%u", spec->id, (int)s->pid,
	        s->idmap, s->idmap + SBX_IDMAP_SIZE - 1);
	*out = s;
	return 0;

fail_fds:
	if (p) {
		sbx_close_fd(&p->sock_fd);
		sbx_close_fd(&p->err_fd);
	}
	sbx_close_fd(&sv[0]);
	sbx_close_fd(&sv[1]);
	sbx_close_fd(&go[0]);
	sbx_close_fd(&go[1]);
	sbx_close_fd(&ep[0]);
	sbx_close_fd(&ep[1]);
fail:
	if (stack != MAP_FAILED)
		munmap(stack, stack_sz);
	if (p) {
		sbx_close_fd(&p->exe_fd);
		free(p);
	}
	sbx_userns_close(&uns);
	teardown(s, 0, NULL, 0);
	sbx_log(SBX_LOG_WARN, "sandbox %s: start failed: %s", spec->id, err && errsz ? err : "");
	free(s);
	return rc;
}

static int
ns_agent_fd(const struct sbx *s)
{
	return s->agent_fd >= 0 ? s->agent_fd : -EBADF;
}

static int
ns_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
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
ns_free(struct sbx *s)
{
	if (!s->stopped)
		teardown(s, 0, NULL, 0);
	free(s);
}

static void
ns_release(struct sbx *s)
{
	/* Our fds only: the sandbox runs on and its agent waits for the
	 * next host. */
	sbx_close_fd(&s->agent_fd);
	sbx_close_fd(&s->pidfd);
	sbx_close_fd(&s->nl_peer);
	sbx_log(SBX_LOG_INFO, "sandbox %s: left running, pid %d", s->head.id, (int)s->pid);
	free(s);
}

/* A new connection to the agent's socket inside the sandbox. The path is
 * resolved with the guest's root as the root (an absolute symlink the
 * guest planted cannot lead to a host socket), and the listener must be
 * the sandbox's PID 1 (a guest process cannot stand in for the agent). */
static int
agent_connect(const struct sbx_saved *sv, char *err, size_t errsz)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
	                       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	struct stat st;
	char root[64];
	int dfd, pfd = -1, fd = -1, rc = 0;

	/* The documented form must fit too (and the agent's own bind). */
	if (sbx_pathf(sa.sun_path, sizeof(sa.sun_path), "/proc/%d/root%s", sv->r.pid, sv->sock) < 0)
		return sbx_fail(err, errsz, -ENAMETOOLONG,
		                "adopt %s: /proc/%d/root%s is too long for a unix socket", sv->r.id,
		                sv->r.pid, sv->sock);
	snprintf(root, sizeof(root), "/proc/%d/root", sv->r.pid);
	dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_fail(err, errsz, errno == ENOENT ? -ESRCH : -errno, "adopt %s: %s: %s",
		                sv->r.id, root, strerror(errno));
	pfd = (int)syscall(SYS_openat2, dfd, sv->sock, &how, sizeof(how));
	close(dfd);
	if (pfd < 0) {
		rc = sbx_fail(err, errsz, -errno,
		              "adopt %s: the agent's socket %s: %s (is the agent running with "
		              "--listen?)",
		              sv->r.id, sv->sock, strerror(errno));
		goto out;
	}
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		rc = sbx_fail(err, errsz, -ENOTSOCK, "adopt %s: %s is not a socket", sv->r.id,
		              sv->sock);
		goto out;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc =
		    sbx_fail(err, errsz, -errno, "adopt %s: socket: %s", sv->r.id, strerror(errno));
		goto out;
	}
	/* EAGAIN: the agent's backlog is full for a moment. */
	for (int tries = 0;; tries++) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if ((errno == EAGAIN || errno == EINTR) && tries < 100) {
			nanosleep(&(struct timespec){0, 10000000}, NULL);
			continue;
		}
		rc = sbx_fail(err, errsz, -errno, "adopt %s: connect to the agent: %s", sv->r.id,
		              strerror(errno));
		goto out;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 || uc.pid != sv->r.pid) {
		rc = sbx_fail(err, errsz, -EPERM,
		              "adopt %s: %s is not the agent's socket (listener pid %d, not %d)",
		              sv->r.id, sv->sock, (int)uc.pid, sv->r.pid);
		goto out;
	}
out:
	if (pfd >= 0)
		close(pfd);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return fd;
}

static int
ns_adopt(const struct sbx_backend *b, const json_t *saved, struct sbx **out, char *err,
         size_t errsz)
{
	struct sbx_saved *sv;
	struct sbx *s = NULL;
	int rc, pidfd = -1, fd = -1;

	(void)b;
	if (!(sv = sbx_calloc(1, sizeof(*sv))))
		return sbx_fail(err, errsz, -ENOMEM, "adopt: out of memory");
	if ((rc = sbx_saved_parse(saved, sv, err, errsz)) < 0)
		goto out;
	if ((rc = sbx_rec_check(&sv->r, "adopt", "", &pidfd, err, errsz)) < 0)
		goto out;
	if ((rc = fd = agent_connect(sv, err, errsz)) < 0)
		goto out;
	if (!(s = sbx_calloc(1, sizeof(*s)))) {
		rc = sbx_fail(err, errsz, -ENOMEM, "adopt: out of memory");
		goto out;
	}
	snprintf(s->head.id, sizeof(s->head.id), "%s", sv->r.id);
	s->pid = sv->r.pid;
	s->pidfd = pidfd;
	s->agent_fd = fd;
	s->child = false;
	s->start_time = sv->r.start_time;
	sbx_rec_get_cg(&sv->r, &s->cg);
	if (sbx_state_dir_ours(sv->r.state_dir, sv->r.id))
		snprintf(s->dir, sizeof(s->dir), "%s", sv->r.state_dir);
	else
		sbx_log(SBX_LOG_WARN,
		        "sandbox %s: its state directory %s is not under %s: stop will leave it",
		        sv->r.id, sv->r.state_dir, sbx_g.state_dir);
	sbx_rec_get_link(&sv->r, &s->peer);
	/* Not found (a namespace given by fd, or gone): the kernel removes
	 * the peer with the sandbox's namespace. */
	s->nl_peer = sbx_rec_peer_open(&sv->r);
	/* Its ids stay reserved while it runs. The registry normally still
	 * says so; this puts it back if it was lost (a /run emptied under
	 * running sandboxes). A range already held by another sandbox
	 * cannot be taken back from either: said, and the adoption goes on. */
	if ((s->idmap = sv->idmap) && s->dir[0]) {
		char e[256];
		if (sbx_idmap_claim(sbx_g.idmap_dir, s->idmap, s->dir, e, sizeof(e)) < 0)
			sbx_log(SBX_LOG_WARN, "sandbox %s: %s", s->head.id, e);
	}
	if (s->idmap)
		sbx_log(SBX_LOG_INFO, "sandbox %s: adopted, pid %d, host ids %u-%u", s->head.id,
		        (int)s->pid, s->idmap, s->idmap + SBX_IDMAP_SIZE - 1);
	else
		sbx_log(SBX_LOG_WARN,
		        "sandbox %s: adopted, pid %d, running as the host's root (started "
		        "before sandboxes had user namespaces): replace it",
		        s->head.id, (int)s->pid);
	*out = s;
	rc = 0;
out:
	if (rc < 0) {
		if (pidfd >= 0)
			close(pidfd);
		if (fd >= 0)
			close(fd);
	}
	free(sv);
	return rc;
}

static int
ns_parse(const json_t *j, void *out, char *err, size_t errsz)
{
	return sbx_saved_parse(j, out, err, errsz);
}

/* Its state directory is gone: so is its claim on its id range (were the
 * link left, it would count as free anyway; this keeps the registry
 * tidy). */
static void
ns_gone(const void *saved)
{
	const struct sbx_saved *sv = saved;

	if (sv->idmap)
		sbx_idmap_release(sbx_g.idmap_dir, sv->idmap, sv->r.state_dir);
}

/* A directory whose record names no backend is ours: a start that
 * crashed before writing one left it. */
static const struct sbx_durable ns_durable = {
    .backend = "ns",
    .unrecorded = true,
    .link = "link",
    .saved_size = sizeof(struct sbx_saved),
    .parse = ns_parse,
    .gone = ns_gone,
};

static int
ns_forget(const struct sbx_backend *b, const json_t *saved, char *err, size_t errsz)
{
	(void)b;
	return sbx_durable_forget(&ns_durable, saved, err, errsz);
}

static int
ns_sweep(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err,
         size_t errsz)
{
	(void)b;
	return sbx_durable_sweep(&ns_durable, keep, nkeep, err, errsz);
}

const struct sbx_backend_ops sbx_ns_ops = {
    .name = "ns",
    .caps = ns_caps,
    .template_ensure = ns_template_ensure,
    .template_free = ns_template_free,
    .start = ns_start,
    .agent_fd = ns_agent_fd,
    .stop = ns_stop,
    .free = ns_free,
    .save = ns_save,
    .adopt = ns_adopt,
    .forget = ns_forget,
    .sweep = ns_sweep,
    .release = ns_release,
};

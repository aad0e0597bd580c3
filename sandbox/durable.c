/* durable.c: what both backends do to find a sandbox again, or to clean
 * up after one: the state directory, /proc checks of a recorded process,
 * the recorded peer link, forget and sweep. The backend-specific parts
 * (the record's own fields, how to reconnect) stay in ns.c and vm.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jansson.h>

#include "rtnl.h"
#include "sandbox-int.h"

void
sbx_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

bool
sbx_pidfd_wait(int pidfd, int ms)
{
	struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
	int r;

	if (pidfd < 0)
		return false;
	do
		r = poll(&pfd, 1, ms);
	while (r < 0 && errno == EINTR);
	return r > 0;
}

ssize_t
sbx_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	return (ssize_t)len;
}

int
sbx_read_start_time(pid_t pid, unsigned long long *out)
{
	char path[64], buf[1024];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((n = sbx_read_small(path, buf, sizeof(buf))) < 0)
		return (int)n;
	return sbx_stat_starttime(buf, (size_t)n, out);
}

int
sbx_peer_del(int nl, const char *ifname, int ifindex)
{
	int r;

	if (ifindex > 0 && (r = fw_rtnl_ifindex(nl, ifname)) != ifindex)
		return r < 0 ? r : -ENODEV;
	return fw_rtnl_link_del(nl, ifname);
}

int
sbx_open_peer_ns(const struct sbx_net *n, char *err, size_t errsz)
{
	char p[PATH_MAX];
	int fd;

	if (n->peer_netns_fd >= 0) {
		fd = fcntl(n->peer_netns_fd, F_DUPFD_CLOEXEC, 3);
	} else {
		sbx_pathf(p, sizeof(p), "/run/netns/%s", n->peer_netns);
		fd = open(p, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return sbx_fail(err, errsz, -errno, "start: network namespace %s: %s",
		                n->peer_netns_fd >= 0 ? "(fd)" : n->peer_netns, strerror(errno));
	return fd;
}

int
sbx_saved_write(const char *dir, json_t *j)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
	int rc;

	if (!j)
		return -ENOMEM;
	sbx_pathf(path, sizeof(path), "%s/%s", dir, SBX_SAVED_FILE);
	sbx_pathf(tmp, sizeof(tmp), "%s.tmp", path);
	errno = 0;
	rc = json_dump_file(j, tmp, JSON_COMPACT) == 0 ? 0 : -(errno ? errno : EIO);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	json_decref(j);
	return rc;
}

int
sbx_stop_rest(const char *id, const char *link, int *nl_peer, const struct sbx_link *peer,
              struct sbx_cg *cg, char *dir, int rc, char *err, size_t errsz)
{
	int r;

	if (*nl_peer >= 0) {
		r = sbx_peer_del(*nl_peer, peer->ifname, peer->ifindex);
		if (r < 0 && r != -ENODEV && !rc)
			rc = sbx_fail(err, errsz, r, "stop %s: delete %s %s: %s", id, link,
			              peer->ifname, strerror(-r));
		sbx_close_fd(nl_peer);
	}
	r = sbx_cg_destroy(cg, rc ? NULL : err, errsz);
	if (r < 0 && !rc)
		rc = r;
	if (dir[0] && r == 0) {
		r = sbx_rm_tree(dir);
		if (r < 0 && !rc)
			rc = sbx_fail(err, errsz, r, "stop %s: remove %s: %s", id, dir,
			              strerror(-r));
		if (r == 0)
			dir[0] = 0;
	}
	return rc;
}

/* ---- the state directory ------------------------------------------------ */

void
sbx_state_root(char *out, size_t cap)
{
	size_t n;

	snprintf(out, cap, "%s", sbx_g.state_dir);
	n = strlen(out);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = 0;
}

bool
sbx_state_dir_ours(const char *dir, const char *id)
{
	char root[PATH_MAX], want[PATH_MAX * 2];

	sbx_state_root(root, sizeof(root));
	if (sbx_pathf(want, sizeof(want), "%s/%s", strcmp(root, "/") ? root : "", id) < 0)
		return false;
	return strcmp(want, dir) == 0;
}

/* ---- a recorded sandbox ------------------------------------------------- */

void
sbx_rec_set_cg(struct sbx_rec *r, const struct sbx_cg *cg)
{
	r->cg_version = cg->version;
	r->ncg = cg->ndirs;
	for (size_t i = 0; i < cg->ndirs; i++)
		snprintf(r->cg[i], sizeof(r->cg[i]), "%s", cg->dirs[i]);
}

void
sbx_rec_get_cg(const struct sbx_rec *r, struct sbx_cg *cg)
{
	memset(cg, 0, sizeof(*cg));
	cg->version = r->cg_version;
	cg->ndirs = r->ncg;
	for (size_t i = 0; i < r->ncg; i++)
		snprintf(cg->dirs[i], sizeof(cg->dirs[i]), "%s", r->cg[i]);
}

bool
sbx_rec_cgroups_ok(const struct sbx_rec *r)
{
	for (size_t i = 0; i < r->ncg; i++)
		if (!sbx_cg_under_mount(r->cg[i]))
			return false;
	return true;
}

int
sbx_rec_find(const struct sbx_rec *r, const char *what, int *pidfd, char *err, size_t errsz)
{
	char path[64], *buf;
	unsigned long long st;
	ssize_t n;
	int fd, rc;

	*pidfd = -1;
	fd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (fd < 0) {
		if (errno == ESRCH)
			return sbx_fail(err, errsz, -ESRCH, "sandbox %s: pid %d is gone", r->id,
			                r->pid);
		return sbx_fail(err, errsz, -errno, "sandbox %s: pidfd_open %d: %s", r->id, r->pid,
		                strerror(errno));
	}
	/* From here the pid cannot be reused under us: fd pins the process
	 * we check, and a process that ended is seen below. */
	rc = sbx_read_start_time(r->pid, &st);
	if (rc == -ENOENT || rc == -ESRCH || (rc == 0 && st != r->start_time)) {
		close(fd);
		return sbx_fail(err, errsz, -ESRCH, "sandbox %s: pid %d is %s now", r->id, r->pid,
		                rc ? "gone" : "another process");
	}
	if (rc < 0) {
		close(fd);
		return sbx_fail(err, errsz, rc, "sandbox %s: /proc/%d/stat: %s", r->id, r->pid,
		                strerror(-rc));
	}
	buf = malloc(16384);
	if (!buf) {
		close(fd);
		return sbx_fail(err, errsz, -ENOMEM, "adopt: out of memory");
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", r->pid);
	n = sbx_read_small(path, buf, 16384);
	if (n < 0 || !sbx_cgroup_names(buf, r->id)) {
		free(buf);
		close(fd);
		return sbx_fail(err, errsz, -ESRCH,
		                "sandbox %s: pid %d is not %sin the sandbox's cgroup", r->id,
		                r->pid, what);
	}
	free(buf);
	if (sbx_pidfd_wait(fd, 0)) {
		/* it ended (a zombie waiting for its reaper) */
		close(fd);
		return sbx_fail(err, errsz, -ESRCH, "sandbox %s: pid %d has exited", r->id, r->pid);
	}
	*pidfd = fd;
	return 0;
}

int
sbx_rec_check(const struct sbx_rec *r, const char *op, const char *what, int *pidfd, char *err,
              size_t errsz)
{
	if (!sbx_rec_cgroups_ok(r))
		return sbx_fail(err, errsz, -EINVAL,
		                "%s %s: its cgroups are not in this host's cgroup hierarchy", op,
		                r->id);
	return sbx_rec_find(r, what, pidfd, err, errsz);
}

void
sbx_rec_fill(struct sbx_rec *r, const char *id, pid_t pid, unsigned long long start_time,
             const char *dir, const struct sbx_cg *cg, const struct sbx_link *peer)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->pid = (int)pid;
	r->start_time = start_time;
	snprintf(r->state_dir, sizeof(r->state_dir), "%s", dir);
	sbx_rec_set_cg(r, cg);
	sbx_rec_set_link(r, peer);
}

void
sbx_rec_set_link(struct sbx_rec *r, const struct sbx_link *peer)
{
	snprintf(r->peer_netns, sizeof(r->peer_netns), "%s", peer->netns);
	snprintf(r->peer_ifname, sizeof(r->peer_ifname), "%s", peer->ifname);
	r->peer_ifindex = peer->ifindex;
	r->peer_netns_ino = peer->netns_ino;
}

void
sbx_rec_get_link(const struct sbx_rec *r, struct sbx_link *peer)
{
	snprintf(peer->netns, sizeof(peer->netns), "%s", r->peer_netns);
	snprintf(peer->ifname, sizeof(peer->ifname), "%s", r->peer_ifname);
	peer->ifindex = r->peer_ifindex;
	peer->netns_ino = r->peer_netns_ino;
}

int
sbx_rec_peer_open(const struct sbx_rec *r)
{
	char path[PATH_MAX];
	struct stat st;
	int ns, nl;

	if (!r->peer_netns[0] || !r->peer_ifname[0] || r->peer_ifindex <= 0)
		return -1;
	if (sbx_pathf(path, sizeof(path), "/run/netns/%s", r->peer_netns) < 0)
		return -1;
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return -1;
	if (fstat(ns, &st) < 0 ||
	    (r->peer_netns_ino && (unsigned long long)st.st_ino != r->peer_netns_ino)) {
		close(ns);
		return -1;
	}
	nl = fw_rtnl_open_in(ns);
	close(ns);
	if (nl < 0)
		return -1;
	if (fw_rtnl_ifindex(nl, r->peer_ifname) != r->peer_ifindex) {
		close(nl);
		return -1;
	}
	return nl;
}

int
sbx_rec_cleanup(const struct sbx_rec *r, const char *link, char *err, size_t errsz)
{
	struct sbx_cg cg;
	int rc = 0, rr, nl;
	struct stat st;

	sbx_rec_get_cg(r, &cg);
	if ((rr = sbx_cg_destroy(&cg, err, errsz)) < 0)
		return rr;
	if ((nl = sbx_rec_peer_open(r)) >= 0) {
		rr = sbx_peer_del(nl, r->peer_ifname, r->peer_ifindex);
		close(nl);
		if (rr < 0 && rr != -ENODEV)
			rc = sbx_fail(err, errsz, rr, "sandbox %s: delete %s %s: %s", r->id, link,
			              r->peer_ifname, strerror(-rr));
	}
	if (lstat(r->state_dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode) || !sbx_state_dir_ours(r->state_dir, r->id))
			return sbx_fail(err, errsz, -EPERM,
			                "sandbox %s: %s is not a state directory under %s; left "
			                "alone",
			                r->id, r->state_dir, sbx_g.state_dir);
		rr = sbx_rm_tree(r->state_dir);
		if (rr < 0 && !rc)
			rc = sbx_fail(err, errsz, rr, "sandbox %s: remove %s: %s", r->id,
			              r->state_dir, strerror(-rr));
	}
	return rc;
}

/* A parsed record in a new allocation of w->saved_size: 0 with *out (its
 * first member, struct sbx_rec), or -errno with err set. */
static int
parse_new(const struct sbx_durable *w, const json_t *j, const char *op, struct sbx_rec **out,
          char *err, size_t errsz)
{
	void *saved;
	int rc;

	*out = NULL;
	if (!(saved = sbx_calloc(1, w->saved_size))) {
		/* (returned here, not through sbx_fail(): callers test rc < 0
		 * alone before using *out, and this says it is) */
		sbx_fail(err, errsz, -ENOMEM, "%s: out of memory", op);
		return -ENOMEM;
	}
	if ((rc = w->parse(j, saved, err, errsz)) < 0) {
		free(saved);
		return rc;
	}
	*out = saved;
	return 0;
}

int
sbx_durable_forget(const struct sbx_durable *w, const json_t *saved, char *err, size_t errsz)
{
	struct sbx_rec *r;
	int rc, pidfd;

	if ((rc = parse_new(w, saved, "forget", &r, err, errsz)) < 0)
		return rc;
	if (!sbx_rec_cgroups_ok(r)) {
		rc = sbx_fail(err, errsz, -EINVAL,
		              "forget %s: its cgroups are not in this host's cgroup hierarchy",
		              r->id);
		goto out;
	}
	rc = sbx_rec_find(r, "", &pidfd, err, errsz);
	if (rc == 0) {
		close(pidfd);
		rc = sbx_fail(err, errsz, -EBUSY,
		              "forget %s: it still runs (pid %d): adopt and stop it instead", r->id,
		              r->pid);
		goto out;
	}
	/* Only a sandbox known to be gone is cleaned up: an error finding
	 * it (no fds, no /proc) says nothing about whether it runs. */
	if (rc != -ESRCH)
		goto out;
	rc = sbx_rec_cleanup(r, w->link, err, errsz);
	if (rc == 0 && w->gone)
		w->gone(r);
	if (rc == 0)
		sbx_log(SBX_LOG_INFO, "sandbox %s: forgotten", r->id);
out:
	free(r);
	return rc;
}

/* ---- sweep -------------------------------------------------------------- */

/* One state directory entry that is not kept: 0 swept, 1 not this
 * backend's, or -errno. */
static int
sweep_one(const struct sbx_durable *w, const char *root, const char *id, char *err, size_t errsz)
{
	char path[PATH_MAX * 2];
	struct sbx_rec *r = NULL;
	bool parsed = true; /* r is the backend's record, not a bare sbx_rec */
	const char *be;
	json_t *j;
	int rc;

	sbx_pathf(path, sizeof(path), "%s/%s/%s", root, id, SBX_SAVED_FILE);
	j = json_load_file(path, 0, NULL);
	be = json_string_value(json_object_get(j, "backend"));
	if (be ? strcmp(be, w->backend) != 0 : !w->unrecorded) {
		json_decref(j);
		return 1; /* another backend's: its own sweep decides */
	}
	if (!j || parse_new(w, j, "sweep", &r, NULL, 0) < 0 || strcmp(r->id, id) != 0 ||
	    !sbx_state_dir_ours(r->state_dir, id) || !sbx_rec_cgroups_ok(r)) {
		/* No usable record (a start that crashed early): its cgroups
		 * are where this process would have made them; a link it may
		 * have made is left to its namespace (name unknown). */
		struct sbx_cg cg;
		free(r);
		parsed = false;
		if (!(r = sbx_calloc(1, sizeof(*r)))) {
			rc = sbx_fail(err, errsz, -ENOMEM, "sweep: out of memory");
			goto out;
		}
		sbx_pathf(r->id, sizeof(r->id), "%s", id);
		sbx_pathf(r->state_dir, sizeof(r->state_dir), "%s/%s", root, id);
		if ((rc = sbx_cg_dirs(id, &cg, err, errsz)) < 0)
			goto out;
		sbx_rec_set_cg(r, &cg);
	}
	rc = sbx_rec_cleanup(r, w->link, err, errsz);
	if (rc == 0 && parsed && w->gone)
		w->gone(r);
	if (rc == 0)
		sbx_log(SBX_LOG_INFO, "sandbox %s: swept", id);
out:
	json_decref(j);
	free(r);
	return rc;
}

int
sbx_durable_sweep(const struct sbx_durable *w, const char *const *keep, size_t nkeep, char *err,
                  size_t errsz)
{
	char root[PATH_MAX], path[PATH_MAX * 2];
	DIR *d;
	struct dirent *e;
	int n = 0, rc = 0;

	sbx_state_root(root, sizeof(root));
	if (!(d = opendir(root)))
		return errno == ENOENT
		           ? 0
		           : sbx_fail(err, errsz, -errno, "sweep: %s: %s", root, strerror(errno));
	while ((e = readdir(d))) {
		struct stat st;
		bool kept = false;
		int r;

		if (!sbx_id_ok(e->d_name))
			continue;
		for (size_t i = 0; i < nkeep && !kept; i++)
			kept = keep[i] && strcmp(keep[i], e->d_name) == 0;
		if (kept)
			continue;
		sbx_pathf(path, sizeof(path), "%s/%s", root, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		r = sweep_one(w, root, e->d_name, rc ? NULL : err, errsz);
		if (r < 0 && !rc)
			rc = r;
		if (r == 0)
			n++;
	}
	closedir(d);
	return rc < 0 ? rc : n;
}

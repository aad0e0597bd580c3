/* rpc.c: the `rpc` backend (docs/backend-rpc.md): sandboxes made by an
 * external supervisor (rpc_sup.c), placed in a network namespace this
 * process makes and owns, reached through the same sluice-agent as `ns`
 * and `vm` (listening on a socket in a host directory bound at
 * /run/sluice). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "rpc-int.h"
#include "rpc_frame.h"
#include "rtnl.h"
#include "sandbox.h"
#include "vm-int.h"
#include "vm_img.h"

#define TPL_MAGIC    0x72706374u /* "rpct" */
#define ENSURE_MS    600000      /* the supervisor's own watchdog comes first */
#define START_MS     60000
#define AGENT_MS     30000
#define CALL_MS      30000
#define HANDLE_MAX   255
#define NETNS_DIR    "/run/netns"
#define AGENT_GUEST  "/.sluice"
#define RUN_GUEST    "/run/sluice"

struct rpc_tpl {
	uint32_t magic;
	struct rpc_be *be;
	enum sbx_template_kind kind;
	char root[PATH_MAX];
	char key[17];
	char ref[HANDLE_MAX + 1];
};

struct sbx {
	struct sbx_head head;
	struct rpc_be *be;
	struct sbx *next_live; /* be->live, under be->mu */
	bool on_live;
	char handle[HANDLE_MAX + 1]; /* under be->mu once live */
	int pid;
	int agent_fd;
	char dir[PATH_MAX];
	char netns[64]; /* its name under /run/netns */
	struct sbx_link peer;
};

/* ---- small things ---------------------------------------------------------- */

static bool
handle_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	if (n == 0 || n > HANDLE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)h[i] < 0x20 || h[i] == 0x7f)
			return false;
	return true;
}

static void
netns_name(char *out, size_t cap, const char *id)
{
	snprintf(out, cap, "sl-rpc-%s", id);
}

static void
live_add(struct sbx *s)
{
	pthread_mutex_lock(&s->be->mu);
	s->next_live = s->be->live;
	s->be->live = s;
	s->on_live = true;
	pthread_mutex_unlock(&s->be->mu);
}

static void
live_del(struct sbx *s)
{
	pthread_mutex_lock(&s->be->mu);
	for (struct sbx **p = &s->be->live; *p; p = &(*p)->next_live)
		if (*p == s) {
			*p = s->next_live;
			break;
		}
	s->on_live = false;
	pthread_mutex_unlock(&s->be->mu);
}

static void
handle_get(struct sbx *s, char *out)
{
	pthread_mutex_lock(&s->be->mu);
	memcpy(out, s->handle, sizeof(s->handle));
	pthread_mutex_unlock(&s->be->mu);
}

/* ---- the network namespace ------------------------------------------------- */

/* /run/netns as iproute2 makes it: a shared mount point, so a namespace
 * bound there is seen from every mount namespace (the supervisor's). */
static void
netns_dir_ready(void)
{
	if (mkdir(NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return;
	if (mount("", NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) == 0)
		return;
	if (errno == EINVAL && mount(NETNS_DIR, NETNS_DIR, "none", MS_BIND | MS_REC, NULL) == 0)
		mount("", NETNS_DIR, "none", MS_SHARED | MS_REC, NULL);
}

/* A new network namespace bound at /run/netns/name: its fd, or -errno. */
static int
netns_make(const char *name, char *err, size_t errsz)
{
	char path[128];
	int fd, self, rc;

	netns_dir_ready();
	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return sbx_fail(err, errsz, -errno, "start: cannot create %s: %s", path,
		                strerror(errno));
	close(fd);
	/* a new namespace for this thread only, bound to the name, then back */
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || unshare(CLONE_NEWNET) < 0) {
		rc = -errno;
		if (self >= 0)
			close(self);
		unlink(path);
		return sbx_fail(err, errsz, rc, "start: cannot create a network namespace: %s",
		                strerror(-rc));
	}
	rc = mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0 ? -errno : 0;
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* this thread would stay in the sandbox's namespace */
	close(self);
	if (rc < 0) {
		unlink(path);
		return sbx_fail(err, errsz, rc, "start: cannot bind the namespace to %s: %s", path,
		                strerror(-rc));
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_fail(err, errsz, -errno, "start: %s: %s", path, strerror(errno));
	return fd;
}

static void
netns_remove(const char *name)
{
	char path[128];

	if (!name[0])
		return;
	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	umount2(path, MNT_DETACH);
	unlink(path);
}

/* Removes what a sandbox had on this host: the peer link (if still the
 * one made), the namespace, the state directory. */
static void
local_cleanup(const char *id, const char *dir, const char *netns, const struct sbx_link *peer)
{
	if (peer->ifname[0] && peer->netns[0]) {
		struct sbx_rec r = { 0 };
		int nl;

		sbx_rec_set_link(&r, peer);
		if ((nl = sbx_rec_peer_open(&r)) >= 0) {
			sbx_peer_del(nl, peer->ifname, peer->ifindex);
			close(nl);
		}
	}
	netns_remove(netns);
	if (dir[0] && sbx_state_dir_ours(dir, id))
		sbx_rm_tree(dir);
}

/* ---- the saved record ----------------------------------------------------- */

static json_t *
saved_json(const struct sbx *s, const char *handle)
{
	json_t *sup = json_loads(s->be->key, 0, NULL);
	json_t *j = json_pack("{s:s, s:i, s:s, s:o, s:s, s:s, s:s, s:i}", "backend", "rpc",
	                      "version", SBX_SAVED_VERSION, "id", s->head.id, "supervisor",
	                      sup ? sup : json_null(), "handle", handle, "state_dir", s->dir,
	                      "netns", s->netns, "pid", s->pid);

	if (j && s->peer.ifname[0])
		json_object_set_new(j, "net",
		                    json_pack("{s:s, s:s, s:i, s:I}", "netns", s->peer.netns,
		                              "ifname", s->peer.ifname, "ifindex", s->peer.ifindex,
		                              "netns_ino", (json_int_t)s->peer.netns_ino));
	return j;
}

/* What a saved record says, checked. */
struct rpc_saved {
	char id[SBX_ID_MAX + 1];
	char handle[HANDLE_MAX + 1];
	char dir[PATH_MAX];
	char netns[64];
	struct sbx_link peer;
	int pid;
};

static int
saved_parse(const json_t *j, struct rpc_saved *sv, char **key, char *err, size_t errsz)
{
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *h = json_string_value(json_object_get(j, "handle"));
	const char *dir = json_string_value(json_object_get(j, "state_dir"));
	const char *ns = json_string_value(json_object_get(j, "netns"));
	json_t *net = json_object_get(j, "net"), *sup = json_object_get(j, "supervisor");
	char want[64];

	memset(sv, 0, sizeof(*sv));
	if (key)
		*key = NULL;
	if (!id || !sbx_id_ok(id))
		return sbx_fail(err, errsz, -EINVAL, "saved rpc sandbox: bad id");
	snprintf(sv->id, sizeof(sv->id), "%s", id);
	if (!handle_ok(h))
		return sbx_fail(err, errsz, -EINVAL, "saved rpc sandbox %s: bad handle", id);
	snprintf(sv->handle, sizeof(sv->handle), "%s", h);
	if (!dir || !sbx_state_dir_ours(dir, id) || strlen(dir) + 32 >= 108)
		return sbx_fail(err, errsz, -EINVAL,
		                "saved rpc sandbox %s: state_dir is not <state_dir>/%s", id, id);
	snprintf(sv->dir, sizeof(sv->dir), "%s", dir);
	netns_name(want, sizeof(want), id);
	if (!ns || strcmp(ns, want) != 0)
		return sbx_fail(err, errsz, -EINVAL, "saved rpc sandbox %s: netns is not %s", id,
		                want);
	snprintf(sv->netns, sizeof(sv->netns), "%s", ns);
	sv->pid = (int)json_integer_value(json_object_get(j, "pid"));
	if (net) {
		const char *pn = json_string_value(json_object_get(net, "netns"));
		const char *pi = json_string_value(json_object_get(net, "ifname"));
		json_int_t ix = json_integer_value(json_object_get(net, "ifindex"));

		if (!pn || !pi || !sbx_ifname_ok(pi) || strlen(pn) > SBX_NETNS_NAME_MAX ||
		    strchr(pn, '/') || ix < 0 || ix > 0x7fffffff)
			return sbx_fail(err, errsz, -EINVAL, "saved rpc sandbox %s: bad net", id);
		snprintf(sv->peer.netns, sizeof(sv->peer.netns), "%s", pn);
		snprintf(sv->peer.ifname, sizeof(sv->peer.ifname), "%s", pi);
		sv->peer.ifindex = (int)ix;
		sv->peer.netns_ino =
		    (unsigned long long)json_integer_value(json_object_get(net, "netns_ino"));
	}
	if (key) {
		if (!json_is_object(sup) || !(*key = json_dumps(sup, JSON_COMPACT)))
			return sbx_fail(err, errsz, -EINVAL, "saved rpc sandbox %s: no supervisor", id);
	}
	return 0;
}

const struct sbx_backend *
sbx_rpc_backend_from_saved(const json_t *saved, char *err, size_t errsz)
{
	struct rpc_saved sv;
	struct rpc_be *be;
	char *key;

	if (saved_parse(saved, &sv, &key, err, errsz) < 0)
		return NULL;
	be = sbx_rpc_be_for(key, err, errsz);
	free(key);
	return be ? &be->base : NULL;
}

/* ---- ops -------------------------------------------------------------------- */

static void
rpc_caps(const struct sbx_backend *b, struct sbx_caps *c)
{
	struct rpc_be *be = sbx_rpc_be_of(b);

	c->name = "rpc";
	pthread_mutex_lock(&be->mu);
	c->limit_memory = !be->caps_ok || be->lim_memory;
	c->limit_pids = !be->caps_ok || be->lim_pids;
	c->park = be->caps_ok && be->park;
	pthread_mutex_unlock(&be->mu);
	c->network = true;
	c->mounts = true;
	c->files = true;
	c->isolation_enhanced = true;
}

/* Under be->mu: refuses when the supervisor says its engine cannot run. */
static int
usable(struct rpc_be *be, char *err, size_t errsz)
{
	int rc;

	pthread_mutex_lock(&be->mu);
	rc = sbx_rpc_be_ensure(be, err, errsz);
	if (rc == 0 && !be->available)
		rc = sbx_fail(err, errsz, -ENOTSUP, "rpc: %s cannot run here: %s",
		              be->engine[0] ? be->engine : "the supervisor's engine", be->reason);
	pthread_mutex_unlock(&be->mu);
	return rc;
}

static int
rpc_template_ensure(const struct sbx_backend *b, const struct sbx_template_req *req,
                    struct sbx_template **out, char *err, size_t errsz)
{
	struct rpc_be *be = sbx_rpc_be_of(b);
	static const char *const kinds[] = { "busybox", "host", "dir" };
	struct rpc_tpl *t;
	uint64_t key;
	json_t *p, *r = NULL;
	const char *ref;
	int rc;

	if ((rc = usable(be, err, errsz)) < 0)
		return rc;
	if (!(t = sbx_calloc(1, sizeof(*t))))
		return sbx_fail(err, errsz, -ENOMEM, "template: out of memory");
	t->magic = TPL_MAGIC;
	t->be = be;
	t->kind = req->kind;
	if ((unsigned)req->kind > SBX_TEMPLATE_DIR) {
		free(t);
		return sbx_fail(err, errsz, -EINVAL, "template: unknown kind %d", (int)req->kind);
	}
	if ((rc = sbx_tpl_tree(req, t->root, sizeof(t->root), &key, err, errsz)) < 0) {
		free(t);
		return rc;
	}
	snprintf(t->key, sizeof(t->key), "%016llx", (unsigned long long)key);
	p = json_pack("{s:s, s:s, s:s}", "kind", kinds[req->kind], "root", t->root, "key", t->key);
	rc = sbx_rpc_be_call(be, "environment.ensure", p, ENSURE_MS, &r, err, errsz);
	json_decref(p);
	if (rc == 0) {
		ref = json_string_value(json_object_get(r, "ref"));
		if (!handle_ok(ref))
			rc = sbx_fail(err, errsz, -EPROTO, "rpc: environment.ensure: no usable ref");
		else
			snprintf(t->ref, sizeof(t->ref), "%s", ref);
	} else {
		char e2[256];

		snprintf(e2, sizeof(e2), "%s", err ? err : "");
		sbx_fail(err, errsz, rc, "template %s: environment.ensure: %s", kinds[req->kind], e2);
	}
	json_decref(r);
	if (rc < 0) {
		free(t);
		return rc;
	}
	sbx_log(SBX_LOG_INFO, "rpc: template %s (%s) is %s", kinds[req->kind], t->key, t->ref);
	*out = (struct sbx_template *)(void *)t;
	return 0;
}

static void
rpc_template_free(struct sbx_template *tt)
{
	struct rpc_tpl *t = (struct rpc_tpl *)(void *)tt;
	json_t *p, *r = NULL;
	char err[256];

	if (!t || t->magic != TPL_MAGIC)
		return;
	p = json_pack("{s:s}", "ref", t->ref);
	if (sbx_rpc_be_call(t->be, "environment.release", p, 5000, &r, err, sizeof(err)) < 0)
		sbx_log(SBX_LOG_DEBUG, "rpc: environment.release %s: %s", t->ref, err);
	json_decref(p);
	json_decref(r);
	free(t);
}

/* The sandbox.start params for spec. */
static json_t *
start_params(const struct sbx *s, const struct rpc_tpl *t, const struct sbx_spec *spec)
{
	char agent_dir[PATH_MAX], run[PATH_MAX + 8], cmd0[PATH_MAX], host[SBX_ID_MAX + 16];
	const char *base = strrchr(sbx_g.agent_path, '/');
	json_t *mounts, *env, *p;

	snprintf(agent_dir, sizeof(agent_dir), "%.*s", (int)(base - sbx_g.agent_path),
	         sbx_g.agent_path);
	snprintf(cmd0, sizeof(cmd0), AGENT_GUEST "/%s", base + 1);
	snprintf(run, sizeof(run), "%s/run", s->dir);
	snprintf(host, sizeof(host), "%s", spec->hostname ? spec->hostname : spec->id);
	for (char *h = host; *h; h++)
		if (*h == '_')
			*h = '-';
	mounts = json_pack("[{s:s, s:s, s:b}, {s:s, s:s, s:b}]", "source", agent_dir, "target",
	                   AGENT_GUEST, "read_only", 1, "source", run, "target", RUN_GUEST,
	                   "read_only", 0);
	for (size_t i = 0; mounts && i < spec->nmounts; i++)
		json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "source",
		                                        spec->mounts[i].source, "target",
		                                        spec->mounts[i].target, "read_only",
		                                        spec->mounts[i].read_only));
	env = json_array();
	for (size_t i = 0; env && i < spec->nenv; i++)
		json_array_append_new(env, json_string(spec->env[i]));
	p = json_pack("{s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:o, s:o, s:s, s:s, s:[s, s, s]}", "id",
	              spec->id, "ref", t->ref, "isolation",
	              spec->isolation == SBX_ISOLATION_ENHANCED ? "enhanced" : "standard",
	              "limits", "memory_mb", (int)spec->limits.memory_mb, "cpus_milli", (int)spec->limits.cpus_milli,
	              "pids", (int)spec->limits.pids, "mounts", mounts, "env", env, "cwd",
	              spec->cwd ? spec->cwd : "/", "hostname", host, "command", cmd0, "--listen",
	              RUN_GUEST "/agent.sock");
	if (p) {
		char nsp[128];

		snprintf(nsp, sizeof(nsp), NETNS_DIR "/%s", s->netns);
		json_object_set_new(p, "network", json_pack("{s:s}", "netns", nsp));
	}
	return p;
}

static int
rpc_start(const struct sbx_template *tt, const struct sbx_spec *spec, struct sbx **out, char *err,
          size_t errsz)
{
	const struct rpc_tpl *t = (const struct rpc_tpl *)(const void *)tt;
	struct rpc_be *be = t->be;
	struct sbx *s;
	char root[PATH_MAX], run[PATH_MAX + 8], sock[PATH_MAX + 32];
	json_t *p, *r = NULL;
	int rc, nsfd = -1, nl_peer = -1;
	const char *h;

	if (t->magic != TPL_MAGIC)
		return sbx_fail(err, errsz, -EINVAL, "start: not an rpc template");
	if (!sbx_g.agent_path[0] || !strchr(sbx_g.agent_path, '/'))
		return sbx_fail(err, errsz, -ENOTSUP, "start: the rpc backend needs sluice-agent "
		                "(agent_path)");
	if ((rc = usable(be, err, errsz)) < 0)
		return rc;
	if (!(s = sbx_calloc(1, sizeof(*s))))
		return sbx_fail(err, errsz, -ENOMEM, "start: out of memory");
	s->be = be;
	s->agent_fd = -1;
	snprintf(s->head.id, sizeof(s->head.id), "%s", spec->id);
	netns_name(s->netns, sizeof(s->netns), spec->id);
	sbx_state_root(root, sizeof(root));
	if (sbx_pathf(s->dir, sizeof(s->dir), "%s/%s", root, spec->id) < 0 ||
	    strlen(s->dir) + 32 >= 108) {
		free(s);
		return sbx_fail(err, errsz, -ENAMETOOLONG, "start: the state directory %s/%s is "
		                "too long for the agent's socket", root, spec->id);
	}
	if ((rc = sbx_mkdir_p(root, 0755)) < 0 || mkdir(s->dir, 0700) < 0) {
		rc = rc < 0 ? rc : -errno;
		free(s);
		return sbx_fail(err, errsz, rc, "start: state directory %s: %s", s->dir,
		                strerror(-rc));
	}
	s->dir[0] = s->dir[0]; /* from here on, failures remove it */
	snprintf(run, sizeof(run), "%s/run", s->dir);
	if (mkdir(run, 0755) < 0) {
		rc = sbx_fail(err, errsz, -errno, "start: %s: %s", run, strerror(errno));
		goto fail;
	}
	/* the record first: a sweep after a crash finds the leftovers */
	sbx_saved_write(s->dir, saved_json(s, "-"));
	if ((rc = nsfd = netns_make(s->netns, err, errsz)) < 0) {
		s->netns[0] = '\0'; /* not ours to remove */
		goto fail;
	}
	rc = sbx_link_setup(nsfd, &spec->net, &nl_peer, &s->peer, err, errsz);
	close(nsfd);
	if (nl_peer >= 0)
		close(nl_peer);
	if (rc < 0)
		goto fail;
	if (spec->net.kind == SBX_NET_LINK && spec->net.peer_netns_fd < 0)
		snprintf(s->peer.netns, sizeof(s->peer.netns), "%s", spec->net.peer_netns);

	p = start_params(s, t, spec);
	rc = p ? sbx_rpc_be_call(be, "sandbox.start", p, START_MS, &r, err, errsz)
	       : sbx_fail(err, errsz, -ENOMEM, "start: out of memory");
	json_decref(p);
	if (rc < 0) {
		char e2[256];

		snprintf(e2, sizeof(e2), "%s", err ? err : "");
		sbx_fail(err, errsz, rc, "start: sandbox.start: %s", e2);
		goto fail;
	}
	h = json_string_value(json_object_get(r, "handle"));
	if (!handle_ok(h)) {
		rc = sbx_fail(err, errsz, -EPROTO, "start: sandbox.start: no usable handle");
		goto fail;
	}
	snprintf(s->handle, sizeof(s->handle), "%s", h);
	s->pid = (int)json_integer_value(json_object_get(r, "pid"));
	json_decref(r);
	r = NULL;
	sbx_saved_write(s->dir, saved_json(s, s->handle));

	snprintf(sock, sizeof(sock), "%s/agent.sock", run);
	rc = s->agent_fd = sbx_vm_unix_connect(sock, s->pid > 0 ? s->pid : 0,
	                                       sbx_rpc_now_ms() + AGENT_MS, err, errsz);
	if (rc < 0)
		goto fail;
	if ((rc = sbx_agent_hello_fd(s->agent_fd, AGENT_MS, err, errsz)) < 0 ||
	    (rc = sbx_agent_setup(s->agent_fd, spec, false, AGENT_MS, err, errsz)) < 0)
		goto fail;
	live_add(s);
	*out = s;
	return 0;
fail:
	json_decref(r);
	sbx_close_fd(&s->agent_fd);
	if (s->handle[0]) {
		json_t *sp = json_pack("{s:s, s:i}", "handle", s->handle, "grace_ms", 0), *sr = NULL;
		char e3[256];

		if (sbx_rpc_be_call(be, "sandbox.stop", sp, CALL_MS, &sr, e3, sizeof(e3)) < 0)
			sbx_log(SBX_LOG_WARN, "rpc: %s: undoing a failed start: sandbox.stop: %s",
			        s->head.id, e3);
		json_decref(sp);
		json_decref(sr);
	}
	local_cleanup(s->head.id, s->dir, s->netns, &s->peer);
	free(s);
	return rc;
}

static int
rpc_agent_fd(const struct sbx *s)
{
	return s->agent_fd >= 0 ? s->agent_fd : -EBADF;
}

static int
rpc_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
{
	char handle[HANDLE_MAX + 1];
	json_t *p, *r = NULL;
	int rc = 0;

	sbx_close_fd(&s->agent_fd);
	handle_get(s, handle);
	if (handle[0]) {
		p = json_pack("{s:s, s:i}", "handle", handle, "grace_ms", (int)grace_ms);
		rc = sbx_rpc_be_call(s->be, "sandbox.stop", p, (int)grace_ms + CALL_MS, &r, err,
		                     errsz);
		json_decref(p);
		json_decref(r);
		if (rc == -ESRCH)
			rc = 0;
		if (rc < 0) {
			char e2[256];

			snprintf(e2, sizeof(e2), "%s", err ? err : "");
			return sbx_fail(err, errsz, rc, "stop %s: sandbox.stop: %s", s->head.id, e2);
		}
	}
	live_del(s);
	pthread_mutex_lock(&s->be->mu);
	s->handle[0] = '\0';
	pthread_mutex_unlock(&s->be->mu);
	local_cleanup(s->head.id, s->dir, s->netns, &s->peer);
	s->netns[0] = '\0';
	s->peer.ifname[0] = '\0';
	return 0;
}

static void
rpc_free(struct sbx *s)
{
	char err[256];

	if (!s)
		return;
	if (s->handle[0] && rpc_stop(s, 0, err, sizeof(err)) < 0)
		sbx_log(SBX_LOG_WARN, "rpc: %s", err);
	if (s->on_live)
		live_del(s);
	sbx_close_fd(&s->agent_fd);
	free(s);
}

static void
rpc_release(struct sbx *s)
{
	if (!s)
		return;
	live_del(s);
	sbx_close_fd(&s->agent_fd);
	free(s);
}

static json_t *
rpc_save(const struct sbx *s)
{
	char handle[HANDLE_MAX + 1];

	handle_get((struct sbx *)(uintptr_t)s, handle);
	return handle[0] ? saved_json(s, handle) : NULL;
}

/* sandbox.adopt {id, handle}: 0 with the new handle and pid; -ESRCH when
 * the supervisor has no such sandbox. */
static int
adopt_call(struct rpc_be *be, struct sbx_rpc_client *cli, const char *id, char *handle, int *pid,
           char *err, size_t errsz)
{
	json_t *p = json_pack("{s:s, s:s}", "id", id, "handle", handle), *r = NULL;
	const char *h;
	int rc;

	rc = cli ? sbx_rpc_call(cli, "sandbox.adopt", p, sbx_rpc_now_ms() + CALL_MS, &r, NULL, err,
	                        errsz)
	         : sbx_rpc_be_call(be, "sandbox.adopt", p, CALL_MS, &r, err, errsz);
	json_decref(p);
	if (rc < 0)
		return rc;
	h = json_string_value(json_object_get(r, "handle"));
	if (h && handle_ok(h))
		snprintf(handle, HANDLE_MAX + 1, "%s", h);
	if (json_is_false(json_object_get(r, "running")))
		rc = sbx_fail(err, errsz, -ESRCH, "sandbox %s is no longer running", id);
	if (pid)
		*pid = (int)json_integer_value(json_object_get(r, "pid"));
	json_decref(r);
	return rc;
}

void
sbx_rpc_readopt(struct rpc_be *be, struct sbx_rpc_client *cli)
{
	for (struct sbx *s = be->live; s; s = s->next_live) {
		char err[256], handle[HANDLE_MAX + 1];
		int rc;

		memcpy(handle, s->handle, sizeof(handle));
		rc = adopt_call(be, cli, s->head.id, handle, NULL, err, sizeof(err));
		if (rc == 0) {
			memcpy(s->handle, handle, sizeof(handle));
			sbx_log(SBX_LOG_INFO, "rpc: %s adopted again", s->head.id);
		} else {
			sbx_log(SBX_LOG_WARN, "rpc: %s could not be adopted again: %s", s->head.id,
			        err);
		}
	}
}

static int
rpc_adopt(const struct sbx_backend *b, const json_t *saved, struct sbx **out, char *err,
          size_t errsz)
{
	const struct sbx_backend *mine = sbx_rpc_backend_from_saved(saved, err, errsz);
	struct rpc_saved sv;
	struct sbx *s;
	char sock[PATH_MAX + 32];
	int rc;

	(void)b;
	if (!mine || saved_parse(saved, &sv, NULL, err, errsz) < 0)
		return -EINVAL;
	if (!(s = sbx_calloc(1, sizeof(*s))))
		return sbx_fail(err, errsz, -ENOMEM, "adopt: out of memory");
	s->be = sbx_rpc_be_of(mine);
	s->agent_fd = -1;
	snprintf(s->head.id, sizeof(s->head.id), "%s", sv.id);
	memcpy(s->handle, sv.handle, sizeof(s->handle));
	memcpy(s->dir, sv.dir, sizeof(s->dir));
	memcpy(s->netns, sv.netns, sizeof(s->netns));
	s->peer = sv.peer;
	if ((rc = adopt_call(s->be, NULL, sv.id, s->handle, &s->pid, err, errsz)) < 0) {
		free(s);
		return rc;
	}
	snprintf(sock, sizeof(sock), "%s/run/agent.sock", s->dir);
	rc = s->agent_fd = sbx_vm_unix_connect(sock, s->pid > 0 ? s->pid : 0,
	                                       sbx_rpc_now_ms() + AGENT_MS, err, errsz);
	if (rc < 0) {
		free(s);
		return rc;
	}
	sbx_saved_write(s->dir, saved_json(s, s->handle));
	live_add(s);
	*out = s;
	return 0;
}

static int
rpc_forget(const struct sbx_backend *b, const json_t *saved, char *err, size_t errsz)
{
	const struct sbx_backend *mine = sbx_rpc_backend_from_saved(saved, err, errsz);
	struct rpc_saved sv;
	int rc;

	(void)b;
	if (!mine || saved_parse(saved, &sv, NULL, err, errsz) < 0)
		return -EINVAL;
	rc = adopt_call(sbx_rpc_be_of(mine), NULL, sv.id, sv.handle, NULL, err, errsz);
	if (rc == 0)
		return sbx_fail(err, errsz, -EBUSY, "forget %s: it still runs", sv.id);
	if (rc != -ESRCH)
		return rc;
	local_cleanup(sv.id, sv.dir, sv.netns, &sv.peer);
	sbx_log(SBX_LOG_INFO, "rpc: %s forgotten", sv.id);
	return 0;
}

static bool
kept(const char *id, const char *const *keep, size_t nkeep)
{
	for (size_t i = 0; i < nkeep; i++)
		if (strcmp(keep[i], id) == 0)
			return true;
	return false;
}

static int
rpc_sweep(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err,
          size_t errsz)
{
	struct rpc_be *be = sbx_rpc_be_of(b);
	char root[PATH_MAX];
	json_t *p = json_object(), *r = NULL, *list;
	size_t i;
	json_t *it;
	int rc, n = 0;
	DIR *d;
	struct dirent *e;

	rc = sbx_rpc_be_call(be, "sandbox.list", p, CALL_MS, &r, err, errsz);
	json_decref(p);
	if (rc < 0)
		return rc;
	list = json_object_get(r, "sandboxes");
	json_array_foreach(list, i, it) {
		const char *id = json_string_value(json_object_get(it, "id"));
		const char *h = json_string_value(json_object_get(it, "handle"));
		json_t *sp, *sr = NULL;
		char e2[256];

		if (!id || !handle_ok(h) || kept(id, keep, nkeep))
			continue;
		sp = json_pack("{s:s, s:i}", "handle", h, "grace_ms", 0);
		if (sbx_rpc_be_call(be, "sandbox.stop", sp, CALL_MS, &sr, e2, sizeof(e2)) == 0) {
			sbx_log(SBX_LOG_INFO, "rpc: swept %s", id);
			n++;
		} else {
			sbx_log(SBX_LOG_WARN, "rpc: sweep %s: %s", id, e2);
		}
		json_decref(sp);
		json_decref(sr);
	}
	json_decref(r);
	/* what this host kept for sandboxes of this supervisor */
	sbx_state_root(root, sizeof(root));
	if (!(d = opendir(root)))
		return n;
	while ((e = readdir(d))) {
		char f[PATH_MAX + 300], *key = NULL;
		json_t *j;
		struct rpc_saved sv;

		if (e->d_name[0] == '.' || !sbx_id_ok(e->d_name) || kept(e->d_name, keep, nkeep))
			continue;
		snprintf(f, sizeof(f), "%s/%s/" SBX_SAVED_FILE, root, e->d_name);
		j = json_load_file(f, 0, NULL);
		if (j && json_is_string(json_object_get(j, "backend")) &&
		    strcmp(json_string_value(json_object_get(j, "backend")), "rpc") == 0) {
			json_t *sup = json_object_get(j, "supervisor");

			key = json_is_object(sup) ? json_dumps(sup, JSON_COMPACT) : NULL;
			if (key && strcmp(key, be->key) == 0) {
				/* a record written before the handle came may say "-" */
				if (json_is_string(json_object_get(j, "handle")) &&
				    strcmp(json_string_value(json_object_get(j, "handle")), "-") == 0)
					json_object_set_new(j, "handle", json_string("none"));
				if (saved_parse(j, &sv, NULL, NULL, 0) == 0 &&
				    strcmp(sv.id, e->d_name) == 0) {
					local_cleanup(sv.id, sv.dir, sv.netns, &sv.peer);
					n++;
				}
			}
		}
		free(key);
		json_decref(j);
	}
	closedir(d);
	return n;
}

static int
pause_call(struct sbx *s, const char *method, char *err, size_t errsz)
{
	char handle[HANDLE_MAX + 1];
	json_t *p, *r = NULL;
	bool park;
	int rc;

	pthread_mutex_lock(&s->be->mu);
	park = s->be->caps_ok && s->be->park;
	pthread_mutex_unlock(&s->be->mu);
	if (!park)
		return sbx_fail(err, errsz, -ENOTSUP, "this supervisor cannot pause sandboxes");
	handle_get(s, handle);
	p = json_pack("{s:s}", "handle", handle);
	rc = sbx_rpc_be_call(s->be, method, p, CALL_MS, &r, err, errsz);
	json_decref(p);
	json_decref(r);
	return rc;
}

static int
rpc_park(struct sbx *s, char *err, size_t errsz)
{
	return pause_call(s, "sandbox.pause", err, errsz);
}

static int
rpc_unpark(struct sbx *s, char *err, size_t errsz)
{
	return pause_call(s, "sandbox.resume", err, errsz);
}

const struct sbx_backend_ops sbx_rpc_ops = {
    .name = "rpc",
    .caps = rpc_caps,
    .template_ensure = rpc_template_ensure,
    .template_free = rpc_template_free,
    .start = rpc_start,
    .agent_fd = rpc_agent_fd,
    .stop = rpc_stop,
    .free = rpc_free,
    .save = rpc_save,
    .adopt = rpc_adopt,
    .forget = rpc_forget,
    .sweep = rpc_sweep,
    .release = rpc_release,
    .park = rpc_park,
    .unpark = rpc_unpark,
};

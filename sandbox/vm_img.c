/* vm_img.c: the `vm` backend's templates and the pure helpers of vm.c.
 *
 * A vm template is a read-only erofs image in <cache_dir>/vm/, made once
 * (temp file + rename) and named by a hash of what went into it, so a
 * changed input makes a new image beside the old one:
 *   busybox  the ns busybox tree (static /bin/busybox, its applet links,
 *            /etc/passwd, group, hosts; empty /proc /sys /dev /run /tmp
 *            /root /home /var/tmp)
 *   host     busybox as above plus, when the host has them, curl, wget,
 *            python3 (with /usr/lib/python3.11), openssl and git (with
 *            /usr/lib/git-core), each with the shared libraries ldd lists
 *            for it (and for python's lib-dynload modules), copied to the
 *            same paths; /etc/ssl/certs and /usr/share/ca-certificates
 *   dir      the operator's root directory as it is
 * Owners are root in the image; nothing per-sandbox, nothing secret. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "sandbox.h"
#include "vm-int.h"
#include "vm_img.h"

#define FNV_INIT 1469598103934665603ull

uint64_t
sbx_vm_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 1099511628211ull;
	}
	return h;
}

uint64_t
sbx_vm_hash_stat(uint64_t h, const char *path)
{
	struct stat st;

	h = sbx_vm_hash(h, path, strlen(path) + 1);
	if (stat(path, &st) == 0) {
		h = sbx_vm_hash(h, &st.st_size, sizeof(st.st_size));
		h = sbx_vm_hash(h, &st.st_mtim, sizeof(st.st_mtim));
		h = sbx_vm_hash(h, &st.st_ino, sizeof(st.st_ino));
		h = sbx_vm_hash(h, &st.st_mode, sizeof(st.st_mode));
	}
	return h;
}

int
sbx_vm_run(const char *const argv[], const char *log, char *err, size_t errsz)
{
	pid_t pid;
	int st;

	pid = fork();
	if (pid < 0)
		return sbx_fail(err, errsz, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0600);
		int nul = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		closefrom(3);
		execvp(argv[0], (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return sbx_fail(err, errsz, -errno, "wait: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return sbx_fail(err, errsz, -EIO, "%s failed (status %d%s%s)", argv[0],
		                WIFEXITED(st) ? WEXITSTATUS(st) : -1, log ? "; see " : "",
		                log ? log : "");
	return 0;
}

/* ---- pure --------------------------------------------------------------- */

int
sbx_vm_opt_escape(char *out, size_t cap, const char *in)
{
	size_t n = 0;

	for (; *in; in++) {
		size_t k = *in == ',' ? 2 : 1;
		if (n + k >= cap)
			return -ENAMETOOLONG;
		out[n++] = *in;
		if (k == 2)
			out[n++] = ',';
	}
	if (n >= cap)
		return -ENAMETOOLONG;
	out[n] = 0;
	return 0;
}

int64_t
sbx_vm_backoff_ms(unsigned fails)
{
	int64_t ms = 30000;

	while (fails > 1 && ms < 600000) {
		ms *= 2;
		fails--;
	}
	return ms < 600000 ? ms : 600000;
}

int
sbx_vm_cmdline(char *out, size_t cap, const char *hostname, unsigned long tsc_khz)
{
	char tsc[96] = "";

	if (tsc_khz)
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%lu tsc=reliable", tsc_khz);
	return sbx_pathf(out, cap,
	                 "console=ttyS0 quiet panic=-1%s sluice.root=/dev/vda "
	                 "sluice.port=sluice.agent sluice.hostname=%s",
	                 tsc, hostname);
}

unsigned long
sbx_vm_cpuinfo_khz(const char *ci)
{
	for (const char *l = ci; l && *l;) {
		const char *nl = strchr(l, '\n');
		if (strncmp(l, "cpu MHz", 7) == 0) {
			const char *c = strchr(l, ':');
			if (c && (!nl || c < nl)) {
				char *end;
				double mhz = strtod(c + 1, &end);
				if (end != c + 1 && mhz > 0 && mhz < 100000)
					return (unsigned long)(mhz * 1000 + 0.5);
			}
			return 0;
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* ---- templates ------------------------------------------------------------ */

static const char host_sh[] =
    "set -e\n"
    "T=$1; L=$2\n"
    "cp -a \"$L\"/. \"$T\"/\n"
    "progs=''\n"
    "for p in curl wget python3 openssl git; do\n"
    "  for d in /usr/bin /bin /usr/local/bin; do\n"
    "    if [ -x \"$d/$p\" ] && [ ! -L \"$d/$p\" -o -e \"$d/$p\" ]; then\n"
    "      case \"$(readlink -f \"$d/$p\")\" in */busybox) ;; *) progs=\"$progs $d/$p\"; break;; "
    "esac\n"
    "    fi\n"
    "  done\n"
    "done\n"
    "mods=''\n"
    "[ -d /usr/lib/python3.11/lib-dynload ] && mods=$(ls /usr/lib/python3.11/lib-dynload/*.so "
    "2>/dev/null || true)\n"
    "libs=$(for f in $progs $mods; do ldd \"$f\" 2>/dev/null || true; done |"
    " sed -n 's/.*=> \\(\\/[^ ]*\\) (0x.*/\\1/p; s/^[[:space:]]*\\(\\/[^ ]*\\) (0x.*/\\1/p' | sort "
    "-u)\n"
    "for f in $progs $libs; do\n"
    "  rm -f \"$T$f\"; mkdir -p \"$T$(dirname \"$f\")\"; cp -L \"$f\" \"$T$f\"\n"
    "done\n"
    "for d in /usr/lib/python3.11 /usr/lib/git-core /etc/ssl/certs /usr/share/ca-certificates; do\n"
    "  if [ -d \"$d\" ]; then mkdir -p \"$T$(dirname \"$d\")\"; cp -a \"$d\" \"$T$(dirname "
    "\"$d\")/\"; fi\n"
    "done\n"
    "exit 0\n";

/* nftw() takes no context: the walk's running hash, per thread (starts of
 * different templates may run on different threads). */
static _Thread_local uint64_t tree_h;
static int
tree_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	tree_h = sbx_vm_hash(tree_h, p, strlen(p) + 1);
	tree_h = sbx_vm_hash(tree_h, &st->st_size, sizeof(st->st_size));
	tree_h = sbx_vm_hash(tree_h, &st->st_mtim, sizeof(st->st_mtim));
	tree_h = sbx_vm_hash(tree_h, &st->st_mode, sizeof(st->st_mode));
	return 0;
}

int
sbx_vm_tpl_ensure(const struct sbx_template_req *req, struct sbx_vm_tpl **out, char *err,
                  size_t errsz)
{
	static const char *const host_progs[] = {
	    "/usr/bin/curl",       "/usr/bin/wget",     "/usr/bin/python3",
	    "/usr/bin/openssl",    "/usr/bin/git",      "/etc/ssl/certs",
	    "/usr/lib/python3.11", "/usr/lib/git-core", "/usr/share/ca-certificates"};
	struct sbx_template_req bb = {.kind = SBX_TEMPLATE_BUSYBOX};
	struct sbx_template *lower = NULL;
	struct sbx_vm_tpl *t;
	char vdir[PATH_MAX], tmp[PATH_MAX + 64], stage[PATH_MAX + 64], log[PATH_MAX + 64];
	const char *name, *src;
	uint64_t h = FNV_INIT;
	struct stat st;
	int rc;

	*out = NULL;
	if (!(t = sbx_calloc(1, sizeof(*t))))
		return sbx_fail(err, errsz, -ENOMEM, "template: out of memory");
	t->magic = SBX_VM_TPL_MAGIC;
	t->kind = req->kind;
	switch (req->kind) {
	case SBX_TEMPLATE_DIR:
		if (!req->dir || req->dir[0] != '/' || stat(req->dir, &st) < 0 ||
		    !S_ISDIR(st.st_mode)) {
			free(t);
			return sbx_fail(err, errsz, -ENOENT,
			                "template: \"%s\" is not a directory; give the absolute "
			                "path of a root file system",
			                req->dir ? req->dir : "");
		}
		name = "dir";
		src = req->dir;
		tree_h = sbx_vm_hash(FNV_INIT, "dir", 4);
		if (nftw(req->dir, tree_one, 16, FTW_PHYS | FTW_MOUNT) < 0) {
			free(t);
			return sbx_fail(err, errsz, -errno, "template: walk %s: %s", req->dir,
			                strerror(errno));
		}
		h = tree_h;
		break;
	case SBX_TEMPLATE_BUSYBOX:
	case SBX_TEMPLATE_HOST:
		name = req->kind == SBX_TEMPLATE_BUSYBOX ? "busybox" : "host";
		if ((rc = sbx_tpl_ensure(&bb, &lower, err, errsz)) < 0) {
			free(t);
			return rc;
		}
		src = lower->lower;
		h = sbx_vm_hash(h, name, strlen(name) + 1);
		{
			char p[PATH_MAX + 16];
			sbx_pathf(p, sizeof(p), "%s/bin/busybox", src);
			h = sbx_vm_hash_stat(h, p);
		}
		if (req->kind == SBX_TEMPLATE_HOST)
			for (size_t i = 0; i < sizeof(host_progs) / sizeof(host_progs[0]); i++)
				h = sbx_vm_hash_stat(h, host_progs[i]);
		break;
	default:
		free(t);
		return sbx_fail(err, errsz, -EINVAL, "template: unknown kind %d", (int)req->kind);
	}
	sbx_pathf(vdir, sizeof(vdir), "%s/vm", sbx_g.cache_dir);
	sbx_pathf(t->image, sizeof(t->image), "%s/%s-%016llx.erofs", vdir, name,
	          (unsigned long long)h);
	if (stat(t->image, &st) == 0 && S_ISREG(st.st_mode))
		goto done;
	if ((rc = sbx_mkdir_p(vdir, 0755)) < 0) {
		rc =
		    sbx_fail(err, errsz, rc, "template: cannot create %s: %s", vdir, strerror(-rc));
		goto fail;
	}
	sbx_pathf(tmp, sizeof(tmp), "%s.tmp.%d", t->image, (int)gettid());
	sbx_pathf(log, sizeof(log), "%s/%s.log", vdir, name);
	unlink(log);
	if (req->kind == SBX_TEMPLATE_HOST) {
		sbx_pathf(stage, sizeof(stage), "%s/host.stage.%d", vdir, (int)gettid());
		sbx_rm_tree(stage);
		if (mkdir(stage, 0755) < 0) {
			rc = sbx_fail(err, errsz, -errno, "template host: %s: %s", stage,
			              strerror(errno));
			goto fail;
		}
		const char *argv[] = {"/bin/sh", "-c", host_sh, "sh", stage, src, NULL};
		rc = sbx_vm_run(argv, log, err, errsz);
		if (rc < 0) {
			sbx_rm_tree(stage);
			goto fail;
		}
		src = stage;
	}
	{
		const char *argv[] = {"mkfs.erofs", "--quiet", "--all-root", "-T0", tmp, src, NULL};
		rc = sbx_vm_run(argv, log, err, errsz);
	}
	if (req->kind == SBX_TEMPLATE_HOST)
		sbx_rm_tree(stage);
	if (rc < 0) {
		unlink(tmp);
		rc = sbx_fail(err, errsz, rc,
		              "template %s: mkfs.erofs failed (install erofs-utils; see %s)", name,
		              log);
		goto fail;
	}
	if (rename(tmp, t->image) < 0) {
		rc = sbx_fail(err, errsz, -errno, "template %s: rename to %s: %s", name, t->image,
		              strerror(errno));
		unlink(tmp);
		goto fail;
	}
	sbx_log(SBX_LOG_INFO, "vm template %s: built %s", name, t->image);
done:
	sbx_tpl_free(lower);
	*out = t;
	return 0;
fail:
	sbx_tpl_free(lower);
	free(t);
	return rc;
}

/* ---- the saved record ------------------------------------------------------ */

static bool
path_ends_in(const char *p, const char *id, size_t cap)
{
	size_t n, il = strlen(id);

	if (!p || p[0] != '/' || (n = strlen(p)) >= cap || n <= il + 1)
		return false;
	for (const char *c = p; *c; c++)
		if (c[0] == '/' && c[1] == '.' &&
		    (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0))))
			return false;
	return p[n - il - 1] == '/' && strcmp(p + n - il, id) == 0;
}

json_t *
sbx_vm_saved_to_json(const struct sbx_vm_saved *sv)
{
	json_t *j, *cg, *net = NULL;

	if (!(cg = json_array()))
		return NULL;
	for (size_t i = 0; i < sv->ncg; i++)
		json_array_append_new(cg, json_string(sv->cg[i]));
	if (sv->peer_ifname[0]) {
		net = json_pack("{s:s, s:i, s:I}", "peer_ifname", sv->peer_ifname, "peer_ifindex",
		                sv->peer_ifindex, "peer_netns_ino", (json_int_t)sv->peer_netns_ino);
		if (net && sv->peer_netns[0])
			json_object_set_new(net, "peer_netns", json_string(sv->peer_netns));
		if (!net) {
			json_decref(cg);
			return NULL;
		}
	}
	j = json_pack("{s:s, s:i, s:s, s:i, s:I, s:s, s:i, s:o, s:s}", "backend", "vm", "version",
	              1, "id", sv->id, "pid", sv->pid, "start_time", (json_int_t)sv->start_time,
	              "state_dir", sv->state_dir, "cgroup_version", sv->cg_version, "cgroups", cg,
	              "snapshot", sv->snap);
	if (j) {
		char p[PATH_MAX + 16];
		snprintf(p, sizeof(p), "%s/qmp.sock", sv->state_dir);
		json_object_set_new(j, "qmp_socket", json_string(p));
		snprintf(p, sizeof(p), "%s/agent.sock", sv->state_dir);
		json_object_set_new(j, "agent_socket", json_string(p));
	}
	if (j && net)
		json_object_set_new(j, "net", net);
	else
		json_decref(net);
	return j;
}

int
sbx_vm_saved_parse(const json_t *j, struct sbx_vm_saved *out, char *err, size_t errsz)
{
	const json_t *v, *cg, *net;
	const char *s;
	json_int_t n;
	size_t i;
	char want[PATH_MAX + 16];

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return sbx_fail(err, errsz, -EINVAL, "saved vm: not a JSON object");
	if (!(s = json_string_value(json_object_get(j, "backend"))) || strcmp(s, "vm") != 0)
		return sbx_fail(err, errsz, -EINVAL, "saved vm: \"backend\" is not \"vm\"");
	v = json_object_get(j, "version");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return sbx_fail(err, errsz, -EINVAL, "saved vm: \"version\" is not 1");
	if (!(s = json_string_value(json_object_get(j, "id"))) || !sbx_id_ok(s))
		return sbx_fail(err, errsz, -EINVAL, "saved vm: \"id\" is not a sandbox id");
	snprintf(out->id, sizeof(out->id), "%s", s);
	v = json_object_get(j, "pid");
	if (!json_is_integer(v) || (n = json_integer_value(v)) < 2 || n > 4194304)
		return sbx_fail(err, errsz, -EINVAL, "saved vm %s: \"pid\" out of range", out->id);
	out->pid = (int)n;
	v = json_object_get(j, "start_time");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return sbx_fail(err, errsz, -EINVAL, "saved vm %s: \"start_time\" must be >= 0",
		                out->id);
	out->start_time = (unsigned long long)json_integer_value(v);
	s = json_string_value(json_object_get(j, "state_dir"));
	/* room for "/agent.sock" in a sun_path */
	if (!path_ends_in(s, out->id, 108 - 12))
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"state_dir\" must be an absolute path ending in "
		                "the id, short enough for its sockets",
		                out->id);
	snprintf(out->state_dir, sizeof(out->state_dir), "%s", s);
	snprintf(want, sizeof(want), "%s/qmp.sock", out->state_dir);
	s = json_string_value(json_object_get(j, "qmp_socket"));
	if (!s || strcmp(s, want) != 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"qmp_socket\" is not <state_dir>/qmp.sock", out->id);
	snprintf(want, sizeof(want), "%s/agent.sock", out->state_dir);
	s = json_string_value(json_object_get(j, "agent_socket"));
	if (!s || strcmp(s, want) != 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"agent_socket\" is not <state_dir>/agent.sock",
		                out->id);
	v = json_object_get(j, "cgroup_version");
	if (!json_is_integer(v) || (json_integer_value(v) != 1 && json_integer_value(v) != 2))
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"cgroup_version\" is not 1 or 2", out->id);
	out->cg_version = (int)json_integer_value(v);
	cg = json_object_get(j, "cgroups");
	if (!json_is_array(cg) || json_array_size(cg) == 0 || json_array_size(cg) > SBX_CG__N ||
	    (out->cg_version == 2 && json_array_size(cg) != 1))
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"cgroups\" must list 1 to %d directories (1 on v2)",
		                out->id, SBX_CG__N);
	json_array_foreach(cg, i, v)
	{
		s = json_string_value(v);
		if (!path_ends_in(s, out->id, sizeof(out->cg[0])))
			return sbx_fail(err, errsz, -EINVAL,
			                "saved vm %s: cgroup %zu must be an absolute path ending "
			                "in the id",
			                out->id, i);
		for (size_t k = 0; k < i; k++)
			if (strcmp(out->cg[k], s) == 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "saved vm %s: cgroup %zu is listed twice", out->id,
				                i);
		snprintf(out->cg[i], sizeof(out->cg[i]), "%s", s);
	}
	out->ncg = json_array_size(cg);
	s = json_string_value(json_object_get(j, "snapshot"));
	if (!s || strlen(s) >= sizeof(out->snap) || strspn(s, "0123456789abcdef") != strlen(s))
		return sbx_fail(err, errsz, -EINVAL, "saved vm %s: \"snapshot\" is not a key",
		                out->id);
	snprintf(out->snap, sizeof(out->snap), "%s", s);
	net = json_object_get(j, "net");
	if (net && !json_is_null(net)) {
		if (!json_is_object(net))
			return sbx_fail(err, errsz, -EINVAL,
			                "saved vm %s: \"net\" is not an object", out->id);
		s = json_string_value(json_object_get(net, "peer_ifname"));
		if (!s || !sbx_ifname_ok(s))
			return sbx_fail(
			    err, errsz, -EINVAL,
			    "saved vm %s: net: \"peer_ifname\" is not an interface name", out->id);
		snprintf(out->peer_ifname, sizeof(out->peer_ifname), "%s", s);
		v = json_object_get(net, "peer_ifindex");
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0x7fffffff)
			return sbx_fail(err, errsz, -EINVAL,
			                "saved vm %s: net: \"peer_ifindex\" out of range", out->id);
		out->peer_ifindex = (int)json_integer_value(v);
		v = json_object_get(net, "peer_netns");
		if (v) {
			s = json_string_value(v);
			if (!s || !s[0] || strlen(s) > SBX_NETNS_NAME_MAX || strchr(s, '/') ||
			    strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "saved vm %s: net: \"peer_netns\" is not a "
				                "namespace name",
				                out->id);
			snprintf(out->peer_netns, sizeof(out->peer_netns), "%s", s);
		}
		v = json_object_get(net, "peer_netns_ino");
		if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
			return sbx_fail(err, errsz, -EINVAL,
			                "saved vm %s: net: \"peer_netns_ino\" out of range",
			                out->id);
		if (v)
			out->peer_netns_ino = (unsigned long long)json_integer_value(v);
	}
	return 0;
}

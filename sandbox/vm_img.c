/* vm_img.c: the `vm` backend's templates and the pure helpers of vm.c.
 *
 * A vm template is a read-only erofs image in <cache_dir>/vm/, made once
 * (temp file + rename) and named by a hash of what went into it, so a
 * changed input makes a new image beside the old one:
 *   busybox  the ns busybox tree (static /bin/busybox, its applet links,
 *            /etc/passwd, group, hosts; empty /proc /sys /dev /run /tmp
 *            /root /home /var/tmp)
 *   host     busybox as above plus, when the host has them, curl, wget,
 *            python3 (with /usr/lib/python3.11), openssl, git (with
 *            /usr/lib/git-core) and ssh, each with the shared libraries ldd lists
 *            for it (and for python's lib-dynload modules and git's
 *            git-remote-http helpers), copied to the
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
	/* Each trims a TCG boot (sandbox/vm/README.md measures them): one
	 * UART instead of four, no crypto self-tests, and no kprobe trace
	 * events, X.509 key list (module signatures are stripped) or KDF
	 * self-test. Not btf_vmlinux_init: without /sys/kernel/btf every
	 * module load warns with a stack trace (btf_module_notify). */
	return sbx_pathf(out, cap,
	                 "console=ttyS0 quiet panic=-1%s 8250.nr_uarts=1 cryptomgr.notests=1 "
	                 "initcall_blacklist=init_kprobe_trace,load_system_certificate_list,"
	                 "crypto_kdf108_init sluice.root=/dev/vda "
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
    "for p in curl wget python3 openssl git ssh; do\n"
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
    /* git's helpers link their own libraries (git-remote-https: libcurl-gnutls) */
    "mods=\"$mods $(ls /usr/lib/git-core/git-remote-http* 2>/dev/null || true)\"\n"
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

/* The inputs of the template req names: *name ("busybox", "host",
 * "dir"), *src (the tree a build starts from: the ns busybox tree or the
 * operator's directory; *lower holds the busybox one, free it) and a hash
 * of everything the built template depends on. 0 or -errno with err. */
static int
tpl_inputs(const struct sbx_template_req *req, struct sbx_template **lower, const char **name,
           const char **src, uint64_t *hash, char *err, size_t errsz)
{
	static const char *const host_progs[] = {
	    "/usr/bin/curl",       "/usr/bin/wget",     "/usr/bin/python3",
	    "/usr/bin/openssl",    "/usr/bin/git",      "/etc/ssl/certs",
	    "/usr/lib/python3.11", "/usr/lib/git-core", "/usr/share/ca-certificates",
	    "/usr/bin/ssh"};
	struct sbx_template_req bb = {.kind = SBX_TEMPLATE_BUSYBOX};
	uint64_t h = FNV_INIT;
	int rc;

	*lower = NULL;
	switch (req->kind) {
	case SBX_TEMPLATE_DIR:
		if ((rc = sbx_tpl_dir_check(req->dir, err, errsz)) < 0)
			return rc;
		*name = "dir";
		*src = req->dir;
		tree_h = sbx_vm_hash(FNV_INIT, "dir", 4);
		if (nftw(req->dir, tree_one, 16, FTW_PHYS | FTW_MOUNT) < 0)
			return sbx_fail(err, errsz, -errno, "template: walk %s: %s", req->dir,
			                strerror(errno));
		*hash = tree_h;
		return 0;
	case SBX_TEMPLATE_BUSYBOX:
	case SBX_TEMPLATE_HOST:
		*name = req->kind == SBX_TEMPLATE_BUSYBOX ? "busybox" : "host";
		if ((rc = sbx_tpl_ensure(&bb, lower, err, errsz)) < 0)
			return rc;
		*src = (*lower)->lower;
		h = sbx_vm_hash(h, *name, strlen(*name) + 1);
		{
			char p[PATH_MAX + 16];
			sbx_pathf(p, sizeof(p), "%s/bin/busybox", *src);
			h = sbx_vm_hash_stat(h, p);
		}
		if (req->kind == SBX_TEMPLATE_HOST) {
			for (size_t i = 0; i < sizeof(host_progs) / sizeof(host_progs[0]); i++)
				h = sbx_vm_hash_stat(h, host_progs[i]);
			/* how the image is made is part of what it is */
			h = sbx_vm_hash(h, host_sh, sizeof(host_sh));
		}
		*hash = h;
		return 0;
	default:
		return sbx_fail(err, errsz, -EINVAL, "template: unknown kind %d", (int)req->kind);
	}
}

/* The host tree: src (the busybox tree) plus the host's programs, into
 * the new directory stage. log: the script's output. */
static int
host_stage(const char *stage, const char *src, const char *log, char *err, size_t errsz)
{
	const char *argv[] = {"/bin/sh", "-c", host_sh, "sh", stage, src, NULL};

	sbx_rm_tree(stage);
	if (mkdir(stage, 0755) < 0)
		return sbx_fail(err, errsz, -errno, "template host: %s: %s", stage,
		                strerror(errno));
	return sbx_vm_run(argv, log, err, errsz);
}

int
sbx_tpl_tree(const struct sbx_template_req *req, char *root, size_t rootsz, uint64_t *key,
             char *err, size_t errsz)
{
	struct sbx_template *lower = NULL;
	const char *name, *src;
	char dir[PATH_MAX], tmp[PATH_MAX + 64], log[PATH_MAX + 64];
	struct stat st;
	int rc;

	if ((rc = tpl_inputs(req, &lower, &name, &src, key, err, errsz)) < 0)
		return rc;
	if (req->kind != SBX_TEMPLATE_HOST) {
		rc = sbx_pathf(root, rootsz, "%s", src);
		sbx_tpl_free(lower);
		return rc < 0 ? sbx_fail(err, errsz, rc, "template: %s: path too long", src) : 0;
	}
	sbx_pathf(dir, sizeof(dir), "%s/tree", sbx_g.cache_dir);
	if ((rc = sbx_mkdir_p(dir, 0755)) < 0) {
		sbx_tpl_free(lower);
		return sbx_fail(err, errsz, rc, "template: cannot create %s: %s", dir,
		                strerror(-rc));
	}
	sbx_pathf(root, rootsz, "%s/host-%016llx", dir, (unsigned long long)*key);
	if (stat(root, &st) == 0 && S_ISDIR(st.st_mode)) {
		sbx_tpl_free(lower);
		return 0;
	}
	sbx_pathf(tmp, sizeof(tmp), "%s.tmp.%d", root, (int)gettid());
	sbx_pathf(log, sizeof(log), "%s/host.log", dir);
	unlink(log);
	rc = host_stage(tmp, src, log, err, errsz);
	sbx_tpl_free(lower);
	if (rc == 0 && rename(tmp, root) < 0 && errno != ENOTEMPTY && errno != EEXIST)
		rc = sbx_fail(err, errsz, -errno, "template host: rename to %s: %s", root,
		              strerror(errno));
	sbx_rm_tree(tmp); /* lost a race to another builder: theirs wins */
	if (rc == 0)
		sbx_log(SBX_LOG_INFO, "template host: built the tree %s", root);
	return rc;
}

int
sbx_vm_tpl_ensure(const struct sbx_template_req *req, struct sbx_vm_tpl **out, char *err,
                  size_t errsz)
{
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
	if ((rc = tpl_inputs(req, &lower, &name, &src, &h, err, errsz)) < 0) {
		free(t);
		return rc;
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
		rc = host_stage(stage, src, log, err, errsz);
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

json_t *
sbx_vm_saved_to_json(const struct sbx_vm_saved *sv)
{
	char qp[PATH_MAX + 16], ap[PATH_MAX + 16];
	json_t *extra;

	snprintf(qp, sizeof(qp), "%s/qmp.sock", sv->r.state_dir);
	snprintf(ap, sizeof(ap), "%s/agent.sock", sv->r.state_dir);
	extra = json_pack("{s:s, s:s, s:s}", "snapshot", sv->snap, "qmp_socket", qp, "agent_socket",
	                  ap);
	return extra ? sbx_rec_to_json(&sv->r, "vm", extra) : NULL;
}

int
sbx_vm_saved_parse(const json_t *j, struct sbx_vm_saved *out, char *err, size_t errsz)
{
	const char *s;
	char want[PATH_MAX + 16];
	int rc;

	memset(out, 0, sizeof(*out));
	/* room for "/agent.sock" and its NUL in a sun_path: the state dir
	 * is at most 96 bytes, as vm_start() allows */
	if ((rc = sbx_rec_parse(j, "vm", "saved vm", 108 - 11, ", short enough for its sockets",
	                        &out->r, err, errsz)) < 0)
		return rc;
	snprintf(want, sizeof(want), "%s/qmp.sock", out->r.state_dir);
	s = json_string_value(json_object_get(j, "qmp_socket"));
	if (!s || strcmp(s, want) != 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"qmp_socket\" is not <state_dir>/qmp.sock",
		                out->r.id);
	snprintf(want, sizeof(want), "%s/agent.sock", out->r.state_dir);
	s = json_string_value(json_object_get(j, "agent_socket"));
	if (!s || strcmp(s, want) != 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "saved vm %s: \"agent_socket\" is not <state_dir>/agent.sock",
		                out->r.id);
	s = json_string_value(json_object_get(j, "snapshot"));
	if (!s || strlen(s) >= sizeof(out->snap) || strspn(s, "0123456789abcdef") != strlen(s))
		return sbx_fail(err, errsz, -EINVAL, "saved vm %s: \"snapshot\" is not a key",
		                out->r.id);
	snprintf(out->snap, sizeof(out->snap), "%s", s);
	return 0;
}

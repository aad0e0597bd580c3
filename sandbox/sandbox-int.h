/* sandbox-int.h: shared between sandbox/'s own files; not for callers. */
#ifndef SLUICE_SANDBOX_INT_H
#define SLUICE_SANDBOX_INT_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sandbox-t.h"
#include "sbx_netlink.h"

struct sbx_backend {
	const struct sbx_backend_ops *ops;
};

/* Every handle starts with this, so the generic calls can dispatch
 * without the caller naming a backend twice. */
struct sbx_head {
	const struct sbx_backend *backend;
	char id[SBX_ID_MAX + 1];
};

/* The settings sbx_init() copied (defaults filled in). */
struct sbx_settings {
	sbx_log_fn log;
	void *log_arg;
	char state_dir[PATH_MAX];
	char cache_dir[PATH_MAX];
	char agent_path[PATH_MAX]; /* "" = the placeholder */
	char cgroup_parent[128];   /* "" = <own cgroup>/sluice */
};
extern struct sbx_settings sbx_g;

void sbx_log(enum sbx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* snprintf into err (NULL/0 is fine); returns -e so callers can
 * `return sbx_fail(err, errsz, -EINVAL, "...")`. */
int sbx_fail(char *err, size_t errsz, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* snprintf for paths: 0, or -ENAMETOOLONG when the result did not fit
 * (out is then truncated). No allocation: safe in the sandbox child. */
int sbx_pathf(char *out, size_t outsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* All allocation goes through these (tests may make them fail). */
void *sbx_calloc(size_t n, size_t sz);
char *sbx_strdup(const char *s);

/* ---- cgroups (cgroup.c) ---------------------------------------------- */

enum sbx_cg_ctrl { SBX_CG_MEMORY = 0, SBX_CG_CPU, SBX_CG_PIDS, SBX_CG__N };

struct sbx_cg_layout {
	int version;                     /* 1 or 2; 0 = none found */
	char mount[SBX_CG__N][PATH_MAX]; /* v1: per controller */
	char v2mount[PATH_MAX];          /* v2: the one hierarchy */
};

/* Reads mountinfo text (the contents of /proc/self/mountinfo) and fills
 * *out. v1 wins for every controller a v1 hierarchy carries (hybrid hosts
 * keep memory there); v2 is used when no v1 hierarchy has memory, cpu or
 * pids and a cgroup2 mount exists. 0, or -ENOENT if neither is usable. */
int sbx_cg_detect(const char *mountinfo, struct sbx_cg_layout *out);

/* From /proc/self/cgroup text: the caller's path in the hierarchy that
 * carries ctrl (v1), or in the unified hierarchy (v2, ctrl ignored). */
int sbx_cg_self(const char *proc_cgroup, int version, enum sbx_cg_ctrl ctrl, char *out,
                size_t outsz);

/* One file to write in one controller's directory. */
struct sbx_cg_kv {
	enum sbx_cg_ctrl ctrl;
	const char *file;
	char value[64];
	bool optional; /* absent file (no swap accounting): fine */
};
#define SBX_CG_KV_MAX 8

/* The files and values that apply limits l under cgroup version v.
 * Returns how many entries it filled (<= SBX_CG_KV_MAX). Pure. */
size_t sbx_cg_values(int version, const struct sbx_limits *l, struct sbx_cg_kv *out);

/* "<mount><self>/<parent>/<id>" into out; -ENAMETOOLONG if it does not
 * fit. Pure. */
int sbx_cg_path(const char *mount, const char *self, const char *parent, const char *id, char *out,
                size_t outsz);

/* A created group: one directory per controller (v1) or one (v2). */
struct sbx_cg {
	int version;
	size_t ndirs;
	char dirs[SBX_CG__N][PATH_MAX];
};

/* Detects the host layout (cached after the first call), creates the
 * group for id and writes the limits. On failure removes what it made. */
int sbx_cg_create(const char *id, const struct sbx_limits *l, struct sbx_cg *cg, char *err,
                  size_t errsz);
int sbx_cg_attach(const struct sbx_cg *cg, pid_t pid, char *err, size_t errsz);
/* Kills whatever is left in the group and removes its directories,
 * retrying while the kernel finishes; 0 or -errno. */
int sbx_cg_destroy(struct sbx_cg *cg, char *err, size_t errsz);

/* ---- seccomp (seccomp.c) --------------------------------------------- */

struct sock_filter;
#define SBX_SECCOMP_MAX 160
/* Builds the guest filter into out (room for SBX_SECCOMP_MAX entries);
 * returns the instruction count. Pure. */
size_t sbx_seccomp_build(struct sock_filter *out);
/* The syscalls the filter refuses with EPERM (for tests and docs). */
extern const int sbx_seccomp_denied[];
extern const size_t sbx_seccomp_ndenied;

/* ---- rtnetlink (netlink.c): see sbx_netlink.h ----------------------- */

/* Parses "ADDR/PREFIX" (v4 or v6): family or -EINVAL. Pure. */
int sbx_parse_cidr(const char *s, void *addr16, unsigned *prefix);

/* ---- templates (template.c) ------------------------------------------ */

#define SBX_TPL_BINDS 12
struct sbx_template {
	enum sbx_template_kind kind;
	char lower[PATH_MAX]; /* the read-only root */
	size_t nbinds;        /* host dirs bound read-only */
	struct {
		char src[PATH_MAX];
		char dst[128]; /* guest path, absolute */
	} binds[SBX_TPL_BINDS];
};

int sbx_tpl_ensure(const struct sbx_template_req *req, struct sbx_template **out, char *err,
                   size_t errsz);
void sbx_tpl_free(struct sbx_template *t);

/* Removes a directory tree without following symlinks or crossing mounts.
 * 0, or -errno of the first failure. */
int sbx_rm_tree(const char *path);
/* mkdir -p with mode for every created level. */
int sbx_mkdir_p(const char *path, mode_t mode);

/* ---- names (sandbox.c) ------------------------------------------------ */

/* [A-Za-z0-9_-], 1..SBX_ID_MAX bytes. */
bool sbx_id_ok(const char *s);
/* Absolute, under 512 bytes, no "." or ".." component. */
bool sbx_guest_path_ok(const char *p);
/* 1..SBX_IFNAME_MAX bytes, no '/', ':', space or control. */
bool sbx_ifname_ok(const char *s);

/* ---- durability (saved.c: pure; ns.c: the system) --------------------- */

/* Where the ns backend's agent listens inside the guest (--listen). */
#define SBX_AGENT_SOCK     "/run/sluice/agent.sock"
#define SBX_SAVED_VERSION  1
#define SBX_NETNS_NAME_MAX 255

/* From the text of /proc/PID/stat: field 22, the start time in clock
 * ticks after boot. The command name (field 2) may hold spaces and
 * parentheses, so the fields after it are counted from its last ')'.
 * 0, or -EINVAL for text that is not a stat line. Pure. */
int sbx_stat_starttime(const char *stat, size_t len, unsigned long long *out);

/* Does the text of /proc/PID/cgroup put the process, in some hierarchy,
 * in a group whose last path component is id? Pure. */
bool sbx_cgroup_names(const char *proc_cgroup, const char *id);

/* What sbx_save() writes for an `ns` sandbox, checked. */
struct sbx_saved {
	char id[SBX_ID_MAX + 1];
	int pid;
	unsigned long long start_time;
	char state_dir[PATH_MAX];
	int cg_version;
	size_t ncg;
	char cg[SBX_CG__N][PATH_MAX];
	char sock[108];                          /* guest path of the agent socket */
	char peer_netns[SBX_NETNS_NAME_MAX + 1]; /* "": none, or given as an fd */
	char peer_ifname[SBX_IFNAME_MAX + 1];    /* "": no link */
	int peer_ifindex;                        /* 0: unknown */
	unsigned long long peer_netns_ino;       /* 0: unknown */
};

struct json_t;
/* The object for sv: a new reference, or NULL when out of memory. Pure. */
struct json_t *sbx_saved_to_json(const struct sbx_saved *sv);
/* Checks j (as sbx_saved_to_json() makes it) and fills *out: every path
 * absolute with no "." or ".." part, the state directory and each cgroup
 * ending in the id, "/proc/PID/root<socket>" fitting a unix socket
 * address. 0, or -EINVAL with one line in err. Pure. */
int sbx_saved_parse(const struct json_t *j, struct sbx_saved *out, char *err, size_t errsz);

/* The cgroup directories id has (or would have) under this process's
 * parent, from the host's layout; nothing is created. */
int sbx_cg_dirs(const char *id, struct sbx_cg *cg, char *err, size_t errsz);
/* Is path inside a cgroup hierarchy of this host (under a mount that
 * sbx_cg_detect() found)? */
bool sbx_cg_under_mount(const char *path);
/* Does dir/cgroup.procs list at least one process? */
bool sbx_cg_populated(const char *dir);

extern const struct sbx_backend_ops sbx_ns_ops;
extern const struct sbx_backend_ops sbx_vm_ops;
/* Can this host run the vm backend (qemu-system-x86_64 and the guest
 * images found)? */
bool sbx_vm_available(void);

#endif

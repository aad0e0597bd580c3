/* sandbox-int.h: shared between sandbox/'s own files; not for callers. */
#ifndef SLUICE_SANDBOX_INT_H
#define SLUICE_SANDBOX_INT_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-t.h"

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
	uint32_t idmap_base;       /* see idmap.c; checked by sbx_idmap_check() */
	uint32_t idmap_ranges;
	char idmap_dir[PATH_MAX];
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

/* trust.c: sends "configure" {"ca": pem} over a dup of agent_fd and waits
 * for the answer (the agent installs the CA: see agent/trust.c). 0, or a
 * negative errno with one line in err. */
int sbx_agent_trust_sync(int agent_fd, const char *pem, int timeout_ms, char *err, size_t errsz);
char *sbx_strdup(const char *s);

/* agent_setup.c (vm, rpc): hello on a dup of agent_fd; then "configure"
 * (env, cwd, the CA; when own_kernel, a guest with a kernel of its own
 * (vm): also the time, fresh entropy, the hostname and the link's
 * address/gateway/mtu) and spec's files written through the agent. A
 * container (rpc) shares the host's clock and random pool and has no
 * CAP_SYS_ADMIN: its supervisor sets its hostname at the start. 0 or
 * -errno with one line in err. */
int sbx_agent_hello_fd(int agent_fd, int timeout_ms, char *err, size_t errsz);
int sbx_agent_setup(int agent_fd, const struct sbx_spec *spec, bool own_kernel, int timeout_ms,
                    char *err, size_t errsz);

/* link.c (ns, rpc): in the sandbox's network namespace sbx_ns, lo up and,
 * for a SBX_NET_LINK, the veth eth0 whose peer end goes to n's peer
 * namespace, addressed, routed, up. *nl_peer: a netlink socket in the
 * peer namespace (the caller closes it; -1 when no link), *peer what
 * finds the link again. 0 or -errno with one line in err; on failure
 * the caller removes what was made (the peer link by *peer). */
struct sbx_link;
int sbx_link_setup(int sbx_ns, const struct sbx_net *n, int *nl_peer, struct sbx_link *peer,
                   char *err, size_t errsz);

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
/* A bind of host directory src at dst (either side absolute): the path
 * under dst where host directory dir appears, if it is src or below it.
 * True with out set (false when it does not fit). Pure. */
bool sbx_tpl_mask_path(const char *src, const char *dst, const char *dir, char *out, size_t cap);
/* Is dir the absolute path of a directory (a `dir` template's root)? 0,
 * or -ENOENT with a message naming the fix. */
int sbx_tpl_dir_check(const char *dir, char *err, size_t errsz);

/* Removes a directory tree without following symlinks or crossing mounts.
 * 0, or -errno of the first failure. */
int sbx_rm_tree(const char *path);
/* mkdir -p with mode for every created level. */
int sbx_mkdir_p(const char *path, mode_t mode);

/* ---- user namespaces (idmap.c) ----------------------------------------- */

/* Host ids per sandbox: guest 0..65535 (65534 is nobody). */
#define SBX_IDMAP_SIZE 65536u
/* The defaults: 8192 ranges from 2^30, inside the 524288..1879048191
 * that systemd leaves to containers, far above useradd's and podman's
 * /etc/subuid ranges. */
#define SBX_IDMAP_BASE   1073741824u
#define SBX_IDMAP_RANGES 8192u
#define SBX_IDMAP_DIR    "/run/sluice/idmap"

/* Is [base, base + ranges * 65536) a usable space of host ids (base a
 * multiple of 65536 above the host's own 0..65535, nothing past
 * 4294967294)? 0, or -EINVAL with one line in err. Pure. */
int sbx_idmap_check(uint32_t base, uint32_t ranges, char *err, size_t errsz);
/* Could first begin a range (a multiple of 65536, not 0, room for 65536
 * ids)? For records read back. Pure. */
bool sbx_idmap_first_ok(uint32_t first);
/* "0 FIRST 65536\n", the uid_map and gid_map text; 0 or -ENAMETOOLONG.
 * Pure. */
int sbx_idmap_map_text(char *out, size_t cap, uint32_t first);
/* opts (may be "") and "uid=FIRST,gid=FIRST": a tmpfs whose root the
 * guest's root owns. 0 or -ENAMETOOLONG. Pure. */
int sbx_idmap_tmpfs_opts(char *out, size_t cap, const char *opts, uint32_t first);

/* The registry in dir (made 0700 if absent). Reserves a free range of
 * [base, base + ranges * 65536) for owner (a state directory, absolute)
 * and puts its first host id in *first: 0, -ENOSPC when every range is
 * held, or -errno; err says why. */
int sbx_idmap_reserve(const char *dir, uint32_t base, uint32_t ranges, const char *owner,
                      uint32_t *first, char *err, size_t errsz);
/* Marks the range at first as owner's again (an adopted sandbox): 0,
 * -EBUSY when another live sandbox holds it, or -errno. */
int sbx_idmap_claim(const char *dir, uint32_t first, const char *owner, char *err, size_t errsz);
/* Frees the range at first if owner holds it. */
void sbx_idmap_release(const char *dir, uint32_t first, const char *owner);

/* A user namespace whose uid and gid maps are sbx_idmap_map_text(first). */
struct sbx_userns {
	int fd;       /* /proc/HELPER/ns/user, close-on-exec; -1: none */
	int wfd;      /* internal: the helper waits on its pipe */
	pid_t helper; /* internal: the process that made it, until reaped */
	void *stack;  /* internal: the helper's */
};
/* Makes one (by a short-lived helper process that shares our memory):
 * 0, or -errno with err set and nothing left. Call sbx_userns_done()
 * soon after, and sbx_userns_close() when the fd is no longer needed. */
int sbx_userns_open(uint32_t first, struct sbx_userns *u, char *err, size_t errsz);
/* Reaps the helper (waits for it: it is told to exit by _open()'s
 * return) and frees its stack; the fd stays. Idempotent. */
void sbx_userns_done(struct sbx_userns *u);
/* sbx_userns_done() and closes the fd. Idempotent. */
void sbx_userns_close(struct sbx_userns *u);

/* ---- names (sandbox.c) ------------------------------------------------ */

/* [A-Za-z0-9_-], 1..SBX_ID_MAX bytes. */
bool sbx_id_ok(const char *s);
/* Absolute, under 512 bytes, no "." or ".." component. */
bool sbx_guest_path_ok(const char *p);
/* 1..SBX_IFNAME_MAX bytes, no '/', ':', space or control. */
bool sbx_ifname_ok(const char *s);

/* ---- durability (saved.c: pure; durable.c: the system) ---------------- */

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

/* A sandbox's link in the peer namespace, as recorded to find that very
 * link again. */
struct sbx_link {
	char netns[SBX_NETNS_NAME_MAX + 1]; /* "": none, or given as an fd */
	char ifname[SBX_IFNAME_MAX + 1];    /* "": no link */
	int ifindex;                        /* 0: unknown */
	unsigned long long netns_ino;       /* 0: unknown */
};

/* The fields every backend's saved record carries. */
#define SBX_REC_FIELDS                                                                             \
	char id[SBX_ID_MAX + 1];                                                                   \
	int pid;                                                                                   \
	unsigned long long start_time;                                                             \
	char state_dir[PATH_MAX];                                                                  \
	int cg_version;                                                                            \
	size_t ncg;                                                                                \
	char cg[SBX_CG__N][PATH_MAX];                                                              \
	char peer_netns[SBX_NETNS_NAME_MAX + 1]; /* "": none, or given as an fd */                 \
	char peer_ifname[SBX_IFNAME_MAX + 1];    /* "": no link */                                 \
	int peer_ifindex;                        /* 0: unknown */                                  \
	unsigned long long peer_netns_ino;       /* 0: unknown */
struct sbx_rec {
	SBX_REC_FIELDS
};
/* A backend's record begins with this: its common fields by name (sv->id)
 * or as one struct sbx_rec (&sv->r) for the shared code; the two are the
 * same members (C11 6.5.2.3: a common initial sequence). */
#define SBX_REC_HEAD                                                                               \
	union {                                                                                    \
		struct sbx_rec r;                                                                  \
		struct {                                                                           \
			SBX_REC_FIELDS                                                             \
		};                                                                                 \
	}

/* What sbx_save() writes for an `ns` sandbox, checked. */
struct sbx_saved {
	SBX_REC_HEAD;
	char sock[108]; /* guest path of the agent socket */
	uint32_t idmap; /* host id of guest 0 ("idmap": {"first": N,
	                   "size": 65536}); 0: none (a sandbox started
	                   before user namespaces, as host root) */
};

struct json_t;
/* The object for r with "backend", "version", r's fields, then extra's
 * (stolen; NULL: none), then "net" when there is a link: a new
 * reference, or NULL when out of memory. Pure. */
struct json_t *sbx_rec_to_json(const struct sbx_rec *r, const char *backend, struct json_t *extra);
/* Checks the common part of j (as sbx_rec_to_json() makes it) and fills
 * *out: "backend" is backend, the version, id, pid, start time, the state
 * directory absolute with no "." or ".." part, under state_dir_cap bytes
 * and ending in the id (why_cap: what else the limit is for, appended to
 * the message, "" for nothing), each cgroup likewise, the peer link.
 * Messages begin with what ("saved sandbox"). 0, or -EINVAL with one
 * line in err. Pure. */
int sbx_rec_parse(const struct json_t *j, const char *backend, const char *what,
                  size_t state_dir_cap, const char *why_cap, struct sbx_rec *out, char *err,
                  size_t errsz);

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

/* ---- durability, the system side (durable.c) --------------------------- */

#define SBX_SAVED_FILE "sandbox.json" /* in the state directory */

/* Closes *fd if open and sets it to -1. */
void sbx_close_fd(int *fd);
/* Waits up to ms for the process behind pidfd to end: true if it did
 * (false at once for pidfd < 0). */
bool sbx_pidfd_wait(int pidfd, int ms);
/* A small /proc file into buf (NUL-terminated): its length or -errno. */
ssize_t sbx_read_small(const char *path, char *buf, size_t cap);
/* /proc/PID/stat's start time: 0 or -errno (-EINVAL: not a stat line). */
int sbx_read_start_time(pid_t pid, unsigned long long *out);
/* Deletes the link ifname through netlink socket nl if it is still the
 * one we made (ifindex > 0: the same index; a name alone may have been
 * reused). 0, -ENODEV when it is gone or another, or -errno. */
int sbx_peer_del(int nl, const char *ifname, int ifindex);
/* The peer namespace n names (a dup of its fd, or /run/netns/NAME):
 * an fd (CLOEXEC), or -errno with err set. */
int sbx_open_peer_ns(const struct sbx_net *n, char *err, size_t errsz);
/* Writes j (stolen; NULL: -ENOMEM) to dir/SBX_SAVED_FILE through a
 * temporary file and rename. 0 or -errno. */
int sbx_saved_write(const char *dir, struct json_t *j);

/* The end of a stop, once the process is gone: deletes the peer link
 * through *nl_peer if it is still the one made (then closes *nl_peer;
 * link: "link" or "tap", for messages), destroys cg and, only when that
 * worked (nothing can run in it), removes dir and empties it. rc: the
 * stop's result so far, whose message in err wins. The stop's result. */
int sbx_stop_rest(const char *id, const char *link, int *nl_peer, const struct sbx_link *peer,
                  struct sbx_cg *cg, char *dir, int rc, char *err, size_t errsz);

/* The configured state directory without trailing slashes. */
void sbx_state_root(char *out, size_t cap);
/* Is dir <state_dir>/<id>, that is, ours to remove? */
bool sbx_state_dir_ours(const char *dir, const char *id);

/* r's cgroups from cg, and back (*cg zeroed first). */
void sbx_rec_set_cg(struct sbx_rec *r, const struct sbx_cg *cg);
void sbx_rec_get_cg(const struct sbx_rec *r, struct sbx_cg *cg);
/* Are r's cgroup directories in this host's cgroup hierarchies? */
bool sbx_rec_cgroups_ok(const struct sbx_rec *r);
/* Is the process r names alive, and that very process (pidfd, then start
 * time, then /proc/PID/cgroup naming the id)? what names it in a message
 * ("" or "QEMU "). 0 with *pidfd open on it; -ESRCH (err says why) when it
 * is gone or another one; else -errno. */
int sbx_rec_find(const struct sbx_rec *r, const char *what, int *pidfd, char *err, size_t errsz);
/* sbx_rec_find() after checking r's cgroups are this host's (else
 * -EINVAL, the message starting with op, "adopt"). */
int sbx_rec_check(const struct sbx_rec *r, const char *op, const char *what, int *pidfd, char *err,
                  size_t errsz);
/* The peer link r recorded, if its namespace has a name we can open and
 * the link is still the one made (name, index, namespace inode): a
 * netlink socket in that namespace, or -1. */
int sbx_rec_peer_open(const struct sbx_rec *r);
/* Removes what r left: its cgroups (killing anything in them), its link
 * (link: "link" or "tap", for messages), its state directory (only when
 * it is <state_dir>/<id> and nothing can run in it). 0 or -errno. */
int sbx_rec_cleanup(const struct sbx_rec *r, const char *link, char *err, size_t errsz);
/* r's link from peer, and back. */
void sbx_rec_set_link(struct sbx_rec *r, const struct sbx_link *peer);
void sbx_rec_get_link(const struct sbx_rec *r, struct sbx_link *peer);
/* r from a running sandbox's facts (r zeroed first). */
void sbx_rec_fill(struct sbx_rec *r, const char *id, pid_t pid, unsigned long long start_time,
                  const char *dir, const struct sbx_cg *cg, const struct sbx_link *peer);

/* What forget and sweep need to know of a backend. */
struct sbx_durable {
	const char *backend; /* a record naming another backend is not swept */
	bool unrecorded;     /* also sweep directories whose record names no backend */
	const char *link;    /* "link" or "tap", for messages */
	size_t saved_size;   /* the backend's record, struct sbx_rec first */
	/* The backend's parse of its record into out (saved_size bytes):
	 * 0, or < 0 with err set. */
	int (*parse)(const struct json_t *j, void *out, char *err, size_t errsz);
	/* NULL, or called with a parsed record once forget or sweep removed
	 * its state directory: frees what else the sandbox held. */
	void (*gone)(const void *saved);
};
/* sbx_forget(): parses saved; -EINVAL for cgroups not this host's,
 * -EBUSY while the process runs, else sbx_rec_cleanup() (logs
 * "forgotten"). */
int sbx_durable_forget(const struct sbx_durable *w, const struct json_t *saved, char *err,
                       size_t errsz);
/* sbx_sweep(): every directory <state_dir>/<id> but the kept ids that is
 * w's (logs "swept"); one with no usable record loses the cgroups its id
 * names. The count swept, or the first -errno (err set). */
int sbx_durable_sweep(const struct sbx_durable *w, const char *const *keep, size_t nkeep, char *err,
                      size_t errsz);

extern const struct sbx_backend_ops sbx_ns_ops;
extern const struct sbx_backend_ops sbx_vm_ops;
/* Can this host run the vm backend (qemu-system-x86_64 and the guest
 * images found)? */
bool sbx_vm_available(void);

#endif

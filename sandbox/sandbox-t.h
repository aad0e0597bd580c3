/* sandbox-t.h: the provider-neutral sandbox types. Structs, enums and
 * callback typedefs only; the API is in sandbox.h.
 *
 * Nothing in here names a namespace flag, a QEMU option or an image path:
 * a caller describes *what* it wants (limits, mounts, environment, files,
 * a network attachment) and the backend decides how. Template references
 * (struct sbx_template) and sandbox handles (struct sbx) are opaque. */
#ifndef SLUICE_SANDBOX_T_H
#define SLUICE_SANDBOX_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;       /* jansson's, for sbx_save() and sbx_adopt() */
struct sbx_template; /* opaque: a prepared, secret-free environment */
struct sbx;          /* opaque: one running sandbox */
struct sbx_backend;  /* opaque: a backend with its ops table */

enum sbx_log_level {
	SBX_LOG_ERR = 0,
	SBX_LOG_WARN,
	SBX_LOG_INFO,
	SBX_LOG_DEBUG,
};

/* The only way sandbox/ writes a log line. `msg` is one line, no newline,
 * valid for the call only. Called on the thread that called into sandbox/. */
typedef void (*sbx_log_fn)(void *arg, enum sbx_log_level level, const char *msg);

/* Process-wide settings, given once to sbx_init(). Strings are copied. */
struct sbx_init_opts {
	sbx_log_fn log; /* NULL: silent */
	void *log_arg;
	const char *state_dir;     /* per-sandbox scratch (upper dirs); NULL:
	                              /run/sluice/sandboxes */
	const char *cache_dir;     /* built templates; NULL: /var/lib/sluice/
	                              templates */
	const char *agent_path;    /* host path of sluice-agent; NULL: none (the
	                              backend then runs its own placeholder) */
	const char *cgroup_parent; /* NULL: "sluice" under the caller's own
	                              cgroup in each controller */
	/* The host ids `ns` sandboxes run as: each gets a range of 65536
	 * (guest 0..65535) of its own, one of idmap_ranges from idmap_base
	 * (a multiple of 65536, at least 65536). 0: the defaults, 8192
	 * ranges from 1073741824. */
	uint32_t idmap_base;
	uint32_t idmap_ranges;
	const char *idmap_dir; /* which ranges are in use, shared by every
	                          sluice process on the host; NULL:
	                          /run/sluice/idmap */
};

/* What a backend can do. Filled by sbx_caps(). */
struct sbx_caps {
	const char *name;      /* "ns", "vm" */
	bool limit_memory;
	bool limit_pids;
	bool network; /* can attach one link */
	bool mounts;  /* honours sbx_spec.mounts */
	bool files;   /* honours sbx_spec.files */
	bool park;    /* sbx_park(): paused to near-zero CPU, resumed in
	                 milliseconds (warm pools hold parked sandboxes) */
	bool isolation_enhanced; /* takes SBX_ISOLATION_ENHANCED (whether the
	                            runtime is there is the engine's to say) */
};

/* Which environment to prepare. A template has no secrets and no user
 * data: anything per-sandbox goes in the sbx_spec instead. */
enum sbx_template_kind {
	SBX_TEMPLATE_BUSYBOX = 0, /* a static busybox and its applets */
	SBX_TEMPLATE_HOST,        /* the host's programs, read-only */
	SBX_TEMPLATE_DIR,         /* a root directory the operator built */
};

struct sbx_template_req {
	enum sbx_template_kind kind;
	const char *dir; /* SBX_TEMPLATE_DIR: the root directory */
};

/* 0 in any field: no limit of that kind. */
struct sbx_limits {
	uint32_t memory_mb;
	uint32_t cpus_milli; /* 1000 = one CPU */
	uint32_t pids;
};

/* A host directory made visible inside the sandbox. */
struct sbx_mount {
	const char *source; /* absolute host path */
	const char *target; /* absolute guest path */
	bool read_only;
};

/* A file the sandbox starts with (resolv.conf, a CA bundle, ...). Written
 * into the sandbox's own writable layer, never into the template. */
struct sbx_file {
	const char *path; /* absolute guest path; parents are created */
	const void *data;
	size_t len;
	uint32_t mode; /* permission bits; 0: 0644 */
};

enum sbx_net_kind {
	SBX_NET_NONE = 0, /* loopback only */
	SBX_NET_LINK,     /* loopback and one point-to-point link */
};

/* One link out of the sandbox. The guest end is the sandbox's only
 * interface besides loopback; the peer end is created in the namespace
 * the caller names (by fd, else by name), left for the caller to wire
 * (bridge, route, nftables), and brought up. */
struct sbx_net {
	enum sbx_net_kind kind;
	int peer_netns_fd;       /* >= 0: use this; borrowed */
	const char *peer_netns;  /* else a named network namespace */
	const char *peer_ifname; /* the peer's name, <= 15 bytes */
	const char *address;     /* guest address/prefix, "10.88.1.7/24" */
	const char *gateway;     /* default route via, or NULL */
	const char *peer_address; /* the peer end's own address (no prefix):
	                             with `address`, a point-to-point address on
	                             the peer, so that the peer's namespace
	                             routes the guest's address to this link;
	                             NULL: the peer has no address */
	uint32_t mtu;            /* 0: the default */
};

/* How strongly the sandbox is kept apart from the host and the others.
 * ENHANCED is the stronger runtime an rpc supervisor's operator set up
 * (gVisor, Kata, ...); a backend that has no such level refuses it
 * (-ENOTSUP), and none downgrades it. */
enum sbx_isolation {
	SBX_ISOLATION_STANDARD = 0,
	SBX_ISOLATION_ENHANCED,
};

/* Everything that makes one sandbox. Borrowed by sbx_start() for the call
 * only. Arrays may be NULL when their count is 0. */
struct sbx_spec {
	const char *id;       /* caller's name, [A-Za-z0-9_-], <= 48 bytes */
	const char *hostname; /* NULL: the id */
	struct sbx_limits limits;
	const struct sbx_mount *mounts;
	size_t nmounts;
	const char *const *env; /* "NAME=value", given to the agent */
	size_t nenv;
	const char *cwd; /* NULL: "/" */
	const struct sbx_file *files;
	size_t nfiles;
	struct sbx_net net;
	/* sluice's CA certificate, PEM text (certificates only, never a key;
	 * 1..SBX_CA_MAX bytes), or NULL. The backend hands it to the agent
	 * ("configure" "ca"), which makes the guest trust it: the file, a
	 * bundle with the guest's system roots, the system store where that
	 * is the sandbox's own, and the CA variables of every exec (see
	 * docs/sandboxes.md, "Trusting sluice's CA"). Needs the agent. */
	const char *ca_pem;
	enum sbx_isolation isolation;
};

#define SBX_CA_MAX (16u * 1024)

/* One backend. The ops that have no handle nor template to go by are
 * given the backend itself (b): an `rpc` backend is one instance per
 * supervisor. Every op writes one line into err on failure and returns
 * a negative errno; see sandbox.h for each op's contract. */
struct sbx_backend_ops {
	const char *name;
	void (*caps)(const struct sbx_backend *b, struct sbx_caps *out);
	int (*template_ensure)(const struct sbx_backend *b, const struct sbx_template_req *req, struct sbx_template **out,
	                       char *err, size_t errsz);
	void (*template_free)(struct sbx_template *t);
	int (*start)(const struct sbx_template *t, const struct sbx_spec *spec, struct sbx **out,
	             char *err, size_t errsz);
	int (*agent_fd)(const struct sbx *s);
	int (*stop)(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz);
	void (*free)(struct sbx *s);
	/* Durability: see sbx_save() and what follows it in sandbox.h.
	 * `saved` has been checked to be an object naming this backend. */
	struct json_t *(*save)(const struct sbx *s);
	int (*adopt)(const struct sbx_backend *b, const struct json_t *saved, struct sbx **out, char *err, size_t errsz);
	int (*forget)(const struct sbx_backend *b, const struct json_t *saved, char *err, size_t errsz);
	int (*sweep)(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err, size_t errsz);
	void (*release)(struct sbx *s);
	/* NULL when the backend cannot park (caps.park false). */
	int (*park)(struct sbx *s, char *err, size_t errsz);
	int (*unpark)(struct sbx *s, char *err, size_t errsz);
};

/* An `rpc` backend's supervisor (docs/backend-rpc.md): exactly one of a
 * command that sluiced starts (argv[0] absolute) and the unix socket of
 * one that runs on its own. Borrowed for the call. */
struct sbx_rpc_conf {
	const char *const *argv;
	size_t argc;
	const char *socket;
};

/* What sbx_rpc_backend_check() found. */
struct sbx_rpc_status {
	bool up;        /* connected, capabilities answered */
	bool available; /* the supervisor's engine can run here */
	char engine[64];
	char reason[256]; /* why not up or not available, one line */
};

#define SBX_ID_MAX     48
#define SBX_IFNAME_MAX 15

#endif

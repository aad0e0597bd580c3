/* conf-t.h: the typed, validated configuration (types only).
 *
 * A struct conf is immutable once conf_load() returns it and is shared by
 * reference count (conf_ref/conf_unref): a reload builds a new one and swaps
 * it in, so readers never see a half-applied configuration. Every string and
 * array lives in the conf's own arena and dies with it.
 *
 * Every field carries the position it came from (struct conf_pos) so that
 * later checks, and later modules, can still name FILE:LINE:COL.
 */
#ifndef SLUICE_CONF_T_H
#define SLUICE_CONF_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* 1-based; line 0 means "not in the file, a default". */
struct conf_pos {
	uint32_t line;
	uint32_t col;
};

enum conf_log_level {
	CONF_LOG_ERR = 0,
	CONF_LOG_WARN,
	CONF_LOG_INFO,
	CONF_LOG_DEBUG,
};

enum conf_log_format {
	CONF_LOG_TEXT = 0,
	CONF_LOG_JSON,
};

/* A resolved secret. `value` holds the bytes after ${env:}/${file:}
 * resolution and must never reach a log line, an error or a file; `ref`
 * is the text as written with references left unresolved ("Bearer
 * ${env:GITHUB_TOKEN}"), safe to show. */
struct conf_secret {
	char *value;
	size_t len;
	char *ref;
	struct conf_pos pos;
};

/* host:port. `host` is the text given (an IP literal or "localhost");
 * `addr` is filled only when host is an IP literal. */
struct conf_hostport {
	char *host;
	uint16_t port;
	bool set;
	bool is_ip;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct conf_pos pos;
};

struct conf_cidr {
	int family;             /* AF_INET or AF_INET6 */
	uint8_t addr[16];       /* network order; host bits are zero */
	uint8_t prefix;
	struct conf_pos pos;
};

/* A host pattern: "example.com", "*.example.org", "example.com:8443",
 * "*.example.org:443", an IPv4 literal or "[v6]:port". `host` is lowercase
 * without trailing dot and, for a wildcard, without the "*." (so "*.a.b" is
 * stored as wildcard=true, host="a.b"). port 0: the rule names no port. */
struct conf_hostpat {
	char *host;
	bool wildcard;
	uint16_t port;
	struct conf_pos pos;
};

struct conf_hostpats {
	struct conf_hostpat *v;
	size_t n;
};

struct conf_cidrs {
	struct conf_cidr *v;
	size_t n;
};

/* daemon.journal_damage: what a start does when the journal has unreadable
 * lines after the state file's point (see docs/operations.md). */
enum conf_journal_damage {
	CONF_JDAMAGE_REFUSE = 0,        /* refuse to start (the default) */
	CONF_JDAMAGE_DESTROY,           /* start; end the sandboxes the lines may concern */
};

struct conf_daemon {
	char *data_dir;
	char *fleet_netns;
	bool fleet_teardown;            /* clean exit removes the table, links, netns */
	enum conf_journal_damage journal_damage;
	char *control_socket;           /* NULL: none */
	/* daemon.idmap: the host ids of `ns` sandboxes, `ranges` ranges of
	 * 65536 from `base` (checked: a multiple of 65536, at least 65536,
	 * nothing past 4294967294). */
	uint32_t idmap_base;
	uint32_t idmap_ranges;
	enum conf_log_level log_level;
	enum conf_log_format log_format;
};

struct conf_api {
	struct conf_hostport listen;    /* set=false: no TCP listener */
	char *socket;                   /* NULL: no unix listener */
	struct conf_secret operator_token; /* value NULL: operator calls refused */
};

enum conf_match_kind {
	CONF_MATCH_SOURCE = 0,  /* by source address */
	CONF_MATCH_USER,        /* by Proxy-Authorization / RFC 1929 */
};

struct conf_client {
	char *name;
	enum conf_match_kind match;
	struct conf_cidr source;        /* CONF_MATCH_SOURCE */
	char *user;                     /* CONF_MATCH_USER */
	struct conf_secret password;    /* CONF_MATCH_USER */
	char *policy;
	size_t policy_idx;              /* index into conf.policies */
	struct conf_pos pos;
};

enum conf_dns_server_kind {
	CONF_DNS_SYSTEM = 0,    /* the servers of /etc/resolv.conf */
	CONF_DNS_ADDR,
};

struct conf_dns_server {
	enum conf_dns_server_kind kind;
	struct sockaddr_storage addr;   /* port 53 unless given */
	socklen_t addrlen;
	struct conf_pos pos;
};

struct conf_gateway {
	uint32_t workers;               /* 0: auto (one per online CPU) */
	struct conf_hostport listen_forward;
	struct conf_hostport listen_socks;
	struct conf_client *clients;
	size_t nclients;
	struct conf_dns_server *dns_servers;
	size_t ndns_servers;
	uint32_t dns_timeout_ms;
	uint32_t dns_attempts;
	uint32_t dns_cache_size;        /* entries */
	uint32_t max_connections;
	uint32_t max_header_bytes;
	uint32_t connect_timeout_ms;
	uint32_t idle_timeout_ms;
	uint32_t response_timeout_ms;   /* the origin silent while owed bytes */
	uint32_t body_timeout_ms;       /* a request body's whole time; 0: none */
	uint32_t body_min_rate;         /* bytes/s a request body keeps; 0: none */
	uint32_t body_min_rate_grace_ms; /* ... after this much of it */
	char *access_log;               /* "stderr", "off" or a path */
};

struct conf_lane {
	char *name;
	struct conf_cidr subnet;
	bool egress;                    /* has doors */
	uint16_t door_forward;          /* 0: none */
	uint16_t door_socks;
	uint16_t door_intercept;
	/* The DNS door (UDP and TCP) on the gateway address: 53 unless
	 * doors.dns says otherwise; 0 on a lane without doors. */
	uint16_t door_dns;
	/* The name door: guest TCP to a synthetic address the DNS door gave
	 * (any port) is sent here; doors.names, else the first of 3130..3139
	 * no other door of the lane has. 0 on a lane without doors. */
	uint16_t door_names;
	bool transparent;
	struct conf_pos pos;
};

enum conf_policy_mode {
	CONF_POLICY_ENFORCE = 0,
	CONF_POLICY_REPORT,
};

/* What a credential does to a request sluice encrypts upstream itself
 * (docs/credentials.md). */
enum conf_cred_kind {
	CONF_CRED_HEADER = 0,   /* `header: value`, client copies removed */
	CONF_CRED_BASIC,        /* Authorization: Basic base64(user:value) */
	CONF_CRED_PLACEHOLDER,  /* the guest's `env` holds a sentinel; sluice
				 * puts `value` where a header value has it */
	CONF_CRED_QUERY,        /* `param=value` in the query, client's removed */
	CONF_CRED_SIGV4,        /* AWS Signature V4: the guest signs with
				 * placeholder keys; sluice signs again as `user`
				 * (the access key id) with `value` (the secret) */
};

/* "sluice-ph-" and 32 lowercase hex digits, and a NUL. */
#define CONF_SENTINEL_PREFIX "sluice-ph-"
#define CONF_SENTINEL_LEN 43
/* The longest credential value (the header, password or parameter). */
#define CONF_CRED_VALUE_MAX 8192
/* The longest credential name: one given is 1..64 token characters, one
 * sluice makes (the host pattern, '/', what is set) and one read back
 * from a saved layer at most this. The access line's inject= list is
 * sized from it. */
#define CONF_CRED_NAME_MAX 389
/* A tenant credential's fingerprint: "fp1:", 16 hex of salt, ':', 32 hex
 * of SHA-256(salt || value) cut to 128 bits, and a NUL. */
#define CONF_CRED_FP_LEN 54
#define CONF_CRED_FP_PREFIX "fp1:"
/* The most credentials a claim's tenant may bring. */
#define CONF_TENANT_CREDS_MAX 16

struct conf_credential {
	char *name;                     /* inject= in the access line */
	enum conf_cred_kind kind;
	struct conf_hostpat host;
	char *header;                   /* HEADER: the field; else NULL */
	char *user;                     /* BASIC: the user; SIGV4: the access key id
					 * (neither is secret) */
	char *param;                    /* QUERY: the parameter's name */
	char *env;                      /* PLACEHOLDER: the guest's variable */
	struct conf_secret value;       /* the secret (BASIC: the password) */
	bool cleartext;                 /* also on http:// (unsafe) */
	/* PLACEHOLDER: the sentinel the guest is given, made per layer when a
	 * claim compiles it (gw_policy_new()), kept in the state file (it is
	 * no secret: the guest holds it); "" in a configuration. */
	char sentinel[CONF_SENTINEL_LEN];
	/* Brought by a claim's tenant (POST /v1/claims, PUT .../credentials):
	 * the value is held in the daemon's memory only; a saved layer keeps
	 * the fingerprint instead ("" until the policy engine makes it). */
	bool tenant;
	/* A tenant credential read back from a saved layer: its value is gone
	 * (value.value NULL) until the tenant supplies it again. */
	bool lost;
	char fingerprint[CONF_CRED_FP_LEN];
	struct conf_pos pos;
};

/* A tenant's credentials as a claim's body brings them
 * (conf_creds_from_json()). Owns an arena holding everything, values
 * included (wiped by conf_creds_free()). */
struct conf_creds {
	struct conf_credential *v;
	size_t n;
	struct conf_arena *arena;
};

struct conf_policy {
	char *name;
	enum conf_policy_mode mode;
	struct conf_hostpats allow;
	struct conf_hostpats deny;
	struct conf_hostpats intercept;
	struct conf_credential *credentials;
	size_t ncredentials;
	struct conf_cidrs allow_private;
	struct conf_pos pos;
};

struct conf_tenant {
	char *name;
	struct conf_secret *keys;
	size_t nkeys;
	bool has_egress;                /* false: no tenant narrowing */
	struct conf_hostpats egress;
	uint32_t max_claims;            /* 0: unlimited */
	char **pools;                   /* NULL/0: every pool */
	size_t npools;
	struct conf_pos pos;
};

enum conf_backend {
	CONF_BACKEND_NS = 0,
	CONF_BACKEND_VM,
	CONF_BACKEND_RPC, /* an external supervisor (docs/backend-rpc.md) */
};

/* How strongly a pool's sandboxes are kept apart: what the backend calls
 * standard, or the stronger runtime an rpc supervisor's operator set up
 * (gVisor, Kata, ...: docs/backend-rpc.md). Never downgraded. */
enum conf_isolation {
	CONF_ISOLATION_STANDARD = 0,
	CONF_ISOLATION_ENHANCED,
};

enum conf_template_kind {
	CONF_TEMPLATE_BUSYBOX = 0,
	CONF_TEMPLATE_HOST,
	CONF_TEMPLATE_DIR,
};

struct conf_pool {
	char *name;
	enum conf_backend backend;
	enum conf_template_kind template_kind;
	char *template_dir;             /* CONF_TEMPLATE_DIR */
	char *lane;
	size_t lane_idx;
	char *policy;
	size_t policy_idx;
	uint32_t warm;
	uint32_t warm_max;
	uint32_t memory_mb;
	uint32_t cpus_milli;            /* cpus × 1000 */
	uint32_t pids;
	uint32_t ttl_default_s;
	uint32_t ttl_max_s;
	/* backend rpc: exactly one of the two (docs/backend-rpc.md) */
	char **supervisor_argv;         /* command: [PATH, ARGS...], PATH absolute */
	size_t supervisor_argc;
	char *supervisor_socket;        /* socket: an absolute unix socket path */
	enum conf_isolation isolation;  /* enhanced: backend rpc only */
	struct conf_pos pos;
};

struct conf_certs {
	char *ca_cert;
	char *ca_key;
	char *upstream_ca;              /* NULL: the system trust store alone */
	uint32_t cache_size;
	uint32_t leaf_validity_days;    /* 1..397 */
};

struct conf_preview {
	char *domain;                   /* NULL: previews off */
	struct conf_hostport listen;
};

struct conf_arena;

struct conf {
	unsigned refs;
	struct conf_arena *arena;
	char *path;                     /* the file it came from */

	struct conf_daemon daemon;
	struct conf_api api;
	struct conf_gateway gateway;
	struct conf_lane *lanes;
	size_t nlanes;
	struct conf_policy *policies;
	size_t npolicies;
	struct conf_tenant *tenants;
	size_t ntenants;
	struct conf_pool *pools;
	size_t npools;
	struct conf_certs certs;
	struct conf_preview preview;
};

/* A claim's layer as reloaded from the state file (conf_layer_from_json()):
 * a policy and the tenant's egress list it was narrowed by, checked as a
 * policies[] entry is. Owns an arena holding everything it points to,
 * credential values included (wiped by conf_layer_free()). Positions are
 * line 0: a saved layer is not in the configuration file. */
struct conf_layer {
	const struct conf_policy *policy;
	bool has_narrow;                /* false: no tenant narrowing */
	struct conf_hostpats narrow;    /* has_narrow: n == 0 allows nothing */
	struct conf_arena *arena;
};

/* Diagnostics of one load: every error found, each one line
 * "FILE:LINE:COL: message". Never holds a secret's value. */
struct conf_diag {
	char **lines;
	size_t n;
	size_t cap;
	size_t dropped;                 /* errors past CONF_DIAG_MAX */
};

#define CONF_DIAG_MAX 200

#endif

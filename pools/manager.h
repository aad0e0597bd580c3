/* manager.h: warm pools, claims, leases and the reaper.
 *
 * The manager owns no thread, timer or log file (STYLE.md §1): gateway/
 * hands it a host (struct pool_host) that runs blocking jobs on worker
 * threads, wakes the manager's tick, writes log lines, and programs the
 * fleet network (attach, unlock with a layer, lock, detach) and compiles
 * policy layers. The manager keeps the state, under one mutex, and
 * decides: how many sandboxes each pool boots (pool_target() in target.h,
 * at most POOL_BOOT_PARALLEL at once, with a back-off after failures),
 * which sandbox a claim takes, when a lease ends.
 *
 * A sandbox moves BOOTING -> WARM -> CLAIMED -> ENDING -> ENDED, or from
 * BOOTING/WARM straight to ENDING (a failed boot, a drained pool). An
 * ENDED sandbox is never lent again; its record is kept for a while (a
 * tombstone) so that a repeated release can say what happened.
 *
 * Thread-safety: every pool_mgr_* call may come from any thread. Calls
 * that block (a cold claim's boot, a release's stop) block the caller
 * only, never the mutex. */
#ifndef SLUICE_POOL_MANAGER_H
#define SLUICE_POOL_MANAGER_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf-t.h"

struct json_t;
struct sbx_agent_conn;
struct pool_mgr;
struct pool_sbx;

#define POOL_BOOT_PARALLEL 4            /* refill boots in flight, all pools */
#define POOL_COLD_PARALLEL 16           /* cold claims booting, per pool */
#define POOL_USE_WAIT_MS 30000          /* pool_mgr_use(): the longest wait */
#define POOL_BACKOFF_MIN_MS 500
#define POOL_BACKOFF_MAX_MS 30000
#define POOL_TOMBSTONES 4096            /* ended claims remembered */
#define POOL_ID_MAX 48
#define POOL_ENV_MAX 64                 /* claim env entries */
#define POOL_LABELS_MAX 64
#define POOL_NET_ENV_MAX 8

enum pool_log_level {
	POOL_LOG_ERR = 0,
	POOL_LOG_WARN,
	POOL_LOG_INFO,
	POOL_LOG_DEBUG,
};

enum pool_tier {
	POOL_TIER_WARM = 0,
	POOL_TIER_COLD,
};

enum pool_sbx_state {
	POOL_S_BOOTING = 0,
	POOL_S_WARM,
	POOL_S_CLAIMED,
	POOL_S_ENDING,
	POOL_S_ENDED,
};

enum pool_end {
	POOL_END_NONE = 0,
	POOL_END_RELEASED,
	POOL_END_REAPED,
	POOL_END_DRAINED,               /* warm, its pool removed or changed */
	POOL_END_FAILED,                /* the boot failed */
	POOL_END_SHUTDOWN,
};

/* What the host's attach gives back. */
struct pool_netinfo {
	bool linked;                    /* false: a lane without doors */
	bool dns;                       /* the gateway answers DNS on port 53:
					 * the guest's resolv.conf names it */
	struct in_addr addr, gateway;
	unsigned prefix;
	char ifname[16];                /* the link's name in the fleet namespace */
	char netns[64];                 /* the fleet namespace's name */
	char env[POOL_NET_ENV_MAX][96]; /* proxy variables, "NAME=value" */
	size_t nenv;
};

/* A layer's variables (pool_host.layer_env). */
#define POOL_LAYER_ENV_MAX 16
#define POOL_LAYER_ENV_LEN 112

struct pool_host {
	void *arg;
	void (*log)(void *arg, enum pool_log_level level, const char *msg);
	/* Runs fn(job) on a worker thread, soon. 0 or -errno. */
	int (*submit)(void *arg, void (*fn)(void *job), void *job);
	/* Asks for pool_mgr_tick() to run soon on the host's thread. */
	void (*wake)(void *arg);
	/* The fleet; each 0 or -errno with one line in err. */
	int (*attach)(void *arg, const char *id, const char *lane, struct pool_netinfo *out,
		      char *err, size_t errsz);
	int (*unlock)(void *arg, const char *id, void *layer, char *err, size_t errsz);
	int (*lock)(void *arg, const char *id, char *err, size_t errsz);
	int (*detach)(void *arg, const char *id, char *err, size_t errsz);
	/* Layers (opaque to pools): the pool's policy in c narrowed by the
	 * tenant's egress list (t NULL: none), with the credentials the
	 * claim brought (creds, pool_claim_req's: opaque, NULL: none). NULL
	 * with err. */
	void *(*layer_new)(void *arg, const struct conf *c, const struct conf_pool *p,
			   const struct conf_tenant *t, const void *creds, char *err, size_t errsz);
	/* A claimed layer with its tenant's credentials replaced by creds
	 * (pool_mgr_set_creds()). NULL with err. */
	void *(*layer_recreds)(void *arg, void *old, const void *creds, char *err, size_t errsz);
	void *(*layer_ref)(void *layer);
	void (*layer_unref)(void *layer);
	const char *(*layer_version)(void *layer);
	/* The layer as the state file and the journal keep it (credential
	 * references, never values), and back (references resolved
	 * again): for claims that outlive the daemon. */
	struct json_t *(*layer_save)(void *layer);
	void *(*layer_load)(void *arg, const struct json_t *saved, char *err, size_t errsz);
	/* The variables a layer gives each command of its claim ("NAME=value":
	 * its placeholders' sentinels, which are no secrets), at most max, into
	 * out; how many. NULL: none. Added after the claim's own env, so they
	 * win. */
	size_t (*layer_env)(void *layer, char out[][POOL_LAYER_ENV_LEN], size_t max);
	/* attach with the address a re-adopted sandbox had. */
	int (*adopt_net)(void *arg, const char *id, const char *lane, struct in_addr addr,
			 struct pool_netinfo *out, char *err, size_t errsz);
	/* sluice's CA certificate (PEM, never a key) every sandbox booted
	 * from now on trusts (sbx_spec.ca_pem); NULL: none. Borrowed for the
	 * manager's life. A re-adopted sandbox keeps the CA it started with. */
	const char *ca_pem;
};

/* The boot latency histogram's upper bounds, in milliseconds (+Inf is
 * the last bucket). */
#define POOL_BOOT_BUCKETS 12
extern const uint32_t pool_boot_bounds_ms[POOL_BOOT_BUCKETS - 1];

/* One pool, as GET /v1/info and /metrics show it. */
struct pool_info {
	const char *name;
	bool draining;                  /* removed: lends nothing, empties */
	const char *backend;            /* "ns", "vm"; NULL once removed */
	uint32_t warm, target, booting, claimed;
	uint32_t floor, ceiling;        /* warm, warm_max */
	uint64_t claims[2];             /* by tier */
	uint64_t boots, boot_failures;
	uint64_t boot_buckets[POOL_BOOT_BUCKETS];
	uint64_t boot_ms_sum;
	double lead_ms;
	double rate_per_s;
	uint64_t backoff_ms;            /* left of the back-off, 0: none */
	int available;                  /* rpc: its supervisor's engine can run here
					   (1), cannot (0: unavailable_reason
					   says why), not asked yet (-1); others 1 */
	const char *unavailable_reason;
};

/* One claim (or tombstone), as the API shows it. Everything is borrowed
 * for the callback. */
struct pool_claim_view {
	const char *id;
	const char *pool;
	const char *tenant;             /* NULL: the operator's */
	enum pool_tier tier;
	enum pool_sbx_state state;
	enum pool_end end;
	const char *lane;
	const struct pool_netinfo *net;
	int64_t created_ms, expires_ms; /* CLOCK_REALTIME, ms */
	uint32_t ttl_s;
	const char *const *labels;      /* "key=value" */
	size_t nlabels;
	void *layer;                    /* NULL once ended */
};

typedef void (*pool_view_fn)(void *arg, const struct pool_claim_view *v);

/* A claim request; borrowed for the call. */
struct pool_claim_req {
	const char *pool;
	const struct conf_tenant *tenant; /* NULL: the operator */
	bool ttl_present;
	int64_t ttl;                    /* saturated by the caller */
	const char *const *env;         /* "NAME=value", checked by the caller */
	size_t nenv;
	const char *const *labels;      /* "key=value" */
	size_t nlabels;
	const void *creds;              /* the tenant's credentials, for layer_new
					 * (opaque; NULL: none) */
};

/* A claim or release whose journal event could not be made durable (the
 * API's 503 journal-unavailable): negated, as the other errors. */
#define POOL_ERR_JOURNAL EROFS

/* Errors of pool_mgr_claim(), each with one line in err:
 *   -ENOENT  no such pool;           -EPERM   the tenant may not use it;
 *   -EUSERS  the tenant's max_claims; -ESHUTDOWN the pool is draining;
 *   -ENOSPC  no address left;        -EIO     the boot failed;
 *   -EAGAIN  no warm sandbox and POOL_COLD_PARALLEL cold boots already;
 *   -POOL_ERR_JOURNAL the claim could not be journaled (it was undone:
 *            the sandbox ended, never lent);
 *   -ENOMEM. */
/* Opens the journal (data_dir/journal.jsonl) and the state file
 * (data_dir/state.json) in data_dir, which the caller has made and
 * locked (one daemon per data_dir: gateway/main.c); re-adopts
 * every sandbox of the state that still runs (journals "reap" for claims
 * that are gone), ends the backend's orphans, writes the state, and
 * starts filling c's pools. NULL with one line in err, also when
 * data_dir cannot be written (the daemon refuses to start). */
struct pool_mgr *pool_mgr_new(const struct pool_host *host, struct conf *c, const char *data_dir,
			      char *err, size_t errsz);
/* Stops refilling, waits for what is in flight, and frees the manager.
 * With end_all every sandbox (warm and claimed) is ended first;
 * without, they run on and the state file written here lets the next
 * start re-adopt them. NULL is fine. */
void pool_mgr_free(struct pool_mgr *m, bool end_all);

/* Claim-seconds per tenant and pool from the journal, for claims
 * overlapping [since_ms, now]; tenant NULL: every tenant ("" is the
 * operator's). 0 or -errno with err. */
int pool_mgr_usage(struct pool_mgr *m, const char *tenant, int64_t since_ms,
		   void (*cb)(void *arg, const char *tenant, const char *pool,
			      double claim_seconds, uint64_t claims),
		   void *arg, char *err, size_t errsz);

/* Replaces the pool set by c's pools (a reference is taken). Pools added
 * start filling; removed ones drain; a pool whose backend, template,
 * lane or limits changed drains its warm sandboxes; live claims are left
 * alone (their layers are pinned). */
void pool_mgr_set_conf(struct pool_mgr *m, struct conf *c);
/* The configuration whose pools are the set (a new reference). */
struct conf *pool_mgr_conf(struct pool_mgr *m);

/* Refill and reap: starts boots, ends expired leases and surplus warm
 * sandboxes. Returns the milliseconds until it wants to run again. */
uint64_t pool_mgr_tick(struct pool_mgr *m);

/* Claims a sandbox: fills *v for cb (called once, under the manager's
 * lock, on success only). 0 or -errno (see above). */
int pool_mgr_claim(struct pool_mgr *m, const struct pool_claim_req *req, pool_view_fn cb,
		   void *arg, char *err, size_t errsz);

/* Releases id (tenant NULL: the operator, any claim). Blocks until the
 * sandbox is gone. 0 with *was set to what happened before
 * (POOL_END_NONE: released now; RELEASED or REAPED: already), -ENOENT
 * (unknown, or another tenant's), -POOL_ERR_JOURNAL (the release could
 * not be journaled: the claim stays, unless the journal only timed out,
 * when the sandbox is ended all the same). */
int pool_mgr_release(struct pool_mgr *m, const char *id, const char *tenant,
		     enum pool_end *was);

/* Replaces the credentials claim id's tenant brought (tenant NULL: the
 * operator, any claim) by creds (opaque, for layer_recreds; NULL: none):
 * the claim's layer is made again (host.layer_recreds), the fleet is given
 * it (connections already open keep the one they had), the claim's
 * variables follow its placeholders, and a "credentials" event with the
 * new layer (never a value) is journaled. cb is called as pool_mgr_get()'s
 * on success. 0 or -ENOENT (unknown, another tenant's), -ESTALE (the claim
 * has ended), -EINVAL (the layer could not be made: err says why),
 * -EIO (the fleet refused it), -POOL_ERR_JOURNAL (the change holds in
 * memory but the journal could not record it), -ENOMEM. */
int pool_mgr_set_creds(struct pool_mgr *m, const char *id, const char *tenant, const void *creds,
		       pool_view_fn cb, void *arg, char *err, size_t errsz);

/* Calls cb for the claim id (tombstones too) if tenant may see it:
 * 0 or -ENOENT. */
int pool_mgr_get(struct pool_mgr *m, const char *id, const char *tenant, pool_view_fn cb,
		 void *arg);
/* Calls cb for every live claim tenant may see (NULL: all). */
size_t pool_mgr_each_claim(struct pool_mgr *m, const char *tenant, pool_view_fn cb, void *arg);
/* Calls cb for every pool (removed ones still draining too). */
void pool_mgr_each_pool(struct pool_mgr *m, void (*cb)(void *arg, const struct pool_info *i),
			void *arg);

/* Borrows a claimed sandbox's agent for one operation (exec, files):
 * one at a time per sandbox, waiting up to POOL_USE_WAIT_MS for the one
 * before. 0 with *out (give it back with pool_mgr_put()), -ENOENT,
 * -ESTALE (the claim has ended, also while waiting), -EBUSY (the wait
 * was too long).
 * env: the environment the claim adds to every command ("NAME=value";
 * valid until pool_mgr_put()). */
struct pool_use {
	struct pool_sbx *s;
	struct sbx_agent_conn *agent;
	const char *const *env;
	size_t nenv;
};
int pool_mgr_use(struct pool_mgr *m, const char *id, const char *tenant, struct pool_use *out);
void pool_mgr_put(struct pool_mgr *m, struct pool_use *u);

/* A change to one sandbox's fleet state by hand (the control socket's
 * attach, unlock, lock, detach), made only if no pool manages id: the
 * manager is the one writer of its sandboxes' state. When id is one of
 * its sandboxes (booting, warm, being claimed, claimed or ending; an
 * ended one's tombstone does not count) fn does not run and the answer
 * is -EPERM with one line in err naming the pool and what to do instead
 * (claim or release through the API). Otherwise fn(arg, err, errsz) runs
 * under the manager's lock (it must not call pool_mgr_*; fleet calls are
 * fine), so that the manager cannot start a sandbox of that id meanwhile,
 * and its result is returned. */
typedef int (*pool_hand_fn)(void *arg, char *err, size_t errsz);
int pool_mgr_by_hand(struct pool_mgr *m, const char *id, pool_hand_fn fn, void *arg, char *err,
		     size_t errsz);

const char *pool_tier_name(enum pool_tier t);
const char *pool_state_name(enum pool_sbx_state s);
const char *pool_end_name(enum pool_end e);

#endif

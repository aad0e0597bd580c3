/* manager.c: warm pools, claims, leases and the reaper. See manager.h. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "agent_client.h"
#include "conf.h"
#include "diff.h"
#include "manager.h"
#include "rpc_glue.h"
#include "sandbox.h"
#include "journal.h"
#include "state.h"
#include "target.h"

#define STOP_GRACE_MS 300
#define HELLO_TIMEOUT_MS 15000
#define TICK_MS 250

const uint32_t pool_boot_bounds_ms[POOL_BOOT_BUCKETS - 1] = {
	5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
};

/* What a boot needs, copied when the sandbox is created so that a later
 * pool set cannot change it under the boot. */
struct boot_params {
	enum conf_backend backend;
	enum conf_template_kind tkind;
	char tdir[512];
	char lane[64];
	struct sbx_limits limits;
	const struct sbx_backend *be;   /* rpc: its supervisor's instance */
	enum sbx_isolation isolation;
};

struct pstate;

struct pool_sbx {
	char id[POOL_ID_MAX + 1];
	struct pstate *pool;
	enum pool_sbx_state state;
	enum pool_end end;
	enum pool_tier tier;
	bool ready;                     /* claimed and unlocked: visible */
	bool unlocked;
	bool attached;
	unsigned refs;                  /* under m->mu; the lists hold one */
	unsigned users;                 /* pool_mgr_use() holders */
	char pool_name[64];             /* tombstones outlive their pool */
	uint64_t gen;                   /* the pool's generation at boot */
	struct boot_params bp;
	struct sbx *h;
	struct json_t *ref;             /* sbx_save(): how to find it again */
	struct json_t *layer_saved;     /* the layer as the state file keeps it */
	bool journaled;                 /* a boot or claim event names it */
	uint64_t jend;                  /* the seq of its end event, 0: none */
	struct sbx_agent_conn *agent;
	pthread_mutex_t use_mu;         /* one agent user at a time */
	struct pool_netinfo net;
	char *tenant;
	void *layer;
	int64_t created_ms, expires_ms;
	uint32_t ttl_s;
	char **labels;
	size_t nlabels;
	char **env;
	size_t nenv;
	uint64_t boot_start;
	TAILQ_ENTRY(pool_sbx) all;      /* m->all: every sandbox and tombstone */
	TAILQ_ENTRY(pool_sbx) warm;     /* its pool's warm list */
	bool on_warm;
};

TAILQ_HEAD(sbx_list, pool_sbx);

struct pstate {
	char name[64];
	struct conf *conf;              /* where cp lives (a reference) */
	const struct conf_pool *cp;
	bool draining;
	uint64_t gen;
	uint32_t nwarm, booting, claimed, target, reserved;
	uint32_t cold;                  /* cold claims booting (not in booting) */
	struct pool_rate rate;
	struct pool_lead lead;
	uint32_t fails;
	uint64_t backoff_until;
	uint64_t claims[2], boots, boot_failures, boot_ms_sum;
	uint64_t buckets[POOL_BOOT_BUCKETS];
	int rpc_available;              /* rpc: -1 not asked yet, 0 no, 1 yes */
	bool rpc_checking;              /* rpc: a check job is out */
	uint64_t rpc_check_at;          /* rpc: the next check (mono ms) */
	char rpc_reason[256];           /* rpc: why not */
	struct sbx_list warm;
	struct pstate *next;
};

struct tpl_cache {
	enum conf_backend backend;
	enum conf_template_kind kind;
	char dir[512];
	const struct sbx_backend *be;
	struct sbx_template *t;
	struct tpl_cache *next;
};

struct pool_mgr {
	struct pool_host host;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* boots in flight ended */
	struct conf *conf;
	struct pstate *pools;
	struct sbx_list all;
	size_t ntomb;
	uint32_t inflight;              /* refill boots and destroys running on workers */
	uint32_t nboot;                 /* of which refill boots */
	bool stopping;
	pthread_mutex_t tpl_mu;
	struct tpl_cache *tpls;
	/* durability (data_dir) */
	char *data_dir;
	struct pool_journal *journal;
	uint64_t jseq;                  /* the last event appended */
	struct pool_saver saver;
	bool jfailing;                  /* the journal's last sync failed */
	bool restored;                  /* the state may be written */
};

static const char *const tier_names[] = { "warm", "cold" };
static const char *const state_names[] = { "booting", "warm", "claimed", "ending", "ended" };
static const char *const end_names[] = { "none", "released", "reaped", "drained", "failed",
					 "shutdown" };

const char *
pool_tier_name(enum pool_tier t)
{
	return (unsigned)t < 2 ? tier_names[t] : "?";
}

const char *
pool_state_name(enum pool_sbx_state s)
{
	return (unsigned)s < 5 ? state_names[s] : "?";
}

const char *
pool_end_name(enum pool_end e)
{
	return (unsigned)e < 6 ? end_names[e] : "?";
}

static void mlog(struct pool_mgr *m, enum pool_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
mlog(struct pool_mgr *m, enum pool_log_level lvl, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!m->host.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	m->host.log(m->host.arg, lvl, line);
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int64_t
real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
new_id(char out[POOL_ID_MAX + 1])
{
	uint8_t r[8];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* getrandom(2) of 8 bytes does not fail once the pool is
		 * initialised; a clock-derived id is still unique here. */
		uint64_t t = mono_ms() ^ ((uint64_t)getpid() << 32);

		memcpy(r, &t, sizeof(r));
	}
	snprintf(out, POOL_ID_MAX + 1, "sbx-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		 r[3], r[4], r[5], r[6], r[7]);
}

static void
strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int strv_dup(const char *const *in, size_t n, char ***out);

/* A claim's env: the request's, then its layer's (placeholders). */
static int
claim_env(struct pool_mgr *m, const struct pool_claim_req *req, void *layer, struct pool_sbx *s)
{
	char lenv[POOL_LAYER_ENV_MAX][POOL_LAYER_ENV_LEN];
	const char *all[POOL_ENV_MAX + POOL_LAYER_ENV_MAX];
	size_t n = 0, ln = m->host.layer_env ? m->host.layer_env(layer, lenv, POOL_LAYER_ENV_MAX) : 0;

	for (size_t i = 0; i < req->nenv && n < POOL_ENV_MAX; i++)
		all[n++] = req->env[i];
	for (size_t i = 0; i < ln; i++)
		all[n++] = lenv[i];
	if (strv_dup(all, n, &s->env) < 0)
		return -ENOMEM;
	s->nenv = n;
	return 0;
}

static int
strv_dup(const char *const *in, size_t n, char ***out)
{
	char **v;

	*out = NULL;
	if (n == 0)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i] = strdup(in[i]);
		if (!v[i]) {
			strv_free(v, i);
			return -ENOMEM;
		}
	}
	*out = v;
	return 0;
}

/* ---- pools ------------------------------------------------------------ */

static struct pstate *
pool_find(struct pool_mgr *m, const char *name)
{
	for (struct pstate *p = m->pools; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* The one rule, shared with the dry run's diff (diff.c). */
static bool
boot_same(const struct conf_pool *a, const struct conf_pool *b)
{
	return pool_boot_same(a, b);
}

static void
bp_fill(struct boot_params *bp, const struct conf_pool *cp)
{
	memset(bp, 0, sizeof(*bp));
	bp->backend = cp->backend;
	bp->isolation = cp->isolation == CONF_ISOLATION_ENHANCED ? SBX_ISOLATION_ENHANCED
								  : SBX_ISOLATION_STANDARD;
	bp->tkind = cp->template_kind;
	if (cp->template_dir)
		snprintf(bp->tdir, sizeof(bp->tdir), "%s", cp->template_dir);
	snprintf(bp->lane, sizeof(bp->lane), "%s", cp->lane);
	bp->limits.memory_mb = cp->memory_mb;
	bp->limits.cpus_milli = cp->cpus_milli;
	bp->limits.pids = cp->pids;
	if (cp->backend == CONF_BACKEND_RPC)
		bp->be = pool_backend_of(cp, NULL, 0);
}

/* ---- sandboxes -------------------------------------------------------- */

static struct pool_sbx *
sbx_new(struct pstate *p)
{
	struct pool_sbx *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	new_id(s->id);
	s->pool = p;
	snprintf(s->pool_name, sizeof(s->pool_name), "%s", p->name);
	s->state = POOL_S_BOOTING;
	s->refs = 1;
	s->gen = p->gen;
	bp_fill(&s->bp, p->cp);
	pthread_mutex_init(&s->use_mu, NULL);
	return s;
}

static void
sbx_destroy_record(struct pool_mgr *m, struct pool_sbx *s)
{
	if (s->layer)
		m->host.layer_unref(s->layer);
	json_decref(s->ref);
	json_decref(s->layer_saved);
	sbx_agent_conn_free(s->agent);
	sbx_free(s->h);
	free(s->tenant);
	strv_free(s->labels, s->nlabels);
	strv_free(s->env, s->nenv);
	pthread_mutex_destroy(&s->use_mu);
	free(s);
}

/* Under m->mu. */
static void
sbx_unref_locked(struct pool_mgr *m, struct pool_sbx *s)
{
	if (--s->refs == 0)
		sbx_destroy_record(m, s);
}

/* Under m->mu: an ended sandbox keeps its record (a tombstone) but not
 * its agent connection, handle or environment, once nobody uses them. */
static void
shed(struct pool_sbx *s)
{
	if (s->state != POOL_S_ENDED || s->users)
		return;
	sbx_agent_conn_free(s->agent);
	s->agent = NULL;
	sbx_free(s->h);
	s->h = NULL;
	strv_free(s->env, s->nenv);
	s->env = NULL;
	s->nenv = 0;
}

/* ---- the journal and the state file --------------------------------- */

#define JOURNAL_NAME "journal.jsonl"
#define STATE_NAME "state.json"
#define JSYNC_TIMEOUT_MS 10000

static json_t *
strv_obj(char *const *v, size_t n)
{
	json_t *o = json_object();

	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(v[i], '=');

		if (eq)
			json_object_setn_new(o, v[i], (size_t)(eq - v[i]), json_string(eq + 1));
	}
	return o;
}

/* The record as the state file and the journal's boot and claim events
 * keep it. Under m->mu. */
static json_t *
sbx_entry(const struct pool_sbx *s, bool claimed)
{
	char addr[INET_ADDRSTRLEN] = "";
	json_t *o = json_object();

	if (s->net.linked)
		inet_ntop(AF_INET, &s->net.addr, addr, sizeof(addr));
	json_object_set_new(o, "id", json_string(s->id));
	json_object_set_new(o, "pool", json_string(s->pool_name));
	json_object_set_new(o, "state", json_string(claimed ? "claimed" : "warm"));
	json_object_set_new(o, "tenant", s->tenant ? json_string(s->tenant) : json_null());
	json_object_set_new(o, "tier", json_string(pool_tier_name(s->tier)));
	json_object_set_new(o, "ref", s->ref ? json_incref(s->ref) : json_object());
	json_object_set_new(o, "lane", json_string(s->bp.lane));
	json_object_set_new(o, "address", s->net.linked ? json_string(addr) : json_null());
	json_object_set_new(o, "ifname", json_string(s->net.ifname));
	json_object_set_new(o, "created_ms", json_integer(s->created_ms));
	json_object_set_new(o, "expires_ms", json_integer(s->expires_ms));
	json_object_set_new(o, "ttl_s", json_integer(s->ttl_s));
	json_object_set_new(o, "labels", strv_obj(s->labels, s->nlabels));
	json_object_set_new(o, "env", strv_obj(s->env, s->nenv));
	json_object_set_new(o, "layer",
			    claimed && s->layer_saved ? json_incref(s->layer_saved) : json_null());
	return o;
}

/* Under m->mu: appends one event (stolen). Its seq, or 0 when the journal
 * refused it (the caller that answers for it then fails: see jsync). */
static uint64_t
jrec(struct pool_mgr *m, json_t *ev)
{
	uint64_t seq;

	if (!m->journal || !ev) {
		json_decref(ev);
		return 0;
	}
	seq = pool_journal_append(m->journal, ev);
	if (seq)
		m->jseq = seq;
	else
		mlog(m, POOL_LOG_ERR, "journal: an event was refused (too large, or too much "
				      "pending while the journal cannot be written)");
	pool_saver_changed(&m->saver);
	return seq;
}

static json_t *
ev_of(struct pool_mgr *m, const char *type, const struct pool_sbx *s, bool claimed)
{
	json_t *ev = sbx_entry(s, claimed);

	json_object_set_new(ev, "event", json_string(type));
	json_object_set_new(ev, "claim", json_string(s->id));
	json_object_del(ev, "id");
	if (claimed && s->layer && m->host.layer_version)
		json_object_set_new(ev, "layer_version",
				    json_string(m->host.layer_version(s->layer)));
	return ev;
}

/* An end event: what a tombstone needs, nothing secret, no layer. */
static json_t *
ev_end(const char *type, const struct pool_sbx *s, const char *why)
{
	json_t *ev = sbx_entry(s, false);

	json_object_set_new(ev, "event", json_string(type));
	json_object_set_new(ev, "claim", json_string(s->id));
	json_object_del(ev, "id");
	json_object_del(ev, "ref");
	json_object_del(ev, "env");
	json_object_del(ev, "layer");
	json_object_del(ev, "state");
	if (why)
		json_object_set_new(ev, "reason", json_string(why));
	return ev;
}

/* Not under m->mu: makes every event up to seq durable. 0, or -errno:
 * the event was not recorded (dropped by a failed commit; -ETIMEDOUT: it
 * may still be). Nothing is acknowledged on a failure: claims and releases
 * answer journal-unavailable. Logged once per run of failures. A journal
 * that refused an event gave it no seq: JSEQ_REFUSED fails here. */
#define JSEQ_REFUSED UINT64_MAX

static int
jsync(struct pool_mgr *m, uint64_t seq)
{
	int rc;

	if (!m->journal || !seq)
		return 0;
	rc = seq == JSEQ_REFUSED ? -ENOBUFS : pool_journal_sync(m->journal, seq, JSYNC_TIMEOUT_MS);
	pthread_mutex_lock(&m->mu);
	if (rc < 0 && !m->jfailing)
		mlog(m, POOL_LOG_ERR,
		     "journal %s/%s: %s: claims and releases are refused (503 journal-unavailable) "
		     "until it can be written",
		     m->data_dir, JOURNAL_NAME, strerror(-rc));
	else if (rc == 0 && m->jfailing)
		mlog(m, POOL_LOG_INFO, "journal %s/%s: written again", m->data_dir, JOURNAL_NAME);
	m->jfailing = rc < 0;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* Under m->mu: the state file's document. */
static json_t *
state_doc(struct pool_mgr *m)
{
	json_t *a = json_array();
	struct pool_sbx *s;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	TAILQ_FOREACH(s, &m->all, all) {
		if ((s->state == POOL_S_WARM || (s->state == POOL_S_CLAIMED && !s->ready)) &&
		    s->journaled && !s->jend)
			/* a warm one, or one a claim has taken but not answered */
			json_array_append_new(a, sbx_entry(s, false));
		else if (s->state == POOL_S_CLAIMED && s->ready)
			json_array_append_new(a, sbx_entry(s, true));
	}
	return json_pack("{s:i, s:I, s:I, s:o}", "format", 1, "journal_seq", (json_int_t)m->jseq,
			 "written_ms", (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
			 "sandboxes", a);
}

struct save_job {
	struct pool_mgr *m;
	json_t *doc;
	uint64_t gen, seq;
};

static void
save_job(void *arg)
{
	struct save_job *j = arg;
	struct pool_mgr *m = j->m;
	char err[512] = "";
	bool log_it = false;
	int rc;

	/* The state file never runs ahead of the journal: not written
	 * (and retried later) while the journal cannot be. */
	rc = m->journal && j->seq ? pool_journal_flush(m->journal, j->seq, JSYNC_TIMEOUT_MS) : 0;
	if (rc < 0)
		snprintf(err, sizeof(err), "waiting for the journal: %s", strerror(-rc));
	else
		rc = pool_state_write(m->data_dir, STATE_NAME, j->doc, err, sizeof(err));
	json_decref(j->doc);
	pthread_mutex_lock(&m->mu);
	pool_saver_done(&m->saver, j->gen, rc, mono_ms(), &log_it);
	if (rc < 0 && log_it)
		mlog(m, POOL_LOG_ERR, "state file: %s (retrying with back-off)", err);
	else if (rc == 0 && log_it)
		mlog(m, POOL_LOG_INFO, "state file %s/%s: written again", m->data_dir, STATE_NAME);
	m->inflight--;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	free(j);
}

/* Under m->mu, from the tick: writes the state file when it is due. */
static void
save_maybe(struct pool_mgr *m, uint64_t now, uint64_t *next)
{
	struct save_job *j;
	uint64_t gen, when;

	if (!m->journal)
		return;
	if (pool_saver_should_write(&m->saver, now, &gen)) {
		j = malloc(sizeof(*j));
		if (j) {
			j->m = m;
			j->doc = state_doc(m);
			j->gen = gen;
			j->seq = m->jseq;
			m->inflight++;
			if (m->host.submit(m->host.arg, save_job, j) == 0)
				return;
			m->inflight--;
			json_decref(j->doc);
			free(j);
		}
		pool_saver_done(&m->saver, gen, -ENOMEM, now, &(bool){ false });
	}
	when = pool_saver_next_ms(&m->saver, now);
	if (when && when < *next)
		*next = when;
}

static struct pool_sbx *
sbx_find(struct pool_mgr *m, const char *id)
{
	struct pool_sbx *s;

	TAILQ_FOREACH(s, &m->all, all)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

static bool
visible(const struct pool_sbx *s, const char *tenant)
{
	if (!tenant)
		return true;
	return s->tenant && strcmp(s->tenant, tenant) == 0;
}

/* Under m->mu: the claim (live or a tombstone) id that tenant may see
 * (NULL: the operator, any), or NULL. A sandbox not yet lent (warm,
 * booting, a claim not answered yet) is no claim. */
static struct pool_sbx *
claim_find(struct pool_mgr *m, const char *id, const char *tenant)
{
	struct pool_sbx *s = sbx_find(m, id);

	/* ready stays set once lent, through ENDING and ENDED. */
	if (!s || !visible(s, tenant) || !s->ready)
		return NULL;
	return s;
}

static int
template_get(struct pool_mgr *m, const struct boot_params *bp, const struct sbx_backend **be,
	     struct sbx_template **t, char *err, size_t errsz)
{
	struct tpl_cache *c;
	struct sbx_template_req req = { 0 };
	int rc = 0;

	pthread_mutex_lock(&m->tpl_mu);
	for (c = m->tpls; c; c = c->next)
		if (c->backend == bp->backend && c->kind == bp->tkind &&
		    strcmp(c->dir, bp->tdir) == 0 &&
		    (bp->backend != CONF_BACKEND_RPC || c->be == bp->be))
			goto found;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		snprintf(err, errsz, "out of memory");
		goto out;
	}
	c->backend = bp->backend;
	c->kind = bp->tkind;
	snprintf(c->dir, sizeof(c->dir), "%s", bp->tdir);
	c->be = bp->backend == CONF_BACKEND_RPC ? bp->be
						: sbx_backend_get(conf_backend_name(bp->backend));
	if (!c->be) {
		snprintf(err, errsz, "backend %s is not available on this host",
			 conf_backend_name(bp->backend));
		free(c);
		rc = -ENOTSUP;
		goto out;
	}
	req.kind = bp->tkind == CONF_TEMPLATE_HOST  ? SBX_TEMPLATE_HOST
		   : bp->tkind == CONF_TEMPLATE_DIR ? SBX_TEMPLATE_DIR
						    : SBX_TEMPLATE_BUSYBOX;
	req.dir = bp->tkind == CONF_TEMPLATE_DIR ? c->dir : NULL;
	rc = sbx_template_ensure(c->be, &req, &c->t, err, errsz);
	if (rc < 0) {
		free(c);
		goto out;
	}
	c->next = m->tpls;
	m->tpls = c;
found:
	*be = c->be;
	*t = c->t;
out:
	pthread_mutex_unlock(&m->tpl_mu);
	return rc;
}

/* Boots s (not under m->mu): template, address, sandbox, agent. On
 * failure nothing is left behind. */
static int
boot_one(struct pool_mgr *m, struct pool_sbx *s, char *err, size_t errsz)
{
	const struct sbx_backend *be;
	struct sbx_template *t;
	struct sbx_spec spec = { 0 };
	struct sbx_file resolv;
	const char *env[POOL_NET_ENV_MAX];
	char addr[32], gw[INET_ADDRSTRLEN], e2[256], conf[160];
	int rc, fd;

	if (s->bp.backend == CONF_BACKEND_RPC) {
		/* the supervisor first: one that says its engine cannot run
		 * here makes the pool report why, instead of booting */
		char why[256];
		int ok = s->bp.be ? pool_rpc_available(s->bp.be, why, sizeof(why)) : 0;

		if (!s->bp.be)
			snprintf(why, sizeof(why), "no supervisor");
		pthread_mutex_lock(&m->mu);
		s->pool->rpc_available = ok;
		snprintf(s->pool->rpc_reason, sizeof(s->pool->rpc_reason), "%s", ok ? "" : why);
		pthread_mutex_unlock(&m->mu);
		if (!ok) {
			snprintf(err, errsz, "supervisor not available: %s", why);
			return -ENOTSUP;
		}
	}
	rc = template_get(m, &s->bp, &be, &t, err, errsz);
	if (rc < 0)
		return rc;
	rc = m->host.attach(m->host.arg, s->id, s->bp.lane, &s->net, err, errsz);
	if (rc < 0)
		return rc;
	s->attached = true;
	spec.id = s->id;
	spec.limits = s->bp.limits;
	spec.isolation = s->bp.isolation;
	for (size_t i = 0; i < s->net.nenv; i++)
		env[i] = s->net.env[i];
	spec.env = env;
	spec.nenv = s->net.nenv;
	spec.ca_pem = m->host.ca_pem;
	if (s->net.linked) {
		inet_ntop(AF_INET, &s->net.addr, gw, sizeof(gw));
		snprintf(addr, sizeof(addr), "%s/%u", gw, s->net.prefix);
		inet_ntop(AF_INET, &s->net.gateway, gw, sizeof(gw));
		spec.net.kind = SBX_NET_LINK;
		spec.net.peer_netns_fd = -1;
		spec.net.peer_netns = s->net.netns;
		spec.net.peer_ifname = s->net.ifname;
		spec.net.address = addr;
		spec.net.gateway = gw;
		spec.net.peer_address = gw;
		if (s->net.dns) {
			/* The lane's DNS door (docs/network.md): every name the
			 * guest resolves is answered from its claim's layer. */
			snprintf(conf, sizeof(conf), "# sluice: the lane's DNS door\n"
				 "nameserver %s\noptions timeout:2 attempts:2\n", gw);
			resolv = (struct sbx_file){ .path = "/etc/resolv.conf", .data = conf,
						    .len = strlen(conf), .mode = 0644 };
			spec.files = &resolv;
			spec.nfiles = 1;
		}
	} else {
		spec.net.kind = SBX_NET_NONE;
		spec.net.peer_netns_fd = -1;
	}
	rc = sbx_start(be, t, &spec, &s->h, err, errsz);
	if (rc < 0)
		goto fail;
	fd = sbx_agent_fd(s->h);
	if (fd < 0 || (fd = dup(fd)) < 0) {
		rc = fd < 0 ? fd : -errno;
		snprintf(err, errsz, "sandbox %s has no agent stream", s->id);
		goto fail;
	}
	s->agent = sbx_agent_conn_new(fd);
	if (!s->agent) {
		rc = -ENOMEM;
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	rc = sbx_agent_hello_sync(s->agent, HELLO_TIMEOUT_MS, NULL, e2, sizeof(e2));
	if (rc < 0) {
		snprintf(err, errsz, "sandbox %s: agent did not answer: %s", s->id, e2);
		goto fail;
	}
	return 0;
fail:
	sbx_agent_conn_free(s->agent);
	s->agent = NULL;
	if (s->h) {
		sbx_stop(s->h, 0, e2, sizeof(e2));
		sbx_free(s->h);
		s->h = NULL;
	}
	if (m->host.detach(m->host.arg, s->id, e2, sizeof(e2)) < 0)
		mlog(m, POOL_LOG_WARN, "%s", e2);
	s->attached = false;
	return rc;
}

/* Ends s (not under m->mu; s->state is ENDING, a reference held by the
 * caller): lock, destroy, detach. */
static uint64_t
end_one(struct pool_mgr *m, struct pool_sbx *s)
{
	uint64_t seq = 0;
	char err[256];

	if (s->attached && m->host.lock(m->host.arg, s->id, err, sizeof(err)) < 0)
		mlog(m, POOL_LOG_WARN, "%s", err);
	/* The agent ends when its stream does: our copy of the stream is
	 * shut (not closed: a command in flight may still hold the
	 * connection, and learns of the end from it). */
	if (s->agent)
		shutdown(sbx_agent_fd_of(s->agent), SHUT_RDWR);
	if (s->h && sbx_stop(s->h, s->end == POOL_END_SHUTDOWN ? 0 : STOP_GRACE_MS, err,
			     sizeof(err)) < 0)
		mlog(m, POOL_LOG_WARN, "sandbox %s: %s", s->id, err);
	if (s->attached && m->host.detach(m->host.arg, s->id, err, sizeof(err)) < 0)
		mlog(m, POOL_LOG_WARN, "%s", err);

	pthread_mutex_lock(&m->mu);
	s->attached = false;
	s->state = POOL_S_ENDED;
	seq = s->jend;
	if (s->layer) {
		m->host.layer_unref(s->layer);
		s->layer = NULL;
	}
	if (s->end == POOL_END_RELEASED || s->end == POOL_END_REAPED) {
		/* A tombstone: the record stays findable for a while. */
		shed(s);
		m->ntomb++;
		while (m->ntomb > POOL_TOMBSTONES) {
			struct pool_sbx *o;

			TAILQ_FOREACH(o, &m->all, all)
				if (o->state == POOL_S_ENDED)
					break;
			if (!o)
				break;
			TAILQ_REMOVE(&m->all, o, all);
			m->ntomb--;
			sbx_unref_locked(m, o);
		}
	} else {
		TAILQ_REMOVE(&m->all, s, all);
		sbx_unref_locked(m, s);
	}
	pthread_mutex_unlock(&m->mu);
	return seq;
}

/* Under m->mu: takes s out of its pool's counts as it starts ending, and
 * journals its end before the teardown (a crash in between leaves a
 * running sandbox that no record names: the next start sweeps it). */
static void
begin_end_why(struct pool_mgr *m, struct pool_sbx *s, enum pool_end why, const char *reason)
{
	struct pstate *p = s->pool;

	if (s->journaled && !s->jend) {
		uint64_t seq;

		if (s->ready)
			seq = jrec(m, ev_end(why == POOL_END_RELEASED ? "release" : "reap", s,
					     reason                        ? reason
					     : why == POOL_END_SHUTDOWN ? "shutdown"
									 : NULL));
		else
			seq = jrec(m, ev_end("drain", s, reason));
		s->jend = seq ? seq : JSEQ_REFUSED;
	}

	if (s->on_warm) {
		TAILQ_REMOVE(&p->warm, s, warm);
		s->on_warm = false;
		p->nwarm--;
	}
	if (s->state == POOL_S_CLAIMED)
		p->claimed--;
	s->state = POOL_S_ENDING;
	s->end = why;
}

static void
begin_end(struct pool_mgr *m, struct pool_sbx *s, enum pool_end why)
{
	begin_end_why(m, s, why, NULL);
}

struct job {
	struct pool_mgr *m;
	struct pool_sbx *s;
};

static void
end_job(void *arg)
{
	struct job *j = arg;
	struct pool_mgr *m = j->m;

	end_one(m, j->s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, j->s);
	m->inflight--;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	free(j);
}

/* Under m->mu: ends s on a worker (s is ENDING already). */
static void
end_async(struct pool_mgr *m, struct pool_sbx *s)
{
	struct job *j = malloc(sizeof(*j));

	s->refs++;
	m->inflight++;
	if (j) {
		j->m = m;
		j->s = s;
		if (m->host.submit(m->host.arg, end_job, j) == 0)
			return;
		free(j);
	}
	/* No worker: end it here (rare; only out of memory). */
	pthread_mutex_unlock(&m->mu);
	end_one(m, s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, s);
	m->inflight--;
	pthread_cond_broadcast(&m->cv);
}

static void
bucket(struct pstate *p, uint64_t ms)
{
	size_t i = 0;

	while (i < POOL_BOOT_BUCKETS - 1 && ms > pool_boot_bounds_ms[i])
		i++;
	p->buckets[i]++;
	p->boot_ms_sum += ms;
	p->boots++;
}

static void
boot_failed(struct pool_mgr *m, struct pstate *p, const char *err)
{
	uint64_t back;

	p->boot_failures++;
	p->fails++;
	back = (uint64_t)POOL_BACKOFF_MIN_MS << (p->fails < 10 ? p->fails - 1 : 9);
	if (back > POOL_BACKOFF_MAX_MS)
		back = POOL_BACKOFF_MAX_MS;
	p->backoff_until = mono_ms() + back;
	mlog(m, POOL_LOG_WARN, "pool %s: boot failed (%u in a row, next try in %llu ms): %s",
	     p->name, p->fails, (unsigned long long)back, err);
}

/* A warm sandbox waits parked where its backend can park (a paused
 * microVM costs no CPU and little memory); where it cannot, it waits
 * running. Not under m->mu. */
static void
park_warm(struct pool_mgr *m, struct pool_sbx *s)
{
	char err[256];
	int rc = sbx_park(s->h, err, sizeof(err));

	if (rc < 0 && rc != -ENOTSUP)
		mlog(m, POOL_LOG_WARN, "sandbox %s: cannot park (%s); it waits running", s->id,
		     err);
}

/* Resumes a parked warm sandbox for a claim and gives its agent the time
 * and fresh entropy: a clone restored from a snapshot must not share a
 * random stream with its siblings, and its clock stood still while
 * parked. Not under m->mu; s is reserved by the caller. */
static int
unpark_claimed(struct pool_mgr *m, struct pool_sbx *s, char *err, size_t errsz)
{
	char e2[256];
	int rc;

	(void)m;
	/* Always asked, parked or not: a park that timed out may still have
	 * taken effect, and an adopted sandbox that could not be parked
	 * again has been standing still while the daemon was down. */
	rc = sbx_unpark(s->h, e2, sizeof(e2));
	if (rc == -ENOTSUP)
		return 0;
	if (rc < 0) {
		snprintf(err, errsz, "sandbox %s: cannot resume: %s", s->id, e2);
		return rc;
	}
	rc = sbx_agent_refresh_sync(s->agent, HELLO_TIMEOUT_MS, e2, sizeof(e2));
	if (rc < 0) {
		snprintf(err, errsz, "sandbox %s: agent did not take the time and entropy: %s",
			 s->id, e2);
		return rc;
	}
	return 0;
}

static void
boot_job(void *arg)
{
	struct job *j = arg;
	struct pool_mgr *m = j->m;
	struct pool_sbx *s = j->s;
	struct pstate *p = s->pool;
	char err[512];
	int rc;

	free(j);
	rc = boot_one(m, s, err, sizeof(err));
	if (rc == 0) {
		park_warm(m, s);
		s->ref = sbx_save(s->h);
	}
	pthread_mutex_lock(&m->mu);
	p->booting--;
	m->nboot--;
	if (rc < 0) {
		boot_failed(m, p, err);
		TAILQ_REMOVE(&m->all, s, all);
		sbx_unref_locked(m, s);
	} else {
		uint64_t took = mono_ms() - s->boot_start;

		p->fails = 0;
		pool_lead_record(&p->lead, took);
		bucket(p, took);
		if (m->stopping || p->draining || s->gen != p->gen) {
			begin_end(m, s, POOL_END_DRAINED);
			end_async(m, s);
		} else {
			s->state = POOL_S_WARM;
			TAILQ_INSERT_TAIL(&p->warm, s, warm);
			s->on_warm = true;
			p->nwarm++;
			s->journaled = true;
			jrec(m, ev_of(m, "boot", s, false));
		}
	}
	/* Wake before the count drops: once it is 0, pool_mgr_free() may
	 * free m. */
	if (m->host.wake)
		m->host.wake(m->host.arg);
	m->inflight--;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* Under m->mu: starts one refill boot for p. */
static int
boot_async(struct pool_mgr *m, struct pstate *p)
{
	struct pool_sbx *s = sbx_new(p);
	struct job *j = malloc(sizeof(*j));

	if (!s || !j) {
		free(j);
		if (s)
			sbx_destroy_record(m, s);
		return -ENOMEM;
	}
	s->boot_start = mono_ms();
	j->m = m;
	j->s = s;
	TAILQ_INSERT_TAIL(&m->all, s, all);
	p->booting++;
	m->inflight++;
	m->nboot++;
	if (m->host.submit(m->host.arg, boot_job, j) < 0) {
		TAILQ_REMOVE(&m->all, s, all);
		p->booting--;
		m->inflight--;
		m->nboot--;
		sbx_destroy_record(m, s);
		free(j);
		return -EAGAIN;
	}
	return 0;
}

/* An rpc pool's supervisor, checked on a worker now and then (every
 * RPC_CHECK_MS): a supervisor that died is started again (after its
 * back-off) and adopts its sandboxes again even while nothing calls it,
 * and the pool's availability stays current. */
#define RPC_CHECK_MS 1000

struct rpc_job {
	struct pool_mgr *m;
	const struct sbx_backend *be;
	char pool[64];
};

static void
rpc_check_job(void *arg)
{
	struct rpc_job *j = arg;
	struct pool_mgr *m = j->m;
	struct pstate *p;
	char why[256];
	int ok = pool_rpc_available(j->be, why, sizeof(why));

	pthread_mutex_lock(&m->mu);
	if ((p = pool_find(m, j->pool))) {
		p->rpc_checking = false;
		p->rpc_available = ok;
		snprintf(p->rpc_reason, sizeof(p->rpc_reason), "%s", ok ? "" : why);
		p->rpc_check_at = mono_ms() + RPC_CHECK_MS;
	}
	free(j);
	m->inflight--;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* Under m->mu. */
static void
rpc_check_maybe(struct pool_mgr *m, struct pstate *p, uint64_t now)
{
	struct rpc_job *j;

	if (!p->cp || p->cp->backend != CONF_BACKEND_RPC || p->rpc_checking ||
	    now < p->rpc_check_at || !(j = calloc(1, sizeof(*j))))
		return;
	j->m = m;
	j->be = pool_backend_of(p->cp, NULL, 0);
	snprintf(j->pool, sizeof(j->pool), "%s", p->name);
	if (!j->be) {
		free(j);
		return;
	}
	p->rpc_checking = true;
	m->inflight++;
	if (m->host.submit(m->host.arg, rpc_check_job, j) < 0) {
		p->rpc_checking = false;
		m->inflight--;
		free(j);
	}
}

/* ---- the pool set ----------------------------------------------------- */

static void
drain_warm(struct pool_mgr *m, struct pstate *p)
{
	struct pool_sbx *s;

	while ((s = TAILQ_FIRST(&p->warm))) {
		begin_end(m, s, POOL_END_DRAINED);
		end_async(m, s);
	}
}

void
pool_mgr_set_conf(struct pool_mgr *m, struct conf *c)
{
	conf_ref(c);
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < c->npools; i++) {
		const struct conf_pool *cp = &c->pools[i];
		struct pstate *p = pool_find(m, cp->name);

		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p) {
				mlog(m, POOL_LOG_ERR, "pool %s: out of memory", cp->name);
				continue;
			}
			snprintf(p->name, sizeof(p->name), "%s", cp->name);
			TAILQ_INIT(&p->warm);
			p->rpc_available = -1;
			p->next = m->pools;
			m->pools = p;
			mlog(m, POOL_LOG_INFO, "pool %s: added (warm %u, warm_max %u)", cp->name,
			     cp->warm, cp->warm_max);
		} else if (p->cp && !boot_same(p->cp, cp)) {
			/* Warm sandboxes were booted for the old shape. */
			p->gen++;
			drain_warm(m, p);
			mlog(m, POOL_LOG_INFO, "pool %s: changed; its warm sandboxes are replaced",
			     cp->name);
		}
		if (p->draining)
			mlog(m, POOL_LOG_INFO, "pool %s: back in the set", cp->name);
		p->draining = false;
		p->cp = cp;
		conf_ref(c);
		conf_unref(p->conf);
		p->conf = c;
	}
	for (struct pstate *p = m->pools; p; p = p->next) {
		bool kept = false;

		for (size_t i = 0; i < c->npools; i++)
			kept = kept || strcmp(c->pools[i].name, p->name) == 0;
		if (!kept && !p->draining) {
			p->draining = true;
			mlog(m, POOL_LOG_INFO, "pool %s: removed; draining", p->name);
			drain_warm(m, p);
		}
	}
	conf_unref(m->conf);
	m->conf = c;
	pthread_mutex_unlock(&m->mu);
	if (m->host.wake)
		m->host.wake(m->host.arg);
}

struct conf *
pool_mgr_conf(struct pool_mgr *m)
{
	struct conf *c;

	pthread_mutex_lock(&m->mu);
	c = conf_ref(m->conf);
	pthread_mutex_unlock(&m->mu);
	return c;
}

/* ---- restart: re-adoption -------------------------------------------- */

struct restore {
	struct pool_mgr *m;
	json_t *live;                   /* id -> entry (the state file's shape) */
	json_t *tombs;                  /* end events: a ring of POOL_TOMBSTONES */
	size_t thead;                   /* the oldest, once the ring is full */
	uint64_t base;                  /* the state file's journal_seq */
	uint64_t last;
	json_t *adopted;                /* ids kept: sbx_sweep()'s list */
	json_t *rseq;                   /* id -> the seq of its live record */
	/* Unreadable lines after the state file's point: the events they
	 * held are unknown, so a record older than damage_q may be stale. */
	bool bad_pending;               /* a garbage line since the last event */
	uint64_t bad_lines, bad_first_off;
	uint64_t damage_q;              /* the seq after the last such line */
};

/* Garbage in the middle of the journal (not a torn tail). */
static void
restore_bad(void *arg, uint64_t off)
{
	struct restore *r = arg;

	if (!r->bad_pending && !r->bad_lines)
		r->bad_first_off = off;
	r->bad_pending = true;
}

/* The garbage lines before an event of seq `next` (UINT64_MAX: at the end)
 * held seqs below it; they matter when one of those may be past base. */
static void
restore_bad_settle(struct restore *r, uint64_t next)
{
	if (!r->bad_pending)
		return;
	r->bad_pending = false;
	if (next - 1 > r->base) {
		r->bad_lines++;
		r->damage_q = next;
	}
}

static void
restore_event(void *arg, const json_t *ev, uint64_t seq)
{
	struct restore *r = arg;
	const char *type = json_string_value(json_object_get(ev, "event"));
	const char *id = json_string_value(json_object_get(ev, "claim"));

	restore_bad_settle(r, seq);
	r->last = seq;
	if (!type || !id)
		return;
	if (strcmp(type, "release") == 0 || strcmp(type, "reap") == 0) {
		if (json_array_size(r->tombs) < POOL_TOMBSTONES) {
			json_array_append(r->tombs, (json_t *)(uintptr_t)ev);
		} else {
			json_array_set(r->tombs, r->thead, (json_t *)(uintptr_t)ev);
			r->thead = (r->thead + 1) % POOL_TOMBSTONES;
		}
	}
	if (seq <= r->base)
		return;                 /* the state file has it */
	/* A claim's credentials changed: the event holds the claim whole,
	 * with its new layer (never a value). */
	if (strcmp(type, "boot") == 0 || strcmp(type, "claim") == 0 ||
	    (strcmp(type, "credentials") == 0 && json_object_get(r->live, id))) {
		json_t *e = json_deep_copy(ev);

		json_object_set_new(e, "id", json_string(id));
		json_object_set_new(e, "state", json_string(type[0] == 'b' ? "warm" : "claimed"));
		json_object_del(e, "event");
		json_object_del(e, "claim");
		json_object_set_new(r->live, id, e);
		json_object_set_new(r->rseq, id, json_integer((json_int_t)seq));
	} else if (strcmp(type, "release") == 0 || strcmp(type, "reap") == 0 ||
		   strcmp(type, "drain") == 0 || strcmp(type, "gone") == 0) {
		json_object_del(r->live, id);
	}
}

static struct pstate *
pool_for(struct pool_mgr *m, const char *name)
{
	struct pstate *p = pool_find(m, name);

	if (p)
		return p;
	/* A claim from a pool no longer in the set: the pool drains. */
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->name, sizeof(p->name), "%s", name);
	TAILQ_INIT(&p->warm);
	p->rpc_available = -1;
	p->draining = true;
	p->next = m->pools;
	m->pools = p;
	return p;
}

static int64_t
jint(const json_t *o, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(o, k));
}

static int
kv_of(const json_t *o, char ***v, size_t *n)
{
	const char *k;
	json_t *val;
	size_t i = 0;

	*v = NULL;
	*n = 0;
	if (!json_is_object(o) || json_object_size(o) == 0)
		return 0;
	*v = calloc(json_object_size(o), sizeof(**v));
	if (!*v)
		return -ENOMEM;
	json_object_foreach((json_t *)(uintptr_t)o, k, val) {
		const char *sv = json_string_value(val);
		size_t kl = strlen(k), vl = sv ? strlen(sv) : 0;

		if (!((*v)[i] = malloc(kl + vl + 2)))
			return -ENOMEM;
		memcpy((*v)[i], k, kl);
		(*v)[i][kl] = '=';
		memcpy((*v)[i] + kl + 1, sv ? sv : "", vl + 1);
		*n = ++i;
	}
	return 0;
}

static void tomb_from(struct pool_mgr *m, const json_t *ev);

/* Under m->mu: journals the end of a sandbox of the state that is gone
 * (claims become tombstones, reaped). */
static void
gone_locked(struct restore *r, const char *id, const json_t *e, const char *why)
{
	struct pool_mgr *m = r->m;
	bool claimed = strcmp(json_string_value(json_object_get(e, "state")) ?: "", "claimed") == 0;
	json_t *ev = json_deep_copy(e);

	json_object_set_new(ev, "event", json_string(claimed ? "reap" : "gone"));
	json_object_set_new(ev, "claim", json_string(id));
	json_object_set_new(ev, "reason", json_string(why));
	json_object_del(ev, "id");
	json_object_del(ev, "ref");
	json_object_del(ev, "env");
	json_object_del(ev, "layer");
	json_object_del(ev, "state");
	if (claimed)
		tomb_from(m, ev);
	jrec(m, ev);
}

/* Re-adopts one sandbox of the state (not under m->mu: nothing else runs
 * yet). A sandbox that is gone is forgotten and journaled; one whose
 * network or layer cannot be restored is ended. */
static void
adopt_one(struct restore *r, const char *id, const json_t *e)
{
	struct pool_mgr *m = r->m;
	const json_t *ref = json_object_get(e, "ref");
	const char *pool = json_string_value(json_object_get(e, "pool"));
	const char *lane = json_string_value(json_object_get(e, "lane"));
	const char *address = json_string_value(json_object_get(e, "address"));
	const char *tenant = json_string_value(json_object_get(e, "tenant"));
	bool claimed = strcmp(json_string_value(json_object_get(e, "state")) ?: "", "claimed") == 0;
	const struct sbx_backend *be = pool_backend_of_ref(ref, NULL, 0);
	struct pool_sbx *s;
	struct sbx *h = NULL;
	struct in_addr a = { 0 };
	char err[512] = "";
	const char *why = NULL;
	struct pstate *p;
	int fd, rc;

	if (!be || !pool || !lane || strlen(id) > POOL_ID_MAX) {
		mlog(m, POOL_LOG_ERR, "restart: sandbox %s: its record is incomplete; forgotten", id);
		pthread_mutex_lock(&m->mu);
		gone_locked(r, id, e, "record");
		pthread_mutex_unlock(&m->mu);
		return;
	}
	rc = sbx_adopt(be, ref, &h, err, sizeof(err));
	if (rc < 0) {
		mlog(m, rc == -ESRCH ? POOL_LOG_INFO : POOL_LOG_WARN,
		     "restart: %s %s is gone (%s)", claimed ? "claim" : "warm sandbox", id,
		     rc == -ESRCH ? "its process ended" : err);
		if (sbx_forget(be, ref, err, sizeof(err)) < 0)
			mlog(m, POOL_LOG_WARN, "restart: %s: %s", id, err);
		pthread_mutex_lock(&m->mu);
		gone_locked(r, id, e, "gone");
		pthread_mutex_unlock(&m->mu);
		return;
	}
	pthread_mutex_lock(&m->mu);
	p = pool_for(m, pool);
	s = p ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		sbx_stop(h, 0, err, sizeof(err));
		sbx_free(h);
		return;
	}
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->pool = p;
	snprintf(s->pool_name, sizeof(s->pool_name), "%s", pool);
	s->refs = 1;
	s->gen = p->gen;
	s->h = h;
	s->ref = json_deep_copy(ref);
	s->journaled = true;
	s->tier = strcmp(json_string_value(json_object_get(e, "tier")) ?: "", "cold") == 0
			  ? POOL_TIER_COLD
			  : POOL_TIER_WARM;
	snprintf(s->bp.lane, sizeof(s->bp.lane), "%s", lane);
	pthread_mutex_init(&s->use_mu, NULL);
	s->state = POOL_S_BOOTING;      /* not lendable until it is set up */
	TAILQ_INSERT_TAIL(&m->all, s, all);
	pthread_mutex_unlock(&m->mu);

	if (address && inet_pton(AF_INET, address, &a) != 1) {
		why = "address";
		snprintf(err, sizeof(err), "bad address \"%s\"", address);
		goto end;
	}
	rc = m->host.adopt_net(m->host.arg, id, lane, a, &s->net, err, sizeof(err));
	if (rc < 0) {
		why = "network";
		goto end;
	}
	s->attached = true;
	fd = sbx_agent_fd(h);
	if (fd < 0 || (fd = dup(fd)) < 0 || !(s->agent = sbx_agent_conn_new(fd)) ||
	    sbx_agent_hello_sync(s->agent, HELLO_TIMEOUT_MS, NULL, err, sizeof(err)) < 0) {
		why = "agent";
		goto end;
	}
	if (claimed) {
		const json_t *saved = json_object_get(e, "layer");
		void *layer = m->host.layer_load(m->host.arg, saved, err, sizeof(err));

		if (!layer) {
			why = "layer";
			goto end;
		}
		if (m->host.unlock(m->host.arg, id, layer, err, sizeof(err)) < 0) {
			m->host.layer_unref(layer);
			why = "network";
			goto end;
		}
		s->unlocked = true;
		if ((tenant && !(s->tenant = strdup(tenant))) ||
		    kv_of(json_object_get(e, "labels"), &s->labels, &s->nlabels) < 0 ||
		    kv_of(json_object_get(e, "env"), &s->env, &s->nenv) < 0) {
			m->host.layer_unref(layer);
			why = "memory";
			goto end;
		}
		pthread_mutex_lock(&m->mu);
		s->layer = layer;
		s->layer_saved = json_deep_copy(saved);
		s->created_ms = jint(e, "created_ms");
		s->expires_ms = jint(e, "expires_ms");
		s->ttl_s = (uint32_t)jint(e, "ttl_s");
		s->state = POOL_S_CLAIMED;
		s->ready = true;
		p->claimed++;
	} else {
		/* Adopted running (sbx_adopt() unparks): parked again before
		 * it is lendable, so a claim finds every warm one alike. */
		park_warm(m, s);
		pthread_mutex_lock(&m->mu);
		if (p->draining) {
			pthread_mutex_unlock(&m->mu);
			why = NULL;
			goto drain;
		}
		s->state = POOL_S_WARM;
		TAILQ_INSERT_TAIL(&p->warm, s, warm);
		s->on_warm = true;
		p->nwarm++;
	}
	jrec(m, json_pack("{s:s, s:s, s:s, s:s}", "event", "adopt", "claim", id, "pool", pool,
			  "state", claimed ? "claimed" : "warm"));
	json_array_append_new(r->adopted, json_string(id));
	pthread_mutex_unlock(&m->mu);
	mlog(m, POOL_LOG_INFO, "restart: %s %s re-adopted%s", claimed ? "claim" : "warm sandbox",
	     id, claimed ? " with its layer and lease" : "");
	return;

end:
	mlog(m, POOL_LOG_ERR, "restart: %s %s cannot be restored (%s): %s; ending it",
	     claimed ? "claim" : "warm sandbox", id, why, err);
drain:
	/* A record lent out ends as a reaped claim, a warm one drains. */
	pthread_mutex_lock(&m->mu);
	if (claimed) {
		s->ready = true;
		s->state = POOL_S_CLAIMED;
		s->created_ms = jint(e, "created_ms");
		s->expires_ms = jint(e, "expires_ms");
		s->ttl_s = (uint32_t)jint(e, "ttl_s");
		if (tenant && !s->tenant)
			s->tenant = strdup(tenant);
		p->claimed++;
		begin_end_why(m, s, POOL_END_REAPED, "restore");
	} else {
		s->state = POOL_S_WARM;
		begin_end(m, s, POOL_END_DRAINED);
	}
	json_array_append_new(r->adopted, json_string(id));
	end_async(m, s);
	pthread_mutex_unlock(&m->mu);
}

/* A tombstone from an end event of the journal. Under m->mu. */
static void
tomb_from(struct pool_mgr *m, const json_t *ev)
{
	const char *id = json_string_value(json_object_get(ev, "claim"));
	const char *pool = json_string_value(json_object_get(ev, "pool"));
	const char *tenant = json_string_value(json_object_get(ev, "tenant"));
	const char *address = json_string_value(json_object_get(ev, "address"));
	const char *lane = json_string_value(json_object_get(ev, "lane"));
	struct pool_sbx *s;

	if (!id || !pool || strlen(id) > POOL_ID_MAX || sbx_find(m, id))
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->pool_name, sizeof(s->pool_name), "%s", pool);
	if (lane)
		snprintf(s->bp.lane, sizeof(s->bp.lane), "%s", lane);
	s->refs = 1;
	s->tenant = tenant ? strdup(tenant) : NULL;
	s->tier = strcmp(json_string_value(json_object_get(ev, "tier")) ?: "", "cold") == 0
			  ? POOL_TIER_COLD
			  : POOL_TIER_WARM;
	s->net.linked = address && inet_pton(AF_INET, address, &s->net.addr) == 1;
	s->created_ms = jint(ev, "created_ms");
	s->expires_ms = jint(ev, "expires_ms");
	s->ttl_s = (uint32_t)jint(ev, "ttl_s");
	s->state = POOL_S_ENDED;
	s->ready = true;
	s->end = strcmp(json_string_value(json_object_get(ev, "event")), "release") == 0
			 ? POOL_END_RELEASED
			 : POOL_END_REAPED;
	pthread_mutex_init(&s->use_mu, NULL);
	TAILQ_INSERT_TAIL(&m->all, s, all);
	m->ntomb++;
}

/* The journal has unreadable lines past the state file's point. A claim
 * may have been among them: a sandbox whose last readable record says warm
 * and is older than the damage cannot be proven unclaimed, so it must
 * never be lent again. daemon.journal_damage: "refuse" (the default)
 * refuses the start, changing nothing; "destroy" journals such sandboxes
 * as gone (reason journal-damaged) and leaves them out of the adoption, so
 * that the sweep ends them. Claimed records are kept: their owner is
 * proven, and a sandbox is never claimed twice. -EBADMSG with err, or 0. */
static int
restore_damaged(struct restore *r, const char *path, char *err, size_t errsz)
{
	struct pool_mgr *m = r->m;
	enum conf_journal_damage mode = m->conf ? m->conf->daemon.journal_damage
						: CONF_JDAMAGE_REFUSE;
	char ids[512] = "";
	size_t at_risk = 0, len = 0;
	const char *id;
	json_t *e, *tmp;

	json_object_foreach_safe(r->live, tmp, id, e) {
		uint64_t rs = (uint64_t)json_integer_value(json_object_get(r->rseq, id));

		if (strcmp(json_string_value(json_object_get(e, "state")) ?: "", "warm") != 0 ||
		    rs >= r->damage_q)
			continue;
		at_risk++;
		if (len < sizeof(ids) - 64)
			len += (size_t)snprintf(ids + len, sizeof(ids) - len, "%s%s",
						len ? " " : "", id);
		if (mode != CONF_JDAMAGE_DESTROY)
			continue;
		mlog(m, POOL_LOG_ERR, "restart: warm sandbox %s: its record predates the damaged "
		     "journal lines; it may have been claimed: destroyed, never lent", id);
		pthread_mutex_lock(&m->mu);
		gone_locked(r, id, e, "journal-damaged");
		pthread_mutex_unlock(&m->mu);
		json_object_del(r->live, id);
	}
	if (mode != CONF_JDAMAGE_DESTROY) {
		snprintf(err, errsz,
			 "the journal is damaged: %llu unreadable lines past the state file's seq %llu "
			 "(the first at offset %llu); %zu warm sandboxes may have been claimed in "
			 "them (%s); refusing to start (daemon.journal_damage: refuse). Set "
			 "daemon.journal_damage: destroy to start with them destroyed; see "
			 "docs/operations.md, \"A corrupt journal\"",
			 (unsigned long long)r->bad_lines, (unsigned long long)r->base,
			 (unsigned long long)r->bad_first_off, at_risk, at_risk ? ids : "none");
		return -EBADMSG;
	}
	mlog(m, POOL_LOG_ERR,
	     "restart: journal %s is damaged: %llu unreadable lines past the state file's seq "
	     "%llu (the first at offset %llu); %zu warm sandboxes they may concern are destroyed "
	     "(daemon.journal_damage: destroy)%s%s",
	     path, (unsigned long long)r->bad_lines, (unsigned long long)r->base,
	     (unsigned long long)r->bad_first_off, at_risk, at_risk ? ": " : "", ids);
	return 0;
}

/* Reads the state file and the journal, re-adopts what still runs,
 * journals the end of what does not, ends the orphans. */
static int
restore(struct pool_mgr *m, char *err, size_t errsz)
{
	struct restore r = { .m = m, .live = json_object(), .tombs = json_array(),
			     .adopted = json_array(), .rseq = json_object() };
	struct pool_journal_stats st = { 0 };
	char path[4096], e2[512] = "";
	const char **keep;
	const char *id;
	json_t *doc, *e, *tmp;
	size_t i, n;
	int rc, sweeps = 0;

	doc = pool_state_read(m->data_dir, STATE_NAME, e2, sizeof(e2));
	if (!doc && e2[0])
		mlog(m, POOL_LOG_WARN, "restart: state file: %s; rebuilding from the journal", e2);
	if (doc) {
		r.base = (uint64_t)json_integer_value(json_object_get(doc, "journal_seq"));
		json_array_foreach(json_object_get(doc, "sandboxes"), i, e) {
			json_object_set(r.live, json_string_value(json_object_get(e, "id")), e);
			json_object_set_new(r.rseq, json_string_value(json_object_get(e, "id")),
					    json_integer((json_int_t)r.base));
		}
		json_decref(doc);
	}
	snprintf(path, sizeof(path), "%s/%s", m->data_dir, JOURNAL_NAME);
	rc = pool_journal_read_ex(path, restore_event, restore_bad, &r, &st, e2, sizeof(e2));
	if (rc < 0) {
		snprintf(err, errsz, "%s", e2);
		goto out;
	}
	restore_bad_settle(&r, UINT64_MAX);
	if (r.bad_lines && (rc = restore_damaged(&r, path, err, errsz)) < 0)
		goto out;
	if (r.base > r.last && r.last)
		mlog(m, POOL_LOG_WARN, "restart: the state file is ahead of the journal (%llu > %llu)",
		     (unsigned long long)r.base, (unsigned long long)r.last);
	pthread_mutex_lock(&m->mu);
	n = json_array_size(r.tombs);
	for (i = 0; i < n; i++) {
		e = json_array_get(r.tombs, (r.thead + i) % n);
		id = json_string_value(json_object_get(e, "claim"));
		if (id && !json_object_get(r.live, id))
			tomb_from(m, e);
	}
	pthread_mutex_unlock(&m->mu);
	json_object_foreach_safe(r.live, tmp, id, e) adopt_one(&r, id, e);
	/* Orphans: sandboxes the backend finds that no record names (booted
	 * just before a crash). */
	n = json_array_size(r.adopted);
	keep = calloc(n + 1, sizeof(*keep));
	if (keep) {
		for (i = 0; i < n; i++)
			keep[i] = json_string_value(json_array_get(r.adopted, i));
		/* Every backend this host runs: a sandbox whose adoption
		 * failed while it still ran is ended here too. */
		static const char *const backends[] = { "ns", "vm" };

		for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
			const struct sbx_backend *be = sbx_backend_get(backends[i]);
			int k = be ? sbx_sweep(be, keep, n, e2, sizeof(e2)) : 0;

			if (k < 0)
				mlog(m, POOL_LOG_WARN, "restart: sweep: %s", e2);
			else
				sweeps += k;
		}
		/* and every rpc pool's supervisor, once each */
		for (struct pstate *p = m->pools; p; p = p->next) {
			const struct sbx_backend *be = p->cp ? pool_backend_of(p->cp, NULL, 0) : NULL;
			bool seen = false;
			int k;

			if (!be || p->cp->backend != CONF_BACKEND_RPC)
				continue;
			for (struct pstate *q = m->pools; q != p; q = q->next)
				seen = seen || (q->cp && q->cp->backend == CONF_BACKEND_RPC &&
						pool_backend_of(q->cp, NULL, 0) == be);
			if (seen)
				continue;
			k = sbx_sweep(be, keep, n, e2, sizeof(e2));
			if (k < 0)
				mlog(m, POOL_LOG_WARN, "restart: sweep: %s", e2);
			else
				sweeps += k;
		}
		free(keep);
	}
	mlog(m, POOL_LOG_INFO,
	     "restart: journal up to seq %llu (%llu events; %llu torn, %llu garbage, %llu gaps), "
	     "%zu sandboxes re-adopted, %d orphans ended",
	     (unsigned long long)st.last_seq, (unsigned long long)st.events,
	     (unsigned long long)st.torn, (unsigned long long)st.garbage,
	     (unsigned long long)st.gaps, n, sweeps);
	rc = 0;
out:
	json_decref(r.live);
	json_decref(r.tombs);
	json_decref(r.adopted);
	json_decref(r.rseq);
	return rc;
}

static void
jlog(void *arg, int level, const char *msg)
{
	struct pool_mgr *m = arg;

	mlog(m, (enum pool_log_level)level, "journal: %s", msg);
}

/* Under m->mu, dropped and retaken: writes the state file now. */
static int
save_now(struct pool_mgr *m, char *err, size_t errsz)
{
	uint64_t gen, seq, now = mono_ms();
	bool log_it;
	json_t *doc;
	int rc;

	if (!pool_saver_should_write(&m->saver, now, &gen))
		return 0;
	doc = state_doc(m);
	seq = m->jseq;
	pthread_mutex_unlock(&m->mu);
	rc = m->journal && seq ? pool_journal_flush(m->journal, seq, JSYNC_TIMEOUT_MS) : 0;
	if (rc < 0)
		snprintf(err, errsz, "%s/%s: %s", m->data_dir, JOURNAL_NAME, strerror(-rc));
	else
		rc = pool_state_write(m->data_dir, STATE_NAME, doc, err, errsz);
	json_decref(doc);
	pthread_mutex_lock(&m->mu);
	pool_saver_done(&m->saver, gen, rc, mono_ms(), &log_it);
	return rc;
}

struct pool_mgr *
pool_mgr_new(const struct pool_host *host, struct conf *c, const char *data_dir, char *err,
	     size_t errsz)
{
	struct pool_mgr *m = calloc(1, sizeof(*m));
	char path[4096], e2[512];
	int rc;

	if (!m || !(m->data_dir = strdup(data_dir))) {
		free(m);
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	m->host = *host;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->tpl_mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	TAILQ_INIT(&m->all);
	pool_saver_init(&m->saver, POOL_BACKOFF_MIN_MS, POOL_BACKOFF_MAX_MS);
	snprintf(path, sizeof(path), "%s/%s", data_dir, JOURNAL_NAME);
	m->journal = pool_journal_open(path, jlog, m, e2, sizeof(e2));
	if (!m->journal) {
		snprintf(err, errsz, "daemon.data_dir %s: the journal: %s", data_dir, e2);
		goto fail;
	}
	pool_mgr_set_conf(m, c);
	if (restore(m, e2, sizeof(e2)) < 0) {
		snprintf(err, errsz, "daemon.data_dir %s: %s", data_dir, e2);
		goto fail_keep;
	}
	m->restored = true;
	/* The state as of now, before the first request: a directory that
	 * cannot be written is refused here, not found out later. */
	pthread_mutex_lock(&m->mu);
	pool_saver_changed(&m->saver);
	rc = save_now(m, e2, sizeof(e2));
	pthread_mutex_unlock(&m->mu);
	if (rc < 0) {
		snprintf(err, errsz, "daemon.data_dir %s: %s", data_dir, e2);
		m->restored = false;
		goto fail_keep;
	}
	return m;
fail_keep:
	pool_mgr_free(m, false);
	return NULL;
fail:
	pool_journal_close(m->journal);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->tpl_mu);
	pthread_mutex_destroy(&m->mu);
	free(m->data_dir);
	free(m);
	return NULL;
}

void
pool_mgr_free(struct pool_mgr *m, bool end_all)
{
	struct pool_sbx *s, *n;
	char err[512];

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	/* Boots, teardowns and state writes in flight finish (boots end
	 * what they made: m->stopping). */
	while (m->inflight)
		pthread_cond_wait(&m->cv, &m->mu);
	if (end_all) {
		for (s = TAILQ_FIRST(&m->all); s; s = n) {
			n = TAILQ_NEXT(s, all);
			if (s->state == POOL_S_WARM || s->state == POOL_S_CLAIMED) {
				begin_end(m, s, POOL_END_SHUTDOWN);
				end_async(m, s);
			}
		}
		while (m->inflight)
			pthread_cond_wait(&m->cv, &m->mu);
	}
	/* What is left runs on: the next start re-adopts it from the state
	 * file written here (and the journal). */
	/* Never over a good state file with what a failed start saw. */
	if (m->journal && m->restored) {
		pool_saver_changed(&m->saver);
		pool_saver_retry_now(&m->saver);
		if (save_now(m, err, sizeof(err)) < 0)
			mlog(m, POOL_LOG_ERR, "state file at stop: %s", err);
	}
	while ((s = TAILQ_FIRST(&m->all))) {
		TAILQ_REMOVE(&m->all, s, all);
		if (s->h && (s->state == POOL_S_WARM || s->state == POOL_S_CLAIMED)) {
			sbx_release(s->h);
			s->h = NULL;
		}
		sbx_unref_locked(m, s);
	}
	pthread_mutex_unlock(&m->mu);
	while (m->pools) {
		struct pstate *p = m->pools;

		m->pools = p->next;
		conf_unref(p->conf);
		free(p);
	}
	while (m->tpls) {
		struct tpl_cache *t = m->tpls;

		m->tpls = t->next;
		sbx_template_free(t->be, t->t);
		free(t);
	}
	pool_journal_close(m->journal);
	conf_unref(m->conf);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->tpl_mu);
	pthread_mutex_destroy(&m->mu);
	free(m->data_dir);
	free(m);
}

struct usage_ctx {
	struct pool_usage *u;
};

static void
usage_event(void *arg, const json_t *ev, uint64_t seq)
{
	struct usage_ctx *x = arg;

	(void)seq;
	pool_usage_event(x->u, ev);
}

int
pool_mgr_usage(struct pool_mgr *m, const char *tenant, int64_t since_ms,
	       void (*cb)(void *arg, const char *tenant, const char *pool, double claim_seconds,
			  uint64_t claims),
	       void *arg, char *err, size_t errsz)
{
	struct pool_journal_stats st;
	struct usage_ctx x = { pool_usage_new() };
	char path[4096];
	uint64_t seq;
	int rc;

	if (!x.u) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&m->mu);
	seq = m->jseq;
	pthread_mutex_unlock(&m->mu);
	/* What is in memory only is not in the file yet. */
	if (m->journal && seq)
		pool_journal_flush(m->journal, seq, JSYNC_TIMEOUT_MS);
	snprintf(path, sizeof(path), "%s/%s", m->data_dir, JOURNAL_NAME);
	rc = pool_journal_read(path, usage_event, &x, &st, err, errsz);
	if (rc == 0)
		pool_usage_result(x.u, tenant, since_ms, real_ms(), cb, arg);
	pool_usage_free(x.u);
	return rc;
}

/* ---- refill and reap -------------------------------------------------- */

uint64_t
pool_mgr_tick(struct pool_mgr *m)
{
	uint64_t now = mono_ms(), next = TICK_MS;
	int64_t wall = real_ms();
	struct pool_sbx *s, *n;
	struct pstate **pp;

	pthread_mutex_lock(&m->mu);
	if (m->stopping) {
		pthread_mutex_unlock(&m->mu);
		return TICK_MS;
	}
	/* Leases first: an expired claim is reaped whatever else happens. */
	for (s = TAILQ_FIRST(&m->all); s; s = n) {
		n = TAILQ_NEXT(s, all);
		if (s->state == POOL_S_CLAIMED && s->ready && s->expires_ms <= wall) {
			mlog(m, POOL_LOG_INFO, "claim %s: lease expired; reaping", s->id);
			begin_end(m, s, POOL_END_REAPED);
			end_async(m, s);
		} else if (s->state == POOL_S_CLAIMED && s->ready &&
			   (uint64_t)(s->expires_ms - wall) < next) {
			next = (uint64_t)(s->expires_ms - wall);
		}
	}
	for (pp = &m->pools; *pp;) {
		struct pstate *p = *pp;

		if (p->draining) {
			if (!p->nwarm && !p->booting && !p->cold && !p->claimed && !p->reserved) {
				bool used = false;

				/* Tombstones name their pool by its name. */
				TAILQ_FOREACH(s, &m->all, all)
					used = used || (s->pool == p && s->state != POOL_S_ENDED);
				if (!used) {
					mlog(m, POOL_LOG_INFO, "pool %s: drained", p->name);
					*pp = p->next;
					conf_unref(p->conf);
					free(p);
					continue;
				}
			}
			pp = &p->next;
			continue;
		}
		rpc_check_maybe(m, p, now);
		p->target = pool_target(pool_rate_at(&p->rate, now), &p->lead, POOL_SAFETY,
					p->cp->warm, p->cp->warm_max);
		if (now >= p->backoff_until) {
			while (p->nwarm + p->booting < p->target && m->nboot < POOL_BOOT_PARALLEL)
				if (boot_async(m, p) < 0)
					break;
		} else if (p->backoff_until - now < next) {
			next = p->backoff_until - now;
		}
		if (p->nwarm > p->target && (s = TAILQ_FIRST(&p->warm))) {
			/* One surplus sandbox per tick: a dip in the rate
			 * does not empty the pool at once. */
			begin_end(m, s, POOL_END_DRAINED);
			end_async(m, s);
		}
		pp = &p->next;
	}
	save_maybe(m, now, &next);
	pthread_mutex_unlock(&m->mu);
	return next ? next : 1;
}

/* ---- claims ----------------------------------------------------------- */

static void
view_of(const struct pool_sbx *s, struct pool_claim_view *v)
{
	memset(v, 0, sizeof(*v));
	v->id = s->id;
	v->pool = s->pool_name;
	v->tenant = s->tenant;
	v->tier = s->tier;
	v->state = s->state;
	v->end = s->end;
	v->lane = s->bp.lane;
	v->net = &s->net;
	v->created_ms = s->created_ms;
	v->expires_ms = s->expires_ms;
	v->ttl_s = s->ttl_s;
	v->labels = (const char *const *)s->labels;
	v->nlabels = s->nlabels;
	v->layer = s->layer;
}

static bool
tenant_pool_ok(const struct conf_tenant *t, const char *pool)
{
	if (!t || !t->npools)
		return true;
	for (size_t i = 0; i < t->npools; i++)
		if (strcmp(t->pools[i], pool) == 0)
			return true;
	return false;
}

/* Under m->mu: the tenant's live claims (reserved ones too). */
static uint32_t
tenant_claims(struct pool_mgr *m, const char *tenant)
{
	struct pool_sbx *s;
	uint32_t n = 0;

	TAILQ_FOREACH(s, &m->all, all)
		if (s->tenant && strcmp(s->tenant, tenant) == 0 &&
		    (s->state == POOL_S_CLAIMED || (s->state == POOL_S_BOOTING && s->tenant)))
			n++;
	return n;
}

/* Ends a claim that failed half way (not under m->mu). */
static void
claim_abort(struct pool_mgr *m, struct pool_sbx *s, bool cold)
{
	pthread_mutex_lock(&m->mu);
	s->pool->reserved--;
	if (cold)
		s->pool->cold--;
	if (s->journaled && !s->jend) {
		/* A warm sandbox taken for a claim that failed. */
		uint64_t seq = jrec(m, ev_end("drain", s, "claim-failed"));

		s->jend = seq ? seq : JSEQ_REFUSED;
	}
	s->state = POOL_S_ENDING;
	s->end = POOL_END_FAILED;
	pthread_mutex_unlock(&m->mu);
	end_one(m, s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
}

/* Under m->mu: a claim whose event could not be made durable ends (the
 * tenant never learns its id; a sandbox that was lent must not go back to
 * a pool). Its end is journaled as a reap ("journal-unavailable"), which
 * closes the claim for readers whichever of the two events the disk kept.
 * Left alone if something else (the reaper) began ending it meanwhile. */
static void
claim_undo_locked(struct pool_mgr *m, struct pool_sbx *s)
{
	if (s->state != POOL_S_CLAIMED)
		return;
	begin_end_why(m, s, POOL_END_REAPED, "journal-unavailable");
	end_async(m, s);
}

int
pool_mgr_claim(struct pool_mgr *m, const struct pool_claim_req *req, pool_view_fn cb,
	       void *arg, char *err, size_t errsz)
{
	const struct conf_tenant *t = req->tenant;
	const struct conf_pool *cp;
	struct pool_claim_view v;
	struct pool_sbx *s;
	struct pstate *p;
	struct conf *c;
	bool cold = false;
	uint64_t seq;
	uint32_t ttl;
	void *layer;
	int rc;

	pthread_mutex_lock(&m->mu);
	p = pool_find(m, req->pool);
	if (!p || (p->draining && !p->cp)) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "no pool named \"%s\"", req->pool);
		return -ENOENT;
	}
	if (p->draining) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "pool %s was removed and is draining", p->name);
		return -ESHUTDOWN;
	}
	if (!tenant_pool_ok(t, p->name)) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "tenant %s may not claim from pool %s", t->name, p->name);
		return -EPERM;
	}
	if (t && t->max_claims && tenant_claims(m, t->name) >= t->max_claims) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "tenant %s holds %u claims (max_claims)", t->name,
			 t->max_claims);
		return -EUSERS;
	}
	if (!TAILQ_FIRST(&p->warm) && p->cold >= POOL_COLD_PARALLEL) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "pool %s has no warm sandbox and %u cold boots under way",
			 p->name, p->cold);
		return -EAGAIN;
	}
	pool_rate_arrival(&p->rate, mono_ms());
	s = TAILQ_FIRST(&p->warm);
	if (s) {
		TAILQ_REMOVE(&p->warm, s, warm);
		s->on_warm = false;
		p->nwarm--;
		s->tier = POOL_TIER_WARM;
	} else {
		s = sbx_new(p);
		if (!s) {
			pthread_mutex_unlock(&m->mu);
			snprintf(err, errsz, "out of memory");
			return -ENOMEM;
		}
		s->boot_start = mono_ms();
		s->tier = POOL_TIER_COLD;
		TAILQ_INSERT_TAIL(&m->all, s, all);
		p->cold++;
		cold = true;
	}
	if (!cold)
		s->state = POOL_S_CLAIMED;      /* reserved: not ready yet */
	p->reserved++;
	s->refs++;
	if (t && !(s->tenant = strdup(t->name))) {
		/* Without its tenant the claim could not be counted. */
		pthread_mutex_unlock(&m->mu);
		claim_abort(m, s, cold);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	cp = p->cp;
	c = conf_ref(p->conf);
	ttl = pool_ttl(req->ttl_present, req->ttl, cp->ttl_default_s, cp->ttl_max_s);
	pthread_mutex_unlock(&m->mu);
	if (m->host.wake)
		m->host.wake(m->host.arg);

	if (cold) {
		rc = boot_one(m, s, err, errsz);
		if (rc == 0)
			s->ref = sbx_save(s->h);
		pthread_mutex_lock(&m->mu);
		if (rc < 0) {
			boot_failed(m, p, err);
		} else {
			uint64_t took = mono_ms() - s->boot_start;

			p->fails = 0;
			pool_lead_record(&p->lead, took);
			bucket(p, took);
		}
		pthread_mutex_unlock(&m->mu);
		if (rc < 0) {
			rc = rc == -ENOSPC ? -ENOSPC : -EIO;
			goto abort;
		}
	} else if ((rc = unpark_claimed(m, s, err, errsz)) < 0) {
		mlog(m, POOL_LOG_ERR, "claim from pool %s: %s; ending it", p->name, err);
		rc = -EIO;
		goto abort;
	}
	layer = m->host.layer_new(m->host.arg, c, cp, t, req->creds, err, errsz);
	if (!layer) {
		rc = -ENOMEM;
		goto abort;
	}
	rc = m->host.unlock(m->host.arg, s->id, layer, err, errsz);
	if (rc < 0) {
		m->host.layer_unref(layer);
		rc = -EIO;
		goto abort;
	}
	s->unlocked = true;
	if (claim_env(m, req, layer, s) < 0 ||
	    strv_dup(req->labels, req->nlabels, &s->labels) < 0) {
		m->host.layer_unref(layer);
		snprintf(err, errsz, "out of memory");
		rc = -ENOMEM;
		goto abort;
	}
	s->nlabels = req->nlabels;
	s->layer_saved = m->host.layer_save ? m->host.layer_save(layer) : NULL;

	pthread_mutex_lock(&m->mu);
	s->layer = layer;
	s->created_ms = real_ms();
	s->ttl_s = ttl;
	s->expires_ms = s->created_ms + (int64_t)ttl * 1000;
	s->state = POOL_S_CLAIMED;
	s->ready = true;
	p->reserved--;
	if (cold)
		p->cold--;
	p->claimed++;
	s->journaled = true;
	seq = jrec(m, ev_of(m, "claim", s, true));
	pthread_mutex_unlock(&m->mu);
	conf_unref(c);
	/* The answer leaves once the claim is in the journal (one group
	 * commit); a claim the journal could not record is undone. */
	rc = jsync(m, seq ? seq : JSEQ_REFUSED);
	pthread_mutex_lock(&m->mu);
	if (rc < 0) {
		snprintf(err, errsz, "the journal could not record the claim: %s", strerror(-rc));
		mlog(m, POOL_LOG_WARN, "claim %s from pool %s not acknowledged: %s; ending it", s->id,
		     p->name, err);
		claim_undo_locked(m, s);
		sbx_unref_locked(m, s);
		pthread_mutex_unlock(&m->mu);
		if (m->host.wake)
			m->host.wake(m->host.arg);
		return -POOL_ERR_JOURNAL;
	}
	p->claims[s->tier]++;
	view_of(s, &v);
	cb(arg, &v);
	mlog(m, POOL_LOG_INFO, "claim %s: pool %s, tenant %s, tier %s, ttl %us", s->id, p->name,
	     t ? t->name : "-", pool_tier_name(s->tier), ttl);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
	return 0;

abort:
	conf_unref(c);
	mlog(m, POOL_LOG_WARN, "claim from pool %s failed: %s", p->name, err);
	claim_abort(m, s, cold);
	if (m->host.wake)
		m->host.wake(m->host.arg);
	return rc;
}

int
pool_mgr_release(struct pool_mgr *m, const char *id, const char *tenant, enum pool_end *was)
{
	struct pool_sbx *s;
	uint64_t seq;
	int rc;

	pthread_mutex_lock(&m->mu);
	s = claim_find(m, id, tenant);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return -ENOENT;
	}
	if (s->state != POOL_S_CLAIMED) {
		*was = s->end;
		seq = s->jend;
		pthread_mutex_unlock(&m->mu);
		if (*was != POOL_END_RELEASED && *was != POOL_END_REAPED)
			return -ENOENT;
		/* "already" only once the end is recorded (another release
		 * may still be waiting for it) */
		return jsync(m, seq) < 0 ? -POOL_ERR_JOURNAL : 0;
	}
	begin_end(m, s, POOL_END_RELEASED);
	seq = s->jend;
	s->refs++;
	pthread_mutex_unlock(&m->mu);
	/* Durable before the teardown: a crash during the stop still finds
	 * the claim released, not reaped. A release the journal dropped is
	 * undone (the claim stays, the tenant may try again); one that timed
	 * out may still be recorded, so the teardown goes on, unacknowledged. */
	rc = jsync(m, seq);
	if (rc < 0 && rc != -ETIMEDOUT) {
		pthread_mutex_lock(&m->mu);
		if (s->state == POOL_S_ENDING && s->end == POOL_END_RELEASED && s->jend == seq) {
			s->state = POOL_S_CLAIMED;
			s->end = POOL_END_NONE;
			s->jend = 0;
			s->pool->claimed++;
		}
		sbx_unref_locked(m, s);
		pthread_mutex_unlock(&m->mu);
		mlog(m, POOL_LOG_WARN, "claim %s: release not recorded (%s); the claim stays", id,
		     strerror(-rc));
		return -POOL_ERR_JOURNAL;
	}
	end_one(m, s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
	mlog(m, POOL_LOG_INFO, "claim %s: released%s", id, rc < 0 ? " (not acknowledged: the "
							      "journal timed out)" : "");
	*was = POOL_END_NONE;
	if (m->host.wake)
		m->host.wake(m->host.arg);
	return rc < 0 ? -POOL_ERR_JOURNAL : 0;
}

int
pool_mgr_by_hand(struct pool_mgr *m, const char *id, pool_hand_fn fn, void *arg, char *err,
		 size_t errsz)
{
	struct pool_sbx *s;
	int rc;

	pthread_mutex_lock(&m->mu);
	s = sbx_find(m, id);
	if (s && s->state != POOL_S_ENDED) {
		/* The manager is the one writer of its sandboxes' fleet state:
		 * a change by hand would go unseen (a warm sandbox unlocked
		 * with any policy, then lent; a claim's pinned layer
		 * replaced; a link gone under a claim). */
		if (s->state == POOL_S_CLAIMED && s->ready)
			snprintf(err, errsz,
				 "sandbox %s is claimed from pool %s, its layer pinned at the claim: "
				 "the control socket changes only sandboxes no pool manages; release it "
				 "through the API (DELETE /v1/sandboxes/%s)",
				 id, s->pool_name, id);
		else if (s->state == POOL_S_ENDING)
			snprintf(err, errsz,
				 "sandbox %s belongs to pool %s and is ending: the control socket "
				 "changes only sandboxes no pool manages",
				 id, s->pool_name);
		else
			snprintf(err, errsz,
				 "sandbox %s belongs to pool %s (%s): the control socket changes only "
				 "sandboxes no pool manages; claim it through the API (POST /v1/claims)",
				 id, s->pool_name,
				 s->state == POOL_S_WARM	? "warm"
				 : s->state == POOL_S_BOOTING ? "booting"
							      : "being claimed");
		pthread_mutex_unlock(&m->mu);
		return -EPERM;
	}
	rc = fn(arg, err, errsz);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The claim's variables with old's placeholders replaced by layer's: the
 * entries old gave are dropped (the claim's own stay, in order), layer's
 * appended. The caller holds the claim's use, so s->env holds still. */
static int
recreds_env(struct pool_mgr *m, const struct pool_sbx *s, void *old, void *layer, char ***env,
	    size_t *nenv)
{
	char oenv[POOL_LAYER_ENV_MAX][POOL_LAYER_ENV_LEN], lenv[POOL_LAYER_ENV_MAX][POOL_LAYER_ENV_LEN];
	const char *all[POOL_ENV_MAX + POOL_LAYER_ENV_MAX];
	size_t on = 0, ln = 0, n = 0;

	if (m->host.layer_env) {
		on = m->host.layer_env(old, oenv, POOL_LAYER_ENV_MAX);
		ln = m->host.layer_env(layer, lenv, POOL_LAYER_ENV_MAX);
	}
	for (size_t i = 0; i < s->nenv; i++) {
		bool from_old = false;

		for (size_t k = 0; k < on && !from_old; k++)
			from_old = strcmp(s->env[i], oenv[k]) == 0;
		if (!from_old && n < POOL_ENV_MAX)
			all[n++] = s->env[i];
	}
	for (size_t i = 0; i < ln; i++)
		all[n++] = lenv[i];
	if (strv_dup(all, n, env) < 0)
		return -ENOMEM;
	*nenv = n;
	return 0;
}

int
pool_mgr_set_creds(struct pool_mgr *m, const char *id, const char *tenant, const void *creds,
		   pool_view_fn cb, void *arg, char *err, size_t errsz)
{
	struct pool_claim_view v;
	struct pool_use u;
	struct pool_sbx *s;
	void *old = NULL, *layer = NULL;
	json_t *saved = NULL;
	char **env = NULL;
	size_t nenv = 0;
	uint64_t seq;
	int rc;

	if (!m->host.layer_recreds) {
		snprintf(err, errsz, "this daemon cannot change a claim's credentials");
		return -EINVAL;
	}
	/* The claim's use, as an exec takes it: one change at a time, none
	 * while a command reads the claim's variables. */
	rc = pool_mgr_use(m, id, tenant, &u);
	if (rc == -ENOENT)
		snprintf(err, errsz, "no sandbox %s", id);
	else if (rc == -ESTALE)
		snprintf(err, errsz, "sandbox %s is no longer claimed", id);
	else if (rc < 0)
		snprintf(err, errsz, "sandbox %s is busy; try again", id);
	if (rc < 0)
		return rc;
	s = u.s;
	pthread_mutex_lock(&m->mu);
	if (s->layer)
		old = m->host.layer_ref(s->layer);
	pthread_mutex_unlock(&m->mu);
	if (!old) {
		snprintf(err, errsz, "sandbox %s is no longer claimed", id);
		rc = -ESTALE;
		goto out;
	}
	if (!(layer = m->host.layer_recreds(m->host.arg, old, creds, err, errsz))) {
		rc = errno == ENOMEM ? -ENOMEM : -EINVAL;
		goto out;
	}
	if (recreds_env(m, s, old, layer, &env, &nenv) < 0 ||
	    (m->host.layer_save && !(saved = m->host.layer_save(layer)))) {
		snprintf(err, errsz, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	/* From here new connections of the sandbox are checked against the
	 * new layer; open ones keep theirs. */
	if (m->host.unlock(m->host.arg, s->id, layer, err, errsz) < 0) {
		rc = -EIO;
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	if (s->state != POOL_S_CLAIMED) {
		pthread_mutex_unlock(&m->mu);
		snprintf(err, errsz, "sandbox %s is no longer claimed", id);
		rc = -ESTALE;
		goto out;
	}
	m->host.layer_unref(s->layer);
	s->layer = layer;
	layer = NULL;
	json_decref(s->layer_saved);
	s->layer_saved = saved;
	saved = NULL;
	strv_free(s->env, s->nenv);
	s->env = env;
	s->nenv = nenv;
	env = NULL;
	nenv = 0;
	seq = jrec(m, ev_of(m, "credentials", s, true));
	pthread_mutex_unlock(&m->mu);
	rc = jsync(m, seq ? seq : JSEQ_REFUSED);
	if (rc < 0) {
		/* The layer holds: undoing it would take the fleet back too, and
		 * the state file will have it. The tenant hears it all the same. */
		snprintf(err, errsz, "the journal could not record the change: %s; it holds "
			 "until sluice restarts", strerror(-rc));
		rc = -POOL_ERR_JOURNAL;
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	view_of(s, &v);
	cb(arg, &v);
	pthread_mutex_unlock(&m->mu);
out:
	if (layer)
		m->host.layer_unref(layer);
	if (old)
		m->host.layer_unref(old);
	json_decref(saved);
	strv_free(env, nenv);
	pool_mgr_put(m, &u);
	return rc;
}

int
pool_mgr_get(struct pool_mgr *m, const char *id, const char *tenant, pool_view_fn cb, void *arg)
{
	struct pool_claim_view v;
	struct pool_sbx *s;

	pthread_mutex_lock(&m->mu);
	s = claim_find(m, id, tenant);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return -ENOENT;
	}
	view_of(s, &v);
	cb(arg, &v);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

size_t
pool_mgr_each_claim(struct pool_mgr *m, const char *tenant, pool_view_fn cb, void *arg)
{
	struct pool_claim_view v;
	struct pool_sbx *s;
	size_t n = 0;

	pthread_mutex_lock(&m->mu);
	TAILQ_FOREACH(s, &m->all, all) {
		if (s->state != POOL_S_CLAIMED || !s->ready || !visible(s, tenant))
			continue;
		view_of(s, &v);
		cb(arg, &v);
		n++;
	}
	pthread_mutex_unlock(&m->mu);
	return n;
}

void
pool_mgr_each_pool(struct pool_mgr *m, void (*cb)(void *arg, const struct pool_info *i), void *arg)
{
	uint64_t now = mono_ms();

	pthread_mutex_lock(&m->mu);
	for (struct pstate *p = m->pools; p; p = p->next) {
		struct pool_info i = { 0 };

		i.name = p->name;
		i.draining = p->draining;
		i.backend = p->cp ? conf_backend_name(p->cp->backend) : NULL;
		i.warm = p->nwarm;
		i.target = p->target;
		i.booting = p->booting + p->cold;
		i.claimed = p->claimed;
		i.floor = p->cp ? p->cp->warm : 0;
		i.ceiling = p->cp ? p->cp->warm_max : 0;
		memcpy(i.claims, p->claims, sizeof(i.claims));
		i.boots = p->boots;
		i.boot_failures = p->boot_failures;
		memcpy(i.boot_buckets, p->buckets, sizeof(i.boot_buckets));
		i.boot_ms_sum = p->boot_ms_sum;
		i.lead_ms = p->lead.n ? p->lead.ms : 0;
		i.rate_per_s = pool_rate_at(&p->rate, now);
		i.backoff_ms = p->backoff_until > now ? p->backoff_until - now : 0;
		i.available = p->cp && p->cp->backend == CONF_BACKEND_RPC ? p->rpc_available : 1;
		i.unavailable_reason = i.available == 0 ? p->rpc_reason : NULL;
		cb(arg, &i);
	}
	pthread_mutex_unlock(&m->mu);
}

int
pool_mgr_use(struct pool_mgr *m, const char *id, const char *tenant, struct pool_use *out)
{
	struct pool_sbx *s;
	struct timespec until;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&m->mu);
	s = claim_find(m, id, tenant);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return -ENOENT;
	}
	if (s->state != POOL_S_CLAIMED) {
		pthread_mutex_unlock(&m->mu);
		return -ESTALE;
	}
	s->refs++;
	s->users++;
	pthread_mutex_unlock(&m->mu);

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += POOL_USE_WAIT_MS / 1000;
	rc = pthread_mutex_timedlock(&s->use_mu, &until);
	pthread_mutex_lock(&m->mu);
	if (rc == 0 && s->state != POOL_S_CLAIMED) {
		/* Released or reaped while this caller waited. */
		pthread_mutex_unlock(&s->use_mu);
		rc = ESTALE;
	}
	if (rc != 0) {
		s->users--;
		shed(s);
		sbx_unref_locked(m, s);
		pthread_mutex_unlock(&m->mu);
		return rc == ESTALE ? -ESTALE : -EBUSY;
	}
	out->s = s;
	out->agent = s->agent;
	out->env = (const char *const *)s->env;
	out->nenv = s->nenv;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

void
pool_mgr_put(struct pool_mgr *m, struct pool_use *u)
{
	if (!u->s)
		return;
	pthread_mutex_unlock(&u->s->use_mu);
	pthread_mutex_lock(&m->mu);
	u->s->users--;
	shed(u->s);
	sbx_unref_locked(m, u->s);
	pthread_mutex_unlock(&m->mu);
	u->s = NULL;
}

/* manager.c: warm pools, claims, leases and the reaper. See manager.h. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "agent_client.h"
#include "conf.h"
#include "manager.h"
#include "sandbox.h"
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

static bool
boot_same(const struct conf_pool *a, const struct conf_pool *b)
{
	return a->backend == b->backend && a->template_kind == b->template_kind &&
	       (a->template_kind != CONF_TEMPLATE_DIR ||
		strcmp(a->template_dir, b->template_dir) == 0) &&
	       strcmp(a->lane, b->lane) == 0 && a->memory_mb == b->memory_mb &&
	       a->cpus_milli == b->cpus_milli && a->pids == b->pids;
}

static void
bp_fill(struct boot_params *bp, const struct conf_pool *cp)
{
	memset(bp, 0, sizeof(*bp));
	bp->backend = cp->backend;
	bp->tkind = cp->template_kind;
	if (cp->template_dir)
		snprintf(bp->tdir, sizeof(bp->tdir), "%s", cp->template_dir);
	snprintf(bp->lane, sizeof(bp->lane), "%s", cp->lane);
	bp->limits.memory_mb = cp->memory_mb;
	bp->limits.cpus_milli = cp->cpus_milli;
	bp->limits.pids = cp->pids;
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
		    strcmp(c->dir, bp->tdir) == 0)
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
	c->be = sbx_backend_get(conf_backend_name(bp->backend));
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
	const char *env[POOL_NET_ENV_MAX];
	char addr[32], gw[INET_ADDRSTRLEN], e2[256];
	int rc, fd;

	rc = template_get(m, &s->bp, &be, &t, err, errsz);
	if (rc < 0)
		return rc;
	rc = m->host.attach(m->host.arg, s->id, s->bp.lane, &s->net, err, errsz);
	if (rc < 0)
		return rc;
	s->attached = true;
	spec.id = s->id;
	spec.limits = s->bp.limits;
	for (size_t i = 0; i < s->net.nenv; i++)
		env[i] = s->net.env[i];
	spec.env = env;
	spec.nenv = s->net.nenv;
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
static void
end_one(struct pool_mgr *m, struct pool_sbx *s)
{
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
}

/* Under m->mu: takes s out of its pool's counts as it starts ending. */
static void
begin_end(struct pool_sbx *s, enum pool_end why)
{
	struct pstate *p = s->pool;

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
			begin_end(s, POOL_END_DRAINED);
			end_async(m, s);
		} else {
			s->state = POOL_S_WARM;
			TAILQ_INSERT_TAIL(&p->warm, s, warm);
			s->on_warm = true;
			p->nwarm++;
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

/* ---- the pool set ----------------------------------------------------- */

static void
drain_warm(struct pool_mgr *m, struct pstate *p)
{
	struct pool_sbx *s;

	while ((s = TAILQ_FIRST(&p->warm))) {
		begin_end(s, POOL_END_DRAINED);
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

struct pool_mgr *
pool_mgr_new(const struct pool_host *host, struct conf *c, char *err, size_t errsz)
{
	struct pool_mgr *m = calloc(1, sizeof(*m));

	if (!m) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	m->host = *host;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->tpl_mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	TAILQ_INIT(&m->all);
	pool_mgr_set_conf(m, c);
	return m;
}

void
pool_mgr_free(struct pool_mgr *m)
{
	struct pool_sbx *s, *n;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	/* Boots in flight finish (and end themselves, m->stopping). */
	while (m->inflight)
		pthread_cond_wait(&m->cv, &m->mu);
	for (s = TAILQ_FIRST(&m->all); s; s = n) {
		n = TAILQ_NEXT(s, all);
		if (s->state == POOL_S_WARM || s->state == POOL_S_CLAIMED) {
			begin_end(s, POOL_END_SHUTDOWN);
			end_async(m, s);
		}
	}
	while (m->inflight)
		pthread_cond_wait(&m->cv, &m->mu);
	while ((s = TAILQ_FIRST(&m->all))) {
		TAILQ_REMOVE(&m->all, s, all);
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
	conf_unref(m->conf);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->tpl_mu);
	pthread_mutex_destroy(&m->mu);
	free(m);
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
			begin_end(s, POOL_END_REAPED);
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
			begin_end(s, POOL_END_DRAINED);
			end_async(m, s);
		}
		pp = &p->next;
	}
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
	s->state = POOL_S_ENDING;
	s->end = POOL_END_FAILED;
	pthread_mutex_unlock(&m->mu);
	end_one(m, s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
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
	}
	layer = m->host.layer_new(m->host.arg, c, cp, t, err, errsz);
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
	if (strv_dup(req->env, req->nenv, &s->env) < 0 ||
	    strv_dup(req->labels, req->nlabels, &s->labels) < 0) {
		m->host.layer_unref(layer);
		snprintf(err, errsz, "out of memory");
		rc = -ENOMEM;
		goto abort;
	}
	s->nenv = req->nenv;
	s->nlabels = req->nlabels;

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
	p->claims[s->tier]++;
	view_of(s, &v);
	cb(arg, &v);
	mlog(m, POOL_LOG_INFO, "claim %s: pool %s, tenant %s, tier %s, ttl %us", s->id, p->name,
	     t ? t->name : "-", pool_tier_name(s->tier), ttl);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
	conf_unref(c);
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

	pthread_mutex_lock(&m->mu);
	s = claim_find(m, id, tenant);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return -ENOENT;
	}
	if (s->state != POOL_S_CLAIMED) {
		*was = s->end;
		pthread_mutex_unlock(&m->mu);
		return s->end == POOL_END_RELEASED || s->end == POOL_END_REAPED ? 0 : -ENOENT;
	}
	begin_end(s, POOL_END_RELEASED);
	s->refs++;
	pthread_mutex_unlock(&m->mu);
	end_one(m, s);
	pthread_mutex_lock(&m->mu);
	sbx_unref_locked(m, s);
	pthread_mutex_unlock(&m->mu);
	mlog(m, POOL_LOG_INFO, "claim %s: released", id);
	*was = POOL_END_NONE;
	if (m->host.wake)
		m->host.wake(m->host.arg);
	return 0;
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

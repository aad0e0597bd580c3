/* claims.c: the pools manager's host. See claims.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "claims.h"
#include "conf.h"
#include "fleet.h"
#include "log.h"
#include "manager.h"
#include "policy.h"
#include "sandbox.h"

struct cjob {
	void (*fn)(void *);
	void *arg;
	struct cjob *next;
};

struct gw_claims {
	struct gw_fleet *fleet;
	struct pool_mgr *mgr;
	pthread_mutex_t mu;
	pthread_cond_t jobs_cv, tick_cv;
	struct cjob *head, *tail;
	bool tick_stop;                 /* the ticker ends */
	bool work_stop;                 /* the workers end, once the queue is empty */
	bool woken;
	pthread_t workers[GW_CLAIMS_WORKERS];
	size_t nworkers;
	pthread_t ticker;
	bool ticking;
	bool sbx_ready;
};

static void
on_log(void *arg, enum pool_log_level level, const char *msg)
{
	(void)arg;
	switch (level) {
	case POOL_LOG_ERR:
		gw_log_errx("%s", msg);
		break;
	case POOL_LOG_WARN:
		gw_log_warnx("%s", msg);
		break;
	case POOL_LOG_INFO:
		gw_log_info("%s", msg);
		break;
	default:
		gw_log(CONF_LOG_DEBUG, 0, "%s", msg);
		break;
	}
}

static void
on_sbx_log(void *arg, enum sbx_log_level level, const char *msg)
{
	on_log(arg, (enum pool_log_level)level, msg);
}

static int
on_submit(void *arg, void (*fn)(void *), void *job)
{
	struct gw_claims *g = arg;
	struct cjob *j = malloc(sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = job;
	j->next = NULL;
	pthread_mutex_lock(&g->mu);
	if (g->tail)
		g->tail->next = j;
	else
		g->head = j;
	g->tail = j;
	pthread_cond_signal(&g->jobs_cv);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static void
on_wake(void *arg)
{
	struct gw_claims *g = arg;

	pthread_mutex_lock(&g->mu);
	g->woken = true;
	pthread_cond_signal(&g->tick_cv);
	pthread_mutex_unlock(&g->mu);
}

/* attach (addr NULL: a new address) or re-adopt (the address it had). */
static int
attach_as(struct gw_claims *g, const char *id, const char *lane, const struct in_addr *addr,
	  struct pool_netinfo *out, char *err, size_t errsz)
{
	const struct conf *c = gw_fleet_conf(g->fleet);
	struct gw_fleet_info i;
	char env[GW_FLEET_ENV_MAX][GW_FLEET_ENV_LEN];
	int idx = gw_fleet_lane(g->fleet, lane), rc;

	if (idx < 0) {
		snprintf(err, errsz, "attach %s: no lane '%s' (lanes change on restart only)", id,
			 lane);
		return -EINVAL;
	}
	rc = addr ? gw_fleet_adopt(g->fleet, id, idx, *addr, &i, err, errsz)
		  : gw_fleet_attach(g->fleet, id, idx, &i, err, errsz);
	if (rc < 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->linked = i.linked;
	/* (resolv.conf has no port: another port is for clients that say so) */
	out->dns = i.linked && c->lanes[idx].door_dns == 53;
	out->addr = i.addr;
	out->gateway = i.gateway;
	out->prefix = i.prefix;
	snprintf(out->ifname, sizeof(out->ifname), "%s", i.ifname);
	snprintf(out->netns, sizeof(out->netns), "%s", c->daemon.fleet_netns);
	out->nenv = gw_fleet_env(&c->lanes[idx], i.gateway, env, GW_FLEET_ENV_MAX);
	if (out->nenv > POOL_NET_ENV_MAX)
		out->nenv = POOL_NET_ENV_MAX;
	for (size_t k = 0; k < out->nenv; k++) {
		/* GW_FLEET_ENV_LEN and the netinfo's slots are one size. */
		_Static_assert(sizeof(out->env[0]) >= GW_FLEET_ENV_LEN, "env slots");
		memcpy(out->env[k], env[k], GW_FLEET_ENV_LEN);
		out->env[k][GW_FLEET_ENV_LEN - 1] = 0;
	}
	return 0;
}

static int
on_attach(void *arg, const char *id, const char *lane, struct pool_netinfo *out, char *err,
	  size_t errsz)
{
	return attach_as(arg, id, lane, NULL, out, err, errsz);
}

static int
on_unlock(void *arg, const char *id, void *layer, char *err, size_t errsz)
{
	struct gw_claims *g = arg;

	return gw_fleet_unlock(g->fleet, id, layer, err, errsz);
}

static int
on_lock(void *arg, const char *id, char *err, size_t errsz)
{
	struct gw_claims *g = arg;

	return gw_fleet_lock(g->fleet, id, err, errsz);
}

static int
on_detach(void *arg, const char *id, char *err, size_t errsz)
{
	struct gw_claims *g = arg;

	return gw_fleet_detach(g->fleet, id, err, errsz);
}

static void *
on_layer_new(void *arg, const struct conf *c, const struct conf_pool *p,
	     const struct conf_tenant *t, const void *creds, char *err, size_t errsz)
{
	char e2[256];
	struct gw_policy *l;

	(void)arg;
	l = gw_policy_layer(c, p->policy, t, creds, e2, sizeof(e2));
	if (!l)
		snprintf(err, errsz, "pool %s: %s", p->name, e2);
	return l;
}

static void *
on_layer_recreds(void *arg, void *old, const void *creds, char *err, size_t errsz)
{
	(void)arg;
	return gw_policy_with_tenant(old, creds, err, errsz);
}

static const char *
on_layer_version(void *layer)
{
	return gw_policy_version(layer);
}

static json_t *
on_layer_save(void *layer)
{
	return gw_policy_save(layer);
}

static void *
on_layer_load(void *arg, const json_t *saved, char *err, size_t errsz)
{
	(void)arg;
	return gw_policy_load(saved, err, errsz);
}

static int
on_adopt_net(void *arg, const char *id, const char *lane, struct in_addr addr,
	     struct pool_netinfo *out, char *err, size_t errsz)
{
	struct gw_claims *g = arg;

	return attach_as(g, id, lane, &addr, out, err, errsz);
}

struct layer_env {
	char (*out)[POOL_LAYER_ENV_LEN];
	size_t n, max;
};

static void
add_placeholder(void *arg, const char *env, const char *sentinel)
{
	struct layer_env *e = arg;

	if (e->n < e->max)
		snprintf(e->out[e->n++], POOL_LAYER_ENV_LEN, "%s=%s", env, sentinel);
}

static size_t
on_layer_env(void *layer, char out[][POOL_LAYER_ENV_LEN], size_t max)
{
	struct layer_env e = { out, 0, max };

	gw_policy_placeholders(layer, add_placeholder, &e);
	return e.n;
}

static void *
on_layer_ref(void *layer)
{
	return gw_policy_ref(layer);
}

static void
on_layer_unref(void *layer)
{
	gw_policy_unref(layer);
}

static void *
worker_main(void *arg)
{
	struct gw_claims *g = arg;

	pthread_mutex_lock(&g->mu);
	for (;;) {
		struct cjob *j;

		while (!g->head && !g->work_stop)
			pthread_cond_wait(&g->jobs_cv, &g->mu);
		if (!g->head)
			break;
		j = g->head;
		g->head = j->next;
		if (!g->head)
			g->tail = NULL;
		pthread_mutex_unlock(&g->mu);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void *
ticker_main(void *arg)
{
	struct gw_claims *g = arg;
	uint64_t next = 0;

	pthread_mutex_lock(&g->mu);
	while (!g->tick_stop) {
		struct timespec ts;

		if (!g->woken && next) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(next / 1000);
			ts.tv_nsec += (long)(next % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&g->tick_cv, &g->mu, &ts);
		}
		if (g->tick_stop)
			break;
		g->woken = false;
		pthread_mutex_unlock(&g->mu);
		next = pool_mgr_tick(g->mgr);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

/* sluice-agent: the path given, else beside sluiced (an installed tree or
 * the build tree's agent/). */
static const char *
find_agent(const char *given, char *buf, size_t bufsz)
{
	static const char *const rel[] = { "sluice-agent", "../agent/sluice-agent",
					   "../lib/sluice/sluice-agent" };
	char self[PATH_MAX];
	ssize_t n;

	if (given)
		return given;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", self);
		snprintf(buf, bufsz, "%s/%s", dirname(dir), rel[i]);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

struct gw_claims *
gw_claims_start(struct conf *c, struct gw_fleet *f, const char *agent_path,
		const char *ca_pem, char *err, size_t errsz)
{
	struct gw_claims *g = calloc(1, sizeof(*g));
	struct sbx_init_opts io = { 0 };
	struct pool_host h = { 0 };
	char agent[PATH_MAX], cache[PATH_MAX], state[PATH_MAX];

	if (!g) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	g->fleet = f;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->jobs_cv, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&g->tick_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	io.log = on_sbx_log;
	io.agent_path = find_agent(agent_path, agent, sizeof(agent));
	if (!io.agent_path) {
		snprintf(err, errsz, "cannot find sluice-agent beside sluiced: give --agent PATH");
		goto fail;
	}
	snprintf(cache, sizeof(cache), "%s/templates", c->daemon.data_dir);
	io.cache_dir = cache;
	/* Each daemon's sandboxes under its own data_dir: a sweep at start
	 * never touches another daemon's. */
	snprintf(state, sizeof(state), "%s/sandboxes", c->daemon.data_dir);
	io.state_dir = state;
	if (sbx_init(&io, err, errsz) < 0)
		goto fail;
	g->sbx_ready = true;
	for (; g->nworkers < GW_CLAIMS_WORKERS; g->nworkers++)
		if (pthread_create(&g->workers[g->nworkers], NULL, worker_main, g) != 0) {
			snprintf(err, errsz, "cannot start the pool workers");
			goto fail;
		}
	h.arg = g;
	h.log = on_log;
	h.submit = on_submit;
	h.wake = on_wake;
	h.attach = on_attach;
	h.unlock = on_unlock;
	h.lock = on_lock;
	h.detach = on_detach;
	h.layer_new = on_layer_new;
	h.layer_recreds = on_layer_recreds;
	h.layer_ref = on_layer_ref;
	h.layer_unref = on_layer_unref;
	h.layer_version = on_layer_version;
	h.layer_save = on_layer_save;
	h.layer_load = on_layer_load;
	h.layer_env = on_layer_env;
	h.adopt_net = on_adopt_net;
	h.ca_pem = ca_pem;
	g->mgr = pool_mgr_new(&h, c, c->daemon.data_dir, err, errsz);
	if (!g->mgr)
		goto fail;
	if (pthread_create(&g->ticker, NULL, ticker_main, g) != 0) {
		snprintf(err, errsz, "cannot start the pool ticker");
		goto fail;
	}
	g->ticking = true;
	gw_log_info("pools: %zu in the set, agent %s, templates in %s", c->npools, io.agent_path,
		    cache);
	return g;
fail:
	gw_claims_stop(g, false);
	return NULL;
}

void
gw_claims_stop(struct gw_claims *g, bool end_sandboxes)
{
	if (!g)
		return;
	if (g->ticking) {
		pthread_mutex_lock(&g->mu);
		g->tick_stop = true;
		pthread_cond_broadcast(&g->tick_cv);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->ticker, NULL);
	}
	/* Every sandbox ends through the workers, which are still there. */
	pool_mgr_free(g->mgr, end_sandboxes);
	pthread_mutex_lock(&g->mu);
	g->work_stop = true;
	pthread_cond_broadcast(&g->jobs_cv);
	pthread_mutex_unlock(&g->mu);
	for (size_t i = 0; i < g->nworkers; i++)
		pthread_join(g->workers[i], NULL);
	if (g->sbx_ready)
		sbx_fini();
	pthread_cond_destroy(&g->tick_cv);
	pthread_cond_destroy(&g->jobs_cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

struct pool_mgr *
gw_claims_mgr(struct gw_claims *g)
{
	return g->mgr;
}

struct gw_fleet *
gw_claims_fleet(struct gw_claims *g)
{
	return g->fleet;
}

/* fleet.c: the fleet namespace, its lanes and the sandbox registry (see
 * fleet.h for the model and lanes.h for the doors' side).
 *
 * Everything here runs on the main thread except gw_lane_who(), which the
 * workers call for every lane connection: the registry is guarded by a
 * read-write lock, written only in short sections after the nftables batch
 * for the change has been committed, so a door never sees a sandbox as
 * unlocked before the kernel lets its packets in. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakeip.h"
#include "fleet.h"
#include "lanes.h"
#include "log.h"
#include "nft.h"
#include "policy.h"
#include "rtnl.h"

#define NETNS_RUN_DIR "/run/netns"

/* ---- the address allocator ------------------------------------------- */

#define POOL_MAX_SIZE 65536u

int
gw_addr_pool_init(struct gw_addr_pool *p, struct in_addr subnet, unsigned prefix)
{
	uint32_t size;

	memset(p, 0, sizeof(*p));
	if (prefix < 8 || prefix > 30)
		return -EINVAL;
	size = prefix >= 16 ? 1u << (32 - prefix) : POOL_MAX_SIZE;
	p->base = ntohl(subnet.s_addr) & ~((1u << (32 - prefix)) - 1);
	p->size = size;
	p->bits = calloc((size + 63) / 64, sizeof(uint64_t));
	if (!p->bits)
		return -ENOMEM;
	/* Offsets 0 (network), 1 (gateway) and, for a whole subnet, the last
	 * (broadcast) are never handed out: mark them taken. */
	p->bits[0] |= 3;
	p->whole = prefix >= 16;
	if (p->whole)
		p->bits[(size - 1) / 64] |= 1ull << ((size - 1) % 64);
	p->cursor = 2;
	return 0;
}

void
gw_addr_pool_fini(struct gw_addr_pool *p)
{
	free(p->bits);
	memset(p, 0, sizeof(*p));
}

struct in_addr
gw_addr_pool_gateway(const struct gw_addr_pool *p)
{
	struct in_addr a = { .s_addr = htonl(p->base + 1) };

	return a;
}

static bool
pool_bit(const struct gw_addr_pool *p, uint32_t off)
{
	return p->bits[off / 64] & (1ull << (off % 64));
}

int
gw_addr_pool_take(struct gw_addr_pool *p, struct in_addr *out)
{
	if (!p->bits)
		return -EINVAL;
	for (uint32_t n = 0; n < p->size; n++) {
		uint32_t off = p->cursor;

		p->cursor = p->cursor + 1 < p->size ? p->cursor + 1 : 0;
		if (pool_bit(p, off))
			continue;
		p->bits[off / 64] |= 1ull << (off % 64);
		p->used++;
		out->s_addr = htonl(p->base + off);
		return 0;
	}
	return -ENOSPC;
}

static int
pool_offset(const struct gw_addr_pool *p, struct in_addr a, uint32_t *off)
{
	uint32_t h = ntohl(a.s_addr);

	if (!p->bits || h - p->base >= p->size)
		return -ERANGE;
	*off = h - p->base;
	return 0;
}

int
gw_addr_pool_claim(struct gw_addr_pool *p, struct in_addr a)
{
	uint32_t off;

	if (pool_offset(p, a, &off) < 0 || off < 2 || (p->whole && off == p->size - 1))
		return -ERANGE;
	if (pool_bit(p, off))
		return -EEXIST;
	p->bits[off / 64] |= 1ull << (off % 64);
	p->used++;
	return 0;
}

void
gw_addr_pool_put(struct gw_addr_pool *p, struct in_addr a)
{
	uint32_t off;

	if (pool_offset(p, a, &off) < 0 || off < 2 || (p->whole && off == p->size - 1) ||
	    !pool_bit(p, off))
		return;
	p->bits[off / 64] &= ~(1ull << (off % 64));
	p->used--;
}

/* ---- the environment ------------------------------------------------- */

size_t
gw_fleet_env(const struct conf_lane *l, struct in_addr gateway, char out[][GW_FLEET_ENV_LEN],
	     size_t max)
{
	static const char *const no_proxy = "localhost,127.0.0.1,::1";
	char g[INET_ADDRSTRLEN];
	char http[64] = "", socks[64] = "";
	const char *names[2][4] = {
		{ "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY" },
		{ "http_proxy", "https_proxy", "all_proxy", "no_proxy" },
	};
	size_t n = 0;

	if (!l || !l->egress || (!l->door_forward && !l->door_socks))
		return 0;
	inet_ntop(AF_INET, &gateway, g, sizeof(g));
	if (l->door_forward)
		snprintf(http, sizeof(http), "http://%s:%u", g, l->door_forward);
	/* socks5h: the name goes to the gateway, which resolves it. */
	if (l->door_socks)
		snprintf(socks, sizeof(socks), "socks5h://%s:%u", g, l->door_socks);
	for (int c = 0; c < 2; c++) {
		const char *vals[4] = { http, http, socks[0] ? socks : http, no_proxy };

		for (int k = 0; k < 4; k++) {
			if (!vals[k][0] || n >= max)
				continue;
			snprintf(out[n++], GW_FLEET_ENV_LEN, "%s=%s", names[c][k], vals[k]);
		}
	}
	return n;
}

/* ---- the registry ---------------------------------------------------- */

struct fent {
	struct gw_fleet_info info;
	struct gw_policy *layer;        /* unlocked: the pinned layer */
	/* The DNS door's names for it (made at its first answered query,
	 * gone with the entry: a claim's names end with it). */
	pthread_mutex_t fk_mu;
	struct gw_fakeip *fakeip;
	struct fent *prev, *next;       /* attach order */
	struct fent *hnext;             /* address hash chain (linked only) */
};

#define HASH_BUCKETS 4096

static void
fent_free(struct fent *e)
{
	if (!e)
		return;
	gw_fakeip_free(e->fakeip);
	pthread_mutex_destroy(&e->fk_mu);
	free(e);
}

struct fleet_lane {
	const struct conf_lane *conf;
	struct gw_addr_pool pool;
	struct fw_lane nft;
};

struct gw_fleet {
	const struct conf *conf;
	char name[80];
	char path[128];                 /* /run/netns/<name> */
	int nsfd;
	int nl;                         /* NETLINK_ROUTE in the fleet */
	struct fw_ctx *nft;            /* NETLINK_NETFILTER in the fleet */
	struct fleet_lane *lanes;
	size_t nlanes;
	struct fent *head, *tail;
	size_t count;
};

/* The doors' view: one fleet per process. */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t op_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fent *reg_hash[HASH_BUCKETS];

static unsigned
addr_hash(struct in_addr a)
{
	uint32_t h = ntohl(a.s_addr);

	h ^= h >> 16;
	h *= 0x45d9f3bu;
	h ^= h >> 16;
	return h & (HASH_BUCKETS - 1);
}

static struct fent *
find_id(const struct gw_fleet *f, const char *id)
{
	for (struct fent *e = f->head; e; e = e->next)
		if (strcmp(e->info.id, id) == 0)
			return e;
	return NULL;
}

/* The attached sandbox `id`, or NULL with "<op> <id>: not attached". */
static struct fent *
find_attached(const struct gw_fleet *f, const char *id, const char *op, char *err, size_t errsz)
{
	struct fent *e = id ? find_id(f, id) : NULL;

	if (!e)
		snprintf(err, errsz, "%s %s: not attached", op, id ? id : "(null)");
	return e;
}

/* Takes a linked entry out of the address hash; the caller holds the
 * write lock. */
static void
unhash(struct fent *e)
{
	struct fent **pp;

	if (!e->info.linked)
		return;
	pp = &reg_hash[addr_hash(e->info.addr)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
}

static bool
id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > GW_FLEET_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

static void
to_fw(const struct gw_fleet *f, const struct fent *e, struct fw_sbx *s)
{
	memset(s, 0, sizeof(*s));
	memcpy(s->ifname, e->info.ifname, sizeof(s->ifname));
	s->addr = e->info.addr;
	s->lane = &f->lanes[e->info.lane].nft;
	s->unlocked = e->info.unlocked;
}

/* Builds one operation's batch for e and commits it. */
static int
commit_op(struct gw_fleet *f, int (*build)(struct fw_batch *, const struct fw_sbx *),
	  const struct fent *e, const char *what, char *err, size_t errsz)
{
	struct fw_batch *b = fw_batch_new();
	struct fw_sbx s;
	char nerr[256];
	int rc;

	if (!b) {
		snprintf(err, errsz, "%s %s: out of memory", what, e->info.id);
		return -ENOMEM;
	}
	to_fw(f, e, &s);
	rc = build(b, &s);
	if (rc == 0)
		rc = fw_commit(f->nft, b, nerr, sizeof(nerr));
	else
		snprintf(nerr, sizeof(nerr), "cannot build the batch: %s", strerror(-rc));
	fw_batch_free(b);
	if (rc < 0)
		snprintf(err, errsz, "%s %s: nftables: %s", what, e->info.id, nerr);
	return rc;
}

/* Allocates e's address and link name. An address whose link still
 * exists in the fleet (a sandbox that outlived a daemon which did not
 * hand it back) is skipped and stays taken: a new sandbox must never be
 * given the name, and so the identity, of one still running. */
static int
take_address(struct gw_fleet *f, struct fleet_lane *fl, struct fent *e)
{
	for (;;) {
		int rc = gw_addr_pool_take(&fl->pool, &e->info.addr);

		if (rc < 0)
			return rc;
		fw_ifname(e->info.addr, e->info.ifname);
		if (fw_rtnl_ifindex(f->nl, e->info.ifname) < 0)
			return 0;
		gw_log_warnx("fleet: lane '%s': %s still has a link (%s) from before: not reusing it",
			     fl->conf->name, inet_ntoa(e->info.addr), e->info.ifname);
	}
}

static int
fleet_attach(struct gw_fleet *f, const char *id, int lane, const struct in_addr *want,
	     struct gw_fleet_info *out, char *err, size_t errsz)
{
	struct fleet_lane *fl;
	struct fent *e;
	int rc;

	if (!id_ok(id)) {
		snprintf(err, errsz, "attach: bad id (1-%d of [A-Za-z0-9_-])", GW_FLEET_ID_MAX);
		return -EINVAL;
	}
	if (lane < 0 || (size_t)lane >= f->nlanes) {
		snprintf(err, errsz, "attach %s: no such lane", id);
		return -EINVAL;
	}
	if ((e = find_id(f, id))) {
		if (e->info.lane != lane) {
			snprintf(err, errsz, "attach %s: already attached to lane '%s'", id,
				 e->info.lane_name);
			return -EEXIST;
		}
		if (e->info.linked && (rc = commit_op(f, fw_build_attach, e, "attach", err, errsz)) < 0)
			return rc;
		if (out)
			*out = e->info;
		return 0;
	}
	fl = &f->lanes[lane];
	if (!(e = calloc(1, sizeof(*e)))) {
		snprintf(err, errsz, "attach %s: out of memory", id);
		return -ENOMEM;
	}
	pthread_mutex_init(&e->fk_mu, NULL);
	snprintf(e->info.id, sizeof(e->info.id), "%s", id);
	e->info.lane = lane;
	e->info.lane_name = fl->conf->name;
	e->info.prefix = fl->conf->subnet.prefix;
	e->info.gateway = gw_addr_pool_gateway(&fl->pool);
	e->info.linked = fl->conf->egress;
	if (e->info.linked && want) {
		/* Re-adoption: the sandbox keeps the address (and the link
		 * named after it) it had. */
		if ((rc = gw_addr_pool_claim(&fl->pool, *want)) < 0) {
			snprintf(err, errsz, "adopt %s: %s is %s on lane '%s'", id, inet_ntoa(*want),
				 rc == -EEXIST ? "taken" : "not a sandbox address", fl->conf->name);
			free(e);
			return rc;
		}
		e->info.addr = *want;
		fw_ifname(e->info.addr, e->info.ifname);
		if ((rc = commit_op(f, fw_build_attach, e, "attach", err, errsz)) < 0) {
			gw_addr_pool_put(&fl->pool, e->info.addr);
			free(e);
			return rc;
		}
	} else if (e->info.linked) {
		if ((rc = take_address(f, fl, e)) < 0) {
			snprintf(err, errsz, "attach %s: lane '%s' has no address left", id,
				 fl->conf->name);
			free(e);
			return rc;
		}
		if ((rc = commit_op(f, fw_build_attach, e, "attach", err, errsz)) < 0) {
			gw_addr_pool_put(&fl->pool, e->info.addr);
			free(e);
			return rc;
		}
	}
	pthread_rwlock_wrlock(&reg_lock);
	e->prev = f->tail;
	if (f->tail)
		f->tail->next = e;
	else
		f->head = e;
	f->tail = e;
	f->count++;
	if (e->info.linked) {
		unsigned h = addr_hash(e->info.addr);

		e->hnext = reg_hash[h];
		reg_hash[h] = e;
	}
	pthread_rwlock_unlock(&reg_lock);
	if (out)
		*out = e->info;
	return 0;
}

static int
fleet_unlock(struct gw_fleet *f, const char *id, struct gw_policy *layer, char *err,
		size_t errsz)
{
	struct fent *e = find_attached(f, id, "unlock", err, errsz);
	struct gw_policy *old;
	int rc;

	if (!e)
		return -ENOENT;
	if (!layer) {
		snprintf(err, errsz, "unlock %s: no policy layer", id);
		return -EINVAL;
	}
	if (e->info.linked && (rc = commit_op(f, fw_build_unlock, e, "unlock", err, errsz)) < 0)
		return rc;
	gw_policy_ref(layer);
	pthread_rwlock_wrlock(&reg_lock);
	old = e->layer;
	e->layer = layer;
	e->info.unlocked = true;
	snprintf(e->info.policy, sizeof(e->info.policy), "%s", gw_policy_name(layer));
	snprintf(e->info.version, sizeof(e->info.version), "%s", gw_policy_version(layer));
	pthread_rwlock_unlock(&reg_lock);
	gw_policy_unref(old);
	return 0;
}

/* Marks e locked in the registry (after the kernel has been told). */
static void
mark_locked(struct fent *e)
{
	struct gw_policy *old;

	pthread_rwlock_wrlock(&reg_lock);
	old = e->layer;
	e->layer = NULL;
	e->info.unlocked = false;
	e->info.policy[0] = e->info.version[0] = 0;
	pthread_rwlock_unlock(&reg_lock);
	gw_policy_unref(old);
}

static int
fleet_lock(struct gw_fleet *f, const char *id, char *err, size_t errsz)
{
	struct fent *e = find_attached(f, id, "lock", err, errsz);
	int rc;

	if (!e)
		return -ENOENT;
	if (e->info.linked && (rc = commit_op(f, fw_build_lock, e, "lock", err, errsz)) < 0)
		return rc;
	mark_locked(e);
	return 0;
}

static int
fleet_detach(struct gw_fleet *f, const char *id, char *err, size_t errsz)
{
	struct fent *e = find_attached(f, id, "detach", err, errsz);
	int rc;

	if (!e)
		return -ENOENT;
	if (e->info.linked && (rc = commit_op(f, fw_build_detach, e, "detach", err, errsz)) < 0)
		return rc;
	mark_locked(e);
	pthread_rwlock_wrlock(&reg_lock);
	unhash(e);
	if (e->prev)
		e->prev->next = e->next;
	else
		f->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		f->tail = e->prev;
	f->count--;
	pthread_rwlock_unlock(&reg_lock);
	if (e->info.linked)
		gw_addr_pool_put(&f->lanes[e->info.lane].pool, e->info.addr);
	fent_free(e);
	return 0;
}

static void
fill_counters(struct gw_fleet *f, struct gw_fleet_info *i)
{
	struct fw_counters n;

	if (i->linked && fw_counters_get(f->nft, i->addr, &n) == 0) {
		i->tx_packets = n.tx_packets;
		i->tx_bytes = n.tx_bytes;
		i->rx_packets = n.rx_packets;
		i->rx_bytes = n.rx_bytes;
	}
}

static int
fleet_get(struct gw_fleet *f, const char *id, struct gw_fleet_info *out)
{
	struct fent *e = id ? find_id(f, id) : NULL;

	if (!e)
		return -ENOENT;
	*out = e->info;
	fill_counters(f, out);
	return 0;
}

static size_t
fleet_each(struct gw_fleet *f, void (*fn)(void *arg, const struct gw_fleet_info *i), void *arg)
{
	size_t n = 0;

	for (struct fent *e = f->head; e; e = e->next, n++) {
		struct gw_fleet_info i = e->info;

		fill_counters(f, &i);
		fn(arg, &i);
	}
	return n;
}

/* The registry's changes and the kernel batches are made by one caller at
 * a time (the API's threads, the pools' workers, the control socket). */
int
gw_fleet_attach(struct gw_fleet *f, const char *id, int lane, struct gw_fleet_info *out,
		char *err, size_t errsz)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_attach(f, id, lane, NULL, out, err, errsz);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

int
gw_fleet_adopt(struct gw_fleet *f, const char *id, int lane, struct in_addr addr,
	       struct gw_fleet_info *out, char *err, size_t errsz)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_attach(f, id, lane, &addr, out, err, errsz);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

int
gw_fleet_unlock(struct gw_fleet *f, const char *id, struct gw_policy *layer, char *err,
		size_t errsz)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_unlock(f, id, layer, err, errsz);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

int
gw_fleet_lock(struct gw_fleet *f, const char *id, char *err, size_t errsz)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_lock(f, id, err, errsz);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

int
gw_fleet_detach(struct gw_fleet *f, const char *id, char *err, size_t errsz)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_detach(f, id, err, errsz);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

int
gw_fleet_get(struct gw_fleet *f, const char *id, struct gw_fleet_info *out)
{
	int rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_get(f, id, out);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

size_t
gw_fleet_each(struct gw_fleet *f, void (*fn)(void *arg, const struct gw_fleet_info *i), void *arg)
{
	size_t rc;

	pthread_mutex_lock(&op_mu);
	rc = fleet_each(f, fn, arg);
	pthread_mutex_unlock(&op_mu);
	return rc;
}

/* ---- the doors' lookup (lanes.h) ------------------------------------- */

int
gw_lane_who(int lane, const struct sockaddr *sa, struct gw_who *who)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;
	struct in_addr a;
	struct fent *e;
	int rc = -ENOENT;

	memset(who, 0, sizeof(*who));
	if (sa->sa_family != AF_INET)
		return -ENOENT;
	a = sin->sin_addr;
	pthread_rwlock_rdlock(&reg_lock);
	for (e = reg_hash[addr_hash(a)]; e; e = e->hnext) {
		if (e->info.addr.s_addr != a.s_addr || e->info.lane != lane)
			continue;
		snprintf(who->name, sizeof(who->name), "%s", e->info.id);
		if (e->info.unlocked && e->layer) {
			who->policy = gw_policy_ref(e->layer);
			rc = 0;
		} else {
			rc = -EACCES;
		}
		break;
	}
	pthread_rwlock_unlock(&reg_lock);
	return rc;
}

void
gw_who_clear(struct gw_who *who)
{
	gw_policy_unref(who->policy);
	who->policy = NULL;
}

/* ---- the DNS door's synthetic addresses -------------------------------- */

/* Per sandbox: 198.18.0.1 + 2048 addresses (inside the lanes' dnat range,
 * 198.18.0.0/15), 512 names held at a time, a name's address kept 10
 * minutes past its last use (fakeip.h). */
#define FAKEIP_BASE  0xc6120001u
#define FAKEIP_SIZE  2048u
#define FAKEIP_NAMES 512u
#define FAKEIP_HOLD_MS (10u * 60 * 1000)

/* The unlocked sandbox at sa on lane, under reg_lock (read). */
static struct fent *
lane_entry(int lane, const struct sockaddr *sa, int *rc)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;
	struct fent *e;

	*rc = -ENOENT;
	if (sa->sa_family != AF_INET)
		return NULL;
	for (e = reg_hash[addr_hash(sin->sin_addr)]; e; e = e->hnext) {
		if (e->info.addr.s_addr != sin->sin_addr.s_addr || e->info.lane != lane)
			continue;
		*rc = e->info.unlocked && e->layer ? 0 : -EACCES;
		return *rc == 0 ? e : NULL;
	}
	return NULL;
}

int
gw_lane_fakeip_get(int lane, const struct sockaddr *sa, const char *name, uint64_t now_ms,
		   struct in_addr *out)
{
	struct fent *e;
	uint32_t a = 0;
	int rc;

	pthread_rwlock_rdlock(&reg_lock);
	if ((e = lane_entry(lane, sa, &rc))) {
		pthread_mutex_lock(&e->fk_mu);
		if (!e->fakeip &&
		    !(e->fakeip = gw_fakeip_new(FAKEIP_BASE, FAKEIP_SIZE, FAKEIP_NAMES, FAKEIP_HOLD_MS)))
			rc = -ENOMEM;
		else
			rc = gw_fakeip_get(e->fakeip, name, now_ms, &a);
		pthread_mutex_unlock(&e->fk_mu);
	}
	pthread_rwlock_unlock(&reg_lock);
	out->s_addr = htonl(a);
	return rc;
}

int
gw_lane_fakeip_name(int lane, const struct sockaddr *sa, struct in_addr dst, uint64_t now_ms,
		    char out[GW_FAKEIP_NAME_MAX + 1])
{
	struct fent *e;
	int rc;

	out[0] = '\0';
	pthread_rwlock_rdlock(&reg_lock);
	if ((e = lane_entry(lane, sa, &rc))) {
		pthread_mutex_lock(&e->fk_mu);
		if (!e->fakeip || !gw_fakeip_name(e->fakeip, ntohl(dst.s_addr), now_ms, out))
			rc = -ENOENT;
		pthread_mutex_unlock(&e->fk_mu);
	}
	pthread_rwlock_unlock(&reg_lock);
	return rc;
}

/* ---- the namespace --------------------------------------------------- */

/* Runs fn(arg) with the calling thread inside the network namespace nsfd,
 * then comes back. fn's result, or -errno if entering failed. */
static int
in_netns(int nsfd, int (*fn)(void *), void *arg)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), rc;

	if (self < 0)
		return -errno;
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		rc = -errno;
		close(self);
		return rc;
	}
	rc = fn(arg);
	/* Coming back to where we were cannot fail; if it did, this thread
	 * would make its next socket in the wrong place. */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	return rc;
}

struct mksock {
	int domain, type, protocol;
};

static int
mksock_fn(void *arg)
{
	struct mksock *m = arg;
	int fd = socket(m->domain, m->type | SOCK_CLOEXEC, m->protocol);

	return fd < 0 ? -errno : fd;
}

const struct conf *
gw_fleet_conf(const struct gw_fleet *f)
{
	return f->conf;
}

int
gw_fleet_lane(const struct gw_fleet *f, const char *name)
{
	for (size_t i = 0; name && i < f->nlanes; i++)
		if (strcmp(f->lanes[i].conf->name, name) == 0)
			return (int)i;
	return -1;
}

int
gw_fleet_nsfd(const struct gw_fleet *f)
{
	return f->nsfd;
}

int
gw_fleet_socket(const struct gw_fleet *f, int domain, int type, int protocol)
{
	struct mksock m = { domain, type, protocol };

	return in_netns(f->nsfd, mksock_fn, &m);
}

/* /run/netns must be a shared mount point, as iproute2 makes it, so that
 * a namespace bound there is seen from every mount namespace. */
static int
netns_dir_ready(char *err, size_t errsz)
{
	if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errsz, "cannot create %s: %s", NETNS_RUN_DIR, strerror(errno));
		return -errno;
	}
	if (mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) == 0)
		return 0;
	if (errno != EINVAL ||
	    mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0 ||
	    mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		snprintf(err, errsz, "cannot make %s a shared mount point: %s", NETNS_RUN_DIR,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* Opens the named namespace, creating it when absent: fd or -errno. */
static int
netns_open(struct gw_fleet *f, bool *created, char *err, size_t errsz)
{
	int fd, self, rc;

	*created = false;
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		struct stat st;

		if (ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET)
			return fd;
		/* An empty file with nothing mounted on it is the name of a
		 * namespace that is gone (its mount lived in a mount
		 * namespace that ended): make it afresh. Anything else is
		 * not ours to replace. */
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != 0) {
			snprintf(err, errsz, "%s exists but is not a network namespace", f->path);
			close(fd);
			return -EINVAL;
		}
		close(fd);
		gw_log_warnx("fleet: %s names no namespace any more: making a new one", f->path);
		if (unlink(f->path) < 0) {
			snprintf(err, errsz, "cannot remove the stale %s: %s", f->path, strerror(errno));
			return -errno;
		}
		errno = ENOENT;
	}
	if (errno != ENOENT) {
		snprintf(err, errsz, "cannot open %s: %s", f->path, strerror(errno));
		return -errno;
	}
	if ((rc = netns_dir_ready(err, errsz)) < 0)
		return rc;
	fd = open(f->path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errsz, "cannot create %s: %s", f->path, strerror(errno));
		return -errno;
	}
	close(fd);
	/* A new namespace for this thread only, bound to the name, then back. */
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || unshare(CLONE_NEWNET) < 0) {
		rc = -errno;
		snprintf(err, errsz, "cannot create a network namespace: %s", strerror(errno));
		if (self >= 0)
			close(self);
		unlink(f->path);
		return rc;
	}
	rc = mount("/proc/thread-self/ns/net", f->path, "none", MS_BIND, NULL) < 0 ? -errno : 0;
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	if (rc < 0) {
		snprintf(err, errsz, "cannot bind the namespace to %s: %s", f->path, strerror(-rc));
		unlink(f->path);
		return rc;
	}
	*created = true;
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errsz, "cannot open %s: %s", f->path, strerror(errno));
		return -errno;
	}
	return fd;
}

static int
write_sysctl(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, v, strlen(v)) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Inside the fleet: no forwarding, no IPv6 (lanes are IPv4; a guest's
 * link-local IPv6 would otherwise reach the namespace's own stack), and
 * the two netlink sockets. */
static int
fleet_inside(void *arg)
{
	struct gw_fleet *f = arg;
	static const struct {
		const char *path, *v;
	} sys[] = {
		{ "/proc/sys/net/ipv4/ip_forward", "0" },
		{ "/proc/sys/net/ipv6/conf/all/disable_ipv6", "1" },
		{ "/proc/sys/net/ipv6/conf/default/disable_ipv6", "1" },
	};
	char nerr[256];

	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++) {
		int rc = write_sysctl(sys[i].path, sys[i].v);

		if (rc < 0 && !(rc == -ENOENT && strstr(sys[i].path, "ipv6")))
			gw_log_warnx("fleet: cannot set %s: %s", sys[i].path, strerror(-rc));
	}
	f->nft = fw_open(nerr, sizeof(nerr));
	if (!f->nft) {
		gw_log_errx("fleet: nftables: %s", nerr);
		return -EPROTO;
	}
	return 0;
}

/* The holder link with every egress lane's gateway address, made afresh
 * so that addresses of lanes no longer configured go away. */
static int
fleet_links(struct gw_fleet *f, char *err, size_t errsz)
{
	int rc;

	if ((rc = fw_rtnl_link_up(f->nl, "lo", 0)) < 0) {
		snprintf(err, errsz, "fleet: lo up: %s", strerror(-rc));
		return rc;
	}
	rc = fw_rtnl_link_del(f->nl, GW_FLEET_LINK);
	if (rc < 0 && rc != -ENODEV) {
		snprintf(err, errsz, "fleet: removing %s: %s", GW_FLEET_LINK, strerror(-rc));
		return rc;
	}
	/* A dummy link, or where the kernel has none a bridge without ports:
	 * either holds addresses the doors can bind to and carries nothing. */
	rc = fw_rtnl_kind_add(f->nl, GW_FLEET_LINK, "dummy");
	if (rc == -EOPNOTSUPP)
		rc = fw_rtnl_kind_add(f->nl, GW_FLEET_LINK, "bridge");
	if (rc < 0 || (rc = fw_rtnl_link_up(f->nl, GW_FLEET_LINK, 0)) < 0) {
		snprintf(err, errsz, "fleet: creating %s: %s", GW_FLEET_LINK, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < f->nlanes; i++) {
		char cidr[INET_ADDRSTRLEN + 4];
		struct in_addr g;

		if (!f->lanes[i].conf->egress)
			continue;
		g = gw_addr_pool_gateway(&f->lanes[i].pool);
		inet_ntop(AF_INET, &g, cidr, INET_ADDRSTRLEN);
		strcat(cidr, "/32");
		if ((rc = fw_rtnl_addr_add(f->nl, GW_FLEET_LINK, cidr)) < 0) {
			snprintf(err, errsz, "fleet: lane '%s': address %s: %s",
				 f->lanes[i].conf->name, cidr, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int
fleet_lanes(struct gw_fleet *f, char *err, size_t errsz)
{
	const struct conf *c = f->conf;

	f->lanes = calloc(c->nlanes ? c->nlanes : 1, sizeof(*f->lanes));
	if (!f->lanes) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	f->nlanes = c->nlanes;
	for (size_t i = 0; i < c->nlanes; i++) {
		const struct conf_lane *l = &c->lanes[i];
		struct fleet_lane *fl = &f->lanes[i];
		struct fw_lane *n = &fl->nft;
		struct in_addr sub;
		int rc;

		fl->conf = l;
		memcpy(&sub, l->subnet.addr, 4);
		rc = gw_addr_pool_init(&fl->pool, sub, l->subnet.prefix);
		if (rc < 0) {
			snprintf(err, errsz, "lane '%s': %s", l->name, strerror(-rc));
			return rc;
		}
		n->name = l->name;
		n->subnet = sub;
		n->prefix = (uint8_t)l->subnet.prefix;
		n->gateway = gw_addr_pool_gateway(&fl->pool);
		if (l->door_forward)
			n->ports[n->nports++] = l->door_forward;
		if (l->door_socks)
			n->ports[n->nports++] = l->door_socks;
		if (l->door_intercept)
			n->ports[n->nports++] = l->door_intercept;
		if (l->door_dns)
			n->ports[n->nports++] = l->door_dns;
		if (l->door_names) {
			n->ports[n->nports++] = l->door_names;
			n->names_port = l->door_names;
			n->synth.s_addr = htonl(0xc6120000u);   /* 198.18.0.0/15 */
			n->synth_prefix = 15;
		}
		if (l->transparent) {
			n->http_port = l->door_forward;
			n->tls_port = l->door_intercept;
		}
	}
	return 0;
}

struct seed {
	struct fw_sbx *s;
	size_t n;
};

/* Counters read from the table before it is replaced start the new one. */
static int
seed_one(void *arg, struct in_addr a, const struct fw_counters *c)
{
	struct seed *x = arg;

	for (size_t i = 0; i < x->n; i++)
		if (x->s[i].addr.s_addr == a.s_addr)
			x->s[i].start = *c;
	return 0;
}

/* The whole table from the registry, in one batch. */
static int
fleet_reconcile(struct gw_fleet *f, char *err, size_t errsz)
{
	struct fw_lane *lanes = calloc(f->nlanes ? f->nlanes : 1, sizeof(*lanes));
	struct fw_sbx *s = calloc(f->count ? f->count : 1, sizeof(*s));
	struct fw_batch *b = fw_batch_new();
	char nerr[256];
	size_t n = 0;
	int rc = -ENOMEM;

	if (!lanes || !s || !b) {
		snprintf(err, errsz, "fleet: out of memory");
		goto out;
	}
	for (size_t i = 0; i < f->nlanes; i++)
		lanes[i] = f->lanes[i].nft;
	for (struct fent *e = f->head; e; e = e->next)
		if (e->info.linked)
			to_fw(f, e, &s[n++]);
	if (n) {
		struct seed x = { s, n };

		fw_counters_dump(f->nft, seed_one, &x);
	}
	rc = fw_build_reconcile(b, lanes, f->nlanes, s, n);
	if (rc == 0)
		rc = fw_commit(f->nft, b, nerr, sizeof(nerr));
	else
		snprintf(nerr, sizeof(nerr), "cannot build the batch: %s", strerror(-rc));
	if (rc < 0)
		snprintf(err, errsz, "fleet: nftables reconcile: %s", nerr);
out:
	fw_batch_free(b);
	free(s);
	free(lanes);
	return rc;
}

struct gw_fleet *
gw_fleet_open(const struct conf *c, char *err, size_t errsz)
{
	struct gw_fleet *f = calloc(1, sizeof(*f));
	bool created;
	int rc;

	if (!f) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	f->conf = c;
	f->nsfd = f->nl = -1;
	snprintf(f->name, sizeof(f->name), "%s", c->daemon.fleet_netns);
	snprintf(f->path, sizeof(f->path), NETNS_RUN_DIR "/%s", f->name);
	if (fleet_lanes(f, err, errsz) < 0)
		goto fail;
	if ((f->nsfd = netns_open(f, &created, err, errsz)) < 0)
		goto fail;
	if ((rc = in_netns(f->nsfd, fleet_inside, f)) < 0) {
		snprintf(err, errsz, "fleet namespace %s: cannot set it up: %s", f->name,
			 strerror(-rc));
		goto fail;
	}
	if ((f->nl = fw_rtnl_open_in(f->nsfd)) < 0) {
		snprintf(err, errsz, "fleet: netlink: %s", strerror(-f->nl));
		goto fail;
	}
	if (fleet_links(f, err, errsz) < 0 || fleet_reconcile(f, err, errsz) < 0)
		goto fail;
	gw_log_info("fleet namespace %s %s (%zu lanes)", f->name, created ? "created" : "adopted",
		    f->nlanes);
	return f;
fail:
	gw_fleet_close(f, false);
	return NULL;
}

void
gw_fleet_close(struct gw_fleet *f, bool teardown)
{
	if (!f)
		return;
	if (teardown && f->nft) {
		struct fw_batch *b = fw_batch_new();
		char nerr[256];

		if (b && fw_build_remove(b) == 0 && fw_commit(f->nft, b, nerr, sizeof(nerr)) < 0)
			gw_log_warnx("fleet: removing the table: %s", nerr);
		fw_batch_free(b);
	}
	if (teardown && f->nl >= 0)
		fw_rtnl_link_del(f->nl, GW_FLEET_LINK);
	while (f->head) {
		struct fent *e = f->head;

		f->head = e->next;
		pthread_rwlock_wrlock(&reg_lock);
		unhash(e);
		pthread_rwlock_unlock(&reg_lock);
		gw_policy_unref(e->layer);
		fent_free(e);
	}
	if (f->nft)
		fw_close(f->nft);
	if (f->nl >= 0)
		close(f->nl);
	if (f->nsfd >= 0)
		close(f->nsfd);
	if (teardown && f->path[0]) {
		if (umount2(f->path, MNT_DETACH) == 0)
			unlink(f->path);
		gw_log_info("fleet namespace %s removed", f->name);
	}
	for (size_t i = 0; i < f->nlanes; i++)
		gw_addr_pool_fini(&f->lanes[i].pool);
	free(f->lanes);
	free(f);
}

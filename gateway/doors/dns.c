/* dns.c: c-ares in the gateway loop, a coalescing front for it, and the
 * bounded answer cache.
 *
 * Shape: gw_dns_resolve() looks in the cache, then joins a lookup already in
 * flight for the same name, else starts one with ares_getaddrinfo(AF_UNSPEC).
 * c-ares reports its sockets through ARES_OPT_SOCK_STATE_CB (mapped onto
 * gw_io watches) and its deadlines through ares_timeout() (one gw_timer,
 * re-armed after every call into c-ares).
 *
 * User callbacks never run inside c-ares: a finished lookup is queued on
 * d->done and the queue is drained after ares_process_fd() returns. So a
 * callback may resolve, cancel or even gw_dns_free() without c-ares being
 * re-entered or freed under its own feet.
 */
#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>

#include "dns.h"
#include "loop.h"

#define DNS_INFLIGHT_BUCKETS 256u       /* power of two */
#define DNS_CACHE_MAX_BUCKETS (1u << 16)

/* ---- names ---- */

static uint32_t
dns_hash(const char *s)
{
	uint32_t h = 2166136261u;       /* FNV-1a */

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h;
}

/* Writes name's key into buf (GW_DNS_MAX_NAME + 1 bytes): lowercase, one
 * trailing dot dropped. Host names only take letters, digits, '-', '_' and
 * '.', with labels of 1..63 bytes: anything else (a ':' or '%' left over
 * from an address, a space, a byte >= 0x80) is refused here rather than
 * sent to a server. Returns the length or -EINVAL. */
static int
dns_norm(const char *name, char *buf)
{
	size_t len, label = 0;

	if (!name)
		return -EINVAL;
	len = strlen(name);
	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > GW_DNS_MAX_NAME)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			   c == '-' || c == '_') {
			if (++label > 63)
				return -EINVAL;
		} else {
			return -EINVAL;
		}
		buf[i] = c;
	}
	buf[len] = '\0';
	return (int)len;
}

/* ---- the cache ---- */

/* An address stored compactly: a sockaddr_storage is 128 bytes. */
struct cache_addr {
	uint8_t family;                 /* AF_INET or AF_INET6 */
	uint8_t a[16];
};

struct cache_entry {
	struct cache_entry *hnext;      /* bucket chain */
	struct cache_entry *prev;       /* LRU list: head is the newest */
	struct cache_entry *next;
	uint32_t hash;
	bool negative;
	uint8_t naddrs;
	uint64_t expires;               /* ms, same clock as `now` */
	struct cache_addr addrs[GW_DNS_MAX_ADDRS];
	char name[];
};

struct gw_dns_cache {
	size_t cap;
	size_t n;
	size_t nbuckets;                /* power of two */
	struct cache_entry **buckets;
	struct cache_entry *head;
	struct cache_entry *tail;
};

struct gw_dns_cache *
gw_dns_cache_new(size_t cap)
{
	struct gw_dns_cache *c = calloc(1, sizeof(*c));
	size_t nb = 16;

	if (!c)
		return NULL;
	while (nb < cap && nb < DNS_CACHE_MAX_BUCKETS)
		nb *= 2;
	c->cap = cap;
	c->nbuckets = nb;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void
gw_dns_cache_free(struct gw_dns_cache *c)
{
	struct cache_entry *e, *next;

	if (!c)
		return;
	for (e = c->head; e; e = next) {
		next = e->next;
		free(e);
	}
	free(c->buckets);
	free(c);
}

size_t
gw_dns_cache_count(const struct gw_dns_cache *c)
{
	return c ? c->n : 0;
}

static struct cache_entry *
cache_find(struct gw_dns_cache *c, const char *key, uint32_t h)
{
	struct cache_entry *e;

	for (e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->name, key) == 0)
			return e;
	return NULL;
}

static void
lru_unlink(struct gw_dns_cache *c, struct cache_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void
lru_push(struct gw_dns_cache *c, struct cache_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	else
		c->tail = e;
	c->head = e;
}

static void
cache_remove(struct gw_dns_cache *c, struct cache_entry *e)
{
	struct cache_entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(c, e);
	c->n--;
	free(e);
}

/* Finds or makes the entry for key, as the most recently used; evicts the
 * least recently used one at the bound. NULL on ENOMEM. */
static struct cache_entry *
cache_slot(struct gw_dns_cache *c, const char *key, size_t len, uint32_t h)
{
	struct cache_entry *e = cache_find(c, key, h);
	size_t b = h & (c->nbuckets - 1);

	if (e) {
		lru_unlink(c, e);
		lru_push(c, e);
		return e;
	}
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e)
		return NULL;
	if (c->n >= c->cap)
		cache_remove(c, c->tail);
	memcpy(e->name, key, len + 1);
	e->hash = h;
	e->hnext = c->buckets[b];
	c->buckets[b] = e;
	lru_push(c, e);
	c->n++;
	return e;
}

int
gw_dns_cache_put(struct gw_dns_cache *c, const char *name,
		 const struct gw_dns_result *res, uint64_t now)
{
	char key[GW_DNS_MAX_NAME + 1];
	struct cache_addr addrs[GW_DNS_MAX_ADDRS];
	struct cache_entry *e;
	uint32_t h, ttl;
	int len;

	if (!c || !res || res->naddrs == 0 || res->naddrs > GW_DNS_MAX_ADDRS)
		return -EINVAL;
	len = dns_norm(name, key);
	if (len < 0)
		return len;
	for (size_t i = 0; i < res->naddrs; i++) {
		const struct sockaddr_storage *ss = &res->addrs[i];

		memset(&addrs[i], 0, sizeof(addrs[i]));
		addrs[i].family = (uint8_t)ss->ss_family;
		if (ss->ss_family == AF_INET)
			memcpy(addrs[i].a,
			       &((const struct sockaddr_in *)ss)->sin_addr, 4);
		else if (ss->ss_family == AF_INET6)
			memcpy(addrs[i].a,
			       &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
		else
			return -EINVAL;
	}
	if (c->cap == 0)
		return 0;
	h = dns_hash(key);
	if (res->ttl == 0) {
		/* The newest answer says "do not keep": neither keep an
		 * older one. */
		e = cache_find(c, key, h);
		if (e)
			cache_remove(c, e);
		return 0;
	}
	ttl = res->ttl;
	if (ttl < GW_DNS_TTL_MIN)
		ttl = GW_DNS_TTL_MIN;
	if (ttl > GW_DNS_TTL_MAX)
		ttl = GW_DNS_TTL_MAX;
	e = cache_slot(c, key, (size_t)len, h);
	if (!e)
		return -ENOMEM;
	e->negative = false;
	e->expires = now + (uint64_t)ttl * 1000u;
	e->naddrs = (uint8_t)res->naddrs;
	memcpy(e->addrs, addrs, res->naddrs * sizeof(addrs[0]));
	return 0;
}

int
gw_dns_cache_put_negative(struct gw_dns_cache *c, const char *name,
			  uint64_t now)
{
	char key[GW_DNS_MAX_NAME + 1];
	struct cache_entry *e;
	int len;

	if (!c)
		return -EINVAL;
	len = dns_norm(name, key);
	if (len < 0)
		return len;
	if (c->cap == 0)
		return 0;
	e = cache_slot(c, key, (size_t)len, dns_hash(key));
	if (!e)
		return -ENOMEM;
	e->negative = true;
	e->naddrs = 0;
	e->expires = now + (uint64_t)GW_DNS_NEGATIVE_TTL * 1000u;
	return 0;
}

int
gw_dns_cache_get(struct gw_dns_cache *c, const char *name, uint64_t now,
		 struct gw_dns_result *out)
{
	char key[GW_DNS_MAX_NAME + 1];
	struct cache_entry *e;
	uint64_t left;

	if (!c || !out || dns_norm(name, key) < 0)
		return 0;
	e = cache_find(c, key, dns_hash(key));
	if (!e)
		return 0;
	if (now >= e->expires) {
		cache_remove(c, e);
		return 0;
	}
	lru_unlink(c, e);
	lru_push(c, e);
	if (e->negative)
		return -ENOENT;
	left = (e->expires - now + 999u) / 1000u;
	out->ttl = (uint32_t)left;
	out->naddrs = e->naddrs;
	for (size_t i = 0; i < e->naddrs; i++) {
		struct sockaddr_storage *ss = &out->addrs[i];

		memset(ss, 0, sizeof(*ss));
		if (e->addrs[i].family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)ss;

			sin->sin_family = AF_INET;
			memcpy(&sin->sin_addr, e->addrs[i].a, 4);
		} else {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

			sin6->sin6_family = AF_INET6;
			memcpy(&sin6->sin6_addr, e->addrs[i].a, 16);
		}
	}
	return 1;
}

/* ---- the resolver ---- */

/* One c-ares socket. Freed through gw_defer: an event of the current batch
 * may still name its gw_io. */
struct dns_sock {
	struct gw_io io;
	struct gw_defer defer;
	struct gw_dns *d;
	struct dns_sock *next;
};

/* One ares_getaddrinfo() in flight (or finished, waiting on d->done), shared
 * by every waiter for its name. */
struct dns_lookup {
	struct gw_dns *d;
	struct dns_lookup *hnext;       /* d->inflight chain, while in flight */
	struct dns_lookup *done_next;   /* d->done queue, once finished */
	struct gw_dns_query *whead;     /* waiters, FIFO */
	struct gw_dns_query *wtail;
	uint32_t hash;
	bool inflight;
	bool starting;                  /* inside ares_getaddrinfo() */
	bool done;
	int status;
	struct gw_dns_result res;       /* when status is 0 */
	char name[];
};

struct gw_dns_query {
	struct dns_lookup *lk;          /* NULL once its callback started */
	struct gw_dns_query *prev;
	struct gw_dns_query *next;
	gw_dns_cb cb;
	void *arg;
};

struct gw_dns {
	struct gw_loop *l;
	ares_channel ch;
	struct gw_timer timer;          /* ares_timeout(): retransmits */
	struct gw_timer kick;           /* drains answers finished outside I/O */
	struct dns_sock *socks;
	struct dns_lookup *inflight[DNS_INFLIGHT_BUCKETS];
	struct dns_lookup *done_head;
	struct dns_lookup **done_tail;
	struct gw_dns_cache *cache;
	struct gw_dns_stats st;
	bool draining;                  /* delivering callbacks */
	bool dead;                      /* gw_dns_free() asked during a drain */
	bool destroying;                /* inside dns_destroy() */
};

static void dns_destroy(struct gw_dns *d);

static void
lookup_free(struct dns_lookup *lk)
{
	struct gw_dns_query *w, *next;

	for (w = lk->whead; w; w = next) {
		next = w->next;
		free(w);
	}
	free(lk);
}

static void
inflight_unlink(struct gw_dns *d, struct dns_lookup *lk)
{
	struct dns_lookup **pp;

	if (!lk->inflight)
		return;
	pp = &d->inflight[lk->hash & (DNS_INFLIGHT_BUCKETS - 1)];
	while (*pp != lk)
		pp = &(*pp)->hnext;
	*pp = lk->hnext;
	lk->hnext = NULL;
	lk->inflight = false;
}

static struct dns_lookup *
inflight_find(struct gw_dns *d, const char *key, uint32_t h)
{
	struct dns_lookup *lk;

	for (lk = d->inflight[h & (DNS_INFLIGHT_BUCKETS - 1)]; lk; lk = lk->hnext)
		if (lk->hash == h && strcmp(lk->name, key) == 0)
			return lk;
	return NULL;
}

static void
waiter_append(struct dns_lookup *lk, struct gw_dns_query *w)
{
	w->lk = lk;
	w->next = NULL;
	w->prev = lk->wtail;
	if (lk->wtail)
		lk->wtail->next = w;
	else
		lk->whead = w;
	lk->wtail = w;
}

static void
waiter_unlink(struct dns_lookup *lk, struct gw_dns_query *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		lk->whead = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		lk->wtail = w->prev;
	w->prev = w->next = NULL;
	w->lk = NULL;
}

static void
sock_free(void *arg)
{
	free(arg);
}

static void
sock_release(struct gw_dns *d, struct dns_sock *s)
{
	gw_io_del(d->l, &s->io);
	gw_defer(d->l, &s->defer, sock_free, s);
}

/* Points the retransmit timer at c-ares's next deadline. */
static void
dns_arm(struct gw_dns *d)
{
	struct timeval tv;
	uint64_t ms;

	if (d->dead || d->destroying)
		return;
	if (!ares_timeout(d->ch, NULL, &tv)) {
		gw_timer_cancel(d->l, &d->timer);
		return;
	}
	/* Round up: waking early would only spin once more. */
	ms = (uint64_t)tv.tv_sec * 1000u + ((uint64_t)tv.tv_usec + 999u) / 1000u;
	(void)gw_timer_arm(d->l, &d->timer, ms);
}

/* Runs the waiters of one finished lookup, then frees it. Stops calling
 * as soon as a callback frees the resolver. */
static void
dns_deliver(struct gw_dns *d, struct dns_lookup *lk)
{
	struct gw_dns_query *w;

	while ((w = lk->whead) && !d->dead) {
		waiter_unlink(lk, w);
		w->cb(lk->status, lk->status == 0 ? &lk->res : NULL, w->arg);
		free(w);
	}
	lookup_free(lk);
}

/* Delivers every finished lookup. Called only where c-ares is not on the
 * stack; may free d (when a callback called gw_dns_free()), so callers
 * touch nothing of d afterwards. */
static void
dns_drain(struct gw_dns *d)
{
	struct dns_lookup *lk;

	if (d->draining)
		return;
	d->draining = true;
	while (!d->dead && (lk = d->done_head)) {
		d->done_head = lk->done_next;
		if (!d->done_head)
			d->done_tail = &d->done_head;
		dns_deliver(d, lk);
	}
	d->draining = false;
	if (d->dead)
		dns_destroy(d);
}

/* After every call into c-ares: re-arm, then deliver. */
static void
dns_after(struct gw_dns *d)
{
	dns_arm(d);
	dns_drain(d);
}

static void
sock_ready(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct dns_sock *s = io->arg;
	struct gw_dns *d = s->d;
	ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;

	(void)l;
	/* Errors and hang-ups go to the read side: c-ares learns of them
	 * from recv(). */
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rfd = io->fd;
	if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && (io->events & EPOLLOUT))
		wfd = io->fd;
	ares_process_fd(d->ch, rfd, wfd);
	dns_after(d);
}

static void
timer_fired(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_dns *d = t->arg;

	(void)l;
	ares_process_fd(d->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_after(d);
}

static void
kick_fired(struct gw_loop *l, struct gw_timer *t)
{
	(void)l;
	dns_after(t->arg);
}

/* ARES_OPT_SOCK_STATE_CB: c-ares opened, changed or is about to close a
 * socket. Called from inside c-ares. */
static void
sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct gw_dns *d = data;
	struct dns_sock *s, **pp;
	uint32_t events = (readable ? EPOLLIN : 0u) | (writable ? EPOLLOUT : 0u);

	for (pp = &d->socks; (s = *pp); pp = &s->next)
		if (s->io.fd == fd)
			break;
	if (!events) {
		if (s) {
			*pp = s->next;
			sock_release(d, s);
		}
		return;
	}
	if (s) {
		(void)gw_io_mod(d->l, &s->io, events);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return;         /* unwatched: its queries end by timeout */
	s->d = d;
	if (gw_io_add(d->l, &s->io, fd, events, sock_ready, s) < 0) {
		free(s);
		return;
	}
	s->next = d->socks;
	d->socks = s;
}

static void
addr_copy(struct sockaddr_storage *ss, const struct ares_addrinfo_node *n)
{
	memset(ss, 0, sizeof(*ss));
	if (n->ai_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_addr = ((const struct sockaddr_in *)n->ai_addr)->sin_addr;
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr =
			((const struct sockaddr_in6 *)n->ai_addr)->sin6_addr;
	}
}

/* Fills res from a c-ares answer: IPv4 first, then IPv6, each in answer
 * order, at most GW_DNS_MAX_ADDRS; ttl the smallest of every address and
 * CNAME record. 0, or -ENOENT when there is no address at all. */
static int
result_fill(struct gw_dns_result *res, const struct ares_addrinfo *ai)
{
	static const int families[] = { AF_INET, AF_INET6 };
	uint32_t ttl = UINT32_MAX;
	size_t n = 0;

	for (size_t f = 0; f < 2; f++) {
		const struct ares_addrinfo_node *node;

		for (node = ai->nodes; node; node = node->ai_next) {
			if (node->ai_family != families[f] || !node->ai_addr)
				continue;
			if (node->ai_ttl < 0)
				ttl = 0;
			else if ((uint32_t)node->ai_ttl < ttl)
				ttl = (uint32_t)node->ai_ttl;
			if (n < GW_DNS_MAX_ADDRS)
				addr_copy(&res->addrs[n++], node);
		}
	}
	if (n == 0)
		return -ENOENT;
	for (const struct ares_addrinfo_cname *cn = ai->cnames; cn; cn = cn->next) {
		if (cn->ttl < 0)
			ttl = 0;
		else if ((uint32_t)cn->ttl < ttl)
			ttl = (uint32_t)cn->ttl;
	}
	res->ttl = ttl;
	res->naddrs = n;
	return 0;
}

static int
status_errno(int status)
{
	switch (status) {
	case ARES_SUCCESS:
		return 0;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
		return -ENOENT;
	case ARES_ETIMEOUT:
		return -ETIMEDOUT;
	case ARES_ENOMEM:
		return -ENOMEM;
	case ARES_EBADNAME:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ares_getaddrinfo()'s callback, from inside c-ares: record, cache and
 * queue; never call a user from here. */
static void
lookup_done(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
	struct dns_lookup *lk = arg;
	struct gw_dns *d = lk->d;
	int rc;

	(void)timeouts;
	inflight_unlink(d, lk);
	if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED ||
	    d->destroying) {
		if (ai)
			ares_freeaddrinfo(ai);
		lookup_free(lk);
		return;
	}
	rc = status_errno(status);
	if (rc == 0)
		rc = ai ? result_fill(&lk->res, ai) : -ENOENT;
	if (ai)
		ares_freeaddrinfo(ai);
	lk->status = rc;
	lk->done = true;
	switch (rc) {
	case 0:
		d->st.answers++;
		/* A TTL of 0 (also every hosts-file answer) stores nothing. */
		(void)gw_dns_cache_put(d->cache, lk->name, &lk->res,
				       gw_loop_now(d->l));
		break;
	case -ENOENT:
		d->st.nxdomain++;
		(void)gw_dns_cache_put_negative(d->cache, lk->name,
						gw_loop_now(d->l));
		break;
	case -ETIMEDOUT:
		d->st.timeouts++;
		break;
	default:
		d->st.failures++;
		break;
	}
	if (lk->starting)
		return;         /* gw_dns_resolve() takes it from here */
	if (!lk->whead) {
		lookup_free(lk);        /* every waiter cancelled */
		return;
	}
	lk->done_next = NULL;
	*d->done_tail = lk;
	d->done_tail = &lk->done_next;
}

/* An IP literal answers for itself. 1 and *out filled, or 0. */
static int
literal(const char *key, struct gw_dns_result *out)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&out->addrs[0];
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addrs[0];
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, key, &a4) == 1) {
		memset(&out->addrs[0], 0, sizeof(out->addrs[0]));
		sin->sin_family = AF_INET;
		sin->sin_addr = a4;
	} else if (inet_pton(AF_INET6, key, &a6) == 1) {
		memset(&out->addrs[0], 0, sizeof(out->addrs[0]));
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = a6;
	} else {
		return 0;
	}
	out->naddrs = 1;
	out->ttl = 0;
	return 1;
}

int
gw_dns_resolve(struct gw_dns *d, const char *name, struct gw_dns_result *out,
	       gw_dns_cb cb, void *arg, struct gw_dns_query **qp)
{
	struct ares_addrinfo_hints hints = {
		.ai_flags = ARES_AI_NOSORT,     /* our order, not RFC 6724's */
		.ai_family = AF_UNSPEC,
	};
	char key[GW_DNS_MAX_NAME + 1];
	struct dns_lookup *lk;
	struct gw_dns_query *w;
	uint32_t h;
	int len, rc;

	if (qp)
		*qp = NULL;
	if (!d || !out || !cb || !qp || d->dead || d->destroying)
		return -EINVAL;
	/* IPv6 literals hold ':', which dns_norm() refuses in names. */
	if (name && strlen(name) < sizeof(key) && literal(name, out)) {
		d->st.resolves++;
		d->st.literals++;
		return 1;
	}
	len = dns_norm(name, key);
	if (len < 0)
		return len;
	d->st.resolves++;
	if (literal(key, out)) {        /* "192.0.2.1." */
		d->st.literals++;
		return 1;
	}
	rc = gw_dns_cache_get(d->cache, key, gw_loop_now(d->l), out);
	if (rc != 0) {
		d->st.cache_hits++;
		return rc;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cb = cb;
	w->arg = arg;
	h = dns_hash(key);
	lk = inflight_find(d, key, h);
	if (lk) {
		d->st.coalesced++;
		waiter_append(lk, w);
		*qp = w;
		return 0;
	}
	lk = calloc(1, sizeof(*lk) + (size_t)len + 1);
	if (!lk) {
		free(w);
		return -ENOMEM;
	}
	lk->d = d;
	lk->hash = h;
	memcpy(lk->name, key, (size_t)len + 1);
	lk->hnext = d->inflight[h & (DNS_INFLIGHT_BUCKETS - 1)];
	d->inflight[h & (DNS_INFLIGHT_BUCKETS - 1)] = lk;
	lk->inflight = true;
	lk->starting = true;
	d->st.queries++;
	ares_getaddrinfo(d->ch, lk->name, NULL, &hints, lookup_done, lk);
	lk->starting = false;
	dns_arm(d);
	/* Should c-ares have finished some other lookup from in there, it
	 * is delivered from the loop, not from inside this call. */
	if (d->done_head)
		(void)gw_timer_arm(d->l, &d->kick, 0);
	if (lk->done) {
		/* Answered at once (hosts file, a refused name): no
		 * callback for a caller that is still in this call. */
		rc = lk->status;
		if (rc == 0)
			*out = lk->res;
		free(w);
		free(lk);
		return rc == 0 ? 1 : rc;
	}
	waiter_append(lk, w);
	*qp = w;
	return 0;
}

void
gw_dns_cancel(struct gw_dns_query *q)
{
	struct dns_lookup *lk;

	if (!q || !q->lk)
		return;
	lk = q->lk;
	waiter_unlink(lk, q);
	lk->d->st.cancelled++;
	free(q);
	/* A lookup left without waiters runs on: its answer still fills
	 * the cache, and lookup_done() or dns_deliver() frees it. */
}

void
gw_dns_stats(const struct gw_dns *d, struct gw_dns_stats *st)
{
	if (!st)
		return;
	if (!d) {
		memset(st, 0, sizeof(*st));
		return;
	}
	*st = d->st;
}

/* ---- setup and teardown ---- */

static pthread_once_t dns_lib_once = PTHREAD_ONCE_INIT;
static int dns_lib_rc;

static void
dns_lib_init(void)
{
	dns_lib_rc = ares_library_init(ARES_LIB_INIT_ALL);
}

/* Installs the configured servers. Only needed when explicit addresses
 * appear: with "system" alone c-ares has already read /etc/resolv.conf.
 * Mixed, each "system" entry expands in place to the servers c-ares read
 * from there. */
static int
dns_servers(struct gw_dns *d, const struct conf_gateway *g, char *err,
	    size_t errsz)
{
	struct ares_addr_port_node *sys = NULL, *nodes = NULL, *s;
	size_t nsys = 0, nsysent = 0, naddr = 0, n = 0;
	int rc = 0, arc;

	for (size_t i = 0; i < g->ndns_servers; i++) {
		if (g->dns_servers[i].kind == CONF_DNS_SYSTEM)
			nsysent++;
		else
			naddr++;
	}
	if (naddr == 0)
		return 0;
	if (nsysent > 0) {
		arc = ares_get_servers_ports(d->ch, &sys);
		if (arc != ARES_SUCCESS) {
			snprintf(err, errsz, "dns: reading the system servers: %s",
				 ares_strerror(arc));
			return arc == ARES_ENOMEM ? -ENOMEM : -EIO;
		}
		for (s = sys; s; s = s->next)
			nsys++;
	}
	nodes = calloc(nsys * nsysent + naddr, sizeof(*nodes));
	if (!nodes) {
		snprintf(err, errsz, "dns: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < g->ndns_servers; i++) {
		const struct conf_dns_server *cs = &g->dns_servers[i];
		struct ares_addr_port_node *nd;

		if (cs->kind == CONF_DNS_SYSTEM) {
			for (s = sys; s; s = s->next) {
				nodes[n] = *s;
				nodes[n++].next = NULL;
			}
			continue;
		}
		if (cs->kind != CONF_DNS_ADDR) {
			snprintf(err, errsz, "dns: servers[%zu]: unknown kind %d",
				 i, (int)cs->kind);
			rc = -EINVAL;
			goto out;
		}
		nd = &nodes[n++];
		if (cs->addr.ss_family == AF_INET) {
			const struct sockaddr_in *sin =
				(const struct sockaddr_in *)&cs->addr;

			nd->family = AF_INET;
			nd->addr.addr4 = sin->sin_addr;
			nd->udp_port = ntohs(sin->sin_port);
		} else if (cs->addr.ss_family == AF_INET6) {
			const struct sockaddr_in6 *sin6 =
				(const struct sockaddr_in6 *)&cs->addr;

			nd->family = AF_INET6;
			memcpy(&nd->addr.addr6, &sin6->sin6_addr,
			       sizeof(nd->addr.addr6));
			nd->udp_port = ntohs(sin6->sin6_port);
		} else {
			snprintf(err, errsz,
				 "dns: servers[%zu] (line %u): not an IPv4 or "
				 "IPv6 address; give one, or \"system\"",
				 i, (unsigned)cs->pos.line);
			rc = -EINVAL;
			goto out;
		}
		if (nd->udp_port == 0)
			nd->udp_port = 53;
		nd->tcp_port = nd->udp_port;
	}
	for (size_t i = 0; i + 1 < n; i++)
		nodes[i].next = &nodes[i + 1];
	arc = ares_set_servers_ports(d->ch, n ? nodes : NULL);
	if (arc != ARES_SUCCESS) {
		snprintf(err, errsz, "dns: setting the servers: %s",
			 ares_strerror(arc));
		rc = arc == ARES_ENOMEM ? -ENOMEM : -EIO;
	}
out:
	free(nodes);
	if (sys)
		ares_free_data(sys);
	return rc;
}

struct gw_dns *
gw_dns_new(struct gw_loop *l, const struct conf_gateway *g, char *err,
	   size_t errsz)
{
	struct ares_options opts;
	struct gw_dns *d = NULL;
	int mask, arc, rc;

	if (err && errsz)
		err[0] = '\0';
	if (!l || !g || !err || !errsz) {
		if (err && errsz)
			snprintf(err, errsz, "dns: no loop or no configuration");
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&dns_lib_once, dns_lib_init);
	if (dns_lib_rc != ARES_SUCCESS) {
		snprintf(err, errsz, "dns: ares_library_init: %s",
			 ares_strerror(dns_lib_rc));
		errno = EIO;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto nomem;
	d->l = l;
	d->done_tail = &d->done_head;
	gw_timer_init(&d->timer, timer_fired, d);
	gw_timer_init(&d->kick, kick_fired, d);
	d->cache = gw_dns_cache_new(g->dns_cache_size);
	if (!d->cache)
		goto nomem;

	memset(&opts, 0, sizeof(opts));
	/* A proxy resolves exactly the name its client gave: no search list
	 * ("api" must not become "api.corp") and no HOSTALIASES. NOSEARCH
	 * alone does not stop ares_getaddrinfo() in c-ares 1.18 from
	 * walking the search list, so the list is also set empty, which
	 * also keeps LOCALDOMAIN and resolv.conf "search" out. */
	opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	opts.domains = NULL;
	opts.ndomains = 0;
	opts.sock_state_cb = sock_state;
	opts.sock_state_cb_data = d;
	mask = ARES_OPT_FLAGS | ARES_OPT_DOMAINS | ARES_OPT_SOCK_STATE_CB;
	if (g->dns_timeout_ms) {
		opts.timeout = g->dns_timeout_ms > (uint32_t)INT32_MAX ?
				INT32_MAX : (int)g->dns_timeout_ms;
		mask |= ARES_OPT_TIMEOUTMS;
	}
	if (g->dns_attempts) {
		opts.tries = g->dns_attempts > 100u ? 100 : (int)g->dns_attempts;
		mask |= ARES_OPT_TRIES;
	}
	arc = ares_init_options(&d->ch, &opts, mask);
	if (arc != ARES_SUCCESS) {
		snprintf(err, errsz, "dns: cannot start c-ares: %s",
			 ares_strerror(arc));
		d->ch = NULL;
		gw_dns_cache_free(d->cache);
		free(d);
		errno = arc == ARES_ENOMEM ? ENOMEM : EIO;
		return NULL;
	}
	rc = dns_servers(d, g, err, errsz);
	if (rc < 0) {
		dns_destroy(d);
		errno = -rc;
		return NULL;
	}
	return d;
nomem:
	if (d)
		gw_dns_cache_free(d->cache);
	free(d);
	snprintf(err, errsz, "dns: out of memory");
	errno = ENOMEM;
	return NULL;
}

static void
dns_destroy(struct gw_dns *d)
{
	struct dns_lookup *lk;
	struct dns_sock *s;

	d->destroying = true;
	gw_timer_cancel(d->l, &d->timer);
	gw_timer_cancel(d->l, &d->kick);
	/* Ends every lookup with ARES_EDESTRUCTION (lookup_done() frees
	 * them without a word to their waiters) and closes every socket
	 * through sock_state(). */
	if (d->ch)
		ares_destroy(d->ch);
	while ((lk = d->done_head)) {
		d->done_head = lk->done_next;
		lookup_free(lk);
	}
	for (size_t b = 0; b < DNS_INFLIGHT_BUCKETS; b++) {
		while ((lk = d->inflight[b])) {
			d->inflight[b] = lk->hnext;
			lookup_free(lk);
		}
	}
	while ((s = d->socks)) {
		d->socks = s->next;
		sock_release(d, s);
	}
	gw_dns_cache_free(d->cache);
	free(d);
}

void
gw_dns_free(struct gw_dns *d)
{
	if (!d || d->dead)
		return;
	if (d->draining) {
		/* A callback is on the stack: dns_drain() stops calling and
		 * frees once it returns. */
		d->dead = true;
		return;
	}
	dns_destroy(d);
}

/* cache.c: the bounded LRU of minted leaves, shared by the workers. One
 * mutex guards the table and the list; minting runs outside it. A miss
 * inserts a MINTING entry that later callers for the same host wait on
 * (one condition variable for the cache: mints are rare and short), so a
 * burst of connections to a new host costs one mint. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "certs.h"

enum entry_state { MINTING, READY, FAILED };

struct entry {
	struct entry *hnext;       /* hash chain (MINTING and READY) */
	struct entry *prev, *next; /* LRU list, most recent first (READY only) */
	enum entry_state state;
	unsigned pins;   /* the minter and the waiters still to take the result */
	bool dropped;    /* out of table and list; freed with its last pin */
	X509 *x509;      /* READY: the cache's reference */
	time_t renew_at; /* READY: mint anew from then on */
	int rc;          /* FAILED */
	char err[160];   /* FAILED */
	uint32_t hash;
	char host[];
};

struct certs_cache {
	pthread_mutex_t lock;
	pthread_cond_t done; /* a mint finished (any host) */
	struct entry **table;
	size_t mask;
	struct entry *head, *tail; /* LRU */
	size_t cap, n;             /* n: READY entries */
	certs_mint_fn mint;
	void *arg;
	certs_clock_fn clock;
	struct certs_cache_stats st;
};

static uint32_t
hash_host(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static time_t
now(const struct certs_cache *c)
{
	return c->clock ? c->clock() : time(NULL);
}

struct certs_cache *
certs_cache_new(size_t capacity, certs_mint_fn mint, void *arg, certs_clock_fn clock)
{
	struct certs_cache *c;
	size_t buckets = 16;

	if (capacity == 0 || !mint)
		return NULL;
	while (buckets < capacity && buckets < ((size_t)1 << 24))
		buckets <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->table = calloc(buckets, sizeof(*c->table));
	if (!c->table || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c->table);
		free(c);
		return NULL;
	}
	if (pthread_cond_init(&c->done, NULL) != 0) {
		pthread_mutex_destroy(&c->lock);
		free(c->table);
		free(c);
		return NULL;
	}
	c->mask = buckets - 1;
	c->cap = capacity;
	c->mint = mint;
	c->arg = arg;
	c->clock = clock;
	c->st.capacity = capacity;
	return c;
}

static struct entry *
find(struct certs_cache *c, const char *host, uint32_t h)
{
	for (struct entry *e = c->table[h & c->mask]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->host, host) == 0)
			return e;
	return NULL;
}

static void
unhash(struct certs_cache *c, struct entry *e)
{
	struct entry **pp = &c->table[e->hash & c->mask];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->hnext = NULL;
}

static void
lru_unlink(struct certs_cache *c, struct entry *e)
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
lru_push(struct certs_cache *c, struct entry *e)
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
entry_free(struct entry *e)
{
	X509_free(e->x509);
	free(e);
}

/* A READY entry out of the table and the list, and out of memory unless
 * a waiter has yet to take it. Callers holding references to its leaf
 * keep them. */
static void
drop(struct certs_cache *c, struct entry *e)
{
	unhash(c, e);
	lru_unlink(c, e);
	c->n--;
	if (e->pins == 0)
		entry_free(e);
	else
		e->dropped = true;
}

/* Halfway through the leaf's remaining validity at mint time. */
static time_t
renew_time(X509 *x, time_t t)
{
	int days = 0, secs = 0;
	long left;

	if (!ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)))
		return t; /* unreadable: mint anew next time */
	left = (long)days * 86400 + secs;
	return left > 0 ? t + left / 2 : t;
}

/* Takes the result of a finished mint of e and drops the caller's pin;
 * frees a FAILED or dropped e with its last pin. Under the lock. */
static int
take(struct entry *e, X509 **out, char *err, size_t errsz)
{
	int rc = 0;

	if (e->state == READY) {
		X509_up_ref(e->x509);
		*out = e->x509;
	} else {
		rc = e->rc;
		snprintf(err, errsz, "%s", e->err);
	}
	if (--e->pins == 0 && (e->state == FAILED || e->dropped))
		entry_free(e);
	return rc;
}

int
certs_cache_get(struct certs_cache *c, const char *host, X509 **out, char *err, size_t errsz)
{
	size_t len = strnlen(host, CERTS_HOST_MAX + 1);
	uint32_t h = hash_host(host);
	struct entry *e;
	X509 *x = NULL;
	char merr[sizeof(e->err)] = "";
	int rc;

	*out = NULL;
	if (len > CERTS_HOST_MAX) {
		snprintf(err, errsz, "host name longer than %d bytes", CERTS_HOST_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&c->lock);
	e = find(c, host, h);
	if (e && e->state == READY && now(c) >= e->renew_at) {
		c->st.renewals++;
		drop(c, e);
		e = NULL;
	}
	if (e && e->state == READY) {
		c->st.hits++;
		lru_unlink(c, e);
		lru_push(c, e);
		X509_up_ref(e->x509);
		*out = e->x509;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (e) { /* MINTING: wait for that mint */
		c->st.joins++;
		e->pins++;
		while (e->state == MINTING)
			pthread_cond_wait(&c->done, &c->lock);
		rc = take(e, out, err, errsz);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	c->st.misses++;
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	memcpy(e->host, host, len + 1);
	e->hash = h;
	e->state = MINTING;
	e->pins = 1;
	e->hnext = c->table[h & c->mask];
	c->table[h & c->mask] = e;
	pthread_mutex_unlock(&c->lock);

	rc = c->mint(c->arg, host, &x, merr, sizeof(merr));

	pthread_mutex_lock(&c->lock);
	c->st.mints++;
	if (rc < 0 || !x) {
		c->st.mint_failures++;
		X509_free(x);
		unhash(c, e); /* the next caller tries again */
		e->state = FAILED;
		e->rc = rc < 0 ? rc : -EIO;
		snprintf(e->err, sizeof(e->err), "%s", merr);
	} else {
		e->state = READY;
		e->x509 = x;
		e->renew_at = renew_time(x, now(c));
		lru_push(c, e);
		c->n++;
		while (c->n > c->cap) {
			c->st.evictions++;
			drop(c, c->tail);
		}
	}
	pthread_cond_broadcast(&c->done);
	rc = take(e, out, err, errsz); /* a new reference: e may go once we unlock */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void
certs_cache_stats(struct certs_cache *c, struct certs_cache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	st->entries = c->n;
	pthread_mutex_unlock(&c->lock);
}

void
certs_cache_free(struct certs_cache *c)
{
	if (!c)
		return;
	while (c->head)
		drop(c, c->head);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->lock);
	free(c->table);
	free(c);
}

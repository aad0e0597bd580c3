/* dns.h: name resolution through c-ares, driven by the gateway loop.
 *
 * No thread and no getaddrinfo(3): c-ares's sockets are watched with
 * gw_io, its retransmits run from one gw_timer. One struct gw_dns per loop;
 * like the loop, nothing here is thread-safe.
 *
 * A name is resolved for both A and AAAA. Search domains and HOSTALIASES are
 * never applied: "api" is looked up as "api", never as "api.corp". The hosts
 * file is read as the host's resolver configuration says (c-ares reads
 * /etc/nsswitch.conf or /etc/host.conf; "files, then DNS" by default).
 */
#ifndef SLUICE_GW_DNS_H
#define SLUICE_GW_DNS_H

#include <stdbool.h>

#include "conf-t.h"
#include "dns-t.h"
#include "loop-t.h"

/* Makes a resolver on l from g->dns_servers, dns_timeout_ms, dns_attempts
 * (0: c-ares's default) and dns_cache_size (0: no cache). Servers:
 * CONF_DNS_SYSTEM entries stand for the nameservers of /etc/resolv.conf
 * (read once, now), CONF_DNS_ADDR entries for themselves; the resulting
 * list keeps the configuration's order. No server entry at all means
 * "system". Borrows l (which must outlive the resolver) and g (only during
 * the call). Returns the resolver, or NULL with errno set and one line in
 * err. */
struct gw_dns *gw_dns_new(struct gw_loop *l, const struct conf_gateway *g,
			  char *err, size_t errsz);
/* Cancels every lookup and frees the resolver. No callback runs from here
 * on, not even one already due; every gw_dns_query handle becomes invalid.
 * May be called from inside a gw_dns_cb. NULL is a no-op. */
void gw_dns_free(struct gw_dns *d);

/* Resolves name (a host name, case-insensitive, an optional trailing dot;
 * or an IPv4 dotted quad or IPv6 literal, answered as itself). Returns:
 *   1   answered at once (cache hit, IP literal, hosts file): *out is
 *       filled, *qp is NULL, cb is never called;
 *   0   a lookup is under way: *qp is the waiter's handle, and cb(status,
 *       res, arg) runs exactly once later from the loop unless
 *       gw_dns_cancel(*qp) is called first. Waiters for the same name
 *       share one lookup;
 *   <0  final at once, no callback, *qp NULL: -EINVAL (malformed name,
 *       NULL argument), -ENOENT (negative answer, cached or at once),
 *       -ENOMEM, or, rarely, any other callback status c-ares gave at
 *       once. Failures (-EIO, -ETIMEDOUT) are never cached.
 * out is only written when 1 is returned. */
int gw_dns_resolve(struct gw_dns *d, const char *name,
		   struct gw_dns_result *out, gw_dns_cb cb, void *arg,
		   struct gw_dns_query **qp);
/* Withdraws one waiter: its callback will not run and q is freed. The
 * lookup goes on for other waiters and still fills the cache. NULL is a
 * no-op; q must not be used once its callback has started. */
void gw_dns_cancel(struct gw_dns_query *q);

/* Copies the counters into *st. */
void gw_dns_stats(const struct gw_dns *d, struct gw_dns_stats *st);

/* ---- the cache: pure, no I/O, time passed in (ms on any monotonic
 * clock). gw_dns uses it with gw_loop_now(); it is exported for tests. */

/* A cache of at most cap entries (0: a cache that stores nothing). NULL
 * with errno ENOMEM. */
struct gw_dns_cache *gw_dns_cache_new(size_t cap);
void gw_dns_cache_free(struct gw_dns_cache *c);
/* Stores a positive answer for name (lowercased, trailing dot dropped),
 * replacing any entry of that name, until now + res->ttl clamped to
 * [GW_DNS_TTL_MIN, GW_DNS_TTL_MAX] s. res->ttl 0 stores nothing and drops
 * an older entry. At the bound the least recently used entry goes. Copies
 * res. 0, -EINVAL (bad name, naddrs 0 or too many, unknown family) or
 * -ENOMEM. */
int gw_dns_cache_put(struct gw_dns_cache *c, const char *name,
		     const struct gw_dns_result *res, uint64_t now);
/* Stores "no such name" for GW_DNS_NEGATIVE_TTL s. 0, -EINVAL, -ENOMEM. */
int gw_dns_cache_put_negative(struct gw_dns_cache *c, const char *name,
			      uint64_t now);
/* Looks name up at time now: 1 and *out filled (ttl: seconds left, at
 * least 1) for a positive entry, -ENOENT for a negative one, 0 for none.
 * A hit becomes the most recently used; an expired entry is dropped. */
int gw_dns_cache_get(struct gw_dns_cache *c, const char *name, uint64_t now,
		     struct gw_dns_result *out);
/* Entries held, expired ones included until they are looked up or evicted. */
size_t gw_dns_cache_count(const struct gw_dns_cache *c);

#endif

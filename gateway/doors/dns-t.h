/* dns-t.h: the DNS resolver's types (c-ares driven by the gateway loop).
 *
 * struct gw_dns (one resolver per loop), struct gw_dns_query (one waiter)
 * and struct gw_dns_cache (the bounded answer cache) are opaque: dns.c owns
 * their layout. The result and the counters are plain structs the caller
 * reads.
 */
#ifndef SLUICE_GW_DNS_T_H
#define SLUICE_GW_DNS_T_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* At most this many addresses per answer; more are dropped (after
 * ordering, see struct gw_dns_result). */
#define GW_DNS_MAX_ADDRS 16
/* Longest name accepted, without the optional trailing dot (RFC 1035). */
#define GW_DNS_MAX_NAME 253
/* Positive answers are cached for their minimum TTL clamped to
 * [GW_DNS_TTL_MIN, GW_DNS_TTL_MAX] seconds; a TTL of 0 is not cached. */
#define GW_DNS_TTL_MIN 1u
#define GW_DNS_TTL_MAX 3600u
/* Negative answers (NXDOMAIN, no address records) are cached this long. */
#define GW_DNS_NEGATIVE_TTL 5u

struct gw_dns;
struct gw_dns_query;
struct gw_dns_cache;

/* One answer. addrs[] holds every IPv4 address first, then every IPv6
 * address, each family in the order the server sent it; sockaddr_in or
 * sockaddr_in6 in a sockaddr_storage, port 0. ttl is the smallest TTL of
 * the address and CNAME records in seconds (unclamped); for an answer
 * served from the cache, the seconds it has left there (at least 1); 0 for
 * an IP literal or a hosts-file answer. */
struct gw_dns_result {
	uint32_t ttl;
	size_t naddrs;                  /* 1 .. GW_DNS_MAX_ADDRS */
	struct sockaddr_storage addrs[GW_DNS_MAX_ADDRS];
};

/* Runs once per started query that was not cancelled, from the loop, never
 * from inside gw_dns_resolve(). status: 0 (res valid), -ENOENT (NXDOMAIN or
 * no address), -ETIMEDOUT, -ENOMEM or -EIO (server failure, refused, bad
 * response); res is NULL unless status is 0. res is borrowed: valid only
 * until the callback returns. */
typedef void (*gw_dns_cb)(int status, const struct gw_dns_result *res,
			  void *arg);

/* Counters since gw_dns_new(); see gw_dns_stats(). */
struct gw_dns_stats {
	uint64_t resolves;      /* gw_dns_resolve() calls with a valid name */
	uint64_t cache_hits;    /* answered from the cache, positive or not */
	uint64_t literals;      /* IP literals answered at once */
	uint64_t queries;       /* lookups handed to c-ares (A + AAAA) */
	uint64_t coalesced;     /* resolves that joined a lookup in flight */
	uint64_t answers;       /* lookups that ended with addresses */
	uint64_t nxdomain;      /* lookups that ended with -ENOENT */
	uint64_t timeouts;      /* lookups that ended with -ETIMEDOUT */
	uint64_t failures;      /* lookups that ended with -EIO or -ENOMEM */
	uint64_t cancelled;     /* waiters removed by gw_dns_cancel() */
};

#endif

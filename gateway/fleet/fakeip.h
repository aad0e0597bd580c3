/* fakeip.h: one sandbox's synthetic addresses for the DNS door (the
 * "fake-IP" scheme): a name the sandbox's layer allows is answered with an
 * address of a range no one routes (198.18.0.0/15, RFC 2544), which the
 * sandbox's TCP to it is mapped back to. The name, not the address, is what
 * the transparent door checks and dials.
 *
 * Each sandbox has its own table, made when it is attached and dropped
 * when it is detached: a claim's mappings end with it, and a later claim
 * on the same address starts with an empty one. Two sandboxes may hold the
 * same address for different names (the door looks a connection up by its
 * source and destination together).
 *
 * Pure: no I/O, no lock, no clock (the caller gives the time); the fleet
 * keeps one per sandbox under a mutex.
 *
 * Reuse rule: an address stands for its name for at least `hold_ms` after
 * it was last answered or used (the guest may hold the answer that long,
 * far longer than the TTL sluice gives it: stub resolvers and programs
 * cache); only then may it stand for another name. A table whose every
 * entry is held is full: gw_fakeip_get() refuses, the door answers
 * SERVFAIL, and no address is ever given to two names at once.
 */
#ifndef SLUICE_GW_FAKEIP_H
#define SLUICE_GW_FAKEIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_fakeip;

#define GW_FAKEIP_NAME_MAX 253

/* A table handing out addresses base .. base + size - 1 (host byte order;
 * size at least 1), holding at most max_names names at a time. NULL with
 * errno EINVAL or ENOMEM. */
struct gw_fakeip *gw_fakeip_new(uint32_t base, uint32_t size, uint32_t max_names,
				uint64_t hold_ms);
void gw_fakeip_free(struct gw_fakeip *f);

/* The address for name (a normalised host, 1..GW_FAKEIP_NAME_MAX bytes):
 * the one it has, or a new one (the least recently used free address, so a
 * freed address comes back as late as possible). Marks it answered at
 * now_ms. 0 with *addr (host byte order), -ENOSPC (full: every name held),
 * -EINVAL (a bad name), -ENOMEM. */
int gw_fakeip_get(struct gw_fakeip *f, const char *name, uint64_t now_ms, uint32_t *addr);

/* The name addr stands for, copied into out (GW_FAKEIP_NAME_MAX + 1
 * bytes), marking it used at now_ms: true, or false (no name has it; it
 * never had one, or its name was let go). */
bool gw_fakeip_name(struct gw_fakeip *f, uint32_t addr, uint64_t now_ms,
		    char out[GW_FAKEIP_NAME_MAX + 1]);

/* How many names the table holds now. */
size_t gw_fakeip_count(const struct gw_fakeip *f);

#endif

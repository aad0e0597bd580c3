/* diff.h: what a new pool set would change (PUT /v1/pools and its dry run,
 * docs/api.md): pools added, removed, changed (which keys), the warm
 * sandboxes that would drain, the live claims that keep their sandbox and
 * the layer pinned when they were made. */
#ifndef POOL_DIFF_H
#define POOL_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "conf.h"

struct pool_mgr;

/* One pool's sandboxes now (from pool_mgr_each_pool). */
struct pool_diff_live {
	const char *name;
	uint32_t warm;                  /* warm sandboxes */
	uint32_t claimed;               /* live claims */
};

/* Whether a pool's warm sandboxes, booted for a, still fit b: the same
 * backend, template, lane and limits. The manager replaces them otherwise. */
bool pool_boot_same(const struct conf_pool *a, const struct conf_pool *b);

/* Compares old's pools with neu's (either may be NULL: no pools). live:
 * the counts now, by pool name (a pool absent from it has none). Pure.
 * Returns a new reference, or NULL when out of memory:
 *   {"changes": [{"name": "web", "change": "changed",
 *                 "keys": ["policy", "limits.memory_mb"],
 *                 "warm_drained": 2, "claims_kept": 1}, ...],
 *    "summary": {"added": 0, "removed": 0, "changed": 1, "unchanged": 0,
 *                "warm_drained": 2, "claims_kept": 1}}
 * change is "added", "removed", "changed" or "unchanged", in neu's order,
 * then the removed in old's. warm_drained: the warm sandboxes a removed
 * pool drains, or a changed one replaces (pool_boot_same false); 0
 * otherwise. claims_kept: a removed or changed pool's live claims, which
 * go on with their sandbox and pinned layer until released. keys: the
 * keys of the pool's JSON (conf_pools_to_json) that differ, nested ones
 * as "limits.cpus". */
json_t *pool_diff(const struct conf *old, const struct conf *neu,
		  const struct pool_diff_live *live, size_t nlive);

/* pool_diff() of m's pool set and counts now against neu. */
json_t *pool_mgr_diff(struct pool_mgr *m, const struct conf *neu);

/* Whether a diff removes a pool or drains a warm sandbox: what a client
 * asks before applying. */
bool pool_diff_destructive(const json_t *diff);

#endif

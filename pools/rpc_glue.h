/* rpc_glue.h: what the pool manager needs for `backend: rpc` pools
 * (docs/backend-rpc.md), kept out of manager.c: the backend instance of
 * a pool or of a saved sandbox, whether two pools name the same
 * supervisor, and the supervisor's availability. */
#ifndef SLUICE_POOLS_RPC_GLUE_H
#define SLUICE_POOLS_RPC_GLUE_H

#include <stdbool.h>
#include <stddef.h>

#include "conf-t.h"
#include "sandbox.h"

/* The backend a pool boots with: ns and vm by name (NULL when this host
 * cannot run it), rpc the instance for its supervisor. NULL with err. */
const struct sbx_backend *pool_backend_of(const struct conf_pool *cp, char *err, size_t errsz);

/* The backend a saved sandbox record ("backend", and for rpc
 * "supervisor") names, or NULL with err. */
const struct sbx_backend *pool_backend_of_ref(const struct json_t *ref, char *err, size_t errsz);

/* Do a and b name the same supervisor (both not rpc: true)? */
bool pool_rpc_same(const struct conf_pool *a, const struct conf_pool *b);

/* An rpc pool's supervisor: up and available (1), not (0) with reason
 * set. Connects or restarts it when due (blocks up to seconds): call it
 * from a worker, not under the manager's mutex. */
int pool_rpc_available(const struct sbx_backend *be, char *reason, size_t reasonsz);

#endif

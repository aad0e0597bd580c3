/* claims.h: the pools manager's host (pools/manager.h): its worker
 * threads, its tick thread, the fleet network and the policy layers it
 * is given, and the sandbox backends' process-wide set-up. */
#ifndef SLUICE_GW_CLAIMS_H
#define SLUICE_GW_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

struct conf;
struct gw_fleet;
struct pool_mgr;
struct gw_claims;

#define GW_CLAIMS_WORKERS 8             /* boots and teardowns in flight */

/* Sets the sandbox backends up (state under /run/sluice/sandboxes,
 * templates under data_dir/templates, the agent at agent_path, or found
 * beside sluiced), starts the workers and the tick thread, and the
 * manager with c's pools (which start filling). Every sandbox booted
 * trusts ca_pem (sluice's CA certificate, PEM; NULL: none). The fleet and
 * ca_pem are borrowed until gw_claims_stop(). NULL with one line in err. */
struct gw_claims *gw_claims_start(struct conf *c, struct gw_fleet *f, const char *agent_path,
				  const char *ca_pem, char *err, size_t errsz);
/* Stops the threads; with end_sandboxes every sandbox is ended first,
 * otherwise they run on for the next start to re-adopt. NULL is fine. */
void gw_claims_stop(struct gw_claims *g, bool end_sandboxes);

struct pool_mgr *gw_claims_mgr(struct gw_claims *g);
struct gw_fleet *gw_claims_fleet(struct gw_claims *g);

#endif

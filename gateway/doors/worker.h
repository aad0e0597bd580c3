/* worker.h: the gateway's worker threads. */
#ifndef SLUICE_GW_WORKER_H
#define SLUICE_GW_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf-t.h"
#include "worker-t.h"

struct gw_fleet;

/* Starts n workers (n >= 1) for the configuration c: each makes its loop,
 * its resolver and its listening sockets (SO_REUSEPORT) before this
 * returns, so that a bad address fails the start, not a later thread.
 * With a fleet, each egress lane's doors listen in the fleet namespace on
 * the lane's gateway address. Returns the array, or NULL with one line in
 * err. */
struct gw_worker *gw_workers_start(const struct conf *c, struct gw_fleet *fleet, unsigned n,
				   char *err, size_t errsz);

/* Stops every worker (each closes its connections) and joins them. */
void gw_workers_stop(struct gw_worker *w, unsigned n);

/* The number of workers `workers: auto` means here. */
unsigned gw_workers_auto(void);

/* Connections over every door and worker, against
 * gateway.limits.max_connections: gw_conn_take() counts one in, or says
 * no (false) when `max` are open; gw_conn_release() counts one out. */
bool gw_conn_take(uint32_t max);
void gw_conn_release(void);
uint64_t gw_conns_live(void);

/* A connection counted in with gw_conn_take() joins its worker's list;
 * leaving it also counts it out. shutdown must end the connection (and
 * so call gw_worker_conn_leave()). */
void gw_worker_conn_join(struct gw_worker *w, struct gw_conn_node *n,
			 void (*shutdown)(struct gw_conn_node *n));
void gw_worker_conn_leave(struct gw_worker *w, struct gw_conn_node *n);

/* The connection of type `type` whose member `node` is n. */
#define gw_conn_of(n, type) ((type *)(void *)((char *)(n) - offsetof(type, node)))

#endif

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

/* Watches w's listeners again if they are paused for want of descriptors
 * (accept.h): a connection of w has just given its descriptors back.
 * On w's thread; cheap when they are not paused. */
void gw_worker_accept_resume(struct gw_worker *w);

/* The number of workers `workers: auto` means here. */
unsigned gw_workers_auto(void);

#endif

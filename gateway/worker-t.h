/* worker-t.h: one gateway worker thread (types only). */
#ifndef SLUICE_GW_WORKER_T_H
#define SLUICE_GW_WORKER_T_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "loop-t.h"

struct gw_dns;

/* Every door's connection embeds one: the worker keeps them all on one
 * list, so that a shutdown ends each through its own door's close. */
struct gw_conn_node {
	struct gw_conn_node *prev, *next;
	void (*shutdown)(struct gw_conn_node *n);
};

/* A worker owns one event loop, one resolver and its own listening socket
 * on every door (SO_REUSEPORT spreads connections), so that nothing on a
 * connection's path is shared between threads but the immutable
 * configuration snapshot and a few atomic counters. */
struct gw_worker {
	unsigned id;
	pthread_t thread;
	struct gw_loop *loop;
	struct gw_dns *dns;
	int forward_fd;                 /* -1: no forward door */
	struct gw_io forward_io;
	int socks_fd;                   /* -1: no SOCKS door */
	struct gw_io socks_io;
	int stop_fd;                    /* an eventfd: stop the loop */
	struct gw_io stop_io;
	struct gw_conn_node *conns;     /* every live connection, any door */
	bool use_splice;
	uint64_t accepted;
};

#endif

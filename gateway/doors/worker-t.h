/* worker-t.h: one gateway worker thread (types only). */
#ifndef SLUICE_GW_WORKER_T_H
#define SLUICE_GW_WORKER_T_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "accept-t.h"
#include "loop-t.h"

#include "dial-t.h"

struct gw_conn;
struct gw_dns;
struct gw_worker_dns;
struct gw_tls_ctx;

/* The doors. A host door (gateway.listen) serves static clients; a lane
 * door listens in the fleet namespace on a lane's gateway address and
 * serves that lane's sandboxes, known by source address. */
enum gw_door_kind {
	GW_DOOR_FORWARD = 0,
	GW_DOOR_SOCKS,
	GW_DOOR_SNI,                    /* lane SNI door: guest TCP/443, by server name */
	GW_DOOR_DNS,                    /* lane DNS door over TCP */
	GW_DOOR_DNS_UDP,                /* lane DNS door over UDP (no accept) */
	GW_DOOR_NAMES,                  /* lane name door: TCP to a synthetic address */
};

struct gw_worker;

struct gw_listener {
	struct gw_worker *w;
	struct gw_io io;
	int fd;
	enum gw_door_kind kind;
	int lane;                       /* -1: a host door; else a lane index */
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
	struct gw_worker_dns *dnsd;     /* the DNS door's TCP connections */
	struct gw_listener *ls;         /* every door this worker accepts on */
	size_t nls;
	/* Out of descriptors, every listener of the worker is out of epoll
	 * (they share the process's table) until the timer, or a connection
	 * of this worker closing, resumes them (accept.h). */
	bool accept_paused;
	struct gw_timer accept_timer;
	struct gw_accept_backoff accept_backoff;
	int stop_fd;                    /* an eventfd: stop the loop */
	struct gw_io stop_io;
	struct gw_conn *conns;          /* every live connection, any door */
	bool use_splice;
	struct gw_tls_ctx *tls_server;  /* intercepting: toward guests */
	struct gw_tls_ctx *tls_client;  /* intercepting: toward origins */
	/* Tests only, NULL in the daemon: reach upstreams through `dial`
	 * instead of gw_dial_start() (same contract: cb runs once, later),
	 * and give `stack` each new side's transport stack (the client's at
	 * accept, the upstream's when attached) to push layers on. */
	void (*dial)(struct gw_dial *d, struct gw_worker *w, const char *host, uint16_t port,
		     gw_dial_cb cb, void *arg);
	void (*stack)(struct gw_conn *c, bool upstream);
};

#endif

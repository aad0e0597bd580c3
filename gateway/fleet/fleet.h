/* fleet.h: the fleet namespace, its lanes, and the sandboxes attached to
 * them.
 *
 * At start the daemon creates (or re-adopts) the named network namespace
 * daemon.fleet_netns. In it: loopback, one holder link ("sluice0": a dummy, or a bridge
 * without ports where the kernel has no dummy driver) holding
 * every egress lane's gateway address as a /32 (the doors listen there),
 * no route anywhere, forwarding off, IPv6 off, and the `inet sluice`
 * nftables table (nft/). A sandbox's link (a veth peer or a tap) is
 * created in the namespace by its backend, carrying the point-to-point
 * address "gateway peer sandbox" so the reply route exists exactly while
 * the link does.
 *
 * Every sandbox on a lane is attached (its address allocated, its
 * anti-spoofing element and counters in place, locked), then unlocked with
 * a policy layer (its lane's doors reachable, connections attributed to it
 * by source address), locked, detached. Each step is one nftables batch
 * and is idempotent. The registry is process-wide: the doors read it from
 * any worker (gw_lane_who() in lanes.h); changes are serialised inside (any thread may make them). */
#ifndef SLUICE_GW_FLEET_H
#define SLUICE_GW_FLEET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf-t.h"

struct gw_policy;

#define GW_FLEET_LINK "sluice0"
#define GW_FLEET_ID_MAX 48

/* ---- the address allocator (pure) ------------------------------------ */

/* The sandbox addresses of one lane: every host address of the subnet but
 * the first (the gateway) and the last (broadcast), handed out round-robin
 * so that a freed address is reused as late as possible. Subnets wider
 * than /16 use their first 65,536 addresses. */
struct gw_addr_pool {
	uint32_t base;                  /* the network address, host order */
	uint32_t size;                  /* addresses covered, from base */
	uint32_t cursor;                /* offset of the next candidate */
	uint32_t used;
	bool whole;                     /* size covers the subnet: last is broadcast */
	uint64_t *bits;                 /* [size / 64], one bit per offset */
};

/* 0, or -EINVAL for a prefix outside /8../30, -ENOMEM. */
int gw_addr_pool_init(struct gw_addr_pool *p, struct in_addr subnet, unsigned prefix);
void gw_addr_pool_fini(struct gw_addr_pool *p);
/* The lane's gateway address (the subnet's first host). */
struct in_addr gw_addr_pool_gateway(const struct gw_addr_pool *p);
/* Allocates the next free address: 0, or -ENOSPC when none is left. */
int gw_addr_pool_take(struct gw_addr_pool *p, struct in_addr *out);
/* Marks a given address taken (re-adoption): 0, -ERANGE (not a sandbox
 * address of this pool), -EEXIST (already taken). */
int gw_addr_pool_claim(struct gw_addr_pool *p, struct in_addr a);
/* Frees an address; freeing one that is not taken is a no-op. */
void gw_addr_pool_put(struct gw_addr_pool *p, struct in_addr a);

/* ---- the fleet -------------------------------------------------------- */

struct gw_fleet;

/* What the registry knows of one sandbox. */
struct gw_fleet_info {
	char id[GW_FLEET_ID_MAX + 1];
	int lane;                       /* index into the configuration's lanes */
	const char *lane_name;          /* borrowed from the configuration */
	bool linked;                    /* false: a lane without doors; no link */
	struct in_addr addr;            /* the sandbox's address (linked only) */
	struct in_addr gateway;         /* its lane's gateway address */
	unsigned prefix;                /* its lane's prefix length */
	char ifname[16];                /* its link in the fleet namespace */
	bool unlocked;
	char policy[64];                /* the layer's policy, "" while locked */
	char version[24];               /* the layer's version hash */
	uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
	uint64_t refused_packets;       /* sent where no door serves it, refused */
};

/* Creates or re-adopts the fleet namespace for c and rebuilds its links
 * and its nftables table in one batch. The configuration is borrowed for
 * the fleet's life (its lanes must not change: they change on restart
 * only). NULL with one line in err. Call before any worker starts. */
struct gw_fleet *gw_fleet_open(const struct conf *c, char *err, size_t errsz);

/* Ends the fleet: with teardown, removes the table, the holder link and
 * the namespace's name (sandbox links go with the namespace); without,
 * leaves everything in place for the next start. NULL is fine. */
void gw_fleet_close(struct gw_fleet *f, bool teardown);

/* The configuration the fleet started with (its lanes are the ones that
 * count until a restart), and a lane's index in it by name, or -1. */
const struct conf *gw_fleet_conf(const struct gw_fleet *f);
int gw_fleet_lane(const struct gw_fleet *f, const char *name);

/* The fleet namespace (an fd the fleet owns), and a socket made inside it
 * (fd or -errno). Safe from the thread that opened the fleet only. */
int gw_fleet_nsfd(const struct gw_fleet *f);
int gw_fleet_socket(const struct gw_fleet *f, int domain, int type, int protocol);

/* The registry. Each returns 0 or -errno with one line in err:
 * -EINVAL bad id or lane, -EEXIST attach of an id on another lane,
 * -ENOENT unknown id, -ENOSPC no address left, or the kernel's error for
 * the nftables batch (the registry is then unchanged). attach of an
 * attached id, unlock of an unlocked one (the layer is replaced) and lock
 * of a locked one succeed; detach of an unknown id is -ENOENT. unlock
 * takes a reference on layer. */
int gw_fleet_attach(struct gw_fleet *f, const char *id, int lane, struct gw_fleet_info *out,
		    char *err, size_t errsz);
/* attach with a given address: a sandbox that outlived the daemon keeps
 * the address (and the link named after it) it had. -EEXIST when the
 * address is taken, -ERANGE when it is not one of the lane's. An id
 * already attached is handled as by attach. */
int gw_fleet_adopt(struct gw_fleet *f, const char *id, int lane, struct in_addr addr,
		   struct gw_fleet_info *out, char *err, size_t errsz);
int gw_fleet_unlock(struct gw_fleet *f, const char *id, struct gw_policy *layer, char *err,
		    size_t errsz);
int gw_fleet_lock(struct gw_fleet *f, const char *id, char *err, size_t errsz);
int gw_fleet_detach(struct gw_fleet *f, const char *id, char *err, size_t errsz);

/* One sandbox (with its nftables counters), or -ENOENT. */
int gw_fleet_get(struct gw_fleet *f, const char *id, struct gw_fleet_info *out);
/* Calls fn for every sandbox, in attach order; returns how many. */
size_t gw_fleet_each(struct gw_fleet *f, void (*fn)(void *arg, const struct gw_fleet_info *i),
		     void *arg);

/* For the refusals' log (refusals.h). The id of the sandbox at address a,
 * copied into id (GW_FLEET_ID_MAX + 1 bytes): 0 or -ENOENT. Any thread
 * (the registry's read lock). */
int gw_fleet_id_at(struct in_addr a, char *id);
/* The refused-packet counter of the sandbox at address a, read from the
 * table now: 0 or -ENOENT (not attached), another -errno. */
int gw_fleet_refused(struct gw_fleet *f, struct in_addr a, uint64_t *packets);
/* Calls fn once per lane with a link (in configuration order) with every
 * packet its sandboxes had refused: those attached now, and those
 * detached since the fleet opened. 0 or the -errno of reading the table
 * (fn not called). */
int gw_fleet_refused_lanes(struct gw_fleet *f,
			   void (*fn)(void *arg, const char *lane, uint64_t packets), void *arg);

/* The environment every sandbox of lane `lane` gets: the proxy variables
 * (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their lowercase forms)
 * for an egress lane, nothing for a lane without doors. Writes up to max
 * "NAME=value" strings into out (each up to GW_FLEET_ENV_LEN bytes);
 * returns how many. Pure. */
#define GW_FLEET_ENV_MAX 8
#define GW_FLEET_ENV_LEN 96
size_t gw_fleet_env(const struct conf_lane *l, struct in_addr gateway,
		    char out[][GW_FLEET_ENV_LEN], size_t max);

#endif

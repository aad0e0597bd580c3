/* tunnel.h: relaying both directions of a tunnel with half-close.
 *
 * The tunnel does no I/O registration of its own: gw_tunnel_run() moves
 * what it can without blocking and says which fd waits for what; the
 * caller, which owns the watches and the timers, sets them. */
#ifndef SLUICE_GW_TUNNEL_H
#define SLUICE_GW_TUNNEL_H

#include "tunnel-t.h"

/* Sets t up between the client's and the upstream's transports (both
 * borrowed). With use_splice, and when both are bare sockets, each
 * direction gets a pipe for splice(2) once it carries bulk; if pipes
 * cannot be had, or splice is refused by the kernel (EINVAL, ENOSYS), that
 * direction copies instead. */
void gw_tunnel_init(struct gw_tunnel *t, struct gw_xprt *client, struct gw_xprt *upstream,
		    bool use_splice);

/* Queues n bytes to be written in direction `side` before anything read
 * later. `counted`: the door has counted them already (in its access
 * line's bytes), so gw_tunnel_bytes() leaves them out. The buffer grows
 * past GW_TUNNEL_BUF for as long as it takes to send them (what came in
 * the same read as a 101 or a CONNECT can be more). 0 or -ENOMEM/-ENOSPC
 * (over GW_TUNNEL_PRELOAD_MAX in all). */
int gw_tunnel_preload(struct gw_tunnel *t, enum gw_tunnel_side side,
		      const char *p, size_t n, bool counted);

/* Gates the client's first bytes (RFC 8446's ClientHello, when they are
 * one): nothing goes upstream until the first record is whole; a hello
 * whose server name is not `host` (borrowed, for the tunnel's life) ends
 * the tunnel with tls-sni-mismatch, one the reader cannot take strictly
 * with its reason (tls-malformed, ...), t->refused set either way. Bytes
 * that are not TLS, and a hello without a server name, pass; so does an
 * EOF before any byte (nothing to gate), while an EOF inside the first
 * record ends the tunnel (client-closed) with none of it delivered. The
 * upstream's bytes flow meanwhile (server-first protocols). */
void gw_tunnel_gate_sni(struct gw_tunnel *t, const char *host);

/* The bytes delivered in direction side, less those preloaded as counted. */
uint64_t gw_tunnel_bytes(const struct gw_tunnel *t, enum gw_tunnel_side side);

/* Moves bytes both ways until every direction would block or has ended.
 * Sets *cev and *uev to the EPOLLIN/EPOLLOUT interest each fd needs and
 * *moved when any byte moved (the caller's idle timer). When one direction
 * reaches EOF its destination is shut down for writing (half-close) and
 * the other keeps going. */
enum gw_tunnel_status gw_tunnel_run(struct gw_tunnel *t, uint32_t *cev,
				    uint32_t *uev, bool *moved);

/* Frees buffers and pipes; the fds stay open (the caller's). */
void gw_tunnel_fini(struct gw_tunnel *t);

#endif

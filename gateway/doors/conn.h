/* conn.h: accepting, watching and ending a connection of any door. */
#ifndef SLUICE_GW_CONN_H
#define SLUICE_GW_CONN_H

#include "conf-t.h"
#include "conn-t.h"

/* Counts a newly accepted socket in against gateway.limits.max_connections,
 * allocates the door's connection (door->size bytes, zeroed), and sets up
 * what every door shares: the snapshot, the peer, TCP_NODELAY, the client
 * transport and its watch (EPOLLIN), the timer, the worker's list. Returns
 * it in state 0, or NULL when it cannot be served: then door->busy has
 * answered and closed fd. */
struct gw_conn *gw_conn_accept(struct gw_worker *w, int fd, int lane, const struct gw_door *door);

/* Hands c over to another door: a connection of `door` (door->size
 * bytes) takes c's client socket and transport stack, its snapshot, peer,
 * identity, policy and the access line owed (c->req), on the same worker,
 * counted once against max_connections; c is then retired without a line
 * and without closing the socket (its door's fini runs, later). c must
 * have no upstream, dial, tunnel or timer under way. Returns the new
 * connection in state 0, watched for nothing, or NULL (out of memory:
 * then c is untouched, for the caller to close). The SOCKS5 and SNI doors
 * hand an intercepted destination to the intercepting exchange. */
struct gw_conn *gw_conn_hand_over(struct gw_conn *c, const struct gw_door *door);

/* The one way a connection ends, from any state and any error: the door
 * settles its line (door->closing), the tunnel is accounted, the owed
 * access line is written (reason `why` unless one was set), the dial is
 * cancelled, timers and watches go, both transports are closed (the
 * client's drained first when c->drain), and the memory is freed after the
 * current batch of events. A second call is a no-op. */
void gw_conn_close(struct gw_conn *c, enum gw_reason why);

/* The door's state, with a debug line for the transition. */
void gw_conn_set_state(struct gw_conn *c, unsigned state);

/* The gateway's configuration in force for c. */
const struct conf_gateway *gw_conn_gateway(const struct gw_conn *c);

/* Writes the access line owed for c->req, if one is (then no more is). A
 * reason set in c->req wins over why; a request allowed in report mode
 * reports the rule's reason. */
void gw_conn_log(struct gw_conn *c, enum gw_reason why);

/* inject= of r: its credentials' names, ','-separated, into out (outsz
 * bytes, GW_CONN_INJECT_MAX holds every one); "" for none. A name that
 * does not fit ends the list with "..." rather than going missing
 * unseen. */
void gw_conn_req_inject(const struct gw_conn_req *r, char *out, size_t outsz);

/* Starts a new line: clears c->req but for the connection's TLS facts
 * (sni, alpn_down, alpn_up, and mode when it is intercept), and marks a
 * line owed from now. */
void gw_conn_req_begin(struct gw_conn *c, const char *method);

/* mode= in the access line: "http", "tunnel", "intercept"; NULL for
 * GW_MODE_NONE (and anything out of range). */
const char *gw_conn_mode_name(enum gw_conn_mode m);

/* A TLS handshake of ours on one side of c ended (upstream: ours with the
 * origin; else the guest's with us), done when why is GW_R_NONE, else
 * failed for that reason (client-rejected-cert, upstream-cert-invalid,
 * ...). Notes the ALPN it agreed for the access line (c->req.alpn_up or
 * alpn_down; "" after a failure) and counts it in /metrics (a resumed
 * upstream session too). Call while the side's TLS layer is still on top
 * of its stack. */
void gw_conn_tls_handshake(struct gw_conn *c, bool upstream, enum gw_reason why);

/* Sets the interest of each side (the upstream's only if there is one). */
void gw_conn_watch(struct gw_conn *c, uint32_t cev, uint32_t uev);

/* (Re)arms the connection's one timer. */
void gw_conn_arm(struct gw_conn *c, uint64_t ms);
void gw_conn_disarm(struct gw_conn *c);

/* Reaches host:port for c under c->policy (dial.h) and makes the
 * connected socket c's upstream side (a TCP transport, watched with no
 * interest yet); then `dialed` runs, once, later. The address tried last
 * is in c->req.upstream by then. */
void gw_conn_dial(struct gw_conn *c, const char *host, uint16_t port, gw_conn_dialed_fn dialed);

/* Closes the upstream side, if any. */
void gw_conn_upstream_drop(struct gw_conn *c);

/* Turns c into a byte tunnel between its two transports (splice when both
 * are bare sockets and the worker allows it). Preload what was read before
 * with gw_tunnel_preload(&c->tun, ...). */
void gw_conn_tunnel_start(struct gw_conn *c);

/* After gw_conn_tunnel_start(), for a tunnel to c->req.host named by the
 * client (CONNECT, SOCKS5): when the host is a name, the guest's
 * ClientHello, if it sends one first, must name it (gw_tunnel_gate_sni();
 * a refusal is logged and ends the tunnel as denied). */
void gw_conn_tunnel_gate(struct gw_conn *c);

/* Moves tunnel bytes, rearms the idle timer on progress, sets the watches,
 * and ends the connection when both directions are done or one fails.
 * Returns false when c ended. */
bool gw_conn_tunnel_run(struct gw_conn *c);

/* Reads and drops what the peer already sent on fd (a bounded amount),
 * then closes it: with unread bytes queued, close(2) would send a reset. */
void gw_conn_drain_close(int fd);

/* Connections open now, over every door and worker (counted in at
 * accept, out at the teardown). */
uint64_t gw_conns_live(void);

/* Every live connection of worker w ends (shutdown). */
void gw_conns_close_all(struct gw_worker *w);

/* The door connection of type `type` that starts with c. */
#define gw_conn_door(c, type) ((type *)(void *)(c))

#endif

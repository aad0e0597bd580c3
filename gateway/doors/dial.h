/* dial.h: from a checked host name to a connected upstream socket.
 *
 * Every door reaches upstream through here, so that the address rules are
 * written once: the name is resolved (or parsed as a literal in any
 * spelling), EVERY address is checked against the policy (one forbidden
 * address refuses the name: mixed answers are how rebinding works), and
 * only checked addresses are connected to, in order, under one connect
 * timeout. The address checked is the address connected to. */
#ifndef SLUICE_GW_DIAL_H
#define SLUICE_GW_DIAL_H

#include "conf-t.h"
#include "dial-t.h"

void gw_dial_init(struct gw_dial *d);

/* Starts reaching host:port (host normalised, and already allowed by the
 * policy's host rules) for a worker. Call it from a loop callback: cb runs
 * exactly once, after that callback returns (never inside this call),
 * unless gw_dial_cancel() comes first. The policy is borrowed for the
 * duration. */
void gw_dial_start(struct gw_dial *d, struct gw_worker *w, const struct conf_gateway *g,
		   const struct gw_policy *policy, const char *host, uint16_t port,
		   gw_dial_cb cb, void *arg);

/* Right after gw_dial_start(): of the name's checked addresses, only `sa`
 * (its address; the port is the dial's) may be connected to, and a name
 * that does not resolve to it fails with sni-address-mismatch. For an
 * IP-literal CONNECT routed by its ClientHello's server name. */
void gw_dial_pin(struct gw_dial *d, const struct sockaddr *sa);

/* Stops a dial under way (no callback) and frees what it holds. Safe on
 * an idle dial. */
void gw_dial_cancel(struct gw_dial *d);

/* The HTTP status a failed dial is answered with (and logged as): 504 for
 * a timeout, 403 for a forbidden address, 502 for the rest. */
unsigned gw_dial_status(enum gw_reason why);

#endif

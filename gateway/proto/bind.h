/* bind.h: the binding rules of an intercepted or gated connection.
 *
 * Every way in binds one destination D: the CONNECT's or the SOCKS5
 * request's host (normalised: lowercase, no trailing dot), or the SNI
 * door's server name. What the guest says later must agree with it, and
 * these are the only places that decide whether it does:
 *
 *   - its ClientHello (gw_bind_sni): a server name other than D is
 *     refused (tls-sni-mismatch); no server name is answered for D; a
 *     hello the reader cannot take strictly is refused with its reason;
 *   - each request inside an intercepted connection (gw_bind_host): its
 *     one Host field must be D, or D:port, the port as the CONNECT named it
 *     (D alone only when that port is 443); anything else is 421
 *     host-mismatch.
 *
 * (An IP-literal CONNECT is bound to the hello's name N only when the
 * literal is one of N's checked addresses: that needs DNS, and is the
 * dial's, gw_dial_pin() with gw_addr_same().) */
#ifndef SLUICE_GW_BIND_H
#define SLUICE_GW_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "reason-t.h"
#include "tlshello-t.h"

/* The hello's word for D: GW_R_NONE (it agrees, or names nothing), else
 * the refusal's reason. r and h are gw_tlshello_parse()'s (not NEED_MORE). */
enum gw_reason gw_bind_sni(const char *d, enum gw_tlshello_result r, const struct gw_tlshello *h);

/* An inner request's Host value (v, n bytes; NULL: no Host, or more than
 * one) for D and the CONNECT's port: GW_R_NONE or GW_R_HOST_MISMATCH. */
enum gw_reason gw_bind_host(const char *d, uint16_t port, const char *v, size_t n);

#endif

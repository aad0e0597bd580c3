/* intercept.h: the intercepting side of the HTTP exchange.
 *
 * A CONNECT to a host the policy's `intercept:` list names is not
 * tunnelled: the gateway first makes its own TLS connection to the origin
 * (every address checked, the origin's certificate verified against the
 * system roots and certs.upstream_ca, SNI and hostname D, ALPN http/1.1),
 * then answers 200, reads the guest's ClientHello (an SNI that differs
 * from D is refused: tls-sni-mismatch), presents a leaf for D minted by
 * the CA (certs/), and runs the same exchange over TLS on both sides:
 * every inner request is checked (Host must be D, port-aware, or 421
 * host-mismatch; TRACE and TRACK 405; the policy again) and relayed. An
 * origin whose certificate fails verification is still answered, inside
 * the guest's TLS: 502 upstream-cert-invalid, nothing of the request sent.
 *
 *   DIALING ──▶ TLS_UP ──▶ TLS_HELLO ──▶ TLS_DOWN ──▶ HEAD ──▶ ... (the exchange)
 *
 * Three ways in, one state machine: the forward door's CONNECT, a SOCKS5
 * CONNECT (the SOCKS5 door hands the connection over once the policy
 * allowed the request; the success reply is the opening instead of the
 * 200), and a guest's TCP/443 on a lane's SNI door (handed over after the
 * hello: D is its server name, the hello is already read, no opening).
 * Each binds one destination D; the exchange's states are the same.
 */
#ifndef SLUICE_GW_INTERCEPT_H
#define SLUICE_GW_INTERCEPT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "exchange-t.h"

struct certs_cache;
struct evp_pkey_st;
struct x509_st;
struct gw_worker;

/* What the workers need to intercept, set once at start before they
 * start (borrowed for the daemon's life): the leaf cache, the shared leaf
 * key, the CA certificate (sent as the chain), and the extra trust anchors
 * for origins (certs.upstream_ca, NULL: the system's only). 0, or -1 with
 * a line in err. Without it, nothing is intercepted. */
int gw_intercept_setup(struct certs_cache *cache, struct evp_pkey_st *leaf_key,
		       struct x509_st *ca, const char *upstream_ca, char *err, size_t errsz);
void gw_intercept_teardown(void);

/* A worker's TLS contexts (made at its start, freed at its end). */
int gw_intercept_worker_init(struct gw_worker *w, char *err, size_t errsz);
void gw_intercept_worker_fini(struct gw_worker *w);

/* True when host:port is to be intercepted for c: its worker can (a CA
 * is set up) and c's policy lists it under intercept:. */
bool gw_intercept_wants(const struct gw_conn *c, const char *host, uint16_t port);

/* True when the exchange's CONNECT (c->req.host:port) is to be
 * intercepted on this worker. */
bool gw_intercept_wanted(struct gw_h1x *x);

/* Hands c, of the SOCKS5 door (way GW_WAY_SOCKS5: its request allowed,
 * nothing answered yet) or the SNI door (GW_WAY_SNI: pre[0..npre) is what
 * the guest sent, its ClientHello first), to the intercepting exchange for
 * D = c->req.host:port, which dials at once. c is gone after the call. */
void gw_intercept_enter(struct gw_conn *c, enum gw_h1x_way way, const void *pre, size_t npre);

/* An IP-literal CONNECT (c->req.host:port) that the policy refuses only
 * as not-allowed is routed by the server name of the guest's ClientHello:
 * the opening is sent, the hello read (state SNI_PEEK); the name N must be
 * allowed and resolve, among its checked addresses, to the literal, which
 * is then what is connected to (sni-address-mismatch if not), and the
 * connection goes on as a CONNECT to N: intercepted if N is, else a
 * tunnel. No hello, or none with a name: not-allowed, closed. A literal
 * the address rules refuse (private, loopback, ...) is not routed. Returns
 * true if it took the connection, false when it does not apply. */
bool gw_intercept_literal(struct gw_h1x *x);

/* Whether gw_intercept_literal() applies to c->req.host:port (the literal
 * parsed into *lit, if lit). */
bool gw_intercept_literal_wanted(const struct gw_conn *c, struct sockaddr_storage *lit);

/* A dial for a handed-over connection failed: answered the way's own way
 * (a SOCKS5 reply; the SNI door's close) and logged. */
void gw_intercept_refuse_early(struct gw_h1x *x, enum gw_reason why, int err,
			       const char *detail);

/* A connected upstream for an intercepted destination: puts the TLS client
 * layer on it and enters TLS_UP. */
void gw_intercept_upstream(struct gw_h1x *x);

/* Runs TLS_UP, TLS_HELLO and TLS_DOWN (the exchange's run loop calls it
 * in those states). Returns true if it should run again. */
bool gw_intercept_run(struct gw_h1x *x, uint32_t *cev, uint32_t *uev);

/* The route of an inner request (gw_h1x_route_fn): Host is D, the method
 * is not TRACE/TRACK, the policy allows D. */
int gw_intercept_route(struct gw_h1x *x);

#endif

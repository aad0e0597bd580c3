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
 */
#ifndef SLUICE_GW_INTERCEPT_H
#define SLUICE_GW_INTERCEPT_H

#include <stdbool.h>
#include <stddef.h>

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

/* True when the exchange's CONNECT (c->req.host:port) is to be
 * intercepted on this worker. */
bool gw_intercept_wanted(struct gw_h1x *x);

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

/* xprt_tls.h: TLS transports (server toward the guest, client upstream)
 * over any transport below them, and the contexts they are made from.
 *
 * A TLS layer is a struct gw_xprt (xprt.h) whose SSL reads and writes
 * through the layer below with gw_xprt_recv()/gw_xprt_sendv(), never the
 * socket, so it stacks on TCP, on a test's fake layer, or on anything
 * later. Everything is non-blocking and runs on the thread that owns the
 * context; nothing here logs.
 *
 * Driving it. The handshake runs inside recv/sendv, or explicitly with
 * gw_xprt_tls_handshake(). -EAGAIN from any of them means "wait for
 * gw_xprt_want(x, dir) on the socket, then call again"; a TLS read may
 * need the socket writable and a write may need it readable, and while
 * ciphertext waits in the layer's output buffer want() adds EPOLLOUT to
 * either direction. A paused server handshake (GW_TLS_PAUSE) wants
 * nothing: the caller resumes it with gw_xprt_tls_server_answer().
 *
 * Writes. sendv() takes at most one record (16 KiB) per call and never
 * asks to be called again with the same bytes: what it reports taken is
 * encrypted, and sent or kept in the layer's output buffer (allocated
 * under back-pressure only, freed once drained), which every later call
 * flushes first. Before closing a connection whose last bytes matter,
 * drive gw_xprt_tls_flush() to 0.
 *
 * End of stream. recv() returns 0 only once the peer's close_notify has
 * arrived. The stream ending below without it (EOF or a reset) after or
 * during the handshake is a truncation: -ECONNRESET, and
 * gw_xprt_tls_truncated() is true, so that a close-delimited HTTP body is
 * never taken as complete; a caller to whom it is harmless (an idle
 * keep-alive client going away) may treat it as an end. shutdown() queues
 * close_notify, then half-closes the layer below once it has gone out.
 *
 * Errors are negative errno values: -EPROTO for anything TLS refused
 * (a bad record, an alert, a failed verification, a protocol version or a
 * hello refused), -ECONNRESET for a truncation, the layer below's own
 * error otherwise (-EPIPE after our own shutdown). The first error sticks:
 * later calls return it again. gw_xprt_tls_error() keeps one line saying
 * why, made of OpenSSL's reason, an alert's name or the verify error:
 * never key material or application bytes. */
#ifndef SLUICE_GW_XPRT_TLS_H
#define SLUICE_GW_XPRT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "xprt.h"
#include "xprt_tls-t.h"

/* ---- trust and contexts (tls_ctx.c) ---- */

/* A trust store for upstream verification: the system's roots (the
 * OpenSSL default file and directory) when system_roots, plus the PEM
 * certificates in extra_ca_file (certs.upstream_ca) when not NULL. Loaded
 * once, at start; it may be shared by every worker's client context (it
 * is reference-counted and safe for concurrent lookups). NULL and a line
 * in err on failure (a file that cannot be read, or holds no
 * certificate). Free with gw_tls_trust_free(). */
struct x509_store_st *gw_tls_trust_new(const char *extra_ca_file, bool system_roots, char *err,
                                       size_t errsz);
void gw_tls_trust_free(struct x509_store_st *trust);

/* A server context: TLS 1.2 and 1.3, no renegotiation, no session
 * tickets or cache, no early data, idle buffers released. It has no
 * certificate: each layer presents the leaf its caller chooses. */
struct gw_tls_ctx *gw_tls_ctx_server_new(char *err, size_t errsz);
/* A client context: TLS 1.2 and 1.3, the peer verified against trust
 * (which it references; the caller keeps its own), no renegotiation,
 * idle buffers released, and a session cache of at most sess_max
 * sessions (0: none) keyed by the layers' session_key. */
struct gw_tls_ctx *gw_tls_ctx_client_new(struct x509_store_st *trust, size_t sess_max, char *err,
                                         size_t errsz);
/* Frees a context (NULL: nothing). Every layer made from it must be
 * closed first. */
void gw_tls_ctx_free(struct gw_tls_ctx *ctx);
enum gw_tls_role gw_tls_ctx_role(const struct gw_tls_ctx *ctx);
/* The session cache's counters and its size now. */
void gw_tls_ctx_stats(const struct gw_tls_ctx *ctx, struct gw_tls_sess_stats *st, size_t *n);
/* The SSL_CTX, for what this API does not cover (tests, ciphers). */
struct ssl_ctx_st *gw_tls_ctx_ssl(struct gw_tls_ctx *ctx);

/* ---- layers (xprt_tls.c) ---- */

/* A new TLS-server layer, not yet on a stack: push it with gw_xprt_push().
 * ctx must be a server context and outlive the layer. NULL and a line in
 * err when it cannot be made (bad parameters, out of memory). The layer
 * is freed by gw_xprt_close() (or its own close op). */
struct gw_xprt *gw_xprt_tls_server_new(struct gw_tls_ctx *ctx, const struct gw_tls_server_params *p,
                                       char *err, size_t errsz);
/* A new TLS-client layer for p->host (see xprt_tls-t.h); as above. */
struct gw_xprt *gw_xprt_tls_client_new(struct gw_tls_ctx *ctx, const struct gw_tls_client_params *p,
                                       char *err, size_t errsz);

/* True when x is a TLS layer made here. The calls below take only such a
 * layer (the top of a stack the caller pushed it on, usually). */
bool gw_xprt_is_tls(const struct gw_xprt *x);

/* Drives the handshake: 0 once it is done and our last flight has gone
 * down to the layer below, -EAGAIN, or -errno. */
int gw_xprt_tls_handshake(struct gw_xprt *x);
/* Answers a paused server handshake (a: the answer; NULL: refuse it).
 * 0, or -EINVAL when the layer is not paused or a is incomplete. The
 * caller then drives the handshake again. */
int gw_xprt_tls_server_answer(struct gw_xprt *x, const struct gw_tls_answer *a);
/* Sends what the output buffer holds: 0 when it is empty, -EAGAIN, or
 * -errno. */
int gw_xprt_tls_flush(struct gw_xprt *x);

/* What the handshake settled, or found. Strings are the layer's. */
bool gw_xprt_tls_done(const struct gw_xprt *x);           /* handshake finished */
const char *gw_xprt_tls_alpn(const struct gw_xprt *x);    /* picked; "" none */
const char *gw_xprt_tls_sni(const struct gw_xprt *x);     /* server: the client's; "" none */
const char *gw_xprt_tls_version(const struct gw_xprt *x); /* "TLSv1.3"; "" before */
bool gw_xprt_tls_resumed(const struct gw_xprt *x);        /* client: a cached session */
/* Client: the certificate verification result (X509_V_OK, 0, when it
 * passed or has not run). */
long gw_xprt_tls_verify_result(const struct gw_xprt *x);
/* The alert the peer sent (a fatal one, or close_notify: 0), -1 none:
 * a guest that rejects our leaf says so with unknown_ca (48) or
 * bad_certificate (42). */
int gw_xprt_tls_peer_alert(const struct gw_xprt *x);
/* The stream ended below without close_notify. */
bool gw_xprt_tls_truncated(const struct gw_xprt *x);
/* Why the last call failed: one line, "" when nothing failed. */
const char *gw_xprt_tls_error(const struct gw_xprt *x);

#endif

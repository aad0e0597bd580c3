/* xprt_tls-t.h: the TLS transports and their contexts (types only).
 *
 * See xprt_tls.h for the contract. OpenSSL types are named by their
 * struct tags so that this header needs no OpenSSL include. */
#ifndef SLUICE_GW_XPRT_TLS_T_H
#define SLUICE_GW_XPRT_TLS_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ssl_ctx_st;    /* SSL_CTX */
struct x509_st;       /* X509 */
struct x509_store_st; /* X509_STORE */
struct evp_pkey_st;   /* EVP_PKEY */
struct stack_st_X509; /* STACK_OF(X509) */

/* A session cache key ("claim:name:port", the caller's choice) and an
 * ALPN protocol name, each with its NUL. */
#define GW_TLS_SESS_KEY_MAX 320
#define GW_TLS_ALPN_MAX     256
/* A server name as the client sent it (at most 253 bytes), and its NUL. */
#define GW_TLS_SNI_MAX 254
/* The one-line error a layer keeps (gw_xprt_tls_error()). */
#define GW_TLS_ERR_MAX 192

/* The role a context serves. */
enum gw_tls_role {
	GW_TLS_SERVER = 0, /* toward the guest: presents minted leaves */
	GW_TLS_CLIENT,     /* upstream: verifies the origin */
};

/* What a client context's session cache did (gw_tls_ctx_stats()). */
struct gw_tls_sess_stats {
	uint64_t hits; /* a session offered for resumption */
	uint64_t misses;
	uint64_t stores;
	uint64_t evictions; /* the least recently used made room */
};

/* A context: one SSL_CTX and, for a client, its session cache. One per
 * worker per role; a context and the layers made from it belong to one
 * thread. */
struct gw_tls_ctx;

/* What a TLS-server layer learns from the ClientHello, before it chooses
 * a certificate. Valid during the hello callback only. */
struct gw_tls_hello {
	const char *sni; /* lowercased; "" when the client sent none */
	/* The ALPN list as offered, in wire format (length-prefixed names,
	 * checked well-formed); NULL and 0 when the client offered none. */
	const uint8_t *alpn;
	size_t alpn_len;
};

/* The server's answer: the leaf to present and the ALPN protocol to pick.
 * cert/key/chain are borrowed; the layer takes its own references. */
struct gw_tls_answer {
	struct x509_st *cert;
	struct evp_pkey_st *key;
	struct stack_st_X509 *chain; /* intermediates; NULL: none */
	/* The protocol to answer with ("h2", "http/1.1"); NULL or "": no
	 * ALPN answer. One the client did not offer is a fatal
	 * no_application_protocol alert (a caller bug: offer upstream only
	 * what the client offered). */
	const char *alpn;
};

enum gw_tls_verdict {
	GW_TLS_ANSWER = 0, /* *answer is filled: go on */
	GW_TLS_PAUSE,      /* answer later, with gw_xprt_tls_server_answer() */
	GW_TLS_REFUSE,     /* end the handshake with a handshake_failure alert */
};

/* Called once per server layer when its ClientHello has arrived, on the
 * thread driving the layer, inside a recv/sendv/handshake call: it must
 * not close the layer. */
typedef enum gw_tls_verdict (*gw_tls_hello_fn)(void *arg, const struct gw_tls_hello *hello,
                                               struct gw_tls_answer *answer);

/* A TLS-server layer's parameters. */
struct gw_tls_server_params {
	/* The answer known up front (the caller read the hello itself):
	 * used when hello is NULL or does not fill one. NULL: none. */
	const struct gw_tls_answer *answer;
	gw_tls_hello_fn hello; /* NULL: answer must be set */
	void *arg;
	/* Bytes already read from the layer below (the ClientHello the
	 * caller peeked at): TLS reads them first. Copied. */
	const void *pre;
	size_t npre;
};

/* A TLS-client layer's parameters. */
struct gw_tls_client_params {
	/* The destination: a name (sent as SNI and verified against the
	 * certificate's names) or an IP literal (no SNI; verified against
	 * its IP addresses). Required. */
	const char *host;
	/* The ALPN offer in wire format; NULL or 0: none. */
	const uint8_t *alpn;
	size_t alpn_len;
	/* The session cache key; NULL: no resumption for this connection. */
	const char *session_key;
};

#endif

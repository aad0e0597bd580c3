/* tls-int.h: what tls_ctx.c and xprt_tls.c share, and nothing else
 * includes: the context's insides and the callbacks a context installs
 * for its layers. */
#ifndef SLUICE_GW_TLS_INT_H
#define SLUICE_GW_TLS_INT_H

#include <openssl/ssl.h>

#include "xprt_tls-t.h"

struct gw_tls_sess {
	char key[GW_TLS_SESS_KEY_MAX]; /* "" : a free slot */
	SSL_SESSION *s;                /* owned */
	uint64_t used;                 /* the cache clock when last stored or used */
};

struct gw_tls_ctx {
	SSL_CTX *ssl;
	enum gw_tls_role role;
	struct gw_tls_sess *sess; /* client: the session cache */
	size_t sess_max;
	uint64_t clock;
	struct gw_tls_sess_stats st;
};

/* The context-wide OpenSSL callbacks, which find their layer through the
 * SSL's app data (xprt_tls.c). */
int gw_tls_on_hello(SSL *ssl, int *al, void *arg);
int gw_tls_on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg);
void gw_tls_on_info(const SSL *ssl, int where, int ret);
int gw_tls_on_new_session(SSL *ssl, SSL_SESSION *sess);

/* The session cache (tls_ctx.c). put takes the reference to s (always:
 * it frees s when it keeps nothing); take returns a session to offer
 * (a reference for the caller) or NULL; forget drops key's entry. */
void gw_tls_sess_put(struct gw_tls_ctx *ctx, const char *key, SSL_SESSION *s);
SSL_SESSION *gw_tls_sess_take(struct gw_tls_ctx *ctx, const char *key);
void gw_tls_sess_forget(struct gw_tls_ctx *ctx, const char *key);

#endif

/* tls_ctx.c: trust stores, TLS contexts and the upstream session cache
 * (xprt_tls.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "tls-int.h"
#include "xprt_tls.h"

/* OpenSSL's reason for the last failure, or `fallback`; the queue is
 * emptied either way. */
static const char *
ossl_reason(const char *fallback)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : fallback;
}

/* ---- trust ---- */

struct x509_store_st *
gw_tls_trust_new(const char *extra_ca_file, bool system_roots, char *err, size_t errsz)
{
	X509_STORE *st;

	ERR_clear_error();
	if (!(st = X509_STORE_new())) {
		snprintf(err, errsz, "out of memory for a trust store");
		return NULL;
	}
	if (system_roots && X509_STORE_set_default_paths(st) != 1) {
		snprintf(err, errsz, "cannot load the system trust store: %s",
		         ossl_reason("unknown error"));
		goto fail;
	}
	if (extra_ca_file) {
		/* Counted before and after: a readable file with no
		 * certificate in it is a mistake worth naming. */
		int before = sk_X509_OBJECT_num(X509_STORE_get0_objects(st));

		if (X509_STORE_load_file(st, extra_ca_file) != 1) {
			snprintf(err, errsz,
			         "%s: cannot load upstream CA certificates (%s); certs.upstream_ca "
			         "must name a readable PEM file",
			         extra_ca_file, ossl_reason("unreadable"));
			goto fail;
		}
		if (sk_X509_OBJECT_num(X509_STORE_get0_objects(st)) <= before) {
			snprintf(err, errsz,
			         "%s: no new certificate in it; certs.upstream_ca "
			         "must hold PEM certificates",
			         extra_ca_file);
			goto fail;
		}
	}
	ERR_clear_error();
	return st;
fail:
	X509_STORE_free(st);
	return NULL;
}

void
gw_tls_trust_free(struct x509_store_st *trust)
{
	X509_STORE_free(trust);
}

/* ---- contexts ---- */

/* What both roles share. */
static struct gw_tls_ctx *
ctx_new(enum gw_tls_role role, char *err, size_t errsz)
{
	struct gw_tls_ctx *ctx;

	ERR_clear_error();
	if (!(ctx = calloc(1, sizeof(*ctx)))) {
		snprintf(err, errsz, "out of memory for a TLS context");
		return NULL;
	}
	ctx->role = role;
	ctx->ssl = SSL_CTX_new(role == GW_TLS_SERVER ? TLS_server_method() : TLS_client_method());
	if (!ctx->ssl) {
		snprintf(err, errsz, "cannot make a TLS context: %s", ossl_reason("unknown error"));
		free(ctx);
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx->ssl, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx->ssl, TLS1_3_VERSION) != 1) {
		snprintf(err, errsz, "cannot limit TLS versions: %s", ossl_reason("unknown error"));
		gw_tls_ctx_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx->ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	/* sendv() hands records over one at a time from wherever the
	 * caller's bytes are; idle connections give their buffers back. */
	SSL_CTX_set_mode(ctx->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	                               SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                               SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_max_early_data(ctx->ssl, 0);
	SSL_CTX_set_recv_max_early_data(ctx->ssl, 0);
	SSL_CTX_set_info_callback(ctx->ssl, gw_tls_on_info);
	return ctx;
}

struct gw_tls_ctx *
gw_tls_ctx_server_new(char *err, size_t errsz)
{
	struct gw_tls_ctx *ctx = ctx_new(GW_TLS_SERVER, err, errsz);

	if (!ctx)
		return NULL;
	/* No resumption toward guests: every connection gets a leaf
	 * chosen for it, and no ticket key needs guarding. */
	SSL_CTX_set_options(ctx->ssl, SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_num_tickets(ctx->ssl, 0);
	SSL_CTX_set_session_cache_mode(ctx->ssl, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_client_hello_cb(ctx->ssl, gw_tls_on_hello, NULL);
	SSL_CTX_set_alpn_select_cb(ctx->ssl, gw_tls_on_alpn, NULL);
	return ctx;
}

struct gw_tls_ctx *
gw_tls_ctx_client_new(struct x509_store_st *trust, size_t sess_max, char *err, size_t errsz)
{
	struct gw_tls_ctx *ctx;

	if (!trust) {
		snprintf(err, errsz, "a client context needs a trust store");
		return NULL;
	}
	if (!(ctx = ctx_new(GW_TLS_CLIENT, err, errsz)))
		return NULL;
	SSL_CTX_set1_cert_store(ctx->ssl, trust);
	SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER, NULL);
	if (sess_max) {
		if (!(ctx->sess = calloc(sess_max, sizeof(*ctx->sess)))) {
			snprintf(err, errsz, "out of memory for a session cache");
			gw_tls_ctx_free(ctx);
			return NULL;
		}
		ctx->sess_max = sess_max;
		/* Sessions reach gw_tls_on_new_session(), and only the
		 * cache here keeps them (keyed by the caller's string, not
		 * by OpenSSL's session id). */
		SSL_CTX_set_session_cache_mode(ctx->ssl, SSL_SESS_CACHE_CLIENT |
		                                             SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx->ssl, gw_tls_on_new_session);
	} else {
		SSL_CTX_set_session_cache_mode(ctx->ssl, SSL_SESS_CACHE_OFF);
	}
	return ctx;
}

void
gw_tls_ctx_free(struct gw_tls_ctx *ctx)
{
	if (!ctx)
		return;
	for (size_t i = 0; i < ctx->sess_max; i++)
		SSL_SESSION_free(ctx->sess[i].s);
	free(ctx->sess);
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

enum gw_tls_role
gw_tls_ctx_role(const struct gw_tls_ctx *ctx)
{
	return ctx->role;
}

struct ssl_ctx_st *
gw_tls_ctx_ssl(struct gw_tls_ctx *ctx)
{
	return ctx->ssl;
}

void
gw_tls_ctx_stats(const struct gw_tls_ctx *ctx, struct gw_tls_sess_stats *st, size_t *n)
{
	*st = ctx->st;
	*n = 0;
	for (size_t i = 0; i < ctx->sess_max; i++)
		*n += ctx->sess[i].s != NULL;
}

/* ---- the session cache: a small array, least recently used out ---- */

static struct gw_tls_sess *
sess_find(struct gw_tls_ctx *ctx, const char *key)
{
	for (size_t i = 0; i < ctx->sess_max; i++)
		if (ctx->sess[i].s && strcmp(ctx->sess[i].key, key) == 0)
			return &ctx->sess[i];
	return NULL;
}

static void
sess_drop(struct gw_tls_sess *e)
{
	SSL_SESSION_free(e->s);
	e->s = NULL;
	e->key[0] = '\0';
}

void
gw_tls_sess_put(struct gw_tls_ctx *ctx, const char *key, SSL_SESSION *s)
{
	struct gw_tls_sess *e;
	size_t len = strlen(key);

	if (!ctx->sess_max || len == 0 || len >= GW_TLS_SESS_KEY_MAX ||
	    !SSL_SESSION_is_resumable(s)) {
		SSL_SESSION_free(s);
		return;
	}
	if (!(e = sess_find(ctx, key))) {
		e = &ctx->sess[0];
		for (size_t i = 0; i < ctx->sess_max; i++) {
			if (!ctx->sess[i].s) {
				e = &ctx->sess[i];
				break;
			}
			if (ctx->sess[i].used < e->used)
				e = &ctx->sess[i];
		}
		if (e->s)
			ctx->st.evictions++;
	}
	if (e->s)
		sess_drop(e);
	memcpy(e->key, key, len + 1);
	e->s = s;
	e->used = ++ctx->clock;
	ctx->st.stores++;
}

SSL_SESSION *
gw_tls_sess_take(struct gw_tls_ctx *ctx, const char *key)
{
	struct gw_tls_sess *e;
	SSL_SESSION *s;

	if (!ctx->sess_max)
		return NULL;
	if (!(e = sess_find(ctx, key)) || !SSL_SESSION_is_resumable(e->s)) {
		if (e)
			sess_drop(e);
		ctx->st.misses++;
		return NULL;
	}
	ctx->st.hits++;
	s = e->s;
	if (SSL_SESSION_get_protocol_version(s) >= TLS1_3_VERSION) {
		/* A TLS 1.3 ticket is used once (RFC 8446 C.4); the server
		 * sends a new one on the resumed connection. */
		e->s = NULL;
		e->key[0] = '\0';
		return s;
	}
	e->used = ++ctx->clock;
	SSL_SESSION_up_ref(s);
	return s;
}

void
gw_tls_sess_forget(struct gw_tls_ctx *ctx, const char *key)
{
	struct gw_tls_sess *e;

	if (ctx->sess_max && (e = sess_find(ctx, key)))
		sess_drop(e);
}

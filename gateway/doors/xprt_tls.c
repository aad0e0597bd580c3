/* xprt_tls.c: the TLS-server and TLS-client transports (xprt_tls.h).
 *
 * The SSL's only BIO is ours: its read and write call the layer below,
 * so TLS never touches the socket. Its write never makes the SSL retry
 * (what the layer below does not take waits in the layer's output
 * buffer), which keeps sendv() free of OpenSSL's "retry with the same
 * arguments" rule: the caller sees plain stream semantics. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls-int.h"
#include "xprt_tls.h"

/* One record of application data per sendv(). */
#define TLS_CHUNK 16384
/* The output buffer's bound: a record and a large handshake flight. */
#define TLS_OUT_MAX (64 * 1024)

struct tls {
	struct gw_xprt x;       /* first: the ops get this */
	struct gw_tls_ctx *ctx; /* borrowed */
	SSL *ssl;
	bool server;
	/* the bytes read before us (a peeked ClientHello) */
	uint8_t *pre;
	size_t npre, pre_off;
	/* ciphertext the layer below has not taken yet */
	uint8_t *out;
	size_t out_off, out_len;
	/* what the layer below said */
	int below_err; /* its errno, 0: none */
	bool below_eof;
	uint32_t below_want_in, below_want_out;
	/* where we are */
	int err;          /* the sticky error (negative), 0: none */
	bool peer_closed; /* close_notify received */
	bool shut;        /* shutdown() was called */
	bool shut_below;  /* ... and the layer below half-closed */
	bool paused;      /* the hello callback said PAUSE */
	bool truncated;
	bool settled;     /* the reports below are filled */
	uint32_t want[2]; /* after -EAGAIN in recv, in sendv */
	int alert_rx;
	/* server: the hello and the answer */
	gw_tls_hello_fn hello;
	void *arg;
	bool hello_seen, answered, refused;
	X509 *cert;
	EVP_PKEY *key;
	STACK_OF(X509) * chain;
	char alpn_pick[GW_TLS_ALPN_MAX];
	char sni[GW_TLS_SNI_MAX];
	/* client */
	char *sess_key;
	bool resumed;
	/* reports */
	char alpn[GW_TLS_ALPN_MAX];
	char errmsg[GW_TLS_ERR_MAX];
};

static const struct gw_xprt_ops tls_server_ops, tls_client_ops;

static struct tls *
tls_of(const struct gw_xprt *x)
{
	return (struct tls *)(void *)(uintptr_t)x;
}

bool
gw_xprt_is_tls(const struct gw_xprt *x)
{
	return x && (x->ops == &tls_server_ops || x->ops == &tls_client_ops);
}

static void set_errmsg(struct tls *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
set_errmsg(struct tls *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->errmsg, sizeof(t->errmsg), fmt, ap);
	va_end(ap);
}

/* ---- the output buffer ---- */

/* Sends what waits: 0 when empty, -EAGAIN, or the layer below's error.
 * Once empty it is freed, and a pending half-close goes down. */
static int
out_flush(struct tls *t)
{
	while (t->out_off < t->out_len) {
		struct iovec iov = {.iov_base = t->out + t->out_off,
		                    .iov_len = t->out_len - t->out_off};
		ssize_t r = gw_xprt_sendv(t->x.below, &iov, 1);

		if (r == -EAGAIN) {
			t->below_want_out = gw_xprt_want(t->x.below, EPOLLOUT);
			return -EAGAIN;
		}
		if (r < 0) {
			t->below_err = (int)-r;
			return (int)r;
		}
		t->out_off += (size_t)r;
	}
	free(t->out);
	t->out = NULL;
	t->out_off = t->out_len = 0;
	if (t->shut && !t->shut_below) {
		t->shut_below = true;
		gw_xprt_shutdown(t->x.below);
	}
	return 0;
}

/* Keeps p[0..n) after what waits. false: over the bound. */
static bool
out_keep(struct tls *t, const uint8_t *p, size_t n)
{
	uint8_t *o;

	if (t->out_off) {
		memmove(t->out, t->out + t->out_off, t->out_len - t->out_off);
		t->out_len -= t->out_off;
		t->out_off = 0;
	}
	if (t->out_len + n > TLS_OUT_MAX)
		return false;
	if (!(o = realloc(t->out, t->out_len + n)))
		return false;
	memcpy(o + t->out_len, p, n);
	t->out = o;
	t->out_len += n;
	return true;
}

/* ---- the BIO: OpenSSL's view of the layer below ---- */

static int
bio_write(BIO *b, const char *p, int len)
{
	struct tls *t = BIO_get_data(b);
	struct iovec iov = {.iov_base = (void *)(uintptr_t)p, .iov_len = (size_t)len};
	ssize_t r = 0;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (t->out_len == t->out_off) {
		r = gw_xprt_sendv(t->x.below, &iov, 1);
		if (r == len)
			return len;
		if (r == -EAGAIN) {
			t->below_want_out = gw_xprt_want(t->x.below, EPOLLOUT);
			r = 0;
		} else if (r < 0) {
			t->below_err = (int)-r;
			return -1;
		}
	}
	if (!out_keep(t, (const uint8_t *)p + r, (size_t)len - (size_t)r)) {
		/* Only a handshake flight can be this large; what went
		 * down counts, the rest comes again. */
		if (r > 0)
			return (int)r;
		BIO_set_retry_write(b);
		return -1;
	}
	return len;
}

static int
bio_read(BIO *b, char *p, int len)
{
	struct tls *t = BIO_get_data(b);
	ssize_t r;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (t->pre_off < t->npre) {
		size_t n = t->npre - t->pre_off;

		n = n < (size_t)len ? n : (size_t)len;
		memcpy(p, t->pre + t->pre_off, n);
		t->pre_off += n;
		if (t->pre_off == t->npre) {
			free(t->pre);
			t->pre = NULL;
			t->npre = t->pre_off = 0;
		}
		return (int)n;
	}
	r = gw_xprt_recv(t->x.below, p, (size_t)len);
	if (r > 0)
		return (int)r;
	if (r == 0) {
		t->below_eof = true;
		return 0;
	}
	if (r == -EAGAIN) {
		t->below_want_in = gw_xprt_want(t->x.below, EPOLLIN);
		BIO_set_retry_read(b);
		return -1;
	}
	t->below_err = (int)-r;
	return -1;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls *t = BIO_get_data(b);

	(void)num;
	(void)ptr;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_EOF:
		return t && t->below_eof;
	default:
		return 0;
	}
}

static int
bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static BIO_METHOD *bio_meth;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

/* Made once per process and kept: layers on every worker share it. */
static void
bio_meth_make(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice-xprt");

	if (m && BIO_meth_set_write(m, bio_write) == 1 && BIO_meth_set_read(m, bio_read) == 1 &&
	    BIO_meth_set_ctrl(m, bio_ctrl) == 1 && BIO_meth_set_create(m, bio_create) == 1) {
		bio_meth = m;
		return;
	}
	BIO_meth_free(m);
}

/* ---- errors ---- */

/* Sets what direction dir (0 reading, 1 writing, 2 both: the handshake)
 * waits for. */
static int
again(struct tls *t, int dir, uint32_t w)
{
	if (dir != 1)
		t->want[0] = w;
	if (dir != 0)
		t->want[1] = w;
	return -EAGAIN;
}

/* The sticky error for an SSL call that returned ret: -EAGAIN (with the
 * direction's want set), 0 for close_notify, or a negative errno with
 * errmsg saying why. dir: as again(). */
static int
ssl_fail(struct tls *t, int ret, int dir)
{
	int e = SSL_get_error(t->ssl, ret);
	unsigned long oe;
	long vr;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		return again(t, dir, t->below_want_in ? t->below_want_in : EPOLLIN);
	case SSL_ERROR_WANT_WRITE:
		return again(t, dir, t->below_want_out ? t->below_want_out : EPOLLOUT);
	case SSL_ERROR_WANT_CLIENT_HELLO_CB:
		return again(t, dir, 0);
	case SSL_ERROR_ZERO_RETURN:
		t->peer_closed = true;
		ERR_clear_error();
		return 0;
	default:
		break;
	}
	oe = ERR_peek_last_error();
	if (t->below_err) {
		t->err = -t->below_err;
		set_errmsg(t, "%s below TLS: %s", dir ? "write" : "read", strerror(t->below_err));
		if (t->below_err == ECONNRESET)
			t->truncated = true;
	} else if (t->below_eof && (e == SSL_ERROR_SYSCALL ||
	                            ERR_GET_REASON(oe) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
		t->err = -ECONNRESET;
		t->truncated = true;
		set_errmsg(t, "the peer closed without close_notify%s",
		           SSL_is_init_finished(t->ssl) ? " (truncated)"
		                                        : ", during the handshake");
	} else if (!t->server && (vr = SSL_get_verify_result(t->ssl)) != X509_V_OK) {
		t->err = -EPROTO;
		set_errmsg(t, "upstream certificate verify failed: %s",
		           X509_verify_cert_error_string(vr));
	} else if (t->alert_rx > 0) {
		t->err = -EPROTO;
		set_errmsg(t, "the peer sent alert %s", SSL_alert_desc_string_long(t->alert_rx));
	} else if (t->errmsg[0]) {
		t->err = -EPROTO; /* a callback of ours said why */
	} else if (oe) {
		const char *r = ERR_reason_error_string(oe);

		t->err = -EPROTO;
		set_errmsg(t, "tls: %s", r ? r : "unknown error");
	} else {
		t->err = -EIO;
		set_errmsg(t, "tls: the connection failed (%d)", e);
	}
	if (!t->server && t->sess_key && !SSL_is_init_finished(t->ssl))
		gw_tls_sess_forget(t->ctx, t->sess_key);
	ERR_clear_error();
	return t->err;
}

/* Before every SSL call: OpenSSL wants the thread's queue empty, and what
 * waits to go out goes first. Returns a hard error, or 0. */
static int
enter(struct tls *t)
{
	int r;

	ERR_clear_error();
	if (t->err)
		return t->err;
	r = out_flush(t);
	if (r < 0 && r != -EAGAIN) {
		t->err = r;
		set_errmsg(t, "write below TLS: %s", strerror(-r));
		return r;
	}
	return 0;
}

/* After a successful SSL call: note what the handshake settled. */
static void
settle(struct tls *t)
{
	const unsigned char *p;
	unsigned int n;

	if (t->settled || !SSL_is_init_finished(t->ssl))
		return;
	t->settled = true;
	SSL_get0_alpn_selected(t->ssl, &p, &n);
	if (n && n < sizeof(t->alpn)) {
		memcpy(t->alpn, p, n);
		t->alpn[n] = '\0';
	}
	t->resumed = SSL_session_reused(t->ssl);
}

/* ---- the ops ---- */

static ssize_t
tls_recv(struct gw_xprt *x, void *buf, size_t n)
{
	struct tls *t = tls_of(x);
	size_t got = 0;
	int r;

	if (t->peer_closed)
		return 0;
	if ((r = enter(t)) < 0)
		return r;
	if (t->paused)
		return -EAGAIN;
	r = SSL_read_ex(t->ssl, buf, n, &got);
	if (r == 1) {
		settle(t);
		return (ssize_t)got;
	}
	return ssl_fail(t, r, 0);
}

static ssize_t
tls_sendv(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	struct tls *t = tls_of(x);
	uint8_t stage[TLS_CHUNK];
	const void *p;
	size_t len = 0, done = 0;
	int r;

	if ((r = enter(t)) < 0)
		return r;
	if (t->shut)
		return -EPIPE; /* after our close_notify (theirs still allows it) */
	if (t->out_len > t->out_off) {
		t->want[1] = t->below_want_out ? t->below_want_out : EPOLLOUT;
		return -EAGAIN;
	}
	if (t->paused)
		return -EAGAIN;
	/* One record: the first buffer alone when it fills one, else the
	 * buffers gathered, so that a head and a small body share it. */
	if (iovcnt == 1 || iov[0].iov_len >= TLS_CHUNK) {
		p = iov[0].iov_base;
		len = iov[0].iov_len < TLS_CHUNK ? iov[0].iov_len : TLS_CHUNK;
	} else {
		for (int i = 0; i < iovcnt && len < TLS_CHUNK; i++) {
			size_t take = iov[i].iov_len;

			if (take > TLS_CHUNK - len)
				take = TLS_CHUNK - len;
			memcpy(stage + len, iov[i].iov_base, take);
			len += take;
		}
		p = stage;
	}
	if (len == 0)
		return 0;
	r = SSL_write_ex(t->ssl, p, len, &done);
	if (r == 1) {
		settle(t);
		return (ssize_t)done;
	}
	r = ssl_fail(t, r, 1);
	return r == 0 ? -ECONNRESET : r;
}

static int
tls_shutdown(struct gw_xprt *x)
{
	struct tls *t = tls_of(x);
	int r;

	if (t->shut)
		return 0;
	ERR_clear_error();
	t->shut = true;
	if (!t->err && SSL_is_init_finished(t->ssl)) {
		/* 0 or 1: close_notify is written (into the output buffer,
		 * at worst); the peer's is read by recv(). */
		SSL_shutdown(t->ssl);
		ERR_clear_error();
	}
	r = out_flush(t);
	return r == -EAGAIN ? 0 : r;
}

static bool
tls_pending(const struct gw_xprt *x)
{
	const struct tls *t = tls_of(x);

	return !t->paused && (SSL_pending(t->ssl) > 0 || t->pre_off < t->npre);
}

static uint32_t
tls_want(const struct gw_xprt *x, uint32_t dir)
{
	const struct tls *t = tls_of(x);
	uint32_t w = t->want[dir == EPOLLOUT];

	if (t->out_len > t->out_off)
		w |= t->below_want_out ? t->below_want_out : EPOLLOUT;
	if (!w && !t->paused)
		w = dir;
	return w;
}

static void
answer_drop(struct tls *t)
{
	X509_free(t->cert);
	EVP_PKEY_free(t->key);
	sk_X509_pop_free(t->chain, X509_free);
	t->cert = NULL;
	t->key = NULL;
	t->chain = NULL;
}

static void
tls_close(struct gw_xprt *x)
{
	struct tls *t = tls_of(x);

	/* OpenSSL spoils the session of a connection freed without a
	 * close_notify sent; one that ended without an error may be
	 * resumed all the same (an idle upstream we just drop). */
	if (!t->err && SSL_is_init_finished(t->ssl))
		SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	SSL_free(t->ssl);
	answer_drop(t);
	free(t->pre);
	free(t->out);
	free(t->sess_key);
	free(t);
}

static const struct gw_xprt_ops tls_server_ops = {
    .name = "tls-server",
    .recv = tls_recv,
    .sendv = tls_sendv,
    .shutdown = tls_shutdown,
    .pending = tls_pending,
    .want = tls_want,
    .close = tls_close,
};

static const struct gw_xprt_ops tls_client_ops = {
    .name = "tls-client",
    .recv = tls_recv,
    .sendv = tls_sendv,
    .shutdown = tls_shutdown,
    .pending = tls_pending,
    .want = tls_want,
    .close = tls_close,
};

/* ---- the server's hello ---- */

/* Keeps a's references and ALPN. false: incomplete or out of memory. */
static bool
answer_keep(struct tls *t, const struct gw_tls_answer *a)
{
	size_t n = a->alpn ? strlen(a->alpn) : 0;

	if (!a->cert || !a->key || n >= GW_TLS_ALPN_MAX)
		return false;
	answer_drop(t);
	if (a->chain && !(t->chain = X509_chain_up_ref(a->chain)))
		return false;
	X509_up_ref(a->cert);
	EVP_PKEY_up_ref(a->key);
	t->cert = a->cert;
	t->key = a->key;
	memcpy(t->alpn_pick, n ? a->alpn : "", n + 1);
	t->answered = true;
	return true;
}

/* The server name from the server_name extension (RFC 6066 3), lowercased
 * into t->sni; nothing when it is absent or not one plain host_name. */
static void
hello_sni(struct tls *t)
{
	const unsigned char *p;
	size_t n, len;

	t->sni[0] = '\0';
	if (!SSL_client_hello_get0_ext(t->ssl, TLSEXT_TYPE_server_name, &p, &n) || n < 5)
		return;
	if ((size_t)(p[0] << 8 | p[1]) != n - 2 || p[2] != TLSEXT_NAMETYPE_host_name)
		return;
	len = (size_t)(p[3] << 8 | p[4]);
	if (len == 0 || len != n - 5 || len >= sizeof(t->sni))
		return;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[5 + i];

		if (c <= 0x20 || c >= 0x7f)
			return; /* not a name: report none */
		t->sni[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	t->sni[len] = '\0';
}

/* The ALPN list (RFC 7301 3.1) when it is well formed. */
static void
hello_alpn(struct tls *t, struct gw_tls_hello *h)
{
	const unsigned char *p;
	size_t n, off;

	if (!SSL_client_hello_get0_ext(t->ssl, TLSEXT_TYPE_application_layer_protocol_negotiation,
	                               &p, &n) ||
	    n < 3 || (size_t)(p[0] << 8 | p[1]) != n - 2)
		return;
	for (off = 2; off < n; off += 1 + p[off])
		if (p[off] == 0 || off + 1 + p[off] > n)
			return;
	h->alpn = p + 2;
	h->alpn_len = n - 2;
}

int
gw_tls_on_hello(SSL *ssl, int *al, void *arg)
{
	struct tls *t = SSL_get_app_data(ssl);

	(void)arg;
	if (!t->hello_seen) {
		struct gw_tls_hello h = {.sni = t->sni};
		struct gw_tls_answer a = {0};

		t->hello_seen = true;
		hello_sni(t);
		hello_alpn(t, &h);
		if (t->hello) {
			switch (t->hello(t->arg, &h, &a)) {
			case GW_TLS_ANSWER:
				if (!answer_keep(t, &a)) {
					set_errmsg(
					    t, "the hello callback gave no certificate and key");
					*al = SSL_AD_INTERNAL_ERROR;
					return SSL_CLIENT_HELLO_ERROR;
				}
				break;
			case GW_TLS_PAUSE:
				t->paused = true;
				return SSL_CLIENT_HELLO_RETRY;
			case GW_TLS_REFUSE:
			default:
				t->refused = true;
				break;
			}
		}
	}
	if (t->refused) {
		set_errmsg(t, "the hello was refused (sni \"%s\")", t->sni);
		*al = SSL_AD_HANDSHAKE_FAILURE;
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (!t->answered) {
		if (t->paused)
			return SSL_CLIENT_HELLO_RETRY;
		set_errmsg(t, "no certificate to present");
		*al = SSL_AD_INTERNAL_ERROR;
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (SSL_use_cert_and_key(ssl, t->cert, t->key, t->chain, 1) != 1) {
		set_errmsg(t, "the certificate and key do not go together");
		*al = SSL_AD_INTERNAL_ERROR;
		return SSL_CLIENT_HELLO_ERROR;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

int
gw_tls_on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
               unsigned int inlen, void *arg)
{
	struct tls *t = SSL_get_app_data(ssl);
	size_t want = strlen(t->alpn_pick);

	(void)arg;
	if (!want)
		return SSL_TLSEXT_ERR_NOACK;
	for (unsigned int off = 0; off < inlen; off += 1u + in[off]) {
		if (off + 1u + in[off] > inlen)
			break;
		if (in[off] == want && memcmp(in + off + 1, t->alpn_pick, want) == 0) {
			*out = in + off + 1;
			*outlen = in[off];
			return SSL_TLSEXT_ERR_OK;
		}
	}
	set_errmsg(t, "the ALPN answer \"%s\" was not offered by the client", t->alpn_pick);
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void
gw_tls_on_info(const SSL *ssl, int where, int ret)
{
	struct tls *t = SSL_get_app_data(ssl);

	/* The first alert the peer sends is what it had to say (a
	 * close_notify is recorded as 0 unless a real one came first). */
	if (t && (where & SSL_CB_ALERT) && (where & SSL_CB_READ) && t->alert_rx <= 0)
		t->alert_rx = ret & 0xff;
}

int
gw_tls_on_new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct tls *t = SSL_get_app_data(ssl);

	if (!t || !t->sess_key)
		return 0; /* not ours to keep: OpenSSL frees it */
	gw_tls_sess_put(t->ctx, t->sess_key, sess);
	return 1;
}

/* ---- making layers ---- */

static struct tls *
tls_new(struct gw_tls_ctx *ctx, enum gw_tls_role role, char *err, size_t errsz)
{
	struct tls *t;
	BIO *b;

	pthread_once(&bio_once, bio_meth_make);
	ERR_clear_error();
	if (!ctx || ctx->role != role) {
		snprintf(err, errsz, "a TLS-%s layer needs a %s context",
		         role == GW_TLS_SERVER ? "server" : "client",
		         role == GW_TLS_SERVER ? "server" : "client");
		return NULL;
	}
	if (!bio_meth || !(t = calloc(1, sizeof(*t)))) {
		snprintf(err, errsz, "out of memory for a TLS layer");
		return NULL;
	}
	t->ctx = ctx;
	t->server = role == GW_TLS_SERVER;
	t->alert_rx = -1;
	t->x.ops = t->server ? &tls_server_ops : &tls_client_ops;
	t->x.fd = -1;
	if (!(t->ssl = SSL_new(ctx->ssl)) || !(b = BIO_new(bio_meth))) {
		snprintf(err, errsz, "out of memory for a TLS connection");
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	BIO_set_data(b, t);
	SSL_set_bio(t->ssl, b, b);
	SSL_set_app_data(t->ssl, t);
	return t;
}

struct gw_xprt *
gw_xprt_tls_server_new(struct gw_tls_ctx *ctx, const struct gw_tls_server_params *p, char *err,
                       size_t errsz)
{
	struct tls *t;

	if (!p || (!p->hello && !p->answer) || (p->npre && !p->pre)) {
		snprintf(err, errsz, "a TLS-server layer needs a hello callback or an answer");
		return NULL;
	}
	if (!(t = tls_new(ctx, GW_TLS_SERVER, err, errsz)))
		return NULL;
	t->hello = p->hello;
	t->arg = p->arg;
	if (p->answer && !answer_keep(t, p->answer)) {
		snprintf(err, errsz, "the answer needs a certificate and a key%s",
		         p->answer->alpn && strlen(p->answer->alpn) >= GW_TLS_ALPN_MAX
		             ? " and an ALPN name under 256 bytes"
		             : "");
		tls_close(&t->x);
		return NULL;
	}
	if (p->npre) {
		if (!(t->pre = malloc(p->npre))) {
			snprintf(err, errsz, "out of memory for a TLS layer");
			tls_close(&t->x);
			return NULL;
		}
		memcpy(t->pre, p->pre, p->npre);
		t->npre = p->npre;
	}
	SSL_set_accept_state(t->ssl);
	return &t->x;
}

/* True when s is an IPv4 or IPv6 literal. */
static bool
is_ip_literal(const char *s)
{
	ASN1_OCTET_STRING *ip = a2i_IPADDRESS(s);

	ERR_clear_error();
	ASN1_OCTET_STRING_free(ip);
	return ip != NULL;
}

struct gw_xprt *
gw_xprt_tls_client_new(struct gw_tls_ctx *ctx, const struct gw_tls_client_params *p, char *err,
                       size_t errsz)
{
	struct tls *t;
	X509_VERIFY_PARAM *vp;
	bool ok;

	if (!p || !p->host || !p->host[0] || strlen(p->host) >= GW_TLS_SNI_MAX ||
	    (p->alpn_len && !p->alpn) || p->alpn_len > 0xffff) {
		snprintf(err, errsz, "a TLS-client layer needs a host name or address");
		return NULL;
	}
	if (p->session_key &&
	    (!p->session_key[0] || strlen(p->session_key) >= GW_TLS_SESS_KEY_MAX)) {
		snprintf(err, errsz, "a session key is 1 to %d bytes", GW_TLS_SESS_KEY_MAX - 1);
		return NULL;
	}
	if (!(t = tls_new(ctx, GW_TLS_CLIENT, err, errsz)))
		return NULL;
	vp = SSL_get0_param(t->ssl);
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (is_ip_literal(p->host))
		ok = X509_VERIFY_PARAM_set1_ip_asc(vp, p->host) == 1;
	else
		/* The macro casts its name to void * (clang's -Wcast-qual
		 * objects to a const one); OpenSSL copies it, never writes. */
		ok = SSL_set_tlsext_host_name(t->ssl, (char *)(uintptr_t)p->host) == 1 &&
		     SSL_set1_host(t->ssl, p->host) == 1;
	/* SSL_set_alpn_protos() returns 0 on success. */
	if (ok && p->alpn_len)
		ok = SSL_set_alpn_protos(t->ssl, p->alpn, (unsigned int)p->alpn_len) == 0;
	if (ok && p->session_key) {
		SSL_SESSION *s;

		ok = (t->sess_key = strdup(p->session_key)) != NULL;
		if (ok && (s = gw_tls_sess_take(ctx, p->session_key))) {
			SSL_set_session(t->ssl, s);
			SSL_SESSION_free(s);
		}
	}
	if (!ok) {
		snprintf(err, errsz, "cannot set up TLS to %s (a bad name or ALPN list?)", p->host);
		ERR_clear_error();
		tls_close(&t->x);
		return NULL;
	}
	SSL_set_connect_state(t->ssl);
	return &t->x;
}

/* ---- steps and reports ---- */

int
gw_xprt_tls_handshake(struct gw_xprt *x)
{
	struct tls *t = tls_of(x);
	int r;

	if ((r = enter(t)) < 0)
		return r;
	if (t->paused)
		return again(t, 2, 0);
	r = SSL_is_init_finished(t->ssl) ? 1 : SSL_do_handshake(t->ssl);
	if (r == 1) {
		settle(t);
		/* Done means our last flight went out too: the peer may be
		 * waiting for it while we wait for nothing. */
		if (t->out_len > t->out_off)
			return again(t, 2, t->below_want_out ? t->below_want_out : EPOLLOUT);
		return 0;
	}
	r = ssl_fail(t, r, 2);
	return r == 0 ? -ECONNRESET : r;
}

int
gw_xprt_tls_server_answer(struct gw_xprt *x, const struct gw_tls_answer *a)
{
	struct tls *t = tls_of(x);

	if (x->ops != &tls_server_ops || !t->paused)
		return -EINVAL;
	if (a && !answer_keep(t, a))
		return -EINVAL;
	if (!a)
		t->refused = true;
	t->paused = false;
	return 0;
}

int
gw_xprt_tls_flush(struct gw_xprt *x)
{
	struct tls *t = tls_of(x);

	if (t->err)
		return t->err;
	return out_flush(t);
}

bool
gw_xprt_tls_done(const struct gw_xprt *x)
{
	return SSL_is_init_finished(tls_of(x)->ssl);
}

const char *
gw_xprt_tls_alpn(const struct gw_xprt *x)
{
	return tls_of(x)->alpn;
}

const char *
gw_xprt_tls_sni(const struct gw_xprt *x)
{
	return tls_of(x)->sni;
}

const char *
gw_xprt_tls_version(const struct gw_xprt *x)
{
	const struct tls *t = tls_of(x);

	return SSL_is_init_finished(t->ssl) ? SSL_get_version(t->ssl) : "";
}

bool
gw_xprt_tls_resumed(const struct gw_xprt *x)
{
	return tls_of(x)->resumed;
}

long
gw_xprt_tls_verify_result(const struct gw_xprt *x)
{
	const struct tls *t = tls_of(x);

	return t->server ? X509_V_OK : SSL_get_verify_result(t->ssl);
}

int
gw_xprt_tls_peer_alert(const struct gw_xprt *x)
{
	return tls_of(x)->alert_rx;
}

bool
gw_xprt_tls_truncated(const struct gw_xprt *x)
{
	return tls_of(x)->truncated;
}

const char *
gw_xprt_tls_error(const struct gw_xprt *x)
{
	return tls_of(x)->errmsg;
}

/* test_xprt_tls.c: the TLS transports (gateway/doors/xprt_tls.c) and
 * their contexts (tls_ctx.c), a TLS-server layer facing a TLS-client layer
 * over a loopback TCP pair, driven by a small poll loop. A CA, its leaves
 * and a stranger CA are made here with OpenSSL's API; the trust file is a
 * temporary file. Most cases also run with a fake layer under TLS that
 * splits reads and shortens writes (TLS over fake over TCP: the stacking).
 * Bad inputs first. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tlshello.h"
#include "reason.h"
#include "tunnel.h"
#include "xprt.h"
#include "xprt_tls.h"

#define DAY    (24 * 3600L)
#define ROUNDS 3000 /* poll rounds of 20 ms at most: a stall fails */

/* ---- the PKI, made once ---- */

static struct {
	EVP_PKEY *ca_key, *stranger_key, *leaf_key;
	X509 *ca, *stranger;
	X509 *leaf;          /* a.test, by the CA */
	X509 *leaf_ip;       /* 127.0.0.1, by the CA */
	X509 *leaf_other;    /* other.test, by the CA */
	X509 *leaf_stranger; /* a.test, by a CA nobody trusts */
	X509 *leaf_expired;  /* a.test, by the CA, ended yesterday */
	char trust_path[64];
	X509_STORE *trust;
	struct gw_tls_ctx *sctx, *cctx;
} pki;

static void
add_ext(X509 *x, X509V3_CTX *v, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, v, nid, value);

	assert_non_null(e);
	assert_int_equal(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
}

/* A certificate for cn (a CA when san is NULL), valid from..to seconds
 * from now, signed by issuer (NULL: itself). */
static X509 *
make_cert(const char *cn, const char *san, EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey, long from,
          long to)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *n;
	X509V3_CTX v;

	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), from);
	X509_gmtime_adj(X509_getm_notAfter(x), to);
	assert_int_equal(X509_set_pubkey(x, key), 1);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
	X509V3_set_ctx_nodb(&v);
	X509V3_set_ctx(&v, issuer ? issuer : x, x, NULL, NULL, 0);
	add_ext(x, &v, NID_subject_key_identifier, "hash");
	add_ext(x, &v, NID_authority_key_identifier, "keyid:always");
	if (san) {
		add_ext(x, &v, NID_basic_constraints, "critical,CA:FALSE");
		add_ext(x, &v, NID_ext_key_usage, "serverAuth");
		add_ext(x, &v, NID_subject_alt_name, san);
	} else {
		add_ext(x, &v, NID_basic_constraints, "critical,CA:TRUE");
		add_ext(x, &v, NID_key_usage, "critical,keyCertSign,cRLSign");
	}
	assert_true(X509_sign(x, ikey ? ikey : key, EVP_sha256()) > 0);
	return x;
}

static int
setup(void **state)
{
	char err[256] = "";
	FILE *f;
	int fd;

	(void)state;
	pki.ca_key = EVP_EC_gen("P-256");
	pki.stranger_key = EVP_EC_gen("P-256");
	pki.leaf_key = EVP_EC_gen("P-256");
	assert_non_null(pki.ca_key);
	assert_non_null(pki.stranger_key);
	assert_non_null(pki.leaf_key);
	pki.ca = make_cert("sluice test CA", NULL, pki.ca_key, NULL, NULL, -DAY, 30 * DAY);
	pki.stranger = make_cert("stranger CA", NULL, pki.stranger_key, NULL, NULL, -DAY, 30 * DAY);
	pki.leaf = make_cert("a.test", "DNS:a.test", pki.leaf_key, pki.ca, pki.ca_key, -DAY, DAY);
	pki.leaf_ip =
	    make_cert("127.0.0.1", "IP:127.0.0.1", pki.leaf_key, pki.ca, pki.ca_key, -DAY, DAY);
	pki.leaf_other =
	    make_cert("other.test", "DNS:other.test", pki.leaf_key, pki.ca, pki.ca_key, -DAY, DAY);
	pki.leaf_stranger = make_cert("a.test", "DNS:a.test", pki.leaf_key, pki.stranger,
	                              pki.stranger_key, -DAY, DAY);
	pki.leaf_expired =
	    make_cert("a.test", "DNS:a.test", pki.leaf_key, pki.ca, pki.ca_key, -9 * DAY, -DAY);

	snprintf(pki.trust_path, sizeof(pki.trust_path), "/tmp/sl-test-tls-XXXXXX");
	fd = mkstemp(pki.trust_path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, pki.ca), 1);
	fclose(f);
	/* The system roots too, as the daemon has them: the stranger CA is
	 * in neither. */
	pki.trust = gw_tls_trust_new(pki.trust_path, true, err, sizeof(err));
	if (!pki.trust)
		fail_msg("gw_tls_trust_new: %s", err);
	pki.sctx = gw_tls_ctx_server_new(err, sizeof(err));
	assert_non_null(pki.sctx);
	pki.cctx = gw_tls_ctx_client_new(pki.trust, 4, err, sizeof(err));
	assert_non_null(pki.cctx);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	gw_tls_ctx_free(pki.sctx);
	gw_tls_ctx_free(pki.cctx);
	gw_tls_trust_free(pki.trust);
	X509 *certs[] = {pki.ca,         pki.stranger,      pki.leaf,        pki.leaf_ip,
	                 pki.leaf_other, pki.leaf_stranger, pki.leaf_expired};
	for (size_t i = 0; i < sizeof(certs) / sizeof(certs[0]); i++)
		X509_free(certs[i]);
	EVP_PKEY_free(pki.ca_key);
	EVP_PKEY_free(pki.stranger_key);
	EVP_PKEY_free(pki.leaf_key);
	unlink(pki.trust_path);
	return 0;
}

/* ---- a fake layer: at most k bytes per recv, m per sendv ---- */

struct fake {
	struct gw_xprt x;
	size_t k, m;
	unsigned *closed;
};

static ssize_t
fake_recv(struct gw_xprt *x, void *buf, size_t n)
{
	struct fake *f = (struct fake *)(void *)x;

	return gw_xprt_recv_below(x, buf, f->k && n > f->k ? f->k : n);
}

static ssize_t
fake_sendv(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	struct fake *f = (struct fake *)(void *)x;
	struct iovec one = iov[0];

	(void)iovcnt;
	if (f->m && one.iov_len > f->m)
		one.iov_len = f->m;
	return gw_xprt_sendv_below(x, &one, 1);
}

static int
fake_shutdown(struct gw_xprt *x)
{
	return gw_xprt_shutdown(x->below);
}

static void
fake_close(struct gw_xprt *x)
{
	struct fake *f = (struct fake *)(void *)x;

	(*f->closed)++;
	free(f);
}

static const struct gw_xprt_ops fake_ops = {
    .name = "fake",
    .recv = fake_recv,
    .sendv = fake_sendv,
    .shutdown = fake_shutdown,
    .close = fake_close,
};

/* ---- one end: TCP, maybe the fake, maybe TLS ---- */

struct end {
	int fd;
	struct gw_xprt tcp;
	struct gw_xprt *top;
	unsigned fakes, fakes_closed;
};

static void
tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int l;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	*a = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(*a >= 0);
	assert_true(connect(*a, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS);
	*b = accept4(l, NULL, NULL, SOCK_NONBLOCK);
	assert_true(*b >= 0);
	close(l);
}

/* tcp_pair() with buffers set before connecting (the window follows
 * them): the connecting end's receive buffer, the accepted end's send
 * buffer. */
static void
tcp_pair_small(int *a, int *b, int a_rcv, int b_snd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int l;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(l >= 0);
	assert_int_equal(setsockopt(l, SOL_SOCKET, SO_SNDBUF, &b_snd, sizeof(b_snd)), 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	*a = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(*a >= 0);
	assert_int_equal(setsockopt(*a, SOL_SOCKET, SO_RCVBUF, &a_rcv, sizeof(a_rcv)), 0);
	assert_true(connect(*a, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS);
	*b = accept4(l, NULL, NULL, SOCK_NONBLOCK);
	assert_true(*b >= 0);
	close(l);
}

static void
end_init(struct end *e, int fd, size_t k, size_t m)
{
	memset(e, 0, sizeof(*e));
	e->fd = fd;
	gw_xprt_tcp_init(&e->tcp, fd);
	e->top = &e->tcp;
	if (k || m) {
		struct fake *f = calloc(1, sizeof(*f));

		assert_non_null(f);
		f->x.ops = &fake_ops;
		f->k = k;
		f->m = m;
		f->closed = &e->fakes_closed;
		gw_xprt_push(&e->top, &f->x);
		e->fakes++;
	}
}

static void
end_fini(struct end *e)
{
	gw_xprt_close(e->top);
	assert_int_equal(e->fakes_closed, e->fakes);
}

/* What a server's hello callback saw and answers. */
struct hello {
	unsigned calls;
	char sni[GW_TLS_SNI_MAX];
	uint8_t alpn[64];
	size_t alpn_len;
	bool offered_alpn;
	enum gw_tls_verdict verdict;
	X509 *cert; /* NULL: pki.leaf */
	const char *pick;
};

static enum gw_tls_verdict
on_hello(void *arg, const struct gw_tls_hello *h, struct gw_tls_answer *a)
{
	struct hello *s = arg;

	s->calls++;
	snprintf(s->sni, sizeof(s->sni), "%s", h->sni);
	s->offered_alpn = h->alpn != NULL;
	if (h->alpn && h->alpn_len <= sizeof(s->alpn)) {
		memcpy(s->alpn, h->alpn, h->alpn_len);
		s->alpn_len = h->alpn_len;
	}
	a->cert = s->cert ? s->cert : pki.leaf;
	a->key = pki.leaf_key;
	a->alpn = s->pick;
	return s->verdict;
}

static void
push_server(struct end *e, struct hello *h)
{
	struct gw_tls_server_params p = {.hello = on_hello, .arg = h};
	char err[GW_TLS_ERR_MAX] = "";
	struct gw_xprt *x = gw_xprt_tls_server_new(pki.sctx, &p, err, sizeof(err));

	if (!x)
		fail_msg("gw_xprt_tls_server_new: %s", err);
	gw_xprt_push(&e->top, x);
}

static const uint8_t alpn_both[] = "\x02h2\x08http/1.1";
static const uint8_t alpn_h1[] = "\x08http/1.1";

static void
push_client(struct end *e, const char *host, const uint8_t *alpn, size_t alpn_len, const char *key)
{
	struct gw_tls_client_params p = {
	    .host = host, .alpn = alpn, .alpn_len = alpn_len, .session_key = key};
	char err[GW_TLS_ERR_MAX] = "";
	struct gw_xprt *x = gw_xprt_tls_client_new(pki.cctx, &p, err, sizeof(err));

	if (!x)
		fail_msg("gw_xprt_tls_client_new: %s", err);
	gw_xprt_push(&e->top, x);
}

/* ---- the poll loop ---- */

static short
to_poll(uint32_t ev)
{
	return (short)((ev & EPOLLIN ? POLLIN : 0) | (ev & EPOLLOUT ? POLLOUT : 0));
}

static void
wait_ends(struct end *a, uint32_t wa, struct end *b, uint32_t wb)
{
	struct pollfd p[2] = {{.fd = a->fd, .events = to_poll(wa)},
	                      {.fd = b->fd, .events = to_poll(wb)}};

	poll(p, 2, 20);
}

/* Drives both handshakes until neither says -EAGAIN; or, when pause_s,
 * until the server's is paused (it then wants nothing). */
static void
handshake_both(struct end *s, struct end *c, int *rs, int *rc, bool pause_s)
{
	for (int i = 0; i < ROUNDS; i++) {
		if (*rs == -EAGAIN)
			*rs = gw_xprt_tls_handshake(s->top);
		if (*rc == -EAGAIN)
			*rc = gw_xprt_tls_handshake(c->top);
		if (pause_s && *rs == -EAGAIN && gw_xprt_want(s->top, EPOLLIN) == 0)
			return;
		if (*rs != -EAGAIN && *rc != -EAGAIN)
			return;
		wait_ends(s, *rs == -EAGAIN ? gw_xprt_want(s->top, EPOLLIN) : 0, c,
		          *rc == -EAGAIN ? gw_xprt_want(c->top, EPOLLIN) : 0);
	}
	fail_msg("the handshakes stalled: server %d, client %d", *rs, *rc);
}

/* Sends n bytes from `from` and reads them at `to`; both must work. */
static void
xfer(struct end *from, struct end *to, const uint8_t *data, size_t n)
{
	uint8_t *got = malloc(n + 1);
	size_t sent = 0, have = 0;
	bool flushed = false;

	assert_non_null(got);
	for (int i = 0; i < ROUNDS && have < n; i++) {
		uint32_t wf = 0, wt = 0;
		bool moved = false;
		ssize_t r;

		if (sent < n) {
			r = gw_xprt_send(from->top, data + sent, n - sent);
			if (r > 0) {
				sent += (size_t)r;
				moved = true;
			} else {
				assert_int_equal(r, -EAGAIN);
				wf = gw_xprt_want(from->top, EPOLLOUT);
			}
		} else if (!flushed && gw_xprt_is_tls(from->top)) {
			r = gw_xprt_tls_flush(from->top);
			flushed = r == 0;
			if (r) {
				assert_int_equal(r, -EAGAIN);
				wf = gw_xprt_want(from->top, EPOLLOUT);
			}
		}
		while (have < n) {
			r = gw_xprt_recv(to->top, got + have, n - have);
			if (r == -EAGAIN) {
				wt = gw_xprt_want(to->top, EPOLLIN);
				break;
			}
			if (r <= 0)
				fail_msg("recv: %zd after %zu of %zu bytes", r, have, n);
			have += (size_t)r;
			moved = true;
		}
		if (!moved)
			wait_ends(from, wf, to, wt);
	}
	assert_int_equal(have, n);
	assert_memory_equal(got, data, n);
	/* Nothing decrypted is left behind. */
	assert_false(gw_xprt_pending(to->top));
	free(got);
}

/* Reads at e until recv() returns something other than -EAGAIN. */
static ssize_t
recv_end(struct end *e, struct end *other, size_t *bytes)
{
	uint8_t buf[4096];

	for (int i = 0; i < ROUNDS; i++) {
		ssize_t r = gw_xprt_recv(e->top, buf, sizeof(buf));

		if (r > 0) {
			*bytes += (size_t)r;
			continue;
		}
		if (r != -EAGAIN)
			return r;
		wait_ends(e, gw_xprt_want(e->top, EPOLLIN), other, 0);
	}
	fail_msg("recv stalled");
	return -EAGAIN;
}

static bool
has(const char *s, const char *part)
{
	if (!strstr(s, part)) {
		print_error("\"%s\" does not say \"%s\"\n", s, part);
		return false;
	}
	return true;
}

/* ---- bad inputs ---- */

static void
test_bad_params(void **state)
{
	struct gw_tls_server_params sp = {0};
	struct gw_tls_client_params cp = {0};
	struct gw_tls_answer no_key = {.cert = pki.leaf};
	char err[GW_TLS_ERR_MAX];
	char path[] = "/tmp/sl-test-tls-empty-XXXXXX";
	int fd;

	(void)state;
	err[0] = '\0';
	assert_null(gw_xprt_tls_server_new(pki.sctx, NULL, err, sizeof(err)));
	assert_null(gw_xprt_tls_server_new(pki.sctx, &sp, err, sizeof(err)));
	assert_true(has(err, "hello callback or an answer"));
	sp.answer = &no_key;
	assert_null(gw_xprt_tls_server_new(pki.sctx, &sp, err, sizeof(err)));
	assert_true(has(err, "certificate and a key"));
	sp.answer = NULL;
	sp.hello = on_hello;
	/* The wrong role's context. */
	assert_null(gw_xprt_tls_server_new(pki.cctx, &sp, err, sizeof(err)));
	assert_true(has(err, "server context"));

	assert_null(gw_xprt_tls_client_new(pki.cctx, NULL, err, sizeof(err)));
	assert_null(gw_xprt_tls_client_new(pki.cctx, &cp, err, sizeof(err)));
	cp.host = "";
	assert_null(gw_xprt_tls_client_new(pki.cctx, &cp, err, sizeof(err)));
	cp.host = "a.test";
	assert_null(gw_xprt_tls_client_new(pki.sctx, &cp, err, sizeof(err)));
	assert_true(has(err, "client context"));
	cp.session_key = "";
	assert_null(gw_xprt_tls_client_new(pki.cctx, &cp, err, sizeof(err)));
	cp.session_key = NULL;
	/* A bad ALPN list (a zero-length name) is refused by OpenSSL. */
	cp.alpn = (const uint8_t *)"\x00";
	cp.alpn_len = 1;
	assert_null(gw_xprt_tls_client_new(pki.cctx, &cp, err, sizeof(err)));

	/* Trust: a missing file, a file without a certificate, no store. */
	assert_null(gw_tls_trust_new("/nonexistent/ca.pem", false, err, sizeof(err)));
	assert_true(has(err, "/nonexistent/ca.pem") && has(err, "certs.upstream_ca"));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a certificate\n", 18), 18);
	close(fd);
	assert_null(gw_tls_trust_new(path, false, err, sizeof(err)));
	assert_true(has(err, path));
	unlink(path);
	assert_null(gw_tls_ctx_client_new(NULL, 0, err, sizeof(err)));
	assert_int_equal(gw_tls_ctx_role(pki.sctx), GW_TLS_SERVER);
	assert_int_equal(gw_tls_ctx_role(pki.cctx), GW_TLS_CLIENT);
}

/* Raw bytes from a client that speaks no TLS at the server layer: its
 * handshake fails with -EPROTO and says why; nothing reaches the hello
 * callback. */
static void
test_not_tls(void **state)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
	struct hello h = {.verdict = GW_TLS_ANSWER};
	struct end s, c;
	int cfd, sfd, rs = -EAGAIN, rc = 0;

	(void)state;
	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	assert_int_equal(send(cfd, http, sizeof(http) - 1, 0), (ssize_t)sizeof(http) - 1);
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, -EPROTO);
	assert_true(has(gw_xprt_tls_error(s.top), "http request"));
	assert_int_equal(h.calls, 0);
	/* The error sticks. */
	assert_int_equal(gw_xprt_tls_handshake(s.top), -EPROTO);
	assert_int_equal(gw_xprt_recv(s.top, (char[8]){0}, 8), -EPROTO);
	end_fini(&s);
	end_fini(&c);
}

/* A hand-made ClientHello that offers TLS 1.0 only (no supported_versions):
 * refused with a protocol_version alert, the error says so. */
static void
test_tls10_hello(void **state)
{
	static const uint8_t sni_a_test[15] = {0, 0,   0,   11,  0,   9,   0,  0,
	                                       6, 'a', '.', 't', 'e', 's', 't'};
	uint8_t hello[128], *p = hello + 9, got[64];
	struct hello h = {.verdict = GW_TLS_ANSWER};
	struct end s, c;
	size_t body, rec, n = 0;
	int cfd, sfd, rs = -EAGAIN, rc = 0;
	ssize_t r;

	(void)state;
	*p++ = 3, *p++ = 1;                        /* client_version TLS 1.0 */
	memset(p, 0x11, 32), p += 32;              /* random */
	*p++ = 0;                                  /* no session id */
	*p++ = 0, *p++ = 2, *p++ = 0, *p++ = 0x2f; /* TLS_RSA_WITH_AES_128_CBC_SHA */
	*p++ = 1, *p++ = 0;                        /* null compression */
	*p++ = 0, *p++ = 15;                       /* extensions: server_name a.test */
	memcpy(p, sni_a_test, sizeof(sni_a_test));
	p += sizeof(sni_a_test);
	body = (size_t)(p - hello) - 9;
	rec = body + 4;
	memcpy(hello, "\x16\x03\x01", 3);
	hello[3] = (uint8_t)(rec >> 8), hello[4] = (uint8_t)rec;
	hello[5] = 1, hello[6] = 0, hello[7] = (uint8_t)(body >> 8), hello[8] = (uint8_t)body;
	/* The reader the doors use takes it: it is a well-formed hello. */
	{
		struct gw_tlshello th;

		assert_int_equal(gw_tlshello_parse(hello, rec + 5, 0, &th), GW_TLSHELLO_OK);
		assert_string_equal(th.sni, "a.test");
	}

	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	assert_int_equal(send(cfd, hello, rec + 5, 0), (ssize_t)(rec + 5));
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, -EPROTO);
	assert_true(has(gw_xprt_tls_error(s.top), "unsupported protocol"));
	/* What the client got: one alert record, protocol_version (70). */
	for (int i = 0; i < 100 && n < 7; i++) {
		r = recv(cfd, got + n, sizeof(got) - n, 0);
		if (r > 0)
			n += (size_t)r;
		else
			poll(&(struct pollfd){.fd = cfd, .events = POLLIN}, 1, 20);
	}
	assert_true(n >= 7);
	assert_int_equal(got[0], 0x15);
	assert_int_equal(got[5], 2); /* fatal */
	assert_int_equal(got[6], 70);
	end_fini(&s);
	end_fini(&c);
}

/* The client refuses the server's certificate: the verify error is
 * reported and kept, the server hears the alert, and no application byte
 * reaches the client although the server is trying to send. Runs for a
 * wrong name, an unknown CA and an expired leaf; the same setup with the
 * right leaf succeeds (test_handshake_*), so these fail for the reason
 * they name. */
static void
reject_case(X509 *leaf, long verr, int alert, const char *why)
{
	static const char secret[] = "no byte of this reaches the client";
	struct hello h = {.verdict = GW_TLS_ANSWER, .cert = leaf};
	struct end s, c;
	size_t got = 0;
	int cfd, sfd, rs = -EAGAIN;
	ssize_t rc = -EAGAIN;

	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	push_client(&c, "a.test", alpn_h1, sizeof(alpn_h1) - 1, NULL);
	for (int i = 0; i < ROUNDS && (rs == -EAGAIN || rc == -EAGAIN); i++) {
		if (rs == -EAGAIN) {
			ssize_t r = gw_xprt_send(s.top, secret, sizeof(secret) - 1);

			rs = r > 0 ? 0 : (int)r;
			assert_true(r <= 0); /* nothing is "sent" before the handshake */
		}
		if (rc == -EAGAIN) {
			uint8_t buf[64];

			rc = gw_xprt_recv(c.top, buf, sizeof(buf));
			if (rc > 0)
				got += (size_t)rc;
		}
		wait_ends(&s, rs == -EAGAIN ? gw_xprt_want(s.top, EPOLLOUT) : 0, &c,
		          rc == -EAGAIN ? gw_xprt_want(c.top, EPOLLIN) : 0);
	}
	assert_int_equal(got, 0);
	assert_int_equal(rc, -EPROTO);
	assert_int_equal(gw_xprt_tls_verify_result(c.top), verr);
	assert_true(has(gw_xprt_tls_error(c.top), "verify failed"));
	assert_true(has(gw_xprt_tls_error(c.top), why));
	assert_false(gw_xprt_tls_done(c.top));
	assert_string_equal(gw_xprt_tls_alpn(c.top), "");
	/* The server side: the guest (here, our client) rejected the leaf. */
	assert_int_equal(rs, -EPROTO);
	assert_int_equal(gw_xprt_tls_peer_alert(s.top), alert);
	assert_true(has(gw_xprt_tls_error(s.top), "alert"));
	end_fini(&s);
	end_fini(&c);
}

static void
test_reject(void **state)
{
	struct {
		X509 **leaf;
		long verr;
		int alert;
		const char *why;
	} t[] = {
	    {&pki.leaf_other, X509_V_ERR_HOSTNAME_MISMATCH, SSL_AD_BAD_CERTIFICATE,
	     "hostname mismatch"},
	    {&pki.leaf_stranger, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, SSL_AD_UNKNOWN_CA,
	     "unable to get local issuer certificate"},
	    {&pki.leaf_expired, X509_V_ERR_CERT_HAS_EXPIRED, SSL_AD_CERTIFICATE_EXPIRED,
	     "certificate has expired"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		reject_case(*t[i].leaf, t[i].verr, t[i].alert, t[i].why);
}

/* The server refuses the hello: its callback says REFUSE, or it answers
 * with an ALPN protocol the client did not offer. The client hears the
 * alert that says which. */
static void
test_hello_refused(void **state)
{
	struct hello refuse = {.verdict = GW_TLS_REFUSE};
	struct hello alpn_h2 = {.verdict = GW_TLS_ANSWER, .pick = "h2"};
	struct {
		struct hello *h;
		const char *why;
		int alert;
	} t[] = {
	    {&refuse, "refused", SSL_AD_HANDSHAKE_FAILURE},
	    {&alpn_h2, "not offered", SSL_AD_NO_APPLICATION_PROTOCOL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct end s, c;
		int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;

		tcp_pair(&cfd, &sfd);
		end_init(&s, sfd, 0, 0);
		end_init(&c, cfd, 0, 0);
		push_server(&s, t[i].h);
		push_client(&c, "a.test", alpn_h1, sizeof(alpn_h1) - 1, NULL);
		handshake_both(&s, &c, &rs, &rc, false);
		assert_int_equal(t[i].h->calls, 1);
		assert_string_equal(t[i].h->sni, "a.test");
		assert_int_equal(rs, -EPROTO);
		assert_true(has(gw_xprt_tls_error(s.top), t[i].why));
		assert_int_equal(rc, -EPROTO);
		assert_int_equal(gw_xprt_tls_peer_alert(c.top), t[i].alert);
		end_fini(&s);
		end_fini(&c);
	}
}

/* ---- handshakes and data ---- */

static uint8_t *
pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131u + seed) ^ (i >> 7));
	return p;
}

static const char *want_version = "TLSv1.3";

/* A full handshake and 100 KiB each way; then close_notify both ways.
 * ks/ms, kc/mc: the fake layers' read and write sizes (0: no layer). */
static void
handshake_case(size_t ks, size_t ms, size_t kc, size_t mc, const char *host, X509 *leaf,
               const uint8_t *alpn, size_t alpn_len, const char *pick)
{
	struct hello h = {.verdict = GW_TLS_ANSWER, .cert = leaf, .pick = pick};
	struct end s, c;
	size_t n = 100 * 1024, bytes = 0;
	uint8_t *up = pattern(n, 1), *down = pattern(n, 7);
	int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;

	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, ks, ms);
	end_init(&c, cfd, kc, mc);
	push_server(&s, &h);
	push_client(&c, host, alpn, alpn_len, NULL);
	handshake_both(&s, &c, &rs, &rc, false);
	if (rs || rc)
		fail_msg("handshake: server %d (%s), client %d (%s)", rs, gw_xprt_tls_error(s.top),
		         rc, gw_xprt_tls_error(c.top));
	/* What the server's callback saw, and what was settled. */
	assert_int_equal(h.calls, 1);
	assert_string_equal(h.sni, strcmp(host, "127.0.0.1") ? host : "");
	assert_string_equal(gw_xprt_tls_sni(s.top), h.sni);
	assert_int_equal(h.offered_alpn, alpn != NULL);
	if (alpn) {
		assert_int_equal(h.alpn_len, alpn_len);
		assert_memory_equal(h.alpn, alpn, alpn_len);
	}
	assert_string_equal(gw_xprt_tls_alpn(c.top), pick ? pick : "");
	assert_string_equal(gw_xprt_tls_alpn(s.top), pick ? pick : "");
	assert_string_equal(gw_xprt_tls_version(c.top), want_version);
	assert_string_equal(gw_xprt_tls_version(s.top), want_version);
	assert_int_equal(gw_xprt_tls_verify_result(c.top), X509_V_OK);
	assert_true(gw_xprt_tls_done(s.top) && gw_xprt_tls_done(c.top));
	assert_false(gw_xprt_tls_resumed(c.top));
	assert_string_equal(gw_xprt_tls_error(s.top), "");

	xfer(&c, &s, up, n);
	xfer(&s, &c, down, n);

	/* close_notify from the client: the server reads a clean end, and
	 * may still answer (half-close), then closes its way too. */
	assert_int_equal(gw_xprt_shutdown(c.top), 0);
	assert_int_equal(recv_end(&s, &c, &bytes), 0);
	assert_int_equal(bytes, 0);
	assert_false(gw_xprt_tls_truncated(s.top));
	assert_int_equal(gw_xprt_tls_peer_alert(s.top), 0);
	xfer(&s, &c, down, 1000);
	assert_int_equal(gw_xprt_shutdown(s.top), 0);
	assert_int_equal(recv_end(&c, &s, &bytes), 0);
	assert_false(gw_xprt_tls_truncated(c.top));
	/* After our own close_notify, nothing more goes out. */
	assert_int_equal(gw_xprt_send(c.top, "x", 1), -EPIPE);
	end_fini(&s);
	end_fini(&c);
	free(up);
	free(down);
}

static void
test_handshake_tcp(void **state)
{
	(void)state;
	handshake_case(0, 0, 0, 0, "a.test", pki.leaf, alpn_both, sizeof(alpn_both) - 1,
	               "http/1.1");
}

/* TLS over the fake over TCP, on both sides: every record arrives in
 * pieces of a few bytes and leaves in pieces of a few more. */
static void
test_handshake_split(void **state)
{
	(void)state;
	handshake_case(7, 5, 3, 11, "a.test", pki.leaf, alpn_both, sizeof(alpn_both) - 1, "h2");
	handshake_case(1, 1, 1, 1, "a.test", pki.leaf, NULL, 0, NULL);
}

/* An IP literal: no SNI is sent (the callback sees ""), and the leaf's
 * IP address is what is verified. */
static void
test_handshake_ip(void **state)
{
	(void)state;
	handshake_case(0, 0, 13, 0, "127.0.0.1", pki.leaf_ip, alpn_h1, sizeof(alpn_h1) - 1, NULL);
}

/* A client that speaks TLS 1.2 at most: the server takes it, over the
 * fake layers too. */
static void
test_handshake_tls12(void **state)
{
	char err[GW_TLS_ERR_MAX];
	struct gw_tls_ctx *keep = pki.cctx;

	(void)state;
	pki.cctx = gw_tls_ctx_client_new(pki.trust, 0, err, sizeof(err));
	assert_non_null(pki.cctx);
	SSL_CTX_set_max_proto_version(gw_tls_ctx_ssl(pki.cctx), TLS1_2_VERSION);
	want_version = "TLSv1.2";
	handshake_case(0, 0, 0, 0, "a.test", pki.leaf, alpn_both, sizeof(alpn_both) - 1, "h2");
	handshake_case(5, 3, 2, 7, "a.test", pki.leaf, NULL, 0, NULL);
	want_version = "TLSv1.3";
	gw_tls_ctx_free(pki.cctx);
	pki.cctx = keep;
}

/* The server handshake pauses in its hello callback (the origin's ALPN is
 * not known yet) and wants nothing meanwhile; answered later, it goes on,
 * and the client gets the ALPN given in the answer. */
static void
test_pause_then_answer(void **state)
{
	struct hello h = {.verdict = GW_TLS_PAUSE};
	struct gw_tls_answer a = {.cert = pki.leaf, .key = pki.leaf_key, .alpn = "h2"};
	struct end s, c;
	int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;

	(void)state;
	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 5, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	push_client(&c, "a.test", alpn_both, sizeof(alpn_both) - 1, NULL);
	/* Not paused yet: nothing to answer. */
	assert_int_equal(gw_xprt_tls_server_answer(s.top, &a), -EINVAL);
	handshake_both(&s, &c, &rs, &rc, true);
	assert_int_equal(rs, -EAGAIN);
	assert_int_equal(h.calls, 1);
	assert_int_equal(gw_xprt_want(s.top, EPOLLIN), 0);
	assert_int_equal(gw_xprt_want(s.top, EPOLLOUT), 0);
	assert_false(gw_xprt_pending(s.top));
	assert_int_equal(gw_xprt_recv(s.top, (char[8]){0}, 8), -EAGAIN);
	/* Wrong layer, incomplete answer. */
	assert_int_equal(gw_xprt_tls_server_answer(c.top, &a), -EINVAL);
	assert_int_equal(gw_xprt_tls_server_answer(s.top, &(struct gw_tls_answer){0}), -EINVAL);
	assert_int_equal(gw_xprt_tls_server_answer(s.top, &a), 0);
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, 0);
	assert_int_equal(rc, 0);
	assert_int_equal(h.calls, 1);
	assert_string_equal(gw_xprt_tls_alpn(c.top), "h2");
	xfer(&c, &s, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18);
	end_fini(&s);
	end_fini(&c);
}

/* The way the intercept door can use it: read the ClientHello raw first
 * (the SNI door's reader decides tunnel or intercept from it), then make
 * the server layer with those bytes given back and the answer known. */
static void
test_preread_hello(void **state)
{
	struct end s, c;
	uint8_t in[GW_TLSHELLO_BUF_MAX];
	struct gw_tlshello th;
	struct gw_tls_answer a = {.cert = pki.leaf, .key = pki.leaf_key, .alpn = "http/1.1"};
	struct gw_tls_server_params sp = {.answer = &a};
	char err[GW_TLS_ERR_MAX];
	size_t len = 0;
	int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;
	struct gw_xprt *x;
	enum gw_tlshello_result r = GW_TLSHELLO_NEED_MORE;

	(void)state;
	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_client(&c, "a.test", alpn_both, sizeof(alpn_both) - 1, NULL);
	assert_int_equal(gw_xprt_tls_handshake(c.top), -EAGAIN);
	for (int i = 0; i < ROUNDS && r == GW_TLSHELLO_NEED_MORE; i++) {
		ssize_t n = gw_xprt_recv(s.top, in + len, sizeof(in) - len);

		if (n > 0) {
			len += (size_t)n;
			r = gw_tlshello_parse(in, len, 0, &th);
		} else {
			assert_int_equal(n, -EAGAIN);
			poll(&(struct pollfd){.fd = sfd, .events = POLLIN}, 1, 20);
		}
	}
	assert_int_equal(r, GW_TLSHELLO_OK);
	assert_string_equal(th.sni, "a.test");
	assert_true(th.alpn_h2 && th.alpn_http11);
	sp.pre = in;
	sp.npre = len;
	x = gw_xprt_tls_server_new(pki.sctx, &sp, err, sizeof(err));
	assert_non_null(x);
	gw_xprt_push(&s.top, x);
	/* The bytes given back count as pending input. */
	assert_true(gw_xprt_pending(s.top));
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, 0);
	assert_int_equal(rc, 0);
	assert_string_equal(gw_xprt_tls_sni(s.top), "a.test");
	assert_string_equal(gw_xprt_tls_alpn(c.top), "http/1.1");
	xfer(&s, &c, (const uint8_t *)"HTTP/1.1 200 OK\r\n\r\n", 19);
	end_fini(&s);
	end_fini(&c);
}

/* The stream ends under TLS without close_notify: a truncation, an error
 * (-ECONNRESET) and never a clean 0, with the bytes before it delivered. */
static void
test_truncation(void **state)
{
	struct hello h = {.verdict = GW_TLS_ANSWER};
	struct end s, c;
	size_t bytes = 0;
	int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;

	(void)state;
	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	push_client(&c, "a.test", NULL, 0, NULL);
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, 0);
	assert_int_equal(rc, 0);
	xfer(&c, &s, (const uint8_t *)"partial", 7);
	/* Around TLS: TCP's FIN alone. */
	assert_int_equal(gw_xprt_send(c.top, "more", 4), 4);
	assert_int_equal(shutdown(cfd, SHUT_WR), 0);
	assert_int_equal(recv_end(&s, &c, &bytes), -ECONNRESET);
	assert_int_equal(bytes, 4);
	assert_true(gw_xprt_tls_truncated(s.top));
	assert_true(has(gw_xprt_tls_error(s.top), "without close_notify"));
	assert_int_equal(gw_xprt_recv(s.top, (char[8]){0}, 8), -ECONNRESET);
	end_fini(&s);
	end_fini(&c);

	/* During the handshake: the same, named so. */
	tcp_pair(&cfd, &sfd);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	assert_int_equal(send(cfd, "\x16\x03\x01\x00\x40\x01", 6, 0), 6);
	assert_int_equal(shutdown(cfd, SHUT_WR), 0);
	rs = -EAGAIN;
	rc = 0;
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, -ECONNRESET);
	assert_true(has(gw_xprt_tls_error(s.top), "during the handshake"));
	end_fini(&s);
	end_fini(&c);
}

/* The upstream session cache: a session kept by key is offered again and
 * resumes; keys are bounded, the least recently used goes. The server
 * here issues tickets (ours toward guests never do). */
static void
test_session_cache(void **state)
{
	char err[GW_TLS_ERR_MAX];
	struct gw_tls_ctx *cctx = gw_tls_ctx_client_new(pki.trust, 2, err, sizeof(err));
	struct gw_tls_ctx *sctx = gw_tls_ctx_server_new(err, sizeof(err)), *keep;
	static const char *keys[] = {"c1:a.test:443", "c1:a.test:443", "c2:a.test:443",
	                             "c3:a.test:443"};
	struct gw_tls_sess_stats st;
	size_t n;

	(void)state;
	assert_non_null(cctx);
	assert_non_null(sctx);
	SSL_CTX_clear_options(gw_tls_ctx_ssl(sctx), SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(gw_tls_ctx_ssl(sctx), 1);
	SSL_CTX_set_session_cache_mode(gw_tls_ctx_ssl(sctx), SSL_SESS_CACHE_SERVER);
	SSL_CTX_set_session_id_context(gw_tls_ctx_ssl(sctx), (const unsigned char *)"t", 1);
	keep = pki.cctx;
	pki.cctx = cctx;
	for (size_t i = 0; i < 4; i++) {
		struct hello h = {.verdict = GW_TLS_ANSWER};
		struct gw_tls_server_params sp = {.hello = on_hello, .arg = &h};
		struct end s, c;
		int cfd, sfd, rs = -EAGAIN, rc = -EAGAIN;
		struct gw_xprt *x;

		tcp_pair(&cfd, &sfd);
		end_init(&s, sfd, 0, 0);
		end_init(&c, cfd, 0, 0);
		x = gw_xprt_tls_server_new(sctx, &sp, err, sizeof(err));
		assert_non_null(x);
		gw_xprt_push(&s.top, x);
		push_client(&c, "a.test", NULL, 0, keys[i]);
		handshake_both(&s, &c, &rs, &rc, false);
		assert_int_equal(rs, 0);
		assert_int_equal(rc, 0);
		/* The TLS 1.3 ticket comes after the handshake. */
		xfer(&s, &c, (const uint8_t *)"hello", 5);
		assert_int_equal(gw_xprt_tls_resumed(c.top), i == 1);
		end_fini(&s);
		end_fini(&c);
	}
	gw_tls_ctx_stats(cctx, &st, &n);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 3);
	assert_int_equal(n, 2);
	assert_int_equal(st.evictions, 1);
	pki.cctx = keep;
	gw_tls_ctx_free(cctx);
	gw_tls_ctx_free(sctx);
}

/* ---- a tunnel over a TLS layer ---- */

/* A tunnel whose client side is our TLS (an upgrade inside an
 * interception), to a guest that reads slowly: when both directions have
 * ended (the guest's close_notify; the origin's last bytes and its FIN,
 * there at once), the last record and our close_notify may still wait in
 * the layer's output buffer, the socket below being full. The tunnel is
 * done only once they are out: the guest gets every byte and a clean close
 * although the tunnel's transports are closed as soon as it says done (as
 * gw_conn_close() does). */
static void
test_tunnel_flushes_tls(void **state)
{
	const size_t n = 6 * 16384;
	uint8_t *data = pattern(n, 11), buf[4096];
	struct end s, c;
	struct hello h = {0};
	struct gw_xprt ux;
	struct gw_tunnel t;
	enum gw_tunnel_status st = GW_TUNNEL_RUNNING;
	int sfd, cfd, ufd, ofd, rs = -EAGAIN, rc = -EAGAIN;
	size_t sent = 0, got = 0;
	ssize_t r = 0;

	(void)state;
	/* Small buffers on the guest's side: a record of 16 KiB does not go
	 * down whole while the guest is behind. */
	tcp_pair_small(&cfd, &sfd, 8192, 4096);
	end_init(&s, sfd, 0, 0);
	end_init(&c, cfd, 0, 0);
	push_server(&s, &h);
	push_client(&c, "a.test", NULL, 0, NULL);
	handshake_both(&s, &c, &rs, &rc, false);
	assert_int_equal(rs, 0);
	assert_int_equal(rc, 0);
	/* The origin's bytes and FIN are all there before the tunnel runs. */
	tcp_pair(&ufd, &ofd);
	while (sent < n) {
		r = send(ofd, data + sent, n - sent, MSG_NOSIGNAL);
		assert_true(r > 0);
		sent += (size_t)r;
	}
	assert_int_equal(shutdown(ofd, SHUT_WR), 0);
	gw_xprt_tcp_init(&ux, ufd);
	/* The guest is done sending. */
	assert_int_equal(gw_xprt_shutdown(c.top), 0);
	gw_tunnel_init(&t, s.top, &ux, false);
	for (int i = 0; i < ROUNDS; i++) {
		uint32_t cev, uev;
		bool moved;
		struct pollfd p[2];

		st = gw_tunnel_run(&t, &cev, &uev, &moved);
		if (st != GW_TUNNEL_RUNNING)
			break;
		/* The guest reads a little only while the tunnel waits for it. */
		if (cev & EPOLLOUT) {
			r = gw_xprt_recv(c.top, buf, sizeof(buf));
			if (r > 0) {
				assert_true(got + (size_t)r <= n);
				assert_memory_equal(buf, data + got, (size_t)r);
				got += (size_t)r;
			} else if (r != -EAGAIN) {
				fail_msg("the guest's recv: %zd after %zu of %zu bytes", r, got, n);
			}
		}
		p[0] = (struct pollfd){.fd = sfd, .events = to_poll(cev)};
		p[1] = (struct pollfd){.fd = ufd, .events = to_poll(uev)};
		poll(p, 2, 20);
	}
	if (st != GW_TUNNEL_DONE)
		fail_msg("the tunnel: %d (%s); the guest got %zu of %zu", st,
		         gw_reason_name(t.reason), got, n);
	gw_tunnel_fini(&t);
	gw_xprt_close(&ux);
	end_fini(&s);
	/* What the guest had not read yet was all out before the close. */
	for (int i = 0; i < ROUNDS; i++) {
		r = gw_xprt_recv(c.top, buf, sizeof(buf));
		if (r > 0) {
			assert_true(got + (size_t)r <= n);
			assert_memory_equal(buf, data + got, (size_t)r);
			got += (size_t)r;
			continue;
		}
		if (r != -EAGAIN)
			break;
		wait_ends(&c, gw_xprt_want(c.top, EPOLLIN), &c, 0);
	}
	if (r != 0 || got != n)
		fail_msg("the guest got %zu of %zu bytes, then %zd (%s)", got, n, r,
		         gw_xprt_tls_error(c.top));
	close(ofd);
	end_fini(&c);
	free(data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_params),      cmocka_unit_test(test_not_tls),
	    cmocka_unit_test(test_tls10_hello),     cmocka_unit_test(test_reject),
	    cmocka_unit_test(test_hello_refused),   cmocka_unit_test(test_handshake_tcp),
	    cmocka_unit_test(test_handshake_split), cmocka_unit_test(test_handshake_ip),
	    cmocka_unit_test(test_handshake_tls12), cmocka_unit_test(test_pause_then_answer),
	    cmocka_unit_test(test_preread_hello),   cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_session_cache),   cmocka_unit_test(test_tunnel_flushes_tls),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

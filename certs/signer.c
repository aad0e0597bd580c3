/* signer.c: the process that alone holds the CA key (OpenBSD relayd's ca
 * process is the model). Forked at daemon start; the daemon's workers,
 * which parse guest bytes, never have the key in their memory: the child
 * opens (or creates) the CA, sends back its certificate, and answers one
 * MINT after another over a SOCK_SEQPACKET socketpair (wire.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "certs.h"

#define SIGNER_FD    3
#define STOP_WAIT_MS 2000

struct certs_signer {
	pid_t pid;
	int fd;
	int timeout_ms;
	pthread_mutex_t lock; /* one exchange at a time on fd */
	uint32_t next_id;     /* under lock */
	bool gone;            /* under lock: EOF or error on fd */
	X509 *ca;             /* the CA certificate only */
	char *ca_pem;
	EVP_PKEY *leaf_key;          /* the shared leaf key (not the CA's) */
	uint8_t buf[CERTS_WIRE_MAX]; /* under lock: the reply being read */
};

/* ---- the child ---- */

static void
child_send(int fd, const struct certs_msg *m)
{
	uint8_t buf[CERTS_WIRE_MAX];
	int n = certs_wire_encode(buf, sizeof(buf), m);

	if (n < 0)
		_exit(3);
	while (send(fd, buf, (size_t)n, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			_exit(errno == EPIPE ? 0 : 3);
}

static void
child_error(int fd, uint32_t id, uint8_t code, const char *text)
{
	char t[CERTS_WIRE_ERRMSG_MAX + 1];
	struct certs_msg m = {.type = CERTS_MSG_ERROR, .id = id, .code = code};

	/* one printable line, cut to fit */
	snprintf(t, sizeof(t), "%s", text);
	for (char *p = t; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	m.payload = (const uint8_t *)t;
	m.len = strlen(t);
	child_send(fd, &m);
}

/* Sends x as DER in a message of type t. */
static void
child_send_der(int fd, uint8_t t, uint32_t id, X509 *x)
{
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	struct certs_msg m = {.type = t, .id = id, .payload = der, .len = n > 0 ? (size_t)n : 0};

	if (n <= 0 || (size_t)n > CERTS_WIRE_MAX - CERTS_WIRE_HDR)
		child_error(fd, id, CERTS_ERR_MINT, "certificate too large to send");
	else
		child_send(fd, &m);
	OPENSSL_free(der);
}

/* Only the socket (as SIGNER_FD) and stderr (so that a crash report of
 * the child still reaches the daemon's log) stay open. */
static void
child_fds(int fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd != SIGNER_FD) {
		if (dup2(fd, SIGNER_FD) < 0)
			_exit(4);
	}
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0)
		_exit(4);
	if (close_range(SIGNER_FD + 1, ~0U, 0) < 0) {
		for (int i = SIGNER_FD + 1; i < 65536; i++)
			close(i);
	}
	(void)fcntl(SIGNER_FD, F_SETFD, 0);
}

static void
child_signals(void)
{
	struct sigaction sa = {.sa_handler = SIG_IGN};
	sigset_t all;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* the daemon may block signals for a signalfd: SIGTERM must work */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

static void
child_serve(int fd, const struct certs_signer_opts *o, const struct certs_ca *ca,
            const char *ca_err)
{
	static uint8_t buf[CERTS_WIRE_MAX];
	EVP_PKEY *leaf = NULL;
	char err[256];

	for (;;) {
		struct iovec iov = {buf, sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		struct certs_msg m;
		ssize_t n = recvmsg(fd, &mh, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(n == 0 ? 0 : 3); /* EOF: the daemon is done */
		if ((mh.msg_flags & MSG_TRUNC) ||
		    certs_wire_decode(buf, (size_t)n, &m, err, sizeof(err)) < 0) {
			child_error(fd,
			            n >= CERTS_WIRE_HDR
			                ? (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 |
			                      (uint32_t)buf[3] << 8 | buf[4]
			                : 0,
			            CERTS_ERR_BAD_REQUEST,
			            (mh.msg_flags & MSG_TRUNC) ? "message too long" : err);
			continue;
		}
		if (m.type == CERTS_MSG_HELLO) {
			const unsigned char *p = m.payload;

			if (leaf) {
				child_error(fd, m.id, CERTS_ERR_STATE, "HELLO twice");
				continue;
			}
			if (ca_err) {
				child_error(fd, m.id, CERTS_ERR_CA, ca_err);
				_exit(2);
			}
			leaf = d2i_PUBKEY(NULL, &p, (long)m.len);
			if (!leaf || p != m.payload + m.len) {
				EVP_PKEY_free(leaf);
				leaf = NULL;
				ERR_clear_error();
				child_error(fd, m.id, CERTS_ERR_BAD_REQUEST,
				            "HELLO: not a DER public key");
				continue;
			}
			child_send_der(fd, CERTS_MSG_READY, m.id, ca->cert);
		} else if (m.type == CERTS_MSG_MINT) {
			char host[CERTS_HOST_MAX + 1];
			X509 *x;

			if (!leaf) {
				child_error(fd, m.id, CERTS_ERR_STATE, "MINT before HELLO");
				continue;
			}
			memcpy(host, m.payload, m.len);
			host[m.len] = 0;
			if (certs_mint(ca, leaf, host, o->leaf_validity_days, time(NULL), &x, err,
			               sizeof(err)) < 0) {
				child_error(fd, m.id, CERTS_ERR_MINT, err);
				continue;
			}
			child_send_der(fd, CERTS_MSG_LEAF, m.id, x);
			X509_free(x);
		} else {
			child_error(fd, m.id, CERTS_ERR_BAD_REQUEST, "not a request");
		}
	}
}

static void __attribute__((noreturn))
child_main(int fd, const struct certs_signer_opts *o, pid_t parent)
{
	struct certs_ca ca;
	char err[256];
	int rc;

	/* die with the daemon; if it died before prctl, notice now */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	(void)prctl(PR_SET_DUMPABLE, 0); /* no core, no ptrace by peers */
	child_signals();
	child_fds(fd);
	rc = certs_ca_open(o->ca_cert, o->ca_key, &ca, NULL, err, sizeof(err));
	child_serve(SIGNER_FD, o, &ca, rc < 0 ? err : NULL);
	_exit(0);
}

/* ---- the daemon's side ---- */

/* One request, its reply into buf (stale replies to requests that timed
 * out are skipped by id). Called under s->lock. */
static int
exchange(struct certs_signer *s, const struct certs_msg *req, uint8_t *buf, struct certs_msg *rep,
         char *err, size_t errsz)
{
	uint8_t out[CERTS_WIRE_HDR + CERTS_HOST_MAX + 1024];
	int n = certs_wire_encode(out, sizeof(out), req);
	struct timespec t0;

	if (n < 0) {
		snprintf(err, errsz, "request not encodable");
		return n;
	}
	if (s->gone)
		goto gone;
	while (send(s->fd, out, (size_t)n, MSG_NOSIGNAL) < 0) {
		if (errno != EINTR) {
			s->gone = true;
			goto gone;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		struct timespec t1;
		long left;
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = s->timeout_ms -
		       ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0) {
			snprintf(err, errsz,
			         "the certificate signer (pid %d) did not answer in %d ms",
			         (int)s->pid, s->timeout_ms);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			snprintf(err, errsz, "poll: %s", strerror(errno));
			return -EIO;
		}
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = recv(s->fd, buf, CERTS_WIRE_MAX, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			s->gone = true;
			goto gone;
		}
		if (certs_wire_decode(buf, (size_t)r, rep, err, errsz) < 0)
			return -EIO;
		if (rep->id == req->id)
			break;
	}
	if (rep->type == CERTS_MSG_ERROR) {
		snprintf(err, errsz, "%.*s", (int)rep->len, (const char *)rep->payload);
		return -EIO;
	}
	return 0;
gone:
	snprintf(err, errsz, "the certificate signer (pid %d) has exited", (int)s->pid);
	return -EPIPE;
}

static X509 *
der_to_x509(const struct certs_msg *m)
{
	const unsigned char *p = m->payload;
	X509 *x = d2i_X509(NULL, &p, (long)m->len);

	if (x && p != m->payload + m->len) {
		X509_free(x);
		x = NULL;
	}
	if (!x)
		ERR_clear_error();
	return x;
}

static char *
to_pem(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p = NULL, *s = NULL;
	long n;

	if (b && PEM_write_bio_X509(b, x) && (n = BIO_get_mem_data(b, &p)) > 0 &&
	    (s = malloc((size_t)n + 1))) {
		memcpy(s, p, (size_t)n);
		s[n] = 0;
	}
	BIO_free(b);
	return s;
}

/* The READY exchange: the leaf key's public half out, the CA certificate
 * back. */
static int
hello(struct certs_signer *s, char *err, size_t errsz)
{
	unsigned char *spki = NULL;
	int n = i2d_PUBKEY(s->leaf_key, &spki);
	struct certs_msg req = {
	    .type = CERTS_MSG_HELLO, .id = 0, .payload = spki, .len = n > 0 ? (size_t)n : 0};
	struct certs_msg rep;
	int rc;

	if (n <= 0) {
		snprintf(err, errsz, "cannot encode the leaf key");
		return -EIO;
	}
	rc = exchange(s, &req, s->buf, &rep, err, errsz);
	OPENSSL_free(spki);
	if (rc < 0)
		return rc;
	if (rep.type != CERTS_MSG_READY || !(s->ca = der_to_x509(&rep)) ||
	    !(s->ca_pem = to_pem(s->ca))) {
		snprintf(err, errsz, "the certificate signer sent no CA certificate");
		return -EIO;
	}
	return 0;
}

int
certs_signer_start(const struct certs_signer_opts *o, struct certs_signer **out, char *err,
                   size_t errsz)
{
	struct certs_signer *s;
	pid_t parent = getpid();
	int sv[2], rc;

	*out = NULL;
	if (!o->ca_cert || !o->ca_key || o->leaf_validity_days < 1 || o->leaf_validity_days > 397) {
		snprintf(err, errsz, "certs_signer_start: bad options");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	s->fd = -1;
	s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
	s->next_id = 1;
	s->leaf_key = certs_leaf_key_new();
	if (!s->leaf_key) {
		snprintf(err, errsz, "cannot make the leaf key");
		rc = -ENOMEM;
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		snprintf(err, errsz, "socketpair: %s", strerror(-rc));
		goto fail;
	}
	s->pid = fork();
	if (s->pid < 0) {
		rc = -errno;
		snprintf(err, errsz, "fork: %s", strerror(-rc));
		close(sv[0]);
		close(sv[1]);
		goto fail;
	}
	if (s->pid == 0) {
		close(sv[0]);
		child_main(sv[1], o, parent);
	}
	close(sv[1]);
	s->fd = sv[0];
	rc = hello(s, err, errsz);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	certs_signer_stop(s);
	return rc;
}

int
certs_signer_mint(struct certs_signer *s, const char *host, X509 **out, char *err, size_t errsz)
{
	uint8_t addr[16];
	size_t len = host ? strnlen(host, CERTS_HOST_MAX + 1) : 0;
	struct certs_msg req = {
	    .type = CERTS_MSG_MINT, .payload = (const uint8_t *)host, .len = len};
	struct certs_msg rep;
	int rc;

	*out = NULL;
	if (certs_host_check(host, len, addr) < 0) {
		snprintf(err, errsz, "not a host a certificate is minted for");
		return -EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	req.id = s->next_id++;
	if (s->next_id == 0)
		s->next_id = 1; /* 0 is HELLO's */
	rc = exchange(s, &req, s->buf, &rep, err, errsz);
	if (rc == 0 && (rep.type != CERTS_MSG_LEAF || !(*out = der_to_x509(&rep)))) {
		snprintf(err, errsz, "the certificate signer sent no certificate");
		rc = -EIO;
	}
	pthread_mutex_unlock(&s->lock); /* rep borrowed s->buf until here */
	return rc;
}

int
certs_signer_mint_cb(void *arg, const char *host, X509 **out, char *err, size_t errsz)
{
	return certs_signer_mint(arg, host, out, err, errsz);
}

X509 *
certs_signer_ca(const struct certs_signer *s)
{
	return s->ca;
}

const char *
certs_signer_ca_pem(const struct certs_signer *s)
{
	return s->ca_pem;
}

EVP_PKEY *
certs_signer_leaf_key(const struct certs_signer *s)
{
	return s->leaf_key;
}

pid_t
certs_signer_pid(const struct certs_signer *s)
{
	return s->pid;
}

int
certs_signer_stop(struct certs_signer *s)
{
	int rc = 0, status = 0;

	if (!s)
		return 0;
	if (s->fd >= 0)
		close(s->fd); /* the signer sees EOF and exits */
	if (s->pid > 0) {
		pid_t r = 0;

		for (int ms = 0; ms < STOP_WAIT_MS; ms += 10) {
			r = waitpid(s->pid, &status, WNOHANG);
			if (r != 0 || (r < 0 && errno != EINTR))
				break;
			usleep(10000);
		}
		if (r == 0) {
			kill(s->pid, SIGKILL);
			while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
				;
			rc = -ETIMEDOUT;
		} else if (r < 0) {
			rc = -ECHILD;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			rc = -EIO;
		}
	}
	X509_free(s->ca);
	free(s->ca_pem);
	EVP_PKEY_free(s->leaf_key);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return rc;
}

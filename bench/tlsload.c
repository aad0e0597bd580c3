/* tlsload.c: a small HTTPS load generator that can go through an HTTP
 * proxy's CONNECT, for bench/intercept.sh (wrk and h2load cannot use a
 * proxy). OpenSSL, epoll, one event loop per thread, no retries hidden:
 * every failure is counted.
 *
 *   build/bench/bench_tlsload -C CAFILE -H NAME:PORT [-a ADDR:PORT | -x PROXY:PORT]
 *                             [-c CONNS] [-t THREADS] [-d SECS] [-p PATH] [--new | --stream]
 *
 *   -H NAME:PORT  the origin as the client names it: the CONNECT target, the
 *                 SNI and certificate name (NAME), the Host header
 *   -a ADDR:PORT  connect straight to this IPv4 address (direct)
 *   -x ADDR:PORT  connect to this proxy and send CONNECT NAME:PORT first
 *   -C CAFILE     the only CA trusted for the TLS inside (verify on, name checked)
 *   -c, -t, -d    connections (50), threads (2), seconds (10)
 *   -p PATH       the request's path (/1k; /big with --stream)
 *
 * Modes and the one line printed on stdout, "COUNT SECONDS RATE ERRORS":
 *   (default)  keep-alive: each connection does CONNECT (with -x) and one
 *              TLS handshake, then GETs PATH back to back for SECS; COUNT is
 *              responses, RATE responses/s. A response that closes the
 *              connection (Connection: close, EOF) is counted and the
 *              connection made again; "reconnects" go to stderr.
 *   --new      every request on a fresh TCP connection, CONNECT and full TLS
 *              handshake (no session resumption), "Connection: close";
 *              COUNT is completed exchanges, RATE of them per second.
 *   --stream   one connection, one GET of PATH, read for at most SECS;
 *              COUNT is body bytes, RATE MB/s (10^6 bytes) from the
 *              request sent to the last byte read.
 * ERRORS counts connections that failed (connect, CONNECT not 200, TLS,
 * a status other than 200, a short body); the first few are described on
 * stderr. The exit status is 0 when at least one response completed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

enum mode { M_KEEPALIVE, M_NEW, M_STREAM };

enum st { ST_TCP, ST_PROXY_SEND, ST_PROXY_RECV, ST_TLS, ST_REQ, ST_HEAD, ST_BODY };

struct conn {
	int fd;
	enum st st;
	SSL *ssl;
	char head[16384];
	size_t hlen;
	long long left;  /* body bytes still to read */
	int close_after; /* the response said Connection: close */
	size_t reqoff;   /* bytes of the request written (plain or TLS) */
};

struct worker {
	pthread_t th;
	int ep;
	int nconn;
	struct conn *conns;
	uint64_t done, errors, reconnects, bytes;
	double t_first, t_last; /* stream: request sent, last byte */
};

static struct {
	enum mode mode;
	const char *name; /* NAME of -H */
	char hostport[300];
	struct sockaddr_in to;
	int via_proxy;
	int conns, threads;
	double secs;
	const char *path;
	SSL_CTX *ctx;
	char req[1024];
	size_t reqlen;
	char connect_req[700];
	size_t connect_len;
	double deadline;
} G = {.conns = 50, .threads = 2, .secs = 10};

static atomic_int n_complaints;

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
complain(const char *fmt, ...)
{
	if (atomic_fetch_add(&n_complaints, 1) >= 5)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("tlsload: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	unsigned long e = ERR_get_error();
	if (e) {
		char buf[256];
		ERR_error_string_n(e, buf, sizeof(buf));
		fprintf(stderr, " (%s)", buf);
	}
	fputc('\n', stderr);
	ERR_clear_error();
}

static int
parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static void
watch(struct worker *w, struct conn *c, uint32_t ev, int op)
{
	struct epoll_event e = {.events = ev, .data.ptr = c};
	if (epoll_ctl(w->ep, op, c->fd, &e) < 0) {
		perror("tlsload: epoll_ctl");
		exit(2);
	}
}

static void
conn_drop(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd); /* also leaves the epoll set */
		c->fd = -1;
	}
}

/* Opens c's TCP connection (non-blocking); 0, or -1 counted as an error. */
static int
conn_open(struct worker *w, struct conn *c)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		complain("socket: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->st = ST_TCP;
	c->hlen = 0;
	c->reqoff = 0;
	if (connect(c->fd, (struct sockaddr *)&G.to, sizeof(G.to)) < 0 && errno != EINPROGRESS) {
		complain("connect: %s", strerror(errno));
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	watch(w, c, EPOLLOUT, EPOLL_CTL_ADD);
	return 0;
}

static void
conn_restart(struct worker *w, struct conn *c)
{
	conn_drop(c);
	while (now() < G.deadline && conn_open(w, c) < 0) {
		w->errors++;
		usleep(10000);
	}
}

static void
conn_fail(struct worker *w, struct conn *c, const char *what)
{
	if (now() < G.deadline) {
		w->errors++;
		complain("%s", what);
	}
	if (G.mode == M_STREAM) {
		conn_drop(c);
		G.deadline = 0;
		return;
	}
	conn_restart(w, c);
}

/* Parses the response head in c->head[0..hlen); body bytes after it are
 * consumed. 0 ready for the body, -1 not a 200 with a length. */
static int
head_parsed(struct conn *c, size_t end)
{
	if (strncmp(c->head, "HTTP/1.1 200", 12) != 0 && strncmp(c->head, "HTTP/1.0 200", 12) != 0)
		return -1;
	c->left = -1;
	c->close_after = strncmp(c->head, "HTTP/1.0", 8) == 0;
	for (char *l = strstr(c->head, "\r\n") + 2; l < c->head + end; l = strstr(l, "\r\n") + 2) {
		if (strncasecmp(l, "Content-Length:", 15) == 0)
			c->left = strtoll(l + 15, NULL, 10);
		else if (strncasecmp(l, "Connection:", 11) == 0) {
			const char *v = l + 11;
			while (*v == ' ')
				v++;
			c->close_after = strncasecmp(v, "close", 5) == 0;
		}
	}
	if (c->left < 0)
		return -1;
	c->left -= (long long)(c->hlen - end);
	return 0;
}

static void
response_done(struct worker *w, struct conn *c)
{
	double t = now();
	if (t < G.deadline)
		w->done++;
	if (G.mode == M_STREAM) {
		w->t_last = t;
		conn_drop(c);
		G.deadline = 0;
		return;
	}
	if (G.mode == M_NEW || c->close_after) {
		if (G.mode == M_KEEPALIVE)
			w->reconnects++;
		conn_restart(w, c);
		return;
	}
	c->st = ST_REQ;
	c->reqoff = 0;
	c->hlen = 0;
}

/* Drives c as far as it goes without blocking. */
static void
conn_step(struct worker *w, struct conn *c)
{
	static __thread char sink[65536];
	/* ST_TCP is only ever left on the event that says connect() ended,
	 * not when a connection is made again inside this call. */
	int connected = c->st == ST_TCP;
	for (;;) {
		if (c->fd < 0)
			return;
		switch (c->st) {
		case ST_TCP: {
			if (!connected)
				return;
			connected = 0;
			int err = 0;
			socklen_t l = sizeof(err);
			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
			if (err) {
				errno = err;
				conn_fail(w, c, strerror(err));
				return;
			}
			c->st = G.via_proxy ? ST_PROXY_SEND : ST_TLS;
			if (c->st == ST_TLS) {
				c->ssl = SSL_new(G.ctx);
				SSL_set_fd(c->ssl, c->fd);
				SSL_set_tlsext_host_name(c->ssl, G.name);
				SSL_set1_host(c->ssl, G.name);
			}
			continue;
		}
		case ST_PROXY_SEND: {
			ssize_t n =
			    write(c->fd, G.connect_req + c->reqoff, G.connect_len - c->reqoff);
			if (n < 0 && errno == EAGAIN) {
				watch(w, c, EPOLLOUT, EPOLL_CTL_MOD);
				return;
			}
			if (n <= 0) {
				conn_fail(w, c, "writing CONNECT");
				return;
			}
			c->reqoff += n;
			if (c->reqoff == G.connect_len) {
				c->st = ST_PROXY_RECV;
				watch(w, c, EPOLLIN, EPOLL_CTL_MOD);
				return;
			}
			continue;
		}
		case ST_PROXY_RECV: {
			/* Nothing follows the proxy's answer before our ClientHello. */
			ssize_t n = read(c->fd, c->head + c->hlen, sizeof(c->head) - 1 - c->hlen);
			if (n < 0 && errno == EAGAIN)
				return;
			if (n <= 0) {
				conn_fail(w, c, "reading the CONNECT answer: closed");
				return;
			}
			c->hlen += n;
			c->head[c->hlen] = 0;
			if (!strstr(c->head, "\r\n\r\n")) {
				if (c->hlen == sizeof(c->head) - 1)
					conn_fail(w, c, "CONNECT answer too long");
				continue;
			}
			if (strncmp(c->head + 8, " 200", 4) != 0) {
				char line[120];
				snprintf(line, sizeof(line), "CONNECT answered: %.*s",
				         (int)strcspn(c->head, "\r\n"), c->head);
				conn_fail(w, c, line);
				return;
			}
			c->hlen = 0;
			c->st = ST_TLS;
			c->ssl = SSL_new(G.ctx);
			SSL_set_fd(c->ssl, c->fd);
			SSL_set_tlsext_host_name(c->ssl, G.name);
			SSL_set1_host(c->ssl, G.name);
			continue;
		}
		case ST_TLS: {
			int r = SSL_connect(c->ssl);
			if (r == 1) {
				c->st = ST_REQ;
				c->reqoff = 0;
				continue;
			}
			int e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ) {
				watch(w, c, EPOLLIN, EPOLL_CTL_MOD);
				return;
			}
			if (e == SSL_ERROR_WANT_WRITE) {
				watch(w, c, EPOLLOUT, EPOLL_CTL_MOD);
				return;
			}
			char what[200];
			long v = SSL_get_verify_result(c->ssl);
			snprintf(what, sizeof(what), "TLS handshake failed (verify: %s)",
			         X509_verify_cert_error_string(v));
			conn_fail(w, c, what);
			return;
		}
		case ST_REQ: {
			if (G.mode == M_STREAM && w->t_first == 0)
				w->t_first = now();
			int r = SSL_write(c->ssl, G.req + c->reqoff, (int)(G.reqlen - c->reqoff));
			if (r <= 0) {
				int e = SSL_get_error(c->ssl, r);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					watch(w, c, e == SSL_ERROR_WANT_WRITE ? EPOLLOUT : EPOLLIN,
					      EPOLL_CTL_MOD);
					return;
				}
				/* A keep-alive connection the server closed meanwhile. */
				conn_fail(w, c, "writing the request");
				return;
			}
			c->reqoff += r;
			if (c->reqoff < G.reqlen)
				continue;
			c->st = ST_HEAD;
			c->hlen = 0;
			watch(w, c, EPOLLIN, EPOLL_CTL_MOD);
			continue;
		}
		case ST_HEAD:
		case ST_BODY: {
			char *dst = c->st == ST_HEAD ? c->head + c->hlen : sink;
			size_t room =
			    c->st == ST_HEAD ? sizeof(c->head) - 1 - c->hlen : sizeof(sink);
			if (c->st == ST_BODY && (long long)room > c->left)
				room = (size_t)c->left;
			int r = SSL_read(c->ssl, dst, (int)room);
			if (r <= 0) {
				int e = SSL_get_error(c->ssl, r);
				if (e == SSL_ERROR_WANT_READ)
					return;
				if (e == SSL_ERROR_WANT_WRITE) {
					watch(w, c, EPOLLOUT, EPOLL_CTL_MOD);
					return;
				}
				if (c->st == ST_HEAD && c->hlen == 0 && G.mode == M_KEEPALIVE) {
					/* Closed between responses: the server's
					 * keep-alive limit, not a failure. */
					w->reconnects++;
					conn_restart(w, c);
					return;
				}
				conn_fail(w, c, "the response was cut short");
				return;
			}
			if (c->st == ST_BODY) {
				c->left -= r;
				if (G.mode == M_STREAM) {
					w->bytes += r;
					w->t_last = now();
					if (w->t_last >= G.deadline) {
						conn_drop(c);
						return;
					}
				}
				if (c->left == 0)
					response_done(w, c);
				continue;
			}
			c->hlen += r;
			c->head[c->hlen] = 0;
			char *end = strstr(c->head, "\r\n\r\n");
			if (!end) {
				if (c->hlen == sizeof(c->head) - 1)
					conn_fail(w, c, "response head too long");
				continue;
			}
			size_t hend = (size_t)(end + 4 - c->head);
			if (head_parsed(c, hend) < 0) {
				char line[120];
				snprintf(line, sizeof(line),
				         "response: %.*s (a 200 with a Content-Length expected)",
				         (int)strcspn(c->head, "\r\n"), c->head);
				conn_fail(w, c, line);
				return;
			}
			if (G.mode == M_STREAM)
				w->bytes += c->hlen - hend;
			c->st = ST_BODY;
			if (c->left == 0)
				response_done(w, c);
			continue;
		}
		}
	}
}

static void *
worker_run(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[256];
	for (int i = 0; i < w->nconn; i++) {
		w->conns[i].fd = -1;
		if (conn_open(w, &w->conns[i]) < 0)
			w->errors++;
	}
	while (now() < G.deadline) {
		int n = epoll_wait(w->ep, ev, 256, 100);
		for (int i = 0; i < n; i++)
			conn_step(w, ev[i].data.ptr);
	}
	for (int i = 0; i < w->nconn; i++)
		conn_drop(&w->conns[i]);
	return NULL;
}

static void
usage(void)
{
	fputs("usage: bench_tlsload -C CAFILE -H NAME:PORT (-a ADDR:PORT | -x PROXY:PORT)\n"
	      "       [-c CONNS] [-t THREADS] [-d SECS] [-p PATH] [--new | --stream]\n",
	      stderr);
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {{"new", no_argument, NULL, 'n'},
	                                     {"stream", no_argument, NULL, 's'},
	                                     {NULL, 0, NULL, 0}};
	const char *ca = NULL, *hp = NULL, *addr = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "C:H:a:x:c:t:d:p:", opts, NULL)) != -1) {
		switch (o) {
		case 'C':
			ca = optarg;
			break;
		case 'H':
			hp = optarg;
			break;
		case 'a':
			addr = optarg;
			G.via_proxy = 0;
			break;
		case 'x':
			addr = optarg;
			G.via_proxy = 1;
			break;
		case 'c':
			G.conns = atoi(optarg);
			break;
		case 't':
			G.threads = atoi(optarg);
			break;
		case 'd':
			G.secs = atof(optarg);
			break;
		case 'p':
			G.path = optarg;
			break;
		case 'n':
			G.mode = M_NEW;
			break;
		case 's':
			G.mode = M_STREAM;
			break;
		default:
			usage();
		}
	}
	if (!ca || !hp || !addr || !strchr(hp, ':') || strlen(hp) >= sizeof(G.hostport) ||
	    parse_addr(addr, &G.to) < 0 || G.conns < 1 || G.threads < 1 || G.secs <= 0)
		usage();
	if (G.mode == M_STREAM)
		G.conns = G.threads = 1;
	if (G.threads > G.conns)
		G.threads = G.conns;
	if (!G.path)
		G.path = G.mode == M_STREAM ? "/big" : "/1k";
	snprintf(G.hostport, sizeof(G.hostport), "%s", hp);
	static char name[300];
	snprintf(name, sizeof(name), "%.*s", (int)(strrchr(hp, ':') - hp), hp);
	G.name = name;
	/* Host: NAME alone on 443, as clients send it; NAME:PORT otherwise. */
	const char *host = strcmp(strrchr(hp, ':'), ":443") == 0 ? G.name : G.hostport;
	G.reqlen = (size_t)snprintf(G.req, sizeof(G.req),
	                            "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tlsload\r\n"
	                            "Accept: */*\r\n%s\r\n",
	                            G.path, host, G.mode == M_NEW ? "Connection: close\r\n" : "");
	G.connect_len =
	    (size_t)snprintf(G.connect_req, sizeof(G.connect_req),
	                     "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", G.hostport, G.hostport);

	G.ctx = SSL_CTX_new(TLS_client_method());
	if (!G.ctx || SSL_CTX_load_verify_locations(G.ctx, ca, NULL) != 1) {
		complain("cannot load %s", ca);
		return 2;
	}
	SSL_CTX_set_verify(G.ctx, SSL_VERIFY_PEER, NULL);
	/* Every handshake a full one: no session cache, no tickets kept. */
	SSL_CTX_set_session_cache_mode(G.ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(G.ctx, SSL_MODE_AUTO_RETRY);

	struct worker *ws = calloc((size_t)G.threads, sizeof(*ws));
	struct conn *cs = calloc((size_t)G.conns, sizeof(*cs));
	if (!ws || !cs)
		return 2;
	double t0 = now();
	G.deadline = t0 + G.secs;
	for (int i = 0, at = 0; i < G.threads; i++) {
		ws[i].nconn = G.conns / G.threads + (i < G.conns % G.threads);
		ws[i].conns = cs + at;
		at += ws[i].nconn;
		ws[i].ep = epoll_create1(EPOLL_CLOEXEC);
		pthread_create(&ws[i].th, NULL, worker_run, &ws[i]);
	}
	uint64_t done = 0, errors = 0, reconnects = 0, bytes = 0;
	double t_first = 0, t_last = 0;
	for (int i = 0; i < G.threads; i++) {
		pthread_join(ws[i].th, NULL);
		done += ws[i].done;
		errors += ws[i].errors;
		reconnects += ws[i].reconnects;
		bytes += ws[i].bytes;
		t_first = ws[i].t_first;
		t_last = ws[i].t_last;
	}
	double secs = now() - t0;
	if (secs > G.secs)
		secs = G.secs;
	if (reconnects)
		fprintf(stderr,
		        "tlsload: %llu reconnects (the server closed keep-alive connections)\n",
		        (unsigned long long)reconnects);
	if (G.mode == M_STREAM) {
		double s = t_last > t_first ? t_last - t_first : 0;
		printf("%llu %.2f %.0f %llu\n", (unsigned long long)bytes, s,
		       s > 0 ? bytes / s / 1e6 : 0, (unsigned long long)errors);
		return bytes > 0 ? 0 : 1;
	}
	printf("%llu %.2f %.0f %llu\n", (unsigned long long)done, secs, done / secs,
	       (unsigned long long)errors);
	return done > 0 ? 0 : 1;
}

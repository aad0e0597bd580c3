/* test_tunnel.c: gateway/tunnel.c between real TCP sockets on 127.0.0.1.
 *
 * Each case builds two connected pairs: the client application `a` and
 * the tunnel's client end `cfd`; the tunnel's upstream end `ufd` and the
 * upstream application `b`. The driver polls every fd, calls
 * gw_tunnel_run() only when a tunnel fd is ready for what the tunnel asked
 * (as the level-triggered loop does), and fails when nothing is ready for
 * two seconds (a stall). Every case runs copying and splicing. The hello
 * gate's cases come last: bad inputs first, then what passes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "reason.h"
#include "tlshello.h"
#include "tlshello_build.h"
#include "tunnel.h"
#include "xprt.h"

#define STALL_MS 2000

static void
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	assert_true(fl >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static void
set_buf(int fd, int opt, int size)
{
	int force = opt == SO_RCVBUF ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;

	/* As root, past net.core.[rw]mem_max; else what the limit allows. */
	if (size && setsockopt(fd, SOL_SOCKET, force, &size, sizeof(size)) < 0)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, opt, &size, sizeof(size)), 0);
}

/* A connected pair on 127.0.0.1: *app (the test's end) and *tun (the
 * tunnel's end), both non-blocking. Buffer sizes are set before connect so
 * that the window follows them; 0 keeps the default. */
static void
tcp_pair(int *app, int *tun, int app_snd, int app_rcv, int tun_snd, int tun_rcv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int l, c, s, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	set_buf(l, SO_RCVBUF, tun_rcv);
	set_buf(l, SO_SNDBUF, tun_snd);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	set_buf(c, SO_SNDBUF, app_snd);
	set_buf(c, SO_RCVBUF, app_rcv);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	close(l);
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_nonblock(c);
	set_nonblock(s);
	*app = c;
	*tun = s;
}

static uint8_t
pat(uint8_t seed, size_t i)
{
	return (uint8_t)(((i ^ (i >> 8) ^ (i >> 16)) * 31u) + seed);
}

/* One application end. */
struct peer {
	int fd;
	const char *name;
	/* sending: `total` pattern bytes with `seed`, then maybe shut down */
	size_t total;
	size_t sent;
	uint8_t seed;
	bool shut_when_sent;
	bool shut;
	/* receiving: `pre` first (preloaded on the other side), then the
	 * other peer's pattern with `rseed` */
	const char *pre;
	size_t prelen;
	uint8_t rseed;
	size_t rcvd;
	bool eof;
	bool paused;            /* does not read */
	int rerr;               /* errno of a failed recv */
};

struct fx {
	int cfd, ufd;
	struct peer a, b;       /* a: the client app; b: the upstream app */
	struct gw_tunnel t;
	bool splice;
	struct gw_xprt cx, ux;  /* the tunnel's transports over cfd, ufd */
	uint32_t cev, uev;
	bool moved;
	enum gw_tunnel_status st;
	unsigned runs;
	unsigned idle_runs;     /* runs that moved nothing */
};

static void
fx_init(struct fx *f, bool splice, int bufs)
{
	memset(f, 0, sizeof(*f));
	/* bufs: 0 default; >0 large; <0 small upstream receiver */
	if (bufs > 0) {
		tcp_pair(&f->a.fd, &f->cfd, bufs, bufs, bufs, bufs);
		tcp_pair(&f->b.fd, &f->ufd, bufs, bufs, bufs, bufs);
	} else if (bufs < 0) {
		tcp_pair(&f->a.fd, &f->cfd, 0, 0, 0, 0);
		tcp_pair(&f->b.fd, &f->ufd, 0, 4096, 4096, 0);
	} else {
		tcp_pair(&f->a.fd, &f->cfd, 0, 0, 0, 0);
		tcp_pair(&f->b.fd, &f->ufd, 0, 0, 0, 0);
	}
	f->a.name = "client";
	f->b.name = "upstream";
	f->a.seed = 0x11;
	f->b.seed = 0x77;
	f->a.rseed = f->b.seed;
	f->b.rseed = f->a.seed;
	f->splice = splice;
	gw_xprt_tcp_init(&f->cx, f->cfd);
	gw_xprt_tcp_init(&f->ux, f->ufd);
	gw_tunnel_init(&f->t, &f->cx, &f->ux, splice);
	f->st = GW_TUNNEL_RUNNING;
}

static void
fx_fini(struct fx *f)
{
	gw_tunnel_fini(&f->t);
	if (f->a.fd >= 0)
		close(f->a.fd);
	if (f->b.fd >= 0)
		close(f->b.fd);
	if (f->cfd >= 0)
		close(f->cfd);
	if (f->ufd >= 0)
		close(f->ufd);
}

static void
fx_run(struct fx *f)
{
	f->st = gw_tunnel_run(&f->t, &f->cev, &f->uev, &f->moved);
	f->runs++;
	if (!f->moved)
		f->idle_runs++;
	if (f->st != GW_TUNNEL_RUNNING)
		f->cev = f->uev = 0;
}

static void
peer_send(struct peer *p)
{
	char chunk[65536];

	while (p->sent < p->total) {
		size_t n = p->total - p->sent;
		ssize_t r;

		if (n > sizeof(chunk))
			n = sizeof(chunk);
		for (size_t i = 0; i < n; i++)
			chunk[i] = (char)pat(p->seed, p->sent + i);
		r = send(p->fd, chunk, n, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EAGAIN)
				return;
			fail_msg("%s: send: %s", p->name, strerror(errno));
		}
		p->sent += (size_t)r;
	}
	if (p->shut_when_sent && !p->shut) {
		assert_int_equal(shutdown(p->fd, SHUT_WR), 0);
		p->shut = true;
	}
}

static void
peer_recv(struct peer *p)
{
	char chunk[65536];

	while (!p->eof && !p->paused) {
		ssize_t r = recv(p->fd, chunk, sizeof(chunk), 0);

		if (r < 0) {
			if (errno == EAGAIN)
				return;
			p->rerr = errno;
			p->eof = true;
			return;
		}
		if (r == 0) {
			p->eof = true;
			return;
		}
		for (ssize_t i = 0; i < r; i++, p->rcvd++) {
			uint8_t want = p->rcvd < p->prelen
					       ? (uint8_t)p->pre[p->rcvd]
					       : pat(p->rseed, p->rcvd - p->prelen);

			if ((uint8_t)chunk[i] != want)
				fail_msg("%s: byte %zu is %02x, not %02x (%s)", p->name, p->rcvd,
					 (uint8_t)chunk[i], want, p->rcvd < p->prelen ? "preload" : "data");
		}
	}
}

static short
peer_events(const struct peer *p)
{
	short ev = 0;

	if (!p->eof && !p->paused)
		ev |= POLLIN;
	if (p->sent < p->total)
		ev |= POLLOUT;
	return ev;
}

typedef bool (*until_fn)(struct fx *f);

/* One poll of every fd for up to timeout_ms; lets the peers and the
 * tunnel act on what is ready. Returns poll's count (0: nothing ready). */
static int
fx_poll(struct fx *f, int timeout_ms)
{
	struct pollfd pf[4];
	int n;

	pf[0] = (struct pollfd){ .fd = f->a.fd, .events = peer_events(&f->a) };
	pf[1] = (struct pollfd){ .fd = f->b.fd, .events = peer_events(&f->b) };
	pf[2] = (struct pollfd){ .fd = f->cfd, .events = (short)f->cev };
	pf[3] = (struct pollfd){ .fd = f->ufd, .events = (short)f->uev };
	if (f->a.fd < 0)
		pf[0].fd = -1;
	if (f->b.fd < 0)
		pf[1].fd = -1;
	n = poll(pf, 4, timeout_ms);
	assert_true(n >= 0);
	if (pf[0].revents & POLLOUT)
		peer_send(&f->a);
	if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
		peer_recv(&f->a);
	if (pf[1].revents & POLLOUT)
		peer_send(&f->b);
	if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
		peer_recv(&f->b);
	if (pf[2].revents || pf[3].revents)
		fx_run(f);
	return n;
}

/* Drives everything until `until` holds, or the tunnel ends. Returns 0, or
 * -1 on a stall (nothing ready for STALL_MS). */
static int
drive(struct fx *f, until_fn until)
{
	bool first = true;

	for (;;) {
		if (until && until(f))
			return 0;
		/* Ended: without a goal, done; with one, the peers drain. */
		if (f->st != GW_TUNNEL_RUNNING && !until)
			return 0;
		if (first) {
			/* The peers act first so that their bytes are there. */
			peer_send(&f->a);
			peer_send(&f->b);
			fx_run(f);
			first = false;
			continue;
		}
		if (fx_poll(f, STALL_MS) == 0) {
			print_error("stall: cev %#x uev %#x; c2u eof %d shut %d in_pipe %zu buf %zu; "
				    "u2c eof %d shut %d in_pipe %zu buf %zu; a sent %zu/%zu rcvd %zu; "
				    "b sent %zu/%zu rcvd %zu\n",
				    f->cev, f->uev, f->t.dir[0].eof, f->t.dir[0].shut,
				    f->t.dir[0].in_pipe, f->t.dir[0].end - f->t.dir[0].start,
				    f->t.dir[1].eof, f->t.dir[1].shut, f->t.dir[1].in_pipe,
				    f->t.dir[1].end - f->t.dir[1].start, f->a.sent, f->a.total, f->a.rcvd,
				    f->b.sent, f->b.total, f->b.rcvd);
			return -1;
		}
	}
}

static bool
both_eof(struct fx *f)
{
	return f->a.eof && f->b.eof && f->st != GW_TUNNEL_RUNNING;
}

/* ---- bad inputs first ------------------------------------------------ */

static void
test_preload_too_much(void **state)
{
	struct gw_tunnel t;
	struct gw_xprt x;
	char *big = calloc(1, GW_TUNNEL_PRELOAD_MAX + 1);

	(void)state;
	assert_non_null(big);
	gw_xprt_tcp_init(&x, -1);
	gw_tunnel_init(&t, &x, &x, false);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, GW_TUNNEL_PRELOAD_MAX + 1, false),
			 -ENOSPC);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, 0, false), 0);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, GW_TUNNEL_BUF - 10, false), 0);
	/* past one buffer: it grows */
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, 11, false), 0);
	assert_int_equal(t.dir[GW_TUNNEL_C2U].end, GW_TUNNEL_BUF + 1);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big,
					   GW_TUNNEL_PRELOAD_MAX - GW_TUNNEL_BUF - 2, false), 0);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, 2, false), -ENOSPC);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, 1, false), 0);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_C2U, big, 1, false), -ENOSPC);
	assert_int_equal(t.dir[GW_TUNNEL_C2U].end, GW_TUNNEL_PRELOAD_MAX);
	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_U2C, big, GW_TUNNEL_BUF, false), 0);
	gw_tunnel_fini(&t);
	gw_tunnel_fini(&t);     /* twice is harmless */
	free(big);
}

static void
run_reset(bool splice, bool client_side)
{
	struct fx f;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct peer *p;

	fx_init(&f, splice, 0);
	/* some traffic first */
	f.a.total = 100000;
	f.b.total = 100000;
	peer_send(&f.a);
	peer_send(&f.b);
	fx_run(&f);
	{
		/* drive until both have everything */
		bool done = false;

		for (int i = 0; i < 10000 && !done; i++) {
			struct pollfd pf[4] = {
				{ f.a.fd, peer_events(&f.a), 0 }, { f.b.fd, peer_events(&f.b), 0 },
				{ f.cfd, (short)f.cev, 0 },      { f.ufd, (short)f.uev, 0 },
			};

			assert_true(poll(pf, 4, STALL_MS) > 0);
			if (pf[0].revents & POLLOUT)
				peer_send(&f.a);
			if (pf[0].revents & POLLIN)
				peer_recv(&f.a);
			if (pf[1].revents & POLLOUT)
				peer_send(&f.b);
			if (pf[1].revents & POLLIN)
				peer_recv(&f.b);
			if (pf[2].revents || pf[3].revents)
				fx_run(&f);
			done = f.a.rcvd == 100000 && f.b.rcvd == 100000;
		}
		assert_true(done);
	}
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	p = client_side ? &f.a : &f.b;
	assert_int_equal(setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(p->fd);
	p->fd = -1;
	p->eof = true;
	assert_int_equal(drive(&f, NULL), 0);
	assert_int_equal(f.st, GW_TUNNEL_ERROR);
	assert_int_equal(f.t.reason, client_side ? GW_R_CLIENT_CLOSED : GW_R_UPSTREAM_RESET);
	fx_fini(&f);
}

static void test_reset_client_copy(void **s) { (void)s; run_reset(false, true); }
static void test_reset_client_splice(void **s) { (void)s; run_reset(true, true); }
static void test_reset_upstream_copy(void **s) { (void)s; run_reset(false, false); }
static void test_reset_upstream_splice(void **s) { (void)s; run_reset(true, false); }

/* ---- both ways at once ----------------------------------------------- */

static void
run_bulk(bool splice)
{
	struct fx f;

	fx_init(&f, splice, 0);
	f.a.total = (3u << 20) / 2;     /* 1.5 MiB */
	f.b.total = (5u << 20) / 4;     /* 1.25 MiB */
	f.a.shut_when_sent = f.b.shut_when_sent = true;
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, f.a.total);
	assert_int_equal(f.a.rcvd, f.b.total);
	assert_int_equal(f.a.rerr, 0);
	assert_int_equal(f.b.rerr, 0);
	assert_int_equal(f.t.dir[GW_TUNNEL_C2U].bytes, f.a.total);
	assert_int_equal(f.t.dir[GW_TUNNEL_U2C].bytes, f.b.total);
	if (splice)
		/* loopback TCP splices: the pipes were kept */
		assert_true(f.t.dir[0].pipe[0] >= 0 && f.t.dir[1].pipe[0] >= 0);
	fx_fini(&f);
}

/* A short exchange never pays for pipes: they are made only once a
 * direction has moved 64 KiB. */
static void
test_short_tunnel_copies(void **state)
{
	struct fx f;

	(void)state;
	fx_init(&f, true, -1);
	f.a.total = 1000;
	f.a.shut_when_sent = true;
	f.b.total = 3000;
	f.b.shut_when_sent = true;
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, f.a.total);
	assert_int_equal(f.a.rcvd, f.b.total);
	assert_true(f.t.dir[0].pipe[0] < 0 && f.t.dir[1].pipe[0] < 0);
	fx_fini(&f);
}

static void test_bulk_copy(void **s) { (void)s; run_bulk(false); }
static void test_bulk_splice(void **s) { (void)s; run_bulk(true); }

/* ---- preloaded bytes first ------------------------------------------- */

static void
run_preload(bool splice)
{
	static const char pc[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";      /* C2U */
	static const char pu[] = "HTTP/1.1 200 Connection established\r\n\r\n"; /* U2C */
	struct fx f;

	fx_init(&f, splice, 0);
	f.a.total = 300000;
	f.b.total = 200000;
	f.a.shut_when_sent = f.b.shut_when_sent = true;
	f.b.pre = pc;
	f.b.prelen = sizeof(pc) - 1;
	f.a.pre = pu;
	f.a.prelen = sizeof(pu) - 1;
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, pc, 10, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, pc + 10, sizeof(pc) - 11, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_U2C, pu, sizeof(pu) - 1, false), 0);
	/* The peers' bytes are already waiting when the tunnel first runs:
	 * they must still come after the preloaded ones. */
	peer_send(&f.a);
	peer_send(&f.b);
	usleep(10000);
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, f.b.prelen + f.a.total);
	assert_int_equal(f.a.rcvd, f.a.prelen + f.b.total);
	fx_fini(&f);
}

static void test_preload_copy(void **s) { (void)s; run_preload(false); }
static void test_preload_splice(void **s) { (void)s; run_preload(true); }

/* Preloads larger than a buffer (what came in one read with a 101: a
 * server's first frames), in two pieces each way, while the peers' bytes
 * already wait: every preloaded byte first, in order, then the rest; the
 * direction is back to one buffer once they are out. */
static void
run_preload_large(bool splice)
{
	const size_t nc = 3 * GW_TUNNEL_BUF + 123, nu = GW_TUNNEL_BUF + 1;
	char *pc = malloc(nc), *pu = malloc(nu);
	struct fx f;

	assert_non_null(pc);
	assert_non_null(pu);
	for (size_t i = 0; i < nc; i++)
		pc[i] = (char)(i * 7 + 3);
	for (size_t i = 0; i < nu; i++)
		pu[i] = (char)(i * 13 + 5);
	fx_init(&f, splice, 0);
	f.a.total = 300000;
	f.b.total = 200000;
	f.a.shut_when_sent = f.b.shut_when_sent = true;
	f.b.pre = pc;
	f.b.prelen = nc;
	f.a.pre = pu;
	f.a.prelen = nu;
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, pc, 100, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, pc + 100, nc - 100, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_U2C, pu, GW_TUNNEL_BUF, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_U2C, pu + GW_TUNNEL_BUF, 1, false), 0);
	peer_send(&f.a);
	peer_send(&f.b);
	usleep(10000);
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, nc + f.a.total);
	assert_int_equal(f.a.rcvd, nu + f.b.total);
	for (int i = 0; i < 2; i++)
		assert_true(f.t.dir[i].cap <= GW_TUNNEL_BUF);
	fx_fini(&f);
	free(pc);
	free(pu);
}

static void test_preload_large_copy(void **s) { (void)s; run_preload_large(false); }
static void test_preload_large_splice(void **s) { (void)s; run_preload_large(true); }

/* Preloaded bytes and an immediate EOF: delivered, then shut down. */
static void
run_preload_then_eof(bool splice)
{
	static const char pc[] = "hello";
	struct fx f;

	fx_init(&f, splice, 0);
	f.b.pre = pc;
	f.b.prelen = 5;
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, pc, 5, false), 0);
	shutdown(f.a.fd, SHUT_WR);
	f.a.shut = true;
	shutdown(f.b.fd, SHUT_WR);
	f.b.shut = true;
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, 5);
	assert_int_equal(f.a.rcvd, 0);
	fx_fini(&f);
}

static void test_preload_eof_copy(void **s) { (void)s; run_preload_then_eof(false); }
static void test_preload_eof_splice(void **s) { (void)s; run_preload_then_eof(true); }

/* ---- half-close ------------------------------------------------------ */

static bool
b_got_eof(struct fx *f)
{
	return f->b.eof;
}

static bool
a_got_all(struct fx *f)
{
	return f->a.rcvd == f->b.total;
}

static void
run_half_close(bool splice)
{
	struct fx f;

	fx_init(&f, splice, 0);
	f.a.total = 70000;
	f.a.shut_when_sent = true;
	/* client sends and shuts down: upstream reads it all, then EOF */
	assert_int_equal(drive(&f, b_got_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_int_equal(f.b.rcvd, f.a.total);
	assert_int_equal(f.b.rerr, 0);
	assert_true(f.t.dir[GW_TUNNEL_C2U].shut);
	assert_false(f.t.dir[GW_TUNNEL_U2C].shut);
	/* the other way still flows, well past any buffer */
	f.b.total = 1u << 20;
	assert_int_equal(drive(&f, a_got_all), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_false(f.a.eof);
	/* upstream closes: the client reads EOF, the tunnel is done */
	close(f.b.fd);
	f.b.fd = -1;
	assert_int_equal(drive(&f, NULL), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	/* the client reads EOF after every byte */
	while (!f.a.eof) {
		struct pollfd pf = { f.a.fd, POLLIN, 0 };

		assert_int_equal(poll(&pf, 1, STALL_MS), 1);
		peer_recv(&f.a);
	}
	assert_int_equal(f.a.rcvd, f.b.total);
	assert_int_equal(f.a.rerr, 0);
	fx_fini(&f);
}

static void test_half_close_copy(void **s) { (void)s; run_half_close(false); }
static void test_half_close_splice(void **s) { (void)s; run_half_close(true); }

/* The mirror: the upstream shuts down first, the client keeps sending. */
static bool
a_got_eof(struct fx *f)
{
	return f->a.eof;
}

static bool
b_got_all(struct fx *f)
{
	return f->b.rcvd == f->a.total;
}

static void
run_half_close_upstream_first(bool splice)
{
	struct fx f;

	fx_init(&f, splice, 0);
	f.b.total = 5000;
	f.b.shut_when_sent = true;
	assert_int_equal(drive(&f, a_got_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_int_equal(f.a.rcvd, 5000);
	f.a.total = 1u << 20;
	assert_int_equal(drive(&f, b_got_all), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	shutdown(f.a.fd, SHUT_WR);
	assert_int_equal(drive(&f, NULL), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	fx_fini(&f);
}

static void test_half_close_up_copy(void **s) { (void)s; run_half_close_upstream_first(false); }
static void test_half_close_up_splice(void **s) { (void)s; run_half_close_upstream_first(true); }

/* ---- fairness -------------------------------------------------------- */

static int
readable_bytes(int fd)
{
	int n = 0;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

/* Far more bytes are waiting than one call may move: the call returns
 * with bytes left, and the interest it asks for is ready at once (the
 * loop is level-triggered), so the rest moves without new input. */
static void
run_fairness(bool splice)
{
	struct fx f;
	struct pollfd pf[2];
	uint64_t first;
	size_t want = 6u << 20;

	fx_init(&f, splice, 8 << 20);
	/* (Pipes are made once a direction has copied 64 KiB; the bound
	 * is on rounds and on bytes per run either way.) */
	f.a.total = want;
	/* Fill the client's side: as much as the socket buffers hold. */
	for (int i = 0; i < 200 && f.a.sent < f.a.total; i++) {
		peer_send(&f.a);
		usleep(1000);
	}
	print_message("fairness (%s): %d bytes wait at the tunnel's client end\n",
		      splice ? "splice" : "copy", readable_bytes(f.cfd));
	assert_true(readable_bytes(f.cfd) > 32 * GW_TUNNEL_BUF);
	fx_run(&f);
	print_message("fairness (%s): one run moved %llu bytes, %d left\n", splice ? "splice" : "copy",
		      (unsigned long long)f.t.dir[GW_TUNNEL_C2U].bytes, readable_bytes(f.cfd));
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_true(f.moved);
	first = f.t.dir[GW_TUNNEL_C2U].bytes;
	/* bounded: at most 32 reads of one chunk each */
	assert_true(first <= 32u * (splice ? 65536u : GW_TUNNEL_BUF));
	assert_true(readable_bytes(f.cfd) > 0);
	/* the asked interest is ready now: no stall */
	pf[0] = (struct pollfd){ .fd = f.cfd, .events = (short)f.cev };
	pf[1] = (struct pollfd){ .fd = f.ufd, .events = (short)f.uev };
	assert_true(f.cev || f.uev);
	assert_true(poll(pf, 2, 0) > 0);
	assert_true((pf[0].revents & (POLLIN | POLLOUT)) || (pf[1].revents & (POLLIN | POLLOUT)));
	/* and the rest moves */
	f.a.shut_when_sent = true;
	f.b.shut_when_sent = true;
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_int_equal(f.b.rcvd, want);
	fx_fini(&f);
}

static void test_fairness_copy(void **s) { (void)s; run_fairness(false); }
static void test_fairness_splice(void **s) { (void)s; run_fairness(true); }

/* ---- a half-closed socket with no interest must not wake the loop ---- */

/* The upstream has said all and been answered to EOF; the client has sent
 * its last bytes and FIN, which wait for a slow upstream reader. The
 * client socket is then shut both ways: poll/epoll report POLLHUP on it
 * whatever the interest, so a caller that keeps the fd registered spins.
 * Counts the wakeups of a level-triggered loop in 300 ms. */
static void
run_hup_spin(bool splice)
{
	struct fx f;
	struct timespec t0, t1;
	unsigned wakeups = 0, runs0;
	bool hup;

	fx_init(&f, splice, -1);
	f.b.paused = true;              /* the upstream does not read */
	f.a.total = 60000;
	f.a.shut_when_sent = true;
	f.b.total = 100;
	f.b.shut_when_sent = true;
	/* move what can move, until the setup is reached (bounded: a loaded
	 * machine only makes this take longer; not reaching it fails) */
	for (int i = 0; i < 4000; i++) {
		struct pollfd pf[3] = {
			{ f.a.fd, peer_events(&f.a), 0 },
			{ f.b.fd, (short)(f.b.sent < f.b.total ? POLLOUT : 0), 0 },
			{ f.cfd, 0, 0 },
		};

		poll(pf, 2, 5);
		if (pf[0].revents & POLLOUT)
			peer_send(&f.a);
		if (pf[0].revents & POLLIN)
			peer_recv(&f.a);
		if (pf[1].revents & POLLOUT)
			peer_send(&f.b);
		fx_run(&f);
		if (f.a.shut && f.a.eof && f.t.dir[GW_TUNNEL_U2C].shut) {
			struct pollfd h = { f.cfd, 0, 0 };

			poll(&h, 1, 0);
			hup = (h.revents & POLLHUP) != 0;
			if (hup)
				break;
		}
	}
	{
		struct pollfd h = { f.cfd, 0, 0 };

		poll(&h, 1, 0);
		hup = (h.revents & POLLHUP) != 0;
	}
	if (!(f.a.shut && f.a.eof && f.t.dir[GW_TUNNEL_U2C].shut && hup))
		fail_msg("hup_spin: setup not reached (a shut %d eof %d, u2c shut %d, hup %d)",
			 f.a.shut, f.a.eof, f.t.dir[1].shut, hup);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_int_equal(f.cev, 0);     /* the tunnel wants nothing of cfd */
	runs0 = f.runs;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		/* Like gw_io_mod(..., 0), an fd with no interest is not
		 * watched at all (poll ignores negative fds). */
		struct pollfd pf[2] = { { f.cev ? f.cfd : -1, (short)f.cev, 0 },
					{ f.uev ? f.ufd : -1, (short)f.uev, 0 } };
		int n;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > 300)
			break;
		n = poll(pf, 2, 50);
		if (n > 0) {
			wakeups++;
			fx_run(&f);
		}
	}
	print_message("hup_spin (%s): %u wakeups in 300 ms, %u tunnel runs moved nothing; "
		      "cfd revents with no interest: POLLHUP\n",
		      splice ? "splice" : "copy", wakeups, f.runs - runs0);
	fx_fini(&f);
	/* The tunnel asks for nothing it cannot use: a loop that watches
	 * only what it asks for (gw_io_mod(..., 0) unwatches; see
	 * test_loop's test_io_mod_zero_silences_hup) is not woken in vain. */
	assert_true(wakeups < 20);
}

static void test_hup_spin_copy(void **s) { (void)s; run_hup_spin(false); }
static void test_hup_spin_splice(void **s) { (void)s; run_hup_spin(true); }

/* ---- the hello gate -------------------------------------------------- */

/* The tunnel's destination, as the door gates it (gw_conn_tunnel_gate()). */
#define GATE_HOST "example.com"

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* Writes all of p[0..n) from an application end (a few KiB at most: the
 * tunnel's side takes them without the tunnel running). */
static void
app_send(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t r = send(fd, c, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EAGAIN) {
			struct pollfd pf = { fd, POLLOUT, 0 };

			assert_int_equal(poll(&pf, 1, STALL_MS), 1);
			continue;
		}
		if (r < 0)
			fail_msg("send: %s", strerror(errno));
		c += r;
		n -= (size_t)r;
	}
}

/* Drives everything for ms milliseconds, whatever happens: the pauses
 * between a client's writes, which drive() would call a stall. */
static void
pump(struct fx *f, int ms)
{
	struct timespec t0, t1;
	long left;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = ms - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || f->st != GW_TUNNEL_RUNNING)
			return;
		fx_poll(f, (int)left);
	}
}

/* The tunnel has ended: closes its upstream end, as gw_conn_close() would,
 * and reads the upstream application to EOF. Returns what it got. */
static size_t
upstream_drain(struct fx *f)
{
	assert_true(f->st != GW_TUNNEL_RUNNING);
	close(f->ufd);
	f->ufd = -1;
	f->b.paused = false;
	while (!f->b.eof) {
		struct pollfd pf = { f->b.fd, POLLIN, 0 };

		assert_int_equal(poll(&pf, 1, STALL_MS), 1);
		peer_recv(&f->b);
	}
	assert_int_equal(f->b.rerr, 0);
	return f->b.rcvd;
}

static bool
a_got_pre(struct fx *f)
{
	return f->a.rcvd >= f->a.prelen;
}

static bool
b_got_pre(struct fx *f)
{
	return f->b.rcvd >= f->b.prelen;
}

static bool
b_got_one(struct fx *f)
{
	return f->b.rcvd >= 1;
}

/* The gate refused: the tunnel ended with `reason`, and not a byte of the
 * client's reached the upstream application. */
static void
assert_refused(struct fx *f, enum gw_reason reason, const char *seen)
{
	assert_int_equal(f->st, GW_TUNNEL_ERROR);
	if (f->t.reason != reason)
		fail_msg("reason %s, want %s (seen \"%s\")", gw_reason_name(f->t.reason),
			 gw_reason_name(reason), f->t.seen);
	assert_true(f->t.refused);
	if (seen)
		assert_string_equal(f->t.seen, seen);
	assert_int_equal(f->t.dir[GW_TUNNEL_C2U].bytes, 0);
	assert_int_equal(gw_tunnel_bytes(&f->t, GW_TUNNEL_C2U), 0);
	assert_int_equal(upstream_drain(f), 0);
}

/* The gate opened on the client's first bytes (f->b.pre, delivered byte
 * for byte): bulk both ways then passes, to the end, splicing if asked. */
static void
assert_opened_then_bulk(struct fx *f)
{
	assert_int_equal(drive(f, b_got_pre), 0);
	assert_int_equal(f->st, GW_TUNNEL_RUNNING);
	assert_int_equal(f->b.rcvd, f->b.prelen);
	assert_null(f->t.dir[GW_TUNNEL_C2U].gate);
	assert_false(f->t.refused);
	f->a.total = 300000;
	f->b.total = 200000;
	f->a.shut_when_sent = f->b.shut_when_sent = true;
	assert_int_equal(drive(f, both_eof), 0);
	assert_int_equal(f->st, GW_TUNNEL_DONE);
	assert_false(f->t.refused);
	assert_int_equal(f->b.rcvd, f->b.prelen + f->a.total);
	assert_int_equal(f->a.rcvd, f->a.prelen + f->b.total);
	assert_int_equal(f->a.rerr, 0);
	assert_int_equal(f->b.rerr, 0);
	if (f->splice)
		/* past 64 KiB each way: the pipes were made after the gate */
		assert_true(f->t.dir[0].pipe[0] >= 0 && f->t.dir[1].pipe[0] >= 0);
}

/* How the client's first bytes reach the tunnel. */
enum feed {
	FEED_SOCKET,            /* one write on the client's socket */
	FEED_PRELOAD,           /* all read by the door (pipelined after CONNECT) */
	FEED_SPLIT,             /* some preloaded, the rest in two writes */
};

/* Gates f's tunnel as the CONNECT door does (gate, then the bytes it read
 * after the request head), and feeds p[0..n) as `how` says. */
static void
gate_feed(struct fx *f, const void *p, size_t n, enum feed how)
{
	const uint8_t *b = p;

	gw_tunnel_gate_sni(&f->t, GATE_HOST);
	switch (how) {
	case FEED_SOCKET:
		app_send(f->a.fd, b, n);
		break;
	case FEED_PRELOAD:
		assert_int_equal(gw_tunnel_preload(&f->t, GW_TUNNEL_C2U, p, n, false), 0);
		break;
	case FEED_SPLIT:
		assert_true(n > 20);
		assert_int_equal(gw_tunnel_preload(&f->t, GW_TUNNEL_C2U, p, 3, false), 0);
		app_send(f->a.fd, b + 3, 10);
		pump(f, 20);
		app_send(f->a.fd, b + 13, n - 13);
		break;
	}
}

/* (a) A ClientHello naming another host: refused, tls-sni-mismatch,
 * nothing upstream, even what the client sent after the hello. */
static void
run_gate_mismatch(bool splice)
{
	static const char *const names[] = { "other.test", "www.example.com", "example.co",
					     "example.com.evil.test", "xample.com" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		for (int how = FEED_SOCKET; how <= FEED_SPLIT; how++) {
			struct fx f;
			struct hb h;

			fx_init(&f, splice, 0);
			hello_for(&h, names[i]);
			/* bytes pipelined after the hello must not leak either */
			put(&h, "early data", 10);
			gate_feed(&f, h.b, h.n, (enum feed)how);
			assert_int_equal(drive(&f, NULL), 0);
			assert_refused(&f, GW_R_TLS_SNI_MISMATCH, names[i]);
			fx_fini(&f);
		}
	}
}

static void test_gate_mismatch_copy(void **s) { (void)s; run_gate_mismatch(false); }
static void test_gate_mismatch_splice(void **s) { (void)s; run_gate_mismatch(true); }

/* The header of a record `len` bytes long, and no more. */
static void
record_header(struct hb *h, size_t len)
{
	h->n = 0;
	put8(h, 0x16);
	put16(h, 0x0301);
	put16(h, (unsigned)len);
}

/* A hello for `name` whose padding extension (RFC 7685) makes it `total`
 * bytes on the wire, record header included. */
static void
hello_sized(struct hb *h, const char *name, size_t total)
{
	static uint8_t zeros[GW_TUNNEL_BUF];
	struct hb e = { .n = 0 };
	size_t base;

	ext_sni(&e, name);
	hello(h, NULL, &e);
	base = h->n;
	assert_true(total >= base + 4 && total - base - 4 <= sizeof(zeros));
	ext(&e, 21, zeros, total - base - 4);
	hello(h, NULL, &e);
	assert_int_equal(h->n, total);
}

/* (b) A first record the reader cannot take strictly: refused with the
 * reader's reason, nothing upstream. */
static void
run_gate_malformed(bool splice)
{
	static const uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x08, 0x02, 0x00, 0x00,
						0x04, 0x03, 0x03, 0x00, 0x00 };
	struct {
		const char *what;
		enum gw_tlshello_result res;
		enum gw_reason reason;
	} cases[] = {
		{ "extensions past the end", GW_TLSHELLO_MALFORMED, GW_R_TLS_MALFORMED },
		{ "bytes after the extensions", GW_TLSHELLO_MALFORMED, GW_R_TLS_MALFORMED },
		{ "hello longer than its record", GW_TLSHELLO_FRAGMENTED, GW_R_TLS_FRAGMENTED },
		{ "an IP literal", GW_TLSHELLO_BAD_SNI, GW_R_TLS_BAD_SNI },
		{ "a ServerHello", GW_TLSHELLO_NOT_CLIENT_HELLO, GW_R_TLS_NOT_CLIENT_HELLO },
		/* past what the tunnel's buffer holds: refused from the
		 * header alone, not waited for */
		{ "a record over the buffer (header)", GW_TLSHELLO_TOO_BIG, GW_R_TLS_TOO_BIG },
		{ "a record over the buffer (whole)", GW_TLSHELLO_TOO_BIG, GW_R_TLS_TOO_BIG },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int how = FEED_SOCKET; how <= FEED_PRELOAD; how++) {
			struct hello_opt opt = { 0 };
			struct gw_tlshello o;
			struct hb h, e = { .n = 0 };
			struct fx f;

			ext_sni(&e, GATE_HOST);
			switch (i) {
			case 0:
				opt.ext_len_delta = 1;
				hello(&h, &opt, &e);
				break;
			case 1:
				opt.ext_len_delta = -1;
				hello(&h, &opt, &e);
				break;
			case 2:
				opt.hs_len_delta = 1;
				hello(&h, &opt, &e);
				break;
			case 3:
				hello_for(&h, "10.0.0.1");
				break;
			case 4:
				h.n = 0;
				put(&h, server_hello, sizeof(server_hello));
				break;
			case 5:
				record_header(&h, GW_TUNNEL_BUF - GW_TLSHELLO_HEADER + 1);
				break;
			default:
				hello_sized(&h, GATE_HOST, GW_TUNNEL_BUF + 1);
				if (how == FEED_PRELOAD)
					/* more than the buffer: the door could not */
					continue;
				break;
			}
			/* the input is what it says, at the tunnel's limit */
			assert_int_equal(gw_tlshello_parse(h.b, h.n,
							   GW_TUNNEL_BUF - GW_TLSHELLO_HEADER, &o),
					 cases[i].res);
			assert_int_equal(gw_tlshello_reason(cases[i].res), cases[i].reason);
			fx_init(&f, splice, 0);
			gate_feed(&f, h.b, h.n, (enum feed)how);
			assert_int_equal(drive(&f, NULL), 0);
			if (f.st != GW_TUNNEL_ERROR)
				fail_msg("%s: not refused", cases[i].what);
			assert_refused(&f, cases[i].reason, NULL);
			/* seen says what the reader found */
			assert_true(f.t.seen[0] == '(' && strstr(f.t.seen, o.msg));
			fx_fini(&f);
		}
	}
}

static void test_gate_malformed_copy(void **s) { (void)s; run_gate_malformed(false); }
static void test_gate_malformed_splice(void **s) { (void)s; run_gate_malformed(true); }

/* (b') A TLS record that is not a handshake first (an alert, a
 * change_cipher_spec, application data), then a hello naming another
 * host: refused at the first record, nothing upstream. A server that
 * skipped such a record would read the hello behind it unchecked. */
static void
run_gate_non_handshake_first(bool splice)
{
	static const uint8_t firsts[][7] = {
		{ 0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x70 },   /* alert */
		{ 0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x00 },   /* change_cipher_spec */
		{ 0x17, 0x03, 0x03, 0x00, 0x01, 0x00, 0x00 },   /* application data */
	};

	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		for (int how = FEED_SOCKET; how <= FEED_SPLIT; how++) {
			struct fx f;
			struct hb h, all = { .n = 0 };

			fx_init(&f, splice, 0);
			hello_for(&h, "other.test");
			put(&all, firsts[i], firsts[i][0] == 0x15 ? 7 : 6);
			put(&all, h.b, h.n);
			gate_feed(&f, all.b, all.n, (enum feed)how);
			assert_int_equal(drive(&f, NULL), 0);
			assert_refused(&f, GW_R_TLS_NOT_CLIENT_HELLO, NULL);
			fx_fini(&f);
		}
	}
}

static void test_gate_non_handshake_copy(void **s) { (void)s; run_gate_non_handshake_first(false); }
static void test_gate_non_handshake_splice(void **s) { (void)s; run_gate_non_handshake_first(true); }

/* (c) Half a hello, then EOF: the tunnel ends, nothing went upstream. */
static void
run_gate_half_then_eof(bool splice)
{
	for (int how = FEED_SOCKET; how <= FEED_SPLIT; how++) {
		struct fx f;
		struct hb h;

		fx_init(&f, splice, 0);
		hello_for(&h, GATE_HOST);
		/* (FEED_SPLIT: 3 preloaded, then 10 and the rest on the socket) */
		gate_feed(&f, h.b, h.n / 2, (enum feed)how);
		pump(&f, 20);
		assert_int_equal(f.st, GW_TUNNEL_RUNNING);
		assert_int_equal(shutdown(f.a.fd, SHUT_WR), 0);
		f.a.shut = true;
		assert_int_equal(drive(&f, NULL), 0);
		assert_int_equal(f.st, GW_TUNNEL_ERROR);
		assert_int_equal(f.t.reason, GW_R_CLIENT_CLOSED);
		assert_false(f.t.refused);
		assert_int_equal(f.t.dir[GW_TUNNEL_C2U].bytes, 0);
		assert_int_equal(upstream_drain(&f), 0);
		fx_fini(&f);
	}
}

static void test_gate_half_eof_copy(void **s) { (void)s; run_gate_half_then_eof(false); }
static void test_gate_half_eof_splice(void **s) { (void)s; run_gate_half_then_eof(true); }

/* (d) A hello naming the host (in other case), arriving in pieces with
 * pauses, its first bytes preloaded as the CONNECT door does with what the
 * client pipelined: held whole until its last byte, then delivered byte
 * for byte; meanwhile the 200 reaches the client. */
static void
run_gate_match_split(bool splice)
{
	struct fx f;
	struct hb h;
	size_t cut[] = { 7, 40, 0, 0 };

	fx_init(&f, splice, 0);
	hello_for(&h, "ExAmple.COM");
	cut[2] = h.n - 1;
	cut[3] = h.n;
	f.b.pre = (const char *)h.b;
	f.b.prelen = h.n;
	f.a.pre = established;
	f.a.prelen = sizeof(established) - 1;
	gw_tunnel_gate_sni(&f.t, "Example.com");
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_U2C, established,
					   sizeof(established) - 1, false), 0);
	assert_int_equal(gw_tunnel_preload(&f.t, GW_TUNNEL_C2U, (const char *)h.b, cut[0],
					   false), 0);
	/* the upstream's bytes flow while the gate holds the client's */
	assert_int_equal(drive(&f, a_got_pre), 0);
	assert_int_equal(f.a.rcvd, f.a.prelen);
	for (size_t i = 1; i < sizeof(cut) / sizeof(cut[0]); i++) {
		pump(&f, 30);
		assert_int_equal(f.st, GW_TUNNEL_RUNNING);
		assert_int_equal(f.b.rcvd, 0);
		assert_non_null(f.t.dir[GW_TUNNEL_C2U].gate);
		app_send(f.a.fd, h.b + cut[i - 1], cut[i] - cut[i - 1]);
	}
	assert_opened_then_bulk(&f);
	fx_fini(&f);
}

static void test_gate_match_split_copy(void **s) { (void)s; run_gate_match_split(false); }
static void test_gate_match_split_splice(void **s) { (void)s; run_gate_match_split(true); }

/* A matching hello that fills the tunnel's buffer exactly, with the
 * client's next bytes already behind it: passes. */
static void
run_gate_full_buffer(bool splice)
{
	static struct hb h;
	struct fx f;

	fx_init(&f, splice, 0);
	hello_sized(&h, GATE_HOST, GW_TUNNEL_BUF);
	f.b.pre = (const char *)h.b;
	f.b.prelen = h.n;
	gate_feed(&f, h.b, h.n, FEED_SOCKET);
	app_send(f.a.fd, "tail", 4);
	f.b.prelen += 4;
	memcpy(h.b + h.n, "tail", 4);
	assert_opened_then_bulk(&f);
	fx_fini(&f);
}

static void test_gate_full_buffer_copy(void **s) { (void)s; run_gate_full_buffer(false); }
static void test_gate_full_buffer_splice(void **s) { (void)s; run_gate_full_buffer(true); }

/* (e) Bytes that are not TLS pass at once: the first byte says so. */
static void
run_gate_not_tls(bool splice)
{
	static const char *const firsts[] = {
		"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		struct fx f;

		fx_init(&f, splice, 0);
		f.b.pre = firsts[i];
		f.b.prelen = strlen(firsts[i]);
		gw_tunnel_gate_sni(&f.t, GATE_HOST);
		app_send(f.a.fd, firsts[i], 1);
		assert_int_equal(drive(&f, b_got_one), 0);
		assert_null(f.t.dir[GW_TUNNEL_C2U].gate);
		app_send(f.a.fd, firsts[i] + 1, f.b.prelen - 1);
		assert_opened_then_bulk(&f);
		fx_fini(&f);
	}
}

static void test_gate_not_tls_copy(void **s) { (void)s; run_gate_not_tls(false); }
static void test_gate_not_tls_splice(void **s) { (void)s; run_gate_not_tls(true); }

/* (f) A well-formed hello without server_name passes. */
static void
run_gate_no_sni(bool splice)
{
	for (int how = FEED_SOCKET; how <= FEED_SPLIT; how++) {
		struct hb h, e = { .n = 0 };
		struct gw_tlshello o;
		struct fx f;

		ext(&e, 16, "\x00\x03\x02h2", 5);
		hello(&h, NULL, &e);
		assert_int_equal(gw_tlshello_parse(h.b, h.n, 0, &o), GW_TLSHELLO_NO_SNI);
		fx_init(&f, splice, 0);
		f.b.pre = (const char *)h.b;
		f.b.prelen = h.n;
		gate_feed(&f, h.b, h.n, (enum feed)how);
		assert_opened_then_bulk(&f);
		fx_fini(&f);
	}
}

static void test_gate_no_sni_copy(void **s) { (void)s; run_gate_no_sni(false); }
static void test_gate_no_sni_splice(void **s) { (void)s; run_gate_no_sni(true); }

/* (g) Server-first: the upstream's banner reaches the client while the
 * gate is closed; the client's reply, not TLS, then opens it. */
static void
run_gate_server_first(bool splice)
{
	static const char banner[] = "SSH-2.0-OpenSSH_9.2p1\r\n";
	static const char reply[] = "SSH-2.0-libssh_0.10.4\r\n";
	struct fx f;

	fx_init(&f, splice, 0);
	gw_tunnel_gate_sni(&f.t, GATE_HOST);
	f.a.pre = banner;
	f.a.prelen = sizeof(banner) - 1;
	f.b.pre = reply;
	f.b.prelen = sizeof(reply) - 1;
	app_send(f.b.fd, banner, sizeof(banner) - 1);
	assert_int_equal(drive(&f, a_got_pre), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_int_equal(f.a.rcvd, f.a.prelen);
	assert_non_null(f.t.dir[GW_TUNNEL_C2U].gate);
	assert_int_equal(f.b.rcvd, 0);
	app_send(f.a.fd, reply, sizeof(reply) - 1);
	assert_opened_then_bulk(&f);
	fx_fini(&f);
}

static void test_gate_server_first_copy(void **s) { (void)s; run_gate_server_first(false); }
static void test_gate_server_first_splice(void **s) { (void)s; run_gate_server_first(true); }

/* Server-first, and the client half-closes without sending a byte (it
 * only listens): there is no first record to gate. The FIN goes on and the
 * upstream's bytes still reach the client, as without the gate. */
static void
run_gate_silent_client(bool splice)
{
	static const char banner[] = "220 mail.example.com ESMTP\r\n";
	struct fx f;

	fx_init(&f, splice, 0);
	gw_tunnel_gate_sni(&f.t, GATE_HOST);
	f.a.pre = banner;
	f.a.prelen = sizeof(banner) - 1;
	assert_int_equal(shutdown(f.a.fd, SHUT_WR), 0);
	f.a.shut = true;
	assert_int_equal(drive(&f, b_got_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_RUNNING);
	assert_int_equal(f.b.rcvd, 0);
	app_send(f.b.fd, banner, sizeof(banner) - 1);
	f.b.total = 200000;
	f.b.shut_when_sent = true;
	assert_int_equal(drive(&f, both_eof), 0);
	assert_int_equal(f.st, GW_TUNNEL_DONE);
	assert_false(f.t.refused);
	assert_int_equal(f.a.rcvd, f.a.prelen + f.b.total);
	assert_int_equal(f.b.rcvd, 0);
	fx_fini(&f);
}

static void test_gate_silent_client_copy(void **s) { (void)s; run_gate_silent_client(false); }
static void test_gate_silent_client_splice(void **s) { (void)s; run_gate_silent_client(true); }

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_too_much),
		cmocka_unit_test(test_short_tunnel_copies),
		cmocka_unit_test(test_reset_client_copy),
		cmocka_unit_test(test_reset_client_splice),
		cmocka_unit_test(test_reset_upstream_copy),
		cmocka_unit_test(test_reset_upstream_splice),
		cmocka_unit_test(test_bulk_copy),
		cmocka_unit_test(test_bulk_splice),
		cmocka_unit_test(test_preload_copy),
		cmocka_unit_test(test_preload_splice),
		cmocka_unit_test(test_preload_large_copy),
		cmocka_unit_test(test_preload_large_splice),
		cmocka_unit_test(test_preload_eof_copy),
		cmocka_unit_test(test_preload_eof_splice),
		cmocka_unit_test(test_half_close_copy),
		cmocka_unit_test(test_half_close_splice),
		cmocka_unit_test(test_half_close_up_copy),
		cmocka_unit_test(test_half_close_up_splice),
		cmocka_unit_test(test_fairness_copy),
		cmocka_unit_test(test_fairness_splice),
		cmocka_unit_test(test_hup_spin_copy),
		cmocka_unit_test(test_hup_spin_splice),
		cmocka_unit_test(test_gate_mismatch_copy),
		cmocka_unit_test(test_gate_mismatch_splice),
		cmocka_unit_test(test_gate_malformed_copy),
		cmocka_unit_test(test_gate_malformed_splice),
		cmocka_unit_test(test_gate_non_handshake_copy),
		cmocka_unit_test(test_gate_non_handshake_splice),
		cmocka_unit_test(test_gate_half_eof_copy),
		cmocka_unit_test(test_gate_half_eof_splice),
		cmocka_unit_test(test_gate_match_split_copy),
		cmocka_unit_test(test_gate_match_split_splice),
		cmocka_unit_test(test_gate_full_buffer_copy),
		cmocka_unit_test(test_gate_full_buffer_splice),
		cmocka_unit_test(test_gate_not_tls_copy),
		cmocka_unit_test(test_gate_not_tls_splice),
		cmocka_unit_test(test_gate_no_sni_copy),
		cmocka_unit_test(test_gate_no_sni_splice),
		cmocka_unit_test(test_gate_server_first_copy),
		cmocka_unit_test(test_gate_server_first_splice),
		cmocka_unit_test(test_gate_silent_client_copy),
		cmocka_unit_test(test_gate_silent_client_splice),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

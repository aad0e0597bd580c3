/* doors_harness.c: the fake dial, the fake transport layer and the peers
 * (doors_harness.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "access.h"
#include "addr.h"
#include "conf.h"
#include "dial.h"
#include "doors_harness.h"
#include "log.h"
#include "snap.h"

static char log_path[] = "/tmp/sl-test-doors-XXXXXX";
static bool log_made;

/* ---- once per program ---- */

void
dh_global_setup(const char *yaml)
{
	struct conf_diag d;
	struct conf *c;
	struct gw_snap *s;
	char err[256] = "";
	int fd;

	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", yaml, strlen(yaml), &d);
	if (!c) {
		for (size_t i = 0; i < d.n; i++)
			print_error("%s\n", d.lines[i]);
		conf_diag_fini(&d);
		fail_msg("the test configuration did not load");
	}
	conf_diag_fini(&d);
	s = gw_snap_new(c, err, sizeof(err));
	conf_unref(c);
	if (!s)
		fail_msg("gw_snap_new: %s", err);
	gw_snap_publish(s);
	fd = mkstemp(log_path);
	assert_true(fd >= 0);
	close(fd);
	log_made = true;
	assert_int_equal(gw_access_setup(log_path), 0);
	if (getenv("DH_DEBUG"))
		gw_log_setup(CONF_LOG_DEBUG, CONF_LOG_TEXT, 2);
}

int
dh_group_teardown(void **state)
{
	(void)state;
	dh_global_teardown();
	return 0;
}

void
dh_global_teardown(void)
{
	gw_access_setup("off");
	gw_snap_publish(NULL);
	if (log_made)
		unlink(log_path);
}

static long
log_size(void)
{
	struct stat st;

	assert_int_equal(stat(log_path, &st), 0);
	return (long)st.st_size;
}

/* ---- sockets ---- */

static void
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	assert_true(fl >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

void
dh_tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int l, c, s, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	close(l);
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_nonblock(c);
	set_nonblock(s);
	*a = c;
	*b = s;
}

/* ---- the fake transport layer ---- */

struct dh_layer {
	struct gw_xprt x;
	struct dh_side *s;
};

/* Whether this call of op fails. A failed operation stays failed, as a
 * dead socket does. */
static bool
fault(struct dh_side *s, enum dh_op op)
{
	if (s->fired && s->op == op)
		return true;
	s->calls[op]++;
	if (s->err == 0 || s->op != op)
		return false;
	if (s->by_byte ? op != DH_SHUTDOWN && s->bytes[op] >= s->at_byte
		       : s->at_call && s->calls[op] == s->at_call) {
		s->fired = true;
		return true;
	}
	return false;
}

/* At most this many bytes may pass in op now. */
static size_t
room(const struct dh_side *s, enum dh_op op, size_t n)
{
	size_t lim = op == DH_RECV ? s->k : s->m;

	if (op == DH_RECV && s->k_from) {
		if (s->bytes[DH_RECV] < s->k_from)
			lim = (size_t)(s->k_from - s->bytes[DH_RECV]);
	}
	if (lim && n > lim)
		n = lim;
	if (s->err && s->op == op && s->by_byte && s->at_byte - s->bytes[op] < n)
		n = (size_t)(s->at_byte - s->bytes[op]);
	return n;
}

static ssize_t
layer_recv(struct gw_xprt *x, void *buf, size_t n)
{
	struct dh_side *s = ((struct dh_layer *)(void *)x)->s;
	ssize_t r;

	if (fault(s, DH_RECV))
		return s->err;
	r = gw_xprt_recv_below(x, buf, room(s, DH_RECV, n));
	if (r > 0)
		s->bytes[DH_RECV] += (uint64_t)r;
	return r;
}

static ssize_t
layer_sendv(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	struct dh_side *s = ((struct dh_layer *)(void *)x)->s;
	struct iovec cut[8];
	size_t total = 0, lim;
	int n = 0;
	ssize_t r;

	assert_true(iovcnt > 0 && iovcnt <= 8);
	if (fault(s, DH_SENDV))
		return s->err;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	lim = room(s, DH_SENDV, total);
	for (int i = 0; i < iovcnt && lim; i++) {
		size_t take = iov[i].iov_len < lim ? iov[i].iov_len : lim;

		if (!take)
			continue;
		cut[n].iov_base = iov[i].iov_base;
		cut[n++].iov_len = take;
		lim -= take;
	}
	/* Nothing to send: a zero-length write would look like progress. */
	assert_true(n > 0);
	r = gw_xprt_sendv_below(x, cut, n);
	if (r > 0)
		s->bytes[DH_SENDV] += (uint64_t)r;
	return r;
}

static int
layer_shutdown(struct gw_xprt *x)
{
	struct dh_side *s = ((struct dh_layer *)(void *)x)->s;

	if (fault(s, DH_SHUTDOWN))
		return s->err;
	return gw_xprt_shutdown(x->below);
}

static void
layer_close(struct gw_xprt *x)
{
	struct dh_layer *l = (struct dh_layer *)(void *)x;

	l->s->closed++;
	free(l);
}

static const struct gw_xprt_ops layer_ops = {
	.name = "fake",
	.recv = layer_recv,
	.sendv = layer_sendv,
	.shutdown = layer_shutdown,
	.close = layer_close,
};

static void
dh_stack(struct gw_conn *c, bool upstream)
{
	struct dh *h = (struct dh *)(void *)c->w;
	struct dh_side *s = upstream ? &h->up : &h->cli;
	struct dh_layer *l;

	if (!s->layer)
		return;
	l = calloc(1, sizeof(*l));
	assert_non_null(l);
	l->x.ops = &layer_ops;
	l->s = s;
	gw_xprt_push(upstream ? &c->up.x : &c->cli.x, &l->x);
	s->pushed++;
}

void
dh_fail_call(struct dh_side *s, enum dh_op op, unsigned n, int err)
{
	s->op = op;
	s->at_call = n;
	s->by_byte = false;
	s->err = err;
}

void
dh_fail_byte(struct dh_side *s, enum dh_op op, uint64_t byte, int err)
{
	s->op = op;
	s->at_byte = byte;
	s->by_byte = true;
	s->err = err;
}

/* ---- the peers ---- */

static void peer_io(struct gw_loop *l, struct gw_io *io, uint32_t events);

static bool
check(struct dh *h)
{
	if (h->until && h->until(h)) {
		gw_loop_stop(h->w.loop);
		return true;
	}
	return false;
}

/* A peer on fd; its script stays. */
static void
peer_open(struct dh *h, struct dh_peer *p, int fd)
{
	struct dh_step steps[DH_STEPS];
	size_t nsteps = p->nsteps;

	memcpy(steps, p->steps, sizeof(steps));
	memset(p, 0, sizeof(*p));
	memcpy(p->steps, steps, sizeof(steps));
	p->nsteps = nsteps;
	p->fd = fd;
	p->shut_on_eof = true;
	assert_int_equal(gw_io_add(h->w.loop, &p->io, fd, EPOLLIN, peer_io, h), 0);
}

static void
peer_close(struct dh *h, struct dh_peer *p)
{
	if (p->fd < 0 || p->done)
		return;
	gw_io_del(h->w.loop, &p->io);
	close(p->fd);
	p->done = true;
}

static void
peer_rst(struct dh *h, struct dh_peer *p)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	peer_close(h, p);
}

/* Sends what the script says is due; sets the interest. */
static void
peer_pump(struct dh *h, struct dh_peer *p)
{
	uint32_t ev = 0;

	if (p->done)
		return;
	while (p->next < p->nsteps && p->rxlen >= p->steps[p->next].after) {
		struct dh_step *st = &p->steps[p->next];

		while (p->pos < st->n) {
			ssize_t r = send(p->fd, st->p + p->pos, st->n - p->pos, MSG_NOSIGNAL);

			if (r < 0 && errno == EAGAIN)
				break;
			if (r < 0) {
				/* The door is gone: the script ends here. */
				p->next = p->nsteps;
				break;
			}
			p->pos += (size_t)r;
		}
		if (p->next < p->nsteps && p->pos < st->n) {
			ev |= EPOLLOUT;
			break;
		}
		if (p->next == p->nsteps)
			break;
		p->next++;
		p->pos = 0;
		if (st->rst) {
			peer_rst(h, p);
			return;
		}
		if (st->shut) {
			shutdown(p->fd, SHUT_WR);
			p->shut = true;
		}
	}
	/* EOF is answered with ours once the script is done. */
	if (p->eof && p->shut_on_eof && !p->rerr && !p->shut && p->next == p->nsteps) {
		shutdown(p->fd, SHUT_WR);
		p->shut = true;
	}
	if (!p->eof)
		ev |= EPOLLIN;
	gw_io_mod(h->w.loop, &p->io, ev);
}

static void
peer_read(struct dh_peer *p)
{
	for (;;) {
		ssize_t r;

		if (p->rxcap - p->rxlen < 4096) {
			p->rxcap = p->rxcap ? p->rxcap * 2 : 65536;
			p->rx = realloc(p->rx, p->rxcap);
			assert_non_null(p->rx);
		}
		r = recv(p->fd, p->rx + p->rxlen, p->rxcap - p->rxlen - 1, 0);
		if (r > 0) {
			p->rxlen += (size_t)r;
			p->rx[p->rxlen] = '\0';
			continue;
		}
		if (r < 0 && errno == EAGAIN)
			return;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			p->rerr = errno;
		p->eof = true;
		return;
	}
}

static void
peer_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct dh *h = io->arg;
	struct dh_peer *p = io == &h->client.io ? &h->client : &h->origin;

	(void)l;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		peer_read(p);
	peer_pump(h, p);
	check(h);
}

static void
script_add(struct dh_step *steps, size_t *n, size_t after, const char *p, size_t len)
{
	assert_true(*n < DH_STEPS);
	steps[*n] = (struct dh_step){ .after = after, .p = p, .n = len };
	(*n)++;
}

void
dh_client_send(struct dh *h, size_t after, const char *p, size_t n)
{
	script_add(h->client.steps, &h->client.nsteps, after, p, n);
}

void
dh_origin_send(struct dh *h, size_t after, const char *p, size_t n)
{
	script_add(h->origin_steps, &h->norigin_steps, after, p, n);
}

void
dh_client_shut(struct dh *h)
{
	assert_true(h->client.nsteps > 0);
	h->client.steps[h->client.nsteps - 1].shut = true;
}

void
dh_origin_shut(struct dh *h)
{
	assert_true(h->norigin_steps > 0);
	h->origin_steps[h->norigin_steps - 1].shut = true;
}

void
dh_origin_rst(struct dh *h)
{
	assert_true(h->norigin_steps > 0);
	h->origin_steps[h->norigin_steps - 1].rst = true;
}

/* ---- the fake dial ---- */

static void
dial_kick(void *arg)
{
	struct gw_dial *d = arg;
	struct dh *h = (struct dh *)(void *)d->w;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int ofd, ufd;

	if (d->state != GW_DIAL_RESOLVING || h->dial_hold)
		return;         /* cancelled (gw_dial_cancel), or held */
	d->state = GW_DIAL_IDLE;
	if (h->dial_fail != GW_R_NONE) {
		snprintf(d->upstream, sizeof(d->upstream), "192.0.2.1:%u", d->port);
		d->cb(d, -1, h->dial_fail, h->dial_err, "the fake dial fails", d->arg);
		check(h);
		return;
	}
	dh_tcp_pair(&ofd, &ufd);
	if (getsockname(ofd, (struct sockaddr *)&ss, &sl) == 0)
		gw_addr_format((struct sockaddr *)&ss, d->upstream, sizeof(d->upstream));
	if (h->origin.fd >= 0 && !h->origin.done) {
		assert_true(h->nold < DH_ORIGINS);
		gw_io_del(h->w.loop, &h->origin.io);
		h->old_origins[h->nold++] = h->origin.fd;
	}
	free(h->origin.rx);
	peer_open(h, &h->origin, ofd);
	memcpy(h->origin.steps, h->origin_steps, sizeof(h->origin_steps));
	h->origin.nsteps = h->norigin_steps;
	d->cb(d, ufd, GW_R_NONE, 0, "", d->arg);
	peer_pump(h, &h->origin);
	check(h);
}

/* The worker's `dial` hook: the contract of gw_dial_start() (cb runs once,
 * after the caller's callback; gw_dial_cancel() stops it). */
static void
dh_dial(struct gw_dial *d, struct gw_worker *w, const char *host, uint16_t port, gw_dial_cb cb,
	void *arg)
{
	struct dh *h = (struct dh *)(void *)w;

	h->dials++;
	snprintf(h->dialled, sizeof(h->dialled), "%s:%u", host, port);
	gw_dial_cancel(d);
	d->w = w;
	snprintf(d->host, sizeof(d->host), "%s", host);
	d->port = port;
	d->cb = cb;
	d->arg = arg;
	d->fd = -1;
	d->q = NULL;
	d->upstream[0] = '\0';
	gw_timer_init(&d->timer, NULL, d);
	d->state = GW_DIAL_RESOLVING;
	gw_defer(w->loop, &d->kick, dial_kick, d);
}

/* ---- the loop ---- */

static void
tick(struct gw_loop *l, struct gw_timer *t)
{
	struct dh *h = t->arg;

	if (!check(h))
		gw_timer_arm(l, t, 1);
}

static void
deadline(struct gw_loop *l, struct gw_timer *t)
{
	struct dh *h = t->arg;

	(void)t;
	h->stalled = true;
	gw_loop_stop(l);
}

static void
start(struct gw_loop *l, struct gw_timer *t)
{
	struct dh *h = t->arg;

	(void)l;
	peer_pump(h, &h->client);
	if (h->accept) {
		void (*acc)(struct gw_worker *, int, int) = h->accept;
		int fd = h->lane_fd;

		/* The door owns the socket from here on. */
		h->accept = NULL;
		h->lane_fd = -1;
		h->accepted = true;
		acc(&h->w, fd, h->lane);
	}
	check(h);
}

void
dh_init(struct dh *h)
{
	memset(h, 0, sizeof(*h));
	h->w.loop = gw_loop_new();
	assert_non_null(h->w.loop);
	h->w.dial = dh_dial;
	h->w.stack = dh_stack;
	h->w.use_splice = true;
	h->client.fd = h->origin.fd = -1;
	h->lane_fd = -1;
	gw_timer_init(&h->tick, tick, h);
	gw_timer_init(&h->deadline, deadline, h);
	gw_timer_init(&h->start, start, h);
	h->live0 = gw_conns_live();
	h->log0 = log_size();
}

void
dh_connect(struct dh *h, void (*accept)(struct gw_worker *w, int fd, int lane), int lane)
{
	int cfd, sfd;

	dh_tcp_pair(&cfd, &sfd);
	peer_open(h, &h->client, cfd);
	h->accept = accept;
	h->lane = lane;
	h->lane_fd = sfd;
	gw_timer_arm(h->w.loop, &h->start, 0);
}

bool
dh_try_run(struct dh *h, bool (*until)(struct dh *h))
{
	h->until = until;
	h->stalled = false;
	if (!until(h)) {
		gw_timer_arm(h->w.loop, &h->tick, 1);
		gw_timer_arm(h->w.loop, &h->deadline, h->deadline_ms ? h->deadline_ms : DH_DEADLINE_MS);
		assert_int_equal(gw_loop_run(h->w.loop), 0);
		gw_timer_cancel(h->w.loop, &h->tick);
		gw_timer_cancel(h->w.loop, &h->deadline);
	}
	h->until = NULL;
	return !h->stalled;
}

void
dh_run_(struct dh *h, bool (*until)(struct dh *h), const char *what, const char *file, int line)
{
	if (!dh_try_run(h, until)) {
		print_error("%s:%d: stalled: %s did not hold within %llu ms (client got %zu bytes%s, "
			    "origin %zu%s; steps sent: client %zu/%zu, origin %zu/%zu; dials %u, "
			    "live %llu -> %llu)\n",
			    file, line, what,
			    (unsigned long long)(h->deadline_ms ? h->deadline_ms : DH_DEADLINE_MS),
			    h->client.rxlen,
			    h->client.eof ? " and EOF" : "", h->origin.rxlen,
			    h->origin.eof ? " and EOF" : "", h->client.next, h->client.nsteps,
			    h->origin.next, h->origin.nsteps, h->dials, (unsigned long long)h->live0,
			    (unsigned long long)gw_conns_live());
		print_error("  layers: client recv %u calls %llu bytes, sendv %u calls %llu bytes; "
			    "upstream recv %u calls %llu bytes, sendv %u calls %llu bytes\n",
			    h->cli.calls[DH_RECV], (unsigned long long)h->cli.bytes[DH_RECV],
			    h->cli.calls[DH_SENDV], (unsigned long long)h->cli.bytes[DH_SENDV],
			    h->up.calls[DH_RECV], (unsigned long long)h->up.bytes[DH_RECV],
			    h->up.calls[DH_SENDV], (unsigned long long)h->up.bytes[DH_SENDV]);
		_fail(file, line);
	}
}

void
dh_fini(struct dh *h)
{
	gw_conns_close_all(&h->w);
	peer_close(h, &h->client);
	peer_close(h, &h->origin);
	for (size_t i = 0; i < h->nold; i++)
		close(h->old_origins[i]);
	if (h->lane_fd >= 0)
		close(h->lane_fd);
	free(h->client.rx);
	free(h->origin.rx);
	gw_timer_cancel(h->w.loop, &h->tick);
	gw_timer_cancel(h->w.loop, &h->deadline);
	gw_timer_cancel(h->w.loop, &h->start);
	gw_loop_free(h->w.loop);
}

/* ---- conditions ---- */

bool
dh_ended(struct dh *h)
{
	/* The door's connection is gone, and each peer has read to the end
	 * of what it was sent: the door's close puts its last bytes and the
	 * FIN in the peers' sockets, which they read on a later event (cases
	 * assert on those bytes once this holds). */
	return h->accepted && gw_conns_live() == h->live0 && h->w.conns == NULL &&
	       (h->client.fd < 0 || h->client.eof) && (h->origin.fd < 0 || h->origin.eof);
}

bool
dh_client_eof(struct dh *h)
{
	return h->client.eof;
}

bool
dh_client_has(struct dh *h)
{
	return h->client.rxlen >= h->want_client;
}

bool
dh_origin_has(struct dh *h)
{
	return h->origin.rxlen >= h->want_origin;
}

void
dh_client_close(struct dh *h)
{
	shutdown(h->client.fd, SHUT_WR);
	h->client.shut = true;
}

/* ---- the access log ---- */

size_t
dh_lines(struct dh *h, char (*lines)[512], size_t max)
{
	FILE *f = fopen(log_path, "r");
	char buf[2048];
	size_t n = 0;

	assert_non_null(f);
	assert_int_equal(fseek(f, h->log0, SEEK_SET), 0);
	while (fgets(buf, sizeof(buf), f)) {
		const char *a = strstr(buf, "access ");
		size_t len;

		a = a ? a : buf;
		len = strcspn(a, "\n");
		/* A line longer than that is a failure of its own. */
		assert_true(len < 512);
		if (n < max) {
			memcpy(lines[n], a, len);
			lines[n][len] = '\0';
		}
		n++;
	}
	fclose(f);
	return n;
}

const char *
dh_field(const char *line, const char *key, char *buf, size_t bufsz)
{
	size_t kl = strlen(key);
	const char *p = line;

	buf[0] = '\0';
	while ((p = strstr(p, key))) {
		if ((p == line || p[-1] == ' ') && p[kl] == '=') {
			size_t n = strcspn(p + kl + 1, " ");

			snprintf(buf, bufsz, "%.*s", (int)n, p + kl + 1);
			break;
		}
		p += kl;
	}
	return buf;
}

/* ---- assertions ---- */

/* Layers on both sides: split reads of k and short writes of m. The
 * upstream's first read takes up to `whole` bytes (the response head) in
 * one piece; 0: split from the first byte. */
void
dh_layers(struct dh *h, size_t k, size_t m, size_t whole)
{
	h->cli = (struct dh_side){ .layer = true, .k = k, .m = m };
	h->up = (struct dh_side){ .layer = true, .k = k, .m = m, .k_from = whole };
}

/* The connection's lines so far: exactly `want` of them. */
size_t
dh_expect_lines(struct dh *h, char (*lines)[512], size_t want)
{
	size_t n = dh_lines(h, lines, 8);

	for (size_t i = 0; i < n && i < 8; i++)
		print_message("  %s\n", lines[i]);
	assert_int_equal(n, want);
	return n;
}

void
dh_expect_field(const char *line, const char *key, const char *want)
{
	char buf[300];

	dh_field(line, key, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		fail_msg("%s=%s, want %s, in: %s", key, buf, want, line);
}

/* Every layer pushed was closed once, and the case left no connection. */
void
dh_expect_clean(struct dh *h)
{
	assert_int_equal(gw_conns_live(), h->live0);
	assert_null(h->w.conns);
	assert_int_equal(h->cli.closed, h->cli.pushed);
	assert_int_equal(h->up.closed, h->up.pushed);
}

void
dh_expect_bytes(const char *what, const char *got, size_t gotlen, const char *want, size_t wantlen)
{
	if (gotlen != wantlen || memcmp(got, want, wantlen) != 0)
		fail_msg("%s: got %zu bytes [%.*s], want %zu [%.*s]", what, gotlen, (int)gotlen,
			 got ? got : "", wantlen, (int)wantlen, want);
}


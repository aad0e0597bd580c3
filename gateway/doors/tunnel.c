/* tunnel.c: one relay routine, parameterised by direction. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bind.h"
#include "metrics.h"
#include "tlshello.h"
#include "tunnel.h"
#include "xprt.h"
#include "xprt_tls.h"

/* Each direction's pipe is grown to this (fewer splice calls per byte on
 * bulk transfers, at a bounded cost in pinned kernel memory per tunnel),
 * and one splice(2) moves at most this much into it. A pipe that cannot
 * grow keeps the default 64 KiB and still works. */
#define SPLICE_CHUNK (256 << 10)
/* One gw_tunnel_run() moves at most this much per direction, so that one
 * fast tunnel cannot keep a worker from its other connections. */
#define DIR_SHARE (1 << 20)
/* A direction copies until it has moved this much: most tunnels carry a
 * handshake and a request or two, for which two pipes (four fds and their
 * setup) cost more than copying; bulk transfers then splice. */
#define SPLICE_AFTER (64 << 10)

static void
dir_init(struct gw_tunnel_dir *d, struct gw_xprt *from, struct gw_xprt *to, bool use_splice)
{
	memset(d, 0, sizeof(*d));
	d->from = from;
	d->to = to;
	d->pipe[0] = d->pipe[1] = -1;
	/* Only bytes no layer has to see may go around the transports. */
	d->may_splice = use_splice && gw_xprt_raw_fd(from) >= 0 && gw_xprt_raw_fd(to) >= 0;
}

/* Makes the direction's pipe; on failure it copies for good. */
static void
dir_splice(struct gw_tunnel_dir *d)
{
	d->may_splice = false;
	if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
		d->pipe[0] = d->pipe[1] = -1;
		return;
	}
	(void)fcntl(d->pipe[1], F_SETPIPE_SZ, SPLICE_CHUNK);
}

static void
dir_unsplice(struct gw_tunnel_dir *d)
{
	if (d->pipe[0] >= 0) {
		close(d->pipe[0]);
		close(d->pipe[1]);
		d->pipe[0] = d->pipe[1] = -1;
	}
}

void
gw_tunnel_init(struct gw_tunnel *t, struct gw_xprt *client, struct gw_xprt *upstream,
	       bool use_splice)
{
	memset(t, 0, sizeof(*t));
	dir_init(&t->dir[GW_TUNNEL_C2U], client, upstream, use_splice);
	dir_init(&t->dir[GW_TUNNEL_U2C], upstream, client, use_splice);
	gw_metrics_tunnel_start();
}

static int
dir_buf(struct gw_tunnel_dir *d)
{
	if (!d->buf) {
		if (!(d->buf = malloc(GW_TUNNEL_BUF)))
			return -ENOMEM;
		d->cap = GW_TUNNEL_BUF;
	}
	return 0;
}

int
gw_tunnel_preload(struct gw_tunnel *t, enum gw_tunnel_side side, const char *p, size_t n,
		  bool counted)
{
	struct gw_tunnel_dir *d = &t->dir[side];

	if (n == 0)
		return 0;
	if (dir_buf(d) < 0)
		return -ENOMEM;
	if (n > GW_TUNNEL_PRELOAD_MAX - d->end)
		return -ENOSPC;
	if (n > d->cap - d->end) {
		/* More than a buffer: it grows until they are sent. */
		char *b = realloc(d->buf, d->end + n);

		if (!b)
			return -ENOMEM;
		d->buf = b;
		d->cap = d->end + n;
	}
	memcpy(d->buf + d->end, p, n);
	d->end += n;
	if (counted)
		d->precounted += n;
	return 0;
}

void
gw_tunnel_gate_sni(struct gw_tunnel *t, const char *host)
{
	t->dir[GW_TUNNEL_C2U].gate = host;
}

/* The gate's word on what was read so far: 1 open (the gate is gone), 0
 * more is needed, -1 refused (t->reason, t->refused). */
static int
dir_gate(struct gw_tunnel *t, struct gw_tunnel_dir *d)
{
	struct gw_tlshello h;
	enum gw_tlshello_result r;

	if (d->start == d->end)
		return 0;
	/* A TLS record that is not a handshake (alert, change_cipher_spec,
	 * application data) cannot open a connection: a server skipping it
	 * would read the hello that follows unchecked. */
	if (d->buf[d->start] == 0x14 || d->buf[d->start] == 0x15 || d->buf[d->start] == 0x17) {
		if (d->end - d->start < 2)
			return 0;
		if (d->buf[d->start + 1] == 0x03) {
			snprintf(t->seen, sizeof(t->seen), "(a TLS record of type %u first)",
				 (unsigned)(unsigned char)d->buf[d->start]);
			t->reason = GW_R_TLS_NOT_CLIENT_HELLO;
			t->refused = true;
			return -1;
		}
	}
	r = gw_tlshello_parse((const uint8_t *)d->buf + d->start, d->end - d->start,
			      GW_TUNNEL_BUF - GW_TLSHELLO_HEADER, &h);
	switch (r) {
	case GW_TLSHELLO_NEED_MORE:
		return 0;
	case GW_TLSHELLO_NOT_TLS:
		break;
	default:
		t->reason = gw_bind_sni(d->gate, r, &h);
		if (t->reason == GW_R_NONE)
			break;
		if (r == GW_TLSHELLO_OK)
			snprintf(t->seen, sizeof(t->seen), "%s", h.sni);
		else
			snprintf(t->seen, sizeof(t->seen), "(%s)", h.msg);
		t->refused = true;
		return -1;
	}
	d->gate = NULL;
	return 1;
}

uint64_t
gw_tunnel_bytes(const struct gw_tunnel *t, enum gw_tunnel_side side)
{
	const struct gw_tunnel_dir *d = &t->dir[side];

	return d->bytes > d->precounted ? d->bytes - d->precounted : 0;
}

static enum gw_reason
io_reason(int err, bool writing_to_upstream)
{
	(void)err;
	return writing_to_upstream ? GW_R_UPSTREAM_RESET : GW_R_CLIENT_CLOSED;
}

/* Moves what it can in one direction. Returns 1 if bytes moved, 0 if it
 * is blocked or finished, -1 on an error (reason set). Adds the bytes it
 * delivered to relayed[GW_RELAY_COPY] (sent from buf) or
 * relayed[GW_RELAY_SPLICE] (spliced from the pipe): the path they took. */
static int
dir_run(struct gw_tunnel *t, struct gw_tunnel_dir *d, bool to_upstream,
	uint64_t relayed[GW_RELAY__COUNT])
{
	uint64_t start = d->bytes;
	int moved = 0;

	d->want_in = d->want_out = false;
	for (int rounds = 0;; rounds++) {
		ssize_t n;

		if (rounds == 64 || d->bytes - start >= DIR_SHARE) {
			/* A fair share moved: let the loop run others, and come
			 * back as soon as either side is ready again. */
			d->want_in = !d->eof;
			d->want_out = d->start < d->end || d->in_pipe;
			return moved;
		}

		/* 0. The gate holds everything until the first record is
		 * whole. */
		if (d->gate) {
			int g = dir_gate(t, d);

			if (g < 0)
				return -1;
			if (g == 0 && d->eof && d->start == d->end) {
				/* EOF before any byte (a client that only
				 * listens): there is no record to gate, and the
				 * FIN goes on as it would without the gate. */
				d->gate = NULL;
			} else if (g == 0 && d->eof) {
				/* The client gave up before its record was
				 * whole: none of it goes anywhere. */
				t->reason = GW_R_CLIENT_CLOSED;
				return -1;
			}
		}
		/* 1. Bytes in user space go first, in order. */
		if (d->start < d->end && !d->gate) {
			n = gw_xprt_send(d->to, d->buf + d->start, d->end - d->start);
			if (n < 0) {
				if (n == -EAGAIN) {
					d->want_out = true;
					return moved;
				}
				t->reason = io_reason((int)-n, to_upstream);
				return -1;
			}
			d->start += (size_t)n;
			d->bytes += (uint64_t)n;
			relayed[GW_RELAY_COPY] += (uint64_t)n;
			moved = 1;
			if (d->start == d->end) {
				d->start = d->end = 0;
				if (d->cap > GW_TUNNEL_BUF) {
					/* A large preload is out: back to one
					 * buffer, made again on the next read. */
					free(d->buf);
					d->buf = NULL;
					d->cap = 0;
				}
			}
			continue;
		}
		/* 2. Then bytes in the pipe. */
		if (d->in_pipe) {
			n = splice(d->pipe[0], NULL, d->to->fd, NULL, d->in_pipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0) {
				if (errno == EAGAIN) {
					d->want_out = true;
					return moved;
				}
				if (errno == EINTR)
					continue;
				t->reason = io_reason(errno, to_upstream);
				return -1;
			}
			d->in_pipe -= (size_t)n;
			d->bytes += (uint64_t)n;
			relayed[GW_RELAY_SPLICE] += (uint64_t)n;
			moved = 1;
			continue;
		}
		/* 3. Everything read was delivered: pass EOF on. A TLS
		 * layer of ours may still hold the last records and its
		 * close_notify, the socket below being full: the direction
		 * has ended once they are out. */
		if (d->eof && !d->gate) {
			if (!d->shut) {
				gw_xprt_shutdown(d->to);
				d->shut = true;
			}
			if (gw_xprt_is_tls(d->to) && gw_xprt_tls_flush(d->to) == -EAGAIN)
				d->want_out = true;
			return moved;
		}
		/* 4. Read more. */
		if (d->may_splice && d->bytes >= SPLICE_AFTER)
			dir_splice(d);
		if (d->pipe[0] >= 0) {
			n = splice(d->from->fd, NULL, d->pipe[1], NULL, SPLICE_CHUNK,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
				/* This pair of fds cannot splice: copy. */
				dir_unsplice(d);
				continue;
			}
			if (n > 0)
				d->in_pipe += (size_t)n;
		} else {
			if (dir_buf(d) < 0) {
				t->reason = GW_R_INTERNAL;
				return -1;
			}
			/* (Gated, the buffer may hold the record's start; the
			 * reader refuses a record the buffer cannot hold, so it
			 * is never full here.) */
			if (d->end == d->cap) {
				t->reason = GW_R_INTERNAL;
				return -1;
			}
			n = gw_xprt_recv(d->from, d->buf + d->end, d->cap - d->end);
			if (n > 0)
				d->end += (size_t)n;
			else if (n < 0)
				errno = (int)-n;
		}
		if (n == 0) {
			d->eof = true;
			continue;
		}
		if (n < 0) {
			if (errno == EAGAIN) {
				d->want_in = true;
				return moved;
			}
			if (errno == EINTR)
				continue;
			t->reason = io_reason(errno, !to_upstream);
			return -1;
		}
		moved = 1;
	}
}

enum gw_tunnel_status
gw_tunnel_run(struct gw_tunnel *t, uint32_t *cev, uint32_t *uev, bool *moved)
{
	struct gw_tunnel_dir *c2u = &t->dir[GW_TUNNEL_C2U], *u2c = &t->dir[GW_TUNNEL_U2C];
	uint64_t relayed[GW_RELAY__COUNT] = { 0 };
	int a, b;

	*moved = false;
	*cev = *uev = 0;
	if (c2u->gate) {
		/* While the client's first record is gated, the way back
		 * goes first: what the door preloaded (the CONNECT's 200, the
		 * SOCKS5 success reply) reaches a client that sent its hello
		 * without waiting for it, even when the gate then refuses
		 * the hello. (Nothing goes upstream before the gate opens.) */
		b = dir_run(t, u2c, false, relayed);
		a = b < 0 ? 0 : dir_run(t, c2u, true, relayed);
	} else {
		a = dir_run(t, c2u, true, relayed);
		b = a < 0 ? 0 : dir_run(t, u2c, false, relayed);
	}
	/* Once per pass, not per syscall: two relaxed adds at most. */
	gw_metrics_tunnel_relayed(relayed);
	if (a < 0 || b < 0)
		return GW_TUNNEL_ERROR;
	*moved = a > 0 || b > 0;
	if (c2u->shut && u2c->shut && !c2u->want_out && !u2c->want_out)
		return GW_TUNNEL_DONE;
	if (c2u->want_in)
		*cev |= gw_xprt_want(c2u->from, EPOLLIN);
	if (u2c->want_out)
		*cev |= gw_xprt_want(u2c->to, EPOLLOUT);
	if (u2c->want_in)
		*uev |= gw_xprt_want(u2c->from, EPOLLIN);
	if (c2u->want_out)
		*uev |= gw_xprt_want(c2u->to, EPOLLOUT);
	return GW_TUNNEL_RUNNING;
}

/* A pipe fd no live tunnel has: marks a tunnel already finished, so that
 * a second fini neither closes anything nor counts the end twice. */
#define FINISHED_PIPE (-2)

void
gw_tunnel_fini(struct gw_tunnel *t)
{
	if (t->dir[0].pipe[0] == FINISHED_PIPE)
		return;
	gw_metrics_tunnel_end(t->dir[GW_TUNNEL_C2U].bytes, t->dir[GW_TUNNEL_U2C].bytes);
	for (int i = 0; i < 2; i++) {
		dir_unsplice(&t->dir[i]);
		free(t->dir[i].buf);
		t->dir[i].buf = NULL;
		t->dir[i].cap = 0;
	}
	t->dir[0].pipe[0] = FINISHED_PIPE;
}

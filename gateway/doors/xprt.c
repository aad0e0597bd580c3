/* xprt.c: the transport stack and the plain TCP transport. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xprt.h"

static ssize_t
tcp_recv(struct gw_xprt *x, void *buf, size_t n)
{
	ssize_t r;

	do {
		r = recv(x->fd, buf, n, 0);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static ssize_t
tcp_sendv(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)(uintptr_t)iov,
			      .msg_iovlen = (size_t)iovcnt };
	ssize_t r;

	do {
		r = sendmsg(x->fd, &msg, MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static int
tcp_shutdown(struct gw_xprt *x)
{
	return shutdown(x->fd, SHUT_WR) < 0 ? -errno : 0;
}

static void
tcp_close(struct gw_xprt *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
}

static const struct gw_xprt_ops tcp_ops = {
	.name = "tcp",
	.recv = tcp_recv,
	.sendv = tcp_sendv,
	.shutdown = tcp_shutdown,
	.close = tcp_close,
};

void
gw_xprt_tcp_init(struct gw_xprt *x, int fd)
{
	x->ops = &tcp_ops;
	x->below = NULL;
	x->fd = fd;
}

void
gw_xprt_push(struct gw_xprt **top, struct gw_xprt *layer)
{
	layer->below = *top;
	layer->fd = (*top)->fd;
	*top = layer;
}

void
gw_xprt_close(struct gw_xprt *top)
{
	while (top) {
		struct gw_xprt *below = top->below;

		top->ops->close(top);
		top = below;
	}
}

ssize_t
gw_xprt_send(struct gw_xprt *x, const void *p, size_t n)
{
	struct iovec iov = { .iov_base = (void *)(uintptr_t)p, .iov_len = n };

	return gw_xprt_sendv(x, &iov, 1);
}

int
gw_xprt_raw_fd(const struct gw_xprt *x)
{
	return x->ops == &tcp_ops ? x->fd : -1;
}

bool
gw_xprt_quiet(const struct gw_xprt *x)
{
	char b;

	for (const struct gw_xprt *l = x; l; l = l->below)
		if (gw_xprt_pending(l))
			return false;
	return recv(x->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

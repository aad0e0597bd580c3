/* xprt.h: transports, the bytes of one side of a connection.
 *
 * Transports stack, in the manner of curl's connection filters: each layer
 * reads and writes through the one below it, and the bottom is a socket
 * (the plain TCP transport). Code above a transport (the HTTP exchange,
 * tunnels, the doors) moves bytes through gw_xprt_recv()/gw_xprt_sendv()
 * and never learns which layers are there: the forward door is TCP under
 * the exchange; the intercepting door will be TLS (server side) over TCP
 * under the same exchange, with TLS (client side) over TCP upstream.
 *
 * Every call is non-blocking. The loop watches the bottom socket; a layer
 * that needs the socket for the other direction (TLS reading to write, say)
 * says so through want(). */
#ifndef SLUICE_GW_XPRT_H
#define SLUICE_GW_XPRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct gw_xprt;

struct gw_xprt_ops {
	const char *name;                       /* "tcp", "tls-server", ... */
	/* > 0: bytes read; 0: end of stream; -EAGAIN; or -errno. */
	ssize_t (*recv)(struct gw_xprt *x, void *buf, size_t n);
	/* > 0: bytes taken (maybe fewer than offered); -EAGAIN; or -errno. */
	ssize_t (*sendv)(struct gw_xprt *x, const struct iovec *iov, int iovcnt);
	/* Sends end of stream (half-close); reading goes on. 0 or -errno. */
	int (*shutdown)(struct gw_xprt *x);
	/* Bytes the layer holds that recv() returns without the socket
	 * being readable (a decrypted record, say). NULL: none ever. */
	bool (*pending)(const struct gw_xprt *x);
	/* The socket events the layer needs to go on after recv() or
	 * sendv() said -EAGAIN in `dir` (EPOLLIN or EPOLLOUT). NULL: dir. */
	uint32_t (*want)(const struct gw_xprt *x, uint32_t dir);
	/* Frees the layer (not the layers below). */
	void (*close)(struct gw_xprt *x);
};

struct gw_xprt {
	const struct gw_xprt_ops *ops;
	struct gw_xprt *below;                  /* NULL: the bottom */
	int fd;                                 /* the socket at the bottom */
};

/* The plain TCP transport, the bottom of every stack: x is caller-owned
 * (usually embedded in a connection) and owns fd from here on (closing the
 * stack closes it). */
void gw_xprt_tcp_init(struct gw_xprt *x, int fd);

/* Puts `layer` on top of *top (layer->below and layer->fd are set here). */
void gw_xprt_push(struct gw_xprt **top, struct gw_xprt *layer);

/* Closes every layer of the stack from the top, the socket last. NULL is a
 * no-op. */
void gw_xprt_close(struct gw_xprt *top);

static inline ssize_t
gw_xprt_recv(struct gw_xprt *x, void *buf, size_t n)
{
	return x->ops->recv(x, buf, n);
}

static inline ssize_t
gw_xprt_sendv(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	return x->ops->sendv(x, iov, iovcnt);
}

ssize_t gw_xprt_send(struct gw_xprt *x, const void *p, size_t n);

static inline int
gw_xprt_shutdown(struct gw_xprt *x)
{
	return x->ops->shutdown(x);
}

static inline bool
gw_xprt_pending(const struct gw_xprt *x)
{
	return x->ops->pending && x->ops->pending(x);
}

/* The socket events to wait for before retrying direction dir. */
static inline uint32_t
gw_xprt_want(const struct gw_xprt *x, uint32_t dir)
{
	return x->ops->want ? x->ops->want(x, dir) : dir;
}

/* The socket when x is a bare TCP transport (bytes may go around it, by
 * splice(2)), else -1. */
int gw_xprt_raw_fd(const struct gw_xprt *x);

/* True when nothing has arrived and nothing is buffered: an idle upstream
 * connection that is still fit to carry another request. */
bool gw_xprt_quiet(const struct gw_xprt *x);

/* Layers use these to pass a call down. */
static inline ssize_t
gw_xprt_recv_below(struct gw_xprt *x, void *buf, size_t n)
{
	return gw_xprt_recv(x->below, buf, n);
}

static inline ssize_t
gw_xprt_sendv_below(struct gw_xprt *x, const struct iovec *iov, int iovcnt)
{
	return gw_xprt_sendv(x->below, iov, iovcnt);
}

#endif

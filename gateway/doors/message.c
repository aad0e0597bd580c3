/* message.c: one direction of an HTTP/1.1 exchange (message.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "exchange-t.h"
#include "http1.h"
#include "inject.h"
#include "message.h"
#include "xprt.h"

#define H1X_HEAD_EXTRA 512      /* a rebuilt head: the original plus this */

/* ---- buffers ---- */

int
gw_half_reserve(struct gw_h1x_half *h, size_t want)
{
	char *b;

	if (h->cap >= want)
		return 0;
	b = realloc(h->buf, want);
	if (!b)
		return -ENOMEM;
	h->buf = b;
	h->cap = want;
	return 0;
}

/* Drops the bytes already written, so reads have room. */
void
gw_half_compact(struct gw_h1x_half *h)
{
	if (h->wpos == 0)
		return;
	memmove(h->buf, h->buf + h->wpos, h->len - h->wpos);
	h->len -= h->wpos;
	h->parsed -= h->wpos;
	h->fend -= h->wpos;
	h->wpos = 0;
}

void
gw_half_shrink(struct gw_h1x_half *h, size_t cap)
{
	char *b;

	if (h->cap <= cap || h->len > cap)
		return;
	if (!(b = realloc(h->buf, cap)))
		return;         /* (keeping the bigger one is no harm) */
	h->buf = b;
	h->cap = cap;
}

void
gw_half_reset(struct gw_h1x_half *h)
{
	if (h->hsecret && h->hbuf)
		explicit_bzero(h->hbuf, h->hlen);
	h->hsecret = false;
	free(h->hbuf);
	h->hbuf = NULL;
	h->hlen = h->hpos = 0;
	h->in_body = h->done = false;
}

void
gw_half_free(struct gw_h1x_half *h)
{
	if (h->hsecret && h->hbuf)
		explicit_bzero(h->hbuf, h->hlen);
	free(h->buf);
	free(h->hbuf);
	memset(h, 0, sizeof(*h));
}

bool
gw_half_pending(const struct gw_h1x_half *h)
{
	return h->hpos < h->hlen || h->wpos < h->fend;
}

/* Reads from t into h. Returns bytes read, 0 on EOF, -EAGAIN, or -errno. */
ssize_t
gw_half_read(struct gw_h1x_half *h, struct gw_xprt *t, size_t limit)
{
	ssize_t n;

	if (h->len == h->cap) {
		gw_half_compact(h);
		if (h->len == h->cap) {
			size_t want = h->cap ? h->cap * 2 : H1X_BUF;

			if (want > limit)
				want = limit;
			if (want <= h->cap || gw_half_reserve(h, want) < 0)
				return -ENOBUFS;
		}
	}
	n = gw_xprt_recv(t, h->buf + h->len, h->cap - h->len);
	if (n < 0)
		return n;
	h->len += (size_t)n;
	h->in += (uint64_t)n;
	return n;
}

/* Writes what is ready, the rebuilt head and the body after it in one
 * gather write. Returns 1 if all was written, 0 if it would block, -errno
 * on error. */
int
gw_half_write(struct gw_h1x_half *h, struct gw_xprt *t)
{
	while (gw_half_pending(h)) {
		struct iovec iov[2];
		int iovcnt = 0;
		size_t head = h->hlen - h->hpos;
		ssize_t r;

		if (head) {
			iov[iovcnt].iov_base = h->hbuf + h->hpos;
			iov[iovcnt++].iov_len = head;
		}
		if (h->wpos < h->fend) {
			iov[iovcnt].iov_base = h->buf + h->wpos;
			iov[iovcnt++].iov_len = h->fend - h->wpos;
		}
		r = gw_xprt_sendv(t, iov, iovcnt);
		if (r < 0)
			return r == -EAGAIN ? 0 : (int)r;
		h->out += (uint64_t)r;
		if ((size_t)r <= head) {
			h->hpos += (size_t)r;
		} else {
			h->hpos = h->hlen;
			h->wpos += (size_t)r - head;
		}
	}
	if (h->wpos == h->len) {
		h->wpos = h->fend = h->parsed = h->len = 0;
	}
	return 1;
}

/* Checks body bytes past `parsed` and makes them ready to write. */
int
gw_half_body(struct gw_h1x_half *h)
{
	while (!h->done && h->parsed < h->len) {
		struct gw_h1_span data;
		size_t used = 0;
		enum gw_h1_result r;

		r = gw_h1_body_feed(&h->body, h->buf + h->parsed, h->len - h->parsed, &used, &data);
		if (r == GW_H1_ERROR)
			return -EPROTO;
		if (h->body.mode == GW_H1_RAW) {
			h->parsed += used;
			h->fend = h->parsed;
		} else {
			/* Decoded payload moves down over the framing it came in. */
			if (data.len && data.p != h->buf + h->fend)
				memmove(h->buf + h->fend, data.p, data.len);
			h->fend += data.len;
			h->parsed += used;
		}
		if (r == GW_H1_DONE)
			h->done = true;
		if (used == 0 && r == GW_H1_AGAIN)
			break;
	}
	return 0;
}

/* ---- rebuilt heads ---- */

/* Content-Length, written from the parser's number, never copied. */
static void
write_length(struct gw_h1_writer *wr, uint64_t n)
{
	char cl[24];
	int len = snprintf(cl, sizeof(cl), "%llu", (unsigned long long)n);

	gw_h1_write_header(wr, (struct gw_h1_span){ "Content-Length", 14 },
			   (struct gw_h1_span){ cl, (size_t)len });
}

/* Via, the blank line, and the head is h's to send. */
static int
write_end(struct gw_h1_writer *wr, struct gw_h1x_half *h)
{
	static const struct gw_h1_span via_n = { "Via", 3 }, via_v = { "1.1 sluice", 10 };

	gw_h1_write_header(wr, via_n, via_v);
	if (gw_h1_write_end(wr) < 0)
		return -ENOSPC;
	h->hlen = wr->len;
	h->hpos = 0;
	return 0;
}

/* Rebuilds the request head for the origin in x->up.hbuf. */
int
gw_h1x_build_request(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct gw_h1_writer wr;
	char raw[8192], hostv[GW_HOST_MAX + 16];
	size_t cap = x->reqh.head_len + H1X_HEAD_EXTRA + x->inj.extra;
	size_t tcap = sizeof(raw) + x->inj.extra;
	char *target;
	int tl, hl, rc;
	bool mf = x->reqh.has_max_forwards && x->reqh.max_forwards > 0 &&
		  gw_h1_method_ieq(&x->reqh, "OPTIONS");

	tl = snprintf(raw, sizeof(raw), "%.*s%s%.*s", (int)x->target.path.len,
		      x->target.path.p, x->target.has_query ? "?" : "",
		      (int)x->target.query.len, x->target.query.p);
	if (tl < 0 || (size_t)tl >= sizeof(raw))
		return -ENOSPC;
	/* Query credentials (inject.h) go in the target. */
	if (!(target = malloc(tcap)))
		return -ENOMEM;
	tl = gw_inject_target(x, raw, (size_t)tl, target, tcap);
	if (tl < 0) {
		free(target);
		return -ENOSPC;
	}
	if (x->target.port_explicit)
		hl = snprintf(hostv, sizeof(hostv), strchr(c->req.host, ':') ? "[%s]:%u" : "%s:%u",
			      c->req.host, c->req.port);
	else
		hl = snprintf(hostv, sizeof(hostv), strchr(c->req.host, ':') ? "[%s]" : "%s", c->req.host);
	x->up.hbuf = malloc(cap);
	if (!x->up.hbuf) {
		explicit_bzero(target, tcap);
		free(target);
		return -ENOMEM;
	}
	x->up.hsecret = x->inj.n > 0 || x->inj.sentinels;
	gw_h1_writer_init(&wr, x->up.hbuf, cap);
	gw_h1_write_request_line(&wr, x->reqh.method, (struct gw_h1_span){ target, (size_t)tl }, 1);
	explicit_bzero(target, tcap);
	free(target);
	gw_h1_write_header(&wr, (struct gw_h1_span){ "Host", 4 }, (struct gw_h1_span){ hostv, (size_t)hl });
	for (size_t i = 0; i < x->reqh.nheaders; i++) {
		const struct gw_h1_header *h = &x->reqh.headers[i];

		if (h->name.len == 4 && strncasecmp(h->name.p, "Host", 4) == 0)
			continue;
		/* Framing is written from what the parser decided, never
		 * copied: a Connection field naming Content-Length must not
		 * strip the framing the body is relayed by. */
		if (h->name.len == 14 && strncasecmp(h->name.p, "Content-Length", 14) == 0)
			continue;
		if (gw_h1_hop_by_hop(&x->reqh, h->name.p, h->name.len))
			continue;
		/* Who the client is and where it came from are not the
		 * client's to say (Forwarded, X-Forwarded-*, Sluice-*, ...). */
		if (gw_h1_spoofable(GW_H1_REQUEST, h->name.p, h->name.len))
			continue;
		/* An OPTIONS counts its hops down (RFC 9110 7.6.2): written
		 * below, one less (0 never gets here: exchange.c answers it). */
		if (mf && h->name.len == 12 && strncasecmp(h->name.p, "Max-Forwards", 12) == 0)
			continue;
		gw_inject_header(x, &wr, h);
	}
	gw_inject_finish(x, &wr);
	if (mf) {
		char v[16];
		int vl = snprintf(v, sizeof(v), "%u", x->reqh.max_forwards - 1);

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Max-Forwards", 12 },
				   (struct gw_h1_span){ v, (size_t)vl });
	}
	if (x->reqh.has_content_length) {
		write_length(&wr, x->reqh.content_length);
	}
	if (x->reqh.body == GW_H1_BODY_CHUNKED)
		gw_h1_write_header(&wr, (struct gw_h1_span){ "Transfer-Encoding", 17 },
				   (struct gw_h1_span){ "chunked", 7 });
	if (x->is_upgrade) {
		const struct gw_h1_header *u = gw_h1_header_find(&x->reqh, "Upgrade");

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
				   (struct gw_h1_span){ "Upgrade", 7 });
		gw_h1_write_header(&wr, u->name, u->value);
	}
	rc = write_end(&wr, &x->up);
	/* A head that did not fit may hold a credential already. */
	if (rc < 0 && x->up.hsecret)
		explicit_bzero(x->up.hbuf, cap);
	return rc;
}

/* Rebuilds the response head for the client in x->down.hbuf. */
int
gw_h1x_build_response(struct gw_h1x *x, bool decode_chunked)
{
	struct gw_h1_writer wr;
	size_t cap = x->resph.head_len + H1X_HEAD_EXTRA;
	bool switching = x->resph.status == 101;

	free(x->down.hbuf);
	x->down.hbuf = malloc(cap);
	if (!x->down.hbuf)
		return -ENOMEM;
	gw_h1_writer_init(&wr, x->down.hbuf, cap);
	gw_h1_write_status_line(&wr, x->resph.status, x->resph.status_text, 1);
	for (size_t i = 0; i < x->resph.nheaders; i++) {
		const struct gw_h1_header *h = &x->resph.headers[i];

		if (h->name.len == 14 && strncasecmp(h->name.p, "Content-Length", 14) == 0)
			continue;
		if (gw_h1_hop_by_hop(&x->resph, h->name.p, h->name.len))
			continue;
		/* Sluice-* is sluice's own voice (Sluice-Reason on a
		 * refusal): an origin does not get to speak with it. */
		if (gw_h1_spoofable(GW_H1_RESPONSE, h->name.p, h->name.len))
			continue;
		gw_h1_write_header(&wr, h->name, h->value);
	}
	/* As for requests: framing from the parser's decision. A HEAD or 304
	 * answer keeps the length it announces. */
	if (x->resph.has_content_length && !decode_chunked && !switching) {
		write_length(&wr, x->resph.content_length);
	}
	if (switching) {
		const struct gw_h1_header *u = gw_h1_header_find(&x->resph, "Upgrade");

		gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
				   (struct gw_h1_span){ "Upgrade", 7 });
		if (u)
			gw_h1_write_header(&wr, u->name, u->value);
	} else if (x->resph.status >= 200) {
		if (x->resph.body == GW_H1_BODY_CHUNKED && !decode_chunked)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Transfer-Encoding", 17 },
					   (struct gw_h1_span){ "chunked", 7 });
		if (x->close_after)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
					   (struct gw_h1_span){ "close", 5 });
		else if (x->reqh.version_minor == 0)
			gw_h1_write_header(&wr, (struct gw_h1_span){ "Connection", 10 },
					   (struct gw_h1_span){ "keep-alive", 10 });
	}
	return write_end(&wr, &x->down);
}


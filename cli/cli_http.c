/* cli_http.c: the sluice client's blocking HTTP/1.1 connection (see
 * cli_http.h). */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli_http.h"
#include "cli_util.h"

int
cli_conn_open(struct cli_conn *c, const struct cli_url *u, const char *name, char *err,
	      size_t errsz)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->buf = malloc(CLI_CONN_BUF);
	if (!c->buf) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	if (u->kind == CLI_URL_UNIX) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		memcpy(sun.sun_path, u->path, strlen(u->path) + 1);
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			int e = errno;

			snprintf(err, errsz, "cannot connect to %s: %s", name, strerror(e));
			return -e;
		}
		return 0;
	} else {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_ADDRCONFIG };
		struct addrinfo *res, *ai;
		int rc, e = ECONNREFUSED;

		rc = getaddrinfo(u->host, u->port, &hints, &res);
		if (rc != 0) {
			snprintf(err, errsz, "cannot connect to %s: %s", name,
				 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
			return -EHOSTUNREACH;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
				       ai->ai_protocol);
			if (c->fd < 0) {
				e = errno;
				continue;
			}
			while ((rc = connect(c->fd, ai->ai_addr, ai->ai_addrlen)) < 0 &&
			       errno == EINTR)
				;
			if (rc == 0)
				break;
			e = errno;
			close(c->fd);
			c->fd = -1;
		}
		freeaddrinfo(res);
		if (c->fd < 0) {
			snprintf(err, errsz, "cannot connect to %s: %s", name, strerror(e));
			return -e;
		}
		return 0;
	}
}

void
cli_conn_close(struct cli_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

int
cli_conn_send(struct cli_conn *c, const void *p, size_t n)
{
	const char *q = p;

	while (n > 0) {
		ssize_t w = send(c->fd, q, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads more bytes into the buffer after c->len. Returns the count, 0 at
 * EOF, or a negative errno. */
static ssize_t
fill(struct cli_conn *c)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + c->len, CLI_CONN_BUF - c->len, 0);

		if (r >= 0) {
			c->len += (size_t)r;
			return r;
		}
		if (errno != EINTR)
			return -errno;
	}
}

int
cli_conn_read_head(struct cli_conn *c, char *err, size_t errsz)
{
	struct cli_head_parser p;

	cli_head_parser_init(&p, CLI_MAX_HEAD);
	for (;;) {
		enum cli_rc rc = cli_head_parse(&p, c->buf, c->len, &c->resp, err, errsz);
		ssize_t r;

		if (rc == CLI_ERROR)
			return -EPROTO;
		if (rc == CLI_DONE) {
			if (c->resp.status >= 200)
				break;
			/* 1xx: an interim answer; the final one follows */
			memmove(c->buf, c->buf + c->resp.head_len, c->len - c->resp.head_len);
			c->len -= c->resp.head_len;
			cli_head_parser_init(&p, CLI_MAX_HEAD);
			continue;
		}
		r = fill(c);
		if (r < 0) {
			snprintf(err, errsz, "reading the response: %s", strerror((int)-r));
			return (int)r;
		}
		if (r == 0) {
			snprintf(err, errsz, c->len ? "the connection closed inside the response head"
						    : "the server closed the connection without "
						      "answering");
			return -ECONNRESET;
		}
	}
	c->off = c->resp.head_len;
	c->left = c->resp.length;
	cli_chunked_init(&c->ch);
	c->body_done = c->resp.framing == CLI_BODY_NONE ||
		       (c->resp.framing == CLI_BODY_LENGTH && c->left == 0);
	return 0;
}

ssize_t
cli_conn_read_body(struct cli_conn *c, char *out, size_t cap, char *err, size_t errsz)
{
	while (!c->body_done && cap > 0) {
		size_t avail = c->len - c->off;

		if (avail == 0) {
			ssize_t r;

			c->off = c->len = 0;
			r = fill(c);
			if (r < 0) {
				snprintf(err, errsz, "reading the response: %s", strerror((int)-r));
				return r;
			}
			if (r == 0) {
				if (c->resp.framing == CLI_BODY_CLOSE) {
					c->body_done = true;
					return 0;
				}
				snprintf(err, errsz, "the connection closed before the end of "
						     "the response");
				return -ECONNRESET;
			}
			continue;
		}
		if (c->resp.framing == CLI_BODY_CHUNKED) {
			const char *d;
			size_t used, dl;
			enum cli_rc rc;

			rc = cli_chunked_step(&c->ch, c->buf + c->off, avail < cap ? avail : cap,
					      &used, &d, &dl);
			c->off += used;
			if (rc == CLI_ERROR) {
				snprintf(err, errsz, "bad chunked response: %s", c->ch.err);
				return -EPROTO;
			}
			if (rc == CLI_DONE)
				c->body_done = true;
			if (dl) {
				memcpy(out, d, dl);
				return (ssize_t)dl;
			}
			continue;
		}
		if (c->resp.framing == CLI_BODY_LENGTH && (uint64_t)avail > c->left)
			avail = (size_t)c->left;
		if (avail > cap)
			avail = cap;
		memcpy(out, c->buf + c->off, avail);
		c->off += avail;
		if (c->resp.framing == CLI_BODY_LENGTH) {
			c->left -= avail;
			if (c->left == 0)
				c->body_done = true;
		}
		return (ssize_t)avail;
	}
	return 0;
}

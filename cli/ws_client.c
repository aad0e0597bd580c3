/* ws_client.c: the client side of WebSocket (see ws_client.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "cli_http.h"
#include "ws_client.h"

#define RBUF (128u * 1024)

static void
rnd(uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = getrandom(p, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			/* no entropy source: the kernel has one since 3.17 */
			abort();
		}
		p += k;
		n -= (size_t)k;
	}
}

/* The value of header name in head (case-insensitive), trimmed, into
 * out; false when absent. */
static bool
hdr(const char *head, size_t len, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p = memchr(head, '\n', len), *end = head + len;

	while (p && p < end) {
		const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
		const char *v, *ve;

		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			v = line + nl + 1;
			ve = eol;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			snprintf(out, cap, "%.*s", (int)(ve - v), v);
			return true;
		}
		p = eol < end ? eol : NULL;
	}
	return false;
}

static bool
has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);

	while (*v) {
		const char *e;
		size_t n;

		while (*v == ' ' || *v == ',' || *v == '\t')
			v++;
		e = strchr(v, ',');
		n = e ? (size_t)(e - v) : strlen(v);
		while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n == tl && strncasecmp(v, token, tl) == 0)
			return true;
		v = e ? e + 1 : v + strlen(v);
	}
	return false;
}

int
cli_ws_check_head(const char *head, size_t len, const char *key, char *err, size_t errsz)
{
	char v[256], want[WS_ACCEPT_LEN + 1];

	if (len < 12 || strncmp(head, "HTTP/1.1 101", 12) != 0) {
		snprintf(err, errsz, "the server did not switch protocols");
		return -1;
	}
	if (!hdr(head, len, "Upgrade", v, sizeof(v)) || !has_token(v, "websocket")) {
		snprintf(err, errsz, "the 101 has no Upgrade: websocket");
		return -1;
	}
	if (!hdr(head, len, "Connection", v, sizeof(v)) || !has_token(v, "upgrade")) {
		snprintf(err, errsz, "the 101 has no Connection: Upgrade");
		return -1;
	}
	if (ws_accept(key, strlen(key), want) < 0 ||
	    !hdr(head, len, "Sec-WebSocket-Accept", v, sizeof(v)) || strcmp(v, want) != 0) {
		snprintf(err, errsz, "the 101's Sec-WebSocket-Accept does not match the key");
		return -1;
	}
	return 0;
}

/* A refusal's body: Content-Length bytes at most CLI_WS_ERRBODY_MAX (what
 * arrived with the head first). */
static void
refusal(struct cli_ws *w, const char *head, size_t hlen, struct cli_ws_refusal *ref)
{
	char v[64], *body;
	size_t want = 0, have = w->rlen - w->rpos;
	json_t *j, *e;

	ref->status = atoi(head + 9);
	if (hdr(head, hlen, "Content-Length", v, sizeof(v)))
		want = (size_t)strtoul(v, NULL, 10);
	if (want > CLI_WS_ERRBODY_MAX)
		want = CLI_WS_ERRBODY_MAX;
	body = malloc(want + 1);
	if (!body)
		return;
	if (have > want)
		have = want;
	memcpy(body, w->rbuf + w->rpos, have);
	while (have < want) {
		ssize_t k = recv(w->fd, body + have, want - have, 0);

		if (k <= 0)
			break;
		have += (size_t)k;
	}
	j = json_loadb(body, have, 0, NULL);
	e = json_object_get(j, "error");
	snprintf(ref->code, sizeof(ref->code), "%s",
		 json_string_value(json_object_get(e, "code")) ?: "");
	snprintf(ref->message, sizeof(ref->message), "%s",
		 json_string_value(json_object_get(e, "message")) ?: "");
	json_decref(j);
	free(body);
}

int
cli_ws_open(struct cli_ws *w, const struct cli_url *u, const char *name, const char *token,
	    const char *target, struct cli_ws_refusal *ref, char *err, size_t errsz)
{
	struct cli_conn c = { .fd = -1 };
	uint8_t k16[16];
	char key[WS_KEY_LEN + 1], *req = NULL, *end;
	int rc, n;

	memset(w, 0, sizeof(*w));
	memset(ref, 0, sizeof(*ref));
	w->fd = -1;
	w->msgbuf = malloc(CLI_WS_MSG_MAX);
	w->rbuf = malloc(RBUF);
	if (!w->msgbuf || !w->rbuf) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	ws_rx_init(&w->rx, false, w->msgbuf, CLI_WS_MSG_MAX);
	rc = cli_conn_open(&c, u, name, err, errsz);
	w->fd = c.fd;
	c.fd = -1;
	cli_conn_close(&c);
	if (rc < 0)
		return rc;
	rnd(k16, sizeof(k16));
	ws_key_make(k16, key);
	n = asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice\r\nUpgrade: websocket\r\n"
		     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
		     "Sec-WebSocket-Protocol: sluice.exec.v1\r\n%s%s%s\r\n",
		     target, u->hosthdr, key, token ? "Authorization: Bearer " : "",
		     token ? token : "", token ? "\r\n" : "");
	if (n < 0) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t k = send(w->fd, req + off, (size_t)n - off, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = -errno;
			explicit_bzero(req, (size_t)n);
			free(req);
			snprintf(err, errsz, "%s: %s", name, strerror(-rc));
			return rc;
		}
		off += (size_t)k;
	}
	explicit_bzero(req, (size_t)n); /* the token */
	free(req);
	/* the head, up to its blank line */
	for (;;) {
		ssize_t k;

		w->rbuf[w->rlen] = 0;
		end = w->rlen ? strstr((char *)w->rbuf, "\r\n\r\n") : NULL;
		if (end)
			break;
		if (w->rlen >= CLI_WS_HEAD_MAX) {
			snprintf(err, errsz, "%s: a response head over %u bytes", name,
				 CLI_WS_HEAD_MAX);
			return -EPROTO;
		}
		k = recv(w->fd, w->rbuf + w->rlen, CLI_WS_HEAD_MAX - w->rlen, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			snprintf(err, errsz, "%s: the connection closed before an answer", name);
			return -ECONNRESET;
		}
		w->rlen += (size_t)k;
	}
	w->rpos = (size_t)(end + 4 - (char *)w->rbuf);
	if (strncmp((char *)w->rbuf, "HTTP/1.1 101", 12) != 0 && w->rpos > 12) {
		refusal(w, (char *)w->rbuf, w->rpos, ref);
		return -EPROTO;
	}
	if (cli_ws_check_head((char *)w->rbuf, w->rpos, key, err, errsz) < 0)
		return -EPROTO;
	return 0;
}

void
cli_ws_close(struct cli_ws *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->msgbuf);
	free(w->rbuf);
	free(w->wq);
	w->msgbuf = w->rbuf = w->wq = NULL;
}

int
cli_ws_queue(struct cli_ws *w, uint8_t opcode, const void *p, size_t n)
{
	uint8_t mask[4], *o;
	size_t h;

	if (w->woff > 0 && w->woff + w->wlen + WS_HDR_MAX + n > w->wcap) {
		memmove(w->wq, w->wq + w->woff, w->wlen);
		w->woff = 0;
	}
	if (w->wlen + WS_HDR_MAX + n > w->wcap) {
		size_t cap = w->wcap ? w->wcap : 65536;
		uint8_t *nb;

		while (cap < w->wlen + WS_HDR_MAX + n)
			cap *= 2;
		if (!(nb = realloc(w->wq, cap)))
			return -ENOMEM;
		w->wq = nb;
		w->wcap = cap;
	}
	rnd(mask, sizeof(mask));
	o = w->wq + w->woff + w->wlen;
	h = ws_hdr_put(o, true, opcode, n, mask);
	if (n)
		memcpy(o + h, p, n);
	ws_mask(o + h, n, mask, 0);
	w->wlen += h + n;
	return 0;
}

int
cli_ws_flush(struct cli_ws *w)
{
	while (w->wlen > 0) {
		ssize_t k = send(w->fd, w->wq + w->woff, w->wlen, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k < 0)
			return -errno;
		w->woff += (size_t)k;
		w->wlen -= (size_t)k;
	}
	w->woff = 0;
	return 0;
}

ssize_t
cli_ws_read(struct cli_ws *w)
{
	ssize_t k;

	if (w->rpos == w->rlen)
		w->rpos = w->rlen = 0;
	if (w->rlen == RBUF)
		return -ENOBUFS;
	k = recv(w->fd, w->rbuf + w->rlen, RBUF - w->rlen, MSG_DONTWAIT);
	if (k < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	w->rlen += (size_t)k;
	return k;
}

enum ws_rx_result
cli_ws_next(struct cli_ws *w, struct ws_msg *m)
{
	while (w->rpos < w->rlen) {
		size_t used;
		enum ws_rx_result r =
			ws_rx_feed(&w->rx, w->rbuf + w->rpos, w->rlen - w->rpos, &used, m);

		w->rpos += used;
		if (r != WS_RX_AGAIN)
			return r;
	}
	return WS_RX_AGAIN;
}

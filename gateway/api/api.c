/* api.c: the REST API's HTTP/1.1 server (see api.h).
 *
 * Threads: one per listener, blocked in poll(2) on its socket and on a
 * shared eventfd that gw_api_stop() writes; one per connection, serving
 * its requests in order with blocking I/O (SO_RCVTIMEO/SO_SNDTIMEO). A
 * connection thread that ends puts itself on the `dead` list under the
 * lock; the accept threads join those lazily and gw_api_stop() joins the
 * rest, so no thread is ever left detached.
 *
 * A connection's buffer holds the head of the request being served at
 * its start ([0, head_len): the header spans point there for the whole
 * request) and the bytes received after it ([off, len)): body bytes, then
 * pipelined requests, which are moved to the front before the next head
 * is parsed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "accept.h"
#include "api.h"
#include "conf.h"
#include "http1.h"
#include "log.h"
#include "metrics.h"
#include "site.h"

#define API_MAX_HEAD        (64u * 1024)
#define API_BUF_SIZE        (API_MAX_HEAD + 16u * 1024) /* head + room for body reads */
#define API_MAX_PARAMS      32
#define API_ID_MAX          48
#define API_DRAIN_MAX       API_MAX_BODY /* unread body bytes skipped to keep a connection */
#define API_BACKLOG         128
#define API_BUSY_TIMEOUT_MS 1000
#define API_MAX_EXTRA_HDRS  4
#define API_LINGER_MS       2000 /* reading and dropping a refused body before close */
#define API_LINGER_MAX      (4u << 20)

struct api_conn {
	struct gw_api *api;
	struct api_conn *prev, *next;
	pthread_t thread;
	int fd;
	bool is_unix;
	bool linger;     /* closing with body bytes unread */
	size_t off, len; /* buf[off, len): received, not used yet */
	struct gw_h1_head head;
	char buf[API_BUF_SIZE];
};

struct api_listener {
	struct gw_api *api;
	pthread_t thread;
	bool running; /* thread started */
	int fd;
	bool is_unix;
	struct gw_accept_backoff backoff; /* out of descriptors (accept.h) */
};

struct gw_api {
	const struct gw_api_route *routes;
	gw_api_conf_fn conf_fn;
	void *arg;
	struct api_listener lis[2];
	size_t nlis;
	int wake_fd; /* eventfd: readable once stopping */
	char tcp_addr[INET6_ADDRSTRLEN + 8];
	struct sockaddr_storage tcp_ss; /* what the TCP listener is bound to */
	char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool have_sock;
	dev_t sock_dev; /* the socket file we made, to remove */
	ino_t sock_ino; /* only that one at stop */

	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t cv;  /* signalled when a connection ends */
	bool stopping;
	struct api_conn *live;
	size_t nlive;
	struct api_conn *dead; /* ended, not joined yet (via next) */
};

struct api_param {
	const char *name;
	const char *value;
};

struct api_hdr {
	const char *name;
	const char *value;
};

struct gw_api_req {
	struct api_conn *c;
	const struct gw_h1_head *head;
	char method[16];
	bool keep;     /* the connection may serve another request */
	bool answered; /* a reply or a stream head was sent */
	bool streaming;
	bool stream_chunked; /* false for HTTP/1.0: bytes until close */
	bool stream_ended;
	bool io_failed; /* a write failed: the client is gone */
	unsigned status;

	struct gw_h1_body body;
	bool body_done;
	bool continue_sent;
	int body_err; /* sticky -errno of the body reader */
	char *whole;  /* the body of a non-raw route */
	size_t whole_len;
	size_t whole_off; /* handed out by gw_api_body_read() */
	bool have_whole;

	char *path; /* decoded, NUL-terminated */
	char *qbuf; /* decoded names and values */
	struct api_param params[API_MAX_PARAMS];
	size_t nparams;
};

static void send_error(struct gw_api_req *r, unsigned status, const char *code, const char *msg,
                       const struct api_hdr *extra, size_t nextra);

/* ---- pure helpers --------------------------------------------------- */

bool
gw_api_token_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char ha[EVP_MAX_MD_SIZE], hb[EVP_MAX_MD_SIZE];
	unsigned int la = 0, lb = 0;
	int ok;

	/* Hashing both sides makes the comparison one of two fixed-size
	 * digests: its time depends on alen + blen only, never on where the
	 * strings differ or which one is longer. */
	ok = EVP_Digest(a ? a : "", a ? alen : 0, ha, &la, EVP_sha256(), NULL);
	ok &= EVP_Digest(b ? b : "", b ? blen : 0, hb, &lb, EVP_sha256(), NULL);
	ok &= la == 32 && lb == 32;
	ok &= CRYPTO_memcmp(ha, hb, 32) == 0;
	ok &= alen == blen;
	ok &= (a != NULL || alen == 0) && (b != NULL || blen == 0);
	OPENSSL_cleanse(ha, sizeof(ha));
	OPENSSL_cleanse(hb, sizeof(hb));
	return ok == 1;
}

static bool
id_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_';
}

bool
gw_api_route_match(const char *pattern, const char *path, char *id, size_t idsz)
{
	const char *pp = pattern, *sp = path, *idp = NULL;
	size_t idlen = 0;

	if (id && idsz > 0)
		id[0] = '\0';
	if (!pattern || !path || *pp != '/' || *sp != '/')
		return false;
	while (*pp == '/' && *sp == '/') {
		size_t pl, sl;

		pp++;
		sp++;
		pl = strcspn(pp, "/");
		sl = strcspn(sp, "/");
		if (pl == 4 && memcmp(pp, "{id}", 4) == 0) {
			if (sl == 0 || sl > API_ID_MAX)
				return false;
			for (size_t k = 0; k < sl; k++)
				if (!id_char((unsigned char)sp[k]))
					return false;
			idp = sp;
			idlen = sl;
		} else if (pl != sl || memcmp(pp, sp, pl) != 0) {
			return false;
		}
		pp += pl;
		sp += sl;
	}
	if (*pp || *sp)
		return false;
	if (idp && id) {
		if (idsz <= idlen)
			return false;
		memcpy(id, idp, idlen);
		id[idlen] = '\0';
	}
	return true;
}

static int
hex_val(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int
gw_api_pct_decode(const char *s, size_t len, char *out, size_t outsz)
{
	size_t o = 0;

	if (!out || outsz == 0)
		return -ENOSPC;
	out[0] = '\0';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '%') {
			int hi, lo;

			if (len - i < 3)
				return -EINVAL;
			hi = hex_val(s[i + 1]);
			lo = hex_val(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (ch == '\0')
			return -EINVAL;
		if (o + 1 >= outsz) {
			out[0] = '\0';
			return -ENOSPC;
		}
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

/* ---- I/O ------------------------------------------------------------ */

static void *
unconst(const void *p)
{
	return (void *)(uintptr_t)p;
}

/* Sends every byte of iov[0..n) (which it modifies). 0 or -errno; a send
 * timeout is -ETIMEDOUT. */
static int
send_all(int fd, struct iovec *iov, size_t n)
{
	while (n > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = n};
		ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
		size_t done;

		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -ETIMEDOUT;
			return -errno;
		}
		done = (size_t)k;
		while (n > 0 && done >= iov->iov_len) {
			done -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= done;
		}
	}
	return 0;
}

/* Appends what the socket has to buf[len..). Bytes read, 0 at EOF, or
 * -errno (-ETIMEDOUT when SO_RCVTIMEO expired, -ENOBUFS when full). */
static ssize_t
conn_recv(struct api_conn *c)
{
	if (c->len >= sizeof(c->buf))
		return -ENOBUFS;
	for (;;) {
		ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);

		if (n >= 0) {
			c->len += (size_t)n;
			return n;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -ETIMEDOUT;
		return -errno;
	}
}

static void
set_timeouts(int fd, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- answers -------------------------------------------------------- */

static const char *
status_text(unsigned s)
{
	switch (s) {
	case 100:
		return "Continue";
	case 101:
		return "Switching Protocols";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "Content Too Large";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Content";
	case 426:
		return "Upgrade Required";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Status";
	}
}

static struct gw_h1_span
span_of(const char *s)
{
	return (struct gw_h1_span){.p = s, .len = strlen(s)};
}

/* Sends the head (and a body, in the same write). clen >= 0: a
 * Content-Length; -1: chunked; -2: no framing field (a body that ends
 * with the connection, or none at all for 204/304). */
static int
send_head(struct gw_api_req *r, unsigned status, const char *ctype, int64_t clen,
          const struct api_hdr *extra, size_t nextra, const void *body, size_t blen)
{
	char head[4096], num[32];
	struct gw_h1_writer w;
	struct iovec iov[2];
	int rc;

	if (status < 100 || status > 599)
		status = 500;
	gw_h1_writer_init(&w, head, sizeof(head));
	gw_h1_write_status_line(&w, status, span_of(status_text(status)), 1);
	if (ctype)
		gw_h1_write_header(&w, span_of("Content-Type"), span_of(ctype));
	if (clen >= 0) {
		snprintf(num, sizeof(num), "%" PRId64, clen);
		gw_h1_write_header(&w, span_of("Content-Length"), span_of(num));
	} else if (clen == -1) {
		gw_h1_write_header(&w, span_of("Transfer-Encoding"), span_of("chunked"));
	}
	for (size_t i = 0; i < nextra; i++)
		gw_h1_write_header(&w, span_of(extra[i].name), span_of(extra[i].value));
	gw_h1_write_header(&w, span_of("Cache-Control"), span_of("no-store"));
	if (!r->keep)
		gw_h1_write_header(&w, span_of("Connection"), span_of("close"));
	rc = gw_h1_write_end(&w);
	if (rc < 0)
		return rc;
	iov[0] = (struct iovec){.iov_base = head, .iov_len = w.len};
	iov[1] = (struct iovec){.iov_base = unconst(body), .iov_len = body ? blen : 0};
	rc = send_all(r->c->fd, iov, 2);
	if (rc < 0) {
		r->io_failed = true;
		r->keep = false;
	}
	return rc;
}

/* The one place a reply goes out. */
static void
reply(struct gw_api_req *r, unsigned status, const char *ctype, const void *body, size_t len,
      const struct api_hdr *extra, size_t nextra)
{
	bool nobody = status < 200 || status == 204 || status == 304;
	int rc;

	if (r->answered) {
		gw_log_debug("api: %s %s: a second answer (%u) dropped", r->method,
		             r->path ? r->path : "?", status);
		return;
	}
	r->answered = true;
	r->status = status;
	rc = send_head(r, status, nobody ? NULL : ctype, nobody ? -2 : (int64_t)len, extra, nextra,
	               nobody ? NULL : body, nobody ? 0 : len);
	if (rc == -EINVAL || rc == -ENOSPC) {
		/* A header the handler gave could not be written as is. */
		r->answered = false;
		send_error(r, 500, "internal", "could not write the response head", NULL, 0);
	}
}

/* Serialises v compactly with a "\n" after it; NULL when v is NULL or
 * unencodable. Borrows v. */
static char *
json_line(const struct json_t *v, size_t *len)
{
	size_t n;
	char *s;

	if (!v)
		return NULL;
	n = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	if (n == 0)
		return NULL;
	s = malloc(n + 1);
	if (!s)
		return NULL;
	if (json_dumpb(v, s, n, JSON_COMPACT | JSON_ENCODE_ANY) != n) {
		free(s);
		return NULL;
	}
	s[n] = '\n';
	*len = n + 1;
	return s;
}

static const char internal_body[] =
    "{\"error\":{\"code\":\"internal\",\"message\":\"could not encode the answer\"}}\n";

static void
send_json(struct gw_api_req *r, unsigned status, json_t *body, const struct api_hdr *extra,
          size_t nextra)
{
	size_t len = 0;
	char *s = json_line(body, &len);

	if (body && !s) {
		static const struct api_hdr h = {"Sluice-Reason", "internal"};

		json_decref(body);
		reply(r, 500, "application/json", internal_body, sizeof(internal_body) - 1, &h, 1);
		return;
	}
	json_decref(body);
	reply(r, status, s ? "application/json" : NULL, s, len, extra, nextra);
	free(s);
}

/* A JSON string of s, whose bytes that are not UTF-8 become '?'. */
static json_t *
json_str_lossy(const char *s)
{
	json_t *v = json_string(s);
	char *copy;

	if (v)
		return v;
	copy = strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
			*p = '?';
	v = json_string(copy);
	free(copy);
	return v;
}

static bool
reason_token_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!id_char((unsigned char)*s) && *s != '.')
			return false;
	return true;
}

/* Sends {"error": obj} (stealing obj) with Sluice-Reason from its "code". */
static void
send_error_obj(struct gw_api_req *r, unsigned status, json_t *obj, const struct api_hdr *extra,
               size_t nextra)
{
	struct api_hdr h[API_MAX_EXTRA_HDRS + 2];
	size_t n = 0;
	const char *code = json_string_value(json_object_get(obj, "code"));
	char reason[65];
	json_t *body;

	for (size_t i = 0; i < nextra && n < API_MAX_EXTRA_HDRS; i++)
		h[n++] = extra[i];
	/* A copy: obj is freed with the body before the head is written. */
	if (reason_token_ok(code)) {
		snprintf(reason, sizeof(reason), "%s", code);
		h[n++] = (struct api_hdr){"Sluice-Reason", reason};
	}
	if (status == 401)
		h[n++] = (struct api_hdr){"WWW-Authenticate", "Bearer"};
	body = json_object();
	if (!body || json_object_set_new(body, "error", obj) < 0) {
		json_decref(body);
		body = NULL;
		obj = NULL;
	}
	if (!body) {
		static const struct api_hdr ih = {"Sluice-Reason", "internal"};

		reply(r, 500, "application/json", internal_body, sizeof(internal_body) - 1, &ih, 1);
		return;
	}
	send_json(r, status, body, h, n);
}

static void
send_error(struct gw_api_req *r, unsigned status, const char *code, const char *msg,
           const struct api_hdr *extra, size_t nextra)
{
	json_t *e = json_object();

	if (e) {
		json_object_set_new(e, "code", json_str_lossy(code));
		json_object_set_new(e, "message", json_str_lossy(msg));
	}
	send_error_obj(r, status, e, extra, nextra);
}

void
gw_api_reply_json(struct gw_api_req *r, unsigned status, struct json_t *body)
{
	send_json(r, status, body, NULL, 0);
}

void
gw_api_reply_error(struct gw_api_req *r, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	send_error(r, status, code, msg, NULL, 0);
}

void
gw_api_reply_error_hdr(struct gw_api_req *r, unsigned status, const char *code, const char *hname,
		       const char *hvalue, const char *fmt, ...)
{
	struct api_hdr h = {hname, hvalue};
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	send_error(r, status, code, msg, &h, 1);
}

int
gw_api_upgrade(struct gw_api_req *r, const char *const *hdrs, size_t nhdrs, const void **pre,
	       size_t *prelen)
{
	char head[2048];
	struct gw_h1_writer w;
	struct iovec iov[1];
	int rc;

	if (r->answered)
		return -EALREADY;
	gw_h1_writer_init(&w, head, sizeof(head));
	gw_h1_write_status_line(&w, 101, span_of(status_text(101)), 1);
	for (size_t i = 0; i + 1 < 2 * nhdrs; i += 2)
		gw_h1_write_header(&w, span_of(hdrs[i]), span_of(hdrs[i + 1]));
	if ((rc = gw_h1_write_end(&w)) < 0)
		return rc;
	r->answered = true;
	r->status = 101;
	r->keep = false; /* the connection ends with the handler */
	iov[0] = (struct iovec){.iov_base = head, .iov_len = w.len};
	rc = send_all(r->c->fd, iov, 1);
	if (rc < 0) {
		r->io_failed = true;
		return rc;
	}
	/* what the client sent after the head is the new protocol's */
	*pre = r->c->buf + r->c->off;
	*prelen = r->c->len - r->c->off;
	r->c->off = r->c->len;
	return 0;
}

void
gw_api_reply_error_json(struct gw_api_req *r, unsigned status, struct json_t *error_obj)
{
	if (!json_is_object(error_obj)) {
		json_decref(error_obj);
		send_error(r, 500, "internal", "the handler's error is not an object", NULL, 0);
		return;
	}
	send_error_obj(r, status, error_obj, NULL, 0);
}

void
gw_api_reply_raw(struct gw_api_req *r, unsigned status, const char *content_type, const void *body,
                 size_t len)
{
	reply(r, status, content_type, body, len, NULL, 0);
}

int
gw_api_stream_begin(struct gw_api_req *r, unsigned status, const char *content_type)
{
	int rc;

	if (r->answered)
		return -EALREADY;
	r->answered = true;
	r->status = status;
	r->streaming = true;
	/* HTTP/1.0 has no chunked coding: the body ends with the connection. */
	r->stream_chunked = r->head->version_minor >= 1;
	if (!r->stream_chunked)
		r->keep = false;
	rc = send_head(r, status, content_type, r->stream_chunked ? -1 : -2, NULL, 0, NULL, 0);
	if (rc == -EINVAL || rc == -ENOSPC) {
		r->streaming = false;
		r->answered = false;
		send_error(r, 500, "internal", "could not write the response head", NULL, 0);
	}
	return rc;
}

int
gw_api_stream_write(struct gw_api_req *r, const void *p, size_t len)
{
	char size[24];
	struct iovec iov[3];
	int rc;

	if (!r->streaming || r->stream_ended)
		return -EINVAL;
	if (r->io_failed)
		return -EPIPE;
	if (len == 0)
		return 0; /* an empty chunk would end the stream */
	if (!r->stream_chunked) {
		iov[0] = (struct iovec){.iov_base = unconst(p), .iov_len = len};
		rc = send_all(r->c->fd, iov, 1);
	} else {
		snprintf(size, sizeof(size), "%zx\r\n", len);
		iov[0] = (struct iovec){.iov_base = size, .iov_len = strlen(size)};
		iov[1] = (struct iovec){.iov_base = unconst(p), .iov_len = len};
		iov[2] = (struct iovec){.iov_base = unconst("\r\n"), .iov_len = 2};
		rc = send_all(r->c->fd, iov, 3);
	}
	if (rc < 0) {
		r->io_failed = true;
		r->keep = false;
	}
	return rc;
}

int
gw_api_stream_json(struct gw_api_req *r, struct json_t *v)
{
	size_t len = 0;
	char *s = json_line(v, &len);
	int rc;

	json_decref(v);
	if (!s)
		return -ENOMEM;
	rc = gw_api_stream_write(r, s, len);
	free(s);
	return rc;
}

int
gw_api_stream_end(struct gw_api_req *r)
{
	struct iovec iov;
	int rc = 0;

	if (!r->streaming || r->stream_ended)
		return -EINVAL;
	r->stream_ended = true;
	if (r->io_failed)
		return -EPIPE;
	if (r->stream_chunked) {
		iov = (struct iovec){.iov_base = unconst("0\r\n\r\n"), .iov_len = 5};
		rc = send_all(r->c->fd, &iov, 1);
		if (rc < 0) {
			r->io_failed = true;
			r->keep = false;
		}
	}
	return rc;
}

/* ---- the request ---------------------------------------------------- */

const char *
gw_api_query(const struct gw_api_req *r, const char *name)
{
	for (size_t i = 0; i < r->nparams; i++)
		if (strcmp(r->params[i].name, name) == 0)
			return r->params[i].value;
	return NULL;
}

const char *
gw_api_header(const struct gw_api_req *r, const char *name, size_t *len)
{
	const struct gw_h1_header *h = gw_h1_header_find(r->head, name);

	if (!h)
		return NULL;
	*len = h->value.len;
	return h->value.p;
}

const char *
gw_api_body(const struct gw_api_req *r, size_t *len)
{
	*len = r->have_whole ? r->whole_len : 0;
	return r->have_whole && r->whole ? r->whole : "";
}

int64_t
gw_api_body_length(const struct gw_api_req *r)
{
	switch (r->head->body) {
	case GW_H1_BODY_LENGTH:
		return r->head->content_length > INT64_MAX ? INT64_MAX
		                                           : (int64_t)r->head->content_length;
	case GW_H1_BODY_CHUNKED:
		return -1;
	default:
		return 0;
	}
}

static void
body_fail(struct gw_api_req *r, int err)
{
	r->body_err = err;
	r->keep = false;
}

/* The body reader of gw_api_body_read() and of everything else. */
static ssize_t
body_read(struct gw_api_req *r, void *out, size_t n)
{
	struct api_conn *c = r->c;

	if (r->body_err)
		return r->body_err;
	if (r->body_done || n == 0)
		return 0;
	if (r->head->expect_100_continue && !r->continue_sent && !r->answered &&
	    r->head->version_minor >= 1) {
		struct iovec iov = {.iov_base = unconst("HTTP/1.1 100 Continue\r\n\r\n"),
		                    .iov_len = 25};
		int rc;

		r->continue_sent = true;
		rc = send_all(c->fd, &iov, 1);
		if (rc < 0) {
			r->io_failed = true;
			body_fail(r, rc);
			return rc;
		}
	}
	for (;;) {
		size_t avail = c->len - c->off;
		ssize_t k;

		if (avail > 0) {
			size_t feed = avail < n ? avail : n, used = 0;
			struct gw_h1_span d = {0};
			enum gw_h1_result rc;

			rc = gw_h1_body_feed(&r->body, c->buf + c->off, feed, &used, &d);
			if (rc == GW_H1_ERROR || (rc == GW_H1_AGAIN && used == 0 && d.len == 0)) {
				body_fail(r, -EPROTO);
				return -EPROTO;
			}
			c->off += used;
			if (rc == GW_H1_DONE)
				r->body_done = true;
			if (d.len > 0) {
				memmove(out, d.p, d.len);
				return (ssize_t)d.len;
			}
			if (r->body_done)
				return 0;
			continue;
		}
		/* Nothing left after the head: receive right after it. */
		c->off = c->len = r->head->head_len;
		k = conn_recv(c);
		if (k == 0) {
			body_fail(r, -ECONNRESET);
			return -ECONNRESET;
		}
		if (k < 0) {
			body_fail(r, k == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET);
			return r->body_err;
		}
	}
}

ssize_t
gw_api_body_read(struct gw_api_req *r, void *buf, size_t n)
{
	if (r->have_whole) {
		/* The body was read whole already: hand it out. */
		size_t left = r->whole_len - r->whole_off;
		size_t k = n < left ? n : left;

		memcpy(buf, r->whole + r->whole_off, k);
		r->whole_off += k;
		return (ssize_t)k;
	}
	return body_read(r, buf, n);
}

/* Reads the whole body (up to API_MAX_BODY) into r->whole. 0, or -1 after
 * answering the error (or without an answer when the client is gone). */
static int
read_whole(struct gw_api_req *r)
{
	size_t cap, len = 0;
	char *buf;

	if (r->have_whole)
		return 0;
	if (r->head->body == GW_H1_BODY_LENGTH && r->head->content_length > API_MAX_BODY) {
		r->keep = false;
		gw_api_reply_error(r, 413, "too-large", "the body is over %u bytes", API_MAX_BODY);
		return -1;
	}
	cap = r->head->body == GW_H1_BODY_LENGTH ? (size_t)r->head->content_length : 4096;
	buf = malloc(cap + 1);
	if (!buf)
		goto nomem;
	for (;;) {
		ssize_t k;

		if (len == cap) {
			char probe;
			char *nb;

			if (r->body_done)
				break;
			if (cap >= API_MAX_BODY) {
				k = body_read(r, &probe, 1);
				if (k == 0)
					break;
				if (k > 0) {
					free(buf);
					r->keep = false;
					gw_api_reply_error(r, 413, "too-large",
					                   "the body is over %u bytes",
					                   API_MAX_BODY);
					return -1;
				}
				goto fail;
			}
			cap = cap * 2 > API_MAX_BODY ? API_MAX_BODY : cap * 2;
			/* not realloc(): a body may hold a tenant's credentials,
			 * and the old block must not be left with them */
			nb = malloc(cap + 1);
			if (!nb)
				goto nomem;
			memcpy(nb, buf, len);
			explicit_bzero(buf, len);
			free(buf);
			buf = nb;
		}
		k = body_read(r, buf + len, cap - len);
		if (k == 0)
			break;
		if (k < 0)
			goto fail;
		len += (size_t)k;
	}
	buf[len] = '\0';
	r->whole = buf;
	r->whole_len = len;
	r->have_whole = true;
	return 0;
fail:
	free(buf);
	if (r->body_err == -EPROTO)
		gw_api_reply_error(r, 400, "bad-request", "malformed request body (%s)",
		                   r->body.err.msg ? r->body.err.msg : "framing");
	else
		r->answered = true; /* the client is gone or silent: no answer */
	return -1;
nomem:
	free(buf);
	r->keep = false;
	gw_api_reply_error(r, 500, "internal", "out of memory");
	return -1;
}

/* True when the media type of value[0..len) is `type` (parameters ignored). */
static bool
media_is(const char *v, size_t len, const char *type)
{
	size_t tl = strlen(type), n = 0;

	while (n < len && v[n] != ';' && v[n] != ' ' && v[n] != '\t')
		n++;
	return n == tl && strncasecmp(v, type, tl) == 0;
}

struct json_t *
gw_api_body_json(struct gw_api_req *r)
{
	size_t ctlen = 0, len;
	const char *ct = gw_api_header(r, "Content-Type", &ctlen);
	const char *body;
	json_error_t e;
	json_t *v;

	if (ct && !media_is(ct, ctlen, "application/json")) {
		/* Unread body bytes are drained (or the connection closed) after. */
		gw_api_reply_error(r, 415, "unsupported-media-type",
		                   "the body must be application/json");
		return NULL;
	}
	if (read_whole(r) < 0)
		return NULL;
	body = gw_api_body(r, &len);
	v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (!v) {
		/* jansson quotes the text "near" the error: a body may hold a
		 * secret, so the answer names the place only. */
		char *near = strstr(e.text, " near '");

		if (near)
			*near = '\0';
		gw_api_reply_error(r, 400, "bad-json", "body: %s (line %d, column %d)", e.text,
		                   e.line, e.column);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		gw_api_reply_error(r, 400, "bad-json", "body: expected a JSON object");
		return NULL;
	}
	return v;
}

bool
gw_api_accepts(const struct gw_api_req *r, const char *type)
{
	const struct gw_h1_header *h = NULL;

	while ((h = gw_h1_header_next(r->head, h, "Accept"))) {
		const char *p = h->value.p, *end = p + h->value.len;

		while (p < end) {
			const char *item = p, *comma = memchr(p, ',', (size_t)(end - p));
			const char *iend = comma ? comma : end;

			while (item < iend && (*item == ' ' || *item == '\t'))
				item++;
			if (media_is(item, (size_t)(iend - item), type)) {
				/* "q=0" means "not acceptable". */
				const char *q = memchr(item, ';', (size_t)(iend - item));
				bool zero = false;

				while (q && q < iend) {
					const char *s = q + 1;

					while (s < iend && (*s == ' ' || *s == '\t'))
						s++;
					if (iend - s >= 3 && strncasecmp(s, "q=0", 3) == 0) {
						const char *t = s + 3;

						if (t < iend && *t == '.')
							t++;
						while (t < iend && *t == '0')
							t++;
						while (t < iend && (*t == ' ' || *t == '\t'))
							t++;
						zero = t == iend || *t == ';';
					}
					q = memchr(s, ';', (size_t)(iend - s));
				}
				if (!zero)
					return true;
			}
			p = comma ? comma + 1 : end;
		}
	}
	return false;
}

/* ---- serving -------------------------------------------------------- */

static int
parse_query(struct gw_api_req *r, const char *q, size_t qlen, char *msg, size_t msgsz)
{
	size_t left = qlen + 2 * API_MAX_PARAMS + 1, i = 0;
	char *o;

	r->qbuf = o = malloc(left);
	if (!o) {
		snprintf(msg, msgsz, "out of memory");
		return -ENOMEM;
	}
	while (i <= qlen) {
		const char *piece = q + i, *eq;
		size_t plen = 0, nlen;
		char *name, *value;

		while (i + plen < qlen && q[i + plen] != '&')
			plen++;
		i += plen + 1;
		if (plen == 0)
			continue;
		if (r->nparams == API_MAX_PARAMS) {
			snprintf(msg, msgsz, "more than %d query parameters", API_MAX_PARAMS);
			return -EINVAL;
		}
		eq = memchr(piece, '=', plen);
		nlen = eq ? (size_t)(eq - piece) : plen;
		if (nlen == 0) {
			snprintf(msg, msgsz, "a query parameter without a name");
			return -EINVAL;
		}
		name = o;
		if (gw_api_pct_decode(piece, nlen, o, left) < 0)
			goto bad;
		left -= strlen(o) + 1;
		o += strlen(o) + 1;
		value = o;
		if (gw_api_pct_decode(eq ? eq + 1 : "", eq ? plen - nlen - 1 : 0, o, left) < 0)
			goto bad;
		left -= strlen(o) + 1;
		o += strlen(o) + 1;
		if (gw_api_query(r, name)) {
			snprintf(msg, msgsz, "query parameter '%.64s' given twice", name);
			return -EINVAL;
		}
		r->params[r->nparams++] = (struct api_param){name, value};
	}
	return 0;
bad:
	snprintf(msg, msgsz, "bad percent-encoding in the query");
	return -EINVAL;
}

/* Who the request is from: 0 with *role and *tenant, or -EACCES (401)
 * or -EINVAL (400, msg set). */
static int
authenticate(struct gw_api_req *r, const struct conf *cf, enum gw_api_role *role,
             const char **tenant, char *msg, size_t msgsz)
{
	const struct gw_h1_header *h = gw_h1_header_find(r->head, "Authorization");
	const char *tok;
	size_t tlen, n = 0;
	bool op = false, found = false;

	*tenant = NULL;
	if (!h) {
		if (r->c->is_unix) {
			*role = GW_API_OPERATOR;
			return 0;
		}
		return -EACCES;
	}
	if (gw_h1_header_next(r->head, h, "Authorization")) {
		snprintf(msg, msgsz, "more than one Authorization field");
		return -EINVAL;
	}
	while (n < h->value.len && h->value.p[n] != ' ')
		n++;
	if (n != 6 || strncasecmp(h->value.p, "Bearer", 6) != 0)
		return -EACCES;
	tok = h->value.p + n;
	tlen = h->value.len - n;
	while (tlen > 0 && *tok == ' ') {
		tok++;
		tlen--;
	}
	if (tlen == 0 || memchr(tok, ' ', tlen))
		return -EACCES;

	/* Every configured secret is compared, whatever matched before. */
	if (cf->api.operator_token.value)
		op = gw_api_token_eq(tok, tlen, cf->api.operator_token.value,
		                     cf->api.operator_token.len);
	for (size_t i = 0; i < cf->ntenants; i++) {
		const struct conf_tenant *t = &cf->tenants[i];

		for (size_t j = 0; j < t->nkeys; j++) {
			bool m = t->keys[j].value &&
			         gw_api_token_eq(tok, tlen, t->keys[j].value, t->keys[j].len);

			if (m && !found) {
				found = true;
				*tenant = t->name;
			}
		}
	}
	if (op) {
		*role = GW_API_OPERATOR;
		*tenant = NULL;
		return 0;
	}
	if (found) {
		*role = GW_API_TENANT;
		return 0;
	}
	return -EACCES;
}

/* Routes: the one for method and path, or NULL with allow[] filled with
 * the methods the path has (empty: an unknown path). */
static const struct gw_api_route *
route_find(const struct gw_api_route *routes, const char *method, const char *path, char *id,
           size_t idsz, char *allow, size_t allowsz)
{
	size_t alen = 0;

	allow[0] = '\0';
	for (const struct gw_api_route *rt = routes; rt && rt->fn; rt++) {
		size_t ml;

		if (!gw_api_route_match(rt->pattern, path, id, idsz))
			continue;
		if (strcmp(rt->method, method) == 0)
			return rt;
		ml = strlen(rt->method);
		/* listed once */
		for (const char *p = allow; *p;) {
			size_t l = strcspn(p, ",");

			if (l == ml && memcmp(p, rt->method, l) == 0)
				goto next;
			p += l;
			while (*p == ',' || *p == ' ')
				p++;
		}
		if (alen + ml + 3 < allowsz) {
			alen += (size_t)snprintf(allow + alen, allowsz - alen, "%s%s",
			                         alen ? ", " : "", rt->method);
		}
	next:;
	}
	if (id && idsz)
		id[0] = '\0';
	return NULL;
}

/* A request field for the browser checks: its first value and count. */
static struct gw_site_field
site_field(const struct gw_h1_head *h, const char *name)
{
	const struct gw_h1_header *f = gw_h1_header_find(h, name);
	struct gw_site_field out = {0};

	if (!f)
		return out;
	out.p = f->value.p;
	out.len = f->value.len;
	for (; f; f = gw_h1_header_next(h, f, name))
		out.n++;
	return out;
}

/* A web page's request (site.h): answered 403 before anything else is
 * looked at, and the connection closed after it, its body unread (only
 * drained by the linger). True when refused. */
static bool
refuse_browser(struct gw_api_req *r)
{
	struct gw_api *a = r->c->api;
	struct gw_site_self self = {.is_unix = r->c->is_unix,
	                            .addr = (const struct sockaddr *)&a->tcp_ss};
	struct gw_site_field host = site_field(r->head, "Host");
	struct gw_site_field origin = site_field(r->head, "Origin");
	struct gw_site_field fetch = site_field(r->head, "Sec-Fetch-Site");
	enum gw_site_verdict v;
	char msg[512];

	v = gw_site_check(&self, &host, &origin, &fetch, msg, sizeof(msg));
	if (v == GW_SITE_OK)
		return false;
	gw_log_debug("api: refused: %s", msg);
	gw_metrics_api_browser_refused(gw_site_code(v));
	r->keep = false;
	send_error(r, 403, gw_site_code(v), msg, NULL, 0);
	return true;
}

static void
serve(struct gw_api_req *r)
{
	struct gw_api *a = r->c->api;
	const struct gw_h1_head *h = r->head;
	const struct gw_api_route *rt;
	struct gw_api_req_info info = {0};
	struct gw_h1_target t;
	struct gw_h1_error terr;
	char msg[256], id[API_ID_MAX + 1], allow[128];
	const char *tenant = NULL;
	enum gw_api_role role = GW_API_TENANT;
	struct conf *cf = NULL;
	int rc;

	if (h->method.len < sizeof(r->method)) {
		memcpy(r->method, h->method.p, h->method.len);
		r->method[h->method.len] = '\0';
	}
	if (refuse_browser(r))
		return;
	if (h->target.len == 0 || h->target.p[0] != '/' ||
	    gw_h1_target_parse(h->target.p, h->target.len, h->method_id, &t, &terr) < 0 ||
	    t.form != GW_H1_TARGET_ORIGIN) {
		send_error(r, 400, "bad-request", "the request target must be a path", NULL, 0);
		return;
	}
	r->path = malloc(t.path.len + 1);
	if (!r->path) {
		send_error(r, 500, "internal", "out of memory", NULL, 0);
		return;
	}
	if (gw_api_pct_decode(t.path.p, t.path.len, r->path, t.path.len + 1) < 0) {
		send_error(r, 400, "bad-request", "bad percent-encoding in the path", NULL, 0);
		return;
	}
	if (t.has_query && parse_query(r, t.query.p, t.query.len, msg, sizeof(msg)) < 0) {
		send_error(r, 400, "bad-request", msg, NULL, 0);
		return;
	}

	cf = a->conf_fn(a->arg);
	if (!cf) {
		send_error(r, 500, "internal", "no configuration is loaded", NULL, 0);
		return;
	}
	rc = authenticate(r, cf, &role, &tenant, msg, sizeof(msg));
	if (rc == -EINVAL) {
		send_error(r, 400, "bad-request", msg, NULL, 0);
		goto out;
	}
	if (rc < 0) {
		send_error(r, 401, "unauthorized",
		           "send Authorization: Bearer with the operator token or a tenant key",
		           NULL, 0);
		goto out;
	}

	rt = route_find(a->routes, r->method, r->path, id, sizeof(id), allow, sizeof(allow));
	if (!rt && !allow[0]) {
		send_error(r, 404, "not-found", "no such endpoint", NULL, 0);
		goto out;
	}
	if (!rt) {
		struct api_hdr ah = {"Allow", allow};

		snprintf(msg, sizeof(msg), "%s is not allowed here; use %s", r->method, allow);
		send_error(r, 405, "method-not-allowed", msg, &ah, 1);
		goto out;
	}
	if (rt->operator_only && role != GW_API_OPERATOR) {
		send_error(r, 403, "operator-only", "this endpoint needs the operator token", NULL,
		           0);
		goto out;
	}
	if (!rt->raw_body && read_whole(r) < 0)
		goto out;

	info.method = r->method;
	info.path = r->path;
	info.id = id[0] ? id : NULL;
	info.role = role;
	info.tenant = tenant;
	info.conf = cf;
	rt->fn(r, &info, a->arg);
	if (!r->answered)
		send_error(r, 500, "internal", "the handler gave no answer", NULL, 0);
out:
	conf_unref(cf);
}

/* After the answer: skips what is left of the body so that the next
 * request can be read, or gives up the connection. */
static void
finish(struct gw_api_req *r)
{
	char scratch[4096];
	size_t skipped = 0;
	ssize_t k;

	if (r->streaming && !r->stream_ended)
		r->keep = false; /* the client sees a truncated stream */
	if (!r->keep || r->io_failed || r->body_done || r->body_err)
		return;
	if (r->head->expect_100_continue && !r->continue_sent) {
		/* The client may be waiting for a 100 it will not get. */
		r->keep = false;
		return;
	}
	while ((k = body_read(r, scratch, sizeof(scratch))) > 0) {
		skipped += (size_t)k;
		if (skipped > API_DRAIN_MAX) {
			r->keep = false;
			return;
		}
	}
	if (k < 0)
		r->keep = false;
}

static bool
stopping(struct gw_api *a)
{
	bool s;

	pthread_mutex_lock(&a->mu);
	s = a->stopping;
	pthread_mutex_unlock(&a->mu);
	return s;
}

/* Serves one request. False when the connection is to be closed. */
static bool
serve_one(struct api_conn *c)
{
	struct gw_h1_parser p;
	struct gw_api_req r;
	enum gw_h1_result rc = GW_H1_AGAIN;

	/* Pipelined bytes of the next request move to the front. */
	if (c->off > 0) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	gw_h1_parser_init(&p, GW_H1_REQUEST, API_MAX_HEAD);
	for (;;) {
		if (c->len > 0)
			rc = gw_h1_head_parse(&p, c->buf, c->len, &c->head);
		if (rc != GW_H1_AGAIN)
			break;
		if (conn_recv(c) <= 0)
			return false; /* closed, idle too long, or gone */
	}

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.head = &c->head;
	if (rc == GW_H1_ERROR) {
		bool big = c->head.err.reason == GW_R_HEADER_TOO_LARGE;

		r.keep = false;
		snprintf(r.method, sizeof(r.method), "-");
		send_error(&r, big ? 431 : 400, big ? "too-large" : "bad-request",
		           c->head.err.msg ? c->head.err.msg : "malformed request", NULL, 0);
		return false;
	}
	c->off = c->head.head_len;
	r.keep = c->head.keep_alive && c->head.version_minor >= 1 && !stopping(c->api);
	gw_h1_body_init(&r.body, c->head.body, c->head.content_length, GW_H1_DECODE);
	r.body_done = c->head.body == GW_H1_BODY_NONE ||
	              (c->head.body == GW_H1_BODY_LENGTH && c->head.content_length == 0);

	serve(&r);
	finish(&r);
	gw_log_debug("api: %s %s %u", r.method, r.path ? r.path : "-", r.status);

	free(r.path);
	free(r.qbuf);
	if (r.whole)
		explicit_bzero(r.whole, r.whole_len);   /* (credentials, tokens) */
	free(r.whole);
	if (r.keep && !r.io_failed)
		return true;
	c->linger =
	    !r.io_failed && !r.body_done && r.body_err != -ECONNRESET && r.body_err != -ETIMEDOUT;
	return false;
}

/* Closing while the client still sends a body would make the kernel
 * reset the connection, and the client could lose the answer (a 413):
 * stop sending, then read and drop what comes for a short while. */
static void
linger_close(struct api_conn *c)
{
	struct timespec t0, t;
	size_t dropped = 0;
	char scratch[16384];

	if (shutdown(c->fd, SHUT_WR) < 0)
		return;
	set_timeouts(c->fd, API_LINGER_MS);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (dropped < API_LINGER_MAX && !stopping(c->api)) {
		ssize_t k = recv(c->fd, scratch, sizeof(scratch), 0);

		if (k <= 0 && !(k < 0 && errno == EINTR))
			break;
		if (k > 0)
			dropped += (size_t)k;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
		    API_LINGER_MS)
			break;
	}
}

static void *
conn_main(void *arg)
{
	struct api_conn *c = arg;
	struct gw_api *a = c->api;

	while (serve_one(c))
		;
	if (c->linger)
		linger_close(c);
	pthread_mutex_lock(&a->mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		a->live = c->next;
	if (c->next)
		c->next->prev = c->prev;
	a->nlive--;
	/* Closed under the lock: gw_api_stop() never shuts down a reused fd. */
	close(c->fd);
	c->fd = -1;
	c->prev = NULL;
	c->next = a->dead;
	a->dead = c;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Joins the connection threads that ended. */
static void
reap(struct gw_api *a)
{
	struct api_conn *d;

	pthread_mutex_lock(&a->mu);
	d = a->dead;
	a->dead = NULL;
	pthread_mutex_unlock(&a->mu);
	while (d) {
		struct api_conn *next = d->next;

		pthread_join(d->thread, NULL);
		free(d);
		d = next;
	}
}

static void
answer_busy(int fd)
{
	static const char body[] = "{\"error\":{\"code\":\"busy\",\"message\":\"too many API "
	                           "connections, retry later\"}}\n";
	char head[256];
	struct iovec iov[2];

	snprintf(head, sizeof(head),
	         "HTTP/1.1 503 Service Unavailable\r\n"
	         "Content-Type: application/json\r\n"
	         "Content-Length: %zu\r\n"
	         "Sluice-Reason: busy\r\n"
	         "Connection: close\r\n"
	         "\r\n",
	         sizeof(body) - 1);
	iov[0] = (struct iovec){.iov_base = head, .iov_len = strlen(head)};
	iov[1] = (struct iovec){.iov_base = unconst(body), .iov_len = sizeof(body) - 1};

	set_timeouts(fd, API_BUSY_TIMEOUT_MS);
	(void)send_all(fd, iov, 2);
	shutdown(fd, SHUT_WR);
	close(fd);
}

static void
accept_one(struct api_listener *l)
{
	struct gw_api *a = l->api;
	struct api_conn *c;
	int fd, one = 1, rc;

	fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		char what[sizeof(a->sock_path) + 8];

		snprintf(what, sizeof(what), "API %s", l->is_unix ? a->sock_path : a->tcp_addr);
		/* Out of descriptors or memory: the listener stays readable, so
		 * poll() would wake at once; wait out a back-off instead (or
		 * gw_api_stop()). The ended connections are joined meanwhile:
		 * their threads hold no descriptor, but their memory is due. */
		if (gw_accept_failed(errno, what) == GW_ACCEPT_PAUSE) {
			reap(a);
			(void)poll(&(struct pollfd){.fd = a->wake_fd, .events = POLLIN}, 1,
				   (int)gw_accept_backoff_next(&l->backoff));
		}
		return;
	}
	gw_accept_ok();
	gw_accept_backoff_reset(&l->backoff);
	reap(a);
	set_timeouts(fd, API_IDLE_TIMEOUT_MS);
	if (!l->is_unix)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		pthread_mutex_unlock(&a->mu);
		close(fd);
		return;
	}
	if (a->nlive >= API_MAX_CONNS) {
		pthread_mutex_unlock(&a->mu);
		answer_busy(fd);
		return;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		pthread_mutex_unlock(&a->mu);
		gw_log_errx("api: out of memory for a connection");
		close(fd);
		return;
	}
	c->api = a;
	c->fd = fd;
	c->is_unix = l->is_unix;
	c->linger = false;
	c->off = c->len = 0;
	c->prev = NULL;
	c->next = a->live;
	if (a->live)
		a->live->prev = c;
	a->live = c;
	a->nlive++;
	rc = pthread_create(&c->thread, NULL, conn_main, c);
	if (rc != 0) {
		a->live = c->next;
		if (a->live)
			a->live->prev = NULL;
		a->nlive--;
		pthread_mutex_unlock(&a->mu);
		gw_log_errx("api: cannot start a connection thread: %s", strerror(rc));
		close(fd);
		free(c);
		return;
	}
	pthread_mutex_unlock(&a->mu);
}

static void *
listener_main(void *arg)
{
	struct api_listener *l = arg;
	struct gw_api *a = l->api;

	for (;;) {
		struct pollfd pfd[2] = {
		    {.fd = l->fd, .events = POLLIN},
		    {.fd = a->wake_fd, .events = POLLIN},
		};

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			gw_log_err("api: poll");
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents)
			accept_one(l);
	}
	return NULL;
}

/* ---- start and stop ------------------------------------------------- */

static void
format_addr(const struct sockaddr_storage *ss, char *out, size_t outsz)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(out, outsz, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(out, outsz, "%s:%u", host, ntohs(s4->sin_port));
	}
}

static int
open_tcp(struct gw_api *a, const struct conf_hostport *hp, char *err, size_t errsz)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int fd, one = 1;

	if (hp->is_ip && hp->addrlen > 0 && hp->addrlen <= sizeof(ss)) {
		memcpy(&ss, &hp->addr, hp->addrlen);
		sl = hp->addrlen;
	} else if (hp->host && strcasecmp(hp->host, "localhost") == 0) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(hp->port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s4);
	} else {
		snprintf(err, errsz,
		         "api.listen %s: not an IP address; write one such as 127.0.0.1:8080",
		         hp->host ? hp->host : "?");
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, API_BACKLOG) < 0)
		goto fail;
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	format_addr(&ss, a->tcp_addr, sizeof(a->tcp_addr));
	a->tcp_ss = ss;
	a->lis[a->nlis++] = (struct api_listener){.api = a, .fd = fd, .is_unix = false};
	return 0;
fail : {
	int e = errno;

	format_addr(&ss, a->tcp_addr, sizeof(a->tcp_addr));
	snprintf(err, errsz, "api.listen %s: %s", a->tcp_addr, strerror(e));
	a->tcp_addr[0] = '\0';
	if (fd >= 0)
		close(fd);
	return -e;
}
}

/* mkdir -p of path's directory, each new one 0755. */
static int
mkdir_parents(const char *path)
{
	char d[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(d, sizeof(d), "%s", path);
	slash = strrchr(d, '/');
	if (!slash || slash == d)
		return 0;
	*slash = '\0';
	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(d, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int
open_unix(struct gw_api *a, const char *path, char *err, size_t errsz)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd = -1, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errsz, "api.socket %s: longer than %zu bytes", path,
		         sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path));
	rc = mkdir_parents(path);
	if (rc < 0) {
		snprintf(err, errsz, "api.socket %s: cannot create its directory: %s", path,
		         strerror(-rc));
		return rc;
	}
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errsz,
			         "api.socket %s: exists and is not a socket; remove it or "
			         "set another path",
			         path);
			return -EEXIST;
		}
		/* A socket file left by a daemon that died: nobody answers. */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (probe >= 0) {
			bool live = connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
			            errno == EAGAIN;

			close(probe);
			if (live) {
				snprintf(err, errsz,
				         "api.socket %s: in use by another process (is "
				         "sluiced already running?)",
				         path);
				return -EADDRINUSE;
			}
		}
		if (unlink(path) < 0 && errno != ENOENT)
			goto fail;
	} else if (errno != ENOENT) {
		goto fail;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	/* Nobody can connect before listen(): the mode is right by then. */
	if (chmod(path, 0600) < 0 || stat(path, &st) < 0 || listen(fd, API_BACKLOG) < 0) {
		int e = errno;

		unlink(path);
		errno = e;
		goto fail;
	}
	snprintf(a->sock_path, sizeof(a->sock_path), "%s", path);
	a->have_sock = true;
	a->sock_dev = st.st_dev;
	a->sock_ino = st.st_ino;
	a->lis[a->nlis++] = (struct api_listener){.api = a, .fd = fd, .is_unix = true};
	return 0;
fail:
	rc = -errno;
	snprintf(err, errsz, "api.socket %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

struct gw_api *
gw_api_start(const struct conf *c, const struct gw_api_route *routes, gw_api_conf_fn conf_fn,
             void *arg, char *err, size_t errsz)
{
	struct gw_api *a = calloc(1, sizeof(*a));
	sigset_t all, old;

	if (!a) {
		snprintf(err, errsz, "api: out of memory");
		return NULL;
	}
	a->routes = routes;
	a->conf_fn = conf_fn;
	a->arg = arg;
	a->wake_fd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	if (a->wake_fd < 0) {
		snprintf(err, errsz, "api: eventfd: %s", strerror(errno));
		goto fail;
	}
	if (c->api.listen.set && open_tcp(a, &c->api.listen, err, errsz) < 0)
		goto fail;
	if (c->api.socket && open_unix(a, c->api.socket, err, errsz) < 0)
		goto fail;

	/* The API's threads take no signals: the main loop handles them. */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 0; i < a->nlis; i++) {
		int rc = pthread_create(&a->lis[i].thread, NULL, listener_main, &a->lis[i]);

		if (rc != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			snprintf(err, errsz, "api: cannot start a thread: %s", strerror(rc));
			gw_api_stop(a);
			return NULL;
		}
		a->lis[i].running = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (size_t i = 0; i < a->nlis; i++) {
		if (a->lis[i].is_unix)
			gw_log_info("api: listening on unix:%s", a->sock_path);
		else
			gw_log_info("api: listening on %s", a->tcp_addr);
	}
	return a;
fail:
	gw_api_stop(a);
	return NULL;
}

void
gw_api_stop(struct gw_api *a)
{
	uint64_t one = 1;
	struct stat st;

	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	pthread_mutex_unlock(&a->mu);
	if (a->wake_fd >= 0)
		(void)!write(a->wake_fd, &one, sizeof(one));
	for (size_t i = 0; i < a->nlis; i++) {
		if (a->lis[i].running)
			pthread_join(a->lis[i].thread, NULL);
		close(a->lis[i].fd);
	}

	/* Every connection: blocked reads and writes return at once, and
	 * handlers see their writes fail. */
	pthread_mutex_lock(&a->mu);
	for (struct api_conn *c = a->live; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	while (a->nlive > 0)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
	reap(a);

	/* Only the socket file this server made (a new daemon may own it). */
	if (a->have_sock && lstat(a->sock_path, &st) == 0 && st.st_dev == a->sock_dev &&
	    st.st_ino == a->sock_ino)
		unlink(a->sock_path);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

const char *
gw_api_tcp_address(const struct gw_api *a)
{
	return a ? a->tcp_addr : "";
}

int
gw_api_req_fd(const struct gw_api_req *r)
{
	return r->c->fd;
}

/* api.h: the REST API's HTTP/1.1 server (api.listen, api.socket).
 *
 * One accept thread per listener and one thread per connection, with
 * blocking I/O and timeouts: an API request may run a command for minutes
 * or stream a file, and a thread that blocks on it costs nothing to the
 * doors (which have their own workers). Connections are capped
 * (API_MAX_CONNS; the next one is answered 503 and closed). Requests are
 * parsed with the doors' strict parser (http1.h), keep-alive is honoured,
 * and every error is JSON: {"error": {"code": "...", "message": "..."}}.
 *
 * A web page's request is refused (403) before anything else, the
 * target, the token or the body, is looked at (site.h): a cross-site
 * Sec-Fetch-Site, a foreign Origin, or on TCP a Host that is not the
 * listener's own address or localhost (DNS rebinding).
 *
 * Authentication happens before a handler runs:
 *  - "Authorization: Bearer T" where T is the operator token or a
 *    tenant's key, compared in constant time against every one of them;
 *  - on the unix socket (mode 0600, so only its owner can connect), a
 *    request without Authorization is the operator;
 *  - no token on TCP, or an unknown one: 401 (WWW-Authenticate: Bearer);
 *  - a tenant on an operator-only route: 403.
 *
 * Routing is by method and path pattern (a "{id}" segment matches one
 * segment of [A-Za-z0-9_-], 1..48 bytes); an unknown path is 404, a known
 * path with another method 405 (with Allow).
 */
#ifndef SLUICE_GW_API_H
#define SLUICE_GW_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct conf;
struct conf_tenant;
struct json_t;
struct gw_api;
struct gw_api_req;

#define API_MAX_CONNS 512
#define API_MAX_BODY (1u << 20)         /* a JSON body; files stream */
#define API_IDLE_TIMEOUT_MS 60000       /* between requests, and per read */

enum gw_api_role {
	GW_API_TENANT = 0,
	GW_API_OPERATOR,
};

/* What a handler gets, valid for the call. */
struct gw_api_req_info {
	const char *method;             /* "GET", ... */
	const char *path;               /* percent-decoded, no query */
	const char *id;                 /* the "{id}" segment, or NULL */
	enum gw_api_role role;
	const char *tenant;             /* the tenant's name; NULL for the operator */
	const struct conf *conf;        /* the configuration the request was
					   authenticated against (a reference
					   held for the request) */
};

/* A handler answers by calling exactly one of gw_api_reply_*() or by
 * streaming (gw_api_stream_begin(), _write(), _end()). Returning without
 * an answer is a 500 "internal". */
typedef void (*gw_api_handler)(struct gw_api_req *r, const struct gw_api_req_info *i,
			       void *arg);

struct gw_api_route {
	const char *method;
	const char *pattern;            /* "/v1/sandboxes/{id}/exec" */
	bool operator_only;
	bool raw_body;                  /* the handler reads the body itself
					   (gw_api_body_read); otherwise it is
					   read whole, up to API_MAX_BODY (413
					   beyond), before the handler runs */
	gw_api_handler fn;
};

/* The configuration of the moment: a new reference (conf_unref() it).
 * Called once per request. */
typedef struct conf *(*gw_api_conf_fn)(void *arg);

/* Starts the listeners of c->api (TCP on api.listen when set, the unix
 * socket at api.socket when set: its parent directory is created 0755,
 * a stale socket replaced, the socket made 0600) and their threads.
 * routes (NULL-fn terminated) and arg are borrowed for the server's life.
 * NULL with one line in err. */
struct gw_api *gw_api_start(const struct conf *c, const struct gw_api_route *routes,
			    gw_api_conf_fn conf_fn, void *arg, char *err, size_t errsz);
/* Stops accepting, shuts every connection down, joins every thread,
 * removes the unix socket. NULL is fine. It waits for running handlers
 * to return, so never call it from one. */
void gw_api_stop(struct gw_api *a);

/* The address the TCP listener is bound to ("127.0.0.1:8080"), for the
 * start-up log line ("" when none). */
const char *gw_api_tcp_address(const struct gw_api *a);

/* ---- the request ------------------------------------------------------ */

/* A query parameter's percent-decoded value, or NULL. A parameter given
 * twice makes the request a 400 before the handler runs. */
const char *gw_api_query(const struct gw_api_req *r, const char *name);
/* A request header's value (not NUL-terminated: *len), or NULL. */
const char *gw_api_header(const struct gw_api_req *r, const char *name, size_t *len);
/* The whole body of a route without raw_body ("" and 0 when none). */
const char *gw_api_body(const struct gw_api_req *r, size_t *len);
/* raw_body routes: the body's declared length, or -1 when chunked. */
int64_t gw_api_body_length(const struct gw_api_req *r);
/* raw_body routes: reads up to n bytes of the body (Content-Length or
 * chunked, decoded). Returns the bytes read, 0 at the end of the body, or
 * -errno (-EPROTO for a malformed body, -ETIMEDOUT, -ECONNRESET). */
ssize_t gw_api_body_read(struct gw_api_req *r, void *buf, size_t n);
/* Parses the body as one JSON object. On failure answers 400 bad-json (or
 * 415 when Content-Type is present and not application/json) and returns
 * NULL. A new reference. */
struct json_t *gw_api_body_json(struct gw_api_req *r);
/* True if the client's Accept names `type` ("application/x-ndjson"). */
bool gw_api_accepts(const struct gw_api_req *r, const char *type);

/* The connection's socket, for a handler that waits on something else
 * (an agent) and wants to notice the client leaving: poll it for
 * POLLRDHUP only (never read it), unless gw_api_upgrade() gave it away. */
int gw_api_req_fd(const struct gw_api_req *r);

/* ---- answers ---------------------------------------------------------- */

/* Sends `status` with the JSON object (steals the reference; NULL sends
 * an empty body). */
void gw_api_reply_json(struct gw_api_req *r, unsigned status, struct json_t *body);
/* Sends {"error": {"code": code, "message": ...}} with `status`; an extra
 * header "Sluice-Reason: code" too. */
void gw_api_reply_error(struct gw_api_req *r, unsigned status, const char *code,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Like gw_api_reply_error() with one more header (426's Upgrade or
 * Sec-WebSocket-Version). */
void gw_api_reply_error_hdr(struct gw_api_req *r, unsigned status, const char *code,
			    const char *hname, const char *hvalue, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Switches protocols: sends "101 Switching Protocols" with the headers
 * hdrs[0..2*nhdrs) (name, value, name, value, ...), after which the
 * handler owns the connection (gw_api_req_fd(): blocking, with the API's
 * timeouts, which the handler may change; it reads and writes it
 * itself) until it returns, when the connection is closed. *pre and *prelen:
 * bytes the client sent after the request head that were read already
 * (the new protocol's first bytes; valid for the call). 0 or -errno. */
int gw_api_upgrade(struct gw_api_req *r, const char *const *hdrs, size_t nhdrs, const void **pre,
		   size_t *prelen);
/* Sends {"error": error_obj} with `status` (steals the reference): for
 * errors with more than a code and a message, such as a "details" array.
 * The Sluice-Reason header repeats error_obj's "code". */
void gw_api_reply_error_json(struct gw_api_req *r, unsigned status, struct json_t *error_obj);
/* Sends a body of any type as it is (metrics: "text/plain; version=0.0.4"). */
void gw_api_reply_raw(struct gw_api_req *r, unsigned status, const char *content_type,
		      const void *body, size_t len);

/* Streams: the head with Transfer-Encoding: chunked, then chunks. Each
 * returns 0 or -errno (the client went away: stop working for it). A
 * stream must be ended with gw_api_stream_end(). */
int gw_api_stream_begin(struct gw_api_req *r, unsigned status, const char *content_type);
int gw_api_stream_write(struct gw_api_req *r, const void *p, size_t len);
/* One JSON value and "\n" (NDJSON); steals the reference. */
int gw_api_stream_json(struct gw_api_req *r, struct json_t *v);
int gw_api_stream_end(struct gw_api_req *r);

/* ---- pure helpers (unit-tested) --------------------------------------- */

/* Constant-time equality of two byte strings of possibly different
 * lengths (the time depends on neither content nor which is longer). */
bool gw_api_token_eq(const char *a, size_t alen, const char *b, size_t blen);

/* Matches path against pattern; on a match with an "{id}" segment copies
 * it into id (idsz >= 49). True on a match. */
bool gw_api_route_match(const char *pattern, const char *path, char *id, size_t idsz);

/* Percent-decodes [s, s+len) into out, NUL-terminated (a NUL is refused,
 * as is a bad or truncated escape; '+' stays '+'): 0, -EINVAL, or -ENOSPC
 * when out is too small (outsz >= len + 1 always suffices). */
int gw_api_pct_decode(const char *s, size_t len, char *out, size_t outsz);

#endif

/* http1.h: a strict, pure, resumable HTTP/1.1 message parser (RFC 9112).
 *
 * Three parts, none doing I/O, allocating or logging, all safe to use from
 * any thread as long as each object has one user at a time:
 *
 *  - the head parser: the caller keeps the bytes received so far in its own
 *    buffer and calls gw_h1_head_parse() after each read;
 *  - the body decoder: fed the bytes after the head in pieces of any size,
 *    it hands back payload spans in place (or, in RAW mode, the validated
 *    input itself, for relaying a chunked body verbatim);
 *  - helpers: request-target classification, header lookup, hop-by-hop
 *    test, and a bounded head writer.
 *
 * Errors carry an enum gw_reason (GW_R_BAD_REQUEST, GW_R_HEADER_TOO_LARGE;
 * a request's Host field and target parsing also GW_R_USERINFO,
 * GW_R_BAD_HOST, GW_R_NON_ASCII_HOST, GW_R_BAD_PORT; target parsing also
 * GW_R_UNSUPPORTED) and a static message. The parser uses the
 * same reasons for requests and responses: a caller parsing an upstream
 * response maps any error to GW_R_UPSTREAM_BAD_RESPONSE itself.
 */
#ifndef SLUICE_GW_HTTP1_H
#define SLUICE_GW_HTTP1_H

#include "http1-t.h"

/* ---- head ---------------------------------------------------------- */

/* Prepares p for one message head of `kind`; a head longer than
 * `max_head_bytes` (leading empty lines included) is refused with
 * GW_R_HEADER_TOO_LARGE. Call again before each new message. */
void gw_h1_parser_init(struct gw_h1_parser *p, enum gw_h1_kind kind,
		       size_t max_head_bytes);

/* Responses only: the method of the request this response answers, which
 * decides framing (HEAD: no body; CONNECT: a 2xx has no body, the tunnel
 * starts after the head). Default GW_H1_M_OTHER, framed like GET. */
void gw_h1_parser_set_request_method(struct gw_h1_parser *p,
				     enum gw_h1_method m);

/* Parses the head at the start of buf[0..len), the bytes received so far.
 * Between calls the caller may append to the buffer or move it, but must
 * keep the bytes already given unchanged. Returns:
 *  GW_H1_AGAIN  more bytes needed; the next call resumes scanning where
 *               this one stopped, so finding the end costs O(new bytes);
 *  GW_H1_DONE   *out is filled, out->head_len bytes belong to the head
 *               (the body, or the next message, starts there); spans in
 *               *out point into buf;
 *  GW_H1_ERROR  out->err says why; the message must be refused.
 * Refused besides bad syntax and ambiguous framing: a Connection field
 * naming Content-Length, Transfer-Encoding, Host, Max-Forwards, Via or
 * Forwarded; in a request, a Host that is not empty or host[:port] (no
 * userinfo, ASCII), a Max-Forwards that is not one 1*DIGIT, and a
 * CONNECT with a body (Transfer-Encoding, or Content-Length above 0).
 * After DONE or ERROR, call gw_h1_parser_init() before the next head.
 * A 1xx response is a complete head with no body: parse the next head for
 * the final response. *out is only written on DONE or ERROR. */
enum gw_h1_result gw_h1_head_parse(struct gw_h1_parser *p, const char *buf,
				   size_t len, struct gw_h1_head *out);

/* First header named `name` (case-insensitive), or NULL. */
const struct gw_h1_header *gw_h1_header_find(const struct gw_h1_head *h,
					     const char *name);
/* The next header after `prev` (a pointer into h->headers) with the same
 * name as `name`, or NULL; prev NULL starts from the first. */
const struct gw_h1_header *gw_h1_header_next(const struct gw_h1_head *h,
					     const struct gw_h1_header *prev,
					     const char *name);

/* The caller moved the bytes h was parsed from, from[0..n), to to[0..n)
 * (a bigger buffer): every span of h into the old bytes now points at the
 * same place in the new ones; spans elsewhere are left alone. Call while
 * the old bytes are still allocated (their address is compared), then
 * free them. */
void gw_h1_head_rebase(struct gw_h1_head *h, const char *from, size_t n,
		       const char *to);

/* True if the field `name[0..len)` is hop-by-hop for this head: one of
 * Connection, Proxy-Connection, Keep-Alive, TE, Trailer, Transfer-Encoding,
 * Upgrade, Proxy-Authorization, Proxy-Authenticate, or a name listed in
 * the head's Connection fields. A proxy drops these when rebuilding. */
bool gw_h1_hop_by_hop(const struct gw_h1_head *h, const char *name,
		      size_t len);

/* True if the field `name[0..len)` tells who sent a message or through
 * what, and a sender could forge it: for a request, Forwarded,
 * X-Forwarded-*, X-Real-IP, X-Upstream-*, Sluice-* and the other
 * client-address and URL-override fields origins are known to trust
 * (True-Client-IP, X-Original-URL, ...); for a response, Sluice-* (what
 * sluice says in its own answers). A proxy drops these when rebuilding. */
bool gw_h1_spoofable(enum gw_h1_kind kind, const char *name, size_t len);

/* True if the token `tok` (case-insensitive) is among the head's
 * Connection tokens. */
bool gw_h1_conn_has(const struct gw_h1_head *h, const char *tok);

/* True if the head's method is `name` in any case: methods are
 * case-sensitive, but an origin may take "trace" for TRACE. */
bool gw_h1_method_ieq(const struct gw_h1_head *h, const char *name);

/* Method name ("" for OTHER) and lookup (case-sensitive). */
const char *gw_h1_method_name(enum gw_h1_method m);
enum gw_h1_method gw_h1_method_parse(const char *s, size_t len);

/* ---- request-target ------------------------------------------------ */

/* Classifies the request-target s[0..len) for method m: origin-form
 * (not for CONNECT), absolute-form with scheme http or https (any case),
 * authority-form host:port (CONNECT only, port required), asterisk-form
 * (OPTIONS only). Checks syntax only: no percent-decoding, no host policy.
 * Returns 0 with *out filled (spans into s), or -EINVAL with *err set:
 * GW_R_USERINFO for user@host, GW_R_BAD_PORT, GW_R_BAD_HOST,
 * GW_R_NON_ASCII_HOST, GW_R_UNSUPPORTED for another scheme,
 * GW_R_BAD_REQUEST for anything else (a fragment, a wrong form, ...). */
int gw_h1_target_parse(const char *s, size_t len, enum gw_h1_method m,
		       struct gw_h1_target *out, struct gw_h1_error *err);

/* gw_h1_head_rebase() for a classified target: its host, path and query
 * (a door may have pointed the host at a buffer of its own: left alone). */
void gw_h1_target_rebase(struct gw_h1_target *t, const char *from, size_t n,
			 const char *to);

/* ---- body ---------------------------------------------------------- */

/* Prepares b for a body of `kind` (content_length for GW_H1_BODY_LENGTH),
 * usually head->body and head->content_length. */
void gw_h1_body_init(struct gw_h1_body *b, enum gw_h1_body_kind kind,
		     uint64_t content_length, enum gw_h1_body_mode mode);

/* Feeds in[0..len), the next bytes after the head (or after what earlier
 * calls consumed). Input may be split at any byte; b keeps the framing
 * state, the caller never re-feeds consumed bytes. Sets *consumed (bytes of
 * `in` used) and *data, a span inside `in`:
 *  - GW_H1_DECODE: the next run of payload bytes (possibly empty); at most
 *    one run per call, so call again with in + *consumed while bytes
 *    remain. Framing, extensions and trailers are validated and dropped.
 *  - GW_H1_RAW: data = in[0..*consumed), framing included, to forward as
 *    is; a call consumes all it can.
 * Trailer fields are checked like a head's, and refused (RFC 9110 6.5.1)
 * when they frame, route or authenticate the message or describe its
 * content (Content-Length, Transfer-Encoding, Trailer, Content-*, Host,
 * Connection and the other hop-by-hop fields, Max-Forwards, Expect,
 * Authorization, Cookie, Set-Cookie, ...) or are gw_h1_spoofable() for a
 * request: never relayed, whatever a recipient would make of them.
 * Returns GW_H1_AGAIN (not finished; if *consumed < len call again, else
 * wait for more bytes), GW_H1_DONE (the message ended within the consumed
 * bytes; in[*consumed..len) belongs to the next message; data may still be
 * non-empty: use it first), or GW_H1_ERROR (b->err says why; *consumed is
 * the offset of the offending byte, data is empty). Calls after DONE
 * return DONE and consume nothing. */
enum gw_h1_result gw_h1_body_feed(struct gw_h1_body *b, const char *in,
				  size_t len, size_t *consumed,
				  struct gw_h1_span *data);

/* The peer closed the connection. Returns GW_H1_DONE for an UNTIL_CLOSE
 * body (or one already done), else GW_H1_ERROR ("truncated body"). */
enum gw_h1_result gw_h1_body_eof(struct gw_h1_body *b);

const char *gw_h1_body_state_name(enum gw_h1_body_state s);

/* ---- writer -------------------------------------------------------- */

/* The writer fills buf[0..size); nothing is NUL-terminated. Each write
 * checks its input (tokens, no CR/LF/controls: -EINVAL) and the space left
 * (-ENOSPC); the first failure sticks in w->err. */
void gw_h1_writer_init(struct gw_h1_writer *w, char *buf, size_t size);
void gw_h1_write_request_line(struct gw_h1_writer *w, struct gw_h1_span method,
			      struct gw_h1_span target, unsigned version_minor);
void gw_h1_write_status_line(struct gw_h1_writer *w, unsigned status,
			     struct gw_h1_span text, unsigned version_minor);
void gw_h1_write_header(struct gw_h1_writer *w, struct gw_h1_span name,
			struct gw_h1_span value);
/* Writes the final CRLF. Returns 0 (w->len bytes written) or w->err. */
int gw_h1_write_end(struct gw_h1_writer *w);

#endif

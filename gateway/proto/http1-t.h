/* http1-t.h: types of the strict HTTP/1.1 message parser (RFC 9112).
 *
 * A message is a HEAD, parsed from a buffer the caller owns, plus a BODY
 * decoded as a stream: nothing here ever holds a whole message. Spans point
 * into the caller's bytes and live as long as those bytes do.
 */
#ifndef SLUICE_GW_HTTP1_T_H
#define SLUICE_GW_HTTP1_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reason-t.h"

#define GW_H1_MAX_HEADERS 128      /* header fields per head, and trailers */
#define GW_H1_MAX_CONN_TOKENS 32   /* tokens over all Connection fields */
#define GW_H1_MAX_EMPTY_LINES 4    /* CRLFs skipped before a start line */
#define GW_H1_MAX_CHUNK_LINE 4096  /* chunk-size line, extensions included */
#define GW_H1_MAX_TRAILER_BYTES 8192 /* whole trailer section */
#define GW_H1_TRAILER_NAME_KEPT 32  /* bytes of a trailer name kept to judge it */

/* What a parse step returns. */
enum gw_h1_result {
	GW_H1_AGAIN = 0,        /* need more bytes (or call again) */
	GW_H1_DONE,             /* head or body complete */
	GW_H1_ERROR,            /* refused: see the error struct */
};

enum gw_h1_kind {
	GW_H1_REQUEST = 0,
	GW_H1_RESPONSE,
};

/* Methods are case-sensitive (RFC 9110 9.1): "get" is OTHER. */
#define GW_H1_METHODS(X)                                                     \
	X(OTHER, "")                                                         \
	X(GET, "GET")                                                        \
	X(HEAD, "HEAD")                                                      \
	X(POST, "POST")                                                      \
	X(PUT, "PUT")                                                        \
	X(DELETE, "DELETE")                                                  \
	X(CONNECT, "CONNECT")                                                \
	X(OPTIONS, "OPTIONS")                                                \
	X(TRACE, "TRACE")                                                    \
	X(PATCH, "PATCH")

enum gw_h1_method {
#define GW_H1_METHOD_ENUM(id, name) GW_H1_M_##id,
	GW_H1_METHODS(GW_H1_METHOD_ENUM)
#undef GW_H1_METHOD_ENUM
	GW_H1_M__COUNT
};

/* How the body that follows a head is delimited (RFC 9112 6.3). */
enum gw_h1_body_kind {
	GW_H1_BODY_NONE = 0,    /* no body at all */
	GW_H1_BODY_LENGTH,      /* content_length bytes (may be 0) */
	GW_H1_BODY_CHUNKED,     /* chunked transfer coding */
	GW_H1_BODY_UNTIL_CLOSE, /* responses only: read until EOF */
};

/* Bytes borrowed from someone else's buffer; never NUL-terminated. */
struct gw_h1_span {
	const char *p;
	size_t len;
};

struct gw_h1_header {
	struct gw_h1_span name;
	struct gw_h1_span value;        /* leading/trailing OWS trimmed */
};

/* Why a parse failed. `msg` is a static string ("obs-fold", ...). */
struct gw_h1_error {
	enum gw_reason reason;
	const char *msg;
};

/* A parsed head. Every span points into the buffer given to
 * gw_h1_head_parse() and is valid while that buffer is unchanged. */
struct gw_h1_head {
	enum gw_h1_kind kind;
	size_t head_len;                /* bytes consumed, last CRLF included */
	unsigned version_minor;         /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */

	/* requests */
	struct gw_h1_span method;
	enum gw_h1_method method_id;
	struct gw_h1_span target;
	struct gw_h1_span host;         /* the Host value; has_host tells */
	bool has_host;

	/* responses */
	unsigned status;                /* 100..599 */
	struct gw_h1_span status_text;  /* reason-phrase, may be empty */

	struct gw_h1_header headers[GW_H1_MAX_HEADERS];
	size_t nheaders;

	/* framing, derived from the fields */
	enum gw_h1_body_kind body;
	uint64_t content_length;        /* for GW_H1_BODY_LENGTH */
	bool has_content_length;        /* a Content-Length field was present */
	bool has_transfer_encoding;

	/* connection management */
	bool keep_alive;        /* the connection may carry another message */
	bool conn_close;        /* "close" among the Connection tokens */
	bool upgrade;           /* an Upgrade field is present */
	bool expect_100_continue;
	/* requests: Max-Forwards (RFC 9110 7.6.2), 1*DIGIT, saturated */
	bool has_max_forwards;
	uint32_t max_forwards;
	struct gw_h1_span conn_tokens[GW_H1_MAX_CONN_TOKENS];
	size_t nconn_tokens;

	struct gw_h1_error err; /* set when parsing returned GW_H1_ERROR */
};

enum gw_h1_parser_state {
	GW_H1_PS_SCAN = 0,      /* looking for the end of the head */
	GW_H1_PS_DONE,
	GW_H1_PS_ERROR,
};

/* The head parser's memory between calls: how far it has scanned. */
struct gw_h1_parser {
	enum gw_h1_kind kind;
	enum gw_h1_parser_state state;
	enum gw_h1_method req_method;   /* responses: the request's method */
	size_t max_head;
	size_t scanned;         /* bytes examined so far */
	size_t line_start;      /* where the line being scanned starts */
	size_t start;           /* where the start line starts */
	bool have_start;
	unsigned empty_lines;   /* CRLFs skipped before the start line */
};

/* Request-target forms (RFC 9112 3.2). */
enum gw_h1_target_form {
	GW_H1_TARGET_ORIGIN = 0,        /* /path?query */
	GW_H1_TARGET_ABSOLUTE,          /* http://host:port/path?query */
	GW_H1_TARGET_AUTHORITY,         /* host:port, CONNECT only */
	GW_H1_TARGET_ASTERISK,          /* *, OPTIONS only */
};

enum gw_h1_scheme {
	GW_H1_SCHEME_NONE = 0,
	GW_H1_SCHEME_HTTP,
	GW_H1_SCHEME_HTTPS,
};

/* A classified request-target; spans point into the target given. */
struct gw_h1_target {
	enum gw_h1_target_form form;
	enum gw_h1_scheme scheme;       /* absolute-form only */
	struct gw_h1_span host;         /* absolute and authority forms */
	bool host_ipv6;                 /* [v6]; the span has no brackets */
	uint16_t port;                  /* explicit, or 80/443 by scheme */
	bool port_explicit;
	struct gw_h1_span path;         /* without query; "/" when empty */
	struct gw_h1_span query;        /* after '?', without it */
	bool has_query;
};

/* Body decoding: DECODE hands out payload bytes only; RAW hands out every
 * input byte (chunk framing and trailers included) once validated, for a
 * relay that forwards the chunked coding verbatim. */
enum gw_h1_body_mode {
	GW_H1_DECODE = 0,
	GW_H1_RAW,
};

#define GW_H1_BODY_STATES(X)                                                 \
	X(DATA, "data")                 /* payload bytes */                  \
	X(SIZE, "size")                 /* first hex digit of a chunk size */\
	X(SIZE_DIGITS, "size-digits")                                        \
	X(SIZE_WS, "size-ws")           /* BWS before a ';' */               \
	X(EXT, "ext")                   /* chunk extensions */               \
	X(SIZE_LF, "size-lf")                                                \
	X(DATA_CR, "data-cr")           /* CRLF after chunk data */          \
	X(DATA_LF, "data-lf")                                                \
	X(TRAILER, "trailer")           /* start of a trailer line */        \
	X(TRAILER_NAME, "trailer-name")                                      \
	X(TRAILER_VALUE, "trailer-value")                                    \
	X(TRAILER_LF, "trailer-lf")                                          \
	X(FINAL_LF, "final-lf")         /* LF of the last empty line */      \
	X(UNTIL_CLOSE, "until-close")                                        \
	X(DONE, "done")                                                      \
	X(ERROR, "error")

enum gw_h1_body_state {
#define GW_H1_BODY_STATE_ENUM(id, name) GW_H1_BS_##id,
	GW_H1_BODY_STATES(GW_H1_BODY_STATE_ENUM)
#undef GW_H1_BODY_STATE_ENUM
	GW_H1_BS__COUNT
};

/* The streamed body decoder; a few words of state, no buffer. */
struct gw_h1_body {
	enum gw_h1_body_kind kind;
	enum gw_h1_body_mode mode;
	enum gw_h1_body_state state;
	uint64_t remaining;     /* bytes left in the body or current chunk */
	uint64_t chunk_size;    /* size being read */
	unsigned hex_digits;
	size_t line_len;        /* bytes on the current chunk-size line */
	size_t trailer_bytes;
	size_t ntrailers;
	/* the start of the trailer name being read, to refuse the fields a
	 * trailer must not carry (gw_h1_body_feed()) */
	char tname[GW_H1_TRAILER_NAME_KEPT];
	size_t tname_len;       /* bytes of the name so far (may exceed tname) */
	uint64_t payload;       /* payload bytes seen so far */
	struct gw_h1_error err;
};

/* A bounded writer for serialising heads into a caller buffer. The first
 * failure sticks in `err` (-ENOSPC, -EINVAL); later writes are no-ops. */
struct gw_h1_writer {
	char *buf;
	size_t size;
	size_t len;
	int err;
};

#endif

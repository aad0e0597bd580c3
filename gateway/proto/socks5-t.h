/* socks5-t.h: types of the strict SOCKS5 parser (RFC 1928, RFC 1929).
 *
 * One struct gw_socks5_parser per client connection holds everything: the
 * phase, the position inside the message being read and the decoded fields
 * (method list, user name and password, destination). Nothing points into
 * the caller's bytes, so input may be dropped as soon as a call returns.
 */
#ifndef SLUICE_GW_SOCKS5_T_H
#define SLUICE_GW_SOCKS5_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reason-t.h"

#define GW_SOCKS5_VERSION 0x05
#define GW_SOCKS5_AUTH_VERSION 0x01     /* RFC 1929 sub-negotiation */
#define GW_SOCKS5_MAX_FIELD 255         /* methods, user, password, domain */
#define GW_SOCKS5_REPLY_MAX 22          /* 4 + 16 (IPv6) + 2 */

/* What a parse call returns. */
enum gw_socks5_result {
	GW_SOCKS5_AGAIN = 0,    /* need more bytes; all given were used */
	GW_SOCKS5_DONE,         /* message complete; see *consumed */
	GW_SOCKS5_ERROR,        /* refused: see parser.err */
};

/* Authentication methods (RFC 1928 3, IANA "SOCKS Methods"). */
enum gw_socks5_method {
	GW_SOCKS5_METHOD_NOAUTH = 0x00,
	GW_SOCKS5_METHOD_GSSAPI = 0x01,
	GW_SOCKS5_METHOD_USERPASS = 0x02,
	GW_SOCKS5_METHOD_NONE = 0xff,   /* "no acceptable methods" */
};

enum gw_socks5_cmd {
	GW_SOCKS5_CMD_CONNECT = 0x01,
	GW_SOCKS5_CMD_BIND = 0x02,
	GW_SOCKS5_CMD_UDP_ASSOCIATE = 0x03,
};

enum gw_socks5_atyp {
	GW_SOCKS5_ATYP_IPV4 = 0x01,
	GW_SOCKS5_ATYP_DOMAIN = 0x03,
	GW_SOCKS5_ATYP_IPV6 = 0x04,
};

/* Reply codes (RFC 1928 6, REP). The names appear in log lines: add,
 * never rename. */
#define GW_SOCKS5_REPS(X)                                                    \
	X(SUCCEEDED, 0x00, "succeeded")                                      \
	X(GENERAL_FAILURE, 0x01, "general-failure")                          \
	X(NOT_ALLOWED, 0x02, "not-allowed-by-ruleset")                       \
	X(NET_UNREACHABLE, 0x03, "network-unreachable")                      \
	X(HOST_UNREACHABLE, 0x04, "host-unreachable")                        \
	X(CONN_REFUSED, 0x05, "connection-refused")                          \
	X(TTL_EXPIRED, 0x06, "ttl-expired")                                  \
	X(CMD_UNSUPPORTED, 0x07, "command-not-supported")                    \
	X(ATYP_UNSUPPORTED, 0x08, "address-type-not-supported")

enum gw_socks5_rep {
#define GW_SOCKS5_REP_ENUM(id, val, name) GW_SOCKS5_REP_##id = val,
	GW_SOCKS5_REPS(GW_SOCKS5_REP_ENUM)
#undef GW_SOCKS5_REP_ENUM
	GW_SOCKS5_REP__COUNT
};

/* Where a connection stands. GREETING is the initial phase; METHOD and
 * AUTHED wait for the door (to choose a method, to check credentials);
 * DONE and ERROR are terminal. */
#define GW_SOCKS5_PHASES(X)                                                  \
	X(GREETING, "greeting")         /* reading VER NMETHODS METHODS */   \
	X(METHOD, "method")             /* greeting read; door chooses */    \
	X(AUTH, "auth")                 /* reading RFC 1929 credentials */   \
	X(AUTHED, "authed")             /* credentials read; door checks */  \
	X(REQUEST, "request")           /* reading the request */            \
	X(DONE, "done")                 /* request read */                   \
	X(ERROR, "error")

enum gw_socks5_phase {
#define GW_SOCKS5_PHASE_ENUM(id, name) GW_SOCKS5_PH_##id,
	GW_SOCKS5_PHASES(GW_SOCKS5_PHASE_ENUM)
#undef GW_SOCKS5_PHASE_ENUM
	GW_SOCKS5_PH__COUNT
};

/* Why a parse failed. */
struct gw_socks5_error {
	enum gw_reason reason;  /* GW_R_BAD_REQUEST, GW_R_UNSUPPORTED (command
				 * or address type), GW_R_INTERNAL (misuse) */
	const char *msg;        /* static: "wrong version 4" */
	bool has_rep;           /* false: close without a reply (greeting) */
	uint8_t rep;            /* request: REP for gw_socks5_reply();
				 * auth: the STATUS byte, i.e. what
				 * gw_socks5_auth_reply(out, false) sends */
	uint8_t byte;           /* the offending byte's value */
};

/* A greeting as offered: methods in the client's order, duplicates kept. */
struct gw_socks5_greeting {
	uint8_t methods[GW_SOCKS5_MAX_FIELD];
	size_t nmethods;        /* 0..255; 0: nothing offered (answer 0xff) */
};

/* RFC 1929 credentials: 1..255 bytes each, no NUL inside, NUL-terminated.
 * The password is a secret: never log it. */
struct gw_socks5_auth {
	char user[GW_SOCKS5_MAX_FIELD + 1];
	size_t user_len;
	char pass[GW_SOCKS5_MAX_FIELD + 1];
	size_t pass_len;
};

struct gw_socks5_request {
	uint8_t cmd;            /* GW_SOCKS5_CMD_CONNECT: nothing else parses;
	                         * after an ERROR, the byte read (0: none) */
	uint8_t atyp;           /* enum gw_socks5_atyp: 1, 3 or 4 */
	uint8_t addr[16];       /* IPV4: addr[0..4), IPV6: addr[0..16) */
	char host[GW_SOCKS5_MAX_FIELD + 1]; /* DOMAIN: 1..255 bytes, no NUL,
					     * NUL-terminated, unvalidated */
	size_t host_len;
	uint16_t port;          /* host byte order, never 0 */
};

/* Where the reader stands inside the current message (private). */
enum gw_socks5_step {
	GW_SOCKS5_ST_VER = 0,           /* every message starts with VER */
	GW_SOCKS5_ST_NMETHODS,
	GW_SOCKS5_ST_METHODS,
	GW_SOCKS5_ST_ULEN,
	GW_SOCKS5_ST_UNAME,
	GW_SOCKS5_ST_PLEN,
	GW_SOCKS5_ST_PASSWD,
	GW_SOCKS5_ST_CMD,
	GW_SOCKS5_ST_RSV,
	GW_SOCKS5_ST_ATYP,
	GW_SOCKS5_ST_DLEN,
	GW_SOCKS5_ST_ADDR,
	GW_SOCKS5_ST_PORT,
};

/* One per connection; about 1.1 KiB, no allocation. Read the public
 * fields only as the API says (after DONE, or err after ERROR). */
struct gw_socks5_parser {
	enum gw_socks5_phase phase;
	struct gw_socks5_error err;             /* valid in phase ERROR */
	struct gw_socks5_greeting greeting;     /* valid from phase METHOD */
	struct gw_socks5_auth auth;             /* valid in phase AUTHED */
	struct gw_socks5_request req;           /* valid in phase DONE */

	/* private: position inside the message being read */
	enum gw_socks5_step step;
	size_t need;            /* bytes the current field has */
	size_t fill;            /* bytes of it read so far */
	uint8_t portb[2];
};

#endif

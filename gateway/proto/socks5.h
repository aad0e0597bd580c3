/* socks5.h: a strict, pure, resumable SOCKS5 server-side parser (RFC 1928)
 * with RFC 1929 username/password sub-negotiation, reply builders and the
 * mapping from refusal reasons to reply codes.
 *
 * No I/O, no allocation, no logging; a parser has one user at a time.
 *
 * A door keeps one struct gw_socks5_parser per connection and calls, in
 * this order:
 *
 *   gw_socks5_parse_greeting()   phase GREETING -> METHOD
 *     the door picks a method (gw_socks5_choose_method()), sends
 *     gw_socks5_method_reply(); on 0xff it closes;
 *   gw_socks5_parse_auth()       only if it picked 0x02: METHOD -> AUTHED
 *     the door checks p->auth, sends gw_socks5_auth_reply(), closes on
 *     failure, and may call gw_socks5_forget_password();
 *   gw_socks5_parse_request()    METHOD or AUTHED -> DONE
 *     the door checks policy, connects, sends gw_socks5_reply().
 *
 * Each parse call takes the bytes that arrived, in pieces split anywhere:
 * the parser keeps its place between calls and the caller never re-feeds
 * or buffers bytes. A call reads only the message of its phase, never past
 * its last byte, and reports in *consumed how many bytes of `in` it used:
 *   GW_SOCKS5_AGAIN  *consumed == len; call again when more bytes come;
 *   GW_SOCKS5_DONE   the message ended at in[*consumed - 1]; the bytes
 *                    in[*consumed..len) are NOT the parser's: an
 *                    optimistic client sent them before the door's reply
 *                    (the next message, or after the request its first
 *                    payload); the door keeps them for the next call, and
 *                    the payload until the request is allowed;
 *   GW_SOCKS5_ERROR  p->err says why; *consumed is the offset of the
 *                    offending byte. Terminal: later calls return ERROR and
 *                    consume nothing. Reply as p->err says, then close.
 * The total consumed, the result and the decoded fields do not depend on
 * how the input was split. A call with len 0 returns AGAIN (in may be
 * NULL). Calling a parse function out of the order above is a door bug:
 * it returns ERROR with reason GW_R_INTERNAL and no reply.
 */
#ifndef SLUICE_GW_SOCKS5_H
#define SLUICE_GW_SOCKS5_H

#include <sys/socket.h>

#include "socks5-t.h"

/* Prepares p for a new connection (phase GREETING); wipes everything. Call
 * it, or gw_socks5_parser_wipe(), before reusing or freeing p. */
void gw_socks5_parser_init(struct gw_socks5_parser *p);

/* Wipes p (credentials included) with explicit_bzero and leaves it in phase
 * ERROR ("parser wiped"); for the connection's teardown. */
void gw_socks5_parser_wipe(struct gw_socks5_parser *p);

/* ---- parsing -------------------------------------------------------- */

/* The greeting: VER=5 NMETHODS=0..255 METHODS. On DONE *out points to
 * p->greeting (valid until init/wipe); otherwise *out is NULL. NMETHODS 0
 * is a whole greeting offering nothing: gw_socks5_choose_method() gives
 * 0xff, which the door sends before closing. Errors (reason
 * GW_R_BAD_REQUEST, has_rep false: close without a reply): "wrong version
 * N". */
enum gw_socks5_result gw_socks5_parse_greeting(
	struct gw_socks5_parser *p, const uint8_t *in, size_t len,
	size_t *consumed, const struct gw_socks5_greeting **out);

/* RFC 1929: VER=1 ULEN=1..255 UNAME PLEN=1..255 PASSWD, neither field
 * holding a NUL byte. On DONE *out points to p->auth (NUL-terminated
 * copies with lengths; valid until gw_socks5_parse_request() starts, which
 * wipes the password, or until gw_socks5_forget_password()/init/wipe);
 * otherwise *out is NULL. Errors (reason GW_R_BAD_REQUEST, has_rep true,
 * rep = 0x01: send gw_socks5_auth_reply(out, false) and close):
 * "wrong auth version N", "username length 0", "NUL in username",
 * "password length 0", "NUL in password". */
enum gw_socks5_result gw_socks5_parse_auth(struct gw_socks5_parser *p,
					   const uint8_t *in, size_t len,
					   size_t *consumed,
					   const struct gw_socks5_auth **out);

/* The request: VER=5 CMD RSV=0 ATYP DST.ADDR DST.PORT. On DONE *out points
 * to p->req (valid until init/wipe), always a CONNECT; otherwise *out is
 * NULL. Errors, all with has_rep true (send gw_socks5_reply(rep), then
 * close):
 *   reason GW_R_UNSUPPORTED, rep 0x07, at the CMD byte, whatever follows
 *     it (the address is never read: an unknown ATYP could not even be
 *     measured): "BIND is not supported: only CONNECT", "UDP ASSOCIATE is
 *     not supported: only CONNECT", "unknown command: only CONNECT";
 *   reason GW_R_UNSUPPORTED, rep 0x08: "address type not supported"
 *     (ATYP other than 1, 3, 4);
 *   reason GW_R_BAD_REQUEST, rep 0x01: "wrong version N",
 *     "reserved byte not zero", "domain length 0", "NUL in domain",
 *     "port 0".
 * The domain is only checked for length and NUL: the policy module
 * validates names. */
enum gw_socks5_result gw_socks5_parse_request(
	struct gw_socks5_parser *p, const uint8_t *in, size_t len,
	size_t *consumed, const struct gw_socks5_request **out);

/* Wipes the password (explicit_bzero) once the door has checked it. */
void gw_socks5_forget_password(struct gw_socks5_parser *p);

const char *gw_socks5_phase_name(enum gw_socks5_phase ph);

/* ---- decisions ------------------------------------------------------ */

/* True if the client offered `method`. */
bool gw_socks5_offers(const struct gw_socks5_greeting *g, uint8_t method);

/* The first method in the client's order that the door accepts: 0x00 if
 * can_noauth, 0x02 if can_userpass; else 0xff (no acceptable method). */
uint8_t gw_socks5_choose_method(const struct gw_socks5_greeting *offered,
				bool can_noauth, bool can_userpass);

/* A refusal reason's REP: policy and authentication refusals (NOT_ALLOWED,
 * DENIED, PRIVATE_ADDRESS, BAD_HOST, NON_ASCII_HOST, USERINFO, BAD_PORT,
 * UNKNOWN_CLIENT, AUTH_*) -> 0x02; DNS_NXDOMAIN, DNS_FAILED -> 0x04;
 * CONNECT_FAILED -> 0x05 (prefer gw_socks5_rep_for_errno() when the errno
 * is known); CONNECT_TIMEOUT, DNS_TIMEOUT -> 0x06; UNSUPPORTED -> 0x07;
 * NONE -> 0x00; anything else (TOO_MANY_CONNECTIONS, INTERNAL,
 * BAD_REQUEST, ...) -> 0x01. */
uint8_t gw_socks5_rep_for(enum gw_reason r);

/* A failed connect's REP from its errno (either sign): ECONNREFUSED ->
 * 0x05; ENETUNREACH, ENETDOWN -> 0x03; EHOSTUNREACH, EHOSTDOWN -> 0x04;
 * ETIMEDOUT -> 0x06; anything else -> 0x01. */
uint8_t gw_socks5_rep_for_errno(int err);

/* "succeeded", "not-allowed-by-ruleset", ...; "?" for an unknown code. */
const char *gw_socks5_rep_name(uint8_t rep);

/* A request's command for the access line: "CONNECT", "BIND",
 * "UDP-ASSOCIATE", or "-" (not read yet, or unknown). */
const char *gw_socks5_cmd_name(uint8_t cmd);

/* ---- replies -------------------------------------------------------- */

/* VER=5 METHOD: the answer to the greeting. */
void gw_socks5_method_reply(uint8_t out[2], uint8_t method);

/* VER=1 STATUS: 0x00 if ok, else 0x01 (the door then closes). */
void gw_socks5_auth_reply(uint8_t out[2], bool ok);

/* VER=5 REP RSV=0 ATYP BND.ADDR BND.PORT into out[0..outsz), the address
 * and port taken from `bound` (borrowed; a whole sockaddr_in or
 * sockaddr_in6, as getsockname() fills), or 0.0.0.0:0 when bound is NULL. Returns the length written (10 or 22), or
 * -ENOSPC (outsz too small; GW_SOCKS5_REPLY_MAX always fits) or
 * -EAFNOSUPPORT, writing nothing then. */
int gw_socks5_reply(uint8_t *out, size_t outsz, uint8_t rep,
		    const struct sockaddr *bound);

/* The destination of an IPV4 or IPV6 request as a sockaddr (port
 * included). Returns 0 with *ss and *sslen set, or -EINVAL for a DOMAIN
 * request (resolve req->host instead). */
int gw_socks5_request_sockaddr(const struct gw_socks5_request *req,
			       struct sockaddr_storage *ss, socklen_t *sslen);

#endif

/* reason-t.h: why a connection or request was refused or ended.
 *
 * One list for every door, the access log and the Sluice-Reason header, so
 * that a reason has one spelling everywhere. The names are part of the
 * user interface (docs/gateway.md lists them): add, never rename.
 */
#ifndef SLUICE_GW_REASON_T_H
#define SLUICE_GW_REASON_T_H

#define GW_REASONS(X)                                                        \
	X(NONE, "none")                         /* allowed, or ended well */  \
	X(NOT_ALLOWED, "not-allowed")           /* no allow rule matched */   \
	X(DENIED, "denied")                     /* a deny rule matched */     \
	X(PRIVATE_ADDRESS, "private-address")   /* address in a denied range */\
	X(BAD_HOST, "bad-host")                 /* malformed host name */     \
	X(NON_ASCII_HOST, "non-ascii-host")     /* IDN not given as punycode */\
	X(USERINFO, "userinfo")                 /* user@ in a URL */          \
	X(BAD_PORT, "bad-port")                                               \
	X(BAD_REQUEST, "bad-request")           /* HTTP parse error */        \
	X(HEADER_TOO_LARGE, "header-too-large")                               \
	X(UNSUPPORTED, "unsupported")           /* method or scheme */        \
	X(AUTH_REQUIRED, "auth-required")       /* 407 */                     \
	X(AUTH_FAILED, "auth-failed")                                         \
	X(UNKNOWN_CLIENT, "unknown-client")                                   \
	X(NOT_A_SANDBOX, "not-a-sandbox")       /* lane door: no such source */\
	X(SANDBOX_LOCKED, "sandbox-locked")     /* lane door: not unlocked */ \
	X(TLS_NOT_TLS, "tls-not-tls")           /* SNI door: not a handshake */\
	X(TLS_NOT_CLIENT_HELLO, "tls-not-client-hello")                      \
	X(TLS_NO_SNI, "tls-no-sni")             /* no server_name */          \
	X(TLS_BAD_SNI, "tls-bad-sni")           /* IP literal, bad name */    \
	X(TLS_FRAGMENTED, "tls-fragmented")     /* hello over two records */  \
	X(TLS_TOO_BIG, "tls-too-big")           /* first record too large */  \
	X(TLS_MALFORMED, "tls-malformed")       /* bad lengths in the hello */\
	X(DNS_FAILED, "dns-failed")                                           \
	X(DNS_NXDOMAIN, "dns-nxdomain")                                       \
	X(DNS_TIMEOUT, "dns-timeout")                                         \
	X(DNS_TYPE, "dns-type")                 /* DNS door: not A or AAAA */ \
	X(DNS_NAMES_FULL, "dns-names-full")     /* DNS door: every name held */\
	X(UNKNOWN_NAME_ADDRESS, "unknown-name-address") /* name door: no name */\
	X(CONNECT_FAILED, "connect-failed")     /* refused, unreachable */    \
	X(CONNECT_TIMEOUT, "connect-timeout")                                 \
	X(UPSTREAM_RESET, "upstream-reset")                                   \
	X(UPSTREAM_BAD_RESPONSE, "upstream-bad-response")                     \
	X(IDLE_TIMEOUT, "idle-timeout")                                       \
	X(CLIENT_CLOSED, "client-closed")                                     \
	X(TOO_MANY_CONNECTIONS, "too-many-connections")                       \
	X(SHUTDOWN, "shutdown")                                               \
	X(TLS_SNI_MISMATCH, "tls-sni-mismatch") /* SNI is not the CONNECT's */\
	X(HOST_MISMATCH, "host-mismatch")       /* 421: Host is not D */      \
	X(METHOD_NOT_ALLOWED, "method-not-allowed") /* 405: TRACE, TRACK */   \
	X(UPSTREAM_CERT_INVALID, "upstream-cert-invalid") /* verification */  \
	X(UPSTREAM_TLS_FAILED, "upstream-tls-failed") /* the origin's TLS */  \
	X(CLIENT_REJECTED_CERT, "client-rejected-cert") /* guest refused leaf */\
	X(CLIENT_TLS_FAILED, "client-tls-failed") /* the guest's TLS failed */ \
	X(SNI_ADDRESS_MISMATCH, "sni-address-mismatch") /* literal not SNI's */\
	X(CREDENTIAL_SCOPE, "credential-scope") /* a sentinel out of scope */ \
	X(CREDENTIAL_LOST, "credential-lost") /* a tenant's, gone in a restart */\
	X(SIGV4_BODY_TOO_LARGE, "sigv4-body-too-large") /* 413: to hash */ \
	X(SIGV4_HOLD_BUSY, "sigv4-hold-busy") /* 503: held bodies at their bound */\
	X(UPSTREAM_TIMEOUT, "upstream-timeout") /* 504: the origin went silent */\
	X(UPSTREAM_HEADER_TOO_LARGE, "upstream-header-too-large") /* 502 */   \
	X(UPSTREAM_TOO_MANY_1XX, "upstream-too-many-1xx") /* 502: 1xx after 1xx */\
	X(BODY_TOO_SLOW, "body-too-slow")       /* 408: below the minimum rate */\
	X(BODY_TIMEOUT, "body-timeout")         /* 408: past the body's deadline */\
	X(HEAD_TIMEOUT, "head-timeout")         /* 408: a head begun, never ended */\
	X(INTERNAL, "internal-error")

enum gw_reason {
#define GW_REASON_ENUM(id, name) GW_R_##id,
	GW_REASONS(GW_REASON_ENUM)
#undef GW_REASON_ENUM
	GW_R__COUNT
};

#endif

/* exchange-t.h: one HTTP/1.1 exchange over a connection (types only). */
#ifndef SLUICE_GW_EXCHANGE_T_H
#define SLUICE_GW_EXCHANGE_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr-t.h"
#include "conn-t.h"
#include "http1-t.h"
#include "reason-t.h"

/* The exchange's states: the door's state enum for every door that is
 * "a transport + the exchange".
 *
 *   HEAD ──▶ (HOLD) ──▶ DIALING ──▶ EXCHANGE ──▶ HEAD (keep-alive)
 *     │        │           │           └──────▶ TUNNEL (CONNECT, 101)
 *     └────────┴───────────┴──▶ REFUSE ──▶ LINGER ──▶ closed
 *
 * HOLD: the request's body is read whole before anything is dialled,
 * because its head can only be signed once the body is known (hold.h). */
#define GW_H1X_STATES(X)                                                     \
	X(HEAD, "head")                                                      \
	X(DIALING, "dialing")           /* resolve, check, connect */        \
	X(EXCHANGE, "exchange")                                              \
	X(TUNNEL, "tunnel")                                                  \
	X(REFUSE, "refuse")                                                  \
	X(LINGER, "linger")                                                  \
	X(TLS_UP, "tls-up")             /* intercept: TLS to the origin */   \
	X(TLS_HELLO, "tls-hello")       /* intercept: the guest's hello */   \
	X(TLS_DOWN, "tls-down")         /* intercept: TLS with the guest */  \
	X(SNI_PEEK, "sni-peek")         /* an IP literal: the hello's name */ \
	X(HOLD, "hold")                 /* the body, read to sign the head */

enum gw_h1x_state {
#define GW_H1X_STATE_ENUM(id, name) H1X_##id,
	GW_H1X_STATES(GW_H1X_STATE_ENUM)
#undef GW_H1X_STATE_ENUM
};

/* One direction of an exchange. buf[0..len) holds bytes read from the
 * source; [wpos..fend) are checked and ready to write to the destination,
 * after the rebuilt head in hbuf; [parsed..len) are not checked yet. */
struct gw_h1x_half {
	char *buf;
	size_t cap;
	size_t len;
	size_t parsed;
	size_t wpos;
	size_t fend;
	char *hbuf;
	size_t hlen;
	size_t hpos;
	bool hsecret;           /* hbuf holds credentials: wiped when freed */
	struct gw_h1_body body;
	bool in_body;           /* head done, body under way */
	bool done;              /* the message is complete (checked) */
	uint64_t out;           /* bytes written to the destination */
	uint64_t in;            /* bytes read from the source */
};

struct gw_h1x;
struct conf_credential;

/* A response may bring this many 1xx heads before its final one: an
 * origin that sends more is answered 502 upstream-too-many-1xx. */
#define GW_H1X_MAX_INTERIM 16

/* What the deadlines of an exchange under way (deadline.h) count from,
 * in the loop's milliseconds. */
struct gw_h1x_clock {
	uint64_t body_start;    /* the request's body began to be read */
	uint64_t rate_start;    /* the same, moved on by every pause */
	uint64_t paused_at;     /* the client is not asked for its body since; 0: it is */
	uint64_t body_in0;      /* bytes read from the client by then */
	uint64_t up_at;         /* the origin's last progress */
	uint64_t cli_at;        /* the client's last progress */
	/* the byte counts (and 1xx heads) at the last look */
	uint64_t seen_up_in, seen_up_out, seen_down_in, seen_down_out;
	unsigned seen_interim;
};

/* The credentials the request under way gets (inject.h): planned before
 * the dial, applied when its head is rebuilt for an origin reached over
 * sluice's own verified TLS (or in the clear, for those that say so); at
 * most GW_INJECT_MAX (conn-t.h). */
struct gw_inject {
	const struct conf_credential *c[GW_INJECT_MAX];
	size_t n;
	size_t extra;           /* what the rebuilt head may grow by */
	bool sentinels;         /* header values hold this layer's sentinels */
	/* SigV4: the guest signed with this layer's placeholder keys; authz is
	 * the Authorization value signed again with the real ones (made when
	 * planned, freed when the head is built). */
	const struct conf_credential *sigv4;
	char *authz;
	size_t authz_len;
	const struct gw_h1_header *authz_h;     /* the field it replaces */
	bool s3;                        /* the scope's service: S3's path rules */
	/* SigV4 without X-Amz-Content-SHA256 (every service but S3): the
	 * signature covers SHA-256 of the body, so the exchange holds the body
	 * (hold.h) and signs when it is whole (gw_inject_sign_held()). */
	bool hold;
	struct gw_h1_body held;         /* its framing, checked as it comes */
	size_t held_at;                 /* up.buf offset: the body's first byte */
	size_t held_to;                 /* ... and the first not checked yet */
	bool continued;                 /* our 100 Continue is queued */
	size_t reserved;                /* of the gateway's budget (hold.h) */
};

/* How an exchange's connection came in: the forward door's own (its
 * requests, CONNECT among them), or handed over by the SOCKS5 or the SNI
 * door once their destination was found to be intercepted (intercept.h).
 * Before the guest's TLS is ours, a refusal is said the way's own way. */
enum gw_h1x_way {
	GW_WAY_HTTP = 0,
	GW_WAY_SOCKS5,
	GW_WAY_SNI,
};

/* The door's part of each request, called when a request head is whole
 * (x->reqh): settle who asks (c->client_idx or c->who, c->policy), where
 * it goes (x->target, c->req.host and port) and whether the policy allows
 * it (gw_h1x_check_host()). Returns 0 to go on, or -1 once it has refused
 * (gw_h1x_refuse()), or 1 once it has taken the connection elsewhere
 * (gw_intercept_literal()). */
typedef int (*gw_h1x_route_fn)(struct gw_h1x *x);

/* A connection whose door is "a transport + the exchange" starts with
 * this (and so with its gw_conn). */
struct gw_h1x {
	struct gw_conn base;
	gw_h1x_route_fn route;
	bool deadline_fixed;    /* the timer is a connect/head deadline */

	/* the request under way */
	struct gw_h1_parser parser;
	struct gw_h1_head reqh;
	struct gw_h1_head resph;
	struct gw_h1_target target;
	struct gw_h1x_half up;     /* client -> upstream */
	struct gw_h1x_half down;   /* upstream -> client */
	bool is_connect;
	bool is_upgrade;
	bool client_keep;       /* the client may send another request */
	bool close_after;       /* close the client once the response is out */
	unsigned requests;      /* heads read on this connection */

	/* an idle upstream connection kept for the same origin and client */
	bool u_idle;
	char u_addr[GW_ADDR_FMT_MAX];   /* its address, for the access line */
	char u_host[GW_HOST_MAX];
	uint16_t u_port;
	int u_client;
	bool u_tls;                     /* our TLS to the origin */

	size_t linger_left;

	/* intercepting (intercept.h): D, the CONNECT's destination */
	enum gw_h1x_way way;
	/* An IP-literal CONNECT the policy does not allow by itself, routed
	 * by its ClientHello's server name (the literal must be one of the
	 * name's addresses): the opening went out before the hello was read. */
	bool by_sni;
	struct sockaddr_storage lit;
	bool intercept;         /* the guest side is our TLS: requests are D's */
	bool up_tls;            /* the request under way goes to the origin over
				 * our TLS (intercepted, or an https:// URL) */
	char dest[GW_HOST_MAX];
	uint16_t dest_port;
	enum gw_reason up_fail; /* the origin's TLS failed: answered after ours */
	char up_err[192];
	/* A read that cannot find anything is skipped: the response to a
	 * request sent a moment ago, or the next request of a client that is
	 * still reading our response. Saves a recv() per message. */
	bool skip_up_read;
	bool skip_client_read;
	/* The origin's bytes after down.parsed are a response head not yet
	 * whole: only more input can help (the head parser reads the whole
	 * head again each time, so parsed stays at its start). */
	bool resp_short;
	bool head_timed;        /* the head deadline is armed */
	uint64_t head_t0;       /* when it was (gw_loop_now) */
	unsigned interim;       /* 1xx heads of the response under way */
	struct gw_h1x_clock clock;
	struct gw_inject inj;
};

#endif

/* conn-t.h: one connection of any door (types only).
 *
 * Every door's connection begins with a struct gw_conn: the worker keeps
 * them on one list, one teardown (gw_conn_close()) ends them whatever went
 * wrong, and the access line is written from there. The door adds its own
 * state enum (one setter, gw_conn_set_state()) and what its protocol needs.
 * HAProxy's stream and nginx's ngx_connection_t are the models. */
#ifndef SLUICE_GW_CONN_T_H
#define SLUICE_GW_CONN_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "addr-t.h"
#include "conf-t.h"
#include "dial-t.h"
#include "lanes.h"
#include "loop-t.h"
#include "reason-t.h"
#include "tunnel-t.h"
#include "xprt.h"

struct gw_conn;
struct gw_snap;
struct gw_worker;

/* A dial's end, for the door: why == GW_R_NONE and c->up attached, or why
 * not (err: the errno behind it, or 0; detail: a line for the client,
 * valid during the call). */
typedef void (*gw_conn_dialed_fn)(struct gw_conn *c, enum gw_reason why, int err,
				  const char *detail);

/* A door kind: its name and its hooks into the common connection. */
struct gw_door {
	const char *name;               /* door= in the access line; log lines */
	const char *const *states;      /* the door's state names (debug lines) */
	size_t size;                    /* the door's connection, gw_conn first */
	/* The door's engine: after accept, after every event, and when a
	 * step of the door's own ends (a dial). */
	void (*run)(struct gw_conn *c);
	/* An event on one side (upstream: the upstream's socket). Returns
	 * true to run the engine. NULL: an error on the client outside a
	 * tunnel ends the connection (client-closed), anything else runs. */
	bool (*event)(struct gw_conn *c, bool upstream, uint32_t events);
	/* The connection's timer fired. NULL: it ends as idle-timeout. */
	void (*timeout)(struct gw_conn *c);
	/* Before the teardown: settle what the access line reports. */
	void (*closing)(struct gw_conn *c, enum gw_reason why);
	/* Frees what the door's part holds (after the teardown). */
	void (*fini)(struct gw_conn *c);
	/* Answers a connection that cannot be served (why: the gateway is
	 * full, out of memory) and closes fd. NULL: fd is just closed. */
	void (*busy)(int fd, const char *src, enum gw_reason why);
};

/* How a door relays a request (mode= in the access line). */
enum gw_conn_mode {
	GW_MODE_NONE = 0,       /* "-": refused or failed before a tunnel or an interception began */
	GW_MODE_HTTP,           /* a plain HTTP request, relayed by the exchange */
	GW_MODE_TUNNEL,         /* a byte tunnel: CONNECT, SOCKS5, the SNI door */
	GW_MODE_INTERCEPT,      /* an intercepted CONNECT, and each request inside it */
	GW_MODE__COUNT
};

/* An ALPN protocol name as the access line reports it, and its NUL (only
 * "http/1.1" is ever agreed today; a longer name is cut). */
#define GW_CONN_ALPN_MAX 32

/* Credentials one request may get (inject.h), and the inject= list that
 * names them all (gw_conn_req_inject()): every name at its longest, a ','
 * after each but the last, and the NUL. */
#define GW_INJECT_MAX 24     /* a policy's and a tenant's (16) together */
#define GW_CONN_INJECT_MAX (GW_INJECT_MAX * (CONF_CRED_NAME_MAX + 1))

/* What one access line reports: the request or tunnel under way. The
 * connection's TLS facts (sni, alpn_down, alpn_up, and an intercept mode)
 * hold for every line of the connection: gw_conn_req_begin() keeps them. */
struct gw_conn_req {
	bool open;                      /* a line is owed for it */
	char method[24];
	char host[GW_HOST_MAX];
	uint16_t port;
	char upstream[GW_ADDR_FMT_MAX];
	unsigned status;                /* HTTP status, SOCKS reply, ... */
	bool denied;                    /* refused by us */
	bool report_only;               /* allowed by a report-mode policy */
	enum gw_reason report_reason;
	enum gw_reason reason;          /* why refused (GW_R_NONE: not) */
	uint64_t t_start;
	uint64_t bytes_in;              /* from the client */
	uint64_t bytes_out;             /* to the client */
	enum gw_conn_mode mode;
	/* The credentials this request got, each once, in the order applied
	 * (inject.h); the line names them, never a value. Borrowed from
	 * c->policy, which outlives the line (its name and version are in it
	 * too). */
	const struct conf_credential *inject[GW_INJECT_MAX];
	unsigned ninject;
	/* The connection's TLS facts, last: gw_conn_req_begin() clears what
	 * comes before sni only. */
	char sni[GW_HOST_MAX];          /* the guest's ClientHello's server name; "": none read */
	char alpn_down[GW_CONN_ALPN_MAX]; /* agreed in our TLS with the guest; "": none */
	char alpn_up[GW_CONN_ALPN_MAX]; /* agreed in our TLS with the origin; "": none */
};

/* One side of a connection: its transport stack over a socket, watched. */
struct gw_side {
	struct gw_xprt *x;              /* the top of the stack; NULL: none */
	struct gw_xprt tcp;             /* the bottom */
	struct gw_io io;
};

struct gw_conn {
	const struct gw_door *door;
	struct gw_worker *w;
	struct gw_conn *prev, *next;    /* the worker's list */
	unsigned state;                 /* the door's enum */
	bool closed;
	bool tunneling;                 /* tun is set up */
	bool drain;                     /* read what the client sent before closing */
	struct gw_snap *snap;           /* the configuration it was accepted under */
	int lane;                       /* -1: a host door; else a lane index */
	struct sockaddr_storage peer;
	char src[GW_ADDR_FMT_MAX];      /* the peer, "ip:port" */

	/* who: a static client (host doors) or a sandbox (lane doors) */
	int client_idx;                 /* -1: none */
	struct gw_who who;
	const struct gw_policy *policy; /* borrowed from snap or who */

	struct gw_side cli;
	struct gw_side up;
	struct gw_timer timer;
	struct gw_defer defer;
	struct gw_dial dial;
	gw_conn_dialed_fn dialed;       /* the door's, for the dial under way */
	struct gw_tunnel tun;
	struct gw_conn_req req;
};

#endif

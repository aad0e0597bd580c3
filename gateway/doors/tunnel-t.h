/* tunnel-t.h: a byte tunnel between two sockets (CONNECT, WebSocket,
 * later SOCKS5), types only. */
#ifndef SLUICE_GW_TUNNEL_T_H
#define SLUICE_GW_TUNNEL_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reason-t.h"

#define GW_TUNNEL_BUF 16384
/* What one direction may have preloaded at once: more than any door holds
 * when its tunnel starts (a head of at most 1 MiB,
 * gateway.limits.max_header_bytes, and the read it came in). */
#define GW_TUNNEL_PRELOAD_MAX (4u << 20)

enum gw_tunnel_side {
	GW_TUNNEL_C2U = 0,      /* client to upstream */
	GW_TUNNEL_U2C,
};

struct gw_xprt;

/* One direction: bytes read from `from` and written to `to`, through a
 * pipe with splice(2) when both are bare sockets, or through `buf` when
 * copying. Bytes already read before the tunnel began (a request pipelined
 * after CONNECT) are preloaded into buf and sent first: splicing starts
 * only once buf is empty. */
struct gw_tunnel_dir {
	struct gw_xprt *from;
	struct gw_xprt *to;
	int pipe[2];            /* -1 when copying */
	bool may_splice;        /* switch to a pipe once the flow is bulk */
	size_t in_pipe;
	char *buf;              /* allocated on first use */
	size_t cap;             /* GW_TUNNEL_BUF, or more while a large
				 * preload drains */
	size_t start;
	size_t end;
	uint64_t bytes;         /* delivered to `to` */
	uint64_t precounted;    /* of them, preloaded bytes the door counted */
	bool eof;               /* `from` said EOF */
	bool shut;              /* `to` was shut down for writing */
	bool want_in;           /* blocked reading `from` */
	bool want_out;          /* blocked writing `to` */
	/* The hello gate (client to upstream only): nothing is written until
	 * the first record is read whole; a ClientHello must name `gate`. */
	const char *gate;
};

enum gw_tunnel_status {
	GW_TUNNEL_RUNNING = 0,
	GW_TUNNEL_DONE,         /* both directions ended cleanly, and what a TLS
				 * layer of ours held for either side is out */
	GW_TUNNEL_ERROR,        /* a reset or an error: see reason */
};

struct gw_tunnel {
	struct gw_tunnel_dir dir[2];
	enum gw_reason reason;
	bool refused;           /* the gate refused: reason says why */
	char seen[256];         /* the server name the gate refused */
};

#endif

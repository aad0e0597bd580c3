/* named.c: the name door (named.h): guest TCP to a synthetic address the
 * DNS door gave, routed by the name it stands for.
 *
 *   identity ──▶ name ──▶ DIALING ──▶ TUNNEL
 *      │           │         │
 *      └───────────┴─────────┴──▶ closed: a log line (and, from the name
 *                                 on, an access line)
 *
 * nftables sends every guest TCP connection to 198.18.0.0/15 on an egress
 * lane here (nat_pre: dnat to the lane's names door). The door recovers
 * the original destination (SO_ORIGINAL_DST), asks the sandbox's own
 * synthetic table which name that address stands for (a connection to an
 * address that stands for nothing, or for another sandbox's name, is
 * reset), and then:
 *   - port 80: the forward door takes the connection, as on a transparent
 *     lane (requests routed and checked by Host);
 *   - port 443: the SNI door takes it (routed and checked by the hello's
 *     server name; intercepted where the layer says so);
 *   - any other port: the layer is asked about name:port, and an allowed
 *     connection is dialled to a checked address of the name and relayed
 *     as a plain byte tunnel.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "conf.h"
#include "dial.h"
#include "conn.h"
#include "fwd.h"
#include "lanes.h"
#include "log.h"
#include "loop.h"
#include "named.h"
#include "policy.h"
#include "reason.h"
#include "sni.h"
#include "snap.h"
#include "tunnel.h"
#include "worker.h"

/* <linux/netfilter_ipv4.h>'s, which does not mix with <netinet/in.h> */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

#define NAMED_STATES(X)                                                                            \
	X(DIALING, "dialing")                                                                      \
	X(TUNNEL, "tunnel")

enum named_state {
#define NAMED_STATE_ENUM(id, name) NAMED_##id,
	NAMED_STATES(NAMED_STATE_ENUM)
#undef NAMED_STATE_ENUM
};

static const char *const named_state_names[] = {
#define NAMED_STATE_NAME(id, name) name,
	NAMED_STATES(NAMED_STATE_NAME)
#undef NAMED_STATE_NAME
};

struct named_conn {
	struct gw_conn base;
};

static void named_refuse(struct gw_conn *c, unsigned status, enum gw_reason why, const char *fmt,
			 ...) __attribute__((format(printf, 4, 5)));

static void
named_refuse(struct gw_conn *c, unsigned status, enum gw_reason why, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	gw_log_info("name door: sandbox %s (%s) refused: %s: %s", c->who.name, c->src,
		    gw_reason_name(why), detail);
	c->req.status = status;
	c->req.reason = why;
	c->req.denied = status != 502 && status != 504;
	/* A reset, not a close: the guest's connect() already succeeded,
	 * and a program should see ECONNRESET at once, not an empty reply. */
	c->drain = false;
	(void)setsockopt(c->cli.io.fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 },
			 sizeof(struct linger));
	gw_conn_close(c, why);
}

static void
named_dialed(struct gw_conn *c, enum gw_reason why, int err, const char *detail)
{
	(void)err;
	if (why != GW_R_NONE) {
		named_refuse(c, gw_dial_status(why), why, "%s:%u: %s", c->req.host, c->req.port,
			     detail);
		return;
	}
	c->req.status = 200;
	gw_conn_tunnel_start(c);
	gw_conn_set_state(c, NAMED_TUNNEL);
	gw_conn_arm(c, gw_conn_gateway(c)->idle_timeout_ms);
	c->door->run(c);
}

static void
named_run(struct gw_conn *c)
{
	switch ((enum named_state)c->state) {
	case NAMED_DIALING:
		gw_conn_watch(c, 0, 0);
		return;
	case NAMED_TUNNEL:
		gw_conn_tunnel_run(c);
		return;
	}
}

static void
named_timeout(struct gw_conn *c)
{
	gw_conn_close(c, GW_R_IDLE_TIMEOUT);
}

static void
named_busy(int fd, const char *src, enum gw_reason why)
{
	gw_log_warnx("name door: refusing %s: %s", src, gw_reason_name(why));
	gw_conn_drain_close(fd);
}

static const struct gw_door named_door = {
	.name = "names", .states = named_state_names, .size = sizeof(struct named_conn),
	.run = named_run, .timeout = named_timeout, .busy = named_busy,
};

/* Where the guest meant to connect (before the lane's dnat). */
static int
original_dst(int fd, struct sockaddr_in *out)
{
	socklen_t len = sizeof(*out);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, out, &len) < 0)
		return -errno;
	return out->sin_family == AF_INET ? 0 : -EAFNOSUPPORT;
}

void
gw_named_accept(struct gw_worker *w, int fd, int lane)
{
	struct sockaddr_in dst, peer;
	socklen_t plen = sizeof(peer);
	char name[254];
	struct gw_conn *c;
	struct gw_policy_decision d;
	uint16_t port;
	int rc;

	/* The two kinds a name door hands on: the connection is theirs from
	 * the start (their own identity check, lines and limits). */
	if (original_dst(fd, &dst) < 0 || getpeername(fd, (struct sockaddr *)&peer, &plen) < 0) {
		gw_log_warn("name door: a connection without its original destination");
		close(fd);
		return;
	}
	port = ntohs(dst.sin_port);
	rc = gw_lane_fakeip_name(lane, (struct sockaddr *)&peer, dst.sin_addr, gw_loop_now(w->loop), name);
	if (rc == 0 && port == 80) {
		gw_fwd_accept(w, fd, lane);
		return;
	}
	if (rc == 0 && port == 443) {
		gw_sni_accept(w, fd, lane);
		return;
	}
	c = gw_conn_accept(w, fd, lane, &named_door);
	if (!c)
		return;
	if (gw_lane_who(lane, (struct sockaddr *)&c->peer, &c->who) < 0) {
		gw_log_info("name door: refusing %s on lane %d: not an unlocked sandbox", c->src,
			    lane);
		gw_conn_close(c, GW_R_NOT_A_SANDBOX);
		return;
	}
	c->policy = c->who.policy;
	c->req.open = true;
	snprintf(c->req.method, sizeof(c->req.method), "TCP");
	c->req.port = port;
	if (rc < 0) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &dst.sin_addr, a, sizeof(a));
		snprintf(c->req.host, sizeof(c->req.host), "%s", a);
		named_refuse(c, 0, GW_R_UNKNOWN_NAME_ADDRESS,
			     "%s:%u stands for no name of this sandbox", a, port);
		return;
	}
	snprintf(c->req.host, sizeof(c->req.host), "%s", name);
	if (gw_policy_check(c->policy, c->req.host, port, &d) < 0) {
		named_refuse(c, 403, d.reason, "%s:%u refused by policy '%s'", c->req.host, port,
			     gw_policy_name(c->policy));
		return;
	}
	c->req.report_only = d.report_only;
	c->req.report_reason = d.reason;
	gw_conn_set_state(c, NAMED_DIALING);
	gw_conn_watch(c, 0, 0);
	gw_conn_dial(c, c->req.host, port, named_dialed);
}

/* sni.c: the SNI door (TLS passthrough on a lane, routed by server name).
 *
 *   identity ──▶ HELLO ──▶ DIALING ──▶ TUNNEL
 *      │           │          │
 *      └───────────┴──────────┴──▶ closed: a log line (and, from HELLO
 *                                  on, an access line)
 *
 * Transparent guest TCP/443 lands here. The sandbox is known by source
 * address (nftables keeps sources honest); then the door reads, without
 * answering, up to the end of the ClientHello's record, and takes the
 * destination from its server name only: no SNI, or a hello it cannot read
 * strictly, and the connection is closed, never routed by a guess. The
 * name goes through the same policy check and dial (every resolved address
 * checked) as the other doors; the bytes read are then the tunnel's first,
 * and nothing is ever decrypted or changed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "conf.h"
#include "conn.h"
#include "dial.h"
#include "intercept.h"
#include "lanes.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reason.h"
#include "sni.h"
#include "snap.h"
#include "tlshello.h"
#include "tunnel.h"
#include "worker.h"

#define SNI_PORT     443
#define SNI_HELLO_MS 10000 /* accept to the end of the ClientHello */
/* Everything read before the tunnel is preloaded into it, so the buffer,
 * and with it the first record, can be no larger than a tunnel buffer. */
#define SNI_IN         GW_TUNNEL_BUF
#define SNI_MAX_RECORD (SNI_IN - GW_TLSHELLO_HEADER)

#define SNI_STATES(X)                                                                              \
	X(HELLO, "hello")                                                                          \
	X(DIALING, "dialing")                                                                      \
	X(TUNNEL, "tunnel")

enum sni_state {
#define SNI_STATE_ENUM(id, name) SNI_##id,
	SNI_STATES(SNI_STATE_ENUM)
#undef SNI_STATE_ENUM
};

static const char *const sni_state_names[] = {
#define SNI_STATE_NAME(id, name) name,
    SNI_STATES(SNI_STATE_NAME)
#undef SNI_STATE_NAME
};

struct sni_conn {
	struct gw_conn base;
	uint8_t *in; /* what the client sent before the tunnel */
	size_t inlen;
};

static const char *
lane_name(const struct gw_snap *s, int lane)
{
	if (lane >= 0 && (size_t)lane < s->conf->nlanes && s->conf->lanes[lane].name)
		return s->conf->lanes[lane].name;
	return "?";
}

/* Refuses before the tunnel: one log line naming the sandbox and the
 * reason, then the close (and its access line). status: 0 for a hello we
 * would not route, 403 for the policy, 502/504 for the way there. */
static void sni_refuse(struct gw_conn *c, unsigned status, enum gw_reason why, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static void
sni_refuse(struct gw_conn *c, unsigned status, enum gw_reason why, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	gw_log_info("sni door: sandbox %s (%s, lane %s) refused: %s: %s", c->who.name, c->src,
	            lane_name(c->snap, c->lane), gw_reason_name(why), detail);
	c->req.status = status;
	c->req.reason = why;
	/* 502 and 504: allowed, but the way there failed */
	c->req.denied = status != 502 && status != 504;
	gw_conn_close(c, why);
}

/* ---- the hello ---- */

static void
sni_dialed(struct gw_conn *c, enum gw_reason why, int err, const char *detail)
{
	struct sni_conn *s = gw_conn_door(c, struct sni_conn);

	(void)err;
	if (why != GW_R_NONE) {
		sni_refuse(c, gw_dial_status(why), why, "%s:%u: %s", c->req.host, SNI_PORT, detail);
		return;
	}
	c->req.status = 200;
	/* The hello, and anything the client sent after it, go first; the
	 * line counted them when they were read. */
	gw_conn_tunnel_start(c);
	gw_conn_set_state(c, SNI_TUNNEL);
	if (gw_tunnel_preload(&c->tun, GW_TUNNEL_C2U, (const char *)s->in, s->inlen, true) < 0) {
		gw_conn_close(c, GW_R_INTERNAL);
		return;
	}
	free(s->in);
	s->in = NULL;
	s->inlen = 0;
	gw_conn_arm(c, gw_conn_gateway(c)->idle_timeout_ms);
	c->door->run(c);
}

/* A ClientHello with a server name: check it and dial. */
static void
sni_hello_done(struct gw_conn *c, const struct gw_tlshello *h)
{
	struct gw_policy_decision d;
	enum gw_reason why;

	/* The reader's rules are the stricter; the policy's spelling is the
	 * one checked, so insist the two agree. */
	if (gw_host_normalize(h->sni, h->sni_len, c->req.host, sizeof(c->req.host), &why) < 0 ||
	    strcmp(c->req.host, h->sni) != 0) {
		c->req.host[0] = '\0';
		sni_refuse(c, 0, GW_R_TLS_BAD_SNI, "server name not usable as a host");
		return;
	}
	if (gw_policy_check(c->policy, c->req.host, SNI_PORT, &d) < 0) {
		sni_refuse(c, 403, d.reason, "%s:%u refused by policy '%s'", c->req.host, SNI_PORT,
		           gw_policy_name(c->policy));
		return;
	}
	c->req.report_only = d.report_only;
	c->req.report_reason = d.reason;
	/* The dial keeps its own deadlines (DNS, connect). */
	gw_conn_disarm(c);
	if (gw_intercept_wants(c, c->req.host, SNI_PORT)) {
		struct sni_conn *s = gw_conn_door(c, struct sni_conn);

		/* D is the name the hello gave: the intercepting exchange
		 * dials, then answers the hello it was handed. */
		gw_intercept_enter(c, GW_WAY_SNI, s->in, s->inlen);
		return;
	}
	gw_conn_set_state(c, SNI_DIALING);
	gw_conn_watch(c, 0, 0);
	gw_conn_dial(c, c->req.host, SNI_PORT, sni_dialed);
}

/* Reads until the hello is whole or refused, or the socket is dry. The
 * reader is re-run on the whole buffer each time (tlshello.h). */
static void
sni_read(struct sni_conn *s)
{
	struct gw_conn *c = &s->base;
	struct gw_tlshello h;
	enum gw_tlshello_result r;
	ssize_t n;

	if (!s->in && !(s->in = malloc(SNI_IN))) {
		gw_conn_close(c, GW_R_INTERNAL);
		return;
	}
	for (;;) {
		n = gw_xprt_recv(c->cli.x, s->in + s->inlen, SNI_IN - s->inlen);
		if (n == -EAGAIN) {
			gw_conn_watch(c, EPOLLIN, 0);
			return;
		}
		if (n <= 0) {
			gw_conn_close(c, GW_R_CLIENT_CLOSED);
			return;
		}
		s->inlen += (size_t)n;
		c->req.bytes_in += (uint64_t)n;
		r = gw_tlshello_parse(s->in, s->inlen, SNI_MAX_RECORD, &h);
		if (r == GW_TLSHELLO_OK) {
			snprintf(c->req.sni, sizeof(c->req.sni), "%s", h.sni);
			sni_hello_done(c, &h);
			return;
		}
		if (r == GW_TLSHELLO_NO_SNI || r == GW_TLSHELLO_NOT_TLS) {
			sni_refuse(c, 0, gw_tlshello_reason(r), "%s", h.msg);
			return;
		}
		if (r != GW_TLSHELLO_NEED_MORE) {
			sni_refuse(c, 0, gw_tlshello_reason(r), "%s, at byte %zu", h.msg, h.at);
			return;
		}
		/* NEED_MORE always wants at most SNI_IN bytes (the record
		 * limit), so a full buffer is a bug. */
		if (s->inlen >= SNI_IN) {
			gw_conn_close(c, GW_R_INTERNAL);
			return;
		}
	}
}

/* ---- the engine ---- */

static void
sni_run(struct gw_conn *c)
{
	switch ((enum sni_state)c->state) {
	case SNI_HELLO:
		sni_read(gw_conn_door(c, struct sni_conn));
		return;
	case SNI_DIALING:
		/* What the client sends meanwhile waits in the socket and
		 * becomes the tunnel's, after the hello. */
		gw_conn_watch(c, 0, 0);
		return;
	case SNI_TUNNEL:
		gw_conn_tunnel_run(c);
		return;
	}
}

static void
sni_timeout(struct gw_conn *c)
{
	if (c->state == SNI_HELLO)
		gw_log_info("sni door: sandbox %s (%s, lane %s): no whole ClientHello in %u ms",
		            c->who.name, c->src, lane_name(c->snap, c->lane), SNI_HELLO_MS);
	gw_conn_close(c, GW_R_IDLE_TIMEOUT);
}

static void
sni_closing(struct gw_conn *c, enum gw_reason why)
{
	(void)why;
	if (c->state == SNI_HELLO)
		c->req.denied = true; /* nothing was allowed: no name was read */
}

static void
sni_fini(struct gw_conn *c)
{
	free(gw_conn_door(c, struct sni_conn)->in);
}

static void
sni_busy(int fd, const char *src, enum gw_reason why)
{
	gw_log_warnx("sni door: refusing %s: %s", src, gw_reason_name(why));
	gw_conn_drain_close(fd);
}

static const struct gw_door sni_door = {
	.name = "sni", .states = sni_state_names, .size = sizeof(struct sni_conn),
	.run = sni_run, .timeout = sni_timeout, .closing = sni_closing, .fini = sni_fini,
	.busy = sni_busy,
};

void
gw_sni_accept(struct gw_worker *w, int fd, int lane)
{
	struct gw_conn *c = gw_conn_accept(w, fd, lane, &sni_door);
	int rc;

	if (!c)
		return;
	/* Refusals before the tunnel drain what the client sent, so that
	 * unread bytes do not turn the close into a reset. */
	c->drain = true;
	/* Identity first: nothing is read from a stranger, and it gets no
	 * access line (there was no request), only a log line. */
	rc = gw_lane_who(lane, (struct sockaddr *)&c->peer, &c->who);
	if (rc < 0) {
		gw_log_info("sni door: refusing %s%s%s on lane %s: %s", c->src,
		            c->who.name[0] ? ", sandbox " : "", c->who.name, lane_name(c->snap, lane),
		            gw_reason_name(rc == -EACCES ? GW_R_SANDBOX_LOCKED : GW_R_NOT_A_SANDBOX));
		gw_conn_close(c, GW_R_NOT_A_SANDBOX);
		return;
	}
	c->policy = c->who.policy;
	/* From here on every end writes the access line. */
	c->req.open = true;
	snprintf(c->req.method, sizeof(c->req.method), "TLS");
	c->req.port = SNI_PORT;
	gw_conn_set_state(c, SNI_HELLO);
	gw_conn_arm(c, SNI_HELLO_MS);
	sni_run(c);
}

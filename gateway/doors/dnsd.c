/* dnsd.c: the DNS door (dnsd.h).
 *
 * Every egress lane's gateway answers DNS on lanes[].doors.dns (53), UDP
 * and TCP, for its own sandboxes only, known by source address as on the
 * other lane doors. The answer comes from the sandbox's layer, never from
 * upstream: a name the layer allows gets an address of the sandbox's own
 * synthetic table (fleet/fakeip.h), which the name door maps back to the
 * name; a name it refuses gets NXDOMAIN. No query leaves the gateway, so
 * DNS cannot carry data out of a sandbox (long labels, TXT lookups, random
 * names under an allowed-looking domain: each is answered here, and only
 * an allowed name gets more than NXDOMAIN).
 *
 *   A      allowed: NOERROR, one synthetic address, TTL DNSD_TTL_S
 *   AAAA   allowed: NOERROR, no data (lanes are IPv4)
 *   other  REFUSED (dns-type)
 *   refused by the layer, or not a host name: NXDOMAIN
 *   a sandbox not unlocked, another lane's: REFUSED
 *   malformed: FORMERR / NOTIMP / BADVERS (dnsmsg.h); junk and responses:
 *   nothing
 *
 * NXDOMAIN rather than REFUSED for a refused name: a stub resolver stops
 * there (REFUSED sends it to the next nameserver, and there is none), and
 * caches the negative answer.
 *
 * Every answered query has an access line: door=dns method=TYPE host=NAME
 * decision reason, status the rcode (0 NOERROR, 3 NXDOMAIN, ...), upstream
 * the synthetic address given.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "dnsd.h"
#include "dnsmsg.h"
#include "lanes.h"
#include "log.h"
#include "loop.h"
#include "policy.h"

#define DNSD_TTL_S       5      /* a synthetic answer's TTL */
#define DNSD_UDP_BATCH   64     /* datagrams per readiness event */
#define DNSD_MSG_MAX     1232   /* a query larger than this is no stub's */
#define DNSD_TCP_QUERIES 16     /* per TCP connection */
#define DNSD_TCP_IDLE_MS 10000
#define DNSD_TCP_MAX     256    /* TCP connections per worker */

struct dnsd_tcp {
	struct dnsd_tcp *next, **pprev;
	struct gw_worker_dns *owner;
	struct gw_io io;
	struct gw_timer idle;
	struct sockaddr_in peer;
	int lane;
	unsigned served;
	size_t have;
	uint8_t in[2 + DNSD_MSG_MAX];
};

struct gw_worker_dns {
	struct gw_loop *loop;
	struct dnsd_tcp *tcp;
	unsigned ntcp;
};

/* Decides one query from peer on lane at now (the loop's clock) and
 * writes the answer into out. Returns its length, 0 for no answer. */
static size_t
answer(int lane, const struct sockaddr_in *peer, const uint8_t *m, size_t n, bool udp,
       uint64_t now, uint8_t *out, size_t outsz)
{
	struct gw_dns_query q;
	struct gw_who who;
	struct gw_policy_decision d = { 0 };
	struct in_addr a = { 0 };
	enum gw_dns_parse r = gw_dns_query_parse(m, n, &q);
	enum gw_dns_rcode rc = GW_DNS_NOERROR;
	enum gw_reason why = GW_R_NONE;
	const char *decision = "allow";
	char src[INET_ADDRSTRLEN + 8], ip[INET_ADDRSTRLEN], ans[INET_ADDRSTRLEN] = "", tb[16];
	size_t len;
	bool give = false;
	int wrc;

	if (r == GW_DNS_DROP) {
		gw_log_debug("dns door: a datagram dropped: %s", q.why);
		return 0;
	}
	inet_ntop(AF_INET, &peer->sin_addr, ip, sizeof(ip));
	snprintf(src, sizeof(src), "%s:%u", ip, (unsigned)ntohs(peer->sin_port));
	wrc = gw_lane_who(lane, (const struct sockaddr *)peer, &who);
	if (wrc < 0) {
		rc = GW_DNS_REFUSED;
		why = wrc == -EACCES ? GW_R_SANDBOX_LOCKED : GW_R_NOT_A_SANDBOX;
	} else if (r == GW_DNS_ERROR) {
		rc = q.rcode;
		why = GW_R_BAD_REQUEST;
	} else if (q.qclass != 1) {
		rc = GW_DNS_REFUSED;
		why = GW_R_BAD_REQUEST;
	} else if (!q.name_ok || gw_policy_check_name(who.policy, q.name, &d) < 0) {
		rc = GW_DNS_NXDOMAIN;
		why = q.name_ok ? d.reason : GW_R_BAD_HOST;
	} else if (q.qtype == GW_DNS_T_A) {
		int frc = gw_lane_fakeip_get(lane, (const struct sockaddr *)peer, q.name, now, &a);

		if (frc == 0) {
			give = true;
			inet_ntop(AF_INET, &a, ans, sizeof(ans));
		} else {
			rc = GW_DNS_SERVFAIL;
			why = frc == -ENOSPC ? GW_R_DNS_NAMES_FULL : GW_R_INTERNAL;
		}
	} else if (q.qtype != GW_DNS_T_AAAA) {
		rc = GW_DNS_REFUSED;
		why = GW_R_DNS_TYPE;
	}
	if (rc != GW_DNS_NOERROR)
		decision = "deny";
	else if (d.report_only)
		decision = "report";
	len = gw_dns_answer(&q, m, rc, give ? &a : NULL, give ? 1 : 0, DNSD_TTL_S, udp, out, outsz);
	gw_access_write(&(struct gw_access){
		.door = "dns",
		.client = wrc < 0 ? NULL : who.name,
		.src = src,
		.policy = who.policy ? gw_policy_name(who.policy) : NULL,
		.method = q.qtype || q.qlen ? gw_dns_type_name(q.qtype, tb, sizeof(tb)) : NULL,
		.host = q.name_len ? q.name : NULL,
		.port = 0,
		.decision = decision,
		.reason = why,
		.upstream = ans[0] ? ans : NULL,
		.status = (unsigned)rc,
		.bytes_in = n,
		.bytes_out = len,
		.mode = udp ? "udp" : "tcp",
		.layer = who.policy ? gw_policy_version(who.policy) : NULL,
	});
	gw_who_clear(&who);
	return len;
}

/* ---- UDP ---- */

void
gw_dnsd_udp_ready(struct gw_loop *l, int fd, int lane)
{
	(void)l;
	/* A bounded batch, so one busy sandbox cannot starve the loop. */
	for (int i = 0; i < DNSD_UDP_BATCH; i++) {
		uint8_t m[DNSD_MSG_MAX + 1], out[GW_DNS_EDNS_UDP];
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		ssize_t n = recvfrom(fd, m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&peer, &plen);
		size_t len;

		if (n < 0)
			break;
		if ((size_t)n > DNSD_MSG_MAX || peer.sin_family != AF_INET)
			continue;       /* (cut short: no query of a stub) */
		len = answer(lane, &peer, m, (size_t)n, true, gw_loop_now(l), out, sizeof(out));
		if (len)
			(void)sendto(fd, out, len, MSG_DONTWAIT | MSG_NOSIGNAL,
				     (struct sockaddr *)&peer, plen);
	}
}

/* ---- TCP ---- */

static void
tcp_close(struct dnsd_tcp *t)
{
	struct gw_worker_dns *o = t->owner;

	gw_timer_cancel(o->loop, &t->idle);
	gw_io_del(o->loop, &t->io);
	close(t->io.fd);
	*t->pprev = t->next;
	if (t->next)
		t->next->pprev = t->pprev;
	o->ntcp--;
	free(t);
}

static void
on_idle(struct gw_loop *l, struct gw_timer *tm)
{
	(void)l;
	tcp_close(tm->arg);
}

/* Answers every whole message in t->in. false: the connection is done. */
static bool
tcp_serve(struct dnsd_tcp *t)
{
	while (t->have >= 2) {
		size_t mlen = (size_t)t->in[0] << 8 | t->in[1], len;
		uint8_t out[2 + GW_DNS_EDNS_UDP];

		if (mlen == 0 || mlen > DNSD_MSG_MAX)
			return false;
		if (t->have < 2 + mlen)
			return true;
		len = answer(t->lane, &t->peer, t->in + 2, mlen, false, gw_loop_now(t->owner->loop), out + 2,
			     sizeof(out) - 2);
		if (len) {
			out[0] = (uint8_t)(len >> 8);
			out[1] = (uint8_t)len;
			/* An answer is small and the guest's stub reads it: one
			 * that does not go out at once ends the connection. */
			if (send(t->io.fd, out, len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 2))
				return false;
		}
		memmove(t->in, t->in + 2 + mlen, t->have - 2 - mlen);
		t->have -= 2 + mlen;
		if (++t->served >= DNSD_TCP_QUERIES || !len)
			return false;
	}
	return true;
}

static void
on_tcp(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct dnsd_tcp *t = io->arg;
	ssize_t n;

	(void)events;
	n = recv(io->fd, t->in + t->have, sizeof(t->in) - t->have, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		tcp_close(t);
		return;
	}
	if (n < 0)
		return;
	t->have += (size_t)n;
	if (!tcp_serve(t)) {
		tcp_close(t);
		return;
	}
	gw_timer_arm(l, &t->idle, DNSD_TCP_IDLE_MS);
}

void
gw_dnsd_tcp_accept(struct gw_worker_dns *o, int fd, int lane)
{
	struct dnsd_tcp *t;
	socklen_t plen = sizeof(struct sockaddr_in);

	if (o->ntcp >= DNSD_TCP_MAX || !(t = calloc(1, sizeof(*t)))) {
		close(fd);
		return;
	}
	if (getpeername(fd, (struct sockaddr *)&t->peer, &plen) < 0 ||
	    t->peer.sin_family != AF_INET) {
		free(t);
		close(fd);
		return;
	}
	t->owner = o;
	t->lane = lane;
	gw_timer_init(&t->idle, on_idle, t);
	if (gw_io_add(o->loop, &t->io, fd, EPOLLIN, on_tcp, t) < 0) {
		free(t);
		close(fd);
		return;
	}
	t->next = o->tcp;
	t->pprev = &o->tcp;
	if (o->tcp)
		o->tcp->pprev = &t->next;
	o->tcp = t;
	o->ntcp++;
	gw_timer_arm(o->loop, &t->idle, DNSD_TCP_IDLE_MS);
}

struct gw_worker_dns *
gw_dnsd_new(struct gw_loop *l)
{
	struct gw_worker_dns *o = calloc(1, sizeof(*o));

	if (o)
		o->loop = l;
	return o;
}

void
gw_dnsd_free(struct gw_worker_dns *o)
{
	if (!o)
		return;
	while (o->tcp)
		tcp_close(o->tcp);
	free(o);
}

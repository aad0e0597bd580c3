/* dial.c: resolve, check every address, connect. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "dial.h"
#include "dns.h"
#include "loop.h"
#include "policy.h"
#include "worker-t.h"

void
gw_dial_init(struct gw_dial *d)
{
	memset(d, 0, sizeof(*d));
	d->fd = -1;
}

static void
dial_reset(struct gw_dial *d)
{
	if (d->q) {
		gw_dns_cancel(d->q);
		d->q = NULL;
	}
	if (d->fd >= 0) {
		gw_io_del(d->w->loop, &d->io);
		close(d->fd);
		d->fd = -1;
	}
	if (d->w)
		gw_timer_cancel(d->w->loop, &d->timer);
	d->state = GW_DIAL_IDLE;
}

void
gw_dial_cancel(struct gw_dial *d)
{
	if (d->state != GW_DIAL_IDLE)
		dial_reset(d);
}

static void dial_fail(struct gw_dial *d, enum gw_reason why, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
dial_fail(struct gw_dial *d, enum gw_reason why, int err, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	dial_reset(d);
	d->cb(d, -1, why, err, detail, d->arg);
}

static void
dial_done(struct gw_dial *d)
{
	int fd = d->fd;

	gw_io_del(d->w->loop, &d->io);
	gw_timer_cancel(d->w->loop, &d->timer);
	d->fd = -1;
	d->state = GW_DIAL_IDLE;
	d->cb(d, fd, GW_R_NONE, 0, "", d->arg);
}

static void dial_io(struct gw_loop *l, struct gw_io *io, uint32_t events);

/* Tries the addresses from d->next on; err is why the last one failed. */
static void
dial_connect(struct gw_dial *d, int err)
{
	while (d->next < d->addrs.naddrs) {
		struct sockaddr_storage *ss = &d->addrs.addrs[d->next++];
		socklen_t sl = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
							: sizeof(struct sockaddr_in6);
		int fd, one = 1;

		if (ss->ss_family == AF_INET)
			((struct sockaddr_in *)ss)->sin_port = htons(d->port);
		else
			((struct sockaddr_in6 *)ss)->sin6_port = htons(d->port);
		gw_addr_format((struct sockaddr *)ss, d->upstream, sizeof(d->upstream));
		fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)ss, sl) < 0 && errno != EINPROGRESS) {
			err = errno;
			close(fd);
			continue;
		}
		if (gw_io_add(d->w->loop, &d->io, fd, EPOLLOUT, dial_io, d) < 0) {
			err = errno;
			close(fd);
			continue;
		}
		d->fd = fd;
		d->state = GW_DIAL_CONNECTING;
		return;
	}
	dial_fail(d, GW_R_CONNECT_FAILED, err ? err : ECONNREFUSED, "cannot connect to %s:%u (%s): %s",
		  d->host, d->port, d->upstream, strerror(err ? err : ECONNREFUSED));
}

static void
dial_io(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_dial *d = io->arg;
	socklen_t len = sizeof(int);
	int err = 0;

	(void)events;
	if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == 0) {
		dial_done(d);
		return;
	}
	gw_io_del(l, &d->io);
	close(d->fd);
	d->fd = -1;
	dial_connect(d, err);
}

/* Checks every address, then connects; the connect timeout starts here. */
static void
dial_checked(struct gw_dial *d)
{
	for (size_t i = 0; i < d->addrs.naddrs; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&d->addrs.addrs[i];
		struct gw_policy_decision pd;
		char txt[GW_ADDR_FMT_MAX];

		if (gw_policy_check_addr(d->policy, sa, &pd) == 0)
			continue;
		gw_addr_format(sa, txt, sizeof(txt));
		dial_fail(d, GW_R_PRIVATE_ADDRESS, 0, "%s is %s, a %s address", d->host,
			  strcmp(txt, d->host) == 0 ? "itself" : txt,
			  gw_addr_class_name(gw_addr_classify(sa)));
		return;
	}
	if (d->pinned) {
		size_t i;

		for (i = 0; i < d->addrs.naddrs; i++)
			if (gw_addr_same((const struct sockaddr *)&d->addrs.addrs[i],
					 (const struct sockaddr *)&d->pin))
				break;
		if (i == d->addrs.naddrs) {
			char txt[GW_ADDR_FMT_MAX];

			gw_addr_format((const struct sockaddr *)&d->pin, txt, sizeof(txt));
			dial_fail(d, GW_R_SNI_ADDRESS_MISMATCH, 0, "%s does not resolve to %s",
				  d->host, txt);
			return;
		}
		d->addrs.addrs[0] = d->addrs.addrs[i];
		d->addrs.naddrs = 1;
	}
	d->next = 0;
	gw_timer_arm(d->w->loop, &d->timer, d->connect_timeout_ms);
	dial_connect(d, 0);
}

static void
dial_dns(int status, const struct gw_dns_result *res, void *arg)
{
	struct gw_dial *d = arg;

	d->q = NULL;
	gw_timer_cancel(d->w->loop, &d->timer);
	if (status == -ENOENT)
		dial_fail(d, GW_R_DNS_NXDOMAIN, ENOENT, "%s does not exist (NXDOMAIN or no address)", d->host);
	else if (status == -ETIMEDOUT)
		dial_fail(d, GW_R_DNS_TIMEOUT, ETIMEDOUT, "no DNS answer for %s in time", d->host);
	else if (status < 0)
		dial_fail(d, GW_R_DNS_FAILED, -status, "cannot resolve %s: %s", d->host, strerror(-status));
	else {
		d->addrs = *res;
		dial_checked(d);
	}
}

static void
dial_timeout(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_dial *d = t->arg;

	(void)l;
	if (d->state == GW_DIAL_RESOLVING)
		dial_fail(d, GW_R_DNS_TIMEOUT, ETIMEDOUT, "no DNS answer for %s in time", d->host);
	else
		dial_fail(d, GW_R_CONNECT_TIMEOUT, ETIMEDOUT, "no connection to %s:%u (%s) within %u ms",
			  d->host, d->port, d->upstream, d->connect_timeout_ms);
}

/* Runs the first step after the caller's callback, so that the callback
 * never runs inside gw_dial_start(): callers need not guard re-entry. */
static void
dial_kick(void *arg)
{
	struct gw_dial *d = arg;
	struct sockaddr_storage lit;
	int rc;

	if (d->state != GW_DIAL_RESOLVING)
		return;         /* cancelled meanwhile */
	if (gw_addr_parse_literal(d->host, strlen(d->host), &lit) == 1) {
		memset(&d->addrs, 0, sizeof(d->addrs));
		d->addrs.addrs[0] = lit;
		d->addrs.naddrs = 1;
		d->state = GW_DIAL_CONNECTING;
		dial_checked(d);
		return;
	}
	rc = gw_dns_resolve(d->w->dns, d->host, &d->addrs, dial_dns, d, &d->q);
	if (rc == 0) {
		/* c-ares times out on its own; this is the backstop. */
		gw_timer_arm(d->w->loop, &d->timer, d->connect_timeout_ms + 1000ull +
			     (uint64_t)d->dns_budget_ms);
		return;
	}
	if (rc == 1) {
		d->state = GW_DIAL_CONNECTING;
		dial_checked(d);
	} else if (rc == -ENOENT) {
		dial_fail(d, GW_R_DNS_NXDOMAIN, ENOENT, "%s does not exist (NXDOMAIN or no address)", d->host);
	} else {
		dial_fail(d, GW_R_DNS_FAILED, -rc, "cannot resolve %s: %s", d->host, strerror(-rc));
	}
}

void
gw_dial_start(struct gw_dial *d, struct gw_worker *w, const struct conf_gateway *g,
	      const struct gw_policy *policy, const char *host, uint16_t port,
	      gw_dial_cb cb, void *arg)
{
	gw_dial_cancel(d);
	d->w = w;
	d->policy = policy;
	snprintf(d->host, sizeof(d->host), "%s", host);
	d->port = port;
	d->connect_timeout_ms = g->connect_timeout_ms;
	d->dns_budget_ms = g->dns_timeout_ms * g->dns_attempts;
	d->cb = cb;
	d->arg = arg;
	d->upstream[0] = '\0';
	d->pinned = false;
	d->state = GW_DIAL_RESOLVING;
	gw_timer_init(&d->timer, dial_timeout, d);
	gw_defer(w->loop, &d->kick, dial_kick, d);
}

void
gw_dial_pin(struct gw_dial *d, const struct sockaddr *sa)
{
	memset(&d->pin, 0, sizeof(d->pin));
	memcpy(&d->pin, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						      : sizeof(struct sockaddr_in));
	d->pinned = true;
}

unsigned
gw_dial_status(enum gw_reason why)
{
	switch (why) {
	case GW_R_DNS_TIMEOUT:
	case GW_R_CONNECT_TIMEOUT:
		return 504;
	case GW_R_PRIVATE_ADDRESS:
	case GW_R_SNI_ADDRESS_MISMATCH:
		return 403;
	default:
		return 502;
	}
}

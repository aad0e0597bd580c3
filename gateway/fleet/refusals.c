/* refusals.c: the refuse chain's samples, turned into a few log lines per
 * sandbox (see refusals.h).
 *
 * Everything but gw_refusals_metrics() runs on the main loop. Per sandbox
 * that was refused lately there is one entry, keyed by its address: when
 * its last line was written, the refused counter then, and the latest
 * sample not yet told. An entry lives while its window is open or a line
 * is owed, so there are never more entries than sandboxes refused in the
 * last GW_REFUSALS_WINDOW_MS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netlink.h>

#include "fleet.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "nflog.h"
#include "refusals.h"

#define NBUCKETS 256

/* Where a sample's sandbox and its counter are looked up: the fleet, or a
 * test's fakes. */
struct rsource {
	int (*id_at)(void *arg, struct in_addr a, char *id);
	int (*refused)(void *arg, struct in_addr a, uint64_t *packets);
	void *arg;
};

struct rent {
	struct in_addr addr;
	char id[GW_FLEET_ID_MAX + 1];
	bool told;        /* a line was written for it */
	uint64_t line_ms; /* the loop's clock then */
	time_t line_wall; /* the wall clock then, for "since" */
	bool count_known;
	uint64_t count_at_line; /* its refused counter then */
	bool pending;           /* a sample since: `last` is owed a line */
	struct fw_refusal last;
	struct rent *next;
};

struct gw_refusals {
	struct rsource src;
	struct gw_loop *loop; /* NULL in tests */
	struct fw_log *log;
	struct gw_io io;
	struct gw_timer timer;
	struct rent *hash[NBUCKETS];
	bool lost_told;
};

static unsigned
bucket(struct in_addr a)
{
	uint32_t h = ntohl(a.s_addr);

	h ^= h >> 16;
	h *= 0x45d9f3bu;
	h ^= h >> 16;
	return h % NBUCKETS;
}

static const char *
proto_name(uint8_t p)
{
	switch (p) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_UDPLITE:
		return "udplite";
	case IPPROTO_SCTP:
		return "sctp";
	case IPPROTO_DCCP:
		return "dccp";
	default:
		return NULL;
	}
}

/* "tcp 1.2.3.4:5432", "icmp 1.2.3.4 (type 8 code 0)", "protocol 47 1.2.3.4" */
static void
describe(const struct fw_refusal *s, char *out, size_t outsz)
{
	const char *name = proto_name(s->proto);
	char dst[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &s->dst, dst, sizeof(dst));
	if (name && s->has_port)
		snprintf(out, outsz, "%s %s:%u", name, dst, s->dport);
	else if (s->has_icmp)
		snprintf(out, outsz, "icmp %s (type %u code %u)", dst, s->icmp_type, s->icmp_code);
	else if (name)
		snprintf(out, outsz, "%s %s", name, dst);
	else
		snprintf(out, outsz, "protocol %u %s", s->proto, dst);
}

/* Writes e's line naming sample s, and opens a new window. */
static void
tell(struct gw_refusals *r, struct rent *e, const struct fw_refusal *s, uint64_t now, time_t wall)
{
	char what[80], since[16] = "";
	uint64_t count = 0, more = 0;
	bool known = r->src.refused(r->src.arg, e->addr, &count) == 0;
	struct tm tm;

	describe(s, what, sizeof(what));
	/* s was counted after the last line's reading: it is one of them. */
	if (e->told && e->count_known && known && count > e->count_at_line)
		more = count - e->count_at_line - 1;
	if (more && gmtime_r(&e->line_wall, &tm))
		strftime(since, sizeof(since), "%H:%M:%SZ", &tm);
	if (more)
		gw_log_info("fleet: sandbox %s tried %s (refused; %" PRIu64 " more since %s)",
		            e->id, what, more, since);
	else
		gw_log_info("fleet: sandbox %s tried %s (refused)", e->id, what);
	e->told = true;
	e->line_ms = now;
	e->line_wall = wall;
	e->count_known = known;
	e->count_at_line = count;
	e->pending = false;
}

/* One sample: told now if its sandbox's window is closed, else kept for
 * the window's end. */
static void
note(struct gw_refusals *r, uint64_t now, time_t wall, const struct fw_refusal *s)
{
	char id[GW_FLEET_ID_MAX + 1];
	struct rent **head = &r->hash[bucket(s->src)], *e;

	if (r->src.id_at(r->src.arg, s->src, id) < 0)
		return; /* detached since: nobody to tell about */
	for (e = *head; e && e->addr.s_addr != s->src.s_addr; e = e->next)
		;
	if (e && strcmp(e->id, id) != 0) {
		/* The address went to another sandbox: a new story. */
		struct rent *next = e->next;

		memset(e, 0, sizeof(*e));
		e->next = next;
		e->addr = s->src;
		memcpy(e->id, id, sizeof(e->id));
	}
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return; /* a line lost; the counter still has it */
		e->addr = s->src;
		memcpy(e->id, id, sizeof(e->id));
		e->next = *head;
		*head = e;
	}
	if (!e->told || now - e->line_ms >= GW_REFUSALS_WINDOW_MS) {
		tell(r, e, s, now, wall);
		return;
	}
	e->pending = true;
	e->last = *s;
}

/* Closes every window that is due: a line for the ones owed one, the end
 * of the others. Returns the next window's end, or 0 when no entry is
 * left. */
static uint64_t
flush(struct gw_refusals *r, uint64_t now, time_t wall)
{
	uint64_t next = 0;

	for (size_t b = 0; b < NBUCKETS; b++) {
		struct rent **pp = &r->hash[b];

		while (*pp) {
			struct rent *e = *pp;

			if (now - e->line_ms >= GW_REFUSALS_WINDOW_MS) {
				if (!e->pending) {
					*pp = e->next;
					free(e);
					continue;
				}
				tell(r, e, &e->last, now, wall);
			}
			if (!next || e->line_ms + GW_REFUSALS_WINDOW_MS < next)
				next = e->line_ms + GW_REFUSALS_WINDOW_MS;
			pp = &e->next;
		}
	}
	return next;
}

static void
free_entries(struct gw_refusals *r)
{
	for (size_t b = 0; b < NBUCKETS; b++)
		while (r->hash[b]) {
			struct rent *e = r->hash[b];

			r->hash[b] = e->next;
			free(e);
		}
}

/* ---- the loop's side --------------------------------------------------- */

static void
on_timer(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_refusals *r = t->arg;
	uint64_t now = gw_loop_now(l), next = flush(r, now, time(NULL));

	if (next)
		gw_timer_arm(l, &r->timer, next > now ? next - now : 1);
}

static void
on_sample(void *arg, const struct fw_refusal *s)
{
	struct gw_refusals *r = arg;

	note(r, gw_loop_now(r->loop), time(NULL), s);
}

static void
on_readable(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_refusals *r = io->arg;
	int rc = fw_log_read(r->log, on_sample, r);

	(void)events;
	if (rc == -ENOBUFS && !r->lost_told) {
		r->lost_told = true;
		gw_log_warnx("fleet: refusal samples were lost (the daemon read too slowly); the "
		             "refused counters have every packet (said once)");
	} else if (rc < 0 && rc != -ENOBUFS) {
		gw_log_warnx("fleet: reading refusal samples: %s; no more refusal lines",
		             strerror(-rc));
		gw_io_del(l, io);
	}
	/* A window that began now ends GW_REFUSALS_WINDOW_MS later: no
	 * earlier deadline can be due than one already armed. */
	if (!gw_timer_armed(&r->timer)) {
		for (size_t b = 0; b < NBUCKETS; b++)
			if (r->hash[b]) {
				gw_timer_arm(l, &r->timer, GW_REFUSALS_WINDOW_MS);
				break;
			}
	}
}

static int
fleet_id_at(void *arg, struct in_addr a, char *id)
{
	(void)arg;
	return gw_fleet_id_at(a, id);
}

static int
fleet_refused(void *arg, struct in_addr a, uint64_t *packets)
{
	return gw_fleet_refused(arg, a, packets);
}

struct gw_refusals *
gw_refusals_start(struct gw_fleet *f, struct gw_loop *l, char *err, size_t errsz)
{
	struct gw_refusals *r = calloc(1, sizeof(*r));
	int fd, rc;

	if (!r) {
		snprintf(err, errsz, "fleet: refusals: out of memory");
		return NULL;
	}
	r->src = (struct rsource){fleet_id_at, fleet_refused, f};
	r->loop = l;
	gw_timer_init(&r->timer, on_timer, r);
	fd = gw_fleet_socket(f, AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
	if (fd < 0) {
		snprintf(err, errsz, "fleet: refusals: netlink socket: %s", strerror(-fd));
		goto fail;
	}
	r->log = fw_log_open(fd, err, errsz);
	if (!r->log)
		goto fail;
	rc = gw_io_add(l, &r->io, fw_log_fd(r->log), EPOLLIN, on_readable, r);
	if (rc < 0) {
		snprintf(err, errsz, "fleet: refusals: watching the socket: %s", strerror(-rc));
		goto fail;
	}
	return r;
fail:
	gw_refusals_stop(r);
	return NULL;
}

void
gw_refusals_stop(struct gw_refusals *r)
{
	if (!r)
		return;
	if (r->loop) {
		gw_io_del(r->loop, &r->io);
		gw_timer_cancel(r->loop, &r->timer);
	}
	fw_log_close(r->log);
	free_entries(r);
	free(r);
}

/* ---- /metrics ------------------------------------------------------------ */

static void
metric_lane(void *arg, const char *lane, uint64_t packets)
{
	struct gw_mbuf *b = arg;

	gw_mbuf_printf(b, "sluice_fleet_refused_total{");
	gw_mbuf_label(b, "lane", lane);
	gw_mbuf_printf(b, "} %" PRIu64 "\n", packets);
}

void
gw_refusals_metrics(struct gw_fleet *f, struct gw_mbuf *b)
{
	gw_metrics_family(b, "sluice_fleet_refused_total", "counter",
	                  "Packets from sandboxes that no door serves, refused by the fleet "
	                  "(answered with a TCP reset or an ICMP administratively prohibited, or "
	                  "dropped over the per-sandbox rate limit), by lane.");
	if (f)
		gw_fleet_refused_lanes(f, metric_lane, b);
}

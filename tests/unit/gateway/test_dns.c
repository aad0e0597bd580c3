/* test_dns.c: the answer cache with a fake clock, then the resolver for real
 * against a small DNS server this test runs on 127.0.0.1, driven by the
 * same gw_loop. Every loop run is bounded by a guard timer, so a bug fails
 * a test instead of hanging it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "dns.h"
#include "loop.h"

/* ---- helpers ---- */

static void
set4(struct sockaddr_storage *ss, const char *ip)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	sin->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, &sin->sin_addr), 1);
}

static void
set6(struct sockaddr_storage *ss, const char *ip)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	sin6->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, ip, &sin6->sin6_addr), 1);
}

/* "192.0.2.1" or "2001:db8::1", and port 0. */
static void
assert_addr(const struct sockaddr_storage *ss, const char *ip)
{
	char buf[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		assert_int_equal(sin->sin_port, 0);
		inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		assert_int_equal(ss->ss_family, AF_INET6);
		assert_int_equal(sin6->sin6_port, 0);
		inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
	}
	assert_string_equal(buf, ip);
}

static struct gw_dns_result
result1(const char *ip, uint32_t ttl)
{
	struct gw_dns_result r;

	memset(&r, 0, sizeof(r));
	set4(&r.addrs[0], ip);
	r.naddrs = 1;
	r.ttl = ttl;
	return r;
}

/* ---- the cache, with a fake clock ---- */

static void
test_cache_bad(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result r = result1("192.0.2.1", 60), out;
	char longname[300];

	(void)state;
	assert_non_null(c);
	assert_int_equal(gw_dns_cache_put(NULL, "a.test", &r, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put(c, "a.test", NULL, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put(c, NULL, &r, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put(c, "", &r, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put(c, "a..test", &r, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put(c, "a test", &r, 0), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(gw_dns_cache_put(c, longname, &r, 0), -EINVAL);
	r.naddrs = 0;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 0), -EINVAL);
	r.naddrs = GW_DNS_MAX_ADDRS + 1;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 0), -EINVAL);
	r.naddrs = 1;
	r.addrs[0].ss_family = AF_UNIX;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put_negative(NULL, "a.test", 0), -EINVAL);
	assert_int_equal(gw_dns_cache_put_negative(c, "", 0), -EINVAL);
	assert_int_equal(gw_dns_cache_count(c), 0);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 0, &out), 0);
	assert_int_equal(gw_dns_cache_get(c, NULL, 0, &out), 0);
	assert_int_equal(gw_dns_cache_get(NULL, "a.test", 0, &out), 0);
	gw_dns_cache_free(c);
	gw_dns_cache_free(NULL);
}

static void
test_cache_hit_expire(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result r, out;

	(void)state;
	memset(&r, 0, sizeof(r));
	set4(&r.addrs[0], "192.0.2.1");
	set6(&r.addrs[1], "2001:db8::1");
	r.naddrs = 2;
	r.ttl = 60;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 1000), 0);
	assert_int_equal(gw_dns_cache_count(c), 1);

	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(gw_dns_cache_get(c, "a.test", 1000, &out), 1);
	assert_int_equal(out.naddrs, 2);
	assert_int_equal(out.ttl, 60);
	assert_addr(&out.addrs[0], "192.0.2.1");
	assert_addr(&out.addrs[1], "2001:db8::1");

	assert_int_equal(gw_dns_cache_get(c, "a.test", 31000, &out), 1);
	assert_int_equal(out.ttl, 30);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 60999, &out), 1);
	assert_int_equal(out.ttl, 1);
	/* Expired at exactly put + ttl, and dropped. */
	assert_int_equal(gw_dns_cache_get(c, "a.test", 61000, &out), 0);
	assert_int_equal(gw_dns_cache_count(c), 0);
	assert_int_equal(gw_dns_cache_get(c, "b.test", 1000, &out), 0);
	gw_dns_cache_free(c);
}

static void
test_cache_keys(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result r = result1("192.0.2.1", 60), out;

	(void)state;
	assert_int_equal(gw_dns_cache_put(c, "Example.COM.", &r, 0), 0);
	assert_int_equal(gw_dns_cache_get(c, "example.com", 0, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "EXAMPLE.com.", 0, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "example.co", 0, &out), 0);
	assert_int_equal(gw_dns_cache_get(c, "www.example.com", 0, &out), 0);
	assert_int_equal(gw_dns_cache_count(c), 1);
	gw_dns_cache_free(c);
}

static void
test_cache_ttl_clamp(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result r = result1("192.0.2.1", 100000), out;
	uint64_t hour = (uint64_t)GW_DNS_TTL_MAX * 1000u;

	(void)state;
	/* Capped at one hour. */
	assert_int_equal(gw_dns_cache_put(c, "long.test", &r, 5), 0);
	assert_int_equal(gw_dns_cache_get(c, "long.test", 5, &out), 1);
	assert_int_equal(out.ttl, GW_DNS_TTL_MAX);
	assert_int_equal(gw_dns_cache_get(c, "long.test", 5 + hour - 1, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "long.test", 5 + hour, &out), 0);

	/* TTL 1 lives one second. */
	r.ttl = 1;
	assert_int_equal(gw_dns_cache_put(c, "short.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_get(c, "short.test", 999, &out), 1);
	assert_int_equal(out.ttl, 1);
	assert_int_equal(gw_dns_cache_get(c, "short.test", 1000, &out), 0);

	/* TTL 0 is not kept, and drops what was there. */
	r.ttl = 60;
	assert_int_equal(gw_dns_cache_put(c, "zero.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_count(c), 1);
	r.ttl = 0;
	assert_int_equal(gw_dns_cache_put(c, "zero.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_count(c), 0);
	assert_int_equal(gw_dns_cache_get(c, "zero.test", 0, &out), 0);
	gw_dns_cache_free(c);
}

static void
test_cache_lru(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(3);
	struct gw_dns_result r = result1("192.0.2.1", 60), out;

	(void)state;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_put(c, "b.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_put(c, "c.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_count(c), 3);
	/* a becomes the newest: b is now the oldest. */
	assert_int_equal(gw_dns_cache_get(c, "a.test", 1, &out), 1);
	assert_int_equal(gw_dns_cache_put(c, "d.test", &r, 2), 0);
	assert_int_equal(gw_dns_cache_count(c), 3);
	assert_int_equal(gw_dns_cache_get(c, "b.test", 3, &out), 0);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 3, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "c.test", 3, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "d.test", 3, &out), 1);
	/* Order now a, c, d (oldest first): a negative entry evicts a. */
	assert_int_equal(gw_dns_cache_put_negative(c, "e.test", 4), 0);
	assert_int_equal(gw_dns_cache_count(c), 3);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 5, &out), 0);
	assert_int_equal(gw_dns_cache_get(c, "e.test", 5, &out), -ENOENT);
	/* Many more than the bound. */
	for (int i = 0; i < 100; i++) {
		char name[32];

		snprintf(name, sizeof(name), "n%d.test", i);
		assert_int_equal(gw_dns_cache_put(c, name, &r, 10), 0);
		assert_true(gw_dns_cache_count(c) <= 3);
	}
	assert_int_equal(gw_dns_cache_get(c, "n99.test", 10, &out), 1);
	assert_int_equal(gw_dns_cache_get(c, "n96.test", 10, &out), 0);
	gw_dns_cache_free(c);
}

static void
test_cache_negative(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result out;

	(void)state;
	assert_int_equal(gw_dns_cache_put_negative(c, "nx.test", 100), 0);
	assert_int_equal(gw_dns_cache_get(c, "nx.test", 100, &out), -ENOENT);
	assert_int_equal(gw_dns_cache_get(c, "NX.test.", 100 + 4999, &out),
			 -ENOENT);
	assert_int_equal(gw_dns_cache_get(c, "nx.test", 100 + 5000, &out), 0);
	assert_int_equal(gw_dns_cache_count(c), 0);
	gw_dns_cache_free(c);
}

static void
test_cache_replace(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(4);
	struct gw_dns_result r1 = result1("192.0.2.1", 60);
	struct gw_dns_result r2 = result1("192.0.2.2", 10), out;

	(void)state;
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r1, 0), 0);
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r2, 1000), 0);
	assert_int_equal(gw_dns_cache_count(c), 1);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 1000, &out), 1);
	assert_int_equal(out.naddrs, 1);
	assert_addr(&out.addrs[0], "192.0.2.2");
	assert_int_equal(out.ttl, 10);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 11000, &out), 0);

	/* Positive replaced by negative, and back. */
	assert_int_equal(gw_dns_cache_put(c, "b.test", &r1, 0), 0);
	assert_int_equal(gw_dns_cache_put_negative(c, "b.test", 0), 0);
	assert_int_equal(gw_dns_cache_get(c, "b.test", 0, &out), -ENOENT);
	assert_int_equal(gw_dns_cache_put(c, "b.test", &r1, 0), 0);
	assert_int_equal(gw_dns_cache_get(c, "b.test", 0, &out), 1);
	assert_int_equal(gw_dns_cache_count(c), 1);
	gw_dns_cache_free(c);
}

static void
test_cache_cap0(void **state)
{
	struct gw_dns_cache *c = gw_dns_cache_new(0);
	struct gw_dns_result r = result1("192.0.2.1", 60), out;

	(void)state;
	assert_non_null(c);
	assert_int_equal(gw_dns_cache_put(c, "a.test", &r, 0), 0);
	assert_int_equal(gw_dns_cache_put_negative(c, "b.test", 0), 0);
	assert_int_equal(gw_dns_cache_count(c), 0);
	assert_int_equal(gw_dns_cache_get(c, "a.test", 0, &out), 0);
	gw_dns_cache_free(c);
}

/* ---- a DNS server on 127.0.0.1, in this process, on the same loop ---- */

#define T_A 1
#define T_AAAA 28

struct zone {
	const char *name;
	int rcode;              /* 3: NXDOMAIN, 5: REFUSED */
	int silent;             /* never answer */
	uint32_t ttl;
	const char *a[4];
	const char *aaaa[4];
	int many;               /* 10 A and 10 AAAA records */
};

static const struct zone zones[] = {
	{ "two.test", 0, 0, 60, { "192.0.2.1", "192.0.2.2" },
	  { "2001:db8::1" }, 0 },
	{ "nx.test", 3, 0, 0, { NULL }, { NULL }, 0 },
	{ "nodata.test", 0, 0, 60, { NULL }, { NULL }, 0 },
	{ "silent.test", 0, 1, 0, { NULL }, { NULL }, 0 },
	{ "zero.test", 0, 0, 0, { "192.0.2.9" }, { NULL }, 0 },
	{ "v6.test", 0, 0, 30, { NULL }, { "2001:db8::6" }, 0 },
	{ "many.test", 0, 0, 60, { NULL }, { NULL }, 1 },
	{ "api", 0, 0, 60, { "192.0.2.7" }, { NULL }, 0 },
	{ "api.corp.test", 0, 0, 60, { "192.0.2.66" }, { NULL }, 0 },
};

struct tsrv {
	int fd;
	uint16_t port;
	struct gw_io io;
	unsigned nq;                    /* queries received */
	char seen[64][270];             /* "name/type" of each */
};

struct ctx {
	struct gw_loop *l;
	struct tsrv srv;
	struct gw_dns *d;
	struct gw_timer guard;
	int guard_fired;
	int want;                       /* callbacks left before stopping */
};

static const struct zone *
zone_find(const char *name)
{
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++)
		if (strcmp(zones[i].name, name) == 0)
			return &zones[i];
	return NULL;
}

static size_t
put_rr(uint8_t *p, uint16_t type, uint32_t ttl, const void *rdata,
       uint16_t rdlen)
{
	p[0] = 0xc0;                    /* pointer to the question's name */
	p[1] = 12;
	p[2] = (uint8_t)(type >> 8);
	p[3] = (uint8_t)type;
	p[4] = 0;
	p[5] = 1;                       /* IN */
	p[6] = (uint8_t)(ttl >> 24);
	p[7] = (uint8_t)(ttl >> 16);
	p[8] = (uint8_t)(ttl >> 8);
	p[9] = (uint8_t)ttl;
	p[10] = (uint8_t)(rdlen >> 8);
	p[11] = (uint8_t)rdlen;
	memcpy(p + 12, rdata, rdlen);
	return 12u + rdlen;
}

static void
srv_read(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct tsrv *s = io->arg;
	uint8_t q[512], r[2048];
	struct sockaddr_storage from;
	socklen_t fromlen = sizeof(from);
	char name[256];
	size_t off = 12, nlen = 0, rl;
	ssize_t n;
	uint16_t qtype, an = 0;
	const struct zone *z;

	(void)l;
	(void)events;
	n = recvfrom(s->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fromlen);
	if (n < 12 || q[4] != 0 || q[5] != 1)
		return;
	for (;;) {
		size_t lab;

		if (off >= (size_t)n)
			return;
		lab = q[off++];
		if (lab == 0)
			break;
		if (lab > 63 || off + lab > (size_t)n || nlen + lab + 1 >= sizeof(name))
			return;
		if (nlen)
			name[nlen++] = '.';
		for (size_t i = 0; i < lab; i++) {
			char c = (char)q[off + i];

			name[nlen++] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
		}
		off += lab;
	}
	name[nlen] = '\0';
	if (off + 4 > (size_t)n)
		return;
	qtype = (uint16_t)(q[off] << 8 | q[off + 1]);
	off += 4;
	if (s->nq < 64)
		snprintf(s->seen[s->nq], sizeof(s->seen[0]), "%s/%u", name,
			 (unsigned)qtype);
	s->nq++;

	z = zone_find(name);
	if (z && z->silent)
		return;
	memcpy(r, q, off);              /* id, flags, counts, question */
	r[2] = 0x81;                    /* QR, RD */
	r[3] = 0x80;                    /* RA */
	r[6] = r[7] = r[8] = r[9] = r[10] = r[11] = 0;
	rl = off;
	if (!z) {
		r[3] |= 5;              /* REFUSED */
	} else if (z->rcode) {
		r[3] |= (uint8_t)z->rcode;
	} else if (z->many) {
		for (int i = 0; i < 10; i++) {
			uint8_t a4[4] = { 192, 0, 2, (uint8_t)(100 + i) };
			uint8_t a6[16] = { 0x20, 0x01, 0x0d, 0xb8 };

			a6[15] = (uint8_t)(i + 1);
			if (qtype == T_A)
				rl += put_rr(r + rl, T_A, z->ttl, a4, 4);
			else if (qtype == T_AAAA)
				rl += put_rr(r + rl, T_AAAA, z->ttl, a6, 16);
			else
				break;
			an++;
		}
	} else {
		for (int i = 0; i < 4; i++) {
			uint8_t buf[16];

			if (qtype == T_A && z->a[i]) {
				assert_int_equal(inet_pton(AF_INET, z->a[i], buf), 1);
				rl += put_rr(r + rl, T_A, z->ttl, buf, 4);
				an++;
			} else if (qtype == T_AAAA && z->aaaa[i]) {
				assert_int_equal(inet_pton(AF_INET6, z->aaaa[i], buf), 1);
				rl += put_rr(r + rl, T_AAAA, z->ttl, buf, 16);
				an++;
			}
		}
	}
	r[6] = (uint8_t)(an >> 8);
	r[7] = (uint8_t)an;
	(void)sendto(s->fd, r, rl, 0, (struct sockaddr *)&from, fromlen);
}

static unsigned
srv_count(const struct tsrv *s, const char *name)
{
	size_t len = strlen(name);
	unsigned k = 0;

	for (unsigned i = 0; i < s->nq && i < 64; i++)
		if (strncmp(s->seen[i], name, len) == 0 && s->seen[i][len] == '/')
			k++;
	return k;
}

static void
guard_fired(struct gw_loop *l, struct gw_timer *t)
{
	struct ctx *c = t->arg;

	c->guard_fired = 1;
	gw_loop_stop(l);
}

/* Runs the loop until `want` callbacks have run (or the guard fires after
 * bound_ms). */
static void
run(struct ctx *c, int want, uint64_t bound_ms)
{
	c->want = want;
	c->guard_fired = 0;
	gw_timer_init(&c->guard, guard_fired, c);
	assert_int_equal(gw_timer_arm(c->l, &c->guard, bound_ms), 0);
	assert_int_equal(gw_loop_run(c->l), 0);
	gw_timer_cancel(c->l, &c->guard);
}

/* One callback's record. */
struct rec {
	struct ctx *c;
	int calls;
	int status;
	struct gw_dns_result res;
	int free_dns;                   /* gw_dns_free() from the callback */
	int resolve_again;              /* resolve the name again from it */
	int again_rc;
	struct gw_dns_result again;
};

static void
on_dns(int status, const struct gw_dns_result *res, void *arg)
{
	struct rec *r = arg;
	struct ctx *c = r->c;

	r->calls++;
	r->status = status;
	if (status == 0) {
		assert_non_null(res);
		r->res = *res;
	} else {
		assert_null(res);
	}
	if (r->resolve_again) {
		struct gw_dns_query *q = (struct gw_dns_query *)&q;

		r->again_rc = gw_dns_resolve(c->d, "two.test", &r->again,
					     on_dns, r, &q);
		assert_null(q);
	}
	if (r->free_dns) {
		gw_dns_free(c->d);
		c->d = NULL;
	}
	if (--c->want <= 0)
		gw_loop_stop(c->l);
}

static struct gw_dns *
dns_make(struct ctx *c, uint32_t cache_size)
{
	struct conf_dns_server srv;
	struct conf_gateway g;
	struct sockaddr_in *sin = (struct sockaddr_in *)&srv.addr;
	char err[256];
	struct gw_dns *d;

	memset(&srv, 0, sizeof(srv));
	srv.kind = CONF_DNS_ADDR;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(c->srv.port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.addrlen = sizeof(*sin);
	memset(&g, 0, sizeof(g));
	g.dns_servers = &srv;
	g.ndns_servers = 1;
	g.dns_timeout_ms = 200;
	g.dns_attempts = 1;
	g.dns_cache_size = cache_size;
	d = gw_dns_new(c->l, &g, err, sizeof(err));
	if (!d)
		fail_msg("gw_dns_new: %s", err);
	return d;
}

static int
setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);

	if (!c)
		return -1;
	c->l = gw_loop_new();
	if (!c->l)
		return -1;
	c->srv.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->srv.fd < 0)
		return -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(c->srv.fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(c->srv.fd, (struct sockaddr *)&sin, &len) < 0)
		return -1;
	c->srv.port = ntohs(sin.sin_port);
	if (gw_io_add(c->l, &c->srv.io, c->srv.fd, EPOLLIN, srv_read, &c->srv) < 0)
		return -1;
	c->d = dns_make(c, 64);
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	struct ctx *c = *state;

	gw_dns_free(c->d);
	gw_io_del(c->l, &c->srv.io);
	close(c->srv.fd);
	gw_loop_free(c->l);
	free(c);
	return 0;
}

/* ---- the resolver: bad input first ---- */

static void
test_new_bad(void **state)
{
	struct ctx *c = *state;
	struct conf_dns_server srv;
	struct conf_gateway g;
	char err[256];

	memset(&g, 0, sizeof(g));
	errno = 0;
	assert_null(gw_dns_new(NULL, &g, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
	assert_null(gw_dns_new(c->l, NULL, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);

	memset(&srv, 0, sizeof(srv));
	srv.kind = CONF_DNS_ADDR;
	srv.addr.ss_family = AF_UNIX;
	srv.pos.line = 7;
	g.dns_servers = &srv;
	g.ndns_servers = 1;
	err[0] = '\0';
	errno = 0;
	assert_null(gw_dns_new(c->l, &g, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(err, "servers[0]"));
	assert_non_null(strstr(err, "line 7"));
}

static void
test_resolve_bad(void **state)
{
	struct ctx *c = *state;
	struct gw_dns_result out;
	struct gw_dns_query *q;
	struct gw_dns_stats st;
	struct rec r = { .c = c };
	char longname[300], longlabel[80];
	const char *bad[] = {
		"", ".", "..", "a..test", ".a.test", "a test", "a:b.test",
		"a/b", "caf\xc3\xa9.test", "a\tb", "fe80::1%eth0", longname,
		longlabel,
	};

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memset(longlabel, 'b', sizeof(longlabel) - 1);
	memcpy(longlabel + sizeof(longlabel) - 6, ".test", 6);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		q = (struct gw_dns_query *)&q;
		assert_int_equal(gw_dns_resolve(c->d, bad[i], &out, on_dns, &r, &q),
				 -EINVAL);
		assert_null(q);
	}
	q = (struct gw_dns_query *)&q;
	assert_int_equal(gw_dns_resolve(c->d, NULL, &out, on_dns, &r, &q), -EINVAL);
	assert_null(q);
	assert_int_equal(gw_dns_resolve(NULL, "a.test", &out, on_dns, &r, &q),
			 -EINVAL);
	assert_int_equal(gw_dns_resolve(c->d, "a.test", &out, NULL, &r, &q),
			 -EINVAL);
	assert_int_equal(gw_dns_resolve(c->d, "a.test", NULL, on_dns, &r, &q),
			 -EINVAL);
	assert_int_equal(gw_dns_resolve(c->d, "a.test", &out, on_dns, &r, NULL),
			 -EINVAL);
	gw_dns_cancel(NULL);
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.resolves, 0);
	assert_int_equal(st.queries, 0);
	assert_int_equal(c->srv.nq, 0);
	assert_int_equal(r.calls, 0);
}

/* ---- the resolver against the test server ---- */

static void
test_resolve_all_addrs_then_cache(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	struct gw_dns_stats st;

	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r, &q), 0);
	assert_non_null(q);
	assert_int_equal(r.calls, 0);   /* never from inside resolve */
	run(c, 1, 3000);
	assert_false(c->guard_fired);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, 3);
	assert_int_equal(r.res.ttl, 60);
	/* IPv4 first, then IPv6, each in answer order. */
	assert_addr(&r.res.addrs[0], "192.0.2.1");
	assert_addr(&r.res.addrs[1], "192.0.2.2");
	assert_addr(&r.res.addrs[2], "2001:db8::1");
	assert_int_equal(srv_count(&c->srv, "two.test"), 2);  /* A + AAAA */
	assert_int_equal(c->srv.nq, 2);

	/* Again, in any spelling: from the cache, no callback, no query. */
	memset(&out, 0, sizeof(out));
	q = (struct gw_dns_query *)&q;
	assert_int_equal(gw_dns_resolve(c->d, "TWO.test.", &out, on_dns, &r, &q), 1);
	assert_null(q);
	assert_int_equal(out.naddrs, 3);
	assert_true(out.ttl >= 59 && out.ttl <= 60);
	assert_addr(&out.addrs[0], "192.0.2.1");
	assert_addr(&out.addrs[1], "192.0.2.2");
	assert_addr(&out.addrs[2], "2001:db8::1");
	assert_int_equal(c->srv.nq, 2);
	assert_int_equal(r.calls, 1);

	gw_dns_stats(c->d, &st);
	assert_int_equal(st.resolves, 2);
	assert_int_equal(st.queries, 1);
	assert_int_equal(st.cache_hits, 1);
	assert_int_equal(st.answers, 1);
	assert_int_equal(st.failures + st.timeouts + st.nxdomain, 0);
}

static void
test_resolve_v6_only(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;

	assert_int_equal(gw_dns_resolve(c->d, "v6.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, 1);
	assert_int_equal(r.res.ttl, 30);
	assert_addr(&r.res.addrs[0], "2001:db8::6");
}

static void
test_resolve_many_truncated(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	char want[64];

	assert_int_equal(gw_dns_resolve(c->d, "many.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, GW_DNS_MAX_ADDRS);
	/* All 10 IPv4 first, then the first 6 IPv6. */
	for (int i = 0; i < 10; i++) {
		snprintf(want, sizeof(want), "192.0.2.%d", 100 + i);
		assert_addr(&r.res.addrs[i], want);
	}
	for (int i = 10; i < GW_DNS_MAX_ADDRS; i++) {
		snprintf(want, sizeof(want), "2001:db8::%x", i - 9);
		assert_addr(&r.res.addrs[i], want);
	}
}

static void
test_resolve_coalesce(void **state)
{
	struct ctx *c = *state;
	struct rec r1 = { .c = c }, r2 = { .c = c }, r3 = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q1 = NULL, *q2 = NULL, *q3 = NULL;
	struct gw_dns_stats st;

	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r1, &q1), 0);
	assert_int_equal(gw_dns_resolve(c->d, "Two.Test", &out, on_dns, &r2, &q2), 0);
	assert_int_equal(gw_dns_resolve(c->d, "two.test.", &out, on_dns, &r3, &q3), 0);
	assert_non_null(q1);
	assert_non_null(q2);
	assert_ptr_not_equal(q1, q2);
	run(c, 3, 3000);
	assert_false(c->guard_fired);
	assert_int_equal(r1.calls, 1);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r3.calls, 1);
	assert_int_equal(r1.status, 0);
	assert_int_equal(r2.status, 0);
	assert_int_equal(r2.res.naddrs, 3);
	assert_int_equal(srv_count(&c->srv, "two.test"), 2);  /* one lookup */
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.queries, 1);
	assert_int_equal(st.coalesced, 2);
}

static void
test_resolve_cancel(void **state)
{
	struct ctx *c = *state;
	struct rec r1 = { .c = c }, r2 = { .c = c }, r3 = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q1 = NULL, *q2 = NULL, *q3 = NULL;
	struct gw_dns_stats st;

	/* One of two waiters withdrawn: only the other is called. */
	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r1, &q1), 0);
	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r2, &q2), 0);
	gw_dns_cancel(q1);
	run(c, 1, 3000);
	assert_false(c->guard_fired);
	assert_int_equal(r1.calls, 0);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.status, 0);

	/* The only waiter withdrawn: no callback, but the answer still
	 * lands in the cache. */
	assert_int_equal(gw_dns_resolve(c->d, "v6.test", &out, on_dns, &r3, &q3), 0);
	gw_dns_cancel(q3);
	run(c, 1, 400);                 /* no callback: the guard stops it */
	assert_true(c->guard_fired);
	assert_int_equal(r3.calls, 0);
	assert_int_equal(srv_count(&c->srv, "v6.test"), 2);
	assert_int_equal(gw_dns_resolve(c->d, "v6.test", &out, on_dns, &r3, &q3), 1);
	assert_addr(&out.addrs[0], "2001:db8::6");
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.cancelled, 2);
}

static void
test_resolve_nxdomain(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	struct gw_dns_stats st;

	assert_int_equal(gw_dns_resolve(c->d, "nx.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ENOENT);
	assert_int_equal(srv_count(&c->srv, "nx.test"), 2);
	/* Cached as negative: answered at once, no query. */
	q = (struct gw_dns_query *)&q;
	assert_int_equal(gw_dns_resolve(c->d, "nx.test", &out, on_dns, &r, &q),
			 -ENOENT);
	assert_null(q);
	assert_int_equal(srv_count(&c->srv, "nx.test"), 2);
	assert_int_equal(r.calls, 1);
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.nxdomain, 1);
	assert_int_equal(st.cache_hits, 1);
}

static void
test_resolve_nodata(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;

	assert_int_equal(gw_dns_resolve(c->d, "nodata.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ENOENT);
	assert_int_equal(gw_dns_resolve(c->d, "nodata.test", &out, on_dns, &r, &q),
			 -ENOENT);
	assert_int_equal(srv_count(&c->srv, "nodata.test"), 2);
}

static void
test_resolve_refused(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	struct gw_dns_stats st;

	assert_int_equal(gw_dns_resolve(c->d, "unknown.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -EIO);
	/* Failures are not cached: the next resolve asks again. */
	assert_int_equal(gw_dns_resolve(c->d, "unknown.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.status, -EIO);
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.failures, 2);
	assert_int_equal(st.queries, 2);
}

static void
test_resolve_timeout(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	struct gw_dns_stats st;
	uint64_t t0 = gw_loop_now(c->l);

	assert_int_equal(gw_dns_resolve(c->d, "silent.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_false(c->guard_fired);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ETIMEDOUT);
	/* dns_timeout_ms 200, one attempt. */
	assert_true(gw_loop_now(c->l) - t0 >= 150);
	assert_true(gw_loop_now(c->l) - t0 < 1500);
	assert_int_equal(srv_count(&c->srv, "silent.test"), 2);
	gw_dns_stats(c->d, &st);
	assert_int_equal(st.timeouts, 1);
	/* Not cached: a new lookup (cancelled, and freed by teardown while
	 * in flight). */
	assert_int_equal(gw_dns_resolve(c->d, "silent.test", &out, on_dns, &r, &q), 0);
	assert_non_null(q);
	gw_dns_cancel(q);
}

static void
test_resolve_ttl0(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;

	assert_int_equal(gw_dns_resolve(c->d, "zero.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, 1);
	assert_int_equal(r.res.ttl, 0);
	assert_addr(&r.res.addrs[0], "192.0.2.9");
	/* Used, not cached. */
	assert_int_equal(gw_dns_resolve(c->d, "zero.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 2);
	assert_int_equal(srv_count(&c->srv, "zero.test"), 4);
}

static void
test_resolve_literals(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = (struct gw_dns_query *)&q;

	assert_int_equal(gw_dns_resolve(c->d, "192.0.2.55", &out, on_dns, &r, &q), 1);
	assert_null(q);
	assert_int_equal(out.naddrs, 1);
	assert_addr(&out.addrs[0], "192.0.2.55");
	assert_int_equal(gw_dns_resolve(c->d, "2001:DB8::5", &out, on_dns, &r, &q), 1);
	assert_addr(&out.addrs[0], "2001:db8::5");
	assert_int_equal(gw_dns_resolve(c->d, "::ffff:10.0.0.1", &out, on_dns, &r, &q), 1);
	assert_int_equal(out.addrs[0].ss_family, AF_INET6);
	assert_int_equal(c->srv.nq, 0);
	assert_int_equal(r.calls, 0);
}

/* The hosts file answers at once when the host's resolver order reads it
 * first (nsswitch "files dns", c-ares's default): no callback, no query. */
static void
test_resolve_hosts_file(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	int rc = gw_dns_resolve(c->d, "localhost", &out, on_dns, &r, &q);

	if (rc == 0) {          /* a host that asks DNS first */
		gw_dns_cancel(q);
		sl_skip("resolve_hosts_file: this host's resolver asks DNS before the hosts file");
	}
	assert_int_equal(rc, 1);
	assert_null(q);
	assert_true(out.naddrs >= 1);
	if (out.addrs[0].ss_family == AF_INET)
		assert_int_equal(((struct sockaddr_in *)&out.addrs[0])->sin_addr.s_addr,
				 htonl(INADDR_LOOPBACK));
	assert_int_equal(c->srv.nq, 0);
	assert_int_equal(r.calls, 0);
}

/* Explicit servers mixed with "system": the list keeps the configured
 * order, so the explicit one (first) answers. */
static void
test_resolve_mixed_servers(void **state)
{
	struct ctx *c = *state;
	struct conf_dns_server srv[2];
	struct conf_gateway g;
	struct sockaddr_in *sin = (struct sockaddr_in *)&srv[0].addr;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;
	char err[256];

	gw_dns_free(c->d);
	memset(srv, 0, sizeof(srv));
	srv[0].kind = CONF_DNS_ADDR;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(c->srv.port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv[1].kind = CONF_DNS_SYSTEM;
	memset(&g, 0, sizeof(g));
	g.dns_servers = srv;
	g.ndns_servers = 2;
	g.dns_timeout_ms = 200;
	g.dns_attempts = 1;
	g.dns_cache_size = 8;
	c->d = gw_dns_new(c->l, &g, err, sizeof(err));
	if (!c->d)
		fail_msg("gw_dns_new: %s", err);
	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, 3);
}

/* "api" is asked as "api", never with a search domain appended, even with
 * LOCALDOMAIN set (c-ares reads it at init). */
static void
test_resolve_no_search(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q = NULL;

	gw_dns_free(c->d);
	setenv("LOCALDOMAIN", "corp.test", 1);
	setenv("RES_OPTIONS", "ndots:5", 1);
	c->d = dns_make(c, 64);
	unsetenv("LOCALDOMAIN");
	unsetenv("RES_OPTIONS");
	assert_int_equal(gw_dns_resolve(c->d, "api", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.res.naddrs, 1);
	assert_addr(&r.res.addrs[0], "192.0.2.7");
	assert_int_equal(srv_count(&c->srv, "api"), 2);
	assert_int_equal(srv_count(&c->srv, "api.corp.test"), 0);
	assert_int_equal(c->srv.nq, 2);
}

/* Freed with lookups in flight (one answered on the wire, one never): no
 * callback, nothing leaked (ASan's leak check runs at exit). */
static void
test_free_in_flight(void **state)
{
	struct ctx *c = *state;
	struct rec r1 = { .c = c }, r2 = { .c = c }, r3 = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q1, *q2, *q3;

	assert_int_equal(gw_dns_resolve(c->d, "silent.test", &out, on_dns, &r1, &q1), 0);
	assert_int_equal(gw_dns_resolve(c->d, "silent.test", &out, on_dns, &r2, &q2), 0);
	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r3, &q3), 0);
	/* Let the queries reach the server but end before the timeout. */
	run(c, 100, 50);
	assert_true(c->guard_fired);
	assert_int_equal(srv_count(&c->srv, "silent.test"), 2);
	gw_dns_free(c->d);
	c->d = NULL;
	/* Nothing more may happen: run on a while with the answers that
	 * were on the wire. */
	run(c, 100, 300);
	assert_int_equal(r1.calls + r2.calls, 0);
	assert_true(r3.calls <= 1);     /* may have landed before the free */
}

/* A callback frees the resolver: the other waiter of the same lookup and
 * every later lookup stay silent. */
static void
test_free_from_callback(void **state)
{
	struct ctx *c = *state;
	struct rec r1 = { .c = c, .free_dns = 1 }, r2 = { .c = c };
	struct rec r3 = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q1, *q2, *q3;

	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r1, &q1), 0);
	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r2, &q2), 0);
	assert_int_equal(gw_dns_resolve(c->d, "silent.test", &out, on_dns, &r3, &q3), 0);
	run(c, 1, 3000);
	assert_false(c->guard_fired);
	assert_int_equal(r1.calls, 1);
	assert_null(c->d);
	run(c, 1, 400);
	assert_true(c->guard_fired);
	assert_int_equal(r2.calls, 0);
	assert_int_equal(r3.calls, 0);
}

/* A callback may resolve again: the answer is already cached. */
static void
test_resolve_from_callback(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c, .resolve_again = 1 };
	struct gw_dns_result out;
	struct gw_dns_query *q;

	assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r, &q), 0);
	run(c, 1, 3000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.again_rc, 1);
	assert_int_equal(r.again.naddrs, 3);
	assert_int_equal(c->srv.nq, 2);
}

/* Cache size 0: nothing kept, every resolve asks. */
static void
test_resolve_no_cache(void **state)
{
	struct ctx *c = *state;
	struct rec r = { .c = c };
	struct gw_dns_result out;
	struct gw_dns_query *q;

	gw_dns_free(c->d);
	c->d = dns_make(c, 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(gw_dns_resolve(c->d, "two.test", &out, on_dns, &r, &q), 0);
		run(c, 1, 3000);
		assert_int_equal(r.status, 0);
	}
	assert_int_equal(r.calls, 2);
	assert_int_equal(c->srv.nq, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_bad),
		cmocka_unit_test(test_cache_hit_expire),
		cmocka_unit_test(test_cache_keys),
		cmocka_unit_test(test_cache_ttl_clamp),
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_cache_negative),
		cmocka_unit_test(test_cache_replace),
		cmocka_unit_test(test_cache_cap0),
		cmocka_unit_test_setup_teardown(test_new_bad, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_bad, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_all_addrs_then_cache,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_v6_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_many_truncated,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_coalesce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_nxdomain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_nodata, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_ttl0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_literals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_hosts_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_mixed_servers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_resolve_no_search, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_from_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_resolve_from_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_resolve_no_cache, setup, teardown),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* bench_nft.c: nft_bench, timing the `inet sluice` table operations in the
 * calling network namespace. bench/nft.sh runs it in a namespace of its
 * own; never run it in a namespace whose firewall matters (it replaces the
 * table `inet sluice` there, and removes it unless -k).
 *
 *   nft_bench [-n SANDBOXES] [-r RECONCILES] [-o OPS] [-k]
 *   nft_bench -d          a small demo table, left in place, for nft list
 *
 * The sandboxes are 10.88.0.2, 10.88.0.3, ... in lane egress (10.88.0.0/16,
 * doors 3128 1080 3129, transparent); the even-numbered ones (0, 2, ...)
 * are unlocked. -k leaves the table as the reconcile made it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nft.h"

static const struct fw_lane lanes[] = {
    {.name = "egress",
     .prefix = 16,
     .ports = {3128, 1080, 3129},
     .nports = 3,
     .http_port = 3128,
     .tls_port = 3129},
    {.name = "direct", .prefix = 24, .ports = {3128, 1080}, .nports = 2},
    {.name = "none", .prefix = 24},
};
#define NLANES (sizeof(lanes) / sizeof(lanes[0]))

static struct fw_lane lane_v[NLANES];

static void
lanes_init(void)
{
	static const char *const nets[][2] = {
	    {"10.88.0.0", "10.88.0.1"},
	    {"10.90.1.0", "10.90.1.1"},
	    {"10.90.2.0", "10.90.2.1"},
	};

	for (size_t i = 0; i < NLANES; i++) {
		lane_v[i] = lanes[i];
		inet_pton(AF_INET, nets[i][0], &lane_v[i].subnet);
		inet_pton(AF_INET, nets[i][1], &lane_v[i].gateway);
	}
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile (0.5: median) of v[0..n), sorting v. */
static double
quantile(double *v, size_t n, double q)
{
	size_t i;

	qsort(v, n, sizeof(*v), cmp_double);
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static void
sbx_make(struct fw_sbx *s, const struct fw_lane *l, uint32_t host, bool unlocked)
{
	memset(s, 0, sizeof(*s));
	s->addr.s_addr = htonl(ntohl(l->subnet.s_addr) + host);
	s->lane = l;
	s->unlocked = unlocked;
	fw_ifname(s->addr, s->ifname);
}

static int
commit(struct fw_ctx *c, struct fw_batch *b, const char *what)
{
	char err[256];
	int ret = fw_commit(c, b, err, sizeof(err));

	if (ret < 0)
		fprintf(stderr, "nft_bench: %s: %s\n", what, err);
	fw_batch_reset(b);
	return ret;
}

static int
demo(struct fw_ctx *c, struct fw_batch *b)
{
	struct fw_sbx s[4];

	sbx_make(&s[0], &lane_v[0], 6, true);
	sbx_make(&s[1], &lane_v[1], 7, false);
	sbx_make(&s[2], &lane_v[2], 8, false);
	sbx_make(&s[3], &lane_v[0], 9, false);
	s[0].start.tx_packets = 5;
	s[0].start.tx_bytes = 300;
	if (fw_build_reconcile(b, lane_v, NLANES, s, 3) < 0 || commit(c, b, "reconcile") < 0)
		return 1;
	if (fw_build_attach(b, &s[3]) < 0 || fw_build_unlock(b, &s[3]) < 0 ||
	    commit(c, b, "attach+unlock") < 0)
		return 1;
	return 0;
}

struct opts {
	size_t n, runs, ops;
	bool keep;
};

static int
bench_reconcile(struct fw_ctx *c, struct fw_batch *b, const struct fw_sbx *s, const struct opts *o)
{
	double *build = calloc(o->runs, sizeof(double)), *t = calloc(o->runs, sizeof(double));
	size_t len = 0;
	int ret = 0;

	if (!build || !t)
		return -ENOMEM;
	for (size_t r = 0; r < o->runs && !ret; r++) {
		double t0 = now_us(), t1;

		ret = fw_build_reconcile(b, lane_v, NLANES, s, o->n);
		t1 = now_us();
		fw_batch_data(b, &len);
		if (!ret)
			ret = commit(c, b, "reconcile");
		build[r] = t1 - t0;
		t[r] = now_us() - t1;
	}
	if (!ret) {
		printf("reconcile %zu: batch %zu KiB, build median %.2f ms\n", o->n, len / 1024,
		       quantile(build, o->runs, 0.5) / 1e3);
		printf("reconcile %zu: median %.2f ms p99 %.2f ms (goal < 50 ms)\n", o->n,
		       quantile(t, o->runs, 0.5) / 1e3, quantile(t, o->runs, 0.99) / 1e3);
	}
	free(build);
	free(t);
	return ret;
}

typedef int (*op_fn)(struct fw_batch *b, const struct fw_sbx *s);

/* Unlocks then locks locked sandboxes (odd numbers), ops times each. */
static int
bench_ops(struct fw_ctx *c, struct fw_batch *b, const struct fw_sbx *s, const struct opts *o)
{
	double *tu = calloc(o->ops, sizeof(double)), *tl = calloc(o->ops, sizeof(double));
	size_t nlocked = o->n / 2;
	int ret = 0;

	if (!tu || !tl || !nlocked)
		return -EINVAL;
	for (size_t k = 0; k < o->ops && !ret; k++) {
		const struct fw_sbx *x = &s[2 * (k % nlocked) + 1];
		double t0 = now_us(), t1;

		ret = fw_build_unlock(b, x);
		if (!ret)
			ret = commit(c, b, "unlock");
		t1 = now_us();
		if (!ret)
			ret = fw_build_lock(b, x);
		if (!ret)
			ret = commit(c, b, "lock");
		tu[k] = t1 - t0;
		tl[k] = now_us() - t1;
	}
	if (!ret) {
		printf("unlock: median %.1f us p99 %.1f us (goal < 1 ms)\n",
		       quantile(tu, o->ops, 0.5), quantile(tu, o->ops, 0.99));
		printf("lock: median %.1f us p99 %.1f us (goal < 1 ms)\n",
		       quantile(tl, o->ops, 0.5), quantile(tl, o->ops, 0.99));
	}
	free(tu);
	free(tl);
	return ret;
}

static int
count_cb(void *arg, struct in_addr a, const struct fw_counters *n)
{
	(void)a;
	(void)n;
	(*(size_t *)arg)++;
	return 0;
}

static int
bench_dump(struct fw_ctx *c, size_t n)
{
	size_t seen = 0;
	double t0 = now_us();
	int ret = fw_counters_dump(c, count_cb, &seen);

	if (ret < 0) {
		fprintf(stderr, "nft_bench: counters dump: %s\n", strerror(-ret));
		return ret;
	}
	printf("counters dump %zu: %.2f ms\n", seen, (now_us() - t0) / 1e3);
	if (seen != n) {
		fprintf(stderr, "nft_bench: dump saw %zu sandboxes, not %zu\n", seen, n);
		return -EPROTO;
	}
	return 0;
}

static int
parse(int argc, char **argv, struct opts *o, bool *demo_only)
{
	int ch;

	while ((ch = getopt(argc, argv, "n:r:o:kd")) != -1) {
		switch (ch) {
		case 'n':
			o->n = strtoul(optarg, NULL, 10);
			break;
		case 'r':
			o->runs = strtoul(optarg, NULL, 10);
			break;
		case 'o':
			o->ops = strtoul(optarg, NULL, 10);
			break;
		case 'k':
			o->keep = true;
			break;
		case 'd':
			*demo_only = true;
			break;
		default:
			return -1;
		}
	}
	if (o->n < 2 || o->n > 60000 || !o->runs || !o->ops)
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = {.n = 1000, .runs = 20, .ops = 1000};
	bool demo_only = false;
	struct fw_sbx *s = NULL;
	struct fw_batch *b;
	struct fw_ctx *c;
	char err[256];
	int ret;

	if (parse(argc, argv, &o, &demo_only) < 0) {
		fprintf(stderr,
		        "usage: nft_bench [-n SANDBOXES] [-r RECONCILES] [-o OPS] [-k] | -d\n");
		return 2;
	}
	lanes_init();
	b = fw_batch_new();
	c = fw_open(err, sizeof(err));
	if (!b || !c) {
		fprintf(stderr, "nft_bench: %s\n", c ? "out of memory" : err);
		return 1;
	}
	if (demo_only) {
		ret = demo(c, b);
		goto out;
	}
	s = calloc(o.n, sizeof(*s));
	ret = s ? 0 : -ENOMEM;
	for (size_t i = 0; i < o.n && s; i++)
		sbx_make(&s[i], &lane_v[0], 2 + (uint32_t)i, i % 2 == 0);
	if (!ret)
		ret = bench_reconcile(c, b, s, &o);
	if (!ret)
		ret = bench_ops(c, b, s, &o);
	if (!ret)
		ret = bench_dump(c, o.n);
	if (!o.keep && fw_build_remove(b) == 0)
		commit(c, b, "remove");
out:
	free(s);
	fw_close(c);
	fw_batch_free(b);
	return ret ? 1 : 0;
}

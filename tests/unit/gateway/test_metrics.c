/* test_metrics.c: gateway/metrics.c. The text buffer's failures first
 * (allocation refused at every growth), then escaping, the door counters
 * through gw_access_write() with the access log off, histograms, the
 * tunnel gauge through gw_tunnel_init()/_fini() on a real relay, and a
 * two-thread smoke test whose totals must be exact.
 *
 * The file includes metrics.c to reach its allocator hook; the library's
 * copy is then never linked in (every symbol is already defined here). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../gateway/core/metrics.c"

#include "access.h"
#include "tunnel.h"
#include "xprt.h"

/* ---- helpers -------------------------------------------------------- */

/* Refuses every growth after `allow` more successes (-1: never refuses). */
static int allow_allocs = -1;

static void *
failing_realloc(void *p, size_t n)
{
	if (allow_allocs == 0)
		return NULL;
	if (allow_allocs > 0)
		allow_allocs--;
	return realloc(p, n);
}

static void
use_failing_realloc(int allow)
{
	allow_allocs = allow;
	mbuf_realloc = failing_realloc;
}

static int
restore_realloc(void **state)
{
	(void)state;
	mbuf_realloc = realloc;
	allow_allocs = -1;
	return 0;
}

static void
access_write(const char *door, const char *decision, enum gw_reason reason)
{
	struct gw_access a = {
	    .door = door,
	    .decision = decision,
	    .reason = reason,
	    .src = "127.0.0.1:1",
	};

	gw_access_write(&a);
}

static void
assert_has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("missing line \"%s\" in:\n%s", line, text);
}

static void
assert_no_line_starting(const char *text, const char *prefix)
{
	for (const char *p = text; (p = strstr(p, prefix)); p++)
		if (p == text || p[-1] == '\n')
			fail_msg("unexpected line starting \"%s\" in:\n%s", prefix, text);
}

/* Every line is a comment (# HELP / # TYPE) or `name[{labels}] value`,
 * and the text ends with a newline. */
static void
assert_exposition(const char *text)
{
	const char *p = text;

	assert_non_null(text);
	assert_true(*text);
	assert_int_equal(text[strlen(text) - 1], '\n');
	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *q = p;
		bool in_q = false;

		assert_non_null(nl);
		if (*p == '#') {
			assert_true(strncmp(p, "# HELP ", 7) == 0 || strncmp(p, "# TYPE ", 7) == 0);
			p = nl + 1;
			continue;
		}
		while (q < nl && (*q == '_' || *q == ':' || (*q >= 'a' && *q <= 'z') ||
		                  (*q >= 'A' && *q <= 'Z') || (q > p && *q >= '0' && *q <= '9')))
			q++;
		assert_true(q > p);
		if (*q == '{') {
			for (q++; q < nl && (in_q || *q != '}'); q++) {
				if (*q == '\\' && in_q)
					q++;
				else if (*q == '"')
					in_q = !in_q;
			}
			assert_true(q < nl);
			q++;
		}
		assert_int_equal(*q, ' ');
		q++;
		assert_true(q < nl);
		{
			char *end;

			(void)strtod(q, &end);
			assert_ptr_equal(end, nl);
		}
		p = nl + 1;
	}
}

/* ---- the text buffer: failures first ------------------------------- */

static void
test_mbuf_oom_first(void **state)
{
	struct gw_mbuf b = {0};

	(void)state;
	use_failing_realloc(0);
	assert_int_equal(gw_mbuf_printf(&b, "x=%d\n", 1), -ENOMEM);
	assert_true(b.oom);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	/* Sticky: later appends are no-ops, even once memory is back. */
	mbuf_realloc = realloc;
	assert_int_equal(gw_mbuf_append(&b, "abc", 3), -ENOMEM);
	assert_int_equal(gw_mbuf_label(&b, "k", "v"), -ENOMEM);
	assert_null(b.p);
	gw_mbuf_free(&b);
	assert_false(b.oom);
	gw_mbuf_free(NULL);
}

/* Growth refused after every possible number of successes: what was
 * appended before stays, NUL-terminated, and oom sticks. */
static void
test_mbuf_oom_every_growth(void **state)
{
	char want[8192];
	size_t wlen = 0;

	(void)state;
	for (int allow = 0; allow < 5; allow++) {
		struct gw_mbuf b = {0};
		size_t good_len = 0;

		use_failing_realloc(allow);
		wlen = 0;
		for (int i = 0; i < 200; i++) {
			int rc = gw_mbuf_printf(&b, "line %d %s\n", i,
			                        i % 7 ? "" : "with a longer tail");

			if (rc == 0) {
				assert_false(b.oom);
				wlen += (size_t)snprintf(want + wlen, sizeof(want) - wlen,
				                         "line %d %s\n", i,
				                         i % 7 ? "" : "with a longer tail");
				good_len = b.len;
				assert_int_equal(b.len, wlen);
				assert_memory_equal(b.p, want, wlen + 1);
			} else {
				assert_int_equal(rc, -ENOMEM);
				assert_true(b.oom);
				assert_int_equal(b.len, good_len);
				if (b.p) {
					assert_int_equal(b.p[b.len], '\0');
					assert_memory_equal(b.p, want, wlen);
				}
			}
		}
		assert_true(b.oom); /* 200 lines (2.5 KiB) need 5 allocations */
		gw_mbuf_free(&b);
		assert_null(b.p);
		assert_int_equal(b.cap, 0);
	}
	restore_realloc(NULL);
}

static void
test_mbuf_growth(void **state)
{
	struct gw_mbuf b = {0};
	char big[10000];
	size_t caps = 0, last_cap = 0;

	(void)state;
	assert_int_equal(gw_mbuf_append(&b, "", 0), 0);
	assert_non_null(b.p);
	assert_string_equal(b.p, "");
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(gw_mbuf_printf(&b, "%d,", i % 10), 0);
		if (b.cap != last_cap) {
			caps++;
			last_cap = b.cap;
		}
	}
	assert_int_equal(b.len, 2000);
	assert_true(b.cap > b.len);
	assert_true(caps <= 5); /* doubling, not a step per line */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(b.p[2 * i], '0' + i % 10);
	/* One append far larger than the free room. */
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(gw_mbuf_printf(&b, "<%s>", big), 0);
	assert_int_equal(b.len, 2000 + 2 + sizeof(big) - 1);
	assert_int_equal(b.p[2000], '<');
	assert_int_equal(b.p[b.len - 1], '>');
	assert_int_equal(b.p[b.len], '\0');
	assert_int_equal(gw_mbuf_append(&b, "tail", 4), 0);
	assert_string_equal(b.p + b.len - 4, "tail");
	assert_false(b.oom);
	gw_mbuf_free(&b);
}

/* ---- escaping ------------------------------------------------------- */

static void
test_label_escaping(void **state)
{
	struct gw_mbuf b = {0};

	(void)state;
	gw_mbuf_label(&b, "k", "plain");
	assert_string_equal(b.p, "k=\"plain\"");
	gw_mbuf_free(&b);

	gw_mbuf_label(&b, "k", "a\\b\"c\nd");
	assert_string_equal(b.p, "k=\"a\\\\b\\\"c\\nd\"");
	gw_mbuf_free(&b);

	gw_mbuf_label(&b, "k", "\\\"\n");
	assert_string_equal(b.p, "k=\"\\\\\\\"\\n\"");
	gw_mbuf_free(&b);

	gw_mbuf_label(&b, "k", "");
	gw_mbuf_append(&b, ",", 1);
	gw_mbuf_label(&b, "j", NULL);
	assert_string_equal(b.p, "k=\"\",j=\"\"");
	gw_mbuf_free(&b);

	/* HELP escapes backslash and newline, not quotes. */
	gw_metrics_family(&b, "m", "gauge", "say \"hi\"\\\nbye");
	assert_string_equal(b.p, "# HELP m say \"hi\"\\\\\\nbye\n# TYPE m gauge\n");
	gw_mbuf_free(&b);
}

/* ---- door decisions ------------------------------------------------- */

static void
test_door_decisions(void **state)
{
	struct gw_mbuf b = {0};

	(void)state;
	assert_int_equal(gw_access_setup("off"), 0);
	access_write("forward", "deny", GW_R_NOT_ALLOWED);
	access_write("forward", "deny", GW_R_NOT_ALLOWED);
	access_write("forward", "allow", GW_R_NONE);
	access_write("socks", "report", GW_R_PRIVATE_ADDRESS);
	access_write("sni", "deny", GW_R_TLS_NO_SNI);
	access_write("sni", "deny", GW_R_TLS_NO_SNI);
	access_write("sni", "deny", GW_R_TLS_NO_SNI);
	/* Unknown names count as other; a reason out of range as internal. */
	access_write("lane-9", "allow", GW_R_NONE);
	access_write(NULL, "maybe", GW_R_BAD_PORT);
	access_write("socks", NULL, (enum gw_reason)GW_R__COUNT);
	access_write("socks", "deny", (enum gw_reason) - 1);

	assert_int_equal(gw_metrics_door_decisions("forward", "deny", GW_R_NOT_ALLOWED), 2);
	assert_int_equal(gw_metrics_door_decisions("other", "allow", GW_R_NONE), 1);
	assert_int_equal(gw_metrics_door_decisions("whatever", "allow", GW_R_NONE), 1);
	assert_int_equal(gw_metrics_door_decisions("forward", "deny", GW_R_DENIED), 0);

	gw_metrics_render(&b);
	assert_false(b.oom);
	assert_exposition(b.p);
	assert_has_line(b.p, "# TYPE sluice_door_decisions_total counter");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"forward\",decision=\"deny\","
	                     "reason=\"not-allowed\"} 2");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"forward\",decision=\"allow\","
	                     "reason=\"none\"} 1");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"socks\",decision=\"report\","
	                     "reason=\"private-address\"} 1");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"sni\",decision=\"deny\","
	                     "reason=\"tls-no-sni\"} 3");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"other\",decision=\"allow\","
	                     "reason=\"none\"} 1");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"other\",decision=\"other\","
	                     "reason=\"bad-port\"} 1");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"socks\",decision=\"other\","
	                     "reason=\"internal-error\"} 1");
	assert_has_line(b.p, "sluice_door_decisions_total{door=\"socks\",decision=\"deny\","
	                     "reason=\"internal-error\"} 1");
	/* Only non-zero series. */
	assert_no_line_starting(b.p, "sluice_door_decisions_total{door=\"forward\","
	                             "decision=\"deny\",reason=\"denied\"}");
	assert_no_line_starting(b.p, "sluice_door_decisions_total{door=\"socks\","
	                             "decision=\"allow\"");
	/* The rest of the families, once each. */
	assert_has_line(b.p, "# TYPE sluice_tunnels_active gauge");
	assert_has_line(b.p, "# TYPE sluice_tunnels_total counter");
	assert_has_line(b.p, "# TYPE sluice_tunnel_bytes_total counter");
	assert_has_line(b.p, "# TYPE sluice_accept_exhausted_total counter");
	assert_has_line(b.p, "sluice_accept_exhausted_total 0");
	assert_has_line(b.p, "# TYPE sluice_api_browser_refusals_total counter");
	assert_has_line(b.p, "sluice_api_browser_refusals_total{reason=\"cross-site\"} 0");
	assert_has_line(b.p, "sluice_api_browser_refusals_total{reason=\"bad-origin\"} 0");
	assert_has_line(b.p, "sluice_api_browser_refusals_total{reason=\"bad-host\"} 0");
	assert_has_line(b.p, "# TYPE sluice_process_start_time_seconds gauge");
	assert_non_null(strstr(b.p, "\nsluice_process_start_time_seconds "));
	{
		double t = strtod(strstr(b.p, "\nsluice_process_start_time_seconds ") + 35, NULL);

		assert_true(t > 1.6e9 && t <= (double)time(NULL) + 1);
	}
	gw_mbuf_free(&b);

	/* A render into a buffer that cannot grow says so. */
	use_failing_realloc(1);
	gw_metrics_render(&b);
	assert_true(b.oom);
	gw_mbuf_free(&b);
	restore_realloc(NULL);
}

/* ---- histograms ----------------------------------------------------- */

static uint64_t
bucket_value(const char *text, const char *name_labels_le)
{
	const char *p = strstr(text, name_labels_le);

	assert_non_null(p);
	return strtoull(p + strlen(name_labels_le), NULL, 10);
}

static void
test_hist(void **state)
{
	static const double obs[] = {
	    -1,     NAN,      0, 0.005, /* le="0.005" (bounds are inclusive) */
	    0.0051, 0.01,               /* le="0.01" */
	    0.3,                        /* le="0.5" */
	    1,      1,                  /* le="1" */
	    10,                         /* le="10" */
	    10.5,   INFINITY,           /* +Inf only */
	};
	static const char *const le[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
	                                 "0.5",   "1",    "2.5",   "5",    "10",  "+Inf"};
	static const uint64_t cum[] = {4, 6, 6, 6, 6, 6, 7, 9, 9, 9, 10, 12};
	struct gw_hist h = {0};
	struct gw_mbuf b = {0}, l = {0};
	char key[128];
	uint64_t prev = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++)
		gw_hist_observe(&h, obs[i]);
	gw_mbuf_label(&l, "pool", "de\"fault");
	gw_metrics_family(&b, "sluice_boot_seconds", "histogram", "Boot latency.");
	gw_hist_render(&b, "sluice_boot_seconds", l.p, &h);
	assert_false(b.oom);
	assert_exposition(b.p);
	for (size_t i = 0; i < GW_HIST_NBUCKETS; i++) {
		uint64_t v;

		snprintf(key, sizeof(key),
		         "sluice_boot_seconds_bucket{pool=\"de\\\"fault\",le=\"%s\"} ", le[i]);
		v = bucket_value(b.p, key);
		assert_int_equal(v, cum[i]);
		assert_true(v >= prev); /* cumulative */
		prev = v;
	}
	assert_has_line(b.p, "sluice_boot_seconds_count{pool=\"de\\\"fault\"} 12");
	/* +Inf == _count */
	assert_int_equal(bucket_value(b.p, "le=\"+Inf\"} "),
	                 bucket_value(b.p, "sluice_boot_seconds_count{pool=\"de\\\"fault\"} "));
	/* 0.005 + 0.0051 + 0.01 + 0.3 + 2 + 10 + 10.5, and +Inf clamped to
	 * 2^53 us: just check the finite part on a second histogram. */
	gw_mbuf_free(&b);

	memset(&h, 0, sizeof(h));
	gw_hist_observe(&h, 0.25);
	gw_hist_observe(&h, 1.5);
	gw_hist_observe(&h, 0.0000004); /* rounds to 0 us */
	gw_hist_observe(&h, 0.0000006); /* rounds to 1 us */
	gw_hist_render(&b, "x", NULL, &h);
	assert_exposition(b.p);
	assert_has_line(b.p, "x_bucket{le=\"0.005\"} 2");
	assert_has_line(b.p, "x_bucket{le=\"0.25\"} 3");
	assert_has_line(b.p, "x_bucket{le=\"2.5\"} 4");
	assert_has_line(b.p, "x_bucket{le=\"+Inf\"} 4");
	assert_has_line(b.p, "x_sum 1.750001");
	assert_has_line(b.p, "x_count 4");
	gw_mbuf_free(&b);

	/* An empty histogram renders zeros; "" is no labels. */
	memset(&h, 0, sizeof(h));
	gw_hist_render(&b, "y", "", &h);
	assert_has_line(b.p, "y_bucket{le=\"+Inf\"} 0");
	assert_has_line(b.p, "y_sum 0.000000");
	assert_has_line(b.p, "y_count 0");
	gw_mbuf_free(&b);
	gw_mbuf_free(&l);
}

/* ---- tunnels -------------------------------------------------------- */

static void
render_value(const char *line_prefix, char *out, size_t outsz)
{
	struct gw_mbuf b = {0};
	const char *p;
	size_t n = 0;

	gw_metrics_render(&b);
	p = strstr(b.p, line_prefix);
	assert_non_null(p);
	p += strlen(line_prefix);
	while (p[n] && p[n] != '\n' && n + 1 < outsz)
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
	gw_mbuf_free(&b);
}

static void
test_tunnel_gauge(void **state)
{
	int cp[2], up[2]; /* [0] the application's, [1] the tunnel's */
	struct gw_tunnel t;
	struct gw_xprt cx, ux;
	int64_t active = gw_metrics_tunnels_active();
	uint64_t total = atomic_load(&tunnels_total);
	uint64_t to_up = atomic_load(&tunnel_bytes[0]), to_cl = atomic_load(&tunnel_bytes[1]);
	uint32_t cev, uev;
	bool moved;
	char buf[64], want[64];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, up), 0);
	gw_xprt_tcp_init(&cx, cp[1]);
	gw_xprt_tcp_init(&ux, up[1]);
	gw_tunnel_init(&t, &cx, &ux, false);
	assert_int_equal(gw_metrics_tunnels_active(), active + 1);
	snprintf(want, sizeof(want), "%lld", (long long)active + 1);
	render_value("\nsluice_tunnels_active ", buf, sizeof(buf));
	assert_string_equal(buf, want);

	assert_int_equal(gw_tunnel_preload(&t, GW_TUNNEL_U2C, "OK\n", 3, false), 0);
	assert_int_equal(write(cp[0], "hello", 5), 5);
	assert_int_equal(gw_tunnel_run(&t, &cev, &uev, &moved), GW_TUNNEL_RUNNING);
	assert_true(moved);
	assert_int_equal(read(up[0], buf, sizeof(buf)), 5);
	assert_int_equal(read(cp[0], buf, sizeof(buf)), 3);

	gw_tunnel_fini(&t);
	assert_int_equal(gw_metrics_tunnels_active(), active);
	gw_tunnel_fini(&t); /* twice: counted once */
	assert_int_equal(gw_metrics_tunnels_active(), active);
	assert_int_equal(atomic_load(&tunnels_total), total + 1);
	assert_int_equal(atomic_load(&tunnel_bytes[0]), to_up + 5);
	assert_int_equal(atomic_load(&tunnel_bytes[1]), to_cl + 3);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)total + 1);
	render_value("\nsluice_tunnels_total ", buf, sizeof(buf));
	assert_string_equal(buf, want);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)to_up + 5);
	render_value("\nsluice_tunnel_bytes_total{direction=\"to_upstream\"} ", buf, sizeof(buf));
	assert_string_equal(buf, want);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)to_cl + 3);
	render_value("\nsluice_tunnel_bytes_total{direction=\"to_client\"} ", buf, sizeof(buf));
	assert_string_equal(buf, want);

	/* A tunnel set up again after fini counts again. */
	gw_tunnel_init(&t, &cx, &ux, false);
	assert_int_equal(gw_metrics_tunnels_active(), active + 1);
	gw_tunnel_fini(&t);
	assert_int_equal(gw_metrics_tunnels_active(), active);
	for (int i = 0; i < 2; i++) {
		close(cp[i]);
		close(up[i]);
	}
}

/* ---- concurrency ---------------------------------------------------- */

#define ROUNDS 200000

static struct gw_hist smoke_hist;

static void *
smoke(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		access_write("socks", "allow", GW_R_CLIENT_CLOSED);
		gw_metrics_tunnel_start();
		gw_hist_observe(&smoke_hist, 0.002);
		gw_metrics_tunnel_end(1, 2);
	}
	return NULL;
}

static void
test_concurrency_smoke(void **state)
{
	pthread_t th[2];
	uint64_t before = gw_metrics_door_decisions("socks", "allow", GW_R_CLIENT_CLOSED);
	int64_t active = gw_metrics_tunnels_active();
	uint64_t total = atomic_load(&tunnels_total), to_cl = atomic_load(&tunnel_bytes[1]);
	struct gw_mbuf b = {0};
	char line[200];

	(void)state;
	assert_int_equal(gw_access_setup("off"), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, smoke, NULL), 0);
	/* Scrapes while the workers count: well-formed every time. */
	for (int i = 0; i < 20; i++) {
		gw_metrics_render(&b);
		gw_hist_render(&b, "smoke_seconds", NULL, &smoke_hist);
		assert_false(b.oom);
		assert_exposition(b.p);
		assert_int_equal(bucket_value(b.p, "smoke_seconds_bucket{le=\"+Inf\"} "),
		                 bucket_value(b.p, "smoke_seconds_count "));
		gw_mbuf_free(&b);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);

	assert_int_equal(gw_metrics_door_decisions("socks", "allow", GW_R_CLIENT_CLOSED),
	                 before + 2 * ROUNDS);
	assert_int_equal(gw_metrics_tunnels_active(), active);
	assert_int_equal(atomic_load(&tunnels_total), total + 2 * ROUNDS);
	assert_int_equal(atomic_load(&tunnel_bytes[1]), to_cl + 4 * ROUNDS);
	gw_hist_render(&b, "smoke_seconds", NULL, &smoke_hist);
	snprintf(line, sizeof(line), "smoke_seconds_bucket{le=\"0.005\"} %d", 2 * ROUNDS);
	assert_has_line(b.p, line);
	snprintf(line, sizeof(line), "smoke_seconds_count %d", 2 * ROUNDS);
	assert_has_line(b.p, line);
	snprintf(line, sizeof(line), "smoke_seconds_sum %d.000000", 2 * ROUNDS * 2000 / 1000000);
	assert_has_line(b.p, line);
	gw_mbuf_free(&b);
	gw_metrics_render(&b);
	snprintf(line, sizeof(line),
	         "sluice_door_decisions_total{door=\"socks\",decision=\"allow\","
	         "reason=\"client-closed\"} %llu",
	         (unsigned long long)(before + 2 * ROUNDS));
	assert_has_line(b.p, line);
	gw_mbuf_free(&b);
}

/* ---- TLS and the leaf cache ------------------------------------------ */

static struct gw_metrics_leaves fake_leaves;
static int leaves_calls;

static void
leaves_of(void *arg, struct gw_metrics_leaves *out)
{
	assert_ptr_equal(arg, &fake_leaves);
	leaves_calls++;
	*out = fake_leaves;
}

/* Each handshake's end counts once, in its side's series: ok, the
 * certificate refused (guest) or invalid (upstream), failed for anything
 * else; a resumption only for an upstream ok. Every series is there from
 * the start (zeros too); the leaf families read the source at each render
 * and are zero without one. */
static void
test_tls(void **state)
{
	struct gw_mbuf b = {0};

	(void)state;
	gw_metrics_render(&b);
	assert_exposition(b.p);
	assert_has_line(b.p, "# TYPE sluice_tls_handshakes_total counter");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\",result=\"ok\"} 0");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\",result=\"failed\"} 0");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\","
	                     "result=\"client-rejected-cert\"} 0");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\",result=\"ok\"} 0");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\",result=\"failed\"} 0");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\","
	                     "result=\"upstream-cert-invalid\"} 0");
	assert_has_line(b.p, "sluice_tls_sessions_resumed_total 0");
	assert_has_line(b.p, "sluice_leaf_cache_hits_total 0");
	assert_has_line(b.p, "sluice_leaf_mints_total 0");
	gw_mbuf_free(&b);

	/* The wrong side's certificate reason is just a failure. */
	gw_metrics_tls_handshake(false, GW_R_UPSTREAM_CERT_INVALID, false);
	gw_metrics_tls_handshake(true, GW_R_CLIENT_REJECTED_CERT, false);
	gw_metrics_tls_handshake(false, GW_R_CLIENT_TLS_FAILED, true);
	gw_metrics_tls_handshake(true, GW_R_UPSTREAM_TLS_FAILED, true);
	/* A resumption counts only for an upstream that succeeded. */
	gw_metrics_tls_handshake(false, GW_R_NONE, true);
	gw_metrics_tls_handshake(false, GW_R_NONE, false);
	gw_metrics_tls_handshake(false, GW_R_CLIENT_REJECTED_CERT, false);
	gw_metrics_tls_handshake(true, GW_R_NONE, true);
	gw_metrics_tls_handshake(true, GW_R_NONE, false);
	gw_metrics_tls_handshake(true, GW_R_NONE, false);
	gw_metrics_tls_handshake(true, GW_R_UPSTREAM_CERT_INVALID, false);
	assert_int_equal(gw_metrics_tls_handshakes(false, GW_TLS_HS_OK), 2);
	assert_int_equal(gw_metrics_tls_handshakes(false, GW_TLS_HS_FAILED), 2);
	assert_int_equal(gw_metrics_tls_handshakes(false, GW_TLS_HS_CERT), 1);
	assert_int_equal(gw_metrics_tls_handshakes(true, GW_TLS_HS_OK), 3);
	assert_int_equal(gw_metrics_tls_handshakes(true, GW_TLS_HS_FAILED), 2);
	assert_int_equal(gw_metrics_tls_handshakes(true, GW_TLS_HS_CERT), 1);
	assert_int_equal(gw_metrics_tls_handshakes(true, GW_TLS_HS__COUNT), 0);
	assert_int_equal(gw_metrics_tls_resumed(), 1);

	fake_leaves = (struct gw_metrics_leaves){
	    .hits = 7, .misses = 3, .evictions = 1, .mints = 3, .mint_failures = 1, .entries = 2,
	};
	gw_metrics_leaves_source(leaves_of, &fake_leaves);
	gw_metrics_render(&b);
	assert_false(b.oom);
	assert_exposition(b.p);
	assert_int_equal(leaves_calls, 1);
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\",result=\"ok\"} 2");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\",result=\"failed\"} 2");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"guest\","
	                     "result=\"client-rejected-cert\"} 1");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\",result=\"ok\"} 3");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\",result=\"failed\"} 2");
	assert_has_line(b.p, "sluice_tls_handshakes_total{side=\"upstream\","
	                     "result=\"upstream-cert-invalid\"} 1");
	assert_has_line(b.p, "sluice_tls_sessions_resumed_total 1");
	assert_has_line(b.p, "# TYPE sluice_leaf_cache_hits_total counter");
	assert_has_line(b.p, "sluice_leaf_cache_hits_total 7");
	assert_has_line(b.p, "sluice_leaf_cache_misses_total 3");
	assert_has_line(b.p, "sluice_leaf_cache_evictions_total 1");
	assert_has_line(b.p, "# TYPE sluice_leaf_cache_entries gauge");
	assert_has_line(b.p, "sluice_leaf_cache_entries 2");
	assert_has_line(b.p, "sluice_leaf_mints_total 3");
	assert_has_line(b.p, "sluice_leaf_mint_failures_total 1");
	gw_mbuf_free(&b);

	gw_metrics_leaves_source(NULL, NULL);
	gw_metrics_render(&b);
	assert_int_equal(leaves_calls, 1);
	assert_has_line(b.p, "sluice_leaf_cache_hits_total 0");
	gw_mbuf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    /* the buffer's failures */
	    cmocka_unit_test_teardown(test_mbuf_oom_first, restore_realloc),
	    cmocka_unit_test_teardown(test_mbuf_oom_every_growth, restore_realloc),
	    /* good */
	    cmocka_unit_test(test_mbuf_growth),
	    cmocka_unit_test(test_label_escaping),
	    cmocka_unit_test_teardown(test_door_decisions, restore_realloc),
	    cmocka_unit_test(test_hist),
	    cmocka_unit_test(test_tunnel_gauge),
	    cmocka_unit_test(test_concurrency_smoke),
	    cmocka_unit_test(test_tls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* metrics.c: the gateway's Prometheus metrics. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accept.h"
#include "metrics.h"
#include "reason.h"

/* ---- the text buffer -------------------------------------------------- */

/* Every growth goes through here; a test that includes this file may
 * point it at a failing allocator to reach the oom paths. */
static void *(*mbuf_realloc)(void *, size_t) = realloc;

/* Makes room for n more bytes and the NUL. 0 or -ENOMEM (oom set). */
static int
mbuf_reserve(struct gw_mbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return -ENOMEM;
	if (b->cap > b->len && b->cap - b->len > n)
		return 0;
	if (n > SIZE_MAX / 4 - b->len) {
		b->oom = true;
		return -ENOMEM;
	}
	cap = b->cap ? b->cap : 256;
	while (cap <= b->len + n)
		cap *= 2;
	p = mbuf_realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return -ENOMEM;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

int
gw_mbuf_append(struct gw_mbuf *b, const char *s, size_t n)
{
	if (mbuf_reserve(b, n) < 0)
		return -ENOMEM;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int
gw_mbuf_printf(struct gw_mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return -ENOMEM;
	/* Most lines fit in what is left: format once, grow and redo if not. */
	va_start(ap, fmt);
	n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		if (b->p)
			b->p[b->len] = '\0';
		return -ENOMEM;
	}
	if (!b->p || (size_t)n >= b->cap - b->len) {
		if (mbuf_reserve(b, (size_t)n) < 0) {
			if (b->p)
				b->p[b->len] = '\0';
			return -ENOMEM;
		}
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0 || (size_t)n >= b->cap - b->len) {
			b->oom = true;
			b->p[b->len] = '\0';
			return -ENOMEM;
		}
	}
	b->len += (size_t)n;
	return 0;
}

int
gw_mbuf_label(struct gw_mbuf *b, const char *key, const char *value)
{
	const char *s = value ? value : "", *run = s;

	gw_mbuf_printf(b, "%s=\"", key);
	for (; *s; s++) {
		const char *esc = *s == '\\'   ? "\\\\"
		                  : *s == '"'  ? "\\\""
		                  : *s == '\n' ? "\\n"
		                               : NULL;

		if (!esc)
			continue;
		gw_mbuf_append(b, run, (size_t)(s - run));
		gw_mbuf_append(b, esc, 2);
		run = s + 1;
	}
	gw_mbuf_append(b, run, (size_t)(s - run));
	return gw_mbuf_append(b, "\"", 1);
}

void
gw_mbuf_free(struct gw_mbuf *b)
{
	if (!b)
		return;
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void
gw_metrics_family(struct gw_mbuf *b, const char *name, const char *type, const char *help)
{
	const char *s = help, *run = help;

	gw_mbuf_printf(b, "# HELP %s ", name);
	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : NULL;

		if (!esc)
			continue;
		gw_mbuf_append(b, run, (size_t)(s - run));
		gw_mbuf_append(b, esc, 2);
		run = s + 1;
	}
	gw_mbuf_append(b, run, (size_t)(s - run));
	gw_mbuf_printf(b, "\n# TYPE %s %s\n", name, type);
}

/* ---- histograms ------------------------------------------------------- */

static const double hist_bounds[] = {GW_HIST_BOUNDS};
/* The bounds as `le` label values, spelled once. */
static const char *const hist_le[] = {
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf",
};

_Static_assert(sizeof(hist_bounds) / sizeof(hist_bounds[0]) == GW_HIST_NBUCKETS - 1,
               "GW_HIST_NBUCKETS is the bounds and +Inf");
_Static_assert(sizeof(hist_le) / sizeof(hist_le[0]) == GW_HIST_NBUCKETS,
               "one le spelling per bucket");

void
gw_hist_observe(struct gw_hist *h, double seconds)
{
	double us;
	size_t i;

	if (!(seconds > 0)) /* negative, zero or NaN */
		seconds = 0;
	for (i = 0; i < GW_HIST_NBUCKETS - 1; i++)
		if (seconds <= hist_bounds[i])
			break;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	/* Clamped so that the conversion is defined for any input (even
	 * +Inf); 2^53 microseconds is 285 years. */
	us = seconds * 1e6;
	if (us > 9007199254740992.0)
		us = 9007199254740992.0;
	atomic_fetch_add_explicit(&h->sum_us, (uint64_t)(us + 0.5), memory_order_relaxed);
}

void
gw_hist_render(struct gw_mbuf *b, const char *name, const char *labels_text,
               const struct gw_hist *h)
{
	const char *l = labels_text ? labels_text : "";
	const char *sep = *l ? "," : "";
	uint64_t cum = 0, sum_us;

	for (size_t i = 0; i < GW_HIST_NBUCKETS; i++) {
		cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
		gw_mbuf_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, l, sep, hist_le[i],
		               (unsigned long long)cum);
	}
	sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
	if (*l) {
		gw_mbuf_printf(b, "%s_sum{%s} %llu.%06llu\n", name, l,
		               (unsigned long long)(sum_us / 1000000),
		               (unsigned long long)(sum_us % 1000000));
		gw_mbuf_printf(b, "%s_count{%s} %llu\n", name, l, (unsigned long long)cum);
	} else {
		gw_mbuf_printf(b, "%s_sum %llu.%06llu\n", name,
		               (unsigned long long)(sum_us / 1000000),
		               (unsigned long long)(sum_us % 1000000));
		gw_mbuf_printf(b, "%s_count %llu\n", name, (unsigned long long)cum);
	}
}

/* ---- door decisions --------------------------------------------------- */

/* The doors that call gw_access_write() (fwd.c, socks.c, sni.c, dnsd.c); a door
 * added later counts as "other" until it is listed here. */
static const char *const door_names[] = {"forward", "socks", "sni", "dns", "other"};
static const char *const decision_names[] = {"allow", "deny", "report", "other"};

#define NDOORS     (sizeof(door_names) / sizeof(door_names[0]))
#define NDECISIONS (sizeof(decision_names) / sizeof(decision_names[0]))

static _Atomic uint64_t decisions[NDOORS][NDECISIONS][GW_R__COUNT];

/* The index of s in names, or the last ("other"). */
static size_t
name_index(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; s && i + 1 < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return n - 1;
}

static _Atomic uint64_t *
decision_cell(const char *door, const char *decision, enum gw_reason reason)
{
	size_t d = name_index(door_names, NDOORS, door);
	size_t k = name_index(decision_names, NDECISIONS, decision);
	size_t r = (unsigned)reason < GW_R__COUNT ? (size_t)reason : (size_t)GW_R_INTERNAL;

	return &decisions[d][k][r];
}

void
gw_metrics_door_decision(const char *door, const char *decision, enum gw_reason reason)
{
	atomic_fetch_add_explicit(decision_cell(door, decision, reason), 1, memory_order_relaxed);
}

uint64_t
gw_metrics_door_decisions(const char *door, const char *decision, enum gw_reason reason)
{
	return atomic_load_explicit(decision_cell(door, decision, reason), memory_order_relaxed);
}

/* ---- tunnels ---------------------------------------------------------- */

/* Signed: a start/end imbalance shows as a negative gauge, not 2^64. */
static _Atomic int64_t tunnels_active;
static _Atomic uint64_t tunnels_total;
static _Atomic uint64_t tunnel_bytes[2]; /* to the upstream, to the client */

void
gw_metrics_tunnel_start(void)
{
	atomic_fetch_add_explicit(&tunnels_active, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&tunnels_total, 1, memory_order_relaxed);
}

void
gw_metrics_tunnel_end(uint64_t c2u, uint64_t u2c)
{
	atomic_fetch_sub_explicit(&tunnels_active, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&tunnel_bytes[0], c2u, memory_order_relaxed);
	atomic_fetch_add_explicit(&tunnel_bytes[1], u2c, memory_order_relaxed);
}

int64_t
gw_metrics_tunnels_active(void)
{
	return atomic_load_explicit(&tunnels_active, memory_order_relaxed);
}

static _Atomic uint64_t relay_bytes[GW_RELAY__COUNT];
static const char *const relay_names[GW_RELAY__COUNT] = { "copy", "splice" };

void
gw_metrics_tunnel_relayed(const uint64_t bytes[GW_RELAY__COUNT])
{
	for (size_t m = 0; m < GW_RELAY__COUNT; m++)
		if (bytes[m])
			atomic_fetch_add_explicit(&relay_bytes[m], bytes[m], memory_order_relaxed);
}

/* ---- TLS -------------------------------------------------------------- */

static _Atomic uint64_t tls_hs[2][GW_TLS_HS__COUNT]; /* [upstream][result] */
static _Atomic uint64_t tls_resumed;
static const char *const tls_side_names[2] = {"guest", "upstream"};
static const char *const tls_hs_names[2][GW_TLS_HS__COUNT] = {
    {"ok", "failed", "client-rejected-cert"},
    {"ok", "failed", "upstream-cert-invalid"},
};

void
gw_metrics_tls_handshake(bool upstream, enum gw_reason why, bool resumed)
{
	enum gw_tls_hs_result r = GW_TLS_HS_FAILED;

	if (why == GW_R_NONE)
		r = GW_TLS_HS_OK;
	else if (why == (upstream ? GW_R_UPSTREAM_CERT_INVALID : GW_R_CLIENT_REJECTED_CERT))
		r = GW_TLS_HS_CERT;
	atomic_fetch_add_explicit(&tls_hs[upstream][r], 1, memory_order_relaxed);
	if (upstream && r == GW_TLS_HS_OK && resumed)
		atomic_fetch_add_explicit(&tls_resumed, 1, memory_order_relaxed);
}

uint64_t
gw_metrics_tls_handshakes(bool upstream, enum gw_tls_hs_result r)
{
	if ((unsigned)r >= GW_TLS_HS__COUNT)
		return 0;
	return atomic_load_explicit(&tls_hs[upstream][r], memory_order_relaxed);
}

uint64_t
gw_metrics_tls_resumed(void)
{
	return atomic_load_explicit(&tls_resumed, memory_order_relaxed);
}

static gw_metrics_leaves_fn leaves_fn;
static void *leaves_arg;

void
gw_metrics_leaves_source(gw_metrics_leaves_fn fn, void *arg)
{
	leaves_fn = fn;
	leaves_arg = arg;
}

/* One family of one unlabelled sample. */
static void
render_one(struct gw_mbuf *b, const char *name, const char *type, const char *help, uint64_t v)
{
	gw_metrics_family(b, name, type, help);
	gw_mbuf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void
render_tls(struct gw_mbuf *b)
{
	struct gw_metrics_leaves lv = {0};

	gw_metrics_family(b, "sluice_tls_handshakes_total", "counter",
	                  "TLS handshakes of the intercepting door that ended, by side (guest: "
	                  "the guest's with sluice; upstream: sluice's with the origin) and "
	                  "result (ok; client-rejected-cert: the guest refused the leaf; "
	                  "upstream-cert-invalid: the origin's certificate failed "
	                  "verification; failed: any other failure).");
	for (size_t u = 0; u < 2; u++)
		for (size_t r = 0; r < GW_TLS_HS__COUNT; r++)
			gw_mbuf_printf(b, "sluice_tls_handshakes_total{side=\"%s\",result=\"%s\"} %llu\n",
			               tls_side_names[u], tls_hs_names[u][r],
			               (unsigned long long)atomic_load_explicit(&tls_hs[u][r],
			                                                        memory_order_relaxed));
	render_one(b, "sluice_tls_sessions_resumed_total", "counter",
	           "Upstream TLS handshakes that resumed a cached session (counted in "
	           "sluice_tls_handshakes_total{side=\"upstream\",result=\"ok\"} too).",
	           atomic_load_explicit(&tls_resumed, memory_order_relaxed));

	if (leaves_fn)
		leaves_fn(leaves_arg, &lv);
	render_one(b, "sluice_leaf_cache_hits_total", "counter",
	           "Leaf certificates served from the cache.", lv.hits);
	render_one(b, "sluice_leaf_cache_misses_total", "counter",
	           "Leaf lookups the cache could not serve (not cached, or due for renewal): "
	           "each started a mint.", lv.misses);
	render_one(b, "sluice_leaf_cache_evictions_total", "counter",
	           "Leaves dropped from the cache to stay within certs.cache_size.", lv.evictions);
	render_one(b, "sluice_leaf_cache_entries", "gauge", "Leaves in the cache now.", lv.entries);
	render_one(b, "sluice_leaf_mints_total", "counter",
	           "Leaf certificates asked of the CA's signer.", lv.mints);
	render_one(b, "sluice_leaf_mint_failures_total", "counter",
	           "Leaf mints that failed.", lv.mint_failures);
}

/* ---- the API ----------------------------------------------------------- */

static const char *const browser_codes[] = {"cross-site", "bad-origin", "bad-host"};
#define NBROWSER (sizeof(browser_codes) / sizeof(browser_codes[0]))
static _Atomic uint64_t browser_refused[NBROWSER];

static _Atomic uint64_t *
browser_cell(const char *code)
{
	for (size_t i = 0; code && i < NBROWSER; i++)
		if (strcmp(code, browser_codes[i]) == 0)
			return &browser_refused[i];
	return NULL;
}

void
gw_metrics_api_browser_refused(const char *code)
{
	_Atomic uint64_t *c = browser_cell(code);

	if (c)
		atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

uint64_t
gw_metrics_api_browser_refusals(const char *code)
{
	_Atomic uint64_t *c = browser_cell(code);

	return c ? atomic_load_explicit(c, memory_order_relaxed) : 0;
}

/* ---- the process ------------------------------------------------------ */

static struct timespec start_time;

/* Before main(): the daemon's start, to the millisecond, with no init
 * call for main() to forget. */
__attribute__((constructor)) static void
metrics_start(void)
{
	clock_gettime(CLOCK_REALTIME, &start_time);
}

/* ---- rendering -------------------------------------------------------- */

void
gw_metrics_render(struct gw_mbuf *b)
{
	gw_metrics_family(
	    b, "sluice_door_decisions_total", "counter",
	    "Requests and tunnels decided by the doors, by door, decision and reason.");
	for (size_t d = 0; d < NDOORS; d++) {
		for (size_t k = 0; k < NDECISIONS; k++) {
			for (size_t r = 0; r < GW_R__COUNT; r++) {
				uint64_t v =
				    atomic_load_explicit(&decisions[d][k][r], memory_order_relaxed);

				if (!v)
					continue;
				gw_mbuf_printf(b, "sluice_door_decisions_total{");
				gw_mbuf_label(b, "door", door_names[d]);
				gw_mbuf_append(b, ",", 1);
				gw_mbuf_label(b, "decision", decision_names[k]);
				gw_mbuf_append(b, ",", 1);
				gw_mbuf_label(b, "reason", gw_reason_name((enum gw_reason)r));
				gw_mbuf_printf(b, "} %llu\n", (unsigned long long)v);
			}
		}
	}

	gw_metrics_family(b, "sluice_tunnels_active", "gauge",
	                  "Tunnels relaying now (CONNECT, WebSocket, SOCKS5, TLS).");
	gw_mbuf_printf(b, "sluice_tunnels_active %lld\n",
	               (long long)atomic_load_explicit(&tunnels_active, memory_order_relaxed));
	gw_metrics_family(b, "sluice_tunnels_total", "counter", "Tunnels started.");
	gw_mbuf_printf(
	    b, "sluice_tunnels_total %llu\n",
	    (unsigned long long)atomic_load_explicit(&tunnels_total, memory_order_relaxed));
	gw_metrics_family(b, "sluice_tunnel_bytes_total", "counter",
	                  "Bytes relayed by tunnels that have ended, by direction.");
	gw_mbuf_printf(
	    b, "sluice_tunnel_bytes_total{direction=\"to_upstream\"} %llu\n",
	    (unsigned long long)atomic_load_explicit(&tunnel_bytes[0], memory_order_relaxed));
	gw_mbuf_printf(
	    b, "sluice_tunnel_bytes_total{direction=\"to_client\"} %llu\n",
	    (unsigned long long)atomic_load_explicit(&tunnel_bytes[1], memory_order_relaxed));
	gw_metrics_family(b, "sluice_tunnel_relay_bytes_total", "counter",
	                  "Bytes relayed by tunnels, as they go, by the path that moved them: "
	                  "copy (through a buffer) or splice (splice(2) through a pipe).");
	for (size_t m = 0; m < GW_RELAY__COUNT; m++)
		gw_mbuf_printf(
		    b, "sluice_tunnel_relay_bytes_total{mode=\"%s\"} %llu\n", relay_names[m],
		    (unsigned long long)atomic_load_explicit(&relay_bytes[m], memory_order_relaxed));

	render_tls(b);

	render_one(b, "sluice_accept_exhausted_total", "counter",
	           "Episodes in which the daemon could not accept connections for want of "
	           "file descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM): "
	           "every listener paused with back-off until they could be had again.",
	           gw_accept_episodes());

	gw_metrics_family(b, "sluice_api_browser_refusals_total", "counter",
	                  "API requests refused as a web page's, before any handler, by reason: "
	                  "cross-site (Sec-Fetch-Site), bad-origin (Origin), bad-host (Host: "
	                  "not the API's address, as after DNS rebinding).");
	for (size_t i = 0; i < NBROWSER; i++)
		gw_mbuf_printf(b, "sluice_api_browser_refusals_total{reason=\"%s\"} %llu\n",
		               browser_codes[i],
		               (unsigned long long)atomic_load_explicit(&browser_refused[i],
		                                                        memory_order_relaxed));

	gw_metrics_family(b, "sluice_process_start_time_seconds", "gauge",
	                  "Start time of the process since the Unix epoch in seconds.");
	gw_mbuf_printf(b, "sluice_process_start_time_seconds %lld.%03ld\n",
	               (long long)start_time.tv_sec, start_time.tv_nsec / 1000000);
}

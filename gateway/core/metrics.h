/* metrics.h: the gateway's Prometheus metrics (GET /metrics).
 *
 * Counters live in fixed tables of relaxed C11 atomics: counting is
 * lock-free, allocation-free and safe from any thread. Rendering reads
 * them (relaxed, so a scrape racing a worker may be one count behind) into
 * a growable text buffer in the text exposition format 0.0.4
 * ("text/plain; version=0.0.4").
 */
#ifndef SLUICE_GW_METRICS_H
#define SLUICE_GW_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reason-t.h"

/* ---- the text buffer -------------------------------------------------- */

/* A growable NUL-terminated buffer. All zero is a valid empty buffer.
 * oom is sticky: once an append fails (out of memory, or a format error)
 * every later append is a no-op and the text is incomplete: answer 500,
 * not a partial scrape. Not thread-safe (one renderer per buffer). */
struct gw_mbuf {
	char *p;         /* NULL until the first append */
	size_t len, cap; /* len excludes the NUL */
	bool oom;
};

/* Appends; 0, or -ENOMEM (and oom set; also for a format error). */
int gw_mbuf_printf(struct gw_mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gw_mbuf_append(struct gw_mbuf *b, const char *s, size_t n);
/* Appends key="value" with value escaped as a label value (backslash,
 * double quote and newline become \\, \" and \n). Builds the labels_text
 * of gw_hist_render(): join several with ",". 0 or -ENOMEM. */
int gw_mbuf_label(struct gw_mbuf *b, const char *key, const char *value);
/* Frees p and zeroes b. NULL is fine. */
void gw_mbuf_free(struct gw_mbuf *b);

/* "# HELP name help" (help escaped: backslash, newline) and
 * "# TYPE name type" ("counter", "gauge", "histogram"): once per family,
 * before its samples. */
void gw_metrics_family(struct gw_mbuf *b, const char *name, const char *type, const char *help);

/* ---- histograms ------------------------------------------------------- */

/* Fixed bucket bounds in seconds; the last bucket is +Inf. */
#define GW_HIST_BOUNDS   0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
#define GW_HIST_NBUCKETS 12 /* the bounds above and +Inf */

/* A latency histogram. All zero (static, calloc, memset or `= {0}`) is
 * ready to use; observe from any thread, render from any thread. Counts
 * are per bucket (not cumulative); the count is their sum, so that the
 * +Inf bucket always equals _count. */
struct gw_hist {
	_Atomic uint64_t bucket[GW_HIST_NBUCKETS];
	_Atomic uint64_t sum_us; /* microseconds */
};

/* Counts one observation of `seconds` (negative or NaN counts as 0) into
 * the first bucket whose bound is >= it. Lock-free. */
void gw_hist_observe(struct gw_hist *h, double seconds);

/* Writes name_bucket{labels,le="..."} (cumulative, ending with le="+Inf"),
 * name_sum{labels} (seconds) and name_count{labels}. labels_text is
 * already rendered (`pool="default"`, see gw_mbuf_label()), or NULL or ""
 * for none; it is borrowed. No HELP or TYPE line: call
 * gw_metrics_family(b, name, "histogram", help) once before the first
 * series of the family. */
void gw_hist_render(struct gw_mbuf *b, const char *name, const char *labels_text,
                    const struct gw_hist *h);

/* ---- the gateway's own metrics ---------------------------------------- */

/* Counts one door decision, from gw_access_write() (any worker thread).
 * door: "forward", "socks", "tls", anything else counts as "other";
 * decision: "allow", "deny", "report", anything else (NULL too) as
 * "other"; a reason out of range counts as internal-error. */
void gw_metrics_door_decision(const char *door, const char *decision, enum gw_reason reason);
/* The count so far for one series (the same mapping), for tests and the
 * API's summaries. */
uint64_t gw_metrics_door_decisions(const char *door, const char *decision, enum gw_reason reason);

/* A tunnel started relaying (gw_tunnel_init()), and ended (the first
 * gw_tunnel_fini()) having delivered c2u bytes to the upstream and u2c to
 * the client (preloaded bytes included). Bytes are counted when the tunnel
 * ends. Any thread. */
void gw_metrics_tunnel_start(void);
void gw_metrics_tunnel_end(uint64_t c2u, uint64_t u2c);
int64_t gw_metrics_tunnels_active(void);

/* The relay path that delivered a tunnel's bytes: copied through a user
 * space buffer (recv and send), or spliced through a pipe (splice(2)). */
enum gw_relay_mode {
	GW_RELAY_COPY = 0,
	GW_RELAY_SPLICE,
	GW_RELAY__COUNT
};

/* Bytes delivered (either direction) by each path, counted as they go,
 * from gw_tunnel_run(). Any thread; zeros are free. */
void gw_metrics_tunnel_relayed(const uint64_t bytes[GW_RELAY__COUNT]);

/* ---- TLS (the intercepting door) ---------------------------------------- */

/* How a TLS handshake of ours ended, by side (sluice_tls_handshakes_total):
 * ok; the peer refused our certificate (guest side: the guest refused the
 * leaf, client-rejected-cert) or the origin's certificate failed
 * verification (upstream side: upstream-cert-invalid); failed otherwise. */
enum gw_tls_hs_result {
	GW_TLS_HS_OK = 0,
	GW_TLS_HS_FAILED,
	GW_TLS_HS_CERT, /* client-rejected-cert, or upstream-cert-invalid */
	GW_TLS_HS__COUNT
};

/* Counts one handshake that ended (upstream: ours to an origin; else the
 * guest's with us): why GW_R_NONE is ok, GW_R_CLIENT_REJECTED_CERT (guest)
 * and GW_R_UPSTREAM_CERT_INVALID (upstream) count as GW_TLS_HS_CERT, any
 * other reason as failed. resumed: an upstream handshake that resumed a
 * cached session (also counted ok). Any thread. */
void gw_metrics_tls_handshake(bool upstream, enum gw_reason why, bool resumed);
/* The counts so far, for tests. */
uint64_t gw_metrics_tls_handshakes(bool upstream, enum gw_tls_hs_result r);
uint64_t gw_metrics_tls_resumed(void);

/* The leaf cache's counters (certs/ keeps them; core/ cannot see it). */
struct gw_metrics_leaves {
	uint64_t hits;          /* served from the cache */
	uint64_t misses;        /* not cached, or due for renewal: a mint started */
	uint64_t evictions;     /* dropped to stay within certs.cache_size */
	uint64_t mints;         /* leaves asked of the signer */
	uint64_t mint_failures; /* of which failed */
	uint64_t entries;       /* leaves held now */
};
typedef void (*gw_metrics_leaves_fn)(void *arg, struct gw_metrics_leaves *out);
/* Who reads the leaf cache's counters at each scrape (fn may be NULL:
 * every count is 0). Set it before the API starts, clear it after it
 * stopped: the pointer is not guarded. */
void gw_metrics_leaves_source(gw_metrics_leaves_fn fn, void *arg);

/* ---- the API ------------------------------------------------------------ */

/* A request the API refused as a web page's (api/site.h), by its error
 * code: "cross-site", "bad-origin" or "bad-host" (anything else is not
 * counted). Any thread. */
void gw_metrics_api_browser_refused(const char *code);
/* The count so far for one code (0 for an unknown one), for tests. */
uint64_t gw_metrics_api_browser_refusals(const char *code);

/* Appends every gateway family: sluice_door_decisions_total (non-zero
 * series only), sluice_tunnels_active, sluice_tunnels_total,
 * sluice_tunnel_bytes_total, sluice_tunnel_relay_bytes_total,
 * sluice_tls_handshakes_total, sluice_tls_sessions_resumed_total,
 * sluice_leaf_cache_hits_total, sluice_leaf_cache_misses_total,
 * sluice_leaf_cache_evictions_total, sluice_leaf_cache_entries,
 * sluice_leaf_mints_total, sluice_leaf_mint_failures_total,
 * sluice_accept_exhausted_total, sluice_api_browser_refusals_total,
 * sluice_process_start_time_seconds. Any thread; check b->oom after.
 * Others (pools, API) append their families to the same buffer. */
void gw_metrics_render(struct gw_mbuf *b);

#endif

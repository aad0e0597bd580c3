/* target.h: how many warm sandboxes a pool should hold, and how long a
 * claim's lease is. Pure functions: the clock is an argument, nothing here
 * reads it, so the tests drive them with a fake one.
 *
 * A pool's dynamic target is ceil(rate x lead x safety), clamped to
 * [warm, warm_max]: `rate` a decaying average of claim arrivals per
 * second, `lead` the measured duration of recent refills. A pool whose
 * lead is not measured yet bootstraps with one sandbox as soon as claims
 * arrive; an idle pool's rate decays, so its target falls back to its
 * floor (which is never undercut). */
#ifndef SLUICE_POOL_TARGET_H
#define SLUICE_POOL_TARGET_H

#include <stdbool.h>
#include <stdint.h>

/* A decaying average of arrivals: each arrival adds 1/halflife, and the
 * value halves every halflife, so a steady stream of r per second settles
 * at r (in the long run, arrivals per second). */
struct pool_rate {
	double value;           /* arrivals per second, as of `at_ms` */
	uint64_t at_ms;
};

/* The decaying average of refill durations (an exponentially weighted
 * mean); n counts the measurements, 0: unmeasured. */
struct pool_lead {
	double ms;
	uint32_t n;
};

#define POOL_RATE_HALFLIFE_MS 30000u    /* rate forgets in about a minute */
#define POOL_LEAD_WEIGHT 0.25           /* weight of the newest refill */
#define POOL_SAFETY 1.5
#define POOL_RATE_MIN 0.001             /* below: idle (a claim per 17 min) */

/* Counts one claim arriving at now_ms. A clock that goes back is taken as
 * standing still. */
void pool_rate_arrival(struct pool_rate *r, uint64_t now_ms);
/* The rate as of now_ms (decayed; r is not changed); 0 below
 * POOL_RATE_MIN. */
double pool_rate_at(const struct pool_rate *r, uint64_t now_ms);

/* Records one refill that took `ms`. */
void pool_lead_record(struct pool_lead *l, uint64_t ms);

/* The number of warm sandboxes to hold: ceil(rate x lead x safety) in
 * [warm, warm_max]; with claims arriving (rate > 0) and no lead measured
 * yet, at least 1. warm > warm_max gives warm_max (configuration
 * validation refuses it anyway). Never overflows: any input, including
 * NaN or infinite rates, gives a value in range. */
uint32_t pool_target(double rate_per_s, const struct pool_lead *lead, double safety,
		     uint32_t warm, uint32_t warm_max);

/* The lease a claim gets, in seconds: absent or 0 gives the pool's
 * default; anything else is clamped to [1, max_s]. `requested` is what the
 * client sent as a signed 64-bit value (the API saturates bigger numbers
 * before calling); nothing wraps. */
uint32_t pool_ttl(bool present, int64_t requested, uint32_t default_s, uint32_t max_s);

#endif

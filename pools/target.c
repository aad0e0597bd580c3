/* target.c: the pool target and lease arithmetic (see target.h). */
#include <math.h>

#include "target.h"

static double
decay(double v, uint64_t from_ms, uint64_t to_ms)
{
	if (to_ms <= from_ms)
		return v;
	return v * exp2(-(double)(to_ms - from_ms) / POOL_RATE_HALFLIFE_MS);
}

void
pool_rate_arrival(struct pool_rate *r, uint64_t now_ms)
{
	if (now_ms < r->at_ms)
		now_ms = r->at_ms;
	/* ln 2 / halflife: the weight that makes a steady stream of r per
	 * second settle at r. */
	r->value = decay(r->value, r->at_ms, now_ms) + M_LN2 * 1000.0 / POOL_RATE_HALFLIFE_MS;
	r->at_ms = now_ms;
}

double
pool_rate_at(const struct pool_rate *r, uint64_t now_ms)
{
	double v = decay(r->value, r->at_ms, now_ms);

	/* A decay never reaches zero on its own: below the floor the pool
	 * has been silent long enough to count as idle. */
	return v < POOL_RATE_MIN ? 0 : v;
}

void
pool_lead_record(struct pool_lead *l, uint64_t ms)
{
	if (l->n == 0)
		l->ms = (double)ms;
	else
		l->ms += POOL_LEAD_WEIGHT * ((double)ms - l->ms);
	if (l->n < UINT32_MAX)
		l->n++;
}

uint32_t
pool_target(double rate_per_s, const struct pool_lead *lead, double safety, uint32_t warm,
	    uint32_t warm_max)
{
	double want;
	uint32_t t;

	if (warm > warm_max)
		warm = warm_max;
	if (!(rate_per_s > 0) || !(safety > 0))
		return warm;
	if (!lead || lead->n == 0 || !(lead->ms >= 0))
		want = 1;       /* unmeasured: bootstrap with one */
	else            /* the epsilon keeps 2.0000000001 from becoming 3 */
		want = ceil(rate_per_s * (lead->ms / 1000.0) * safety - 1e-9);
	/* NaN fails every comparison: take the ceiling then. */
	t = want <= (double)warm_max ? (uint32_t)(want > 0 ? want : 0) : warm_max;
	return t < warm ? warm : t;
}

uint32_t
pool_ttl(bool present, int64_t requested, uint32_t default_s, uint32_t max_s)
{
	uint32_t max = max_s ? max_s : 1;
	uint64_t v;

	if (!present || requested == 0)
		v = default_s ? default_s : max;
	else if (requested < 1)
		v = 1;
	else
		v = (uint64_t)requested;
	return v > max ? max : (uint32_t)v;
}

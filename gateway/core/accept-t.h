/* accept-t.h: types of what a listener does when accept(2) fails. */
#ifndef SLUICE_GW_ACCEPT_T_H
#define SLUICE_GW_ACCEPT_T_H

#include <stdint.h>

/* The first pause and the longest one, in ms. The longest is how late a
 * listener that nobody wakes early notices that descriptors are free. */
#define GW_ACCEPT_BACKOFF_MIN 5
#define GW_ACCEPT_BACKOFF_MAX 200
/* An episode ends with the first accept that succeeds this long after
 * the last one that failed: at the edge of the limit, where each freed
 * descriptor is taken at once and the next accept fails again, the
 * episode stays one episode (one log line), not one per descriptor. */
#define GW_ACCEPT_QUIET_MS 1000

/* What to do after a failed accept(2). */
enum gw_accept_next {
	GW_ACCEPT_NEXT = 0, /* that connection failed (aborted, a network
	                     * error pending on it): accept the next */
	GW_ACCEPT_DRAINED,  /* nothing is pending: wait until readable */
	GW_ACCEPT_PAUSE,    /* out of descriptors or memory (or a failure
	                     * of the listener itself): stop watching the
	                     * listener for gw_accept_backoff_next() ms */
};

/* One listener's (or one group's) back-off. All zero is ready. */
struct gw_accept_backoff {
	uint32_t ms; /* the last pause; 0: none since the last accept */
};

#endif

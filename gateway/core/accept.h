/* accept.h: what every listener of the daemon does when accept(2) fails:
 * the doors' listeners in each worker, the API's accept threads, the
 * control socket on the main loop.
 *
 * Out of descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM),
 * a listener that stays readable would be woken again at once by a
 * level-triggered epoll or poll, fail again, and spin a core while
 * logging each failure. Instead it pauses (stops watching the listener)
 * for a back-off of GW_ACCEPT_BACKOFF_MIN ms doubling to
 * GW_ACCEPT_BACKOFF_MAX, and tries again; whoever frees a descriptor
 * (a connection of its own closing) may resume it early. The pending
 * connections wait in the kernel's backlog meanwhile, and are served as
 * soon as descriptors free.
 *
 * Descriptors are the process's, so exhaustion is one process-wide
 * *episode*: it begins with the first such failure on any listener, which
 * writes the one warning line of the episode and counts it
 * (sluice_accept_exhausted_total), and ends with the first accept that
 * succeeds GW_ACCEPT_QUIET_MS after the last failure. Everything here is
 * safe from any thread.
 */
#ifndef SLUICE_GW_ACCEPT_H
#define SLUICE_GW_ACCEPT_H

#include <stdbool.h>
#include <stdint.h>

#include "accept-t.h"

/* Classifies a failure of accept(2) with errno err on the listener named
 * `what` ("socks door", "API 127.0.0.1:8080"; borrowed for the call) and
 * tells what to do next. A PAUSE opens the episode if none is open. */
enum gw_accept_next gw_accept_failed(int err, const char *what);

/* A connection was accepted: closes the open episode, if any, once the
 * quiet time has passed. One relaxed load when none is open. */
void gw_accept_ok(void);

/* True while an episode is open. */
bool gw_accept_exhausted(void);

/* Episodes so far (sluice_accept_exhausted_total). */
uint64_t gw_accept_episodes(void);

/* The next pause, in ms: MIN, then doubling up to MAX. */
uint32_t gw_accept_backoff_next(struct gw_accept_backoff *b);

/* After an accept that succeeded: the next pause starts at MIN again. */
void gw_accept_backoff_reset(struct gw_accept_backoff *b);

#endif

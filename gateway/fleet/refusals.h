/* refusals.h: what the fleet refused its sandboxes, told to the operator.
 *
 * The `inet sluice` table answers a guest's packet that no door serves
 * at once (a TCP reset, an ICMP "administratively prohibited"), counts it
 * in the sandbox's `refused` counter and samples it to NFLOG (nft.c,
 * nflog.h). This module reads the samples on the main loop and writes at
 * most one line per sandbox every GW_REFUSALS_WINDOW_MS:
 *
 *   fleet: sandbox sbx-1 tried tcp 1.2.3.4:5432 (refused)
 *   fleet: sandbox sbx-1 tried udp 1.2.3.4:53 (refused; 41 more since 10:02:03Z)
 *
 * The first refusal of a quiet sandbox is told at once; the ones after it
 * within the window are summed into one line at the window's end, naming
 * the latest sample and, from the counter, how many more packets were
 * refused since the line before (samples are rate-limited; the counter is
 * not). It also renders sluice_fleet_refused_total for /metrics.
 */
#ifndef SLUICE_GW_REFUSALS_H
#define SLUICE_GW_REFUSALS_H

#include <stddef.h>

struct gw_fleet;
struct gw_loop;
struct gw_mbuf;

#define GW_REFUSALS_WINDOW_MS 5000

struct gw_refusals;

/* Binds the fleet's NFLOG group and watches it on l (the main loop; the
 * fleet's thread). NULL with a line in err when it cannot: the table
 * still refuses and counts, only the lines are missing. */
struct gw_refusals *gw_refusals_start(struct gw_fleet *f, struct gw_loop *l, char *err,
                                      size_t errsz);

/* Stops watching and frees r (lines still owed are not written); NULL is
 * fine. Before gw_fleet_close() and gw_loop_free(). */
void gw_refusals_stop(struct gw_refusals *r);

/* Appends the family sluice_fleet_refused_total{lane="..."} (a counter:
 * packets refused to the lane's sandboxes, those attached and those gone
 * since the daemon started) to b; nothing when the table cannot be read.
 * Any thread. */
void gw_refusals_metrics(struct gw_fleet *f, struct gw_mbuf *b);

#endif

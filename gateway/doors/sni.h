/* sni.h: the SNI door: a lane's TLS passthrough, routed by server name.
 *
 * A guest's TCP to port 443, redirected by nftables to its lane's SNI door
 * (the lane's `doors.intercept` port), is attributed to its sandbox by
 * source address, read up to the end of its ClientHello (tlshello.h),
 * checked by server name against the sandbox's policy, dialled to that
 * name on port 443 (every resolved address checked) and tunnelled
 * untouched both ways, the hello first. A hello that names no usable
 * server is refused by closing: the door never guesses a destination.
 * (The intercepting door, next, will terminate the TLS of the policy's
 * `intercept:` hosts here and tunnel the rest as now.) */
#ifndef SLUICE_GW_SNI_H
#define SLUICE_GW_SNI_H

#include "worker-t.h"

/* Takes a newly accepted, non-blocking client socket (owned from here on)
 * on worker w, accepted on the SNI door of lane `lane` (an index into the
 * configuration's lanes). Worker thread only. */
void gw_sni_accept(struct gw_worker *w, int fd, int lane);

#endif

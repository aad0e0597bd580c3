/* lanes.h: who is speaking on a lane door.
 *
 * A connection accepted on a lane's door (a listener in the fleet
 * namespace on the lane's gateway address) is attributed by its source
 * address, which the nftables anti-spoofing rules make trustworthy: the
 * address names a sandbox, and the sandbox carries the policy layer it was
 * given when it was unlocked. The registry is shared by every worker
 * (readers take a read lock for one lookup). */
#ifndef SLUICE_GW_LANES_H
#define SLUICE_GW_LANES_H

#include <stddef.h>
#include <sys/socket.h>

struct gw_policy;

/* Who a lane connection belongs to: filled by gw_lane_who(). */
struct gw_who {
	struct gw_policy *policy;       /* a reference: gw_who_clear() drops it */
	char name[64];                  /* the sandbox id, for log lines */
};

/* Looks up the unlocked sandbox whose address is sa's on lane `lane` (an
 * index into the configuration's lanes). 0 with *who filled, -ENOENT when
 * no sandbox has that address on that lane, -EACCES when it is there but
 * locked. */
int gw_lane_who(int lane, const struct sockaddr *sa, struct gw_who *who);

/* Drops the reference gw_lane_who() gave. Idempotent. */
void gw_who_clear(struct gw_who *who);

#endif

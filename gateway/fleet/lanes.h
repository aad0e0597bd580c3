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
#include <stdint.h>
#include <netinet/in.h>
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

/* The DNS door's synthetic addresses (fakeip.h), one table per sandbox,
 * ending with its registry entry. The address name stands for for the
 * unlocked sandbox at sa on lane (network byte order in *out): 0,
 * -ENOENT / -EACCES as gw_lane_who(), -ENOSPC (every name held), -EINVAL,
 * -ENOMEM. */
int gw_lane_fakeip_get(int lane, const struct sockaddr *sa, const char *name, uint64_t now_ms,
		       struct in_addr *out);
/* The name dst stands for for the unlocked sandbox at sa on lane, into out
 * (254 bytes): 0, -ENOENT (no such sandbox, or no name has dst), -EACCES
 * (locked). */
int gw_lane_fakeip_name(int lane, const struct sockaddr *sa, struct in_addr dst, uint64_t now_ms,
			char out[254]);

#endif

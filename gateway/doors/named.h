/* named.h: the name door, one per egress lane with a DNS door
 * (lanes[].doors.names): guest TCP to a synthetic address (fleet/fakeip.h)
 * routed by the name it stands for. See named.c. */
#ifndef SLUICE_GW_NAMED_H
#define SLUICE_GW_NAMED_H

#include "worker-t.h"

/* Takes a newly accepted, non-blocking client socket (owned from here on)
 * on worker w, accepted on the name door of lane `lane`. Worker thread
 * only. */
void gw_named_accept(struct gw_worker *w, int fd, int lane);

#endif

/* socks.h: the SOCKS5 door. */
#ifndef SLUICE_GW_SOCKS_H
#define SLUICE_GW_SOCKS_H

#include "worker-t.h"

/* Takes a newly accepted, non-blocking client socket on worker w, from a
 * host door (lane -1) or a lane's door (the sandbox by source address). */
void gw_socks_accept(struct gw_worker *w, int fd, int lane);

#endif

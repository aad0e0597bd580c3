/* fwd.h: the forward door: HTTP/1.1 absolute-form requests and CONNECT.
 *
 * Runs on a worker's loop. Each accepted connection is matched to a static
 * client (by source address or Proxy-Authorization), each request checked
 * against the client's policy, its host resolved and every address checked,
 * and then relayed: requests and responses as a head plus a streamed body,
 * CONNECT and WebSocket upgrades as tunnels. Refusals are answered with a
 * status, a Sluice-Reason header and a one-line body; nothing of a refused
 * request is ever sent upstream. */
#ifndef SLUICE_GW_FWD_H
#define SLUICE_GW_FWD_H

#include <stdint.h>

#include "worker-t.h"

/* Takes a newly accepted, non-blocking client socket from a host door
 * (lane -1: static clients) or from a lane's door (lane >= 0: sandboxes
 * by source address; origin-form requests, which transparent
 * redirection brings, are routed by Host). Never fails: when the
 * connection cannot be served it is answered (503) and closed. */
void gw_fwd_accept(struct gw_worker *w, int fd, int lane);

#endif

/* control.h: the fleet control socket (daemon.control_socket).
 *
 * A unix stream socket, mode 0600, for root on the same host: one JSON
 * object per line in, one JSON object per line out. It drives the fleet
 * registry directly (attach, unlock, lock, detach, get, list) for
 * sandboxes no pool manages (an operator's own, the end-to-end tests'),
 * and inspects every sandbox (get, list). A sandbox a pool manages is the
 * pool manager's to change (pools/manager.h, pool_mgr_by_hand()): attach,
 * unlock, lock and detach of one are refused with "pool_managed" and a
 * message naming the pool and the API call to use instead:
 *
 *   {"op":"attach","id":"a","lane":"egress"}
 *   {"op":"unlock","id":"a","policy":"default","tenant":"acme"}
 *   {"op":"lock","id":"a"}   {"op":"detach","id":"a"}
 *   {"op":"get","id":"a"}    {"op":"list"}
 *
 * Answers: {"ok":true, ...} or {"ok":false,"error":{"code":"...",
 * "message":"..."}}. Lines longer than 4 KiB close the connection. */
#ifndef SLUICE_GW_CONTROL_H
#define SLUICE_GW_CONTROL_H

#include "conf-t.h"
#include "loop-t.h"

struct gw_fleet;
struct pool_mgr;
struct gw_control;

/* Listens on path (replacing a stale socket file) on loop l; the fleet and
 * the pool manager (NULL: none, every sandbox may be changed by hand) are
 * borrowed and must outlive the socket. The configuration is read through gw_snap_current() for every
 * request (policies and tenants by name). NULL with one line in err. */
struct gw_control *gw_control_open(struct gw_loop *l, const char *path, struct gw_fleet *f,
				   struct pool_mgr *mgr, char *err, size_t errsz);
/* Closes the listener and every connection; removes the socket file. */
void gw_control_close(struct gw_control *c);

#endif

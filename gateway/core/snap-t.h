/* snap-t.h: a configuration snapshot as the doors use it. */
#ifndef SLUICE_GW_SNAP_T_H
#define SLUICE_GW_SNAP_T_H

#include "conf-t.h"

struct gw_policy;

/* The running configuration plus what the doors derive from it (each
 * static client's compiled policy). Immutable and refcounted: a connection
 * holds the snapshot it was accepted under until it ends, so a reload
 * changes what new connections see, never a connection in flight. */
struct gw_snap {
	unsigned refs;                  /* atomic */
	struct conf *conf;
	struct gw_policy **client_policy;       /* [conf->gateway.nclients] */
};

#endif

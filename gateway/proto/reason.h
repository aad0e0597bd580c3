/* reason.h: the names of refusal reasons. */
#ifndef SLUICE_GW_REASON_H
#define SLUICE_GW_REASON_H

#include "reason-t.h"

/* "not-allowed", "private-address", ...; "?" out of range. */
const char *gw_reason_name(enum gw_reason r);

#endif

/* reason.c: the names of refusal reasons. */
#include "reason.h"

const char *
gw_reason_name(enum gw_reason r)
{
	static const char *const names[] = {
#define GW_REASON_NAME(id, name) name,
		GW_REASONS(GW_REASON_NAME)
#undef GW_REASON_NAME
	};

	return (unsigned)r < GW_R__COUNT ? names[r] : "?";
}

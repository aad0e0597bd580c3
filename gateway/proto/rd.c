/* rd.c: the bounded reader's out-of-line part; the rest is inline in rd.h. */
#include "rd.h"

const char *
gw_rd_status_name(enum gw_rd_status st)
{
	static const char *const names[] = {
		[GW_RD_OK] = "ok",
		[GW_RD_SHORT] = "short",
		[GW_RD_OVER] = "over",
		[GW_RD_BADLEN] = "badlen",
	};

	return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

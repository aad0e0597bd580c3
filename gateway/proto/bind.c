/* bind.c: the binding rules (bind.h). */
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "bind.h"
#include "tlshello.h"

enum gw_reason
gw_bind_sni(const char *d, enum gw_tlshello_result r, const struct gw_tlshello *h)
{
	switch (r) {
	case GW_TLSHELLO_NO_SNI:
		return GW_R_NONE;
	case GW_TLSHELLO_OK:
		return strcasecmp(h->sni, d) == 0 ? GW_R_NONE : GW_R_TLS_SNI_MISMATCH;
	default:
		return gw_tlshello_reason(r);
	}
}

enum gw_reason
gw_bind_host(const char *d, uint16_t port, const char *v, size_t n)
{
	char want[300];
	size_t dl = strlen(d);
	int wl;

	if (!v)
		return GW_R_HOST_MISMATCH;
	bool v6 = strchr(d, ':') != NULL;

	/* An IPv6 destination is written in brackets in Host. */
	if (v6) {
		wl = snprintf(want, sizeof(want), "[%s]", d);
		if (port == 443 && wl > 0 && n == (size_t)wl && strncasecmp(v, want, n) == 0)
			return GW_R_NONE;
	} else if (port == 443 && n == dl && strncasecmp(v, d, n) == 0) {
		return GW_R_NONE;
	}
	wl = snprintf(want, sizeof(want), v6 ? "[%s]:%u" : "%s:%u", d, port);
	if (wl > 0 && (size_t)wl < sizeof(want) && n == (size_t)wl &&
	    strncasecmp(v, want, n) == 0)
		return GW_R_NONE;
	return GW_R_HOST_MISMATCH;
}

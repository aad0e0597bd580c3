/* site-t.h: types of the API's browser checks (site.h). */
#ifndef SLUICE_GW_SITE_T_H
#define SLUICE_GW_SITE_T_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* What the checks found: the first refusal, in the order they run. */
enum gw_site_verdict {
	GW_SITE_OK = 0,
	GW_SITE_FETCH_SITE, /* Sec-Fetch-Site other than same-origin or none */
	GW_SITE_ORIGIN,     /* an Origin that is not the API's own */
	GW_SITE_HOST,       /* a Host that is not the listener's address */
};

/* The listener a request came in on. */
struct gw_site_self {
	bool is_unix;                /* the unix socket: no browser reaches it */
	const struct sockaddr *addr; /* TCP: the address it is bound to
	                                (sockaddr_in or sockaddr_in6; the
	                                wildcard matches any IP literal) */
};

/* One request field: its value (OWS trimmed, not NUL-terminated) and how
 * many times it came (0: absent; then p and len are unused). */
struct gw_site_field {
	const char *p;
	size_t len;
	unsigned n;
};

#endif

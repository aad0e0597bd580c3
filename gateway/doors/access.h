/* access.h: the access log, one line per request or tunnel. */
#ifndef SLUICE_GW_ACCESS_H
#define SLUICE_GW_ACCESS_H

#include <stdint.h>

#include "reason-t.h"

struct gw_access {
	const char *door;               /* "forward", "socks", ... */
	const char *client;             /* static client name, or NULL */
	const char *src;                /* "ip:port" */
	const char *policy;             /* NULL: none decided */
	const char *method;
	const char *host;
	uint16_t port;
	const char *decision;           /* "allow", "deny", "report" */
	enum gw_reason reason;
	const char *upstream;           /* "ip:port", or NULL */
	unsigned status;
	uint64_t bytes_in;              /* from the client */
	uint64_t bytes_out;             /* to the client */
	uint64_t duration_ms;
};

/* Where lines go: "stderr" (through the daemon's log, in its format),
 * "off", or a file path (opened for appending). 0 or -errno. Call before
 * the workers start, or from the thread that owns the reload. */
int gw_access_setup(const char *dest);

/* Writes one line, text ("access k=v ...") or JSON as the log is; one
 * write(2) per line. Thread-safe. Values are escaped: a host name can
 * never forge a field or a line. */
void gw_access_write(const struct gw_access *a);

#endif

/* access.h: the access log, one line per request or tunnel. */
#ifndef SLUICE_GW_ACCESS_H
#define SLUICE_GW_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
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
	/* How it was relayed: "http", "tunnel", "intercept"; NULL: "-" (refused
	 * or failed before a tunnel or an interception began). */
	const char *mode;
	const char *sni;                /* the guest's server name, or NULL */
	const char *alpn_down;          /* ALPN agreed with the guest (our TLS), or NULL */
	const char *alpn_up;            /* ALPN agreed with the origin (our TLS), or NULL */
	const char *layer;              /* the policy layer's version, or NULL */
	const char *inject;             /* credential names injected, or NULL */
};

/* A line's room: eleven fields of at most 300 bytes, the names and the
 * numbers, and an inject= list at its longest (GW_CONN_INJECT_MAX). */
#define GW_ACCESS_LINE_MAX 16384

/* Where lines go: "stderr" (through the daemon's log, in its format),
 * "off", or a file path (opened for appending). 0 or -errno. Call before
 * the workers start, or from the thread that owns the reload. */
int gw_access_setup(const char *dest);

/* Writes one line, text ("access k=v ...") or JSON as the log is; one
 * write(2) per line. Thread-safe. Values are escaped: a host name can
 * never forge a field or a line. Every field is always there: in text a
 * missing value is "-", in JSON "" (a number is 0). */
void gw_access_write(const struct gw_access *a);

/* Formats a's line into out (outsz bytes), without the newline: text
 * ("access door=... alpn_up=...") or, when json, the JSON object with the
 * timestamp ts. Returns the length, or -1 when it does not fit. Pure:
 * counts nothing and writes nowhere. */
int gw_access_format(const struct gw_access *a, bool json, const char *ts, char *out,
		     size_t outsz);

#endif

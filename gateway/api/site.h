/* site.h: is this request a web page's? The loopback API must not be
 * usable from a page the operator happens to open: a browser will send a
 * page's requests to 127.0.0.1 (cross-site), and will send them to any
 * address a name the page's site controls resolves to (DNS rebinding,
 * where the request looks same-origin to the browser but carries the
 * attacker's name in Host). Pure: no I/O, no allocation; any thread.
 *
 * The checks, in order, each a refusal (403) before anything else runs:
 *  1. Sec-Fetch-Site (sent by browsers with every request): anything but
 *     one "same-origin" or "none" (a navigation the user typed) is refused:
 *     cross-site, same-site (another port of localhost is another
 *     origin), unknown values, the field twice.
 *  2. Origin: present, it must be the API's own origin, "http://" and an
 *     authority as Host may spell it (below); "null" (sandboxed frames,
 *     file: pages, redirects), https, another host or port, a path, the
 *     field twice are refused. On the unix socket, which has no web
 *     origin, any Origin is refused.
 *  3. Host, on TCP only: the listener's address and port ("127.0.0.1:8080",
 *     "[::1]:8080"; for a wildcard listener any IP literal), or
 *     "localhost" with the port (any case); the port may be left out only
 *     when it is 80. An IP literal cannot be rebound; "localhost" browsers
 *     resolve to loopback themselves. Absent (HTTP/1.0) it is refused. On
 *     the unix socket, which no browser can reach, Host is not looked at:
 *     clients send anything there ("localhost", "sluice") or nothing.
 */
#ifndef SLUICE_GW_SITE_H
#define SLUICE_GW_SITE_H

#include "site-t.h"

/* Runs the checks on the request's Host, Origin and Sec-Fetch-Site
 * (borrowed). On a refusal writes one line into msg (the field's value,
 * cut and with any byte that is not printable ASCII as '?', and what to
 * do instead). */
enum gw_site_verdict gw_site_check(const struct gw_site_self *self,
                                   const struct gw_site_field *host,
                                   const struct gw_site_field *origin,
                                   const struct gw_site_field *fetch_site, char *msg, size_t msgsz);

/* The error code a refusal answers with: "cross-site" (Sec-Fetch-Site),
 * "bad-origin", "bad-host"; NULL for GW_SITE_OK. */
const char *gw_site_code(enum gw_site_verdict v);

#endif

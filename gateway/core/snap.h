/* snap.h: configuration snapshots and static-client identity. */
#ifndef SLUICE_GW_SNAP_H
#define SLUICE_GW_SNAP_H

#include <stdbool.h>
#include <sys/socket.h>

#include "snap-t.h"

/* Builds a snapshot of c (taking a reference on it). NULL with a reason in
 * err if a policy cannot be compiled. Thread-safe. */
struct gw_snap *gw_snap_new(struct conf *c, char *err, size_t errsz);
struct gw_snap *gw_snap_ref(struct gw_snap *s);
void gw_snap_unref(struct gw_snap *s);

/* The process-wide current snapshot: gw_snap_current() returns a new
 * reference; gw_snap_publish() replaces it (taking s's reference). Both
 * may be called from any thread. */
struct gw_snap *gw_snap_current(void);
void gw_snap_publish(struct gw_snap *s);

/* Static-client identity. Returns the index of the first client matched
 * by source address, or -1. */
int gw_ident_by_source(const struct gw_snap *s, const struct sockaddr *sa);

/* Whether any client is matched by user name (so that a client matched by
 * nothing is asked for credentials with 407 rather than refused). */
bool gw_ident_has_users(const struct gw_snap *s);

/* The index of the client whose user and password these are, or -1; the
 * password is compared in constant time. */
int gw_ident_by_user(const struct gw_snap *s, const char *user, size_t ulen,
		     const char *pass, size_t plen);

/* Decodes the credentials of a "Basic <base64>" header value into buf
 * (user and password, NUL-separated). 0 or -EINVAL. */
int gw_ident_basic_decode(const char *v, size_t vlen, char *buf, size_t bufsz,
			  const char **user, size_t *ulen, const char **pass, size_t *plen);

#endif

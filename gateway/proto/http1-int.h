/* http1-int.h: what http1.c (heads, lookups, the writer), http1_target.c
 * (request-targets) and http1_body.c (the body decoder) share, and nothing
 * else includes: the byte classes of RFC 9110/9112 and small span helpers.
 */
#ifndef SLUICE_GW_HTTP1_INT_H
#define SLUICE_GW_HTTP1_INT_H

#include <string.h>

#include "http1.h"
#include "rd.h"

/* Byte classes, defined in http1.c. */
extern const struct gw_rd_class gw_h1_tchar;   /* token characters */
extern const struct gw_rd_class gw_h1_field;   /* field-vchar, SP, HTAB */
extern const struct gw_rd_class gw_h1_ows;     /* SP, HTAB */
extern const struct gw_rd_class gw_h1_digit;
extern const struct gw_rd_class gw_h1_vchar;   /* 0x21..0x7e */

static inline bool
h1_is(const struct gw_rd_class *cls, unsigned char c)
{
	return gw_rd_in(cls, c);
}

static inline int
h1_hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline struct gw_h1_span
h1_span(struct gw_rd_span s)
{
	struct gw_h1_span h = { (const char *)s.p, s.len };

	return h;
}

static inline struct gw_rd_span
h1_rd_span(struct gw_h1_span s)
{
	struct gw_rd_span r = { (const uint8_t *)s.p, s.len };

	return r;
}

static inline unsigned char
h1_lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static inline bool
h1_mem_ieq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
		if (h1_lower((unsigned char)a[i]) != h1_lower((unsigned char)b[i]))
			return false;
	return true;
}

static inline bool
h1_span_ieq(struct gw_h1_span s, const char *lit)
{
	return h1_mem_ieq(s.p, s.len, lit, strlen(lit));
}

static inline bool
h1_span_is_token(struct gw_h1_span s)
{
	return s.len > 0 && gw_rd_span_all(h1_rd_span(s), &gw_h1_tchar);
}

/* A field name rule: the name itself, or (prefix) every name starting so. */
struct h1_name_rule {
	const char *name;
	size_t len;
	bool prefix;
};

#define H1_EXACT(lit) { lit, sizeof(lit) - 1, false }
#define H1_PREFIX(lit) { lit, sizeof(lit) - 1, true }

/* True if name[0..len) matches a rule of rules[0..n), case-insensitive.
 * `cut`: only the name's first len bytes are known (it is longer), so only
 * a prefix rule can match. */
bool h1_name_in(const struct h1_name_rule *rules, size_t n, const char *name, size_t len,
		bool cut);

/* The request fields a client could forge to pass for sluice or an
 * upstream proxy (gw_h1_spoofable() for requests); defined in http1.c. */
extern const struct h1_name_rule h1_spoof_rules[];
extern const size_t h1_nspoof_rules;

/* A Host field value (RFC 9110 7.2: uri-host [ ":" port ], or empty): 0,
 * or -EINVAL with err set (GW_R_USERINFO, GW_R_NON_ASCII_HOST,
 * GW_R_BAD_HOST, GW_R_BAD_PORT, GW_R_BAD_REQUEST). In http1_target.c. */
int h1_host_value_check(struct gw_h1_span v, struct gw_h1_error *err);

/* A span into from[0..n) now points at the same place in to[0..n); one
 * elsewhere (NULL, a static string, another buffer) is left alone. The
 * old bytes must still be allocated: their address is compared. */
static inline void
h1_span_move(struct gw_h1_span *s, const char *from, size_t n, const char *to)
{
	uintptr_t p = (uintptr_t)s->p, f = (uintptr_t)from;

	if (s->p && p >= f && p - f <= n)
		s->p = to + (p - f);
}

#endif

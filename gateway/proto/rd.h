/* rd.h: the bounded reader (see rd-t.h for the model: a cursor, a declared
 * end, the bytes given). Pure, no allocation; a reader borrows its bytes
 * and has one user at a time. Small enough to be inline: the parsers call
 * these per byte.
 *
 * The contract every function keeps:
 *  - nothing at or past `avail` (hence `end`) is ever read;
 *  - a fetch either succeeds whole, or returns SHORT, OVER or BADLEN and
 *    leaves the reader and its output arguments as they were (no function
 *    poisons the reader);
 *  - OVER is checked before SHORT, so a structure that cannot fit is
 *    malformed however few of its bytes have arrived;
 *  - scans (take, until, while) never fail: they stop at the end of the
 *    bytes given and return what they passed over, possibly nothing.
 */
#ifndef SLUICE_GW_RD_H
#define SLUICE_GW_RD_H

#include <stdbool.h>
#include <string.h>

#include "rd-t.h"

/* "ok", "short", "over", "badlen"; "?" out of range. */
const char *gw_rd_status_name(enum gw_rd_status st);

/* A reader over p[0..len), all of it given (avail == end == len). p may be
 * NULL when len is 0. */
static inline void
gw_rd_init(struct gw_rd *r, const void *p, size_t len)
{
	r->base = p ? (const uint8_t *)p : (const uint8_t *)"";
	r->pos = 0;
	r->end = len;
	r->avail = len;
}

/* A reader over the first `avail` bytes of a stream whose end is not
 * declared yet (GW_RD_NO_END): fetches past avail are SHORT, never OVER,
 * until a gw_rd_sub() declares where a structure ends. */
static inline void
gw_rd_init_stream(struct gw_rd *r, const void *p, size_t avail)
{
	gw_rd_init(r, p, avail);
	r->end = GW_RD_NO_END;
}

/* The cursor, as an offset from the start of the outermost reader. */
static inline size_t
gw_rd_pos(const struct gw_rd *r)
{
	return r->pos;
}

/* Bytes before the declared end, given or not. */
static inline size_t
gw_rd_left(const struct gw_rd *r)
{
	return r->end - r->pos;
}

/* Bytes that can be read now. */
static inline size_t
gw_rd_len(const struct gw_rd *r)
{
	return r->pos < r->avail ? r->avail - r->pos : 0;
}

/* True if no byte can be read now. */
static inline bool
gw_rd_empty(const struct gw_rd *r)
{
	return r->pos >= r->avail;
}

/* Whether n more bytes can be fetched: OK, OVER (past the declared end)
 * or SHORT (not given yet). */
static inline enum gw_rd_status
gw_rd_has(const struct gw_rd *r, size_t n)
{
	if (n > r->end - r->pos)
		return GW_RD_OVER;
	if (r->pos > r->avail || n > r->avail - r->pos)
		return GW_RD_SHORT;
	return GW_RD_OK;
}

/* The next byte (0..255) without taking it, or -1 if none can be read. */
static inline int
gw_rd_peek(const struct gw_rd *r)
{
	return r->pos < r->avail ? r->base[r->pos] : -1;
}

/* The next byte (0..255), taken, or -1 (nothing taken). */
static inline int
gw_rd_getc(struct gw_rd *r)
{
	return r->pos < r->avail ? r->base[r->pos++] : -1;
}

static inline enum gw_rd_status
gw_rd_fetch_u8(struct gw_rd *r, uint8_t *v)
{
	enum gw_rd_status st = gw_rd_has(r, 1);

	if (st == GW_RD_OK)
		*v = r->base[r->pos++];
	return st;
}

static inline enum gw_rd_status
gw_rd_fetch_be16(struct gw_rd *r, uint16_t *v)
{
	enum gw_rd_status st = gw_rd_has(r, 2);

	if (st == GW_RD_OK) {
		*v = (uint16_t)(r->base[r->pos] << 8 | r->base[r->pos + 1]);
		r->pos += 2;
	}
	return st;
}

static inline enum gw_rd_status
gw_rd_fetch_be24(struct gw_rd *r, uint32_t *v)
{
	enum gw_rd_status st = gw_rd_has(r, 3);

	if (st == GW_RD_OK) {
		*v = (uint32_t)r->base[r->pos] << 16 | (uint32_t)r->base[r->pos + 1] << 8 |
		     r->base[r->pos + 2];
		r->pos += 3;
	}
	return st;
}

/* n bytes in place: *s points into the input. */
static inline enum gw_rd_status
gw_rd_fetch_bytes(struct gw_rd *r, size_t n, struct gw_rd_span *s)
{
	enum gw_rd_status st = gw_rd_has(r, n);

	if (st == GW_RD_OK) {
		s->p = r->base + r->pos;
		s->len = n;
		r->pos += n;
	}
	return st;
}

static inline enum gw_rd_status
gw_rd_skip(struct gw_rd *r, size_t n)
{
	enum gw_rd_status st = gw_rd_has(r, n);

	if (st == GW_RD_OK)
		r->pos += n;
	return st;
}

/* The bytes readable now, at most max, taken: the partial fetch of a
 * streaming parser that keeps its place in a field between calls. */
static inline struct gw_rd_span
gw_rd_take(struct gw_rd *r, size_t max)
{
	size_t n = gw_rd_len(r);
	struct gw_rd_span s;

	if (n > max)
		n = max;
	s.p = r->base + (r->pos < r->avail ? r->pos : r->avail);
	s.len = n;
	r->pos += n;
	return s;
}

/* Every byte readable now, taken. */
static inline struct gw_rd_span
gw_rd_rest(struct gw_rd *r)
{
	return gw_rd_take(r, SIZE_MAX);
}

/* Takes lit[0..n) if the next bytes are exactly those; else false, and
 * nothing taken (also when fewer than n bytes can be read). */
static inline bool
gw_rd_match(struct gw_rd *r, const void *lit, size_t n)
{
	if (gw_rd_len(r) < n || memcmp(r->base + r->pos, lit, n) != 0)
		return false;
	r->pos += n;
	return true;
}

/* Takes the bytes before the first `c`, at most max: the cursor stops on
 * the `c` (left unread), after max bytes, or at the end of the bytes
 * given. */
static inline struct gw_rd_span
gw_rd_until(struct gw_rd *r, uint8_t c, size_t max)
{
	struct gw_rd_span s = gw_rd_take(r, max);
	const uint8_t *hit = s.len ? memchr(s.p, c, s.len) : NULL;

	if (hit) {
		r->pos -= s.len - (size_t)(hit - s.p);
		s.len = (size_t)(hit - s.p);
	}
	return s;
}

/* Takes the longest run of bytes in cls. */
static inline struct gw_rd_span
gw_rd_while(struct gw_rd *r, const struct gw_rd_class *cls)
{
	struct gw_rd_span s;
	size_t i = r->pos;

	while (i < r->avail && cls->in[r->base[i]])
		i++;
	s.p = r->base + (r->pos < r->avail ? r->pos : r->avail);
	s.len = i - r->pos;
	r->pos = i;
	return s;
}

/* Takes the longest run of bytes not in cls: the cursor stops on the
 * first member of cls, or at the end of the bytes given. */
static inline struct gw_rd_span
gw_rd_until_any(struct gw_rd *r, const struct gw_rd_class *cls)
{
	struct gw_rd_span s;
	size_t i = r->pos;

	while (i < r->avail && !cls->in[r->base[i]])
		i++;
	s.p = r->base + (r->pos < r->avail ? r->pos : r->avail);
	s.len = i - r->pos;
	r->pos = i;
	return s;
}

/* A reader for the next n bytes, which r steps over at once: read the
 * child before r reads on. The child shares r's base and bytes given, its
 * declared end is r->pos + n; it can read past neither. Only the declared
 * end is checked here (OVER if n is more than r has left), so a structure
 * whose bytes have not all arrived still gets a reader whose own fetches
 * say SHORT. */
static inline enum gw_rd_status
gw_rd_sub(struct gw_rd *r, size_t n, struct gw_rd *sub)
{
	if (n > r->end - r->pos)
		return GW_RD_OVER;
	sub->base = r->base;
	sub->pos = r->pos;
	sub->end = r->pos + n;
	sub->avail = r->avail < sub->end ? r->avail : sub->end;
	r->pos += n;
	return GW_RD_OK;
}

/* A TLS-style vector: a big-endian length of `width` bytes (1..3), then a
 * reader over that many bytes as gw_rd_sub() gives. SHORT or OVER: the
 * length itself could not be read; BADLEN: it declares more than r has
 * left after it. On any failure r is unchanged, the length unread. */
static inline enum gw_rd_status
gw_rd_sub_vec(struct gw_rd *r, unsigned width, struct gw_rd *sub)
{
	struct gw_rd t = *r;
	size_t n = 0;
	enum gw_rd_status st;

	if (width < 1 || width > 3)
		return GW_RD_OVER;      /* a caller's bug: read nothing */
	st = gw_rd_has(&t, width);
	if (st != GW_RD_OK)
		return st;
	for (unsigned i = 0; i < width; i++)
		n = n << 8 | t.base[t.pos++];
	if (gw_rd_sub(&t, n, sub) != GW_RD_OK)
		return GW_RD_BADLEN;
	*r = t;
	return GW_RD_OK;
}

static inline enum gw_rd_status
gw_rd_sub_u8(struct gw_rd *r, struct gw_rd *sub)
{
	return gw_rd_sub_vec(r, 1, sub);
}

static inline enum gw_rd_status
gw_rd_sub_be16(struct gw_rd *r, struct gw_rd *sub)
{
	return gw_rd_sub_vec(r, 2, sub);
}

static inline enum gw_rd_status
gw_rd_sub_be24(struct gw_rd *r, struct gw_rd *sub)
{
	return gw_rd_sub_vec(r, 3, sub);
}

/* ---- spans and classes -------------------------------------------------- */

static inline bool
gw_rd_in(const struct gw_rd_class *cls, uint8_t c)
{
	return cls->in[c] != 0;
}

/* True if every byte of s is in cls (true for an empty span). */
static inline bool
gw_rd_span_all(struct gw_rd_span s, const struct gw_rd_class *cls)
{
	for (size_t i = 0; i < s.len; i++)
		if (!cls->in[s.p[i]])
			return false;
	return true;
}

/* True if no byte of s is in cls (true for an empty span). */
static inline bool
gw_rd_span_none(struct gw_rd_span s, const struct gw_rd_class *cls)
{
	for (size_t i = 0; i < s.len; i++)
		if (cls->in[s.p[i]])
			return false;
	return true;
}

/* s without its leading and trailing bytes in cls. */
static inline struct gw_rd_span
gw_rd_span_trim(struct gw_rd_span s, const struct gw_rd_class *cls)
{
	while (s.len > 0 && cls->in[s.p[0]]) {
		s.p++;
		s.len--;
	}
	while (s.len > 0 && cls->in[s.p[s.len - 1]])
		s.len--;
	return s;
}

#endif

/* rd-t.h: types of the bounded reader every parser in proto/ reads
 * untrusted bytes through (STYLE.md 2.5; c-ares's ares_buf is the model).
 *
 * A reader is a read-only view: a base pointer, a cursor and two ends.
 *
 *   base                 pos            avail          end
 *   |--------------------|--------------|..............|
 *                         readable now    declared, not yet given
 *
 * `end` is the hard end of the structure being read, as a length field (or
 * the caller) declared it: nothing at or past it is ever read, and a fetch
 * that would cross it is GW_RD_OVER (malformed). `avail` is how many bytes
 * the caller has actually given: a fetch that stays before `end` but would
 * cross `avail` is GW_RD_SHORT (need more). A reader over bytes that are
 * all there has avail == end, so only OVER can happen. Positions are
 * offsets from `base`, which sub-readers share, so an error can name where
 * in the caller's input it was found.
 */
#ifndef SLUICE_GW_RD_T_H
#define SLUICE_GW_RD_T_H

#include <stddef.h>
#include <stdint.h>

/* What a fetch returns. On anything but OK the reader is unchanged and the
 * output arguments are not written. */
enum gw_rd_status {
	GW_RD_OK = 0,
	GW_RD_SHORT,    /* past the bytes given: need more */
	GW_RD_OVER,     /* past the declared end: malformed */
	GW_RD_BADLEN,   /* a length prefix, read whole, declares more bytes
			 * than its container has left: malformed */
};

/* The declared end of a stream whose length is not known yet. */
#define GW_RD_NO_END SIZE_MAX

struct gw_rd {
	const uint8_t *base;
	size_t pos;     /* pos <= end always; pos > avail only after
			 * gw_rd_sub() stepped over bytes not given yet */
	size_t end;
	size_t avail;   /* clamped: avail <= end */
};

/* Bytes borrowed from the reader's input; never NUL-terminated. */
struct gw_rd_span {
	const uint8_t *p;
	size_t len;
};

/* A set of byte values, for scans (HTTP tokens, digits, ...). Build one as
 * a constant with range designators: { .in = { ['0' ... '9'] = 1 } }. */
struct gw_rd_class {
	uint8_t in[256];
};

#endif

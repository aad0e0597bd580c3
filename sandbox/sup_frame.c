/* sup_frame.c: the rpc framing reader (sup_frame.h). */
#include <string.h>

#include "sup_frame.h"

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void
sup_frame_init(struct sup_frame_rd *rd, uint8_t *buf, size_t cap)
{
	memset(rd, 0, sizeof(*rd));
	rd->buf = buf;
	rd->cap = cap > SUP_FRAME_MAX ? SUP_FRAME_MAX : cap;
}

enum sup_frame_st
sup_frame_feed(struct sup_frame_rd *rd, const uint8_t *in, size_t n, size_t *used)
{
	size_t off = 0, take;

	*used = 0;
	if (rd->hlen == SUP_FRAME_HDR && (rd->len == 0 || rd->len > SUP_FRAME_STEP))
		return SUP_FRAME_STRAY;
	while (off < n) {
		if (rd->hlen < SUP_FRAME_HDR) {
			take = SUP_FRAME_HDR - rd->hlen;
			if (take > n - off)
				take = n - off;
			memcpy(rd->hdr + rd->hlen, in + off, take);
			rd->hlen += take;
			off += take;
			if (rd->hlen < SUP_FRAME_HDR)
				break;
			rd->len = be32(rd->hdr);
			rd->id = be32(rd->hdr + 4);
			rd->got = 0;
			if (rd->len == 0 || rd->len > SUP_FRAME_STEP) {
				*used = off;
				return SUP_FRAME_STRAY;
			}
			continue;
		}
		if (rd->got < rd->len) {
			take = rd->len - rd->got;
			if (take > n - off)
				take = n - off;
			if (rd->len <= rd->cap)
				memcpy(rd->buf + rd->got, in + off, take);
			rd->got += take;
			off += take;
		}
		if (rd->got == rd->len) {
			/* Complete: the next call starts a new header. */
			rd->hlen = 0;
			*used = off;
			return rd->len <= rd->cap ? SUP_FRAME_DONE : SUP_FRAME_BIG;
		}
	}
	*used = off;
	return SUP_FRAME_MORE;
}

void
sup_frame_header(uint8_t out[SUP_FRAME_HDR], uint32_t len, uint32_t id)
{
	out[0] = (uint8_t)(len >> 24);
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
	out[4] = (uint8_t)(id >> 24);
	out[5] = (uint8_t)(id >> 16);
	out[6] = (uint8_t)(id >> 8);
	out[7] = (uint8_t)id;
}

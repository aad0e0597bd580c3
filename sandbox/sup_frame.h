/* sup_frame.h: the rpc protocol's framing (docs/backend-rpc.md), pure:
 * an 8-byte header (u32 big-endian payload length N, u32 big-endian call
 * id) and N bytes of JSON. A resumable reader: bytes in, a frame, an
 * oversized frame drained (its id known), or a frame out of step. No I/O,
 * no allocation: the caller owns the payload buffer (SUP_FRAME_MAX bytes).
 * Used by sluice-supervisor-podman only; it links nothing of ours. */
#ifndef SUP_FRAME_H
#define SUP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define SUP_FRAME_HDR 8
#define SUP_FRAME_MAX (4u << 20)   /* the largest payload served */
#define SUP_FRAME_STEP (64u << 20) /* above it: out of step, drop */

enum sup_frame_st {
	SUP_FRAME_MORE,  /* every byte given was consumed; feed more */
	SUP_FRAME_DONE,  /* a frame: rd->buf[0..len), rd->id */
	SUP_FRAME_BIG,   /* a frame over max was drained: fail rd->id */
	SUP_FRAME_STRAY, /* length 0 or over SUP_FRAME_STEP: drop the stream */
};

struct sup_frame_rd {
	uint8_t *buf; /* caller's, cap bytes */
	size_t cap;   /* <= SUP_FRAME_MAX */
	uint8_t hdr[SUP_FRAME_HDR];
	size_t hlen;  /* header bytes held */
	uint32_t len; /* payload length of the frame being read */
	uint32_t id;
	size_t got;   /* payload bytes read (or drained) */
};

void sup_frame_init(struct sup_frame_rd *rd, uint8_t *buf, size_t cap);
/* Consumes bytes of in[0..n) into rd; *used says how many. After DONE or
 * BIG the next call starts the next frame. After STRAY the reader stays
 * out of step (every later call returns STRAY). */
enum sup_frame_st sup_frame_feed(struct sup_frame_rd *rd, const uint8_t *in, size_t n,
				 size_t *used);
/* The header of a frame of len payload bytes for call id. */
void sup_frame_header(uint8_t out[SUP_FRAME_HDR], uint32_t len, uint32_t id);

/* Base64 (RFC 4648, padded; sup_b64.c). Encode returns malloc'd text (NULL
 * out of memory); decode writes at most cap bytes and returns their count,
 * or -1 for input that is not base64 or does not fit. */
char *sup_b64_encode(const unsigned char *in, size_t n);
long sup_b64_decode(const char *in, size_t n, unsigned char *out, size_t cap);

#endif

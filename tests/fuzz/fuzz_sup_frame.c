/* fuzz_sup_frame.c: libFuzzer target for the rpc framing reader of
 * sluice-supervisor-podman (sandbox/sup_frame.h): whatever a peer sends.
 *
 * The first byte selects the feed size ((sel & 31) + 1 bytes per call) and
 * the payload cap (64 << (sel >> 5) bytes). Checks the contracts: a call
 * consumes at most what it was given; MORE only with everything consumed;
 * DONE with 0 < len <= cap; BIG with len > cap; once STRAY, always STRAY
 * and nothing consumed; the same stream fed whole gives the same frames.
 * The same bytes go to its base64 decoder (sup_b64.c): never more than the
 * cap written; what decodes encodes to text that decodes to the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "sup_frame.h"

#define NMAX 4096

static size_t
run(const uint8_t *in, size_t n, size_t step, size_t cap, uint8_t *buf, uint32_t *out)
{
	struct sup_frame_rd rd;
	size_t off = 0, k = 0, used;
	int stray = 0;

	sup_frame_init(&rd, buf, cap);
	while (off < n) {
		size_t give = n - off < step ? n - off : step;
		enum sup_frame_st s = sup_frame_feed(&rd, in + off, give, &used);
		CHECK(!(used > give));
		CHECK(!(stray && (s != SUP_FRAME_STRAY || used)));
		off += used;
		switch (s) {
		case SUP_FRAME_MORE:
			CHECK(!(used != give));
			break;
		case SUP_FRAME_DONE:
			CHECK(!(rd.len == 0 || rd.len > cap));
			if (k < NMAX)
				out[k++] = rd.id ^ rd.len << 1;
			break;
		case SUP_FRAME_BIG:
			CHECK(!(rd.len <= cap || rd.len > SUP_FRAME_STEP));
			if (k < NMAX)
				out[k++] = rd.id ^ 0x80000000u;
			break;
		case SUP_FRAME_STRAY:
			if (stray)
				return k;
			stray = 1;
			break;
		}
	}
	return k;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint32_t a[NMAX], b[NMAX];
	uint8_t *buf;

	if (size < 1)
		return 0;
	size_t step = (data[0] & 31) + 1, cap = (size_t)64 << (data[0] >> 5);
	buf = malloc(cap);
	if (!buf)
		return 0;
	size_t ka = run(data + 1, size - 1, step, cap, buf, a);
	size_t kb = run(data + 1, size - 1, size, cap, buf, b);
	CHECK(!(ka != kb || memcmp(a, b, ka * sizeof(a[0]))));
	long n = sup_b64_decode((const char *)data + 1, size - 1, buf, cap);
	CHECK(n >= -1 && n <= (long)cap);
	if (n >= 0) {
		char *e = sup_b64_encode(buf, (size_t)n);
		uint8_t *again = malloc((size_t)n + 1);
		CHECK(e && again);
		CHECK(sup_b64_decode(e, strlen(e), again, (size_t)n) == n);
		CHECK(memcmp(again, buf, (size_t)n) == 0);
		free(e);
		free(again);
	}
	free(buf);
	return 0;
}

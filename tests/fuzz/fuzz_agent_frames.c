/* fuzz_agent_frames.c: libFuzzer target for agent/proto.c.
 *
 * The first input byte picks the piece size; the rest is a byte stream
 * from a peer, decoded whole and in pieces. Besides memory errors it
 * checks the contracts: both ways give the same frames, every frame
 * passes agent_frame_check() and re-encodes to the same bytes, payloads
 * stay within bounds, and control payloads parse or fail with a reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"

#include "proto.h"


#define MAXF 64

struct rec {
	enum agent_dec_result r;
	uint8_t type;
	uint32_t stream, len;
	uint64_t sum;
};

static uint8_t buf[AGENT_PAYLOAD_MAX];
static uint8_t enc[AGENT_HDR_LEN + AGENT_PAYLOAD_MAX];

static size_t
run(const uint8_t *in, size_t len, size_t step, struct rec *out)
{
	struct agent_dec d;
	size_t n = 0, off = 0;

	agent_dec_init(&d, buf, sizeof(buf));
	while (off < len && n < MAXF) {
		size_t avail = len - off < step ? len - off : step;
		size_t pos = 0;

		while (pos < avail && n < MAXF) {
			struct agent_frame f;
			size_t used;
			enum agent_dec_result r =
				agent_dec_feed(&d, in + off + pos, avail - pos,
					       &used, &f);

			CHECK(used <= avail - pos);
			pos += used;
			if (r == AGENT_DEC_AGAIN) {
				CHECK(pos == avail);
				break;
			}
			out[n] = (struct rec){ r, f.type, f.stream, f.len, 0 };
			if (r == AGENT_DEC_FRAME) {
				long e;

				CHECK(agent_frame_check(f.type, f.stream,
							f.len) == NULL);
				CHECK(f.len <= AGENT_PAYLOAD_MAX);
				for (uint32_t i = 0; i < f.len; i++)
					out[n].sum = out[n].sum * 31 +
						     f.payload[i];
				e = agent_frame_encode(enc, sizeof(enc), f.type,
						       f.stream, f.payload,
						       f.len);
				CHECK(e == (long)(AGENT_HDR_LEN + f.len));
				CHECK(memcmp(enc + AGENT_HDR_LEN, f.payload,
					     f.len) == 0);
				if (f.type != AGENT_FT_IN &&
				    f.type != AGENT_FT_OUT &&
				    f.type != AGENT_FT_ERR &&
				    f.type != AGENT_FT_WINDOW) {
					char err[256] = "";
					json_t *j = agent_json_parse(
						f.payload, f.len, err,
						sizeof(err));

					CHECK(j != NULL || err[0] != '\0');
					CHECK(j == NULL || json_is_object(j));
					json_decref(j);
				}
			} else {
				CHECK(f.payload == NULL && d.reason != NULL);
			}
			n++;
			if (r == AGENT_DEC_FATAL)
				return n;
		}
		off += avail;
	}
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rec a[MAXF], b[MAXF];
	size_t step, na, nb;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 32 + 1;
	data++;
	size--;
	na = run(data, size, size ? size : 1, a);
	nb = run(data, size, step, b);
	CHECK(na == nb);
	for (size_t i = 0; i < na; i++)
		CHECK(a[i].r == b[i].r && a[i].type == b[i].type &&
		      a[i].stream == b[i].stream && a[i].len == b[i].len &&
		      a[i].sum == b[i].sum);
	return 0;
}

/* fuzz_rpcframe.c: libFuzzer target for what sluiced reads from a
 * supervisor (sandbox/rpc_frame.h): the frame stream and every reply. A
 * supervisor drives an engine sluice does not own, so its bytes are
 * untrusted.
 *
 * The first input byte selects the read size ((sel & 63) + 1 bytes at a
 * time) and, with bit 6, a small body limit (64 bytes) so that oversized
 * frames are drained; the rest is the stream. Every whole frame is given
 * to sbx_rpc_reply_parse() with its header's id.
 *
 * Besides memory errors and leaks it checks the contracts:
 *  - the reader consumes something or yields an event on every call, never
 *    more than it was given, and a FRAME's length is within the limit;
 *  - fed all at once or in steps, the same events in the same order;
 *  - a reply parses to 0 with an object result, 1 with no result and
 *    terminated message and reason, or -EPROTO with a message. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"

#include "rpc_frame.h"

#define MAXEV 4096

struct evrec {
	int kind;
	uint32_t id;
	size_t len;
};

static void
check_reply(const struct sbx_rpc_ev *ev)
{
	struct sbx_rpc_reply rep;
	char err[256] = "";
	int r = sbx_rpc_reply_parse(ev->body, ev->len, ev->id, &rep, err, sizeof(err));

	if (r < 0) {
		CHECK(r == -EPROTO && err[0] != '\0' && rep.result == NULL);
		return;
	}
	if (r == 0) {
		CHECK(json_is_object(rep.result));
		json_decref(rep.result);
		return;
	}
	CHECK(r == 1 && rep.result == NULL);
	CHECK(memchr(rep.message, '\0', sizeof(rep.message)) != NULL);
	CHECK(memchr(rep.reason, '\0', sizeof(rep.reason)) != NULL);
	(void)sbx_rpc_code_errno(rep.code);
}

static size_t
run(const uint8_t *in, size_t len, size_t step, size_t max, bool parse, struct evrec *out)
{
	struct sbx_rpc_rd r = { .max = max };
	size_t fed = 0, n = 0;

	while (fed < len) {
		size_t chunk = len - fed < step ? len - fed : step, off = 0;

		for (;;) {
			struct sbx_rpc_ev ev;
			size_t used;

			CHECK(sbx_rpc_rd_feed(&r, in + fed + off, chunk - off, &used, &ev) == 0);
			CHECK(used <= chunk - off);
			off += used;
			if (ev.kind == SBX_RPC_EV_NONE) {
				CHECK(off == chunk);
				break;
			}
			if (ev.kind == SBX_RPC_EV_FRAME) {
				CHECK(ev.len >= 1 && ev.len <= max);
				if (parse)
					check_reply(&ev);
			}
			if (n < MAXEV)
				out[n++] = (struct evrec){ ev.kind, ev.id, ev.len };
			if (ev.kind == SBX_RPC_EV_BROKEN) {
				sbx_rpc_rd_free(&r);
				return n;
			}
		}
		fed += chunk;
	}
	sbx_rpc_rd_free(&r);
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct evrec a[MAXEV], b[MAXEV];
	size_t step, max, na, nb;

	if (size < 1 || size > (1u << 20))
		return 0;
	step = (size_t)(data[0] & 63) + 1;
	max = (data[0] & 64) ? 64 : SBX_RPC_FRAME_MAX;
	na = run(data + 1, size - 1, size, max, true, a);
	nb = run(data + 1, size - 1, step, max, false, b);
	CHECK(na == nb);
	for (size_t i = 0; i < na; i++)
		CHECK(a[i].kind == b[i].kind && a[i].id == b[i].id && a[i].len == b[i].len);
	return 0;
}

/* fuzz_ws.c: libFuzzer target for proto/ws.c, the WebSocket receiver.
 *
 * The first byte picks the side (server: masked frames expected) and the
 * piece size; the rest is a byte stream from a peer, fed whole and in
 * pieces. Besides memory errors it checks the contracts: both ways give
 * the same messages and the same verdict, every message stays within its
 * bound, text messages are UTF-8, close codes are ones a peer may send,
 * and an error is sticky and names a close code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "ws.h"

#define MAXM 64
#define BOUND 4096

struct rec {
	enum ws_rx_result r;
	uint8_t op;
	size_t len;
	uint64_t sum;
	unsigned code;
};

static uint8_t buf[BOUND];

static size_t
run(const uint8_t *in, size_t len, size_t step, bool server, struct rec *out, unsigned *close)
{
	struct ws_rx rx;
	size_t n = 0, off = 0;

	ws_rx_init(&rx, server, buf, BOUND);
	*close = 0;
	while (off < len && n < MAXM) {
		size_t avail = len - off < step ? len - off : step, used;
		struct ws_msg m;
		enum ws_rx_result r = ws_rx_feed(&rx, in + off, avail, &used, &m);

		CHECK(used <= avail);
		off += used;
		if (r == WS_RX_ERROR) {
			size_t u2;

			CHECK(rx.close_code == WS_CLOSE_PROTOCOL || rx.close_code == WS_CLOSE_TOO_BIG ||
			      rx.close_code == WS_CLOSE_BAD_DATA);
			CHECK(ws_rx_feed(&rx, in, len, &u2, &m) == WS_RX_ERROR);
			*close = rx.close_code;
			break;
		}
		if (r == WS_RX_AGAIN) {
			CHECK(used == avail);
			continue;
		}
		out[n] = (struct rec){ .r = r, .op = m.opcode, .len = m.len };
		for (size_t i = 0; i < m.len; i++)
			out[n].sum = out[n].sum * 31 + m.data[i];
		if (m.opcode >= 0x8)
			CHECK(m.len <= WS_CTRL_MAX);
		else
			CHECK(m.len <= BOUND);
		if (m.opcode == WS_OP_TEXT)
			CHECK(ws_utf8_ok(m.data, m.len));
		if (m.opcode == WS_OP_CLOSE && m.len) {
			CHECK(ws_close_code_ok(m.close_code));
			out[n].code = m.close_code;
		}
		n++;
	}
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rec a[MAXM], b[MAXM];
	unsigned ca, cb;
	size_t na, nb, step;
	bool server;

	if (size < 1)
		return 0;
	server = (data[0] & 0x80) == 0;
	step = (size_t)(data[0] & 0x7f) + 1;
	data++;
	size--;
	na = run(data, size, size ? size : 1, server, a, &ca);
	nb = run(data, size, step, server, b, &cb);
	/* MAXM may cut either run short at a different place */
	if (na < MAXM && nb < MAXM) {
		CHECK(na == nb);
		CHECK(ca == cb);
		for (size_t i = 0; i < na; i++)
			CHECK(a[i].op == b[i].op && a[i].len == b[i].len && a[i].sum == b[i].sum &&
			      a[i].code == b[i].code);
	}
	return 0;
}

/* test_ws.c: proto/ws.h, the WebSocket codec. Refusals first: every rule
 * of RFC 6455 the receiver enforces, with the close code it names; then
 * the handshake value (the RFC's own example), masking, fragments split
 * at every byte, and control frames between fragments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "ws.h"

static const uint8_t M[4] = { 0x37, 0xfa, 0x21, 0x3d };
static uint8_t rxbuf[1024];

/* A frame as a client sends it (masked) into out; its length. */
static size_t
frame(uint8_t *out, uint8_t b0, const void *p, size_t n, bool masked)
{
	size_t h = ws_hdr_put(out, (b0 & 0x80) != 0, b0 & 0x0f, n, masked ? M : NULL);

	out[0] = b0;
	memcpy(out + h, p, n);
	if (masked)
		ws_mask(out + h, n, M, 0);
	return h + n;
}

/* Feeds in whole; the first non-AGAIN result. */
static enum ws_rx_result
feed(struct ws_rx *rx, const uint8_t *in, size_t len, struct ws_msg *m)
{
	size_t pos = 0;

	while (pos < len) {
		size_t used;
		enum ws_rx_result r = ws_rx_feed(rx, in + pos, len - pos, &used, m);

		pos += used;
		if (r != WS_RX_AGAIN)
			return r;
	}
	return WS_RX_AGAIN;
}

static void
expect_error(const uint8_t *in, size_t len, bool server, unsigned code)
{
	struct ws_rx rx;
	struct ws_msg m;

	ws_rx_init(&rx, server, rxbuf, 64);
	assert_int_equal(feed(&rx, in, len, &m), WS_RX_ERROR);
	assert_int_equal(rx.close_code, code);
	assert_non_null(rx.reason);
	/* sticky */
	assert_int_equal(feed(&rx, in, len, &m), WS_RX_ERROR);
}

static void
test_refusals(void **st)
{
	uint8_t b[256];
	uint8_t big[200];
	size_t n;

	(void)st;
	memset(big, 'a', sizeof(big));
	/* unmasked from a client; masked from a server */
	n = frame(b, 0x82, "ab", 2, false);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x82, "ab", 2, true);
	expect_error(b, n, false, WS_CLOSE_PROTOCOL);
	/* reserved bits, unknown opcodes */
	n = frame(b, 0xc2, "ab", 2, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x83, "ab", 2, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x8b, "", 0, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	/* control frames: fragmented, over 125 */
	n = frame(b, 0x09, "x", 1, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x89, big, 126, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	/* continuation with nothing begun; a new message inside one */
	n = frame(b, 0x80, "x", 1, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x01, "x", 1, true);
	n += frame(b + n, 0x81, "y", 1, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	/* lengths not in their shortest form, top bit set */
	{
		uint8_t h1[] = { 0x82, 0xfe, 0x00, 0x05, 1, 2, 3, 4 };
		uint8_t h2[] = { 0x82, 0xff, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 1, 2, 3, 4 };
		uint8_t h3[] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4 };

		expect_error(h1, sizeof(h1), true, WS_CLOSE_PROTOCOL);
		expect_error(h2, sizeof(h2), true, WS_CLOSE_PROTOCOL);
		expect_error(h3, sizeof(h3), true, WS_CLOSE_PROTOCOL);
	}
	/* a message over the bound (64 here), whole or in fragments */
	n = frame(b, 0x82, big, 65, true);
	expect_error(b, n, true, WS_CLOSE_TOO_BIG);
	n = frame(b, 0x02, big, 40, true);
	n += frame(b + n, 0x80, big, 25, true);
	expect_error(b, n, true, WS_CLOSE_TOO_BIG);
	/* text that is not UTF-8: a bad byte, an overlong, a surrogate, a
	 * sequence cut by the end of the message */
	n = frame(b, 0x81, "a\xff", 2, true);
	expect_error(b, n, true, WS_CLOSE_BAD_DATA);
	n = frame(b, 0x81, "\xc0\xaf", 2, true);
	expect_error(b, n, true, WS_CLOSE_BAD_DATA);
	n = frame(b, 0x81, "\xed\xa0\x80", 3, true);
	expect_error(b, n, true, WS_CLOSE_BAD_DATA);
	n = frame(b, 0x01, "\xe2\x82", 2, true);
	n += frame(b + n, 0x80, "", 0, true);
	expect_error(b, n, true, WS_CLOSE_BAD_DATA);
	/* close: one byte, a code one may not send, a reason not UTF-8 */
	n = frame(b, 0x88, "\x03", 1, true);
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x88, "\x03\xed", 2, true); /* 1005 */
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x88, "\x03\xe7", 2, true); /* 999 */
	expect_error(b, n, true, WS_CLOSE_PROTOCOL);
	n = frame(b, 0x88, "\x03\xe8\xff", 3, true);
	expect_error(b, n, true, WS_CLOSE_BAD_DATA);
}

static void
test_handshake(void **st)
{
	char out[WS_ACCEPT_LEN + 1], key[WS_KEY_LEN + 1];
	uint8_t rnd[16];

	(void)st;
	/* bad keys first */
	assert_false(ws_key_ok("", 0));
	assert_false(ws_key_ok("dGhlIHNhbXBsZSBub25jZQ=", 23));
	assert_false(ws_key_ok("dGhlIHNhbXBsZSBub25jZQ==x", 25));
	assert_false(ws_key_ok("dGhlIHNhbXBsZSBub25jZ!==", 24));
	assert_false(ws_key_ok("dGhlIHNhbXBsZSBub25jZR==", 24)); /* stray low bits */
	assert_int_equal(ws_accept("short", 5, out), -1);
	/* RFC 6455 section 1.3 */
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, out), 0);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	memset(rnd, 0xa5, sizeof(rnd));
	ws_key_make(rnd, key);
	assert_int_equal(strlen(key), WS_KEY_LEN);
	assert_true(ws_key_ok(key, WS_KEY_LEN));
}

static void
test_messages(void **st)
{
	uint8_t b[512];
	size_t n = 0;
	struct ws_rx rx;
	struct ws_msg m;

	(void)st;
	/* a binary message in 3 fragments with a ping and a pong between */
	n += frame(b + n, 0x02, "ab", 2, true);
	n += frame(b + n, 0x89, "hi", 2, true);
	n += frame(b + n, 0x00, "", 0, true);
	n += frame(b + n, 0x8a, "", 0, true);
	n += frame(b + n, 0x80, "c\0d", 3, true);
	n += frame(b + n, 0x81, "\xc3\xa9t\xc3\xa9", 6, true);
	n += frame(b + n, 0x88, "\x03\xe8" "bye", 5, true);
	/* whole, then split at every byte */
	for (int pass = 0; pass < 2; pass++) {
		size_t pos = 0, got = 0, step = pass == 0 ? n : 1;

		ws_rx_init(&rx, true, rxbuf, 64);
		while (pos < n) {
			size_t used, k = n - pos < step ? n - pos : step;
			enum ws_rx_result r = ws_rx_feed(&rx, b + pos, k, &used, &m);

			assert_int_not_equal(r, WS_RX_ERROR);
			pos += used;
			if (r != WS_RX_MSG)
				continue;
			switch (got++) {
			case 0:
				assert_int_equal(m.opcode, WS_OP_PING);
				assert_memory_equal(m.data, "hi", 2);
				break;
			case 1:
				assert_int_equal(m.opcode, WS_OP_PONG);
				assert_int_equal(m.len, 0);
				break;
			case 2:
				assert_int_equal(m.opcode, WS_OP_BINARY);
				assert_int_equal(m.len, 5);
				assert_memory_equal(m.data, "abc\0d", 5);
				break;
			case 3:
				assert_int_equal(m.opcode, WS_OP_TEXT);
				assert_int_equal(m.len, 6);
				break;
			case 4:
				assert_int_equal(m.opcode, WS_OP_CLOSE);
				assert_int_equal(m.close_code, 1000);
				assert_memory_equal(m.data + 2, "bye", 3);
				break;
			}
		}
		assert_int_equal(got, 5);
	}
	/* a server's frames to a client (unmasked), 16- and 64-bit lengths */
	{
		static uint8_t big[70000], out[70100];
		static uint8_t cbuf[80000];
		size_t h;

		memset(big, 'z', sizeof(big));
		h = ws_hdr_put(out, true, WS_OP_BINARY, 300, NULL);
		assert_int_equal(h, 4);
		memcpy(out + h, big, 300);
		ws_rx_init(&rx, false, cbuf, sizeof(cbuf));
		assert_int_equal(feed(&rx, out, h + 300, &m), WS_RX_MSG);
		assert_int_equal(m.len, 300);
		h = ws_hdr_put(out, true, WS_OP_BINARY, sizeof(big), NULL);
		assert_int_equal(h, 10);
		memcpy(out + h, big, sizeof(big));
		assert_int_equal(feed(&rx, out, h + sizeof(big), &m), WS_RX_MSG);
		assert_int_equal(m.len, sizeof(big));
		assert_memory_equal(m.data, big, sizeof(big));
	}
}

static void
test_helpers(void **st)
{
	uint8_t p[WS_CTRL_MAX];
	char reason[200];
	size_t n;

	(void)st;
	assert_false(ws_close_code_ok(999));
	assert_false(ws_close_code_ok(1004));
	assert_false(ws_close_code_ok(1005));
	assert_false(ws_close_code_ok(1006));
	assert_false(ws_close_code_ok(1015));
	assert_false(ws_close_code_ok(5000));
	assert_true(ws_close_code_ok(1000));
	assert_true(ws_close_code_ok(1011));
	assert_true(ws_close_code_ok(4000));
	/* a long reason is cut on a character boundary */
	memset(reason, 0, sizeof(reason));
	for (size_t i = 0; i + 2 < sizeof(reason) - 1; i += 2)
		memcpy(reason + i, "\xc3\xa9", 2);
	n = ws_close_payload(p, 1011, reason);
	assert_true(n <= WS_CTRL_MAX);
	assert_true(ws_utf8_ok(p + 2, n - 2));
	assert_int_equal(p[0] << 8 | p[1], 1011);
	assert_true(ws_utf8_ok((const uint8_t *)"\xf4\x8f\xbf\xbf", 4));
	assert_false(ws_utf8_ok((const uint8_t *)"\xf4\x90\x80\x80", 4));
	assert_false(ws_utf8_ok((const uint8_t *)"\xe0\x80\x80", 3));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_helpers),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* test_sup_frame.c: the rpc framing reader of sluice-supervisor-podman
 * (sandbox/sup_frame.h): bad inputs first (out of step, oversized), then
 * frames split at every offset, several in one read, the header writer;
 * its base64 (bad inputs first, then the RFC 4648 vectors both ways). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sup_frame.h"

static size_t
frame(uint8_t *out, uint32_t id, const char *json)
{
	size_t n = strlen(json);

	sup_frame_header(out, (uint32_t)n, id);
	memcpy(out + SUP_FRAME_HDR, json, n);
	return SUP_FRAME_HDR + n;
}

static void
test_stray(void **st)
{
	uint8_t buf[64], in[16];
	struct sup_frame_rd rd;
	size_t used;

	(void)st;
	sup_frame_init(&rd, buf, sizeof(buf));
	sup_frame_header(in, 0, 7); /* length 0 */
	assert_int_equal(sup_frame_feed(&rd, in, 8, &used), SUP_FRAME_STRAY);
	assert_int_equal(used, 8);
	/* it stays out of step */
	assert_int_equal(sup_frame_feed(&rd, in, 8, &used), SUP_FRAME_STRAY);
	assert_int_equal(used, 0);
	sup_frame_init(&rd, buf, sizeof(buf));
	sup_frame_header(in, SUP_FRAME_STEP + 1, 7);
	assert_int_equal(sup_frame_feed(&rd, in, 8, &used), SUP_FRAME_STRAY);
}

static void
test_big(void **st)
{
	uint8_t buf[16], in[64];
	struct sup_frame_rd rd;
	size_t used, n;

	(void)st;
	sup_frame_init(&rd, buf, sizeof(buf));
	n = frame(in, 9, "{\"a\":\"0123456789abcdef\"}"); /* over the 16-byte cap */
	n += frame(in + n, 10, "{}");
	assert_int_equal(sup_frame_feed(&rd, in, n, &used), SUP_FRAME_BIG);
	assert_int_equal(rd.id, 9);
	/* drained exactly to the next frame, which reads whole */
	assert_int_equal(sup_frame_feed(&rd, in + used, n - used, &used), SUP_FRAME_DONE);
	assert_int_equal(rd.id, 10);
	assert_int_equal(rd.len, 2);
	assert_memory_equal(buf, "{}", 2);
}

static void
test_split(void **st)
{
	uint8_t buf[64], in[128];
	size_t n, used;

	(void)st;
	n = frame(in, 0x01020304, "{\"id\":16909060}");
	n += frame(in + n, 2, "[1]");
	for (size_t cut = 0; cut <= n; cut++) {
		struct sup_frame_rd rd;
		size_t off = 0, got = 0;
		uint32_t ids[2];
		sup_frame_init(&rd, buf, sizeof(buf));
		/* feed [0,cut) then [cut,n), each until consumed */
		size_t ends[2] = {cut, n};
		for (int part = 0; part < 2; part++) {
			while (off < ends[part]) {
				enum sup_frame_st s = sup_frame_feed(&rd, in + off, ends[part] - off, &used);
				off += used;
				if (s == SUP_FRAME_DONE) {
					assert_true(got < 2);
					ids[got++] = rd.id;
				} else {
					assert_int_equal(s, SUP_FRAME_MORE);
					assert_int_equal(off, ends[part]);
				}
			}
		}
		assert_int_equal(got, 2);
		assert_int_equal(ids[0], 0x01020304);
		assert_int_equal(ids[1], 2);
		assert_int_equal(rd.len, 3);
		assert_memory_equal(buf, "[1]", 3);
	}
}

static void
test_header(void **st)
{
	uint8_t h[SUP_FRAME_HDR];

	(void)st;
	sup_frame_header(h, 0x00400000, 0xdeadbeef);
	assert_memory_equal(h, "\x00\x40\x00\x00\xde\xad\xbe\xef", 8);
}

static void
test_b64_bad(void **st)
{
	unsigned char out[16];
	static const char *const bad[] = {"A", "AB", "ABC", "A===", "AB=C", "=AAA", "AA==AAAA",
					  "AA*A", "AAA\n", "Zm9v\0AAA"};

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sup_b64_decode(bad[i], i == 9 ? 8 : strlen(bad[i]), out, sizeof(out)),
				 -1);
	/* does not fit */
	assert_int_equal(sup_b64_decode("Zm9vYmFy", 8, out, 5), -1);
}

static void
test_b64_vectors(void **st)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					  "Zm9vYmFy"};
	unsigned char out[16];

	(void)st;
	for (size_t i = 0; i < 7; i++) {
		char *e = sup_b64_encode((const unsigned char *)plain[i], strlen(plain[i]));
		assert_non_null(e);
		assert_string_equal(e, enc[i]);
		free(e);
		assert_int_equal(sup_b64_decode(enc[i], strlen(enc[i]), out, sizeof(out)),
				 (long)strlen(plain[i]));
		assert_memory_equal(out, plain[i], strlen(plain[i]));
	}
	unsigned char bin[256];
	for (int i = 0; i < 256; i++)
		bin[i] = (unsigned char)i;
	char *e = sup_b64_encode(bin, sizeof(bin));
	unsigned char back[256];
	assert_int_equal(sup_b64_decode(e, strlen(e), back, sizeof(back)), 256);
	assert_memory_equal(back, bin, 256);
	free(e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stray),
		cmocka_unit_test(test_big),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_b64_bad),
		cmocka_unit_test(test_b64_vectors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

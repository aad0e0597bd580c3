/* test_tlshello.c: the ClientHello reader. Bad inputs first (each refusal
 * alone), then hellos captured from real clients and hand-built ones. Every
 * input is also fed as each of its prefixes (what a door re-running the
 * reader on a growing buffer sees, split at every offset): a prefix must
 * give NEED_MORE, with a need past its length, or the input's own result,
 * and an input that gives OK must give NEED_MORE for every prefix shorter
 * than its first record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tlshello.h"
#include "tlshello_build.h"

/* ---- captured hellos ------------------------------------------------ */

/* Captured on 127.0.0.1 from Debian 12's clients (OpenSSL 3.0, curl 7.88):
 *   openssl s_client -servername example.com                  (TLS 1.3)
 *   openssl s_client -servername Example.COM -tls1_2 -alpn http/1.1
 *   curl https://example.com/ --resolve ...             (ALPN h2, padding)
 *   openssl s_client -noservername                            (no SNI) */
static const uint8_t cap_openssl13[] = {
  0x16, 0x03, 0x01, 0x01, 0x38, 0x01, 0x00, 0x01, 0x34, 0x03, 0x03, 0x3f,
  0xda, 0x5d, 0xa4, 0x32, 0x74, 0x8c, 0x1d, 0x29, 0xb6, 0x57, 0xc5, 0xd8,
  0xef, 0x7e, 0x4f, 0x40, 0x9b, 0x33, 0x88, 0x54, 0xa7, 0xc4, 0x5f, 0x9a,
  0xd0, 0x81, 0xf8, 0x3e, 0x68, 0xcf, 0x04, 0x20, 0xe7, 0x8c, 0x99, 0xe9,
  0x39, 0x93, 0xce, 0xd3, 0xca, 0xc2, 0x00, 0xb0, 0x8d, 0x7d, 0xe4, 0x9d,
  0x34, 0xeb, 0x9c, 0xb9, 0xcb, 0x32, 0x56, 0x4a, 0xa3, 0x04, 0xea, 0xa1,
  0xe9, 0x7e, 0x2f, 0x31, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
  0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
  0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
  0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
  0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
  0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xad,
  0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x00, 0x0b, 0x65, 0x78, 0x61,
  0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00, 0x0b, 0x00, 0x04,
  0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d,
  0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01,
  0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16,
  0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28,
  0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09,
  0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01,
  0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02,
  0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03,
  0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00,
  0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x36, 0x68, 0xd9,
  0xae, 0xa7, 0xb3, 0x60, 0x2b, 0x34, 0x21, 0x62, 0xbe, 0xf8, 0x6b, 0x06,
  0x63, 0xd9, 0x2a, 0x5a, 0xd1, 0x08, 0xc4, 0x8b, 0x74, 0x27, 0x7d, 0xb5,
  0x49, 0x84, 0xb6, 0xe3, 0x42
};
static const uint8_t cap_openssl12[] = {
  0x16, 0x03, 0x01, 0x00, 0xda, 0x01, 0x00, 0x00, 0xd6, 0x03, 0x03, 0xdc,
  0x92, 0x61, 0xdb, 0xf1, 0x95, 0xb7, 0x25, 0x8b, 0x4f, 0xc6, 0xed, 0x77,
  0x88, 0x94, 0xaf, 0xf8, 0xdb, 0xba, 0x83, 0x6f, 0xdb, 0x6f, 0x5e, 0x3c,
  0xd2, 0x9c, 0xa6, 0x0e, 0x84, 0x32, 0x93, 0x00, 0x00, 0x38, 0xc0, 0x2c,
  0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
  0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
  0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09,
  0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c,
  0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x75, 0x00, 0x00,
  0x00, 0x10, 0x00, 0x0e, 0x00, 0x00, 0x0b, 0x45, 0x78, 0x61, 0x6d, 0x70,
  0x6c, 0x65, 0x2e, 0x43, 0x4f, 0x4d, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
  0x01, 0x02, 0x00, 0x0a, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x1d, 0x00, 0x17,
  0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x00, 0x23, 0x00, 0x00, 0x00, 0x10,
  0x00, 0x0b, 0x00, 0x09, 0x08, 0x68, 0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e,
  0x31, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00,
  0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08,
  0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08,
  0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03,
  0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02
};
static const uint8_t cap_curl[] = {
  0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x9e,
  0x04, 0xb3, 0x3e, 0x1d, 0x6d, 0x7a, 0x96, 0x55, 0x4c, 0x5d, 0xed, 0x68,
  0x1d, 0x8b, 0x85, 0x8e, 0x73, 0x20, 0xb1, 0x78, 0xeb, 0x2e, 0x36, 0x04,
  0xf1, 0x1e, 0x81, 0xb1, 0xb1, 0xbf, 0xda, 0x20, 0xa4, 0x6d, 0x51, 0x23,
  0xa3, 0x1e, 0xe7, 0x50, 0x0d, 0xe4, 0xf8, 0x85, 0x54, 0x13, 0xa3, 0x92,
  0x79, 0x5a, 0x24, 0x63, 0x76, 0x67, 0x8e, 0x3b, 0xb2, 0x8c, 0x1a, 0x3e,
  0x70, 0x43, 0xac, 0x01, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
  0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
  0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
  0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
  0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
  0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x01, 0x75,
  0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x00, 0x0b, 0x65, 0x78, 0x61,
  0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00, 0x0b, 0x00, 0x04,
  0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d,
  0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01,
  0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x0c,
  0x02, 0x68, 0x32, 0x08, 0x68, 0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e, 0x31,
  0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x31, 0x00, 0x00,
  0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03,
  0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04,
  0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03,
  0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b,
  0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00,
  0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00,
  0x1d, 0x00, 0x20, 0x17, 0xf7, 0x58, 0x00, 0x2b, 0x4c, 0x3e, 0xf6, 0x18,
  0x91, 0xe7, 0x2c, 0x6c, 0x8d, 0x46, 0xbf, 0xda, 0x31, 0x52, 0x21, 0xb7,
  0xfc, 0x86, 0x80, 0x66, 0x68, 0x1a, 0xf2, 0xcb, 0x88, 0x82, 0x0e, 0x00,
  0x15, 0x00, 0xb2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00
};
static const uint8_t cap_nosni[] = {
  0x16, 0x03, 0x01, 0x01, 0x24, 0x01, 0x00, 0x01, 0x20, 0x03, 0x03, 0xeb,
  0x9a, 0xee, 0x23, 0xd1, 0xc5, 0xc7, 0x48, 0x64, 0x2e, 0x8d, 0x26, 0x3e,
  0xcf, 0x42, 0xaa, 0x75, 0x94, 0x2a, 0xfe, 0x39, 0x6b, 0xe8, 0x51, 0xb3,
  0x07, 0x44, 0x6e, 0xa3, 0xca, 0x91, 0x10, 0x20, 0x98, 0x20, 0x19, 0x03,
  0xc3, 0xef, 0x57, 0x71, 0x28, 0x98, 0xb8, 0x5c, 0xfb, 0x9d, 0x04, 0x8a,
  0xa9, 0x5b, 0xe3, 0x84, 0x7b, 0xda, 0xb6, 0x1b, 0x76, 0xc0, 0x8d, 0xef,
  0x26, 0xc8, 0x96, 0xa7, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
  0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
  0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
  0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
  0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
  0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x99,
  0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16,
  0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18,
  0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23,
  0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d,
  0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07,
  0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05,
  0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01,
  0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
  0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00,
  0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
  0x20, 0x2d, 0xbb, 0x45, 0xc1, 0x4e, 0xd0, 0xe8, 0x1b, 0xe3, 0xf1, 0xf3,
  0x69, 0xd9, 0x36, 0x04, 0x72, 0x3c, 0x75, 0xca, 0xf1, 0x29, 0x00, 0xb0,
  0x6c, 0xdd, 0xd2, 0xf5, 0x92, 0x9c, 0x34, 0x89, 0x59
};

/* ---- helpers -------------------------------------------------------- */

/* Checks every prefix of in[0..len) against the whole input's result
 * (prefixes every `stride` bytes, and the last few, for big inputs). */
static void
check_prefixes(const uint8_t *in, size_t len, size_t max_record,
	       const struct gw_tlshello *whole_o, enum gw_tlshello_result whole, size_t stride)
{
	struct gw_tlshello o;

	for (size_t k = 0; k < len; k += (len - k > 8 ? stride : 1)) {
		enum gw_tlshello_result r = gw_tlshello_parse(in, k, max_record, &o);

		if (r == GW_TLSHELLO_NEED_MORE) {
			assert_true(o.need > k);
			assert_null(o.msg);
			assert_int_equal(o.sni_len, 0);
			if (whole == GW_TLSHELLO_OK)
				assert_true(k < whole_o->record_len);
			continue;
		}
		/* an OK input: NEED_MORE until its first record is whole,
		 * then the same OK whatever follows */
		if (whole == GW_TLSHELLO_OK && k < whole_o->record_len)
			fail_msg("prefix %zu of %zu gave %s", k, len, gw_tlshello_result_name(r));
		assert_int_equal(r, whole);
		if (whole == GW_TLSHELLO_OK)
			assert_memory_equal(&o, whole_o, sizeof(o));
	}
}

/* Parses in[0..len) whole and as every prefix; returns the whole result. */
static enum gw_tlshello_result
run_limit(const uint8_t *in, size_t len, size_t max_record, struct gw_tlshello *o)
{
	enum gw_tlshello_result r = gw_tlshello_parse(in, len, max_record, o);
	struct gw_tlshello again;

	check_prefixes(in, len, max_record, o, r, len > 2048 ? 61 : 1);
	/* pure: the same again */
	assert_int_equal(gw_tlshello_parse(in, len, max_record, &again), r);
	assert_memory_equal(&again, o, sizeof(again));
	if (r == GW_TLSHELLO_OK) {
		assert_null(o->msg);
		assert_int_equal(strlen(o->sni), o->sni_len);
		assert_true(o->record_len <= len);
		assert_int_equal(o->need, 0);
	} else if (r != GW_TLSHELLO_NEED_MORE) {
		assert_non_null(o->msg);
		assert_string_equal(o->sni, "");
		assert_int_equal(o->need, 0);
	}
	return r;
}

static enum gw_tlshello_result
run(const uint8_t *in, size_t len, struct gw_tlshello *o)
{
	return run_limit(in, len, 0, o);
}

#define expect(arr, res)                                                                           \
	do {                                                                                       \
		struct gw_tlshello o_;                                                             \
		enum gw_tlshello_result r_ = run(arr, sizeof(arr), &o_);                           \
		if (r_ != (res))                                                                   \
			fail_msg("got %s (%s), want %s", gw_tlshello_result_name(r_),             \
				 o_.msg ? o_.msg : "-", gw_tlshello_result_name(res));             \
	} while (0)

static enum gw_tlshello_result
run_hb(const struct hb *h, struct gw_tlshello *o)
{
	return run(h->b, h->n, o);
}

#define expect_hb(h, res)                                                                          \
	do {                                                                                       \
		struct gw_tlshello o_;                                                             \
		enum gw_tlshello_result r_ = run_hb(h, &o_);                                       \
		if (r_ != (res))                                                                   \
			fail_msg("got %s (%s), want %s", gw_tlshello_result_name(r_),             \
				 o_.msg ? o_.msg : "-", gw_tlshello_result_name(res));             \
	} while (0)

/* ---- refusals ------------------------------------------------------- */

static void
test_need_more_empty(void **state)
{
	struct gw_tlshello o;

	(void)state;
	assert_int_equal(gw_tlshello_parse(NULL, 0, 0, &o), GW_TLSHELLO_NEED_MORE);
	assert_int_equal(o.need, 5);
	assert_int_equal(gw_tlshello_parse((const uint8_t *)"\x16\x03\x01\x01", 4, 0, &o),
			 GW_TLSHELLO_NEED_MORE);
	assert_int_equal(o.need, 5);
	assert_int_equal(gw_tlshello_parse((const uint8_t *)"\x16\x03\x01\x01\x00", 5, 0, &o),
			 GW_TLSHELLO_NEED_MORE);
	assert_int_equal(o.need, 5 + 256);
	assert_int_equal(o.record_len, 5 + 256);
}

static void
test_not_tls(void **state)
{
	static const uint8_t http[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	static const uint8_t appdata[] = { 0x17, 0x03, 0x03, 0x00, 0x01, 0x00 };
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28 };
	static const uint8_t major2[] = { 0x16, 0x02, 0x00, 0x00, 0x04, 0x01, 0, 0, 0 };
	static const uint8_t major4[] = { 0x16, 0x04, 0x01 };
	/* SSLv2-compatible CLIENT-HELLO: 2-byte header with the high bit */
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15,
					 0x00, 0x00, 0x00, 0x10, 0x01, 0x00, 0x80 };
	struct gw_tlshello o;

	(void)state;
	expect(http, GW_TLSHELLO_NOT_TLS);
	expect(appdata, GW_TLSHELLO_NOT_TLS);
	expect(alert, GW_TLSHELLO_NOT_TLS);
	expect(major2, GW_TLSHELLO_NOT_TLS);
	expect(major4, GW_TLSHELLO_NOT_TLS);
	expect(sslv2, GW_TLSHELLO_NOT_TLS);
	assert_int_equal(run(sslv2, sizeof(sslv2), &o), GW_TLSHELLO_NOT_TLS);
	assert_string_equal(o.msg, "an SSLv2-compatible hello");
	assert_int_equal(run(major2, sizeof(major2), &o), GW_TLSHELLO_NOT_TLS);
	assert_int_equal(o.at, 1);
	/* known from the first byte */
	assert_int_equal(gw_tlshello_parse(http, 1, 0, &o), GW_TLSHELLO_NOT_TLS);
}

static void
test_too_big(void **state)
{
	static const uint8_t over[] = { 0x16, 0x03, 0x01, 0x41, 0x01 }; /* 16641 */
	static const uint8_t max[] = { 0x16, 0x03, 0x01, 0x41, 0x00 };  /* 16640 */
	static const uint8_t k1[] = { 0x16, 0x03, 0x01, 0x04, 0x00, 0x01 };
	static const uint8_t huge[] = { 0x16, 0x03, 0x03, 0xff, 0xff, 0x01 };
	struct gw_tlshello o;

	(void)state;
	expect(over, GW_TLSHELLO_TOO_BIG);
	expect(huge, GW_TLSHELLO_TOO_BIG);
	assert_int_equal(run(over, sizeof(over), &o), GW_TLSHELLO_TOO_BIG);
	assert_int_equal(o.record_len, 5 + 16641);
	assert_int_equal(run(max, sizeof(max), &o), GW_TLSHELLO_NEED_MORE);
	assert_int_equal(o.need, 5 + 16640);
	/* the caller's limit */
	assert_int_equal(run_limit(k1, sizeof(k1), 1023, &o), GW_TLSHELLO_TOO_BIG);
	assert_int_equal(run_limit(k1, sizeof(k1), 1024, &o), GW_TLSHELLO_NEED_MORE);
	/* a limit over the protocol's is the protocol's */
	assert_int_equal(run_limit(over, sizeof(over), 100000, &o), GW_TLSHELLO_TOO_BIG);
}

static void
test_not_client_hello(void **state)
{
	/* a ServerHello (2), and a hello_request (0) */
	static const uint8_t sh[] = { 0x16, 0x03, 0x03, 0x00, 0x08, 0x02, 0x00, 0x00,
				      0x04, 0x03, 0x03, 0x00, 0x00 };
	static const uint8_t hr[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t short_sh[] = { 0x16, 0x03, 0x01, 0x00, 0x02, 0x02, 0x00 };

	(void)state;
	expect(sh, GW_TLSHELLO_NOT_CLIENT_HELLO);
	expect(hr, GW_TLSHELLO_NOT_CLIENT_HELLO);
	expect(short_sh, GW_TLSHELLO_NOT_CLIENT_HELLO);
}

static void
test_fragmented(void **state)
{
	static const uint8_t hdr_split[] = { 0x16, 0x03, 0x01, 0x00, 0x02, 0x01, 0x00 };
	struct hb h, two = { .n = 0 };
	struct hello_opt opt = { .hs_len_delta = 1 };
	size_t body, first;
	struct gw_tlshello o;

	(void)state;
	expect(hdr_split, GW_TLSHELLO_FRAGMENTED);
	/* a handshake length one past its record */
	hello(&h, &opt, NULL);
	expect_hb(&h, GW_TLSHELLO_FRAGMENTED);
	/* the curl hello split over two records, as a client may send it */
	body = sizeof(cap_curl) - 5;
	first = 100;
	put(&two, "\x16\x03\x01", 3);
	put16(&two, (unsigned)first);
	put(&two, cap_curl + 5, first);
	put(&two, "\x16\x03\x01", 3);
	put16(&two, (unsigned)(body - first));
	put(&two, cap_curl + 5 + first, body - first);
	assert_int_equal(run(two.b, two.n, &o), GW_TLSHELLO_FRAGMENTED);
	assert_int_equal(o.record_len, 5 + first);
	/* known as soon as the handshake header is in */
	assert_int_equal(gw_tlshello_parse(two.b, 9, 0, &o), GW_TLSHELLO_FRAGMENTED);
}

static void
test_malformed_record(void **state)
{
	static const uint8_t empty[] = { 0x16, 0x03, 0x01, 0x00, 0x00 };
	struct hb h, e = { .n = 0 };
	struct hello_opt hs_short = { .rec_len_delta = 1 };
	struct gw_tlshello o;

	(void)state;
	expect(empty, GW_TLSHELLO_MALFORMED);
	/* a record one byte longer than the hello in it */
	ext_sni(&e, "example.com");
	hello(&h, &hs_short, &e);
	put8(&h, 0);
	expect_hb(&h, GW_TLSHELLO_MALFORMED);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "bytes after the ClientHello in its record");
	assert_int_equal(o.at, h.n - 1);
}

static void
test_malformed_hello(void **state)
{
	struct hb h, e = { .n = 0 };
	struct hello_opt opt;
	struct gw_tlshello o;

	(void)state;
	ext_sni(&e, "example.com");

	opt = (struct hello_opt){ .version = 0x0203 };
	hello(&h, &opt, &e);
	expect_hb(&h, GW_TLSHELLO_MALFORMED);

	opt = (struct hello_opt){ .sid_len = 33 };
	hello(&h, &opt, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "session id over 32 bytes");
	assert_int_equal(o.at, 5 + 4 + 2 + 32);

	opt = (struct hello_opt){ .cs_len = 3 };
	hello(&h, &opt, &e);
	expect_hb(&h, GW_TLSHELLO_MALFORMED);
	opt = (struct hello_opt){ .cs_len = -1 };
	hello(&h, &opt, &e);
	expect_hb(&h, GW_TLSHELLO_MALFORMED);

	opt = (struct hello_opt){ .cm_len = -1 };
	hello(&h, &opt, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "no compression method");

	/* extensions block longer, shorter than what is left */
	opt = (struct hello_opt){ .ext_len_delta = 1 };
	hello(&h, &opt, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "extensions overrun the ClientHello");
	opt = (struct hello_opt){ .ext_len_delta = -1 };
	hello(&h, &opt, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "bytes after the extensions");

	/* one byte where the extensions length would be */
	opt = (struct hello_opt){ .no_exts = true };
	hello(&h, &opt, NULL);
	h.b[4]++;
	h.b[8]++;
	put8(&h, 0);
	expect_hb(&h, GW_TLSHELLO_MALFORMED);

	/* the session id, the suites running past the hello */
	opt = (struct hello_opt){ .sid_len = 8, .no_exts = true, .cm_len = 1 };
	hello(&h, &opt, NULL);
	h.b[4] -= 9;
	h.b[8] -= 9; /* cut before the suites' end */
	h.n -= 9;
	expect_hb(&h, GW_TLSHELLO_MALFORMED);
}

static void
test_malformed_extensions(void **state)
{
	struct hb h, e;
	struct gw_tlshello o;

	(void)state;
	/* an extension's data past the block: claims 9, has 4 */
	e.n = 0;
	ext_sni(&e, "example.com");
	put16(&e, 0xff01);
	put16(&e, 9);
	put(&e, "abcd", 4);
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "extension overruns the extensions");

	/* an extension header cut by the block's end */
	e.n = 0;
	ext_sni(&e, "example.com");
	put16(&e, 0xff01);
	put8(&e, 0);
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "extension header overruns the extensions");

	/* two server_name extensions, even with the same name */
	e.n = 0;
	ext_sni(&e, "example.com");
	ext_sni(&e, "example.com");
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "second server_name extension");

	/* two ALPN extensions */
	e.n = 0;
	ext(&e, 16, "\x00\x03\x02h2", 5);
	ext_sni(&e, "example.com");
	ext(&e, 16, "\x00\x03\x02h2", 5);
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	assert_string_equal(o.msg, "second ALPN extension");
}

static void
test_malformed_sni_list(void **state)
{
	static const struct {
		const char *data;
		size_t n;
		const char *msg;
	} cases[] = {
		{ "", 0, "server_name extension too short for its list length" },
		{ "\x00", 1, "server_name extension too short for its list length" },
		{ "\x00\x00", 2, "empty server name list" },
		/* list length one more, one less than the extension holds */
		{ "\x00\x07\x00\x00\x03""abc", 8, "server name list length disagrees with its extension" },
		{ "\x00\x05\x00\x00\x03""abc", 8, "server name list length disagrees with its extension" },
		/* name length past the list */
		{ "\x00\x06\x00\x00\x04""abc", 8, "server name overruns its list" },
		/* an entry header cut short */
		{ "\x00\x08\x00\x00\x03""abc\x00\x00", 10, "server name entry overruns its list" },
		/* two host_names */
		{ "\x00\x0c\x00\x00\x03""abc\x00\x00\x03""abd", 14, "more than one host_name" },
	};
	struct hb h, e;
	struct gw_tlshello o;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		e.n = 0;
		ext(&e, 0, cases[i].data, cases[i].n);
		hello(&h, NULL, &e);
		assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
		assert_string_equal(o.msg, cases[i].msg);
	}
}

static void
test_malformed_alpn(void **state)
{
	static const struct {
		const char *data;
		size_t n;
	} cases[] = {
		{ "", 0 },
		{ "\x00\x00", 2 },
		{ "\x00\x04\x02h2", 5 },
		{ "\x00\x02\x02h2", 5 },
		{ "\x00\x03\x03h2", 5 },
		{ "\x00\x04\x02h2\x00", 6 },
	};
	struct hb h, e;
	struct gw_tlshello o;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		e.n = 0;
		ext_sni(&e, "example.com");
		ext(&e, 16, cases[i].data, cases[i].n);
		hello(&h, NULL, &e);
		assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_MALFORMED);
	}
}

static void
test_no_sni(void **state)
{
	struct hb h, e = { .n = 0 };
	struct hello_opt opt = { .no_exts = true };
	struct gw_tlshello o;

	(void)state;
	expect(cap_nosni, GW_TLSHELLO_NO_SNI);
	/* no extensions at all (an SSL 3.0-style hello) */
	hello(&h, &opt, NULL);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_NO_SNI);
	assert_string_equal(o.msg, "no extensions");
	/* an empty extensions block */
	hello(&h, NULL, NULL);
	expect_hb(&h, GW_TLSHELLO_NO_SNI);
	/* extensions, ALPN among them, but no server_name */
	ext(&e, 16, "\x00\x03\x02h2", 5);
	ext(&e, 0xff01, "\x00", 1);
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_NO_SNI);
	assert_true(o.alpn_h2);
	assert_string_equal(o.sni, "");
	assert_int_equal(o.record_len, h.n);
}

static void
test_bad_sni(void **state)
{
	static const char *const names[] = {
		"",
		".",
		"..",
		"exa_mple.com",
		"exa mple.com",
		"example.com/",
		"user@example.com",
		"example.com:443",
		"[::1]",
		"::1",
		"ex\xc3\xa4mple.com",
		"1.2.3.4",
		"127.0.0.1",
		"2130706433",
		"0x7f000001",
		"a.1",
		"1.2.3.4.5",
		".example.com",
		"example..com",
		"example.com..",
		"-example.com",
		"example-.com",
		"example.com-",
		"a.-b.com",
	};
	char big[300];
	struct hb h, e;
	struct gw_tlshello o;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		hello_for(&h, names[i]);
		if (run_hb(&h, &o) != GW_TLSHELLO_BAD_SNI)
			fail_msg("\"%s\": %s", names[i], o.msg ? o.msg : "ok");
	}
	/* a NUL inside */
	e.n = 0;
	ext_sni_typed(&e, 0, "exa\0mple.com", 12);
	hello(&h, NULL, &e);
	expect_hb(&h, GW_TLSHELLO_BAD_SNI);
	/* not host_name */
	e.n = 0;
	ext_sni_typed(&e, 1, "example.com", 11);
	hello(&h, NULL, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_BAD_SNI);
	assert_string_equal(o.msg, "server name not of type host_name");
	/* 254 bytes (without a trailing dot) */
	memset(big, 'a', sizeof(big));
	for (size_t i = 63; i < 254; i += 64)
		big[i] = '.';
	big[254] = '\0';
	hello_for(&h, big);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_BAD_SNI);
	assert_string_equal(o.msg, "server name over 253 bytes");
	/* a 64-byte label */
	memset(big, 'a', 64);
	strcpy(big + 64, ".com");
	hello_for(&h, big);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_BAD_SNI);
	assert_string_equal(o.msg, "label over 63 bytes in the server name");
}

/* ---- good hellos ---------------------------------------------------- */

static void
test_captured(void **state)
{
	struct gw_tlshello o;

	(void)state;
	assert_int_equal(run(cap_openssl13, sizeof(cap_openssl13), &o), GW_TLSHELLO_OK);
	assert_string_equal(o.sni, "example.com");
	assert_int_equal(o.sni_len, 11);
	assert_int_equal(o.record_len, sizeof(cap_openssl13));
	assert_false(o.alpn_h2);

	assert_int_equal(run(cap_openssl12, sizeof(cap_openssl12), &o), GW_TLSHELLO_OK);
	assert_string_equal(o.sni, "example.com"); /* sent as Example.COM */
	assert_false(o.alpn_h2);
	assert_true(o.alpn_http11);

	assert_int_equal(run(cap_curl, sizeof(cap_curl), &o), GW_TLSHELLO_OK);
	assert_string_equal(o.sni, "example.com");
	assert_int_equal(o.record_len, sizeof(cap_curl));
	assert_true(o.alpn_h2);
	assert_true(o.alpn_http11);
}

static void
test_after_the_record(void **state)
{
	struct hb h = { .n = 0 };
	struct gw_tlshello o;

	(void)state;
	/* a ChangeCipherSpec (TLS 1.3 middlebox compatibility) or anything
	 * else after the first record is not looked at */
	put(&h, cap_openssl13, sizeof(cap_openssl13));
	put(&h, "\x14\x03\x03\x00\x01\x01", 6);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_OK);
	assert_int_equal(o.record_len, sizeof(cap_openssl13));
	put(&h, "garbage", 7);
	assert_int_equal(gw_tlshello_parse(h.b, h.n, 0, &o), GW_TLSHELLO_OK);
}

static void
test_good_names(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "example.com", "example.com" },
		{ "EXAMPLE.com.", "example.com" },
		{ "localhost", "localhost" },
		{ "a", "a" },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "123.example.com", "123.example.com" },
		{ "1e100.net", "1e100.net" },
		{ "a-b.c-d.e", "a-b.c-d.e" },
	};
	char big[300];
	struct hb h;
	struct gw_tlshello o;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hello_for(&h, cases[i].in);
		if (run_hb(&h, &o) != GW_TLSHELLO_OK)
			fail_msg("\"%s\": %s", cases[i].in, o.msg);
		assert_string_equal(o.sni, cases[i].out);
		assert_true(o.alpn_h2);
		assert_int_equal(o.record_len, h.n);
	}
	/* 253 bytes, labels of 63, and the same with a trailing dot */
	memset(big, 'a', sizeof(big));
	for (size_t i = 63; i < 253; i += 64)
		big[i] = '.';
	big[253] = '\0';
	hello_for(&h, big);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_OK);
	assert_int_equal(o.sni_len, 253);
	big[253] = '.';
	big[254] = '\0';
	hello_for(&h, big);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_OK);
	assert_int_equal(o.sni_len, 253);
}

static void
test_hand_built(void **state)
{
	struct hb h, e = { .n = 0 };
	struct hello_opt opt = { .sid_len = -1, .version = 0x0301 };
	struct gw_tlshello o;

	(void)state;
	/* no session id, TLS 1.0, server_name last, unknown and empty
	 * extensions around it, GREASE values */
	ext(&e, 0x0a0a, "", 0);
	ext(&e, 23, "", 0);
	ext(&e, 16, "\x00\x0c\x08http/1.1\x02h3", 14);
	ext_sni(&e, "Sub.Example.Org");
	hello(&h, &opt, &e);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_OK);
	assert_string_equal(o.sni, "sub.example.org");
	assert_false(o.alpn_h2);
	assert_true(o.alpn_http11);
}

static void
test_biggest(void **state)
{
	static uint8_t pad[GW_TLSHELLO_RECORD_MAX];
	struct hb h, e = { .n = 0 };
	struct gw_tlshello o;
	size_t base;

	(void)state;
	ext_sni(&e, "example.com");
	hello(&h, NULL, &e);
	base = h.n - 5;
	/* a padding extension filling the record to the limit exactly */
	ext(&e, 21, pad, GW_TLSHELLO_RECORD_MAX - base - 4);
	hello(&h, NULL, &e);
	assert_int_equal(h.n, GW_TLSHELLO_BUF_MAX);
	assert_int_equal(run_hb(&h, &o), GW_TLSHELLO_OK);
	assert_string_equal(o.sni, "example.com");
	assert_int_equal(o.record_len, GW_TLSHELLO_BUF_MAX);
	/* the same under a smaller caller limit */
	assert_int_equal(run_limit(h.b, h.n, 16384, &o), GW_TLSHELLO_TOO_BIG);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_need_more_empty),
		cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_not_client_hello),
		cmocka_unit_test(test_fragmented),
		cmocka_unit_test(test_malformed_record),
		cmocka_unit_test(test_malformed_hello),
		cmocka_unit_test(test_malformed_extensions),
		cmocka_unit_test(test_malformed_sni_list),
		cmocka_unit_test(test_malformed_alpn),
		cmocka_unit_test(test_no_sni),
		cmocka_unit_test(test_bad_sni),
		cmocka_unit_test(test_captured),
		cmocka_unit_test(test_after_the_record),
		cmocka_unit_test(test_good_names),
		cmocka_unit_test(test_hand_built),
		cmocka_unit_test(test_biggest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_rd.c: the bounded reader (gateway/proto/rd.h). Bad inputs first:
 * reads past the end, at every length up to it; length prefixes longer
 * than the rest; sub-readers that would overrun their parent; zero-length
 * and NULL input; the largest lengths. Every failure must leave the reader
 * as it was. Each buffer is malloc'd at exactly its length, so a read past
 * it shows under ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "rd.h"

static const struct gw_rd_class digits = { .in = { ['0' ... '9'] = 1 } };
static const struct gw_rd_class crlf = { .in = { ['\r'] = 1, ['\n'] = 1 } };

/* n bytes copied into a block of exactly n (1 if n is 0). */
static uint8_t *
exact(const void *p, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);

	assert_non_null(b);
	if (n)
		memcpy(b, p, n);
	return b;
}

static void
assert_same(const struct gw_rd *a, const struct gw_rd *b)
{
	assert_ptr_equal(a->base, b->base);
	assert_int_equal(a->pos, b->pos);
	assert_int_equal(a->end, b->end);
	assert_int_equal(a->avail, b->avail);
}

/* ---- bad inputs --------------------------------------------------------- */

/* Every fetch of n bytes from every shorter input fails, unchanged. */
static void
test_fetch_past_end(void **state)
{
	static const uint8_t src[] = { 1, 2, 3, 4 };

	(void)state;
	for (size_t len = 0; len <= sizeof(src); len++) {
		uint8_t *b = exact(src, len);

		for (size_t n = len + 1; n <= len + 4; n++) {
			struct gw_rd r, before;
			struct gw_rd_span s = { NULL, 77 };
			uint8_t v8 = 0xaa;
			uint16_t v16 = 0xaaaa;
			uint32_t v24 = 0xaaaaaa;

			gw_rd_init(&r, b, len);
			before = r;
			assert_int_equal(gw_rd_has(&r, n), GW_RD_OVER);
			assert_int_equal(gw_rd_fetch_bytes(&r, n, &s), GW_RD_OVER);
			assert_int_equal(gw_rd_skip(&r, n), GW_RD_OVER);
			assert_null(s.p);
			assert_int_equal(s.len, 77);
			if (n == 1)
				assert_int_equal(gw_rd_fetch_u8(&r, &v8), GW_RD_OVER);
			if (n == 2)
				assert_int_equal(gw_rd_fetch_be16(&r, &v16), GW_RD_OVER);
			if (n == 3)
				assert_int_equal(gw_rd_fetch_be24(&r, &v24), GW_RD_OVER);
			assert_int_equal(v8, 0xaa);
			assert_int_equal(v16, 0xaaaa);
			assert_int_equal(v24, 0xaaaaaa);
			assert_false(gw_rd_match(&r, "\1\2\3\4\5\6\7\10", n));
			assert_same(&r, &before);
		}
		free(b);
	}
}

/* Zero-length and NULL input: nothing readable, scans return nothing. */
static void
test_empty(void **state)
{
	struct gw_rd r, before;
	struct gw_rd_span s;
	uint8_t v;

	(void)state;
	gw_rd_init(&r, NULL, 0);
	before = r;
	assert_true(gw_rd_empty(&r));
	assert_int_equal(gw_rd_len(&r), 0);
	assert_int_equal(gw_rd_left(&r), 0);
	assert_int_equal(gw_rd_peek(&r), -1);
	assert_int_equal(gw_rd_getc(&r), -1);
	assert_int_equal(gw_rd_fetch_u8(&r, &v), GW_RD_OVER);
	s = gw_rd_rest(&r);
	assert_int_equal(s.len, 0);
	s = gw_rd_until(&r, 'x', SIZE_MAX);
	assert_int_equal(s.len, 0);
	s = gw_rd_while(&r, &digits);
	assert_int_equal(s.len, 0);
	s = gw_rd_until_any(&r, &crlf);
	assert_int_equal(s.len, 0);
	assert_true(gw_rd_match(&r, "", 0));
	assert_int_equal(gw_rd_skip(&r, 0), GW_RD_OK);
	assert_int_equal(gw_rd_fetch_bytes(&r, 0, &s), GW_RD_OK);
	assert_int_equal(s.len, 0);
	assert_same(&r, &before);

	/* an empty stream needs more, it is not malformed */
	gw_rd_init_stream(&r, NULL, 0);
	assert_int_equal(gw_rd_fetch_u8(&r, &v), GW_RD_SHORT);
	assert_int_equal(gw_rd_pos(&r), 0);
}

/* A length prefix longer than what follows it: BADLEN, prefix unread; a
 * prefix cut short: OVER (or SHORT on a stream). */
static void
test_prefix_too_long(void **state)
{
	static const uint8_t v8[] = { 3, 'a', 'b' };
	static const uint8_t v16[] = { 0x01, 0x00, 'x' };
	static const uint8_t v24[] = { 0xff, 0xff, 0xff };
	static const uint8_t cut[] = { 0x00 };
	struct gw_rd r, before, sub = { 0 };
	uint8_t *b;

	(void)state;
	b = exact(v8, sizeof(v8));
	gw_rd_init(&r, b, sizeof(v8));
	before = r;
	assert_int_equal(gw_rd_sub_u8(&r, &sub), GW_RD_BADLEN);
	assert_same(&r, &before);
	free(b);

	b = exact(v16, sizeof(v16));
	gw_rd_init(&r, b, sizeof(v16));
	before = r;
	assert_int_equal(gw_rd_sub_be16(&r, &sub), GW_RD_BADLEN);
	assert_same(&r, &before);
	/* on a stream the same prefix is fine: the rest may yet arrive */
	gw_rd_init_stream(&r, b, sizeof(v16));
	assert_int_equal(gw_rd_sub_be16(&r, &sub), GW_RD_OK);
	assert_int_equal(gw_rd_left(&sub), 256);
	assert_int_equal(gw_rd_len(&sub), 1);
	free(b);

	b = exact(v24, sizeof(v24));
	gw_rd_init(&r, b, sizeof(v24));
	before = r;
	assert_int_equal(gw_rd_sub_be24(&r, &sub), GW_RD_BADLEN);
	assert_same(&r, &before);
	free(b);

	b = exact(cut, sizeof(cut));
	gw_rd_init(&r, b, sizeof(cut));
	before = r;
	assert_int_equal(gw_rd_sub_be16(&r, &sub), GW_RD_OVER);
	assert_int_equal(gw_rd_sub_be24(&r, &sub), GW_RD_OVER);
	assert_same(&r, &before);
	gw_rd_init_stream(&r, b, sizeof(cut));
	before = r;
	assert_int_equal(gw_rd_sub_be16(&r, &sub), GW_RD_SHORT);
	assert_same(&r, &before);
	/* a width the API does not have reads nothing */
	assert_int_equal(gw_rd_sub_vec(&r, 0, &sub), GW_RD_OVER);
	assert_int_equal(gw_rd_sub_vec(&r, 4, &sub), GW_RD_OVER);
	assert_same(&r, &before);
	free(b);
}

/* Nested sub-readers: a child can be no longer than its parent has left,
 * and reads neither past its own end nor past the bytes given. */
static void
test_nested_overrun(void **state)
{
	/* outer vector of 5: inner vector declaring 6 (overruns the outer),
	 * then a good inner vector of 2 */
	static const uint8_t bad[] = { 5, 6, 'a', 'b', 'c', 'd', 'e', 'f', 'g' };
	static const uint8_t good[] = { 4, 2, 'a', 'b', 'z', 'q' };
	struct gw_rd r, outer = { 0 }, inner = { 0 }, before;
	struct gw_rd_span s;
	uint8_t v;
	uint8_t *b;

	(void)state;
	b = exact(bad, sizeof(bad));
	gw_rd_init(&r, b, sizeof(bad));
	assert_int_equal(gw_rd_sub_u8(&r, &outer), GW_RD_OK);
	assert_int_equal(gw_rd_left(&outer), 5);
	before = outer;
	assert_int_equal(gw_rd_sub_u8(&outer, &inner), GW_RD_BADLEN);
	assert_same(&outer, &before);
	/* a plain sub of more than the outer has left */
	assert_int_equal(gw_rd_sub(&outer, 6, &inner), GW_RD_OVER);
	assert_same(&outer, &before);
	/* the outer reader never sees the bytes after its end */
	s = gw_rd_rest(&outer);
	assert_int_equal(s.len, 5);
	assert_int_equal(gw_rd_fetch_u8(&outer, &v), GW_RD_OVER);
	/* the parent went past the outer vector at once */
	assert_int_equal(gw_rd_pos(&r), 6);
	assert_int_equal(gw_rd_getc(&r), 'e');
	free(b);

	b = exact(good, sizeof(good));
	gw_rd_init(&r, b, sizeof(good));
	assert_int_equal(gw_rd_sub_u8(&r, &outer), GW_RD_OK);
	assert_int_equal(gw_rd_sub_u8(&outer, &inner), GW_RD_OK);
	assert_int_equal(gw_rd_pos(&inner), 2);
	assert_int_equal(gw_rd_left(&inner), 2);
	s = gw_rd_while(&inner, &(const struct gw_rd_class){ .in = { ['a' ... 'z'] = 1 } });
	assert_int_equal(s.len, 2);
	assert_memory_equal(s.p, "ab", 2);
	assert_int_equal(gw_rd_getc(&inner), -1);
	assert_int_equal(gw_rd_getc(&outer), 'z');
	assert_int_equal(gw_rd_getc(&outer), -1);
	assert_int_equal(gw_rd_getc(&r), 'q');
	free(b);
}

/* A stream: a declared structure whose bytes have not arrived is SHORT
 * inside, OVER past its end (checked first), and the parent may step past
 * the bytes given; reads there are SHORT, scans return nothing. */
static void
test_stream_short_vs_over(void **state)
{
	static const uint8_t src[] = { 0x00, 0x04, 'a', 'b' };
	struct gw_rd r, sub = { 0 }, before;
	struct gw_rd_span s;
	uint16_t v16;
	uint32_t v24;
	uint8_t v;
	uint8_t *b = exact(src, sizeof(src));

	(void)state;
	gw_rd_init_stream(&r, b, sizeof(src));
	assert_int_equal(gw_rd_sub_be16(&r, &sub), GW_RD_OK);
	assert_int_equal(gw_rd_pos(&r), 6);     /* past the 4 bytes given */
	assert_true(gw_rd_empty(&r));
	assert_int_equal(gw_rd_has(&r, 0), GW_RD_SHORT);
	assert_int_equal(gw_rd_fetch_u8(&r, &v), GW_RD_SHORT);
	s = gw_rd_rest(&r);
	assert_int_equal(s.len, 0);
	assert_int_equal(gw_rd_pos(&r), 6);

	before = sub;
	assert_int_equal(gw_rd_fetch_bytes(&sub, 5, &s), GW_RD_OVER);
	assert_int_equal(gw_rd_fetch_bytes(&sub, 3, &s), GW_RD_SHORT);
	assert_int_equal(gw_rd_fetch_be16(&sub, &v16), GW_RD_OK);
	assert_int_equal(v16, 'a' << 8 | 'b');
	assert_int_equal(gw_rd_fetch_be16(&sub, &v16), GW_RD_SHORT);
	assert_int_equal(gw_rd_fetch_be24(&sub, &v24), GW_RD_OVER);
	sub = before;
	s = gw_rd_rest(&sub);
	assert_int_equal(s.len, 2);
	free(b);
}

/* The largest lengths: a 24-bit vector of 0xffffff in a reader that has
 * it, SIZE_MAX asked of small readers, and no size_t overflow near the
 * top of a stream's undeclared end. */
static void
test_max_lengths(void **state)
{
	size_t n = 3 + 0xffffff;
	uint8_t *b = calloc(1, n);
	struct gw_rd r, sub = { 0 }, before;
	struct gw_rd_span s;

	(void)state;
	assert_non_null(b);
	b[0] = b[1] = b[2] = 0xff;
	gw_rd_init(&r, b, n);
	assert_int_equal(gw_rd_sub_be24(&r, &sub), GW_RD_OK);
	assert_int_equal(gw_rd_left(&sub), 0xffffff);
	assert_int_equal(gw_rd_skip(&sub, 0xffffff), GW_RD_OK);
	assert_true(gw_rd_empty(&r));
	free(b);

	b = exact("abc", 3);
	gw_rd_init(&r, b, 3);
	before = r;
	assert_int_equal(gw_rd_has(&r, SIZE_MAX), GW_RD_OVER);
	assert_int_equal(gw_rd_skip(&r, SIZE_MAX), GW_RD_OVER);
	assert_int_equal(gw_rd_sub(&r, SIZE_MAX, &sub), GW_RD_OVER);
	assert_same(&r, &before);
	gw_rd_init_stream(&r, b, 3);
	before = r;
	assert_int_equal(gw_rd_has(&r, SIZE_MAX), GW_RD_SHORT);
	assert_int_equal(gw_rd_skip(&r, SIZE_MAX - 1), GW_RD_SHORT);
	assert_same(&r, &before);
	assert_int_equal(gw_rd_sub(&r, SIZE_MAX - 1, &sub), GW_RD_OK);
	assert_int_equal(gw_rd_pos(&r), SIZE_MAX - 1);
	assert_int_equal(gw_rd_len(&sub), 3);
	s = gw_rd_take(&sub, SIZE_MAX);
	assert_int_equal(s.len, 3);
	/* one byte left before SIZE_MAX: two is over, not a wrap */
	before = r;
	assert_int_equal(gw_rd_sub(&r, 2, &sub), GW_RD_OVER);
	assert_int_equal(gw_rd_has(&r, 2), GW_RD_OVER);
	assert_int_equal(gw_rd_has(&r, 1), GW_RD_SHORT);
	assert_same(&r, &before);
	free(b);
}

/* ---- good inputs -------------------------------------------------------- */

static void
test_fetches(void **state)
{
	static const uint8_t src[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 };
	uint8_t *b = exact(src, sizeof(src));
	struct gw_rd r;
	struct gw_rd_span s;
	uint8_t v8;
	uint16_t v16;
	uint32_t v24;

	(void)state;
	gw_rd_init(&r, b, sizeof(src));
	assert_int_equal(gw_rd_peek(&r), 1);
	assert_int_equal(gw_rd_fetch_u8(&r, &v8), GW_RD_OK);
	assert_int_equal(v8, 1);
	assert_int_equal(gw_rd_fetch_be16(&r, &v16), GW_RD_OK);
	assert_int_equal(v16, 0x0203);
	assert_int_equal(gw_rd_fetch_be24(&r, &v24), GW_RD_OK);
	assert_int_equal(v24, 0x040506);
	assert_int_equal(gw_rd_pos(&r), 6);
	assert_int_equal(gw_rd_left(&r), 1);
	assert_int_equal(gw_rd_fetch_bytes(&r, 1, &s), GW_RD_OK);
	assert_ptr_equal(s.p, b + 6);
	assert_true(gw_rd_empty(&r));
	free(b);
}

/* Scans over every split: the cursor stops where the contract says. */
static void
test_scans(void **state)
{
	static const char line[] = "GET 12345 x\r\n";
	size_t len = sizeof(line) - 1;
	uint8_t *b = exact(line, len);
	struct gw_rd r;
	struct gw_rd_span s;

	(void)state;
	gw_rd_init(&r, b, len);
	s = gw_rd_until(&r, ' ', SIZE_MAX);
	assert_int_equal(s.len, 3);
	assert_int_equal(gw_rd_getc(&r), ' ');
	s = gw_rd_while(&r, &digits);
	assert_int_equal(s.len, 5);
	assert_int_equal(gw_rd_peek(&r), ' ');
	s = gw_rd_until_any(&r, &crlf);
	assert_int_equal(s.len, 2);
	assert_true(gw_rd_match(&r, "\r\n", 2));
	assert_true(gw_rd_empty(&r));

	/* until: max bounds it, a missing byte takes all */
	gw_rd_init(&r, b, len);
	s = gw_rd_until(&r, ' ', 2);
	assert_int_equal(s.len, 2);
	assert_int_equal(gw_rd_pos(&r), 2);
	s = gw_rd_until(&r, '#', SIZE_MAX);
	assert_int_equal(s.len, len - 2);
	assert_true(gw_rd_empty(&r));

	/* every prefix: a scan never reads past the bytes given */
	for (size_t k = 0; k <= len; k++) {
		uint8_t *p = exact(line, k);

		gw_rd_init(&r, p, k);
		s = gw_rd_until_any(&r, &crlf);
		assert_int_equal(s.len, k < 11 ? k : 11);
		assert_false(gw_rd_match(&r, "\r\n", 2) && k < len);
		free(p);
	}
	free(b);
}

static void
test_spans(void **state)
{
	static const struct gw_rd_class ows = { .in = { [' '] = 1, ['\t'] = 1 } };
	struct gw_rd_span s = { (const uint8_t *)" \t a b \t", 8 };
	struct gw_rd_span t = gw_rd_span_trim(s, &ows);

	(void)state;
	assert_int_equal(t.len, 3);
	assert_memory_equal(t.p, "a b", 3);
	s.len = 0;
	assert_int_equal(gw_rd_span_trim(s, &ows).len, 0);
	assert_true(gw_rd_span_all(s, &digits));
	assert_true(gw_rd_span_none(s, &digits));
	s.p = (const uint8_t *)"0123x";
	s.len = 4;
	assert_true(gw_rd_span_all(s, &digits));
	s.len = 5;
	assert_false(gw_rd_span_all(s, &digits));
	assert_false(gw_rd_span_none(s, &digits));
	assert_true(gw_rd_in(&digits, '7'));
	assert_false(gw_rd_in(&digits, 0xff));
	assert_string_equal(gw_rd_status_name(GW_RD_BADLEN), "badlen");
	assert_string_equal(gw_rd_status_name((enum gw_rd_status)9), "?");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_past_end),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_prefix_too_long),
		cmocka_unit_test(test_nested_overrun),
		cmocka_unit_test(test_stream_short_vs_over),
		cmocka_unit_test(test_max_lengths),
		cmocka_unit_test(test_fetches),
		cmocka_unit_test(test_scans),
		cmocka_unit_test(test_spans),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

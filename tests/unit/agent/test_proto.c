/* test_proto.c: the agent frame codec and control-message parsing. Bad
 * inputs first (oversize, unknown types, wrong streams, bad JSON), then
 * good streams of frames, each also fed split at every offset and byte by
 * byte. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proto.h"

static uint8_t decbuf[AGENT_PAYLOAD_MAX];

/* Appends one frame (header as given, unchecked) to buf at *len. */
static void
put(uint8_t *buf, size_t *len, uint8_t type, uint32_t stream,
    uint32_t hdr_len, const void *p, size_t plen)
{
	agent_hdr_put(buf + *len, type, stream, hdr_len);
	*len += AGENT_HDR_LEN;
	if (plen)
		memcpy(buf + *len, p, plen);
	*len += plen;
}

struct got {
	enum agent_dec_result r;
	uint8_t type;
	uint32_t stream, len;
	uint8_t *payload;       /* a copy */
};

/* Decodes in[0..len) fed in pieces of `step` bytes (0: cut at `cut`). */
static size_t
decode(const uint8_t *in, size_t len, size_t step, size_t cut,
       struct got *out, size_t max)
{
	struct agent_dec d;
	size_t n = 0, off = 0;

	agent_dec_init(&d, decbuf, sizeof(decbuf));
	while (off < len && n < max) {
		size_t piece = step ? step : (off < cut ? cut - off : len - off);
		size_t avail = len - off < piece ? len - off : piece;
		size_t pos = 0;

		while (pos < avail && n < max) {
			struct agent_frame f;
			size_t used;
			enum agent_dec_result r =
				agent_dec_feed(&d, in + off + pos, avail - pos,
					       &used, &f);

			assert_true(used <= avail - pos);
			pos += used;
			if (r == AGENT_DEC_AGAIN) {
				assert_int_equal(pos, avail);
				break;
			}
			out[n].r = r;
			out[n].type = f.type;
			out[n].stream = f.stream;
			out[n].len = f.len;
			out[n].payload = NULL;
			if (r == AGENT_DEC_FRAME) {
				out[n].payload = malloc(f.len + 1);
				memcpy(out[n].payload, f.payload, f.len);
			} else {
				assert_null(f.payload);
				assert_non_null(d.reason);
			}
			n++;
			if (r == AGENT_DEC_FATAL) {
				/* and it stays fatal */
				assert_int_equal(agent_dec_feed(&d, in, len,
								&used, &f),
						 AGENT_DEC_FATAL);
				return n;
			}
		}
		off += avail;
	}
	return n;
}

static void
free_got(struct got *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(g[i].payload);
}

/* Feeds the stream whole, at every cut, and byte by byte: the same list
 * of results each time. */
static size_t
decode_all_ways(const uint8_t *in, size_t len, struct got *ref, size_t max)
{
	struct got g[16];
	size_t n = decode(in, len, 0, len, ref, max);

	for (size_t cut = 0; cut <= len; cut += (len > 4096 ? 97 : 1)) {
		size_t m = decode(in, len, 0, cut, g, 16);

		assert_int_equal(m, n);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(g[i].r, ref[i].r);
			assert_int_equal(g[i].type, ref[i].type);
			assert_int_equal(g[i].stream, ref[i].stream);
			assert_int_equal(g[i].len, ref[i].len);
			if (g[i].r == AGENT_DEC_FRAME)
				assert_memory_equal(g[i].payload,
						    ref[i].payload, g[i].len);
		}
		free_got(g, m);
	}
	if (len <= 4096) {
		size_t m = decode(in, len, 1, 0, g, 16);

		assert_int_equal(m, n);
		free_got(g, m);
	}
	return n;
}

/* ---- bad frames ------------------------------------------------------- */

static void
test_bad_oversize_ctrl_skipped(void **state)
{
	static uint8_t buf[AGENT_CTRL_MAX + 64];
	struct got g[4];
	size_t len = 0, n;

	(void)state;
	put(buf, &len, AGENT_FT_REQUEST, 7, AGENT_CTRL_MAX + 1, NULL, 0);
	memset(buf + len, '{', AGENT_CTRL_MAX + 1);
	len += AGENT_CTRL_MAX + 1;
	put(buf, &len, AGENT_FT_PING, 0, 2, "{}", 2);
	n = decode_all_ways(buf, len, g, 4);
	assert_int_equal(n, 2);
	assert_int_equal(g[0].r, AGENT_DEC_BAD);
	assert_int_equal(g[0].stream, 7);
	assert_int_equal(g[1].r, AGENT_DEC_FRAME);
	assert_int_equal(g[1].type, AGENT_FT_PING);
	free_got(g, n);
}

static void
test_bad_oversize_data_skipped(void **state)
{
	static uint8_t buf[AGENT_DATA_MAX + 64];
	struct got g[4];
	size_t len = 0, n;

	(void)state;
	put(buf, &len, AGENT_FT_IN, 3, AGENT_DATA_MAX + 1, NULL, 0);
	memset(buf + len, 'x', AGENT_DATA_MAX + 1);
	len += AGENT_DATA_MAX + 1;
	put(buf, &len, AGENT_FT_IN, 3, 0, NULL, 0);
	n = decode_all_ways(buf, len, g, 4);
	assert_int_equal(n, 2);
	assert_int_equal(g[0].r, AGENT_DEC_BAD);
	assert_int_equal(g[1].r, AGENT_DEC_FRAME);
	assert_int_equal(g[1].len, 0);
	free_got(g, n);
}

static void
test_bad_hard_max_fatal(void **state)
{
	uint8_t buf[64];
	struct got g[4];
	size_t len = 0, n;

	(void)state;
	put(buf, &len, AGENT_FT_OUT, 1, AGENT_FRAME_HARD_MAX + 1, NULL, 0);
	put(buf, &len, AGENT_FT_PING, 0, 0, NULL, 0);
	n = decode_all_ways(buf, len, g, 4);
	assert_int_equal(n, 1);
	assert_int_equal(g[0].r, AGENT_DEC_FATAL);
	put(buf, &(size_t){ 0 }, AGENT_FT_OUT, 1, 0xffffffffu, NULL, 0);
	n = decode(buf, AGENT_HDR_LEN, 0, 0, g, 4);
	assert_int_equal(n, 1);
	assert_int_equal(g[0].r, AGENT_DEC_FATAL);
}

static void
test_bad_unknown_types(void **state)
{
	static const uint8_t types[] = { 0, AGENT_FT__MAX, 99, 255 };
	uint8_t buf[256];
	struct got g[4];

	(void)state;
	for (size_t i = 0; i < sizeof(types); i++) {
		size_t len = 0, n;

		put(buf, &len, types[i], 5, 3, "abc", 3);
		put(buf, &len, AGENT_FT_KILL, 5, 0, NULL, 0);
		n = decode_all_ways(buf, len, g, 4);
		assert_int_equal(n, 2);
		assert_int_equal(g[0].r, AGENT_DEC_BAD);
		assert_int_equal(g[0].type, types[i]);
		assert_int_equal(g[0].stream, 5);
		assert_int_equal(g[1].r, AGENT_DEC_FRAME);
		assert_int_equal(g[1].type, AGENT_FT_KILL);
		free_got(g, n);
		assert_string_equal(agent_frame_type_name(types[i]), "?");
	}
}

static void
test_bad_stream_rules(void **state)
{
	(void)state;
	assert_non_null(agent_frame_check(AGENT_FT_IN, 0, 1));
	assert_non_null(agent_frame_check(AGENT_FT_REQUEST, 0, 2));
	assert_non_null(agent_frame_check(AGENT_FT_HELLO, 1, 2));
	assert_non_null(agent_frame_check(AGENT_FT_PONG, 9, 2));
	assert_non_null(agent_frame_check(AGENT_FT_WINDOW, 1, 3));
	assert_non_null(agent_frame_check(AGENT_FT_WINDOW, 1, 5));
	assert_non_null(agent_frame_check(AGENT_FT_WINDOW, 0, 4));
	assert_null(agent_frame_check(AGENT_FT_ERROR, 0, 2));
	assert_null(agent_frame_check(AGENT_FT_ERROR, 4, 2));
	assert_null(agent_frame_check(AGENT_FT_WINDOW, 1, 4));
	assert_null(agent_frame_check(AGENT_FT_OUT, 1, AGENT_DATA_MAX));
	assert_non_null(agent_frame_check(AGENT_FT_OUT, 1, AGENT_DATA_MAX + 1));
	assert_null(agent_frame_check(AGENT_FT_EXIT, 1, AGENT_CTRL_MAX));
	assert_non_null(agent_frame_check(AGENT_FT_EXIT, 1, AGENT_CTRL_MAX + 1));
}

static void
test_bad_window_len_skipped(void **state)
{
	uint8_t buf[64];
	struct got g[4];
	size_t len = 0, n;

	(void)state;
	put(buf, &len, AGENT_FT_WINDOW, 2, 3, "\0\0\1", 3);
	put(buf, &len, AGENT_FT_WINDOW, 2, 4, "\0\0\1\0", 4);
	n = decode_all_ways(buf, len, g, 4);
	assert_int_equal(n, 2);
	assert_int_equal(g[0].r, AGENT_DEC_BAD);
	assert_int_equal(g[1].r, AGENT_DEC_FRAME);
	assert_int_equal(agent_get_u32(g[1].payload), 256);
	free_got(g, n);
}

static void
bad_json(const char *s, size_t len)
{
	char err[256] = "";
	json_t *j = agent_json_parse((const uint8_t *)s, len, err, sizeof(err));

	assert_null(j);
	assert_true(strlen(err) > 0);
}

static void
test_bad_json(void **state)
{
	static char big[AGENT_CTRL_MAX + 10];

	(void)state;
	bad_json("{", 1);
	bad_json("{not json", 9);
	bad_json("[1,2]", 5);
	bad_json("\"x\"", 3);
	bad_json("null", 4);
	bad_json("{} x", 4);
	bad_json("{}{}", 4);
	bad_json("{\"a\":1,\"a\":2}", 13);
	bad_json("{\"a\":\"\\u0000\"}", 13);
	bad_json("{\"a\":\"\xff\"}", 9);
	bad_json("{\"a\":1}\0", 8);
	memset(big, ' ', sizeof(big));
	big[0] = '{';
	big[sizeof(big) - 1] = '}';
	bad_json(big, sizeof(big));
}

static void
test_bad_encode(void **state)
{
	uint8_t buf[32];

	(void)state;
	assert_int_equal(agent_frame_encode(buf, sizeof(buf), 77, 1, "x", 1),
			 -EINVAL);
	assert_int_equal(agent_frame_encode(buf, sizeof(buf), AGENT_FT_IN, 0,
					    "x", 1),
			 -EINVAL);
	assert_int_equal(agent_frame_encode(buf, 8, AGENT_FT_PING, 0, NULL, 0),
			 -EMSGSIZE);
	assert_int_equal(agent_frame_encode(buf, sizeof(buf), AGENT_FT_OUT, 1,
					    buf, sizeof(buf)),
			 -EMSGSIZE);
}

/* ---- good frames ------------------------------------------------------ */

static void
test_zero_length_frames(void **state)
{
	uint8_t buf[64];
	struct got g[4];
	size_t len = 0, n;
	char err[64];
	json_t *j;

	(void)state;
	put(buf, &len, AGENT_FT_REQUEST, 1, 0, NULL, 0);
	put(buf, &len, AGENT_FT_IN, 1, 0, NULL, 0);
	put(buf, &len, AGENT_FT_PING, 0, 0, NULL, 0);
	n = decode_all_ways(buf, len, g, 4);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(g[i].r, AGENT_DEC_FRAME);
		assert_int_equal(g[i].len, 0);
	}
	free_got(g, n);
	j = agent_json_parse(NULL, 0, err, sizeof(err));
	assert_non_null(j);
	assert_true(json_is_object(j) && json_object_size(j) == 0);
	json_decref(j);
}

static void
test_stream_split_everywhere(void **state)
{
	static uint8_t buf[8192];
	uint8_t data[3000], w[4];
	struct got g[8];
	size_t len = 0, n;
	long rc;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	agent_put_u32(w, 123456);
	rc = agent_frame_encode(buf, sizeof(buf), AGENT_FT_HELLO, 0,
				"{\"version\":1}", 13);
	assert_int_equal(rc, AGENT_HDR_LEN + 13);
	len += (size_t)rc;
	rc = agent_frame_encode(buf + len, sizeof(buf) - len, AGENT_FT_OUT,
				0x01020304, data, sizeof(data));
	assert_true(rc > 0);
	len += (size_t)rc;
	rc = agent_frame_encode(buf + len, sizeof(buf) - len, AGENT_FT_WINDOW,
				9, w, 4);
	len += (size_t)rc;
	put(buf, &len, 42, 9, 2, "zz", 2);              /* bad, skipped */
	rc = agent_frame_encode(buf + len, sizeof(buf) - len, AGENT_FT_EXIT, 9,
				"{\"code\":0}", 10);
	len += (size_t)rc;
	n = decode_all_ways(buf, len, g, 8);
	assert_int_equal(n, 5);
	assert_int_equal(g[0].type, AGENT_FT_HELLO);
	assert_memory_equal(g[0].payload, "{\"version\":1}", 13);
	assert_int_equal(g[1].stream, 0x01020304);
	assert_memory_equal(g[1].payload, data, sizeof(data));
	assert_int_equal(agent_get_u32(g[2].payload), 123456);
	assert_int_equal(g[3].r, AGENT_DEC_BAD);
	assert_int_equal(g[4].type, AGENT_FT_EXIT);
	free_got(g, n);
}

static void
test_max_data_frame(void **state)
{
	static uint8_t buf[AGENT_DATA_MAX + 2 * AGENT_HDR_LEN + 8];
	static uint8_t data[AGENT_DATA_MAX];
	struct got g[4];
	long rc;
	size_t n;

	(void)state;
	memset(data, 0xa5, sizeof(data));
	rc = agent_frame_encode(buf, sizeof(buf), AGENT_FT_IN, 7, data,
				AGENT_DATA_MAX);
	assert_int_equal(rc, AGENT_HDR_LEN + AGENT_DATA_MAX);
	n = decode_all_ways(buf, (size_t)rc, g, 4);
	assert_int_equal(n, 1);
	assert_int_equal(g[0].r, AGENT_DEC_FRAME);
	assert_int_equal(g[0].len, AGENT_DATA_MAX);
	free_got(g, n);
}

static void
test_json_good_and_names(void **state)
{
	char err[64];
	json_t *j = agent_json_parse((const uint8_t *)"{\"op\":\"exec\"}", 13,
				     err, sizeof(err));
	size_t len;
	char *s;

	(void)state;
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "op")), "exec");
	s = agent_json_dump(j, &len);
	assert_non_null(s);
	assert_int_equal(len, 13);
	free(s);
	json_decref(j);
	assert_string_equal(agent_frame_type_name(AGENT_FT_WINDOW), "window");
	assert_string_equal(agent_err_code(ENOENT), AGENT_E_NOT_FOUND);
	assert_string_equal(agent_err_code(EROFS), AGENT_E_PERMISSION);
	assert_string_equal(agent_err_code(EBADF), AGENT_E_IO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_oversize_ctrl_skipped),
		cmocka_unit_test(test_bad_oversize_data_skipped),
		cmocka_unit_test(test_bad_hard_max_fatal),
		cmocka_unit_test(test_bad_unknown_types),
		cmocka_unit_test(test_bad_stream_rules),
		cmocka_unit_test(test_bad_window_len_skipped),
		cmocka_unit_test(test_bad_json),
		cmocka_unit_test(test_bad_encode),
		cmocka_unit_test(test_zero_length_frames),
		cmocka_unit_test(test_stream_split_everywhere),
		cmocka_unit_test(test_max_data_frame),
		cmocka_unit_test(test_json_good_and_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

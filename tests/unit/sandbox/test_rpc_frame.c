/* test_rpc_frame.c: the supervisor protocol's pure codec (sandbox/
 * rpc_frame.h): bad inputs first (out-of-step lengths, oversized frames,
 * invalid replies), then a stream split at every offset, requests. */
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

#include "rpc_frame.h"

static size_t
frame(uint8_t *out, uint32_t id, const char *body)
{
	size_t n = strlen(body);

	sbx_rpc_hdr_put(out, (uint32_t)n, id);
	memcpy(out + SBX_RPC_HDR, body, n);
	return SBX_RPC_HDR + n;
}

static void
test_rd_zero_length_breaks(void **st)
{
	struct sbx_rpc_rd r = { 0 };
	struct sbx_rpc_ev ev;
	uint8_t h[SBX_RPC_HDR];
	size_t used;

	(void)st;
	sbx_rpc_hdr_put(h, 0, 5);
	assert_int_equal(sbx_rpc_rd_feed(&r, h, sizeof(h), &used, &ev), 0);
	assert_int_equal(ev.kind, SBX_RPC_EV_BROKEN);
	/* stays broken */
	assert_int_equal(sbx_rpc_rd_feed(&r, h, sizeof(h), &used, &ev), 0);
	assert_int_equal(ev.kind, SBX_RPC_EV_BROKEN);
	assert_int_equal(used, 0);
	sbx_rpc_rd_free(&r);
}

static void
test_rd_huge_breaks(void **st)
{
	struct sbx_rpc_rd r = { 0 };
	struct sbx_rpc_ev ev;
	uint8_t h[SBX_RPC_HDR];
	size_t used;

	(void)st;
	sbx_rpc_hdr_put(h, SBX_RPC_FRAME_HARD + 1, 5);
	assert_int_equal(sbx_rpc_rd_feed(&r, h, sizeof(h), &used, &ev), 0);
	assert_int_equal(ev.kind, SBX_RPC_EV_BROKEN);
	assert_int_equal(ev.declared, SBX_RPC_FRAME_HARD + 1);
	sbx_rpc_rd_free(&r);
}

static void
test_rd_oversize_drained(void **st)
{
	struct sbx_rpc_rd r = { .max = 16 };
	struct sbx_rpc_ev ev;
	uint8_t buf[256];
	size_t n, used, off = 0;

	(void)st;
	sbx_rpc_hdr_put(buf, 40, 9);
	memset(buf + SBX_RPC_HDR, 'x', 40);
	n = SBX_RPC_HDR + 40;
	n += frame(buf + n, 10, "{}");
	assert_int_equal(sbx_rpc_rd_feed(&r, buf, n, &used, &ev), 0);
	assert_int_equal(ev.kind, SBX_RPC_EV_OVERSIZE);
	assert_int_equal(ev.id, 9);
	assert_int_equal(ev.declared, 40);
	off += used;
	assert_int_equal(sbx_rpc_rd_feed(&r, buf + off, n - off, &used, &ev), 0);
	assert_int_equal(ev.kind, SBX_RPC_EV_FRAME);
	assert_int_equal(ev.id, 10);
	assert_int_equal(ev.len, 2);
	assert_memory_equal(ev.body, "{}", 2);
	assert_null(r.buf == NULL ? NULL : (r.cap > 16 ? r.buf : NULL));
	sbx_rpc_rd_free(&r);
}

static void
expect_bad_reply(const char *body, uint32_t id, const char *needle)
{
	struct sbx_rpc_reply rep;
	char err[256] = "";

	assert_int_equal(sbx_rpc_reply_parse(body, strlen(body), id, &rep, err, sizeof(err)),
	                 -EPROTO);
	assert_null(rep.result);
	if (!strstr(err, needle))
		fail_msg("%s: \"%s\" lacks \"%s\"", body, err, needle);
}

static void
test_reply_bad(void **st)
{
	(void)st;
	expect_bad_reply("", 1, "not JSON");
	expect_bad_reply("{", 1, "not JSON");
	expect_bad_reply("[]", 1, "not a JSON object");
	expect_bad_reply("{\"id\":1,\"result\":{}}", 1, "2.0");
	expect_bad_reply("{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}", 1, "2.0");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}", 1, "differs");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}", 1, "differs");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1}", 1, "exactly one");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", 1,
	                 "exactly one");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":3}", 1, "not an object");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
	                 1, "malformed");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1}}", 1, "malformed");
	expect_bad_reply("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":1,\"result\":{}}", 1, "not JSON");
}

static void
test_reply_ok(void **st)
{
	struct sbx_rpc_reply rep;
	char err[256] = "";
	const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"a\":1}}";
	const char *er = "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32003,"
	                 "\"message\":\"runtime\\nmissing\",\"data\":{\"reason\":\"rt\"}}}";

	(void)st;
	assert_int_equal(sbx_rpc_reply_parse(ok, strlen(ok), 7, &rep, err, sizeof(err)), 0);
	assert_non_null(rep.result);
	assert_int_equal(json_integer_value(json_object_get(rep.result, "a")), 1);
	json_decref(rep.result);
	assert_int_equal(sbx_rpc_reply_parse(er, strlen(er), 7, &rep, err, sizeof(err)), 1);
	assert_null(rep.result);
	assert_int_equal(rep.code, SBX_RPC_E_RUNTIME);
	assert_string_equal(rep.message, "runtime?missing");
	assert_string_equal(rep.reason, "rt");
	assert_int_equal(sbx_rpc_code_errno(rep.code), ENOEXEC);
	assert_int_equal(sbx_rpc_code_errno(SBX_RPC_E_NOTFOUND), ESRCH);
	assert_int_equal(sbx_rpc_code_errno(12345), EIO);
}

static void
test_rd_split_everywhere(void **st)
{
	uint8_t buf[512];
	size_t n = 0;

	(void)st;
	n += frame(buf + n, 1, "{\"x\":1}");
	n += frame(buf + n, 2, "{}");
	n += frame(buf + n, 3, "{\"long\":\"abcdefghijklmnopqrstuvwxyz\"}");
	for (size_t cut = 0; cut <= n; cut++) {
		struct sbx_rpc_rd r = { 0 };
		uint32_t ids[3];
		size_t nids = 0;
		const uint8_t *parts[2] = { buf, buf + cut };
		size_t lens[2] = { cut, n - cut };

		for (int p = 0; p < 2; p++) {
			size_t off = 0;

			for (;;) {
				struct sbx_rpc_ev ev;
				size_t used;

				assert_int_equal(sbx_rpc_rd_feed(&r, parts[p] + off, lens[p] - off,
				                                 &used, &ev),
				                 0);
				off += used;
				if (ev.kind == SBX_RPC_EV_FRAME) {
					assert_true(nids < 3);
					ids[nids++] = ev.id;
				} else {
					assert_int_equal(ev.kind, SBX_RPC_EV_NONE);
					if (off >= lens[p])
						break;
				}
			}
		}
		assert_int_equal(nids, 3);
		assert_int_equal(ids[0], 1);
		assert_int_equal(ids[1], 2);
		assert_int_equal(ids[2], 3);
		sbx_rpc_rd_free(&r);
	}
}

static void
test_req_build(void **st)
{
	uint8_t *out;
	size_t len;
	json_t *p = json_pack("{s:s}", "id", "sb1"), *j;

	(void)st;
	assert_int_equal(sbx_rpc_req_build(0, "x", NULL, 5, &out, &len), -EINVAL);
	j = json_integer(3);
	assert_int_equal(sbx_rpc_req_build(1, "x", j, 5, &out, &len), -EINVAL);
	json_decref(j);
	assert_int_equal(sbx_rpc_req_build(0x01020304, "sandbox.stop", p, 1500, &out, &len), 0);
	assert_int_equal(out[4], 1);
	assert_int_equal(out[7], 4);
	assert_int_equal(((size_t)out[0] << 24 | out[1] << 16 | out[2] << 8 | out[3]),
	                 len - SBX_RPC_HDR);
	j = json_loadb((const char *)out + SBX_RPC_HDR, len - SBX_RPC_HDR, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "method")), "sandbox.stop");
	assert_int_equal(json_integer_value(json_object_get(j, "id")), 0x01020304);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(j, "params"), "deadline_ms")), 1500);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "params"), "id")),
	                    "sb1");
	/* params is borrowed, not changed */
	assert_null(json_object_get(p, "deadline_ms"));
	json_decref(j);
	json_decref(p);
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rd_zero_length_breaks),
		cmocka_unit_test(test_rd_huge_breaks),
		cmocka_unit_test(test_rd_oversize_drained),
		cmocka_unit_test(test_reply_bad),
		cmocka_unit_test(test_reply_ok),
		cmocka_unit_test(test_rd_split_everywhere),
		cmocka_unit_test(test_req_build),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

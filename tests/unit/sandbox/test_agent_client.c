/* test_agent_client.c: the host side's call table. The test plays the
 * agent on the other end of a socketpair. Bad inputs first: frames for
 * unknown streams, bad frames, timeouts, a dead connection; then matching
 * answers to calls by stream id, credit, and the stream-0 hello. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "sandbox-t.h"
#include "proto.h"

struct rec {
	int n;
	enum sbx_agent_ev_kind kinds[16];
	char code[64];
	int err, exit_code, pid;
	size_t bytes;
};

static void
cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct rec *r = arg;

	(void)k;
	if (r->n < 16)
		r->kinds[r->n] = ev->kind;
	r->n++;
	if (ev->kind == SBX_AGENT_EV_ERROR) {
		snprintf(r->code, sizeof(r->code), "%s", ev->code);
		r->err = ev->err;
	}
	if (ev->kind == SBX_AGENT_EV_EXIT)
		r->exit_code = ev->exit_code;
	if (ev->kind == SBX_AGENT_EV_STARTED)
		r->pid = ev->pid;
	if (ev->kind == SBX_AGENT_EV_STDOUT)
		r->bytes += ev->len;
}

struct fixture {
	struct sbx_agent_conn *c;
	int peer;                       /* the fake agent's end */
	struct agent_dec dec;
	uint8_t *buf;
	uint8_t in[AGENT_HDR_LEN + AGENT_CTRL_MAX]; /* read from the client */
	size_t have, off;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	f->c = sbx_agent_conn_new(sv[0]);
	f->peer = sv[1];
	f->buf = malloc(AGENT_PAYLOAD_MAX);
	agent_dec_init(&f->dec, f->buf, AGENT_PAYLOAD_MAX);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	sbx_agent_conn_free(f->c);
	if (f->peer >= 0)
		close(f->peer);
	free(f->buf);
	free(f);
	return 0;
}

static void
agent_says(struct fixture *f, uint8_t type, uint32_t stream, const char *p,
	   size_t len)
{
	uint8_t h[AGENT_HDR_LEN];

	agent_hdr_put(h, type, stream, (uint32_t)len);
	assert_int_equal(write(f->peer, h, sizeof(h)), sizeof(h));
	if (len)
		assert_int_equal(write(f->peer, p, len), (ssize_t)len);
}

static void
agent_json(struct fixture *f, uint8_t type, uint32_t stream, const char *s)
{
	agent_says(f, type, stream, s, strlen(s));
}

/* Runs the client once: what it has to send goes out, what the fake
 * agent wrote is read. */
static int
pump(struct fixture *f, int64_t now)
{
	return sbx_agent_process(f->c, POLLIN | POLLOUT, now);
}

/* Reads one frame the client sent; false if none is waiting. */
static bool
host_said(struct fixture *f, struct agent_frame *out, char *payload,
	  size_t cap)
{
	uint8_t *in = f->in;
	size_t *have = &f->have, *off = &f->off;

	for (;;) {
		size_t used;
		enum agent_dec_result r;

		if (*off < *have) {
			r = agent_dec_feed(&f->dec, in + *off, *have - *off,
					   &used, out);
			*off += used;
			if (r == AGENT_DEC_FRAME) {
				size_t n = out->len < cap - 1 ? out->len
							      : cap - 1;

				memcpy(payload, out->payload, n);
				payload[n] = '\0';
				return true;
			}
			assert_int_equal(r, AGENT_DEC_AGAIN);
		}
		{
			struct pollfd p = { .fd = f->peer, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, 0) <= 0)
				return false;
			n = read(f->peer, in, sizeof(f->in));
			if (n <= 0)
				return false;
			*have = (size_t)n;
			*off = 0;
		}
	}
}

static struct sbx_agent_call *
start(struct fixture *f, const char *op, int64_t deadline, struct rec *r)
{
	struct sbx_agent_call_opts o = { .deadline_ms = deadline };
	json_t *req = json_pack("{s:s}", AGENT_F_OP, op);
	struct sbx_agent_call *k;
	int rc = 0;

	k = sbx_agent_call_start(f->c, req, &o, cb, r, &rc);
	json_decref(req);
	assert_non_null(k);
	return k;
}

/* ---- bad inputs ------------------------------------------------------- */

static void
test_bad_unknown_stream_counted(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };
	struct agent_frame fr;
	char p[256];

	start(f, AGENT_OP_STAT, 0, &r);
	pump(f, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_REQUEST);
	assert_int_equal(fr.stream, 1);
	agent_json(f, AGENT_FT_RESULT, 77, "{}");
	agent_says(f, AGENT_FT_OUT, 78, "abc", 3);
	assert_int_equal(pump(f, 2), 0);
	assert_int_equal(sbx_agent_stats(f->c)->unknown_stream, 2);
	assert_int_equal(r.n, 0);
	/* the real answer still finds its call */
	agent_json(f, AGENT_FT_RESULT, 1, "{\"size\":1}");
	assert_int_equal(pump(f, 3), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kinds[0], SBX_AGENT_EV_RESULT);
	/* and a late frame for it is now unknown too */
	agent_json(f, AGENT_FT_RESULT, 1, "{}");
	assert_int_equal(pump(f, 4), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(sbx_agent_stats(f->c)->unknown_stream, 3);
}

static void
test_bad_frames_fail_their_call_only(void **state)
{
	struct fixture *f = *state;
	struct rec r1 = { 0 }, r2 = { 0 }, r3 = { 0 };
	struct agent_frame fr;
	char p[256];

	start(f, AGENT_OP_STAT, 0, &r1);
	start(f, AGENT_OP_STAT, 0, &r2);
	start(f, AGENT_OP_STAT, 0, &r3);
	pump(f, 1);
	while (host_said(f, &fr, p, sizeof(p)))
		;
	agent_says(f, 200, 1, "zz", 2);                 /* unknown type */
	agent_says(f, AGENT_FT_RESULT, 2, "{bad", 4);   /* bad JSON */
	agent_json(f, AGENT_FT_RESULT, 3, "{}");
	assert_int_equal(pump(f, 2), 0);
	assert_int_equal(r1.n, 1);
	assert_string_equal(r1.code, AGENT_E_BAD_FRAME);
	assert_int_equal(r2.n, 1);
	assert_string_equal(r2.code, AGENT_E_BAD_FRAME);
	assert_int_equal(r3.n, 1);
	assert_int_equal(r3.kinds[0], SBX_AGENT_EV_RESULT);
	assert_int_equal(sbx_agent_stats(f->c)->bad_frames, 2);
	/* the agent is told to drop both streams */
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_ERROR);
	assert_int_equal(fr.stream, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.stream, 2);
}

static void
test_bad_timeout_before_send(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };
	struct agent_frame fr;
	int64_t now = sbx_agent_now_ms(), dl;
	char p[256];
	int rc = 0;
	struct sbx_agent_call_opts past = { .deadline_ms = now - 1 };
	json_t *req = json_pack("{s:s}", AGENT_F_OP, AGENT_OP_STAT);

	/* a deadline already passed: refused outright */
	assert_null(sbx_agent_call_start(f->c, req, &past, cb, &r, &rc));
	assert_int_equal(rc, -ETIMEDOUT);
	json_decref(req);

	start(f, AGENT_OP_STAT, now + 50, &r);
	sbx_agent_want(f->c, &dl);
	assert_int_equal(dl, now + 50);
	/* the loop comes back late: the call fails, nothing is sent */
	assert_int_equal(pump(f, now + 60), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.code, AGENT_E_TIMEOUT);
	assert_int_equal(r.err, ETIMEDOUT);
	assert_false(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(sbx_agent_stats(f->c)->timeouts, 1);
	sbx_agent_want(f->c, &dl);
	assert_int_equal(dl, -1);
}

static void
test_bad_timeout_after_send(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };
	struct agent_frame fr;
	char p[256];
	int64_t now = sbx_agent_now_ms();

	start(f, AGENT_OP_STAT, now + 100, &r);
	assert_int_equal(pump(f, now + 10), 0);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_REQUEST);
	assert_int_equal(pump(f, now + 100), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.code, AGENT_E_TIMEOUT);
	/* the agent hears that the host gave up */
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_ERROR);
	assert_int_equal(fr.stream, 1);
	assert_non_null(strstr(p, AGENT_E_TIMEOUT));
	/* its late answer is ignored and counted */
	agent_json(f, AGENT_FT_RESULT, 1, "{}");
	assert_int_equal(pump(f, now + 101), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(sbx_agent_stats(f->c)->unknown_stream, 1);
}

static void
test_bad_connection_closed(void **state)
{
	struct fixture *f = *state;
	struct rec r1 = { 0 }, r2 = { 0 };
	int rc = 0;
	json_t *req = json_pack("{s:s}", AGENT_F_OP, AGENT_OP_STAT);

	start(f, AGENT_OP_STAT, 0, &r1);
	start(f, AGENT_OP_LIST, 0, &r2);
	pump(f, 1);
	close(f->peer);
	f->peer = -1;
	assert_int_equal(pump(f, 2), -EPIPE);
	assert_string_equal(r1.code, AGENT_E_CLOSED);
	assert_string_equal(r2.code, AGENT_E_CLOSED);
	assert_null(sbx_agent_call_start(f->c, req, NULL, cb, &r1, &rc));
	assert_int_equal(rc, -EPIPE);
	json_decref(req);
	assert_int_equal(pump(f, 3), -EPIPE);
}

static void
test_bad_out_of_step_is_fatal(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };

	start(f, AGENT_OP_STAT, 0, &r);
	pump(f, 1);
	agent_says(f, AGENT_FT_OUT, 1, NULL, 0);
	{
		uint8_t h[AGENT_HDR_LEN];

		agent_hdr_put(h, AGENT_FT_OUT, 1, 0x7fffffff);
		assert_int_equal(write(f->peer, h, sizeof(h)), sizeof(h));
	}
	assert_int_equal(pump(f, 2), -EPROTO);
	assert_string_equal(r.code, AGENT_E_CLOSED);
}

/* ---- good exchanges --------------------------------------------------- */

static void
test_answers_matched_by_stream(void **state)
{
	struct fixture *f = *state;
	struct rec r1 = { 0 }, r2 = { 0 };
	struct agent_frame fr;
	char p[256];
	struct sbx_agent_call *k1, *k2;

	k1 = start(f, AGENT_OP_EXEC, 0, &r1);
	k2 = start(f, AGENT_OP_EXEC, 0, &r2);
	assert_int_equal(sbx_agent_call_id(k1), 1);
	assert_int_equal(sbx_agent_call_id(k2), 2);
	pump(f, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.stream, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.stream, 2);
	/* answers out of order */
	agent_json(f, AGENT_FT_STARTED, 2, "{\"pid\":22}");
	agent_json(f, AGENT_FT_STARTED, 1, "{\"pid\":11}");
	agent_says(f, AGENT_FT_OUT, 2, "two", 3);
	agent_says(f, AGENT_FT_OUT, 1, "o", 1);
	agent_json(f, AGENT_FT_EXIT, 2, "{\"code\":2,\"signal\":null}");
	agent_json(f, AGENT_FT_EXIT, 1, "{\"code\":null,\"signal\":9}");
	assert_int_equal(pump(f, 2), 0);
	assert_int_equal(r1.pid, 11);
	assert_int_equal(r2.pid, 22);
	assert_int_equal(r1.bytes, 1);
	assert_int_equal(r2.bytes, 3);
	assert_int_equal(r1.exit_code, -1);
	assert_int_equal(r2.exit_code, 2);
	assert_int_equal(r1.n, 3);
	assert_int_equal(r2.n, 3);
	/* the data was credited back automatically */
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_WINDOW);
	assert_int_equal(fr.stream, 2);
	assert_int_equal(agent_get_u32((const uint8_t *)p), 3);
}

static void
test_credit_and_input(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };
	struct agent_frame fr;
	char p[256];
	uint8_t w[4];
	struct sbx_agent_call *k;
	char big[100];

	memset(big, 'b', sizeof(big));
	k = start(f, AGENT_OP_WRITE, 0, &r);
	/* no credit yet: nothing taken */
	assert_int_equal(sbx_agent_call_send(k, big, sizeof(big)), 0);
	pump(f, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	agent_put_u32(w, 40);
	agent_says(f, AGENT_FT_WINDOW, 1, (const char *)w, 4);
	pump(f, 2);
	assert_int_equal(r.kinds[0], SBX_AGENT_EV_CREDIT);
	assert_int_equal(sbx_agent_call_credit(k), 40);
	assert_int_equal(sbx_agent_call_send(k, big, sizeof(big)), 40);
	assert_int_equal(sbx_agent_call_credit(k), 0);
	assert_int_equal(sbx_agent_call_end_input(k), 0);
	pump(f, 3);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_IN);
	assert_int_equal(fr.len, 40);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_IN);
	assert_int_equal(fr.len, 0);
	sbx_agent_call_cancel(k);
	pump(f, 4);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_ERROR);
}

static void
test_input_before_request_keeps_order(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 };
	struct agent_frame fr;
	char p[256];
	struct sbx_agent_call *k1, *k2;

	k1 = start(f, AGENT_OP_EXEC, 0, &r);
	k2 = start(f, AGENT_OP_EXEC, 0, &r);
	/* stdin ends before either request left: both requests go first */
	assert_int_equal(sbx_agent_call_end_input(k2), 0);
	assert_int_equal(sbx_agent_call_kill(k1, 9), 0);
	pump(f, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_REQUEST);
	assert_int_equal(fr.stream, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_REQUEST);
	assert_int_equal(fr.stream, 2);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_IN);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_KILL);
	assert_string_equal(p, "{\"signal\":9}");
	/* freeing the connection ends the open calls: "closed" */
	sbx_agent_conn_free(f->c);
	f->c = NULL;
	assert_int_equal(r.n, 2);
	assert_string_equal(r.code, AGENT_E_CLOSED);
}

static void
test_hello_on_stream0(void **state)
{
	struct fixture *f = *state;
	struct rec r = { 0 }, r2 = { 0 };
	struct agent_frame fr;
	char p[256];
	int rc = 0;

	assert_non_null(sbx_agent_hello(f->c, false, 0, cb, &r, &rc));
	assert_null(sbx_agent_hello(f->c, true, 0, cb, &r2, &rc));
	assert_int_equal(rc, -EBUSY);
	pump(f, 1);
	assert_true(host_said(f, &fr, p, sizeof(p)));
	assert_int_equal(fr.type, AGENT_FT_HELLO);
	assert_int_equal(fr.stream, 0);
	agent_json(f, AGENT_FT_HELLO, 0, "{\"version\":1}");
	pump(f, 2);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kinds[0], SBX_AGENT_EV_HELLO);
	/* an unsolicited stream-0 error is only counted */
	agent_json(f, AGENT_FT_ERROR, 0, "{\"code\":\"bad_frame\"}");
	assert_int_equal(pump(f, 3), 0);
	assert_int_equal(sbx_agent_stats(f->c)->unknown_stream, 1);
}

/* RFC 4648 section 10's vectors, and a 64-byte seed's length. */
static void
test_b64_vectors(void **state)
{
	static const char *const v[][2] = {
		{ "", "" },	    { "f", "Zg==" },	     { "fo", "Zm8=" },
		{ "foo", "Zm9v" }, { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" },
		{ "foobar", "Zm9vYmFy" },
	};
	unsigned char seed[SBX_AGENT_REFRESH_ENTROPY];
	char out[4 * ((sizeof(seed) + 2) / 3) + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(sbx_b64_encode(v[i][0], strlen(v[i][0]), out), strlen(v[i][1]));
		assert_string_equal(out, v[i][1]);
	}
	memset(seed, 0xff, sizeof(seed));
	assert_int_equal(sbx_b64_encode(seed, sizeof(seed), out), 88);
	assert_string_equal(out + 84, "/w==");
}

/* The request builders (agent_requests.c): bad input first, then the
 * fields the agent reads, and the answer decoders. */
static void
test_requests(void **state)
{
	const char *argv[] = { "sh", "-c", "true", NULL };
	const char *noargv[] = { NULL };
	const char *badenv[] = { "=x", NULL };
	const char *noeq[] = { "NAME", NULL };
	const char *env[] = { "A=1", "B=x=y", NULL };
	const char *notutf8[] = { "\xff", NULL };
	const char *notutf8env[] = { "A=\xff", NULL };
	struct sbx_agent_exec_req r = { .argv = noargv };
	char err[128];
	uint64_t size;
	json_t *j, *st;

	(void)state;
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	assert_string_equal(err, "exec: empty argv");
	r.argv = argv;
	r.env = badenv;
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	assert_non_null(strstr(err, "is not NAME=value"));
	r.env = noeq;
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	r.env = env;
	r.argv = notutf8;
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	assert_string_equal(err, "exec: argv, env or cwd is not UTF-8");
	r.argv = argv;
	r.env = notutf8env;
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	r.env = NULL;
	r.cwd = "/\xff";
	assert_null(sbx_agent_req_exec(&r, err, sizeof(err)));
	r.env = env;
	assert_null(sbx_agent_req_stat("/\xff"));

	r.argv = argv;
	r.cwd = "/tmp";
	r.stdin_data = "";
	r.timeout_ms = 1500;
	j = sbx_agent_req_exec(&r, err, sizeof(err));
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_OP)), AGENT_OP_EXEC);
	assert_int_equal(json_array_size(json_object_get(j, AGENT_F_ARGV)), 3);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, AGENT_F_ENV), "B")),
			    "x=y");
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_CWD)), "/tmp");
	assert_true(json_is_true(json_object_get(j, AGENT_F_STDIN)));
	assert_int_equal(json_integer_value(json_object_get(j, AGENT_F_TIMEOUT_MS)), 1500);
	json_decref(j);
	r.cwd = NULL;
	r.stdin_data = NULL;
	r.timeout_ms = -1;
	j = sbx_agent_req_exec(&r, err, sizeof(err));
	assert_null(json_object_get(j, AGENT_F_CWD));
	assert_true(json_is_false(json_object_get(j, AGENT_F_STDIN)));
	assert_int_equal(json_integer_value(json_object_get(j, AGENT_F_TIMEOUT_MS)), 0);
	json_decref(j);

	j = sbx_agent_req_write("/a", 0640);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_OP)), AGENT_OP_WRITE);
	assert_int_equal(json_integer_value(json_object_get(j, AGENT_F_MODE)), 0640);
	json_decref(j);
	j = sbx_agent_req_mkdir("/a/b", true);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_OP)), AGENT_OP_MKDIR);
	assert_true(json_is_true(json_object_get(j, AGENT_F_PARENTS)));
	json_decref(j);
	j = sbx_agent_req_list("/a");
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_PATH)), "/a");
	json_decref(j);

	st = json_pack("{s:s, s:i}", AGENT_F_TYPE, "file", AGENT_F_SIZE, 12);
	assert_false(sbx_agent_stat_is_dir(st, &size));
	assert_int_equal(size, 12);
	json_decref(st);
	st = json_pack("{s:s, s:i}", AGENT_F_TYPE, "dir", AGENT_F_SIZE, -1);
	assert_true(sbx_agent_stat_is_dir(st, &size));
	assert_true(size > (1ull << 62));  /* negative: over every cap */
	json_decref(st);
	assert_false(sbx_agent_stat_is_dir(NULL, &size));
	assert_int_equal(size, 0);
	st = json_pack("{s:[]}", AGENT_F_ENTRIES);
	assert_non_null(sbx_agent_list_entries(st));
	json_decref(st);
	assert_null(sbx_agent_list_entries(NULL));
}

/* The CA's configure: bad text first, then the request the agent reads. */
static void
test_request_ca(void **state)
{
	static const char pem[] = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n";
	char big[SBX_CA_MAX + 2], err[128];
	json_t *j;

	(void)state;
	assert_null(sbx_agent_req_ca(NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "ca"));
	assert_null(sbx_agent_req_ca("", err, sizeof(err)));
	assert_null(sbx_agent_req_ca("\xff\xfe", err, sizeof(err))); /* not UTF-8 */
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_null(sbx_agent_req_ca(big, err, sizeof(err)));
	j = sbx_agent_req_ca(pem, err, sizeof(err));
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_OP)), AGENT_OP_CONFIGURE);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_CA)), pem);
	assert_int_equal(json_object_size(j), 2);
	json_decref(j);
	/* added to a clone's refresh, beside its time and entropy */
	assert_int_equal(sbx_agent_req_refresh(&j, err, sizeof(err)), 0);
	assert_int_equal(sbx_agent_req_add_ca(j, big, err, sizeof(err)), -EINVAL);
	assert_null(json_object_get(j, AGENT_F_CA));
	assert_int_equal(sbx_agent_req_add_ca(j, pem, err, sizeof(err)), 0);
	assert_string_equal(json_string_value(json_object_get(j, AGENT_F_CA)), pem);
	assert_non_null(json_object_get(j, AGENT_F_ENTROPY));
	json_decref(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(x) cmocka_unit_test_setup_teardown(x, setup, teardown)
		T(test_bad_unknown_stream_counted),
		T(test_bad_frames_fail_their_call_only),
		T(test_bad_timeout_before_send),
		T(test_bad_timeout_after_send),
		T(test_bad_connection_closed),
		T(test_bad_out_of_step_is_fatal),
		T(test_answers_matched_by_stream),
		T(test_credit_and_input),
		T(test_input_before_request_keeps_order),
		T(test_hello_on_stream0),
#undef T
		cmocka_unit_test(test_b64_vectors),
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_request_ca),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

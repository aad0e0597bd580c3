/* test_rpc_client.c: the fault conformance suite for sluiced's supervisor
 * client (sandbox/rpc_client.h) against a deliberately faulty, scripted
 * peer: a thread on the other end of a socketpair that reads the
 * client's requests and answers as each case says: replies out of order,
 * an invalid frame, an oversized frame, a reply for an unknown id, a peer
 * that closes mid-frame, a peer that never answers, a call made with an
 * expired deadline (nothing written), a frame out of step, a dead peer
 * with several calls in flight. After every case the process's open
 * descriptors (/proc/self/fd) are back at their count before it. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "rpc_client.h"
#include "rpc_frame.h"

static int
fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own */
}

/* ---- the scripted peer ---------------------------------------------------- */

struct req {
	uint32_t id;
	char method[64];
};

static int
read_full(int fd, void *buf, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t r = read(fd, (char *)buf + off, n - off);

		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	return 0;
}

static int
write_full(int fd, const void *buf, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t r = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);

		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	return 0;
}

/* Reads one request frame: 0 with id and method, or -1. */
static int
peer_read(int fd, struct req *q)
{
	uint8_t h[SBX_RPC_HDR];
	uint32_t len;
	char *body;
	json_t *j;

	if (read_full(fd, h, sizeof(h)) < 0)
		return -1;
	len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	q->id = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
	body = malloc(len);
	if (!body || read_full(fd, body, len) < 0) {
		free(body);
		return -1;
	}
	j = json_loadb(body, len, 0, NULL);
	free(body);
	if (!j)
		return -1;
	snprintf(q->method, sizeof(q->method), "%s",
	         json_string_value(json_object_get(j, "method")));
	if (json_integer_value(json_object_get(json_object_get(j, "params"), "deadline_ms")) <= 0 ||
	    json_integer_value(json_object_get(j, "id")) != q->id) {
		json_decref(j);
		return -1;
	}
	json_decref(j);
	return 0;
}

static void
peer_raw(int fd, uint32_t id, const char *body)
{
	uint8_t h[SBX_RPC_HDR];

	sbx_rpc_hdr_put(h, (uint32_t)strlen(body), id);
	write_full(fd, h, sizeof(h));
	write_full(fd, body, strlen(body));
}

/* A good reply echoing the method. */
static void
peer_ok(int fd, const struct req *q)
{
	char body[256];

	snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{\"echo\":\"%s\"}}",
	         q->id, q->method);
	peer_raw(fd, q->id, body);
}

struct peer {
	int fd;
	void (*script)(struct peer *p);
	pthread_t th;
};

static void *
peer_main(void *arg)
{
	struct peer *p = arg;

	p->script(p);
	close(p->fd);
	return NULL;
}

/* The client on one end, the scripted peer on the other. */
static struct sbx_rpc_client *
setup(struct peer *p, void (*script)(struct peer *))
{
	int sv[2];
	struct sbx_rpc_client *c;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c = sbx_rpc_client_new(sv[0]);
	assert_non_null(c);
	p->fd = sv[1];
	p->script = script;
	assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
	return c;
}

static int
call(struct sbx_rpc_client *c, const char *method, int ms, char *err, size_t errsz, char *echo)
{
	json_t *res = NULL;
	int rc = sbx_rpc_call(c, method, NULL, sbx_rpc_now_ms() + ms, &res, NULL, err, errsz);

	if (rc == 0) {
		assert_non_null(res);
		if (echo)
			snprintf(echo, 64, "%s", json_string_value(json_object_get(res, "echo")));
		json_decref(res);
	} else {
		assert_null(res);
		assert_true(err[0] != '\0');
	}
	return rc;
}

/* Several calls from threads at once. */
struct caller {
	struct sbx_rpc_client *c;
	char method[32];
	int ms;
	int rc;
	char err[256];
	char echo[64];
	pthread_t th;
};

static void *
caller_main(void *arg)
{
	struct caller *k = arg;

	k->rc = call(k->c, k->method, k->ms, k->err, sizeof(k->err), k->echo);
	return NULL;
}

/* ---- cases ---------------------------------------------------------------- */

static void
script_out_of_order(struct peer *p)
{
	struct req a, b, c;

	if (peer_read(p->fd, &a) < 0 || peer_read(p->fd, &b) < 0 || peer_read(p->fd, &c) < 0)
		return;
	peer_ok(p->fd, &c);
	peer_ok(p->fd, &a);
	peer_ok(p->fd, &b);
}

static void
test_out_of_order(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_out_of_order);
	struct caller k[3];

	(void)st;
	for (int i = 0; i < 3; i++) {
		k[i] = (struct caller){ .c = c, .ms = 10000 };
		snprintf(k[i].method, sizeof(k[i].method), "m%d", i);
		assert_int_equal(pthread_create(&k[i].th, NULL, caller_main, &k[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(k[i].th, NULL);
		assert_int_equal(k[i].rc, 0);
		assert_string_equal(k[i].echo, k[i].method); /* its own reply */
	}
	pthread_join(p.th, NULL);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_invalid(struct peer *p)
{
	struct req q;

	if (peer_read(p->fd, &q) < 0)
		return;
	peer_raw(p->fd, q.id, "this is not JSON");
	if (peer_read(p->fd, &q) < 0)
		return;
	/* well framed, body names another id */
	peer_raw(p->fd, q.id, "{\"jsonrpc\":\"2.0\",\"id\":4242,\"result\":{}}");
	if (peer_read(p->fd, &q) < 0)
		return;
	peer_ok(p->fd, &q);
}

static void
test_invalid_frame(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_invalid);
	char err[256] = "", echo[64] = "";

	(void)st;
	assert_int_equal(call(c, "a", 10000, err, sizeof(err), NULL), -EPROTO);
	assert_non_null(strstr(err, "not JSON"));
	err[0] = '\0';
	assert_int_equal(call(c, "b", 10000, err, sizeof(err), NULL), -EPROTO);
	assert_non_null(strstr(err, "differs"));
	/* only those calls failed: the connection is up */
	assert_true(sbx_rpc_client_alive(c));
	assert_int_equal(call(c, "c", 10000, err, sizeof(err), echo), 0);
	assert_string_equal(echo, "c");
	pthread_join(p.th, NULL);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_oversized(struct peer *p)
{
	struct req q;
	uint8_t h[SBX_RPC_HDR];
	size_t big = SBX_RPC_FRAME_MAX + 4096;
	char *junk = malloc(big);

	if (!junk || peer_read(p->fd, &q) < 0) {
		free(junk);
		return;
	}
	memset(junk, '[', big);
	sbx_rpc_hdr_put(h, (uint32_t)big, q.id);
	write_full(p->fd, h, sizeof(h));
	write_full(p->fd, junk, big);
	free(junk);
	if (peer_read(p->fd, &q) < 0)
		return;
	peer_ok(p->fd, &q);
}

static void
test_oversized_frame(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_oversized);
	char err[256] = "", echo[64] = "";

	(void)st;
	assert_int_equal(call(c, "big", 30000, err, sizeof(err), NULL), -EMSGSIZE);
	assert_non_null(strstr(err, "too large"));
	assert_true(sbx_rpc_client_alive(c));
	assert_int_equal(call(c, "after", 30000, err, sizeof(err), echo), 0);
	assert_string_equal(echo, "after");
	pthread_join(p.th, NULL);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_unknown_id(struct peer *p)
{
	struct req q;

	if (peer_read(p->fd, &q) < 0)
		return;
	peer_raw(p->fd, q.id + 1000, "{\"jsonrpc\":\"2.0\",\"id\":1001,\"result\":{}}");
	peer_raw(p->fd, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}");
	peer_ok(p->fd, &q);
}

static void
test_unknown_id(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_unknown_id);
	char err[256] = "", echo[64] = "";

	(void)st;
	assert_int_equal(call(c, "x", 10000, err, sizeof(err), echo), 0);
	assert_string_equal(echo, "x");
	assert_int_equal(sbx_rpc_client_unknown(c), 2);
	pthread_join(p.th, NULL);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_close_mid_frame(struct peer *p)
{
	struct req q;
	uint8_t h[SBX_RPC_HDR];

	if (peer_read(p->fd, &q) < 0)
		return;
	sbx_rpc_hdr_put(h, 100, q.id);
	write_full(p->fd, h, sizeof(h));
	write_full(p->fd, "{\"jsonrpc\":", 11);
}

static void
test_close_mid_frame(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_close_mid_frame);
	char err[256] = "";

	(void)st;
	assert_int_equal(call(c, "x", 10000, err, sizeof(err), NULL), -EPIPE);
	assert_non_null(strstr(err, "closed"));
	pthread_join(p.th, NULL);
	assert_false(sbx_rpc_client_alive(c));
	/* the client closed its end on the failure, before anyone freed it */
	assert_int_equal(fd_count(), base);
	err[0] = '\0';
	assert_int_equal(call(c, "again", 10000, err, sizeof(err), NULL), -EPIPE);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static int never_fd = -1;

static void
script_never(struct peer *p)
{
	struct req q, q2;
	char buf[1];

	if (peer_read(p->fd, &q) < 0)
		return;
	/* never answers q; answers the next call, then waits for the end */
	if (peer_read(p->fd, &q2) < 0)
		return;
	peer_ok(p->fd, &q2);
	/* the late answer to q: dropped as unknown */
	peer_ok(p->fd, &q);
	(void)read(p->fd, buf, 1);
}

static void
test_never_answers(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_never);
	char err[256] = "", echo[64] = "";

	(void)st;
	(void)never_fd;
	assert_int_equal(call(c, "slow", 300, err, sizeof(err), NULL), -ETIMEDOUT);
	assert_non_null(strstr(err, "deadline"));
	assert_true(sbx_rpc_client_alive(c));
	assert_int_equal(call(c, "next", 10000, err, sizeof(err), echo), 0);
	assert_string_equal(echo, "next");
	sbx_rpc_client_close(c, "test over");
	pthread_join(p.th, NULL);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_idle(struct peer *p)
{
	char buf[1];

	(void)read(p->fd, buf, 1); /* until the client goes */
}

static void
test_expired_deadline(void **st)
{
	int base = fd_count();
	int sv[2], pending = -1;
	struct sbx_rpc_client *c;
	json_t *res = (json_t *)1;
	char err[256] = "";

	(void)st;
	(void)script_idle;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c = sbx_rpc_client_new(sv[0]);
	assert_non_null(c);
	assert_int_equal(sbx_rpc_call(c, "x", NULL, sbx_rpc_now_ms() - 1, &res, NULL, err,
	                              sizeof(err)),
	                 -ETIMEDOUT);
	assert_null(res);
	assert_int_equal(sbx_rpc_call(c, "x", NULL, sbx_rpc_now_ms(), &res, NULL, err, sizeof(err)),
	                 -ETIMEDOUT);
	/* nothing was written */
	assert_int_equal(ioctl(sv[1], FIONREAD, &pending), 0);
	assert_int_equal(pending, 0);
	assert_true(sbx_rpc_client_alive(c));
	sbx_rpc_client_unref(c);
	close(sv[1]);
	assert_int_equal(fd_count(), base);
}

static void
script_out_of_step(struct peer *p)
{
	struct req q;
	uint8_t h[SBX_RPC_HDR];

	if (peer_read(p->fd, &q) < 0)
		return;
	sbx_rpc_hdr_put(h, 0, q.id);
	write_full(p->fd, h, sizeof(h));
	script_idle(p);
}

static void
test_out_of_step(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_out_of_step);
	char err[256] = "";

	(void)st;
	assert_int_equal(call(c, "x", 10000, err, sizeof(err), NULL), -EPIPE);
	assert_non_null(strstr(err, "out of step"));
	assert_false(sbx_rpc_client_alive(c));
	pthread_join(p.th, NULL); /* it saw our end close */
	assert_int_equal(fd_count(), base);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
script_dies_with_calls(struct peer *p)
{
	struct req q;

	for (int i = 0; i < 4; i++)
		if (peer_read(p->fd, &q) < 0)
			return;
	/* four calls in flight: die */
}

static void
test_dead_peer_fails_all(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_dies_with_calls);
	struct caller k[4];

	(void)st;
	for (int i = 0; i < 4; i++) {
		k[i] = (struct caller){ .c = c, .ms = 20000 };
		snprintf(k[i].method, sizeof(k[i].method), "m%d", i);
		assert_int_equal(pthread_create(&k[i].th, NULL, caller_main, &k[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(k[i].th, NULL);
		assert_int_equal(k[i].rc, -EPIPE);
	}
	pthread_join(p.th, NULL);
	assert_int_equal(fd_count(), base);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

/* Many threads, many calls, one connection: every call gets its own
 * reply (the leader's role changes hands all the time). */
static void
script_echo_all(struct peer *p)
{
	struct req q;

	while (peer_read(p->fd, &q) == 0)
		peer_ok(p->fd, &q);
}

struct storm {
	struct sbx_rpc_client *c;
	int fails;
	pthread_t th;
	int n;
};

static void *
storm_main(void *arg)
{
	struct storm *s = arg;

	for (int i = 0; i < 200; i++) {
		char m[32], err[256] = "", echo[64] = "";

		snprintf(m, sizeof(m), "t%d-%d", s->n, i);
		if (call(s->c, m, 20000, err, sizeof(err), echo) != 0 || strcmp(echo, m) != 0)
			s->fails++;
	}
	return NULL;
}

static void
test_storm(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_echo_all);
	struct storm s[6];

	(void)st;
	for (int i = 0; i < 6; i++) {
		s[i] = (struct storm){ .c = c, .n = i };
		assert_int_equal(pthread_create(&s[i].th, NULL, storm_main, &s[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(s[i].th, NULL);
		assert_int_equal(s[i].fails, 0);
	}
	sbx_rpc_client_unref(c);
	pthread_join(p.th, NULL);
	assert_int_equal(fd_count(), base);
}

/* A peer that goes away while nobody is calling: the probe sees it at
 * once and closes our end. */
static void
script_exit_idle(struct peer *p)
{
	(void)p;
}

static void
test_probe_idle_peer_gone(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_exit_idle);

	(void)st;
	pthread_join(p.th, NULL); /* the peer closed its end */
	assert_false(sbx_rpc_client_probe(c));
	assert_false(sbx_rpc_client_alive(c));
	assert_int_equal(fd_count(), base);
	sbx_rpc_client_unref(c);
	assert_int_equal(fd_count(), base);
}

static void
test_probe_idle_peer_up(void **st)
{
	int base = fd_count();
	struct peer p;
	struct sbx_rpc_client *c = setup(&p, script_echo_all);
	char err[256] = "", echo[64] = "";

	(void)st;
	assert_true(sbx_rpc_client_probe(c));
	assert_int_equal(call(c, "x", 10000, err, sizeof(err), echo), 0);
	assert_true(sbx_rpc_client_probe(c));
	sbx_rpc_client_unref(c);
	pthread_join(p.th, NULL);
	assert_int_equal(fd_count(), base);
}


int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expired_deadline),
		cmocka_unit_test(test_invalid_frame),
		cmocka_unit_test(test_oversized_frame),
		cmocka_unit_test(test_unknown_id),
		cmocka_unit_test(test_close_mid_frame),
		cmocka_unit_test(test_never_answers),
		cmocka_unit_test(test_out_of_step),
		cmocka_unit_test(test_dead_peer_fails_all),
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_storm),
		cmocka_unit_test(test_probe_idle_peer_gone),
		cmocka_unit_test(test_probe_idle_peer_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

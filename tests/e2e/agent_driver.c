/* agent_driver.c: runs the real sluice-agent as a child over a socketpair
 * and drives it through sandbox/agent_client.c. Not inside a sandbox yet:
 * it checks the protocol end to end, flow control and memory bounds.
 *
 *   agent_driver AGENT WORKDIR
 *
 * Prints "ok   ..." / "FAIL ..." lines like tests/e2e/lib.sh and exits 1
 * if anything failed. WORKDIR must exist and be empty.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "agent_client.h"
#include "agent_driver.h"
#include "proto.h"

static int fails, passes, skips;
static pid_t agent_pid;
const char *workdir;
int detached_pid, foreground_pid;

void
check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf(ok ? "ok   " : "FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		passes++;
	else
		fails++;
}

static long
agent_rss_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)agent_pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* ns: the agent gets fresh UTS and network namespaces with a link d0
 * (dummy, or veth) (for the configure cases that change the hostname and the network). */
static struct sbx_agent_conn *
spawn_ns(const char *agent, bool ns)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(2);
	}
	agent_pid = fork();
	if (agent_pid == 0) {
		char *env[] = { "HTTP_PROXY=http://10.0.0.1:3128",
				"https_proxy=http://10.0.0.1:3128",
				"SSL_CERT_FILE=/etc/sluice/ca.pem",
				"SECRET_TOKEN=must-not-leak",
				"PATH=/usr/local/bin:/usr/bin:/bin", NULL };

		if (dup2(sv[1], 3) < 0)
			_exit(126);
		if (ns && (unshare(CLONE_NEWUTS | CLONE_NEWNET) < 0 ||
			   /* a veth pair where there is no dummy driver,
			    * its peer first so that d0 is the first link */
			   system("ip link add d0 type dummy 2>/dev/null || "
				  "{ ip link add dx type veth peer name d0 && "
				  "ip link set dx up; }") != 0))
			_exit(125);
		execle(agent, agent, "--fd", "3", (char *)NULL, env);
		_exit(127);
	}
	close(sv[1]);
	return sbx_agent_conn_new(sv[0]);
}

static struct sbx_agent_conn *
spawn(const char *agent)
{
	return spawn_ns(agent, false);
}

static int
run(struct sbx_agent_conn *c, const char *const *argv, const char *const *env,
    const char *in, size_t inlen, int timeout_ms, struct sbx_agent_exec_res *r,
    char *err, size_t errsz)
{
	struct sbx_agent_exec_req q = { .argv = argv, .env = env,
					.stdin_data = in, .stdin_len = inlen,
					.timeout_ms = timeout_ms };

	return sbx_agent_exec_sync(c, &q, r, err, errsz);
}

/* ---- scenarios --------------------------------------------------------- */

static void
t_hello(struct sbx_agent_conn *c)
{
	json_t *h = NULL;
	char err[256] = "";
	int rc = sbx_agent_hello_sync(c, 5000, &h, err, sizeof(err));
	json_t *caps = h ? json_object_get(h, AGENT_F_CAPS) : NULL;
	bool exec = false, conf = false;
	size_t i;
	json_t *v;

	json_array_foreach(caps, i, v) {
		exec |= json_is_string(v) && !strcmp(json_string_value(v), "exec");
		conf |= json_is_string(v) &&
			!strcmp(json_string_value(v), AGENT_OP_CONFIGURE);
	}
	check(conf, "hello lists the configure op");
	check(rc == 0 && json_integer_value(json_object_get(h, AGENT_F_VERSION)) ==
				 AGENT_PROTO_VERSION && exec,
	      "hello: version %d with exec (%s)", AGENT_PROTO_VERSION, err);
	json_decref(h);
}

static void
t_exec(struct sbx_agent_conn *c)
{
	const char *argv[] = { "sh", "-c", "echo hi; exit 3", NULL };
	const char *argv2[] = { "sh", "-c",
				"echo \"$HTTP_PROXY|$https_proxy|$SSL_CERT_FILE|"
				"$SECRET_TOKEN|$FOO|$PWD\"", NULL };
	const char *env2[] = { "FOO=bar", NULL };
	const char *argv3[] = { "sh", "-c", "echo oops >&2; exit 0", NULL };
	const char *nope[] = { "/no/such/program", NULL };
	struct sbx_agent_exec_res r;
	char err[256] = "";
	int rc;

	rc = run(c, argv, NULL, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == 0 && r.exit_code == 3 && r.signal == 0 && r.out_len == 3 &&
		      !memcmp(r.out, "hi\n", 3) && r.pid > 0,
	      "exec sh -c 'echo hi; exit 3': code 3, \"hi\\n\" (%s)", err);
	sbx_agent_exec_res_fini(&r);

	rc = run(c, argv2, env2, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == 0 && r.out &&
		      !strcmp(r.out, "http://10.0.0.1:3128|http://10.0.0.1:3128|"
				     "/etc/sluice/ca.pem||bar|/\n"),
	      "exec env: proxy and CA variables kept, others cleared, request "
	      "env set (%s)", r.out ? r.out : err);
	sbx_agent_exec_res_fini(&r);

	rc = run(c, argv3, NULL, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == 0 && r.exit_code == 0 && r.err && !strcmp(r.err, "oops\n") &&
		      r.out_len == 0,
	      "exec: stderr streamed apart from stdout");
	sbx_agent_exec_res_fini(&r);

	rc = run(c, nope, NULL, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == -ENOENT && !strncmp(err, AGENT_E_NOT_FOUND ":", 10),
	      "exec of a missing program: not_found (%s)", err);
	sbx_agent_exec_res_fini(&r);
}

static void
t_stdin(struct sbx_agent_conn *c)
{
	const char *cat[] = { "cat", NULL };
	const char *wc[] = { "wc", "-c", NULL };
	const char *head[] = { "head", "-c", "1", NULL };
	struct sbx_agent_exec_res r;
	char err[256] = "";
	size_t big = 3u << 20;
	char *buf = malloc(big);
	int rc;

	memset(buf, 'x', big);
	rc = run(c, cat, NULL, "hello", 5, 0, &r, err, sizeof(err));
	check(rc == 0 && r.out_len == 5 && !memcmp(r.out, "hello", 5),
	      "stdin: cat echoes it (%s)", err);
	sbx_agent_exec_res_fini(&r);
	rc = run(c, wc, NULL, buf, big, 0, &r, err, sizeof(err));
	check(rc == 0 && r.out && atol(r.out) == (long)big,
	      "stdin: 3 MiB through the window (%s)", r.out ? r.out : err);
	sbx_agent_exec_res_fini(&r);
	rc = run(c, head, NULL, buf, big, 10000, &r, err, sizeof(err));
	check(rc == 0 && r.exit_code == 0 && r.out_len == 1,
	      "stdin: a command that stops reading does not hang the call (%s)",
	      err);
	sbx_agent_exec_res_fini(&r);
	free(buf);
}

struct kill_state {
	bool started, done;
	int signal, code;
};

static void
kill_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct kill_state *s = arg;

	if (ev->kind == SBX_AGENT_EV_STARTED) {
		s->started = true;
		sbx_agent_call_kill(k, SIGKILL);
	} else if (ev->kind == SBX_AGENT_EV_EXIT) {
		s->done = true;
		s->signal = ev->signal;
		s->code = ev->exit_code;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		s->done = true;
	}
}

static void
drive(struct sbx_agent_conn *c, bool *done, int max_ms)
{
	int64_t end = sbx_agent_now_ms() + max_ms;

	while (!*done && sbx_agent_now_ms() < end) {
		struct pollfd p = { .fd = sbx_agent_fd_of(c) };
		int64_t dl;

		p.events = sbx_agent_want(c, &dl);
		poll(&p, 1, 50);
		if (sbx_agent_process(c, p.revents, sbx_agent_now_ms()) < 0)
			break;
	}
}

static void
t_signals(struct sbx_agent_conn *c)
{
	const char *self[] = { "sh", "-c", "kill -TERM $$", NULL };
	const char *sleeper[] = { "sleep", "100", NULL };
	char orphan_sh[512];
	const char *orphan[] = { "sh", "-c", orphan_sh, NULL };
	struct sbx_agent_exec_res r;
	struct kill_state ks = { 0 };
	char err[256] = "";
	int rc;
	json_t *req = json_pack("{s:s, s:[s,s]}", AGENT_F_OP, AGENT_OP_EXEC,
				AGENT_F_ARGV, "sleep", "100");

	rc = run(c, self, NULL, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == 0 && r.exit_code == -1 && r.signal == SIGTERM,
	      "a command killed by a signal: signal 15, no code (%s)", err);
	sbx_agent_exec_res_fini(&r);

	rc = run(c, sleeper, NULL, NULL, 0, 300, &r, err, sizeof(err));
	check(rc == 0 && r.timed_out && r.signal == SIGKILL,
	      "timeout 300 ms kills a silent sleep 100: timed out, signal 9 (%s)", err);
	sbx_agent_exec_res_fini(&r);

	sbx_agent_call_start(c, req, NULL, kill_cb, &ks, &rc);
	json_decref(req);
	drive(c, &ks.done, 5000);
	check(ks.started && ks.done && ks.signal == SIGKILL && ks.code == -1,
	      "kill: SIGKILL to a running command ends it with signal 9");

	/* The exit is not held: the call ends while the background child,
	 * which still holds the pipes, is alive (its pid written first). */
	snprintf(orphan_sh, sizeof(orphan_sh),
		 "sleep 30 & echo $! > %s/orphan.pid; echo bg; exit 0", workdir);
	rc = run(c, orphan, NULL, NULL, 0, 0, &r, err, sizeof(err));
	{
		char path[512];
		FILE *f;
		int bg = 0;

		snprintf(path, sizeof(path), "%s/orphan.pid", workdir);
		if ((f = fopen(path, "r"))) {
			if (fscanf(f, "%d", &bg) != 1)
				bg = 0;
			fclose(f);
		}
		check(rc == 0 && r.exit_code == 0 && r.out && !strcmp(r.out, "bg\n") && bg > 0 &&
			      kill(bg, 0) == 0,
		      "a background child holding the pipes does not hold the exit "
		      "(the call ended, the child %d still runs)", bg);
		if (bg > 0)
			kill(bg, SIGKILL);
	}
	sbx_agent_exec_res_fini(&r);
}

struct slow_state {
	uint64_t bytes, ungranted;
	bool done;
	int code;
};

static void
slow_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct slow_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_STDOUT) {
		s->bytes += ev->len;
		s->ungranted += ev->len;
	} else if (ev->kind == SBX_AGENT_EV_EXIT) {
		s->done = true;
		s->code = ev->exit_code;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		s->done = true;
		s->code = -2;
	}
}

static void
t_slow_reader(struct sbx_agent_conn *c)
{
	struct sbx_agent_call_opts o = { .window = 64 * 1024,
					 .manual_window = true };
	struct slow_state s = { 0 };
	struct sbx_agent_call *k;
	json_t *req = json_pack("{s:s, s:[s,s,s]}", AGENT_F_OP, AGENT_OP_EXEC,
				AGENT_F_ARGV, "head", "-c10485760", "/dev/zero");
	long rss, max_rss = 0;
	int64_t t0;
	int rc;

	k = sbx_agent_call_start(c, req, &o, slow_cb, &s, &rc);
	json_decref(req);
	/* 1: the window is spent and the host does nothing for a second */
	t0 = sbx_agent_now_ms();
	while (sbx_agent_now_ms() - t0 < 300) {
		bool no = false;

		drive(c, &no, 50);
	}
	usleep(700 * 1000);
	rss = agent_rss_kb();
	max_rss = rss > max_rss ? rss : max_rss;
	check(s.bytes <= 64 * 1024, "slow reader: the agent stops at its "
				     "window (%llu bytes)",
	      (unsigned long long)s.bytes);
	/* 2: a large window, and the host stops reading its socket */
	sbx_agent_call_grant(k, 32u << 20);
	{
		bool no = false;

		drive(c, &no, 100);
	}
	usleep(1000 * 1000);
	rss = agent_rss_kb();
	max_rss = rss > max_rss ? rss : max_rss;
	/* 3: read slowly to the end, granting back what was read */
	while (!s.done) {
		struct pollfd p = { .fd = sbx_agent_fd_of(c) };
		int64_t dl;

		p.events = sbx_agent_want(c, &dl);
		poll(&p, 1, 100);
		if (sbx_agent_process(c, p.revents, sbx_agent_now_ms()) < 0)
			break;
		if (!s.done && s.ungranted >= 256 * 1024) {
			sbx_agent_call_grant(k, (uint32_t)s.ungranted);
			s.ungranted = 0;
		}
		rss = agent_rss_kb();
		max_rss = rss > max_rss ? rss : max_rss;
		usleep(2000);
	}
	check(s.done && s.code == 0 && s.bytes == 10u << 20,
	      "slow reader: all 10 MiB arrive, exit 0 (%llu bytes)",
	      (unsigned long long)s.bytes);
	check(max_rss > 0 && max_rss < 16 * 1024,
	      "slow reader: agent VmRSS stays under 16 MiB (max %ld kB)",
	      max_rss);
}

static bool
sha256_file(const char *path, unsigned char out[32])
{
	unsigned char buf[65536];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int fd = open(path, O_RDONLY);
	ssize_t n;
	unsigned len = 32;

	if (fd < 0 || ctx == NULL)
		return false;
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	EVP_DigestFinal_ex(ctx, out, &len);
	EVP_MD_CTX_free(ctx);
	close(fd);
	return n == 0;
}

static void
t_files(struct sbx_agent_conn *c)
{
	char src[512], dst[512], remote[512], back[512], dir[512];
	unsigned char h1[32], h2[32];
	uint64_t wn = 0, rn = 0;
	char err[256] = "";
	json_t *req, *res = NULL;
	int fd, rc;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	snprintf(src, sizeof(src), "%s/local-src", workdir);
	snprintf(back, sizeof(back), "%s/local-back", workdir);
	snprintf(dir, sizeof(dir), "%s/guest", workdir);
	snprintf(remote, sizeof(remote), "%s/guest/big.bin", workdir);
	snprintf(dst, sizeof(dst), "%s/guest/a/b/c", workdir);

	fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; i < 50 * 16; i++) {
		static uint64_t blk[8192];

		for (size_t j = 0; j < 8192; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			blk[j] = x;
		}
		if (write(fd, blk, sizeof(blk)) != (ssize_t)sizeof(blk))
			break;
	}
	close(fd);

	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_MKDIR, AGENT_F_PATH,
			dir);
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == 0, "mkdir (%s)", err);

	fd = open(src, O_RDONLY);
	rc = sbx_agent_write_sync(c, remote, 0600, fd, 60000, &wn, err,
				  sizeof(err));
	close(fd);
	check(rc == 0 && wn == 50u << 20, "write: 50 MiB (%llu bytes) (%s)",
	      (unsigned long long)wn, err);
	fd = open(back, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	rc = sbx_agent_read_sync(c, remote, fd, 60000, &rn, err, sizeof(err));
	close(fd);
	check(rc == 0 && rn == 50u << 20, "read: 50 MiB back (%s)", err);
	check(sha256_file(src, h1) && sha256_file(back, h2) &&
		      !memcmp(h1, h2, 32),
	      "read back: the same SHA-256");

	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_STAT, AGENT_F_PATH,
			remote);
	rc = sbx_agent_op_sync(c, req, 5000, &res, err, sizeof(err));
	json_decref(req);
	check(rc == 0 && json_integer_value(json_object_get(res, AGENT_F_SIZE)) ==
				 50 << 20 &&
		      json_integer_value(json_object_get(res, AGENT_F_MODE)) ==
			      0600 &&
		      !strcmp(json_string_value(json_object_get(res, AGENT_F_TYPE)) ?: "",
			      "file"),
	      "stat: size, mode 0600, type file (%s)", err);
	json_decref(res);

	req = json_pack("{s:s, s:s, s:b}", AGENT_F_OP, AGENT_OP_MKDIR,
			AGENT_F_PATH, dst, AGENT_F_PARENTS, 1);
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == 0, "mkdir with parents (%s)", err);

	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_LIST, AGENT_F_PATH,
			dir);
	res = NULL;
	rc = sbx_agent_op_sync(c, req, 5000, &res, err, sizeof(err));
	json_decref(req);
	{
		json_t *e = json_object_get(res, AGENT_F_ENTRIES), *v;
		size_t i;
		int seen = 0;

		json_array_foreach(e, i, v) {
			const char *n = json_string_value(json_object_get(v, AGENT_F_NAME));

			seen += n && (!strcmp(n, "a") || !strcmp(n, "big.bin"));
		}
		check(rc == 0 && json_array_size(e) == 2 && seen == 2,
		      "list: exactly a/ and big.bin (no temporary files left)");
	}
	json_decref(res);

	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_REMOVE, AGENT_F_PATH,
			dir);
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == -ENOTEMPTY && !strncmp(err, AGENT_E_NOT_EMPTY ":", 10),
	      "remove of a full directory without recursive: not_empty (%s)",
	      err);
	req = json_pack("{s:s, s:s, s:b}", AGENT_F_OP, AGENT_OP_REMOVE,
			AGENT_F_PATH, dir, AGENT_F_RECURSIVE, 1);
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == 0, "remove recursive (%s)", err);
	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_STAT, AGENT_F_PATH,
			dir);
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == -ENOENT, "stat after remove: not_found (%s)", err);

	req = json_pack("{s:s, s:s}", AGENT_F_OP, AGENT_OP_READ, AGENT_F_PATH,
			"/no/such/file");
	rc = sbx_agent_op_sync(c, req, 5000, NULL, err, sizeof(err));
	json_decref(req);
	check(rc == -ENOENT, "read of a missing file: not_found (%s)", err);
	unlink(src);
	unlink(back);
}

struct err_state {
	bool done;
	char code[64];
};

static void
err_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct err_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_ERROR) {
		snprintf(s->code, sizeof(s->code), "%s", ev->code);
		s->done = true;
	} else if (ev->kind == SBX_AGENT_EV_RESULT ||
		   ev->kind == SBX_AGENT_EV_EXIT) {
		snprintf(s->code, sizeof(s->code), "(answered)");
		s->done = true;
	}
}

static void
raw(struct sbx_agent_conn *c, uint8_t type, const void *p, size_t len,
    const char *want, const char *what)
{
	struct err_state s = { 0 };
	int rc;

	if (sbx_agent_call_start_raw(c, type, p, len, NULL, err_cb, &s, &rc) ==
	    NULL) {
		check(false, "%s: cannot send (%d)", what, rc);
		return;
	}
	drive(c, &s.done, 5000);
	check(s.done && !strcmp(s.code, want), "%s: %s on its stream (%s)", what,
	      want, s.code);
}

static void
t_malformed(struct sbx_agent_conn *c)
{
	const char *echo[] = { "echo", "still", "here", NULL };
	struct sbx_agent_exec_res r;
	char err[256] = "";
	char *big = malloc(AGENT_CTRL_MAX + 100);
	uint8_t junk[300000];
	int rc;

	memset(big, ' ', AGENT_CTRL_MAX + 100);
	memset(junk, 'j', sizeof(junk));
	raw(c, AGENT_FT_REQUEST, "{not json", 9, AGENT_E_BAD_REQUEST,
	    "bad JSON");
	raw(c, AGENT_FT_REQUEST, "[1,2]", 5, AGENT_E_BAD_REQUEST,
	    "a JSON array");
	raw(c, AGENT_FT_REQUEST, "{\"op\":\"fly\"}", 12, AGENT_E_UNSUPPORTED,
	    "an unknown op");
	raw(c, AGENT_FT_REQUEST, "{\"op\":\"exec\",\"argv\":[]}", 23,
	    AGENT_E_BAD_REQUEST, "exec with empty argv");
	raw(c, 99, "xyz", 3, AGENT_E_BAD_FRAME, "an unknown frame type");
	raw(c, AGENT_FT_REQUEST, big, AGENT_CTRL_MAX + 100, AGENT_E_BAD_FRAME,
	    "an oversized control frame");
	raw(c, AGENT_FT_IN, junk, sizeof(junk), AGENT_E_BAD_FRAME,
	    "an oversized data frame");
	raw(c, AGENT_FT_WINDOW, "ab", 2, AGENT_E_BAD_FRAME,
	    "a 2-byte window frame");
	free(big);
	rc = run(c, echo, NULL, NULL, 0, 0, &r, err, sizeof(err));
	check(rc == 0 && r.out && !strcmp(r.out, "still here\n"),
	      "after the malformed frames the next call works (%s)", err);
	sbx_agent_exec_res_fini(&r);
	{
		struct sbx_agent_call *k;
		struct err_state s = { 0 };
		bool ok;

		k = sbx_agent_hello(c, true, sbx_agent_now_ms() + 5000, err_cb,
				    &s, &rc);
		(void)k;
		drive(c, &s.done, 5000);
		/* err_cb counts HELLO as nothing: use the stats instead */
		ok = sbx_agent_stats(c)->unknown_stream == 0;
		check(ok, "no frames arrived for unknown streams (%llu)",
		      (unsigned long long)sbx_agent_stats(c)->unknown_stream);
	}
}

/* ---- configure ---------------------------------------------------------- */

/* Sends a configure (JSON text) and returns the answer's code: "" for a
 * RESULT, else the ERROR's code (field or step in *what). */
struct cfg_state {
	bool done;
	char code[64], what[64], msg[256];
	int err;
};

static void
cfg_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct cfg_state *s = arg;
	const char *w;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_ERROR) {
		snprintf(s->code, sizeof(s->code), "%s", ev->code);
		snprintf(s->msg, sizeof(s->msg), "%s", ev->message ?: "");
		w = json_string_value(json_object_get(ev->json, AGENT_F_FIELD));
		if (w == NULL)
			w = json_string_value(json_object_get(ev->json,
							      AGENT_F_STEP));
		snprintf(s->what, sizeof(s->what), "%s", w ?: "");
		s->err = ev->err;
		s->done = true;
	} else if (ev->kind == SBX_AGENT_EV_RESULT ||
		   ev->kind == SBX_AGENT_EV_EXIT) {
		s->done = true;
	}
}

static struct cfg_state
cfg(struct sbx_agent_conn *c, const char *text)
{
	struct cfg_state s = { 0 };
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	int rc;

	if (j == NULL) {
		snprintf(s.code, sizeof(s.code), "bad test JSON");
		return s;
	}
	if (sbx_agent_call_start(c, j, NULL, cfg_cb, &s, &rc) == NULL)
		snprintf(s.code, sizeof(s.code), "cannot send");
	else
		drive(c, &s.done, 10000);
	if (!s.done && !s.code[0])
		snprintf(s.code, sizeof(s.code), "no answer");
	json_decref(j);
	return s;
}

static void
cfg_bad(struct sbx_agent_conn *c, const char *text, const char *field)
{
	struct cfg_state s = cfg(c, text);

	check(!strcmp(s.code, AGENT_E_INVALID) && !strcmp(s.what, field) &&
		      strstr(s.msg, field) != NULL,
	      "configure %s: invalid, field %s (%s %s: %s)", text, field,
	      s.code, s.what, s.msg);
}

/* Runs argv through the agent and returns its stdout (static). */
static const char *
out_of(struct sbx_agent_conn *c, const char *const *argv)
{
	static char buf[4096];
	struct sbx_agent_exec_res r;
	char err[256] = "";

	buf[0] = 0;
	if (run(c, argv, NULL, NULL, 0, 10000, &r, err, sizeof(err)) == 0 &&
	    r.out)
		snprintf(buf, sizeof(buf), "%s", r.out);
	else if (err[0])
		snprintf(buf, sizeof(buf), "(error: %s)", err);
	sbx_agent_exec_res_fini(&r);
	return buf;
}

static void
t_configure(struct sbx_agent_conn *c)
{
	const char *show[] = { "sh", "-c",
			       "echo \"$CFG|$HTTP_PROXY|$https_proxy|$FOO\"",
			       NULL };
	const char *env2[] = { "FOO=bar", "CFG=over", NULL };
	const char *pwd[] = { "sh", "-c", "pwd > \"$OUT\"", NULL };
	char text[1024], path[600], got[600] = "";
	struct cfg_state s;
	struct sbx_agent_exec_res r;
	char err[256] = "";
	json_t *req;
	FILE *f;

	/* bad inputs first: nothing changes */
	cfg_bad(c, "{\"op\":\"configure\",\"hostname\":\"a_b\"}", "hostname");
	cfg_bad(c, "{\"op\":\"configure\",\"time_ns\":-5}", "time_ns");
	cfg_bad(c, "{\"op\":\"configure\",\"time_ns\":1700000000}", "time_ns");
	cfg_bad(c, "{\"op\":\"configure\",\"entropy\":\"AAAA\"}", "entropy");
	cfg_bad(c, "{\"op\":\"configure\",\"entropy\":\"!!!!\"}", "entropy");
	cfg_bad(c, "{\"op\":\"configure\",\"net\":{\"address\":\"10.1.1.1\"}}",
		"net.address");
	cfg_bad(c, "{\"op\":\"configure\",\"net\":{\"mtu\":20}}", "net.mtu");
	cfg_bad(c, "{\"op\":\"configure\",\"env\":{\"A=B\":\"x\"}}", "env");
	cfg_bad(c, "{\"op\":\"configure\",\"cwd\":\"rel\"}", "cwd");
	cfg_bad(c, "{\"op\":\"configure\",\"env\":{\"CFG\":\"x\"},\"zone\":1}",
		"zone");
	check(!strcmp(out_of(c, show), "|http://10.0.0.1:3128|"
				       "http://10.0.0.1:3128|\n"),
	      "a refused configure changed nothing (%s)", out_of(c, show));

	s = cfg(c, "{\"op\":\"configure\"}");
	check(s.done && !s.code[0], "configure {}: result (%s)", s.code);

	/* env and cwd: the defaults of later execs */
	snprintf(text, sizeof(text),
		 "{\"op\":\"configure\",\"env\":{\"CFG\":\"yes\",\"HTTP_PROXY\":"
		 "\"http://cfg\",\"OUT\":\"%s/pwd.out\"},\"cwd\":\"%s\"}",
		 workdir, workdir);
	s = cfg(c, text);
	check(s.done && !s.code[0], "configure env and cwd: result (%s %s)",
	      s.code, s.msg);
	check(!strcmp(out_of(c, show), "yes|http://cfg||\n"),
	      "configured env replaces the inherited one (%s)",
	      out_of(c, show));
	if (run(c, show, env2, NULL, 0, 10000, &r, err, sizeof(err)) == 0)
		check(r.out && !strcmp(r.out, "over|http://cfg||bar\n"),
		      "an exec's env merges over the configured one (%s)",
		      r.out ? r.out : "");
	else
		check(false, "exec with env (%s)", err);
	sbx_agent_exec_res_fini(&r);
	/* the default cwd applies to an exec without "cwd" (raw request:
	 * agent_client always sends one) */
	snprintf(path, sizeof(path), "%s/pwd.out", workdir);
	req = json_pack("{s:s, s:[s,s,s]}", AGENT_F_OP, AGENT_OP_EXEC,
			AGENT_F_ARGV, pwd[0], pwd[1], pwd[2]);
	{
		struct cfg_state e = { 0 };
		int rc;

		if (sbx_agent_call_start(c, req, NULL, cfg_cb, &e, &rc))
			drive(c, &e.done, 10000);
		f = fopen(path, "r");
		if (f && fgets(got, sizeof(got), f))
			got[strcspn(got, "\n")] = 0;
		if (f)
			fclose(f);
		check(e.done && !strcmp(got, workdir),
		      "configured cwd is the default of a later exec (%s)", got);
	}
	json_decref(req);
	unlink(path);
	/* entropy: applied (credited) as root, refused with errno otherwise */
	s = cfg(c, "{\"op\":\"configure\",\"entropy\":"
		   "\"3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs=\"}");
	if (geteuid() == 0)
		check(s.done && !s.code[0], "configure entropy as root: result "
		      "(%s %s)", s.code, s.msg);
	else
		check(!strcmp(s.code, AGENT_E_PERMISSION) &&
			      !strcmp(s.what, "entropy") && s.err == EPERM,
		      "configure entropy unprivileged: permission, step "
		      "entropy (%s %s)", s.code, s.what);
}

/* hostname and net, in UTS and network namespaces of the agent's own */
static void
t_configure_ns(const char *agent)
{
	const char *host[] = { "hostname", NULL };
	const char *addr[] = { "sh", "-c", "ip -4 -o addr show dev d0 | "
			       "awk '{print $4}'; ip -o link show dev d0 | "
			       "grep -o 'mtu [0-9]*'; ip -4 route show default",
			       NULL };
	struct sbx_agent_conn *c;
	struct cfg_state s;
	pid_t pid;
	int status = -1;

	if (geteuid() != 0) {
		printf("SKIP configure hostname/net: needs root\n");
		skips++;
		return;
	}
	c = spawn_ns(agent, true);
	pid = agent_pid;
	s = cfg(c, "{\"op\":\"configure\",\"hostname\":\"cfg-host.test\","
		   "\"net\":{\"address\":\"10.77.0.2/24\",\"gateway\":"
		   "\"10.77.0.1\",\"mtu\":1400}}");
	check(s.done && !s.code[0], "configure hostname and net (d0 by default) "
	      "(%s %s)", s.code, s.msg);
	check(!strcmp(out_of(c, host), "cfg-host.test\n"), "hostname set (%s)",
	      out_of(c, host));
	check(!strcmp(out_of(c, addr), "10.77.0.2/24\nmtu 1400\n"
				       "default via 10.77.0.1 dev d0 \n"),
	      "address, mtu, link up, default route (%s)", out_of(c, addr));
	/* again, other values: replaced, one default route */
	s = cfg(c, "{\"op\":\"configure\",\"net\":{\"ifname\":\"d0\","
		   "\"address\":\"10.78.0.5/16\",\"gateway\":\"10.78.255.254\"}}");
	check(s.done && !s.code[0], "configure net again (%s %s)", s.code,
	      s.msg);
	check(!strcmp(out_of(c, addr), "10.78.0.5/16\nmtu 1400\n"
				       "default via 10.78.255.254 dev d0 \n"),
	      "reconfigured: address replaced, one default route (%s)",
	      out_of(c, addr));
	/* a failing system call: errno and the step */
	s = cfg(c, "{\"op\":\"configure\",\"net\":{\"ifname\":\"nosuch0\","
		   "\"mtu\":1400}}");
	check(!strcmp(s.code, AGENT_E_IO) && !strcmp(s.what, "net") &&
		      s.err == ENODEV && strstr(s.msg, "nosuch0"),
	      "configure net on a missing link: io, step net, ENODEV (%s %s "
	      "%d: %s)", s.code, s.what, s.err, s.msg);
	sbx_agent_conn_free(c);
	for (int i = 0; i < 50; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(100 * 1000);
	}
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the namespaced agent exits 0");
}

/* Runs: exists and is no zombie (one killed whose parent, the agent,
 * has gone may wait for an init that does not reap). */
static bool
pid_alive(int pid)
{
	char path[64], st[512];
	FILE *f;
	size_t n;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	n = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[n] = 0;
	p = strrchr(st, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

int
main(int argc, char **argv)
{
	struct sbx_agent_conn *c;
	int status = -1;

	if (argc != 3) {
		fprintf(stderr, "usage: agent_driver AGENT WORKDIR\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	workdir = argv[2];
	c = spawn(argv[1]);
	t_hello(c);
	t_exec(c);
	t_stdin(c);
	t_signals(c);
	t_slow_reader(c);
	t_files(c);
	t_malformed(c);
	t_configure(c);
	t_pty(c);
	t_detach(c);
	sbx_agent_conn_free(c);
	for (int i = 0; i < 50; i++) {
		if (waitpid(agent_pid, &status, WNOHANG) == agent_pid)
			break;
		usleep(100 * 1000);
	}
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the agent exits 0 when the host closes the stream");
	usleep(200 * 1000); /* the SIGKILL is delivered; the zombie goes with its parent */
	check(foreground_pid > 0 && !pid_alive(foreground_pid),
	      "the host left: its foreground command was killed");
	check(detached_pid > 0 && pid_alive(detached_pid),
	      "the host left: the detached command still runs");
	if (detached_pid > 0)
		kill(detached_pid, SIGKILL);
	if (!WIFEXITED(status) && !WIFSIGNALED(status)) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
	}
	t_configure_ns(argv[1]);
	printf("%d passed, %d failed, %d skipped\n", passes, fails, skips);
	/* 77: a skip is reported as one (ctest's SKIP_RETURN_CODE) */
	return fails ? 1 : skips ? 77 : 0;
}

/* supervisor_podman.c: sluice-supervisor-podman, a supervisor of the rpc
 * backend (docs/backend-rpc.md) that makes sandboxes as podman containers
 * (docs/supervisor-podman.md).
 *
 * It serves one connection on the inherited fd $SLUICE_RPC_FD (sluiced
 * started it; it exits when sluiced's end closes), or listens on
 * --socket PATH (0600) and serves every connection it accepts. Each
 * connection has one reader (sup_frame.h); each request runs on a thread
 * of its own, so a long start never holds up capabilities; replies are
 * written whole under the connection's lock, in whatever order they end.
 * The methods are in sup_podman.c. Containers outlive this process
 * (podman's conmon holds them), so a restarted supervisor finds them with
 * sandbox.list and sandbox.adopt. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "sup_frame.h"
#include "sup_podman.h"
#include "sup_run.h"

#define INFLIGHT_MAX 64
#define DEADLINE_DEFAULT_MS 600000

static struct sup_cfg cfg;
static atomic_int inflight;

struct conn {
	int fd;
	bool exit_on_close; /* the inherited fd: sluiced is gone, so are we */
	atomic_int refs;
	atomic_bool dead;
	pthread_mutex_t wmu;
};

static void
conn_put(struct conn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1) {
		close(c->fd);
		pthread_mutex_destroy(&c->wmu);
		free(c);
	}
}

static void
logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
logf_(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "sluice-supervisor-podman: %s\n", buf);
}

/* Writes one frame whole (header and payload) or marks the connection
 * dead. */
static void
send_msg(struct conn *c, uint32_t id, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	uint8_t hdr[SUP_FRAME_HDR];

	if (s && strlen(s) > SUP_FRAME_MAX) {
		free(s);
		json_t *e = json_pack("{s:s, s:I, s:{s:i, s:s, s:{s:s}}}", "jsonrpc", "2.0", "id",
				      (json_int_t)id, "error", "code", SUP_E_FAILED, "message",
				      "reply too large", "data", "reason", "too_large");
		s = json_dumps(e, JSON_COMPACT);
		json_decref(e);
	}
	if (!s)
		return;
	size_t n = strlen(s);
	sup_frame_header(hdr, (uint32_t)n, id);
	pthread_mutex_lock(&c->wmu);
	if (!atomic_load(&c->dead)) {
		const uint8_t *parts[2] = {hdr, (const uint8_t *)s};
		size_t lens[2] = {sizeof(hdr), n};
		for (int i = 0; i < 2; i++) {
			size_t off = 0;
			while (off < lens[i]) {
				ssize_t k = send(c->fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
				if (k < 0 && errno == EINTR)
					continue;
				if (k <= 0) {
					atomic_store(&c->dead, true);
					shutdown(c->fd, SHUT_RDWR);
					i = 2;
					break;
				}
				off += (size_t)k;
			}
		}
	}
	pthread_mutex_unlock(&c->wmu);
	free(s);
}

static void
send_error(struct conn *c, uint32_t id, int code, const char *msg, const char *reason)
{
	json_t *e = json_pack("{s:s, s:I, s:{s:i, s:s, s:{s:s}}}", "jsonrpc", "2.0", "id",
			      (json_int_t)id, "error", "code", code, "message", msg, "data",
			      "reason", reason ? reason : "error");
	if (e)
		send_msg(c, id, e);
	json_decref(e);
}

struct job {
	struct conn *c;
	uint32_t id;
	char method[64];
	sup_method_fn fn;
	json_t *params;
	long long deadline_ms;
};

static void *
job_run(void *arg)
{
	struct job *j = arg;
	struct sup_err err = {0};
	json_t *res = NULL;
	long long t0 = sup_now_ms();

	if (j->deadline_ms <= t0) {
		send_error(j->c, j->id, SUP_E_TIMEOUT, "the call's deadline has passed", "deadline");
		logf_("%s id %u: deadline passed", j->method, j->id);
	} else if (j->fn(&cfg, j->params, j->deadline_ms, &res, &err) == 0 && res) {
		json_t *m = json_pack("{s:s, s:I, s:O}", "jsonrpc", "2.0", "id", (json_int_t)j->id,
				      "result", res);
		send_msg(j->c, j->id, m);
		json_decref(m);
		logf_("%s id %u: ok in %lld ms", j->method, j->id, sup_now_ms() - t0);
	} else {
		if (!err.code) {
			err.code = SUP_E_FAILED;
			snprintf(err.msg, sizeof(err.msg), "out of memory");
		}
		send_error(j->c, j->id, err.code, err.msg, err.reason);
		logf_("%s id %u: error %d in %lld ms: %s", j->method, j->id, err.code,
		      sup_now_ms() - t0, err.msg);
	}
	json_decref(res);
	json_decref(j->params);
	conn_put(j->c);
	free(j);
	atomic_fetch_sub(&inflight, 1);
	return NULL;
}

/* One well-framed request: checked here, run on a thread of its own. */
static void
dispatch(struct conn *c, uint32_t hid, const uint8_t *buf, size_t len)
{
	json_error_t je;
	json_t *req = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);

	if (!req) {
		if (hid)
			send_error(c, hid, SUP_E_PARSE, "parse error: not JSON", "parse");
		return;
	}
	json_t *idj = json_object_get(req, "id"), *params = json_object_get(req, "params");
	const char *ver = json_string_value(json_object_get(req, "jsonrpc"));
	const char *method = json_string_value(json_object_get(req, "method"));
	if (!hid && !idj) { /* a notification: none is defined */
		json_decref(req);
		return;
	}
	if (!json_is_object(req) || !ver || strcmp(ver, "2.0") || !json_is_integer(idj) ||
	    json_integer_value(idj) != (json_int_t)hid || !method ||
	    (params && !json_is_object(params))) {
		if (hid)
			send_error(c, hid, SUP_E_REQUEST,
				   !json_is_integer(idj) || json_integer_value(idj) != (json_int_t)hid
					   ? "invalid request: the id differs from the frame's"
					   : "invalid request: jsonrpc 2.0, method, params object",
				   "request");
		json_decref(req);
		return;
	}
	sup_method_fn fn = sup_podman_method(method);
	if (!fn) {
		char msg[128];
		snprintf(msg, sizeof(msg), "unknown method %.64s", method);
		send_error(c, hid, SUP_E_METHOD, msg, "method");
		json_decref(req);
		return;
	}
	long long deadline = sup_now_ms() + DEADLINE_DEFAULT_MS;
	json_t *dl = json_object_get(params, "deadline_ms");
	if (dl && !json_is_integer(dl)) {
		send_error(c, hid, SUP_E_PARAMS, "deadline_ms: an integer", "deadline_ms");
		json_decref(req);
		return;
	}
	if (dl)
		deadline = sup_now_ms() + json_integer_value(dl);
	if (atomic_fetch_add(&inflight, 1) >= INFLIGHT_MAX) {
		atomic_fetch_sub(&inflight, 1);
		send_error(c, hid, SUP_E_FAILED, "busy: too many calls in flight", "busy");
		json_decref(req);
		return;
	}
	struct job *j = calloc(1, sizeof(*j));
	pthread_t t;
	pthread_attr_t at;
	if (!j) {
		atomic_fetch_sub(&inflight, 1);
		send_error(c, hid, SUP_E_FAILED, "out of memory", "nomem");
		json_decref(req);
		return;
	}
	j->c = c;
	j->id = hid;
	snprintf(j->method, sizeof(j->method), "%s", method);
	j->fn = fn;
	j->params = params ? json_incref(params) : json_object();
	j->deadline_ms = deadline;
	atomic_fetch_add(&c->refs, 1);
	json_decref(req);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 << 10);
	if (pthread_create(&t, &at, job_run, j) != 0) {
		send_error(c, hid, SUP_E_FAILED, "cannot start a thread", "nomem");
		json_decref(j->params);
		conn_put(c);
		free(j);
		atomic_fetch_sub(&inflight, 1);
	}
	pthread_attr_destroy(&at);
}

/* Reads frames until the peer closes or is out of step. */
static void *
serve(void *arg)
{
	struct conn *c = arg;
	static const size_t rbuf_n = 65536;
	uint8_t *payload = malloc(SUP_FRAME_MAX), *rbuf = malloc(rbuf_n);
	struct sup_frame_rd rd;

	if (!payload || !rbuf)
		goto out;
	sup_frame_init(&rd, payload, SUP_FRAME_MAX);
	for (;;) {
		ssize_t n = recv(c->fd, rbuf, rbuf_n, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t off = 0, used;
		while (off < (size_t)n) {
			enum sup_frame_st st = sup_frame_feed(&rd, rbuf + off, (size_t)n - off, &used);
			off += used;
			if (st == SUP_FRAME_DONE) {
				dispatch(c, rd.id, payload, rd.len);
			} else if (st == SUP_FRAME_BIG) {
				send_error(c, rd.id, SUP_E_REQUEST, "request too large", "too_large");
			} else if (st == SUP_FRAME_STRAY) {
				logf_("a frame out of step (length %u): closing the connection", rd.len);
				goto out;
			}
		}
	}
out:
	free(payload);
	free(rbuf);
	atomic_store(&c->dead, true);
	shutdown(c->fd, SHUT_RDWR);
	if (c->exit_on_close) {
		logf_("sluiced closed the connection: exiting (sandboxes keep running)");
		_exit(0);
	}
	conn_put(c);
	return NULL;
}

static struct conn *
conn_new(int fd, bool exit_on_close)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->exit_on_close = exit_on_close;
	atomic_init(&c->refs, 1);
	atomic_init(&c->dead, false);
	pthread_mutex_init(&c->wmu, NULL);
	return c;
}

static int
listen_on(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		logf_("--socket %s: path too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(path);
	mode_t old = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, 16) < 0) {
		logf_("--socket %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-supervisor-podman [OPTIONS]\n"
		"Serves sluice's rpc backend protocol on $SLUICE_RPC_FD, or on --socket.\n"
		"  --socket PATH           listen on a unix socket (mode 0600)\n"
		"  --state-dir DIR         its own directory (default /var/lib/sluice-supervisor-podman)\n"
		"  --root DIR              podman storage (default STATE_DIR/storage)\n"
		"  --runroot DIR           podman run root (default STATE_DIR/run)\n"
		"  --tmpdir DIR            libpod's state (default STATE_DIR/tmp)\n"
		"  --podman PATH           podman binary (default: found in PATH)\n"
		"  --runtime NAME|PATH     OCI runtime of isolation standard (default runc)\n"
		"  --enhanced-runtime X    OCI runtime of isolation enhanced (runsc, kata-runtime...)\n"
		"  --cgroup-manager M      cgroupfs (default) or systemd\n"
		"  --ulimit-nofile N       every container's nofile (default: min(hard, 1048576))\n"
		"  --ulimit-nproc N        every container's nproc (default: min(hard, 4096))\n"
		"  --env-timeout-s N       environment.ensure's watchdog (default 300)\n"
		"  --timeout-s N           every other podman command's (default 120)\n"
		"  --max N                 at most N running sandboxes (default: no limit)\n");
}

static unsigned long
hard(int res, unsigned long cap)
{
	struct rlimit rl;

	if (getrlimit(res, &rl) < 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max > cap)
		return cap;
	return (unsigned long)rl.rlim_max;
}

static long
num(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);

	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "sluice-supervisor-podman: %s: a number from %ld to %ld\n", opt, lo,
			hi);
		exit(2);
	}
	return v;
}

static char *
joined(const char *dir, const char *leaf)
{
	char *s;

	if (asprintf(&s, "%s/%s", dir, leaf) < 0)
		exit(1);
	return s;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"state-dir", required_argument, NULL, 'd'},
		{"root", required_argument, NULL, 'r'},
		{"runroot", required_argument, NULL, 'R'},
		{"tmpdir", required_argument, NULL, 'T'},
		{"podman", required_argument, NULL, 'p'},
		{"runtime", required_argument, NULL, 'u'},
		{"enhanced-runtime", required_argument, NULL, 'e'},
		{"runtime-enhanced", required_argument, NULL, 'e'}, /* an alias */
		{"cgroup-manager", required_argument, NULL, 'c'},
		{"ulimit-nofile", required_argument, NULL, 'n'},
		{"ulimit-nproc", required_argument, NULL, 'N'},
		{"env-timeout-s", required_argument, NULL, 'E'},
		{"timeout-s", required_argument, NULL, 't'},
		{"max", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *sock = NULL;
	static char podman_buf[PATH_MAX], tar_buf[PATH_MAX];
	int o;

	cfg.state_dir = "/var/lib/sluice-supervisor-podman";
	cfg.runtime = "runc";
	cfg.cgroup_manager = "cgroupfs";
	cfg.nofile = hard(RLIMIT_NOFILE, 1048576);
	cfg.nproc = hard(RLIMIT_NPROC, 4096);
	cfg.env_timeout_ms = 300 * 1000;
	cfg.timeout_ms = 120 * 1000;
	cfg.max = -1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'd': cfg.state_dir = optarg; break;
		case 'r': cfg.root = optarg; break;
		case 'R': cfg.runroot = optarg; break;
		case 'T': cfg.tmpdir = optarg; break;
		case 'p': cfg.podman = optarg; break;
		case 'u': cfg.runtime = optarg; break;
		case 'e': cfg.enhanced = optarg; break;
		case 'c': cfg.cgroup_manager = optarg; break;
		case 'n': cfg.nofile = (unsigned long)num("--ulimit-nofile", optarg, 64, 1 << 30); break;
		case 'N': cfg.nproc = (unsigned long)num("--ulimit-nproc", optarg, 16, 1 << 30); break;
		case 'E': cfg.env_timeout_ms = (int)num("--env-timeout-s", optarg, 1, 86400) * 1000; break;
		case 't': cfg.timeout_ms = (int)num("--timeout-s", optarg, 1, 86400) * 1000; break;
		case 'm': cfg.max = num("--max", optarg, 0, 1 << 20); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (cfg.state_dir[0] != '/') {
		fprintf(stderr, "sluice-supervisor-podman: --state-dir: an absolute path\n");
		return 2;
	}
	if (mkdir(cfg.state_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "sluice-supervisor-podman: %s: %s\n", cfg.state_dir, strerror(errno));
		return 1;
	}
	if (!cfg.root)
		cfg.root = joined(cfg.state_dir, "storage");
	if (!cfg.runroot)
		cfg.runroot = joined(cfg.state_dir, "run");
	if (!cfg.tmpdir)
		cfg.tmpdir = joined(cfg.state_dir, "tmp");
	if (!cfg.podman) {
		/* Found once: an absolute path for execv. */
		const char *path = getenv("PATH");
		char *dup = strdup(path ? path : "/usr/bin:/bin");
		for (char *sv = NULL, *d = strtok_r(dup, ":", &sv); d; d = strtok_r(NULL, ":", &sv)) {
			snprintf(podman_buf, sizeof(podman_buf), "%s/podman", d);
			if (access(podman_buf, X_OK) == 0) {
				cfg.podman = podman_buf;
				break;
			}
		}
		free(dup);
	}
	snprintf(tar_buf, sizeof(tar_buf), "%s", access("/usr/bin/tar", X_OK) == 0 ? "/usr/bin/tar"
								    : "/bin/tar");
	cfg.tar = tar_buf;
	signal(SIGPIPE, SIG_IGN);

	const char *fdenv = getenv("SLUICE_RPC_FD");
	if (!sock) {
		if (!fdenv) {
			fprintf(stderr, "sluice-supervisor-podman: neither $SLUICE_RPC_FD nor --socket\n");
			return 2;
		}
		int fd = (int)num("SLUICE_RPC_FD", fdenv, 0, 1 << 20);
		struct conn *c = conn_new(fd, true);
		if (!c)
			return 1;
		logf_("serving fd %d (state %s, storage %s)", fd, cfg.state_dir, cfg.root);
		serve(c);
		return 0;
	}
	int lfd = listen_on(sock);
	if (lfd < 0)
		return 1;
	logf_("listening on %s (state %s, storage %s)", sock, cfg.state_dir, cfg.root);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			logf_("accept: %s", strerror(errno));
			sleep(1);
			continue;
		}
		struct conn *c = conn_new(fd, false);
		pthread_t t;
		if (!c || pthread_create(&t, NULL, serve, c) != 0) {
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
}

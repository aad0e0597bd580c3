/* cli.c: sluice-sandbox, a debugging and test tool. Starts an `ns`
 * sandbox from a template, runs one command in it (through sluice-agent,
 * or the placeholder PID 1 when there is no agent), prints its output,
 * stops the sandbox and exits with the command's status.
 *
 *   sluice-sandbox [options] [--] [COMMAND...]
 *
 * With --repeat N it starts and stops N sandboxes in turn (running the
 * command in each) and prints the start-to-ready latency; with --keep as
 * well, it keeps all N running at once, pings every agent, and stops them
 * all at the end. --put and --get move files through the agent's write
 * and read ops, before and after the command.
 *
 * Durability: --detach starts a sandbox, prints sbx_save()'s JSON and
 * exits leaving it running; --adopt FILE finds it again, runs the command
 * in it and stops it (unless --keep); --sweep ends every sandbox under the
 * state directory but the --keep-id ones. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "proto.h"
#include "sandbox.h"

#define XFER_MAX 8

static int verbose;
static volatile sig_atomic_t stopping;

/* A file moved through the agent: --put HOST:GUEST, --get GUEST:HOST. */
struct xfer {
	const char *host, *guest;
};

/* What one run does in each sandbox once its agent said hello. */
struct work {
	char **argv; /* NULL-terminated; argv[0] NULL: no command */
	const char *const *env;
	const char *cwd;
	int timeout_ms;
	struct xfer puts[XFER_MAX], gets[XFER_MAX];
	int nputs, ngets;
};

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void
log_stderr(void *arg, enum sbx_log_level level, const char *msg)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	(void)arg;
	if ((int)level <= (verbose ? SBX_LOG_DEBUG : SBX_LOG_WARN))
		fprintf(stderr, "sluice-sandbox: %s: %s\n", names[level], msg);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: sluice-sandbox [options] [--] [COMMAND [ARG...]]\n"
	           "  -t, --template T     busybox (default), host, or a root directory\n"
	           "  --cache DIR          template cache (default /var/lib/sluice/templates)\n"
	           "  --state DIR          per-sandbox scratch (default /run/sluice/sandboxes)\n"
	           "  --idmap-base N       the host ids ns sandboxes run as: ranges of 65536\n"
	           "  --idmap-ranges N     from N (default 1073741824), this many (default 8192)\n"
	           "  --agent PATH         sluice-agent to run as PID 1 (default: the one\n"
	           "                       built beside this program, if any)\n"
	           "  --placeholder        use the placeholder PID 1 (a shell) instead\n"
	           "  --id ID              sandbox id (default sbx-<pid>)\n"
	           "  -m, --memory MB      memory limit\n"
	           "  --cpus N             CPU limit (e.g. 0.5)\n"
	           "  -p, --pids N         process limit\n"
	           "  --hostname NAME\n"
	           "  -e, --env NAME=VALUE (repeatable)\n"
	           "  -C, --cwd DIR\n"
	           "  -b, --bind SRC:DST[:ro] (repeatable)\n"
	           "  --file GUESTPATH=TEXT (repeatable)\n"
	           "  --netns NAME         put a veth peer in this network namespace\n"
	           "  --peer IFNAME        its name (default sbx<pid>)\n"
	           "  --addr CIDR  --gw ADDR  --mtu N\n"
	           "  --peer-addr ADDR     the peer's own address (routes --addr to it)\n"
	           "  --timeout SECONDS    command timeout (agent only)\n"
	           "  --timeout-ms MS      the same in milliseconds\n"
	           "  --put HOST:GUEST     before the command, copy a host file into the\n"
	           "                       sandbox through the agent (repeatable)\n"
	           "  --get GUEST:HOST     after it, copy a guest file out (repeatable)\n"
	           "  --repeat N           start, run, stop N sandboxes; print latency\n"
	           "                       (mean, median, p99, max)\n"
	           "  --latency            print each start's start-to-ready time\n"
	           "  --keep               with --repeat: keep all N running at once, ping\n"
	           "                       every agent, then stop them all\n"
	           "  --wait-stdin         with --keep: hold them until stdin reaches EOF\n"
	           "  --park               with --keep: park them all (backends that can)\n"
	           "                       before holding, then resume each and give its\n"
	           "                       agent the time and entropy; print that latency\n"
	           "  --hold SECONDS       keep the sandbox running this long after the\n"
	           "                       command (for inspection)\n"
	           "  --cgroup-parent P    cgroup parent of the sandboxes (default \"sluice\"\n"
	           "                       under our own cgroup; \"/P\": absolute)\n"
	           "  --detach             start the sandbox (no command), print sbx_save()'s\n"
	           "                       JSON on stdout and exit, leaving it running\n"
	           "  --adopt FILE         adopt the sandbox FILE (- for stdin) saved, run the\n"
	           "                       command (if any) in it, then stop it; with --keep\n"
	           "                       leave it running instead\n"
	           "  --sweep              end and remove every sandbox under the state\n"
	           "                       directory except the --keep-id ones; prints how\n"
	           "                       many on stdout\n"
	           "  --keep-id ID         with --sweep: keep this one (repeatable)\n"
	           "  --backend ns|vm      the sandbox backend (default ns)\n"
	           "  --forget FILE        remove what the saved sandbox FILE (- for stdin)\n"
	           "                       left behind once it is gone (123 while it runs)\n"
	           "  -v, --verbose\n"
	           "exit status: the command's (128 + N for signal N, 124 timed out); 0 with\n"
	           "no command; 2 usage; 121 --adopt: the sandbox no longer runs (ESRCH);\n"
	           "122 --adopt, --forget: the saved JSON is malformed (EINVAL); 123\n"
	           "--forget: the sandbox still runs (EBUSY); 125 any other failure of\n"
	           "sluice-sandbox itself.\n");
}

#define EXIT_GONE     121
#define EXIT_BAD_SAVE 122
#define EXIT_BUSY     123
#define EXIT_FAIL     125

/* Placeholder protocol: one shell line in; output, then a marker line
 * "@@sbx-exit:N@@". Quotes argv for sh. */
static int
run_placeholder(int fd, char **argv, int argc, int *status)
{
	char line[65536], buf[8192], *acc = NULL;
	size_t n = 0, alen = 0;
	const char *mark = "\n@@sbx-exit:";

	for (int i = 0; i < argc; i++) {
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s'", i ? " " : "");
		for (const char *c = argv[i]; *c && n + 8 < sizeof(line); c++) {
			if (*c == '\'')
				n += (size_t)snprintf(line + n, sizeof(line) - n, "'\\''");
			else
				line[n++] = *c;
		}
		n += (size_t)snprintf(line + n, sizeof(line) - n, "'");
	}
	if (n + 2 >= sizeof(line))
		return -E2BIG;
	line[n++] = '\n';
	for (size_t off = 0; off < n;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		ssize_t w = write(fd, line + off, n - off);
		if (w < 0 && errno == EAGAIN) {
			poll(&p, 1, 1000);
			continue;
		}
		if (w < 0)
			return -errno;
		off += (size_t)w;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;
		char *m;

		if (poll(&p, 1, 30000) <= 0) {
			free(acc);
			return -ETIMEDOUT;
		}
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EAGAIN)
			continue;
		if (r <= 0) {
			free(acc);
			return -EPIPE;
		}
		acc = realloc(acc, alen + (size_t)r + 1);
		if (!acc)
			return -ENOMEM;
		memcpy(acc + alen, buf, (size_t)r);
		alen += (size_t)r;
		acc[alen] = 0;
		if ((m = strstr(acc, mark)) && strstr(m, "@@\n")) {
			fwrite(acc, 1, (size_t)(m - acc), stdout);
			fflush(stdout);
			*status = atoi(m + strlen(mark));
			free(acc);
			return 0;
		}
	}
}

/* Drives c until *done (a call's callback sets it) or the connection dies. */
static int
drive(struct sbx_agent_conn *c, const bool *done)
{
	sigset_t block, old;
	int rc = 0;

	/* SIGINT/SIGTERM/SIGHUP end the run (the caller stops the sandbox
	 * rather than wait for its command): blocked but while ppoll waits,
	 * so that one arriving between the check and the wait is not missed. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &old);
	while (!*done) {
		struct pollfd p = {.fd = sbx_agent_fd_of(c)};
		struct timespec ts, *tp = NULL;
		int64_t dl, now;

		if (stopping) {
			rc = -EINTR;
			break;
		}
		p.events = sbx_agent_want(c, &dl);
		now = sbx_agent_now_ms();
		if (dl >= 0) {
			int64_t ms = dl <= now ? 0 : dl - now;

			ts.tv_sec = ms / 1000;
			ts.tv_nsec = (ms % 1000) * 1000000;
			tp = &ts;
		}
		if (ppoll(&p, 1, tp, &old) < 0) {
			if (errno != EINTR) {
				rc = -errno;
				break;
			}
			continue;
		}
		rc = sbx_agent_process(c, p.revents, sbx_agent_now_ms());
		if (rc < 0 && !*done)
			break;
		rc = 0;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

struct ping_state {
	bool done, ok;
};

static void
ping_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct ping_state *p = arg;

	(void)k;
	p->done = true;
	p->ok = ev->kind == SBX_AGENT_EV_HELLO &&
	        json_object_get((json_t *)(uintptr_t)ev->json, AGENT_F_UPTIME_MS);
}

/* One ping on stream 0: 0 when the agent answered with a pong. */
static int
ping_sync(struct sbx_agent_conn *c, int timeout_ms)
{
	struct ping_state p = {0};
	struct sbx_agent_call *k;
	int rc;

	if (!(k = sbx_agent_hello(c, true, sbx_agent_now_ms() + timeout_ms, ping_cb, &p, &rc)))
		return rc;
	if ((rc = drive(c, &p.done)) < 0) {
		if (!p.done)
			sbx_agent_call_cancel(k);       /* p is on this stack */
		return rc;
	}
	return p.ok ? 0 : -EIO;
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

struct exec_state {
	bool done;
	int rc, code, sig;
	bool timed_out;
	char *err;
	size_t errsz;
};

/* Output goes to our stdout and stderr as it arrives; the agent gets its
 * credit back after each callback, so nothing piles up here. */
static void
exec_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct exec_state *x = arg;
	int rc;

	switch (ev->kind) {
	case SBX_AGENT_EV_STDOUT:
	case SBX_AGENT_EV_STDERR:
		rc = write_all(ev->kind == SBX_AGENT_EV_STDOUT ? 1 : 2, ev->data, ev->len);
		if (rc < 0) {
			snprintf(x->err, x->errsz, "local write: %s", strerror(-rc));
			x->rc = rc;
			x->done = true;
			sbx_agent_call_cancel(k);
		}
		break;
	case SBX_AGENT_EV_EXIT:
		x->code = ev->exit_code;
		x->sig = ev->signal;
		x->timed_out = ev->timed_out;
		x->done = true;
		break;
	case SBX_AGENT_EV_ERROR:
		x->rc = ev->err > 0 ? -ev->err : -EREMOTEIO;
		snprintf(x->err, x->errsz, "%s: %s", ev->code, ev->message);
		x->done = true;
		break;
	default:
		break;
	}
}

/* Runs w->argv through the agent, streaming its output; *status as a
 * shell would give it (128 + signal; 124 when the timeout fired). */
static int
exec_stream(struct sbx_agent_conn *c, const struct work *w, int *status)
{
	struct exec_state x = {.code = -1};
	struct sbx_agent_call_opts o = {0};
	struct sbx_agent_call *k;
	char err[256];
	struct sbx_agent_exec_req r = {.argv = (const char *const *)w->argv, .env = w->env,
	                               .cwd = w->cwd,
	                               .timeout_ms = w->timeout_ms};
	json_t *j;
	int64_t t0 = sbx_agent_now_ms();
	int rc;

	x.err = err;
	x.errsz = sizeof(err);
	if (!(j = sbx_agent_req_exec(&r, err, sizeof(err)))) {
		fprintf(stderr, "sluice-sandbox: %s\n", err);
		return -EINVAL;
	}
	/* The agent enforces the timeout; this is a backstop. */
	if (w->timeout_ms > 0)
		o.deadline_ms = t0 + w->timeout_ms + 10000;
	if (!(k = sbx_agent_call_start(c, j, &o, exec_cb, &x, &rc))) {
		json_decref(j);
		fprintf(stderr, "sluice-sandbox: exec: %s\n", strerror(-rc));
		return rc;
	}
	json_decref(j);
	rc = drive(c, &x.done);
	if (rc < 0 && !x.done)
		sbx_agent_call_cancel(k);       /* x is on this stack; the command is killed */
	if (rc == 0)
		rc = x.rc;
	if (rc < 0) {
		fprintf(stderr, "sluice-sandbox: exec: %s\n", x.rc ? err : strerror(-rc));
		return rc;
	}
	*status = x.sig ? 128 + x.sig : x.code;
	if (x.timed_out) {
		*status = 124;
		fprintf(stderr, "sluice-sandbox: command timed out after %lld ms\n",
		        (long long)(sbx_agent_now_ms() - t0));
	} else if (x.sig) {
		fprintf(stderr, "sluice-sandbox: command killed by signal %d (%s)\n", x.sig,
		        strsignal(x.sig));
	}
	return 0;
}

static int
put_file(struct sbx_agent_conn *c, const struct xfer *x)
{
	char err[256];
	uint64_t n = 0;
	int fd = open(x->host, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		fprintf(stderr, "sluice-sandbox: put %s: %s\n", x->host, strerror(errno));
		return -errno;
	}
	rc = sbx_agent_write_sync(c, x->guest, 0644, fd, 600000, &n, err, sizeof(err));
	close(fd);
	if (rc < 0)
		fprintf(stderr, "sluice-sandbox: put %s: %s\n", x->guest, err);
	else if (verbose)
		fprintf(stderr, "sluice-sandbox: put %s -> %s: %llu bytes\n", x->host, x->guest,
		        (unsigned long long)n);
	return rc;
}

static int
get_file(struct sbx_agent_conn *c, const struct xfer *x)
{
	char err[256];
	uint64_t n = 0;
	int fd = open(x->host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), rc;

	if (fd < 0) {
		fprintf(stderr, "sluice-sandbox: get %s: %s\n", x->host, strerror(errno));
		return -errno;
	}
	rc = sbx_agent_read_sync(c, x->guest, fd, 600000, &n, err, sizeof(err));
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		fprintf(stderr, "sluice-sandbox: get %s: %s\n", x->guest, err);
	else if (verbose)
		fprintf(stderr, "sluice-sandbox: get %s -> %s: %llu bytes\n", x->guest, x->host,
		        (unsigned long long)n);
	return rc;
}

/* Connects to the agent behind fd (the handle keeps fd; we use a dup) and
 * waits for its hello: *ready_ms is then the time since t0. */
static int
agent_connect(int fd, struct sbx_agent_conn **out, double *ready_ms, double t0)
{
	struct sbx_agent_conn *c;
	char err[256];
	int dfd = dup(fd), rc;

	if (dfd < 0)
		return -errno;
	c = sbx_agent_conn_new(dfd);
	if (!c)
		return -ENOMEM;
	rc = sbx_agent_hello_sync(c, 10000, NULL, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sluice-sandbox: agent hello: %s\n", err);
		sbx_agent_conn_free(c);
		return rc;
	}
	*ready_ms = now_ms() - t0;
	*out = c;
	return 0;
}

/* The puts, the command, the gets. */
static int
run_work(struct sbx_agent_conn *c, const struct work *w, int *status)
{
	int rc;

	*status = 0;
	for (int i = 0; i < w->nputs; i++)
		if ((rc = put_file(c, &w->puts[i])) < 0)
			return rc;
	if (w->argv[0]) {
		fflush(stdout);
		if ((rc = exec_stream(c, w, status)) < 0)
			return rc;
	}
	for (int i = 0; i < w->ngets; i++)
		if ((rc = get_file(c, &w->gets[i])) < 0)
			return rc;
	return 0;
}

/* --detach: the sandbox's record, one line on stdout. */
static int
print_saved(const struct sbx *s)
{
	json_t *j = sbx_save(s);
	char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int rc = 0;

	if (!txt) {
		fprintf(stderr, "sluice-sandbox: save: out of memory\n");
		rc = -ENOMEM;
	} else if (printf("%s\n", txt) < 0 || fflush(stdout) != 0) {
		fprintf(stderr, "sluice-sandbox: stdout: %s\n", strerror(errno));
		rc = -EIO;
	}
	free(txt);
	json_decref(j);
	return rc;
}

/* --adopt FILE: adopt, run w, stop (or leave with keep). Returns 0 with
 * *status the command's, or an exit status of ours. */
static int
adopt_run(const struct sbx_backend *b, const char *file, const struct work *w, bool keep,
          int *status)
{
	json_error_t je;
	json_t *saved;
	struct sbx *s;
	struct sbx_agent_conn *c = NULL;
	char err[512] = "";
	double ready;
	int rc, ret = 0;

	*status = 0;
	saved = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);
	if (!saved) {
		fprintf(stderr, "sluice-sandbox: adopt: %s: %s (line %d)\n", file, je.text,
		        je.line);
		return EXIT_BAD_SAVE;
	}
	rc = sbx_adopt(b, saved, &s, err, sizeof(err));
	json_decref(saved);
	if (rc < 0) {
		fprintf(stderr, "sluice-sandbox: adopt: %s\n", err);
		return rc == -ESRCH ? EXIT_GONE : rc == -EINVAL ? EXIT_BAD_SAVE : EXIT_FAIL;
	}
	if (verbose)
		fprintf(stderr, "sluice-sandbox: adopted %s\n", sbx_id(s));
	rc = agent_connect(sbx_agent_fd(s), &c, &ready, now_ms());
	if (rc == 0)
		rc = run_work(c, w, status);
	if (rc < 0) {
		fprintf(stderr, "sluice-sandbox: run: %s\n", strerror(-rc));
		ret = EXIT_FAIL;
	}
	sbx_agent_conn_free(c);
	if (keep) {
		sbx_release(s);
		return ret;
	}
	if (sbx_stop(s, 1000, err, sizeof(err)) < 0) {
		fprintf(stderr, "sluice-sandbox: stop: %s\n", err);
		ret = EXIT_FAIL;
	}
	sbx_free(s);
	return ret;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* --park: parks every sandbox; 0, or -1 (said why) when one could not. */
static int
park_all(struct sbx **boxes, int n)
{
	char err[512];
	double t0 = now_ms();

	for (int i = 0; i < n; i++) {
		if (boxes[i] && sbx_park(boxes[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-sandbox: park: %s\n", err);
			return -1;
		}
	}
	fprintf(stderr, "sluice-sandbox: parked %d in %.1f ms\n", n, now_ms() - t0);
	return 0;
}

/* --park: resumes each one as a claim does (unpark, then the agent's
 * time and entropy) and prints that latency's median, p99 and largest. */
static int
unpark_all(struct sbx **boxes, struct sbx_agent_conn **conns, int n)
{
	double *lat = calloc((size_t)n ? (size_t)n : 1, sizeof(*lat)), sum = 0;
	char err[512];
	int m = 0, rc = 0;

	if (!lat)
		return -1;
	for (int i = 0; i < n && !stopping; i++) {
		double t0 = now_ms();

		if (!boxes[i] || !conns[i])
			continue;
		if (sbx_unpark(boxes[i], err, sizeof(err)) < 0 ||
		    sbx_agent_refresh_sync(conns[i], 5000, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-sandbox: unpark: %s\n", err);
			rc = -1;
			break;
		}
		lat[m] = now_ms() - t0;
		sum += lat[m++];
	}
	if (m) {
		qsort(lat, (size_t)m, sizeof(*lat), cmp_double);
		fprintf(stderr,
		        "sluice-sandbox: %d resumed, unpark-to-configured mean %.1f ms, "
		        "median %.1f ms, p99 %.1f ms, max %.1f ms\n",
		        m, sum / m, m % 2 ? lat[m / 2] : (lat[m / 2 - 1] + lat[m / 2]) / 2,
		        lat[(size_t)((m * 99 + 99) / 100) - 1], lat[m - 1]);
	}
	free(lat);
	return rc;
}

int
main(int argc, char **argv)
{
	enum {
		O_CACHE = 256,
		O_STATE,
		O_IDMAP_BASE,
		O_IDMAP_RANGES,
		O_AGENT,
		O_PLACEHOLDER,
		O_ID,
		O_CPUS,
		O_HOST,
		O_NETNS,
		O_PEER,
		O_ADDR,
		O_GW,
		O_MTU,
		O_REPEAT,
		O_HOLD,
		O_FILE,
		O_TIMEOUT,
		O_TIMEOUT_MS,
		O_PUT,
		O_GET,
		O_LATENCY,
		O_KEEP,
		O_PARK,
		O_WAIT_STDIN,
		O_PEER_ADDR,
		O_CG_PARENT,
		O_DETACH,
		O_ADOPT,
		O_SWEEP,
		O_KEEP_ID,
		O_FORGET,
		O_BACKEND
	};
	static const struct option opts[] = {{"template", 1, 0, 't'},
	                                     {"cache", 1, 0, O_CACHE},
	                                     {"state", 1, 0, O_STATE},
	                                     {"idmap-base", 1, 0, O_IDMAP_BASE},
	                                     {"idmap-ranges", 1, 0, O_IDMAP_RANGES},
	                                     {"agent", 1, 0, O_AGENT},
	                                     {"placeholder", 0, 0, O_PLACEHOLDER},
	                                     {"id", 1, 0, O_ID},
	                                     {"memory", 1, 0, 'm'},
	                                     {"cpus", 1, 0, O_CPUS},
	                                     {"pids", 1, 0, 'p'},
	                                     {"hostname", 1, 0, O_HOST},
	                                     {"env", 1, 0, 'e'},
	                                     {"cwd", 1, 0, 'C'},
	                                     {"bind", 1, 0, 'b'},
	                                     {"file", 1, 0, O_FILE},
	                                     {"netns", 1, 0, O_NETNS},
	                                     {"peer", 1, 0, O_PEER},
	                                     {"addr", 1, 0, O_ADDR},
	                                     {"gw", 1, 0, O_GW},
	                                     {"peer-addr", 1, 0, O_PEER_ADDR},
	                                     {"mtu", 1, 0, O_MTU},
	                                     {"repeat", 1, 0, O_REPEAT},
	                                     {"hold", 1, 0, O_HOLD},
	                                     {"timeout", 1, 0, O_TIMEOUT},
	                                     {"timeout-ms", 1, 0, O_TIMEOUT_MS},
	                                     {"put", 1, 0, O_PUT},
	                                     {"get", 1, 0, O_GET},
	                                     {"latency", 0, 0, O_LATENCY},
	                                     {"keep", 0, 0, O_KEEP},
	                                     {"park", 0, 0, O_PARK},
	                                     {"wait-stdin", 0, 0, O_WAIT_STDIN},
	                                     {"cgroup-parent", 1, 0, O_CG_PARENT},
	                                     {"detach", 0, 0, O_DETACH},
	                                     {"adopt", 1, 0, O_ADOPT},
	                                     {"sweep", 0, 0, O_SWEEP},
	                                     {"keep-id", 1, 0, O_KEEP_ID},
	                                     {"forget", 1, 0, O_FORGET},
	                                     {"backend", 1, 0, O_BACKEND},
	                                     {"verbose", 0, 0, 'v'},
	                                     {"help", 0, 0, 'h'},
	                                     {0, 0, 0, 0}};
	struct sbx_init_opts io = {.log = log_stderr};
	struct sbx_template_req treq = {.kind = SBX_TEMPLATE_BUSYBOX};
	struct sbx_spec spec = {.net.peer_netns_fd = -1};
	struct sbx_mount mounts[16];
	struct sbx_file files[16];
	const char *env[64] = {0}; /* NULL-terminated for the exec request */
	char idbuf[64], peerbuf[16], agentbuf[PATH_MAX], err[512];
	const struct sbx_backend *b;
	struct sbx_template *tpl = NULL;
	bool placeholder = false, print_latency = false, keep = false, wait_stdin = false;
	bool park = false;
	int repeat = 1, hold = 0, timeout_ms = 0, c, status = 0, rc, started = 0, failed = 0;
	double lat_sum = 0, lat_max = 0, *lat, t_start;
	struct work w = {0};
	struct sbx **boxes;
	struct sbx_agent_conn **conns;
	bool detach = false, sweep = false;
	const char *adopt = NULL, *forget = NULL, *keep_ids[64], *backend = "ns";
	size_t nkeep_ids = 0;

	snprintf(idbuf, sizeof(idbuf), "sbx-%d", (int)getpid());
	snprintf(peerbuf, sizeof(peerbuf), "sbx%d", (int)getpid());
	spec.id = idbuf;
	while ((c = getopt_long(argc, argv, "+t:m:p:e:C:b:vh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (strcmp(optarg, "busybox") == 0)
				treq.kind = SBX_TEMPLATE_BUSYBOX;
			else if (strcmp(optarg, "host") == 0)
				treq.kind = SBX_TEMPLATE_HOST;
			else {
				treq.kind = SBX_TEMPLATE_DIR;
				treq.dir = optarg;
			}
			break;
		case O_CACHE:
			io.cache_dir = optarg;
			break;
		case O_STATE:
			io.state_dir = optarg;
			break;
		case O_IDMAP_BASE:
		case O_IDMAP_RANGES: {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || v == 0 || v > UINT32_MAX) {
				fprintf(stderr, "sluice-sandbox: --%s %s: want a number 1..%u\n",
					c == O_IDMAP_BASE ? "idmap-base" : "idmap-ranges", optarg,
					UINT32_MAX);
				return 2;
			}
			if (c == O_IDMAP_BASE)
				io.idmap_base = (uint32_t)v;
			else
				io.idmap_ranges = (uint32_t)v;
			break;
		}
		case O_AGENT:
			io.agent_path = optarg;
			break;
		case O_PLACEHOLDER:
			placeholder = true;
			break;
		case O_ID:
			spec.id = optarg;
			break;
		case 'm':
			spec.limits.memory_mb = (uint32_t)atoi(optarg);
			break;
		case O_CPUS:
			spec.limits.cpus_milli = (uint32_t)(atof(optarg) * 1000);
			break;
		case 'p':
			spec.limits.pids = (uint32_t)atoi(optarg);
			break;
		case O_HOST:
			spec.hostname = optarg;
			break;
		case 'e':
			if (spec.nenv < 63)
				env[spec.nenv++] = optarg;
			break;
		case 'C':
			spec.cwd = optarg;
			break;
		case 'b': {
			char *d = strchr(optarg, ':'), *ro;
			if (!d || spec.nmounts >= 16) {
				usage(stderr);
				return 2;
			}
			*d++ = 0;
			ro = strchr(d, ':');
			if (ro)
				*ro++ = 0;
			mounts[spec.nmounts++] =
			    (struct sbx_mount){.source = optarg,
			                       .target = d,
			                       .read_only = ro && strcmp(ro, "ro") == 0};
			spec.mounts = mounts;
			break;
		}
		case O_FILE: {
			char *eq = strchr(optarg, '=');
			if (!eq || spec.nfiles >= 16) {
				usage(stderr);
				return 2;
			}
			*eq++ = 0;
			files[spec.nfiles++] =
			    (struct sbx_file){.path = optarg, .data = eq, .len = strlen(eq)};
			spec.files = files;
			break;
		}
		case O_NETNS:
			spec.net.kind = SBX_NET_LINK;
			spec.net.peer_netns = optarg;
			break;
		case O_PEER:
			snprintf(peerbuf, sizeof(peerbuf), "%s", optarg);
			break;
		case O_ADDR:
			spec.net.address = optarg;
			break;
		case O_GW:
			spec.net.gateway = optarg;
			break;
		case O_PEER_ADDR:
			spec.net.peer_address = optarg;
			break;
		case O_MTU:
			spec.net.mtu = (uint32_t)atoi(optarg);
			break;
		case O_REPEAT:
			repeat = atoi(optarg);
			break;
		case O_HOLD:
			hold = atoi(optarg);
			break;
		case O_TIMEOUT:
			timeout_ms = atoi(optarg) * 1000;
			break;
		case O_TIMEOUT_MS:
			timeout_ms = atoi(optarg);
			break;
		case O_PUT:
		case O_GET: {
			/* HOST:GUEST for put, GUEST:HOST for get */
			char *d = strchr(optarg, ':');
			struct xfer *x = c == O_PUT ? &w.puts[w.nputs] : &w.gets[w.ngets];
			if (!d || (c == O_PUT ? w.nputs : w.ngets) >= XFER_MAX) {
				usage(stderr);
				return 2;
			}
			*d++ = 0;
			x->host = c == O_PUT ? optarg : d;
			x->guest = c == O_PUT ? d : optarg;
			if (c == O_PUT)
				w.nputs++;
			else
				w.ngets++;
			break;
		}
		case O_LATENCY:
			print_latency = true;
			break;
		case O_KEEP:
			keep = true;
			break;
		case O_PARK:
			park = true;
			break;
		case O_WAIT_STDIN:
			wait_stdin = true;
			break;
		case O_CG_PARENT:
			io.cgroup_parent = optarg;
			break;
		case O_DETACH:
			detach = true;
			break;
		case O_ADOPT:
			adopt = optarg;
			break;
		case O_SWEEP:
			sweep = true;
			break;
		case O_BACKEND:
			backend = optarg;
			break;
		case O_FORGET:
			forget = optarg;
			break;
		case O_KEEP_ID:
			if (nkeep_ids >= 64) {
				usage(stderr);
				return 2;
			}
			keep_ids[nkeep_ids++] = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	spec.net.peer_ifname = peerbuf;
	spec.env = env;
	if (placeholder) {
		io.agent_path = NULL;
	} else if (!io.agent_path) {
		/* build/sandbox/sluice-sandbox -> build/agent/sluice-agent */
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n > 0) {
			self[n] = 0;
			snprintf(agentbuf, sizeof(agentbuf), "%s/../agent/sluice-agent",
			         dirname(self));
			if (access(agentbuf, X_OK) == 0)
				io.agent_path = agentbuf;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if ((detach + sweep + (adopt != NULL) + (forget != NULL)) > 1 || (nkeep_ids && !sweep) ||
	    (forget && optind < argc) || (detach && optind < argc) || (sweep && optind < argc) ||
	    (detach && repeat != 1)) {
		fprintf(stderr, "sluice-sandbox: --detach, --adopt and --sweep go alone; "
		                "--detach and --sweep take no command; --keep-id goes with "
		                "--sweep\n");
		return 2;
	}
	if (park && !keep) {
		fprintf(stderr, "sluice-sandbox: --park goes with --repeat N --keep\n");
		return 2;
	}
	if ((detach || adopt) && !io.agent_path) {
		fprintf(stderr, "sluice-sandbox: --detach and --adopt need the agent\n");
		return 2;
	}
	if (sbx_init(&io, err, sizeof(err)) < 0) {
		fprintf(stderr, "sluice-sandbox: %s\n", err);
		return 125;
	}
	if (!(b = sbx_backend_get(backend))) {
		fprintf(stderr,
		        "sluice-sandbox: backend \"%s\" is unknown or cannot run here (vm needs "
		        "qemu-system-x86_64 and vmlinux + initramfs.cpio in $SLUICE_VM_DIR, "
		        "<agent dir>/../vm or /usr/lib/sluice/vm)\n",
		        backend);
		return 125;
	}
	if (sweep) {
		rc = sbx_sweep(b, keep_ids, nkeep_ids, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "sluice-sandbox: sweep: %s\n", err);
			sbx_fini();
			return EXIT_FAIL;
		}
		printf("%d\n", rc);
		sbx_fini();
		return 0;
	}
	if (forget) {
		json_error_t je;
		json_t *saved = strcmp(forget, "-") == 0 ? json_loadf(stdin, 0, &je)
		                                         : json_load_file(forget, 0, &je);
		if (!saved) {
			fprintf(stderr, "sluice-sandbox: forget: %s: %s\n", forget, je.text);
			sbx_fini();
			return EXIT_BAD_SAVE;
		}
		rc = sbx_forget(b, saved, err, sizeof(err));
		json_decref(saved);
		sbx_fini();
		if (rc < 0)
			fprintf(stderr, "sluice-sandbox: forget: %s\n", err);
		return rc == 0         ? 0
		       : rc == -EBUSY  ? EXIT_BUSY
		       : rc == -EINVAL ? EXIT_BAD_SAVE
		                       : EXIT_FAIL;
	}
	if (adopt) {
		w.argv = argv + optind;
		w.env = env;
		w.cwd = spec.cwd;
		w.timeout_ms = timeout_ms;
		rc = adopt_run(b, adopt, &w, keep, &status);
		sbx_fini();
		return rc ? rc : status;
	}
	if ((rc = sbx_template_ensure(b, &treq, &tpl, err, sizeof(err))) < 0) {
		fprintf(stderr, "sluice-sandbox: %s\n", err);
		return 125;
	}
	if (repeat < 1)
		repeat = 1;
	if (!io.agent_path && (w.nputs || w.ngets || keep)) {
		fprintf(stderr, "sluice-sandbox: --put, --get and --keep need the agent\n");
		return 2;
	}
	w.argv = argv + optind;
	w.env = env;
	w.cwd = spec.cwd;
	w.timeout_ms = timeout_ms;
	lat = calloc((size_t)repeat, sizeof(*lat));
	boxes = calloc((size_t)repeat, sizeof(*boxes));
	conns = calloc((size_t)repeat, sizeof(*conns));
	if (!lat || !boxes || !conns) {
		fprintf(stderr, "sluice-sandbox: out of memory\n");
		return 125;
	}
	if (keep) {
		/* Our side holds three fds per sandbox (agent stream, its dup,
		 * pidfd): raise our own soft limit if it is short. */
		struct rlimit rl;
		rlim_t need = (rlim_t)repeat * 3 + 64;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
			rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			if (rl.rlim_cur < need)
				fprintf(stderr,
				        "sluice-sandbox: warning: RLIMIT_NOFILE hard limit %llu "
				        "< %llu fds needed\n",
				        (unsigned long long)rl.rlim_max, (unsigned long long)need);
		}
	}
	/* A signal ends the run cleanly: no sandbox outlives us. */
	{
		struct sigaction sa = {.sa_handler = on_signal};
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
	}
	t_start = now_ms();
	for (int i = 0; i < repeat && !stopping; i++) {
		struct sbx *s;
		double t0 = now_ms(), ready = 0;
		char rid[80];
		const char *id0 = spec.id;

		if (repeat > 1) {
			snprintf(rid, sizeof(rid), "%.40s-%d", id0, i);
			spec.id = rid;
		}
		rc = sbx_start(b, tpl, &spec, &s, err, sizeof(err));
		spec.id = id0;
		if (rc < 0) {
			fprintf(stderr, "sluice-sandbox: start %d of %d: %s\n", i + 1, repeat, err);
			failed = 1;
			break;
		}
		boxes[i] = s;
		started = i + 1;
		if (io.agent_path && detach) {
			/* The hello proves the agent runs, so its socket exists. */
			rc = agent_connect(sbx_agent_fd(s), &conns[i], &ready, t0);
			if (rc == 0 && (rc = print_saved(s)) == 0) {
				sbx_agent_conn_free(conns[i]);
				sbx_release(s);
				free(lat);
				free(boxes);
				free(conns);
				sbx_template_free(b, tpl);
				sbx_fini();
				return 0;
			}
		} else if (io.agent_path) {
			rc = agent_connect(sbx_agent_fd(s), &conns[i], &ready, t0);
			if (rc == 0)
				rc = run_work(conns[i], &w, &status);
		} else {
			char *t[] = {"true", NULL};
			rc = run_placeholder(sbx_agent_fd(s), t, 1, &status);
			ready = now_ms() - t0;
			if (rc == 0 && optind < argc)
				rc = run_placeholder(sbx_agent_fd(s), argv + optind, argc - optind,
				                     &status);
		}
		if (rc < 0)
			fprintf(stderr, "sluice-sandbox: run: %s\n", strerror(-rc));
		lat[i] = ready;
		lat_sum += ready;
		if (ready > lat_max)
			lat_max = ready;
		if (print_latency)
			fprintf(stderr, "sluice-sandbox: ready %d %.3f ms\n", i, ready);
		if (rc < 0)
			failed = 1;
		if (keep && !failed)
			continue;
		if (hold)
			sleep((unsigned)hold);
		sbx_agent_conn_free(conns[i]);
		conns[i] = NULL;
		if (sbx_stop(s, 1000, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-sandbox: stop: %s\n", err);
			failed = 1;
		}
		sbx_free(s);
		boxes[i] = NULL;
		if (failed)
			break;
	}
	if (keep) {
		int alive = 0, answered = 0;
		double t1 = now_ms(), t2;

		for (int i = 0; i < started; i++)
			if (boxes[i] && conns[i]) {
				alive++;
				if (ping_sync(conns[i], 5000) == 0)
					answered++;
			}
		t2 = now_ms();
		fprintf(stderr,
		        "sluice-sandbox: %d alive at once (started in %.0f ms); "
		        "%d of %d agents answered a ping (%.1f ms)\n",
		        alive, t1 - t_start, answered, alive, t2 - t1);
		if (answered != repeat)
			failed = 1;
		if (park && !failed && park_all(boxes, started) < 0)
			failed = 1;
		if (hold && !stopping)
			sleep((unsigned)hold);
		if (wait_stdin && !stopping) {
			char buf[256];
			fprintf(stderr, "sluice-sandbox: holding them until stdin closes\n");
			while (!stopping) {
				ssize_t n = read(0, buf, sizeof(buf));
				if (n == 0 || (n < 0 && errno != EINTR))
					break;
			}
		}
		if (park && !failed && unpark_all(boxes, conns, started) < 0)
			failed = 1;
		t1 = now_ms();
		for (int i = 0; i < started; i++) {
			sbx_agent_conn_free(conns[i]);
			conns[i] = NULL;
			if (!boxes[i])
				continue;
			if (sbx_stop(boxes[i], 1000, err, sizeof(err)) < 0) {
				fprintf(stderr, "sluice-sandbox: stop: %s\n", err);
				failed = 1;
			}
			sbx_free(boxes[i]);
			boxes[i] = NULL;
		}
		fprintf(stderr, "sluice-sandbox: stopped %d in %.0f ms\n", alive, now_ms() - t1);
	}
	if (stopping) {
		fprintf(stderr, "sluice-sandbox: interrupted\n");
		failed = 1;
	}
	if (started && (repeat > 1 || verbose)) {
		qsort(lat, (size_t)started, sizeof(*lat), cmp_double);
		/* nearest rank: p99 of 50 is the largest */
		fprintf(stderr,
		        "sluice-sandbox: %d sandbox(es), start-to-ready "
		        "mean %.1f ms, max %.1f ms, median %.1f ms, p99 %.1f ms\n",
		        started, lat_sum / started, lat_max,
		        started % 2 ? lat[started / 2]
		                    : (lat[started / 2 - 1] + lat[started / 2]) / 2,
		        lat[(size_t)((started * 99 + 99) / 100) - 1]);
	}
	free(lat);
	free(boxes);
	free(conns);
	if (failed) {
		sbx_template_free(b, tpl);
		sbx_fini();
		return 125;
	}
	sbx_template_free(b, tpl);
	sbx_fini();
	return status;
}

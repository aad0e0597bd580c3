/* cli.c: sluice-sandbox, a debugging and test tool. Starts an `ns`
 * sandbox from a template, runs one command in it (through sluice-agent,
 * or the placeholder PID 1 when there is no agent), prints its output,
 * stops the sandbox and exits with the command's status.
 *
 *   sluice-sandbox [options] [--] [COMMAND...]
 *
 * With --repeat N it starts and stops N sandboxes in turn (running the
 * command in each) and prints the start-to-ready latency. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "sandbox.h"

static int verbose;

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
	           "  --timeout SECONDS    command timeout (agent only)\n"
	           "  --repeat N           start, run, stop N sandboxes; print latency\n"
	           "  --hold SECONDS       keep the sandbox running this long after the\n"
	           "                       command (for inspection)\n"
	           "  -v, --verbose\n");
}

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

static int
run_agent(int fd, char **argv, const char *const *env, const char *cwd, int timeout_s, int *status,
          double *ready_ms, double t0)
{
	struct sbx_agent_conn *c;
	struct sbx_agent_exec_req req = {0};
	struct sbx_agent_exec_res res = {0};
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
	if (ready_ms)
		*ready_ms = now_ms() - t0;
	if (!argv[0]) {
		sbx_agent_conn_free(c);
		*status = 0;
		return 0;
	}
	req.argv = (const char *const *)argv;
	req.env = env;
	req.cwd = cwd;
	req.timeout_ms = timeout_s * 1000;
	rc = sbx_agent_exec_sync(c, &req, &res, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sluice-sandbox: exec: %s\n", err);
		sbx_agent_conn_free(c);
		return rc;
	}
	if (res.out_len)
		fwrite(res.out, 1, res.out_len, stdout);
	fflush(stdout);
	if (res.err_len)
		fwrite(res.err, 1, res.err_len, stderr);
	*status = res.signal ? 128 + res.signal : res.exit_code;
	if (res.timed_out)
		*status = 124;
	sbx_agent_exec_res_fini(&res);
	sbx_agent_conn_free(c);
	return 0;
}

int
main(int argc, char **argv)
{
	enum {
		O_CACHE = 256,
		O_STATE,
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
		O_TIMEOUT
	};
	static const struct option opts[] = {{"template", 1, 0, 't'},
	                                     {"cache", 1, 0, O_CACHE},
	                                     {"state", 1, 0, O_STATE},
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
	                                     {"mtu", 1, 0, O_MTU},
	                                     {"repeat", 1, 0, O_REPEAT},
	                                     {"hold", 1, 0, O_HOLD},
	                                     {"timeout", 1, 0, O_TIMEOUT},
	                                     {"verbose", 0, 0, 'v'},
	                                     {"help", 0, 0, 'h'},
	                                     {0, 0, 0, 0}};
	struct sbx_init_opts io = {.log = log_stderr};
	struct sbx_template_req treq = {.kind = SBX_TEMPLATE_BUSYBOX};
	struct sbx_spec spec = {.net.peer_netns_fd = -1};
	struct sbx_mount mounts[16];
	struct sbx_file files[16];
	const char *env[64];
	char idbuf[64], peerbuf[16], agentbuf[PATH_MAX], err[512];
	const struct sbx_backend *b;
	struct sbx_template *tpl = NULL;
	bool placeholder = false;
	int repeat = 1, hold = 0, timeout_s = 0, c, status = 0, rc;
	double lat_sum = 0, lat_max = 0;

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
			timeout_s = atoi(optarg);
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
	if (sbx_init(&io, err, sizeof(err)) < 0 || !(b = sbx_backend_get("ns"))) {
		fprintf(stderr, "sluice-sandbox: %s\n", err);
		return 125;
	}
	if ((rc = sbx_template_ensure(b, &treq, &tpl, err, sizeof(err))) < 0) {
		fprintf(stderr, "sluice-sandbox: %s\n", err);
		return 125;
	}
	for (int i = 0; i < repeat; i++) {
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
			fprintf(stderr, "sluice-sandbox: %s\n", err);
			sbx_template_free(b, tpl);
			return 125;
		}
		if (io.agent_path) {
			rc = run_agent(sbx_agent_fd(s), argv + optind, env, spec.cwd, timeout_s,
			               &status, &ready, t0);
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
		lat_sum += ready;
		if (ready > lat_max)
			lat_max = ready;
		if (hold)
			sleep((unsigned)hold);
		if (sbx_stop(s, 1000, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-sandbox: stop: %s\n", err);
			rc = -EIO;
		}
		sbx_free(s);
		if (rc < 0) {
			sbx_template_free(b, tpl);
			return 125;
		}
	}
	if (repeat > 1 || verbose)
		fprintf(stderr,
		        "sluice-sandbox: %d sandbox(es), start-to-ready "
		        "mean %.1f ms, max %.1f ms\n",
		        repeat, lat_sum / repeat, lat_max);
	sbx_template_free(b, tpl);
	sbx_fini();
	return status;
}

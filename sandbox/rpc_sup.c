/* rpc_sup.c: one supervisor of the `rpc` backend (docs/backend-rpc.md):
 * the registry of instances, starting the command (one end of a
 * socketpair as fd 3, SLUICE_RPC_FD=3) or connecting to the socket,
 * `capabilities` on every new connection, and restarts with back-off
 * when it dies. No thread: a connection is (re)made by the next call
 * that needs it, or by sbx_rpc_backend_check() (the pool manager's
 * tick). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rpc-int.h"
#include "rpc_frame.h"
#include "sandbox.h"

extern char **environ;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rpc_be *reg;

int64_t
sbx_rpc_backoff_ms(unsigned fails)
{
	int64_t ms = RPC_BACKOFF_MIN_MS;

	for (unsigned i = 1; i < fails && ms < RPC_BACKOFF_MAX_MS; i++)
		ms *= 2;
	return ms > RPC_BACKOFF_MAX_MS ? RPC_BACKOFF_MAX_MS : ms;
}

/* key's JSON into be's argv or sock: 0 or -EINVAL. */
static int
parse_key(struct rpc_be *be, const char *key, char *err, size_t errsz)
{
	json_t *j = json_loads(key, 0, NULL), *cmd, *sock;
	size_t n;
	int rc = 0;

	if (!json_is_object(j) || json_object_size(j) != 1) {
		json_decref(j);
		return sbx_fail(err, errsz, -EINVAL, "rpc: a supervisor is {\"command\": [...]} "
		                "or {\"socket\": PATH}");
	}
	cmd = json_object_get(j, "command");
	sock = json_object_get(j, "socket");
	if (json_is_string(sock)) {
		const char *s = json_string_value(sock);

		if (s[0] != '/' || strlen(s) >= sizeof(be->sock))
			rc = sbx_fail(err, errsz, -EINVAL, "rpc: supervisor socket %s: want an "
			              "absolute path under 108 bytes", s);
		else
			snprintf(be->sock, sizeof(be->sock), "%s", s);
	} else if (json_is_array(cmd) && (n = json_array_size(cmd)) > 0 && n <= 64) {
		be->argv = sbx_calloc(n + 1, sizeof(char *));
		for (size_t i = 0; be->argv && i < n; i++) {
			const char *a = json_string_value(json_array_get(cmd, i));

			if (!a || (i == 0 && a[0] != '/')) {
				rc = sbx_fail(err, errsz, -EINVAL, "rpc: supervisor command: want "
				              "[ABSOLUTE PATH, ARGS...]");
				break;
			}
			be->argv[i] = sbx_strdup(a);
		}
		if (!be->argv)
			rc = sbx_fail(err, errsz, -ENOMEM, "rpc: out of memory");
	} else {
		rc = sbx_fail(err, errsz, -EINVAL, "rpc: a supervisor is {\"command\": [PATH, "
		              "ARGS...]} or {\"socket\": PATH}");
	}
	json_decref(j);
	return rc;
}

struct rpc_be *
sbx_rpc_be_for(const char *key, char *err, size_t errsz)
{
	struct rpc_be *be;

	if (!key || strlen(key) >= RPC_KEY_MAX) {
		sbx_fail(err, errsz, -EINVAL, "rpc: supervisor description too long");
		return NULL;
	}
	pthread_mutex_lock(&reg_mu);
	for (be = reg; be; be = be->next)
		if (strcmp(be->key, key) == 0)
			goto out;
	be = sbx_calloc(1, sizeof(*be));
	if (!be) {
		sbx_fail(err, errsz, -ENOMEM, "rpc: out of memory");
		goto out;
	}
	snprintf(be->key, sizeof(be->key), "%s", key);
	if (parse_key(be, key, err, errsz) < 0) {
		for (size_t i = 0; be->argv && be->argv[i]; i++)
			free(be->argv[i]);
		free(be->argv);
		free(be);
		be = NULL;
		goto out;
	}
	be->base.ops = &sbx_rpc_ops;
	pthread_mutex_init(&be->mu, NULL);
	snprintf(be->why, sizeof(be->why), "not started yet");
	be->next = reg;
	reg = be;
out:
	pthread_mutex_unlock(&reg_mu);
	return be;
}

const struct sbx_backend *
sbx_rpc_backend_get(const struct sbx_rpc_conf *c, char *err, size_t errsz)
{
	json_t *j;
	char *key;
	struct rpc_be *be;

	if (!c || (!c->socket) == (c->argc == 0)) {
		sbx_fail(err, errsz, -EINVAL, "rpc: give exactly one of a command and a socket");
		return NULL;
	}
	if (c->socket) {
		j = json_pack("{s:s}", "socket", c->socket);
	} else {
		json_t *a = json_array();

		for (size_t i = 0; a && i < c->argc; i++)
			json_array_append_new(a, json_string(c->argv[i]));
		j = json_pack("{s:o}", "command", a);
	}
	key = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!key) {
		sbx_fail(err, errsz, -ENOMEM, "rpc: out of memory");
		return NULL;
	}
	be = sbx_rpc_be_for(key, err, errsz);
	free(key);
	return be ? &be->base : NULL;
}

/* ---- the supervisor's process and connection ----------------------------- */

/* Ends the command-form supervisor if it still runs, and reaps it. */
static void
reap_child(struct rpc_be *be)
{
	if (be->pid <= 0)
		return;
	if (waitpid(be->pid, NULL, WNOHANG) == 0) {
		kill(be->pid, SIGTERM);
		for (int i = 0; i < 100; i++) {
			if (waitpid(be->pid, NULL, WNOHANG) != 0)
				goto done;
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		}
		kill(be->pid, SIGKILL);
		waitpid(be->pid, NULL, 0);
	}
done:
	be->pid = 0;
}

/* Starts the command with one end of a socketpair as fd 3: our end, or
 * -errno. Only async-signal-safe calls between fork and exec. */
static int
spawn(struct rpc_be *be, char *err, size_t errsz)
{
	int sv[2], devnull;
	size_t n = 0, k = 0;
	char **envp;
	sigset_t none;
	pid_t pid;

	while (environ[n])
		n++;
	envp = sbx_calloc(n + 2, sizeof(char *));
	if (!envp)
		return sbx_fail(err, errsz, -ENOMEM, "rpc: out of memory");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "SLUICE_RPC_FD=", 14) != 0)
			envp[k++] = environ[i];
	envp[k++] = "SLUICE_RPC_FD=3";
	envp[k] = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(envp);
		return sbx_fail(err, errsz, -errno, "rpc: socketpair: %s", strerror(errno));
	}
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigemptyset(&none);
	pid = fork();
	if (pid == 0) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		sigaction(SIGPIPE, &dfl, NULL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		if (devnull >= 0)
			dup2(devnull, 0);
		if (sv[1] == 3) {
			fcntl(3, F_SETFD, 0);
		} else if (dup2(sv[1], 3) < 0) {
			_exit(126);
		}
		syscall(SYS_close_range, 4u, ~0u, 0u);
		execve(be->argv[0], be->argv, envp);
		_exit(127);
	}
	free(envp);
	if (devnull >= 0)
		close(devnull);
	close(sv[1]);
	if (pid < 0) {
		int e = errno;

		close(sv[0]);
		return sbx_fail(err, errsz, -e, "rpc: fork: %s", strerror(e));
	}
	be->pid = pid;
	sbx_log(SBX_LOG_INFO, "rpc: supervisor %s started (pid %d)", be->argv[0], (int)pid);
	return sv[0];
}

static int
connect_sock(struct rpc_be *be, char *err, size_t errsz)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return sbx_fail(err, errsz, -errno, "rpc: socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", be->sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return sbx_fail(err, errsz, -e, "rpc: connect to the supervisor at %s: %s",
		                be->sock, strerror(e));
	}
	return fd;
}

/* Under be->mu: capabilities on cli, into be. */
static int
ask_caps(struct rpc_be *be, struct sbx_rpc_client *cli, char *err, size_t errsz)
{
	json_t *p = json_pack("{s:i}", "protocol", SBX_RPC_PROTOCOL), *r = NULL, *lim;
	int rc = sbx_rpc_call(cli, "capabilities", p, sbx_rpc_now_ms() + RPC_CAPS_MS, &r, NULL,
	                      err, errsz);

	json_decref(p);
	if (rc < 0)
		return rc;
	if (json_integer_value(json_object_get(r, "protocol")) != SBX_RPC_PROTOCOL ||
	    !json_is_boolean(json_object_get(r, "available"))) {
		json_decref(r);
		return sbx_fail(err, errsz, -EPROTO, "rpc: the supervisor does not speak protocol "
		                "%d (capabilities: protocol, available)", SBX_RPC_PROTOCOL);
	}
	be->available = json_is_true(json_object_get(r, "available"));
	be->park = json_is_true(json_object_get(r, "park"));
	lim = json_object_get(r, "limits");
	be->lim_memory = json_is_true(json_object_get(lim, "memory"));
	be->lim_cpus = json_is_true(json_object_get(lim, "cpus"));
	be->lim_pids = json_is_true(json_object_get(lim, "pids"));
	snprintf(be->engine, sizeof(be->engine), "%s",
	         json_is_string(json_object_get(r, "engine"))
	             ? json_string_value(json_object_get(r, "engine"))
	             : "");
	snprintf(be->reason, sizeof(be->reason), "%s",
	         be->available ? ""
	         : json_is_string(json_object_get(r, "reason"))
	             ? json_string_value(json_object_get(r, "reason"))
	             : "the supervisor says its engine cannot run here");
	for (char *c = be->reason; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
	be->caps_ok = true;
	json_decref(r);
	return 0;
}

/* Under be->mu: a connection that went down is noted and its process
 * reaped; the next attempt waits for the back-off. */
static void
note_down(struct rpc_be *be, const char *why)
{
	int64_t now = sbx_rpc_now_ms();

	if (be->cli) {
		if (now - be->up_at >= RPC_STABLE_MS)
			be->fails = 0;
		sbx_rpc_client_unref(be->cli);
		be->cli = NULL;
	}
	be->caps_ok = false;
	reap_child(be);
	be->fails++;
	be->retry_at = now + sbx_rpc_backoff_ms(be->fails);
	snprintf(be->why, sizeof(be->why), "%s", why);
	sbx_log(SBX_LOG_WARN, "rpc: supervisor %s down: %s (next try in %lld ms)",
	        be->argv ? be->argv[0] : be->sock, why,
	        (long long)(be->retry_at - now));
}

int
sbx_rpc_be_ensure(struct rpc_be *be, char *err, size_t errsz)
{
	int fd, rc;
	int64_t now = sbx_rpc_now_ms();

	if (be->cli && sbx_rpc_client_probe(be->cli))
		return 0;
	if (be->cli)
		note_down(be, "the connection was lost");
	/* a short back-off is waited for: the call that found the
	 * supervisor gone is the one that starts it again */
	if (now < be->retry_at && be->retry_at - now <= RPC_BACKOFF_WAIT_MS) {
		nanosleep(&(struct timespec){ (be->retry_at - now) / 1000,
		                              ((be->retry_at - now) % 1000) * 1000000 },
		          NULL);
		now = sbx_rpc_now_ms();
	}
	if (now < be->retry_at)
		return sbx_fail(err, errsz, -EAGAIN, "rpc: supervisor down (%s); next try in "
		                "%lld ms", be->why, (long long)(be->retry_at - now));
	fd = be->argv ? spawn(be, err, errsz) : connect_sock(be, err, errsz);
	if (fd < 0) {
		note_down(be, err ? err : "cannot start");
		return fd;
	}
	if (!(be->cli = sbx_rpc_client_new(fd))) {
		note_down(be, "out of memory");
		return sbx_fail(err, errsz, -ENOMEM, "rpc: out of memory");
	}
	be->up_at = now;
	be->gen++;
	if ((rc = ask_caps(be, be->cli, err, errsz)) < 0) {
		char why[256];

		snprintf(why, sizeof(why), "capabilities: %s", err ? err : "failed");
		note_down(be, why);
		return rc;
	}
	be->why[0] = '\0';
	sbx_log(SBX_LOG_INFO, "rpc: supervisor %s up: %s, %s%s", be->argv ? be->argv[0] : be->sock,
	        be->engine[0] ? be->engine : "(engine unnamed)",
	        be->available ? "available" : "not available: ", be->reason);
	sbx_rpc_readopt(be, be->cli);
	return 0;
}

int
sbx_rpc_be_call(struct rpc_be *be, const char *method, const json_t *params, int timeout_ms,
                json_t **res, char *err, size_t errsz)
{
	struct sbx_rpc_client *cli;
	int rc;

	*res = NULL;
	pthread_mutex_lock(&be->mu);
	rc = sbx_rpc_be_ensure(be, err, errsz);
	cli = be->cli;
	if (rc == 0)
		sbx_rpc_client_ref(cli);
	pthread_mutex_unlock(&be->mu);
	if (rc < 0)
		return rc;
	rc = sbx_rpc_call(cli, method, params, sbx_rpc_now_ms() + timeout_ms, res, NULL, err,
	                  errsz);
	sbx_rpc_client_unref(cli);
	return rc;
}

void
sbx_rpc_backend_check(const struct sbx_backend *b, struct sbx_rpc_status *st)
{
	struct rpc_be *be = sbx_rpc_be_of(b);
	char err[256] = "";

	memset(st, 0, sizeof(*st));
	if (!b || b->ops != &sbx_rpc_ops) {
		snprintf(st->reason, sizeof(st->reason), "not an rpc backend");
		return;
	}
	pthread_mutex_lock(&be->mu);
	if (sbx_rpc_be_ensure(be, err, sizeof(err)) == 0) {
		st->up = true;
		st->available = be->available;
		snprintf(st->reason, sizeof(st->reason), "%s", be->reason);
	} else {
		snprintf(st->reason, sizeof(st->reason), "supervisor down: %.200s",
		         be->why[0] ? be->why : err);
	}
	snprintf(st->engine, sizeof(st->engine), "%s", be->engine);
	pthread_mutex_unlock(&be->mu);
}

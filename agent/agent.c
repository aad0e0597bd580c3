/* agent.c: the connection to the host, the poll loop, exec. See agent.h.
 *
 * Memory is bounded whatever the host does: frames queued for the host
 * grow only while out_len < AGENT_OUT_HIGH for data (plus control frames,
 * a few per stream), the host's bytes are not read while out_len >=
 * AGENT_OUT_HARD, and stdin is buffered only up to the credit granted.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent.h"

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
oom(void)
{
	static const char msg[] = "sluice-agent: out of memory\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing left to do */
	}
	_exit(111);
}

/* ---- output queue ------------------------------------------------------ */

static uint8_t *
out_reserve(struct agent *a, size_t n)
{
	uint8_t *p = agent_outq_room(&a->out, &a->out_off, a->out_len, &a->out_cap, n);

	if (p == NULL)
		oom();
	return p;
}

void
agent_send(struct agent *a, uint8_t type, uint32_t stream, const void *p,
	   size_t len)
{
	uint8_t *o = out_reserve(a, AGENT_HDR_LEN + len);

	agent_hdr_put(o, type, stream, (uint32_t)len);
	if (len)
		memcpy(o + AGENT_HDR_LEN, p, len);
	a->out_len += AGENT_HDR_LEN + len;
}

void
agent_send_json(struct agent *a, uint8_t type, uint32_t stream,
		const struct json_t *j)
{
	size_t len;
	char *s = agent_json_dump(j, &len);

	if (s == NULL) {
		agent_send_error(a, stream, AGENT_E_IO, 0,
				 "answer larger than a control frame");
		return;
	}
	agent_send(a, type, stream, s, len);
	free(s);
}

void
agent_send_error(struct agent *a, uint32_t stream, const char *code, int err,
		 const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *j;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s, s:s}", AGENT_F_CODE, code, AGENT_F_MESSAGE, msg);
	if (j == NULL)
		oom();
	if (err)
		json_object_set_new(j, AGENT_F_ERRNO, json_integer(err));
	agent_send_json(a, AGENT_FT_ERROR, stream, j);
	json_decref(j);
}

static void
send_window(struct agent *a, uint32_t stream, uint32_t n)
{
	uint8_t p[4];

	agent_put_u32(p, n);
	agent_send(a, AGENT_FT_WINDOW, stream, p, 4);
}

/* Writes what the host accepts now. */
static void
out_flush(struct agent *a)
{
	while (a->out_len > 0) {
		ssize_t n = write(a->fd, a->out + a->out_off, a->out_len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				a->dead = true;
			return;
		}
		a->out_off += (size_t)n;
		a->out_len -= (size_t)n;
	}
	a->out_off = 0;
	/* an idle queue gives its memory back */
	if (a->out_cap > 2 * AGENT_OUT_HIGH) {
		free(a->out);
		a->out = NULL;
		a->out_cap = 0;
	}
}

/* ---- streams ----------------------------------------------------------- */

static struct agent_stream *
stream_find(struct agent *a, uint32_t id)
{
	for (int i = 0; i < AGENT_MAX_STREAMS; i++)
		if (a->streams[i].kind != AGENT_SK_FREE &&
		    a->streams[i].id == id)
			return &a->streams[i];
	return NULL;
}

struct agent_stream *
agent_stream_new(struct agent *a, uint32_t id, enum agent_stream_kind kind)
{
	for (int i = 0; i < AGENT_MAX_STREAMS; i++) {
		struct agent_stream *s = &a->streams[i];

		if (s->kind != AGENT_SK_FREE)
			continue;
		memset(s, 0, sizeof(*s));
		s->kind = kind;
		s->id = id;
		s->fd_out = s->fd_err = s->fd_in = s->file_fd = -1;
		return s;
	}
	return NULL;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void
agent_stream_free(struct agent *a, struct agent_stream *s)
{
	(void)a;
	if (s->kind == AGENT_SK_EXEC && s->pid > 0 && !s->exited)
		kill(-s->pid, SIGKILL);
	close_fd(&s->fd_out);
	close_fd(&s->fd_err);
	close_fd(&s->fd_in);
	close_fd(&s->file_fd);
	agent_tar_stream_fini(s);
	if (s->tmp_path)
		unlink(s->tmp_path);
	free(s->tmp_path);
	free(s->path);
	free(s->inbuf);
	memset(s, 0, sizeof(*s));
	s->kind = AGENT_SK_FREE;
}

static int
nstreams(const struct agent *a)
{
	int n = 0;

	for (int i = 0; i < AGENT_MAX_STREAMS; i++)
		n += a->streams[i].kind != AGENT_SK_FREE;
	return n;
}

/* ---- exec -------------------------------------------------------------- */

/* The child side of fork: never returns. Reports a failure as an errno
 * on errfd (close-on-exec, so success closes it silently). */
static void __attribute__((noreturn))
child(int in, int out, int errp, int errfd, const char *slave, const char *cwd,
      char **argv, char **env)
{
	sigset_t none;
	int e;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* as a VM's init the agent ignores these; its commands must not */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);       /* sluiced ignores it; commands get the default */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	setsid();
	if (slave) {
		/* a terminal: fds 0-2 and the controlling tty */
		if ((e = agent_pty_attach(slave)) < 0) {
			errno = -e;
			goto fail;
		}
	} else if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errp, 2) < 0) {
		goto fail;
	}
	if (chdir(cwd) < 0) {
		e = -errno;     /* negative: the working directory, not the program */
		goto report;
	}
	environ = env;
	execvp(argv[0], argv);
fail:
	e = errno;
report:
	if (write(errfd, &e, sizeof(e)) < 0) {
		/* the parent sees a short read */
	}
	_exit(127);
}

static bool
get_strings(const json_t *arr, const char ***out, size_t *n)
{
	size_t i;
	json_t *v;

	*n = json_array_size(arr);
	*out = calloc(*n + 1, sizeof(**out));
	if (*out == NULL)
		oom();
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v))
			return false;
		(*out)[i] = json_string_value(v);
	}
	return true;
}

static void
op_exec(struct agent *a, uint32_t id, const json_t *req)
{
	json_t *jargv = json_object_get(req, AGENT_F_ARGV);
	json_t *jenv = json_object_get(req, AGENT_F_ENV);
	json_t *jcwd = json_object_get(req, AGENT_F_CWD);
	json_t *jstdin = json_object_get(req, AGENT_F_STDIN);
	json_t *jto = json_object_get(req, AGENT_F_TIMEOUT_MS);
	json_t *jwin = json_object_get(req, AGENT_F_WINDOW);
	const char **argv = NULL, **set = NULL;
	char slave[64];
	int master = -1;
	unsigned rows = AGENT_PTY_ROWS, cols = AGENT_PTY_COLS;
	bool pty, detach;
	char **env = NULL;
	size_t argc = 0, nset = 0;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	int ep[2] = { -1, -1 };
	struct agent_stream *s = NULL;
	char err[256];
	json_int_t timeout = 0, window = AGENT_WINDOW_DEFAULT;
	bool want_stdin = false;
	pid_t pid;
	int e = 0;
	ssize_t n;

	if (!json_is_array(jargv) || json_array_size(jargv) == 0 ||
	    !get_strings(jargv, &argv, &argc)) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "exec: \"argv\" must be a non-empty array of "
				 "strings");
		goto out;
	}
	if (jenv && !json_is_object(jenv)) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "exec: \"env\" must be an object of strings");
		goto out;
	}
	if (jenv) {
		const char *k;
		json_t *v;
		size_t i = 0;

		set = calloc(json_object_size(jenv) + 1, sizeof(*set));
		if (set == NULL)
			oom();
		json_object_foreach(jenv, k, v) {
			char *kv;

			if (!json_is_string(v) || strchr(k, '=')) {
				agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
						 "exec: env \"%s\" must be a "
						 "string with a name without "
						 "'='", k);
				goto out;
			}
			if (asprintf(&kv, "%s=%s", k,
				     json_string_value(v)) < 0)
				oom();
			set[i++] = kv;
			nset = i;
		}
	}
	if ((jcwd && !json_is_string(jcwd)) ||
	    (jstdin && !json_is_boolean(jstdin)) ||
	    (jto && (!json_is_integer(jto) || json_integer_value(jto) < 0)) ||
	    (jwin && (!json_is_integer(jwin) || json_integer_value(jwin) < 1 ||
		      json_integer_value(jwin) > AGENT_WINDOW_MAX))) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "exec: \"cwd\" must be a string, \"stdin\" a "
				 "boolean, \"timeout_ms\" >= 0, \"window\" "
				 "1..%u", AGENT_WINDOW_MAX);
		goto out;
	}
	if (agent_exec_mode(req, &pty, &detach, &rows, &cols, err, sizeof(err)) < 0) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0, "exec: %s", err);
		goto out;
	}
	if (jto)
		timeout = json_integer_value(jto);
	if (jwin)
		window = json_integer_value(jwin);
	want_stdin = json_is_true(jstdin) && !detach;
	if ((a->defaults->env
		     ? agent_env_build_over(a->defaults->env,
					    a->defaults->ca_dir, set, nset,
					    &env, err, sizeof(err))
		     : agent_env_build(a->base_env, a->defaults->ca_dir, set,
				       nset, &env, err, sizeof(err))) < 0) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0, "exec: %s",
				 err);
		goto out;
	}
	s = agent_stream_new(a, id, AGENT_SK_EXEC);
	if (s == NULL) {
		agent_send_error(a, id, AGENT_E_TOO_MANY, 0,
				 "more than %d open streams",
				 AGENT_MAX_STREAMS);
		goto out;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		e = errno;
		goto fail;
	}
	if (pty) {
		if ((e = -agent_pty_open(rows, cols, &master, slave, sizeof(slave))) > 0)
			goto fail;
	} else if (detach) {
		/* nobody reads a detached command's output: it is dropped */
		out[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
		errp[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (out[1] < 0 || errp[1] < 0) {
			e = errno;
			goto fail;
		}
	} else if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		e = errno;
		goto fail;
	}
	if (pty) {
		/* the terminal is stdin; IN frames go to its master */
	} else if (want_stdin) {
		if (pipe2(in, O_CLOEXEC) < 0) {
			e = errno;
			goto fail;
		}
	} else {
		in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in[0] < 0) {
			e = errno;
			goto fail;
		}
	}
	pid = fork();
	if (pid < 0) {
		e = errno;
		goto fail;
	}
	if (pid == 0)
		child(in[0], out[1], errp[1], ep[1], pty ? slave : NULL,
		      jcwd ? json_string_value(jcwd)
			   : a->defaults->cwd ? a->defaults->cwd : "/",
		      (char **)(uintptr_t)argv, env);
	close_fd(&ep[1]);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	do
		n = read(ep[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close_fd(&ep[0]);
	s->pid = pid;
	if (n == (ssize_t)sizeof(e)) {
		/* the child is gone (127); the SIGCHLD path reaps it */
		s->exited = true;
		goto fail;
	}
	e = 0;
	if (detach) {
		close_fd(&out[1]);
		close_fd(&errp[1]);
		agent_exec_detached(a, s); /* started, result; s is freed */
		goto out;
	}
	if (pty) {
		s->pty = true;
		s->fd_out = master;
		master = -1;
		if (want_stdin && (s->fd_in = fcntl(s->fd_out, F_DUPFD_CLOEXEC, 3)) < 0) {
			e = errno;
			kill(-pid, SIGKILL);
			goto fail;
		}
	} else {
		s->fd_out = out[0];
		s->fd_err = errp[0];
		s->fd_in = in[1];
	}
	fcntl(s->fd_out, F_SETFL, O_NONBLOCK);
	if (s->fd_err >= 0)
		fcntl(s->fd_err, F_SETFL, O_NONBLOCK);
	s->window = (uint64_t)window;
	if (timeout > 0)
		s->deadline = now_ms() + (int64_t)timeout;
	{
		json_t *j = json_pack("{s:i}", AGENT_F_PID, (json_int_t)pid);

		agent_send_json(a, AGENT_FT_STARTED, id, j);
		json_decref(j);
	}
	if (want_stdin) {
		fcntl(s->fd_in, F_SETFL, O_NONBLOCK);
		s->inbuf = malloc(AGENT_STDIN_BUF);
		if (s->inbuf == NULL)
			oom();
		s->in_credit = AGENT_STDIN_BUF;
		send_window(a, id, AGENT_STDIN_BUF);
	} else {
		s->in_eof = true;
	}
	goto out;
fail:
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&ep[0]);
	close_fd(&ep[1]);
	close_fd(&master);
	if (e < 0)
		agent_send_error(a, id, AGENT_E_BAD_CWD, -e, "working directory %s: %s",
				 jcwd ? json_string_value(jcwd)
				      : a->defaults->cwd ? a->defaults->cwd : "/",
				 strerror(-e));
	else
		agent_send_error(a, id, e == ENOENT ? AGENT_E_NOT_FOUND : AGENT_E_EXEC,
				 e, "exec %s: %s", argv[0], strerror(e));
	if (s) {
		s->pid = 0;     /* already dead or never born */
		agent_stream_free(a, s);
	}
out:
	for (size_t i = 0; i < nset; i++)
		free((char *)(uintptr_t)set[i]);
	free(set);
	free(argv);
	agent_env_free(env);
}

/* Stdin bytes or its end from the host. */
static void
exec_in(struct agent *a, struct agent_stream *s, const uint8_t *p, size_t len)
{
	if (len == 0) {
		s->in_eof = true;
		return;
	}
	if (s->in_eof || len > s->in_credit) {
		agent_send_error(a, s->id, AGENT_E_FLOW, 0,
				 "stdin beyond the window or after its end");
		agent_stream_free(a, s);
		return;
	}
	s->in_credit -= len;
	if (s->fd_in < 0) {
		/* the command closed its stdin: drop, but keep credit flowing */
		s->in_credit += len;
		send_window(a, s->id, (uint32_t)len);
		return;
	}
	memcpy(s->inbuf + s->in_len, p, len);
	s->in_len += len;
}

static void
exec_stdin_write(struct agent *a, struct agent_stream *s)
{
	while (s->in_len > 0) {
		ssize_t n = write(s->fd_in, s->inbuf, s->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* EPIPE: the command does not read any more */
			close_fd(&s->fd_in);
			s->in_credit += s->in_len;
			send_window(a, s->id, (uint32_t)s->in_len);
			s->in_len = 0;
			return;
		}
		memmove(s->inbuf, s->inbuf + n, s->in_len - (size_t)n);
		s->in_len -= (size_t)n;
		s->in_credit += (uint64_t)n;
		send_window(a, s->id, (uint32_t)n);
	}
}

/* Reads one chunk of a pipe into an OUT or ERR frame, within the window. */
static void
exec_pipe_read(struct agent *a, struct agent_stream *s, int *fd, uint8_t type)
{
	size_t want = AGENT_DATA_MAX;
	uint8_t *o;
	ssize_t n;

	if (want > s->window)
		want = (size_t)s->window;
	if (want == 0)
		return;
	o = out_reserve(a, AGENT_HDR_LEN + want);
	do
		n = read(*fd, o + AGENT_HDR_LEN, want);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		close_fd(fd);
		return;
	}
	agent_hdr_put(o, type, s->id, (uint32_t)n);
	a->out_len += AGENT_HDR_LEN + (size_t)n;
	s->window -= (uint64_t)n;
	s->total += (uint64_t)n;
}

static void
exec_finish(struct agent *a, struct agent_stream *s)
{
	json_t *j = json_object();

	if (WIFEXITED(s->status)) {
		json_object_set_new(j, AGENT_F_CODE,
				    json_integer(WEXITSTATUS(s->status)));
		json_object_set_new(j, AGENT_F_SIGNAL, json_null());
	} else {
		json_object_set_new(j, AGENT_F_CODE, json_null());
		json_object_set_new(j, AGENT_F_SIGNAL,
				    json_integer(WTERMSIG(s->status)));
	}
	json_object_set_new(j, AGENT_F_TIMED_OUT, json_boolean(s->timed_out));
	agent_send_json(a, AGENT_FT_EXIT, s->id, j);
	json_decref(j);
	agent_stream_free(a, s);
}

static void
op_kill(struct agent *a, struct agent_stream *s, const struct agent_frame *f)
{
	char err[256];
	json_t *j = agent_json_parse(f->payload, f->len, err, sizeof(err));
	json_t *sig = j ? json_object_get(j, AGENT_F_SIGNAL) : NULL;
	int signo = SIGKILL;

	if (j == NULL || (sig && (!json_is_integer(sig) ||
				  json_integer_value(sig) < 1 ||
				  json_integer_value(sig) >= NSIG))) {
		agent_send_error(a, s->id, AGENT_E_BAD_REQUEST, 0,
				 "kill: %s", j ? "\"signal\" out of range" : err);
		json_decref(j);
		return;
	}
	if (sig)
		signo = (int)json_integer_value(sig);
	json_decref(j);
	if (s->kind == AGENT_SK_EXEC && !s->exited && s->pid > 0) {
		pid_t to = agent_pty_target(s);

		kill(-to, signo);
		if (to != s->pid && signo == SIGKILL)
			kill(-s->pid, signo);
	}
}

/* Reaps every child that has ended, ours or an orphan's. */
static void
reap(struct agent *a)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		a->reaped++;
		for (int i = 0; i < AGENT_MAX_STREAMS; i++) {
			struct agent_stream *s = &a->streams[i];

			if (s->kind == AGENT_SK_EXEC && s->pid == pid &&
			    !s->exited) {
				s->exited = true;
				s->status = status;
				s->drain_deadline = now_ms() + AGENT_DRAIN_MS;
			}
		}
	}
}

/* ---- frames from the host -------------------------------------------- */

static void
on_request(struct agent *a, const struct agent_frame *f)
{
	static const struct {
		const char *op;
		void (*fn)(struct agent *, uint32_t, const json_t *);
	} ops[] = {
		{ AGENT_OP_EXEC, op_exec },     { AGENT_OP_READ, agent_op_read },
		{ AGENT_OP_WRITE, agent_op_write },
		{ AGENT_OP_LIST, agent_op_list },
		{ AGENT_OP_STAT, agent_op_stat },
		{ AGENT_OP_MKDIR, agent_op_mkdir },
		{ AGENT_OP_REMOVE, agent_op_remove },
		{ AGENT_OP_CONFIGURE, agent_op_configure },
		{ AGENT_OP_TAR_READ, agent_op_tar_read },
		{ AGENT_OP_TAR_WRITE, agent_op_tar_write },
	};
	struct agent_stream *s;
	char err[256];
	json_t *j;
	const char *op;

	if ((s = stream_find(a, f->stream)) != NULL) {
		/* the host lost track of its ids: the stream's state is
		 * unclear, so it fails as a whole (its command is killed) */
		agent_send_error(a, f->stream, AGENT_E_STREAM_IN_USE, 0,
				 "stream %u is already open", f->stream);
		agent_stream_free(a, s);
		return;
	}
	j = agent_json_parse(f->payload, f->len, err, sizeof(err));
	if (j == NULL) {
		agent_send_error(a, f->stream, AGENT_E_BAD_REQUEST, 0,
				 "request: %s", err);
		return;
	}
	op = json_string_value(json_object_get(j, AGENT_F_OP));
	for (size_t i = 0; op && i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(op, ops[i].op) == 0) {
			ops[i].fn(a, f->stream, j);
			json_decref(j);
			return;
		}
	}
	agent_send_error(a, f->stream, AGENT_E_UNSUPPORTED, 0,
			 "request: unknown \"op\" %s%s%s", op ? "\"" : "",
			 op ? op : "(missing)", op ? "\"" : "");
	json_decref(j);
}

static void
on_hello(struct agent *a, const struct agent_frame *f, const char *type)
{
	char err[256];
	json_t *j = agent_json_parse(f->payload, f->len, err, sizeof(err));

	if (j == NULL) {
		agent_send_error(a, 0, AGENT_E_BAD_REQUEST, 0, "%s: %s", type,
				 err);
		return;
	}
	json_decref(j);
	if (f->type == AGENT_FT_HELLO)
		j = json_pack("{s:i, s:[s,s,s,s,s,s,s,s,s,s,s,s,s,s,s], s:i, s:i, s:i}",
			      AGENT_F_VERSION, AGENT_PROTO_VERSION,
			      AGENT_F_CAPS, "exec", "stdin", "kill", "read",
			      "write", "list", "stat", "mkdir", "remove",
			      "window", AGENT_OP_CONFIGURE, AGENT_OP_TAR_READ,
			      AGENT_OP_TAR_WRITE, AGENT_F_PTY, AGENT_F_DETACH,
			      AGENT_F_MAX_DATA,
			      (json_int_t)AGENT_DATA_MAX, AGENT_F_MAX_CTRL,
			      (json_int_t)AGENT_CTRL_MAX, AGENT_F_PID,
			      (json_int_t)getpid());
	else
		j = json_pack("{s:I, s:i, s:I, s:I}", AGENT_F_UPTIME_MS,
			      (json_int_t)(now_ms() - a->started_ms),
			      AGENT_F_STREAMS, nstreams(a), "reaped",
			      (json_int_t)a->reaped, "bad_frames",
			      (json_int_t)a->frames_bad);
	if (j == NULL)
		oom();
	agent_send_json(a, f->type == AGENT_FT_HELLO ? AGENT_FT_HELLO
						     : AGENT_FT_PONG,
			0, j);
	json_decref(j);
}

static void
on_frame(struct agent *a, const struct agent_frame *f)
{
	struct agent_stream *s;

	switch (f->type) {
	case AGENT_FT_HELLO:
		on_hello(a, f, "hello");
		return;
	case AGENT_FT_PING:
		on_hello(a, f, "ping");
		return;
	case AGENT_FT_REQUEST:
		on_request(a, f);
		return;
	case AGENT_FT_ERROR:
		/* the host gave up on a stream: forget it */
		if ((s = stream_find(a, f->stream)) != NULL)
			agent_stream_free(a, s);
		return;
	default:
		break;
	}
	s = stream_find(a, f->stream);
	if (s == NULL) {
		/* late frames for a stream that just ended are normal */
		a->frames_unknown_stream++;
		return;
	}
	switch (f->type) {
	case AGENT_FT_WINDOW: {
		uint64_t w = s->window + agent_get_u32(f->payload);

		s->window = w > AGENT_WINDOW_MAX ? AGENT_WINDOW_MAX : w;
		return;
	}
	case AGENT_FT_IN:
		if (s->kind == AGENT_SK_EXEC)
			exec_in(a, s, f->payload, f->len);
		else if (s->kind == AGENT_SK_WRITE)
			agent_write_in(a, s, f->payload, f->len);
		else
			goto bad;
		return;
	case AGENT_FT_KILL:
		op_kill(a, s, f);
		return;
	case AGENT_FT_RESIZE:
		agent_op_resize(a, s, f);
		return;
	default:
		goto bad;
	}
bad:
	/* only the host's types reach here with a legal header */
	agent_send_error(a, f->stream, AGENT_E_BAD_FRAME, 0,
			 "%s frame not expected on this stream",
			 agent_frame_type_name(f->type));
	agent_stream_free(a, s);
}

static void
host_read(struct agent *a)
{
	for (int rounds = 0; rounds < 16 && a->out_len < AGENT_OUT_HARD;
	     rounds++) {
		ssize_t n = read(a->fd, a->rbuf, AGENT_RBUF);
		size_t pos = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 && errno != EIO) {
			a->dead = true;
			return;
		}
		if (n <= 0) {
			/* EOF; EIO is a hung-up tty (hvc) */
			a->eof = true;
			return;
		}
		while (pos < (size_t)n) {
			struct agent_frame f;
			size_t used;
			enum agent_dec_result r = agent_dec_feed(
				&a->dec, a->rbuf + pos, (size_t)n - pos, &used,
				&f);

			pos += used;
			if (r == AGENT_DEC_FRAME) {
				on_frame(a, &f);
			} else if (r == AGENT_DEC_BAD) {
				struct agent_stream *s;

				a->frames_bad++;
				agent_send_error(a, f.stream,
						 AGENT_E_BAD_FRAME, 0,
						 "%s (type %u, %u bytes)",
						 a->dec.reason, f.type, f.len);
				s = stream_find(a, f.stream);
				if (s && f.stream != 0)
					agent_stream_free(a, s);
			} else if (r == AGENT_DEC_FATAL) {
				agent_send_error(a, 0, AGENT_E_BAD_FRAME, 0,
						 "%s", a->dec.reason);
				a->dead = true;
				return;
			}
		}
	}
}

/* ---- the loop ---------------------------------------------------------- */

int
agent_init(struct agent *a, int fd, char *const *agent_env, char *err,
	   size_t errsz)
{
	sigset_t set;

	memset(a, 0, sizeof(*a));
	a->fd = fd;
	a->sigfd = -1;
	a->listen_fd = -1;
	a->next_fd = -1;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	a->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0) {
		int e = errno;

		snprintf(err, errsz, "signalfd: %s", strerror(e));
		return -e;
	}
	a->dec_buf = malloc(AGENT_PAYLOAD_MAX);
	a->rbuf = malloc(AGENT_RBUF);
	if (a->dec_buf == NULL || a->rbuf == NULL) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	agent_dec_init(&a->dec, a->dec_buf, AGENT_PAYLOAD_MAX);
	a->base_env = agent_env;
	a->defaults = &a->own_defaults;
	a->started_ms = now_ms();
	return 0;
}

void
agent_fini(struct agent *a)
{
	for (int i = 0; i < AGENT_MAX_STREAMS; i++)
		if (a->streams[i].kind != AGENT_SK_FREE)
			agent_stream_free(a, &a->streams[i]);
	close_fd(&a->sigfd);
	close_fd(&a->fd);
	close_fd(&a->next_fd);
	free(a->dec_buf);
	free(a->rbuf);
	free(a->out);
	a->dec_buf = a->rbuf = a->out = NULL;
	agent_defaults_fini(&a->own_defaults);
}

/* Timers, finished streams, file reads. Returns the poll timeout. */
static int
housekeeping(struct agent *a)
{
	int64_t now = now_ms(), next = -1;

	for (int i = 0; i < AGENT_MAX_STREAMS; i++) {
		struct agent_stream *s = &a->streams[i];

		if (s->kind == AGENT_SK_READ) {
			if (s->window > 0 && a->out_len < AGENT_OUT_HIGH) {
				if (!agent_read_pump(a, s))
					next = 0;
			}
			continue;
		}
		if (s->kind != AGENT_SK_EXEC)
			continue;
		if (!s->exited && s->deadline && now >= s->deadline) {
			kill(-s->pid, SIGKILL);
			s->timed_out = true;
			s->deadline = 0;
		}
		if (s->exited && s->fd_in >= 0)
			close_fd(&s->fd_in);
		if (s->exited && (s->fd_out >= 0 || s->fd_err >= 0)) {
			/* the host holds us up, not a grandchild: wait */
			if (s->window == 0 || a->out_len >= AGENT_OUT_HIGH)
				s->drain_deadline = now + AGENT_DRAIN_MS;
			else if (now >= s->drain_deadline) {
				close_fd(&s->fd_out);
				close_fd(&s->fd_err);
			}
		}
		if (s->exited && s->fd_out < 0 && s->fd_err < 0) {
			exec_finish(a, s);
			continue;
		}
		if (!s->exited && s->in_eof && s->in_len == 0 && s->fd_in >= 0)
			close_fd(&s->fd_in);
		if (s->deadline && (next < 0 || s->deadline < next))
			next = s->deadline;
		if (s->exited && (next < 0 || s->drain_deadline < next))
			next = s->drain_deadline;
	}
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

/* Signals: SIGCHLD reaps, an accepted SIGTERM ends the connection. */
static void
on_signals(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		if (si.ssi_signo == SIGTERM && agent_term_ok(si.ssi_pid, getpid() == 1))
			a->term = true;
	/* SIGCHLDs merge: reap whatever ended */
	reap(a);
}

/* A connection on --listen while serving: a guest's is refused, a host's
 * waits in next_fd (the newest wins). */
static void
on_listen(struct agent *a)
{
	for (int i = 0; i < 16; i++) {
		int fd = agent_accept_host(a->listen_fd, NULL);

		if (fd == -EPERM) {
			a->refused++;
			continue;
		}
		/* The socket stays readable: poll would wake at once and
		 * spin. Out of descriptors or memory, look again later. */
		if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM)
			a->listen_resume_ms = now_ms() + AGENT_LISTEN_PAUSE_MS;
		if (fd < 0)
			return;
		close_fd(&a->next_fd);
		a->next_fd = fd;
	}
}

int
agent_run(struct agent *a)
{
	struct pollfd pfd[3 + 3 * AGENT_MAX_STREAMS];
	struct agent_stream *who[3 + 3 * AGENT_MAX_STREAMS];
	int rc = 0;

	for (;;) {
		int timeout, n = 0;
		bool listen_paused;

		timeout = housekeeping(a);
		listen_paused = a->listen_fd >= 0 && a->listen_resume_ms > now_ms();
		if (listen_paused) {
			int left = (int)(a->listen_resume_ms - now_ms());

			if (timeout < 0 || left < timeout)
				timeout = left > 0 ? left : 0;
		}
		out_flush(a);
		if (a->dead) {
			rc = -EPROTO;
			break;
		}
		if (a->eof || a->term)
			break;

		pfd[n] = (struct pollfd){ .fd = a->fd, .events = 0 };
		if (a->out_len < AGENT_OUT_HARD)
			pfd[n].events |= POLLIN;
		if (a->out_len > 0)
			pfd[n].events |= POLLOUT;
		who[n++] = NULL;
		pfd[n] = (struct pollfd){ .fd = a->sigfd, .events = POLLIN };
		who[n++] = NULL;
		/* a negative fd is skipped by poll */
		pfd[n] = (struct pollfd){ .fd = listen_paused ? -1 : a->listen_fd, .events = POLLIN };
		who[n++] = NULL;
		for (int i = 0; i < AGENT_MAX_STREAMS; i++) {
			struct agent_stream *s = &a->streams[i];
			bool room = s->window > 0 && a->out_len < AGENT_OUT_HIGH;

			if (s->kind != AGENT_SK_EXEC)
				continue;
			if (s->fd_out >= 0 && room) {
				pfd[n] = (struct pollfd){ s->fd_out, POLLIN, 0 };
				who[n++] = s;
			}
			if (s->fd_err >= 0 && room) {
				pfd[n] = (struct pollfd){ s->fd_err, POLLIN, 0 };
				who[n++] = s;
			}
			if (s->fd_in >= 0 && s->in_len > 0) {
				pfd[n] = (struct pollfd){ s->fd_in, POLLOUT, 0 };
				who[n++] = s;
			}
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (pfd[1].revents)
			on_signals(a);
		if (pfd[2].revents)
			on_listen(a);
		for (int i = 3; i < n; i++) {
			struct agent_stream *s = who[i];

			if (pfd[i].revents == 0 || s->kind != AGENT_SK_EXEC)
				continue;
			if (pfd[i].fd == s->fd_out)
				exec_pipe_read(a, s, &s->fd_out, AGENT_FT_OUT);
			else if (pfd[i].fd == s->fd_err)
				exec_pipe_read(a, s, &s->fd_err, AGENT_FT_ERR);
			else if (pfd[i].fd == s->fd_in)
				exec_stdin_write(a, s);
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			host_read(a);
		/* A hung-up host with our queue full: host_read reads
		 * nothing then, and a virtio port refuses writes while its
		 * host is away, so without this the loop would spin. */
		if ((pfd[0].revents & (POLLHUP | POLLERR)) &&
		    a->out_len >= AGENT_OUT_HARD)
			a->eof = true;
	}
	/* the host is gone: so are the commands it started */
	for (int i = 0; i < AGENT_MAX_STREAMS; i++)
		if (a->streams[i].kind != AGENT_SK_FREE)
			agent_stream_free(a, &a->streams[i]);
	return rc;
}

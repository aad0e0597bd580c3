/* pty.c: an exec with a terminal: the pty pair, the child's controlling
 * terminal, its size ("rows", "cols"; the RESIZE frame) and where a KILL
 * frame's signal goes. See agent.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>

#include "agent.h"

static int
one_dim(const json_t *j, const char *name, bool required, unsigned *out, char *err, size_t errsz)
{
	const json_t *v = json_object_get(j, name);

	if (v == NULL && !required)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > AGENT_PTY_DIM_MAX) {
		snprintf(err, errsz, "\"%s\" must be an integer 1..%u", name, AGENT_PTY_DIM_MAX);
		return -EINVAL;
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

int
agent_winsize_get(const json_t *j, bool required, unsigned *rows, unsigned *cols, char *err,
		  size_t errsz)
{
	unsigned r = *rows, c = *cols;

	if (!json_is_object(j)) {
		snprintf(err, errsz, "not an object");
		return -EINVAL;
	}
	if (one_dim(j, AGENT_F_ROWS, required, &r, err, errsz) < 0 ||
	    one_dim(j, AGENT_F_COLS, required, &c, err, errsz) < 0)
		return -EINVAL;
	*rows = r;
	*cols = c;
	return 0;
}

int
agent_exec_mode(const json_t *req, bool *pty, bool *detach, unsigned *rows, unsigned *cols,
		char *err, size_t errsz)
{
	const json_t *jp = json_object_get(req, AGENT_F_PTY);
	const json_t *jd = json_object_get(req, AGENT_F_DETACH);

	if ((jp && !json_is_boolean(jp)) || (jd && !json_is_boolean(jd))) {
		snprintf(err, errsz, "\"pty\" and \"detach\" must be booleans");
		return -EINVAL;
	}
	*pty = json_is_true(jp);
	*detach = json_is_true(jd);
	if (*pty && *detach) {
		snprintf(err, errsz, "a detached command has no terminal");
		return -EINVAL;
	}
	if (!*pty && (json_object_get(req, AGENT_F_ROWS) || json_object_get(req, AGENT_F_COLS))) {
		snprintf(err, errsz, "\"rows\" and \"cols\" only with \"pty\"");
		return -EINVAL;
	}
	return *pty ? agent_winsize_get(req, false, rows, cols, err, errsz) : 0;
}

void
agent_exec_detached(struct agent *a, struct agent_stream *s)
{
	json_t *j = json_pack("{s:i}", AGENT_F_PID, (json_int_t)s->pid);

	agent_send_json(a, AGENT_FT_STARTED, s->id, j);
	json_decref(j);
	j = json_pack("{s:i, s:b}", AGENT_F_PID, (json_int_t)s->pid, AGENT_F_DETACHED, 1);
	agent_send_json(a, AGENT_FT_RESULT, s->id, j);
	json_decref(j);
	/* forgotten, not killed: reap() collects it when it ends */
	s->pid = 0;
	agent_stream_free(a, s);
}

int
agent_pty_open(unsigned rows, unsigned cols, int *master, char *slave, size_t cap)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	int e;

	if (m < 0)
		return -errno;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, cap) != 0 ||
	    ioctl(m, TIOCSWINSZ, &ws) < 0) {
		e = errno ? errno : EIO;
		close(m);
		return -e;
	}
	*master = m;
	return 0;
}

int
agent_pty_attach(const char *slave)
{
	int fd = open(slave, O_RDWR);

	if (fd < 0)
		return -errno;
	/* setsid() came first: this becomes the session's terminal */
	if (ioctl(fd, TIOCSCTTY, 0) < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 ||
	    dup2(fd, 2) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	if (fd > 2)
		close(fd);
	return 0;
}

pid_t
agent_pty_target(const struct agent_stream *s)
{
	pid_t pg = 0;

	/* as the terminal driver does with ^C: the foreground job */
	if (s->pty && s->fd_out >= 0 && ioctl(s->fd_out, TIOCGPGRP, &pg) == 0 && pg > 0)
		return pg;
	return s->pid;
}

void
agent_op_resize(struct agent *a, struct agent_stream *s, const struct agent_frame *f)
{
	char err[256];
	json_t *j = agent_json_parse(f->payload, f->len, err, sizeof(err));
	unsigned rows = 0, cols = 0;
	struct winsize ws;

	if (j == NULL || agent_winsize_get(j, true, &rows, &cols, err, sizeof(err)) < 0) {
		agent_send_error(a, s->id, AGENT_E_BAD_REQUEST, 0, "resize: %s", err);
		json_decref(j);
		agent_stream_free(a, s); /* an error ends its stream */
		return;
	}
	json_decref(j);
	if (s->kind != AGENT_SK_EXEC || !s->pty) {
		agent_send_error(a, s->id, AGENT_E_BAD_FRAME, 0,
				 "resize: the stream is not an exec with a pty");
		agent_stream_free(a, s);
		return;
	}
	if (s->fd_out < 0 || s->exited)
		return; /* late: the command is ending */
	ws = (struct winsize){ .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	/* the kernel sends SIGWINCH to the foreground job */
	(void)ioctl(s->fd_out, TIOCSWINSZ, &ws);
}

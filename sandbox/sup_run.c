/* sup_run.c: bounded child processes (sup_run.h). The child does only
 * async-signal-safe work between fork and exec (the supervisor has
 * threads); every pipe is O_CLOEXEC so concurrent spawns do not inherit
 * each other's ends. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sup_run.h"

#define ERR_CAP (64u << 10)

long long
sup_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t
spawn3(char *const *argv, int in_fd, int out_fd, int err_fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t pid;

	if (null < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(null);
		return -e;
	}
	if (pid == 0) {
		setpgid(0, 0);
		if (dup2(in_fd >= 0 ? in_fd : null, 0) < 0 ||
		    dup2(out_fd >= 0 ? out_fd : null, 1) < 0 ||
		    dup2(err_fd >= 0 ? err_fd : null, 2) < 0)
			_exit(126);
		close_range(3, ~0U, 0);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		_exit(127);
	}
	setpgid(pid, pid); /* both sides: no race with a kill of the group */
	close(null);
	return pid;
}

pid_t
sup_spawn(char *const *argv, int in_fd, int out_fd)
{
	return spawn3(argv, in_fd, out_fd, -1);
}

int
sup_reap(pid_t pid, long long deadline_ms, bool *timed_out)
{
	int st = 0;

	*timed_out = false;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -1;
		if (sup_now_ms() >= deadline_ms) {
			*timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return st;
		}
		usleep(10000);
	}
}

/* Appends up to cap bytes of what fd has; returns 0 at EOF, 1 for more,
 * -1 on error. Bytes past cap are read and dropped. */
static int
drain(int fd, char **buf, size_t *len, size_t cap, bool *trunc)
{
	char tmp[65536];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n == 0)
		return 0;
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	if (*len < cap) {
		size_t k = (size_t)n;
		if (k > cap - *len) {
			k = cap - *len;
			*trunc = true;
		}
		char *nb = realloc(*buf, *len + k + 1);
		if (!nb)
			return -1;
		*buf = nb;
		memcpy(*buf + *len, tmp, k);
		*len += k;
		(*buf)[*len] = 0;
	} else {
		*trunc = true;
	}
	return 1;
}

int
sup_run(struct sup_run *r)
{
	int op[2], ep[2];
	long long deadline = sup_now_ms() + r->timeout_ms;
	bool oerr_trunc = false;
	pid_t pid;

	r->out = calloc(1, 1);
	r->err = calloc(1, 1);
	r->out_len = r->err_len = 0;
	r->out_trunc = r->timed_out = false;
	r->status = -1;
	if (!r->out || !r->err)
		return -ENOMEM;
	if (pipe2(op, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(ep, O_CLOEXEC) < 0) {
		int e = errno;
		close(op[0]);
		close(op[1]);
		return -e;
	}
	pid = spawn3(r->argv, r->in_fd, op[1], ep[1]);
	close(op[1]);
	close(ep[1]);
	if (pid < 0) {
		close(op[0]);
		close(ep[0]);
		return (int)pid;
	}
	struct pollfd pf[2] = {{op[0], POLLIN, 0}, {ep[0], POLLIN, 0}};
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		long long left = deadline - sup_now_ms();
		if (left <= 0) {
			r->timed_out = true;
			break;
		}
		int n = poll(pf, 2, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (pf[0].revents) {
			if (drain(op[0], &r->out, &r->out_len, r->out_cap, &r->out_trunc) <= 0) {
				close(op[0]);
				pf[0].fd = -1;
			}
		}
		if (pf[1].revents) {
			if (drain(ep[0], &r->err, &r->err_len, ERR_CAP, &oerr_trunc) <= 0) {
				close(ep[0]);
				pf[1].fd = -1;
			}
		}
	}
	if (pf[0].fd >= 0)
		close(op[0]);
	if (pf[1].fd >= 0)
		close(ep[0]);
	bool killed = false;
	r->status = sup_reap(pid, r->timed_out ? 0 : deadline, &killed);
	r->timed_out = r->timed_out || killed;
	return 0;
}

void
sup_run_free(struct sup_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

void
sup_run_why(const struct sup_run *r, char *buf, size_t n)
{
	const char *name = strrchr(r->argv[0], '/');
	char last[256] = "";
	size_t e = r->err_len;

	name = name ? name + 1 : r->argv[0];
	/* stderr's last non-empty line, one line, printable */
	while (e > 0 && (r->err[e - 1] == '\n' || r->err[e - 1] == ' '))
		e--;
	size_t b = e;
	while (b > 0 && r->err[b - 1] != '\n')
		b--;
	size_t k = 0;
	for (size_t i = b; i < e && k + 1 < sizeof(last); i++)
		last[k++] = (r->err[i] >= 0x20 && r->err[i] < 0x7f) ? r->err[i] : '?';
	last[k] = 0;
	if (r->timed_out)
		snprintf(buf, n, "%s %s: timed out after %d ms", name, r->argv[1] ? r->argv[1] : "",
			 r->timeout_ms);
	else if (WIFSIGNALED(r->status))
		snprintf(buf, n, "%s: killed by signal %d%s%s", name, WTERMSIG(r->status),
			 *last ? ": " : "", last);
	else
		snprintf(buf, n, "%s: exit %d%s%s", name, WEXITSTATUS(r->status), *last ? ": " : "",
			 last);
}

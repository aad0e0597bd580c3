/* sup_run.h: the supervisor's child processes (podman, tar), each bounded
 * by a wall-clock deadline: at the deadline its whole process group is
 * killed (SIGKILL) and reaped. Output is captured up to a cap. */
#ifndef SUP_RUN_H
#define SUP_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sup_run {
	/* in */
	char *const *argv;  /* argv[0] an absolute path */
	int in_fd;          /* stdin (dup'd); -1: /dev/null */
	size_t out_cap;     /* stdout bytes kept (more are read and dropped) */
	int timeout_ms;     /* > 0 */
	/* out */
	char *out;          /* NUL-terminated, malloc'd (free with sup_run_free) */
	size_t out_len;
	bool out_trunc;
	char *err;          /* stderr, up to 64 KiB, NUL-terminated */
	size_t err_len;
	int status;         /* waitpid status */
	bool timed_out;
};

/* Starts argv with stdin in_fd and stdout out_fd (-1: /dev/null), stderr
 * to /dev/null, in a process group of its own, every other fd closed.
 * Returns the pid or -errno. */
pid_t sup_spawn(char *const *argv, int in_fd, int out_fd);
/* Waits for pid until deadline (CLOCK_MONOTONIC ms), then kills its group.
 * Returns the waitpid status; *timed_out says whether it was killed. */
int sup_reap(pid_t pid, long long deadline_ms, bool *timed_out);
/* Runs r->argv to completion or to r->timeout_ms. 0 (see r->status and
 * r->timed_out) or -errno when it could not start. */
int sup_run(struct sup_run *r);
void sup_run_free(struct sup_run *r);
/* A one-line summary of how it ended, stderr's last line included. */
void sup_run_why(const struct sup_run *r, char *buf, size_t n);
long long sup_now_ms(void);

#endif

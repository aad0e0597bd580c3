/* main.c: sluice-agent's entry point and its PID 1 duties.
 *
 *   sluice-agent --fd N        serve the stream inherited as fd N, exit
 *                              when the host closes it
 *   sluice-agent --port PATH   open PATH (/dev/hvc0, /dev/vport0p1, ...)
 *                              and serve it; when the host goes away, open
 *                              it again: PID 1 of a VM must never exit
 *
 * As PID 1 (or as a child subreaper otherwise) it reaps every orphan. It
 * never resolves users or hosts, so the static binary needs no NSS.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

static void
usage(FILE *f)
{
	fprintf(f, "usage: sluice-agent --fd N | --port PATH\n"
		   "Serves the sluice agent protocol (agent/proto.h) on an "
		   "inherited fd or a serial port.\n");
}

static int
open_port(const char *path)
{
	int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	struct termios t;

	if (fd < 0)
		return -1;
	if (tcgetattr(fd, &t) == 0) {
		/* a console: bytes, not lines, and no echo */
		cfmakeraw(&t);
		tcsetattr(fd, TCSANOW, &t);
	}
	return fd;
}

int
main(int argc, char **argv)
{
	const char *port = NULL;
	int fd = -1;
	sigset_t set;
	char err[256];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fd") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v < 0 || v > 65535) {
				fprintf(stderr, "sluice-agent: --fd %s: want a "
						"file descriptor number\n",
					argv[i]);
				return 2;
			}
			fd = (int)v;
		} else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			port = argv[++i];
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("sluice-agent %s (protocol %d)\n",
			       SLUICE_VERSION, AGENT_PROTO_VERSION);
			return 0;
		} else if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if ((fd < 0) == (port == NULL)) {
		fprintf(stderr, "sluice-agent: give exactly one of --fd N and "
				"--port PATH\n");
		return 2;
	}

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (getpid() != 1)
		prctl(PR_SET_CHILD_SUBREAPER, 1);

	for (;;) {
		struct agent a;
		int rc;

		if (port) {
			fd = open_port(port);
			if (fd < 0) {
				fprintf(stderr, "sluice-agent: %s: %s\n", port,
					strerror(errno));
				if (getpid() != 1)
					return 1;
				sleep(1);
				continue;
			}
		}
		if (agent_init(&a, fd, environ, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-agent: %s\n", err);
			return 1;
		}
		rc = agent_run(&a);
		agent_fini(&a);
		/* children were killed; collect them */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (port == NULL)
			return rc < 0 ? 1 : 0;
		usleep(100 * 1000);
	}
}

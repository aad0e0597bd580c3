/* main.c: sluice-agent's entry point and its PID 1 duties.
 *
 *   sluice-agent --fd N        serve the stream inherited as fd N, exit
 *                              when the host closes it
 *   sluice-agent --fd N --listen PATH
 *                              serve fd N; when the host closes it, wait
 *                              for the next host on the unix socket PATH
 *                              (made at start, mode 0600) and serve it,
 *                              one at a time, forever: the sandbox
 *                              outlives its host, which reconnects. Only
 *                              peers outside our pid namespace are
 *                              accepted (see listen.c)
 *   sluice-agent --listen PATH
 *                              as with --fd, but no host to begin with:
 *                              wait for the first host on PATH (a
 *                              container's PID 1 that the `rpc` backend's
 *                              supervisor starts: docs/backend-rpc.md)
 *   sluice-agent --port PATH   open PATH (/dev/hvc0, /dev/vport0p1, ...)
 *                              and serve it; when the host goes away, wait
 *                              for the next one on it (a virtio port
 *                              reports POLLHUP while no host is connected:
 *                              checked every PORT_WAIT_MS, never spun on);
 *                              a tty or a failed port is opened again
 *   sluice-agent               as PID 1 only: a VM's /init (init.c), then
 *                              --port on the virtio port named by the
 *                              kernel command line's sluice.port=, forever
 *
 * As PID 1 (or as a child subreaper otherwise) it reaps every orphan. It
 * never resolves users or hosts, so the static binary needs no NSS.
 * SIGTERM ends it promptly in every mode (its commands are killed); as
 * PID 1 of a pid namespace only a SIGTERM from outside counts; as a VM's
 * init SIGTERM, SIGINT and SIGHUP are ignored (the host ends the VM
 * through QEMU), and nothing makes it exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"

#define PORT_WAIT_MS 50         /* between checks for a host on a port;
				   a virtio port's SIGIO (host connected)
				   cuts the wait short */

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

static void
usage(FILE *f)
{
	fprintf(f, "usage: sluice-agent --fd N [--listen PATH] | --listen PATH | --port PATH\n"
		   "       (as PID 1 without arguments: a VM's /init)\n"
		   "Serves the sluice agent protocol (agent/proto.h) on an "
		   "inherited fd or a serial port.\n"
		   "With --listen, a host that went away reconnects on the unix "
		   "socket PATH.\n");
}

/* Waits for a host on lfd, reaping orphans meanwhile. The host's fd, or
 * -1 when a SIGTERM ended the wait (or the socket failed: *term then
 * stays false). */
static int
wait_host(int lfd, bool *term)
{
	sigset_t set;
	int sfd, fd = -1;

	*term = false;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	for (;;) {
		struct pollfd p[2] = { { lfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		struct signalfd_siginfo si;

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (poll(p, 2, sfd < 0 ? 1000 : -1) < 0 && errno != EINTR)
			break;
		while (sfd >= 0 &&
		       read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM &&
			    agent_term_ok(si.ssi_pid, getpid() == 1))
				*term = true;
		if (*term)
			break;
		if (p[0].revents & (POLLERR | POLLNVAL))
			break;
		if (p[0].revents & POLLIN) {
			fd = agent_accept_host(lfd, NULL);
			if (fd >= 0)
				break;
			/* Every accept error is transient here (a refused
			 * guest, a peer gone, memory or fds short under the
			 * guest's own limits): PID 1 must not exit on it. */
			if (fd != -EPERM && fd != -EAGAIN && fd != -ECONNABORTED)
				usleep(10000);
			fd = -1;
		}
	}
	if (sfd >= 0)
		close(sfd);
	return fd < 0 ? -1 : fd;
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

/* Waits on the port fd for a host. Returns 1 when one is connected (no
 * POLLHUP), 0 when an accepted SIGTERM ended the wait, -1 when the port
 * failed (open it again). Reaps orphans meanwhile. */
static int
wait_port_host(int fd, int sigfd)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		struct pollfd ps = { sigfd, POLLIN, 0 };
		struct signalfd_siginfo si;
		bool term = false;

		if (poll(&p, 1, 0) < 0 && errno != EINTR)
			return -1;
		if (p.revents & (POLLERR | POLLNVAL))
			return -1;
		if (!(p.revents & POLLHUP)) {
			/* no SIGIO for every byte of the session */
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_ASYNC);
			return 1;
		}
		/* virtio_console sends SIGIO when the host connects or goes;
		 * it waits in sigfd (blocked), so one raised between the
		 * check above and the wait below is not lost */
		if (!(fcntl(fd, F_GETFL) & O_ASYNC)) {
			fcntl(fd, F_SETOWN, getpid());
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
		}
		/* no host: a virtio port says POLLHUP at once, so sleep
		 * (on the signals) instead of polling it again */
		if (sigfd < 0) {
			usleep(PORT_WAIT_MS * 1000);
			continue;
		}
		if (poll(&ps, 1, PORT_WAIT_MS) < 0 && errno != EINTR)
			usleep(PORT_WAIT_MS * 1000);
		while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM &&
			    agent_term_ok(si.ssi_pid, getpid() == 1))
				term = true;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (term)
			return 0;
	}
}

/* Serves the port at path, host after host. forever (a VM's init): never
 * returns. Otherwise returns the exit status: 0 after a SIGTERM, 1 when
 * the port cannot be opened (as PID 1 of a namespace it keeps trying). */
static int
serve_port(const char *path, bool forever, struct agent_defaults *defs)
{
	sigset_t set;
	int fd = -1, sigfd;
	bool said = false;
	char err[256];

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGIO);
	{
		sigset_t io;

		sigemptyset(&io);
		sigaddset(&io, SIGIO);
		sigprocmask(SIG_BLOCK, &io, NULL);
	}
	sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	for (;;) {
		struct agent a;
		bool term, dead;
		int rc, sfd;

		if (fd < 0) {
			fd = open_port(path);
			if (fd < 0) {
				if (!said)
					fprintf(stderr, "sluice-agent: %s: %s\n",
						path, strerror(errno));
				said = true;
				if (!forever && getpid() != 1)
					return 1;
				sleep(1);
				continue;
			}
			said = false;
		}
		rc = wait_port_host(fd, sigfd);
		if (rc == 0 && !forever)
			return 0;
		if (rc == 0)
			continue;
		if (rc < 0) {
			close(fd);
			fd = -1;
			usleep(PORT_WAIT_MS * 1000);
			continue;
		}
		/* the session gets its own fd: agent_fini closes it, the
		 * port stays open (closing it would drop bytes a new host
		 * already sent) */
		sfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (sfd < 0 || agent_init(&a, sfd, environ, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-agent: %s\n",
				sfd < 0 ? strerror(errno) : err);
			if (sfd >= 0)
				close(sfd);
			if (!forever)
				return 1;
			sleep(1);
			continue;
		}
		a.defaults = defs;
		agent_run(&a);
		term = a.term;
		dead = a.dead;
		agent_fini(&a);
		/* children were killed; collect them */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (term && !forever)
			return 0;
		if (dead || isatty(fd)) {
			/* a hung-up tty stays hung up; an I/O error may too */
			close(fd);
			fd = -1;
			usleep(PORT_WAIT_MS * 1000);
		}
	}
}

/* A VM's PID 1 must never exit (the guest would panic), and out of
 * memory the agent does exit. So PID 1 only reaps and supervises: the
 * agent proper serves the port in a child (a subreaper for its own
 * commands' orphans), started again if it ever ends. What "configure"
 * set lives in that child and is lost with it; the host's next
 * "configure" sets it again. Never returns. */
#define AGENT_DEFAULTS_FILE "/run/sluice-agent.defaults"

static void __attribute__((noreturn))
vm_supervise(const char *vport, struct agent_defaults *defs)
{
	for (;;) {
		pid_t server = fork();
		int st = 0;

		if (server == 0) {
			prctl(PR_SET_CHILD_SUBREAPER, 1);
			agent_defaults_file = AGENT_DEFAULTS_FILE;
			if (agent_defaults_load(defs, agent_defaults_file) == -EINVAL)
				fprintf(stderr, "sluice-agent: %s: malformed; not used\n",
					agent_defaults_file);
			for (;;)
				serve_port(vport, true, defs);
		}
		if (server < 0) {
			fprintf(stderr, "sluice-agent: fork: %s\n", strerror(errno));
			sleep(1);
			continue;
		}
		for (;;) {
			pid_t p = wait(&st);

			if (p == server)
				break;
			if (p < 0 && errno != EINTR) {
				sleep(1); /* ECHILD cannot be: the server is ours */
				break;
			}
		}
		fprintf(stderr, "sluice-agent: the agent ended (%s %d); starting it again\n",
			WIFSIGNALED(st) ? "signal" : "status",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		usleep(100 * 1000);
	}
}

int
main(int argc, char **argv)
{
	static struct agent_defaults defs; /* "configure": for every host */
	const char *port = NULL, *listen_path = NULL;
	int fd = -1, lfd = -1;
	sigset_t set;
	char err[256];

	if (argc == 1 && getpid() == 1) {
		char vport[300];

		/* a VM's /init: nothing may end us, nothing makes us exit */
		signal(SIGPIPE, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		sigprocmask(SIG_BLOCK, &set, NULL);
		agent_vm_init(vport, sizeof(vport));
		vm_supervise(vport, &defs);
	}

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
		} else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
			listen_path = argv[++i];
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
	/* --listen alone: no first host, wait for one on the socket */
	if ((fd < 0 && !listen_path) == (port == NULL)) {
		fprintf(stderr, "sluice-agent: give exactly one of --fd N, "
				"--listen PATH and --port PATH\n");
		return 2;
	}
	if (listen_path && port) {
		fprintf(stderr, "sluice-agent: --listen does not go with --port\n");
		return 2;
	}

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (getpid() != 1)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (port)
		return serve_port(port, false, &defs);
	if (listen_path) {
		/* Made before the first host is served, so that once it has
		 * our hello the socket exists. */
		lfd = agent_listen(listen_path, err, sizeof(err));
		if (lfd < 0) {
			fprintf(stderr, "sluice-agent: %s\n", err);
			return 1;
		}
	}

	for (;;) {
		struct agent a;
		bool term;
		int rc, next;

		if (fd < 0 && lfd >= 0) {
			fd = wait_host(lfd, &term);
			if (fd < 0) {
				unlink(listen_path);
				return term ? 0 : 1;
			}
		}

		if (agent_init(&a, fd, environ, err, sizeof(err)) < 0) {
			fprintf(stderr, "sluice-agent: %s\n", err);
			return 1;
		}
		a.listen_fd = lfd;
		a.defaults = &defs;
		rc = agent_run(&a);
		next = a.next_fd;
		a.next_fd = -1;
		term = a.term;
		agent_fini(&a);
		fd = -1;
		/* children were killed; collect them */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (term) {
			if (next >= 0)
				close(next);
			if (listen_path)
				unlink(listen_path);
			return 0;
		}
		if (lfd >= 0) {
			/* a host that connected meanwhile goes first */
			fd = next;
			continue;
		}
		return rc < 0 ? 1 : 0;
	}
}

/* listen.c: the agent's listening socket (`--listen PATH`), through which
 * a restarted host reconnects to a sandbox that outlived it. See agent.h.
 *
 * Only a peer outside the agent's pid namespace may become the host: the
 * kernel reports SO_PEERCRED's pid as 0 for a peer it cannot name in the
 * reader's namespace, which for the PID 1 of a sandbox means a process in
 * an ancestor namespace (the host). A guest process has a pid here and is
 * refused by closing it, so it cannot take the agent while the host is
 * away. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"

bool
agent_peer_is_host(const struct ucred *uc)
{
	return uc != NULL && uc->pid == 0;
}

/* mkdir -p of path's parent directories, 0700 for the ones made here. */
static int
mkparents(const char *path)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int
agent_listen(const char *path, char *err, size_t errsz)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, rc;

	if (path == NULL || path[0] != '/' ||
	    strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errsz, "--listen %s: want an absolute path under "
			 "%zu bytes", path ? path : "(null)", sizeof(sa.sun_path));
		return -EINVAL;
	}
	if ((rc = mkparents(path)) < 0) {
		snprintf(err, errsz, "--listen %s: parent directory: %s", path,
			 strerror(-rc));
		return rc;
	}
	/* A socket left by an earlier agent goes; anything else stays. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errsz, "--listen %s: exists and is not a "
				 "socket; remove it", path);
			return -EEXIST;
		}
		unlink(path);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "--listen: socket: %s", strerror(errno));
		return rc;
	}
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, 8) < 0) {
		rc = -errno;
		snprintf(err, errsz, "--listen %s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

int
agent_accept_host(int lfd, struct ucred *peer)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	int fd;

	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 ||
	    len != sizeof(uc)) {
		close(fd);
		return -EPERM;
	}
	if (peer)
		*peer = uc;
	if (!agent_peer_is_host(&uc)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

bool
agent_term_ok(uint32_t sender_pid, bool is_ns_init)
{
	/* As PID 1 of a sandbox, only the host (pid 0 here) may end us. */
	return !is_ns_init || sender_pid == 0;
}

/* test_listen.c: the agent's --listen socket (agent/listen.c): the peer
 * check and the SIGTERM check (pure), the socket's creation, and accept
 * refusing a peer in our own pid namespace. As root it also checks the
 * other side: an agent that is PID 1 of a new pid namespace accepts a
 * peer from outside (the kernel reports pid 0 for it). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"

#include "agent.h"

static char dir[64];

static int
setup(void **st)
{
	(void)st;
	snprintf(dir, sizeof(dir), "/tmp/sl-test-listen.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int
teardown(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_pure(void **st)
{
	struct ucred uc = { .pid = 0, .uid = 0, .gid = 0 };

	(void)st;
	assert_false(agent_peer_is_host(NULL));
	assert_true(agent_peer_is_host(&uc));
	uc.pid = 1;
	assert_false(agent_peer_is_host(&uc));
	uc.pid = 4242;
	assert_false(agent_peer_is_host(&uc));
	/* uid 0 inside is no reason to trust a peer */
	uc.uid = 0;
	assert_false(agent_peer_is_host(&uc));

	/* outside a sandbox anyone may stop us; as its PID 1 only the host */
	assert_true(agent_term_ok(4242, false));
	assert_true(agent_term_ok(0, false));
	assert_true(agent_term_ok(0, true));
	assert_false(agent_term_ok(7, true));
}

static void
test_listen_bad(void **st)
{
	char err[256], path[200];
	int fd;

	(void)st;
	assert_int_equal(agent_listen(NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(agent_listen("relative.sock", err, sizeof(err)), -EINVAL);
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = 0;
	assert_int_equal(agent_listen(path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "absolute"));
	/* something that is not a socket is left alone */
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(agent_listen(path, err, sizeof(err)), -EEXIST);
	assert_int_equal(access(path, F_OK), 0);
}

static int
connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd;

	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -1;      /* too long for a socket address */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void
test_listen_refuses_own_namespace(void **st)
{
	char err[256], path[128], b;
	struct stat sb;
	struct ucred uc;
	int lfd, lfd2, c;

	(void)st;
	snprintf(path, sizeof(path), "%s/run/sluice/agent.sock", dir);
	lfd = agent_listen(path, err, sizeof(err));
	assert_true(lfd >= 0);
	/* parents made 0700, the socket 0600 */
	assert_int_equal(lstat(path, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0600);
	*strrchr(path, '/') = 0;
	assert_int_equal(lstat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	strcat(path, "/agent.sock");

	assert_int_equal(agent_accept_host(lfd, NULL), -EAGAIN);
	c = connect_to(path);
	assert_true(c >= 0);
	/* our own pid is visible to us: not the host */
	memset(&uc, 0xff, sizeof(uc));
	assert_int_equal(agent_accept_host(lfd, &uc), -EPERM);
	assert_int_equal((int)uc.pid, (int)getpid());
	/* and the refused peer sees its connection closed */
	assert_int_equal(read(c, &b, 1), 0);
	close(c);
	assert_int_equal(agent_accept_host(lfd, NULL), -EAGAIN);

	/* a second agent replaces a stale socket */
	lfd2 = agent_listen(path, err, sizeof(err));
	assert_true(lfd2 >= 0);
	close(lfd2);
	close(lfd);
}

/* As root: the listener is PID 1 of a new pid namespace, we connect from
 * outside, and it must accept us (pid 0) while refusing its own child. */
static void
test_accepts_from_outside(void **st)
{
	char path[128], err[256];
	int sync[2], status;
	pid_t outer;

	(void)st;
	if (geteuid() != 0) {
		sl_skip("accepts_from_outside: a pid namespace needs root");
		return;
	}
	snprintf(path, sizeof(path), "%s/ns.sock", dir);
	assert_int_equal(pipe(sync), 0);
	outer = fork();
	assert_true(outer >= 0);
	if (outer == 0) {
		pid_t init;

		close(sync[0]);
		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		init = fork();
		if (init < 0)
			_exit(2);
		if (init == 0) {
			/* PID 1 of the new namespace */
			int lfd = agent_listen(path, err, sizeof(err)), fd = -1, own;
			struct ucred uc;
			pid_t kid;

			if (getpid() != 1 || lfd < 0)
				_exit(3);
			/* a process of our own namespace is refused */
			kid = fork();
			if (kid == 0) {
				int c = connect_to(path);
				char b;
				_exit(c >= 0 && read(c, &b, 1) == 0 ? 0 : 1);
			}
			for (int i = 0; i < 200; i++) {
				own = agent_accept_host(lfd, &uc);
				if (own != -EAGAIN)
					break;
				usleep(10000);
			}
			if (own != -EPERM || uc.pid != kid)
				_exit(4);
			if (waitpid(kid, &own, 0) != kid || !WIFEXITED(own) ||
			    WEXITSTATUS(own) != 0)
				_exit(5);
			/* now let the outside connect */
			if (write(sync[1], "r", 1) != 1)
				_exit(6);
			for (int i = 0; i < 500 && fd < 0; i++) {
				fd = agent_accept_host(lfd, &uc);
				if (fd == -EAGAIN) {
					usleep(10000);
					fd = -1;
				} else if (fd < 0) {
					_exit(7);
				}
			}
			if (fd < 0 || uc.pid != 0)
				_exit(8);
			if (write(fd, "y", 1) != 1)
				_exit(9);
			_exit(0);
		}
		if (waitpid(init, &status, 0) != init)
			_exit(10);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 11);
	}
	close(sync[1]);
	{
		char b = 0;
		int c;

		if (read(sync[0], &b, 1) != 1) {
			/* the child gave up before listening */
			close(sync[0]);
			assert_int_equal(waitpid(outer, &status, 0), outer);
			if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
				fail_msg("unshare(CLONE_NEWPID) failed as root");
			fail_msg("the namespace's PID 1 failed: status %d", status);
		}
		c = connect_to(path);
		assert_true(c >= 0);
		assert_int_equal(read(c, &b, 1), 1);
		assert_int_equal(b, 'y');
		close(c);
	}
	close(sync[0]);
	assert_int_equal(waitpid(outer, &status, 0), outer);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pure),
		cmocka_unit_test(test_listen_bad),
		cmocka_unit_test(test_listen_refuses_own_namespace),
		cmocka_unit_test(test_accepts_from_outside),
	};
	return sl_main_exit(cmocka_run_group_tests(tests, setup, teardown));
}

/* qmp.c: a small blocking QMP client for the `vm` backend. Every call
 * takes an absolute deadline (CLOCK_MONOTONIC ms); events that arrive
 * while a command waits are skipped, and so is any reply whose "id" is not
 * the command's. A command that times out or loses step marks the
 * connection broken; the next command reconnects. The framing, message
 * parsing and command encoding are pure (sbx_qmp_frame, sbx_qmp_parse,
 * sbx_qmp_line) and unit-tested. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "vm-int.h"

struct sbx_qmp {
	int fd;
	bool broken;   /* out of step: reconnect before the next command */
	bool skipping; /* dropping the rest of an over-long line */
	int want_pid;
	long long next_id;
	char path[108];
	size_t len;
	char buf[SBX_QMP_LINE_MAX];
};

int
sbx_qmp_frame(const char *buf, size_t len, size_t cap, size_t *linelen)
{
	const char *nl = len ? memchr(buf, '\n', len) : NULL;

	if (nl) {
		*linelen = (size_t)(nl - buf);
		return 1;
	}
	return len >= cap ? -EMSGSIZE : 0;
}

int
sbx_qmp_parse(const char *line, size_t len, struct sbx_qmp_msg *out, char *err, size_t errsz)
{
	json_error_t je;
	json_t *j, *v;
	const char *s;

	memset(out, 0, sizeof(*out));
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_fail(err, errsz, -EPROTO, "qmp: not JSON: %s", je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_fail(err, errsz, -EPROTO, "qmp: not a JSON object");
	}
	out->id = -1;
	if (json_is_integer(json_object_get(j, "id")))
		out->id = (long long)json_integer_value(json_object_get(j, "id"));
	if ((v = json_object_get(j, "return"))) {
		out->kind = SBX_QMP_RETURN;
		out->value = json_incref(v);
	} else if ((v = json_object_get(j, "error"))) {
		const char *cls = json_string_value(json_object_get(v, "class"));
		const char *desc = json_string_value(json_object_get(v, "desc"));
		if (!json_is_object(v) || !cls) {
			json_decref(j);
			return sbx_fail(err, errsz, -EPROTO, "qmp: an error with no class");
		}
		out->kind = SBX_QMP_ERROR;
		snprintf(out->name, sizeof(out->name), "%s", cls);
		snprintf(out->desc, sizeof(out->desc), "%s", desc ? desc : "");
	} else if ((s = json_string_value(json_object_get(j, "event")))) {
		out->kind = SBX_QMP_EVENT;
		snprintf(out->name, sizeof(out->name), "%s", s);
	} else if (json_is_object(json_object_get(j, "QMP"))) {
		out->kind = SBX_QMP_GREETING;
	} else {
		json_decref(j);
		return sbx_fail(err, errsz, -EPROTO, "qmp: a message of no known shape");
	}
	json_decref(j);
	return 0;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *
sbx_qmp_line(const char *cmd, const json_t *args, long long id, size_t *len)
{
	json_t *j = json_pack("{s:s, s:I}", "execute", cmd, "id", (json_int_t)id);
	char *txt, *line;
	size_t n;

	if (j && args && json_object_set(j, "arguments", (json_t *)(uintptr_t)args) < 0) {
		json_decref(j);
		return NULL;
	}
	txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!txt)
		return NULL;
	n = strlen(txt);
	if (!(line = realloc(txt, n + 2))) {
		free(txt);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	*len = n + 1;
	return line;
}

/* Drops the first n bytes of q->buf. */
static void
consume(struct sbx_qmp *q, size_t n)
{
	memmove(q->buf, q->buf + n, q->len - n);
	q->len -= n;
}

/* Frames the next line out of q->buf, dropping the rest of an over-long
 * line: 1 with *ll, or 0 when more is needed. */
static int
next_line(struct sbx_qmp *q, size_t *ll)
{
	for (;;) {
		int r = sbx_qmp_frame(q->buf, q->len, sizeof(q->buf), ll);
		if (r == 1 && q->skipping) {
			consume(q, *ll + 1);
			q->skipping = false;
			continue;
		}
		if (r == 1)
			return 1;
		if (r < 0) { /* no newline in a full buffer: skip to the next one */
			q->skipping = true;
			q->len = 0;
		} else if (q->skipping) {
			q->len = 0;
		}
		return 0;
	}
}

/* The next message (any kind) until deadline. */
static int
read_msg(struct sbx_qmp *q, struct sbx_qmp_msg *m, int64_t deadline, char *err, size_t errsz)
{
	for (;;) {
		size_t ll;
		int r;
		if (next_line(q, &ll) == 1) {
			r = sbx_qmp_parse(q->buf, ll, m, err, errsz);
			consume(q, ll + 1);
			if (r < 0 || ll == 0) {
				if (r < 0)
					return r;
				continue;
			}
			return 0;
		}
		struct pollfd pfd = {.fd = q->fd, .events = POLLIN};
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return sbx_fail(err, errsz, -ETIMEDOUT, "qmp: no answer in time");
		r = poll(&pfd, 1, (int)(left > 60000 ? 60000 : left));
		if (r < 0 && errno != EINTR)
			return sbx_fail(err, errsz, -errno, "qmp: poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		ssize_t n = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return sbx_fail(err, errsz, -errno, "qmp: read: %s", strerror(errno));
		if (n == 0)
			return sbx_fail(err, errsz, -EPIPE, "qmp: QEMU closed the monitor");
		q->len += (size_t)n;
	}
}

/* Discards whatever complete lines are waiting (events, stale replies)
 * without blocking; a partial line stays. -EPIPE if QEMU closed. */
static int
drain(struct sbx_qmp *q)
{
	for (;;) {
		size_t ll;
		while (next_line(q, &ll) == 1)
			consume(q, ll + 1);
		ssize_t n = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -EPIPE;
		q->len += (size_t)n;
	}
}

/* Sends s[0..n), the first byte carrying fd (>= 0) as SCM_RIGHTS. */
static int
send_all(struct sbx_qmp *q, const char *s, size_t n, int fd, int64_t deadline, char *err,
         size_t errsz)
{
	while (n) {
		ssize_t w;
		if (fd >= 0) {
			union {
				struct cmsghdr h;
				char b[CMSG_SPACE(sizeof(int))];
			} u;
			struct iovec iov = {.iov_base = (void *)(uintptr_t)s, .iov_len = n};
			struct msghdr mh = {.msg_iov = &iov,
			                    .msg_iovlen = 1,
			                    .msg_control = u.b,
			                    .msg_controllen = sizeof(u.b)};
			memset(&u, 0, sizeof(u));
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
			w = sendmsg(q->fd, &mh, MSG_NOSIGNAL);
		} else {
			w = send(q->fd, s, n, MSG_NOSIGNAL);
		}
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = q->fd, .events = POLLOUT};
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return sbx_fail(err, errsz, -ETIMEDOUT, "qmp: send timed out");
			poll(&pfd, 1, (int)left);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return sbx_fail(err, errsz, errno == EPIPE ? -EPIPE : -errno,
			                "qmp: send: %s", strerror(errno));
		if (w > 0)
			fd = -1; /* it went with the first byte */
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Has pid ended (gone, or a zombie waiting for its parent)? */
static bool
pid_ended(int pid)
{
	char path[64], buf[512];
	const char *rp;
	ssize_t n;
	int fd;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

int
sbx_vm_unix_connect(const char *path, int want_pid, int64_t deadline_ms, char *err, size_t errsz)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, e;

	if (sbx_pathf(sa.sun_path, sizeof(sa.sun_path), "%s", path) < 0)
		return sbx_fail(err, errsz, -ENAMETOOLONG, "%s: too long for a socket", path);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return sbx_fail(err, errsz, -errno, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		e = errno;
		if (e == EINPROGRESS) {
			/* not what a unix socket does today, but bounded all the same */
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			int64_t left = deadline_ms - now_ms();
			socklen_t el = sizeof(e);
			if (left > 0 && poll(&pfd, 1, (int)left) > 0) {
				if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
					break;
			} else {
				e = ETIMEDOUT;
			}
		}
		close(fd);
		/* ENOENT/ECONNREFUSED: not listening yet; EAGAIN: its backlog
		 * (of one) is full */
		if ((e != ENOENT && e != ECONNREFUSED && e != EAGAIN) || now_ms() >= deadline_ms)
			return sbx_fail(err, errsz, -e, "connect %s: %s", path, strerror(e));
		if (want_pid > 0 && pid_ended(want_pid))
			return sbx_fail(err, errsz, -ESRCH, "connect %s: QEMU (pid %d) has exited",
			                path, want_pid);
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	}
	if (want_pid > 0) {
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 || uc.pid != want_pid) {
			close(fd);
			return sbx_fail(err, errsz, -EPERM, "%s is not QEMU's socket (pid %d)",
			                path, want_pid);
		}
	}
	return fd;
}

/* (Re)connects q: greeting, capabilities. */
static int qmp_connect(struct sbx_qmp *q, int64_t deadline_ms, char *err, size_t errsz);

int
sbx_qmp_cmd_fd(struct sbx_qmp *q, const char *cmd, const json_t *args, int fd, json_t **ret,
               int64_t deadline_ms, char *err, size_t errsz)
{
	char *line;
	size_t n;
	long long id;
	int rc;

	if (ret)
		*ret = NULL;
	if (!q)
		return sbx_fail(err, errsz, -EPIPE, "qmp: not connected");
	if ((q->broken || q->fd < 0) && (rc = qmp_connect(q, deadline_ms, err, errsz)) < 0)
		return rc;
	if (drain(q) < 0) {
		q->broken = true;
		return sbx_fail(err, errsz, -EPIPE, "qmp: QEMU closed the monitor");
	}
	id = ++q->next_id;
	if (!(line = sbx_qmp_line(cmd, args, id, &n)))
		return sbx_fail(err, errsz, -ENOMEM, "qmp: out of memory");
	rc = send_all(q, line, n, fd, deadline_ms, err, errsz);
	free(line);
	if (rc < 0) {
		q->broken = true;
		return rc;
	}
	for (;;) {
		struct sbx_qmp_msg m;
		if ((rc = read_msg(q, &m, deadline_ms, err, errsz)) < 0) {
			q->broken = true; /* a late reply would be out of step */
			return rc;
		}
		if (m.kind == SBX_QMP_RETURN && m.id == id) {
			if (ret)
				*ret = m.value;
			else
				json_decref(m.value);
			return 0;
		}
		json_decref(m.value);
		if (m.kind == SBX_QMP_ERROR && m.id == id)
			return sbx_fail(err, errsz, -EREMOTEIO, "qmp %s: %s: %s", cmd, m.name,
			                m.desc);
		/* events, a stray greeting, another command's reply: skipped */
	}
}

int
sbx_qmp_cmd(struct sbx_qmp *q, const char *cmd, const json_t *args, json_t **ret,
            int64_t deadline_ms, char *err, size_t errsz)
{
	return sbx_qmp_cmd_fd(q, cmd, args, -1, ret, deadline_ms, err, errsz);
}

static int
qmp_connect(struct sbx_qmp *q, int64_t deadline_ms, char *err, size_t errsz)
{
	struct sbx_qmp_msg m;
	int rc;

	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	q->len = 0;
	q->skipping = false;
	q->broken = true;
	if ((rc = q->fd = sbx_vm_unix_connect(q->path, q->want_pid, deadline_ms, err, errsz)) < 0)
		return rc;
	if ((rc = read_msg(q, &m, deadline_ms, err, errsz)) < 0)
		return rc;
	json_decref(m.value);
	if (m.kind != SBX_QMP_GREETING)
		return sbx_fail(err, errsz, -EPROTO, "qmp: no greeting from QEMU");
	q->broken = false;
	if ((rc = sbx_qmp_cmd(q, "qmp_capabilities", NULL, NULL, deadline_ms, err, errsz)) < 0)
		q->broken = true;
	return rc;
}

int
sbx_qmp_open(const char *path, int want_pid, int64_t deadline_ms, struct sbx_qmp **out, char *err,
             size_t errsz)
{
	struct sbx_qmp *q;
	int rc;

	*out = NULL;
	if (!(q = sbx_calloc(1, sizeof(*q))))
		return sbx_fail(err, errsz, -ENOMEM, "qmp: out of memory");
	q->fd = -1;
	q->want_pid = want_pid;
	if (sbx_pathf(q->path, sizeof(q->path), "%s", path) < 0) {
		free(q);
		return sbx_fail(err, errsz, -ENAMETOOLONG, "qmp: %s: too long for a socket", path);
	}
	if ((rc = qmp_connect(q, deadline_ms, err, errsz)) < 0) {
		char e2[256];
		snprintf(e2, sizeof(e2), "%s", err && errsz ? err : "");
		if (e2[0] && strncmp(e2, "qmp", 3) != 0)
			sbx_fail(err, errsz, rc, "qmp: %s", e2);
		sbx_qmp_close(q);
		return rc;
	}
	*out = q;
	return 0;
}

void
sbx_qmp_close(struct sbx_qmp *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q);
}

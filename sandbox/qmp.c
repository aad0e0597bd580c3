/* qmp.c: a small blocking QMP client for the `vm` backend. Every call
 * takes an absolute deadline (CLOCK_MONOTONIC ms); events that arrive
 * while a command waits are skipped. The framing and message parsing are
 * pure (sbx_qmp_frame, sbx_qmp_parse) and unit-tested. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* The next message (any kind) until deadline. */
static int
read_msg(struct sbx_qmp *q, struct sbx_qmp_msg *m, int64_t deadline, char *err, size_t errsz)
{
	for (;;) {
		size_t ll;
		int r = sbx_qmp_frame(q->buf, q->len, sizeof(q->buf), &ll);
		if (r < 0)
			return sbx_fail(err, errsz, -EPROTO, "qmp: a line over %zu bytes",
			                sizeof(q->buf));
		if (r == 1) {
			r = sbx_qmp_parse(q->buf, ll, m, err, errsz);
			memmove(q->buf, q->buf + ll + 1, q->len - ll - 1);
			q->len -= ll + 1;
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

static int
send_all(struct sbx_qmp *q, const char *s, size_t n, int64_t deadline, char *err, size_t errsz)
{
	while (n) {
		ssize_t w = send(q->fd, s, n, MSG_NOSIGNAL);
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
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int
sbx_qmp_cmd(struct sbx_qmp *q, const char *cmd, const json_t *args, json_t **ret,
            int64_t deadline_ms, char *err, size_t errsz)
{
	json_t *j;
	char *txt;
	int rc;

	if (ret)
		*ret = NULL;
	if (!q)
		return sbx_fail(err, errsz, -EPIPE, "qmp: not connected");
	j = json_pack("{s:s}", "execute", cmd);
	if (j && args)
		json_object_set(j, "arguments", (json_t *)(uintptr_t)args);
	txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!txt)
		return sbx_fail(err, errsz, -ENOMEM, "qmp: out of memory");
	size_t n = strlen(txt);
	char *line = realloc(txt, n + 2);
	if (!line) {
		free(txt);
		return sbx_fail(err, errsz, -ENOMEM, "qmp: out of memory");
	}
	line[n] = '\n';
	line[n + 1] = 0;
	rc = send_all(q, line, n + 1, deadline_ms, err, errsz);
	free(line);
	if (rc < 0)
		return rc;
	for (;;) {
		struct sbx_qmp_msg m;
		if ((rc = read_msg(q, &m, deadline_ms, err, errsz)) < 0)
			return rc;
		switch (m.kind) {
		case SBX_QMP_RETURN:
			if (ret)
				*ret = m.value;
			else
				json_decref(m.value);
			return 0;
		case SBX_QMP_ERROR:
			return sbx_fail(err, errsz, -EREMOTEIO, "qmp %s: %s: %s", cmd, m.name,
			                m.desc);
		default:
			break; /* events, a stray greeting: skipped */
		}
	}
}

int
sbx_qmp_open(const char *path, int want_pid, int64_t deadline_ms, struct sbx_qmp **out, char *err,
             size_t errsz)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sbx_qmp *q;
	struct sbx_qmp_msg m;
	int rc;

	*out = NULL;
	if (sbx_pathf(sa.sun_path, sizeof(sa.sun_path), "%s", path) < 0)
		return sbx_fail(err, errsz, -ENAMETOOLONG, "qmp: %s: too long for a socket", path);
	if (!(q = sbx_calloc(1, sizeof(*q))))
		return sbx_fail(err, errsz, -ENOMEM, "qmp: out of memory");
	for (;;) {
		q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (q->fd < 0) {
			rc = sbx_fail(err, errsz, -errno, "qmp: socket: %s", strerror(errno));
			goto fail;
		}
		if (connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		rc = -errno;
		close(q->fd);
		q->fd = -1;
		if ((rc != -ENOENT && rc != -ECONNREFUSED && rc != -EAGAIN) ||
		    now_ms() >= deadline_ms) {
			rc = sbx_fail(err, errsz, rc, "qmp: connect %s: %s", path, strerror(-rc));
			goto fail;
		}
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	}
	if (want_pid > 0) {
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		if (getsockopt(q->fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 ||
		    uc.pid != want_pid) {
			rc = sbx_fail(err, errsz, -EPERM, "qmp: %s is not QEMU's (pid %d)", path,
			              want_pid);
			goto fail;
		}
	}
	fcntl(q->fd, F_SETFL, O_NONBLOCK);
	if ((rc = read_msg(q, &m, deadline_ms, err, errsz)) < 0)
		goto fail;
	json_decref(m.value);
	if (m.kind != SBX_QMP_GREETING) {
		rc = sbx_fail(err, errsz, -EPROTO, "qmp: no greeting from QEMU");
		goto fail;
	}
	if ((rc = sbx_qmp_cmd(q, "qmp_capabilities", NULL, NULL, deadline_ms, err, errsz)) < 0)
		goto fail;
	*out = q;
	return 0;
fail:
	sbx_qmp_close(q);
	return rc;
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

/* rpc_client.c: one supervisor connection, calls multiplexed by id
 * (rpc_client.h). Leader/follower: no thread of its own. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rpc_client.h"
#include "rpc_frame.h"
#include "sandbox-int.h"

#define RBUF 65536

struct call {
	struct call *next;
	uint32_t id;
	bool done;
	int rc;
	int code;
	json_t *result;
	char err[256];
};

struct sbx_rpc_client {
	pthread_mutex_t mu; /* everything below but the fd's bytes */
	pthread_cond_t cv;  /* a call was done, or the reader's role is free */
	pthread_mutex_t wmu; /* one frame written at a time */
	int refs;
	int fd;       /* -1 once closed */
	int io;       /* threads inside a read or write of fd */
	bool dead;
	bool leader;  /* someone holds the reader's role */
	uint32_t next_id;
	struct call *calls;
	struct sbx_rpc_rd rd;
	uint8_t *rbuf;
	unsigned long unknown;
	char why[160]; /* why it died */
};

int64_t
sbx_rpc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct sbx_rpc_client *
sbx_rpc_client_new(int fd)
{
	struct sbx_rpc_client *c = sbx_calloc(1, sizeof(*c));
	pthread_condattr_t ca;
	int fl;

	if (!c || !(c->rbuf = malloc(RBUF))) {
		free(c);
		close(fd);
		return NULL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->wmu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->refs = 1;
	c->fd = fd;
	c->next_id = 1;
	return c;
}

/* Under mu: closes fd once nobody reads or writes it. */
static void
maybe_close(struct sbx_rpc_client *c)
{
	if (c->dead && c->io == 0 && c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
}

/* Under mu: the connection is dead; fail every call in flight. */
static void
kill_locked(struct sbx_rpc_client *c, const char *why)
{
	if (!c->dead) {
		c->dead = true;
		snprintf(c->why, sizeof(c->why), "%s", why);
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR); /* wakes a reader or writer */
	}
	for (struct call *k = c->calls; k; k = k->next) {
		if (k->done)
			continue;
		k->done = true;
		k->rc = -EPIPE;
		snprintf(k->err, sizeof(k->err), "supervisor connection lost: %s", c->why);
	}
	maybe_close(c);
	pthread_cond_broadcast(&c->cv);
}

void
sbx_rpc_client_close(struct sbx_rpc_client *c, const char *why)
{
	pthread_mutex_lock(&c->mu);
	kill_locked(c, why ? why : "closed");
	pthread_mutex_unlock(&c->mu);
}

void
sbx_rpc_client_ref(struct sbx_rpc_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->refs++;
	pthread_mutex_unlock(&c->mu);
}

void
sbx_rpc_client_unref(struct sbx_rpc_client *c)
{
	bool last;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	last = --c->refs == 0;
	if (last)
		kill_locked(c, "closed");
	pthread_mutex_unlock(&c->mu);
	if (!last)
		return;
	sbx_rpc_rd_free(&c->rd);
	free(c->rbuf);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->wmu);
	free(c);
}

bool
sbx_rpc_client_probe(struct sbx_rpc_client *c)
{
	bool up;

	pthread_mutex_lock(&c->mu);
	if (!c->dead && !c->leader && c->fd >= 0) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		char b;

		/* an idle connection has nothing to read: readable is EOF,
		 * an error, or bytes nobody asked for (left for the reader) */
		if (poll(&p, 1, 0) > 0 &&
		    ((p.revents & (POLLHUP | POLLERR)) || recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0))
			kill_locked(c, "the supervisor closed the connection");
	}
	up = !c->dead;
	pthread_mutex_unlock(&c->mu);
	return up;
}

bool
sbx_rpc_client_alive(struct sbx_rpc_client *c)
{
	bool up;

	pthread_mutex_lock(&c->mu);
	up = !c->dead;
	pthread_mutex_unlock(&c->mu);
	return up;
}

unsigned long
sbx_rpc_client_unknown(struct sbx_rpc_client *c)
{
	unsigned long n;

	pthread_mutex_lock(&c->mu);
	n = c->unknown;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static struct call *
find_call(struct sbx_rpc_client *c, uint32_t id)
{
	for (struct call *k = c->calls; k; k = k->next)
		if (k->id == id && !k->done)
			return k;
	return NULL;
}

static void
unlink_call(struct sbx_rpc_client *c, struct call *k)
{
	for (struct call **p = &c->calls; *p; p = &(*p)->next) {
		if (*p == k) {
			*p = k->next;
			return;
		}
	}
}

/* Under mu: one event from the reader. */
static void
on_event(struct sbx_rpc_client *c, const struct sbx_rpc_ev *ev)
{
	struct call *k;

	if (ev->kind == SBX_RPC_EV_BROKEN) {
		char why[96];

		snprintf(why, sizeof(why), "frame out of step (length %u)", ev->declared);
		kill_locked(c, why);
		return;
	}
	k = ev->id ? find_call(c, ev->id) : NULL;
	if (!k) {
		c->unknown++;
		if (ev->id)
			sbx_log(SBX_LOG_DEBUG, "supervisor: reply for no call in flight (id %u) dropped",
			        ev->id);
		return;
	}
	if (ev->kind == SBX_RPC_EV_OVERSIZE) {
		k->rc = -EMSGSIZE;
		snprintf(k->err, sizeof(k->err),
		         "supervisor: reply too large (%u bytes, at most %u)", ev->declared,
		         SBX_RPC_FRAME_MAX);
	} else {
		struct sbx_rpc_reply rep;
		int r = sbx_rpc_reply_parse(ev->body, ev->len, ev->id, &rep, k->err, sizeof(k->err));

		if (r == 0) {
			k->rc = 0;
			k->result = rep.result;
		} else if (r == 1) {
			k->rc = -sbx_rpc_code_errno(rep.code);
			k->code = rep.code;
			snprintf(k->err, sizeof(k->err), "%s", rep.message);
		} else {
			k->rc = r;
		}
	}
	k->done = true;
	pthread_cond_broadcast(&c->cv);
}

/* Under mu, holding the reader's role (c->io counted): bytes read. */
static void
on_bytes(struct sbx_rpc_client *c, const uint8_t *in, size_t n)
{
	size_t off = 0;

	while (!c->dead) {
		struct sbx_rpc_ev ev;
		size_t used;

		if (sbx_rpc_rd_feed(&c->rd, in + off, n - off, &used, &ev) < 0) {
			kill_locked(c, "out of memory for a reply");
			return;
		}
		off += used;
		if (ev.kind != SBX_RPC_EV_NONE)
			on_event(c, &ev);
		else if (off >= n)
			return;
	}
}

/* Under mu: read once (at most rem ms of waiting) as the reader. */
static void
lead(struct sbx_rpc_client *c, int64_t rem)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n = -1;
	int e = 0, pr;

	c->leader = true;
	c->io++;
	pthread_mutex_unlock(&c->mu);
	pr = poll(&p, 1, rem > 60000 ? 60000 : (int)rem);
	if (pr > 0) {
		n = recv(p.fd, c->rbuf, RBUF, MSG_DONTWAIT);
		e = errno;
	}
	pthread_mutex_lock(&c->mu);
	c->io--;
	c->leader = false;
	if (pr > 0 && !c->dead) {
		if (n > 0)
			on_bytes(c, c->rbuf, (size_t)n);
		else if (n == 0)
			kill_locked(c, "the supervisor closed the connection");
		else if (e != EAGAIN && e != EINTR) {
			char why[96];

			snprintf(why, sizeof(why), "read: %s", strerror(e));
			kill_locked(c, why);
		}
	}
	maybe_close(c);
	pthread_cond_broadcast(&c->cv); /* the role is free */
}

/* Writes buf whole before deadline. 0; -ETIMEDOUT with nothing written
 * (the connection is fine); else the connection is dead (-EPIPE). */
static int
write_frame(struct sbx_rpc_client *c, const uint8_t *buf, size_t len, int64_t deadline,
            char *err, size_t errsz)
{
	size_t off = 0;
	int fd, rc = 0;
	char why[96] = "";

	pthread_mutex_lock(&c->wmu);
	pthread_mutex_lock(&c->mu);
	if (c->dead) {
		sbx_fail(err, errsz, -EPIPE, "supervisor connection lost: %s", c->why);
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->wmu);
		return -EPIPE;
	}
	fd = c->fd;
	c->io++;
	pthread_mutex_unlock(&c->mu);
	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		int64_t rem;
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			snprintf(why, sizeof(why), "write: %s", strerror(errno));
			break;
		}
		rem = deadline - sbx_rpc_now_ms();
		if (rem <= 0) {
			if (off == 0)
				rc = -ETIMEDOUT;
			else
				snprintf(why, sizeof(why), "a request cut short by its deadline");
			break;
		}
		if (poll(&p, 1, rem > 60000 ? 60000 : (int)rem) < 0 && errno != EINTR) {
			snprintf(why, sizeof(why), "poll: %s", strerror(errno));
			break;
		}
	}
	pthread_mutex_lock(&c->mu);
	c->io--;
	if (why[0])
		kill_locked(c, why);
	if (c->dead && rc == 0 && off < len) {
		rc = -EPIPE;
		sbx_fail(err, errsz, rc, "supervisor connection lost: %s", c->why);
	}
	maybe_close(c);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(&c->wmu);
	if (rc == -ETIMEDOUT)
		sbx_fail(err, errsz, rc, "supervisor: deadline passed before the request was sent");
	return rc;
}

int
sbx_rpc_call(struct sbx_rpc_client *c, const char *method, const json_t *params, int64_t deadline,
             json_t **result, int *code, char *err, size_t errsz)
{
	struct call k = { 0 };
	uint8_t *buf = NULL;
	size_t len = 0;
	int64_t rem;
	int rc;

	*result = NULL;
	if (code)
		*code = 0;
	pthread_mutex_lock(&c->mu);
	if (c->dead) {
		rc = sbx_fail(err, errsz, -EPIPE, "supervisor connection lost: %s", c->why);
		pthread_mutex_unlock(&c->mu);
		return rc;
	}
	rem = deadline - sbx_rpc_now_ms();
	if (rem <= 0) {
		pthread_mutex_unlock(&c->mu);
		return sbx_fail(err, errsz, -ETIMEDOUT, "supervisor: %s: no time left for the call",
		                method);
	}
	do {
		k.id = c->next_id++;
	} while (k.id == 0 || find_call(c, k.id));
	k.next = c->calls;
	c->calls = &k;
	pthread_mutex_unlock(&c->mu);

	rc = sbx_rpc_req_build(k.id, method, params, rem, &buf, &len);
	if (rc == 0)
		rc = write_frame(c, buf, len, deadline, err, errsz);
	else
		sbx_fail(err, errsz, rc, "supervisor: %s: cannot build the request: %s", method,
		         strerror(-rc));
	free(buf);

	pthread_mutex_lock(&c->mu);
	if (rc == 0) {
		for (;;) {
			if (k.done) {
				rc = k.rc;
				if (rc < 0)
					sbx_fail(err, errsz, rc, "%s", k.err);
				break;
			}
			rem = deadline - sbx_rpc_now_ms();
			if (rem <= 0) {
				rc = sbx_fail(err, errsz, -ETIMEDOUT,
				              "supervisor: %s: no reply before the deadline", method);
				break;
			}
			if (!c->leader && !c->dead) {
				lead(c, rem);
			} else {
				struct timespec ts;

				clock_gettime(CLOCK_MONOTONIC, &ts);
				ts.tv_sec += rem / 1000;
				ts.tv_nsec += (rem % 1000) * 1000000;
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&c->cv, &c->mu, &ts);
			}
		}
	}
	unlink_call(c, &k);
	if (code)
		*code = k.code;
	pthread_mutex_unlock(&c->mu);
	if (rc == 0)
		*result = k.result;
	else
		json_decref(k.result);
	return rc;
}

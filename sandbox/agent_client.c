/* agent_client.c: the host side of the agent protocol. See agent_client.h.
 *
 * Requests wait in a FIFO (`pending`) until the output queue is short,
 * so that a call whose deadline passes while it waits is dropped without
 * a byte sent; anything else a call sends (input, credit, kill) first
 * pushes its request, and every request before it, into the queue. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "proto.h"

#define CONN_RBUF 65536
#define OUT_SOFT (256u * 1024) /* stop moving requests out above this */

struct sbx_agent_call {
	struct sbx_agent_conn *c;
	struct sbx_agent_call *next;    /* c->calls, or c->grave when done */
	struct sbx_agent_call *pnext;   /* c->pending */
	uint32_t id;
	bool hello;                     /* the stream-0 call */
	bool queued;                    /* request not yet in the output */
	bool done;
	bool manual_window;
	int64_t deadline;
	uint64_t credit;                /* input bytes the agent accepts */
	uint8_t *req;                   /* the opening frame while queued */
	size_t req_len;
	sbx_agent_cb cb;
	void *arg;
};

struct sbx_agent_conn {
	int fd;
	bool not_socket;        /* a tty or virtio port: write(), not send() */
	bool dead;
	int dead_rc;
	struct agent_dec dec;
	uint8_t *dec_buf;
	uint8_t *rbuf;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	struct sbx_agent_call *calls;
	struct sbx_agent_call *pending, *pending_tail;
	struct sbx_agent_call *grave;   /* ended: freed at a safe point */
	struct sbx_agent_call *hello_call;
	uint32_t next_id;
	struct sbx_agent_stats st;
};

int64_t
sbx_agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- output ------------------------------------------------------------ */

static int
out_put(struct sbx_agent_conn *c, const void *p, size_t n)
{
	uint8_t *q = agent_outq_room(&c->out, &c->out_off, c->out_len, &c->out_cap, n);

	if (q == NULL)
		return -ENOMEM;
	memcpy(q, p, n);
	c->out_len += n;
	return 0;
}

static int
out_frame(struct sbx_agent_conn *c, uint8_t type, uint32_t stream,
	  const void *p, size_t len)
{
	uint8_t h[AGENT_HDR_LEN];
	int rc;

	agent_hdr_put(h, type, stream, (uint32_t)len);
	if ((rc = out_put(c, h, sizeof(h))) < 0 ||
	    (len && (rc = out_put(c, p, len)) < 0))
		return rc;
	return 0;
}

static int
out_error(struct sbx_agent_conn *c, uint32_t stream, const char *code,
	  const char *msg)
{
	json_t *j = json_pack("{s:s, s:s}", AGENT_F_CODE, code,
			      AGENT_F_MESSAGE, msg);
	size_t len;
	char *s = j ? agent_json_dump(j, &len) : NULL;
	int rc = s ? out_frame(c, AGENT_FT_ERROR, stream, s, len) : -ENOMEM;

	free(s);
	json_decref(j);
	return rc;
}

/* Moves queued requests into the output, in order, up to and including
 * `upto` (NULL: while the output is short). */
static int
promote(struct sbx_agent_conn *c, struct sbx_agent_call *upto)
{
	while (c->pending) {
		struct sbx_agent_call *k = c->pending;
		int rc;

		if (upto == NULL && c->out_len >= OUT_SOFT)
			break;
		if ((rc = out_put(c, k->req, k->req_len)) < 0)
			return rc;
		c->pending = k->pnext;
		if (c->pending == NULL)
			c->pending_tail = NULL;
		k->pnext = NULL;
		k->queued = false;
		free(k->req);
		k->req = NULL;
		if (k == upto)
			break;
	}
	return 0;
}

static int
flush(struct sbx_agent_conn *c)
{
	while (c->out_len > 0) {
		/* MSG_NOSIGNAL: a dead agent must not SIGPIPE the daemon */
		ssize_t n = c->not_socket
				    ? write(c->fd, c->out + c->out_off, c->out_len)
				    : send(c->fd, c->out + c->out_off, c->out_len,
					   MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK) {
			c->not_socket = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return errno == EPIPE || errno == ECONNRESET ? -EPIPE
								    : -EIO;
		c->out_off += (size_t)n;
		c->out_len -= (size_t)n;
		if (c->out_len == 0) {
			c->out_off = 0;
			promote(c, NULL);
		}
	}
	c->out_off = 0;
	return 0;
}

/* ---- calls ------------------------------------------------------------- */

static void
unqueue(struct sbx_agent_conn *c, struct sbx_agent_call *k)
{
	struct sbx_agent_call **pp = &c->pending, *prev = NULL;

	while (*pp && *pp != k) {
		prev = *pp;
		pp = &(*pp)->pnext;
	}
	if (*pp == NULL)
		return;
	*pp = k->pnext;
	if (c->pending_tail == k)
		c->pending_tail = prev;
	k->pnext = NULL;
	k->queued = false;
	free(k->req);
	k->req = NULL;
}

/* Ends a call: no more callbacks; freed at the next safe point. */
static void
retire(struct sbx_agent_call *k)
{
	struct sbx_agent_conn *c = k->c;
	struct sbx_agent_call **pp = &c->calls;

	if (k->done)
		return;
	k->done = true;
	if (k->queued)
		unqueue(c, k);
	while (*pp && *pp != k)
		pp = &(*pp)->next;
	if (*pp)
		*pp = k->next;
	if (c->hello_call == k)
		c->hello_call = NULL;
	k->next = c->grave;
	c->grave = k;
}

static void
bury(struct sbx_agent_conn *c)
{
	while (c->grave) {
		struct sbx_agent_call *k = c->grave;

		c->grave = k->next;
		free(k->req);
		free(k);
	}
}

static void
deliver(struct sbx_agent_call *k, const struct sbx_agent_event *ev,
	bool terminal)
{
	if (k->done)
		return;
	if (terminal)
		retire(k);
	k->cb(k, ev, k->arg);
}

static void
fail_call(struct sbx_agent_call *k, const char *code, int err,
	  const char *msg)
{
	struct sbx_agent_event ev = { .kind = SBX_AGENT_EV_ERROR,
				      .code = code,
				      .message = msg,
				      .err = err };

	deliver(k, &ev, true);
}

static struct sbx_agent_call *
find_call(struct sbx_agent_conn *c, uint32_t id)
{
	for (struct sbx_agent_call *k = c->calls; k; k = k->next)
		if (k->id == id && !k->hello)
			return k;
	return NULL;
}

static void
conn_die(struct sbx_agent_conn *c, int rc, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	c->dead_rc = rc;
	while (c->calls)
		fail_call(c->calls, AGENT_E_CLOSED, -rc, why);
}

struct sbx_agent_conn *
sbx_agent_conn_new(int fd)
{
	struct sbx_agent_conn *c = calloc(1, sizeof(*c));

	if (c) {
		c->dec_buf = malloc(AGENT_PAYLOAD_MAX);
		c->rbuf = malloc(CONN_RBUF);
	}
	if (c == NULL || c->dec_buf == NULL || c->rbuf == NULL) {
		if (c) {
			free(c->dec_buf);
			free(c->rbuf);
		}
		free(c);
		close(fd);
		return NULL;
	}
	c->fd = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	agent_dec_init(&c->dec, c->dec_buf, AGENT_PAYLOAD_MAX);
	c->next_id = 1;
	return c;
}

void
sbx_agent_conn_free(struct sbx_agent_conn *c)
{
	if (c == NULL)
		return;
	conn_die(c, -EPIPE, "connection closed by the host");
	bury(c);
	close(c->fd);
	free(c->dec_buf);
	free(c->rbuf);
	free(c->out);
	free(c);
}

int
sbx_agent_fd_of(const struct sbx_agent_conn *c)
{
	return c->fd;
}

const struct sbx_agent_stats *
sbx_agent_stats(const struct sbx_agent_conn *c)
{
	return &c->st;
}

short
sbx_agent_want(const struct sbx_agent_conn *c, int64_t *deadline_ms)
{
	short ev = POLLIN;

	*deadline_ms = -1;
	if (c->dead)
		return 0;
	for (const struct sbx_agent_call *k = c->calls; k; k = k->next)
		if (k->deadline > 0 &&
		    (*deadline_ms < 0 || k->deadline < *deadline_ms))
			*deadline_ms = k->deadline;
	if (c->out_len > 0 || c->pending)
		ev |= POLLOUT;
	return ev;
}

static struct sbx_agent_call *
call_new(struct sbx_agent_conn *c, const struct sbx_agent_call_opts *opts,
	 sbx_agent_cb cb, void *arg, int *errp)
{
	struct sbx_agent_call *k;

	if (c->dead) {
		*errp = -EPIPE;
		return NULL;
	}
	if (opts && opts->deadline_ms > 0 &&
	    opts->deadline_ms <= sbx_agent_now_ms()) {
		*errp = -ETIMEDOUT;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (k == NULL) {
		*errp = -ENOMEM;
		return NULL;
	}
	k->c = c;
	k->cb = cb;
	k->arg = arg;
	if (opts) {
		k->deadline = opts->deadline_ms;
		k->manual_window = opts->manual_window;
	}
	return k;
}

/* Queues k's opening frame and links it in. Takes the frame bytes. */
static void
call_link(struct sbx_agent_conn *c, struct sbx_agent_call *k, uint8_t *frame,
	  size_t len)
{
	k->req = frame;
	k->req_len = len;
	k->queued = true;
	if (c->pending_tail)
		c->pending_tail->pnext = k;
	else
		c->pending = k;
	c->pending_tail = k;
	k->next = c->calls;
	c->calls = k;
}

static uint32_t
take_id(struct sbx_agent_conn *c)
{
	uint32_t id = c->next_id++;

	if (c->next_id == 0)
		c->next_id = 1;  /* after 4e9 calls; older ones are long gone */
	return id;
}

struct sbx_agent_call *
sbx_agent_call_start_raw(struct sbx_agent_conn *c, uint8_t type, const void *p,
			 size_t len, const struct sbx_agent_call_opts *opts,
			 sbx_agent_cb cb, void *arg, int *errp)
{
	struct sbx_agent_call *k;
	uint8_t *frame;

	if (len > AGENT_FRAME_HARD_MAX) {
		*errp = -EINVAL;
		return NULL;
	}
	if ((k = call_new(c, opts, cb, arg, errp)) == NULL)
		return NULL;
	frame = malloc(AGENT_HDR_LEN + len);
	if (frame == NULL) {
		free(k);
		*errp = -ENOMEM;
		return NULL;
	}
	k->id = take_id(c);
	agent_hdr_put(frame, type, k->id, (uint32_t)len);
	if (len)
		memcpy(frame + AGENT_HDR_LEN, p, len);
	call_link(c, k, frame, AGENT_HDR_LEN + len);
	return k;
}

struct sbx_agent_call *
sbx_agent_call_start(struct sbx_agent_conn *c, const json_t *req,
		     const struct sbx_agent_call_opts *opts, sbx_agent_cb cb,
		     void *arg, int *errp)
{
	json_t *copy = json_copy((json_t *)(uintptr_t)req);
	struct sbx_agent_call *k;
	size_t len;
	char *s;

	if (copy == NULL || !json_is_object(copy)) {
		json_decref(copy);
		*errp = -EINVAL;
		return NULL;
	}
	if (opts && opts->window)
		json_object_set_new(copy, AGENT_F_WINDOW,
				    json_integer(opts->window));
	s = agent_json_dump(copy, &len);
	json_decref(copy);
	if (s == NULL) {
		*errp = -EINVAL;
		return NULL;
	}
	k = sbx_agent_call_start_raw(c, AGENT_FT_REQUEST, s, len, opts, cb,
				     arg, errp);
	free(s);
	return k;
}

struct sbx_agent_call *
sbx_agent_hello(struct sbx_agent_conn *c, bool ping, int64_t deadline_ms,
		sbx_agent_cb cb, void *arg, int *errp)
{
	struct sbx_agent_call_opts o = { .deadline_ms = deadline_ms };
	struct sbx_agent_call *k;
	uint8_t *frame;
	char body[64];
	int n;

	if (c->hello_call) {
		*errp = -EBUSY;
		return NULL;
	}
	if ((k = call_new(c, &o, cb, arg, errp)) == NULL)
		return NULL;
	n = ping ? snprintf(body, sizeof(body), "{}")
		 : snprintf(body, sizeof(body), "{\"%s\":%d}", AGENT_F_VERSION,
			    AGENT_PROTO_VERSION);
	frame = malloc(AGENT_HDR_LEN + (size_t)n);
	if (frame == NULL) {
		free(k);
		*errp = -ENOMEM;
		return NULL;
	}
	agent_hdr_put(frame, ping ? AGENT_FT_PING : AGENT_FT_HELLO, 0,
		      (uint32_t)n);
	memcpy(frame + AGENT_HDR_LEN, body, (size_t)n);
	k->hello = true;
	c->hello_call = k;
	call_link(c, k, frame, AGENT_HDR_LEN + (size_t)n);
	return k;
}

uint32_t
sbx_agent_call_id(const struct sbx_agent_call *k)
{
	return k->id;
}

uint64_t
sbx_agent_call_credit(const struct sbx_agent_call *k)
{
	return k->done ? 0 : k->credit;
}

long
sbx_agent_call_send(struct sbx_agent_call *k, const void *p, size_t len)
{
	struct sbx_agent_conn *c = k->c;
	size_t sent = 0;

	if (k->done || c->dead)
		return -EPIPE;
	while (sent < len && k->credit > 0) {
		size_t n = len - sent;
		int rc;

		if (n > AGENT_DATA_MAX)
			n = AGENT_DATA_MAX;
		if (n > k->credit)
			n = (size_t)k->credit;
		if ((rc = promote(c, k)) < 0 ||
		    (rc = out_frame(c, AGENT_FT_IN, k->id,
				    (const uint8_t *)p + sent, n)) < 0)
			return rc;
		k->credit -= n;
		sent += n;
	}
	return (long)sent;
}

int
sbx_agent_call_end_input(struct sbx_agent_call *k)
{
	int rc;

	if (k->done || k->c->dead)
		return -EPIPE;
	if ((rc = promote(k->c, k)) < 0)
		return rc;
	return out_frame(k->c, AGENT_FT_IN, k->id, NULL, 0);
}

int
sbx_agent_call_grant(struct sbx_agent_call *k, uint32_t n)
{
	uint8_t p[4];
	int rc;

	if (k->done || k->c->dead)
		return -EPIPE;
	if (n == 0)
		return 0;
	if ((rc = promote(k->c, k)) < 0)
		return rc;
	agent_put_u32(p, n);
	return out_frame(k->c, AGENT_FT_WINDOW, k->id, p, 4);
}

int
sbx_agent_call_kill(struct sbx_agent_call *k, int sig)
{
	char body[32];
	int n, rc;

	if (k->done || k->c->dead)
		return -EPIPE;
	if ((rc = promote(k->c, k)) < 0)
		return rc;
	n = snprintf(body, sizeof(body), "{\"%s\":%d}", AGENT_F_SIGNAL, sig);
	return out_frame(k->c, AGENT_FT_KILL, k->id, body, (size_t)n);
}

int
sbx_agent_flush_sync(struct sbx_agent_conn *c, int timeout_ms)
{
	int64_t end = sbx_agent_now_ms() + timeout_ms;

	for (;;) {
		int64_t dl, left = end - sbx_agent_now_ms();
		struct pollfd p = { .fd = sbx_agent_fd_of(c) };
		int rc;

		p.events = sbx_agent_want(c, &dl) & POLLOUT;
		if (!p.events)
			return 0;
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		if ((rc = sbx_agent_process(c, p.revents, sbx_agent_now_ms())) < 0)
			return rc;
	}
}

int
sbx_agent_call_resize(struct sbx_agent_call *k, unsigned rows, unsigned cols)
{
	char body[64];
	int n, rc;

	if (k->done || k->c->dead)
		return -EPIPE;
	if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
		return -EINVAL;
	if ((rc = promote(k->c, k)) < 0)
		return rc;
	n = snprintf(body, sizeof(body), "{\"%s\":%u,\"%s\":%u}", AGENT_F_ROWS, rows,
		     AGENT_F_COLS, cols);
	return out_frame(k->c, AGENT_FT_RESIZE, k->id, body, (size_t)n);
}

void
sbx_agent_call_cancel(struct sbx_agent_call *k)
{
	if (k->done)
		return;
	if (!k->queued && !k->hello && !k->c->dead)
		out_error(k->c, k->id, AGENT_E_CLOSED, "cancelled by the host");
	retire(k);
}

/* ---- frames from the agent -------------------------------------------- */

static void
on_stream0(struct sbx_agent_conn *c, const struct agent_frame *f)
{
	struct sbx_agent_call *k = c->hello_call;
	char err[256];
	json_t *j;

	if (f->type != AGENT_FT_HELLO && f->type != AGENT_FT_PONG &&
	    f->type != AGENT_FT_ERROR) {
		c->st.bad_frames++;
		return;
	}
	j = agent_json_parse(f->payload, f->len, err, sizeof(err));
	if (k == NULL) {
		/* a connection-level error (say, about a frame we sent on
		 * stream 0) with nobody waiting: counted only */
		c->st.unknown_stream++;
	} else if (j == NULL) {
		c->st.bad_frames++;
		fail_call(k, AGENT_E_BAD_FRAME, EPROTO, err);
	} else if (f->type == AGENT_FT_ERROR) {
		fail_call(k,
			  json_string_value(json_object_get(j, AGENT_F_CODE))
				  ?: AGENT_E_IO,
			  (int)json_integer_value(
				  json_object_get(j, AGENT_F_ERRNO)),
			  json_string_value(json_object_get(j, AGENT_F_MESSAGE))
				  ?: "");
	} else {
		struct sbx_agent_event ev = { .kind = SBX_AGENT_EV_HELLO,
					      .json = j };

		deliver(k, &ev, true);
	}
	json_decref(j);
}

static void
on_frame(struct sbx_agent_conn *c, const struct agent_frame *f)
{
	struct sbx_agent_event ev = { 0 };
	struct sbx_agent_call *k;
	char err[256];
	json_t *j = NULL, *v;

	if (f->stream == 0) {
		on_stream0(c, f);
		return;
	}
	k = find_call(c, f->stream);
	if (k == NULL) {
		c->st.unknown_stream++;
		return;
	}
	switch (f->type) {
	case AGENT_FT_OUT:
	case AGENT_FT_ERR:
		ev.kind = f->type == AGENT_FT_OUT ? SBX_AGENT_EV_STDOUT
						  : SBX_AGENT_EV_STDERR;
		ev.data = f->payload;
		ev.len = f->len;
		deliver(k, &ev, false);
		if (!k->done && !k->manual_window && f->len > 0)
			sbx_agent_call_grant(k, f->len);
		return;
	case AGENT_FT_WINDOW: {
		uint64_t w = k->credit + agent_get_u32(f->payload);

		k->credit = w > AGENT_WINDOW_MAX ? AGENT_WINDOW_MAX : w;
		ev.kind = SBX_AGENT_EV_CREDIT;
		deliver(k, &ev, false);
		return;
	}
	case AGENT_FT_STARTED:
	case AGENT_FT_RESULT:
	case AGENT_FT_EXIT:
	case AGENT_FT_ERROR:
		break;
	default:
		c->st.bad_frames++;
		out_error(c, k->id, AGENT_E_BAD_FRAME,
			  "frame type not expected from the agent");
		fail_call(k, AGENT_E_BAD_FRAME, EPROTO,
			  "the agent sent a host frame type");
		return;
	}
	j = agent_json_parse(f->payload, f->len, err, sizeof(err));
	if (j == NULL) {
		c->st.bad_frames++;
		out_error(c, k->id, AGENT_E_BAD_FRAME, err);
		fail_call(k, AGENT_E_BAD_FRAME, EPROTO, err);
		return;
	}
	ev.json = j;
	switch (f->type) {
	case AGENT_FT_STARTED:
		ev.kind = SBX_AGENT_EV_STARTED;
		ev.pid = (int)json_integer_value(json_object_get(j, AGENT_F_PID));
		deliver(k, &ev, false);
		break;
	case AGENT_FT_RESULT:
		ev.kind = SBX_AGENT_EV_RESULT;
		ev.more = json_is_true(json_object_get(j, AGENT_F_MORE));
		deliver(k, &ev, !ev.more);
		break;
	case AGENT_FT_EXIT:
		ev.kind = SBX_AGENT_EV_EXIT;
		v = json_object_get(j, AGENT_F_CODE);
		ev.exit_code = json_is_integer(v) ? (int)json_integer_value(v)
						  : -1;
		ev.signal = (int)json_integer_value(
			json_object_get(j, AGENT_F_SIGNAL));
		ev.timed_out = json_is_true(json_object_get(j, AGENT_F_TIMED_OUT));
		deliver(k, &ev, true);
		break;
	default: /* ERROR */
		ev.kind = SBX_AGENT_EV_ERROR;
		ev.code = json_string_value(json_object_get(j, AGENT_F_CODE))
				  ?: AGENT_E_IO;
		ev.message = json_string_value(json_object_get(j, AGENT_F_MESSAGE))
				     ?: "";
		ev.err = (int)json_integer_value(json_object_get(j, AGENT_F_ERRNO));
		deliver(k, &ev, true);
		break;
	}
	json_decref(j);
}

static void
expire(struct sbx_agent_conn *c, int64_t now)
{
	struct sbx_agent_call *k = c->calls, *next;

	for (; k; k = next) {
		next = k->next;
		if (k->done || k->deadline <= 0 || now < k->deadline)
			continue;
		c->st.timeouts++;
		if (!k->queued && !k->hello)
			out_error(c, k->id, AGENT_E_TIMEOUT,
				  "the host gave up waiting");
		fail_call(k, AGENT_E_TIMEOUT, ETIMEDOUT,
			  "no answer before the deadline");
		/* a callback may have retired `next`: start over */
		next = c->calls;
	}
}

static int
read_some(struct sbx_agent_conn *c)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = read(c->fd, c->rbuf, CONN_RBUF);
		size_t pos = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -EIO;
		if (n == 0)
			return -EPIPE;
		while (pos < (size_t)n && !c->dead) {
			struct agent_frame f;
			size_t used;
			enum agent_dec_result r = agent_dec_feed(
				&c->dec, c->rbuf + pos, (size_t)n - pos, &used,
				&f);

			pos += used;
			if (r == AGENT_DEC_FRAME) {
				on_frame(c, &f);
			} else if (r == AGENT_DEC_BAD) {
				struct sbx_agent_call *k =
					f.stream ? find_call(c, f.stream) : NULL;

				c->st.bad_frames++;
				if (k) {
					out_error(c, k->id, AGENT_E_BAD_FRAME,
						  c->dec.reason);
					fail_call(k, AGENT_E_BAD_FRAME, EPROTO,
						  c->dec.reason);
				}
			} else if (r == AGENT_DEC_FATAL) {
				return -EPROTO;
			}
		}
	}
	return 0;
}

int
sbx_agent_process(struct sbx_agent_conn *c, short revents, int64_t now)
{
	int rc = 0;

	if (c->dead)
		return c->dead_rc;
	expire(c, now);
	if (revents & (POLLIN | POLLHUP | POLLERR))
		rc = read_some(c);
	if (rc == 0 && !c->dead) {
		promote(c, NULL);
		rc = flush(c);
	}
	if (rc < 0)
		conn_die(c, rc,
			 rc == -EPIPE    ? "the agent closed the connection"
			 : rc == -EPROTO ? "the agent's byte stream is out of step"
					 : "I/O error on the agent connection");
	bury(c);
	return rc;
}

/* ---- blocking helpers -------------------------------------------------- */

struct sync_state {
	bool done;
	int rc;
	char *err;
	size_t errsz;
	json_t *json;                   /* hello, op result */
	struct sbx_agent_exec_res *res;
	size_t max_output;
	int out_fd;                     /* read: where contents go */
	uint64_t bytes;
};

static void
sync_error(struct sync_state *s, const struct sbx_agent_event *ev)
{
	s->done = true;
	s->rc = ev->err > 0 ? -ev->err : -EREMOTEIO;
	snprintf(s->err, s->errsz, "%s: %s", ev->code, ev->message);
}

/* Drives c until *done, with `pump` called before each wait. */
static int
run_until(struct sbx_agent_conn *c, struct sync_state *s,
	  int (*pump)(void *), void *arg)
{
	while (!s->done) {
		struct pollfd p = { .fd = c->fd };
		int64_t dl, now;
		int rc, timeout = -1;

		if (pump && (rc = pump(arg)) < 0)
			return rc;
		p.events = sbx_agent_want(c, &dl);
		now = sbx_agent_now_ms();
		if (dl >= 0)
			timeout = dl <= now ? 0 : (int)(dl - now);
		if (poll(&p, 1, timeout) < 0 && errno != EINTR)
			return -errno;
		rc = sbx_agent_process(c, p.revents, sbx_agent_now_ms());
		if (rc < 0 && !s->done)
			return rc;
	}
	return 0;
}

static int64_t
deadline_of(int timeout_ms)
{
	return timeout_ms > 0 ? sbx_agent_now_ms() + timeout_ms : 0;
}

static void
hello_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct sync_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_ERROR) {
		sync_error(s, ev);
		return;
	}
	s->done = true;
	s->json = json_incref((json_t *)(uintptr_t)ev->json);
}

static int
start_failed(int rc, char *err, size_t errsz)
{
	snprintf(err, errsz, "cannot start the call: %s", strerror(-rc));
	return rc;
}

int
sbx_agent_hello_sync(struct sbx_agent_conn *c, int timeout_ms, json_t **hello,
		     char *err, size_t errsz)
{
	struct sync_state s = { .err = err, .errsz = errsz };
	int rc;

	if (sbx_agent_hello(c, false, deadline_of(timeout_ms), hello_cb, &s,
			    &rc) == NULL)
		return start_failed(rc, err, errsz);
	rc = run_until(c, &s, NULL, NULL);
	if (rc == 0)
		rc = s.rc;
	if (rc == 0 && hello)
		*hello = s.json;
	else
		json_decref(s.json);
	return rc;
}

static void
append(char **buf, size_t *len, size_t max, const uint8_t *p, size_t n,
       bool *truncated)
{
	char *q;

	if (*len + n > max) {
		*truncated = true;
		n = max - *len;
	}
	if (n == 0)
		return;
	q = realloc(*buf, *len + n + 1);
	if (q == NULL) {
		*truncated = true;
		return;
	}
	memcpy(q + *len, p, n);
	*len += n;
	q[*len] = '\0';
	*buf = q;
}

static void
exec_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct sync_state *s = arg;
	struct sbx_agent_exec_res *r = s->res;

	(void)k;
	switch (ev->kind) {
	case SBX_AGENT_EV_STARTED:
		r->pid = ev->pid;
		break;
	case SBX_AGENT_EV_STDOUT:
		append(&r->out, &r->out_len, s->max_output, ev->data, ev->len,
		       &r->truncated);
		break;
	case SBX_AGENT_EV_STDERR:
		append(&r->err, &r->err_len, s->max_output, ev->data, ev->len,
		       &r->truncated);
		break;
	case SBX_AGENT_EV_EXIT:
		r->exit_code = ev->exit_code;
		r->signal = ev->signal;
		r->timed_out = ev->timed_out;
		s->done = true;
		break;
	case SBX_AGENT_EV_ERROR:
		sync_error(s, ev);
		break;
	default:
		break;
	}
}

struct stdin_pump {
	struct sbx_agent_call *k;
	struct sync_state *s;
	const uint8_t *p;
	size_t len, off;
	bool ended;
};

static int
stdin_pump(void *arg)
{
	struct stdin_pump *sp = arg;
	long n;

	if (sp->s->done || sp->ended)
		return 0;
	if (sp->off < sp->len) {
		n = sbx_agent_call_send(sp->k, sp->p + sp->off,
					sp->len - sp->off);
		if (n < 0)
			return 0;  /* the callback reports why */
		sp->off += (size_t)n;
	}
	if (sp->off == sp->len) {
		sp->ended = true;
		sbx_agent_call_end_input(sp->k);
	}
	return 0;
}

int
sbx_agent_exec_sync(struct sbx_agent_conn *c,
		    const struct sbx_agent_exec_req *req,
		    struct sbx_agent_exec_res *res, char *err, size_t errsz)
{
	struct sync_state s = { .err = err, .errsz = errsz, .res = res };
	struct sbx_agent_call_opts o = { 0 };
	struct stdin_pump sp = { 0 };
	json_t *j;
	int64_t t0 = sbx_agent_now_ms();
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	s.max_output = req->max_output ? req->max_output : 16u << 20;
	if ((j = sbx_agent_req_exec(req, err, errsz)) == NULL)
		return -EINVAL;
	/* the agent enforces timeout_ms; the host's deadline is a backstop
	 * for an agent that stopped answering */
	if (req->timeout_ms > 0)
		o.deadline_ms = t0 + req->timeout_ms + 10000;
	sp.s = &s;
	sp.k = sbx_agent_call_start(c, j, &o, exec_cb, &s, &rc);
	json_decref(j);
	if (sp.k == NULL)
		return start_failed(rc, err, errsz);
	sp.p = req->stdin_data;
	sp.len = req->stdin_len;
	sp.ended = req->stdin_data == NULL;
	rc = run_until(c, &s, stdin_pump, &sp);
	if (rc < 0 && !s.done) {
		snprintf(err, errsz, "exec: %s", strerror(-rc));
		return rc;
	}
	res->duration_ms = sbx_agent_now_ms() - t0;
	return s.rc;
}

void
sbx_agent_exec_res_fini(struct sbx_agent_exec_res *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}

static void
read_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct sync_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_STDOUT) {
		size_t off = 0;

		while (off < ev->len && s->rc == 0) {
			ssize_t n = write(s->out_fd, ev->data + off,
					  ev->len - off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				s->rc = -errno;
				snprintf(s->err, s->errsz, "read: local write: %s",
					 strerror(errno));
				sbx_agent_call_cancel(k);
				s->done = true;
				return;
			}
			off += (size_t)n;
		}
		s->bytes += ev->len;
	} else if (ev->kind == SBX_AGENT_EV_RESULT) {
		s->done = true;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		sync_error(s, ev);
	}
}

int
sbx_agent_read_sync(struct sbx_agent_conn *c, const char *path, int out_fd,
		    int timeout_ms, uint64_t *bytes, char *err, size_t errsz)
{
	struct sync_state s = { .err = err, .errsz = errsz, .out_fd = out_fd };
	struct sbx_agent_call_opts o = { .deadline_ms = deadline_of(timeout_ms) };
	json_t *j = sbx_agent_req_read(path);
	int rc;

	if (j == NULL || sbx_agent_call_start(c, j, &o, read_cb, &s, &rc) ==
				 NULL) {
		json_decref(j);
		return start_failed(j ? rc : -EINVAL, err, errsz);
	}
	json_decref(j);
	rc = run_until(c, &s, NULL, NULL);
	if (bytes)
		*bytes = s.bytes;
	if (rc < 0 && !s.done) {
		snprintf(err, errsz, "read: %s", strerror(-rc));
		return rc;
	}
	return s.rc;
}

struct file_pump {
	struct sbx_agent_call *k;
	struct sync_state *s;
	int fd;
	uint8_t *buf;
	size_t len, off;
	bool eof, ended;
};

static int
file_pump(void *arg)
{
	struct file_pump *fp = arg;

	while (!fp->s->done && !fp->ended &&
	       sbx_agent_call_credit(fp->k) > 0) {
		long n;

		if (fp->off == fp->len && !fp->eof) {
			ssize_t r = read(fp->fd, fp->buf, AGENT_DATA_MAX);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				int e = errno;

				snprintf(fp->s->err, fp->s->errsz,
					 "write: local read: %s", strerror(e));
				sbx_agent_call_cancel(fp->k);
				fp->s->done = true;
				fp->s->rc = -e;
				return 0;
			}
			fp->off = 0;
			fp->len = (size_t)r;
			fp->eof = r == 0;
		}
		if (fp->off == fp->len && fp->eof) {
			fp->ended = true;
			sbx_agent_call_end_input(fp->k);
			break;
		}
		n = sbx_agent_call_send(fp->k, fp->buf + fp->off,
					fp->len - fp->off);
		if (n <= 0)
			break;
		fp->off += (size_t)n;
		fp->s->bytes += (uint64_t)n;
		/* do not queue more than a window's worth at once */
		if (fp->k->c->out_len >= OUT_SOFT)
			break;
	}
	return 0;
}

static void
write_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct sync_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_RESULT)
		s->done = true;
	else if (ev->kind == SBX_AGENT_EV_ERROR)
		sync_error(s, ev);
}

int
sbx_agent_write_sync(struct sbx_agent_conn *c, const char *path, unsigned mode,
		     int in_fd, int timeout_ms, uint64_t *bytes, char *err,
		     size_t errsz)
{
	struct sync_state s = { .err = err, .errsz = errsz };
	struct sbx_agent_call_opts o = { .deadline_ms = deadline_of(timeout_ms) };
	struct file_pump fp = { .s = &s, .fd = in_fd };
	json_t *j = sbx_agent_req_write(path, mode);
	int rc;

	fp.buf = malloc(AGENT_DATA_MAX);
	if (j == NULL || fp.buf == NULL) {
		json_decref(j);
		free(fp.buf);
		return start_failed(-ENOMEM, err, errsz);
	}
	fp.k = sbx_agent_call_start(c, j, &o, write_cb, &s, &rc);
	json_decref(j);
	if (fp.k == NULL) {
		free(fp.buf);
		return start_failed(rc, err, errsz);
	}
	rc = run_until(c, &s, file_pump, &fp);
	free(fp.buf);
	if (bytes)
		*bytes = s.bytes;
	if (rc < 0 && !s.done) {
		snprintf(err, errsz, "write: %s", strerror(-rc));
		return rc;
	}
	return s.rc;
}

static void
op_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct sync_state *s = arg;
	json_t *j = (json_t *)(uintptr_t)ev->json;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_ERROR) {
		sync_error(s, ev);
		return;
	}
	if (ev->kind != SBX_AGENT_EV_RESULT)
		return;
	if (s->json == NULL) {
		s->json = json_deep_copy(j);
	} else {
		/* a list in batches: one "entries" array for the caller */
		json_array_extend(json_object_get(s->json, AGENT_F_ENTRIES),
				  json_object_get(j, AGENT_F_ENTRIES));
	}
	if (!ev->more) {
		json_object_del(s->json, AGENT_F_MORE);
		s->done = true;
	}
}

int
sbx_agent_op_sync(struct sbx_agent_conn *c, const json_t *req, int timeout_ms,
		  json_t **result, char *err, size_t errsz)
{
	struct sync_state s = { .err = err, .errsz = errsz };
	struct sbx_agent_call_opts o = { .deadline_ms = deadline_of(timeout_ms) };
	int rc;

	if (sbx_agent_call_start(c, req, &o, op_cb, &s, &rc) == NULL)
		return start_failed(rc, err, errsz);
	rc = run_until(c, &s, NULL, NULL);
	if (rc < 0 && !s.done) {
		json_decref(s.json);
		snprintf(err, errsz, "%s", strerror(-rc));
		return rc;
	}
	if (s.rc == 0 && result)
		*result = s.json;
	else
		json_decref(s.json);
	return s.rc;
}

/* RFC 4648 base64 of n bytes into out (room for 4 * ((n + 2) / 3) + 1). */
size_t
sbx_b64_encode(const void *in, size_t n, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = in;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t k = n - i < 3 ? n - i : 3;

		if (k > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (k > 2)
			v |= p[i + 2];
		out[o++] = tab[(v >> 18) & 63];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = k > 1 ? tab[(v >> 6) & 63] : '=';
		out[o++] = k > 2 ? tab[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

int
sbx_agent_refresh_sync(struct sbx_agent_conn *c, int timeout_ms, char *err, size_t errsz)
{
	json_t *req;
	int rc;

	if ((rc = sbx_agent_req_refresh(&req, err, errsz)) < 0)
		return rc;
	rc = sbx_agent_op_sync(c, req, timeout_ms, NULL, err, errsz);
	json_decref(req);
	return rc;
}

/* wsexec.c: GET /v1/sandboxes/{id}/exec/stream (see wsexec.h and
 * docs/api.md, "Interactive exec").
 *
 * Runs on the connection's API thread. The handshake is checked and the
 * sandbox's agent borrowed (pool_mgr_use: 404, 409 as for POST .../exec)
 * before the 101; after it the thread polls two things, the client's
 * socket and the agent connection:
 *  - stdin: a binary message is handed to the agent within its credit;
 *    while some of it waits, the socket is not read (back-pressure reaches
 *    the client through TCP);
 *  - output: the agent's bytes are queued as messages; its credit
 *    (GW_WSX_WINDOW) is given back only as the queue drains to the
 *    client, so the queue stays under the window plus framing.
 * A client that goes away (EOF, reset, a close frame, a protocol error)
 * cancels the call, which kills a foreground command; a detached one was
 * never tied to the call.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "log.h"
#include "manager.h"
#include "ws.h"
#include "wsexec.h"

#define RBUF (128u * 1024) /* more than the API's buffer after a head */
#define WQ_HIGH (4u * GW_WSX_WINDOW) /* stop reading the client above this */

struct wsx {
	struct gw_api_req *r;
	int fd;
	struct sbx_agent_conn *agent;
	struct sbx_agent_call *call;
	bool detach;

	struct ws_rx rx;
	uint8_t *msgbuf;
	uint8_t rbuf[RBUF];
	size_t rpos, rlen;

	const uint8_t *pend;    /* stdin not yet taken by the agent */
	size_t pend_len;
	bool eof_wanted, eof_sent;

	uint8_t *wq;            /* frames for the client */
	size_t woff, wlen, wcap;
	uint64_t owed;          /* output bytes queued, credit not given back */

	bool done;              /* the call ended */
	bool gone;              /* the client left (or broke the protocol) */
	bool close_sent, close_rcvd;
	unsigned close_code;
	char close_reason[100];
};

/* ---- the queue to the client -------------------------------------------- */

static int
wq_room(struct wsx *w, size_t n)
{
	if (w->woff > 0 && w->woff + w->wlen + n > w->wcap) {
		memmove(w->wq, w->wq + w->woff, w->wlen);
		w->woff = 0;
	}
	if (w->wlen + n > w->wcap) {
		size_t cap = w->wcap ? w->wcap : 65536;
		uint8_t *nb;

		while (cap < w->wlen + n)
			cap *= 2;
		nb = realloc(w->wq, cap);
		if (nb == NULL)
			return -ENOMEM;
		w->wq = nb;
		w->wcap = cap;
	}
	return 0;
}

/* One unfragmented frame: prefix (a stream id byte, or -1) then p. */
static void
q_frame(struct wsx *w, uint8_t op, int prefix, const void *p, size_t n)
{
	size_t total = n + (prefix >= 0), h;
	uint8_t *o;

	if (w->close_sent || wq_room(w, WS_HDR_MAX + total) < 0) {
		w->gone = true; /* out of memory: give up the client */
		return;
	}
	o = w->wq + w->woff + w->wlen;
	h = ws_hdr_put(o, true, op, total, NULL);
	if (prefix >= 0)
		o[h++] = (uint8_t)prefix;
	if (n)
		memcpy(o + h, p, n);
	w->wlen += h + n;
}

/* A text message from a JSON object (stolen). */
static void
q_json(struct wsx *w, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (s)
		q_frame(w, WS_OP_TEXT, -1, s, strlen(s));
	free(s);
	json_decref(j);
}

static void
q_close(struct wsx *w, unsigned code, const char *reason)
{
	uint8_t p[WS_CTRL_MAX];
	size_t n = ws_close_payload(p, (uint16_t)code, reason);

	if (w->close_sent)
		return;
	q_frame(w, WS_OP_CLOSE, -1, p, n);
	w->close_sent = true;
}

/* Writes what the socket takes now. */
static void
wq_flush(struct wsx *w)
{
	while (w->wlen > 0) {
		ssize_t k = send(w->fd, w->wq + w->woff, w->wlen, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			w->gone = true;
			w->wlen = 0;
			return;
		}
		w->woff += (size_t)k;
		w->wlen -= (size_t)k;
	}
	w->woff = 0;
}

/* Waits until the queue is written, for at most ms. */
static void
wq_drain(struct wsx *w, int ms)
{
	int64_t end = sbx_agent_now_ms() + ms;

	/* (also when the client is gone: a close may be owed to it; a
	 * failed send empties the queue) */
	while (w->wlen > 0) {
		struct pollfd p = { .fd = w->fd, .events = POLLOUT };
		int64_t left = end - sbx_agent_now_ms();

		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return;
		wq_flush(w);
	}
}

/* ---- the agent's events ----------------------------------------------- */

static void
on_event(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct wsx *w = arg;

	(void)k;
	switch (ev->kind) {
	case SBX_AGENT_EV_STARTED:
		q_json(w, json_pack("{s:s, s:i}", "type", "started", "pid", ev->pid));
		break;
	case SBX_AGENT_EV_STDOUT:
	case SBX_AGENT_EV_STDERR:
		q_frame(w, WS_OP_BINARY,
			ev->kind == SBX_AGENT_EV_STDOUT ? GW_WSX_STDOUT : GW_WSX_STDERR, ev->data,
			ev->len);
		w->owed += ev->len;
		break;
	case SBX_AGENT_EV_RESULT:
		/* a detached command: it runs on without us */
		q_json(w, json_pack("{s:s, s:I}", "type", "detached", "pid",
				    json_integer_value(json_object_get(ev->json, "pid"))));
		w->close_code = WS_CLOSE_NORMAL;
		w->done = true;
		w->call = NULL;
		break;
	case SBX_AGENT_EV_EXIT:
		q_json(w, json_pack("{s:s, s:o, s:o, s:b}", "type", "exit", "code",
				    ev->signal ? json_null() : json_integer(ev->exit_code),
				    "signal", ev->signal ? json_integer(ev->signal) : json_null(),
				    "timed_out", ev->timed_out));
		w->close_code = WS_CLOSE_NORMAL;
		w->done = true;
		w->call = NULL;
		break;
	case SBX_AGENT_EV_ERROR: {
		const char *code = ev->err == ENOENT || ev->err == EACCES || ev->err == ENOTDIR
					   ? "bad-request"
				   : ev->err == ETIMEDOUT ? "timeout"
							  : "agent-error";
		char *msg = gw_utf8_sanitize(ev->message ? ev->message : "error",
					     strlen(ev->message ? ev->message : "error"), NULL);

		q_json(w, json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "message",
				    msg ? msg : "error"));
		free(msg);
		w->close_code = strcmp(code, "bad-request") == 0 ? WS_CLOSE_POLICY
								 : WS_CLOSE_INTERNAL;
		snprintf(w->close_reason, sizeof(w->close_reason), "%s", code);
		w->done = true;
		w->call = NULL;
		break;
	}
	default:
		break;
	}
}

/* The agent connection failed under a call that has not ended. */
static void
agent_failed(struct wsx *w, int err, const char *msg)
{
	struct sbx_agent_call *k = w->call;

	if (w->done || k == NULL)
		return;
	sbx_agent_call_cancel(k);
	w->call = NULL;
	on_event(NULL, &(struct sbx_agent_event){ .kind = SBX_AGENT_EV_ERROR, .err = err,
						  .message = msg },
		 w);
}

/* ---- the client's messages --------------------------------------------- */

/* A protocol error or a bad message: close with code, and the client is
 * treated as gone (its command is killed). */
static void
client_fail(struct wsx *w, unsigned code, const char *why)
{
	q_close(w, code, why);
	w->gone = true;
}

static void
on_control(struct wsx *w, const struct ws_msg *m)
{
	struct gw_wsx_ctl c;
	char err[160];

	if (gw_wsx_ctl_parse((const char *)m->data, m->len, &c, err, sizeof(err)) < 0) {
		client_fail(w, WS_CLOSE_POLICY, err);
		return;
	}
	if (w->done || w->call == NULL)
		return; /* late: the command has ended */
	switch (c.kind) {
	case GW_WSX_RESIZE:
		sbx_agent_call_resize(w->call, c.rows, c.cols);
		break;
	case GW_WSX_SIGNAL:
		sbx_agent_call_kill(w->call, c.signal);
		break;
	case GW_WSX_EOF:
		w->eof_wanted = true;
		break;
	}
}

/* Handles one message; false when reading must stop for now. */
static void
on_message(struct wsx *w, const struct ws_msg *m)
{
	switch (m->opcode) {
	case WS_OP_BINARY:
		if (w->eof_wanted) {
			client_fail(w, WS_CLOSE_POLICY, "stdin after its eof");
			return;
		}
		w->pend = m->data;
		w->pend_len = m->len;
		break;
	case WS_OP_TEXT:
		on_control(w, m);
		break;
	case WS_OP_PING:
		q_frame(w, WS_OP_PONG, -1, m->data, m->len);
		break;
	case WS_OP_PONG:
		break;
	case WS_OP_CLOSE:
		/* the client leaves: answer with its code, end */
		w->close_rcvd = true;
		q_close(w, m->len ? m->close_code : WS_CLOSE_NORMAL, NULL);
		w->gone = true;
		break;
	default:
		break;
	}
}

/* Feeds what was read until a message must wait (stdin pending). */
static void
rx_pump(struct wsx *w, struct ws_msg *m, bool *got)
{
	*got = false;
	while (w->rpos < w->rlen && w->pend_len == 0 && !w->gone) {
		size_t used;
		enum ws_rx_result r =
			ws_rx_feed(&w->rx, w->rbuf + w->rpos, w->rlen - w->rpos, &used, m);

		w->rpos += used;
		if (r == WS_RX_ERROR) {
			client_fail(w, w->rx.close_code, w->rx.reason);
			return;
		}
		if (r == WS_RX_MSG) {
			*got = true;
			return;
		}
	}
	if (w->rpos == w->rlen)
		w->rpos = w->rlen = 0;
}

/* Reads what the socket has. */
static void
client_read(struct wsx *w)
{
	ssize_t k;

	if (w->rpos > 0 && w->rpos == w->rlen)
		w->rpos = w->rlen = 0;
	if (w->rlen == RBUF)
		return;
	k = recv(w->fd, w->rbuf + w->rlen, RBUF - w->rlen, MSG_DONTWAIT);
	if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (k <= 0) {
		w->gone = true; /* EOF or reset: dropped */
		return;
	}
	w->rlen += (size_t)k;
}

/* The first message: the command. Returns 0 with *s filled, or < 0
 * after closing the connection with the reason. */
static int
read_start(struct wsx *w, struct gw_wsx_start *s)
{
	int64_t end = sbx_agent_now_ms() + GW_WSX_START_WAIT_MS;
	char err[160];

	for (;;) {
		struct ws_msg m;
		bool got;

		rx_pump(w, &m, &got);
		if (w->gone)
			return -1;
		if (got) {
			if (m.opcode == WS_OP_PING || m.opcode == WS_OP_PONG ||
			    m.opcode == WS_OP_CLOSE) {
				on_message(w, &m);
				wq_flush(w);
				if (w->gone)
					return -1;
				continue;
			}
			if (m.opcode != WS_OP_TEXT) {
				client_fail(w, WS_CLOSE_POLICY,
					    "the first message must be the exec text message");
				return -1;
			}
			if (gw_wsx_start_parse((const char *)m.data, m.len, s, err, sizeof(err)) < 0) {
				q_json(w, json_pack("{s:s, s:s, s:s}", "type", "error", "code",
						    "bad-request", "message", err));
				client_fail(w, WS_CLOSE_POLICY, "bad-request");
				return -1;
			}
			return 0;
		}
		{
			struct pollfd p = { .fd = w->fd, .events = POLLIN };
			int64_t left = end - sbx_agent_now_ms();

			if (left <= 0 || poll(&p, 1, (int)left) == 0) {
				client_fail(w, WS_CLOSE_POLICY, "no exec message in time");
				return -1;
			}
			client_read(w);
		}
	}
}

/* ---- the session ------------------------------------------------------- */

static void
run(struct wsx *w)
{
	struct ws_msg m;
	bool got;

	while (!w->done && !w->gone) {
		struct pollfd p[2] = { { .fd = sbx_agent_fd_of(w->agent) }, { .fd = w->fd } };
		int64_t dl, now;
		int timeout = 1000, rc;

		/* what was read, up to a message that must wait */
		while (!w->gone && w->pend_len == 0 && w->wlen < WQ_HIGH) {
			rx_pump(w, &m, &got);
			if (!got)
				break;
			on_message(w, &m);
		}
		if (w->gone || !w->call)
			break;
		if (w->pend_len > 0) {
			long n = sbx_agent_call_send(w->call, w->pend, w->pend_len);

			if (n > 0) {
				w->pend += n;
				w->pend_len -= (size_t)n;
			}
		}
		if (w->pend_len == 0 && w->eof_wanted && !w->eof_sent) {
			sbx_agent_call_end_input(w->call);
			w->eof_sent = true;
		}
		/* credit back for what the client has taken */
		if (w->owed > 0 && w->wlen < GW_WSX_WINDOW) {
			sbx_agent_call_grant(w->call, (uint32_t)w->owed);
			w->owed = 0;
		}
		wq_flush(w);
		p[0].events = sbx_agent_want(w->agent, &dl);
		if (!p[0].events) {
			agent_failed(w, EPIPE, "the sandbox's agent is gone");
			break;
		}
		if (w->pend_len == 0 && w->rpos == w->rlen && w->wlen < WQ_HIGH)
			p[1].events |= POLLIN;
		if (w->wlen > 0)
			p[1].events |= POLLOUT;
		now = sbx_agent_now_ms();
		if (dl >= 0 && dl - now < timeout)
			timeout = dl <= now ? 0 : (int)(dl - now);
		/* messages read and not handled yet: no waiting */
		if (w->pend_len == 0 && w->rpos < w->rlen && w->wlen < WQ_HIGH)
			timeout = 0;
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
			client_read(w);
		if (p[1].revents & POLLOUT)
			wq_flush(w);
		rc = sbx_agent_process(w->agent, p[0].revents, sbx_agent_now_ms());
		if (rc < 0)
			agent_failed(w, -rc, strerror(-rc));
	}
}

/* After the end: the exit and a close to the client, then its close. */
static void
finish(struct wsx *w)
{
	int64_t end;

	if (w->gone) {
		wq_drain(w, 1000); /* the close we answered with, if any */
		return;
	}
	q_close(w, w->close_code ? w->close_code : WS_CLOSE_NORMAL,
		w->close_reason[0] ? w->close_reason : NULL);
	wq_drain(w, GW_WSX_CLOSE_WAIT_MS);
	/* the client's close; anything else is dropped */
	end = sbx_agent_now_ms() + GW_WSX_CLOSE_WAIT_MS;
	while (!w->close_rcvd && !w->gone) {
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int64_t left = end - sbx_agent_now_ms();
		struct ws_msg m;
		bool got;

		w->pend_len = 0;
		rx_pump(w, &m, &got);
		if (got) {
			if (m.opcode == WS_OP_CLOSE)
				w->close_rcvd = true;
			continue;
		}
		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			break;
		client_read(w);
	}
	shutdown(w->fd, SHUT_WR);
}

static bool
hdr_token(struct gw_api_req *r, const char *name, const char *token)
{
	size_t len;
	const char *v = gw_api_header(r, name, &len);

	return v && gw_wsx_has_token(v, len, token);
}

void
gw_wsx_handler(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct wsx *w;
	struct pool_use u;
	struct gw_wsx_start st;
	struct sbx_agent_exec_req xr = { 0 };
	struct sbx_agent_call_opts o = { 0 };
	const char *ver, *key, **env = NULL;
	const void *pre;
	size_t vlen, klen, prelen;
	char accept[WS_ACCEPT_LEN + 1], err[512];
	const char *hdrs[8];
	size_t nh = 0;
	json_t *req;
	int rc;

	if (!hdr_token(r, "Upgrade", "websocket") || !hdr_token(r, "Connection", "upgrade")) {
		gw_api_reply_error_hdr(r, 426, "upgrade-required", "Upgrade", "websocket",
				       "this endpoint is a WebSocket: send Upgrade: websocket and "
				       "Connection: Upgrade (or use POST /v1/sandboxes/%s/exec)",
				       i->id);
		return;
	}
	ver = gw_api_header(r, "Sec-WebSocket-Version", &vlen);
	if (!ver || vlen != 2 || memcmp(ver, "13", 2) != 0) {
		gw_api_reply_error_hdr(r, 426, "websocket-version", "Sec-WebSocket-Version", "13",
				       "Sec-WebSocket-Version must be 13");
		return;
	}
	key = gw_api_header(r, "Sec-WebSocket-Key", &klen);
	if (!key || ws_accept(key, klen, accept) < 0) {
		gw_api_reply_error(r, 400, "bad-request",
				   "Sec-WebSocket-Key must be 16 bytes in base64");
		return;
	}
	if (gw_apiv1_use(v, r, i, &u) < 0)
		return;
	w = calloc(1, sizeof(*w));
	if (w)
		w->msgbuf = malloc(GW_WSX_MSG_MAX);
	if (!w || !w->msgbuf) {
		gw_apiv1_put(v, &u);
		gw_api_reply_error(r, 500, "internal", "out of memory");
		if (w)
			free(w);
		return;
	}
	hdrs[nh++] = "Upgrade";
	hdrs[nh++] = "websocket";
	hdrs[nh++] = "Connection";
	hdrs[nh++] = "Upgrade";
	hdrs[nh++] = "Sec-WebSocket-Accept";
	hdrs[nh++] = accept;
	if (hdr_token(r, "Sec-WebSocket-Protocol", GW_WSX_SUBPROTOCOL)) {
		hdrs[nh++] = "Sec-WebSocket-Protocol";
		hdrs[nh++] = GW_WSX_SUBPROTOCOL;
	}
	if (gw_api_upgrade(r, hdrs, nh / 2, &pre, &prelen) < 0) {
		gw_apiv1_put(v, &u);
		goto out;
	}
	w->r = r;
	w->fd = gw_api_req_fd(r);
	w->agent = u.agent;
	ws_rx_init(&w->rx, true, w->msgbuf, GW_WSX_MSG_MAX);
	if (prelen > RBUF)
		prelen = RBUF; /* the API's buffer is smaller than ours */
	memcpy(w->rbuf, pre, prelen);
	w->rlen = prelen;

	if (read_start(w, &st) < 0) {
		gw_apiv1_put(v, &u);
		finish(w);
		goto out;
	}
	w->detach = st.detach;
	/* The claim's environment, then the message's (a later NAME wins). */
	env = calloc(u.nenv + st.a.nenv + 1, sizeof(*env));
	for (size_t k = 0; env && k < u.nenv + st.a.nenv; k++)
		env[k] = k < u.nenv ? u.env[k] : st.a.env[k - u.nenv];
	xr.argv = st.a.argv;
	xr.env = env;
	xr.cwd = st.a.cwd;
	xr.stdin_stream = !st.detach;
	xr.timeout_ms = st.has_timeout ? (int)st.a.timeout_s * 1000 : 0;
	xr.pty = st.tty;
	xr.rows = st.rows;
	xr.cols = st.cols;
	xr.detach = st.detach;
	req = env ? sbx_agent_req_exec(&xr, err, sizeof(err)) : NULL;
	if (!env)
		snprintf(err, sizeof(err), "out of memory");
	free(env);
	o.window = GW_WSX_WINDOW;
	o.manual_window = true;
	if (st.has_timeout)
		o.deadline_ms = sbx_agent_now_ms() + (int64_t)st.a.timeout_s * 1000 + 10000;
	w->call = req ? sbx_agent_call_start(u.agent, req, &o, on_event, w, &rc) : NULL;
	if (!w->call) {
		q_json(w, json_pack("{s:s, s:s, s:s}", "type", "error", "code", "agent-error",
				    "message", req ? strerror(-rc) : err));
		w->close_code = WS_CLOSE_INTERNAL;
		snprintf(w->close_reason, sizeof(w->close_reason), "agent-error");
	} else {
		run(w);
	}
	json_decref(req);
	if (w->call) {
		/* the client left while the command ran: it is killed (the
		 * cancel must reach the agent before the sandbox is free) */
		sbx_agent_call_cancel(w->call);
		w->call = NULL;
		sbx_agent_flush_sync(u.agent, 1000);
		gw_log_debug("api: exec stream of %s: the client left; its command was killed",
			     i->id);
	}
	gw_apiv1_put(v, &u);
	finish(w);
	gw_wsx_start_fini(&st);
out:
	free(w->wq);
	free(w->msgbuf);
	free(w);
}

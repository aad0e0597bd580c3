/* agent_driver_pty.c: the agent driver's terminal and detach scenarios:
 * an exec with a pty (its size, a RESIZE, stdin through the terminal,
 * stderr merged, ^C to the foreground job, a bad resize), and a detached
 * exec that outlives its stream. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_driver.h"
#include "agent_requests.h"
#include "proto.h"

struct pty_state {
	bool started, done, result, detached;
	int pid, code, signal;
	char out[8192];
	size_t out_len;
	size_t err_len;
	char ecode[64];
};

static void
pty_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct pty_state *s = arg;

	(void)k;
	switch (ev->kind) {
	case SBX_AGENT_EV_STARTED:
		s->started = true;
		s->pid = ev->pid;
		break;
	case SBX_AGENT_EV_STDOUT:
		if (ev->len < sizeof(s->out) - 1 - s->out_len) {
			memcpy(s->out + s->out_len, ev->data, ev->len);
			s->out_len += ev->len;
			s->out[s->out_len] = 0;
		}
		break;
	case SBX_AGENT_EV_STDERR:
		s->err_len += ev->len;
		break;
	case SBX_AGENT_EV_RESULT:
		s->result = true;
		s->detached = json_is_true(json_object_get(ev->json, AGENT_F_DETACHED));
		s->done = true;
		break;
	case SBX_AGENT_EV_EXIT:
		s->code = ev->exit_code;
		s->signal = ev->signal;
		s->done = true;
		break;
	case SBX_AGENT_EV_ERROR:
		snprintf(s->ecode, sizeof(s->ecode), "%s", ev->code ? ev->code : "?");
		s->done = true;
		break;
	default:
		break;
	}
}

/* Drives c until s is done or `want` shows in the output, for at most
 * ms. True when that happened. */
static bool
until(struct sbx_agent_conn *c, struct pty_state *s, const char *want, int ms)
{
	int64_t end = sbx_agent_now_ms() + ms;

	while (sbx_agent_now_ms() < end) {
		struct pollfd p = { .fd = sbx_agent_fd_of(c) };
		int64_t dl;

		if (want ? strstr(s->out, want) != NULL : s->done)
			return true;
		if (s->done)
			return false;
		p.events = sbx_agent_want(c, &dl);
		poll(&p, 1, 50);
		sbx_agent_process(c, p.revents, sbx_agent_now_ms());
	}
	return false;
}

static struct sbx_agent_call *
start(struct sbx_agent_conn *c, const char *script, bool pty, bool detach,
      struct pty_state *s)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	struct sbx_agent_exec_req q = { .argv = argv, .stdin_stream = !detach, .pty = pty,
					.rows = 30, .cols = 90, .detach = detach };
	char err[256];
	json_t *req = sbx_agent_req_exec(&q, err, sizeof(err));
	struct sbx_agent_call *k;
	int rc;

	memset(s, 0, sizeof(*s));
	k = req ? sbx_agent_call_start(c, req, NULL, pty_cb, s, &rc) : NULL;
	json_decref(req);
	return k;
}

void
t_pty(struct sbx_agent_conn *c)
{
	struct pty_state s;
	struct sbx_agent_call *k;
	bool ok;

	/* refusals first: a resize out of range fails the stream */
	k = start(c, "sleep 30", true, false, &s);
	check(k && sbx_agent_call_resize(k, 0, 10) == -EINVAL,
	      "the host side refuses a resize to 0 rows");
	sbx_agent_call_cancel(k);
	k = start(c, "sleep 30", false, false, &s);
	until(c, &s, NULL, 300);
	check(k && s.started && sbx_agent_call_resize(k, 10, 10) == 0,
	      "a resize sent on an exec without a pty");
	check(until(c, &s, NULL, 5000) && !strcmp(s.ecode, AGENT_E_BAD_FRAME),
	      "... fails that stream: bad_frame (%s)", s.ecode);
	check(start(c, "true", true, true, &s) && until(c, &s, NULL, 5000) &&
		      !strcmp(s.ecode, AGENT_E_BAD_REQUEST),
	      "pty and detach together: bad_request (%s)", s.ecode);

	/* the size asked for, a resize, stdin through the terminal,
	 * stderr merged into the terminal's output, the exit code */
	k = start(c, "stty size; echo ready; read x; stty size; echo got $x; echo err >&2; exit 7",
		  true, false, &s);
	ok = until(c, &s, "ready", 10000);
	check(ok && strstr(s.out, "30 90"), "pty: the command sees 30 rows 90 cols (%s)", s.out);
	check(sbx_agent_call_resize(k, 40, 120) == 0 && sbx_agent_call_send(k, "hello\n", 6) == 6,
	      "pty: resize to 40x120 and a line of stdin sent");
	ok = until(c, &s, NULL, 10000);
	check(ok && strstr(s.out, "40 120") && strstr(s.out, "got hello") && strstr(s.out, "err"),
	      "pty: stty size answers 40 120, the line was read, stderr on the terminal (%s)",
	      s.out);
	check(s.code == 7 && s.err_len == 0, "pty: exit 7, no stderr frames (%d, %zu)", s.code,
	      s.err_len);

	/* ^C (the byte) reaches the foreground job: sleep dies of SIGINT,
	 * the shell traps it and goes on */
	k = start(c, "trap 'echo caught' INT; echo ready; sleep 100; echo survived; exit 3", true,
		  false, &s);
	ok = until(c, &s, "ready", 10000);
	usleep(200 * 1000); /* sleep started */
	check(ok && sbx_agent_call_send(k, "\003", 1) == 1, "pty: ^C typed");
	ok = until(c, &s, NULL, 20000);
	check(ok && strstr(s.out, "caught") && strstr(s.out, "survived") && s.code == 3,
	      "pty: ^C ended the sleep, the shell trapped it and exited 3 (%s, %d)", s.out,
	      s.code);
	/* a KILL frame with SIGINT goes to the foreground job too */
	k = start(c, "trap 'echo caught' INT; echo ready; sleep 100; echo survived; exit 4", true,
		  false, &s);
	ok = until(c, &s, "ready", 10000);
	usleep(200 * 1000);
	check(ok && sbx_agent_call_kill(k, SIGINT) == 0, "pty: kill SIGINT sent");
	ok = until(c, &s, NULL, 20000);
	check(ok && strstr(s.out, "survived") && s.code == 4,
	      "pty: SIGINT reached sleep, the shell lived and exited 4 (%s, %d)", s.out, s.code);
}

void
t_detach(struct sbx_agent_conn *c)
{
	struct pty_state s, f;
	char script[640], path[512];
	FILE *fp;
	int pid = 0, fpid = 0;
	bool ok;

	snprintf(path, sizeof(path), "%s/detached.pid", workdir);
	snprintf(script, sizeof(script), "echo $$ > %s; echo lost; sleep 60", path);
	ok = start(c, script, false, true, &s) && until(c, &s, NULL, 5000);
	check(ok && s.started && s.result && s.detached && s.pid > 0 && s.out_len == 0,
	      "detach: started, then result {\"detached\": true}, no output (%s)", s.ecode);
	for (int i = 0; i < 50 && pid == 0; i++) {
		if ((fp = fopen(path, "r"))) {
			if (fscanf(fp, "%d", &pid) != 1)
				pid = 0;
			fclose(fp);
		}
		if (pid == 0)
			usleep(100 * 1000);
	}
	check(pid == s.pid && kill(pid, 0) == 0, "detach: the command runs after its stream ended");
	/* a foreground command whose call is cancelled is killed */
	snprintf(path, sizeof(path), "%s/fg.pid", workdir);
	snprintf(script, sizeof(script), "echo $$ > %s; echo ready; sleep 60", path);
	start(c, script, false, false, &f);
	ok = until(c, &f, "ready", 5000);
	fpid = f.pid;
	check(ok && fpid > 0 && kill(fpid, 0) == 0, "foreground: running before the host leaves");
	/* main() ends the connection, then checks: the foreground command
	 * died with it, the detached one did not */
	detached_pid = pid;
	foreground_pid = fpid;
}

/* exec_stream.c: `sluice exec -i/-t/--detach` and `sluice shell`: a
 * command over the API's WebSocket exec (docs/api.md, "Interactive
 * exec"). See exec_stream.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>

#include "cli_util.h"
#include "exec_stream.h"
#include "ws_client.h"

#define IN_CHUNK (64u * 1024)
#define QUEUE_HIGH (256u * 1024)   /* stop reading stdin above this */
#define EXIT_API 1
#define EXIT_USAGE 2
#define EXIT_TIMED_OUT 124

/* ---- the terminal ----------------------------------------------------- */

static struct termios saved_tio;
static bool tio_saved;
static int sig_pipe[2] = { -1, -1 };

static void
tty_restore(void)
{
	if (tio_saved) {
		tcsetattr(0, TCSADRAIN, &saved_tio);
		tio_saved = false;
	}
}

static int
tty_raw(void)
{
	struct termios t;

	if (tcgetattr(0, &saved_tio) < 0)
		return -errno;
	t = saved_tio;
	cfmakeraw(&t);
	tio_saved = true;
	atexit(tty_restore);
	if (tcsetattr(0, TCSADRAIN, &t) < 0)
		return -errno;
	return 0;
}

static void
on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int e = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: the loop has plenty to read already */
	}
	errno = e;
}

static void
catch(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(sig, &sa, NULL);
}

/* ---- options ------------------------------------------------------------ */

struct xs {
	const struct cli_xs_opts *o;
	bool in, tty, detach;
	long timeout;           /* 0: none */
	json_t *start;
	const char *id;
};

static int
usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sluice: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: sluice exec [-i] [-t] [--detach] [--timeout S] [--env K=V]... "
			"[--cwd DIR] ID -- ARGV...\n       sluice shell [--env K=V]... [--cwd DIR] ID\n");
	return EXIT_USAGE;
}

bool
cli_xs_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--interactive") == 0 || strcmp(a, "--tty") == 0 ||
		    strcmp(a, "--detach") == 0 || strcmp(a, "-d") == 0)
			return true;
		/* -i, -t, -it, -ti */
		if (a[0] == '-' && a[1] != '-' && a[1] && strspn(a + 1, "it") == strlen(a + 1))
			return true;
		if (strcmp(a, "--env") == 0 || strcmp(a, "--cwd") == 0 ||
		    strcmp(a, "--timeout") == 0)
			i++; /* its value */
	}
	return false;
}

/* Parses argv; fills x->start (the first message). 0 or EXIT_USAGE. */
static int
parse(struct xs *x, const char *cmd, int argc, char **argv)
{
	json_t *env = json_object(), *av = json_array();
	bool shell = strcmp(cmd, "shell") == 0;
	int i;

	x->start = json_pack("{s:s}", "type", "exec");
	/* options before or after the ID, up to "--" */
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i];

		if (a[0] != '-' || a[1] == 0) {
			if (x->id)
				return usage(cmd, "'%s': put -- between the sandbox ID and the command",
					     a);
			x->id = a;
			continue;
		}
		if (strcmp(a, "--interactive") == 0) {
			x->in = true;
		} else if (strcmp(a, "--tty") == 0) {
			x->tty = true;
		} else if (strcmp(a, "--detach") == 0 || strcmp(a, "-d") == 0) {
			x->detach = true;
		} else if (a[1] != '-' && strspn(a + 1, "it") == strlen(a + 1)) {
			x->in |= strchr(a, 'i') != NULL;
			x->tty |= strchr(a, 't') != NULL;
		} else if (strcmp(a, "--env") == 0 || strcmp(a, "--cwd") == 0 ||
			   strcmp(a, "--timeout") == 0) {
			const char *v = i + 1 < argc ? argv[++i] : NULL;

			if (!v)
				return usage(cmd, "%s wants a value", a);
			if (a[2] == 'e') {
				const char *eq = strchr(v, '=');

				if (!eq || eq == v)
					return usage(cmd, "--env wants NAME=VALUE, not '%s'", v);
				if (json_object_setn_new(env, v, (size_t)(eq - v), json_string(eq + 1)) < 0)
					return usage(cmd, "--env '%s': not UTF-8", v);
			} else if (a[2] == 'c') {
				if (json_object_set_new(x->start, "cwd", json_string(v)) < 0)
					return usage(cmd, "--cwd '%s': not UTF-8", v);
			} else {
				char *end;

				x->timeout = strtol(v, &end, 10);
				if (*end || x->timeout < 1 || x->timeout > 86400)
					return usage(cmd, "--timeout wants whole seconds 1-86400, not '%s'", v);
				json_object_set_new(x->start, "timeout_seconds", json_integer(x->timeout));
			}
		} else {
			return usage(cmd, "unknown option '%s'", a);
		}
	}
	if (shell)
		x->in = x->tty = true;
	if (!x->id)
		return usage(cmd, "%s", "give a sandbox ID");
	if (!cli_id_valid(x->id, strlen(x->id)))
		return usage(cmd, "'%s' is not a sandbox id ([A-Za-z0-9_-]+)", x->id);
	if (i >= argc && !shell)
		return usage(cmd, "%s", "no command: put -- and the command after the sandbox ID");
	i++; /* the "--" */
	if (i >= argc && !shell)
		return usage(cmd, "%s", "no command after --");
	if (i >= argc) {
		/* a login shell: bash where there is one */
		json_array_append_new(av, json_string("/bin/sh"));
		json_array_append_new(av, json_string("-c"));
		json_array_append_new(av, json_string("command -v bash >/dev/null 2>&1 && exec bash -l; "
						      "exec sh -l"));
	}
	for (; i < argc; i++) {
		json_t *s = json_string(argv[i]);

		if (!s)
			return usage(cmd, "argument '%s' is not UTF-8", argv[i]);
		json_array_append_new(av, s);
	}
	if (x->detach && (x->in || x->tty))
		return usage(cmd, "%s", "--detach takes no -i or -t: a detached command has no "
					"input or terminal");
	if (x->tty && !isatty(0))
		return usage(cmd, "%s", "standard input is not a terminal, which -t and shell need "
					"(use exec -i for pipes)");
	json_object_set_new(x->start, "argv", av);
	if (json_object_size(env))
		json_object_set_new(x->start, "env", env);
	else
		json_decref(env);
	if (x->tty) {
		struct winsize ws;

		json_object_set_new(x->start, "tty", json_true());
		if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
			json_object_set_new(x->start, "rows", json_integer(ws.ws_row));
			json_object_set_new(x->start, "cols", json_integer(ws.ws_col));
		}
	}
	if (x->detach)
		json_object_set_new(x->start, "detach", json_true());
	return 0;
}

/* ---- the session ---------------------------------------------------------- */

static int
send_json(struct cli_ws *w, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	int rc = s ? cli_ws_queue(w, WS_OP_TEXT, s, strlen(s)) : -ENOMEM;

	free(s);
	json_decref(j);
	return rc;
}

static int
write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t k = write(fd, c, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static const char *
sig_name(int sig)
{
	static const struct {
		int n;
		const char *s;
	} t[] = { { SIGHUP, "SIGHUP" },   { SIGINT, "SIGINT" },   { SIGQUIT, "SIGQUIT" },
		  { SIGKILL, "SIGKILL" }, { SIGTERM, "SIGTERM" }, { SIGPIPE, "SIGPIPE" },
		  { SIGSEGV, "SIGSEGV" }, { SIGABRT, "SIGABRT" }, { SIGUSR1, "SIGUSR1" },
		  { SIGUSR2, "SIGUSR2" }, { SIGALRM, "SIGALRM" }, { SIGBUS, "SIGBUS" } };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].n == sig)
			return t[i].s;
	return "?";
}

/* The exit message: the CLI's status, and a line when it was no plain
 * exit. */
static int
exit_of(const struct xs *x, const json_t *ev)
{
	const json_t *code = json_object_get(ev, "code"), *sig = json_object_get(ev, "signal");

	tty_restore();
	if (json_is_true(json_object_get(ev, "timed_out"))) {
		fprintf(stderr, "sluice: timed out after %ld s\n", x->timeout);
		return EXIT_TIMED_OUT;
	}
	if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128) {
		int n = (int)json_integer_value(sig);

		fprintf(stderr, "sluice: killed by signal %d (%s)\n", n, sig_name(n));
		return 128 + n;
	}
	if (json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255)
		return (int)json_integer_value(code);
	return EXIT_API;
}

static int
on_text(struct xs *x, const struct ws_msg *m, bool *ended)
{
	json_t *j = json_loadb((const char *)m->data, m->len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	int rc = -1;

	if (type && strcmp(type, "exit") == 0) {
		rc = exit_of(x, j);
		*ended = true;
	} else if (type && strcmp(type, "detached") == 0) {
		printf("%lld\n", (long long)json_integer_value(json_object_get(j, "pid")));
		fflush(stdout);
		rc = 0;
		*ended = true;
	} else if (type && strcmp(type, "error") == 0) {
		tty_restore();
		if (x->o->json) {
			json_t *e = json_pack("{s:{s:O?, s:O?}}", "error", "code",
					      json_object_get(j, "code"), "message",
					      json_object_get(j, "message"));
			char *s = json_dumps(e, JSON_COMPACT);

			if (s)
				printf("%s\n", s);
			free(s);
			json_decref(e);
		} else {
			fprintf(stderr, "sluice: %s: %s\n",
				json_string_value(json_object_get(j, "code")) ?: "error",
				json_string_value(json_object_get(j, "message")) ?: "");
		}
		rc = EXIT_API;
		*ended = true;
	}
	/* "started" and unknown types: nothing to do */
	json_decref(j);
	return rc;
}

static int
session(struct xs *x, struct cli_ws *w)
{
	bool in_open = x->in, ended = false, out_broken = false;
	int status = EXIT_API;
	char *buf = malloc(IN_CHUNK);

	if (!buf)
		return EXIT_API;
	if (send_json(w, json_incref(x->start)) < 0 ||
	    (!x->in && !x->detach && send_json(w, json_pack("{s:s}", "type", "eof")) < 0))
		goto out;
	for (;;) {
		struct pollfd p[3] = { { .fd = w->fd, .events = POLLIN },
				       { .fd = sig_pipe[0], .events = POLLIN },
				       { .fd = -1, .events = POLLIN } };
		struct ws_msg m;
		enum ws_rx_result r;

		/* the messages read so far */
		while ((r = cli_ws_next(w, &m)) == WS_RX_MSG) {
			if (m.opcode == WS_OP_BINARY && m.len > 0 && !ended) {
				int fd = m.data[0] == 2 ? 2 : 1;

				if (!out_broken && write_all(fd, m.data + 1, m.len - 1) < 0 && fd == 1)
					out_broken = true; /* | head: keep reading */
			} else if (m.opcode == WS_OP_TEXT && !ended) {
				int rc = on_text(x, &m, &ended);

				if (rc >= 0)
					status = rc;
			} else if (m.opcode == WS_OP_PING) {
				cli_ws_queue(w, WS_OP_PONG, m.data, m.len);
			} else if (m.opcode == WS_OP_CLOSE) {
				uint8_t cp[WS_CTRL_MAX];

				cli_ws_queue(w, WS_OP_CLOSE, cp,
					     ws_close_payload(cp, WS_CLOSE_NORMAL, NULL));
				cli_ws_flush(w);
				if (!ended) {
					tty_restore();
					fprintf(stderr, "sluice: the exec stream closed (%u%s%.*s) "
							"without an exit\n",
						m.close_code, m.len > 2 ? ": " : "",
						m.len > 2 ? (int)m.len - 2 : 0,
						(const char *)m.data + 2);
				}
				goto out;
			}
		}
		if (r == WS_RX_ERROR) {
			tty_restore();
			fprintf(stderr, "sluice: %s: %s\n", x->o->api, w->rx.reason);
			goto out;
		}
		if (cli_ws_flush(w) < 0) {
			tty_restore();
			fprintf(stderr, "sluice: %s: the connection failed\n", x->o->api);
			goto out;
		}
		if (w->wlen > 0)
			p[0].events |= POLLOUT;
		/* stdin only while the queue has room (after the flush) */
		if (in_open && w->wlen < QUEUE_HIGH)
			p[2].fd = 0;
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			goto out;
		if (p[1].revents & POLLIN) {
			unsigned char sigs[16];
			ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));

			for (ssize_t k = 0; k < n; k++) {
				int s = sigs[k];

				if (s == SIGWINCH) {
					struct winsize ws;

					if (x->tty && ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row &&
					    ws.ws_col)
						send_json(w, json_pack("{s:s, s:i, s:i}", "type",
								       "resize", "rows", ws.ws_row,
								       "cols", ws.ws_col));
				} else if (s == SIGHUP) {
					/* our terminal is gone: so is the session (the
					 * server kills a foreground command) */
					status = 128 + SIGHUP;
					ended = true;
					goto out;
				} else if (!ended) {
					/* ^C and friends reach the guest's command */
					send_json(w, json_pack("{s:s, s:i}", "type", "signal",
							       "signal", s));
				}
			}
		}
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(0, buf, IN_CHUNK);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				send_json(w, json_pack("{s:s}", "type", "eof"));
			} else {
				cli_ws_queue(w, WS_OP_BINARY, buf, (size_t)n);
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = cli_ws_read(w);

			if (n == 0 || (n < 0 && n != -EAGAIN)) {
				tty_restore();
				if (!ended)
					fprintf(stderr, "sluice: %s: the connection closed without an "
							"exit\n", x->o->api);
				goto out;
			}
		}
	}
out:
	free(buf);
	tty_restore();
	return ended ? status : EXIT_API;
}

int
cli_xs_main(const struct cli_xs_opts *o, const char *cmd, int argc, char **argv)
{
	struct xs x = { .o = o };
	struct cli_ws w;
	struct cli_ws_refusal ref;
	char target[128], err[512];
	int rc;

	if ((rc = parse(&x, cmd, argc, argv)) != 0) {
		json_decref(x.start);
		return rc;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec/stream", x.id);
	rc = cli_ws_open(&w, o->url, o->api, o->token, target, &ref, err, sizeof(err));
	if (rc < 0) {
		if (rc == -EPROTO && ref.status) {
			if (o->json) {
				json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", ref.code,
						      "message", ref.message);
				char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;

				printf("%s\n", s ? s : "{}");
				free(s);
				json_decref(e);
			} else
				fprintf(stderr, "sluice: %s: %s\n", ref.code[0] ? ref.code : "error",
					ref.message[0] ? ref.message : "the server refused the stream");
		} else {
			fprintf(stderr, "sluice: %s\n", err);
		}
		cli_ws_close(&w);
		json_decref(x.start);
		return EXIT_API;
	}
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		cli_ws_close(&w);
		json_decref(x.start);
		return EXIT_API;
	}
	signal(SIGPIPE, SIG_IGN);
	catch(SIGWINCH);
	catch(SIGINT);
	catch(SIGTERM);
	catch(SIGHUP);
	catch(SIGQUIT);
	if (x.tty && tty_raw() < 0) {
		fprintf(stderr, "sluice: %s: cannot put the terminal in raw mode\n", cmd);
		tty_restore();
		cli_ws_close(&w);
		json_decref(x.start);
		return EXIT_API;
	}
	rc = session(&x, &w);
	tty_restore();
	cli_ws_close(&w);
	json_decref(x.start);
	return rc;
}

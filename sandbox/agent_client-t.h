/* agent_client-t.h: types of the host side of the agent protocol
 * (agent/proto.h): one connection to one sandbox's sluice-agent, many
 * calls multiplexed over it, matched by stream id. */
#ifndef SLUICE_SBX_AGENT_CLIENT_T_H
#define SLUICE_SBX_AGENT_CLIENT_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;
struct sbx_agent_conn;
struct sbx_agent_call;

enum sbx_agent_ev_kind {
	SBX_AGENT_EV_STARTED = 0,  /* exec: the command runs; pid set */
	SBX_AGENT_EV_STDOUT,       /* exec stdout or read contents; data */
	SBX_AGENT_EV_STDERR,       /* exec stderr; data */
	SBX_AGENT_EV_CREDIT,       /* the agent accepts more input bytes */
	SBX_AGENT_EV_RESULT,       /* json; terminal unless more */
	SBX_AGENT_EV_EXIT,         /* exec ended: terminal */
	SBX_AGENT_EV_ERROR,        /* terminal: code, message, err */
	SBX_AGENT_EV_HELLO,        /* hello or ping answered: terminal */
};

/* What a call's callback gets. Everything is borrowed for the duration of
 * the callback. */
struct sbx_agent_event {
	enum sbx_agent_ev_kind kind;
	const uint8_t *data;            /* STDOUT, STDERR */
	size_t len;
	const struct json_t *json;      /* STARTED, RESULT, EXIT, ERROR, HELLO */
	bool more;                      /* RESULT: more RESULT frames follow */
	int pid;                        /* STARTED */
	int exit_code;                  /* EXIT: -1 when killed by a signal */
	int signal;                     /* EXIT: 0 unless killed */
	bool timed_out;                 /* EXIT: the agent's timeout fired */
	const char *code;               /* ERROR: an AGENT_E_* string */
	const char *message;            /* ERROR: one line */
	int err;                        /* ERROR: the agent's errno, or
					   ETIMEDOUT, EPIPE, EPROTO, 0 */
};

/* Called on the thread that calls sbx_agent_process(). After a terminal
 * event the call is gone: its pointer must not be used again. The callback
 * may start, send on, grant or cancel calls; it must not free the
 * connection. */
typedef void (*sbx_agent_cb)(struct sbx_agent_call *call,
			     const struct sbx_agent_event *ev, void *arg);

struct sbx_agent_call_opts {
	int64_t deadline_ms;    /* absolute, CLOCK_MONOTONIC ms; 0 = none */
	uint32_t window;        /* initial receive credit; 0 = the default */
	bool manual_window;     /* the caller grants with
				   sbx_agent_call_grant(); otherwise credit
				   is returned after each data callback */
};

struct sbx_agent_stats {
	uint64_t unknown_stream;        /* frames for no open call: ignored */
	uint64_t bad_frames;            /* frames that broke a rule */
	uint64_t timeouts;
};

/* The blocking helpers' exec request and result. */
struct sbx_agent_exec_req {
	const char *const *argv;        /* NULL-terminated, non-empty */
	const char *const *env;         /* "NAME=value", NULL-terminated, or
					   NULL */
	const char *cwd;                /* NULL: "/" */
	const void *stdin_data;         /* NULL: stdin is /dev/null */
	size_t stdin_len;
	int timeout_ms;                 /* 0: none */
	size_t max_output;              /* per stream kept; 0: 16 MiB; more
					   is read and dropped (truncated) */
	/* sbx_agent_req_exec() only (a caller streaming the call itself): */
	bool stdin_stream;              /* "stdin": true without stdin_data */
	bool pty;                       /* a terminal of rows x cols (0: the
					   agent's default 24 x 80) */
	unsigned rows, cols;
	bool detach;                    /* outlives the call; output dropped */
};

struct sbx_agent_exec_res {
	int pid;
	int exit_code;                  /* -1 when killed by a signal */
	int signal;
	bool timed_out;
	bool truncated;
	char *out, *err;                /* malloc'd, NUL-terminated */
	size_t out_len, err_len;
	int64_t duration_ms;
};

#endif

/* wsexec.h: GET /v1/sandboxes/{id}/exec/stream, a command over a
 * WebSocket (docs/api.md, "Interactive exec"): stdin, stdout, stderr,
 * resize, signals and the exit status on one connection, with an
 * optional terminal. The handler (wsexec.c) runs on the API thread of
 * its connection and takes the connection over after the 101; the
 * message parsers below are pure (unit-tested). */
#ifndef SLUICE_GW_WSEXEC_H
#define SLUICE_GW_WSEXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "apiv1.h"

#define GW_WSX_MSG_MAX (1u << 20)        /* one client message */
#define GW_WSX_START_WAIT_MS 30000       /* for the first message */
#define GW_WSX_WINDOW (256u * 1024)      /* output credit given the agent */
#define GW_WSX_CLOSE_WAIT_MS 5000        /* for the client's close */
#define GW_WSX_SUBPROTOCOL "sluice.exec.v1"
#define GW_WSX_STDOUT 1                  /* first byte of a server binary message */
#define GW_WSX_STDERR 2

/* The first message: {"type": "exec", "argv", "env", "cwd",
 * "timeout_seconds", "tty", "rows", "cols", "detach"}. */
struct gw_wsx_start {
	struct gw_exec_args a;   /* argv, env, cwd, timeout (strings borrowed from body) */
	bool has_timeout;        /* else none */
	bool tty, detach;
	unsigned rows, cols;     /* with tty; 0: the agent's default */
	struct json_t *body;     /* owns the strings of a */
};
/* Parses the first text message (p, len). 0, or -EINVAL with the field
 * and the reason in err. Pure. */
int gw_wsx_start_parse(const char *p, size_t len, struct gw_wsx_start *out, char *err,
		       size_t errsz);
void gw_wsx_start_fini(struct gw_wsx_start *s);

enum gw_wsx_ctl_kind {
	GW_WSX_RESIZE = 0,
	GW_WSX_SIGNAL,
	GW_WSX_EOF,
};
struct gw_wsx_ctl {
	enum gw_wsx_ctl_kind kind;
	unsigned rows, cols;     /* resize: 1..65535 */
	int signal;              /* signal: 1..64 */
};
/* Parses a later text message: {"type": "resize", "rows", "cols"},
 * {"type": "signal", "signal": "INT" | "SIGINT" | 2}, {"type": "eof"};
 * unknown keys refused. 0 or -EINVAL with a line in err. Pure. */
int gw_wsx_ctl_parse(const char *p, size_t len, struct gw_wsx_ctl *out, char *err, size_t errsz);
/* A signal's number from "INT", "SIGINT" (the common ones), or 0. */
int gw_wsx_signal_num(const char *name);
/* Its name ("INT"), or NULL. */
const char *gw_wsx_signal_name(int sig);

/* True when the comma-separated header value holds token (case-
 * insensitive). Pure. */
bool gw_wsx_has_token(const char *v, size_t len, const char *token);

/* The route's handler (arg: the struct gw_apiv1). */
void gw_wsx_handler(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg);

#endif

/* agent_client.h: the host side of the agent protocol (agent/proto.h).
 *
 * A connection owns the agent stream's fd and no event loop: the caller
 * polls sbx_agent_fd_of() for the events sbx_agent_want() returns, until
 * the deadline it gives, and calls sbx_agent_process() when either comes.
 * One reader per connection; every call is a stream, matched by id; ids
 * are never reused on a connection, so a late frame for a finished call
 * is ignored and counted. Deadlines are checked before anything is sent:
 * a call that expired before its request left is never sent at all.
 * Not thread-safe: one thread per connection.
 *
 * The *_sync helpers run a private poll loop on the fd until their call
 * ends; they are for tests, debug tools and start-up paths, and must not
 * run while the caller's loop has other calls pending on this connection
 * that it expects to drive itself (they are driven here meanwhile).
 */
#ifndef SLUICE_SBX_AGENT_CLIENT_H
#define SLUICE_SBX_AGENT_CLIENT_H

#include "agent_client-t.h"

/* CLOCK_MONOTONIC in milliseconds: the clock of every deadline here. */
int64_t sbx_agent_now_ms(void);

/* Takes ownership of fd (a connected stream; made non-blocking and
 * close-on-exec). Returns NULL on out of memory (fd is then closed). */
struct sbx_agent_conn *sbx_agent_conn_new(int fd);
/* Closes the fd; pending calls get an ERROR "closed" event first. NULL is
 * fine. Not from inside a callback. */
void sbx_agent_conn_free(struct sbx_agent_conn *c);

int sbx_agent_fd_of(const struct sbx_agent_conn *c);
/* The poll events wanted (POLLIN, POLLOUT) and, in *deadline_ms, the
 * earliest call deadline (-1: none). 0 once the connection is dead. */
short sbx_agent_want(const struct sbx_agent_conn *c, int64_t *deadline_ms);
/* Does what `revents` (0 is fine: timers only) and the time allow: fails
 * expired calls, reads and dispatches frames, writes queued frames.
 * Returns 0, or -EPIPE (the agent hung up), -EPROTO (the byte stream is
 * out of step), -EIO; after an error every call has ended with ERROR
 * "closed" and the connection only waits to be freed. */
int sbx_agent_process(struct sbx_agent_conn *c, short revents, int64_t now_ms);
const struct sbx_agent_stats *sbx_agent_stats(const struct sbx_agent_conn *c);

/* ---- calls ------------------------------------------------------------ */

/* Starts a call: req is a JSON object with "op" (borrowed; serialised
 * now). opts may be NULL. Returns the call, or NULL with *errp set to
 * -EINVAL (too large), -EPIPE (connection dead), -ETIMEDOUT (deadline
 * already passed), -ENOMEM. */
struct sbx_agent_call *sbx_agent_call_start(struct sbx_agent_conn *c,
					    const struct json_t *req,
					    const struct sbx_agent_call_opts *opts,
					    sbx_agent_cb cb, void *arg,
					    int *errp);
/* For tests: a call whose opening frame is given raw (any type, any
 * payload up to AGENT_FRAME_HARD_MAX, rules unchecked) so that a test can
 * send the agent a malformed frame on a stream of its own. */
struct sbx_agent_call *sbx_agent_call_start_raw(struct sbx_agent_conn *c,
						uint8_t type, const void *p,
						size_t len,
						const struct sbx_agent_call_opts *opts,
						sbx_agent_cb cb, void *arg,
						int *errp);
/* Hello (ping false) or ping (true) on stream 0: one at a time (-EBUSY).
 * The answer arrives as a HELLO event. */
struct sbx_agent_call *sbx_agent_hello(struct sbx_agent_conn *c, bool ping,
				       int64_t deadline_ms, sbx_agent_cb cb,
				       void *arg, int *errp);

uint32_t sbx_agent_call_id(const struct sbx_agent_call *call);
/* Input bytes the agent accepts now (exec with stdin, write). */
uint64_t sbx_agent_call_credit(const struct sbx_agent_call *call);
/* Queues up to len input bytes within the credit, in frames of at most
 * AGENT_DATA_MAX. Returns the bytes taken (maybe 0), or -EPIPE. */
long sbx_agent_call_send(struct sbx_agent_call *call, const void *p,
			 size_t len);
/* The input ended (the empty IN frame). */
int sbx_agent_call_end_input(struct sbx_agent_call *call);
/* manual_window calls: the caller consumed n more bytes. */
int sbx_agent_call_grant(struct sbx_agent_call *call, uint32_t n);
/* exec: signal the command's process group. */
int sbx_agent_call_kill(struct sbx_agent_call *call, int sig);
/* Writes what is queued for the agent (a cancel's ERROR frame) before
 * the connection is left idle: 0, -ETIMEDOUT, or the connection's
 * error. */
int sbx_agent_flush_sync(struct sbx_agent_conn *c, int timeout_ms);
/* exec with a pty: the terminal's new size (1..65535 each). */
int sbx_agent_call_resize(struct sbx_agent_call *call, unsigned rows, unsigned cols);
/* Forgets the call without a callback; the agent is told to drop the
 * stream (an exec's command is killed). Later frames are ignored. */
void sbx_agent_call_cancel(struct sbx_agent_call *call);

/* ---- blocking helpers -------------------------------------------------- */

/* Each returns 0, or a negative errno with a line in err: the agent's own
 * errno when it sent one (-ENOENT, ...), -EREMOTEIO for other agent
 * errors (err starts with the AGENT_E_* code and ": "), -ETIMEDOUT,
 * -EPIPE, -EPROTO. timeout_ms <= 0 means none. */

/* *hello: a new reference to the agent's hello object (may be NULL). */
int sbx_agent_hello_sync(struct sbx_agent_conn *c, int timeout_ms,
			 struct json_t **hello, char *err, size_t errsz);
/* Runs a command to its end; res is filled (free with _fini) also when the
 * command fails or times out (that is not an error here). */
int sbx_agent_exec_sync(struct sbx_agent_conn *c,
			const struct sbx_agent_exec_req *req,
			struct sbx_agent_exec_res *res, char *err,
			size_t errsz);
void sbx_agent_exec_res_fini(struct sbx_agent_exec_res *res);
/* Copies the file at path into out_fd / in_fd's contents (to EOF) into
 * the file at path, replacing it atomically. *bytes: the size moved. */
int sbx_agent_read_sync(struct sbx_agent_conn *c, const char *path,
			int out_fd, int timeout_ms, uint64_t *bytes, char *err,
			size_t errsz);
int sbx_agent_write_sync(struct sbx_agent_conn *c, const char *path,
			 unsigned mode, int in_fd, int timeout_ms,
			 uint64_t *bytes, char *err, size_t errsz);
/* list, stat, mkdir, remove: req is the request object with "op" set
 * (borrowed). *result: a new reference to the answer; for list, one
 * object whose "entries" holds every batch. result may be NULL. */
int sbx_agent_op_sync(struct sbx_agent_conn *c, const struct json_t *req,
		      int timeout_ms, struct json_t **result, char *err,
		      size_t errsz);

/* After a sandbox was parked (sbx_unpark()): tells the agent the time and
 * gives it fresh entropy ("configure" with "time_ns" and "entropy"), so
 * that its clock is right and no two resumed clones share a random
 * stream (the request: sbx_agent_req_refresh() in agent_requests.h).
 * 0 or -errno as above. */
int sbx_agent_refresh_sync(struct sbx_agent_conn *c, int timeout_ms, char *err, size_t errsz);

/* RFC 4648 base64 (with padding) of n bytes into out, which has room for
 * 4 * ((n + 2) / 3) + 1 bytes; returns the length. Pure. */
size_t sbx_b64_encode(const void *in, size_t n, char *out);

#endif

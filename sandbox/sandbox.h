/* sandbox.h: the sandbox backend interface (types in sandbox-t.h).
 *
 * Threading: every call is synchronous and runs on the caller's thread;
 * sandbox/ owns no thread, event loop or timer. sbx_start() returns once
 * the sandbox's first process is running (milliseconds for `ns`);
 * sbx_stop() blocks for at most its grace period plus the time the kernel
 * takes to end what is left. */
#ifndef SLUICE_SANDBOX_H
#define SLUICE_SANDBOX_H

#include "sandbox-t.h"

/* Sets the process-wide options (log sink, directories, agent path).
 * Call once before anything else; 0 or -errno. Not thread-safe. */
int sbx_init(const struct sbx_init_opts *opts, char *err, size_t errsz);

/* Releases what sbx_init() copied. */
void sbx_fini(void);

/* A backend by name ("ns"), or NULL if there is none by that name or the
 * host cannot run it. The result is static. */
const struct sbx_backend *sbx_backend_get(const char *name);

/* The `rpc` backend instance for supervisor c (one per distinct command
 * line or socket, made on first use, kept for the process's life; the
 * supervisor is started or connected to lazily). NULL with err set when
 * c is malformed. The result is static. */
const struct sbx_backend *sbx_rpc_backend_get(const struct sbx_rpc_conf *c, char *err,
                                              size_t errsz);
/* The instance a saved rpc sandbox names ("supervisor"), for adopt,
 * forget and the sweep after a restart. NULL with err set. */
const struct sbx_backend *sbx_rpc_backend_from_saved(const struct json_t *saved, char *err,
                                                     size_t errsz);
/* Connects (starting the supervisor) when it is down and its back-off
 * has passed, and re-adopts its sandboxes on a new connection; says
 * whether it is up and whether its engine can run here (capabilities).
 * Blocks for at most a few seconds. b must be an rpc backend. */
void sbx_rpc_backend_check(const struct sbx_backend *b, struct sbx_rpc_status *st);

/* The backend's ops table (for code that dispatches itself). */
const struct sbx_backend_ops *sbx_backend_ops(const struct sbx_backend *b);

/* Fills *out with what the backend can do. */
void sbx_caps(const struct sbx_backend *b, struct sbx_caps *out);

/* Prepares (once; later calls reuse the cached result) the template req
 * names and hands back an opaque reference the caller owns and frees with
 * sbx_template_free(). 0 or -errno with err set. */
int sbx_template_ensure(const struct sbx_backend *b, const struct sbx_template_req *req,
                        struct sbx_template **out, char *err, size_t errsz);
void sbx_template_free(const struct sbx_backend *b, struct sbx_template *t);

/* Checks a spec without touching the system: 0 or -EINVAL with err set.
 * sbx_start() calls it too. */
int sbx_spec_validate(const struct sbx_spec *spec, char *err, size_t errsz);

/* Starts a sandbox from template t (borrowed; it must outlive the
 * sandbox) as spec describes (borrowed for the call). On success *out is
 * a handle the caller owns: stop it with sbx_stop(), then sbx_free().
 * On failure nothing is left behind. */
int sbx_start(const struct sbx_backend *b, const struct sbx_template *t,
              const struct sbx_spec *spec, struct sbx **out, char *err, size_t errsz);

/* The connected stream to the sandbox's agent: a nonblocking, close-on-
 * exec fd the handle owns (the caller borrows it until sbx_free()), or
 * -EBADF once stopped. sbx_agent_conn_new() takes ownership of its fd:
 * give it a dup(). When every copy is closed the agent does not exit: it
 * waits for the next host (sbx_adopt()); sbx_stop() ends it. */
int sbx_agent_fd(const struct sbx *s);

/* Asks the sandbox to end, waits up to grace_ms, then ends it by force,
 * and removes everything it had on the host (processes, mounts, cgroups,
 * its writable layer, its link). Idempotent; 0 or -errno (something could
 * not be removed: err says what). */
int sbx_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz);

/* Frees the handle, stopping it first (grace 0) if it still runs (see
 * sbx_release() to keep it running instead). NULL is fine. */
void sbx_free(struct sbx *s);

/* The id the sandbox was started with (borrowed). */
const char *sbx_id(const struct sbx *s);

/* ---- durability: sandboxes outlive the process that started them -----
 *
 * A running sandbox does not depend on its starter: it keeps running when
 * the daemon exits or is killed, and a later process finds it again from
 * what sbx_save() returned. Call these from one thread at a time per
 * sandbox; sbx_sweep() not while this process is starting sandboxes. */

/* A JSON object that lets sbx_adopt() (in this or a later process) find
 * this sandbox again: {"backend", "id", "pid", "start_time", "state_dir",
 * "cgroups", "agent_socket", "net"...}. No secrets. A new reference the
 * caller owns (json_decref), or NULL when out of memory or stopped. */
struct json_t *sbx_save(const struct sbx *s);

/* Finds the sandbox `saved` (borrowed) describes and hands back a handle
 * the caller owns, exactly like one from sbx_start(): sbx_agent_fd() is a
 * NEW connection to its agent (the caller says hello on it), sbx_stop()
 * ends it and removes everything, sbx_free() and sbx_id() work.
 * 0; -ESRCH when that sandbox no longer runs (its process is gone or is a
 * different one, or is not in the sandbox's cgroup); -EINVAL when saved is
 * malformed or names another backend; another -errno (the agent could not
 * be reached). On failure nothing is adopted and nothing is changed. */
int sbx_adopt(const struct sbx_backend *b, const struct json_t *saved, struct sbx **out, char *err,
              size_t errsz);

/* Removes what a sandbox that is gone left behind: its cgroups, its state
 * directory, its link in the peer namespace. Idempotent: 0 when nothing
 * is left. -EBUSY (nothing done) while that sandbox still runs: adopt and
 * stop it instead; -EINVAL for a malformed saved. */
int sbx_forget(const struct sbx_backend *b, const struct json_t *saved, char *err, size_t errsz);

/* Ends and removes every sandbox of this backend found under this
 * process's state directory whose id is not among keep[0..nkeep) (the
 * orphans of a crash: booted but never recorded), by killing what is in
 * its cgroups and removing them, its link and its state directory.
 * Processes are found only through the sandbox's cgroup. A sandbox is
 * this backend's only if its state directory says so; cgroup directories
 * under the parent without one (another instance sharing the parent) are
 * left alone. Returns how many it ended or removed, or -errno (err says
 * what could not be removed). */
int sbx_sweep(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err,
              size_t errsz);

/* Frees the handle and leaves the sandbox running, to be adopted later
 * (a daemon's clean shutdown). Closes this process's agent stream: the
 * agent then waits for the next host. NULL is fine. */
void sbx_release(struct sbx *s);

/* ---- parking: a warm sandbox that costs (almost) nothing ---------------
 *
 * sbx_park() pauses a running sandbox where the backend can (caps.park):
 * its processes stop using CPU, its agent does not answer, and its state
 * is kept as it is. sbx_unpark() resumes it in milliseconds. The guest
 * does not see the time pass: after sbx_unpark() the caller gives the
 * agent the time and fresh entropy ("configure" with "time_ns" and
 * "entropy", agent/proto.h). Both are idempotent; -ENOTSUP when the
 * backend cannot park. sbx_stop(), sbx_save() and sbx_release() work on a
 * parked sandbox; sbx_adopt() hands back a running (unparked) one. */
int sbx_park(struct sbx *s, char *err, size_t errsz);
int sbx_unpark(struct sbx *s, char *err, size_t errsz);

#endif

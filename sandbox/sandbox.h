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
 * give it a dup(). The agent ends when every copy is closed, which is how
 * sbx_stop() asks it to. */
int sbx_agent_fd(const struct sbx *s);

/* Asks the sandbox to end, waits up to grace_ms, then ends it by force,
 * and removes everything it had on the host (processes, mounts, cgroups,
 * its writable layer, its link). Idempotent; 0 or -errno (something could
 * not be removed: err says what). */
int sbx_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz);

/* Frees the handle, stopping it first (grace 0) if it still runs. NULL is
 * fine. */
void sbx_free(struct sbx *s);

/* The id the sandbox was started with (borrowed). */
const char *sbx_id(const struct sbx *s);

#endif

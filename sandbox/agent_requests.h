/* agent_requests.h: every request the host sends a sluice-agent, and the
 * fields of its answers that callers read, so that nothing above sandbox/
 * needs agent/proto.h (sl_sandbox links it privately). Pure: jansson and
 * libc only; any thread.
 *
 * A builder returns a new reference to the request object (give it to
 * sbx_agent_call_start() or sbx_agent_op_sync(), then json_decref() it), or
 * NULL: out of memory, or a string that is not UTF-8 (jansson refuses it).
 */
#ifndef SLUICE_SBX_AGENT_REQUESTS_H
#define SLUICE_SBX_AGENT_REQUESTS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent_client-t.h"

/* exec: argv, env ("NAME=value" each), cwd (NULL: "/"), stdin (the host
 * sends input when req->stdin_data is not NULL) and the agent's timeout
 * (req->timeout_ms; 0 or less: none). NULL with one line in err: an empty
 * argv, an env entry that is not NAME=value, text that is not UTF-8, or out
 * of memory. Borrows req. */
struct json_t *sbx_agent_req_exec(const struct sbx_agent_exec_req *req, char *err, size_t errsz);

/* stat, list, read of path. */
struct json_t *sbx_agent_req_stat(const char *path);
struct json_t *sbx_agent_req_list(const char *path);
struct json_t *sbx_agent_req_read(const char *path);
/* write: the host sends the contents; mode is the new file's bits. */
struct json_t *sbx_agent_req_write(const char *path, unsigned mode);
/* tar_read: the directory tree at path as a tar stream (OUT data, then a
 * RESULT with counts). tar_write: the host sends a tar stream, extracted
 * below path (made, with its parents, when create). */
struct json_t *sbx_agent_req_tar_read(const char *path);
struct json_t *sbx_agent_req_tar_write(const char *path, bool create);
/* A tar_write ERROR event: true when its code says the archive (or an
 * entry in it) was refused, not the file system; *entry (may be NULL)
 * gets the entry it names (borrowed from err, "" when none). */
bool sbx_agent_err_bad_tar(const char *code, const struct json_t *err, const char **entry);
/* mkdir path; parents: like mkdir -p. */
struct json_t *sbx_agent_req_mkdir(const char *path, bool parents);
/* After a sandbox was parked (sbx_unpark()): "configure" with the time
 * ("time_ns") and SBX_AGENT_REFRESH_ENTROPY fresh bytes ("entropy"), so
 * that its clock is right and no two resumed clones share a random
 * stream; a caller may add fields of its own (a backend making a clone
 * unique: "hostname", "env", "cwd", "net"). *out is a new reference; 0,
 * or -errno with err set. The entropy never stays in our memory. */
#define SBX_AGENT_REFRESH_ENTROPY 64
int sbx_agent_req_refresh(struct json_t **out, char *err, size_t errsz);

/* Adds sluice's CA (PEM, sbx_spec.ca_pem) to a "configure" request req
 * ("ca": the agent installs it; see agent/proto.h AGENT_F_CA). 0, or
 * -EINVAL (not 1..SBX_CA_MAX bytes of UTF-8) / -ENOMEM with err set. */
int sbx_agent_req_add_ca(struct json_t *req, const char *pem, char *err, size_t errsz);
/* An empty "configure" request, for a caller to add fields to. NULL out
 * of memory. */
struct json_t *sbx_agent_req_configure(void);
/* A "configure" request with sluice's CA alone (the ns backend's, right
 * after the agent starts). NULL with err set. */
struct json_t *sbx_agent_req_ca(const char *pem, char *err, size_t errsz);

/* A stat answer (sbx_agent_op_sync()'s result): true if it names a
 * directory; *size its "size" (0 when absent; a negative one as a huge
 * unsigned number, over every cap). Borrows st. */
bool sbx_agent_stat_is_dir(const struct json_t *st, uint64_t *size);
/* A list answer's entries (an array of {"name", "type", "size", "mtime"}),
 * borrowed from lr; NULL if it has none. */
struct json_t *sbx_agent_list_entries(const struct json_t *lr);

#endif

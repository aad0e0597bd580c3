/* state.h: the claims state file, its codec, and the retrier that keeps it
 * up to date.
 *
 * The state file holds the live sandboxes (warm and claimed) so that a
 * restarted daemon can re-adopt them: one compact JSON document, keys
 * sorted, replaced atomically (a temporary file, fsync, rename, fsync of
 * the directory). Its shape (version 1; unknown keys anywhere are ignored,
 * for forward compatibility; the known ones are required with these
 * types):
 *
 *   {"format": 1, "journal_seq": N >= 0, "written_ms": int,
 *    "sandboxes": [ {
 *      "id": [A-Za-z0-9_-]{1,48} (unique), "pool": non-empty string,
 *      "state": "warm" | "claimed", "tenant": string | null,
 *      "tier": "warm" | "cold", "ref": object (the backend's, opaque),
 *      "lane": string, "address": "a.b.c.d" | null,
 *      "ifname": string (at most 15 bytes), "created_ms": int,
 *      "expires_ms": int, "ttl_s": 0..4294967295,
 *      "labels": {string: string}, "env": {string: string},
 *      "layer": object (opaque) | null } ... ]}
 *
 * "tenant" and "layer" may be left out of a warm entry; a claimed one
 * needs the tenant key (null: the operator's) and a layer object.
 * Credentials appear only by reference (a name, a version), never their
 * values: the codec cannot tell, so the caller must not put them in. */
#ifndef SLUICE_POOL_STATE_H
#define SLUICE_POOL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;

#define POOL_STATE_FORMAT 1
#define POOL_STATE_MAX_BYTES (64u << 20)        /* a bigger file is refused */

/* 0 when doc is a valid state document; otherwise -EINVAL with the JSON
 * path of the first error in err ("sandboxes[3].expires_ms: not an
 * integer"). Pure. */
int pool_state_validate(const struct json_t *doc, char *err, size_t errsz);

/* Replaces dir/name by doc, atomically: validates it (-EINVAL), writes it
 * (compact, sorted keys, a final newline) to dir/.name.tmp (mode 0600),
 * fsync()s and closes it, renames it over dir/name and fsync()s dir.
 * 0, or -errno with one line in err naming the step and the path. Leaves
 * no temporary file behind on failure. doc is borrowed. Blocks on the
 * disk: call it off the manager's lock. Thread-safe for distinct names;
 * one writer per name (struct pool_saver sees to that). */
int pool_state_write(const char *dir, const char *name, const struct json_t *doc, char *err,
		     size_t errsz);

/* Reads and validates dir/name: the document (the caller's reference).
 * NULL with err set to the empty string when there is no such file (a
 * first start: not an error); NULL with one line in err when it cannot be
 * read, is bigger than POOL_STATE_MAX_BYTES, is not JSON (or repeats a
 * key) or is not a valid state document. errsz must be at least 1. */
struct json_t *pool_state_read(const char *dir, const char *name, char *err, size_t errsz);

/* ---- the retrier ----
 *
 * Decides when the state file is written, so that there is a single
 * writer that always writes the newest state and never drops a change:
 * the manager calls pool_saver_changed() whenever the state changes, and
 * on each tick asks pool_saver_should_write(); when it says yes, the
 * manager snapshots the state (under its lock, so the snapshot is at
 * least as new as the generation returned), writes it off the lock
 * (pool_state_write() on a worker), and reports with pool_saver_done().
 * A change during a write leaves the newer generation unwritten, so the
 * next tick writes again. Failures back off (doubling from backoff_min_ms
 * to backoff_max_ms, reset by a success); the object has no memory,
 * thread or timer of its own, so retrying forever grows nothing.
 *
 * Pure and not thread-safe: every call under the caller's lock, with the
 * caller's clock (any monotonic milliseconds). */
struct pool_saver {
	uint64_t gen;                   /* the newest change */
	uint64_t written;               /* the newest generation written */
	bool busy;
	uint64_t backoff_min_ms, backoff_max_ms;
	uint64_t backoff_ms;            /* the current one, 0: not failing */
	uint64_t next_ms;               /* no attempt before (while failing);
					 * 0: at once, = pool_saver_retry_now() */
	int last_rc;                    /* the last failure's, 0: none */
	uint64_t failures;              /* in the current run */
};

void pool_saver_init(struct pool_saver *s, uint64_t backoff_min_ms, uint64_t backoff_max_ms);
/* Something in the state changed: bumps the generation. */
void pool_saver_changed(struct pool_saver *s);
/* True when a write is due: a change not yet written, no write in
 * flight, the back-off elapsed. Then the write is marked in flight and
 * *gen set to the generation it must carry (snapshot now). */
bool pool_saver_should_write(struct pool_saver *s, uint64_t now_ms, uint64_t *gen);
/* The write of gen ended with rc (0 or -errno). Success: gen counts as
 * written, the back-off resets. Failure: the back-off doubles (up to the
 * maximum). *log_it (may be NULL) is true when the caller should log: the
 * first failure after a success, a failure with another error than the
 * previous one, and the first success after failures (rc 0: "written
 * again"); false for every other attempt. */
void pool_saver_done(struct pool_saver *s, uint64_t gen, int rc, uint64_t now_ms, bool *log_it);
/* Milliseconds from now_ms until the saver needs the tick again: 0 when
 * a write is due now, UINT64_MAX when nothing is to do (all written, or a
 * write in flight: its pool_saver_done() will say). */
uint64_t pool_saver_next_ms(const struct pool_saver *s, uint64_t now_ms);
/* Drops the back-off wait, so that a change is written at the next
 * pool_saver_should_write() (a clean stop's last write). */
void pool_saver_retry_now(struct pool_saver *s);
/* True when every change has been written. */
bool pool_saver_clean(const struct pool_saver *s);

#endif

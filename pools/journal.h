/* journal.h: the claim journal, its reader and the usage fold.
 *
 * The journal is an append-only file of one compact JSON object per line,
 * one line per event (boot, claim, release, reap, gone, drain, adopt, ...).
 * Every line carries "event", "seq" (1, 2, 3, ... without gaps while the
 * file is intact), "ts" (RFC 3339 UTC with milliseconds) and "ts_ms"
 * (milliseconds since the epoch), plus what the caller put in: "claim",
 * "pool", "tenant", "tier", "layer" version and so on. Credential values
 * never go in (the caller's duty: the journal writes what it is given).
 *
 * Writing is split so that the claim path never waits for more than one
 * commit: pool_journal_append() only serialises into memory (microseconds
 * under the journal's mutex, never I/O); pool_journal_sync() makes it
 * durable with a group commit (leader/follower, no thread of its own):
 * the first caller to find no commit under way writes every pending byte
 * and fdatasync()s once; callers arriving meanwhile wait for that commit
 * and then one of them leads the next, so one fdatasync() serves every
 * event that arrived while the previous one was under way.
 *
 * The module owns no thread, timer or log file (STYLE.md §1): it logs
 * through the callback given to pool_journal_open(), whose `level` is an
 * enum pool_log_level value (manager.h: 0 err, 1 warn, 2 info, 3 debug)
 * and which may be called with the journal's mutex held (it must not call
 * back into the journal), and waits on a pthread condition variable only. */
#ifndef SLUICE_POOL_JOURNAL_H
#define SLUICE_POOL_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct json_t;
struct pool_journal;

#define POOL_JOURNAL_LINE_MAX (1u << 20)        /* longer lines are garbage */
#define POOL_JOURNAL_PENDING_MAX (64u << 20)    /* bytes not yet written */

typedef void (*pool_journal_log_fn)(void *arg, int level, const char *msg);

/* What a scan of the file found. A line is garbage when it is not JSON,
 * not an object, has no integer "seq" >= 1, or is longer than
 * POOL_JOURNAL_LINE_MAX; the last line is torn instead when it has no
 * trailing newline or is garbage. A seq at or below the highest seen so
 * far is skipped (backwards); a seq above the highest + 1 is a gap (the
 * event is still delivered; `missing` adds up the seqs jumped over, the
 * first expected seq being 1). */
struct pool_journal_stats {
	uint64_t events;                /* delivered */
	uint64_t torn;                  /* 0 or 1: the last line */
	uint64_t garbage;
	uint64_t backwards;
	uint64_t gaps;
	uint64_t missing;
	uint64_t last_seq;              /* the highest seq delivered, 0: none */
	uint64_t torn_offset, torn_len; /* where the torn line was, in bytes */
	uint64_t garbage_offset;        /* where the first garbage line was */
};

/* Called for each garbage line (not the torn last line) with its offset,
 * in file order among the events. */
typedef void (*pool_journal_bad_fn)(void *arg, uint64_t offset);

/* The file layer the journal uses: the system calls by default; tests give
 * a fake one that fails where they want (pool_journal_set_io). Each
 * behaves as its system call: -1 with errno on failure. */
struct pool_journal_io {
	ssize_t (*write)(int fd, const void *buf, size_t n);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*open)(const char *path, int flags, mode_t mode);
	int (*rename)(const char *from, const char *to);
};

/* Opens (or creates: mode 0600, and then the directory is fsync'd) the
 * journal at path for appending, scans it once, and continues after its
 * highest valid seq. A torn last line is cut off (ftruncate) and logged
 * with its offset and length; garbage lines before it are counted and
 * logged once, and left in place (the reader skips them). NULL with one
 * line in err on failure (EROFS, EACCES, a read error...): the caller
 * refuses to start with it. log may be NULL (silence); log_arg is handed
 * back to it. The journal is used from any thread. */
struct pool_journal *pool_journal_open(const char *path, pool_journal_log_fn log, void *log_arg,
				       char *err, size_t errsz);

/* Closes the journal: one last pool_journal_sync() of everything appended
 * (a failure is logged with the number of events lost), then closes the
 * file and frees j. No other call on j may be running or follow. NULL is
 * fine. */
void pool_journal_close(struct pool_journal *j);

/* Appends one event. Steals ev (always, also on failure), which must be a
 * JSON object with a string "event"; "seq", "ts" and "ts_ms" are set here
 * (any the caller put in are replaced). Returns the event's seq, or 0 when
 * it was not recorded: ev is not such an object, out of memory, or
 * POOL_JOURNAL_PENDING_MAX bytes are already waiting to be written (the
 * disk has been failing for a long time: the refusal is logged once per
 * run of refusals, and the seq is not used up, so the file stays without
 * gaps). Never does I/O, never waits for it. Any thread. */
uint64_t pool_journal_append(struct pool_journal *j, struct json_t *ev);

/* Returns once every event up to seq is durable (written and
 * fdatasync'd): 0; seq 0 returns 0 at once. Group commit, see above.
 *
 * A commit is all or nothing. When its write or fdatasync fails, every
 * event of the batch is dropped: its seq is never used again, every
 * caller syncing one of them gets the error (-errno, also after a later
 * commit succeeded), and the bytes the batch may have left in the file
 * are cut off; the failure is logged once per run of failures. After a
 * failed fdatasync the descriptor is not trusted again: the next commit
 * first rewrites the durable part of the file into PATH.repair and renames
 * it over PATH (at most one attempt a second; meanwhile commits fail with
 * -EIO). So an event is in the file after a restart only if its sync
 * returned 0, or its sync never returned (a crash mid-commit).
 *
 * -ETIMEDOUT: timeout_ms (< 0: no bound) passed while another caller's
 * commit was under way; the event may still become durable. A commit the
 * caller leads itself is never interrupted. -EINVAL: seq was never handed
 * out. Any thread. */
int pool_journal_sync(struct pool_journal *j, uint64_t seq, int timeout_ms);

/* Returns once every event up to seq is settled (durable, or dropped by a
 * failed commit) and the file is trusted (a broken one is rewritten first,
 * by a commit of its own): 0. For a caller that wants the file to hold
 * all that can be held (the state file's writer, a stop), not an
 * acknowledgement: a dropped event is not an error here, a commit that
 * fails meanwhile is (-errno). -ETIMEDOUT and -EINVAL as
 * pool_journal_sync(). Any thread. */
int pool_journal_flush(struct pool_journal *j, uint64_t seq, int timeout_ms);

/* The highest seq known durable; the highest handed out. Any thread. */
uint64_t pool_journal_durable(const struct pool_journal *j);
uint64_t pool_journal_last(const struct pool_journal *j);
/* The number of successful commits (fdatasync() calls) so far; the number
 * of events dropped by failed commits (for tests and metrics). */
uint64_t pool_journal_commits(const struct pool_journal *j);
uint64_t pool_journal_dropped(const struct pool_journal *j);

/* Replaces the file layer (NULL: the system calls again). For tests. */
void pool_journal_set_io(struct pool_journal *j, const struct pool_journal_io *io);

/* Streams the journal at path line by line (lines bounded by
 * POOL_JOURNAL_LINE_MAX), calling fn for every event in file order with
 * its seq; the event is borrowed for the call. Skips and counts torn,
 * garbage and backwards lines; counts gaps (see struct
 * pool_journal_stats, which st, if not NULL, receives). A missing file is
 * zero events, not an error. 0, or -errno with one line in err. Reads a
 * file another process or thread is appending to safely: a line being
 * written is seen as torn. */
int pool_journal_read(const char *path,
		      void (*fn)(void *arg, const struct json_t *ev, uint64_t seq), void *arg,
		      struct pool_journal_stats *st, char *err, size_t errsz);
/* The same, also calling bad (may be NULL) for every garbage line, in file
 * order among the events. */
int pool_journal_read_ex(const char *path,
			 void (*fn)(void *arg, const struct json_t *ev, uint64_t seq),
			 pool_journal_bad_fn bad, void *arg, struct pool_journal_stats *st,
			 char *err, size_t errsz);

/* ---- usage: claim-seconds per tenant and pool (pure) ----
 *
 * Fed the journal's events in order, it keeps one interval per claim id
 * (memory: about 100 bytes per distinct claim id, plus each distinct
 * tenant and pool name once; nothing is forgotten, so clipping by any
 * `since` stays exact). Events used:
 *   "claim" {"claim", "pool", "tenant" (string; null or absent: the
 *           operator, counted as tenant POOL_USAGE_OPERATOR), "ts_ms"}
 *           starts the claim's interval; a second start of the same id
 *           is ignored;
 *   "release", "reap", "gone" {"claim", "ts_ms"} end it; an end without
 *           a start, or of an ended claim, is ignored;
 *   "adopt" {"claim", ...} keeps it running (a claim the fold has not
 *           seen starts then, if the event names its pool).
 * Anything else (boot, drain, unknown events, events missing a field) is
 * ignored. Not thread-safe: one owner. */
#define POOL_USAGE_OPERATOR "-"         /* tenant names never start with '-' */

struct pool_usage;

struct pool_usage *pool_usage_new(void);
void pool_usage_free(struct pool_usage *u);
/* Folds one event (borrowed). Out of memory drops the event. */
void pool_usage_event(struct pool_usage *u, const struct json_t *ev);
/* Calls cb once per (tenant, pool) with claims overlapping
 * [since_ms, now_ms], ordered by tenant then pool (names borrowed for the
 * call): claim_seconds is the sum of the intervals clipped to the window
 * (open ones end at now_ms), claims the number of claims that started in
 * the window or were running when it began. tenant NULL: every tenant;
 * otherwise that one only (POOL_USAGE_OPERATOR: the operator's). */
void pool_usage_result(struct pool_usage *u, const char *tenant, int64_t since_ms,
		       int64_t now_ms,
		       void (*cb)(void *arg, const char *tenant, const char *pool,
				  double claim_seconds, uint64_t claims),
		       void *arg);

#endif

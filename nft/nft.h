/* nft.h: the `inet sluice` nftables table of the fleet namespace, built
 * with libnftnl into atomic netlink batches and committed over libmnl.
 *
 * Two halves:
 *
 *   builders  fw_build_*() append exactly one batch (NFNL_MSG_BATCH_BEGIN
 *             .. NFNL_MSG_BATCH_END) to a struct fw_batch. Pure: no I/O,
 *             no global state; any thread. On error they return a negative
 *             errno and leave the batch as it was.
 *   netlink   fw_open() opens an NETLINK_NETFILTER socket in the calling
 *             thread's network namespace (enter the fleet namespace first);
 *             fw_commit() sends batches and reads every acknowledgement;
 *             fw_counters_*() read the per-sandbox counters. A struct
 *             fw_ctx has one user at a time.
 *
 * The kernel applies a batch all or nothing. Every operation is idempotent:
 * attaching twice, detaching something never attached, removing a missing
 * table all succeed. Except fw_build_reconcile() and fw_build_remove(),
 * batches need the table to exist (fail with -ENOENT otherwise): the daemon
 * reconciles once at start, then attaches, unlocks, locks and detaches.
 *
 * nft.c describes the table, chain by chain; that comment is the contract.
 */
#ifndef SLUICE_FW_NFT_H
#define SLUICE_FW_NFT_H

#include "nft-t.h"

/* ---- batches ---------------------------------------------------------- */

/* A growable buffer of netlink messages: zero or more batches. */
struct fw_batch;

/* An empty batch buffer, or NULL when out of memory. */
struct fw_batch *fw_batch_new(void);

/* Frees b; NULL is fine. */
void fw_batch_free(struct fw_batch *b);

/* Empties b for reuse (keeps its memory). */
void fw_batch_reset(struct fw_batch *b);

/* The bytes built so far and their length (borrowed; valid until the next
 * change to b). */
const void *fw_batch_data(const struct fw_batch *b, size_t *len);

/* Replaces the whole table in one batch: it works whether or not the table
 * existed, and leaves exactly the lanes' rules and the sandboxes' elements
 * and counters (each created with its `start` values: read them first with
 * fw_counters_dump() to keep them). Every s[i].lane must be one of
 * lanes[0..nlanes) or an equal copy of one; lanes must not overlap;
 * addresses must be distinct.
 * lanes and s may be NULL when their count is 0. 0 or -EINVAL/-ENOMEM. */
int fw_build_reconcile(struct fw_batch *b, const struct fw_lane *lanes, size_t nlanes,
                       const struct fw_sbx *s, size_t ns);

/* Attaches s: its (ifname, address) pair passes the anti-spoofing check and
 * it gets its three counters, tx, rx and refused (from s->start if new). A sandbox attached for
 * the first time is locked; attaching again changes nothing (s->unlocked is
 * not read). 0 or -EINVAL/-ENOMEM. */
int fw_build_attach(struct fw_batch *b, const struct fw_sbx *s);

/* Opens s's lane doors to s (one `doors` element per lane port; a lane
 * without ports gives an empty batch). 0 or -EINVAL/-ENOMEM. */
int fw_build_unlock(struct fw_batch *b, const struct fw_sbx *s);

/* Closes them again. 0 or -EINVAL/-ENOMEM. */
int fw_build_lock(struct fw_batch *b, const struct fw_sbx *s);

/* Removes everything about s: doors, map elements, counters, its `hosts`
 * element. 0 or -EINVAL/-ENOMEM. */
int fw_build_detach(struct fw_batch *b, const struct fw_sbx *s);

/* Deletes the whole table (if it exists). 0 or -EINVAL/-ENOMEM. */
int fw_build_remove(struct fw_batch *b);

/* The link name of the sandbox at address a: "slv" and its 8 lowercase hex
 * digits, e.g. 10.88.1.7 -> "slv0a580107". */
void fw_ifname(struct in_addr a, char out[FW_IFNAMSIZ]);

/* ---- netlink ---------------------------------------------------------- */

struct fw_ctx;

/* Opens the socket in the calling thread's network namespace. NULL with a
 * line in err when it cannot (not root: "permission denied"). */
struct fw_ctx *fw_open(char *err, size_t errsz);

/* Closes c; NULL is fine. */
void fw_close(struct fw_ctx *c);

/* Sends every batch in b, one at a time, each message asking for an
 * acknowledgement, and reads them all. 0, or the first failure as -errno
 * with err naming the batch message that failed ("NEWSETELEM doors
 * (message 3 of batch 1): No such file or directory"); batches before the
 * failing one stay committed, the failing one changed nothing, later ones
 * were not sent. An empty b is 0. */
int fw_commit(struct fw_ctx *c, const struct fw_batch *b, char *err, size_t errsz);

/* Reads sandbox a's counters (three GETOBJ requests). 0, -ENOENT when a is not attached (or there
 * is no table), other -errno. */
int fw_counters_get(struct fw_ctx *c, struct in_addr a, struct fw_counters *out);

/* Calls cb once per attached sandbox, in address order, with its counters
 * (a side missing from the table reads 0). A negative return from cb stops
 * the walk and is returned. 0 (also when there is no table), or -errno. */
typedef int (*fw_counters_cb)(void *arg, struct in_addr a, const struct fw_counters *n);
int fw_counters_dump(struct fw_ctx *c, fw_counters_cb cb, void *arg);

/* 1 when the table exists, 0 when not, or -errno. */
int fw_table_exists(struct fw_ctx *c);

#endif

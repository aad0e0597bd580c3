/* tarfs.h: a directory tree to a tar stream and a tar stream to a
 * directory tree, on the local file system (the agent in a guest, the
 * `sluice` CLI on the user's machine). libc and tar.h only.
 *
 * The walker writes, below its root: regular files, directories and
 * symbolic links (stored as links, never followed), each with its mode
 * bits and mtime; sockets, devices and FIFOs are skipped and counted, and
 * so are directories on kernel pseudo file systems (proc, sysfs, cgroup,
 * devpts, ...: a tree of "/" leaves /proc and /sys out). A
 * file that changes size while it is read keeps its header's size (cut
 * or padded with zeros) and is counted as changed.
 *
 * The extractor writes below its root only, and never follows a symbolic
 * link on the way: every component of an entry's parent is opened with
 * O_NOFOLLOW, one at a time, from the root's descriptor, so an entry
 * that would go through a link (one the archive made earlier, or one
 * already there) is refused; missing parents are made (0700, then the
 * archive's mode if it lists them). An existing file or link at an
 * entry's name is replaced, an existing directory kept (its mode and
 * mtime set); a file or link where a directory is wanted, or the other
 * way, is refused. Modes are masked to 0777: no setuid, setgid or sticky
 * bit comes out of an archive; owners are not set (the extracting user
 * owns everything). Directory modes and mtimes are applied at the end,
 * deepest first, so a read-only directory can still be filled.
 * Extraction stops at the first bad entry: what came before it stays
 * written, and the counters say how much that was.
 */
#ifndef SLUICE_AGENT_TARFS_H
#define SLUICE_AGENT_TARFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_TARFS_DEPTH_MAX 256       /* directory levels below the root */
#define AGENT_TARFS_DIRS_MAX (1u << 20) /* directories one extraction sets */

struct agent_tarfs_stats {
	uint64_t entries;       /* headers written or extracted */
	uint64_t files, dirs, links;
	uint64_t bytes;         /* file data bytes */
	uint64_t skipped;       /* walker: sockets, devices, FIFOs */
	uint64_t changed;       /* walker: files whose size changed */
};

struct agent_tarfs_walk;
struct agent_tarfs_x;

/* Opens the walk of the directory at root (followed if it is a link: the
 * caller named it). 0, or a negative errno (-ENOTDIR, -ENOENT, ...) with
 * a line in err. */
int agent_tarfs_walk_open(struct agent_tarfs_walk **out, const char *root, char *err,
			  size_t errsz);
/* The next bytes of the archive into buf[0..cap) (cap >= 1). Returns the
 * count, 0 when the archive is complete, or a negative errno with a line
 * in err (the walk is then over). */
long agent_tarfs_walk_read(struct agent_tarfs_walk *w, uint8_t *buf, size_t cap, char *err,
			   size_t errsz);
void agent_tarfs_walk_stats(const struct agent_tarfs_walk *w, struct agent_tarfs_stats *st);
void agent_tarfs_walk_free(struct agent_tarfs_walk *w);

/* Opens an extraction into the directory root; with create, root (and
 * its parents) are made if missing. 0, or a negative errno with err. */
int agent_tarfs_x_open(struct agent_tarfs_x **out, const char *root, bool create, char *err,
		       size_t errsz);
/* Feeds archive bytes. 0, or a negative errno with a line in err:
 * -EBADMSG for a bad archive or an entry refused (the line says what and
 * names the entry, agent_tarfs_x_entry() too), another for a file system
 * error. After an error every call fails. */
int agent_tarfs_x_feed(struct agent_tarfs_x *x, const uint8_t *p, size_t len, char *err,
		       size_t errsz);
/* The input ended: -EBADMSG if the archive is truncated; then (also after
 * an error) the directories' modes and mtimes are applied. 0 or -errno. */
int agent_tarfs_x_finish(struct agent_tarfs_x *x, char *err, size_t errsz);
void agent_tarfs_x_stats(const struct agent_tarfs_x *x, struct agent_tarfs_stats *st);
/* The entry the last error is about ("" when none). */
const char *agent_tarfs_x_entry(const struct agent_tarfs_x *x);
void agent_tarfs_x_free(struct agent_tarfs_x *x);

#endif

/* tar.h: POSIX ustar/pax archives, the pure part: the strict resumable
 * decoder and the header encoder. No I/O, no allocation: every buffer is
 * inside the structs, whose size is fixed. libc only, so that the agent
 * and the `sluice` CLI (cli/files.c) both link it (sl_agent_tar).
 *
 * What the decoder accepts, and nothing else:
 *  - 512-byte ustar headers ("ustar\0" "00", or GNU's "ustar  \0") with a
 *    right checksum; numbers in octal (or GNU base-256 for size, mtime);
 *  - types: regular file ('0', '\0', '7'), directory ('5'), symbolic link
 *    ('2'); pax extended headers ('x': path, linkpath, size, mtime used,
 *    other keys ignored; 'g' parsed and ignored) and GNU long names ('L',
 *    'K'), each at most AGENT_TAR_EXT_MAX bytes;
 *  - names that are relative and plain: no leading '/', no "..", "." or
 *    empty component (a leading "./" is dropped, a trailing '/' allowed),
 *    no NUL, each component at most 255 bytes, at most AGENT_TAR_NAME_MAX
 *    in all; "." (or "./") alone names the root, a directory only;
 *  - a directory or a link of size 0; a link target of 1..NAME_MAX bytes;
 *  - the end: two zero blocks (what follows is ignored). An archive that
 *    stops before them is truncated, an error.
 * Refused with a reason that names the entry: hard links, devices, FIFOs,
 * any other type, checksum errors, bad numbers, bad names.
 */
#ifndef SLUICE_AGENT_TAR_H
#define SLUICE_AGENT_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_TAR_BLOCK 512
#define AGENT_TAR_NAME_MAX 4096         /* bytes of a name or link target */
#define AGENT_TAR_EXT_MAX (64u * 1024)  /* one pax or GNU long-name body */
#define AGENT_TAR_HDR_MAX (12u * 1024)  /* agent_tar_header()'s output */
#define AGENT_TAR_ERR_MAX 512

enum agent_tar_type {
	AGENT_TAR_FILE = 0,
	AGENT_TAR_DIR,
	AGENT_TAR_SYMLINK,
};

/* One entry. name: normalised (no leading "./", no trailing '/'), ""
 * for the root. link: the symlink's target as stored, never resolved. */
struct agent_tar_entry {
	enum agent_tar_type type;
	char name[AGENT_TAR_NAME_MAX + 1];
	char link[AGENT_TAR_NAME_MAX + 1];
	uint64_t size;
	unsigned mode;          /* the archive's bits & 07777 */
	int64_t mtime;          /* seconds since the epoch */
};

/* ---- encoder ---------------------------------------------------------- */

/* Writes the header(s) of e into out[0..cap): a pax 'x' header first
 * when the name, link, size or mtime do not fit ustar's fields, then the
 * ustar header. e->name "" is written "./"; a directory gets a trailing
 * '/'. Returns the bytes written (a multiple of 512), -ENAMETOOLONG, or
 * -ENOSPC when cap is smaller than needed (AGENT_TAR_HDR_MAX always
 * suffices). */
long agent_tar_header(uint8_t *out, size_t cap, const struct agent_tar_entry *e);

/* The zero bytes that follow `size` bytes of data. */
size_t agent_tar_pad(uint64_t size);

/* ---- decoder ---------------------------------------------------------- */

enum agent_tar_dec_result {
	AGENT_TAR_AGAIN = 0,    /* all input used: more, please */
	AGENT_TAR_ENTRY,        /* d->ent is the next entry */
	AGENT_TAR_DATA,         /* *data, *dlen: the entry's next bytes */
	AGENT_TAR_END,          /* the end of the archive: done */
	AGENT_TAR_ERROR,        /* d->err says why; every later call too */
};

enum agent_tar_dec_state {
	AGENT_TDS_HEADER = 0,   /* collecting a 512-byte block */
	AGENT_TDS_EXT,          /* collecting a pax / GNU long-name body */
	AGENT_TDS_DATA,         /* an entry's data */
	AGENT_TDS_PAD,          /* the zeros after data or an ext body */
	AGENT_TDS_ZERO,         /* one zero block seen: the next must be */
	AGENT_TDS_END,
	AGENT_TDS_ERROR,
};

struct agent_tar_dec {
	enum agent_tar_dec_state state;
	uint8_t blk[AGENT_TAR_BLOCK];
	size_t blen;
	char ext_type;          /* 'x', 'g', 'L', 'K' while in EXT */
	uint8_t ext[AGENT_TAR_EXT_MAX];
	size_t ext_len, ext_want;
	/* what extended headers said for the next entry */
	bool has_path, has_link, has_size, has_mtime;
	unsigned ext_seen;      /* 1 'x', 2 'L', 4 'K' seen for this entry */
	char path[AGENT_TAR_NAME_MAX + 1];
	char lpath[AGENT_TAR_NAME_MAX + 1];
	uint64_t x_size;
	int64_t x_mtime;
	struct agent_tar_entry ent;
	uint64_t left;          /* DATA: bytes of the entry still to come */
	uint64_t pad;           /* PAD: zero bytes still to skip */
	uint64_t offset;        /* bytes of the archive consumed */
	uint64_t entries;       /* ENTRY results so far */
	char err[AGENT_TAR_ERR_MAX];
	char err_entry[AGENT_TAR_NAME_MAX + 1]; /* the entry the error is
						   about, "" when none */
};

void agent_tar_dec_init(struct agent_tar_dec *d);

/* Feeds in[0..len). *consumed: the bytes used; call again with the rest.
 * ENTRY: d->ent valid until the next call (its data follows as DATA
 * results, d->ent.size bytes in all). DATA: *data points into in. */
enum agent_tar_dec_result agent_tar_dec_feed(struct agent_tar_dec *d, const uint8_t *in,
					     size_t len, size_t *consumed,
					     const uint8_t **data, size_t *dlen);

/* The input ended: true if the archive had ended (END returned); else it
 * is truncated and d->err says where. */
bool agent_tar_dec_finish(struct agent_tar_dec *d);

/* Normalises and checks an archive name (see above) into out (cap >=
 * AGENT_TAR_NAME_MAX + 1). *is_dir: it ended in '/'. NULL, or a static
 * reason. Pure. */
const char *agent_tar_name_check(const char *in, size_t len, char *out, size_t cap,
				 bool *is_dir);

#endif

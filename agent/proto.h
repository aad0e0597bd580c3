/* proto.h: the agent protocol, the one header sluice-agent (agent/) and the
 * host side (sandbox/agent_client.c) both include. Implemented in
 * agent/proto.c, which both sides compile; it uses jansson and libc only.
 *
 * One byte stream (a socketpair end, /dev/hvc0, a virtio-serial port)
 * carries frames:
 *
 *   offset 0  u32 big-endian  payload length (not counting this header)
 *   offset 4  u8              type (enum agent_frame_type)
 *   offset 5  u32 big-endian  stream id
 *   offset 9  payload
 *
 * Stream 0 is the connection itself (hello, ping/pong, connection errors).
 * Every other stream is opened by the host with a REQUEST frame on a fresh
 * id and ends with exactly one terminal frame from the agent: EXIT (exec),
 * RESULT without "more": true (every other op), or ERROR. Control frames
 * carry one JSON object (an empty payload means {}); data frames carry raw
 * bytes, an empty one meaning end of input.
 *
 * Flow control is credit based, per stream and per direction: a sender may
 * send only as many data bytes as the receiver granted with WINDOW frames
 * (payload: u32 big-endian increment). The agent starts an exec or read
 * stream with the request's "window" (default AGENT_WINDOW_DEFAULT) and
 * stops reading the child's pipe (or the file) when it is spent; for exec
 * with "stdin": true and for write, the agent grants the host its window
 * with a WINDOW frame and grants again as it consumes the bytes.
 *
 * A frame that breaks a rule (unknown type, payload over its type's limit,
 * a WINDOW that is not 4 bytes, a data frame on stream 0, bad JSON) fails
 * its own stream only: the receiver skips its payload and answers ERROR on
 * that stream. Only a length over AGENT_FRAME_HARD_MAX, which means the
 * byte stream is out of step, ends the connection.
 */
#ifndef SLUICE_AGENT_PROTO_H
#define SLUICE_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_PROTO_VERSION 1
#define AGENT_HDR_LEN 9
#define AGENT_DATA_MAX (256u * 1024)         /* one data chunk */
#define AGENT_CTRL_MAX (64u * 1024)          /* one JSON control message */
#define AGENT_PAYLOAD_MAX AGENT_DATA_MAX     /* the largest valid payload */
#define AGENT_FRAME_HARD_MAX (16u * 1024 * 1024) /* over this: out of step */
#define AGENT_WINDOW_DEFAULT (1024u * 1024)  /* initial credit per stream */
#define AGENT_WINDOW_MAX (64u * 1024 * 1024) /* credit a peer may hold */

/* How a frame type's payload is checked. */
enum agent_frame_class {
	AGENT_FC_CTRL = 0,      /* a JSON object, <= AGENT_CTRL_MAX */
	AGENT_FC_DATA,          /* raw bytes, <= AGENT_DATA_MAX, stream != 0 */
	AGENT_FC_WINDOW,        /* exactly 4 bytes, stream != 0 */
};

/* X(id, number, name, class, on stream 0: 0 never, 1 only, 2 either) */
#define AGENT_FRAME_TYPES(X)                                                  \
	X(HELLO, 1, "hello", CTRL, 1)     /* both ways: version, caps */    \
	X(REQUEST, 2, "request", CTRL, 0) /* host: opens a stream */         \
	X(STARTED, 3, "started", CTRL, 0) /* agent: exec began, its pid */   \
	X(IN, 4, "in", DATA, 0)           /* host: stdin, file contents */   \
	X(OUT, 5, "out", DATA, 0)         /* agent: stdout, file contents */ \
	X(ERR, 6, "err", DATA, 0)         /* agent: stderr */                \
	X(WINDOW, 7, "window", WINDOW, 0) /* both: credit increment */       \
	X(EXIT, 8, "exit", CTRL, 0)       /* agent: exec ended (terminal) */ \
	X(KILL, 9, "kill", CTRL, 0)       /* host: signal an exec */         \
	X(RESULT, 10, "result", CTRL, 0)  /* agent: an op's answer */        \
	X(ERROR, 11, "error", CTRL, 2)    /* both: a stream failed */        \
	X(PING, 12, "ping", CTRL, 1)      /* host: health check */           \
	X(PONG, 13, "pong", CTRL, 1)      /* agent: health answer */      \
	X(RESIZE, 14, "resize", CTRL, 0)  /* host: a pty exec's size */

enum agent_frame_type {
#define AGENT_FT_ENUM(id, num, name, cls, s0) AGENT_FT_##id = num,
	AGENT_FRAME_TYPES(AGENT_FT_ENUM)
#undef AGENT_FT_ENUM
	AGENT_FT__MAX
};

/* JSON field names. Requests: {"op": ..., fields}. */
#define AGENT_F_VERSION "version"       /* hello: integer */
#define AGENT_F_CAPS "capabilities"     /* hello: array of strings */
#define AGENT_F_MAX_DATA "max_data"
#define AGENT_F_MAX_CTRL "max_control"
#define AGENT_F_OP "op"                 /* request: an AGENT_OP_* */
#define AGENT_F_ARGV "argv"             /* exec: non-empty string array */
#define AGENT_F_ENV "env"               /* exec: object of strings */
#define AGENT_F_CWD "cwd"               /* exec: string, default "/" */
#define AGENT_F_STDIN "stdin"           /* exec: true = host sends IN */
#define AGENT_F_TIMEOUT_MS "timeout_ms" /* exec: integer, 0 = none */
#define AGENT_F_WINDOW "window"         /* exec, read: initial credit */
#define AGENT_F_PTY "pty"               /* exec: true = a terminal */
#define AGENT_F_ROWS "rows"             /* exec with pty, resize: 1..65535 */
#define AGENT_F_COLS "cols"             /* exec with pty, resize: 1..65535 */
#define AGENT_F_DETACH "detach"         /* exec: true = outlives its stream */
#define AGENT_F_DETACHED "detached"     /* result of a detached exec */
#define AGENT_F_PATH "path"             /* file ops: absolute path */
#define AGENT_F_MODE "mode"             /* write, mkdir: permission bits */
#define AGENT_F_PARENTS "parents"       /* mkdir: like mkdir -p */
#define AGENT_F_RECURSIVE "recursive"   /* remove: like rm -r */
#define AGENT_F_PID "pid"               /* started, hello, pong */
#define AGENT_F_CODE "code"             /* exit: exit status or null;
					   error: an AGENT_E_* string */
#define AGENT_F_SIGNAL "signal"         /* exit: signal or null; kill */
#define AGENT_F_TIMED_OUT "timed_out"   /* exit: killed by its timeout */
#define AGENT_F_SIZE "size"             /* read, write, stat results */
#define AGENT_F_TYPE "type"             /* stat, list entries */
#define AGENT_F_MTIME "mtime"           /* stat, list entries: seconds */
#define AGENT_F_NAME "name"             /* list entries */
#define AGENT_F_TARGET "target"         /* list, stat: a link's target */
#define AGENT_F_ENTRIES "entries"       /* list result: array */
#define AGENT_F_MORE "more"             /* list result: more follow */
#define AGENT_F_MESSAGE "message"       /* error: one line for people */
#define AGENT_F_ERRNO "errno"           /* error: the errno, if any */
#define AGENT_F_UPTIME_MS "uptime_ms"   /* pong */
#define AGENT_F_STREAMS "streams"       /* pong: open streams */
#define AGENT_F_TIME_NS "time_ns"       /* configure: CLOCK_REALTIME, ns */
#define AGENT_F_ENTROPY "entropy"       /* configure: base64, credited */
#define AGENT_F_HOSTNAME "hostname"     /* configure */
#define AGENT_F_NET "net"               /* configure: object, below */
#define AGENT_F_IFNAME "ifname"         /* configure net: default the first
					   non-loopback link */
#define AGENT_F_ADDRESS "address"       /* configure net: "A.B.C.D/P" */
#define AGENT_F_GATEWAY "gateway"       /* configure net: "A.B.C.D" */
#define AGENT_F_MTU "mtu"               /* configure net: 68..65535 */
#define AGENT_F_CA "ca"                 /* configure: sluice's CA, PEM text
					   (certificates only, never a key):
					   the guest trusts it, see below */
/* configure also takes AGENT_F_ENV and AGENT_F_CWD: the defaults of later
 * execs. */
#define AGENT_F_FIELD "field"           /* error "invalid": the bad field */
#define AGENT_F_STEP "step"             /* error of configure: the step */

#define AGENT_OP_EXEC "exec"
#define AGENT_OP_READ "read"
#define AGENT_OP_WRITE "write"
#define AGENT_OP_LIST "list"
#define AGENT_OP_STAT "stat"
#define AGENT_OP_MKDIR "mkdir"
#define AGENT_OP_REMOVE "remove"
#define AGENT_OP_CONFIGURE "configure"
/* tar_read {path, window}: OUT data is a POSIX ustar/pax archive of the
 * directory tree at path (agent/tarfs.h: files, directories, symbolic
 * links as links, modes, mtimes; sockets, devices and FIFOs skipped),
 * then RESULT {size, entries, files, dirs, links, bytes, skipped,
 * changed}. tar_write {path, create}: the host sends the archive as IN
 * data (credit as for write) and the agent extracts it below path (made
 * with its parents when "create" is true), strictly (agent/tar.h); RESULT
 * {entries, files, dirs, links, bytes}, or ERROR "bad_tar" naming the
 * entry ("entry") with the counts of what was extracted before it. */
#define AGENT_OP_TAR_READ "tar_read"
#define AGENT_OP_TAR_WRITE "tar_write"
#define AGENT_F_CREATE "create"         /* tar_write: make path */
#define AGENT_F_ENTRY "entry"           /* bad_tar error: the entry */

/* configure's limits */
#define AGENT_ENTROPY_MIN 16            /* bytes, decoded */
#define AGENT_ENTROPY_MAX 512
#define AGENT_HOSTNAME_MAX 64
/* configure "ca": at most this many bytes of PEM. The agent writes it to
 * AGENT_CA_DIR/AGENT_CA_FILE and a bundle of the guest's system roots plus
 * it to AGENT_CA_DIR/AGENT_CA_BUNDLE (AGENT_CA_DIR_ALT when /etc is not the
 * sandbox's own), adds it to the guest's system trust store where that is
 * the sandbox's own, and points later execs' CA variables at them. */
#define AGENT_CA_MAX (16u * 1024)
#define AGENT_CA_DIR "/etc/sluice"
#define AGENT_CA_DIR_ALT "/run/sluice"
#define AGENT_CA_FILE "ca.pem"
#define AGENT_CA_BUNDLE "bundle.pem"
#define AGENT_MTU_MIN 68
#define AGENT_MTU_MAX 65535

/* Error codes, the "code" of an ERROR frame. */
#define AGENT_E_BAD_FRAME "bad_frame"         /* type, size or stream */
#define AGENT_E_BAD_REQUEST "bad_request"     /* JSON or its fields */
#define AGENT_E_UNSUPPORTED "unsupported"     /* unknown op */
#define AGENT_E_STREAM_IN_USE "stream_in_use" /* REQUEST on an open id */
#define AGENT_E_TOO_MANY "too_many_streams"
#define AGENT_E_FLOW "flow_control"           /* sent past the window */
#define AGENT_E_NOT_FOUND "not_found"         /* ENOENT */
#define AGENT_E_EXISTS "exists"               /* EEXIST */
#define AGENT_E_PERMISSION "permission"       /* EACCES, EPERM, EROFS */
#define AGENT_E_NOT_DIR "not_dir"             /* ENOTDIR */
#define AGENT_E_IS_DIR "is_dir"               /* EISDIR */
#define AGENT_E_NOT_EMPTY "not_empty"         /* ENOTEMPTY */
#define AGENT_E_NO_SPACE "no_space"           /* ENOSPC, EDQUOT */
#define AGENT_E_EXEC "exec_failed"            /* fork or execve */
#define AGENT_E_BAD_CWD "bad_cwd"             /* exec: chdir to its cwd */
#define AGENT_E_IO "io"                       /* any other errno */
#define AGENT_E_INVALID "invalid"             /* configure: a bad field,
						 named in "field" */
#define AGENT_E_BAD_TAR "bad_tar"             /* tar_write: the archive or
						 an entry refused */
#define AGENT_E_TIMEOUT "timeout"             /* host side: call timed out */
#define AGENT_E_CLOSED "closed"               /* host side: connection gone */

/* ---- frames --------------------------------------------------------- */

/* A decoded frame. `payload` points into the bytes given to
 * agent_dec_feed() or into the decoder's buffer, and is valid until the
 * next feed call; NULL for a BAD frame. */
struct agent_frame {
	uint8_t type;
	uint32_t stream;
	uint32_t len;
	const uint8_t *payload;
};

enum agent_dec_result {
	AGENT_DEC_AGAIN = 0,    /* all input used; need more bytes */
	AGENT_DEC_FRAME,        /* *out is a valid frame */
	AGENT_DEC_BAD,          /* *out's header breaks a rule (reason set);
				   its payload will be skipped; the
				   connection goes on */
	AGENT_DEC_FATAL,        /* out of step: end the connection */
};

enum agent_dec_state {
	AGENT_DS_HEADER = 0,
	AGENT_DS_PAYLOAD,
	AGENT_DS_SKIP,
	AGENT_DS_FATAL,
};

/* The resumable decoder. Memory: the caller's `buf` of `cap` bytes, at
 * least AGENT_PAYLOAD_MAX; nothing else. */
struct agent_dec {
	enum agent_dec_state state;
	uint8_t hdr[AGENT_HDR_LEN];
	size_t hlen;
	uint8_t type;
	uint32_t stream;
	uint32_t len;
	uint32_t have;          /* payload bytes in buf */
	uint32_t skip;          /* payload bytes still to skip */
	uint8_t *buf;
	size_t cap;
	const char *reason;     /* static text for BAD and FATAL */
	uint64_t frames, bad;   /* counters */
};

/* Prepares d; buf (owned by the caller, >= AGENT_PAYLOAD_MAX bytes) holds
 * payloads that arrive split across feeds. */
void agent_dec_init(struct agent_dec *d, uint8_t *buf, size_t cap);

/* Feeds in[0..len), the next bytes of the stream. Sets *consumed to the
 * bytes used and returns at most one frame per call: call again with
 * in + *consumed while bytes remain. Input may be split at any byte.
 * FRAME: *out valid until the next call. BAD: out->type, stream and len
 * are the offending header's, d->reason says why, payload is NULL.
 * FATAL: d->reason says why; every later call returns FATAL. */
enum agent_dec_result agent_dec_feed(struct agent_dec *d, const uint8_t *in,
				     size_t len, size_t *consumed,
				     struct agent_frame *out);

/* Checks a frame header against the rules: 0, or a static reason. */
const char *agent_frame_check(uint8_t type, uint32_t stream, uint32_t len);

/* Writes the 9-byte header. */
void agent_hdr_put(uint8_t out[AGENT_HDR_LEN], uint8_t type, uint32_t stream,
		   uint32_t len);

/* Writes header and payload into out[0..cap). Returns the bytes written,
 * -EMSGSIZE if it does not fit, -EINVAL if the frame breaks a rule. */
long agent_frame_encode(uint8_t *out, size_t cap, uint8_t type,
			uint32_t stream, const void *payload, size_t len);

/* "hello", ...; "?" for an unknown type. */
const char *agent_frame_type_name(uint8_t type);

/* An output queue as both sides keep one: bytes [off, off+len) of a
 * buffer of cap bytes. Makes room for n more bytes at off+len, sliding the
 * queue to the front or growing the buffer (doubling from 64 KiB).
 * Returns where they go, or NULL (out of memory; nothing changed). */
uint8_t *agent_outq_room(uint8_t **buf, size_t *off, size_t len, size_t *cap, size_t n);

/* Reads and writes a WINDOW payload. */
uint32_t agent_get_u32(const uint8_t *p);
void agent_put_u32(uint8_t *p, uint32_t v);

/* ---- control messages (jansson) ------------------------------------ */

struct json_t;

/* Parses a control payload: one JSON object, duplicate keys and "\u0000" (jansson default)
 * refused, at most AGENT_CTRL_MAX bytes; an empty payload is {}. Returns a
 * new reference, or NULL with a line in err. */
struct json_t *agent_json_parse(const uint8_t *p, size_t len, char *err,
				size_t errsz);

/* Serialises j compactly into a new malloc'd buffer (not NUL-terminated
 * for the caller's purposes). Returns NULL if it does not fit in
 * AGENT_CTRL_MAX or out of memory. */
char *agent_json_dump(const struct json_t *j, size_t *len);

/* The AGENT_E_* code for an errno. */
const char *agent_err_code(int err);

#endif

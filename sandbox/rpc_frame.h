/* rpc_frame.h: the supervisor protocol's framing and message codec
 * (docs/backend-rpc.md), pure: bytes in, events out, no I/O. Shared by
 * sluiced's client (rpc_client.c) and supervisors written in C.
 *
 * A frame: u32 big-endian payload length N, u32 big-endian call id, then N
 * bytes of JSON. 1 <= N <= SBX_RPC_FRAME_MAX is a frame; N up to
 * SBX_RPC_FRAME_HARD is oversized (drained, fails its id only); N = 0 or
 * above that is out of step (the connection is dropped). */
#ifndef SLUICE_RPC_FRAME_H
#define SLUICE_RPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;

#define SBX_RPC_PROTOCOL   1
#define SBX_RPC_HDR        8
#define SBX_RPC_FRAME_MAX  (4u * 1024 * 1024)
#define SBX_RPC_FRAME_HARD (64u * 1024 * 1024)

/* JSON-RPC error codes (docs/backend-rpc.md, "Errors"). */
#define SBX_RPC_E_PARSE       (-32700)
#define SBX_RPC_E_INVALID     (-32600)
#define SBX_RPC_E_METHOD      (-32601)
#define SBX_RPC_E_PARAMS      (-32602)
#define SBX_RPC_E_FAILED      (-32000)
#define SBX_RPC_E_UNAVAILABLE (-32001)
#define SBX_RPC_E_NOTFOUND    (-32002)
#define SBX_RPC_E_RUNTIME     (-32003)
#define SBX_RPC_E_TIMEOUT     (-32004)

/* The 8-byte header for a payload of len bytes and call id. */
void sbx_rpc_hdr_put(uint8_t out[SBX_RPC_HDR], uint32_t len, uint32_t id);

enum sbx_rpc_ev_kind {
	SBX_RPC_EV_NONE = 0, /* need more bytes */
	SBX_RPC_EV_FRAME,    /* a whole frame: id, body[0..len) */
	SBX_RPC_EV_OVERSIZE, /* an oversized frame was drained: fail id */
	SBX_RPC_EV_BROKEN,   /* out of step: drop the connection */
};

struct sbx_rpc_ev {
	enum sbx_rpc_ev_kind kind;
	uint32_t id;
	const char *body; /* FRAME: the reader's buffer, valid until the next
	                     feed; not NUL-terminated */
	size_t len;
	uint32_t declared; /* OVERSIZE/BROKEN: the length the header said */
};

/* The resumable reader. Its body buffer grows to the largest frame seen
 * (at most max bytes). Zero it, set max (0: SBX_RPC_FRAME_MAX), feed it. */
struct sbx_rpc_rd {
	int st; /* internal */
	uint8_t hdr[SBX_RPC_HDR];
	size_t hlen;
	uint32_t len, id;
	size_t got;
	char *buf;
	size_t cap;
	size_t max;
};

/* Consumes up to n bytes of in; *used says how many. At most one event per
 * call (*ev): call again with the rest while *used < n or an event came.
 * Returns 0, or -ENOMEM (a body buffer could not grow: treat as BROKEN).
 * After BROKEN the reader stays broken. */
int sbx_rpc_rd_feed(struct sbx_rpc_rd *r, const uint8_t *in, size_t n, size_t *used,
                    struct sbx_rpc_ev *ev);
/* Frees the body buffer; the reader may be zeroed and reused. */
void sbx_rpc_rd_free(struct sbx_rpc_rd *r);

/* A request frame (header + JSON) for call id: {"jsonrpc":"2.0","id",
 * "method","params": params (borrowed; NULL: {}) with "deadline_ms" set}.
 * A malloc'd buffer in *out (*outlen bytes): 0; -EMSGSIZE when it would
 * exceed SBX_RPC_FRAME_MAX; -ENOMEM; -EINVAL for a params that is not an
 * object or an id of 0. */
int sbx_rpc_req_build(uint32_t id, const char *method, const struct json_t *params,
                      int64_t deadline_ms, uint8_t **out, size_t *outlen);

/* What a reply frame says. */
struct sbx_rpc_reply {
	struct json_t *result; /* owned; NULL for an error reply */
	int code;              /* error replies: the JSON-RPC code */
	char message[256];     /* error replies: one line, control bytes as '?' */
	char reason[64];       /* error replies: data.reason, or "" */
};

/* Checks body[0..len) is a JSON-RPC 2.0 reply for hdr_id: 0 with
 * out->result set (an object), 1 for an error reply (code, message,
 * reason), or -EPROTO with one line in err (not JSON, not an object,
 * wrong version, id other than hdr_id, neither or both of result and
 * error, a result that is not an object, a malformed error). */
int sbx_rpc_reply_parse(const char *body, size_t len, uint32_t hdr_id, struct sbx_rpc_reply *out,
                        char *err, size_t errsz);

/* A JSON-RPC error code as sluiced's errno (table in docs/backend-rpc.md). */
int sbx_rpc_code_errno(int code);

#endif

/* rpc_client.h: sluiced's side of one supervisor connection
 * (docs/backend-rpc.md): blocking, thread-safe calls multiplexed by id on
 * one stream socket.
 *
 * Threading: no thread of its own. A caller waiting for its reply takes
 * the reader's role when nobody holds it (leader/follower, under the
 * client's mutex): it reads in 64 KiB chunks, hands every whole frame to
 * the call it names and wakes that caller; when its own reply is in it
 * gives the role to the next waiter. Writes are serialised by a second
 * mutex, a frame at a time.
 *
 * Failures: a well-framed but invalid reply fails its own call
 * (-EPROTO); an oversized one is drained and fails its own call
 * (-EMSGSIZE); a reply for no call in flight is dropped. EOF, a read or
 * write error, a frame out of step or a write cut short by a deadline
 * make the connection dead: every call in flight fails (-EPIPE) and the
 * descriptor is closed at once (as soon as no thread is inside a read or
 * write of it). A dead client stays dead: make a new one. */
#ifndef SLUICE_RPC_CLIENT_H
#define SLUICE_RPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;
struct sbx_rpc_client;

/* Milliseconds on CLOCK_MONOTONIC: the clock of every deadline here. */
int64_t sbx_rpc_now_ms(void);

/* A client on fd (a connected stream socket; taken: closed on failure
 * too), made nonblocking and close-on-exec. One reference, the caller's.
 * NULL when out of memory. */
struct sbx_rpc_client *sbx_rpc_client_new(int fd);

/* References: a caller holds one across each call. The last unref closes
 * the descriptor (if still open) and frees the client; no call may be in
 * flight then (a held reference guarantees it). */
void sbx_rpc_client_ref(struct sbx_rpc_client *c);
void sbx_rpc_client_unref(struct sbx_rpc_client *c);

/* Calls method with params (borrowed; NULL: {}) and waits for its reply
 * until deadline (sbx_rpc_now_ms() clock). 0 with *result an object the
 * caller owns; else a negative errno with one line in err and *result
 * NULL: -ETIMEDOUT (the deadline passed, or had passed before anything
 * was written: then nothing was), -EPIPE (the connection is or became
 * dead), -EPROTO / -EMSGSIZE (this reply was invalid / too large), or the
 * errno of the supervisor's error reply (sbx_rpc_code_errno()), whose
 * JSON-RPC code is put in *code when code is not NULL (else 0). */
int sbx_rpc_call(struct sbx_rpc_client *c, const char *method, const struct json_t *params,
                 int64_t deadline, struct json_t **result, int *code, char *err, size_t errsz);

/* Looks at an idle connection (no reader): EOF or an error there makes
 * it dead now, rather than at the next call. Up? */
bool sbx_rpc_client_probe(struct sbx_rpc_client *c);

/* Is the connection still up (as far as anyone has seen)? */
bool sbx_rpc_client_alive(struct sbx_rpc_client *c);

/* Makes the connection dead now (why: for the calls it fails): every call
 * in flight fails with -EPIPE, the descriptor is closed. Idempotent. */
void sbx_rpc_client_close(struct sbx_rpc_client *c, const char *why);

/* How many replies named no call in flight (tests, diagnostics). */
unsigned long sbx_rpc_client_unknown(struct sbx_rpc_client *c);

#endif

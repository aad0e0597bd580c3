/* rpc-int.h: shared between rpc_sup.c (one supervisor: its process or
 * socket, its connection, restarts, capabilities) and rpc.c (the `rpc`
 * backend's ops); not for callers. */
#ifndef SLUICE_RPC_INT_H
#define SLUICE_RPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rpc_client.h"
#include "sandbox-int.h"

#define RPC_BACKOFF_MIN_MS 250
#define RPC_BACKOFF_MAX_MS 30000
#define RPC_STABLE_MS      60000 /* a connection that lived this long resets the back-off */
#define RPC_CAPS_MS        10000
#define RPC_BACKOFF_WAIT_MS 1000 /* a caller waits out a back-off this short */
#define RPC_KEY_MAX        2048

struct sbx;

/* One supervisor: an rpc backend instance (callers hold &base). */
struct rpc_be {
	struct sbx_backend base; /* first */
	struct rpc_be *next;     /* the registry */
	char key[RPC_KEY_MAX];   /* {"command":[...]} or {"socket":"..."}: compact JSON */
	char **argv;             /* command form; NULL-terminated */
	char sock[108];          /* socket form */
	pthread_mutex_t mu;      /* everything below */
	struct sbx_rpc_client *cli; /* NULL while down */
	pid_t pid;               /* command form: the running supervisor, 0: none */
	unsigned fails;          /* connection attempts or connections that failed */
	int64_t retry_at;        /* no new attempt before (sbx_rpc_now_ms) */
	int64_t up_at;           /* when the current connection came up */
	uint64_t gen;            /* connections made so far */
	char why[256];           /* why it is down, "" when up */
	bool caps_ok;            /* capabilities answered on this connection */
	bool available, park, lim_memory, lim_cpus, lim_pids;
	char engine[64], reason[256];
	struct sbx *live; /* handles to adopt again on a new connection */
};

/* The instance behind a backend pointer (the registry's, mutable). */
static inline struct rpc_be *
sbx_rpc_be_of(const struct sbx_backend *b)
{
	return (struct rpc_be *)(uintptr_t)b;
}

/* The back-off before attempt fails + 1 (fails >= 1). Pure. */
int64_t sbx_rpc_backoff_ms(unsigned fails);

/* The instance for key (its JSON), made and registered on first use;
 * instances live as long as the process. NULL with err set when key is
 * not a supervisor ({"command": [ABS, ...]} or {"socket": ABS}). */
struct rpc_be *sbx_rpc_be_for(const char *key, char *err, size_t errsz);

/* Calls method on be's supervisor, connecting (starting it) first when
 * it is down and its back-off has passed; timeout_ms bounds the call.
 * 0 with *res (owned), or -errno with one line in err (-EAGAIN: down,
 * waiting for the back-off). */
int sbx_rpc_be_call(struct rpc_be *be, const char *method, const struct json_t *params,
                    int timeout_ms, struct json_t **res, char *err, size_t errsz);

/* Makes sure be is connected (or tried, if due) and its capabilities
 * known; under be->mu. 0 or -errno with err. */
int sbx_rpc_be_ensure(struct rpc_be *be, char *err, size_t errsz);

/* rpc.c: on a new connection (under be->mu, with its client): adopt
 * every live handle again; a sandbox the supervisor no longer has loses
 * its handle (its agent stream is closed, so its pool sees it gone). */
void sbx_rpc_readopt(struct rpc_be *be, struct sbx_rpc_client *cli);

extern const struct sbx_backend_ops sbx_rpc_ops;

#endif

/* sup_podman.h: sluice-supervisor-podman's methods (docs/backend-rpc.md,
 * docs/supervisor-podman.md): each takes the call's params and its
 * deadline, and gives a result or an error (code, one-line message,
 * reason token). Engine things (the image names, the runtimes, podman's
 * flags and storage) are this program's own configuration. */
#ifndef SUP_PODMAN_H
#define SUP_PODMAN_H

#include <stdbool.h>

#include <jansson.h>

#include "sup_frame.h"

/* JSON-RPC error codes of the protocol. */
#define SUP_E_PARSE (-32700)
#define SUP_E_REQUEST (-32600)
#define SUP_E_METHOD (-32601)
#define SUP_E_PARAMS (-32602)
#define SUP_E_FAILED (-32000)
#define SUP_E_UNAVAILABLE (-32001)
#define SUP_E_NOTFOUND (-32002)
#define SUP_E_RUNTIME (-32003)
#define SUP_E_TIMEOUT (-32004)

struct sup_cfg {
	const char *podman;    /* absolute path */
	const char *tar;       /* absolute path */
	const char *state_dir; /* the supervisor's own directory */
	const char *root;      /* podman --root (storage) */
	const char *runroot;   /* podman --runroot */
	const char *tmpdir;    /* podman --tmpdir (libpod's state) */
	const char *cgroup_manager;
	const char *runtime;   /* isolation "standard" */
	const char *enhanced;  /* isolation "enhanced", NULL: not configured */
	unsigned long nofile, nproc; /* --ulimit for every container */
	int env_timeout_ms;    /* environment.ensure's watchdog */
	int timeout_ms;        /* every other podman invocation's */
	long max;              /* capacity; -1: none */
};

struct sup_err {
	int code;
	char msg[512];
	const char *reason;
};

typedef int (*sup_method_fn)(const struct sup_cfg *cfg, json_t *params, long long deadline_ms,
			     json_t **result, struct sup_err *err);

/* The method named name, or NULL. */
sup_method_fn sup_podman_method(const char *name);

#endif

/* rpc_glue.c: the pool manager's side of `backend: rpc` (rpc_glue.h). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "conf.h"
#include "rpc_glue.h"

const struct sbx_backend *
pool_backend_of(const struct conf_pool *cp, char *err, size_t errsz)
{
	const struct sbx_backend *be;

	if (cp->backend == CONF_BACKEND_RPC) {
		struct sbx_rpc_conf rc = { .argv = (const char *const *)cp->supervisor_argv,
					   .argc = cp->supervisor_argc,
					   .socket = cp->supervisor_socket };

		return sbx_rpc_backend_get(&rc, err, errsz);
	}
	be = sbx_backend_get(conf_backend_name(cp->backend));
	if (!be)
		snprintf(err, errsz, "backend %s is not available on this host",
			 conf_backend_name(cp->backend));
	return be;
}

const struct sbx_backend *
pool_backend_of_ref(const json_t *ref, char *err, size_t errsz)
{
	const char *name = json_string_value(json_object_get(ref, "backend"));
	const struct sbx_backend *be;

	if (name && strcmp(name, "rpc") == 0)
		return sbx_rpc_backend_from_saved(ref, err, errsz);
	be = sbx_backend_get(name ? name : "ns");
	if (!be)
		snprintf(err, errsz, "backend %s is not available on this host", name ? name : "ns");
	return be;
}

bool
pool_rpc_same(const struct conf_pool *a, const struct conf_pool *b)
{
	if (a->backend != CONF_BACKEND_RPC || b->backend != CONF_BACKEND_RPC)
		return true;
	if ((a->supervisor_socket != NULL) != (b->supervisor_socket != NULL))
		return false;
	if (a->supervisor_socket)
		return strcmp(a->supervisor_socket, b->supervisor_socket) == 0;
	if (a->supervisor_argc != b->supervisor_argc)
		return false;
	for (size_t i = 0; i < a->supervisor_argc; i++)
		if (strcmp(a->supervisor_argv[i], b->supervisor_argv[i]) != 0)
			return false;
	return true;
}

int
pool_rpc_available(const struct sbx_backend *be, char *reason, size_t reasonsz)
{
	struct sbx_rpc_status st;

	sbx_rpc_backend_check(be, &st);
	if (st.up && st.available) {
		if (reasonsz)
			reason[0] = '\0';
		return 1;
	}
	snprintf(reason, reasonsz, "%s", st.reason[0] ? st.reason : "supervisor not available");
	return 0;
}

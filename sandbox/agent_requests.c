/* agent_requests.c: the requests the host sends a sluice-agent and the
 * answer fields callers read (see agent_requests.h). The one file outside
 * agent_client.c that knows agent/proto.h's field names. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "proto.h"
#include "sandbox-t.h"

json_t *
sbx_agent_req_exec(const struct sbx_agent_exec_req *req, char *err, size_t errsz)
{
	json_t *j, *argv, *env;

	if (req->argv == NULL || req->argv[0] == NULL) {
		snprintf(err, errsz, "exec: empty argv");
		return NULL;
	}
	argv = json_array();
	env = json_object();
	if (!argv || !env)
		goto bad;
	/* An element jansson refuses (not UTF-8) fails the request: dropped,
	 * it would run another command. */
	for (size_t i = 0; req->argv[i]; i++)
		if (json_array_append_new(argv, json_string(req->argv[i])) < 0)
			goto bad;
	for (size_t i = 0; req->env && req->env[i]; i++) {
		const char *eq = strchr(req->env[i], '=');

		if (eq == NULL || eq == req->env[i]) {
			json_decref(argv);
			json_decref(env);
			snprintf(err, errsz, "exec: env entry \"%s\" is not NAME=value", req->env[i]);
			return NULL;
		}
		if (json_object_setn_new(env, req->env[i], (size_t)(eq - req->env[i]),
					 json_string(eq + 1)) < 0)
			goto bad;
	}
	/* "o" steals argv and env also when the pack fails. */
	j = json_pack("{s:s, s:o, s:o, s:s*, s:b, s:I}", AGENT_F_OP, AGENT_OP_EXEC, AGENT_F_ARGV,
		      argv, AGENT_F_ENV, env, AGENT_F_CWD, req->cwd, AGENT_F_STDIN,
		      req->stdin_data != NULL || req->stdin_stream, AGENT_F_TIMEOUT_MS,
		      (json_int_t)(req->timeout_ms > 0 ? req->timeout_ms : 0));
	if (j == NULL) {
		snprintf(err, errsz, "exec: argv, env or cwd is not UTF-8");
		return NULL;
	}
	if (req->pty)
		json_object_set_new(j, AGENT_F_PTY, json_true());
	if (req->pty && req->rows)
		json_object_set_new(j, AGENT_F_ROWS, json_integer(req->rows));
	if (req->pty && req->cols)
		json_object_set_new(j, AGENT_F_COLS, json_integer(req->cols));
	if (req->detach)
		json_object_set_new(j, AGENT_F_DETACH, json_true());
	return j;
bad:
	json_decref(argv);
	json_decref(env);
	snprintf(err, errsz, "exec: argv, env or cwd is not UTF-8");
	return NULL;
}

static json_t *
path_req(const char *op, const char *path)
{
	return json_pack("{s:s, s:s}", AGENT_F_OP, op, AGENT_F_PATH, path);
}

json_t *
sbx_agent_req_stat(const char *path)
{
	return path_req(AGENT_OP_STAT, path);
}

json_t *
sbx_agent_req_list(const char *path)
{
	return path_req(AGENT_OP_LIST, path);
}

json_t *
sbx_agent_req_read(const char *path)
{
	return path_req(AGENT_OP_READ, path);
}

json_t *
sbx_agent_req_write(const char *path, unsigned mode)
{
	return json_pack("{s:s, s:s, s:i}", AGENT_F_OP, AGENT_OP_WRITE, AGENT_F_PATH, path,
			 AGENT_F_MODE, (int)mode);
}

json_t *
sbx_agent_req_mkdir(const char *path, bool parents)
{
	return json_pack("{s:s, s:s, s:b}", AGENT_F_OP, AGENT_OP_MKDIR, AGENT_F_PATH, path,
			 AGENT_F_PARENTS, parents);
}

int
sbx_agent_req_refresh(json_t **out, char *err, size_t errsz)
{
	unsigned char seed[SBX_AGENT_REFRESH_ENTROPY];
	char b64[4 * ((sizeof(seed) + 2) / 3) + 1];
	struct timespec now;

	*out = NULL;
	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
		int e = errno ? errno : EIO; /* a short read leaves errno alone */

		snprintf(err, errsz, "getrandom: %s", strerror(e));
		return -e;
	}
	sbx_b64_encode(seed, sizeof(seed), b64);
	explicit_bzero(seed, sizeof(seed));
	clock_gettime(CLOCK_REALTIME, &now);
	*out = json_pack("{s:s, s:I, s:s}", AGENT_F_OP, AGENT_OP_CONFIGURE, AGENT_F_TIME_NS,
			 (json_int_t)now.tv_sec * 1000000000 + now.tv_nsec, AGENT_F_ENTROPY, b64);
	explicit_bzero(b64, sizeof(b64));
	if (!*out) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

_Static_assert(SBX_CA_MAX == AGENT_CA_MAX, "the host's CA bound is the agent's");

int
sbx_agent_req_add_ca(json_t *req, const char *pem, char *err, size_t errsz)
{
	size_t n = pem ? strlen(pem) : 0;
	json_t *s;

	if (n == 0 || n > SBX_CA_MAX || !(s = json_stringn(pem, n))) {
		snprintf(err, errsz, "ca: want 1..%u bytes of PEM text", SBX_CA_MAX);
		return -EINVAL;
	}
	if (json_object_set_new(req, AGENT_F_CA, s) < 0) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

json_t *
sbx_agent_req_configure(void)
{
	return json_pack("{s:s}", AGENT_F_OP, AGENT_OP_CONFIGURE);
}

json_t *
sbx_agent_req_ca(const char *pem, char *err, size_t errsz)
{
	json_t *j = json_pack("{s:s}", AGENT_F_OP, AGENT_OP_CONFIGURE);

	if (!j) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	if (sbx_agent_req_add_ca(j, pem, err, errsz) < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

bool
sbx_agent_stat_is_dir(const json_t *st, uint64_t *size)
{
	const char *type = json_string_value(json_object_get(st, AGENT_F_TYPE));
	json_int_t n = json_integer_value(json_object_get(st, AGENT_F_SIZE));

	/* A negative size (no honest agent sends one) reads as huge: over
	 * every cap. */
	if (size)
		*size = (uint64_t)n;
	return type && strcmp(type, "dir") == 0;
}

json_t *
sbx_agent_list_entries(const json_t *lr)
{
	json_t *e = json_object_get(lr, AGENT_F_ENTRIES);

	return json_is_array(e) ? e : NULL;
}

json_t *
sbx_agent_req_tar_read(const char *path)
{
	return path_req(AGENT_OP_TAR_READ, path);
}

json_t *
sbx_agent_req_tar_write(const char *path, bool create)
{
	return json_pack("{s:s, s:s, s:b}", AGENT_F_OP, AGENT_OP_TAR_WRITE, AGENT_F_PATH, path,
			 AGENT_F_CREATE, create);
}

bool
sbx_agent_err_bad_tar(const char *code, const json_t *err, const char **entry)
{
	const char *e = json_string_value(json_object_get(err, AGENT_F_ENTRY));

	if (entry)
		*entry = e ? e : "";
	return code && strcmp(code, AGENT_E_BAD_TAR) == 0;
}

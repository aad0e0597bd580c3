/* apiv1.h: the /v1 endpoints and /metrics (docs/api.md), on the server of
 * api.h, over the pools manager (pools/manager.h), plus the pure request
 * validators they use (unit-tested). */
#ifndef SLUICE_GW_APIV1_H
#define SLUICE_GW_APIV1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

struct gw_claims;
struct json_t;

#define GW_EXEC_OUTPUT_MAX (1u << 20)   /* per stream, buffered */
#define GW_EXEC_TIMEOUT_DEFAULT_S 300
#define GW_EXEC_TIMEOUT_MAX_S 86400
#define GW_FILE_MAX (1ull << 30)
#define GW_ENV_VALUE_MAX 4096
#define GW_LABEL_MAX 256
#define GW_CLAIM_KV_MAX (64u << 10)   /* env and labels of a claim, in all */

/* The route table (NULL-fn terminated); arg of every handler must be a
 * struct gw_apiv1 made by gw_apiv1_new(). */
extern const struct gw_api_route gw_apiv1_routes[];

struct gw_apiv1;
struct gw_apiv1 *gw_apiv1_new(struct gw_claims *claims);
void gw_apiv1_free(struct gw_apiv1 *v);
/* The CA certificate (PEM) GET /v1/ca.pem serves: borrowed, valid until
 * gw_apiv1_free(). */
void gw_apiv1_set_ca_pem(struct gw_apiv1 *v, const char *pem);

/* For the other files' handlers (wsexec.c): borrows the claim's agent
 * as POST .../exec does (pool_mgr_use), or answers why not (404, 409)
 * and returns < 0; gives it back. */
struct pool_use;
int gw_apiv1_use(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
		 struct pool_use *u);
void gw_apiv1_put(struct gw_apiv1 *v, struct pool_use *u);

/* ---- validators (pure) ------------------------------------------------ */

/* A parsed POST /v1/claims body. Strings point into the JSON (keep it). */
struct gw_claim_args {
	const char *pool;
	bool ttl_present;
	int64_t ttl;                    /* saturated to [INT64_MIN, INT64_MAX] */
	const char *env[64];            /* "NAME=value", malloc'd */
	size_t nenv;
	const char *labels[64];         /* "key=value", malloc'd */
	size_t nlabels;
	struct conf_creds *creds;       /* the tenant's credentials; NULL: none */
};

/* A tenant's credentials at v (a claim's or a PUT's "credentials", JSON
 * path `root`) into *out (conf_creds_from_json(); NULL when v is absent
 * or null). 0, or -EINVAL with the first error in err (the path and why,
 * never a value). */
int gw_creds_parse(const struct json_t *v, const char *root, struct conf_creds **out, char *err,
		   size_t errsz);

/* Overwrites every string of v (and below) with zeros: a body that held
 * credentials is wiped before it is freed. NULL is fine. */
void gw_json_wipe(struct json_t *v);

/* 0, or -EINVAL with the JSON path and the reason in err. */
int gw_claim_args_parse(const struct json_t *body, struct gw_claim_args *out, char *err,
			size_t errsz);
void gw_claim_args_fini(struct gw_claim_args *a);

struct gw_exec_args {
	const char **argv;              /* NULL-terminated, borrowed strings */
	const char *env[65];            /* "NAME=value", malloc'd, NULL-terminated */
	size_t nenv;
	const char *cwd;
	const char *stdin_data;         /* NULL: no stdin */
	size_t stdin_len;
	uint32_t timeout_s;
	bool stream;
};

int gw_exec_args_parse(const struct json_t *body, struct gw_exec_args *out, char *err,
		       size_t errsz);
void gw_exec_args_fini(struct gw_exec_args *a);

/* An environment variable name the API accepts: [A-Za-z_][A-Za-z0-9_]*,
 * 1..128 bytes, and not one the gateway sets (the proxy and CA
 * variables). */
bool gw_env_name_ok(const char *name, size_t len);

/* Copies len bytes into a new NUL-terminated string, every invalid UTF-8
 * sequence replaced by U+FFFD (so that it can be a JSON string). */
char *gw_utf8_sanitize(const char *p, size_t len, size_t *outlen);

#endif

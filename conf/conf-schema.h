/* conf-schema.h: the schema walker's context and its getters, shared by
 * conf.c (the whole file) and conf_cred.c (policies' credentials); not for
 * other modules. Each getter checks one node's type and range, reports
 * what is wrong as "FILE:LINE:COL: path: message" (never a secret's value)
 * and returns false then. */
#ifndef SLUICE_CONF_SCHEMA_H
#define SLUICE_CONF_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "conf-int.h"
#include "conf-t.h"

#define CONF_SECRET_FILE_MAX 65536
#define PATHSZ 128

struct ctx {
	struct conf *c;
	struct conf_arena *a;
	const char *file;
	struct conf_diag *d;
	size_t errors;
	/* NULL for YAML. Otherwise the tree came from JSON (conf_json.c) and a
	 * node's line L names its position as paths[L - 1]. */
	const char *const *paths;
	size_t npaths;
	/* JSON pools (the API): the configuration they replace, whose
	 * supervisor commands alone they may name */
	const struct conf *base;
};

/* NULL in the daemon. When set (tests/docs/conf_keys_dump.c only, before
 * any load, single-threaded), cs_expect_map() calls it with the path
 * ("pools[0].limits") and the NULL-terminated accepted keys of every mapping
 * it checks: the schema as the code has it, for the test that compares it
 * with docs/config.md. */
extern void (*cs_schema_probe)(const char *path, const char *const *keys);

void cs_err_at(struct ctx *x, const struct cy_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct conf_pos cs_pos_of(const struct cy_node *n);
bool cs_is_null(const struct cy_node *n);
struct cy_node *cs_map_get(const struct cy_node *m, const char *key);
bool cs_expect_map(struct ctx *x, const struct cy_node *n, const char *path, const char *const *keys);
void cs_pathf(char *out, const char *base, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool cs_get_str(struct ctx *x, const struct cy_node *n, const char *path, char **out);
bool cs_get_bool(struct ctx *x, const struct cy_node *n, const char *path, bool *out);
bool cs_get_enum(struct ctx *x, const struct cy_node *n, const char *path, const char *const *names, int *out);
bool cs_get_seq(struct ctx *x, const struct cy_node *n, const char *path, size_t *count);

/* The wildcards a host pattern may be (docs/config.md, "Wildcards and public
 * suffixes"):
 *   CS_WILD_SITES  '*.example.com', never one that covers a public suffix
 *                  ('*.com', '*.co.uk', '*.github.io'): what grants
 *                  something (allow, intercept, a credential's host, a
 *                  tenant's egress list);
 *   CS_WILD_ANY    '*.com' too: deny lists, which only take away, and what
 *                  a saved layer reads back (it was checked when its claim
 *                  pinned it; refusing it now would end the claim). */
enum cs_wild { CS_WILD_SITES, CS_WILD_ANY };
bool cs_get_hostpat(struct ctx *x, const struct cy_node *n, const char *path, enum cs_wild wild,
		    struct conf_hostpat *out);
bool cs_get_secret(struct ctx *x, const struct cy_node *n, const char *path, struct conf_secret *out);

/* Where a credentials list comes from (conf_cred.c):
 *   CS_CRED_CONF    a policy in the file: secrets are ${env:}/${file:}
 *                   references, resolved;
 *   CS_CRED_SAVED   a saved layer: the same, plus the sentinels sluice made,
 *                   and tenant entries ("tenant": true, a "fingerprint", no
 *                   secret), read back as lost;
 *   CS_CRED_TENANT  a claim's body: secrets are literal, never resolved (a
 *                   tenant must not read the daemon's environment or files).
 */
enum cs_cred_src { CS_CRED_CONF, CS_CRED_SAVED, CS_CRED_TENANT };

/* A credentials list at `n` (path `p`, e.g. "policies[0].credentials") into
 * po->credentials (conf_cred.c). */
void cs_load_credentials(struct ctx *x, const struct cy_node *n, const char *p,
			 struct conf_policy *po, enum cs_cred_src src);

#endif

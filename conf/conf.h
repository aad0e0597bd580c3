/* conf.h: loading and validating the configuration.
 *
 * conf_load_file() and conf_load_mem() parse YAML with libyaml, check the
 * whole document against the schema of docs/config.md, resolve ${env:NAME}
 * and ${file:PATH} references in secret fields, and return a new struct conf
 * with one reference, or NULL with every error in `diag`, each a line
 * "FILE:LINE:COL: message". Nothing here logs; no message holds a secret's
 * value. Thread-safe as long as each call has its own diag.
 */
#ifndef SLUICE_CONF_H
#define SLUICE_CONF_H

#include <jansson.h>

#include "conf-t.h"

/* The default configuration (conf/sluice.yaml), compiled in. */
extern const char conf_default_yaml[];
extern const size_t conf_default_yaml_len;

void conf_diag_init(struct conf_diag *d);
void conf_diag_fini(struct conf_diag *d);

/* Loads `path`. Returns the configuration or NULL (errors in d). */
struct conf *conf_load_file(const char *path, struct conf_diag *d);

/* Loads `len` bytes of YAML; `name` is what error lines call the file.
 * ${file:PATH} references are resolved relative to the working directory. */
struct conf *conf_load_mem(const char *name, const char *buf, size_t len,
			   struct conf_diag *d);

/* Reference counting (atomic): a struct conf is immutable and may be shared
 * across threads; conf_unref() frees (and wipes secrets) at zero.
 * conf_unref(NULL) is a no-op. */
struct conf *conf_ref(struct conf *c);
void conf_unref(struct conf *c);

/* Lookups by name; NULL when absent. */
const struct conf_policy *conf_policy_find(const struct conf *c, const char *name);
const struct conf_lane *conf_lane_find(const struct conf *c, const char *name);
const struct conf_pool *conf_pool_find(const struct conf *c, const char *name);

/* Pure helpers shared with the doors and the API. */

/* Parses "10.0.0.0/8" or "fd00::/8" (a bare address is a /32 or /128).
 * Returns 0, or -EINVAL with a reason in err. Host bits must be zero. */
int conf_cidr_parse(const char *s, struct conf_cidr *out, char *err, size_t errsz);

/* True if `addr` (4 or 16 bytes as `family`) lies inside `c`. */
bool conf_cidr_contains(const struct conf_cidr *c, int family, const void *addr);

/* True if the two ranges share an address. */
bool conf_cidr_overlap(const struct conf_cidr *a, const struct conf_cidr *b);

/* Checks a host name or pattern: LDH labels of 1..63 bytes, 253 bytes in
 * all, "*." only as a whole leading label when wildcard_ok, ASCII only
 * (IDNs as punycode), an IPv4 or bracketed-less IPv6 literal accepted.
 * Returns 0 or -EINVAL with a reason in err. */
int conf_host_check(const char *host, bool wildcard_ok, char *err, size_t errsz);

/* Whether `name` (lowercase, no trailing dot, no "*.") is a public suffix
 * of the Public Suffix List, its private section included: "com", "co.uk",
 * "github.io" are; "example.com", and names the list does not hold
 * ("internal"), are not. Returns 1, 0, or -ENOENT when no list could be
 * loaded (conf_psl.c). Thread-safe; the list is read once per process. */
int conf_public_suffix(const char *name);

/* The pool set as JSON (conf_json.c), for the operator API's GET and PUT
 * /v1/pools (docs/api.md). */

/* Returns a new configuration (one reference) equal to `base` in every
 * section but the pools, which are those of `body`: {"pools": [...]} with the
 * keys of the YAML pools: list. The pools get exactly the checks a YAML file
 * gets (conf_load_mem), lane and policy names resolve against base's, and a
 * pool one of base's tenants names must stay. Returns NULL with every error
 * in d, each a line "JSON.PATH: message" ("pools[1].warm_max: ..."). Borrows
 * base and body; the result shares nothing with either. Pools' positions are
 * line 0 (not in the file). */
struct conf *conf_with_pools_json(const struct conf *base, const json_t *body,
				  struct conf_diag *d);

/* Returns {"pools": [...]} for c's pools (a new reference; NULL only when out
 * of memory), in the shape conf_with_pools_json() takes back unchanged:
 * template is "busybox", "host" or the directory, limits.cpus a real. */
json_t *conf_pools_to_json(const struct conf *c);

/* A claim's layer, saved to the state file and loaded back (docs/design:
 * "Policy layers"). */

/* Checks `saved` ({"name", "mode", "allow", "deny", "intercept",
 * "credentials", "allow_private", "tenant_egress"}, as gw_policy_save()
 * writes it) as a YAML policies[] entry is checked, but for wildcards that
 * cover a public suffix, taken back as they were pinned (a layer saved
 * before that rule must not end its claim at a restart), resolves the
 * credentials' ${env:}/${file:} references again, and reads tenant_egress
 * (required: null for no tenant list, [] for a list that allows nothing).
 * Returns a new layer the caller frees with conf_layer_free(), or NULL with
 * every error in d, each a line "JSON.PATH: message" ("layer.allow[2]: bad
 * host pattern ..."; an unset variable is named, a value never). Borrows
 * saved; the result shares nothing with it. */
struct conf_layer *conf_layer_from_json(const json_t *saved, struct conf_diag *d);

/* Frees l and wipes the credential values it holds. NULL is a no-op. */
void conf_layer_free(struct conf_layer *l);

/* Credentials (conf_cred.c), for every way one comes in (the file, a
 * claim's body): true when a header may not be set by a credential (it
 * frames, routes or belongs to the proxy: Host, Content-Length,
 * Transfer-Encoding, Connection, Upgrade, TE, Trailer, Keep-Alive, Cookie,
 * Proxy-*, a pseudo-header); 0 when a value is 1..CONF_CRED_VALUE_MAX
 * bytes of visible ASCII, space and tab, else -1; true when s is a
 * sentinel as sluice makes them. */
bool conf_cred_header_forbidden(const char *name);
int conf_cred_value_check(const char *v, size_t len);
bool conf_cred_sentinel_ok(const char *s);
/* True when s is a fingerprint as sluice makes them (CONF_CRED_FP_LEN). */
bool conf_cred_fingerprint_ok(const char *s);

/* A tenant's credentials (a claim's or a PUT's "credentials": a JSON array
 * of at most CONF_TENANT_CREDS_MAX entries of a policy's shapes) checked
 * as the file's are, but with the secrets literal (never a reference
 * resolved) and every entry marked tenant. Returns a list the caller frees
 * with conf_creds_free(), or NULL with every error in d, each a line
 * "PATH: message" (root the path, e.g. "credentials"; a value is never
 * shown). Borrows arr; the result shares nothing with it. */
struct conf_creds *conf_creds_from_json(const json_t *arr, const char *root,
					struct conf_diag *d);
/* Frees l and wipes the values it holds. NULL is a no-op. */
void conf_creds_free(struct conf_creds *l);
const char *conf_cred_kind_name(enum conf_cred_kind k);

const char *conf_log_level_name(enum conf_log_level l);
const char *conf_policy_mode_name(enum conf_policy_mode m);
const char *conf_backend_name(enum conf_backend b);

#endif

/* conf-int.h: what conf.c and conf_yaml.c share; not for other modules. */
#ifndef SLUICE_CONF_INT_H
#define SLUICE_CONF_INT_H

#include <stdarg.h>

#include "conf-t.h"

#define CONF_MAX_FILE_BYTES (4u << 20)  /* a config is text, not a dump */
#define CONF_MAX_DEPTH 32
#define CONF_MAX_NODES 200000

/* A bump allocator: everything of one struct conf, freed (and wiped, since
 * secrets live in it) at once. Allocation failure is fatal: a config is
 * loaded at start or on reload, never on a connection's path. */
struct conf_arena;
struct conf_arena *conf_arena_new(void);
void conf_arena_free(struct conf_arena *a);
void *conf_arena_alloc(struct conf_arena *a, size_t size);
char *conf_arena_strndup(struct conf_arena *a, const char *s, size_t n);

/* Appends "FILE:LINE:COL: message" (or "FILE: message" with line 0). */
void conf_diag_add(struct conf_diag *d, const char *file, uint32_t line,
		   uint32_t col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void conf_diag_sort(struct conf_diag *d);

enum cy_kind {
	CY_SCALAR = 0,
	CY_MAP,
	CY_SEQ,
};

/* A YAML node. Scalars keep their bytes (NUL-terminated, no NUL inside) and
 * whether they were plain (unquoted): only plain scalars can be numbers,
 * booleans or null. A map's items are key, value, key, value, ... */
struct cy_node {
	enum cy_kind kind;
	bool plain;
	uint32_t line;
	uint32_t col;
	char *str;
	size_t len;
	struct cy_node **items;
	size_t n;               /* scalars: 0; seqs: items; maps: pairs */
};

/* Parses one YAML document into a tree in `a`. Sets *ok false when any error
 * was reported to d. Returns the root: NULL for an empty document or when
 * the text could not be parsed; a usable tree even after errors that do not
 * break the structure (a duplicate key, whose value is dropped), so that the
 * schema checks can still report everything else at once.
 * Refuses tabs in indentation, duplicate keys, non-scalar keys, aliases,
 * several documents, depth over CONF_MAX_DEPTH. */
struct cy_node *cy_parse(struct conf_arena *a, const char *file,
			 const char *buf, size_t len, struct conf_diag *d, bool *ok);

/* Replaces the pools of `c` (being built: not yet returned to anyone) with
 * the list `seq` (the node under a YAML `pools:` key, or the tree of a JSON
 * body's "pools"), checked exactly as conf_load_mem() checks them: keys,
 * types, ranges, defaults, duplicate names, lane and policy references
 * against c's lanes and policies, and the pool names c's tenants list.
 * Strings go to c->arena. Errors go to d as "FILE:LINE:COL: message";
 * `paths` (NULL for YAML) names node line L's JSON path as paths[L - 1], used
 * where a message points at a second node; `base` (JSON: the configuration
 * the set replaces) holds the only supervisor commands JSON may name.
 * Returns the number of errors. */
size_t conf_load_pools_tree(struct conf *c, const struct conf *base, const struct cy_node *seq, const char *file,
			    const char *const *paths, size_t npaths, struct conf_diag *d);

/* Fills l (whose arena is set; everything else is overwritten) from `item`,
 * the tree of a saved layer: a policies[] entry checked as conf_load_mem()
 * checks one (keys, types, host patterns, CIDRs, header names, secret
 * references resolved again), plus the required key tenant_egress: null for
 * no tenant list, else a list of host patterns. `root` is the entry's path in
 * messages ("layer"). Errors go to d as for conf_load_pools_tree(). Returns
 * the number of errors. */
size_t conf_load_layer_tree(struct conf_layer *l, const struct cy_node *item, const char *root,
			    const char *file, const char *const *paths, size_t npaths,
			    struct conf_diag *d);

#endif

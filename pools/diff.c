/* diff.c: what a new pool set would change. See diff.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "rpc_glue.h"
#include "manager.h"

bool
pool_boot_same(const struct conf_pool *a, const struct conf_pool *b)
{
	return a->backend == b->backend && a->template_kind == b->template_kind &&
	       (a->template_kind != CONF_TEMPLATE_DIR ||
		strcmp(a->template_dir, b->template_dir) == 0) &&
	       strcmp(a->lane, b->lane) == 0 && a->memory_mb == b->memory_mb &&
	       a->cpus_milli == b->cpus_milli && a->pids == b->pids && a->isolation == b->isolation && pool_rpc_same(a, b);
}

static const struct conf_pool *
find_pool(const struct conf *c, const char *name)
{
	for (size_t i = 0; c && i < c->npools; i++)
		if (strcmp(c->pools[i].name, name) == 0)
			return &c->pools[i];
	return NULL;
}

static const struct pool_diff_live *
find_live(const struct pool_diff_live *live, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (live[i].name && strcmp(live[i].name, name) == 0)
			return &live[i];
	return NULL;
}

/* The pool named `name` of a {"pools": [...]} document. */
static json_t *
find_json(json_t *doc, const char *name)
{
	size_t i;
	json_t *p;

	json_array_foreach(json_object_get(doc, "pools"), i, p) {
		const char *n = json_string_value(json_object_get(p, "name"));

		if (n && strcmp(n, name) == 0)
			return p;
	}
	return NULL;
}

/* Appends to keys the keys of a and b (objects) whose values differ; an
 * object on both sides is compared key by key, as "prefix.key". */
static int
diff_keys(json_t *keys, const json_t *a, const json_t *b, const char *prefix)
{
	const json_t *sides[2] = { a, b };

	for (int s = 0; s < 2; s++) {
		const char *k;
		json_t *v;

		json_object_foreach((json_t *)(uintptr_t)sides[s], k, v) {
			json_t *va = json_object_get(a, k), *vb = json_object_get(b, k);
			char *name;
			int rc = 0;

			if (s == 1 && va)
				continue;       /* seen from a's side */
			if (va && vb && json_equal(va, vb))
				continue;
			if (asprintf(&name, "%s%s%s", prefix, *prefix ? "." : "", k) < 0)
				return -1;
			if (json_is_object(va) && json_is_object(vb))
				rc = diff_keys(keys, va, vb, name);
			else if (json_array_append_new(keys, json_string(name)) < 0)
				rc = -1;
			free(name);
			if (rc < 0)
				return -1;
		}
	}
	return 0;
}

static json_t *
entry(const char *name, const char *change, uint32_t drained, uint32_t kept)
{
	return json_pack("{s:s, s:s, s:I, s:I}", "name", name, "change", change, "warm_drained",
			 (json_int_t)drained, "claims_kept", (json_int_t)kept);
}

json_t *
pool_diff(const struct conf *old, const struct conf *neu, const struct pool_diff_live *live,
	  size_t nlive)
{
	json_t *jold = old ? conf_pools_to_json(old) : json_pack("{s:[]}", "pools");
	json_t *jneu = neu ? conf_pools_to_json(neu) : json_pack("{s:[]}", "pools");
	json_t *changes = json_array(), *res = NULL, *e;
	uint64_t n[4] = { 0 }, drained = 0, kept = 0; /* added removed changed unchanged */

	if (!jold || !jneu || !changes)
		goto out;
	for (size_t i = 0; neu && i < neu->npools; i++) {
		const struct conf_pool *np = &neu->pools[i], *op = find_pool(old, np->name);
		const struct pool_diff_live *l = find_live(live, nlive, np->name);
		json_t *keys;

		if (!op) {
			n[0]++;
			e = entry(np->name, "added", 0, 0);
		} else {
			keys = json_array();
			if (!keys || diff_keys(keys, find_json(jold, np->name),
					       find_json(jneu, np->name), "") < 0) {
				json_decref(keys);
				goto out;
			}
			if (json_array_size(keys) == 0) {
				n[3]++;
				e = entry(np->name, "unchanged", 0, 0);
				json_decref(keys);
			} else {
				uint32_t d = l && !pool_boot_same(op, np) ? l->warm : 0;
				uint32_t k = l ? l->claimed : 0;

				n[2]++;
				drained += d;
				kept += k;
				e = entry(np->name, "changed", d, k);
				if (e && json_object_set_new(e, "keys", keys) < 0) {
					json_decref(e);
					e = NULL;
				}
			}
		}
		if (!e || json_array_append_new(changes, e) < 0)
			goto out;
	}
	for (size_t i = 0; old && i < old->npools; i++) {
		const struct conf_pool *op = &old->pools[i];
		const struct pool_diff_live *l = find_live(live, nlive, op->name);

		if (find_pool(neu, op->name))
			continue;
		n[1]++;
		drained += l ? l->warm : 0;
		kept += l ? l->claimed : 0;
		e = entry(op->name, "removed", l ? l->warm : 0, l ? l->claimed : 0);
		if (!e || json_array_append_new(changes, e) < 0)
			goto out;
	}
	res = json_pack("{s:O, s:{s:I, s:I, s:I, s:I, s:I, s:I}}", "changes", changes, "summary",
			"added", (json_int_t)n[0], "removed", (json_int_t)n[1], "changed",
			(json_int_t)n[2], "unchanged", (json_int_t)n[3], "warm_drained",
			(json_int_t)drained, "claims_kept", (json_int_t)kept);
out:
	json_decref(changes);
	json_decref(jold);
	json_decref(jneu);
	return res;
}

bool
pool_diff_destructive(const json_t *diff)
{
	const json_t *s = json_object_get(diff, "summary");

	return json_integer_value(json_object_get(s, "removed")) > 0 ||
	       json_integer_value(json_object_get(s, "warm_drained")) > 0;
}

struct live_acc {
	struct pool_diff_live *v;
	char **names;
	size_t n, cap;
	bool oom;
};

static void
live_add(void *arg, const struct pool_info *i)
{
	struct live_acc *a = arg;

	if (a->oom || i->draining)
		return;                 /* a removed pool: nothing more to change */
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 8;
		struct pool_diff_live *v = realloc(a->v, cap * sizeof(*v));
		char **names;

		if (v)
			a->v = v;
		names = v ? realloc(a->names, cap * sizeof(*names)) : NULL;
		if (!names) {
			a->oom = true;
			return;
		}
		a->names = names;
		a->cap = cap;
	}
	a->names[a->n] = strdup(i->name);
	if (!a->names[a->n]) {
		a->oom = true;
		return;
	}
	a->v[a->n].name = a->names[a->n];
	a->v[a->n].warm = i->warm;
	a->v[a->n].claimed = i->claimed;
	a->n++;
}

json_t *
pool_mgr_diff(struct pool_mgr *m, const struct conf *neu)
{
	struct live_acc a = { 0 };
	struct conf *old = pool_mgr_conf(m);
	json_t *res = NULL;

	pool_mgr_each_pool(m, live_add, &a);
	if (!a.oom)
		res = pool_diff(old, neu, a.v, a.n);
	for (size_t i = 0; i < a.n; i++)
		free(a.names[i]);
	free(a.names);
	free(a.v);
	conf_unref(old);
	return res;
}

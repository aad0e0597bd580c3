/* conf_json.c: the pool set as JSON, for the operator API (PUT and GET
 * /v1/pools in docs/api.md).
 *
 * A body's "pools" is turned into the cy_node tree a YAML file gives (JSON
 * strings are quoted scalars; numbers, true, false and null plain ones), and
 * checked by conf.c's own pool loader, so that a pool set is refused or
 * accepted alike whether written in the file or put through the API. Every
 * node's line is an index into a table of JSON paths: the loader reports
 * "json:LINE:1: message", and each such line is rewritten into
 * "JSON.PATH: message" once the check is done. The other sections of the new
 * configuration are a deep copy of the base's. */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-int.h"
#include "conf-schema.h"
#include "conf.h"

/* The file name of the intermediate diagnostics, before rewriting. */
#define JSON_DIAG_FILE "json"
#define KEY_SHOWN_MAX  40
/* A path is at most CONF_MAX_DEPTH + 1 components of at most ~50 bytes. */
#define PATH_MAX_JSON 2048

/* ---- deep copy of a configuration ---- */

static char *
dup_str(struct conf_arena *a, const char *s)
{
	return s ? conf_arena_strndup(a, s, strlen(s)) : NULL;
}

static void *
dup_mem(struct conf_arena *a, const void *p, size_t size)
{
	void *q;

	if (!p)
		return NULL;
	q = conf_arena_alloc(a, size);
	if (size)
		memcpy(q, p, size);
	return q;
}

/* Secrets are copied into the new arena, which wipes them when freed. */
static void
dup_secret(struct conf_arena *a, struct conf_secret *s)
{
	if (s->value)
		s->value = conf_arena_strndup(a, s->value, s->len);
	s->ref = dup_str(a, s->ref);
}

static void
dup_hostpats(struct conf_arena *a, struct conf_hostpats *h)
{
	h->v = dup_mem(a, h->v, h->n * sizeof(*h->v));
	for (size_t i = 0; i < h->n; i++)
		h->v[i].host = dup_str(a, h->v[i].host);
}

/* A new configuration (one reference, own arena) holding a copy of every
 * section of `base` but the pools, which it has none of. Every pointer of
 * struct conf is re-pointed here: a field added to conf-t.h that points
 * into the arena must be added here too. */
static struct conf *
conf_copy_but_pools(const struct conf *base)
{
	struct conf_arena *a = conf_arena_new();
	struct conf *c = conf_arena_alloc(a, sizeof(*c));

	memset(c, 0, sizeof(*c));
	c->refs = 1;
	c->arena = a;
	c->path = dup_str(a, base->path);

	c->daemon = base->daemon;
	c->daemon.data_dir = dup_str(a, base->daemon.data_dir);
	c->daemon.fleet_netns = dup_str(a, base->daemon.fleet_netns);
	c->daemon.control_socket = dup_str(a, base->daemon.control_socket);

	c->api = base->api;
	c->api.listen.host = dup_str(a, base->api.listen.host);
	c->api.socket = dup_str(a, base->api.socket);
	dup_secret(a, &c->api.operator_token);

	c->gateway = base->gateway;
	c->gateway.listen_forward.host = dup_str(a, base->gateway.listen_forward.host);
	c->gateway.listen_socks.host = dup_str(a, base->gateway.listen_socks.host);
	c->gateway.clients =
	    dup_mem(a, base->gateway.clients, base->gateway.nclients * sizeof(*c->gateway.clients));
	for (size_t i = 0; i < c->gateway.nclients; i++) {
		struct conf_client *cl = &c->gateway.clients[i];

		cl->name = dup_str(a, cl->name);
		cl->user = dup_str(a, cl->user);
		dup_secret(a, &cl->password);
		cl->policy = dup_str(a, cl->policy);
	}
	c->gateway.dns_servers =
	    dup_mem(a, base->gateway.dns_servers,
	            base->gateway.ndns_servers * sizeof(*c->gateway.dns_servers));
	c->gateway.access_log = dup_str(a, base->gateway.access_log);

	c->nlanes = base->nlanes;
	c->lanes = dup_mem(a, base->lanes, base->nlanes * sizeof(*c->lanes));
	for (size_t i = 0; i < c->nlanes; i++)
		c->lanes[i].name = dup_str(a, c->lanes[i].name);

	c->npolicies = base->npolicies;
	c->policies = dup_mem(a, base->policies, base->npolicies * sizeof(*c->policies));
	for (size_t i = 0; i < c->npolicies; i++) {
		struct conf_policy *po = &c->policies[i];

		po->name = dup_str(a, po->name);
		dup_hostpats(a, &po->allow);
		dup_hostpats(a, &po->deny);
		dup_hostpats(a, &po->intercept);
		po->credentials =
		    dup_mem(a, po->credentials, po->ncredentials * sizeof(*po->credentials));
		for (size_t j = 0; j < po->ncredentials; j++) {
			struct conf_credential *cd = &po->credentials[j];

			cd->name = dup_str(a, cd->name);
			cd->host.host = dup_str(a, cd->host.host);
			cd->header = dup_str(a, cd->header);
			cd->user = dup_str(a, cd->user);
			cd->param = dup_str(a, cd->param);
			cd->env = dup_str(a, cd->env);
			dup_secret(a, &cd->value);
		}
		po->allow_private.v = dup_mem(a, po->allow_private.v,
		                              po->allow_private.n * sizeof(*po->allow_private.v));
	}

	c->ntenants = base->ntenants;
	c->tenants = dup_mem(a, base->tenants, base->ntenants * sizeof(*c->tenants));
	for (size_t i = 0; i < c->ntenants; i++) {
		struct conf_tenant *t = &c->tenants[i];

		t->name = dup_str(a, t->name);
		t->keys = dup_mem(a, t->keys, t->nkeys * sizeof(*t->keys));
		for (size_t j = 0; j < t->nkeys; j++)
			dup_secret(a, &t->keys[j]);
		dup_hostpats(a, &t->egress);
		t->pools = dup_mem(a, t->pools, t->npools * sizeof(*t->pools));
		for (size_t j = 0; j < t->npools; j++)
			t->pools[j] = dup_str(a, t->pools[j]);
	}

	c->pools = NULL;
	c->npools = 0;

	c->certs = base->certs;
	c->certs.ca_cert = dup_str(a, base->certs.ca_cert);
	c->certs.ca_key = dup_str(a, base->certs.ca_key);
	c->certs.upstream_ca = dup_str(a, base->certs.upstream_ca);

	c->preview = base->preview;
	c->preview.domain = dup_str(a, base->preview.domain);
	c->preview.listen.host = dup_str(a, base->preview.listen.host);
	return c;
}

/* ---- JSON to a cy_node tree ---- */

struct jtree {
	struct conf_arena *a; /* nodes and paths; freed after the check */
	struct conf_diag *d;  /* "json:LINE:1: message" */
	char **paths;         /* paths[line - 1]: strings in a */
	size_t npaths;
	size_t cap;
	size_t nodes;
	size_t bytes; /* of strings and keys */
	bool failed;  /* the tree is unusable (too deep, too big) */
	bool soft;    /* errors reported; the tree is still usable */
};

static void jerr(struct jtree *t, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
jerr(struct jtree *t, uint32_t line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	conf_diag_add(t->d, JSON_DIAG_FILE, line, 1, "%s", msg);
}

/* Appends a path; returns its line number (index + 1). */
static uint32_t
add_path(struct jtree *t, const char *path)
{
	if (t->npaths == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **v = realloc(t->paths, cap * sizeof(*v));

		if (!v) {
			fputs("sluice: out of memory loading the configuration\n", stderr);
			abort();
		}
		t->paths = v;
		t->cap = cap;
	}
	t->paths[t->npaths++] = conf_arena_strndup(t->a, path, strlen(path));
	return (uint32_t)t->npaths;
}

/* ".key", or ["k?y"] for a key that is not a plain identifier (shown
 * printable, cut at KEY_SHOWN_MAX bytes). */
static void
key_path(char *out, size_t outsz, const char *parent, const char *k, size_t klen)
{
	char shown[KEY_SHOWN_MAX + 8];
	bool ident = klen > 0 && klen <= KEY_SHOWN_MAX;
	size_t o = 0;

	for (size_t i = 0; i < klen && ident; i++)
		if (!(isalnum((unsigned char)k[i]) || k[i] == '_' || k[i] == '-'))
			ident = false;
	if (ident) {
		snprintf(out, outsz, "%s%s%.*s", parent, parent[0] ? "." : "", (int)klen, k);
		return;
	}
	for (size_t i = 0; i < klen && i < KEY_SHOWN_MAX; i++) {
		unsigned char ch = (unsigned char)k[i];

		shown[o++] = (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') ? (char)ch : '?';
	}
	if (klen > KEY_SHOWN_MAX) {
		memcpy(shown + o, "...", 3);
		o += 3;
	}
	shown[o] = '\0';
	snprintf(out, outsz, "%s[\"%s\"]", parent, shown);
}

/* The shortest text strtod() reads back as v, always with a '.' or an
 * exponent: a JSON real is no integer, as "2.0" is none in YAML. */
static void
real_text(double v, char *buf, size_t bufsz)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, bufsz, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		snprintf(buf + strlen(buf), bufsz - strlen(buf), ".0");
}

static struct cy_node *
scalar_node(struct jtree *t, uint32_t line, const char *s, size_t len, bool plain)
{
	struct cy_node *n = conf_arena_alloc(t->a, sizeof(*n));

	memset(n, 0, sizeof(*n));
	n->kind = CY_SCALAR;
	n->plain = plain;
	n->line = line;
	n->col = 1;
	n->str = conf_arena_strndup(t->a, s, len);
	n->len = len;
	return n;
}

static bool
count(struct jtree *t, uint32_t line, size_t bytes)
{
	if (++t->nodes > CONF_MAX_NODES) {
		jerr(t, line, "more than %d JSON values", CONF_MAX_NODES);
		t->failed = true;
		return false;
	}
	t->bytes += bytes;
	if (t->bytes > CONF_MAX_FILE_BYTES) {
		jerr(t, line, "more than %u bytes of strings", CONF_MAX_FILE_BYTES);
		t->failed = true;
		return false;
	}
	return true;
}

/* v as a node at `line` (whose path is paths[line - 1]); NULL once failed. */
static struct cy_node *
convert(struct jtree *t, const json_t *v, uint32_t line, unsigned depth)
{
	char buf[64];

	switch (json_typeof(v)) {
	case JSON_OBJECT:
	case JSON_ARRAY: {
		bool is_map = json_is_object(v);
		struct cy_node *n = conf_arena_alloc(t->a, sizeof(*n));
		size_t size = is_map ? json_object_size(v) : json_array_size(v);
		size_t k = 0;

		if (!count(t, line, 0))
			return NULL;
		if (depth > CONF_MAX_DEPTH) {
			jerr(t, line, "nesting deeper than %d levels", CONF_MAX_DEPTH);
			t->failed = true;
			return NULL;
		}
		memset(n, 0, sizeof(*n));
		n->kind = is_map ? CY_MAP : CY_SEQ;
		n->line = line;
		n->col = 1;
		n->n = size;
		n->items = conf_arena_alloc(t->a, (size ? size * (is_map ? 2 : 1) : 1) *
		                                      sizeof(*n->items));
		if (!is_map) {
			for (size_t i = 0; i < size; i++) {
				char p[PATH_MAX_JSON];
				uint32_t l;

				snprintf(p, sizeof(p), "%s[%zu]", t->paths[line - 1], i);
				l = add_path(t, p);
				n->items[i] = convert(t, json_array_get(v, i), l, depth + 1);
				if (!n->items[i])
					return NULL;
			}
			return n;
		}
		/* json_object_iter() takes no const object; it does not change it. */
		for (void *it = json_object_iter((json_t *)(uintptr_t)v); it && k < size;
		     it = json_object_iter_next((json_t *)(uintptr_t)v, it), k++) {
			const char *key = json_object_iter_key(it);
			size_t klen = json_object_iter_key_len(it);
			char p[PATH_MAX_JSON];
			uint32_t l;

			key_path(p, sizeof(p), t->paths[line - 1], key, klen);
			l = add_path(t, p);
			if (!count(t, l, klen))
				return NULL;
			n->items[2 * k] = scalar_node(t, l, key, klen, true);
			if (memchr(key, '\0', klen)) {
				jerr(t, l, "a NUL byte inside a key");
				t->soft = true;
			}
			n->items[2 * k + 1] = convert(t, json_object_iter_value(it), l, depth + 1);
			if (!n->items[2 * k + 1])
				return NULL;
		}
		n->n = k;
		return n;
	}
	case JSON_STRING: {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);

		if (!count(t, line, len))
			return NULL;
		if (memchr(s, '\0', len)) {
			jerr(t, line, "a NUL byte inside a string");
			t->soft = true;
		}
		return scalar_node(t, line, s, len, false);
	}
	case JSON_INTEGER:
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		real_text(json_real_value(v), buf, sizeof(buf));
		break;
	case JSON_TRUE:
		snprintf(buf, sizeof(buf), "true");
		break;
	case JSON_FALSE:
		snprintf(buf, sizeof(buf), "false");
		break;
	default:
		snprintf(buf, sizeof(buf), "null");
		break;
	}
	if (!count(t, line, strlen(buf)))
		return NULL;
	return scalar_node(t, line, buf, strlen(buf), true);
}

/* ---- diagnostics: positions to JSON paths ---- */

static const char *
json_kind(const json_t *v)
{
	if (!v)
		return "nothing";
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* Adds "path: msg" to d, where msg may already start with "path: ". */
static void
emit(struct conf_diag *d, const char *path, const char *msg)
{
	size_t pl = strlen(path);

	if (strncmp(msg, path, pl) == 0 && msg[pl] == ':' && msg[pl + 1] == ' ')
		msg += pl + 2;
	conf_diag_add(d, path, 0, 0, "%s", msg);
}

/* Moves the lines of `in` ("json:LINE:COL: message" or "json: message")
 * to `out` as "PATH: message"; `root` is the path of the tree's root. */
static void
rewrite(struct conf_diag *out, const struct conf_diag *in, const struct jtree *t,
	const char *root)
{
	const size_t fl = strlen(JSON_DIAG_FILE), rl = strlen(root);

	for (size_t i = 0; i < in->n; i++) {
		const char *s = in->lines[i], *msg = s, *colon;
		unsigned long line = 0;

		if (strncmp(s, JSON_DIAG_FILE ":", fl + 1) == 0) {
			const char *p = s + fl + 1;
			char *end;

			if (isdigit((unsigned char)p[0])) {
				line = strtoul(p, &end, 10);
				if (*end == ':' && isdigit((unsigned char)end[1])) {
					strtoul(end + 1, &end, 10);
					if (end[0] == ':' && end[1] == ' ')
						msg = end + 2;
					else
						line = 0;
				} else {
					line = 0;
				}
			} else if (p[0] == ' ') {
				msg = p + 1;
			}
		}
		if (line >= 1 && line <= t->npaths) {
			emit(out, t->paths[line - 1], msg);
			continue;
		}
		/* No node: the message names its path first ("pools[0].x: ..."). */
		colon = strstr(msg, ": ");
		if (colon && strncmp(msg, root, rl) == 0 && (size_t)(colon - msg) < 256) {
			char path[256];

			memcpy(path, msg, (size_t)(colon - msg));
			path[colon - msg] = '\0';
			emit(out, path, colon + 2);
		} else {
			emit(out, root, msg);
		}
	}
	out->dropped += in->dropped;
}

/* ---- the API ---- */

struct conf *
conf_with_pools_json(const struct conf *base, const json_t *body, struct conf_diag *d)
{
	struct jtree t = {0};
	struct conf_diag tmp;
	struct conf *c = NULL;
	const json_t *pools;
	struct cy_node *root;
	bool bad = false;
	size_t errors = 0;

	if (!body || !json_is_object(body)) {
		conf_diag_add(d, "body", 0, 0, "expected a JSON object {\"pools\": [...]}, got %s",
		              json_kind(body));
		return NULL;
	}
	for (void *it = json_object_iter((json_t *)(uintptr_t)body); it;
	     it = json_object_iter_next((json_t *)(uintptr_t)body, it)) {
		const char *key = json_object_iter_key(it);
		size_t klen = json_object_iter_key_len(it);
		char p[PATH_MAX_JSON];

		if (klen == 5 && memcmp(key, "pools", 5) == 0)
			continue;
		key_path(p, sizeof(p), "", key, klen);
		conf_diag_add(d, p, 0, 0,
		              "unknown key: the body holds only \"pools\", a list of pools");
		bad = true;
	}
	pools = json_object_get(body, "pools");
	if (!pools) {
		conf_diag_add(d, "pools", 0, 0, "missing: the body is {\"pools\": [...]}");
		return NULL;
	}
	if (!json_is_array(pools)) {
		conf_diag_add(d, "pools", 0, 0, "expected an array of pools, got %s",
		              json_kind(pools));
		return NULL;
	}

	conf_diag_init(&tmp);
	t.a = conf_arena_new();
	t.d = &tmp;
	root = convert(&t, pools, add_path(&t, "pools"), 1);
	if (root && !t.failed) {
		c = conf_copy_but_pools(base);
		errors = conf_load_pools_tree(c, base, root, JSON_DIAG_FILE, (const char *const *)t.paths,
		                              t.npaths, &tmp);
	}
	conf_diag_sort(&tmp);
	rewrite(d, &tmp, &t, "pools");
	if (bad || !root || t.failed || t.soft || errors) {
		conf_unref(c);
		c = NULL;
	} else {
		/* Line numbers index t.paths, gone with it: not in the file. */
		for (size_t i = 0; i < c->npools; i++)
			memset(&c->pools[i].pos, 0, sizeof(c->pools[i].pos));
	}
	conf_diag_fini(&tmp);
	free(t.paths);
	conf_arena_free(t.a);
	return c;
}

json_t *
conf_pools_to_json(const struct conf *c)
{
	json_t *list = json_array();

	if (!list)
		return NULL;
	for (size_t i = 0; i < c->npools; i++) {
		const struct conf_pool *po = &c->pools[i];
		const char *tmpl = po->template_kind == CONF_TEMPLATE_BUSYBOX ? "busybox"
		                   : po->template_kind == CONF_TEMPLATE_HOST  ? "host"
		                                                              : po->template_dir;
		json_t *o = json_pack(
		    "{s:s, s:s, s:s?, s:s?, s:s?, s:I, s:I,"
		    " s:{s:I, s:f, s:I}, s:{s:I, s:I}}",
		    "name", po->name ? po->name : "", "backend", conf_backend_name(po->backend),
		    "template", tmpl, "lane", po->lane, "policy", po->policy, "warm",
		    (json_int_t)po->warm, "warm_max", (json_int_t)po->warm_max, "limits",
		    "memory_mb", (json_int_t)po->memory_mb, "cpus", po->cpus_milli / 1000.0, "pids",
		    (json_int_t)po->pids, "ttl", "default_seconds", (json_int_t)po->ttl_default_s,
		    "max_seconds", (json_int_t)po->ttl_max_s);

		if (o && po->backend == CONF_BACKEND_RPC) {
			json_t *sv = json_object(), *argv = json_array();

			for (size_t k = 0; argv && k < po->supervisor_argc; k++)
				json_array_append_new(argv, json_string(po->supervisor_argv[k]));
			if (po->supervisor_socket)
				json_object_set_new(sv, "socket", json_string(po->supervisor_socket));
			else
				json_object_set(sv, "command", argv);
			json_decref(argv);
			json_object_set_new(o, "supervisor", sv);
			json_object_set_new(o, "isolation",
					    json_string(po->isolation == CONF_ISOLATION_ENHANCED
							? "enhanced" : "standard"));
		}
		if (!o || json_array_append_new(list, o) < 0) {
			json_decref(list);
			return NULL;
		}
	}
	return json_pack("{s:o}", "pools", list);
}

/* ---- a claim's layer ---- */

/* The path of a saved layer's root in messages. */
#define LAYER_ROOT "layer"

struct conf_layer *
conf_layer_from_json(const json_t *saved, struct conf_diag *d)
{
	struct jtree t = {0};
	struct conf_diag tmp;
	struct conf_layer *l = NULL;
	struct cy_node *root;
	size_t errors = 0;

	if (!saved || !json_is_object(saved)) {
		conf_diag_add(d, LAYER_ROOT, 0, 0, "expected a JSON object (a saved layer), got %s",
		              json_kind(saved));
		return NULL;
	}
	conf_diag_init(&tmp);
	t.a = conf_arena_new();
	t.d = &tmp;
	root = convert(&t, saved, add_path(&t, LAYER_ROOT), 1);
	if (root && !t.failed) {
		struct conf_arena *a = conf_arena_new();

		l = conf_arena_alloc(a, sizeof(*l));
		memset(l, 0, sizeof(*l));
		l->arena = a;
		errors = conf_load_layer_tree(l, root, LAYER_ROOT, JSON_DIAG_FILE,
		                              (const char *const *)t.paths, t.npaths, &tmp);
	}
	conf_diag_sort(&tmp);
	rewrite(d, &tmp, &t, LAYER_ROOT);
	if (!root || t.failed || t.soft || errors) {
		conf_layer_free(l);
		l = NULL;
	}
	conf_diag_fini(&tmp);
	free(t.paths);
	conf_arena_free(t.a);
	return l;
}

void
conf_layer_free(struct conf_layer *l)
{
	if (l)
		conf_arena_free(l->arena);      /* l lives in it too; wipes it all */
}

/* ---- a tenant's credentials ---- */

struct conf_creds *
conf_creds_from_json(const json_t *arr, const char *root, struct conf_diag *d)
{
	struct jtree t = {0};
	struct conf_diag tmp;
	struct conf_creds *l = NULL;
	struct cy_node *tree;

	if (!arr || !json_is_array(arr)) {
		conf_diag_add(d, root, 0, 0, "expected an array of credentials, got %s",
			      json_kind(arr));
		return NULL;
	}
	if (json_array_size(arr) > CONF_TENANT_CREDS_MAX) {
		conf_diag_add(d, root, 0, 0, "at most %u credentials", CONF_TENANT_CREDS_MAX);
		return NULL;
	}
	conf_diag_init(&tmp);
	t.a = conf_arena_new();
	t.d = &tmp;
	tree = convert(&t, arr, add_path(&t, root), 1);
	if (tree && !t.failed) {
		struct conf_arena *a = conf_arena_new();
		struct conf_policy po = { 0 };
		struct ctx x = { .a = a, .file = JSON_DIAG_FILE, .d = &tmp,
				 .paths = (const char *const *)t.paths, .npaths = t.npaths };

		l = conf_arena_alloc(a, sizeof(*l));
		memset(l, 0, sizeof(*l));
		l->arena = a;
		cs_load_credentials(&x, tree, root, &po, CS_CRED_TENANT);
		l->v = po.credentials;
		l->n = po.ncredentials;
		/* Line numbers index paths, gone after the call. */
		for (size_t i = 0; i < l->n; i++) {
			memset(&l->v[i].pos, 0, sizeof(l->v[i].pos));
			memset(&l->v[i].host.pos, 0, sizeof(l->v[i].host.pos));
			memset(&l->v[i].value.pos, 0, sizeof(l->v[i].value.pos));
		}
		if (x.errors)
			t.soft = true;
	}
	conf_diag_sort(&tmp);
	rewrite(d, &tmp, &t, root);
	if (!tree || t.failed || t.soft) {
		conf_creds_free(l);
		l = NULL;
	}
	conf_diag_fini(&tmp);
	free(t.paths);
	conf_arena_free(t.a);           /* wipes the tree's copy of the values */
	return l;
}

void
conf_creds_free(struct conf_creds *l)
{
	if (l)
		conf_arena_free(l->arena);
}

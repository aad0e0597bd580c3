/* apiv1.c: the /v1 endpoints and /metrics. See apiv1.h and docs/api.md. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "apiv1.h"
#include "apiv1-int.h"
#include "wsexec.h"
#include "claims.h"
#include "conf.h"
#include "diff.h"
#include "fleet.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "policy.h"
#include "refusals.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

struct gw_apiv1 {
	struct gw_claims *claims;
	struct pool_mgr *mgr;
	int64_t started_ms;
	const char *ca_pem;             /* borrowed; NULL: none */
};

void
gw_apiv1_set_ca_pem(struct gw_apiv1 *v, const char *pem)
{
	v->ca_pem = pem;
}

/* The CA certificate guests and clients trust for intercepted hosts. */
static void
h_ca_pem(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;

	(void)i;
	if (!v->ca_pem) {
		gw_api_reply_error(r, 503, "no-ca", "the gateway has no CA");
		return;
	}
	gw_api_reply_raw(r, 200, "application/x-pem-file", v->ca_pem, strlen(v->ca_pem));
}

struct gw_apiv1 *
gw_apiv1_new(struct gw_claims *claims)
{
	struct gw_apiv1 *v = calloc(1, sizeof(*v));
	struct timespec ts;

	if (!v)
		return NULL;
	v->claims = claims;
	v->mgr = gw_claims_mgr(claims);
	clock_gettime(CLOCK_REALTIME, &ts);
	v->started_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	return v;
}

void
gw_apiv1_free(struct gw_apiv1 *v)
{
	free(v);
}

/* ---- validators ------------------------------------------------------- */

/* What sluice sets in every sandbox, which a claim's or an exec's env may
 * not replace: the proxy variables and the CA variables (the agent's, see
 * agent_ca_env()). */
static const char *const reserved_env[] = {
	"HTTP_PROXY",     "HTTPS_PROXY",        "ALL_PROXY",           "NO_PROXY",
	"http_proxy",     "https_proxy",        "all_proxy",           "no_proxy",
	"SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
	"CURL_CA_BUNDLE", "PIP_CERT",           "CARGO_HTTP_CAINFO",   "AWS_CA_BUNDLE",
};

bool
gw_env_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > 128)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';

		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return false;
	}
	for (size_t i = 0; i < sizeof(reserved_env) / sizeof(reserved_env[0]); i++)
		if (strlen(reserved_env[i]) == len && memcmp(reserved_env[i], name, len) == 0)
			return false;
	return true;
}

static char *
kv_join(const char *k, const char *v)
{
	size_t kl = strlen(k), vl = strlen(v);
	char *s = malloc(kl + vl + 2);

	if (!s)
		return NULL;
	memcpy(s, k, kl);
	s[kl] = '=';
	memcpy(s + kl + 1, v, vl + 1);
	return s;
}

/* An object of strings into "k=v" entries. */
static int
kv_object(const json_t *o, const char *path, bool env, size_t max, size_t vmax,
	  const char **out, size_t *n, char *err, size_t errsz)
{
	const char *k;
	json_t *val;

	*n = 0;
	if (!o)
		return 0;
	if (!json_is_object(o)) {
		snprintf(err, errsz, "%s: must be an object of strings", path);
		return -EINVAL;
	}
	if (json_object_size(o) > max) {
		snprintf(err, errsz, "%s: at most %zu entries", path, max);
		return -EINVAL;
	}
	json_object_foreach((json_t *)(uintptr_t)o, k, val) {
		if (!json_is_string(val)) {
			snprintf(err, errsz, "%s.%s: must be a string", path, k);
			return -EINVAL;
		}
		if (env && !gw_env_name_ok(k, strlen(k))) {
			snprintf(err, errsz,
				 "%s.%s: not a name the API may set ([A-Za-z_][A-Za-z0-9_]*, "
				 "and not a proxy or CA variable)",
				 path, k);
			return -EINVAL;
		}
		if (!env && (strlen(k) == 0 || strlen(k) > 128 || strchr(k, '='))) {
			snprintf(err, errsz, "%s: a key must be 1-128 bytes without '='", path);
			return -EINVAL;
		}
		if (json_string_length(val) > vmax || strlen(json_string_value(val)) !=
							      json_string_length(val)) {
			snprintf(err, errsz, "%s.%s: at most %zu bytes, no NUL", path, k, vmax);
			return -EINVAL;
		}
		if (!(out[*n] = kv_join(k, json_string_value(val)))) {
			snprintf(err, errsz, "out of memory");
			return -ENOMEM;
		}
		(*n)++;
	}
	return 0;
}

static int
only_keys(const json_t *o, const char *const *keys, size_t n, char *err, size_t errsz)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)(uintptr_t)o, k, v) {
		bool known = false;

		for (size_t i = 0; i < n; i++)
			known = known || strcmp(keys[i], k) == 0;
		if (!known) {
			snprintf(err, errsz, "%s: unknown key", k);
			return -EINVAL;
		}
	}
	return 0;
}

int
gw_creds_parse(const json_t *v, const char *root, struct conf_creds **out, char *err, size_t errsz)
{
	struct conf_diag d;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	conf_diag_init(&d);
	*out = conf_creds_from_json(v, root, &d);
	if (!*out) {
		size_t more = (d.n > 0 ? d.n - 1 : 0) + d.dropped;

		if (d.n == 0)
			snprintf(err, errsz, "%s: refused", root);
		else if (more > 0)
			snprintf(err, errsz, "%s (and %zu more)", d.lines[0], more);
		else
			snprintf(err, errsz, "%s", d.lines[0]);
	}
	conf_diag_fini(&d);
	return *out ? 0 : -EINVAL;
}

void
gw_json_wipe(json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;

	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		/* (jansson keeps the bytes it was given, NUL-terminated) */
		explicit_bzero((char *)(uintptr_t)json_string_value(v), json_string_length(v));
		break;
	case JSON_ARRAY:
		json_array_foreach(v, i, e)
			gw_json_wipe(e);
		break;
	case JSON_OBJECT:
		json_object_foreach(v, k, e)
			gw_json_wipe(e);
		break;
	default:
		break;
	}
}

int
gw_claim_args_parse(const json_t *body, struct gw_claim_args *out, char *err, size_t errsz)
{
	static const char *const keys[] = { "pool", "ttl_seconds", "env", "labels",
					    "credentials" };
	const json_t *pool, *ttl;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body)) {
		snprintf(err, errsz, "the body must be a JSON object");
		return -EINVAL;
	}
	if ((rc = only_keys(body, keys, 5, err, errsz)) < 0)
		return rc;
	pool = json_object_get(body, "pool");
	if (!json_is_string(pool) || json_string_length(pool) == 0 ||
	    json_string_length(pool) > 63) {
		snprintf(err, errsz, "pool: required, a pool name");
		return -EINVAL;
	}
	out->pool = json_string_value(pool);
	ttl = json_object_get(body, "ttl_seconds");
	if (ttl && !json_is_null(ttl)) {
		if (!json_is_integer(ttl)) {
			snprintf(err, errsz, "ttl_seconds: must be an integer number of seconds");
			return -EINVAL;
		}
		/* jansson refuses integers beyond json_int_t (64 bits) at
		 * parse time: what arrives here is in range. */
		out->ttl_present = true;
		out->ttl = (int64_t)json_integer_value(ttl);
	}
	rc = kv_object(json_object_get(body, "env"), "env", true, 64, GW_ENV_VALUE_MAX, out->env,
		       &out->nenv, err, errsz);
	if (rc == 0)
		rc = kv_object(json_object_get(body, "labels"), "labels", false, 64, GW_LABEL_MAX,
			       out->labels, &out->nlabels, err, errsz);
	if (rc == 0) {
		/* The claim's journal event carries them: bounded as a whole. */
		size_t total = 0;

		for (size_t k = 0; k < out->nenv; k++)
			total += strlen(out->env[k]);
		for (size_t k = 0; k < out->nlabels; k++)
			total += strlen(out->labels[k]);
		if (total > GW_CLAIM_KV_MAX) {
			snprintf(err, errsz, "env and labels: at most %u bytes in all",
				 GW_CLAIM_KV_MAX);
			rc = -EINVAL;
		}
	}
	if (rc == 0)
		rc = gw_creds_parse(json_object_get(body, "credentials"), "credentials",
				    &out->creds, err, errsz);
	if (rc < 0)
		gw_claim_args_fini(out);
	return rc;
}

void
gw_claim_args_fini(struct gw_claim_args *a)
{
	conf_creds_free(a->creds);
	a->creds = NULL;
	for (size_t i = 0; i < a->nenv; i++)
		free((char *)(uintptr_t)a->env[i]);
	for (size_t i = 0; i < a->nlabels; i++)
		free((char *)(uintptr_t)a->labels[i]);
	a->nenv = a->nlabels = 0;
}

int
gw_exec_args_parse(const json_t *body, struct gw_exec_args *out, char *err, size_t errsz)
{
	static const char *const keys[] = { "argv", "env", "cwd", "stdin", "timeout_seconds",
					    "stream" };
	const json_t *argv, *cwd, *in, *to, *st;
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	out->timeout_s = GW_EXEC_TIMEOUT_DEFAULT_S;
	if (!json_is_object(body)) {
		snprintf(err, errsz, "the body must be a JSON object");
		return -EINVAL;
	}
	if ((rc = only_keys(body, keys, 6, err, errsz)) < 0)
		return rc;
	argv = json_object_get(body, "argv");
	if (!json_is_array(argv) || (n = json_array_size(argv)) == 0 || n > 4096) {
		snprintf(err, errsz, "argv: required, an array of 1-4096 strings");
		return -EINVAL;
	}
	out->argv = calloc(n + 1, sizeof(*out->argv));
	if (!out->argv) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *a = json_array_get(argv, i);

		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
		    (i == 0 && json_string_length(a) == 0)) {
			snprintf(err, errsz, "argv[%zu]: must be a string without NUL%s", i,
				 i == 0 ? ", not empty" : "");
			gw_exec_args_fini(out);
			return -EINVAL;
		}
		out->argv[i] = json_string_value(a);
	}
	cwd = json_object_get(body, "cwd");
	if (cwd && !json_is_null(cwd)) {
		if (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
		    strlen(json_string_value(cwd)) != json_string_length(cwd)) {
			snprintf(err, errsz, "cwd: must be an absolute path");
			gw_exec_args_fini(out);
			return -EINVAL;
		}
		out->cwd = json_string_value(cwd);
	}
	in = json_object_get(body, "stdin");
	if (in && !json_is_null(in)) {
		if (!json_is_string(in)) {
			snprintf(err, errsz, "stdin: must be a string");
			gw_exec_args_fini(out);
			return -EINVAL;
		}
		out->stdin_data = json_string_value(in);
		out->stdin_len = json_string_length(in);
	}
	to = json_object_get(body, "timeout_seconds");
	if (to && !json_is_null(to)) {
		json_int_t t;

		if (!json_is_integer(to)) {
			snprintf(err, errsz, "timeout_seconds: must be an integer");
			gw_exec_args_fini(out);
			return -EINVAL;
		}
		t = json_integer_value(to);
		out->timeout_s = t < 1 ? 1 : t > GW_EXEC_TIMEOUT_MAX_S ? GW_EXEC_TIMEOUT_MAX_S
								       : (uint32_t)t;
	}
	st = json_object_get(body, "stream");
	if (st && !json_is_boolean(st)) {
		snprintf(err, errsz, "stream: must be true or false");
		gw_exec_args_fini(out);
		return -EINVAL;
	}
	out->stream = st && json_is_true(st);
	rc = kv_object(json_object_get(body, "env"), "env", true, 64, GW_ENV_VALUE_MAX, out->env,
		       &out->nenv, err, errsz);
	if (rc < 0)
		gw_exec_args_fini(out);
	return rc;
}

void
gw_exec_args_fini(struct gw_exec_args *a)
{
	for (size_t i = 0; i < a->nenv; i++)
		free((char *)(uintptr_t)a->env[i]);
	a->nenv = 0;
	free(a->argv);
	a->argv = NULL;
}

char *
gw_utf8_sanitize(const char *p, size_t len, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *)p;
	char *out = malloc(len * 3 + 1), *o = out;
	size_t i = 0;

	if (!out)
		return NULL;
	while (i < len) {
		unsigned char c = s[i];
		size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3
				   : (c >> 3) == 30 ? 4 : 0;
		bool ok = n > 0 && i + n <= len && c != 0;
		uint32_t cp = 0;

		if (ok && n > 1) {
			cp = c & (0x7f >> n);
			for (size_t k = 1; k < n && ok; k++) {
				ok = (s[i + k] & 0xc0) == 0x80;
				cp = (cp << 6) | (s[i + k] & 0x3f);
			}
			/* no overlong forms, surrogates or beyond U+10FFFF */
			ok = ok && !(n == 2 && cp < 0x80) && !(n == 3 && cp < 0x800) &&
			     !(n == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
			     !(cp >= 0xd800 && cp <= 0xdfff);
		}
		if (ok) {
			memcpy(o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = 0;
	if (outlen)
		*outlen = (size_t)(o - out);
	return out;
}

static json_t *
json_text(const char *p, size_t len)
{
	size_t n;
	char *s = gw_utf8_sanitize(p, len, &n);
	json_t *j;

	if (!s)
		return json_null();
	j = json_stringn(s, n);
	free(s);
	return j ? j : json_null();
}

/* base64 of len bytes in a new string (NULL when out of memory). */
static char *
b64(const void *p, size_t len)
{
	char *out = malloc((len + 2) / 3 * 4 + 1);

	if (out)
		sbx_b64_encode(p, len, out);
	return out;
}

/* ---- rendering -------------------------------------------------------- */

static json_t *
time_json(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return json_null();
	return json_string(buf);
}

static void
rule_to_json(void *arg, const char *kind, const char *text)
{
	json_t *layer = arg, *a = json_object_get(layer, kind);

	if (a)
		json_array_append_new(a, json_string(text));
}

static json_t *
layer_json(struct gw_policy *l)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:[], s:[], s:[], s:[]}", "version",
			      gw_policy_version(l), "policy", gw_policy_name(l), "mode",
			      conf_policy_mode_name(gw_policy_mode(l)), "allow", "deny",
			      "intercept", "credentials");
	json_t *narrow = json_array();

	if (!o)
		return json_null();
	json_object_set_new(o, "tenant_egress", narrow);
	gw_policy_each_rule(l, rule_to_json, o);
	if (json_array_size(narrow) == 0) {
		/* Absent and empty differ: an empty tenant list allows
		 * nothing. gw_policy_version() tells them apart too. */
		json_object_set_new(o, "tenant_egress", json_null());
	}
	return o;
}

static void
cred_to_json(void *arg, const struct conf_credential *c, const char *host)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "name", c->name, "kind",
			      conf_cred_kind_name(c->kind), "host", host, "source",
			      c->tenant ? "tenant" : "policy");

	if (!o)
		return;
	/* What a tenant must know after a restart: which of its own are
	 * gone. Never the value; the fingerprint tells values apart. */
	if (c->tenant) {
		json_object_set_new(o, "state", json_string(c->lost ? "lost" : "held"));
		json_object_set_new(o, "fingerprint", json_string(c->fingerprint));
	}
	if (c->kind == CONF_CRED_PLACEHOLDER)
		json_object_set_new(o, "env", json_string(c->env));
	json_array_append_new(arg, o);
}

static json_t *
creds_json(struct gw_policy *l)
{
	json_t *a = json_array();

	if (a)
		gw_policy_each_credential(l, cred_to_json, a);
	return a ? a : json_null();
}

static const char *
env_value(const struct pool_netinfo *n, const char *name)
{
	size_t l = strlen(name);

	for (size_t i = 0; i < n->nenv; i++)
		if (strncmp(n->env[i], name, l) == 0 && n->env[i][l] == '=')
			return n->env[i] + l + 1;
	return NULL;
}

static json_t *
claim_json(const struct pool_claim_view *v)
{
	json_t *o = json_object(), *labels = json_object();
	char addr[INET_ADDRSTRLEN] = "";

	json_object_set_new(o, "id", json_string(v->id));
	json_object_set_new(o, "pool", json_string(v->pool));
	json_object_set_new(o, "tenant", v->tenant ? json_string(v->tenant) : json_null());
	json_object_set_new(o, "tier", json_string(pool_tier_name(v->tier)));
	if (v->state == POOL_S_CLAIMED)
		json_object_set_new(o, "state", json_string("claimed"));
	else
		json_object_set_new(o, "state", json_string(v->end == POOL_END_REAPED ? "reaped"
							    : v->end == POOL_END_RELEASED
								    ? "released"
								    : "ended"));
	json_object_set_new(o, "lane", json_string(v->lane));
	if (v->net->linked)
		inet_ntop(AF_INET, &v->net->addr, addr, sizeof(addr));
	json_object_set_new(o, "address", v->net->linked ? json_string(addr) : json_null());
	json_object_set_new(o, "created_at", time_json(v->created_ms));
	json_object_set_new(o, "expires_at", time_json(v->expires_ms));
	json_object_set_new(o, "ttl_seconds", json_integer(v->ttl_s));
	for (size_t i = 0; i < v->nlabels; i++) {
		const char *eq = strchr(v->labels[i], '=');

		if (eq)
			json_object_setn_new(labels, v->labels[i], (size_t)(eq - v->labels[i]),
					     json_string(eq + 1));
	}
	json_object_set_new(o, "labels", labels);
	if (v->layer) {
		json_object_set_new(o, "layer", layer_json(v->layer));
		json_object_set_new(o, "credentials", creds_json(v->layer));
	}
	if (v->net->linked) {
		const char *h = env_value(v->net, "HTTP_PROXY"), *s = env_value(v->net, "HTTPS_PROXY"),
			   *a = env_value(v->net, "ALL_PROXY");

		json_object_set_new(o, "proxy",
				    json_pack("{s:s?, s:s?, s:s?}", "http", h, "https", s, "socks", a));
	} else {
		json_object_set_new(o, "proxy", json_null());
	}
	return o;
}

/* ---- claims ----------------------------------------------------------- */

struct view_ctx {
	json_t *out;
	struct gw_fleet *fleet;
};

static void
one_view(void *arg, const struct pool_claim_view *v)
{
	struct view_ctx *x = arg;

	x->out = claim_json(v);
}

static void
list_view(void *arg, const struct pool_claim_view *v)
{
	struct view_ctx *x = arg;

	json_array_append_new(x->out, claim_json(v));
}

static const struct conf_tenant *
tenant_of(const struct gw_api_req_info *i)
{
	if (!i->tenant)
		return NULL;
	for (size_t k = 0; k < i->conf->ntenants; k++)
		if (strcmp(i->conf->tenants[k].name, i->tenant) == 0)
			return &i->conf->tenants[k];
	return NULL;
}

/* Does a tenant's credential take the name of one of the pool's policy's?
 * (Names are what inject= and the journal say: one each per layer.) The
 * pool is looked up in the configuration the request came with; a reload
 * racing the claim is caught again when the layer compiles. */
static bool
creds_clash(const struct conf *c, const char *pool, const struct conf_creds *tc, char *err,
	    size_t errsz)
{
	const struct conf_pool *cp = tc ? conf_pool_find(c, pool) : NULL;
	const struct conf_policy *po = cp && cp->policy ? conf_policy_find(c, cp->policy) : NULL;

	for (size_t k = 0; po && k < tc->n; k++) {
		for (size_t j = 0; j < po->ncredentials; j++) {
			if (strcmp(tc->v[k].name, po->credentials[j].name) == 0) {
				snprintf(err, errsz, "credentials[%zu].name: '%s' is the name of a "
					 "credential of policy %s", k, tc->v[k].name, po->name);
				return true;
			}
		}
	}
	return false;
}

static void
h_claim(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct gw_claim_args a;
	struct pool_claim_req req = { 0 };
	struct view_ctx x = { .fleet = gw_claims_fleet(v->claims) };
	char err[512];
	json_t *body = gw_api_body_json(r);
	int rc;

	if (!body)
		return;
	if (gw_claim_args_parse(body, &a, err, sizeof(err)) < 0) {
		gw_api_reply_error(r, 400, "bad-request", "%s", err);
		json_decref(body);
		return;
	}
	if (i->tenant && !tenant_of(i)) {
		gw_api_reply_error(r, 401, "unauthorized", "the tenant is gone");
		goto out;
	}
	if (creds_clash(i->conf, a.pool, a.creds, err, sizeof(err))) {
		gw_api_reply_error(r, 400, "bad-request", "%s", err);
		goto out;
	}
	req.pool = a.pool;
	req.creds = a.creds;
	req.tenant = tenant_of(i);
	req.ttl_present = a.ttl_present;
	req.ttl = a.ttl;
	req.env = a.env;
	req.nenv = a.nenv;
	req.labels = a.labels;
	req.nlabels = a.nlabels;
	rc = pool_mgr_claim(v->mgr, &req, one_view, &x, err, sizeof(err));
	switch (rc) {
	case 0:
		gw_api_reply_json(r, 201, x.out);
		break;
	case -ENOENT:
		gw_api_reply_error(r, 404, "unknown-pool", "%s", err);
		break;
	case -EPERM:
		gw_api_reply_error(r, 403, "pool-not-allowed", "%s", err);
		break;
	case -EUSERS:
		gw_api_reply_error(r, 429, "too-many-claims", "%s", err);
		break;
	case -ESHUTDOWN:
		gw_api_reply_error(r, 503, "draining", "%s", err);
		break;
	case -ENOSPC:
	case -EAGAIN:           /* no warm sandbox and the cold boots all busy */
		gw_api_reply_error(r, 503, "no-capacity", "%s", err);
		break;
	case -EIO:
		gw_api_reply_error(r, 503, "boot-failed", "%s", err);
		break;
	case -POOL_ERR_JOURNAL:
		gw_api_reply_error(r, 503, "journal-unavailable", "%s", err);
		break;
	default:
		gw_api_reply_error(r, 500, "internal", "%s", err);
		break;
	}
out:
	gw_claim_args_fini(&a);
	gw_json_wipe(json_object_get(body, "credentials"));
	json_decref(body);
}

/* PUT /v1/sandboxes/{id}/credentials {"credentials": [...]}: the claim's
 * tenant credentials are these from now on (an empty list: none). */
static void
h_creds(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	static const char *const keys[] = { "credentials" };
	struct gw_apiv1 *v = arg;
	struct view_ctx x = { .fleet = gw_claims_fleet(v->claims) };
	struct conf_creds *creds = NULL;
	const json_t *list;
	char err[512];
	json_t *body = gw_api_body_json(r);
	int rc;

	if (!body)
		return;
	list = json_object_get(body, "credentials");
	if (only_keys(body, keys, 1, err, sizeof(err)) < 0 || !list) {
		gw_api_reply_error(r, 400, "bad-request", "%s",
				   list ? err : "credentials: required (a list; [] for none)");
		goto out;
	}
	if (gw_creds_parse(list, "credentials", &creds, err, sizeof(err)) < 0) {
		gw_api_reply_error(r, 400, "bad-request", "%s", err);
		goto out;
	}
	rc = pool_mgr_set_creds(v->mgr, i->id, i->tenant, creds, one_view, &x, err, sizeof(err));
	switch (rc) {
	case 0:
		gw_api_reply_json(r, 200, x.out);
		break;
	case -ENOENT:
		gw_api_reply_error(r, 404, "not-found", "no sandbox %s", i->id);
		break;
	case -ESTALE:
		gw_api_reply_error(r, 409, "not-claimed", "%s", err);
		break;
	case -EBUSY:
		gw_api_reply_error(r, 409, "busy", "%s", err);
		break;
	case -EINVAL:
		gw_api_reply_error(r, 400, "bad-request", "%s", err);
		break;
	case -POOL_ERR_JOURNAL:
		gw_api_reply_error(r, 503, "journal-unavailable", "%s", err);
		break;
	default:
		gw_api_reply_error(r, 500, "internal", "%s", err);
		break;
	}
out:
	conf_creds_free(creds);
	gw_json_wipe(json_object_get(body, "credentials"));
	json_decref(body);
}

static void
h_list(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct view_ctx x = { .out = json_array(), .fleet = gw_claims_fleet(v->claims) };

	pool_mgr_each_claim(v->mgr, i->tenant, list_view, &x);
	gw_api_reply_json(r, 200, json_pack("{s:o}", "sandboxes", x.out));
}

static void
h_show(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct view_ctx x = { .fleet = gw_claims_fleet(v->claims) };
	struct gw_fleet_info fi;

	if (pool_mgr_get(v->mgr, i->id, i->tenant, one_view, &x) < 0) {
		gw_api_reply_error(r, 404, "not-found", "no sandbox %s", i->id);
		return;
	}
	/* Counters are read after the manager's lock is dropped. */
	if (strcmp(json_string_value(json_object_get(x.out, "state")), "claimed") == 0 &&
	    gw_fleet_get(x.fleet, i->id, &fi) == 0)
		json_object_set_new(x.out, "counters",
				    json_pack("{s:I, s:I, s:I, s:I, s:I}", "tx_packets",
					      (json_int_t)fi.tx_packets, "tx_bytes",
					      (json_int_t)fi.tx_bytes, "rx_packets",
					      (json_int_t)fi.rx_packets, "rx_bytes",
					      (json_int_t)fi.rx_bytes, "refused_packets",
					      (json_int_t)fi.refused_packets));
	gw_api_reply_json(r, 200, x.out);
}

static void
h_release(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	enum pool_end was;
	int rc = pool_mgr_release(v->mgr, i->id, i->tenant, &was);

	if (rc == -POOL_ERR_JOURNAL) {
		gw_api_reply_error(r, 503, "journal-unavailable",
				   "the journal could not record the release of %s; try again",
				   i->id);
		return;
	}
	if (rc < 0) {
		gw_api_reply_error(r, 404, "not-found", "no sandbox %s", i->id);
		return;
	}
	gw_api_reply_json(r, 200,
			  json_pack("{s:s, s:s}", "id", i->id, "result",
				    was == POOL_END_NONE       ? "released"
				    : was == POOL_END_REAPED ? "already-reaped"
							     : "already-released"));
}

/* Borrows the claim's agent, or answers why not. */
static int
use_or_reply(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
	     struct pool_use *u)
{
	int rc = pool_mgr_use(v->mgr, i->id, i->tenant, u);

	if (rc == -ENOENT)
		gw_api_reply_error(r, 404, "not-found", "no sandbox %s", i->id);
	else if (rc == -EBUSY)
		gw_api_reply_error(r, 409, "sandbox-busy",
				   "sandbox %s ran another command or file transfer for %u s: one "
				   "at a time per sandbox",
				   i->id, POOL_USE_WAIT_MS / 1000);
	else if (rc < 0)
		gw_api_reply_error(r, 409, "sandbox-ended", "sandbox %s has been released or reaped",
				   i->id);
	return rc;
}

int
gw_apiv1_use(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
	     struct pool_use *u)
{
	return use_or_reply(v, r, i, u);
}

void
gw_apiv1_put(struct gw_apiv1 *v, struct pool_use *u)
{
	pool_mgr_put(v->mgr, u);
}

/* ---- exec ------------------------------------------------------------- */

struct exec_state {
	struct gw_api_req *r;
	struct sbx_agent_call *call;
	bool stream;
	bool done;
	bool client_gone;
	int exit_code, signal;
	bool timed_out, truncated;
	int pid;
	char *out, *err;
	size_t out_len, err_len;
	const char *err_code;
	char err_msg[256];
	const char *stdin_data;
	size_t stdin_len, stdin_off;
	bool stdin_ended;
};

/* Copies a message from the agent, cut on a character boundary and with
 * bad UTF-8 replaced, so that it can go into JSON. */
static void
msg_copy(char *out, size_t outsz, const char *msg)
{
	char *clean = gw_utf8_sanitize(msg, strlen(msg), NULL);
	size_t n;

	snprintf(out, outsz, "%s", clean ? clean : "error");
	free(clean);
	n = strlen(out);
	/* Back off a multibyte sequence the cut left incomplete. */
	if (n + 1 == outsz) {
		size_t k = n;

		while (k > 0 && ((unsigned char)out[k - 1] & 0xc0) == 0x80)
			k--;
		if (k > 0 && ((unsigned char)out[k - 1] & 0x80)) {
			unsigned char lead = (unsigned char)out[k - 1];
			size_t need = (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : 4;

			if (n - (k - 1) < need)
				out[k - 1] = 0;
		}
	}
}

static void
stream_event(struct exec_state *s, json_t *ev)
{
	if (s->client_gone || !ev) {
		json_decref(ev);
		return;
	}
	if (gw_api_stream_json(s->r, ev) < 0) {
		s->client_gone = true;
		if (s->call && !s->done) {
			/* Nobody reads the output: the command is killed. */
			sbx_agent_call_cancel(s->call);
			s->call = NULL;
			s->done = true;
		}
	}
}

static void
keep(char **buf, size_t *len, const uint8_t *p, size_t n, bool *truncated)
{
	size_t room = GW_EXEC_OUTPUT_MAX - *len;
	char *nb;

	if (n > room) {
		*truncated = true;
		n = room;
	}
	if (n == 0)
		return;
	nb = realloc(*buf, *len + n);
	if (!nb) {
		*truncated = true;
		return;
	}
	memcpy(nb + *len, p, n);
	*buf = nb;
	*len += n;
}

static void
exec_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct exec_state *s = arg;

	(void)k;
	switch (ev->kind) {
	case SBX_AGENT_EV_STARTED:
		s->pid = ev->pid;
		if (s->stream)
			stream_event(s, json_pack("{s:s, s:i}", "event", "started", "pid", ev->pid));
		break;
	case SBX_AGENT_EV_STDOUT:
	case SBX_AGENT_EV_STDERR: {
		bool out = ev->kind == SBX_AGENT_EV_STDOUT;

		if (s->stream) {
			char *d = b64(ev->data, ev->len);

			stream_event(s, json_pack("{s:s, s:s}", "event", out ? "stdout" : "stderr",
						  "data", d ? d : ""));
			free(d);
		} else if (out) {
			keep(&s->out, &s->out_len, ev->data, ev->len, &s->truncated);
		} else {
			keep(&s->err, &s->err_len, ev->data, ev->len, &s->truncated);
		}
		break;
	}
	case SBX_AGENT_EV_EXIT:
		s->exit_code = ev->exit_code;
		s->signal = ev->signal;
		s->timed_out = ev->timed_out;
		s->done = true;
		s->call = NULL;
		break;
	case SBX_AGENT_EV_ERROR:
		s->err_code = ev->code && strcmp(ev->code, "bad_cwd") == 0 ? "bad-cwd"
			      : ev->err == ETIMEDOUT ? "timeout"
			      : ev->err == ENOENT || ev->err == EACCES || ev->err == ENOTDIR
				      ? "bad-request"
				      : "agent-error";
		msg_copy(s->err_msg, sizeof(s->err_msg), ev->message ? ev->message : "error");
		s->done = true;
		s->call = NULL;
		break;
	default:
		break;
	}
}

static void
exec_pump(struct exec_state *s)
{
	if (!s->call || s->stdin_ended || s->done)
		return;
	if (s->stdin_off < s->stdin_len) {
		long n = sbx_agent_call_send(s->call, s->stdin_data + s->stdin_off,
					     s->stdin_len - s->stdin_off);

		if (n > 0)
			s->stdin_off += (size_t)n;
	}
	if (s->stdin_off == s->stdin_len) {
		s->stdin_ended = true;
		sbx_agent_call_end_input(s->call);
	}
}

/* Runs the agent connection until *done; pump (may be NULL) runs before
 * each wait. With client >= 0, the client hanging up (or the server
 * shutting the connection at stop) ends the wait with -ECONNRESET: the
 * caller cancels its call, which ends the command. -errno when the
 * connection failed first. */
static int
drive(struct sbx_agent_conn *c, int client, bool *done, void (*pump)(void *), void *parg)
{
	while (!*done) {
		struct pollfd p[2] = { { .fd = sbx_agent_fd_of(c) },
				       { .fd = client, .events = POLLRDHUP } };
		int64_t dl, now;
		int rc, timeout = 1000;

		if (pump)
			pump(parg);
		if (*done)
			break;
		p[0].events = sbx_agent_want(c, &dl);
		if (!p[0].events)
			return -EPIPE;
		now = sbx_agent_now_ms();
		if (dl >= 0 && dl - now < timeout)
			timeout = dl <= now ? 0 : (int)(dl - now);
		if (poll(p, client >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
			return -errno;
		if (client >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return -ECONNRESET;
		rc = sbx_agent_process(c, p[0].revents, sbx_agent_now_ms());
		if (rc < 0 && !*done)
			return rc;
	}
	return 0;
}

static void
exec_pump_fn(void *arg)
{
	exec_pump(arg);
}

static json_t *
exit_json(const struct exec_state *s, int64_t ms)
{
	return json_pack("{s:o, s:o, s:b, s:I}", "exit_code",
			 s->signal ? json_null() : json_integer(s->exit_code), "signal",
			 s->signal ? json_integer(s->signal) : json_null(), "timed_out", s->timed_out,
			 "duration_ms", (json_int_t)ms);
}

static void
h_exec(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct gw_exec_args a;
	struct exec_state s = { .r = r };
	struct sbx_agent_call_opts o = { 0 };
	struct sbx_agent_exec_req xr = { 0 };
	struct pool_use u;
	json_t *body = gw_api_body_json(r), *req;
	const char **env = NULL;
	char err[512];
	int64_t t0;
	int rc;

	if (!body)
		return;
	if (gw_exec_args_parse(body, &a, err, sizeof(err)) < 0) {
		gw_api_reply_error(r, 400, "bad-request", "%s", err);
		json_decref(body);
		return;
	}
	if (use_or_reply(v, r, i, &u) < 0)
		goto out;
	s.stream = a.stream || gw_api_accepts(r, "application/x-ndjson");
	/* The claim's environment, then the request's (a later NAME wins). */
	env = calloc(u.nenv + a.nenv + 1, sizeof(*env));
	for (size_t k = 0; env && k < u.nenv + a.nenv; k++)
		env[k] = k < u.nenv ? u.env[k] : a.env[k - u.nenv];
	xr.argv = a.argv;
	xr.env = env;
	xr.cwd = a.cwd;
	xr.stdin_data = a.stdin_data;
	xr.timeout_ms = (int)a.timeout_s * 1000;  /* at most GW_EXEC_TIMEOUT_MAX_S */
	req = NULL;
	if (env)
		req = sbx_agent_req_exec(&xr, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "out of memory");
	free(env);
	s.stdin_data = a.stdin_data;
	s.stdin_len = a.stdin_len;
	s.stdin_ended = a.stdin_data == NULL;
	t0 = sbx_agent_now_ms();
	/* The agent enforces the timeout; this deadline is a backstop for
	 * an agent that stopped answering. */
	o.deadline_ms = t0 + (int64_t)a.timeout_s * 1000 + 10000;
	s.call = req ? sbx_agent_call_start(u.agent, req, &o, exec_cb, &s, &rc) : NULL;
	json_decref(req);
	if (!s.call) {
		pool_mgr_put(v->mgr, &u);
		gw_api_reply_error(r, 502, "agent-error", "cannot start the command: %s",
				   req ? strerror(-rc) : err);
		goto out;
	}
	if (s.stream && gw_api_stream_begin(r, 200, "application/x-ndjson") < 0) {
		sbx_agent_call_cancel(s.call);
		s.call = NULL;
		pool_mgr_put(v->mgr, &u);
		goto out;
	}
	rc = drive(u.agent, gw_api_req_fd(r), &s.done, exec_pump_fn, &s);
	if (rc < 0 && !s.done) {
		s.err_code = "agent-error";
		snprintf(s.err_msg, sizeof(s.err_msg), "the sandbox's agent: %s", strerror(-rc));
		if (s.call)
			sbx_agent_call_cancel(s.call);
		s.call = NULL;
		if (rc == -ECONNRESET) {
			/* The client left: the command is killed with the
			 * call (its cancel sent now); nobody is there to
			 * answer. */
			sbx_agent_flush_sync(u.agent, 1000);
			s.client_gone = true;
			pool_mgr_put(v->mgr, &u);
			goto out;
		}
	}
	if (s.client_gone)
		sbx_agent_flush_sync(u.agent, 1000); /* the cancel, before the next user */
	pool_mgr_put(v->mgr, &u);
	if (s.stream) {
		json_t *ev;

		if (s.err_code) {
			ev = json_pack("{s:s, s:s, s:s}", "event", "error", "code", s.err_code,
				       "message", s.err_msg);
		} else {
			ev = exit_json(&s, sbx_agent_now_ms() - t0);
			json_object_set_new(ev, "event", json_string("exit"));
		}
		stream_event(&s, ev);
		if (!s.client_gone)
			gw_api_stream_end(r);
	} else if (s.err_code) {
		gw_api_reply_error(r, strcmp(s.err_code, "timeout") == 0 ? 504
				   : strcmp(s.err_code, "bad-request") == 0 ||
					     strcmp(s.err_code, "bad-cwd") == 0
					   ? 400
					   : 502,
				   s.err_code, "%s", s.err_msg);
	} else {
		json_t *res = exit_json(&s, sbx_agent_now_ms() - t0);

		json_object_set_new(res, "stdout", json_text(s.out, s.out_len));
		json_object_set_new(res, "stderr", json_text(s.err, s.err_len));
		json_object_set_new(res, "truncated", json_boolean(s.truncated));
		gw_api_reply_json(r, 200, res);
	}
out:
	free(s.out);
	free(s.err);
	gw_exec_args_fini(&a);
	json_decref(body);
}

/* ---- files ------------------------------------------------------------ */

static bool
path_ok(const char *p)
{
	return p && p[0] == '/' && strlen(p) < 4096;
}

struct file_state {
	struct gw_api_req *r;
	struct sbx_agent_call *call;
	bool done, failed, client_gone, begun;
	int err;
	char msg[256];
	uint64_t bytes;
	struct gw_upload up;    /* uploads */
};

static void
fread_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct file_state *s = arg;

	if (ev->kind == SBX_AGENT_EV_STDOUT) {
		if (!s->begun) {
			s->begun = true;
			if (gw_api_stream_begin(s->r, 200, "application/octet-stream") < 0)
				s->client_gone = true;
		}
		if (!s->client_gone && gw_api_stream_write(s->r, ev->data, ev->len) < 0)
			s->client_gone = true;
		s->bytes += ev->len;
		if (s->bytes > GW_FILE_MAX && !s->client_gone) {
			/* It grew past the cap while being read: cut short. */
			s->failed = true;
			s->err = EFBIG;
		}
		if (s->client_gone || s->failed) {
			sbx_agent_call_cancel(k);
			s->done = true;
		}
	} else if (ev->kind == SBX_AGENT_EV_RESULT) {
		s->done = true;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		s->failed = true;
		s->err = ev->err;
		snprintf(s->msg, sizeof(s->msg), "%s", ev->message ? ev->message : "error");
		s->done = true;
	}
}

/* An agent's message without the agent's own code in front ("not_found:
 * ..." from the blocking helpers): the answer has its code once, the API's. */
static const char *
agent_msg(const char *msg)
{
	size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyz_");

	return n > 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

static void
reply_agent_error(struct gw_api_req *r, int err, const char *msg)
{
	msg = agent_msg(msg);
	if (err == ENOENT || err == ENOTDIR)
		gw_api_reply_error(r, 404, "not-found", "%s", msg);
	else if (err == EISDIR || err == EINVAL || err == ENAMETOOLONG || err == EACCES)
		gw_api_reply_error(r, 400, "bad-request", "%s", msg);
	else if (err == ETIMEDOUT)
		gw_api_reply_error(r, 504, "timeout", "%s", msg);
	else
		gw_api_reply_error(r, 502, "agent-error", "%s", msg);
}

static void
h_files_get(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	const char *path = gw_api_query(r, "path");
	struct file_state s = { .r = r };
	struct sbx_agent_call_opts o = { 0 };
	struct pool_use u;
	json_t *req, *st = NULL;
	uint64_t size;
	char err[256];
	int rc;

	if (!path_ok(path)) {
		gw_api_reply_error(r, 400, "bad-request", "path: an absolute path is required");
		return;
	}
	if (gw_apiv1_files_get_alt(v, r, i))
		return;
	if (use_or_reply(v, r, i, &u) < 0)
		return;
	req = sbx_agent_req_stat(path);
	rc = req ? sbx_agent_op_sync(u.agent, req, 30000, &st, err, sizeof(err)) : -EINVAL;
	json_decref(req);
	if (rc < 0) {
		pool_mgr_put(v->mgr, &u);
		reply_agent_error(r, -rc, rc == -EINVAL && !req ? "path is not UTF-8" : err);
		return;
	}
	if (sbx_agent_stat_is_dir(st, &size)) {
		json_t *lr = NULL;

		req = sbx_agent_req_list(path);
		rc = sbx_agent_op_sync(u.agent, req, 30000, &lr, err, sizeof(err));
		json_decref(req);
		pool_mgr_put(v->mgr, &u);
		if (rc < 0)
			reply_agent_error(r, -rc, err);
		else
			gw_api_reply_json(r, 200,
					  json_pack("{s:s, s:O}", "path", path, "entries",
						    sbx_agent_list_entries(lr)));
		json_decref(lr);
		json_decref(st);
		return;
	}
	if (size > GW_FILE_MAX) {
		pool_mgr_put(v->mgr, &u);
		json_decref(st);
		gw_api_reply_error(r, 413, "too-large", "%s is larger than %llu bytes", path,
				   (unsigned long long)GW_FILE_MAX);
		return;
	}
	json_decref(st);
	req = sbx_agent_req_read(path);
	s.call = sbx_agent_call_start(u.agent, req, &o, fread_cb, &s, &rc);
	json_decref(req);
	if (!s.call) {
		pool_mgr_put(v->mgr, &u);
		gw_api_reply_error(r, 502, "agent-error", "cannot read: %s", strerror(-rc));
		return;
	}
	rc = drive(u.agent, gw_api_req_fd(r), &s.done, NULL, NULL);
	if (rc < 0 && !s.done && s.call)
		sbx_agent_call_cancel(s.call);
	pool_mgr_put(v->mgr, &u);
	if (rc == -ECONNRESET)
		return;
	if (rc < 0 && !s.done) {
		s.failed = true;
		s.err = -rc;
		snprintf(s.msg, sizeof(s.msg), "the sandbox's agent: %s", strerror(-rc));
	}
	if (s.begun) {
		/* A failure after the first byte can only cut the stream
		 * short: the missing last chunk tells the client. */
		if (!s.failed && !s.client_gone)
			gw_api_stream_end(r);
		return;
	}
	if (s.failed) {
		reply_agent_error(r, s.err, s.msg);
		return;
	}
	/* An empty file. */
	gw_api_reply_raw(r, 200, "application/octet-stream", "", 0);
}

static void
fwrite_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct file_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_RESULT) {
		s->done = true;
		s->call = NULL;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		s->failed = true;
		s->err = ev->err;
		snprintf(s->msg, sizeof(s->msg), "%s", ev->message ? ev->message : "error");
		s->done = true;
		s->call = NULL;
	}
}

#define UPLOAD_BUF (64u << 10)

int
gw_apiv1_upload_pump(struct gw_api_req *r, struct sbx_agent_call *call, struct gw_upload *u,
		     char *msg, size_t msgsz)
{
	for (;;) {
		long n;

		if (u->off == u->have && !u->body_end) {
			ssize_t got;

			if (sbx_agent_call_credit(call) == 0)
				return 0;
			got = gw_api_body_read(r, u->buf, u->bufsz);
			if (got < 0) {
				snprintf(msg, msgsz, "reading the request body: %s",
					 strerror((int)-got));
				return (int)got;
			}
			if (got == 0) {
				u->body_end = true;
				sbx_agent_call_end_input(call);
				return 0;
			}
			u->have = (size_t)got;
			u->off = 0;
			u->bytes += (uint64_t)got;
			if (u->bytes > u->max) {
				snprintf(msg, msgsz, "the %s is larger than %llu bytes", u->what,
					 (unsigned long long)u->max);
				return -EFBIG;
			}
		}
		if (u->off == u->have)
			return 0;
		n = sbx_agent_call_send(call, u->buf + u->off, u->have - u->off);
		if (n <= 0)
			return 0;
		u->off += (size_t)n;
	}
}

static void
fwrite_pump(void *arg)
{
	struct file_state *s = arg;
	int rc;

	if (!s->call || s->done)
		return;
	rc = gw_apiv1_upload_pump(s->r, s->call, &s->up, s->msg, sizeof(s->msg));
	if (rc < 0) {
		s->failed = true;
		s->err = -rc;
		sbx_agent_call_cancel(s->call);
		s->call = NULL;
		s->done = true;
	}
}

static void
h_files_put(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	const char *path = gw_api_query(r, "path"), *mode_s = gw_api_query(r, "mode");
	struct file_state s = { .r = r };
	struct sbx_agent_call_opts o = { 0 };
	struct pool_use u;
	unsigned long mode = 0644;
	int64_t declared = gw_api_body_length(r);
	json_t *req;
	int rc;

	if (!path_ok(path)) {
		gw_api_reply_error(r, 400, "bad-request", "path: an absolute path is required");
		return;
	}
	if (gw_apiv1_files_put_alt(v, r, i))
		return;
	if (mode_s) {
		char *end;

		errno = 0;
		mode = strtoul(mode_s, &end, 8);
		if (errno || *end || end == mode_s || mode > 07777) {
			gw_api_reply_error(r, 400, "bad-request", "mode: octal permission bits");
			return;
		}
	}
	if (declared > (int64_t)GW_FILE_MAX) {
		gw_api_reply_error(r, 413, "too-large", "the body is larger than %llu bytes",
				   (unsigned long long)GW_FILE_MAX);
		return;
	}
	if (use_or_reply(v, r, i, &u) < 0)
		return;
	s.up = (struct gw_upload){ .buf = malloc(UPLOAD_BUF), .bufsz = UPLOAD_BUF,
				   .max = GW_FILE_MAX, .what = "body" };
	req = sbx_agent_req_write(path, (unsigned)mode);
	s.call = s.up.buf && req ? sbx_agent_call_start(u.agent, req, &o, fwrite_cb, &s, &rc) : NULL;
	json_decref(req);
	if (!s.call) {
		pool_mgr_put(v->mgr, &u);
		free(s.up.buf);
		gw_api_reply_error(r, 502, "agent-error", "cannot write %s", path);
		return;
	}
	/* The client is the body's reader here: its end shows there. */
	rc = drive(u.agent, -1, &s.done, fwrite_pump, &s);
	if (rc < 0 && !s.done && s.call)
		sbx_agent_call_cancel(s.call);
	pool_mgr_put(v->mgr, &u);
	free(s.up.buf);
	if (rc < 0 && !s.done) {
		s.failed = true;
		s.err = -rc;
		snprintf(s.msg, sizeof(s.msg), "the sandbox's agent: %s", strerror(-rc));
	}
	if (s.failed) {
		if (s.err == EFBIG)
			gw_api_reply_error(r, 413, "too-large", "%s", s.msg);
		else
			reply_agent_error(r, s.err, s.msg);
		return;
	}
	gw_api_reply_json(r, 201, json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)s.up.bytes));
}

/* For files_tree.c (apiv1-int.h). */
int
gw_apiv1_drive(struct sbx_agent_conn *c, int client, bool *done, void (*pump)(void *), void *parg)
{
	return drive(c, client, done, pump, parg);
}

void
gw_apiv1_reply_agent_error(struct gw_api_req *r, int err, const char *msg)
{
	reply_agent_error(r, err, msg);
}

/* ---- operators -------------------------------------------------------- */

static void
h_pools_get(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct conf *c = pool_mgr_conf(v->mgr);

	(void)i;
	gw_api_reply_json(r, 200, conf_pools_to_json(c));
	conf_unref(c);
}

static void
h_pools_put(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	const char *dry = gw_api_query(r, "dry_run");
	json_t *body, *diff, *res;
	struct conf_diag d;
	struct conf *c;
	bool dry_run = dry && (strcmp(dry, "1") == 0 || strcmp(dry, "true") == 0);

	if (dry && !dry_run && strcmp(dry, "0") != 0 && strcmp(dry, "false") != 0) {
		gw_api_reply_error(r, 400, "bad-request", "dry_run: 1, true, 0 or false");
		return;
	}
	body = gw_api_body_json(r);
	if (!body)
		return;
	conf_diag_init(&d);
	c = conf_with_pools_json(i->conf, body, &d);
	json_decref(body);
	if (!c) {
		json_t *det = json_array();

		for (size_t k = 0; k < d.n; k++)
			json_array_append_new(det, json_string(d.lines[k]));
		gw_api_reply_error_json(r, 400,
					json_pack("{s:s, s:s, s:o}", "code", "bad-request",
						  "message",
						  d.n == 1 ? d.lines[0] : "the pool set has errors",
						  "details", det));
		conf_diag_fini(&d);
		return;
	}
	conf_diag_fini(&d);
	/* What changes, against the set before (pools/diff.h): the whole
	 * answer of a dry run, which changes nothing. */
	diff = pool_mgr_diff(v->mgr, c);
	res = conf_pools_to_json(c);
	if (!diff || !res) {
		json_decref(diff);
		json_decref(res);
		conf_unref(c);
		gw_api_reply_error(r, 500, "internal", "out of memory");
		return;
	}
	json_object_update(res, diff);
	json_decref(diff);
	json_object_set_new(res, "dry_run", json_boolean(dry_run));
	if (!dry_run) {
		pool_mgr_set_conf(v->mgr, c);
		gw_log_info("PUT /v1/pools: %zu pools in the set", c->npools);
	}
	gw_api_reply_json(r, 200, res);
	conf_unref(c);
}

struct info_ctx {
	json_t *pools;
	struct gw_mbuf *m;
	int pass;
};

static void
info_pool(void *arg, const struct pool_info *p)
{
	struct info_ctx *x = arg;

	json_array_append_new(
		x->pools,
		json_pack("{s:s, s:s?, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:{s:I, s:I}, s:I, s:I, "
			  "s:f, s:f, s:I}",
			  "name", p->name, "backend", p->backend, "draining", p->draining, "warm",
			  p->warm, "target",
			  p->target, "booting", p->booting, "claimed", p->claimed, "warm_min",
			  p->floor, "warm_max", p->ceiling, "claims", "warm",
			  (json_int_t)p->claims[POOL_TIER_WARM], "cold",
			  (json_int_t)p->claims[POOL_TIER_COLD], "boots", (json_int_t)p->boots,
			  "boot_failures", (json_int_t)p->boot_failures, "lead_ms", p->lead_ms,
			  "rate_per_s", p->rate_per_s, "backoff_ms", (json_int_t)p->backoff_ms));
	if (p->available != 1) {
		/* an rpc pool whose supervisor says its engine cannot run here
		 * (docs/backend-rpc.md), or that was not asked yet */
		json_t *o = json_array_get(x->pools, json_array_size(x->pools) - 1);

		json_object_set_new(o, "available", p->available < 0 ? json_null() : json_false());
		if (p->unavailable_reason)
			json_object_set_new(o, "reason", json_string(p->unavailable_reason));
	}
}

static void
h_info(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct info_ctx x = { .pools = json_array() };
	struct timespec ts;
	int64_t now;

	(void)i;
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	pool_mgr_each_pool(v->mgr, info_pool, &x);
	gw_api_reply_json(r, 200,
			  json_pack("{s:s, s:I, s:o, s:o}", "version", SLUICE_VERSION,
				    "uptime_seconds", (json_int_t)((now - v->started_ms) / 1000),
				    "started_at", time_json(v->started_ms), "pools", x.pools));
}

/* The pool families of /metrics, each written whole (its HELP and TYPE,
 * then every pool's samples) before the next: the text format wants a
 * family's samples together. */
enum {
	PM_CLAIMS, PM_WARM, PM_TARGET, PM_BOOTING, PM_CLAIMED, PM_BOOT_SECONDS, PM_BOOT_FAILURES,
	PM_N
};

static const char *const pm_head[PM_N] = {
	[PM_CLAIMS] = "# HELP sluice_claims_total Claims served, by pool and tier.\n"
		      "# TYPE sluice_claims_total counter\n",
	[PM_WARM] = "# HELP sluice_pool_warm Warm sandboxes ready to be claimed.\n"
		    "# TYPE sluice_pool_warm gauge\n",
	[PM_TARGET] = "# HELP sluice_pool_target The number of warm sandboxes the pool aims for.\n"
		      "# TYPE sluice_pool_target gauge\n",
	[PM_BOOTING] = "# HELP sluice_pool_booting Sandboxes booting for the pool.\n"
		       "# TYPE sluice_pool_booting gauge\n",
	[PM_CLAIMED] = "# HELP sluice_pool_claimed Live claims of the pool.\n"
		       "# TYPE sluice_pool_claimed gauge\n",
	[PM_BOOT_SECONDS] = "# HELP sluice_boot_seconds Time from boot start to a ready agent.\n"
			    "# TYPE sluice_boot_seconds histogram\n",
	[PM_BOOT_FAILURES] = "# HELP sluice_boot_failures_total Boots that failed.\n"
			     "# TYPE sluice_boot_failures_total counter\n",
};

static void
metrics_pool(void *arg, const struct pool_info *p)
{
	struct info_ctx *x = arg;
	struct gw_mbuf *b = x->m;

	switch (x->pass) {
	case PM_CLAIMS:
		for (int t = 0; t < 2; t++)
			gw_mbuf_printf(b, "sluice_claims_total{pool=\"%s\",tier=\"%s\"} %" PRIu64 "\n",
				       p->name, pool_tier_name((enum pool_tier)t), p->claims[t]);
		break;
	case PM_WARM:
		gw_mbuf_printf(b, "sluice_pool_warm{pool=\"%s\"} %u\n", p->name, p->warm);
		break;
	case PM_TARGET:
		gw_mbuf_printf(b, "sluice_pool_target{pool=\"%s\"} %u\n", p->name, p->target);
		break;
	case PM_BOOTING:
		gw_mbuf_printf(b, "sluice_pool_booting{pool=\"%s\"} %u\n", p->name, p->booting);
		break;
	case PM_CLAIMED:
		gw_mbuf_printf(b, "sluice_pool_claimed{pool=\"%s\"} %u\n", p->name, p->claimed);
		break;
	case PM_BOOT_SECONDS: {
		uint64_t cum = 0;

		for (size_t k = 0; k < POOL_BOOT_BUCKETS; k++) {
			cum += p->boot_buckets[k];
			if (k < POOL_BOOT_BUCKETS - 1)
				gw_mbuf_printf(b,
					       "sluice_boot_seconds_bucket{pool=\"%s\",le=\"%g\"} "
					       "%" PRIu64 "\n",
					       p->name, pool_boot_bounds_ms[k] / 1000.0, cum);
			else
				gw_mbuf_printf(b,
					       "sluice_boot_seconds_bucket{pool=\"%s\",le=\"+Inf\"} "
					       "%" PRIu64 "\n",
					       p->name, cum);
		}
		gw_mbuf_printf(b, "sluice_boot_seconds_sum{pool=\"%s\"} %g\n", p->name,
			       p->boot_ms_sum / 1000.0);
		gw_mbuf_printf(b, "sluice_boot_seconds_count{pool=\"%s\"} %" PRIu64 "\n", p->name,
			       cum);
		break;
	}
	case PM_BOOT_FAILURES:
		gw_mbuf_printf(b, "sluice_boot_failures_total{pool=\"%s\"} %" PRIu64 "\n", p->name,
			       p->boot_failures);
		break;
	default:
		break;
	}
}

static void
h_metrics(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	struct gw_mbuf b = { 0 };
	struct info_ctx x = { .m = &b };

	(void)i;
	for (x.pass = 0; x.pass < PM_N; x.pass++) {
		gw_mbuf_printf(&b, "%s", pm_head[x.pass]);
		pool_mgr_each_pool(v->mgr, metrics_pool, &x);
	}
	gw_metrics_render(&b);
	gw_refusals_metrics(gw_claims_fleet(v->claims), &b);
	if (b.oom) {
		free(b.p);
		gw_api_reply_error(r, 500, "internal", "out of memory");
		return;
	}
	gw_api_reply_raw(r, 200, "text/plain; version=0.0.4", b.p, b.len);
	free(b.p);
}

/* since: epoch seconds, or RFC 3339 UTC ("2026-12-03T10:00:00Z"). */
static int
parse_since(const char *v, int64_t *ms)
{
	struct tm tm = { 0 };
	char *end;
	long long n;

	if (!v || !*v) {
		*ms = 0;
		return 0;
	}
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!*end && !errno && n >= 0 && n < 253402300800LL) {
		*ms = n * 1000;
		return 0;
	}
	end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0))
		return -EINVAL;
	*ms = (int64_t)timegm(&tm) * 1000;
	return *ms >= 0 ? 0 : -EINVAL;
}

static void
usage_row(void *arg, const char *tenant, const char *pool, double secs, uint64_t claims)
{
	json_t *a = arg;

	json_array_append_new(a, json_pack("{s:o, s:s, s:f, s:I}", "tenant",
					   tenant && *tenant && strcmp(tenant, "-") != 0
						   ? json_string(tenant)
						   : json_null(),
					   "pool", pool, "claim_seconds", secs, "claims",
					   (json_int_t)claims));
}

static void
h_usage(struct gw_api_req *r, const struct gw_api_req_info *i, void *arg)
{
	struct gw_apiv1 *v = arg;
	const char *tenant = gw_api_query(r, "tenant");
	json_t *rows = json_array();
	struct timespec ts;
	char err[512];
	int64_t since;

	if (parse_since(gw_api_query(r, "since"), &since) < 0) {
		json_decref(rows);
		gw_api_reply_error(r, 400, "bad-request",
				   "since: epoch seconds or an RFC 3339 UTC time");
		return;
	}
	/* A tenant sees its own usage only; an empty filter is none. */
	if (tenant && !*tenant)
		tenant = NULL;
	if (i->tenant)
		tenant = i->tenant;
	if (pool_mgr_usage(v->mgr, tenant, since, usage_row, rows, err, sizeof(err)) < 0) {
		json_decref(rows);
		gw_api_reply_error(r, 500, "internal", "the journal: %s", err);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gw_api_reply_json(r, 200,
			  json_pack("{s:o, s:o, s:o}", "since", time_json(since), "until",
				    time_json((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000),
				    "usage", rows));
}

const struct gw_api_route gw_apiv1_routes[] = {
	{ "POST", "/v1/claims", false, false, h_claim },
	{ "GET", "/v1/sandboxes", false, false, h_list },
	{ "GET", "/v1/sandboxes/{id}", false, false, h_show },
	{ "DELETE", "/v1/sandboxes/{id}", false, false, h_release },
	{ "PUT", "/v1/sandboxes/{id}/credentials", false, false, h_creds },
	{ "POST", "/v1/sandboxes/{id}/exec", false, false, h_exec },
	{ "GET", "/v1/sandboxes/{id}/exec/stream", false, true, gw_wsx_handler },
	{ "GET", "/v1/sandboxes/{id}/files", false, false, h_files_get },
	{ "PUT", "/v1/sandboxes/{id}/files", false, true, h_files_put },
	{ "GET", "/v1/pools", true, false, h_pools_get },
	{ "PUT", "/v1/pools", true, false, h_pools_put },
	{ "GET", "/v1/info", true, false, h_info },
	{ "GET", "/v1/ca.pem", false, false, h_ca_pem },
	{ "GET", "/v1/usage", false, false, h_usage },
	{ "GET", "/metrics", true, false, h_metrics },
	{ NULL, NULL, false, false, NULL },
};

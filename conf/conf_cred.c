/* conf_cred.c: a policy's credentials (conf-schema.h).
 *
 * Each entry is one kind (docs/credentials.md):
 *
 *   header       { host, header, value }             `kind` may be left out
 *   basic        { kind: basic, host, user, password }
 *   placeholder  { kind: placeholder, host, env, value }
 *   query        { kind: query, host, param, value }
 *   sigv4        { kind: sigv4, host, access_key_id, secret }
 *
 * plus `name` (default: the host pattern and what is set, e.g.
 * "api.github.com/authorization") and `cleartext` (default false). The
 * secret must come from ${env:...} or ${file:...}: a literal would be kept
 * wherever the layer is, the state file included. What would let a value
 * change the request's framing or route, or be forged by the guest, is
 * refused here: headers that frame, route or belong to the proxy (Host,
 * Content-Length, Transfer-Encoding, Connection, Upgrade, TE, Trailer,
 * Keep-Alive, Cookie, Proxy-*, pseudo-headers), and values with bytes
 * other than visible ASCII, space and tab, or over CONF_CRED_VALUE_MAX.
 * Messages name the reference, never the value.
 *
 * A tenant brings credentials of the same shapes with a claim (docs/api.md):
 * there the secret is the literal string, never resolved, and the entry is
 * marked `tenant`. A saved layer keeps a tenant entry without its secret
 * ("tenant": true and a "fingerprint"), which reads back `lost`. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conf-schema.h"
#include "conf.h"

/* What a guest may be told to put in a variable: a shell name. */
static bool
env_name_ok(const char *s)
{
	if (!s[0] || isdigit((unsigned char)s[0]) || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

static bool
token_ok(const char *s)
{
	if (!s[0])
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

/* The longest name sluice makes (the host pattern, '/', what is set). */
#define DEFAULT_NAME_MAX CONF_CRED_NAME_MAX

/* A saved layer's name: one given (a token) or one sluice made, which has
 * '/', and may have '*', ':', '[', ']', '$' and '?': visible ASCII, but
 * not what would split the inject= list or a log field. */
static bool
saved_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > DEFAULT_NAME_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || strchr(",=\"\\", *s))
			return false;
	return true;
}

bool
conf_cred_header_forbidden(const char *name)
{
	static const char *const names[] = {
		"host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
		"trailer", "keep-alive", "cookie", NULL,
	};

	if (name[0] == ':' || strncasecmp(name, "proxy-", 6) == 0)
		return true;
	for (const char *const *n = names; *n; n++)
		if (strcasecmp(name, *n) == 0)
			return true;
	return false;
}

int
conf_cred_value_check(const char *v, size_t len)
{
	if (len == 0 || len > CONF_CRED_VALUE_MAX)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (!((ch >= 0x20 && ch < 0x7f) || ch == '\t'))
			return -1;
	}
	return 0;
}

/* Does the secret's text hold a reference (${env:...} or ${file:...}),
 * not only "$${" escapes, which stand for a literal "${"? */
static bool
has_reference(const char *s)
{
	for (; *s; s++) {
		if (s[0] == '$' && s[1] == '$' && s[2] == '{')
			s += 2;
		else if (s[0] == '$' && (strncmp(s + 1, "{env:", 5) == 0 ||
					 strncmp(s + 1, "{file:", 6) == 0))
			return true;
	}
	return false;
}

/* A tenant's secret: the string as it is, no reference resolved. */
static bool
get_literal(struct ctx *x, const struct cy_node *n, const char *s, struct conf_secret *out)
{
	if (!n || n->kind != CY_SCALAR || cs_is_null(n) || n->plain) {
		cs_err_at(x, n, "%s: expected a string", s);
		return false;
	}
	if (conf_cred_value_check(n->str, n->len) < 0) {
		cs_err_at(x, n, "%s: empty, over %u bytes, or has a byte other than visible ASCII, "
			  "space and tab (not shown)", s, CONF_CRED_VALUE_MAX);
		return false;
	}
	out->value = conf_arena_strndup(x->a, n->str, n->len);
	out->len = n->len;
	out->ref = NULL;
	out->pos = cs_pos_of(n);
	return true;
}

/* The secret at key `key` of ci: from a reference, visible, bounded; a
 * tenant's literal. A saved tenant entry has none (it is lost). */
static bool
get_cred_secret(struct ctx *x, const struct cy_node *ci, const char *key, const char *r,
		enum cs_cred_src src, const struct conf_credential *cd, struct conf_secret *out)
{
	const struct cy_node *n = cs_map_get(ci, key);
	char s[PATHSZ];

	cs_pathf(s, r, ".%s", key);
	if (cd->tenant && src == CS_CRED_SAVED) {
		if (n) {
			cs_err_at(x, n, "%s: a tenant's secret is never saved", s);
			return false;
		}
		return true;
	}
	if (src == CS_CRED_TENANT)
		return get_literal(x, n, s, out);
	if (!cs_get_secret(x, n, s, out))
		return false;
	if (!has_reference(out->ref ? out->ref : "")) {
		cs_err_at(x, n, "%s: give the secret as ${env:NAME} or ${file:PATH}: a literal value "
			  "would be kept wherever the layer is (the state file too)", s);
		return false;
	}
	if (conf_cred_value_check(out->value, out->len) < 0) {
		cs_err_at(x, n, "%s: the value of %s is empty, over %u bytes, or has a byte other "
			  "than visible ASCII, space and tab (not shown)", s, out->ref,
			  CONF_CRED_VALUE_MAX);
		return false;
	}
	return true;
}

static bool
get_cred_token(struct ctx *x, const struct cy_node *ci, const char *key, const char *r,
	       const char *noun, char **out)
{
	const struct cy_node *n = cs_map_get(ci, key);
	char s[PATHSZ];

	cs_pathf(s, r, ".%s", key);
	if (!cs_get_str(x, n, s, out))
		return false;
	if (!token_ok(*out)) {
		cs_err_at(x, n, "%s: '%s' is not %s", s, *out, noun);
		return false;
	}
	return true;
}

/* A saved layer's sentinel for a placeholder or sigv4 entry, if it has
 * one (load_one() refused the key outside saved layers). */
static bool
get_sentinel(struct ctx *x, const struct cy_node *ci, const char *r, struct conf_credential *cd)
{
	const struct cy_node *n = cs_map_get(ci, "sentinel");
	char s[PATHSZ], *sv = NULL;

	if (!n)
		return true;
	if (!cs_get_str(x, n, (cs_pathf(s, r, ".sentinel"), s), &sv) || !conf_cred_sentinel_ok(sv)) {
		cs_err_at(x, n, "%s: not a sentinel sluice made", s);
		return false;
	}
	memcpy(cd->sentinel, sv, CONF_SENTINEL_LEN);
	return true;
}

/* One entry at r into cd. */
/* A saved tenant entry's fingerprint, as sluice made it. */
static bool
get_fingerprint(struct ctx *x, const struct cy_node *ci, const char *r, struct conf_credential *cd)
{
	const struct cy_node *n = cs_map_get(ci, "fingerprint");
	char s[PATHSZ], *fp = NULL;

	cs_pathf(s, r, ".fingerprint");
	if (!n) {
		cs_err_at(x, ci, "%s: missing required key 'fingerprint' (a tenant's entry)", r);
		return false;
	}
	if (!cs_get_str(x, n, s, &fp))
		return false;
	if (!conf_cred_fingerprint_ok(fp)) {
		cs_err_at(x, n, "%s: not a fingerprint sluice made", s);
		return false;
	}
	memcpy(cd->fingerprint, fp, CONF_CRED_FP_LEN);
	return true;
}

static bool
load_one(struct ctx *x, const struct cy_node *ci, const char *r, struct conf_credential *cd,
	 enum cs_cred_src src)
{
	static const char *const keys[] = { "name", "kind", "host", "header", "value", "user",
					    "password", "param", "env", "access_key_id", "secret",
					    "cleartext", "sentinel", "tenant", "fingerprint", NULL };
	static const char *const conf_keys[] = { "name", "kind", "host", "header", "value",
						 "user", "password", "param", "env",
						 "access_key_id", "secret", "cleartext",
						 "sentinel", NULL };
	const bool saved = src == CS_CRED_SAVED;
	static const char *const kinds[] = { "header", "basic", "placeholder", "query", "sigv4",
					     NULL };
	/* What each kind needs besides host, and may have. */
	static const char *const need[][3] = {
		[CONF_CRED_HEADER] = { "header", "value", NULL },
		[CONF_CRED_BASIC] = { "user", "password", NULL },
		[CONF_CRED_PLACEHOLDER] = { "env", "value", NULL },
		[CONF_CRED_QUERY] = { "param", "value", NULL },
		[CONF_CRED_SIGV4] = { "access_key_id", "secret", NULL },
	};
	const struct cy_node *n;
	char s[PATHSZ], what[80];
	bool ok = true;
	int v;

	if (!cs_expect_map(x, ci, r, saved ? keys : conf_keys)) {
		if (cs_is_null(ci))
			cs_err_at(x, ci, "%s: expected a mapping, got nothing", r);
		return false;
	}
	cd->pos = cs_pos_of(ci);
	cd->tenant = src == CS_CRED_TENANT;
	if (saved && (n = cs_map_get(ci, "tenant"))) {
		if (!cs_get_bool(x, n, (cs_pathf(s, r, ".tenant"), s), &cd->tenant))
			return false;
	}
	if (saved && cd->tenant) {
		if (!get_fingerprint(x, ci, r, cd))
			return false;
		cd->lost = true;
	} else if (saved && (n = cs_map_get(ci, "fingerprint"))) {
		cs_err_at(x, n, "%s.fingerprint: only a tenant's entry has one", r);
		return false;
	}
	cd->kind = CONF_CRED_HEADER;
	if ((n = cs_map_get(ci, "kind")) && cs_get_enum(x, n, (cs_pathf(s, r, ".kind"), s), kinds, &v))
		cd->kind = (enum conf_cred_kind)v;
	else if (n)
		return false;
	if (!cs_map_get(ci, "host")) {
		cs_err_at(x, ci, "%s: missing required key 'host'", r);
		ok = false;
	}
	for (const char *const *k = need[cd->kind]; *k; k++) {
		/* (a lost tenant entry has no secret: the second key) */
		if (cd->lost && k != need[cd->kind])
			continue;
		if (!cs_map_get(ci, *k)) {
			cs_err_at(x, ci, "%s: missing required key '%s'", r, *k);
			ok = false;
		}
	}
	/* A key of another kind is a mistake worth saying. */
	for (const char *const *k = (const char *const[]){ "header", "value", "user", "password",
							   "param", "env", "access_key_id",
							   "secret", NULL };
	     *k; k++) {
		bool mine = false;

		for (const char *const *m = need[cd->kind]; *m; m++)
			mine |= strcmp(*m, *k) == 0;
		if (!mine && (n = cs_map_get(ci, *k))) {
			cs_err_at(x, n, "%s.%s: not a key of a %s credential", r, *k, kinds[cd->kind]);
			ok = false;
		}
	}
	if ((n = cs_map_get(ci, "sentinel")) && !saved) {
		cs_err_at(x, n, "%s.sentinel: made by sluice for each claim, not configured", r);
		ok = false;
	}
	if (!ok)
		return false;
	ok &= cs_get_hostpat(x, cs_map_get(ci, "host"), (cs_pathf(s, r, ".host"), s), true, &cd->host);
	if ((n = cs_map_get(ci, "cleartext")))
		ok &= cs_get_bool(x, n, (cs_pathf(s, r, ".cleartext"), s), &cd->cleartext);
	switch (cd->kind) {
	case CONF_CRED_HEADER:
		if (!get_cred_token(x, ci, "header", r, "an HTTP header name", &cd->header)) {
			/* (the message says so, in the words tests know) */
			ok = false;
		} else if (conf_cred_header_forbidden(cd->header)) {
			cs_err_at(x, cs_map_get(ci, "header"),
				  "%s.header: %s frames, routes or belongs to the proxy: not settable",
				  r, cd->header);
			ok = false;
		}
		ok &= get_cred_secret(x, ci, "value", r, src, cd, &cd->value);
		snprintf(what, sizeof(what), "%s", cd->header ? cd->header : "?");
		break;
	case CONF_CRED_BASIC:
		n = cs_map_get(ci, "user");
		if (cs_get_str(x, n, (cs_pathf(s, r, ".user"), s), &cd->user) &&
		    (strchr(cd->user, ':') || conf_cred_value_check(cd->user, strlen(cd->user)) < 0)) {
			cs_err_at(x, n, "%s: a user has visible ASCII and no ':'", s);
			ok = false;
		}
		ok &= cd->user != NULL;
		ok &= get_cred_secret(x, ci, "password", r, src, cd, &cd->value);
		snprintf(what, sizeof(what), "authorization");
		break;
	case CONF_CRED_PLACEHOLDER:
		n = cs_map_get(ci, "env");
		if (cs_get_str(x, n, (cs_pathf(s, r, ".env"), s), &cd->env) && !env_name_ok(cd->env)) {
			cs_err_at(x, n, "%s: '%s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, "
				  "at most 64)", s, cd->env);
			ok = false;
		}
		ok &= cd->env != NULL;
		ok &= get_cred_secret(x, ci, "value", r, src, cd, &cd->value);
		snprintf(what, sizeof(what), "$%s", cd->env ? cd->env : "?");
		ok &= get_sentinel(x, ci, r, cd);
		break;
	case CONF_CRED_QUERY:
		ok &= get_cred_token(x, ci, "param", r, "a query parameter name", &cd->param);
		for (const char *q = cd->param; ok && q && *q; q++) {
			/* (a token may hold '&' '#' '+' '%': not in a parameter's name) */
			if (!(isalnum((unsigned char)*q) || strchr("-._~", *q))) {
				cs_err_at(x, cs_map_get(ci, "param"),
					  "%s.param: a query parameter name is A-Z a-z 0-9 - . _ ~", r);
				ok = false;
			}
		}
		ok &= get_cred_secret(x, ci, "value", r, src, cd, &cd->value);
		snprintf(what, sizeof(what), "?%s", cd->param ? cd->param : "?");
		break;
	case CONF_CRED_SIGV4:
		n = cs_map_get(ci, "access_key_id");
		if (cs_get_str(x, n, (cs_pathf(s, r, ".access_key_id"), s), &cd->user)) {
			size_t l = strlen(cd->user);
			bool good = l >= 16 && l <= 128;

			for (size_t b = 0; good && b < l; b++)
				good = isupper((unsigned char)cd->user[b]) || isdigit((unsigned char)cd->user[b]);
			if (!good) {
				cs_err_at(x, n, "%s: an access key id is 16..128 of A-Z and 0-9", s);
				ok = false;
			}
		} else {
			ok = false;
		}
		ok &= get_cred_secret(x, ci, "secret", r, src, cd, &cd->value);
		snprintf(what, sizeof(what), "sigv4");
		ok &= get_sentinel(x, ci, r, cd);
		break;
	}
	if (!ok)
		return false;
	if ((n = cs_map_get(ci, "name"))) {
		if (!cs_get_str(x, n, (cs_pathf(s, r, ".name"), s), &cd->name))
			return false;
		if (saved && !saved_name_ok(cd->name)) {
			cs_err_at(x, n, "%s: not a credential name (visible ASCII, no ',', '=', "
				  "quotes or '\\')", s);
			return false;
		}
		if (!saved && (!token_ok(cd->name) || strchr(cd->name, ',') || strlen(cd->name) > 64)) {
			cs_err_at(x, n, "%s: a name is 1..64 token characters, no ','", s);
			return false;
		}
	} else {
		char def[DEFAULT_NAME_MAX + 1];
		char *p;

		/* the pattern as written, port included: a.com:443 and
		 * a.com:8443 are two credentials */
		if (cd->host.port)
			snprintf(def, sizeof(def), strchr(cd->host.host, ':') ? "[%s%s]:%u/%s"
									: "%s%s:%u/%s",
				 cd->host.wildcard ? "*." : "", cd->host.host,
				 (unsigned)cd->host.port, what);
		else
			snprintf(def, sizeof(def), "%s%s/%s", cd->host.wildcard ? "*." : "",
				 cd->host.host, what);
		for (p = def; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		cd->name = conf_arena_strndup(x->a, def, strlen(def));
	}
	return true;
}

const char *
conf_cred_kind_name(enum conf_cred_kind k)
{
	static const char *const n[] = { "header", "basic", "placeholder", "query", "sigv4" };

	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

bool
conf_cred_sentinel_ok(const char *s)
{
	if (strlen(s) != CONF_SENTINEL_LEN - 1 || strncmp(s, CONF_SENTINEL_PREFIX, 10) != 0)
		return false;
	for (s += 10; *s; s++)
		if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
			return false;
	return true;
}

bool
conf_cred_fingerprint_ok(const char *s)
{
	if (strlen(s) != CONF_CRED_FP_LEN - 1 || strncmp(s, CONF_CRED_FP_PREFIX, 4) != 0 ||
	    s[20] != ':')
		return false;
	for (size_t i = 4; s[i]; i++)
		if (i != 20 && (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])))
			return false;
	return true;
}

void
cs_load_credentials(struct ctx *x, const struct cy_node *cr, const char *q, struct conf_policy *po,
		    enum cs_cred_src src)
{
	size_t k, *item;

	if (!cs_get_seq(x, cr, q, &k))
		return;
	po->credentials = conf_arena_alloc(x->a, k * sizeof(*po->credentials));
	/* which entry of the list each loaded one is (a refused one is left
	 * out), for the position and index a message names */
	item = conf_arena_alloc(x->a, k * sizeof(*item));
	for (size_t j = 0; j < k; j++) {
		char r[PATHSZ];

		cs_pathf(r, q, "[%zu]", j);
		item[po->ncredentials] = j;
		if (load_one(x, cr->items[j], r, &po->credentials[po->ncredentials], src))
			po->ncredentials++;
	}
	/* Names are what inject= and the journal say: one each. */
	for (size_t b = 1; b < po->ncredentials; b++) {
		for (size_t a = 0; a < b; a++) {
			if (strcmp(po->credentials[a].name, po->credentials[b].name) == 0) {
				cs_err_at(x, cr->items[item[b]],
					  "%s[%zu]: a second credential named '%s'", q, item[b],
					  po->credentials[b].name);
				break;
			}
		}
	}
}

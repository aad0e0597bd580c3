/* policy.c: host normalisation and the compiled policy layer. See policy.h.
 *
 * Layout of a compiled policy: every rule of every list (deny, allow,
 * intercept, credentials, the tenant's list) becomes a struct pol_rule keyed
 * by its normalised host (for "*.a.b", by "a.b"). One open-addressing hash
 * table maps each distinct key to the run of its rules. A lookup for
 * "x.a.b" probes "x.a.b" for exact rules, then "a.b" and "b" for wildcard
 * rules. The hash is FNV-1a taken over the key from its last byte to its
 * first, so walking a host right to left yields the hash of every label
 * suffix in one pass.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "addr.h"
#include "conf.h"
#include "policy.h"

#define NAME_MAX_LEN 253
#define LABEL_MAX_LEN 63
/* 253 bytes hold at most 127 labels: one exact probe and 126 suffixes. */
#define MAX_HITS 128

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

enum pol_kind {
	PK_DENY = 0,
	PK_ALLOW,
	PK_INTERCEPT,
	PK_CRED,
	PK_NARROW,
};

struct pol_rule {
	char *key;              /* normalised host; the suffix for a wildcard */
	size_t keylen;
	char *text;             /* as shown in decisions: "*.a.b:443" */
	uint32_t cred;          /* PK_CRED: index into gw_policy.creds */
	uint16_t port;          /* 0: the rule names none */
	uint8_t kind;           /* enum pol_kind */
	bool wildcard;
	struct conf_pos pos;
};

struct pol_node {
	const char *key;        /* NULL: empty slot; borrowed from a rule */
	size_t keylen;
	uint64_t hash;
	uint32_t first;         /* into gw_policy.order */
	uint32_t n;
};

struct gw_policy {
	unsigned refs;          /* atomic */
	char *name;
	enum conf_policy_mode mode;
	bool has_narrow;
	struct pol_rule *rules;
	size_t nrules;
	uint32_t *order;        /* rule indices grouped by node, conf order */
	struct pol_node *table;
	size_t tabsz;           /* a power of two, > 2 × nrules */
	struct conf_credential *creds;
	size_t ncreds;
	struct conf_cidrs allow_private;
	char version[GW_POLICY_VERSION_LEN];
};

struct pol_hit {
	const struct pol_node *node;
	bool exact;
};

/* ---- host normalisation ----------------------------------------------- */

static int norm_fail(char *out, size_t outsz, enum gw_reason *why, enum gw_reason r, int rc)
{
	if (outsz > 0)
		out[0] = '\0';
	*why = r;
	return rc;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int gw_host_normalize(const char *in, size_t len, char *out, size_t outsz,
		      enum gw_reason *why)
{
	struct sockaddr_storage ss;
	size_t i, label = 0;
	int rc;

	*why = GW_R_NONE;
	if (outsz > 0)
		out[0] = '\0';
	if (!in || len == 0)
		return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
	/* userinfo first: "user@host" is the more useful thing to say */
	if (memchr(in, '@', len))
		return norm_fail(out, outsz, why, GW_R_USERINFO, -EINVAL);
	for (i = 0; i < len; i++)
		if ((unsigned char)in[i] >= 0x80)
			return norm_fail(out, outsz, why, GW_R_NON_ASCII_HOST, -EINVAL);

	rc = gw_addr_parse_literal(in, len, &ss);
	if (rc < 0)
		return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
	if (rc == 1) {
		if (gw_addr_format((const struct sockaddr *)&ss, out, outsz) < 0)
			return norm_fail(out, outsz, why, GW_R_INTERNAL, -ENOSPC);
		return 0;
	}

	if (in[len - 1] == '.')
		len--;
	if (len == 0 || len > NAME_MAX_LEN)
		return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
	if (len >= outsz)
		return norm_fail(out, outsz, why, GW_R_INTERNAL, -ENOSPC);
	for (i = 0; i < len; i++) {
		char c = in[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0 || out[i - 1] == '-')
				return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
			label = 0;
		} else if (name_char(c)) {
			if (c == '-' && label == 0)
				return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
			if (++label > LABEL_MAX_LEN)
				return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
		} else {
			return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
		}
		out[i] = c;
	}
	if (label == 0 || out[len - 1] == '-')
		return norm_fail(out, outsz, why, GW_R_BAD_HOST, -EINVAL);
	out[len] = '\0';
	return 0;
}

/* ---- hashing and the table -------------------------------------------- */

static uint64_t rhash_step(uint64_t h, char c)
{
	return (h ^ (unsigned char)c) * FNV_PRIME;
}

/* FNV-1a over s, last byte first (see the top of the file). */
static uint64_t rhash(const char *s, size_t n)
{
	uint64_t h = FNV_OFFSET;

	while (n > 0)
		h = rhash_step(h, s[--n]);
	return h;
}

static const struct pol_node *table_find(const struct gw_policy *p, const char *key,
					 size_t len, uint64_t h)
{
	size_t mask = p->tabsz - 1, i;

	for (i = (size_t)h & mask;; i = (i + 1) & mask) {
		const struct pol_node *n = &p->table[i];

		if (!n->key)
			return NULL;    /* the table is never full: tabsz > 2 × rules */
		if (n->hash == h && n->keylen == len && memcmp(n->key, key, len) == 0)
			return n;
	}
}

static struct pol_node *table_insert(struct gw_policy *p, const char *key, size_t len)
{
	uint64_t h = rhash(key, len);
	size_t mask = p->tabsz - 1, i;

	for (i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct pol_node *n = &p->table[i];

		if (!n->key) {
			n->key = key;
			n->keylen = len;
			n->hash = h;
			return n;
		}
		if (n->hash == h && n->keylen == len && memcmp(n->key, key, len) == 0)
			return n;
	}
}

/* ---- matching --------------------------------------------------------- */

/* Does rule r, found by an exact probe (exact) or a suffix probe, apply to
 * port? A wildcard never matches its own apex: the apex is an exact probe. */
static bool rule_hits(const struct pol_rule *r, bool exact, uint16_t port)
{
	if (r->wildcard == exact)
		return false;
	if (r->port)
		return r->port == port;
	if (r->kind == PK_DENY)
		return true;
	return port == 80 || port == 443;
}

/* Collects the nodes that may hold rules for host, most specific first:
 * the exact key, then label suffixes from the longest. IP literals get the
 * exact probe only. Returns how many. */
static size_t collect(const struct gw_policy *p, const char *host, size_t len, bool ip,
		      struct pol_hit hits[MAX_HITS])
{
	struct pol_hit rev[MAX_HITS];
	uint64_t h = FNV_OFFSET;
	size_t n = 0, i, j;

	for (i = len; i > 0; i--) {
		const struct pol_node *node = NULL;
		bool exact = false;

		h = rhash_step(h, host[i - 1]);
		j = i - 1;              /* h is now the hash of host + j */
		if (j == 0) {
			node = table_find(p, host, len, h);
			exact = true;
		} else if (!ip && host[j - 1] == '.') {
			node = table_find(p, host + j, len - j, h);
		}
		if (node && n < MAX_HITS) {
			rev[n].node = node;
			rev[n].exact = exact;
			n++;
		}
	}
	for (i = 0; i < n; i++)
		hits[i] = rev[n - 1 - i];
	return n;
}

static const struct pol_rule *find_rule(const struct gw_policy *p, const struct pol_hit *hits,
					size_t nhits, enum pol_kind kind, uint16_t port)
{
	size_t i, k;

	for (i = 0; i < nhits; i++) {
		const struct pol_node *node = hits[i].node;

		for (k = 0; k < node->n; k++) {
			const struct pol_rule *r = &p->rules[p->order[node->first + k]];

			if (r->kind == kind && rule_hits(r, hits[i].exact, port))
				return r;
		}
	}
	return NULL;
}

/* Deny rules naming an IPv4 address also catch IPv6 spellings that embed
 * it (NAT64, 6to4, ...): those reach the same host. */
static const struct pol_rule *find_embedded_deny(const struct gw_policy *p,
						 const struct sockaddr_storage *ss, uint16_t port)
{
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
	struct in_addr v4[GW_ADDR_EMBED_MAX];
	size_t n, i;

	if (ss->ss_family != AF_INET6)
		return NULL;
	n = gw_addr_embedded_v4(&sin6->sin6_addr, v4);
	for (i = 0; i < n; i++) {
		char text[INET_ADDRSTRLEN];
		struct pol_hit hit;
		const struct pol_rule *r;
		size_t len;

		if (!inet_ntop(AF_INET, &v4[i], text, sizeof(text)))
			continue;
		len = strlen(text);
		hit.node = table_find(p, text, len, rhash(text, len));
		hit.exact = true;
		if (!hit.node)
			continue;
		r = find_rule(p, &hit, 1, PK_DENY, port);
		if (r)
			return r;
	}
	return NULL;
}

/* Checks that host is in normal form; fills len and ip. */
static int host_ok(const char *host, size_t *len, struct sockaddr_storage *ss, bool *ip,
		   enum gw_reason *why)
{
	char buf[GW_HOST_MAX];
	int rc;

	*why = GW_R_BAD_HOST;
	if (!host)
		return -EINVAL;
	*len = strnlen(host, GW_HOST_MAX);
	if (*len >= GW_HOST_MAX)
		return -EINVAL;
	if (gw_host_normalize(host, *len, buf, sizeof(buf), why) < 0)
		return -EINVAL;
	if (strcmp(buf, host) != 0) {
		/* a caller skipped normalisation: an uppercase name would miss
		 * its deny rule; refuse rather than guess */
		*why = GW_R_BAD_HOST;
		return -EINVAL;
	}
	rc = gw_addr_parse_literal(host, *len, ss);
	*ip = rc == 1;
	*why = GW_R_NONE;
	return 0;
}

/* ---- decisions -------------------------------------------------------- */

static int refuse(struct gw_policy_decision *d, enum gw_reason why)
{
	d->allow = false;
	d->report_only = false;
	d->reason = why;
	return -EACCES;
}

static int refuse_rules(const struct gw_policy *p, struct gw_policy_decision *d,
			enum gw_reason why, const struct pol_rule *r, bool by_tenant)
{
	d->reason = why;
	d->by_tenant = by_tenant;
	if (r) {
		d->rule = r->text;
		d->pos = r->pos;
	}
	if (p->mode == CONF_POLICY_REPORT) {
		d->allow = true;
		d->report_only = true;
		return 0;
	}
	d->allow = false;
	return -EACCES;
}

int gw_policy_check(const struct gw_policy *p, const char *host, uint16_t port,
		    struct gw_policy_decision *d)
{
	struct pol_hit hits[MAX_HITS];
	struct sockaddr_storage ss;
	const struct pol_rule *r;
	enum gw_reason why;
	size_t len, nhits;
	bool ip;

	memset(d, 0, sizeof(*d));
	d->reason = GW_R_NONE;
	if (!p)
		return refuse(d, GW_R_INTERNAL);
	if (host_ok(host, &len, &ss, &ip, &why) < 0)
		return refuse(d, why);
	if (port == 0)
		return refuse(d, GW_R_BAD_PORT);

	nhits = collect(p, host, len, ip, hits);
	r = find_rule(p, hits, nhits, PK_DENY, port);
	if (!r && ip)
		r = find_embedded_deny(p, &ss, port);
	if (r)
		return refuse_rules(p, d, GW_R_DENIED, r, false);

	r = find_rule(p, hits, nhits, PK_ALLOW, port);
	if (!r)
		return refuse_rules(p, d, GW_R_NOT_ALLOWED, NULL, false);
	if (p->has_narrow && !find_rule(p, hits, nhits, PK_NARROW, port))
		return refuse_rules(p, d, GW_R_NOT_ALLOWED, NULL, true);

	d->allow = true;
	d->rule = r->text;
	d->pos = r->pos;
	return 0;
}

int gw_policy_check_name(const struct gw_policy *p, const char *host,
			 struct gw_policy_decision *d)
{
	struct pol_hit hits[MAX_HITS];
	struct sockaddr_storage ss;
	enum gw_reason why;
	size_t len, nhits;
	bool ip;

	memset(d, 0, sizeof(*d));
	if (!p)
		return refuse(d, GW_R_INTERNAL);
	if (host_ok(host, &len, &ss, &ip, &why) < 0)
		return refuse(d, why);
	if (ip)
		return refuse(d, GW_R_BAD_HOST);        /* an address is no name */
	/* The ports a rule without one stands for, then every port an allow
	 * rule that matches the name gives: the name is allowed if any of
	 * them is (the doors check the port itself). */
	if (gw_policy_check(p, host, 443, d) == 0 || gw_policy_check(p, host, 80, d) == 0)
		return 0;
	nhits = collect(p, host, len, false, hits);
	for (size_t i = 0; i < nhits; i++) {
		const struct pol_node *node = hits[i].node;

		for (size_t k = 0; k < node->n; k++) {
			const struct pol_rule *r = &p->rules[p->order[node->first + k]];
			struct gw_policy_decision e;

			if (r->kind == PK_ALLOW && r->port && r->wildcard != hits[i].exact &&
			    gw_policy_check(p, host, r->port, &e) == 0) {
				*d = e;
				return 0;
			}
		}
	}
	/* (d: the refusal for 80, whose reason is the one for 443 too unless
	 * a rule names a port) */
	return gw_policy_check(p, host, 443, d);
}

int gw_policy_check_addr(const struct gw_policy *p, const struct sockaddr *sa,
			 struct gw_policy_decision *d)
{
	enum gw_reason why;

	memset(d, 0, sizeof(*d));
	d->reason = GW_R_NONE;
	if (!p)
		return refuse(d, GW_R_INTERNAL);
	if (gw_addr_check(sa, &p->allow_private, &why) < 0)
		return refuse(d, why);
	d->allow = true;
	return 0;
}

bool gw_policy_intercepts(const struct gw_policy *p, const char *host, uint16_t port)
{
	struct pol_hit hits[MAX_HITS];
	struct sockaddr_storage ss;
	enum gw_reason why;
	size_t len, nhits;
	bool ip;

	if (!p || port == 0 || host_ok(host, &len, &ss, &ip, &why) < 0)
		return false;
	nhits = collect(p, host, len, ip, hits);
	/* A host with credentials is intercepted: they can only be added to
	 * traffic sluice encrypts itself. */
	return find_rule(p, hits, nhits, PK_INTERCEPT, port) != NULL ||
	       find_rule(p, hits, nhits, PK_CRED, port) != NULL;
}

/* What a credential sets, for "one per header" (and per parameter, per
 * placeholder): Basic and an Authorization header are the same slot. */
static const char *cred_slot(const struct conf_credential *c, char *buf, size_t sz)
{
	switch (c->kind) {
	case CONF_CRED_BASIC:
	case CONF_CRED_SIGV4:
		return "authorization";
	case CONF_CRED_QUERY:
		snprintf(buf, sz, "?%s", c->param);
		return buf;
	case CONF_CRED_PLACEHOLDER:
		snprintf(buf, sz, "$%s", c->env);
		return buf;
	case CONF_CRED_HEADER:
	default:
		return c->header ? c->header : "";
	}
}

/* Was a credential with r's slot already given by a match that comes
 * before (hit hi, rule ki) in specificity order? */
static bool header_seen(const struct gw_policy *p, const struct pol_hit *hits, size_t hi,
			size_t ki, uint16_t port, const char *header)
{
	char b[320];

	size_t i, k;

	for (i = 0; i <= hi; i++) {
		const struct pol_node *node = hits[i].node;
		size_t end = i == hi ? ki : node->n;

		for (k = 0; k < end; k++) {
			const struct pol_rule *r = &p->rules[p->order[node->first + k]];

			if (r->kind == PK_CRED && rule_hits(r, hits[i].exact, port) &&
			    strcasecmp(cred_slot(&p->creds[r->cred], b, sizeof(b)), header) == 0)
				return true;
		}
	}
	return false;
}

int gw_policy_credentials(const struct gw_policy *p, const char *host, uint16_t port,
			  gw_policy_cred_cb cb, void *arg)
{
	struct pol_hit hits[MAX_HITS];
	struct sockaddr_storage ss;
	enum gw_reason why;
	size_t len, nhits, i, k;
	char slot[320];
	bool ip;
	int rc;

	if (!p || !cb || port == 0 || host_ok(host, &len, &ss, &ip, &why) < 0)
		return 0;
	nhits = collect(p, host, len, ip, hits);
	for (i = 0; i < nhits; i++) {
		const struct pol_node *node = hits[i].node;

		for (k = 0; k < node->n; k++) {
			const struct pol_rule *r = &p->rules[p->order[node->first + k]];
			const struct conf_credential *c;

			if (r->kind != PK_CRED || !rule_hits(r, hits[i].exact, port))
				continue;
			c = &p->creds[r->cred];
			if (header_seen(p, hits, i, k, port, cred_slot(c, slot, sizeof(slot))))
				continue;
			rc = cb(c, arg);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

void gw_policy_placeholders(const struct gw_policy *p,
			    void (*fn)(void *arg, const char *env, const char *sentinel), void *arg)
{
	for (size_t i = 0; p && i < p->ncreds; i++) {
		const struct conf_credential *c = &p->creds[i];
		char akid[GW_POLICY_AKID_LEN];

		if (c->kind == CONF_CRED_PLACEHOLDER) {
			fn(arg, c->env, c->sentinel);
		} else if (c->kind == CONF_CRED_SIGV4) {
			gw_policy_sigv4_akid(c, akid);
			fn(arg, "AWS_ACCESS_KEY_ID", akid);
			fn(arg, "AWS_SECRET_ACCESS_KEY", c->sentinel);
		}
	}
}

void gw_policy_sigv4_akid(const struct conf_credential *c, char out[GW_POLICY_AKID_LEN])
{
	/* "SLUICE" and the sentinel's first 14 hex digits, uppercase: 20
	 * characters, the shape SDKs expect of an access key id. */
	memcpy(out, "SLUICE", 6);
	for (size_t i = 0; i < 14; i++) {
		char ch = c->sentinel[10 + i];

		out[6 + i] = ch >= 'a' && ch <= 'f' ? (char)(ch - 'a' + 'A') : ch;
	}
	out[20] = '\0';
}

const struct conf_credential *gw_policy_sentinel(const struct gw_policy *p, const char *s,
						 size_t n)
{
	for (size_t i = 0; p && i < p->ncreds; i++)
		if (p->creds[i].kind == CONF_CRED_PLACEHOLDER && n == CONF_SENTINEL_LEN - 1 &&
		    memcmp(p->creds[i].sentinel, s, n) == 0)
			return &p->creds[i];
	return NULL;
}

/* ---- accessors -------------------------------------------------------- */

const char *gw_policy_version(const struct gw_policy *p)
{
	return p ? p->version : "";
}

const char *gw_policy_name(const struct gw_policy *p)
{
	return p && p->name ? p->name : "";
}

enum conf_policy_mode gw_policy_mode(const struct gw_policy *p)
{
	return p ? p->mode : CONF_POLICY_ENFORCE;
}

const struct conf_cidrs *gw_policy_allow_private(const struct gw_policy *p)
{
	return p ? &p->allow_private : NULL;
}

/* ---- lifetime --------------------------------------------------------- */

static void policy_destroy(struct gw_policy *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->nrules; i++) {
		free(p->rules[i].key);
		free(p->rules[i].text);
	}
	for (i = 0; i < p->ncreds; i++) {
		struct conf_credential *c = &p->creds[i];

		if (c->value.value) {
			explicit_bzero(c->value.value, c->value.len);
			free(c->value.value);
		}
		free(c->value.ref);
		free(c->header);
		free(c->host.host);
		free(c->name);
		free(c->user);
		free(c->param);
		free(c->env);
	}
	free(p->creds);
	free(p->rules);
	free(p->order);
	free(p->table);
	free(p->allow_private.v);
	free(p->name);
	free(p);
}

struct gw_policy *gw_policy_ref(struct gw_policy *p)
{
	if (p)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	return p;
}

void gw_policy_unref(struct gw_policy *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		policy_destroy(p);
}

void gw_policy_free(struct gw_policy *p)
{
	gw_policy_unref(p);
}

/* ---- compiling -------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Adds one rule from a host pattern. -EINVAL for a host that does not
 * normalise or a wildcard over an IP literal; -ENOMEM. */
static int add_rule(struct gw_policy *p, enum pol_kind kind, const struct conf_hostpat *hp,
		    uint32_t cred)
{
	struct pol_rule *r = &p->rules[p->nrules];
	struct sockaddr_storage ss;
	char key[GW_HOST_MAX];
	enum gw_reason why;
	const char *h;
	size_t hlen;
	bool v6 = false;
	int n;

	if (!hp->host)
		return -EINVAL;
	h = hp->host;
	hlen = strlen(h);
	if (gw_host_normalize(h, hlen, key, sizeof(key), &why) < 0)
		return -EINVAL;
	if (gw_addr_parse_literal(key, strlen(key), &ss) == 1) {
		if (hp->wildcard)
			return -EINVAL;
		v6 = ss.ss_family == AF_INET6;
	}

	memset(r, 0, sizeof(*r));
	r->kind = (uint8_t)kind;
	r->wildcard = hp->wildcard;
	r->port = hp->port;
	r->cred = cred;
	r->pos = hp->pos;
	r->keylen = strlen(key);
	r->key = strdup(key);
	if (!r->key)
		return -ENOMEM;
	p->nrules++;            /* from here policy_destroy() frees r */
	if (hp->port && v6)
		n = asprintf(&r->text, "[%s]:%u", key, (unsigned)hp->port);
	else if (hp->port)
		n = asprintf(&r->text, "%s%s:%u", hp->wildcard ? "*." : "", key,
			     (unsigned)hp->port);
	else
		n = asprintf(&r->text, "%s%s", hp->wildcard ? "*." : "", key);
	if (n < 0) {
		r->text = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int add_list(struct gw_policy *p, enum pol_kind kind, const struct conf_hostpats *l)
{
	size_t i;
	int rc;

	if (!l || (l->n > 0 && !l->v))
		return l ? -EINVAL : 0;
	for (i = 0; i < l->n; i++) {
		rc = add_rule(p, kind, &l->v[i], 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* What each kind needs (conf_cred.c made sure; a caller that is not conf/
 * might not have). */
static bool cred_complete(const struct conf_credential *c)
{
	/* (a lost tenant credential is kept without its value) */
	if (!c->name || (!c->value.value && !c->lost) || (c->lost && !c->tenant))
		return false;
	switch (c->kind) {
	case CONF_CRED_HEADER:
		return c->header && c->header[0];
	case CONF_CRED_BASIC:
	case CONF_CRED_SIGV4:
		return c->user != NULL;
	case CONF_CRED_QUERY:
		return c->param && c->param[0];
	case CONF_CRED_PLACEHOLDER:
		return c->env && c->env[0];
	}
	return false;
}

/* n random bytes. 0 or -EIO. */
static int fill_random(unsigned char *r, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = getrandom(r + got, n - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		got += (size_t)k;
	}
	return 0;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* CONF_SENTINEL_PREFIX and 128 random bits in lowercase hex. */
static int make_sentinel(char out[CONF_SENTINEL_LEN])
{
	unsigned char r[16];

	if (fill_random(r, sizeof(r)) < 0)
		return -EIO;
	memcpy(out, CONF_SENTINEL_PREFIX, 10);
	hex(r, sizeof(r), out + 10);
	return 0;
}

/* A tenant credential's fingerprint (CONF_CRED_FP_LEN): salted, so that the
 * state file and the journal, which keep it, do not let a guessed value be
 * checked against every claim at once. The salt of `salt_of` (a
 * fingerprint) is kept when given: the same value supplied again gives the
 * same fingerprint, and the layer the same version. */
static int make_fingerprint(const struct conf_credential *c, const char *salt_of,
			    char out[CONF_CRED_FP_LEN])
{
	unsigned char salt[8], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char salthex[17];
	EVP_MD_CTX *h;
	int ok;

	if (salt_of && conf_cred_fingerprint_ok(salt_of)) {
		memcpy(salthex, salt_of + 4, 16);
		salthex[16] = '\0';
	} else {
		if (fill_random(salt, sizeof(salt)) < 0)
			return -EIO;
		hex(salt, sizeof(salt), salthex);
	}
	if (!(h = EVP_MD_CTX_new()))
		return -ENOMEM;
	ok = EVP_DigestInit_ex(h, EVP_sha256(), NULL) && EVP_DigestUpdate(h, salthex, 16) &&
	     EVP_DigestUpdate(h, c->value.value, c->value.len) && EVP_DigestFinal_ex(h, md, &mdlen);
	EVP_MD_CTX_free(h);
	if (!ok || mdlen < 16)
		return -EIO;
	memcpy(out, CONF_CRED_FP_PREFIX, 4);
	memcpy(out + 4, salthex, 16);
	out[20] = ':';
	hex(md, 16, out + 21);
	explicit_bzero(md, sizeof(md));
	return 0;
}

/* prev's tenant credential named like c, of its kind, or NULL. */
static const struct conf_credential *prev_tenant(const struct gw_policy *prev,
						 const struct conf_credential *c)
{
	for (size_t i = 0; prev && i < prev->ncreds; i++) {
		const struct conf_credential *o = &prev->creds[i];

		if (o->tenant && o->kind == c->kind && strcmp(o->name, c->name) == 0 &&
		    (c->kind != CONF_CRED_PLACEHOLDER || strcmp(o->env, c->env) == 0))
			return o;
	}
	return NULL;
}

/* Appends n credentials of v to p->creds (room made by the caller). A
 * tenant's takes the sentinel and the fingerprint's salt of prev's
 * credential of the same name, kind (and variable), if any: the guest
 * keeps the sentinel it was given. */
static int copy_creds(struct gw_policy *p, const struct conf_credential *v, size_t n,
		      const struct gw_policy *prev)
{
	size_t i;
	int rc;

	if (n == 0)
		return 0;
	if (!v)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		const struct conf_credential *src = &v[i];
		const struct conf_credential *was = src->tenant ? prev_tenant(prev, src) : NULL;
		struct conf_credential *c = &p->creds[p->ncreds];
		uint32_t idx = (uint32_t)p->ncreds;
		struct pol_rule *r;

		if (!cred_complete(src))
			return -EINVAL;
		for (size_t k = 0; k < p->ncreds; k++)
			if (strcmp(p->creds[k].name, src->name) == 0)
				return -EEXIST;
		p->ncreds++;    /* from here policy_destroy() frees c */
		c->tenant = src->tenant;
		c->lost = src->lost;
		memcpy(c->fingerprint, src->fingerprint, sizeof(c->fingerprint));
		c->pos = src->pos;
		c->kind = src->kind;
		c->cleartext = src->cleartext;
		c->host = src->host;
		c->host.host = NULL;
		c->value.len = src->value.len;
		c->value.pos = src->value.pos;
		c->name = dup_or_null(src->name);
		c->header = dup_or_null(src->header);
		c->user = dup_or_null(src->user);
		c->param = dup_or_null(src->param);
		c->env = dup_or_null(src->env);
		c->value.ref = dup_or_null(src->value.ref);
		if (!c->name || (src->header && !c->header) || (src->user && !c->user) ||
		    (src->param && !c->param) || (src->env && !c->env) ||
		    (src->value.ref && !c->value.ref))
			return -ENOMEM;
		/* A placeholder's sentinel: kept from a saved layer (the guest
		 * holds it), else made here, for this layer alone. */
		if (c->kind == CONF_CRED_PLACEHOLDER || c->kind == CONF_CRED_SIGV4) {
			if (src->sentinel[0])
				memcpy(c->sentinel, src->sentinel, sizeof(c->sentinel));
			else if (was && was->sentinel[0])
				memcpy(c->sentinel, was->sentinel, sizeof(c->sentinel));
			else if (make_sentinel(c->sentinel) < 0)
				return -EIO;
		}
		if (src->value.value) {
			c->value.value = malloc(src->value.len + 1);
			if (!c->value.value)
				return -ENOMEM;
			/* out of swap where the process may lock memory */
			(void)mlock(c->value.value, src->value.len + 1);
			memcpy(c->value.value, src->value.value, src->value.len);
			c->value.value[src->value.len] = '\0';
			if (c->tenant && !c->fingerprint[0] &&
			    make_fingerprint(c, was ? was->fingerprint : NULL, c->fingerprint) < 0)
				return -EIO;
		}
		rc = add_rule(p, PK_CRED, &src->host, idx);
		if (rc < 0)
			return rc;
		r = &p->rules[p->nrules - 1];
		c->host.host = strdup(r->key);  /* normalised, like the rule */
		if (!c->host.host)
			return -ENOMEM;
	}
	return 0;
}

static int build_table(struct gw_policy *p)
{
	struct pol_node **of;
	size_t i, sum = 0;

	p->tabsz = 16;
	while (p->tabsz <= 2 * p->nrules)
		p->tabsz *= 2;
	p->table = calloc(p->tabsz, sizeof(*p->table));
	p->order = calloc(p->nrules ? p->nrules : 1, sizeof(*p->order));
	of = calloc(p->nrules ? p->nrules : 1, sizeof(*of));
	if (!p->table || !p->order || !of) {
		free(of);
		return -ENOMEM;
	}
	for (i = 0; i < p->nrules; i++) {
		of[i] = table_insert(p, p->rules[i].key, p->rules[i].keylen);
		of[i]->n++;
	}
	for (i = 0; i < p->tabsz; i++) {
		p->table[i].first = (uint32_t)sum;
		sum += p->table[i].n;
		p->table[i].n = 0;
	}
	for (i = 0; i < p->nrules; i++)
		p->order[of[i]->first + of[i]->n++] = (uint32_t)i;
	free(of);
	return 0;
}

/* ---- the version ------------------------------------------------------ */

struct strv {
	char **v;
	size_t n;
	size_t cap;
};

static int strv_add(struct strv *s, char *item)
{
	if (!item)
		return -ENOMEM;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		char **v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			free(item);
			return -ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = item;
	return 0;
}

/* asprintf() that hands back NULL on failure */
static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, f);
	n = vasprintf(&s, f, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* c's network address as text, host bits masked: 10.1.0.0/8 and 10.0.0.0/8
 * are one range. -EINVAL for a family or prefix that is no CIDR. */
static int cidr_net(const struct conf_cidr *c, char text[INET6_ADDRSTRLEN])
{
	uint8_t a[16] = { 0 };
	unsigned bits = c->family == AF_INET ? 32 : 128, i;

	if ((c->family != AF_INET && c->family != AF_INET6) || c->prefix > bits)
		return -EINVAL;
	for (i = 0; i < bits / 8; i++) {
		unsigned keep = c->prefix >= 8 * (i + 1) ? 8 :
				c->prefix > 8 * i ? c->prefix - 8 * i : 0;

		a[i] = (uint8_t)(c->addr[i] & (0xff00 >> keep));
	}
	if (!inet_ntop(c->family, a, text, INET6_ADDRSTRLEN))
		return -EINVAL;
	return 0;
}

static char *cidr_item(const struct conf_cidr *c)
{
	char text[INET6_ADDRSTRLEN];

	if (cidr_net(c, text) < 0)
		return fmt("P ? %d %u", c->family, (unsigned)c->prefix);
	return fmt("P %s/%u", text, (unsigned)c->prefix);
}

/* Items are length-prefixed so that no text can imitate another item. */
static int compute_version(struct gw_policy *p)
{
	static const char tags[] = { [PK_DENY] = 'D', [PK_ALLOW] = 'A', [PK_INTERCEPT] = 'I',
				     [PK_CRED] = 'C', [PK_NARROW] = 'N' };
	struct strv s = { 0 };
	uint64_t h = FNV_OFFSET;
	size_t i, k;
	int rc = 0;

	/* "V": the serialisation's own version, bumped if it changes */
	rc = strv_add(&s, fmt("V 1"));
	if (rc == 0)
		rc = strv_add(&s, fmt("M %s", p->mode == CONF_POLICY_REPORT ? "report" : "enforce"));
	if (rc == 0)
		rc = strv_add(&s, fmt("T %s", p->has_narrow ? "narrowed" : "open"));
	for (i = 0; rc == 0 && i < p->nrules; i++) {
		const struct pol_rule *r = &p->rules[i];

		if (r->kind == PK_CRED) {
			const struct conf_credential *c = &p->creds[r->cred];
			/* a tenant's value has no reference: its fingerprint
			 * stands for it */
			const char *ref = c->tenant ? c->fingerprint : c->value.ref ? c->value.ref : "";
			char sb[320];
			char *hdr = strdup(cred_slot(c, sb, sizeof(sb)));

			if (!hdr) {
				rc = -ENOMEM;
				break;
			}
			for (k = 0; hdr[k]; k++)
				if (hdr[k] >= 'A' && hdr[k] <= 'Z')
					hdr[k] = (char)(hdr[k] - 'A' + 'a');
			/* (the sentinel is each claim's own: not a rule) */
			rc = strv_add(&s, fmt("C %d %u %zu:%s %zu:%s %zu:%s %d %d %zu:%s %zu:%s",
					      r->wildcard, (unsigned)r->port, r->keylen, r->key,
					      strlen(hdr), hdr, strlen(ref), ref,
					      (int)c->kind + (c->tenant ? 100 : 0),
					      (int)c->cleartext, strlen(c->name), c->name,
					      c->user ? strlen(c->user) : 0, c->user ? c->user : ""));
			free(hdr);
		} else {
			rc = strv_add(&s, fmt("%c %d %u %zu:%s", tags[r->kind], r->wildcard,
					      (unsigned)r->port, r->keylen, r->key));
		}
	}
	for (i = 0; rc == 0 && i < p->allow_private.n; i++)
		rc = strv_add(&s, cidr_item(&p->allow_private.v[i]));

	if (rc == 0) {
		qsort(s.v, s.n, sizeof(*s.v), cmp_str);
		for (i = 0; i < s.n; i++) {
			const char *c;

			if (i > 0 && strcmp(s.v[i], s.v[i - 1]) == 0)
				continue;       /* duplicates change nothing */
			for (c = s.v[i]; *c; c++)
				h = (h ^ (unsigned char)*c) * FNV_PRIME;
			h = (h ^ '\n') * FNV_PRIME;
		}
		snprintf(p->version, sizeof(p->version), "%016" PRIx64, h);
	}
	for (i = 0; i < s.n; i++)
		free(s.v[i]);
	free(s.v);
	return rc;
}

/* gw_policy_new() with a tenant's credentials after the policy's, and
 * prev, a layer whose tenant credentials lend their sentinels and salts
 * to the same-named ones (NULL: none). */
static struct gw_policy *policy_new(const struct conf_policy *cp, const struct conf_hostpats *narrow,
				    const struct conf_credential *tv, size_t tn,
				    const struct gw_policy *prev)
{
	struct gw_policy *p;
	size_t total;
	int rc;

	if (!cp || tn > CONF_TENANT_CREDS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	total = cp->allow.n + cp->deny.n + cp->intercept.n + cp->ncredentials + tn +
		(narrow ? narrow->n : 0);
	if (total > UINT32_MAX / 4) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->refs = 1;
	p->mode = cp->mode;
	p->has_narrow = narrow != NULL;
	p->name = strdup(cp->name ? cp->name : "");
	p->rules = calloc(total ? total : 1, sizeof(*p->rules));
	if (!p->name || !p->rules) {
		rc = -ENOMEM;
		goto out;
	}
	if (cp->allow_private.n > 0) {
		if (!cp->allow_private.v) {
			rc = -EINVAL;
			goto out;
		}
		p->allow_private.v = calloc(cp->allow_private.n, sizeof(*p->allow_private.v));
		if (!p->allow_private.v) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(p->allow_private.v, cp->allow_private.v,
		       cp->allow_private.n * sizeof(*p->allow_private.v));
		p->allow_private.n = cp->allow_private.n;
	}

	rc = add_list(p, PK_DENY, &cp->deny);
	if (rc == 0)
		rc = add_list(p, PK_ALLOW, &cp->allow);
	if (rc == 0)
		rc = add_list(p, PK_INTERCEPT, &cp->intercept);
	if (rc == 0 && cp->ncredentials + tn > 0 &&
	    !(p->creds = calloc(cp->ncredentials + tn, sizeof(*p->creds))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = copy_creds(p, cp->credentials, cp->ncredentials, prev);
	if (rc == 0)
		rc = copy_creds(p, tv, tn, prev);
	if (rc == 0)
		rc = add_list(p, PK_NARROW, narrow);
	if (rc == 0)
		rc = build_table(p);
	if (rc == 0)
		rc = compute_version(p);
out:
	if (rc < 0) {
		policy_destroy(p);
		errno = -rc;
		return NULL;
	}
	return p;
}

struct gw_policy *gw_policy_new(const struct conf_policy *cp, const struct conf_hostpats *narrow)
{
	return policy_new(cp, narrow, NULL, 0, NULL);
}

/* The reason a layer did not compile, in words. */
static const char *compile_error(int e)
{
	return e == EINVAL ? "a host pattern does not normalise"
	       : e == EEXIST ? "two credentials have one name"
			     : strerror(e);
}

struct gw_policy *
gw_policy_layer(const struct conf *c, const char *policy, const struct conf_tenant *t,
		const struct conf_creds *tc, char *err, size_t errsz)
{
	const struct conf_policy *cp = policy ? conf_policy_find(c, policy) : NULL;
	struct gw_policy *l;

	if (!cp) {
		snprintf(err, errsz, "no policy named \"%s\"", policy ? policy : "");
		errno = ENOENT;
		return NULL;
	}
	/* The rule: the policy, narrowed by the tenant's egress list when the
	 * tenant has one (an empty list allows nothing); no tenant or no
	 * list, no narrowing. */
	l = policy_new(cp, t && t->has_egress ? &t->egress : NULL, tc ? tc->v : NULL,
		       tc ? tc->n : 0, NULL);
	if (!l) {
		int e = errno;

		snprintf(err, errsz, "cannot compile policy %s%s%s: %s", cp->name,
			 t ? " for tenant " : "", t ? t->name : "", compile_error(e));
		errno = e;
	}
	return l;
}

/* A rule's host pattern again, as conf/ gives them (IPv6 in brackets:
 * the key is the normalised address). */
static int rule_pat(const struct pol_rule *r, struct conf_hostpat *out)
{
	out->wildcard = r->wildcard;
	out->port = r->port;
	out->pos = r->pos;
	if (strchr(r->key, ':'))
		return asprintf(&out->host, "[%s]", r->key) < 0 ? -ENOMEM : 0;
	out->host = strdup(r->key);
	return out->host ? 0 : -ENOMEM;
}

struct gw_policy *
gw_policy_with_tenant(const struct gw_policy *old, const struct conf_creds *tc, char *err,
		      size_t errsz)
{
	struct conf_policy cp = { 0 };
	struct conf_hostpats lists[PK_NARROW + 1] = { { 0 } };
	struct conf_credential *pc = NULL;
	struct gw_policy *l = NULL;
	int e = ENOMEM;

	/* The policy's part of old as conf/ would give it: its rules and its
	 * own credentials, values included (old holds them), so that a change
	 * of the configuration since the claim changes nothing here. */
	for (size_t k = 0; k <= PK_NARROW; k++)
		if (!(lists[k].v = calloc(old->nrules + 1, sizeof(*lists[k].v))))
			goto out;
	if (!(pc = calloc(old->ncreds + 1, sizeof(*pc))))
		goto out;
	for (size_t i = 0; i < old->nrules; i++) {
		const struct pol_rule *r = &old->rules[i];
		struct conf_hostpat hp;

		if (rule_pat(r, &hp) < 0)
			goto out;
		if (r->kind == PK_CRED) {
			const struct conf_credential *c = &old->creds[r->cred];

			free(hp.host);
			if (c->tenant)
				continue;
			pc[cp.ncredentials] = *c;
			if (rule_pat(r, &pc[cp.ncredentials].host) < 0)
				goto out;
			cp.ncredentials++;
		} else {
			lists[r->kind].v[lists[r->kind].n++] = hp;
		}
	}
	cp.name = old->name;
	cp.mode = old->mode;
	cp.allow = lists[PK_ALLOW];
	cp.deny = lists[PK_DENY];
	cp.intercept = lists[PK_INTERCEPT];
	cp.credentials = pc;
	cp.allow_private = old->allow_private;
	l = policy_new(&cp, old->has_narrow ? &lists[PK_NARROW] : NULL, tc ? tc->v : NULL,
		       tc ? tc->n : 0, old);
	e = errno;
out:
	if (!l)
		snprintf(err, errsz, "cannot compile the layer again: %s", compile_error(e));
	for (size_t k = 0; k <= PK_NARROW; k++) {
		for (size_t i = 0; i < lists[k].n; i++)
			free(lists[k].v[i].host);
		free(lists[k].v);
	}
	for (size_t i = 0; pc && i < cp.ncredentials; i++)
		free(pc[i].host.host);
	free(pc);
	if (!l)
		errno = e;
	return l;
}

void
gw_policy_each_credential(const struct gw_policy *p,
			  void (*fn)(void *arg, const struct conf_credential *c, const char *host),
			  void *arg)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].kind == PK_CRED)
			fn(arg, &p->creds[p->rules[i].cred], p->rules[i].text);
}

void
gw_policy_each_rule(const struct gw_policy *p,
		    void (*fn)(void *arg, const char *kind, const char *text), void *arg)
{
	static const char *const kinds[] = { "deny", "allow", "intercept", "credentials",
					     "tenant_egress" };

	for (size_t i = 0; i < p->nrules; i++) {
		const struct pol_rule *r = &p->rules[i];

		if (r->kind <= PK_NARROW)
			fn(arg, kinds[r->kind], r->text);
	}
}

/* ---- saving and loading ----------------------------------------------- */

/* Appends a new string to arr; -ENOMEM (or -EINVAL: not UTF-8). */
static int append_str(json_t *arr, const char *text)
{
	json_t *v;

	if (!text)
		return -EINVAL;
	v = json_string(text);
	if (!v)
		return -ENOMEM;
	return json_array_append_new(arr, v) < 0 ? -ENOMEM : 0;
}

static int save_cred(json_t *arr, const struct pol_rule *r, const struct conf_credential *c)
{
	json_t *o;

	/* the reference, never the value: no reference, nothing to save; a
	 * tenant's value has none and is never saved, its fingerprint is */
	if ((!c->tenant && !c->value.ref) || (c->tenant && !c->fingerprint[0]) || !r->text ||
	    !c->name)
		return -EINVAL;
	o = json_pack("{s:s, s:s, s:s}", "name", c->name, "kind", conf_cred_kind_name(c->kind),
		      "host", r->text);
	if (!o)
		return -EINVAL;         /* ENOMEM, or a text that is not UTF-8 */
	if ((c->header && json_object_set_new(o, "header", json_string(c->header)) < 0) ||
	    (c->user && json_object_set_new(o, c->kind == CONF_CRED_SIGV4 ? "access_key_id" : "user",
					    json_string(c->user)) < 0) ||
	    (c->param && json_object_set_new(o, "param", json_string(c->param)) < 0) ||
	    (c->env && json_object_set_new(o, "env", json_string(c->env)) < 0) ||
	    (!c->tenant && json_object_set_new(o, c->kind == CONF_CRED_BASIC   ? "password"
						  : c->kind == CONF_CRED_SIGV4 ? "secret"
									       : "value",
					       json_string(c->value.ref)) < 0) ||
	    (c->tenant && (json_object_set_new(o, "tenant", json_true()) < 0 ||
			   json_object_set_new(o, "fingerprint", json_string(c->fingerprint)) < 0)) ||
	    (c->cleartext && json_object_set_new(o, "cleartext", json_true()) < 0) ||
	    (c->sentinel[0] && json_object_set_new(o, "sentinel", json_string(c->sentinel)) < 0)) {
		json_decref(o);
		return -ENOMEM;
	}
	return json_array_append_new(arr, o) < 0 ? -ENOMEM : 0;
}

/* Sets o[key] to *v and clears *v: json_object_set_new() takes the value
 * even when it fails. */
static int set_take(json_t *o, const char *key, json_t **v)
{
	int rc = json_object_set_new(o, key, *v);

	*v = NULL;
	return rc < 0 ? -ENOMEM : 0;
}

json_t *gw_policy_save(const struct gw_policy *p)
{
	json_t *o = NULL, *lists[PK_NARROW + 1] = { NULL }, *aps = NULL;
	size_t i;
	int rc = -ENOMEM;

	if (!p) {
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; i <= PK_NARROW; i++) {
		lists[i] = i == PK_NARROW && !p->has_narrow ? json_null() : json_array();
		if (!lists[i])
			goto out;
	}
	aps = json_array();
	o = json_pack("{s:s, s:s}", "name", p->name ? p->name : "", "mode",
		      conf_policy_mode_name(p->mode));
	if (!aps || !o)
		goto out;
	rc = 0;
	for (i = 0; rc == 0 && i < p->nrules; i++) {
		const struct pol_rule *r = &p->rules[i];

		if (r->kind == PK_CRED)
			rc = save_cred(lists[PK_CRED], r, &p->creds[r->cred]);
		else if (r->kind <= PK_NARROW)
			rc = append_str(lists[r->kind], r->text);
		else
			rc = -EINVAL;
	}
	for (i = 0; rc == 0 && i < p->allow_private.n; i++) {
		const struct conf_cidr *c = &p->allow_private.v[i];
		char net[INET6_ADDRSTRLEN], text[INET6_ADDRSTRLEN + 8];

		rc = cidr_net(c, net);
		if (rc == 0) {
			snprintf(text, sizeof(text), "%s/%u", net, (unsigned)c->prefix);
			rc = append_str(aps, text);
		}
	}
	if (rc < 0)
		goto out;
	rc = set_take(o, "allow", &lists[PK_ALLOW]);
	if (rc == 0)
		rc = set_take(o, "deny", &lists[PK_DENY]);
	if (rc == 0)
		rc = set_take(o, "intercept", &lists[PK_INTERCEPT]);
	if (rc == 0)
		rc = set_take(o, "credentials", &lists[PK_CRED]);
	if (rc == 0)
		rc = set_take(o, "allow_private", &aps);
	if (rc == 0)
		rc = set_take(o, "tenant_egress", &lists[PK_NARROW]);
out:
	for (i = 0; i <= PK_NARROW; i++)
		json_decref(lists[i]);
	json_decref(aps);
	if (rc < 0) {
		json_decref(o);
		errno = -rc;
		return NULL;
	}
	return o;
}

struct gw_policy *gw_policy_load(const json_t *saved, char *err, size_t errsz)
{
	struct gw_policy *p = NULL;
	struct conf_layer *l;
	struct conf_diag d;
	int e = EINVAL;

	if (errsz > 0)
		err[0] = '\0';
	conf_diag_init(&d);
	l = conf_layer_from_json(saved, &d);
	if (!l) {
		size_t more = (d.n > 0 ? d.n - 1 : 0) + d.dropped;

		if (d.n == 0)
			snprintf(err, errsz, "layer: refused");
		else if (more > 0)
			snprintf(err, errsz, "%s (and %zu more)", d.lines[0], more);
		else
			snprintf(err, errsz, "%s", d.lines[0]);
		goto out;
	}
	p = gw_policy_new(l->policy, l->has_narrow ? &l->narrow : NULL);
	if (!p) {
		e = errno;
		snprintf(err, errsz, "layer: cannot compile: %s", compile_error(e));
	}
	conf_layer_free(l);
out:
	conf_diag_fini(&d);
	if (!p)
		errno = e;
	return p;
}

/* policy.h: the policy engine every door calls.
 *
 * Pure: no I/O, no logging. A struct gw_policy is compiled once from a
 * conf_policy (and a tenant's egress list) when a claim is made, then pinned
 * to the claim; it copies everything it needs, so it outlives the struct conf
 * it came from (a reload must not change a live claim). It is immutable: any
 * thread may check against it; ref/unref are atomic.
 *
 * Matching, the same for allow, deny, intercept, credentials and the tenant
 * list: "example.com" matches that name only; "*.example.org" matches every
 * name below example.org at any depth but not example.org itself; IP rules
 * match only that address (in any spelling: rules and hosts are both
 * canonicalised). A rule with a port matches that port only; one without
 * matches ports 80 and 443, except a deny rule without a port, which matches
 * every port (deny wins, so "deny: [evil.com]" must not leave evil.com:8443
 * open to an "allow: [*.com:8443]").
 * A lookup costs one hash probe per label of the host, whatever the number
 * of rules.
 */
#ifndef SLUICE_GW_POLICY_H
#define SLUICE_GW_POLICY_H

#include <stddef.h>
#include <sys/socket.h>

#include "conf-t.h"
#include "policy-t.h"
#include "reason-t.h"

struct json_t;

/* Normalises the host of a request (`len` bytes at `in`, no NUL needed) into
 * out (outsz >= GW_HOST_MAX always suffices): lowercase, one trailing dot
 * stripped; IP literals in any spelling become their canonical text
 * ("2130706433" -> "127.0.0.1", "[::FFFF:7f00:1]" -> "127.0.0.1",
 * "[2001:DB8::1]" -> "2001:db8::1", no brackets).
 * Returns 0, or -EINVAL with *why (never NULL):
 *   GW_R_USERINFO       an '@' anywhere;
 *   GW_R_NON_ASCII_HOST a byte >= 0x80 (IDNs must come as "xn--" punycode);
 *   GW_R_BAD_HOST       empty, empty label, label over 63 or name over 253
 *                       bytes, a byte outside [a-z0-9-_.] in a name, a label
 *                       starting or ending with '-', a malformed or ambiguous
 *                       numeric host ("1.2.3.4.5", "08", "a.1"), an IPv6 zone.
 * or -ENOSPC (out too small for the result; *why = GW_R_INTERNAL).
 * On failure out holds "" when outsz > 0. */
int gw_host_normalize(const char *in, size_t len, char *out, size_t outsz,
		      enum gw_reason *why);

/* Compiles policy p, narrowed by a tenant's egress list (NULL: no tenant
 * list; an empty list allows nothing). Borrows p and narrow for the call
 * only. Returns the policy with one reference, or NULL with errno ENOMEM,
 * or EINVAL when p is NULL or a rule's host does not normalise (conf
 * validation should have refused it). */
struct gw_policy *gw_policy_new(const struct conf_policy *p,
				const struct conf_hostpats *narrow);

/* The layer a claim, or a sandbox unlocked by hand on the control socket,
 * is checked against: the policy named `policy` in c, narrowed by tenant
 * t's egress list when t has one (t NULL: the operator's, no narrowing),
 * with the credentials the claim's tenant brought (tc, NULL: none) after
 * the policy's. The one place that rule is written; every caller uses it.
 * Borrows c, t and tc for the call (the layer copies the values). Returns
 * the layer with one reference, or NULL with one line in err and errno
 * ENOENT (no policy of that name), EINVAL or ENOMEM (gw_policy_new()),
 * EEXIST (a tenant's credential is named like one of the policy's). */
struct gw_policy *gw_policy_layer(const struct conf *c, const char *policy,
				  const struct conf_tenant *t, const struct conf_creds *tc,
				  char *err, size_t errsz);

/* A claim's layer with its tenant's credentials replaced by tc (NULL or
 * empty: none): old's rules and policy credentials as they were compiled
 * (a reload since changes nothing), old's tenant credentials gone. A
 * credential of tc named like one of old's tenant credentials (same kind,
 * same variable) keeps its sentinel, so the guest's variable stays good,
 * and its fingerprint's salt, so the same value gives the same
 * fingerprint and the layer the same version. Returns the new layer with
 * one reference, or NULL with one line in err and errno as
 * gw_policy_layer(). Borrows old and tc. */
struct gw_policy *gw_policy_with_tenant(const struct gw_policy *old, const struct conf_creds *tc,
					char *err, size_t errsz);

/* Calls fn for each credential of the layer in compile order (the
 * policy's, then the tenant's), with its host pattern as a rule's text.
 * For showing a layer: fn may read name, kind, tenant, lost and
 * fingerprint; it must never show value. */
void gw_policy_each_credential(const struct gw_policy *p,
			       void (*fn)(void *arg, const struct conf_credential *c,
					  const char *host),
			       void *arg);

/* Takes a reference; returns p. */
struct gw_policy *gw_policy_ref(struct gw_policy *p);
/* Drops a reference; the last one frees the policy and wipes its copies of
 * credential values. NULL is a no-op. */
void gw_policy_unref(struct gw_policy *p);
/* The same as gw_policy_unref(): the creator's way to drop its reference. */
void gw_policy_free(struct gw_policy *p);

/* Decides whether `host` (already normalised by gw_host_normalize(); a host
 * that is not is refused with the reason normalising gives, or
 * GW_R_BAD_HOST) may be reached on `port`. Order: deny rules of the policy,
 * then its allow rules, then the tenant list; the first refusal is the
 * reason. A host that is an IPv6 literal embedding IPv4 (NAT64, 6to4, ...)
 * is also refused by a deny rule naming the embedded IPv4 address. In
 * report mode a rule refusal still allows (report_only); bad host and bad
 * port never do. Fills *d always.
 * Returns 0 when d->allow, else -EACCES. */
int gw_policy_check(const struct gw_policy *p, const char *host, uint16_t port,
		    struct gw_policy_decision *d);

/* Decides whether the name `host` (normalised; an IP literal is refused
 * as GW_R_BAD_HOST) may be reached on some port: the DNS door answers a
 * name only then. Tries 443, 80, then each port an allow rule matching the
 * name gives; the first allowing decision fills *d, else the refusal for
 * 443. 0 when allowed (report mode too), else -EACCES. */
int gw_policy_check_name(const struct gw_policy *p, const char *host,
			 struct gw_policy_decision *d);

/* The address check for this layer: gw_addr_check() with the layer's
 * allow_private, as a decision (reason GW_R_PRIVATE_ADDRESS). Enforced in
 * report mode too: the private address list protects the node itself
 * (loopback API, metadata), not the tenant's traffic. 0 or -EACCES. */
int gw_policy_check_addr(const struct gw_policy *p, const struct sockaddr *sa,
			 struct gw_policy_decision *d);

/* True if TLS to host:port is to be terminated (an `intercept` rule
 * matches, or a credential's host pattern does: credentials are only added
 * to traffic sluice encrypts itself). Says nothing about whether the host
 * is allowed. */
bool gw_policy_intercepts(const struct gw_policy *p, const char *host, uint16_t port);

/* Calls cb for each credential whose host pattern matches host:port, most
 * specific pattern first (exact, then the longest wildcard suffix), conf
 * order among equals, skipping a slot already given by a more specific
 * match (a header name, Basic counting as Authorization; a query parameter;
 * a placeholder's variable). Returns 0, or the first nonzero value cb returned. Does
 * not check that the host is allowed: call it after gw_policy_check(). */
int gw_policy_credentials(const struct gw_policy *p, const char *host, uint16_t port,
			  gw_policy_cred_cb cb, void *arg);

/* Calls fn for each placeholder credential of the layer: the variable the
 * guest is given and the sentinel it holds (made when the layer was
 * compiled, kept across restarts by gw_policy_save()). */
void gw_policy_placeholders(const struct gw_policy *p,
			    void (*fn)(void *arg, const char *env, const char *sentinel), void *arg);

/* A sigv4 credential's placeholder access key id (the guest's
 * AWS_ACCESS_KEY_ID; its AWS_SECRET_ACCESS_KEY is the sentinel). */
#define GW_POLICY_AKID_LEN 21
void gw_policy_sigv4_akid(const struct conf_credential *c, char out[GW_POLICY_AKID_LEN]);

/* The layer's placeholder whose sentinel is s[0..n), or NULL (another
 * layer's, a stale one, or no sentinel). */
const struct conf_credential *gw_policy_sentinel(const struct gw_policy *p, const char *s,
						 size_t n);

/* The layer's version: FNV-1a 64 over a canonical, sorted serialisation of
 * mode, allow/deny/intercept rules, allow_private, credentials (host,
 * header and reference text, never the value) and the tenant list, as 16
 * hex digits. Equal layers give equal versions whatever the rule order,
 * duplicates or spelling of IP rules. Owned by p. */
const char *gw_policy_version(const struct gw_policy *p);

/* Calls fn for every rule in the order it was compiled: kind is "deny",
 * "allow", "intercept", "credentials" (the host pattern only, never the
 * value) or "tenant_egress"; text the rule as written ("*.a.b:443"). For
 * showing a layer (the API's claim answers). */
void gw_policy_each_rule(const struct gw_policy *p,
			 void (*fn)(void *arg, const char *kind, const char *text), void *arg);

/* The policy's name ("" if it had none), owned by p. */
const char *gw_policy_name(const struct gw_policy *p);
enum conf_policy_mode gw_policy_mode(const struct gw_policy *p);
/* The layer's allow_private list, owned by p (for gw_addr_check()). */
const struct conf_cidrs *gw_policy_allow_private(const struct gw_policy *p);

/* The layer as JSON for the state file, so that a restart re-adopts a live
 * claim with the same layer (same rules, same gw_policy_version()) whatever
 * the configuration says by then:
 *   {"name": "...", "mode": "enforce"|"report",
 *    "allow": [...], "deny": [...], "intercept": [...],
 *    "credentials": [{"name": "...", "kind": "header"|"basic"|"placeholder"|
 *                     "query", "host": "*.a.b:443", "header"|"user"|"param"|
 *                     "env": "...", "value"|"password": REF,
 *                     "cleartext": true (only if), "sentinel": "sluice-ph-..."
 *                     (placeholders)}],
 *    "allow_private": ["10.0.0.0/8", ...],
 *    "tenant_egress": [...] or null (null: no tenant list)}
 * Host patterns are the rules as gw_policy_each_rule() shows them, in
 * compile order, which the configuration's host pattern parser reads back
 * to the same rule ("[2001:db8::1]:443"). A credential's value is its
 * reference text as written ("Bearer ${env:TOKEN}"), never the resolved
 * value; a credential written literally in the configuration is its own
 * reference, so that text is saved as it is. A tenant's credential has no
 * reference: it is saved without its value, as "tenant": true and its
 * "fingerprint", and gw_policy_load() reads it back lost. Returns a new reference, or
 * NULL with errno ENOMEM, or EINVAL (p NULL, or a credential without
 * reference text: one not made by conf/). Borrows p. */
struct json_t *gw_policy_save(const struct gw_policy *p);

/* The reverse of gw_policy_save(): checks `saved` as conf_layer_from_json()
 * does (as a YAML policies[] entry), resolves the credential references
 * again, and compiles the layer. Returns it with one reference, or NULL with
 * one line in err ("layer.allow[2]: bad host pattern ...", the first error
 * and " (and N more)"; never a secret's value) and errno EINVAL (or ENOMEM).
 * Decisions of the loaded layer carry no configuration position (line 0).
 * Borrows saved. */
struct gw_policy *gw_policy_load(const struct json_t *saved, char *err, size_t errsz);

#endif

/* policy-t.h: the policy engine's types.
 *
 * struct gw_policy is opaque: a compiled, immutable, refcounted policy
 * layer (see policy.h). A decision is a plain value the caller owns; its
 * `rule` text is borrowed from the policy that made it.
 */
#ifndef SLUICE_GW_POLICY_T_H
#define SLUICE_GW_POLICY_T_H

#include <stdbool.h>
#include <stdint.h>

#include "conf-t.h"
#include "reason-t.h"

/* A normalised host name and its NUL: 253 bytes of name, or the longest
 * canonical IPv6 text (45), fit. */
#define GW_HOST_MAX 254

/* gw_policy_version() text: 16 lowercase hex digits and a NUL. */
#define GW_POLICY_VERSION_LEN 17

struct gw_policy;

/* The outcome of one check.
 *
 * allow        the connection may proceed. In `mode: report` it is true
 *              even when the rules refuse; then report_only is set and
 *              `reason` says what enforce would have done.
 * report_only  allowed only because the layer is in report mode.
 * reason       GW_R_NONE when the rules allow; GW_R_DENIED (a deny rule
 *              matched), GW_R_NOT_ALLOWED (no allow rule, or the tenant's
 *              egress list, matched), GW_R_BAD_HOST / GW_R_NON_ASCII_HOST /
 *              GW_R_USERINFO (host not normalised), GW_R_BAD_PORT (port 0),
 *              GW_R_PRIVATE_ADDRESS (gw_policy_check_addr()).
 * by_tenant    the refusal came from the tenant's egress list, not the
 *              pool's policy: the fix is in the tenant, not the policy.
 * rule, pos    the deciding rule as written ("*.example.org:443") and where
 *              in the configuration: the deny rule that matched, or the
 *              allow rule that let it through; NULL and line 0 otherwise.
 *              Borrowed from the policy: valid while the caller holds it.
 */
struct gw_policy_decision {
	bool allow;
	bool report_only;
	bool by_tenant;
	enum gw_reason reason;
	const char *rule;
	struct conf_pos pos;
};

/* Called once per credential to inject, most specific match first; at most
 * one per header name (case-insensitive). `c` is owned by the policy (its
 * value a copy the policy wipes when freed). Return 0 to go on; anything
 * else stops the walk and is returned by gw_policy_credentials(). */
typedef int (*gw_policy_cred_cb)(const struct conf_credential *c, void *arg);

#endif

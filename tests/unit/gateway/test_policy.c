/* test_policy.c: host normalisation and the policy engine. Bad inputs first.
 * Policies are built by hand from static arrays, as conf/ would hand them. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "addr.h"
#include "conf.h"
#include "policy.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A host pattern at config line `line`. */
#define HP(h, w, p, line) { .host = (h), .wildcard = (w), .port = (p), .pos = { (line), 5 } }
#define LIST(a) { (a), N(a) }

static struct conf_cidr cidr(const char *text, unsigned prefix)
{
	struct conf_cidr c;

	memset(&c, 0, sizeof(c));
	c.family = strchr(text, ':') ? AF_INET6 : AF_INET;
	c.prefix = (uint8_t)prefix;
	if (inet_pton(c.family, text, c.addr) != 1)
		fail_msg("bad test cidr %s", text);
	return c;
}

/* ---- gw_host_normalize: refusals -------------------------------------- */

struct norm_bad {
	const char *in;
	enum gw_reason why;
};

static void test_normalize_refusals(void **state)
{
	static const struct norm_bad v[] = {
		{ "", GW_R_BAD_HOST },
		{ ".", GW_R_BAD_HOST },
		{ "..", GW_R_BAD_HOST },
		{ "a..b", GW_R_BAD_HOST },
		{ ".a", GW_R_BAD_HOST },
		{ "a.b..", GW_R_BAD_HOST },
		{ "-a.com", GW_R_BAD_HOST },
		{ "a-.com", GW_R_BAD_HOST },
		{ "a.-b.com", GW_R_BAD_HOST },
		{ "a.b-", GW_R_BAD_HOST },
		{ "a.b-.", GW_R_BAD_HOST },
		{ "exa mple.com", GW_R_BAD_HOST },
		{ "a/b", GW_R_BAD_HOST },
		{ "a:b", GW_R_BAD_HOST },
		{ "example.com:443", GW_R_BAD_HOST },
		{ "a%2eb", GW_R_BAD_HOST },
		{ "*.example.com", GW_R_BAD_HOST },
		{ "ex!ample.com", GW_R_BAD_HOST },
		{ "a\\b", GW_R_BAD_HOST },
		{ "a+b.com", GW_R_BAD_HOST },
		{ "1.2.3.4.5", GW_R_BAD_HOST },
		{ "08", GW_R_BAD_HOST },
		{ "0x", GW_R_BAD_HOST },
		{ "256.1.1.1", GW_R_BAD_HOST },
		{ "example.123", GW_R_BAD_HOST },
		{ "1.2.3.-1", GW_R_BAD_HOST },
		{ "fe80::1%eth0", GW_R_BAD_HOST },
		{ "[fe80::1%25eth0]", GW_R_BAD_HOST },
		{ "[1.2.3.4]", GW_R_BAD_HOST },
		{ "[example.com]", GW_R_BAD_HOST },
		{ "127.0.0.1 ", GW_R_BAD_HOST },
		{ "b\xc3\xbc" "cher.de", GW_R_NON_ASCII_HOST },
		{ "\xff", GW_R_NON_ASCII_HOST },
		{ "example.c\xc3\xb6m", GW_R_NON_ASCII_HOST },
		{ "user@example.com", GW_R_USERINFO },
		{ "@", GW_R_USERINFO },
		{ "example.com@evil.com", GW_R_USERINFO },
		{ "\xc3\xa9@x", GW_R_USERINFO },        /* '@' is said first */
	};
	char out[GW_HOST_MAX];
	char label64[80], name254[300];
	enum gw_reason why;
	size_t i;

	(void)state;
	for (i = 0; i < N(v); i++) {
		int rc;

		why = GW_R_NONE;
		memset(out, 'x', sizeof(out));
		rc = gw_host_normalize(v[i].in, strlen(v[i].in), out, sizeof(out), &why);
		if (rc != -EINVAL || why != v[i].why)
			fail_msg("\"%s\": rc %d why %d, want -EINVAL why %d", v[i].in, rc, (int)why,
				 (int)v[i].why);
		assert_string_equal(out, "");
	}

	/* an embedded NUL */
	assert_int_equal(gw_host_normalize("a\0b.com", 7, out, sizeof(out), &why), -EINVAL);
	assert_int_equal(why, GW_R_BAD_HOST);
	assert_int_equal(gw_host_normalize(NULL, 3, out, sizeof(out), &why), -EINVAL);

	/* a label of 64 bytes */
	memset(label64, 'a', 64);
	strcpy(label64 + 64, ".com");
	assert_int_equal(gw_host_normalize(label64, strlen(label64), out, sizeof(out), &why),
			 -EINVAL);
	assert_int_equal(why, GW_R_BAD_HOST);

	/* a name of 254 bytes (63.63.63.62), with and without a trailing dot */
	memset(name254, 'b', sizeof(name254));
	name254[63] = name254[127] = name254[191] = '.';
	name254[254] = '\0';
	assert_int_equal(gw_host_normalize(name254, 254, out, sizeof(out), &why), -EINVAL);
	assert_int_equal(why, GW_R_BAD_HOST);
	name254[254] = '.';
	name254[255] = '\0';
	assert_int_equal(gw_host_normalize(name254, 255, out, sizeof(out), &why), -EINVAL);

	/* out too small */
	assert_int_equal(gw_host_normalize("example.com", 11, out, 5, &why), -ENOSPC);
	assert_int_equal(why, GW_R_INTERNAL);
	assert_string_equal(out, "");
	assert_int_equal(gw_host_normalize("2001:db8::1", 11, out, 5, &why), -ENOSPC);
}

struct norm_ok {
	const char *in;
	const char *out;
};

static void test_normalize_ok(void **state)
{
	static const struct norm_ok v[] = {
		{ "example.com", "example.com" },
		{ "Example.COM.", "example.com" },
		{ "EXAMPLE.COM", "example.com" },
		{ "a_b.example", "a_b.example" },
		{ "_dmarc.example.com", "_dmarc.example.com" },
		{ "xn--bcher-kva.de", "xn--bcher-kva.de" },
		{ "a-b.c-d", "a-b.c-d" },
		{ "localhost", "localhost" },
		{ "a", "a" },
		{ "127.0.0.1.nip.io", "127.0.0.1.nip.io" },
		/* IP literals: one spelling per address */
		{ "127.0.0.1", "127.0.0.1" },
		{ "2130706433", "127.0.0.1" },
		{ "0177.0.0.1", "127.0.0.1" },
		{ "0x7f000001", "127.0.0.1" },
		{ "0x7f.1", "127.0.0.1" },
		{ "127.1", "127.0.0.1" },
		{ "127.0.0.1.", "127.0.0.1" },
		{ "2852039166", "169.254.169.254" },
		{ "[::1]", "::1" },
		{ "::1", "::1" },
		{ "[::FFFF:7F00:1]", "127.0.0.1" },
		{ "::ffff:127.0.0.1", "127.0.0.1" },
		{ "2001:DB8:0::1", "2001:db8::1" },
		{ "[64:FF9B::127.0.0.1]", "64:ff9b::7f00:1" },
	};
	char out[GW_HOST_MAX];
	char label63[80], name253[300];
	enum gw_reason why;
	size_t i;

	(void)state;
	for (i = 0; i < N(v); i++) {
		why = GW_R_INTERNAL;
		if (gw_host_normalize(v[i].in, strlen(v[i].in), out, sizeof(out), &why) != 0)
			fail_msg("\"%s\" refused (why %d)", v[i].in, (int)why);
		assert_int_equal(why, GW_R_NONE);
		if (strcmp(out, v[i].out) != 0)
			fail_msg("\"%s\" -> \"%s\", want \"%s\"", v[i].in, out, v[i].out);
	}

	memset(label63, 'a', 63);
	strcpy(label63 + 63, ".com");
	assert_int_equal(gw_host_normalize(label63, strlen(label63), out, sizeof(out), &why), 0);

	/* 253 bytes (63.63.63.61), and with its trailing dot */
	memset(name253, 'c', sizeof(name253));
	name253[63] = name253[127] = name253[191] = '.';
	name253[253] = '.';
	name253[254] = '\0';
	assert_int_equal(gw_host_normalize(name253, 254, out, sizeof(out), &why), 0);
	assert_int_equal(strlen(out), 253);
	assert_int_equal(gw_host_normalize(name253, 253, out, sizeof(out), &why), 0);
	/* exactly enough room */
	assert_int_equal(gw_host_normalize("Ab.c.", 5, out, 5, &why), 0);
	assert_string_equal(out, "ab.c");
}

/* ---- the matcher ------------------------------------------------------ */

static struct conf_hostpat base_allow[] = {
	HP("example.com", false, 0, 10),
	HP("example.org", true, 0, 11),
	HP("example.org", true, 8443, 12),
	HP("api.internal.test", false, 8443, 13),
	HP("svc.test", true, 9000, 14),
	HP("good.evil.example.org", false, 0, 15),
	HP("10.0.0.5", false, 0, 16),
	HP("2001:db8::5", false, 0, 17),
	HP("2001:db8::6", false, 8080, 18),
	HP("UPPER.Example.", false, 0, 19),
	HP("64:ff9b::c633:6407", false, 0, 20),
	HP("127.1", false, 0, 21),
};

static struct conf_hostpat base_deny[] = {
	HP("bad.example.org", false, 0, 30),
	HP("evil.example.org", true, 0, 31),
	HP("example.com", false, 8080, 32),
	HP("198.51.100.7", false, 0, 33),
};

static struct conf_policy base = {
	.name = "default",
	.mode = CONF_POLICY_ENFORCE,
	.allow = LIST(base_allow),
	.deny = LIST(base_deny),
	.pos = { 9, 3 },
};

struct verdict {
	const char *host;
	uint16_t port;
	enum gw_reason why;
	const char *rule;       /* expected deciding rule, NULL: none / don't care */
	uint32_t line;
};

static void expect(const struct gw_policy *p, const struct verdict *v, size_t n, bool report)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct gw_policy_decision d;
		int rc = gw_policy_check(p, v[i].host, v[i].port, &d);
		bool rule_refusal = v[i].why == GW_R_DENIED || v[i].why == GW_R_NOT_ALLOWED;
		bool want_allow = v[i].why == GW_R_NONE || (report && rule_refusal);

		if (d.reason != v[i].why)
			fail_msg("%s:%u: reason %d, want %d", v[i].host, v[i].port, (int)d.reason,
				 (int)v[i].why);
		if (d.allow != want_allow || (rc == 0) != want_allow)
			fail_msg("%s:%u: allow %d rc %d, want allow %d", v[i].host, v[i].port,
				 d.allow, rc, want_allow);
		if (d.report_only != (report && rule_refusal))
			fail_msg("%s:%u: report_only %d", v[i].host, v[i].port, d.report_only);
		if (v[i].rule) {
			if (!d.rule || strcmp(d.rule, v[i].rule) != 0)
				fail_msg("%s:%u: rule \"%s\", want \"%s\"", v[i].host, v[i].port,
					 d.rule ? d.rule : "(null)", v[i].rule);
			if (d.pos.line != v[i].line)
				fail_msg("%s:%u: line %u, want %u", v[i].host, v[i].port,
					 d.pos.line, v[i].line);
		}
		if (!v[i].rule && v[i].why == GW_R_NOT_ALLOWED)
			assert_null(d.rule);
	}
}

/* The verdicts of `base`, enforced or reported. */
static const struct verdict base_cases[] = {
	/* hosts that are not in normal form are refused, never guessed at */
	{ "Example.com", 443, GW_R_BAD_HOST, NULL, 0 },
	{ "example.com.", 443, GW_R_BAD_HOST, NULL, 0 },
	{ "", 443, GW_R_BAD_HOST, NULL, 0 },
	{ "167772165", 443, GW_R_BAD_HOST, NULL, 0 },   /* 10.0.0.5, unnormalised */
	{ "2001:db8:0::5", 443, GW_R_BAD_HOST, NULL, 0 },
	{ "[2001:db8::5]", 443, GW_R_BAD_HOST, NULL, 0 },
	{ "user@example.com", 443, GW_R_USERINFO, NULL, 0 },
	{ "b\xc3\xbc" "cher.de", 443, GW_R_NON_ASCII_HOST, NULL, 0 },
	{ "example.com", 0, GW_R_BAD_PORT, NULL, 0 },
	/* exact */
	{ "example.com", 443, GW_R_NONE, "example.com", 10 },
	{ "example.com", 80, GW_R_NONE, "example.com", 10 },
	{ "example.com", 8443, GW_R_NOT_ALLOWED, NULL, 0 },    /* default ports only */
	{ "example.com", 22, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "www.example.com", 443, GW_R_NOT_ALLOWED, NULL, 0 }, /* exact is exact */
	{ "xexample.com", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "com", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	/* wildcards: any depth, never the apex, only at a label boundary */
	{ "a.example.org", 443, GW_R_NONE, "*.example.org", 11 },
	{ "a.b.c.d.example.org", 80, GW_R_NONE, "*.example.org", 11 },
	{ "example.org", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "xexample.org", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "a.example.org", 8443, GW_R_NONE, "*.example.org:8443", 12 },
	{ "a.example.org", 8444, GW_R_NOT_ALLOWED, NULL, 0 },
	/* explicit ports */
	{ "api.internal.test", 8443, GW_R_NONE, "api.internal.test:8443", 13 },
	{ "api.internal.test", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "x.svc.test", 9000, GW_R_NONE, "*.svc.test:9000", 14 },
	{ "x.svc.test", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "svc.test", 9000, GW_R_NOT_ALLOWED, NULL, 0 },
	/* deny wins over allow, and a port-less deny covers every port */
	{ "bad.example.org", 443, GW_R_DENIED, "bad.example.org", 30 },
	{ "bad.example.org", 8443, GW_R_DENIED, "bad.example.org", 30 },
	{ "bad.example.org", 1, GW_R_DENIED, "bad.example.org", 30 },
	{ "x.bad.example.org", 443, GW_R_NONE, "*.example.org", 11 },
	/* a deny wildcard beats an exact allow, and spares its apex */
	{ "good.evil.example.org", 443, GW_R_DENIED, "*.evil.example.org", 31 },
	{ "a.b.evil.example.org", 8443, GW_R_DENIED, "*.evil.example.org", 31 },
	{ "evil.example.org", 443, GW_R_NONE, "*.example.org", 11 },
	/* a deny with a port denies that port only */
	{ "example.com", 8080, GW_R_DENIED, "example.com:8080", 32 },
	/* rule hosts are normalised too */
	{ "upper.example", 443, GW_R_NONE, "upper.example", 19 },
	{ "127.0.0.1", 443, GW_R_NONE, "127.0.0.1", 21 },
	/* IP literals match exact IP rules only */
	{ "10.0.0.5", 443, GW_R_NONE, "10.0.0.5", 16 },
	{ "10.0.0.5", 8443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "10.0.0.6", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "2001:db8::5", 443, GW_R_NONE, "2001:db8::5", 17 },
	{ "2001:db8::6", 8080, GW_R_NONE, "[2001:db8::6]:8080", 18 },
	{ "2001:db8::6", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	{ "198.51.100.7", 443, GW_R_DENIED, "198.51.100.7", 33 },
	/* a deny on an IPv4 address covers its NAT64 spelling */
	{ "64:ff9b::c633:6407", 443, GW_R_DENIED, "198.51.100.7", 33 },
};

static void test_check_enforce(void **state)
{
	struct gw_policy *p = gw_policy_new(&base, NULL);

	(void)state;
	assert_non_null(p);
	expect(p, base_cases, N(base_cases), false);
	gw_policy_free(p);
}

static void test_check_normalised_input(void **state)
{
	struct gw_policy *p = gw_policy_new(&base, NULL);
	static const char *const spellings[] = {
		"167772165", "0xa000005", "012.0.0.5", "10.5", "[::ffff:10.0.0.5]",
		"::ffff:a00:5", "10.0.0.5.",
	};
	struct gw_policy_decision d;
	char host[GW_HOST_MAX];
	enum gw_reason why;
	size_t i;

	(void)state;
	assert_non_null(p);
	for (i = 0; i < N(spellings); i++) {
		assert_int_equal(gw_host_normalize(spellings[i], strlen(spellings[i]), host,
						   sizeof(host), &why), 0);
		assert_string_equal(host, "10.0.0.5");
		assert_int_equal(gw_policy_check(p, host, 443, &d), 0);
	}
	assert_int_equal(gw_host_normalize("Bad.Example.ORG.", 16, host, sizeof(host), &why), 0);
	assert_int_equal(gw_policy_check(p, host, 443, &d), -EACCES);
	assert_int_equal(d.reason, GW_R_DENIED);
	assert_int_equal(gw_host_normalize("[2001:DB8::0:5]", 15, host, sizeof(host), &why), 0);
	assert_int_equal(gw_policy_check(p, host, 443, &d), 0);
	assert_int_equal(gw_policy_check(p, NULL, 443, &d), -EACCES);
	assert_int_equal(d.reason, GW_R_BAD_HOST);
	assert_int_equal(gw_policy_check(NULL, "example.com", 443, &d), -EACCES);
	assert_false(d.allow);
	gw_policy_free(p);
}

static void test_check_report(void **state)
{
	struct conf_policy rp = base;
	struct gw_policy *p;

	(void)state;
	rp.mode = CONF_POLICY_REPORT;
	p = gw_policy_new(&rp, NULL);
	assert_non_null(p);
	assert_int_equal(gw_policy_mode(p), CONF_POLICY_REPORT);
	expect(p, base_cases, N(base_cases), true);
	gw_policy_free(p);
}

/* ---- tenant narrowing -------------------------------------------------- */

static struct conf_hostpat gh_allow[] = {
	HP("github.com", true, 0, 40),
	HP("pypi.org", false, 0, 41),
	HP("example.com", false, 0, 42),
	HP("bad.github.com", false, 0, 43),
};
static struct conf_hostpat gh_deny[] = {
	HP("bad.github.com", false, 0, 44),
};
static struct conf_policy gh = {
	.name = "gh",
	.allow = LIST(gh_allow),
	.deny = LIST(gh_deny),
};
static struct conf_hostpat tenant_egress[] = {
	HP("github.com", true, 0, 50),
	HP("pypi.org", false, 443, 51),
	HP("evil.com", false, 0, 52),
	HP("bad.github.com", false, 0, 53),
};

static void test_check_narrowed(void **state)
{
	struct conf_hostpats narrow = LIST(tenant_egress);
	struct conf_hostpats empty = { NULL, 0 };
	static const struct verdict v[] = {
		{ "api.github.com", 443, GW_R_NONE, "*.github.com", 40 },
		{ "pypi.org", 443, GW_R_NONE, "pypi.org", 41 },
		{ "pypi.org", 80, GW_R_NOT_ALLOWED, NULL, 0 },    /* tenant: 443 only */
		{ "example.com", 443, GW_R_NOT_ALLOWED, NULL, 0 }, /* tenant lacks it */
		{ "evil.com", 443, GW_R_NOT_ALLOWED, NULL, 0 },   /* policy lacks it */
		{ "bad.github.com", 443, GW_R_DENIED, "bad.github.com", 44 },
		{ "github.com", 443, GW_R_NOT_ALLOWED, NULL, 0 },
	};
	struct gw_policy_decision d;
	struct gw_policy *p, *open, *none;

	(void)state;
	p = gw_policy_new(&gh, &narrow);
	assert_non_null(p);
	expect(p, v, N(v), false);
	/* who refused: the tenant list, or the policy */
	gw_policy_check(p, "example.com", 443, &d);
	assert_true(d.by_tenant);
	gw_policy_check(p, "pypi.org", 80, &d);
	assert_true(d.by_tenant);
	gw_policy_check(p, "evil.com", 443, &d);
	assert_false(d.by_tenant);
	gw_policy_check(p, "bad.github.com", 443, &d);
	assert_false(d.by_tenant);

	/* no tenant list: the policy alone */
	open = gw_policy_new(&gh, NULL);
	assert_non_null(open);
	assert_int_equal(gw_policy_check(open, "example.com", 443, &d), 0);
	assert_int_equal(gw_policy_check(open, "pypi.org", 80, &d), 0);

	/* an empty tenant list allows nothing */
	none = gw_policy_new(&gh, &empty);
	assert_non_null(none);
	assert_int_equal(gw_policy_check(none, "api.github.com", 443, &d), -EACCES);
	assert_int_equal(d.reason, GW_R_NOT_ALLOWED);
	assert_true(d.by_tenant);

	assert_string_not_equal(gw_policy_version(p), gw_policy_version(open));
	assert_string_not_equal(gw_policy_version(none), gw_policy_version(open));
	gw_policy_free(p);
	gw_policy_free(open);
	gw_policy_free(none);
}

/* ---- intercept and credentials ----------------------------------------- */

static struct conf_hostpat ic_list[] = {
	HP("github.com", true, 0, 60),
	HP("api.openai.com", false, 443, 61),
};

static char secret_exact[] = "Bearer s3cret-exact";
static char secret_wild[] = "Bearer s3cret-wild";

static struct conf_credential creds[] = {
	{ .name = "*.github.com/authorization", .host = HP("github.com", true, 0, 70),
	  .header = "Authorization",
	  .value = { .value = secret_wild, .len = sizeof(secret_wild) - 1,
		     .ref = "Bearer ${env:GH_WILD}" } },
	{ .name = "api.github.com/authorization", .host = HP("api.github.com", false, 0, 71),
	  .header = "authorization",
	  .value = { .value = secret_exact, .len = sizeof(secret_exact) - 1,
		     .ref = "Bearer ${env:GH}" } },
	{ .name = "*.github.com/x-extra", .host = HP("github.com", true, 0, 72),
	  .header = "X-Extra", .value = { .value = "extra", .len = 5, .ref = "${env:GH_EXTRA}" } },
	{ .name = "api.github.com:8443/x-port", .host = HP("api.github.com", false, 8443, 73),
	  .header = "X-Port",
	  .value = { .value = "port", .len = 4, .ref = "${file:/run/port}" } },
};

static struct conf_policy cp = {
	.name = "creds",
	.allow = LIST(gh_allow),
	.intercept = LIST(ic_list),
	.credentials = creds,
	.ncredentials = N(creds),
};

struct seen {
	const char *hdr[8];
	const char *val[8];
	size_t n;
	int stop_at;
};

static int collect_cb(const struct conf_credential *c, void *arg)
{
	struct seen *s = arg;

	if (s->n >= 8)
		return -1;
	s->hdr[s->n] = c->header;
	s->val[s->n] = c->value.value;
	s->n++;
	return (int)s->n == s->stop_at ? 7 : 0;
}

static void test_intercepts(void **state)
{
	struct conf_policy nocreds = cp;
	struct gw_policy *p;

	(void)state;
	/* the intercept list alone */
	nocreds.credentials = NULL;
	nocreds.ncredentials = 0;
	p = gw_policy_new(&nocreds, NULL);
	assert_non_null(p);
	assert_true(gw_policy_intercepts(p, "api.github.com", 443));
	assert_true(gw_policy_intercepts(p, "a.b.github.com", 80));
	assert_false(gw_policy_intercepts(p, "github.com", 443));
	assert_false(gw_policy_intercepts(p, "api.github.com", 8443));
	assert_true(gw_policy_intercepts(p, "api.openai.com", 443));
	assert_false(gw_policy_intercepts(p, "api.openai.com", 80));
	assert_false(gw_policy_intercepts(p, "openai.com", 443));
	assert_false(gw_policy_intercepts(p, "API.github.com", 443));
	assert_false(gw_policy_intercepts(p, "api.github.com", 0));
	gw_policy_free(p);

	/* with the credentials: a host:port one matches is intercepted too
	 * (api.github.com:8443, X-Port's), nothing else changes */
	p = gw_policy_new(&cp, NULL);
	assert_non_null(p);
	assert_true(gw_policy_intercepts(p, "api.github.com", 443));
	assert_true(gw_policy_intercepts(p, "a.b.github.com", 80));
	assert_false(gw_policy_intercepts(p, "github.com", 443));
	assert_true(gw_policy_intercepts(p, "api.github.com", 8443));
	assert_false(gw_policy_intercepts(p, "www.github.com", 8443));
	assert_true(gw_policy_intercepts(p, "api.openai.com", 443));
	assert_false(gw_policy_intercepts(p, "api.openai.com", 80));
	assert_false(gw_policy_intercepts(p, "openai.com", 443));
	assert_false(gw_policy_intercepts(p, "API.github.com", 443));
	assert_false(gw_policy_intercepts(p, "api.github.com", 0));
	assert_false(gw_policy_intercepts(NULL, "api.github.com", 443));
	gw_policy_free(p);
}

static void test_credentials(void **state)
{
	struct gw_policy *p = gw_policy_new(&cp, NULL);
	struct seen s;

	(void)state;
	assert_non_null(p);

	/* exact beats wildcard for the same header (any case); others add */
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_policy_credentials(p, "api.github.com", 443, collect_cb, &s), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.hdr[0], "authorization");
	assert_string_equal(s.val[0], "Bearer s3cret-exact");
	assert_string_equal(s.hdr[1], "X-Extra");

	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_policy_credentials(p, "uploads.github.com", 443, collect_cb, &s), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.hdr[0], "Authorization");
	assert_string_equal(s.val[0], "Bearer s3cret-wild");
	assert_string_equal(s.hdr[1], "X-Extra");

	/* a port rule only on its port; port-less ones not there */
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_policy_credentials(p, "api.github.com", 8443, collect_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.hdr[0], "X-Port");

	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_policy_credentials(p, "github.com", 443, collect_cb, &s), 0);
	assert_int_equal(gw_policy_credentials(p, "API.GITHUB.COM", 443, collect_cb, &s), 0);
	assert_int_equal(gw_policy_credentials(p, "example.com", 443, collect_cb, &s), 0);
	assert_int_equal(s.n, 0);

	/* the callback stops the walk */
	memset(&s, 0, sizeof(s));
	s.stop_at = 1;
	assert_int_equal(gw_policy_credentials(p, "api.github.com", 443, collect_cb, &s), 7);
	assert_int_equal(s.n, 1);

	/* the policy holds its own copy of the value */
	memset(&s, 0, sizeof(s));
	secret_exact[0] = 'X';
	assert_int_equal(gw_policy_credentials(p, "api.github.com", 443, collect_cb, &s), 0);
	assert_string_equal(s.val[0], "Bearer s3cret-exact");
	assert_ptr_not_equal(s.val[0], secret_exact);
	secret_exact[0] = 'B';
	gw_policy_free(p);
}

/* ---- the version -------------------------------------------------------- */

static const char *version_of(const struct conf_policy *cpol, const struct conf_hostpats *narrow,
			      char out[GW_POLICY_VERSION_LEN])
{
	struct gw_policy *p = gw_policy_new(cpol, narrow);
	size_t i;

	assert_non_null(p);
	strcpy(out, gw_policy_version(p));
	gw_policy_free(p);
	assert_int_equal(strlen(out), 16);
	for (i = 0; i < 16; i++)
		assert_non_null(strchr("0123456789abcdef", out[i]));
	return out;
}

static void test_version(void **state)
{
	struct conf_hostpat a1[] = { HP("a.test", false, 0, 1), HP("b.test", true, 443, 2),
				     HP("127.0.0.1", false, 0, 3) };
	struct conf_hostpat a2[] = { HP("127.1", false, 0, 9), HP("b.test", true, 443, 8),
				     HP("a.test", false, 0, 7), HP("a.test", false, 0, 6) };
	struct conf_hostpat a3[] = { HP("a.test", false, 0, 1), HP("b.test", true, 444, 2),
				     HP("127.0.0.1", false, 0, 3) };
	struct conf_cidr priv1[] = { cidr("10.0.0.0", 8) };
	struct conf_cidr priv2[] = { cidr("10.0.0.0", 9) };
	char other_secret[] = "different value";
	struct conf_credential c1[] = { creds[0] };
	struct conf_credential c2[] = { creds[0] };
	struct conf_credential c3[] = { creds[0] };
	struct conf_policy p1 = { .name = "one", .allow = LIST(a1) };
	struct conf_policy p2 = { .name = "two", .allow = LIST(a2) };
	struct conf_policy q;
	struct conf_hostpats empty = { NULL, 0 };
	struct conf_hostpats nl = LIST(a1);
	char v1[GW_POLICY_VERSION_LEN], v2[GW_POLICY_VERSION_LEN];

	(void)state;
	/* order, duplicates, positions, names and IP spelling do not count */
	assert_string_equal(version_of(&p1, NULL, v1), version_of(&p2, NULL, v2));

	q = p1;
	q.allow.v = a3;
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&q, NULL, v2));
	q = p1;
	q.mode = CONF_POLICY_REPORT;
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&q, NULL, v2));
	q = p1;
	q.deny = p1.allow;
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&q, NULL, v2));
	q = p1;
	q.intercept = p1.allow;
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&q, NULL, v2));

	/* allow_private: present, and its prefix */
	q = p1;
	q.allow_private.v = priv1;
	q.allow_private.n = 1;
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&q, NULL, v2));
	version_of(&q, NULL, v1);
	q.allow_private.v = priv2;
	assert_string_not_equal(v1, version_of(&q, NULL, v2));

	/* the tenant list: none, empty, some */
	assert_string_not_equal(version_of(&p1, NULL, v1), version_of(&p1, &empty, v2));
	assert_string_not_equal(version_of(&p1, &nl, v1), version_of(&p1, &empty, v2));

	/* credentials: the reference counts, the value never does */
	q = p1;
	q.credentials = c1;
	q.ncredentials = 1;
	version_of(&q, NULL, v1);
	c2[0].value.value = other_secret;
	c2[0].value.len = strlen(other_secret);
	q.credentials = c2;
	assert_string_equal(v1, version_of(&q, NULL, v2));
	c3[0].value.ref = "Bearer ${env:OTHER}";
	q.credentials = c3;
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c3[0] = creds[0];
	c3[0].header = "X-Other";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c3[0] = creds[0];
	c3[0].header = "AUTHORIZATION";         /* header names are case-blind */
	assert_string_equal(v1, version_of(&q, NULL, v2));
}

/* ---- credential kinds: slots, placeholders, the version --------------- */

static char sec_a[] = "secret-A", sec_b[] = "secret-B";

#define CRED(nm, k, h, w, pt, ln) \
	.name = (nm), .kind = (k), .host = HP((h), (w), (pt), (ln)), \
	.value = { .value = sec_a, .len = sizeof(sec_a) - 1, .ref = "${env:A}" }

struct slots {
	char buf[512];
};

static int slot_cb(const struct conf_credential *c, void *arg)
{
	struct slots *s = arg;
	size_t l = strlen(s->buf);

	snprintf(s->buf + l, sizeof(s->buf) - l, "%s;", c->name);
	return 0;
}

static const char *slots_of(const struct gw_policy *p, const char *host, struct slots *s)
{
	s->buf[0] = '\0';
	assert_int_equal(gw_policy_credentials(p, host, 443, slot_cb, s), 0);
	return s->buf;
}

/* One credential per slot, the most specific pattern's: Basic and an
 * Authorization header are one slot (either way round); a query
 * parameter is one (another parameter is not); a placeholder's variable
 * is one. */
static void test_cred_slots(void **state)
{
	struct conf_credential cr[] = {
		{ CRED("w-basic", CONF_CRED_BASIC, "a.test", true, 0, 1), .user = "u" },
		{ CRED("e-auth", CONF_CRED_HEADER, "x.a.test", false, 0, 2), .header = "AUTHORIZATION" },
		{ CRED("w-auth", CONF_CRED_HEADER, "b.test", true, 0, 3), .header = "Authorization" },
		{ CRED("e-basic", CONF_CRED_BASIC, "x.b.test", false, 0, 4), .user = "u" },
		{ CRED("w-key", CONF_CRED_QUERY, "a.test", true, 0, 5), .param = "key" },
		{ CRED("e-key", CONF_CRED_QUERY, "x.a.test", false, 0, 6), .param = "key" },
		{ CRED("w-other", CONF_CRED_QUERY, "a.test", true, 0, 7), .param = "other" },
		{ CRED("w-ph", CONF_CRED_PLACEHOLDER, "a.test", true, 0, 8), .env = "TOKEN" },
		{ CRED("e-ph", CONF_CRED_PLACEHOLDER, "x.a.test", false, 0, 9), .env = "TOKEN" },
		{ CRED("w-ph2", CONF_CRED_PLACEHOLDER, "a.test", true, 0, 10), .env = "TOKEN2" },
		/* a header named like a parameter's or a variable's slot text
		 * is a header: no slot of theirs */
		{ CRED("w-hdr-key", CONF_CRED_HEADER, "a.test", true, 0, 11), .header = "key" },
		{ CRED("w-hdr-tok", CONF_CRED_HEADER, "a.test", true, 0, 12), .header = "TOKEN" },
	};
	struct conf_policy q = { .name = "slots", .credentials = cr, .ncredentials = N(cr) };
	struct gw_policy *p = gw_policy_new(&q, NULL);
	struct slots s;

	(void)state;
	assert_non_null(p);
	/* exact first, then the wildcard's that fill other slots */
	assert_string_equal(slots_of(p, "x.a.test", &s),
			    "e-auth;e-key;e-ph;w-other;w-ph2;w-hdr-key;w-hdr-tok;");
	assert_string_equal(slots_of(p, "y.a.test", &s),
			    "w-basic;w-key;w-other;w-ph;w-ph2;w-hdr-key;w-hdr-tok;");
	assert_string_equal(slots_of(p, "x.b.test", &s), "e-basic;");
	assert_string_equal(slots_of(p, "y.b.test", &s), "w-auth;");
	gw_policy_free(p);
}

struct phs {
	char env[4][16];
	char sent[4][CONF_SENTINEL_LEN];
	size_t n;
};

static void ph_cb(void *arg, const char *env, const char *sentinel)
{
	struct phs *ph = arg;

	assert_true(ph->n < 4);
	snprintf(ph->env[ph->n], sizeof(ph->env[0]), "%s", env);
	snprintf(ph->sent[ph->n], sizeof(ph->sent[0]), "%s", sentinel);
	ph->n++;
}

/* Each compiled layer makes its own sentinels, sluice's format, one per
 * placeholder; gw_policy_sentinel() finds a layer's own, whole, only. */
static void test_placeholders(void **state)
{
	struct conf_credential cr[] = {
		{ CRED("h", CONF_CRED_HEADER, "a.test", false, 0, 1), .header = "X-Key" },
		{ CRED("ph1", CONF_CRED_PLACEHOLDER, "a.test", false, 0, 2), .env = "ONE" },
		{ CRED("ph2", CONF_CRED_PLACEHOLDER, "b.test", true, 443, 3), .env = "TWO" },
	};
	struct conf_policy q = { .name = "ph", .credentials = cr, .ncredentials = N(cr) };
	struct gw_policy *a = gw_policy_new(&q, NULL), *b = gw_policy_new(&q, NULL);
	struct phs pa = { .n = 0 }, pb = { .n = 0 };
	const struct conf_credential *f;
	char buf[64];

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	gw_policy_placeholders(a, ph_cb, &pa);
	gw_policy_placeholders(b, ph_cb, &pb);
	assert_int_equal(pa.n, 2);
	assert_int_equal(pb.n, 2);
	assert_string_equal(pa.env[0], "ONE");
	assert_string_equal(pa.env[1], "TWO");
	for (size_t i = 0; i < 2; i++) {
		assert_true(conf_cred_sentinel_ok(pa.sent[i]));
		assert_true(conf_cred_sentinel_ok(pb.sent[i]));
		/* another layer of the same policy: other sentinels */
		assert_string_not_equal(pa.sent[i], pb.sent[i]);
	}
	assert_string_not_equal(pa.sent[0], pa.sent[1]);
	/* the conf's credential is not written to */
	assert_string_equal(cr[1].sentinel, "");
	/* the version is the policy's, not the sentinels' */
	assert_string_equal(gw_policy_version(a), gw_policy_version(b));

	f = gw_policy_sentinel(a, pa.sent[0], strlen(pa.sent[0]));
	assert_non_null(f);
	assert_string_equal(f->name, "ph1");
	assert_string_equal(f->value.value, sec_a);
	f = gw_policy_sentinel(a, pa.sent[1], strlen(pa.sent[1]));
	assert_non_null(f);
	assert_string_equal(f->name, "ph2");
	/* another layer's, cut short, one more byte, changed, none */
	assert_null(gw_policy_sentinel(a, pb.sent[0], strlen(pb.sent[0])));
	assert_null(gw_policy_sentinel(b, pa.sent[1], strlen(pa.sent[1])));
	assert_null(gw_policy_sentinel(a, pa.sent[0], strlen(pa.sent[0]) - 1));
	snprintf(buf, sizeof(buf), "%sa", pa.sent[0]);
	assert_null(gw_policy_sentinel(a, buf, strlen(buf)));
	snprintf(buf, sizeof(buf), "%s", pa.sent[0]);
	buf[20] = buf[20] == '0' ? '1' : '0';
	assert_null(gw_policy_sentinel(a, buf, strlen(buf)));
	assert_null(gw_policy_sentinel(a, "", 0));
	assert_null(gw_policy_sentinel(a, CONF_SENTINEL_PREFIX, 10));
	assert_null(gw_policy_sentinel(NULL, pa.sent[0], strlen(pa.sent[0])));
	gw_policy_placeholders(NULL, ph_cb, &pa);       /* nothing */
	assert_int_equal(pa.n, 2);

	/* a sentinel given (a saved layer's) is kept */
	snprintf(cr[1].sentinel, sizeof(cr[1].sentinel), "%s", pa.sent[0]);
	gw_policy_free(b);
	b = gw_policy_new(&q, NULL);
	assert_non_null(b);
	memset(&pb, 0, sizeof(pb));
	gw_policy_placeholders(b, ph_cb, &pb);
	assert_string_equal(pb.sent[0], pa.sent[0]);
	assert_string_not_equal(pb.sent[1], pa.sent[1]);
	assert_non_null(gw_policy_sentinel(b, pa.sent[0], strlen(pa.sent[0])));
	gw_policy_free(a);
	gw_policy_free(b);

	/* a layer without placeholders has none */
	q.credentials = cr;
	q.ncredentials = 1;
	a = gw_policy_new(&q, NULL);
	memset(&pa, 0, sizeof(pa));
	gw_policy_placeholders(a, ph_cb, &pa);
	assert_int_equal(pa.n, 0);
	gw_policy_free(a);
}

/* What counts in the version: kind, name, user, cleartext, the slot and
 * the reference; never the value or the sentinel. Each kind needs its
 * field, or the policy is refused. */
static void test_version_kinds(void **state)
{
	struct conf_credential base_c = { CRED("n", CONF_CRED_BASIC, "a.test", false, 0, 1),
					  .user = "u" };
	struct conf_credential c[1];
	struct conf_policy q = { .name = "v", .credentials = c, .ncredentials = 1 };
	char v1[GW_POLICY_VERSION_LEN], v2[GW_POLICY_VERSION_LEN];

	(void)state;
	c[0] = base_c;
	version_of(&q, NULL, v1);
	c[0].value.value = sec_b;
	assert_string_equal(v1, version_of(&q, NULL, v2));
	c[0] = base_c;
	c[0].name = "m";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c[0] = base_c;
	c[0].user = "v";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c[0] = base_c;
	c[0].cleartext = true;
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c[0] = base_c;
	c[0].value.ref = "${env:B}";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	/* Basic and an Authorization header: one slot, two kinds */
	c[0] = base_c;
	c[0].kind = CONF_CRED_HEADER;
	c[0].user = NULL;
	c[0].header = "Authorization";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));

	/* a query parameter's name counts, and its kind */
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_QUERY, "a.test", false, 0, 1),
					 .param = "key" };
	version_of(&q, NULL, v1);
	c[0].param = "KEY2";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_HEADER, "a.test", false, 0, 1),
					 .header = "?key" };
	assert_string_not_equal(v1, version_of(&q, NULL, v2));

	/* a placeholder: the variable counts, the sentinel not */
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_PLACEHOLDER, "a.test", false, 0, 1),
					 .env = "T" };
	version_of(&q, NULL, v1);
	snprintf(c[0].sentinel, sizeof(c[0].sentinel), "%s%032x", CONF_SENTINEL_PREFIX, 7);
	assert_string_equal(v1, version_of(&q, NULL, v2));
	c[0].env = "U";
	assert_string_not_equal(v1, version_of(&q, NULL, v2));

	/* each kind's field, and a name and a value, are needed */
	c[0] = base_c;
	c[0].user = NULL;
	assert_null(gw_policy_new(&q, NULL));
	c[0] = base_c;
	c[0].name = NULL;
	assert_null(gw_policy_new(&q, NULL));
	c[0] = base_c;
	c[0].value.value = NULL;
	assert_null(gw_policy_new(&q, NULL));
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_QUERY, "a.test", false, 0, 1) };
	assert_null(gw_policy_new(&q, NULL));
	c[0].param = "";
	assert_null(gw_policy_new(&q, NULL));
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_PLACEHOLDER, "a.test", false, 0, 1) };
	assert_null(gw_policy_new(&q, NULL));
	c[0] = (struct conf_credential){ CRED("n", CONF_CRED_HEADER, "a.test", false, 0, 1),
					 .header = "" };
	assert_null(gw_policy_new(&q, NULL));
	c[0] = base_c;
	c[0].kind = (enum conf_cred_kind)9;
	assert_null(gw_policy_new(&q, NULL));
	assert_int_equal(errno, EINVAL);
}

/* ---- lifetime ----------------------------------------------------------- */

static void test_new_refusals(void **state)
{
	struct conf_hostpat bad_host[] = { HP("bad host", false, 0, 1) };
	struct conf_hostpat wild_ip[] = { HP("10.0.0.1", true, 0, 1) };
	struct conf_hostpat star[] = { HP("*.example.com", false, 0, 1) };
	struct conf_hostpat null_host[] = { HP(NULL, false, 0, 1) };
	struct conf_hostpat non_ascii[] = { HP("b\xc3\xbc" "cher.de", false, 0, 1) };
	struct conf_hostpats dangling = { NULL, 2 };
	struct conf_credential no_header[] = { creds[0] };
	struct conf_policy q = { .name = "q" };

	(void)state;
	errno = 0;
	assert_null(gw_policy_new(NULL, NULL));
	assert_int_equal(errno, EINVAL);

	q.allow = (struct conf_hostpats)LIST(bad_host);
	assert_null(gw_policy_new(&q, NULL));
	assert_int_equal(errno, EINVAL);
	q.allow = (struct conf_hostpats)LIST(wild_ip);
	assert_null(gw_policy_new(&q, NULL));
	q.allow = (struct conf_hostpats)LIST(star);
	assert_null(gw_policy_new(&q, NULL));
	q.allow = (struct conf_hostpats)LIST(null_host);
	assert_null(gw_policy_new(&q, NULL));
	q.allow = (struct conf_hostpats)LIST(non_ascii);
	assert_null(gw_policy_new(&q, NULL));
	q.allow = dangling;
	assert_null(gw_policy_new(&q, NULL));
	q.allow = (struct conf_hostpats){ NULL, 0 };
	assert_null(gw_policy_new(&q, &dangling));
	/* a bad rule in the tenant list, after good ones were compiled */
	q.allow = (struct conf_hostpats)LIST(gh_allow);
	assert_null(gw_policy_new(&q, &(struct conf_hostpats)LIST(bad_host)));
	no_header[0].header = NULL;
	q.credentials = no_header;
	q.ncredentials = 1;
	assert_null(gw_policy_new(&q, NULL));
	q.credentials = NULL;
	assert_null(gw_policy_new(&q, NULL));
	assert_int_equal(errno, EINVAL);
}

static void test_lifetime(void **state)
{
	struct conf_policy *heap = calloc(1, sizeof(*heap));
	struct conf_hostpat *allow = calloc(2, sizeof(*allow));
	struct conf_credential *cr = calloc(1, sizeof(*cr));
	struct gw_policy_decision d;
	struct gw_policy *p, *q;
	struct seen s;

	(void)state;
	assert_non_null(heap);
	allow[0].host = strdup("example.com");
	allow[0].pos.line = 3;
	allow[1].host = strdup("example.net");
	allow[1].wildcard = true;
	cr->name = strdup("example.com/authorization");
	cr->host.host = strdup("example.com");
	cr->header = strdup("Authorization");
	cr->value.value = strdup("Bearer topsecret");
	cr->value.len = strlen(cr->value.value);
	cr->value.ref = strdup("Bearer ${env:T}");
	heap->name = strdup("heap");
	heap->allow.v = allow;
	heap->allow.n = 2;
	heap->credentials = cr;
	heap->ncredentials = 1;
	heap->allow_private.v = calloc(1, sizeof(struct conf_cidr));
	heap->allow_private.v[0] = cidr("10.0.0.0", 8);
	heap->allow_private.n = 1;

	p = gw_policy_new(heap, NULL);
	assert_non_null(p);

	/* the configuration goes away (a reload); the claim's layer stays */
	free(allow[0].host);
	free(allow[1].host);
	free(allow);
	free(cr->name);
	free(cr->host.host);
	free(cr->header);
	free(cr->value.value);
	free(cr->value.ref);
	free(cr);
	free(heap->name);
	free(heap->allow_private.v);
	free(heap);

	assert_string_equal(gw_policy_name(p), "heap");
	assert_int_equal(gw_policy_mode(p), CONF_POLICY_ENFORCE);
	assert_int_equal(gw_policy_allow_private(p)->n, 1);
	assert_int_equal(gw_policy_check(p, "example.com", 443, &d), 0);
	assert_string_equal(d.rule, "example.com");
	assert_int_equal(d.pos.line, 3);
	assert_int_equal(gw_policy_check(p, "a.example.net", 443, &d), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_policy_credentials(p, "example.com", 443, collect_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.val[0], "Bearer topsecret");

	q = gw_policy_ref(p);
	assert_ptr_equal(p, q);
	gw_policy_unref(p);
	assert_int_equal(gw_policy_check(q, "example.com", 443, &d), 0);
	gw_policy_unref(q);
	gw_policy_unref(NULL);
	gw_policy_free(NULL);
	assert_null(gw_policy_ref(NULL));
	assert_string_equal(gw_policy_version(NULL), "");
	assert_string_equal(gw_policy_name(NULL), "");
	assert_null(gw_policy_allow_private(NULL));
}

static void test_check_addr(void **state)
{
	struct conf_cidr priv[] = { cidr("10.0.0.0", 8) };
	struct conf_policy q = base;
	struct gw_policy_decision d;
	struct sockaddr_storage ss;
	struct gw_policy *p;

	(void)state;
	q.mode = CONF_POLICY_REPORT;
	q.allow_private.v = priv;
	q.allow_private.n = 1;
	p = gw_policy_new(&q, NULL);
	assert_non_null(p);

	assert_int_equal(gw_addr_parse_literal("10.1.2.3", 8, &ss), 1);
	assert_int_equal(gw_policy_check_addr(p, (struct sockaddr *)&ss, &d), 0);
	assert_true(d.allow);
	assert_int_equal(d.reason, GW_R_NONE);
	assert_int_equal(gw_addr_check((struct sockaddr *)&ss, gw_policy_allow_private(p), NULL), 0);

	/* report mode does not open the private ranges */
	assert_int_equal(gw_addr_parse_literal("2130706433", 10, &ss), 1);
	assert_int_equal(gw_policy_check_addr(p, (struct sockaddr *)&ss, &d), -EACCES);
	assert_false(d.allow);
	assert_false(d.report_only);
	assert_int_equal(d.reason, GW_R_PRIVATE_ADDRESS);

	assert_int_equal(gw_addr_parse_literal("8.8.8.8", 7, &ss), 1);
	assert_int_equal(gw_policy_check_addr(p, (struct sockaddr *)&ss, &d), 0);
	assert_int_equal(gw_policy_check_addr(NULL, (struct sockaddr *)&ss, &d), -EACCES);
	gw_policy_free(p);
}

/* gw_policy_check_name(): what the DNS door answers. A name is allowed
 * when some port is (a rule without a port, or a rule's own port); a
 * deny without a port, an address or a bad name never is. */
static void test_check_name(void **state)
{
	static const struct {
		const char *host;
		int rc;
		enum gw_reason why;
	} v[] = {
		/* refusals first */
		{ "bad.example.org", -EACCES, GW_R_DENIED },     /* deny, every port */
		{ "x.evil.example.org", -EACCES, GW_R_DENIED },
		{ "other.test", -EACCES, GW_R_NOT_ALLOWED },
		{ "10.0.0.5", -EACCES, GW_R_BAD_HOST },          /* allowed as an address */
		{ "Example.com", -EACCES, GW_R_BAD_HOST },       /* not normalised */
		{ "", -EACCES, GW_R_BAD_HOST },
		{ "example.org", -EACCES, GW_R_NOT_ALLOWED },    /* a wildcard's apex */
		/* allowed */
		{ "example.com", 0, GW_R_NONE },                 /* 80/443; 8080 denied */
		{ "a.example.org", 0, GW_R_NONE },
		{ "api.internal.test", 0, GW_R_NONE },           /* 8443 only */
		{ "a.svc.test", 0, GW_R_NONE },                  /* *.svc.test:9000 */
		{ "good.evil.example.org", -EACCES, GW_R_DENIED }, /* deny wins */
	};
	struct gw_policy *p = gw_policy_new(&base, NULL), *n;
	struct conf_hostpats narrow = LIST(tenant_egress);
	struct gw_policy_decision d;

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		int rc = gw_policy_check_name(p, v[i].host, &d);

		if (rc != v[i].rc || d.reason != v[i].why)
			fail_msg("%s: rc %d reason %d, wanted %d %d", v[i].host, rc, d.reason,
				 v[i].rc, v[i].why);
		assert_int_equal(d.allow, rc == 0);
	}
	assert_int_equal(gw_policy_check_name(NULL, "example.com", &d), -EACCES);
	gw_policy_free(p);
	/* narrowed: pypi.org is the tenant's on 443 only: still a name */
	n = gw_policy_new(&gh, &narrow);
	assert_int_equal(gw_policy_check_name(n, "pypi.org", &d), 0);
	assert_int_equal(gw_policy_check_name(n, "example.com", &d), -EACCES);
	assert_true(d.by_tenant);
	gw_policy_free(n);
}

/* ---- scale -------------------------------------------------------------- */

#define BIG 10000

static struct conf_hostpat big_allow[BIG];
static struct conf_hostpat big_deny[BIG / 10];
static char big_names[BIG + BIG / 10][40];

static void test_ten_thousand_rules(void **state)
{
	struct conf_policy q = { .name = "big" };
	struct gw_policy_decision d;
	struct gw_policy *p;
	char host[GW_HOST_MAX], want[GW_HOST_MAX + 8];
	size_t i;

	(void)state;
	for (i = 0; i < BIG; i++) {
		/* half exact names, half wildcards, some with ports */
		if (i % 2 == 0) {
			snprintf(big_names[i], sizeof(big_names[i]), "host%zu.example", i);
			big_allow[i].wildcard = false;
		} else {
			snprintf(big_names[i], sizeof(big_names[i]), "zone%zu.example", i);
			big_allow[i].wildcard = true;
		}
		big_allow[i].host = big_names[i];
		big_allow[i].port = i % 7 == 0 ? (uint16_t)(1000 + i % 50000) : 0;
		big_allow[i].pos.line = (uint32_t)(i + 1);
	}
	for (i = 0; i < BIG / 10; i++) {
		char *n = big_names[BIG + i];

		snprintf(n, sizeof(big_names[0]), "bad.zone%zu.example", 20 * i + 1);
		big_deny[i].host = n;
		big_deny[i].pos.line = (uint32_t)(BIG + i + 1);
	}
	q.allow.v = big_allow;
	q.allow.n = BIG;
	q.deny.v = big_deny;
	q.deny.n = BIG / 10;
	p = gw_policy_new(&q, NULL);
	assert_non_null(p);

	for (i = 0; i < BIG; i++) {
		uint16_t port = big_allow[i].port ? big_allow[i].port : 443;

		if (i % 2 == 0) {
			snprintf(host, sizeof(host), "host%zu.example", i);
			assert_int_equal(gw_policy_check(p, host, port, &d), 0);
			if (big_allow[i].port)
				snprintf(want, sizeof(want), "%s:%u", host, (unsigned)port);
			else
				snprintf(want, sizeof(want), "%s", host);
			assert_string_equal(d.rule, want);
			snprintf(host, sizeof(host), "www.host%zu.example", i);
			assert_int_equal(gw_policy_check(p, host, port, &d), -EACCES);
		} else {
			snprintf(host, sizeof(host), "a.b.zone%zu.example", i);
			assert_int_equal(gw_policy_check(p, host, port, &d), 0);
			assert_int_equal(d.pos.line, i + 1);
			snprintf(host, sizeof(host), "zone%zu.example", i);
			assert_int_equal(gw_policy_check(p, host, port, &d), -EACCES);
			assert_int_equal(d.reason, GW_R_NOT_ALLOWED);
		}
	}
	for (i = 0; i < BIG / 10; i++) {
		snprintf(host, sizeof(host), "bad.zone%zu.example", 20 * i + 1);
		assert_int_equal(gw_policy_check(p, host, 443, &d), -EACCES);
		assert_int_equal(d.reason, GW_R_DENIED);
		assert_int_equal(d.pos.line, BIG + i + 1);
	}
	assert_int_equal(gw_policy_check(p, "host10001.example", 443, &d), -EACCES);
	assert_int_equal(gw_policy_check(p, "example", 443, &d), -EACCES);
	gw_policy_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalize_refusals),
		cmocka_unit_test(test_normalize_ok),
		cmocka_unit_test(test_new_refusals),
		cmocka_unit_test(test_check_enforce),
		cmocka_unit_test(test_check_normalised_input),
		cmocka_unit_test(test_check_report),
		cmocka_unit_test(test_check_narrowed),
		cmocka_unit_test(test_intercepts),
		cmocka_unit_test(test_credentials),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_cred_slots),
		cmocka_unit_test(test_placeholders),
		cmocka_unit_test(test_version_kinds),
		cmocka_unit_test(test_lifetime),
		cmocka_unit_test(test_check_addr),
		cmocka_unit_test(test_check_name),
		cmocka_unit_test(test_ten_thousand_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

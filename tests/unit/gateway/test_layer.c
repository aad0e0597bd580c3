/* test_layer.c: a claim's layer saved to JSON and loaded back
 * (gw_policy_save(), conf_layer_from_json(), gw_policy_load()). Bad inputs
 * first. Layers are compiled from YAML through conf_load_mem(), as the
 * daemon makes them, then saved, dumped, parsed and loaded again: the loaded
 * layer must have the same version, decide every probe alike and inject the
 * same credentials, while the dump holds references, never resolved values. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "addr.h"
#include "conf.h"
#include "policy.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Resolved values: none may appear in a saved layer or an error. */
#define TOKEN "s3cr3t-TOKEN-value-771"
#define TOKEN2 "rotated-TOKEN-value-772"
#define OTHER "OTHER-secret-99"
#define FILESECRET "file-secret-xyz-42"
#define APIKEY "api-key-123"

static char secret_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	setenv("SL_TEST_LAYER_TOKEN", TOKEN, 1);
	setenv("SL_TEST_LAYER_OTHER", OTHER, 1);
	setenv("SL_TEST_LAYER_KEY", APIKEY, 1);
	unsetenv("SL_TEST_LAYER_UNSET");
	snprintf(secret_path, sizeof(secret_path), "/tmp/sl-test-layer-XXXXXX");
	fd = mkstemp(secret_path);
	if (fd < 0)
		return -1;
	if (write(fd, FILESECRET "\n", sizeof(FILESECRET)) != (ssize_t)sizeof(FILESECRET)) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(secret_path);
	return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);

	if (!j)
		fail_msg("bad test JSON: %s: %s", je.text, text);
	return j;
}

/* Loads `text` as a saved layer; expects a refusal whose one-line error
 * holds every string of `want` (NULL-terminated) and no secret value. */
static void expect_refused(const char *text, const char *const *want)
{
	char err[512];
	struct gw_policy *p;
	json_t *j = parse(text);

	memset(err, 'x', sizeof(err));
	errno = 0;
	p = gw_policy_load(j, err, sizeof(err));
	json_decref(j);
	if (p) {
		gw_policy_unref(p);
		fail_msg("accepted: %s", text);
	}
	assert_int_equal(errno, EINVAL);
	assert_non_null(memchr(err, '\0', sizeof(err)));
	assert_null(strchr(err, '\n'));
	for (; *want; want++)
		if (!strstr(err, *want))
			fail_msg("%s\n  error \"%s\" lacks \"%s\"", text, err, *want);
	assert_null(strstr(err, TOKEN));
	assert_null(strstr(err, OTHER));
	assert_null(strstr(err, FILESECRET));
	assert_null(strstr(err, APIKEY));
}

#define REFUSED(text, ...)                                                     \
	do {                                                                   \
		static const char *const w_[] = { __VA_ARGS__, NULL };         \
		expect_refused((text), w_);                                    \
	} while (0)

/* The rest of a valid saved layer, after the keys a case sets itself. */
#define TAIL "\"tenant_egress\": null}"

/* ---- refusals --------------------------------------------------------- */

static void test_not_an_object(void **state)
{
	char err[256];
	json_t *j;

	(void)state;
	assert_null(gw_policy_load(NULL, err, sizeof(err)));
	assert_string_equal(err, "layer: expected a JSON object (a saved layer), got nothing");

	j = json_array();
	assert_null(gw_policy_load(j, err, sizeof(err)));
	assert_string_equal(err, "layer: expected a JSON object (a saved layer), got an array");
	json_decref(j);

	j = json_string("{}");
	assert_null(gw_policy_load(j, err, sizeof(err)));
	assert_non_null(strstr(err, "got a string"));
	json_decref(j);

	/* errsz 0 and 1 write nothing past the buffer */
	j = json_null();
	assert_null(gw_policy_load(j, err, 0));
	err[0] = 'x';
	assert_null(gw_policy_load(j, err, 1));
	assert_int_equal(err[0], '\0');
	json_decref(j);
}

static void test_bad_keys_and_types(void **state)
{
	(void)state;
	REFUSED("{\"name\": \"a\", \"allwo\": [], " TAIL, "layer.allwo: ",
		"unknown key 'allwo'", "did you mean 'allow'");
	REFUSED("{\"name\": \"a\", \"secret\": 1, " TAIL, "layer.secret: unknown key");
	REFUSED("{\"allow\": [], " TAIL, "layer: missing required key 'name'");
	REFUSED("{\"name\": \"Bad Name\", " TAIL, "layer.name: ", "is not a name");
	REFUSED("{\"name\": \"a\", \"mode\": \"block\", " TAIL, "layer.mode: ",
		"expected one of enforce, report", "'block'");
	REFUSED("{\"name\": \"a\", \"mode\": null, " TAIL, "layer.mode: missing value");
	REFUSED("{\"name\": \"a\", \"mode\": [\"report\"], " TAIL, "layer.mode: ", "a list");
	REFUSED("{\"name\": \"a\", \"allow\": \"a.com\", " TAIL, "layer.allow: expected a list");
	REFUSED("{\"name\": \"a\", \"deny\": {\"a.com\": 1}, " TAIL,
		"layer.deny: expected a list, got a mapping");
}

static void test_bad_host_patterns(void **state)
{
	(void)state;
	REFUSED("{\"name\": \"a\", \"allow\": [\"a.com\", \"b.com\", \"bad host\"], " TAIL,
		"layer.allow[2]: bad host pattern 'bad host'");
	REFUSED("{\"name\": \"a\", \"allow\": [\"a.com:99999\"], " TAIL,
		"layer.allow[0]: ", "port must be 1..65535");
	REFUSED("{\"name\": \"a\", \"allow\": [\"a.com:0\"], " TAIL, "layer.allow[0]: ");
	REFUSED("{\"name\": \"a\", \"deny\": [\"a.*.com\"], " TAIL, "layer.deny[0]: ",
		"'*' is allowed only as a whole first label");
	REFUSED("{\"name\": \"a\", \"intercept\": [\"[2001:db8::1\"], " TAIL,
		"layer.intercept[0]: ", "unclosed '['");
	REFUSED("{\"name\": \"a\", \"allow\": [\"b\\u00fccher.de\"], " TAIL, "layer.allow[0]: ",
		"punycode");
	REFUSED("{\"name\": \"a\", \"allow\": [null], " TAIL, "layer.allow[0]: missing value");
	/* conf accepts it, compiling refuses it: a wildcard over an address */
	REFUSED("{\"name\": \"a\", \"allow\": [\"*.1.2.3.4\"], " TAIL,
		"layer: cannot compile: a host pattern does not normalise");
}

static void test_bad_cidrs(void **state)
{
	(void)state;
	REFUSED("{\"name\": \"a\", \"allow_private\": [\"10.0.0.0/8\", \"10.0.0.1/8\"], " TAIL,
		"layer.allow_private[1]: bad CIDR '10.0.0.1/8'", "host bits are set");
	REFUSED("{\"name\": \"a\", \"allow_private\": [\"fd00::/129\"], " TAIL,
		"layer.allow_private[0]: bad CIDR", "prefix length must be 0..128");
	REFUSED("{\"name\": \"a\", \"allow_private\": [\"intranet\"], " TAIL,
		"layer.allow_private[0]: bad CIDR");
	REFUSED("{\"name\": \"a\", \"allow_private\": \"10.0.0.0/8\", " TAIL,
		"layer.allow_private: expected a list");
}

static void test_bad_credentials(void **state)
{
	(void)state;
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", "
		"\"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}], "
		TAIL, "layer.credentials[0]: missing required key 'header'");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\"}], "
		TAIL, "layer.credentials[0]: missing required key 'value'");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"${env:SL_TEST_LAYER_TOKEN}\", \"scope\": 1}], " TAIL,
		"layer.credentials[0].scope: unknown key 'scope'");
	REFUSED("{\"name\": \"a\", \"credentials\": [\"a.com\"], " TAIL,
		"layer.credentials[0]: expected a mapping");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a b\", \"header\": \"X\", "
		"\"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}], " TAIL,
		"layer.credentials[0].host: bad host pattern");
	/* a bad header beside a good reference: the value stays out of it */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X Y\", "
		"\"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}], " TAIL,
		"layer.credentials[0].header: 'X Y' is not an HTTP header name");
	/* an unset variable: named with its path, nothing else */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"Bearer ${env:SL_TEST_LAYER_UNSET}\"}], " TAIL,
		"layer.credentials[0].value: environment variable SL_TEST_LAYER_UNSET is not set");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"${file:/nonexistent/sl-layer}\"}], " TAIL,
		"layer.credentials[0].value: cannot read secret file /nonexistent/sl-layer");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"${vault:x}\"}], " TAIL, "layer.credentials[0].value: unknown reference");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"\"}], " TAIL, "layer.credentials[0].value: the secret is empty");
	/* a literal value, in a saved layer as in a configuration */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"host\": \"a.com\", \"header\": \"X\", "
		"\"value\": \"v\"}], " TAIL,
		"layer.credentials[0].value: give the secret as ${env:NAME} or ${file:PATH}: a "
		"literal value would be kept wherever the layer is (the state file too)");
	/* the kinds' keys, in a saved layer too */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"kind\": \"basic\", \"host\": \"a.com\", "
		"\"password\": \"${env:SL_TEST_LAYER_TOKEN}\"}], " TAIL,
		"layer.credentials[0]: missing required key 'user'");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"kind\": \"vault\", \"host\": \"a.com\"}], "
		TAIL, "layer.credentials[0].kind: expected one of header, basic, placeholder, query");
	/* a saved name may be one sluice made ("a.com:443/x"), never one that
	 * splits the inject= list */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"name\": \"a.com/x,b\", \"host\": \"a.com\", "
		"\"header\": \"X\", \"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}], " TAIL,
		"layer.credentials[0].name: not a credential name");
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"name\": \"a b\", \"host\": \"a.com\", "
		"\"header\": \"X\", \"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}], " TAIL,
		"layer.credentials[0].name: not a credential name");
	/* a saved sentinel must be one sluice made */
	REFUSED("{\"name\": \"a\", \"credentials\": [{\"kind\": \"placeholder\", "
		"\"host\": \"a.com\", \"env\": \"T\", \"value\": \"${env:SL_TEST_LAYER_TOKEN}\", "
		"\"sentinel\": \"sluice-ph-XYZ\"}], " TAIL,
		"layer.credentials[0].sentinel: not a sentinel sluice made");
}

static void test_bad_tenant_egress(void **state)
{
	(void)state;
	REFUSED("{\"name\": \"a\", \"allow\": [\"a.com\"]}",
		"layer: missing required key 'tenant_egress'");
	REFUSED("{\"name\": \"a\", \"tenant_egress\": \"a.com\"}",
		"layer.tenant_egress: expected a list of host patterns or null, got a string");
	REFUSED("{\"name\": \"a\", \"tenant_egress\": \"null\"}",
		"layer.tenant_egress: expected a list");
	REFUSED("{\"name\": \"a\", \"tenant_egress\": {}}",
		"layer.tenant_egress: expected a list", "a mapping");
	REFUSED("{\"name\": \"a\", \"tenant_egress\": false}", "layer.tenant_egress: ");
	REFUSED("{\"name\": \"a\", \"tenant_egress\": [\"a.com\", \"*.*.b\"]}",
		"layer.tenant_egress[1]: bad host pattern");
}

static void test_many_errors(void **state)
{
	char err[512];
	struct conf_diag d;
	json_t *j;

	(void)state;
	j = parse("{\"name\": \"a\", \"mode\": \"x\", \"allow\": [\"a b\"], "
		  "\"allow_private\": [\"1.2.3.4/8\"], \"tenant_egress\": 3}");
	conf_diag_init(&d);
	assert_null(conf_layer_from_json(j, &d));
	assert_int_equal(d.n, 4);
	assert_non_null(strstr(d.lines[0], "layer.mode: "));
	assert_non_null(strstr(d.lines[1], "layer.allow[0]: "));
	assert_non_null(strstr(d.lines[2], "layer.allow_private[0]: "));
	assert_non_null(strstr(d.lines[3], "layer.tenant_egress: "));
	conf_diag_fini(&d);

	assert_null(gw_policy_load(j, err, sizeof(err)));
	assert_non_null(strstr(err, "layer.mode: "));
	assert_non_null(strstr(err, " (and 3 more)"));
	json_decref(j);

	/* a short buffer cuts, and terminates */
	j = parse("{\"name\": \"a\", \"mode\": \"x\", " TAIL);
	assert_null(gw_policy_load(j, err, 8));
	assert_string_equal(err, "layer.m");
	json_decref(j);

	/* conf_layer_free(NULL) is a no-op */
	conf_layer_free(NULL);
}

/* ---- the layer as conf reads it --------------------------------------- */

static void test_layer_fields(void **state)
{
	struct conf_diag d;
	struct conf_layer *l;
	json_t *j;

	(void)state;
	j = parse("{\"name\": \"p\", \"mode\": \"report\", \"allow\": [\"*.A.b:443\"], "
		  "\"credentials\": [{\"host\": \"a.b\", \"header\": \"X-K\", "
		  "\"value\": \"k ${env:SL_TEST_LAYER_TOKEN}\"}], "
		  "\"allow_private\": [\"fd00::/8\"], \"tenant_egress\": []}");
	conf_diag_init(&d);
	l = conf_layer_from_json(j, &d);
	json_decref(j);
	assert_non_null(l);
	assert_int_equal(d.n, 0);
	assert_string_equal(l->policy->name, "p");
	assert_int_equal(l->policy->mode, CONF_POLICY_REPORT);
	assert_int_equal(l->policy->allow.n, 1);
	assert_string_equal(l->policy->allow.v[0].host, "a.b");
	assert_true(l->policy->allow.v[0].wildcard);
	assert_int_equal(l->policy->allow.v[0].port, 443);
	assert_int_equal(l->policy->allow.v[0].pos.line, 0);     /* not in a file */
	assert_int_equal(l->policy->ncredentials, 1);
	/* no name, no kind: a header, named after its host and header */
	assert_int_equal(l->policy->credentials[0].kind, CONF_CRED_HEADER);
	assert_string_equal(l->policy->credentials[0].name, "a.b/x-k");
	assert_string_equal(l->policy->credentials[0].header, "X-K");
	assert_false(l->policy->credentials[0].cleartext);
	assert_string_equal(l->policy->credentials[0].sentinel, "");
	assert_string_equal(l->policy->credentials[0].value.value, "k " TOKEN);
	assert_string_equal(l->policy->credentials[0].value.ref, "k ${env:SL_TEST_LAYER_TOKEN}");
	assert_int_equal(l->policy->credentials[0].value.pos.line, 0);
	assert_int_equal(l->policy->allow_private.n, 1);
	assert_true(l->has_narrow);
	assert_int_equal(l->narrow.n, 0);
	conf_layer_free(l);

	/* null: no tenant list; absent lists are empty; mode defaults */
	j = parse("{\"name\": \"q\", \"tenant_egress\": null}");
	l = conf_layer_from_json(j, &d);
	json_decref(j);
	assert_non_null(l);
	assert_false(l->has_narrow);
	assert_int_equal(l->policy->mode, CONF_POLICY_ENFORCE);
	assert_int_equal(l->policy->allow.n, 0);
	assert_int_equal(l->policy->ncredentials, 0);
	conf_layer_free(l);
	conf_diag_fini(&d);
}

/* ---- round trips ------------------------------------------------------ */

/* A format: both %s are secret_path. */
#define YAML \
	"policies:\n" \
	"  - name: full\n" \
	"    mode: report\n" \
	"    allow:\n" \
	"      - example.com\n" \
	"      - \"*.example.org:443\"\n" \
	"      - \"*.example.net\"\n" \
	"      - api.example.com:8443\n" \
	"      - Upper.Example.COM.\n" \
	"      - 93.184.216.34\n" \
	"      - 93.184.216.35:8080\n" \
	"      - 1572395043\n"                  /* 93.184.216.35, decimal */ \
	"      - \"[2001:db8::1]:443\"\n" \
	"      - 2001:db8::2\n" \
	"      - \"[2001:DB8:0::3]\"\n" \
	"      - \"[::ffff:93.184.216.40]:443\"\n" \
	"      - example.com\n"                 /* a duplicate */ \
	"    deny:\n" \
	"      - bad.example.org\n" \
	"      - \"*.evil.example.org\"\n" \
	"      - 93.184.216.36\n" \
	"      - \"[2001:db8::1]:8443\"\n" \
	"    intercept:\n" \
	"      - \"*.example.org:443\"\n" \
	"      - example.com\n" \
	"      - \"[2001:db8::1]:443\"\n" \
	"    credentials:\n" \
	"      - host: \"*.example.org:443\"\n" \
	"        header: Authorization\n" \
	"        value: \"Bearer ${env:SL_TEST_LAYER_TOKEN}\"\n" \
	"      - host: a.example.org\n" \
	"        header: Authorization\n" \
	"        value: \"Basic ${env:SL_TEST_LAYER_OTHER}\"\n" \
	"      - host: api.example.org\n" \
	"        header: X-Api-Key\n" \
	"        value: \"${env:SL_TEST_LAYER_KEY}\"\n" \
	"      - host: example.com\n" \
	"        header: X-Mixed\n" \
	"        value: \"t-$${env:NOT_A_REF}-${env:SL_TEST_LAYER_OTHER}-${file:%s}\"\n" \
	"      - host: \"[2001:db8::1]:443\"\n" \
	"        header: X-V6\n" \
	"        value: \"${file:%s}\"\n" \
	"      - kind: basic\n"                 /* beats *.example.org's Authorization */ \
	"        host: basic.example.org\n" \
	"        user: bob\n" \
	"        password: \"${env:SL_TEST_LAYER_OTHER}\"\n" \
	"      - kind: placeholder\n" \
	"        name: ph\n" \
	"        host: \"*.example.org:443\"\n" \
	"        env: PH_TOKEN\n" \
	"        value: \"${env:SL_TEST_LAYER_TOKEN}\"\n" \
	"      - kind: query\n" \
	"        host: example.com\n" \
	"        param: api_key\n" \
	"        value: \"${env:SL_TEST_LAYER_KEY}\"\n" \
	"        cleartext: true\n" \
	"    allow_private:\n" \
	"      - 10.0.0.0/8\n" \
	"      - 192.168.1.0/24\n" \
	"      - fd00::/8\n" \
	"      - \"::1/128\"\n" \
	"      - 127.0.0.1\n" \
	"  - name: strict\n" \
	"    allow: [\"*.example.org\", example.com:443, 93.184.216.34, \"[2001:db8::1]:443\"]\n" \
	"    deny: [bad.example.org, \"*.example.net\"]\n" \
	"    credentials:\n" \
	"      - host: example.com:443\n" \
	"        header: Authorization\n" \
	"        value: \"Bearer ${env:SL_TEST_LAYER_TOKEN}\"\n" \
	"  - name: bare\n" \
	"tenants:\n" \
	"  - name: narrow\n" \
	"    keys: [k1-abcdefghijkl]\n" \
	"    egress: [\"*.example.org\", example.com:443, \"[2001:db8::1]:443\", 93.184.216.34,\n" \
	"             api.example.com:8443, \"*.example.net:8080\"]\n" \
	"  - name: nothing\n" \
	"    keys: [k2-abcdefghijkl]\n" \
	"    egress: []\n" \
	"  - name: open\n" \
	"    keys: [k3-abcdefghijkl]\n"

static const char *const probe_hosts[] = {
	"example.com", "www.example.com", "upper.example.com", "example.org",
	"a.example.org", "b.a.example.org", "bad.example.org", "evil.example.org",
	"x.evil.example.org", "api.example.com", "api.example.org", "example.net",
	"x.example.net", "93.184.216.34", "93.184.216.35", "93.184.216.36",
	"93.184.216.40", "2001:db8::1", "2001:db8::2", "2001:db8::3",
	"64:ff9b::5db8:d824",           /* NAT64 of the denied 93.184.216.36 */
	"other.test", "localhost", "BAD.example.org",
};
static const uint16_t probe_ports[] = { 0, 22, 80, 443, 8080, 8443 };

static struct conf *load_conf(void)
{
	char text[12288];
	struct conf_diag d;
	struct conf *c;

	snprintf(text, sizeof(text), YAML, secret_path, secret_path);
	conf_diag_init(&d);
	c = conf_load_mem("test.yaml", text, strlen(text), &d);
	if (!c)
		fail_msg("config refused: %s", d.n ? d.lines[0] : "?");
	conf_diag_fini(&d);
	return c;
}

struct creds {
	char buf[1024];
};

static int collect_cred(const struct conf_credential *c, void *arg)
{
	struct creds *cr = arg;
	size_t l = strlen(cr->buf);
	char what[128];

	/* what it sets: the header, Basic's user, ?param, $env */
	switch (c->kind) {
	case CONF_CRED_BASIC:
		snprintf(what, sizeof(what), "Basic(%s)", c->user);
		break;
	case CONF_CRED_QUERY:
		snprintf(what, sizeof(what), "?%s", c->param);
		break;
	case CONF_CRED_PLACEHOLDER:
		snprintf(what, sizeof(what), "$%s[%s]", c->env, c->sentinel);
		break;
	default:
		snprintf(what, sizeof(what), "%s", c->header);
		break;
	}
	snprintf(cr->buf + l, sizeof(cr->buf) - l, "%s%s %s=%.*s;", c->cleartext ? "!" : "",
		 c->name, what, (int)c->value.len, c->value.value);
	return 0;
}

/* gw_policy_placeholders() callback: the (one) sentinel into arg. */
static void one_sentinel(void *arg, const char *env, const char *sentinel)
{
	assert_string_equal(env, "PH_TOKEN");
	snprintf(arg, CONF_SENTINEL_LEN, "%s", sentinel);
}

static void same_decisions(const struct gw_policy *a, const struct gw_policy *b,
			   const char *what)
{
	static const char *const addrs[] = { "10.1.2.3", "127.0.0.1", "192.168.1.5",
					     "192.168.2.5", "fd00::1", "fe80::1", "::1",
					     "169.254.169.254", "93.184.216.34" };
	size_t i, k;

	for (i = 0; i < N(probe_hosts); i++) {
		for (k = 0; k < N(probe_ports); k++) {
			const char *h = probe_hosts[i];
			uint16_t port = probe_ports[k];
			struct gw_policy_decision da, db;
			struct creds ca = { "" }, cb = { "" };
			int ra = gw_policy_check(a, h, port, &da);
			int rb = gw_policy_check(b, h, port, &db);

			if (ra != rb || da.allow != db.allow || da.report_only != db.report_only ||
			    da.by_tenant != db.by_tenant || da.reason != db.reason ||
			    (!da.rule != !db.rule) || (da.rule && strcmp(da.rule, db.rule) != 0))
				fail_msg("%s: %s:%u: %d/%d/%d/%d/%s vs %d/%d/%d/%d/%s", what, h, port,
					 ra, da.allow, da.report_only, (int)da.reason,
					 da.rule ? da.rule : "-", rb, db.allow, db.report_only,
					 (int)db.reason, db.rule ? db.rule : "-");
			assert_int_equal(db.pos.line, 0);
			if (gw_policy_intercepts(a, h, port) != gw_policy_intercepts(b, h, port))
				fail_msg("%s: intercepts %s:%u differ", what, h, port);
			assert_int_equal(gw_policy_credentials(a, h, port, collect_cred, &ca), 0);
			assert_int_equal(gw_policy_credentials(b, h, port, collect_cred, &cb), 0);
			if (strcmp(ca.buf, cb.buf) != 0)
				fail_msg("%s: credentials for %s:%u differ", what, h, port);
		}
	}
	for (i = 0; i < N(addrs); i++) {
		struct sockaddr_storage ss;
		struct gw_policy_decision da, db;

		assert_int_equal(gw_addr_parse_literal(addrs[i], strlen(addrs[i]), &ss), 1);
		assert_int_equal(gw_policy_check_addr(a, (struct sockaddr *)&ss, &da),
				 gw_policy_check_addr(b, (struct sockaddr *)&ss, &db));
		assert_int_equal(da.allow, db.allow);
		assert_int_equal(da.reason, db.reason);
	}
	assert_string_equal(gw_policy_name(a), gw_policy_name(b));
	assert_int_equal(gw_policy_mode(a), gw_policy_mode(b));
	assert_string_equal(gw_policy_version(a), gw_policy_version(b));
}

/* gw_policy_save() as text: json_dumps() of it, checked for secrets. */
static char *save_text(const struct gw_policy *p)
{
	json_t *j = gw_policy_save(p);
	char *text;

	assert_non_null(j);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(text);
	if (strstr(text, TOKEN) || strstr(text, TOKEN2) || strstr(text, OTHER) ||
	    strstr(text, FILESECRET) || strstr(text, APIKEY))
		fail_msg("a resolved secret in the saved layer: %s", text);
	return text;
}

static struct gw_policy *load_text(const char *text)
{
	char err[512];
	json_t *j = parse(text);
	struct gw_policy *p = gw_policy_load(j, err, sizeof(err));

	json_decref(j);
	if (!p)
		fail_msg("refused: %s\n  %s", err, text);
	return p;
}

static void test_round_trip(void **state)
{
	static const char *const policies[] = { "full", "strict", "bare" };
	struct conf *c = load_conf();
	size_t i, t, checked = 0;

	(void)state;
	assert_int_equal(c->ntenants, 3);
	for (i = 0; i < N(policies); i++) {
		const struct conf_policy *po = conf_policy_find(c, policies[i]);

		assert_non_null(po);
		/* no tenant, then each tenant: a list, an empty list, none */
		for (t = 0; t <= c->ntenants; t++) {
			const struct conf_tenant *tn = t ? &c->tenants[t - 1] : NULL;
			char what[64], e[256], *text, *again;
			struct gw_policy *a = gw_policy_layer(c, policies[i], tn, NULL, e, sizeof(e)), *b;

			assert_non_null(a);
			snprintf(what, sizeof(what), "%s/%s", policies[i], tn ? tn->name : "-");
			text = save_text(a);
			b = load_text(text);
			same_decisions(a, b, what);
			/* saving the loaded layer gives the same text */
			again = save_text(b);
			assert_string_equal(text, again);
			free(again);
			if (strcmp(policies[i], "full") == 0) {
				/* references are kept, as written */
				assert_non_null(strstr(text, "Bearer ${env:SL_TEST_LAYER_TOKEN}"));
				assert_non_null(strstr(text, "t-$${env:NOT_A_REF}-${env:SL_TEST_LAYER_OTHER}"));
				assert_non_null(strstr(text, "\"[2001:db8::1]:443\""));
				assert_non_null(strstr(text, "\"*.example.org:443\""));
				assert_non_null(strstr(text, "\"fd00::/8\""));
				assert_non_null(strstr(text, "\"mode\":\"report\""));
				assert_non_null(strstr(text, "\"value\":\"${env:SL_TEST_LAYER_KEY}\""));
				/* each kind with its own keys, names given or made */
				assert_non_null(strstr(text, "{\"name\":\"*.example.org:443/authorization\","
							     "\"kind\":\"header\",\"host\":\"*.example.org:443\","
							     "\"header\":\"Authorization\","
							     "\"value\":\"Bearer ${env:SL_TEST_LAYER_TOKEN}\"}"));
				assert_non_null(strstr(text, "{\"name\":\"basic.example.org/authorization\","
							     "\"kind\":\"basic\",\"host\":\"basic.example.org\","
							     "\"user\":\"bob\","
							     "\"password\":\"${env:SL_TEST_LAYER_OTHER}\"}"));
				assert_non_null(strstr(text, "{\"name\":\"ph\",\"kind\":\"placeholder\","
							     "\"host\":\"*.example.org:443\",\"env\":\"PH_TOKEN\","
							     "\"value\":\"${env:SL_TEST_LAYER_TOKEN}\","
							     "\"sentinel\":\"sluice-ph-"));
				assert_non_null(strstr(text, "{\"name\":\"example.com/?api_key\","
							     "\"kind\":\"query\",\"host\":\"example.com\","
							     "\"param\":\"api_key\","
							     "\"value\":\"${env:SL_TEST_LAYER_KEY}\","
							     "\"cleartext\":true}"));
			}
			/* no tenant, or one without egress: no list */
			if (!tn || strcmp(tn->name, "open") == 0)
				assert_non_null(strstr(text, "\"tenant_egress\":null"));
			else if (strcmp(tn->name, "nothing") == 0)
				assert_non_null(strstr(text, "\"tenant_egress\":[]"));
			else
				assert_non_null(strstr(text, "\"tenant_egress\":[\"*.example.org"));
			free(text);
			gw_policy_unref(b);
			gw_policy_unref(a);
			checked++;
		}
	}
	assert_int_equal(checked, 12);
	conf_unref(c);
}

/* A placeholder's sentinel is the layer's: each compiled layer makes its
 * own, a saved and loaded layer keeps it (the guest holds it), the
 * version ignores it, and the saved text holds it but no value. */
static void test_sentinels_saved(void **state)
{
	struct conf *c = load_conf();
	const struct conf_policy *po = conf_policy_find(c, "full");
	struct gw_policy *a = gw_policy_new(po, NULL), *a2 = gw_policy_new(po, NULL), *b;
	char sa[CONF_SENTINEL_LEN] = "", sa2[CONF_SENTINEL_LEN] = "", sb[CONF_SENTINEL_LEN] = "";
	char *text, want[128];

	(void)state;
	assert_non_null(a);
	assert_non_null(a2);
	gw_policy_placeholders(a, one_sentinel, sa);
	gw_policy_placeholders(a2, one_sentinel, sa2);
	assert_true(conf_cred_sentinel_ok(sa));
	assert_true(conf_cred_sentinel_ok(sa2));
	assert_string_not_equal(sa, sa2);
	assert_string_equal(gw_policy_version(a), gw_policy_version(a2));

	text = save_text(a);
	snprintf(want, sizeof(want), "\"sentinel\":\"%s\"", sa);
	assert_non_null(strstr(text, want));
	assert_null(strstr(text, sa2));
	b = load_text(text);
	free(text);
	gw_policy_placeholders(b, one_sentinel, sb);
	assert_string_equal(sb, sa);
	assert_string_equal(gw_policy_version(b), gw_policy_version(a));
	assert_non_null(gw_policy_sentinel(b, sa, strlen(sa)));
	assert_null(gw_policy_sentinel(b, sa2, strlen(sa2)));
	/* the configuration's credential was never given one */
	for (size_t i = 0; i < po->ncredentials; i++)
		assert_string_equal(po->credentials[i].sentinel, "");
	gw_policy_unref(b);
	gw_policy_unref(a2);
	gw_policy_unref(a);
	conf_unref(c);
}

/* gw_policy_layer(), the one rule for a claim's layer: an unknown policy
 * is refused by name; the tenant's egress list narrows (an empty one
 * allows nothing); a tenant without a list, or none, does not. */
static void test_layer_rule(void **state)
{
	struct conf *c = load_conf();
	const struct conf_tenant *narrow = &c->tenants[0], *nothing = &c->tenants[1],
				 *open = &c->tenants[2];
	struct gw_policy *none, *l;
	struct gw_policy_decision d;
	char e[256];

	(void)state;
	errno = 0;
	assert_null(gw_policy_layer(c, "absent", narrow, NULL, e, sizeof(e)));
	assert_int_equal(errno, ENOENT);
	assert_string_equal(e, "no policy named \"absent\"");
	assert_null(gw_policy_layer(c, NULL, NULL, NULL, e, sizeof(e)));
	assert_int_equal(errno, ENOENT);

	none = gw_policy_layer(c, "strict", NULL, NULL, e, sizeof(e));
	assert_non_null(none);
	/* the setup: strict (enforced) allows a.example.org:443 */
	assert_int_equal(gw_policy_check(none, "a.example.org", 443, &d), 0);
	assert_int_equal(gw_policy_check(none, "api.example.com", 8443, &d), -EACCES);
	l = gw_policy_layer(c, "strict", open, NULL, e, sizeof(e));
	assert_string_equal(gw_policy_version(l), gw_policy_version(none));
	gw_policy_unref(l);
	/* narrow's list is part of the layer; it names api.example.com:8443,
	 * which the policy still refuses (the list narrows, never widens) */
	l = gw_policy_layer(c, "strict", narrow, NULL, e, sizeof(e));
	assert_string_not_equal(gw_policy_version(l), gw_policy_version(none));
	assert_int_equal(gw_policy_check(l, "a.example.org", 443, &d), 0);
	assert_int_equal(gw_policy_check(l, "api.example.com", 8443, &d), -EACCES);
	assert_false(d.by_tenant);
	gw_policy_unref(l);
	l = gw_policy_layer(c, "strict", nothing, NULL, e, sizeof(e));
	assert_int_equal(gw_policy_check(l, "a.example.org", 443, &d), -EACCES);
	assert_true(d.by_tenant);
	gw_policy_unref(l);
	gw_policy_unref(none);
	conf_unref(c);
}

static struct conf_creds *tenant_creds(const char *json)
{
	struct conf_diag d;
	struct conf_creds *tc;
	json_t *v = json_loads(json, 0, NULL);

	assert_non_null(v);
	conf_diag_init(&d);
	tc = conf_creds_from_json(v, "credentials", &d);
	if (!tc)
		fail_msg("refused: %s", d.n ? d.lines[0] : "?");
	conf_diag_fini(&d);
	json_decref(v);
	return tc;
}

struct tstate {
	char state[8], fp[CONF_CRED_FP_LEN], sentinel[CONF_SENTINEL_LEN];
	size_t tenant, policy;
};

static void tenant_seen(void *arg, const struct conf_credential *c, const char *host)
{
	struct tstate *t = arg;

	(void)host;
	if (!c->tenant) {
		t->policy++;
		return;
	}
	t->tenant++;
	snprintf(t->state, sizeof(t->state), "%s", c->lost ? "lost" : "held");
	snprintf(t->fp, sizeof(t->fp), "%s", c->fingerprint);
	snprintf(t->sentinel, sizeof(t->sentinel), "%s", c->sentinel);
}

static struct tstate tenant_state(const struct gw_policy *l)
{
	struct tstate t = { "", "", "", 0, 0 };

	gw_policy_each_credential(l, tenant_seen, &t);
	return t;
}

/* A tenant's credentials: compiled after the policy's, saved without the
 * value (a fingerprint instead), read back lost, supplied again with the
 * same fingerprint and version; a value that differs changes both; a name
 * the policy has is refused; literal values are never resolved. */
static void test_tenant_creds(void **state)
{
	struct conf *c = load_conf();
	const char *one = "[{\"name\": \"tk\", \"kind\": \"placeholder\", "
			  "\"host\": \"api.example.org\", \"env\": \"TK\", "
			  "\"value\": \"tenant-secret-1\"}]";
	const char *two = "[{\"name\": \"tk\", \"kind\": \"placeholder\", "
			  "\"host\": \"api.example.org\", \"env\": \"TK\", "
			  "\"value\": \"tenant-secret-2\"}]";
	struct conf_creds *tc = tenant_creds(one), *tc2 = tenant_creds(two), *lit, *clash;
	struct gw_policy *l, *loaded, *again, *other, *none;
	struct tstate t0, t1, t2, t3;
	char e[256], *text;
	json_t *saved;

	(void)state;
	l = gw_policy_layer(c, "strict", NULL, tc, e, sizeof(e));
	assert_non_null(l);
	t0 = tenant_state(l);
	assert_int_equal(t0.tenant, 1);
	assert_int_equal(t0.policy, 1);
	assert_string_equal(t0.state, "held");
	assert_true(conf_cred_fingerprint_ok(t0.fp));
	assert_true(conf_cred_sentinel_ok(t0.sentinel));
	/* saved: the fingerprint, never the value */
	saved = gw_policy_save(l);
	text = json_dumps(saved, 0);
	assert_null(strstr(text, "tenant-secret-1"));
	assert_non_null(strstr(text, t0.fp));
	assert_non_null(strstr(text, "\"tenant\": true"));
	free(text);
	/* read back: lost, the same sentinel, fingerprint and version */
	loaded = gw_policy_load(saved, e, sizeof(e));
	if (!loaded)
		fail_msg("load: %s", e);
	t1 = tenant_state(loaded);
	assert_string_equal(t1.state, "lost");
	assert_string_equal(t1.fp, t0.fp);
	assert_string_equal(t1.sentinel, t0.sentinel);
	assert_string_equal(gw_policy_version(loaded), gw_policy_version(l));
	/* supplied again: held, and still the same */
	again = gw_policy_with_tenant(loaded, tc, e, sizeof(e));
	if (!again)
		fail_msg("with_tenant: %s", e);
	t2 = tenant_state(again);
	assert_string_equal(t2.state, "held");
	assert_string_equal(t2.fp, t0.fp);
	assert_string_equal(t2.sentinel, t0.sentinel);
	assert_int_equal(t2.policy, 1);
	assert_string_equal(gw_policy_version(again), gw_policy_version(l));
	/* another value: another fingerprint and version, the same sentinel */
	other = gw_policy_with_tenant(again, tc2, e, sizeof(e));
	assert_non_null(other);
	t3 = tenant_state(other);
	assert_string_not_equal(t3.fp, t0.fp);
	assert_string_equal(t3.sentinel, t0.sentinel);
	assert_string_not_equal(gw_policy_version(other), gw_policy_version(l));
	/* none: the policy's own remain */
	none = gw_policy_with_tenant(other, NULL, e, sizeof(e));
	assert_non_null(none);
	t3 = tenant_state(none);
	assert_int_equal(t3.tenant, 0);
	assert_int_equal(t3.policy, 1);
	gw_policy_unref(none);
	/* a literal is never resolved */
	lit = tenant_creds("[{\"host\": \"a.example.org\", \"header\": \"X-K\", "
			   "\"value\": \"${env:SL_TEST_LAYER_TOKEN}\"}]");
	assert_int_equal(lit->v[0].value.len, strlen("${env:SL_TEST_LAYER_TOKEN}"));
	assert_memory_equal(lit->v[0].value.value, "${env:SL_TEST_LAYER_TOKEN}", lit->v[0].value.len);
	assert_true(lit->v[0].tenant);
	conf_creds_free(lit);
	/* a name of the policy's: refused */
	clash = tenant_creds("[{\"name\": \"ph\", "
			     "\"host\": \"a.example.org\", \"header\": \"X-K\", \"value\": \"v\"}]");
	errno = 0;
	assert_null(gw_policy_layer(c, "full", NULL, clash, e, sizeof(e)));
	assert_int_equal(errno, EEXIST);
	conf_creds_free(clash);
	json_decref(saved);
	gw_policy_unref(other);
	gw_policy_unref(again);
	gw_policy_unref(loaded);
	gw_policy_unref(l);
	conf_creds_free(tc2);
	conf_creds_free(tc);
	conf_unref(c);
}

/* What a tenant may not bring, each refused with its path and never its
 * value. */
static void test_tenant_creds_refused(void **state)
{
	static const char *const bad[][2] = {
		{ "{}", "credentials: expected an array" },
		{ "[{\"host\": \"a.b\", \"header\": \"Host\", \"value\": \"SECRETV\"}]",
		  "credentials[0].header: Host frames" },
		{ "[{\"host\": \"a.b\", \"header\": \"X\", \"value\": \"SECRETV\\r\\nX: y\"}]",
		  "credentials[0].value: empty, over" },
		{ "[{\"host\": \"a.b\", \"header\": \"X\", \"value\": 5}]",
		  "credentials[0].value: expected a string" },
		{ "[{\"host\": \"a.b\", \"header\": \"X\", \"value\": \"SECRETV\", "
		  "\"sentinel\": \"sluice-ph-00000000000000000000000000000000\"}]",
		  "credentials[0].sentinel: made by sluice" },
		{ "[{\"host\": \"a.b\", \"header\": \"X\", \"value\": \"SECRETV\", "
		  "\"tenant\": true}]", "credentials[0]" },
		{ "[{\"host\": \"a.b\", \"header\": \"X\", \"value\": \"SECRETV\"}, "
		  "{\"host\": \"a.b\", \"header\": \"X\", \"value\": \"SECRETV\"}]",
		  "credentials[1]: a second credential named" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct conf_diag d;
		json_t *v = json_loads(bad[i][0], 0, NULL);
		struct conf_creds *tc;

		assert_non_null(v);
		conf_diag_init(&d);
		tc = conf_creds_from_json(v, "credentials", &d);
		if (tc || d.n == 0 || strncmp(d.lines[0], bad[i][1], strlen(bad[i][1])) != 0)
			fail_msg("case %zu: %s", i, d.n ? d.lines[0] : "(accepted)");
		for (size_t k = 0; k < d.n; k++)
			assert_null(strstr(d.lines[k], "SECRETV"));
		conf_diag_fini(&d);
		json_decref(v);
	}
}

/* Spot checks that the probes mean something: the table is not all refusals. */
static void test_round_trip_decides(void **state)
{
	struct conf *c = load_conf();
	struct gw_policy *a = gw_policy_new(conf_policy_find(c, "full"), NULL), *b;
	struct gw_policy_decision d;
	struct creds cr = { "" };
	char *text, want[1024], sentinel[CONF_SENTINEL_LEN] = "";

	(void)state;
	assert_non_null(a);
	text = save_text(a);
	b = load_text(text);
	free(text);
	conf_unref(c);          /* the loaded layer needs no conf */
	gw_policy_placeholders(b, one_sentinel, sentinel);
	assert_true(conf_cred_sentinel_ok(sentinel));

	assert_int_equal(gw_policy_check(b, "a.example.org", 443, &d), 0);
	assert_false(d.report_only);
	assert_string_equal(d.rule, "*.example.org:443");
	assert_int_equal(gw_policy_check(b, "x.evil.example.org", 443, &d), 0);
	assert_true(d.report_only);             /* report mode */
	assert_int_equal(d.reason, GW_R_DENIED);
	assert_int_equal(gw_policy_check(b, "93.184.216.35", 443, &d), 0);
	assert_false(d.report_only);            /* 1572395043 */
	assert_true(gw_policy_intercepts(b, "2001:db8::1", 443));
	assert_int_equal(gw_policy_credentials(b, "a.example.org", 443, collect_cred, &cr), 0);
	snprintf(want, sizeof(want),
		 "a.example.org/authorization Authorization=Basic " OTHER ";"
		 "ph $PH_TOKEN[%s]=" TOKEN ";", sentinel);
	assert_string_equal(cr.buf, want);
	cr.buf[0] = '\0';
	assert_int_equal(gw_policy_credentials(b, "example.com", 443, collect_cred, &cr), 0);
	assert_string_equal(cr.buf, "example.com/x-mixed X-Mixed=t-${env:NOT_A_REF}-" OTHER "-"
				    FILESECRET ";!example.com/?api_key ?api_key=" APIKEY ";");
	cr.buf[0] = '\0';
	assert_int_equal(gw_policy_credentials(b, "2001:db8::1", 443, collect_cred, &cr), 0);
	assert_string_equal(cr.buf, "[2001:db8::1]:443/x-v6 X-V6=" FILESECRET ";");
	cr.buf[0] = '\0';
	assert_int_equal(gw_policy_credentials(b, "api.example.org", 443, collect_cred, &cr), 0);
	snprintf(want, sizeof(want),
		 "api.example.org/x-api-key X-Api-Key=" APIKEY ";"
		 "*.example.org:443/authorization Authorization=Bearer " TOKEN ";"
		 "ph $PH_TOKEN[%s]=" TOKEN ";", sentinel);
	assert_string_equal(cr.buf, want);
	/* Basic is Authorization: the exact host's Basic, not the wildcard's
	 * Bearer header */
	cr.buf[0] = '\0';
	assert_int_equal(gw_policy_credentials(b, "basic.example.org", 443, collect_cred, &cr), 0);
	snprintf(want, sizeof(want),
		 "basic.example.org/authorization Basic(bob)=" OTHER ";"
		 "ph $PH_TOKEN[%s]=" TOKEN ";", sentinel);
	assert_string_equal(cr.buf, want);
	gw_policy_unref(b);
	gw_policy_unref(a);
}

/* Values are resolved when the layer is loaded: a rotated secret is picked
 * up, the version (which hashes references, not values) stays. */
static void test_values_resolved_at_load(void **state)
{
	struct conf *c = load_conf();
	struct gw_policy *a = gw_policy_new(conf_policy_find(c, "strict"), NULL), *b;
	struct creds cr = { "" };
	char *text, err[512];
	json_t *j;

	(void)state;
	assert_non_null(a);
	text = save_text(a);
	setenv("SL_TEST_LAYER_TOKEN", TOKEN2, 1);
	b = load_text(text);
	assert_string_equal(gw_policy_version(a), gw_policy_version(b));
	assert_int_equal(gw_policy_credentials(b, "example.com", 443, collect_cred, &cr), 0);
	assert_string_equal(cr.buf, "example.com:443/authorization Authorization=Bearer " TOKEN2 ";");
	gw_policy_unref(b);

	/* gone from the environment: refused, naming the variable */
	unsetenv("SL_TEST_LAYER_TOKEN");
	j = parse(text);
	assert_null(gw_policy_load(j, err, sizeof(err)));
	assert_string_equal(err, "layer.credentials[0].value: environment variable "
				 "SL_TEST_LAYER_TOKEN is not set");
	json_decref(j);
	setenv("SL_TEST_LAYER_TOKEN", TOKEN, 1);

	free(text);
	gw_policy_unref(a);
	conf_unref(c);
}

/* A layer whose configuration changed since: the saved one comes back,
 * not what the new configuration would compile. */
static void test_config_changed(void **state)
{
	static const char changed[] = "policies:\n"
				      "  - name: strict\n"
				      "    allow: [\"*.example.com\", \"*.example.org\"]\n";
	struct conf *c = load_conf();
	struct gw_policy *a = gw_policy_new(conf_policy_find(c, "strict"),
					    &c->tenants[0].egress), *b, *fresh;
	struct conf_diag d;
	char *text;

	(void)state;
	assert_non_null(a);
	text = save_text(a);
	conf_unref(c);
	conf_diag_init(&d);
	c = conf_load_mem("new.yaml", changed, strlen(changed), &d);
	assert_non_null(c);
	conf_diag_fini(&d);
	fresh = gw_policy_new(conf_policy_find(c, "strict"), NULL);
	assert_non_null(fresh);
	assert_string_not_equal(gw_policy_version(fresh), gw_policy_version(a));
	b = load_text(text);
	same_decisions(a, b, "strict/narrow after a change");
	free(text);
	gw_policy_unref(fresh);
	gw_policy_unref(b);
	gw_policy_unref(a);
	conf_unref(c);
}

/* A layer pinned before wildcards over a public suffix were refused comes
 * back at a restart and decides as it did (a refusal would end its claim);
 * only the file and the API refuse them now (tests/unit/conf/test_conf_psl.c). */
static void test_saved_public_suffix_kept(void **state)
{
	struct gw_policy *b;
	struct gw_policy_decision d;

	(void)state;
	b = load_text("{\"name\": \"old\", \"allow\": [\"*.com\"], \"deny\": [\"*.bad.com\"], "
		      "\"tenant_egress\": [\"*.com\"]}");
	assert_int_equal(gw_policy_check(b, "anything.com", 443, &d), 0);
	assert_false(d.report_only);
	assert_string_equal(d.rule, "*.com");
	assert_int_equal(gw_policy_check(b, "x.bad.com", 443, &d), -EACCES);
	assert_int_equal(gw_policy_check(b, "example.org", 443, &d), -EACCES);
	gw_policy_unref(b);
}

static void test_save_refusals(void **state)
{
	static struct conf_hostpat host = { .host = (char *)"a.com" };
	struct conf_credential cred = { .name = (char *)"a.com/x", .host = { .host = (char *)"a.com" },
					.header = (char *)"X",
					.value = { .value = (char *)"v", .len = 1 } };
	struct conf_policy po = { .name = (char *)"hand", .credentials = &cred,
				  .ncredentials = 1, .allow = { &host, 1 } };
	struct gw_policy *p;

	(void)state;
	errno = 0;
	assert_null(gw_policy_save(NULL));
	assert_int_equal(errno, EINVAL);
	/* a value without its reference text: not saved (never the value) */
	p = gw_policy_new(&po, NULL);
	assert_non_null(p);
	errno = 0;
	assert_null(gw_policy_save(p));
	assert_int_equal(errno, EINVAL);
	gw_policy_unref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_an_object),
		cmocka_unit_test(test_bad_keys_and_types),
		cmocka_unit_test(test_bad_host_patterns),
		cmocka_unit_test(test_bad_cidrs),
		cmocka_unit_test(test_bad_credentials),
		cmocka_unit_test(test_bad_tenant_egress),
		cmocka_unit_test(test_many_errors),
		cmocka_unit_test(test_save_refusals),
		cmocka_unit_test(test_layer_fields),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_round_trip_decides),
		cmocka_unit_test(test_sentinels_saved),
		cmocka_unit_test(test_layer_rule),
		cmocka_unit_test(test_tenant_creds),
		cmocka_unit_test(test_tenant_creds_refused),
		cmocka_unit_test(test_values_resolved_at_load),
		cmocka_unit_test(test_config_changed),
		cmocka_unit_test(test_saved_public_suffix_kept),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

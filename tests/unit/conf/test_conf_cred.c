/* test_conf_cred.c: a policy's credentials in the configuration
 * (conf/conf_cred.c). Bad entries first, each with the exact
 * FILE:LINE:COL and message it must produce and no resolved secret in any
 * message: a key missing or of another kind, an unknown kind, the headers
 * no credential may set, values with CR, LF, NUL, non-ASCII, DEL, over
 * 8192 bytes or empty, literal values, bad variable names, users with
 * ':', duplicate names, a configured sentinel. Then every kind's shape,
 * the names sluice makes, the value bounds, and the helpers conf.h
 * exports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Resolved values (or pieces of them): none may appear in a message. */
#define ENV_SECRET "env-s3cret-Q9"
static const char *const secrets[] = {
	ENV_SECRET, "del-s3cret", "cr-s3cret", "cr-tail-C1", "lf-s3cret", "lf-tail-L1",
	"nul-s3cret", "nul-tail-N1", "hi-s3cret", "H1-tail", "BIGSECRET", "MAXSECRET",
	"tab-s3cret",
};

/* The secret files: @NAME@ in a case stands for NAME's path. */
struct sfile {
	const char *tag;
	char path[64];
	size_t len;
	char data[8200];
};

static struct sfile files[] = {
	{ .tag = "@CR@" }, { .tag = "@LF@" }, { .tag = "@NUL@" }, { .tag = "@HI@" },
	{ .tag = "@BIG@" }, { .tag = "@MAX@" }, { .tag = "@EMPTY@" }, { .tag = "@TAB@" },
};

static void
set_file(const char *tag, const char *data, size_t len)
{
	for (size_t i = 0; i < N(files); i++) {
		if (strcmp(files[i].tag, tag) == 0) {
			memcpy(files[i].data, data, len);
			files[i].len = len;
			return;
		}
	}
}

static int
setup(void **state)
{
	char big[8200];

	(void)state;
	setenv("SL_CRED", ENV_SECRET, 1);
	setenv("SL_CRED_DEL", "del-s3cret\x7f", 1);
	setenv("SL_CRED_EMPTY", "", 1);
	/* (a file's one trailing newline, or CRLF, is not part of it: these
	 * bytes are inside) */
	set_file("@CR@", "cr-s3cret\rcr-tail-C1", 20);
	set_file("@LF@", "lf-s3cret\nlf-tail-L1", 20);
	set_file("@NUL@", "nul-s3cret\0nul-tail-N1", 22);
	set_file("@HI@", "hi-s3cret-\xc3\xa9-H1-tail", 20);
	/* 8193 bytes, one over; 8191, so that one byte before it is the most */
	memset(big, 'b', sizeof(big));
	memcpy(big, "BIGSECRET", 9);
	set_file("@BIG@", big, 8193);
	memcpy(big, "MAXSECRET", 9);
	set_file("@MAX@", big, 8191);
	set_file("@EMPTY@", "", 0);
	set_file("@TAB@", "tab-s3cret\twith space ~!\n", 25);
	for (size_t i = 0; i < N(files); i++) {
		int fd;

		snprintf(files[i].path, sizeof(files[i].path), "/tmp/sl-test-cred-XXXXXX");
		fd = mkstemp(files[i].path);
		if (fd < 0)
			return -1;
		if (write(fd, files[i].data, files[i].len) != (ssize_t)files[i].len) {
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(files); i++)
		unlink(files[i].path);
	unsetenv("SL_CRED");
	unsetenv("SL_CRED_DEL");
	unsetenv("SL_CRED_EMPTY");
	return 0;
}

/* in with every @TAG@ replaced by its file's path, into out. */
static void
expand(const char *in, char *out, size_t outsz)
{
	size_t o = 0;

	while (*in) {
		size_t i;

		for (i = 0; i < N(files); i++) {
			size_t tl = strlen(files[i].tag), pl = strlen(files[i].path);

			if (strncmp(in, files[i].tag, tl) == 0) {
				assert_true(o + pl < outsz);
				memcpy(out + o, files[i].path, pl);
				o += pl;
				in += tl;
				break;
			}
		}
		if (i == N(files)) {
			assert_true(o + 1 < outsz);
			out[o++] = *in++;
		}
	}
	out[o] = '\0';
}

/* A configuration with policy p's credentials list `entries` (lines 4..). */
static struct conf *
load(const char *entries, struct conf_diag *d)
{
	char text[16384], yaml[16384];

	snprintf(text, sizeof(text), "policies:\n  - name: p\n    credentials:\n%s", entries);
	expand(text, yaml, sizeof(yaml));
	conf_diag_init(d);
	return conf_load_mem("t.yaml", yaml, strlen(yaml), d);
}

static void
no_secret_in(const struct conf_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		for (size_t k = 0; k < N(secrets); k++)
			if (strstr(d->lines[i], secrets[k]))
				fail_msg("a secret (%s) in: %s", secrets[k], d->lines[i]);
}

/* ---- refusals ---- */

struct bad_case {
	const char *name;
	const char *entries;
	const char *want;       /* the one diagnostic line expected */
};

/* Each yields exactly one error. */
static const struct bad_case bad_cases[] = {
	{ "header_no_header",
	  "      - { host: a.com, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'header'" },
	{ "header_no_value",
	  "      - { host: a.com, header: X-Key }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'value'" },
	{ "header_no_host",
	  "      - { header: X-Key, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'host'" },
	{ "basic_no_user",
	  "      - { kind: basic, host: a.com, password: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'user'" },
	{ "basic_no_password",
	  "      - { kind: basic, host: a.com, user: bob }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'password'" },
	{ "placeholder_no_env",
	  "      - { kind: placeholder, host: a.com, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'env'" },
	{ "placeholder_no_value",
	  "      - { kind: placeholder, host: a.com, env: GH_TOKEN }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'value'" },
	{ "query_no_param",
	  "      - { kind: query, host: a.com, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'param'" },
	{ "query_no_value",
	  "      - { kind: query, host: a.com, param: key }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'value'" },
	{ "basic_with_header",
	  "      - { kind: basic, host: a.com, user: bob, password: \"${env:SL_CRED}\", header: X }\n",
	  "t.yaml:4:84: policies[0].credentials[0].header: not a key of a basic credential" },
	{ "basic_with_value",
	  "      - { kind: basic, host: a.com, user: bob, password: \"${env:SL_CRED}\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:83: policies[0].credentials[0].value: not a key of a basic credential" },
	{ "header_with_user",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED}\", user: bob }\n",
	  "t.yaml:4:66: policies[0].credentials[0].user: not a key of a header credential" },
	{ "header_with_password",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED}\", password: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:70: policies[0].credentials[0].password: not a key of a header credential" },
	{ "query_with_env",
	  "      - { kind: query, host: a.com, param: k, value: \"${env:SL_CRED}\", env: K }\n",
	  "t.yaml:4:77: policies[0].credentials[0].env: not a key of a query credential" },
	{ "placeholder_with_param",
	  "      - { kind: placeholder, host: a.com, env: K, value: \"${env:SL_CRED}\", param: k }\n",
	  "t.yaml:4:83: policies[0].credentials[0].param: not a key of a placeholder credential" },
	{ "placeholder_with_header",
	  "      - { kind: placeholder, host: a.com, env: K, value: \"${env:SL_CRED}\", header: X }\n",
	  "t.yaml:4:84: policies[0].credentials[0].header: not a key of a placeholder credential" },
	{ "sigv4_missing_access_key_id",
	  "      - { kind: sigv4, host: a.com, secret: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:9: policies[0].credentials[0]: missing required key 'access_key_id'" },
	{ "sigv4_bad_access_key_id",
	  "      - { kind: sigv4, host: a.com, access_key_id: akid, secret: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:52: policies[0].credentials[0].access_key_id: an access key id is 16..128 of A-Z and 0-9" },
	{ "sigv4_literal_secret",
	  "      - { kind: sigv4, host: a.com, access_key_id: AKIAIOSFODNN7EXAMPLE, secret: \"literal-secret\" }\n",
	  "t.yaml:4:82: policies[0].credentials[0].secret: give the secret as ${env:NAME} or ${file:PATH}: a literal value would be kept wherever the layer is (the state file too)" },
	{ "sigv4_with_value",
	  "      - { kind: sigv4, host: a.com, access_key_id: AKIAIOSFODNN7EXAMPLE, secret: \"${env:SL_CRED}\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:107: policies[0].credentials[0].value: not a key of a sigv4 credential" },
	{ "unknown_kind",
	  "      - { kind: oauth, host: a.com, header: X, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:17: policies[0].credentials[0].kind: expected one of header, basic, placeholder, query, sigv4; got 'oauth'" },
	{ "unknown_key",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED}\", scope: all }\n",
	  "t.yaml:4:60: unknown key 'scope' in policies[0].credentials[0]" },
	{ "not_a_map",
	  "      - a.com\n",
	  "t.yaml:4:9: policies[0].credentials[0]: expected a mapping, got a string" },
	{ "forbidden_host",
	  "      - { host: a.com, header: Host, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Host frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_content-length",
	  "      - { host: a.com, header: content-length, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: content-length frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_transfer-encoding",
	  "      - { host: a.com, header: Transfer-Encoding, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Transfer-Encoding frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_connection",
	  "      - { host: a.com, header: Connection, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Connection frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_upgrade",
	  "      - { host: a.com, header: Upgrade, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Upgrade frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_te",
	  "      - { host: a.com, header: TE, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: TE frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_trailer",
	  "      - { host: a.com, header: Trailer, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Trailer frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_keep-alive",
	  "      - { host: a.com, header: Keep-Alive, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Keep-Alive frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_cookie",
	  "      - { host: a.com, header: Cookie, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Cookie frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_proxy-authorization",
	  "      - { host: a.com, header: Proxy-Authorization, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: Proxy-Authorization frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_proxy-connection",
	  "      - { host: a.com, header: PROXY-CONNECTION, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: PROXY-CONNECTION frames, routes or belongs to the proxy: not settable" },
	{ "forbidden_authority",
	  "      - { host: a.com, header: \":authority\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: ':authority' is not an HTTP header name" },
	{ "header_not_token",
	  "      - { host: a.com, header: \"X Key\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:32: policies[0].credentials[0].header: 'X Key' is not an HTTP header name" },
	{ "param_not_token",
	  "      - { kind: query, host: a.com, param: \"a=b\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:44: policies[0].credentials[0].param: 'a=b' is not a query parameter name" },
	{ "value_cr",
	  "      - { host: a.com, header: X, value: \"${file:@CR@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the value of ${file:@CR@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "value_lf",
	  "      - { host: a.com, header: X, value: \"${file:@LF@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the secret holds a line break" },
	{ "value_nul",
	  "      - { host: a.com, header: X, value: \"${file:@NUL@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the secret is holding a NUL byte" },
	{ "value_nonascii",
	  "      - { host: a.com, header: X, value: \"${file:@HI@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the value of ${file:@HI@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "value_del",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED_DEL}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the value of ${env:SL_CRED_DEL} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "value_big",
	  "      - { host: a.com, header: X, value: \"${file:@BIG@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the value of ${file:@BIG@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "value_big_env_prefix",
	  "      - { host: a.com, header: X, value: \"B ${file:@MAX@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the value of B ${file:@MAX@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "value_empty_file",
	  "      - { host: a.com, header: X, value: \"${file:@EMPTY@}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the secret is empty" },
	{ "value_empty_env",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED_EMPTY}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: the secret is empty" },
	{ "password_cr",
	  "      - { kind: basic, host: a.com, user: bob, password: \"${file:@CR@}\" }\n",
	  "t.yaml:4:58: policies[0].credentials[0].password: the value of ${file:@CR@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "query_value_nonascii",
	  "      - { kind: query, host: a.com, param: k, value: \"${file:@HI@}\" }\n",
	  "t.yaml:4:54: policies[0].credentials[0].value: the value of ${file:@HI@} is empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)" },
	{ "placeholder_value_lf",
	  "      - { kind: placeholder, host: a.com, env: K, value: \"${file:@LF@}\" }\n",
	  "t.yaml:4:58: policies[0].credentials[0].value: the secret holds a line break" },
	{ "literal",
	  "      - { host: a.com, header: X, value: \"Bearer hunter2\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: give the secret as ${env:NAME} or ${file:PATH}: a literal value would be kept wherever the layer is (the state file too)" },
	{ "literal_password",
	  "      - { kind: basic, host: a.com, user: bob, password: hunter2 }\n",
	  "t.yaml:4:58: policies[0].credentials[0].password: give the secret as ${env:NAME} or ${file:PATH}: a literal value would be kept wherever the layer is (the state file too)" },
	{ "literal_escaped_ref",
	  "      - { host: a.com, header: X, value: \"$${env:SL_CRED}\" }\n",
	  "t.yaml:4:42: policies[0].credentials[0].value: give the secret as ${env:NAME} or ${file:PATH}: a literal value would be kept wherever the layer is (the state file too)" },
	{ "bad_env_digit",
	  "      - { kind: placeholder, host: a.com, env: 1TOKEN, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:48: policies[0].credentials[0].env: '1TOKEN' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 64)" },
	{ "bad_env_dash",
	  "      - { kind: placeholder, host: a.com, env: GH-TOKEN, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:48: policies[0].credentials[0].env: 'GH-TOKEN' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 64)" },
	{ "bad_env_long",
	  "      - { kind: placeholder, host: a.com, env: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:48: policies[0].credentials[0].env: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 64)" },
	{ "bad_env_assign",
	  "      - { kind: placeholder, host: a.com, env: \"A=B\", value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:48: policies[0].credentials[0].env: 'A=B' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 64)" },
	{ "user_colon",
	  "      - { kind: basic, host: a.com, user: \"bob:x\", password: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:43: policies[0].credentials[0].user: a user has visible ASCII and no ':'" },
	{ "user_empty",
	  "      - { kind: basic, host: a.com, user: \"\", password: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:43: policies[0].credentials[0].user: a user has visible ASCII and no ':'" },
	{ "sentinel_configured",
	  "      - { kind: placeholder, host: a.com, env: K, value: \"${env:SL_CRED}\", sentinel: sluice-ph-00000000000000000000000000000000 }\n",
	  "t.yaml:4:86: policies[0].credentials[0].sentinel: made by sluice for each claim, not configured" },
	{ "name_comma",
	  "      - { name: \"a,b\", host: a.com, header: X, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:17: policies[0].credentials[0].name: a name is 1..64 token characters, no ','" },
	{ "name_space",
	  "      - { name: \"a b\", host: a.com, header: X, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:17: policies[0].credentials[0].name: a name is 1..64 token characters, no ','" },
	{ "name_long",
	  "      - { name: nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn, host: a.com, header: X, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:4:17: policies[0].credentials[0].name: a name is 1..64 token characters, no ','" },
	{ "cleartext_not_bool",
	  "      - { host: a.com, header: X, value: \"${env:SL_CRED}\", cleartext: maybe }\n",
	  "t.yaml:4:71: policies[0].credentials[0].cleartext: expected true or false, got 'maybe'" },
	{ "dup_name_given",
	  "      - { name: gh, host: a.com, header: X, value: \"${env:SL_CRED}\" }\n      - { name: gh, host: b.com, header: Y, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:5:9: policies[0].credentials[1]: a second credential named 'gh'" },
	{ "dup_name_default",
	  "      - { host: A.com, header: X-Key, value: \"${env:SL_CRED}\" }\n      - { host: a.com, header: x-key, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:5:9: policies[0].credentials[1]: a second credential named 'a.com/x-key'" },
	{ "dup_name_kinds",
	  "      - { kind: basic, host: a.com, user: u, password: \"${env:SL_CRED}\" }\n      - { host: a.com, header: Authorization, value: \"${env:SL_CRED}\" }\n",
	  "t.yaml:5:9: policies[0].credentials[1]: a second credential named 'a.com/authorization'" },
};

static void
test_bad_entries(void **state)
{
	(void)state;
	assert_true(N(bad_cases) >= 60);
	for (size_t i = 0; i < N(bad_cases); i++) {
		const struct bad_case *bc = &bad_cases[i];
		char want[1024];
		struct conf_diag d;
		struct conf *c;

		expand(bc->want, want, sizeof(want));
		c = load(bc->entries, &d);
		if (c || d.n != 1 || strcmp(d.lines[0], want) != 0) {
			fprintf(stderr, "case %s:\n  want: %s\n", bc->name, want);
			for (size_t k = 0; k < d.n; k++)
				fprintf(stderr, "  got:  %s\n", d.lines[k]);
			fail_msg("case %s", bc->name);
		}
		no_secret_in(&d);
		conf_unref(c);
		conf_diag_fini(&d);
	}
}

/* A bad host pattern is the host getter's message, whole. */
static void
test_bad_host(void **state)
{
	struct conf_diag d;

	(void)state;
	assert_null(load("      - { host: \"*.a.*.com\", header: X, value: \"${env:SL_CRED}\" }\n", &d));
	assert_int_equal(d.n, 1);
	assert_string_equal(d.lines[0], "t.yaml:4:17: policies[0].credentials[0].host: bad host "
					"pattern '*.a.*.com': '*' is allowed only as a whole first "
					"label ('*.example.com')");
	conf_diag_fini(&d);
}

/* Every error of every entry at once, in file order, none with a value; a
 * duplicate name found after a refused entry names its own index and
 * line. */
static void
test_all_at_once(void **state)
{
	static const char entries[] =
		"      - { host: a.com, value: \"${env:SL_CRED}\" }\n"
		"      - { name: gh, host: a.com, header: X, value: \"${env:SL_CRED}\" }\n"
		"      - { host: a.com, header: Cookie, value: \"${file:@CR@}\" }\n"
		"      - { name: gh, host: b.com, header: Y, value: \"${env:SL_CRED}\" }\n"
		"      - { kind: basic, host: a.com, user: \"a:b\", password: \"${file:@HI@}\" }\n";
	static const char *const want[] = {
		"t.yaml:4:9: policies[0].credentials[0]: missing required key 'header'",
		"t.yaml:6:32: policies[0].credentials[2].header: Cookie frames, routes or belongs "
		"to the proxy: not settable",
		"t.yaml:6:47: policies[0].credentials[2].value: the value of ${file:@CR@} is empty, "
		"over 8192 bytes, or has a byte other than visible ASCII, space and tab (not shown)",
		"t.yaml:7:9: policies[0].credentials[3]: a second credential named 'gh'",
		"t.yaml:8:43: policies[0].credentials[4].user: a user has visible ASCII and no ':'",
		"t.yaml:8:60: policies[0].credentials[4].password: the value of ${file:@HI@} is "
		"empty, over 8192 bytes, or has a byte other than visible ASCII, space and tab "
		"(not shown)",
	};
	struct conf_diag d;

	(void)state;
	assert_null(load(entries, &d));
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "  %s\n", d.lines[i]);
	assert_int_equal(d.n, N(want));
	for (size_t i = 0; i < d.n; i++) {
		char w[1024];

		expand(want[i], w, sizeof(w));
		assert_string_equal(d.lines[i], w);
	}
	no_secret_in(&d);
	conf_diag_fini(&d);
}

/* ---- what loads ---- */

static void
test_kinds(void **state)
{
	static const char entries[] =
		"      - { host: API.GitHub.com, header: Authorization, value: \"Bearer ${env:SL_CRED}\" }\n"
		"      - { kind: header, name: extra_1, host: \"*.example.com\", header: X-Key,\n"
		"          value: \"${file:@TAB@}\", cleartext: true }\n"
		"      - { kind: basic, host: git.example.org, user: x-access-token,\n"
		"          password: \"${env:SL_CRED}\" }\n"
		"      - { kind: placeholder, host: \"*.openai.com:443\", env: OPENAI_API_KEY,\n"
		"          value: \"${env:SL_CRED}\" }\n"
		"      - { kind: query, host: \"[2001:db8::1]:8443\", param: api_key,\n"
		"          value: \"k-${env:SL_CRED}\", cleartext: false }\n";
	const struct conf_credential *cd;
	const struct conf_policy *po;
	struct conf_diag d;
	struct conf *c;

	(void)state;
	c = load(entries, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(c);
	assert_int_equal(d.n, 0);
	po = conf_policy_find(c, "p");
	assert_non_null(po);
	assert_int_equal(po->ncredentials, 5);

	cd = &po->credentials[0];               /* no kind: a header */
	assert_int_equal(cd->kind, CONF_CRED_HEADER);
	assert_string_equal(cd->name, "api.github.com/authorization");
	assert_string_equal(cd->host.host, "api.github.com");
	assert_false(cd->host.wildcard);
	assert_int_equal(cd->host.port, 0);
	assert_string_equal(cd->header, "Authorization");
	assert_null(cd->user);
	assert_null(cd->param);
	assert_null(cd->env);
	assert_string_equal(cd->value.value, "Bearer " ENV_SECRET);
	assert_string_equal(cd->value.ref, "Bearer ${env:SL_CRED}");
	assert_false(cd->cleartext);
	assert_string_equal(cd->sentinel, "");
	assert_int_equal(cd->pos.line, 4);
	assert_int_equal(cd->pos.col, 9);

	cd = &po->credentials[1];               /* a name given, tab and space kept */
	assert_int_equal(cd->kind, CONF_CRED_HEADER);
	assert_string_equal(cd->name, "extra_1");
	assert_true(cd->host.wildcard);
	assert_string_equal(cd->host.host, "example.com");
	assert_string_equal(cd->header, "X-Key");
	assert_string_equal(cd->value.value, "tab-s3cret\twith space ~!");
	assert_int_equal(cd->value.len, 24);
	assert_true(cd->cleartext);
	assert_int_equal(cd->pos.line, 5);

	cd = &po->credentials[2];
	assert_int_equal(cd->kind, CONF_CRED_BASIC);
	assert_string_equal(cd->name, "git.example.org/authorization");
	assert_null(cd->header);
	assert_string_equal(cd->user, "x-access-token");
	assert_string_equal(cd->value.value, ENV_SECRET);
	assert_string_equal(cd->value.ref, "${env:SL_CRED}");
	assert_false(cd->cleartext);

	cd = &po->credentials[3];               /* the name has the port, lowercased */
	assert_int_equal(cd->kind, CONF_CRED_PLACEHOLDER);
	assert_string_equal(cd->name, "*.openai.com:443/$openai_api_key");
	assert_int_equal(cd->host.port, 443);
	assert_string_equal(cd->env, "OPENAI_API_KEY");
	assert_string_equal(cd->value.value, ENV_SECRET);
	assert_string_equal(cd->sentinel, "");  /* made per claim, not here */

	cd = &po->credentials[4];
	assert_int_equal(cd->kind, CONF_CRED_QUERY);
	assert_string_equal(cd->name, "[2001:db8::1]:8443/?api_key");
	assert_string_equal(cd->param, "api_key");
	assert_string_equal(cd->value.value, "k-" ENV_SECRET);
	assert_false(cd->cleartext);

	conf_unref(c);
	conf_diag_fini(&d);
}

/* The same header on two ports, and on a host with and without a
 * wildcard, are different credentials with different names. */
static void
test_default_names_differ(void **state)
{
	static const char entries[] =
		"      - { host: a.com, header: X-Key, value: \"${env:SL_CRED}\" }\n"
		"      - { host: \"a.com:443\", header: X-Key, value: \"${env:SL_CRED}\" }\n"
		"      - { host: \"a.com:8443\", header: X-Key, value: \"${env:SL_CRED}\" }\n"
		"      - { host: \"*.a.com\", header: X-Key, value: \"${env:SL_CRED}\" }\n"
		"      - { host: 2001:db8::1, header: X-Key, value: \"${env:SL_CRED}\" }\n";
	static const char *const want[] = {
		"a.com/x-key", "a.com:443/x-key", "a.com:8443/x-key", "*.a.com/x-key",
		"2001:db8::1/x-key",
	};
	struct conf_diag d;
	struct conf *c;

	(void)state;
	c = load(entries, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(c);
	assert_int_equal(c->policies[0].ncredentials, N(want));
	for (size_t i = 0; i < N(want); i++)
		assert_string_equal(c->policies[0].credentials[i].name, want[i]);
	conf_unref(c);
	conf_diag_fini(&d);
}

/* 8192 bytes is the most a value may have (a prefix counts). */
static void
test_value_bound(void **state)
{
	struct conf_diag d;
	struct conf *c;

	(void)state;
	c = load("      - { host: a.com, header: X, value: \"${file:@MAX@}\" }\n"
		 "      - { host: b.com, header: X, value: \"B${file:@MAX@}\" }\n", &d);
	assert_non_null(c);
	assert_int_equal(c->policies[0].credentials[0].value.len, 8191);
	assert_int_equal(c->policies[0].credentials[1].value.len, CONF_CRED_VALUE_MAX);
	conf_unref(c);
	conf_diag_fini(&d);
}

/* ---- the helpers ---- */

static void
test_helpers(void **state)
{
	static const char *const forbidden[] = {
		"Host", "HOST", "content-length", "Content-Length", "Transfer-Encoding",
		"Connection", "Upgrade", "TE", "te", "Trailer", "Keep-Alive", "Cookie",
		"Proxy-Authorization", "proxy-connection", "Proxy-", ":authority", ":path",
	};
	static const char *const settable[] = {
		"Authorization", "X-Api-Key", "Cookie2", "Set-Cookie", "Hosts", "TEs", "X-Host",
		"Trailers", "Proxy", "Content-Type",
	};
	char big[CONF_CRED_VALUE_MAX + 1];

	(void)state;
	for (size_t i = 0; i < N(forbidden); i++)
		if (!conf_cred_header_forbidden(forbidden[i]))
			fail_msg("%s: settable", forbidden[i]);
	for (size_t i = 0; i < N(settable); i++)
		if (conf_cred_header_forbidden(settable[i]))
			fail_msg("%s: forbidden", settable[i]);

	assert_int_equal(conf_cred_value_check("", 0), -1);
	assert_int_equal(conf_cred_value_check("a\rb", 3), -1);
	assert_int_equal(conf_cred_value_check("a\nb", 3), -1);
	assert_int_equal(conf_cred_value_check("a\0b", 3), -1);
	assert_int_equal(conf_cred_value_check("a\x7f", 2), -1);
	assert_int_equal(conf_cred_value_check("a\x1f", 2), -1);
	assert_int_equal(conf_cred_value_check("\xc3\xa9", 2), -1);
	assert_int_equal(conf_cred_value_check("a\tb c~!", 7), 0);
	memset(big, 'v', sizeof(big));
	assert_int_equal(conf_cred_value_check(big, CONF_CRED_VALUE_MAX), 0);
	assert_int_equal(conf_cred_value_check(big, CONF_CRED_VALUE_MAX + 1), -1);

	assert_false(conf_cred_sentinel_ok(""));
	assert_false(conf_cred_sentinel_ok("sluice-ph-"));
	assert_false(conf_cred_sentinel_ok("sluice-ph-0123456789abcdef0123456789abcde"));   /* 31 */
	assert_false(conf_cred_sentinel_ok("sluice-ph-0123456789abcdef0123456789abcdef0")); /* 33 */
	assert_false(conf_cred_sentinel_ok("sluice-ph-0123456789ABCDEF0123456789abcdef"));
	assert_false(conf_cred_sentinel_ok("sluice-ph-0123456789abcdeg0123456789abcdef"));
	assert_false(conf_cred_sentinel_ok("sluice-xx-0123456789abcdef0123456789abcdef"));
	assert_false(conf_cred_sentinel_ok("SLUICE-PH-0123456789abcdef0123456789abcdef"));
	assert_true(conf_cred_sentinel_ok("sluice-ph-0123456789abcdef0123456789abcdef"));
	assert_int_equal(strlen("sluice-ph-0123456789abcdef0123456789abcdef"), CONF_SENTINEL_LEN - 1);

	assert_string_equal(conf_cred_kind_name(CONF_CRED_HEADER), "header");
	assert_string_equal(conf_cred_kind_name(CONF_CRED_BASIC), "basic");
	assert_string_equal(conf_cred_kind_name(CONF_CRED_PLACEHOLDER), "placeholder");
	assert_string_equal(conf_cred_kind_name(CONF_CRED_QUERY), "query");
	assert_string_equal(conf_cred_kind_name(CONF_CRED_SIGV4), "sigv4");
	assert_string_equal(conf_cred_kind_name((enum conf_cred_kind)5), "?");
	assert_string_equal(conf_cred_kind_name((enum conf_cred_kind)-1), "?");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* bad inputs */
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_bad_host),
		cmocka_unit_test(test_all_at_once),
		/* good */
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_default_names_differ),
		cmocka_unit_test(test_value_bound),
		cmocka_unit_test(test_helpers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

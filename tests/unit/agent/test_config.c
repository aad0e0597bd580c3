/* test_config.c: the "configure" op's checks (agent/config.c) and the
 * environment and cwd it sets for later execs. Bad inputs first. */
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

#include "agent.h"

/* Checks the JSON text s; returns the rc, *field (copied: an unknown
 * field's name is borrowed from the request) and the message. */
static int
check(const char *s, struct agent_config *c, const char **field, char *err,
      size_t errsz)
{
	json_error_t je;
	json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &je);
	int rc;

	if (j == NULL)
		fail_msg("bad test JSON %s: %s", s, je.text);
	err[0] = 0;
	rc = agent_config_check(j, c, field, err, errsz);
	if (*field) {
		static char copy[128];

		snprintf(copy, sizeof(copy), "%s", *field);
		*field = copy;
	}
	json_decref(j);
	return rc;
}

static void
bad(const char *s, const char *want_field)
{
	struct agent_config c;
	const char *field = NULL;
	char err[256];

	assert_int_equal(check(s, &c, &field, err, sizeof(err)), -EINVAL);
	if (field == NULL || strcmp(field, want_field) != 0)
		fail_msg("%s: field %s, want %s (%s)", s,
			 field ? field : "(null)", want_field, err);
	/* the message names the field */
	if (strstr(err, want_field) == NULL)
		fail_msg("%s: message \"%s\" does not name %s", s, err,
			 want_field);
	/* a refused request leaves nothing to free */
	assert_null(c.env);
	assert_null(c.cwd);
	assert_null(c.ca);
}

static void
test_bad_types(void **state)
{
	(void)state;
	bad("{\"time_ns\": \"1\"}", "time_ns");
	bad("{\"time_ns\": 1.5e18}", "time_ns");
	bad("{\"time_ns\": true}", "time_ns");
	bad("{\"entropy\": 5}", "entropy");
	bad("{\"hostname\": null}", "hostname");
	bad("{\"net\": \"eth0\"}", "net");
	bad("{\"net\": []}", "net");
	bad("{\"net\": {\"mtu\": \"1500\"}}", "net.mtu");
	bad("{\"net\": {\"address\": 1}}", "net.address");
	bad("{\"net\": {\"ifname\": 1}}", "net.ifname");
	bad("{\"env\": []}", "env");
	bad("{\"env\": {\"A\": 1}}", "env");
	bad("{\"env\": {\"A\": null}}", "env");
	bad("{\"cwd\": 7}", "cwd");
	bad("{\"ca\": 7}", "ca");
	bad("{\"ca\": null}", "ca");
	bad("{\"ca\": \"\"}", "ca");
	bad("{\"ca\": \"not pem\"}", "ca");
	bad("{\"ca\": \"-----BEGIN PRIVATE KEY-----\\nQUJD\\n-----END PRIVATE KEY-----\\n\"}",
	    "ca");
	/* a good field before a bad one leaves nothing allocated either */
	bad("{\"ca\": \"-----BEGIN CERTIFICATE-----\\nQUJD\\n-----END CERTIFICATE-----\\n\", "
	    "\"cwd\": 1}", "cwd");
}

static void
test_bad_time(void **state)
{
	(void)state;
	bad("{\"time_ns\": -1}", "time_ns");
	bad("{\"time_ns\": 0}", "time_ns");
	/* seconds or milliseconds sent by mistake */
	bad("{\"time_ns\": 1700000000}", "time_ns");
	bad("{\"time_ns\": 1700000000000}", "time_ns");
	bad("{\"time_ns\": 9223372036854775807}", "time_ns");
	bad("{\"time_ns\": 7258118400000000001}", "time_ns");
}

static void
test_bad_entropy(void **state)
{
	char big[1024], js[1200];

	(void)state;
	bad("{\"entropy\": \"\"}", "entropy");
	bad("{\"entropy\": \"not base64 at all!!\"}", "entropy");
	/* 15 bytes: one short */
	bad("{\"entropy\": \"AAAAAAAAAAAAAAAAAAAA\"}", "entropy");
	/* no padding */
	bad("{\"entropy\": \"AAAAAAAAAAAAAAAAAAAAAAA\"}", "entropy");
	/* data after padding, padding in the middle */
	bad("{\"entropy\": \"AAAAAAAAAAAAAAAAAAAAAA==AAAA\"}", "entropy");
	bad("{\"entropy\": \"AA=AAAAAAAAAAAAAAAAAAAAA\"}", "entropy");
	/* whitespace, URL-safe alphabet */
	bad("{\"entropy\": \"AAAAAAAAAAAAAAAAAAAA AAA\"}", "entropy");
	bad("{\"entropy\": \"AAAAAAAAAAAAAAAAAAAAAA-_\"}", "entropy");
	/* 513 bytes */
	memset(big, 'A', 684);
	memcpy(big + 684, "AQ==", 5);
	snprintf(js, sizeof(js), "{\"entropy\": \"%s\"}", big);
	bad(js, "entropy");
	/* far too long */
	memset(big, 'A', 1000);
	big[1000] = 0;
	snprintf(js, sizeof(js), "{\"entropy\": \"%s\"}", big);
	bad(js, "entropy");
}

static void
test_bad_hostname(void **state)
{
	char js[256], h[80];

	(void)state;
	bad("{\"hostname\": \"\"}", "hostname");
	bad("{\"hostname\": \"a b\"}", "hostname");
	bad("{\"hostname\": \"a_b\"}", "hostname");
	bad("{\"hostname\": \"a/b\"}", "hostname");
	bad("{\"hostname\": \"h\\u00e9\"}", "hostname");
	memset(h, 'a', 65);
	h[65] = 0;
	snprintf(js, sizeof(js), "{\"hostname\": \"%s\"}", h);
	bad(js, "hostname");
}

static void
test_bad_net(void **state)
{
	(void)state;
	bad("{\"net\": {\"address\": \"10.0.0.2\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.2/\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.2/33\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.2/0\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.2/024\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.2/-1\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.256/24\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0/24\"}}", "net.address");
	bad("{\"net\": {\"address\": \"10.0.0.02/24\"}}", "net.address");
	bad("{\"net\": {\"address\": \"fd00::2/64\"}}", "net.address");
	bad("{\"net\": {\"address\": \" 10.0.0.2/24\"}}", "net.address");
	bad("{\"net\": {\"gateway\": \"10.0.0.1/24\"}}", "net.gateway");
	bad("{\"net\": {\"gateway\": \"fd00::1\"}}", "net.gateway");
	bad("{\"net\": {\"gateway\": \"10.0.0.1.\"}}", "net.gateway");
	bad("{\"net\": {\"gateway\": \"host\"}}", "net.gateway");
	/* a gateway off the subnet, or the address itself */
	bad("{\"net\": {\"address\": \"10.0.0.2/24\", \"gateway\": "
	    "\"10.0.1.1\"}}", "net.gateway");
	bad("{\"net\": {\"address\": \"10.0.0.2/24\", \"gateway\": "
	    "\"10.0.0.2\"}}", "net.gateway");
	bad("{\"net\": {\"mtu\": 67}}", "net.mtu");
	bad("{\"net\": {\"mtu\": 65536}}", "net.mtu");
	bad("{\"net\": {\"mtu\": -1500}}", "net.mtu");
	bad("{\"net\": {\"ifname\": \"\"}}", "net.ifname");
	bad("{\"net\": {\"ifname\": \"a23456789012345x\"}}", "net.ifname");
	bad("{\"net\": {\"ifname\": \"../x\"}}", "net.ifname");
	bad("{\"net\": {\"ifname\": \"e th\"}}", "net.ifname");
	bad("{\"net\": {\"ifname\": \"..\"}}", "net.ifname");
	bad("{\"net\": {\"dns\": \"10.0.0.1\"}}", "net");
}

static void
test_bad_env_cwd(void **state)
{
	struct agent_config c;
	const char *field;
	char err[256], name[300], js[400];
	json_t *j;

	(void)state;
	bad("{\"env\": {\"\": \"x\"}}", "env");
	bad("{\"env\": {\"A=B\": \"x\"}}", "env");
	bad("{\"env\": {\"1A\": \"x\"}}", "env");
	bad("{\"env\": {\"A-B\": \"x\"}}", "env");
	bad("{\"env\": {\"A B\": \"x\"}}", "env");
	memset(name, 'A', 257);
	name[257] = 0;
	snprintf(js, sizeof(js), "{\"env\": {\"%s\": \"x\"}}", name);
	bad(js, "env");
	bad("{\"cwd\": \"\"}", "cwd");
	bad("{\"cwd\": \"relative/dir\"}", "cwd");
	bad("{\"cwd\": \"./x\"}", "cwd");

	/* NUL inside a value or the cwd (jansson lets a caller build one) */
	j = json_pack("{s:{s:o}}", "env", "A", json_stringn("a\0b", 3));
	assert_int_equal(agent_config_check(j, &c, &field, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(field, "env");
	json_decref(j);
	j = json_pack("{s:o}", "cwd", json_stringn("/a\0b", 4));
	assert_int_equal(agent_config_check(j, &c, &field, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(field, "cwd");
	json_decref(j);
	j = json_pack("{s:o}", "hostname", json_stringn("a\0b", 3));
	assert_int_equal(agent_config_check(j, &c, &field, err, sizeof(err)),
			 -EINVAL);
	json_decref(j);
}

static void
test_unknown_fields(void **state)
{
	(void)state;
	bad("{\"op\": \"configure\", \"timezone\": \"UTC\"}", "timezone");
	bad("{\"time\": 1}", "time");
	/* a good field before a bad one: still refused, nothing kept */
	bad("{\"env\": {\"A\": \"b\"}, \"cwd\": \"/\", \"x\": 1}", "x");
}

static void
test_good(void **state)
{
	struct agent_config c;
	const char *field;
	char err[256];

	(void)state;
	assert_int_equal(check("{\"op\": \"configure\"}", &c, &field, err,
			       sizeof(err)), 0);
	assert_false(c.has_time || c.has_entropy || c.has_hostname ||
		     c.has_net || c.has_env || c.has_cwd);
	agent_config_fini(&c);

	assert_int_equal(
		check("{\"op\": \"configure\", \"time_ns\": 1700000000123456789,"
		      " \"entropy\": \"AAECAwQFBgcICQoLDA0ODw==\","
		      " \"hostname\": \"sbx-1.example\","
		      " \"net\": {\"ifname\": \"eth0\", \"address\": "
		      "\"10.0.0.2/24\", \"gateway\": \"10.0.0.1\", \"mtu\": 1400},"
		      " \"env\": {\"A\": \"1\", \"_b2\": \"x=y\", \"E\": \"\"},"
		      " \"cwd\": \"/work\"}",
		      &c, &field, err, sizeof(err)), 0);
	assert_true(c.has_time && c.time_ns == 1700000000123456789LL);
	assert_true(c.has_entropy);
	assert_int_equal(c.entropy_len, 16);
	for (int i = 0; i < 16; i++)
		assert_int_equal(c.entropy[i], i);
	assert_string_equal(c.hostname, "sbx-1.example");
	assert_true(c.has_net && c.has_address && c.has_gateway);
	assert_string_equal(c.ifname, "eth0");
	assert_int_equal(c.address, 0x0a000002);
	assert_int_equal(c.prefix, 24);
	assert_int_equal(c.gateway, 0x0a000001);
	assert_int_equal(c.mtu, 1400);
	assert_string_equal(c.env[0], "A=1");
	assert_string_equal(c.env[1], "_b2=x=y");
	assert_string_equal(c.env[2], "E=");
	assert_null(c.env[3]);
	assert_string_equal(c.cwd, "/work");
	agent_config_fini(&c);
	assert_int_equal(c.entropy[0], 0);

	/* /32 and a 512-byte entropy */
	{
		char b64[700], js[800];

		memset(b64, 'A', 680);
		memcpy(b64 + 680, "AAA=", 5);
		snprintf(js, sizeof(js),
			 "{\"entropy\": \"%s\", \"net\": {\"address\": "
			 "\"192.168.1.1/32\"}}", b64);
		assert_int_equal(check(js, &c, &field, err, sizeof(err)), 0);
		assert_int_equal(c.entropy_len, 512);
		assert_int_equal(c.prefix, 32);
		assert_string_equal(c.ifname, "");
		agent_config_fini(&c);
	}
}

static void
test_b64_ipv4(void **state)
{
	uint8_t out[8];
	uint32_t a;

	(void)state;
	assert_int_equal(agent_b64_decode("", 0, out, 8), 0);
	assert_int_equal(agent_b64_decode("Zg==", 4, out, 8), 1);
	assert_int_equal(out[0], 'f');
	assert_int_equal(agent_b64_decode("Zm8=", 4, out, 8), 2);
	assert_int_equal(agent_b64_decode("Zm9v", 4, out, 8), 3);
	/* non-zero unused bits, overflow */
	assert_int_equal(agent_b64_decode("Zh==", 4, out, 8), -1);
	assert_int_equal(agent_b64_decode("Zm9=", 4, out, 8), -1);
	assert_int_equal(agent_b64_decode("Zm9vZm9vZm9v", 12, out, 8), -1);
	assert_int_equal(agent_b64_decode("===", 3, out, 8), -1);
	assert_int_equal(agent_b64_decode("====", 4, out, 8), -1);
	assert_int_equal(agent_b64_decode("Z===", 4, out, 8), -1);

	assert_false(agent_ipv4_parse("", 0, &a));
	assert_false(agent_ipv4_parse("1.2.3", 5, &a));
	assert_false(agent_ipv4_parse("1.2.3.4.5", 9, &a));
	assert_false(agent_ipv4_parse("1..3.4", 6, &a));
	assert_false(agent_ipv4_parse("1.2.3.1000", 10, &a));
	assert_false(agent_ipv4_parse("01.2.3.4", 8, &a));
	assert_true(agent_ipv4_parse("0.0.0.0", 7, &a));
	assert_int_equal(a, 0);
	assert_true(agent_ipv4_parse("255.255.255.255", 15, &a));
	assert_int_equal(a, 0xffffffffu);

	assert_false(agent_hostname_ok("", 0));
	assert_false(agent_hostname_ok("a\0b", 3));
	assert_true(agent_hostname_ok("a-b.c", 5));
}

/* env and cwd land in the defaults; time and the rest are not applied
 * here (the e2e test does net and hostname in namespaces). */
static void
test_apply_env_cwd(void **state)
{
	struct agent_defaults d = { 0 };
	struct agent_config c;
	const char *field, *step;
	char err[256], **env = NULL;
	const char *set[] = { "B=over" };

	(void)state;
	assert_int_equal(check("{\"env\": {\"A\": \"1\", \"B\": \"2\"}, "
			       "\"cwd\": \"/tmp\"}", &c, &field, err,
			       sizeof(err)), 0);
	assert_int_equal(agent_config_apply(&c, &d, &step, err, sizeof(err)),
			 0);
	agent_config_fini(&c);
	assert_string_equal(d.cwd, "/tmp");
	assert_string_equal(d.env[0], "A=1");
	/* an exec's env merges over the configured one; PATH and HOME are
	 * still defaulted; nothing of the agent's own environment leaks */
	assert_int_equal(agent_env_build_over(d.env, NULL, set, 1, &env, err,
					      sizeof(err)), 0);
	{
		bool a = false, b = false, path = false, home = false;

		for (char **p = env; *p; p++) {
			a |= !strcmp(*p, "A=1");
			b |= !strcmp(*p, "B=over");
			path |= !strncmp(*p, "PATH=", 5);
			home |= !strcmp(*p, "HOME=/root");
		}
		assert_true(a && b && path && home);
	}
	agent_env_free(env);

	/* a second configure replaces the env whole */
	assert_int_equal(check("{\"env\": {\"C\": \"3\"}}", &c, &field, err,
			       sizeof(err)), 0);
	assert_int_equal(agent_config_apply(&c, &d, &step, err, sizeof(err)),
			 0);
	agent_config_fini(&c);
	assert_string_equal(d.env[0], "C=3");
	assert_null(d.env[1]);
	assert_string_equal(d.cwd, "/tmp");
	agent_defaults_fini(&d);
}

/* The defaults kept across a restart of the agent: malformed files first
 * (each leaves what was there), then a round trip. */
static void
test_defaults_file(void **state)
{
	static const char *const bad[] = {
		"", "[]", "{\"env\": 1}", "{\"env\": [1]}", "{\"env\": [\"NOEQUALS\"]}",
		"{\"cwd\": 7}", "{\"env\": [\"A=1\"], \"env\": [\"B=2\"]}", "{\"env\": [\"A=1\"",
	};
	char path[] = "/tmp/sl-test-defaults.XXXXXX";
	char *env[] = { "A=1", "PATH=/bin", NULL };
	struct agent_defaults d = { 0 }, in = { .env = env, .cwd = "/work" };
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(bad[i], f);
		fclose(f);
		assert_int_equal(agent_defaults_load(&d, path), -EINVAL);
		assert_null(d.env);
		assert_null(d.cwd);
	}
	assert_int_equal(agent_defaults_save(&in, path), 0);
	assert_int_equal(agent_defaults_load(&d, path), 0);
	assert_non_null(d.env);
	assert_string_equal(d.env[0], "A=1");
	assert_string_equal(d.env[1], "PATH=/bin");
	assert_null(d.env[2]);
	assert_string_equal(d.cwd, "/work");
	agent_defaults_fini(&d);
	unlink(path);
	assert_int_equal(agent_defaults_load(&d, path), -ENOENT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_types),
		cmocka_unit_test(test_bad_time),
		cmocka_unit_test(test_bad_entropy),
		cmocka_unit_test(test_bad_hostname),
		cmocka_unit_test(test_bad_net),
		cmocka_unit_test(test_bad_env_cwd),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_b64_ipv4),
		cmocka_unit_test(test_apply_env_cwd),
		cmocka_unit_test(test_defaults_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_access.c: gateway/doors/access.c, the access line's formatting.
 * Bad inputs first (a buffer too small at every length, values that try
 * to forge a field or break the JSON), then the fields of an intercepted
 * request, a tunnel and a plain request, in text and in JSON, and the
 * lines gw_access_write() puts in a file in each format. The layer's
 * version and the credentials injected (their names) end each line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "access.h"
#include "conf.h"
#include "conn.h"
#include "log.h"
#include "reason.h"

/* An intercepted request, every field set. */
static const struct gw_access intercepted = {
	.door = "forward",
	.client = "local",
	.src = "127.0.0.1:40000",
	.policy = "web",
	.method = "GET",
	.host = "origin.test",
	.port = 443,
	.decision = "allow",
	.reason = GW_R_NONE,
	.upstream = "10.99.0.10:443",
	.status = 200,
	.bytes_in = 77,
	.bytes_out = 300,
	.duration_ms = 4,
	.mode = "intercept",
	.sni = "origin.test",
	.alpn_down = "http/1.1",
	.alpn_up = "http/1.1",
	.layer = "0123456789abcdef",
	.inject = "api.github.com/authorization,origin.test/?key",
};

/* The value of key in a text line ("" when it is not there). */
static const char *
field(const char *line, const char *key, char *buf, size_t bufsz)
{
	size_t kl = strlen(key);

	buf[0] = '\0';
	for (const char *p = line; (p = strstr(p, key)); p += kl) {
		if ((p == line || p[-1] == ' ') && p[kl] == '=') {
			snprintf(buf, bufsz, "%.*s", (int)strcspn(p + kl + 1, " "), p + kl + 1);
			break;
		}
	}
	return buf;
}

static void
expect_field(const char *line, const char *key, const char *want)
{
	char buf[400];

	if (strcmp(field(line, key, buf, sizeof(buf)), want) != 0)
		fail_msg("%s=%s, want %s, in: %s", key, buf, want, line);
}

/* ---- bad inputs ---- */

/* Every buffer shorter than the line is refused whole (-1), never a line
 * cut short; the exact length and more fit. */
static void
test_too_small(void **state)
{
	char full[4096], out[4096];

	(void)state;
	for (int json = 0; json < 2; json++) {
		int n = gw_access_format(&intercepted, json, "2026-01-01T00:00:00.000Z", full,
					 sizeof(full));

		assert_true(n > 0);
		for (int sz = 0; sz <= n; sz++)
			assert_int_equal(gw_access_format(&intercepted, json,
							  "2026-01-01T00:00:00.000Z", out,
							  (size_t)sz),
					 -1);
		/* n + 1: the line and its NUL */
		assert_int_equal(gw_access_format(&intercepted, json, "2026-01-01T00:00:00.000Z",
						  out, (size_t)n + 1),
				 n);
		assert_string_equal(out, full);
	}
}

/* A server name (the guest's, untrusted) or an ALPN name with a space,
 * '=', a quote, a newline or a byte above 0x7e cannot add a field or a
 * line: in text each such byte is '?', in JSON it is escaped. */
static void
test_hostile_values(void **state)
{
	struct gw_access a = intercepted;
	char out[4096];
	int n;

	(void)state;
	a.sni = "evil.test status=999\n\"x\xff";
	a.alpn_down = "h2 mode=tunnel";
	a.alpn_up = "a=b";
	a.inject = "x status=1 layer=0";
	n = gw_access_format(&a, false, NULL, out, sizeof(out));
	assert_true(n > 0);
	assert_null(strchr(out, '\n'));
	expect_field(out, "sni", "evil.test?status?999??x?");
	expect_field(out, "alpn_down", "h2?mode?tunnel");
	expect_field(out, "alpn_up", "a?b");
	expect_field(out, "status", "200");
	expect_field(out, "mode", "intercept");
	expect_field(out, "inject", "x?status?1?layer?0");
	expect_field(out, "layer", "0123456789abcdef");

	n = gw_access_format(&a, true, "t", out, sizeof(out));
	assert_true(n > 0);
	assert_null(strchr(out, '\n'));
	assert_non_null(strstr(out, "\"sni\":\"evil.test status=999\\n\\\"x\\u00ff\""));
	assert_non_null(strstr(out, "\"alpn_down\":\"h2 mode=tunnel\""));
	assert_non_null(strstr(out, "\"status\":200,"));
	assert_non_null(strstr(out, "\"inject\":\"x status=1 layer=0\"}"));
}

/* ---- the fields ---- */

static void
test_text_intercepted(void **state)
{
	char out[4096];

	(void)state;
	assert_true(gw_access_format(&intercepted, false, NULL, out, sizeof(out)) > 0);
	assert_true(strncmp(out, "access door=forward client=local ", 33) == 0);
	expect_field(out, "host", "origin.test");
	expect_field(out, "status", "200");
	expect_field(out, "duration_ms", "4");
	expect_field(out, "mode", "intercept");
	expect_field(out, "sni", "origin.test");
	expect_field(out, "alpn_down", "http/1.1");
	expect_field(out, "alpn_up", "http/1.1");
	expect_field(out, "layer", "0123456789abcdef");
	expect_field(out, "inject", "api.github.com/authorization,origin.test/?key");
	/* the new fields come last, after the ones that were there */
	assert_non_null(strstr(out, " duration_ms=4 mode=intercept sni=origin.test "
				    "alpn_down=http/1.1 alpn_up=http/1.1 layer=0123456789abcdef "
				    "inject=api.github.com/authorization,origin.test/?key"));
	assert_int_equal(out[strlen(out) - 1], 'y');
}

/* What is not known is "-" in text, "" in JSON: a CONNECT tunnel (no
 * hello read, no TLS of ours), a refusal before any mode. */
static void
test_absent(void **state)
{
	struct gw_access a = intercepted;
	char out[4096];

	(void)state;
	a.mode = "tunnel";
	a.sni = a.alpn_down = a.alpn_up = NULL;
	a.inject = NULL;
	assert_true(gw_access_format(&a, false, NULL, out, sizeof(out)) > 0);
	expect_field(out, "mode", "tunnel");
	expect_field(out, "sni", "-");
	expect_field(out, "alpn_down", "-");
	expect_field(out, "alpn_up", "-");
	expect_field(out, "layer", "0123456789abcdef");
	expect_field(out, "inject", "-");

	/* a refusal before any policy: no layer either */
	a.mode = NULL;
	a.sni = "";
	a.layer = NULL;
	assert_true(gw_access_format(&a, false, NULL, out, sizeof(out)) > 0);
	expect_field(out, "mode", "-");
	expect_field(out, "sni", "-");
	expect_field(out, "layer", "-");
	expect_field(out, "inject", "-");

	assert_true(gw_access_format(&a, true, "t", out, sizeof(out)) > 0);
	assert_non_null(strstr(out, ",\"mode\":\"\",\"sni\":\"\",\"alpn_down\":\"\","
				    "\"alpn_up\":\"\",\"layer\":\"\",\"inject\":\"\"}"));
}

static void
test_json_intercepted(void **state)
{
	static const char head[] = "{\"ts\":\"2026-01-01T00:00:00.000Z\",\"level\":\"info\","
				   "\"msg\":\"access\",\"door\":\"forward\",";
	char out[4096];
	int n;

	(void)state;
	n = gw_access_format(&intercepted, true, "2026-01-01T00:00:00.000Z", out, sizeof(out));
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(out));
	assert_true(strncmp(out, head, strlen(head)) == 0);
	assert_non_null(strstr(out, ",\"duration_ms\":4,\"mode\":\"intercept\","
				    "\"sni\":\"origin.test\",\"alpn_down\":\"http/1.1\","
				    "\"alpn_up\":\"http/1.1\",\"layer\":\"0123456789abcdef\","
				    "\"inject\":\"api.github.com/authorization,origin.test/?key\"}"));
	assert_int_equal(out[n - 1], '}');
}

/* mode= names, and nothing for none or out of range. */
static void
test_mode_names(void **state)
{
	(void)state;
	assert_null(gw_conn_mode_name(GW_MODE_NONE));
	assert_string_equal(gw_conn_mode_name(GW_MODE_HTTP), "http");
	assert_string_equal(gw_conn_mode_name(GW_MODE_TUNNEL), "tunnel");
	assert_string_equal(gw_conn_mode_name(GW_MODE_INTERCEPT), "intercept");
	assert_null(gw_conn_mode_name(GW_MODE__COUNT));
	assert_null(gw_conn_mode_name((enum gw_conn_mode)-1));
}

/* ---- the log file ---- */

/* Reads what path holds into buf. */
static size_t
slurp(const char *path, char *buf, size_t bufsz)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, bufsz - 1, f);
	buf[n] = '\0';
	fclose(f);
	return n;
}

/* One line per write, ending in a newline: text after a timestamp, JSON
 * as one object. */
static void
test_write_file(void **state)
{
	char path[] = "/tmp/sl-test-access.XXXXXX", buf[8192];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(gw_access_setup(path), 0);
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, 2);
	gw_access_write(&intercepted);
	slurp(path, buf, sizeof(buf));
	assert_non_null(strstr(buf, "Z access door=forward "));
	assert_non_null(strstr(buf, " mode=intercept sni=origin.test alpn_down=http/1.1 "
				    "alpn_up=http/1.1 layer=0123456789abcdef "
				    "inject=api.github.com/authorization,origin.test/?key\n"));
	assert_int_equal(strchr(buf, '\n') - buf + 1, (long)strlen(buf));

	assert_int_equal(truncate(path, 0), 0);
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_JSON, 2);
	gw_access_write(&intercepted);
	slurp(path, buf, sizeof(buf));
	assert_true(strncmp(buf, "{\"ts\":\"", 7) == 0);
	assert_non_null(strstr(buf, "\"alpn_up\":\"http/1.1\",\"layer\":\"0123456789abcdef\","
				    "\"inject\":\"api.github.com/authorization,origin.test/?key\"}\n"));
	assert_int_equal(strchr(buf, '\n') - buf + 1, (long)strlen(buf));

	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, 2);
	assert_int_equal(gw_access_setup("off"), 0);
	unlink(path);
}

/* The longest line: every field at 299 bytes and an inject= list of
 * GW_INJECT_MAX names at CONF_CRED_NAME_MAX each goes whole, to a file
 * (text and JSON) and through the daemon's log (access_log: stderr, text;
 * a JSON line is written to stderr itself, not through the log). */
static void
test_longest_line(void **state)
{
	char path[] = "/tmp/sl-test-access.XXXXXX", buf[2 * GW_ACCESS_LINE_MAX];
	static char f[300], inj[GW_CONN_INJECT_MAX];
	struct gw_access a = intercepted;
	size_t o = 0;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	memset(f, 'f', sizeof(f) - 1);
	for (int i = 0; i < GW_INJECT_MAX; i++) {
		if (i)
			inj[o++] = ',';
		memset(inj + o, 'a' + i, CONF_CRED_NAME_MAX);
		o += CONF_CRED_NAME_MAX;
	}
	assert_true(o < sizeof(inj));
	a.client = a.src = a.policy = a.method = a.host = a.upstream = a.mode = a.sni = f;
	a.alpn_down = a.alpn_up = a.layer = f;
	a.inject = inj;
	a.bytes_in = a.bytes_out = a.duration_ms = UINT64_MAX;
	a.status = 999;
	a.port = 65535;
	assert_true(gw_access_format(&a, false, NULL, buf, GW_ACCESS_LINE_MAX) > 0);
	assert_true(gw_access_format(&a, true, "2026-01-01T00:00:00.000Z", buf, GW_ACCESS_LINE_MAX) > 0);

	for (int json = 0; json < 2; json++) {
		for (int via_log = 0; via_log < 2 - json; via_log++) {
			assert_int_equal(ftruncate(fd, 0), 0);
			gw_log_setup(CONF_LOG_INFO, json ? CONF_LOG_JSON : CONF_LOG_TEXT,
				     via_log ? fd : 2);
			assert_int_equal(gw_access_setup(via_log ? "stderr" : path), 0);
			gw_access_write(&a);
			slurp(path, buf, sizeof(buf));
			if (!strstr(buf, json ? "\"inject\":\"" : " inject=") ||
			    strncmp(strstr(buf, json ? "\"inject\":\"" : " inject=") +
					    (json ? 10 : 8), inj, o) != 0)
				fail_msg("json %d, through the log %d: inject= is not whole", json,
					 via_log);
			assert_int_equal(strchr(buf, '\n') - buf + 1, (long)strlen(buf));
		}
	}
	gw_log_setup(CONF_LOG_INFO, CONF_LOG_TEXT, 2);
	assert_int_equal(gw_access_setup("off"), 0);
	close(fd);
	unlink(path);
}

/* inject= from a request's credentials: every name, ','-separated, when
 * they fit; else as many as leave room for a visible "...". */
static void
test_inject_list(void **state)
{
	struct conf_credential c[3] = { { .name = (char *)"one" }, { .name = (char *)"two" },
					{ .name = (char *)"three" } };
	struct gw_conn_req r = { .inject = { &c[0], &c[1], &c[2] }, .ninject = 3 };
	char out[GW_CONN_INJECT_MAX];

	(void)state;
	gw_conn_req_inject(&r, out, sizeof(out));
	assert_string_equal(out, "one,two,three");
	gw_conn_req_inject(&r, out, 14);
	assert_string_equal(out, "one,two,three");
	gw_conn_req_inject(&r, out, 13);
	assert_string_equal(out, "one,two,...");
	gw_conn_req_inject(&r, out, 8);
	assert_string_equal(out, "one,...");
	gw_conn_req_inject(&r, out, 7);
	assert_string_equal(out, "...");
	gw_conn_req_inject(&r, out, 3);
	assert_string_equal(out, "");
	r.ninject = 0;
	gw_conn_req_inject(&r, out, sizeof(out));
	assert_string_equal(out, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* bad inputs */
		cmocka_unit_test(test_too_small),
		cmocka_unit_test(test_hostile_values),
		/* good */
		cmocka_unit_test(test_text_intercepted),
		cmocka_unit_test(test_absent),
		cmocka_unit_test(test_json_intercepted),
		cmocka_unit_test(test_mode_names),
		cmocka_unit_test(test_write_file),
		cmocka_unit_test(test_longest_line),
		cmocka_unit_test(test_inject_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

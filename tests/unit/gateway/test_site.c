/* test_site.c: gateway/api/site.c, the API's browser checks, as a table:
 * refusals first (each field's bad values, on TCP listeners of every
 * kind and on the unix socket), then what must pass (the CLI's Host for
 * every address it can be given, curl's, Prometheus', a same-origin page,
 * a typed navigation), then the messages. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../sl_test.h"
#include "site.h"

enum listener { L4, L6, ANY4, ANY6, L4_80, UNIX };

static const char *const listener_names[] = {"127.0.0.1:8080", "[::1]:8080",   "0.0.0.0:8080",
                                             "[::]:8080",      "127.0.0.1:80", "unix"};

static struct sockaddr_storage
listener_addr(enum listener l)
{
	struct sockaddr_storage ss;
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(8080)};
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(8080)};

	memset(&ss, 0, sizeof(ss));
	switch (l) {
	case L4:
	case UNIX:
		inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
		memcpy(&ss, &s4, sizeof(s4));
		break;
	case L4_80:
		inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
		s4.sin_port = htons(80);
		memcpy(&ss, &s4, sizeof(s4));
		break;
	case ANY4:
		memcpy(&ss, &s4, sizeof(s4));
		break;
	case L6:
		inet_pton(AF_INET6, "::1", &s6.sin6_addr);
		memcpy(&ss, &s6, sizeof(s6));
		break;
	case ANY6:
		memcpy(&ss, &s6, sizeof(s6));
		break;
	}
	return ss;
}

/* NULL: absent. A value with "\n" in it is the field given twice. */
struct row {
	enum listener l;
	const char *host, *origin, *fetch;
	enum gw_site_verdict want;
};

static struct gw_site_field
field(const char *v)
{
	struct gw_site_field f = {0};
	const char *nl;

	if (!v)
		return f;
	nl = strchr(v, '\n');
	f.p = v;
	f.len = nl ? (size_t)(nl - v) : strlen(v);
	f.n = nl ? 2 : 1;
	return f;
}

static void
run(const struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct sockaddr_storage ss = listener_addr(r->l);
		struct gw_site_self self = {.is_unix = r->l == UNIX,
		                            .addr = (const struct sockaddr *)&ss};
		struct gw_site_field h = field(r->host), o = field(r->origin), f = field(r->fetch);
		char msg[512] = "";
		enum gw_site_verdict v = gw_site_check(&self, &h, &o, &f, msg, sizeof(msg));

		if (v != r->want)
			fail_msg(
			    "row %zu (%s; Host %s, Origin %s, Sec-Fetch-Site %s): %d, want %d: %s",
			    i, listener_names[r->l], r->host ? r->host : "-",
			    r->origin ? r->origin : "-", r->fetch ? r->fetch : "-", v, r->want,
			    msg);
		if (v != GW_SITE_OK) {
			assert_true(msg[0] != '\0');
			assert_non_null(gw_site_code(v));
			/* one printable line */
			for (const char *p = msg; *p; p++)
				assert_true(*p >= 0x20 && *p < 0x7f);
		}
	}
}

#define OK   GW_SITE_OK
#define FS   GW_SITE_FETCH_SITE
#define ORIG GW_SITE_ORIGIN
#define HOST GW_SITE_HOST
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
test_fetch_site_refused(void **state)
{
	static const struct row rows[] = {
	    {L4, "127.0.0.1:8080", NULL, "cross-site", FS},
	    {L4, "127.0.0.1:8080", NULL, "same-site", FS}, /* localhost:3000 -> :8080 */
	    {L4, "127.0.0.1:8080", NULL, "Cross-Site", FS},
	    {L4, "127.0.0.1:8080", NULL, "", FS},
	    {L4, "127.0.0.1:8080", NULL, "same-origin, none", FS},
	    {L4, "127.0.0.1:8080", NULL, "same-origin-ish", FS},
	    {L4, "127.0.0.1:8080", NULL, "none\nnone", FS}, /* twice */
	    {L4, "127.0.0.1:8080", NULL, "same-origin\ncross-site", FS},
	    /* before Origin and Host are looked at */
	    {L4, "evil.test", "http://evil.test", "cross-site", FS},
	    {UNIX, NULL, NULL, "cross-site", FS},
	    {UNIX, "localhost", NULL, "same-site", FS},
	};

	(void)state;
	run(rows, N(rows));
}

static void
test_origin_refused(void **state)
{
	static const struct row rows[] = {
	    {L4, "127.0.0.1:8080", "null", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://evil.test", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://evil.test:8080", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "https://127.0.0.1:8080", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://127.0.0.1", NULL, ORIG}, /* port 80 */
	    {L4, "127.0.0.1:8080", "http://127.0.0.1:3000", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://localhost:3000", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://127.0.0.2:8080", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://127.0.0.1:8080/", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://127.0.0.1:8080.evil.test", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://[::1]:8080", NULL, ORIG}, /* another listener */
	    {L4, "127.0.0.1:8080", "http://user@127.0.0.1:8080", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "file://", NULL, ORIG},
	    {L4, "127.0.0.1:8080", "http://127.0.0.1:8080\nhttp://127.0.0.1:8080", NULL, ORIG},
	    /* a same-origin Sec-Fetch-Site does not excuse a foreign Origin */
	    {L4, "127.0.0.1:8080", "http://evil.test", "same-origin", ORIG},
	    {L6, "[::1]:8080", "http://127.0.0.1:8080", NULL, ORIG},
	    {L6, "[::1]:8080", "http://[::2]:8080", NULL, ORIG},
	    {ANY4, "10.1.2.3:8080", "http://evil.test:8080", NULL, ORIG},
	    /* the unix socket has no web origin at all */
	    {UNIX, "localhost", "http://localhost", NULL, ORIG},
	    {UNIX, NULL, "null", NULL, ORIG},
	    /* before Host is looked at */
	    {L4, "evil.test:8080", "http://evil.test:8080", NULL, ORIG},
	};

	(void)state;
	run(rows, N(rows));
}

static void
test_host_refused(void **state)
{
	static const struct row rows[] = {
	    /* DNS rebinding: the page's own name, resolved to us */
	    {L4, "evil.test:8080", NULL, NULL, HOST},
	    {L4, "evil.test:8080", NULL, "same-origin", HOST},
	    {L4, "evil.test:8080", "http://evil.test:8080", "same-origin", ORIG},
	    {L4, "evil.test", NULL, NULL, HOST},
	    {L4, "127.0.0.1.nip.io:8080", NULL, NULL, HOST},
	    {L4, "localhost.:8080", NULL, NULL, HOST},
	    {L4, "localhost.evil.test:8080", NULL, NULL, HOST},
	    {L4, "sub.localhost:8080", NULL, NULL, HOST},
	    /* our address, the wrong port, or none where it is not 80 */
	    {L4, "127.0.0.1", NULL, NULL, HOST},
	    {L4, "127.0.0.1:80", NULL, NULL, HOST},
	    {L4, "127.0.0.1:8081", NULL, NULL, HOST},
	    {L4, "localhost", NULL, NULL, HOST},
	    {L4, "127.0.0.1:", NULL, NULL, HOST},
	    {L4, "127.0.0.1:+8080", NULL, NULL, HOST},
	    {L4, "127.0.0.1:808000", NULL, NULL, HOST},
	    {L4, "127.0.0.1:8080:8080", NULL, NULL, HOST},
	    /* another address, or ours in another family */
	    {L4, "127.0.0.2:8080", NULL, NULL, HOST},
	    {L4, "10.0.0.1:8080", NULL, NULL, HOST},
	    {L4, "[::1]:8080", NULL, NULL, HOST},
	    {L4, "[::ffff:127.0.0.1]:8080", NULL, NULL, HOST},
	    {L6, "127.0.0.1:8080", NULL, NULL, HOST},
	    {L6, "[::2]:8080", NULL, NULL, HOST},
	    {L6, "[::1]", NULL, NULL, HOST},
	    {L6, "[::1:8080", NULL, NULL, HOST},
	    {L6, "[::1]8080", NULL, NULL, HOST},
	    {L6, "[localhost]:8080", NULL, NULL, HOST},
	    /* a wildcard listener: any IP literal, never a name */
	    {ANY4, "evil.test:8080", NULL, NULL, HOST},
	    {ANY4, "[::1]:8080", NULL, NULL, HOST},
	    {ANY4, "10.1.2.3:8081", NULL, NULL, HOST},
	    {ANY6, "evil.test:8080", NULL, NULL, HOST},
	    {ANY6, "10.1.2.3:8080", NULL, NULL, HOST},
	    /* absent (HTTP/1.0), empty */
	    {L4, NULL, NULL, NULL, HOST},
	    {L4, "", NULL, NULL, HOST},
	    {L4, ":8080", NULL, NULL, HOST},
	    /* bytes a page could put in a name */
	    {L4, "127.0.0.1:8080\x01", NULL, NULL, HOST},
	    {L4, "127.0.0.1\xc3\xa9:8080", NULL, NULL, HOST},
	};

	(void)state;
	run(rows, N(rows));
}

static void
test_allowed(void **state)
{
	static const struct row rows[] = {
	    /* the CLI: Host is the authority of --api as given */
	    {L4, "127.0.0.1:8080", NULL, NULL, OK},
	    {L4, "localhost:8080", NULL, NULL, OK},
	    {L4, "LocalHost:8080", NULL, NULL, OK},
	    {L6, "[::1]:8080", NULL, NULL, OK},
	    {L6, "localhost:8080", NULL, NULL, OK},
	    {L6, "[0:0:0:0:0:0:0:1]:8080", NULL, NULL, OK},
	    {L4_80, "127.0.0.1", NULL, NULL, OK},
	    {L4_80, "127.0.0.1:80", NULL, NULL, OK},
	    {L4_80, "localhost", NULL, NULL, OK},
	    /* the CLI and curl on the unix socket: anything, or nothing */
	    {UNIX, "localhost", NULL, NULL, OK},
	    {UNIX, "sluice", NULL, NULL, OK},
	    {UNIX, "evil.test:8080", NULL, NULL, OK},
	    {UNIX, NULL, NULL, NULL, OK},
	    {UNIX, NULL, NULL, "none", OK},
	    /* a wildcard listener: any IP literal of its family */
	    {ANY4, "10.1.2.3:8080", NULL, NULL, OK},
	    {ANY4, "127.0.0.1:8080", "http://10.1.2.3:8080", NULL, OK},
	    {ANY6, "[fd00::1]:8080", NULL, NULL, OK},
	    {ANY6, "localhost:8080", NULL, NULL, OK},
	    /* a navigation the user typed; the API's own origin */
	    {L4, "127.0.0.1:8080", NULL, "none", OK},
	    {L4, "127.0.0.1:8080", NULL, "NONE", OK},
	    {L4, "127.0.0.1:8080", NULL, "same-origin", OK},
	    {L4, "127.0.0.1:8080", "http://127.0.0.1:8080", "same-origin", OK},
	    {L4, "localhost:8080", "http://localhost:8080", "same-origin", OK},
	    {L4, "127.0.0.1:8080", "HTTP://LOCALHOST:8080", NULL, OK},
	    {L6, "[::1]:8080", "http://[::1]:8080", "same-origin", OK},
	    {L4_80, "127.0.0.1", "http://127.0.0.1", "same-origin", OK},
	};

	(void)state;
	run(rows, N(rows));
}

static void
test_messages(void **state)
{
	struct sockaddr_storage ss = listener_addr(L4);
	struct gw_site_self self = {.addr = (const struct sockaddr *)&ss};
	struct gw_site_field none = {0}, h = field("evil.test:8080"), ok = field("127.0.0.1:8080");
	struct gw_site_field o = field("http://evil.test"), f = field("cross-site");
	char big[300], msg[512];

	(void)state;
	assert_int_equal(gw_site_check(&self, &ok, &none, &f, msg, sizeof(msg)), FS);
	assert_string_equal(gw_site_code(FS), "cross-site");
	assert_non_null(strstr(msg, "Sec-Fetch-Site: cross-site: "));
	assert_non_null(strstr(msg, "not for web pages"));
	assert_int_equal(gw_site_check(&self, &ok, &o, &none, msg, sizeof(msg)), ORIG);
	assert_string_equal(gw_site_code(ORIG), "bad-origin");
	assert_non_null(strstr(msg, "Origin: http://evil.test: "));
	assert_int_equal(gw_site_check(&self, &h, &none, &none, msg, sizeof(msg)), HOST);
	assert_string_equal(gw_site_code(HOST), "bad-host");
	assert_non_null(strstr(msg, "Host: evil.test:8080 is not this API's address"));
	assert_non_null(strstr(msg, "DNS rebinding"));
	assert_non_null(strstr(msg, "send Host: 127.0.0.1:8080 or localhost:8080"));
	assert_int_equal(gw_site_check(&self, &none, &none, &none, msg, sizeof(msg)), HOST);
	assert_non_null(strstr(msg, "Host: (none) "));
	assert_null(gw_site_code(OK));
	/* a long value is cut; a short buffer still gets a terminated line */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	h = field(big);
	assert_int_equal(gw_site_check(&self, &h, &none, &none, msg, sizeof(msg)), HOST);
	assert_non_null(strstr(msg, "aaa... is not"));
	assert_true(strlen(msg) < 400);
	assert_int_equal(gw_site_check(&self, &h, &none, &none, msg, 16), HOST);
	assert_int_equal(strlen(msg), 15);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fetch_site_refused), cmocka_unit_test(test_origin_refused),
	    cmocka_unit_test(test_host_refused),       cmocka_unit_test(test_allowed),
	    cmocka_unit_test(test_messages),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

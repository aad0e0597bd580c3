/* test_trust.c: sluice's CA in the guest (agent/trust.c, and its
 * "configure" step and variables): the PEM check with bad inputs first and
 * cut at every offset, the bundle, the variables, and the install into a
 * scratch root where some directories play the host's shared ones. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent.h"

static const char ca_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBbjCCAROgAwIBAgIUeU9KkESWnC78aLAiEobUnsPCZOUwCgYIKoZIzj0EAwIw\n"
	"DDEKMAgGA1UEAwwBdDAeFw0yNjEyMDQxMzM5MDBaFw0zNjEyMDExMzM5MDBaMAwx\n"
	"CjAIBgNVBAMMAXQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQoLDmPMbzzG4OY\n"
	"MP35Y/z69kbElZldzcIAc02cbEEPy2LZ/ANAT39VrfUfifozwFoLFAESGAm940Zs\n"
	"6POv4WaFo1MwUTAdBgNVHQ4EFgQUN9oWU0nGZg7yHXk2UtVZJKT2h2wwHwYDVR0j\n"
	"BBgwFoAUN9oWU0nGZg7yHXk2UtVZJKT2h2wwDwYDVR0TAQH/BAUwAwEB/zAKBggq\n"
	"hkjOPQQDAgNJADBGAiEA1/8fiXMcSzDOrmaiadj2ep6DQnmKOJEz6QQF5l+R458C\n"
	"IQDHS4/fNirmoMVmcJAjQCVM34n7uic40nKnLKrvHoajzQ==\n"
	"-----END CERTIFICATE-----\n";
static const char root_pem[] = "-----BEGIN CERTIFICATE-----\n"
			       "QUJDREVGR0g=\n"
			       "-----END CERTIFICATE-----\n";

/* ---- the PEM check ------------------------------------------------------ */

static void
pem_bad(const char *s)
{
	if (agent_ca_pem_ok(s, s ? strlen(s) : 0))
		fail_msg("accepted: \"%s\"", s ? s : "(null)");
}

static void
test_pem_bad(void **state)
{
	char big[AGENT_CA_MAX + 64];
	size_t n = 0;

	(void)state;
	pem_bad(NULL);
	pem_bad("");
	pem_bad("\n");
	pem_bad("hello");
	pem_bad("-----BEGIN CERTIFICATE-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQUJD\n");
	pem_bad("-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n");
	pem_bad("-----BEGIN EC PRIVATE KEY-----\nQUJD\n-----END EC PRIVATE KEY-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\r\nQUJD\r\n-----END CERTIFICATE-----\r\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQU JD\n-----END CERTIFICATE-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQUJD\n\n-----END CERTIFICATE-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n\n");
	pem_bad("subject=CN=x\n-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\ntext\n");
	pem_bad("-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
		"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n");
	pem_bad("-----BEGIN CERTIFICATE-----\n"
		"QUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJDQ\n"
		"-----END CERTIFICATE-----\n");
	/* a NUL inside: the length says more than strlen */
	assert_false(agent_ca_pem_ok("-----BEGIN CERTIFICATE-----\nQU\0D\n-----END "
				     "CERTIFICATE-----\n", 58));
	/* too long, however well formed */
	while (n + sizeof(root_pem) < sizeof(big)) {
		memcpy(big + n, root_pem, sizeof(root_pem) - 1);
		n += sizeof(root_pem) - 1;
	}
	big[n] = 0;
	assert_true(n > AGENT_CA_MAX);
	assert_false(agent_ca_pem_ok(big, n));
}

static void
test_pem_good_and_cut(void **state)
{
	size_t len = strlen(ca_pem);
	char two[sizeof(ca_pem) * 2];

	(void)state;
	assert_true(agent_ca_pem_ok(ca_pem, len));
	assert_true(agent_ca_pem_ok(root_pem, strlen(root_pem)));
	snprintf(two, sizeof(two), "%s%s", ca_pem, root_pem);
	assert_true(agent_ca_pem_ok(two, strlen(two)));
	/* cut at every offset: only the whole, or the whole less its
	 * final newline, passes */
	for (size_t k = 0; k < len - 1; k++)
		if (agent_ca_pem_ok(ca_pem, k))
			fail_msg("a cut at %zu of %zu passed", k, len);
	assert_true(agent_ca_pem_ok(ca_pem, len - 1));
}

/* ---- the bundle and the variables --------------------------------------- */

static void
test_bundle(void **state)
{
	char *b;
	size_t n;

	(void)state;
	/* no system roots: the CA alone */
	assert_int_equal(agent_ca_bundle(NULL, 0, ca_pem, strlen(ca_pem), &b, &n), 0);
	assert_string_equal(b, ca_pem);
	assert_int_equal(n, strlen(ca_pem));
	free(b);
	/* roots, then the CA; a CA without its final newline gets one */
	assert_int_equal(agent_ca_bundle(root_pem, strlen(root_pem), ca_pem,
					 strlen(ca_pem) - 1, &b, &n), 0);
	assert_int_equal(n, strlen(root_pem) + strlen(ca_pem));
	assert_memory_equal(b, root_pem, strlen(root_pem));
	assert_string_equal(b + strlen(root_pem), ca_pem);
	free(b);
	/* roots without a final newline are not glued to the CA */
	assert_int_equal(agent_ca_bundle(root_pem, strlen(root_pem) - 1, ca_pem,
					 strlen(ca_pem), &b, &n), 0);
	assert_string_equal(b + strlen(root_pem), ca_pem);
	assert_int_equal(b[strlen(root_pem) - 1], '\n');
	free(b);
	/* roots that hold the CA already: unchanged (never twice) */
	{
		char both[sizeof(root_pem) + sizeof(ca_pem)];

		snprintf(both, sizeof(both), "%s%s", root_pem, ca_pem);
		assert_true(agent_ca_contains(both, strlen(both), ca_pem, strlen(ca_pem)));
		assert_false(agent_ca_contains(root_pem, strlen(root_pem), ca_pem,
					       strlen(ca_pem)));
		assert_int_equal(agent_ca_bundle(both, strlen(both), ca_pem, strlen(ca_pem),
						 &b, &n), 0);
		assert_string_equal(b, both);
		free(b);
	}
}

static void
test_ca_env(void **state)
{
	char env[AGENT_CA_ENV_N][AGENT_CA_ENV_LEN];
	char longdir[AGENT_CA_ENV_LEN];
	static const char *const want[] = {
		"SSL_CERT_FILE=/etc/sluice/bundle.pem",
		"REQUESTS_CA_BUNDLE=/etc/sluice/bundle.pem",
		"PIP_CERT=/etc/sluice/bundle.pem",
		"CURL_CA_BUNDLE=/etc/sluice/bundle.pem",
		"GIT_SSL_CAINFO=/etc/sluice/bundle.pem",
		"CARGO_HTTP_CAINFO=/etc/sluice/bundle.pem",
		"AWS_CA_BUNDLE=/etc/sluice/bundle.pem",
		"NODE_EXTRA_CA_CERTS=/etc/sluice/ca.pem",
	};

	(void)state;
	assert_int_equal(agent_ca_env(NULL, env, AGENT_CA_ENV_N), 0);
	assert_int_equal(agent_ca_env("", env, AGENT_CA_ENV_N), 0);
	assert_int_equal(agent_ca_env("etc/sluice", env, AGENT_CA_ENV_N), 0);
	memset(longdir, 'a', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = 0;
	assert_int_equal(agent_ca_env(longdir, env, AGENT_CA_ENV_N), 0);
	assert_int_equal(agent_ca_env(AGENT_CA_DIR, env, AGENT_CA_ENV_N), AGENT_CA_ENV_N);
	for (size_t i = 0; i < AGENT_CA_ENV_N; i++) {
		const char *eq = strchr(want[i], '=');

		assert_string_equal(env[i], want[i]);
		/* a command inherits each from the agent's own environment */
		assert_true(agent_env_inherited(want[i], (size_t)(eq - want[i])));
	}
	assert_int_equal(agent_ca_env(AGENT_CA_DIR, env, 3), 3);
	/* an exec's environment: the variables over the base, the request's
	 * own env over them */
	{
		char *base[] = { "SSL_CERT_FILE=/old", "X=dropped", NULL };
		const char *set[] = { "CURL_CA_BUNDLE=/mine" };
		char **e = NULL, err[128];

		assert_int_equal(agent_env_build(base, "/run/sluice", set, 1, &e, err,
						 sizeof(err)), 0);
		for (char **p = e; *p; p++) {
			assert_null(strstr(*p, "/old"));
			assert_null(strstr(*p, "X=dropped"));
		}
		agent_env_free(e);
		assert_int_equal(agent_env_build_over(base, "/run/sluice", set, 1, &e, err,
						      sizeof(err)), 0);
		{
			bool ssl = false, curl = false, node = false, x = false;

			for (char **p = e; *p; p++) {
				ssl |= !strcmp(*p, "SSL_CERT_FILE=/run/sluice/bundle.pem");
				curl |= !strcmp(*p, "CURL_CA_BUNDLE=/mine");
				node |= !strcmp(*p, "NODE_EXTRA_CA_CERTS=/run/sluice/ca.pem");
				x |= !strcmp(*p, "X=dropped");
			}
			assert_true(ssl && curl && node && x);
		}
		agent_env_free(e);
	}
}

/* ---- the install ------------------------------------------------------- */

static char root[PATH_MAX - 64];
static char shared[4][PATH_MAX + 16]; /* directories that play the host's */

/* A path is "private" unless under one of shared[]. */
static bool
fake_private(const char *path)
{
	for (size_t i = 0; i < 4; i++) {
		size_t n = strlen(shared[i]);

		if (n && strncmp(path, shared[i], n) == 0 && (path[n] == '/' || !path[n]))
			return false;
	}
	return true;
}

static void
mk(const char *rel)
{
	char p[PATH_MAX * 2], cmd[PATH_MAX * 3];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
	assert_int_equal(system(cmd), 0);
}

static void
put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	FILE *f;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The file's text, or NULL when it does not exist. */
static char *
get(const char *rel)
{
	char p[PATH_MAX * 2], *b = NULL;
	FILE *f;
	long n;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	if (!(f = fopen(p, "r")))
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	b = calloc(1, (size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return b;
}

static mode_t
mode_of(const char *rel)
{
	char p[PATH_MAX * 2];
	struct stat st;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	assert_int_equal(stat(p, &st), 0);
	return st.st_mode & 07777;
}

static int
setup(void **state)
{
	const char *t = getenv("TMPDIR");
	char cmd[PATH_MAX + 32];

	(void)state;
	snprintf(root, sizeof(root), "%s/test_trust.XXXXXX", t && *t ? t : "/tmp");
	assert_non_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/etc'", root);
	assert_int_equal(system(cmd), 0);
	memset(shared, 0, sizeof(shared));
	agent_ca_private = fake_private;
	agent_ca_root = root;
	umask(022);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[PATH_MAX + 32];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int
install(char *dir)
{
	char err[256] = "";
	int rc = agent_ca_install(root, ca_pem, strlen(ca_pem), dir, PATH_MAX, err,
				  sizeof(err));

	if (rc < 0)
		assert_true(err[0] != 0);
	return rc;
}

/* busybox: no system bundle, so one is made holding the CA */
static void
test_install_bare(void **state)
{
	char dir[PATH_MAX], *s;

	(void)state;
	assert_int_equal(install(dir), 0);
	assert_string_equal(dir, "/etc/sluice");
	assert_string_equal((s = get("/etc/sluice/ca.pem")), ca_pem);
	free(s);
	assert_int_equal(mode_of("/etc/sluice/ca.pem"), 0644);
	assert_int_equal(mode_of("/etc/sluice/bundle.pem"), 0644);
	assert_string_equal((s = get("/etc/sluice/bundle.pem")), ca_pem);
	free(s);
	assert_string_equal((s = get("/etc/ssl/certs/ca-certificates.crt")), ca_pem);
	free(s);
	assert_null(get("/usr/local/share/ca-certificates/sluice.crt"));
}

/* Debian-like, the sandbox's own: roots + CA everywhere, once */
static void
test_install_debian(void **state)
{
	char dir[PATH_MAX], *s, want[sizeof(root_pem) + sizeof(ca_pem)];

	(void)state;
	mk("/etc/ssl/certs");
	mk("/usr/local/share/ca-certificates");
	put("/etc/ssl/certs/ca-certificates.crt", root_pem);
	snprintf(want, sizeof(want), "%s%s", root_pem, ca_pem);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(install(dir), 0);
		assert_string_equal(dir, "/etc/sluice");
		assert_string_equal((s = get("/etc/sluice/bundle.pem")), want);
		free(s);
		assert_string_equal((s = get("/etc/ssl/certs/ca-certificates.crt")), want);
		free(s);
		assert_string_equal((s = get("/usr/local/share/ca-certificates/sluice.crt")),
				    ca_pem);
		free(s);
	}
}

/* Fedora-like: the first bundle that exists is the one read */
static void
test_install_fedora(void **state)
{
	char dir[PATH_MAX], *s, want[sizeof(root_pem) + sizeof(ca_pem)];

	(void)state;
	mk("/etc/pki/tls/certs");
	mk("/etc/pki/ca-trust/source/anchors");
	put("/etc/pki/tls/certs/ca-bundle.crt", root_pem);
	snprintf(want, sizeof(want), "%s%s", root_pem, ca_pem);
	assert_int_equal(install(dir), 0);
	assert_string_equal((s = get("/etc/sluice/bundle.pem")), want);
	free(s);
	assert_string_equal((s = get("/etc/pki/tls/certs/ca-bundle.crt")), want);
	free(s);
	assert_string_equal((s = get("/etc/pki/ca-trust/source/anchors/sluice.pem")), ca_pem);
	free(s);
	assert_null(get("/etc/ssl/certs/ca-certificates.crt"));
}

/* the host template: /etc/ssl and /usr are the host's; read, never changed */
static void
test_install_host_shared(void **state)
{
	char dir[PATH_MAX], *s, want[sizeof(root_pem) + sizeof(ca_pem)];

	(void)state;
	mk("/etc/ssl/certs");
	mk("/usr/local/share/ca-certificates");
	put("/etc/ssl/certs/ca-certificates.crt", root_pem);
	snprintf(shared[0], sizeof(shared[0]), "%s/etc/ssl", root);
	snprintf(shared[1], sizeof(shared[1]), "%s/usr", root);
	snprintf(want, sizeof(want), "%s%s", root_pem, ca_pem);
	assert_int_equal(install(dir), 0);
	assert_string_equal(dir, "/etc/sluice");
	assert_string_equal((s = get("/etc/sluice/bundle.pem")), want);
	free(s);
	assert_string_equal((s = get("/etc/ssl/certs/ca-certificates.crt")), root_pem);
	free(s);
	assert_null(get("/usr/local/share/ca-certificates/sluice.crt"));
}

/* /etc shared: the files go to /run/sluice; nothing under /etc changes.
 * With no private place at all the step fails, naming both. */
static void
test_install_etc_shared(void **state)
{
	char dir[PATH_MAX], *s;

	(void)state;
	mk("/run");
	snprintf(shared[0], sizeof(shared[0]), "%s/etc", root);
	assert_int_equal(install(dir), 0);
	assert_string_equal(dir, "/run/sluice");
	assert_string_equal((s = get("/run/sluice/ca.pem")), ca_pem);
	free(s);
	assert_null(get("/etc/sluice/ca.pem"));
	assert_null(get("/etc/ssl/certs/ca-certificates.crt"));

	snprintf(shared[1], sizeof(shared[1]), "%s/run", root);
	{
		char err[256];

		assert_int_equal(agent_ca_install(root, ca_pem, strlen(ca_pem), dir,
						  sizeof(dir), err, sizeof(err)), -EROFS);
		assert_non_null(strstr(err, "/etc/sluice"));
		assert_non_null(strstr(err, "/run/sluice"));
		assert_string_equal(dir, "");
	}
}

/* configure {"ca"}: applied as the step "ca", the directory kept in the
 * defaults (and their file), the variables in later execs */
static void
test_configure_ca(void **state)
{
	struct agent_config c;
	struct agent_defaults d = { 0 }, d2 = { 0 };
	const char *field = NULL, *step = NULL;
	char err[256], path[PATH_MAX + 32];
	json_t *req = json_pack("{s:s, s:s}", "op", "configure", "ca", ca_pem);

	(void)state;
	assert_int_equal(agent_config_check(req, &c, &field, err, sizeof(err)), 0);
	assert_true(c.has_ca);
	assert_int_equal(agent_config_apply(&c, &d, &step, err, sizeof(err)), 0);
	agent_config_fini(&c);
	assert_string_equal(d.ca_dir, "/etc/sluice");
	snprintf(path, sizeof(path), "%s/defaults.json", root);
	assert_int_equal(agent_defaults_save(&d, path), 0);
	assert_int_equal(agent_defaults_load(&d2, path), 0);
	assert_string_equal(d2.ca_dir, "/etc/sluice");
	agent_defaults_fini(&d2);

	/* nowhere to put it: the step is "ca", the defaults keep theirs */
	snprintf(shared[0], sizeof(shared[0]), "%s/etc", root);
	snprintf(shared[1], sizeof(shared[1]), "%s/run", root);
	assert_int_equal(agent_config_check(req, &c, &field, err, sizeof(err)), 0);
	assert_int_equal(agent_config_apply(&c, &d, &step, err, sizeof(err)), -EROFS);
	assert_string_equal(step, "ca");
	assert_true(strncmp(err, "ca: ", 4) == 0);
	agent_config_fini(&c);
	assert_string_equal(d.ca_dir, "/etc/sluice");
	agent_defaults_fini(&d);
	json_decref(req);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pem_bad),
		cmocka_unit_test(test_pem_good_and_cut),
		cmocka_unit_test(test_bundle),
		cmocka_unit_test(test_ca_env),
		cmocka_unit_test_setup_teardown(test_install_etc_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_install_host_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_install_bare, setup, teardown),
		cmocka_unit_test_setup_teardown(test_install_debian, setup, teardown),
		cmocka_unit_test_setup_teardown(test_install_fedora, setup, teardown),
		cmocka_unit_test_setup_teardown(test_configure_ca, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

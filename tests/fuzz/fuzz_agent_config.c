/* fuzz_agent_config.c: libFuzzer target for what sluice-agent parses from
 * the host at start-up (agent/agent.h): the "configure" request, the
 * kernel command line and the saved defaults file. Nothing here applies
 * anything: agent_config_apply() would set the clock and hostname.
 *
 * There is no selector byte; every input goes through all three:
 *  - agent_cmdline_parse() of the raw bytes (at most the 8191 that init.c
 *    reads; the buffer is exactly that long, so an over-read is caught);
 *  - agent_config_check() of json_loadb() of them with the agent's flags
 *    (JSON_REJECT_DUPLICATES, as agent_json_parse()), or, when jansson
 *    refuses that, with JSON_ALLOW_NUL too, so the NUL checks are reached;
 *  - when the strict load gave an object: agent_defaults_load() of the
 *    bytes through a memfd (/proc/self/fd/N, no disk), and a loaded set
 *    saved with agent_defaults_save() into a temporary directory and
 *    loaded back.
 *
 * Besides memory errors and leaks it checks the contracts:
 *  - cmdline: 0, or -EINVAL with an error message; the port never empty;
 *    root, port and hostname terminated, within their bounds and
 *    character sets, and found in the input;
 *  - configure: 0 with each has_ flag set exactly when its field is
 *    there and every value within its documented bounds (env one
 *    "NAME=value" per member, NULL-terminated; ca the request's text,
 *    PEM certificates only), or -EINVAL with the bad field named, an
 *    error message and nothing left allocated;
 *  - defaults: 0 or -EINVAL; a failed load leaves the set as it was; a
 *    loaded set saved and loaded again is the same set.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz.h"

#include "agent.h"

#define CMDLINE_READ 8191 /* init.c reads CMDLINE_MAX - 1 bytes */

static void
check_cmdline(const uint8_t *data, size_t size)
{
	struct agent_cmdline cl;
	char err[256] = "";
	size_t n = size < CMDLINE_READ ? size : CMDLINE_READ;
	int rc = agent_cmdline_parse((const char *)data, n, &cl, err, sizeof(err));
	size_t rl, pl, hl;

	CHECK(rc == 0 || rc == -EINVAL);
	if (rc < 0)
		CHECK(err[0] != '\0');
	CHECK(memchr(cl.root, '\0', sizeof(cl.root)) != NULL);
	CHECK(memchr(cl.port, '\0', sizeof(cl.port)) != NULL);
	CHECK(memchr(cl.hostname, '\0', sizeof(cl.hostname)) != NULL);
	rl = strlen(cl.root);
	pl = strlen(cl.port);
	hl = strlen(cl.hostname);
	if (rl) {
		CHECK(cl.root[0] == '/' && rl >= 2);
		for (size_t i = 0; i < rl; i++)
			CHECK((unsigned char)cl.root[i] > ' ' && cl.root[i] != 0x7f &&
			      cl.root[i] != '"');
		CHECK(memmem(data, n, cl.root, rl) != NULL);
	}
	CHECK(pl >= 1);
	for (size_t i = 0; i < pl; i++)
		CHECK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			     cl.port[i]) != NULL);
	if (strcmp(cl.port, AGENT_PORT_DEFAULT) != 0)
		CHECK(memmem(data, n, cl.port, pl) != NULL);
	if (hl) {
		CHECK(agent_hostname_ok(cl.hostname, hl));
		CHECK(memmem(data, n, cl.hostname, hl) != NULL);
	}
}

static void
check_env(const struct agent_config *c, const json_t *env)
{
	size_t n = 0;

	CHECK(c->env != NULL);
	for (; c->env[n]; n++) {
		const char *e = c->env[n], *eq = strchr(e, '=');
		char name[300];
		const json_t *v;

		CHECK(eq != NULL && eq > e && (size_t)(eq - e) < sizeof(name));
		memcpy(name, e, (size_t)(eq - e));
		name[eq - e] = '\0';
		CHECK(!(name[0] >= '0' && name[0] <= '9'));
		CHECK(strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
		      strlen(name));
		v = json_object_get(env, name);
		CHECK(json_is_string(v) && strcmp(json_string_value(v), eq + 1) == 0);
		CHECK(strlen(eq + 1) == json_string_length(v));
	}
	CHECK(n == json_object_size(env));
}

static void
check_config(const json_t *req)
{
	struct agent_config c;
	const char *field = "unset";
	char err[256] = "";
	int rc = agent_config_check(req, &c, &field, err, sizeof(err));
	const json_t *v;

	if (rc < 0) {
		CHECK(rc == -EINVAL || rc == -ENOMEM);
		CHECK(err[0] != '\0');
		if (rc == -EINVAL)
			CHECK(field != NULL); /* "" for an unknown field named "" */
		CHECK(c.env == NULL && c.cwd == NULL && c.ca == NULL);
		CHECK(!c.has_time && !c.has_entropy && !c.has_hostname && !c.has_net &&
		      !c.has_env && !c.has_cwd && !c.has_ca);
		return;
	}
	CHECK(rc == 0 && field == NULL);
	CHECK(json_is_object(req));
	CHECK(c.has_time == (json_object_get(req, "time_ns") != NULL));
	CHECK(c.has_entropy == (json_object_get(req, "entropy") != NULL));
	CHECK(c.has_hostname == (json_object_get(req, "hostname") != NULL));
	CHECK(c.has_net == (json_object_get(req, "net") != NULL));
	CHECK(c.has_env == (json_object_get(req, "env") != NULL));
	CHECK(c.has_cwd == (json_object_get(req, "cwd") != NULL));
	CHECK(c.has_ca == (json_object_get(req, "ca") != NULL));
	if (c.has_ca) {
		v = json_object_get(req, "ca");
		CHECK(c.ca != NULL && c.ca_len == json_string_length(v));
		CHECK(c.ca_len >= 1 && c.ca_len <= AGENT_CA_MAX);
		CHECK(memcmp(c.ca, json_string_value(v), c.ca_len) == 0);
		CHECK(agent_ca_pem_ok(c.ca, c.ca_len));
		/* No key block: "PRIVATE KEY" has a space, which base64 lines
		 * cannot; "PRIVATE" alone can be base64 (a seed has it). */
		CHECK(strstr(c.ca, "PRIVATE KEY") == NULL && memchr(c.ca, '\r', c.ca_len) == NULL);
	} else {
		CHECK(c.ca == NULL);
	}
	if (c.has_time)
		CHECK(c.time_ns == json_integer_value(json_object_get(req, "time_ns")) &&
		      c.time_ns > 0);
	if (c.has_entropy)
		CHECK(c.entropy_len >= AGENT_ENTROPY_MIN && c.entropy_len <= AGENT_ENTROPY_MAX);
	else
		CHECK(c.entropy_len == 0);
	if (c.has_hostname) {
		CHECK(agent_hostname_ok(c.hostname, strlen(c.hostname)));
		CHECK(strcmp(c.hostname, json_string_value(json_object_get(req, "hostname"))) == 0);
	}
	if (c.has_net) {
		const json_t *net = json_object_get(req, "net");

		CHECK(memchr(c.ifname, '\0', sizeof(c.ifname)) != NULL);
		CHECK(strchr(c.ifname, '/') == NULL && strchr(c.ifname, ' ') == NULL);
		CHECK(c.has_address == (json_object_get(net, "address") != NULL));
		CHECK(c.has_gateway == (json_object_get(net, "gateway") != NULL));
		if (c.has_address)
			CHECK(c.prefix >= 1 && c.prefix <= 32);
		if (c.has_address && c.has_gateway)
			CHECK(c.address != c.gateway);
		CHECK(c.mtu == 0 || (c.mtu >= AGENT_MTU_MIN && c.mtu <= AGENT_MTU_MAX));
		CHECK((c.mtu != 0) == (json_object_get(net, "mtu") != NULL));
	} else {
		CHECK(!c.has_address && !c.has_gateway && c.mtu == 0);
	}
	if (c.has_env)
		check_env(&c, json_object_get(req, "env"));
	else
		CHECK(c.env == NULL);
	if (c.has_cwd) {
		v = json_object_get(req, "cwd");
		CHECK(c.cwd != NULL && c.cwd[0] == '/' && strlen(c.cwd) < PATH_MAX);
		CHECK(strcmp(c.cwd, json_string_value(v)) == 0);
	} else {
		CHECK(c.cwd == NULL);
	}
	agent_config_fini(&c);
	CHECK(c.env == NULL && c.cwd == NULL && c.ca == NULL && c.entropy[0] == 0);
}

/* ---- the defaults file ------------------------------------------------- */

static int memfd = -1;
static char memfd_path[64];
static char tmpdir[64];
static char saved_path[128];

static void
cleanup(void)
{
	if (tmpdir[0]) {
		unlink(saved_path);
		rmdir(tmpdir);
	}
}

static bool
defaults_setup(void)
{
	const char *t = getenv("TMPDIR");

	if (memfd >= 0)
		return true;
	memfd = memfd_create("fuzz_agent_config", MFD_CLOEXEC);
	CHECK(memfd >= 0);
	snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	snprintf(tmpdir, sizeof(tmpdir), "%s/fuzz_agent_config.XXXXXX",
		 t && t[0] && strlen(t) < 30 ? t : "/tmp");
	CHECK(mkdtemp(tmpdir) != NULL);
	snprintf(saved_path, sizeof(saved_path), "%s/defaults.json", tmpdir);
	atexit(cleanup);
	return true;
}

static bool
defaults_equal(const struct agent_defaults *a, const struct agent_defaults *b)
{
	size_t i;

	if ((a->env == NULL) != (b->env == NULL) || (a->cwd == NULL) != (b->cwd == NULL) ||
	    (a->ca_dir == NULL) != (b->ca_dir == NULL))
		return false;
	if (a->cwd && strcmp(a->cwd, b->cwd) != 0)
		return false;
	if (a->ca_dir && strcmp(a->ca_dir, b->ca_dir) != 0)
		return false;
	for (i = 0; a->env && a->env[i]; i++)
		if (b->env[i] == NULL || strcmp(a->env[i], b->env[i]) != 0)
			return false;
	return !a->env || b->env[i] == NULL;
}

static void
check_defaults(const uint8_t *data, size_t size)
{
	struct agent_defaults d = { 0 }, d2 = { 0 };
	char **old_env;
	char *old_cwd;
	int rc;

	defaults_setup();
	CHECK(ftruncate(memfd, 0) == 0);
	CHECK(pwrite(memfd, data, size, 0) == (ssize_t)size);

	/* a set already there: kept by a failed load, freed by a good one */
	d.env = calloc(2, sizeof(*d.env));
	CHECK(d.env != NULL);
	d.env[0] = strdup("SENTINEL=1");
	d.cwd = strdup("/sentinel");
	CHECK(d.env[0] != NULL && d.cwd != NULL);
	old_env = d.env;
	old_cwd = d.cwd;
	rc = agent_defaults_load(&d, memfd_path);
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc < 0) {
		CHECK(d.env == old_env && d.cwd == old_cwd);
		CHECK(strcmp(d.env[0], "SENTINEL=1") == 0 && d.env[1] == NULL);
		CHECK(strcmp(d.cwd, "/sentinel") == 0);
		agent_defaults_fini(&d);
		return;
	}
	for (size_t i = 0; d.env && d.env[i]; i++)
		CHECK(strchr(d.env[i], '=') != NULL);
	CHECK(d.ca_dir == NULL || d.ca_dir[0] == '/');

	/* saved and loaded back: the same set */
	CHECK(agent_defaults_save(&d, saved_path) == 0);
	CHECK(agent_defaults_load(&d2, saved_path) == 0);
	CHECK(defaults_equal(&d, &d2));
	agent_defaults_fini(&d2);
	agent_defaults_fini(&d);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t e;
	json_t *v;

	check_cmdline(data, size);

	v = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e);
	if (json_is_object(v))
		check_defaults(data, size);
	if (!v)
		v = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
			       &e);
	if (!v)
		return 0;
	check_config(v);
	json_decref(v);
	return 0;
}

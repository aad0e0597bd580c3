/* env.c: a command's environment. See agent.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

static const char *const inherited[] = {
	"PATH", "HOME", "TERM",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy",
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"GIT_SSL_CAINFO", "CURL_CA_BUNDLE", "PIP_CERT", "CARGO_HTTP_CAINFO",
	"AWS_CA_BUNDLE",
};

/* The variables that replace a runtime's roots: they name the bundle. */
static const char *const ca_bundle_vars[] = {
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE",
	"GIT_SSL_CAINFO", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE",
};

_Static_assert(sizeof(ca_bundle_vars) / sizeof(ca_bundle_vars[0]) + 1 ==
		       AGENT_CA_ENV_N,
	       "AGENT_CA_ENV_N");

size_t
agent_ca_env(const char *dir, char out[][AGENT_CA_ENV_LEN], size_t max)
{
	size_t n = 0;

	/* the longest: "REQUESTS_CA_BUNDLE=" + dir + "/bundle.pem" */
	if (dir == NULL || dir[0] != '/' ||
	    strlen(dir) + sizeof("REQUESTS_CA_BUNDLE=/" AGENT_CA_BUNDLE) >
		    AGENT_CA_ENV_LEN)
		return 0;
	for (size_t i = 0; i < sizeof(ca_bundle_vars) / sizeof(ca_bundle_vars[0]) &&
			   n < max; i++)
		snprintf(out[n++], AGENT_CA_ENV_LEN, "%s=%s/%s",
			 ca_bundle_vars[i], dir, AGENT_CA_BUNDLE);
	if (n < max)
		snprintf(out[n++], AGENT_CA_ENV_LEN, "NODE_EXTRA_CA_CERTS=%s/%s",
			 dir, AGENT_CA_FILE);
	return n;
}

static const char *const defaults[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
};

bool
agent_env_inherited(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(inherited) / sizeof(inherited[0]); i++)
		if (strlen(inherited[i]) == len &&
		    memcmp(inherited[i], name, len) == 0)
			return true;
	return false;
}

static size_t
name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* Puts kv into env[0..*n), replacing a variable of the same name. */
static int
env_put(char **env, size_t *n, const char *kv)
{
	size_t nl = name_len(kv);
	char *dup = strdup(kv);

	if (dup == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		if (name_len(env[i]) == nl && memcmp(env[i], kv, nl) == 0) {
			free(env[i]);
			env[i] = dup;
			return 0;
		}
	}
	env[(*n)++] = dup;
	return 0;
}

void
agent_env_free(char **env)
{
	if (env == NULL)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

/* filter: keep only the inherited names of base. */
static int
build(char *const *agent_env, bool filter, const char *ca_dir,
      const char *const *set, size_t nset, char ***out, char *err,
      size_t errsz)
{
	size_t cap = nset + sizeof(inherited) / sizeof(inherited[0]) +
		     sizeof(defaults) / sizeof(defaults[0]) + AGENT_CA_ENV_N +
		     1;
	char ca[AGENT_CA_ENV_N][AGENT_CA_ENV_LEN];
	size_t n = 0, nca = agent_ca_env(ca_dir, ca, AGENT_CA_ENV_N);
	char **env;
	int rc = 0;

	*out = NULL;
	for (size_t i = 0; i < nset; i++) {
		const char *eq = strchr(set[i], '=');

		if (eq == NULL || eq == set[i]) {
			snprintf(err, errsz,
				 "environment entry %zu: want NAME=value with "
				 "a non-empty NAME", i);
			return -EINVAL;
		}
	}
	if (!filter)
		for (char *const *p = agent_env; p && *p; p++)
			cap++;
	env = calloc(cap, sizeof(*env));
	if (env == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if ((rc = env_put(env, &n, defaults[i])) < 0)
			goto out;
	for (char *const *p = agent_env; p && *p; p++) {
		if (strchr(*p, '=') == NULL ||
		    (filter && !agent_env_inherited(*p, name_len(*p))))
			continue;
		if ((rc = env_put(env, &n, *p)) < 0)
			goto out;
	}
	for (size_t i = 0; i < nca; i++)
		if ((rc = env_put(env, &n, ca[i])) < 0)
			goto out;
	for (size_t i = 0; i < nset; i++)
		if ((rc = env_put(env, &n, set[i])) < 0)
			goto out;
	env[n] = NULL;
	*out = env;
	return 0;
out:
	agent_env_free(env);
	snprintf(err, errsz, "out of memory");
	return rc;
}

int
agent_env_build(char *const *agent_env, const char *ca_dir,
		const char *const *set, size_t nset, char ***out, char *err,
		size_t errsz)
{
	return build(agent_env, true, ca_dir, set, nset, out, err, errsz);
}

int
agent_env_build_over(char *const *base, const char *ca_dir,
		     const char *const *set, size_t nset, char ***out,
		     char *err, size_t errsz)
{
	return build(base, false, ca_dir, set, nset, out, err, errsz);
}

/* fuzz_api_json.c: libFuzzer target for the REST API's JSON request
 * validators (gateway/apiv1.h) and the pool set put through PUT /v1/pools
 * (conf_with_pools_json() in conf/conf.h).
 *
 * There is no selector byte: every input is a whole request body. The raw
 * bytes go through gw_utf8_sanitize(); then json_loadb(JSON_DECODE_ANY) of
 * them (or, when jansson refuses that, of them with JSON_ALLOW_NUL too, so
 * that the validators' NUL checks are reached) is given to
 * gw_claim_args_parse(), gw_exec_args_parse() and conf_with_pools_json()
 * against the compiled-in default configuration (loaded once).
 *
 * Besides memory errors and leaks it checks the contracts:
 *  - sanitize: the output is valid UTF-8 without NUL, as long as the
 *    input when that was already valid, and sanitizing it again gives
 *    identical bytes;
 *  - claims/exec: on success every field obeys the documented bounds
 *    (a pool name of 1..63 bytes, env entries "NAME=value" with a NAME
 *    gw_env_name_ok() accepts, labels "key=value", argv NULL-terminated
 *    with a non-empty argv[0], timeout in 1..GW_EXEC_TIMEOUT_MAX_S); on
 *    failure an error message and nothing left allocated;
 *  - pools: success means no diagnostics, one pool per array element with
 *    warm <= warm_max and unique names, the other sections untouched, and
 *    conf_pools_to_json() of the result read back by conf_with_pools_json()
 *    gives the same JSON text (JSON_SORT_KEYS | JSON_COMPACT); failure
 *    means at least one diagnostic.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"

#include "apiv1.h"
#include "conf.h"

/* Strict UTF-8 (no overlongs, surrogates, or code points past U+10FFFF),
 * written independently of gw_utf8_sanitize(). NUL refused. */
static bool
utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp, min;

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 2;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 3;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 4;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		if (len - i < n)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n;
	}
	return true;
}

static void
check_sanitize(const uint8_t *data, size_t size)
{
	size_t n = (size_t)-1, n2 = (size_t)-1;
	char *s = gw_utf8_sanitize((const char *)data, size, &n);
	char *s2;

	CHECK(s != NULL);
	CHECK(n <= size * 3);
	CHECK(s[n] == '\0' && strlen(s) == n);
	CHECK(utf8_valid((const unsigned char *)s, n));
	if (utf8_valid(data, size))
		CHECK(n == size && memcmp(s, data, size) == 0);
	s2 = gw_utf8_sanitize(s, n, &n2);
	CHECK(s2 != NULL);
	CHECK(n2 == n && memcmp(s2, s, n) == 0);
	free(s2);
	free(s);
}

/* An entry "k=v" of a kv object: k is everything before the first '='. */
static void
check_kv(const char *e, const json_t *obj, bool env)
{
	const char *eq = strchr(e, '=');
	size_t klen;
	char key[160];
	const json_t *val;

	CHECK(eq != NULL);
	klen = (size_t)(eq - e);
	CHECK(klen >= 1 && klen <= 128);
	if (env)
		CHECK(gw_env_name_ok(e, klen));
	memcpy(key, e, klen);
	key[klen] = '\0';
	val = json_object_get(obj, key);
	CHECK(json_is_string(val));
	CHECK(strcmp(json_string_value(val), eq + 1) == 0);
	CHECK(strlen(eq + 1) <= (env ? GW_ENV_VALUE_MAX : GW_LABEL_MAX));
}

static void
check_claim(const json_t *v)
{
	struct gw_claim_args a;
	char err[256] = "";
	int rc = gw_claim_args_parse(v, &a, err, sizeof(err));

	if (rc < 0) {
		CHECK(rc == -EINVAL || rc == -ENOMEM);
		CHECK(err[0] != '\0');
		CHECK(a.nenv == 0 && a.nlabels == 0);
		return;
	}
	CHECK(rc == 0);
	CHECK(json_is_object(v));
	CHECK(a.pool != NULL);
	CHECK(a.pool[0] != '\0' && strlen(a.pool) <= 63);
	CHECK(strcmp(a.pool, json_string_value(json_object_get(v, "pool"))) == 0);
	if (a.ttl_present)
		CHECK(a.ttl == (int64_t)json_integer_value(json_object_get(v, "ttl_seconds")));
	CHECK(a.nenv <= 64 && a.nlabels <= 64);
	CHECK(a.nenv == json_object_size(json_object_get(v, "env")));
	CHECK(a.nlabels == json_object_size(json_object_get(v, "labels")));
	for (size_t i = 0; i < a.nenv; i++)
		check_kv(a.env[i], json_object_get(v, "env"), true);
	for (size_t i = 0; i < a.nlabels; i++)
		check_kv(a.labels[i], json_object_get(v, "labels"), false);
	gw_claim_args_fini(&a);
}

static void
check_exec(const json_t *v)
{
	struct gw_exec_args a;
	char err[256] = "";
	int rc = gw_exec_args_parse(v, &a, err, sizeof(err));
	size_t n;

	if (rc < 0) {
		CHECK(rc == -EINVAL || rc == -ENOMEM);
		CHECK(err[0] != '\0');
		CHECK(a.argv == NULL && a.nenv == 0);
		return;
	}
	CHECK(rc == 0);
	n = json_array_size(json_object_get(v, "argv"));
	CHECK(n >= 1 && n <= 4096);
	CHECK(a.argv != NULL && a.argv[n] == NULL);
	CHECK(a.argv[0][0] != '\0');
	for (size_t i = 0; i < n; i++)
		CHECK(a.argv[i] != NULL);
	CHECK(a.timeout_s >= 1 && a.timeout_s <= GW_EXEC_TIMEOUT_MAX_S);
	CHECK(a.cwd == NULL || a.cwd[0] == '/');
	CHECK(a.stdin_data != NULL || a.stdin_len == 0);
	CHECK(a.nenv <= 64 && a.env[a.nenv] == NULL);
	CHECK(a.nenv == json_object_size(json_object_get(v, "env")));
	for (size_t i = 0; i < a.nenv; i++)
		check_kv(a.env[i], json_object_get(v, "env"), true);
	gw_exec_args_fini(&a);
	CHECK(a.argv == NULL && a.nenv == 0);
}

static const struct conf *
base_conf(void)
{
	static struct conf *base;

	if (!base) {
		struct conf_diag d;

		conf_diag_init(&d);
		base = conf_load_mem("<default>", conf_default_yaml, conf_default_yaml_len, &d);
		CHECK(base != NULL && d.n == 0);
		conf_diag_fini(&d);
	}
	return base;
}

static char *
dump(const json_t *j)
{
	char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);

	CHECK(s != NULL);
	return s;
}

static void
check_pools(const json_t *v)
{
	const struct conf *base = base_conf();
	struct conf_diag d, d2;
	struct conf *c, *c2;
	json_t *j1, *j2;
	char *s1, *s2;

	conf_diag_init(&d);
	c = conf_with_pools_json(base, v, &d);
	if (!c) {
		CHECK(d.n > 0 || d.dropped > 0);
		conf_diag_fini(&d);
		return;
	}
	CHECK(d.n == 0 && d.dropped == 0);
	conf_diag_fini(&d);

	CHECK(json_is_object(v));
	CHECK(c->npools == json_array_size(json_object_get(v, "pools")));
	CHECK(c->nlanes == base->nlanes && c->npolicies == base->npolicies &&
	      c->ntenants == base->ntenants);
	for (size_t i = 0; i < c->npools; i++) {
		const struct conf_pool *p = &c->pools[i];

		CHECK(p->name != NULL);
		CHECK(p->warm <= p->warm_max);
		CHECK(conf_pool_find(c, p->name) == p);
		CHECK(p->lane != NULL && conf_lane_find(c, p->lane) != NULL);
		CHECK(p->policy != NULL && conf_policy_find(c, p->policy) != NULL);
	}

	/* what GET /v1/pools shows, put back, shows the same */
	j1 = conf_pools_to_json(c);
	CHECK(j1 != NULL);
	conf_diag_init(&d2);
	c2 = conf_with_pools_json(base, j1, &d2);
	CHECK(c2 != NULL && d2.n == 0);
	conf_diag_fini(&d2);
	j2 = conf_pools_to_json(c2);
	CHECK(j2 != NULL);
	s1 = dump(j1);
	s2 = dump(j2);
	CHECK(strcmp(s1, s2) == 0);
	free(s1);
	free(s2);
	json_decref(j1);
	json_decref(j2);
	conf_unref(c2);
	conf_unref(c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t e;
	json_t *v;

	check_sanitize(data, size);

	v = json_loadb((const char *)data, size, JSON_DECODE_ANY, &e);
	if (!v)
		v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!v)
		return 0;
	check_claim(v);
	check_exec(v);
	check_pools(v);
	json_decref(v);
	return 0;
}

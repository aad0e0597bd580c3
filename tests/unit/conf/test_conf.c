/* test_conf.c: the configuration loader. Bad configurations first, each with
 * the exact FILE:LINE:COL and message it must produce; then the default
 * configuration with every value asserted; then secrets and helpers. */
#include <arpa/inet.h>
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

#include "conf.h"

struct bad_case {
	const char *name;
	const char *yaml;
	const char *want;       /* the one diagnostic line expected */
};

/* Each case yields exactly one error. Environment while they run:
 * SL_SET=x, SL_EMPTY="", SL_NOT_SET_ANYWHERE unset. */
static const struct bad_case bad_cases[] = {
	{ "leaf-validity-zero",
	  "certs: { leaf_validity_days: 0 }\n",
	  "t.yaml:1:30: certs.leaf_validity_days: 0 is out of range 1..397" },
	{ "leaf-validity-too-long",
	  "certs: { leaf_validity_days: 398 }\n",
	  "t.yaml:1:30: certs.leaf_validity_days: 398 is out of range 1..397" },
	{ "upstream-ca-relative",
	  "certs: { upstream_ca: ca.pem }\n",
	  "t.yaml:1:23: certs.upstream_ca: must be an absolute path" },
	{ "control-socket-relative",
	  "daemon: { control_socket: run/control.sock }\n",
	  "t.yaml:1:27: daemon.control_socket: must be an absolute path shorter than 108 bytes, or off" },
	{ "idmap-base-below-65536",
	  "daemon: { idmap: { base: 1000 } }\n",
	  "t.yaml:1:26: daemon.idmap.base: 1000 is out of range 65536..4294836224" },
	{ "idmap-base-unaligned",
	  "daemon: { idmap: { base: 1073741825 } }\n",
	  "t.yaml:1:26: daemon.idmap.base: 1073741825 is not a multiple of 65536" },
	{ "idmap-no-ranges",
	  "daemon: { idmap: { ranges: 0 } }\n",
	  "t.yaml:1:28: daemon.idmap.ranges: 0 is out of range 1..65534" },
	{ "idmap-past-the-last-id",
	  "daemon: { idmap: { base: 4294836224, ranges: 2 } }\n",
	  "t.yaml:1:18: daemon.idmap: 2 ranges of 65536 from 4294836224 go past 4294967294, the last host id" },
	{ "idmap-unknown-key",
	  "daemon: { idmap: { size: 65536 } }\n",
	  "t.yaml:1:20: unknown key 'size' in daemon.idmap" },
	{ "fleet-teardown-not-bool",
	  "daemon: { fleet_teardown: maybe }\n",
	  "t.yaml:1:27: daemon.fleet_teardown: expected true or false, got 'maybe'" },
	{ "tab",
	  "daemon:\n"
	  "\tdata_dir: /x\n",
	  "t.yaml:2:1: tab character in indentation: YAML indents with spaces" },
	{ "dupkey",
	  "api:\n"
	  "  listen: 127.0.0.1:1\n"
	  "  listen: 127.0.0.1:2\n",
	  "t.yaml:3:3: duplicate key 'listen' (first at 2:3)" },
	{ "alias",
	  "policies:\n"
	  "  - &p { name: a }\n"
	  "  - *p\n",
	  "t.yaml:3:5: YAML aliases (*name) are not supported: write the value out" },
	{ "syntax",
	  "gateway: [\n",
	  "t.yaml:2:1: YAML syntax error: did not find expected node content while parsing a flow node (line 2)" },
	{ "twodocs",
	  "daemon: {}\n"
	  "---\n"
	  "api: {}\n",
	  "t.yaml:2:1: a second YAML document: the configuration is one document" },
	{ "rootlist",
	  "- a\n",
	  "t.yaml:1:1: the configuration must be a mapping of sections (daemon, api, gateway, ...)" },
	{ "unknown_top",
	  "deamon: {}\n",
	  "t.yaml:1:1: unknown key 'deamon' in the configuration (did you mean 'daemon'?)" },
	{ "unknown_nested",
	  "gateway:\n"
	  "  limits: { max_conections: 5 }\n",
	  "t.yaml:2:13: unknown key 'max_conections' in gateway.limits (did you mean 'max_connections'?)" },
	{ "unknown_nosuggest",
	  "api: { zzzzqqq: 1 }\n",
	  "t.yaml:1:8: unknown key 'zzzzqqq' in api" },
	{ "wrongtype_map",
	  "daemon: [1, 2]\n",
	  "t.yaml:1:9: daemon: expected a mapping, got a list" },
	{ "wrongtype_list",
	  "lanes: { name: a }\n",
	  "t.yaml:1:8: lanes: expected a list, got a mapping" },
	{ "wrongtype_int",
	  "gateway: { limits: { max_header_bytes: lots } }\n",
	  "t.yaml:1:40: gateway.limits.max_header_bytes: expected an integer in 1024..1048576, got 'lots'" },
	{ "quoted_int",
	  "gateway: { dns: { attempts: \"2\" } }\n",
	  "t.yaml:1:29: gateway.dns.attempts: expected an integer in 1..10, got a quoted string (write numbers without quotes)" },
	{ "range_high",
	  "gateway: { dns: { timeout_ms: 60001 } }\n",
	  "t.yaml:1:31: gateway.dns.timeout_ms: 60001 is out of range 100..60000" },
	{ "range_negative",
	  "gateway: { dns: { attempts: -1 } }\n",
	  "t.yaml:1:29: gateway.dns.attempts: -1 is out of range 1..10" },
	{ "response_timeout_low",
	  "gateway: { limits: { response_timeout_ms: 99 } }\n",
	  "t.yaml:1:43: gateway.limits.response_timeout_ms: 99 is out of range 100..86400000" },
	{ "body_timeout_between",
	  "gateway: { limits: { body_timeout_ms: 50 } }\n",
	  "t.yaml:1:39: gateway.limits.body_timeout_ms: 50 is out of range: 0 (no limit) or 100..86400000" },
	{ "body_min_rate_negative",
	  "gateway: { limits: { body_min_rate: -5 } }\n",
	  "t.yaml:1:37: gateway.limits.body_min_rate: -5 is out of range 0..1073741824" },
	{ "body_min_rate_grace_zero",
	  "gateway: { limits: { body_min_rate_grace_ms: 0 } }\n",
	  "t.yaml:1:46: gateway.limits.body_min_rate_grace_ms: 0 is out of range 100..86400000" },
	{ "bool",
	  "lanes: [{ name: a, subnet: 10.0.0.0/24, doors: { forward: 1 }, transparent: yes }]\n",
	  "t.yaml:1:77: lanes[0].transparent: expected true or false, got 'yes'" },
	{ "enum",
	  "daemon: { log: { format: xml } }\n",
	  "t.yaml:1:26: daemon.log.format: expected one of text, json; got 'xml'" },
	{ "dup_policy",
	  "policies:\n"
	  "  - name: p\n"
	  "  - name: p\n",
	  "t.yaml:3:11: policies[1].name: duplicate policy name 'p' (first at 2:11)" },
	{ "bad_name",
	  "policies: [{ name: Bad Name }]\n",
	  "t.yaml:1:20: policies[0].name: 'Bad Name' is not a name: use a-z, 0-9, '-' and '_', starting with a letter or digit" },
	{ "undef_lane",
	  "lanes: [{ name: egress, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: egres, policy: p }]\n",
	  "t.yaml:3:26: pools[0].lane: no lane named 'egres' (did you mean 'egress'?)" },
	{ "undef_policy",
	  "gateway:\n"
	  "  clients: [{ name: c, match: { source: 10.0.0.0/8 }, policy: nope }]\n",
	  "t.yaml:2:63: gateway.clients[0].policy: no policy named 'nope'" },
	{ "undef_pool",
	  "tenants: [{ name: t, keys: [k1], pools: [web] }]\n",
	  "t.yaml:1:42: tenants[0].pools[0]: no pool named 'web'" },
	{ "bad_cidr",
	  "gateway:\n"
	  "  clients: [{ name: c, match: { source: 10.0.0.0/40 }, policy: p }]\n"
	  "policies: [{ name: p }]\n",
	  "t.yaml:2:41: gateway.clients[0].match.source: bad CIDR '10.0.0.0/40': prefix length must be 0..32" },
	{ "cidr_hostbits",
	  "policies: [{ name: p, allow_private: [192.168.1.1/16] }]\n",
	  "t.yaml:1:39: policies[0].allow_private[0]: bad CIDR '192.168.1.1/16': host bits are set (the network is 192.168.0.0/16)" },
	{ "cidr_garbage",
	  "policies: [{ name: p, allow_private: [not-an-ip] }]\n",
	  "t.yaml:1:39: policies[0].allow_private[0]: bad CIDR 'not-an-ip': 'not-an-ip' is not an IPv4 or IPv6 address" },
	{ "lane_v6",
	  "lanes: [{ name: a, subnet: \"fd00::/64\" }]\n",
	  "t.yaml:1:28: lanes[0].subnet: lanes are IPv4 subnets for now" },
	{ "lane_prefix",
	  "lanes: [{ name: a, subnet: 10.0.0.0/31 }]\n",
	  "t.yaml:1:28: lanes[0].subnet: prefix length /31 is out of range /8../29" },
	{ "overlap",
	  "lanes:\n"
	  "  - { name: a, subnet: 10.88.0.0/16 }\n"
	  "  - { name: b, subnet: 10.88.7.0/24 }\n",
	  "t.yaml:3:24: lanes[1].subnet: 10.88.7.0/24 overlaps lane 'a' (10.88.0.0/16)" },
	{ "host_midstar",
	  "policies: [{ name: p, allow: [\"api.*.com\"] }]\n",
	  "t.yaml:1:31: policies[0].allow[0]: bad host pattern 'api.*.com': '*' is allowed only as a whole first label ('*.example.com')" },
	{ "host_partstar",
	  "policies: [{ name: p, deny: [\"*foo.com\"] }]\n",
	  "t.yaml:1:30: policies[0].deny[0]: bad host pattern '*foo.com': '*' is allowed only as a whole first label ('*.example.com')" },
	{ "host_nonascii",
	  "policies: [{ name: p, allow: [\"b\xc3\xbc""cher.de\"] }]\n",
	  "t.yaml:1:31: policies[0].allow[0]: bad host pattern 'b??cher.de': non-ASCII name: write internationalised names as punycode (xn--...)" },
	{ "host_emptylabel",
	  "policies: [{ name: p, intercept: [\"a..b\"] }]\n",
	  "t.yaml:1:35: policies[0].intercept[0]: bad host pattern 'a..b': empty label" },
	{ "host_port0",
	  "policies: [{ name: p, allow: [\"a.com:0\"] }]\n",
	  "t.yaml:1:31: policies[0].allow[0]: bad host pattern 'a.com:0': port must be 1..65535" },
	{ "host_port_big",
	  "policies: [{ name: p, allow: [\"a.com:65536\"] }]\n",
	  "t.yaml:1:31: policies[0].allow[0]: bad host pattern 'a.com:65536': port must be 1..65535" },
	{ "listen_port",
	  "gateway: { listen: { socks: 127.0.0.1:0 } }\n",
	  "t.yaml:1:29: gateway.listen.socks: port 0 is out of range 1..65535" },
	{ "listen_host",
	  "api: { listen: \"localhost:8080\" }\n",
	  "t.yaml:1:16: api.listen: expected IP:PORT or [IPv6]:PORT (or off), got 'localhost:8080'" },
	{ "door_port",
	  "lanes: [{ name: a, subnet: 10.0.0.0/24, doors: { socks: 65536 } }]\n",
	  "t.yaml:1:57: lanes[0].doors.socks: 65536 is out of range 1..65535" },
	{ "door_same",
	  "lanes: [{ name: a, subnet: 10.0.0.0/24, doors: { forward: 80, socks: 80 } }]\n",
	  "t.yaml:1:70: lanes[0].doors.socks: port 80 is already the forward door" },
	{ "warm",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, warm: 5, warm_max: 4 }]\n",
	  "t.yaml:3:46: pools[0].warm: warm (5) is greater than warm_max (4)" },
	{ "rpc_no_supervisor",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p }]\n",
	  "t.yaml:3:9: pools[0]: backend rpc needs a supervisor: {command: [PATH, ARGS...]} or {socket: PATH}" },
	{ "rpc_both",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: { command: [/x], socket: /s } }]\n",
	  "t.yaml:3:66: pools[0].supervisor: give exactly one of command and socket" },
	{ "rpc_neither",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: {} }]\n",
	  "t.yaml:3:66: pools[0].supervisor: give exactly one of command and socket" },
	{ "rpc_relative",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: { command: [sup, -v] } }]\n",
	  "t.yaml:3:78: pools[0].supervisor.command[0]: expected the supervisor's absolute path, got 'sup'" },
	{ "rpc_empty_command",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: { command: [] } }]\n",
	  "t.yaml:3:77: pools[0].supervisor.command: expected [PATH, ARGS...], got an empty list" },
	{ "rpc_socket_relative",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: { socket: s.sock } }]\n",
	  "t.yaml:3:76: pools[0].supervisor.socket: expected an absolute path of a unix socket (under 108 bytes)" },
	{ "rpc_unknown_key",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: rpc, lane: l, policy: p, supervisor: { cmd: [/x] } }]\n",
	  "t.yaml:3:68: unknown key 'cmd' in pools[0].supervisor" },
	{ "supervisor_not_rpc",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, supervisor: { socket: /s } }]\n",
	  "t.yaml:3:52: pools[0].supervisor: only a pool with backend rpc has a supervisor" },
	{ "isolation_enhanced_not_rpc",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, backend: vm, lane: l, policy: p, isolation: enhanced }]\n",
	  "t.yaml:3:64: pools[0].isolation: enhanced isolation is an rpc supervisor's (its "
	  "operator's runtime); backend vm has one level" },
	{ "isolation_unknown",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, isolation: strong }]\n",
	  "t.yaml:3:51: pools[0].isolation: expected one of standard, enhanced; got 'strong'" },
	{ "ttl",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, ttl: { default_seconds: 100, max_seconds: 10 } }]\n",
	  "t.yaml:3:64: pools[0].ttl.default_seconds: default_seconds (100) is greater than max_seconds (10)" },
	{ "missing_env",
	  "api: { operator_token: \"${env:SL_NOT_SET_ANYWHERE}\" }\n",
	  "t.yaml:1:24: api.operator_token: environment variable SL_NOT_SET_ANYWHERE is not set" },
	{ "empty_env",
	  "api: { operator_token: \"${env:SL_EMPTY}\" }\n",
	  "t.yaml:1:24: api.operator_token: the secret is empty" },
	{ "missing_file",
	  "api: { operator_token: \"${file:/nonexistent/token}\" }\n",
	  "t.yaml:1:24: api.operator_token: cannot read secret file /nonexistent/token: No such file or directory" },
	{ "ref_unterminated",
	  "api: { operator_token: \"${env:SL_SET\" }\n",
	  "t.yaml:1:24: api.operator_token: unterminated ${ reference" },
	{ "ref_kind",
	  "api: { operator_token: \"${vault:x}\" }\n",
	  "t.yaml:1:24: api.operator_token: unknown reference: use ${env:NAME} or ${file:PATH}" },
	{ "ref_in_plain",
	  "daemon: { data_dir: \"${env:SL_SET}\" }\n",
	  "t.yaml:1:21: daemon.data_dir: ${...} references are resolved only in secret fields (tokens, passwords, keys, credential values)" },
	{ "missing_required",
	  "lanes: [{ name: a }]\n",
	  "t.yaml:1:9: lanes[0]: missing required key 'subnet'" },
	{ "client_both",
	  "gateway:\n"
	  "  clients: [{ name: c, match: { source: 10.0.0.0/8, user: u, password: p }, policy: p }]\n"
	  "policies: [{ name: p }]\n",
	  "t.yaml:2:31: gateway.clients[0].match: give either source, or user and password, not both" },
	{ "dup_tenant_key",
	  "tenants:\n"
	  "  - { name: a, keys: [same] }\n"
	  "  - { name: b, keys: [same] }\n",
	  "t.yaml:3:23: tenants[1].keys[0]: the same key as at 2:23; every key must name one tenant" },
	{ "cpus",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, limits: { cpus: 0.001 } }]\n",
	  "t.yaml:3:56: pools[0].limits.cpus: 0.001 is out of range 0.01..1024" },
	{ "template",
	  "lanes: [{ name: l, subnet: 10.0.0.0/24 }]\n"
	  "policies: [{ name: p }]\n"
	  "pools: [{ name: a, lane: l, policy: p, template: ./rootfs }]\n",
	  "t.yaml:3:50: pools[0].template: expected busybox, host or an absolute directory path" },
	{ "workers",
	  "gateway: { workers: many }\n",
	  "t.yaml:1:21: gateway.workers: expected auto or an integer in 1..256, got 'many'" },
	{ "credential_header",
	  "policies:\n"
	  "  - name: p\n"
	  "    credentials: [{ host: a.com, header: \"X Bad\", value: \"${env:SL_SET}\" }]\n",
	  "t.yaml:3:42: policies[0].credentials[0].header: 'X Bad' is not an HTTP header name" },
	{ "empty_dns",
	  "gateway: { dns: { servers: [] } }\n",
	  "t.yaml:1:28: gateway.dns.servers: empty: give 'system' or addresses" },
	{ "access_log",
	  "gateway: { access_log: relative.log }\n",
	  "t.yaml:1:24: gateway.access_log: expected stderr, off or an absolute path" },
	{ "dns_door_clash",
	  "lanes: [{ name: e, subnet: 10.9.0.0/24, doors: { forward: 53 } }]\n",
	  "t.yaml:1:59: lanes[0].doors.dns: port 53 is already the forward door" },
	{ "names_door_clash",
	  "lanes: [{ name: e, subnet: 10.9.0.0/24, doors: { forward: 3128, names: 3128 } }]\n",
	  "t.yaml:1:72: lanes[0].doors.names: port 3128 is already the forward door" },
	{ "dns_door_without_doors",
	  "lanes: [{ name: e, subnet: 10.9.0.0/24, doors: { dns: 5353 } }]\n",
	  "t.yaml:1:55: lanes[0].doors: a lane without doors has no DNS or name door" },
};

static void
test_bad_configs(void **state)
{
	(void)state;
	setenv("SL_SET", "x", 1);
	setenv("SL_EMPTY", "", 1);
	unsetenv("SL_NOT_SET_ANYWHERE");
	assert_true(sizeof(bad_cases) / sizeof(bad_cases[0]) >= 30);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct conf_diag d;
		struct conf *c;

		conf_diag_init(&d);
		c = conf_load_mem("t.yaml", bc->yaml, strlen(bc->yaml), &d);
		if (c || d.n != 1 || strcmp(d.lines[0], bc->want) != 0) {
			fprintf(stderr, "case %s:\n  want: %s\n", bc->name, bc->want);
			for (size_t k = 0; k < d.n; k++)
				fprintf(stderr, "  got:  %s\n", d.lines[k]);
			fail_msg("case %s", bc->name);
		}
		conf_diag_fini(&d);
	}
}

/* Every error of a file is reported in one pass, in file order. */
static void
test_all_errors_at_once(void **state)
{
	static const char yaml[] =
		"pools: [{ name: a, lane: nope, policy: nope }]\n"
		"daemon: { log: { level: loud } }\n"
		"gateway: { limits: { idle_timeout_ms: 1 }, dns: { attempts: 0 } }\n"
		"lanes:\n"
		"  - { name: a, subnet: 10.0.0.0/24 }\n"
		"  - { name: a, subnet: 10.0.0.0/24 }\n";
	static const char *const want[] = {
		"t.yaml:1:26: pools[0].lane: no lane named 'nope'",
		"t.yaml:1:40: pools[0].policy: no policy named 'nope'",
		"t.yaml:2:25: daemon.log.level: expected one of err, warn, info, debug; got 'loud'",
		"t.yaml:3:39: gateway.limits.idle_timeout_ms: 1 is out of range 1000..86400000",
		"t.yaml:3:61: gateway.dns.attempts: 0 is out of range 1..10",
		"t.yaml:6:13: lanes[1].name: duplicate lane name 'a' (first at 5:13)",
		"t.yaml:6:24: lanes[1].subnet: 10.0.0.0/24 overlaps lane 'a' (10.0.0.0/24)",
	};
	struct conf_diag d;

	(void)state;
	conf_diag_init(&d);
	assert_null(conf_load_mem("t.yaml", yaml, sizeof(yaml) - 1, &d));
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "  %s\n", d.lines[i]);
	assert_int_equal(d.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < d.n; i++)
		assert_string_equal(d.lines[i], want[i]);
	conf_diag_fini(&d);
}

/* A duplicate key is reported and the rest is still checked. */
static void
test_duplicate_key_does_not_hide_others(void **state)
{
	static const char yaml[] =
		"api:\n"
		"  socket: /a\n"
		"  socket: /b\n"
		"certs: { cache_size: 0 }\n";
	struct conf_diag d;

	(void)state;
	conf_diag_init(&d);
	assert_null(conf_load_mem("t.yaml", yaml, sizeof(yaml) - 1, &d));
	assert_int_equal(d.n, 2);
	assert_string_equal(d.lines[0], "t.yaml:3:3: duplicate key 'socket' (first at 2:3)");
	assert_string_equal(d.lines[1], "t.yaml:4:22: certs.cache_size: 0 is out of range 1..1000000");
	conf_diag_fini(&d);
}

/* No error line ever holds a secret's resolved value. */
static void
test_secret_never_in_errors(void **state)
{
	static const char yaml[] =
		"api: { operator_token: [\"${env:SL_SECRET}\"] }\n"
		"tenants:\n"
		"  - { name: a, keys: [\"${env:SL_SECRET}\"] }\n"
		"  - { name: b, keys: [\"${env:SL_SECRET}\"] }\n"
		"gateway:\n"
		"  clients: [{ name: c, match: { user: \"u\", password: \"${env:SL_SECRET}\" }, policy: x }]\n"
		"policies: [{ name: p, credentials: [{ host: \"a b\", header: X, value: \"${env:SL_SECRET}x\" }] }]\n";
	struct conf_diag d;

	(void)state;
	setenv("SL_SECRET", "hunter2-topsecret", 1);
	conf_diag_init(&d);
	assert_null(conf_load_mem("t.yaml", yaml, sizeof(yaml) - 1, &d));
	assert_true(d.n >= 4);
	for (size_t i = 0; i < d.n; i++)
		assert_null(strstr(d.lines[i], "hunter2"));
	conf_diag_fini(&d);
	unsetenv("SL_SECRET");
}

static void
test_secrets_resolve(void **state)
{
	char path[] = "/tmp/sl-test-secret-XXXXXX";
	char yaml[512];
	struct conf_diag d;
	struct conf *c;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "filetoken\n", 10), 10);
	close(fd);
	setenv("SL_TOK", "envtoken", 1);
	snprintf(yaml, sizeof(yaml),
		 "api: { operator_token: \"${file:%s}\" }\n"
		 "policies:\n"
		 "  - name: p\n"
		 "    credentials:\n"
		 "      - { host: API.GitHub.com, header: Authorization, value: \"Bearer ${env:SL_TOK} $${literal}\" }\n",
		 path);
	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", yaml, strlen(yaml), &d);
	assert_int_equal(d.n, 0);
	assert_non_null(c);
	/* One trailing newline of a secret file is not part of the secret. */
	assert_string_equal(c->api.operator_token.value, "filetoken");
	assert_int_equal(c->api.operator_token.len, 9);
	assert_int_equal(c->policies[0].ncredentials, 1);
	assert_string_equal(c->policies[0].credentials[0].value.value, "Bearer envtoken ${literal}");
	/* The reference text, safe to show, keeps the references. */
	assert_string_equal(c->policies[0].credentials[0].value.ref, "Bearer ${env:SL_TOK} $${literal}");
	assert_string_equal(c->policies[0].credentials[0].host.host, "api.github.com");
	assert_false(c->policies[0].credentials[0].host.wildcard);
	conf_unref(c);
	conf_diag_fini(&d);
	unlink(path);
	unsetenv("SL_TOK");
}

/* The CA's files follow daemon.data_dir unless given; given ones win. */
static void
test_certs_in_data_dir(void **state)
{
	static const char y1[] = "daemon: { data_dir: /srv/sl }\n";
	static const char y2[] = "daemon: { data_dir: /srv/sl }\n"
				 "certs: { ca_cert: /etc/sl/ca.pem }\n";
	struct conf_diag d;
	struct conf *c;

	(void)state;
	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", y1, sizeof(y1) - 1, &d);
	assert_non_null(c);
	assert_string_equal(c->certs.ca_cert, "/srv/sl/ca.pem");
	assert_string_equal(c->certs.ca_key, "/srv/sl/ca.key");
	conf_unref(c);
	c = conf_load_mem("t.yaml", y2, sizeof(y2) - 1, &d);
	assert_non_null(c);
	assert_string_equal(c->certs.ca_cert, "/etc/sl/ca.pem");
	assert_string_equal(c->certs.ca_key, "/srv/sl/ca.key");
	conf_unref(c);
	assert_int_equal(d.n, 0);
	conf_diag_fini(&d);
}

/* daemon.idmap: the whole space from the host's 65536 up to the last
 * id; a key not given keeps its default. */
static void
test_idmap(void **state)
{
	static const char y1[] = "daemon: { idmap: { base: 65536, ranges: 65534 } }\n";
	static const char y2[] = "daemon: { idmap: { base: 2147483648 } }\n";
	struct conf_diag d;
	struct conf *c;

	(void)state;
	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", y1, sizeof(y1) - 1, &d);
	assert_non_null(c);
	assert_int_equal(c->daemon.idmap_base, 65536);
	assert_int_equal(c->daemon.idmap_ranges, 65534);
	conf_unref(c);
	c = conf_load_mem("t.yaml", y2, sizeof(y2) - 1, &d);
	assert_non_null(c);
	assert_int_equal(c->daemon.idmap_base, 2147483648u);
	assert_int_equal(c->daemon.idmap_ranges, 8192);
	conf_unref(c);
	assert_int_equal(d.n, 0);
	conf_diag_fini(&d);
}

static void
test_default_config(void **state)
{
	struct conf_diag d;
	struct conf *c;
	const struct conf_gateway *g;
	const struct conf_policy *p;
	const struct conf_pool *po;
	char txt[64];

	(void)state;
	conf_diag_init(&d);
	c = conf_load_mem("<default>", conf_default_yaml, conf_default_yaml_len, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(c);
	assert_int_equal(d.n, 0);

	assert_string_equal(c->daemon.data_dir, "/var/lib/sluice");
	assert_string_equal(c->daemon.fleet_netns, "sluice");
	assert_false(c->daemon.fleet_teardown);
	assert_string_equal(c->daemon.control_socket, "/run/sluice/control.sock");
	assert_int_equal(c->daemon.idmap_base, 1073741824u);
	assert_int_equal(c->daemon.idmap_ranges, 8192);
	assert_int_equal(c->daemon.log_level, CONF_LOG_INFO);
	assert_int_equal(c->daemon.log_format, CONF_LOG_TEXT);

	assert_true(c->api.listen.set);
	assert_string_equal(c->api.listen.host, "127.0.0.1");
	assert_int_equal(c->api.listen.port, 8080);
	assert_string_equal(c->api.socket, "/run/sluice/api.sock");
	assert_null(c->api.operator_token.value);

	g = &c->gateway;
	assert_int_equal(g->workers, 0);
	assert_true(g->listen_forward.set);
	assert_string_equal(g->listen_forward.host, "127.0.0.1");
	assert_int_equal(g->listen_forward.port, 3128);
	assert_int_equal(((const struct sockaddr_in *)&g->listen_forward.addr)->sin_family, AF_INET);
	assert_int_equal(ntohs(((const struct sockaddr_in *)&g->listen_forward.addr)->sin_port), 3128);
	assert_true(g->listen_socks.set);
	assert_int_equal(g->listen_socks.port, 1080);
	assert_int_equal(g->nclients, 1);
	assert_string_equal(g->clients[0].name, "local");
	assert_int_equal(g->clients[0].match, CONF_MATCH_SOURCE);
	inet_ntop(AF_INET, g->clients[0].source.addr, txt, sizeof(txt));
	assert_string_equal(txt, "127.0.0.0");
	assert_int_equal(g->clients[0].source.prefix, 8);
	assert_string_equal(g->clients[0].policy, "default");
	assert_int_equal(g->clients[0].policy_idx, 0);
	assert_int_equal(g->ndns_servers, 1);
	assert_int_equal(g->dns_servers[0].kind, CONF_DNS_SYSTEM);
	assert_int_equal(g->dns_timeout_ms, 2000);
	assert_int_equal(g->dns_attempts, 2);
	assert_int_equal(g->dns_cache_size, 10000);
	assert_int_equal(g->max_connections, 20000);
	assert_int_equal(g->max_header_bytes, 65536);
	assert_int_equal(g->connect_timeout_ms, 10000);
	assert_int_equal(g->idle_timeout_ms, 300000);
	assert_int_equal(g->response_timeout_ms, 300000);
	assert_int_equal(g->body_timeout_ms, 0);
	assert_int_equal(g->body_min_rate, 500);
	assert_int_equal(g->body_min_rate_grace_ms, 20000);
	assert_string_equal(g->access_log, "stderr");

	assert_int_equal(c->nlanes, 2);
	assert_string_equal(c->lanes[0].name, "none");
	inet_ntop(AF_INET, c->lanes[0].subnet.addr, txt, sizeof(txt));
	assert_string_equal(txt, "10.88.0.0");
	assert_int_equal(c->lanes[0].subnet.prefix, 24);
	assert_false(c->lanes[0].egress);
	assert_false(c->lanes[0].transparent);
	assert_int_equal(c->lanes[0].door_forward, 0);
	assert_string_equal(c->lanes[1].name, "egress");
	inet_ntop(AF_INET, c->lanes[1].subnet.addr, txt, sizeof(txt));
	assert_string_equal(txt, "10.88.1.0");
	assert_int_equal(c->lanes[1].subnet.prefix, 24);
	assert_true(c->lanes[1].egress);
	assert_int_equal(c->lanes[1].door_forward, 3128);
	assert_int_equal(c->lanes[1].door_socks, 1080);
	assert_int_equal(c->lanes[1].door_intercept, 3129);
	assert_true(c->lanes[1].transparent);

	assert_int_equal(c->npolicies, 1);
	p = conf_policy_find(c, "default");
	assert_ptr_equal(p, &c->policies[0]);
	assert_int_equal(p->mode, CONF_POLICY_ENFORCE);
	assert_int_equal(p->allow.n, 2);
	assert_string_equal(p->allow.v[0].host, "example.com");
	assert_false(p->allow.v[0].wildcard);
	assert_int_equal(p->allow.v[0].port, 0);
	assert_string_equal(p->allow.v[1].host, "example.org");
	assert_true(p->allow.v[1].wildcard);
	assert_int_equal(p->allow.v[1].port, 443);
	assert_int_equal(p->deny.n, 0);
	assert_int_equal(p->intercept.n, 0);
	assert_int_equal(p->ncredentials, 0);
	assert_int_equal(p->allow_private.n, 0);

	assert_int_equal(c->ntenants, 0);

	assert_int_equal(c->npools, 1);
	po = conf_pool_find(c, "default");
	assert_ptr_equal(po, &c->pools[0]);
	assert_int_equal(po->backend, CONF_BACKEND_NS);
	assert_int_equal(po->template_kind, CONF_TEMPLATE_HOST);
	assert_null(po->template_dir);
	assert_string_equal(po->lane, "egress");
	assert_int_equal(po->lane_idx, 1);
	assert_string_equal(po->policy, "default");
	assert_int_equal(po->policy_idx, 0);
	assert_int_equal(po->warm, 2);
	assert_int_equal(po->warm_max, 8);
	assert_int_equal(po->memory_mb, 256);
	assert_int_equal(po->cpus_milli, 1000);
	assert_int_equal(po->pids, 256);
	assert_int_equal(po->ttl_default_s, 3600);
	assert_int_equal(po->ttl_max_s, 86400);
	assert_ptr_equal(conf_lane_find(c, "egress"), &c->lanes[1]);
	assert_null(conf_lane_find(c, "nope"));

	/* The CA files default into daemon.data_dir (here the default). */
	assert_string_equal(c->certs.ca_cert, "/var/lib/sluice/ca.pem");
	assert_string_equal(c->certs.ca_key, "/var/lib/sluice/ca.key");
	assert_int_equal(c->certs.cache_size, 10000);
	assert_int_equal(c->certs.leaf_validity_days, 30);
	assert_null(c->certs.upstream_ca);
	assert_string_equal(c->preview.domain, "preview.localhost");
	assert_int_equal(c->preview.listen.port, 8443);

	/* The file in the tree is the compiled-in default. */
	{
		char path[4096];
		struct conf_diag d2;
		struct conf *c2;
		const char *src = getenv("SL_TESTDATA");

		assert_non_null(src);
		snprintf(path, sizeof(path), "%s/../conf/sluice.yaml", src);
		conf_diag_init(&d2);
		c2 = conf_load_file(path, &d2);
		assert_non_null(c2);
		assert_int_equal(c2->npools, c->npools);
		conf_unref(c2);
		conf_diag_fini(&d2);
	}
	assert_ptr_equal(conf_ref(c), c);
	conf_unref(c);
	conf_unref(c);
	conf_diag_fini(&d);
}

/* An empty file is every default. */
/* The DNS and name doors: on every lane with doors, 53 and the first free
 * port of 3130..3139 unless given. */
static void
test_lane_dns_doors(void **state)
{
	const char *yaml = "lanes:\n"
			   "  - { name: a, subnet: 10.9.0.0/24, doors: { forward: 3130, socks: 3131 } }\n"
			   "  - { name: b, subnet: 10.9.1.0/24, doors: { forward: 3128, dns: 5353, names: 4000 } }\n"
			   "  - { name: c, subnet: 10.9.2.0/24 }\n";
	struct conf_diag d;
	struct conf *c;

	(void)state;
	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", yaml, strlen(yaml), &d);
	if (!c)
		fail_msg("%s", d.n ? d.lines[0] : "?");
	assert_int_equal(c->lanes[0].door_dns, 53);
	assert_int_equal(c->lanes[0].door_names, 3132);
	assert_int_equal(c->lanes[1].door_dns, 5353);
	assert_int_equal(c->lanes[1].door_names, 4000);
	assert_int_equal(c->lanes[2].door_dns, 0);
	assert_int_equal(c->lanes[2].door_names, 0);
	conf_unref(c);
	conf_diag_fini(&d);
}

static void
test_empty_is_defaults(void **state)
{
	struct conf_diag d;
	struct conf *c;

	(void)state;
	conf_diag_init(&d);
	c = conf_load_mem("e.yaml", "", 0, &d);
	assert_non_null(c);
	assert_int_equal(c->gateway.max_header_bytes, 65536);
	assert_int_equal(c->gateway.listen_forward.port, 3128);
	assert_int_equal(c->gateway.response_timeout_ms, 300000);
	assert_int_equal(c->gateway.body_timeout_ms, 0);
	assert_int_equal(c->gateway.body_min_rate, 500);
	assert_int_equal(c->gateway.body_min_rate_grace_ms, 20000);
	assert_int_equal(c->nlanes, 0);
	conf_unref(c);
	/* the limits an exchange keeps, as given (0: none) */
	{
		static const char lim[] =
			"gateway: { limits: { response_timeout_ms: 100, body_timeout_ms: 0,\n"
			"  body_min_rate: 0, body_min_rate_grace_ms: 86400000 } }\n";

		c = conf_load_mem("l.yaml", lim, sizeof(lim) - 1, &d);
	}
	assert_non_null(c);
	assert_int_equal(c->gateway.response_timeout_ms, 100);
	assert_int_equal(c->gateway.body_timeout_ms, 0);
	assert_int_equal(c->gateway.body_min_rate, 0);
	assert_int_equal(c->gateway.body_min_rate_grace_ms, 86400000);
	assert_null(c->preview.domain);
	conf_unref(c);
	c = conf_load_mem("e.yaml", "# only a comment\n", 17, &d);
	assert_non_null(c);
	conf_unref(c);
	conf_diag_fini(&d);
}

static void
test_load_file_errors(void **state)
{
	struct conf_diag d;

	(void)state;
	conf_diag_init(&d);
	assert_null(conf_load_file("/nonexistent/sluice.yaml", &d));
	assert_int_equal(d.n, 1);
	assert_string_equal(d.lines[0], "/nonexistent/sluice.yaml: cannot open: No such file or directory");
	conf_diag_fini(&d);
	conf_diag_init(&d);
	assert_null(conf_load_file("/tmp", &d));
	assert_string_equal(d.lines[0], "/tmp: not a regular file");
	conf_diag_fini(&d);
}

static void
test_cidr_helpers(void **state)
{
	struct conf_cidr a, b;
	char err[128];
	uint8_t ip[16];

	(void)state;
	assert_int_equal(conf_cidr_parse("", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(conf_cidr_parse("10.0.0.0/", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(conf_cidr_parse("10.0.0.0/-1", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(conf_cidr_parse("10.0.0.0/8x", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(conf_cidr_parse("fd00::1/8", &a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "host bits are set (the network is fd00::/8)");
	assert_int_equal(conf_cidr_parse("10.1.2.3", &a, err, sizeof(err)), 0);
	assert_int_equal(a.prefix, 32);
	assert_int_equal(conf_cidr_parse("0.0.0.0/0", &a, err, sizeof(err)), 0);
	inet_pton(AF_INET, "203.0.113.9", ip);
	assert_true(conf_cidr_contains(&a, AF_INET, ip));
	assert_int_equal(conf_cidr_parse("10.88.0.0/22", &a, err, sizeof(err)), 0);
	inet_pton(AF_INET, "10.88.3.255", ip);
	assert_true(conf_cidr_contains(&a, AF_INET, ip));
	inet_pton(AF_INET, "10.88.4.0", ip);
	assert_false(conf_cidr_contains(&a, AF_INET, ip));
	assert_false(conf_cidr_contains(&a, AF_INET6, ip));
	assert_int_equal(conf_cidr_parse("10.88.3.0/24", &b, err, sizeof(err)), 0);
	assert_true(conf_cidr_overlap(&a, &b));
	assert_true(conf_cidr_overlap(&b, &a));
	assert_int_equal(conf_cidr_parse("10.88.4.0/24", &b, err, sizeof(err)), 0);
	assert_false(conf_cidr_overlap(&a, &b));
}

static void
test_host_check(void **state)
{
	static const char *const bad[] = {
		"", "*", "*.", "a.*", "a*.com", "**.com", "a..b", ".a", "-a.com", "a-.com",
		"a b", "a/b", "a@b", "\xc3\xa9.com",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	};
	static const char *const good[] = {
		"a", "example.com", "*.example.com", "xn--bcher-kva.de", "a_b.example",
		"10.0.0.1", "::1", "example.com.",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	};
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (conf_host_check(bad[i], true, err, sizeof(err)) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (conf_host_check(good[i], true, err, sizeof(err)) != 0)
			fail_msg("'%s' refused: %s", good[i], err);
	assert_int_equal(conf_host_check("*.a.com", false, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "wildcards are not allowed here");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_configs),
		cmocka_unit_test(test_certs_in_data_dir),
		cmocka_unit_test(test_idmap),
		cmocka_unit_test(test_all_errors_at_once),
		cmocka_unit_test(test_duplicate_key_does_not_hide_others),
		cmocka_unit_test(test_secret_never_in_errors),
		cmocka_unit_test(test_load_file_errors),
		cmocka_unit_test(test_cidr_helpers),
		cmocka_unit_test(test_host_check),
		cmocka_unit_test(test_lane_dns_doors),
		cmocka_unit_test(test_secrets_resolve),
		cmocka_unit_test(test_empty_is_defaults),
		cmocka_unit_test(test_default_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

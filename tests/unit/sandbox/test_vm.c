/* test_vm.c: the pure parts of the vm backend: QMP line framing and
 * message parsing (bad inputs first, a stream split at every offset), the
 * saved record and its checks, the kernel command line, the cpuinfo TSC
 * fallback. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "sandbox.h"
#include "vm-int.h"

/* ---- QMP ------------------------------------------------------------------ */

static void
test_qmp_frame(void **st)
{
	size_t ll = 99;

	(void)st;
	assert_int_equal(sbx_qmp_frame("", 0, 16, &ll), 0);
	assert_int_equal(sbx_qmp_frame("{\"a\"", 4, 16, &ll), 0);
	assert_int_equal(sbx_qmp_frame("0123456789abcdef", 16, 16, &ll), -EMSGSIZE);
	assert_int_equal(sbx_qmp_frame("\n", 1, 16, &ll), 1);
	assert_int_equal(ll, 0);
	assert_int_equal(sbx_qmp_frame("{}\n{", 4, 16, &ll), 1);
	assert_int_equal(ll, 2);
}

static void
expect_proto(const char *line, const char *needle)
{
	struct sbx_qmp_msg m;
	char err[256] = "";

	assert_int_equal(sbx_qmp_parse(line, strlen(line), &m, err, sizeof(err)), -EPROTO);
	if (!strstr(err, needle))
		fail_msg("%s: \"%s\" lacks \"%s\"", line, err, needle);
	assert_null(m.value);
}

static void
test_qmp_parse_bad(void **st)
{
	(void)st;
	expect_proto("", "not JSON");
	expect_proto("nope", "not JSON");
	expect_proto("{\"return\": ", "not JSON");
	expect_proto("[1,2]", "not a JSON object");
	expect_proto("\"return\"", "not JSON"); /* a top-level scalar */
	expect_proto("{}", "no known shape");
	expect_proto("{\"event\": 7}", "no known shape");
	expect_proto("{\"QMP\": 1}", "no known shape");
	expect_proto("{\"error\": {}}", "no class");
	expect_proto("{\"error\": \"GenericError\"}", "no class");
	expect_proto("{\"error\": {\"class\": 3}}", "no class");
	expect_proto("{\"return\": {}, \"return\": {}}", "not JSON");
}

static void
test_qmp_parse_good(void **st)
{
	struct sbx_qmp_msg m;
	const char *l;

	(void)st;
	l = "{\"QMP\": {\"version\": {\"qemu\": {\"major\": 7}}, \"capabilities\": [\"oob\"]}}";
	assert_int_equal(sbx_qmp_parse(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.kind, SBX_QMP_GREETING);
	l = "{\"return\": {}}\r";
	assert_int_equal(sbx_qmp_parse(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.kind, SBX_QMP_RETURN);
	assert_true(json_is_object(m.value));
	json_decref(m.value);
	l = "{\"return\": {\"status\": \"completed\", \"total-time\": 12}}";
	assert_int_equal(sbx_qmp_parse(l, strlen(l), &m, NULL, 0), 0);
	assert_string_equal(json_string_value(json_object_get(m.value, "status")), "completed");
	json_decref(m.value);
	l = "{\"error\": {\"class\": \"GenericError\", \"desc\": \"no such device\"}}";
	assert_int_equal(sbx_qmp_parse(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.kind, SBX_QMP_ERROR);
	assert_string_equal(m.name, "GenericError");
	assert_string_equal(m.desc, "no such device");
	l = "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"STOP\"}";
	assert_int_equal(sbx_qmp_parse(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.kind, SBX_QMP_EVENT);
	assert_string_equal(m.name, "STOP");
	assert_null(m.value);
}

/* A greeting, an event and a return, arriving split at every offset:
 * framing finds the same three lines, in order, every time. */
static void
test_qmp_split(void **st)
{
	static const char stream[] =
	    "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n"
	    "{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 0}}\n"
	    "{\"return\": {\"running\": true, \"status\": \"running\"}}\n";
	const enum sbx_qmp_kind want[] = {SBX_QMP_GREETING, SBX_QMP_EVENT, SBX_QMP_RETURN};
	size_t total = strlen(stream);

	(void)st;
	for (size_t cut = 0; cut <= total; cut++) {
		char buf[512];
		size_t len = 0, fed = 0, got = 0;
		while (got < 3) {
			size_t ll;
			int r = sbx_qmp_frame(buf, len, sizeof(buf), &ll);
			assert_true(r >= 0);
			if (r == 0) {
				size_t upto = fed < cut ? cut : total;
				assert_true(fed < upto);
				memcpy(buf + len, stream + fed, upto - fed);
				len += upto - fed;
				fed = upto;
				continue;
			}
			struct sbx_qmp_msg m;
			assert_int_equal(sbx_qmp_parse(buf, ll, &m, NULL, 0), 0);
			assert_int_equal(m.kind, want[got]);
			json_decref(m.value);
			memmove(buf, buf + ll + 1, len - ll - 1);
			len -= ll + 1;
			got++;
		}
		assert_int_equal(len, 0);
	}
}

/* ---- the saved record ------------------------------------------------------ */

static struct sbx_vm_saved
good_saved(void)
{
	struct sbx_vm_saved sv;

	memset(&sv, 0, sizeof(sv));
	strcpy(sv.id, "vm-1");
	sv.pid = 4242;
	sv.start_time = 123456;
	strcpy(sv.state_dir, "/run/sluice/sandboxes/vm-1");
	sv.cg_version = 1;
	sv.ncg = 2;
	strcpy(sv.cg[0], "/sys/fs/cgroup/memory/sluice/vm-1");
	strcpy(sv.cg[1], "/sys/fs/cgroup/cpu/sluice/vm-1");
	strcpy(sv.snap, "80c9a366908f7276");
	strcpy(sv.peer_ifname, "tap7");
	strcpy(sv.peer_netns, "fleet");
	sv.peer_ifindex = 9;
	sv.peer_netns_ino = 4026532000ull;
	return sv;
}

/* good_saved()'s JSON with key set to v (NULL: removed), then parsed. */
static void
expect_saved_bad(const char *key, json_t *v, const char *needle)
{
	struct sbx_vm_saved sv = good_saved(), out;
	json_t *j = sbx_vm_saved_to_json(&sv);
	char err[256] = "";

	assert_non_null(j);
	if (strncmp(key, "net.", 4) == 0) {
		json_t *net = json_object_get(j, "net");
		if (v)
			json_object_set_new(net, key + 4, v);
		else
			json_object_del(net, key + 4);
	} else if (v) {
		json_object_set_new(j, key, v);
	} else {
		json_object_del(j, key);
	}
	assert_int_equal(sbx_vm_saved_parse(j, &out, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("%s: \"%s\" lacks \"%s\"", key, err, needle);
	json_decref(j);
}

static void
test_saved_bad(void **st)
{
	struct sbx_vm_saved out;
	char err[256];
	json_t *a;

	(void)st;
	assert_int_equal(sbx_vm_saved_parse(NULL, &out, err, sizeof(err)), -EINVAL);
	a = json_array();
	assert_int_equal(sbx_vm_saved_parse(a, &out, err, sizeof(err)), -EINVAL);
	json_decref(a);
	expect_saved_bad("backend", json_string("ns"), "backend");
	expect_saved_bad("backend", NULL, "backend");
	expect_saved_bad("version", json_integer(2), "version");
	expect_saved_bad("id", json_string("a/b"), "id");
	expect_saved_bad("id", json_string(""), "id");
	expect_saved_bad("pid", json_integer(1), "pid");
	expect_saved_bad("pid", json_integer(4194305), "pid");
	expect_saved_bad("pid", json_string("7"), "pid");
	expect_saved_bad("start_time", json_integer(-1), "start_time");
	expect_saved_bad("state_dir", json_string("run/vm-1"), "state_dir");
	expect_saved_bad("state_dir", json_string("/run/../vm-1"), "state_dir");
	expect_saved_bad("state_dir", json_string("/run/other"), "state_dir");
	expect_saved_bad(
	    "state_dir",
	    json_string("/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/vm-1"),
	    "state_dir");
	expect_saved_bad("qmp_socket", json_string("/tmp/qmp.sock"), "qmp_socket");
	expect_saved_bad("qmp_socket", NULL, "qmp_socket");
	expect_saved_bad("agent_socket", json_string("/run/sluice/sandboxes/vm-1/../x"),
	                 "agent_socket");
	expect_saved_bad("cgroup_version", json_integer(3), "cgroup_version");
	expect_saved_bad("cgroups", json_array(), "cgroups");
	expect_saved_bad("cgroups", json_pack("[s]", "relative/vm-1"), "cgroup 0");
	expect_saved_bad("cgroups", json_pack("[s,s]", "/c/vm-1", "/c/vm-1"), "twice");
	expect_saved_bad("cgroups", json_pack("[s]", "/c/other"), "cgroup 0");
	expect_saved_bad("snapshot", json_string("../../etc"), "snapshot");
	expect_saved_bad("snapshot", NULL, "snapshot");
	expect_saved_bad("net", json_string("tap"), "net");
	expect_saved_bad("net.peer_ifname", json_string("a/b"), "peer_ifname");
	expect_saved_bad("net.peer_ifname", json_string("0123456789abcdef"), "peer_ifname");
	expect_saved_bad("net.peer_ifindex", json_integer(-1), "peer_ifindex");
	expect_saved_bad("net.peer_netns", json_string("../x"), "peer_netns");
	expect_saved_bad("net.peer_netns", json_string(".."), "peer_netns");
	expect_saved_bad("net.peer_netns_ino", json_integer(-5), "peer_netns_ino");
}

static void
test_saved_good(void **st)
{
	struct sbx_vm_saved sv = good_saved(), out;
	json_t *j;
	char err[256] = "";

	(void)st;
	j = sbx_vm_saved_to_json(&sv);
	assert_string_equal(json_string_value(json_object_get(j, "qmp_socket")),
	                    "/run/sluice/sandboxes/vm-1/qmp.sock");
	assert_int_equal(sbx_vm_saved_parse(j, &out, err, sizeof(err)), 0);
	assert_memory_equal(&sv, &out, sizeof(sv));
	json_decref(j);
	/* no link, cold boot (empty key), cgroup v2 */
	memset(sv.peer_ifname, 0, sizeof(sv.peer_ifname));
	memset(sv.peer_netns, 0, sizeof(sv.peer_netns));
	sv.peer_ifindex = 0;
	sv.peer_netns_ino = 0;
	memset(sv.snap, 0, sizeof(sv.snap));
	sv.cg_version = 2;
	sv.ncg = 1;
	memset(sv.cg[1], 0, sizeof(sv.cg[1]));
	j = sbx_vm_saved_to_json(&sv);
	assert_null(json_object_get(j, "net"));
	assert_int_equal(sbx_vm_saved_parse(j, &out, err, sizeof(err)), 0);
	assert_memory_equal(&sv, &out, sizeof(sv));
	json_decref(j);
}

/* ---- command line, TSC ------------------------------------------------------ */

static void
test_cmdline(void **st)
{
	char small[16], cl[512];

	(void)st;
	assert_int_equal(sbx_vm_cmdline(small, sizeof(small), "h", 0), -ENAMETOOLONG);
	assert_int_equal(sbx_vm_cmdline(cl, sizeof(cl), "vm-1", 0), 0);
	assert_null(strstr(cl, "tsc"));
	assert_non_null(strstr(cl, " sluice.hostname=vm-1"));
	assert_non_null(strstr(cl, "sluice.root=/dev/vda sluice.port=sluice.agent"));
	assert_int_equal(sbx_vm_cmdline(cl, sizeof(cl), "x", 2445404), 0);
	assert_non_null(strstr(cl, " tsc_early_khz=2445404 tsc=reliable "));
	assert_non_null(strstr(cl, "panic=-1"));
	assert_non_null(strstr(cl, " cryptomgr.notests=1 "));
	assert_non_null(strstr(cl, "initcall_blacklist=init_kprobe_trace,"));
	assert_null(strstr(cl, "btf_vmlinux_init"));
}

static void
test_cpuinfo(void **st)
{
	(void)st;
	assert_int_equal(sbx_vm_cpuinfo_khz(""), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("processor\t: 0\n"), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("cpu MHz\t\t: \n"), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("cpu MHz\t\t: abc\n"), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("cpu MHz\n: 5\n"), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("cpu MHz\t\t: -3\n"), 0);
	assert_int_equal(sbx_vm_cpuinfo_khz("processor\t: 0\ncpu MHz\t\t: 2445.404\ncpu MHz : 1\n"),
	                 2445404);
	assert_int_equal(sbx_vm_cpuinfo_khz("cpu MHz : 3000"), 3000000);
}

/* ---- QMP commands, option escaping, snapshot back-off --------------------- */

static void
test_qmp_line(void **st)
{
	json_t *args = json_pack("{s:s}", "fdname", "mig"), *j;
	struct sbx_qmp_msg m;
	char err[256];
	size_t n = 0;
	char *l;

	(void)st;
	l = sbx_qmp_line("query-status", NULL, 7, &n);
	assert_non_null(l);
	assert_int_equal(n, strlen(l));
	assert_int_equal(l[n - 1], '\n');
	assert_null(memchr(l, '\n', n - 1)); /* one line */
	j = json_loadb(l, n - 1, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "execute")), "query-status");
	assert_int_equal(json_integer_value(json_object_get(j, "id")), 7);
	assert_null(json_object_get(j, "arguments"));
	json_decref(j);
	free(l);

	l = sbx_qmp_line("getfd", args, 1LL << 40, &n);
	assert_non_null(l);
	j = json_loadb(l, n - 1, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "id")), 1LL << 40);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "arguments"), "fdname")), "mig");
	json_decref(j);
	free(l);
	assert_int_equal(args->refcount, 1); /* borrowed */
	json_decref(args);

	/* replies carry the id back; events and id-less replies have -1 */
	assert_int_equal(sbx_qmp_parse("{\"return\": {}, \"id\": 7}", 23, &m, err, sizeof(err)), 0);
	assert_int_equal(m.id, 7);
	json_decref(m.value);
	const char *e = "{\"error\": {\"class\": \"C\", \"desc\": \"d\"}, \"id\": 9}";
	assert_int_equal(sbx_qmp_parse(e, strlen(e), &m, err, sizeof(err)), 0);
	assert_int_equal(m.kind, SBX_QMP_ERROR);
	assert_int_equal(m.id, 9);
	e = "{\"return\": {}, \"id\": \"x\"}";
	assert_int_equal(sbx_qmp_parse(e, strlen(e), &m, err, sizeof(err)), 0);
	assert_int_equal(m.id, -1);
	json_decref(m.value);
	e = "{\"event\": \"STOP\", \"timestamp\": {}}";
	assert_int_equal(sbx_qmp_parse(e, strlen(e), &m, err, sizeof(err)), 0);
	assert_int_equal(m.id, -1);
}

static void
test_opt_escape(void **st)
{
	char out[16];

	(void)st;
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "/a/b"), 0);
	assert_string_equal(out, "/a/b");
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "/a,b"), 0);
	assert_string_equal(out, "/a,,b");
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), ",x,,"), 0);
	assert_string_equal(out, ",,x,,,,");
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), ""), 0);
	assert_string_equal(out, "");
	/* "=" needs no escape in a value; a comma cannot end an option early */
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "a=b,id=x"), 0);
	assert_string_equal(out, "a=b,,id=x");
	/* exact fit, one over, a doubled comma over */
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "0123456789abcde"), 0);
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "0123456789abcdef"), -ENAMETOOLONG);
	assert_int_equal(sbx_vm_opt_escape(out, sizeof(out), "0123456789abcd,"), -ENAMETOOLONG);
	assert_int_equal(sbx_vm_opt_escape(out, 0, ""), -ENAMETOOLONG);
}

static void
test_backoff(void **st)
{
	(void)st;
	assert_int_equal(sbx_vm_backoff_ms(1), 30000);
	assert_int_equal(sbx_vm_backoff_ms(2), 60000);
	assert_int_equal(sbx_vm_backoff_ms(3), 120000);
	assert_int_equal(sbx_vm_backoff_ms(5), 480000);
	assert_int_equal(sbx_vm_backoff_ms(6), 600000);
	assert_int_equal(sbx_vm_backoff_ms(1000000), 600000);
	assert_int_equal(sbx_vm_backoff_ms(0), 30000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_qmp_frame),      cmocka_unit_test(test_qmp_parse_bad),
	    cmocka_unit_test(test_qmp_parse_good), cmocka_unit_test(test_qmp_split),
	    cmocka_unit_test(test_saved_bad),      cmocka_unit_test(test_saved_good),
	    cmocka_unit_test(test_cmdline),        cmocka_unit_test(test_cpuinfo),
	    cmocka_unit_test(test_qmp_line),       cmocka_unit_test(test_opt_escape),
	    cmocka_unit_test(test_backoff),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

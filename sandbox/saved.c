/* saved.c: the pure parts of re-adoption: what sbx_save() writes for a
 * sandbox (the part every backend shares, and `ns`'s own) and its checks,
 * the start time from /proc/PID/stat, and whether /proc/PID/cgroup names a
 * sandbox. Text in, values out; no I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <jansson.h>

#include "sandbox-int.h"

int
sbx_stat_starttime(const char *stat, size_t len, unsigned long long *out)
{
	const char *rp = NULL, *p, *end = stat + len;
	unsigned long long v = 0;
	int field = 2; /* the comm ends field 2 */

	if (!stat || !len)
		return -EINVAL;
	for (p = stat; p < end && *p; p++)
		if (*p == ')')
			rp = p;
	end = p; /* stop at a NUL too */
	if (!rp || !memchr(stat, '(', (size_t)(rp - stat)))
		return -EINVAL;
	p = rp + 1;
	/* Fields after the comm are single spaces apart. */
	while (p < end) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		field++;
		if (field == 22) {
			size_t nd = 0;
			for (; p < end && *p >= '0' && *p <= '9'; p++, nd++) {
				if (v > (~0ull - 9) / 10)
					return -EINVAL;
				v = v * 10 + (unsigned long long)(*p - '0');
			}
			if (nd == 0 || (p < end && *p != ' ' && *p != '\n'))
				return -EINVAL;
			*out = v;
			return 0;
		}
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		if (p < end && *p == '\n')
			return -EINVAL;
	}
	return -EINVAL;
}

bool
sbx_cgroup_names(const char *pc, const char *id)
{
	size_t il = strlen(id);

	if (!pc || !il)
		return false;
	for (const char *line = pc; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

		if (c2) {
			const char *path = c2 + 1;
			size_t pl = len - (size_t)(path - line);
			if (pl > il && path[pl - il - 1] == '/' &&
			    memcmp(path + pl - il, id, il) == 0)
				return true;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return false;
}

json_t *
sbx_rec_to_json(const struct sbx_rec *r, const char *backend, json_t *extra)
{
	json_t *j, *cg, *net = NULL;

	cg = json_array();
	for (size_t i = 0; cg && i < r->ncg; i++)
		json_array_append_new(cg, json_string(r->cg[i]));
	if (r->peer_ifname[0]) {
		net = json_pack("{s:s, s:i}", "peer_ifname", r->peer_ifname, "peer_ifindex",
		                r->peer_ifindex);
		if (net && r->peer_netns[0])
			json_object_set_new(net, "peer_netns", json_string(r->peer_netns));
		if (net && r->peer_netns_ino)
			json_object_set_new(net, "peer_netns_ino",
			                    json_integer((json_int_t)r->peer_netns_ino));
		if (!net) {
			json_decref(cg);
			json_decref(extra);
			return NULL;
		}
	}
	if (!cg) {
		json_decref(net);
		json_decref(extra);
		return NULL;
	}
	j = json_pack("{s:s, s:i, s:s, s:i, s:I, s:s, s:i, s:o}", "backend", backend, "version",
	              SBX_SAVED_VERSION, "id", r->id, "pid", r->pid, "start_time",
	              (json_int_t)r->start_time, "state_dir", r->state_dir, "cgroup_version",
	              r->cg_version, "cgroups", cg);
	if (j && extra && json_object_update(j, extra) < 0) {
		json_decref(j);
		j = NULL;
	}
	json_decref(extra);
	if (j && net)
		json_object_set_new(j, "net", net);
	else
		json_decref(net);
	return j;
}

json_t *
sbx_saved_to_json(const struct sbx_saved *sv)
{
	json_t *extra = json_pack("{s:s}", "agent_socket", sv->sock);

	if (extra && sv->idmap &&
	    json_object_set_new(extra, "idmap",
	                        json_pack("{s:I, s:I}", "first", (json_int_t)sv->idmap, "size",
	                                  (json_int_t)SBX_IDMAP_SIZE)) < 0) {
		json_decref(extra);
		return NULL;
	}
	return extra ? sbx_rec_to_json(&sv->r, "ns", extra) : NULL;
}

/* Is p an absolute path with no "." or ".." part, under cap bytes, whose
 * last component is id? */
static bool
path_ends_in(const char *p, const char *id, size_t cap)
{
	size_t n, il = strlen(id);

	if (!p || p[0] != '/' || (n = strlen(p)) >= cap || n <= il + 1)
		return false;
	for (const char *c = p; *c; c++)
		if (c[0] == '/' && c[1] == '.' &&
		    (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0))))
			return false;
	return p[n - il - 1] == '/' && strcmp(p + n - il, id) == 0;
}

static const char *
str_of(const json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

int
sbx_rec_parse(const json_t *j, const char *backend, const char *what, size_t state_dir_cap,
              const char *why_cap, struct sbx_rec *out, char *err, size_t errsz)
{
	const json_t *v, *cg, *net;
	const char *s;
	json_int_t n;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j))
		return sbx_fail(err, errsz, -EINVAL, "%s: not a JSON object", what);
	if (!(s = str_of(j, "backend")) || strcmp(s, backend) != 0)
		return sbx_fail(err, errsz, -EINVAL, "%s: \"backend\" is not \"%s\"", what,
		                backend);
	v = json_object_get(j, "version");
	if (!json_is_integer(v) || json_integer_value(v) != SBX_SAVED_VERSION)
		return sbx_fail(err, errsz, -EINVAL, "%s: \"version\" is not %d", what,
		                SBX_SAVED_VERSION);
	if (!(s = str_of(j, "id")) || !sbx_id_ok(s))
		return sbx_fail(err, errsz, -EINVAL, "%s: \"id\" is not a sandbox id", what);
	snprintf(out->id, sizeof(out->id), "%s", s);
	v = json_object_get(j, "pid");
	/* 1 is the host's init, never a sandbox; 4194304 is PID_MAX_LIMIT */
	if (!json_is_integer(v) || (n = json_integer_value(v)) < 2 || n > 4194304)
		return sbx_fail(err, errsz, -EINVAL, "%s %s: \"pid\" out of range", what, out->id);
	out->pid = (int)n;
	v = json_object_get(j, "start_time");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "%s %s: \"start_time\" must be an integer >= 0", what, out->id);
	out->start_time = (unsigned long long)json_integer_value(v);
	s = str_of(j, "state_dir");
	if (!path_ends_in(s, out->id,
	                  state_dir_cap < sizeof(out->state_dir) ? state_dir_cap
	                                                         : sizeof(out->state_dir)))
		return sbx_fail(err, errsz, -EINVAL,
		                "%s %s: \"state_dir\" must be an absolute path ending in the id%s",
		                what, out->id, why_cap);
	snprintf(out->state_dir, sizeof(out->state_dir), "%s", s);
	v = json_object_get(j, "cgroup_version");
	if (!json_is_integer(v) || (json_integer_value(v) != 1 && json_integer_value(v) != 2))
		return sbx_fail(err, errsz, -EINVAL, "%s %s: \"cgroup_version\" is not 1 or 2",
		                what, out->id);
	out->cg_version = (int)json_integer_value(v);
	cg = json_object_get(j, "cgroups");
	if (!json_is_array(cg) || json_array_size(cg) == 0 || json_array_size(cg) > SBX_CG__N ||
	    (out->cg_version == 2 && json_array_size(cg) != 1))
		return sbx_fail(err, errsz, -EINVAL,
		                "%s %s: \"cgroups\" must list 1 to %d directories "
		                "(1 on cgroup v2)",
		                what, out->id, SBX_CG__N);
	json_array_foreach(cg, i, v)
	{
		s = json_string_value(v);
		if (!path_ends_in(s, out->id, sizeof(out->cg[0])))
			return sbx_fail(err, errsz, -EINVAL,
			                "%s %s: cgroup %zu must be an absolute path ending in "
			                "the id",
			                what, out->id, i);
		for (size_t k = 0; k < i; k++)
			if (strcmp(out->cg[k], s) == 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "%s %s: cgroup %zu is listed twice", what, out->id,
				                i);
		snprintf(out->cg[i], sizeof(out->cg[i]), "%s", s);
	}
	out->ncg = json_array_size(cg);
	net = json_object_get(j, "net");
	if (net && !json_is_null(net)) {
		if (!json_is_object(net))
			return sbx_fail(err, errsz, -EINVAL, "%s %s: \"net\" is not an object",
			                what, out->id);
		s = str_of(net, "peer_ifname");
		if (!s || !sbx_ifname_ok(s))
			return sbx_fail(err, errsz, -EINVAL,
			                "%s %s: net: \"peer_ifname\" is not an interface name",
			                what, out->id);
		snprintf(out->peer_ifname, sizeof(out->peer_ifname), "%s", s);
		v = json_object_get(net, "peer_ifindex");
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0x7fffffff)
			return sbx_fail(err, errsz, -EINVAL,
			                "%s %s: net: \"peer_ifindex\" out of range", what, out->id);
		out->peer_ifindex = (int)json_integer_value(v);
		v = json_object_get(net, "peer_netns");
		if (v) {
			s = json_string_value(v);
			if (!s || !s[0] || strlen(s) > SBX_NETNS_NAME_MAX || strchr(s, '/') ||
			    strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "%s %s: net: \"peer_netns\" is not a namespace "
				                "name",
				                what, out->id);
			snprintf(out->peer_netns, sizeof(out->peer_netns), "%s", s);
		}
		v = json_object_get(net, "peer_netns_ino");
		if (v) {
			if (!json_is_integer(v) || json_integer_value(v) < 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "%s %s: net: \"peer_netns_ino\" out of range", what,
				                out->id);
			out->peer_netns_ino = (unsigned long long)json_integer_value(v);
		}
	}
	return 0;
}

int
sbx_saved_parse(const json_t *j, struct sbx_saved *out, char *err, size_t errsz)
{
	char probe[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const json_t *v;
	const char *s;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = sbx_rec_parse(j, "ns", "saved sandbox", sizeof(out->r.state_dir), "", &out->r,
	                        err, errsz)) < 0)
		return rc;
	s = str_of(j, "agent_socket");
	if (!s || !sbx_guest_path_ok(s) || strcmp(s, "/") == 0 ||
	    snprintf(probe, sizeof(probe), "/proc/%d/root%s", out->r.pid, s) >= (int)sizeof(probe))
		return sbx_fail(err, errsz, -EINVAL,
		                "saved sandbox %s: \"agent_socket\" must be an absolute guest "
		                "path short enough for a unix socket address",
		                out->r.id);
	snprintf(out->sock, sizeof(out->sock), "%s", s);
	/* Absent: a sandbox started before user namespaces (its guest runs
	 * as the host's root); it is adopted as it is. */
	v = json_object_get(j, "idmap");
	if (v) {
		const json_t *f = json_object_get(v, "first"), *z = json_object_get(v, "size");
		if (!json_is_object(v) || !json_is_integer(f) || json_integer_value(f) < 0 ||
		    json_integer_value(f) > 0xffffffffll ||
		    !sbx_idmap_first_ok((uint32_t)json_integer_value(f)) || !json_is_integer(z) ||
		    json_integer_value(z) != SBX_IDMAP_SIZE)
			return sbx_fail(
			    err, errsz, -EINVAL,
			    "saved sandbox %s: \"idmap\" must be {\"first\": a multiple "
			    "of 65536 above 0, \"size\": 65536}",
			    out->r.id);
		out->idmap = (uint32_t)json_integer_value(f);
	}
	return 0;
}

/* sandbox.c: the backend registry, spec validation, logging. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rtnl.h"
#include "sandbox-int.h"
#include "sandbox.h"

struct sbx_settings sbx_g;

static const struct sbx_backend ns_backend = {.ops = &sbx_ns_ops};
static const struct sbx_backend vm_backend = {.ops = &sbx_vm_ops};

void *
sbx_calloc(size_t n, size_t sz)
{
	return calloc(n, sz);
}

char *
sbx_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void
sbx_log(enum sbx_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!sbx_g.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sbx_g.log(sbx_g.log_arg, level, line);
}

int
sbx_fail(char *err, size_t errsz, int e, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return e;
}

int
sbx_pathf(char *out, size_t outsz, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, outsz, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

static int
copy_opt(char *dst, size_t dsz, const char *src, const char *dflt, const char *what, char *err,
         size_t errsz)
{
	const char *v = src ? src : dflt;

	if (snprintf(dst, dsz, "%s", v) >= (int)dsz)
		return sbx_fail(err, errsz, -ENAMETOOLONG, "sandbox: %s is too long", what);
	return 0;
}

int
sbx_init(const struct sbx_init_opts *o, char *err, size_t errsz)
{
	static const struct sbx_init_opts none;
	int rc;

	if (!o)
		o = &none;
	memset(&sbx_g, 0, sizeof(sbx_g));
	sbx_g.log = o->log;
	sbx_g.log_arg = o->log_arg;
	if ((rc = copy_opt(sbx_g.state_dir, sizeof(sbx_g.state_dir), o->state_dir,
	                   "/run/sluice/sandboxes", "state_dir", err, errsz)) ||
	    (rc = copy_opt(sbx_g.cache_dir, sizeof(sbx_g.cache_dir), o->cache_dir,
	                   "/var/lib/sluice/templates", "cache_dir", err, errsz)) ||
	    (rc = copy_opt(sbx_g.agent_path, sizeof(sbx_g.agent_path), o->agent_path, "",
	                   "agent_path", err, errsz)) ||
	    (rc = copy_opt(sbx_g.cgroup_parent, sizeof(sbx_g.cgroup_parent), o->cgroup_parent, "",
	                   "cgroup_parent", err, errsz)) ||
	    (rc = copy_opt(sbx_g.idmap_dir, sizeof(sbx_g.idmap_dir), o->idmap_dir, SBX_IDMAP_DIR,
	                   "idmap_dir", err, errsz)))
		return rc;
	sbx_g.idmap_base = o->idmap_base ? o->idmap_base : SBX_IDMAP_BASE;
	sbx_g.idmap_ranges = o->idmap_ranges ? o->idmap_ranges : SBX_IDMAP_RANGES;
	if (sbx_g.idmap_dir[0] != '/')
		return sbx_fail(err, errsz, -EINVAL, "sandbox: idmap_dir must be an absolute path");
	return sbx_idmap_check(sbx_g.idmap_base, sbx_g.idmap_ranges, err, errsz);
}

void
sbx_fini(void)
{
	memset(&sbx_g, 0, sizeof(sbx_g));
}

const struct sbx_backend *
sbx_backend_get(const char *name)
{
	if (name && strcmp(name, "ns") == 0)
		return &ns_backend;
	/* vm only where it can run: QEMU and the guest images are there */
	if (name && strcmp(name, "vm") == 0 && sbx_vm_available())
		return &vm_backend;
	return NULL;
}

const struct sbx_backend_ops *
sbx_backend_ops(const struct sbx_backend *b)
{
	return b ? b->ops : NULL;
}

void
sbx_caps(const struct sbx_backend *b, struct sbx_caps *out)
{
	memset(out, 0, sizeof(*out));
	b->ops->caps(b, out);
}

int
sbx_template_ensure(const struct sbx_backend *b, const struct sbx_template_req *req,
                    struct sbx_template **out, char *err, size_t errsz)
{
	*out = NULL;
	if (!req)
		return sbx_fail(err, errsz, -EINVAL, "template: no request");
	return b->ops->template_ensure(b, req, out, err, errsz);
}

void
sbx_template_free(const struct sbx_backend *b, struct sbx_template *t)
{
	if (t)
		b->ops->template_free(t);
}

bool
sbx_id_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return n > 0 && n <= SBX_ID_MAX;
}

bool
sbx_guest_path_ok(const char *p)
{
	const char *c;

	if (!p || p[0] != '/' || strlen(p) >= 512)
		return false;
	/* No "." or ".." components: a guest path never climbs. */
	for (c = p; *c; c++) {
		if (c[0] == '/' && c[1] == '.' &&
		    (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0))))
			return false;
	}
	return true;
}

static bool
hostname_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return h[0] != '-' && h[0] != '.';
}

bool
sbx_ifname_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SBX_IFNAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

int
sbx_spec_validate(const struct sbx_spec *s, char *err, size_t errsz)
{
	unsigned char a[16];
	unsigned pfx;

	if (!s)
		return sbx_fail(err, errsz, -EINVAL, "spec: missing");
	if (!s->id || !sbx_id_ok(s->id))
		return sbx_fail(err, errsz, -EINVAL, "spec: id must be 1-%d of [A-Za-z0-9_-]",
		                SBX_ID_MAX);
	if (s->hostname && !hostname_ok(s->hostname))
		return sbx_fail(err, errsz, -EINVAL,
		                "spec: hostname \"%s\" is not a host name (1-63 "
		                "letters, digits, '-' and '.')",
		                s->hostname);
	if (s->limits.memory_mb && s->limits.memory_mb < 4)
		return sbx_fail(err, errsz, -EINVAL,
		                "spec: memory_mb %u is below the 4 MiB minimum",
		                s->limits.memory_mb);
	if (s->limits.memory_mb > 1024u * 1024)
		return sbx_fail(err, errsz, -EINVAL, "spec: memory_mb %u is over 1 TiB",
		                s->limits.memory_mb);
	if (s->limits.cpus_milli && s->limits.cpus_milli < 10)
		return sbx_fail(err, errsz, -EINVAL, "spec: cpus below 0.01 (cpus_milli %u)",
		                s->limits.cpus_milli);
	if (s->limits.cpus_milli > 1024u * 1000)
		return sbx_fail(err, errsz, -EINVAL, "spec: cpus over 1024 (cpus_milli %u)",
		                s->limits.cpus_milli);
	if (s->limits.pids && s->limits.pids < 2)
		return sbx_fail(err, errsz, -EINVAL,
		                "spec: pids must be at least 2 (the agent and "
		                "one command)");
	if (s->nmounts && !s->mounts)
		return sbx_fail(err, errsz, -EINVAL, "spec: mounts missing");
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct sbx_mount *m = &s->mounts[i];
		if (!m->source || m->source[0] != '/' || strlen(m->source) >= PATH_MAX)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: mount %zu: source must be an "
			                "absolute host path",
			                i);
		if (!sbx_guest_path_ok(m->target) || strcmp(m->target, "/") == 0)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: mount %zu: target must be an "
			                "absolute guest path other than / with "
			                "no . or .. parts",
			                i);
	}
	if (s->nenv && !s->env)
		return sbx_fail(err, errsz, -EINVAL, "spec: env missing");
	for (size_t i = 0; i < s->nenv; i++) {
		const char *e = s->env[i], *eq = e ? strchr(e, '=') : NULL;
		if (!eq || eq == e)
			return sbx_fail(err, errsz, -EINVAL, "spec: env %zu is not NAME=value", i);
	}
	if (s->cwd && !sbx_guest_path_ok(s->cwd))
		return sbx_fail(err, errsz, -EINVAL,
		                "spec: cwd must be an absolute guest path with "
		                "no . or .. parts");
	if (s->nfiles && !s->files)
		return sbx_fail(err, errsz, -EINVAL, "spec: files missing");
	for (size_t i = 0; i < s->nfiles; i++) {
		const struct sbx_file *f = &s->files[i];
		if (!sbx_guest_path_ok(f->path) || strcmp(f->path, "/") == 0)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: file %zu: path must be an absolute "
			                "guest path with no . or .. parts",
			                i);
		if (f->len && !f->data)
			return sbx_fail(err, errsz, -EINVAL, "spec: file %zu: no data", i);
		if (f->mode & ~07777u)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: file %zu: mode %o is not permission "
			                "bits",
			                i, f->mode);
	}
	if (s->ca_pem) {
		size_t n = strlen(s->ca_pem);
		if (n == 0 || n > SBX_CA_MAX ||
		    strncmp(s->ca_pem, "-----BEGIN CERTIFICATE-----", 27) != 0)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: ca_pem must be 1-%u bytes of PEM "
			                "certificates",
			                SBX_CA_MAX);
		/* the guest gets certificates; a key never leaves */
		if (strstr(s->ca_pem, "PRIVATE KEY"))
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: ca_pem holds a private key; give the "
			                "certificate only");
	}
	switch (s->net.kind) {
	case SBX_NET_NONE:
		break;
	case SBX_NET_LINK:
		if (s->net.peer_netns_fd < 0 &&
		    (!s->net.peer_netns || !s->net.peer_netns[0] ||
		     strchr(s->net.peer_netns, '/') || strcmp(s->net.peer_netns, "..") == 0 ||
		     strcmp(s->net.peer_netns, ".") == 0))
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: net: name the peer's network "
			                "namespace (an fd or a name from ip netns)");
		if (!s->net.peer_ifname || !sbx_ifname_ok(s->net.peer_ifname))
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: net: peer_ifname must be 1-%d "
			                "bytes with no '/', ':' or spaces",
			                SBX_IFNAME_MAX);
		if (s->net.address && fw_rtnl_parse_cidr(s->net.address, a, &pfx) < 0)
			return sbx_fail(err, errsz, -EINVAL,
			                "spec: net: address \"%s\" is not "
			                "ADDRESS/PREFIX",
			                s->net.address);
		if (s->net.gateway) {
			char tmp[80];
			if (!s->net.address)
				return sbx_fail(err, errsz, -EINVAL,
				                "spec: net: a gateway needs an "
				                "address");
			snprintf(tmp, sizeof(tmp), "%s/0", s->net.gateway);
			if (strlen(s->net.gateway) > 64 || fw_rtnl_parse_cidr(tmp, a, &pfx) < 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "spec: net: gateway \"%s\" is not "
				                "an address",
				                s->net.gateway);
		}
		if (s->net.peer_address) {
			char tmp[80];
			if (!s->net.address)
				return sbx_fail(err, errsz, -EINVAL,
				                "spec: net: a peer address needs an "
				                "address");
			snprintf(tmp, sizeof(tmp), "%s/0", s->net.peer_address);
			if (strlen(s->net.peer_address) > 64 || fw_rtnl_parse_cidr(tmp, a, &pfx) < 0)
				return sbx_fail(err, errsz, -EINVAL,
				                "spec: net: peer address \"%s\" is "
				                "not an address",
				                s->net.peer_address);
		}
		if (s->net.mtu && (s->net.mtu < 576 || s->net.mtu > 65535))
			return sbx_fail(err, errsz, -EINVAL, "spec: net: mtu %u outside 576-65535",
			                s->net.mtu);
		break;
	default:
		return sbx_fail(err, errsz, -EINVAL, "spec: net: unknown kind %d",
		                (int)s->net.kind);
	}
	return 0;
}

int
sbx_start(const struct sbx_backend *b, const struct sbx_template *t, const struct sbx_spec *spec,
          struct sbx **out, char *err, size_t errsz)
{
	int rc;

	*out = NULL;
	if (!t)
		return sbx_fail(err, errsz, -EINVAL, "start: no template");
	if ((rc = sbx_spec_validate(spec, err, errsz)) < 0)
		return rc;
	/* A backend without a stronger runtime may not pretend to one. */
	if (spec->isolation != SBX_ISOLATION_STANDARD) {
		struct sbx_caps c;

		sbx_caps(b, &c);
		if (!c.isolation_enhanced)
			return sbx_fail(err, errsz, -ENOTSUP,
					"start: backend %s has no enhanced isolation (an rpc "
					"supervisor's)", b->ops->name);
	}
	rc = b->ops->start(t, spec, out, err, errsz);
	if (rc == 0)
		((struct sbx_head *)(void *)*out)->backend = b;
	return rc;
}

int
sbx_agent_fd(const struct sbx *s)
{
	const struct sbx_head *h = (const void *)s;

	return h->backend->ops->agent_fd(s);
}

int
sbx_stop(struct sbx *s, uint32_t grace_ms, char *err, size_t errsz)
{
	struct sbx_head *h = (void *)s;

	return h->backend->ops->stop(s, grace_ms, err, errsz);
}

void
sbx_free(struct sbx *s)
{
	struct sbx_head *h = (void *)s;

	if (s)
		h->backend->ops->free(s);
}

const char *
sbx_id(const struct sbx *s)
{
	return ((const struct sbx_head *)(const void *)s)->id;
}

/* ---- durability ---------------------------------------------------------- */

static int
saved_check(const struct sbx_backend *b, const json_t *saved, char *err, size_t errsz)
{
	const char *name = json_string_value(json_object_get(saved, "backend"));

	if (!json_is_object(saved))
		return sbx_fail(err, errsz, -EINVAL, "adopt: the saved sandbox is not an object");
	if (!name || strcmp(name, b->ops->name) != 0)
		return sbx_fail(err, errsz, -EINVAL,
		                "adopt: the saved sandbox is for backend \"%s\", not \"%s\"",
		                name ? name : "(none)", b->ops->name);
	return 0;
}

json_t *
sbx_save(const struct sbx *s)
{
	const struct sbx_head *h = (const void *)s;

	return s && h->backend->ops->save ? h->backend->ops->save(s) : NULL;
}

int
sbx_adopt(const struct sbx_backend *b, const json_t *saved, struct sbx **out, char *err,
          size_t errsz)
{
	int rc;

	*out = NULL;
	if (!b || !b->ops->adopt)
		return sbx_fail(err, errsz, -ENOTSUP, "adopt: this backend cannot adopt");
	if ((rc = saved_check(b, saved, err, errsz)) < 0)
		return rc;
	rc = b->ops->adopt(b, saved, out, err, errsz);
	if (rc == 0)
		((struct sbx_head *)(void *)*out)->backend = b;
	return rc;
}

int
sbx_forget(const struct sbx_backend *b, const json_t *saved, char *err, size_t errsz)
{
	int rc;

	if (!b || !b->ops->forget)
		return sbx_fail(err, errsz, -ENOTSUP, "forget: this backend cannot forget");
	if ((rc = saved_check(b, saved, err, errsz)) < 0)
		return rc;
	return b->ops->forget(b, saved, err, errsz);
}

int
sbx_sweep(const struct sbx_backend *b, const char *const *keep, size_t nkeep, char *err,
          size_t errsz)
{
	if (!b || !b->ops->sweep)
		return sbx_fail(err, errsz, -ENOTSUP, "sweep: this backend cannot sweep");
	if (nkeep && !keep)
		return sbx_fail(err, errsz, -EINVAL, "sweep: keep missing");
	return b->ops->sweep(b, keep, nkeep, err, errsz);
}

void
sbx_release(struct sbx *s)
{
	struct sbx_head *h = (void *)s;

	if (s)
		h->backend->ops->release(s);
}

int
sbx_park(struct sbx *s, char *err, size_t errsz)
{
	struct sbx_head *h = (void *)s;

	if (!s || !h->backend->ops->park)
		return sbx_fail(err, errsz, -ENOTSUP, "park: this backend cannot park");
	return h->backend->ops->park(s, err, errsz);
}

int
sbx_unpark(struct sbx *s, char *err, size_t errsz)
{
	struct sbx_head *h = (void *)s;

	if (!s || !h->backend->ops->unpark)
		return sbx_fail(err, errsz, -ENOTSUP, "unpark: this backend cannot park");
	return h->backend->ops->unpark(s, err, errsz);
}

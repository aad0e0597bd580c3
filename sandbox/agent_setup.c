/* agent_setup.c: what a host says to a fresh sandbox's agent, shared by
 * the backends whose agent is reached over a stream (`vm`, `rpc`): hello,
 * then "configure" (env, cwd, sluice's CA; for a VM also the time,
 * entropy, hostname and the link's address) and spec.files
 * written through the agent (parents made). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "sandbox-int.h"

/* Hello on a connection made from a dup of fd. */
int
sbx_agent_hello_fd(int fd, int timeout_ms, char *err, size_t errsz)
{
	struct sbx_agent_conn *c;
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3), rc;

	if (d < 0)
		return sbx_fail(err, errsz, -errno, "dup: %s", strerror(errno));
	if (!(c = sbx_agent_conn_new(d)))
		return sbx_fail(err, errsz, -ENOMEM, "out of memory");
	rc = sbx_agent_hello_sync(c, timeout_ms, NULL, err, errsz);
	sbx_agent_conn_free(c);
	return rc;
}

/* configure + files, on a dup of the agent stream. */
int
sbx_agent_setup(int agent_fd, const struct sbx_spec *spec, bool own_kernel, int timeout_ms, char *err,
                size_t errsz)
{
	char host[SBX_ID_MAX + 16];
	struct sbx_agent_conn *c;
	json_t *req, *env, *net = NULL;
	int d, rc = 0;

	/* a VM: the time and fresh entropy, as after every unpark (a
	 * container has the host's clock and pool: setting them is refused,
	 * clock_settime EPERM); then what makes this clone itself */
	if (own_kernel) {
		if ((rc = sbx_agent_req_refresh(&req, err, errsz)) < 0)
			return rc;
	} else if (!(req = sbx_agent_req_configure())) {
		return sbx_fail(err, errsz, -ENOMEM, "out of memory");
	}
	env = json_object();
	for (size_t i = 0; env && i < spec->nenv; i++) {
		const char *eq = strchr(spec->env[i], '=');
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(eq - spec->env[i]), spec->env[i]);
		json_object_set_new(env, name, json_string(eq + 1));
	}
	if (own_kernel && spec->net.kind == SBX_NET_LINK && spec->net.address) {
		net = json_pack("{s:s}", "address", spec->net.address);
		if (net && spec->net.gateway)
			json_object_set_new(net, "gateway", json_string(spec->net.gateway));
		if (net && spec->net.mtu)
			json_object_set_new(net, "mtu", json_integer(spec->net.mtu));
	}
	/* An id may hold '_', which a host name may not. */
	snprintf(host, sizeof(host), "%s", spec->hostname ? spec->hostname : spec->id);
	for (char *h = host; *h; h++)
		if (*h == '_')
			*h = '-';
	/* every set runs (each takes its value, also when it fails) */
	rc = own_kernel ? json_object_set_new(req, "hostname", json_string(host)) : 0;
	rc |= json_object_set_new(req, "env", env);
	rc |= json_object_set_new(req, "cwd", json_string(spec->cwd ? spec->cwd : "/"));
	if (net)
		rc |= json_object_set_new(req, "net", net);
	if (rc) {
		json_decref(req);
		return sbx_fail(err, errsz, -ENOMEM, "out of memory");
	}
	/* sluice's CA: the agent installs it in the guest's overlay */
	if (spec->ca_pem && (rc = sbx_agent_req_add_ca(req, spec->ca_pem, err, errsz)) < 0) {
		json_decref(req);
		return rc;
	}
	d = fcntl(agent_fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0 || !(c = sbx_agent_conn_new(d))) {
		json_decref(req);
		return sbx_fail(err, errsz, -ENOMEM, "agent connection: out of memory");
	}
	rc = sbx_agent_op_sync(c, req, timeout_ms, NULL, err, errsz);
	json_decref(req);
	if (rc < 0) {
		char e2[256];
		snprintf(e2, sizeof(e2), "%s", err ? err : "");
		sbx_fail(err, errsz, rc, "agent configure: %s", e2);
		goto out;
	}
	for (size_t i = 0; i < spec->nfiles; i++) {
		const struct sbx_file *f = &spec->files[i];
		char parent[512];
		int mfd;
		snprintf(parent, sizeof(parent), "%s", f->path);
		*strrchr(parent, '/') = 0;
		if (parent[0]) {
			json_t *mk = sbx_agent_req_mkdir(parent, true);
			rc = sbx_agent_op_sync(c, mk, timeout_ms, NULL, err, errsz);
			json_decref(mk);
			if (rc < 0 && rc != -EEXIST)
				goto fileerr;
		}
		if ((mfd = memfd_create("sbx-file", MFD_CLOEXEC)) < 0) {
			rc = sbx_fail(err, errsz, -errno, "memfd: %s", strerror(errno));
			goto fileerr;
		}
		for (size_t off = 0; off < f->len;) {
			ssize_t w = write(mfd, (const char *)f->data + off, f->len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = sbx_fail(err, errsz, w < 0 ? -errno : -EIO, "memfd write: %s",
				              w < 0 ? strerror(errno) : "short write");
				close(mfd);
				goto fileerr;
			}
			off += (size_t)w;
		}
		lseek(mfd, 0, SEEK_SET);
		rc = sbx_agent_write_sync(c, f->path, f->mode ? f->mode : 0644, mfd, timeout_ms,
		                          NULL, err, errsz);
		close(mfd);
		if (rc < 0)
			goto fileerr;
		continue;
	fileerr : {
		char e2[256];
		snprintf(e2, sizeof(e2), "%s", err ? err : "");
		sbx_fail(err, errsz, rc, "write %s: %s", f->path, e2);
		goto out;
	}
	}
	rc = 0;
out:
	sbx_agent_conn_free(c);
	return rc;
}

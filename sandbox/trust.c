/* trust.c: handing sluice's CA to a sandbox's agent (sbx_spec.ca_pem).
 * The vm backend adds it to the "configure" that makes a clone unique;
 * the ns backend, which configures nothing else, sends it alone here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "sandbox-int.h"

int
sbx_agent_trust_sync(int agent_fd, const char *pem, int timeout_ms, char *err, size_t errsz)
{
	struct sbx_agent_conn *c;
	char e2[256] = "";
	json_t *req;
	int d, rc;

	if (!(req = sbx_agent_req_ca(pem, e2, sizeof(e2))))
		return sbx_fail(err, errsz, -EINVAL, "agent ca: %s", e2);
	/* a dup: the caller's stream stays as it was for whoever says
	 * hello next (the agent serves both in turn) */
	d = fcntl(agent_fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0 || !(c = sbx_agent_conn_new(d))) {
		if (d >= 0)
			close(d);
		json_decref(req);
		return sbx_fail(err, errsz, -ENOMEM, "agent ca: out of memory");
	}
	rc = sbx_agent_op_sync(c, req, timeout_ms, NULL, e2, sizeof(e2));
	json_decref(req);
	sbx_agent_conn_free(c);
	if (rc < 0)
		return sbx_fail(err, errsz, rc, "agent configure ca: %s", e2);
	return 0;
}

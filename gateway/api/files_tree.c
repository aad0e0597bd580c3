/* files_tree.c: files as trees and single stats on GET/PUT
 * /v1/sandboxes/{id}/files (docs/api.md "Files"):
 *  - GET with Accept: application/x-tar: the directory's tree as a tar
 *    stream (the agent's tar_read);
 *  - GET with stat=1: the entry itself, {path, type, size, mode, mtime,
 *    target} (a link is not followed);
 *  - PUT with Content-Type: application/x-tar: the body extracted below
 *    the directory (the agent's tar_write, strict: agent/tar.h), made
 *    with its parents when missing.
 * The path was checked by apiv1.c (absolute, < 4096 bytes). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent_client.h"
#include "agent_requests.h"
#include "apiv1-int.h"
#include "apiv1.h"
#include "manager.h"

#define TREE_BUF (64u << 10)

struct tree_state {
	struct gw_api_req *r;
	struct sbx_agent_call *call;
	bool done, failed, client_gone, begun, too_large;
	int err;
	char code[32];          /* the agent's error code */
	char msg[512];
	json_t *result;         /* RESULT, or the ERROR object (counts) */
	uint64_t bytes;
	struct gw_upload up;    /* uploads */
};

static void
tree_error(struct tree_state *s, const struct sbx_agent_event *ev)
{
	s->failed = true;
	s->err = ev->err;
	snprintf(s->code, sizeof(s->code), "%s", ev->code ? ev->code : "");
	snprintf(s->msg, sizeof(s->msg), "%s", ev->message ? ev->message : "error");
	json_decref(s->result);
	s->result = ev->json ? json_deep_copy(ev->json) : NULL;
	s->done = true;
	s->call = NULL;
}

/* ---- GET: the tree --------------------------------------------------- */

static void
tread_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct tree_state *s = arg;

	if (ev->kind == SBX_AGENT_EV_STDOUT) {
		if (!s->begun) {
			s->begun = true;
			if (gw_api_stream_begin(s->r, 200, GW_TAR_TYPE) < 0)
				s->client_gone = true;
		}
		if (!s->client_gone && gw_api_stream_write(s->r, ev->data, ev->len) < 0)
			s->client_gone = true;
		s->bytes += ev->len;
		if (s->bytes > GW_TREE_MAX && !s->client_gone)
			s->too_large = s->failed = true;
		if (s->client_gone || s->failed) {
			sbx_agent_call_cancel(k);
			s->call = NULL;
			s->done = true;
		}
	} else if (ev->kind == SBX_AGENT_EV_RESULT) {
		s->done = true;
		s->call = NULL;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		tree_error(s, ev);
	}
}

static void
tree_get(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
	 const char *path)
{
	struct tree_state s = { .r = r };
	struct sbx_agent_call_opts o = { 0 };
	struct pool_use u;
	json_t *req;
	int rc;

	if (gw_apiv1_use(v, r, i, &u) < 0)
		return;
	req = sbx_agent_req_tar_read(path);
	s.call = req ? sbx_agent_call_start(u.agent, req, &o, tread_cb, &s, &rc) : NULL;
	json_decref(req);
	if (!s.call) {
		gw_apiv1_put(v, &u);
		if (!req)
			gw_api_reply_error(r, 400, "bad-request", "path: not UTF-8");
		else
			gw_api_reply_error(r, 502, "agent-error", "cannot read %s: %s", path,
					   strerror(-rc));
		return;
	}
	rc = gw_apiv1_drive(u.agent, gw_api_req_fd(r), &s.done, NULL, NULL);
	if (rc < 0 && !s.done && s.call)
		sbx_agent_call_cancel(s.call);
	gw_apiv1_put(v, &u);
	json_decref(s.result);
	if (rc == -ECONNRESET)
		return;
	if (rc < 0 && !s.done) {
		s.failed = true;
		s.err = -rc;
		snprintf(s.msg, sizeof(s.msg), "the sandbox's agent: %s", strerror(-rc));
	}
	if (s.begun) {
		/* A failure after the first byte can only cut the stream
		 * short: the missing last chunk (and the archive's missing
		 * end blocks) tell the client. */
		if (!s.failed && !s.client_gone)
			gw_api_stream_end(r);
		return;
	}
	if (s.failed && s.err == ENOTDIR)
		gw_api_reply_error(r, 400, "not-a-directory", "%s is not a directory (GET it "
				   "without Accept: application/x-tar for a file)", path);
	else if (s.failed)
		gw_apiv1_reply_agent_error(r, s.err, s.msg);
	else
		gw_api_reply_error(r, 502, "agent-error", "the agent sent no archive for %s", path);
}

/* ---- GET: stat -------------------------------------------------------- */

static void
stat_get(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
	 const char *path)
{
	struct pool_use u;
	json_t *req, *st = NULL, *out;
	char err[256];
	int rc;

	if (gw_apiv1_use(v, r, i, &u) < 0)
		return;
	req = sbx_agent_req_stat(path);
	rc = req ? sbx_agent_op_sync(u.agent, req, 30000, &st, err, sizeof(err)) : -EINVAL;
	json_decref(req);
	gw_apiv1_put(v, &u);
	if (rc < 0) {
		gw_apiv1_reply_agent_error(r, -rc, !req ? "path is not UTF-8" : err);
		return;
	}
	out = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?}", "path", path, "type",
			json_object_get(st, "type"), "size", json_object_get(st, "size"), "mode",
			json_object_get(st, "mode"), "mtime", json_object_get(st, "mtime"));
	if (out && json_object_get(st, "target"))
		json_object_set(out, "target", json_object_get(st, "target"));
	json_decref(st);
	gw_api_reply_json(r, 200, out);
}

bool
gw_apiv1_files_get_alt(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i)
{
	const char *path = gw_api_query(r, "path"), *stat = gw_api_query(r, "stat");

	if (stat) {
		if (strcmp(stat, "1") != 0) {
			gw_api_reply_error(r, 400, "bad-request", "stat: 1 or absent");
			return true;
		}
		stat_get(v, r, i, path);
		return true;
	}
	if (!gw_api_accepts(r, GW_TAR_TYPE))
		return false;
	tree_get(v, r, i, path);
	return true;
}

/* ---- PUT: extract a tree ---------------------------------------------- */

static void
twrite_cb(struct sbx_agent_call *k, const struct sbx_agent_event *ev, void *arg)
{
	struct tree_state *s = arg;

	(void)k;
	if (ev->kind == SBX_AGENT_EV_RESULT) {
		json_decref(s->result);
		s->result = ev->json ? json_deep_copy(ev->json) : NULL;
		s->done = true;
		s->call = NULL;
	} else if (ev->kind == SBX_AGENT_EV_ERROR) {
		tree_error(s, ev);
	}
}

static void
twrite_pump(void *arg)
{
	struct tree_state *s = arg;
	int rc;

	if (!s->call || s->done)
		return;
	rc = gw_apiv1_upload_pump(s->r, s->call, &s->up, s->msg, sizeof(s->msg));
	if (rc < 0) {
		s->failed = true;
		s->too_large = rc == -EFBIG;
		s->err = -rc;
		sbx_agent_call_cancel(s->call);
		s->call = NULL;
		s->done = true;
	}
}

/* The counts of what was extracted, from a RESULT or an ERROR. */
static json_t *
counts(const json_t *j)
{
	static const char *const keys[] = { "entries", "files", "dirs", "links", "bytes" };
	json_t *o = json_object();

	for (size_t k = 0; o && k < sizeof(keys) / sizeof(keys[0]); k++) {
		json_t *n = json_object_get(j, keys[k]);

		json_object_set_new(o, keys[k], json_integer(json_is_integer(n)
							     ? json_integer_value(n) : 0));
	}
	return o;
}

static void
tree_put(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i,
	 const char *path)
{
	struct tree_state s = { .r = r };
	struct sbx_agent_call_opts o = { 0 };
	int64_t declared = gw_api_body_length(r);
	const char *entry = "";
	struct pool_use u;
	json_t *req;
	int rc;

	if (declared > (int64_t)GW_TREE_MAX) {
		gw_api_reply_error(r, 413, "too-large", "the archive is larger than %llu bytes",
				   (unsigned long long)GW_TREE_MAX);
		return;
	}
	if (gw_apiv1_use(v, r, i, &u) < 0)
		return;
	s.up = (struct gw_upload){ .buf = malloc(TREE_BUF), .bufsz = TREE_BUF, .max = GW_TREE_MAX,
				   .what = "archive" };
	req = sbx_agent_req_tar_write(path, true);
	s.call = s.up.buf && req ? sbx_agent_call_start(u.agent, req, &o, twrite_cb, &s, &rc) : NULL;
	json_decref(req);
	if (!s.call) {
		gw_apiv1_put(v, &u);
		free(s.up.buf);
		if (!req)
			gw_api_reply_error(r, 400, "bad-request", "path: not UTF-8");
		else
			gw_api_reply_error(r, 502, "agent-error", "cannot extract into %s", path);
		return;
	}
	/* The client is the body's reader here: its end shows there. */
	rc = gw_apiv1_drive(u.agent, -1, &s.done, twrite_pump, &s);
	if (rc < 0 && !s.done && s.call)
		sbx_agent_call_cancel(s.call);
	gw_apiv1_put(v, &u);
	free(s.up.buf);
	if (rc < 0 && !s.done) {
		s.failed = true;
		s.err = -rc;
		snprintf(s.msg, sizeof(s.msg), "the sandbox's agent: %s", strerror(-rc));
	}
	if (s.failed && sbx_agent_err_bad_tar(s.code, s.result, &entry)) {
		json_t *e = json_pack("{s:s, s:s, s:s, s:o}", "code", "bad-tar", "message", s.msg,
				      "entry", entry, "extracted", counts(s.result));

		gw_api_reply_error_json(r, 400, e);
	} else if (s.too_large) {
		gw_api_reply_error(r, 413, "too-large", "%s", s.msg);
	} else if (s.failed && s.err == ENOTDIR) {
		gw_api_reply_error(r, 400, "not-a-directory", "%s", s.msg);
	} else if (s.failed && s.err == EISDIR) {
		gw_api_reply_error(r, 409, "exists", "%s", s.msg);
	} else if (s.failed) {
		gw_apiv1_reply_agent_error(r, s.err, s.msg);
	} else {
		json_t *res = counts(s.result);

		json_object_set_new(res, "path", json_string(path));
		json_object_set_new(res, "archive_bytes", json_integer((json_int_t)s.up.bytes));
		gw_api_reply_json(r, 201, res);
	}
	json_decref(s.result);
}

bool
gw_apiv1_files_put_alt(struct gw_apiv1 *v, struct gw_api_req *r, const struct gw_api_req_info *i)
{
	size_t len;
	const char *ct = gw_api_header(r, "Content-Type", &len);

	if (!ct || len < strlen(GW_TAR_TYPE) || strncasecmp(ct, GW_TAR_TYPE, strlen(GW_TAR_TYPE)) ||
	    (len > strlen(GW_TAR_TYPE) && ct[strlen(GW_TAR_TYPE)] != ';' &&
	     ct[strlen(GW_TAR_TYPE)] != ' '))
		return false;
	if (gw_api_query(r, "mode")) {
		gw_api_reply_error(r, 400, "bad-request",
				   "mode: not with an archive (its entries carry their modes)");
		return true;
	}
	tree_put(v, r, i, gw_api_query(r, "path"));
	return true;
}

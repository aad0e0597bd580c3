/* fstree.c: the tar_read and tar_write ops (agent/proto.h): a directory
 * tree as a tar stream, both ways, over tarfs.c. See agent.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent.h"
#include "tarfs.h"

static json_t *
stats_json(const struct agent_tarfs_stats *st, bool walk, uint64_t size)
{
	json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I}", AGENT_F_ENTRIES,
			      (json_int_t)st->entries, "files", (json_int_t)st->files, "dirs",
			      (json_int_t)st->dirs, "links", (json_int_t)st->links, "bytes",
			      (json_int_t)st->bytes);

	if (j && walk) {
		json_object_set_new(j, AGENT_F_SIZE, json_integer((json_int_t)size));
		json_object_set_new(j, "skipped", json_integer((json_int_t)st->skipped));
		json_object_set_new(j, "changed", json_integer((json_int_t)st->changed));
	}
	return j;
}

static void
send_result(struct agent *a, uint32_t id, json_t *j)
{
	if (j == NULL)
		j = json_object();
	agent_send_json(a, AGENT_FT_RESULT, id, j);
	json_decref(j);
}

static const char *
req_path(struct agent *a, uint32_t id, const json_t *req, const char *op)
{
	const char *p = json_string_value(json_object_get(req, AGENT_F_PATH));

	if (p == NULL || p[0] != '/') {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "%s: \"path\" must be an absolute path", op);
		return NULL;
	}
	return p;
}

/* ---- tar_read ----------------------------------------------------------- */

void
agent_op_tar_read(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "tar_read");
	json_t *jwin = json_object_get(req, AGENT_F_WINDOW);
	struct agent_tarfs_walk *w;
	struct agent_stream *s;
	char err[512];
	int rc;

	if (path == NULL)
		return;
	if (jwin && (!json_is_integer(jwin) || json_integer_value(jwin) < 1 ||
		     json_integer_value(jwin) > AGENT_WINDOW_MAX)) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "tar_read: \"window\" must be 1..%u", AGENT_WINDOW_MAX);
		return;
	}
	rc = agent_tarfs_walk_open(&w, path, err, sizeof(err));
	if (rc < 0) {
		agent_send_error(a, id, agent_err_code(-rc), -rc, "tar_read %s", err);
		return;
	}
	s = agent_stream_new(a, id, AGENT_SK_READ);
	if (s == NULL) {
		agent_tarfs_walk_free(w);
		agent_send_error(a, id, AGENT_E_TOO_MANY, 0, "more than %d open streams",
				 AGENT_MAX_STREAMS);
		return;
	}
	s->tarw = w;
	s->window = jwin ? (uint64_t)json_integer_value(jwin) : AGENT_WINDOW_DEFAULT;
}

bool
agent_tar_read_pump(struct agent *a, struct agent_stream *s)
{
	size_t want = s->window < AGENT_DATA_MAX ? (size_t)s->window : AGENT_DATA_MAX;
	uint8_t *buf = malloc(want);
	struct agent_tarfs_stats st;
	char err[512];
	long n;

	if (buf == NULL)
		return false;
	n = agent_tarfs_walk_read(s->tarw, buf, want, err, sizeof(err));
	if (n > 0) {
		agent_send(a, AGENT_FT_OUT, s->id, buf, (size_t)n);
		s->window -= (uint64_t)n;
		s->total += (uint64_t)n;
		free(buf);
		return false;
	}
	free(buf);
	if (n < 0) {
		agent_send_error(a, s->id, agent_err_code((int)-n), (int)-n, "tar_read: %s", err);
	} else {
		agent_tarfs_walk_stats(s->tarw, &st);
		send_result(a, s->id, stats_json(&st, true, s->total));
	}
	agent_stream_free(a, s);
	return true;
}

/* ---- tar_write ---------------------------------------------------------- */

void
agent_op_tar_write(struct agent *a, uint32_t id, const json_t *req)
{
	const char *path = req_path(a, id, req, "tar_write");
	json_t *jc = json_object_get(req, AGENT_F_CREATE);
	struct agent_tarfs_x *x;
	struct agent_stream *s;
	char err[512];
	uint8_t p[4];
	int rc;

	if (path == NULL)
		return;
	if (jc && !json_is_boolean(jc)) {
		agent_send_error(a, id, AGENT_E_BAD_REQUEST, 0,
				 "tar_write: \"create\" must be true or false");
		return;
	}
	rc = agent_tarfs_x_open(&x, path, json_is_true(jc), err, sizeof(err));
	if (rc < 0) {
		agent_send_error(a, id, agent_err_code(-rc), -rc, "tar_write %s", err);
		return;
	}
	s = agent_stream_new(a, id, AGENT_SK_WRITE);
	if (s == NULL) {
		agent_tarfs_x_free(x);
		agent_send_error(a, id, AGENT_E_TOO_MANY, 0, "more than %d open streams",
				 AGENT_MAX_STREAMS);
		return;
	}
	s->tarx = x;
	s->in_credit = AGENT_WINDOW_DEFAULT;
	agent_put_u32(p, AGENT_WINDOW_DEFAULT);
	agent_send(a, AGENT_FT_WINDOW, id, p, 4);
}

/* The error of a failed extraction: the code, the entry, the counts. */
static void
tar_write_fail(struct agent *a, struct agent_stream *s, int rc, const char *err)
{
	struct agent_tarfs_stats st;
	json_t *j;

	agent_tarfs_x_stats(s->tarx, &st);
	j = stats_json(&st, false, 0);
	if (j == NULL)
		j = json_object();
	json_object_set_new(j, AGENT_F_CODE,
			    json_string(rc == -EBADMSG ? AGENT_E_BAD_TAR : agent_err_code(-rc)));
	json_object_set_new(j, AGENT_F_MESSAGE, json_string(err));
	if (rc != -EBADMSG)
		json_object_set_new(j, AGENT_F_ERRNO, json_integer(-rc));
	json_object_set_new(j, AGENT_F_ENTRY, json_string(agent_tarfs_x_entry(s->tarx)));
	agent_send_json(a, AGENT_FT_ERROR, s->id, j);
	json_decref(j);
	agent_stream_free(a, s);
}

void
agent_tar_write_in(struct agent *a, struct agent_stream *s, const uint8_t *p, size_t len)
{
	struct agent_tarfs_stats st;
	char err[512];
	int rc;

	if (len > s->in_credit) {
		agent_send_error(a, s->id, AGENT_E_FLOW, 0, "tar_write: data beyond the window");
		agent_stream_free(a, s);
		return;
	}
	if (len > 0) {
		rc = agent_tarfs_x_feed(s->tarx, p, len, err, sizeof(err));
		if (rc < 0) {
			char scratch[64];

			/* the directories made so far get their modes */
			agent_tarfs_x_finish(s->tarx, scratch, sizeof(scratch));
			tar_write_fail(a, s, rc, err);
			return;
		}
		s->total += len;
		{
			uint8_t w[4];

			agent_put_u32(w, (uint32_t)len);
			agent_send(a, AGENT_FT_WINDOW, s->id, w, 4);
		}
		return;
	}
	rc = agent_tarfs_x_finish(s->tarx, err, sizeof(err));
	if (rc < 0) {
		tar_write_fail(a, s, rc, err);
		return;
	}
	agent_tarfs_x_stats(s->tarx, &st);
	send_result(a, s->id, stats_json(&st, false, 0));
	agent_stream_free(a, s);
}

void
agent_tar_stream_fini(struct agent_stream *s)
{
	agent_tarfs_walk_free(s->tarw);
	agent_tarfs_x_free(s->tarx);
	s->tarw = NULL;
	s->tarx = NULL;
}

/* apiv1-int.h: what the /v1 handlers in files beside apiv1.c share with
 * it (files_tree.c). Not for anything outside gateway/api/. */
#ifndef SLUICE_GW_APIV1_INT_H
#define SLUICE_GW_APIV1_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

struct gw_apiv1;
struct pool_use;
struct sbx_agent_call;
struct sbx_agent_conn;

/* A tree below a directory, as application/x-tar, either way: at most
 * this many bytes of archive (413 too-large beyond). */
#define GW_TREE_MAX (4ull << 30)
#define GW_TAR_TYPE "application/x-tar"

/* ---- apiv1.c ---------------------------------------------------------- */

/* Borrowing the claim's agent: gw_apiv1_use() and gw_apiv1_put() (apiv1.h). */
/* Runs the agent connection until *done (see drive() in apiv1.c). */
int gw_apiv1_drive(struct sbx_agent_conn *c, int client, bool *done, void (*pump)(void *),
		   void *parg);
/* An upload: the request body given to an agent call as its input (a
 * file, an archive), within the call's credit, through buf (bufsz). */
struct gw_upload {
	char *buf;
	size_t bufsz, have, off;
	uint64_t bytes, max;    /* read so far; more than max is refused */
	const char *what;       /* "body", "archive": for the message */
	bool body_end;
};
/* Moves what the call takes now: 0 (waits for credit or the client's
 * bytes; at the body's end the input is ended), or -EFBIG (past max) or
 * the body's read error, with msg set: the caller ends the call. */
int gw_apiv1_upload_pump(struct gw_api_req *r, struct sbx_agent_call *call, struct gw_upload *u,
			 char *msg, size_t msgsz);
/* Answers an agent's errno and message: 404, 400, 504 or 502. */
void gw_apiv1_reply_agent_error(struct gw_api_req *r, int err, const char *msg);

/* ---- files_tree.c ----------------------------------------------------- */

/* GET .../files: the answer when the client asked for a tree (Accept:
 * application/x-tar) or a stat (stat=1). True when it answered. */
bool gw_apiv1_files_get_alt(struct gw_apiv1 *v, struct gw_api_req *r,
			    const struct gw_api_req_info *i);
/* PUT .../files: the answer when the body is a tree (Content-Type:
 * application/x-tar). True when it answered. */
bool gw_apiv1_files_put_alt(struct gw_apiv1 *v, struct gw_api_req *r,
			    const struct gw_api_req_info *i);

#endif

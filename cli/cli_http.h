/* cli_http.h: the sluice client's HTTP/1.1 connection: one request per
 * connection over a blocking TCP or unix socket, the response head parsed
 * strictly (cli_head_parse()) and the body read through its framing
 * (Content-Length, chunked or until close). Single-threaded.
 */
#ifndef SLUICE_CLI_HTTP_H
#define SLUICE_CLI_HTTP_H

#include <sys/types.h>

#include "cli_util-t.h"

#define CLI_CONN_BUF (CLI_MAX_HEAD + 16384)

struct cli_conn {
	int fd;                         /* -1 when closed */
	char *buf;                      /* received bytes [off, len) not yet used */
	size_t len;
	size_t off;
	struct cli_resp resp;           /* valid after cli_conn_read_head() */
	struct cli_chunked ch;
	uint64_t left;                  /* CLI_BODY_LENGTH: bytes still to come */
	bool body_done;
};

/* Connects to u. Returns 0, or a negative errno with err set to
 * "cannot connect to NAME: reason" (NAME is how the user wrote the
 * address). The caller closes c with cli_conn_close() either way. */
int cli_conn_open(struct cli_conn *c, const struct cli_url *u, const char *name, char *err,
		  size_t errsz);

void cli_conn_close(struct cli_conn *c);

/* Sends all of p[0..n). Returns 0 or a negative errno (-EPIPE,
 * -ECONNRESET: the server closed, and may have answered already). */
int cli_conn_send(struct cli_conn *c, const void *p, size_t n);

/* Reads and parses the final response head (1xx heads are skipped) into
 * c->resp. Returns 0, or a negative errno with err set. */
int cli_conn_read_head(struct cli_conn *c, char *err, size_t errsz);

/* Reads up to cap payload bytes of the body into out. Returns the count,
 * 0 at the end of the body, or a negative errno with err set. */
ssize_t cli_conn_read_body(struct cli_conn *c, char *out, size_t cap, char *err, size_t errsz);

#endif

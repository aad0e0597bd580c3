/* sluice-int.h: the helpers of sluice.c that files.c uses (sluice.h has
 * the options and requests), and files.c's commands. Not a library
 * interface. */
#ifndef SLUICE_CLI_SLUICE_INT_H
#define SLUICE_CLI_SLUICE_INT_H

#include "sluice.h"

/* ---- sluice.c --------------------------------------------------------- */

/* Connects, sends r and reads the response head into c->resp: 0, or 1
 * (EXIT_API) after printing why. The caller closes c either way. */
int sl_request(const struct sl_opts *o, struct cli_conn *c, const struct sl_req *r);
/* A non-2xx answer: prints "sluice: CODE: message"; returns 1. */
int sl_api_fail(const struct sl_opts *o, struct cli_conn *c);
/* Reads a JSON body: 0 with *out (a new reference), or 1. */
int sl_read_json(const struct sl_opts *o, struct cli_conn *c, struct json_t **out);
void sl_print_json(const struct json_t *j);
/* Prints "sluice: msg" and the usage; returns 2 (EXIT_USAGE). */
int sl_usage_err(const char *msg);

/* ---- files.c ---------------------------------------------------------- */

/* `ls ID:PATH` (argv[0] "ls"): a directory's entries like ls -l, or one
 * entry. Returns the exit code. */
int sl_files_ls(struct sl_opts *o, int argc, char **argv);
/* `cp -r ID:DIR LOCAL`: the tree into LOCAL/basename(DIR) when LOCAL is a
 * directory, else into LOCAL (made). */
int sl_files_cp_down(struct sl_opts *o, const char *id, const char *rpath, const char *local);
/* `cp -r LOCALDIR ID:DIR`: into DIR/basename(LOCALDIR) when DIR is a
 * directory, else into DIR (made, with its parents). */
int sl_files_cp_up(struct sl_opts *o, const char *local, const char *id, const char *rpath);

#endif

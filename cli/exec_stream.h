/* exec_stream.h: `sluice exec -i/-t/--detach ID -- ARGV...` and `sluice
 * shell ID`, over the API's WebSocket exec (ws_client.h): piped stdin
 * streamed unbounded and binary, a terminal in raw mode (restored on
 * every way out) with its size following SIGWINCH, signals the CLI gets
 * sent on to the command, the command's exit status as the CLI's (128+N
 * for signal N, 124 for a timeout, each said on stderr). */
#ifndef SLUICE_CLI_EXEC_STREAM_H
#define SLUICE_CLI_EXEC_STREAM_H

#include <stdbool.h>

#include "cli_util-t.h"

/* What of sluice.c's global options the stream needs. */
struct cli_xs_opts {
	const char *api;                /* as the user wrote it */
	const struct cli_url *url;
	const char *token;              /* NULL: none */
	bool json;
};

/* True when an `exec` command line asks for the stream: -i, -t, -it,
 * --interactive, --tty, --detach before its "--". */
bool cli_xs_wanted(int argc, char **argv);
/* Runs `exec` (with cli_xs_wanted) or `shell` (a login shell with -it);
 * argv[0] is the command's name. Returns the exit status. */
int cli_xs_main(const struct cli_xs_opts *o, const char *cmd, int argc, char **argv);

#endif

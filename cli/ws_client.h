/* ws_client.h: the sluice client's WebSocket connection (RFC 6455, client
 * side): the handshake over cli_conn_open()'s socket (the 101 and its
 * Sec-WebSocket-Accept checked), masked frames with fresh random keys,
 * and the server's frames through the shared receiver (gateway/proto/
 * ws.h, library sl_ws). Blocking connect, then the caller polls fd. */
#ifndef SLUICE_CLI_WS_CLIENT_H
#define SLUICE_CLI_WS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_util-t.h"
#include "ws.h"

#define CLI_WS_MSG_MAX (1u << 20)       /* a server message */
#define CLI_WS_HEAD_MAX 16384           /* the handshake's response head */
#define CLI_WS_ERRBODY_MAX 65536        /* a refusal's JSON body */

struct cli_ws {
	int fd;
	struct ws_rx rx;
	uint8_t *msgbuf;
	uint8_t *rbuf;          /* received, not yet fed: [rpos, rlen) */
	size_t rpos, rlen;
	uint8_t *wq;            /* frames not yet sent: [woff, woff+wlen) */
	size_t woff, wlen, wcap;
};

/* A refusal of the handshake: the HTTP status and the API's error. */
struct cli_ws_refusal {
	int status;
	char code[64];
	char message[512];
};

/* Connects to u (name: how the user wrote it), asks for target with the
 * token (NULL: none), and checks the 101. 0; -EPROTO with *ref filled
 * when the server answered with something else; another negative errno
 * with a line in err. */
int cli_ws_open(struct cli_ws *w, const struct cli_url *u, const char *name, const char *token,
		const char *target, struct cli_ws_refusal *ref, char *err, size_t errsz);
void cli_ws_close(struct cli_ws *w);

/* Queues one masked frame (never fragmented). 0 or -ENOMEM. */
int cli_ws_queue(struct cli_ws *w, uint8_t opcode, const void *p, size_t n);
/* Writes what the socket takes now (non-blocking). 0 or -errno. */
int cli_ws_flush(struct cli_ws *w);
/* Reads what the socket has: > 0, 0 at EOF, -EAGAIN, -errno. */
ssize_t cli_ws_read(struct cli_ws *w);
/* The next message from what was read: WS_RX_MSG, WS_RX_AGAIN (read
 * more), WS_RX_ERROR (w->rx.close_code, w->rx.reason). */
enum ws_rx_result cli_ws_next(struct cli_ws *w, struct ws_msg *m);

/* Pure: checks a 101 response head (text up to the blank line) against
 * the key sent. 0, or -1 with a line in err. */
int cli_ws_check_head(const char *head, size_t len, const char *key, char *err, size_t errsz);

#endif

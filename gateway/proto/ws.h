/* ws.h: WebSocket (RFC 6455) framing, pure: the handshake's key and
 * accept value, a frame header encoder and masking, and a bounded,
 * resumable receiver that checks every rule of the RFC and reassembles
 * fragmented messages. No I/O, no globals; libcrypto for SHA-1 only.
 *
 * Its own library (sl_ws) so that the CLI, which uses nothing else of
 * the gateway, speaks the same codec as the API server.
 */
#ifndef SLUICE_WS_H
#define SLUICE_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xA

#define WS_CTRL_MAX 125         /* a control frame's payload */
#define WS_HDR_MAX 14           /* the longest header: 2 + 8 + 4 */
#define WS_KEY_LEN 24           /* base64 of 16 bytes */
#define WS_ACCEPT_LEN 28        /* base64 of a SHA-1 */

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_BAD_DATA 1007          /* text that is not UTF-8 */
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL 1011

/* True when key is a Sec-WebSocket-Key: 24 characters of base64 that
 * decode to 16 bytes. */
bool ws_key_ok(const char *key, size_t len);
/* The Sec-WebSocket-Accept of key: base64(SHA-1(key GUID)), into out
 * (WS_ACCEPT_LEN + 1 bytes, NUL-terminated). 0, or -1 (bad key, or
 * libcrypto failed). */
int ws_accept(const char *key, size_t len, char out[WS_ACCEPT_LEN + 1]);
/* A fresh key from 16 random bytes (the caller's): base64 into out. */
void ws_key_make(const uint8_t rnd[16], char out[WS_KEY_LEN + 1]);

/* Writes a frame header into out (WS_HDR_MAX bytes): FIN set unless
 * !fin, the opcode, the length, and mask when not NULL (a client's).
 * Returns the header's length. */
size_t ws_hdr_put(uint8_t *out, bool fin, uint8_t opcode, uint64_t len, const uint8_t *mask);
/* XORs p[0..n) with mask, starting at offset `off` of the payload. */
void ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off);

/* True when p[0..n) is well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). */
bool ws_utf8_ok(const uint8_t *p, size_t n);

/* A close frame's payload: 2 bytes of code and a UTF-8 reason of at most
 * 123 bytes. Returns its length; a reason too long is cut (on a
 * character boundary). */
size_t ws_close_payload(uint8_t out[WS_CTRL_MAX], uint16_t code, const char *reason);
/* A code one may send or receive in a close frame. */
bool ws_close_code_ok(unsigned code);

/* ---- the receiver ----------------------------------------------------- */

enum ws_rx_result {
	WS_RX_AGAIN = 0,        /* all input used, no message yet */
	WS_RX_MSG,              /* *out holds a whole message */
	WS_RX_ERROR,            /* a rule was broken: close with rx->close_code */
};

/* A message: text, binary (reassembled), close, ping or pong. The
 * payload is the receiver's buffer (unmasked), valid until the next
 * ws_rx_feed(). For close: code (0 when the payload was empty) and the
 * reason are parsed out. */
struct ws_msg {
	uint8_t opcode;
	const uint8_t *data;
	size_t len;
	unsigned close_code;
};

enum ws_rx_state {
	WS_RS_HDR = 0,
	WS_RS_PAYLOAD,
	WS_RS_ERROR,
};

struct ws_rx {
	bool server;            /* expects masked frames (a server's receiver) */
	size_t max_msg;         /* bound of a data message, all its fragments */
	enum ws_rx_state state;
	uint8_t hdr[WS_HDR_MAX];
	size_t hlen;
	/* the frame being read */
	bool fin;
	uint8_t opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t flen, fgot;
	/* the data message being assembled */
	uint8_t msg_op;         /* 0: none in progress */
	uint8_t *buf;           /* the caller's, max_msg bytes */
	size_t len;
	uint8_t ctrl[WS_CTRL_MAX];
	bool deliver_reset;     /* the last MSG was data: empty buf first */
	unsigned close_code;    /* with WS_RX_ERROR */
	const char *reason;     /* static, with WS_RX_ERROR */
};

/* server: frames must be masked (true) or must not be (false, a client).
 * buf/max: the caller's buffer, the bound of one data message. */
void ws_rx_init(struct ws_rx *rx, bool server, uint8_t *buf, size_t max);
/* Feeds in[0..len): *used gets the bytes taken. Returns at most one
 * message per call (call again with the rest). Input may be split at any
 * byte. A control frame may arrive between the fragments of a data
 * message. After WS_RX_ERROR every call returns it again. */
enum ws_rx_result ws_rx_feed(struct ws_rx *rx, const uint8_t *in, size_t len, size_t *used,
			     struct ws_msg *out);

#endif

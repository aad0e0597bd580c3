/* ws.c: WebSocket framing (RFC 6455), pure. See ws.h. */
#include <string.h>

#include <openssl/evp.h>

#include "ws.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static int
b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool
ws_key_ok(const char *key, size_t len)
{
	/* 16 bytes: 21 characters, the 22nd carrying 2 bits (its low 4
	 * zero), then "==" */
	if (key == NULL || len != WS_KEY_LEN || key[22] != '=' || key[23] != '=')
		return false;
	for (size_t i = 0; i < 22; i++)
		if (b64_val(key[i]) < 0)
			return false;
	return (b64_val(key[21]) & 0x0f) == 0;
}

int
ws_accept(const char *key, size_t len, char out[WS_ACCEPT_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx;
	int ok;

	if (!ws_key_ok(key, len))
		return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL)
		return -1;
	ok = EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, key, len) == 1 &&
	     EVP_DigestUpdate(ctx, ws_guid, sizeof(ws_guid) - 1) == 1 &&
	     EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 20;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, md, 20);
	out[WS_ACCEPT_LEN] = '\0';
	return 0;
}

void
ws_key_make(const uint8_t rnd[16], char out[WS_KEY_LEN + 1])
{
	EVP_EncodeBlock((unsigned char *)out, rnd, 16);
	out[WS_KEY_LEN] = '\0';
}

size_t
ws_hdr_put(uint8_t *out, bool fin, uint8_t opcode, uint64_t len, const uint8_t *mask)
{
	size_t n = 2;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	out[1] = mask ? 0x80 : 0;
	if (len < 126) {
		out[1] |= (uint8_t)len;
	} else if (len <= 0xffff) {
		out[1] |= 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		n = 4;
	} else {
		out[1] |= 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		n = 10;
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

void
ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[(off + i) & 3];
}

bool
ws_utf8_ok(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		uint32_t cp;
		size_t need;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i - 1 < need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

bool
ws_close_code_ok(unsigned code)
{
	if (code >= 3000 && code <= 4999)
		return true;
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011);
}

size_t
ws_close_payload(uint8_t out[WS_CTRL_MAX], uint16_t code, const char *reason)
{
	size_t n = reason ? strlen(reason) : 0;

	if (n > WS_CTRL_MAX - 2) {
		n = WS_CTRL_MAX - 2;
		/* back off to a character boundary */
		while (n > 0 && ((uint8_t)reason[n] & 0xc0) == 0x80)
			n--;
	}
	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	if (n)
		memcpy(out + 2, reason, n);
	return n + 2;
}

/* ---- the receiver ------------------------------------------------------ */

void
ws_rx_init(struct ws_rx *rx, bool server, uint8_t *buf, size_t max)
{
	memset(rx, 0, sizeof(*rx));
	rx->server = server;
	rx->buf = buf;
	rx->max_msg = max;
}

static enum ws_rx_result
fail(struct ws_rx *rx, unsigned code, const char *why)
{
	rx->state = WS_RS_ERROR;
	rx->close_code = code;
	rx->reason = why;
	return WS_RX_ERROR;
}

/* The header's length once hlen bytes are in: 0 while unknown. */
static size_t
hdr_need(const struct ws_rx *rx)
{
	size_t n = 2;

	if (rx->hlen < 2)
		return 0;
	if ((rx->hdr[1] & 0x7f) == 126)
		n += 2;
	else if ((rx->hdr[1] & 0x7f) == 127)
		n += 8;
	if (rx->hdr[1] & 0x80)
		n += 4;
	return n;
}

/* Checks a whole header; sets up the frame. */
static enum ws_rx_result
hdr_done(struct ws_rx *rx)
{
	uint8_t b0 = rx->hdr[0], b1 = rx->hdr[1], op = b0 & 0x0f;
	uint64_t len = b1 & 0x7f;
	size_t p = 2;
	bool ctrl = op >= 0x8;

	if (b0 & 0x70)
		return fail(rx, WS_CLOSE_PROTOCOL, "reserved bits set (no extension was agreed)");
	if (op != WS_OP_CONT && op != WS_OP_TEXT && op != WS_OP_BINARY && op != WS_OP_CLOSE &&
	    op != WS_OP_PING && op != WS_OP_PONG)
		return fail(rx, WS_CLOSE_PROTOCOL, "unknown opcode");
	rx->masked = (b1 & 0x80) != 0;
	if (rx->server && !rx->masked)
		return fail(rx, WS_CLOSE_PROTOCOL, "a client's frame must be masked");
	if (!rx->server && rx->masked)
		return fail(rx, WS_CLOSE_PROTOCOL, "a server's frame must not be masked");
	if (len == 126) {
		len = (uint64_t)rx->hdr[2] << 8 | rx->hdr[3];
		p = 4;
		if (len < 126)
			return fail(rx, WS_CLOSE_PROTOCOL, "length not in its shortest form");
	} else if (len == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | rx->hdr[2 + i];
		p = 10;
		if (len >> 63)
			return fail(rx, WS_CLOSE_PROTOCOL, "length with its top bit set");
		if (len <= 0xffff)
			return fail(rx, WS_CLOSE_PROTOCOL, "length not in its shortest form");
	}
	if (rx->masked)
		memcpy(rx->mask, rx->hdr + p, 4);
	rx->fin = (b0 & 0x80) != 0;
	if (ctrl) {
		if (!rx->fin)
			return fail(rx, WS_CLOSE_PROTOCOL, "a control frame may not be fragmented");
		if (len > WS_CTRL_MAX)
			return fail(rx, WS_CLOSE_PROTOCOL, "a control frame over 125 bytes");
	} else if (op == WS_OP_CONT) {
		if (rx->msg_op == 0)
			return fail(rx, WS_CLOSE_PROTOCOL, "a continuation with no message begun");
	} else if (rx->msg_op != 0) {
		return fail(rx, WS_CLOSE_PROTOCOL, "a new message before the last one ended");
	}
	if (!ctrl) {
		if (len > rx->max_msg - rx->len)
			return fail(rx, WS_CLOSE_TOO_BIG, "message too big");
		if (op != WS_OP_CONT)
			rx->msg_op = op;
	}
	rx->opcode = op;
	rx->flen = len;
	rx->fgot = 0;
	rx->state = WS_RS_PAYLOAD;
	return WS_RX_AGAIN;
}

/* A whole frame is in: a message when it ends one. */
static enum ws_rx_result
frame_done(struct ws_rx *rx, struct ws_msg *out)
{
	rx->state = WS_RS_HDR;
	rx->hlen = 0;
	if (rx->opcode >= 0x8) {
		memset(out, 0, sizeof(*out));
		out->opcode = rx->opcode;
		out->data = rx->ctrl;
		out->len = (size_t)rx->flen;
		if (rx->opcode == WS_OP_CLOSE && out->len > 0) {
			if (out->len < 2)
				return fail(rx, WS_CLOSE_PROTOCOL, "a close payload of one byte");
			out->close_code = (unsigned)rx->ctrl[0] << 8 | rx->ctrl[1];
			if (!ws_close_code_ok(out->close_code))
				return fail(rx, WS_CLOSE_PROTOCOL, "a close code one may not send");
			if (!ws_utf8_ok(rx->ctrl + 2, out->len - 2))
				return fail(rx, WS_CLOSE_BAD_DATA, "a close reason that is not UTF-8");
		}
		return WS_RX_MSG;
	}
	if (!rx->fin)
		return WS_RX_AGAIN;
	if (rx->msg_op == WS_OP_TEXT && !ws_utf8_ok(rx->buf, rx->len))
		return fail(rx, WS_CLOSE_BAD_DATA, "a text message that is not UTF-8");
	memset(out, 0, sizeof(*out));
	out->opcode = rx->msg_op;
	out->data = rx->buf;
	out->len = rx->len;
	rx->msg_op = 0;
	rx->deliver_reset = true;
	return WS_RX_MSG;
}

enum ws_rx_result
ws_rx_feed(struct ws_rx *rx, const uint8_t *in, size_t len, size_t *used, struct ws_msg *out)
{
	size_t pos = 0;

	*used = 0;
	if (rx->state == WS_RS_ERROR)
		return WS_RX_ERROR;
	if (rx->deliver_reset) {
		/* the data message handed out last time is done with */
		rx->len = 0;
		rx->deliver_reset = false;
	}
	for (;;) {
		if (rx->state == WS_RS_HDR) {
			size_t need;

			while (pos < len && ((need = hdr_need(rx)) == 0 || rx->hlen < need))
				rx->hdr[rx->hlen++] = in[pos++];
			need = hdr_need(rx);
			if (need == 0 || rx->hlen < need) {
				*used = pos;
				return WS_RX_AGAIN;
			}
			if (hdr_done(rx) == WS_RX_ERROR) {
				*used = pos;
				return WS_RX_ERROR;
			}
		}
		if (rx->state == WS_RS_PAYLOAD) {
			uint64_t left = rx->flen - rx->fgot;
			size_t n = len - pos < left ? len - pos : (size_t)left;
			uint8_t *dst = rx->opcode >= 0x8 ? rx->ctrl + rx->fgot : rx->buf + rx->len;

			if (n) {
				memcpy(dst, in + pos, n);
				if (rx->masked)
					ws_mask(dst, n, rx->mask, rx->fgot);
				pos += n;
				rx->fgot += n;
				if (rx->opcode < 0x8)
					rx->len += n;
			}
			if (rx->fgot < rx->flen) {
				*used = pos;
				return WS_RX_AGAIN;
			}
			{
				enum ws_rx_result r = frame_done(rx, out);

				if (r != WS_RX_AGAIN) {
					*used = pos;
					return r;
				}
			}
		}
	}
}

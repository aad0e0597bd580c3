/* http1_body.c: the streamed HTTP/1.1 body decoder (RFC 9112 6, 7): a
 * length, chunked framing with extensions and trailers, or until close.
 * See http1.h. The framing machine steps one byte at a time so input may
 * be split anywhere; payload runs are handed out in place.
 */
#include "http1-int.h"

/* ---- body ----------------------------------------------------------- */

static const char *const body_state_names[] = {
#define GW_H1_BODY_STATE_NAME(id, name) [GW_H1_BS_##id] = name,
	GW_H1_BODY_STATES(GW_H1_BODY_STATE_NAME)
#undef GW_H1_BODY_STATE_NAME
};

const char *gw_h1_body_state_name(enum gw_h1_body_state s)
{
	if ((unsigned)s >= GW_H1_BS__COUNT)
		return "?";
	return body_state_names[s];
}

/* The one place the decoder changes state; a leaf does not log, so a
 * trace hook would go here. */
static void body_set_state(struct gw_h1_body *b, enum gw_h1_body_state s)
{
	b->state = s;
}

static enum gw_h1_body_state body_after_size(const struct gw_h1_body *b)
{
	return b->chunk_size == 0 ? GW_H1_BS_TRAILER : GW_H1_BS_DATA;
}

void gw_h1_body_init(struct gw_h1_body *b, enum gw_h1_body_kind kind,
		     uint64_t content_length, enum gw_h1_body_mode mode)
{
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->mode = mode;
	switch (kind) {
	case GW_H1_BODY_LENGTH:
		b->remaining = content_length;
		body_set_state(b, content_length ? GW_H1_BS_DATA
						 : GW_H1_BS_DONE);
		break;
	case GW_H1_BODY_CHUNKED:
		body_set_state(b, GW_H1_BS_SIZE);
		break;
	case GW_H1_BODY_UNTIL_CLOSE:
		body_set_state(b, GW_H1_BS_UNTIL_CLOSE);
		break;
	default:
		body_set_state(b, GW_H1_BS_DONE);
		break;
	}
}

static const char *body_fail(struct gw_h1_body *b, const char *msg)
{
	b->err.reason = GW_R_BAD_REQUEST;
	b->err.msg = msg;
	body_set_state(b, GW_H1_BS_ERROR);
	return msg;
}

/* RFC 9110 6.5.1: a field that frames, routes or authenticates a message,
 * or says what its content is, cannot come after the content. A trailer
 * names one only to be merged into the head by some recipient (and
 * ignored by others): refused rather than relayed. */
static const struct h1_name_rule trailer_rules[] = {
	/* framing and content */
	H1_EXACT("content-length"), H1_EXACT("transfer-encoding"), H1_EXACT("trailer"),
	H1_EXACT("content-encoding"), H1_EXACT("content-type"), H1_EXACT("content-range"),
	/* routing and connection */
	H1_EXACT("host"), H1_EXACT("connection"), H1_EXACT("keep-alive"),
	H1_EXACT("proxy-connection"), H1_EXACT("te"), H1_EXACT("upgrade"), H1_EXACT("via"),
	H1_EXACT("max-forwards"), H1_EXACT("expect"),
	/* authentication */
	H1_EXACT("authorization"), H1_EXACT("proxy-authorization"),
	H1_EXACT("www-authenticate"), H1_EXACT("proxy-authenticate"),
	H1_EXACT("authentication-info"), H1_EXACT("proxy-authentication-info"),
	H1_EXACT("cookie"), H1_EXACT("set-cookie"),
};

/* The trailer name just read (its first bytes in tname) is one of those,
 * or one a sender could forge (gw_h1_spoofable()). */
static bool trailer_forbidden(const struct gw_h1_body *b)
{
	bool cut = b->tname_len > sizeof(b->tname);
	size_t len = cut ? sizeof(b->tname) : b->tname_len;

	return h1_name_in(trailer_rules, sizeof(trailer_rules) / sizeof(trailer_rules[0]),
			  b->tname, len, cut) ||
	       h1_name_in(h1_spoof_rules, h1_nspoof_rules, b->tname, len, cut);
}

/* Steps the chunked framing machine over one byte that is not payload.
 * Returns NULL, or the error message (state already ERROR). */
static const char *chunk_byte(struct gw_h1_body *b, unsigned char c)
{
	int h;

	switch (b->state) {
	case GW_H1_BS_SIZE:
		h = h1_hex_value(c);
		if (h < 0)
			return body_fail(b, c == '\r' || c == '\n' || c == ';'
						    ? "empty chunk size"
						    : "bad chunk size");
		b->chunk_size = (uint64_t)h;
		b->hex_digits = 1;
		b->line_len = 1;
		body_set_state(b, GW_H1_BS_SIZE_DIGITS);
		return NULL;
	case GW_H1_BS_SIZE_DIGITS:
	case GW_H1_BS_SIZE_WS:
	case GW_H1_BS_EXT:
		if (++b->line_len > GW_H1_MAX_CHUNK_LINE)
			return body_fail(b, "chunk line too long");
		if (c == '\n')
			return body_fail(b, "bare LF in chunk line");
		if (b->state == GW_H1_BS_SIZE_WS && c != ';' && !h1_is(&gw_h1_ows, c))
			return body_fail(b, "whitespace after chunk size");
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_SIZE_LF);
			return NULL;
		}
		if (b->state == GW_H1_BS_EXT) {
			if (!h1_is(&gw_h1_field, c))
				return body_fail(
					b, "control byte in chunk extension");
			return NULL;
		}
		if (c == ';') {
			body_set_state(b, GW_H1_BS_EXT);
			return NULL;
		}
		if (h1_is(&gw_h1_ows, c)) {
			body_set_state(b, GW_H1_BS_SIZE_WS);
			return NULL;
		}
		h = h1_hex_value(c);
		if (h < 0)
			return body_fail(b, "bad chunk size");
		if (++b->hex_digits > 16)
			return body_fail(b, "chunk size has too many digits");
		if (b->chunk_size > ((uint64_t)INT64_MAX - (uint64_t)h) >> 4)
			return body_fail(b, "chunk size too large");
		b->chunk_size = b->chunk_size << 4 | (uint64_t)h;
		return NULL;
	case GW_H1_BS_SIZE_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in chunk line");
		b->remaining = b->chunk_size;
		body_set_state(b, body_after_size(b));
		return NULL;
	case GW_H1_BS_DATA_CR:
		if (c != '\r')
			return body_fail(b, "missing CRLF after chunk data");
		body_set_state(b, GW_H1_BS_DATA_LF);
		return NULL;
	case GW_H1_BS_DATA_LF:
		if (c != '\n')
			return body_fail(b, "missing CRLF after chunk data");
		body_set_state(b, GW_H1_BS_SIZE);
		return NULL;
	default:
		break;
	}

	/* trailer section: field lines like a head's, then CRLF */
	if (++b->trailer_bytes > GW_H1_MAX_TRAILER_BYTES)
		return body_fail(b, "trailer section too large");
	switch (b->state) {
	case GW_H1_BS_TRAILER:
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_FINAL_LF);
			return NULL;
		}
		if (c == '\n')
			return body_fail(b, "bare LF in trailer");
		if (h1_is(&gw_h1_ows, c))
			return body_fail(b, "obs-fold");
		if (c == ':')
			return body_fail(b, "empty header name");
		if (!h1_is(&gw_h1_tchar, c))
			return body_fail(b, "invalid byte in header name");
		if (++b->ntrailers > GW_H1_MAX_HEADERS)
			return body_fail(b, "too many trailer fields");
		b->tname[0] = (char)c;
		b->tname_len = 1;
		body_set_state(b, GW_H1_BS_TRAILER_NAME);
		return NULL;
	case GW_H1_BS_TRAILER_NAME:
		if (c == ':') {
			if (trailer_forbidden(b))
				return body_fail(b, "forbidden trailer field");
			body_set_state(b, GW_H1_BS_TRAILER_VALUE);
			return NULL;
		}
		if (h1_is(&gw_h1_ows, c))
			return body_fail(
				b, "whitespace between header name and colon");
		if (c == '\r' || c == '\n')
			return body_fail(b, "header line without colon");
		if (!h1_is(&gw_h1_tchar, c))
			return body_fail(b, "invalid byte in header name");
		if (b->tname_len < sizeof(b->tname))
			b->tname[b->tname_len] = (char)c;
		b->tname_len++;
		return NULL;
	case GW_H1_BS_TRAILER_VALUE:
		if (c == '\r') {
			body_set_state(b, GW_H1_BS_TRAILER_LF);
			return NULL;
		}
		if (c == '\n')
			return body_fail(b, "bare LF in trailer");
		if (!h1_is(&gw_h1_field, c))
			return body_fail(b, "control byte in header value");
		return NULL;
	case GW_H1_BS_TRAILER_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in trailer");
		body_set_state(b, GW_H1_BS_TRAILER);
		return NULL;
	case GW_H1_BS_FINAL_LF:
		if (c != '\n')
			return body_fail(b, "bare CR in trailer");
		body_set_state(b, GW_H1_BS_DONE);
		return NULL;
	default:
		return body_fail(b, "body decoder in a bad state");
	}
}

enum gw_h1_result gw_h1_body_feed(struct gw_h1_body *b, const char *in,
				  size_t len, size_t *consumed,
				  struct gw_h1_span *data)
{
	bool raw = b->mode == GW_H1_RAW;
	struct gw_rd r;

	gw_rd_init(&r, in, len);
	data->p = in;
	data->len = 0;
	*consumed = 0;
	if (b->state == GW_H1_BS_ERROR)
		return GW_H1_ERROR;

	while (!gw_rd_empty(&r) && b->state != GW_H1_BS_DONE) {
		if (b->state == GW_H1_BS_UNTIL_CLOSE ||
		    b->state == GW_H1_BS_DATA) {
			size_t n = gw_rd_len(&r);
			struct gw_rd_span run;

			if (b->state == GW_H1_BS_DATA && b->remaining < n)
				n = (size_t)b->remaining;
			run = gw_rd_take(&r, n);
			if (!raw)
				*data = h1_span(run);
			b->payload += n;
			if (b->state == GW_H1_BS_DATA) {
				b->remaining -= n;
				if (b->remaining == 0)
					body_set_state(
						b, b->kind == GW_H1_BODY_LENGTH
							   ? GW_H1_BS_DONE
							   : GW_H1_BS_DATA_CR);
			}
			if (!raw)
				break;  /* one payload run per call */
			continue;
		}
		if (chunk_byte(b, (unsigned char)gw_rd_peek(&r)) != NULL) {
			*consumed = gw_rd_pos(&r);
			data->len = 0;
			return GW_H1_ERROR;
		}
		(void)gw_rd_getc(&r);
	}
	*consumed = gw_rd_pos(&r);
	if (raw)
		data->len = gw_rd_pos(&r);
	return b->state == GW_H1_BS_DONE ? GW_H1_DONE : GW_H1_AGAIN;
}

enum gw_h1_result gw_h1_body_eof(struct gw_h1_body *b)
{
	if (b->state == GW_H1_BS_UNTIL_CLOSE)
		body_set_state(b, GW_H1_BS_DONE);
	if (b->state == GW_H1_BS_DONE)
		return GW_H1_DONE;
	if (b->state != GW_H1_BS_ERROR)
		body_fail(b, "truncated body");
	return GW_H1_ERROR;
}

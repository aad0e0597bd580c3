/* proto.c: the agent protocol's frame codec and JSON helpers. See proto.h.
 * Compiled into sluice-agent and into the host side alike. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto.h"

struct type_info {
	const char *name;
	enum agent_frame_class cls;
	int s0;
};

static const struct type_info types[AGENT_FT__MAX] = {
#define AGENT_FT_INFO(id, num, nm, c, z)                                      \
	[num] = { .name = nm, .cls = AGENT_FC_##c, .s0 = z },
	AGENT_FRAME_TYPES(AGENT_FT_INFO)
#undef AGENT_FT_INFO
};

uint8_t *
agent_outq_room(uint8_t **buf, size_t *off, size_t len, size_t *cap, size_t n)
{
	if (*off > 0 && *off + len + n > *cap) {
		memmove(*buf, *buf + *off, len);
		*off = 0;
	}
	if (*off + len + n > *cap) {
		size_t ncap = *cap ? *cap : 65536;
		uint8_t *p;

		while (ncap < len + n)
			ncap *= 2;
		p = realloc(*buf, ncap);
		if (p == NULL)
			return NULL;
		*buf = p;
		*cap = ncap;
	}
	return *buf + *off + len;
}

const char *
agent_frame_type_name(uint8_t type)
{
	if (type >= AGENT_FT__MAX || types[type].name == NULL)
		return "?";
	return types[type].name;
}

uint32_t
agent_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void
agent_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

const char *
agent_frame_check(uint8_t type, uint32_t stream, uint32_t len)
{
	const struct type_info *t;

	if (type >= AGENT_FT__MAX || types[type].name == NULL)
		return "unknown frame type";
	t = &types[type];
	switch (t->cls) {
	case AGENT_FC_CTRL:
		if (len > AGENT_CTRL_MAX)
			return "control frame too large";
		break;
	case AGENT_FC_DATA:
		if (len > AGENT_DATA_MAX)
			return "data frame too large";
		break;
	case AGENT_FC_WINDOW:
		if (len != 4)
			return "window frame is not 4 bytes";
		break;
	}
	if (t->s0 == 0 && stream == 0)
		return "frame type not allowed on stream 0";
	if (t->s0 == 1 && stream != 0)
		return "frame type allowed on stream 0 only";
	return NULL;
}

void
agent_hdr_put(uint8_t out[AGENT_HDR_LEN], uint8_t type, uint32_t stream,
	      uint32_t len)
{
	agent_put_u32(out, len);
	out[4] = type;
	agent_put_u32(out + 5, stream);
}

long
agent_frame_encode(uint8_t *out, size_t cap, uint8_t type, uint32_t stream,
		   const void *payload, size_t len)
{
	if (len > AGENT_PAYLOAD_MAX ||
	    agent_frame_check(type, stream, (uint32_t)len) != NULL)
		return -EINVAL;
	if (cap < AGENT_HDR_LEN || cap - AGENT_HDR_LEN < len)
		return -EMSGSIZE;
	agent_hdr_put(out, type, stream, (uint32_t)len);
	if (len > 0)
		memcpy(out + AGENT_HDR_LEN, payload, len);
	return (long)(AGENT_HDR_LEN + len);
}

void
agent_dec_init(struct agent_dec *d, uint8_t *buf, size_t cap)
{
	memset(d, 0, sizeof(*d));
	d->state = AGENT_DS_HEADER;
	d->buf = buf;
	d->cap = cap;
}

enum agent_dec_result
agent_dec_feed(struct agent_dec *d, const uint8_t *in, size_t len,
	       size_t *consumed, struct agent_frame *out)
{
	size_t pos = 0;

	*consumed = 0;
	memset(out, 0, sizeof(*out));
	for (;;) {
		switch (d->state) {
		case AGENT_DS_FATAL:
			return AGENT_DEC_FATAL;

		case AGENT_DS_SKIP: {
			size_t n = len - pos < d->skip ? len - pos : d->skip;

			pos += n;
			d->skip -= (uint32_t)n;
			*consumed = pos;
			if (d->skip > 0)
				return AGENT_DEC_AGAIN;
			d->state = AGENT_DS_HEADER;
			break;
		}

		case AGENT_DS_HEADER: {
			size_t n = AGENT_HDR_LEN - d->hlen;
			const char *why;

			if (n > len - pos)
				n = len - pos;
			memcpy(d->hdr + d->hlen, in + pos, n);
			d->hlen += n;
			pos += n;
			*consumed = pos;
			if (d->hlen < AGENT_HDR_LEN)
				return AGENT_DEC_AGAIN;
			d->hlen = 0;
			d->len = agent_get_u32(d->hdr);
			d->type = d->hdr[4];
			d->stream = agent_get_u32(d->hdr + 5);
			d->have = 0;
			out->type = d->type;
			out->stream = d->stream;
			out->len = d->len;
			if (d->len > AGENT_FRAME_HARD_MAX) {
				d->state = AGENT_DS_FATAL;
				d->reason = "frame length out of step";
				return AGENT_DEC_FATAL;
			}
			why = agent_frame_check(d->type, d->stream, d->len);
			if (why == NULL && d->len > d->cap)
				why = "frame larger than the decoder buffer";
			if (why != NULL) {
				d->reason = why;
				d->bad++;
				d->skip = d->len;
				d->state = d->len > 0 ? AGENT_DS_SKIP
						      : AGENT_DS_HEADER;
				return AGENT_DEC_BAD;
			}
			if (d->len == 0 || len - pos >= d->len) {
				/* whole payload at hand: hand it out in place */
				out->payload = d->len ? in + pos : in;
				pos += d->len;
				*consumed = pos;
				d->frames++;
				return AGENT_DEC_FRAME;
			}
			d->state = AGENT_DS_PAYLOAD;
			break;
		}

		case AGENT_DS_PAYLOAD: {
			size_t n = d->len - d->have;

			if (n > len - pos)
				n = len - pos;
			memcpy(d->buf + d->have, in + pos, n);
			d->have += (uint32_t)n;
			pos += n;
			*consumed = pos;
			if (d->have < d->len)
				return AGENT_DEC_AGAIN;
			d->state = AGENT_DS_HEADER;
			out->type = d->type;
			out->stream = d->stream;
			out->len = d->len;
			out->payload = d->buf;
			d->frames++;
			return AGENT_DEC_FRAME;
		}
		}
	}
}

/* ---- JSON ------------------------------------------------------------ */

struct json_t *
agent_json_parse(const uint8_t *p, size_t len, char *err, size_t errsz)
{
	json_error_t jerr;
	json_t *j;

	if (len == 0)
		return json_object();
	if (len > AGENT_CTRL_MAX) {
		snprintf(err, errsz, "control message over %u bytes",
			 AGENT_CTRL_MAX);
		return NULL;
	}
	j = json_loadb((const char *)p, len,
		       JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		snprintf(err, errsz, "bad JSON at byte %d: %s", jerr.position,
			 jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(err, errsz, "control message is not a JSON object");
		return NULL;
	}
	return j;
}

char *
agent_json_dump(const struct json_t *j, size_t *len)
{
	char *s = json_dumps(j, JSON_COMPACT);

	if (s == NULL)
		return NULL;
	*len = strlen(s);
	if (*len > AGENT_CTRL_MAX) {
		free(s);
		return NULL;
	}
	return s;
}

const char *
agent_err_code(int err)
{
	switch (err) {
	case ENOENT:
		return AGENT_E_NOT_FOUND;
	case EEXIST:
		return AGENT_E_EXISTS;
	case EACCES:
	case EPERM:
	case EROFS:
		return AGENT_E_PERMISSION;
	case ENOTDIR:
		return AGENT_E_NOT_DIR;
	case EISDIR:
		return AGENT_E_IS_DIR;
	case ENOTEMPTY:
		return AGENT_E_NOT_EMPTY;
	case ENOSPC:
	case EDQUOT:
		return AGENT_E_NO_SPACE;
	default:
		return AGENT_E_IO;
	}
}

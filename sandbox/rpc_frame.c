/* rpc_frame.c: the supervisor protocol's framing and codec (rpc_frame.h).
 * Pure: no I/O, memory bounded by the reader's max. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rpc_frame.h"

enum { RD_HDR = 0, RD_BODY, RD_DRAIN, RD_BROKEN };

void
sbx_rpc_hdr_put(uint8_t out[SBX_RPC_HDR], uint32_t len, uint32_t id)
{
	out[0] = (uint8_t)(len >> 24);
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
	out[4] = (uint8_t)(id >> 24);
	out[5] = (uint8_t)(id >> 16);
	out[6] = (uint8_t)(id >> 8);
	out[7] = (uint8_t)id;
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int
sbx_rpc_rd_feed(struct sbx_rpc_rd *r, const uint8_t *in, size_t n, size_t *used,
                struct sbx_rpc_ev *ev)
{
	size_t max = r->max ? r->max : SBX_RPC_FRAME_MAX, off = 0;

	memset(ev, 0, sizeof(*ev));
	*used = 0;
	if (r->st == RD_BROKEN) {
		ev->kind = SBX_RPC_EV_BROKEN;
		return 0;
	}
	while (off < n || (r->st == RD_BODY && r->got == r->len) ||
	       (r->st == RD_DRAIN && r->got == r->len)) {
		if (r->st == RD_HDR) {
			size_t take = SBX_RPC_HDR - r->hlen;

			if (take > n - off)
				take = n - off;
			memcpy(r->hdr + r->hlen, in + off, take);
			r->hlen += take;
			off += take;
			if (r->hlen < SBX_RPC_HDR)
				break;
			r->len = be32(r->hdr);
			r->id = be32(r->hdr + 4);
			r->hlen = 0;
			r->got = 0;
			if (r->len == 0 || r->len > SBX_RPC_FRAME_HARD) {
				r->st = RD_BROKEN;
				ev->kind = SBX_RPC_EV_BROKEN;
				ev->id = r->id;
				ev->declared = r->len;
				break;
			}
			if (r->len > max) {
				r->st = RD_DRAIN;
				continue;
			}
			if (r->cap < r->len) {
				char *nb = realloc(r->buf, r->len);

				if (!nb) {
					r->st = RD_BROKEN;
					*used = off;
					return -ENOMEM;
				}
				r->buf = nb;
				r->cap = r->len;
			}
			r->st = RD_BODY;
			continue;
		}
		if (r->st == RD_BODY || r->st == RD_DRAIN) {
			size_t take = r->len - r->got;

			if (take > n - off)
				take = n - off;
			if (r->st == RD_BODY)
				memcpy(r->buf + r->got, in + off, take);
			r->got += take;
			off += take;
			if (r->got < r->len)
				break;
			ev->id = r->id;
			if (r->st == RD_BODY) {
				ev->kind = SBX_RPC_EV_FRAME;
				ev->body = r->buf;
				ev->len = r->len;
			} else {
				ev->kind = SBX_RPC_EV_OVERSIZE;
				ev->declared = r->len;
			}
			r->st = RD_HDR;
			break;
		}
		break;
	}
	*used = off;
	return 0;
}

void
sbx_rpc_rd_free(struct sbx_rpc_rd *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

int
sbx_rpc_req_build(uint32_t id, const char *method, const json_t *params, int64_t deadline_ms,
                  uint8_t **out, size_t *outlen)
{
	json_t *p, *req;
	char *txt;
	size_t len;
	uint8_t *buf;

	*out = NULL;
	*outlen = 0;
	if (id == 0 || !method || (params && !json_is_object(params)))
		return -EINVAL;
	p = params ? json_deep_copy(params) : json_object();
	if (!p || json_object_set_new(p, "deadline_ms", json_integer(deadline_ms)) < 0) {
		json_decref(p);
		return -ENOMEM;
	}
	req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t)id, "method",
	                method, "params", p);
	if (!req)
		return -ENOMEM;
	txt = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!txt)
		return -ENOMEM;
	len = strlen(txt);
	if (len > SBX_RPC_FRAME_MAX) {
		free(txt);
		return -EMSGSIZE;
	}
	buf = malloc(SBX_RPC_HDR + len);
	if (!buf) {
		free(txt);
		return -ENOMEM;
	}
	sbx_rpc_hdr_put(buf, (uint32_t)len, id);
	memcpy(buf + SBX_RPC_HDR, txt, len);
	free(txt);
	*out = buf;
	*outlen = SBX_RPC_HDR + len;
	return 0;
}

static void
copy_line(char *dst, size_t cap, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) ? '?' : src[i];
	if (cap)
		dst[i] = '\0';
}

static int
proto(char *err, size_t errsz, const char *why, uint32_t id)
{
	if (err && errsz)
		snprintf(err, errsz, "supervisor: invalid reply to call %u: %s", id, why);
	return -EPROTO;
}

int
sbx_rpc_reply_parse(const char *body, size_t len, uint32_t hdr_id, struct sbx_rpc_reply *out,
                    char *err, size_t errsz)
{
	json_t *j, *v, *res, *er;
	json_error_t je;

	memset(out, 0, sizeof(*out));
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return proto(err, errsz, "not JSON", hdr_id);
	if (!json_is_object(j)) {
		json_decref(j);
		return proto(err, errsz, "not a JSON object", hdr_id);
	}
	v = json_object_get(j, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
		json_decref(j);
		return proto(err, errsz, "\"jsonrpc\" is not \"2.0\"", hdr_id);
	}
	v = json_object_get(j, "id");
	if (!json_is_integer(v) || json_integer_value(v) != (json_int_t)hdr_id) {
		json_decref(j);
		return proto(err, errsz, "\"id\" differs from the frame's", hdr_id);
	}
	res = json_object_get(j, "result");
	er = json_object_get(j, "error");
	if ((res != NULL) == (er != NULL)) {
		json_decref(j);
		return proto(err, errsz, "want exactly one of \"result\" and \"error\"", hdr_id);
	}
	if (res) {
		if (!json_is_object(res)) {
			json_decref(j);
			return proto(err, errsz, "\"result\" is not an object", hdr_id);
		}
		out->result = json_incref(res);
		json_decref(j);
		return 0;
	}
	v = json_object_get(er, "code");
	if (!json_is_object(er) || !json_is_integer(v) ||
	    !json_is_string(json_object_get(er, "message")) ||
	    json_integer_value(v) < -2147483647 || json_integer_value(v) > 2147483647) {
		json_decref(j);
		return proto(err, errsz, "malformed \"error\"", hdr_id);
	}
	out->code = (int)json_integer_value(v);
	copy_line(out->message, sizeof(out->message),
	          json_string_value(json_object_get(er, "message")));
	v = json_object_get(json_object_get(er, "data"), "reason");
	if (json_is_string(v))
		copy_line(out->reason, sizeof(out->reason), json_string_value(v));
	json_decref(j);
	return 1;
}

int
sbx_rpc_code_errno(int code)
{
	switch (code) {
	case SBX_RPC_E_PARSE:
	case SBX_RPC_E_INVALID:
		return EPROTO;
	case SBX_RPC_E_METHOD:
		return ENOSYS;
	case SBX_RPC_E_PARAMS:
		return EINVAL;
	case SBX_RPC_E_UNAVAILABLE:
		return ENOTSUP;
	case SBX_RPC_E_NOTFOUND:
		return ESRCH;
	case SBX_RPC_E_RUNTIME:
		return ENOEXEC;
	case SBX_RPC_E_TIMEOUT:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

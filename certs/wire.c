/* wire.c: the signer's messages (certs-t.h), encoded and decoded. Pure:
 * no I/O, no allocation; the signer decodes what the daemon sends and the
 * daemon decodes what the signer answers, each trusting nothing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "certs.h"

static bool
known_type(uint8_t t)
{
	return t == CERTS_MSG_HELLO || t == CERTS_MSG_MINT || t == CERTS_MSG_READY ||
	       t == CERTS_MSG_LEAF || t == CERTS_MSG_ERROR;
}

static bool
printable(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return false;
	return true;
}

/* The payload rules both directions share; NULL when m is well formed. */
static const char *
check(const struct certs_msg *m)
{
	uint8_t addr[16];

	if (!known_type(m->type))
		return "unknown message type";
	if (m->len > CERTS_WIRE_MAX - CERTS_WIRE_HDR)
		return "payload too long";
	switch (m->type) {
	case CERTS_MSG_MINT:
		if (certs_host_check((const char *)m->payload, m->len, addr) < 0)
			return "MINT: not a host a certificate is minted for";
		break;
	case CERTS_MSG_ERROR:
		if (m->code < CERTS_ERR_BAD_REQUEST || m->code > CERTS_ERR_STATE)
			return "ERROR: unknown code";
		if (m->len > CERTS_WIRE_ERRMSG_MAX || !printable(m->payload, m->len))
			return "ERROR: message too long or not printable";
		break;
	default: /* HELLO, READY, LEAF: DER, parsed by OpenSSL */
		if (m->len == 0)
			return "empty payload";
		break;
	}
	return NULL;
}

int
certs_wire_encode(uint8_t *out, size_t outsz, const struct certs_msg *m)
{
	size_t hdr = CERTS_WIRE_HDR + (m->type == CERTS_MSG_ERROR);
	size_t total;

	if (check(m))
		return -EINVAL;
	total = hdr + m->len;
	if (total > outsz || total > CERTS_WIRE_MAX)
		return -EMSGSIZE;
	out[0] = m->type;
	out[1] = (uint8_t)(m->id >> 24);
	out[2] = (uint8_t)(m->id >> 16);
	out[3] = (uint8_t)(m->id >> 8);
	out[4] = (uint8_t)m->id;
	if (m->type == CERTS_MSG_ERROR)
		out[5] = m->code;
	if (m->len)
		memcpy(out + hdr, m->payload, m->len);
	return (int)total;
}

int
certs_wire_decode(const uint8_t *in, size_t len, struct certs_msg *m, char *err, size_t errsz)
{
	const char *why;
	size_t hdr;

	memset(m, 0, sizeof(*m));
	if (len < CERTS_WIRE_HDR || len > CERTS_WIRE_MAX) {
		snprintf(err, errsz, "message of %zu bytes (%d..%d)", len, CERTS_WIRE_HDR,
		         CERTS_WIRE_MAX);
		return -EINVAL;
	}
	m->type = in[0];
	m->id = (uint32_t)in[1] << 24 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 8 | in[4];
	hdr = CERTS_WIRE_HDR;
	if (m->type == CERTS_MSG_ERROR) {
		if (len < hdr + 1) {
			why = "ERROR: no code";
			goto bad;
		}
		m->code = in[hdr++];
	}
	m->payload = in + hdr;
	m->len = len - hdr;
	why = check(m);
	if (why)
		goto bad;
	return 0;
bad:
	/* Every refusal leaves m all zero (type and id are set by now):
	 * nothing half-decoded for a caller to act on. */
	snprintf(err, errsz, "%s", why);
	memset(m, 0, sizeof(*m));
	return -EINVAL;
}

/* tlshello.c: a strict reader of the first TLS record, for the SNI. See
 * tlshello.h.
 *
 * Every fetch goes through the bounded reader (rd.h), which knows two
 * ends: the end of the structure being read, as its length field declared
 * it, and the end of the bytes actually given. A fetch past the first
 * (GW_RD_OVER, GW_RD_BADLEN) is MALFORMED, a fetch past the second
 * (GW_RD_SHORT) is NEED_MORE; nested structures get sub-readers, whose
 * declared end is checked against their parent's. Checks run in wire
 * order, which is what makes a prefix of an input give NEED_MORE or the
 * input's own result.
 */
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "rd.h"
#include "tlshello.h"

#define TLS_CT_HANDSHAKE    0x16
#define TLS_HS_CLIENT_HELLO 0x01
#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_EXT_ALPN        0x0010
#define TLS_SNI_HOST_NAME   0x00
#define TLS_RANDOM          32
#define TLS_SESSION_ID_MAX  32
#define DNS_NAME_MAX        253
#define DNS_LABEL_MAX       63

/* ---- results -------------------------------------------------------- */

static const char *const result_names[] = {
#define GW_TLSHELLO_RESULT_NAME(id, name) [GW_TLSHELLO_##id] = name,
    GW_TLSHELLO_RESULTS(GW_TLSHELLO_RESULT_NAME)
#undef GW_TLSHELLO_RESULT_NAME
};

const char *
gw_tlshello_result_name(enum gw_tlshello_result r)
{
	return (unsigned)r < GW_TLSHELLO__COUNT ? result_names[r] : "?";
}

static enum gw_tlshello_result
fail(struct gw_tlshello *o, enum gw_tlshello_result r, const char *msg, size_t at)
{
	o->msg = msg;
	o->at = at;
	return r;
}

/* A fetch that did not happen: past the bytes given is NEED_MORE, past a
 * declared end is MALFORMED (msg, at the field's offset). */
static enum gw_tlshello_result
not_read(struct gw_tlshello *o, enum gw_rd_status st, const char *msg, size_t at)
{
	if (st == GW_RD_SHORT)
		return GW_TLSHELLO_NEED_MORE;
	return fail(o, GW_TLSHELLO_MALFORMED, msg, at);
}

/* ---- the server name ------------------------------------------------ */

static bool
name_byte(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Validates a host_name into o->sni, lowercased, one trailing dot
 * stripped. NULL, or why not. */
static const char *
check_name(struct gw_rd_span name, struct gw_tlshello *o)
{
	const uint8_t *s = name.p;
	size_t n = name.len;
	struct sockaddr_storage ss;
	size_t label = 0;

	if (n == 0)
		return "empty server name";
	if (s[n - 1] == '.')
		n--;
	if (n == 0)
		return "server name is a lone dot";
	if (n > DNS_NAME_MAX)
		return "server name over 253 bytes";
	for (size_t i = 0; i < n; i++) {
		char c = (char)s[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!name_byte(c))
			return "byte outside [A-Za-z0-9.-] in the server name";
		if (c == '.') {
			if (label == 0)
				return "empty label in the server name";
			if (o->sni[i - 1] == '-')
				return "label ending with '-' in the server name";
			label = 0;
		} else {
			if (c == '-' && label == 0)
				return "label starting with '-' in the server name";
			if (++label > DNS_LABEL_MAX)
				return "label over 63 bytes in the server name";
		}
		o->sni[i] = c;
	}
	if (label == 0)
		return "empty label in the server name";
	if (o->sni[n - 1] == '-')
		return "label ending with '-' in the server name";
	/* RFC 6066 3: no literal addresses; numeric-looking names ("a.1",
	 * "0x7f000001") are refused the way the policy refuses them. */
	if (gw_addr_parse_literal(o->sni, n, &ss) != 0)
		return "server name is an IP address or numeric";
	o->sni[n] = '\0';
	o->sni_len = n;
	return NULL;
}

/* The server_name extension's data (RFC 6066 3). */
static enum gw_tlshello_result
read_sni(struct gw_rd *d, struct gw_tlshello *o)
{
	struct gw_rd list;
	struct gw_rd_span name;
	size_t at = gw_rd_pos(d);
	uint16_t n;
	uint8_t type;
	const char *why;
	enum gw_rd_status st;
	bool have = false;

	st = gw_rd_sub_be16(d, &list);
	if (st == GW_RD_BADLEN || (st == GW_RD_OK && gw_rd_left(d) != 0))
		return fail(o, GW_TLSHELLO_MALFORMED,
		            "server name list length disagrees with its extension", at);
	if (st != GW_RD_OK)
		return not_read(o, st, "server_name extension too short for its list length", at);
	if (gw_rd_left(&list) == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty server name list", at);
	while (gw_rd_left(&list) > 0) {
		at = gw_rd_pos(&list);
		if ((st = gw_rd_fetch_u8(&list, &type)) != GW_RD_OK ||
		    (st = gw_rd_fetch_be16(&list, &n)) != GW_RD_OK)
			return not_read(o, st, "server name entry overruns its list", at);
		if ((st = gw_rd_fetch_bytes(&list, n, &name)) != GW_RD_OK)
			return not_read(o, st, "server name overruns its list", at);
		if (type != TLS_SNI_HOST_NAME)
			return fail(o, GW_TLSHELLO_BAD_SNI, "server name not of type host_name",
			            at);
		if (have)
			return fail(o, GW_TLSHELLO_MALFORMED, "more than one host_name", at);
		have = true;
		if ((why = check_name(name, o)) != NULL) {
			o->sni[0] = '\0';
			o->sni_len = 0;
			return fail(o, GW_TLSHELLO_BAD_SNI, why, at + 3);
		}
	}
	return GW_TLSHELLO_OK;
}

/* The ALPN extension's data (RFC 7301 3.1). */
static enum gw_tlshello_result
read_alpn(struct gw_rd *d, struct gw_tlshello *o)
{
	struct gw_rd list;
	struct gw_rd_span proto;
	size_t at = gw_rd_pos(d);
	enum gw_rd_status st;
	uint8_t n;

	st = gw_rd_sub_be16(d, &list);
	if (st == GW_RD_BADLEN || (st == GW_RD_OK && gw_rd_left(d) != 0))
		return fail(o, GW_TLSHELLO_MALFORMED,
		            "ALPN list length disagrees with its extension", at);
	if (st != GW_RD_OK)
		return not_read(o, st, "ALPN extension too short for its list length", at);
	if (gw_rd_left(&list) == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty ALPN list", at);
	while (gw_rd_left(&list) > 0) {
		at = gw_rd_pos(&list);
		if ((st = gw_rd_fetch_u8(&list, &n)) != GW_RD_OK)
			return not_read(o, st, "ALPN entry overruns its list", at);
		if (n == 0)
			return fail(o, GW_TLSHELLO_MALFORMED, "empty ALPN protocol name", at);
		if ((st = gw_rd_fetch_bytes(&list, n, &proto)) != GW_RD_OK)
			return not_read(o, st, "ALPN protocol name overruns its list", at);
		if (n == 2 && memcmp(proto.p, "h2", 2) == 0)
			o->alpn_h2 = true;
		else if (n == 8 && memcmp(proto.p, "http/1.1", 8) == 0)
			o->alpn_http11 = true;
	}
	return GW_TLSHELLO_OK;
}

/* ---- the hello ------------------------------------------------------ */

/* The extensions block: ext is the block, its length already read. */
static enum gw_tlshello_result
read_extensions(struct gw_rd *ext, struct gw_tlshello *o)
{
	bool seen_sni = false, seen_alpn = false;
	enum gw_tlshello_result rc;
	struct gw_rd data;
	enum gw_rd_status st;
	uint16_t type;
	size_t at;

	while (gw_rd_left(ext) > 0) {
		at = gw_rd_pos(ext);
		if ((st = gw_rd_fetch_be16(ext, &type)) == GW_RD_OK)
			st = gw_rd_sub_be16(ext, &data);
		if (st == GW_RD_BADLEN)
			return fail(o, GW_TLSHELLO_MALFORMED, "extension overruns the extensions",
			            at);
		if (st != GW_RD_OK)
			return not_read(o, st, "extension header overruns the extensions", at);
		if (type == TLS_EXT_SERVER_NAME) {
			if (seen_sni)
				return fail(o, GW_TLSHELLO_MALFORMED,
				            "second server_name extension", at);
			seen_sni = true;
			rc = read_sni(&data, o);
		} else if (type == TLS_EXT_ALPN) {
			if (seen_alpn)
				return fail(o, GW_TLSHELLO_MALFORMED, "second ALPN extension", at);
			seen_alpn = true;
			rc = read_alpn(&data, o);
		} else {
			/* unread, but it must have arrived whole */
			st = gw_rd_skip(&data, gw_rd_left(&data));
			rc = st == GW_RD_OK ? GW_TLSHELLO_OK : GW_TLSHELLO_NEED_MORE;
		}
		if (rc != GW_TLSHELLO_OK)
			return rc;
	}
	if (!seen_sni)
		return fail(o, GW_TLSHELLO_NO_SNI, "no server_name extension", 0);
	return GW_TLSHELLO_OK;
}

/* The ClientHello body: h spans exactly the handshake message's body. */
static enum gw_tlshello_result
read_hello(struct gw_rd *h, struct gw_tlshello *o)
{
	struct gw_rd ext;
	enum gw_rd_status st;
	uint16_t v;
	uint8_t n;
	size_t at;

	at = gw_rd_pos(h);
	if ((st = gw_rd_fetch_be16(h, &v)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its version", at);
	if (v >> 8 != 3)
		return fail(o, GW_TLSHELLO_MALFORMED, "ClientHello version major not 3", at);
	at = gw_rd_pos(h);
	if ((st = gw_rd_skip(h, TLS_RANDOM)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its random", at);
	at = gw_rd_pos(h);
	if ((st = gw_rd_fetch_u8(h, &n)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its session id", at);
	if (n > TLS_SESSION_ID_MAX)
		return fail(o, GW_TLSHELLO_MALFORMED, "session id over 32 bytes", at);
	if ((st = gw_rd_skip(h, n)) != GW_RD_OK)
		return not_read(o, st, "session id overruns the ClientHello", at);
	at = gw_rd_pos(h);
	if ((st = gw_rd_fetch_be16(h, &v)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its cipher suites", at);
	if (v == 0 || v % 2 != 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "cipher suites of zero or odd length", at);
	if ((st = gw_rd_skip(h, v)) != GW_RD_OK)
		return not_read(o, st, "cipher suites overrun the ClientHello", at);
	at = gw_rd_pos(h);
	if ((st = gw_rd_fetch_u8(h, &n)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its compression methods", at);
	if (n == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "no compression method", at);
	if ((st = gw_rd_skip(h, n)) != GW_RD_OK)
		return not_read(o, st, "compression methods overrun the ClientHello", at);
	if (gw_rd_left(h) == 0) /* extensions are optional (RFC 5246 7.4.1.2) */
		return fail(o, GW_TLSHELLO_NO_SNI, "no extensions", 0);
	at = gw_rd_pos(h);
	if ((st = gw_rd_fetch_be16(h, &v)) != GW_RD_OK)
		return not_read(o, st, "ClientHello too short for its extensions length", at);
	if (v > gw_rd_left(h))
		return fail(o, GW_TLSHELLO_MALFORMED, "extensions overrun the ClientHello", at);
	if (v < gw_rd_left(h))
		return fail(o, GW_TLSHELLO_MALFORMED, "bytes after the extensions", at + 2 + v);
	(void)gw_rd_sub(h, v, &ext);
	return read_extensions(&ext, o);
}

/* The record and handshake headers, then the hello. The input is a
 * stream: until the record header declares its length, only the bytes
 * given bound the reader. */
static enum gw_tlshello_result
read_record(const uint8_t *in, size_t len, size_t max_record, struct gw_tlshello *o)
{
	struct gw_rd r, rec, hello;
	enum gw_rd_status st;
	uint8_t ct, major, hstype;
	uint16_t reclen;
	uint32_t hslen;

	o->need = GW_TLSHELLO_HEADER;
	gw_rd_init_stream(&r, in, len);
	if (gw_rd_fetch_u8(&r, &ct) != GW_RD_OK)
		return GW_TLSHELLO_NEED_MORE;
	if (ct >= 0x80)
		return fail(o, GW_TLSHELLO_NOT_TLS, "an SSLv2-compatible hello", 0);
	if (ct != TLS_CT_HANDSHAKE)
		return fail(o, GW_TLSHELLO_NOT_TLS, "not a TLS handshake record", 0);
	if (gw_rd_fetch_u8(&r, &major) != GW_RD_OK)
		return GW_TLSHELLO_NEED_MORE;
	if (major != 3)
		return fail(o, GW_TLSHELLO_NOT_TLS, "record version major not 3", 1);
	if (gw_rd_skip(&r, 1) != GW_RD_OK || gw_rd_fetch_be16(&r, &reclen) != GW_RD_OK)
		return GW_TLSHELLO_NEED_MORE;
	o->record_len = GW_TLSHELLO_HEADER + (size_t)reclen;
	if (reclen == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty record", 3);
	if (reclen > max_record)
		return fail(o, GW_TLSHELLO_TOO_BIG, "record over the size limit", 3);
	o->need = o->record_len;

	(void)gw_rd_sub(&r, reclen, &rec); /* a stream has no end to overrun */
	if ((st = gw_rd_fetch_u8(&rec, &hstype)) != GW_RD_OK)
		return not_read(o, st, "record too short", GW_TLSHELLO_HEADER);
	if (hstype != TLS_HS_CLIENT_HELLO)
		return fail(o, GW_TLSHELLO_NOT_CLIENT_HELLO, "first handshake not a ClientHello",
		            GW_TLSHELLO_HEADER);
	if (reclen < 4)
		return fail(o, GW_TLSHELLO_FRAGMENTED, "handshake header split over records",
		            GW_TLSHELLO_HEADER);
	if ((st = gw_rd_fetch_be24(&rec, &hslen)) != GW_RD_OK)
		return not_read(o, st, "record too short", GW_TLSHELLO_HEADER + 1);
	if (hslen > gw_rd_left(&rec))
		return fail(o, GW_TLSHELLO_FRAGMENTED, "ClientHello longer than its record",
		            GW_TLSHELLO_HEADER + 1);
	if (hslen < gw_rd_left(&rec))
		return fail(o, GW_TLSHELLO_MALFORMED, "bytes after the ClientHello in its record",
		            GW_TLSHELLO_HEADER + 4 + hslen);
	(void)gw_rd_sub(&rec, hslen, &hello);
	return read_hello(&hello, o);
}

enum gw_tlshello_result
gw_tlshello_parse(const uint8_t *in, size_t len, size_t max_record, struct gw_tlshello *out)
{
	enum gw_tlshello_result rc;

	memset(out, 0, sizeof(*out));
	if (max_record == 0 || max_record > GW_TLSHELLO_RECORD_MAX)
		max_record = GW_TLSHELLO_RECORD_MAX;
	rc = read_record(in, len, max_record, out);
	if (rc != GW_TLSHELLO_NEED_MORE)
		out->need = 0;
	if (rc != GW_TLSHELLO_OK) {
		out->sni[0] = '\0';
		out->sni_len = 0;
	}
	if (rc != GW_TLSHELLO_OK && rc != GW_TLSHELLO_NO_SNI)
		out->alpn_h2 = out->alpn_http11 = false;
	if (rc == GW_TLSHELLO_OK || rc == GW_TLSHELLO_NEED_MORE) {
		out->msg = NULL;
		out->at = 0;
	}
	return rc;
}

enum gw_reason
gw_tlshello_reason(enum gw_tlshello_result r)
{
	switch (r) {
	case GW_TLSHELLO_NOT_TLS:
		return GW_R_TLS_NOT_TLS;
	case GW_TLSHELLO_NOT_CLIENT_HELLO:
		return GW_R_TLS_NOT_CLIENT_HELLO;
	case GW_TLSHELLO_NO_SNI:
		return GW_R_TLS_NO_SNI;
	case GW_TLSHELLO_BAD_SNI:
		return GW_R_TLS_BAD_SNI;
	case GW_TLSHELLO_FRAGMENTED:
		return GW_R_TLS_FRAGMENTED;
	case GW_TLSHELLO_TOO_BIG:
		return GW_R_TLS_TOO_BIG;
	case GW_TLSHELLO_MALFORMED:
		return GW_R_TLS_MALFORMED;
	default:
		return GW_R_INTERNAL;
	}
}

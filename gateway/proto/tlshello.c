/* tlshello.c: a strict reader of the first TLS record, for the SNI. See
 * tlshello.h.
 *
 * Every fetch goes through a bounded reader that knows two ends: the end
 * of the structure being read, as its length field declared it, and the
 * end of the bytes actually given. A fetch past the first is MALFORMED, a
 * fetch past the second is NEED_MORE; nested structures get readers of
 * their own, whose declared end is checked against their parent's. Checks
 * run in wire order, which is what makes a prefix of an input give
 * NEED_MORE or the input's own result.
 */
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
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

/* ---- the bounded reader --------------------------------------------- */

enum rd_st {
	RD_OK = 0,
	RD_SHORT, /* past the bytes given: need more */
	RD_OVER,  /* past the declared end: malformed */
};

struct th_rd {
	const uint8_t *p;
	size_t avail; /* bytes given: nothing at or past this is read */
	size_t pos;
	size_t end; /* the structure's declared end; pos <= end always */
};

static size_t
rd_left(const struct th_rd *r)
{
	return r->end - r->pos;
}

static enum rd_st
rd_has(const struct th_rd *r, size_t n)
{
	if (n > rd_left(r))
		return RD_OVER;
	if (r->pos > r->avail || n > r->avail - r->pos)
		return RD_SHORT;
	return RD_OK;
}

/* n bytes (n <= 3) as a big-endian number. */
static enum rd_st
rd_uint(struct th_rd *r, size_t n, size_t *v)
{
	enum rd_st st = rd_has(r, n);

	if (st != RD_OK)
		return st;
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v << 8 | r->p[r->pos++];
	return RD_OK;
}

/* n bytes in place: *b points into the input. */
static enum rd_st
rd_bytes(struct th_rd *r, size_t n, const uint8_t **b)
{
	enum rd_st st = rd_has(r, n);

	if (st != RD_OK)
		return st;
	*b = r->p + r->pos;
	r->pos += n;
	return RD_OK;
}

static enum rd_st
rd_skip(struct th_rd *r, size_t n)
{
	const uint8_t *b;

	return rd_bytes(r, n, &b);
}

/* A reader for the next n bytes, which the parent steps over at once: read
 * the child to its end before the parent reads again. Only the declared
 * end is checked here; the child's own fetches check the bytes given. */
static enum rd_st
rd_sub(struct th_rd *r, size_t n, struct th_rd *sub)
{
	if (n > rd_left(r))
		return RD_OVER;
	sub->p = r->p;
	sub->avail = r->avail;
	sub->pos = r->pos;
	sub->end = r->pos + n;
	r->pos += n;
	return RD_OK;
}

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
not_read(struct gw_tlshello *o, enum rd_st st, const char *msg, size_t at)
{
	if (st == RD_SHORT)
		return GW_TLSHELLO_NEED_MORE;
	return fail(o, GW_TLSHELLO_MALFORMED, msg, at);
}

/* ---- the server name ------------------------------------------------ */

static bool
name_byte(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Validates a host_name (n bytes at s) into o->sni, lowercased, one
 * trailing dot stripped. NULL, or why not. */
static const char *
check_name(const uint8_t *s, size_t n, struct gw_tlshello *o)
{
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
read_sni(struct th_rd *d, struct gw_tlshello *o)
{
	struct th_rd list;
	size_t at = d->pos, n, type;
	const uint8_t *name;
	const char *why;
	enum rd_st st;
	bool have = false;

	if ((st = rd_uint(d, 2, &n)) != RD_OK)
		return not_read(o, st, "server_name extension too short for its list length", at);
	if (n != rd_left(d))
		return fail(o, GW_TLSHELLO_MALFORMED,
		            "server name list length disagrees with its extension", at);
	if (n == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty server name list", at);
	(void)rd_sub(d, n, &list);
	while (rd_left(&list) > 0) {
		at = list.pos;
		if ((st = rd_uint(&list, 1, &type)) != RD_OK ||
		    (st = rd_uint(&list, 2, &n)) != RD_OK)
			return not_read(o, st, "server name entry overruns its list", at);
		if ((st = rd_bytes(&list, n, &name)) != RD_OK)
			return not_read(o, st, "server name overruns its list", at);
		if (type != TLS_SNI_HOST_NAME)
			return fail(o, GW_TLSHELLO_BAD_SNI, "server name not of type host_name",
			            at);
		if (have)
			return fail(o, GW_TLSHELLO_MALFORMED, "more than one host_name", at);
		have = true;
		if ((why = check_name(name, n, o)) != NULL) {
			o->sni[0] = '\0';
			o->sni_len = 0;
			return fail(o, GW_TLSHELLO_BAD_SNI, why, at + 3);
		}
	}
	return GW_TLSHELLO_OK;
}

/* The ALPN extension's data (RFC 7301 3.1). */
static enum gw_tlshello_result
read_alpn(struct th_rd *d, struct gw_tlshello *o)
{
	struct th_rd list;
	size_t at = d->pos, n;
	const uint8_t *proto;
	enum rd_st st;

	if ((st = rd_uint(d, 2, &n)) != RD_OK)
		return not_read(o, st, "ALPN extension too short for its list length", at);
	if (n != rd_left(d))
		return fail(o, GW_TLSHELLO_MALFORMED,
		            "ALPN list length disagrees with its extension", at);
	if (n == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty ALPN list", at);
	(void)rd_sub(d, n, &list);
	while (rd_left(&list) > 0) {
		at = list.pos;
		if ((st = rd_uint(&list, 1, &n)) != RD_OK)
			return not_read(o, st, "ALPN entry overruns its list", at);
		if (n == 0)
			return fail(o, GW_TLSHELLO_MALFORMED, "empty ALPN protocol name", at);
		if ((st = rd_bytes(&list, n, &proto)) != RD_OK)
			return not_read(o, st, "ALPN protocol name overruns its list", at);
		if (n == 2 && memcmp(proto, "h2", 2) == 0)
			o->alpn_h2 = true;
		else if (n == 8 && memcmp(proto, "http/1.1", 8) == 0)
			o->alpn_http11 = true;
	}
	return GW_TLSHELLO_OK;
}

/* ---- the hello ------------------------------------------------------ */

/* The extensions block: ext is the block, its length already read. */
static enum gw_tlshello_result
read_extensions(struct th_rd *ext, struct gw_tlshello *o)
{
	bool seen_sni = false, seen_alpn = false;
	enum gw_tlshello_result rc;
	struct th_rd data;
	size_t at, type, n;
	enum rd_st st;

	while (rd_left(ext) > 0) {
		at = ext->pos;
		if ((st = rd_uint(ext, 2, &type)) != RD_OK || (st = rd_uint(ext, 2, &n)) != RD_OK)
			return not_read(o, st, "extension header overruns the extensions", at);
		if (rd_sub(ext, n, &data) != RD_OK)
			return fail(o, GW_TLSHELLO_MALFORMED, "extension overruns the extensions",
			            at);
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
			st = rd_skip(&data, rd_left(&data));
			rc = st == RD_OK ? GW_TLSHELLO_OK : GW_TLSHELLO_NEED_MORE;
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
read_hello(struct th_rd *h, struct gw_tlshello *o)
{
	struct th_rd ext;
	size_t at, v;
	enum rd_st st;

	at = h->pos;
	if ((st = rd_uint(h, 2, &v)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its version", at);
	if (v >> 8 != 3)
		return fail(o, GW_TLSHELLO_MALFORMED, "ClientHello version major not 3", at);
	at = h->pos;
	if ((st = rd_skip(h, TLS_RANDOM)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its random", at);
	at = h->pos;
	if ((st = rd_uint(h, 1, &v)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its session id", at);
	if (v > TLS_SESSION_ID_MAX)
		return fail(o, GW_TLSHELLO_MALFORMED, "session id over 32 bytes", at);
	if ((st = rd_skip(h, v)) != RD_OK)
		return not_read(o, st, "session id overruns the ClientHello", at);
	at = h->pos;
	if ((st = rd_uint(h, 2, &v)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its cipher suites", at);
	if (v == 0 || v % 2 != 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "cipher suites of zero or odd length", at);
	if ((st = rd_skip(h, v)) != RD_OK)
		return not_read(o, st, "cipher suites overrun the ClientHello", at);
	at = h->pos;
	if ((st = rd_uint(h, 1, &v)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its compression methods", at);
	if (v == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "no compression method", at);
	if ((st = rd_skip(h, v)) != RD_OK)
		return not_read(o, st, "compression methods overrun the ClientHello", at);
	if (rd_left(h) == 0) /* extensions are optional (RFC 5246 7.4.1.2) */
		return fail(o, GW_TLSHELLO_NO_SNI, "no extensions", 0);
	at = h->pos;
	if ((st = rd_uint(h, 2, &v)) != RD_OK)
		return not_read(o, st, "ClientHello too short for its extensions length", at);
	if (v > rd_left(h))
		return fail(o, GW_TLSHELLO_MALFORMED, "extensions overrun the ClientHello", at);
	if (v < rd_left(h))
		return fail(o, GW_TLSHELLO_MALFORMED, "bytes after the extensions", at + 2 + v);
	(void)rd_sub(h, v, &ext);
	return read_extensions(&ext, o);
}

/* The record and handshake headers, then the hello. */
static enum gw_tlshello_result
read_record(const uint8_t *in, size_t len, size_t max_record, struct gw_tlshello *o)
{
	struct th_rd rec, hello;
	size_t reclen, type, hslen;
	enum rd_st st;

	o->need = GW_TLSHELLO_HEADER;
	if (len < 1)
		return GW_TLSHELLO_NEED_MORE;
	if (in[0] >= 0x80)
		return fail(o, GW_TLSHELLO_NOT_TLS, "an SSLv2-compatible hello", 0);
	if (in[0] != TLS_CT_HANDSHAKE)
		return fail(o, GW_TLSHELLO_NOT_TLS, "not a TLS handshake record", 0);
	if (len < 2)
		return GW_TLSHELLO_NEED_MORE;
	if (in[1] != 3)
		return fail(o, GW_TLSHELLO_NOT_TLS, "record version major not 3", 1);
	if (len < GW_TLSHELLO_HEADER)
		return GW_TLSHELLO_NEED_MORE;
	reclen = (size_t)in[3] << 8 | in[4];
	o->record_len = GW_TLSHELLO_HEADER + reclen;
	if (reclen == 0)
		return fail(o, GW_TLSHELLO_MALFORMED, "empty record", 3);
	if (reclen > max_record)
		return fail(o, GW_TLSHELLO_TOO_BIG, "record over the size limit", 3);
	o->need = o->record_len;

	rec.p = in;
	rec.avail = len;
	rec.pos = GW_TLSHELLO_HEADER;
	rec.end = o->record_len;
	if ((st = rd_uint(&rec, 1, &type)) != RD_OK)
		return not_read(o, st, "record too short", GW_TLSHELLO_HEADER);
	if (type != TLS_HS_CLIENT_HELLO)
		return fail(o, GW_TLSHELLO_NOT_CLIENT_HELLO, "first handshake not a ClientHello",
		            GW_TLSHELLO_HEADER);
	if (reclen < 4)
		return fail(o, GW_TLSHELLO_FRAGMENTED, "handshake header split over records",
		            GW_TLSHELLO_HEADER);
	if ((st = rd_uint(&rec, 3, &hslen)) != RD_OK)
		return not_read(o, st, "record too short", GW_TLSHELLO_HEADER + 1);
	if (hslen > rd_left(&rec))
		return fail(o, GW_TLSHELLO_FRAGMENTED, "ClientHello longer than its record",
		            GW_TLSHELLO_HEADER + 1);
	if (hslen < rd_left(&rec))
		return fail(o, GW_TLSHELLO_MALFORMED, "bytes after the ClientHello in its record",
		            GW_TLSHELLO_HEADER + 4 + hslen);
	(void)rd_sub(&rec, hslen, &hello);
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

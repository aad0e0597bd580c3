/* sigv4.c: AWS Signature Version 4 re-signing (sigv4.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "rd.h"
#include "sigv4.h"

#define SCOPE_END     "aws4_request"
#define STREAM_PREFIX "STREAMING-"

static const char *const result_names[] = {
#define GW_SIGV4_RESULT_NAME(id, name) name,
    GW_SIGV4_RESULTS(GW_SIGV4_RESULT_NAME)
#undef GW_SIGV4_RESULT_NAME
};

static const char hexdig[] = "0123456789ABCDEF";
static const char hexlc[] = "0123456789abcdef";

/* clang-format off */
static const struct gw_rd_class akid_cls = { .in = {
	['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['0' ... '9'] = 1, ['_'] = 1,
} };
static const struct gw_rd_class region_cls = { .in = {
	['a' ... 'z'] = 1, ['0' ... '9'] = 1, ['-'] = 1,
} };
static const struct gw_rd_class service_cls = { .in = {
	['a' ... 'z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1,
} };
/* RFC 9110 tchar without A-Z */
static const struct gw_rd_class name_cls = { .in = {
	['a' ... 'z'] = 1, ['0' ... '9'] = 1,
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
	['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
	['`'] = 1, ['|'] = 1, ['~'] = 1,
} };
static const struct gw_rd_class hex_cls = { .in = { ['0' ... '9'] = 1, ['a' ... 'f'] = 1 } };
static const struct gw_rd_class space_cls = { .in = { [' '] = 1 } };
static const struct gw_rd_class upper_cls = { .in = { ['A' ... 'Z'] = 1 } };
/* RFC 3986 unreserved: what AWS leaves unencoded */
static const struct gw_rd_class unreserved_cls = { .in = {
	['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['0' ... '9'] = 1,
	['-'] = 1, ['_'] = 1, ['.'] = 1, ['~'] = 1,
} };
/* clang-format on */

const char *
gw_sigv4_result_name(enum gw_sigv4_result r)
{
	return (unsigned)r < GW_SIGV4__COUNT ? result_names[r] : "?";
}

__attribute__((format(printf, 4, 5))) static enum gw_sigv4_result
fail(enum gw_sigv4_result r, char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return r;
}

static bool
span_is(struct gw_rd_span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len == n && memcmp(s.p, lit, n) == 0;
}

static int
hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
is_lower_hex64(const char *p, size_t n)
{
	struct gw_rd_span s = {(const uint8_t *)p, n};

	return n == GW_SIGV4_SIG_LEN && gw_rd_span_all(s, &hex_cls);
}

static bool
digits(const char *p, size_t n, unsigned *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		*v = *v * 10 + (unsigned)(p[i] - '0');
	}
	return true;
}

/* YYYYMMDD, a real day from 1970 on. */
static bool
valid_day(const char *p, size_t n)
{
	static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	unsigned y, m, d, dim;

	if (n != GW_SIGV4_DATE_LEN || !digits(p, 4, &y) || !digits(p + 4, 2, &m) ||
	    !digits(p + 6, 2, &d))
		return false;
	if (y < 1970 || m < 1 || m > 12 || d < 1)
		return false;
	dim = mdays[m - 1];
	if (m == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		dim = 29;
	return d <= dim;
}

/* YYYYMMDDTHHMMSSZ (a leap second allowed). */
static bool
valid_amz_date(const char *p, size_t n)
{
	unsigned h, mi, s;

	return n == GW_SIGV4_AMZ_DATE_LEN && valid_day(p, 8) && p[8] == 'T' && p[15] == 'Z' &&
	       digits(p + 9, 2, &h) && digits(p + 11, 2, &mi) && digits(p + 13, 2, &s) && h < 24 &&
	       mi < 60 && s < 61;
}

/* ---- parse ---------------------------------------------------------------- */

/* A ',' then optional spaces then `part=`; the reader stays put on failure. */
static bool
next_part(struct gw_rd *r, const char *part)
{
	struct gw_rd t = *r;

	if (!gw_rd_match(&t, ",", 1))
		return false;
	gw_rd_while(&t, &space_cls);
	if (!gw_rd_match(&t, part, strlen(part)))
		return false;
	*r = t;
	return true;
}

static enum gw_sigv4_result
parse_scope(struct gw_rd_span cred, struct gw_sigv4_auth *out, char *err, size_t errsz)
{
	struct gw_rd r;
	struct gw_rd_span part[5];
	size_t np = 0;

	gw_rd_init(&r, cred.p, cred.len);
	for (;;) {
		struct gw_rd_span s = gw_rd_until(&r, '/', SIZE_MAX);

		if (np == 5)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "Credential has more than five '/'-separated parts "
			            "(AKID/YYYYMMDD/region/service/aws4_request)");
		part[np++] = s;
		if (!gw_rd_match(&r, "/", 1))
			break;
	}
	if (np != 5)
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential has %zu '/'-separated parts, not five "
		            "(AKID/YYYYMMDD/region/service/aws4_request)",
		            np);
	if (part[0].len == 0 || part[0].len > GW_SIGV4_AKID_MAX ||
	    !gw_rd_span_all(part[0], &akid_cls))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential's access key id is not 1..%d of [A-Za-z0-9_]",
		            GW_SIGV4_AKID_MAX);
	if (!valid_day((const char *)part[1].p, part[1].len))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential's date is not a calendar day YYYYMMDD");
	if (part[2].len == 0 || part[2].len > GW_SIGV4_REGION_MAX ||
	    !gw_rd_span_all(part[2], &region_cls))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential's region is not 1..%d of [a-z0-9-]", GW_SIGV4_REGION_MAX);
	if (part[3].len == 0 || part[3].len > GW_SIGV4_SERVICE_MAX ||
	    !gw_rd_span_all(part[3], &service_cls))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential's service is not 1..%d of [a-z0-9._-]",
		            GW_SIGV4_SERVICE_MAX);
	if (!span_is(part[4], SCOPE_END))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential does not end in /aws4_request");
	memcpy(out->akid, part[0].p, part[0].len);
	out->akid[part[0].len] = '\0';
	memcpy(out->date, part[1].p, part[1].len);
	out->date[part[1].len] = '\0';
	memcpy(out->region, part[2].p, part[2].len);
	out->region[part[2].len] = '\0';
	memcpy(out->service, part[3].p, part[3].len);
	out->service[part[3].len] = '\0';
	return GW_SIGV4_OK;
}

static enum gw_sigv4_result
parse_signed(struct gw_rd_span list, struct gw_sigv4_auth *out, char *err, size_t errsz)
{
	struct gw_rd r;
	struct gw_rd_span prev = {NULL, 0};
	bool host = false;

	if (list.len == 0)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "SignedHeaders is empty");
	if (list.len > GW_SIGV4_SIGNED_MAX)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "SignedHeaders is over %d bytes",
		            GW_SIGV4_SIGNED_MAX);
	out->nnames = 0;
	gw_rd_init(&r, list.p, list.len);
	for (;;) {
		size_t off = gw_rd_pos(&r);
		struct gw_rd_span s = gw_rd_until(&r, ';', SIZE_MAX);

		if (s.len == 0)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "SignedHeaders has an empty name (';;', or ';' at an end)");
		if (!gw_rd_span_all(s, &name_cls))
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "SignedHeaders name %zu is not a lowercase header name",
			            out->nnames + 1);
		if (prev.p) {
			size_t m = prev.len < s.len ? prev.len : s.len;
			int c = memcmp(prev.p, s.p, m);

			if (c > 0 || (c == 0 && prev.len >= s.len))
				return fail(GW_SIGV4_MALFORMED, err, errsz,
				            "SignedHeaders is not sorted, or repeats a name "
				            "(at '%.*s')",
				            (int)s.len, (const char *)s.p);
		}
		if (out->nnames == GW_SIGV4_NAMES_MAX)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "SignedHeaders has over %d names", GW_SIGV4_NAMES_MAX);
		out->name[out->nnames].off = (uint16_t)off;
		out->name[out->nnames].len = (uint16_t)s.len;
		out->nnames++;
		if (span_is(s, "host"))
			host = true;
		prev = s;
		if (!gw_rd_match(&r, ";", 1))
			break;
	}
	if (!host)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "SignedHeaders does not name host");
	memcpy(out->signed_headers, list.p, list.len);
	out->signed_headers[list.len] = '\0';
	out->signed_len = list.len;
	return GW_SIGV4_OK;
}

enum gw_sigv4_result
gw_sigv4_parse(const char *v, size_t n, struct gw_sigv4_auth *out, char *err, size_t errsz)
{
	struct gw_rd r;
	struct gw_rd_span alg, cred, list, sig;
	enum gw_sigv4_result res;

	if (!v && n)
		return fail(GW_SIGV4_INTERNAL, err, errsz, "no value");
	if (n == 0)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "Authorization is empty");
	if (n > GW_SIGV4_VALUE_MAX)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "Authorization is over %d bytes",
		            GW_SIGV4_VALUE_MAX);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)v[i];

		if (c < 0x20 || c > 0x7e)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "Authorization has a control or non-ASCII byte (0x%02x) "
			            "at offset %zu",
			            c, i);
	}
	gw_rd_init(&r, v, n);
	alg = gw_rd_until(&r, ' ', SIZE_MAX);
	if (span_is(alg, "AWS4-ECDSA-P256-SHA256"))
		return fail(GW_SIGV4_UNSUPPORTED, err, errsz,
		            "SigV4a (AWS4-ECDSA-P256-SHA256) is not re-signed: "
		            "configure the client for AWS4-HMAC-SHA256");
	if (span_is(alg, "AWS"))
		return fail(GW_SIGV4_UNSUPPORTED, err, errsz,
		            "AWS signature version 2 is not re-signed: "
		            "configure the client for signature version 4");
	if (!span_is(alg, GW_SIGV4_ALGORITHM))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the algorithm is not %s",
		            GW_SIGV4_ALGORITHM);
	if (gw_rd_while(&r, &space_cls).len == 0)
		return fail(GW_SIGV4_MALFORMED, err, errsz, "nothing after the algorithm");

	if (!gw_rd_match(&r, "Credential=", 11))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Credential= is not the first part after the algorithm");
	cred = gw_rd_until(&r, ',', SIZE_MAX);
	if (!next_part(&r, "SignedHeaders="))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "SignedHeaders= does not follow Credential's ','");
	list = gw_rd_until(&r, ',', SIZE_MAX);
	if (!next_part(&r, "Signature="))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Signature= does not follow SignedHeaders's ','");
	sig = gw_rd_rest(&r);

	memset(out, 0, sizeof(*out));
	res = parse_scope(cred, out, err, errsz);
	if (res != GW_SIGV4_OK)
		return res;
	res = parse_signed(list, out, err, errsz);
	if (res != GW_SIGV4_OK)
		return res;
	if (!is_lower_hex64((const char *)sig.p, sig.len))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "Signature is not %d lowercase hex digits, the value's last part",
		            GW_SIGV4_SIG_LEN);
	memcpy(out->signature, sig.p, sig.len);
	out->signature[sig.len] = '\0';
	return GW_SIGV4_OK;
}

/* ---- payload ---------------------------------------------------------------- */

enum gw_sigv4_result
gw_sigv4_payload_check(const char *p, size_t n, char *err, size_t errsz)
{
	static const char *const streaming[] = {
	    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
	    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
	    "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
	    "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER",
	};
	struct gw_rd_span s = {(const uint8_t *)p, p ? n : 0};

	if (span_is(s, "UNSIGNED-PAYLOAD") || span_is(s, "STREAMING-UNSIGNED-PAYLOAD-TRAILER") ||
	    is_lower_hex64(p, s.len))
		return GW_SIGV4_OK;
	for (size_t i = 0; i < sizeof(streaming) / sizeof(streaming[0]); i++)
		if (span_is(s, streaming[i]))
			return fail(GW_SIGV4_UNSUPPORTED, err, errsz,
			            "%s: a payload signed chunk by chunk is not re-signed "
			            "(each chunk's signature chains from the request's); "
			            "configure the client for UNSIGNED-PAYLOAD or a payload hash",
			            streaming[i]);
	return fail(GW_SIGV4_MALFORMED, err, errsz,
	            "the payload hash is not UNSIGNED-PAYLOAD, "
	            "STREAMING-UNSIGNED-PAYLOAD-TRAILER or 64 lowercase hex digits");
}

static void
hex_lower(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexlc[d[i] >> 4];
		out[2 * i + 1] = hexlc[d[i] & 15];
	}
	out[2 * n] = '\0';
}

enum gw_sigv4_result
gw_sigv4_payload_hash(const void *body, size_t n, char out[GW_SIGV4_SIG_LEN + 1])
{
	uint8_t d[SHA256_DIGEST_LENGTH];

	if (!SHA256(n ? body : (const void *)"", n, d))
		return GW_SIGV4_INTERNAL;
	hex_lower(d, sizeof(d), out);
	return GW_SIGV4_OK;
}

/* ---- the canonical request ------------------------------------------------ */

/* Where the canonical request goes: a digest, a caller's buffer, or both.
 * Small writes are gathered in buf before the digest sees them. */
struct sink {
	EVP_MD_CTX *md;
	char *out;
	size_t outsz;
	size_t len; /* every byte put, whether out had room or not */
	uint8_t buf[512];
	size_t n;
	bool failed;
};

static void
sink_flush(struct sink *s)
{
	if (s->md && s->n && !EVP_DigestUpdate(s->md, s->buf, s->n))
		s->failed = true;
	s->n = 0;
}

static void
sink_put(struct sink *s, const void *p, size_t n)
{
	if (s->out && s->len < s->outsz) {
		size_t room = s->outsz - s->len;

		memcpy(s->out + s->len, p, n < room ? n : room);
	}
	s->len += n;
	if (!s->md)
		return;
	if (n > sizeof(s->buf) - s->n)
		sink_flush(s);
	if (n >= sizeof(s->buf)) {
		if (!EVP_DigestUpdate(s->md, p, n))
			s->failed = true;
		return;
	}
	memcpy(s->buf + s->n, p, n);
	s->n += n;
}

static void
sink_c(struct sink *s, char c)
{
	sink_put(s, &c, 1);
}

/* One byte as AWS encodes it: unreserved (and '/' if keep_slash) as is,
 * anything else %XY. */
static void
sink_enc(struct sink *s, uint8_t c, bool keep_slash)
{
	char e[3];

	if (gw_rd_in(&unreserved_cls, c) || (keep_slash && c == '/')) {
		sink_c(s, (char)c);
		return;
	}
	e[0] = '%';
	e[1] = hexdig[c >> 4];
	e[2] = hexdig[c & 15];
	sink_put(s, e, 3);
}

/* Every '%' followed by two hex digits, every byte 0x21..0x7e. */
static bool
wire_encoded(const char *p, size_t n, const char **why)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)p[i];

		if (c <= 0x20 || c >= 0x7f) {
			*why = "a space, control or non-ASCII byte";
			return false;
		}
		if (c == '%' && (i + 2 >= n || hexval((uint8_t)p[i + 1]) < 0 ||
		                 hexval((uint8_t)p[i + 2]) < 0)) {
			*why = "a '%' not followed by two hex digits";
			return false;
		}
	}
	return true;
}

static enum gw_sigv4_result
put_path(struct sink *s, const struct gw_sigv4_request *rq, char *err, size_t errsz)
{
	const char *p = rq->path.p, *why = NULL;
	size_t n = rq->path.len;
	struct gw_h1_span seg[GW_SIGV4_SEGMENTS_MAX];
	size_t nseg = 0;

	if (!p || n == 0 || p[0] != '/')
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the path does not begin with '/'");
	if (!wire_encoded(p, n, &why))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the path has %s", why);
	if (memchr(p, '?', n) || memchr(p, '#', n))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the path has a '?' or '#'");
	if (rq->s3) {
		sink_put(s, p, n);
		return GW_SIGV4_OK;
	}
	/* botocore's remove_dot_segments(): empty and "." segments go, ".."
	 * takes the last one kept (if any) with it */
	for (size_t i = 1; i <= n;) {
		const char *e = memchr(p + i, '/', n - i);
		size_t len = e ? (size_t)(e - (p + i)) : n - i;

		if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
			if (nseg)
				nseg--;
		} else if (len && !(len == 1 && p[i] == '.')) {
			if (nseg == GW_SIGV4_SEGMENTS_MAX)
				return fail(GW_SIGV4_MALFORMED, err, errsz,
				            "the path has over %d segments", GW_SIGV4_SEGMENTS_MAX);
			seg[nseg].p = p + i;
			seg[nseg].len = len;
			nseg++;
		}
		i += len + 1;
	}
	sink_c(s, '/');
	for (size_t k = 0; k < nseg; k++) {
		if (k)
			sink_c(s, '/');
		for (size_t j = 0; j < seg[k].len; j++)
			sink_enc(s, (uint8_t)seg[k].p[j], false);
	}
	if (nseg && p[n - 1] == '/')
		sink_c(s, '/');
	return GW_SIGV4_OK;
}

struct qparam {
	struct gw_h1_span name;
	struct gw_h1_span value;
};

/* The AWS encoding of a wire-encoded span, a byte at a time. */
struct enc {
	const char *p;
	size_t len;
	size_t i;
	char pend[2];
	int npend;
};

static void
enc_init(struct enc *e, struct gw_h1_span s)
{
	e->p = s.p;
	e->len = s.len;
	e->i = 0;
	e->npend = 0;
}

/* The next encoded byte, or -1 at the end. */
static int
enc_next(struct enc *e)
{
	uint8_t c;

	if (e->npend) {
		c = (uint8_t)e->pend[2 - e->npend];
		e->npend--;
		return c;
	}
	if (e->i >= e->len)
		return -1;
	c = (uint8_t)e->p[e->i];
	if (c == '%') { /* validated: two hex digits follow */
		c = (uint8_t)(hexval((uint8_t)e->p[e->i + 1]) << 4 |
		              hexval((uint8_t)e->p[e->i + 2]));
		e->i += 3;
	} else {
		e->i++;
	}
	if (gw_rd_in(&unreserved_cls, c))
		return c;
	e->pend[0] = hexdig[c >> 4];
	e->pend[1] = hexdig[c & 15];
	e->npend = 2;
	return '%';
}

static int
enc_cmp(struct gw_h1_span a, struct gw_h1_span b)
{
	struct enc ea, eb;

	enc_init(&ea, a);
	enc_init(&eb, b);
	for (;;) {
		int ca = enc_next(&ea), cb = enc_next(&eb);

		if (ca != cb)
			return ca < cb ? -1 : 1;
		if (ca < 0)
			return 0;
	}
}

static int
qparam_cmp(const void *x, const void *y)
{
	const struct qparam *a = x, *b = y;
	int c = enc_cmp(a->name, b->name);

	return c ? c : enc_cmp(a->value, b->value);
}

static void
sink_encoded(struct sink *s, struct gw_h1_span v)
{
	struct enc e;
	int c;

	enc_init(&e, v);
	while ((c = enc_next(&e)) >= 0)
		sink_c(s, (char)c);
}

static enum gw_sigv4_result
put_query(struct sink *s, const struct gw_sigv4_request *rq, char *err, size_t errsz)
{
	struct qparam q[GW_SIGV4_QUERY_MAX];
	size_t nq = 0;
	const char *p = rq->query.p, *why = NULL;
	size_t n = p ? rq->query.len : 0;

	if (n == 0)
		return GW_SIGV4_OK;
	if (!wire_encoded(p, n, &why))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the query has %s", why);
	if (memchr(p, '#', n))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the query has a '#'");
	for (size_t i = 0; i <= n;) {
		const char *e = memchr(p + i, '&', n - i);
		size_t len = e ? (size_t)(e - (p + i)) : n - i;
		const char *eq = memchr(p + i, '=', len);

		if (len == 0)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "the query has an empty parameter ('&&', or '&' at an end)");
		if (eq == p + i)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "the query has a parameter with no name");
		if (nq == GW_SIGV4_QUERY_MAX)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "the query has over %d parameters", GW_SIGV4_QUERY_MAX);
		q[nq].name.p = p + i;
		q[nq].name.len = eq ? (size_t)(eq - (p + i)) : len;
		q[nq].value.p = eq ? eq + 1 : p + i + len;
		q[nq].value.len = eq ? len - q[nq].name.len - 1 : 0;
		nq++;
		i += len + 1;
	}
	qsort(q, nq, sizeof(q[0]), qparam_cmp);
	for (size_t k = 0; k < nq; k++) {
		if (k)
			sink_c(s, '&');
		sink_encoded(s, q[k].name);
		sink_c(s, '=');
		sink_encoded(s, q[k].value);
	}
	return GW_SIGV4_OK;
}

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static bool
name_eq(struct gw_h1_span field, const char *name, size_t len)
{
	return field.p && field.len == len && strncasecmp(field.p, name, len) == 0;
}

static enum gw_sigv4_result
put_headers(struct sink *s, const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq,
            char *err, size_t errsz)
{
	for (size_t k = 0; k < a->nnames; k++) {
		const char *name = a->signed_headers + a->name[k].off;
		size_t len = a->name[k].len;
		size_t found = 0;

		sink_put(s, name, len);
		sink_c(s, ':');
		for (size_t i = 0; i < rq->nheaders; i++) {
			const struct gw_h1_header *h = &rq->headers[i];
			bool space = false, any = false;

			if (!name_eq(h->name, name, len))
				continue;
			if (found++)
				sink_c(s, ',');
			for (size_t j = 0; j < h->value.len; j++) {
				uint8_t c = (uint8_t)h->value.p[j];

				if (c != '\t' && (c < 0x20 || c > 0x7e))
					return fail(GW_SIGV4_MALFORMED, err, errsz,
					            "a value of signed header %.*s has a control "
					            "or non-ASCII byte",
					            (int)len, name);
				if (is_ows((char)c)) {
					space = any;
					continue;
				}
				if (space)
					sink_c(s, ' ');
				sink_c(s, (char)c);
				space = false;
				any = true;
			}
		}
		if (!found)
			return fail(GW_SIGV4_MALFORMED, err, errsz,
			            "signed header %.*s is not in the request", (int)len, name);
		sink_c(s, '\n');
	}
	return GW_SIGV4_OK;
}

/* The value of the one field called name: 1, or 0 (none) or 2 (more). */
static int
one_field(const struct gw_sigv4_request *rq, const char *name, struct gw_h1_span *v)
{
	int n = 0;

	for (size_t i = 0; i < rq->nheaders && n < 2; i++)
		if (name_eq(rq->headers[i].name, name, strlen(name))) {
			*v = rq->headers[i].value;
			n++;
		}
	return n;
}

static enum gw_sigv4_result
payload_of(const struct gw_sigv4_request *rq, struct gw_h1_span *v, char *err, size_t errsz)
{
	int n;

	if (rq->payload_hash.p) {
		*v = rq->payload_hash;
	} else if ((n = one_field(rq, "x-amz-content-sha256", v)) != 1) {
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            n ? "more than one X-Amz-Content-SHA256 field"
		              : "no X-Amz-Content-SHA256 field and no payload hash given");
	}
	return gw_sigv4_payload_check(v->p, v->len, err, errsz);
}

static bool
auth_sane(const struct gw_sigv4_auth *a)
{
	if (a->nnames == 0 || a->nnames > GW_SIGV4_NAMES_MAX || a->signed_len > GW_SIGV4_SIGNED_MAX)
		return false;
	for (size_t k = 0; k < a->nnames; k++)
		if ((size_t)a->name[k].off + a->name[k].len > a->signed_len)
			return false;
	return true;
}

/* The canonical request into s (sigv4.h). */
static enum gw_sigv4_result
put_canonical(struct sink *s, const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq,
              char *err, size_t errsz)
{
	struct gw_h1_span payload;
	enum gw_sigv4_result r;
	struct gw_rd_span m = {(const uint8_t *)rq->method.p, rq->method.p ? rq->method.len : 0};

	if (!auth_sane(a))
		return fail(GW_SIGV4_INTERNAL, err, errsz, "the parsed value is inconsistent");
	if (m.len == 0 || m.len > 32 || !gw_rd_span_all(m, &upper_cls))
		return fail(GW_SIGV4_MALFORMED, err, errsz, "the method is not 1..32 of [A-Z]");
	r = payload_of(rq, &payload, err, errsz);
	if (r != GW_SIGV4_OK)
		return r;
	sink_put(s, m.p, m.len);
	sink_c(s, '\n');
	if ((r = put_path(s, rq, err, errsz)) != GW_SIGV4_OK)
		return r;
	sink_c(s, '\n');
	if ((r = put_query(s, rq, err, errsz)) != GW_SIGV4_OK)
		return r;
	sink_c(s, '\n');
	if ((r = put_headers(s, a, rq, err, errsz)) != GW_SIGV4_OK)
		return r;
	sink_c(s, '\n');
	sink_put(s, a->signed_headers, a->signed_len);
	sink_c(s, '\n');
	sink_put(s, payload.p, payload.len);
	return GW_SIGV4_OK;
}

enum gw_sigv4_result
gw_sigv4_canonical(const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq, char *out,
                   size_t outsz, size_t *outlen, char *err, size_t errsz)
{
	struct sink s = {.out = out, .outsz = outsz};
	enum gw_sigv4_result r = put_canonical(&s, a, rq, err, errsz);

	if (outlen)
		*outlen = s.len;
	if (r != GW_SIGV4_OK)
		return r;
	if (!out || s.len >= outsz)
		return fail(GW_SIGV4_INTERNAL, err, errsz,
		            "the canonical request needs %zu bytes, the buffer has %zu", s.len + 1,
		            outsz);
	out[s.len] = '\0';
	return GW_SIGV4_OK;
}

/* ---- signing -------------------------------------------------------------- */

static bool
hmac(const void *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32])
{
	unsigned int olen = 0;

	return HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &olen) && olen == 32;
}

enum gw_sigv4_result
gw_sigv4_sign(const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq, const char *secret,
              size_t secret_len, char sig[GW_SIGV4_SIG_LEN + 1], char *err, size_t errsz)
{
	struct sink s = {0};
	struct gw_h1_span date;
	uint8_t crhash[32], k[32], mac[32];
	char key[4 + GW_SIGV4_SECRET_MAX];
	char sts[512], crhex[65];
	unsigned int dlen = 0;
	int n, sn;
	enum gw_sigv4_result r;

	sig[0] = '\0';
	if (!secret || secret_len == 0 || secret_len > GW_SIGV4_SECRET_MAX)
		return fail(GW_SIGV4_INTERNAL, err, errsz, "the secret is empty or over %d bytes",
		            GW_SIGV4_SECRET_MAX);
	if (rq->amz_date.p) {
		date = rq->amz_date;
	} else if ((n = one_field(rq, "x-amz-date", &date)) != 1) {
		if (n == 0)
			return fail(GW_SIGV4_UNSUPPORTED, err, errsz,
			            "no X-Amz-Date field: a request dated by Date alone "
			            "is not re-signed");
		return fail(GW_SIGV4_MALFORMED, err, errsz, "more than one X-Amz-Date field");
	}
	if (!valid_amz_date(date.p, date.len))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "X-Amz-Date is not a time YYYYMMDDTHHMMSSZ");
	if (memcmp(date.p, a->date, GW_SIGV4_DATE_LEN) != 0)
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "X-Amz-Date's day is not the Credential's");

	s.md = EVP_MD_CTX_new();
	if (!s.md || !EVP_DigestInit_ex(s.md, EVP_sha256(), NULL)) {
		r = fail(GW_SIGV4_INTERNAL, err, errsz, "libcrypto: SHA-256 init failed");
		goto out;
	}
	r = put_canonical(&s, a, rq, err, errsz);
	if (r != GW_SIGV4_OK)
		goto out;
	sink_flush(&s);
	if (s.failed || !EVP_DigestFinal_ex(s.md, crhash, &dlen) || dlen != 32) {
		r = fail(GW_SIGV4_INTERNAL, err, errsz, "libcrypto: SHA-256 failed");
		goto out;
	}
	hex_lower(crhash, 32, crhex);
	sn = snprintf(sts, sizeof(sts), "%s\n%.*s\n%s/%s/%s/%s\n%s", GW_SIGV4_ALGORITHM,
	              (int)date.len, date.p, a->date, a->region, a->service, SCOPE_END, crhex);
	if (sn < 0 || (size_t)sn >= sizeof(sts)) {
		r = fail(GW_SIGV4_INTERNAL, err, errsz, "the string to sign does not fit");
		goto out;
	}
	memcpy(key, "AWS4", 4);
	memcpy(key + 4, secret, secret_len);
	if (!hmac(key, 4 + secret_len, a->date, strlen(a->date), k) ||
	    !hmac(k, 32, a->region, strlen(a->region), k) ||
	    !hmac(k, 32, a->service, strlen(a->service), k) ||
	    !hmac(k, 32, SCOPE_END, strlen(SCOPE_END), k) || !hmac(k, 32, sts, (size_t)sn, mac)) {
		r = fail(GW_SIGV4_INTERNAL, err, errsz, "libcrypto: HMAC-SHA256 failed");
		goto out;
	}
	hex_lower(mac, 32, sig);
	r = GW_SIGV4_OK;
out:
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(k, sizeof(k));
	EVP_MD_CTX_free(s.md);
	return r;
}

enum gw_sigv4_result
gw_sigv4_verify(const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq,
                const char *secret, size_t secret_len, char *err, size_t errsz)
{
	char sig[GW_SIGV4_SIG_LEN + 1];
	enum gw_sigv4_result r = gw_sigv4_sign(a, rq, secret, secret_len, sig, err, errsz);

	if (r != GW_SIGV4_OK)
		return r;
	if (!is_lower_hex64(a->signature, strnlen(a->signature, sizeof(a->signature))) ||
	    CRYPTO_memcmp(sig, a->signature, GW_SIGV4_SIG_LEN) != 0)
		return fail(GW_SIGV4_MISMATCH, err, errsz,
		            "the signature is not the one computed with this secret");
	return GW_SIGV4_OK;
}

enum gw_sigv4_result
gw_sigv4_format(const struct gw_sigv4_auth *a, const char *akid, size_t akid_len, const char *sig,
                char *out, size_t outsz, size_t *outlen, char *err, size_t errsz)
{
	struct gw_rd_span k = {(const uint8_t *)akid, akid ? akid_len : 0};
	int n;

	if (outlen)
		*outlen = 0;
	if (k.len == 0 || k.len > GW_SIGV4_AKID_MAX || !gw_rd_span_all(k, &akid_cls))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "the access key id is not 1..%d of [A-Za-z0-9_]", GW_SIGV4_AKID_MAX);
	if (!sig || !is_lower_hex64(sig, strnlen(sig, GW_SIGV4_SIG_LEN + 1)))
		return fail(GW_SIGV4_MALFORMED, err, errsz,
		            "the signature is not %d lowercase hex digits", GW_SIGV4_SIG_LEN);
	if (!auth_sane(a))
		return fail(GW_SIGV4_INTERNAL, err, errsz, "the parsed value is inconsistent");
	n = snprintf(out, out ? outsz : 0,
	             "%s Credential=%.*s/%s/%s/%s/%s, SignedHeaders=%.*s, Signature=%s",
	             GW_SIGV4_ALGORITHM, (int)k.len, akid, a->date, a->region, a->service,
	             SCOPE_END, (int)a->signed_len, a->signed_headers, sig);
	if (n < 0)
		return fail(GW_SIGV4_INTERNAL, err, errsz, "formatting failed");
	if (outlen)
		*outlen = (size_t)n;
	if (!out || (size_t)n >= outsz)
		return fail(GW_SIGV4_INTERNAL, err, errsz,
		            "the Authorization value needs %d bytes, the buffer has %zu", n + 1,
		            outsz);
	return GW_SIGV4_OK;
}

enum gw_sigv4_result
gw_sigv4_resign(const char *v, size_t n, const struct gw_sigv4_request *rq, const char *akid,
                size_t akid_len, const char *secret, size_t secret_len, char *out, size_t outsz,
                size_t *outlen, char *err, size_t errsz)
{
	struct gw_sigv4_auth a;
	char sig[GW_SIGV4_SIG_LEN + 1];
	enum gw_sigv4_result r;

	if (outlen)
		*outlen = 0;
	r = gw_sigv4_parse(v, n, &a, err, errsz);
	if (r != GW_SIGV4_OK)
		return r;
	r = gw_sigv4_sign(&a, rq, secret, secret_len, sig, err, errsz);
	if (r != GW_SIGV4_OK)
		return r;
	return gw_sigv4_format(&a, akid, akid_len, sig, out, outsz, outlen, err, errsz);
}

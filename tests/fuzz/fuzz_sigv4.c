/* fuzz_sigv4.c: libFuzzer target for gateway/proto/sigv4.c.
 *
 * Input: an Authorization value, optionally followed by "\n" and a
 * request to sign: a request-target ("/path?query"), then header lines
 * "name:value", one per "\n". Besides memory errors (the value is parsed
 * from a buffer of exactly its length), it checks the contracts of
 * sigv4.h:
 *  - a result in range, and a message with every refusal;
 *  - OK only for a value that holds what the parser promises: a key id of
 *    [A-Za-z0-9_], a day of 8 digits, a SignedHeaders list strictly
 *    ascending, lowercase, naming host, a 64-hex signature;
 *  - an accepted value, formatted again with its own key id and signature,
 *    parses to the same thing (and formatting is a fixed point);
 *  - parsing is a pure function of its input;
 *  - with a request: the canonical request and the signature are
 *    computed or refused alike (same result), the canonical request is
 *    the same whatever buffer it is asked into, and verify agrees with
 *    sign.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* by path: the CMake target links no library that exports gateway/ */
#include "sigv4.h"

#define MAXH 16

static void
check_auth(const struct gw_sigv4_auth *a)
{
	size_t n = strlen(a->akid);

	CHECK(n >= 1 && n <= GW_SIGV4_AKID_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = a->akid[i];

		CHECK((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_');
	}
	CHECK(strlen(a->date) == GW_SIGV4_DATE_LEN);
	CHECK(strlen(a->region) >= 1 && strlen(a->service) >= 1);
	CHECK(strlen(a->signature) == GW_SIGV4_SIG_LEN);
	CHECK(strspn(a->signature, "0123456789abcdef") == GW_SIGV4_SIG_LEN);
	CHECK(a->signed_len == strlen(a->signed_headers));
	CHECK(a->nnames >= 1 && a->nnames <= GW_SIGV4_NAMES_MAX);
	{
		bool host = false;

		for (size_t k = 0; k < a->nnames; k++) {
			const char *p = a->signed_headers + a->name[k].off;
			size_t len = a->name[k].len;

			CHECK(len >= 1 && (size_t)a->name[k].off + len <= a->signed_len);
			CHECK(p[len] == (k + 1 == a->nnames ? '\0' : ';'));
			for (size_t i = 0; i < len; i++)
				CHECK(!(p[i] >= 'A' && p[i] <= 'Z') && p[i] > ' ' && p[i] != ';');
			if (len == 4 && memcmp(p, "host", 4) == 0)
				host = true;
			if (k) {
				const char *q = a->signed_headers + a->name[k - 1].off;
				size_t ql = a->name[k - 1].len;
				int c = memcmp(q, p, ql < len ? ql : len);

				CHECK(c < 0 || (c == 0 && ql < len));
			}
		}
		CHECK(host);
	}
}

/* the request after the value's "\n": target, then header lines */
static size_t
split_request(const char *s, size_t n, struct gw_sigv4_request *rq, struct gw_h1_header *h)
{
	const char *e = memchr(s, '\n', n);
	size_t tl = e ? (size_t)(e - s) : n;
	const char *qm = memchr(s, '?', tl);
	size_t nh = 0;

	memset(rq, 0, sizeof(*rq));
	rq->method.p = "PUT";
	rq->method.len = 3;
	rq->path.p = s;
	rq->path.len = qm ? (size_t)(qm - s) : tl;
	if (qm) {
		rq->query.p = qm + 1;
		rq->query.len = tl - rq->path.len - 1;
	}
	rq->s3 = tl > 0 && (s[0] & 1);
	while (e && nh < MAXH) {
		const char *line = e + 1;
		size_t left = n - (size_t)(line - s);
		const char *c;

		e = memchr(line, '\n', left);
		left = e ? (size_t)(e - line) : left;
		c = memchr(line, ':', left);
		if (!c)
			continue;
		h[nh].name.p = line;
		h[nh].name.len = (size_t)(c - line);
		h[nh].value.p = c + 1;
		h[nh].value.len = left - h[nh].name.len - 1;
		nh++;
	}
	rq->headers = h;
	rq->nheaders = nh;
	return nh;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nl = memchr(in, '\n', size);
	size_t vlen = nl ? (size_t)(nl - in) : size;
	struct gw_sigv4_auth a, a2;
	char err[256], err2[256], out[GW_SIGV4_VALUE_MAX + 1], out2[GW_SIGV4_VALUE_MAX + 1];
	char *v = malloc(vlen ? vlen : 1);
	enum gw_sigv4_result r;
	size_t n, n2;

	CHECK(v != NULL);
	if (vlen)
		memcpy(v, in, vlen);
	err[0] = '\0';
	r = gw_sigv4_parse(vlen ? v : NULL, vlen, &a, err, sizeof(err));
	CHECK((unsigned)r < GW_SIGV4__COUNT);
	CHECK(r == GW_SIGV4_OK || r == GW_SIGV4_MALFORMED || r == GW_SIGV4_UNSUPPORTED);
	CHECK(strcmp(gw_sigv4_result_name(r), "?") != 0);
	CHECK(gw_sigv4_parse(vlen ? v : NULL, vlen, &a2, err2, sizeof(err2)) == r);
	free(v);
	if (r != GW_SIGV4_OK) {
		CHECK(err[0] != '\0');
		CHECK(strcmp(err, err2) == 0);
		return 0;
	}
	CHECK(memcmp(&a, &a2, sizeof(a)) == 0);
	check_auth(&a);

	/* format, parse again: the same */
	CHECK(gw_sigv4_format(&a, a.akid, strlen(a.akid), a.signature, out, sizeof(out), &n, err,
	                      sizeof(err)) == GW_SIGV4_OK);
	CHECK(n == strlen(out) && n <= vlen + 2); /* ", " where it had "," */
	memset(&a2, 0xa5, sizeof(a2));
	CHECK(gw_sigv4_parse(out, n, &a2, err, sizeof(err)) == GW_SIGV4_OK);
	CHECK(strcmp(a.akid, a2.akid) == 0 && strcmp(a.date, a2.date) == 0 &&
	      strcmp(a.region, a2.region) == 0 && strcmp(a.service, a2.service) == 0 &&
	      strcmp(a.signed_headers, a2.signed_headers) == 0 && a.nnames == a2.nnames &&
	      memcmp(a.name, a2.name, a.nnames * sizeof(a.name[0])) == 0 &&
	      strcmp(a.signature, a2.signature) == 0);
	CHECK(gw_sigv4_format(&a2, a2.akid, strlen(a2.akid), a2.signature, out2, sizeof(out2), &n2,
	                      err, sizeof(err)) == GW_SIGV4_OK);
	CHECK(n2 == n && memcmp(out, out2, n) == 0);

	if (nl) {
		struct gw_sigv4_request rq;
		struct gw_h1_header h[MAXH];
		char sig[GW_SIGV4_SIG_LEN + 1], cr[8192], small[64], date[17];
		enum gw_sigv4_result rc, rs, rv;
		size_t crl = 0, sl = 0;

		split_request(nl + 1, size - vlen - 1, &rq, h);
		rq.payload_hash.p = "UNSIGNED-PAYLOAD";
		rq.payload_hash.len = 16;
		memcpy(date, a.date, 8);
		memcpy(date + 8, "T000000Z", 9);
		rq.amz_date.p = date;
		rq.amz_date.len = 16;
		rc = gw_sigv4_canonical(&a, &rq, cr, sizeof(cr), &crl, err, sizeof(err));
		rs = gw_sigv4_sign(&a, &rq, "secret", 6, sig, err2, sizeof(err2));
		CHECK(rc == GW_SIGV4_OK || rc == GW_SIGV4_MALFORMED || rc == GW_SIGV4_INTERNAL);
		if (rc == GW_SIGV4_INTERNAL) {
			CHECK(crl >= sizeof(cr));
		} else {
			CHECK(rs == rc);
		}
		if (rc == GW_SIGV4_OK) {
			CHECK(crl == strlen(cr));
			CHECK(strlen(sig) == GW_SIGV4_SIG_LEN);
			/* the same into a buffer too small: INTERNAL, the same length */
			if (crl >= sizeof(small)) {
				CHECK(gw_sigv4_canonical(&a, &rq, small, sizeof(small), &sl, err,
				                         sizeof(err)) == GW_SIGV4_INTERNAL);
				CHECK(sl == crl && memcmp(small, cr, sizeof(small)) == 0);
			}
			memcpy(a.signature, sig, sizeof(sig));
			rv = gw_sigv4_verify(&a, &rq, "secret", 6, err, sizeof(err));
			CHECK(rv == GW_SIGV4_OK);
			CHECK(gw_sigv4_verify(&a, &rq, "secreT", 6, err, sizeof(err)) ==
			      GW_SIGV4_MISMATCH);
		} else {
			CHECK(err[0] != '\0' && err2[0] != '\0');
		}
	}
	return 0;
}

/* sigv4-t.h: types of the AWS Signature Version 4 module (sigv4.h).
 *
 * Everything is in fixed arrays: a parsed Authorization value is copied
 * out of the caller's bytes, so it stays valid after they change; a
 * request to sign borrows the caller's head (http1-t.h spans) for the
 * length of one call.
 */
#ifndef SLUICE_GW_SIGV4_T_H
#define SLUICE_GW_SIGV4_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http1-t.h"

/* The one algorithm re-signed; its name begins every value. */
#define GW_SIGV4_ALGORITHM "AWS4-HMAC-SHA256"

/* Bounds. A value or field past one is refused, never cut. */
#define GW_SIGV4_VALUE_MAX    4096 /* a whole Authorization value */
#define GW_SIGV4_AKID_MAX     128  /* AWS: 16..128 of [A-Za-z0-9_] */
#define GW_SIGV4_DATE_LEN     8    /* YYYYMMDD */
#define GW_SIGV4_AMZ_DATE_LEN 16   /* YYYYMMDDTHHMMSSZ */
#define GW_SIGV4_REGION_MAX   63
#define GW_SIGV4_SERVICE_MAX  63
#define GW_SIGV4_SIGNED_MAX   2048 /* the SignedHeaders list, "a;b;c" */
#define GW_SIGV4_NAMES_MAX    128  /* names in it */
#define GW_SIGV4_SIG_LEN      64   /* lowercase hex of HMAC-SHA256 */
#define GW_SIGV4_SECRET_MAX   256  /* AWS secrets are 40 bytes */
#define GW_SIGV4_QUERY_MAX    256  /* query parameters signed */
#define GW_SIGV4_SEGMENTS_MAX 256  /* path segments (non-S3 normalisation) */

/* What a call returns. The names appear in log lines: add, never rename. */
#define GW_SIGV4_RESULTS(X)                                                                        \
	X(OK, "ok")                                                                                \
	X(MALFORMED, "malformed")     /* not strict SigV4, or a request we cannot canonicalise */  \
	X(UNSUPPORTED, "unsupported") /* valid AWS, not re-signable: chunk signatures, SigV4a */   \
	X(MISMATCH, "mismatch")       /* verify: the signature is not the one computed */          \
	X(INTERNAL, "internal")       /* the caller's bug (buffer, secret size) or libcrypto's */

enum gw_sigv4_result {
#define GW_SIGV4_RESULT_ENUM(id, name) GW_SIGV4_##id,
	GW_SIGV4_RESULTS(GW_SIGV4_RESULT_ENUM)
#undef GW_SIGV4_RESULT_ENUM
	    GW_SIGV4__COUNT
};

/* A parsed Authorization value (gw_sigv4_parse()). Strings are
 * NUL-terminated copies. */
struct gw_sigv4_auth {
	char akid[GW_SIGV4_AKID_MAX + 1];
	char date[GW_SIGV4_DATE_LEN + 1]; /* the credential scope's day */
	char region[GW_SIGV4_REGION_MAX + 1];
	char service[GW_SIGV4_SERVICE_MAX + 1];
	/* The SignedHeaders list as given (lowercase, sorted, ';'-separated)
	 * and each name in it: signed[name[i].off .. + name[i].len). */
	char signed_headers[GW_SIGV4_SIGNED_MAX + 1];
	size_t signed_len;
	size_t nnames;
	struct {
		uint16_t off;
		uint16_t len;
	} name[GW_SIGV4_NAMES_MAX];
	char signature[GW_SIGV4_SIG_LEN + 1];
};

/* A request to sign: what it is on the wire, borrowed. */
struct gw_sigv4_request {
	struct gw_h1_span method; /* "GET", uppercase as sent */
	/* The origin-form request-target split at the first '?'
	 * (gw_h1_target's path and query): path begins with '/'; query is
	 * what follows '?', len 0 when there is none or it is empty. */
	struct gw_h1_span path;
	struct gw_h1_span query;
	/* The request's header fields in wire order, values OWS-trimmed
	 * (gw_h1_head's headers). */
	const struct gw_h1_header *headers;
	size_t nheaders;
	/* The hashed payload: "UNSIGNED-PAYLOAD",
	 * "STREAMING-UNSIGNED-PAYLOAD-TRAILER" or 64 lowercase hex. p NULL:
	 * the value of the one X-Amz-Content-SHA256 field (for a service
	 * whose client sends none, hash the body: gw_sigv4_payload_hash()). */
	struct gw_h1_span payload_hash;
	/* The request's timestamp, YYYYMMDDTHHMMSSZ. p NULL: the value of the
	 * one X-Amz-Date field. */
	struct gw_h1_span amz_date;
	/* S3's rules for the path (verbatim) rather than every other
	 * service's (normalised, encoded again). */
	bool s3;
};

#endif

/* sigv4.h: AWS Signature Version 4 (AWS4-HMAC-SHA256) for re-signing: a
 * guest signs a request with a placeholder key pair; the gateway checks
 * the Authorization value strictly, computes the signature of the same
 * request with the real secret, and rebuilds the value with the real
 * access key id.
 *
 * Pure: no I/O, no logging, no globals, no allocation of ours (libcrypto's
 * digest context allocates). Every call is bounded by the limits in
 * sigv4-t.h. Error strings (err, errsz: one line, may be NULL/0) name
 * fields and header names, never a value: no key, secret or signature
 * reaches one.
 *
 * The Authorization value (gw_sigv4_parse), exactly
 *
 *   AWS4-HMAC-SHA256 SP+ Credential=AKID/YYYYMMDD/REGION/SERVICE/aws4_request
 *   "," SP* SignedHeaders=NAME(;NAME)* "," SP* Signature=64HEX
 *
 * the field value as the head parser gives it (no surrounding
 * whitespace), at most GW_SIGV4_VALUE_MAX bytes. Refused as MALFORMED:
 * another algorithm; a missing, empty, repeated or reordered part; a
 * comma without its part or a part without its comma; other whitespace
 * (tab) or whitespace anywhere else; an access key id outside
 * [A-Za-z0-9_] or over GW_SIGV4_AKID_MAX; a day that is not a calendar
 * date YYYYMMDD (1970..9999); a region outside [a-z0-9-], a service
 * outside [a-z0-9._-] (either empty or over 63); a terminator other than
 * aws4_request; a scope with more or fewer than five parts; a header name
 * that is empty, has a byte outside the lowercase HTTP token characters,
 * or is out of order (the list must be strictly ascending, bytewise: no
 * duplicates); more than GW_SIGV4_NAMES_MAX names or a list over
 * GW_SIGV4_SIGNED_MAX bytes; a list without "host"; a signature that is
 * not exactly 64 lowercase hex digits; NUL, CR, LF or any byte outside
 * 0x20..0x7e. Refused as UNSUPPORTED (valid AWS, not ours to re-sign):
 * AWS4-ECDSA-P256-SHA256 (SigV4a) and "AWS AKID:sig" (SigV2).
 *
 * The canonical request (gw_sigv4_canonical, gw_sigv4_sign), as botocore
 * and AWS's documentation build it:
 *
 *   METHOD \n CanonicalURI \n CanonicalQuery \n
 *   (name:value \n) for each signed name \n SignedHeaders \n HashedPayload
 *
 *   - METHOD: 1..32 of [A-Z], verbatim.
 *   - CanonicalURI, from the wire path (bytes 0x21..0x7e, starting with
 *     '/', every '%' followed by two hex digits; else MALFORMED). S3
 *     (rq->s3): the path verbatim, no normalisation, no encoding. Other
 *     services: dot segments and empty segments removed as botocore's
 *     remove_dot_segments() does ("/a//b/./c/../d/" is "/a/b/d/", "/.."
 *     is "/"; a trailing '/' kept unless nothing is left), then every byte
 *     but A-Z a-z 0-9 - _ . ~ and '/' percent-encoded again ("%20" is
 *     "%2520", '+' is "%2B"). At most GW_SIGV4_SEGMENTS_MAX segments.
 *   - CanonicalQuery: the query split at '&', each parameter at its first
 *     '=' (none: an empty value); name and value percent-decoded ('+' is
 *     a plus, not a space) and encoded again with every byte but
 *     A-Z a-z 0-9 - _ . ~ as %XY (uppercase); sorted by encoded name, then
 *     encoded value; joined "name=value" with '&'. A query already in
 *     that encoding (what AWS clients send) is only sorted. Refused: an
 *     empty parameter ("a&&b", a trailing '&'), an empty name, a '%'
 *     without two hex digits, a byte outside 0x21..0x7e, more than
 *     GW_SIGV4_QUERY_MAX parameters.
 *   - Headers: for each name of SignedHeaders (already sorted), every
 *     request field of that name (any case), in wire order, each value
 *     with leading and trailing SP/HTAB removed and inner runs of SP/HTAB
 *     made one SP, joined with ','. Refused: a signed name with no field
 *     in the request; a value byte outside HTAB, 0x20..0x7e.
 *   - HashedPayload: rq->payload_hash, or the one X-Amz-Content-SHA256
 *     field (see gw_sigv4_payload_check). Refused: none, or two fields.
 * The string to sign is
 *   AWS4-HMAC-SHA256 \n AMZDATE \n DAY/REGION/SERVICE/aws4_request \n
 *   hex(SHA-256(canonical request))
 * with AMZDATE rq->amz_date or the one X-Amz-Date field (refused: none
 * (a request dated by Date alone is UNSUPPORTED), two, not
 * YYYYMMDDTHHMMSSZ, or a day other than the credential's), and the
 * signature is hex(HMAC(kSigning, string to sign)) with kSigning the
 * usual chain HMAC(HMAC(HMAC(HMAC("AWS4" secret, DAY), REGION), SERVICE),
 * "aws4_request").
 *
 * Not done here: presigned URLs (X-Amz-Signature in the query), the
 * session token (a caller re-signing for temporary credentials replaces
 * X-Amz-Security-Token in rq->headers before signing), and checking that
 * the origin is the service the scope names.
 */
#ifndef SLUICE_GW_SIGV4_H
#define SLUICE_GW_SIGV4_H

#include "sigv4-t.h"

/* Parses the Authorization value v[0..n) (counted; v may hold NUL bytes,
 * which are refused) into *out. OK, MALFORMED or UNSUPPORTED, with err
 * saying why. *out is fully written only on OK. */
enum gw_sigv4_result gw_sigv4_parse(const char *v, size_t n, struct gw_sigv4_auth *out, char *err,
                                    size_t errsz);

/* Whether an X-Amz-Content-SHA256 value p[0..n) can be re-signed: OK for
 * "UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER" and 64
 * lowercase hex; UNSUPPORTED for the payloads signed chunk by chunk with
 * the key (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER],
 * STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD[-TRAILER]): each chunk's
 * signature chains from the seed signature, which re-signing changes;
 * MALFORMED for anything else. */
enum gw_sigv4_result gw_sigv4_payload_check(const char *p, size_t n, char *err, size_t errsz);

/* hex(SHA-256(body[0..n))) into out (65 bytes, NUL-terminated): the
 * HashedPayload of a request whose client sends no X-Amz-Content-SHA256
 * (most services but S3). OK or INTERNAL. */
enum gw_sigv4_result gw_sigv4_payload_hash(const void *body, size_t n,
                                           char out[GW_SIGV4_SIG_LEN + 1]);

/* The canonical request of rq under a's scope and signed headers, into
 * out[0..outsz) NUL-terminated, its length in *outlen (for tests and
 * diagnostics: it holds header values, so never log it). INTERNAL when
 * outsz is too small (*outlen then says how much is needed). */
enum gw_sigv4_result gw_sigv4_canonical(const struct gw_sigv4_auth *a,
                                        const struct gw_sigv4_request *rq, char *out, size_t outsz,
                                        size_t *outlen, char *err, size_t errsz);

/* The signature of rq with secret[0..secret_len) under a's scope and
 * signed headers (a->akid and a->signature are not used), as 64 lowercase
 * hex into sig (NUL-terminated). OK, MALFORMED, UNSUPPORTED (a streaming
 * signed payload, no X-Amz-Date), INTERNAL (a secret over
 * GW_SIGV4_SECRET_MAX, libcrypto). */
enum gw_sigv4_result gw_sigv4_sign(const struct gw_sigv4_auth *a, const struct gw_sigv4_request *rq,
                                   const char *secret, size_t secret_len,
                                   char sig[GW_SIGV4_SIG_LEN + 1], char *err, size_t errsz);

/* gw_sigv4_sign() with secret, compared in constant time with
 * a->signature: OK, MISMATCH, or sign's error. */
enum gw_sigv4_result gw_sigv4_verify(const struct gw_sigv4_auth *a,
                                     const struct gw_sigv4_request *rq, const char *secret,
                                     size_t secret_len, char *err, size_t errsz);

/* The Authorization value for a's scope and signed headers with the
 * access key id akid[0..akid_len) and the signature sig (64 lowercase
 * hex):
 *   AWS4-HMAC-SHA256 Credential=AKID/DAY/REGION/SERVICE/aws4_request,
 *   SignedHeaders=..., Signature=SIG
 * (one line, ", " between parts, as botocore writes it) into
 * out[0..outsz) NUL-terminated, its length in *outlen. MALFORMED for a
 * bad akid or sig, INTERNAL when out is too small. */
enum gw_sigv4_result gw_sigv4_format(const struct gw_sigv4_auth *a, const char *akid,
                                     size_t akid_len, const char *sig, char *out, size_t outsz,
                                     size_t *outlen, char *err, size_t errsz);

/* All of it: parses v[0..n), signs rq with secret and formats the value
 * with akid, into out as gw_sigv4_format(). The guest's own signature is
 * not checked (it signed with a placeholder secret the gateway may not
 * know). */
enum gw_sigv4_result gw_sigv4_resign(const char *v, size_t n, const struct gw_sigv4_request *rq,
                                     const char *akid, size_t akid_len, const char *secret,
                                     size_t secret_len, char *out, size_t outsz, size_t *outlen,
                                     char *err, size_t errsz);

/* "ok", "malformed", ...; "?" out of range. */
const char *gw_sigv4_result_name(enum gw_sigv4_result r);

#endif

/* tlshello-t.h: types of the strict TLS ClientHello reader (SNI peek).
 *
 * The reader is stateless: it is re-run on the whole of what the client
 * has sent so far (see tlshello.h), so there is no parser state to keep,
 * only a result and what it found.
 */
#ifndef SLUICE_GW_TLSHELLO_T_H
#define SLUICE_GW_TLSHELLO_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_TLSHELLO_HEADER 5 /* type, version, length */
/* The largest record length field accepted: 2^14 (RFC 8446 5.1) and some
 * slack for old stacks that overshoot. */
#define GW_TLSHELLO_RECORD_MAX (16384 + 256)
/* A buffer that holds any first record we accept. */
#define GW_TLSHELLO_BUF_MAX (GW_TLSHELLO_HEADER + GW_TLSHELLO_RECORD_MAX)
/* A server name, one trailing dot stripped, and its NUL. */
#define GW_TLSHELLO_NAME_MAX 254

/* What a call returns. The names appear in log lines: add, never rename. */
#define GW_TLSHELLO_RESULTS(X)                                                                     \
	X(NEED_MORE, "need-more") /* all so far is fine; read more */                              \
	X(OK, "ok")               /* a ClientHello with a good SNI */                              \
	X(NOT_TLS, "not-tls")     /* not a TLS handshake record */                                 \
	X(NOT_CLIENT_HELLO, "not-client-hello")                                                    \
	X(NO_SNI, "no-sni")         /* no server_name extension */                                 \
	X(BAD_SNI, "bad-sni")       /* a server name we do not take */                             \
	X(FRAGMENTED, "fragmented") /* hello split over records */                                 \
	X(TOO_BIG, "too-big")       /* record over the limit */                                    \
	X(MALFORMED, "malformed")   /* an inconsistent length or field */

enum gw_tlshello_result {
#define GW_TLSHELLO_RESULT_ENUM(id, name) GW_TLSHELLO_##id,
	GW_TLSHELLO_RESULTS(GW_TLSHELLO_RESULT_ENUM)
#undef GW_TLSHELLO_RESULT_ENUM
	    GW_TLSHELLO__COUNT
};

/* What a call found. Every field is written on every call. */
struct gw_tlshello {
	/* NEED_MORE: the total input length the first record needs (5 until
	 * its header is in, then 5 + its length). Fewer bytes than this
	 * cannot give OK; they may still show an error. 0 otherwise. */
	size_t need;
	/* 5 + the record length field, whatever the result, once the
	 * record header was read whole (and accepted as TLS); else 0. */
	size_t record_len;
	/* OK: the server name, lowercased, one trailing dot stripped,
	 * NUL-terminated; "" otherwise. */
	char sni[GW_TLSHELLO_NAME_MAX];
	size_t sni_len;
	/* OK and NO_SNI: the ALPN extension offered "h2" / "http/1.1". */
	bool alpn_h2;
	bool alpn_http11;
	/* Errors: a static one-line detail ("session id over 32 bytes") and
	 * the offset in the input where the offending field starts (or
	 * would: the end of the structure that lacks it). NULL
	 * and 0 for NEED_MORE and OK. */
	const char *msg;
	size_t at;
};

#endif

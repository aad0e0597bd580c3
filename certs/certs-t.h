/* certs-t.h: the types of certs/: host kinds, the signer's wire messages,
 * the cache's counters. Includes only system and OpenSSL headers. */
#ifndef SLUICE_CERTS_T_H
#define SLUICE_CERTS_T_H

#include <stddef.h>
#include <stdint.h>

/* A name a leaf may be minted for (certs_host_check()). */
enum certs_host_kind {
	CERTS_HOST_DNS = 1, /* a dNSName SAN */
	CERTS_HOST_IP4,     /* an iPAddress SAN, 4 bytes */
	CERTS_HOST_IP6,     /* an iPAddress SAN, 16 bytes */
};

#define CERTS_HOST_MAX 253 /* a DNS name without its trailing dot */
#define CERTS_CN_MAX   64  /* ub-common-name: longer hosts get no CN */

/* ---- the signer's wire protocol (certs_wire_*) ----
 *
 * One message per SOCK_SEQPACKET record, never split or joined:
 *
 *   type (1 byte) | id (4 bytes, big-endian) | payload (the rest)
 *
 * The parent sends HELLO once (payload: the shared leaf key's public half,
 * a DER SubjectPublicKeyInfo) and the signer answers READY (payload: the
 * CA certificate, DER) or ERROR. Then each MINT (payload: a host that
 * passes certs_host_check()) is answered with LEAF (payload: the leaf,
 * DER) or ERROR (payload: a code byte, then a one-line message of
 * printable ASCII). A reply carries its request's id. */
enum certs_msg_type {
	CERTS_MSG_HELLO = 0x01,
	CERTS_MSG_MINT = 0x02,
	CERTS_MSG_READY = 0x81,
	CERTS_MSG_LEAF = 0x82,
	CERTS_MSG_ERROR = 0x83,
};

/* ERROR codes: what the parent can do about it. */
enum certs_err_code {
	CERTS_ERR_BAD_REQUEST = 1, /* malformed message: a bug on our side */
	CERTS_ERR_CA = 2,          /* the CA could not be loaded or created */
	CERTS_ERR_MINT = 3,        /* OpenSSL failed to build or sign */
	CERTS_ERR_STATE = 4,       /* MINT before HELLO, or HELLO twice */
};

#define CERTS_WIRE_HDR        5
#define CERTS_WIRE_MAX        16384 /* the largest message either side sends */
#define CERTS_WIRE_ERRMSG_MAX 200   /* an ERROR's message, bytes */

/* A decoded message. Pointers borrow the decoded buffer. */
struct certs_msg {
	uint8_t type; /* enum certs_msg_type */
	uint32_t id;
	const uint8_t *payload; /* HELLO, READY, LEAF: DER; MINT: the host */
	size_t len;
	uint8_t code; /* ERROR: enum certs_err_code */
};

/* ---- the cache ---- */

/* Counters since certs_cache_new(), for /metrics. */
struct certs_cache_stats {
	uint64_t hits;          /* served from the cache */
	uint64_t misses;        /* not cached (or due for renewal): a mint was started */
	uint64_t joins;         /* waited for another thread's mint of the same name */
	uint64_t mints;         /* calls of the mint function */
	uint64_t mint_failures; /* of which failed */
	uint64_t evictions;     /* leaves dropped to stay within the bound */
	uint64_t renewals;      /* leaves dropped halfway through their validity */
	size_t entries;         /* leaves held now */
	size_t capacity;
};

#endif

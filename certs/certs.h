/* certs.h: sluice's CA, leaf minting, the signer process and the leaf
 * cache. Uses nothing of ours: every setting is a plain parameter.
 *
 * Who holds what: the CA key is loaded (or created) only inside the signer
 * process (certs_signer_start()); the daemon holds the CA certificate, the
 * one shared leaf key and the cache, and asks the signer for a leaf on a
 * miss. certs_ca_open() and certs_mint() are the in-process halves the
 * signer runs; tests call them directly. No function here logs; none puts
 * key material in an error string. */
#ifndef SLUICE_CERTS_H
#define SLUICE_CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "certs-t.h"

/* ---- names ---- */

/* Whether host[0..len) is a name a leaf is minted for, and which kind: a
 * DNS name in normal form (lowercase letters, digits and '-', labels of
 * 1..63 bytes that neither start nor end with '-', at most 253 bytes, no
 * trailing dot, no wildcard, a last label that is not all digits), or an
 * IP address literal in the form inet_ntop() writes (no brackets, no
 * zone). Returns the enum certs_host_kind (addr, 16 bytes, then holds the
 * address for the IP kinds) or -EINVAL. Pure. */
int certs_host_check(const char *host, size_t len, uint8_t addr[16]);

/* ---- the CA (in-process) ---- */

struct certs_ca {
	X509 *cert;
	EVP_PKEY *key;
};

/* Loads the CA from cert_path and key_path, or creates both when neither
 * exists: an ECDSA P-256 key written to key_path (mode 0600, O_EXCL: an
 * existing file is never overwritten) and a self-signed CA certificate
 * (CA:TRUE pathlen:0, keyCertSign+cRLSign, SKI, ten years) to cert_path.
 * Refuses, naming the path and the fix: one file without the other; a key
 * file that is a symbolic link, not a regular file, or readable by group
 * or others; an encrypted key; a certificate that is not a CA, has no
 * subjectKeyIdentifier, has expired, or does not match the key. `created`
 * (may be NULL) says whether the pair was made now. Fills *ca (release
 * with certs_ca_fini()); 0 or -errno with one line in err. */
int certs_ca_open(const char *cert_path, const char *key_path, struct certs_ca *ca, bool *created,
                  char *err, size_t errsz);
void certs_ca_fini(struct certs_ca *ca);

/* ---- leaves ---- */

/* A new ECDSA P-256 key (the shared leaf key; never written to disk), or
 * NULL when out of memory. The caller owns it. */
EVP_PKEY *certs_leaf_key_new(void);

/* Mints a leaf for host (certs_host_check() must accept it): a random
 * positive 128-bit serial; SAN exactly host (dNSName or iPAddress; critical
 * when there is no CN); subject CN=host if it fits in 64 bytes; CA:FALSE
 * and keyUsage digitalSignature (both critical); EKU serverAuth; SKI, and
 * AKI from the CA's SKI; valid from now - 1 h for `days` days, cut at the
 * CA's own end. leaf_pub: the leaf key (only its public half is used).
 * Thread-safe for distinct outputs. Returns 0 with *out owned by the
 * caller, or -errno with one line in err. */
int certs_mint(const struct certs_ca *ca, EVP_PKEY *leaf_pub, const char *host, unsigned days,
               time_t now, X509 **out, char *err, size_t errsz);

/* ---- the signer's wire format (pure) ---- */

/* Writes m (type, id, payload; code for ERROR) into out. Returns the
 * length, or -EMSGSIZE when it does not fit in outsz or CERTS_WIRE_MAX,
 * or -EINVAL for a message certs_wire_decode() would refuse. */
int certs_wire_encode(uint8_t *out, size_t outsz, const struct certs_msg *m);

/* Decodes one whole message in[0..len): the header, a known type and a
 * payload that type allows (MINT: a host certs_host_check() accepts;
 * ERROR: a known code and printable text). *m borrows in. Returns 0, or
 * -EINVAL with the reason in err (err never quotes the bytes) and *m all
 * zero. */
int certs_wire_decode(const uint8_t *in, size_t len, struct certs_msg *m, char *err, size_t errsz);

/* ---- the signer process ---- */

struct certs_signer;

struct certs_signer_opts {
	const char *ca_cert; /* paths for certs_ca_open() */
	const char *ca_key;
	unsigned leaf_validity_days; /* 1..397 */
	int timeout_ms;              /* one reply at most; 0: 10000 */
};

/* Forks the signer at daemon start (before any worker thread): the child
 * closes every fd but its socket and stderr, ignores SIGPIPE, SIGINT and
 * SIGHUP, dies with its parent, is not dumpable, opens the CA
 * (certs_ca_open(), in the child only) and serves mints until its socket
 * reaches EOF. The caller makes the shared leaf key here and loads only
 * the CA certificate from the signer's answer. Returns 0 with *out, or
 * -errno with one line in err (the signer's own reason when it refused the
 * CA). Not thread-safe; call once. */
int certs_signer_start(const struct certs_signer_opts *o, struct certs_signer **out, char *err,
                       size_t errsz);

/* Asks the signer for a leaf for host. Thread-safe (one request at a time
 * over the socket; the cache in front makes misses rare). Returns 0 with
 * *out owned by the caller, -EINVAL for a host certs_host_check() refuses,
 * -ETIMEDOUT, -EPIPE once the signer is gone, or -EIO (the signer's
 * reason in err). */
int certs_signer_mint(struct certs_signer *s, const char *host, X509 **out, char *err,
                      size_t errsz);

/* certs_signer_mint() as a certs_mint_fn, arg being the signer. */
int certs_signer_mint_cb(void *arg, const char *host, X509 **out, char *err, size_t errsz);

/* Borrowed, valid until certs_signer_stop(): the CA certificate, the same
 * as PEM text (for GET /v1/ca.pem and guest trust stores), the shared leaf
 * key (for the TLS server). The signer's pid, for the daemon's SIGCHLD. */
X509 *certs_signer_ca(const struct certs_signer *s);
const char *certs_signer_ca_pem(const struct certs_signer *s);
EVP_PKEY *certs_signer_leaf_key(const struct certs_signer *s);
pid_t certs_signer_pid(const struct certs_signer *s);

/* Closes the socket and reaps the signer: 0 when it exited by itself with
 * status 0 within 2 s, -ETIMEDOUT when it had to be killed, -ECHILD when
 * someone else reaped it, -EIO for any other end. Frees s; NULL is fine. */
int certs_signer_stop(struct certs_signer *s);

/* ---- the cache ---- */

/* Makes a leaf for host: 0 with *out (owned by the caller) or -errno with
 * one line in err. Called without the cache's lock, from any thread. */
typedef int (*certs_mint_fn)(void *arg, const char *host, X509 **out, char *err, size_t errsz);

/* Clock, for tests; NULL: time(). */
typedef time_t (*certs_clock_fn)(void);

struct certs_cache;

/* A bounded LRU of leaves by host, shared by threads: at most capacity
 * (>= 1) leaves; a leaf is minted anew once half its validity has passed.
 * NULL when out of memory. */
struct certs_cache *certs_cache_new(size_t capacity, certs_mint_fn mint, void *arg,
                                    certs_clock_fn clock);

/* The leaf for host: a new reference in *out (X509_free() it; use it with
 * the shared leaf key). On a miss exactly one caller mints; callers that
 * want the same host meanwhile wait for that result, a failure included.
 * Any thread. 0, or the mint's -errno and err. */
int certs_cache_get(struct certs_cache *c, const char *host, X509 **out, char *err, size_t errsz);

void certs_cache_stats(struct certs_cache *c, struct certs_cache_stats *st);

/* No certs_cache_get() may be running. NULL is fine. */
void certs_cache_free(struct certs_cache *c);

#endif

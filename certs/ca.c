/* ca.c: the CA (load or create) and leaf minting, in-process. Runs in the
 * signer process (signer.c) and in tests; the daemon itself never calls
 * certs_ca_open(). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "certs.h"

#define CA_DAYS      3650
#define KEY_FILE_MAX 65536
#define BACKDATE     3600 /* guests whose clocks lag a little still accept */

/* The reason of OpenSSL's latest error, for err strings (never key bytes:
 * the library's reasons are fixed texts). Clears the queue. */
static const char *
ossl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : "unknown OpenSSL error";
}

/* ---- names ---- */

static bool
is_ldh(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
}

int
certs_host_check(const char *host, size_t len, uint8_t addr[16])
{
	char buf[CERTS_HOST_MAX + 1], back[INET6_ADDRSTRLEN];
	size_t label = 0;
	bool digits = true;

	if (!host || len == 0 || len > CERTS_HOST_MAX || memchr(host, 0, len))
		return -EINVAL;
	memcpy(buf, host, len);
	buf[len] = 0;
	if (memchr(buf, ':', len)) {
		if (inet_pton(AF_INET6, buf, addr) != 1 ||
		    !inet_ntop(AF_INET6, addr, back, sizeof(back)) || strcmp(back, buf) != 0)
			return -EINVAL;
		return CERTS_HOST_IP6;
	}
	if (inet_pton(AF_INET, buf, addr) == 1) {
		if (!inet_ntop(AF_INET, addr, back, sizeof(back)) || strcmp(back, buf) != 0)
			return -EINVAL;
		return CERTS_HOST_IP4;
	}
	for (size_t i = 0; i <= len; i++) {
		char ch = buf[i];

		if (ch == '.' || ch == 0) {
			/* empty label (leading, doubled or trailing dot), or
			 * one that starts or ends with '-' */
			if (label == 0 || label > 63 || buf[i - label] == '-' || buf[i - 1] == '-')
				return -EINVAL;
			if (ch == 0)
				break;
			label = 0;
			digits = true;
			continue;
		}
		if (!is_ldh(ch))
			return -EINVAL;
		digits = digits && ch >= '0' && ch <= '9';
		label++;
	}
	/* "1.2.3" or "10": not an address inet_pton() takes, and not a name */
	return digits ? -EINVAL : CERTS_HOST_DNS;
}

/* ---- building blocks ---- */

/* A random positive nonzero 128-bit serial. */
static int
set_serial(X509 *x)
{
	uint8_t b[16];
	BIGNUM *bn;
	int ok;

	do {
		if (RAND_bytes(b, sizeof(b)) != 1)
			return -EIO;
		b[0] &= 0x7f; /* DER INTEGER: the top bit is the sign */
		bn = BN_bin2bn(b, sizeof(b), NULL);
		if (!bn)
			return -ENOMEM;
		if (!BN_is_zero(bn))
			break;
		BN_free(bn);
	} while (1);
	ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok ? 0 : -EIO;
}

static int
add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = e && X509_add_ext(x, e, -1);

	X509_EXTENSION_free(e);
	return ok ? 0 : -EIO;
}

static const EVP_MD *
sign_md(EVP_PKEY *key)
{
	/* Ed25519 and Ed448 sign the message itself */
	if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448"))
		return NULL;
	return EVP_sha256();
}

/* ---- files ---- */

static int
write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The parent directory of path made durable after a create. */
static void
sync_dir(const char *path)
{
	char d[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;
	int fd;

	if (!slash)
		return;
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof(d))
		return;
	memcpy(d, path, n);
	d[n] = 0;
	fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* Writes bio's bytes to a new file (O_EXCL: never over an existing one). */
static int
create_file(const char *path, mode_t mode, BIO *bio, char *err, size_t errsz)
{
	char *p;
	long n = BIO_get_mem_data(bio, &p);
	int fd, rc;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "%s: cannot create: %s%s", path, strerror(-rc),
		         rc == -ENOENT ? " (create its directory first)" : "");
		return rc;
	}
	rc = fchmod(fd, mode) < 0 ? -errno : 0; /* the umask only narrows; be exact */
	if (rc == 0)
		rc = write_all(fd, p, (size_t)n);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errsz, "%s: cannot write: %s", path, strerror(-rc));
		unlink(path);
		return rc;
	}
	sync_dir(path);
	return 0;
}

/* Refuses a key file anyone but its owner could read, or that is not a
 * plain file; then reads it whole into a buffer the caller cleanses. */
static int
read_key_file(const char *path, char **buf, size_t *len, char *err, size_t errsz)
{
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, rc = 0;

	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		snprintf(err, errsz,
		         "CA key %s is a symbolic link; set certs.ca_key to the file itself", path);
		return -ELOOP;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errsz, "CA key %s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	/* checked on the open file: nothing can swap it in between */
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errsz, "CA key %s: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "CA key %s is not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & 077) {
		snprintf(err, errsz,
		         "CA key %s is readable or writable by group or others (mode %04o); "
		         "run chmod 600 %s",
		         path, (unsigned)(st.st_mode & 07777), path);
		rc = -EPERM;
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > KEY_FILE_MAX) {
		snprintf(err, errsz, "CA key %s: size %lld is not that of a PEM key", path,
		         (long long)st.st_size);
		rc = -EINVAL;
		goto out;
	}
	*buf = OPENSSL_secure_malloc((size_t)st.st_size);
	if (!*buf) {
		rc = -ENOMEM;
		snprintf(err, errsz, "CA key %s: out of memory", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		n = read(fd, *buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			snprintf(err, errsz, "CA key %s: cannot read: %s", path, strerror(-rc));
			OPENSSL_secure_clear_free(*buf, (size_t)st.st_size);
			*buf = NULL;
			goto out;
		}
		got += (size_t)n;
	}
	*len = got;
out:
	close(fd);
	return rc;
}

/* No passphrase prompt, ever: the daemon has no terminal. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf, (void)size, (void)rwflag, (void)u;
	return -1;
}

static int
load_key(const char *path, EVP_PKEY **key, char *err, size_t errsz)
{
	char *buf = NULL;
	size_t len = 0;
	BIO *bio;
	int rc = read_key_file(path, &buf, &len, err, errsz);

	if (rc < 0)
		return rc;
	bio = BIO_new_mem_buf(buf, (int)len);
	*key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	BIO_free(bio);
	OPENSSL_secure_clear_free(buf, len);
	if (!*key) {
		snprintf(err, errsz, "CA key %s: not an unencrypted PEM private key (%s)", path,
		         ossl_reason());
		return -EINVAL;
	}
	return 0;
}

static int
load_cert(const char *path, X509 **cert, char *err, size_t errsz)
{
	struct stat st;
	BIO *bio;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "CA certificate %s is not a regular file", path);
		return -EINVAL;
	}
	bio = BIO_new_file(path, "r");
	*cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	if (!*cert) {
		snprintf(err, errsz, "CA certificate %s: not a PEM certificate (%s)", path,
		         ossl_reason());
		return -EINVAL;
	}
	return 0;
}

/* ---- the CA ---- */

/* "sluice CA <host> <8 hex>": the random part tells two CAs of one host
 * apart in a trust store. */
static void
ca_common_name(char *cn, size_t n)
{
	char host[65] = "";
	uint8_t r[4] = {0};

	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		strcpy(host, "host");
	host[40] = 0;
	(void)RAND_bytes(r, sizeof(r));
	snprintf(cn, n, "sluice CA %s %02x%02x%02x%02x", host, r[0], r[1], r[2], r[3]);
}

static int
make_ca_cert(EVP_PKEY *key, X509 **out)
{
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX ctx;
	char cn[CERTS_CN_MAX + 1];

	if (!x)
		return -ENOMEM;
	ca_common_name(cn, sizeof(cn));
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || set_serial(x) < 0 ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"sluice",
	                                -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
	                                -1, 0) ||
	    !X509_set_issuer_name(x, name) || !X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), CA_DAYS, 0, NULL) || !X509_set_pubkey(x, key))
		goto fail;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(x, &ctx, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") < 0 ||
	    !X509_sign(x, key, sign_md(key)))
		goto fail;
	*out = x;
	return 0;
fail:
	X509_free(x);
	return -EIO;
}

static int
ca_create(const char *cert_path, const char *key_path, struct certs_ca *ca, char *err, size_t errsz)
{
	BIO *kb = NULL, *cb = NULL;
	int rc = -EIO;

	ca->key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!ca->key || make_ca_cert(ca->key, &ca->cert) < 0) {
		snprintf(err, errsz, "cannot make a CA: %s", ossl_reason());
		goto out;
	}
	kb = BIO_new(BIO_s_secmem());
	cb = BIO_new(BIO_s_mem());
	if (!kb || !cb || !PEM_write_bio_PrivateKey(kb, ca->key, NULL, NULL, 0, NULL, NULL) ||
	    !PEM_write_bio_X509(cb, ca->cert)) {
		snprintf(err, errsz, "cannot encode the new CA: %s", ossl_reason());
		goto out;
	}
	/* the key first: a crash between the two leaves a key without a
	 * certificate, which the next start refuses instead of replacing */
	rc = create_file(key_path, 0600, kb, err, errsz);
	if (rc == 0) {
		rc = create_file(cert_path, 0644, cb, err, errsz);
		if (rc < 0)
			unlink(key_path); /* ours, made a moment ago */
	}
out:
	BIO_free(kb); /* a secmem BIO clears itself */
	BIO_free(cb);
	if (rc < 0)
		certs_ca_fini(ca);
	return rc;
}

/* The loaded pair is one a strict verifier accepts leaves under. */
static int
ca_check(const char *cert_path, const char *key_path, const struct certs_ca *ca, char *err,
         size_t errsz)
{
	X509 *cert = ca->cert;

	if (X509_check_ca(cert) != 1 || !(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN)) {
		snprintf(err, errsz,
		         "CA certificate %s is not a CA certificate (basicConstraints CA:TRUE "
		         "and keyUsage keyCertSign needed)",
		         cert_path);
		return -EINVAL;
	}
	if (!X509_get0_subject_key_id(cert)) {
		snprintf(err, errsz,
		         "CA certificate %s has no subjectKeyIdentifier; strict verifiers "
		         "(Python 3.13) reject leaves under it",
		         cert_path);
		return -EINVAL;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
		snprintf(err, errsz,
		         "CA certificate %s has expired; remove it and %s to create a new CA "
		         "(and trust the new one in every guest)",
		         cert_path, key_path);
		return -EINVAL;
	}
	if (X509_check_private_key(cert, ca->key) != 1) {
		ERR_clear_error();
		snprintf(err, errsz, "CA certificate %s does not match the key %s", cert_path,
		         key_path);
		return -EINVAL;
	}
	return 0;
}

int
certs_ca_open(const char *cert_path, const char *key_path, struct certs_ca *ca, bool *created,
              char *err, size_t errsz)
{
	struct stat st;
	bool have_cert, have_key;
	int rc;

	memset(ca, 0, sizeof(*ca));
	if (created)
		*created = false;
	have_cert = lstat(cert_path, &st) == 0 || errno != ENOENT;
	have_key = lstat(key_path, &st) == 0 || errno != ENOENT;
	if (!have_cert && !have_key) {
		rc = ca_create(cert_path, key_path, ca, err, errsz);
		if (rc == 0 && created)
			*created = true;
		return rc;
	}
	if (!have_key || !have_cert) {
		snprintf(err, errsz,
		         "%s exists but %s does not; restore it, or remove %s to create a new CA",
		         have_cert ? cert_path : key_path, have_cert ? key_path : cert_path,
		         have_cert ? cert_path : key_path);
		return -ENOENT;
	}
	rc = load_key(key_path, &ca->key, err, errsz);
	if (rc == 0)
		rc = load_cert(cert_path, &ca->cert, err, errsz);
	if (rc == 0)
		rc = ca_check(cert_path, key_path, ca, err, errsz);
	if (rc < 0)
		certs_ca_fini(ca);
	return rc;
}

void
certs_ca_fini(struct certs_ca *ca)
{
	if (!ca)
		return;
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key); /* clears the private scalar */
	ca->cert = NULL;
	ca->key = NULL;
}

/* ---- leaves ---- */

EVP_PKEY *
certs_leaf_key_new(void)
{
	return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

static int
add_san(X509 *x, int kind, const char *host, const uint8_t *addr, bool critical)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_STRING *s = NULL;
	int rc = -ENOMEM;

	if (!gens || !g)
		goto out;
	if (kind == CERTS_HOST_DNS) {
		s = ASN1_IA5STRING_new();
		if (!s || !ASN1_STRING_set(s, host, (int)strlen(host)))
			goto out;
		GENERAL_NAME_set0_value(g, GEN_DNS, s);
	} else {
		s = ASN1_OCTET_STRING_new();
		if (!s || !ASN1_OCTET_STRING_set(s, addr, kind == CERTS_HOST_IP4 ? 4 : 16))
			goto out;
		GENERAL_NAME_set0_value(g, GEN_IPADD, s);
	}
	s = NULL;
	if (!sk_GENERAL_NAME_push(gens, g))
		goto out;
	g = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical, X509V3_ADD_DEFAULT) == 1)
		rc = 0;
out:
	ASN1_STRING_free(s);
	GENERAL_NAME_free(g);
	GENERAL_NAMES_free(gens);
	return rc;
}

/* AKI keyid: the CA's SKI, copied (not recomputed: the CA may be one the
 * operator made with another tool). */
static int
add_aki(X509 *x, X509 *ca)
{
	const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(ca);
	AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
	int rc = -ENOMEM;

	if (!ski) {
		rc = -EINVAL;
		goto out;
	}
	if (!akid || !(akid->keyid = ASN1_OCTET_STRING_dup(ski)))
		goto out;
	if (X509_add1_ext_i2d(x, NID_authority_key_identifier, akid, 0, X509V3_ADD_DEFAULT) == 1)
		rc = 0;
out:
	AUTHORITY_KEYID_free(akid);
	return rc;
}

int
certs_mint(const struct certs_ca *ca, EVP_PKEY *leaf_pub, const char *host, unsigned days,
           time_t now, X509 **out, char *err, size_t errsz)
{
	uint8_t addr[16];
	size_t hlen = host ? strnlen(host, CERTS_HOST_MAX + 1) : 0;
	int kind = certs_host_check(host, hlen, addr);
	X509 *x = NULL;
	X509_NAME *name;
	X509V3_CTX ctx;
	bool cn;

	*out = NULL;
	if (kind < 0) {
		snprintf(err, errsz, "not a host a certificate is minted for");
		return -EINVAL;
	}
	if (!ca || !ca->cert || !ca->key || !leaf_pub || days == 0 || days > 3650) {
		snprintf(err, errsz, "certs_mint: bad arguments");
		return -EINVAL;
	}
	x = X509_new();
	if (!x)
		goto oom;
	cn = hlen <= CERTS_CN_MAX;
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || set_serial(x) < 0 ||
	    (cn && !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                                       (const unsigned char *)host, (int)hlen, -1, 0)) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
	    !X509_time_adj_ex(X509_getm_notBefore(x), 0, -BACKDATE, &now) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, &now) ||
	    !X509_set_pubkey(x, leaf_pub))
		goto fail;
	/* never valid past the CA itself */
	if (ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(ca->cert)) > 0 &&
	    !X509_set1_notAfter(x, X509_get0_notAfter(ca->cert)))
		goto fail;
	X509V3_set_ctx(&ctx, ca->cert, x, NULL, NULL, 0);
	/* with no CN the SAN is the only name, so it is critical (RFC 5280
	 * 4.2.1.6) */
	if (add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(x, &ctx, NID_subject_key_identifier, "hash") < 0 || add_aki(x, ca->cert) < 0 ||
	    add_san(x, kind, host, addr, !cn) < 0)
		goto fail;
	if (!X509_sign(x, ca->key, sign_md(ca->key)))
		goto fail;
	*out = x;
	return 0;
fail:
	X509_free(x);
	snprintf(err, errsz, "cannot mint a leaf: %s", ossl_reason());
	return -EIO;
oom:
	snprintf(err, errsz, "cannot mint a leaf: out of memory");
	return -ENOMEM;
}

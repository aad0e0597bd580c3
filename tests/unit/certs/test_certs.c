/* test_certs.c: certs/ (the CA, leaves, the wire format, the cache, the
 * signer process). Bad inputs first: names a leaf must never carry,
 * malformed messages, CA files that must be refused; then the leaf's
 * fields under a strict verifier, serial uniqueness, the cache's bound and
 * single mint, and the signer end to end.
 *
 * Linked with -Wl,--wrap=open: the wrapper counts opens of the CA key's
 * path in this process, so a count of 0 after the signer created and
 * loaded the key shows only the child opened it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "../sl_test.h"

#include "certs.h"

/* ---- open() watch ---- */

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);

static char watch_path[512];
static int watch_opens;

int
__wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (watch_path[0] && strcmp(path, watch_path) == 0)
		watch_opens++;
	return __real_open(path, flags, mode);
}

/* ---- helpers ---- */

struct dir {
	char path[256], cert[300], key[300];
};

static void
dir_make(struct dir *d)
{
	snprintf(d->path, sizeof(d->path), "/tmp/test_certs.XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->cert, sizeof(d->cert), "%s/ca.pem", d->path);
	snprintf(d->key, sizeof(d->key), "%s/ca.key", d->path);
}

static void
dir_remove(struct dir *d)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
	assert_int_equal(system(cmd), 0);
}

static void
read_all(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t got;

	assert_non_null(f);
	got = fread(buf, 1, n - 1, f);
	buf[got] = 0;
	fclose(f);
}

/* The CA of a fresh temporary directory. */
static void
ca_fresh(struct dir *d, struct certs_ca *ca)
{
	char err[256];
	bool created;

	dir_make(d);
	assert_int_equal(certs_ca_open(d->cert, d->key, ca, &created, err, sizeof(err)), 0);
	assert_true(created);
}

/* X509_verify_cert() as a strict client sees the leaf: only the CA
 * trusted, X509_STRICT (Python 3.13's default), purpose sslserver, and the
 * name checked (host or ip). */
static int
verify_strict(X509 *ca, X509 *leaf, const char *host, const char *ip)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int ok;

	assert_true(st && ctx);
	assert_int_equal(X509_STORE_add_cert(st, ca), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	vp = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_flags(vp, X509_V_FLAG_X509_STRICT);
	assert_int_equal(X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER), 1);
	if (host)
		assert_int_equal(X509_VERIFY_PARAM_set1_host(vp, host, 0), 1);
	if (ip)
		assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(vp, ip), 1);
	ok = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

static bool
ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	return X509_EXTENSION_get_critical(X509_get_ext(x, i)) == 1;
}

/* ---- names ---- */

static void
test_host_bad(void **state)
{
	static const char *const bad[] = {
		"", "A.com", "a..b", ".a", "a.", "a.com.", "-a.com", "a-.com", "*.a.com",
		"a_b.com", "a b", "1.2.3", "10", "a.123", "01.2.3.4", "1.2.3.256", "[::1]",
		"::FFFF", "0:0:0:0:0:0:0:1", "fe80::1%eth0", "1.2.3.4:443", "a.com/x",
		"caf\xc3\xa9.fr",
	};
	char big[300];
	uint8_t addr[16];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (certs_host_check(bad[i], strlen(bad[i]), addr) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	}
	assert_int_equal(certs_host_check("a\0b", 3, addr), -EINVAL);
	assert_int_equal(certs_host_check(NULL, 0, addr), -EINVAL);
	/* a 64-byte label; a 254-byte name */
	memset(big, 'a', 64);
	assert_int_equal(certs_host_check(big, 64, addr), -EINVAL);
	for (size_t i = 0; i < 254; i++)
		big[i] = i % 2 ? '.' : 'a';
	assert_int_equal(certs_host_check(big, 254, addr), -EINVAL);
}

static void
test_host_good(void **state)
{
	char big[300];
	uint8_t addr[16];

	(void)state;
	assert_int_equal(certs_host_check("a.com", 5, addr), CERTS_HOST_DNS);
	assert_int_equal(certs_host_check("localhost", 9, addr), CERTS_HOST_DNS);
	assert_int_equal(certs_host_check("xn--bcher-kva.example", 21, addr), CERTS_HOST_DNS);
	assert_int_equal(certs_host_check("1a.2b", 5, addr), CERTS_HOST_DNS);
	assert_int_equal(certs_host_check("192.0.2.1", 9, addr), CERTS_HOST_IP4);
	assert_memory_equal(addr, "\xc0\x00\x02\x01", 4);
	assert_int_equal(certs_host_check("::1", 3, addr), CERTS_HOST_IP6);
	assert_int_equal(certs_host_check("2001:db8::1", 11, addr), CERTS_HOST_IP6);
	memset(big, 'a', 63);
	assert_int_equal(certs_host_check(big, 63, addr), CERTS_HOST_DNS);
	for (size_t i = 0; i < 253; i++)
		big[i] = i % 2 ? '.' : 'a';
	assert_int_equal(certs_host_check(big, 253, addr), CERTS_HOST_DNS);
}

/* ---- the wire format ---- */

static void
test_wire_bad(void **state)
{
	static const struct {
		const char *name;
		const char *bytes;
		size_t len;
	} bad[] = {
		{ "empty", "", 0 },
		{ "short", "\x02\x00\x00\x00", 4 },
		{ "unknown type", "\x07\x00\x00\x00\x01" "a.com", 10 },
		{ "mint no host", "\x02\x00\x00\x00\x01", 5 },
		{ "mint bad host", "\x02\x00\x00\x00\x01" "A.com", 10 },
		{ "mint trailing dot", "\x02\x00\x00\x00\x01" "a.com.", 11 },
		{ "mint nul", "\x02\x00\x00\x00\x01" "a\0com", 10 },
		{ "hello empty", "\x01\x00\x00\x00\x00", 5 },
		{ "leaf empty", "\x82\x00\x00\x00\x01", 5 },
		{ "error no code", "\x83\x00\x00\x00\x01", 5 },
		{ "error code 0", "\x83\x00\x00\x00\x01\x00" "x", 7 },
		{ "error code 9", "\x83\x00\x00\x00\x01\x09" "x", 7 },
		{ "error newline", "\x83\x00\x00\x00\x01\x01" "a\nb", 9 },
	};
	struct certs_msg m;
	uint8_t *big = calloc(1, CERTS_WIRE_MAX + 1), out[64];
	char err[128];

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *b = malloc(bad[i].len + 1); /* exact: ASan sees overreads */

		memcpy(b, bad[i].bytes, bad[i].len);
		err[0] = 0;
		if (certs_wire_decode(b, bad[i].len, &m, err, sizeof(err)) != -EINVAL)
			fail_msg("decoded \"%s\"", bad[i].name);
		assert_true(err[0] != 0);
		free(b);
	}
	big[0] = CERTS_MSG_LEAF;
	assert_int_equal(certs_wire_decode(big, CERTS_WIRE_MAX + 1, &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_wire_decode(big, CERTS_WIRE_MAX, &m, err, sizeof(err)), 0);
	/* encode refuses what decode would, and what does not fit */
	m = (struct certs_msg){ .type = CERTS_MSG_MINT, .payload = (const uint8_t *)"A", .len = 1 };
	assert_int_equal(certs_wire_encode(out, sizeof(out), &m), -EINVAL);
	m = (struct certs_msg){ .type = CERTS_MSG_LEAF, .payload = big, .len = 100 };
	assert_int_equal(certs_wire_encode(out, sizeof(out), &m), -EMSGSIZE);
	free(big);
}

static void
test_wire_roundtrip(void **state)
{
	static const struct certs_msg msgs[] = {
		{ .type = CERTS_MSG_HELLO, .id = 0, .payload = (const uint8_t *)"\x30\x01", .len = 2 },
		{ .type = CERTS_MSG_MINT, .id = 0xdeadbeef, .payload = (const uint8_t *)"a.b.com",
		  .len = 7 },
		{ .type = CERTS_MSG_LEAF, .id = 7, .payload = (const uint8_t *)"\x30\x00", .len = 2 },
		{ .type = CERTS_MSG_ERROR, .id = 8, .code = CERTS_ERR_MINT,
		  .payload = (const uint8_t *)"no", .len = 2 },
		{ .type = CERTS_MSG_ERROR, .id = 9, .code = CERTS_ERR_CA },
	};
	uint8_t buf[64];
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct certs_msg m;
		int n = certs_wire_encode(buf, sizeof(buf), &msgs[i]);

		assert_true(n >= CERTS_WIRE_HDR);
		/* every shorter cut of the header is refused */
		for (int k = 0; k < CERTS_WIRE_HDR; k++)
			assert_int_equal(certs_wire_decode(buf, (size_t)k, &m, err, sizeof(err)),
					 -EINVAL);
		assert_int_equal(certs_wire_decode(buf, (size_t)n, &m, err, sizeof(err)), 0);
		assert_int_equal(m.type, msgs[i].type);
		assert_int_equal(m.id, msgs[i].id);
		assert_int_equal(m.code, msgs[i].code);
		assert_int_equal(m.len, msgs[i].len);
		if (m.len)
			assert_memory_equal(m.payload, msgs[i].payload, m.len);
	}
}

/* ---- the CA ---- */

static void
test_ca_half_pair_refused(void **state)
{
	struct certs_ca ca;
	struct dir d;
	char err[512];
	struct stat st;

	(void)state;
	ca_fresh(&d, &ca);
	certs_ca_fini(&ca);
	/* certificate without key: refused, and no key is made */
	assert_int_equal(unlink(d.key), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, d.key));
	assert_null(ca.cert);
	assert_int_equal(stat(d.key, &st), -1);
	/* key without certificate */
	assert_int_equal(rename(d.cert, d.key), 0); /* any file will do */
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, d.cert));
	assert_int_equal(stat(d.cert, &st), -1);
	dir_remove(&d);
}

static void
test_ca_key_refused(void **state)
{
	struct certs_ca ca;
	struct dir d;
	char err[512], real[320];

	(void)state;
	ca_fresh(&d, &ca);
	certs_ca_fini(&ca);
	/* group-readable */
	assert_int_equal(chmod(d.key, 0640), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, d.key));
	assert_non_null(strstr(err, "chmod 600"));
	/* world-readable */
	assert_int_equal(chmod(d.key, 0604), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -EPERM);
	/* a symbolic link to a good key */
	assert_int_equal(chmod(d.key, 0600), 0);
	snprintf(real, sizeof(real), "%s/real.key", d.path);
	assert_int_equal(rename(d.key, real), 0);
	assert_int_equal(symlink(real, d.key), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, d.key));
	assert_non_null(strstr(err, "symbolic link"));
	/* a directory */
	assert_int_equal(unlink(d.key), 0);
	assert_int_equal(mkdir(d.key, 0700), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	assert_null(ca.key);
	/* the good key back in place: accepted (the refusals were the mode,
	 * the link and the type, not the key) */
	assert_int_equal(rmdir(d.key), 0);
	assert_int_equal(rename(real, d.key), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), 0);
	certs_ca_fini(&ca);
	dir_remove(&d);
}

static void
test_ca_mismatch_refused(void **state)
{
	struct certs_ca a, b;
	struct dir da, db;
	char err[512];

	(void)state;
	ca_fresh(&da, &a);
	ca_fresh(&db, &b);
	certs_ca_fini(&a);
	certs_ca_fini(&b);
	assert_int_equal(certs_ca_open(da.cert, db.key, &a, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "does not match"));
	assert_null(a.key);
	dir_remove(&da);
	dir_remove(&db);
}

static void
test_ca_not_a_ca_refused(void **state)
{
	struct certs_ca ca, tmp;
	struct dir d;
	char err[512];
	EVP_PKEY *k = certs_leaf_key_new();
	X509 *leaf;
	FILE *f;

	(void)state;
	ca_fresh(&d, &ca);
	/* a leaf with its own key as the "CA" pair */
	assert_int_equal(certs_mint(&ca, k, "a.com", 30, time(NULL), &leaf, err, sizeof(err)), 0);
	certs_ca_fini(&ca);
	f = fopen(d.cert, "w");
	assert_true(f && PEM_write_X509(f, leaf));
	fclose(f);
	f = fopen(d.key, "w");
	assert_true(f && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL));
	fclose(f);
	assert_int_equal(chmod(d.key, 0600), 0);
	assert_int_equal(certs_ca_open(d.cert, d.key, &tmp, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a CA certificate"));
	X509_free(leaf);
	EVP_PKEY_free(k);
	dir_remove(&d);
}

static void
test_ca_create_then_load(void **state)
{
	struct certs_ca ca, again;
	struct dir d;
	struct stat st;
	char err[512], key1[4096], key2[4096];
	bool created = true;
	X509_NAME *subj;
	char cn[128];

	(void)state;
	ca_fresh(&d, &ca);
	assert_int_equal(stat(d.key, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(S_ISREG(st.st_mode));
	read_all(d.key, key1, sizeof(key1));
	assert_non_null(strstr(key1, "BEGIN PRIVATE KEY"));
	/* the CA's own fields */
	assert_int_equal(X509_check_ca(ca.cert), 1);
	assert_true(ext_critical(ca.cert, NID_basic_constraints));
	assert_true(ext_critical(ca.cert, NID_key_usage));
	assert_int_equal(X509_get_key_usage(ca.cert), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_int_equal(X509_get_pathlen(ca.cert), 0);
	assert_non_null(X509_get0_subject_key_id(ca.cert));
	assert_true(EVP_PKEY_is_a(ca.key, "EC"));
	subj = X509_get_subject_name(ca.cert);
	assert_true(X509_NAME_get_text_by_NID(subj, NID_commonName, cn, sizeof(cn)) > 0);
	assert_memory_equal(cn, "sluice CA ", 10);
	assert_int_equal(X509_verify(ca.cert, ca.key), 1);
	/* loaded the second time, the files untouched */
	assert_int_equal(certs_ca_open(d.cert, d.key, &again, &created, err, sizeof(err)), 0);
	assert_false(created);
	assert_int_equal(X509_cmp(ca.cert, again.cert), 0);
	assert_int_equal(EVP_PKEY_eq(ca.key, again.key), 1);
	read_all(d.key, key2, sizeof(key2));
	assert_string_equal(key1, key2);
	certs_ca_fini(&ca);
	certs_ca_fini(&again);
	dir_remove(&d);
}

/* ---- leaves ---- */

static void
check_leaf(const struct certs_ca *ca, X509 *x, const char *host, int kind, time_t now)
{
	GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	const GENERAL_NAME *g;
	const ASN1_OCTET_STRING *aki_id;
	const BIGNUM *bn;
	BIGNUM *serial;
	char cn[128];
	int days, secs, cnlen;

	/* SAN: exactly the host */
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	g = sk_GENERAL_NAME_value(san, 0);
	if (kind == CERTS_HOST_DNS) {
		assert_int_equal(g->type, GEN_DNS);
		assert_int_equal(ASN1_STRING_length(g->d.dNSName), (int)strlen(host));
		assert_memory_equal(ASN1_STRING_get0_data(g->d.dNSName), host, strlen(host));
		assert_null(memchr(ASN1_STRING_get0_data(g->d.dNSName), '*', strlen(host)));
	} else {
		assert_int_equal(g->type, GEN_IPADD);
		assert_int_equal(ASN1_STRING_length(g->d.iPAddress), kind == CERTS_HOST_IP4 ? 4 : 16);
	}
	GENERAL_NAMES_free(san);
	/* CN: the host when it fits, else none and a critical SAN */
	cnlen = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	if (strlen(host) <= CERTS_CN_MAX) {
		assert_int_equal(cnlen, (int)strlen(host));
		assert_string_equal(cn, host);
		assert_false(ext_critical(x, NID_subject_alt_name));
	} else {
		assert_int_equal(cnlen, -1);
		assert_true(ext_critical(x, NID_subject_alt_name));
	}
	/* CA:FALSE, digitalSignature (both critical), serverAuth */
	assert_int_equal(X509_check_ca(x), 0);
	assert_true(ext_critical(x, NID_basic_constraints));
	assert_true(ext_critical(x, NID_key_usage));
	assert_int_equal(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	assert_int_equal(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
	assert_false(ext_critical(x, NID_ext_key_usage));
	/* SKI, and AKI = the CA's SKI */
	assert_non_null(X509_get0_subject_key_id(x));
	aki_id = X509_get0_authority_key_id(x);
	assert_non_null(aki_id);
	assert_int_equal(ASN1_OCTET_STRING_cmp(aki_id, X509_get0_subject_key_id(ca->cert)), 0);
	assert_int_equal(X509_check_issued(ca->cert, x), X509_V_OK);
	/* validity: now - 1 h .. now + 30 days */
	assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t){ now - 3600 + 1 }), -1);
	assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t){ now - 3600 - 1 }), 1);
	assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)), 1);
	assert_int_equal(days, 30);
	assert_int_equal(secs, 3600);
	/* a positive serial of at most 128 bits */
	serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	bn = serial;
	assert_false(BN_is_negative(bn));
	assert_false(BN_is_zero(bn));
	assert_true(BN_num_bits(bn) <= 127);
	BN_free(serial);
	/* signed by the CA */
	assert_int_equal(X509_verify(x, X509_get0_pubkey(ca->cert)), 1);
	assert_int_equal(X509_get_version(x), X509_VERSION_3);
}

static void
test_leaf_bad_args(void **state)
{
	struct certs_ca ca;
	struct dir d;
	EVP_PKEY *k = certs_leaf_key_new();
	X509 *x = (X509 *)1;
	char err[256];

	(void)state;
	ca_fresh(&d, &ca);
	assert_int_equal(certs_mint(&ca, k, "*.a.com", 30, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_null(x);
	assert_int_equal(certs_mint(&ca, k, "a.com.", 30, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_mint(&ca, k, NULL, 30, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_mint(&ca, k, "a.com", 0, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_mint(&ca, NULL, "a.com", 30, time(NULL), &x, err, sizeof(err)), -EINVAL);
	certs_ca_fini(&ca);
	EVP_PKEY_free(k);
	dir_remove(&d);
}

static void
test_leaf_fields(void **state)
{
	static const struct {
		const char *host, *vhost, *vip;
		int kind;
	} cases[] = {
		{ "www.example.com", "www.example.com", NULL, CERTS_HOST_DNS },
		{ "localhost", "localhost", NULL, CERTS_HOST_DNS },
		{ "192.0.2.1", NULL, "192.0.2.1", CERTS_HOST_IP4 },
		{ "2001:db8::1", NULL, "2001:db8::1", CERTS_HOST_IP6 },
		{ "a1234567890123456789012345678901234567890123456789012345678.example.com",
		  "a1234567890123456789012345678901234567890123456789012345678.example.com", NULL,
		  CERTS_HOST_DNS },
	};
	struct certs_ca ca;
	struct dir d;
	EVP_PKEY *k = certs_leaf_key_new();
	char err[256];
	time_t now = time(NULL);

	(void)state;
	ca_fresh(&d, &ca);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		X509 *x;

		assert_int_equal(certs_mint(&ca, k, cases[i].host, 30, now, &x, err, sizeof(err)), 0);
		check_leaf(&ca, x, cases[i].host, cases[i].kind, now);
		assert_int_equal(verify_strict(ca.cert, x, cases[i].vhost, cases[i].vip), X509_V_OK);
		/* the name check is live: another name fails on the same leaf */
		if (cases[i].vhost)
			assert_int_equal(verify_strict(ca.cert, x, "other.example.com", NULL),
					 X509_V_ERR_HOSTNAME_MISMATCH);
		else
			assert_int_equal(verify_strict(ca.cert, x, NULL, "192.0.2.2"),
					 X509_V_ERR_IP_ADDRESS_MISMATCH);
		/* a subdomain is not covered (no wildcard) */
		if (cases[i].kind == CERTS_HOST_DNS) {
			char sub[300];

			snprintf(sub, sizeof(sub), "x.%s", cases[i].host);
			assert_int_equal(verify_strict(ca.cert, x, sub, NULL),
					 X509_V_ERR_HOSTNAME_MISMATCH);
		}
		X509_free(x);
	}
	certs_ca_fini(&ca);
	EVP_PKEY_free(k);
	dir_remove(&d);
}

/* openssl verify -x509_strict -purpose sslserver, the command line tool */
static void
test_leaf_openssl_verify(void **state)
{
	struct certs_ca ca;
	struct dir d;
	EVP_PKEY *k = certs_leaf_key_new();
	char err[256], leaf[320], cmd[1200];
	X509 *x;
	FILE *f;

	(void)state;
	if (system("openssl version >/dev/null 2>&1") != 0) {
		sl_skip("no openssl command");
		return;
	}
	ca_fresh(&d, &ca);
	assert_int_equal(certs_mint(&ca, k, "api.example.org", 30, time(NULL), &x, err, sizeof(err)), 0);
	snprintf(leaf, sizeof(leaf), "%s/leaf.pem", d.path);
	f = fopen(leaf, "w");
	assert_true(f && PEM_write_X509(f, x));
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "openssl verify -x509_strict -purpose sslserver -verify_hostname api.example.org "
		 "-CAfile %s %s >/dev/null",
		 d.cert, leaf);
	assert_int_equal(system(cmd), 0);
	/* proves the command can fail: the wrong name */
	snprintf(cmd, sizeof(cmd),
		 "openssl verify -x509_strict -purpose sslserver -verify_hostname www.example.org "
		 "-CAfile %s %s >/dev/null 2>&1",
		 d.cert, leaf);
	assert_int_not_equal(system(cmd), 0);
	X509_free(x);
	certs_ca_fini(&ca);
	EVP_PKEY_free(k);
	dir_remove(&d);
}

static int
cmp16(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

static void
test_serial_unique(void **state)
{
	enum { N = 100000 };
	uint8_t(*s)[16] = calloc(N, 16);
	struct certs_ca ca;
	struct dir d;
	EVP_PKEY *k = certs_leaf_key_new();
	char err[256];
	time_t now = time(NULL);

	(void)state;
	assert_non_null(s);
	ca_fresh(&d, &ca);
	for (int i = 0; i < N; i++) {
		X509 *x;
		BIGNUM *bn;

		assert_int_equal(certs_mint(&ca, k, "a.example.com", 30, now, &x, err, sizeof(err)), 0);
		bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
		assert_true(bn && !BN_is_negative(bn) && !BN_is_zero(bn));
		assert_int_equal(BN_bn2binpad(bn, s[i], 16), 16);
		BN_free(bn);
		X509_free(x);
	}
	qsort(s, N, 16, cmp16);
	for (int i = 1; i < N; i++)
		assert_true(memcmp(s[i - 1], s[i], 16) != 0);
	free(s);
	certs_ca_fini(&ca);
	EVP_PKEY_free(k);
	dir_remove(&d);
}

/* ---- the cache ---- */

struct minter {
	struct certs_ca ca;
	struct dir d;
	EVP_PKEY *leaf;
	pthread_mutex_t lock;
	int calls;
	int delay_ms;
	bool fail;
};

static int
minter_mint(void *arg, const char *host, X509 **out, char *err, size_t errsz)
{
	struct minter *m = arg;

	pthread_mutex_lock(&m->lock);
	m->calls++;
	pthread_mutex_unlock(&m->lock);
	if (m->delay_ms)
		usleep((useconds_t)m->delay_ms * 1000);
	if (m->fail) {
		snprintf(err, errsz, "refused for the test");
		return -EIO;
	}
	return certs_mint(&m->ca, m->leaf, host, 30, time(NULL), out, err, errsz);
}

static void
minter_init(struct minter *m)
{
	memset(m, 0, sizeof(*m));
	ca_fresh(&m->d, &m->ca);
	m->leaf = certs_leaf_key_new();
	pthread_mutex_init(&m->lock, NULL);
}

static void
minter_fini(struct minter *m)
{
	certs_ca_fini(&m->ca);
	EVP_PKEY_free(m->leaf);
	pthread_mutex_destroy(&m->lock);
	dir_remove(&m->d);
}

static void
get_ok(struct certs_cache *c, const char *host)
{
	char err[256];
	X509 *x;

	assert_int_equal(certs_cache_get(c, host, &x, err, sizeof(err)), 0);
	assert_non_null(x);
	X509_free(x);
}

static void
test_cache_mint_failure(void **state)
{
	struct minter m;
	struct certs_cache *c;
	struct certs_cache_stats st;
	char err[256];
	X509 *x;

	(void)state;
	minter_init(&m);
	assert_null(certs_cache_new(0, minter_mint, &m, NULL));
	c = certs_cache_new(4, minter_mint, &m, NULL);
	m.fail = true;
	assert_int_equal(certs_cache_get(c, "a.com", &x, err, sizeof(err)), -EIO);
	assert_null(x);
	assert_string_equal(err, "refused for the test");
	/* a failure is not cached: the next call mints again */
	m.fail = false;
	get_ok(c, "a.com");
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, 2);
	assert_int_equal(st.mint_failures, 1);
	assert_int_equal(st.entries, 1);
	certs_cache_free(c);
	minter_fini(&m);
}

static void
test_cache_bound_lru(void **state)
{
	enum { N = 8, K = 5 };
	struct minter m;
	struct certs_cache *c;
	struct certs_cache_stats st;
	char name[N + K][32];

	(void)state;
	minter_init(&m);
	c = certs_cache_new(N, minter_mint, &m, NULL);
	assert_non_null(c);
	for (int i = 0; i < N + K; i++)
		snprintf(name[i], sizeof(name[i]), "h%d.example", i);
	for (int i = 0; i < N; i++)
		get_ok(c, name[i]);
	get_ok(c, name[0]); /* now the most recent: survives */
	for (int i = N; i < N + K; i++)
		get_ok(c, name[i]);
	certs_cache_stats(c, &st);
	assert_int_equal(st.entries, N);
	assert_int_equal(st.evictions, K);
	assert_int_equal(st.mints, N + K);
	assert_int_equal(st.misses, N + K);
	assert_int_equal(st.hits, 1);
	/* kept: h0 and h6..h12, no mint */
	get_ok(c, name[0]);
	for (int i = K + 1; i < N + K; i++)
		get_ok(c, name[i]);
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, N + K);
	assert_int_equal(st.hits, 1 + N);
	/* evicted: h1..h5, each minted again */
	for (int i = 1; i <= K; i++)
		get_ok(c, name[i]);
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, N + 2 * K);
	assert_int_equal(st.entries, N);
	assert_int_equal(m.calls, N + 2 * K);
	certs_cache_free(c);
	minter_fini(&m);
}

static time_t fake_now;

static time_t
fake_clock(void)
{
	return fake_now;
}

static void
test_cache_renewal(void **state)
{
	struct minter m;
	struct certs_cache *c;
	struct certs_cache_stats st;

	(void)state;
	minter_init(&m);
	fake_now = time(NULL);
	c = certs_cache_new(4, minter_mint, &m, fake_clock);
	get_ok(c, "a.com");
	fake_now += 14 * 86400; /* under half of 30 days */
	get_ok(c, "a.com");
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, 1);
	fake_now += 2 * 86400;
	get_ok(c, "a.com");
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, 2);
	assert_int_equal(st.renewals, 1);
	assert_int_equal(st.entries, 1);
	certs_cache_free(c);
	minter_fini(&m);
}

enum { THREADS = 16 };

struct racer {
	struct certs_cache *c;
	pthread_barrier_t *start;
	const char *host;
	X509 *got;
	int rc;
};

static void *
racer_run(void *arg)
{
	struct racer *r = arg;
	char err[256];

	pthread_barrier_wait(r->start);
	r->rc = certs_cache_get(r->c, r->host, &r->got, err, sizeof(err));
	return NULL;
}

static void
race(struct certs_cache *c, const char *host, struct racer *rs)
{
	pthread_barrier_t start;
	pthread_t t[THREADS];

	pthread_barrier_init(&start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++) {
		rs[i] = (struct racer){ .c = c, .start = &start, .host = host };
		assert_int_equal(pthread_create(&t[i], NULL, racer_run, &rs[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
}

static void
test_cache_single_mint_failure(void **state)
{
	struct minter m;
	struct certs_cache *c;
	struct certs_cache_stats st;
	struct racer rs[THREADS];

	(void)state;
	minter_init(&m);
	m.delay_ms = 200;
	m.fail = true;
	c = certs_cache_new(4, minter_mint, &m, NULL);
	race(c, "new.example", rs);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(rs[i].rc, -EIO);
		assert_null(rs[i].got);
	}
	certs_cache_stats(c, &st);
	assert_int_equal(m.calls, 1);
	assert_int_equal(st.mints, 1);
	assert_int_equal(st.joins, THREADS - 1);
	assert_int_equal(st.entries, 0);
	certs_cache_free(c);
	minter_fini(&m);
}

static void
test_cache_single_mint(void **state)
{
	struct minter m;
	struct certs_cache *c;
	struct certs_cache_stats st;
	struct racer rs[THREADS];

	(void)state;
	minter_init(&m);
	m.delay_ms = 200;
	c = certs_cache_new(4, minter_mint, &m, NULL);
	race(c, "new.example", rs);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(rs[i].rc, 0);
		assert_ptr_equal(rs[i].got, rs[0].got); /* one leaf, shared */
	}
	certs_cache_stats(c, &st);
	assert_int_equal(m.calls, 1);
	assert_int_equal(st.mints, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.joins + st.hits, THREADS - 1);
	assert_int_equal(st.entries, 1);
	/* the references outlive the cache */
	certs_cache_free(c);
	for (int i = 0; i < THREADS; i++)
		X509_free(rs[i].got);
	minter_fini(&m);
}

/* ---- the signer process ---- */

static void
test_signer_bad_ca(void **state)
{
	struct certs_ca ca;
	struct dir d;
	struct certs_signer *s = (struct certs_signer *)1;
	struct certs_signer_opts o = { .leaf_validity_days = 30 };
	char err[512];

	(void)state;
	ca_fresh(&d, &ca);
	certs_ca_fini(&ca);
	assert_int_equal(chmod(d.key, 0644), 0);
	o.ca_cert = d.cert;
	o.ca_key = d.key;
	/* the child's reason, naming the path, reaches the caller */
	assert_int_equal(certs_signer_start(&o, &s, err, sizeof(err)), -EIO);
	assert_null(s);
	assert_non_null(strstr(err, d.key));
	assert_non_null(strstr(err, "chmod 600"));
	o.leaf_validity_days = 398;
	assert_int_equal(certs_signer_start(&o, &s, err, sizeof(err)), -EINVAL);
	dir_remove(&d);
}

static void
test_signer_end_to_end(void **state)
{
	static const char *const hosts[] = { "a.example.com", "b.example.net", "192.0.2.7" };
	struct certs_signer_opts o = { .leaf_validity_days = 30 };
	struct certs_signer *s;
	struct certs_cache *c;
	struct certs_cache_stats st;
	struct certs_ca ca;
	struct dir d;
	struct stat stt;
	char err[512], pem[8192];
	X509 *x;
	pid_t pid;

	(void)state;
	dir_make(&d);
	o.ca_cert = d.cert;
	o.ca_key = d.key;
	snprintf(watch_path, sizeof(watch_path), "%s", d.key);
	watch_opens = 0;
	assert_int_equal(certs_signer_start(&o, &s, err, sizeof(err)), 0);
	pid = certs_signer_pid(s);
	assert_true(pid > 0 && pid != getpid());
	assert_int_equal(kill(pid, 0), 0);
	/* the child created the key; this process never opened it */
	assert_int_equal(stat(d.key, &stt), 0);
	assert_int_equal(stt.st_mode & 07777, 0600);
	assert_int_equal(watch_opens, 0);
	/* what the parent holds: the CA certificate (as on disk) and a leaf
	 * key that is not the CA's */
	read_all(d.cert, pem, sizeof(pem));
	assert_string_equal(certs_signer_ca_pem(s), pem);
	assert_int_not_equal(EVP_PKEY_eq(certs_signer_leaf_key(s),
					 X509_get0_pubkey(certs_signer_ca(s))),
			     1);
	/* bad names are refused before they reach the child */
	assert_int_equal(certs_signer_mint(s, "*.a.com", &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_signer_mint(s, "", &x, err, sizeof(err)), -EINVAL);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(certs_signer_mint(s, hosts[i], &x, err, sizeof(err)), 0);
		assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), certs_signer_leaf_key(s)), 1);
		assert_int_equal(verify_strict(certs_signer_ca(s), x, i < 2 ? hosts[i] : NULL,
					       i < 2 ? NULL : hosts[i]),
				 X509_V_OK);
		X509_free(x);
	}
	/* a cache in front of it */
	c = certs_cache_new(16, certs_signer_mint_cb, s, NULL);
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < 3; i++)
			get_ok(c, hosts[i]);
	certs_cache_stats(c, &st);
	assert_int_equal(st.mints, 3);
	assert_int_equal(st.hits, 3);
	certs_cache_free(c);
	/* loading the same CA in-process (as a control) is seen by the watch */
	assert_int_equal(certs_ca_open(d.cert, d.key, &ca, NULL, err, sizeof(err)), 0);
	assert_int_equal(watch_opens, 1);
	certs_ca_fini(&ca);
	watch_path[0] = 0;
	/* closing the socket ends the child by itself, with status 0 */
	assert_int_equal(certs_signer_stop(s), 0);
	assert_int_equal(kill(pid, 0), -1);
	dir_remove(&d);
}

/* The daemon dies without stopping the signer: the signer goes too. This
 * process is made a subreaper so that it inherits (and can reap) the
 * orphaned signer. */
static void
test_signer_dies_with_parent(void **state)
{
	struct certs_signer_opts o = { .leaf_validity_days = 30 };
	struct dir d;
	int p[2], status;
	pid_t mid, signer = 0;

	(void)state;
	dir_make(&d);
	o.ca_cert = d.cert;
	o.ca_key = d.key;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(p), 0);
	mid = fork();
	assert_true(mid >= 0);
	if (mid == 0) {
		struct certs_signer *s;
		char err[256];
		pid_t sp = -1;

		if (certs_signer_start(&o, &s, err, sizeof(err)) == 0)
			sp = certs_signer_pid(s);
		if (write(p[1], &sp, sizeof(sp)) != sizeof(sp))
			_exit(2);
		_exit(0); /* no stop */
	}
	close(p[1]);
	assert_int_equal(read(p[0], &signer, sizeof(signer)), sizeof(signer));
	close(p[0]);
	assert_true(signer > 0);
	assert_int_equal(waitpid(mid, &status, 0), mid);
	/* the orphan comes to us; it must end within a few seconds */
	for (int i = 0; i < 500; i++) {
		pid_t r = waitpid(signer, &status, WNOHANG);

		if (r == signer)
			break;
		assert_int_equal(r, 0);
		usleep(10000);
	}
	assert_int_equal(kill(signer, 0), -1);
	assert_true((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
		    (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
	dir_remove(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_bad),
		cmocka_unit_test(test_wire_bad),
		cmocka_unit_test(test_ca_half_pair_refused),
		cmocka_unit_test(test_ca_key_refused),
		cmocka_unit_test(test_ca_mismatch_refused),
		cmocka_unit_test(test_ca_not_a_ca_refused),
		cmocka_unit_test(test_leaf_bad_args),
		cmocka_unit_test(test_signer_bad_ca),
		cmocka_unit_test(test_cache_mint_failure),
		cmocka_unit_test(test_cache_single_mint_failure),
		cmocka_unit_test(test_host_good),
		cmocka_unit_test(test_wire_roundtrip),
		cmocka_unit_test(test_ca_create_then_load),
		cmocka_unit_test(test_leaf_fields),
		cmocka_unit_test(test_leaf_openssl_verify),
		cmocka_unit_test(test_serial_unique),
		cmocka_unit_test(test_cache_bound_lru),
		cmocka_unit_test(test_cache_renewal),
		cmocka_unit_test(test_cache_single_mint),
		cmocka_unit_test(test_signer_end_to_end),
		cmocka_unit_test(test_signer_dies_with_parent),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

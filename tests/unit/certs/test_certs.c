/* test_certs.c: certs/ in-process: the names a leaf is minted for, the
 * signer's wire format, the CA files, the leaf's fields under a strict
 * verifier and serial uniqueness. Bad inputs first: names a leaf must
 * never carry, malformed messages, CA files that must be refused. The
 * cache and the signer process: test_certs_signer.c. */
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

#include "certs_helpers.h"

/* ---- names ---- */

static void
test_host_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "A.com",
	    "a..b",
	    ".a",
	    "a.",
	    "a.com.",
	    "-a.com",
	    "a-.com",
	    "*.a.com",
	    "a_b.com",
	    "a b",
	    "1.2.3",
	    "10",
	    "a.123",
	    "01.2.3.4",
	    "1.2.3.256",
	    "[::1]",
	    "::FFFF",
	    "0:0:0:0:0:0:0:1",
	    "fe80::1%eth0",
	    "1.2.3.4:443",
	    "a.com/x",
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
	    {"empty", "", 0},
	    {"short", "\x02\x00\x00\x00", 4},
	    {"unknown type",
	     "\x07\x00\x00\x00\x01"
	     "a.com",
	     10},
	    {"mint no host", "\x02\x00\x00\x00\x01", 5},
	    {"mint bad host",
	     "\x02\x00\x00\x00\x01"
	     "A.com",
	     10},
	    {"mint trailing dot",
	     "\x02\x00\x00\x00\x01"
	     "a.com.",
	     11},
	    {"mint nul",
	     "\x02\x00\x00\x00\x01"
	     "a\0com",
	     10},
	    {"hello empty", "\x01\x00\x00\x00\x00", 5},
	    {"leaf empty", "\x82\x00\x00\x00\x01", 5},
	    {"error no code", "\x83\x00\x00\x00\x01", 5},
	    {"error code 0",
	     "\x83\x00\x00\x00\x01\x00"
	     "x",
	     7},
	    {"error code 9",
	     "\x83\x00\x00\x00\x01\x09"
	     "x",
	     7},
	    {"error newline",
	     "\x83\x00\x00\x00\x01\x01"
	     "a\nb",
	     9},
	};
	struct certs_msg m, zero;
	uint8_t *big = calloc(1, CERTS_WIRE_MAX + 1), out[64];
	char err[128];

	(void)state;
	assert_non_null(big);
	memset(&zero, 0, sizeof(zero));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *b = malloc(bad[i].len + 1); /* exact: ASan sees overreads */

		memcpy(b, bad[i].bytes, bad[i].len);
		err[0] = 0;
		memset(&m, 0xa5, sizeof(m));
		if (certs_wire_decode(b, bad[i].len, &m, err, sizeof(err)) != -EINVAL)
			fail_msg("decoded \"%s\"", bad[i].name);
		assert_true(err[0] != 0);
		/* A refusal leaves nothing half-decoded (an ERROR without
		 * its code kept type and id: fuzz_certs_wire found it). */
		if (memcmp(&m, &zero, sizeof(m)) != 0)
			fail_msg("\"%s\": refused but not all zero", bad[i].name);
		free(b);
	}
	big[0] = CERTS_MSG_LEAF;
	assert_int_equal(certs_wire_decode(big, CERTS_WIRE_MAX + 1, &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_wire_decode(big, CERTS_WIRE_MAX, &m, err, sizeof(err)), 0);
	/* encode refuses what decode would, and what does not fit */
	m = (struct certs_msg){.type = CERTS_MSG_MINT, .payload = (const uint8_t *)"A", .len = 1};
	assert_int_equal(certs_wire_encode(out, sizeof(out), &m), -EINVAL);
	m = (struct certs_msg){.type = CERTS_MSG_LEAF, .payload = big, .len = 100};
	assert_int_equal(certs_wire_encode(out, sizeof(out), &m), -EMSGSIZE);
	free(big);
}

static void
test_wire_roundtrip(void **state)
{
	static const struct certs_msg msgs[] = {
	    {.type = CERTS_MSG_HELLO, .id = 0, .payload = (const uint8_t *)"\x30\x01", .len = 2},
	    {.type = CERTS_MSG_MINT,
	     .id = 0xdeadbeef,
	     .payload = (const uint8_t *)"a.b.com",
	     .len = 7},
	    {.type = CERTS_MSG_LEAF, .id = 7, .payload = (const uint8_t *)"\x30\x00", .len = 2},
	    {.type = CERTS_MSG_ERROR,
	     .id = 8,
	     .code = CERTS_ERR_MINT,
	     .payload = (const uint8_t *)"no",
	     .len = 2},
	    {.type = CERTS_MSG_ERROR, .id = 9, .code = CERTS_ERR_CA},
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
		assert_int_equal(ASN1_STRING_length(g->d.iPAddress),
		                 kind == CERTS_HOST_IP4 ? 4 : 16);
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
	assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t){now - 3600 + 1}), -1);
	assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t){now - 3600 - 1}), 1);
	assert_int_equal(
	    ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)), 1);
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
	assert_int_equal(certs_mint(&ca, k, "*.a.com", 30, time(NULL), &x, err, sizeof(err)),
	                 -EINVAL);
	assert_null(x);
	assert_int_equal(certs_mint(&ca, k, "a.com.", 30, time(NULL), &x, err, sizeof(err)),
	                 -EINVAL);
	assert_int_equal(certs_mint(&ca, k, NULL, 30, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_mint(&ca, k, "a.com", 0, time(NULL), &x, err, sizeof(err)), -EINVAL);
	assert_int_equal(certs_mint(&ca, NULL, "a.com", 30, time(NULL), &x, err, sizeof(err)),
	                 -EINVAL);
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
	    {"www.example.com", "www.example.com", NULL, CERTS_HOST_DNS},
	    {"localhost", "localhost", NULL, CERTS_HOST_DNS},
	    {"192.0.2.1", NULL, "192.0.2.1", CERTS_HOST_IP4},
	    {"2001:db8::1", NULL, "2001:db8::1", CERTS_HOST_IP6},
	    {"a1234567890123456789012345678901234567890123456789012345678.example.com",
	     "a1234567890123456789012345678901234567890123456789012345678.example.com", NULL,
	     CERTS_HOST_DNS},
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

		assert_int_equal(certs_mint(&ca, k, cases[i].host, 30, now, &x, err, sizeof(err)),
		                 0);
		check_leaf(&ca, x, cases[i].host, cases[i].kind, now);
		assert_int_equal(verify_strict(ca.cert, x, cases[i].vhost, cases[i].vip),
		                 X509_V_OK);
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
	assert_int_equal(
	    certs_mint(&ca, k, "api.example.org", 30, time(NULL), &x, err, sizeof(err)), 0);
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

		assert_int_equal(certs_mint(&ca, k, "a.example.com", 30, now, &x, err, sizeof(err)),
		                 0);
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
	    cmocka_unit_test(test_host_good),
	    cmocka_unit_test(test_wire_roundtrip),
	    cmocka_unit_test(test_ca_create_then_load),
	    cmocka_unit_test(test_leaf_fields),
	    cmocka_unit_test(test_leaf_openssl_verify),
	    cmocka_unit_test(test_serial_unique),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

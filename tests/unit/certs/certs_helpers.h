/* certs_helpers.h: what test_certs.c and test_certs_signer.c share:
 * temporary CA directories and a strict verifier. */
#ifndef SL_CERTS_HELPERS_H
#define SL_CERTS_HELPERS_H

/* ---- helpers ---- */

struct dir {
	char path[256], cert[300], key[300];
};

static inline void
dir_make(struct dir *d)
{
	snprintf(d->path, sizeof(d->path), "/tmp/test_certs.XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->cert, sizeof(d->cert), "%s/ca.pem", d->path);
	snprintf(d->key, sizeof(d->key), "%s/ca.key", d->path);
}

static inline void
dir_remove(struct dir *d)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
	assert_int_equal(system(cmd), 0);
}

static inline void
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
static inline void
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
static inline int
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

static inline bool
ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	return X509_EXTENSION_get_critical(X509_get_ext(x, i)) == 1;
}

#endif

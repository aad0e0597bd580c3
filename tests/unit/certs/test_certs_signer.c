/* test_certs_signer.c: certs/ shared state and processes: the leaf
 * cache (bound, LRU order, renewal, one mint per name under concurrency,
 * failures) and the signer process end to end. Bad inputs first.
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

#include "certs_helpers.h"

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
		rs[i] = (struct racer){.c = c, .start = &start, .host = host};
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
	struct certs_signer_opts o = {.leaf_validity_days = 30};
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
	static const char *const hosts[] = {"a.example.com", "b.example.net", "192.0.2.7"};
	struct certs_signer_opts o = {.leaf_validity_days = 30};
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
	assert_int_not_equal(
	    EVP_PKEY_eq(certs_signer_leaf_key(s), X509_get0_pubkey(certs_signer_ca(s))), 1);
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
	struct certs_signer_opts o = {.leaf_validity_days = 30};
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
	    cmocka_unit_test(test_signer_bad_ca),
	    cmocka_unit_test(test_cache_mint_failure),
	    cmocka_unit_test(test_cache_single_mint_failure),
	    cmocka_unit_test(test_cache_bound_lru),
	    cmocka_unit_test(test_cache_renewal),
	    cmocka_unit_test(test_cache_single_mint),
	    cmocka_unit_test(test_signer_end_to_end),
	    cmocka_unit_test(test_signer_dies_with_parent),
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

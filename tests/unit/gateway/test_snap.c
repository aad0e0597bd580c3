/* test_snap.c: configuration snapshots and static-client identity
 * (gateway/snap.c). Bad inputs first. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "conf.h"
#include "snap.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static struct conf *
load(const char *yaml)
{
	struct conf_diag d;
	struct conf *c;

	conf_diag_init(&d);
	c = conf_load_mem("t.yaml", yaml, strlen(yaml), &d);
	if (!c) {
		for (size_t i = 0; i < d.n; i++)
			print_error("%s\n", d.lines[i]);
		conf_diag_fini(&d);
		fail_msg("config did not load");
	}
	conf_diag_fini(&d);
	return c;
}

static struct gw_snap *
snap_of(const char *yaml)
{
	char err[256] = "";
	struct conf *c = load(yaml);
	struct gw_snap *s = gw_snap_new(c, err, sizeof(err));

	if (!s)
		fail_msg("gw_snap_new: %s", err);
	conf_unref(c);  /* the snapshot holds its own reference */
	return s;
}

static const char users_yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: lan4, match: { source: 10.1.0.0/16 }, policy: p }\n"
	"    - { name: wide4, match: { source: 10.0.0.0/8 }, policy: q }\n"
	"    - { name: lan6, match: { source: \"fd00:1::/32\" }, policy: p }\n"
	"    - { name: alice, match: { user: alice, password: \"s3cret:pw\" }, policy: p }\n"
	"    - { name: bob, match: { user: bob, password: \"b\" }, policy: q }\n"
	"policies: [{ name: p }, { name: q }]\n";

static const char nousers_yaml[] =
	"gateway:\n"
	"  clients:\n"
	"    - { name: lan4, match: { source: 10.1.0.0/16 }, policy: p }\n"
	"policies: [{ name: p }]\n";

/* ---- gw_ident_basic_decode: refusals ------------------------------ */

struct decode_bad {
	const char *name;
	const char *in;
	size_t inlen;           /* 0: strlen */
	size_t bufsz;           /* 0: 64 */
};

static const struct decode_bad decode_bad[] = {
	{ "empty", "", 0, 0 },
	{ "scheme only, short", "Basi", 0, 0 },
	{ "no Basic", "Bearer dXNlcjpwYXNz", 0, 0 },
	{ "no space", "BasicdXNlcjpwYXNz", 0, 0 },
	{ "Basic as prefix of word", "Basicx dXNlcjpwYXNz", 0, 0 },
	{ "bad char !", "Basic dXNlc!pwYXNz", 0, 0 },
	{ "bad char -", "Basic dXNlcjpw-XNz", 0, 0 },
	{ "bad char _", "Basic dXNlcjpw_XNz", 0, 0 },
	{ "inner space", "Basic dXNl cjpwYXNz", 0, 0 },
	{ "tab", "Basic\tdXNlcjpwYXNz", 0, 0 },
	{ "padding in the middle", "Basic dQ==cjpwYXNz", 0, 0 },
	{ "padding then char", "Basic dXNlcjpwYXN=z", 0, 0 },
	{ "three pads", "Basic dXNlcjpwYQ===", 0, 0 },
	{ "four pads", "Basic dXNlcjpwYQ====", 0, 0 },
	{ "no colon", "Basic dXNlcnBhc3M=", 0, 0 },          /* userpass */
	{ "empty credentials", "Basic ", 0, 0 },
	{ "only pads", "Basic ==", 0, 0 },
	{ "NUL in user", "Basic dQBzOnA=", 0, 0 },          /* u\0s:p */
	{ "NUL in password", "Basic dTpwAHc=", 0, 0 },      /* u:p\0w */
	{ "NUL in the header value", "Basic dXNl\0cjpwYXNz", 19, 0 },
	{ "buffer too small", "Basic dXNlcjpwYXNz", 0, 9 },  /* 9 bytes + NUL */
	{ "buffer of 1", "Basic dXNlcjpwYXNz", 0, 1 },
};

static void
test_decode_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(decode_bad); i++) {
		const struct decode_bad *t = &decode_bad[i];
		size_t bufsz = t->bufsz ? t->bufsz : 64;
		/* Exactly bufsz bytes on the heap, so ASan sees an overrun. */
		char *buf = malloc(bufsz);
		const char *user = NULL, *pass = NULL;
		size_t ulen = 0, plen = 0;
		size_t inlen = t->inlen ? t->inlen : strlen(t->in);
		/* The value on the heap with nothing after it. */
		char *in = malloc(inlen ? inlen : 1);

		memcpy(in, t->in, inlen);
		if (gw_ident_basic_decode(in, inlen, buf, bufsz, &user, &ulen, &pass, &plen) !=
		    -EINVAL)
			fail_msg("case '%s' was accepted", t->name);
		free(in);
		free(buf);
	}
}

/* Too much padding: more '=' than the length needs (RFC 4648 3.3). */
static void
test_decode_surplus_padding(void **state)
{
	static const char *const in[] = {
		"Basic dXNlcjpwYXNz=",  /* no pad due, one given */
		"Basic dXNlcjpwYXNz==", /* no pad due, two given */
		"Basic dXNlcjpwYXM==",  /* one due, two given */
	};
	char buf[64];
	const char *user, *pass;
	size_t ulen, plen;

	(void)state;
	for (size_t i = 0; i < N(in); i++) {
		int rc = gw_ident_basic_decode(in[i], strlen(in[i]), buf, sizeof(buf), &user, &ulen,
					       &pass, &plen);
		if (rc != -EINVAL)
			fail_msg("surplus padding accepted: '%s'", in[i]);
	}
}

/* A zero-sized buffer: nothing is written. Two buffers: a zero-byte heap
 * block (any write is a heap-buffer-overflow under ASan) and a one-byte
 * block whose sentinel must survive (the plain build's check). */
static void
test_decode_bufsz_zero(void **state)
{
	char *none = malloc(0), *one = malloc(1);
	const char *user, *pass;
	size_t ulen, plen;

	(void)state;
	assert_non_null(none);
	assert_non_null(one);
	one[0] = 'x';
	assert_int_equal(gw_ident_basic_decode("Basic ", 6, none, 0, &user, &ulen, &pass, &plen),
			 -EINVAL);
	assert_int_equal(gw_ident_basic_decode("Basic dTpw", 10, none, 0, &user, &ulen, &pass,
					       &plen),
			 -EINVAL);
	assert_int_equal(gw_ident_basic_decode("Basic ", 6, one, 0, &user, &ulen, &pass, &plen),
			 -EINVAL);
	assert_int_equal(gw_ident_basic_decode("Basic dTpw", 10, one, 0, &user, &ulen, &pass, &plen),
			 -EINVAL);
	assert_int_equal(one[0], 'x');
	free(none);
	free(one);
}

/* ---- gw_ident_basic_decode: accepted ------------------------------ */

struct decode_good {
	const char *in;
	const char *user;
	const char *pass;
	size_t bufsz;
};

static const struct decode_good decode_good[] = {
	{ "Basic dXNlcjpwYXNz", "user", "pass", 64 },
	{ "basic dXNlcjpwYXNz", "user", "pass", 64 },
	{ "BASIC dXNlcjpwYXNz", "user", "pass", 64 },
	{ "Basic   dXNlcjpwYXNz", "user", "pass", 64 },   /* extra spaces */
	{ "Basic dXNlcjo=", "user", "", 64 },             /* user: */
	{ "Basic OnBhc3M=", "", "pass", 64 },             /* :pass */
	{ "Basic dTpwOnE6cg==", "u", "p:q:r", 64 },       /* colons in password */
	{ "Basic dTpwYQ==", "u", "pa", 64 },
	{ "Basic dTpwYXM=", "u", "pas", 64 },
	{ "Basic dTpwYQ", "u", "pa", 64 },                /* unpadded */
	{ "Basic dXNlcjpwYXNz", "user", "pass", 10 },     /* exactly fits */
	{ "Basic w6k6w6k=", "\xc3\xa9", "\xc3\xa9", 64 },  /* é:é */
};

static void
test_decode_good(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(decode_good); i++) {
		const struct decode_good *t = &decode_good[i];
		char *buf = malloc(t->bufsz);
		const char *user, *pass;
		size_t ulen, plen;
		int rc = gw_ident_basic_decode(t->in, strlen(t->in), buf, t->bufsz, &user, &ulen,
					       &pass, &plen);

		if (rc != 0)
			fail_msg("'%s' refused: %d", t->in, rc);
		assert_int_equal(ulen, strlen(t->user));
		assert_memory_equal(user, t->user, ulen);
		assert_int_equal(plen, strlen(t->pass));
		assert_memory_equal(pass, t->pass, plen);
		/* user and pass both lie inside buf */
		assert_true(user >= buf && user + ulen <= buf + t->bufsz);
		assert_true(pass >= buf && pass + plen <= buf + t->bufsz);
		free(buf);
	}
}

/* Every split of the header value: a value cut short is refused or gives
 * other credentials, never reads past vlen (ASan). */
static void
test_decode_every_length(void **state)
{
	static const char v[] = "Basic dTpwOnE6cg==";
	char buf[64];
	const char *user, *pass;
	size_t ulen, plen;

	(void)state;
	for (size_t n = 0; n <= sizeof(v) - 1; n++) {
		char *in = malloc(n ? n : 1);

		memcpy(in, v, n);
		(void)gw_ident_basic_decode(in, n, buf, sizeof(buf), &user, &ulen, &pass, &plen);
		free(in);
	}
}

/* ---- gw_ident_by_user ---------------------------------------------- */

static void
test_by_user(void **state)
{
	struct gw_snap *s = snap_of(users_yaml);

	(void)state;
	/* bad first */
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "wrong", 5), -1);
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "", 0), -1);
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "s3cret", 6), -1);       /* prefix */
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "s3cret:p", 8), -1);     /* prefix */
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "s3cret:pwx", 10), -1);  /* longer */
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "s3cret:pw\0", 10), -1); /* NUL */
	assert_int_equal(gw_ident_by_user(s, "S3CRET:PW", 0, "", 0), -1);
	assert_int_equal(gw_ident_by_user(s, "mallory", 7, "s3cret:pw", 9), -1);
	assert_int_equal(gw_ident_by_user(s, "alic", 4, "s3cret:pw", 9), -1);
	assert_int_equal(gw_ident_by_user(s, "alicex", 6, "s3cret:pw", 9), -1);
	assert_int_equal(gw_ident_by_user(s, "Alice", 5, "s3cret:pw", 9), -1);
	assert_int_equal(gw_ident_by_user(s, "", 0, "", 0), -1);
	assert_int_equal(gw_ident_by_user(s, "bob", 3, "x", 1), -1);
	assert_int_equal(gw_ident_by_user(s, "bob", 3, "", 0), -1);       /* empty vs 1 byte */
	assert_int_equal(gw_ident_by_user(s, "bob", 3, "bb", 2), -1);
	/* a source client's name is not a user */
	assert_int_equal(gw_ident_by_user(s, "lan4", 4, "", 0), -1);
	/* good */
	assert_int_equal(gw_ident_by_user(s, "alice", 5, "s3cret:pw", 9), 3);
	assert_int_equal(gw_ident_by_user(s, "bob", 3, "b", 1), 4);
	gw_snap_unref(s);
}

/* The Basic path end to end, as fwd.c uses it. */
static void
test_by_user_from_header(void **state)
{
	static const char hv[] = "Basic YWxpY2U6czNjcmV0OnB3"; /* alice:s3cret:pw */
	struct gw_snap *s = snap_of(users_yaml);
	char buf[64];
	const char *user, *pass;
	size_t ulen, plen;

	(void)state;
	assert_int_equal(gw_ident_basic_decode(hv, sizeof(hv) - 1, buf, sizeof(buf), &user, &ulen,
					       &pass, &plen), 0);
	assert_int_equal(gw_ident_by_user(s, user, ulen, pass, plen), 3);
	gw_snap_unref(s);
}

/* ---- gw_ident_by_source -------------------------------------------- */

static struct sockaddr_storage
sa_of(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
			fail_msg("bad test address %s", text);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		if (inet_pton(AF_INET, text, &s4->sin_addr) != 1)
			fail_msg("bad test address %s", text);
	}
	return ss;
}

static int
by_source(const struct gw_snap *s, const char *text)
{
	struct sockaddr_storage ss = sa_of(text);

	return gw_ident_by_source(s, (const struct sockaddr *)&ss);
}

static void
test_by_source(void **state)
{
	struct gw_snap *s = snap_of(users_yaml);
	struct sockaddr_storage un;

	(void)state;
	/* no match */
	assert_int_equal(by_source(s, "11.0.0.1"), -1);
	assert_int_equal(by_source(s, "192.168.1.1"), -1);
	assert_int_equal(by_source(s, "9.255.255.255"), -1);
	assert_int_equal(by_source(s, "fd00:2::1"), -1);
	assert_int_equal(by_source(s, "::1"), -1);
	assert_int_equal(by_source(s, "::ffff:11.0.0.1"), -1);
	/* a v4-compatible (not mapped) address is not a v4 client */
	assert_int_equal(by_source(s, "::10.1.0.1"), -1);
	/* the v4 address's bytes as the head of a v6 address do not match */
	assert_int_equal(by_source(s, "a01::1"), -1);
	memset(&un, 0, sizeof(un));
	un.ss_family = AF_UNIX;
	assert_int_equal(gw_ident_by_source(s, (const struct sockaddr *)&un), -1);
	/* first match wins: 10.1/16 is listed before 10/8 */
	assert_int_equal(by_source(s, "10.1.2.3"), 0);
	assert_int_equal(by_source(s, "10.1.255.255"), 0);
	assert_int_equal(by_source(s, "10.2.0.1"), 1);
	assert_int_equal(by_source(s, "10.0.0.0"), 1);
	/* IPv6 */
	assert_int_equal(by_source(s, "fd00:1::1"), 2);
	assert_int_equal(by_source(s, "fd00:1:ffff::1"), 2);
	/* v4-mapped matched by a v4 CIDR */
	assert_int_equal(by_source(s, "::ffff:10.1.0.7"), 0);
	assert_int_equal(by_source(s, "::ffff:10.9.0.7"), 1);
	gw_snap_unref(s);
}

static void
test_first_match_order(void **state)
{
	/* the wide range first: it wins even for the narrower one's addresses */
	struct gw_snap *s = snap_of("gateway:\n"
				    "  clients:\n"
				    "    - { name: wide, match: { source: 10.0.0.0/8 }, policy: p }\n"
				    "    - { name: lan, match: { source: 10.1.0.0/16 }, policy: p }\n"
				    "    - { name: all6, match: { source: \"::/0\" }, policy: p }\n"
				    "policies: [{ name: p }]\n");

	(void)state;
	assert_int_equal(by_source(s, "10.1.0.1"), 0);
	assert_int_equal(by_source(s, "2001:db8::1"), 2);
	/* ::/0 does not swallow v4-mapped clients: they are v4 */
	assert_int_equal(by_source(s, "::ffff:192.0.2.1"), -1);
	gw_snap_unref(s);
}

/* ---- gw_ident_has_users --------------------------------------------- */

static void
test_has_users(void **state)
{
	struct gw_snap *a = snap_of(users_yaml), *b = snap_of(nousers_yaml);
	struct gw_snap *e = snap_of("policies: [{ name: p }]\n");

	(void)state;
	assert_true(gw_ident_has_users(a));
	assert_false(gw_ident_has_users(b));
	assert_false(gw_ident_has_users(e));
	assert_int_equal(gw_ident_by_user(e, "u", 1, "p", 1), -1);
	assert_int_equal(by_source(e, "10.1.0.1"), -1);
	gw_snap_unref(a);
	gw_snap_unref(b);
	gw_snap_unref(e);
}

/* ---- snapshots ------------------------------------------------------ */

static void
test_snap_lifecycle(void **state)
{
	struct gw_snap *s = snap_of(users_yaml), *r, *cur;

	(void)state;
	assert_int_equal(s->refs, 1);
	assert_non_null(s->conf);
	assert_int_equal(s->conf->gateway.nclients, 5);
	for (size_t i = 0; i < s->conf->gateway.nclients; i++)
		assert_non_null(s->client_policy[i]);
	r = gw_snap_ref(s);
	assert_ptr_equal(r, s);
	assert_int_equal(s->refs, 2);
	gw_snap_unref(r);
	assert_int_equal(s->refs, 1);

	/* publish takes the reference; current hands out new ones */
	assert_null(gw_snap_current());
	gw_snap_publish(s);
	cur = gw_snap_current();
	assert_ptr_equal(cur, s);
	assert_int_equal(s->refs, 2);

	/* a new snapshot replaces it; the old lives on while referenced */
	gw_snap_publish(snap_of(nousers_yaml));
	assert_int_equal(cur->refs, 1);
	assert_int_equal(cur->conf->gateway.nclients, 5);
	assert_true(gw_ident_has_users(cur));
	gw_snap_unref(cur);

	cur = gw_snap_current();
	assert_false(gw_ident_has_users(cur));
	gw_snap_unref(cur);

	gw_snap_publish(NULL);
	assert_null(gw_snap_current());
	gw_snap_unref(NULL);
}

static void
test_snap_no_clients(void **state)
{
	struct gw_snap *s = snap_of("policies: [{ name: p }]\n");

	(void)state;
	assert_int_equal(s->conf->gateway.nclients, 0);
	assert_non_null(s->client_policy);
	gw_snap_unref(s);
}

/* Readers and a publisher on several threads (run under TSan/ASan). */
static struct gw_snap *race_snaps[2];

static void *
race_reader(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		struct gw_snap *s = gw_snap_current();

		if (s) {
			(void)gw_ident_has_users(s);
			gw_snap_unref(s);
		}
	}
	return NULL;
}

static void
test_snap_threads(void **state)
{
	pthread_t th[4];

	(void)state;
	race_snaps[0] = snap_of(users_yaml);
	race_snaps[1] = snap_of(nousers_yaml);
	gw_snap_publish(gw_snap_ref(race_snaps[0]));
	for (size_t i = 0; i < N(th); i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, NULL), 0);
	for (int i = 0; i < 20000; i++)
		gw_snap_publish(gw_snap_ref(race_snaps[i & 1]));
	for (size_t i = 0; i < N(th); i++)
		pthread_join(th[i], NULL);
	gw_snap_publish(NULL);
	assert_int_equal(race_snaps[0]->refs, 1);
	assert_int_equal(race_snaps[1]->refs, 1);
	gw_snap_unref(race_snaps[0]);
	gw_snap_unref(race_snaps[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_bad),
		cmocka_unit_test(test_decode_surplus_padding),
		cmocka_unit_test(test_decode_bufsz_zero),
		cmocka_unit_test(test_decode_good),
		cmocka_unit_test(test_decode_every_length),
		cmocka_unit_test(test_by_user),
		cmocka_unit_test(test_by_user_from_header),
		cmocka_unit_test(test_by_source),
		cmocka_unit_test(test_first_match_order),
		cmocka_unit_test(test_has_users),
		cmocka_unit_test(test_snap_lifecycle),
		cmocka_unit_test(test_snap_no_clients),
		cmocka_unit_test(test_snap_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* snap.c: configuration snapshots, and who a static client is. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "policy.h"
#include "snap.h"

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_snap *snap_cur;

struct gw_snap *
gw_snap_new(struct conf *c, char *err, size_t errsz)
{
	struct gw_snap *s = calloc(1, sizeof(*s));
	const struct conf_gateway *g = &c->gateway;

	if (!s)
		goto nomem;
	s->refs = 1;
	s->conf = conf_ref(c);
	s->client_policy = calloc(g->nclients ? g->nclients : 1, sizeof(*s->client_policy));
	if (!s->client_policy)
		goto nomem;
	for (size_t i = 0; i < g->nclients; i++) {
		const struct conf_policy *p = &c->policies[g->clients[i].policy_idx];

		s->client_policy[i] = gw_policy_new(p, NULL);
		if (!s->client_policy[i]) {
			snprintf(err, errsz, "policy '%s' of client '%s': %s", p->name,
				 g->clients[i].name, strerror(errno));
			gw_snap_unref(s);
			return NULL;
		}
	}
	return s;
nomem:
	snprintf(err, errsz, "out of memory");
	gw_snap_unref(s);
	return NULL;
}

struct gw_snap *
gw_snap_ref(struct gw_snap *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void
gw_snap_unref(struct gw_snap *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (s->client_policy && s->conf)
		for (size_t i = 0; i < s->conf->gateway.nclients; i++)
			gw_policy_unref(s->client_policy[i]);
	free(s->client_policy);
	conf_unref(s->conf);
	free(s);
}

struct gw_snap *
gw_snap_current(void)
{
	struct gw_snap *s;

	pthread_mutex_lock(&snap_lock);
	s = snap_cur ? gw_snap_ref(snap_cur) : NULL;
	pthread_mutex_unlock(&snap_lock);
	return s;
}

void
gw_snap_publish(struct gw_snap *s)
{
	struct gw_snap *old;

	pthread_mutex_lock(&snap_lock);
	old = snap_cur;
	snap_cur = s;
	pthread_mutex_unlock(&snap_lock);
	gw_snap_unref(old);
}

int
gw_ident_by_source(const struct gw_snap *s, const struct sockaddr *sa)
{
	const struct conf_gateway *g = &s->conf->gateway;
	const void *addr;
	int family = sa->sa_family;
	struct in_addr v4;

	if (family == AF_INET) {
		addr = &((const struct sockaddr_in *)sa)->sin_addr;
	} else if (family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		addr = a6;
		/* A v4 client on a dual-stack socket arrives as ::ffff:a.b.c.d. */
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			memcpy(&v4, &a6->s6_addr[12], 4);
			addr = &v4;
			family = AF_INET;
		}
	} else {
		return -1;
	}
	for (size_t i = 0; i < g->nclients; i++)
		if (g->clients[i].match == CONF_MATCH_SOURCE &&
		    conf_cidr_contains(&g->clients[i].source, family, addr))
			return (int)i;
	return -1;
}

bool
gw_ident_has_users(const struct gw_snap *s)
{
	for (size_t i = 0; i < s->conf->gateway.nclients; i++)
		if (s->conf->gateway.clients[i].match == CONF_MATCH_USER)
			return true;
	return false;
}

/* Constant time in the length of b (the secret), whatever a holds. */
static bool
secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char diff = (unsigned char)(alen != blen);

	for (size_t i = 0; i < blen; i++)
		diff |= (unsigned char)((i < alen ? a[i] : 0) ^ b[i]);
	return diff == 0;
}

int
gw_ident_by_user(const struct gw_snap *s, const char *user, size_t ulen,
		 const char *pass, size_t plen)
{
	const struct conf_gateway *g = &s->conf->gateway;

	for (size_t i = 0; i < g->nclients; i++) {
		const struct conf_client *cl = &g->clients[i];

		if (cl->match != CONF_MATCH_USER || strlen(cl->user) != ulen ||
		    memcmp(cl->user, user, ulen) != 0)
			continue;
		return secret_equal(pass, plen, cl->password.value, cl->password.len) ? (int)i : -1;
	}
	return -1;
}

static int
b64_value(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

int
gw_ident_basic_decode(const char *v, size_t vlen, char *buf, size_t bufsz,
		      const char **user, size_t *ulen, const char **pass, size_t *plen)
{
	size_t i = 0, o = 0, pad = 0, data = 0;
	uint32_t acc = 0;
	int bits = 0;
	char *colon;

	if (bufsz == 0 || vlen < 6 || strncasecmp(v, "Basic ", 6) != 0)
		return -EINVAL;
	for (i = 6; i < vlen && v[i] == ' '; i++)
		;
	for (; i < vlen; i++) {
		int x;

		if (v[i] == '=') {
			pad++;
			continue;
		}
		if (pad || (x = b64_value((unsigned char)v[i])) < 0)
			return -EINVAL;
		data++;
		acc = (acc << 6) | (uint32_t)x;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o + 1 >= bufsz)
				return -EINVAL;
			buf[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	/* Canonical base64 only: padding only to a multiple of four, and no
	 * stray bits in the last character. */
	if (pad > 2 || (pad && (data + pad) % 4 != 0) || (pad && bits != (pad == 1 ? 2 : 4)) ||
	    (acc & ((1u << bits) - 1)) != 0 || data % 4 == 1)
		return -EINVAL;
	buf[o] = '\0';
	if (memchr(buf, '\0', o) || !(colon = memchr(buf, ':', o)))
		return -EINVAL;
	*user = buf;
	*ulen = (size_t)(colon - buf);
	*pass = colon + 1;
	*plen = o - *ulen - 1;
	return 0;
}

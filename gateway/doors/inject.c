/* inject.c: credentials on the requests sluice sends upstream (inject.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "conf.h"
#include "conn.h"
#include "exchange.h"
#include "http1.h"
#include "inject.h"
#include "log.h"
#include "policy.h"
#include "reason.h"
#include "sigv4.h"

#define PREFIX     CONF_SENTINEL_PREFIX
#define PREFIX_LEN (sizeof(CONF_SENTINEL_PREFIX) - 1)
#define SENT_LEN   (CONF_SENTINEL_LEN - 1)
/* Sentinels one request head may hold: more is no real client. */
#define SENT_MAX 16

static bool
planned(const struct gw_inject *inj, const struct conf_credential *c)
{
	for (size_t i = 0; i < inj->n; i++)
		if (inj->c[i] == c)
			return true;
	return false;
}

struct plan {
	struct gw_inject *inj;
	bool tls;
	bool overflow;          /* more credentials than a request may carry */
};

static int
plan_one(const struct conf_credential *c, void *arg)
{
	struct plan *p = arg;
	struct gw_inject *inj = p->inj;

	if (!p->tls && !c->cleartext)
		return 0;
	if (inj->n == GW_INJECT_MAX) {
		p->overflow = true;
		return 1;       /* (stops the walk) */
	}
	inj->c[inj->n++] = c;
	/* What it adds to the head (the query's to the target too): the
	 * field and its value, Basic's base64 of user:password (a third
	 * more than the pair), the parameter and its value %XX-encoded. */
	switch (c->kind) {
	case CONF_CRED_HEADER:
		inj->extra += strlen(c->header) + 4 + c->value.len;
		break;
	case CONF_CRED_BASIC:
		inj->extra += sizeof("Authorization: Basic \r\n") +
			      4 * ((strlen(c->user) + 1 + c->value.len + 2) / 3);
		break;
	case CONF_CRED_QUERY:
		inj->extra += 2 + strlen(c->param) + 3 * c->value.len;
		break;
	case CONF_CRED_PLACEHOLDER:
		break;          /* (check_span() counts each sentinel) */
	case CONF_CRED_SIGV4:
		break;          /* (plan_sigv4() counts the value it signs) */
	}
	return 0;
}

/* Where the base64 of an "Authorization: Basic ..." value starts (the
 * scheme in any case, then spaces or tabs), or 0: not Basic. */
static size_t
basic_off(const char *v, size_t n)
{
	size_t i = 5;

	if (n <= 6 || strncasecmp(v, "Basic", 5) != 0 || (v[5] != ' ' && v[5] != '\t'))
		return 0;
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	return i < n ? i : 0;
}

/* Base64 of n bytes at in into out (4 * ((n + 2) / 3) + 1 bytes). */
static size_t
b64_encode(const unsigned char *in, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* Decodes base64 (padding at the end only, or left out as origins allow)
 * into out (3 * (n + 3) / 4 bytes); the decoded length, or -1. */
static int
b64_decode(const char *in0, size_t n0, unsigned char *out)
{
	char in[4 * 2048 + 4];
	size_t n = n0;
	int len, pad = 0;

	if (n0 == 0 || n0 % 4 == 1 || n0 > 4 * 2048)
		return -1;
	memcpy(in, in0, n0);
	while (n % 4)
		in[n++] = '=';
	for (size_t i = 0; i < n; i++) {
		char ch = in[i];

		if (ch == '=') {
			if (i < n - 2)
				return -1;
			pad++;
		} else if (pad || !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
				    (ch >= '0' && ch <= '9') || ch == '+' || ch == '/')) {
			return -1;
		}
	}
	len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
	explicit_bzero(in, n);
	return len < 0 ? -1 : len - pad;
}

/* ---- the plan: which credentials, and every sentinel checked ---- */

/* Is pat in the request-target t[0..n), as sent or with its %XX decoded? */
static bool
target_has(const char *t, size_t n, const char *pat, size_t pl)
{
	char dec[8192];
	size_t o = 0;

	if (memmem(t, n, pat, pl))
		return true;
	if (!memchr(t, '%', n))
		return false;   /* (most targets: nothing to decode) */
	for (size_t i = 0; i < n && o < sizeof(dec); i++) {
		unsigned hi, lo;

		if (t[i] == '%' && i + 2 < n && sscanf(t + i + 1, "%1x%1x", &hi, &lo) == 2) {
			dec[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			dec[o++] = t[i];
		}
	}
	return memmem(dec, o, pat, pl) != NULL;
}

/* A placeholder access key id's shape ("SLUICE" and 14 of 0-9A-F) in
 * p[0..n)? */
static bool
akid_like(const char *p, size_t n)
{
	const char *at = p, *end = p + n;

	while ((at = memmem(at, (size_t)(end - at), "SLUICE", 6)) != NULL) {
		size_t k = 0;

		while (k < 14 && at + 6 + k < end &&
		       ((at[6 + k] >= '0' && at[6 + k] <= '9') || (at[6 + k] >= 'A' && at[6 + k] <= 'F')))
			k++;
		if (k == 14)
			return true;
		at += 6;
	}
	return false;
}

/* A sentinel where it may not go: one log line (the sandbox, the host,
 * what was wrong; never a value), and the 403. */
static int
violation(struct gw_h1x *x, const char *what, const char *where)
{
	struct gw_conn *c = &x->base;

	gw_log_warnx("credential-violation: %s (%s) sent %s to %s:%u in %s: refused, nothing "
		     "forwarded", c->who.name[0] ? c->who.name : "a client", c->src, what,
		     c->req.host, c->req.port, where);
	gw_h1x_refuse(x, 403, GW_R_CREDENTIAL_SCOPE,
		      "a credential placeholder may not go to %s:%u this way", c->req.host,
		      c->req.port);
	return -1;
}

/* The sentinels in p[0..n): each must be one of this layer's planned
 * placeholders. 0, or -1 after refusing. */
static int
check_span(struct gw_h1x *x, const char *p, size_t n, const char *where, int *count)
{
	struct gw_conn *c = &x->base;
	const char *at = p, *end = p + n;

	while ((at = memmem(at, (size_t)(end - at), PREFIX, PREFIX_LEN)) != NULL) {
		const struct conf_credential *cr =
		    (size_t)(end - at) >= SENT_LEN ? gw_policy_sentinel(c->policy, at, SENT_LEN) : NULL;

		if (!cr)
			return violation(x, "a sentinel that is not its layer's", where);
		if (!planned(&x->inj, cr))
			return violation(x, "a sentinel out of its credential's scope", where);
		if (++*count > SENT_MAX)
			return violation(x, "too many sentinels", where);
		x->inj.extra += cr->value.len * 2;
		x->inj.sentinels = true;
		at += SENT_LEN;
	}
	return 0;
}

/* Signs x's request again (x->inj.sigv4, x->inj.authz_h) with payload
 * as its hashed payload (NULL: X-Amz-Content-SHA256's value). 0, or -1
 * after refusing. */
static int
sign(struct gw_h1x *x, const char *payload)
{
	const struct conf_credential *cr = x->inj.sigv4;
	const struct gw_h1_header *h = x->inj.authz_h;
	struct gw_sigv4_request rq;
	char err[256];
	enum gw_sigv4_result r;

	memset(&rq, 0, sizeof(rq));
	rq.method = x->reqh.method;
	rq.path = x->target.path;
	if (x->target.has_query)
		rq.query = x->target.query;
	rq.headers = x->reqh.headers;
	rq.nheaders = x->reqh.nheaders;
	if (payload)
		rq.payload_hash = (struct gw_h1_span){ payload, strlen(payload) };
	rq.s3 = x->inj.s3;
	x->inj.authz_len = 0;
	if (!(x->inj.authz = malloc(8192))) {
		gw_h1x_refuse(x, 503, GW_R_INTERNAL, "out of memory");
		return -1;
	}
	r = gw_sigv4_resign(h->value.p, h->value.len, &rq, cr->user, strlen(cr->user),
			    cr->value.value, cr->value.len, x->inj.authz, 8192, &x->inj.authz_len, err,
			    sizeof(err));
	if (r != GW_SIGV4_OK) {
		free(x->inj.authz);
		x->inj.authz = NULL;
		gw_h1x_refuse(x, r == GW_SIGV4_UNSUPPORTED ? 501 : 400,
			      r == GW_SIGV4_UNSUPPORTED ? GW_R_UNSUPPORTED : GW_R_BAD_REQUEST,
			      "cannot sign this request again (sigv4): %s", err);
		return -1;
	}
	x->inj.extra += x->inj.authz_len;
	return 0;
}

int
gw_inject_too_large(struct gw_h1x *x)
{
	gw_h1x_refuse(x, 413, GW_R_SIGV4_BODY_TOO_LARGE,
		      "a SigV4 request without X-Amz-Content-SHA256 is signed over its body, which "
		      "sluice reads first, up to %u bytes (and %u of chunk framing): send less, or "
		      "sign with X-Amz-Content-SHA256: UNSIGNED-PAYLOAD where the service takes it (S3)",
		      (unsigned)GW_INJECT_HOLD_MAX, (unsigned)GW_INJECT_HOLD_FRAMING);
	return -1;
}

/* hex(SHA-256) of the payload of the held body raw[0..n) (framed as
 * x->reqh says: its data, without chunk framing or trailers) into out.
 * 0, -EFBIG past GW_INJECT_HOLD_MAX payload bytes, -EPROTO (the framing
 * was checked as it came: not expected), or -ENOMEM. */
static int
body_hash(const struct gw_h1x *x, const char *raw, size_t n, char out[GW_SIGV4_SIG_LEN + 1])
{
	static const char hexd[] = "0123456789abcdef";
	struct gw_h1_body b;
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	size_t at = 0;
	uint64_t total = 0;
	int rc = -ENOMEM;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		goto out;
	gw_h1_body_init(&b, x->reqh.body, x->reqh.content_length, GW_H1_DECODE);
	for (;;) {
		struct gw_h1_span data = { NULL, 0 };
		size_t used = 0;
		enum gw_h1_result r = gw_h1_body_feed(&b, raw + at, n - at, &used, &data);

		if (r == GW_H1_ERROR) {
			rc = -EPROTO;
			goto out;
		}
		if ((total += data.len) > GW_INJECT_HOLD_MAX) {
			rc = -EFBIG;
			goto out;
		}
		if (data.len && !EVP_DigestUpdate(md, data.p, data.len))
			goto out;
		at += used;
		if (r == GW_H1_DONE)
			break;
		if (at == n || used == 0) {
			rc = -EPROTO;   /* cut short (the hold saw it end): not expected */
			goto out;
		}
	}
	if (!EVP_DigestFinal_ex(md, d, &dl) || dl != 32)
		goto out;
	for (unsigned i = 0; i < dl; i++) {
		out[2 * i] = hexd[d[i] >> 4];
		out[2 * i + 1] = hexd[d[i] & 15];
	}
	out[2 * dl] = '\0';
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	return rc;
}

/* SigV4 (AWS): an Authorization a guest signed with this layer's
 * placeholder access key id is signed again with the real keys, now, so
 * that a request sluice cannot sign is refused before anything is dialled.
 * A placeholder id (SLUICE...) that is not this request's to sign is a
 * sentinel out of place. 0, or -1 after refusing. */
static int
plan_sigv4(struct gw_h1x *x)
{
	const struct gw_h1_header *h = NULL;
	const struct conf_credential *cr = NULL;
	struct gw_sigv4_auth a;
	char akid[GW_POLICY_AKID_LEN], err[256];
	enum gw_sigv4_result r;

	free(x->inj.authz);
	x->inj.authz = NULL;
	x->inj.sigv4 = NULL;
	/* The one field that may carry a placeholder access key id is an
	 * Authorization this request's SigV4 credential signs again; the
	 * shape anywhere else (another field, a second Authorization, a
	 * presigned URL's X-Amz-Credential) is out of place. */
	if (target_has(x->reqh.target.p, x->reqh.target.len, "SLUICE", 6) &&
	    akid_like(x->reqh.target.p, x->reqh.target.len))
		return violation(x, "a placeholder access key id", "the request-target");
	for (size_t i = 0; i < x->reqh.nheaders; i++) {
		const struct gw_h1_header *f = &x->reqh.headers[i];

		if (!akid_like(f->value.p, f->value.len))
			continue;
		if (h || f->name.len != 13 || strncasecmp(f->name.p, "Authorization", 13) != 0)
			return violation(x, "a placeholder access key id", "a header");
		h = f;
	}
	if (!h)
		return 0;
	for (size_t i = 0; i < x->inj.n; i++)
		if (x->inj.c[i]->kind == CONF_CRED_SIGV4)
			cr = x->inj.c[i];
	r = gw_sigv4_parse(h->value.p, h->value.len, &a, err, sizeof(err));
	if (cr)
		gw_policy_sigv4_akid(cr, akid);
	if (r != GW_SIGV4_OK || !cr || strcmp(a.akid, akid) != 0)
		return violation(x, cr ? "a placeholder access key id that is not its layer's"
				       : "a placeholder access key id out of its credential's scope",
				 "the SigV4 Authorization");
	x->inj.s3 = strcmp(a.service, "s3") == 0;
	x->inj.sigv4 = cr;
	x->inj.authz_h = h;
	/* A client that sends no X-Amz-Content-SHA256 (every service but S3)
	 * signed hex(SHA-256(body)): sign now when there is no body, refuse
	 * one announced past the bound, and hold any other. */
	if (!gw_h1_header_find(&x->reqh, "X-Amz-Content-SHA256")) {
		char empty[GW_SIGV4_SIG_LEN + 1];

		if (x->reqh.body == GW_H1_BODY_NONE ||
		    (x->reqh.body == GW_H1_BODY_LENGTH && x->reqh.content_length == 0)) {
			if (gw_sigv4_payload_hash("", 0, empty) != GW_SIGV4_OK) {
				gw_h1x_refuse(x, 503, GW_R_INTERNAL, "libcrypto: SHA-256 failed");
				return -1;
			}
			return sign(x, empty);
		}
		if (x->reqh.body == GW_H1_BODY_LENGTH && x->reqh.content_length > GW_INJECT_HOLD_MAX)
			return gw_inject_too_large(x);
		x->inj.hold = true;
		return 0;
	}
	return sign(x, NULL);
}

int
gw_inject_sign_held(struct gw_h1x *x, const char *body, size_t n)
{
	char hash[GW_SIGV4_SIG_LEN + 1];
	int r = body_hash(x, body, n, hash);

	if (r == -EFBIG)
		return gw_inject_too_large(x);
	if (r < 0) {
		gw_h1x_refuse(x, 503, GW_R_INTERNAL, "libcrypto: SHA-256 failed");
		return -1;
	}
	x->inj.hold = false;
	return sign(x, hash);
}

int
gw_inject_plan(struct gw_h1x *x)
{
	struct gw_conn *c = &x->base;
	struct plan p = { .inj = &x->inj, .tls = x->up_tls || x->intercept };
	/* (any case: an origin may take "trace" as TRACE and echo the head) */
	bool trace = (x->reqh.method.len == 5 && (strncasecmp(x->reqh.method.p, "TRACE", 5) == 0 ||
						  strncasecmp(x->reqh.method.p, "TRACK", 5) == 0));
	int count = 0;

	free(x->inj.authz);
	memset(&x->inj, 0, sizeof(x->inj));
	c->req.ninject = 0;
	if (!x->is_connect && !trace)
		gw_policy_credentials(c->policy, c->req.host, c->req.port, plan_one, &p);
	/* Never a credential quietly left out. */
	if (p.overflow) {
		gw_h1x_refuse(x, 500, GW_R_INTERNAL,
			      "more than %d credentials match %s:%u: sluice adds at most that many "
			      "to one request", GW_INJECT_MAX, c->req.host, c->req.port);
		return -1;
	}
	/* A tenant's credential that did not survive a restart: the request
	 * would go without it (or with a sentinel left in) and fail at the
	 * origin for no reason the guest can see. Say so instead. */
	for (size_t i = 0; i < x->inj.n; i++) {
		if (x->inj.c[i]->lost) {
			gw_h1x_refuse(x, 503, GW_R_CREDENTIAL_LOST,
				      "credential %s was lost in a restart of sluice: its tenant must "
				      "supply it again (PUT /v1/sandboxes/{id}/credentials)",
				      x->inj.c[i]->name);
			return -1;
		}
	}
	/* Sentinels go in end-to-end header values only: never in the
	 * request-target (spelled with %XX or not), never in a hop-by-hop
	 * field (Upgrade is written as it came). */
	if (target_has(x->reqh.target.p, x->reqh.target.len, PREFIX, PREFIX_LEN))
		return violation(x, "a sentinel", "the request-target");
	for (size_t i = 0; i < x->reqh.nheaders; i++) {
		const struct gw_h1_header *h = &x->reqh.headers[i];
		unsigned char dec[3 * 2048 + 3];
		size_t bo = basic_off(h->value.p, h->value.len);
		int n;

		if (gw_h1_hop_by_hop(&x->reqh, h->name.p, h->name.len) &&
		    memmem(h->value.p, h->value.len, PREFIX, PREFIX_LEN))
			return violation(x, "a sentinel", "a hop-by-hop field");
		if (check_span(x, h->value.p, h->value.len, "a header", &count) < 0)
			return -1;
		if (bo && (n = b64_decode(h->value.p + bo, h->value.len - bo, dec)) > 0) {
			int r = check_span(x, (const char *)dec, (size_t)n, "a Basic pair", &count);

			explicit_bzero(dec, sizeof(dec));
			if (r < 0)
				return -1;
		}
	}
	/* Last: every sentinel out of place is found (and logged) before a
	 * request is refused for what SigV4 cannot sign. */
	return plan_sigv4(x);
}

/* ---- the rebuilt head ---- */

/* p[0..n) with this layer's sentinels replaced into a new buffer (*outn
 * bytes), or NULL. */
static char *
replaced(const struct gw_h1x *x, const char *p, size_t n, size_t *outn)
{
	const struct gw_conn *c = &x->base;
	size_t cap = n + 1, o = 0;
	const char *at = p, *end = p + n, *hit;
	char *out;

	for (size_t i = 0; i < x->inj.n; i++)
		cap += SENT_MAX * x->inj.c[i]->value.len;
	if (!(out = malloc(cap)))
		return NULL;
	while ((hit = memmem(at, (size_t)(end - at), PREFIX, PREFIX_LEN)) != NULL) {
		const struct conf_credential *cr =
		    (size_t)(end - hit) >= SENT_LEN ? gw_policy_sentinel(c->policy, hit, SENT_LEN) : NULL;

		memcpy(out + o, at, (size_t)(hit - at));
		o += (size_t)(hit - at);
		if (!cr) {      /* (the plan refused these) */
			memcpy(out + o, hit, PREFIX_LEN);
			o += PREFIX_LEN;
			at = hit + PREFIX_LEN;
			continue;
		}
		memcpy(out + o, cr->value.value, cr->value.len);
		o += cr->value.len;
		at = hit + SENT_LEN;
	}
	memcpy(out + o, at, (size_t)(end - at));
	o += (size_t)(end - at);
	*outn = o;
	return out;
}

static void
wipe_free(char *p, size_t n)
{
	if (p) {
		explicit_bzero(p, n);
		free(p);
	}
}

static bool
strips(const struct gw_h1x *x, const struct gw_h1_header *h)
{
	for (size_t i = 0; i < x->inj.n; i++) {
		const struct conf_credential *c = x->inj.c[i];
		const char *name = c->kind == CONF_CRED_HEADER  ? c->header
				   : c->kind == CONF_CRED_BASIC ? "Authorization"
								: NULL;

		if (name && h->name.len == strlen(name) && strncasecmp(h->name.p, name, h->name.len) == 0)
			return true;
	}
	return false;
}

/* Marks cr as used in this request's inject= list, once. (Every credential
 * noted is one of the plan's, GW_INJECT_MAX at most: the list has room.) */
static void
note(struct gw_h1x *x, const struct conf_credential *cr)
{
	struct gw_conn_req *r = &x->base.req;

	for (unsigned i = 0; i < r->ninject; i++)
		if (r->inject[i] == cr)
			return;
	if (r->ninject < GW_INJECT_MAX)
		r->inject[r->ninject++] = cr;
}

static void
note_sentinels(struct gw_h1x *x, const char *p, size_t n)
{
	const char *at = p, *end = p + n;

	while ((at = memmem(at, (size_t)(end - at), PREFIX, PREFIX_LEN)) != NULL) {
		const struct conf_credential *cr =
		    (size_t)(end - at) >= SENT_LEN ? gw_policy_sentinel(x->base.policy, at, SENT_LEN)
						   : NULL;

		if (cr)
			note(x, cr);
		at += PREFIX_LEN;
	}
}

void
gw_inject_header(struct gw_h1x *x, struct gw_h1_writer *wr, const struct gw_h1_header *h)
{
	unsigned char dec[3 * 2048 + 3];
	char *rep = NULL, *enc = NULL;
	size_t rn = 0, en = 0, bo = basic_off(h->value.p, h->value.len);
	int n;

	if (strips(x, h))
		return;
	if (x->inj.sigv4 && h == x->inj.authz_h) {
		/* (not signed: a held body never came; the placeholder-signed
		 * value is not sent instead) */
		if (!x->inj.authz)
			return;
		gw_h1_write_header(wr, h->name, (struct gw_h1_span){ x->inj.authz, x->inj.authz_len });
		note(x, x->inj.sigv4);
		free(x->inj.authz);
		x->inj.authz = NULL;
		return;
	}
	if (!x->inj.sentinels) {
		gw_h1_write_header(wr, h->name, h->value);
		return;
	}
	if (bo && (n = b64_decode(h->value.p + bo, h->value.len - bo, dec)) > 0 &&
	    memmem(dec, (size_t)n, PREFIX, PREFIX_LEN)) {
		note_sentinels(x, (const char *)dec, (size_t)n);
		rep = replaced(x, (const char *)dec, (size_t)n, &rn);
		explicit_bzero(dec, sizeof(dec));
		en = 6 + 4 * ((rn + 2) / 3) + 1;
		if (rep && (enc = malloc(en))) {
			memcpy(enc, "Basic ", 6);
			en = 6 + b64_encode((const unsigned char *)rep, rn, enc + 6);
			gw_h1_write_header(wr, h->name, (struct gw_h1_span){ enc, en });
		}
		wipe_free(rep, rn);
		wipe_free(enc, en);
		return;
	}
	explicit_bzero(dec, sizeof(dec));       /* a client's own pair, decoded */
	if (memmem(h->value.p, h->value.len, PREFIX, PREFIX_LEN)) {
		note_sentinels(x, h->value.p, h->value.len);
		rep = replaced(x, h->value.p, h->value.len, &rn);
		if (rep)
			gw_h1_write_header(wr, h->name, (struct gw_h1_span){ rep, rn });
		wipe_free(rep, rn);
		return;
	}
	gw_h1_write_header(wr, h->name, h->value);
}

void
gw_inject_finish(struct gw_h1x *x, struct gw_h1_writer *wr)
{
	for (size_t i = 0; i < x->inj.n; i++) {
		const struct conf_credential *c = x->inj.c[i];
		char *pair, *enc;
		size_t pl, el;

		switch (c->kind) {
		case CONF_CRED_HEADER:
			gw_h1_write_header(wr, (struct gw_h1_span){ c->header, strlen(c->header) },
					   (struct gw_h1_span){ c->value.value, c->value.len });
			note(x, c);
			break;
		case CONF_CRED_BASIC:
			pl = strlen(c->user) + 1 + c->value.len;
			pair = malloc(pl + 1);
			el = 6 + 4 * ((pl + 2) / 3) + 1;
			enc = malloc(el);
			if (pair && enc) {
				memcpy(pair, c->user, strlen(c->user));
				pair[strlen(c->user)] = ':';
				memcpy(pair + strlen(c->user) + 1, c->value.value, c->value.len);
				memcpy(enc, "Basic ", 6);
				el = 6 + b64_encode((const unsigned char *)pair, pl, enc + 6);
				gw_h1_write_header(wr, (struct gw_h1_span){ "Authorization", 13 },
						   (struct gw_h1_span){ enc, el });
				note(x, c);
			}
			wipe_free(pair, pl + 1);
			wipe_free(enc, el);
			break;
		case CONF_CRED_QUERY:
			note(x, c);
			break;
		case CONF_CRED_PLACEHOLDER:
		case CONF_CRED_SIGV4:
			break;
		}
	}
}

/* ---- the request-target ---- */

static bool
unreserved(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

static int
hexdig(char ch)
{
	return ch >= '0' && ch <= '9'	? ch - '0'
	       : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
	       : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
					: -1;
}

/* Is q[0..n), a parameter's name as the client spelled it, the name
 * `name` once its %XX are decoded? An origin decodes the name before it
 * looks it up, so "api%5Fkey" is api_key, and a client copy spelled so
 * must go too. (A '%' without two hex digits stands for itself.) */
static bool
name_is(const char *q, size_t n, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++, k++) {
		int hi, lo;
		char ch = q[i];

		if (ch == '%' && i + 2 < n && (hi = hexdig(q[i + 1])) >= 0 &&
		    (lo = hexdig(q[i + 2])) >= 0) {
			ch = (char)(hi << 4 | lo);
			i += 2;
		}
		if (name[k] == '\0' || name[k] != ch)
			return false;
	}
	return name[k] == '\0';
}

/* Is the parameter at q[0..n) ("name" or "name=value") one a planned
 * query credential sets? */
static bool
param_planned(const struct gw_h1x *x, const char *q, size_t n)
{
	const char *eq = memchr(q, '=', n);
	size_t nl = eq ? (size_t)(eq - q) : n;

	for (size_t i = 0; i < x->inj.n; i++) {
		const struct conf_credential *c = x->inj.c[i];

		if (c->kind == CONF_CRED_QUERY && name_is(q, nl, c->param))
			return true;
	}
	return false;
}

int
gw_inject_target(const struct gw_h1x *x, const char *t, size_t tl, char *out, size_t outsz)
{
	const char *qm = memchr(t, '?', tl), *end = t + tl;
	size_t o = 0;
	bool first = true, any = false;

	for (size_t i = 0; i < x->inj.n; i++)
		any |= x->inj.c[i]->kind == CONF_CRED_QUERY;
#define PUT(p, n)                                                                                  \
	do {                                                                                       \
		if (o + (n) >= outsz)                                                              \
			return -ENOSPC;                                                            \
		memcpy(out + o, (p), (n));                                                         \
		o += (n);                                                                          \
	} while (0)
	if (!any) {
		PUT(t, tl);
		out[o] = '\0';
		return (int)o;
	}
	PUT(t, qm ? (size_t)(qm - t) : tl);
	for (const char *q = qm ? qm + 1 : end; q < end;) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		size_t n = amp ? (size_t)(amp - q) : (size_t)(end - q);

		if (n && !param_planned(x, q, n)) {
			PUT(first ? "?" : "&", 1);
			PUT(q, n);
			first = false;
		}
		q += n + 1;
	}
	for (size_t i = 0; i < x->inj.n; i++) {
		const struct conf_credential *c = x->inj.c[i];

		if (c->kind != CONF_CRED_QUERY)
			continue;
		PUT(first ? "?" : "&", 1);
		PUT(c->param, strlen(c->param));
		PUT("=", 1);
		for (size_t k = 0; k < c->value.len; k++) {
			unsigned char ch = (unsigned char)c->value.value[k];
			char hx[4];

			if (unreserved(ch)) {
				PUT(&c->value.value[k], 1);
			} else {
				snprintf(hx, sizeof(hx), "%%%02X", ch);
				PUT(hx, 3);
			}
		}
		first = false;
	}
#undef PUT
	out[o] = '\0';
	return (int)o;
}

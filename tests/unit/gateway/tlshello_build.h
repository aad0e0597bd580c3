/* tlshello_build.h: building ClientHellos in a test, piece by piece
 * (shared by test_tlshello.c and test_tunnel.c). Include after <cmocka.h>:
 * put() asserts that the hello fits. Everything is static inline, so a
 * test that uses part of it is not warned about the rest. */
#ifndef SL_TLSHELLO_BUILD_H
#define SL_TLSHELLO_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tlshello.h"

#define HB_BUF (GW_TLSHELLO_BUF_MAX + 64)

/* A hand-built hello, piece by piece. */
struct hb {
	uint8_t b[HB_BUF];
	size_t n;
};

static inline void
put(struct hb *h, const void *p, size_t n)
{
	assert_true(h->n + n <= sizeof(h->b));
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static inline void
put8(struct hb *h, unsigned v)
{
	uint8_t b = (uint8_t)v;

	put(h, &b, 1);
}

static inline void
put16(struct hb *h, unsigned v)
{
	put8(h, v >> 8);
	put8(h, v);
}

static inline void
put24(struct hb *h, size_t v)
{
	put8(h, (unsigned)(v >> 16));
	put16(h, (unsigned)(v & 0xffff));
}

/* An extension of type t with n bytes of data. */
static inline void
ext(struct hb *e, unsigned t, const void *data, size_t n)
{
	put16(e, t);
	put16(e, (unsigned)n);
	put(e, data, n);
}

/* A server_name extension with one entry of type `type`. */
static inline void
ext_sni_typed(struct hb *e, unsigned type, const char *name, size_t n)
{
	put16(e, 0);
	put16(e, (unsigned)(n + 5));
	put16(e, (unsigned)(n + 3));
	put8(e, type);
	put16(e, (unsigned)n);
	put(e, name, n);
}

static inline void
ext_sni(struct hb *e, const char *name)
{
	ext_sni_typed(e, 0, name, strlen(name));
}

/* The options of a ClientHello body; zero values are good defaults. */
struct hello_opt {
	unsigned version;       /* 0: 0x0303 */
	int sid_len;            /* -1: 0 bytes; 0: 32 */
	int cs_len;             /* 0: 4 (two suites); -1: 0 */
	int cm_len;             /* 0: 1 (null); -1: 0 */
	bool no_exts;           /* stop after compression methods */
	int ext_len_delta;      /* added to the extensions length field */
	size_t hs_len_delta;    /* added to the handshake length field */
	size_t rec_len_delta;   /* added to the record length field */
};

/* A record holding one ClientHello with extensions e (may be NULL). */
static inline void
hello(struct hb *h, const struct hello_opt *opt, const struct hb *e)
{
	static const struct hello_opt none;
	struct hb body = { .n = 0 };
	size_t sid, cs, cm;
	uint8_t fill[64];

	if (!opt)
		opt = &none;
	memset(fill, 0x11, sizeof(fill));
	sid = opt->sid_len < 0 ? 0 : opt->sid_len ? (size_t)opt->sid_len : 32;
	cs = opt->cs_len < 0 ? 0 : opt->cs_len ? (size_t)opt->cs_len : 4;
	cm = opt->cm_len < 0 ? 0 : opt->cm_len ? (size_t)opt->cm_len : 1;
	put16(&body, opt->version ? opt->version : 0x0303);
	put(&body, fill, 32);
	put8(&body, (unsigned)sid);
	put(&body, fill, sid);
	put16(&body, (unsigned)cs);
	put(&body, "\x13\x01\x13\x02\x13\x03\xc0\x2b\xc0\x2f", cs);
	put8(&body, (unsigned)cm);
	memset(fill, 0, cm);
	put(&body, fill, cm);
	if (!opt->no_exts) {
		size_t en = e ? e->n : 0;

		put16(&body, (unsigned)((int)en + opt->ext_len_delta));
		if (e)
			put(&body, e->b, e->n);
	}
	h->n = 0;
	put8(h, 0x16);
	put16(h, 0x0301);
	put16(h, (unsigned)(4 + body.n + opt->rec_len_delta));
	put8(h, 1);
	put24(h, body.n + opt->hs_len_delta);
	put(h, body.b, body.n);
}

/* A good hello for `name`, with ALPN h2. */
static inline void
hello_for(struct hb *h, const char *name)
{
	struct hb e = { .n = 0 };

	ext_sni(&e, name);
	ext(&e, 16, "\x00\x03\x02h2", 5);
	hello(h, NULL, &e);
}

#endif

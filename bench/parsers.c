/* parsers.c: ns per parse of the gateway's pure parsers (gateway/proto/),
 * on fixed inputs, for comparing one build with another.
 *
 *   build/bench/bench_parsers [ITERATIONS] [ROUNDS]
 *
 * Each input is parsed ITERATIONS times (default 1,000,000) per round,
 * ROUNDS rounds (default 5); the line per input gives the median and the
 * minimum of the rounds' ns per parse. Every result is checked once before
 * timing, so a parser that regressed fails here rather than timing an error.
 *
 *   http1-head    a browser's proxied GET (absolute-form, 11 fields): the
 *                 head parser, then gw_h1_target_parse() on its target;
 *   http1-body    a chunked body of 4 chunks with an extension and a
 *                 trailer, decoded (DECODE mode) in one buffer;
 *   socks5        greeting, RFC 1929 user/password, CONNECT to a domain;
 *   tlshello      a Chrome-like ClientHello (GREASE, 16 suites, 18
 *                 extensions, an X25519 + ML-KEM key share: 1,757 bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http1.h"
#include "socks5.h"
#include "tlshello.h"

static volatile size_t sink;

static const char req_head[] =
	"GET http://www.example.com/assets/app.js?v=3 HTTP/1.1\r\n"
	"Host: www.example.com\r\n"
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
	"(KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36\r\n"
	"Accept: */*\r\n"
	"Accept-Encoding: gzip, deflate, br, zstd\r\n"
	"Accept-Language: en-GB,en;q=0.9\r\n"
	"Cache-Control: no-cache\r\n"
	"Pragma: no-cache\r\n"
	"Referer: http://www.example.com/index.html\r\n"
	"Cookie: session=8f3a0c1d9e2b4f67a1c3e5d7f9b2a4c6; theme=dark\r\n"
	"Proxy-Connection: keep-alive\r\n"
	"Connection: keep-alive\r\n"
	"\r\n";

static const char chunked_body[] =
	"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n"
	"10;name=value\r\n0123456789abcdef\r\n"
	"40\r\n"
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\r\n"
	"3\r\nxyz\r\n"
	"0\r\nExpires: never\r\n\r\n";

static const uint8_t socks_greeting[] = { 0x05, 0x02, 0x00, 0x02 };
static const uint8_t socks_auth[] = { 0x01, 0x05, 'a', 'l', 'i', 'c', 'e', 0x08,
				      's', '3', 'c', 'r', 'e', 't', '!', '!' };
static const uint8_t socks_request[] = { 0x05, 0x01, 0x00, 0x03, 15, 'w', 'w', 'w', '.', 'e', 'x',
					 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', 0x01, 0xbb };

/* ---- a Chrome-like ClientHello, built once ---------------------------- */

struct wr {
	uint8_t b[4096];
	size_t n;
};

static void
put(struct wr *w, const void *p, size_t n)
{
	if (w->n + n > sizeof(w->b))
		abort();
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void
put8(struct wr *w, unsigned v)
{
	uint8_t b = (uint8_t)v;

	put(w, &b, 1);
}

static void
put16(struct wr *w, unsigned v)
{
	put8(w, v >> 8);
	put8(w, v);
}

static void
fill(struct wr *w, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		put8(w, (seed + i * 131) & 0xff);
}

/* Patches a big-endian length of `width` bytes at `at` to cover at+width..n. */
static void
patch(struct wr *w, size_t at, size_t width)
{
	size_t v = w->n - at - width;

	for (size_t i = 0; i < width; i++)
		w->b[at + i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

static size_t
ext_begin(struct wr *w, unsigned type)
{
	size_t at;

	put16(w, type);
	at = w->n;
	put16(w, 0);
	return at;
}

static void
build_chrome_hello(struct wr *w)
{
	static const unsigned suites[] = { 0x4a4a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f,
					   0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014,
					   0x009c, 0x009d, 0x002f, 0x0035 };
	static const unsigned sigalgs[] = { 0x0403, 0x0804, 0x0401, 0x0503,
					    0x0805, 0x0501, 0x0806, 0x0601 };
	size_t rec, hs, ext, e, l;

	put8(w, 0x16);
	put16(w, 0x0301);
	rec = w->n;
	put16(w, 0);
	put8(w, 0x01);
	hs = w->n;
	put8(w, 0);
	put16(w, 0);
	put16(w, 0x0303);
	fill(w, 32, 7);                 /* random */
	put8(w, 32);
	fill(w, 32, 11);                /* session id */
	put16(w, sizeof(suites) / sizeof(suites[0]) * 2);
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
		put16(w, suites[i]);
	put8(w, 1);
	put8(w, 0);
	ext = w->n;
	put16(w, 0);

	e = ext_begin(w, 0x2a2a);       /* GREASE */
	patch(w, e, 2);
	e = ext_begin(w, 0x0000);       /* server_name */
	l = w->n;
	put16(w, 0);
	put8(w, 0);
	put16(w, 15);
	put(w, "www.example.com", 15);
	patch(w, l, 2);
	patch(w, e, 2);
	e = ext_begin(w, 0x0017);       /* extended_master_secret */
	patch(w, e, 2);
	e = ext_begin(w, 0xff01);       /* renegotiation_info */
	put8(w, 0);
	patch(w, e, 2);
	e = ext_begin(w, 0x000a);       /* supported_groups */
	put16(w, 10);
	put16(w, 0x2a2a);
	put16(w, 0x11ec);
	put16(w, 0x001d);
	put16(w, 0x0017);
	put16(w, 0x0018);
	patch(w, e, 2);
	e = ext_begin(w, 0x000b);       /* ec_point_formats */
	put8(w, 1);
	put8(w, 0);
	patch(w, e, 2);
	e = ext_begin(w, 0x0023);       /* session_ticket */
	patch(w, e, 2);
	e = ext_begin(w, 0x0010);       /* ALPN */
	l = w->n;
	put16(w, 0);
	put8(w, 2);
	put(w, "h2", 2);
	put8(w, 8);
	put(w, "http/1.1", 8);
	patch(w, l, 2);
	patch(w, e, 2);
	e = ext_begin(w, 0x0005);       /* status_request */
	put8(w, 1);
	put16(w, 0);
	put16(w, 0);
	patch(w, e, 2);
	e = ext_begin(w, 0x000d);       /* signature_algorithms */
	put16(w, sizeof(sigalgs) / sizeof(sigalgs[0]) * 2);
	for (size_t i = 0; i < sizeof(sigalgs) / sizeof(sigalgs[0]); i++)
		put16(w, sigalgs[i]);
	patch(w, e, 2);
	e = ext_begin(w, 0x0012);       /* signed_certificate_timestamp */
	patch(w, e, 2);
	e = ext_begin(w, 0x0033);       /* key_share: GREASE, X25519MLKEM768, X25519 */
	l = w->n;
	put16(w, 0);
	put16(w, 0x2a2a);
	put16(w, 1);
	put8(w, 0);
	put16(w, 0x11ec);
	put16(w, 1216);
	fill(w, 1216, 3);
	put16(w, 0x001d);
	put16(w, 32);
	fill(w, 32, 5);
	patch(w, l, 2);
	patch(w, e, 2);
	e = ext_begin(w, 0x002d);       /* psk_key_exchange_modes */
	put8(w, 1);
	put8(w, 1);
	patch(w, e, 2);
	e = ext_begin(w, 0x002b);       /* supported_versions */
	put8(w, 6);
	put16(w, 0x6a6a);
	put16(w, 0x0304);
	put16(w, 0x0303);
	patch(w, e, 2);
	e = ext_begin(w, 0x001b);       /* compress_certificate */
	put8(w, 2);
	put16(w, 2);
	patch(w, e, 2);
	e = ext_begin(w, 0x4469);       /* application_settings */
	put16(w, 3);
	put8(w, 2);
	put(w, "h2", 2);
	patch(w, e, 2);
	e = ext_begin(w, 0xfe0d);       /* encrypted_client_hello (GREASE) */
	fill(w, 218, 13);
	patch(w, e, 2);
	e = ext_begin(w, 0x3a3a);       /* GREASE, one byte */
	put8(w, 0);
	patch(w, e, 2);

	patch(w, ext, 2);
	patch(w, hs, 3);
	patch(w, rec, 2);
}

/* ---- the parses --------------------------------------------------------- */

static int
parse_head(void)
{
	struct gw_h1_parser p;
	struct gw_h1_head h;
	struct gw_h1_target t;
	struct gw_h1_error err;

	gw_h1_parser_init(&p, GW_H1_REQUEST, 16384);
	if (gw_h1_head_parse(&p, req_head, sizeof(req_head) - 1, &h) != GW_H1_DONE)
		return -1;
	if (gw_h1_target_parse(h.target.p, h.target.len, h.method_id, &t, &err) != 0)
		return -1;
	sink += h.nheaders + t.port + h.head_len;
	return 0;
}

static int
parse_body(void)
{
	struct gw_h1_body b;
	struct gw_h1_span d;
	const char *in = chunked_body;
	size_t len = sizeof(chunked_body) - 1, used, total = 0;
	enum gw_h1_result rc;

	gw_h1_body_init(&b, GW_H1_BODY_CHUNKED, 0, GW_H1_DECODE);
	do {
		rc = gw_h1_body_feed(&b, in, len, &used, &d);
		total += d.len;
		in += used;
		len -= used;
	} while (rc == GW_H1_AGAIN && len > 0);
	if (rc != GW_H1_DONE || total != 26 + 16 + 64 + 3)
		return -1;
	sink += total;
	return 0;
}

static int
parse_socks(void)
{
	struct gw_socks5_parser p;
	const struct gw_socks5_greeting *g;
	const struct gw_socks5_auth *a;
	const struct gw_socks5_request *q;
	size_t used;

	gw_socks5_parser_init(&p);
	if (gw_socks5_parse_greeting(&p, socks_greeting, sizeof(socks_greeting), &used, &g) !=
	    GW_SOCKS5_DONE)
		return -1;
	if (gw_socks5_parse_auth(&p, socks_auth, sizeof(socks_auth), &used, &a) !=
	    GW_SOCKS5_DONE)
		return -1;
	if (gw_socks5_parse_request(&p, socks_request, sizeof(socks_request), &used, &q) !=
	    GW_SOCKS5_DONE)
		return -1;
	sink += q->port + q->host_len + a->user_len;
	return 0;
}

static struct wr hello;

static int
parse_hello(void)
{
	struct gw_tlshello o;

	if (gw_tlshello_parse(hello.b, hello.n, 0, &o) != GW_TLSHELLO_OK || o.sni_len != 15 ||
	    !o.alpn_h2)
		return -1;
	sink += o.sni_len;
	return 0;
}

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int
run(const char *name, int (*fn)(void), long iters, int rounds)
{
	double ns[64];

	if (fn() != 0) {
		fprintf(stderr, "%s: the input does not parse as expected\n", name);
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns();

		for (long i = 0; i < iters; i++)
			(void)fn();
		ns[r] = (now_ns() - t0) / (double)iters;
	}
	qsort(ns, (size_t)rounds, sizeof(ns[0]), cmp_double);
	printf("%-12s %9.1f ns/parse median  %9.1f min   (%d x %ld)\n", name, ns[rounds / 2], ns[0],
	       rounds, iters);
	return 0;
}

int
main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	int failed = 0;

	if (iters < 1 || rounds < 1 || rounds > 64) {
		fprintf(stderr, "usage: %s [ITERATIONS] [ROUNDS (1..64)]\n", argv[0]);
		return 2;
	}
	build_chrome_hello(&hello);
	failed |= run("http1-head", parse_head, iters, rounds);
	failed |= run("http1-body", parse_body, iters, rounds);
	failed |= run("socks5", parse_socks, iters, rounds);
	failed |= run("tlshello", parse_hello, iters, rounds);
	return failed;
}

/* cli_util.c: the pure parts of the sluice client (see cli_util.h). Input
 * from the server and from files goes through the bounded reader below;
 * nothing here does I/O. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "cli_util.h"

static void
seterr(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (!errsz)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

/* Copies s[0..n) to dst (size dstsz), truncating, always terminated. */
static void
copy_trunc(char *dst, size_t dstsz, const char *s, size_t n)
{
	if (n >= dstsz)
		n = dstsz - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* ---- the bounded reader ------------------------------------------------ */

struct rd {
	const char *p;
	size_t len;
	size_t off;
};

static bool
rd_peek(const struct rd *r, unsigned char *c)
{
	if (r->off >= r->len)
		return false;
	*c = (unsigned char)r->p[r->off];
	return true;
}

static bool
rd_byte(struct rd *r, unsigned char *c)
{
	if (!rd_peek(r, c))
		return false;
	r->off++;
	return true;
}

/* Consumes the literal `lit` if the input starts with it. */
static bool
rd_lit(struct rd *r, const char *lit)
{
	size_t n = strlen(lit);

	if (r->len - r->off < n || memcmp(r->p + r->off, lit, n) != 0)
		return false;
	r->off += n;
	return true;
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A byte allowed in a field value or a reason phrase: HTAB, SP, VCHAR,
 * obs-text. */
static bool
is_vbyte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---- the API address ----------------------------------------------- */

int
cli_url_parse(const char *s, struct cli_url *u, char *err, size_t errsz)
{
	const char *a, *end, *host, *hend, *port = NULL;
	size_t hlen, plen = 0;

	memset(u, 0, sizeof(*u));
	if (strncmp(s, "unix:", 5) == 0) {
		const char *p = s + 5;
		size_t n = strlen(p);

		if (n == 0) {
			seterr(err, errsz, "'unix:' needs a socket path, as in unix:/run/sluice/api.sock");
			return -EINVAL;
		}
		if (n >= sizeof(u->path)) {
			seterr(err, errsz, "socket path longer than %zu bytes: %s",
			       sizeof(u->path) - 1, p);
			return -EINVAL;
		}
		u->kind = CLI_URL_UNIX;
		memcpy(u->path, p, n + 1);
		strcpy(u->hosthdr, "localhost");
		return 0;
	}
	if (strncasecmp(s, "https://", 8) == 0) {
		seterr(err, errsz, "'%s': https is not supported; the API speaks plain HTTP on "
			      "loopback: use http://HOST:PORT or unix:PATH", s);
		return -EINVAL;
	}
	if (strncasecmp(s, "http://", 7) != 0) {
		seterr(err, errsz, "'%s' is not an API address: use http://HOST:PORT or unix:PATH", s);
		return -EINVAL;
	}
	a = s + 7;
	end = a + strcspn(a, "/?#");
	if (*end && strcmp(end, "/") != 0) {
		seterr(err, errsz, "'%s': the API address takes no path, query or fragment: "
			      "use http://HOST:PORT", s);
		return -EINVAL;
	}
	if (memchr(a, '@', (size_t)(end - a))) {
		seterr(err, errsz, "'%s': no user info in the API address; the token comes from "
			      "$SLUICE_TOKEN", s);
		return -EINVAL;
	}
	if (*a == '[') {
		host = a + 1;
		hend = memchr(host, ']', (size_t)(end - host));
		if (!hend) {
			seterr(err, errsz, "'%s': unterminated '[' in the host", s);
			return -EINVAL;
		}
		for (const char *q = host; q < hend; q++) {
			if (hexval((unsigned char)*q) < 0 && *q != ':' && *q != '.') {
				seterr(err, errsz, "'%s': bad IPv6 address", s);
				return -EINVAL;
			}
		}
		if (hend + 1 < end && hend[1] != ':') {
			seterr(err, errsz, "'%s': junk after ']'", s);
			return -EINVAL;
		}
		if (hend + 1 < end)
			port = hend + 2;
	} else {
		host = a;
		hend = memchr(a, ':', (size_t)(end - a));
		if (hend)
			port = hend + 1;
		else
			hend = end;
		for (const char *q = host; q < hend; q++) {
			unsigned char c = (unsigned char)*q;

			if (!(c == '-' || c == '.' || is_digit(c) || (c >= 'a' && c <= 'z') ||
			      (c >= 'A' && c <= 'Z'))) {
				seterr(err, errsz, "'%s': bad character in the host", s);
				return -EINVAL;
			}
		}
	}
	hlen = (size_t)(hend - host);
	if (hlen == 0) {
		seterr(err, errsz, "'%s': no host", s);
		return -EINVAL;
	}
	if (hlen >= sizeof(u->host)) {
		seterr(err, errsz, "'%s': host too long", s);
		return -EINVAL;
	}
	if (port) {
		unsigned long v = 0;

		plen = (size_t)(end - port);
		if (plen == 0 || plen > 5) {
			seterr(err, errsz, "'%s': bad port", s);
			return -EINVAL;
		}
		for (size_t i = 0; i < plen; i++) {
			if (!is_digit((unsigned char)port[i])) {
				seterr(err, errsz, "'%s': bad port", s);
				return -EINVAL;
			}
			v = v * 10 + (unsigned long)(port[i] - '0');
		}
		if (v == 0 || v > 65535) {
			seterr(err, errsz, "'%s': port out of range (1-65535)", s);
			return -EINVAL;
		}
		snprintf(u->port, sizeof(u->port), "%lu", v);
	} else {
		strcpy(u->port, "80");
	}
	u->kind = CLI_URL_TCP;
	memcpy(u->host, host, hlen);
	u->host[hlen] = '\0';
	copy_trunc(u->hosthdr, sizeof(u->hosthdr), a, (size_t)(end - a));
	return 0;
}

/* ---- base64 --------------------------------------------------------- */

static int
b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
cli_b64_decode(const char *in, size_t len, unsigned char *out, size_t cap, size_t *outlen)
{
	size_t o = 0;

	*outlen = 0;
	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		const unsigned char *q = (const unsigned char *)in + i;
		bool last = i + 4 == len;
		int v[4];
		size_t pads = 0;

		for (int k = 0; k < 4; k++) {
			if (q[k] == '=' && last && k >= 2) {
				v[k] = 0;
				pads++;
				continue;
			}
			if (pads) /* data after '=' */
				return -EINVAL;
			v[k] = b64val(q[k]);
			if (v[k] < 0)
				return -EINVAL;
		}
		/* The bits a padded quantum does not use must be zero
		 * (RFC 4648 §3.5), so every byte string has one encoding. */
		if ((pads == 2 && (v[1] & 0x0f)) || (pads == 1 && (v[2] & 0x03)))
			return -EINVAL;
		if (cap - o < 3 - pads)
			return -ENOSPC;
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (pads < 2)
			out[o++] = (unsigned char)((v[1] & 0x0f) << 4 | v[2] >> 2);
		if (pads < 1)
			out[o++] = (unsigned char)((v[2] & 0x03) << 6 | v[3]);
	}
	*outlen = o;
	return 0;
}

/* ---- ids, paths, query strings ---------------------------------------- */

bool
cli_id_valid(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!(is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

bool
cli_remote_parse(const char *arg, size_t *idlen, const char **path)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon[1] != '/' || !cli_id_valid(arg, (size_t)(colon - arg)))
		return false;
	*idlen = (size_t)(colon - arg);
	*path = colon + 1;
	return true;
}

char *
cli_pct_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (is_digit(*p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    strchr("-._~/", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- the response head ------------------------------------------------ */

void
cli_head_parser_init(struct cli_head_parser *p, size_t max)
{
	p->scanned = 0;
	p->max = max;
}

static bool
name_is(const char *name, size_t n, const char *lit)
{
	return n == strlen(lit) && strncasecmp(name, lit, n) == 0;
}

/* One header field; updates *r and the seen flags. */
static int
head_field(struct cli_resp *r, const char *name, size_t nlen, const char *val, size_t vlen,
	   bool *seen_cl, bool *seen_te, char *err, size_t errsz)
{
	if (name_is(name, nlen, "Content-Length")) {
		uint64_t v = 0;

		if (*seen_cl) {
			seterr(err, errsz, "repeated Content-Length");
			return -EINVAL;
		}
		*seen_cl = true;
		if (vlen == 0) {
			seterr(err, errsz, "empty Content-Length");
			return -EINVAL;
		}
		for (size_t i = 0; i < vlen; i++) {
			unsigned char c = (unsigned char)val[i];

			if (!is_digit(c)) {
				seterr(err, errsz, "non-numeric Content-Length");
				return -EINVAL;
			}
			if (v > ((uint64_t)INT64_MAX - (c - '0')) / 10) {
				seterr(err, errsz, "Content-Length too large");
				return -EINVAL;
			}
			v = v * 10 + (c - '0');
		}
		r->length = v;
	} else if (name_is(name, nlen, "Transfer-Encoding")) {
		if (*seen_te) {
			seterr(err, errsz, "repeated Transfer-Encoding");
			return -EINVAL;
		}
		*seen_te = true;
		if (!name_is(val, vlen, "chunked")) {
			seterr(err, errsz, "Transfer-Encoding other than chunked");
			return -EINVAL;
		}
	} else if (name_is(name, nlen, "Content-Type")) {
		size_t n = 0;

		while (n < vlen && val[n] != ';')
			n++;
		while (n > 0 && (val[n - 1] == ' ' || val[n - 1] == '\t'))
			n--;
		copy_trunc(r->content_type, sizeof(r->content_type), val, n);
		for (char *p = r->content_type; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
	} else if (name_is(name, nlen, "Sluice-Reason")) {
		copy_trunc(r->sluice_reason, sizeof(r->sluice_reason), val, vlen);
	}
	return 0;
}

/* Parses the complete head buf[0..end). */
static int
head_lines(const char *buf, size_t end, struct cli_resp *r, char *err, size_t errsz)
{
	struct rd rd = { buf, end, 0 };
	bool seen_cl = false, seen_te = false;
	unsigned char c, d[3];
	size_t start;

	if (!rd_lit(&rd, "HTTP/1.") || !rd_byte(&rd, &c) || (c != '0' && c != '1')) {
		seterr(err, errsz, "not an HTTP/1.x status line");
		return -EINVAL;
	}
	r->minor = c - '0';
	if (!rd_byte(&rd, &c) || c != ' ' || !rd_byte(&rd, &d[0]) || !rd_byte(&rd, &d[1]) ||
	    !rd_byte(&rd, &d[2]) || !is_digit(d[0]) || !is_digit(d[1]) || !is_digit(d[2]) ||
	    d[0] < '1' || d[0] > '5' || !rd_byte(&rd, &c) || c != ' ') {
		seterr(err, errsz, "bad status line");
		return -EINVAL;
	}
	r->status = (d[0] - '0') * 100 + (d[1] - '0') * 10 + (d[2] - '0');
	start = rd.off;
	while (rd_peek(&rd, &c) && c != '\r') {
		if (!is_vbyte(c)) {
			seterr(err, errsz, "control byte in the reason phrase");
			return -EINVAL;
		}
		rd.off++;
	}
	copy_trunc(r->reason, sizeof(r->reason), buf + start, rd.off - start);
	if (!rd_lit(&rd, "\r\n")) {
		seterr(err, errsz, "bare CR in the status line");
		return -EINVAL;
	}
	for (;;) {
		size_t nstart, nlen, vstart, vend;

		if (!rd_peek(&rd, &c)) {
			seterr(err, errsz, "truncated head");
			return -EINVAL;
		}
		if (c == '\r') {
			if (!rd_lit(&rd, "\r\n") || rd.off != end) {
				seterr(err, errsz, "bare CR in the head");
				return -EINVAL;
			}
			break;
		}
		if (c == ' ' || c == '\t') {
			seterr(err, errsz, "obs-fold in the head");
			return -EINVAL;
		}
		nstart = rd.off;
		while (rd_peek(&rd, &c) && is_tchar(c))
			rd.off++;
		nlen = rd.off - nstart;
		if (nlen == 0 || !rd_byte(&rd, &c) || c != ':') {
			seterr(err, errsz, "bad header field name");
			return -EINVAL;
		}
		while (rd_peek(&rd, &c) && (c == ' ' || c == '\t'))
			rd.off++;
		vstart = rd.off;
		while (rd_peek(&rd, &c) && c != '\r') {
			if (!is_vbyte(c)) {
				seterr(err, errsz, "control byte in a header value");
				return -EINVAL;
			}
			rd.off++;
		}
		vend = rd.off;
		if (!rd_lit(&rd, "\r\n")) {
			seterr(err, errsz, "bare CR in the head");
			return -EINVAL;
		}
		while (vend > vstart && (buf[vend - 1] == ' ' || buf[vend - 1] == '\t'))
			vend--;
		if (head_field(r, buf + nstart, nlen, buf + vstart, vend - vstart, &seen_cl,
			       &seen_te, err, errsz) < 0)
			return -EINVAL;
	}
	if (seen_cl && seen_te) {
		seterr(err, errsz, "both Content-Length and Transfer-Encoding");
		return -EINVAL;
	}
	if (seen_te && r->minor == 0) {
		seterr(err, errsz, "Transfer-Encoding in HTTP/1.0");
		return -EINVAL;
	}
	if (r->status < 200 || r->status == 204 || r->status == 304)
		r->framing = CLI_BODY_NONE;
	else if (seen_te)
		r->framing = CLI_BODY_CHUNKED;
	else if (seen_cl)
		r->framing = CLI_BODY_LENGTH;
	else
		r->framing = CLI_BODY_CLOSE;
	return 0;
}

enum cli_rc
cli_head_parse(struct cli_head_parser *p, const char *buf, size_t len, struct cli_resp *r,
	       char *err, size_t errsz)
{
	size_t i, end = 0;

	for (i = p->scanned; i < len; i++) {
		if (i >= p->max) {
			seterr(err, errsz, "response head over %zu bytes", p->max);
			return CLI_ERROR;
		}
		if (buf[i] != '\n')
			continue;
		if (i == 0 || buf[i - 1] != '\r') {
			seterr(err, errsz, "bare LF in the response head");
			return CLI_ERROR;
		}
		if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
			end = i + 1;
			break;
		}
	}
	p->scanned = i;
	if (!end)
		return CLI_AGAIN;
	memset(r, 0, sizeof(*r));
	if (head_lines(buf, end, r, err, errsz) < 0)
		return CLI_ERROR;
	r->head_len = end;
	return CLI_DONE;
}

/* ---- the chunked body ------------------------------------------------- */

void
cli_chunked_init(struct cli_chunked *c)
{
	memset(c, 0, sizeof(*c));
}

static enum cli_rc
ch_fail(struct cli_chunked *c, const char *why, size_t i, size_t *used)
{
	c->state = CLI_CH_ERROR;
	c->err = why;
	*used = i;
	return CLI_ERROR;
}

enum cli_rc
cli_chunked_step(struct cli_chunked *c, const char *in, size_t len, size_t *used,
		 const char **data, size_t *dlen)
{
	size_t i = 0;

	*data = NULL;
	*dlen = 0;
	*used = 0;
	if (c->state == CLI_CH_DONE)
		return CLI_DONE;
	if (c->state == CLI_CH_ERROR)
		return CLI_ERROR;
	while (i < len) {
		unsigned char ch = (unsigned char)in[i];

		switch (c->state) {
		case CLI_CH_SIZE:
		case CLI_CH_EXT:
			if (++c->line > CLI_MAX_CHUNK_LINE)
				return ch_fail(c, "chunk size line too long", i, used);
			if (ch == '\r') {
				if (c->digits == 0)
					return ch_fail(c, "bad chunk size", i, used);
				c->state = CLI_CH_SIZE_LF;
			} else if (ch == '\n') {
				return ch_fail(c, "bare LF in a chunk size line", i, used);
			} else if (c->state == CLI_CH_EXT) {
				if (!is_vbyte(ch))
					return ch_fail(c, "control byte in a chunk extension", i,
						       used);
			} else if (hexval(ch) >= 0) {
				if (c->left > (uint64_t)INT64_MAX >> 4)
					return ch_fail(c, "chunk size too large", i, used);
				c->left = c->left << 4 | (uint64_t)hexval(ch);
				c->digits++;
			} else if (ch == ';' && c->digits) {
				c->state = CLI_CH_EXT;
			} else {
				return ch_fail(c, "bad chunk size", i, used);
			}
			i++;
			break;
		case CLI_CH_SIZE_LF:
			if (ch != '\n')
				return ch_fail(c, "bare CR in a chunk size line", i, used);
			i++;
			if (c->left == 0) {
				c->state = CLI_CH_TRAILER;
				c->tline = 0;
				c->tcolon = false;
			} else {
				c->state = CLI_CH_DATA;
			}
			break;
		case CLI_CH_DATA: {
			size_t n = len - i;

			if ((uint64_t)n > c->left)
				n = (size_t)c->left;
			*data = in + i;
			*dlen = n;
			c->left -= n;
			if (c->left == 0)
				c->state = CLI_CH_DATA_CR;
			*used = i + n;
			return CLI_AGAIN;
		}
		case CLI_CH_DATA_CR:
			if (ch != '\r')
				return ch_fail(c, "chunk data longer than its size", i, used);
			c->state = CLI_CH_DATA_LF;
			i++;
			break;
		case CLI_CH_DATA_LF:
			if (ch != '\n')
				return ch_fail(c, "bare CR after chunk data", i, used);
			c->state = CLI_CH_SIZE;
			c->left = 0;
			c->digits = 0;
			c->line = 0;
			i++;
			break;
		case CLI_CH_TRAILER:
			if (++c->trailer_bytes > CLI_MAX_TRAILERS)
				return ch_fail(c, "trailers too large", i, used);
			if (ch == '\r') {
				if (c->tline == 0)
					c->state = CLI_CH_FINAL_LF;
				else if (!c->tcolon)
					return ch_fail(c, "bad trailer field", i, used);
				else
					c->state = CLI_CH_TRAILER_LF;
			} else if (ch == '\n') {
				return ch_fail(c, "bare LF in trailers", i, used);
			} else if (c->tline == 0 && (ch == ' ' || ch == '\t')) {
				return ch_fail(c, "obs-fold in trailers", i, used);
			} else if (!c->tcolon) {
				if (ch == ':' && c->tline > 0)
					c->tcolon = true;
				else if (!is_tchar(ch))
					return ch_fail(c, "bad trailer field name", i, used);
			} else if (!is_vbyte(ch)) {
				return ch_fail(c, "control byte in a trailer", i, used);
			}
			c->tline++;
			i++;
			break;
		case CLI_CH_TRAILER_LF:
			if (ch != '\n')
				return ch_fail(c, "bare CR in trailers", i, used);
			c->state = CLI_CH_TRAILER;
			c->tline = 0;
			c->tcolon = false;
			i++;
			break;
		case CLI_CH_FINAL_LF:
			if (ch != '\n')
				return ch_fail(c, "bare CR after the last chunk", i, used);
			c->state = CLI_CH_DONE;
			*used = i + 1;
			return CLI_DONE;
		case CLI_CH_DONE:
		case CLI_CH_ERROR:
			break; /* not reached: handled before the loop */
		}
	}
	*used = i;
	return CLI_AGAIN;
}

/* ---- YAML to JSON ---------------------------------------------------- */

struct ybuild {
	const char *file;
	yaml_parser_t parser;
	struct cli_yposv *pos;
	size_t nodes;
	char *path;             /* the JSON path of the node being read */
	size_t plen;
	size_t pcap;
	char *err;
	size_t errsz;
	bool failed;            /* err holds the first error */
	bool oom;
};

static void
yerr(struct ybuild *b, const yaml_mark_t *m, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
yerr(struct ybuild *b, const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (b->failed)
		return;
	b->failed = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m)
		seterr(b->err, b->errsz, "%s:%zu:%zu: %s", b->file, m->line + 1, m->column + 1,
		       msg);
	else
		seterr(b->err, b->errsz, "%s: %s", b->file, msg);
}

static void
yparse_error(struct ybuild *b)
{
	const yaml_parser_t *p = &b->parser;

	if (p->error == YAML_MEMORY_ERROR)
		yerr(b, NULL, "out of memory parsing YAML");
	else if (p->context)
		yerr(b, &p->problem_mark, "YAML syntax error: %s %s (line %zu)",
		     p->problem ? p->problem : "?", p->context, p->context_mark.line + 1);
	else
		yerr(b, &p->problem_mark, "YAML syntax error: %s",
		     p->problem ? p->problem : "unknown");
}

/* Appends s[0..n) to the current path; returns the old length to restore. */
static size_t
path_push(struct ybuild *b, const char *s, size_t n)
{
	size_t old = b->plen;

	if (b->plen + n + 1 > b->pcap) {
		size_t cap = (b->plen + n + 1) * 2;
		char *p = realloc(b->path, cap);

		if (!p) {
			b->oom = true;
			return old;
		}
		b->path = p;
		b->pcap = cap;
	}
	memcpy(b->path + b->plen, s, n);
	b->plen += n;
	b->path[b->plen] = '\0';
	return old;
}

static void
path_pop(struct ybuild *b, size_t old)
{
	b->plen = old;
	if (b->path)
		b->path[old] = '\0';
}

static void
pos_add(struct ybuild *b, const yaml_mark_t *m)
{
	struct cli_yposv *v = b->pos;
	char *p;

	if (!v || b->oom)
		return;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 32;
		struct cli_ypos *nv = realloc(v->v, cap * sizeof(*nv));

		if (!nv) {
			b->oom = true;
			return;
		}
		v->v = nv;
		v->cap = cap;
	}
	p = strdup(b->path ? b->path : "");
	if (!p) {
		b->oom = true;
		return;
	}
	v->v[v->n].path = p;
	v->v[v->n].line = (uint32_t)m->line + 1;
	v->v[v->n].col = (uint32_t)m->column + 1;
	v->n++;
}

static bool
is_int_text(const char *s, size_t n)
{
	size_t i = 0;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	if (i == n)
		return false;
	for (; i < n; i++)
		if (!is_digit((unsigned char)s[i]))
			return false;
	return true;
}

/* [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE][-+]?[0-9]+ )? */
static bool
is_real_text(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	if (i < n && s[i] == '.') {
		i++;
		for (d = i; i < n && is_digit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	} else {
		for (d = i; i < n && is_digit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
		if (i < n && s[i] == '.')
			for (i++; i < n && is_digit((unsigned char)s[i]); i++)
				;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		for (d = i; i < n && is_digit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	}
	return i == n;
}

static bool
text_is(const char *s, size_t n, const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == n && memcmp(s, *words, n) == 0)
			return true;
	return false;
}

static json_t *
yscalar(struct ybuild *b, const yaml_event_t *ev)
{
	static const char *const nulls[] = { "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", NULL };
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	json_t *j;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		j = json_stringn(s, n);
	} else if (n == 0 || text_is(s, n, nulls)) {
		j = json_null();
	} else if (text_is(s, n, trues)) {
		j = json_true();
	} else if (text_is(s, n, falses)) {
		j = json_false();
	} else if (is_int_text(s, n)) {
		long long v;

		/* libyaml terminates scalar values */
		errno = 0;
		v = strtoll(s, NULL, 10);
		if (errno == ERANGE) {
			yerr(b, &ev->start_mark, "integer %s does not fit in 64 bits", s);
			return NULL;
		}
		j = json_integer(v);
	} else if (is_real_text(s, n)) {
		double v = strtod(s, NULL);

		if (!isfinite(v)) {
			yerr(b, &ev->start_mark, "number %s is out of range", s);
			return NULL;
		}
		j = json_real(v);
	} else {
		j = json_stringn(s, n);
	}
	if (!j)
		yerr(b, &ev->start_mark, "cannot represent this scalar in JSON");
	return j;
}

static json_t *ynode(struct ybuild *b, const yaml_event_t *ev, unsigned depth);

/* Reads the items of the collection `start` opened, up to its end. */
static json_t *
ycollection(struct ybuild *b, const yaml_event_t *start, unsigned depth)
{
	bool is_map = start->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end_type = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	json_t *out;
	size_t idx = 0;

	if (depth > CLI_MAX_YAML_DEPTH) {
		yerr(b, &start->start_mark, "nesting deeper than %d levels", CLI_MAX_YAML_DEPTH);
		return NULL;
	}
	out = is_map ? json_object() : json_array();
	if (!out) {
		yerr(b, NULL, "out of memory");
		return NULL;
	}
	for (;;) {
		yaml_event_t ev, vev;
		json_t *child;
		char *key = NULL;
		char seg[32];
		size_t old;

		if (!yaml_parser_parse(&b->parser, &ev)) {
			yparse_error(b);
			goto fail;
		}
		if (ev.type == end_type) {
			yaml_event_delete(&ev);
			break;
		}
		if (!is_map) {
			snprintf(seg, sizeof(seg), "[%zu]", idx++);
			old = path_push(b, seg, strlen(seg));
			child = ynode(b, &ev, depth + 1);
			path_pop(b, old);
			yaml_event_delete(&ev);
			if (!child)
				goto fail;
			if (json_array_append_new(out, child) < 0) {
				yerr(b, NULL, "out of memory");
				goto fail;
			}
			continue;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			yerr(b, &ev.start_mark, "mapping keys must be scalars");
			yaml_event_delete(&ev);
			goto fail;
		}
		if (ev.data.scalar.anchor || ev.data.scalar.tag) {
			yerr(b, &ev.start_mark, "YAML anchors and tags are not supported");
			yaml_event_delete(&ev);
			goto fail;
		}
		if (memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
			yerr(b, &ev.start_mark, "a NUL byte in a mapping key");
			yaml_event_delete(&ev);
			goto fail;
		}
		key = strdup((const char *)ev.data.scalar.value);
		if (!key) {
			yerr(b, NULL, "out of memory");
			yaml_event_delete(&ev);
			goto fail;
		}
		if (json_object_get(out, key)) {
			yerr(b, &ev.start_mark, "duplicate key '%s'", key);
			yaml_event_delete(&ev);
			free(key);
			goto fail;
		}
		yaml_event_delete(&ev);
		if (!yaml_parser_parse(&b->parser, &vev)) {
			yparse_error(b);
			free(key);
			goto fail;
		}
		old = b->plen;
		if (b->plen)
			path_push(b, ".", 1);
		path_push(b, key, strlen(key));
		child = ynode(b, &vev, depth + 1);
		path_pop(b, old);
		yaml_event_delete(&vev);
		if (!child) {
			free(key);
			goto fail;
		}
		if (json_object_set_new(out, key, child) < 0) {
			yerr(b, NULL, "key '%s' cannot be a JSON key", key);
			free(key);
			goto fail;
		}
		free(key);
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

static json_t *
ynode(struct ybuild *b, const yaml_event_t *ev, unsigned depth)
{
	if (++b->nodes > CLI_MAX_YAML_NODES) {
		yerr(b, &ev->start_mark, "more than %d YAML nodes", CLI_MAX_YAML_NODES);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (ev->data.scalar.anchor) {
			yerr(b, &ev->start_mark,
			     "YAML anchors (&name) are not supported: write the value out");
			return NULL;
		}
		if (ev->data.scalar.tag) {
			yerr(b, &ev->start_mark, "YAML tags (!tag) are not supported");
			return NULL;
		}
		pos_add(b, &ev->start_mark);
		return yscalar(b, ev);
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		const yaml_char_t *anchor = ev->type == YAML_SEQUENCE_START_EVENT
						    ? ev->data.sequence_start.anchor
						    : ev->data.mapping_start.anchor;
		const yaml_char_t *tag = ev->type == YAML_SEQUENCE_START_EVENT
						 ? ev->data.sequence_start.tag
						 : ev->data.mapping_start.tag;

		if (anchor) {
			yerr(b, &ev->start_mark,
			     "YAML anchors (&name) are not supported: write the value out");
			return NULL;
		}
		if (tag) {
			yerr(b, &ev->start_mark, "YAML tags (!tag) are not supported");
			return NULL;
		}
		pos_add(b, &ev->start_mark);
		return ycollection(b, ev, depth);
	}
	case YAML_ALIAS_EVENT:
		yerr(b, &ev->start_mark,
		     "YAML aliases (*name) are not supported: write the value out");
		return NULL;
	default:
		yerr(b, &ev->start_mark, "unexpected YAML event");
		return NULL;
	}
}

/* Reads the next event, expecting `type`; returns false (error set) if
 * the parser fails. */
static bool
ynext(struct ybuild *b, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&b->parser, ev)) {
		yparse_error(b);
		return false;
	}
	return true;
}

json_t *
cli_yaml_to_json(const char *file, const char *buf, size_t len, struct cli_yposv *pos,
		 char *err, size_t errsz)
{
	struct ybuild b = { .file = file, .pos = pos, .err = err, .errsz = errsz };
	yaml_event_t ev;
	json_t *doc = NULL;

	if (errsz)
		err[0] = '\0';
	if (!yaml_parser_initialize(&b.parser)) {
		seterr(err, errsz, "%s: out of memory", file);
		return NULL;
	}
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)buf, len);
	if (!ynext(&b, &ev))
		goto out;
	yaml_event_delete(&ev); /* STREAM-START */
	if (!ynext(&b, &ev))
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yerr(&b, NULL, "no YAML document in the file");
		yaml_event_delete(&ev);
		goto out;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	if (!ynext(&b, &ev))
		goto out;
	doc = ynode(&b, &ev, 1);
	yaml_event_delete(&ev);
	if (!doc)
		goto out;
	if (!ynext(&b, &ev))
		goto out;
	yaml_event_delete(&ev); /* DOCUMENT-END */
	if (!ynext(&b, &ev))
		goto out;
	if (ev.type != YAML_STREAM_END_EVENT)
		yerr(&b, &ev.start_mark,
		     "a second YAML document: the file must hold exactly one");
	yaml_event_delete(&ev);
out:
	if (b.oom)
		yerr(&b, NULL, "out of memory");
	yaml_parser_delete(&b.parser);
	free(b.path);
	if (b.failed) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

static int
ypos_prefix(struct cli_yposv *pos, const char *prefix)
{
	size_t pl = strlen(prefix);

	for (size_t i = 0; pos && i < pos->n; i++) {
		size_t n = strlen(pos->v[i].path);
		char *p = malloc(pl + n + 1);

		if (!p)
			return -ENOMEM;
		memcpy(p, prefix, pl);
		memcpy(p + pl, pos->v[i].path, n + 1);
		free(pos->v[i].path);
		pos->v[i].path = p;
	}
	return 0;
}

json_t *
cli_pools_body(const char *file, json_t *doc, struct cli_yposv *pos, char *warn, size_t warnsz,
	       char *err, size_t errsz)
{
	json_t *list;

	if (warnsz)
		warn[0] = '\0';
	if (json_is_array(doc)) {
		list = doc;
		if (ypos_prefix(pos, "pools") < 0) {
			seterr(err, errsz, "%s: out of memory", file);
			return NULL;
		}
	} else if (json_is_object(doc)) {
		const char *key;
		json_t *v;
		char keys[512] = "";
		size_t off = 0;
		bool any = false, trunc = false;

		list = json_object_get(doc, "pools");
		if (!list) {
			seterr(err, errsz, "%s: no 'pools:' key; the file must be a mapping with "
				      "a pools: list, or a list of pools", file);
			return NULL;
		}
		if (!json_is_array(list)) {
			const struct cli_ypos *p = cli_ypos_find(pos, "pools", 5);

			if (p && strcmp(p->path, "pools") == 0)
				seterr(err, errsz, "%s:%u:%u: 'pools:' must be a list of pools",
				       file, p->line, p->col);
			else
				seterr(err, errsz, "%s: 'pools:' must be a list of pools", file);
			return NULL;
		}
		json_object_foreach(doc, key, v) {
			int n;

			if (strcmp(key, "pools") == 0)
				continue;
			any = true;
			n = snprintf(keys + off, sizeof(keys) - off, "%s%s", off ? ", " : "", key);
			if (n < 0 || (size_t)n >= sizeof(keys) - off) {
				trunc = true;
				break;
			}
			off += (size_t)n;
		}
		if (any && warnsz)
			snprintf(warn, warnsz, "%s: ignoring top-level keys other than pools: %s%s",
				 file, keys, trunc ? ", ..." : "");
	} else {
		seterr(err, errsz, "%s: the top level must be a mapping with a 'pools:' key, or "
			      "a list of pools", file);
		return NULL;
	}
	{
		json_t *body = json_pack("{s:O}", "pools", list);

		if (!body)
			seterr(err, errsz, "%s: out of memory", file);
		return body;
	}
}

const struct cli_ypos *
cli_ypos_find(const struct cli_yposv *pos, const char *path, size_t len)
{
	if (!pos)
		return NULL;
	for (;;) {
		for (size_t i = 0; i < pos->n; i++)
			if (strlen(pos->v[i].path) == len && memcmp(pos->v[i].path, path, len) == 0)
				return &pos->v[i];
		/* cut the last ".name" or "[i]" */
		while (len > 0 && path[len - 1] != '.' && path[len - 1] != '[')
			len--;
		if (len == 0)
			return NULL;
		len--;
	}
}

void
cli_yposv_fini(struct cli_yposv *pos)
{
	if (!pos)
		return;
	for (size_t i = 0; i < pos->n; i++)
		free(pos->v[i].path);
	free(pos->v);
	memset(pos, 0, sizeof(*pos));
}

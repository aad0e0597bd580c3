/* conf.c: the schema. Walks the YAML tree of conf_yaml.c into a struct conf,
 * filling defaults, checking types, ranges and references, and resolving
 * secret references. Every error is reported, then the load fails. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf-int.h"
#include "conf-schema.h"
#include "conf.h"


void
cs_err_at(struct ctx *x, const struct cy_node *n, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	conf_diag_add(x->d, x->file, n ? n->line : 0, n ? n->col : 0, "%s", msg);
	x->errors++;
}

struct conf_pos
cs_pos_of(const struct cy_node *n)
{
	struct conf_pos p = { 0, 0 };

	if (n) {
		p.line = n->line;
		p.col = n->col;
	}
	return p;
}

/* Where n is, for a message that points at a second node: "LINE:COL" in a
 * YAML file, the JSON path in a JSON body. */
static const char *
where(const struct ctx *x, const struct cy_node *n, char *buf, size_t bufsz)
{
	if (x->paths && n->line >= 1 && n->line <= x->npaths)
		snprintf(buf, bufsz, "%s", x->paths[n->line - 1]);
	else
		snprintf(buf, bufsz, "%u:%u", n->line, n->col);
	return buf;
}

/* ---- names ---- */

const char *
conf_log_level_name(enum conf_log_level l)
{
	static const char *const names[] = { "err", "warn", "info", "debug" };

	return (unsigned)l < 4 ? names[l] : "?";
}

const char *
conf_policy_mode_name(enum conf_policy_mode m)
{
	return m == CONF_POLICY_REPORT ? "report" : "enforce";
}

const char *
conf_backend_name(enum conf_backend b)
{
	return b == CONF_BACKEND_VM ? "vm" : b == CONF_BACKEND_RPC ? "rpc" : "ns";
}

/* ---- did you mean ---- */

static size_t
edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (la >= 63 || lb >= 63)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The closest of `cands` to s, if close enough to be a typo. */
static const char *
closest(const char *s, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t bestd = SIZE_MAX, limit = strlen(s) / 3;

	if (limit < 2)
		limit = 2;
	for (size_t i = 0; i < n; i++) {
		size_t dist = edit_distance(s, cands[i]);

		if (dist < bestd) {
			bestd = dist;
			best = cands[i];
		}
	}
	return bestd <= limit ? best : NULL;
}

/* " (did you mean 'x'?)" or "". */
static const char *
suggest(char *buf, size_t bufsz, const char *s, const char *const *cands, size_t n)
{
	const char *best = closest(s, cands, n);

	if (!best)
		return "";
	snprintf(buf, bufsz, " (did you mean '%s'?)", best);
	return buf;
}

/* ---- node helpers ---- */

static const char *
kind_name(const struct cy_node *n)
{
	switch (n->kind) {
	case CY_MAP:
		return "a mapping";
	case CY_SEQ:
		return "a list";
	default:
		return "a string";
	}
}

bool
cs_is_null(const struct cy_node *n)
{
	return !n || (n->kind == CY_SCALAR && n->plain &&
		      (n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0));
}

/* A short, printable rendition of a (non-secret) scalar for messages. */
static const char *
shown(const struct cy_node *n, char *buf, size_t bufsz)
{
	size_t o = 0;

	for (size_t i = 0; i < n->len && o + 4 < bufsz; i++) {
		unsigned char ch = (unsigned char)n->str[i];

		buf[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
		if (i == 40 && n->len > 44) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
	}
	buf[o] = '\0';
	return buf;
}

struct cy_node *
cs_map_get(const struct cy_node *m, const char *key)
{
	if (!m || m->kind != CY_MAP)
		return NULL;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->items[2 * i]->str, key) == 0)
			return m->items[2 * i + 1];
	return NULL;
}

void (*cs_schema_probe)(const char *path, const char *const *keys);

/* Checks that n is a mapping (or null: all defaults) whose keys are all in
 * `keys` (NULL-terminated). Returns false if n is unusable. */
bool
cs_expect_map(struct ctx *x, const struct cy_node *n, const char *path,
	   const char *const *keys)
{
	size_t nkeys = 0;

	if (!n || cs_is_null(n))
		return false;
	if (n->kind != CY_MAP) {
		cs_err_at(x, n, "%s: expected a mapping, got %s", path, kind_name(n));
		return false;
	}
	if (cs_schema_probe)
		cs_schema_probe(path, keys);
	while (keys[nkeys])
		nkeys++;
	for (size_t i = 0; i < n->n; i++) {
		const struct cy_node *k = n->items[2 * i];
		char sug[96], kb[64];
		size_t j;

		for (j = 0; j < nkeys; j++)
			if (strcmp(k->str, keys[j]) == 0)
				break;
		if (j == nkeys)
			cs_err_at(x, k, "unknown key '%s' in %s%s", shown(k, kb, sizeof(kb)),
			       path, suggest(sug, sizeof(sug), k->str, keys, nkeys));
	}
	return true;
}

/* Writes base followed by fmt's expansion into out (PATHSZ bytes): a
 * path into the document, for messages. A path that does not fit (deep
 * nesting, long names) is cut and ends in "...", so that no message passes
 * a cut path off as a whole one. */
void
cs_pathf(char *out, const char *base, const char *fmt, ...)
{
	char tail[PATHSZ];
	va_list ap;
	int n, m;

	va_start(ap, fmt);
	n = vsnprintf(tail, sizeof(tail), fmt, ap);
	va_end(ap);
	if (n < 0)
		tail[0] = '\0';
	m = snprintf(out, PATHSZ, "%s%s", base, tail);
	if (m < 0)
		out[0] = '\0';
	if (n < 0 || (size_t)n >= sizeof(tail) || m < 0 || (size_t)m >= PATHSZ) {
		size_t len = strlen(out);

		if (len > PATHSZ - sizeof("..."))
			len = PATHSZ - sizeof("...");
		memcpy(out + len, "...", sizeof("..."));
	}
}

/* Returns a scalar's text or NULL (error reported) for a non-scalar. */
static const struct cy_node *
scalar(struct ctx *x, const struct cy_node *n, const char *path, const char *want)
{
	if (n->kind != CY_SCALAR) {
		cs_err_at(x, n, "%s: expected %s, got %s", path, want, kind_name(n));
		return NULL;
	}
	if (cs_is_null(n)) {
		cs_err_at(x, n, "%s: missing value (expected %s)", path, want);
		return NULL;
	}
	return n;
}

/* A plain string. References are resolved only in secret fields; one here
 * would silently stay literal, so it is an error. */
bool
cs_get_str(struct ctx *x, const struct cy_node *n, const char *path, char **out)
{
	if (!n)
		return false;
	if (!scalar(x, n, path, "a string"))
		return false;
	if (strstr(n->str, "${")) {
		cs_err_at(x, n, "%s: ${...} references are resolved only in secret fields "
		       "(tokens, passwords, keys, credential values)", path);
		return false;
	}
	*out = conf_arena_strndup(x->a, n->str, n->len);
	return true;
}

static bool
parse_u64(const char *s, uint64_t *v)
{
	uint64_t acc = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (acc > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		acc = acc * 10 + (uint64_t)(*s - '0');
	}
	*v = acc;
	return true;
}

static bool
get_u32(struct ctx *x, const struct cy_node *n, const char *path, uint32_t lo,
	uint32_t hi, uint32_t *out)
{
	char buf[64];
	uint64_t v;

	if (!n)
		return false;
	if (!scalar(x, n, path, "an integer"))
		return false;
	if (!n->plain || !parse_u64(n->str, &v)) {
		bool negative = n->plain && n->str[0] == '-' && parse_u64(n->str + 1, &v);

		if (negative)
			cs_err_at(x, n, "%s: %s is out of range %u..%u", path,
			       shown(n, buf, sizeof(buf)), lo, hi);
		else if (!n->plain)
			cs_err_at(x, n, "%s: expected an integer in %u..%u, got a quoted string "
			       "(write numbers without quotes)", path, lo, hi);
		else
			cs_err_at(x, n, "%s: expected an integer in %u..%u, got '%s'", path,
			       lo, hi, shown(n, buf, sizeof(buf)));
		return false;
	}
	if (v < lo || v > hi) {
		cs_err_at(x, n, "%s: %s is out of range %u..%u", path,
		       shown(n, buf, sizeof(buf)), lo, hi);
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

bool
cs_get_bool(struct ctx *x, const struct cy_node *n, const char *path, bool *out)
{
	char buf[64];

	if (!n)
		return false;
	if (!scalar(x, n, path, "true or false"))
		return false;
	if (n->plain && strcmp(n->str, "true") == 0) {
		*out = true;
		return true;
	}
	if (n->plain && strcmp(n->str, "false") == 0) {
		*out = false;
		return true;
	}
	cs_err_at(x, n, "%s: expected true or false, got '%s'", path, shown(n, buf, sizeof(buf)));
	return false;
}

/* One of `names` (NULL-terminated); *out is its index. */
bool
cs_get_enum(struct ctx *x, const struct cy_node *n, const char *path,
	 const char *const *names, int *out)
{
	char buf[64], list[256] = "", sug[96];
	size_t nn = 0;

	if (!n)
		return false;
	while (names[nn])
		nn++;
	if (!scalar(x, n, path, "a string"))
		return false;
	for (size_t i = 0; i < nn; i++) {
		if (strcmp(n->str, names[i]) == 0) {
			*out = (int)i;
			return true;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 i ? ", " : "", names[i]);
	}
	cs_err_at(x, n, "%s: expected one of %s; got '%s'%s", path, list,
	       shown(n, buf, sizeof(buf)), suggest(sug, sizeof(sug), n->str, names, nn));
	return false;
}

/* Returns the items of a list (NULL and 0 for null/absent). */
bool
cs_get_seq(struct ctx *x, const struct cy_node *n, const char *path, size_t *count)
{
	*count = 0;
	if (!n || cs_is_null(n))
		return false;
	if (n->kind != CY_SEQ) {
		cs_err_at(x, n, "%s: expected a list, got %s", path, kind_name(n));
		return false;
	}
	*count = n->n;
	return n->n > 0;
}

/* ---- addresses ---- */

int
conf_cidr_parse(const char *s, struct conf_cidr *out, char *err, size_t errsz)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned maxp;
	uint64_t prefix;

	memset(out, 0, sizeof(*out));
	if (alen == 0 || alen >= sizeof(addr)) {
		snprintf(err, errsz, "not an address");
		return -EINVAL;
	}
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		maxp = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		maxp = 128;
	} else {
		snprintf(err, errsz, "'%s' is not an IPv4 or IPv6 address", addr);
		return -EINVAL;
	}
	prefix = maxp;
	if (slash && (!parse_u64(slash + 1, &prefix) || prefix > maxp)) {
		snprintf(err, errsz, "prefix length must be 0..%u", maxp);
		return -EINVAL;
	}
	out->prefix = (uint8_t)prefix;
	for (unsigned bit = (unsigned)prefix; bit < maxp; bit++) {
		if (out->addr[bit / 8] & (0x80 >> (bit % 8))) {
			snprintf(err, errsz, "host bits are set (the network is ");
			size_t l = strlen(err);
			struct conf_cidr net = *out;
			char txt[INET6_ADDRSTRLEN];

			for (unsigned b = (unsigned)prefix; b < maxp; b++)
				net.addr[b / 8] &= (uint8_t)~(0x80 >> (b % 8));
			inet_ntop(out->family, net.addr, txt, sizeof(txt));
			snprintf(err + l, errsz > l ? errsz - l : 0, "%s/%u)", txt, (unsigned)prefix);
			return -EINVAL;
		}
	}
	return 0;
}

bool
conf_cidr_contains(const struct conf_cidr *c, int family, const void *addr)
{
	const uint8_t *a = addr;
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (c->family != family)
		return false;
	if (memcmp(c->addr, a, full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((c->addr[full] & mask) != (a[full] & mask))
			return false;
	}
	return true;
}

bool
conf_cidr_overlap(const struct conf_cidr *a, const struct conf_cidr *b)
{
	/* Two aligned ranges overlap iff the wider one contains the other's
	 * network address. */
	if (a->family != b->family)
		return false;
	return a->prefix <= b->prefix ? conf_cidr_contains(a, b->family, b->addr)
				      : conf_cidr_contains(b, a->family, a->addr);
}

static void
cidr_text(const struct conf_cidr *c, char *buf, size_t bufsz)
{
	char txt[INET6_ADDRSTRLEN];

	inet_ntop(c->family, c->addr, txt, sizeof(txt));
	snprintf(buf, bufsz, "%s/%u", txt, c->prefix);
}

static bool
get_cidr(struct ctx *x, const struct cy_node *n, const char *path, struct conf_cidr *out)
{
	char err[160], buf[64];

	if (!n || !scalar(x, n, path, "a CIDR"))
		return false;
	if (conf_cidr_parse(n->str, out, err, sizeof(err)) < 0) {
		cs_err_at(x, n, "%s: bad CIDR '%s': %s", path, shown(n, buf, sizeof(buf)), err);
		return false;
	}
	out->pos = cs_pos_of(n);
	return true;
}

/* "IP:PORT" or "[IPv6]:PORT"; `off` (or null) leaves it unset. */
static bool
get_hostport(struct ctx *x, const struct cy_node *n, const char *path,
	     struct conf_hostport *out)
{
	char host[INET6_ADDRSTRLEN + 1], buf[80];
	const char *s, *colon, *h;
	size_t hlen;
	uint64_t port;

	if (!n)
		return false;
	if (cs_is_null(n) || (n->kind == CY_SCALAR && n->plain && strcmp(n->str, "off") == 0)) {
		memset(out, 0, sizeof(*out));
		return true;
	}
	if (!scalar(x, n, path, "an address ADDRESS:PORT"))
		return false;
	s = n->str;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			goto bad;
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			goto bad;
		h = s;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof(host))
		goto bad;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (!parse_u64(colon + 1, &port)) 
		goto bad;
	if (port < 1 || port > 65535) {
		cs_err_at(x, n, "%s: port %s is out of range 1..65535", path, colon + 1);
		return false;
	}
	memset(out, 0, sizeof(*out));
	if (s[0] == '[') {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			goto bad;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		out->addrlen = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			goto bad;
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		out->addrlen = sizeof(*sin);
	}
	out->host = conf_arena_strndup(x->a, host, hlen);
	out->port = (uint16_t)port;
	out->is_ip = true;
	out->set = true;
	out->pos = cs_pos_of(n);
	return true;
bad:
	cs_err_at(x, n, "%s: expected IP:PORT or [IPv6]:PORT (or off), got '%s'", path,
	       shown(n, buf, sizeof(buf)));
	return false;
}

/* ---- hosts ---- */

int
conf_host_check(const char *host, bool wildcard_ok, char *err, size_t errsz)
{
	const char *p = host;
	size_t len = strlen(host), label = 0;
	unsigned char a6[16];

	if (len == 0) {
		snprintf(err, errsz, "empty host");
		return -EINVAL;
	}
	if (inet_pton(AF_INET, host, a6) == 1 || inet_pton(AF_INET6, host, a6) == 1)
		return 0;
	if (p[0] == '*') {
		if (p[1] != '.' || p[2] == '\0') {
			snprintf(err, errsz, "'*' is allowed only as a whole first label ('*.example.com')");
			return -EINVAL;
		}
		if (!wildcard_ok) {
			snprintf(err, errsz, "wildcards are not allowed here");
			return -EINVAL;
		}
		p += 2;
	}
	if (len - (size_t)(p - host) > 253) {
		snprintf(err, errsz, "longer than 253 bytes");
		return -EINVAL;
	}
	for (const char *q = p;; q++) {
		unsigned char ch = (unsigned char)*q;

		if (ch == '.' || ch == '\0') {
			if (label == 0 && !(ch == '\0' && q > p && q[-1] == '.' && q - 1 > p)) {
				snprintf(err, errsz, "empty label");
				return -EINVAL;
			}
			if (q > p && (q[-1] == '-')) {
				snprintf(err, errsz, "a label ends with '-'");
				return -EINVAL;
			}
			label = 0;
			if (ch == '\0')
				break;
			continue;
		}
		if (ch == '*') {
			snprintf(err, errsz, "'*' is allowed only as a whole first label ('*.example.com')");
			return -EINVAL;
		}
		if (ch >= 0x80) {
			snprintf(err, errsz, "non-ASCII name: write internationalised names as punycode (xn--...)");
			return -EINVAL;
		}
		if (!(isalnum(ch) || ch == '-' || ch == '_')) {
			snprintf(err, errsz, "character '%c' is not allowed in a host name",
				 isprint(ch) ? ch : '?');
			return -EINVAL;
		}
		if (label == 0 && ch == '-') {
			snprintf(err, errsz, "a label starts with '-'");
			return -EINVAL;
		}
		if (++label > 63) {
			snprintf(err, errsz, "a label longer than 63 bytes");
			return -EINVAL;
		}
	}
	return 0;
}

/* "host", "*.suffix", either with ":port", or "[v6]:port". */
bool
cs_get_hostpat(struct ctx *x, const struct cy_node *n, const char *path,
	    enum cs_wild wild, struct conf_hostpat *out)
{
	char host[256], err[160], buf[80];
	const char *s, *colon = NULL;
	size_t hlen;
	uint64_t port = 0;

	if (!n || !scalar(x, n, path, "a host pattern"))
		return false;
	s = n->str;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || (close[1] != '\0' && close[1] != ':')) {
			cs_err_at(x, n, "%s: bad host pattern '%s': unclosed '['", path,
			       shown(n, buf, sizeof(buf)));
			return false;
		}
		hlen = (size_t)(close - s - 1);
		if (hlen >= sizeof(host))
			hlen = sizeof(host) - 1;
		memcpy(host, s + 1, hlen);
		if (close[1] == ':')
			colon = close + 1;
	} else {
		const char *first = strchr(s, ':');

		/* A bare IPv6 literal has several colons and no port. */
		if (first && strchr(first + 1, ':'))
			first = NULL;
		colon = first;
		hlen = colon ? (size_t)(colon - s) : n->len;
		if (hlen >= sizeof(host)) {
			cs_err_at(x, n, "%s: bad host pattern: longer than 253 bytes", path);
			return false;
		}
		memcpy(host, s, hlen);
	}
	host[hlen] = '\0';
	if (colon && (!parse_u64(colon + 1, &port) || port < 1 || port > 65535)) {
		cs_err_at(x, n, "%s: bad host pattern '%s': port must be 1..65535", path,
		       shown(n, buf, sizeof(buf)));
		return false;
	}
	/* One trailing dot is the root: "example.com." is "example.com". */
	if (hlen > 1 && host[hlen - 1] == '.' && host[hlen - 2] != '.')
		host[--hlen] = '\0';
	if (conf_host_check(host, true, err, sizeof(err)) < 0) {
		cs_err_at(x, n, "%s: bad host pattern '%s': %s", path, shown(n, buf, sizeof(buf)), err);
		return false;
	}
	for (size_t i = 0; i < hlen; i++)
		host[i] = (char)tolower((unsigned char)host[i]);
	if (host[0] == '*' && wild == CS_WILD_SITES) {
		int ps = conf_public_suffix(host + 2);

		if (ps < 0) {
			cs_err_at(x, n, "%s: cannot check '%s' against the Public Suffix List: "
				  "no list data (install Debian's publicsuffix)", path,
				  shown(n, buf, sizeof(buf)));
			return false;
		}
		if (ps > 0) {
			cs_err_at(x, n, "%s: '%s' covers the public suffix %s: every site under it "
				  "would match; name the domains meant ('*.example.%s')", path,
				  shown(n, buf, sizeof(buf)), host + 2, host + 2);
			return false;
		}
	}
	out->wildcard = host[0] == '*';
	out->host = conf_arena_strndup(x->a, host + (out->wildcard ? 2 : 0),
				       hlen - (out->wildcard ? 2 : 0));
	out->port = (uint16_t)port;
	out->pos = cs_pos_of(n);
	return true;
}

static void
get_hostpats(struct ctx *x, const struct cy_node *n, const char *path, enum cs_wild wild,
	     struct conf_hostpats *out)
{
	char p[PATHSZ];
	size_t cnt;

	out->v = NULL;
	out->n = 0;
	if (!cs_get_seq(x, n, path, &cnt))
		return;
	out->v = conf_arena_alloc(x->a, cnt * sizeof(*out->v));
	for (size_t i = 0; i < cnt; i++) {
		cs_pathf(p, path, "[%zu]", i);
		if (cs_get_hostpat(x, n->items[i], p, wild, &out->v[out->n]))
			out->n++;
	}
}

/* ---- secrets ---- */

/* Resolves ${env:NAME} and ${file:PATH} in n's text; "$${" is a literal
 * "${". Errors name the reference, never the resolved value. */
bool
cs_get_secret(struct ctx *x, const struct cy_node *n, const char *path, struct conf_secret *out)
{
	const char *s;
	char *val = NULL;
	size_t vlen = 0, vcap = 0;
	bool ok = true;

	if (!n)
		return false;
	if (n->kind != CY_SCALAR) {
		cs_err_at(x, n, "%s: expected a string, got %s", path, kind_name(n));
		return false;
	}
	if (cs_is_null(n)) {
		cs_err_at(x, n, "%s: missing value (expected a string)", path);
		return false;
	}
	s = n->str;
	for (size_t i = 0; i < n->len && ok;) {
		const char *add = s + i;
		size_t addlen = 1;
		char *fbuf = NULL;

		if (s[i] == '$' && s[i + 1] == '$' && s[i + 2] == '{') {
			add = "${";
			addlen = 2;
			i += 3;
		} else if (s[i] == '$' && s[i + 1] == '{') {
			const char *end = strchr(s + i, '}');
			const char *ref = s + i + 2;

			if (!end) {
				cs_err_at(x, n, "%s: unterminated ${ reference", path);
				ok = false;
				break;
			}
			if (strncmp(ref, "env:", 4) == 0) {
				char name[256];
				size_t nl = (size_t)(end - ref - 4);
				const char *v;

				if (nl == 0 || nl >= sizeof(name)) {
					cs_err_at(x, n, "%s: bad ${env:NAME} reference", path);
					ok = false;
					break;
				}
				memcpy(name, ref + 4, nl);
				name[nl] = '\0';
				for (size_t k = 0; k < nl; k++) {
					if (!(isalnum((unsigned char)name[k]) || name[k] == '_') ||
					    (k == 0 && isdigit((unsigned char)name[k]))) {
						cs_err_at(x, n, "%s: bad environment variable name in ${env:...}", path);
						ok = false;
						break;
					}
				}
				if (!ok)
					break;
				v = getenv(name);
				if (!v) {
					cs_err_at(x, n, "%s: environment variable %s is not set", path, name);
					ok = false;
					break;
				}
				add = v;
				addlen = strlen(v);
			} else if (strncmp(ref, "file:", 5) == 0) {
				char fpath[PATH_MAX];
				size_t pl = (size_t)(end - ref - 5);
				ssize_t r;
				int fd;

				if (pl == 0 || pl >= sizeof(fpath)) {
					cs_err_at(x, n, "%s: bad ${file:PATH} reference", path);
					ok = false;
					break;
				}
				memcpy(fpath, ref + 5, pl);
				fpath[pl] = '\0';
				fd = open(fpath, O_RDONLY | O_CLOEXEC | O_NOCTTY);
				if (fd < 0) {
					cs_err_at(x, n, "%s: cannot read secret file %s: %s", path, fpath,
					       strerror(errno));
					ok = false;
					break;
				}
				fbuf = malloc(CONF_SECRET_FILE_MAX + 1);
				if (!fbuf)
					abort();
				addlen = 0;
				while ((r = read(fd, fbuf + addlen, CONF_SECRET_FILE_MAX + 1 - addlen)) > 0)
					addlen += (size_t)r;
				if (r < 0 || addlen > CONF_SECRET_FILE_MAX) {
					cs_err_at(x, n, "%s: cannot read secret file %s: %s", path, fpath,
					       r < 0 ? strerror(errno) : "larger than 64 KiB");
					close(fd);
					explicit_bzero(fbuf, CONF_SECRET_FILE_MAX + 1);
					free(fbuf);
					ok = false;
					break;
				}
				close(fd);
				/* Files written by editors and `echo` end in a
				 * newline that is not part of the secret. */
				if (addlen && fbuf[addlen - 1] == '\n')
					addlen--;
				if (addlen && fbuf[addlen - 1] == '\r')
					addlen--;
				add = fbuf;
			} else {
				cs_err_at(x, n, "%s: unknown reference: use ${env:NAME} or ${file:PATH}", path);
				ok = false;
				break;
			}
			i = (size_t)(end - s) + 1;
		} else {
			i++;
		}
		if (vlen + addlen + 1 > vcap) {
			size_t cap = (vlen + addlen + 1) * 2;
			char *nv = malloc(cap);

			if (!nv)
				abort();
			if (val) {
				memcpy(nv, val, vlen);
				explicit_bzero(val, vcap);
				free(val);
			}
			val = nv;
			vcap = cap;
		}
		memcpy(val + vlen, add, addlen);
		vlen += addlen;
		if (fbuf) {
			explicit_bzero(fbuf, CONF_SECRET_FILE_MAX + 1);
			free(fbuf);
		}
	}
	if (ok && (vlen == 0 || memchr(val, '\0', vlen))) {
		cs_err_at(x, n, "%s: the secret is %s", path, vlen ? "holding a NUL byte" : "empty");
		ok = false;
	}
	if (ok && memchr(val, '\n', vlen)) {
		cs_err_at(x, n, "%s: the secret holds a line break", path);
		ok = false;
	}
	if (ok) {
		out->value = conf_arena_strndup(x->a, val, vlen);
		out->len = vlen;
		out->ref = conf_arena_strndup(x->a, n->str, n->len);
		out->pos = cs_pos_of(n);
	}
	if (val) {
		explicit_bzero(val, vcap);
		free(val);
	}
	return ok;
}

/* ---- names of things ---- */

/* Names of lanes, policies, pools, tenants, clients: they appear in interface
 * names, metrics labels and URLs. */
static bool
get_name(struct ctx *x, const struct cy_node *item, const char *path, char **out)
{
	const struct cy_node *n = cs_map_get(item, "name");
	char buf[64];

	if (!n) {
		cs_err_at(x, item, "%s: missing required key 'name'", path);
		return false;
	}
	if (!cs_get_str(x, n, path, out))
		return false;
	if (n->len > 32) {
		cs_err_at(x, n, "%s.name: longer than 32 characters", path);
		return false;
	}
	for (size_t i = 0; i < n->len; i++) {
		unsigned char ch = (unsigned char)n->str[i];

		if (!(islower(ch) || isdigit(ch) || ch == '-' || ch == '_') ||
		    (i == 0 && !islower(ch) && !isdigit(ch))) {
			cs_err_at(x, n, "%s.name: '%s' is not a name: use a-z, 0-9, '-' and '_', "
			       "starting with a letter or digit", path, shown(n, buf, sizeof(buf)));
			return false;
		}
	}
	return true;
}

/* Reports a duplicate among `count` names at `stride` bytes apart. */
static void
check_unique(struct ctx *x, const struct cy_node *seq, const char *what, const char *path,
	     const void *base, size_t count, size_t stride, size_t name_off)
{
	for (size_t i = 0; i < count; i++) {
		const char *ni = *(char *const *)((const char *)base + i * stride + name_off);

		if (!ni)
			continue;
		for (size_t j = 0; j < i; j++) {
			const char *nj = *(char *const *)((const char *)base + j * stride + name_off);
			const struct cy_node *first, *dup;
			char at[PATHSZ];

			if (!nj || strcmp(ni, nj) != 0)
				continue;
			first = cs_map_get(seq->items[j], "name");
			dup = cs_map_get(seq->items[i], "name");
			cs_err_at(x, dup, "%s[%zu].name: duplicate %s name '%s' (first at %s)",
			       path, i, what, ni, where(x, first, at, sizeof(at)));
			break;
		}
	}
}

/* Looks `name` up among count names; reports an undefined reference. */
static bool
resolve_ref(struct ctx *x, const struct cy_node *n, const char *path, const char *what,
	    const char *name, const void *base, size_t count, size_t stride,
	    size_t name_off, size_t *idx)
{
	const char *cands[256];
	size_t nc = 0;
	char sug[96];

	for (size_t i = 0; i < count; i++) {
		const char *ni = *(char *const *)((const char *)base + i * stride + name_off);

		if (ni && strcmp(ni, name) == 0) {
			*idx = i;
			return true;
		}
		if (ni && nc < 256)
			cands[nc++] = ni;
	}
	cs_err_at(x, n, "%s: no %s named '%s'%s", path, what, name,
	       suggest(sug, sizeof(sug), name, cands, nc));
	return false;
}

/* ---- sections ---- */

static void
load_daemon(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "data_dir", "fleet_netns", "fleet_teardown",
					     "control_socket", "log", "journal_damage", "idmap", NULL };
	static const char *const ikeys[] = { "base", "ranges", NULL };
	static const char *const damages[] = { "refuse", "destroy", NULL };
	static const char *const lkeys[] = { "level", "format", NULL };
	static const char *const levels[] = { "err", "warn", "info", "debug", NULL };
	static const char *const formats[] = { "text", "json", NULL };
	struct conf_daemon *dm = &x->c->daemon;
	const struct cy_node *log, *f, *im;
	int v;

	if (!cs_expect_map(x, n, "daemon", keys))
		return;
	if (cs_get_str(x, cs_map_get(n, "data_dir"), "daemon.data_dir", &dm->data_dir) &&
	    dm->data_dir[0] != '/')
		cs_err_at(x, cs_map_get(n, "data_dir"), "daemon.data_dir: must be an absolute path");
	f = cs_map_get(n, "fleet_netns");
	if (f && cs_get_str(x, f, "daemon.fleet_netns", &dm->fleet_netns)) {
		if (f->len > 64 || strchr(dm->fleet_netns, '/') || dm->fleet_netns[0] == '.')
			cs_err_at(x, f, "daemon.fleet_netns: not a namespace name (no '/', no leading '.', at most 64 bytes)");
	}
	cs_get_bool(x, cs_map_get(n, "fleet_teardown"), "daemon.fleet_teardown", &dm->fleet_teardown);
	if (cs_get_enum(x, cs_map_get(n, "journal_damage"), "daemon.journal_damage", damages, &v))
		dm->journal_damage = (enum conf_journal_damage)v;
	f = cs_map_get(n, "control_socket");
	if (f && f->kind == CY_SCALAR && f->plain && strcmp(f->str, "off") == 0) {
		dm->control_socket = NULL;
	} else if (f && cs_get_str(x, f, "daemon.control_socket", &dm->control_socket)) {
		if (dm->control_socket[0] != '/' || strlen(dm->control_socket) > 107)
			cs_err_at(x, f, "daemon.control_socket: must be an absolute path shorter than 108 bytes, or off");
	}
	/* The sandbox/ checks of the same rule, here for a file:line:col. */
	im = cs_map_get(n, "idmap");
	if (cs_expect_map(x, im, "daemon.idmap", ikeys)) {
		uint64_t end;

		get_u32(x, cs_map_get(im, "base"), "daemon.idmap.base", 65536, 0xfffe0000u,
			&dm->idmap_base);
		get_u32(x, cs_map_get(im, "ranges"), "daemon.idmap.ranges", 1, 65534,
			&dm->idmap_ranges);
		end = (uint64_t)dm->idmap_base + (uint64_t)dm->idmap_ranges * 65536;
		if (dm->idmap_base % 65536)
			cs_err_at(x, cs_map_get(im, "base"),
				  "daemon.idmap.base: %u is not a multiple of 65536", dm->idmap_base);
		else if (end > 0xffffffffull)
			cs_err_at(x, im, "daemon.idmap: %u ranges of 65536 from %u go past 4294967294, the last host id",
				  dm->idmap_ranges, dm->idmap_base);
	}
	log = cs_map_get(n, "log");
	if (cs_expect_map(x, log, "daemon.log", lkeys)) {
		if (cs_get_enum(x, cs_map_get(log, "level"), "daemon.log.level", levels, &v))
			dm->log_level = (enum conf_log_level)v;
		if (cs_get_enum(x, cs_map_get(log, "format"), "daemon.log.format", formats, &v))
			dm->log_format = (enum conf_log_format)v;
	}
}

static void
load_api(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "listen", "socket", "operator_token", NULL };
	struct conf_api *api = &x->c->api;
	const struct cy_node *s;

	if (!cs_expect_map(x, n, "api", keys))
		return;
	get_hostport(x, cs_map_get(n, "listen"), "api.listen", &api->listen);
	s = cs_map_get(n, "socket");
	if (s && s->kind == CY_SCALAR && s->plain && strcmp(s->str, "off") == 0)
		api->socket = NULL;
	else if (cs_get_str(x, s, "api.socket", &api->socket) && api->socket[0] != '/')
		cs_err_at(x, s, "api.socket: must be an absolute path (or off)");
	if (api->socket && strlen(api->socket) > 107)
		cs_err_at(x, s, "api.socket: longer than a unix socket path may be (107 bytes)");
	cs_get_secret(x, cs_map_get(n, "operator_token"), "api.operator_token", &api->operator_token);
}

static void
load_client(struct ctx *x, const struct cy_node *n, const char *path, struct conf_client *cl)
{
	static const char *const keys[] = { "name", "match", "policy", NULL };
	static const char *const mkeys[] = { "source", "user", "password", NULL };
	const struct cy_node *m, *src, *user, *pw, *pol;
	char p[PATHSZ];

	if (!cs_expect_map(x, n, path, keys)) {
		if (cs_is_null(n))
			cs_err_at(x, n, "%s: expected a mapping, got nothing", path);
		return;
	}
	cl->pos = cs_pos_of(n);
	get_name(x, n, path, &cl->name);
	pol = cs_map_get(n, "policy");
	if (!pol)
		cs_err_at(x, n, "%s: missing required key 'policy'", path);
	else
		cs_get_str(x, pol, (cs_pathf(p, path, ".policy"), p), &cl->policy);
	m = cs_map_get(n, "match");
	cs_pathf(p, path, ".match");
	if (!m) {
		cs_err_at(x, n, "%s: missing required key 'match'", path);
		return;
	}
	if (!cs_expect_map(x, m, p, mkeys)) {
		if (cs_is_null(m))
			cs_err_at(x, m, "%s: empty: give source, or user and password", p);
		return;
	}
	src = cs_map_get(m, "source");
	user = cs_map_get(m, "user");
	pw = cs_map_get(m, "password");
	if (src && (user || pw)) {
		cs_err_at(x, m, "%s: give either source, or user and password, not both", p);
		return;
	}
	if (src) {
		cl->match = CONF_MATCH_SOURCE;
		get_cidr(x, src, (cs_pathf(p, path, ".match.source"), p), &cl->source);
	} else if (user || pw) {
		cl->match = CONF_MATCH_USER;
		if (!user || !pw) {
			cs_err_at(x, m, "%s: user and password go together", p);
			return;
		}
		if (cs_get_str(x, user, (cs_pathf(p, path, ".match.user"), p), &cl->user) &&
		    (strchr(cl->user, ':') || user->len > 255))
			cs_err_at(x, user, "%s: a user name holds no ':' and is at most 255 bytes", p);
		cs_get_secret(x, pw, (cs_pathf(p, path, ".match.password"), p), &cl->password);
	} else {
		cs_err_at(x, m, "%s: empty: give source, or user and password", p);
	}
}

static void
load_dns(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "servers", "timeout_ms", "attempts", "cache_size", NULL };
	struct conf_gateway *g = &x->c->gateway;
	const struct cy_node *sv;
	size_t cnt;

	if (!cs_expect_map(x, n, "gateway.dns", keys))
		return;
	get_u32(x, cs_map_get(n, "timeout_ms"), "gateway.dns.timeout_ms", 100, 60000, &g->dns_timeout_ms);
	get_u32(x, cs_map_get(n, "attempts"), "gateway.dns.attempts", 1, 10, &g->dns_attempts);
	get_u32(x, cs_map_get(n, "cache_size"), "gateway.dns.cache_size", 0, 1000000, &g->dns_cache_size);
	sv = cs_map_get(n, "servers");
	if (!sv)
		return;
	if (!cs_get_seq(x, sv, "gateway.dns.servers", &cnt)) {
		if (sv->kind == CY_SEQ || cs_is_null(sv))
			cs_err_at(x, sv, "gateway.dns.servers: empty: give 'system' or addresses");
		return;
	}
	g->dns_servers = conf_arena_alloc(x->a, cnt * sizeof(*g->dns_servers));
	g->ndns_servers = 0;
	for (size_t i = 0; i < cnt; i++) {
		const struct cy_node *it = sv->items[i];
		struct conf_dns_server *ds = &g->dns_servers[g->ndns_servers];
		char p[PATHSZ], buf[80];

		cs_pathf(p, "gateway.dns.servers", "[%zu]", i);
		if (!scalar(x, it, p, "'system' or an address"))
			continue;
		ds->pos = cs_pos_of(it);
		if (strcmp(it->str, "system") == 0) {
			ds->kind = CONF_DNS_SYSTEM;
			g->ndns_servers++;
			continue;
		}
		ds->kind = CONF_DNS_ADDR;
		/* A bare address means port 53. */
		struct sockaddr_in *sin = (struct sockaddr_in *)&ds->addr;
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ds->addr;

		if (inet_pton(AF_INET, it->str, &sin->sin_addr) == 1) {
			sin->sin_family = AF_INET;
			sin->sin_port = htons(53);
			ds->addrlen = sizeof(*sin);
		} else if (inet_pton(AF_INET6, it->str, &sin6->sin6_addr) == 1) {
			sin6->sin6_family = AF_INET6;
			sin6->sin6_port = htons(53);
			ds->addrlen = sizeof(*sin6);
		} else {
			struct conf_hostport hp;
			size_t before = x->errors;

			if (!get_hostport(x, it, p, &hp)) {
				if (x->errors == before)
					cs_err_at(x, it, "%s: expected 'system', IP or IP:PORT, got '%s'", p,
					       shown(it, buf, sizeof(buf)));
				continue;
			}
			memcpy(&ds->addr, &hp.addr, sizeof(hp.addr));
			ds->addrlen = hp.addrlen;
		}
		g->ndns_servers++;
	}
}

static void
load_gateway(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "workers", "listen", "clients", "dns", "limits",
					    "access_log", NULL };
	static const char *const lkeys[] = { "forward", "socks", NULL };
	static const char *const limkeys[] = { "max_connections", "max_header_bytes",
					       "connect_timeout_ms", "idle_timeout_ms",
					       "response_timeout_ms", "body_timeout_ms",
					       "body_min_rate", "body_min_rate_grace_ms", NULL };
	struct conf_gateway *g = &x->c->gateway;
	const struct cy_node *w, *l, *lim, *cl, *al, *bt;
	size_t cnt;

	if (!cs_expect_map(x, n, "gateway", keys))
		return;
	w = cs_map_get(n, "workers");
	if (w && !(w->kind == CY_SCALAR && w->plain && strcmp(w->str, "auto") == 0)) {
		if (w->kind == CY_SCALAR && w->plain && !isdigit((unsigned char)w->str[0]) &&
		    w->str[0] != '-') {
			char buf[64];

			cs_err_at(x, w, "gateway.workers: expected auto or an integer in 1..256, got '%s'",
			       shown(w, buf, sizeof(buf)));
		} else {
			get_u32(x, w, "gateway.workers", 1, 256, &g->workers);
		}
	}
	l = cs_map_get(n, "listen");
	if (l && cs_is_null(l)) {
		memset(&g->listen_forward, 0, sizeof(g->listen_forward));
		memset(&g->listen_socks, 0, sizeof(g->listen_socks));
	} else if (cs_expect_map(x, l, "gateway.listen", lkeys)) {
		get_hostport(x, cs_map_get(l, "forward"), "gateway.listen.forward", &g->listen_forward);
		get_hostport(x, cs_map_get(l, "socks"), "gateway.listen.socks", &g->listen_socks);
		if (g->listen_forward.set && g->listen_socks.set &&
		    g->listen_forward.port == g->listen_socks.port &&
		    g->listen_forward.addrlen == g->listen_socks.addrlen &&
		    memcmp(&g->listen_forward.addr, &g->listen_socks.addr, g->listen_forward.addrlen) == 0)
			cs_err_at(x, cs_map_get(l, "socks"), "gateway.listen.socks: the same address as gateway.listen.forward");
	}
	load_dns(x, cs_map_get(n, "dns"));
	lim = cs_map_get(n, "limits");
	if (cs_expect_map(x, lim, "gateway.limits", limkeys)) {
		get_u32(x, cs_map_get(lim, "max_connections"), "gateway.limits.max_connections",
			1, 1000000, &g->max_connections);
		get_u32(x, cs_map_get(lim, "max_header_bytes"), "gateway.limits.max_header_bytes",
			1024, 1048576, &g->max_header_bytes);
		get_u32(x, cs_map_get(lim, "connect_timeout_ms"), "gateway.limits.connect_timeout_ms",
			100, 600000, &g->connect_timeout_ms);
		get_u32(x, cs_map_get(lim, "idle_timeout_ms"), "gateway.limits.idle_timeout_ms",
			1000, 86400000, &g->idle_timeout_ms);
		get_u32(x, cs_map_get(lim, "response_timeout_ms"),
			"gateway.limits.response_timeout_ms", 100, 86400000, &g->response_timeout_ms);
		bt = cs_map_get(lim, "body_timeout_ms");
		if (get_u32(x, bt, "gateway.limits.body_timeout_ms", 0, 86400000, &g->body_timeout_ms) &&
		    g->body_timeout_ms > 0 && g->body_timeout_ms < 100)
			cs_err_at(x, bt, "gateway.limits.body_timeout_ms: %u is out of range: 0 (no limit) "
				  "or 100..86400000", g->body_timeout_ms);
		get_u32(x, cs_map_get(lim, "body_min_rate"), "gateway.limits.body_min_rate", 0,
			1073741824, &g->body_min_rate);
		get_u32(x, cs_map_get(lim, "body_min_rate_grace_ms"),
			"gateway.limits.body_min_rate_grace_ms", 100, 86400000,
			&g->body_min_rate_grace_ms);
	}
	al = cs_map_get(n, "access_log");
	if (cs_get_str(x, al, "gateway.access_log", &g->access_log) &&
	    strcmp(g->access_log, "stderr") != 0 && strcmp(g->access_log, "off") != 0 &&
	    g->access_log[0] != '/')
		cs_err_at(x, al, "gateway.access_log: expected stderr, off or an absolute path");
	cl = cs_map_get(n, "clients");
	if (cs_get_seq(x, cl, "gateway.clients", &cnt)) {
		g->clients = conf_arena_alloc(x->a, cnt * sizeof(*g->clients));
		g->nclients = cnt;
		for (size_t i = 0; i < cnt; i++) {
			char p[PATHSZ];

			cs_pathf(p, "gateway.clients", "[%zu]", i);
			load_client(x, cl->items[i], p, &g->clients[i]);
		}
		check_unique(x, cl, "client", "gateway.clients", g->clients, cnt,
			     sizeof(*g->clients), offsetof(struct conf_client, name));
		for (size_t i = 0; i < cnt; i++) {
			for (size_t j = 0; j < i; j++) {
				struct conf_client *a = &g->clients[i], *b = &g->clients[j];

				if (a->match == CONF_MATCH_USER && b->match == CONF_MATCH_USER &&
				    a->user && b->user && strcmp(a->user, b->user) == 0) {
					cs_err_at(x, cs_map_get(cs_map_get(cl->items[i], "match"), "user"),
					       "gateway.clients[%zu].match.user: user '%s' is already client '%s'",
					       i, a->user, b->name ? b->name : "?");
					break;
				}
			}
		}
	}
}

static void
load_lanes(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "name", "subnet", "doors", "transparent", NULL };
	static const char *const dkeys[] = { "forward", "socks", "intercept", "dns", "names",
					     NULL };
	struct conf *c = x->c;
	size_t cnt;

	if (!cs_get_seq(x, n, "lanes", &cnt))
		return;
	c->lanes = conf_arena_alloc(x->a, cnt * sizeof(*c->lanes));
	c->nlanes = cnt;
	for (size_t i = 0; i < cnt; i++) {
		const struct cy_node *it = n->items[i], *sub, *doors;
		struct conf_lane *ln = &c->lanes[i];
		char p[PATHSZ], q[PATHSZ];

		cs_pathf(p, "lanes", "[%zu]", i);
		if (!cs_expect_map(x, it, p, keys)) {
			if (cs_is_null(it))
				cs_err_at(x, it, "%s: expected a mapping, got nothing", p);
			continue;
		}
		ln->pos = cs_pos_of(it);
		get_name(x, it, p, &ln->name);
		sub = cs_map_get(it, "subnet");
		if (!sub) {
			cs_err_at(x, it, "%s: missing required key 'subnet'", p);
		} else if (get_cidr(x, sub, (cs_pathf(q, p, ".subnet"), q), &ln->subnet)) {
			/* A lane needs a gateway address, a broadcast and room
			 * for sandboxes; IPv6 lanes come later. */
			if (ln->subnet.family != AF_INET) {
				cs_err_at(x, sub, "%s: lanes are IPv4 subnets for now", q);
				ln->subnet.family = 0;
			} else if (ln->subnet.prefix < 8 || ln->subnet.prefix > 29) {
				cs_err_at(x, sub, "%s: prefix length /%u is out of range /8../29", q,
				       ln->subnet.prefix);
				ln->subnet.family = 0;
			}
		}
		cs_get_bool(x, cs_map_get(it, "transparent"), (cs_pathf(q, p, ".transparent"), q), &ln->transparent);
		doors = cs_map_get(it, "doors");
		cs_pathf(q, p, ".doors");
		if (cs_expect_map(x, doors, q, dkeys)) {
			const char *dn[3] = { "forward", "socks", "intercept" };
			uint16_t *dv[3] = { &ln->door_forward, &ln->door_socks, &ln->door_intercept };
			uint32_t v;

			for (int k = 0; k < 3; k++) {
				char r[PATHSZ];

				cs_pathf(r, q, ".%s", dn[k]);
				if (get_u32(x, cs_map_get(doors, dn[k]), r, 1, 65535, &v))
					*dv[k] = (uint16_t)v;
			}
			for (int k = 0; k < 3; k++)
				for (int j = 0; j < k; j++)
					if (*dv[k] && *dv[k] == *dv[j])
						cs_err_at(x, cs_map_get(doors, dn[k]), "%s.%s: port %u is already the %s door",
						       q, dn[k], *dv[k], dn[j]);
			ln->egress = ln->door_forward || ln->door_socks || ln->door_intercept;
			/* DNS is UDP and TCP: its port may be a TCP door's only
			 * if that door is not there. */
			if (ln->egress) {
				char r[PATHSZ];

				ln->door_dns = 53;
				cs_pathf(r, q, ".dns");
				if (get_u32(x, cs_map_get(doors, "dns"), r, 1, 65535, &v))
					ln->door_dns = (uint16_t)v;
				for (int k = 0; k < 3; k++)
					if (*dv[k] == ln->door_dns)
						cs_err_at(x, cs_map_get(doors, "dns") ? cs_map_get(doors, "dns")
										     : cs_map_get(doors, dn[k]),
							  "%s.dns: port %u is already the %s door", q,
							  ln->door_dns, dn[k]);
				cs_pathf(r, q, ".names");
				if (get_u32(x, cs_map_get(doors, "names"), r, 1, 65535, &v)) {
					ln->door_names = (uint16_t)v;
					for (int k = 0; k < 3; k++)
						if (*dv[k] == ln->door_names)
							cs_err_at(x, cs_map_get(doors, "names"),
								  "%s.names: port %u is already the %s "
								  "door", q, ln->door_names, dn[k]);
					if (ln->door_names == ln->door_dns)
						cs_err_at(x, cs_map_get(doors, "names"),
							  "%s.names: port %u is already the dns door", q,
							  ln->door_names);
				} else if (!cs_map_get(doors, "names")) {
					for (uint16_t p0 = 3130; p0 < 3140 && !ln->door_names; p0++)
						if (p0 != ln->door_forward && p0 != ln->door_socks &&
						    p0 != ln->door_intercept && p0 != ln->door_dns)
							ln->door_names = p0;
				}
			} else if (cs_map_get(doors, "dns") || cs_map_get(doors, "names")) {
				cs_err_at(x, cs_map_get(doors, "dns") ? cs_map_get(doors, "dns")
								     : cs_map_get(doors, "names"),
					  "%s: a lane without doors has no DNS or name door", q);
			}
		}
		if (ln->transparent && !ln->egress)
			cs_err_at(x, cs_map_get(it, "transparent"),
			       "%s.transparent: a lane without doors has nothing to redirect to", p);
		if (ln->transparent && ln->egress && (!ln->door_forward || !ln->door_intercept))
			cs_err_at(x, cs_map_get(it, "transparent"),
			       "%s.transparent: needs both a forward and an intercept door", p);
	}
	check_unique(x, n, "lane", "lanes", c->lanes, cnt, sizeof(*c->lanes),
		     offsetof(struct conf_lane, name));
	for (size_t i = 0; i < cnt; i++) {
		for (size_t j = 0; j < i; j++) {
			struct conf_lane *a = &c->lanes[i], *b = &c->lanes[j];
			char ta[64], tb[64];

			if (!a->subnet.family || !b->subnet.family ||
			    !conf_cidr_overlap(&a->subnet, &b->subnet))
				continue;
			cidr_text(&a->subnet, ta, sizeof(ta));
			cidr_text(&b->subnet, tb, sizeof(tb));
			cs_err_at(x, cs_map_get(n->items[i], "subnet"),
			       "lanes[%zu].subnet: %s overlaps lane '%s' (%s)", i, ta,
			       b->name ? b->name : "?", tb);
			break;
		}
	}
}

/* The keys of a policies[] entry, and of a saved layer (the same plus
 * tenant_egress). */
#define POLICY_KEYS "name", "mode", "allow", "deny", "intercept", "credentials", "allow_private"

/* One policies[] entry (or a saved layer) at `p`, into po; `keys` are the
 * keys the mapping may hold. Strings go to x->a. */
static void
load_policy(struct ctx *x, const struct cy_node *it, const char *p, const char *const *keys,
	    struct conf_policy *po, bool saved)
{
	static const char *const modes[] = { "enforce", "report", NULL };
	const enum cs_wild grants = saved ? CS_WILD_ANY : CS_WILD_SITES;
	const struct cy_node *ap;
	char q[PATHSZ];
	size_t k;
	int v;

	if (!cs_expect_map(x, it, p, keys)) {
		if (cs_is_null(it))
			cs_err_at(x, it, "%s: expected a mapping, got nothing", p);
		return;
	}
	po->pos = cs_pos_of(it);
	get_name(x, it, p, &po->name);
	if (cs_get_enum(x, cs_map_get(it, "mode"), (cs_pathf(q, p, ".mode"), q), modes, &v))
		po->mode = (enum conf_policy_mode)v;
	get_hostpats(x, cs_map_get(it, "allow"), (cs_pathf(q, p, ".allow"), q), grants, &po->allow);
	get_hostpats(x, cs_map_get(it, "deny"), (cs_pathf(q, p, ".deny"), q), CS_WILD_ANY,
		     &po->deny);
	get_hostpats(x, cs_map_get(it, "intercept"), (cs_pathf(q, p, ".intercept"), q), grants,
		     &po->intercept);
	ap = cs_map_get(it, "allow_private");
	cs_pathf(q, p, ".allow_private");
	if (cs_get_seq(x, ap, q, &k)) {
		po->allow_private.v = conf_arena_alloc(x->a, k * sizeof(struct conf_cidr));
		for (size_t j = 0; j < k; j++) {
			char r[PATHSZ];

			cs_pathf(r, q, "[%zu]", j);
			if (get_cidr(x, ap->items[j], r, &po->allow_private.v[po->allow_private.n]))
				po->allow_private.n++;
		}
	}
	cs_pathf(q, p, ".credentials");
	cs_load_credentials(x, cs_map_get(it, "credentials"), q, po,
			    saved ? CS_CRED_SAVED : CS_CRED_CONF);
}

static void
load_policies(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { POLICY_KEYS, NULL };
	struct conf *c = x->c;
	size_t cnt;

	if (!cs_get_seq(x, n, "policies", &cnt))
		return;
	c->policies = conf_arena_alloc(x->a, cnt * sizeof(*c->policies));
	c->npolicies = cnt;
	for (size_t i = 0; i < cnt; i++) {
		char p[PATHSZ];

		cs_pathf(p, "policies", "[%zu]", i);
		load_policy(x, n->items[i], p, keys, &c->policies[i], false);
	}
	check_unique(x, n, "policy", "policies", c->policies, cnt, sizeof(*c->policies),
		     offsetof(struct conf_policy, name));
}

static void
load_tenants(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "name", "keys", "egress", "max_claims", "pools", NULL };
	struct conf *c = x->c;
	size_t cnt;

	if (!cs_get_seq(x, n, "tenants", &cnt))
		return;
	c->tenants = conf_arena_alloc(x->a, cnt * sizeof(*c->tenants));
	c->ntenants = cnt;
	for (size_t i = 0; i < cnt; i++) {
		const struct cy_node *it = n->items[i], *ks, *eg, *pl;
		struct conf_tenant *t = &c->tenants[i];
		char p[PATHSZ], q[PATHSZ];
		size_t k;

		cs_pathf(p, "tenants", "[%zu]", i);
		if (!cs_expect_map(x, it, p, keys)) {
			if (cs_is_null(it))
				cs_err_at(x, it, "%s: expected a mapping, got nothing", p);
			continue;
		}
		t->pos = cs_pos_of(it);
		get_name(x, it, p, &t->name);
		ks = cs_map_get(it, "keys");
		cs_pathf(q, p, ".keys");
		if (!ks) {
			cs_err_at(x, it, "%s: missing required key 'keys'", p);
		} else if (cs_get_seq(x, ks, q, &k)) {
			t->keys = conf_arena_alloc(x->a, k * sizeof(*t->keys));
			for (size_t j = 0; j < k; j++) {
				char r[PATHSZ];

				cs_pathf(r, q, "[%zu]", j);
				if (cs_get_secret(x, ks->items[j], r, &t->keys[t->nkeys]))
					t->nkeys++;
			}
		} else if (ks->kind == CY_SEQ || cs_is_null(ks)) {
			cs_err_at(x, ks, "%s: empty: a tenant needs at least one key", q);
		}
		eg = cs_map_get(it, "egress");
		if (eg) {
			t->has_egress = true;
			get_hostpats(x, eg, (cs_pathf(q, p, ".egress"), q), CS_WILD_SITES,
				     &t->egress);
		}
		get_u32(x, cs_map_get(it, "max_claims"), (cs_pathf(q, p, ".max_claims"), q), 0, 100000,
			&t->max_claims);
		pl = cs_map_get(it, "pools");
		cs_pathf(q, p, ".pools");
		if (cs_get_seq(x, pl, q, &k)) {
			t->pools = conf_arena_alloc(x->a, k * sizeof(*t->pools));
			for (size_t j = 0; j < k; j++) {
				char r[PATHSZ];

				cs_pathf(r, q, "[%zu]", j);
				if (cs_get_str(x, pl->items[j], r, &t->pools[t->npools]))
					t->npools++;
			}
		}
	}
	check_unique(x, n, "tenant", "tenants", c->tenants, cnt, sizeof(*c->tenants),
		     offsetof(struct conf_tenant, name));
	/* A key names its tenant: two tenants may not share one. */
	for (size_t i = 0; i < cnt; i++)
		for (size_t a = 0; a < c->tenants[i].nkeys; a++)
			for (size_t j = 0; j <= i; j++)
				for (size_t b = 0; b < (j == i ? a : c->tenants[j].nkeys); b++) {
					const struct conf_secret *s1 = &c->tenants[i].keys[a];
					const struct conf_secret *s2 = &c->tenants[j].keys[b];
					struct cy_node where = { .line = s1->pos.line, .col = s1->pos.col };

					if (s1->len == s2->len && memcmp(s1->value, s2->value, s1->len) == 0)
						cs_err_at(x, &where, "tenants[%zu].keys[%zu]: the same key as at %u:%u; "
						       "every key must name one tenant", i, a, s2->pos.line, s2->pos.col);
				}
}

/* pools[i].supervisor: only with backend rpc, and then required, with
 * exactly one of command (a list: an absolute path, then its arguments)
 * and socket (an absolute path that fits a unix socket address). */
/* Does a pool of base have exactly this supervisor command? */
static bool
command_in(const struct conf *base, char *const *argv, size_t argc)
{
	for (size_t i = 0; base && i < base->npools; i++) {
		const struct conf_pool *b = &base->pools[i];
		size_t k;

		if (b->supervisor_argc != argc)
			continue;
		for (k = 0; k < argc && strcmp(b->supervisor_argv[k], argv[k]) == 0; k++)
			;
		if (k == argc)
			return true;
	}
	return false;
}

static void
load_supervisor(struct ctx *x, const struct cy_node *it, const char *p, struct conf_pool *po)
{
	static const char *const skeys[] = { "command", "socket", NULL };
	const struct cy_node *sv = cs_map_get(it, "supervisor"), *cmd, *sock;
	char q[PATHSZ], r[PATHSZ];
	size_t k;

	cs_pathf(q, p, ".supervisor");
	/* Its own keys first (an unknown key says enough), whatever the
	 * backend. */
	k = x->errors;
	if (sv && !cs_is_null(sv) && (!cs_expect_map(x, sv, q, skeys) || x->errors != k))
		return;
	if (po->backend != CONF_BACKEND_RPC) {
		if (sv)
			cs_err_at(x, sv, "%s: only a pool with backend rpc has a supervisor", q);
		return;
	}
	if (!sv || cs_is_null(sv)) {
		cs_err_at(x, it, "%s: backend rpc needs a supervisor: {command: [PATH, ARGS...]} "
			  "or {socket: PATH}", p);
		return;
	}
	cmd = cs_map_get(sv, "command");
	sock = cs_map_get(sv, "socket");
	if ((cmd != NULL) == (sock != NULL)) {
		cs_err_at(x, sv, "%s: give exactly one of command and socket", q);
		return;
	}
	if (sock) {
		cs_pathf(r, q, ".socket");
		if (cs_get_str(x, sock, r, &po->supervisor_socket) &&
		    (po->supervisor_socket[0] != '/' || strlen(po->supervisor_socket) >= 108)) {
			cs_err_at(x, sock, "%s: expected an absolute path of a unix socket "
				  "(under 108 bytes)", r);
			po->supervisor_socket = NULL;
		}
		return;
	}
	cs_pathf(r, q, ".command");
	if (!cs_get_seq(x, cmd, r, &k)) {
		if (cmd->kind == CY_SEQ || cs_is_null(cmd))
			cs_err_at(x, cmd, "%s: expected [PATH, ARGS...], got an empty list", r);
		return;
	}
	if (k > 64) {
		cs_err_at(x, cmd, "%s: %zu arguments; at most 64", r, k);
		return;
	}
	po->supervisor_argv = conf_arena_alloc(x->a, (k + 1) * sizeof(char *));
	for (size_t i = 0; i < k; i++) {
		char a[PATHSZ];

		cs_pathf(a, r, "[%zu]", i);
		if (!cs_get_str(x, cmd->items[i], a, &po->supervisor_argv[i])) {
			po->supervisor_argv = NULL;
			return;
		}
	}
	po->supervisor_argv[k] = NULL;
	if (x->paths && !command_in(x->base, po->supervisor_argv, k)) {
		/* a pool set through the API: its caller must not get a
		 * command of its own run as root */
		cs_err_at(x, cmd, "%s: a supervisor command is set only in the configuration file "
			  "(the API may name one of its commands, or a socket)", r);
		po->supervisor_argv = NULL;
		return;
	}
	if (po->supervisor_argv[0][0] != '/') {
		cs_err_at(x, cmd->items[0], "%s[0]: expected the supervisor's absolute path, got '%s'",
			  r, po->supervisor_argv[0]);
		po->supervisor_argv = NULL;
		return;
	}
	po->supervisor_argc = k;
}

static void
load_pools(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "name", "backend", "template", "lane", "policy", "warm",
					    "warm_max", "limits", "ttl", "supervisor", "isolation", NULL };
	static const char *const lkeys[] = { "memory_mb", "cpus", "pids", NULL };
	static const char *const tkeys[] = { "default_seconds", "max_seconds", NULL };
	static const char *const backends[] = { "ns", "vm", "rpc", NULL };
	static const char *const isolations[] = { "standard", "enhanced", NULL };
	struct conf *c = x->c;
	size_t cnt;

	if (!cs_get_seq(x, n, "pools", &cnt))
		return;
	c->pools = conf_arena_alloc(x->a, cnt * sizeof(*c->pools));
	c->npools = cnt;
	for (size_t i = 0; i < cnt; i++) {
		const struct cy_node *it = n->items[i], *tp, *lim, *ttl, *wm;
		struct conf_pool *po = &c->pools[i];
		char p[PATHSZ], q[PATHSZ];
		int v;

		/* Defaults, before a possibly short-circuited item. */
		po->warm = 0;
		po->warm_max = 4;
		po->memory_mb = 256;
		po->cpus_milli = 1000;
		po->pids = 256;
		po->ttl_default_s = 3600;
		po->ttl_max_s = 86400;
		cs_pathf(p, "pools", "[%zu]", i);
		if (!cs_expect_map(x, it, p, keys)) {
			if (cs_is_null(it))
				cs_err_at(x, it, "%s: expected a mapping, got nothing", p);
			continue;
		}
		po->pos = cs_pos_of(it);
		get_name(x, it, p, &po->name);
		if (cs_get_enum(x, cs_map_get(it, "backend"), (cs_pathf(q, p, ".backend"), q), backends, &v))
			po->backend = (enum conf_backend)v;
		load_supervisor(x, it, p, po);
		if (cs_get_enum(x, cs_map_get(it, "isolation"), (cs_pathf(q, p, ".isolation"), q),
				isolations, &v)) {
			po->isolation = (enum conf_isolation)v;
			if (po->isolation == CONF_ISOLATION_ENHANCED && po->backend != CONF_BACKEND_RPC)
				cs_err_at(x, cs_map_get(it, "isolation"),
					  "%s: enhanced isolation is an rpc supervisor's (its operator's "
					  "runtime); backend %s has one level",
					  q, po->backend == CONF_BACKEND_VM ? "vm" : "ns");
		}
		tp = cs_map_get(it, "template");
		if (cs_get_str(x, tp, (cs_pathf(q, p, ".template"), q), &po->template_dir)) {
			if (strcmp(po->template_dir, "busybox") == 0) {
				po->template_kind = CONF_TEMPLATE_BUSYBOX;
				po->template_dir = NULL;
			} else if (strcmp(po->template_dir, "host") == 0) {
				po->template_kind = CONF_TEMPLATE_HOST;
				po->template_dir = NULL;
			} else if (po->template_dir[0] == '/') {
				po->template_kind = CONF_TEMPLATE_DIR;
			} else {
				cs_err_at(x, tp, "%s: expected busybox, host or an absolute directory path", q);
				po->template_dir = NULL;
			}
		}
		if (!cs_map_get(it, "lane"))
			cs_err_at(x, it, "%s: missing required key 'lane'", p);
		else
			cs_get_str(x, cs_map_get(it, "lane"), (cs_pathf(q, p, ".lane"), q), &po->lane);
		if (!cs_map_get(it, "policy"))
			cs_err_at(x, it, "%s: missing required key 'policy'", p);
		else
			cs_get_str(x, cs_map_get(it, "policy"), (cs_pathf(q, p, ".policy"), q), &po->policy);
		get_u32(x, cs_map_get(it, "warm"), (cs_pathf(q, p, ".warm"), q), 0, 1000, &po->warm);
		wm = cs_map_get(it, "warm_max");
		if (!wm && po->warm > po->warm_max)
			po->warm_max = po->warm;
		if (get_u32(x, wm, (cs_pathf(q, p, ".warm_max"), q), 0, 1000, &po->warm_max) &&
		    po->warm > po->warm_max)
			cs_err_at(x, cs_map_get(it, "warm"), "%s.warm: warm (%u) is greater than warm_max (%u)",
			       p, po->warm, po->warm_max);
		lim = cs_map_get(it, "limits");
		cs_pathf(q, p, ".limits");
		if (cs_expect_map(x, lim, q, lkeys)) {
			const struct cy_node *cpu = cs_map_get(lim, "cpus");
			char r[PATHSZ];

			get_u32(x, cs_map_get(lim, "memory_mb"), (cs_pathf(r, q, ".memory_mb"), r), 16, 1048576,
				&po->memory_mb);
			get_u32(x, cs_map_get(lim, "pids"), (cs_pathf(r, q, ".pids"), r), 8, 4194304, &po->pids);
			cs_pathf(r, q, ".cpus");
			if (cpu && scalar(x, cpu, r, "a number of CPUs")) {
				char *end, buf[64];
				double d;

				errno = 0;
				d = strtod(cpu->str, &end);
				if (!cpu->plain || *end || end == cpu->str || errno ||
				    !isdigit((unsigned char)cpu->str[0]))
					cs_err_at(x, cpu, "%s: expected a number of CPUs like 0.5 or 2, got '%s'",
					       r, shown(cpu, buf, sizeof(buf)));
				else if (d < 0.01 || d > 1024)
					cs_err_at(x, cpu, "%s: %s is out of range 0.01..1024", r,
					       shown(cpu, buf, sizeof(buf)));
				else
					po->cpus_milli = (uint32_t)(d * 1000 + 0.5);
			}
		}
		ttl = cs_map_get(it, "ttl");
		cs_pathf(q, p, ".ttl");
		if (cs_expect_map(x, ttl, q, tkeys)) {
			char r[PATHSZ];

			get_u32(x, cs_map_get(ttl, "max_seconds"), (cs_pathf(r, q, ".max_seconds"), r), 1,
				31536000, &po->ttl_max_s);
			if (get_u32(x, cs_map_get(ttl, "default_seconds"), (cs_pathf(r, q, ".default_seconds"), r),
				    1, 31536000, &po->ttl_default_s) &&
			    po->ttl_default_s > po->ttl_max_s)
				cs_err_at(x, cs_map_get(ttl, "default_seconds"),
				       "%s: default_seconds (%u) is greater than max_seconds (%u)", r,
				       po->ttl_default_s, po->ttl_max_s);
		}
	}
	check_unique(x, n, "pool", "pools", c->pools, cnt, sizeof(*c->pools),
		     offsetof(struct conf_pool, name));
}

static void
load_certs(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "ca_cert", "ca_key", "upstream_ca", "cache_size",
					    "leaf_validity_days", NULL };
	struct conf_certs *ce = &x->c->certs;

	if (!cs_expect_map(x, n, "certs", keys))
		return;
	if (cs_get_str(x, cs_map_get(n, "ca_cert"), "certs.ca_cert", &ce->ca_cert) && ce->ca_cert[0] != '/')
		cs_err_at(x, cs_map_get(n, "ca_cert"), "certs.ca_cert: must be an absolute path");
	if (cs_get_str(x, cs_map_get(n, "ca_key"), "certs.ca_key", &ce->ca_key) && ce->ca_key[0] != '/')
		cs_err_at(x, cs_map_get(n, "ca_key"), "certs.ca_key: must be an absolute path");
	if (cs_get_str(x, cs_map_get(n, "upstream_ca"), "certs.upstream_ca", &ce->upstream_ca) &&
	    ce->upstream_ca[0] != '/')
		cs_err_at(x, cs_map_get(n, "upstream_ca"), "certs.upstream_ca: must be an absolute path");
	get_u32(x, cs_map_get(n, "cache_size"), "certs.cache_size", 1, 1000000, &ce->cache_size);
	/* 397 days: the longest server certificate browsers and the CA/B
	 * Forum baseline accept. */
	get_u32(x, cs_map_get(n, "leaf_validity_days"), "certs.leaf_validity_days", 1, 397,
		&ce->leaf_validity_days);
}

/* The CA's files default to daemon.data_dir/ca.pem and ca.key, so that a
 * daemon with its own data_dir (tests, a second instance) has its own CA. */
static void
certs_in_data_dir(struct ctx *x)
{
	struct conf_certs *ce = &x->c->certs;
	const char *dir = x->c->daemon.data_dir;
	size_t n = strlen(dir);
	char *p;

	if (!ce->ca_cert && (p = conf_arena_alloc(x->c->arena, n + sizeof("/ca.pem")))) {
		memcpy(p, dir, n);
		memcpy(p + n, "/ca.pem", sizeof("/ca.pem"));
		ce->ca_cert = p;
	}
	if (!ce->ca_key && (p = conf_arena_alloc(x->c->arena, n + sizeof("/ca.key")))) {
		memcpy(p, dir, n);
		memcpy(p + n, "/ca.key", sizeof("/ca.key"));
		ce->ca_key = p;
	}
}

static void
load_preview(struct ctx *x, const struct cy_node *n)
{
	static const char *const keys[] = { "domain", "listen", NULL };
	struct conf_preview *pv = &x->c->preview;
	const struct cy_node *dn;
	char err[160];

	if (!cs_expect_map(x, n, "preview", keys))
		return;
	dn = cs_map_get(n, "domain");
	if (cs_get_str(x, dn, "preview.domain", &pv->domain)) {
		for (char *s = pv->domain; *s; s++)
			*s = (char)tolower((unsigned char)*s);
		if (conf_host_check(pv->domain, false, err, sizeof(err)) < 0) {
			cs_err_at(x, dn, "preview.domain: bad domain: %s", err);
			pv->domain = NULL;
		}
	}
	get_hostport(x, cs_map_get(n, "listen"), "preview.listen", &pv->listen);
}

/* The pools' lanes and policies, once lanes, policies and pools are loaded;
 * `seq` is the pools list node. */
static void
link_pool_refs(struct ctx *x, const struct cy_node *seq)
{
	struct conf *c = x->c;

	for (size_t i = 0; i < c->npools; i++) {
		struct conf_pool *po = &c->pools[i];
		char p[PATHSZ];

		if (po->lane) {
			cs_pathf(p, "pools", "[%zu].lane", i);
			resolve_ref(x, cs_map_get(seq->items[i], "lane"), p, "lane", po->lane, c->lanes,
				    c->nlanes, sizeof(*c->lanes), offsetof(struct conf_lane, name),
				    &po->lane_idx);
		}
		if (po->policy) {
			cs_pathf(p, "pools", "[%zu].policy", i);
			resolve_ref(x, cs_map_get(seq->items[i], "policy"), p, "policy", po->policy,
				    c->policies, c->npolicies, sizeof(*c->policies),
				    offsetof(struct conf_policy, name), &po->policy_idx);
		}
	}
}

/* Cross-references, once every section is loaded. */
static void
link_refs(struct ctx *x, const struct cy_node *root)
{
	struct conf *c = x->c;
	const struct cy_node *seq;

	seq = cs_map_get(cs_map_get(root, "gateway"), "clients");
	for (size_t i = 0; i < c->gateway.nclients; i++) {
		struct conf_client *cl = &c->gateway.clients[i];
		char p[PATHSZ];

		if (!cl->policy)
			continue;
		cs_pathf(p, "gateway.clients", "[%zu].policy", i);
		resolve_ref(x, cs_map_get(seq->items[i], "policy"), p, "policy", cl->policy,
			    c->policies, c->npolicies, sizeof(*c->policies),
			    offsetof(struct conf_policy, name), &cl->policy_idx);
	}
	link_pool_refs(x, cs_map_get(root, "pools"));
	seq = cs_map_get(root, "tenants");
	for (size_t i = 0; i < c->ntenants; i++) {
		const struct cy_node *pl = cs_map_get(seq->items[i], "pools");

		for (size_t j = 0; j < c->tenants[i].npools; j++) {
			char p[PATHSZ];
			size_t idx;

			cs_pathf(p, "tenants", "[%zu].pools[%zu]", i, j);
			resolve_ref(x, pl->items[j], p, "pool", c->tenants[i].pools[j], c->pools,
				    c->npools, sizeof(*c->pools), offsetof(struct conf_pool, name), &idx);
		}
	}
}

static void
set_defaults(struct conf *c, struct conf_arena *a)
{
	c->daemon.data_dir = conf_arena_strndup(a, "/var/lib/sluice", 15);
	c->daemon.fleet_netns = conf_arena_strndup(a, "sluice", 6);
	c->daemon.control_socket = conf_arena_strndup(a, "/run/sluice/control.sock", 24);
	c->daemon.idmap_base = 1073741824u;     /* sandbox/'s SBX_IDMAP_BASE */
	c->daemon.idmap_ranges = 8192;          /* and SBX_IDMAP_RANGES */
	c->daemon.log_level = CONF_LOG_INFO;
	c->daemon.log_format = CONF_LOG_TEXT;
	c->api.socket = conf_arena_strndup(a, "/run/sluice/api.sock", 20);
	c->gateway.workers = 0;
	c->gateway.dns_timeout_ms = 2000;
	c->gateway.dns_attempts = 2;
	c->gateway.dns_cache_size = 10000;
	c->gateway.dns_servers = conf_arena_alloc(a, sizeof(*c->gateway.dns_servers));
	c->gateway.dns_servers[0].kind = CONF_DNS_SYSTEM;
	c->gateway.ndns_servers = 1;
	c->gateway.max_connections = 20000;
	c->gateway.max_header_bytes = 65536;
	c->gateway.connect_timeout_ms = 10000;
	c->gateway.idle_timeout_ms = 300000;
	c->gateway.response_timeout_ms = 300000;
	c->gateway.body_timeout_ms = 0;
	/* Apache's mod_reqtimeout default (body=20,MinRate=500). */
	c->gateway.body_min_rate = 500;
	c->gateway.body_min_rate_grace_ms = 20000;
	c->gateway.access_log = conf_arena_strndup(a, "stderr", 6);
	/* certs.ca_cert and ca_key: in daemon.data_dir unless given
	 * (certs_in_data_dir()). */
	c->certs.cache_size = 10000;
	c->certs.leaf_validity_days = 30;
}

/* Default listen addresses, parsed the same way as written ones. */
static void
set_default_listeners(struct ctx *x)
{
	static const struct {
		const char *text;
		size_t off;
	} dl[] = {
		{ "127.0.0.1:8080", offsetof(struct conf, api.listen) },
		{ "127.0.0.1:3128", offsetof(struct conf, gateway.listen_forward) },
		{ "127.0.0.1:1080", offsetof(struct conf, gateway.listen_socks) },
		{ "127.0.0.1:8443", offsetof(struct conf, preview.listen) },
	};

	for (size_t i = 0; i < sizeof(dl) / sizeof(dl[0]); i++) {
		struct cy_node n = { .kind = CY_SCALAR, .plain = true,
				     .str = (char *)(uintptr_t)dl[i].text, .len = strlen(dl[i].text) };

		get_hostport(x, &n, "default", (struct conf_hostport *)((char *)x->c + dl[i].off));
		((struct conf_hostport *)((char *)x->c + dl[i].off))->pos.line = 0;
	}
}

struct conf *
conf_load_mem(const char *name, const char *buf, size_t len, struct conf_diag *d)
{
	static const char *const keys[] = { "daemon", "api", "gateway", "lanes", "policies",
					    "tenants", "pools", "certs", "preview", NULL };
	struct conf_arena *a = conf_arena_new();
	struct ctx x = { .a = a, .file = name, .d = d };
	struct cy_node *root;
	bool ok;

	x.c = conf_arena_alloc(a, sizeof(*x.c));
	x.c->arena = a;
	x.c->refs = 1;
	x.c->path = conf_arena_strndup(a, name, strlen(name));
	set_defaults(x.c, a);
	set_default_listeners(&x);

	root = cy_parse(a, name, buf, len, d, &ok);
	if (!ok)
		x.errors++;
	if (root && root->kind != CY_MAP) {
		cs_err_at(&x, root, "the configuration must be a mapping of sections (daemon, api, gateway, ...)");
	} else if (root && cs_expect_map(&x, root, "the configuration", keys)) {
		load_daemon(&x, cs_map_get(root, "daemon"));
		load_api(&x, cs_map_get(root, "api"));
		load_gateway(&x, cs_map_get(root, "gateway"));
		load_lanes(&x, cs_map_get(root, "lanes"));
		load_policies(&x, cs_map_get(root, "policies"));
		load_tenants(&x, cs_map_get(root, "tenants"));
		load_pools(&x, cs_map_get(root, "pools"));
		load_certs(&x, cs_map_get(root, "certs"));
		load_preview(&x, cs_map_get(root, "preview"));
		link_refs(&x, root);
	}
	certs_in_data_dir(&x);
	conf_diag_sort(d);
	if (x.errors) {
		conf_arena_free(a);
		return NULL;
	}
	return x.c;
}

size_t
conf_load_pools_tree(struct conf *c, const struct conf *base, const struct cy_node *seq,
		     const char *file, const char *const *paths, size_t npaths, struct conf_diag *d)
{
	struct ctx x = { .c = c, .a = c->arena, .file = file, .d = d,
			 .paths = paths, .npaths = npaths, .base = base };

	c->pools = NULL;
	c->npools = 0;
	load_pools(&x, seq);
	link_pool_refs(&x, seq);
	/* The tenants stay: a pool one of them names must stay too, as a YAML
	 * file naming a missing pool is refused. */
	for (size_t i = 0; i < c->ntenants; i++) {
		for (size_t j = 0; j < c->tenants[i].npools; j++) {
			const char *name = c->tenants[i].pools[j];

			if (!conf_pool_find(c, name))
				cs_err_at(&x, seq, "pools: tenant '%s' may claim pool '%s' "
				       "(tenants[%zu].pools[%zu] of the configuration), which "
				       "this set lacks: keep that pool, or edit the tenant first",
				       c->tenants[i].name ? c->tenants[i].name : "?", name, i, j);
		}
	}
	return x.errors;
}

static void
clear_pos(struct conf_hostpats *h)
{
	for (size_t i = 0; i < h->n; i++)
		memset(&h->v[i].pos, 0, sizeof(h->v[i].pos));
}

size_t
conf_load_layer_tree(struct conf_layer *l, const struct cy_node *item, const char *root,
		     const char *file, const char *const *paths, size_t npaths,
		     struct conf_diag *d)
{
	static const char *const keys[] = { POLICY_KEYS, "tenant_egress", NULL };
	struct ctx x = { .a = l->arena, .file = file, .d = d, .paths = paths, .npaths = npaths };
	struct conf_policy *po = conf_arena_alloc(l->arena, sizeof(*po));
	const struct cy_node *eg;
	char q[PATHSZ];

	memset(po, 0, sizeof(*po));
	l->policy = po;
	l->has_narrow = false;
	memset(&l->narrow, 0, sizeof(l->narrow));
	if (!item || item->kind != CY_MAP) {
		cs_err_at(&x, item, "%s: expected a mapping, got %s", root,
		       item ? kind_name(item) : "nothing");
		return x.errors;
	}
	load_policy(&x, item, root, keys, po, true);
	/* Required: a layer that lost its list must not come back wider. */
	eg = cs_map_get(item, "tenant_egress");
	cs_pathf(q, root, ".tenant_egress");
	if (!eg) {
		cs_err_at(&x, item, "%s: missing required key 'tenant_egress' (null: no tenant list)",
		       root);
	} else if (!cs_is_null(eg)) {
		if (eg->kind != CY_SEQ) {
			cs_err_at(&x, eg, "%s: expected a list of host patterns or null, got %s", q,
			       kind_name(eg));
		} else {
			l->has_narrow = true;
			get_hostpats(&x, eg, q, CS_WILD_ANY, &l->narrow);
		}
	}
	if (paths) {
		/* Line numbers index paths, gone after the call: not in the file. */
		memset(&po->pos, 0, sizeof(po->pos));
		clear_pos(&po->allow);
		clear_pos(&po->deny);
		clear_pos(&po->intercept);
		clear_pos(&l->narrow);
		for (size_t i = 0; i < po->allow_private.n; i++)
			memset(&po->allow_private.v[i].pos, 0, sizeof(po->allow_private.v[i].pos));
		for (size_t i = 0; i < po->ncredentials; i++) {
			struct conf_credential *cd = &po->credentials[i];

			memset(&cd->pos, 0, sizeof(cd->pos));
			memset(&cd->host.pos, 0, sizeof(cd->host.pos));
			memset(&cd->value.pos, 0, sizeof(cd->value.pos));
		}
	}
	return x.errors;
}

struct conf *
conf_load_file(const char *path, struct conf_diag *d)
{
	struct conf *c = NULL;
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t r;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		conf_diag_add(d, path, 0, 0, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		conf_diag_add(d, path, 0, 0, "not a regular file");
		goto out;
	}
	if ((uint64_t)st.st_size > CONF_MAX_FILE_BYTES) {
		conf_diag_add(d, path, 0, 0, "larger than %u bytes", CONF_MAX_FILE_BYTES);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		abort();
	while (len < (size_t)st.st_size &&
	       (r = read(fd, buf + len, (size_t)st.st_size - len)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			conf_diag_add(d, path, 0, 0, "cannot read: %s", strerror(errno));
			goto out;
		}
		len += (size_t)r;
	}
	c = conf_load_mem(path, buf, len, d);
out:
	free(buf);
	close(fd);
	return c;
}

struct conf *
conf_ref(struct conf *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
	return c;
}

void
conf_unref(struct conf *c)
{
	if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		conf_arena_free(c->arena);
}

const struct conf_policy *
conf_policy_find(const struct conf *c, const char *name)
{
	for (size_t i = 0; i < c->npolicies; i++)
		if (c->policies[i].name && strcmp(c->policies[i].name, name) == 0)
			return &c->policies[i];
	return NULL;
}

const struct conf_lane *
conf_lane_find(const struct conf *c, const char *name)
{
	for (size_t i = 0; i < c->nlanes; i++)
		if (c->lanes[i].name && strcmp(c->lanes[i].name, name) == 0)
			return &c->lanes[i];
	return NULL;
}

const struct conf_pool *
conf_pool_find(const struct conf *c, const char *name)
{
	for (size_t i = 0; i < c->npools; i++)
		if (c->pools[i].name && strcmp(c->pools[i].name, name) == 0)
			return &c->pools[i];
	return NULL;
}

/* tar.c: the ustar/pax decoder and encoder. See tar.h. Pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"

/* ustar header field offsets and sizes */
#define H_NAME 0
#define H_NAME_LEN 100
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_CHKSUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_LINK_LEN 100
#define H_MAGIC 257
#define H_VERSION 263
#define H_UNAME 265
#define H_GNAME 297
#define H_PREFIX 345
#define H_PREFIX_LEN 155

#define OCTAL11_MAX 077777777777ull     /* 11 octal digits */

/* ---- names ------------------------------------------------------------ */

const char *
agent_tar_name_check(const char *in, size_t len, char *out, size_t cap, bool *is_dir)
{
	size_t o = 0, i = 0;

	*is_dir = false;
	if (cap < AGENT_TAR_NAME_MAX + 1)
		return "name buffer too small";
	if (len == 0)
		return "an empty name";
	if (memchr(in, '\0', len))
		return "a NUL in the name";
	if (in[0] == '/')
		return "an absolute name";
	if (len > AGENT_TAR_NAME_MAX)
		return "a name longer than 4096 bytes";
	/* leading "./" (any number) */
	while (len - i >= 2 && in[i] == '.' && in[i + 1] == '/') {
		i += 2;
		while (i < len && in[i] == '/')
			i++;
	}
	if (len - i == 1 && in[i] == '.')
		i++;
	if (i == len) {
		*is_dir = true; /* the root */
		out[0] = '\0';
		return NULL;
	}
	if (in[len - 1] == '/') {
		*is_dir = true;
		len--;
		if (len > i && in[len - 1] == '/')
			return "an empty component in the name";
	}
	while (i < len) {
		const char *c = in + i;
		const char *slash = memchr(c, '/', len - i);
		size_t clen = slash ? (size_t)(slash - c) : len - i;

		if (clen == 0)
			return "an empty component in the name";
		if (clen == 2 && c[0] == '.' && c[1] == '.')
			return "a '..' component";
		if (clen == 1 && c[0] == '.')
			return "a '.' component";
		if (clen > 255)
			return "a component longer than 255 bytes";
		if (o)
			out[o++] = '/';
		memcpy(out + o, c, clen);
		o += clen;
		i += clen + (slash ? 1 : 0);
		if (slash && i == len)
			return "an empty component in the name";
	}
	out[o] = '\0';
	return NULL;
}

/* ---- numbers ---------------------------------------------------------- */

/* An octal field: optional leading spaces, digits, then NUL or spaces to
 * the end. Or GNU base-256 (first byte 0x80: positive; 0xff: negative).
 * 0, or -1. */
static int
num_parse(const uint8_t *f, size_t n, bool allow_neg, int64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;
	bool digits = false;

	if (f[0] == 0x80 || f[0] == 0xff) {
		bool neg = f[0] == 0xff;

		if (neg && !allow_neg)
			return -1;
		/* at most 8 significant bytes, the top bit clear */
		for (i = 1; i < n - 8; i++)
			if (f[i] != (neg ? 0xff : 0))
				return -1;
		for (; i < n; i++)
			v = (v << 8) | f[i];
		if (!neg && (v >> 63))
			return -1;
		if (neg && !(v >> 63))
			return -1;
		*out = (int64_t)v;
		return 0;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
		digits = true;
	}
	for (; i < n; i++)
		if (f[i] != '\0' && f[i] != ' ')
			return -1;
	if (!digits)
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* ---- decoder ---------------------------------------------------------- */

void
agent_tar_dec_init(struct agent_tar_dec *d)
{
	d->state = AGENT_TDS_HEADER;
	d->blen = 0;
	d->ext_len = d->ext_want = 0;
	d->has_path = d->has_link = d->has_size = d->has_mtime = false;
	d->ext_seen = 0;
	d->left = d->pad = d->offset = d->entries = 0;
	d->err[0] = '\0';
	d->err_entry[0] = '\0';
}

static enum agent_tar_dec_result
fail(struct agent_tar_dec *d, const char *entry, size_t elen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum agent_tar_dec_result
fail(struct agent_tar_dec *d, const char *entry, size_t elen, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (elen > AGENT_TAR_NAME_MAX)
		elen = AGENT_TAR_NAME_MAX;
	if (entry)
		memcpy(d->err_entry, entry, elen);
	d->err_entry[entry ? elen : 0] = '\0';
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	n = strlen(d->err);
	if (d->err_entry[0] && n < sizeof(d->err))
		snprintf(d->err + n, sizeof(d->err) - n, " (entry \"%.*s\")", 200,
			 d->err_entry);
	d->state = AGENT_TDS_ERROR;
	return AGENT_TAR_ERROR;
}

static bool
is_zero(const uint8_t *b)
{
	for (size_t i = 0; i < AGENT_TAR_BLOCK; i++)
		if (b[i])
			return false;
	return true;
}

/* The raw name of the header in d->blk (prefix/name or the pax/GNU one)
 * into buf; returns its length. */
static size_t
raw_name(struct agent_tar_dec *d, char *buf, bool posix)
{
	size_t n, p = 0;

	if (d->has_path) {
		n = strlen(d->path);
		memcpy(buf, d->path, n + 1);
		return n;
	}
	if (posix && d->blk[H_PREFIX]) {
		p = strnlen((const char *)d->blk + H_PREFIX, H_PREFIX_LEN);
		memcpy(buf, d->blk + H_PREFIX, p);
		buf[p++] = '/';
	}
	n = strnlen((const char *)d->blk + H_NAME, H_NAME_LEN);
	memcpy(buf + p, d->blk + H_NAME, n);
	buf[p + n] = '\0';
	return p + n;
}

/* pax records "LEN key=value\n" in d->ext[0..ext_len). */
static enum agent_tar_dec_result
pax_parse(struct agent_tar_dec *d, bool global)
{
	size_t i = 0;

	while (i < d->ext_len) {
		size_t rl = 0, j = i, klen, vlen;
		const char *k, *eq, *v;

		while (j < d->ext_len && d->ext[j] >= '0' && d->ext[j] <= '9' && j - i < 6) {
			rl = rl * 10 + (size_t)(d->ext[j] - '0');
			j++;
		}
		if (j == i || j >= d->ext_len || d->ext[j] != ' ' || rl < 5 ||
		    rl > d->ext_len - i || d->ext[i + rl - 1] != '\n')
			return fail(d, NULL, 0, "a malformed pax record at offset %" PRIu64,
				    d->offset);
		k = (const char *)d->ext + j + 1;
		eq = memchr(k, '=', (size_t)((const char *)d->ext + i + rl - 1 - k));
		if (!eq || eq == k)
			return fail(d, NULL, 0, "a pax record without key=value at offset %" PRIu64,
				    d->offset);
		klen = (size_t)(eq - k);
		v = eq + 1;
		vlen = (size_t)((const char *)d->ext + i + rl - 1 - v);
		i += rl;
		if (global)
			continue;
		if ((klen == 4 && memcmp(k, "path", 4) == 0) ||
		    (klen == 8 && memcmp(k, "linkpath", 8) == 0)) {
			bool path = klen == 4;
			char *dst = path ? d->path : d->lpath;

			if (vlen == 0 || vlen > AGENT_TAR_NAME_MAX || memchr(v, '\0', vlen))
				return fail(d, v, vlen, "a bad pax %s", path ? "path" : "linkpath");
			memcpy(dst, v, vlen);
			dst[vlen] = '\0';
			if (path)
				d->has_path = true;
			else
				d->has_link = true;
		} else if (klen == 4 && memcmp(k, "size", 4) == 0) {
			uint64_t s = 0;

			if (vlen == 0 || vlen > 19)
				return fail(d, NULL, 0, "a bad pax size");
			for (size_t q = 0; q < vlen; q++) {
				if (v[q] < '0' || v[q] > '9')
					return fail(d, NULL, 0, "a bad pax size");
				s = s * 10 + (uint64_t)(v[q] - '0');
			}
			if (s > (uint64_t)INT64_MAX)
				return fail(d, NULL, 0, "a bad pax size");
			d->x_size = s;
			d->has_size = true;
		} else if (klen == 5 && memcmp(k, "mtime", 5) == 0) {
			/* [-]digits[.digits]: the fraction is dropped */
			size_t q = 0;
			bool neg = false;
			int64_t m = 0;

			if (q < vlen && v[q] == '-') {
				neg = true;
				q++;
			}
			if (q == vlen)
				return fail(d, NULL, 0, "a bad pax mtime");
			for (size_t s0 = q; q < vlen && v[q] != '.'; q++) {
				if (v[q] < '0' || v[q] > '9' || q - s0 >= 18)
					return fail(d, NULL, 0, "a bad pax mtime");
				m = m * 10 + (v[q] - '0');
			}
			if (q < vlen) {
				for (q++; q < vlen; q++)
					if (v[q] < '0' || v[q] > '9')
						return fail(d, NULL, 0, "a bad pax mtime");
			}
			d->x_mtime = neg ? -m : m;
			d->has_mtime = true;
		}
	}
	return AGENT_TAR_AGAIN;
}

static enum agent_tar_dec_result
ext_done(struct agent_tar_dec *d)
{
	size_t n;

	d->state = d->pad ? AGENT_TDS_PAD : AGENT_TDS_HEADER;
	switch (d->ext_type) {
	case 'x':
		return pax_parse(d, false);
	case 'g':
		return pax_parse(d, true);
	default: /* 'L', 'K': a NUL-terminated name */
		n = strnlen((const char *)d->ext, d->ext_len);
		if (n == 0 || n > AGENT_TAR_NAME_MAX)
			return fail(d, NULL, 0, "a bad GNU long %s", d->ext_type == 'L' ? "name"
										 : "link");
		memcpy(d->ext_type == 'L' ? d->path : d->lpath, d->ext, n);
		(d->ext_type == 'L' ? d->path : d->lpath)[n] = '\0';
		if (d->ext_type == 'L')
			d->has_path = true;
		else
			d->has_link = true;
		return AGENT_TAR_AGAIN;
	}
}

/* A complete header block in d->blk. */
static enum agent_tar_dec_result
header(struct agent_tar_dec *d)
{
	const uint8_t *b = d->blk;
	struct agent_tar_entry *e = &d->ent;
	char raw[AGENT_TAR_NAME_MAX + H_PREFIX_LEN + H_NAME_LEN + 2];
	uint64_t sum = 0;
	int64_t chk, v;
	size_t rlen;
	bool posix, gnu, is_dir;
	const char *why;
	char t = (char)b[H_TYPE];

	if (is_zero(b)) {
		d->state = AGENT_TDS_ZERO;
		return AGENT_TAR_AGAIN;
	}
	for (size_t i = 0; i < AGENT_TAR_BLOCK; i++)
		sum += (i >= H_CHKSUM && i < H_CHKSUM + 8) ? ' ' : b[i];
	if (num_parse(b + H_CHKSUM, 8, false, &chk) < 0 || (uint64_t)chk != sum)
		return fail(d, NULL, 0, "a header with a bad checksum at offset %" PRIu64,
			    d->offset - AGENT_TAR_BLOCK);
	posix = memcmp(b + H_MAGIC, "ustar\0" "00", 8) == 0;
	gnu = memcmp(b + H_MAGIC, "ustar  \0", 8) == 0;
	if (!posix && !gnu)
		return fail(d, NULL, 0, "not a ustar header at offset %" PRIu64,
			    d->offset - AGENT_TAR_BLOCK);
	rlen = raw_name(d, raw, posix);
	if (num_parse(b + H_SIZE, 12, false, &v) < 0)
		return fail(d, raw, rlen, "a bad size field");
	if (t == 'x' || t == 'g' || t == 'L' || t == 'K') {
		unsigned bit = t == 'x' ? 1 : t == 'L' ? 2 : t == 'K' ? 4 : 0;

		if ((uint64_t)v > AGENT_TAR_EXT_MAX)
			return fail(d, raw, rlen, "an extended header of %" PRIu64
				    " bytes (at most %u)", (uint64_t)v, AGENT_TAR_EXT_MAX);
		if (d->ext_seen & bit)
			return fail(d, raw, rlen, "two extended headers of type '%c' for one entry",
				    t);
		d->ext_seen |= bit;
		d->ext_type = t;
		d->ext_len = 0;
		d->ext_want = (size_t)v;
		d->pad = agent_tar_pad((uint64_t)v);
		d->state = AGENT_TDS_EXT;
		if (d->ext_want == 0)
			return ext_done(d);
		return AGENT_TAR_AGAIN;
	}
	e->size = d->has_size ? d->x_size : (uint64_t)v;
	switch (t) {
	case '0': case '\0': case '7':
		e->type = AGENT_TAR_FILE;
		break;
	case '5':
		e->type = AGENT_TAR_DIR;
		break;
	case '2':
		e->type = AGENT_TAR_SYMLINK;
		break;
	case '1':
		return fail(d, raw, rlen, "a hard link (refused)");
	case '3': case '4':
		return fail(d, raw, rlen, "a device file (refused)");
	case '6':
		return fail(d, raw, rlen, "a FIFO (refused)");
	default:
		return fail(d, raw, rlen, "an entry of type '%c' (not supported)",
			    t >= 0x20 && t < 0x7f ? t : '?');
	}
	why = agent_tar_name_check(raw, rlen, e->name, sizeof(e->name), &is_dir);
	if (why)
		return fail(d, raw, rlen, "%s", why);
	if (is_dir && e->type == AGENT_TAR_FILE && (t == '0' || t == '\0') && e->size == 0)
		e->type = AGENT_TAR_DIR; /* old archives mark directories by the '/' */
	if (e->name[0] == '\0' && e->type != AGENT_TAR_DIR)
		return fail(d, raw, rlen, "the root named by something not a directory");
	if (is_dir && e->type != AGENT_TAR_DIR)
		return fail(d, raw, rlen, "a name ending in '/' on something not a directory");
	if (e->type != AGENT_TAR_FILE && e->size != 0)
		return fail(d, raw, rlen, "a %s with a size", e->type == AGENT_TAR_DIR ? "directory"
										       : "link");
	if (num_parse(b + H_MODE, 8, false, &v) < 0)
		return fail(d, raw, rlen, "a bad mode field");
	e->mode = (unsigned)v & 07777;
	if (d->has_mtime) {
		e->mtime = d->x_mtime;
	} else {
		if (num_parse(b + H_MTIME, 12, true, &v) < 0)
			return fail(d, raw, rlen, "a bad mtime field");
		e->mtime = v;
	}
	e->link[0] = '\0';
	if (e->type == AGENT_TAR_SYMLINK) {
		size_t ln;

		if (d->has_link) {
			ln = strlen(d->lpath);
			memcpy(e->link, d->lpath, ln + 1);
		} else {
			ln = strnlen((const char *)b + H_LINK, H_LINK_LEN);
			memcpy(e->link, b + H_LINK, ln);
			e->link[ln] = '\0';
		}
		if (ln == 0)
			return fail(d, raw, rlen, "a symbolic link without a target");
	}
	d->has_path = d->has_link = d->has_size = d->has_mtime = false;
	d->ext_seen = 0;
	d->left = e->size;
	d->pad = agent_tar_pad(e->size);
	d->state = d->left ? AGENT_TDS_DATA : d->pad ? AGENT_TDS_PAD : AGENT_TDS_HEADER;
	d->entries++;
	return AGENT_TAR_ENTRY;
}

enum agent_tar_dec_result
agent_tar_dec_feed(struct agent_tar_dec *d, const uint8_t *in, size_t len, size_t *consumed,
		   const uint8_t **data, size_t *dlen)
{
	size_t i = 0;
	enum agent_tar_dec_result r = AGENT_TAR_AGAIN;

	*data = NULL;
	*dlen = 0;
	while (i < len && r == AGENT_TAR_AGAIN) {
		size_t n;

		switch (d->state) {
		case AGENT_TDS_HEADER:
		case AGENT_TDS_ZERO:
			n = AGENT_TAR_BLOCK - d->blen;
			if (n > len - i)
				n = len - i;
			memcpy(d->blk + d->blen, in + i, n);
			d->blen += n;
			i += n;
			d->offset += n;
			if (d->blen < AGENT_TAR_BLOCK)
				break;
			d->blen = 0;
			if (d->state == AGENT_TDS_ZERO) {
				if (!is_zero(d->blk))
					r = fail(d, NULL, 0, "a lone zero block at offset %" PRIu64,
						 d->offset - 2 * AGENT_TAR_BLOCK);
				else {
					d->state = AGENT_TDS_END;
					r = AGENT_TAR_END;
				}
				break;
			}
			r = header(d);
			break;
		case AGENT_TDS_EXT:
			n = d->ext_want - d->ext_len;
			if (n > len - i)
				n = len - i;
			memcpy(d->ext + d->ext_len, in + i, n);
			d->ext_len += n;
			i += n;
			d->offset += n;
			if (d->ext_len == d->ext_want)
				r = ext_done(d);
			break;
		case AGENT_TDS_DATA:
			n = len - i;
			if (n > d->left)
				n = (size_t)d->left;
			*data = in + i;
			*dlen = n;
			i += n;
			d->offset += n;
			d->left -= n;
			if (d->left == 0)
				d->state = d->pad ? AGENT_TDS_PAD : AGENT_TDS_HEADER;
			r = AGENT_TAR_DATA;
			break;
		case AGENT_TDS_PAD:
			n = len - i;
			if (n > d->pad)
				n = (size_t)d->pad;
			i += n;
			d->offset += n;
			d->pad -= n;
			if (d->pad == 0)
				d->state = AGENT_TDS_HEADER;
			break;
		case AGENT_TDS_END:
			/* what follows the end (a record's padding) is ignored */
			d->offset += len - i;
			i = len;
			break;
		case AGENT_TDS_ERROR:
			*consumed = i;
			return AGENT_TAR_ERROR;
		}
	}
	*consumed = i;
	if (r == AGENT_TAR_AGAIN && d->state == AGENT_TDS_ERROR)
		r = AGENT_TAR_ERROR;
	return r;
}

bool
agent_tar_dec_finish(struct agent_tar_dec *d)
{
	if (d->state == AGENT_TDS_END)
		return true;
	if (d->state == AGENT_TDS_ERROR)
		return false;
	if (d->state == AGENT_TDS_DATA)
		fail(d, d->ent.name, strlen(d->ent.name),
		     "the archive ends %" PRIu64 " bytes into the entry's data (truncated)",
		     d->ent.size - d->left);
	else
		fail(d, NULL, 0, "the archive ends at offset %" PRIu64
		     " without its end blocks (truncated)", d->offset);
	return false;
}

/* ---- encoder ---------------------------------------------------------- */

size_t
agent_tar_pad(uint64_t size)
{
	return (size_t)((AGENT_TAR_BLOCK - size % AGENT_TAR_BLOCK) % AGENT_TAR_BLOCK);
}

static void
octal(uint8_t *f, size_t n, uint64_t v)
{
	/* n-1 digits, then NUL */
	f[n - 1] = '\0';
	for (size_t i = n - 1; i-- > 0;) {
		f[i] = (uint8_t)('0' + (v & 7));
		v >>= 3;
	}
}

static void
checksum(uint8_t *b)
{
	unsigned sum = 0;

	memset(b + H_CHKSUM, ' ', 8);
	for (size_t i = 0; i < AGENT_TAR_BLOCK; i++)
		sum += b[i];
	octal(b + H_CHKSUM, 7, sum);
	b[H_CHKSUM + 7] = ' ';
}

static void
ustar(uint8_t *b, const char *name, size_t nlen, char type, unsigned mode, uint64_t size,
      uint64_t mtime, const char *link, size_t llen)
{
	memset(b, 0, AGENT_TAR_BLOCK);
	memcpy(b + H_NAME, name, nlen > H_NAME_LEN ? H_NAME_LEN : nlen);
	octal(b + H_MODE, 8, mode & 07777);
	octal(b + H_UID, 8, 0);
	octal(b + H_GID, 8, 0);
	octal(b + H_SIZE, 12, size);
	octal(b + H_MTIME, 12, mtime);
	b[H_TYPE] = (uint8_t)type;
	if (link)
		memcpy(b + H_LINK, link, llen > H_LINK_LEN ? H_LINK_LEN : llen);
	memcpy(b + H_MAGIC, "ustar\0" "00", 8);
	memcpy(b + H_UNAME, "root", 4);
	memcpy(b + H_GNAME, "root", 4);
	checksum(b);
}

/* Appends one "LEN key=value\n" record to out[*n..cap). */
static int
pax_rec(char *out, size_t *n, size_t cap, const char *key, const char *val, size_t vlen)
{
	size_t body = 1 + strlen(key) + 1 + vlen + 1; /* " key=value\n" */
	size_t len = body + 1, digits;

	/* the length counts its own digits */
	for (;;) {
		size_t d = 1;

		for (size_t t = len; t >= 10; t /= 10)
			d++;
		if (d + body == len)
			break;
		len = d + body;
	}
	digits = len - body;
	if (*n + len > cap)
		return -ENOSPC;
	snprintf(out + *n, digits + 1, "%zu", len);
	out[*n + digits] = ' ';
	memcpy(out + *n + digits + 1, key, strlen(key));
	out[*n + digits + 1 + strlen(key)] = '=';
	memcpy(out + *n + digits + 2 + strlen(key), val, vlen);
	out[*n + len - 1] = '\n';
	*n += len;
	return 0;
}

long
agent_tar_header(uint8_t *out, size_t cap, const struct agent_tar_entry *e)
{
	char name[AGENT_TAR_NAME_MAX + 2], pax[2 * AGENT_TAR_NAME_MAX + 256];
	size_t nlen = strlen(e->name), llen = strlen(e->link), plen = 0, off = 0;
	char type = e->type == AGENT_TAR_DIR ? '5' : e->type == AGENT_TAR_SYMLINK ? '2' : '0';
	uint64_t size = e->type == AGENT_TAR_FILE ? e->size : 0;
	uint64_t mtime = e->mtime < 0 ? 0 : (uint64_t)e->mtime;

	if (nlen > AGENT_TAR_NAME_MAX || llen > AGENT_TAR_NAME_MAX)
		return -ENAMETOOLONG;
	if (nlen == 0) {
		memcpy(name, "./", 3);
		nlen = 2;
	} else {
		memcpy(name, e->name, nlen);
		if (e->type == AGENT_TAR_DIR && nlen < AGENT_TAR_NAME_MAX)
			name[nlen++] = '/';
		name[nlen] = '\0';
	}
	if (nlen > H_NAME_LEN && pax_rec(pax, &plen, sizeof(pax), "path", name, nlen) < 0)
		return -ENAMETOOLONG;
	if (e->type == AGENT_TAR_SYMLINK && llen > H_LINK_LEN &&
	    pax_rec(pax, &plen, sizeof(pax), "linkpath", e->link, llen) < 0)
		return -ENAMETOOLONG;
	if (size > OCTAL11_MAX || (e->mtime < 0 || (uint64_t)e->mtime > OCTAL11_MAX)) {
		char num[24];
		int k;

		if (size > OCTAL11_MAX) {
			k = snprintf(num, sizeof(num), "%" PRIu64, size);
			if (pax_rec(pax, &plen, sizeof(pax), "size", num, (size_t)k) < 0)
				return -ENAMETOOLONG;
			size = 0;
		}
		if (e->mtime < 0 || (uint64_t)e->mtime > OCTAL11_MAX) {
			k = snprintf(num, sizeof(num), "%" PRId64, e->mtime);
			if (pax_rec(pax, &plen, sizeof(pax), "mtime", num, (size_t)k) < 0)
				return -ENAMETOOLONG;
			mtime = 0;
		}
	}
	if (plen) {
		size_t need = AGENT_TAR_BLOCK + plen + agent_tar_pad(plen) + AGENT_TAR_BLOCK;

		if (need > cap)
			return -ENOSPC;
		ustar(out, "PaxHeader", 9, 'x', 0644, plen, mtime, NULL, 0);
		memcpy(out + AGENT_TAR_BLOCK, pax, plen);
		memset(out + AGENT_TAR_BLOCK + plen, 0, agent_tar_pad(plen));
		off = AGENT_TAR_BLOCK + plen + agent_tar_pad(plen);
	} else if (cap < AGENT_TAR_BLOCK) {
		return -ENOSPC;
	}
	ustar(out + off, name, nlen, type, e->mode, size, mtime,
	      e->type == AGENT_TAR_SYMLINK ? e->link : NULL, llen);
	return (long)(off + AGENT_TAR_BLOCK);
}

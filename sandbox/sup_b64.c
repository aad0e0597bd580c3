/* sup_b64.c: base64 (RFC 4648, padded) for sluice-supervisor-podman's
 * exec output and file data (sup_frame.h). Pure. */
#include <stdlib.h>
#include <string.h>

#include "sup_frame.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
sup_b64_encode(const unsigned char *in, size_t n)
{
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? b64[v & 63] : '=';
	}
	*o = 0;
	return out;
}

long
sup_b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		unsigned v = 0;
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			const char *q = in[i + k] ? strchr(b64, in[i + k]) : NULL;
			if (in[i + k] == '=' && i + 4 == n && k >= 2) {
				pad++;
				v <<= 6;
				continue;
			}
			if (!q || pad)
				return -1;
			v = v << 6 | (unsigned)(q - b64);
		}
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (unsigned char)(v >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(v >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)v;
	}
	return (long)o;
}

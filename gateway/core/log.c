/* log.c: one line per write(2), text or JSON. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"

/* A message's room: an access line at its longest (GW_ACCESS_LINE_MAX)
 * goes through here when the access log is stderr. */
#define GW_LOG_LINE 16384

static enum conf_log_level log_level = CONF_LOG_INFO;
static enum conf_log_format log_format = CONF_LOG_TEXT;
static int log_fd = 2;

void
gw_log_setup(enum conf_log_level level, enum conf_log_format format, int fd)
{
	log_level = level;
	log_format = format;
	log_fd = fd;
}

enum conf_log_format
gw_log_format(void)
{
	return log_format;
}

int
gw_log_enabled(enum conf_log_level level)
{
	return level <= log_level;
}

void
gw_log_timestamp(char *buf, size_t bufsz)
{
	struct timespec ts;
	struct tm tm;
	int n;

	if (bufsz == 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(buf, bufsz, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
	if (n < 0 || (size_t)n >= bufsz) {
		/* Only a buffer under the 32 bytes promised, or a clock past
		 * the year 9999, gets here: "-" rather than a cut time. */
		buf[0] = '\0';
		if (bufsz > 1) {
			buf[0] = '-';
			buf[1] = '\0';
		}
	}
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t
gw_json_escape(char *out, size_t outsz, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	if (outsz == 0)
		return 0;
	for (size_t i = 0; i < n;) {
		char esc[8];
		const char *add = esc;
		size_t addlen, step = 1;

		switch (p[i]) {
		case '"':  add = "\\\""; addlen = 2; break;
		case '\\': add = "\\\\"; addlen = 2; break;
		case '\n': add = "\\n"; addlen = 2; break;
		case '\r': add = "\\r"; addlen = 2; break;
		case '\t': add = "\\t"; addlen = 2; break;
		default:
			if (p[i] < 0x20 || p[i] == 0x7f) {
				addlen = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", p[i]);
			} else if (p[i] < 0x80) {
				add = (const char *)p + i;
				addlen = 1;
			} else if ((step = utf8_len(p + i, n - i)) != 0) {
				add = (const char *)p + i;
				addlen = step;
			} else {
				step = 1;
				addlen = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", p[i]);
			}
		}
		if (o + addlen >= outsz)
			break;
		memcpy(out + o, add, addlen);
		o += addlen;
		i += step;
	}
	out[o] = '\0';
	return o;
}

void
gw_log(enum conf_log_level level, int with_errno, const char *fmt, ...)
{
	char msg[GW_LOG_LINE], line[GW_LOG_LINE * 2], ts[40];
	int saved = errno;
	va_list ap;
	int n;
	size_t len;

	if (!gw_log_enabled(level))
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	len = (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
	if (with_errno && len < sizeof(msg) - 1) {
		n = snprintf(msg + len, sizeof(msg) - len, ": %s", strerror(saved));
		if (n > 0)
			len += (size_t)n < sizeof(msg) - len ? (size_t)n : sizeof(msg) - len - 1;
	}
	gw_log_timestamp(ts, sizeof(ts));
	if (log_format == CONF_LOG_JSON) {
		char esc[GW_LOG_LINE + 512];

		gw_json_escape(esc, sizeof(esc), msg, len);
		n = snprintf(line, sizeof(line),
			     "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n",
			     ts, conf_log_level_name(level), esc);
	} else {
		/* Text lines stay one line: a newline inside a message would
		 * let it forge a second log line. */
		for (size_t i = 0; i < len; i++)
			if (msg[i] == '\n' || msg[i] == '\r')
				msg[i] = ' ';
		n = snprintf(line, sizeof(line), "%s %-5s %s\n", ts,
			     conf_log_level_name(level), msg);
	}
	if (n > 0) {
		len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
		line[len - 1] = '\n';
		(void)!write(log_fd, line, len);
	}
	errno = saved;
}

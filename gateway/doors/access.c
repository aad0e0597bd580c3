/* access.c: the access log. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "conn-t.h"
#include "log.h"
#include "metrics.h"
#include "reason.h"

static int access_fd = -2;      /* -2: through the log; -1: off */

/* (keys, quotes and numbers take well under 1024 bytes) */
_Static_assert(GW_ACCESS_LINE_MAX >= 11 * 300 + GW_CONN_INJECT_MAX + 1024,
	       "an access line at its longest fits GW_ACCESS_LINE_MAX");

int
gw_access_setup(const char *dest)
{
	int fd;

	if (strcmp(dest, "stderr") == 0) {
		fd = -2;
	} else if (strcmp(dest, "off") == 0) {
		fd = -1;
	} else {
		fd = open(dest, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
		if (fd < 0)
			return -errno;
	}
	/* Workers may be writing to the old descriptor right now: an open
	 * file takes the old one's number in place (dup2 is atomic), so a
	 * number is never closed under a writer nor reused for a socket. */
	int old = __atomic_load_n(&access_fd, __ATOMIC_ACQUIRE);

	if (old >= 0 && fd >= 0) {
		if (dup2(fd, old) < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		close(fd);
		return 0;
	}
	/* Going from a file to stderr or off leaves the old file open: a
	 * worker may hold its number; one descriptor is a small price. */
	__atomic_store_n(&access_fd, fd, __ATOMIC_RELEASE);
	return 0;
}

/* A value fit for a k=v text field: no space, no quote, no control byte;
 * anything else becomes '?', so a field is one token. */
static const char *
token(const char *s, char *buf, size_t bufsz)
{
	size_t i;

	if (!s || !*s)
		return "-";
	for (i = 0; s[i] && i + 1 < bufsz; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[i] = (ch > 0x20 && ch < 0x7f && ch != '"' && ch != '=') ? (char)ch : '?';
	}
	buf[i] = '\0';
	return buf;
}

static const char *
jstr(const char *s, char *buf, size_t bufsz)
{
	if (!s)
		return "";
	gw_json_escape(buf, bufsz, s, strlen(s));
	return buf;
}

int
gw_access_format(const struct gw_access *a, bool json, const char *ts, char *out, size_t outsz)
{
	/* Each field in 300 bytes (a host name, an address, a name), but
	 * inject=, which holds every name a request got (conn-t.h). */
	char b[11][300], inj[GW_CONN_INJECT_MAX];
	int n;

	if (json)
		n = snprintf(out, outsz,
			     "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"access\",\"door\":\"%s\","
			     "\"client\":\"%s\",\"src\":\"%s\",\"policy\":\"%s\",\"method\":\"%s\","
			     "\"host\":\"%s\",\"port\":%u,\"decision\":\"%s\",\"reason\":\"%s\","
			     "\"upstream\":\"%s\",\"status\":%u,\"bytes_in\":%llu,\"bytes_out\":%llu,"
			     "\"duration_ms\":%llu,\"mode\":\"%s\",\"sni\":\"%s\",\"alpn_down\":\"%s\","
			     "\"alpn_up\":\"%s\",\"layer\":\"%s\",\"inject\":\"%s\"}",
			     ts ? ts : "", a->door, jstr(a->client, b[0], sizeof(b[0])),
			     jstr(a->src, b[1], sizeof(b[1])), jstr(a->policy, b[2], sizeof(b[2])),
			     jstr(a->method, b[3], sizeof(b[3])), jstr(a->host, b[4], sizeof(b[4])),
			     a->port, a->decision, gw_reason_name(a->reason),
			     jstr(a->upstream, b[5], sizeof(b[5])), a->status,
			     (unsigned long long)a->bytes_in, (unsigned long long)a->bytes_out,
			     (unsigned long long)a->duration_ms, jstr(a->mode, b[6], sizeof(b[6])),
			     jstr(a->sni, b[7], sizeof(b[7])), jstr(a->alpn_down, b[8], sizeof(b[8])),
			     jstr(a->alpn_up, b[9], sizeof(b[9])), jstr(a->layer, b[10], sizeof(b[10])),
			     jstr(a->inject, inj, sizeof(inj)));
	else
		n = snprintf(out, outsz,
			     "access door=%s client=%s src=%s policy=%s method=%s host=%s port=%u "
			     "decision=%s reason=%s upstream=%s status=%u bytes_in=%llu bytes_out=%llu "
			     "duration_ms=%llu mode=%s sni=%s alpn_down=%s alpn_up=%s layer=%s inject=%s",
			     a->door, token(a->client, b[0], sizeof(b[0])),
			     token(a->src, b[1], sizeof(b[1])), token(a->policy, b[2], sizeof(b[2])),
			     token(a->method, b[3], sizeof(b[3])), token(a->host, b[4], sizeof(b[4])),
			     a->port, a->decision, gw_reason_name(a->reason),
			     token(a->upstream, b[5], sizeof(b[5])), a->status,
			     (unsigned long long)a->bytes_in, (unsigned long long)a->bytes_out,
			     (unsigned long long)a->duration_ms, token(a->mode, b[6], sizeof(b[6])),
			     token(a->sni, b[7], sizeof(b[7])), token(a->alpn_down, b[8], sizeof(b[8])),
			     token(a->alpn_up, b[9], sizeof(b[9])), token(a->layer, b[10], sizeof(b[10])),
			     token(a->inject, inj, sizeof(inj)));
	return n > 0 && (size_t)n < outsz ? n : -1;
}

void
gw_access_write(const struct gw_access *a)
{
	char line[GW_ACCESS_LINE_MAX], ts[40];
	int fd = __atomic_load_n(&access_fd, __ATOMIC_ACQUIRE);
	int n;

	/* Counted whether or not the log is on. */
	gw_metrics_door_decision(a->door, a->decision, a->reason);
	if (fd == -1)
		return;
	if (gw_log_format() == CONF_LOG_JSON) {
		gw_log_timestamp(ts, sizeof(ts));
		n = gw_access_format(a, true, ts, line, sizeof(line) - 1);
		if (n < 0)
			return;
		line[n++] = '\n';
		(void)!write(fd >= 0 ? fd : 2, line, (size_t)n);
		return;
	}
	n = gw_access_format(a, false, NULL, line, sizeof(line));
	if (n < 0)
		return;
	if (fd == -2) {
		gw_log_info("%s", line);
	} else {
		char out[sizeof(line) + 64];

		gw_log_timestamp(ts, sizeof(ts));
		n = snprintf(out, sizeof(out), "%s %s\n", ts, line);
		if (n > 0 && (size_t)n < sizeof(out))
			(void)!write(fd, out, (size_t)n);
	}
}

/* log.h: the daemon's log, text or JSON lines on stderr.
 *
 * Each line is written with one write(2), so lines from several threads do
 * not interleave. Levels: err, warn, info, debug. gw_log_warn() and
 * gw_log_err() append ": strerror(errno)"; the x forms do not (relayd's
 * habit). Never pass a secret's value to any of these.
 */
#ifndef SLUICE_GW_LOG_H
#define SLUICE_GW_LOG_H

#include <stddef.h>

#include "conf-t.h"

#define GW_LOG_FMT(a, b) __attribute__((format(printf, a, b)))

/* Sets level and format; fd is where lines go (stderr by default). */
void gw_log_setup(enum conf_log_level level, enum conf_log_format format, int fd);
enum conf_log_format gw_log_format(void);
int gw_log_enabled(enum conf_log_level level);

void gw_log(enum conf_log_level level, int with_errno, const char *fmt, ...) GW_LOG_FMT(3, 4);

#define gw_log_err(...)   gw_log(CONF_LOG_ERR, 1, __VA_ARGS__)
#define gw_log_errx(...)  gw_log(CONF_LOG_ERR, 0, __VA_ARGS__)
#define gw_log_warn(...)  gw_log(CONF_LOG_WARN, 1, __VA_ARGS__)
#define gw_log_warnx(...) gw_log(CONF_LOG_WARN, 0, __VA_ARGS__)
#define gw_log_info(...)  gw_log(CONF_LOG_INFO, 0, __VA_ARGS__)
#define gw_log_debug(...) gw_log(CONF_LOG_DEBUG, 0, __VA_ARGS__)

/* Appends s (n bytes) to out as the inside of a JSON string: quotes,
 * backslashes and control bytes escaped, invalid UTF-8 bytes as \u00XX.
 * Writes at most outsz-1 bytes plus a NUL, never a partial escape, and
 * returns the bytes written. */
size_t gw_json_escape(char *out, size_t outsz, const char *s, size_t n);

/* Formats the current UTC time as 2026-12-02T16:53:24.123Z into buf
 * (at least 32 bytes; a time that does not fit is written "-"). */
void gw_log_timestamp(char *buf, size_t bufsz);

#endif

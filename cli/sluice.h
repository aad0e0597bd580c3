/* sluice.h: what the parts of the `sluice` client share (cli/sluice.c:
 * main and the sandbox commands; common.c: messages, options, requests,
 * tables; pools.c: the pools commands; observe.c: usage and metrics).
 * Internal to cli/. */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cli_http.h"
#include "cli_util.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

#define EXIT_API 1
#define EXIT_USAGE 2
#define EXIT_TIMED_OUT 124              /* like timeout(1) */
#define DEFAULT_API "unix:/run/sluice/api.sock"
#define DEFAULT_POOL "default"
#define MAX_ERROR_BODY (1u << 20)
#define MAX_STDIN CLI_MAX_JSON
#define MAX_YAML_FILE (16u << 20)
#define IO_CHUNK 65536

/* The global options, fixed once parsed. */
struct sl_opts {
	const char *api;                /* as the user wrote it */
	struct cli_url url;
	const char *token;              /* $SLUICE_TOKEN, or NULL */
	bool json;
};

/* Where error details of `pools apply` point back to (NULL elsewhere). */
struct sl_srcmap {
	const char *file;
	const struct cli_yposv *pos;
};

struct sl_optspec {
	const char *name;               /* "--pool" */
	char shortc;                    /* 'q', or 0 */
	bool arg;
};

/* A request to send; body (a JSON text) or upload_fd (a file streamed with
 * Content-Length upload_len, or chunked when upload_len < 0). */
struct sl_req {
	const char *method;
	const char *target;
	const char *accept;
	const char *ctype;
	const char *body;
	size_t body_len;
	int upload_fd;                  /* -1: none */
	const char *upload_name;        /* for messages */
	int64_t upload_len;
};

struct sl_table {
	size_t ncol;
	char **cells;                   /* row-major, the header first */
	size_t n;
};

extern const char usage_text[];

/* err.h has these names in libc: ours are sl_warnx, sl_vwarnx. */
#define warnx sl_warnx
#define vwarnx sl_vwarnx

/* messages (common.c): "sluice: ..." on stderr */
void oom(void) __attribute__((noreturn));
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* With --json (sl_json_errors), each error is instead one line on stdout in
 * the API's shape, {"error": {"code": ..., "message": ...}}: the API's code
 * for the API's errors, and for the client's own one of these. */
#define SL_E_USAGE "bad-usage"          /* the command line (exit 2) */
#define SL_E_CLIENT "client-error"      /* connecting, reading, a bad answer */
#define SL_E_LOCAL "local-error"        /* a local file or terminal */
#define SL_E_CONFIRM "not-confirmed"    /* pools apply: asked, refused or no tty */
extern bool sl_json_errors;
void vwarnc(const char *code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void warnc(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error the API named: "sluice: CODE: message" (or the JSON). */
void api_error(const char *code, const char *msg);
void vwarnx(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "sluice: warning: ..." on stderr, --json or not: not an error. */
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* I/O and values */
int write_all(int fd, const void *p, size_t n);
int read_all(int fd, size_t max, char **out, size_t *len);
int add_kv(json_t *obj, const char *cmd, const char *opt, const char *arg);
bool parse_uint(const char *s, long long max, long long *out);

/* option scanning */
int next_opt(struct sl_opts *o, const char *cmd, int argc, char **argv, int *i,
	     const struct sl_optspec *specs, const char **val);
int no_operands(struct sl_opts *o, const char *cmd, int argc, char **argv);

/* requests */
int send_upload(struct cli_conn *c, const struct sl_req *r, bool *local);
int request(const struct sl_opts *o, struct cli_conn *c, const struct sl_req *r);
int read_body(const struct sl_opts *o, struct cli_conn *c, size_t max, char **out,
	      size_t *len);
int read_json(const struct sl_opts *o, struct cli_conn *c, json_t **out);
void sanitize(char *s);
void print_detail(const char *d, const struct sl_srcmap *src);
int api_fail(const struct sl_opts *o, struct cli_conn *c, const struct sl_srcmap *src);
bool is_2xx(const struct cli_conn *c);
int call_json(const struct sl_opts *o, const char *method, const char *target, json_t *body,
	      json_t **out, const struct sl_srcmap *src);
void print_json(const json_t *j);

/* tables and values */
char *show_value(const json_t *v);
char *field(const json_t *obj, const char *key);
void table_init(struct sl_table *t, const char *const *header, size_t ncol);
void table_cell(struct sl_table *t, char *s);
size_t width(const char *s);
void table_print(struct sl_table *t);
void print_rows(const json_t *list, const char *const *header, const char *const *keys,
		size_t ncol);
int list_table(struct sl_opts *o, const char *path, const char *field,
	       const char *const *header, const char *const *keys, size_t ncol);
void print_kv(json_t *obj);

/* commands in other files */
int cmd_pools(struct sl_opts *o, int argc, char **argv);        /* pools.c */
int cmd_usage(struct sl_opts *o, int argc, char **argv);        /* observe.c */
int cmd_metrics(struct sl_opts *o, int argc, char **argv);

#endif

/* sluice.c: the command-line client of the REST API (docs/api.md):
 * options, one function per command, tables for people and the API's JSON
 * with --json. Exit codes: 0 success, 1 an API or I/O error (its message
 * on stderr), 2 bad usage; `exec` exits with the command's own code. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli_http.h"
#include "cli_util.h"
#include "exec_stream.h"

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

static const char usage_text[] =
	"usage: sluice [--api URL|unix:PATH] [--json] COMMAND ...\n"
	"  claim [--pool P] [--ttl S] [--env K=V]... [--label K=V]... [-q]\n"
	"  ls\n"
	"  show ID\n"
	"  exec [--timeout S] [--env K=V]... [--cwd DIR] [--stdin] ID -- ARGV...\n"
	"  exec -i|-t|-it|--detach [--timeout S] [--env K=V]... [--cwd DIR] ID -- ARGV...\n"
	"  shell [--env K=V]... [--cwd DIR] ID     (a login shell, as exec -it)\n"
	"  cp LOCAL ID:PATH | ID:PATH LOCAL        (- for stdin/stdout)\n"
	"  rm ID...\n"
	"  pools get\n"
	"  pools apply FILE.yaml\n"
	"  info\n"
	"\n"
	"  --api URL      http://HOST:PORT or unix:PATH (default $SLUICE_API, then\n"
	"                 " DEFAULT_API ")\n"
	"  --json         print the API's JSON instead of tables\n"
	"  -q, --quiet    claim: print the sandbox id only\n"
	"  -h, --help     this text;  -V, --version  the version\n"
	"\n"
	"The token comes from $SLUICE_TOKEN (sent as Authorization: Bearer).\n"
	"Exit codes: 0 success, 1 an API error, 2 bad usage; exec exits with the\n"
	"command's code (128+N for signal N, 124 when it timed out).\n";

/* ---- small helpers ------------------------------------------------- */

static void
oom(void)
{
	fputs("sluice: out of memory\n", stderr);
	exit(EXIT_API);
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

static void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

static char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom();
	return p;
}

/* "sluice: message\n" on stderr. */
static void
vwarnx(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

static void
vwarnx(const char *fmt, va_list ap)
{
	fputs("sluice: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void
warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
}

/* Prints "sluice: CMD: message" and the usage; returns EXIT_USAGE. */
static int
usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
usage_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

/* Writes all of p[0..n) to fd. Returns 0 or a negative errno. */
static int
write_all(int fd, const void *p, size_t n)
{
	const char *q = p;

	while (n > 0) {
		ssize_t w = write(fd, q, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads fd to its end, at most max bytes. Returns 0 (*out malloc'd and
 * NUL-terminated, *len its size), -EFBIG or a negative errno. */
static int
read_all(int fd, size_t max, char **out, size_t *len)
{
	size_t n = 0, cap = 65536;
	char *b = xmalloc(cap + 1);

	for (;;) {
		ssize_t r;

		if (n == cap) {
			if (cap >= max) {
				free(b);
				return -EFBIG;
			}
			cap = cap * 2 > max ? max : cap * 2;
			b = xrealloc(b, cap + 1);
		}
		r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(b);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* Splits "K=V" into a JSON object, refusing an empty K and repeats. */
static int
add_kv(json_t *obj, const char *cmd, const char *opt, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *k;
	json_t *v;

	if (!eq || eq == arg)
		return usage_err("%s: %s wants K=V, not '%s'", cmd, opt, arg);
	k = xmalloc((size_t)(eq - arg) + 1);
	memcpy(k, arg, (size_t)(eq - arg));
	k[eq - arg] = '\0';
	if (json_object_get(obj, k)) {
		usage_err("%s: %s %s given twice", cmd, opt, k);
		free(k);
		return EXIT_USAGE;
	}
	v = json_string(eq + 1);
	if (!v || json_object_set_new(obj, k, v) < 0) {
		usage_err("%s: %s %s: not UTF-8", cmd, opt, k);
		free(k);
		return EXIT_USAGE;
	}
	free(k);
	return 0;
}

/* A non-negative decimal integer, strictly. */
static bool
parse_uint(const char *s, long long max, long long *out)
{
	long long v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (max - (*s - '0')) / 10)
			return false;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return true;
}

/* ---- option scanning ----------------------------------------------- */

struct sl_optspec {
	const char *name;               /* "--pool" */
	char shortc;                    /* 'q', or 0 */
	bool arg;
};

/* Scans argv[*i] for an option of specs (or the global --json and --api,
 * which any command also takes). Returns the index of the spec matched
 * (*val set for options with an argument), -1 at the first operand (or
 * after "--", consumed, when stop_dashdash), or -2 after printing a usage
 * error. */
static int
next_opt(struct sl_opts *o, const char *cmd, int argc, char **argv, int *i,
	 const struct sl_optspec *specs, const char **val)
{
	for (;;) {
		const char *a;
		size_t alen;

		if (*i >= argc)
			return -1;
		a = argv[*i];
		if (a[0] != '-' || a[1] == '\0')
			return -1;
		if (strcmp(a, "--") == 0) {
			(*i)++;
			return -1;
		}
		alen = strcspn(a, "=");
		if (strcmp(a, "--json") == 0) {
			o->json = true;
			(*i)++;
			continue;
		}
		if (strncmp(a, "--api", alen) == 0 && alen == 5) {
			usage_err("%s: give --api before the command", cmd);
			return -2;
		}
		for (int k = 0; specs && specs[k].name; k++) {
			bool is_long = strncmp(a, specs[k].name, alen) == 0 &&
				       specs[k].name[alen] == '\0';
			bool is_short = specs[k].shortc && a[1] == specs[k].shortc && a[2] == '\0';

			if (!is_long && !is_short)
				continue;
			(*i)++;
			if (!specs[k].arg) {
				if (a[alen] == '=') {
					usage_err("%s: %s takes no value", cmd, specs[k].name);
					return -2;
				}
				return k;
			}
			if (is_long && a[alen] == '=') {
				*val = a + alen + 1;
				return k;
			}
			if (*i >= argc) {
				usage_err("%s: %s needs a value", cmd, specs[k].name);
				return -2;
			}
			*val = argv[(*i)++];
			return k;
		}
		usage_err("%s: unknown option '%s'", cmd, a);
		return -2;
	}
}

/* ---- requests ------------------------------------------------------ */

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

/* Sends the file body. Returns 0, a negative errno from the socket
 * (*local false) or from reading the file (*local true). */
static int
send_upload(struct cli_conn *c, const struct sl_req *r, bool *local)
{
	char *buf = xmalloc(IO_CHUNK + 32);
	uint64_t left = r->upload_len < 0 ? 0 : (uint64_t)r->upload_len;
	int rc = 0;

	*local = false;
	for (;;) {
		size_t want = IO_CHUNK;
		ssize_t n;

		if (r->upload_len >= 0) {
			if (left == 0)
				break;
			if (left < want)
				want = (size_t)left;
		}
		/* leave room for the chunk header in front */
		n = read(r->upload_fd, buf + 16, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			*local = true;
			break;
		}
		if (r->upload_len >= 0) {
			if (n == 0) {
				rc = -ENODATA; /* the file shrank */
				*local = true;
				break;
			}
			left -= (uint64_t)n;
			rc = cli_conn_send(c, buf + 16, (size_t)n);
		} else if (n == 0) {
			rc = cli_conn_send(c, "0\r\n\r\n", 5);
			break;
		} else {
			char hdr[16];
			int h = snprintf(hdr, sizeof(hdr), "%zx\r\n", (size_t)n);

			memcpy(buf + 16 - h, hdr, (size_t)h);
			memcpy(buf + 16 + n, "\r\n", 2);
			rc = cli_conn_send(c, buf + 16 - h, (size_t)h + (size_t)n + 2);
		}
		if (rc < 0)
			break;
	}
	free(buf);
	return rc;
}

/* Connects, sends r and reads the response head into c->resp. Returns 0,
 * or EXIT_API after printing why. The caller closes c either way. */
static int
request(const struct sl_opts *o, struct cli_conn *c, const struct sl_req *r)
{
	char err[512];
	char *head = NULL;
	size_t headlen = 0;
	FILE *f;
	int rc;

	if (cli_conn_open(c, &o->url, o->api, err, sizeof(err)) < 0) {
		warnx("%s", err);
		return EXIT_API;
	}
	f = open_memstream(&head, &headlen);
	if (!f)
		oom();
	fprintf(f, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice/%s\r\nAccept: %s\r\n",
		r->method, r->target, o->url.hosthdr, SLUICE_VERSION,
		r->accept ? r->accept : "application/json");
	if (o->token)
		fprintf(f, "Authorization: Bearer %s\r\n", o->token);
	if (r->ctype)
		fprintf(f, "Content-Type: %s\r\n", r->ctype);
	if (r->upload_fd >= 0 && r->upload_len < 0)
		fputs("Transfer-Encoding: chunked\r\n", f);
	else if (r->upload_fd >= 0)
		fprintf(f, "Content-Length: %" PRId64 "\r\n", r->upload_len);
	else if (r->body)
		fprintf(f, "Content-Length: %zu\r\n", r->body_len);
	fputs("Connection: close\r\n\r\n", f);
	if (fclose(f) != 0)
		oom();
	rc = cli_conn_send(c, head, headlen);
	free(head);
	if (rc == 0 && r->body)
		rc = cli_conn_send(c, r->body, r->body_len);
	if (rc == 0 && r->upload_fd >= 0) {
		bool local;

		rc = send_upload(c, r, &local);
		if (rc < 0 && local) {
			if (rc == -ENODATA)
				warnx("%s: the file shrank while it was sent", r->upload_name);
			else
				warnx("reading %s: %s", r->upload_name, strerror(-rc));
			return EXIT_API;
		}
	}
	if (rc < 0) {
		/* The server may have answered before reading everything
		 * (a 401, a 413): its answer says more than EPIPE. */
		int send_err = -rc;

		if (cli_conn_read_head(c, err, sizeof(err)) == 0)
			return 0;
		warnx("sending the request to %s: %s", o->api, strerror(send_err));
		return EXIT_API;
	}
	if (cli_conn_read_head(c, err, sizeof(err)) < 0) {
		warnx("%s: %s", o->api, err);
		return EXIT_API;
	}
	return 0;
}

/* Reads the whole body (at most max bytes). Returns 0 with *out malloc'd
 * and NUL-terminated, or EXIT_API after printing why. */
static int
read_body(const struct sl_opts *o, struct cli_conn *c, size_t max, char **out, size_t *len)
{
	size_t n = 0, cap = 16384;
	char *b = xmalloc(cap + 1);
	char err[256];

	for (;;) {
		ssize_t r;

		if (n == cap) {
			if (cap >= max) {
				warnx("%s: the response body is over %zu bytes", o->api, max);
				free(b);
				return EXIT_API;
			}
			cap = cap * 2 > max ? max : cap * 2;
			b = xrealloc(b, cap + 1);
		}
		r = cli_conn_read_body(c, b + n, cap - n, err, sizeof(err));
		if (r < 0) {
			warnx("%s: %s", o->api, err);
			free(b);
			return EXIT_API;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* Reads a JSON body. Returns 0 with *out (a new reference), or EXIT_API. */
static int
read_json(const struct sl_opts *o, struct cli_conn *c, json_t **out)
{
	json_error_t je;
	char *b;
	size_t n;

	if (read_body(o, c, CLI_MAX_JSON, &b, &n) != 0)
		return EXIT_API;
	*out = json_loadb(b, n, JSON_ALLOW_NUL, &je);
	free(b);
	if (!*out) {
		warnx("%s: bad JSON in the response (HTTP %d): %s", o->api, c->resp.status,
		      je.text);
		return EXIT_API;
	}
	return 0;
}

/* Replaces control bytes so that a server's strings cannot drive the
 * terminal. */
static void
sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Prints an error detail, pointing into the source file when the detail's
 * JSON path ("pools[0].warm_max: ...") came from it. */
static void
print_detail(const char *d, const struct sl_srcmap *src)
{
	char *s = xstrdup(d);
	const char *colon = strstr(s, ": ");
	const struct cli_ypos *p = NULL;

	sanitize(s);
	if (src && colon)
		p = cli_ypos_find(src->pos, s, (size_t)(colon - s));
	if (p)
		fprintf(stderr, "%s:%u:%u: %s\n", src->file, p->line, p->col, s);
	else
		fprintf(stderr, "%s\n", s);
	free(s);
}

/* The answer is not a success: prints "sluice: CODE: message" (and the
 * details, one a line) and returns EXIT_API. */
static int
api_fail(const struct sl_opts *o, struct cli_conn *c, const struct sl_srcmap *src)
{
	const struct cli_resp *r = &c->resp;
	const char *code = NULL, *msg = NULL;
	json_t *root = NULL, *e, *details = NULL;
	char *b = NULL;
	size_t n;

	if (read_body(o, c, MAX_ERROR_BODY, &b, &n) == 0)
		root = json_loadb(b, n, 0, NULL);
	e = json_object_get(root, "error");
	if (json_is_object(e)) {
		code = json_string_value(json_object_get(e, "code"));
		msg = json_string_value(json_object_get(e, "message"));
		details = json_object_get(e, "details");
	}
	if (!code)
		code = r->sluice_reason[0] ? r->sluice_reason : NULL;
	{
		char *cs = NULL, *ms = NULL;

		if (msg)
			ms = xstrdup(msg);
		else if (asprintf(&ms, "HTTP %d %s", r->status, r->reason) < 0)
			oom();
		sanitize(ms);
		if (code) {
			cs = xstrdup(code);
			sanitize(cs);
			warnx("%s: %s", cs, ms);
		} else {
			warnx("%s (from %s)", ms, o->api);
		}
		free(cs);
		free(ms);
	}
	if (json_is_array(details)) {
		size_t i;
		json_t *d;

		json_array_foreach(details, i, d) {
			if (json_is_string(d))
				print_detail(json_string_value(d), src);
		}
	}
	if (r->status == 401) {
		if (o->token)
			fputs("sluice: $SLUICE_TOKEN is not a token the server knows\n", stderr);
		else
			fputs("sluice: set $SLUICE_TOKEN to the operator token or a tenant key\n",
			      stderr);
	}
	json_decref(root);
	free(b);
	return EXIT_API;
}

static bool
is_2xx(const struct cli_conn *c)
{
	return c->resp.status >= 200 && c->resp.status < 300;
}

/* One request whose answer is JSON. Returns 0 with *out, or EXIT_API. */
static int
call_json(const struct sl_opts *o, const char *method, const char *target, json_t *body,
	  json_t **out, const struct sl_srcmap *src)
{
	struct sl_req r = { .method = method, .target = target, .upload_fd = -1 };
	struct cli_conn c;
	char *text = NULL;
	int rc;

	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			oom();
		r.body = text;
		r.body_len = strlen(text);
		r.ctype = "application/json";
	}
	rc = request(o, &c, &r);
	free(text);
	if (rc == 0)
		rc = is_2xx(&c) ? read_json(o, &c, out) : api_fail(o, &c, src);
	cli_conn_close(&c);
	return rc;
}

static void
print_json(const json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
}

/* ---- tables and values --------------------------------------------- */

/* A value for people: strings as they are, numbers, "-" for null or
 * absent, lists joined with ", ", objects as compact JSON. Returns a
 * malloc'd string without control bytes. */
static char *
show_value(const json_t *v)
{
	char *s = NULL;

	switch (json_typeof(v)) {
	case JSON_STRING:
		s = xstrdup(json_string_value(v));
		break;
	case JSON_INTEGER:
		if (asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0)
			oom();
		break;
	case JSON_REAL:
		if (asprintf(&s, "%g", json_real_value(v)) < 0)
			oom();
		break;
	case JSON_TRUE:
		s = xstrdup("true");
		break;
	case JSON_FALSE:
		s = xstrdup("false");
		break;
	case JSON_ARRAY: {
		bool scalars = true;
		size_t i;
		const json_t *x;

		json_array_foreach(v, i, x)
			if (json_is_object(x) || json_is_array(x))
				scalars = false;
		if (!scalars) {
			s = json_dumps(v, JSON_COMPACT);
			break;
		}
		if (json_array_size(v) == 0) {
			s = xstrdup("-");
			break;
		}
		s = xstrdup("");
		json_array_foreach(v, i, x) {
			char *e = show_value(x), *t;

			if (asprintf(&t, "%s%s%s", s, i ? ", " : "", e) < 0)
				oom();
			free(s);
			free(e);
			s = t;
		}
		break;
	}
	case JSON_OBJECT:
		s = json_dumps(v, JSON_COMPACT);
		break;
	case JSON_NULL:
	default:
		s = xstrdup("-");
		break;
	}
	if (!s)
		oom();
	sanitize(s);
	return s;
}

static char *
field(const json_t *obj, const char *key)
{
	return show_value(json_object_get(obj, key));
}

struct sl_table {
	size_t ncol;
	char **cells;                   /* row-major, the header first */
	size_t n;
};

static void
table_init(struct sl_table *t, const char *const *header, size_t ncol)
{
	t->ncol = ncol;
	t->cells = NULL;
	t->n = 0;
	for (size_t i = 0; i < ncol; i++) {
		t->cells = xrealloc(t->cells, (t->n + 1) * sizeof(*t->cells));
		t->cells[t->n++] = xstrdup(header[i]);
	}
}

/* Adds one cell (owned by the table from now on). */
static void
table_cell(struct sl_table *t, char *s)
{
	t->cells = xrealloc(t->cells, (t->n + 1) * sizeof(*t->cells));
	t->cells[t->n++] = s;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t
width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void
table_print(struct sl_table *t)
{
	size_t *w = xmalloc(t->ncol * sizeof(*w));

	memset(w, 0, t->ncol * sizeof(*w));
	for (size_t i = 0; i < t->n; i++)
		if (width(t->cells[i]) > w[i % t->ncol])
			w[i % t->ncol] = width(t->cells[i]);
	for (size_t i = 0; i < t->n; i++) {
		size_t col = i % t->ncol;
		bool last = col == t->ncol - 1;

		fputs(t->cells[i], stdout);
		if (last)
			fputc('\n', stdout);
		else
			for (size_t k = width(t->cells[i]); k < w[col] + 2; k++)
				fputc(' ', stdout);
	}
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	free(w);
}

/* One table row per object of `list`, the columns by key. */
static void
print_rows(const json_t *list, const char *const *header, const char *const *keys, size_t ncol)
{
	struct sl_table t;
	size_t i;
	const json_t *x;

	table_init(&t, header, ncol);
	json_array_foreach(list, i, x)
		for (size_t k = 0; k < ncol; k++)
			table_cell(&t, field(x, keys[k]));
	table_print(&t);
}

/* GET path; the answer's array `field` as a table (or the JSON with
 * --json). */
static int
list_table(struct sl_opts *o, const char *path, const char *field, const char *const *header,
	   const char *const *keys, size_t ncol)
{
	json_t *res = NULL, *list;
	int rc = call_json(o, "GET", path, NULL, &res, NULL);

	if (rc != 0)
		return rc;
	list = json_object_get(res, field);
	if (o->json) {
		print_json(res);
	} else if (!json_is_array(list)) {
		warnx("unexpected answer: no \"%s\" list", field);
		rc = EXIT_API;
	} else {
		print_rows(list, header, keys, ncol);
	}
	json_decref(res);
	return rc;
}

/* Flattens an object into "a.b" keys and display values. */
struct sl_kv {
	char **k;
	char **v;
	size_t n;
};

static void
flatten(struct sl_kv *kv, json_t *obj, const char *prefix)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		char *k;

		if (asprintf(&k, "%s%s%s", prefix, *prefix ? "." : "", key) < 0)
			oom();
		if (json_is_object(v) && json_object_size(v) > 0) {
			flatten(kv, v, k);
			free(k);
			continue;
		}
		sanitize(k);
		kv->k = xrealloc(kv->k, (kv->n + 1) * sizeof(*kv->k));
		kv->v = xrealloc(kv->v, (kv->n + 1) * sizeof(*kv->v));
		kv->k[kv->n] = k;
		kv->v[kv->n] = show_value(v);
		kv->n++;
	}
}

static void
print_kv(json_t *obj)
{
	struct sl_kv kv = { 0 };
	size_t w = 0;

	flatten(&kv, obj, "");
	for (size_t i = 0; i < kv.n; i++)
		if (width(kv.k[i]) > w)
			w = width(kv.k[i]);
	for (size_t i = 0; i < kv.n; i++) {
		printf("%s:", kv.k[i]);
		for (size_t k = width(kv.k[i]); k < w + 1; k++)
			fputc(' ', stdout);
		printf("%s\n", kv.v[i]);
		free(kv.k[i]);
		free(kv.v[i]);
	}
	free(kv.k);
	free(kv.v);
}

/* ---- commands -------------------------------------------------------- */

static int
cmd_claim(struct sl_opts *o, int argc, char **argv)
{
	static const struct sl_optspec specs[] = {
		{ "--pool", 0, true }, { "--ttl", 0, true },   { "--env", 0, true },
		{ "--label", 0, true }, { "--quiet", 'q', false }, { NULL, 0, false },
	};
	static const char *const header[] = { "ID", "POOL", "TIER", "LANE", "ADDRESS", "EXPIRES" };
	static const char *const keys[] = { "id", "pool", "tier", "lane", "address", "expires_at" };
	json_t *body = json_object(), *env = json_object(), *labels = json_object(), *res = NULL;
	const char *pool = DEFAULT_POOL, *val;
	bool quiet = false;
	int i = 1, k, rc = EXIT_USAGE;

	if (!body || !env || !labels)
		oom();
	while ((k = next_opt(o, "claim", argc, argv, &i, specs, &val)) >= 0) {
		long long ttl;

		if (k == 0) {
			pool = val;
		} else if (k == 1) {
			if (!parse_uint(val, INT64_MAX, &ttl)) {
				usage_err("claim: --ttl wants whole seconds, not '%s'", val);
				goto out;
			}
			json_object_set_new(body, "ttl_seconds", json_integer(ttl));
		} else if (k == 2 || k == 3) {
			if (add_kv(k == 2 ? env : labels, "claim", specs[k].name, val) != 0)
				goto out;
		} else {
			quiet = true;
		}
	}
	if (k == -2)
		goto out;
	if (i < argc) {
		usage_err("claim: unexpected argument '%s'", argv[i]);
		goto out;
	}
	if (json_object_set_new(body, "pool", json_string(pool)) < 0) {
		usage_err("claim: --pool: not UTF-8");
		goto out;
	}
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (json_object_size(labels))
		json_object_set(body, "labels", labels);
	rc = call_json(o, "POST", "/v1/claims", body, &res, NULL);
	if (rc != 0)
		goto out;
	if (quiet) {
		const char *id = json_string_value(json_object_get(res, "id"));

		if (!id) {
			warnx("the claim's answer has no id");
			rc = EXIT_API;
			goto out;
		}
		printf("%s\n", id);
	} else if (o->json) {
		print_json(res);
	} else {
		json_t *list = json_pack("[O]", res);

		print_rows(list, header, keys, 6);
		json_decref(list);
	}
out:
	json_decref(res);
	json_decref(body);
	json_decref(env);
	json_decref(labels);
	return rc;
}

static int
no_operands(struct sl_opts *o, const char *cmd, int argc, char **argv)
{
	int i = 1, k;
	const char *val;

	while ((k = next_opt(o, cmd, argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (i < argc)
		return usage_err("%s: unexpected argument '%s'", cmd, argv[i]);
	return 0;
}

static int
cmd_ls(struct sl_opts *o, int argc, char **argv)
{
	static const char *const header[] = { "ID",    "POOL",    "TENANT", "TIER",
					      "STATE", "ADDRESS", "EXPIRES" };
	static const char *const keys[] = { "id",    "pool",    "tenant",    "tier",
					    "state", "address", "expires_at" };
	int rc = no_operands(o, "ls", argc, argv);

	if (rc != 0)
		return rc;
	return list_table(o, "/v1/sandboxes", "sandboxes", header, keys, 7);
}

/* Takes exactly one operand, a sandbox id, into *id. */
static int
one_id(struct sl_opts *o, const char *cmd, int argc, char **argv, const char **id)
{
	int i = 1, k;
	const char *val;

	while ((k = next_opt(o, cmd, argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (argc - i != 1)
		return usage_err("%s: give exactly one sandbox ID", cmd);
	if (!cli_id_valid(argv[i], strlen(argv[i])))
		return usage_err("%s: '%s' is not a sandbox id ([A-Za-z0-9_-]+)", cmd, argv[i]);
	*id = argv[i];
	return 0;
}

static int
cmd_show(struct sl_opts *o, int argc, char **argv)
{
	const char *id = NULL;
	char *target;
	json_t *res = NULL;
	int rc = one_id(o, "show", argc, argv, &id);

	if (rc != 0)
		return rc;
	if (asprintf(&target, "/v1/sandboxes/%s", id) < 0)
		oom();
	rc = call_json(o, "GET", target, NULL, &res, NULL);
	free(target);
	if (rc != 0)
		return rc;
	if (o->json)
		print_json(res);
	else if (json_is_object(res))
		print_kv(res);
	json_decref(res);
	return 0;
}

static int
cmd_rm(struct sl_opts *o, int argc, char **argv)
{
	int i = 1, k, rc = 0;
	const char *val;

	while ((k = next_opt(o, "rm", argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (i >= argc)
		return usage_err("rm: give one or more sandbox IDs");
	for (int j = i; j < argc; j++)
		if (!cli_id_valid(argv[j], strlen(argv[j])))
			return usage_err("rm: '%s' is not a sandbox id ([A-Za-z0-9_-]+)",
					 argv[j]);
	for (; i < argc; i++) {
		char *target;
		json_t *res = NULL;

		if (asprintf(&target, "/v1/sandboxes/%s", argv[i]) < 0)
			oom();
		if (call_json(o, "DELETE", target, NULL, &res, NULL) != 0) {
			rc = EXIT_API;
		} else if (o->json) {
			json_dumpf(res, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		} else {
			char *r = field(res, "result");

			printf("%s %s\n", argv[i], r);
			free(r);
		}
		fflush(stdout);
		free(target);
		json_decref(res);
	}
	return rc;
}

/* ---- exec ------------------------------------------------------------ */

struct sl_exec {
	const struct sl_opts *o;
	bool out_broken;                /* stdout/stderr could not be written */
	bool err_broken;
	bool ended;                     /* an exit or error event came */
	int code;
	char *line;                     /* a partial NDJSON line */
	size_t len;
	size_t cap;
};

/* The exit status for an exit event or a buffered answer. */
static int
exit_status(const json_t *ev)
{
	const json_t *code = json_object_get(ev, "exit_code");
	const json_t *sig = json_object_get(ev, "signal");

	if (json_is_true(json_object_get(ev, "timed_out")))
		return EXIT_TIMED_OUT;
	if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
		return 128 + (int)json_integer_value(sig);
	if (json_is_integer(code) && json_integer_value(code) >= 0 &&
	    json_integer_value(code) <= 255)
		return (int)json_integer_value(code);
	return EXIT_API;
}

static void
exec_write(struct sl_exec *x, int fd, const void *p, size_t n)
{
	bool *broken = fd == 1 ? &x->out_broken : &x->err_broken;

	/* A closed pipe (sluice exec ... | head) must not end the command
	 * early: keep reading, stop writing. */
	if (!*broken && write_all(fd, p, n) < 0)
		*broken = true;
}

static int
exec_event(struct sl_exec *x, const char *line, size_t n)
{
	json_error_t je;
	json_t *ev = json_loadb(line, n, 0, &je);
	const char *type = json_string_value(json_object_get(ev, "event"));
	int rc = 0;

	if (!type) {
		warnx("%s: bad event in the exec stream: %s", x->o->api,
		      ev ? "no \"event\"" : je.text);
		json_decref(ev);
		return EXIT_API;
	}
	if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
		const char *d = json_string_value(json_object_get(ev, "data"));
		size_t dl = json_string_length(json_object_get(ev, "data")), ol;
		unsigned char *buf;

		if (!d) {
			warnx("%s: a %s event without data", x->o->api, type);
			rc = EXIT_API;
		} else {
			buf = xmalloc(CLI_B64_DECODED_MAX(dl) + 1);
			if (cli_b64_decode(d, dl, buf, CLI_B64_DECODED_MAX(dl), &ol) < 0) {
				warnx("%s: bad base64 in a %s event", x->o->api, type);
				rc = EXIT_API;
			} else {
				exec_write(x, type[3] == 'o' ? 1 : 2, buf, ol);
			}
			free(buf);
		}
	} else if (strcmp(type, "exit") == 0) {
		x->ended = true;
		x->code = exit_status(ev);
	} else if (strcmp(type, "error") == 0) {
		char *c = field(ev, "code"), *m = field(ev, "message");

		warnx("%s: %s", c, m);
		free(c);
		free(m);
		x->ended = true;
		x->code = EXIT_API;
	}
	/* "started" and events this client does not know: nothing to do */
	json_decref(ev);
	return rc;
}

/* Splits the stream into lines and handles each as it completes. */
static int
exec_feed(struct sl_exec *x, const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (x->len + take > CLI_MAX_JSON) {
			warnx("%s: an exec event over %u bytes", x->o->api, CLI_MAX_JSON);
			return EXIT_API;
		}
		if (x->len + take > x->cap) {
			x->cap = (x->len + take) * 2;
			x->line = xrealloc(x->line, x->cap);
		}
		memcpy(x->line + x->len, p, take);
		x->len += take;
		p += take;
		n -= take;
		if (!nl)
			break;
		p++;
		n--;
		if (x->len && x->line[x->len - 1] == '\r')
			x->len--;
		if (x->len && !x->ended) {
			int rc = exec_event(x, x->line, x->len);

			if (rc != 0)
				return rc;
		}
		x->len = 0;
	}
	return 0;
}

/* A server that answered with the buffered JSON form. */
static int
exec_buffered(struct sl_exec *x, struct cli_conn *c)
{
	json_t *res;
	const char *s;
	int rc;

	if (read_json(x->o, c, &res) != 0)
		return EXIT_API;
	if ((s = json_string_value(json_object_get(res, "stdout"))))
		exec_write(x, 1, s, json_string_length(json_object_get(res, "stdout")));
	if ((s = json_string_value(json_object_get(res, "stderr"))))
		exec_write(x, 2, s, json_string_length(json_object_get(res, "stderr")));
	if (json_is_true(json_object_get(res, "truncated")))
		warnx("the output was truncated by the server");
	rc = exit_status(res);
	json_decref(res);
	return rc;
}

/* exec -i/-t/--detach and shell: exec_stream.c */
static int
cmd_stream(struct sl_opts *o, const char *cmd, int argc, char **argv)
{
	struct cli_xs_opts xo = { o->api, &o->url, o->token, o->json };

	return cli_xs_main(&xo, cmd, argc, argv);
}

static int
cmd_shell(struct sl_opts *o, int argc, char **argv)
{
	return cmd_stream(o, "shell", argc, argv);
}

static int
cmd_exec(struct sl_opts *o, int argc, char **argv)
{
	static const struct sl_optspec specs[] = {
		{ "--timeout", 0, true }, { "--env", 0, true },    { "--cwd", 0, true },
		{ "--stdin", 0, false },  { NULL, 0, false },
	};
	json_t *body = json_object(), *env = json_object(), *args = json_array();
	struct sl_exec x = { .o = o };
	struct sl_req r = { .method = "POST", .accept = "application/x-ndjson",
			    .ctype = "application/json", .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	const char *val, *id = NULL;
	char *target = NULL, *text = NULL, *buf = NULL;
	bool want_stdin = false;
	int i = 1, k, rc = EXIT_USAGE;

	if (!body || !env || !args)
		oom();
	if (cli_xs_wanted(argc, argv)) {
		json_decref(body);
		json_decref(env);
		json_decref(args);
		return cmd_stream(o, "exec", argc, argv);
	}
	while ((k = next_opt(o, "exec", argc, argv, &i, specs, &val)) >= 0) {
		long long t;

		if (k == 0) {
			if (!parse_uint(val, 86400, &t) || t == 0) {
				usage_err("exec: --timeout wants whole seconds 1-86400, not '%s'",
					  val);
				goto out;
			}
			json_object_set_new(body, "timeout_seconds", json_integer(t));
		} else if (k == 1) {
			if (add_kv(env, "exec", "--env", val) != 0)
				goto out;
		} else if (k == 2) {
			if (json_object_set_new(body, "cwd", json_string(val)) < 0) {
				usage_err("exec: --cwd: not UTF-8");
				goto out;
			}
		} else {
			want_stdin = true;
		}
	}
	if (k == -2)
		goto out;
	if (i >= argc) {
		usage_err("exec: give a sandbox ID, then -- and the command");
		goto out;
	}
	id = argv[i++];
	if (!cli_id_valid(id, strlen(id))) {
		usage_err("exec: '%s' is not a sandbox id ([A-Za-z0-9_-]+)", id);
		goto out;
	}
	if (i >= argc || strcmp(argv[i], "--") != 0) {
		usage_err("exec: put -- between the sandbox ID and the command");
		goto out;
	}
	if (++i >= argc) {
		usage_err("exec: no command after --");
		goto out;
	}
	for (; i < argc; i++) {
		json_t *s = json_string(argv[i]);

		if (!s) {
			usage_err("exec: argument '%s' is not UTF-8", argv[i]);
			goto out;
		}
		json_array_append_new(args, s);
	}
	json_object_set(body, "argv", args);
	if (json_object_size(env))
		json_object_set(body, "env", env);
	json_object_set_new(body, "stream", json_true());
	rc = EXIT_API;
	if (want_stdin) {
		size_t n;
		int e = read_all(0, MAX_STDIN, &buf, &n);
		json_t *s;

		if (e < 0) {
			warnx("exec: reading standard input: %s",
			      e == -EFBIG ? "over 64 MiB" : strerror(-e));
			goto out;
		}
		s = json_stringn(buf, n);
		if (!s) {
			warnx("exec: standard input is not UTF-8 text; the API takes stdin as a "
			      "JSON string (use cp to send binary files)");
			goto out;
		}
		json_object_set_new(body, "stdin", s);
	}
	text = json_dumps(body, JSON_COMPACT);
	if (!text || asprintf(&target, "/v1/sandboxes/%s/exec", id) < 0)
		oom();
	r.target = target;
	r.body = text;
	r.body_len = strlen(text);
	if (request(o, &c, &r) != 0)
		goto out;
	if (!is_2xx(&c)) {
		rc = api_fail(o, &c, NULL);
		goto out;
	}
	if (strcmp(c.resp.content_type, "application/x-ndjson") != 0) {
		rc = exec_buffered(&x, &c);
		goto out;
	}
	free(buf);
	buf = xmalloc(IO_CHUNK);
	for (;;) {
		char err[256];
		ssize_t n = cli_conn_read_body(&c, buf, IO_CHUNK, err, sizeof(err));

		if (n < 0) {
			warnx("%s: %s", o->api, err);
			goto out;
		}
		if (n == 0)
			break;
		if (exec_feed(&x, buf, (size_t)n) != 0)
			goto out;
	}
	if (x.len && !x.ended && exec_event(&x, x.line, x.len) != 0)
		goto out;
	if (!x.ended) {
		warnx("%s: the exec stream ended without an exit event", o->api);
		goto out;
	}
	rc = x.code;
out:
	cli_conn_close(&c);
	free(x.line);
	free(buf);
	free(text);
	free(target);
	json_decref(body);
	json_decref(env);
	json_decref(args);
	return rc;
}

/* ---- cp -------------------------------------------------------------- */

/* The last component of a remote path, or NULL for "/" or "dir/". */
static const char *
remote_base(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return *b ? b : NULL;
}

static int
cp_download(struct sl_opts *o, const char *id, const char *rpath, const char *local)
{
	struct sl_req r = { .method = "GET", .accept = "application/octet-stream, application/json",
			    .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	char *enc = cli_pct_encode(rpath), *target = NULL, *dest = NULL, *tmp = NULL;
	char *buf = NULL;
	struct stat st;
	mode_t mode = 0644;
	int fd = -1, rc = EXIT_API;

	if (!enc || asprintf(&target, "/v1/sandboxes/%s/files?path=%s", id, enc) < 0)
		oom();
	/* Decide the local name before asking, so a mistake costs nothing. */
	if (strcmp(local, "-") != 0) {
		const char *base = remote_base(rpath);

		if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (!base) {
				rc = usage_err("cp: %s:%s names no file to create in %s", id, rpath,
					       local);
				goto out;
			}
			if (asprintf(&dest, "%s/%s", local, base) < 0)
				oom();
		} else {
			dest = xstrdup(local);
		}
		if (stat(dest, &st) == 0 && S_ISREG(st.st_mode)) {
			mode = st.st_mode & 07777;
		} else {
			mode_t um = umask(0);

			umask(um);
			mode = 0666 & ~um;
		}
	}
	r.target = target;
	if (request(o, &c, &r) != 0)
		goto out;
	if (!is_2xx(&c)) {
		rc = api_fail(o, &c, NULL);
		goto out;
	}
	if (strcmp(c.resp.content_type, "application/json") == 0) {
		warnx("cp: %s:%s is a directory; cp copies one file", id, rpath);
		goto out;
	}
	if (dest) {
		char *d = xstrdup(dest), *b = xstrdup(dest);

		if (asprintf(&tmp, "%s/.%s.sluice-XXXXXX", dirname(d), basename(b)) < 0)
			oom();
		free(d);
		free(b);
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0) {
			warnx("cp: cannot create a file beside %s: %s", dest, strerror(errno));
			free(tmp);
			tmp = NULL;
			goto out;
		}
	} else {
		fd = 1;
	}
	buf = xmalloc(IO_CHUNK);
	for (;;) {
		char err[256];
		ssize_t n = cli_conn_read_body(&c, buf, IO_CHUNK, err, sizeof(err));
		int e;

		if (n < 0) {
			warnx("%s: %s", o->api, err);
			goto out;
		}
		if (n == 0)
			break;
		e = write_all(fd, buf, (size_t)n);
		if (e < 0) {
			warnx("cp: writing %s: %s", dest ? dest : "standard output", strerror(-e));
			goto out;
		}
	}
	if (tmp) {
		if (fchmod(fd, mode) < 0 || close(fd) < 0) {
			fd = -1;
			warnx("cp: writing %s: %s", dest, strerror(errno));
			goto out;
		}
		fd = -1;
		if (rename(tmp, dest) < 0) {
			warnx("cp: renaming to %s: %s", dest, strerror(errno));
			goto out;
		}
		free(tmp);
		tmp = NULL;
	}
	rc = 0;
out:
	if (fd > 1)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	cli_conn_close(&c);
	free(buf);
	free(dest);
	free(enc);
	free(target);
	return rc;
}

static int
cp_upload(struct sl_opts *o, const char *local, const char *id, const char *rpath)
{
	struct sl_req r = { .method = "PUT", .ctype = "application/octet-stream",
			    .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	char *full = NULL, *enc = NULL, *target = NULL;
	struct stat st;
	unsigned mode = 0644;
	int fd, rc = EXIT_API;
	bool is_stdin = strcmp(local, "-") == 0;

	if (is_stdin) {
		fd = 0;
	} else {
		fd = open(local, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			warnx("cp: %s: %s", local, strerror(errno));
			return EXIT_API;
		}
	}
	if (fstat(fd, &st) < 0) {
		warnx("cp: %s: %s", is_stdin ? "standard input" : local, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		warnx("cp: %s is a directory; cp copies one file", local);
		goto out;
	}
	if (S_ISREG(st.st_mode)) {
		r.upload_len = st.st_size;
		if (!is_stdin)
			mode = st.st_mode & 0777;
	} else {
		r.upload_len = -1; /* a pipe or a device: chunked */
	}
	if (rpath[strlen(rpath) - 1] == '/') {
		if (is_stdin) {
			rc = usage_err("cp: %s:%s: give a file name to write standard input to",
				       id, rpath);
			goto out;
		}
		{
			char *b = xstrdup(local);

			if (asprintf(&full, "%s%s", rpath, basename(b)) < 0)
				oom();
			free(b);
		}
		rpath = full;
	}
	enc = cli_pct_encode(rpath);
	if (!enc || asprintf(&target, "/v1/sandboxes/%s/files?path=%s&mode=%04o", id, enc, mode) < 0)
		oom();
	r.target = target;
	r.upload_fd = fd;
	r.upload_name = is_stdin ? "standard input" : local;
	if (request(o, &c, &r) != 0)
		goto out;
	if (!is_2xx(&c)) {
		rc = api_fail(o, &c, NULL);
		goto out;
	}
	if (o->json) {
		json_t *res;

		if (read_json(o, &c, &res) != 0)
			goto out;
		print_json(res);
		json_decref(res);
	}
	rc = 0;
out:
	cli_conn_close(&c);
	if (fd > 0)
		close(fd);
	free(full);
	free(enc);
	free(target);
	return rc;
}

static int
cmd_cp(struct sl_opts *o, int argc, char **argv)
{
	const char *val, *spath, *dpath;
	size_t sid, did;
	bool srem, drem;
	char id[256];
	int i = 1, k;

	while ((k = next_opt(o, "cp", argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (argc - i != 2)
		return usage_err("cp: give SRC and DST, one of them ID:PATH");
	srem = cli_remote_parse(argv[i], &sid, &spath);
	drem = cli_remote_parse(argv[i + 1], &did, &dpath);
	if (!srem && !drem)
		return usage_err("cp: one of SRC and DST must be ID:PATH, PATH absolute");
	if (srem && drem)
		return usage_err("cp: only one of SRC and DST may be ID:PATH (write ./%s for a "
				 "local file whose name has a ':')", argv[i + 1]);
	if ((srem ? sid : did) >= sizeof(id))
		return usage_err("cp: sandbox id too long");
	if (srem) {
		memcpy(id, argv[i], sid);
		id[sid] = '\0';
		return cp_download(o, id, spath, argv[i + 1]);
	}
	memcpy(id, argv[i + 1], did);
	id[did] = '\0';
	return cp_upload(o, argv[i], id, dpath);
}

/* ---- pools, info ------------------------------------------------------ */

static int
pools_get(struct sl_opts *o)
{
	static const char *const header[] = { "NAME",   "BACKEND", "TEMPLATE", "LANE",
					      "POLICY", "WARM",    "WARM_MAX" };
	static const char *const keys[] = { "name",   "backend", "template", "lane",
					    "policy", "warm",    "warm_max" };
	return list_table(o, "/v1/pools", "pools", header, keys, 7);
}

static int
pools_apply(struct sl_opts *o, const char *file)
{
	struct cli_yposv pos = { 0 };
	struct sl_srcmap src = { file, &pos };
	char err[1024], warn[1024];
	json_t *doc = NULL, *body = NULL, *res = NULL;
	char *text = NULL;
	size_t n;
	int fd, e, rc = EXIT_API;

	fd = strcmp(file, "-") == 0 ? 0 : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		warnx("%s: %s", file, strerror(errno));
		return EXIT_API;
	}
	e = read_all(fd, MAX_YAML_FILE, &text, &n);
	if (fd > 0)
		close(fd);
	if (e < 0) {
		warnx("%s: %s", file, e == -EFBIG ? "over 16 MiB" : strerror(-e));
		return EXIT_API;
	}
	doc = cli_yaml_to_json(file, text, n, &pos, err, sizeof(err));
	if (!doc) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	body = cli_pools_body(file, doc, &pos, warn, sizeof(warn), err, sizeof(err));
	if (!body) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	if (warn[0])
		fprintf(stderr, "sluice: warning: %s\n", warn);
	rc = call_json(o, "PUT", "/v1/pools", body, &res, &src);
	if (rc != 0)
		goto out;
	if (o->json) {
		print_json(res);
	} else {
		json_t *list = json_object_get(res, "pools");
		size_t i;
		json_t *p;

		printf("applied %zu pool%s", json_array_size(list),
		       json_array_size(list) == 1 ? "" : "s");
		json_array_foreach(list, i, p) {
			char *name = field(p, "name");

			printf("%s%s", i ? ", " : ": ", name);
			free(name);
		}
		fputc('\n', stdout);
	}
out:
	json_decref(res);
	json_decref(body);
	json_decref(doc);
	cli_yposv_fini(&pos);
	free(text);
	return rc;
}

static int
cmd_pools(struct sl_opts *o, int argc, char **argv)
{
	int i = 1, k;
	const char *val;

	while ((k = next_opt(o, "pools", argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (i < argc && strcmp(argv[i], "get") == 0) {
		if (no_operands(o, "pools get", argc - i, argv + i) != 0)
			return EXIT_USAGE;
		return pools_get(o);
	}
	if (i < argc && strcmp(argv[i], "apply") == 0) {
		int j = 1;

		argc -= i;
		argv += i;
		while ((k = next_opt(o, "pools apply", argc, argv, &j, NULL, &val)) >= 0)
			;
		if (k == -2)
			return EXIT_USAGE;
		if (argc - j != 1)
			return usage_err("pools apply: give one FILE.yaml");
		return pools_apply(o, argv[j]);
	}
	return usage_err("pools: 'get' or 'apply FILE.yaml'");
}

static char *
human_duration(long long s)
{
	char *out;
	int n;

	if (s < 60)
		n = asprintf(&out, "%llds", s);
	else if (s < 3600)
		n = asprintf(&out, "%lldm %llds", s / 60, s % 60);
	else if (s < 86400)
		n = asprintf(&out, "%lldh %lldm", s / 3600, s % 3600 / 60);
	else
		n = asprintf(&out, "%lldd %lldh", s / 86400, s % 86400 / 3600);
	if (n < 0)
		oom();
	return out;
}

static int
cmd_info(struct sl_opts *o, int argc, char **argv)
{
	static const char *const header[] = { "NAME",    "WARM",        "TARGET",     "BOOTING",
					      "CLAIMED", "WARM_CLAIMS", "COLD_CLAIMS" };
	json_t *res = NULL, *list;
	int rc = no_operands(o, "info", argc, argv);

	if (rc != 0)
		return rc;
	rc = call_json(o, "GET", "/v1/info", NULL, &res, NULL);
	if (rc != 0)
		return rc;
	if (o->json) {
		print_json(res);
	} else {
		char *v = field(res, "version"), *st = field(res, "started_at");
		const json_t *up = json_object_get(res, "uptime_seconds");
		struct sl_table t;
		size_t i;
		json_t *p;

		printf("version: %s\n", v);
		if (json_is_integer(up)) {
			char *h = human_duration(json_integer_value(up));

			printf("uptime:  %s (since %s)\n", h, st);
			free(h);
		}
		free(v);
		free(st);
		list = json_object_get(res, "pools");
		if (json_array_size(list) > 0) {
			fputc('\n', stdout);
			table_init(&t, header, 7);
			json_array_foreach(list, i, p) {
				const json_t *cl = json_object_get(p, "claims");

				table_cell(&t, field(p, "name"));
				table_cell(&t, field(p, "warm"));
				table_cell(&t, field(p, "target"));
				table_cell(&t, field(p, "booting"));
				table_cell(&t, field(p, "claimed"));
				table_cell(&t, field(cl, "warm"));
				table_cell(&t, field(cl, "cold"));
				if (json_is_true(json_object_get(p, "draining"))) {
					char *name = t.cells[t.n - 7], *d;

					if (asprintf(&d, "%s (draining)", name) < 0)
						oom();
					free(name);
					t.cells[t.n - 7] = d;
				}
			}
			table_print(&t);
		}
	}
	json_decref(res);
	return 0;
}

/* ---- main ------------------------------------------------------------ */

/* The token goes into a header: visible ASCII only. */
static bool
token_ok(const char *t)
{
	for (; *t; t++)
		if (*t < 0x21 || *t > 0x7e)
			return false;
	return true;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(struct sl_opts *, int, char **);
	} cmds[] = {
		{ "claim", cmd_claim }, { "ls", cmd_ls },       { "show", cmd_show },
		{ "exec", cmd_exec },   { "cp", cmd_cp },       { "rm", cmd_rm },
		{ "pools", cmd_pools }, { "info", cmd_info },   { "shell", cmd_shell },
	};
	struct sl_opts o = { 0 };
	const char *api = NULL;
	char err[512];
	int i = 1, rc;

	signal(SIGPIPE, SIG_IGN);
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--json") == 0) {
			o.json = true;
		} else if (strcmp(a, "--api") == 0) {
			if (++i >= argc)
				return usage_err("--api needs a value");
			api = argv[i];
		} else if (strncmp(a, "--api=", 6) == 0) {
			api = a + 6;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage_text, stdout);
			return 0;
		} else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("sluice %s\n", SLUICE_VERSION);
			return 0;
		} else {
			return usage_err("unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return usage_err("no command");
	if (strcmp(argv[i], "help") == 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!api || !*api)
		api = getenv("SLUICE_API");
	if (!api || !*api)
		api = DEFAULT_API;
	if (cli_url_parse(api, &o.url, err, sizeof(err)) < 0)
		return usage_err("--api: %s", err);
	o.api = api;
	o.token = getenv("SLUICE_TOKEN");
	if (o.token && !*o.token)
		o.token = NULL;
	if (o.token && !token_ok(o.token)) {
		warnx("$SLUICE_TOKEN holds a space, control or non-ASCII character; a token "
		      "cannot go in a header like that");
		return EXIT_USAGE;
	}
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		if (strcmp(argv[i], cmds[k].name) != 0)
			continue;
		rc = cmds[k].fn(&o, argc - i, argv + i);
		if (fflush(stdout) != 0 && rc == 0) {
			warnx("writing standard output: %s", strerror(errno));
			rc = EXIT_API;
		}
		return rc;
	}
	return usage_err("unknown command '%s'", argv[i]);
}

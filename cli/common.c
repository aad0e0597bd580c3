/* common.c: what every command of `sluice` uses: messages, option
 * scanning, requests and their answers, tables and values. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"

/* ---- small helpers ------------------------------------------------- */

void
oom(void)
{
	fputs("sluice: out of memory\n", stderr);
	exit(EXIT_API);
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom();
	return p;
}

bool sl_json_errors;

/* The error as the API's JSON shape, one line on stdout. */
static void
json_error(const char *code, const char *msg, const json_t *details)
{
	json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);

	if (!e) {
		/* not UTF-8: say so in place of the message */
		e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
			      "(a message that is not UTF-8)");
		if (!e)
			oom();
	}
	if (details)
		json_object_set(json_object_get(e, "error"), "details", (json_t *)(uintptr_t)details);
	fflush(stdout);
	json_dumpf(e, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(e);
}

void
vwarnc(const char *code, const char *fmt, va_list ap)
{
	if (sl_json_errors) {
		char *m;

		if (vasprintf(&m, fmt, ap) < 0)
			oom();
		json_error(code, m, NULL);
		free(m);
		return;
	}
	fputs("sluice: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
warnc(const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnc(code, fmt, ap);
	va_end(ap);
}

void
api_error(const char *code, const char *msg)
{
	char *cs, *ms;

	if (sl_json_errors) {
		json_error(code, msg, NULL);
		return;
	}
	cs = xstrdup(code);
	ms = xstrdup(msg);
	sanitize(cs);
	sanitize(ms);
	fprintf(stderr, "sluice: %s: %s\n", cs, ms);
	free(cs);
	free(ms);
}

void
vwarnx(const char *fmt, va_list ap)
{
	vwarnc(SL_E_CLIENT, fmt, ap);
}

void
warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnc(SL_E_CLIENT, fmt, ap);
	va_end(ap);
}

void
warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("sluice: warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Prints "sluice: CMD: message" and where the usage is; returns EXIT_USAGE. */
int
usage_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnc(SL_E_USAGE, fmt, ap);
	va_end(ap);
	/* The one line says what was wrong; the whole usage would bury it. */
	if (!sl_json_errors)
		fputs("sluice: 'sluice --help' shows every command and option\n", stderr);
	return EXIT_USAGE;
}

/* Writes all of p[0..n) to fd. Returns 0 or a negative errno. */
int
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
int
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
int
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
bool
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

/* Scans argv[*i] for an option of specs (or the global --json and --api,
 * which any command also takes). Returns the index of the spec matched
 * (*val set for options with an argument), -1 at the first operand (or
 * after "--", consumed, when stop_dashdash), or -2 after printing a usage
 * error. */
int
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
			sl_json_errors = true;
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

/* Takes no operands, only the global options. */
int
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

/* ---- requests ------------------------------------------------------ */

/* Sends the file body. Returns 0, a negative errno from the socket
 * (*local false) or from reading the file (*local true). */
int
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
int
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
int
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
int
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
void
sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Prints an error detail, pointing into the source file when the detail's
 * JSON path ("pools[0].warm_max: ...") came from it. */
void
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
int
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
	if (sl_json_errors) {
		char *m = NULL, *cs = NULL;

		if (!msg && asprintf(&m, "HTTP %d %s", r->status, r->reason) < 0)
			oom();
		if (!code && asprintf(&cs, "http-%d", r->status) < 0)
			oom();
		json_error(code ? code : cs, msg ? msg : m, json_is_array(details) ? details : NULL);
		free(m);
		free(cs);
		json_decref(root);
		free(b);
		return EXIT_API;
	}
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

bool
is_2xx(const struct cli_conn *c)
{
	return c->resp.status >= 200 && c->resp.status < 300;
}

/* One request whose answer is JSON. Returns 0 with *out, or EXIT_API. */
int
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

void
print_json(const json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
}

/* ---- tables and values --------------------------------------------- */

/* A value for people: strings as they are, numbers, "-" for null or
 * absent, lists joined with ", ", objects as compact JSON. Returns a
 * malloc'd string without control bytes. */
char *
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

char *
field(const json_t *obj, const char *key)
{
	return show_value(json_object_get(obj, key));
}

void
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
void
table_cell(struct sl_table *t, char *s)
{
	t->cells = xrealloc(t->cells, (t->n + 1) * sizeof(*t->cells));
	t->cells[t->n++] = s;
}

/* Display width: UTF-8 continuation bytes take no column. */
size_t
width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void
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
void
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
int
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

void
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

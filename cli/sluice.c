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

#include "sluice.h"
#include "sluice-int.h"
#include "exec_stream.h"

const char usage_text[] =
	"usage: sluice [--api URL|unix:PATH] [--json] COMMAND ...\n"
	"  claim [--pool P] [--ttl S] [--env K=V]... [--label K=V]... [-q]\n"
	"  ls [ID:PATH]                            (sandboxes, or a directory)\n"
	"  show ID\n"
	"  exec [--timeout S] [--env K=V]... [--cwd DIR] [--stdin] ID -- ARGV...\n"
	"  exec -i|-t|-it|--detach [--timeout S] [--env K=V]... [--cwd DIR] ID -- ARGV...\n"
	"  shell [--env K=V]... [--cwd DIR] ID     (a login shell, as exec -it)\n"
	"  cp LOCAL ID:PATH | ID:PATH LOCAL        (- for stdin/stdout)\n"
	"  cp -r LOCALDIR ID:DIR | ID:DIR LOCALDIR (a tree: files, dirs, links)\n"
	"  rm ID...\n"
	"  pools get\n"
	"  pools diff FILE.yaml                   (what apply would change; changes nothing)\n"
	"  pools apply [--yes] FILE.yaml          (asks before removing a pool or draining)\n"
	"  info\n"
	"  usage [--tenant T] [--since TIME]      (claim-seconds per tenant and pool)\n"
	"  metrics [PREFIX]                       (the Prometheus text of /metrics)\n"
	"\n"
	"  --api URL      http://HOST:PORT or unix:PATH (default $SLUICE_API, then\n"
	"                 " DEFAULT_API ")\n"
	"  --json         print the API's JSON instead of tables, and errors as JSON\n"
	"                 on stdout: {\"error\": {\"code\": ..., \"message\": ...}}\n"
	"  -q, --quiet    claim: print the sandbox id only\n"
	"  -h, --help     this text;  -V, --version  the version\n"
	"\n"
	"The token comes from $SLUICE_TOKEN (sent as Authorization: Bearer).\n"
	"Exit codes: 0 success, 1 an API error, 2 bad usage; exec exits with the\n"
	"command's code (128+N for signal N, 124 when it timed out; either is said\n"
	"on stderr too).\n";

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
cmd_ls(struct sl_opts *o, int argc, char **argv)
{
	static const char *const header[] = { "ID",    "POOL",    "TENANT", "TIER",
					      "STATE", "ADDRESS", "EXPIRES" };
	static const char *const keys[] = { "id",    "pool",    "tenant",    "tier",
					    "state", "address", "expires_at" };
	int rc;

	if (argc >= 2 && argc <= 3 && strchr(argv[argc - 1], ':') && argv[argc - 1][0] != '-')
		return sl_files_ls(o, argc, argv);
	rc = no_operands(o, "ls", argc, argv);
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
	long long timeout_s;            /* what was asked (the API's default: 300) */
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

/* A command ended by its timeout or a signal says so on stderr (its exit
 * status, 124 or 128+N, says it to scripts). */
static void
exit_note(const struct sl_exec *x, const json_t *ev)
{
	const json_t *sig = json_object_get(ev, "signal");

	if (json_is_true(json_object_get(ev, "timed_out"))) {
		warning("exec: the command timed out after %lld s (--timeout) and was killed",
			x->timeout_s);
	} else if (json_is_integer(sig) && json_integer_value(sig) > 0 &&
		   json_integer_value(sig) < 128) {
		const char *name = sigabbrev_np((int)json_integer_value(sig));

		warning("exec: the command was killed by signal %d (%s)",
			(int)json_integer_value(sig), name ? name : "?");
	}
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
		exit_note(x, ev);
	} else if (strcmp(type, "error") == 0) {
		char *c = field(ev, "code"), *m = field(ev, "message");

		api_error(c, m);
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
		warning("the output was truncated by the server");
	rc = exit_status(res);
	exit_note(x, res);
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
	struct sl_exec x = { .o = o, .timeout_s = 300 };
	struct sl_req r = { .method = "POST", .accept = "application/x-ndjson",
			    .ctype = "application/json", .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	const char *val, *id = NULL;
	char *target = NULL, *text = NULL, *buf = NULL;
	bool want_stdin = false;
	int i = 1, k = -1, rc = EXIT_USAGE;

	if (!body || !env || !args)
		oom();
	if (cli_xs_wanted(argc, argv)) {
		json_decref(body);
		json_decref(env);
		json_decref(args);
		return cmd_stream(o, "exec", argc, argv);
	}
	for (;;) {
		long long t;

		if (i < argc && strcmp(argv[i], "--") == 0)
			break;
		k = next_opt(o, "exec", argc, argv, &i, specs, &val);
		if (k == -1 && i < argc && !id) {
			id = argv[i++]; /* options may follow the ID too */
			continue;
		}
		if (k < 0)
			break;
		if (k == 0) {
			if (!parse_uint(val, 86400, &t) || t == 0) {
				usage_err("exec: --timeout wants whole seconds 1-86400, not '%s'",
					  val);
				goto out;
			}
			json_object_set_new(body, "timeout_seconds", json_integer(t));
			x.timeout_s = t;
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
	if (!id) {
		usage_err("exec: give a sandbox ID, then -- and the command");
		goto out;
	}
	if (!cli_id_valid(id, strlen(id))) {
		usage_err("exec: '%s' is not a sandbox id ([A-Za-z0-9_-]+)", id);
		goto out;
	}
	if (i < argc && strcmp(argv[i], "--") != 0) {
		usage_err("exec: '%s' follows the sandbox ID %s: put -- between the ID and the "
			  "command", argv[i], id);
		goto out;
	}
	if (i >= argc) {
		usage_err("exec: no -- and command after the sandbox ID %s", id);
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
		warnx("cp: %s:%s is a directory: use cp -r", id, rpath);
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
		warnx("cp: %s is a directory: use cp -r", local);
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

	static const struct sl_optspec specs[] = { { "--recursive", 'r', false },
						   { NULL, 0, false } };
	bool recursive = false;

	while ((k = next_opt(o, "cp", argc, argv, &i, specs, &val)) >= 0)
		recursive = true;
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
		if (recursive)
			return sl_files_cp_down(o, id, spath, argv[i + 1]);
		return cp_download(o, id, spath, argv[i + 1]);
	}
	memcpy(id, argv[i + 1], did);
	id[did] = '\0';
	if (recursive)
		return sl_files_cp_up(o, argv[i], id, dpath);
	return cp_upload(o, argv[i], id, dpath);
}

/* ---- for files.c (sluice-int.h) -------------------------------------- */

int
sl_request(const struct sl_opts *o, struct cli_conn *c, const struct sl_req *r)
{
	return request(o, c, r);
}

int
sl_api_fail(const struct sl_opts *o, struct cli_conn *c)
{
	return api_fail(o, c, NULL);
}

int
sl_read_json(const struct sl_opts *o, struct cli_conn *c, struct json_t **out)
{
	return read_json(o, c, out);
}

void
sl_print_json(const struct json_t *j)
{
	print_json(j);
}

int
sl_usage_err(const char *msg)
{
	return usage_err("%s", msg);
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
		{ "pools", cmd_pools }, { "info", cmd_info },   { "usage", cmd_usage },
		{ "metrics", cmd_metrics }, { "shell", cmd_shell },
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
			sl_json_errors = true;
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
	if (i >= argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
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

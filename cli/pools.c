/* pools.c: `sluice pools get|diff|apply`. The diff is the daemon's
 * (PUT /v1/pools?dry_run=1, pools/diff.h); this file only shows it, and
 * asks before an apply removes a pool or drains warm sandboxes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"

static int
pools_get(struct sl_opts *o)
{
	static const char *const header[] = { "NAME",   "BACKEND", "TEMPLATE", "LANE",
					      "POLICY", "WARM",    "WARM_MAX" };
	static const char *const keys[] = { "name",   "backend", "template", "lane",
					    "policy", "warm",    "warm_max" };
	return list_table(o, "/v1/pools", "pools", header, keys, 7);
}

/* A pool file read and converted: the PUT body and where its paths are. */
struct pools_file {
	const char *file;
	struct cli_yposv pos;
	struct sl_srcmap src;
	json_t *doc, *body;
	char *text;
};

static void
pools_file_fini(struct pools_file *f)
{
	json_decref(f->body);
	json_decref(f->doc);
	cli_yposv_fini(&f->pos);
	free(f->text);
}

/* Reads FILE (- for stdin) into f->body. Returns 0, or EXIT_API after
 * saying why. */
static int
pools_file_read(struct pools_file *f, const char *file)
{
	char err[1024], warn[1024];
	size_t n;
	int fd, e;

	memset(f, 0, sizeof(*f));
	f->file = file;
	f->src.file = file;
	f->src.pos = &f->pos;
	fd = strcmp(file, "-") == 0 ? 0 : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		warnc(SL_E_LOCAL, "%s: %s", file, strerror(errno));
		return EXIT_API;
	}
	e = read_all(fd, MAX_YAML_FILE, &f->text, &n);
	if (fd > 0)
		close(fd);
	if (e < 0) {
		warnc(SL_E_LOCAL, "%s: %s", file, e == -EFBIG ? "over 16 MiB" : strerror(-e));
		return EXIT_API;
	}
	f->doc = cli_yaml_to_json(file, f->text, n, &f->pos, err, sizeof(err));
	if (!f->doc) {
		warnc("bad-request", "%s", err);
		return EXIT_API;
	}
	f->body = cli_pools_body(file, f->doc, &f->pos, warn, sizeof(warn), err, sizeof(err));
	if (!f->body) {
		warnc("bad-request", "%s", err);
		return EXIT_API;
	}
	if (warn[0])
		warning("%s", warn);
	return 0;
}

static json_int_t
count(const json_t *obj, const char *key)
{
	return json_integer_value(json_object_get(obj, key));
}

static const char *
plural(json_int_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* The diff of a PUT /v1/pools answer, for people:
 *   + fresh   added
 *   ~ web     changed: policy, warm; 1 live claim keeps its layer
 *   - idle    removed: 2 warm sandboxes drain */
static void
print_diff(const json_t *res)
{
	const json_t *sum = json_object_get(res, "summary");
	size_t i, w = 0;
	json_t *e;

	json_array_foreach(json_object_get(res, "changes"), i, e) {
		char *name = field(e, "name");

		if (width(name) > w)
			w = width(name);
		free(name);
	}
	json_array_foreach(json_object_get(res, "changes"), i, e) {
		char *name = field(e, "name"), *ch = field(e, "change");
		json_int_t drained = count(e, "warm_drained"), kept = count(e, "claims_kept");
		const char *mark = strcmp(ch, "added") == 0     ? "+"
				   : strcmp(ch, "removed") == 0 ? "-"
				   : strcmp(ch, "changed") == 0 ? "~"
								: "=";
		const char *sep = ": ";

		printf("%s %s", mark, name);
		for (size_t k = width(name); k < w + 2; k++)
			fputc(' ', stdout);
		printf("%s", ch);
		if (json_array_size(json_object_get(e, "keys"))) {
			size_t j;
			json_t *k;

			json_array_foreach(json_object_get(e, "keys"), j, k) {
				char *ks = show_value(k);

				printf("%s%s", j ? ", " : sep, ks);
				free(ks);
			}
			sep = "; ";
		}
		if (drained > 0) {
			printf("%s%lld warm %s %s", sep, (long long)drained,
			       plural(drained, "sandbox", "sandboxes"),
			       strcmp(ch, "removed") == 0 ? plural(drained, "drains", "drain")
							  : plural(drained, "is replaced",
								   "are replaced"));
			sep = "; ";
		}
		if (kept > 0)
			printf("%s%lld live %s %s sandbox and pinned layer", sep, (long long)kept,
			       plural(kept, "claim", "claims"), plural(kept, "keeps its", "keep their"));
		fputc('\n', stdout);
		free(name);
		free(ch);
	}
	if (!json_array_size(json_object_get(res, "changes")))
		printf("no pools before or after\n");
	printf("%lld added, %lld removed, %lld changed, %lld unchanged; %lld warm %s %s\n",
	       (long long)count(sum, "added"), (long long)count(sum, "removed"),
	       (long long)count(sum, "changed"), (long long)count(sum, "unchanged"),
	       (long long)count(sum, "warm_drained"),
	       plural(count(sum, "warm_drained"), "sandbox", "sandboxes"),
	       plural(count(sum, "warm_drained"), "drains", "drain"));
}

/* What an apply would destroy: a removed pool, a warm sandbox drained. */
static bool
destructive(const json_t *res)
{
	const json_t *sum = json_object_get(res, "summary");

	return count(sum, "removed") > 0 || count(sum, "warm_drained") > 0;
}

/* Asks on the terminal. Returns 1 (yes), 0 (no), or -1 with no terminal. */
static int
confirm(const json_t *res)
{
	const json_t *sum = json_object_get(res, "summary");
	char line[64];
	FILE *tty = fopen("/dev/tty", "r+");
	int yes;

	if (!tty)
		return -1;
	fprintf(tty, "Remove %lld %s and drain %lld warm %s? [y/N] ",
		(long long)count(sum, "removed"), plural(count(sum, "removed"), "pool", "pools"),
		(long long)count(sum, "warm_drained"),
		plural(count(sum, "warm_drained"), "sandbox", "sandboxes"));
	fflush(tty);
	yes = fgets(line, sizeof(line), tty) && (line[0] == 'y' || line[0] == 'Y');
	fclose(tty);
	return yes;
}

static int
pools_put(struct sl_opts *o, const struct pools_file *f, bool dry_run, json_t **res)
{
	int rc = call_json(o, "PUT", dry_run ? "/v1/pools?dry_run=1" : "/v1/pools", f->body,
			   res, &f->src);

	/* A daemon older than dry_run ignores the query and applies: say so
	 * rather than show a diff that did not come. */
	if (rc == 0 && dry_run && !json_is_true(json_object_get(*res, "dry_run"))) {
		warnc(SL_E_CLIENT, "%s does not know dry_run (a daemon older than this client): "
			     "the pool set of %s was APPLIED", o->api, f->file);
		json_decref(*res);
		*res = NULL;
		rc = EXIT_API;
	}
	return rc;
}

static int
pools_diff(struct sl_opts *o, const char *file)
{
	struct pools_file f;
	json_t *res = NULL;
	int rc = pools_file_read(&f, file);

	if (rc == 0)
		rc = pools_put(o, &f, true, &res);
	if (rc == 0) {
		if (o->json)
			print_json(res);
		else
			print_diff(res);
	}
	json_decref(res);
	pools_file_fini(&f);
	return rc;
}

static int
pools_apply(struct sl_opts *o, const char *file, bool yes)
{
	struct pools_file f;
	json_t *plan = NULL, *res = NULL;
	int rc = pools_file_read(&f, file);

	if (rc != 0)
		goto out;
	/* The daemon's dry run first: what this would change. */
	rc = pools_put(o, &f, true, &plan);
	if (rc != 0)
		goto out;
	if (!o->json)
		print_diff(plan);
	if (destructive(plan) && !yes) {
		const json_t *sum = json_object_get(plan, "summary");
		int c = confirm(plan);

		if (c <= 0) {
			warnc(SL_E_CONFIRM,
			      "pools apply: %s would remove %lld %s and drain %lld warm %s; %s "
			      "(nothing was changed)",
			      file, (long long)count(sum, "removed"),
			      plural(count(sum, "removed"), "pool", "pools"),
			      (long long)count(sum, "warm_drained"),
			      plural(count(sum, "warm_drained"), "sandbox", "sandboxes"),
			      c < 0 ? "no terminal to ask on: give --yes to apply it"
				    : "not confirmed");
			rc = EXIT_API;
			goto out;
		}
	}
	rc = pools_put(o, &f, false, &res);
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
	json_decref(plan);
	json_decref(res);
	pools_file_fini(&f);
	return rc;
}

int
cmd_pools(struct sl_opts *o, int argc, char **argv)
{
	static const struct sl_optspec apply_specs[] = {
		{ "--yes", 'y', false },
		{ NULL, 0, false },
	};
	const char *val, *sub;
	bool yes = false;
	int i = 1, j = 1, k;

	while ((k = next_opt(o, "pools", argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (i >= argc)
		return usage_err("pools: 'get', 'diff FILE.yaml' or 'apply [--yes] FILE.yaml'");
	sub = argv[i];
	argc -= i;
	argv += i;
	if (strcmp(sub, "get") == 0) {
		if (no_operands(o, "pools get", argc, argv) != 0)
			return EXIT_USAGE;
		return pools_get(o);
	}
	if (strcmp(sub, "diff") == 0) {
		while ((k = next_opt(o, "pools diff", argc, argv, &j, NULL, &val)) >= 0)
			;
		if (k == -2)
			return EXIT_USAGE;
		if (argc - j != 1)
			return usage_err("pools diff: give one FILE.yaml");
		return pools_diff(o, argv[j]);
	}
	if (strcmp(sub, "apply") == 0) {
		const char *file = NULL;

		/* --yes before or after the file */
		for (;;) {
			k = next_opt(o, "pools apply", argc, argv, &j, apply_specs, &val);
			if (k == 0) {
				yes = true;
				continue;
			}
			if (k == -1 && j < argc && !file) {
				file = argv[j++];
				continue;
			}
			break;
		}
		if (k == -2)
			return EXIT_USAGE;
		if (!file || j < argc)
			return usage_err("pools apply: give one FILE.yaml");
		return pools_apply(o, file, yes);
	}
	return usage_err("pools: unknown subcommand '%s': 'get', 'diff FILE.yaml' or "
			 "'apply [--yes] FILE.yaml'", sub);
}

/* pools.c: `sluice pools get|apply`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"

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

int
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

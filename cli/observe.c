/* observe.c: `sluice usage` (GET /v1/usage: claim-seconds per tenant and
 * pool, from the journal) and `sluice metrics` (GET /metrics, the
 * Prometheus text, optionally only the families of a name prefix). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

int
cmd_usage(struct sl_opts *o, int argc, char **argv)
{
	static const struct sl_optspec specs[] = {
		{ "--tenant", 0, true },
		{ "--since", 0, true },
		{ NULL, 0, false },
	};
	static const char *const header[] = { "TENANT", "POOL", "CLAIMS", "CLAIM_SECONDS" };
	static const char *const keys[] = { "tenant", "pool", "claims", "claim_seconds" };
	const char *tenant = NULL, *since = NULL, *val;
	char *target, *t = NULL, *s = NULL;
	json_t *res = NULL, *list;
	int i = 1, k, rc;

	while ((k = next_opt(o, "usage", argc, argv, &i, specs, &val)) >= 0) {
		if (k == 0)
			tenant = val;
		else
			since = val;
	}
	if (k == -2)
		return EXIT_USAGE;
	if (i < argc)
		return usage_err("usage: unexpected argument '%s'", argv[i]);
	if (tenant && !(t = cli_pct_encode(tenant)))
		oom();
	if (since && !(s = cli_pct_encode(since)))
		oom();
	if (asprintf(&target, "/v1/usage?tenant=%s&since=%s", t ? t : "", s ? s : "") < 0)
		oom();
	free(t);
	free(s);
	rc = call_json(o, "GET", target, NULL, &res, NULL);
	free(target);
	if (rc != 0)
		return rc;
	list = json_object_get(res, "usage");
	if (o->json) {
		print_json(res);
	} else if (!json_is_array(list)) {
		warnx("unexpected answer: no \"usage\" list");
		rc = EXIT_API;
	} else {
		char *from = field(res, "since"), *until = field(res, "until");

		printf("claim-seconds from %s to %s\n", from, until);
		free(from);
		free(until);
		if (json_array_size(list))
			print_rows(list, header, keys, 4);
		else
			printf("no claims\n");
	}
	json_decref(res);
	return rc;
}

int
cmd_metrics(struct sl_opts *o, int argc, char **argv)
{
	struct sl_req r = { .method = "GET", .target = "/metrics", .accept = "text/plain",
			    .upload_fd = -1 };
	struct cli_conn c = { .fd = -1 };
	const char *prefix = NULL, *val;
	char *body = NULL;
	size_t n, matched = 0;
	int i = 1, k, rc;

	while ((k = next_opt(o, "metrics", argc, argv, &i, NULL, &val)) >= 0)
		;
	if (k == -2)
		return EXIT_USAGE;
	if (argc - i > 1)
		return usage_err("metrics: at most one PREFIX, not '%s'", argv[i + 1]);
	if (i < argc)
		prefix = argv[i];
	if (o->json)
		return usage_err("metrics: --json: /metrics is Prometheus text, not JSON");
	rc = request(o, &c, &r);
	if (rc == 0 && !is_2xx(&c))
		rc = api_fail(o, &c, NULL);
	else if (rc == 0)
		rc = read_body(o, &c, CLI_MAX_JSON, &body, &n);
	cli_conn_close(&c);
	if (rc != 0)
		return rc;
	for (const char *p = body, *end = body + n; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (!prefix || cli_metric_line_matches(p, len, prefix)) {
			char *line = xmalloc(len + 1);

			memcpy(line, p, len);
			line[len] = '\0';
			sanitize(line);
			printf("%s\n", line);
			free(line);
			matched++;
		}
		p += len + 1;
	}
	free(body);
	if (prefix && matched == 0) {
		warnc("not-found", "metrics: no metric named %s...", prefix);
		return EXIT_API;
	}
	return 0;
}

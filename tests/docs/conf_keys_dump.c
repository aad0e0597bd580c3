/* conf_keys_dump: prints the configuration keys the loader accepts, as the
 * code has them (not as a regex over its source would guess them).
 *
 * Reads YAML documents from stdin, separated by lines "#%%DOC", loads each
 * with conf_load_mem() and prints, for each, a line "DOC N" and then one line
 * "PATH<TAB>KEY KEY ..." for every mapping the loader checked
 * (cs_schema_probe, conf/conf-schema.h). tests/docs/config_keys.py drives it:
 * it grows documents key by key until every mapping of the schema has been
 * reached, then compares the key paths with docs/config.md. The load's
 * errors are expected (the documents are skeletons) and not printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-schema.h"
#include "conf.h"

static void
probe(const char *path, const char *const *keys)
{
	printf("%s\t", path);
	for (size_t i = 0; keys[i]; i++)
		printf("%s%s", i ? " " : "", keys[i]);
	putchar('\n');
}

static void
load(const char *buf, size_t len, int n)
{
	struct conf_diag d;
	struct conf *c;

	printf("DOC %d\n", n);
	conf_diag_init(&d);
	c = conf_load_mem("probe.yaml", buf, len, &d);
	conf_unref(c);
	conf_diag_fini(&d);
}

int
main(void)
{
	size_t cap = 1 << 16, len = 0, start = 0;
	char *buf = malloc(cap);
	int n = 0;
	size_t r;

	if (!buf)
		return 1;
	while ((r = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
		len += r;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				return 1;
			buf = nb;
		}
	}
	buf[len] = '\0';
	cs_schema_probe = probe;
	for (;;) {
		char *sep = strstr(buf + start, "#%%DOC\n");
		size_t end = sep ? (size_t)(sep - buf) : len;

		load(buf + start, end - start, n++);
		if (!sep)
			break;
		start = end + strlen("#%%DOC\n");
	}
	free(buf);
	return 0;
}

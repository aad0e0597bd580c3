/* cli_metrics.c: picking families out of the Prometheus text format for
 * `sluice metrics PREFIX`. Pure. */
#include <string.h>

#include "cli_util.h"

bool
cli_metric_line_matches(const char *line, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (n >= 7 && (memcmp(line, "# HELP ", 7) == 0 || memcmp(line, "# TYPE ", 7) == 0)) {
		line += 7;
		n -= 7;
	} else if (n > 0 && line[0] == '#') {
		return false;   /* another comment: nobody's */
	}
	return pl > 0 && n >= pl && memcmp(line, prefix, pl) == 0;
}

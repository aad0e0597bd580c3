/* fuzz_conf.c: the YAML configuration loader on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"

#include "conf.h"


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf_diag d;
	struct conf *c;

	conf_diag_init(&d);
	c = conf_load_mem("fuzz.yaml", (const char *)data, size, &d);
	conf_unref(c);
	conf_diag_fini(&d);
	return 0;
}

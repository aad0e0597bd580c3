/* fuzz.h: what every libFuzzer target here shares: the entry point's
 * prototype (the targets are built with -Wmissing-prototypes) and CHECK,
 * an invariant whose failure libFuzzer must see as a crash. */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                             \
	do {                                                                 \
		if (!(x))                                                    \
			abort();                                             \
	} while (0)

#endif

/* sl_test.h: what every cmocka program here shares.
 *
 * A skip is never a pass. sl_skip(fmt, ...) says why on the test's output
 * and skips; sl_main_exit() then turns a run that skipped anything (and
 * failed nothing) into exit 77, which ctest (SKIP_RETURN_CODE) reports as
 * "Skipped" in its summary. ./build.sh test fails when anything skips as
 * root: every test that needs root or namespaces must run there.
 *
 * Use: `return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));`
 * Include after <cmocka.h>. */
#ifndef SL_TEST_H
#define SL_TEST_H

#include <stdio.h>

static int sl_test_skips;

#define sl_skip(...)                                                            \
	do {                                                                    \
		char sl_why_[256];                                              \
		snprintf(sl_why_, sizeof(sl_why_), __VA_ARGS__);                \
		print_message("SKIP: %s\n", sl_why_);                           \
		sl_test_skips++;                                                \
		skip();                                                         \
	} while (0)

static inline int
sl_main_exit(int failed)
{
	if (failed)
		return failed;
	return sl_test_skips ? 77 : 0;
}

#endif

/* support_seed.h: seeded randomness for the engine tests.  The seed is read
 * once per test executable, from IPU_TEST_SEED (strtoull, base 0: decimal or
 * 0x hex) or else from the clock.  tseed_init prints it when the executable
 * starts ("<test>: seed N"), and every failure raised through TSEED_FAIL or
 * TSEED_OK prints it again, so a failing run can be repeated with
 * IPU_TEST_SEED=N.
 *
 * The generator is splitmix64.  tseed_reset(salt) restarts the stream at a
 * point that depends only on the seed and the salt (salt 0: the seed itself),
 * so a test that resets with its own salt draws the same numbers whichever
 * tests ran before it.
 *
 * TSEED_FAIL and TSEED_OK expand to cmocka calls: include <cmocka.h> (after
 * its prerequisites) before using them.
 */
#ifndef IPU_TESTS_SUPPORT_SEED_H
#define IPU_TESTS_SUPPORT_SEED_H

#include <stdint.h>

#include "ipu/ipu.h"

/* Read the seed (first call only), print it with the test's name and restart
 * the stream at salt 0.  Call once from main, before the tests run. */
void tseed_init(const char *test_name);
/* The seed; read on first use when tseed_init has not run. */
uint64_t tseed(void);
/* Restart the stream at seed ^ (salt * 0x9E3779B97F4A7C15). */
void tseed_reset(uint64_t salt);
/* The next 64 random bits. */
uint64_t tseed_rnd(void);
/* tseed_rnd() % n, for n > 0. */
uint32_t tseed_below(uint32_t n);

/* "seed N (IPU_TEST_SEED to repeat): " as a cmocka error, without a newline:
 * the failure message follows it on the same line. */
void tseed_print_error(void);

/* Fail the test with a printf-style message, the seed in front of it. */
#define TSEED_FAIL(...)          \
    do {                         \
        tseed_print_error();     \
        fail_msg(__VA_ARGS__);   \
    } while (0)

/* A library call that must return IPU_OK; otherwise fail with the call, its
 * status and the context's message, the seed in front of them. */
#define TSEED_OK(ctx, expr) tseed_ok_at(__FILE__, __LINE__, (ctx), (expr), #expr)
void tseed_ok_at(const char *file, int line, const ipu_ctx *ctx, ipu_status status,
                 const char *what);

#endif

/* support_seed.c: the seeded randomness of support_seed.h: the seed (from
 * IPU_TEST_SEED or the clock, read once), a splitmix64 stream and the
 * failure helpers that print the seed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "support_seed.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t g_seed, g_rng;
static int g_seed_read;

uint64_t tseed(void)
{
    if (!g_seed_read) {
        const char *env = getenv("IPU_TEST_SEED");
        g_seed = env && *env ? strtoull(env, NULL, 0)
                             : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
        g_rng = g_seed;
        g_seed_read = 1;
    }
    return g_seed;
}

void tseed_init(const char *test_name)
{
    printf("%s: seed %llu\n", test_name, (unsigned long long)tseed());
    tseed_reset(0);
}

void tseed_reset(uint64_t salt) { g_rng = tseed() ^ (salt * GOLDEN); }

uint64_t tseed_rnd(void)
{
    tseed(); /* a stream used before any reset starts at the seed */
    uint64_t z = (g_rng += GOLDEN);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint32_t tseed_below(uint32_t n) { return (uint32_t)(tseed_rnd() % n); }

void tseed_print_error(void)
{
    print_error("seed %llu (IPU_TEST_SEED to repeat): ", (unsigned long long)tseed());
}

void tseed_ok_at(const char *file, int line, const ipu_ctx *ctx, ipu_status status,
                 const char *what)
{
    if (status == IPU_OK)
        return;
    tseed_print_error();
    print_error("%s -> %s: %s\n", what, ipu_status_name(status), ipu_ctx_errmsg(ctx));
    _fail(file, line);
}

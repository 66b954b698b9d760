/* random.c: counter-based random values: element i of stream s under seed S
 * is a pure function of (S, s, i) (splitmix64 of the counter, Box-Muller), so
 * any slice can be generated independently and in parallel.
 */
#include <math.h>

#include "workloads/workload.h"

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1) from 53 random bits. */
static double uniform(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

void ipu_random_normal(uint64_t seed, uint64_t stream, uint64_t offset, float *out, size_t n,
                       float scale)
{
    uint64_t key = mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull));
    for (size_t i = 0; i < n; i++) {
        uint64_t index = offset + i;
        /* Each pair of elements shares one Box-Muller draw. */
        uint64_t pair = index >> 1;
        double u1 = uniform(mix(key + 2 * pair)), u2 = uniform(mix(key + 2 * pair + 1));
        double radius = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
        double z = (index & 1) ? radius * sin(angle) : radius * cos(angle);
        out[i] = (float)(z * scale);
    }
}

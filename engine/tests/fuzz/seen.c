/* seen.c: the set of work a fuzz target has already done in this process
 * (fuzz.h: fuzz_seen_before).  A target whose steps are deterministic keys
 * a step by a digest of everything it reads and skips a step seen before:
 * it would do exactly what it did then.
 */
#include <string.h>

#include "fuzz.h"

int fuzz_seen_before(uint64_t key)
{
    /* Open addressing over 2^16 slots, 0 marking a free one, kept at most
     * half full: at 32,768 keys it starts afresh. */
    enum { SLOTS = 1 << 16 };
    static uint64_t seen[SLOTS];
    static size_t count;
    key |= 1;
    size_t i = key % SLOTS;
    for (; seen[i]; i = (i + 1) % SLOTS)
        if (seen[i] == key)
            return 1;
    if (count == SLOTS / 2) {
        memset(seen, 0, sizeof seen);
        count = 0;
        i = key % SLOTS;
    }
    seen[i] = key;
    count++;
    return 0;
}

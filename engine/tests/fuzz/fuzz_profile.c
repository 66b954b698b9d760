/* fuzz_profile.c: libFuzzer target for device profiles: the input is profile
 * JSON text.  ipu_profile_resolve must accept it or refuse it with a status
 * and a message; what it accepts is canonical, so resolving the canonical
 * text again gives the same text, and a device is created from it when that
 * is cheap (at most 1472 tiles: ipu_device_create allocates per-tile state,
 * SRAM comes only at initialize).  Both checks depend only on the canonical
 * text, so a canonical profile seen before (most mutations that resolve
 * change nothing that matters) is not checked again.  Seeds:
 * fixtures/profiles/ and fixtures/fuzz/profile/.
 */
#include <string.h>

#include "core/core.h"
#include "fuzz.h"

#include <jansson.h>

#define CREATE_MAX_TILES 1472

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipu_ctx *ctx = fuzz_context();
    char *text = fuzz_text(data, size);
    char *canonical = NULL;
    if (ctx && text &&
        fuzz_check(ctx, ipu_profile_resolve(ctx, text, 0, &canonical), "ipu_profile_resolve") == IPU_OK &&
        !fuzz_seen_before(ipu_digest64(canonical, strlen(canonical)))) {
        char *again = NULL;
        if (fuzz_check(ctx, ipu_profile_resolve(ctx, canonical, 0, &again), "ipu_profile_resolve") != IPU_OK ||
            strcmp(again, canonical)) {
            fprintf(stderr, "the canonical profile does not resolve to itself:\n%s\n%s\n", canonical,
                    again ? again : ipu_ctx_errmsg(ctx));
            abort();
        }
        ipu_free(again);
        json_t *profile = json_loads(canonical, 0, NULL);
        json_int_t tiles = json_integer_value(json_object_get(profile, "tiles"));
        json_decref(profile);
        if (tiles >= 1 && tiles <= CREATE_MAX_TILES) {
            ipu_device *dev = NULL;
            ipu_status status = fuzz_check(ctx, ipu_device_create(ctx, canonical, &dev), "ipu_device_create");
            if (status != IPU_OK && status != IPU_ERR_NO_MEMORY) {
                fprintf(stderr, "a resolved profile makes no device: %s\n", ipu_ctx_errmsg(ctx));
                abort();
            }
            ipu_device_free(dev);
        }
    }
    ipu_free(canonical);
    free(text);
    ipu_ctx_free(ctx);
    return 0;
}

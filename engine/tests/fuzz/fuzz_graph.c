/* fuzz_graph.c: libFuzzer target for graph descriptions (the workload
 * format a user or an importer writes, workloads/description.c): the input
 * is the description's JSON text, given to ipu_workload_create as
 * {"workload": "graph", "graph": input}.  It must accept it or refuse it with
 * a status and a message; what it accepts reads back: the description
 * ipu_workload_info_json writes creates a workload whose description is the
 * same text (reading back depends only on that text: a description written
 * before is not read back again).  Values are made on first use, so a
 * description of any size is read in microseconds; compiling and running
 * descriptions is the options target's work (its seeds include one).
 * Seeds: fixtures/fuzz/graph/.
 */
#include <string.h>

#include "core/core.h"
#include "fuzz.h"

#define PREFIX "{\"workload\": \"graph\", \"graph\": "

/* The workload of description text (NULL when refused). */
static ipu_workload *create(ipu_ctx *ctx, const char *text, size_t length)
{
    char *options = malloc(sizeof PREFIX + length + 1);
    if (!options)
        return NULL;
    memcpy(options, PREFIX, sizeof PREFIX - 1);
    memcpy(options + sizeof PREFIX - 1, text, length);
    memcpy(options + sizeof PREFIX - 1 + length, "}", 2);
    ipu_workload *w = NULL;
    fuzz_check(ctx, ipu_workload_create(ctx, options, &w), "ipu_workload_create");
    free(options);
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A NUL would end the options early: the text up to it is the input. */
    const uint8_t *nul = memchr(data, 0, size);
    size_t length = nul ? (size_t)(nul - data) : size;
    ipu_ctx *ctx = fuzz_context();
    ipu_workload *w = ctx ? create(ctx, (const char *)data, length) : NULL;
    char *described = NULL, *again = NULL;
    if (w && fuzz_check(ctx, ipu_workload_info_json(ctx, w, &described), "ipu_workload_info_json") == IPU_OK &&
        !fuzz_seen_before(ipu_digest64(described, strlen(described)))) {
        ipu_workload *second = create(ctx, described, strlen(described));
        if (!second || fuzz_check(ctx, ipu_workload_info_json(ctx, second, &again), "ipu_workload_info_json") ||
            strcmp(described, again)) {
            fprintf(stderr, "a written description does not read back to itself:\n%s\n%s\n", described,
                    again ? again : ipu_ctx_errmsg(ctx));
            abort();
        }
        ipu_workload_free(second);
    }
    ipu_free(again);
    ipu_free(described);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    return 0;
}

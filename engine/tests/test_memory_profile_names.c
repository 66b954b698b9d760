/* test_memory_profile_names.c: a workload's name never leads a memory
 * profile out of its folder.  A graph description names its workload, and
 * ipu_compile writes memory profiles as DIR/memory-<name>-<serial>.json: a
 * tiny MLP's description renamed "../../evil/x" and "../../../evil/x" is
 * compiled with the folders such names would reach made ready beforehand
 * (DIR/memory-.., DIR/evil and DIR/../evil), and every profile must be a
 * plain file in DIR named memory-<the name with each byte outside
 * [A-Za-z0-9_-] made '_'>-<serial>.json, listed in the compile report, with
 * the real name inside; nothing appears anywhere else.  A folder whose path
 * leaves no room for the file name is refused (IPU_ERR_INVALID_ARGUMENT),
 * not cut short into the path of another file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipu/ipu.h"
#include "support_seed.h"

#define MLP "{\"workload\": \"mlp\", \"tokens\": 8, \"channels\": 16, \"hidden\": 32, \"seed\": 3}"

/* The MLP, described, renamed and read back as a graph workload. */
static ipu_workload *renamed(ipu_ctx *ctx, const char *name)
{
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, MLP, &w));
    char *text = NULL;
    TSEED_OK(ctx, ipu_workload_info_json(ctx, w, &text));
    ipu_workload_free(w);
    json_t *d = json_loads(text, 0, NULL);
    ipu_free(text);
    assert_non_null(d);
    assert_int_equal(json_object_set_new(d, "name", json_string(name)), 0);
    json_t *o = json_pack("{s:s, s:o}", "workload", "graph", "graph", d);
    char *options = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    assert_non_null(options);
    w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, options, &w));
    free(options);
    return w;
}

#define MAX_ENTRIES 32
typedef char entry[256];

static int by_bytes(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* names sorted, as one string, each followed by '|'. */
static void joined(entry *names, size_t n, char *out, size_t size)
{
    qsort(names, n, sizeof *names, by_bytes);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strncat(out, names[i], size - strlen(out) - 1);
        strncat(out, "|", size - strlen(out) - 1);
    }
}

/* The entries of a folder (not . and ..), joined. */
static void listing(const char *folder, char *out, size_t size)
{
    DIR *dir = opendir(folder);
    assert_non_null(dir);
    entry names[MAX_ENTRIES];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            assert_true(n < MAX_ENTRIES);
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
        }
    closedir(dir);
    joined(names, n, out, size);
}

static void join(char *out, size_t size, const char *a, const char *b)
{
    int n = snprintf(out, size, "%s/%s", a, b);
    assert_true(n > 0 && (size_t)n < size);
}

/* Compile the workload named name with profiles into base/profiles; the
 * profiles must be memory-<safe>-<k>.json (k = 1..) and nothing else new. */
static void check_name(const char *base, const char *name, const char *safe)
{
    char dir[512], path[1024], options[1024], found[4096], expected[4096];
    join(dir, sizeof dir, base, "profiles");
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = renamed(ctx, name);
    snprintf(options, sizeof options, "{\"profile\": {\"tiles\": 4}, \"memory_profile_directory\": \"%s\"}", dir);
    ipu_package *pkg = NULL;
    char *report_text = NULL;
    TSEED_OK(ctx, ipu_compile(ctx, w, options, &pkg, &report_text));
    json_t *report = json_loads(report_text, 0, NULL);
    json_t *names = json_object_get(report, "memory_profiles");
    size_t count = json_array_size(names);
    if (count == 0)
        TSEED_FAIL("the compile of '%s' wrote no memory profile: %s", name, report_text);
    /* The folder holds the prepared subfolders and exactly the profiles the
     * report lists, each named from the safe name, serials from 1. */
    entry wanted[MAX_ENTRIES] = {"evil", "memory-.."};
    assert_true(count + 2 <= MAX_ENTRIES);
    for (size_t k = 1; k <= count; k++) {
        snprintf(wanted[k + 1], sizeof wanted[0], "memory-%s-%zu.json", safe, k);
        if (strcmp(json_string_value(json_array_get(names, k - 1)), wanted[k + 1]))
            TSEED_FAIL("profile %zu is listed as '%s', expected '%s'", k,
                       json_string_value(json_array_get(names, k - 1)), wanted[k + 1]);
    }
    joined(wanted, count + 2, expected, sizeof expected);
    listing(dir, found, sizeof found);
    if (strcmp(found, expected))
        TSEED_FAIL("'%s': the folder holds %s; expected %s", name, found, expected);
    /* Nothing went into the folders a raw name would reach. */
    join(path, sizeof path, dir, "evil");
    listing(path, found, sizeof found);
    assert_string_equal(found, "");
    join(path, sizeof path, dir, "memory-..");
    listing(path, found, sizeof found);
    assert_string_equal(found, "");
    join(path, sizeof path, base, "evil");
    listing(path, found, sizeof found);
    assert_string_equal(found, "");
    listing(base, found, sizeof found);
    assert_string_equal(found, "evil|profiles|");
    /* Each profile is a regular file that records the real name. */
    for (size_t k = 0; k < count; k++) {
        join(path, sizeof path, dir, json_string_value(json_array_get(names, k)));
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        json_t *profile = json_load_file(path, 0, NULL);
        assert_non_null(profile);
        assert_string_equal(json_string_value(json_object_get(profile, "scope")), name);
        json_decref(profile);
        assert_int_equal(unlink(path), 0);
    }
    json_decref(report);
    ipu_free(report_text);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_names_stay_in_the_folder(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char base[512], path[1024], dir[1024];
    snprintf(base, sizeof base, "%s/ipu-test-profile-names-%ld", tmp, (long)getpid());
    assert_int_equal(mkdir(base, 0700), 0);
    join(dir, sizeof dir, base, "profiles");
    assert_int_equal(mkdir(dir, 0700), 0);
    /* What DIR/memory-../../evil/x-1.json and DIR/memory-../../../evil/x-1.json would reach. */
    join(path, sizeof path, dir, "memory-..");
    assert_int_equal(mkdir(path, 0700), 0);
    join(path, sizeof path, dir, "evil");
    assert_int_equal(mkdir(path, 0700), 0);
    join(path, sizeof path, base, "evil");
    assert_int_equal(mkdir(path, 0700), 0);
    check_name(base, "../../evil/x", "______evil_x");
    check_name(base, "../../../evil/x", "_________evil_x");
    check_name(base, ".hidden name\t\xc3\xa9", "_hidden_name___");
    check_name(base, "mlp-2_B", "mlp-2_B");
    /* A folder whose path leaves no room for the file name ("DIR/././..."
     * past 4,096 bytes) is refused, not cut short into another path. */
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = renamed(ctx, "x");
    size_t length = strlen(dir);
    char *deep = malloc(length + 4200 + 1);
    assert_non_null(deep);
    memcpy(deep, dir, length + 1);
    while (strlen(deep) < 4200)
        strcat(deep, "/.");
    char *options = malloc(strlen(deep) + 128);
    assert_non_null(options);
    sprintf(options, "{\"profile\": {\"tiles\": 4}, \"memory_profile_directory\": \"%s\"}", deep);
    ipu_package *pkg = NULL;
    assert_int_equal(ipu_compile(ctx, w, options, &pkg, NULL), IPU_ERR_INVALID_ARGUMENT);
    assert_null(pkg);
    if (!strstr(ipu_ctx_errmsg(ctx), "the path of 'memory-x-1.json' in folder"))
        TSEED_FAIL("the refusal: %s", ipu_ctx_errmsg(ctx));
    char found[4096];
    listing(dir, found, sizeof found);
    assert_string_equal(found, "evil|memory-..|");
    free(options);
    free(deep);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    join(path, sizeof path, dir, "memory-..");
    assert_int_equal(rmdir(path), 0);
    join(path, sizeof path, dir, "evil");
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(dir), 0);
    join(path, sizeof path, base, "evil");
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(base), 0);
}

int main(void)
{
    tseed_init("test_memory_profile_names");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_stay_in_the_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

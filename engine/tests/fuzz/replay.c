/* replay.c: the main of a fuzz target built without libFuzzer (ctest's
 * fuzz_replay_* executables, gcc): runs every file named on the command line,
 * and every file in a folder named there, through the target's
 * LLVMFuzzerTestOneInput once, in name order, so the committed seeds and
 * reproducers keep running in CI.  A target aborts on a broken contract
 * (fuzz.h); ASan (IPU_SANITIZE=ON) catches memory errors and leaks.  Exit 1
 * when a path cannot be read or holds no file at all.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t size = 0, capacity = 4096;
    uint8_t *data = malloc(capacity);
    size_t got;
    while (data && (got = fread(data + size, 1, capacity - size, f)) > 0) {
        size += got;
        if (size == capacity) {
            uint8_t *grown = realloc(data, capacity *= 2);
            if (!grown)
                free(data);
            data = grown;
        }
    }
    int failed = !data || ferror(f);
    fclose(f);
    if (failed) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(data);
        return 1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of a folder, in name order; *files counts them. */
static int run_folder(const char *path, int *files)
{
    DIR *dir = opendir(path);
    if (!dir) {
        fprintf(stderr, "%s: cannot open the folder\n", path);
        return 1;
    }
    char **names = NULL;
    size_t count = 0, capacity = 0;
    int failed = 0;
    struct dirent *e;
    while (!failed && (e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        size_t length = strlen(path) + strlen(e->d_name) + 2;
        char *name = malloc(length);
        if (count == capacity) {
            char **grown = realloc(names, (capacity = capacity ? 2 * capacity : 64) * sizeof *names);
            if (grown)
                names = grown;
            else
                failed = 1;
        }
        if (!name || failed) {
            free(name);
            failed = 1;
            break;
        }
        snprintf(name, length, "%s/%s", path, e->d_name);
        names[count++] = name;
    }
    closedir(dir);
    qsort(names, count, sizeof *names, by_name);
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (!failed && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            failed = run_file(names[i]);
            ++*files;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

int main(int argc, char **argv)
{
    int files = 0, failed = 0;
    for (int i = 1; i < argc && !failed; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: no such file or folder\n", argv[i]);
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            failed = run_folder(argv[i], &files);
        } else {
            failed = run_file(argv[i]);
            files++;
        }
    }
    if (!failed && files == 0) {
        fprintf(stderr, "no input files\n");
        failed = 1;
    }
    if (!failed)
        printf("%d inputs ran without a crash\n", files);
    return failed;
}

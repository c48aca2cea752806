/* Replays fuzz inputs without libFuzzer, so a gcc build (and CI) runs every committed corpus
 * file through the target as a regression test. Arguments are files or directories. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int i, files = 0, errors = 0;

    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s does not exist\n", argv[i]);
            errors++;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char path[4096];
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.')
                    continue;
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                errors += run_file(path) < 0;
                files++;
            }
            if (d)
                closedir(d);
        } else {
            errors += run_file(argv[i]) < 0;
            files++;
        }
    }
    printf("replayed %d inputs, %d unreadable\n", files, errors);
    /* An empty corpus is a broken test, not a pass. */
    return errors || files == 0 ? 1 : 0;
}

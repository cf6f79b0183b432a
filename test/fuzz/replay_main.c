/* Standalone driver: replays a fuzz target's corpus under any compiler, so
 * `make test` checks every saved input without libFuzzer. Prints one TAP
 * line for the whole corpus. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return -1;
        size_t cap = 1 << 16, len = 0;
        uint8_t *buf = malloc(cap);
        size_t n;
        while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
                len += n;
                if (len == cap) {
                        uint8_t *nb = realloc(buf, cap *= 2);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                        }
                        buf = nb;
                }
        }
        fclose(f);
        if (!buf)
                return -1;
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        return 0;
}

int main(int argc, char **argv)
{
        size_t count = 0;
        int failed = 0;
        const char *name = argc > 1 ? argv[1] : "fuzz";
        for (int i = 2; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: cannot read %s\n", argv[i]);
                        failed = 1;
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        failed |= replay_file(argv[i]) < 0;
                        count++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        failed |= replay_file(path) < 0;
                        count++;
                }
                if (d)
                        closedir(d);
        }
        if (count == 0)
                failed = 1;
        printf("%sok 1 - %s replayed %zu inputs\n", failed ? "not " : "", name, count);
        return failed;
}

/* Reads the map outputs CompatTest.java wrote with lz4-java and zstd-jni
 * (shuffle 2 in DIR) with the mtshuffle reader, every partition alone and
 * random ranges, and compares with the plain bytes Java recorded.
 * Usage: compat_read DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtshuffle.h"

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    if (fread(b, 1, *len, f) != *len) { free(b); b = NULL; }
    fclose(f);
    return b;
}

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.piece_size = 8192;
    ro.max_bytes_in_flight = 64 << 10;
    mts_reader *r;
    char err[600];
    if (mts_reader_open_dir(&ro, argv[1], 2, &r, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    uint32_t nmaps = mts_reader_num_maps(r), n = mts_reader_num_partitions(r);
    unsigned char **plain = calloc(nmaps, sizeof *plain), **pidx = calloc(nmaps, sizeof *pidx);
    for (uint32_t m = 0; m < nmaps; m++) {
        char path[4096];
        size_t len;
        snprintf(path, sizeof path, "%.*s.plain", (int)(strlen(mts_reader_map_path(r, m)) - 5), mts_reader_map_path(r, m));
        plain[m] = slurp(path, &len);
        strcat(path, "index");
        pidx[m] = slurp(path, &len);
        if (!plain[m] || !pidx[m]) { fprintf(stderr, "missing %s\n", path); return 1; }
    }
    int checks = 0;
    for (uint32_t t = 0; t < n + 20; t++) {
        uint32_t a = t < n ? t : (uint32_t)rand() % n, b = t < n ? t + 1 : a + 1 + (uint32_t)rand() % (n - a);
        if (mts_reader_start(r, a, b) < 0) return 1;
        uint64_t pos = 0;
        uint32_t map = 0;
        mts_read_piece pc;
        int rc;
        while ((rc = mts_reader_next(r, &pc)) == 1) {
            if (pc.map != map) { map = pc.map; pos = 0; }
            uint64_t base = be64(pidx[map] + 8 * a), lim = be64(pidx[map] + 8 * b);
            if (base + pos + pc.len > lim || memcmp(plain[map] + base + pos, pc.data, pc.len)) {
                fprintf(stderr, "map %u partitions [%u,%u): bytes differ at %llu\n", map, a, b, (unsigned long long)pos);
                return 1;
            }
            pos += pc.len;
            checks++;
        }
        if (rc < 0) { fprintf(stderr, "%s\n", mts_reader_error(r)); return 1; }
    }
    printf("compat_read: %u Java-written outputs, %u partitions, %d pieces matched\n", nmaps, n, checks);
    mts_reader_free(r);
    for (uint32_t m = 0; m < nmaps; m++) {
        free(plain[m]);
        free(pidx[m]);
    }
    free(plain);
    free(pidx);
    return 0;
}

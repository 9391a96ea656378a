/* mtshuffle inspect FILE: the index, partition sizes and a checksum check of
 * one map output (FILE is its .data, .index or .checksum.ALGO file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
            if (n <= 0) { free(buf); buf = NULL; break; }
            got += (size_t)n;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

static const char *stream_kind(const unsigned char *p, uint64_t len)
{
    if (len >= 8 && !memcmp(p, "LZ4Block", 8)) return "lz4";
    if (len >= 4 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD) return "zstd";
    return "raw";
}

int cmd_inspect(int argc, char **argv)
{
    int json = 0, summary = 0;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--summary")) summary = 1;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: mtshuffle inspect FILE [--summary] [--json]\n"
                   "  FILE is a map output's .data, .index or .checksum.ALGO file.\n"
                   "  Prints every partition's offset, length and checksum (stored, computed);\n"
                   "  exits 1 if the index or a checksum is wrong.\n");
            return 0;
        } else if (!file) file = argv[i];
        else { fprintf(stderr, "inspect: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (!file) { fprintf(stderr, "usage: mtshuffle inspect FILE [--summary] [--json]\n"); return 2; }

    /* shuffle_S_M_0.<suffix>: everything up to "_0." is the base. */
    char base[4096], path[4200];
    const char *dot = strstr(file, "_0.");
    if (!dot) { fprintf(stderr, "inspect: %s is not named shuffle_S_M_0.*\n", file); return 2; }
    snprintf(base, sizeof base, "%.*s_0", (int)(dot - file), file);
    mts_checksum algo = MTS_CHECKSUM_NONE;
    const char *csuffix = strstr(dot, ".checksum.");
    if (csuffix && mts_checksum_parse(csuffix + 10, &algo) < 0) {
        fprintf(stderr, "inspect: unknown checksum algorithm in %s\n", file);
        return 2;
    }
    char sum_path[4200] = "";
    static const mts_checksum all[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    for (int k = 0; k < 3; k++) {
        if (algo != MTS_CHECKSUM_NONE && algo != all[k]) continue;
        snprintf(path, sizeof path, "%s.checksum.%s", base, mts_checksum_name(all[k]));
        if (access(path, R_OK) == 0) { algo = all[k]; snprintf(sum_path, sizeof sum_path, "%s", path); break; }
    }

    size_t ilen = 0, dlen = 0, clen = 0;
    snprintf(path, sizeof path, "%s.index", base);
    unsigned char *idx = slurp(path, &ilen), *data = NULL, *sums = NULL;
    int problems = 0;
    if (!idx) {
        fprintf(stderr, "inspect: cannot read %s: %s\n", path, strerror(errno));
        problems = 1;
        goto done;
    }
    snprintf(path, sizeof path, "%s.data", base);
    data = slurp(path, &dlen);
    if (!data) {
        if (errno != ENOENT) {
            fprintf(stderr, "inspect: cannot read %s: %s\n", path, strerror(errno));
            problems = 1;
            goto done;
        }
        data = calloc(1, 1); /* Spark reads a missing data file as empty */
    }
    sums = sum_path[0] ? slurp(sum_path, &clen) : NULL;
    if (ilen < 16 || ilen % 8) {
        fprintf(stderr, "inspect: %s.index has %zu bytes, not (N+1)*8 with N >= 1\n", base, ilen);
        problems = 1;
        goto done;
    }
    uint32_t n = (uint32_t)(ilen / 8 - 1);
    if (be64(idx) != 0) { fprintf(stderr, "inspect: the index does not start at 0\n"); problems++; }
    if (be64(idx + 8 * n) != dlen) {
        fprintf(stderr, "inspect: the index ends at %llu but the data file has %zu bytes\n",
                (unsigned long long)be64(idx + 8 * n), dlen);
        problems++;
    }
    if (sums && clen != (size_t)n * 8) {
        fprintf(stderr, "inspect: %s has %zu bytes, expected %u\n", sum_path, clen, n * 8);
        problems++;
        free(sums);
        sums = NULL;
    }
    uint64_t nonempty = 0, largest = 0, bad_sums = 0;
    const char *kind = "empty";
    if (!json && !summary) printf("%10s %14s %12s %10s %10s %s\n", "partition", "offset", "length", "stored", "computed", "");
    if (json) printf("{\"file\":\"%s\",\"partitions\":[", base);
    for (uint32_t p = 0; p < n; p++) {
        uint64_t a = be64(idx + 8 * p), b = be64(idx + 8 * (p + 1));
        int bad_range = b < a || b > dlen;
        uint64_t len = bad_range ? 0 : b - a;
        if (bad_range) problems++;
        if (len) {
            nonempty++;
            if (!strcmp(kind, "empty")) kind = stream_kind(data + a, len);
        }
        if (len > largest) largest = len;
        uint64_t stored = sums ? be64(sums + 8 * p) : 0;
        uint32_t got = sums ? mts_checksum_update(algo, mts_checksum_initial(algo), data + (bad_range ? 0 : a), len) : 0;
        int ok = !bad_range && (!sums || stored == got);
        if (sums && stored != got) bad_sums++;
        if (!ok) problems++;
        if (json) {
            printf("%s{\"partition\":%u,\"offset\":%llu,\"length\":%llu", p ? "," : "", p, (unsigned long long)a,
                   (unsigned long long)len);
            if (sums) printf(",\"stored\":%llu,\"computed\":%u", (unsigned long long)stored, got);
            printf(",\"ok\":%s}", ok ? "true" : "false");
        } else if (!summary || !ok) {
            if (sums) printf("%10u %14llu %12llu %10llu %10u %s\n", p, (unsigned long long)a, (unsigned long long)len,
                             (unsigned long long)stored, got, ok ? "ok" : bad_range ? "BAD RANGE" : "MISMATCH");
            else printf("%10u %14llu %12llu %10s %10s %s\n", p, (unsigned long long)a, (unsigned long long)len, "-", "-",
                        bad_range ? "BAD RANGE" : "");
        }
    }
    if (json) {
        printf("],\"num_partitions\":%u,\"data_bytes\":%zu,\"nonempty\":%llu,\"largest\":%llu,"
               "\"codec\":\"%s\",\"checksum\":\"%s\",\"checksum_mismatches\":%llu,\"ok\":%s}\n",
               n, dlen, (unsigned long long)nonempty, (unsigned long long)largest, kind,
               sums ? mts_checksum_name(algo) : "NONE", (unsigned long long)bad_sums, problems ? "false" : "true");
    } else {
        char a1[32], a2[32];
        printf("%s: %u partitions (%llu non-empty), %s of data (largest partition %s), streams %s\n", base, n,
               (unsigned long long)nonempty, cli_bytes(a1, sizeof a1, (double)dlen),
               cli_bytes(a2, sizeof a2, (double)largest), kind);
        if (sums) printf("checksums %s: %llu of %u wrong\n", mts_checksum_name(algo), (unsigned long long)bad_sums, n);
        else printf("checksums: no checksum file\n");
        printf("%s\n", problems ? "PROBLEMS FOUND" : "OK");
    }
done:
    free(idx);
    free(data);
    free(sums);
    return problems ? 1 : 0;
}

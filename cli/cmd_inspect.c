/* mtshuffle inspect FILE: the index, partition sizes and a checksum check of
 * one map output (FILE is its .data, .index or .checksum.ALGO file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mtshuffle.h"

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

    mts_output *out;
    char err[600];
    if (mts_output_open(file, MTS_OUTPUT_LENIENT, &out, err, sizeof err) < 0) {
        fprintf(stderr, "inspect: %s\n", err);
        return strstr(err, "not named") ? 2 : 1;
    }
    const mts_output_info *info = mts_output_get_info(out);
    uint32_t n = info->num_partitions;
    uint64_t dlen = info->data_bytes;
    const uint64_t *off = info->offsets;
    const uint64_t *sums = info->checksums;
    mts_checksum algo = info->checksum;
    /* The name without ".data": how the output is called in the report. */
    char base[4096];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(info->data_path) - 5), info->data_path);
    int problems = 0;
    if (off[0] != 0) { fprintf(stderr, "inspect: the index does not start at 0\n"); problems++; }
    if (off[n] != dlen) {
        fprintf(stderr, "inspect: the index ends at %llu but the data file has %llu bytes\n",
                (unsigned long long)off[n], (unsigned long long)dlen);
        problems++;
    }
    uint64_t nonempty = 0, largest = 0, bad_sums = 0;
    const char *kind = info->codec == MTS_CODEC_AUTO ? "empty"
                       : info->codec == MTS_CODEC_NONE ? "raw" : mts_codec_name(info->codec);
    if (!json && !summary) printf("%10s %14s %12s %10s %10s %s\n", "partition", "offset", "length", "stored", "computed", "");
    if (json) printf("{\"file\":\"%s\",\"partitions\":[", base);
    for (uint32_t p = 0; p < n; p++) {
        uint64_t a = off[p], len = 0;
        const void *bytes = NULL;
        int bad_range = mts_output_partition(out, p, &bytes, &len) < 0;
        if (bad_range) problems++;
        if (len) nonempty++;
        if (len > largest) largest = len;
        uint64_t stored = sums ? sums[p] : 0;
        uint32_t got = sums ? mts_checksum_update(algo, mts_checksum_initial(algo), bytes, len) : 0;
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
        printf("],\"num_partitions\":%u,\"data_bytes\":%llu,\"nonempty\":%llu,\"largest\":%llu,"
               "\"codec\":\"%s\",\"checksum\":\"%s\",\"checksum_mismatches\":%llu,\"ok\":%s}\n",
               n, (unsigned long long)dlen, (unsigned long long)nonempty, (unsigned long long)largest, kind,
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
    mts_output_close(out);
    return problems ? 1 : 0;
}

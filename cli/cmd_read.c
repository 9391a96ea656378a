/* mtshuffle read DIR --partition P: what a reducer of partition P (or of a
 * range, like Spark's batch fetch) gets from every map output in DIR.
 * mtshuffle verify DIR: every output, every partition on its own. */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mtshuffle.h"

static int parse_reader_opt(const char *cmd, int ch, const char *arg, mts_reader_options *ro)
{
    switch (ch) {
    case 'c':
        if (!strcmp(arg, "auto")) ro->codec = MTS_CODEC_AUTO;
        else if (cli_parse_codec(arg) >= 0) ro->codec = (mts_codec)cli_parse_codec(arg);
        else { fprintf(stderr, "%s: --codec: unknown codec '%s'\n", cmd, arg); return -1; }
        return 0;
    case 't': return cli_u32(cmd, "threads", arg, 1, MTS_MAX_THREADS, &ro->threads);
    case 'b': return cli_size(cmd, "budget-mib", arg, 1048576, MTS_MIN_BYTES_IN_FLIGHT, 1ull << 40, &ro->max_bytes_in_flight);
    case 'n': ro->verify_checksums = MTS_VERIFY_NEVER; return 0;
    case 'a': ro->verify_checksums = MTS_VERIFY_ALWAYS; return 0;
    }
    return -1;
}

int cmd_read(int argc, char **argv)
{
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    long start = -1, end = -1;
    uint32_t u;
    int shuffle = 0, raw = 0, records = 0, json = 0;
    static const struct option opts[] = {
        {"partition", 1, 0, 'p'}, {"end", 1, 0, 'e'}, {"shuffle", 1, 0, 's'}, {"codec", 1, 0, 'c'},
        {"threads", 1, 0, 't'}, {"budget-mib", 1, 0, 'b'}, {"no-verify", 0, 0, 'n'}, {"verify-always", 0, 0, 'a'},
        {"raw", 0, 0, 'r'},
        {"records", 0, 0, 'R'}, {"json", 0, 0, 'j'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (cli_u32("read", "partition", optarg, 0, MTS_MAX_PARTITIONS - 1, &u) < 0) return 2;
            start = u;
            break;
        case 'e':
            if (cli_u32("read", "end", optarg, 1, MTS_MAX_PARTITIONS, &u) < 0) return 2;
            end = u;
            break;
        case 's':
            if (cli_i32("read", "shuffle", optarg, 0, INT32_MAX, &shuffle) < 0) return 2;
            break;
        case 'r': raw = 1; break;
        case 'R': records = 1; break;
        case 'j': json = 1; break;
        case 'h':
            printf("usage: mtshuffle read DIR --partition P [options]\n"
                   "  --partition P     first reduce partition\n"
                   "  --end E           one past the last partition (P+1): a batch fetch of [P, E)\n"
                   "  --shuffle S       shuffle id (0)\n"
                   "  --codec C         auto, lz4, zstd or none (auto: from each segment's first bytes;\n"
                   "                    set none for uncompressed output, whose records may look like a magic)\n"
                   "  --threads T       decompression threads (2)\n"
                   "  --budget-mib M    max decoded bytes in flight (64)\n"
                   "  --no-verify       never read the checksum file (lz4's block checks still run)\n"
                   "  --verify-always   check every partition against the checksum file before decoding\n"
                   "                    it (default: only where the codec has no checks of its own, and\n"
                   "                    to diagnose a damaged lz4 block)\n"
                   "  --raw             write the decoded bytes to stdout instead of a summary\n"
                   "  --records         count records framed as Spark's UnsafeRowSerializer writes them\n"
                   "  --json            the summary as JSON\n");
            return 0;
        default:
            if (parse_reader_opt("read", ch, optarg, &ro) < 0) return 2;
        }
    }
    if (optind != argc - 1 || start < 0) {
        fprintf(stderr, "usage: mtshuffle read DIR --partition P [--end E] [options]\n");
        return 2;
    }
    if (end < 0) end = start + 1;
    const char *dir = argv[optind];
    char err[600];
    mts_reader *r;
    int rc = mts_reader_open_dir(&ro, dir, shuffle, &r, err, sizeof err);
    if (rc < 0) { fprintf(stderr, "read: %s\n", err); return 1; }
    if ((rc = mts_reader_start(r, (uint32_t)start, (uint32_t)end)) < 0) {
        fprintf(stderr, "read: %s\n", mts_reader_error(r));
        mts_reader_free(r);
        return 2;
    }
    uint32_t nmaps = mts_reader_num_maps(r);
    uint64_t *decoded = calloc(nmaps, sizeof *decoded), nrec = 0;
    /* UnsafeRowSerializer framing: int32 big-endian length, then the row. */
    unsigned char hdr[4];
    int hdr_have = 0;
    uint64_t skip = 0;
    int bad_framing = 0;
    uint32_t last_map = UINT32_MAX;
    double t0 = cli_now();
    mts_read_piece pc;
    while ((rc = mts_reader_next(r, &pc)) == 1) {
        decoded[pc.map] += pc.len;
        if (raw && fwrite(pc.data, 1, pc.len, stdout) != pc.len) { rc = -1; break; }
        if (!records) continue;
        if (pc.map != last_map) { /* each map's segment is its own record stream */
            if (hdr_have || skip) bad_framing = 1;
            hdr_have = 0;
            skip = 0;
            last_map = pc.map;
        }
        const unsigned char *p = pc.data;
        size_t left = pc.len;
        while (left) {
            if (skip) {
                size_t n = skip < left ? (size_t)skip : left;
                skip -= n;
                p += n;
                left -= n;
                continue;
            }
            hdr[hdr_have++] = *p++;
            left--;
            if (hdr_have == 4) {
                skip = (uint64_t)hdr[0] << 24 | (uint64_t)hdr[1] << 16 | (uint64_t)hdr[2] << 8 | hdr[3];
                hdr_have = 0;
                nrec++;
            }
        }
    }
    double secs = cli_now() - t0;
    if (hdr_have || skip) bad_framing = 1;
    if (rc < 0) {
        fprintf(stderr, "read: %s\n", mts_reader_error(r));
        mts_reader_free(r);
        free(decoded);
        return 1;
    }
    mts_reader_stats st;
    mts_reader_get_stats(r, &st);
    if (!raw) {
        if (json) {
            printf("{\"partition_start\":%ld,\"partition_end\":%ld,\"maps\":%u,\"bytes_stored\":%llu,"
                   "\"bytes_decoded\":%llu,\"seconds\":%.6f,\"decode_s\":%.6f,\"wait_s\":%.6f,"
                   "\"peak_bytes_held\":%llu%s",
                   start, end, nmaps, (unsigned long long)st.bytes_stored, (unsigned long long)st.bytes_decoded,
                   secs, st.decode_ns / 1e9, st.wait_ns / 1e9, (unsigned long long)st.peak_bytes_held,
                   records ? "" : "}\n");
            if (records) printf(",\"records\":%llu,\"framing_ok\":%s}\n", (unsigned long long)nrec, bad_framing ? "false" : "true");
        } else {
            char a[32], b[32];
            printf("partitions [%ld, %ld) of %u map outputs in %s\n", start, end, nmaps, dir);
            for (uint32_t m = 0; m < nmaps; m++)
                printf("  map %-6u %12llu stored %12llu decoded  %s\n", m,
                       (unsigned long long)mts_reader_segment_length(r, m, (uint32_t)start, (uint32_t)end),
                       (unsigned long long)decoded[m], mts_reader_map_path(r, m));
            printf("total %s stored, %s decoded in %.3f s", cli_bytes(a, sizeof a, (double)st.bytes_stored),
                   cli_bytes(b, sizeof b, (double)st.bytes_decoded), secs);
            if (records) printf(", %llu records%s", (unsigned long long)nrec, bad_framing ? " (framing broken)" : "");
            printf("\n");
        }
    }
    mts_reader_free(r);
    free(decoded);
    return records && bad_framing ? 1 : 0;
}

static int verify_one(const char *path, const mts_reader_options *ro, uint64_t *parts, uint64_t *problems)
{
    char err[600];
    mts_reader *r;
    const char *paths[1] = {path};
    if (mts_reader_open(ro, paths, 1, &r, err, sizeof err) < 0) {
        printf("FAIL %s\n", err);
        (*problems)++;
        return 0;
    }
    uint32_t n = mts_reader_num_partitions(r);
    uint64_t bad = 0;
    for (uint32_t p = 0; p < n; p++) {
        int rc = mts_reader_start(r, p, p + 1);
        mts_read_piece pc;
        while (rc == 0 && (rc = mts_reader_next(r, &pc)) == 1) rc = 0;
        if (rc < 0) {
            printf("FAIL %s\n", mts_reader_error(r));
            bad++;
        }
    }
    *parts += n;
    *problems += bad;
    if (!bad) printf("ok   %s (%u partitions)\n", path, n);
    mts_reader_free(r);
    return 1;
}

int cmd_verify(int argc, char **argv)
{
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.verify_checksums = MTS_VERIFY_ALWAYS;
    static const struct option opts[] = {{"codec", 1, 0, 'c'}, {"threads", 1, 0, 't'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'h') {
            printf("usage: mtshuffle verify DIR [--codec C] [--threads T]\n"
                   "  Checks every map output in DIR: index against data, every partition's checksum,\n"
                   "  and that every partition decodes on its own. Exits 1 on any problem.\n");
            return 0;
        }
        if (parse_reader_opt("verify", ch, optarg, &ro) < 0) return 2;
    }
    if (optind != argc - 1) { fprintf(stderr, "usage: mtshuffle verify DIR\n"); return 2; }
    const char *dir = argv[optind];
    DIR *d = opendir(dir);
    if (!d) { perror(dir); return 1; }
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "shuffle_", 8) || len < 6 || strcmp(e->d_name + len - 6, ".index")) continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n] = malloc(strlen(dir) + len + 8);
        sprintf(names[n], "%s/%.*s.data", dir, (int)(len - 6), e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, (int (*)(const void *, const void *))strcmp);
    uint64_t parts = 0, problems = 0;
    for (size_t i = 0; i < n; i++) {
        verify_one(names[i], &ro, &parts, &problems);
        free(names[i]);
    }
    free(names);
    printf("%zu outputs, %llu partitions, %llu problems\n", n, (unsigned long long)parts, (unsigned long long)problems);
    return problems || n == 0 ? 1 : 0;
}

/* The two ways the lz4 codec can compress one independent block, side by
 * side over the same rows (the CLI's store_sales-like workload, grouped by
 * partition), at several block sizes:
 *
 *   streaming  LZ4_resetStream_fast() then LZ4_compress_fast_continue():
 *              constant-time reset, 32-bit positions in the hash table
 *   extState   LZ4_compress_fast_extState(): clears the 16 KiB state, and
 *              hashes 16-bit positions for blocks under 64 KiB (what
 *              lz4-java's compressor calls)
 *
 *     build/mts_lz4_calls_bench [--mib M] [--reps R]
 *
 * Each repetition compresses M MiB (default 8) as blocks of each size, the
 * two calls in rotating order; prints the median ns per input byte of each
 * and the compressed bytes, per block size. src/codec_lz4.c picks the call
 * by block size from these figures (BENCHMARKS.md). */
#define _POSIX_C_SOURCE 200809L
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_timing.h"
#include "workload.h"

/* Compresses src[0, n) as blocks of bs bytes; returns the compressed bytes
 * (a block that does not shrink counts as stored). */
static size_t run(int extstate, LZ4_stream_t *st, const char *src, size_t n, int bs, char *dst)
{
    size_t out = 0;
    for (size_t o = 0; o + (size_t)bs <= n; o += (size_t)bs) {
        int c;
        if (extstate) {
            c = LZ4_compress_fast_extState(st, src + o, dst, bs, bs - 1, 1);
        } else {
            LZ4_resetStream_fast(st);
            c = LZ4_compress_fast_continue(st, src + o, dst, bs, bs - 1, 1);
        }
        out += c > 0 ? (size_t)c : (size_t)bs;
    }
    return out;
}

int main(int argc, char **argv)
{
    unsigned mib = 8, reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = (unsigned)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: mts_lz4_calls_bench [--mib M] [--reps R]\n");
            return 2;
        }
    }
    if (mib == 0 || reps == 0 || reps > 1000) {
        fprintf(stderr, "mts_lz4_calls_bench: --mib and --reps must be positive (reps at most 1000)\n");
        return 2;
    }
    wl_params p = {200, 0.0, 42};
    wl_batch b;
    if (wl_make_batch(&p, 0, 0, ((uint64_t)mib << 20) / WL_ROW_BYTES, 0, &b) < 0) {
        fprintf(stderr, "mts_lz4_calls_bench: cannot generate %u MiB of rows\n", mib);
        return 1;
    }
    static const int sizes[] = {256, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    char *dst = malloc((size_t)LZ4_compressBound(65536));
    LZ4_stream_t *st = malloc(sizeof *st);
    double *t[2] = {malloc(reps * sizeof(double)), malloc(reps * sizeof(double))};
    if (!dst || !st || !t[0] || !t[1] || !LZ4_initStream(st, sizeof *st)) {
        fprintf(stderr, "mts_lz4_calls_bench: out of memory\n");
        return 1;
    }
    printf("%8s %16s %16s %9s %14s %14s\n", "block", "streaming ns/B", "extState ns/B", "ratio", "streaming out",
           "extState out");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int bs = sizes[s];
        size_t used = b.bytes / (size_t)bs * (size_t)bs, out[2] = {0, 0};
        for (unsigned r = 0; r < reps; r++)
            for (int k = 0; k < 2; k++) {
                int m = (int)((r + (unsigned)k) % 2); /* rotating order */
                double t0 = bench_now();
                out[m] = run(m, st, (const char *)b.grouped, used, bs, dst);
                t[m][r] = (bench_now() - t0) / (double)used * 1e9;
            }
        double a = bench_median(t[0], reps), e = bench_median(t[1], reps);
        printf("%8d %16.3f %16.3f %9.3f %14zu %14zu\n", bs, a, e, e / a, out[0], out[1]);
    }
    wl_free_batch(&b);
    free(dst);
    free(st);
    free(t[0]);
    free(t[1]);
    return 0;
}

/* The checksum implementations side by side: zlib's adler32 and crc32 and
 * our own CRC-32C against ISA-L's isal_adler32, crc32_gzip_refl and
 * crc32_iscsi (when built with ISA-L), and lz4-java's block check (XXH32 of
 * each 32 KiB block) one block at a time through the xxhash library against
 * eight at once (xxh32_many), over the same bytes, interleaved.
 *
 *     build/mts_checksum_bench [--mib M] [--chunk BYTES] [--reps R]
 *
 * Each repetition runs every (algorithm, implementation) once, in rotating
 * order, over M MiB in pieces of BYTES (a writer checksums each compressed
 * chunk, 5-40 KiB at the default sizes; a reader each stored partition; the
 * block checks always take 32 KiB blocks, lz4-java's default).
 * Prints the median GB/s of each and which one the library uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_timing.h"
#include "checksum.h"
#include "xxh32.h"

#define LZ4_BLOCK (32u << 10)

/* XXH32 of every 32 KiB block of buf[0, n), eight blocks to a call. */
static uint32_t block_checks(const unsigned char *buf, size_t n)
{
    uint32_t x = 0;
    for (size_t o = 0; o < n;) {
        const unsigned char *b[XXH32_MANY];
        size_t len[XXH32_MANY];
        uint32_t out[XXH32_MANY];
        unsigned k = 0;
        for (; k < XXH32_MANY && o < n; k++) {
            b[k] = buf + o;
            len[k] = n - o < LZ4_BLOCK ? n - o : LZ4_BLOCK;
            o += len[k];
        }
        xxh32_many(b, len, k, 0x9747B28Cu, out);
        for (unsigned j = 0; j < k; j++) x ^= out[j];
    }
    return x;
}

int main(int argc, char **argv)
{
    size_t mib = 256, chunk = 32 << 10;
    int reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--chunk")) chunk = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--mib M] [--chunk BYTES] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1 || chunk < 1 || reps < 1 || reps > 99) {
        fprintf(stderr, "checksum_bench: --mib, --chunk and --reps must be positive (reps <= 99)\n");
        return 2;
    }
    size_t n = mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) return 1;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13); /* faulted in, not constant */
    const mts_checksum algos[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    const char *impls[] = {"portable", "isa-l"};
    int nimpl = checksum_have_isal() ? 2 : 1, nsum = 3 * nimpl, ncase = nsum + 2;
    double sec[8][99];
    volatile uint32_t sink = 0;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < ncase; k++) {
            int c = (k + r) % ncase, a = c / nimpl, impl = c % nimpl;
            double t0 = bench_now();
            uint32_t sum = 0;
            if (c >= nsum) { /* the block checks: one at a time, then eight at once */
                mts__xxh32_allow_simd(c == nsum + 1);
                sum = block_checks(buf, n);
                mts__xxh32_allow_simd(1);
            } else {
                for (size_t o = 0; o < n; o += chunk)
                    sum ^= checksum_update_with(algos[a], impl, checksum_init(algos[a]), buf + o,
                                                n - o < chunk ? n - o : chunk);
            }
            sec[c][r] = bench_now() - t0;
            sink ^= sum;
        }
    printf("checksums over %zu MiB in %zu-byte pieces, median of %d interleaved repetitions\n", mib, chunk, reps);
    for (int c = 0; c < ncase; c++) {
        int a = c / nimpl, impl = c % nimpl;
        double med = bench_median(sec[c], (size_t)reps);
        if (c >= nsum)
            printf("  %-8s %-9s %6.2f GB/s%s\n", "XXH32", c == nsum ? "one" : "eight", n / med / 1e9,
                   (c == nsum + 1) == xxh32_simd() ? "  (used)" : "");
        else
            printf("  %-8s %-9s %6.2f GB/s%s\n", mts_checksum_name(algos[a]), impls[impl], n / med / 1e9,
                   checksum_impl(algos[a]) == impl ? "  (used)" : "");
    }
    free(buf);
    return sink == 0x12345678u; /* keeps the sums alive */
}

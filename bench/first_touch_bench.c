/* What this machine charges for memory touched for the first time, region by
 * region. On a virtual machine whose host takes back the guest's free memory
 * (virtio-balloon free page reporting), a page the guest kernel hands out
 * may have to be backed by the host again before the write to it completes,
 * which costs far more than the kernel's own zeroing of the page. The page
 * cache pages a writer fills come from the same free memory, so a
 * benchmark's figures can depend on how much memory the process holds
 * besides (BENCHMARKS.md, "What a first write to memory costs on this machine").
 *
 *   build/mts_first_touch_bench [--gib G] [--region-mib R]
 *
 * Maps G GiB (default 4) of anonymous memory without huge pages, writes each
 * R MiB region (default 4) once and then a second time, and prints how many
 * regions took their first write at under 1 GB/s, the median rate of the
 * first writes below and above that, and the second writes' median. Where
 * the kernel reports free pages to the host, its counter is printed too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_timing.h"

#define SLOW_GBPS 1.0

static long long reported_kib(void)
{
    FILE *f = fopen("/sys/module/page_reporting/parameters/reported_kib", "r");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    unsigned gib = 4, region_mib = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gib")) gib = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--region-mib")) region_mib = (unsigned)atoi(argv[i + 1]);
        else break;
    }
    if (argc % 2 == 0 || gib == 0 || gib > 64 || region_mib == 0 || region_mib > 1024 ||
        ((size_t)gib << 10) % region_mib) {
        fprintf(stderr, "usage: mts_first_touch_bench [--gib 1..64] [--region-mib R dividing G GiB]\n");
        return 2;
    }
    size_t len = (size_t)gib << 30, region = (size_t)region_mib << 20, n = len / region;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double *first = malloc(n * sizeof *first), *again = malloc(n * sizeof *again);
    double *slow = malloc(n * sizeof *slow), *fast = malloc(n * sizeof *fast);
    if (m == MAP_FAILED || !first || !again || !slow || !fast) {
        fprintf(stderr, "mts_first_touch_bench: cannot map %u GiB\n", gib);
        return 1;
    }
    madvise(m, len, MADV_NOHUGEPAGE); /* 4 KiB pages, as the page cache's */
    long long rep0 = reported_kib();
    for (size_t i = 0; i < n; i++) {
        double t0 = bench_now();
        memset(m + i * region, 1, region);
        first[i] = (double)region / (bench_now() - t0) / 1e9;
    }
    for (size_t i = 0; i < n; i++) {
        double t0 = bench_now();
        memset(m + i * region, 2, region);
        again[i] = (double)region / (bench_now() - t0) / 1e9;
    }
    long long rep1 = reported_kib();
    size_t ns = 0, nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (first[i] < SLOW_GBPS) slow[ns++] = first[i];
        else fast[nf++] = first[i];
    }
    printf("%u GiB in %zu regions of %u MiB, 4 KiB pages\n", gib, n, region_mib);
    printf("first write under %.1f GB/s: %zu regions, median %.2f GB/s\n", SLOW_GBPS, ns,
           ns ? bench_median(slow, ns) : 0.0);
    printf("first write at or over %.1f GB/s: %zu regions, median %.2f GB/s\n", SLOW_GBPS, nf,
           nf ? bench_median(fast, nf) : 0.0);
    printf("second write: median %.2f GB/s\n", bench_median(again, n));
    if (rep0 >= 0) printf("free page reporting: %lld KiB reported to the host during the run\n", rep1 - rep0);
    else printf("free page reporting: no counter (/sys/module/page_reporting absent)\n");
    munmap(m, len);
    free(first);
    free(again);
    free(slow);
    free(fast);
    return 0;
}

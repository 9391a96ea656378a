/* What the commit's assembly of held output costs on this machine: many
 * small buffers written with writev into a fresh file, as runs.c's
 * batch_flush does, with the buffers in cache or evicted from it, and with
 * the file's pages allocated ahead (fallocate); and whether two threads could
 * share the copy through a mapping of the file (BENCHMARKS.md, "The caller
 * counted as a CPU ...").
 *
 *   build/mts_assembly_write_bench DIR [--buffers N] [--size BYTES] [--reps R] [--spread K]
 *
 * DIR: where the scratch file goes (tmpfs or a disk file system). N buffers
 * (default 1000) of BYTES each (default 5200: a partition's chunk of one
 * batch in the bench's 4.8-batch task), written R times (default 9); prints
 * each way's median rate. The evicted case writes 512 MiB elsewhere first.
 * --spread K allocates K times as many buffers and writes every K-th, so
 * that consecutive buffers lie apart in the heap, as the chunks of one
 * partition do (each from another job). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench_timing.h"

#define EVICT_BYTES (512u << 20)
#define IOV_BATCH 1024 /* IOV_MAX on Linux */

static char path[4096];

static int fresh_file(void)
{
    unlink(path);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    return fd;
}

static void write_all(int fd, struct iovec *v, size_t n)
{
    for (size_t i = 0; i < n; i += IOV_BATCH) {
        size_t k = n - i < IOV_BATCH ? n - i : IOV_BATCH, want = 0;
        for (size_t j = 0; j < k; j++) want += v[i + j].iov_len;
        if (writev(fd, v + i, (int)k) != (ssize_t)want) {
            perror("writev (a short write is not retried here)");
            exit(1);
        }
    }
}

typedef struct {
    unsigned char *dst;
    const unsigned char *src;
    size_t len;
} half;

static void *copy_half(void *arg)
{
    half *h = arg;
    memcpy(h->dst, h->src, h->len);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: mts_assembly_write_bench DIR [--buffers N] [--size BYTES] [--reps R] [--spread K]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') return usage();
    size_t n = 1000, size = 5200, spread = 1;
    int reps = 9;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--buffers")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--spread")) spread = (size_t)atol(argv[i + 1]);
        else n = 0;
    }
    if (argc % 2 != 0 || n == 0 || n > 1000000 || size == 0 || size > (64u << 20) || reps < 1 || reps > 1000 ||
        spread == 0 || spread > 64)
        return usage();
    snprintf(path, sizeof path, "%s/mts_assembly_write_bench.%d", argv[1], (int)getpid());
    size_t total = n * size;
    struct iovec *v = malloc(n * sizeof *v);
    unsigned char *whole = malloc(total), *evict = malloc(EVICT_BYTES);
    double *t[5];
    for (int k = 0; k < 5; k++) t[k] = malloc((size_t)reps * sizeof(double));
    if (!v || !whole || !evict || !t[0] || !t[1] || !t[2] || !t[3] || !t[4]) {
        fprintf(stderr, "mts_assembly_write_bench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n * spread; i++) { /* the others stay allocated, between */
        void *b = malloc(size);
        if (!b) {
            fprintf(stderr, "mts_assembly_write_bench: out of memory\n");
            return 1;
        }
        memset(b, 1, size);
        if (i % spread == 0) v[i / spread] = (struct iovec){b, size};
    }
    memset(whole, 3, total);
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 3; k++) { /* 0 hot, 1 evicted, 2 hot into allocated pages */
            for (size_t i = 0; i < n; i++) memset(v[i].iov_base, (int)(r + i), size);
            if (k == 1) memset(evict, r, EVICT_BYTES);
            int fd = fresh_file();
            if (k == 2 && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)total) != 0) perror("fallocate");
            double t0 = bench_now();
            write_all(fd, v, n);
            t[k][r] = bench_now() - t0;
            close(fd);
        }
        /* One contiguous buffer: pwrite by one thread, or a shared mapping
         * filled by two, each a half. */
        int fd = fresh_file();
        double t0 = bench_now();
        for (size_t off = 0; off < total;) {
            ssize_t w = pwrite(fd, whole + off, total - off, (off_t)off);
            if (w <= 0) {
                perror("pwrite");
                return 1;
            }
            off += (size_t)w;
        }
        t[3][r] = bench_now() - t0;
        close(fd);
        fd = fresh_file();
        t0 = bench_now();
        if (ftruncate(fd, (off_t)total) != 0) {
            perror("ftruncate");
            return 1;
        }
        unsigned char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        half h[2] = {{m, whole, total / 2}, {m + total / 2, whole + total / 2, total - total / 2}};
        pthread_t other;
        if (pthread_create(&other, NULL, copy_half, &h[1]) != 0) {
            fprintf(stderr, "mts_assembly_write_bench: cannot start a thread\n");
            return 1;
        }
        copy_half(&h[0]);
        pthread_join(other, NULL);
        munmap(m, total);
        t[4][r] = bench_now() - t0;
        close(fd);
    }
    unlink(path);
    static const char *what[5] = {
        "writev, buffers in cache",
        "writev, buffers evicted (512 MiB written before)",
        "writev, buffers in cache, the file's pages allocated ahead",
        "one buffer, pwrite by one thread",
        "one buffer, two threads into a shared mapping",
    };
    printf("%zu buffers of %zu bytes (%.1f MB; spread %zu) into a fresh file in %s, medians of %d\n", n, size,
           total / 1e6, spread, argv[1], reps);
    for (int k = 0; k < 5; k++) {
        double s = bench_median(t[k], (size_t)reps);
        printf("  %-60s %7.3f ms  %5.2f GB/s\n", what[k], s * 1e3, total / s / 1e9);
    }
    return 0;
}

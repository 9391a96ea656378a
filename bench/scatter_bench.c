/* What the intake of unsorted records costs at least: the copy of every
 * tagged record into its partition's page, as mts_writer_append_tagged and
 * src/intake.c do it (an arena of 32 KiB pages, each partition appending to
 * its own page, the buffer read 2 KiB ahead, the line after each record's
 * end asked for), with nothing else running, beside a thread that
 * compresses with lz4 on the other CPU as a worker does, without reading
 * ahead at all, and with the source read ahead only (the intake before it
 * asked for its destination), against a plain sequential copy of the same
 * bytes. Rows are the CLI's store_sales-like workload in generation order.
 *
 *     build/mts_scatter_bench [--mib M] [--reps R] [--partitions N]
 *
 * Each repetition copies M MiB (default 64) of tagged records in 8 MiB
 * buffers, every way in rotating order; prints the median ns per record
 * and the ratio of each way to the scatter alone. The neighbour
 * compresses other rows in 32 KiB blocks for as long as the measured copy
 * runs. BENCHMARKS.md compares these with the intake's share of a run. */
#define _POSIX_C_SOURCE 200809L
#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "cli.h"
#include "workload.h"

#define PAGE (32u << 10)
#define ARENA (8u << 20)
#define NPAGES (ARENA / PAGE)
#define BUFFER (8u << 20) /* the JNI binding's tagged buffers */
#define NO_PAGE UINT32_MAX
#define AHEAD 2048u /* as READ_AHEAD in src/writer.c */

typedef struct scatter {
    unsigned char *arena[2];
    int cur;
    uint32_t used, nparts;
    uint32_t *last, *fill; /* per partition: its page, bytes in it */
} scatter;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void arena_next(scatter *s)
{
    s->cur ^= 1;
    s->used = 0;
    for (uint32_t p = 0; p < s->nparts; p++) s->last[p] = NO_PAGE;
}

/* Every record of buf[0, len) to the end of its partition's page; with
 * ahead, asking for the bytes that many ahead first; with tail, asking for
 * the line after the record's end, where the partition's next record goes. */
static void scatter_buffer(scatter *s, const unsigned char *buf, size_t len, size_t ahead, int tail)
{
    for (size_t o = 0; o < len;) {
        if (ahead && len - o > ahead) __builtin_prefetch(buf + o + ahead, 0, 3);
        uint32_t p = be32(buf + o), n = be32(buf + o + 4);
        if (s->last[p] == NO_PAGE || s->fill[p] + n > PAGE) {
            if (s->used == NPAGES) arena_next(s);
            s->last[p] = s->used++;
            s->fill[p] = 0;
        }
        unsigned char *dst = s->arena[s->cur] + (size_t)s->last[p] * PAGE + s->fill[p];
        memcpy(dst, buf + o + 8, n);
        if (tail) __builtin_prefetch(dst + n + 64, 1, 3);
        s->fill[p] += n;
        o += 8 + n;
    }
}

typedef struct neighbour {
    const unsigned char *src;
    size_t len;
    int stop; /* set by main, atomically */
} neighbour;

static void *compress_loop(void *arg)
{
    neighbour *nb = arg;
    LZ4_stream_t *st = malloc(sizeof *st);
    char *dst = malloc((size_t)LZ4_compressBound((int)PAGE));
    if (!st || !dst || !LZ4_initStream(st, sizeof *st)) {
        free(st);
        free(dst);
        return NULL;
    }
    while (!__atomic_load_n(&nb->stop, __ATOMIC_RELAXED))
        for (size_t o = 0; o + PAGE <= nb->len; o += PAGE)
            LZ4_compress_fast_extState(st, (const char *)nb->src + o, dst, (int)PAGE, LZ4_compressBound((int)PAGE), 1);
    free(st);
    free(dst);
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned mib = 64, reps = 9, parts = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--partitions")) parts = (unsigned)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: mts_scatter_bench [--mib M] [--reps R] [--partitions N]\n");
            return 2;
        }
    }
    if (argc % 2 == 0 || mib == 0 || mib > 4096 || reps == 0 || reps > 1000 || parts == 0 ||
        (uint64_t)parts * PAGE > ARENA) {
        fprintf(stderr, "mts_scatter_bench: --mib 1..4096, --reps 1..1000, --partitions 1..%u\n", NPAGES);
        return 2;
    }
    wl_params wp = {parts, 0.0, 42};
    wl_batch b, other;
    uint64_t rows = ((uint64_t)mib << 20) / WL_ROW_BYTES;
    if (wl_make_batch(&wp, 0, 0, rows, 1, &b) < 0 || wl_make_batch(&wp, 1, 0, rows, 0, &other) < 0) {
        fprintf(stderr, "mts_scatter_bench: cannot generate %u MiB of rows\n", mib);
        return 1;
    }
    size_t rec = 8 + WL_ROW_BYTES, len = rows * rec;
    unsigned char *tagged = bench_tagged(&b), *seq = malloc(len); /* the bench's own tagged buffer */
    scatter s = {{malloc(ARENA), malloc(ARENA)}, 0, 0, parts, malloc(parts * sizeof(uint32_t)),
                 malloc(parts * sizeof(uint32_t))};
    enum { WAYS = 5 };
    double *t[WAYS];
    int short_of_memory = !tagged || !seq || !s.arena[0] || !s.arena[1] || !s.last || !s.fill;
    for (int m = 0; m < WAYS; m++) short_of_memory |= !(t[m] = malloc(reps * sizeof(double)));
    if (short_of_memory) {
        fprintf(stderr, "mts_scatter_bench: out of memory\n");
        return 1;
    }
    memset(s.arena[0], 0, ARENA);
    memset(s.arena[1], 0, ARENA);
    memset(seq, 0, len);
    size_t per = BUFFER / rec * rec;
    static const char *names[WAYS] = {"sequential copy", "scatter alone", "scatter beside lz4",
                                      "scatter, no read-ahead", "scatter, source only"};
    for (unsigned r = 0; r < reps; r++)
        for (int k = 0; k < WAYS; k++) {
            int m = (int)((r + (unsigned)k) % WAYS); /* rotating order */
            neighbour nb = {other.grouped, other.bytes, 0};
            pthread_t th;
            if (m == 2 && pthread_create(&th, NULL, compress_loop, &nb) != 0) {
                fprintf(stderr, "mts_scatter_bench: cannot start the neighbour thread\n");
                return 1;
            }
            arena_next(&s);
            double t0 = bench_now();
            if (m == 0) memcpy(seq, tagged, len);
            else
                for (size_t o = 0; o < len; o += per)
                    scatter_buffer(&s, tagged + o, len - o < per ? len - o : per, m == 3 ? 0 : AHEAD, m != 3 && m != 4);
            t[m][r] = (bench_now() - t0) / (double)rows * 1e9;
            if (m == 2) {
                __atomic_store_n(&nb.stop, 1, __ATOMIC_RELAXED);
                pthread_join(th, NULL);
            }
        }
    double med[WAYS];
    for (int m = 0; m < WAYS; m++) med[m] = bench_median(t[m], reps);
    double alone = med[1];
    printf("%u MiB, %llu records of %zu bytes, %u partitions, %u repetitions\n", mib, (unsigned long long)rows, rec,
           parts, reps);
    for (int m = 0; m < WAYS; m++) printf("%-24s %8.2f ns/record %8.3f of the scatter alone\n", names[m], med[m], med[m] / alone);
    wl_free_batch(&b);
    wl_free_batch(&other);
    free(tagged);
    free(seq);
    free(s.arena[0]);
    free(s.arena[1]);
    free(s.last);
    free(s.fill);
    for (int m = 0; m < WAYS; m++) free(t[m]);
    return 0;
}

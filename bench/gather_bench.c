/* Where the copy of unsorted records into partition order should run: in
 * the caller, scattered into pages that a worker then compresses (what
 * src/intake.c does), or in the worker, gathered from the caller's buffer
 * through an index the caller makes, straight into the block it compresses
 * (the caller's buffer then stays borrowed until its jobs are through).
 * One thread does all of each way, so the rows compare the CPU each costs:
 *
 *   sorted rows          lz4 over the rows already in partition order (the floor)
 *   scatter, then lz4    each tagged record appended to its partition's 32 KiB
 *                        page (read 2 KiB ahead, as the intake does), each full
 *                        8 MiB arena compressed page by page, chain by chain
 *   index, then gather   each 8 MiB buffer's records linked per partition, then
 *                        each partition's records gathered into a 32 KiB block
 *                        that is compressed as soon as it is full
 *
 *     build/mts_gather_bench [--mib M] [--reps R] [--partitions N]
 *
 * Every way compresses 32 KiB lz4 blocks (lz4-java's block size in Spark),
 * M MiB of the CLI's store_sales-like rows (default 128: more than most
 * last-level caches, so that the input comes from memory as a task's does);
 * the ways run in rotating order; prints the median seconds, ns a record
 * and each way's ratio to the sorted rows. BENCHMARKS.md quotes it. */
#define _POSIX_C_SOURCE 200809L
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "cli.h"
#include "workload.h"

#define BLOCK (32u << 10)
#define ARENA (8u << 20)
#define NPAGES (ARENA / BLOCK)
#define BUFFER (8u << 20) /* the JNI binding's tagged buffers */
#define NONE UINT32_MAX
#define AHEAD 2048u

typedef struct lz4_out {
    LZ4_stream_t *state;
    char *dst;
    uint64_t bytes; /* compressed, over every block */
} lz4_out;

static void block(lz4_out *z, const unsigned char *src, size_t n)
{
    if (n)
        z->bytes += (uint64_t)LZ4_compress_fast_extState(z->state, (const char *)src, z->dst, (int)n,
                                                         LZ4_compressBound((int)BLOCK), 1);
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

typedef struct ways {
    uint32_t parts;
    /* scatter: the arena, its page chains, per partition its first and last page and fill */
    unsigned char *arena;
    uint32_t *next_page, *first, *last, *fill, used;
    /* gather: per record of a buffer its offset and the next record of its partition */
    uint32_t *rec_off, *rec_next, *head, *tail;
    unsigned char *blk;
} ways;

static void arena_compress(ways *s, lz4_out *z)
{
    for (uint32_t p = 0; p < s->parts; p++) {
        if (s->last[p] == NONE) continue;
        for (uint32_t pg = s->first[p];; pg = s->next_page[pg]) {
            block(z, s->arena + (size_t)pg * BLOCK, pg == s->last[p] ? s->fill[p] : BLOCK);
            if (pg == s->last[p]) break;
        }
        s->last[p] = NONE;
    }
    s->used = 0;
}

static void scatter(ways *s, lz4_out *z, const unsigned char *buf, size_t len)
{
    for (size_t o = 0; o < len;) {
        if (len - o > AHEAD) __builtin_prefetch(buf + o + AHEAD, 0, 3);
        uint32_t p = be32(buf + o), n = be32(buf + o + 4);
        if (s->last[p] == NONE || s->fill[p] + n > BLOCK) {
            if (s->used == NPAGES) arena_compress(s, z);
            uint32_t pg = s->used++;
            if (s->last[p] == NONE) s->first[p] = pg;
            else s->next_page[s->last[p]] = pg;
            s->last[p] = pg;
            s->fill[p] = 0;
        }
        memcpy(s->arena + (size_t)s->last[p] * BLOCK + s->fill[p], buf + o + 8, n);
        s->fill[p] += n;
        o += 8 + n;
    }
}

static void gather(ways *s, lz4_out *z, const unsigned char *buf, size_t len)
{
    uint32_t nrec = 0;
    for (uint32_t p = 0; p < s->parts; p++) s->head[p] = NONE;
    for (size_t o = 0; o < len; nrec++) {
        if (len - o > AHEAD) __builtin_prefetch(buf + o + AHEAD, 0, 3);
        uint32_t p = be32(buf + o);
        s->rec_off[nrec] = (uint32_t)o;
        s->rec_next[nrec] = NONE;
        if (s->head[p] == NONE) s->head[p] = nrec;
        else s->rec_next[s->tail[p]] = nrec;
        s->tail[p] = nrec;
        o += 8 + be32(buf + o + 4);
    }
    for (uint32_t p = 0; p < s->parts; p++) {
        size_t fill = 0;
        for (uint32_t k = s->head[p]; k != NONE; k = s->rec_next[k]) {
            const unsigned char *r = buf + s->rec_off[k];
            size_t n = be32(r + 4);
            for (r += 8; n;) {
                size_t t = BLOCK - fill < n ? BLOCK - fill : n;
                memcpy(s->blk + fill, r, t);
                fill += t;
                r += t;
                n -= t;
                if (fill == BLOCK) {
                    block(z, s->blk, fill);
                    fill = 0;
                }
            }
        }
        block(z, s->blk, fill);
    }
}

int main(int argc, char **argv)
{
    unsigned mib = 128, reps = 9, parts = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--partitions")) parts = (unsigned)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: mts_gather_bench [--mib M] [--reps R] [--partitions N]\n");
            return 2;
        }
    }
    if (argc % 2 == 0 || mib == 0 || mib > 4096 || reps == 0 || reps > 1000 || parts == 0 || parts > NPAGES) {
        fprintf(stderr, "mts_gather_bench: --mib 1..4096, --reps 1..1000, --partitions 1..%u\n", NPAGES);
        return 2;
    }
    wl_params wp = {parts, 0.0, 42};
    wl_batch b;
    uint64_t rows = ((uint64_t)mib << 20) / WL_ROW_BYTES;
    if (wl_make_batch(&wp, 0, 0, rows, 1, &b) < 0) {
        fprintf(stderr, "mts_gather_bench: cannot generate %u MiB of rows\n", mib);
        return 1;
    }
    size_t rec = 8 + WL_ROW_BYTES, len = rows * rec, per = BUFFER / rec * rec, max_recs = BUFFER / rec + 1;
    unsigned char *tagged = bench_tagged(&b);
    ways s = {parts, malloc(ARENA), malloc(NPAGES * sizeof(uint32_t)), malloc(parts * sizeof(uint32_t)),
              malloc(parts * sizeof(uint32_t)), malloc(parts * sizeof(uint32_t)), 0,
              malloc(max_recs * sizeof(uint32_t)), malloc(max_recs * sizeof(uint32_t)),
              malloc(parts * sizeof(uint32_t)), malloc(parts * sizeof(uint32_t)), malloc(BLOCK)};
    lz4_out z = {malloc(sizeof(LZ4_stream_t)), malloc((size_t)LZ4_compressBound((int)BLOCK)), 0};
    enum { WAYS = 3 };
    double *t[WAYS];
    uint64_t out[WAYS];
    int short_of_memory = !tagged || !s.arena || !s.next_page || !s.first || !s.last || !s.fill || !s.rec_off ||
                          !s.rec_next || !s.head || !s.tail || !s.blk || !z.state || !z.dst;
    for (int m = 0; m < WAYS; m++) short_of_memory |= !(t[m] = malloc(reps * sizeof(double)));
    if (short_of_memory || !LZ4_initStream(z.state, sizeof(LZ4_stream_t))) {
        fprintf(stderr, "mts_gather_bench: out of memory\n");
        return 1;
    }
    memset(s.arena, 0, ARENA); /* faulted in before the clock, as the engine's kept arenas are */
    memset(s.rec_off, 0, max_recs * sizeof(uint32_t));
    memset(s.rec_next, 0, max_recs * sizeof(uint32_t));
    for (uint32_t p = 0; p < parts; p++) s.last[p] = NONE;
    static const char *names[WAYS] = {"sorted rows", "scatter, then lz4", "index, then gather"};
    for (unsigned r = 0; r < reps; r++)
        for (int k = 0; k < WAYS; k++) {
            int m = (int)((r + (unsigned)k) % WAYS); /* rotating order */
            z.bytes = 0;
            double t0 = bench_now();
            if (m == 0) {
                for (size_t o = 0; o < b.bytes; o += BLOCK) block(&z, b.grouped + o, min_sz(BLOCK, b.bytes - o));
            } else if (m == 1) {
                for (size_t o = 0; o < len; o += per) scatter(&s, &z, tagged + o, min_sz(per, len - o));
                arena_compress(&s, &z);
            } else {
                for (size_t o = 0; o < len; o += per) gather(&s, &z, tagged + o, min_sz(per, len - o));
            }
            t[m][r] = bench_now() - t0;
            out[m] = z.bytes;
        }
    printf("%u MiB, %llu records of %zu bytes, %u partitions, %u repetitions, lz4 blocks of %u KiB\n", mib,
           (unsigned long long)rows, rec, parts, reps, BLOCK >> 10);
    double floor = bench_median(t[0], reps);
    for (int m = 0; m < WAYS; m++) {
        double med = bench_median(t[m], reps);
        printf("%-20s %8.4f s %8.2f ns/record %7.3f of the sorted rows  (%llu bytes out)\n", names[m], med,
               med / (double)rows * 1e9, med / floor, (unsigned long long)out[m]);
    }
    wl_free_batch(&b);
    free(tagged);
    free(s.arena);
    free(s.next_page);
    free(s.first);
    free(s.last);
    free(s.fill);
    free(s.rec_off);
    free(s.rec_next);
    free(s.head);
    free(s.tail);
    free(s.blk);
    free(z.state);
    free(z.dst);
    for (int m = 0; m < WAYS; m++) free(t[m]);
    return 0;
}

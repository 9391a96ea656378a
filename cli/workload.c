#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

/* TPC-DS surrogate key ranges (store_sales at scale factor 100). */
#define DATE_LO 2450816
#define DATE_HI 2452642
#define TIME_LO 28800
#define TIME_HI 75599
#define ITEMS 204000
#define CUSTOMERS 2000000
#define CDEMOS 1920800
#define HDEMOS 7200
#define ADDRS 1000000
#define NULL_PER_MILLE 45 /* nullable foreign keys are ~4.5% NULL in dsdgen output */
#define NCOLS 7

static uint64_t next_u64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int32_t uniform(uint64_t *s, int32_t lo, int32_t hi)
{
    return lo + (int32_t)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Spark's Murmur3_x86_32.hashInt. */
int32_t wl_murmur3_int(int32_t value, int32_t seed)
{
    uint32_t k1 = (uint32_t)value * 0xcc9e2d51u;
    k1 = rotl32(k1, 15) * 0x1b873593u;
    uint32_t h1 = (uint32_t)seed ^ k1;
    h1 = rotl32(h1, 13) * 5u + 0xe6546b64u;
    h1 ^= 4u;
    h1 ^= h1 >> 16;
    h1 *= 0x85ebca6bu;
    h1 ^= h1 >> 13;
    h1 *= 0xc2b2ae35u;
    h1 ^= h1 >> 16;
    return (int32_t)h1;
}

static void put_row(unsigned char *r, const int32_t v[NCOLS], uint64_t nulls)
{
    r[0] = 0; r[1] = 0; r[2] = 0; r[3] = 64; /* int32 BE row size */
    memcpy(r + 4, &nulls, 8);                 /* UnsafeRow fields are host (little) endian */
    for (int c = 0; c < NCOLS; c++) {
        int64_t slot = (nulls >> c) & 1 ? 0 : (int64_t)v[c];
        memcpy(r + 12 + 8 * c, &slot, 8);
    }
}

int wl_make_batch(const wl_params *p, uint64_t task, uint32_t index, uint64_t rows,
                  int want_unsorted, wl_batch *out)
{
    memset(out, 0, sizeof *out);
    uint64_t bytes = rows * WL_ROW_BYTES;
    unsigned char *gen = malloc(bytes ? bytes : 1);
    uint32_t *part = malloc((rows ? rows : 1) * sizeof(uint32_t));
    out->grouped = malloc(bytes ? bytes : 1);
    out->offsets = calloc((size_t)p->partitions + 1, sizeof(uint64_t));
    if (!gen || !part || !out->grouped || !out->offsets) {
        free(gen);
        free(part);
        wl_free_batch(out);
        return -ENOMEM;
    }
    uint64_t s = p->seed ^ (task * 0x100000001B3ull) ^ ((uint64_t)index << 40);
    uint64_t skew_cut = (uint64_t)(p->skew * 1e6);
    for (uint64_t i = 0; i < rows;) {
        int32_t v[NCOLS];
        uint64_t nulls = 0;
        v[0] = uniform(&s, DATE_LO, DATE_HI);
        v[1] = uniform(&s, TIME_LO, TIME_HI);
        v[3] = uniform(&s, 1, CUSTOMERS);
        v[4] = uniform(&s, 1, CDEMOS);
        v[5] = uniform(&s, 1, HDEMOS);
        v[6] = uniform(&s, 1, ADDRS);
        for (int c = 0; c < NCOLS; c++)
            if (c != 2 && next_u64(&s) % 1000 < NULL_PER_MILLE) nulls |= 1ull << c;
        /* HashPartitioning(date, time): Murmur3 chained from seed 42, NULL skipped. */
        int32_t h = 42;
        if (!(nulls & 1)) h = wl_murmur3_int(v[0], h);
        if (!(nulls & 2)) h = wl_murmur3_int(v[1], h);
        uint32_t pid = (uint32_t)(((h % (int32_t)p->partitions) + (int32_t)p->partitions) % (int32_t)p->partitions);
        if (skew_cut && next_u64(&s) % 1000000 < skew_cut) pid = 0;
        uint64_t items = 8 + next_u64(&s) % 9; /* a ticket has 8..16 line items */
        for (uint64_t k = 0; k < items && i < rows; k++, i++) {
            v[2] = uniform(&s, 1, ITEMS);
            put_row(gen + i * WL_ROW_BYTES, v, nulls);
            part[i] = pid;
        }
    }
    for (uint64_t i = 0; i < rows; i++) out->offsets[part[i] + 1] += WL_ROW_BYTES;
    for (uint32_t q = 0; q < p->partitions; q++) out->offsets[q + 1] += out->offsets[q];
    uint64_t *fill = malloc(((size_t)p->partitions + 1) * sizeof(uint64_t));
    if (!fill) {
        free(gen);
        free(part);
        wl_free_batch(out);
        return -ENOMEM;
    }
    memcpy(fill, out->offsets, ((size_t)p->partitions + 1) * sizeof(uint64_t));
    for (uint64_t i = 0; i < rows; i++) {
        memcpy(out->grouped + fill[part[i]], gen + i * WL_ROW_BYTES, WL_ROW_BYTES);
        fill[part[i]] += WL_ROW_BYTES;
    }
    free(fill);
    if (want_unsorted) {
        out->unsorted = gen;
        out->part = part;
    } else {
        free(gen);
        free(part);
    }
    out->rows = rows;
    out->bytes = bytes;
    return 0;
}

void wl_free_batch(wl_batch *b)
{
    free(b->grouped);
    free(b->offsets);
    free(b->unsorted);
    free(b->part);
    memset(b, 0, sizeof *b);
}

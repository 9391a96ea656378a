/* Writes map outputs over a matrix of codecs, checksums, strategies, input
 * shapes and budgets with the public API, and beside each output the bytes
 * that went in: <output>.plain (partitions concatenated) and <output>.plainindex
 * (N+1 big-endian offsets). CompatTest.java decodes the outputs with the Java
 * libraries Spark uses and compares. Usage: compat_gen DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtshuffle.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void put_be64(FILE *f, uint64_t v)
{
    for (int i = 7; i >= 0; i--) fputc((int)(v >> (8 * i)) & 0xff, f);
}

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* input: 0 one batch, 1 several batches, 2 unsorted appends, 3 sorted appends */
static void make_output(const char *dir, int map, uint32_t n, mts_codec codec, mts_checksum sum,
                        mts_strategy strat, int input, uint64_t budget, uint64_t seed)
{
    mts_writer_options o;
    mts_writer_options_init(&o);
    o.dir = dir;
    o.shuffle_id = 1;
    o.map_id = map;
    o.num_partitions = n;
    o.codec = codec;
    o.checksum = sum;
    o.strategy = strat;
    o.max_bytes_in_flight = budget;
    o.job_size = 64 << 10;
    mts_writer *w;
    char err[512];
    if (mts_writer_create(&o, &w, err, sizeof err) < 0) DIE("create: %s", err);

    /* Records: mostly small, compressible rows; a few large ones spanning
     * many lz4 blocks; some partitions left empty. */
    uint64_t s = seed;
    size_t nrec = 3000, cap = 1 << 20, used = 0;
    uint32_t *part = malloc(nrec * sizeof *part);
    size_t *off = malloc((nrec + 1) * sizeof *off);
    unsigned char *bytes = malloc(cap);
    for (size_t i = 0; i < nrec; i++) {
        part[i] = (uint32_t)(rnd(&s) % n);
        if (n > 3 && part[i] % 3 == 1) part[i]--; /* every third partition stays empty */
        size_t len = rnd(&s) % 97 == 0 ? 40000 + rnd(&s) % 200000 : rnd(&s) % 300;
        if (used + len > cap) { cap = (used + len) * 2; bytes = realloc(bytes, cap); }
        unsigned char base = (unsigned char)rnd(&s);
        for (size_t k = 0; k < len; k++) bytes[used + k] = (unsigned char)(base + (k % 64 < 48 ? k / 64 : rnd(&s)));
        off[i] = used;
        used += len;
    }
    off[nrec] = used;

    /* Expected plain partition bytes, in arrival order. */
    uint64_t *poff = calloc(n + 1, sizeof *poff);
    for (size_t i = 0; i < nrec; i++) poff[part[i] + 1] += off[i + 1] - off[i];
    for (uint32_t p = 0; p < n; p++) poff[p + 1] += poff[p];
    unsigned char *plain = malloc(used + 1);
    uint64_t *fill = malloc((n + 1) * sizeof *fill);
    memcpy(fill, poff, (n + 1) * sizeof *fill);
    int rc = 0;
    size_t nbatches = input == 0 ? 1 : input == 1 ? 4 : 0;
    if (nbatches) {
        /* Batch b holds records [b*nrec/nb, (b+1)*nrec/nb), grouped by partition. */
        unsigned char *batch = malloc(used + 1);
        uint64_t *boff = malloc((n + 1) * sizeof *boff), *bfill = malloc((n + 1) * sizeof *bfill);
        for (size_t b = 0; b < nbatches && rc == 0; b++) {
            size_t lo = b * nrec / nbatches, hi = (b + 1) * nrec / nbatches;
            memset(boff, 0, (n + 1) * sizeof *boff);
            for (size_t i = lo; i < hi; i++) boff[part[i] + 1] += off[i + 1] - off[i];
            for (uint32_t p = 0; p < n; p++) boff[p + 1] += boff[p];
            memcpy(bfill, boff, (n + 1) * sizeof *bfill);
            for (size_t i = lo; i < hi; i++) {
                size_t len = off[i + 1] - off[i];
                memcpy(batch + bfill[part[i]], bytes + off[i], len);
                bfill[part[i]] += len;
                memcpy(plain + fill[part[i]], bytes + off[i], len);
                fill[part[i]] += len;
            }
            rc = mts_writer_add_batch(w, batch, boff);
        }
        free(batch); free(boff); free(bfill);
    } else {
        size_t *order = malloc(nrec * sizeof *order);
        for (size_t i = 0; i < nrec; i++) order[i] = i;
        if (input == 3) { /* stable by partition */
            size_t k = 0;
            for (uint32_t p = 0; p < n; p++)
                for (size_t i = 0; i < nrec; i++)
                    if (part[i] == p) order[k++] = i;
        }
        for (size_t k = 0; k < nrec && rc == 0; k++) {
            size_t i = order[k], len = off[i + 1] - off[i];
            memcpy(plain + fill[part[i]], bytes + off[i], len);
            fill[part[i]] += len;
            rc = mts_writer_append(w, part[i], bytes + off[i], len);
        }
        free(order);
    }
    if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
    if (rc < 0) DIE("map %d: %s", map, mts_writer_error(w));
    mts_writer_free(w);

    char path[4096];
    snprintf(path, sizeof path, "%s/shuffle_1_%d_0.plain", dir, map);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(plain, 1, used, f) != used) DIE("write %s", path);
    fclose(f);
    snprintf(path, sizeof path, "%s/shuffle_1_%d_0.plainindex", dir, map);
    f = fopen(path, "wb");
    for (uint32_t p = 0; p <= n; p++) put_be64(f, poff[p]);
    fclose(f);
    printf("map %d: %u partitions, %s, %s, %s, input %d, budget %llu, %zu bytes\n", map, n,
           mts_codec_name(codec), mts_checksum_name(sum), strat ? "baseline" : "streaming", input,
           (unsigned long long)budget, used);
    free(part); free(off); free(bytes); free(poff); free(plain); free(fill);
}

int main(int argc, char **argv)
{
    if (argc != 2) DIE("usage: compat_gen DIR");
    const mts_codec codecs[] = {MTS_CODEC_LZ4, MTS_CODEC_ZSTD, MTS_CODEC_NONE};
    const mts_checksum sums[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    const uint32_t parts[] = {1, 7, 200};
    int map = 0;
    for (int c = 0; c < 3; c++)
        for (int input = 0; input < 4; input++)
            for (int strat = 0; strat < 2; strat++) {
                uint64_t budget = (map % 3 == 0) ? (256u << 10) : (32u << 20); /* tiny: spills */
                make_output(argv[1], map, parts[map % 3], codecs[c], sums[(map / 2) % 3],
                            (mts_strategy)strat, input, budget, 1000 + (uint64_t)map);
                map++;
            }
    return 0;
}

/* Seeded randomised round trips through the whole writer: random partition
 * counts (1..10,000), record sizes (0 bytes to several MiB), sorted,
 * multi-batch, unsorted and mixed input, tiny and large budgets, every codec,
 * checksum and strategy. The output files are read back, decoded and compared
 * record by record with what went in; streaming and baseline must agree. */
#include <time.h>

#include "checksum.h"
#include "codec.h"
#include "commit.h"
#include "internal.h"
#include "testutil.h"

typedef struct rec {
    uint32_t partition;
    uint64_t off, len; /* in the trial's byte store */
} rec;

typedef struct trial {
    uint32_t n;
    mts_writer_options o;
    int input; /* 0 sorted appends, 1 batches, 2 unsorted appends, 3 mixed */
    int tagged; /* records go in as tagged buffers (mts_writer_append_tagged) */
    int async;  /* batches go in through mts_writer_add_batch_async */
    unsigned char *store;
    uint64_t store_len, store_cap;
    rec *recs;
    uint64_t nrecs, recs_cap;
    /* input units: either a batch (records [first, last)) or single appends */
    struct unit { int batch; uint64_t first, last; } *units;
    uint64_t nunits, units_cap;
} trial;

static const char *input_names[] = {"sorted", "batches", "unsorted", "mixed"};

static void add_rec(trial *t, uint64_t *s, uint32_t p, uint64_t payload)
{
    uint64_t len = 8 + payload; /* [u32 seq][u32 payload length][payload] */
    if (t->store_len + len > t->store_cap) {
        t->store_cap = (t->store_len + len) * 2;
        t->store = realloc(t->store, t->store_cap);
    }
    if (t->nrecs == t->recs_cap) {
        t->recs_cap = t->recs_cap ? t->recs_cap * 2 : 1024;
        t->recs = realloc(t->recs, t->recs_cap * sizeof(rec));
    }
    unsigned char *b = t->store + t->store_len;
    uint32_t seq = (uint32_t)t->nrecs, pl = (uint32_t)payload;
    memcpy(b, &seq, 4);
    memcpy(b + 4, &pl, 4);
    unsigned char v = (unsigned char)rng_next(s);
    int noisy = rng_below(s, 4) == 0;
    for (uint64_t i = 0; i < payload; i++) b[8 + i] = noisy ? (unsigned char)rng_next(s) : (unsigned char)(v + i / 16);
    t->recs[t->nrecs++] = (rec){p, t->store_len, len};
    t->store_len += len;
}

static void add_unit(trial *t, int batch, uint64_t first, uint64_t last)
{
    if (t->nunits == t->units_cap) {
        t->units_cap = t->units_cap ? t->units_cap * 2 : 64;
        t->units = realloc(t->units, t->units_cap * sizeof(*t->units));
    }
    t->units[t->nunits++] = (struct unit){batch, first, last};
}

static uint64_t payload_size(uint64_t *s)
{
    uint64_t r = rng_below(s, 1000);
    if (r < 5) return 256 * 1024 + rng_below(s, 3u << 20); /* several MiB at most */
    if (r < 100) return rng_below(s, 4096);
    if (r < 150) return 0;
    return rng_below(s, 200);
}

static void gen_trial(trial *t, uint64_t *s, const char *dir)
{
    memset(t, 0, sizeof *t);
    static const uint32_t counts[] = {1, 2, 3, 7, 50, 200, 1000, 10000};
    t->n = rng_below(s, 3) == 0 ? 1 + (uint32_t)rng_below(s, 300) : counts[rng_below(s, 8)];
    t->o = test_options(dir, t->n);
    t->o.shuffle_id = (int32_t)rng_below(s, 5);
    t->o.map_id = (int64_t)rng_below(s, 1ull << 40);
    t->o.codec = (mts_codec)rng_below(s, 3);
    t->o.level = 1 + (int)rng_below(s, 3);
    t->o.block_size = 64u << rng_below(s, 11);
    t->o.checksum = (mts_checksum)rng_below(s, 4);
    t->o.threads = 1 + (uint32_t)rng_below(s, 3);
    t->o.max_bytes_in_flight = rng_below(s, 2) ? (64u << 10) << rng_below(s, 5) : (4ull << 20) << rng_below(s, 4);
    t->o.job_size = 1024u << rng_below(s, 11);
    t->input = (int)rng_below(s, 4);
    t->tagged = (int)rng_below(s, 2);
    uint64_t target = rng_below(s, 8) == 0 ? 0 : 1 + rng_below(s, 6u << 20); /* some tasks write nothing */
    uint64_t bytes = 0;
    while (bytes < target) {
        int batch = t->input == 1 || (t->input == 3 && rng_below(s, 2));
        uint64_t nrec = 1 + rng_below(s, t->input == 2 ? 2000 : 400);
        uint64_t first = t->nrecs;
        /* Sorted stretches: partitions non-decreasing within a unit, and for
         * sorted input across units too. */
        uint32_t p = t->input == 0 && first ? t->recs[first - 1].partition : (uint32_t)rng_below(s, t->n);
        if (batch) p = (uint32_t)rng_below(s, t->n / 4 + 1);
        for (uint64_t i = 0; i < nrec && bytes < target; i++) {
            if (t->input == 2 || (t->input == 3 && !batch)) p = (uint32_t)rng_below(s, t->n);
            else if (rng_below(s, 3) == 0) {
                uint32_t step = (uint32_t)rng_below(s, 1 + t->n / 8);
                p = MTS_MIN(t->n - 1, p + step);
            }
            uint64_t pl = payload_size(s);
            add_rec(t, s, p, pl);
            bytes += 8 + pl;
        }
        if (batch) {
            add_unit(t, 1, first, t->nrecs);
        } else {
            for (uint64_t i = first; i < t->nrecs; i++) add_unit(t, 0, i, i + 1);
        }
    }
    t->async = (int)rng_below(s, 2);
}

/* A batch of mts_writer_add_batch_async, given back: poisoned and freed, so
 * that a read after this shows in the output (and under ASan at once). */
typedef struct async_batch {
    unsigned char *data;
    uint64_t len;
    uint64_t *given_back;
} async_batch;

static void async_given_back(void *ctx)
{
    async_batch *ab = ctx;
    memset(ab->data, 0xEE, ab->len);
    __atomic_add_fetch(ab->given_back, 1, __ATOMIC_RELAXED);
    free(ab->data);
    free(ab);
}

/* Feeds a trial to one writer and commits; returns the lengths. */
static void run_trial(trial *t, mts_strategy strategy, uint64_t *lengths, uint64_t *sums)
{
    t->o.strategy = strategy;
    mts_writer *w = NULL;
    char err[512];
    int rc = mts_writer_create(&t->o, &w, err, sizeof err);
    if (rc < 0) fprintf(stderr, "create: %s\n", err);
    CHECK_RC(rc);
    uint64_t *offs = calloc((size_t)t->n + 1, sizeof(uint64_t));
    unsigned char *batch = NULL;
    uint64_t zero_appends = 0, async_added = 0, given_back = 0;
    /* Half the trials hand their records over as tagged buffers of up to
     * 64 KiB (mts_writer_append_tagged), as the JNI binding does. */
    int tagged = t->tagged;
    unsigned char *tbuf = NULL;
    size_t tlen = 0, tcap = 0;
    for (uint64_t u = 0; u <= t->nunits; u++) {
        struct unit *un = u < t->nunits ? &t->units[u] : NULL;
        if (tagged && tlen && (!un || un->batch || tlen + 8 + t->recs[un->first].len > (64u << 10))) {
            rc = mts_writer_append_tagged(w, tbuf, tlen);
            if (rc < 0) fprintf(stderr, "append_tagged: %s\n", mts_writer_error(w));
            CHECK_RC(rc);
            tlen = 0;
        }
        if (!un) break;
        if (!un->batch && tagged) {
            rec *r = &t->recs[un->first];
            if (tlen + 8 + r->len > tcap) {
                tcap = (tlen + 8 + r->len) * 2;
                tbuf = realloc(tbuf, tcap);
            }
            put_be32_test(tbuf + tlen, r->partition);
            put_be32_test(tbuf + tlen + 4, (uint32_t)r->len);
            memcpy(tbuf + tlen + 8, t->store + r->off, r->len);
            tlen += 8 + r->len;
            continue;
        }
        if (!un->batch) {
            rec *r = &t->recs[un->first];
            rc = mts_writer_append(w, r->partition, t->store + r->off, r->len);
            if (rc < 0) fprintf(stderr, "append: %s\n", mts_writer_error(w));
            CHECK_RC(rc);
            if (zero_appends < 3 && r->len < 20) { /* zero-byte records add nothing */
                CHECK_RC(mts_writer_append(w, r->partition, NULL, 0));
                zero_appends++;
            }
            continue;
        }
        /* Group the unit's records by partition (stable) into one buffer. */
        memset(offs, 0, ((size_t)t->n + 1) * sizeof(uint64_t));
        uint64_t total = 0;
        for (uint64_t i = un->first; i < un->last; i++) {
            offs[t->recs[i].partition + 1] += t->recs[i].len;
            total += t->recs[i].len;
        }
        for (uint32_t p = 0; p < t->n; p++) offs[p + 1] += offs[p];
        batch = realloc(batch, total + 1);
        uint64_t *fill = malloc(((size_t)t->n + 1) * sizeof(uint64_t));
        memcpy(fill, offs, ((size_t)t->n + 1) * sizeof(uint64_t));
        for (uint64_t i = un->first; i < un->last; i++) {
            rec *r = &t->recs[i];
            memcpy(batch + fill[r->partition], t->store + r->off, r->len);
            fill[r->partition] += r->len;
        }
        free(fill);
        if (t->async) {
            /* The writer reads the batch until it gives it back, and the
             * offsets only during the call. */
            async_batch *ab = malloc(sizeof *ab);
            *ab = (async_batch){malloc(total + 1), total, &given_back};
            memcpy(ab->data, batch, total);
            rc = mts_writer_add_batch_async(w, ab->data, offs, async_given_back, ab);
            if (rc < 0) fprintf(stderr, "add_batch_async: %s\n", mts_writer_error(w));
            CHECK_RC(rc);
            async_added++;
            memset(offs, 0xEE, ((size_t)t->n + 1) * sizeof(uint64_t));
        } else {
            rc = mts_writer_add_batch(w, batch, offs);
            if (rc < 0) fprintf(stderr, "add_batch: %s\n", mts_writer_error(w));
            CHECK_RC(rc);
        }
        memset(batch, 0xEE, total); /* the writer must not read it after the call */
    }
    mts_commit_result res;
    rc = mts_writer_commit(w, lengths, sums, &res);
    if (rc < 0) fprintf(stderr, "commit: %s\n", mts_writer_error(w));
    CHECK_RC(rc);
    CHECK(res.adopted == 0);
    CHECK(__atomic_load_n(&given_back, __ATOMIC_RELAXED) == async_added); /* every batch back by commit */
    mts_writer_stats st;
    CHECK_RC(mts_writer_get_stats(w, &st));
    CHECK(st.peak_bytes_held <= t->o.max_bytes_in_flight); /* the cap is hard */
    CHECK(writer_bytes_held(w) == 0);                     /* and all of it came back */
    CHECK(st.bytes_in == t->store_len);
    mts_writer_free(w);
    free(offs);
    free(batch);
    free(tbuf);
}

/* Reads the committed files back and checks every partition record by
 * record. Returns the decoded partitions concatenated, for comparing
 * strategies. */
/* Reader options with random threads, piece size and budget; the budget
 * holds a piece and one whole lz4 block (reader.c). */
static mts_reader_options random_reader_options(const trial *t, uint64_t *s)
{
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.threads = 1 + (uint32_t)rng_below(s, 3);
    ro.piece_size = 4096u << rng_below(s, 8);
    ro.max_bytes_in_flight = MTS_MAX(64u << 10, 2 * (MTS_MAX(ro.piece_size, t->o.block_size) + 4096))
                             << rng_below(s, 3);
    return ro;
}

/* Reads random partition ranges back through the public reader (random
 * threads, budget and piece size) and compares with what went in. */
static void read_back(trial *t, const char *dir, uint64_t *s)
{
    char path[1200], name[256];
    mts_output_name(name, sizeof name, t->o.shuffle_id, t->o.map_id, 'd', t->o.checksum);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mts_reader_options ro = random_reader_options(t, s);
    ro.codec = rng_below(s, 2) ? MTS_CODEC_AUTO : t->o.codec;
    /* The same output opened several times: maps are delivered in order. */
    uint32_t nmaps = 1 + (uint32_t)rng_below(s, 3);
    const char *paths[3] = {path, path, path};
    mts_reader *r;
    char err[600];
    int rc = mts_reader_open(&ro, paths, nmaps, &r, err, sizeof err);
    if (rc < 0) fprintf(stderr, "reader: %s\n", err);
    CHECK_RC(rc);
    CHECK(mts_reader_num_partitions(r) == t->n && mts_reader_num_maps(r) == nmaps);
    /* Expected bytes of partitions [a, b): the records of those partitions,
     * partition by partition, each in arrival order. */
    unsigned char *want = malloc(t->store_len + 1);
    for (int k = 0; k < 4; k++) {
        uint32_t a = (uint32_t)rng_below(s, t->n), b = a + 1 + (uint32_t)rng_below(s, MTS_MIN(t->n - a, 64u));
        if (k == 0) { a = 0; b = t->n; }
        uint64_t wl = 0;
        for (uint32_t p = a; p < b; p++)
            for (uint64_t i = 0; i < t->nrecs; i++)
                if (t->recs[i].partition == p) {
                    memcpy(want + wl, t->store + t->recs[i].off, t->recs[i].len);
                    wl += t->recs[i].len;
                }
        CHECK_RC(mts_reader_start(r, a, b));
        uint64_t pos = 0;
        uint32_t map = 0;
        mts_read_piece pc;
        while ((rc = mts_reader_next(r, &pc)) == 1) {
            if (pc.map != map) { /* the previous map's segment was complete */
                CHECK(pc.map > map && pos == wl);
                map = pc.map;
                pos = 0;
            }
            CHECK(pc.len > 0 && pos + pc.len <= wl && !memcmp(want + pos, pc.data, pc.len));
            pos += pc.len;
        }
        if (rc < 0) fprintf(stderr, "reader: %s\n", mts_reader_error(r));
        CHECK(rc == 0);
        CHECK(wl == 0 || (pos == wl && map == nmaps - 1));
    }
    /* A queue of ranges (the read above is complete, so the first queue
     * begins a fresh read): pieces come range by range, each range map by
     * map, with the range's index. */
    uint32_t q = 1 + (uint32_t)rng_below(s, 6), qa[6], qb[6];
    uint64_t qoff[7] = {0};
    unsigned char *qwant = malloc((t->store_len + 1) * 6);
    for (uint32_t k = 0; k < q; k++) {
        qa[k] = (uint32_t)rng_below(s, t->n);
        qb[k] = qa[k] + 1 + (uint32_t)rng_below(s, MTS_MIN(t->n - qa[k], 16u));
        uint64_t wl = 0;
        for (uint32_t p = qa[k]; p < qb[k]; p++)
            for (uint64_t i = 0; i < t->nrecs; i++)
                if (t->recs[i].partition == p) {
                    memcpy(qwant + qoff[k] + wl, t->store + t->recs[i].off, t->recs[i].len);
                    wl += t->recs[i].len;
                }
        qoff[k + 1] = qoff[k] + wl;
        CHECK_RC(k == 0 && rng_below(s, 2) ? mts_reader_start(r, qa[k], qb[k]) : mts_reader_queue(r, qa[k], qb[k]));
    }
    CHECK(mts_reader_queue(r, 3, 2) == MTS_E_RANGE && mts_reader_queue(r, 0, t->n + 1) == MTS_E_RANGE);
    uint32_t cur_range = 0, cur_map = 0;
    uint64_t pos = 0; /* within the current (range, map) */
    mts_read_piece pc;
    while ((rc = mts_reader_next(r, &pc)) == 1) {
        if (pc.range != cur_range || pc.map != cur_map) { /* the previous segment was complete */
            CHECK(pos == qoff[cur_range + 1] - qoff[cur_range]);
            CHECK(pc.range > cur_range || (pc.range == cur_range && pc.map > cur_map));
            cur_range = pc.range;
            cur_map = pc.map;
            pos = 0;
        }
        uint64_t wl = qoff[cur_range + 1] - qoff[cur_range];
        CHECK(pc.len > 0 && pos + pc.len <= wl && !memcmp(qwant + qoff[cur_range] + pos, pc.data, pc.len));
        pos += pc.len;
    }
    if (rc < 0) fprintf(stderr, "reader queue: %s\n", mts_reader_error(r));
    CHECK(rc == 0 && cur_range < q);
    free(qwant);
    mts_reader_stats st;
    CHECK_RC(mts_reader_get_stats(r, &st));
    CHECK(st.peak_bytes_held <= ro.max_bytes_in_flight);
    mts_reader_free(r);
    free(want);
}

/* The block reader (a reducer that fetches blocks itself): every partition's
 * stored bytes as one block, copied to memory of their own, handed over a
 * few at a time between reads as a fetch loop does; pieces carry the block's
 * tag and decode to the partition's records. Then one block with a flipped
 * byte: the read fails naming the block, and the next block starts afresh. */
static uint64_t block_want(const trial *t, uint32_t p, unsigned char *want)
{
    uint64_t wl = 0; /* partition p's records, in arrival order */
    for (uint64_t i = 0; i < t->nrecs; i++)
        if (t->recs[i].partition == p) {
            memcpy(want + wl, t->store + t->recs[i].off, t->recs[i].len);
            wl += t->recs[i].len;
        }
    return wl;
}

static void read_blocks(trial *t, const char *dir, uint64_t *s)
{
    char path[1200], name[256], err[600];
    mts_output_name(name, sizeof name, t->o.shuffle_id, t->o.map_id, 'd', t->o.checksum);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mts_output *o;
    CHECK_RC(mts_output_open(path, 0, &o, err, sizeof err));
    mts_reader_options ro = random_reader_options(t, s);
    ro.codec = t->o.codec;
    mts_reader *r;
    int rc = mts_reader_open_blocks(&ro, &r, err, sizeof err);
    if (rc < 0) fprintf(stderr, "block reader: %s\n", err);
    CHECK_RC(rc);
    CHECK(mts_reader_start(r, 0, 1) == MTS_E_ARG && mts_reader_queue(r, 0, 1) == MTS_E_ARG);
    unsigned char **blocks = calloc(t->n, sizeof *blocks);
    unsigned char *want = malloc(t->store_len + 1);
    uint32_t added = 0, cur = 0; /* cur: the block being checked; earlier ones are complete */
    uint64_t pos = 0, wl = block_want(t, 0, want);
    mts_read_piece pc;
    while (cur < t->n) {
        /* Hand over up to 4 more blocks, then take a few pieces. */
        for (uint32_t k = 1 + (uint32_t)rng_below(s, 4); k && added < t->n; k--, added++) {
            const void *b;
            uint64_t n;
            CHECK_RC(mts_output_partition(o, added, &b, &n));
            blocks[added] = malloc(n + 1);
            if (n) memcpy(blocks[added], b, n); /* an empty partition's bytes are NULL */
            CHECK_RC(mts_reader_add_block(r, blocks[added], n, added));
        }
        for (int k = 1 + (int)rng_below(s, 8); k && cur < t->n; k--) {
            rc = mts_reader_next(r, &pc);
            if (rc < 0) fprintf(stderr, "block reader: %s\n", mts_reader_error(r));
            CHECK(rc >= 0);
            uint32_t done_below = rc == 1 ? pc.range : added;
            CHECK(done_below >= cur && done_below <= added);
            while (cur < done_below) { /* block cur was complete */
                CHECK(pos == wl);
                free(blocks[cur]);
                blocks[cur++] = NULL;
                pos = 0;
                wl = cur < t->n ? block_want(t, cur, want) : 0;
            }
            if (rc == 0) break;
            CHECK(pc.len > 0 && pos + pc.len <= wl && !memcmp(want + pos, pc.data, pc.len));
            pos += pc.len;
        }
    }
    CHECK(added == t->n && mts_reader_next(r, &pc) == 0);
    /* A corrupt block: the first non-empty partition's bytes, one flipped. */
    for (uint32_t p = 0; p < t->n && t->o.codec != MTS_CODEC_NONE; p++) {
        const void *b;
        uint64_t n;
        CHECK_RC(mts_output_partition(o, p, &b, &n));
        if (n < 64) continue;
        unsigned char *bad = malloc(n);
        memcpy(bad, b, n);
        bad[n / 2] ^= 0x5a;
        CHECK_RC(mts_reader_add_block(r, bad, n, 7));
        while ((rc = mts_reader_next(r, &pc)) == 1) {}
        /* lz4-java blocks carry a checksum of their bytes; Spark's zstd frames carry none, so a
         * flipped byte in a literal may decode: there only a failure must name the block. */
        if (rc < 0 || t->o.codec == MTS_CODEC_LZ4) {
            if (rc != MTS_E_CORRUPT) fprintf(stderr, "corrupt block: rc %d: %s\n", rc, mts_reader_error(r));
            CHECK(rc == MTS_E_CORRUPT && strstr(mts_reader_error(r), "block 7"));
        }
        unsigned char *good = malloc(n);
        memcpy(good, b, n);
        CHECK_RC(mts_reader_add_block(r, good, n, 8)); /* a fresh read */
        uint64_t got = 0;
        while ((rc = mts_reader_next(r, &pc)) == 1) got += pc.len;
        CHECK(rc == 0 && got > 0);
        free(bad);
        free(good);
        break;
    }
    mts_reader_stats st;
    CHECK_RC(mts_reader_get_stats(r, &st));
    CHECK(st.peak_bytes_held <= ro.max_bytes_in_flight);
    mts_reader_free(r);
    for (uint32_t p = 0; p < t->n; p++) free(blocks[p]);
    free(blocks);
    free(want);
    mts_output_close(o);
}

/* A block reader past 64 blocks: once the caller is past 64 blocks and no
 * unit is in flight, adding a block forgets the blocks handed out (its
 * cursors move down; units name cursors by index). The random trials above
 * rarely meet that moment, as a reducer of many map outputs does: here it is
 * made to happen, at a block boundary and in the middle of a block (a piece
 * of it held by the caller, the rest queued or decoding; with no codec a
 * block is handed out whole, so there at block boundaries), for each codec,
 * and every block must still decode to its partition's bytes. "No unit in
 * flight" is the engine's single worker idle with its job count still. */
static void engine_quiet(mts_engine *e)
{
    mts_engine_stats a, b;
    CHECK_RC(mts_engine_get_stats(e, &a));
    for (int i = 0; i < 2000; i++) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        CHECK_RC(mts_engine_get_stats(e, &b));
        if (b.threads_busy == 0 && a.threads_busy == 0 && b.jobs == a.jobs) return;
        a = b;
    }
    CHECK(!"the engine did not go quiet in 4 s");
}

static void block_reader_past_64(const char *dir, uint64_t *s, mts_codec codec)
{
    enum { NPARTS = 150 };
    /* Each partition's bytes: compressible runs with some noise, 36-60 KiB,
     * so more than one lz4 block (a piece of lz4 is at least one block). */
    uint64_t offs[NPARTS + 1] = {0};
    for (uint32_t p = 0; p < NPARTS; p++) offs[p + 1] = offs[p] + 36864 + rng_below(s, 24576);
    unsigned char *data = malloc(offs[NPARTS]);
    for (uint64_t i = 0; i < offs[NPARTS]; i++)
        data[i] = rng_below(s, 8) == 0 ? (unsigned char)rng_next(s) : (unsigned char)(i / 64);
    mts_writer_options o = test_options(dir, NPARTS);
    o.codec = codec;
    mts_writer *w;
    char err[600];
    int rc = mts_writer_create(&o, &w, err, sizeof err);
    if (rc < 0) fprintf(stderr, "create: %s\n", err);
    CHECK_RC(rc);
    CHECK_RC(mts_writer_add_batch(w, data, offs));
    uint64_t lengths[NPARTS];
    CHECK_RC(mts_writer_commit(w, lengths, NULL, NULL));
    mts_writer_free(w);

    char path[1200], name[256];
    mts_output_name(name, sizeof name, o.shuffle_id, o.map_id, 'd', o.checksum);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mts_output *out;
    CHECK_RC(mts_output_open(path, 0, &out, err, sizeof err));
    unsigned char *blocks[NPARTS];
    uint64_t blen[NPARTS];
    for (uint32_t p = 0; p < NPARTS; p++) {
        const void *b;
        CHECK_RC(mts_output_partition(out, p, &b, &blen[p]));
        blocks[p] = malloc(blen[p]);
        memcpy(blocks[p], b, blen[p]);
    }
    mts_output_close(out);

    mts_engine *e;
    CHECK_RC(mts_engine_create(1, 64u << 20, &e, err, sizeof err));
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.engine = e;
    ro.codec = codec;
    ro.piece_size = 4096; /* several pieces a block: a block can be left in the middle */
    mts_reader *r;
    CHECK_RC(mts_reader_open_blocks(&ro, &r, err, sizeof err));
    uint32_t added = 0, cur = 0; /* cur: the block being checked */
    uint64_t pos = 0;
    mts_read_piece pc;
    /* Blocks are added only at these moments, each after the reader has
     * gone quiet: 0..69 at the start; 70..139 at the first piece of block 66
     * (66 blocks handed out: the first add drops them); 140..149 in the
     * middle of block 130 (64 more handed out: dropped with a piece of block
     * 130 held by the caller and the rest of it queued). */
    const uint32_t at[] = {0, 66, 130}, upto[] = {70, 140, NPARTS};
    unsigned step = 0;
    for (;;) {
        if (step < 3 && cur >= at[step]) {
            int mid = pos > 0 && pos < offs[cur + 1] - offs[cur];
            if (step == 0 || (step == 1 && pos > 0) || (step == 2 && (mid || codec == MTS_CODEC_NONE))) {
                if (step) engine_quiet(e); /* no unit in flight */
                for (; added < upto[step]; added++) CHECK_RC(mts_reader_add_block(r, blocks[added], blen[added], added));
                step++;
            }
        }
        rc = mts_reader_next(r, &pc);
        if (rc < 0) fprintf(stderr, "block reader past 64 (%s): %s\n", mts_codec_name(codec), mts_reader_error(r));
        CHECK(rc >= 0);
        if (rc == 0) break;
        while (cur < pc.range) { /* block cur was complete */
            CHECK(pos == offs[cur + 1] - offs[cur]);
            cur++;
            pos = 0;
        }
        CHECK(pc.range == cur && pos + pc.len <= offs[cur + 1] - offs[cur]);
        CHECK(!memcmp(data + offs[cur] + pos, pc.data, pc.len));
        pos += pc.len;
    }
    CHECK(step == 3 && added == NPARTS && cur == NPARTS - 1 && pos == offs[NPARTS] - offs[NPARTS - 1]);
    mts_reader_free(r);
    mts_engine_free(e);
    for (uint32_t p = 0; p < NPARTS; p++) free(blocks[p]);
    free(data);
    rm_rf(dir);
    mkdir(dir, 0755);
}

static void verify(trial *t, const char *dir, const uint64_t *lengths, const uint64_t *sums)
{
    char path[1200], name[256];
    size_t ilen = 0, dlen = 0, clen = 0;
    mts_output_name(name, sizeof name, t->o.shuffle_id, t->o.map_id, 'i', t->o.checksum);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char *idx = read_file(path, &ilen);
    mts_output_name(name, sizeof name, t->o.shuffle_id, t->o.map_id, 'd', t->o.checksum);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char *data = read_file(path, &dlen);
    unsigned char *cs = NULL;
    if (t->o.checksum != MTS_CHECKSUM_NONE) {
        mts_output_name(name, sizeof name, t->o.shuffle_id, t->o.map_id, 'c', t->o.checksum);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        cs = read_file(path, &clen);
        CHECK(cs && clen == (size_t)t->n * 8);
    }
    CHECK(idx && data && ilen == ((size_t)t->n + 1) * 8 && be64_at(idx) == 0 && be64_at(idx + 8 * t->n) == dlen);
    CHECK(dir_count(dir) == (t->o.checksum == MTS_CHECKSUM_NONE ? 2 : 3)); /* no temp or run file left */

    /* Expected records of each partition, in arrival order. */
    uint64_t *start = calloc((size_t)t->n + 1, sizeof(uint64_t));
    uint64_t *order = malloc((t->nrecs + 1) * sizeof(uint64_t));
    for (uint64_t i = 0; i < t->nrecs; i++) start[t->recs[i].partition + 1]++;
    for (uint32_t p = 0; p < t->n; p++) start[p + 1] += start[p];
    uint64_t *fill = malloc(((size_t)t->n + 1) * sizeof(uint64_t));
    memcpy(fill, start, ((size_t)t->n + 1) * sizeof(uint64_t));
    for (uint64_t i = 0; i < t->nrecs; i++) order[fill[t->recs[i].partition]++] = i;
    free(fill);

    sinkbuf got = {0};
    for (uint32_t p = 0; p < t->n; p++) {
        uint64_t a = be64_at(idx + 8 * p), b = be64_at(idx + 8 * (p + 1));
        CHECK(b >= a && b - a == lengths[p]);
        if (cs) {
            uint32_t c = checksum_update(t->o.checksum, checksum_init(t->o.checksum), data + a, b - a);
            CHECK(be64_at(cs + 8 * p) == c && sums[p] == c);
        }
        got.len = 0;
        CHECK_RC(codec_get(t->o.codec)->decode(data + a, b - a, sink, &got, NULL));
        uint64_t pos = 0;
        for (uint64_t k = start[p]; k < start[p + 1]; k++) {
            rec *r = &t->recs[order[k]];
            if (!(pos + r->len <= got.len && !memcmp(got.buf + pos, t->store + r->off, r->len))) {
                fprintf(stderr, "partition %u: record %llu of %llu (seq %llu, %llu bytes) differs\n", p,
                        (unsigned long long)(k - start[p]), (unsigned long long)(start[p + 1] - start[p]),
                        (unsigned long long)order[k], (unsigned long long)r->len);
                CHECK(0);
            }
            pos += r->len;
        }
        CHECK(pos == got.len); /* nothing extra */
    }
    free(got.buf);
    free(start);
    free(order);
    free(idx);
    free(data);
    free(cs);
}

int main(void)
{
    test_init_seed("test_roundtrip");
    const char *e = getenv("MTS_TEST_TRIALS");
    int trials = e ? atoi(e) : 40;
    char *dir = test_tmpdir("roundtrip");
    uint64_t s = test_seed;
    for (int i = 0; i < trials; i++) {
        trial t;
        gen_trial(&t, &s, dir);
        printf("trial %d: %u partitions, %llu records, %llu bytes, %s%s%s, %s/%s, budget %llu, job %u, %u threads\n",
               i, t.n, (unsigned long long)t.nrecs, (unsigned long long)t.store_len, input_names[t.input],
               t.tagged ? " (tagged)" : "", t.async ? " (async batches)" : "",
               mts_codec_name(t.o.codec), mts_checksum_name(t.o.checksum),
               (unsigned long long)t.o.max_bytes_in_flight, t.o.job_size, t.o.threads);
        fflush(stdout);
        uint64_t *len_s = malloc(t.n * 8), *sum_s = malloc(t.n * 8);
        uint64_t *len_b = malloc(t.n * 8), *sum_b = malloc(t.n * 8);
        run_trial(&t, MTS_STRATEGY_STREAMING, len_s, sum_s);
        verify(&t, dir, len_s, sum_s);
        read_back(&t, dir, &s);
        read_blocks(&t, dir, &s);
        rm_rf(dir);
        mkdir(dir, 0755);
        run_trial(&t, MTS_STRATEGY_BASELINE, len_b, sum_b);
        verify(&t, dir, len_b, sum_b); /* both decode to the same records */
        read_back(&t, dir, &s);
        rm_rf(dir);
        mkdir(dir, 0755);
        free(len_s); free(sum_s); free(len_b); free(sum_b);
        free(t.store);
        free(t.recs);
        free(t.units);
    }
    static const mts_codec codecs[] = {MTS_CODEC_LZ4, MTS_CODEC_ZSTD, MTS_CODEC_NONE};
    for (int c = 0; c < 3; c++) block_reader_past_64(dir, &s, codecs[c]);
    rm_rf(dir);
    free(dir);
    TEST_DONE("test_roundtrip");
}

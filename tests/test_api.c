/* The public API's contract: error codes for bad input and misuse, cleanup. */
#include <time.h>

#include "testutil.h"

static mts_writer *make(const char *dir, uint32_t n, mts_strategy strat)
{
    mts_writer_options o = test_options(dir, n);
    o.strategy = strat;
    return test_writer(&o);
}

/* Reads every map in dir back: partition p of map m must hold times[m][p]
 * copies of bytes[p * per, (p + 1) * per), in order. */
static void check_maps(const char *dir, const unsigned char *bytes, size_t per, uint32_t maps,
                       const uint32_t (*times)[4])
{
    char err[256];
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    mts_reader *r;
    CHECK_RC(mts_reader_open_dir(&ro, dir, 0, &r, err, sizeof err));
    for (uint32_t p = 0; p < 4; p++) {
        CHECK_RC(mts_reader_start(r, p, p + 1));
        uint64_t got[8] = {0};
        mts_read_piece pc;
        int rc;
        while ((rc = mts_reader_next(r, &pc)) == 1) {
            CHECK(pc.map < maps && maps <= 8);
            const unsigned char *d = pc.data;
            size_t wrong = 0;
            for (size_t i = 0; i < pc.len; i++) wrong += d[i] != bytes[(size_t)((got[pc.map] + i) % per) + p * per];
            CHECK(wrong == 0);
            got[pc.map] += pc.len;
        }
        CHECK(rc == 0);
        for (uint32_t m = 0; m < maps; m++) CHECK(got[m] == times[m][p] * per);
    }
    mts_reader_free(r);
}

static void set_reader_codec_7(mts_reader_options *o) { o->codec = (mts_codec)7; }
static void set_reader_threads_0(mts_reader_options *o) { o->threads = 0; }
static void set_reader_verify_9(mts_reader_options *o) { o->verify_checksums = 9; }
static void set_reader_piece_small(mts_reader_options *o) { o->piece_size = 100; }
static void set_reader_budget_small(mts_reader_options *o) { o->max_bytes_in_flight = 1000; }
static void set_reader_reserved(mts_reader_options *o) { o->reserved[0] = 1; }

int main(void)
{
    test_init_seed("test_api");
    char *dir = test_tmpdir("api");
    char err[256];
    mts_writer_options o;
    mts_writer *w = (mts_writer *)1;

    /* Options. */
    CHECK(mts_writer_create(NULL, &w, err, sizeof err) == MTS_E_ARG && w == NULL);
    mts_writer_options_init(&o);
    CHECK(o.codec == MTS_CODEC_LZ4 && o.checksum == MTS_CHECKSUM_ADLER32 && o.block_size == 32768 &&
          o.level == 1 && o.threads == 2 && o.max_bytes_in_flight == (64u << 20));
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "dir"));
    o.dir = "/nonexistent-dir";
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "not a directory"));
    o.dir = dir;
    o.num_partitions = 0;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "num_partitions"));
    o.num_partitions = 4;
    o.max_bytes_in_flight = 1000;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "max_bytes_in_flight"));
    o.max_bytes_in_flight = 1 << 20;
    o.block_size = 10;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG);
    o.block_size = 32768;
    o.codec = (mts_codec)7;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG);
    o.codec = MTS_CODEC_ZSTD;
    o.level = 30;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG);
    o.level = 1;
    o.reserved[3] = 1;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "reserved"));
    o.reserved[3] = 0;
    o.reserved32 = 1;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "reserved32"));
    o.reserved32 = 0;
    o.writers_at_once = 65537;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG && strstr(err, "writers_at_once"));
    o.writers_at_once = 0;
    o.shuffle_id = -1;
    CHECK(mts_writer_create(&o, &w, err, sizeof err) == MTS_E_ARG);
    CHECK(dir_count(dir) == 0);

    /* Bad calls are rejected one by one and leave the writer usable. */
    w = make(dir, 4, MTS_STRATEGY_STREAMING);
    CHECK(mts_writer_append(NULL, 0, "x", 1) == MTS_E_ARG);
    CHECK(mts_writer_append(w, 4, "x", 1) == MTS_E_RANGE);
    CHECK(strstr(mts_writer_error(w), "partition 4") != NULL);
    CHECK(mts_writer_append(w, 0, NULL, 1) == MTS_E_ARG);
    CHECK(mts_writer_append(w, 0, NULL, 0) == 0); /* an empty record needs no bytes */
    CHECK(mts_writer_append(w, 1, "abc", (size_t)UINT32_MAX + 5) == MTS_E_OVERFLOW);
    uint64_t offs[5] = {0, 1, 1, 3, 2}; /* not monotonic */
    CHECK(mts_writer_add_batch(w, "abc", offs) == MTS_E_ARG);
    uint64_t offs1[5] = {1, 1, 1, 1, 1};
    CHECK(mts_writer_add_batch(w, "abc", offs1) == MTS_E_ARG);
    CHECK(mts_writer_add_batch(w, "abc", NULL) == MTS_E_ARG);
    uint64_t offs2[5] = {0, 1, 1, 2, 3};
    CHECK(mts_writer_add_batch(w, NULL, offs2) == MTS_E_ARG);
    CHECK_RC(mts_writer_add_batch(w, "abc", offs2));
    /* Tagged buffers: a NULL one is rejected (a malformed one fails the
     * writer: below). */
    unsigned char tb[64];
    put_be32_test(tb, 3), put_be32_test(tb + 4, 1), tb[8] = 'd'; /* good record */
    CHECK(mts_writer_append_tagged(w, NULL, 3) == MTS_E_ARG && strstr(mts_writer_error(w), "NULL buffer"));
    CHECK_RC(mts_writer_append_tagged(w, tb, 9)); /* the good record: partition 3, "d" */
    CHECK_RC(mts_writer_append_tagged(w, NULL, 0));
    uint64_t lens[4], sums[4];
    mts_commit_result res;
    CHECK_RC(mts_writer_commit(w, lens, sums, &res));
    CHECK(res.adopted == 0 && res.data_bytes == lens[0] + lens[1] + lens[2] + lens[3]);
    CHECK(lens[1] == 0 && sums[1] == 1 && lens[0] > 0); /* empty partition: 0 bytes, Adler32 of nothing */
    /* After commit: state errors, never a crash. */
    CHECK(mts_writer_append(w, 0, "x", 1) == MTS_E_STATE);
    CHECK(mts_writer_add_batch(w, "abc", offs2) == MTS_E_STATE);
    CHECK(mts_writer_commit(w, NULL, NULL, NULL) == MTS_E_STATE);
    CHECK(mts_writer_abort(w) == MTS_E_STATE);
    mts_writer_stats st;
    CHECK_RC(mts_writer_get_stats(w, &st));
    CHECK(st.records == 2 && st.batches == 1 && st.bytes_in == 4 && st.runs == 1 && st.bytes_out == res.data_bytes);
    mts_writer_free(w);
    CHECK(dir_count(dir) == 3);
    rm_rf(dir);
    mkdir(dir, 0755);

    /* A malformed tagged buffer fails the writer at its bad header, whichever
     * the strategy and however far the writer is: the error names the
     * offset, later calls return it, and nothing is left behind. */
    for (int strat = 0; strat < 2; strat++) {
        for (int bad = 0; bad < 3; bad++) {
            w = make(dir, 4, (mts_strategy)strat);
            CHECK_RC(mts_writer_append(w, 2, "zz", 2));
            put_be32_test(tb, 3), put_be32_test(tb + 4, 1), tb[8] = 'd';  /* good record */
            put_be32_test(tb + 9, 1), put_be32_test(tb + 13, 5);          /* claims 5, has 2 */
            tb[17] = 'x', tb[18] = 'y';
            size_t len = 19;
            const char *why = "offset 9 claims 5";
            int code = MTS_E_ARG;
            if (bad == 1) len = 12, why = "offset 9 is cut off";
            if (bad == 2) {
                put_be32_test(tb + 9, 4), put_be32_test(tb + 13, 0); /* partition 4 of 4 */
                len = 17, why = "offset 9: partition 4", code = MTS_E_RANGE;
            }
            CHECK(mts_writer_append_tagged(w, tb, len) == code);
            CHECK(strstr(mts_writer_error(w), why) != NULL);
            CHECK(mts_writer_append(w, 0, "x", 1) == code);
            CHECK(mts_writer_append_tagged(w, tb, 9) == code);
            CHECK(mts_writer_commit(w, NULL, NULL, NULL) == code);
            mts_writer_free(w);
            CHECK(dir_count(dir) == 0);
        }
    }

    /* Abort removes everything; later calls say so. */
    for (int strat = 0; strat < 2; strat++) {
        w = make(dir, 3, (mts_strategy)strat);
        CHECK_RC(mts_writer_append(w, 2, "zz", 2));
        CHECK_RC(mts_writer_append(w, 0, "yy", 2));
        CHECK_RC(mts_writer_abort(w));
        CHECK_RC(mts_writer_abort(w)); /* idempotent */
        CHECK(mts_writer_append(w, 0, "x", 1) == MTS_E_ABORTED);
        CHECK(mts_writer_commit(w, NULL, NULL, NULL) == MTS_E_ABORTED);
        mts_writer_free(w);
        CHECK(dir_count(dir) == 0);
        /* Free without commit aborts. */
        w = make(dir, 3, (mts_strategy)strat);
        CHECK_RC(mts_writer_append(w, 1, "zz", 2));
        mts_writer_free(w);
        CHECK(dir_count(dir) == 0);
    }
    mts_writer_free(NULL);

    /* add_batch_async: a rejected batch is never given back, an empty one at
     * once, any other by abort (or commit) at the latest, for both
     * strategies, streamed and held. */
    for (int strat = 0; strat < 2; strat++) {
        w = make(dir, 4, (mts_strategy)strat);
        uint32_t back = 0;
        uint64_t bad[5] = {0, 2, 1, 3, 3}, none[5] = {0, 0, 0, 0, 0};
        size_t per = 300u << 10;
        uint64_t big[5] = {0, per, 2 * per, 3 * per, 4 * per};
        unsigned char *bytes = malloc(4 * per);
        for (size_t i = 0; i < 4 * per; i++) bytes[i] = (unsigned char)(i / 7);
        CHECK(mts_writer_add_batch_async(w, "abc", bad, test_count_given_back, &back) == MTS_E_ARG);
        CHECK(mts_writer_add_batch_async(w, NULL, big, test_count_given_back, &back) == MTS_E_ARG && back == 0);
        CHECK(strstr(mts_writer_error(w), "add_batch_async") != NULL);
        CHECK_RC(mts_writer_add_batch_async(w, NULL, none, test_count_given_back, &back));
        CHECK(back == 1);
        CHECK_RC(mts_writer_add_batch_async(w, bytes, big, test_count_given_back, &back));
        CHECK_RC(mts_writer_add_batch_async(w, bytes, big, test_count_given_back, &back)); /* out of order: held */
        CHECK_RC(mts_writer_add_batch_async(w, bytes, big, NULL, NULL));
        CHECK_RC(mts_writer_abort(w));
        CHECK(__atomic_load_n(&back, __ATOMIC_RELAXED) == 3);
        CHECK(mts_writer_add_batch_async(w, bytes, big, test_count_given_back, &back) == MTS_E_ABORTED);
        mts_writer_free(w);
        CHECK(back == 3 && dir_count(dir) == 0);
        w = make(dir, 4, (mts_strategy)strat);
        back = 0;
        CHECK_RC(mts_writer_add_batch_async(w, bytes, big, test_count_given_back, &back));
        CHECK_RC(mts_writer_add_batch(w, bytes, big));
        CHECK_RC(mts_writer_add_batch_async(w, bytes, big, test_count_given_back, &back));
        uint64_t lens4[4];
        CHECK_RC(mts_writer_commit(w, lens4, NULL, NULL));
        CHECK(__atomic_load_n(&back, __ATOMIC_RELAXED) == 2 && lens4[3] > 0);
        mts_writer_stats bst;
        CHECK_RC(mts_writer_get_stats(w, &bst));
        CHECK(bst.batches == 3 && bst.bytes_in == 3 * 4 * per && bst.runs == 3);
        mts_writer_free(w);
        CHECK(dir_count(dir) == 3);
        rm_rf(dir);
        mkdir(dir, 0755);
        free(bytes);
    }

    /* add_batch_async, streaming: a first batch of at most a quarter of the
     * budget is held (the batches after it need no run file: every byte is
     * written once, nothing merged from one); a larger one streams into the
     * data file, which becomes the run file when a second batch comes (its
     * bytes merged back at the end). Both read back as given. */
    {
        const size_t per = 300u << 10; /* four partitions: 1.2 MiB a batch */
        uint64_t four[5] = {0, per, 2 * per, 3 * per, 4 * per};
        unsigned char *bytes = malloc(4 * per);
        for (size_t i = 0; i < 4 * per; i++) bytes[i] = (unsigned char)(i / 7 + i % 13);
        uint64_t lens_held[4], lens_streamed[4];
        for (int large = 0; large < 2; large++) {
            o = test_options(dir, 4);
            o.max_bytes_in_flight = large ? 4u << 20 : 64u << 20; /* a batch above or below a quarter */
            o.map_id = large;
            w = test_writer(&o);
            uint32_t back = 0;
            CHECK_RC(mts_writer_add_batch_async(w, bytes, four, test_count_given_back, &back));
            CHECK_RC(mts_writer_add_batch_async(w, bytes, four, test_count_given_back, &back));
            CHECK_RC(mts_writer_commit(w, large ? lens_streamed : lens_held, NULL, NULL));
            mts_writer_stats ws;
            CHECK_RC(mts_writer_get_stats(w, &ws));
            CHECK(__atomic_load_n(&back, __ATOMIC_RELAXED) == 2 && ws.runs == 2 && ws.bytes_spilled == 0);
            CHECK(large ? ws.bytes_merged > 0 : ws.bytes_merged == 0);
            mts_writer_free(w);
        }
        CHECK(lens_held[3] > 0 && lens_streamed[3] > 0); /* not equal: jobs are cut to each budget */
        const uint32_t twice[2][4] = {{2, 2, 2, 2}, {2, 2, 2, 2}};
        check_maps(dir, bytes, per, 2, twice);
        free(bytes);
        rm_rf(dir);
        mkdir(dir, 0755);
    }

    /* add_batch, streaming: the first batch streams into the data file,
     * which becomes the run file when later input goes back in partition
     * order, by batch (maps 0-2, with a budget above and below four times a
     * batch; map 2 first streams two batches in order) or by record (map 3);
     * its bytes are merged back at the end. Records in partition order after
     * it stream on (map 4: nothing merged). Every map reads back as given. */
    {
        const size_t per = 300u << 10;
        uint64_t four[5] = {0, per, 2 * per, 3 * per, 4 * per};
        uint64_t low[5] = {0, per, 2 * per, 2 * per, 2 * per};   /* partitions 0 and 1 */
        uint64_t high[5] = {0, 0, 0, per, 2 * per};              /* 2 and 3, from bytes + 2 per */
        uint64_t three[5] = {0, per, 2 * per, 3 * per, 3 * per}; /* 0, 1 and 2 */
        const uint32_t times[5][4] = {{2, 2, 2, 2}, {2, 2, 2, 2}, {2, 2, 2, 2}, {2, 2, 2, 2}, {1, 1, 1, 3}};
        unsigned char *bytes = malloc(4 * per);
        for (size_t i = 0; i < 4 * per; i++) bytes[i] = (unsigned char)(i / 5 + i % 11);
        for (uint32_t map = 0; map < 5; map++) {
            o = test_options(dir, 4);
            o.max_bytes_in_flight = map == 1 ? 4u << 20 : 64u << 20; /* a batch above or below a quarter */
            o.map_id = map;
            w = test_writer(&o);
            if (map == 2) {
                CHECK_RC(mts_writer_add_batch(w, bytes, low));
                CHECK_RC(mts_writer_add_batch(w, bytes + 2 * per, high));
                CHECK_RC(mts_writer_add_batch(w, bytes, four));
            } else if (map == 4) {
                CHECK_RC(mts_writer_add_batch(w, bytes, three));
                for (int k = 0; k < 3; k++) CHECK_RC(mts_writer_append(w, 3, bytes + 3 * per, per));
            } else {
                CHECK_RC(mts_writer_add_batch(w, bytes, four));
                if (map == 3)
                    for (uint32_t p = 0; p < 4; p++) CHECK_RC(mts_writer_append(w, p, bytes + p * per, per));
                else
                    CHECK_RC(mts_writer_add_batch(w, bytes, four));
            }
            CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
            mts_writer_stats ws;
            CHECK_RC(mts_writer_get_stats(w, &ws));
            CHECK(ws.bytes_spilled == 0);
            CHECK(map == 4 ? ws.bytes_merged == 0 : ws.bytes_merged > 0);
            mts_writer_free(w);
        }
        check_maps(dir, bytes, per, 5, times);
        free(bytes);
        rm_rf(dir);
        mkdir(dir, 0755);
    }

    /* A zero-record task commits an all-empty output. */
    w = make(dir, 5, MTS_STRATEGY_STREAMING);
    uint64_t lens5[5] = {9, 9, 9, 9, 9};
    CHECK_RC(mts_writer_commit(w, lens5, NULL, &res));
    CHECK(res.data_bytes == 0 && lens5[0] == 0 && lens5[4] == 0 && dir_count(dir) == 3);
    mts_writer_free(w);

    /* data_path: the caller names the data file and commits (Spark's resolver). */
    rm_rf(dir);
    mkdir(dir, 0755);
    char dpath[600];
    snprintf(dpath, sizeof dpath, "%s/shuffle_2_7_0.data.tmp-from-spark", dir);
    mts_writer_options_init(&o);
    o.data_path = dpath; /* dir left NULL: the path's directory */
    o.num_partitions = 3;
    CHECK_RC(mts_writer_create(&o, &w, err, sizeof err));
    CHECK_RC(mts_writer_append(w, 2, "abc", 3));
    CHECK_RC(mts_writer_append(w, 0, "de", 2));
    CHECK(mts_writer_commit(w, NULL, NULL, NULL) == MTS_E_STATE && strstr(mts_writer_error(w), "finish"));
    uint64_t l3[3], c3[3];
    CHECK_RC(mts_writer_finish(w, l3, c3));
    CHECK(mts_writer_finish(w, l3, c3) == MTS_E_STATE);
    mts_writer_free(w);
    size_t dlen;
    unsigned char *dbytes = read_file(dpath, &dlen);
    CHECK(dbytes && dlen == l3[0] + l3[1] + l3[2] && l3[1] == 0 && c3[1] == 1);
    CHECK(mts_checksum_update(MTS_CHECKSUM_ADLER32, 1, dbytes, l3[0]) == c3[0]);
    free(dbytes);
    CHECK(dir_count(dir) == 1); /* only the data file: no index, no checksum file */
    /* aborted or freed without finish: the data file goes too */
    CHECK_RC(mts_writer_create(&o, &w, err, sizeof err));
    CHECK_RC(mts_writer_append(w, 1, "x", 1));
    mts_writer_free(w);
    CHECK(dir_count(dir) == 0);
    /* finish is only for data_path writers */
    w = make(dir, 2, MTS_STRATEGY_STREAMING);
    CHECK(mts_writer_finish(w, NULL, NULL) == MTS_E_STATE);
    mts_writer_free(w);
    CHECK(dir_count(dir) == 0);

    /* The reader's options and misuse: rejected with a message, nothing opened. */
    {
        mts_reader_options ro;
        mts_reader_options_init(&ro);
        CHECK(ro.codec == MTS_CODEC_AUTO && ro.threads == 2 && ro.max_bytes_in_flight == (64u << 20) &&
              ro.piece_size == (1u << 20) && ro.verify_checksums == MTS_VERIFY_AUTO);
        mts_reader *r = (mts_reader *)1;
        struct { void (*set)(mts_reader_options *); const char *says; } bad[] = {
            {set_reader_codec_7, "unknown codec"},
            {set_reader_threads_0, "threads"},
            {set_reader_verify_9, "verify_checksums"},
            {set_reader_piece_small, "piece_size"},
            {set_reader_budget_small, "max_bytes_in_flight"},
            {set_reader_reserved, "reserved"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            mts_reader_options_init(&ro);
            bad[i].set(&ro);
            err[0] = 0;
            CHECK(mts_reader_open_blocks(&ro, &r, err, sizeof err) == MTS_E_ARG && r == NULL);
            if (!strstr(err, bad[i].says)) fprintf(stderr, "reader option %zu: '%s'\n", i, err);
            CHECK(strstr(err, bad[i].says) != NULL);
            r = (mts_reader *)1;
        }
        /* A piece larger than the engine's whole budget. */
        mts_engine *e;
        CHECK_RC(mts_engine_create(1, 1u << 20, &e, err, sizeof err));
        mts_reader_options_init(&ro);
        ro.engine = e;
        ro.piece_size = 2u << 20;
        CHECK(mts_reader_open_blocks(&ro, &r, err, sizeof err) == MTS_E_ARG && strstr(err, "engine's budget"));
        mts_engine_free(e);
        mts_reader_options_init(&ro);
        const char *paths[2] = {NULL, "x"};
        CHECK(mts_reader_open(&ro, paths, 2, &r, err, sizeof err) == MTS_E_ARG && strstr(err, "NULL path 0"));
        CHECK(mts_reader_open_dir(&ro, dir, 0, &r, err, sizeof err) == -ENOENT && strstr(err, "no map outputs"));
        /* A map-output reader takes no blocks; a block reader no NULL bytes. */
        w = make(dir, 3, MTS_STRATEGY_STREAMING);
        CHECK_RC(mts_writer_append(w, 1, "abcdef", 6));
        uint64_t lr[3];
        CHECK_RC(mts_writer_commit(w, lr, NULL, NULL));
        mts_writer_free(w);
        CHECK_RC(mts_reader_open_dir(&ro, dir, 0, &r, err, sizeof err));
        CHECK(mts_reader_add_block(r, "x", 1, 0) == MTS_E_ARG && strstr(mts_reader_error(r), "not blocks"));
        CHECK(mts_reader_num_maps(r) == 1 && mts_reader_num_partitions(r) == 3);
        CHECK(mts_reader_map_path(r, 0) && strstr(mts_reader_map_path(r, 0), "shuffle_0_0_0.data"));
        CHECK(mts_reader_map_path(r, 1) == NULL && mts_reader_map_path(NULL, 0) == NULL);
        CHECK(mts_reader_segment_length(r, 0, 0, 3) == lr[0] + lr[1] + lr[2] && lr[1] > 0);
        CHECK(mts_reader_segment_length(r, 0, 1, 2) == lr[1] && mts_reader_segment_length(r, 0, 2, 2) == 0);
        CHECK(mts_reader_segment_length(r, 0, 2, 1) == 0 && mts_reader_segment_length(r, 0, 0, 4) == 0 &&
              mts_reader_segment_length(r, 1, 0, 1) == 0);
        mts_reader_free(r);
        /* Data whose lz4 blocks are larger than the reading engine's whole
         * budget: the read fails with the partition, the block's offset and
         * the budget named, and gives back all it held. */
        {
            mts_writer_options wo = test_options(dir, 2);
            wo.shuffle_id = 1;
            wo.block_size = 2u << 20;
            w = test_writer(&wo);
            size_t big_len = 3u << 20;
            unsigned char *big = malloc(big_len);
            uint64_t s = 0x9e3779b97f4a7c15ull;
            for (size_t i = 0; i < big_len; i++) big[i] = (unsigned char)(rng_next(&s) >> 56);
            CHECK_RC(mts_writer_append(w, 1, big, big_len));
            CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
            mts_writer_free(w);
            free(big);
            CHECK_RC(mts_engine_create(1, 1u << 20, &e, err, sizeof err));
            mts_reader_options_init(&ro);
            ro.engine = e;
            ro.codec = MTS_CODEC_LZ4;
            ro.piece_size = 256u << 10;
            CHECK_RC(mts_reader_open_dir(&ro, dir, 1, &r, err, sizeof err));
            mts_read_piece pc;
            int rc = mts_reader_start(r, 0, 2);
            while (rc >= 0 && (rc = mts_reader_next(r, &pc)) == 1) {}
            CHECK(rc == MTS_E_OVERFLOW);
            const char *m = mts_reader_error(r);
            if (!strstr(m, "partition 1") || !strstr(m, "exceeds the budget of 1048576")) fprintf(stderr, "%s\n", m);
            CHECK(strstr(m, "partition 1") && strstr(m, "exceeds the budget of 1048576") && strstr(m, "offset"));
            mts_reader_free(r);
            mts_engine_stats es;
            CHECK_RC(mts_engine_get_stats(e, &es));
            CHECK(es.bytes_held == es.bytes_cached && es.clients == 0);
            mts_engine_free(e);
            mts_reader_options_init(&ro);
        }
        CHECK_RC(mts_reader_open_blocks(&ro, &r, err, sizeof err));
        CHECK(mts_reader_add_block(r, NULL, 5, 4) == MTS_E_ARG && strstr(mts_reader_error(r), "block 4: NULL"));
        CHECK(mts_reader_add_block(NULL, "x", 1, 0) == MTS_E_ARG);
        mts_reader_free(r);
        rm_rf(dir);
        mkdir(dir, 0755);
    }

    /* Names. */
    char name[64];
    CHECK(mts_output_name(name, sizeof name, 3, 123456789012LL, 'c', MTS_CHECKSUM_CRC32C) > 0);
    CHECK(!strcmp(name, "shuffle_3_123456789012_0.checksum.CRC32C"));
    CHECK(mts_output_name(name, sizeof name, 3, 1, 'c', MTS_CHECKSUM_NONE) == MTS_E_ARG);
    CHECK(mts_output_name(name, 8, 3, 1, 'd', MTS_CHECKSUM_NONE) == MTS_E_ARG);
    CHECK(!strcmp(mts_strerror(-ENOSPC), strerror(ENOSPC)));
    CHECK(strcmp(mts_strerror(MTS_E_RANGE), "unknown error") != 0);
    rm_rf(dir);
    free(dir);
    TEST_DONE("test_api");
}

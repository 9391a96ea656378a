/* Damaged map outputs are always caught by the reader, with the file,
 * partition and offset named: random byte flips in the data (caught by the
 * checksum file), flips in compressed streams with checksums off (caught by
 * lz4-java's per-block XXH32 and zstd's frame checks), truncation at random
 * offsets, swapped or altered index entries, and streams damaged before
 * their checksums were taken (told apart from damage after the write). */
#include <sys/mman.h>
#include <time.h>

#include "testutil.h"

static char dir[600], data[800], idx[800], sum[800];

static void make_output(uint64_t *s, mts_codec codec, uint32_t n)
{
    mts_writer_options o = test_options(dir, n);
    o.codec = codec;
    mts_writer *w = test_writer(&o);
    unsigned char rec[3000];
    for (int i = 0; i < 2000; i++) {
        size_t len = 1 + rng_below(s, sizeof rec);
        for (size_t k = 0; k < len; k++) rec[k] = (unsigned char)(k / 7 + i);
        CHECK_RC(mts_writer_append(w, (uint32_t)(i * n / 2000), rec, len));
    }
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    mts_writer_free(w);
}

static unsigned char *orig_data, *orig_idx;
static size_t data_len, idx_len;

static void restore(void)
{
    write_file(data, orig_data, data_len);
    write_file(idx, orig_idx, idx_len);
}

/* FNV-1a of every byte read, in order (read_all's digest of a whole read). */
static uint64_t digest;

static void digest_add(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) digest = (digest ^ p[i]) * 0x100000001b3ull;
}

/* Opens and reads every partition alone; returns the first error (0 if none)
 * and its message in msg; `digest` covers every byte handed out. */
static int read_all(int verify, mts_codec codec, char *msg, size_t len)
{
    digest = 0xcbf29ce484222325ull;
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.verify_checksums = verify;
    ro.codec = codec;
    const char *paths[1] = {data};
    mts_reader *r;
    int rc = mts_reader_open(&ro, paths, 1, &r, msg, len);
    if (rc < 0) return rc;
    for (uint32_t p = 0; p < mts_reader_num_partitions(r) && rc >= 0; p++) {
        rc = mts_reader_start(r, p, p + 1);
        mts_read_piece pc;
        while (rc >= 0 && (rc = mts_reader_next(r, &pc)) == 1) digest_add(pc.data, pc.len);
        if (rc < 0) snprintf(msg, len, "%s", mts_reader_error(r));
    }
    mts_reader_free(r);
    return rc < 0 ? rc : 0;
}

static uint32_t partition_of(uint64_t off, uint32_t n)
{
    uint32_t p = 0;
    while (p + 1 < n && be64_at(orig_idx + 8 * (p + 1)) <= off) p++;
    return p;
}

/* A byte of partition [a, b)'s streams that the codec's own checks cover: an
 * lz4 block's payload (past the first block's header, before the end block),
 * a zstd frame's magic. */
static uint64_t stream_flip_offset(mts_codec codec, uint64_t a, uint64_t b, uint64_t *s)
{
    return codec == MTS_CODEC_LZ4 ? a + 21 + rng_below(s, b - a - 42) : a + rng_below(s, 4);
}

static void flip(uint64_t off, unsigned char mask)
{
    int fd = open(data, O_RDWR);
    unsigned char b;
    CHECK(pread(fd, &b, 1, (off_t)off) == 1);
    b ^= mask;
    CHECK(pwrite(fd, &b, 1, (off_t)off) == 1);
    close(fd);
}

/* A block reader that fails on a damaged block: by the time next() reports
 * it, no unit reads the blocks handed over after it any more (the caller may
 * free them then). The later blocks' units decode large pieces, for a few
 * milliseconds, and the caller gives the workers time to fail the first
 * block and begin those before it asks: they are still decoding when the
 * failure is reported. The blocks are made unreadable the moment next()
 * returns; a unit still reading one would crash the test. */
static int blocks_after_failure(uint64_t *s)
{
    enum { LATER = 3, ROUNDS = 25 };
    const size_t raw_len = 24u << 20;
    unsigned char *raw = malloc(raw_len);
    CHECK(raw != NULL);
    for (size_t k = 0; k < raw_len; k++) raw[k] = (unsigned char)(k / 11 + rng_below(s, 4));
    mts_cctx *c;
    CHECK_RC(mts_cctx_create(MTS_CODEC_LZ4, 1, 32768, &c));
    size_t cap = mts_cctx_bound(c, raw_len), big_len, bad_len;
    unsigned char *big = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char bad[4096];
    CHECK(big != MAP_FAILED);
    CHECK_RC(mts_cctx_compress(c, raw, raw_len, big, cap, &big_len));
    CHECK_RC(mts_cctx_compress(c, raw, 2000, bad, sizeof bad, &bad_len));
    mts_cctx_free(c);
    free(raw);
    bad[21 + rng_below(s, bad_len - 21 - 21)] ^= 0x40; /* in the first block's payload */
    size_t third = big_len / LATER;
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.threads = 2;
    ro.piece_size = 8u << 20; /* a later block's unit decodes for a few milliseconds */
    char err[600];
    mts_reader *r;
    CHECK_RC(mts_reader_open_blocks(&ro, &r, err, sizeof err));
    int failed = 0;
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(mprotect(big, cap, PROT_READ | PROT_WRITE) == 0);
        CHECK_RC(mts_reader_add_block(r, bad, bad_len, 0));
        /* The later blocks are each a whole lz4 stream's worth of blocks: cut at
         * block boundaries, they would not decode on their own, but they fail
         * only once reached, which the damaged first block prevents. */
        for (uint32_t k = 0; k < LATER; k++) CHECK_RC(mts_reader_add_block(r, big + k * third, third, k + 1));
        /* Time for the workers to fail the first block and begin the later ones. */
        nanosleep(&(struct timespec){0, 500 * 1000}, NULL);
        mts_read_piece pc;
        int rc;
        while ((rc = mts_reader_next(r, &pc)) == 1) CHECK(pc.range == 0);
        CHECK(mprotect(big, cap, PROT_NONE) == 0); /* as if the caller freed them */
        if (rc != MTS_E_CORRUPT || !strstr(mts_reader_error(r), "block 0")) {
            fprintf(stderr, "damaged block: rc %d, %s\n", rc, mts_reader_error(r));
            CHECK(0);
        }
        failed++;
    }
    mts_reader_free(r);
    munmap(big, cap);
    return failed;
}

int main(void)
{
    test_init_seed("test_corrupt");
    uint64_t s = test_seed;
    char *made = test_tmpdir("corrupt");
    snprintf(dir, sizeof dir, "%s", made);
    free(made);
    snprintf(data, sizeof data, "%s/shuffle_0_0_0.data", dir);
    snprintf(idx, sizeof idx, "%s/shuffle_0_0_0.index", dir);
    snprintf(sum, sizeof sum, "%s/shuffle_0_0_0.checksum.ADLER32", dir);
    const mts_codec codecs[] = {MTS_CODEC_LZ4, MTS_CODEC_ZSTD, MTS_CODEC_NONE};
    char msg[800];
    int detected = 0, unseen = 0; /* unseen: lz4 flips that read the clean bytes (MTS_VERIFY_AUTO) */
    for (int c = 0; c < 3; c++) {
        uint32_t n = 37;
        make_output(&s, codecs[c], n);
        orig_data = read_file(data, &data_len);
        orig_idx = read_file(idx, &idx_len);
        CHECK(read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg) == 0);
        const uint64_t clean = digest;
        CHECK(read_all(MTS_VERIFY_AUTO, codecs[c], msg, sizeof msg) == 0 && digest == clean);
        CHECK(read_all(MTS_VERIFY_AUTO + 1, codecs[c], msg, sizeof msg) == MTS_E_ARG && strstr(msg, "verify_checksums 3"));
        CHECK(read_all(-1, codecs[c], msg, sizeof msg) == MTS_E_ARG && strstr(msg, "verify_checksums -1"));

        /* Random byte flips: the checksum names the partition. */
        for (int t = 0; t < 60; t++) {
            uint64_t off = rng_below(&s, data_len);
            flip(off, (unsigned char)(1u << rng_below(&s, 8)));
            int rc = read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg);
            char want[64];
            snprintf(want, sizeof want, "partition %u ", partition_of(off, n));
            if (rc != MTS_E_CORRUPT || !strstr(msg, data) || !strstr(msg, want) || !strstr(msg, "offset")) {
                fprintf(stderr, "flip at %llu: rc %d, %s\n", (unsigned long long)off, rc, msg);
                CHECK(0);
            }
            detected++;
            restore();
        }

        /* The default (MTS_VERIFY_AUTO), random byte flips: zstd and none
         * are checked against the checksum file first, as above; lz4's block
         * checks find the damage and the checksum file then tells that the
         * stored bytes changed. A flip that decodes to the same bytes (a
         * level bit of a block header, which only bounds the block's size)
         * must read exactly the clean bytes; anything else must fail. */
        int unseen_here = unseen;
        for (int t = 0; t < 60; t++) {
            uint64_t off = rng_below(&s, data_len);
            flip(off, (unsigned char)(1u << rng_below(&s, 8)));
            int rc = read_all(MTS_VERIFY_AUTO, codecs[c], msg, sizeof msg);
            char want[64];
            snprintf(want, sizeof want, "partition %u", partition_of(off, n));
            const char *why = codecs[c] == MTS_CODEC_LZ4 ? "changed after they were written" : "checksum";
            if (rc == 0 && codecs[c] == MTS_CODEC_LZ4 && digest == clean) {
                unseen++;
            } else if (rc != MTS_E_CORRUPT || !strstr(msg, data) || !strstr(msg, want) || !strstr(msg, why)) {
                fprintf(stderr, "default-mode flip at %llu: rc %d, %s\n", (unsigned long long)off, rc, msg);
                CHECK(0);
            } else {
                detected++;
            }
            restore();
        }
        CHECK(unseen - unseen_here <= 3);

        /* Without the checksum file, lz4's per-block XXH32 still catches a
         * flip in any block's payload; zstd's frame checks catch a damaged
         * frame header. The message names the partition and offset. */
        if (codecs[c] != MTS_CODEC_NONE) {
            for (int t = 0; t < 30; t++) {
                uint32_t p = (uint32_t)rng_below(&s, n);
                uint64_t a = be64_at(orig_idx + 8 * p), b = be64_at(orig_idx + 8 * (p + 1));
                if (b - a < 40) continue;
                uint64_t off = stream_flip_offset(codecs[c], a, b, &s);
                flip(off, 0x10);
                int rc = read_all(MTS_VERIFY_NEVER, codecs[c], msg, sizeof msg);
                char want[64];
                snprintf(want, sizeof want, "partition %u", p);
                if (rc != MTS_E_CORRUPT || !strstr(msg, want) || !strstr(msg, "corrupt")) {
                    fprintf(stderr, "codec flip at %llu (partition %u): rc %d, %s\n", (unsigned long long)off, p, rc, msg);
                    CHECK(0);
                }
                detected++;
                restore();
            }
        }

        /* Damaged before the checksum was taken (a writer's fault, not the
         * storage's): a flip in a compressed stream, and the checksum file
         * rewritten to match the damaged bytes. The codec catches it and the
         * reader tells it apart from damage after the write, as Spark's
         * reducer does. */
        if (codecs[c] != MTS_CODEC_NONE) {
            size_t sum_len;
            unsigned char *orig_sum = read_file(sum, &sum_len);
            CHECK(orig_sum && sum_len == 8u * n);
            int tried = 0;
            for (int t = 0; t < 40 && tried < 10; t++) {
                uint32_t p = (uint32_t)rng_below(&s, n);
                uint64_t a = be64_at(orig_idx + 8 * p), b = be64_at(orig_idx + 8 * (p + 1));
                if (b - a < 40) continue;
                uint64_t off = stream_flip_offset(codecs[c], a, b, &s);
                flip(off, 0x10);
                size_t now_len;
                unsigned char *now = read_file(data, &now_len);
                CHECK(now && now_len == data_len);
                uint32_t v = mts_checksum_update(MTS_CHECKSUM_ADLER32, mts_checksum_initial(MTS_CHECKSUM_ADLER32),
                                                 now + a, (size_t)(b - a));
                free(now);
                unsigned char *sums = malloc(sum_len);
                memcpy(sums, orig_sum, sum_len);
                put_be64_test(sums + 8 * p, v);
                write_file(sum, sums, sum_len);
                free(sums);
                int rc = read_all(MTS_VERIFY_AUTO, codecs[c], msg, sizeof msg);
                char want[64];
                snprintf(want, sizeof want, "partition %u", p);
                if (rc != MTS_E_CORRUPT || !strstr(msg, want) || !strstr(msg, "match their ADLER32 checksum") ||
                    !strstr(msg, "before it was taken")) {
                    fprintf(stderr, "flip at %llu under a matching checksum (partition %u): rc %d, %s\n",
                            (unsigned long long)off, p, rc, msg);
                    CHECK(0);
                }
                detected++;
                tried++;
                restore();
                write_file(sum, orig_sum, sum_len);
            }
            CHECK(tried == 10);
            free(orig_sum);
        }

        /* Truncation at a random offset: the data no longer matches its index. */
        for (int t = 0; t < 20; t++) {
            CHECK(truncate(data, (off_t)rng_below(&s, data_len)) == 0);
            CHECK(read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg) == MTS_E_CORRUPT && strstr(msg, data) && (strstr(msg, "past the end") || strstr(msg, "index ends at")));
            detected++;
            restore();
        }
        /* A truncated index. */
        CHECK(truncate(idx, (off_t)(idx_len - 8)) == 0);
        CHECK(read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg) == MTS_E_CORRUPT);
        restore();

        /* Swapped index entries: offsets out of order. */
        for (int t = 0; t < 20; t++) {
            uint32_t i = 1 + (uint32_t)rng_below(&s, n - 1), j = i + 1 + (uint32_t)rng_below(&s, n - i);
            if (be64_at(orig_idx + 8 * i) == be64_at(orig_idx + 8 * j)) continue;
            unsigned char *bad = malloc(idx_len);
            memcpy(bad, orig_idx, idx_len);
            memcpy(bad + 8 * i, orig_idx + 8 * j, 8);
            memcpy(bad + 8 * j, orig_idx + 8 * i, 8);
            write_file(idx, bad, idx_len);
            free(bad);
            int rc = read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg);
            CHECK(rc == MTS_E_CORRUPT && strstr(msg, "index") && strstr(msg, "offset"));
            detected++;
            restore();
        }
        /* An interior offset moved (still monotonic): two partitions' bytes
         * shift; their checksums catch it. */
        for (uint32_t i = 1; i < n; i++) {
            uint64_t a = be64_at(orig_idx + 8 * (i - 1)), v = be64_at(orig_idx + 8 * i), b = be64_at(orig_idx + 8 * (i + 1));
            if (v - a < 2 || b == v) continue;
            unsigned char *bad = malloc(idx_len);
            memcpy(bad, orig_idx, idx_len);
            put_be64_test(bad + 8 * i, v - 1);
            write_file(idx, bad, idx_len);
            free(bad);
            CHECK(read_all(MTS_VERIFY_ALWAYS, codecs[c], msg, sizeof msg) == MTS_E_CORRUPT);
            detected++;
            restore();
            break;
        }
        free(orig_data);
        free(orig_idx);
        rm_rf(dir);
        mkdir(dir, 0755);
    }
    int block_rounds = blocks_after_failure(&s);
    printf("test_corrupt: %d corruptions, all detected; %d more flips (lz4, default mode) read the clean bytes; "
           "%d damaged blocks ended their reads with no unit left reading\n", detected, unseen, block_rounds);
    rm_rf(dir);
    TEST_DONE("test_corrupt");
}

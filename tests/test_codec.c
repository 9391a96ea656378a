#include <time.h>
#include <xxhash.h>

#include "codec.h"
#include "internal.h"
#include "testutil.h"
#include "xxh32.h"

static size_t compress(const codec_params *p, const void *src, size_t n, unsigned char **out)
{
    const codec_vtable *v = codec_get(p->id);
    void *ctx = NULL;
    CHECK_RC(v->ctx_new(p, &ctx));
    size_t cap = v->bound(p, n), len = 0;
    *out = malloc(cap + 1);
    CHECK_RC(v->compress(p, ctx, src, n, *out, cap, &len));
    CHECK(len <= cap);
    v->ctx_free(ctx);
    return len;
}

static void fill(uint64_t *s, unsigned char *b, size_t n, int compressible)
{
    for (size_t i = 0; i < n; i++) b[i] = compressible ? (unsigned char)("shuffle"[i % 7] + (rng_below(s, 50) == 0)) : (unsigned char)rng_next(s);
}

int main(void)
{
    test_init_seed("test_codec");
    uint64_t s = test_seed;

    /* lz4-java framing, byte for byte. */
    codec_params lz = {MTS_CODEC_LZ4, 1, 32768};
    unsigned char text[100000];
    fill(&s, text, sizeof text, 1);
    unsigned char *out;
    size_t n = compress(&lz, text, 40000, &out);
    CHECK(!memcmp(out, "LZ4Block", 8));
    CHECK(out[8] == 0x25); /* LZ4 method | level 5 for 32 KiB */
    uint32_t clen = get_le32(out + 9), olen = get_le32(out + 13);
    CHECK(olen == 32768 && clen < olen);
    CHECK(get_le32(out + 17) == (XXH32(text, 32768, 0x9747B28C) & 0x0FFFFFFF));
    /* The stream ends with an empty raw block: token 0x15, lengths and check 0. */
    const unsigned char *end = out + n - 21;
    CHECK(!memcmp(end, "LZ4Block", 8) && end[8] == 0x15);
    for (int i = 9; i < 21; i++) CHECK(end[i] == 0);
    free(out);

    /* Incompressible input is stored raw. */
    unsigned char noise[5000];
    fill(&s, noise, sizeof noise, 0);
    n = compress(&lz, noise, sizeof noise, &out);
    CHECK(out[8] == 0x15 && get_le32(out + 9) == 5000 && get_le32(out + 13) == 5000);
    CHECK(!memcmp(out + 21, noise, 5000) && n == 21 + 5000 + 21);
    free(out);

    /* Levels follow ceil(log2(block size)) - 10, floored at 0. */
    const uint32_t sizes[] = {64, 1000, 1024, 65536, 100000, 4u << 20};
    const unsigned levels[] = {0, 0, 0, 6, 7, 12};
    for (int i = 0; i < 6; i++) {
        codec_params q = {MTS_CODEC_LZ4, 1, sizes[i]};
        n = compress(&q, text, 10, &out);
        CHECK((out[8] & 0x0F) == levels[i]);
        free(out);
    }

    /* Round trips of all codecs over random sizes and block sizes, and the
     * concatenation of two streams decoding as their bytes joined. */
    const mts_codec ids[] = {MTS_CODEC_NONE, MTS_CODEC_LZ4, MTS_CODEC_ZSTD};
    for (int t = 0; t < 120; t++) {
        codec_params p = {ids[t % 3], 1 + (int)rng_below(&s, 5), 64u << rng_below(&s, 12)};
        size_t la = 1 + rng_below(&s, sizeof text - 1), lb = 1 + rng_below(&s, 3000);
        unsigned char *a, *b;
        size_t na = compress(&p, text, la, &a), nb = compress(&p, noise, lb, &b);
        unsigned char *joined = malloc(na + nb);
        memcpy(joined, a, na);
        memcpy(joined + na, b, nb);
        sinkbuf got = {0};
        CHECK_RC(codec_get(p.id)->decode(joined, na + nb, sink, &got, NULL));
        CHECK(got.len == la + lb && !memcmp(got.buf, text, la) && !memcmp(got.buf + la, noise, lb));
        /* Corruption: a flipped bit in an lz4 block header's magic, method,
         * lengths or check is always caught (lengths against the level and
         * the stream, XXH32 of the content); where it leaves the lengths
         * alone, at the first block. (A flip in a raw payload only the
         * checksum file guards.) */
        if (p.id == MTS_CODEC_LZ4) {
            for (int k = 0; k < 21; k++) {
                unsigned char *bad = malloc(na);
                memcpy(bad, a, na);
                /* Byte 8's low bits are the level: raising it leaves a valid
                 * header (lz4-java reads it the same), so flip the method. */
                bad[k] ^= (unsigned char)(1u << (k == 8 ? 4 + rng_below(&s, 4) : rng_below(&s, 8)));
                sinkbuf g2 = {0};
                uint64_t at = 99;
                CHECK(codec_get(p.id)->decode(bad, na, sink, &g2, &at) == MTS_E_CORRUPT);
                if (k < 9 || k >= 17) CHECK(at == 0);
                free(bad);
                free(g2.buf);
            }
        }
        /* Truncation inside a stream is an error for lz4 (the cut lands in
         * its 21-byte end mark) and zstd. */
        if (p.id != MTS_CODEC_NONE && na > 30) {
            sinkbuf g3 = {0};
            CHECK(codec_get(p.id)->decode(a, na - 1 - rng_below(&s, 8), sink, &g3, NULL) == MTS_E_CORRUPT);
            free(g3.buf);
        }
        free(a);
        free(b);
        free(joined);
        free(got.buf);
    }
    /* lz4: a stream cut inside its end mark or a data block is corrupt. */
    n = compress(&lz, text, 50000, &out);
    sinkbuf g = {0};
    CHECK(codec_get(MTS_CODEC_LZ4)->decode(out, n - 5, sink, &g, NULL) == MTS_E_CORRUPT);
    CHECK(codec_get(MTS_CODEC_LZ4)->decode(out, 100, sink, &g, NULL) == MTS_E_CORRUPT);
    free(out);
    free(g.buf);

    /* compress_v: pieces read in place. At multiples of piece_align() the
     * stream is byte for byte that of the joined pieces; at any other cut
     * it is still one stream of the same bytes. */
    for (int trial = 0; trial < 200; trial++) {
        codec_params p = {rng_below(&s, 2) ? MTS_CODEC_LZ4 : MTS_CODEC_NONE, 1, 64u << rng_below(&s, 10)};
        const codec_vtable *v = codec_get(p.id);
        CHECK(v->compress_v && v->piece_align(&p) > 0);
        size_t align = v->piece_align(&p), total = 0;
        int aligned = rng_below(&s, 2);
        codec_piece pc[16];
        unsigned np = 1 + (unsigned)rng_below(&s, 16);
        unsigned char *src = malloc(16 * 4 * 65536 + 1);
        for (unsigned k = 0; k < np; k++) {
            size_t len_k = aligned && k + 1 < np ? align * (1 + rng_below(&s, 4)) : rng_below(&s, 3 * align + 2);
            fill(&s, src + total, len_k, (int)rng_below(&s, 2));
            pc[k] = (codec_piece){src + total, len_k};
            total += len_k;
        }
        void *ctx = NULL;
        CHECK_RC(v->ctx_new(&p, &ctx));
        size_t cap = v->bound(&p, total) + np * v->bound(&p, 0), len = 0;
        unsigned char *pieces_out = malloc(cap);
        CHECK_RC(v->compress_v(&p, ctx, pc, np, pieces_out, cap, &len));
        v->ctx_free(ctx);
        unsigned char *joined_out;
        size_t jn = compress(&p, src, total, &joined_out);
        if (aligned) CHECK(jn == len && !memcmp(joined_out, pieces_out, len));
        sinkbuf gv = {0};
        CHECK_RC(v->decode(pieces_out, len, sink, &gv, NULL));
        CHECK(gv.len == total && (total == 0 || !memcmp(gv.buf, src, total)));
        free(gv.buf);
        free(joined_out);
        free(pieces_out);
        free(src);
    }

    /* XXH32 of several blocks: the library's value for every block, with
     * four lanes at once (where the CPU allows; up to 20 blocks, so lanes
     * take new blocks as theirs end) and one at a time; runs of equal and
     * unequal lengths, short ones, any alignment and seed. */
    unsigned char *xb = malloc(1 << 20);
    fill(&s, xb, 1 << 20, 0);
    for (int simd = 1; simd >= 0; simd--) {
        mts__xxh32_allow_simd(simd);
#if defined(__x86_64__)
        CHECK(xxh32_simd() == (simd && __builtin_cpu_supports("avx2")));
#endif
        for (int t = 0; t < 400; t++) {
            const unsigned char *bl[20];
            size_t ln[20];
            uint32_t got[20], seed = (uint32_t)rng_next(&s);
            unsigned nb = (unsigned)rng_below(&s, 21);
            size_t same = rng_below(&s, 2) ? rng_below(&s, 70000) : rng_below(&s, 40);
            for (unsigned k = 0; k < nb; k++) {
                ln[k] = rng_below(&s, 3) ? same : rng_below(&s, 70000);
                bl[k] = xb + rng_below(&s, (1 << 20) - 70000);
            }
            xxh32_many(bl, ln, nb, seed, got);
            for (unsigned k = 0; k < nb; k++) CHECK(got[k] == (uint32_t)XXH32(bl[k], ln[k], seed));
        }
    }
    mts__xxh32_allow_simd(1);
    free(xb);

    /* A bad check in any block of a group of four is found at that block, by
     * decode (the blocks before it delivered, none after) and by step (its
     * bytes before it, the position at it), whichever way checks run. */
    codec_params small = {MTS_CODEC_LZ4, 1, 1024};
    size_t sn = compress(&small, text, 10 * 1024 + 500, &out); /* 11 blocks and the end mark */
    const codec_vtable *l4 = codec_get(MTS_CODEC_LZ4);
    for (int simd = 1; simd >= 0; simd--) {
        mts__xxh32_allow_simd(simd);
        for (unsigned bad_block = 0; bad_block < 11; bad_block++) {
            unsigned char *bad = malloc(sn);
            memcpy(bad, out, sn);
            uint64_t off = 0;
            for (unsigned k = 0; k < bad_block; k++) off += 21 + get_le32(bad + off + 9);
            bad[off + 17 + rng_below(&s, 3)] ^= (unsigned char)(1u << rng_below(&s, 8));
            sinkbuf gb = {0};
            uint64_t at = 0;
            CHECK(l4->decode(bad, sn, sink, &gb, &at) == MTS_E_CORRUPT);
            CHECK(at == off && gb.len == bad_block * 1024u && (gb.len == 0 || !memcmp(gb.buf, text, gb.len)));
            free(gb.buf);
            unsigned char dst[16 * 1024];
            uint64_t pos = 0, at2 = 0;
            size_t got = 0;
            CHECK(l4->step(NULL, bad, sn, &pos, dst, sizeof dst, &got, &at2) == MTS_E_CORRUPT);
            CHECK(at2 == off && pos == off && got == bad_block * 1024u && !memcmp(dst, text, got));
            free(bad);
        }
        /* And intact, in steps of too little room for four blocks. */
        unsigned char dst[3 * 1024];
        uint64_t pos = 0, at3 = 0;
        size_t done = 0, got = 0;
        int rc;
        while ((rc = l4->step(NULL, out, sn, &pos, dst, sizeof dst, &got, &at3)) >= 0) {
            CHECK(!memcmp(dst, text + done, got));
            done += got;
            if (rc == 1) break;
        }
        CHECK(rc == 1 && done == 10 * 1024 + 500);
    }
    mts__xxh32_allow_simd(1);
    free(out);
    TEST_DONE("test_codec");
}

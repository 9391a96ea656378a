/* lz4-java's block stream (LZ4BlockOutputStream / LZ4BlockInputStream):
 *   "LZ4Block" | token | compressedLen LE32 | originalLen LE32 | check LE32 | payload
 * token = method (0x10 raw, 0x20 lz4) | level, level = ceil(log2(blockSize)) - 10;
 * check = XXH32(original bytes, seed 0x9747B28C) & 0x0FFFFFFF. A block that
 * does not shrink is stored raw; the stream ends with an empty raw block. */
#include <lz4.h>
#include <string.h>
#include <xxhash.h>

#include "codec.h"
#include "internal.h"

static unsigned lz4j_level(uint32_t block_size)
{
    unsigned bits = 0;
    while ((1u << bits) < block_size) bits++; /* ceil(log2) */
    return bits > 10 ? bits - 10 : 0;
}

static uint32_t lz4j_check(const void *buf, size_t len)
{
    return (uint32_t)XXH32(buf, len, LZ4J_SEED) & 0x0FFFFFFFu;
}

static void put_header(unsigned char *h, unsigned token, uint32_t clen, uint32_t olen,
                       uint32_t check)
{
    memcpy(h, LZ4J_MAGIC, LZ4J_MAGIC_LEN);
    h[8] = (unsigned char)token;
    put_le32(h + 9, clen);
    put_le32(h + 13, olen);
    put_le32(h + 17, check);
}

static size_t lz4_bound(const codec_params *p, size_t n)
{
    size_t blocks = (n + p->block_size - 1) / p->block_size;
    return n + (blocks + 1) * LZ4J_HEADER_LEN; /* raw fallback caps each block */
}

static int lz4_ctx_new(const codec_params *p, void **ctx)
{
    (void)p;
    *ctx = mts_malloc((size_t)LZ4_sizeofState());
    return *ctx ? 0 : MTS_E_NOMEM;
}

static void lz4_ctx_free(void *ctx) { mts_free(ctx); }

static int lz4_compress(const codec_params *p, void *ctx, const void *src, size_t n, void *dst,
                        size_t cap, size_t *out_len)
{
    const unsigned char *in = src;
    unsigned char *out = dst;
    unsigned level = lz4j_level(p->block_size);
    size_t o = 0;
    if (cap < lz4_bound(p, n)) return MTS_E_OVERFLOW;
    for (size_t i = 0; i < n;) {
        int blen = (int)MTS_MIN((size_t)p->block_size, n - i);
        unsigned char *h = out + o;
        /* Capacity blen-1: lz4 gives up (returns 0) unless the block shrinks. */
        int clen = LZ4_compress_fast_extState(ctx, (const char *)in + i,
                                              (char *)h + LZ4J_HEADER_LEN, blen, blen - 1, 1);
        uint32_t check = lz4j_check(in + i, (size_t)blen);
        if (clen > 0) {
            put_header(h, LZ4J_METHOD_LZ4 | level, (uint32_t)clen, (uint32_t)blen, check);
        } else {
            clen = blen;
            memcpy(h + LZ4J_HEADER_LEN, in + i, (size_t)blen);
            put_header(h, LZ4J_METHOD_RAW | level, (uint32_t)blen, (uint32_t)blen, check);
        }
        o += LZ4J_HEADER_LEN + (size_t)clen;
        i += (size_t)blen;
    }
    put_header(out + o, LZ4J_METHOD_RAW | level, 0, 0, 0);
    *out_len = o + LZ4J_HEADER_LEN;
    return 0;
}

static int lz4_decode(const void *src, size_t n, codec_sink sink, void *sink_ctx,
                      uint64_t *bad_offset)
{
    const unsigned char *in = src;
    unsigned char *scratch = NULL;
    size_t scratch_cap = 0;
    int rc = 0;
    size_t o = 0;
    while (o < n) {
        const unsigned char *h = in + o;
        if (n - o < LZ4J_HEADER_LEN || memcmp(h, LZ4J_MAGIC, LZ4J_MAGIC_LEN) != 0) goto corrupt;
        unsigned method = h[8] & 0xF0, level = h[8] & 0x0F;
        uint32_t clen = get_le32(h + 9), olen = get_le32(h + 13), check = get_le32(h + 17);
        if (method != LZ4J_METHOD_RAW && method != LZ4J_METHOD_LZ4) goto corrupt;
        if ((int32_t)clen < 0 || (int32_t)olen < 0 || olen > (1u << (10 + level))) goto corrupt;
        if ((olen == 0) != (clen == 0) || (olen == 0 && check != 0)) goto corrupt;
        if (method == LZ4J_METHOD_RAW && clen != olen) goto corrupt;
        if (clen > n - o - LZ4J_HEADER_LEN) goto corrupt;
        const unsigned char *payload = h + LZ4J_HEADER_LEN;
        const unsigned char *plain = payload;
        if (method == LZ4J_METHOD_LZ4 && olen) {
            if (scratch_cap < olen) {
                mts_free(scratch);
                scratch = mts_malloc(olen);
                if (!scratch) { rc = MTS_E_NOMEM; goto out; }
                scratch_cap = olen;
            }
            int d = LZ4_decompress_safe((const char *)payload, (char *)scratch, (int)clen,
                                        (int)olen);
            if (d < 0 || (uint32_t)d != olen) goto corrupt;
            plain = scratch;
        }
        if (olen && lz4j_check(plain, olen) != check) goto corrupt;
        if (olen && (rc = sink(sink_ctx, plain, olen)) < 0) goto out;
        o += LZ4J_HEADER_LEN + clen;
    }
    goto out;
corrupt:
    rc = MTS_E_CORRUPT;
    if (bad_offset) *bad_offset = o;
out:
    mts_free(scratch);
    return rc;
}

const codec_vtable codec_lz4_vtable = {MTS_CODEC_LZ4, lz4_bound, lz4_ctx_new, lz4_ctx_free,
                                       lz4_compress, lz4_decode};

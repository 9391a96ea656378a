#include "internal.h"
#include "codec.h"
#include "xxh32.h"

void codec_defer_flush(codec_defer *d)
{
    uint32_t sums[CODEC_DEFER_MAX];
    xxh32_many(d->src, d->len, d->n, LZ4J_SEED, sums);
    for (unsigned k = 0; k < d->n; k++) put_le32(d->at[k], sums[k] & LZ4J_CHECK_MASK);
    d->n = 0;
}

const codec_vtable *codec_get(mts_codec id)
{
    switch (id) {
    case MTS_CODEC_NONE: return &codec_none_vtable;
    case MTS_CODEC_LZ4: return &codec_lz4_vtable;
    case MTS_CODEC_ZSTD: return &codec_zstd_vtable;
    }
    return NULL;
}

struct mts_cctx {
    codec_params p;
    const codec_vtable *v;
    void *ctx;
};

int mts_cctx_create(mts_codec codec, int level, uint32_t block_size, mts_cctx **out)
{
    if (!out) return MTS_E_ARG;
    *out = NULL;
    const codec_vtable *v = codec_get(codec);
    if (!v || (codec == MTS_CODEC_ZSTD && (level < 1 || level > CODEC_ZSTD_MAX_LEVEL)) ||
        (codec == MTS_CODEC_LZ4 && (block_size < LZ4J_MIN_BLOCK || block_size > LZ4J_MAX_BLOCK)))
        return MTS_E_ARG;
    mts_cctx *c = mts_calloc(1, sizeof *c);
    if (!c) return MTS_E_NOMEM;
    c->p = (codec_params){codec, level, block_size};
    c->v = v;
    int rc = v->ctx_new(&c->p, &c->ctx);
    if (rc < 0) {
        mts_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

size_t mts_cctx_bound(const mts_cctx *c, size_t n) { return c ? c->v->bound(&c->p, n) : 0; }

int mts_cctx_compress(mts_cctx *c, const void *src, size_t n, void *dst, size_t cap, size_t *out_len)
{
    if (!c || !out_len || (!src && n) || !dst) return MTS_E_ARG;
    return c->v->compress(&c->p, c->ctx, src, n, dst, cap, out_len);
}

void mts_cctx_free(mts_cctx *c)
{
    if (!c) return;
    c->v->ctx_free(c->ctx);
    mts_free(c);
}

int mts_decompress(mts_codec codec, const void *src, size_t n, mts_sink_fn sink, void *ctx, uint64_t *bad_offset)
{
    const codec_vtable *v = codec_get(codec);
    if (!v || !sink || (!src && n)) return MTS_E_ARG;
    return v->decode(src, n, sink, ctx, bad_offset);
}

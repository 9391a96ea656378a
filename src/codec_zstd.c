/* zstd: every compress() call is one complete frame (zstd-jni's
 * ZstdInputStream decodes concatenated frames). */
#include <zstd.h>

#include "codec.h"
#include "internal.h"

static size_t zstd_bound(const codec_params *p, size_t n) { (void)p; return ZSTD_compressBound(n); }

static int zstd_ctx_new(const codec_params *p, void **ctx)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    if (!c) return MTS_E_NOMEM;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, p->level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0))) {
        ZSTD_freeCCtx(c);
        return MTS_E_CODEC;
    }
    *ctx = c;
    return 0;
}

static void zstd_ctx_free(void *ctx) { ZSTD_freeCCtx(ctx); }

static int zstd_compress(const codec_params *p, void *ctx, const void *src, size_t n, void *dst,
                         size_t cap, size_t *out_len)
{
    /* Contexts belong to engine workers and serve writers of any level. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, p->level))) return MTS_E_CODEC;
    size_t r = ZSTD_compress2(ctx, dst, cap, src, n);
    if (ZSTD_isError(r)) return MTS_E_CODEC;
    *out_len = r;
    return 0;
}

static int zstd_decode(const void *src, size_t n, codec_sink sink, void *sink_ctx,
                       uint64_t *bad_offset)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t cap = ZSTD_DStreamOutSize();
    void *buf = mts_malloc(cap);
    int rc = 0;
    if (!d || !buf) { rc = MTS_E_NOMEM; goto out; }
    /* windowLog up to 27, zstd-jni's default limit. */
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 27);
    size_t frame_start = 0;
    ZSTD_inBuffer in = {src, n, 0};
    size_t last = 0; /* 0: at a frame boundary */
    while (in.pos < n || last != 0) {
        if (last == 0) frame_start = in.pos;
        ZSTD_outBuffer out = {buf, cap, 0};
        last = ZSTD_decompressStream(d, &out, &in);
        if (ZSTD_isError(last)) goto corrupt;
        if (out.pos && (rc = sink(sink_ctx, buf, out.pos)) < 0) goto out;
        /* All input used, output not full, frame unfinished: the source is
         * truncated (zstd-jni: "Truncated source"). */
        if (last != 0 && in.pos == n && out.pos < cap) goto corrupt;
    }
    goto out;
corrupt:
    rc = MTS_E_CORRUPT;
    if (bad_offset) *bad_offset = frame_start;
out:
    mts_free(buf);
    ZSTD_freeDCtx(d);
    return rc;
}

/* Between steps: the stream and where its current frame began. */
typedef struct zstd_step_state {
    ZSTD_DCtx *d;
    uint64_t frame_start;
    size_t last; /* 0: at a frame boundary */
} zstd_step_state;

static void zstd_step_free(void *state)
{
    zstd_step_state *s = state;
    if (!s) return;
    ZSTD_freeDCtx(s->d);
    mts_free(s);
}

static int zstd_step(void **state, const unsigned char *src, uint64_t n, uint64_t *pos, unsigned char *dst,
                     size_t cap, size_t *out, uint64_t *bad_offset)
{
    zstd_step_state *s = *state;
    *out = 0;
    if (!s) {
        s = mts_calloc(1, sizeof *s);
        if (!s || !(s->d = ZSTD_createDCtx())) {
            mts_free(s);
            return MTS_E_NOMEM;
        }
        ZSTD_DCtx_setParameter(s->d, ZSTD_d_windowLogMax, 27); /* zstd-jni's default limit */
        *state = s;
    }
    ZSTD_inBuffer in = {src, (size_t)n, (size_t)*pos};
    ZSTD_outBuffer ob = {dst, cap, 0};
    while (ob.pos < ob.size && (in.pos < in.size || s->last != 0)) {
        if (s->last == 0) s->frame_start = in.pos;
        size_t before = ob.pos;
        s->last = ZSTD_decompressStream(s->d, &ob, &in);
        if (ZSTD_isError(s->last)) goto corrupt;
        /* All input used, frame unfinished and no progress: truncated. */
        if (s->last != 0 && in.pos == in.size && ob.pos == before && ob.pos < ob.size) goto corrupt;
    }
    *pos = in.pos;
    *out = ob.pos;
    return in.pos == in.size && s->last == 0;
corrupt:
    *pos = in.pos;
    *out = ob.pos;
    *bad_offset = s->frame_start;
    return MTS_E_CORRUPT;
}

/* A DCtx keeps its window buffer across a session reset: a reader's next
 * segment does not fault in a fresh one. */
static int zstd_step_reuse(void *state)
{
    zstd_step_state *s = state;
    if (ZSTD_isError(ZSTD_DCtx_reset(s->d, ZSTD_reset_session_only))) return MTS_E_CODEC;
    s->frame_start = 0;
    s->last = 0;
    return 0;
}

static size_t zstd_step_need(const unsigned char *src, uint64_t n, uint64_t pos)
{
    (void)src; (void)n; (void)pos;
    return 0;
}

const codec_vtable codec_zstd_vtable = {
    .id = MTS_CODEC_ZSTD, .bound = zstd_bound, .ctx_new = zstd_ctx_new, .ctx_free = zstd_ctx_free,
    .compress = zstd_compress, .decode = zstd_decode, .step = zstd_step, .step_need = zstd_step_need,
    .step_free = zstd_step_free, .step_reuse = zstd_step_reuse};

#include <string.h>

#include "codec.h"
#include "internal.h"

static size_t none_bound(const codec_params *p, size_t n) { (void)p; return n; }
static int none_ctx_new(const codec_params *p, void **ctx) { (void)p; *ctx = NULL; return 0; }
static void none_ctx_free(void *ctx) { (void)ctx; }

static int none_compress(const codec_params *p, void *ctx, const void *src, size_t n, void *dst,
                         size_t cap, size_t *out_len)
{
    (void)p; (void)ctx;
    if (cap < n) return MTS_E_OVERFLOW;
    memcpy(dst, src, n);
    *out_len = n;
    return 0;
}

static int none_compress_v(const codec_params *p, void *ctx, const codec_piece *v, unsigned nv, void *dst,
                           size_t cap, size_t *out_len)
{
    (void)p; (void)ctx;
    size_t o = 0;
    for (unsigned k = 0; k < nv; k++) {
        if (cap - o < v[k].n) return MTS_E_OVERFLOW;
        memcpy((unsigned char *)dst + o, v[k].p, v[k].n);
        o += v[k].n;
    }
    *out_len = o;
    return 0;
}

static size_t none_piece_align(const codec_params *p) { (void)p; return 1; }

static int none_decode(const void *src, size_t n, codec_sink sink, void *sink_ctx,
                       uint64_t *bad_offset)
{
    (void)bad_offset;
    return n ? sink(sink_ctx, src, n) : 0;
}

static int none_step(void **state, const unsigned char *src, uint64_t n, uint64_t *pos, unsigned char *dst,
                     size_t cap, size_t *out, uint64_t *bad_offset)
{
    (void)state; (void)bad_offset;
    size_t k = (size_t)MTS_MIN((uint64_t)cap, n - *pos);
    memcpy(dst, src + *pos, k);
    *pos += k;
    *out = k;
    return *pos == n;
}

static size_t none_step_need(const unsigned char *src, uint64_t n, uint64_t pos)
{
    (void)src; (void)n; (void)pos;
    return 0;
}

const codec_vtable codec_none_vtable = {
    .id = MTS_CODEC_NONE, .bound = none_bound, .ctx_new = none_ctx_new, .ctx_free = none_ctx_free,
    .compress = none_compress, .compress_v = none_compress_v, .piece_align = none_piece_align,
    .decode = none_decode, .step = none_step, .step_need = none_step_need, .step_free = none_ctx_free};

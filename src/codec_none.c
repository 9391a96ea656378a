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

const codec_vtable codec_none_vtable = {MTS_CODEC_NONE, none_bound, none_ctx_new, none_ctx_free,
                                        none_compress, none_decode, none_step, none_step_need, none_ctx_free};

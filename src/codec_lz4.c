/* lz4-java's block stream (LZ4BlockOutputStream / LZ4BlockInputStream):
 *   "LZ4Block" | token | compressedLen LE32 | originalLen LE32 | check LE32 | payload
 * token = method (0x10 raw, 0x20 lz4) | level, level = ceil(log2(blockSize)) - 10;
 * check = XXH32(original bytes, seed 0x9747B28C) & 0x0FFFFFFF. A block that
 * does not shrink is stored raw; the stream ends with an empty raw block. */
#include <lz4.h>
#include <string.h>

#include "codec.h"
#include "internal.h"
#include "xxh32.h"

/* Blocks are checked eight at a time (xxh32_many): after they are compressed,
 * or decoded. */
#define GROUP XXH32_MANY

static unsigned lz4j_level(uint32_t block_size)
{
    unsigned bits = 0;
    while ((1u << bits) < block_size) bits++; /* ceil(log2) */
    return bits > 10 ? bits - 10 : 0;
}

static void put_header(unsigned char *h, unsigned token, uint32_t clen, uint32_t olen,
                       uint32_t check)
{
    memcpy(h, LZ4J_MAGIC, LZ4J_MAGIC_LEN);
    h[8] = (unsigned char)token;
    put_le32(h + 9, clen);
    put_le32(h + 13, olen);
    put_le32(h + LZ4J_CHECK_AT, check);
}

static size_t lz4_bound(const codec_params *p, size_t n)
{
    size_t blocks = (n + p->block_size - 1) / p->block_size;
    return n + (blocks + 1) * LZ4J_HEADER_LEN; /* raw fallback caps each block */
}

/* The context: an LZ4_stream_t, and where the block checks go while they
 * are deferred. Blocks of at least EXTSTATE_MIN bytes go through
 * LZ4_compress_fast_extState(), which clears the state's 16 KiB and, for
 * blocks under 64 KiB, hashes 16-bit positions: the call lz4-java's JNI
 * compressor makes (through LZ4_compress_default). Smaller blocks (the last of a
 * stream, small partitions) start from LZ4_resetStream_fast(), constant
 * time, and LZ4_compress_fast_continue(), since clearing 16 KiB would cost
 * more than their bytes. bench/lz4_calls_bench.c on this project's rows, ns
 * an input byte, streaming against extState: 1 KiB blocks 0.47 and 0.65,
 * 8 KiB 0.42 and 0.43, 16 KiB 0.45 and 0.42, 32 KiB (lz4-java's default)
 * 0.50 and 0.43, for 2.5% more compressed bytes (BENCHMARKS.md). */
#define EXTSTATE_MIN 16384
typedef struct lz4_ctx {
    LZ4_stream_t stream;
    codec_defer *defer;
} lz4_ctx;

static int lz4_ctx_new(const codec_params *p, void **ctx)
{
    (void)p;
    lz4_ctx *c = mts_malloc(sizeof *c);
    if (!c) return MTS_E_NOMEM;
    if (!LZ4_initStream(&c->stream, sizeof c->stream)) {
        mts_free(c);
        return MTS_E_CODEC;
    }
    c->defer = NULL;
    *ctx = c;
    return 0;
}

static void lz4_ctx_free(void *ctx) { mts_free(ctx); }

static void lz4_defer(void *ctx, codec_defer *d)
{
    lz4_ctx *c = ctx;
    c->defer = d;
}

/* Compresses one block into h + LZ4J_HEADER_LEN and writes its header, all
 * but the check (zero until the block's list is flushed); returns the bytes
 * written. */
static size_t put_block(lz4_ctx *c, unsigned level, const unsigned char *src, int blen, unsigned char *h)
{
    /* Every block independent (no dictionary), as lz4-java's; capacity
     * blen-1: lz4 gives up (returns 0) unless the block shrinks. */
    int clen;
    if (blen >= EXTSTATE_MIN) {
        clen = LZ4_compress_fast_extState(&c->stream, (const char *)src, (char *)h + LZ4J_HEADER_LEN, blen, blen - 1, 1);
    } else {
        LZ4_resetStream_fast(&c->stream);
        clen = LZ4_compress_fast_continue(&c->stream, (const char *)src, (char *)h + LZ4J_HEADER_LEN, blen, blen - 1, 1);
    }
    if (clen > 0) {
        put_header(h, LZ4J_METHOD_LZ4 | level, (uint32_t)clen, (uint32_t)blen, 0);
    } else {
        clen = blen;
        memcpy(h + LZ4J_HEADER_LEN, src, (size_t)blen);
        put_header(h, LZ4J_METHOD_RAW | level, (uint32_t)blen, (uint32_t)blen, 0);
    }
    return LZ4J_HEADER_LEN + (size_t)clen;
}

/* Blocks restart at every piece, so the stream equals that of the joined
 * pieces when each piece but the last is a multiple of the block size. */
static int lz4_compress_v(const codec_params *p, void *ctx, const codec_piece *v, unsigned nv, void *dst, size_t cap,
                          size_t *out_len)
{
    unsigned char *out = dst;
    unsigned level = lz4j_level(p->block_size);
    size_t o = 0, total = 0, blocks = 0;
    for (unsigned k = 0; k < nv; k++) {
        total += v[k].n;
        blocks += (v[k].n + p->block_size - 1) / p->block_size;
    }
    if (cap < total + (blocks + 1) * LZ4J_HEADER_LEN) return MTS_E_OVERFLOW;
    /* Checks go to the context's list, or to one of this call's, flushed
     * at its end: either way each eight blocks are checked together after
     * their compression, while they are in cache. */
    lz4_ctx *c = ctx;
    codec_defer local = {0};
    codec_defer *d = c->defer ? c->defer : &local;
    for (unsigned k = 0; k < nv; k++) {
        const unsigned char *in = v[k].p;
        for (size_t i = 0; i < v[k].n;) {
            size_t blen = MTS_MIN((size_t)p->block_size, v[k].n - i);
            if (d->n == CODEC_DEFER_MAX) codec_defer_flush(d);
            d->src[d->n] = in + i;
            d->len[d->n] = blen;
            d->at[d->n++] = out + o + LZ4J_CHECK_AT;
            o += put_block(c, level, in + i, (int)blen, out + o);
            i += blen;
        }
    }
    if (local.n) codec_defer_flush(&local);
    put_header(out + o, LZ4J_METHOD_RAW | level, 0, 0, 0);
    *out_len = o + LZ4J_HEADER_LEN;
    return 0;
}

static int lz4_compress(const codec_params *p, void *ctx, const void *src, size_t n, void *dst,
                        size_t cap, size_t *out_len)
{
    codec_piece one = {src, n};
    return lz4_compress_v(p, ctx, &one, 1, dst, cap, out_len);
}

static size_t lz4_piece_align(const codec_params *p) { return p->block_size; }

/* Parses the block header at src[o, n). 0 with its fields, or MTS_E_CORRUPT. */
static int block_header(const unsigned char *src, uint64_t n, uint64_t o, unsigned *method, uint32_t *clen,
                        uint32_t *olen, uint32_t *check)
{
    const unsigned char *h = src + o;
    if (n - o < LZ4J_HEADER_LEN || memcmp(h, LZ4J_MAGIC, LZ4J_MAGIC_LEN) != 0) return MTS_E_CORRUPT;
    unsigned level = h[8] & 0x0F;
    *method = h[8] & 0xF0;
    *clen = get_le32(h + 9);
    *olen = get_le32(h + 13);
    *check = get_le32(h + LZ4J_CHECK_AT);
    if (*method != LZ4J_METHOD_RAW && *method != LZ4J_METHOD_LZ4) return MTS_E_CORRUPT;
    if ((int32_t)*clen < 0 || (int32_t)*olen < 0 || *olen > (1u << (10 + level))) return MTS_E_CORRUPT;
    if ((*olen == 0) != (*clen == 0) || (*olen == 0 && *check != 0)) return MTS_E_CORRUPT;
    if (*method == LZ4J_METHOD_RAW && *clen != *olen) return MTS_E_CORRUPT;
    if (*clen > n - o - LZ4J_HEADER_LEN) return MTS_E_CORRUPT;
    return 0;
}

/* Decodes the block at src[o, n) into dst (room for its olen), leaving its
 * check to the caller: 0 with *olen and *check (as stored), or
 * MTS_E_CORRUPT. *next is the offset after the block. */
static int block_decode(const unsigned char *src, uint64_t n, uint64_t o, unsigned char *dst, uint32_t *olen,
                        uint32_t *check, uint64_t *next)
{
    unsigned method;
    uint32_t clen;
    FORWARD_IF_ERROR(block_header(src, n, o, &method, &clen, olen, check));
    const unsigned char *payload = src + o + LZ4J_HEADER_LEN;
    if (method == LZ4J_METHOD_LZ4 && *olen) {
        int d = LZ4_decompress_safe((const char *)payload, (char *)dst, (int)clen, (int)*olen);
        if (d < 0 || (uint32_t)d != *olen) return MTS_E_CORRUPT;
    } else if (*olen) {
        memcpy(dst, payload, *olen);
    }
    *next = o + LZ4J_HEADER_LEN + clen;
    return 0;
}

static size_t lz4_step_need(const unsigned char *src, uint64_t n, uint64_t pos);

/* Up to GROUP decoded blocks awaiting their checks. */
typedef struct group {
    unsigned n;
    size_t at[GROUP];       /* where each one's bytes start in the output */
    size_t len[GROUP];
    uint32_t want[GROUP];   /* its stored check */
    uint64_t pos[GROUP];    /* its offset in the input */
} group;

/* Checks the group's blocks, decoded into base; the index of the first that
 * fails, or g->n if none does. */
static unsigned group_verify(const group *g, const unsigned char *base)
{
    const unsigned char *bp[GROUP];
    uint32_t got[GROUP];
    for (unsigned j = 0; j < g->n; j++) bp[j] = base + g->at[j];
    xxh32_many(bp, g->len, g->n, LZ4J_SEED, got);
    for (unsigned j = 0; j < g->n; j++)
        if ((got[j] & LZ4J_CHECK_MASK) != g->want[j]) return j;
    return g->n;
}

/* Decodes the block at src[*at, n) to base + *used, where room bytes are
 * free, and adds it to g (an empty one, the end mark, is only passed).
 * 0 and *at, *used past it; 1 if it needs more room; MTS_E_CORRUPT. */
static int group_add(group *g, const unsigned char *src, uint64_t n, uint64_t *at, unsigned char *base,
                     size_t *used, size_t room)
{
    unsigned method;
    uint32_t clen, olen, check;
    FORWARD_IF_ERROR(block_header(src, n, *at, &method, &clen, &olen, &check));
    if (olen > room) return 1;
    uint64_t next;
    FORWARD_IF_ERROR(block_decode(src, n, *at, base + *used, &olen, &check, &next));
    if (olen) {
        g->at[g->n] = *used;
        g->len[g->n] = olen;
        g->want[g->n] = check;
        g->pos[g->n++] = *at;
    }
    *used += olen;
    *at = next;
    return 0;
}

static int lz4_decode(const void *src, size_t n, codec_sink sink, void *sink_ctx, uint64_t *bad_offset)
{
    const unsigned char *in = src;
    unsigned char *scratch = NULL;
    size_t scratch_cap = 0;
    int rc = 0;
    uint64_t o = 0;
    while (o < n && rc == 0) {
        /* Up to GROUP blocks into scratch, then their checks, then the sink. */
        group g = {0};
        size_t used = 0;
        int bad = 0;
        while (g.n < GROUP && o < n) {
            size_t need = lz4_step_need(in, n, o);
            if (scratch_cap - used < need) {
                size_t want = MTS_MAX(used + need, (size_t)GROUP * need);
                unsigned char *grown = mts_realloc(scratch, want);
                if (!grown) {
                    rc = MTS_E_NOMEM;
                    break;
                }
                scratch = grown;
                scratch_cap = want;
            }
            if (group_add(&g, in, n, &o, scratch, &used, scratch_cap - used) != 0) {
                bad = 1;
                break;
            }
        }
        unsigned ok = g.n ? group_verify(&g, scratch) : 0;
        for (unsigned j = 0; j < ok && rc == 0; j++) rc = sink(sink_ctx, scratch + g.at[j], g.len[j]);
        if (rc < 0) break;
        if (ok < g.n) {
            rc = MTS_E_CORRUPT;
            if (bad_offset) *bad_offset = g.pos[ok];
        } else if (bad) {
            rc = MTS_E_CORRUPT;
            if (bad_offset) *bad_offset = o;
        }
    }
    mts_free(scratch);
    return rc;
}

static int lz4_step(void **state, const unsigned char *src, uint64_t n, uint64_t *pos, unsigned char *dst,
                    size_t cap, size_t *out, uint64_t *bad_offset)
{
    (void)state;
    size_t k = 0; /* bytes decoded and checked */
    while (*pos < n) {
        group g = {0};
        size_t kk = k;
        uint64_t at = *pos;
        int bad = 0, full = 0;
        while (g.n < GROUP && at < n) {
            int r = group_add(&g, src, n, &at, dst, &kk, cap - kk);
            if (r != 0) {
                full = r == 1;
                bad = r < 0;
                break;
            }
        }
        unsigned ok = g.n ? group_verify(&g, dst) : 0;
        if (ok < g.n) {
            *out = g.at[ok];
            *pos = *bad_offset = g.pos[ok];
            return MTS_E_CORRUPT;
        }
        k = kk;
        *pos = at;
        if (bad || (full && k == 0)) { /* full with nothing done: less room than step_need */
            *out = k;
            *bad_offset = *pos;
            return MTS_E_CORRUPT;
        }
        if (full) break;
    }
    *out = k;
    return *pos == n;
}

static size_t lz4_step_need(const unsigned char *src, uint64_t n, uint64_t pos)
{
    unsigned method;
    uint32_t clen, olen, check;
    return block_header(src, n, pos, &method, &clen, &olen, &check) < 0 ? 0 : olen;
}

static void lz4_step_free(void *state) { (void)state; }

const codec_vtable codec_lz4_vtable = {
    .id = MTS_CODEC_LZ4, .checks_units = 1, .end_len = LZ4J_HEADER_LEN, .bound = lz4_bound, .ctx_new = lz4_ctx_new, .ctx_free = lz4_ctx_free,
    .compress = lz4_compress, .compress_v = lz4_compress_v, .piece_align = lz4_piece_align, .defer = lz4_defer,
    .decode = lz4_decode, .step = lz4_step, .step_need = lz4_step_need, .step_free = lz4_step_free};

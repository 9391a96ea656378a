/* Codecs behind one small vtable. compress() always emits one complete,
 * self-terminated stream, so streams can be joined by byte concatenation
 * (Spark decodes concatenated lz4-java block streams and zstd frames). */
#ifndef MTS_CODEC_H
#define MTS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "mtshuffle.h"
#include "xxh32.h"

typedef struct codec_params {
    mts_codec id;
    int level;           /* zstd */
    uint32_t block_size; /* lz4 */
} codec_params;

/* One piece of a compress_v() input. */
typedef struct codec_piece {
    const void *p;
    size_t n;
} codec_piece;

/* Block checks left for later (lz4-java's XXH32 of each block), so that
 * blocks of many small streams are checked several at a time: while a
 * context defers (codec_vtable.defer), compress and compress_v note each
 * block's original bytes and where its check goes, and codec_defer_flush()
 * computes and stores the checks. Those bytes, in and out, must stay where
 * they are until the flush. A list of eight (what xxh32_many hashes at once)
 * flushes itself, while the blocks are still in cache from their
 * compression; longer lists read them back from memory. */
#define CODEC_DEFER_MAX XXH32_MANY
typedef struct codec_defer {
    unsigned n;
    const unsigned char *src[CODEC_DEFER_MAX];
    size_t len[CODEC_DEFER_MAX];
    unsigned char *at[CODEC_DEFER_MAX]; /* a little-endian uint32 goes here */
} codec_defer;

void codec_defer_flush(codec_defer *d);

/* Receives decoded bytes in order; returns 0 or a negative code to stop. */
typedef int (*codec_sink)(void *ctx, const void *buf, size_t len);

typedef struct codec_vtable {
    mts_codec id;
    /* Every unit decode() and step() decode carries a check of its decoded
     * bytes (lz4-java's XXH32), so damage is caught without a checksum file. */
    int checks_units;
    /* Bytes that end every stream compress() makes, the same bytes for all
     * (lz4-java's empty end block); 0: none. A partition's streams may be
     * joined into one by dropping every end but the last. */
    unsigned end_len;
    /* Largest possible output of compress() for n input bytes. */
    size_t (*bound)(const codec_params *p, size_t n);
    /* Per-thread compression state; *ctx may be left NULL. */
    int (*ctx_new)(const codec_params *p, void **ctx);
    void (*ctx_free)(void *ctx);
    int (*compress)(const codec_params *p, void *ctx, const void *src, size_t n, void *dst,
                    size_t cap, size_t *out_len);
    /* Optional (NULL: join the pieces and compress()): one stream of the
     * pieces' concatenation, read in place. The stream is the one compress()
     * makes of the joined bytes when each piece but the last is a multiple
     * of piece_align() (0: never; compress_v is then NULL too). */
    int (*compress_v)(const codec_params *p, void *ctx, const codec_piece *v, unsigned nv, void *dst,
                      size_t cap, size_t *out_len);
    size_t (*piece_align)(const codec_params *p);
    /* Optional (NULL: nothing to defer): the context's checks go to d from
     * now on, or are computed at once again with d NULL. */
    void (*defer)(void *ctx, codec_defer *d);
    /* Decodes a concatenation of streams. On MTS_E_CORRUPT, *bad_offset is
     * the offset in src of the unit (block, frame) that failed. */
    int (*decode)(const void *src, size_t n, codec_sink sink, void *sink_ctx,
                  uint64_t *bad_offset);
    /* Resumable decoding (the reader's pieces): decodes src[*pos, n) into
     * dst[0, cap) as far as it fits, advancing *pos and setting *out. *state
     * carries what the codec needs between steps (NULL at a segment's start;
     * free it with step_free). 1 when the segment is completely decoded, 0
     * when more remains, MTS_E_CORRUPT with *bad_offset at the failing unit. */
    int (*step)(void **state, const unsigned char *src, uint64_t n, uint64_t *pos, unsigned char *dst,
                size_t cap, size_t *out, uint64_t *bad_offset);
    /* Output room the next step needs to make progress (lz4: the next whole
     * block; 0 if unknown, i.e. any room will do). */
    size_t (*step_need)(const unsigned char *src, uint64_t n, uint64_t pos);
    void (*step_free)(void *state);
    /* Optional: makes the state of a completely decoded segment that of a
     * segment's start again, keeping what it allocated; 0, or an error (then
     * free it). */
    int (*step_reuse)(void *state);
} codec_vtable;

const codec_vtable *codec_get(mts_codec id);

#define CODEC_ZSTD_MAX_LEVEL MTS_MAX_ZSTD_LEVEL

extern const codec_vtable codec_none_vtable;
extern const codec_vtable codec_lz4_vtable;
extern const codec_vtable codec_zstd_vtable;

/* lz4-java block stream constants (net.jpountz.lz4.LZ4BlockOutputStream). */
#define LZ4J_MAGIC "LZ4Block"
#define LZ4J_MAGIC_LEN 8
#define LZ4J_HEADER_LEN 21
#define LZ4J_METHOD_RAW 0x10
#define LZ4J_METHOD_LZ4 0x20
#define LZ4J_SEED 0x9747B28Cu
#define LZ4J_CHECK_MASK 0x0FFFFFFFu /* the check: XXH32 & mask */
#define LZ4J_CHECK_AT 17           /* its offset in a block header */
#define LZ4J_MIN_BLOCK MTS_LZ4_MIN_BLOCK
#define LZ4J_MAX_BLOCK MTS_LZ4_MAX_BLOCK
#define LZ4J_DEFAULT_BLOCK (32u << 10) /* spark.io.compression.lz4.blockSize */

#endif

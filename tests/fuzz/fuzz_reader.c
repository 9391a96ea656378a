/* libFuzzer target: the reader on arbitrary index, data and checksum files,
 * and the block reader on the input's bytes as blocks (as a reducer hands
 * over fetched blocks). Any input may be rejected; none may crash, hang, leak
 * or read out of bounds. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "mtshuffle.h"

/* The input cut in up to three blocks, each in memory of its own (so that a
 * read past a block's end is caught), decoded as one codec. */
static void blocks(const uint8_t *b, size_t n)
{
    static const mts_codec codecs[] = {MTS_CODEC_AUTO, MTS_CODEC_LZ4, MTS_CODEC_ZSTD, MTS_CODEC_NONE};
    if (n < 2) return;
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.codec = codecs[b[0] & 3];
    ro.threads = 2;
    ro.piece_size = 4096;
    ro.max_bytes_in_flight = 64 << 10;
    mts_reader *r;
    if (mts_reader_open_blocks(&ro, &r, NULL, 0) < 0) return;
    size_t cut[4] = {1, 1 + (n - 1) * (b[1] & 15) / 15, 1 + (n - 1) * (b[1] >> 4) / 15, n};
    if (cut[2] < cut[1]) cut[2] = cut[1];
    uint8_t *copy[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        size_t len = cut[k + 1] - cut[k];
        copy[k] = malloc(len ? len : 1);
        if (copy[k]) memcpy(copy[k], b + cut[k], len);
        if (copy[k]) mts_reader_add_block(r, copy[k], len, (uint32_t)k);
    }
    mts_read_piece pc;
    volatile uint8_t sink = 0;
    while (mts_reader_next(r, &pc) == 1) sink ^= ((const uint8_t *)pc.data)[pc.len - 1];
    (void)sink;
    mts_reader_free(r);
    for (int k = 0; k < 3; k++) free(copy[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *b, size_t n)
{
    blocks(b, n);
    int flags = fuzz_unpack(b, n);
    if (flags < 0) return 0;
    static const mts_codec codecs[] = {MTS_CODEC_AUTO, MTS_CODEC_LZ4, MTS_CODEC_ZSTD, MTS_CODEC_NONE};
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.codec = codecs[flags & 3];
    ro.verify_checksums = !(flags & 4);
    ro.threads = 2;
    ro.piece_size = 4096;
    ro.max_bytes_in_flight = 64 << 10;
    mts_reader *r;
    char err[600];
    if (mts_reader_open_dir(&ro, fuzz_scratch(), 0, &r, err, sizeof err) < 0) return 0;
    uint32_t np = mts_reader_num_partitions(r);
    for (uint32_t p = 0; p < np && p < 64; p++) {
        uint32_t end = (flags & 0x80) ? np : p + 1; /* single partitions, or ranges */
        if (mts_reader_start(r, p, end) < 0) break;
        mts_read_piece pc;
        volatile uint8_t sink = 0;
        int rc;
        while ((rc = mts_reader_next(r, &pc)) == 1) sink ^= ((const uint8_t *)pc.data)[pc.len - 1];
        (void)sink;
    }
    mts_reader_free(r);
    return 0;
}

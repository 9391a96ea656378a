/* libFuzzer target: writer call sequences. The input picks the options, then
 * a sequence of appends, batches, bad calls, commit or abort. Whatever the
 * sequence, nothing may crash; a commit must produce an output the reader
 * decodes to exactly the bytes accepted; a failed or aborted writer leaves no
 * file behind. */
#include <assert.h>

#include "fuzz_common.h"
#include "mtshuffle.h"

static int count_files(void)
{
    DIR *d = opendir(fuzz_scratch());
    struct dirent *e;
    int k = 0;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') k++;
    if (d) closedir(d);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *b, size_t n)
{
    if (n < 6) return 0;
    fuzz_clear();
    mts_writer_options o;
    mts_writer_options_init(&o);
    o.dir = fuzz_scratch();
    o.num_partitions = 1 + b[0] % 40;
    o.codec = (mts_codec)(b[1] % 3);
    o.strategy = (mts_strategy)((b[1] >> 2) & 1);
    o.checksum = (mts_checksum)((b[1] >> 3) & 3);
    o.threads = 1 + ((b[1] >> 5) & 1);
    o.max_bytes_in_flight = (64u << 10) << (b[2] % 4);
    o.job_size = 1024u << (b[2] >> 4 & 7);
    o.block_size = 64u << (b[3] % 10);
    mts_writer *w;
    if (mts_writer_create(&o, &w, NULL, 0) < 0) return 0;
    /* expected bytes per partition, in arrival order */
    size_t cap = n * 4 + 64;
    uint8_t **want = calloc(o.num_partitions, sizeof *want);
    size_t *wl = calloc(o.num_partitions, sizeof *wl);
    for (uint32_t p = 0; p < o.num_partitions; p++) want[p] = malloc(cap);
    size_t i = 4;
    int rc = 0, ended = 0;
    uint64_t offs[41];
    while (i + 2 <= n && rc == 0 && !ended) {
        uint8_t op = b[i] % 8, arg = b[i + 1];
        i += 2;
        size_t len = arg % 64;
        if (len > n - i) len = n - i;
        const uint8_t *payload = b + i;
        switch (op) {
        case 0: case 1: case 2: { /* append */
            uint32_t p = arg % o.num_partitions;
            rc = mts_writer_append(w, p, payload, len);
            if (rc == 0 && wl[p] + len <= cap) { memcpy(want[p] + wl[p], payload, len); wl[p] += len; }
            else if (rc == 0) ended = 2; /* more than we track: only check it commits */
            i += len;
            break;
        }
        case 3: { /* a batch: the payload spread over the partitions */
            offs[0] = 0;
            for (uint32_t p = 0; p < o.num_partitions; p++) offs[p + 1] = offs[p] + (p < len ? (payload[p] & 1) * (len - p) / 2 : 0);
            if (offs[o.num_partitions] > len) offs[o.num_partitions] = len;
            for (uint32_t p = 1; p <= o.num_partitions; p++) if (offs[p] < offs[p - 1]) offs[p] = offs[p - 1];
            for (uint32_t p = 1; p <= o.num_partitions; p++) if (offs[p] > len) offs[p] = len;
            rc = mts_writer_add_batch(w, payload, offs);
            for (uint32_t p = 0; rc == 0 && p < o.num_partitions; p++) {
                size_t k = offs[p + 1] - offs[p];
                if (wl[p] + k > cap) { ended = 2; break; }
                memcpy(want[p] + wl[p], payload + offs[p], k);
                wl[p] += k;
            }
            i += len;
            break;
        }
        case 4: /* bad calls: rejected, nothing changes */
            assert(mts_writer_append(w, o.num_partitions + arg, payload, 1) == MTS_E_RANGE);
            assert(mts_writer_append(w, 0, NULL, 1 + arg) == MTS_E_ARG);
            break;
        case 5: { /* a large record, streamed through the budget */
            size_t big = (size_t)(arg + 1) * 4096;
            uint8_t *r = malloc(big);
            memset(r, arg, big);
            uint32_t p = arg % o.num_partitions;
            rc = mts_writer_append(w, p, r, big);
            if (rc == 0 && wl[p] + big <= cap) { memcpy(want[p] + wl[p], r, big); wl[p] += big; }
            else if (rc == 0) ended = 2; /* too large to track: only check it commits */
            free(r);
            break;
        }
        case 6:
            ended = 1;
            break;
        case 7:
            if (arg == 0) { mts_writer_abort(w); ended = 3; }
            break;
        }
    }
    if (ended == 3) {
        assert(count_files() == 0);
    } else if (rc == 0) {
        rc = mts_writer_commit(w, NULL, NULL, NULL);
        assert(rc == 0);
        mts_reader *r;
        mts_reader_options ro;
        mts_reader_options_init(&ro);
        ro.codec = o.codec; /* as a reducer knows it from its config: raw bytes may start with a magic */
        assert(mts_reader_open_dir(&ro, fuzz_scratch(), 0, &r, NULL, 0) == 0);
        for (uint32_t p = 0; p < o.num_partitions && ended != 2; p++) {
            assert(mts_reader_start(r, p, p + 1) == 0);
            size_t pos = 0;
            mts_read_piece pc;
            while ((rc = mts_reader_next(r, &pc)) == 1) {
                assert(pos + pc.len <= wl[p] && memcmp(want[p] + pos, pc.data, pc.len) == 0);
                pos += pc.len;
            }
            assert(rc == 0 && pos == wl[p]);
        }
        mts_reader_free(r);
    }
    mts_writer_free(w);
    for (uint32_t p = 0; p < o.num_partitions; p++) free(want[p]);
    free(want);
    free(wl);
    return 0;
}

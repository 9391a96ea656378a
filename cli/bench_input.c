/* How mtshuffle bench hands a task's rows to a writer, in each input shape. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"
#include "workload.h"

#define TAGGED_BUFFER (8u << 20) /* as the JNI binding's direct buffers */
#define TAGGED_ROW (8u + WL_ROW_BYTES)

unsigned char *bench_tagged(const wl_batch *bt)
{
    unsigned char *p = malloc(bt->rows * TAGGED_ROW + 1);
    if (!p) return NULL;
    for (uint64_t i = 0; i < bt->rows; i++) {
        unsigned char *r = p + i * TAGGED_ROW;
        uint32_t part = bt->part[i], len = WL_ROW_BYTES;
        for (int j = 0; j < 4; j++) {
            r[j] = (unsigned char)(part >> (24 - 8 * j));
            r[4 + j] = (unsigned char)(len >> (24 - 8 * j));
        }
        memcpy(r + 8, bt->unsorted + i * WL_ROW_BYTES, WL_ROW_BYTES);
    }
    return p;
}

void bench_trim_input(wl_batch *bt, int input, int keep_grouped)
{
    if (input == IN_TAGGED) { /* the tagged buffers hold the rows */
        free(bt->unsorted);
        free(bt->part);
        bt->unsorted = NULL;
        bt->part = NULL;
    }
    if ((input == IN_TAGGED || input == IN_UNSORTED) && !keep_grouped) {
        free(bt->grouped);
        bt->grouped = NULL;
    }
}

static void batch_given_back(void *ctx)
{
    __atomic_add_fetch((uint32_t *)ctx, 1, __ATOMIC_RELAXED);
}

int bench_feed(mts_writer *w, int input, const wl_batch *batches, uint32_t nbatches, unsigned char *const *tagged,
               uint32_t produce_us, uint32_t *batches_done)
{
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < nbatches; k++) {
        const wl_batch *bt = &batches[k];
        switch (input) {
        case IN_BATCH: rc = mts_writer_add_batch(w, bt->grouped, bt->offsets); break;
        case IN_ASYNC: rc = mts_writer_add_batch_async(w, bt->grouped, bt->offsets, batch_given_back, batches_done); break;
        case IN_RECORDS:
            for (uint64_t off = 0, p = 0; rc == 0 && off < bt->bytes; off += WL_ROW_BYTES) {
                while (bt->offsets[p + 1] <= off) p++; /* rows are grouped: p only grows */
                rc = mts_writer_append(w, (uint32_t)p, bt->grouped + off, WL_ROW_BYTES);
            }
            break;
        case IN_UNSORTED:
            for (uint64_t i = 0; rc == 0 && i < bt->rows; i++)
                rc = mts_writer_append(w, bt->part[i], bt->unsorted + i * WL_ROW_BYTES, WL_ROW_BYTES);
            break;
        case IN_TAGGED: {
            size_t total = bt->rows * TAGGED_ROW, per = TAGGED_BUFFER / TAGGED_ROW * TAGGED_ROW;
            for (size_t off = 0; rc == 0 && off < total; off += per) {
                if (produce_us) usleep(produce_us);
                rc = mts_writer_append_tagged(w, tagged[k] + off, total - off < per ? total - off : per);
            }
            break;
        }
        }
    }
    return rc;
}

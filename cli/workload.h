/* A synthetic map-task input shaped like the TPC-DS store_sales key columns
 * the seed's benchmark shuffled: seven integer surrogate keys per row, as
 * Spark's UnsafeRowSerializer writes them (int32 BE length, then a 64-byte
 * UnsafeRow: null bitset word + seven 8-byte slots), rows grouped in tickets
 * that share date, time, customer, demographics and address (so they
 * compress like the real table), partitioned like Spark's
 * HashPartitioning(ss_sold_date_sk, ss_sold_time_sk) (Murmur3, seed 42). */
#ifndef MTS_CLI_WORKLOAD_H
#define MTS_CLI_WORKLOAD_H

#include <stdint.h>

#define WL_ROW_BYTES 68u /* 4-byte length + 64-byte UnsafeRow */

typedef struct wl_params {
    uint32_t partitions;
    double skew;   /* fraction of tickets forced into partition 0 (0: pure hash) */
    uint64_t seed;
} wl_params;

/* One batch. grouped: rows grouped by partition, offsets[partitions+1].
 * unsorted (when asked): the same rows in generation order, with part[i]. */
typedef struct wl_batch {
    unsigned char *grouped;
    uint64_t *offsets;
    unsigned char *unsorted;
    uint32_t *part;
    uint64_t rows, bytes;
} wl_batch;

/* Generates `rows` rows for (task, index). Returns 0 or -ENOMEM. */
int wl_make_batch(const wl_params *p, uint64_t task, uint32_t index, uint64_t rows,
                  int want_unsorted, wl_batch *out);
void wl_free_batch(wl_batch *b);

int32_t wl_murmur3_int(int32_t value, int32_t seed);

#endif

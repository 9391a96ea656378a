/* Spark's on-disk layout of one map output, in one place: file names, the
 * index and checksum files (encode and decode), and which codec a segment's
 * first bytes belong to. The commit, the reader, mts_output_* (inspect) and
 * the clean-up of dead attempts all go through here.
 *
 *   shuffle_<shuffle>_<map>_0.data           partition bytes in partition order
 *   shuffle_<shuffle>_<map>_0.index          (N+1) big-endian int64 offsets, 0 first
 *   shuffle_<shuffle>_<map>_0.checksum.ALGO  N big-endian int64 checksums */
#ifndef MTS_LAYOUT_H
#define MTS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "mtshuffle.h"

#define LAYOUT_DATA 'd'
#define LAYOUT_INDEX 'i'
#define LAYOUT_CHECKSUM 'c'

#define ZSTD_FRAME_MAGIC "\x28\xB5\x2F\xFD"

/* The sibling of kind (LAYOUT_*) of the output whose path (any of its three
 * files) is given: "dir/shuffle_S_M_0" + suffix. The checksum kind uses
 * algo. Returns the length, or MTS_E_ARG if path is not named
 * shuffle_S_M_0.{data,index,checksum.ALGO} (then *algo_in_name is untouched). */
int layout_sibling(char *buf, size_t len, const char *path, int kind, mts_checksum algo);
/* The checksum algorithm named by a ".checksum.ALGO" path, else NONE. */
mts_checksum layout_checksum_in_name(const char *path);

/* The map ids of every committed output (by its index file) of one shuffle
 * in dir, in directory order, in a fresh array. */
int layout_list_maps(const char *dir, int32_t shuffle_id, uint64_t **ids, uint32_t *n);

/* Index bytes for these partition lengths: (n+1)*8 bytes into buf. */
int layout_index_encode(unsigned char *buf, const uint64_t *lengths, uint32_t n);
/* Decodes an index of len bytes into offsets (n+1 entries, allocated by the
 * caller when *n is known, else pass want_n 0 and offsets NULL to learn n).
 * Checks: whole longs, n >= 1, n == want_n if want_n, offsets start at 0,
 * never go down, and end at data_len unless data_len is UINT64_MAX.
 * data_path (may be NULL) is named in messages. */
int layout_index_decode(const unsigned char *buf, uint64_t len, uint32_t want_n, uint64_t data_len,
                        uint64_t *offsets, uint32_t *n, const char *path, const char *data_path, char *err,
                        size_t errlen);
void layout_sums_encode(unsigned char *buf, const uint32_t *sums, uint32_t n);
/* n stored longs into sums; MTS_E_CORRUPT if len is not n*8. */
int layout_sums_decode(const unsigned char *buf, uint64_t len, uint32_t n, uint64_t *sums, const char *path,
                       char *err, size_t errlen);

/* The codec whose stream starts at p, by its magic: lz4-java's "LZ4Block",
 * zstd's frame magic, else MTS_CODEC_NONE. */
mts_codec layout_sniff(const void *p, uint64_t len);

/* Reads a complete index of num_partitions partitions from path: 0 if it is
 * consistent with a data file of data_len bytes, MTS_E_CORRUPT (with a
 * message) if not, -errno if unreadable. */
int layout_index_read(const char *path, uint32_t num_partitions, uint64_t data_len, uint64_t *offsets, char *err,
                      size_t errlen);

/* Reads a whole file through the fault-injectable file layer. */
int layout_read_file(const char *path, unsigned char **buf, uint64_t *len);

/* One committed map output opened for reading: the data file mapped, the
 * index and (when there) the checksum file decoded. */
typedef struct map_output {
    char *data_path;
    int fd;                    /* -1 if the data file is missing (read as empty) */
    const unsigned char *base; /* mapping of the data file; NULL if empty */
    uint64_t size;             /* data file bytes */
    uint32_t nparts;
    uint64_t *off;             /* nparts + 1, as stored */
    uint64_t *sums;            /* nparts stored checksums, NULL without a checksum file */
    mts_checksum algo;         /* of the checksum file, NONE without one */
} map_output;

/* Strict (the reader): the index must be consistent with the data file.
 * MAP_LENIENT (inspect): only well-formed files are required; the caller
 * checks the offsets. want_n 0: any partition count. */
#define MAP_LENIENT 1u
int map_output_open(map_output *m, const char *path, uint32_t want_n, unsigned flags, char *err, size_t errlen);
void map_output_close(map_output *m);

#endif

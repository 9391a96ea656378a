/* Index/checksum files and the atomic commit with Spark's attempt rules
 * (IndexShuffleBlockResolver.writeMetadataFileAndCommit). */
#ifndef MTS_COMMIT_H
#define MTS_COMMIT_H

#include <stdint.h>

#include "mtshuffle.h"

typedef struct commit_req {
    const char *dir;
    const char *data_tmp;      /* complete data file under its temp name */
    const char *data_final;
    const char *index_final;
    const char *checksum_final; /* NULL: no checksum file */
    const char *token;          /* suffix of the index/checksum temp names: the attempt slot */
    uint32_t num_partitions;
    int fsync;
} commit_req;

/* Writes index and checksum files and commits. If a complete, consistent
 * output already exists (index of (N+1)*8 bytes starting at 0, data length
 * equal to its last offset), it is adopted: lengths and checksums are
 * overwritten with the existing ones, our temp files are deleted and
 * *adopted is 1. The index rename is the commit point: data and checksum go
 * into place first, so a crash leaves either no index or a complete output;
 * the data temp file (the attempt's anchor) is removed last.
 * Commits in one directory are serialised by flock() on the directory, so
 * concurrent attempts in other processes see each other's complete output.
 * On failure nothing of ours stays under a final name; err receives a
 * message. */
int commit_output(const commit_req *r, uint64_t *lengths, uint32_t *checksums, int *adopted,
                  char *err, size_t errlen);

/* Takes the directory lock that commits and attempt registration hold
 * (flock on the directory itself): returns its fd, or -errno. */
int dir_lock(const char *dir);
void dir_unlock(int fd);

/* Attempts of one map output. Attempt k names its temp files after the
 * final names: "<data>.<k>" (the data file, also the attempt's anchor),
 * "<data>.<k>.run", "<data>.<k>.p<partition>" (baseline), "<index>.<k>",
 * "<checksum>.<k>".
 * A live attempt holds an flock on its anchor (or, while the anchor is
 * being replaced, on its run file); an anchor nobody holds belongs to a dead
 * attempt. The anchor is removed last (commit_output), so a dead attempt
 * always leaves its anchor behind with whatever else it left.
 *
 * With the directory lock held: claims the first free slot, removing every
 * file of dead attempts in the slots before it (no directory listing: a
 * claim costs one open when no attempt died). Returns the locked anchor's
 * fd, its path in anchor and the slot in *slot; *removed counts the files of
 * dead attempts removed. */
#define MAX_ATTEMPT_SLOTS 1024u
int attempt_claim(const char *data_final, const char *index_final, uint32_t *slot, char *anchor, size_t len,
                  uint32_t *removed);

#endif

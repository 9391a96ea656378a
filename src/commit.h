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
    const char *token;          /* suffix for the index/checksum temp names */
    uint32_t num_partitions;
    int fsync;
} commit_req;

/* Writes index and checksum files and commits. If a complete, consistent
 * output already exists (index of (N+1)*8 bytes starting at 0, data length
 * equal to its last offset), it is adopted: lengths and checksums are
 * overwritten with the existing ones, our temp files are deleted and
 * *adopted is 1. The index rename is the commit point: data and checksum go
 * into place first, so a crash leaves either no index or a complete output.
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

/* With the directory lock held: removes the temp files of earlier attempts
 * of the same map output that are no longer running. Every live writer holds
 * an flock on its anchor (<data_final>.<token>, or the same with ".run"), so
 * a token whose anchor can be locked, or is gone, belongs to a dead attempt.
 * data_final is the final data path; own_token is skipped. Returns how many
 * files were removed, or -errno. */
int cleanup_stale(const char *dir, const char *data_final, const char *own_token);

#endif

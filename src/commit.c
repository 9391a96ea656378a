#include <dirent.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit.h"
#include "fileio.h"
#include "internal.h"
#include "layout.h"

/* Writes buf to a new file at path (the temp name of an index or checksum file). */
static int write_file(const char *path, const unsigned char *buf, size_t len, int do_fsync)
{
    int fd = fio_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fd;
    int rc = fio_write_all(fd, buf, len);
    if (!rc && do_fsync) rc = fio_fsync(fd);
    if (close(fd) && !rc) rc = -errno;
    return rc;
}

int dir_lock(const char *dir)
{
    int fd = fio_open(dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) return fd;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

void dir_unlock(int fd)
{
    if (fd >= 0) close(fd); /* closing releases the lock */
}

/* 1 if someone holds the lock of the file at path (or it cannot be
 * checked), 0 if not or if it is gone. */
static int anchor_live(const char *path)
{
    int fd = fio_open(path, O_RDONLY, 0);
    if (fd < 0) return fd != -ENOENT; /* unreadable: leave it alone */
    int live = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return live;
}

static uint32_t unlink_counted(const char *path) { return unlink(path) == 0; }

/* Removes the partition files "<anchor>.p<i>" of a dead baseline attempt:
 * the one place that lists the directory, and only for a dead attempt. */
static uint32_t remove_part_files(const char *anchor)
{
    const char *slash = strrchr(anchor, '/');
    const char *name = slash ? slash + 1 : anchor;
    char dir[MTS_PATH_CAP], p[MTS_PATH_CAP + 512];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - anchor) : 1, slash ? anchor : ".");
    size_t nlen = strlen(name);
    int dfd = fio_open(dir, O_RDONLY | O_DIRECTORY, 0);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0) close(dfd);
        return 0;
    }
    uint32_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *q = e->d_name;
        if (strncmp(q, name, nlen) || q[nlen] != '.' || q[nlen + 1] != 'p' || q[nlen + 2] < '0' || q[nlen + 2] > '9')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, q);
        n += unlink_counted(p);
    }
    closedir(d);
    return n;
}

/* Every temp file of attempt slot k of a map output, anchor last. */
static uint32_t remove_attempt(const char *data_final, const char *index_final, uint32_t k)
{
    char p[MTS_PATH_CAP + 64], base[MTS_PATH_CAP];
    uint32_t n = 0;
    snprintf(p, sizeof p, "%s.%u.run", data_final, k);
    n += unlink_counted(p);
    snprintf(p, sizeof p, "%s.%u", data_final, k);
    n += remove_part_files(p);
    snprintf(p, sizeof p, "%s.%u", index_final, k);
    n += unlink_counted(p);
    static const mts_checksum algos[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    for (int a = 0; a < 3; a++) {
        if (layout_sibling(base, sizeof base, data_final, LAYOUT_CHECKSUM, algos[a]) < 0) continue;
        snprintf(p, sizeof p, "%s.%u", base, k);
        n += unlink_counted(p);
    }
    snprintf(p, sizeof p, "%s.%u", data_final, k);
    return n + unlink_counted(p);
}

int attempt_claim(const char *data_final, const char *index_final, uint32_t *slot, char *anchor, size_t len,
                  uint32_t *removed)
{
    *removed = 0;
    for (uint32_t k = 0; k < MAX_ATTEMPT_SLOTS; k++) {
        if (snprintf(anchor, len, "%s.%u", data_final, k) >= (int)len) return -ENAMETOOLONG;
        int fd = fio_open(anchor, O_RDWR | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* a fresh file: cannot be contended */
                int rc = -errno;
                close(fd);
                unlink(anchor);
                return rc;
            }
            *slot = k;
            return fd;
        }
        if (fd != -EEXIST) return fd;
        char run[MTS_PATH_CAP + 8];
        snprintf(run, sizeof run, "%s.run", anchor);
        if (anchor_live(anchor) || anchor_live(run)) continue; /* a live attempt's slot */
        *removed += remove_attempt(data_final, index_final, k);
        k--; /* the slot is free now: claim it */
    }
    return -EMFILE;
}

/* Existing checksums, if the file is there and whole; 0 on success. */
static int read_checksums(const char *path, uint32_t n, uint32_t *out)
{
    unsigned char *buf;
    uint64_t len;
    FORWARD_IF_ERROR(layout_read_file(path, &buf, &len));
    uint64_t *v = mts_malloc((size_t)n * sizeof *v + 1);
    char ignored[MTS_MSG_CAP];
    int rc = v ? layout_sums_decode(buf, len, n, v, path, ignored, sizeof ignored) : MTS_E_NOMEM;
    for (uint32_t i = 0; rc == 0 && i < n; i++) out[i] = (uint32_t)v[i];
    mts_free(v);
    mts_free(buf);
    return rc;
}

/* Adopts an earlier attempt's output if it is complete; 1 if adopted. */
static int try_adopt(const commit_req *r, uint64_t *lengths)
{
    struct stat st;
    int st_rc = fio_stat(r->data_final, &st);
    if (st_rc) {
        if (st_rc != -ENOENT) return 0;
        st.st_size = 0; /* Spark: File.length() of a missing data file is 0 */
    }
    uint64_t *off = mts_malloc(((size_t)r->num_partitions + 1) * 8);
    if (!off) return MTS_E_NOMEM;
    char ignored[MTS_MSG_CAP];
    int rc = layout_index_read(r->index_final, r->num_partitions, (uint64_t)st.st_size, off, ignored,
                               sizeof ignored);
    if (rc == 0) {
        for (uint32_t i = 0; i < r->num_partitions; i++) lengths[i] = off[i + 1] - off[i];
        rc = 1;
    } else if (rc == -ENOENT || rc == MTS_E_CORRUPT) {
        rc = 0; /* no earlier output, or an incomplete one: ours replaces it */
    } /* any other failure to look is an error: never overwrite what we could not read */
    mts_free(off);
    return rc;
}

int commit_output(const commit_req *r, uint64_t *lengths, uint32_t *checksums, int *adopted,
                  char *err, size_t errlen)
{
    char index_tmp[MTS_PATH_CAP + 40], sum_tmp[MTS_PATH_CAP + 40];
    const char *stage = "write index";
    const char *file = index_tmp;
    int rc = 0, dirfd = -1, data_placed = 0, sum_placed = 0, sum_written = 0, index_placed = 0;
    *adopted = 0;
    snprintf(index_tmp, sizeof index_tmp, "%s.%s", r->index_final, r->token);
    snprintf(sum_tmp, sizeof sum_tmp, "%s.%s", r->checksum_final ? r->checksum_final : "", r->token);

    size_t n = r->num_partitions;
    unsigned char *buf = mts_malloc((n + 1) * 8);
    if (!buf) { rc = MTS_E_NOMEM; goto out; }
    if ((rc = layout_index_encode(buf, lengths, r->num_partitions)) < 0) goto out;
    if ((rc = write_file(index_tmp, buf, (n + 1) * 8, r->fsync)) < 0) goto out;
    if (r->checksum_final) {
        stage = "write checksum";
        file = sum_tmp;
        layout_sums_encode(buf, checksums, r->num_partitions);
        sum_written = 1; /* removed on every way out, even if writing it fails */
        if ((rc = write_file(sum_tmp, buf, n * 8, r->fsync)) < 0) goto out;
    }

    stage = "lock directory";
    file = r->dir;
    dirfd = dir_lock(r->dir);
    if (dirfd < 0) { rc = dirfd; goto out; }

    stage = "check for an earlier attempt at";
    file = r->index_final;
    rc = try_adopt(r, lengths);
    if (rc < 0) goto out;
    if (rc == 1) {
        *adopted = 1;
        rc = 0;
        if (r->checksum_final) {
            uint32_t *theirs = mts_malloc(n * 4 + 4);
            if (theirs && read_checksums(r->checksum_final, r->num_partitions, theirs) == 0) {
                memcpy(checksums, theirs, (size_t)r->num_partitions * 4);
            } else if (fio_rename(sum_tmp, r->checksum_final) == 0) {
                sum_written = 0; /* Spark writes ours when theirs is missing */
            }
            mts_free(theirs);
        }
        goto out;
    }

    /* The data file goes into place as a second name of our temp file, so
     * the temp name (the attempt's anchor) stays until everything else is
     * in place or gone: a crash leaves either the anchor or nothing. */
    stage = "link data";
    file = r->data_final;
    rc = fio_link(r->data_tmp, r->data_final);
    if (rc == -EEXIST) { /* an incomplete earlier output (no valid index): replaced */
        unlink(r->data_final);
        rc = fio_link(r->data_tmp, r->data_final);
    }
    if (rc < 0) goto out;
    data_placed = 1;
    if (r->checksum_final) {
        stage = "rename checksum";
        file = r->checksum_final;
        if ((rc = fio_rename(sum_tmp, r->checksum_final)) < 0) goto out;
        sum_written = 0;
        sum_placed = 1;
    }
    stage = "rename index";
    file = r->index_final;
    if ((rc = fio_rename(index_tmp, r->index_final)) < 0) goto out;
    index_placed = 1;
    if (r->fsync) {
        stage = "fsync directory";
        file = r->dir;
        if ((rc = fio_fsync_dir(r->dir)) < 0) goto out;
    }

out:
    if (rc < 0) {
        mts_msg(err, errlen, rc, "commit: %s %s", stage, file);
        if (index_placed) unlink(r->index_final);
        if (data_placed) unlink(r->data_final);
        if (sum_placed) unlink(r->checksum_final);
    }
    if (!index_placed) unlink(index_tmp); /* renamed away otherwise */
    if (sum_written) unlink(sum_tmp);
    unlink(r->data_tmp); /* committed under its final name, adopted, or failed */
    if (dirfd >= 0) close(dirfd); /* releases the lock */
    mts_free(buf);
    return rc;
}

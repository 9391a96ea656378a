#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit.h"
#include "fileio.h"
#include "internal.h"

#define PATH_CAP 4096

static int write_longs(const char *path, const uint64_t *v, uint32_t n, int lead_zero, int do_fsync)
{
    int fd = fio_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fd;
    size_t count = (size_t)n + (lead_zero ? 1 : 0);
    unsigned char *buf = mts_malloc(count * 8);
    int rc = buf ? 0 : -ENOMEM;
    if (!rc) {
        size_t k = 0;
        if (lead_zero) put_be64(buf + 8 * k++, 0);
        for (uint32_t i = 0; i < n; i++) put_be64(buf + 8 * k++, v[i]);
        rc = fio_write_all(fd, buf, count * 8);
    }
    if (!rc && do_fsync) rc = fio_fsync(fd);
    mts_free(buf);
    if (close(fd) && !rc) rc = -errno;
    return rc;
}

int index_read(const char *path, uint32_t num_partitions, uint64_t data_len, uint64_t *offsets,
               char *err, size_t errlen)
{
    int fd = fio_open(path, O_RDONLY, 0);
    if (fd < 0) return fd;
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    uint64_t want = ((uint64_t)num_partitions + 1) * 8;
    if (!rc && (uint64_t)st.st_size != want) {
        snprintf(err, errlen, "index %s: %lld bytes, expected %llu for %u partitions", path,
                 (long long)st.st_size, (unsigned long long)want, num_partitions);
        rc = MTS_E_CORRUPT;
    }
    unsigned char *buf = rc ? NULL : mts_malloc(want);
    if (!rc && !buf) rc = -ENOMEM;
    if (!rc) rc = fio_pread_all(fd, buf, want, 0);
    for (uint32_t i = 0; !rc && i <= num_partitions; i++) {
        offsets[i] = get_be64(buf + 8 * i);
        if ((i == 0 && offsets[0] != 0) || (i > 0 && offsets[i] < offsets[i - 1])) {
            snprintf(err, errlen, "index %s: offset %u (%llu) is %s", path, i,
                     (unsigned long long)offsets[i], i ? "below the one before" : "not 0");
            rc = MTS_E_CORRUPT;
        }
    }
    if (!rc && offsets[num_partitions] != data_len) {
        snprintf(err, errlen, "index %s: ends at %llu but the data file has %llu bytes", path,
                 (unsigned long long)offsets[num_partitions], (unsigned long long)data_len);
        rc = MTS_E_CORRUPT;
    }
    mts_free(buf);
    close(fd);
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

static int is_token(const char *p)
{
    for (int i = 0; i < 32; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return 0;
    return p[32] == 0 || p[32] == '.';
}

/* 1 if someone holds the anchor's lock, 0 if not (or it is gone). */
static int anchor_live(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int live = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return live;
}

int cleanup_stale(const char *dir, const char *data_final, const char *own_token)
{
    /* Names of the same map output: "<base>.<kind>.<token>[.suffix]" where
     * base is the final data name without ".data". */
    const char *slash = strrchr(data_final, '/');
    const char *data_name = slash ? slash + 1 : data_final;
    size_t base_len = strlen(data_name) - strlen(".data");
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int removed = 0;
    struct dirent *e;
    char path[PATH_CAP + 8], anchor[PATH_CAP];
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, data_name, base_len) != 0 || n[base_len] != '.') continue;
        const char *kind = n + base_len + 1, *tok = NULL;
        if (!strncmp(kind, "data.", 5)) tok = kind + 5;
        else if (!strncmp(kind, "index.", 6)) tok = kind + 6;
        else if (!strncmp(kind, "checksum.", 9) && (tok = strchr(kind + 9, '.'))) tok++;
        if (!tok || !is_token(tok) || !strncmp(tok, own_token, 32)) continue;
        snprintf(anchor, sizeof anchor, "%s.%.32s", data_final, tok);
        if (anchor_live(anchor)) continue;
        snprintf(path, sizeof path, "%s.run", anchor);
        if (anchor_live(path)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (unlink(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

/* Existing checksums, if the file is there and whole; 0 on success. */
static int read_checksums(const char *path, uint32_t n, uint32_t *out)
{
    int fd = fio_open(path, O_RDONLY, 0);
    if (fd < 0) return fd;
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    if (!rc && (uint64_t)st.st_size != (uint64_t)n * 8) rc = MTS_E_CORRUPT;
    unsigned char *buf = rc ? NULL : mts_malloc((size_t)n * 8);
    if (!rc && !buf) rc = -ENOMEM;
    if (!rc) rc = fio_pread_all(fd, buf, (size_t)n * 8, 0);
    for (uint32_t i = 0; !rc && i < n; i++) out[i] = (uint32_t)get_be64(buf + 8 * i);
    mts_free(buf);
    close(fd);
    return rc;
}

/* Adopts an earlier attempt's output if it is complete; 1 if adopted. */
static int try_adopt(const commit_req *r, uint64_t *lengths)
{
    struct stat st;
    if (stat(r->data_final, &st) != 0) {
        if (errno != ENOENT) return 0;
        st.st_size = 0; /* Spark: File.length() of a missing data file is 0 */
    }
    uint64_t *off = mts_malloc(((size_t)r->num_partitions + 1) * 8);
    if (!off) return -ENOMEM;
    char ignored[256];
    int rc = index_read(r->index_final, r->num_partitions, (uint64_t)st.st_size, off, ignored,
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
    char index_tmp[PATH_CAP], sum_tmp[PATH_CAP];
    const char *stage = "write index";
    const char *file = index_tmp;
    int rc = 0, dirfd = -1, data_placed = 0, sum_placed = 0, sum_written = 0, index_placed = 0;
    *adopted = 0;
    snprintf(index_tmp, sizeof index_tmp, "%s.%s", r->index_final, r->token);
    snprintf(sum_tmp, sizeof sum_tmp, "%s.%s", r->checksum_final ? r->checksum_final : "", r->token);

    uint64_t *offsets = mts_malloc(((size_t)r->num_partitions + 1) * 8);
    uint64_t *sums64 = mts_malloc(((size_t)r->num_partitions + 1) * 8);
    if (!offsets || !sums64) { rc = -ENOMEM; goto out; }
    uint64_t total = 0;
    for (uint32_t i = 0; i < r->num_partitions; i++) {
        if (lengths[i] > INT64_MAX - total) { rc = MTS_E_OVERFLOW; goto out; }
        offsets[i] = total;
        total += lengths[i];
    }
    offsets[r->num_partitions] = total;
    /* The index file is offsets[1..N] after its leading zero. */
    if ((rc = write_longs(index_tmp, offsets + 1, r->num_partitions, 1, r->fsync)) < 0) goto out;
    if (r->checksum_final) {
        stage = "write checksum";
        file = sum_tmp;
        for (uint32_t i = 0; i < r->num_partitions; i++) sums64[i] = checksums[i];
        sum_written = 1; /* removed on every way out, even if writing it fails */
        if ((rc = write_longs(sum_tmp, sums64, r->num_partitions, 0, r->fsync)) < 0) goto out;
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
            uint32_t *theirs = mts_malloc((size_t)r->num_partitions * 4);
            if (theirs && read_checksums(r->checksum_final, r->num_partitions, theirs) == 0) {
                memcpy(checksums, theirs, (size_t)r->num_partitions * 4);
            } else if (fio_rename(sum_tmp, r->checksum_final) == 0) {
                sum_written = 0; /* Spark writes ours when theirs is missing */
            }
            mts_free(theirs);
        }
        goto out;
    }

    stage = "rename data";
    file = r->data_final;
    if ((rc = fio_rename(r->data_tmp, r->data_final)) < 0) goto out;
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
        snprintf(err, errlen, "commit: %s %s: %s", stage, file, mts_strerror(rc));
        if (index_placed) unlink(r->index_final);
        if (data_placed) unlink(r->data_final);
        if (sum_placed) unlink(r->checksum_final);
    }
    unlink(index_tmp); /* gone already after a successful rename */
    if (sum_written) unlink(sum_tmp);
    if (rc < 0 || *adopted) unlink(r->data_tmp);
    if (dirfd >= 0) close(dirfd); /* releases the lock */
    mts_free(offsets);
    mts_free(sums64);
    return rc;
}

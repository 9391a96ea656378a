/* The pre-optimisation strategy, kept as the benchmark reference: every
 * partition's compressed streams are appended to a temp file of its own (one
 * file per non-empty partition per map task, as Spark's bypass-merge writer and
 * the multithreaded writer before streaming did), and at commit the files are
 * concatenated in partition order into the data file with in-kernel copies
 * (Spark's transferTo). Compression, jobs and budget are the same as in the
 * streaming strategy; only where the bytes go differs. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "fileio.h"
#include "internal.h"
#include "writer.h"

#define FD_CLOSED (-2) /* the file exists but its descriptor was closed */

static void part_name(const mts_writer *w, uint32_t p, char *buf, size_t len)
{
    snprintf(buf, len, "%s.p%u", w->data_tmp, p);
}

/* Runs on the ordered writer thread. */
int part_file_append(mts_writer *w, uint32_t p, const void *buf, uint64_t len)
{
    part *pt = &w->parts[p];
    char name[PATH_CAP];
    int rc = 0;
    if (pt->fd < 0) {
        part_name(w, p, name, sizeof name);
        int flags = O_RDWR | O_CREAT | O_APPEND | (pt->fd == FD_CLOSED ? 0 : O_TRUNC);
        int fd = fio_open(name, flags, 0644);
        if (fd == -EMFILE) { /* out of descriptors: close the others */
            for (uint32_t i = 0; i < w->o.num_partitions; i++)
                if (w->parts[i].fd >= 0) {
                    close(w->parts[i].fd);
                    w->parts[i].fd = FD_CLOSED;
                }
            fd = fio_open(name, flags, 0644);
        }
        if (fd < 0) {
            rc = fd;
            writer_fail(w, rc, "create partition file %s (partition %u)", name, p);
            return rc;
        }
        pt->fd = fd;
    }
    uint64_t t0 = mts_now_ns();
    rc = fio_write_all(pt->fd, buf, len);
    __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    if (rc < 0) {
        part_name(w, p, name, sizeof name);
        writer_fail(w, rc, "write partition file %s (partition %u)", name, p);
    }
    return rc;
}

int concat_part_files(mts_writer *w)
{
    int rc = open_data_tmp(w); /* normally open since the writer started */
    if (rc < 0) {
        writer_fail(w, rc, "create data file %s", w->data_tmp);
        return rc;
    }
    char name[PATH_CAP];
    for (uint32_t p = 0; p < w->o.num_partitions; p++) {
        part *pt = &w->parts[p];
        if (pt->fd == -1) continue;
        part_name(w, p, name, sizeof name);
        if (pt->fd == FD_CLOSED && (pt->fd = fio_open(name, O_RDONLY, 0)) < 0) {
            rc = pt->fd;
            pt->fd = FD_CLOSED;
            writer_fail(w, rc, "reopen partition file %s (partition %u)", name, p);
            return rc;
        }
        uint64_t t0 = mts_now_ns();
        rc = fio_copy_range(pt->fd, 0, w->data_fd, pt->len);
        __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
        if (rc < 0) {
            writer_fail(w, rc, "copy partition file %s (partition %u) into %s", name, p, w->data_tmp);
            return rc;
        }
        w->st.bytes_merged += pt->len;
        close(pt->fd);
        pt->fd = -1;
        unlink(name);
    }
    return 0;
}

void remove_part_files(mts_writer *w)
{
    char name[PATH_CAP];
    for (uint32_t p = 0; p < w->o.num_partitions; p++) {
        part *pt = &w->parts[p];
        if (pt->fd == -1) continue;
        if (pt->fd >= 0) close(pt->fd);
        part_name(w, p, name, sizeof name);
        unlink(name);
        pt->fd = -1;
    }
}

/* Run files and the final merge (MODE_HELD).
 *
 * The run file holds what left memory before commit: first the stretch that
 * was streamed into the data file before the partition id went down, then
 * each spill of held chunks, partition by partition. Every partition keeps the
 * list of its stretches. The merge writes partition after partition into a new
 * data file: its stretches by in-kernel copy, then its held chunks. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checksum.h"
#include "fileio.h"
#include "internal.h"
#include "writer.h"

/* A writev batch whose chunks are freed once they are written. */
typedef struct iov_batch {
    struct iovec iov[IOV_MAX];
    chunk *owner[IOV_MAX];
    int n;
} iov_batch;

static int batch_flush(mts_writer *w, iov_batch *b, int fd)
{
    uint64_t t0 = mts_now_ns();
    int rc = b->n ? fio_writev_all(fd, b->iov, b->n) : 0;
    for (int i = 0; i < b->n; i++) {
        limiter_release(&w->lim, b->owner[i]->charge);
        mts_free(b->owner[i]);
    }
    b->n = 0;
    __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    return rc;
}

/* Queues p's held chunks (taking them from p); flushes when full. */
static int batch_add_held(mts_writer *w, iov_batch *b, int fd, part *p, uint64_t *len, uint32_t *sum)
{
    chunk *c = p->held;
    p->held = p->held_tail = NULL;
    int rc = 0;
    while (c) {
        chunk *next = c->next;
        if (rc == 0 && b->n == IOV_MAX) rc = batch_flush(w, b, fd);
        if (w->o.checksum != MTS_CHECKSUM_NONE) *sum = checksum_combine(w->o.checksum, *sum, c->checksum, c->len);
        *len += c->len;
        b->iov[b->n] = (struct iovec){c->data, c->len};
        b->owner[b->n++] = c;
        c = next;
    }
    return rc;
}

int open_data_tmp(mts_writer *w)
{
    w->data_fd = open(w->data_tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->data_fd < 0) return -errno;
    w->data_off = 0;
    return 0;
}

int run_file_open(mts_writer *w)
{
    if (w->run_fd >= 0) return 0;
    w->run_fd = open(w->run_tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->run_fd < 0) {
        int rc = -errno;
        writer_fail(w, rc, "create run file %s", w->run_tmp);
        return rc;
    }
    w->run_off = 0;
    return 0;
}

static int add_runseg(mts_writer *w, part *p, uint64_t off, uint64_t len, uint32_t sum)
{
    runseg *r = mts_malloc(sizeof *r);
    if (!r) {
        writer_fail(w, MTS_E_NOMEM, "allocate a run segment");
        return MTS_E_NOMEM;
    }
    *r = (runseg){NULL, off, len, sum};
    if (p->runs_tail) p->runs_tail->next = r;
    else p->runs = r;
    p->runs_tail = r;
    return 0;
}

/* Called with the pool idle when the first run ends: the partitions already
 * in the data file become the run file's first stretches. */
int data_becomes_run(mts_writer *w)
{
    if (w->data_off == 0) { /* nothing streamed yet: no run file needed */
        close(w->data_fd);
        w->data_fd = -1;
        unlink(w->data_tmp);
        return 0;
    }
    if (rename(w->data_tmp, w->run_tmp) != 0) {
        int rc = -errno;
        writer_fail(w, rc, "rename %s to run file %s", w->data_tmp, w->run_tmp);
        return rc;
    }
    w->run_fd = w->data_fd;
    w->run_off = w->data_off;
    w->data_fd = -1;
    uint64_t off = 0;
    for (uint32_t i = 0; i < w->o.num_partitions; i++) {
        part *p = &w->parts[i];
        if (p->len) FORWARD_IF_ERROR(add_runseg(w, p, off, p->len, p->checksum));
        off += p->len;
        p->len = 0;
        p->checksum = checksum_init(w->o.checksum);
    }
    return 0;
}

int spill_held(mts_writer *w)
{
    FORWARD_IF_ERROR(run_file_open(w));
    iov_batch *b = mts_malloc(sizeof *b);
    if (!b) {
        writer_fail(w, MTS_E_NOMEM, "allocate a spill batch");
        return MTS_E_NOMEM;
    }
    b->n = 0;
    int rc = 0;
    uint64_t start = w->run_off;
    for (uint32_t i = 0; i < w->o.num_partitions && rc == 0; i++) {
        part *p = &w->parts[i];
        if (!p->held) continue;
        uint64_t len = 0;
        uint32_t sum = checksum_init(w->o.checksum);
        rc = batch_add_held(w, b, w->run_fd, p, &len, &sum);
        if (rc == 0) rc = add_runseg(w, p, w->run_off, len, sum);
        w->run_off += len;
    }
    if (rc == 0) rc = batch_flush(w, b, w->run_fd);
    else batch_flush(w, b, -1); /* frees what is queued; the write fails harmlessly */
    mts_free(b);
    if (rc < 0) {
        writer_fail(w, rc, "spill to run file %s at offset %llu", w->run_tmp, (unsigned long long)start);
        return rc;
    }
    w->have_held = 0;
    w->st.bytes_spilled += w->run_off - start;
    return 0;
}

int merge_into_data(mts_writer *w)
{
    int rc = open_data_tmp(w);
    if (rc < 0) {
        writer_fail(w, rc, "create data file %s", w->data_tmp);
        return rc;
    }
    iov_batch *b = mts_malloc(sizeof *b);
    if (!b) {
        writer_fail(w, MTS_E_NOMEM, "allocate a merge batch");
        return MTS_E_NOMEM;
    }
    b->n = 0;
    uint32_t i = 0;
    for (; i < w->o.num_partitions && rc == 0; i++) {
        part *p = &w->parts[i];
        uint64_t len = 0;
        uint32_t sum = checksum_init(w->o.checksum);
        for (runseg *r = p->runs; r && rc == 0; r = r->next) {
            if ((rc = batch_flush(w, b, w->data_fd)) < 0) break;
            uint64_t t0 = mts_now_ns();
            rc = fio_copy_range(w->run_fd, r->off, w->data_fd, r->len);
            __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
            if (w->o.checksum != MTS_CHECKSUM_NONE) sum = checksum_combine(w->o.checksum, sum, r->checksum, r->len);
            len += r->len;
            w->st.bytes_merged += r->len;
        }
        if (rc == 0) rc = batch_add_held(w, b, w->data_fd, p, &len, &sum);
        p->len = len;
        p->checksum = sum;
    }
    if (rc == 0) rc = batch_flush(w, b, w->data_fd);
    else batch_flush(w, b, -1);
    mts_free(b);
    if (rc < 0) {
        writer_fail(w, rc, "merge partition %u into data file %s (run file %s)", i ? i - 1 : 0,
                    w->data_tmp, w->run_tmp);
        return rc;
    }
    if (w->run_fd >= 0) {
        close(w->run_fd);
        w->run_fd = -1;
        unlink(w->run_tmp);
    }
    return 0;
}

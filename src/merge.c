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
#include <sys/file.h>
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

/* Creates the data file under its temp name and locks it: the lock marks
 * the attempt as alive for cleanup_stale() in other processes. */
int open_data_tmp(mts_writer *w)
{
    if (w->data_fd >= 0) return 0; /* created at start and still empty */
    w->data_fd = fio_open(w->data_tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (w->data_fd < 0) {
        int rc = w->data_fd;
        w->data_fd = -1;
        return rc;
    }
    if (flock(w->data_fd, LOCK_EX | LOCK_NB) != 0) { /* a fresh file: cannot be contended */
        int rc = -errno;
        close(w->data_fd);
        w->data_fd = -1;
        return rc;
    }
    w->data_off = 0;
    return 0;
}

int run_file_open(mts_writer *w)
{
    if (w->run_fd >= 0) return 0;
    w->run_fd = fio_open(w->run_tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (w->run_fd < 0) {
        int rc = w->run_fd;
        w->run_fd = -1;
        writer_fail(w, rc, "create run file %s", w->run_tmp);
        return rc;
    }
    w->run_off = 0;
    return 0;
}

/* Appends a run of `count` entries to the run index (taking `entries`). */
static int add_run(mts_writer *w, uint64_t base, run_entry *entries, uint32_t count)
{
    if (w->nruns == w->runs_cap) {
        uint32_t cap = w->runs_cap ? 2 * w->runs_cap : 8;
        run_index *r = mts_realloc(w->runs, cap * sizeof *r);
        if (!r) {
            mts_free(entries);
            writer_fail(w, MTS_E_NOMEM, "grow the run index to %u runs", cap);
            return MTS_E_NOMEM;
        }
        w->runs = r;
        w->runs_cap = cap;
    }
    w->runs[w->nruns++] = (run_index){base, count, entries};
    return 0;
}

/* Room for one entry per partition holding bytes: the caller counts them. */
static run_entry *new_entries(mts_writer *w, uint32_t count)
{
    run_entry *e = mts_malloc((size_t)MTS_MAX(count, 1u) * sizeof *e);
    if (!e) writer_fail(w, MTS_E_NOMEM, "allocate a run index of %u entries", count);
    return e;
}

/* Called with the pool idle when the first run ends: the partitions already
 * in the data file become the run file's first stretches. */
int data_becomes_run(mts_writer *w)
{
    if (w->data_off == 0) return 0; /* nothing streamed yet: the data file stays empty */
    int rc = fio_rename(w->data_tmp, w->run_tmp);
    if (rc < 0) {
        writer_fail(w, rc, "rename %s to run file %s", w->data_tmp, w->run_tmp);
        return rc;
    }
    w->run_fd = w->data_fd;
    w->run_off = w->data_off;
    w->data_fd = -1;
    uint32_t count = 0;
    for (uint32_t i = 0; i < w->o.num_partitions; i++) count += w->parts[i].len != 0;
    run_entry *e = new_entries(w, count);
    if (!e) return MTS_E_NOMEM;
    uint32_t k = 0;
    for (uint32_t i = 0; i < w->o.num_partitions; i++) {
        part *p = &w->parts[i];
        if (p->len) e[k++] = (run_entry){i, p->checksum, p->len};
        p->len = 0;
        p->checksum = checksum_init(w->o.checksum);
    }
    return add_run(w, 0, e, count);
}

int spill_held(mts_writer *w)
{
    FORWARD_IF_ERROR(run_file_open(w));
    uint32_t count = 0;
    for (uint32_t i = 0; i < w->o.num_partitions; i++) count += w->parts[i].held != NULL;
    run_entry *e = new_entries(w, count);
    iov_batch *b = mts_malloc(sizeof *b);
    if (!e || !b) {
        mts_free(e);
        mts_free(b);
        writer_fail(w, MTS_E_NOMEM, "allocate a spill batch");
        return MTS_E_NOMEM;
    }
    b->n = 0;
    int rc = 0;
    uint64_t start = w->run_off;
    uint32_t k = 0;
    for (uint32_t i = 0; i < w->o.num_partitions && rc == 0; i++) {
        part *p = &w->parts[i];
        if (!p->held) continue;
        uint64_t len = 0;
        uint32_t sum = checksum_init(w->o.checksum);
        rc = batch_add_held(w, b, w->run_fd, p, &len, &sum);
        e[k++] = (run_entry){i, sum, len};
        w->run_off += len;
    }
    if (rc == 0) rc = batch_flush(w, b, w->run_fd);
    else batch_flush(w, b, -1); /* frees what is queued; the write fails harmlessly */
    mts_free(b);
    if (rc < 0) {
        mts_free(e);
        writer_fail(w, rc, "spill to run file %s at offset %llu", w->run_tmp, (unsigned long long)start);
        return rc;
    }
    FORWARD_IF_ERROR(add_run(w, start, e, count));
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
    /* Per run: the next entry to take and its offset in the run file. */
    uint32_t *cursor = mts_calloc(MTS_MAX(w->nruns, 1u), sizeof *cursor);
    uint64_t *at = mts_malloc(MTS_MAX(w->nruns, 1u) * sizeof *at);
    if (!b || !cursor || !at) {
        mts_free(b);
        mts_free(cursor);
        mts_free(at);
        writer_fail(w, MTS_E_NOMEM, "allocate a merge batch");
        return MTS_E_NOMEM;
    }
    for (uint32_t r = 0; r < w->nruns; r++) at[r] = w->runs[r].base;
    b->n = 0;
    uint32_t i = 0;
    for (; i < w->o.num_partitions && rc == 0; i++) {
        part *p = &w->parts[i];
        uint64_t len = 0;
        uint32_t sum = checksum_init(w->o.checksum);
        for (uint32_t r = 0; r < w->nruns && rc == 0; r++) {
            run_index *ri = &w->runs[r];
            if (cursor[r] == ri->count || ri->entries[cursor[r]].partition != i) continue;
            run_entry *e = &ri->entries[cursor[r]++];
            if ((rc = batch_flush(w, b, w->data_fd)) < 0) break;
            uint64_t t0 = mts_now_ns();
            rc = fio_copy_range(w->run_fd, at[r], w->data_fd, e->len);
            __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
            if (w->o.checksum != MTS_CHECKSUM_NONE) sum = checksum_combine(w->o.checksum, sum, e->checksum, e->len);
            at[r] += e->len;
            len += e->len;
            w->st.bytes_merged += e->len;
        }
        if (rc == 0) rc = batch_add_held(w, b, w->data_fd, p, &len, &sum);
        p->len = len;
        p->checksum = sum;
    }
    if (rc == 0) rc = batch_flush(w, b, w->data_fd);
    else batch_flush(w, b, -1);
    mts_free(b);
    mts_free(cursor);
    mts_free(at);
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

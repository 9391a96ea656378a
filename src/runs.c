/* Held chunks and the run file: the destination of input that arrives out of
 * partition order.
 *
 * Chunks are held in memory per partition, in arrival order. When the budget
 * runs short (a reclaim, on whichever thread waits), every held chunk is
 * appended to the run file as one more run, partition by partition. The run
 * file may also start with what was streamed into the data file before the
 * partition id first went down (runs_adopt: a rename, no copy). At the end
 * each partition is assembled once, in arrival order: its stretch of every
 * run (small ones read through a buffer of that run's, batched with the
 * chunks into writev; large ones by in-kernel copy), then its held chunks.
 * Compressed bytes are never decoded, but a partition's streams are joined
 * into one where the codec allows it (lz4-java: one end block, at the end,
 * instead of one after every chunk): the run file holds chunks without
 * their ends, the assembly adds one when a partition is complete. With many
 * partitions and small chunks the ends were a large part of the output.
 *
 * The assembly overlaps the compression of the last input. The producer
 * notes, per partition, the last job bound here with a piece of it; once the
 * input has ended (commit) and jobs drain in submission order, a drained job
 * completes every partition whose last job it was. The first partition not
 * complete bounds what can be written: the ones before it are assembled there
 * and then, on the ordered writer, while the other workers compress the rest
 * (the jobs of the last arena, or of the last batches given without waiting,
 * are cut in partition order, so this moves partition by partition), and it
 * is begun itself, its later chunks appended as they drain. Finish assembles
 * what is left. A spill meanwhile (a reclaim) holds only partitions not begun
 * yet: one more run for the assembly to read. */
#include <assert.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checksum.h"
#include "codec.h"
#include "dest.h"
#include "fileio.h"

/* A codec's stream end is kept in the store to close joined partitions. */
_Static_assert(sizeof ((run_store *)0)->end >= LZ4J_HEADER_LEN, "the run store cannot keep lz4-java's end block");

/* The least a spill on the ordered writer writes: a sixteenth of the budget
 * (with 2 MiB job outputs on the default 64 MiB, a run of at least two jobs),
 * never under 256 KiB. */
#define RUNS_SPILL_MIN_DIV 16u
#define RUNS_SPILL_MIN_FLOOR (256u << 10)

/* One partition's stretch in one run: 16 bytes. A run holds its partitions
 * contiguously in partition order from its base offset. */
typedef struct run_entry {
    uint32_t partition;
    uint32_t checksum;
    uint64_t len;
} run_entry;

struct run_index {
    uint64_t base;  /* offset of the run in the run file */
    uint32_t count; /* non-empty partitions in the run */
    run_entry *entries;
    uint32_t next;  /* assembly: the next entry to write */
    uint64_t at;    /* and its offset in the run file */
    unsigned char *buf; /* assembly: bytes [buf_off, buf_off + buf_len) of the run file */
    uint64_t buf_off, buf_len;
    int open;       /* its stretches lack their streams' ends (a spill; not an adopted run) */
};

/* A writev batch whose chunks are freed once written (an entry without an
 * owner points into a run's read buffer, or the store's end). */
typedef struct iov_batch {
    struct iovec iov[IOV_MAX];
    chunk *owner[IOV_MAX];
    int n;
} iov_batch;

/* At the merge, a run's stretch of one partition smaller than this is read
 * through a buffer of the run's and written as part of a writev batch, not
 * copied in the kernel by a call of its own: with many partitions and runs
 * that are small (a spill holds a sixteenth of the budget), a call per
 * stretch cost more than the copying. One read fills a run's buffer with
 * the stretches of several partitions in a row. The buffers of all runs
 * together take MERGE_READ_TOTAL, each between the bounds below; a stretch
 * longer than its run's buffer is copied in the kernel too. (They were
 * a mapping of the run file, its pages dropped behind the merge's cursors;
 * but a read of a few KiB mapped the whole large folio the page cache held
 * it in, up to 2 MiB ahead of each run's cursor, which kept half of a
 * 118 MB run file resident: BENCHMARKS.md.) */
#define MERGE_STRETCH_MAX (64u << 10)
#define MERGE_READ_TOTAL (4u << 20)
#define MERGE_READ_MIN (16u << 10)
#define MERGE_READ_MAX (256u << 10)

/* Writes the batch to fd (fd < 0: drops it) and frees its chunks. */
static int batch_flush(run_store *r, iov_batch *b, int fd)
{
    uint64_t t0 = mts_now_ns(), charge = 0, freed = 0;
    int rc = b->n && fd >= 0 ? fio_writev_all(fd, b->iov, b->n) : 0;
    for (int i = 0; i < b->n; i++) {
        if (!b->owner[i]) continue; /* bytes of a run's buffer, or the end */
        charge += b->owner[i]->charge;
        freed += chunk_free(b->owner[i]);
    }
    b->n = 0;
    eng_release(r->env->budget, freed);
    eng_note_reclaimable(r->env->budget, -(int64_t)charge);
    r->held -= charge;
    __atomic_add_fetch(&r->env->io->write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    return rc;
}

/* Queues partition p's held chunks without their ends (taking them);
 * flushes when full. */
static int batch_add_held(run_store *r, iov_batch *b, int fd, uint32_t p, uint64_t *len, uint32_t *sum)
{
    chunk *c = r->head[p];
    r->head[p] = r->tail[p] = NULL;
    int rc = 0;
    while (c) {
        chunk *next = c->next;
        if (b->n == IOV_MAX) {
            int frc = batch_flush(r, b, rc == 0 ? fd : -1);
            if (rc == 0) rc = frc;
        }
        *sum = dest_combine(r->env, *sum, chunk_body_sum(c), chunk_body_len(c));
        *len += chunk_body_len(c);
        b->iov[b->n] = (struct iovec){c->data, (size_t)chunk_body_len(c)};
        b->owner[b->n++] = c;
        c = next;
    }
    return rc;
}

static int add_run(run_store *r, uint64_t base, run_entry *entries, uint32_t count, int open)
{
    if (r->nruns == r->runs_cap) {
        uint32_t cap = r->runs_cap ? 2 * r->runs_cap : 8;
        run_index *g = mts_realloc(r->runs, cap * sizeof *g);
        if (!g) {
            mts_free(entries);
            return dest_fail(r->env, MTS_E_NOMEM, "grow the run index to %u runs", cap);
        }
        r->runs = g;
        r->runs_cap = cap;
    }
    r->runs[r->nruns++] = (run_index){base, count, entries, 0, base, NULL, 0, 0, open};
    return 0;
}

static run_entry *new_entries(run_store *r, uint32_t count)
{
    run_entry *e = mts_malloc((size_t)MTS_MAX(count, 1u) * sizeof *e);
    if (!e) dest_fail(r->env, MTS_E_NOMEM, "allocate a run index of %u entries", count);
    return e;
}

/* ---- the destination -------------------------------------------------------- */

static int spill_locked(run_store *r);
static int assemble_upto(run_store *r, uint32_t upto, int all);

static run_store *store_of(destination *d)
{
    return (run_store *)(void *)d; /* its first member */
}

/* Takes chunks into the held lists, keeping the first end met; mu held. */
static void hold_locked(run_store *r, chunk **c, uint32_t n, uint64_t *charge)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = c[i]->partition;
        if (!r->end_len && c[i]->tail && c[i]->tail <= sizeof r->end) {
            r->end_len = c[i]->tail;
            memcpy(r->end, c[i]->data + chunk_body_len(c[i]), r->end_len);
            r->end_sum = checksum_update(r->env->algo, checksum_init(r->env->algo), r->end, r->end_len);
        }
        c[i]->next = NULL;
        if (r->tail[p]) r->tail[p]->next = c[i];
        else r->head[p] = c[i];
        r->tail[p] = c[i];
        *charge += c[i]->charge;
    }
    r->held += *charge;
}

/* With the input ended and `job` drained: the first partition that a later
 * job still has a piece of (the last partition if none). mu held. */
static uint32_t first_incomplete(const run_store *r, uint64_t job)
{
    uint32_t p = r->begun ? r->begun - 1 : 0;
    while (p + 1 < r->env->nparts && r->last_job[p] <= job) p++;
    return p;
}

static int runs_put(destination *d, chunk **c, uint32_t n, uint64_t job)
{
    run_store *r = store_of(d);
    uint64_t charge = 0;
    pthread_mutex_lock(&r->mu);
    hold_locked(r, c, n, &charge);
    int rc = 0;
    int waited = eng_note_reclaimable(r->env->budget, (int64_t)charge);
    if (r->ended) {
        /* After a failure nothing will read the data file: only hold them, for discard. */
        if (!r->env->failed(r->env->ctx)) rc = assemble_upto(r, first_incomplete(r, job), 0);
    } else if (waited && r->held >= r->spill_min) {
        /* Someone waits for budget: spill here, on the ordered writer, while
         * the other workers go on compressing. Left to the waiter, the spill
         * would come only once nothing is in flight anywhere: a stall of the
         * whole pipeline. Below spill_min a spill is not worth its run. */
        rc = spill_locked(r);
        r->early_spills++;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int spill_locked(run_store *r)
{
    const dest_env *env = r->env;
    if (!r->held) return 0;
    if (env->failed(env->ctx)) { /* nothing will read them */
        for (uint32_t p = 0; p < env->nparts; p++) {
            iov_batch b;
            b.n = 0;
            for (chunk *c = r->head[p], *next; c; c = next) {
                next = c->next;
                b.owner[b.n++] = c;
                if (b.n == IOV_MAX) batch_flush(r, &b, -1);
            }
            batch_flush(r, &b, -1);
            r->head[p] = r->tail[p] = NULL;
        }
        return env->failed(env->ctx);
    }
    if (r->fd < 0) {
        int fd = fio_open(r->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return dest_fail(env, fd, "create run file %s", r->path);
        r->fd = fd;
        r->off = 0;
    }
    uint32_t count = 0;
    for (uint32_t p = 0; p < env->nparts; p++) count += r->head[p] != NULL;
    run_entry *e = new_entries(r, count);
    iov_batch *b = mts_malloc(sizeof *b);
    if (!e || !b) {
        mts_free(e);
        mts_free(b);
        return dest_fail(env, MTS_E_NOMEM, "allocate a spill batch");
    }
    b->n = 0;
    int rc = 0;
    uint64_t start = r->off;
    uint32_t k = 0;
    for (uint32_t p = 0; p < env->nparts && rc == 0; p++) {
        if (!r->head[p]) continue;
        uint64_t len = 0;
        uint32_t sum = checksum_init(env->algo);
        rc = batch_add_held(r, b, r->fd, p, &len, &sum);
        e[k++] = (run_entry){p, sum, len};
        r->off += len;
    }
    int frc = batch_flush(r, b, rc == 0 ? r->fd : -1);
    if (rc == 0) rc = frc;
    mts_free(b);
    if (rc < 0) {
        mts_free(e);
        return dest_fail(env, rc, "spill to run file %s at offset %llu", r->path, (unsigned long long)start);
    }
    __atomic_add_fetch(&env->io->bytes_spilled, r->off - start, __ATOMIC_RELAXED);
    return add_run(r, start, e, count, 1);
}

void runs_end_input(run_store *r, out_file *out)
{
    pthread_mutex_lock(&r->mu); /* also orders the producer's last_job before the drains that read it */
    r->out = out;
    r->ended = 1;
    pthread_mutex_unlock(&r->mu);
}

int runs_spill(run_store *r)
{
    pthread_mutex_lock(&r->mu);
    int rc = spill_locked(r);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- assembly ------------------------------------------------------------------ */

/* Starts the assembly into r->out (once): the data file, the batch, and the
 * size of the runs' read buffers (runs spilled later, by a reclaim while the
 * last jobs drain, get the same). mu held. */
static int assemble_start(run_store *r)
{
    if (r->batch) return 0;
    int rc = out_create(r->out);
    if (rc < 0) return dest_fail(r->env, rc, "create data file %s", r->out->path);
    if (!(r->batch = mts_malloc(sizeof *r->batch)))
        return dest_fail(r->env, MTS_E_NOMEM, "allocate a merge batch");
    r->batch->n = 0;
    r->read_size = MTS_MIN(MERGE_READ_MAX, MTS_MAX(MERGE_READ_MIN, MERGE_READ_TOTAL / MTS_MAX(r->nruns, 1u)));
    return 0;
}

/* The stretch of len (<= r->read_size) bytes at ri->at, from the run's
 * buffer, reading the run file from there on into it first where it does
 * not hold them (after writing the batch, which may point into it). NULL
 * (rc set) on failure. mu held. */
static const unsigned char *run_stretch(run_store *r, run_index *ri, uint64_t len, int *rc)
{
    if (ri->buf && ri->at >= ri->buf_off && ri->at + len <= ri->buf_off + ri->buf_len)
        return ri->buf + (ri->at - ri->buf_off);
    if ((*rc = batch_flush(r, r->batch, r->out->fd)) < 0) return NULL;
    if (!ri->buf && !(ri->buf = mts_malloc(r->read_size))) {
        *rc = MTS_E_NOMEM;
        return NULL;
    }
    uint64_t n = MTS_MIN((uint64_t)r->read_size, r->off - ri->at); /* at least len: the stretch is in the file */
    assert(n >= len);
    if ((*rc = fio_pread_all(r->fd, ri->buf, (size_t)n, ri->at)) < 0) {
        ri->buf_len = 0;
        return NULL;
    }
    ri->buf_off = ri->at;
    ri->buf_len = n;
    return ri->buf;
}

/* Writes partition p's stretch of every run: p is the first partition not
 * yet begun. mu held. */
static int assemble_runs(run_store *r, uint32_t p)
{
    out_file *out = r->out;
    iov_batch *b = r->batch;
    int rc = 0;
    for (uint32_t k = 0; k < r->nruns && rc == 0; k++) {
        run_index *ri = &r->runs[k];
        if (ri->next == ri->count || ri->entries[ri->next].partition != p) continue;
        run_entry *e = &ri->entries[ri->next++];
        r->end_open |= ri->open && e->len;
        if (e->len < MERGE_STRETCH_MAX && e->len <= r->read_size) {
            if (b->n == IOV_MAX && (rc = batch_flush(r, b, out->fd)) < 0) break;
            const unsigned char *bytes = run_stretch(r, ri, e->len, &rc);
            if (!bytes) break;
            b->iov[b->n] = (struct iovec){(void *)(uintptr_t)bytes, (size_t)e->len};
            b->owner[b->n++] = NULL;
            out_merged(out, p, e->len, e->checksum);
        } else if ((rc = batch_flush(r, b, out->fd)) == 0) {
            rc = out_copy(out, p, r->fd, ri->at, e->len, e->checksum);
        }
        ri->at += e->len;
    }
    return rc;
}

/* Ends partition p in the data file if its bytes lack their end: one end
 * for the streams joined. mu held. */
static int assemble_close(run_store *r, uint32_t p)
{
    int open = r->end_open;
    r->end_open = 0;
    if (!open || !r->end_len) return 0;
    iov_batch *b = r->batch;
    if (b->n == IOV_MAX) FORWARD_IF_ERROR(batch_flush(r, b, r->out->fd));
    b->iov[b->n] = (struct iovec){r->end, r->end_len};
    b->owner[b->n++] = NULL;
    out_appended(r->out, p, r->end_len, r->end_sum);
    return 0;
}

/* Assembles partitions up to `upto` into the data file: each one's runs
 * when it begins, then its held chunks, then its end; `upto` itself is
 * only begun (it may get more later) unless all: the input is complete.
 * mu held. */
static int assemble_upto(run_store *r, uint32_t upto, int all)
{
    int rc = assemble_start(r);
    uint32_t p = r->begun ? r->begun - 1 : 0;
    for (; p <= upto && rc == 0; p++) {
        if (p == r->begun) {
            rc = assemble_runs(r, p);
            r->begun = p + 1;
        }
        if (rc == 0 && r->head[p]) {
            uint64_t len = 0;
            uint32_t sum = checksum_init(r->env->algo);
            r->end_open |= r->head[p]->tail != 0; /* chunks of one codec: all with an end, or none */
            rc = batch_add_held(r, r->batch, r->out->fd, p, &len, &sum);
            out_appended(r->out, p, len, sum);
        }
        if (rc == 0 && (p < upto || all)) rc = assemble_close(r, p);
    }
    if (rc == 0) rc = batch_flush(r, r->batch, r->out->fd);
    if (rc < 0)
        return dest_fail(r->env, rc, "merge partition %u into data file %s (run file %s)", p ? p - 1 : 0,
                         r->out->path, r->path);
    return 0;
}

/* Frees the batch (dropping what it holds) and the runs' buffers. mu held. */
static void assemble_end(run_store *r)
{
    if (r->batch) batch_flush(r, r->batch, -1);
    mts_free(r->batch);
    r->batch = NULL;
    for (uint32_t k = 0; k < r->nruns; k++) {
        mts_free(r->runs[k].buf);
        r->runs[k].buf = NULL;
        r->runs[k].buf_len = 0;
    }
}

static int runs_finish(destination *d, out_file *out)
{
    run_store *r = store_of(d);
    pthread_mutex_lock(&r->mu);
    r->out = out;
    int rc = assemble_upto(r, r->env->nparts - 1, 1);
    assemble_end(r);
    if (rc == 0 && r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
        unlink(r->path);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void runs_discard(destination *d)
{
    run_store *r = store_of(d);
    pthread_mutex_lock(&r->mu);
    assemble_end(r);
    for (uint32_t p = 0; r->head && r->tail && p < r->env->nparts; p++) {
        chunk_free_list(r->env, r->head[p]);
        r->head[p] = r->tail[p] = NULL;
    }
    eng_note_reclaimable(r->env->budget, -(int64_t)r->held);
    r->held = 0;
    for (uint32_t k = 0; k < r->nruns; k++) mts_free(r->runs[k].entries);
    mts_free(r->runs);
    r->runs = NULL;
    r->nruns = r->runs_cap = 0;
    r->begun = 0;
    r->ended = 0;
    r->end_open = 0;
    if (r->last_job) memset(r->last_job, 0, r->env->nparts * sizeof *r->last_job);
    if (r->fd >= 0) { /* the run file exists while it is open */
        close(r->fd);
        unlink(r->path);
    }
    r->fd = -1;
    pthread_mutex_unlock(&r->mu);
}

static const dest_ops runs_ops = {runs_put, runs_finish, runs_discard};

int runs_init(run_store *r, const dest_env *env)
{
    memset(r, 0, sizeof *r);
    r->d.ops = &runs_ops;
    r->env = env;
    r->fd = -1;
    r->spill_min = MTS_MAX(eng_cap(env->budget->e) / RUNS_SPILL_MIN_DIV, (uint64_t)RUNS_SPILL_MIN_FLOOR);
    int err = pthread_mutex_init(&r->mu, NULL);
    if (err) return -err;
    r->head = mts_calloc(env->nparts, sizeof *r->head);
    r->tail = mts_calloc(env->nparts, sizeof *r->tail);
    r->last_job = mts_calloc(env->nparts, sizeof *r->last_job);
    return r->head && r->tail && r->last_job ? 0 : MTS_E_NOMEM;
}

void runs_free(run_store *r)
{
    if (!r->d.ops) return;
    runs_discard(&r->d);
    mts_free(r->head);
    mts_free(r->tail);
    mts_free(r->last_job);
    pthread_mutex_destroy(&r->mu);
    r->d.ops = NULL;
}

int runs_adopt(run_store *r, out_file *out)
{
    if (out->off == 0) return 0; /* nothing streamed yet: the data file stays */
    pthread_mutex_lock(&r->mu);
    int rc = fio_rename(out->path, r->path);
    if (rc < 0) {
        pthread_mutex_unlock(&r->mu);
        return dest_fail(r->env, rc, "rename %s to run file %s", out->path, r->path);
    }
    r->fd = out->fd;
    r->off = out->off;
    out->fd = -1;
    if ((rc = out_create(out)) < 0) { /* the attempt's anchor again, empty */
        pthread_mutex_unlock(&r->mu);
        return dest_fail(r->env, rc, "create data file %s", out->path);
    }
    uint32_t count = 0;
    for (uint32_t p = 0; p < r->env->nparts; p++) count += out->len[p] != 0;
    run_entry *e = new_entries(r, count);
    if (e) {
        uint32_t k = 0;
        for (uint32_t p = 0; p < r->env->nparts; p++)
            if (out->len[p]) e[k++] = (run_entry){p, out->sum[p], out->len[p]};
        rc = add_run(r, 0, e, count, 0);
    } else {
        rc = MTS_E_NOMEM;
    }
    out_forget(out);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

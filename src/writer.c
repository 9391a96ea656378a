/* The writer's state machine.
 *
 * MODE_STREAM (the start): input is partition-ordered so far. Jobs go to the
 * data file itself (out_file), in submission order, which is partition
 * order. A single batch therefore makes no file besides its outputs.
 *
 * MODE_HELD (after the partition id first goes down): what was streamed so far
 * becomes the first run of the run store (a rename, no copy). New input goes
 * to the run store: held in memory as compressed chunks, spilled to the run
 * file only when the budget asks, merged into the data file once at the end.
 *
 * The baseline strategy starts in MODE_HELD with one file per partition as
 * its destination.
 *
 * The budget (the engine's) covers every byte the writer holds: stage and
 * arena buffers, job descriptors, compression outputs sized by the codec bound
 * until compressed, then held chunks until written. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "commit.h"
#include "fileio.h"
#include "layout.h"
#include "writer_int.h"


/* ---- errors --------------------------------------------------------------- */

/* Records the first failure; wakes the producer if it waits for budget. */
static void record_failure(mts_writer *w, int code, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&w->mu);
    if (!w->err) {
        mts_vmsg(w->fail_msg, sizeof w->fail_msg, code, fmt, ap);
        __atomic_store_n(&w->err, code, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&w->mu);
    if (w->client_up) eng_client_abort(&w->client);
}

void writer_fail(mts_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record_failure(w, code, fmt, ap);
    va_end(ap);
}

static void env_fail(void *ctx, int code, const char *msg)
{
    /* msg is complete already: keep it as it is. */
    mts_writer *w = ctx;
    pthread_mutex_lock(&w->mu);
    if (!w->err) {
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
        __atomic_store_n(&w->err, code, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&w->mu);
    if (w->client_up) eng_client_abort(&w->client);
}

int writer_failed(mts_writer *w) { return __atomic_load_n(&w->err, __ATOMIC_ACQUIRE); }

static int env_failed(void *ctx) { return writer_failed(ctx); }


/* Rejects one call without changing the writer's state. */
static int reject(mts_writer *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reject(mts_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mts_vmsg(w->msg, sizeof w->msg, code, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- teardown ------------------------------------------------------------- */

/* Waits for the jobs in flight (which skip their work once the writer has
 * failed) and releases everything the writer holds. remove_data: the data
 * file too (not after finish, where it is the caller's). */
static void release_all(mts_writer *w, int remove_data)
{
    if (w->client_up) eng_wait_idle(&w->client);
    intake_free(w);
    if (w->held_dest) w->held_dest->ops->discard(w->held_dest);
    /* Nothing is reclaimable now; a reclaim another thread began before may
     * still be giving back what it took (a spare arena). */
    if (w->client_up) eng_wait_reclaims(&w->client);
    if (remove_data && w->out.fd >= 0) unlink(w->out.path); /* ours while open */
    out_close(&w->out);
}

/* Moves an open writer whose work failed into ST_FAILED; returns the error. */
static int fail_now(mts_writer *w, int rc)
{
    if (!writer_failed(w)) writer_fail(w, rc, "internal error");
    release_all(w, 1);
    w->state = ST_FAILED;
    return writer_failed(w);
}

static int check_open_slow(mts_writer *w, const char *op)
{
    if (w->state == ST_OPEN && writer_failed(w)) return fail_now(w, writer_failed(w));
    switch (w->state) {
    case ST_OPEN: return 0;
    case ST_FAILED: return writer_failed(w);
    case ST_COMMITTED: return reject(w, MTS_E_STATE, "%s: the writer has already committed", op);
    case ST_ABORTED: return reject(w, MTS_E_ABORTED, "%s: the writer was aborted", op);
    }
    return MTS_E_STATE;
}

/* Every input call's first step: inline, since per-record appends make it
 * the commonest call. */
static inline int check_open(mts_writer *w, const char *op)
{
    if (__builtin_expect(w->state == ST_OPEN && !writer_failed(w), 1)) return 0;
    return check_open_slow(w, op);
}

/* ---- create --------------------------------------------------------------- */

int mts_writer_create(const mts_writer_options *opts, mts_writer **out, char *errbuf, size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!errbuf) { errbuf = scratch; errlen = sizeof scratch; }
    if (errlen) errbuf[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!opts) return mts_msg(errbuf, errlen, MTS_E_ARG, "options: NULL");
    FORWARD_IF_ERROR(writer_validate(opts, errbuf, errlen));

    mts_writer *w = mts_calloc(1, sizeof *w);
    if (!w) return mts_msg(errbuf, errlen, MTS_E_NOMEM, "create writer: allocate");
    w->o = *opts;
    if (opts->dir) {
        snprintf(w->dir, sizeof w->dir, "%s", opts->dir);
    } else { /* the directory of data_path */
        const char *slash = strrchr(opts->data_path, '/');
        if (!slash) snprintf(w->dir, sizeof w->dir, ".");
        else if (slash == opts->data_path) snprintf(w->dir, sizeof w->dir, "/");
        else snprintf(w->dir, sizeof w->dir, "%.*s", (int)(slash - opts->data_path), opts->data_path);
    }
    w->o.dir = w->dir;
    w->cp = (codec_params){opts->codec, opts->level, opts->block_size};
    w->codec = codec_get(opts->codec);
    w->cur_part = -1;
    w->mode = opts->strategy == MTS_STRATEGY_BASELINE ? MODE_HELD : MODE_STREAM;
    w->state = ST_FAILED; /* until create succeeds */
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->env = (dest_env){&w->client, opts->checksum, opts->num_partitions, &w->io, env_fail, env_failed, w};

    const char *what = "start the engine";
    int rc = 0;
    mts_engine *engine = opts->engine;
    if (!engine && (rc = mts_engine_create(opts->threads, opts->max_bytes_in_flight, &engine, NULL, 0)) < 0)
        goto fail;
    rc = eng_client_init(&w->client, engine, &writer_client_ops, w);
    if (!opts->engine) mts_engine_free(engine); /* the client's reference keeps a private engine */
    if (rc < 0) goto fail;
    w->engine = engine;
    w->client_up = 1;
    writer_fit_sizes(w, eng_cap(engine));
    intake_init(w);

    what = "allocate per-partition state";
    if ((rc = out_init(&w->out, &w->env)) < 0) goto fail;
    if (opts->strategy == MTS_STRATEGY_BASELINE) {
        rc = part_files_init(&w->parts, &w->env, "");
        w->held_dest = &w->parts.d;
    } else {
        rc = runs_init(&w->runs, &w->env);
        w->held_dest = &w->runs.d;
    }
    if (rc < 0) goto fail;
    w->plan = mts_malloc(MAX_SEGS_PER_JOB * sizeof(seg));
    if (!w->plan) { rc = MTS_E_NOMEM; goto fail; }
    what = "name the output files";
    if ((rc = writer_build_names(w)) < 0) goto fail;
    if ((rc = writer_open_outputs(w, &what)) < 0) goto fail;
    w->state = ST_OPEN;
    *out = w;
    return 0;
fail:
    mts_msg(errbuf, errlen, rc, "create writer: %s (%s)", what, w->out.path[0] ? w->out.path : w->dir);
    w->err = rc;
    mts_writer_free(w);
    return rc;
}

/* How far ahead of the record being taken the intake asks for input bytes
 * (BENCHMARKS.md, "The intake reads ahead"): at about 70 bytes a record, some 30
 * records, far enough to cover a miss to memory. */
#define READ_AHEAD 2048u

/* ---- input ---------------------------------------------------------------- */

/* The partition id went down: a new run starts. */
static int enter_held(mts_writer *w)
{
    FORWARD_IF_ERROR(intake_flush(w, 0));
    eng_wait_idle(&w->client);
    if (writer_failed(w)) return writer_failed(w);
    /* The data file becomes the run file and a fresh anchor takes its name:
     * under the directory lock, which attempt claims hold too. */
    int dfd = w->o.data_path ? -1 : dir_lock(w->dir);
    if (dfd < 0 && !w->o.data_path) {
        writer_fail(w, dfd, "lock the directory %s", w->dir);
        return dfd;
    }
    int rc = runs_adopt(&w->runs, &w->out);
    dir_unlock(dfd);
    FORWARD_IF_ERROR(rc);
    w->mode = MODE_HELD;
    return 0;
}

/* One record, checked already; *runs counts where the partition id goes
 * down (a new run starts). */
static inline int append_one(mts_writer *w, uint32_t partition, const unsigned char *bytes, size_t len,
                             uint64_t *runs)
{
    int rc = 0;
    if ((int64_t)partition < w->cur_part || w->cur_part < 0) {
        (*runs)++;
        if (w->mode == MODE_STREAM && w->cur_part >= 0) rc = enter_held(w);
    }
    if (rc == 0)
        rc = w->mode == MODE_HELD ? intake_held(w, partition, bytes, len) : intake_stream(w, partition, bytes, len);
    w->cur_part = partition;
    return rc;
}

int mts_writer_append(mts_writer *w, uint32_t partition, const void *bytes, size_t len)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, "append"));
    if (partition >= w->o.num_partitions)
        return reject(w, MTS_E_RANGE, "append: partition %u is out of range (%u partitions)", partition,
                      w->o.num_partitions);
    if (!bytes && len) return reject(w, MTS_E_ARG, "append: NULL bytes for partition %u", partition);
    if (len > UINT32_MAX - RECORD_HEADER || w->st.bytes_in > UINT64_MAX - len)
        return reject(w, MTS_E_OVERFLOW, "append: %zu-byte record for partition %u is too large", len, partition);
    uint64_t runs = 0;
    /* Callers mostly append records that lie one after another in a buffer,
     * so the bytes ahead of this one are likely the next records'; asking
     * for them early is a hint (it cannot fault), and where the guess is
     * wrong it costs a cache line. */
    __builtin_prefetch((const void *)((uintptr_t)bytes + len + READ_AHEAD), 0, 3);
    int rc = append_one(w, partition, bytes, len, &runs);
    if (runs) stat_add(&w->st.runs, runs);
    if (rc < 0) return fail_now(w, rc);
    stat_add(&w->st.records, 1);
    stat_add(&w->st.bytes_in, len);
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One pass: each record is taken as its header is checked, while its bytes
 * are in cache (a pass that checks the whole buffer first reads it twice,
 * and cost a quarter of the tagged path: BENCHMARKS.md). So a malformed
 * header fails the writer rather than rejecting the call. */
int mts_writer_append_tagged(mts_writer *w, const void *buf, size_t len)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, "append_tagged"));
    if (!buf && len) return reject(w, MTS_E_ARG, "append_tagged: NULL buffer of %zu bytes", len);
    if (w->st.bytes_in > UINT64_MAX - len) /* the records' bytes are fewer than len */
        return reject(w, MTS_E_OVERFLOW, "append_tagged: %zu bytes overflow", len);
    const unsigned char *b = buf;
    uint64_t records = 0, bytes = 0, runs = 0;
    int rc = 0;
    for (size_t o = 0; o < len && rc == 0;) {
        /* Each header's place comes from the header before it, a chain of
         * loads that the CPU cannot run ahead of: asking for the bytes some
         * records ahead halves the copy's time. */
        if (len - o > READ_AHEAD) __builtin_prefetch(b + o + READ_AHEAD, 0, 3);
        if (len - o < RECORD_HEADER) {
            writer_fail(w, MTS_E_ARG, "append_tagged: the record header at offset %zu is cut off (%zu bytes left)", o,
                        len - o);
            rc = MTS_E_ARG;
            break;
        }
        uint32_t p = be32(b + o), n = be32(b + o + 4);
        if (p >= w->o.num_partitions) {
            writer_fail(w, MTS_E_RANGE, "append_tagged: record at offset %zu: partition %d is out of range (%u "
                        "partitions)", o, (int32_t)p, w->o.num_partitions);
            rc = MTS_E_RANGE;
            break;
        }
        if (n > len - o - RECORD_HEADER || n > UINT32_MAX - RECORD_HEADER) {
            writer_fail(w, MTS_E_ARG, "append_tagged: record at offset %zu claims %d bytes, %zu left", o, (int32_t)n,
                        len - o - RECORD_HEADER);
            rc = MTS_E_ARG;
            break;
        }
        rc = append_one(w, p, b + o + RECORD_HEADER, n, &runs);
        o += RECORD_HEADER + n;
        records++;
        bytes += n;
    }
    stat_add(&w->st.runs, runs);
    if (rc < 0) return fail_now(w, rc);
    stat_add(&w->st.records, records);
    stat_add(&w->st.bytes_in, bytes);
    return 0;
}

/* Whether a task's first batch, given asynchronously, goes to the run store
 * instead of streaming into the data file. Streamed, it is written as its
 * jobs drain; but if a second batch follows, the partition id goes down and
 * the data file becomes the run file: that waits for every job of the first
 * batch to drain before the second can be queued, and the first batch's
 * output is written again when the partitions are assembled. Held, nothing
 * waits and every byte is written once, at the assembly, which overlaps the
 * compression of the last batch; a task of one batch pays for that only an
 * assembly at its end instead of writes as it goes. So a first batch that is
 * small against the budget (a quarter: its output, held until the
 * assembly, then cannot crowd the budget) is held, as tasks that give their
 * input in small batches give more than one; a large one streams. The
 * baseline strategy keeps its own way (partition files). */
static int hold_first(const mts_writer *w, uint64_t bytes, mts_batch_done done)
{
    return done && w->cur_part < 0 && w->held_dest == &w->runs.d && bytes <= eng_cap(w->engine) / 4;
}

/* add_batch and add_batch_async: done is NULL for the first, which returns
 * once no job reads the batch, and never for the second. */
static int add_batch(mts_writer *w, const char *op, const void *data, const uint64_t *offsets, mts_batch_done done,
                     void *ctx)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, op));
    uint32_t n = w->o.num_partitions;
    if (!offsets) return reject(w, MTS_E_ARG, "%s: NULL offsets", op);
    if (offsets[0] != 0)
        return reject(w, MTS_E_ARG, "%s: offsets[0] is %llu, not 0", op, (unsigned long long)offsets[0]);
    int64_t first = -1, last = -1;
    for (uint32_t p = 0; p < n; p++) {
        if (offsets[p + 1] < offsets[p])
            return reject(w, MTS_E_ARG, "%s: offsets[%u] < offsets[%u] (partition %u)", op, p + 1, p, p);
        if (offsets[p + 1] > offsets[p]) {
            if (first < 0) first = p;
            last = p;
        }
    }
    uint64_t total = offsets[n];
    if (!data && total) return reject(w, MTS_E_ARG, "%s: NULL data for %llu bytes", op, (unsigned long long)total);
    if (total > SIZE_MAX || w->st.bytes_in > UINT64_MAX - total)
        return reject(w, MTS_E_OVERFLOW, "%s: %llu bytes overflow", op, (unsigned long long)total);
    stat_add(&w->st.batches, 1);
    if (first < 0) {
        if (done) done(ctx); /* nothing to read */
        return 0;
    }
    if (w->cur_part < 0 || first < w->cur_part) stat_add(&w->st.runs, 1);
    int rc = 0;
    if (w->mode == MODE_STREAM && (first < w->cur_part || hold_first(w, total, done))) rc = enter_held(w);
    destination *dest = w->mode == MODE_STREAM ? &w->out.d : w->held_dest;
    if (!rc) rc = intake_batch(w, data, offsets, dest, done, ctx);
    w->cur_part = last;
    if (rc < 0) return fail_now(w, rc);
    stat_add(&w->st.bytes_in, total);
    return 0;
}

int mts_writer_add_batch(mts_writer *w, const void *data, const uint64_t *offsets)
{
    return add_batch(w, "add_batch", data, offsets, NULL, NULL);
}

static void batch_done_nothing(void *ctx)
{
    (void)ctx;
}

int mts_writer_add_batch_async(mts_writer *w, const void *data, const uint64_t *offsets, mts_batch_done done,
                               void *ctx)
{
    return add_batch(w, "add_batch_async", data, offsets, done ? done : batch_done_nothing, ctx);
}

/* ---- finish and commit ------------------------------------------------------ */

/* Completes the data file (everything but the commit): its lengths and
 * checksums are then in w->out. On failure the writer is failed. */
static int complete_data(mts_writer *w, const char *op)
{
    int rc = intake_flush(w, 1);
    eng_wait_idle(&w->client);
    if (rc == 0) rc = writer_failed(w);
    if (rc == 0 && w->mode == MODE_HELD) rc = w->held_dest->ops->finish(w->held_dest, &w->out);
    if (rc == 0 && w->o.fsync) {
        uint64_t t0 = mts_now_ns();
        if ((rc = fio_fsync(w->out.fd)) < 0) writer_fail(w, rc, "%s: fsync data file %s", op, w->out.path);
        __atomic_add_fetch(&w->io.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    }
    return rc < 0 ? fail_now(w, rc) : 0;
}

/* Copies the lengths and checksums out (either may be NULL); returns the
 * data file's size. */
static uint64_t hand_out(const mts_writer *w, const uint64_t *lens, const uint32_t *sums, uint64_t *lengths,
                         uint64_t *checksums)
{
    uint64_t total = 0;
    for (uint32_t p = 0; p < w->o.num_partitions; p++) {
        total += lens[p];
        if (lengths) lengths[p] = lens[p];
        if (checksums) checksums[p] = sums[p];
    }
    return total;
}

int mts_writer_finish(mts_writer *w, uint64_t *lengths, uint64_t *checksums)
{
    if (!w) return MTS_E_ARG;
    if (!w->o.data_path && w->state == ST_OPEN)
        return reject(w, MTS_E_STATE, "finish: the writer was created without data_path; use commit");
    FORWARD_IF_ERROR(check_open(w, "finish"));
    FORWARD_IF_ERROR(complete_data(w, "finish"));
    uint64_t total = hand_out(w, w->out.len, w->out.sum, lengths, checksums);
    __atomic_store_n(&w->st.bytes_out, total, __ATOMIC_RELAXED);
    release_all(w, 0); /* the data file stays: it is the caller's now */
    w->state = ST_COMMITTED;
    return 0;
}

int mts_writer_commit(mts_writer *w, uint64_t *lengths, uint64_t *checksums, mts_commit_result *res)
{
    if (!w) return MTS_E_ARG;
    if (w->o.data_path && w->state == ST_OPEN)
        return reject(w, MTS_E_STATE, "commit: the writer was created with data_path; use finish");
    FORWARD_IF_ERROR(check_open(w, "commit"));
    FORWARD_IF_ERROR(complete_data(w, "commit"));
    /* The data file stays open (and locked) until the commit is done. */
    commit_req req = {w->dir, w->out.path, w->data_final, w->index_final,
                      w->o.checksum == MTS_CHECKSUM_NONE ? NULL : w->sum_final, w->token, w->o.num_partitions,
                      w->o.fsync};
    int adopted = 0;
    char err[MTS_MSG_CAP];
    int rc = commit_output(&req, w->out.len, w->out.sum, &adopted, err, sizeof err);
    out_close(&w->out);
    if (rc < 0) {
        writer_fail(w, rc, "%s", err);
        return fail_now(w, rc);
    }
    uint64_t total = hand_out(w, w->out.len, w->out.sum, lengths, checksums); /* the adopted ones, if adopted */
    __atomic_store_n(&w->st.bytes_out, total, __ATOMIC_RELAXED);
    if (res) *res = (mts_commit_result){adopted, total};
    release_all(w, 0);
    w->state = ST_COMMITTED;
    return 0;
}

int mts_writer_abort(mts_writer *w)
{
    if (!w) return MTS_E_ARG;
    if (w->state == ST_COMMITTED) return reject(w, MTS_E_STATE, "abort: the writer has already committed");
    if (w->state == ST_OPEN) {
        writer_fail(w, MTS_E_ABORTED, "aborted by the caller");
        release_all(w, 1);
        w->state = ST_ABORTED;
    }
    return 0;
}

void mts_writer_free(mts_writer *w)
{
    if (!w) return;
    if (w->state == ST_OPEN) mts_writer_abort(w);
    if (w->state != ST_COMMITTED) release_all(w, 1);
    /* Everything is given back; this waits out reclaim calls from other
     * clients' threads, which use the run store until then. */
    if (w->client_up) eng_client_destroy(&w->client);
    w->client_up = 0;
    runs_free(&w->runs);
    part_files_free(&w->parts);
    out_free(&w->out);
    mts_free(w->plan);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    mts_free(w);
}

const char *mts_writer_error(const mts_writer *w)
{
    if (!w) return "NULL writer";
    return writer_failed((mts_writer *)(uintptr_t)w) ? w->fail_msg : w->msg;
}

int mts_writer_get_stats(const mts_writer *cw, mts_writer_stats *s)
{
    if (!cw || !s) return MTS_E_ARG;
    mts_writer *w = (mts_writer *)(uintptr_t)cw;
#define LOAD(f) __atomic_load_n(&w->st.f, __ATOMIC_RELAXED)
    *s = (mts_writer_stats){0};
    s->bytes_in = LOAD(bytes_in);
    s->bytes_out = LOAD(bytes_out);
    s->records = LOAD(records);
    s->batches = LOAD(batches);
    s->runs = LOAD(runs);
    s->jobs = LOAD(jobs);
    s->compress_ns = LOAD(compress_ns);
#undef LOAD
    s->bytes_spilled = __atomic_load_n(&w->io.bytes_spilled, __ATOMIC_RELAXED);
    s->bytes_merged = __atomic_load_n(&w->io.bytes_merged, __ATOMIC_RELAXED);
    s->write_ns = __atomic_load_n(&w->io.write_ns, __ATOMIC_RELAXED);
    if (w->client_up) {
        eng_client_stats cs;
        eng_client_stats_get(&w->client, &cs);
        s->budget_wait_ns = cs.wait_ns;
        s->peak_bytes_held = cs.peak;
        s->bytes_held = cs.held;
        s->budget = eng_cap(w->engine);
    }
    return 0;
}

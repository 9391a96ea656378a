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

#define DEFAULT_THREADS 2u
#define DEFAULT_BUDGET (64ull << 20)
#define DEFAULT_JOB_SIZE (1u << 20)
#define MIN_JOB_SIZE MTS_MIN_JOB_SIZE
#define ARENA_MAX (32ull << 20)
#define ARENA_MIN (4u << 10)

void mts_writer_options_init(mts_writer_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->num_partitions = 1;
    o->codec = MTS_CODEC_LZ4;
    o->level = 1;
    o->block_size = LZ4J_DEFAULT_BLOCK;
    o->checksum = MTS_CHECKSUM_ADLER32;
    o->strategy = MTS_STRATEGY_STREAMING;
    o->threads = DEFAULT_THREADS;
    o->max_bytes_in_flight = DEFAULT_BUDGET;
    o->job_size = DEFAULT_JOB_SIZE;
}

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

void stat_add(uint64_t *field, uint64_t n) { __atomic_add_fetch(field, n, __ATOMIC_RELAXED); }

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

static int check_open(mts_writer *w, const char *op)
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

/* ---- create --------------------------------------------------------------- */

static int validate(const mts_writer_options *o, char *err, size_t len)
{
#define CHECK(cond, ...) do { if (!(cond)) return mts_msg(err, len, MTS_E_ARG, __VA_ARGS__); } while (0)
    CHECK((o->dir && *o->dir) || (o->data_path && *o->data_path), "options: dir is required");
    CHECK(!o->data_path || (*o->data_path && strlen(o->data_path) < MTS_PATH_CAP - 64),
          "options: data_path is empty or too long");
    CHECK(!o->dir || strlen(o->dir) < MTS_PATH_CAP - 128, "options: dir is too long");
    CHECK(o->shuffle_id >= 0, "options: shuffle_id %d is negative", o->shuffle_id);
    CHECK(o->map_id >= 0, "options: map_id %lld is negative", (long long)o->map_id);
    CHECK(o->num_partitions >= 1 && o->num_partitions <= MTS_MAX_PARTITIONS,
          "options: num_partitions %u is not in 1..%u", o->num_partitions, MTS_MAX_PARTITIONS);
    CHECK(codec_get(o->codec), "options: unknown codec %d", (int)o->codec);
    CHECK(o->codec != MTS_CODEC_ZSTD || (o->level >= 1 && o->level <= CODEC_ZSTD_MAX_LEVEL),
          "options: zstd level %d is not in 1..%d", o->level, CODEC_ZSTD_MAX_LEVEL);
    CHECK(o->block_size >= LZ4J_MIN_BLOCK && o->block_size <= LZ4J_MAX_BLOCK,
          "options: block_size %u is not in %u..%u", o->block_size, LZ4J_MIN_BLOCK, LZ4J_MAX_BLOCK);
    CHECK(mts_checksum_name(o->checksum), "options: unknown checksum %d", (int)o->checksum);
    CHECK(o->strategy == MTS_STRATEGY_STREAMING || o->strategy == MTS_STRATEGY_BASELINE,
          "options: unknown strategy %d", (int)o->strategy);
    CHECK(o->engine || (o->threads >= 1 && o->threads <= MTS_MAX_THREADS), "options: threads %u is not in 1..%u",
          o->threads, MTS_MAX_THREADS);
    CHECK(o->engine || o->max_bytes_in_flight >= MTS_MIN_BYTES_IN_FLIGHT,
          "options: max_bytes_in_flight %llu is below the minimum %u", (unsigned long long)o->max_bytes_in_flight,
          MTS_MIN_BYTES_IN_FLIGHT);
    CHECK(o->job_size >= MIN_JOB_SIZE, "options: job_size %u is below %u", o->job_size, MIN_JOB_SIZE);
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        CHECK(o->reserved[i] == 0, "options: reserved[%zu] must be 0", i);
    struct stat st;
    CHECK(!o->dir || (stat(o->dir, &st) == 0 && S_ISDIR(st.st_mode)), "options: dir %s is not a directory", o->dir);
#undef CHECK
    return 0;
}

/* Final names, the data file's temp name (final name + random token, as
 * Spark names its temp files) and the run file beside it. */
/* Final names; in data_path mode the caller's data path and a run file
 * beside it. The data file's temp name comes with the attempt slot, at
 * open_outputs(). */
static int build_names(mts_writer *w)
{
    if (w->o.data_path) { /* the caller names the data file and commits */
        char tmp[MTS_PATH_CAP];
        FORWARD_IF_ERROR(fio_temp_name(tmp, sizeof tmp, "x"));
        memcpy(w->token, tmp + 2, TOKEN_LEN + 1);
        snprintf(w->out.path, sizeof w->out.path, "%s", w->o.data_path);
        snprintf(w->runs.path, sizeof w->runs.path, "%s.%s.run", w->o.data_path, w->token);
        return 0;
    }
    char name[256];
    int kinds[3] = {LAYOUT_DATA, LAYOUT_INDEX, LAYOUT_CHECKSUM};
    char *dst[3] = {w->data_final, w->index_final, w->sum_final};
    for (int i = 0; i < 3; i++) {
        dst[i][0] = 0;
        if (kinds[i] == LAYOUT_CHECKSUM && w->o.checksum == MTS_CHECKSUM_NONE) continue;
        FORWARD_IF_ERROR(mts_output_name(name, sizeof name, w->o.shuffle_id, w->o.map_id, kinds[i], w->o.checksum));
        if (snprintf(dst[i], MTS_PATH_CAP, "%s/%s", w->dir, name) >= MTS_PATH_CAP - 32) return -ENAMETOOLONG;
    }
    return 0;
}

/* Job, arena and job charge sizes fitted to the engine's budget. */
static void fit_sizes(mts_writer *w, uint64_t cap)
{
    w->job_size = MTS_MAX(MIN_JOB_SIZE, MTS_MIN((uint64_t)w->o.job_size, cap / 16));
    w->job_charge_cap = 2 * w->job_size + 4096;
    w->arena_cap = MTS_MAX(ARENA_MIN, MTS_MIN(ARENA_MAX, cap / 8));
}

static int open_outputs(mts_writer *w, const char **what)
{
    if (w->o.data_path) {
        *what = "create the data file";
        snprintf(w->parts.base, sizeof w->parts.base, "%s.%s", w->out.path, w->token); /* as the run file */
        return out_create(&w->out);
    }
    /* Under the directory lock: claim an attempt slot, clearing what dead
     * attempts of this map output left; the slot's anchor is our data file. */
    *what = "lock the directory";
    int dfd = dir_lock(w->dir);
    if (dfd < 0) return dfd;
    *what = "claim an attempt slot (create the data file)";
    uint32_t slot, removed;
    int fd = attempt_claim(w->data_final, w->index_final, &slot, w->out.path, sizeof w->out.path, &removed);
    dir_unlock(dfd);
    if (fd < 0) return fd;
    w->out.fd = fd;
    w->stale_removed = removed;
    snprintf(w->token, sizeof w->token, "%u", slot);
    snprintf(w->runs.path, sizeof w->runs.path, "%s.run", w->out.path);
    if (w->o.strategy == MTS_STRATEGY_BASELINE) snprintf(w->parts.base, sizeof w->parts.base, "%s", w->out.path);
    return 0;
}

int mts_writer_create(const mts_writer_options *opts, mts_writer **out, char *errbuf, size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!errbuf) { errbuf = scratch; errlen = sizeof scratch; }
    if (errlen) errbuf[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!opts) return mts_msg(errbuf, errlen, MTS_E_ARG, "options: NULL");
    FORWARD_IF_ERROR(validate(opts, errbuf, errlen));

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
    fit_sizes(w, eng_cap(engine));

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
    if ((rc = build_names(w)) < 0) goto fail;
    if ((rc = open_outputs(w, &what)) < 0) goto fail;
    w->state = ST_OPEN;
    *out = w;
    return 0;
fail:
    mts_msg(errbuf, errlen, rc, "create writer: %s (%s)", what, w->out.path[0] ? w->out.path : w->dir);
    w->err = rc;
    mts_writer_free(w);
    return rc;
}

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
    int rc = 0;
    if (w->cur_part < 0 || (int64_t)partition < w->cur_part) stat_add(&w->st.runs, 1);
    if (w->mode == MODE_STREAM && (int64_t)partition < w->cur_part) rc = enter_held(w);
    if (!rc && w->mode == MODE_STREAM) rc = intake_stream(w, partition, bytes, len);
    else if (!rc) rc = intake_held(w, partition, bytes, len);
    w->cur_part = partition;
    if (rc < 0) return fail_now(w, rc);
    stat_add(&w->st.records, 1);
    stat_add(&w->st.bytes_in, len);
    return 0;
}

int mts_writer_add_batch(mts_writer *w, const void *data, const uint64_t *offsets)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, "add_batch"));
    uint32_t n = w->o.num_partitions;
    if (!offsets) return reject(w, MTS_E_ARG, "add_batch: NULL offsets");
    if (offsets[0] != 0)
        return reject(w, MTS_E_ARG, "add_batch: offsets[0] is %llu, not 0", (unsigned long long)offsets[0]);
    int64_t first = -1, last = -1;
    for (uint32_t p = 0; p < n; p++) {
        if (offsets[p + 1] < offsets[p])
            return reject(w, MTS_E_ARG, "add_batch: offsets[%u] < offsets[%u] (partition %u)", p + 1, p, p);
        if (offsets[p + 1] > offsets[p]) {
            if (first < 0) first = p;
            last = p;
        }
    }
    uint64_t total = offsets[n];
    if (!data && total)
        return reject(w, MTS_E_ARG, "add_batch: NULL data for %llu bytes", (unsigned long long)total);
    if (total > SIZE_MAX || w->st.bytes_in > UINT64_MAX - total)
        return reject(w, MTS_E_OVERFLOW, "add_batch: %llu bytes overflow", (unsigned long long)total);
    stat_add(&w->st.batches, 1);
    if (first < 0) return 0;
    if (w->cur_part < 0 || first < w->cur_part) stat_add(&w->st.runs, 1);
    int rc = 0;
    if (w->mode == MODE_STREAM && first < w->cur_part) rc = enter_held(w);
    if (!rc) rc = intake_batch(w, data, offsets, w->mode == MODE_STREAM ? &w->out.d : w->held_dest);
    w->cur_part = last;
    if (rc < 0) return fail_now(w, rc);
    stat_add(&w->st.bytes_in, total);
    return 0;
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
        stat_add(&w->io.write_ns, mts_now_ns() - t0);
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

/* The writer's state machine.
 *
 * MODE_STREAM (the start): input is partition-ordered so far. Appended bytes
 * collect in a stage buffer of job_size bytes; batches are cut into jobs in
 * place (the caller's memory, no copy). Workers compress each job into one
 * complete codec stream per partition; the ordered writer appends them to the
 * data file in submission order, which is partition order, and releases their
 * budget. A single batch therefore makes no file besides its outputs.
 *
 * MODE_HELD (after the partition id first goes down): what was streamed so far
 * becomes the first run of the run file (no copy; the file is only
 * renamed in our bookkeeping). New input is grouped by partition in memory
 * (records through a counting-sorted arena, batches in place), compressed,
 * and held as chunks of its partition. When the budget is full, held chunks
 * are appended to the run file in partition order. At commit each partition
 * is assembled once: its run-file stretches by copy_file_range, then its
 * held chunks, all in arrival order. Compressed bytes are never decoded.
 *
 * The budget (limiter) covers every byte the writer holds: stage and arena
 * buffers, job descriptors, compression outputs sized by the codec bound until
 * compressed, then held chunks until written. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "commit.h"
#include "fileio.h"
#include "internal.h"
#include "writer.h"

#define MAX_SEGS_PER_JOB 1024u
#define RECORD_HEADER 8u         /* arena record: u32 partition, u32 length */
#define DEFAULT_THREADS 2u
#define DEFAULT_BUDGET (64ull << 20)
#define DEFAULT_JOB_SIZE (1u << 20)
#define MIN_JOB_SIZE 1024u
#define ARENA_MAX (32ull << 20)

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

void writer_fail(mts_writer *w, int code, const char *fmt, ...)
{
    pthread_mutex_lock(&w->mu);
    if (!w->err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof w->msg)
            snprintf(w->msg + n, sizeof w->msg - (size_t)n, ": %s", mts_strerror(code));
        __atomic_store_n(&w->err, code, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&w->mu);
    limiter_shutdown(&w->lim); /* wakes a producer blocked on the budget */
}

int writer_failed(mts_writer *w) { return __atomic_load_n(&w->err, __ATOMIC_ACQUIRE); }

/* Rejects one call without changing the writer's state. */
static int reject(mts_writer *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reject(mts_writer *w, int code, const char *fmt, ...)
{
    pthread_mutex_lock(&w->mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&w->mu);
    return code;
}

/* ---- budget --------------------------------------------------------------- */

int writer_budget_acquire(mts_writer *w, uint64_t n)
{
    int rc = limiter_try_acquire(&w->lim, n);
    if (rc == 1 && w->mode == MODE_HELD && w->held_dest == DEST_HOLD) {
        /* Held chunks are released only by writing them out: let the jobs in
         * flight land, then spill if the bytes still do not fit. */
        pool_wait_idle(&w->pool);
        if (writer_failed(w)) return writer_failed(w);
        rc = limiter_try_acquire(&w->lim, n);
        if (rc == 1 && w->have_held) {
            FORWARD_IF_ERROR(spill_held(w));
            rc = limiter_try_acquire(&w->lim, n);
        }
    }
    if (rc == 1) rc = limiter_acquire(&w->lim, n);
    if (rc == MTS_E_ABORTED && writer_failed(w)) rc = writer_failed(w);
    return rc;
}

/* ---- inbufs --------------------------------------------------------------- */

static void inbuf_unref(mts_writer *w, inbuf *in)
{
    pthread_mutex_lock(&w->mu);
    int left = --in->refs;
    unsigned char *mem = in->mem; /* read under the lock: a borrowed inbuf
                                     lives on a stack that may be gone after it */
    if (left == 0 && !mem) pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (left == 0 && mem) {
        limiter_release(&w->lim, in->charge);
        mts_free(mem);
        mts_free(in);
    }
}

/* Waits until the jobs cut from a borrowed inbuf have all read it. */
static void inbuf_wait_borrowed(mts_writer *w, inbuf *in)
{
    pthread_mutex_lock(&w->mu);
    while (in->refs > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* ---- the pool's callbacks -------------------------------------------------- */

static void job_run(void *ctx, pool_job *pj, unsigned worker)
{
    mts_writer *w = ctx;
    job *j = (job *)pj;
    uint64_t t0 = mts_now_ns();
    for (uint32_t i = 0; i < j->nsegs; i++) {
        seg *s = &j->segs[i];
        size_t bound = w->codec->bound(&w->cp, s->len);
        uint64_t reserved = sizeof(chunk) + bound;
        if (writer_failed(w)) {
            limiter_release(&w->lim, reserved);
            continue;
        }
        chunk *c = mts_malloc(sizeof(chunk) + bound);
        size_t clen = 0;
        int rc = c ? w->codec->compress(&w->cp, w->cctx[worker], j->in->base + s->off, s->len,
                                        c->data, bound, &clen)
                   : MTS_E_NOMEM;
        if (rc < 0) {
            writer_fail(w, rc, "compress partition %u (%llu bytes, %s)", s->partition,
                        (unsigned long long)s->len, mts_codec_name(w->o.codec));
            mts_free(c);
            limiter_release(&w->lim, reserved);
            continue;
        }
        chunk *shrunk = mts_realloc(c, sizeof(chunk) + clen);
        if (shrunk) {
            c = shrunk;
            limiter_release(&w->lim, bound - clen);
            c->charge = sizeof(chunk) + clen;
        } else {
            c->charge = reserved;
        }
        c->next = NULL;
        c->len = clen;
        c->checksum = w->o.checksum == MTS_CHECKSUM_NONE
                          ? 0
                          : checksum_update(w->o.checksum, checksum_init(w->o.checksum), c->data, clen);
        s->out = c;
    }
    inbuf_unref(w, j->in);
    __atomic_add_fetch(&w->st.compress_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->st.jobs, 1, __ATOMIC_RELAXED);
}

static void part_account(mts_writer *w, part *p, const chunk *c)
{
    if (w->o.checksum != MTS_CHECKSUM_NONE)
        p->checksum = checksum_combine(w->o.checksum, p->checksum, c->checksum, c->len);
    p->len += c->len;
}

static int drain_to_data(mts_writer *w, job *j)
{
    struct iovec iov[MAX_SEGS_PER_JOB];
    int n = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < j->nsegs; i++) {
        chunk *c = j->segs[i].out;
        iov[n++] = (struct iovec){c->data, c->len};
        total += c->len;
    }
    int rc = fio_writev_all(w->data_fd, iov, n);
    if (rc < 0) {
        writer_fail(w, rc, "write data file %s at offset %llu (partition %u)", w->data_tmp,
                    (unsigned long long)w->data_off, j->segs[0].partition);
        return rc;
    }
    w->data_off += total;
    for (uint32_t i = 0; i < j->nsegs; i++) part_account(w, &w->parts[j->segs[i].partition], j->segs[i].out);
    return 0;
}

static void job_drain(void *ctx, pool_job *pj)
{
    mts_writer *w = ctx;
    job *j = (job *)pj;
    uint64_t t0 = mts_now_ns();
    int ok = !writer_failed(w);
    if (ok && j->dest == DEST_DATA) ok = drain_to_data(w, j) == 0;
    uint64_t release = j->struct_charge;
    for (uint32_t i = 0; i < j->nsegs; i++) {
        seg *s = &j->segs[i];
        chunk *c = s->out;
        if (!c) continue;
        if (ok && j->dest == DEST_HOLD) {
            part *p = &w->parts[s->partition];
            if (p->held_tail) p->held_tail->next = c;
            else p->held = c;
            p->held_tail = c;
            w->have_held = 1;
            continue;
        }
        if (ok && j->dest == DEST_PART) {
            ok = part_file_append(w, s->partition, c->data, c->len) == 0;
            if (ok) part_account(w, &w->parts[s->partition], c);
        }
        release += c->charge;
        mts_free(c);
    }
    limiter_release(&w->lim, release);
    mts_free(j);
    __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
}

/* ---- cutting input into jobs ---------------------------------------------- */

/* Submits jobs for partitions [p_first, p_last] of in, partition p_first+k
 * spanning in->base[offs[k], offs[k+1]). A job takes up to job_size input
 * bytes, from one partition or many small ones; a larger partition is split.
 * Empty partitions get no segment. */
static int submit_range(mts_writer *w, inbuf *in, uint32_t p_first, uint32_t p_last,
                        const uint64_t *offs, job_dest dest)
{
    uint32_t k = 0, count = p_last - p_first + 1;
    uint64_t pos = offs[0]; /* next byte of in to hand to a job */
    seg *plan = w->plan;
    for (;;) {
        uint32_t nsegs = 0;
        uint64_t in_bytes = 0, charge = sizeof(job);
        while (k < count && nsegs < MAX_SEGS_PER_JOB) {
            uint64_t end = offs[k + 1];
            if (pos >= end) { k++; continue; }
            uint64_t take = MTS_MIN(end - pos, w->job_size - in_bytes);
            uint64_t c = sizeof(seg) + sizeof(chunk) + w->codec->bound(&w->cp, take);
            if (nsegs && charge + c > w->job_charge_cap) break;
            plan[nsegs++] = (seg){p_first + k, pos, take, NULL};
            in_bytes += take;
            charge += c;
            pos += take;
            if (in_bytes >= w->job_size) break;
        }
        if (nsegs == 0) return 0;
        FORWARD_IF_ERROR(writer_budget_acquire(w, charge));
        job *j = mts_malloc(sizeof(job) + nsegs * sizeof(seg));
        if (!j) {
            limiter_release(&w->lim, charge);
            writer_fail(w, MTS_E_NOMEM, "allocate a job for partition %u", plan[0].partition);
            return MTS_E_NOMEM;
        }
        j->dest = dest;
        j->in = in;
        j->nsegs = nsegs;
        j->struct_charge = sizeof(job) + nsegs * sizeof(seg);
        memcpy(j->segs, plan, nsegs * sizeof(seg));
        pthread_mutex_lock(&w->mu);
        in->refs++;
        pthread_mutex_unlock(&w->mu);
        pool_submit(&w->pool, &j->base);
    }
}

/* ---- partition-ordered intake ----------------------------------------------- */

static int stage_flush(mts_writer *w)
{
    inbuf *in = w->stage;
    if (!in) return 0;
    w->stage = NULL;
    uint64_t offs[2] = {0, w->stage_used};
    int rc = submit_range(w, in, (uint32_t)w->cur_part, (uint32_t)w->cur_part, offs, DEST_DATA);
    inbuf_unref(w, in); /* the producer's reference */
    return rc;
}

static int stage_new(mts_writer *w)
{
    FORWARD_IF_ERROR(writer_budget_acquire(w, w->job_size + sizeof(inbuf)));
    inbuf *in = mts_malloc(sizeof *in);
    unsigned char *mem = in ? mts_malloc(w->job_size) : NULL;
    if (!mem) {
        mts_free(in);
        limiter_release(&w->lim, w->job_size + sizeof(inbuf));
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte stage buffer", (unsigned long long)w->job_size);
        return MTS_E_NOMEM;
    }
    *in = (inbuf){mem, mem, w->job_size + sizeof(inbuf), 1};
    w->stage = in;
    w->stage_used = 0;
    return 0;
}

static int stream_append(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    if ((int64_t)p != w->cur_part) {
        FORWARD_IF_ERROR(stage_flush(w));
        w->cur_part = p;
    }
    while (len) {
        if (!w->stage) FORWARD_IF_ERROR(stage_new(w));
        size_t n = (size_t)MTS_MIN((uint64_t)len, w->job_size - w->stage_used);
        memcpy(w->stage->mem + w->stage_used, b, n);
        w->stage_used += n;
        b += n;
        len -= n;
        if (w->stage_used == w->job_size) FORWARD_IF_ERROR(stage_flush(w));
    }
    return 0;
}

/* ---- unordered intake ------------------------------------------------------- */

static int arena_init(mts_writer *w)
{
    w->arena_cap = MTS_MIN(ARENA_MAX, w->o.max_bytes_in_flight / 4);
    w->arena_charge = w->arena_cap;
    FORWARD_IF_ERROR(writer_budget_acquire(w, w->arena_charge));
    w->arena = mts_malloc(w->arena_cap);
    w->counts = mts_calloc((size_t)w->o.num_partitions + 1, sizeof(uint64_t));
    if (!w->arena || !w->counts) {
        mts_free(w->arena);
        w->arena = NULL; /* release_all gives the charge back only with an arena */
        limiter_release(&w->lim, w->arena_charge);
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte record arena", (unsigned long long)w->arena_cap);
        return MTS_E_NOMEM;
    }
    w->arena_used = 0;
    return 0;
}

/* Groups the arena's records by partition (a stable counting sort into a
 * fresh buffer) and hands the result to the jobs as one batch. */
static int arena_flush(mts_writer *w)
{
    if (!w->arena_used) return 0;
    uint32_t n = w->o.num_partitions;
    memset(w->counts, 0, ((size_t)n + 1) * sizeof(uint64_t));
    uint64_t payload = 0;
    for (uint64_t o = 0; o < w->arena_used;) {
        uint32_t p, len;
        memcpy(&p, w->arena + o, 4);
        memcpy(&len, w->arena + o + 4, 4);
        w->counts[p + 1] += len;
        payload += len;
        o += RECORD_HEADER + len;
    }
    for (uint32_t p = 0; p < n; p++) w->counts[p + 1] += w->counts[p];
    uint64_t charge = payload + sizeof(inbuf);
    FORWARD_IF_ERROR(writer_budget_acquire(w, charge));
    inbuf *in = mts_malloc(sizeof *in);
    unsigned char *mem = in ? mts_malloc(payload) : NULL;
    if (!mem) {
        mts_free(in);
        limiter_release(&w->lim, charge);
        writer_fail(w, MTS_E_NOMEM, "allocate %llu bytes to group records", (unsigned long long)payload);
        return MTS_E_NOMEM;
    }
    *in = (inbuf){mem, mem, charge, 1};
    /* counts[p] walks from partition p's start to its end while copying;
     * afterwards counts[p] is p's end, i.e. the start of p+1. */
    for (uint64_t o = 0; o < w->arena_used;) {
        uint32_t p, len;
        memcpy(&p, w->arena + o, 4);
        memcpy(&len, w->arena + o + 4, 4);
        memcpy(mem + w->counts[p], w->arena + o + RECORD_HEADER, len);
        w->counts[p] += len;
        o += RECORD_HEADER + len;
    }
    memmove(w->counts + 1, w->counts, (size_t)n * sizeof(uint64_t));
    w->counts[0] = 0;
    w->arena_used = 0;
    int rc = submit_range(w, in, 0, n - 1, w->counts, w->held_dest);
    inbuf_unref(w, in);
    return rc;
}

/* A record too large for the arena goes straight to jobs from the caller's
 * memory, in job_size pieces. */
static int direct_record(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    FORWARD_IF_ERROR(arena_flush(w));
    inbuf in = {NULL, b, 0, 1};
    uint64_t offs[2] = {0, len};
    int rc = submit_range(w, &in, p, p, offs, w->held_dest);
    inbuf_unref(w, &in);
    inbuf_wait_borrowed(w, &in);
    return rc;
}

static int held_append(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    if (!w->arena) FORWARD_IF_ERROR(arena_init(w));
    if (len + RECORD_HEADER > w->arena_cap) return direct_record(w, p, b, len);
    if (w->arena_used + RECORD_HEADER + len > w->arena_cap) FORWARD_IF_ERROR(arena_flush(w));
    uint32_t len32 = (uint32_t)len;
    memcpy(w->arena + w->arena_used, &p, 4);
    memcpy(w->arena + w->arena_used + 4, &len32, 4);
    if (len) memcpy(w->arena + w->arena_used + RECORD_HEADER, b, len);
    w->arena_used += RECORD_HEADER + len;
    return 0;
}

/* The partition id went down: a new run starts. */
static int enter_held(mts_writer *w)
{
    FORWARD_IF_ERROR(stage_flush(w));
    pool_wait_idle(&w->pool);
    if (writer_failed(w)) return writer_failed(w);
    FORWARD_IF_ERROR(data_becomes_run(w));
    w->mode = MODE_HELD;
    return 0;
}

/* ---- teardown ------------------------------------------------------------- */

static void free_chunks(mts_writer *w, chunk *c)
{
    while (c) {
        chunk *next = c->next;
        limiter_release(&w->lim, c->charge);
        mts_free(c);
        c = next;
    }
}

/* Stops the threads (every job still runs its callbacks, which skip work once
 * the writer has failed) and releases everything the writer holds. */
static void release_all(mts_writer *w, int remove_files)
{
    if (w->pool_up) {
        pool_destroy(&w->pool);
        w->pool_up = 0;
    }
    if (w->stage) {
        limiter_release(&w->lim, w->stage->charge);
        mts_free(w->stage->mem);
        mts_free(w->stage);
        w->stage = NULL;
    }
    if (w->arena) limiter_release(&w->lim, w->arena_charge);
    mts_free(w->arena);
    w->arena = NULL;
    mts_free(w->counts);
    w->counts = NULL;
    if (w->parts) {
        for (uint32_t p = 0; p < w->o.num_partitions; p++) {
            free_chunks(w, w->parts[p].held);
            w->parts[p].held = w->parts[p].held_tail = NULL;
        }
        remove_part_files(w);
    }
    for (uint32_t r = 0; r < w->nruns; r++) mts_free(w->runs[r].entries);
    mts_free(w->runs);
    w->runs = NULL;
    w->nruns = w->runs_cap = 0;
    if (w->data_fd >= 0) close(w->data_fd);
    if (w->run_fd >= 0) close(w->run_fd);
    w->data_fd = w->run_fd = -1;
    if (remove_files) unlink(w->data_tmp);
    unlink(w->run_tmp);
}

/* Moves an open writer whose work failed into ST_FAILED; returns the error. */
static int fail_now(mts_writer *w, int rc)
{
    if (!writer_failed(w)) writer_fail(w, rc, "internal");
    release_all(w, 1);
    w->state = ST_FAILED;
    return writer_failed(w);
}

static int check_open(mts_writer *w, const char *op)
{
    if (w->state == ST_OPEN && writer_failed(w)) return fail_now(w, writer_failed(w));
    switch (w->state) {
    case ST_OPEN: return 0;
    case ST_FAILED: return w->err;
    case ST_COMMITTED: return reject(w, MTS_E_STATE, "%s: the writer has already committed", op);
    case ST_ABORTED: return reject(w, MTS_E_ABORTED, "%s: the writer was aborted", op);
    }
    return MTS_E_STATE;
}

/* ---- API ------------------------------------------------------------------ */

static int validate(const mts_writer_options *o, char *err, size_t len)
{
#define CHECK(cond, ...) do { if (!(cond)) { snprintf(err, len, __VA_ARGS__); return MTS_E_ARG; } } while (0)
    CHECK((o->dir && *o->dir) || (o->data_path && *o->data_path), "options: dir is required");
    CHECK(!o->data_path || (*o->data_path && strlen(o->data_path) < PATH_CAP - 64),
          "options: data_path is empty or too long");
    CHECK(o->shuffle_id >= 0, "options: shuffle_id %d is negative", o->shuffle_id);
    CHECK(o->map_id >= 0, "options: map_id %lld is negative", (long long)o->map_id);
    CHECK(o->num_partitions >= 1 && o->num_partitions <= MTS_MAX_PARTITIONS,
          "options: num_partitions %u is not in 1..%u", o->num_partitions, MTS_MAX_PARTITIONS);
    CHECK(codec_get(o->codec), "options: unknown codec %d", (int)o->codec);
    CHECK(o->codec != MTS_CODEC_ZSTD || (o->level >= 1 && o->level <= 19),
          "options: zstd level %d is not in 1..19", o->level);
    CHECK(o->block_size >= LZ4J_MIN_BLOCK && o->block_size <= LZ4J_MAX_BLOCK,
          "options: block_size %u is not in %u..%u", o->block_size, LZ4J_MIN_BLOCK, LZ4J_MAX_BLOCK);
    CHECK(mts_checksum_name(o->checksum), "options: unknown checksum %d", (int)o->checksum);
    CHECK(o->strategy == MTS_STRATEGY_STREAMING || o->strategy == MTS_STRATEGY_BASELINE,
          "options: unknown strategy %d", (int)o->strategy);
    CHECK(o->threads >= 1 && o->threads <= 256, "options: threads %u is not in 1..256", o->threads);
    CHECK(o->max_bytes_in_flight >= MTS_MIN_BYTES_IN_FLIGHT,
          "options: max_bytes_in_flight %llu is below the minimum %u",
          (unsigned long long)o->max_bytes_in_flight, MTS_MIN_BYTES_IN_FLIGHT);
    CHECK(o->job_size >= MIN_JOB_SIZE, "options: job_size %u is below %u", o->job_size, MIN_JOB_SIZE);
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        CHECK(o->reserved[i] == 0, "options: reserved[%zu] must be 0", i);
    struct stat st;
    CHECK(!o->dir || (stat(o->dir, &st) == 0 && S_ISDIR(st.st_mode)), "options: dir %s is not a directory", o->dir);
#undef CHECK
    return 0;
}

static int build_names(mts_writer *w)
{
    if (w->o.data_path) { /* the caller names the data file and commits */
        char tmp[PATH_CAP];
        FORWARD_IF_ERROR(fio_temp_name(tmp, sizeof tmp, "x"));
        memcpy(w->token, tmp + 2, TOKEN_LEN + 1);
        w->data_tmp = w->path_a;
        w->run_tmp = w->path_b;
        snprintf(w->data_tmp, PATH_CAP, "%s", w->o.data_path);
        snprintf(w->run_tmp, PATH_CAP, "%s.%s.run", w->o.data_path, w->token);
        w->data_final[0] = w->index_final[0] = w->sum_final[0] = 0;
        return 0;
    }
    char name[256];
    int kinds[3] = {'d', 'i', 'c'};
    char *dst[3] = {w->data_final, w->index_final, w->sum_final};
    for (int i = 0; i < 3; i++) {
        if (kinds[i] == 'c' && w->o.checksum == MTS_CHECKSUM_NONE) {
            dst[i][0] = 0;
            continue;
        }
        if (mts_output_name(name, sizeof name, w->o.shuffle_id, w->o.map_id, kinds[i], w->o.checksum) < 0)
            return MTS_E_ARG;
        if (snprintf(dst[i], PATH_CAP, "%s/%s", w->dir, name) >= PATH_CAP) return -ENAMETOOLONG;
    }
    char tmp[PATH_CAP];
    FORWARD_IF_ERROR(fio_temp_name(tmp, sizeof tmp, w->data_final));
    memcpy(w->token, tmp + strlen(w->data_final) + 1, TOKEN_LEN + 1);
    w->data_tmp = w->path_a;
    w->run_tmp = w->path_b;
    snprintf(w->data_tmp, PATH_CAP, "%s", tmp);
    if (snprintf(w->run_tmp, PATH_CAP, "%s.run", tmp) >= PATH_CAP) return -ENAMETOOLONG;
    return 0;
}

int mts_writer_create(const mts_writer_options *opts, mts_writer **out, char *errbuf, size_t errlen)
{
    char scratch[256];
    if (!errbuf) { errbuf = scratch; errlen = sizeof scratch; }
    if (errlen) errbuf[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!opts) { snprintf(errbuf, errlen, "options: NULL"); return MTS_E_ARG; }
    FORWARD_IF_ERROR(validate(opts, errbuf, errlen));

    mts_writer *w = mts_calloc(1, sizeof *w);
    if (!w) { snprintf(errbuf, errlen, "allocate the writer"); return MTS_E_NOMEM; }
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
    w->job_size = MTS_MAX(MIN_JOB_SIZE, MTS_MIN((uint64_t)opts->job_size, opts->max_bytes_in_flight / 16));
    w->job_charge_cap = 2 * w->job_size + 4096;
    w->data_fd = w->run_fd = -1;
    w->cur_part = -1;
    w->held_dest = opts->strategy == MTS_STRATEGY_BASELINE ? DEST_PART : DEST_HOLD;
    w->mode = opts->strategy == MTS_STRATEGY_BASELINE ? MODE_HELD : MODE_STREAM;
    w->st.budget = opts->max_bytes_in_flight;
    w->path_a[0] = w->path_b[0] = 0;
    w->data_tmp = w->path_a;
    w->run_tmp = w->path_b;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    int rc = limiter_init(&w->lim, opts->max_bytes_in_flight);
    if (rc < 0) { mts_free(w); return rc; }
    const char *what = "name the output files";
    if ((rc = build_names(w)) < 0) goto fail;
    what = "allocate per-partition state";
    w->parts = mts_calloc(opts->num_partitions, sizeof(part));
    w->cctx = mts_calloc(opts->threads, sizeof(void *));
    w->plan = mts_malloc(MAX_SEGS_PER_JOB * sizeof(seg));
    if (!w->parts || !w->cctx || !w->plan) { rc = MTS_E_NOMEM; goto fail; }
    for (uint32_t p = 0; p < opts->num_partitions; p++) {
        w->parts[p].fd = -1;
        w->parts[p].checksum = checksum_init(opts->checksum);
    }
    what = "create codec contexts";
    for (uint32_t i = 0; i < opts->threads; i++)
        if ((rc = w->codec->ctx_new(&w->cp, &w->cctx[i])) < 0) goto fail;
    /* Under the directory lock: clear what dead attempts of this map output
     * left, and create (and lock) our own data file. */
    what = "lock the directory";
    int dfd = dir_lock(w->dir);
    if ((rc = dfd) < 0) goto fail;
    what = "remove the temp files of earlier attempts";
    rc = opts->data_path ? 0 : cleanup_stale(w->dir, w->data_final, w->token);
    if (rc >= 0) {
        w->stale_removed = (uint32_t)rc;
        what = "create the data file";
        rc = open_data_tmp(w);
    }
    dir_unlock(dfd);
    if (rc < 0) goto fail;
    what = "start threads";
    unsigned ring_log2 = 4;
    while ((1u << ring_log2) < 4 * opts->threads) ring_log2++;
    if ((rc = pool_init(&w->pool, opts->threads, ring_log2, job_run, job_drain, w)) < 0) goto fail;
    w->pool_up = 1;
    w->state = ST_OPEN;
    *out = w;
    return 0;
fail:
    snprintf(errbuf, errlen, "create writer: %s (%s): %s", what, w->data_tmp, mts_strerror(rc));
    w->state = ST_FAILED;
    w->err = rc;
    mts_writer_free(w);
    return rc;
}

int mts_writer_append(mts_writer *w, uint32_t partition, const void *bytes, size_t len)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, "append"));
    if (partition >= w->o.num_partitions)
        return reject(w, MTS_E_RANGE, "append: partition %u is out of range (%u partitions)",
                      partition, w->o.num_partitions);
    if (!bytes && len) return reject(w, MTS_E_ARG, "append: NULL bytes for partition %u", partition);
    if (len > UINT32_MAX - RECORD_HEADER || w->st.bytes_in > UINT64_MAX - len)
        return reject(w, MTS_E_OVERFLOW, "append: %zu-byte record for partition %u is too large", len, partition);
    int rc = 0;
    if (w->cur_part < 0 || (int64_t)partition < w->cur_part) w->st.runs++;
    if (w->mode == MODE_STREAM && (int64_t)partition < w->cur_part) rc = enter_held(w);
    if (!rc && w->mode == MODE_STREAM) rc = stream_append(w, partition, bytes, len);
    else if (!rc) rc = held_append(w, partition, bytes, len);
    w->cur_part = partition;
    if (rc < 0) return fail_now(w, rc);
    w->st.records++;
    w->st.bytes_in += len;
    return 0;
}

int mts_writer_add_batch(mts_writer *w, const void *data, const uint64_t *offsets)
{
    if (!w) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_open(w, "add_batch"));
    uint32_t n = w->o.num_partitions;
    if (!offsets) return reject(w, MTS_E_ARG, "add_batch: NULL offsets");
    if (offsets[0] != 0) return reject(w, MTS_E_ARG, "add_batch: offsets[0] is %llu, not 0", (unsigned long long)offsets[0]);
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
    if (!data && total) return reject(w, MTS_E_ARG, "add_batch: NULL data for %llu bytes", (unsigned long long)total);
    if (total > SIZE_MAX || w->st.bytes_in > UINT64_MAX - total)
        return reject(w, MTS_E_OVERFLOW, "add_batch: %llu bytes overflow", (unsigned long long)total);
    w->st.batches++;
    if (first < 0) return 0;
    if (w->cur_part < 0 || first < w->cur_part) w->st.runs++;
    int rc = 0;
    if (w->mode == MODE_STREAM && first < w->cur_part) rc = enter_held(w);
    if (!rc && w->mode == MODE_STREAM) rc = stage_flush(w);
    if (!rc && w->mode == MODE_HELD && w->arena) rc = arena_flush(w); /* keep arrival order */
    if (!rc) {
        job_dest dest = w->mode == MODE_STREAM ? DEST_DATA : w->held_dest;
        inbuf in = {NULL, data, 0, 1};
        rc = submit_range(w, &in, 0, n - 1, offsets, dest);
        inbuf_unref(w, &in);
        inbuf_wait_borrowed(w, &in);
    }
    w->cur_part = last;
    if (rc < 0) return fail_now(w, rc);
    w->st.bytes_in += total;
    return 0;
}

static int finish_data(mts_writer *w)
{
    if (w->mode == MODE_STREAM) {
        FORWARD_IF_ERROR(stage_flush(w));
    } else if (w->arena) {
        FORWARD_IF_ERROR(arena_flush(w));
    }
    pool_wait_idle(&w->pool);
    if (writer_failed(w)) return writer_failed(w);
    if (w->o.strategy == MTS_STRATEGY_BASELINE) return concat_part_files(w);
    if (w->mode == MODE_HELD) return merge_into_data(w);
    return 0;
}

/* Completes the data file (everything but the commit) and returns the
 * partition lengths and checksums in fresh arrays; on failure the writer is
 * failed and its code returned. */
static int complete_data(mts_writer *w, const char *op, uint64_t **lens_out, uint32_t **sums_out)
{
    uint32_t n = w->o.num_partitions;
    uint64_t *lens = mts_malloc((size_t)n * sizeof(uint64_t));
    uint32_t *sums = mts_malloc((size_t)n * sizeof(uint32_t));
    int rc = lens && sums ? finish_data(w) : MTS_E_NOMEM;
    if (rc == MTS_E_NOMEM && !writer_failed(w)) writer_fail(w, rc, "%s: allocate %u lengths", op, n);
    uint64_t t0 = mts_now_ns();
    if (rc == 0 && w->o.fsync && (rc = fio_fsync(w->data_fd)) < 0)
        writer_fail(w, rc, "%s: fsync data file %s", op, w->data_tmp);
    __atomic_add_fetch(&w->st.write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    if (rc < 0) {
        mts_free(lens);
        mts_free(sums);
        return fail_now(w, rc);
    }
    for (uint32_t p = 0; p < n; p++) {
        lens[p] = w->parts[p].len;
        sums[p] = w->parts[p].checksum;
    }
    *lens_out = lens;
    *sums_out = sums;
    return 0;
}

/* Copies the final lengths and checksums out (either may be NULL), frees
 * them, and returns the data file's size. */
static uint64_t hand_out(const mts_writer *w, uint64_t *lens, uint32_t *sums, uint64_t *lengths, uint64_t *checksums)
{
    uint64_t total = 0;
    for (uint32_t p = 0; p < w->o.num_partitions; p++) {
        total += lens[p];
        if (lengths) lengths[p] = lens[p];
        if (checksums) checksums[p] = sums[p];
    }
    mts_free(lens);
    mts_free(sums);
    return total;
}

int mts_writer_finish(mts_writer *w, uint64_t *lengths, uint64_t *checksums)
{
    if (!w) return MTS_E_ARG;
    if (!w->o.data_path && w->state == ST_OPEN)
        return reject(w, MTS_E_STATE, "finish: the writer was created without data_path; use commit");
    FORWARD_IF_ERROR(check_open(w, "finish"));
    uint64_t *lens;
    uint32_t *sums;
    FORWARD_IF_ERROR(complete_data(w, "finish", &lens, &sums));
    uint64_t total = hand_out(w, lens, sums, lengths, checksums);
    close(w->data_fd);
    w->data_fd = -1;
    w->st.bytes_out = total;
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
    uint32_t n = w->o.num_partitions;
    uint64_t *lens;
    uint32_t *sums;
    FORWARD_IF_ERROR(complete_data(w, "commit", &lens, &sums));
    /* The data file stays open (and locked) until the commit is done. */
    commit_req req = {w->dir, w->data_tmp, w->data_final, w->index_final,
                      w->o.checksum == MTS_CHECKSUM_NONE ? NULL : w->sum_final, w->token, n, w->o.fsync};
    int adopted = 0;
    char err[PATH_CAP + 128];
    int rc = commit_output(&req, lens, sums, &adopted, err, sizeof err);
    close(w->data_fd);
    w->data_fd = -1;
    if (rc < 0) {
        mts_free(lens);
        mts_free(sums);
        writer_fail(w, rc, "%s", err);
        return fail_now(w, rc);
    }
    uint64_t total = hand_out(w, lens, sums, lengths, checksums); /* the adopted ones, if adopted */
    w->st.bytes_out = total;
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
    if (w->cctx) {
        for (uint32_t i = 0; i < w->o.threads; i++)
            if (w->cctx[i]) w->codec->ctx_free(w->cctx[i]);
    }
    mts_free(w->cctx);
    mts_free(w->plan);
    mts_free(w->parts);
    limiter_destroy(&w->lim);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    mts_free(w);
}

const char *mts_writer_error(const mts_writer *w)
{
    return w ? w->msg : "NULL writer";
}

int mts_writer_get_stats(const mts_writer *w, mts_writer_stats *s)
{
    if (!w || !s) return MTS_E_ARG;
    mts_writer *mw = (mts_writer *)w;
    *s = w->st;
    s->compress_ns = __atomic_load_n(&mw->st.compress_ns, __ATOMIC_RELAXED);
    s->write_ns = __atomic_load_n(&mw->st.write_ns, __ATOMIC_RELAXED);
    s->jobs = __atomic_load_n(&mw->st.jobs, __ATOMIC_RELAXED);
    s->budget_wait_ns = limiter_wait_ns(&mw->lim);
    s->peak_bytes_held = limiter_peak(&mw->lim);
    return 0;
}

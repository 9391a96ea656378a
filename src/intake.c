/* Intake: how input becomes compression jobs.
 *
 *   stage   partition-ordered records collect in a buffer of job_size bytes
 *           (one partition at a time); a full stage, or a new partition,
 *           becomes one job.
 *   arena   records out of partition order collect as [u32 partition]
 *           [u32 len][bytes]; a full arena is grouped by partition (a stable
 *           counting sort into one copy) and cut into jobs.
 *   batch   a caller's batch already grouped by partition is cut into jobs
 *           in place, borrowed: the call returns when no job reads it.
 *
 * A job takes up to job_size input bytes, from one partition or many small
 * ones; a larger partition is split. Budget: see writer_int.h. */
#include <string.h>

#include "writer_int.h"

#define ARENA_SMALL_RECORD 4096u /* records up to this size take intake_held's fast path */

/* ---- budget helpers -------------------------------------------------------------- */

/* Segments a grouped input of `payload` bytes over `parts` partitions can be
 * cut into, with room for jobs ended early by their charge cap. */
static uint64_t max_segs(const mts_writer *w, uint64_t payload, uint32_t parts)
{
    return 2 * ((uint64_t)parts + 2 * (payload / w->job_size) + 2);
}

/* Everything an arena's records cost besides the arena itself until its
 * jobs are drained: their order (4 bytes a record) and every job's charge.
 * The codec bound of several pieces is at most the bound of their sum plus
 * two empty streams each. */
static uint64_t arena_need(const mts_writer *w, uint64_t payload, uint32_t parts, uint64_t records)
{
    uint64_t segs = max_segs(w, payload, parts);
    return sizeof(inbuf) + 4 * records + w->codec->bound(&w->cp, payload) +
           segs * (sizeof(job) + sizeof(seg) + sizeof(chunk) + 2 * w->codec->bound(&w->cp, 0));
}

/* The reservation of one arena: its buffer, the order of as many records as
 * fit (each at least a header), and the jobs they become. */
static uint64_t arena_unit(const mts_writer *w)
{
    return w->arena_cap + sizeof(inbuf) + w->arena_cap / 2 + w->codec->bound(&w->cp, w->arena_cap) + w->arena_cap / 2;
}

static int acquire(mts_writer *w, uint64_t n)
{
    int rc = eng_acquire(&w->client, n);
    if (rc == MTS_E_ABORTED && writer_failed(w)) rc = writer_failed(w);
    return rc;
}

/* ---- cutting input into jobs --------------------------------------------------- */

/* Makes plan[0..nsegs) of in into a job bound for dest and submits it; its
 * charge is paid already. */
static int submit_job(mts_writer *w, inbuf *in, destination *dest, const seg *plan, uint32_t nsegs, uint64_t charge,
                      int quiet)
{
    job *j = mts_malloc(sizeof(job) + nsegs * sizeof(seg));
    if (!j) {
        eng_release(&w->client, charge);
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
    if (quiet) eng_submit_quiet(&w->client, &j->base);
    else eng_submit(&w->client, &j->base);
    return 0;
}

/* Submits jobs for partitions [p_first, p_last] of in, partition p_first+k
 * spanning in->base[offs[k], offs[k+1]). Empty partitions get no segment.
 * Job charges come from *prepaid while it lasts, else from the budget. */
static int submit_range(mts_writer *w, inbuf *in, uint32_t p_first, uint32_t p_last, const uint64_t *offs,
                        destination *dest, uint64_t *prepaid, int quiet)
{
    uint32_t k = 0, count = p_last - p_first + 1;
    uint64_t pos = offs[0]; /* next byte of in to hand to a job */
    seg *plan = w->plan;
    for (;;) {
        uint32_t nsegs = 0;
        uint64_t in_bytes = 0, charge = sizeof(job);
        while (k < count && nsegs < MAX_SEGS_PER_JOB) {
            uint64_t end = offs[k + 1];
            if (pos >= end) {
                k++;
                continue;
            }
            uint64_t take = MTS_MIN(end - pos, w->job_size - in_bytes);
            uint64_t c = job_seg_charge(w, take);
            if (nsegs && charge + c > w->job_charge_cap) break;
            plan[nsegs++] = (seg){p_first + k, 0, pos, take, NULL};
            in_bytes += take;
            charge += c;
            pos += take;
            if (in_bytes >= w->job_size) break;
        }
        if (nsegs == 0) return 0;
        if (prepaid && *prepaid >= charge) {
            *prepaid -= charge;
        } else {
            /* Only borrowed input comes here with nothing of the producer's
             * own held (the budget rule). */
            uint64_t have = prepaid ? *prepaid : 0;
            if (prepaid) *prepaid = 0;
            int rc = acquire(w, charge - have);
            if (rc < 0) {
                eng_release(&w->client, have);
                return rc;
            }
        }
        FORWARD_IF_ERROR(submit_job(w, in, dest, plan, nsegs, charge, quiet));
    }
}

/* Waits until the jobs cut from a borrowed inbuf have all read it. */
static void inbuf_wait_borrowed(mts_writer *w, inbuf *in)
{
    pthread_mutex_lock(&w->mu);
    while (in->refs > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static int submit_borrowed(mts_writer *w, const void *data, uint32_t p_first, uint32_t p_last, const uint64_t *offs,
                           destination *dest)
{
    inbuf in = {NULL, data, 0, NULL, 1};
    int rc = submit_range(w, &in, p_first, p_last, offs, dest, NULL, 0);
    inbuf_unref(w, &in);
    inbuf_wait_borrowed(w, &in);
    return rc;
}

/* ---- partition-ordered intake: the stage ----------------------------------------- */

/* last: the input ends here and the caller waits for the job next, so it
 * runs the job itself rather than hand it to a worker. */
static int stage_flush(mts_writer *w, int last)
{
    inbuf *in = w->stage;
    if (!in) return 0;
    w->stage = NULL;
    uint64_t offs[2] = {0, w->stage_used};
    int rc = submit_range(w, in, (uint32_t)w->cur_part, (uint32_t)w->cur_part, offs, &w->out.d, &w->stage_prepaid,
                          last);
    eng_release(&w->client, w->stage_prepaid);
    w->stage_prepaid = 0;
    inbuf_unref(w, in); /* the producer's reference */
    return rc;
}

static int stage_new(mts_writer *w)
{
    uint64_t buf = w->job_size + sizeof(inbuf), jobc = sizeof(job) + job_seg_charge(w, w->job_size);
    FORWARD_IF_ERROR(acquire(w, buf + jobc));
    inbuf *in = mts_malloc(sizeof *in);
    unsigned char *mem = in ? mts_malloc(w->job_size) : NULL;
    if (!mem) {
        mts_free(in);
        eng_release(&w->client, buf + jobc);
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte stage buffer", (unsigned long long)w->job_size);
        return MTS_E_NOMEM;
    }
    *in = (inbuf){mem, mem, buf, NULL, 1};
    w->stage = in;
    w->stage_used = 0;
    w->stage_prepaid = jobc;
    return 0;
}

int intake_stream(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    if ((int64_t)p != w->cur_part) {
        FORWARD_IF_ERROR(stage_flush(w, 0));
        w->cur_part = p;
    }
    while (len) {
        if (!w->stage) FORWARD_IF_ERROR(stage_new(w));
        size_t n = (size_t)MTS_MIN((uint64_t)len, w->job_size - w->stage_used);
        memcpy(w->stage->mem + w->stage_used, b, n);
        w->stage_used += n;
        b += n;
        len -= n;
        if (w->stage_used == w->job_size) FORWARD_IF_ERROR(stage_flush(w, 0));
    }
    return 0;
}

/* ---- unordered intake: the arena --------------------------------------------------- */

/* Gives the arena and its reservation back (it must be empty). */
static void arena_drop(mts_writer *w)
{
    mts_free(w->arena);
    w->arena = NULL;
    eng_release(&w->client, w->arena_reserved);
    w->arena_reserved = 0;
}

/* An arena with its whole reservation: the one in use, else the spare with
 * the rest of its unit if that is free now, else a fresh one, waiting for the
 * budget while the writer holds nothing of its own. */
static int arena_ready(mts_writer *w)
{
    uint64_t unit = w->arena_unit_bytes;
    if (w->arena && w->arena_reserved == unit) return 0;
    if (!w->counts) {
        w->counts = mts_calloc((size_t)w->o.num_partitions + 1, sizeof(uint64_t));
        w->seen = mts_calloc(w->o.num_partitions, sizeof(uint32_t));
        if (!w->counts || !w->seen) {
            writer_fail(w, MTS_E_NOMEM, "allocate %u partition counters", w->o.num_partitions);
            return MTS_E_NOMEM;
        }
        w->arena_epoch = 1;
    }
    arena_drop(w); /* nothing to drop: a flush hands the arena to its jobs */
    /* An arena back from its jobs saves faulting in a fresh one; it comes
     * with its own share of the budget. */
    unsigned char *spare = arena_take_spare(w);
    if (spare && eng_try_acquire(&w->client, unit - w->arena_cap) == 0) {
        w->arena = spare;
        w->arena_reserved = unit;
        return 0;
    }
    if (spare) { /* no room for the rest now: give it back before waiting */
        mts_free(spare);
        eng_release(&w->client, w->arena_cap);
    }
    FORWARD_IF_ERROR(acquire(w, unit));
    w->arena_reserved = unit;
    w->arena = mts_malloc(w->arena_cap);
    if (!w->arena) {
        arena_drop(w);
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte record arena", (unsigned long long)w->arena_cap);
        return MTS_E_NOMEM;
    }
    return 0;
}

/* Submits jobs over an arena's records grouped by partition: order[] holds
 * the records' offsets, partition p's from first[p] to first[p+1]. A job
 * takes whole records up to job_size bytes (a larger record alone); the
 * workers gather each segment's records before compressing. */
static int submit_gathered(mts_writer *w, inbuf *in, const uint64_t *first, uint64_t *prepaid)
{
    uint32_t n = w->o.num_partitions, p = 0;
    uint64_t k = 0; /* next record, in order[] */
    seg *plan = w->plan;
    for (;;) {
        uint32_t nsegs = 0;
        uint64_t in_bytes = 0, charge = sizeof(job);
        while (p < n && nsegs < MAX_SEGS_PER_JOB) {
            if (k >= first[p + 1]) {
                p++;
                continue;
            }
            /* This partition's records from k while they fit the job. */
            uint64_t start = k, bytes = 0;
            while (k < first[p + 1]) {
                uint32_t len;
                memcpy(&len, in->base + in->order[k] + 4, 4);
                if ((in_bytes || bytes) && in_bytes + bytes + len > w->job_size) break;
                bytes += len;
                k++;
            }
            if (k == start) break; /* the job is full */
            uint64_t c = job_seg_charge(w, bytes);
            if (nsegs && charge + c > w->job_charge_cap) {
                k = start;
                break;
            }
            if (bytes) {
                plan[nsegs++] = (seg){p, (uint32_t)(k - start), start, bytes, NULL};
                charge += c;
            }
            in_bytes += bytes;
            if (in_bytes >= w->job_size) break;
        }
        if (nsegs == 0 && p >= n) return 0;
        if (nsegs == 0) continue; /* only empty records so far */
        if (*prepaid < charge) { /* cannot happen: arena_need() bounds every job */
            writer_fail(w, MTS_E_OVERFLOW, "an arena's jobs need %llu bytes more than reserved",
                        (unsigned long long)(charge - *prepaid));
            return MTS_E_OVERFLOW;
        }
        *prepaid -= charge;
        FORWARD_IF_ERROR(submit_job(w, in, w->held_dest, plan, nsegs, charge, 0));
    }
}

/* Groups the arena's records by partition (a stable counting sort of their
 * offsets, not their bytes) and hands the arena itself to the jobs, which
 * gather each segment's records on the workers. The arena's reservation
 * pays for everything; the next record starts a new arena. */
static int arena_flush(mts_writer *w)
{
    if (!w->arena_used) return 0;
    uint32_t n = w->o.num_partitions;
    uint64_t *first = w->counts, nrec = w->arena_records;
    memset(first, 0, ((size_t)n + 1) * sizeof(uint64_t));
    for (uint64_t o = 0; o < w->arena_used;) {
        uint32_t p, len;
        memcpy(&p, w->arena + o, 4);
        memcpy(&len, w->arena + o + 4, 4);
        first[p + 1]++;
        o += RECORD_HEADER + len;
    }
    for (uint32_t p = 0; p < n; p++) first[p + 1] += first[p];
    inbuf *in = mts_malloc(sizeof *in);
    uint32_t *order = in ? mts_malloc((size_t)nrec * sizeof *order) : NULL;
    if (!order) {
        mts_free(in);
        writer_fail(w, MTS_E_NOMEM, "allocate the order of %llu records", (unsigned long long)nrec);
        return MTS_E_NOMEM;
    }
    /* first[p] walks from partition p's first record to its end while
     * filling; afterwards first[p] is the start of p+1. */
    for (uint64_t o = 0; o < w->arena_used;) {
        uint32_t p, len;
        memcpy(&p, w->arena + o, 4);
        memcpy(&len, w->arena + o + 4, 4);
        order[first[p]++] = (uint32_t)o;
        o += RECORD_HEADER + len;
    }
    memmove(first + 1, first, (size_t)n * sizeof(uint64_t));
    first[0] = 0;
    uint64_t charge = w->arena_cap + sizeof(inbuf) + 4 * nrec;
    uint64_t prepaid = w->arena_reserved - charge;
    *in = (inbuf){w->arena, w->arena, charge, order, 1};
    w->arena = NULL; /* the jobs' now */
    w->arena_reserved = 0;
    w->arena_used = w->arena_payload = w->arena_records = 0;
    w->arena_parts = 0;
    w->arena_epoch++;
    int rc = submit_gathered(w, in, first, &prepaid);
    eng_release(&w->client, prepaid);
    inbuf_unref(w, in);
    return rc;
}

static int arena_fits(const mts_writer *w, uint32_t p, size_t len)
{
    uint32_t parts = w->arena_parts + (w->seen[p] != w->arena_epoch);
    return w->arena_used + RECORD_HEADER + len <= w->arena_cap &&
           w->arena_cap + arena_need(w, w->arena_payload + len, parts, w->arena_records + 1) <= arena_unit(w);
}

/* The most one record of len bytes can add to arena_need(): its copy, its
 * share of the codec bound (at most len plus an empty stream's), and the
 * segments it can start. */
static uint64_t record_need(const mts_writer *w, size_t len)
{
    uint64_t per_seg = sizeof(job) + sizeof(seg) + sizeof(chunk) + 2 * w->codec->bound(&w->cp, 0);
    /* its order entry; bound growth at most len + len/3 + two empty streams
     * (lz4's 21-byte headers per 64+ bytes, zstd's len/256); segments as
     * max_segs() */
    return 4 + 2 * (uint64_t)len + 2 * w->codec->bound(&w->cp, 0) +
           per_seg * (2 + 4 * ((uint64_t)len / w->job_size + 1));
}

/* Slack: what the arena's reservation still surely covers, so that most
 * records need no exact check (arena_fits() is one every few thousand). */
static void arena_measure(mts_writer *w)
{
    uint64_t need = w->arena_cap + arena_need(w, w->arena_payload, w->arena_parts, w->arena_records);
    w->arena_slack = need < arena_unit(w) ? arena_unit(w) - need : 0;
}

int intake_held(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    if (w->arena && w->arena_reserved == w->arena_unit_bytes && len <= ARENA_SMALL_RECORD &&
        w->arena_used + RECORD_HEADER + len <= w->arena_cap && w->arena_slack >= w->arena_small_need) {
        w->arena_slack -= w->arena_small_need; /* the fast path: a small record, room to spare */
    } else {
        FORWARD_IF_ERROR(arena_ready(w));
        if (!arena_fits(w, p, len)) {
            FORWARD_IF_ERROR(arena_flush(w));
            FORWARD_IF_ERROR(arena_ready(w));
            if (!arena_fits(w, p, len)) { /* too large for any arena: straight from the caller */
                arena_drop(w);
                uint64_t offs[2] = {0, len};
                return submit_borrowed(w, b, p, p, offs, w->held_dest);
            }
        }
        arena_measure(w);
        uint64_t d = record_need(w, len);
        w->arena_slack = w->arena_slack > d ? w->arena_slack - d : 0;
    }
    if (w->seen[p] != w->arena_epoch) {
        w->seen[p] = w->arena_epoch;
        w->arena_parts++;
    }
    uint32_t len32 = (uint32_t)len;
    memcpy(w->arena + w->arena_used, &p, 4);
    memcpy(w->arena + w->arena_used + 4, &len32, 4);
    if (len) memcpy(w->arena + w->arena_used + RECORD_HEADER, b, len);
    w->arena_used += RECORD_HEADER + len;
    w->arena_payload += len;
    w->arena_records++;
    return 0;
}

int intake_flush(mts_writer *w, int last)
{
    FORWARD_IF_ERROR(stage_flush(w, last));
    if (w->arena) {
        FORWARD_IF_ERROR(arena_flush(w));
        arena_drop(w);
    }
    return 0;
}

int intake_batch(mts_writer *w, const void *data, const uint64_t *offsets, destination *dest)
{
    FORWARD_IF_ERROR(intake_flush(w, 0)); /* keeps arrival order; holds nothing of its own after */
    return submit_borrowed(w, data, 0, w->o.num_partitions - 1, offsets, dest);
}

void intake_free(mts_writer *w)
{
    if (w->stage) {
        eng_release(&w->client, w->stage->charge + w->stage_prepaid);
        mts_free(w->stage->mem);
        mts_free(w->stage);
        w->stage = NULL;
        w->stage_prepaid = 0;
    }
    w->arena_used = w->arena_payload = w->arena_records = 0;
    if (w->client_up) {
        arena_drop(w);
        arena_free_spare(w);
    }
    mts_free(w->counts);
    mts_free(w->seen);
    w->counts = NULL;
    w->seen = NULL;
}

void intake_init(mts_writer *w)
{
    w->arena_unit_bytes = arena_unit(w);
    w->arena_small_need = record_need(w, ARENA_SMALL_RECORD);
}

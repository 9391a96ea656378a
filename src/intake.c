/* Intake: how input becomes compression jobs.
 *
 *   stage   partition-ordered records collect in a buffer of job_size bytes
 *           (one partition at a time); a full stage, or a new partition,
 *           becomes one job.
 *   arena   records out of partition order are copied once, each to the end
 *           of its partition's chain of pages; a full arena is cut into
 *           jobs, each chain a stream.
 *   batch   a caller's batch already grouped by partition is cut into jobs
 *           in place, borrowed: the call returns when no job reads it.
 *
 * A job takes up to job_size input bytes, from one partition or many small
 * ones; a larger partition is split. Budget: see writer_int.h. */
#include <string.h>

#include "writer_int.h"

/* ---- budget helpers -------------------------------------------------------------- */

/* n bytes of budget, of which `size` are one buffer: *buf is a kept one of
 * that size, or NULL for the caller to allocate (size 0: no buffer). */
static int acquire_buffer(mts_writer *w, uint64_t n, size_t size, void **buf)
{
    int rc = eng_acquire_buffer(&w->client, n, size, buf);
    if (rc == MTS_E_ABORTED && writer_failed(w)) rc = writer_failed(w);
    return rc;
}

static int acquire(mts_writer *w, uint64_t n)
{
    return acquire_buffer(w, n, 0, NULL);
}

/* ---- cutting input into jobs --------------------------------------------------- */

/* How a job is queued: waking a worker where a CPU is free; quietly (the
 * caller runs it itself); or waking one only where a CPU is free besides
 * the caller's, which waits for it helping (eng_submit_helped). */
enum { SUBMIT_WAKE, SUBMIT_QUIET, SUBMIT_HELPED };

/* Makes plan[0..nsegs) of in into a job bound for dest and submits it; its
 * charge is paid already. */
static int submit_job(mts_writer *w, inbuf *in, destination *dest, const seg *plan, uint32_t nsegs, uint64_t charge,
                      int how)
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
    j->seq = ++w->jobs_submitted;
    memcpy(j->segs, plan, nsegs * sizeof(seg));
    if (dest == &w->runs.d)
        for (uint32_t i = 0; i < nsegs; i++) runs_note_job(&w->runs, plan[i].partition, j->seq);
    pthread_mutex_lock(&w->mu);
    in->refs++;
    pthread_mutex_unlock(&w->mu);
    if (how == SUBMIT_QUIET) eng_submit_quiet(&w->client, &j->base);
    else if (how == SUBMIT_HELPED) eng_submit_helped(&w->client, &j->base);
    else eng_submit(&w->client, &j->base);
    return 0;
}

/* Submits jobs for partitions [p_first, p_last] of in, partition p_first+k
 * spanning in->base[offs[k], offs[k+1]). Empty partitions get no segment.
 * Job charges come from *prepaid while it lasts, else from the budget.
 * taper: the caller waits for these jobs, so as the input runs out they
 * shrink (at least two a worker to the end, none under a quarter of a job),
 * and the last ones, which run while the other workers have nothing left,
 * end sooner. */
static int submit_range(mts_writer *w, inbuf *in, uint32_t p_first, uint32_t p_last, const uint64_t *offs,
                        destination *dest, uint64_t *prepaid, int how, int taper)
{
    uint32_t k = 0, count = p_last - p_first + 1;
    uint64_t pos = offs[0]; /* next byte of in to hand to a job */
    uint64_t job_bytes = w->job_size, per_round = 2ull * eng_parallelism(w->engine);
    seg *plan = w->plan;
    for (;;) {
        uint32_t nsegs = 0;
        uint64_t in_bytes = 0, charge = JOB_CHARGE;
        if (taper)
            job_bytes = MTS_MIN(w->job_size, MTS_MAX(w->job_size / 4, (offs[count] - pos) / per_round));
        while (k < count && nsegs < MAX_SEGS_PER_JOB) {
            uint64_t end = offs[k + 1];
            if (pos >= end) {
                k++;
                continue;
            }
            uint64_t take = MTS_MIN(end - pos, job_bytes - in_bytes);
            uint64_t c = job_seg_charge(w, take);
            if (nsegs && charge + c > w->job_charge_cap) break;
            plan[nsegs++] = (seg){p_first + k, pos, take, NULL};
            in_bytes += take;
            charge += c;
            pos += take;
            if (in_bytes >= job_bytes) break;
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
        FORWARD_IF_ERROR(submit_job(w, in, dest, plan, nsegs, charge, how));
    }
}

/* Waits until the jobs cut from a borrowed inbuf have all read it. */
static void inbuf_wait_borrowed(mts_writer *w, inbuf *in)
{
    pthread_mutex_lock(&w->mu);
    while (in->refs > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* Hands bytes the caller owns to jobs bound for dest. Without done, returns
 * once no job reads them. With done (given asynchronously), returns once the
 * jobs are queued, and the last of them calls done(ctx); after a failure done
 * is not called and the call waits as without it, since the caller has its
 * bytes back. */
static int submit_borrowed(mts_writer *w, const void *data, uint32_t p_first, uint32_t p_last, const uint64_t *offs,
                           destination *dest, mts_batch_done done, void *ctx)
{
    inbuf local; /* the caller's stack serves while it waits */
    inbuf *in = done ? mts_malloc(sizeof *in) : &local;
    if (!in) {
        writer_fail(w, MTS_E_NOMEM, "allocate a batch's descriptor");
        return MTS_E_NOMEM;
    }
    *in = (inbuf){NULL, data, 0, NULL, 0, 1, done, ctx};
    /* A caller that waits has the batch's last jobs tapered, wherever they
     * go: untapered, the last one ran alone while the other CPUs idled, at
     * the end of every batch (BENCHMARKS.md). It also counts as a CPU: it
     * runs what is left of its jobs (below), so they wake workers only for
     * the others. */
    int rc = submit_range(w, in, p_first, p_last, offs, dest, NULL, done ? SUBMIT_WAKE : SUBMIT_HELPED, !done);
    if (done && rc == 0) {
        inbuf_unref(w, in); /* done runs here if the jobs are through already */
        return 0;
    }
    if (done) {
        pthread_mutex_lock(&w->mu);
        in->done = NULL;
        pthread_mutex_unlock(&w->mu);
    }
    inbuf_unref(w, in);
    /* Waiting, the caller runs its queued jobs where a worker is idle rather
     * than sleep: a worker woken onto the caller's CPU while the other CPU
     * idles waited there up to a scheduler tick (BENCHMARKS.md). */
    if (!done) eng_wait_idle(&w->client);
    inbuf_wait_borrowed(w, in);
    if (in != &local) mts_free(in);
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
                          last ? SUBMIT_QUIET : SUBMIT_WAKE, 0);
    eng_release(&w->client, w->stage_prepaid);
    w->stage_prepaid = 0;
    inbuf_unref(w, in); /* the producer's reference */
    return rc;
}

static int stage_new(mts_writer *w)
{
    uint64_t buf = w->job_size + sizeof(inbuf), jobc = JOB_CHARGE + job_seg_charge(w, w->job_size);
    void *mem; /* one the engine kept, else a fresh one below */
    FORWARD_IF_ERROR(acquire_buffer(w, buf + jobc, w->job_size, &mem));
    inbuf *in = mts_malloc(sizeof *in);
    if (in && !mem) mem = mts_malloc(w->job_size);
    if (!in || !mem) {
        mts_free(in);
        mts_free(mem);
        eng_release(&w->client, buf + jobc);
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte stage buffer", (unsigned long long)w->job_size);
        return MTS_E_NOMEM;
    }
    *in = (inbuf){mem, mem, buf, NULL, 0, 1};
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

/* ---- unordered intake: the arena ----------------------------------------------------- */

/* The arena is npages pages of `page` bytes. Each partition appends to its
 * own chain of pages (one copy of every record, straight into its place in
 * partition order); pages are handed out in order, so an arena is full when
 * the last page is. A full arena goes to the jobs whole: each partition's
 * chain is one stream (split at page boundaries past job_size), which the
 * workers compress from the page itself or after joining its pages. */

/* The reservation of one arena: its memory, and the jobs its pages become:
 * a segment is at least one page, and the codec bound of several pieces is
 * at most the bound of their sum plus two empty streams each. */
static uint64_t arena_unit(const mts_writer *w)
{
    uint64_t per_seg = JOB_CHARGE + sizeof(seg) + sizeof(chunk) + 2 * w->codec->bound(&w->cp, 0);
    return w->arena_bytes + sizeof(inbuf) + w->codec->bound(&w->cp, w->arena_cap) + w->npages * per_seg;
}

static uint32_t *arena_next(const mts_writer *w, unsigned char *arena)
{
    return (uint32_t *)(void *)(arena + w->arena_cap);
}

/* Gives the arena and its reservation back (it must be empty). */
static void arena_drop(mts_writer *w)
{
    if (w->arena) {
        arena_discard(w, w->arena, w->arena_bytes);
        w->arena_reserved -= w->arena_bytes;
    }
    w->arena = NULL;
    eng_release(&w->client, w->arena_reserved);
    w->arena_reserved = 0;
}

/* Fits the next arena to writers_at_once, else to the writers and readers
 * on the engine now (at least 2): at create, and again between arenas, since
 * the first tasks of a stage are created before the others and would
 * otherwise keep the arenas of an engine to themselves. */
static void arena_refit(mts_writer *w)
{
    uint32_t sharers = MTS_MAX(2u, w->o.writers_at_once ? w->o.writers_at_once : eng_clients(w->engine));
    if (sharers == w->arena_sharers) return;
    writer_fit_arena(w, eng_cap(w->engine), sharers);
    w->arena_unit_bytes = arena_unit(w);
}

/* An arena with its whole reservation: the one in use, else the spare with
 * the rest of its unit if that is free now, else a fresh one, waiting for the
 * budget while the writer holds nothing of its own. */
static int arena_ready(mts_writer *w)
{
    if (w->arena) return 0;
    arena_refit(w);
    uint64_t unit = w->arena_unit_bytes;
    if (!w->chain) {
        w->chain = mts_malloc((size_t)w->o.num_partitions * 4 * sizeof(uint32_t));
        if (!w->chain) {
            writer_fail(w, MTS_E_NOMEM, "allocate %u partition chains", w->o.num_partitions);
            return MTS_E_NOMEM;
        }
        for (uint32_t p = 0; p < w->o.num_partitions; p++) w->chain[4 * p + CH_LAST] = NO_PAGE;
    }
    w->pages_used = 0;
    /* An arena back from its jobs, or one an earlier writer left with the
     * engine, saves faulting in a fresh one; the writer's spare comes with
     * its own share of the budget, and goes to the engine if the rest of its
     * unit does not fit now (the producer waits holding nothing). */
    unsigned char *spare = arena_take_spare(w, w->arena_bytes);
    if (spare && eng_try_acquire(&w->client, unit - w->arena_bytes) == 0) {
        w->arena = spare;
        w->arena_reserved = unit;
        return 0;
    }
    arena_discard(w, spare, w->arena_bytes);
    void *mem;
    FORWARD_IF_ERROR(acquire_buffer(w, unit, w->arena_bytes, &mem));
    w->arena_reserved = unit;
    w->arena = mem ? mem : mts_malloc(w->arena_bytes);
    if (!w->arena) {
        arena_drop(w);
        writer_fail(w, MTS_E_NOMEM, "allocate a %llu-byte record arena", (unsigned long long)w->arena_bytes);
        return MTS_E_NOMEM;
    }
    return 0;
}

/* Submits the job planned in w->plan, paying from *prepaid. */
static int submit_planned(mts_writer *w, inbuf *in, destination *dest, uint32_t nsegs, uint64_t charge,
                          uint64_t *prepaid)
{
    if (*prepaid < charge) { /* cannot happen: arena_unit() bounds every job */
        writer_fail(w, MTS_E_OVERFLOW, "an arena's jobs need %llu bytes more than reserved",
                    (unsigned long long)(charge - *prepaid));
        return MTS_E_OVERFLOW;
    }
    *prepaid -= charge;
    return submit_job(w, in, dest, w->plan, nsegs, charge, SUBMIT_WAKE);
}

/* Cuts the arena's chains into jobs, in partition order: a job takes
 * partitions' chains up to job_bytes (at least a page), a longer chain is
 * split at a page boundary. Resets every chain, also on failure. */
static int submit_chains(mts_writer *w, inbuf *in, destination *dest, uint64_t job_bytes, uint64_t *prepaid)
{
    uint32_t pg = in->page, nsegs = 0;
    uint64_t in_bytes = 0, charge = JOB_CHARGE;
    int rc = 0;
    for (uint32_t p = 0; p < w->o.num_partitions; p++) {
        uint32_t *ch = &w->chain[4 * p];
        if (ch[CH_LAST] == NO_PAGE) continue;
        ch[CH_LAST] = NO_PAGE;
        uint64_t left = ch[CH_BYTES];
        uint32_t page = ch[CH_FIRST];
        while (left && rc == 0) {
            uint64_t take = left, room = job_bytes - in_bytes;
            if (take > room) take = room / pg * pg; /* whole pages; none when less than one fits */
            uint64_t c = job_seg_charge(w, take);
            if (nsegs && (!take || nsegs == MAX_SEGS_PER_JOB || charge + c > w->job_charge_cap)) {
                rc = submit_planned(w, in, dest, nsegs, charge, prepaid);
                nsegs = 0;
                in_bytes = 0;
                charge = JOB_CHARGE;
                continue;
            }
            w->plan[nsegs++] = (seg){p, page, take, NULL};
            in_bytes += take;
            charge += c;
            left -= take;
            for (uint64_t k = 0; left && k < take / pg; k++) page = in->next[page];
        }
    }
    if (nsegs && rc == 0) rc = submit_planned(w, in, dest, nsegs, charge, prepaid);
    return rc;
}

/* Hands the arena to jobs that compress each partition's chain, bound for
 * dest; the arena's reservation pays for them all. The next record takes a
 * new arena. last: the input ends here and the caller waits for these jobs,
 * so they are cut smaller (a quarter of a job): the last of them, which runs
 * alone on one CPU while the other has nothing left, and the assembly that
 * waits for it, end sooner. */
static int arena_flush(mts_writer *w, destination *dest, int last)
{
    if (!w->arena || !w->pages_used) return 0;
    inbuf *in = mts_malloc(sizeof *in);
    if (!in) {
        writer_fail(w, MTS_E_NOMEM, "allocate an arena's descriptor");
        return MTS_E_NOMEM;
    }
    uint64_t charge = w->arena_bytes + sizeof(inbuf);
    uint64_t prepaid = w->arena_reserved - charge;
    *in = (inbuf){w->arena, w->arena, charge, arena_next(w, w->arena), w->page, 1, NULL, NULL, w->arena_bytes};
    w->arena = NULL; /* the jobs' now */
    w->arena_reserved = 0;
    w->pages_used = 0;
    uint64_t job_bytes = last ? MTS_MAX((uint64_t)w->page, w->job_size / 4) : w->job_size;
    int rc = submit_chains(w, in, dest, job_bytes, &prepaid);
    eng_release(&w->client, prepaid);
    inbuf_unref(w, in);
    return rc;
}

/* Appends len bytes to partition p's chain, taking pages as it goes; the
 * arena has room for them. */
static void chain_append(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    uint32_t *ch = &w->chain[4 * p], pg = w->page, *next = arena_next(w, w->arena);
    ch[CH_BYTES] = ch[CH_LAST] == NO_PAGE ? 0 : ch[CH_BYTES];
    ch[CH_BYTES] += (uint32_t)len;
    while (len) {
        if (ch[CH_LAST] == NO_PAGE || ch[CH_FILL] == pg) {
            uint32_t page = w->pages_used++;
            if (ch[CH_LAST] == NO_PAGE) ch[CH_FIRST] = page;
            else next[ch[CH_LAST]] = page;
            ch[CH_LAST] = page;
            ch[CH_FILL] = 0;
        }
        size_t n = MTS_MIN(len, (size_t)(pg - ch[CH_FILL]));
        memcpy(w->arena + (size_t)ch[CH_LAST] * pg + ch[CH_FILL], b, n);
        ch[CH_FILL] += (uint32_t)n;
        b += n;
        len -= n;
    }
}

/* Room for len more bytes of partition p in the arena. */
static uint64_t arena_room(const mts_writer *w, uint32_t p)
{
    const uint32_t *ch = &w->chain[4 * p];
    uint64_t room = (uint64_t)(w->npages - w->pages_used) * w->page;
    if (ch[CH_LAST] != NO_PAGE) room += w->page - ch[CH_FILL];
    return room;
}

int intake_held_slow(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    FORWARD_IF_ERROR(arena_ready(w));
    if (arena_room(w, p) < len) {
        FORWARD_IF_ERROR(arena_flush(w, w->held_dest, 0));
        FORWARD_IF_ERROR(arena_ready(w));
        if (arena_room(w, p) < len) { /* larger than an arena: straight from the caller */
            arena_drop(w);
            uint64_t offs[2] = {0, len};
            return submit_borrowed(w, b, p, p, offs, w->held_dest, NULL, NULL);
        }
    }
    chain_append(w, p, b, len);
    return 0;
}

int intake_flush(mts_writer *w, int last)
{
    FORWARD_IF_ERROR(stage_flush(w, last));
    if (w->arena) {
        FORWARD_IF_ERROR(arena_flush(w, w->held_dest, last));
        arena_drop(w);
    }
    /* The input ends: the run store writes partitions out as the last jobs
     * complete them. */
    if (last && w->mode == MODE_HELD && w->held_dest == &w->runs.d) runs_end_input(&w->runs, &w->out);
    return 0;
}

int intake_batch(mts_writer *w, const void *data, const uint64_t *offsets, destination *dest, mts_batch_done done,
                 void *ctx)
{
    /* Compressed in place, borrowed, the last jobs of a batch waited for
     * tapered: into the data file (streaming), the run store (each batch's
     * slices streams of their own, joined there; copying the batch into the
     * arena instead cost more than those tails, BENCHMARKS.md), or each
     * batch's own streams into the partition files (the baseline, as the
     * design before this one did). */
    FORWARD_IF_ERROR(intake_flush(w, 0)); /* keeps arrival order; holds nothing of its own after */
    return submit_borrowed(w, data, 0, w->o.num_partitions - 1, offsets, dest, done, ctx);
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
    w->pages_used = 0;
    if (w->client_up) {
        arena_drop(w);
        arena_free_spare(w);
    }
    mts_free(w->chain);
    w->chain = NULL;
}

void intake_init(mts_writer *w)
{
    arena_refit(w);
}

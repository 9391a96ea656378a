/* Compression jobs and the ordered writer.
 *
 * A job is a list of segments of one input buffer, each one partition's
 * bytes. Any worker runs it: every segment becomes one complete codec stream
 * (a chunk) with its checksum. The engine then drains the writer's jobs in
 * submission order, one at a time, on whichever worker finished the head
 * job: the ordered writer hands each job's chunks to the job's destination. */
#include <string.h>

#include "checksum.h"
#include "writer_int.h"

uint64_t job_seg_charge(const mts_writer *w, uint64_t take)
{
    return sizeof(seg) + sizeof(chunk) + w->codec->bound(&w->cp, take);
}

void inbuf_unref(mts_writer *w, inbuf *in)
{
    pthread_mutex_lock(&w->mu);
    int left = --in->refs;
    unsigned char *mem = in->mem; /* read under the lock: a borrowed inbuf */
    mts_batch_done done = in->done; /* may live on a stack gone after it */
    if (left == 0 && !mem && !done) pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (left != 0) return;
    if (done) { /* borrowed asynchronously: the caller has its batch back */
        void *ctx = in->done_ctx;
        mts_free(in);
        done(ctx);
        return;
    }
    if (!mem) return;
    if (in->next) { /* an arena: the writer's spare, else the engine's */
        if (writer_failed(w) || !arena_keep(w, mem, in->arena_bytes)) arena_discard(w, mem, in->arena_bytes);
        eng_release(&w->client, in->charge - in->arena_bytes); /* the arena's share went with it */
    } else if (eng_cache_give(&w->client, mem, w->job_size)) { /* a stage buffer */
        eng_release(&w->client, in->charge - w->job_size);
    } else {
        eng_release(&w->client, in->charge);
        mts_free(mem);
    }
    mts_free(in);
}

int arena_keep(mts_writer *w, unsigned char *arena, uint64_t bytes)
{
    /* Reclaimable first: a reclaimer that finds no spare yet frees nothing. */
    eng_note_reclaimable(&w->client, (int64_t)bytes);
    pthread_mutex_lock(&w->mu);
    int kept = w->spare == NULL;
    if (kept) {
        w->spare = arena;
        w->spare_bytes = bytes;
    }
    pthread_mutex_unlock(&w->mu);
    if (!kept) eng_note_reclaimable(&w->client, -(int64_t)bytes);
    return kept;
}

/* The spare whatever its size, and that size. */
static unsigned char *spare_take(mts_writer *w, uint64_t *bytes)
{
    pthread_mutex_lock(&w->mu);
    unsigned char *a = w->spare;
    *bytes = w->spare_bytes;
    w->spare = NULL;
    pthread_mutex_unlock(&w->mu);
    if (a) eng_note_reclaimable(&w->client, -(int64_t)*bytes);
    return a; /* still charged its bytes */
}

unsigned char *arena_take_spare(mts_writer *w, uint64_t bytes)
{
    uint64_t have;
    unsigned char *a = spare_take(w, &have);
    if (a && have != bytes) { /* the writer's arenas were refitted since */
        arena_discard(w, a, have);
        a = NULL;
    }
    return a;
}

void arena_discard(mts_writer *w, unsigned char *arena, uint64_t bytes)
{
    if (!arena || eng_cache_give(&w->client, arena, bytes)) return;
    mts_free(arena);
    eng_release(&w->client, bytes);
}

void arena_free_spare(mts_writer *w)
{
    uint64_t bytes;
    unsigned char *a = spare_take(w, &bytes);
    arena_discard(w, a, bytes);
}

/* The worker's context for the writer's codec, created on first use. */
static int worker_cctx(mts_writer *w, eng_worker *wk, void **ctx)
{
    eng_slot *s = eng_worker_slot(wk, (unsigned)w->codec->id);
    if (!s->p) {
        FORWARD_IF_ERROR(w->codec->ctx_new(&w->cp, &s->p));
        s->free_fn = w->codec->ctx_free;
    }
    *ctx = s->p;
    return 0;
}

#define SLOT_GATHER 3 /* a worker's buffer for joining pages */
#define SLOT_OUT 4    /* and for compressing into */
#define MAX_PIECES 256u

/* A worker's buffer: per-worker memory that outlives jobs, grown to the
 * largest segment (at most job_size) or its bound. NULL if it cannot grow. */
static unsigned char *worker_buffer(eng_worker *wk, unsigned k, uint64_t len)
{
    eng_slot *slot = eng_worker_slot(wk, k);
    size_t *cap = slot->p;
    if (!cap || *cap < len) {
        size_t want = MTS_MAX((size_t)len, (size_t)64 << 10);
        size_t *g = mts_realloc(slot->p, sizeof(size_t) * 2 + want);
        if (!g) return NULL;
        g[0] = want;
        slot->p = g;
        slot->free_fn = mts__alloc.free_fn;
        cap = g;
    }
    return (unsigned char *)(cap + 2);
}

/* The bytes a worker buffer holds (0 before its first use). */
static size_t worker_buffer_cap(eng_worker *wk, unsigned k)
{
    const size_t *cap = eng_worker_slot(wk, k)->p;
    return cap ? *cap : 0;
}

/* Compresses segment s into dst: bytes in place; an arena chain's pages in
 * place when the codec takes pieces at the page size, else joined first, at
 * *gathered in the worker's gather buffer: the joined bytes of a job's
 * segments stay there, one after another, until the checks deferred on them
 * are computed (flushed here when the buffer is full), so that small
 * segments' blocks are checked four at a time as the others are. */
static int seg_compress(mts_writer *w, const inbuf *in, const seg *s, eng_worker *wk, void *cctx, void *dst,
                        size_t cap, size_t *clen, codec_defer *defer, size_t *gathered)
{
    const codec_vtable *cv = w->codec;
    if (!in->next || s->len <= in->page) {
        const unsigned char *src = in->next ? in->base + s->off * in->page : in->base + s->off;
        return cv->compress(&w->cp, cctx, src, s->len, dst, cap, clen);
    }
    uint64_t npieces = (s->len + in->page - 1) / in->page, page = s->off;
    size_t align = cv->compress_v ? cv->piece_align(&w->cp) : 0;
    if (align && in->page % align == 0 && npieces <= MAX_PIECES) {
        codec_piece v[MAX_PIECES];
        for (uint64_t k = 0; k < npieces; k++) {
            v[k] = (codec_piece){in->base + page * in->page, (size_t)MTS_MIN(in->page, s->len - k * in->page)};
            if (k + 1 < npieces) page = in->next[page];
        }
        return cv->compress_v(&w->cp, cctx, v, (unsigned)npieces, dst, cap, clen);
    }
    if (*gathered + s->len > worker_buffer_cap(wk, SLOT_GATHER)) { /* the buffer may move: nothing may point into it */
        codec_defer_flush(defer);
        *gathered = 0;
    }
    unsigned char *joined = worker_buffer(wk, SLOT_GATHER, *gathered + s->len);
    if (!joined) return MTS_E_NOMEM;
    joined += *gathered;
    *gathered += s->len;
    for (uint64_t done = 0; done < s->len; done += in->page) {
        memcpy(joined + done, in->base + page * in->page, (size_t)MTS_MIN(in->page, s->len - done));
        if (done + in->page < s->len) page = in->next[page];
    }
    return cv->compress(&w->cp, cctx, joined, s->len, dst, cap, clen);
}

/* Every segment is compressed into the worker's buffer, one after another,
 * with the codec's block checks deferred, so that the blocks of many small
 * streams are checked several at a time; then they are copied into chunks of
 * their exact size (chunks allocated at the bound and shrunk leave the heap
 * in pieces that are trimmed and faulted in again writer after writer). */
static void job_run(void *ctx, eng_job *ej, eng_worker *wk)
{
    mts_writer *w = ctx;
    job *j = (job *)ej;
    const codec_vtable *cv = w->codec;
    uint64_t t0 = mts_now_ns();
    void *cctx = NULL;
    int rc = writer_failed(w) ? 0 : worker_cctx(w, wk, &cctx);
    if (rc < 0) writer_fail(w, rc, "create a %s codec context", mts_codec_name(w->o.codec));
    size_t total = 0;
    for (uint32_t i = 0; i < j->nsegs; i++) total += cv->bound(&w->cp, j->segs[i].len);
    size_t hdr_at = (total + 7) & ~(size_t)7; /* the chunks' headers are made after the bytes */
    unsigned char *out = writer_failed(w) ? NULL : worker_buffer(wk, SLOT_OUT, hdr_at + j->nsegs * sizeof(chunk));
    if (!out && !writer_failed(w))
        writer_fail(w, MTS_E_NOMEM, "allocate %zu bytes to compress a job of %u partitions", total, j->nsegs);
    codec_defer defer = {0};
    size_t gathered = 0; /* bytes of the gather buffer whose checks may still be deferred */
    if (out && cv->defer) cv->defer(cctx, &defer);
    size_t at[MAX_SEGS_PER_JOB], len[MAX_SEGS_PER_JOB], o = 0;
    for (uint32_t i = 0; i < j->nsegs; i++) {
        seg *s = &j->segs[i];
        size_t bound = cv->bound(&w->cp, s->len);
        len[i] = SIZE_MAX; /* not compressed */
        if (writer_failed(w)) continue;
        rc = seg_compress(w, j->in, s, wk, cctx, out + o, bound, &len[i], &defer, &gathered);
        if (rc < 0) {
            len[i] = SIZE_MAX;
            defer.n = 0; /* the writer has failed: no chunk is made of what they point at */
            writer_fail(w, rc, "compress partition %u (%llu bytes, %s)", s->partition, (unsigned long long)s->len,
                        mts_codec_name(w->o.codec));
            continue;
        }
        at[i] = o;
        o += len[i];
    }
    if (defer.n) codec_defer_flush(&defer);
    if (out && cv->defer) cv->defer(cctx, NULL);
    /* The job's chunks share one allocation of their exact size (a malloc
     * per chunk, freed on another thread, cost as much at 10,000 partitions
     * as compressing the small ones: BENCHMARKS.md). Either every segment
     * was compressed, or the writer failed and none is kept. */
    uint64_t head = sizeof(chunk_block) + j->nsegs * sizeof(chunk);
    uint64_t reserved = head + total, size = head + o; /* reserved: the job's charge less its struct */
    chunk_block *b = writer_failed(w) ? NULL : mts_malloc((size_t)size);
    if (!b && !writer_failed(w))
        writer_fail(w, MTS_E_NOMEM, "allocate %llu bytes for the output of %u partitions", (unsigned long long)size,
                    j->nsegs);
    uint64_t unused = b ? reserved - size : reserved; /* given back once, below */
    if (b) {
        /* Made where the bytes are, in cache, then copied in two runs: a
         * header stored at a time into the fresh block missed the cache
         * each time. */
        *b = (chunk_block){size, j->nsegs};
        chunk *hdr = (chunk *)(void *)(out + hdr_at), *c = (chunk *)(void *)(b + 1);
        unsigned char *data = (unsigned char *)(c + j->nsegs);
        for (uint32_t i = 0; i < j->nsegs; i++) {
            const unsigned char *bytes = out + at[i];
            uint32_t tail = len[i] >= cv->end_len ? cv->end_len : 0, body = 0, sum = 0;
            if (w->o.checksum != MTS_CHECKSUM_NONE) { /* the body's, then on over the end */
                body = checksum_update(w->o.checksum, checksum_init(w->o.checksum), bytes, len[i] - tail);
                sum = checksum_update(w->o.checksum, body, bytes + len[i] - tail, tail);
            }
            hdr[i] = (chunk){.data = data + at[i], .block = b, .len = len[i], .charge = sizeof(chunk) + len[i],
                             .partition = j->segs[i].partition, .checksum = sum, .tail = tail, .body_sum = body};
            j->segs[i].out = c + i;
        }
        memcpy(c, hdr, j->nsegs * sizeof(chunk));
        memcpy(data, out, o);
    }
    eng_release(&w->client, unused);
    inbuf_unref(w, j->in);
    __atomic_add_fetch(&w->st.compress_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->st.jobs, 1, __ATOMIC_RELAXED);
}

static void job_drain(void *ctx, eng_job *ej)
{
    mts_writer *w = ctx;
    job *j = (job *)ej;
    chunk *out[MAX_SEGS_PER_JOB];
    uint32_t n = 0;
    for (uint32_t i = 0; i < j->nsegs; i++)
        if (j->segs[i].out) out[n++] = j->segs[i].out;
    if (n && writer_failed(w)) {
        for (uint32_t i = 0; i < n; i++) chunk_free_list(&w->env, out[i]);
    } else if (n) {
        j->dest->ops->put(j->dest, out, n, j->seq); /* a failure is reported through env */
    }
    eng_release(&w->client, j->struct_charge);
    mts_free(j);
}

/* Another client waits for budget and nothing is in flight: spill. */
static void writer_reclaim(void *ctx)
{
    mts_writer *w = ctx;
    arena_free_spare(w);
    if (w->held_dest == &w->runs.d) runs_spill(&w->runs); /* only the run store holds chunks */
}

const eng_client_ops writer_client_ops = {job_run, job_drain, writer_reclaim, 1};

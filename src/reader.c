/* The reduce side: reading one partition range of many map outputs, on an
 * engine.
 *
 * Each map's data file is mapped read-only (layout.c). A read of partitions
 * [start, end) has one cursor per map: its segment, decoded as one
 * concatenated stream (as Spark's batch fetch does), piece by piece. A piece
 * is one engine job ("unit"): it decodes from where the cursor stopped into a
 * buffer of piece_size bytes (or one lz4 block, if larger), stopping at a
 * block boundary (lz4) or a full buffer (zstd, whose stream state the cursor
 * keeps between units). One unit per cursor is in flight at a time; cursors
 * of later maps decode ahead of the one being handed out (the frontier) while
 * the budget allows, one piece each (the frontier keeps two). Where the
 * checksum file is read first (MTS_VERIFY_ALWAYS; MTS_VERIFY_AUTO with a
 * codec without checks of its own), the first unit of a cursor verifies its
 * partitions' checksums before anything is decoded; an lz4 block that fails
 * its check has its partition's checksum looked up for the message.
 * With codec none, pieces point into the mapped file (zero-copy).
 *
 * Budget: a unit's piece is paid before the unit is submitted. When the
 * caller moves past it, the piece is kept as a spare (two at most) that pays
 * for a later unit: a reader next to writers that keep the budget full (a
 * Spark task reading one shuffle and writing another) would otherwise queue
 * for every piece behind their waiters. Units never wait for budget; only
 * the caller's thread does, in next(), and only while the reader holds
 * nothing but what it is owed: decoding ahead takes budget only if it is
 * free right now, and if the frontier cannot get any, the pieces decoded
 * ahead (never handed out) are dropped and their cursors start again later.
 * Those pieces are also the reader's reclaimable bytes: a waiter of any
 * client (this caller's own writer too) that finds nothing in flight drops
 * them. So what a reader holds that only its caller can give back is
 * bounded: the piece handed out, two spares, the frontier's two pieces.
 *
 * Waits: the reader's units go ahead of other clients' queued jobs, and a
 * caller that needs a piece whose unit no worker has started runs it itself;
 * if a worker has it, the caller runs a later cursor's queued unit before it
 * sleeps (small pieces would otherwise cost a wake-up each).
 *
 * Locks: reader.mu guards cursors, pieces and stats. Order: reader.mu, then
 * engine.mu (pieces are given back and units paid while it is held); it is
 * released around the blocking eng_acquire. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "internal.h"
#include "reader_int.h"

void mts_reader_options_init(mts_reader_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->codec = MTS_CODEC_AUTO;
    o->threads = 2;
    o->max_bytes_in_flight = 64ull << 20;
    o->piece_size = DEFAULT_PIECE;
    o->verify_checksums = MTS_VERIFY_AUTO;
}
/* ---- opening -------------------------------------------------------------------- */

static int validate(const mts_reader_options *o, char *err, size_t len)
{
    if (o->codec != MTS_CODEC_AUTO && !codec_get(o->codec))
        return mts_msg(err, len, MTS_E_ARG, "options: unknown codec %d", (int)o->codec);
    if (!o->engine && (o->threads < 1 || o->threads > MTS_MAX_THREADS))
        return mts_msg(err, len, MTS_E_ARG, "options: threads %u is not in 1..%u", o->threads, MTS_MAX_THREADS);
    if (o->verify_checksums < MTS_VERIFY_NEVER || o->verify_checksums > MTS_VERIFY_AUTO)
        return mts_msg(err, len, MTS_E_ARG, "options: verify_checksums %d is not one of MTS_VERIFY_NEVER, "
                       "MTS_VERIFY_ALWAYS, MTS_VERIFY_AUTO", o->verify_checksums);
    if (o->piece_size < MIN_PIECE)
        return mts_msg(err, len, MTS_E_ARG, "options: piece_size %u is below %u", o->piece_size, MIN_PIECE);
    if (!o->engine && (o->max_bytes_in_flight < MTS_MIN_BYTES_IN_FLIGHT ||
                       o->max_bytes_in_flight < 2 * ((uint64_t)o->piece_size + sizeof(piece))))
        return mts_msg(err, len, MTS_E_ARG, "options: max_bytes_in_flight %llu is below 64 KiB or two pieces",
                       (unsigned long long)o->max_bytes_in_flight);
    if (o->engine && eng_cap(o->engine) < (uint64_t)o->piece_size + sizeof(piece))
        return mts_msg(err, len, MTS_E_ARG, "options: piece_size %u does not fit the engine's budget", o->piece_size);
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        if (o->reserved[i]) return mts_msg(err, len, MTS_E_ARG, "options: reserved[%zu] must be 0", i);
    return 0;
}

int mts_reader_open(const mts_reader_options *opts, const char *const *paths, uint32_t n, mts_reader **out,
                    char *err, size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!err) { err = scratch; errlen = sizeof scratch; }
    if (errlen) err[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    mts_reader_options defaults;
    mts_reader_options_init(&defaults);
    if (!opts) opts = &defaults;
    if (!paths && n) return mts_msg(err, errlen, MTS_E_ARG, "open: NULL paths");
    FORWARD_IF_ERROR(validate(opts, err, errlen));
    mts_reader *r = mts_calloc(1, sizeof *r);
    if (!r) return mts_msg(err, errlen, MTS_E_NOMEM, "open: allocate the reader");
    r->o = *opts;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    int rc = 0;
    r->maps = mts_calloc(MTS_MAX(n, 1u), sizeof(map_output));
    r->cur = mts_calloc(MTS_MAX(n, 1u), sizeof(cursor));
    r->capcur = MTS_MAX(n, 1u);
    if (!r->maps || !r->cur) {
        rc = mts_msg(err, errlen, MTS_E_NOMEM, "open: allocate %u map outputs", n);
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!paths[i]) {
            rc = mts_msg(err, errlen, MTS_E_ARG, "open: NULL path %u", i);
            goto fail;
        }
        r->nmaps = i + 1;
        if ((rc = map_output_open(&r->maps[i], paths[i], r->nparts, 0, err, errlen)) < 0) goto fail;
        r->nparts = r->maps[i].nparts;
    }
    mts_engine *e = opts->engine;
    if (!e && (rc = mts_engine_create(opts->threads, opts->max_bytes_in_flight, &e, err, errlen)) < 0) goto fail;
    rc = eng_client_init(&r->client, e, &reader_client_ops, r);
    if (!opts->engine) mts_engine_free(e); /* the client's reference keeps a private engine */
    if (rc < 0) {
        mts_msg(err, errlen, rc, "open: register on the engine");
        goto fail;
    }
    r->engine = e;
    r->client_up = 1;
    r->max_inflight = 2 * eng_threads(e);
    *out = r;
    return 0;
fail:
    mts_reader_free(r);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int mts_reader_open_dir(const mts_reader_options *opts, const char *dir, int32_t shuffle_id, mts_reader **out,
                        char *err, size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!err) { err = scratch; errlen = sizeof scratch; }
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!dir) return mts_msg(err, errlen, MTS_E_ARG, "open: NULL dir");
    uint64_t *ids = NULL;
    uint32_t n = 0;
    int rc = layout_list_maps(dir, shuffle_id, &ids, &n);
    if (rc < 0) return mts_msg(err, errlen, rc, "open %s: list map outputs", dir);
    if (n == 0) {
        mts_free(ids);
        return mts_msg(err, errlen, -ENOENT, "open %s: no map outputs of shuffle %d", dir, shuffle_id);
    }
    qsort(ids, n, sizeof *ids, cmp_u64);
    char **paths = mts_calloc(n, sizeof *paths);
    if (!paths) rc = MTS_E_NOMEM;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        char name[128];
        size_t len = strlen(dir) + sizeof name + 2;
        if (!(paths[i] = mts_malloc(len))) rc = MTS_E_NOMEM;
        else if ((rc = mts_output_name(name, sizeof name, shuffle_id, (int64_t)ids[i], LAYOUT_DATA, 0)) >= 0)
            rc = snprintf(paths[i], len, "%s/%s", dir, name) < 0 ? MTS_E_ARG : 0;
    }
    if (rc == 0) rc = mts_reader_open(opts, (const char *const *)paths, n, out, err, errlen);
    else mts_msg(err, errlen, rc, "open %s", dir);
    for (uint32_t i = 0; paths && i < n; i++) mts_free(paths[i]);
    mts_free(paths);
    mts_free(ids);
    return rc;
}

int mts_reader_open_blocks(const mts_reader_options *opts, mts_reader **out, char *err, size_t errlen)
{
    if (!out) return MTS_E_ARG;
    int rc = mts_reader_open(opts, NULL, 0, out, err, errlen);
    if (rc == 0) (*out)->blocks = 1;
    return rc;
}

uint32_t mts_reader_num_maps(const mts_reader *r) { return r ? r->nmaps : 0; }
uint32_t mts_reader_num_partitions(const mts_reader *r) { return r ? r->nparts : 0; }

const char *mts_reader_map_path(const mts_reader *r, uint32_t map)
{
    return r && map < r->nmaps ? r->maps[map].data_path : NULL;
}

uint64_t mts_reader_segment_length(const mts_reader *r, uint32_t map, uint32_t start, uint32_t end)
{
    if (!r || map >= r->nmaps || start > end || end > r->nparts) return 0;
    return r->maps[map].off[end] - r->maps[map].off[start];
}

/* ---- reading --------------------------------------------------------------------- */

/* Ends the read in progress: units still in flight see the new generation
 * and give their work back themselves. */
static void end_read_locked(mts_reader *r)
{
    __atomic_store_n(&r->gen, r->gen + 1, __ATOMIC_SEQ_CST);
    /* Units already reading finish before the caller hears the read ended:
     * it may then free the blocks it handed over. */
    while (__atomic_load_n(&r->reading, __ATOMIC_SEQ_CST)) pthread_cond_wait(&r->cv, &r->mu);
    r->active = 0;
    r->inflight = 0;
    if (r->current) piece_free(r, r->current);
    r->current = NULL;
    for (uint32_t j = 0; j < r->ncur; j++) {
        cursor *c = &r->cur[j];
        if (c->state == CUR_BUSY) c->dstate = NULL; /* the unit's; it frees it */
        cursor_reset(r, c);
        c->state = CUR_DONE;
    }
    r->ncur = r->nranges = r->frontier = 0;
    ahead_sync(r); /* nothing is ahead now */
}

/* Appends range [start, end) to the read, one cursor per map; begins a read
 * if none is active. */
static int queue_locked(mts_reader *r, uint32_t start, uint32_t end)
{
    if (!r->active) {
        end_read_locked(r);
        r->err = 0;
        r->msg[0] = 0;
        r->active = 1;
    }
    if (r->nranges == UINT32_MAX || r->ncur > UINT32_MAX - r->nmaps)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_OVERFLOW, "queue: too many ranges in one read");
    if (r->ncur + r->nmaps > r->capcur) {
        uint32_t cap = MTS_MAX(r->ncur + r->nmaps, r->capcur * 2);
        cursor *grown = mts_realloc(r->cur, (size_t)cap * sizeof *grown); /* units name cursors by index */
        if (!grown)
            return mts_msg(r->msg, sizeof r->msg, MTS_E_NOMEM, "queue: allocate cursors for %u ranges", r->nranges + 1);
        r->cur = grown;
        r->capcur = cap;
    }
    for (uint32_t j = 0; j < r->nmaps; j++) {
        const map_output *m = &r->maps[j];
        uint64_t a = m->off[start], b = m->off[end];
        cursor *c = &r->cur[r->ncur++];
        *c = (cursor){.map = j, .range = r->nranges, .start = start, .end = end, .base = m->base, .a = a, .b = b,
                      .state = a == b ? CUR_DONE : CUR_IDLE, .codec = r->o.codec, .pos = a};
        if (a != b && c->codec == MTS_CODEC_AUTO) c->codec = layout_sniff(m->base + a, b - a);
    }
    r->nranges++;
    return 0;
}

static int check_range(mts_reader *r, const char *op, uint32_t start, uint32_t end)
{
    if (r->blocks)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_ARG, "%s: a block reader reads the blocks it is given "
                       "(mts_reader_add_block), not partitions", op);
    if (start >= end || end > r->nparts)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_RANGE, "%s: partitions [%u, %u) are not a range within 0..%u",
                       op, start, end, r->nparts);
    return 0;
}

int mts_reader_start(mts_reader *r, uint32_t start, uint32_t end)
{
    if (!r) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_range(r, "start", start, end));
    pthread_mutex_lock(&r->mu);
    r->active = 0; /* a fresh read */
    int rc = queue_locked(r, start, end);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int mts_reader_queue(mts_reader *r, uint32_t start, uint32_t end)
{
    if (!r) return MTS_E_ARG;
    FORWARD_IF_ERROR(check_range(r, "queue", start, end));
    pthread_mutex_lock(&r->mu);
    int rc = queue_locked(r, start, end);
    if (rc == 0) (void)schedule(r, 0); /* decoding may start now; a failure shows in next() */
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int mts_reader_add_block(mts_reader *r, const void *data, size_t len, uint32_t tag)
{
    if (!r) return MTS_E_ARG;
    if (!r->blocks)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_ARG, "add_block: the reader reads map outputs, not blocks");
    if (!data && len)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_ARG, "add_block: block %u: NULL data of %zu bytes", tag, len);
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (!r->active) {
        end_read_locked(r);
        r->err = 0;
        r->msg[0] = 0;
        r->active = 1;
    }
    if (r->frontier >= 64 && r->inflight == 0) { /* forget the blocks handed out: units name cursors by index */
        for (uint32_t j = 0; j < r->frontier; j++) cursor_reset(r, &r->cur[j]); /* a done zstd stream's state */
        memmove(r->cur, r->cur + r->frontier, (size_t)(r->ncur - r->frontier) * sizeof *r->cur);
        r->ncur -= r->frontier;
        r->frontier = 0;
    }
    if (r->ncur == r->capcur) {
        uint32_t cap = r->capcur >= UINT32_MAX / 2 ? UINT32_MAX : 2 * r->capcur;
        cursor *grown = cap > r->capcur ? mts_realloc(r->cur, (size_t)cap * sizeof *grown) : NULL;
        if (!grown) {
            rc = mts_msg(r->msg, sizeof r->msg, MTS_E_NOMEM, "add_block: block %u: allocate %u cursors", tag, cap);
            pthread_mutex_unlock(&r->mu);
            return rc;
        }
        r->cur = grown;
        r->capcur = cap;
    }
    cursor *c = &r->cur[r->ncur++];
    *c = (cursor){.range = tag, .base = data, .a = 0, .b = len, .state = len ? CUR_IDLE : CUR_DONE,
                  .codec = r->o.codec, .pos = 0};
    if (len && c->codec == MTS_CODEC_AUTO) c->codec = layout_sniff(data, len);
    r->nranges++;
    (void)schedule(r, 0); /* decoding may start now; a failure shows in next() */
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int mts_reader_next(mts_reader *r, mts_read_piece *out)
{
    if (!r || !out) return MTS_E_ARG;
    pthread_mutex_lock(&r->mu);
    if (r->current) {
        piece_recycle(r, r->current);
        r->current = NULL;
    }
    int rc = 0;
    uint64_t t0 = 0;
    const eng_job *tried = NULL; /* the unit last offered to eng_run_queued */
    int none_queued = 0;         /* no unit of this reader waited for a worker, at the last look */
    while (r->active) {
        if (r->frontier == r->ncur) {
            r->active = 0;
            break;
        }
        cursor *c = &r->cur[r->frontier];
        if (c->head) {
            piece *p = c->head;
            c->head = p->next;
            c->queued--;
            if (!c->head) c->tail = NULL;
            r->current = p;
            *out = (mts_read_piece){c->map, p->data, p->len, c->range};
            r->st.bytes_decoded += p->len;
            rc = 1;
            break;
        }
        if (c->state == CUR_FAILED) {
            rc = r->err = c->err;
            snprintf(r->msg, sizeof r->msg, "%s", c->msg);
            end_read_locked(r);
            break;
        }
        if (c->state == CUR_DONE) {
            r->st.bytes_stored += c->b - c->a;
            r->frontier++;
            if (r->frontier < r->ncur) ahead_leave(r, &r->cur[r->frontier]);
            continue;
        }
        int did = schedule(r, 1);
        if (did < 0) {
            rc = r->err = did;
            end_read_locked(r);
            break;
        }
        if (did) continue;
        if (!t0) t0 = mts_now_ns();
        if (c->state == CUR_BUSY && c->job && c->job != tried) {
            /* Its unit waits behind other jobs: decoding it here costs no more
             * than waiting for a worker would. The job may be run and freed
             * meanwhile, but its address is only compared among this reader's
             * queued units, and only this caller submits those. */
            tried = c->job;
            pthread_mutex_unlock(&r->mu);
            int ran = eng_run_queued(&r->client, tried);
            pthread_mutex_lock(&r->mu);
            r->st.pieces_here += (uint64_t)ran;
            continue; /* run here or not, a worker may have finished it meanwhile: look again */
        }
        if (!none_queued) {
            /* Its unit is on a worker. Rather than sleep until it is done
             * (a hand-off per piece where pieces are small), decode a later
             * cursor's piece that no worker has started yet. */
            pthread_mutex_unlock(&r->mu);
            int ran = eng_run_queued(&r->client, NULL);
            pthread_mutex_lock(&r->mu);
            r->st.pieces_here += (uint64_t)ran;
            r->st.pieces_ahead_here += (uint64_t)ran;
            none_queued = !ran;
            continue; /* look again before any wait: the unit may have finished meanwhile */
        }
        pthread_cond_wait(&r->cv, &r->mu);
        none_queued = 0;
    }
    if (!r->active && rc == 0 && r->err) rc = r->err;
    if (t0) r->st.wait_ns += mts_now_ns() - t0;
    if (rc == 1 && schedule(r, 0) < 0) { /* keep the workers busy while the caller works */
        /* reported by the next call, from the failed cursor or here */
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

const char *mts_reader_error(const mts_reader *r) { return r ? r->msg : "NULL reader"; }

int mts_reader_get_stats(const mts_reader *cr, mts_reader_stats *st)
{
    if (!cr || !st) return MTS_E_ARG;
    mts_reader *r = (mts_reader *)(uintptr_t)cr;
    pthread_mutex_lock(&r->mu);
    *st = r->st;
    pthread_mutex_unlock(&r->mu);
    st->decode_ns = __atomic_load_n(&r->decode_ns, __ATOMIC_RELAXED);
    if (r->client_up) {
        eng_client_stats cs;
        eng_client_stats_get(&r->client, &cs);
        st->peak_bytes_held = cs.peak;
    }
    return 0;
}

void mts_reader_free(mts_reader *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    end_read_locked(r);
    spares_free(r);
    pthread_mutex_unlock(&r->mu);
    if (r->client_up) eng_client_destroy(&r->client); /* waits for the units in flight */
    dstates_free(r);
    for (uint32_t j = 0; j < r->nmaps; j++) map_output_close(&r->maps[j]);
    mts_free(r->maps);
    mts_free(r->cur);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    mts_free(r);
}

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
 * the budget allows. The first unit of a cursor verifies its partitions'
 * checksums before anything is decoded. With codec none, pieces point into
 * the mapped file (zero-copy).
 *
 * Budget: a unit's piece is paid before the unit is submitted and given back
 * when the caller moves past it. Units never wait for budget; only the
 * caller's thread does, in next(), and only while the reader holds nothing
 * but what it is owed: decoding ahead takes budget only if it is free right
 * now, and if the frontier cannot get any, the pieces decoded ahead (never
 * handed out) are dropped and their cursors start again later.
 *
 * Locks: reader.mu guards cursors, pieces and stats; it is a leaf (released
 * around eng_acquire, whose engine.mu is never held with it). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "codec.h"
#include "engine.h"
#include "internal.h"
#include "layout.h"

#define DEFAULT_PIECE (1u << 20)
#define MIN_PIECE 4096u

typedef struct piece {
    struct piece *next;
    const unsigned char *data; /* buf, or the mapped file (codec none) */
    size_t len;
    uint64_t charge;
    unsigned char buf[];
} piece;

typedef enum { CUR_IDLE, CUR_BUSY, CUR_DONE, CUR_FAILED } cur_state;

/* One map's segment of the current read. */
typedef struct cursor {
    cur_state state;
    mts_codec codec;
    uint64_t pos;       /* next stored byte (offset in the data file); unit's while BUSY */
    void *dstate;       /* the codec's step state; unit's while BUSY */
    int verified;       /* the segment's checksums were checked */
    piece *head, *tail; /* decoded, not handed out */
    int err;
    char msg[MTS_MSG_CAP];
} cursor;

typedef struct unit {
    eng_job base;
    uint32_t map;
    uint64_t gen;
    mts_codec codec;
    uint64_t pos;
    void *dstate;
    int verified;
    uint64_t charge;
} unit;

struct mts_reader {
    mts_reader_options o;
    map_output *maps;
    uint32_t nmaps, nparts;
    mts_engine *engine;
    eng_client client;
    int client_up;
    uint32_t max_inflight; /* units in flight at once */

    pthread_mutex_t mu;
    pthread_cond_t cv;     /* a unit finished */
    /* All below guarded by mu. */
    uint64_t gen;          /* bumped by every start: units of older reads drop their work */
    int active;
    uint32_t start, end, frontier, inflight;
    cursor *cur;
    piece *current;        /* handed to the caller; given back at the next call */
    int err;
    char msg[MTS_MSG_CAP];
    mts_reader_stats st;   /* but decode_ns */
    uint64_t decode_ns;    /* summed over units; atomic */
};

void mts_reader_options_init(mts_reader_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->codec = MTS_CODEC_AUTO;
    o->threads = 2;
    o->max_bytes_in_flight = 64ull << 20;
    o->piece_size = DEFAULT_PIECE;
    o->verify_checksums = 1;
}

/* ---- pieces --------------------------------------------------------------------- */

static void piece_free(mts_reader *r, piece *p)
{
    eng_release(&r->client, p->charge);
    mts_free(p);
}

static void cursor_reset(mts_reader *r, cursor *c)
{
    for (piece *p = c->head, *next; p; p = next) {
        next = p->next;
        piece_free(r, p);
    }
    c->head = c->tail = NULL;
    if (c->dstate) codec_get(c->codec)->step_free(c->dstate);
    c->dstate = NULL;
    c->verified = 0;
}

/* ---- units (engine jobs) ---------------------------------------------------------- */

/* Checks the stored checksums of partitions [start, end) of map j. */
static int verify_segment(mts_reader *r, uint32_t j, char *msg, size_t len)
{
    map_output *m = &r->maps[j];
    if (!r->o.verify_checksums || !m->sums) return 0;
    for (uint32_t p = r->start; p < r->end; p++) {
        uint64_t a = m->off[p], n = m->off[p + 1] - a;
        uint32_t got = checksum_update(m->algo, checksum_init(m->algo), m->base + a, n);
        if (got != (uint32_t)m->sums[p])
            return mts_msg(msg, len, MTS_E_CORRUPT, "%s: partition %u at offset %llu (%llu bytes): %s checksum %u, stored %llu",
                           m->data_path, p, (unsigned long long)a, (unsigned long long)n,
                           mts_checksum_name(m->algo), got, (unsigned long long)m->sums[p]);
    }
    return 0;
}

static uint32_t partition_at(const map_output *m, uint32_t start, uint32_t end, uint64_t off)
{
    uint32_t p = start;
    while (p + 1 < end && m->off[p + 1] <= off) p++;
    return p;
}

static void unit_run(void *ctx, eng_job *ej, eng_worker *wk)
{
    (void)wk;
    mts_reader *r = ctx;
    unit *u = (unit *)ej;
    map_output *m = &r->maps[u->map];
    pthread_mutex_lock(&r->mu);
    uint32_t start = r->start, end = r->end;
    int live = r->gen == u->gen;
    pthread_mutex_unlock(&r->mu);
    char msg[MTS_MSG_CAP] = "";
    uint64_t b = m->off[end], t0 = mts_now_ns();
    int rc = 0, done = 0, published = 0;
    piece *p = NULL;
    if (live && !u->verified) {
        rc = verify_segment(r, u->map, msg, sizeof msg);
        u->verified = 1;
    }
    if (live && rc == 0) {
        p = mts_malloc(sizeof *p + (u->codec == MTS_CODEC_NONE ? 0 : u->charge - sizeof *p));
        if (!p) rc = mts_msg(msg, sizeof msg, MTS_E_NOMEM, "%s: allocate a %llu-byte piece", m->data_path,
                             (unsigned long long)u->charge);
    }
    if (p && u->codec == MTS_CODEC_NONE) { /* zero-copy: the rest of the segment */
        *p = (piece){NULL, m->base + u->pos, (size_t)(b - u->pos), u->charge};
        u->pos = b;
        done = 1;
    } else if (p) {
        *p = (piece){NULL, p->buf, 0, u->charge};
        uint64_t bad = 0;
        size_t out = 0;
        rc = codec_get(u->codec)->step(&u->dstate, m->base, b, &u->pos, p->buf, u->charge - sizeof *p, &out, &bad);
        p->len = out;
        done = rc == 1;
        if (rc == MTS_E_CORRUPT) {
            uint32_t at = partition_at(m, start, end, bad);
            mts_msg(msg, sizeof msg, rc, "%s: partition %u: corrupt %s stream at offset %llu (partition starts at %llu)",
                    m->data_path, at, mts_codec_name(u->codec), (unsigned long long)bad,
                    (unsigned long long)m->off[at]);
        } else if (rc < 0) {
            mts_msg(msg, sizeof msg, rc, "%s: partitions %u..%u", m->data_path, start, end - 1);
        }
        rc = rc < 0 ? rc : 0;
    }
    __atomic_add_fetch(&r->decode_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);

    pthread_mutex_lock(&r->mu);
    if (r->gen == u->gen) {
        cursor *c = &r->cur[u->map];
        if (p && p->len && rc == 0) {
            if (c->tail) c->tail->next = p;
            else c->head = p;
            c->tail = p;
            published = 1;
        }
        c->pos = u->pos;
        c->dstate = u->dstate;
        c->verified = u->verified;
        u->dstate = NULL;
        c->state = rc < 0 ? CUR_FAILED : done ? CUR_DONE : CUR_IDLE;
        if (rc < 0) {
            c->err = rc;
            snprintf(c->msg, sizeof c->msg, "%s", msg);
        }
        r->inflight--;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    if (published) u->charge = 0; /* the piece carries it now */
    else mts_free(p);               /* its charge goes back in unit_drain */
    if (u->dstate) codec_get(u->codec)->step_free(u->dstate);
    u->dstate = NULL;
}

static void unit_drain(void *ctx, eng_job *ej)
{
    mts_reader *r = ctx;
    unit *u = (unit *)ej;
    eng_release(&r->client, u->charge);
    mts_free(u);
}

static const eng_client_ops reader_client_ops = {unit_run, unit_drain, NULL};

/* ---- scheduling (the caller's thread, mu held) ------------------------------------ */

/* Budget for map j's next unit. */
static uint64_t unit_charge(const mts_reader *r, uint32_t j)
{
    const cursor *c = &r->cur[j];
    if (c->codec == MTS_CODEC_NONE) return sizeof(piece);
    const map_output *m = &r->maps[j];
    size_t need = codec_get(c->codec)->step_need(m->base, m->off[r->end], c->pos);
    return sizeof(piece) + MTS_MAX((uint64_t)r->o.piece_size, (uint64_t)need);
}

static int submit_unit(mts_reader *r, uint32_t j, uint64_t charge)
{
    cursor *c = &r->cur[j];
    unit *u = mts_malloc(sizeof *u);
    if (!u) {
        eng_release(&r->client, charge);
        return MTS_E_NOMEM;
    }
    *u = (unit){.map = j, .gen = r->gen, .codec = c->codec, .pos = c->pos, .dstate = c->dstate,
                .verified = c->verified, .charge = charge};
    c->dstate = NULL;
    c->state = CUR_BUSY;
    r->inflight++;
    eng_submit(&r->client, &u->base);
    return 0;
}

/* Pieces decoded ahead of the frontier give their budget back; those cursors
 * start again from their segment's beginning when their turn comes (nothing
 * of theirs was handed out yet). */
static void drop_lookahead(mts_reader *r)
{
    for (uint32_t j = r->frontier + 1; j < r->nmaps; j++) {
        cursor *c = &r->cur[j];
        uint64_t a = r->maps[j].off[r->start], b = r->maps[j].off[r->end];
        if (c->state == CUR_BUSY || c->state == CUR_FAILED || a == b) continue;
        cursor_reset(r, c);
        c->pos = a;
        c->state = CUR_IDLE;
    }
}

/* Submits what the budget allows; 1 if anything was submitted, < 0 on
 * failure. may_block: the caller holds no piece, so the frontier may wait
 * for budget. */
static int schedule(mts_reader *r, int may_block)
{
    int did = 0;
    for (uint32_t j = r->frontier; j < r->nmaps && r->inflight < r->max_inflight; j++) {
        if (r->cur[j].state != CUR_IDLE) continue;
        uint64_t charge = unit_charge(r, j);
        int rc = eng_try_acquire(&r->client, charge);
        if (rc == 0) {
            FORWARD_IF_ERROR(submit_unit(r, j, charge));
            did = 1;
            continue;
        }
        if (rc < 0)
            return mts_msg(r->msg, sizeof r->msg, rc, "%s: a %llu-byte piece (an lz4 block at offset %llu) exceeds "
                           "the budget of %llu bytes", r->maps[j].data_path, (unsigned long long)charge,
                           (unsigned long long)r->cur[j].pos, (unsigned long long)eng_cap(r->engine));
        if (j != r->frontier || r->inflight || !may_block) break; /* wait for what is in flight */
        drop_lookahead(r);
        uint64_t gen = r->gen;
        pthread_mutex_unlock(&r->mu);
        rc = eng_acquire(&r->client, charge); /* holds nothing the caller must give back */
        pthread_mutex_lock(&r->mu);
        if (rc < 0) return mts_msg(r->msg, sizeof r->msg, rc, "%s: wait for budget", r->maps[j].data_path);
        if (gen != r->gen || r->cur[j].state != CUR_IDLE) {
            eng_release(&r->client, charge);
            return 1;
        }
        FORWARD_IF_ERROR(submit_unit(r, j, charge));
        did = 1;
    }
    return did;
}

/* ---- opening -------------------------------------------------------------------- */

static int validate(const mts_reader_options *o, char *err, size_t len)
{
    if (o->codec != MTS_CODEC_AUTO && !codec_get(o->codec))
        return mts_msg(err, len, MTS_E_ARG, "options: unknown codec %d", (int)o->codec);
    if (!o->engine && (o->threads < 1 || o->threads > MTS_MAX_THREADS))
        return mts_msg(err, len, MTS_E_ARG, "options: threads %u is not in 1..%u", o->threads, MTS_MAX_THREADS);
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
    r->gen++;
    r->active = 0;
    r->inflight = 0;
    if (r->current) piece_free(r, r->current);
    r->current = NULL;
    for (uint32_t j = 0; j < r->nmaps; j++) {
        cursor *c = &r->cur[j];
        if (c->state == CUR_BUSY) c->dstate = NULL; /* the unit's; it frees it */
        cursor_reset(r, c);
        c->state = CUR_DONE;
    }
}

int mts_reader_start(mts_reader *r, uint32_t start, uint32_t end)
{
    if (!r) return MTS_E_ARG;
    if (start >= end || end > r->nparts)
        return mts_msg(r->msg, sizeof r->msg, MTS_E_RANGE, "start: partitions [%u, %u) are not a range within 0..%u",
                       start, end, r->nparts);
    pthread_mutex_lock(&r->mu);
    end_read_locked(r);
    r->start = start;
    r->end = end;
    r->frontier = 0;
    r->err = 0;
    r->msg[0] = 0;
    r->active = 1;
    for (uint32_t j = 0; j < r->nmaps; j++) {
        cursor *c = &r->cur[j];
        const map_output *m = &r->maps[j];
        uint64_t a = m->off[start], b = m->off[end];
        *c = (cursor){a == b ? CUR_DONE : CUR_IDLE, r->o.codec, a, NULL, 0, NULL, NULL, 0, ""};
        if (a != b && c->codec == MTS_CODEC_AUTO) c->codec = layout_sniff(m->base + a, b - a);
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int mts_reader_next(mts_reader *r, mts_read_piece *out)
{
    if (!r || !out) return MTS_E_ARG;
    pthread_mutex_lock(&r->mu);
    if (r->current) {
        piece_free(r, r->current);
        r->current = NULL;
    }
    int rc = 0;
    uint64_t t0 = 0;
    while (r->active) {
        if (r->frontier == r->nmaps) {
            r->active = 0;
            break;
        }
        cursor *c = &r->cur[r->frontier];
        if (c->head) {
            piece *p = c->head;
            c->head = p->next;
            if (!c->head) c->tail = NULL;
            r->current = p;
            *out = (mts_read_piece){r->frontier, p->data, p->len};
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
            const map_output *m = &r->maps[r->frontier];
            r->st.bytes_stored += m->off[r->end] - m->off[r->start];
            r->frontier++;
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
        pthread_cond_wait(&r->cv, &r->mu);
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
    pthread_mutex_unlock(&r->mu);
    if (r->client_up) eng_client_destroy(&r->client); /* waits for the units in flight */
    for (uint32_t j = 0; j < r->nmaps; j++) map_output_close(&r->maps[j]);
    mts_free(r->maps);
    mts_free(r->cur);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    mts_free(r);
}

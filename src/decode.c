/* Decoding on the engine: a unit decodes one piece of one map's segment
 * from where its cursor stopped; the caller's thread schedules units while
 * the budget allows (reader.c has the design). */
#include <stdio.h>
#include <string.h>

#include "checksum.h"
#include "codec.h"
#include "internal.h"
#include "reader_int.h"

/* ---- pieces --------------------------------------------------------------------- */

#define CACHED_PIECE (64u << 10) /* pieces this large are kept by the engine for reuse */

void piece_free(mts_reader *r, piece *p)
{
    /* A decoded piece's buffer (its charge is its size) may serve the next. */
    if (p->charge >= CACHED_PIECE && eng_cache_give(&r->client, p, p->charge)) return;
    eng_release(&r->client, p->charge);
    mts_free(p);
}

/* A reader keeps up to this many spare pieces (a unit's worth each), with
 * their budget: the frontier's next unit is paid from one, where it would
 * otherwise queue for budget behind writers that keep it full. Two keep the
 * frontier's pipeline going (one piece decoding while the caller reads
 * another); so few that, like the piece the caller holds, they need not be
 * reclaimable (every other holding of a reader's comes back without it). */
#define SPARE_MAX 2u

void piece_recycle(mts_reader *r, piece *p)
{
    if (p->charge >= CACHED_PIECE && r->nspare < SPARE_MAX) {
        p->next = r->spare;
        r->spare = p;
        r->nspare++;
        return;
    }
    piece_free(r, p);
}

void spares_free(mts_reader *r)
{
    while (r->spare) {
        piece *p = r->spare;
        r->spare = p->next;
        r->nspare--;
        piece_free(r, p);
    }
}

/* A finished segment's decoder state: pooled for a later segment's start if
 * its codec can reuse it and there is room, else freed. */
static void dstate_put(mts_reader *r, mts_codec codec, void *st)
{
    const codec_vtable *cv = codec_get(codec);
    if (r->ndpool < DSTATE_POOL && cv->step_reuse && cv->step_reuse(st) == 0) {
        r->dpool[r->ndpool].state = st;
        r->dpool[r->ndpool++].codec = codec;
        return;
    }
    cv->step_free(st);
}

/* A pooled state for a segment's start in codec, taken; NULL if none. */
static void *dstate_take(mts_reader *r, mts_codec codec)
{
    for (uint32_t i = r->ndpool; i-- > 0;)
        if (r->dpool[i].codec == codec) {
            void *st = r->dpool[i].state;
            r->dpool[i] = r->dpool[--r->ndpool];
            return st;
        }
    return NULL;
}

void dstates_free(mts_reader *r)
{
    while (r->ndpool) {
        r->ndpool--;
        codec_get(r->dpool[r->ndpool].codec)->step_free(r->dpool[r->ndpool].state);
    }
}

/* A spare piece of at least `charge` bytes, taken; NULL if none. */
static piece *spare_take(mts_reader *r, uint64_t charge)
{
    for (piece **pp = &r->spare; *pp; pp = &(*pp)->next) {
        piece *p = *pp;
        if (p->charge < charge) continue;
        *pp = p->next;
        r->nspare--;
        return p;
    }
    return NULL;
}

/* recycle: the pieces may become spares; else their budget goes back. */
static void cursor_clear(mts_reader *r, cursor *c, int recycle)
{
    for (piece *p = c->head, *next; p; p = next) {
        next = p->next;
        if (recycle) piece_recycle(r, p);
        else piece_free(r, p);
    }
    c->head = c->tail = NULL;
    c->queued = 0;
    if (c->dstate) codec_get(c->codec)->step_free(c->dstate);
    c->dstate = NULL;
    c->verified = 0;
}

void cursor_reset(mts_reader *r, cursor *c) { cursor_clear(r, c, 1); }

/* The charges of the pieces queued on c. */
static uint64_t queued_charge(const cursor *c)
{
    uint64_t sum = 0;
    for (const piece *p = c->head; p; p = p->next) sum += p->charge;
    return sum;
}

void ahead_leave(mts_reader *r, const cursor *c)
{
    uint64_t sum = queued_charge(c);
    if (!sum) return;
    r->ahead -= sum;
    (void)eng_note_reclaimable(&r->client, -(int64_t)sum);
}

void ahead_sync(mts_reader *r)
{
    uint64_t sum = 0;
    for (uint32_t j = r->frontier + 1; j < r->ncur; j++) sum += queued_charge(&r->cur[j]);
    if (sum != r->ahead) (void)eng_note_reclaimable(&r->client, (int64_t)sum - (int64_t)r->ahead);
    r->ahead = sum;
}

const char *cursor_name(const mts_reader *r, const cursor *c, char *buf, size_t len)
{
    if (!r->blocks) return r->maps[c->map].data_path;
    snprintf(buf, len, "block %u (%llu bytes)", c->range, (unsigned long long)c->b);
    return buf;
}

/* ---- units (engine jobs) ---------------------------------------------------------- */

/* Whether a segment's partitions are checked against the checksum file
 * before it is decoded (MTS_VERIFY_AUTO: where the codec's own checks would
 * not catch damage). */
static int verify_first(const mts_reader *r, mts_codec codec)
{
    return r->o.verify_checksums == MTS_VERIFY_ALWAYS ||
           (r->o.verify_checksums == MTS_VERIFY_AUTO && !codec_get(codec)->checks_units);
}

/* Partition p's stored bytes' checksum, as the checksum file has it. */
static uint32_t partition_sum(const map_output *m, uint32_t p)
{
    return checksum_update(m->algo, checksum_init(m->algo), m->base + m->off[p], m->off[p + 1] - m->off[p]);
}

/* Checks the stored checksums of partitions [start, end) of map m. */
static int verify_segment(const map_output *m, uint32_t start, uint32_t end, char *msg, size_t len)
{
    if (!m->sums) return 0;
    for (uint32_t p = start; p < end; p++) {
        uint64_t a = m->off[p], n = m->off[p + 1] - a;
        uint32_t got = partition_sum(m, p);
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

/* After the codec found partition p of map m damaged: whether its stored
 * bytes still match the checksum file, as a clause for the message in buf
 * ("" without one; Spark's reducer makes the same diagnosis of a corrupt
 * block). */
static void diagnose(const mts_reader *r, const map_output *m, uint32_t p, char *buf, size_t len)
{
    buf[0] = 0;
    if (r->o.verify_checksums == MTS_VERIFY_NEVER || !m->sums) return;
    uint32_t got = partition_sum(m, p);
    if (got != (uint32_t)m->sums[p])
        snprintf(buf, len, "; its %s checksum is %u, stored %llu: the stored bytes changed after they were written",
                 mts_checksum_name(m->algo), got, (unsigned long long)m->sums[p]);
    else
        snprintf(buf, len, "; its stored bytes match their %s checksum: damaged before it was taken (by the writer)",
                 mts_checksum_name(m->algo));
}

static void unit_run(void *ctx, eng_job *ej, eng_worker *wk)
{
    (void)wk;
    mts_reader *r = ctx;
    unit *u = (unit *)ej;
    /* Counted as reading before the look at gen, which a read's end bumps
     * before it waits for the count to fall to 0: either the end sees this
     * unit and waits for it, or the unit sees the new gen and reads nothing. */
    __atomic_add_fetch(&r->reading, 1, __ATOMIC_SEQ_CST);
    int live = __atomic_load_n(&r->gen, __ATOMIC_SEQ_CST) == u->gen;
    cursor seg = {.map = u->map, .range = u->range, .start = u->start, .end = u->end, .base = u->data, .a = u->a,
                  .b = u->b}; /* without its pieces and message */
    const map_output *m = r->blocks || !live ? NULL : &r->maps[seg.map];
    char name[64];
    const char *what = live ? cursor_name(r, &seg, name, sizeof name) : "";
    char msg[MTS_MSG_CAP] = "";
    uint64_t t0 = mts_now_ns();
    int rc = 0, done = 0, published = 0;
    piece *p = u->buf; /* a spare piece, or allocated here */
    u->buf = NULL;
    if (m && !u->verified && verify_first(r, u->codec)) rc = verify_segment(m, seg.start, seg.end, msg, sizeof msg);
    u->verified = 1;
    if (live && rc == 0 && !p) {
        size_t size = u->codec == MTS_CODEC_NONE ? sizeof *p : u->charge; /* paid at submit */
        p = size >= CACHED_PIECE ? eng_cache_take_paid(&r->client, size) : NULL;
        if (!p) p = mts_malloc(size);
        if (!p) rc = mts_msg(msg, sizeof msg, MTS_E_NOMEM, "%s: allocate a %llu-byte piece", what,
                             (unsigned long long)u->charge);
    }
    if (!live || rc < 0) {
        /* nothing to decode (a spare piece, if any, is freed below) */
    } else if (p && u->codec == MTS_CODEC_NONE) { /* zero-copy: the rest of the segment */
        *p = (piece){NULL, seg.base + u->pos, (size_t)(seg.b - u->pos), u->charge};
        u->pos = seg.b;
        done = 1;
    } else if (p) {
        *p = (piece){NULL, p->buf, 0, u->charge};
        uint64_t bad = 0;
        size_t out = 0;
        rc = codec_get(u->codec)->step(&u->dstate, seg.base, seg.b, &u->pos, p->buf, u->charge - sizeof *p, &out, &bad);
        p->len = out;
        done = rc == 1;
        if (rc == MTS_E_CORRUPT && m) {
            uint32_t at = partition_at(m, seg.start, seg.end, bad);
            char why[192];
            diagnose(r, m, at, why, sizeof why);
            mts_msg(msg, sizeof msg, rc, "%s: partition %u: corrupt %s stream at offset %llu (partition starts at %llu)%s",
                    what, at, mts_codec_name(u->codec), (unsigned long long)bad, (unsigned long long)m->off[at], why);
        } else if (rc == MTS_E_CORRUPT) {
            mts_msg(msg, sizeof msg, rc, "%s: corrupt %s stream at offset %llu", what, mts_codec_name(u->codec),
                    (unsigned long long)bad);
        } else if (rc < 0 && m) {
            mts_msg(msg, sizeof msg, rc, "%s: partitions %u..%u", what, seg.start, seg.end - 1);
        } else if (rc < 0) {
            mts_msg(msg, sizeof msg, rc, "%s", what);
        }
        rc = rc < 0 ? rc : 0;
    }
    __atomic_add_fetch(&r->decode_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);

    pthread_mutex_lock(&r->mu);
    __atomic_sub_fetch(&r->reading, 1, __ATOMIC_SEQ_CST);
    if (r->gen == u->gen) {
        cursor *c = &r->cur[u->idx];
        if (p && p->len && rc == 0) {
            if (c->tail) c->tail->next = p;
            else c->head = p;
            c->tail = p;
            c->queued++;
            published = 1;
            if (u->idx > r->frontier) {
                r->ahead += p->charge;
                (void)eng_note_reclaimable(&r->client, (int64_t)p->charge);
            }
        }
        c->pos = u->pos;
        if (done && u->dstate) dstate_put(r, u->codec, u->dstate); /* a later segment starts with it */
        else c->dstate = u->dstate;
        c->verified = u->verified;
        u->dstate = NULL;
        c->state = rc < 0 ? CUR_FAILED : done ? CUR_DONE : CUR_IDLE;
        c->job = NULL;
        if (rc < 0) {
            c->err = rc;
            snprintf(c->msg, sizeof c->msg, "%s", msg);
        }
        r->inflight--;
    }
    pthread_cond_broadcast(&r->cv); /* the caller may wait for this piece, or for the unit to stop reading */
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

/* Pieces decoded ahead of the frontier give their budget back; those cursors
 * start again from their segment's beginning when their turn comes (nothing
 * of theirs was handed out yet). recycle: keep up to SPARE_MAX as spares. */
static void drop_ahead(mts_reader *r, int recycle)
{
    for (uint32_t j = r->frontier + 1; j < r->ncur; j++) {
        cursor *c = &r->cur[j];
        if (c->state == CUR_BUSY || c->state == CUR_FAILED || c->a == c->b) continue;
        cursor_clear(r, c, recycle);
        c->pos = c->a;
        c->state = CUR_IDLE;
    }
    ahead_sync(r);
}

/* A budget waiter of another client (or of this reader's own thread, as a
 * writer), with nothing in flight anywhere: what was decoded ahead goes back. */
static void reader_reclaim(void *ctx)
{
    mts_reader *r = ctx;
    pthread_mutex_lock(&r->mu);
    drop_ahead(r, 0);
    pthread_mutex_unlock(&r->mu);
}

const eng_client_ops reader_client_ops = {unit_run, unit_drain, reader_reclaim, 0}; /* faults on mapped files */

/* ---- scheduling (the caller's thread, mu held) ------------------------------------ */

/* Pieces a cursor may have decoded and not handed out before it gets another
 * unit: the frontier's keep the caller fed while the next one decodes; a
 * later cursor's first piece is ready when the caller gets there. More
 * would only take budget from writers on the same engine. */
#define QUEUE_FRONTIER 2u
#define QUEUE_AHEAD 1u

/* Budget for cursor j's next unit. */
static uint64_t unit_charge(const mts_reader *r, uint32_t j)
{
    const cursor *c = &r->cur[j];
    if (c->codec == MTS_CODEC_NONE) return sizeof(piece);
    size_t need = codec_get(c->codec)->step_need(c->base, c->b, c->pos);
    return sizeof(piece) + MTS_MAX((uint64_t)r->o.piece_size, (uint64_t)need);
}

/* Submits cursor j's next unit, paid `charge` (with buf: the spare piece's). */
static int submit_unit(mts_reader *r, uint32_t j, uint64_t charge, piece *buf)
{
    cursor *c = &r->cur[j];
    unit *u = mts_malloc(sizeof *u);
    if (!u) {
        if (buf) piece_recycle(r, buf);
        else eng_release(&r->client, charge);
        return MTS_E_NOMEM;
    }
    *u = (unit){.idx = j, .gen = r->gen, .map = c->map, .range = c->range, .start = c->start, .end = c->end,
                .data = c->base, .a = c->a, .b = c->b, .codec = c->codec, .pos = c->pos,
                .dstate = c->dstate ? c->dstate : dstate_take(r, c->codec),
                .verified = c->verified, .charge = charge, .buf = buf};
    c->dstate = NULL;
    c->state = CUR_BUSY;
    c->job = &u->base;
    r->inflight++;
    /* Ahead of queued compression jobs: the caller's thread will wait for it. */
    eng_submit_urgent(&r->client, &u->base);
    return 0;
}

int schedule(mts_reader *r, int may_block)
{
    int did = 0;
    for (uint32_t j = r->frontier; j < r->ncur && r->inflight < r->max_inflight; j++) {
        if (r->cur[j].state != CUR_IDLE || r->cur[j].queued >= (j == r->frontier ? QUEUE_FRONTIER : QUEUE_AHEAD))
            continue;
        uint64_t charge = unit_charge(r, j);
        piece *spare = r->cur[j].codec == MTS_CODEC_NONE ? NULL : spare_take(r, charge);
        if (spare) {
            FORWARD_IF_ERROR(submit_unit(r, j, spare->charge, spare));
            did = 1;
            continue;
        }
        int rc = eng_try_acquire(&r->client, charge);
        if (rc == 0) {
            FORWARD_IF_ERROR(submit_unit(r, j, charge, NULL));
            did = 1;
            continue;
        }
        char name[64], where[48] = "";
        const cursor *c = &r->cur[j];
        const char *what = cursor_name(r, c, name, sizeof name);
        if (rc < 0) {
            if (!r->blocks) snprintf(where, sizeof where, "partition %u: ", partition_at(&r->maps[c->map], c->start,
                                                                                      c->end, c->pos));
            return mts_msg(r->msg, sizeof r->msg, rc, "%s: %sa %llu-byte piece (an lz4 block at offset %llu) exceeds "
                           "the budget of %llu bytes", what, where, (unsigned long long)charge,
                           (unsigned long long)c->pos, (unsigned long long)eng_cap(r->engine));
        }
        if (j != r->frontier || r->inflight || !may_block) break; /* wait for what is in flight */
        drop_ahead(r, 1); /* their pieces become spares */
        piece *freed = spare_take(r, charge);
        if (freed) {
            FORWARD_IF_ERROR(submit_unit(r, j, freed->charge, freed));
            did = 1;
            continue;
        }
        uint64_t gen = r->gen;
        pthread_mutex_unlock(&r->mu);
        rc = eng_acquire(&r->client, charge); /* holds nothing the caller must give back */
        pthread_mutex_lock(&r->mu);
        if (rc < 0) return mts_msg(r->msg, sizeof r->msg, rc, "%s: wait for budget", what);
        if (gen != r->gen || r->cur[j].state != CUR_IDLE) {
            eng_release(&r->client, charge);
            return 1;
        }
        FORWARD_IF_ERROR(submit_unit(r, j, charge, NULL));
        did = 1;
    }
    return did;
}

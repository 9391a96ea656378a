/* The reader's state, shared by its two files only:
 *   reader.c   opening, start/next, stats, free (the caller's thread)
 *   decode.c   pieces, cursors and units: decoding on the engine, and the
 *              scheduling of units under the budget
 * See reader.c for the design. */
#ifndef MTS_READER_INT_H
#define MTS_READER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "engine.h"
#include "layout.h"
#include "mtshuffle.h"

#define DEFAULT_PIECE (1u << 20)
/* Decoder states kept for later segments: one a unit in flight can take
 * without allocating (zstd's DCtx and its window: what a segment would
 * otherwise allocate and fault in afresh). Outside the budget, as the
 * states of the units in flight are. */
#define DSTATE_POOL 8u
#define MIN_PIECE 4096u

typedef struct piece {
    struct piece *next;
    const unsigned char *data; /* buf, or the mapped file (codec none) */
    size_t len;
    uint64_t charge;
    unsigned char buf[];
} piece;

typedef enum { CUR_IDLE, CUR_BUSY, CUR_DONE, CUR_FAILED } cur_state;

/* One map's segment of one range of the current read, or one block handed
 * over by the caller (a block reader). */
typedef struct cursor {
    uint32_t map, range;  /* range: its index in the read's queue; a block's tag */
    uint32_t start, end;  /* the range's partitions; a block: 0, 0 */
    const unsigned char *base; /* the map's mapped data file; a block's own bytes */
    uint64_t a, b;        /* the segment: bytes [a, b) from base */
    cur_state state;
    const eng_job *job; /* its unit while BUSY: next() may run it itself */
    mts_codec codec;
    uint64_t pos;       /* next stored byte (offset in the data file); unit's while BUSY */
    void *dstate;       /* the codec's step state; unit's while BUSY */
    int verified;       /* the segment's checksums were checked */
    piece *head, *tail; /* decoded, not handed out */
    uint32_t queued;    /* pieces in that list */
    int err;
    char msg[MTS_MSG_CAP];
} cursor;

typedef struct unit {
    eng_job base;
    uint32_t idx;       /* its cursor */
    uint64_t gen;
    /* Its cursor's segment, as submitted (a cursor's are const while it is
     * BUSY): the unit needs no lock to read them. */
    uint32_t map, range, start, end;
    const unsigned char *data;
    uint64_t a, b;
    mts_codec codec;
    uint64_t pos;
    void *dstate;
    int verified;
    uint64_t charge;
    struct piece *buf;  /* a spare piece of the reader's, of `charge` bytes: the buffer to decode into */
} unit;

struct mts_reader {
    mts_reader_options o;
    map_output *maps;
    uint32_t nmaps, nparts;
    int blocks;            /* const: opened by mts_reader_open_blocks, no map outputs */
    mts_engine *engine;
    eng_client client;
    int client_up;
    uint32_t max_inflight; /* units in flight at once */

    pthread_mutex_t mu;
    pthread_cond_t cv;     /* a unit finished */
    /* All below guarded by mu. */
    uint64_t gen;          /* bumped by every start: units of older reads drop their work;
                              written under mu, read by units without it (atomic) */
    uint32_t reading;      /* units that may be reading their segment's bytes (atomic; a
                              read's end waits for it to be 0 before the caller may free
                              its blocks) */
    int active;
    uint32_t frontier, inflight;
    cursor *cur;           /* per range queued, one per map: range k's map j at k * nmaps + j */
    uint32_t ncur, capcur, nranges;
    piece *current;        /* handed to the caller; given back at the next call */
    piece *spare;          /* pieces the caller is done with, kept with their charge to pay
                              for the next units (decode.c: SPARE_MAX) */
    uint32_t nspare;
    struct { void *state; mts_codec codec; } dpool[DSTATE_POOL]; /* decoder states of finished
                              segments, ready for a segment's start (decode.c) */
    uint32_t ndpool;
    uint64_t ahead;        /* charges of the pieces queued on cursors past the frontier: what
                              reclaim frees (their cursors start again later); the engine
                              knows it as this client's reclaimable bytes */
    int err;
    char msg[MTS_MSG_CAP];
    mts_reader_stats st;   /* but decode_ns */
    uint64_t decode_ns;    /* summed over units; atomic */
};

extern const eng_client_ops reader_client_ops;

/* decode.c; all with reader.mu held */
void piece_free(mts_reader *r, piece *p);
/* A piece the caller or the reader is done with: kept as a spare if there is
 * room, else freed. */
void piece_recycle(mts_reader *r, piece *p);
void spares_free(mts_reader *r);
/* Frees the pooled decoder states (no unit may run). */
void dstates_free(mts_reader *r);
void cursor_reset(mts_reader *r, cursor *c);
/* Cursor c became the frontier: its pieces are not ahead any more. */
void ahead_leave(mts_reader *r, const cursor *c);
/* Cursors past the frontier were reset: recounts r->ahead. */
void ahead_sync(mts_reader *r);
/* What a message calls cursor c's bytes: its map's data file, or its block. */
const char *cursor_name(const mts_reader *r, const cursor *c, char *buf, size_t len);
/* Submits the units the budget allows; 1 if any was submitted, < 0 on
 * failure. may_block: the caller holds no piece, so the frontier may wait
 * for budget (reader.mu is released meanwhile). */
int schedule(mts_reader *r, int may_block);

#endif

/* The writer's state, shared by its three files only:
 *   writer.c   the state machine, input calls, finish/commit/abort, stats, errors
 *   writer_open.c  options, names, the attempt's files: create's set-up
 *   intake.c   stage buffer, record arena and batches, cut into jobs
 *   jobs.c     compression jobs (any worker) and the ordered writer (drain)
 * Destinations (dest.h) never see this struct.
 *
 * Threads: the caller's thread ("producer") runs the API; engine workers run
 * jobs and, one at a time in submission order, drain them ("ordered writer");
 * other clients' threads may call reclaim (a spill of the run store). Each
 * field says who writes it.
 *
 * Locks: writer.mu guards the first error, its message and the spare arena;
 * run_store.mu guards the held chunks and the run file; engine.mu guards
 * the budget and the queues. Order: run_store.mu, then engine.mu (a spill
 * or merge gives budget back while it holds its store); writer.mu is a leaf;
 * engine.mu is taken last and never held around a callback.
 *
 * Budget rule (what keeps a shared engine free of deadlock): the producer
 * blocks in eng_acquire() only while everything it holds comes back without
 * it: jobs in flight (the workers release them) and held chunks (reclaimable
 * by any waiter). Its own buffers are paid for in advance as one unit: a
 * stage reserves its buffer plus the job it will become; an arena reserves
 * its pages and every job they can become (a segment is at least a page,
 * so one job, segment and chunk per page and the codec bound of all pages
 * cover them), and is handed to its jobs when its pages run out. An empty
 * arena is given back before the producer blocks: freed, or kept by the
 * engine (kept buffers, which any waiter frees first). */
#ifndef MTS_WRITER_INT_H
#define MTS_WRITER_INT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "codec.h"
#include "dest.h"
#include "engine.h"
#include "mtshuffle.h"

#define TOKEN_LEN 32
#define MAX_SEGS_PER_JOB 1024u
#define RECORD_HEADER 8u /* a tagged record: BE32 partition, BE32 length */
#define NO_PAGE UINT32_MAX
#define CH_FIRST 0 /* a partition's chain of arena pages: its first page */
#define CH_LAST 1  /* its last page */
#define CH_FILL 2  /* bytes in the last page */
#define CH_BYTES 3 /* bytes in the arena */

/* Input shared by the jobs cut from it. */
typedef struct inbuf {
    unsigned char *mem;        /* owned memory; NULL when borrowed from the caller */
    const unsigned char *base; /* where the bytes are */
    uint64_t charge;           /* budget held for mem (and order) */
    const uint32_t *next;      /* an arena's page chains (inside mem); NULL for grouped bytes */
    uint32_t page;             /* an arena's page size */
    int refs;                  /* guarded by writer.mu; one per job plus the producer's */
    mts_batch_done done;       /* borrowed asynchronously (inbuf on the heap): called at the */
    void *done_ctx;            /* last reference, else the producer waits for it */
    uint64_t arena_bytes;      /* an arena's allocation (mem), charged within charge */
} inbuf;

typedef struct seg {
    uint32_t partition;
    uint64_t off, len; /* grouped input: bytes [off, off+len) of the inbuf; an arena:
                          len bytes of the page chain from page off */
    chunk *out;        /* set by the worker */
} seg;

typedef struct job {
    eng_job base;
    destination *dest;
    inbuf *in;
    uint64_t struct_charge; /* budget for this struct */
    uint64_t seq;           /* the writer's jobs numbered from 1 in submission order */
    uint32_t nsegs;
    seg segs[];
} job;

/* What a job costs the budget besides its segments (job_seg_charge() each):
 * its struct and the header of the block its chunks share. */
#define JOB_CHARGE (sizeof(job) + sizeof(chunk_block))

typedef enum { MODE_STREAM, MODE_HELD } writer_mode;
typedef enum { ST_OPEN, ST_COMMITTED, ST_FAILED, ST_ABORTED } writer_state;

struct mts_writer {
    mts_writer_options o; /* const after create (o.dir points at dir) */
    codec_params cp;
    const codec_vtable *codec;
    uint64_t job_size;    /* input bytes per job, fitted to the budget */
    uint64_t job_charge_cap;
    uint64_t arena_cap;   /* an arena's pages: npages * page bytes */
    uint64_t arena_bytes; /* its allocation: the pages and their chain */
    uint32_t page, npages;
    uint32_t arena_sharers; /* what the arena is fitted to (writer_fit_arena) */

    char dir[MTS_PATH_CAP];
    char data_final[MTS_PATH_CAP], index_final[MTS_PATH_CAP], sum_final[MTS_PATH_CAP];
    char token[TOKEN_LEN + 1];

    mts_engine *engine;   /* the one it runs on; a reference of its own if private */
    eng_client client;
    int client_up;

    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a borrowed inbuf was released */
    int err;              /* first error: written once under mu, read atomically */
    char fail_msg[MTS_MSG_CAP]; /* its message, written once before err */
    char msg[MTS_MSG_CAP];      /* producer: the message of a rejected call */

    dest_env env;
    io_stats io;
    out_file out;         /* the data file; also the streaming destination */
    run_store runs;       /* unordered input (streaming strategy) */
    part_files parts;     /* the baseline strategy */
    destination *held_dest; /* runs or parts: where unordered input goes */

    writer_state state;   /* producer */
    writer_mode mode;     /* producer */

    /* producer intake */
    int64_t cur_part;     /* last partition seen, -1 before any input */
    inbuf *stage;         /* partition-ordered append buffer */
    uint64_t stage_used;
    uint64_t stage_prepaid; /* reserved for the job the stage becomes */
    unsigned char *arena; /* unordered records, each partition's bytes in its own chain
                             of pages; after the pages, the chain: next[npages] */
    uint64_t arena_reserved;
    uint64_t arena_unit_bytes; /* what a whole arena reserves (refitted only between arenas) */
    uint32_t pages_used;
    unsigned char *spare;      /* guarded by mu: an arena back from its jobs, kept for the next
                                  one; charged spare_bytes and reclaimable by any waiter */
    uint64_t spare_bytes;      /* guarded by mu: its allocation (arenas may differ in size) */
    uint32_t *chain;      /* per partition p, chain[4p + CH_*]; CH_LAST is NO_PAGE while
                             p has nothing in the arena */
    seg *plan;            /* scratch for planning one job's segments */
    uint64_t jobs_submitted; /* numbers them */
    uint32_t stale_removed; /* temp files of dead earlier attempts removed at create */

    mts_writer_stats st;  /* producer fields, written with atomic stores */
};

/* writer_open.c */
int writer_validate(const mts_writer_options *o, char *err, size_t len);
int writer_build_names(mts_writer *w);
void writer_fit_sizes(mts_writer *w, uint64_t cap);
/* The arena's sizes, for `sharers` (>= 2) writers and readers on the engine. */
void writer_fit_arena(mts_writer *w, uint64_t cap, uint32_t sharers);
int writer_open_outputs(mts_writer *w, const char **what);

/* writer.c */
void writer_fail(mts_writer *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int writer_failed(mts_writer *w);
/* For the producer's own counters in st: it is their only writer, so a
 * relaxed load and store (no locked read-modify-write) keep readers on
 * other threads race-free. */
static inline void stat_add(uint64_t *field, uint64_t n)
{
    __atomic_store_n(field, __atomic_load_n(field, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* intake.c */
int intake_stream(mts_writer *w, uint32_t p, const unsigned char *b, size_t len);
int intake_held_slow(mts_writer *w, uint32_t p, const unsigned char *b, size_t len);
/* A record out of partition order: the common case, a record that fits its
 * partition's last page, is one copy. The partition's next record goes just
 * after it, often hundreds of records later: the line after this one's end
 * is asked for now, to be in cache by then (a hint; BENCHMARKS.md, "On the
 * ninth session's Intel Xeon again"). */
static inline int intake_held(mts_writer *w, uint32_t p, const unsigned char *b, size_t len)
{
    if (len == 0) return 0; /* nothing to keep: a partition's bytes are all a record leaves */
    uint32_t *ch = w->arena ? &w->chain[4 * p] : NULL;
    if (ch && ch[CH_LAST] != NO_PAGE && len <= w->page - ch[CH_FILL]) {
        unsigned char *dst = w->arena + (size_t)ch[CH_LAST] * w->page + ch[CH_FILL];
        memcpy(dst, b, len);
        __builtin_prefetch((const void *)((uintptr_t)dst + len + 64), 1, 3);
        ch[CH_FILL] += (uint32_t)len;
        ch[CH_BYTES] += (uint32_t)len;
        return 0;
    }
    return intake_held_slow(w, p, b, len);
}
/* Hands a batch (partitions [0, n)) to jobs bound for dest. Without done,
 * returns once no job reads it. With done, returns once its jobs are queued,
 * and the last of them calls done(ctx); on an error return done is not called
 * and nothing reads the batch any more. */
int intake_batch(mts_writer *w, const void *data, const uint64_t *offsets, destination *dest, mts_batch_done done,
                 void *ctx);
/* Submits what the stage and arena hold; frees the empty arena. last: the
 * input ends here (the caller runs the stage's job itself). */
int intake_flush(mts_writer *w, int last);
void intake_free(mts_writer *w);
/* The arena's sizes; after writer_fit_sizes(). */
void intake_init(mts_writer *w);

/* jobs.c */
extern const eng_client_ops writer_client_ops;
/* The spare arena (its allocation, `bytes`, charged): kept by the worker
 * whose job was the arena's last (0 if one is kept already), taken by the
 * producer (NULL if none, or if it is not of the size the producer wants:
 * then discarded), freed by reclaim and teardown. */
int arena_keep(mts_writer *w, unsigned char *arena, uint64_t bytes);
unsigned char *arena_take_spare(mts_writer *w, uint64_t bytes);
void arena_free_spare(mts_writer *w);
/* An arena charged its `bytes`: kept by the engine for the next writer,
 * else freed with its charge. */
void arena_discard(mts_writer *w, unsigned char *arena, uint64_t bytes);
/* Budget for a job of nsegs segments totalling in_bytes (codec bound). */
uint64_t job_seg_charge(const mts_writer *w, uint64_t take);
void inbuf_unref(mts_writer *w, inbuf *in);

#endif

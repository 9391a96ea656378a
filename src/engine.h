/* The engine: one worker pool and one bytes-in-flight budget shared by every
 * writer and reader created on it (mts_engine in the public header).
 *
 * Clients. Each writer or reader registers an eng_client: its ordered job
 * queue, the budget it holds, its stats, and an optional reclaim hook.
 *
 * Jobs. eng_submit() never blocks. Workers take jobs from one FIFO shared by
 * every client, so jobs of different clients interleave; run() may finish
 * them in any order. Each client's jobs are drained (drain()) strictly in its
 * own submission order, one at a time, by whichever worker completes the job
 * at the head of that client's queue. There is no drain thread: a writer on
 * an engine starts no thread.
 *
 * Budget. eng_acquire() blocks until the bytes fit under the engine's cap,
 * which is hard: the sum held by all clients never exceeds it. Waiters are
 * served first come, first served, so a small request cannot overtake a large
 * one forever. A client may only block in eng_acquire() while it holds no
 * budget that needs its own later call to come back (see writer_int.h for how
 * the writer keeps that rule); everything else held is either released by the
 * workers (jobs in flight) or reclaimable: when the head waiter does not fit
 * and no job is in flight anywhere, it calls the reclaim hook of the client
 * that reports the most reclaimable bytes (a writer spills its held chunks),
 * on the waiter's own thread. Hence no deadlock and no starvation.
 *
 * Lock order: engine.mu is taken last (a client may hold its own lock when
 * it calls eng_release and friends) and is never held around a callback:
 * run(), drain() and reclaim() are called without it; they may take their client's own locks and call eng_release(),
 * eng_note_reclaimable() (which take engine.mu briefly). */
#ifndef MTS_ENGINE_H
#define MTS_ENGINE_H

#include <pthread.h>
#include <stdint.h>

#include "mtshuffle.h"

typedef struct eng_client eng_client;
typedef struct eng_worker eng_worker;

typedef struct eng_job {
    struct eng_job *next_run;   /* engine FIFO; guarded by engine.mu */
    struct eng_job *next_order; /* the client's order; guarded by engine.mu */
    eng_client *client;
    int done;                   /* guarded by engine.mu */
    int urgent;                 /* eng_submit_urgent(); const while queued */
} eng_job;

typedef struct eng_client_ops {
    /* On a worker; any order. */
    void (*run)(void *ctx, eng_job *job, eng_worker *w);
    /* On a worker, in submission order, one at a time per client; frees the job. */
    void (*drain)(void *ctx, eng_job *job);
    /* Frees what the client can give back without its owner (writer: spill
     * held chunks; reader: drop what it decoded ahead). May be NULL. Called
     * from another client's thread, or its owner's while it waits as another
     * client (a task's writer). */
    void (*reclaim)(void *ctx);
    /* 1: run() only computes (a writer compresses; its drain writes). The
     * engine runs at most eng_parallelism() such jobs at once, since more than
     * the CPUs can run only take turns; a worker past that waits until a
     * submit or a caller that helped finds a CPU free (the workers computing
     * go on from job to job themselves). 0: run() may block on I/O (a
     * reader's faults on a mapped file), as many at once as there are workers. */
    int cpu_bound;
} eng_client_ops;

struct eng_client {
    mts_engine *e;
    const eng_client_ops *ops;
    void *ctx;
    /* All below guarded by engine.mu. */
    eng_job *order_head, *order_tail; /* submitted, not drained */
    uint64_t pending;                 /* jobs submitted, not drained */
    int draining;                     /* a worker is in drain() for this client */
    int reclaiming;                   /* reclaim() calls running on other threads */
    int aborted;                      /* eng_client_abort(): waiters return MTS_E_ABORTED */
    uint64_t held, peak;              /* budget held by this client */
    uint64_t reclaimable;             /* part of held that reclaim() frees */
    uint64_t wait_ns;                 /* time blocked in eng_acquire */
    pthread_cond_t cv;                /* this client's idle and reclaim waits */
    eng_client *next, *prev;          /* the engine's clients */
};

/* Per-worker scratch that outlives jobs: codec contexts, created on first use. */
#define ENG_SLOTS 5
typedef struct eng_slot {
    void *p;
    void (*free_fn)(void *);
} eng_slot;

struct eng_worker {
    mts_engine *e;
    unsigned index;            /* workers 0..threads-1; callers helping in eng_wait_idle above */
    eng_slot slot[ENG_SLOTS];
    struct eng_worker *next;   /* the engine's idle helpers; guarded by engine.mu */
    /* A worker's wait for a job (guarded by engine.mu): */
    pthread_cond_t cv;
    struct eng_worker *next_idle; /* below it on the engine's stack of waiting workers */
    int woken;                    /* taken off that stack for a job (or to stop) */
};

/* Registers a client: takes a reference on the engine. */
int eng_client_init(eng_client *c, mts_engine *e, const eng_client_ops *ops, void *ctx);
/* Waits for the client's jobs and for reclaim calls into it, then
 * unregisters. The client must hold no budget. Drops the engine reference. */
void eng_client_destroy(eng_client *c);

void eng_submit(eng_client *c, eng_job *job);
/* Queues the job without waking a worker: for a job the caller is about to
 * run itself in eng_wait_idle (a worker that comes by may still take it). */
void eng_submit_quiet(eng_client *c, eng_job *job);
/* Queues the job ahead of every job not queued this way (after the urgent
 * ones before it): for a job its submitter will soon block on, such as a
 * reader's next piece, which must not wait behind a writer's queue of
 * compression jobs. Use it only for small jobs few at a time. */
void eng_submit_urgent(eng_client *c, eng_job *job);
/* For a job its caller waits for in eng_wait_idle, running what is left of
 * its jobs itself: a worker is woken only where a CPU is free besides the
 * caller's. Waking one for every CPU, a caller about to wait had both
 * workers of two CPUs queued on the one CPU that was free, and once it
 * slept its own CPU idled until the scheduler balanced, up to a tick
 * (BENCHMARKS.md). */
void eng_submit_helped(eng_client *c, eng_job *job);
/* If no worker has taken `job` (one of c's, not drained) yet, runs it on the
 * calling thread and drains c's jobs that are ready: 1 if it did, else 0.
 * For a caller that would otherwise block until that job is done. */
int eng_run_queued(eng_client *c, const eng_job *job);
/* Blocks until no other thread is in this client's reclaim(): once the
 * client reports nothing reclaimable, what it held is then given back. */
void eng_wait_reclaims(eng_client *c);
/* Blocks until every job this client submitted has been drained; meanwhile
 * the calling thread runs those of its jobs no worker has taken yet, where
 * a CPU is free for it. Workers whose wake-up it held back (its jobs
 * submitted with eng_submit_helped, or queued while it computed) are woken
 * once it stops running jobs, as far as CPUs are free. */
void eng_wait_idle(eng_client *c);

/* Blocks until n bytes fit. MTS_E_OVERFLOW if n exceeds the cap,
 * MTS_E_ABORTED once the client was aborted. */
int eng_acquire(eng_client *c, uint64_t n);
/* eng_acquire for n bytes of which `size` are one buffer: where a kept buffer
 * of exactly that size is there when the bytes fit, it comes with them in
 * *buf (its charge part of n, counted as free while waiting); else *buf is
 * NULL and the caller allocates the buffer. */
int eng_acquire_buffer(eng_client *c, uint64_t n, size_t size, void **buf);
/* 0 if taken now; 1 if it would block (others wait, or it does not fit). */
int eng_try_acquire(eng_client *c, uint64_t n);
void eng_release(eng_client *c, uint64_t n);
/* Buffers kept for reuse (a fresh large buffer costs a page fault per 4 KiB
 * on first touch). A client that no longer needs a buffer it paid `size`
 * for may give it to the engine with its charge: 1 if kept (the charge is
 * the engine's now, still counted as held), 0 if not (the caller frees it and
 * releases the charge). While someone waits for budget, a buffer is kept only
 * if the first waiter asked for one of its size (eng_acquire_buffer), which
 * then takes it instead of allocating one. take: a kept buffer of exactly
 * `size`, its charge now the client's; NULL if none. A waiter that does not
 * fit frees every kept buffer it cannot use before it waits or reclaims, so
 * keeping never blocks anyone. */
#define ENG_CACHE_MAX 16
void *eng_cache_take(eng_client *c, size_t size);
/* The same for a caller that has paid for the buffer already: the kept
 * buffer's charge goes back to the budget. */
void *eng_cache_take_paid(eng_client *c, size_t size);
int eng_cache_give(eng_client *c, void *p, size_t size);
/* Adds delta (may be negative) to the client's reclaimable bytes. Returns
 * whether some client waits for budget now: a holder of reclaimable bytes
 * that can give them back cheaply should, rather than make the waiter stall
 * until nothing is in flight. */
int eng_note_reclaimable(eng_client *c, int64_t delta);
/* Wakes the client's budget waiter with MTS_E_ABORTED; later acquires fail. */
void eng_client_abort(eng_client *c);
uint64_t eng_cap(const mts_engine *e);
unsigned eng_threads(const mts_engine *e);
/* CPU-bound jobs that run at once: the workers, at most the CPUs the process
 * may use (mts_cpu_count()). */
unsigned eng_parallelism(const mts_engine *e);
/* Writers and readers on the engine now. */
uint32_t eng_clients(mts_engine *e);

typedef struct eng_client_stats {
    uint64_t held, peak, wait_ns;
} eng_client_stats;
void eng_client_stats_get(eng_client *c, eng_client_stats *st);

/* The worker's slot k (k < ENG_SLOTS): the job that finds p NULL fills it
 * (p and free_fn); the engine frees it when the worker exits. */
eng_slot *eng_worker_slot(eng_worker *w, unsigned k);

#endif

/* A fixed pool of workers over a bounded power-of-two job ring, plus one
 * ordered drain thread: jobs run in any order on the workers and are drained
 * strictly in submission order (zstdmt / lz4io style).
 *
 * Shutdown never abandons a job: pool_destroy() waits until every submitted
 * job has been run and drained, so each job's resources are always released by
 * its own callbacks. Callers make that fast by having the callbacks skip work
 * once their writer has failed.
 *
 * Lock order: pool.mu is a leaf; callbacks run without it held. */
#ifndef MTS_POOL_H
#define MTS_POOL_H

#include <pthread.h>
#include <stdint.h>

typedef struct pool_job {
    int done; /* guarded by pool.mu: set after run() returned */
} pool_job;

typedef void (*pool_run_fn)(void *ctx, pool_job *job, unsigned worker);
typedef void (*pool_drain_fn)(void *ctx, pool_job *job);

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: a job to run, or stop */
    pthread_cond_t drain_cv; /* drainer: the head job is done, or stop */
    pthread_cond_t space_cv; /* submitters and waiters: head advanced */
    pool_job **ring;         /* guarded by mu */
    uint64_t mask;           /* const */
    uint64_t head;           /* guarded by mu: next job to drain */
    uint64_t next_run;       /* guarded by mu: next job for a worker */
    uint64_t tail;           /* guarded by mu: next free slot */
    int stop;                /* guarded by mu */
    unsigned nworkers;       /* const */
    unsigned started;        /* threads started (workers + drainer) */
    pthread_t *threads;
    pool_run_fn run;
    pool_drain_fn drain;
    void *ctx;
} pool;

/* ring_log2: ring capacity 2^ring_log2 jobs (submitted, not yet drained). */
int pool_init(pool *p, unsigned nworkers, unsigned ring_log2, pool_run_fn run,
              pool_drain_fn drain, void *ctx);
/* Blocks while the ring is full. */
void pool_submit(pool *p, pool_job *job);
/* Blocks until every submitted job has been drained. */
void pool_wait_idle(pool *p);
/* Waits for all submitted jobs, then stops and joins the threads. */
void pool_destroy(pool *p);

#endif

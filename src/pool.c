#include <stdlib.h>

#include "internal.h"
#include "pool.h"

typedef struct worker_arg {
    pool *p;
    unsigned index;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    mts_free(arg);
    pool *p = wa.p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next_run == p->tail) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->next_run == p->tail) break; /* stop, and nothing left to run */
        pool_job *job = p->ring[p->next_run++ & p->mask];
        pthread_mutex_unlock(&p->mu);
        p->run(p->ctx, job, wa.index);
        pthread_mutex_lock(&p->mu);
        job->done = 1;
        if (job == p->ring[p->head & p->mask]) pthread_cond_signal(&p->drain_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *drain_main(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!(p->head != p->tail && p->ring[p->head & p->mask]->done) &&
               !(p->stop && p->head == p->tail))
            pthread_cond_wait(&p->drain_cv, &p->mu);
        if (p->head == p->tail) break; /* stop, and everything drained */
        pool_job *job = p->ring[p->head & p->mask];
        pthread_mutex_unlock(&p->mu);
        p->drain(p->ctx, job);
        pthread_mutex_lock(&p->mu);
        p->head++;
        pthread_cond_broadcast(&p->space_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pool_init(pool *p, unsigned nworkers, unsigned ring_log2, pool_run_fn run,
              pool_drain_fn drain, void *ctx)
{
    *p = (pool){0};
    p->nworkers = nworkers;
    p->mask = (1ull << ring_log2) - 1;
    p->run = run;
    p->drain = drain;
    p->ctx = ctx;
    p->ring = mts_calloc(p->mask + 1, sizeof(*p->ring));
    p->threads = mts_calloc(nworkers + 1u, sizeof(*p->threads));
    if (!p->ring || !p->threads) goto nomem;
    if (pthread_mutex_init(&p->mu, NULL)) goto nomem;
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->drain_cv, NULL);
    pthread_cond_init(&p->space_cv, NULL);
    if (pthread_create(&p->threads[0], NULL, drain_main, p)) goto fail;
    p->started = 1;
    for (unsigned i = 0; i < nworkers; i++) {
        worker_arg *wa = mts_malloc(sizeof(*wa));
        if (!wa) goto fail;
        *wa = (worker_arg){p, i};
        if (pthread_create(&p->threads[i + 1], NULL, worker_main, wa)) {
            mts_free(wa);
            goto fail;
        }
        p->started++;
    }
    return 0;
fail:
    pool_destroy(p);
    return MTS_E_NOMEM;
nomem:
    mts_free(p->ring);
    mts_free(p->threads);
    *p = (pool){0};
    return MTS_E_NOMEM;
}

void pool_submit(pool *p, pool_job *job)
{
    job->done = 0;
    pthread_mutex_lock(&p->mu);
    while (p->tail - p->head > p->mask) pthread_cond_wait(&p->space_cv, &p->mu);
    p->ring[p->tail++ & p->mask] = job;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
}

void pool_wait_idle(pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->head != p->tail) pthread_cond_wait(&p->space_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void pool_destroy(pool *p)
{
    if (!p->threads) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->drain_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->drain_cv);
    pthread_cond_destroy(&p->space_cv);
    pthread_mutex_destroy(&p->mu);
    mts_free(p->ring);
    mts_free(p->threads);
    *p = (pool){0};
}

#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "glibc_floor.h"
#include "internal.h"

#define RECLAIM_RETRY_NS (10u * 1000u * 1000u) /* re-check after a reclaim that freed nothing */

/* One blocked eng_acquire(), on its caller's stack. Only the head of the
 * queue can be served, so only it is woken by releases (no herd). */
typedef struct waiter {
    struct waiter *next;
    eng_client *c;
    size_t want; /* a kept buffer of this size may come with the bytes; 0: none */
    pthread_cond_t cv;
} waiter;

struct mts_engine {
    pthread_mutex_t mu;
    /* All below guarded by mu, except the const ones. */
    eng_job *run_head, *run_tail; /* submitted, not yet taken by a worker */
    eng_job *run_urgent;          /* the last urgent job in it: urgent jobs are its prefix */
    uint64_t pending;             /* jobs submitted, not drained, all clients */
    waiter *wait_head, *wait_tail;
    eng_client *clients;
    uint32_t nclients;
    int refs;                     /* the creator's plus one per client */
    int stop;
    unsigned nthreads;            /* const */
    unsigned started;             /* threads running */
    unsigned busy;                /* workers in run() or drain() */
    unsigned cpus;                /* const: CPU-bound jobs that run at once (eng_parallelism) */
    unsigned computing;           /* CPU-bound jobs in run(), on workers and helping callers */
    eng_worker *idle;             /* workers waiting for a job, the latest first: the one woken
                                     first has its codec state and buffers warmest */
    unsigned waking;              /* workers taken off it and not yet up */
    unsigned owed;                /* wake-ups held back, or spent on a worker that then found no
                                     CPU free: a job waits for one (bounded by nthreads) */
    uint64_t cap;                 /* const */
    uint64_t held, peak, wait_ns, jobs, busy_ns, reclaims;
    eng_worker *workers;
    pthread_t *threads;
    eng_worker *helpers;          /* idle helper contexts (eng_wait_idle), linked by next */
    struct { void *p; size_t size; } cache[ENG_CACHE_MAX]; /* buffers kept for reuse */
    unsigned ncache;
    uint64_t cached;              /* their bytes, part of held */
    unsigned nhelpers;            /* made so far */
};

/* ---- the run queue ------------------------------------------------------------ */

/* With mu held: removes j (after prev, NULL if j is the head) from the run
 * queue. */
static eng_job *unlink_run(mts_engine *e, eng_job *prev, eng_job *j)
{
    if (prev) prev->next_run = j->next_run;
    else e->run_head = j->next_run;
    if (e->run_tail == j) e->run_tail = prev;
    if (e->run_urgent == j) e->run_urgent = prev; /* prev is urgent too, or none is left */
    return j;
}

/* With mu held: queues j, an urgent one after the urgent ones before it,
 * any other at the tail. */
static void link_run(mts_engine *e, eng_job *j)
{
    eng_job *after = j->urgent ? e->run_urgent : e->run_tail;
    if (j->urgent) e->run_urgent = j;
    if (!after && j->urgent) { /* first in the queue */
        j->next_run = e->run_head;
        e->run_head = j;
        if (!e->run_tail) e->run_tail = j;
        return;
    }
    j->next_run = after ? after->next_run : NULL;
    if (after) after->next_run = j;
    else e->run_head = j;
    if (e->run_tail == after) e->run_tail = j;
}

/* ---- workers ---------------------------------------------------------------- */

/* With mu held: the waiter at the head of the budget queue re-checks. */
static void wake_head(mts_engine *e)
{
    if (e->wait_head) pthread_cond_signal(&e->wait_head->cv);
}

/* With mu held: drains c's finished jobs from the head of its order. */
static void drain_ready(mts_engine *e, eng_client *c)
{
    while (!c->draining && c->order_head && c->order_head->done) {
        eng_job *j = c->order_head;
        c->order_head = j->next_order;
        if (!c->order_head) c->order_tail = NULL;
        c->draining = 1;
        pthread_mutex_unlock(&e->mu);
        c->ops->drain(c->ctx, j); /* frees j */
        pthread_mutex_lock(&e->mu);
        c->draining = 0;
        c->pending--;
        e->pending--;
        if (c->pending == 0) pthread_cond_broadcast(&c->cv);
        if (e->pending == 0) wake_head(e);
    }
}

static void free_slots(eng_worker *w)
{
    for (unsigned k = 0; k < ENG_SLOTS; k++)
        if (w->slot[k].p) w->slot[k].free_fn(w->slot[k].p);
}

/* Workers compress and decode behind the threads that feed them and wait
 * for them. SCHED_BATCH (Linux) tells the scheduler so: a worker does not
 * preempt the thread that woke it, nor, where the pool has more threads than
 * CPUs, another worker in its slice (BENCHMARKS.md: 8 threads on 2 CPUs
 * 0.92x the time). MTS_DISABLE_SCHED_BATCH=1 leaves the inherited policy. */
static void worker_sched(void)
{
#ifdef SCHED_BATCH
    if (mts_env_flag("MTS_DISABLE_SCHED_BATCH")) return;
    struct sched_param sp = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp); /* advisory: a refusal changes nothing */
#endif
}

/* A worker names itself, so that top, ps and perf tell it
 * from the thread that created the engine (whose name it would inherit). */
static void worker_name(unsigned index)
{
    char name[16]; /* the kernel keeps 15 bytes */
    snprintf(name, sizeof name, "mts-worker-%u", index);
    (void)pthread_setname_np(pthread_self(), name); /* advisory, as above */
}

/* With mu held: whether a job of c's may start now as far as the CPUs go. */
static int cpu_free(const mts_engine *e, const eng_client *c)
{
    return !c->ops->cpu_bound || e->computing < e->cpus;
}

/* With mu held: whether j (NULL: none) may start now. */
static int may_run(const mts_engine *e, const eng_job *j)
{
    return j && cpu_free(e, j->client);
}

/* With mu held: one more wake-up owed to a job that waits for a CPU. */
static void owe(mts_engine *e)
{
    if (e->owed < e->nthreads) e->owed++;
}

/* With mu held: wakes the worker that waited least, if any waits. */
static void wake_one(mts_engine *e)
{
    eng_worker *w = e->idle;
    if (!w) return;
    e->idle = w->next_idle;
    w->woken = 1;
    e->waking++;
    pthread_cond_signal(&w->cv);
}

/* With mu held: wakes a worker for a job just queued. Not where the job
 * must wait for a CPU, nor where enough are woken already to fill the CPUs
 * (less `reserve`, those the caller will use itself): the workers computing
 * go on from job to job (a pool with more workers than CPUs would otherwise
 * wake them all at every burst of jobs), and the wake-up is owed: given out
 * by a caller that helped, once it is done (computed, pay_owed). */
static void wake_worker(mts_engine *e, unsigned reserve)
{
    const eng_job *j = e->run_head;
    if (!j || (j->client->ops->cpu_bound && e->computing + e->waking + reserve >= e->cpus))
        owe(e); /* no CPU for it */
    else wake_one(e);
}

/* With mu held: a job of c's left run(), on a worker (helper 0), on a
 * caller that helped once (1), or on one that goes on helping (2). A worker
 * goes on to the next job itself (a hand-off to a waiting worker at every
 * job cost more switches than the drain it would overlap); a caller that
 * helped once wakes a worker for a job that waited for its CPU; one that
 * goes on does so when it stops (eng_wait_idle). */
static void computed(mts_engine *e, const eng_client *c, int helper)
{
    if (!c->ops->cpu_bound) return;
    e->computing--;
    if (helper == 1 && e->owed && e->idle && may_run(e, e->run_head)) {
        e->owed--;
        wake_one(e);
    }
}

/* With mu held: a caller that held back wake-ups, meaning to run its jobs
 * itself (eng_submit_helped, computed()'s helper 2), stops helping or is
 * about to block (for budget): the wake-ups owed go out, as many as there
 * are CPUs free and jobs that may run on them. */
static void pay_owed(mts_engine *e)
{
    while (e->owed && e->idle && may_run(e, e->run_head) && e->computing + e->waking < e->cpus) {
        e->owed--;
        wake_one(e);
    }
}

static void *worker_main(void *arg)
{
    eng_worker *w = arg;
    mts_engine *e = w->e;
    worker_sched();
    worker_name(w->index);
    pthread_mutex_lock(&e->mu);
    for (;;) {
        for (int woken = 0; !may_run(e, e->run_head) && !(e->stop && !e->run_head); woken = 1) {
            if (woken && e->run_head) owe(e); /* woken for a job that now waits for a CPU */
            w->woken = 0;
            w->next_idle = e->idle;
            e->idle = w;
            do pthread_cond_wait(&w->cv, &e->mu);
            while (!w->woken); /* taken off the stack by whoever woke it */
            e->waking--;
        }
        if (!e->run_head) break; /* stop, and nothing left to run */
        eng_job *j = unlink_run(e, NULL, e->run_head);
        eng_client *c = j->client;
        e->busy++;
        e->computing += c->ops->cpu_bound;
        pthread_mutex_unlock(&e->mu);
        uint64_t t0 = mts_now_ns();
        c->ops->run(c->ctx, j, w);
        uint64_t t1 = mts_now_ns();
        pthread_mutex_lock(&e->mu);
        computed(e, c, 0);
        j->done = 1;
        e->jobs++;
        drain_ready(e, c);
        e->busy--;
        e->busy_ns += t1 - t0;
    }
    pthread_mutex_unlock(&e->mu);
    free_slots(w);
    return NULL;
}

eng_slot *eng_worker_slot(eng_worker *w, unsigned k)
{
    assert(k < ENG_SLOTS);
    return &w->slot[k];
}

/* ---- life cycle ------------------------------------------------------------- */

static void engine_destroy(mts_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    while (e->idle) wake_one(e);
    pthread_mutex_unlock(&e->mu);
    for (unsigned i = 0; i < e->started; i++) pthread_join(e->threads[i], NULL);
    while (e->helpers) {
        eng_worker *h = e->helpers;
        e->helpers = h->next;
        free_slots(h);
        mts_free(h);
    }
    for (unsigned i = 0; i < e->ncache; i++) mts_free(e->cache[i].p);
    for (unsigned i = 0; i < e->nthreads; i++) pthread_cond_destroy(&e->workers[i].cv);
    pthread_mutex_destroy(&e->mu);
    mts_free(e->workers);
    mts_free(e->threads);
    mts_free(e);
}

static void engine_unref(mts_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int left = --e->refs;
    pthread_mutex_unlock(&e->mu);
    if (left == 0) engine_destroy(e);
}

int mts_engine_create(uint32_t threads, uint64_t max_bytes_in_flight, mts_engine **out, char *errbuf,
                      size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!errbuf) { errbuf = scratch; errlen = sizeof scratch; }
    if (errlen) errbuf[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (threads < 1 || threads > MTS_MAX_THREADS)
        return mts_msg(errbuf, errlen, MTS_E_ARG, "engine: threads %u is not in 1..%u", threads, MTS_MAX_THREADS);
    if (max_bytes_in_flight < MTS_MIN_BYTES_IN_FLIGHT)
        return mts_msg(errbuf, errlen, MTS_E_ARG, "engine: max_bytes_in_flight %llu is below the minimum %u",
                       (unsigned long long)max_bytes_in_flight, MTS_MIN_BYTES_IN_FLIGHT);
    mts_engine *e = mts_calloc(1, sizeof *e);
    if (!e) return mts_msg(errbuf, errlen, MTS_E_NOMEM, "engine: allocate");
    e->workers = mts_calloc(threads, sizeof *e->workers);
    e->threads = mts_calloc(threads, sizeof *e->threads);
    if (!e->workers || !e->threads) {
        mts_free(e->workers);
        mts_free(e->threads);
        mts_free(e);
        return mts_msg(errbuf, errlen, MTS_E_NOMEM, "engine: allocate %u workers", threads);
    }
    e->nthreads = threads;
    e->cpus = MTS_MIN(threads, mts_cpu_count());
    e->cap = max_bytes_in_flight;
    e->refs = 1;
    pthread_mutex_init(&e->mu, NULL);
    for (unsigned i = 0; i < threads; i++) {
        e->workers[i].e = e;
        e->workers[i].index = i;
        pthread_cond_init(&e->workers[i].cv, NULL);
    }
    for (unsigned i = 0; i < threads; i++) {
        int err = pthread_create(&e->threads[i], NULL, worker_main, &e->workers[i]);
        if (err) {
            engine_destroy(e);
            return mts_msg(errbuf, errlen, -err, "engine: start worker thread %u of %u", i + 1, threads);
        }
        e->started++;
    }
    *out = e;
    return 0;
}

void mts_engine_free(mts_engine *e)
{
    if (e) engine_unref(e);
}

int mts_engine_get_stats(const mts_engine *ce, mts_engine_stats *st)
{
    if (!ce || !st) return MTS_E_ARG;
    mts_engine *e = (mts_engine *)(uintptr_t)ce; /* the lock inside is not const */
    pthread_mutex_lock(&e->mu);
    *st = (mts_engine_stats){e->nthreads, e->busy,    e->nclients, e->jobs,     e->busy_ns, e->held,
                             e->peak,     e->cap,     e->wait_ns,  e->reclaims, e->cached,  e->cpus};
    pthread_mutex_unlock(&e->mu);
    return 0;
}

uint64_t eng_cap(const mts_engine *e) { return e->cap; }
unsigned eng_threads(const mts_engine *e) { return e->nthreads; }
unsigned eng_parallelism(const mts_engine *e) { return e->cpus; }

uint32_t eng_clients(mts_engine *e)
{
    pthread_mutex_lock(&e->mu);
    uint32_t n = e->nclients;
    pthread_mutex_unlock(&e->mu);
    return n;
}

int eng_client_init(eng_client *c, mts_engine *e, const eng_client_ops *ops, void *ctx)
{
    memset(c, 0, sizeof *c);
    c->e = e;
    c->ops = ops;
    c->ctx = ctx;
    int err = pthread_cond_init(&c->cv, NULL);
    if (err) return -err;
    pthread_mutex_lock(&e->mu);
    c->next = e->clients;
    if (e->clients) e->clients->prev = c;
    e->clients = c;
    e->nclients++;
    e->refs++;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

void eng_client_destroy(eng_client *c)
{
    mts_engine *e = c->e;
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    while (c->pending || c->reclaiming) pthread_cond_wait(&c->cv, &e->mu);
    assert(c->held == 0);
    e->held -= c->held; /* keeps the engine whole even if a client leaked */
    if (c->prev) c->prev->next = c->next;
    else e->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    e->nclients--;
    wake_head(e);
    pthread_mutex_unlock(&e->mu);
    pthread_cond_destroy(&c->cv);
    c->e = NULL;
    engine_unref(e);
}

/* ---- jobs ------------------------------------------------------------------- */

/* wake: 0 none, 1 a worker where a CPU is free, 2 one where a CPU is free
 * besides the caller's. */
static void submit(eng_client *c, eng_job *j, int wake, int urgent)
{
    mts_engine *e = c->e;
    j->client = c;
    j->done = 0;
    j->urgent = urgent;
    j->next_run = j->next_order = NULL;
    pthread_mutex_lock(&e->mu);
    link_run(e, j);
    if (c->order_tail) c->order_tail->next_order = j;
    else c->order_head = j;
    c->order_tail = j;
    c->pending++;
    e->pending++;
    if (wake) wake_worker(e, wake == 2 && e->cpus > 1);
    pthread_mutex_unlock(&e->mu);
}

void eng_submit(eng_client *c, eng_job *j) { submit(c, j, 1, 0); }
void eng_submit_quiet(eng_client *c, eng_job *j) { submit(c, j, 0, 0); }
void eng_submit_urgent(eng_client *c, eng_job *j) { submit(c, j, 1, 1); }
void eng_submit_helped(eng_client *c, eng_job *j) { submit(c, j, 2, 0); }

/* With mu held: takes `want` (or, if NULL, c's first job) if no worker has
 * taken it yet. */
static eng_job *take_own(mts_engine *e, eng_client *c, const eng_job *want)
{
    eng_job *prev = NULL;
    for (eng_job *j = e->run_head; j; prev = j, j = j->next_run)
        if (j->client == c && (!want || j == want)) return unlink_run(e, prev, j);
    return NULL;
}

/* With mu held: a context for a caller's thread that runs jobs itself. */
static eng_worker *get_helper(mts_engine *e)
{
    eng_worker *h = e->helpers;
    if (h) {
        e->helpers = h->next;
        return h;
    }
    h = mts_calloc(1, sizeof *h);
    if (h) *h = (eng_worker){.e = e, .index = e->nthreads + e->nhelpers++};
    return h;
}

/* With mu held: runs c's queued job j on the calling thread (mu is released
 * meanwhile), then drains what is ready; 0 if there is no helper context
 * (j is queued again). helper: computed()'s. */
static int run_here(mts_engine *e, eng_client *c, eng_job *j, int helper)
{
    eng_worker *h = get_helper(e);
    if (!h) {
        link_run(e, j);
        return 0;
    }
    e->computing += c->ops->cpu_bound;
    pthread_mutex_unlock(&e->mu);
    c->ops->run(c->ctx, j, h); /* the caller's time: not in the workers' busy stats */
    pthread_mutex_lock(&e->mu);
    computed(e, c, helper);
    h->next = e->helpers;
    e->helpers = h;
    j->done = 1;
    e->jobs++;
    drain_ready(e, c);
    return 1;
}

void eng_wait_idle(eng_client *c)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    while (c->pending) {
        /* Rather than sleep while its own jobs wait for a worker, the caller
         * runs them where a worker is idle: a small writer's last job costs
         * no thread hand-off. With every worker busy, or as many computing
         * as may, it would be one thread more than the CPUs, so it waits. */
        int idle = !e->started || (e->busy < e->started && cpu_free(e, c));
        eng_job *j = idle ? take_own(e, c, NULL) : NULL;
        if (j && run_here(e, c, j, 2)) continue;
        pay_owed(e); /* it stops helping, for now */
        pthread_cond_wait(&c->cv, &e->mu);
    }
    pay_owed(e); /* and for good: other clients' jobs may wait for them */
    pthread_mutex_unlock(&e->mu);
}

int eng_run_queued(eng_client *c, const eng_job *job)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    eng_job *j = take_own(e, c, job);
    int ran = j && run_here(e, c, j, 1);
    pthread_mutex_unlock(&e->mu);
    return ran;
}

void eng_wait_reclaims(eng_client *c)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    while (c->reclaiming) pthread_cond_wait(&c->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

/* ---- budget ----------------------------------------------------------------- */

static void take(mts_engine *e, eng_client *c, uint64_t n)
{
    e->held += n;
    c->held += n;
    if (e->held > e->peak) e->peak = e->held;
    if (c->held > c->peak) c->peak = c->held;
}

/* With mu held: the client with the most reclaimable bytes, or NULL. */
static eng_client *pick_victim(mts_engine *e)
{
    eng_client *best = NULL;
    for (eng_client *c = e->clients; c; c = c->next)
        if (c->reclaimable && c->ops->reclaim && (!best || c->reclaimable > best->reclaimable)) best = c;
    return best;
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec += (time_t)(t / 1000000000u);
    ts.tv_nsec = (long)(t % 1000000000u);
    pthread_cond_timedwait(cv, mu, &ts);
}

/* With mu held: frees kept buffers other than `keep`, until at least `need`
 * bytes of budget are back (all of them if they hold less), and gives their
 * budget back. The frees run without the lock. */
static void cache_drop(mts_engine *e, uint64_t need, const void *keep)
{
    void *drop[ENG_CACHE_MAX];
    unsigned n = 0, i = 0;
    uint64_t freed = 0;
    while (i < e->ncache && freed < need) {
        if (e->cache[i].p == keep) {
            i++;
            continue;
        }
        drop[n++] = e->cache[i].p;
        freed += e->cache[i].size;
        e->cache[i] = e->cache[--e->ncache]; /* order among the rest does not matter much */
    }
    e->cached -= freed;
    e->held -= freed;
    pthread_mutex_unlock(&e->mu);
    for (unsigned k = 0; k < n; k++) mts_free(drop[k]);
    pthread_mutex_lock(&e->mu);
}

/* With mu held: the index of a kept buffer of exactly `size`, or -1. */
static int cache_find(const mts_engine *e, size_t size)
{
    for (unsigned i = 0; size && i < e->ncache; i++)
        if (e->cache[i].size == size) return (int)i;
    return -1;
}

/* With mu held: removes kept buffer i and gives its budget back. */
static void *cache_remove_at(mts_engine *e, int i)
{
    void *p = e->cache[i].p;
    size_t size = e->cache[i].size;
    e->cache[i] = e->cache[--e->ncache];
    e->cached -= size;
    e->held -= size;
    return p;
}

/* With mu held: removes a kept buffer of exactly `size` and gives its
 * budget back; NULL if there is none. */
static void *cache_remove(mts_engine *e, size_t size)
{
    int i = cache_find(e, size);
    return i < 0 ? NULL : cache_remove_at(e, i);
}

void *eng_cache_take(eng_client *c, size_t size)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    void *p = cache_remove(e, size);
    if (p) take(e, c, size); /* the charge moves to the client */
    pthread_mutex_unlock(&e->mu);
    return p;
}

void *eng_cache_take_paid(eng_client *c, size_t size)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    void *p = cache_remove(e, size);
    if (p) wake_head(e); /* the caller paid already: the buffer's charge is free */
    pthread_mutex_unlock(&e->mu);
    return p;
}

int eng_cache_give(eng_client *c, void *p, size_t size)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    /* While someone waits, only the buffer the first waiter asked for: it
     * takes it where it would otherwise have allocated one. */
    int kept = e->ncache < ENG_CACHE_MAX && size <= c->held && (!e->wait_head || e->wait_head->want == size);
    if (kept) {
        e->cache[e->ncache].p = p;
        e->cache[e->ncache++].size = size;
        e->cached += size;
        c->held -= size; /* e->held keeps it */
        wake_head(e);
    }
    pthread_mutex_unlock(&e->mu);
    return kept;
}

/* With mu held: whether n bytes fit now, a kept buffer of `want` (if any,
 * its index in *k, else -1) counted as free; if so, that buffer is taken out
 * of the keep into *buf. */
static int fits(mts_engine *e, uint64_t n, size_t want, void **buf, int *k)
{
    *k = cache_find(e, want);
    if (e->held - (*k < 0 ? 0 : want) + n > e->cap) return 0;
    if (*k >= 0) *buf = cache_remove_at(e, *k);
    return 1;
}

static int acquire(eng_client *c, uint64_t n, size_t want, void **buf)
{
    mts_engine *e = c->e;
    void *unused;
    if (!buf) buf = &unused;
    *buf = NULL;
    if (want > n) want = 0;
    if (n > e->cap) return MTS_E_OVERFLOW;
    pthread_mutex_lock(&e->mu);
    if (c->aborted) {
        pthread_mutex_unlock(&e->mu);
        return MTS_E_ABORTED;
    }
    int k;
    if (!e->wait_head && fits(e, n, want, buf, &k)) {
        take(e, c, n);
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    waiter me = {NULL, c, want, PTHREAD_COND_INITIALIZER};
    if (e->wait_tail) e->wait_tail->next = &me;
    else e->wait_head = &me;
    e->wait_tail = &me;
    uint64_t t0 = mts_now_ns();
    int rc = 0;
    for (;;) {
        if (c->aborted) {
            rc = MTS_E_ABORTED;
            break;
        }
        /* A caller that will wait may have held back wake-ups for the jobs
         * it queued (eng_submit_helped), meaning to run them itself. */
        pay_owed(e);
        if (e->wait_head != &me) {
            pthread_cond_wait(&me.cv, &e->mu);
            continue;
        }
        if (fits(e, n, want, buf, &k)) break;
        if (e->ncache > (k >= 0)) { /* kept buffers but the one fits() counted go first, as many as needed */
            cache_drop(e, e->held - (k < 0 ? 0 : want) + n - e->cap, k < 0 ? NULL : e->cache[k].p);
            continue;
        }
        eng_client *v = e->pending == 0 ? pick_victim(e) : NULL;
        if (!v) {
            pthread_cond_wait(&me.cv, &e->mu);
            continue;
        }
        /* Nothing in flight will free bytes: make the largest holder give back. */
        uint64_t held0 = e->held, rec0 = v->reclaimable;
        v->reclaiming++;
        e->reclaims++;
        pthread_mutex_unlock(&e->mu);
        v->ops->reclaim(v->ctx);
        pthread_mutex_lock(&e->mu);
        if (--v->reclaiming == 0) pthread_cond_broadcast(&v->cv);
        if (e->held == held0 && v->reclaimable == rec0) timed_wait(&me.cv, &e->mu, RECLAIM_RETRY_NS);
    }
    /* Leave the queue; the next waiter may be the new head. */
    waiter **pp = &e->wait_head;
    waiter *prev = NULL;
    while (*pp != &me) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = me.next;
    if (e->wait_tail == &me) e->wait_tail = prev;
    if (!rc) take(e, c, n);
    uint64_t waited = mts_now_ns() - t0;
    c->wait_ns += waited;
    e->wait_ns += waited;
    wake_head(e);
    pthread_mutex_unlock(&e->mu);
    pthread_cond_destroy(&me.cv);
    return rc;
}

int eng_acquire(eng_client *c, uint64_t n)
{
    return acquire(c, n, 0, NULL);
}

int eng_acquire_buffer(eng_client *c, uint64_t n, size_t size, void **buf)
{
    return acquire(c, n, size, buf);
}

int eng_try_acquire(eng_client *c, uint64_t n)
{
    mts_engine *e = c->e;
    if (n > e->cap) return MTS_E_OVERFLOW;
    pthread_mutex_lock(&e->mu);
    if (!c->aborted && !e->wait_head && e->held + n > e->cap && e->ncache) cache_drop(e, e->held + n - e->cap, NULL);
    int rc = c->aborted ? MTS_E_ABORTED : !e->wait_head && e->held + n <= e->cap ? 0 : 1;
    if (rc == 0) take(e, c, n);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void eng_release(eng_client *c, uint64_t n)
{
    if (!n) return;
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    assert(n <= c->held && n <= e->held);
    c->held -= n;
    e->held -= n;
    wake_head(e);
    pthread_mutex_unlock(&e->mu);
}

int eng_note_reclaimable(eng_client *c, int64_t delta)
{
    if (!delta) return 0; /* also after the client is gone (a discard of nothing) */
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    assert(delta >= 0 || (uint64_t)-delta <= c->reclaimable);
    c->reclaimable = (uint64_t)((int64_t)c->reclaimable + delta);
    int waiting = e->wait_head != NULL;
    pthread_mutex_unlock(&e->mu);
    return waiting;
}

void eng_client_abort(eng_client *c)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    c->aborted = 1;
    for (waiter *w = e->wait_head; w; w = w->next)
        if (w->c == c) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&e->mu);
}

void eng_client_stats_get(eng_client *c, eng_client_stats *st)
{
    mts_engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    *st = (eng_client_stats){c->held, c->peak, c->wait_ns};
    pthread_mutex_unlock(&e->mu);
}

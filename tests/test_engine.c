/* The engine on its own: jobs of several clients interleave on the workers,
 * each client's drain order is its submission order; the budget is hard,
 * first come first served, wakes waiters on abort, and reclaims from the
 * largest holder when nothing is in flight. */
#include <pthread.h>

#include "engine.h"
#include "internal.h"
#include "testutil.h"

#define CLIENTS 6
#define JOBS 300

typedef struct tjob {
    eng_job base;
    uint64_t seq;
    unsigned delay_us;
    int ran;
} tjob;

typedef struct tclient {
    eng_client c;
    uint64_t drained_next;
    int order_ok, ran_before_drain;
    uint64_t reclaimable;  /* what reclaim() gives back */
    int reclaimed;
} tclient;

static int workers_seen[64];

static void run(void *ctx, eng_job *j, eng_worker *w)
{
    (void)ctx;
    tjob *t = (tjob *)j;
    usleep(t->delay_us);
    t->ran = 1;
    if (w->index < 64) __atomic_store_n(&workers_seen[w->index], 1, __ATOMIC_RELAXED);
}

static void drain(void *ctx, eng_job *j)
{
    tclient *tc = ctx;
    tjob *t = (tjob *)j;
    if (t->seq != tc->drained_next) tc->order_ok = 0;
    if (!t->ran) tc->ran_before_drain = 0;
    tc->drained_next++;
    free(t);
}

static void reclaim(void *ctx)
{
    tclient *tc = ctx;
    if (!tc->reclaimable) return;
    eng_note_reclaimable(&tc->c, -(int64_t)tc->reclaimable);
    eng_release(&tc->c, tc->reclaimable);
    tc->reclaimable = 0;
    tc->reclaimed++;
}

static const eng_client_ops ops = {run, drain, reclaim};

typedef struct submitter {
    tclient *tc;
    uint64_t seed;
} submitter;

static void *submit_main(void *arg)
{
    submitter *s = arg;
    for (uint64_t i = 0; i < JOBS; i++) {
        tjob *t = calloc(1, sizeof *t);
        t->seq = i;
        t->delay_us = (unsigned)rng_below(&s->seed, 200); /* finish out of order */
        eng_submit(&s->tc->c, &t->base);
        if (i == JOBS / 2) {
            eng_wait_idle(&s->tc->c);
            CHECK(s->tc->drained_next == JOBS / 2 + 1);
        }
    }
    eng_wait_idle(&s->tc->c);
    return NULL;
}

static void test_order(void)
{
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        mts_engine *e;
        CHECK_RC(mts_engine_create(threads, 1 << 20, &e, NULL, 0));
        tclient tc[CLIENTS];
        submitter sub[CLIENTS];
        pthread_t th[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            tc[i] = (tclient){.order_ok = 1, .ran_before_drain = 1};
            CHECK_RC(eng_client_init(&tc[i].c, e, &ops, &tc[i]));
            sub[i] = (submitter){&tc[i], test_seed + (uint64_t)i};
            pthread_create(&th[i], NULL, submit_main, &sub[i]);
        }
        for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
        mts_engine_stats st;
        CHECK_RC(mts_engine_get_stats(e, &st));
        CHECK(st.jobs == (uint64_t)CLIENTS * JOBS && st.clients == CLIENTS && st.threads == threads);
        for (int i = 0; i < CLIENTS; i++) {
            CHECK(tc[i].drained_next == JOBS && tc[i].order_ok && tc[i].ran_before_drain);
            eng_client_destroy(&tc[i].c);
        }
        mts_engine_free(e);
    }
    CHECK(workers_seen[0] && workers_seen[3]);
}

typedef struct acq {
    tclient *tc;
    uint64_t n;
    int rc, done;
} acq;

static void *acquire_main(void *arg)
{
    acq *a = arg;
    a->rc = eng_acquire(&a->tc->c, a->n);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int is_done(acq *a) { return __atomic_load_n(&a->done, __ATOMIC_ACQUIRE); }

static void test_budget(void)
{
    mts_engine *e;
    char err[256];
    CHECK(mts_engine_create(0, 1 << 20, &e, err, sizeof err) == MTS_E_ARG && strstr(err, "threads"));
    CHECK(mts_engine_create(2, 1000, &e, err, sizeof err) == MTS_E_ARG && strstr(err, "max_bytes_in_flight"));
    CHECK_RC(mts_engine_create(1, 100 << 10, &e, NULL, 0));
    uint64_t cap = 100 << 10;
    tclient a = {0}, b = {0};
    CHECK_RC(eng_client_init(&a.c, e, &ops, &a));
    CHECK_RC(eng_client_init(&b.c, e, &ops, &b));
    CHECK(eng_acquire(&a.c, cap + 1) == MTS_E_OVERFLOW); /* never admitted, even when empty */
    CHECK(eng_acquire(&a.c, 60 << 10) == 0);
    CHECK(eng_try_acquire(&b.c, 50 << 10) == 1);
    CHECK(eng_try_acquire(&b.c, 40 << 10) == 0);

    /* First come, first served: a large waiter is not overtaken by a small one. */
    acq big = {&b, 70 << 10, 0, 0}, small = {&a, 10 << 10, 0, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, acquire_main, &big);
    usleep(20000);
    pthread_create(&t2, NULL, acquire_main, &small);
    usleep(20000);
    CHECK(!is_done(&big) && !is_done(&small));
    eng_release(&b.c, 40 << 10); /* 40 free: small would fit, big would not */
    usleep(20000);
    CHECK(!is_done(&small));
    eng_release(&a.c, 60 << 10); /* 100 free: big, then small */
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(big.rc == 0 && small.rc == 0);
    mts_engine_stats st;
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (80u << 10) && st.peak_bytes_held <= cap && st.budget_wait_ns > 0);

    /* Abort wakes the waiter; later acquisitions fail. */
    acq w = {&a, 50 << 10, 0, 0};
    pthread_create(&t1, NULL, acquire_main, &w);
    usleep(20000);
    CHECK(!is_done(&w));
    eng_client_abort(&a.c);
    pthread_join(t1, NULL);
    CHECK(w.rc == MTS_E_ABORTED && eng_acquire(&a.c, 1) == MTS_E_ABORTED);

    /* Reclaim: b's 70 KiB are reclaimable; a fresh client waiting for 50 KiB
     * makes b give them back (nothing is in flight). */
    eng_release(&a.c, 10 << 10);
    b.reclaimable = 70 << 10;
    eng_note_reclaimable(&b.c, (int64_t)b.reclaimable);
    tclient c = {0};
    CHECK_RC(eng_client_init(&c.c, e, &ops, &c));
    CHECK(eng_acquire(&c.c, 50 << 10) == 0);
    CHECK(b.reclaimed == 1);
    eng_release(&c.c, 50 << 10);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == 0 && st.reclaims == 1);

    /* Kept buffers: given with their charge, taken back only at their exact
     * size, never while someone waits, and dropped for a waiter that does
     * not fit. */
    CHECK_RC(eng_acquire(&c.c, 60 << 10));
    void *buf = malloc(60 << 10);
    CHECK(eng_cache_give(&c.c, buf, 60 << 10) == 1);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (60u << 10) && st.bytes_cached == (60u << 10));
    CHECK(eng_cache_take(&c.c, 30 << 10) == NULL);
    CHECK(eng_cache_take(&c.c, 60 << 10) == buf);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (60u << 10) && st.bytes_cached == 0);
    CHECK(eng_cache_give(&c.c, buf, 60 << 10) == 1);
    CHECK(eng_acquire(&b.c, 90 << 10) == 0); /* fits only without the kept buffer */
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (90u << 10) && st.bytes_cached == 0);
    /* Only as many kept buffers are freed as the waiter needs. */
    eng_release(&b.c, 90 << 10);
    CHECK_RC(eng_acquire(&c.c, 60 << 10));
    void *k1 = malloc(30 << 10), *k2 = malloc(30 << 10);
    CHECK(eng_cache_give(&c.c, k1, 30 << 10) == 1 && eng_cache_give(&c.c, k2, 30 << 10) == 1);
    CHECK_RC(eng_acquire(&b.c, 60 << 10)); /* 40 KiB free: one kept buffer must go */
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (90u << 10) && st.bytes_cached == (30u << 10));
    void *k = eng_cache_take(&c.c, 30 << 10);
    CHECK(k == k1 || k == k2);
    free(k);
    eng_release(&c.c, 30 << 10);
    CHECK_RC(eng_acquire(&b.c, 30 << 10)); /* b holds 90 KiB again, as before */
    void *other = malloc(16);
    CHECK(eng_cache_give(&b.c, other, 16) == 1);
    CHECK(eng_cache_take(&c.c, 16) == other);
    free(other);
    eng_release(&c.c, 16);
    eng_release(&b.c, (90 << 10) - 16);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == 0);

    /* The engine lives until its last client is gone. */
    mts_engine_free(e);
    eng_client_destroy(&a.c);
    eng_client_destroy(&b.c);
    eng_client_destroy(&c.c);
}

int main(void)
{
    test_init_seed("test_engine");
    test_order();
    test_budget();
    TEST_DONE("test_engine");
}

#include <pthread.h>
#include <time.h>

#include "internal.h"
#include "pool.h"
#include "testutil.h"

typedef struct tjob {
    pool_job base;
    uint64_t seq;
    unsigned delay_us;
    int ran;
} tjob;

static uint64_t drained_next;
static int order_ok = 1;
static int ran_before_drain = 1;
static int workers_seen[8];

static void run(void *ctx, pool_job *j, unsigned worker)
{
    (void)ctx;
    tjob *t = (tjob *)j;
    usleep(t->delay_us);
    t->ran = 1;
    __atomic_store_n(&workers_seen[worker], 1, __ATOMIC_RELAXED);
}

static void drain(void *ctx, pool_job *j)
{
    (void)ctx;
    tjob *t = (tjob *)j;
    if (t->seq != drained_next) order_ok = 0;
    if (!t->ran) ran_before_drain = 0;
    drained_next++;
    free(t);
}

int main(void)
{
    test_init_seed("test_pool");
    uint64_t s = test_seed;
    for (unsigned nworkers = 1; nworkers <= 4; nworkers++) {
        pool p;
        drained_next = 0;
        CHECK_RC(pool_init(&p, nworkers, 2 + (unsigned)rng_below(&s, 3), run, drain, NULL));
        const uint64_t n = 400;
        for (uint64_t i = 0; i < n; i++) {
            tjob *t = calloc(1, sizeof *t);
            t->seq = i;
            t->delay_us = (unsigned)rng_below(&s, 300); /* finish out of order */
            pool_submit(&p, &t->base);
            if (i == n / 2) {
                pool_wait_idle(&p);
                CHECK(drained_next == n / 2 + 1);
            }
        }
        pool_destroy(&p); /* drains everything before the threads stop */
        CHECK(drained_next == n);
        CHECK(order_ok && ran_before_drain);
    }
    CHECK(workers_seen[0] && workers_seen[3]);
    TEST_DONE("test_pool");
}

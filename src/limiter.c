#include <assert.h>

#include "internal.h"
#include "limiter.h"

int limiter_init(limiter *l, uint64_t cap)
{
    l->cap = cap;
    l->held = l->peak = l->wait_ns = 0;
    l->shutdown = 0;
    if (pthread_mutex_init(&l->mu, NULL)) return MTS_E_NOMEM;
    if (pthread_cond_init(&l->cv, NULL)) {
        pthread_mutex_destroy(&l->mu);
        return MTS_E_NOMEM;
    }
    return 0;
}

void limiter_destroy(limiter *l)
{
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}

static void take(limiter *l, uint64_t n)
{
    l->held += n;
    if (l->held > l->peak) l->peak = l->held;
}

int limiter_acquire(limiter *l, uint64_t n)
{
    if (n > l->cap) return MTS_E_OVERFLOW;
    pthread_mutex_lock(&l->mu);
    uint64_t t0 = 0;
    while (!l->shutdown && l->held + n > l->cap) {
        if (!t0) t0 = mts_now_ns();
        pthread_cond_wait(&l->cv, &l->mu);
    }
    if (t0) l->wait_ns += mts_now_ns() - t0;
    int rc = l->shutdown ? MTS_E_ABORTED : 0;
    if (!rc) take(l, n);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int limiter_try_acquire(limiter *l, uint64_t n)
{
    if (n > l->cap) return MTS_E_OVERFLOW;
    pthread_mutex_lock(&l->mu);
    int rc = l->shutdown ? MTS_E_ABORTED : (l->held + n > l->cap ? 1 : 0);
    if (rc == 0) take(l, n);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void limiter_release(limiter *l, uint64_t n)
{
    if (!n) return;
    pthread_mutex_lock(&l->mu);
    assert(n <= l->held);
    l->held -= n;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void limiter_shutdown(limiter *l)
{
    pthread_mutex_lock(&l->mu);
    l->shutdown = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

#define LIMITER_READ(field)                                                              \
    uint64_t limiter_##field(limiter *l)                                                 \
    {                                                                                    \
        pthread_mutex_lock(&l->mu);                                                      \
        uint64_t v = l->field;                                                           \
        pthread_mutex_unlock(&l->mu);                                                    \
        return v;                                                                        \
    }
LIMITER_READ(held)
LIMITER_READ(peak)
LIMITER_READ(wait_ns)

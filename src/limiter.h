/* The bytes-in-flight budget: a hard cap on the bytes a writer holds.
 * acquire() blocks until the bytes fit; a request larger than the cap is an
 * error, never admitted. shutdown() wakes every waiter with MTS_E_ABORTED. */
#ifndef MTS_LIMITER_H
#define MTS_LIMITER_H

#include <pthread.h>
#include <stdint.h>

typedef struct limiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t cap;       /* const after init */
    uint64_t held;      /* guarded by mu */
    uint64_t peak;      /* guarded by mu */
    uint64_t wait_ns;   /* guarded by mu: time spent blocked in acquire */
    int shutdown;       /* guarded by mu */
} limiter;

int limiter_init(limiter *l, uint64_t cap);
void limiter_destroy(limiter *l);
/* Blocks until n bytes fit. MTS_E_OVERFLOW if n > cap; MTS_E_ABORTED after
 * shutdown. */
int limiter_acquire(limiter *l, uint64_t n);
/* 0 if acquired now, 1 if it would block; errors as for acquire. */
int limiter_try_acquire(limiter *l, uint64_t n);
void limiter_release(limiter *l, uint64_t n);
void limiter_shutdown(limiter *l);
uint64_t limiter_held(limiter *l);
uint64_t limiter_peak(limiter *l);
uint64_t limiter_wait_ns(limiter *l);

#endif

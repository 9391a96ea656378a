#include <pthread.h>
#include <time.h>

#include "limiter.h"
#include "testutil.h"

static limiter lim;
static int got;

static void *waiter(void *arg)
{
    int rc = limiter_acquire(&lim, (uint64_t)(uintptr_t)arg);
    __atomic_store_n(&got, rc == 0 ? 1 : rc, __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    test_init_seed("test_limiter");
    CHECK_RC(limiter_init(&lim, 100));
    CHECK(limiter_acquire(&lim, 60) == 0);
    CHECK(limiter_try_acquire(&lim, 50) == 1); /* would exceed the cap */
    CHECK(limiter_try_acquire(&lim, 40) == 0);
    CHECK(limiter_held(&lim) == 100 && limiter_peak(&lim) == 100);
    CHECK(limiter_acquire(&lim, 101) == MTS_E_OVERFLOW); /* never admitted, even when empty */
    CHECK(limiter_try_acquire(&lim, 101) == MTS_E_OVERFLOW);

    /* A blocked acquire proceeds once enough is released, not before. */
    pthread_t t;
    pthread_create(&t, NULL, waiter, (void *)(uintptr_t)30);
    usleep(50000);
    CHECK(__atomic_load_n(&got, __ATOMIC_ACQUIRE) == 0);
    limiter_release(&lim, 20);
    usleep(50000);
    CHECK(__atomic_load_n(&got, __ATOMIC_ACQUIRE) == 0); /* 80 + 30 > 100 */
    limiter_release(&lim, 20);
    pthread_join(t, NULL);
    CHECK(got == 1 && limiter_held(&lim) == 90);
    CHECK(limiter_wait_ns(&lim) > 0);

    /* Shutdown wakes a waiter with MTS_E_ABORTED and refuses new requests. */
    got = 0;
    pthread_create(&t, NULL, waiter, (void *)(uintptr_t)50);
    usleep(50000);
    limiter_shutdown(&lim);
    pthread_join(t, NULL);
    CHECK(got == MTS_E_ABORTED);
    CHECK(limiter_acquire(&lim, 1) == MTS_E_ABORTED);
    limiter_release(&lim, 90);
    CHECK(limiter_held(&lim) == 0);
    limiter_destroy(&lim);
    TEST_DONE("test_limiter");
}

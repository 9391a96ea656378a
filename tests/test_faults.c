/* Injected failures: the n-th open, write, pwrite, fsync, rename or
 * copy_file_range of a run fails, for every n the run reaches, and so does
 * the k-th allocation for every k. Each run must fail with the injected code
 * (errno kept) or succeed, release all of its budget, and leave neither a
 * temp file nor a committed output behind. */
#include <execinfo.h>
#include <time.h>

#include "fileio.h"
#include "internal.h"
#include "testutil.h"

static char *dir;
static unsigned char *data;
static uint64_t offs[65];

/* The workload: streaming with several batches, a budget that forces spills,
 * fsync at commit; or the baseline. Returns the first error. */
static int run_task(int scenario, int *committed)
{
    mts_writer_options o = test_options(dir, 64);
    o.fsync = 1;
    o.checksum = MTS_CHECKSUM_CRC32C;
    o.max_bytes_in_flight = 256 << 10;
    o.job_size = 16 << 10;
    o.strategy = scenario == 2 ? MTS_STRATEGY_BASELINE : MTS_STRATEGY_STREAMING;
    if (scenario == 1) o.codec = MTS_CODEC_ZSTD;
    mts_writer *w = NULL;
    char err[256];
    *committed = 0;
    int rc = mts_writer_create(&o, &w, err, sizeof err);
    if (rc < 0) {
        CHECK(w == NULL);
        return rc;
    }
    /* The second batch, out of partition order, goes in without waiting:
     * given back once if taken, never if the call failed. */
    int async_rc = 1;
    uint32_t given_back = 0;
    for (int b = 0; b < 3 && rc == 0; b++)
        rc = b == 1 ? (async_rc = mts_writer_add_batch_async(w, data, offs, test_count_given_back, &given_back))
                    : mts_writer_add_batch(w, data, offs);
    for (uint32_t i = 0; i < 300 && rc == 0; i++) rc = mts_writer_append(w, (i * 37) % 64, data + i, 100);
    if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
    *committed = rc == 0;
    if (rc < 0) {
        /* failed: nothing held, nothing on disk, the same code again */
        CHECK(writer_bytes_held(w) == 0);
        CHECK(mts_writer_append(w, 0, "x", 1) == rc);
        CHECK(strlen(mts_writer_error(w)) > 0);
    }
    mts_writer_free(w);
    CHECK(__atomic_load_n(&given_back, __ATOMIC_RELAXED) == (async_rc == 0 ? 1u : 0u));
    return rc;
}

static void expect_clean(int rc, int committed, int want)
{
    if (committed) {
        CHECK(dir_count(dir) == 3);
        rm_rf(dir);
        mkdir(dir, 0755);
        return;
    }
    if (rc != want) {
        fprintf(stderr, "expected %d (%s), got %d (%s)\n", want, mts_strerror(want), rc, mts_strerror(rc));
        CHECK(0);
    }
    if (dir_count(dir) != 0) {
        system("ls -la /tmp/mts-faults-* 1>&2");
        CHECK(dir_count(dir) == 0);
    }
}

/* Fails the k-th allocation from the moment it is armed. */
static uint64_t alloc_left;
/* 1 if this allocation is the k-th since arming. */
static int alloc_fails(void)
{
    uint64_t left = __atomic_load_n(&alloc_left, __ATOMIC_ACQUIRE);
    while (left)
        if (__atomic_compare_exchange_n(&alloc_left, &left, left - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        {
            if (left != 1) return 0;
            if (getenv("MTS_TEST_VERBOSE")) { /* where the failing allocation was made */
                void *bt[12];
                backtrace_symbols_fd(bt, backtrace(bt, 12), 2);
            }
            return 1;
        }
    return 0;
}
static void *failing_malloc(size_t n) { return alloc_fails() ? NULL : malloc(n); }
static void *failing_realloc(void *p, size_t n) { return alloc_fails() ? NULL : realloc(p, n); }

int main(void)
{
    test_init_seed("test_faults");
    uint64_t s = test_seed;
    dir = test_tmpdir("faults");
    data = malloc(64 * 3000 + 1000);
    offs[0] = 0;
    for (int p = 0; p < 64; p++) offs[p + 1] = offs[p] + 1000 + rng_below(&s, 2000);
    for (uint64_t i = 0; i < offs[64] + 300; i++) data[i] = (unsigned char)(i / 13 + rng_below(&s, 4));

    static const char *names[] = {"write", "pwrite", "fsync", "rename", "copy_file_range", "open"};
    const int errs[] = {ENOSPC, EIO, EIO, EXDEV, EIO, EACCES};
    int injected = 0;
    for (int scenario = 0; scenario < 3; scenario++) {
        for (int force = 0; force < 2; force++) { /* both copy paths */
            fio_force_copy_fallback(force);
            for (int kind = 0; kind < MTS_FAULT_KINDS; kind++) {
                int committed;
                mts__fault_arm(kind, 0, 0);
                CHECK_RC(run_task(scenario, &committed));
                expect_clean(0, committed, 0);
                uint64_t calls = mts__fault_calls(kind);
                uint64_t unreached = 0;
                for (uint64_t k = 1; k <= calls; k++) {
                    mts__fault_arm(kind, k, errs[kind]);
                    int rc = run_task(scenario, &committed);
                    expect_clean(rc, committed, -errs[kind]);
                    if (committed) {
                        /* How many writes the assembly takes depends on how many
                         * of the last jobs drain after the input has ended: a
                         * run that committed must have made fewer calls than k. */
                        CHECK(mts__fault_calls(kind) < k);
                        unreached++;
                    } else {
                        injected++;
                    }
                }
                CHECK(calls == 0 || unreached < calls);
                mts__fault_arm(kind, 0, 0);
                printf("scenario %d, %s copy: %s: %llu calls, each failure clean (%llu not reached in their run)\n",
                       scenario, force ? "pread/pwrite" : "copy_file_range", names[kind], (unsigned long long)calls,
                       (unsigned long long)unreached);
            }
        }
    }
    fio_force_copy_fallback(0);

    /* Out of descriptors while opening a baseline partition file: it closes
     * the files it keeps open and retries, so the run still commits. (Opens 1
     * to 3 are the directory lock, its listing for the clean-up of dead
     * attempts and the data file, at create.) */
    for (uint64_t k = 4; k <= 8; k++) {
        int committed;
        mts__fault_arm(MTS_FAULT_OPEN, k, EMFILE);
        CHECK_RC(run_task(2, &committed));
        expect_clean(0, committed, 0);
    }
    mts__fault_arm(MTS_FAULT_OPEN, 0, 0);

    /* Allocation-failure torture: fail the k-th allocation for every k until
     * a run no longer reaches k. Worker threads allocate too, so which call
     * is k-th may vary; every outcome must be clean. */
    mts_allocator failing = {failing_malloc, failing_realloc, free};
    mts__set_allocator(&failing);
    int torture = 0;
    for (int scenario = 0; scenario < 3; scenario++) {
        for (uint64_t k = 1;; k++) {
            if (getenv("MTS_TEST_VERBOSE")) fprintf(stderr, "torture scenario %d k %llu\n", scenario, (unsigned long long)k);
            __atomic_store_n(&alloc_left, k, __ATOMIC_RELEASE);
            int committed;
            int rc = run_task(scenario, &committed);
            int reached = __atomic_load_n(&alloc_left, __ATOMIC_ACQUIRE) == 0;
            __atomic_store_n(&alloc_left, 0, __ATOMIC_RELEASE);
            expect_clean(rc, committed, MTS_E_NOMEM);
            torture++;
            if (!reached) {
                CHECK(committed);
                printf("scenario %d: allocation %llu failed and cleaned up in turn, for every k\n", scenario,
                       (unsigned long long)(k - 1));
                break;
            }
        }
    }
    mts__set_allocator(NULL);
    printf("test_faults: %d injected I/O failures, %d allocation failures\n", injected, torture);
    rm_rf(dir);
    free(dir);
    free(data);
    TEST_DONE("test_faults");
}

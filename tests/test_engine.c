/* The engine on its own: jobs of several clients interleave on the workers,
 * each client's drain order is its submission order; urgent jobs run before
 * queued ordinary ones, and a caller may run its own queued job; the budget is hard,
 * first come first served, wakes waiters on abort, and reclaims from the
 * largest holder when nothing is in flight; the wake-ups a caller holds back
 * for jobs it means to run itself go out when it blocks or stops helping. */
#include <pthread.h>
#include <sched.h>

#include "engine.h"
#include "internal.h"
#include "reader_int.h"
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

static const eng_client_ops ops = {run, drain, reclaim, 0};
static const eng_client_ops cpu_ops = {run, drain, reclaim, 1}; /* at most eng_parallelism() at once */

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

/* An engine whose CPU count is `cpus` (MTS_CPUS; NULL: the machine's). */
static mts_engine *engine_on(unsigned threads, const char *cpus)
{
    const char *had = getenv("MTS_CPUS");
    char keep[32];
    snprintf(keep, sizeof keep, "%s", had ? had : "");
    if (cpus) setenv("MTS_CPUS", cpus, 1);
    mts_engine *e;
    CHECK_RC(mts_engine_create(threads, 1 << 20, &e, NULL, 0));
    if (had) setenv("MTS_CPUS", keep, 1);
    else unsetenv("MTS_CPUS");
    return e;
}

/* Clients submitting from their own threads, each waiting midway, with
 * jobs of random length: every job runs and drains in its client's order.
 * With CPU-bound clients on more workers than CPUs, the workers past the
 * CPUs wait and are woken when a job may run: nothing is left queued. */
static void order_on(const eng_client_ops *o, unsigned threads, const char *cpus)
{
    mts_engine *e = engine_on(threads, cpus);
    tclient tc[CLIENTS];
    submitter sub[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        tc[i] = (tclient){.order_ok = 1, .ran_before_drain = 1};
        CHECK_RC(eng_client_init(&tc[i].c, e, o, &tc[i]));
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

static void test_order(void)
{
    order_on(&ops, 1, NULL);
    order_on(&ops, 4, NULL);
    CHECK(workers_seen[0] && workers_seen[3]);
    order_on(&cpu_ops, 4, "1");
    order_on(&cpu_ops, 3, "2");
    order_on(&cpu_ops, 1, "1");
}

static int in_run, most_in_run;

static void cap_run(void *ctx, eng_job *j, eng_worker *w)
{
    (void)ctx;
    (void)w;
    int now = __atomic_add_fetch(&in_run, 1, __ATOMIC_SEQ_CST);
    for (int m = __atomic_load_n(&most_in_run, __ATOMIC_SEQ_CST); now > m;)
        if (__atomic_compare_exchange_n(&most_in_run, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
    usleep(((tjob *)j)->delay_us);
    __atomic_sub_fetch(&in_run, 1, __ATOMIC_SEQ_CST);
    ((tjob *)j)->ran = 1;
}

/* The most jobs of a client with ops `o` that ran at once, 12 of them on 4
 * workers (and the caller, which runs its own while a worker idles) of an
 * engine that counts 2 CPUs. */
static int most_at_once(const eng_client_ops *o)
{
    mts_engine *e = engine_on(4, "2");
    CHECK(eng_threads(e) == 4 && eng_parallelism(e) == 2);
    tclient tc = {.order_ok = 1, .ran_before_drain = 1};
    CHECK_RC(eng_client_init(&tc.c, e, o, &tc));
    most_in_run = 0;
    for (uint64_t i = 0; i < 12; i++) {
        tjob *t = calloc(1, sizeof *t);
        t->seq = i;
        t->delay_us = 20000;
        eng_submit(&tc.c, &t->base);
    }
    eng_wait_idle(&tc.c);
    CHECK(tc.drained_next == 12 && tc.order_ok && tc.ran_before_drain);
    eng_client_destroy(&tc.c);
    mts_engine_free(e);
    return most_in_run;
}

/* Jobs of CPU-bound clients run at most as many at once as there are CPUs,
 * workers and helping callers together; others on every worker. */
static void test_cpu_cap(void)
{
    static const eng_client_ops capped = {cap_run, drain, NULL, 1}, free_ops = {cap_run, drain, NULL, 0};
    int cpu = most_at_once(&capped), io = most_at_once(&free_ops);
    printf("test_engine: at most %d CPU-bound jobs at once on 4 workers and 2 CPUs, %d others\n", cpu, io);
    CHECK(cpu == 2);
    CHECK(io >= 3);
    setenv("MTS_CPUS", "3", 1);
    CHECK(mts_cpu_count() == 3);
    mts_engine *e = NULL;
    mts_engine_stats st;
    CHECK(mts_engine_create(4, 1 << 20, &e, NULL, 0) == 0); /* the count at create holds */
    unsetenv("MTS_CPUS");
    CHECK(mts_engine_get_stats(e, &st) == 0 && st.threads == 4 && st.cpus == 3);
    mts_engine_free(e);
    CHECK(mts_engine_create(2, 1 << 20, &e, NULL, 0) == 0);
    CHECK(mts_engine_get_stats(e, &st) == 0 && st.cpus == MTS_MIN(2u, mts_cpu_count()));
    mts_engine_free(e);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(mts_cpu_count() >= 1 && (online < 1 || mts_cpu_count() <= (unsigned)online));
}

/* Writes the string s to dir/name, making dir (and its parents) first. */
static void put(const char *dir, const char *name, const char *s)
{
    char path[1024];
    for (size_t i = 1; dir[i]; i++) /* mkdir -p */
        if (dir[i] == '/') {
            snprintf(path, sizeof path, "%.*s", (int)i, dir);
            mkdir(path, 0755);
        }
    mkdir(dir, 0755);
    if (!name) return;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, s, strlen(s));
}

/* mts_cgroup_cpus on files laid out as the kernel's: what mountinfo and the
 * process's cgroup file say decides which directories are read. */
static unsigned cgroup_case(const char *tmp, const char *mountinfo, const char *self)
{
    char mi[1024], sc[1024];
    snprintf(mi, sizeof mi, "%s/mountinfo", tmp);
    snprintf(sc, sizeof sc, "%s/cgroup", tmp);
    write_file(mi, mountinfo, strlen(mountinfo));
    write_file(sc, self, strlen(self));
    return mts_cgroup_cpus(sc, mi);
}

/* Quotas under v2, v1 and a hybrid of both, a parent's smaller quota, the
 * root of a container's mount, and mount points with a space. */
static void test_cgroup_quota(void)
{
    char *tmp = test_tmpdir("cgroup");
    char d[1024], mi[4096], self[1024];
    /* v2 at TMP/v2: /a has no limit, /a/b 1.5 CPUs (rounded up: 2) */
    snprintf(d, sizeof d, "%s/v2/a", tmp);
    put(d, "cpu.max", "max 100000\n");
    snprintf(d, sizeof d, "%s/v2/a/b", tmp);
    put(d, "cpu.max", "150000 100000\n");
    /* v1's cpu at TMP/v1 cpu: /a 3 CPUs, /a/b none (-1), /c 5 */
    snprintf(d, sizeof d, "%s/v1 cpu/a", tmp);
    put(d, "cpu.cfs_quota_us", "250000\n");
    put(d, "cpu.cfs_period_us", "100000\n");
    snprintf(d, sizeof d, "%s/v1 cpu/a/b", tmp);
    put(d, "cpu.cfs_quota_us", "-1\n");
    put(d, "cpu.cfs_period_us", "100000\n");
    snprintf(d, sizeof d, "%s/v1 cpu/c", tmp);
    put(d, "cpu.cfs_quota_us", "500000\n");
    put(d, "cpu.cfs_period_us", "100000\n");
    char v2line[512], v1line[512], v1root[512];
    snprintf(v2line, sizeof v2line, "41 31 0:38 / %s/v2 rw,relatime shared:9 - cgroup2 cgroup2 rw\n", tmp);
    snprintf(v1line, sizeof v1line, "32 31 0:29 / %s/v1\\040cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n", tmp);
    /* a container's mount of its own subtree /a */
    snprintf(v1root, sizeof v1root, "32 31 0:29 /a %s/v1\\040cpu/a rw,relatime - cgroup cgroup rw,cpu,cpuacct\n", tmp);
    const char *other = "30 23 0:27 / /proc rw - proc proc rw\n";

    snprintf(mi, sizeof mi, "%s%s", other, v2line);
    CHECK(cgroup_case(tmp, mi, "0::/a/b\n") == 2);
    CHECK(cgroup_case(tmp, mi, "0::/a\n") == 0);
    snprintf(mi, sizeof mi, "%s%s", other, v1line);
    CHECK(cgroup_case(tmp, mi, "4:memory:/x\n2:cpu,cpuacct:/a/b\n") == 3); /* the parent's */
    CHECK(cgroup_case(tmp, mi, "2:cpuacct,cpu:/c\n") == 5);
    CHECK(cgroup_case(tmp, mi, "4:memory:/a\n2:cpuacct:/a\n") == 0); /* not the cpu controller */
    snprintf(mi, sizeof mi, "%s%s%s", v1line, other, v2line); /* hybrid: the smaller */
    CHECK(cgroup_case(tmp, mi, "2:cpu,cpuacct:/a\n0::/a/b\n") == 2);
    CHECK(cgroup_case(tmp, mi, "2:cpu,cpuacct:/c\n0::/a\n") == 5);
    snprintf(mi, sizeof mi, "%s", v1root); /* the path as the host names it, and as a namespace does */
    CHECK(cgroup_case(tmp, mi, "2:cpu:/a/b\n") == 3);
    CHECK(cgroup_case(tmp, mi, "2:cpu:/\n") == 3);
    CHECK(cgroup_case(tmp, mi, "2:cpu:/b\n") == 3);   /* named from a namespace's root */
    CHECK(cgroup_case(tmp, mi, "2:cpu:/zzz\n") == 3); /* not under the mount: its own quota */
    snprintf(self, sizeof self, "0::/a/b\n");
    CHECK(cgroup_case(tmp, other, self) == 0); /* no cgroup mounted */
    CHECK(mts_cgroup_cpus("/nonexistent/cgroup", "/nonexistent/mountinfo") == 0);
    printf("test_engine: cgroup quotas read from v2, v1 and hybrid layouts\n");
    rm_rf(tmp);
    free(tmp);
}

typedef struct acq {
    tclient *tc;
    uint64_t n;
    int rc, done;
    size_t want; /* eng_acquire_buffer for a buffer of this size, into buf */
    void *buf;
} acq;

static void *acquire_main(void *arg)
{
    acq *a = arg;
    a->rc = a->want ? eng_acquire_buffer(&a->tc->c, a->n, a->want, &a->buf) : eng_acquire(&a->tc->c, a->n);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int is_done(acq *a) { return __atomic_load_n(&a->done, __ATOMIC_ACQUIRE); }

/* Waits (up to 10 s) until someone waits for the engine's budget: then
 * even nothing cannot be taken without waiting. */
static int await_waiter(eng_client *c)
{
    for (int i = 0; i < 10000; i++) {
        if (eng_try_acquire(c, 0) == 1) return 1;
        usleep(1000);
    }
    return 0;
}

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

    /* A waiter that asks for a buffer takes one of that size given while it
     * waits, where it would have been freed; one of another size is not
     * kept while it waits. Without a waiter, a kept buffer of the size asked
     * for counts as free budget. */
    CHECK_RC(eng_acquire(&b.c, 80 << 10));
    acq wb = {&c, 50 << 10, 0, 0, 30 << 10, NULL};
    pthread_create(&t1, NULL, acquire_main, &wb);
    CHECK(await_waiter(&b.c) && !is_done(&wb));
    void *wrong = malloc(10 << 10);
    CHECK(eng_cache_give(&b.c, wrong, 10 << 10) == 0);
    free(wrong);
    eng_release(&b.c, 10 << 10); /* 70 KiB held: the waiter still does not fit */
    usleep(20000);
    CHECK(!is_done(&wb));
    void *given = malloc(30 << 10);
    CHECK(eng_cache_give(&b.c, given, 30 << 10) == 1);
    pthread_join(t1, NULL);
    CHECK(wb.rc == 0 && wb.buf == given);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == (90u << 10) && st.bytes_cached == 0 && st.peak_bytes_held <= cap);
    CHECK(eng_cache_give(&c.c, given, 30 << 10) == 1);
    void *again = NULL;
    CHECK(eng_acquire_buffer(&b.c, 40 << 10, 30 << 10, &again) == 0 && again == given); /* fits only with it */
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == cap && st.bytes_cached == 0);
    CHECK(eng_acquire_buffer(&c.c, 0, 30 << 10, &again) == 0 && again == NULL); /* a buffer larger than the bytes */
    free(given);
    eng_release(&b.c, 80 << 10);
    eng_release(&c.c, 20 << 10);
    mts_engine_get_stats(e, &st);
    CHECK(st.bytes_held == 0);

    /* The engine lives until its last client is gone. */
    mts_engine_free(e);
    eng_client_destroy(&a.c);
    eng_client_destroy(&b.c);
    eng_client_destroy(&c.c);
}

/* ---- urgent jobs and eng_run_queued ---------------------------------------------- */

typedef struct ujob {
    eng_job base;
    int id;             /* its place in the expected run order */
    int *gate;          /* if set, run() sets started and waits until *gate */
    int started;
    int ran_on_caller;  /* run() saw a helper context, not a worker */
} ujob;

static int run_log[64], run_count;

static void urun(void *ctx, eng_job *j, eng_worker *w)
{
    ujob *u = (ujob *)j;
    __atomic_store_n(&u->started, 1, __ATOMIC_RELEASE);
    while (u->gate && !__atomic_load_n(u->gate, __ATOMIC_ACQUIRE)) usleep(100);
    u->ran_on_caller = w->index >= eng_threads(w->e);
    int k = __atomic_fetch_add(&run_count, 1, __ATOMIC_RELAXED);
    if (k < 64) run_log[k] = u->id;
    (void)ctx;
}

static void udrain(void *ctx, eng_job *j)
{
    __atomic_add_fetch((int *)ctx, 1, __ATOMIC_RELEASE);
    (void)j;
}

static const eng_client_ops uops = {urun, udrain, NULL};

static void test_urgent(void)
{
    mts_engine *e;
    CHECK_RC(mts_engine_create(1, 1 << 20, &e, NULL, 0));
    int drained_a = 0, drained_b = 0, gate = 0;
    eng_client a, b;
    CHECK_RC(eng_client_init(&a, e, &uops, &drained_a));
    CHECK_RC(eng_client_init(&b, e, &uops, &drained_b));
    /* The one worker is held by a's first job; then a queues 4 ordinary jobs,
     * b 3 urgent ones, a one more ordinary, b one more urgent. */
    ujob ja[6] = {{.id = 0, .gate = &gate}, {.id = 5}, {.id = 6}, {.id = 7}, {.id = 8}, {.id = 9}};
    ujob jb[5] = {{.id = 1}, {.id = 2}, {.id = 3}, {.id = 4}, {.id = -1}};
    eng_submit(&a, &ja[0].base);
    while (!__atomic_load_n(&ja[0].started, __ATOMIC_ACQUIRE)) usleep(100);
    for (int i = 1; i <= 4; i++) eng_submit(&a, &ja[i].base);
    for (int i = 0; i < 3; i++) eng_submit_urgent(&b, &jb[i].base);
    eng_submit(&a, &ja[5].base);
    eng_submit_urgent(&b, &jb[3].base);
    /* A queued job of b's is run by its caller; a taken one is not. */
    eng_submit_urgent(&b, &jb[4].base);
    CHECK(eng_run_queued(&b, &jb[4].base) == 1);
    CHECK(jb[4].ran_on_caller && run_count == 1 && run_log[0] == -1);
    CHECK(eng_run_queued(&a, &ja[0].base) == 0); /* the worker has it */
    CHECK(eng_run_queued(&a, &jb[0].base) == 0); /* not a's */
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    /* Not eng_wait_idle: that would run a's queued jobs here, out of the order under test. */
    while (__atomic_load_n(&drained_a, __ATOMIC_ACQUIRE) < 6 || __atomic_load_n(&drained_b, __ATOMIC_ACQUIRE) < 5)
        usleep(1000);
    CHECK(run_count == 11);
    for (int k = 1; k < 11; k++) CHECK(run_log[k] == k - 1); /* ja[0], then b's urgent ones, then a's */
    CHECK(drained_a == 6 && drained_b == 5);
    CHECK(!ja[1].ran_on_caller && !jb[0].ran_on_caller);
    eng_client_destroy(&a);
    eng_client_destroy(&b);
    mts_engine_free(e);
}

typedef struct pjob {
    eng_job base;
    int policy, on_worker, drained;
    unsigned index;
    char name[16]; /* the running thread's */
} pjob;

static void prun(void *ctx, eng_job *j, eng_worker *w)
{
    (void)ctx;
    pjob *p = (pjob *)j;
    p->policy = sched_getscheduler(0);
    p->on_worker = w->index < eng_threads(w->e);
    p->index = w->index;
    CHECK(pthread_getname_np(pthread_self(), p->name, sizeof p->name) == 0);
}

static void pdrain(void *ctx, eng_job *j)
{
    (void)ctx;
    __atomic_store_n(&((pjob *)j)->drained, 1, __ATOMIC_RELEASE);
}

static const eng_client_ops pops = {prun, pdrain, NULL};

static void *try_batch(void *arg)
{
    struct sched_param sp = {0};
    *(int *)arg = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    return NULL;
}

/* Workers run under SCHED_BATCH (unless MTS_DISABLE_SCHED_BATCH is set, or
 * the system refuses it to a thread of this process, as a scratch thread
 * finds out) and are named mts-worker-N; a caller that runs its own job keeps
 * its policy and its name. */
static void test_worker_policy(void)
{
    int off = mts_env_flag("MTS_DISABLE_SCHED_BATCH");
    int before = sched_getscheduler(0), refused = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, try_batch, &refused) == 0 && pthread_join(t, NULL) == 0);
    int want = off || refused ? before : SCHED_BATCH;
    if (refused) printf("test_engine: SCHED_BATCH refused here (%s): workers keep the inherited policy\n", strerror(refused));
    mts_engine *e;
    CHECK_RC(mts_engine_create(2, 1 << 20, &e, NULL, 0));
    eng_client c;
    CHECK_RC(eng_client_init(&c, e, &pops, NULL));
    pjob w = {.policy = -1}, here = {.policy = -1};
    eng_submit(&c, &w.base);
    while (!__atomic_load_n(&w.drained, __ATOMIC_ACQUIRE)) usleep(100); /* not eng_wait_idle: a worker runs it */
    CHECK(w.on_worker && w.policy == want);
    char name[16];
    snprintf(name, sizeof name, "mts-worker-%u", w.index);
    CHECK(strcmp(w.name, name) == 0);
    char mine[16];
    CHECK(pthread_getname_np(pthread_self(), mine, sizeof mine) == 0);
    eng_submit_quiet(&c, &here.base);
    if (eng_run_queued(&c, &here.base)) CHECK(!here.on_worker && here.policy == before && !strcmp(here.name, mine));
    eng_wait_idle(&c);
    CHECK(sched_getscheduler(0) == before);
    eng_client_destroy(&c);
    mts_engine_free(e);
}

/* n bytes of partly compressible data (*src, starting with `first`) and
 * their lz4 stream. */
static unsigned char *make_block(size_t n, unsigned char first, unsigned char **src, size_t *clen)
{
    *src = malloc(n);
    uint64_t seed = test_seed;
    for (size_t i = 0; i < n; i++) (*src)[i] = (unsigned char)(i % 251 < 200 ? i % 7 : rng_below(&seed, 256));
    (*src)[0] = first;
    mts_cctx *cc;
    CHECK_RC(mts_cctx_create(MTS_CODEC_LZ4, 1, 32768, &cc));
    size_t cap = mts_cctx_bound(cc, n);
    unsigned char *block = malloc(cap);
    CHECK_RC(mts_cctx_compress(cc, *src, n, block, cap, clen));
    mts_cctx_free(cc);
    return block;
}

/* A block reader on engine e, lz4, pieces of piece_size bytes. */
static mts_reader *open_block_reader(mts_engine *e, uint32_t piece_size)
{
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.engine = e;
    ro.codec = MTS_CODEC_LZ4;
    ro.piece_size = piece_size;
    mts_reader *r = NULL;
    char err[MTS_MSG_CAP];
    CHECK_RC(mts_reader_open_blocks(&ro, &r, err, sizeof err));
    return r;
}

/* Reads the block reader r to its end, the first `got` bytes of src read
 * already: checks the rest against src. */
static void read_all(mts_reader *r, const unsigned char *src, size_t n, uint32_t tag, size_t got)
{
    mts_read_piece pc;
    int rc, same = 1;
    while ((rc = mts_reader_next(r, &pc)) == 1) {
        same &= got + pc.len <= n && memcmp(src + got, pc.data, pc.len) == 0 && pc.range == tag;
        got += pc.len;
    }
    CHECK(rc == 0 && same && got == n);
}

/* A reader on an engine whose only worker is taken: next() decodes its own
 * queued units rather than wait for a worker, so it finishes anyway. */
static void test_reader_runs_own(void)
{
    mts_engine *e;
    CHECK_RC(mts_engine_create(1, 8 << 20, &e, NULL, 0));
    run_count = 0;
    int drained = 0, gate = 0;
    eng_client g;
    CHECK_RC(eng_client_init(&g, e, &uops, &drained));
    ujob blocker = {.id = 0, .gate = &gate};
    eng_submit(&g, &blocker.base);
    while (!__atomic_load_n(&blocker.started, __ATOMIC_ACQUIRE)) usleep(100);

    size_t n = 3u << 20, clen;
    unsigned char *src, *block = make_block(n, 0, &src, &clen);
    mts_reader *r = open_block_reader(e, 256 << 10);
    CHECK_RC(mts_reader_add_block(r, block, clen, 7));
    read_all(r, src, n, 7, 0);
    mts_reader_stats st;
    CHECK_RC(mts_reader_get_stats(r, &st));
    CHECK(st.pieces_here >= n / (256 << 10) && st.bytes_decoded == n);
    CHECK(!__atomic_load_n(&gate, __ATOMIC_ACQUIRE) && run_count == 0); /* the worker never got free */
    mts_reader_free(r);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    eng_wait_idle(&g);
    eng_client_destroy(&g);
    mts_engine_free(e);
    free(block);
    free(src);
}

/* A reader whose next piece is on the only worker decodes a later block's
 * piece itself meanwhile, rather than sleep until the worker is done (a
 * hand-off per piece where pieces are small). Whether the worker has taken
 * the first block's unit when next() looks is up to the scheduler, so a few
 * tries are allowed; every try must read both blocks whole and in order. */
static void test_reader_decodes_ahead(void)
{
    mts_engine *e;
    CHECK_RC(mts_engine_create(1, 64 << 20, &e, NULL, 0));
    size_t na = 16u << 20, nb = 200u << 10, ca, cb;
    unsigned char *sa, *sb, *a = make_block(na, 1, &sa, &ca), *b = make_block(nb, 2, &sb, &cb);
    uint64_t ahead = 0;
    for (int attempt = 0; attempt < 20 && !ahead; attempt++) {
        mts_reader *r = open_block_reader(e, 16u << 20); /* block a is one unit: long enough to overlap */
        CHECK_RC(mts_reader_add_block(r, a, ca, 1));
        usleep(1000); /* the worker takes a's unit */
        CHECK_RC(mts_reader_add_block(r, b, cb, 2));
        mts_read_piece pc;
        size_t got_a = 0, got_b = 0;
        int rc, same = 1;
        while ((rc = mts_reader_next(r, &pc)) == 1) {
            if (pc.range == 1) {
                same &= got_b == 0 && got_a + pc.len <= na && memcmp(sa + got_a, pc.data, pc.len) == 0;
                got_a += pc.len;
            } else {
                same &= pc.range == 2 && got_a == na && got_b + pc.len <= nb && memcmp(sb + got_b, pc.data, pc.len) == 0;
                got_b += pc.len;
            }
        }
        CHECK(rc == 0 && same && got_a == na && got_b == nb);
        mts_reader_stats st;
        CHECK_RC(mts_reader_get_stats(r, &st));
        CHECK(st.pieces_ahead_here <= st.pieces_here);
        ahead = st.pieces_ahead_here;
        mts_reader_free(r);
    }
    CHECK(ahead >= 1);
    mts_engine_free(e);
    free(a);
    free(b);
    free(sa);
    free(sb);
}

/* A reader next to a client that holds all the budget it can get and
 * another that waits for more (as writers keep it full): the reader's spare
 * pieces pay for its next units, so it reads to the end without queueing
 * for budget behind the waiter. */
typedef struct hog {
    eng_client c;
    uint64_t held;
    int done, timed_out;
} hog;

/* Waits (up to 10 s) until *flag is set. */
static int await_flag(const int *flag)
{
    for (int i = 0; i < 10000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++) usleep(1000);
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}

static void *waiter_main(void *arg)
{
    eng_client *c = arg;
    uint64_t n = eng_cap(c->e) / 2;
    CHECK_RC(eng_acquire(c, n)); /* served once the hog gives its budget back */
    eng_release(c, n);
    return NULL;
}

static void *hog_main(void *arg)
{
    hog *h = arg;
    h->timed_out = !await_flag(&h->done);
    eng_release(&h->c, h->held);
    return NULL;
}

static void test_reader_spares(void)
{
    mts_engine *e;
    CHECK_RC(mts_engine_create(2, 4 << 20, &e, NULL, 0));
    size_t n = 6u << 20, clen;
    unsigned char *src, *block = make_block(n, 0, &src, &clen);
    mts_reader *r = open_block_reader(e, 128 << 10);
    CHECK_RC(mts_reader_add_block(r, block, clen, 3));
    mts_read_piece pc;
    CHECK(mts_reader_next(r, &pc) == 1 && pc.len && memcmp(pc.data, src, pc.len) == 0);
    size_t got = pc.len;
    int drained = 0;
    hog h = {0};
    CHECK_RC(eng_client_init(&h.c, e, &uops, &drained));
    /* Everything not held now: retried while the reader's unit in flight finishes. */
    for (int i = 0; i < 1000 && !h.held; i++) {
        mts_engine_stats st;
        CHECK_RC(mts_engine_get_stats(e, &st));
        if (st.bytes_held < st.budget && eng_try_acquire(&h.c, st.budget - st.bytes_held) == 0)
            h.held = st.budget - st.bytes_held;
        else
            usleep(1000);
    }
    CHECK(h.held > 0);
    pthread_t th, wth;
    pthread_create(&th, NULL, hog_main, &h);
    eng_client wc;
    CHECK_RC(eng_client_init(&wc, e, &uops, &drained));
    pthread_create(&wth, NULL, waiter_main, &wc);
    usleep(50000); /* it waits now, most likely (if not, the read proves less, but passes) */
    read_all(r, src, n, 3, got);
    __atomic_store_n(&h.done, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    pthread_join(wth, NULL);
    CHECK(!h.timed_out); /* the read did not wait for the hog's budget */
    eng_client_destroy(&wc);
    mts_engine_stats st;
    CHECK_RC(mts_engine_get_stats(e, &st));
    CHECK(st.peak_bytes_held <= st.budget);
    mts_reader_free(r);
    CHECK_RC(mts_engine_get_stats(e, &st));
    CHECK(st.bytes_held == st.bytes_cached); /* the spares went back with the reader */
    eng_client_destroy(&h.c);
    mts_engine_free(e);
    free(block);
    free(src);
}

/* A reader that decoded ahead, then a waiter that fits only if that comes
 * back (as the same task's writer would wait): the waiter reclaims it, and
 * the reader reads every block right all the same. */
typedef struct grab {
    eng_client c;
    uint64_t n;
    int done;
} grab;

static void *grab_main(void *arg)
{
    grab *g = arg;
    CHECK_RC(eng_acquire(&g->c, g->n));
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_reader_reclaim(void)
{
    mts_engine *e;
    uint64_t cap = 4 << 20;
    CHECK_RC(mts_engine_create(2, cap, &e, NULL, 0));
    enum { NB = 6 };
    size_t n = 3u << 19, clen[NB];
    unsigned char *src[NB], *block[NB];
    for (int b = 0; b < NB; b++) block[b] = make_block(n, (unsigned char)b, &src[b], &clen[b]); /* told apart */
    const uint32_t piece_size = 128 << 10;
    mts_reader *r = open_block_reader(e, piece_size);
    for (int b = 0; b < NB; b++) CHECK_RC(mts_reader_add_block(r, block[b], clen[b], (uint32_t)b));
    mts_read_piece pc;
    CHECK(mts_reader_next(r, &pc) == 1 && pc.range == 0 && memcmp(pc.data, src[0], pc.len) == 0);
    size_t got = pc.len;
    /* Until some later blocks have a piece and nothing is in flight (units
     * are submitted by next() and add_block(), as many as may be in flight). */
    uint64_t ahead = 0, held = 0;
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&r->mu);
        ahead = r->ahead;
        uint32_t inflight = r->inflight;
        pthread_mutex_unlock(&r->mu);
        eng_client_stats cs;
        eng_client_stats_get(&r->client, &cs);
        held = cs.held;
        if (inflight == 0 && ahead >= 2 * (uint64_t)piece_size) break;
        usleep(1000);
    }
    CHECK(ahead >= 2 * (uint64_t)piece_size);
    int drained = 0;
    grab g = {.n = cap - (held - ahead)};
    CHECK_RC(eng_client_init(&g.c, e, &uops, &drained));
    pthread_t th;
    pthread_create(&th, NULL, grab_main, &g);
    for (int i = 0; i < 5000 && !__atomic_load_n(&g.done, __ATOMIC_ACQUIRE); i++) usleep(1000);
    int served = __atomic_load_n(&g.done, __ATOMIC_ACQUIRE);
    CHECK(served); /* by the reader's look-ahead, reclaimed */
    pthread_mutex_lock(&r->mu);
    CHECK(r->ahead == 0);
    pthread_mutex_unlock(&r->mu);
    if (!served) { /* let it finish: the reader's free gives everything back */
        mts_reader_free(r);
        r = NULL;
    }
    pthread_join(th, NULL);
    eng_release(&g.c, g.n);
    eng_client_destroy(&g.c);
    if (r) {
        /* The rest of block 0, then every other block from its beginning. */
        int rc, same = 1;
        size_t at[NB] = {0};
        at[0] = got;
        while ((rc = mts_reader_next(r, &pc)) == 1) {
            uint32_t b = pc.range;
            same &= b < NB && at[b] + pc.len <= n && memcmp(src[b] + at[b], pc.data, pc.len) == 0;
            if (b < NB) at[b] += pc.len;
        }
        CHECK(rc == 0 && same);
        for (int b = 0; b < NB; b++) CHECK(at[b] == n);
        mts_reader_free(r);
    }
    mts_engine_stats st;
    CHECK_RC(mts_engine_get_stats(e, &st));
    CHECK(st.peak_bytes_held <= cap && st.bytes_held == st.bytes_cached && st.reclaims >= 1);
    mts_engine_free(e);
    for (int b = 0; b < NB; b++) {
        free(block[b]);
        free(src[b]);
    }
}

/* ---- wake-ups held back for a caller that runs its own jobs ---------------- */

typedef struct gjob {
    eng_job base;
    int *gate;   /* run() waits until *gate is set (NULL: it does not) */
    int started, ran;
} gjob;

static void grun(void *ctx, eng_job *j, eng_worker *w)
{
    (void)ctx, (void)w;
    gjob *g = (gjob *)j;
    __atomic_store_n(&g->started, 1, __ATOMIC_RELEASE);
    while (g->gate && !__atomic_load_n(g->gate, __ATOMIC_ACQUIRE)) usleep(100);
    __atomic_store_n(&g->ran, 1, __ATOMIC_RELEASE);
}

static void gdrain(void *ctx, eng_job *j) { (void)ctx, (void)j; }

static const eng_client_ops gops = {grun, gdrain, NULL, 1};

typedef struct helper_arg {
    eng_client *c;
    uint64_t acquire; /* 0: eng_wait_idle instead */
    int rc, done;
} helper_arg;

static void *helper_main(void *arg)
{
    helper_arg *h = arg;
    if (h->acquire) h->rc = eng_acquire(h->c, h->acquire);
    else eng_wait_idle(h->c);
    __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* On two CPUs, with one worker computing a job that does not end until
 * released, a job submitted with eng_submit_helped wakes no worker (its
 * caller means to run it). If that caller then blocks for budget instead,
 * or stops helping while another client's job waits, the wake-up held back
 * must go out: the job must not wait for the long one to end. */
static void test_helped_wakeups(void)
{
    mts_engine *e = engine_on(2, "2");
    eng_client long_c, a, other;
    CHECK_RC(eng_client_init(&long_c, e, &gops, NULL));
    CHECK_RC(eng_client_init(&a, e, &gops, NULL));
    CHECK_RC(eng_client_init(&other, e, &gops, NULL));
    int gate = 0, gate_a = 0;
    gjob lj = {.gate = &gate};
    eng_submit(&long_c, &lj.base);
    CHECK(await_flag(&lj.started)); /* one CPU computing from now on */

    /* The caller blocks for budget: its helped job runs on the idle worker. */
    uint64_t cap = 1 << 20;
    CHECK_RC(eng_acquire(&other, cap));
    gjob ja = {0};
    eng_submit_helped(&a, &ja.base);
    helper_arg blocked = {&a, 1 << 10, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, helper_main, &blocked) == 0);
    CHECK(await_waiter(&other));
    CHECK(await_flag(&ja.ran));
    CHECK(!__atomic_load_n(&blocked.done, __ATOMIC_ACQUIRE) && !__atomic_load_n(&lj.ran, __ATOMIC_ACQUIRE));
    eng_release(&other, cap);
    CHECK(pthread_join(t, NULL) == 0 && blocked.rc == 0);
    eng_release(&a, 1 << 10);
    eng_wait_idle(&a);

    /* The caller runs its own job (both CPUs computing); another client's
     * job queued meanwhile wakes no worker; once the caller is done, that
     * wake-up goes out. */
    gjob ja2 = {.gate = &gate_a}, jo = {0};
    eng_submit_helped(&a, &ja2.base);
    helper_arg helping = {&a, 0, 0, 0};
    CHECK(pthread_create(&t, NULL, helper_main, &helping) == 0);
    CHECK(await_flag(&ja2.started));
    eng_submit(&other, &jo.base);
    __atomic_store_n(&gate_a, 1, __ATOMIC_RELEASE);
    CHECK(await_flag(&helping.done));
    CHECK(await_flag(&jo.ran));
    CHECK(!__atomic_load_n(&lj.ran, __ATOMIC_ACQUIRE));
    CHECK(pthread_join(t, NULL) == 0);

    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    eng_wait_idle(&long_c);
    eng_wait_idle(&other);
    eng_client_destroy(&long_c);
    eng_client_destroy(&a);
    eng_client_destroy(&other);
    mts_engine_free(e);
}

int main(void)
{
    test_init_seed("test_engine");
    test_order();
    test_cpu_cap();
    test_cgroup_quota();
    test_urgent();
    test_worker_policy();
    test_reader_runs_own();
    test_reader_decodes_ahead();
    test_reader_spares();
    test_reader_reclaim();
    test_budget();
    test_helped_wakeups();
    TEST_DONE("test_engine");
}

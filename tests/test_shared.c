/* Many writers and readers on one engine (public API only; linked against
 * the shared library): 64 threads on 8 workers under a 4 MiB budget, each
 * thread writing several map outputs of random shape, codec and size, some
 * aborted, some failing at commit, every committed output read back on the
 * same engine and compared. A monitor polls the engine's and the writers'
 * stats all along (race-free under TSan) and checks the budget. A watchdog
 * turns a deadlock into a failure. */
#include <pthread.h>
#include <signal.h>

#include "testutil.h"

#define THREADS 64
#define WORKERS 8
#define BUDGET (4u << 20)
#define WATCHDOG_S 240

static mts_engine *engine;
static char *root;
static int done_flag;
static mts_writer *volatile live[THREADS]; /* what the monitor polls */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct rec {
    uint32_t partition;
    uint32_t len;
    const unsigned char *bytes;
} rec;

typedef struct outcome {
    int committed, aborted, failed;
} outcome;

/* Expected bytes of the whole output: partitions in order, records of each in arrival order. */
static unsigned char *expected(const rec *recs, uint32_t n, uint32_t nparts, uint64_t *len)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += recs[i].len;
    unsigned char *buf = malloc(total + 1), *p = buf;
    for (uint32_t part = 0; part < nparts; part++)
        for (uint32_t i = 0; i < n; i++)
            if (recs[i].partition == part) {
                memcpy(p, recs[i].bytes, recs[i].len);
                p += recs[i].len;
            }
    *len = total;
    return buf;
}

static void read_back(const char *dir, int64_t map, const rec *recs, uint32_t n, uint32_t nparts, mts_codec codec)
{
    char path[1024], name[128];
    mts_output_name(name, sizeof name, 0, map, 'd', MTS_CHECKSUM_ADLER32);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.engine = engine;
    ro.codec = codec;
    ro.piece_size = 64 << 10;
    const char *paths[1] = {path};
    mts_reader *r;
    char err[600];
    int rc = mts_reader_open(&ro, paths, 1, &r, err, sizeof err);
    if (rc < 0) fprintf(stderr, "open: %s\n", err);
    CHECK_RC(rc);
    uint64_t want_len;
    unsigned char *want = expected(recs, n, nparts, &want_len);
    CHECK_RC(mts_reader_start(r, 0, nparts));
    mts_read_piece pc;
    uint64_t pos = 0;
    while ((rc = mts_reader_next(r, &pc)) == 1) {
        CHECK(pos + pc.len <= want_len && !memcmp(want + pos, pc.data, pc.len));
        pos += pc.len;
    }
    if (rc < 0) fprintf(stderr, "read: %s\n", mts_reader_error(r));
    CHECK(rc == 0 && pos == want_len);
    mts_reader_free(r);
    free(want);
}

typedef struct worker_arg {
    int index;
    uint64_t seed;
    outcome out;
} worker_arg;

/* A batch of mts_writer_add_batch_async: freed when given back. */
typedef struct given {
    unsigned char *data;
    uint32_t *back;
} given;

static void give_back(void *ctx)
{
    given *g = ctx;
    free(g->data);
    __atomic_add_fetch(g->back, 1, __ATOMIC_RELAXED);
    free(g);
}

static void one_writer(worker_arg *a, int k, unsigned char *pool, size_t pool_len)
{
    uint64_t *s = &a->seed;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/t%d-%d", root, a->index, k);
    CHECK(mkdir(dir, 0755) == 0);
    uint32_t nparts = 1 + (uint32_t)rng_below(s, 300);
    uint32_t n = (uint32_t)rng_below(s, 600);
    rec *recs = calloc(n + 1, sizeof *recs);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)rng_below(s, rng_below(s, 8) ? 600 : 40000);
        recs[i] = (rec){(uint32_t)rng_below(s, nparts), len, pool + rng_below(s, pool_len - len)};
    }
    int shape = (int)rng_below(s, 4); /* 0 one sorted batch, 1 several batches, 2 unsorted, 3 mixed */
    if (shape <= 1) { /* arrival order becomes partition order, stably */
        rec *sorted = calloc(n + 1, sizeof *sorted);
        uint32_t m = 0;
        for (uint32_t p = 0; p < nparts; p++)
            for (uint32_t i = 0; i < n; i++)
                if (recs[i].partition == p) sorted[m++] = recs[i];
        free(recs);
        recs = sorted;
    }
    mts_writer_options o = test_options(dir, nparts);
    o.engine = engine;
    o.map_id = k;
    o.codec = (mts_codec)rng_below(s, 3);
    o.job_size = 1024u << rng_below(s, 8);
    o.strategy = rng_below(s, 6) == 0 ? MTS_STRATEGY_BASELINE : MTS_STRATEGY_STREAMING;
    mts_writer *w;
    char err[600];
    int rc = mts_writer_create(&o, &w, err, sizeof err);
    if (rc < 0) fprintf(stderr, "create: %s\n", err);
    CHECK_RC(rc);
    pthread_mutex_lock(&live_mu);
    live[a->index] = w;
    pthread_mutex_unlock(&live_mu);
    int fate = (int)rng_below(s, 10); /* 0: abort midway, 1: the directory vanishes before commit */
    uint32_t stop = fate == 0 ? (uint32_t)rng_below(s, n + 1) : n;
    int async = 0;
    uint32_t taken = 0, back = 0;
    if (shape == 0 || shape == 1) {
        /* batches: consecutive stretches of the sorted records */
        uint32_t nb = shape == 0 ? 1 : 1 + (uint32_t)rng_below(s, 5);
        async = (int)rng_below(s, 2); /* through add_batch_async: each batch freed when given back */
        uint32_t i = 0;
        for (uint32_t b = 0; b < nb && rc == 0 && i < stop; b++) {
            uint32_t end = b + 1 == nb ? stop : i + (uint32_t)rng_below(s, stop - i + 1);
            /* one batch: partitions [first of i, last of end) grouped */
            uint64_t *offs = calloc(nparts + 1, sizeof *offs), total = 0;
            for (uint32_t j = i; j < end; j++) total += recs[j].len;
            unsigned char *data = malloc(total + 1), *p = data;
            for (uint32_t j = i; j < end; j++) {
                memcpy(p, recs[j].bytes, recs[j].len);
                p += recs[j].len;
                offs[recs[j].partition + 1] += recs[j].len;
            }
            for (uint32_t q = 0; q < nparts; q++) offs[q + 1] += offs[q];
            if (async) {
                given *g = malloc(sizeof *g);
                *g = (given){data, &back};
                rc = mts_writer_add_batch_async(w, data, offs, give_back, g);
                if (rc == 0) taken++;
                else free(g), free(data);
            } else {
                rc = mts_writer_add_batch(w, data, offs);
                free(data);
            }
            free(offs);
            i = end;
        }
    } else {
        for (uint32_t i = 0; i < stop && rc == 0; i++) {
            if (shape == 3 && rng_below(s, 50) == 0) {
                uint64_t *offs = calloc(nparts + 1, sizeof *offs);
                for (uint32_t q = recs[i].partition; q < nparts; q++) offs[q + 1] = recs[i].len;
                rc = mts_writer_add_batch(w, recs[i].bytes, offs);
                free(offs);
            } else {
                rc = mts_writer_append(w, recs[i].partition, recs[i].bytes, recs[i].len);
            }
        }
    }
    if (rc < 0) fprintf(stderr, "write: %s\n", mts_writer_error(w));
    CHECK_RC(rc);
    if (fate == 0) {
        CHECK_RC(mts_writer_abort(w));
        CHECK(writer_bytes_held(w) == 0 && dir_count(dir) == 0);
        a->out.aborted++;
    } else if (fate == 1) {
        rm_rf(dir); /* the data file stays open; the commit's renames fail */
        rc = mts_writer_commit(w, NULL, NULL, NULL);
        CHECK(rc == -ENOENT && strstr(mts_writer_error(w), dir));
        CHECK(writer_bytes_held(w) == 0);
        a->out.failed++;
    } else {
        CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
        CHECK(writer_bytes_held(w) == 0);
        a->out.committed++;
    }
    CHECK(__atomic_load_n(&back, __ATOMIC_RELAXED) == taken); /* all given back by abort or commit */
    pthread_mutex_lock(&live_mu);
    live[a->index] = NULL;
    mts_writer_free(w);
    pthread_mutex_unlock(&live_mu);
    if (fate >= 2) read_back(dir, k, recs, n, nparts, o.codec);
    if (fate != 1) rm_rf(dir);
    free(recs);
}

static unsigned char *pool;
static size_t pool_len;
static int writers_each = 4;

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    for (int k = 0; k < writers_each; k++) one_writer(a, k, pool, pool_len);
    return NULL;
}

static uint64_t monitor_peak;
static void *monitor_main(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&done_flag, __ATOMIC_ACQUIRE)) {
        mts_engine_stats es;
        CHECK_RC(mts_engine_get_stats(engine, &es));
        CHECK(es.bytes_held <= BUDGET && es.peak_bytes_held <= BUDGET && es.threads_busy <= WORKERS);
        if (es.bytes_held > monitor_peak) monitor_peak = es.bytes_held;
        pthread_mutex_lock(&live_mu); /* a writer is freed only under live_mu */
        for (int i = 0; i < THREADS; i++) {
            mts_writer_stats ws;
            if (live[i]) CHECK(mts_writer_get_stats(live[i], &ws) == 0 && ws.bytes_held <= BUDGET);
        }
        pthread_mutex_unlock(&live_mu);
        usleep(2000);
    }
    return NULL;
}

/* ---- writers fitted to the engine's sharers ---------------------------------
 * AT_ONCE writers of records out of partition order each take an arena, then
 * wait for one another before they commit, as a Spark executor's tasks hold
 * theirs while the JVM makes the next buffer of rows. With arenas fitted to
 * AT_ONCE writers all get there; fitted to two (arenas of a quarter of the
 * budget each, as if one writer had the budget to itself), only the first
 * few do, the others waiting for the budget until those commit. */
#define AT_ONCE 8
#define AT_ONCE_BUDGET (16u << 20)

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, open;
} gate;

typedef struct at_once_arg {
    mts_writer *w;
    gate *g;
    int rc;
} at_once_arg;

static void *at_once_main(void *arg)
{
    at_once_arg *a = arg;
    /* Partition 1 then 0: held from the second record on, in an arena. */
    int rc = mts_writer_append(a->w, 1, "later", 5);
    if (rc == 0) rc = mts_writer_append(a->w, 0, "first", 5);
    pthread_mutex_lock(&a->g->mu);
    a->g->arrived++;
    pthread_cond_broadcast(&a->g->cv);
    while (!a->g->open) pthread_cond_wait(&a->g->cv, &a->g->mu);
    pthread_mutex_unlock(&a->g->mu);
    uint64_t lens[4];
    if (rc == 0) rc = mts_writer_commit(a->w, lens, NULL, NULL);
    if (rc == 0 && (lens[0] == 0 || lens[1] == 0 || lens[2] || lens[3])) rc = MTS_E_CORRUPT; /* a partition lost or one too many */
    a->rc = rc;
    return NULL;
}

/* Runs AT_ONCE writers made with writers_at_once (0: fitted to the writers
 * on the engine; all are made before any takes an arena, so the first ones
 * saw fewer others when they were created, as the first tasks of a stage
 * do); returns how many took their arena within wait_ms. */
static int writers_at_once_run(uint32_t writers_at_once, unsigned wait_ms)
{
    mts_engine *e;
    char err[300];
    CHECK_RC(mts_engine_create(2, AT_ONCE_BUDGET, &e, err, sizeof err));
    mts_writer_options o = test_options(root, 4);
    o.engine = e;
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    at_once_arg args[AT_ONCE];
    pthread_t th[AT_ONCE];
    o.writers_at_once = writers_at_once;
    for (int i = 0; i < AT_ONCE; i++) {
        o.map_id = i;
        args[i] = (at_once_arg){test_writer(&o), &g, 0};
    }
    for (int i = 0; i < AT_ONCE; i++) pthread_create(&th[i], NULL, at_once_main, &args[i]);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&g.mu);
    while (g.arrived < AT_ONCE && pthread_cond_timedwait(&g.cv, &g.mu, &until) == 0) {
    }
    int arrived = g.arrived;
    g.open = 1; /* the rest take their arenas as the first commit */
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < AT_ONCE; i++) {
        pthread_join(th[i], NULL);
        CHECK_RC(args[i].rc);
        mts_writer_free(args[i].w);
    }
    mts_engine_stats es;
    CHECK_RC(mts_engine_get_stats(e, &es));
    CHECK(es.peak_bytes_held <= AT_ONCE_BUDGET && es.clients == 0);
    mts_engine_free(e);
    rm_rf(root);
    CHECK(mkdir(root, 0755) == 0);
    return arrived;
}

static void test_writers_at_once(void)
{
    int fitted = writers_at_once_run(AT_ONCE, 20000);
    int as_two = writers_at_once_run(2, 300);
    int automatic = writers_at_once_run(0, 20000);
    printf("test_shared: %d writers on a %u MiB budget holding arenas at once: %d fitted to %d, %d fitted to 2, "
           "%d fitted to the writers on the engine\n", AT_ONCE, AT_ONCE_BUDGET >> 20, fitted, AT_ONCE, as_two,
           automatic);
    CHECK(fitted == AT_ONCE);
    CHECK(as_two < AT_ONCE); /* the control: arenas of a quarter of the budget leave some waiting */
    CHECK(automatic == AT_ONCE);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_shared: not done within the watchdog's time: deadlock or starvation\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static int count_threads(void)
{
    return dir_count("/proc/self/task");
}

int main(void)
{
    test_init_seed("test_shared");
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    const char *e = getenv("MTS_TEST_WRITERS");
    if (e) writers_each = atoi(e);
    root = test_tmpdir("shared");
    pool_len = 1 << 20;
    pool = malloc(pool_len);
    uint64_t s = test_seed;
    for (size_t i = 0; i < pool_len; i++) pool[i] = (unsigned char)(rng_below(&s, 7) + (i / 97) % 5);

    test_writers_at_once();

    char err[300];
    CHECK_RC(mts_engine_create(WORKERS, BUDGET, &engine, err, sizeof err));

    /* A writer on an engine starts no thread. */
    int before = count_threads();
    mts_writer_options o = test_options(root, 10);
    o.engine = engine;
    mts_writer *w = test_writer(&o);
    CHECK(count_threads() == before);
    CHECK_RC(mts_writer_append(w, 3, "abc", 3));
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    CHECK(count_threads() == before);
    mts_writer_free(w);
    rm_rf(root);
    CHECK(mkdir(root, 0755) == 0);

    pthread_t mon, th[THREADS];
    worker_arg args[THREADS];
    pthread_create(&mon, NULL, monitor_main, NULL);
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){i, test_seed * 1000003u + (uint64_t)i, {0, 0, 0}};
        pthread_create(&th[i], NULL, worker_main, &args[i]);
    }
    outcome total = {0, 0, 0};
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total.committed += args[i].out.committed;
        total.aborted += args[i].out.aborted;
        total.failed += args[i].out.failed;
    }
    __atomic_store_n(&done_flag, 1, __ATOMIC_RELEASE);
    pthread_join(mon, NULL);

    mts_engine_stats es;
    CHECK_RC(mts_engine_get_stats(engine, &es));
    CHECK(es.bytes_held == es.bytes_cached && es.bytes_cached <= BUDGET && es.peak_bytes_held <= BUDGET && es.clients == 0);
    printf("test_shared: %d writers on %d threads, budget %u: %d committed and read back, %d aborted, %d failed at "
           "commit; peak held %llu, %llu jobs, waited %.2f s in all, %llu reclaims\n",
           THREADS * writers_each, WORKERS, BUDGET, total.committed, total.aborted, total.failed,
           (unsigned long long)es.peak_bytes_held, (unsigned long long)es.jobs, es.budget_wait_ns / 1e9,
           (unsigned long long)es.reclaims);
    CHECK(total.committed > 0 && total.aborted > 0 && total.failed > 0);
    mts_engine_free(engine);
    rm_rf(root);
    free(root);
    free(pool);
    TEST_DONE("test_shared");
}

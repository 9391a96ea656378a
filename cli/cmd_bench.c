/* mtshuffle bench: one configuration, every contender on the same generated
 * input, interleaved repetition by repetition (A B C ... A B C ...), the
 * outputs dropped between runs so every contender starts from the same page
 * cache state. Prints one JSON object with every sample; bench/suite.py runs
 * the sweeps and does the statistics.
 *
 * Contenders:
 *   streaming, baseline  the writer's two strategies, map tasks one after another
 *   compress             compress-only: the same segments, codec and threads, into memory
 *   write                write-only: those compressed bytes, one file per task, sequentially
 *   lz4, zstd            the external CLIs compressing the same bytes into one file
 *   read                 the reader: every partition of every map, as reducers fetch them
 *   read-always          the same with MTS_VERIFY_ALWAYS (every partition checked against
 *                        the checksum file before it is decoded)
 *   decode               decode-only: the same stored bytes, same threads, from memory
 *   tiny-engine          --tiny-writers writers of 100 bytes each, one after
 *                        another, on one engine made once (a Spark executor's
 *                        stage of tiny map tasks)
 *   tiny-own             the same, each writer with a private engine (its own threads)
 *   tiny-files           the same three files created, written and renamed
 *                        with plain system calls: the floor for a tiny commit */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"
#include "workload.h"

#define MTS_BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))

#define MAX_CONTENDERS 12
#define DEFAULT_CONTENDERS 8 /* the tiny-* ones and read-always run only when named */
#define MAX_PARALLEL 64  /* task threads */
static const char *all_contenders[MAX_CONTENDERS] = {"streaming", "baseline", "compress",    "write",
                                                     "lz4",       "zstd",     "read",        "decode",
                                                     "tiny-engine", "tiny-own", "tiny-files", "read-always"};

typedef struct item { /* one compress-only / decode-only unit */
    const unsigned char *src;
    uint64_t len;
    unsigned char *dst;
    size_t cap, out;
    uint32_t task;
} item;

static const char *input_names[] = {"batch", "records", "unsorted", "tagged", "async"}; /* IN_* */

typedef struct bench {
    mts_writer_options o;
    char dir[2048], peer_dir[2048], input_path[2300];
    uint32_t tasks, reps, warmup;
    double task_mib, batches;
    wl_params wl;
    int use[MAX_CONTENDERS];
    uint32_t *nbatches;
    wl_batch **batch;
    uint64_t bytes_in;
    item *items;
    size_t nitems;
    uint64_t compressed;
    /* decode-only */
    unsigned char **stored;
    uint64_t *stored_len;
    item *ditems;
    size_t nditems;
    size_t next;            /* work counter, atomic */
    uint32_t tiny_writers;
    int input;              /* IN_*: the shape the writers get the input in */
    int shared_engine;      /* writers and readers run on `engine` (else each its own) */
    uint32_t parallel;      /* tasks written at once, each on its own thread */
    uint32_t produce_us;    /* IN_TAGGED: the task's pause before each buffer */
    unsigned char ***tagged; /* per task, per batch: IN_TAGGED's buffers */
    mts_engine *engine;     /* tiny-engine's, made once before the clock starts */
    int failed;
} bench;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench: %s: %s\n", what, msg);
    exit(1);
}

static void remove_outputs(bench *b)
{
    char name[256], path[4096];
    for (uint32_t t = 0; t < b->tasks; t++) {
        const int kinds[] = {'d', 'i', 'c'};
        for (int k = 0; k < 3; k++) {
            if (mts_output_name(name, sizeof name, 0, t, kinds[k], MTS_CHECKSUM_ADLER32) < 0) continue;
            snprintf(path, sizeof path, "%s/%s", b->dir, name);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/task%u.bin", b->dir, t);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/peer.out", b->dir);
    unlink(path);
}

typedef struct writer_run {
    bench *b;
    mts_strategy strategy;
    uint32_t next;       /* the next task to write, taken atomically */
    uint64_t peak_held;  /* the largest writer's, under mu */
    uint64_t wait_ns;    /* the writers' budget waits, summed, under mu */
    pthread_mutex_t mu;
} writer_run;

/* One task thread (an executor core): writes tasks until none is left. */
static void *writer_main(void *arg)
{
    writer_run *wr = arg;
    bench *b = wr->b;
    for (;;) {
        uint32_t t = __atomic_fetch_add(&wr->next, 1, __ATOMIC_RELAXED);
        if (t >= b->tasks) return NULL;
        mts_writer_options o = b->o;
        o.dir = b->dir;
        o.map_id = t;
        o.strategy = wr->strategy;
        if (b->shared_engine) o.engine = b->engine;
        mts_writer *w;
        char err[600];
        if (mts_writer_create(&o, &w, err, sizeof err) < 0) die("create", err);
        uint32_t given_back = 0;
        int rc = bench_feed(w, b->input, b->batch[t], b->nbatches[t], b->tagged ? b->tagged[t] : NULL, b->produce_us,
                            &given_back);
        if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
        if (rc < 0) die("write", mts_writer_error(w));
        if (b->input == IN_ASYNC && __atomic_load_n(&given_back, __ATOMIC_RELAXED) != b->nbatches[t])
            die("write", "add_batch_async: a batch was not given back by commit");
        mts_writer_stats st;
        mts_writer_get_stats(w, &st);
        pthread_mutex_lock(&wr->mu);
        if (st.peak_bytes_held > wr->peak_held) wr->peak_held = st.peak_bytes_held;
        wr->wait_ns += st.budget_wait_ns;
        pthread_mutex_unlock(&wr->mu);
        mts_writer_free(w);
    }
}

/* The tasks, `parallel` at a time (one after another when 1). */
static void run_writer(bench *b, mts_strategy strategy, uint64_t *peak_held, double *wait_s)
{
    writer_run wr = {b, strategy, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    if (b->parallel <= 1) {
        writer_main(&wr);
    } else {
        pthread_t th[MAX_PARALLEL];
        for (uint32_t i = 0; i < b->parallel; i++)
            if (pthread_create(&th[i], NULL, writer_main, &wr) != 0) die("task thread", "cannot start");
        for (uint32_t i = 0; i < b->parallel; i++) pthread_join(th[i], NULL);
    }
    *peak_held = wr.peak_held;
    *wait_s = wr.wait_ns / 1e9;
}

static void *compress_main(void *arg)
{
    bench *b = arg;
    mts_cctx *c;
    if (mts_cctx_create(b->o.codec, b->o.level, b->o.block_size, &c) < 0) die("codec", "create");
    for (;;) {
        size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->nitems) break;
        item *it = &b->items[i];
        if (mts_cctx_compress(c, it->src, it->len, it->dst, it->cap, &it->out) < 0) die("compress", "failed");
    }
    mts_cctx_free(c);
    return NULL;
}

static int count_sink(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    *(uint64_t *)ctx += len;
    return 0;
}

static void *decode_main(void *arg)
{
    bench *b = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->nditems) break;
        uint64_t n = 0;
        if (mts_decompress(b->o.codec, b->ditems[i].src, b->ditems[i].len, count_sink, &n, NULL) < 0)
            die("decode", "corrupt");
        b->ditems[i].out = n;
    }
    return NULL;
}

static void run_threads(bench *b, void *(*fn)(void *))
{
    pthread_t th[256];
    b->next = 0;
    for (uint32_t i = 0; i < b->o.threads; i++) pthread_create(&th[i], NULL, fn, b);
    for (uint32_t i = 0; i < b->o.threads; i++) pthread_join(th[i], NULL);
}

/* The writer's segments: each partition of each batch in job_size pieces. */
static void plan_items(bench *b)
{
    mts_cctx *c;
    if (mts_cctx_create(b->o.codec, b->o.level, b->o.block_size, &c) < 0) die("codec", "create");
    size_t cap = 1024;
    b->items = malloc(cap * sizeof *b->items);
    for (uint32_t t = 0; t < b->tasks; t++)
        for (uint32_t k = 0; k < b->nbatches[t]; k++) {
            wl_batch *bt = &b->batch[t][k];
            for (uint32_t p = 0; p < b->o.num_partitions; p++)
                for (uint64_t o = bt->offsets[p]; o < bt->offsets[p + 1]; o += b->o.job_size) {
                    if (b->nitems == cap) b->items = realloc(b->items, (cap *= 2) * sizeof *b->items);
                    item *it = &b->items[b->nitems++];
                    it->src = bt->grouped + o;
                    it->len = MTS_BENCH_MIN(b->o.job_size, bt->offsets[p + 1] - o);
                    it->cap = mts_cctx_bound(c, it->len);
                    it->dst = malloc(it->cap);
                    memset(it->dst, 0, it->cap); /* fault the pages in before timing */
                    it->task = t;
                }
        }
    mts_cctx_free(c);
}

static void write_only(bench *b)
{
    size_t i = 0;
    for (uint32_t t = 0; t < b->tasks; t++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/task%u.bin", b->dir, t);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) die(path, strerror(errno));
        struct iovec iov[1024];
        while (i < b->nitems && b->items[i].task == t) {
            int n = 0;
            while (n < 1024 && i < b->nitems && b->items[i].task == t) {
                iov[n++] = (struct iovec){b->items[i].dst, b->items[i].out};
                i++;
            }
            for (int k = 0; k < n;) { /* writev may be short */
                ssize_t w = writev(fd, iov + k, n - k);
                if (w < 0) die("write", strerror(errno));
                while (k < n && (size_t)w >= iov[k].iov_len) w -= (ssize_t)iov[k++].iov_len;
                if (k < n) { iov[k].iov_base = (char *)iov[k].iov_base + w; iov[k].iov_len -= (size_t)w; }
            }
        }
        if (b->o.fsync && fsync(fd)) die("fsync", strerror(errno));
        close(fd);
    }
}

static void run_peer(bench *b, const char *which)
{
    char out[4096], threads[32];
    snprintf(out, sizeof out, "%s/peer.out", b->dir);
    snprintf(threads, sizeof threads, "-T%u", b->o.threads);
    pid_t pid = fork();
    if (pid == 0) {
        if (!strcmp(which, "lz4")) execlp("lz4", "lz4", "-1", "-q", "-f", b->input_path, out, (char *)NULL);
        else execlp("zstd", "zstd", "-1", threads, "-q", "-f", b->input_path, "-o", out, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) die(which, "the peer failed (is it installed?)");
    if (b->o.fsync) {
        int fd = open(out, O_RDONLY);
        if (fd >= 0) { fsync(fd); close(fd); }
    }
}

static void run_read(bench *b, int verify)
{
    mts_reader_options ro;
    mts_reader_options_init(&ro);
    ro.verify_checksums = verify;
    ro.threads = b->o.threads;
    ro.codec = b->o.codec;
    if (b->shared_engine) ro.engine = b->engine;
    mts_reader *r;
    char err[600];
    if (mts_reader_open_dir(&ro, b->dir, 0, &r, err, sizeof err) < 0) die("read", err);
    /* Every partition as its own range (a reducer's blocks), queued at once. */
    mts_read_piece pc;
    int rc = 0;
    for (uint32_t p = 0; p < b->o.num_partitions && rc == 0; p++) rc = mts_reader_queue(r, p, p + 1);
    while (rc >= 0 && (rc = mts_reader_next(r, &pc)) == 1) {}
    if (rc < 0) die("read", mts_reader_error(r));
    mts_reader_free(r);
}

/* Loads the streaming outputs into memory for decode-only. */
static void load_stored(bench *b)
{
    b->stored = calloc(b->tasks, sizeof *b->stored);
    b->stored_len = calloc(b->tasks, sizeof *b->stored_len);
    b->ditems = malloc((size_t)b->tasks * b->o.num_partitions * sizeof *b->ditems);
    for (uint32_t t = 0; t < b->tasks; t++) {
        char name[256], path[4096];
        mts_output_name(name, sizeof name, 0, t, 'i', MTS_CHECKSUM_NONE);
        snprintf(path, sizeof path, "%s/%s", b->dir, name);
        FILE *f = fopen(path, "rb");
        if (!f) die(path, strerror(errno));
        uint64_t *off = malloc(((size_t)b->o.num_partitions + 1) * 8);
        for (uint32_t p = 0; p <= b->o.num_partitions; p++) {
            unsigned char v[8];
            if (fread(v, 1, 8, f) != 8) die(path, "short index");
            off[p] = 0;
            for (int k = 0; k < 8; k++) off[p] = off[p] << 8 | v[k];
        }
        fclose(f);
        mts_output_name(name, sizeof name, 0, t, 'd', MTS_CHECKSUM_NONE);
        snprintf(path, sizeof path, "%s/%s", b->dir, name);
        f = fopen(path, "rb");
        b->stored_len[t] = off[b->o.num_partitions];
        b->stored[t] = malloc(b->stored_len[t] + 1);
        if (!f || fread(b->stored[t], 1, b->stored_len[t], f) != b->stored_len[t]) die(path, "short data");
        fclose(f);
        for (uint32_t p = 0; p < b->o.num_partitions; p++)
            if (off[p + 1] > off[p])
                b->ditems[b->nditems++] = (item){b->stored[t] + off[p], off[p + 1] - off[p], NULL, 0, 0, t};
        free(off);
    }
}

static void write_input_file(bench *b)
{
    snprintf(b->input_path, sizeof b->input_path, "%s/mtshuffle-bench-input.%d", b->peer_dir, (int)getpid());
    FILE *f = fopen(b->input_path, "wb");
    if (!f) die(b->input_path, strerror(errno));
    for (uint32_t t = 0; t < b->tasks; t++)
        for (uint32_t k = 0; k < b->nbatches[t]; k++)
            if (fwrite(b->batch[t][k].grouped, 1, b->batch[t][k].bytes, f) != b->batch[t][k].bytes) die("input", "write");
    fclose(f);
}

static void bench_free(bench *b)
{
    for (size_t i = 0; i < b->nitems; i++) free(b->items[i].dst);
    free(b->items);
    for (uint32_t t = 0; t < b->tasks; t++) {
        for (uint32_t k = 0; k < b->nbatches[t]; k++) {
            wl_free_batch(&b->batch[t][k]);
            if (b->tagged) free(b->tagged[t][k]);
        }
        free(b->batch[t]);
        if (b->tagged) free(b->tagged[t]);
        if (b->stored) free(b->stored[t]);
    }
    free(b->batch);
    free(b->tagged);
    free(b->nbatches);
    free(b->stored);
    free(b->stored_len);
    free(b->ditems);
}

#define B "bench"
#define MAX_REPS 64 /* samples kept per contender */

int cmd_bench(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    mts_writer_options_init(&b.o);
    b.o.num_partitions = 200;
    snprintf(b.dir, sizeof b.dir, "out/bench");
    snprintf(b.peer_dir, sizeof b.peer_dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    b.tasks = 16;
    b.reps = 5;
    b.task_mib = 64;
    b.batches = 1;
    b.wl.seed = 42;
    for (int i = 0; i < DEFAULT_CONTENDERS; i++) b.use[i] = 1;
    b.tiny_writers = 200;
    b.shared_engine = 1;
    b.parallel = 1;
    static const struct option opts[] = {
        {"tasks", 1, 0, 'T'}, {"task-mib", 1, 0, 'M'}, {"batches", 1, 0, 'B'}, {"partitions", 1, 0, 'P'},
        {"skew", 1, 0, 'S'}, {"codec", 1, 0, 'c'}, {"level", 1, 0, 'l'}, {"threads", 1, 0, 't'},
        {"budget-mib", 1, 0, 'b'}, {"fsync", 0, 0, 'f'}, {"reps", 1, 0, 'r'}, {"dir", 1, 0, 'd'},
        {"peer-dir", 1, 0, 'p'}, {"contenders", 1, 0, 'C'}, {"tiny-writers", 1, 0, 'W'}, {"input", 1, 0, 'I'},
        {"engine", 1, 0, 'E'}, {"parallel", 1, 0, 'Q'}, {"warmup", 1, 0, 'w'}, {"produce-ms", 1, 0, 'm'},
        {"writers-at-once", 1, 0, 'A'}, {"job-kib", 1, 0, 'J'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int ch, bad = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'T': bad = cli_u32(B, "tasks", optarg, 1, 100000, &b.tasks); break;
        case 'M': bad = cli_double(B, "task-mib", optarg, 0.001, 1 << 20, &b.task_mib); break;
        case 'B': bad = cli_double(B, "batches", optarg, 1, 1000000, &b.batches); break;
        case 'P': bad = cli_u32(B, "partitions", optarg, 1, MTS_MAX_PARTITIONS, &b.o.num_partitions); break;
        case 'S': bad = cli_double(B, "skew", optarg, 0, 1, &b.wl.skew); break;
        case 'c':
            if (cli_parse_codec(optarg) < 0) {
                fprintf(stderr, "bench: --codec: unknown codec '%s'\n", optarg);
                return 2;
            }
            b.o.codec = (mts_codec)cli_parse_codec(optarg);
            break;
        case 'l': bad = cli_i32(B, "level", optarg, 1, MTS_MAX_ZSTD_LEVEL, &b.o.level); break;
        case 't': bad = cli_u32(B, "threads", optarg, 1, MTS_MAX_THREADS, &b.o.threads); break;
        case 'b':
            bad = cli_size(B, "budget-mib", optarg, 1048576, MTS_MIN_BYTES_IN_FLIGHT, 1ull << 40,
                           &b.o.max_bytes_in_flight);
            break;
        case 'f': b.o.fsync = 1; break;
        case 'r': bad = cli_u32(B, "reps", optarg, 1, MAX_REPS, &b.reps); break;
        case 'w': bad = cli_u32(B, "warmup", optarg, 0, MAX_REPS, &b.warmup); break;
        case 'd': snprintf(b.dir, sizeof b.dir, "%s", optarg); break;
        case 'p': snprintf(b.peer_dir, sizeof b.peer_dir, "%s", optarg); break;
        case 'C': {
            for (int i = 0; i < MAX_CONTENDERS; i++) b.use[i] = 0;
            char list[512], *save = NULL;
            snprintf(list, sizeof list, "%s", optarg);
            for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
                int i = 0;
                while (i < MAX_CONTENDERS && strcmp(name, all_contenders[i])) i++;
                if (i == MAX_CONTENDERS) {
                    fprintf(stderr, "bench: --contenders: unknown contender '%s'\n", name);
                    return 2;
                }
                b.use[i] = 1;
            }
            break;
        }
        case 'E':
            if (!strcmp(optarg, "shared")) b.shared_engine = 1;
            else if (!strcmp(optarg, "per-task")) b.shared_engine = 0;
            else {
                fprintf(stderr, "bench: --engine: '%s' is not shared or per-task\n", optarg);
                return 2;
            }
            break;
        case 'Q': bad = cli_u32(B, "parallel", optarg, 1, MAX_PARALLEL, &b.parallel); break;
        case 'm': {
            double ms;
            bad = cli_double(B, "produce-ms", optarg, 0, 60000, &ms);
            b.produce_us = (uint32_t)(ms * 1000 + 0.5);
            break;
        }
        case 'A': bad = cli_u32(B, "writers-at-once", optarg, 0, 65536, &b.o.writers_at_once); break;
        case 'J': {
            uint64_t v;
            bad = cli_size(B, "job-kib", optarg, 1024, MTS_MIN_JOB_SIZE, UINT32_MAX, &v);
            b.o.job_size = (uint32_t)v;
            break;
        }
        case 'W': bad = cli_u32(B, "tiny-writers", optarg, 1, 1000000, &b.tiny_writers); break;
        case 'I': {
            int i = 0;
            while (i < 5 && strcmp(optarg, input_names[i])) i++;
            if (i == 5) {
                fprintf(stderr, "bench: --input: '%s' is not batch, records, unsorted, tagged or async\n", optarg);
                return 2;
            }
            b.input = i;
            break;
        }
        case 'h':
            printf("usage: mtshuffle bench [--tasks N] [--task-mib M] [--batches B] [--partitions N] [--skew F]\n"
                   "       [--codec C] [--level L] [--threads T] [--budget-mib M] [--fsync] [--reps R]\n"
                   "       [--dir DIR] [--peer-dir DIR] [--tiny-writers N] [--input batch|records|unsorted|tagged|async]\n"
                   "       (the writers get the same rows as batches grouped by partition, as sorted\n"
                   "       records, as records in generation order, as those in tagged buffers, or as\n"
                   "       the batches through mts_writer_add_batch_async)\n"
                   "       [--engine shared|per-task] (writers and readers on one engine made before\n"
                   "       the clock starts, as in a Spark executor (the default), or each its own)\n"
                   "       [--parallel P] (P tasks at a time, each on its own thread, as an executor's\n"
                   "       P cores run them; default 1: one after another)\n"
                   "       [--produce-ms MS] (tagged input: each task pauses MS ms before each 8 MiB\n"
                   "       buffer, as a Spark task makes its rows on its own core; it sleeps, so the\n"
                   "       pauses stand for cores this machine need not have)\n"
                   "       [--writers-at-once N] (the writers' option; default 0: fitted to the\n"
                   "       writers and readers on the engine as each arena is taken)\n"
                   "       [--job-kib K] (input bytes per compression job, KiB; default 1024)\n"
                   "       [--contenders streaming,baseline,compress,write,lz4,zstd,read,decode\n"
                   "                     (the default), tiny-engine, tiny-own, tiny-files, read-always]\n"
                   "       [--warmup W] (W repetitions of every contender first, not kept; default 0)\n"
                   "One configuration, contenders interleaved; prints JSON samples per run: seconds,\n"
                   "cpu (CPU seconds of every thread and of a peer tool), faults (minor page faults),\n"
                   "rss growth (and rss_first: in the first run, warm-up or not), peak budget held\n"
                   "and the writers' budget waits (seconds, summed over the tasks).\n"
                   "bench/suite.py runs the whole suite.\n");
            return 0;
        default: return 2;
        }
        if (bad) return 2;
    }
    if (b.produce_us && b.input != IN_TAGGED) {
        fprintf(stderr, "bench: --produce-ms needs --input tagged\n");
        return 2;
    }
    b.wl.partitions = b.o.num_partitions;
    if (cli_mkdirs(b.dir) != 0) die(b.dir, strerror(errno));

    b.nbatches = calloc(b.tasks, sizeof *b.nbatches);
    b.batch = calloc(b.tasks, sizeof *b.batch);
    if (b.input == IN_TAGGED) b.tagged = calloc(b.tasks, sizeof *b.tagged);
    uint64_t rows = (uint64_t)(b.task_mib * 1048576.0 / WL_ROW_BYTES);
    for (uint32_t t = 0; t < b.tasks; t++) {
        long nb = lround(b.batches * (t + 1)) - lround(b.batches * t);
        b.nbatches[t] = (uint32_t)(nb < 1 ? 1 : nb);
        b.batch[t] = calloc(b.nbatches[t], sizeof(wl_batch));
        if (b.tagged) b.tagged[t] = calloc(b.nbatches[t], sizeof(unsigned char *));
        for (uint32_t k = 0; k < b.nbatches[t]; k++) {
            uint64_t r = rows / b.nbatches[t] + (k < rows % b.nbatches[t]);
            if (wl_make_batch(&b.wl, t, k, r, b.input == IN_UNSORTED || b.input == IN_TAGGED, &b.batch[t][k]) < 0)
                die("workload", "out of memory");
            if (b.input == IN_TAGGED && !(b.tagged[t][k] = bench_tagged(&b.batch[t][k])))
                die("workload", "out of memory");
            b.bytes_in += b.batch[t][k].bytes;
        }
    }
    if (b.use[2] || b.use[3]) plan_items(&b);
    if (b.use[4] || b.use[5]) write_input_file(&b);
    for (uint32_t t = 0; t < b.tasks; t++) /* compress and write read the grouped rows (plan_items) */
        for (uint32_t k = 0; k < b.nbatches[t]; k++) bench_trim_input(&b.batch[t][k], b.input, b.use[2] || b.use[3]);
    char err[300];
    if ((b.use[8] || b.shared_engine) && mts_engine_create(b.o.threads, b.o.max_bytes_in_flight, &b.engine, err, sizeof err) < 0)
        die("engine", err);

    double samples[MAX_CONTENDERS][MAX_REPS], cpu[MAX_CONTENDERS][MAX_REPS], wait[MAX_CONTENDERS][MAX_REPS];
    uint64_t rss[MAX_CONTENDERS][MAX_REPS], held[MAX_CONTENDERS][MAX_REPS], faults[MAX_CONTENDERS][MAX_REPS];
    uint64_t bytes_out = 0;
    if (b.reps > 64) b.reps = 64;
    /* read and decode run right after streaming, on its output. */
    static const int order[MAX_CONTENDERS] = {0, 6, 11, 7, 1, 2, 3, 4, 5, 8, 9, 10};
    /* Each run's RSS growth; a contender's first run, warm-up or not, is the
     * one that shows its footprint, and is also reported on its own. */
    uint64_t rss_first[MAX_CONTENDERS] = {0};
    /* The first W repetitions run every contender as the others do but are
     * not kept: the process's first buffers, files and allocator state. */
    for (uint32_t it = 0; it < b.warmup + b.reps; it++) {
        uint32_t rep = it < b.warmup ? 0 : it - b.warmup; /* a warm-up's slot is overwritten */
        for (int oi = 0; oi < MAX_CONTENDERS; oi++) {
            int c = order[oi];
            if (!b.use[c]) continue;
            int needs_output = c == 6 || c == 7 || c == 11;
            if (!needs_output) remove_outputs(&b);
            if (c >= 8 && c <= 10) tiny_remove(b.dir, b.tiny_writers);
            if (c == 3 && !b.use[2]) { b.next = 0; run_threads(&b, compress_main); }
            if (needs_output && !b.use[0] && (c == 6 || (c == 11 && !b.use[6]) || (c == 7 && !b.use[6] && !b.use[11]))) {
                uint64_t h;
                double ws;
                remove_outputs(&b);
                run_writer(&b, MTS_STRATEGY_STREAMING, &h, &ws);
            }
            if (c == 7 && !b.stored) load_stored(&b);
            held[c][rep] = 0;
            wait[c][rep] = 0;
            cli_reset_peak_rss();
            uint64_t rss0 = cli_current_rss();
            double cpu0, cpu1;
            uint64_t faults0, faults1;
            cli_usage(&cpu0, &faults0);
            double t0 = cli_now();
            switch (c) {
            case 0: run_writer(&b, MTS_STRATEGY_STREAMING, &held[c][rep], &wait[c][rep]); break;
            case 1: run_writer(&b, MTS_STRATEGY_BASELINE, &held[c][rep], &wait[c][rep]); break;
            case 2: run_threads(&b, compress_main); break;
            case 3: write_only(&b); break;
            case 4: run_peer(&b, "lz4"); break;
            case 5: run_peer(&b, "zstd"); break;
            case 6: run_read(&b, MTS_VERIFY_AUTO); break;
            case 7: run_threads(&b, decode_main); break;
            case 8: tiny_writers(b.dir, &b.o, b.engine, b.tiny_writers); break;
            case 9: tiny_writers(b.dir, &b.o, NULL, b.tiny_writers); break;
            case 10: tiny_files(b.dir, b.o.num_partitions, b.tiny_writers); break;
            case 11: run_read(&b, MTS_VERIFY_ALWAYS); break;
            }
            samples[c][rep] = cli_now() - t0;
            cli_usage(&cpu1, &faults1);
            cpu[c][rep] = cpu1 - cpu0;
            faults[c][rep] = faults1 - faults0;
            uint64_t peak = cli_peak_rss();
            rss[c][rep] = peak > rss0 ? peak - rss0 : 0;
            if (it == 0) rss_first[c] = rss[c][rep];
            if (c == 0 && it == 0) {
                for (uint32_t t = 0; t < b.tasks; t++) {
                    char name[256], path[4096];
                    struct stat st;
                    mts_output_name(name, sizeof name, 0, t, 'd', MTS_CHECKSUM_NONE);
                    snprintf(path, sizeof path, "%s/%s", b.dir, name);
                    if (stat(path, &st) == 0) bytes_out += (uint64_t)st.st_size;
                }
            }
        }
    }
    remove_outputs(&b);
    tiny_remove(b.dir, b.tiny_writers);
    mts_engine_free(b.engine);
    if (b.input_path[0]) unlink(b.input_path);
    for (size_t i = 0; i < b.nitems; i++) b.compressed += b.items[i].out;

    printf("{\"config\":{\"tasks\":%u,\"task_mib\":%.3f,\"batches\":%.3f,\"partitions\":%u,\"skew\":%.3f,"
           "\"codec\":\"%s\",\"level\":%d,\"threads\":%u,\"budget\":%llu,\"fsync\":%d,\"reps\":%u,\"warmup\":%u,\"dir\":\"%s\","
           "\"input\":\"%s\",\"engine\":\"%s\",\"parallel\":%u,\"produce_ms\":%.3f,\"writers_at_once\":%u,"
           "\"job_size\":%u},"
           "\"bytes_in\":%llu,\"bytes_out\":%llu,\"compressed_only_bytes\":%llu,\"samples\":{",
           b.tasks, b.task_mib, b.batches, b.o.num_partitions, b.wl.skew, mts_codec_name(b.o.codec), b.o.level,
           b.o.threads, (unsigned long long)b.o.max_bytes_in_flight, b.o.fsync, b.reps, b.warmup, b.dir, input_names[b.input],
           b.shared_engine ? "shared" : "per-task", b.parallel, b.produce_us / 1000.0, b.o.writers_at_once,
           b.o.job_size, (unsigned long long)b.bytes_in, (unsigned long long)bytes_out, (unsigned long long)b.compressed);
    const char *sep = "";
    for (int c = 0; c < MAX_CONTENDERS; c++) {
        if (!b.use[c]) continue;
        printf("%s\"%s\":{\"seconds\":[", sep, all_contenders[c]);
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%.6f", r ? "," : "", samples[c][r]);
        printf("],\"cpu\":[");
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%.6f", r ? "," : "", cpu[c][r]);
        printf("],\"faults\":[");
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%llu", r ? "," : "", (unsigned long long)faults[c][r]);
        printf("],\"rss\":[");
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%llu", r ? "," : "", (unsigned long long)rss[c][r]);
        printf("],\"rss_first\":%llu,\"peak_held\":[", (unsigned long long)rss_first[c]);
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%llu", r ? "," : "", (unsigned long long)held[c][r]);
        printf("],\"budget_wait\":[");
        for (uint32_t r = 0; r < b.reps; r++) printf("%s%.6f", r ? "," : "", wait[c][r]);
        printf("]}");
        sep = ",";
    }
    printf("}}\n");
    bench_free(&b);
    return 0;
}

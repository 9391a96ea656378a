/* mtshuffle write: runs map tasks over the generated workload. Inputs are
 * generated before the clock starts, so the time is the writer's alone. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"
#include "workload.h"

typedef int input_kind; /* IN_BATCH, IN_RECORDS, IN_UNSORTED, IN_TAGGED or IN_ASYNC (cli.h) */

typedef struct write_cfg {
    mts_writer_options o;
    char dir[4096];
    uint32_t tasks, parallel;
    double task_mib, batches;
    input_kind input;
    wl_params wl;
    int json, progress, keep_existing, shared_engine;
} write_cfg;

typedef struct task {
    uint32_t nbatches;
    wl_batch *batch;
    unsigned char **tagged; /* IN_TAGGED: each batch's rows as tagged records */
    mts_writer_stats st;
    double seconds;
    int rc;
    char err[600];
    int adopted;
} task;

typedef struct run {
    write_cfg *cfg;
    task *tasks;
    uint32_t next;           /* guarded by mu */
    pthread_mutex_t mu;
    uint64_t done_bytes;     /* atomic */
    uint64_t total_bytes;
    int finished;            /* atomic */
} run;

static const char *input_name(input_kind k)
{
    return k == IN_BATCH ? "batch" : k == IN_RECORDS ? "records" : k == IN_UNSORTED ? "unsorted"
         : k == IN_TAGGED ? "tagged" : "async";
}

static void write_usage(FILE *f)
{
    fprintf(f,
            "usage: mtshuffle write [options]\n"
            "  --dir DIR           output directory, created if missing (./out)\n"
            "  --tasks N           map tasks (4)\n"
            "  --parallel N        tasks run at once (1)\n"
            "  --task-mib M        input per task in MiB (64)\n"
            "  --batches B         batches per task, may be fractional: the average (1)\n"
            "  --partitions N      reduce partitions (200)\n"
            "  --skew F            fraction of rows forced into partition 0 (0)\n"
            "  --input KIND        batch (add_batch), records (append, grouped),\n"
            "                      unsorted (append, generation order), tagged (append_tagged,\n"
            "                      8 MiB buffers of tagged records in generation order, as the\n"
            "                      Spark plugin gives them), async (add_batch_async) (batch)\n"
            "  --codec C           lz4, zstd or none (lz4)\n"
            "  --level L           zstd level (1)\n"
            "  --block-kib K       lz4 block size in KiB (32)\n"
            "  --checksum A        ADLER32, CRC32, CRC32C or NONE (ADLER32)\n"
            "  --threads T         compression threads per task, or of the shared engine (2)\n"
            "  --budget-mib M      max bytes in flight per task, or of the shared engine, MiB (64)\n"
            "  --engine E          per-task (each task's writer has its own threads and budget)\n"
            "                      or shared (one engine for the process, as in a Spark executor)\n"
            "  --job-kib K         input bytes per compression job, KiB (1024)\n"
            "  --strategy S        streaming or baseline (streaming)\n"
            "  --fsync             fsync the outputs at commit\n"
            "  --shuffle-id N      shuffle id in the file names (0)\n"
            "  --seed N            workload seed (42)\n"
            "  --keep-existing     do not delete earlier outputs first (a rerun then adopts them)\n"
            "  --json              print the summary as JSON\n"
            "  --no-progress       no progress bar (shown only on a terminal anyway)\n");
}

#define W "write"

static int parse_args(int argc, char **argv, write_cfg *c)
{
    mts_writer_options_init(&c->o);
    snprintf(c->dir, sizeof c->dir, "out");
    c->tasks = 4;
    c->parallel = 1;
    c->task_mib = 64;
    c->batches = 1;
    c->input = IN_BATCH;
    c->o.num_partitions = 200;
    c->wl.seed = 42;
    c->progress = isatty(2);
    enum { O_DIR = 256, O_TASKS, O_PAR, O_TMIB, O_BATCHES, O_PARTS, O_SKEW, O_INPUT, O_CODEC, O_LEVEL,
           O_BLOCK, O_SUM, O_THREADS, O_BUDGET, O_JOB, O_STRAT, O_FSYNC, O_SHUF, O_SEED, O_KEEP, O_ENGINE,
           O_JSON, O_NOPROG, O_HELP };
    static const struct option opts[] = {
        {"dir", 1, 0, O_DIR}, {"tasks", 1, 0, O_TASKS}, {"parallel", 1, 0, O_PAR},
        {"task-mib", 1, 0, O_TMIB}, {"batches", 1, 0, O_BATCHES}, {"partitions", 1, 0, O_PARTS},
        {"skew", 1, 0, O_SKEW}, {"input", 1, 0, O_INPUT}, {"codec", 1, 0, O_CODEC},
        {"level", 1, 0, O_LEVEL}, {"block-kib", 1, 0, O_BLOCK}, {"checksum", 1, 0, O_SUM},
        {"threads", 1, 0, O_THREADS}, {"budget-mib", 1, 0, O_BUDGET}, {"job-kib", 1, 0, O_JOB},
        {"strategy", 1, 0, O_STRAT}, {"fsync", 0, 0, O_FSYNC}, {"shuffle-id", 1, 0, O_SHUF},
        {"seed", 1, 0, O_SEED}, {"keep-existing", 0, 0, O_KEEP}, {"engine", 1, 0, O_ENGINE}, {"json", 0, 0, O_JSON},
        {"no-progress", 0, 0, O_NOPROG}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};
    int ch, bad = 0;
    uint64_t v;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case O_DIR: snprintf(c->dir, sizeof c->dir, "%s", optarg); break;
        case O_TASKS: bad = cli_u32(W, "tasks", optarg, 1, 1000000, &c->tasks); break;
        case O_PAR: bad = cli_u32(W, "parallel", optarg, 1, 1024, &c->parallel); break;
        case O_TMIB: bad = cli_double(W, "task-mib", optarg, 0.001, 1 << 20, &c->task_mib); break;
        case O_BATCHES: bad = cli_double(W, "batches", optarg, 1, 1000000, &c->batches); break;
        case O_PARTS: bad = cli_u32(W, "partitions", optarg, 1, MTS_MAX_PARTITIONS, &c->o.num_partitions); break;
        case O_SKEW: bad = cli_double(W, "skew", optarg, 0, 1, &c->wl.skew); break;
        case O_INPUT:
            if (!strcmp(optarg, "batch")) c->input = IN_BATCH;
            else if (!strcmp(optarg, "records")) c->input = IN_RECORDS;
            else if (!strcmp(optarg, "unsorted")) c->input = IN_UNSORTED;
            else if (!strcmp(optarg, "tagged")) c->input = IN_TAGGED;
            else if (!strcmp(optarg, "async")) c->input = IN_ASYNC;
            else { fprintf(stderr, "write: unknown --input '%s'\n", optarg); return -1; }
            break;
        case O_CODEC:
            if (cli_parse_codec(optarg) < 0) { fprintf(stderr, "write: unknown --codec '%s'\n", optarg); return -1; }
            c->o.codec = (mts_codec)cli_parse_codec(optarg);
            break;
        case O_LEVEL: bad = cli_i32(W, "level", optarg, 1, MTS_MAX_ZSTD_LEVEL, &c->o.level); break;
        case O_BLOCK:
            bad = cli_size(W, "block-kib", optarg, 1024, MTS_LZ4_MIN_BLOCK, MTS_LZ4_MAX_BLOCK, &v);
            c->o.block_size = (uint32_t)v;
            break;
        case O_SUM:
            if (!strcasecmp(optarg, "NONE")) c->o.checksum = MTS_CHECKSUM_NONE;
            else if (mts_checksum_parse(optarg, &c->o.checksum) < 0) {
                fprintf(stderr, "write: unknown --checksum '%s'\n", optarg);
                return -1;
            }
            break;
        case O_THREADS: bad = cli_u32(W, "threads", optarg, 1, MTS_MAX_THREADS, &c->o.threads); break;
        case O_BUDGET:
            bad = cli_size(W, "budget-mib", optarg, 1048576, MTS_MIN_BYTES_IN_FLIGHT, 1ull << 40,
                           &c->o.max_bytes_in_flight);
            break;
        case O_JOB:
            bad = cli_size(W, "job-kib", optarg, 1024, MTS_MIN_JOB_SIZE, UINT32_MAX, &v);
            c->o.job_size = (uint32_t)v;
            break;
        case O_STRAT:
            if (!strcmp(optarg, "streaming")) c->o.strategy = MTS_STRATEGY_STREAMING;
            else if (!strcmp(optarg, "baseline")) c->o.strategy = MTS_STRATEGY_BASELINE;
            else { fprintf(stderr, "write: unknown --strategy '%s'\n", optarg); return -1; }
            break;
        case O_FSYNC: c->o.fsync = 1; break;
        case O_SHUF: bad = cli_i32(W, "shuffle-id", optarg, 0, INT32_MAX, &c->o.shuffle_id); break;
        case O_SEED: bad = cli_u64(W, "seed", optarg, 0, UINT64_MAX, &c->wl.seed); break;
        case O_KEEP: c->keep_existing = 1; break;
        case O_ENGINE:
            if (!strcmp(optarg, "shared")) c->shared_engine = 1;
            else if (!strcmp(optarg, "per-task")) c->shared_engine = 0;
            else { fprintf(stderr, "write: --engine: '%s' is not shared or per-task\n", optarg); return -1; }
            break;
        case O_JSON: c->json = 1; break;
        case O_NOPROG: c->progress = 0; break;
        case O_HELP: write_usage(stdout); exit(0);
        default: write_usage(stderr); return -1;
        }
        if (bad) return -1;
    }
    if (optind < argc) { fprintf(stderr, "write: unexpected argument '%s'\n", argv[optind]); return -1; }
    c->wl.partitions = c->o.num_partitions;
    return 0;
}

static void *progress_main(void *arg)
{
    run *r = arg;
    while (!__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE)) {
        uint64_t d = __atomic_load_n(&r->done_bytes, __ATOMIC_RELAXED);
        int pct = r->total_bytes ? (int)(100.0 * (double)d / (double)r->total_bytes) : 100;
        char bar[41];
        for (int i = 0; i < 40; i++) bar[i] = i < pct * 40 / 100 ? '#' : ' ';
        bar[40] = 0;
        fprintf(stderr, "\r[%s] %3d%%  %.0f / %.0f MiB", bar, pct, (double)d / 1048576.0,
                (double)r->total_bytes / 1048576.0);
        usleep(200000);
    }
    fprintf(stderr, "\r%70s\r", "");
    return NULL;
}

static int run_task(run *r, uint32_t t)
{
    write_cfg *c = r->cfg;
    task *tk = &r->tasks[t];
    mts_writer_options o = c->o;
    o.dir = c->dir;
    o.map_id = t;
    mts_writer *w = NULL;
    double t0 = cli_now();
    int rc = mts_writer_create(&o, &w, tk->err, sizeof tk->err);
    uint32_t given_back = 0; /* IN_ASYNC: batches the writer gave back */
    for (uint32_t b = 0; rc == 0 && b < tk->nbatches; b++) {
        rc = bench_feed(w, c->input, &tk->batch[b], 1, tk->tagged ? &tk->tagged[b] : NULL, 0, &given_back);
        __atomic_add_fetch(&r->done_bytes, tk->batch[b].bytes, __ATOMIC_RELAXED);
    }
    mts_commit_result res = {0};
    if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, &res);
    tk->seconds = cli_now() - t0;
    if (w) {
        if (rc < 0) snprintf(tk->err, sizeof tk->err, "%s", mts_writer_error(w));
        mts_writer_get_stats(w, &tk->st);
    }
    /* A committed writer has given back every batch it borrowed. */
    if (rc == 0 && c->input == IN_ASYNC && __atomic_load_n(&given_back, __ATOMIC_RELAXED) != tk->nbatches) {
        snprintf(tk->err, sizeof tk->err, "committed with %u of %u batches given back",
                 __atomic_load_n(&given_back, __ATOMIC_RELAXED), tk->nbatches);
        rc = MTS_E_STATE;
    }
    mts_writer_free(w);
    tk->rc = rc;
    tk->adopted = res.adopted;
    return rc;
}

static void *task_main(void *arg)
{
    run *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        uint32_t t = r->next++;
        pthread_mutex_unlock(&r->mu);
        if (t >= r->cfg->tasks) break;
        run_task(r, t);
    }
    return NULL;
}

static void remove_outputs(const write_cfg *c, uint32_t t)
{
    static const mts_checksum sums[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    char name[256], path[8192];
    const int kinds[] = {'d', 'i'};
    for (int k = 0; k < 2; k++) {
        mts_output_name(name, sizeof name, c->o.shuffle_id, t, kinds[k], MTS_CHECKSUM_NONE);
        snprintf(path, sizeof path, "%s/%s", c->dir, name);
        unlink(path);
    }
    for (int k = 0; k < 3; k++) {
        mts_output_name(name, sizeof name, c->o.shuffle_id, t, 'c', sums[k]);
        snprintf(path, sizeof path, "%s/%s", c->dir, name);
        unlink(path);
    }
}

int cmd_write(int argc, char **argv)
{
    write_cfg c;
    memset(&c, 0, sizeof c);
    if (parse_args(argc, argv, &c) < 0) return 2;
    if (cli_mkdirs(c.dir) != 0) {
        fprintf(stderr, "write: cannot create %s: %s\n", c.dir, strerror(errno));
        return 1;
    }
    task *tasks = calloc(c.tasks, sizeof *tasks);
    if (!tasks) return 1;
    uint64_t rows_per_task = (uint64_t)(c.task_mib * 1048576.0 / WL_ROW_BYTES);
    uint64_t total_bytes = 0, total_rows = 0;
    double g0 = cli_now();
    for (uint32_t t = 0; t < c.tasks; t++) {
        /* An average of c.batches batches per task, rows spread evenly. */
        long nb = lround(c.batches * (t + 1)) - lround(c.batches * t);
        tasks[t].nbatches = (uint32_t)(nb < 1 ? 1 : nb);
        int tagged = c.input == IN_TAGGED;
        tasks[t].batch = calloc(tasks[t].nbatches, sizeof(wl_batch));
        if (tagged) tasks[t].tagged = calloc(tasks[t].nbatches, sizeof(unsigned char *));
        if (!tasks[t].batch || (tagged && !tasks[t].tagged)) return 1;
        for (uint32_t b = 0; b < tasks[t].nbatches; b++) {
            uint64_t rows = rows_per_task / tasks[t].nbatches + (b < rows_per_task % tasks[t].nbatches);
            if (wl_make_batch(&c.wl, t, b, rows, c.input == IN_UNSORTED || tagged, &tasks[t].batch[b]) < 0 ||
                (tagged && !(tasks[t].tagged[b] = bench_tagged(&tasks[t].batch[b])))) {
                fprintf(stderr, "write: out of memory generating the workload\n");
                return 1;
            }
            total_bytes += tasks[t].batch[b].bytes;
            total_rows += rows;
            bench_trim_input(&tasks[t].batch[b], c.input, 0);
        }
        if (!c.keep_existing) remove_outputs(&c, t);
    }
    double gen_s = cli_now() - g0;
    /* The writer's memory is what the peak gains over the input's. */
    int rss_reset = cli_reset_peak_rss() == 0;
    uint64_t rss_before = rss_reset ? cli_current_rss() : 0;

    mts_engine *engine = NULL;
    if (c.shared_engine) {
        char err[300];
        if (mts_engine_create(c.o.threads, c.o.max_bytes_in_flight, &engine, err, sizeof err) < 0) {
            fprintf(stderr, "write: %s\n", err);
            return 1;
        }
        c.o.engine = engine;
    }
    run r = {&c, tasks, 0, PTHREAD_MUTEX_INITIALIZER, 0, total_bytes, 0};
    pthread_t prog, *th = calloc(c.parallel, sizeof *th);
    if (c.progress) pthread_create(&prog, NULL, progress_main, &r);
    double t0 = cli_now();
    for (uint32_t i = 0; i < c.parallel; i++) pthread_create(&th[i], NULL, task_main, &r);
    for (uint32_t i = 0; i < c.parallel; i++) pthread_join(th[i], NULL);
    double wall = cli_now() - t0;
    __atomic_store_n(&r.finished, 1, __ATOMIC_RELEASE);
    if (c.progress) pthread_join(prog, NULL);
    uint64_t peak_rss = cli_peak_rss();
    mts_engine_stats es = {0};
    if (engine) {
        mts_engine_get_stats(engine, &es);
        mts_engine_free(engine);
    }

    mts_writer_stats sum = {0};
    uint64_t peak_held = 0;
    int failed = 0, adopted = 0;
    double task_s = 0;
    for (uint32_t t = 0; t < c.tasks; t++) {
        task *tk = &tasks[t];
        if (tk->rc < 0) {
            fprintf(stderr, "write: task %u failed: %s (%s)\n", t, tk->err, mts_strerror(tk->rc));
            failed++;
        }
        adopted += tk->adopted;
        task_s += tk->seconds;
        sum.bytes_in += tk->st.bytes_in;
        sum.bytes_out += tk->st.bytes_out;
        sum.records += tk->st.records;
        sum.batches += tk->st.batches;
        sum.runs += tk->st.runs;
        sum.jobs += tk->st.jobs;
        sum.bytes_spilled += tk->st.bytes_spilled;
        sum.bytes_merged += tk->st.bytes_merged;
        sum.compress_ns += tk->st.compress_ns;
        sum.write_ns += tk->st.write_ns;
        sum.budget_wait_ns += tk->st.budget_wait_ns;
        if (tk->st.peak_bytes_held > peak_held) peak_held = tk->st.peak_bytes_held;
    }
    if (engine) peak_held = es.peak_bytes_held; /* all tasks together */
    uint64_t writer_rss = peak_rss > rss_before ? peak_rss - rss_before : 0;
    const char *strategy = c.o.strategy == MTS_STRATEGY_BASELINE ? "baseline" : "streaming";
    if (failed) {
        /* no summary of a run that did not complete */
    } else if (c.json) {
        printf("{\"tasks\":%u,\"parallel\":%u,\"partitions\":%u,\"batches_per_task\":%.3f,"
               "\"input\":\"%s\",\"codec\":\"%s\",\"level\":%d,\"checksum\":\"%s\",\"threads\":%u,"
               "\"budget\":%llu,\"engine\":\"%s\",\"strategy\":\"%s\",\"fsync\":%d,\"skew\":%.3f,"
               "\"bytes_in\":%llu,\"bytes_out\":%llu,\"rows\":%llu,\"records\":%llu,\"runs\":%llu,\"jobs\":%llu,"
               "\"bytes_spilled\":%llu,\"bytes_merged\":%llu,\"wall_s\":%.6f,\"task_s\":%.6f,"
               "\"generate_s\":%.3f,\"compress_s\":%.6f,\"write_s\":%.6f,\"budget_wait_s\":%.6f,"
               "\"peak_bytes_held\":%llu,\"peak_rss\":%llu,\"input_rss\":%llu,\"writer_rss\":%llu,"
               "\"rss_peak_reset\":%d,\"adopted\":%d,\"failed\":%d}\n",
               c.tasks, c.parallel, c.o.num_partitions, sum.batches / (double)c.tasks, input_name(c.input),
               mts_codec_name(c.o.codec), c.o.level, mts_checksum_name(c.o.checksum), c.o.threads,
               (unsigned long long)c.o.max_bytes_in_flight, c.shared_engine ? "shared" : "per-task", strategy, c.o.fsync,
               c.wl.skew,
               (unsigned long long)sum.bytes_in, (unsigned long long)sum.bytes_out,
               (unsigned long long)total_rows, (unsigned long long)sum.records, (unsigned long long)sum.runs, (unsigned long long)sum.jobs,
               (unsigned long long)sum.bytes_spilled, (unsigned long long)sum.bytes_merged, wall, task_s,
               gen_s, sum.compress_ns / 1e9, sum.write_ns / 1e9, sum.budget_wait_ns / 1e9,
               (unsigned long long)peak_held, (unsigned long long)peak_rss,
               (unsigned long long)rss_before, (unsigned long long)writer_rss, rss_reset, adopted, failed);
    } else {
        char a[32], b[32], d[32], e[32], f[32], g[32];
        printf("mtshuffle write: %u tasks (%u at once), %u partitions, %.2f batches/task, input %s\n",
               c.tasks, c.parallel, c.o.num_partitions, sum.batches / (double)c.tasks, input_name(c.input));
        printf("  codec %s, checksum %s, %u threads, budget %s, strategy %s%s\n", mts_codec_name(c.o.codec),
               mts_checksum_name(c.o.checksum), c.o.threads, cli_bytes(a, sizeof a, (double)c.o.max_bytes_in_flight),
               strategy, c.o.fsync ? ", fsync" : "");
        printf("  input    %s: %llu rows, %llu appended records (generated in %.2f s, not timed)\n",
               cli_bytes(a, sizeof a, (double)sum.bytes_in), (unsigned long long)total_rows,
               (unsigned long long)sum.records, gen_s);
        printf("  output   %s, ratio %.2f, in %s/\n", cli_bytes(b, sizeof b, (double)sum.bytes_out),
               sum.bytes_out ? (double)sum.bytes_in / (double)sum.bytes_out : 0.0, c.dir);
        printf("  wall     %.3f s, %.1f MiB/s of input\n", wall, (double)sum.bytes_in / 1048576.0 / wall);
        printf("  compress %.3f s (all workers), write %.3f s, budget wait %.3f s\n", sum.compress_ns / 1e9,
               sum.write_ns / 1e9, sum.budget_wait_ns / 1e9);
        printf("  runs %llu, spilled %s, merged %s, peak held %s, writer RSS %s (peak RSS %s)\n",
               (unsigned long long)sum.runs, cli_bytes(d, sizeof d, (double)sum.bytes_spilled),
               cli_bytes(e, sizeof e, (double)sum.bytes_merged), cli_bytes(f, sizeof f, (double)peak_held),
               cli_bytes(g, sizeof g, (double)writer_rss), cli_bytes(b, sizeof b, (double)peak_rss));
        if (adopted) printf("  %d task(s) adopted an existing committed output\n", adopted);
    }
    for (uint32_t t = 0; t < c.tasks; t++) {
        for (uint32_t b = 0; b < tasks[t].nbatches; b++) {
            wl_free_batch(&tasks[t].batch[b]);
            if (tasks[t].tagged) free(tasks[t].tagged[b]);
        }
        free(tasks[t].batch);
        free(tasks[t].tagged);
    }
    free(tasks);
    free(th);
    return failed ? 1 : 0;
}

/* What the writer does on the filesystem: the files a single batch creates
 * (watched with inotify), runs that stay in memory, spills the budget forces,
 * and both ways of copying runs (copy_file_range and pread/pwrite, across
 * filesystems too). */
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <time.h>

#include "checksum.h"
#include "dest.h"
#include "fileio.h"
#include "internal.h"
#include "testutil.h"

static int watch_fd, watch_wd;

static void watch(const char *dir)
{
    watch_fd = inotify_init1(IN_NONBLOCK);
    CHECK(watch_fd >= 0);
    watch_wd = inotify_add_watch(watch_fd, dir, IN_CREATE | IN_MOVED_TO);
    CHECK(watch_wd >= 0);
}

/* Counts created names ending in each of the given suffixes; anything else
 * created is a failure. Returns the number of events. */
static int drain_events(const char *const *allowed, int nallowed, int *other)
{
    char buf[65536] __attribute__((aligned(8)));
    int events = 0;
    *other = 0;
    for (;;) {
        ssize_t n = read(watch_fd, buf, sizeof buf);
        if (n <= 0) break;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            int ok = 0;
            for (int i = 0; i < nallowed; i++)
                if (strstr(e->name, allowed[i])) ok = 1;
            if (!ok) {
                fprintf(stderr, "unexpected file: %s\n", e->name);
                (*other)++;
            }
            events++;
            p += sizeof *e + e->len;
        }
    }
    return events;
}

static void fill_batch(uint64_t *s, unsigned char *data, uint64_t *offs, uint32_t n, uint64_t per)
{
    offs[0] = 0;
    for (uint32_t p = 0; p < n; p++) offs[p + 1] = offs[p] + per;
    for (uint64_t i = 0; i < offs[n]; i++) data[i] = (unsigned char)(i / 97 + (rng_below(s, 20) == 0));
}

static mts_writer *make(const char *dir, uint32_t n, uint64_t budget, mts_writer_options *o)
{
    *o = test_options(dir, n);
    o->max_bytes_in_flight = budget;
    mts_writer *w = test_writer(o);
    return w;
}

static void copy_paths(const char *src_dir, const char *dst_dir, int force_fallback)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/copy-src", src_dir);
    snprintf(b, sizeof b, "%s/copy-dst", dst_dir);
    int in = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644), out = open(b, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(in >= 0 && out >= 0);
    unsigned char *buf = malloc(3 << 20);
    for (int i = 0; i < (3 << 20); i++) buf[i] = (unsigned char)(i * 31 + i / 4099);
    CHECK_RC(fio_write_all(in, buf, 3 << 20));
    fio_force_copy_fallback(force_fallback);
    uint64_t before = fio_fallback_copies();
    CHECK_RC(fio_copy_range(in, 12345, out, (1u << 20) + 77));
    CHECK_RC(fio_copy_range(in, 0, out, 10));
    CHECK_RC(fio_copy_range(in, 5, out, 0));
    uint64_t used_fallback = fio_fallback_copies() - before;
    if (force_fallback) CHECK(used_fallback == 2);
    printf("copy %s -> %s: %s\n", src_dir, dst_dir, used_fallback ? "pread/pwrite" : "copy_file_range");
    unsigned char *got = malloc((1u << 20) + 87);
    CHECK_RC(fio_pread_all(out, got, (1u << 20) + 87, 0));
    CHECK(!memcmp(got, buf + 12345, (1u << 20) + 77) && !memcmp(got + (1u << 20) + 77, buf, 10));
    /* A source shorter than asked is an error, not a silent short copy. */
    CHECK(fio_copy_range(in, (3u << 20) - 5, out, 100) == -EIO);
    close(in);
    close(out);
    unlink(a);
    unlink(b);
    free(buf);
    free(got);
    fio_force_copy_fallback(0);
}

/* ---- the run store on its own ---------------------------------------------------- */

static const eng_client_ops no_jobs = {NULL, NULL, NULL};
static int store_err;
static void store_fail(void *ctx, int code, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "run store: %s\n", msg);
    if (!store_err) store_err = code;
}
static int store_failed(void *ctx) { (void)ctx; return store_err; }

/* A chunk of partition p: len bytes of `fill`, paid from the client's budget. */
static chunk *fill_chunk(eng_client *c, uint32_t p, char fill, size_t len)
{
    chunk *k = mts_malloc(sizeof *k + len); /* the store frees it */
    CHECK(k != NULL && eng_try_acquire(c, sizeof *k + len) == 0);
    unsigned char *data = (unsigned char *)(k + 1);
    memset(data, fill, len);
    *k = (chunk){.data = data, .len = len, .charge = sizeof *k + len, .partition = p,
                 .checksum = checksum_update(MTS_CHECKSUM_CRC32C, checksum_init(MTS_CHECKSUM_CRC32C), data, len)};
    return k;
}

/* Puts one chunk as job `job` and appends what it holds to the partition's
 * expected bytes. */
static void put_fill(destination *d, eng_client *c, uint64_t job, uint32_t p, char fill, size_t len,
                     char want[][4096])
{
    chunk *k = fill_chunk(c, p, fill, len);
    memset(want[p] + strlen(want[p]), fill, len);
    CHECK_RC(d->ops->put(d, &k, 1, job));
}

/* A run store on an engine of its own, its files dir/name.data and .run. */
typedef struct store_fixture {
    mts_engine *e;
    eng_client c;
    io_stats io;
    dest_env env;
    out_file out;
    run_store r;
} store_fixture;

static void store_setup(store_fixture *f, const char *dir, const char *name, uint32_t nparts)
{
    CHECK_RC(mts_engine_create(1, 1 << 20, &f->e, NULL, 0));
    CHECK_RC(eng_client_init(&f->c, f->e, &no_jobs, NULL));
    f->io = (io_stats){0, 0, 0};
    f->env = (dest_env){&f->c, MTS_CHECKSUM_CRC32C, nparts, &f->io, store_fail, store_failed, NULL};
    CHECK_RC(out_init(&f->out, &f->env));
    CHECK_RC(runs_init(&f->r, &f->env));
    snprintf(f->out.path, sizeof f->out.path, "%s/%s.data", dir, name);
    snprintf(f->r.path, sizeof f->r.path, "%s/%s.run", dir, name);
    store_err = 0;
}

/* After finish: partition p holds want[p] with its checksum, the data file
 * is their concatenation, the run file is gone and the budget all back.
 * Then frees the fixture. */
static void store_check_free(store_fixture *f, char want[][4096])
{
    CHECK(store_err == 0);
    static char all[8 * 4096];
    all[0] = 0;
    CHECK(f->env.nparts <= 8);
    for (uint32_t p = 0; p < f->env.nparts; p++) {
        size_t len = strlen(want[p]);
        strcat(all, want[p]);
        CHECK(f->out.len[p] == len);
        CHECK(f->out.sum[p] == checksum_update(MTS_CHECKSUM_CRC32C, checksum_init(MTS_CHECKSUM_CRC32C), want[p], len));
    }
    size_t got_len;
    unsigned char *got = read_file(f->out.path, &got_len);
    CHECK(got && got_len == strlen(all) && !memcmp(got, all, got_len));
    CHECK(access(f->r.path, F_OK) != 0);
    eng_client_stats cs;
    eng_client_stats_get(&f->c, &cs);
    CHECK(cs.held == 0);
    free(got);
    unlink(f->out.path);
    runs_free(&f->r);
    out_free(&f->out);
    eng_client_destroy(&f->c);
    mts_engine_free(f->e);
}

/* Runs spilled before the assembly starts, a run spilled while it goes on
 * (a reclaim between two of the last jobs: its bytes come after those the
 * earlier runs' read buffers were filled from), held
 * chunks and the last jobs' chunks, each drained job writing out the
 * partitions it completes and beginning the next: every partition gets its
 * bytes in arrival order, with its checksum; the run file is gone after
 * finish and the budget is all back. Run with either copy path. */
static void test_store_assembly(const char *dir, int force_fallback)
{
    store_fixture f;
    store_setup(&f, dir, "store", 4);
    run_store *r = &f.r;
    out_file *out = &f.out;
    eng_client *c = &f.c;
    fio_force_copy_fallback(force_fallback);
    static char want[4][4096];
    memset(want, 0, sizeof want);

    /* Jobs 1-6 before the input ends, 7-9 after; the producer notes each
     * partition's last job (p3's is 6). */
    static const struct { uint64_t job; uint32_t p; } noted[] = {{1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 1}, {6, 3},
                                                                 {7, 0}, {8, 1}, {8, 2}, {9, 2}};
    for (size_t i = 0; i < sizeof noted / sizeof noted[0]; i++) runs_note_job(r, noted[i].p, noted[i].job);
    for (uint32_t p = 0; p < 4; p++) put_fill(&r->d, c, 1 + p, p, (char)('a' + p), 1024, want);
    CHECK_RC(runs_spill(r)); /* the first run: exactly one page */
    put_fill(&r->d, c, 5, 1, 'B', 100, want);
    put_fill(&r->d, c, 6, 3, 'D', 200, want);
    CHECK(out->off == 0); /* held: the input has not ended */
    runs_end_input(r, out);
    put_fill(&r->d, c, 7, 0, 'x', 10, want); /* partition 0 complete, written; 1 begun */
    CHECK(out->len[0] == 1034 && out->len[1] == 1124 && out->off == 2158);
    CHECK_RC(runs_spill(r)); /* D: a run spilled while the assembly goes on */
    chunk *two[2] = {fill_chunk(c, 1, 'y', 20), fill_chunk(c, 2, 'z', 30)};
    memset(want[1] + strlen(want[1]), 'y', 20);
    memset(want[2] + strlen(want[2]), 'z', 30);
    CHECK_RC(r->d.ops->put(&r->d, two, 2, 8)); /* 1 complete; 2 begun */
    CHECK(out->len[1] == 1144 && out->len[2] == 1054 && out->len[3] == 0);
    put_fill(&r->d, c, 9, 2, 'w', 5, want); /* 2 complete; 3 begun: its stretches of both runs */
    CHECK(out->len[2] == 1059 && out->len[3] == 1224);
    CHECK_RC(r->d.ops->finish(&r->d, out));
    store_check_free(&f, want);
    fio_force_copy_fallback(0);
}

/* Chunks of one job share one block, as the workers make them: the block,
 * and the budget it holds, stay until the last of its chunks is written,
 * whichever partition that is, and both go then. */
static void test_store_block(const char *dir)
{
    store_fixture f;
    store_setup(&f, dir, "block", 3);
    run_store *r = &f.r;
    eng_client *c = &f.c;
    static char want[3][4096];
    memset(want, 0, sizeof want);
    static const struct { uint32_t p; size_t len; char fill; } part[2] = {{0, 100, 'a'}, {2, 300, 'c'}};
    uint64_t size = sizeof(chunk_block) + 2 * sizeof(chunk) + 400;
    chunk_block *b = mts_malloc(size);
    CHECK(b != NULL && eng_try_acquire(c, size) == 0);
    *b = (chunk_block){size, 2};
    chunk *k = (chunk *)(void *)(b + 1), *two[2];
    unsigned char *data = (unsigned char *)(k + 2);
    for (int i = 0; i < 2; i++) {
        memset(data, part[i].fill, part[i].len);
        memset(want[part[i].p], part[i].fill, part[i].len);
        k[i] = (chunk){.data = data, .block = b, .len = part[i].len, .charge = sizeof(chunk) + part[i].len,
                       .partition = part[i].p,
                       .checksum = checksum_update(MTS_CHECKSUM_CRC32C, checksum_init(MTS_CHECKSUM_CRC32C), data,
                                                   part[i].len)};
        two[i] = &k[i];
        data += part[i].len;
    }
    /* Job 1 is the block; partition 1 comes in jobs 2 and 3. */
    runs_note_job(r, 0, 1);
    runs_note_job(r, 2, 1);
    runs_note_job(r, 1, 3);
    CHECK_RC(r->d.ops->put(&r->d, two, 2, 1));
    runs_end_input(r, &f.out);
    put_fill(&r->d, c, 2, 1, 'm', 50, want); /* 0 written (the block's first chunk), 1 begun */
    eng_client_stats cs;
    eng_client_stats_get(c, &cs);
    CHECK(f.out.len[0] == 100 && f.out.len[2] == 0);
    CHECK(cs.held == size); /* the block, whole: its chunk of partition 2 is still held */
    put_fill(&r->d, c, 3, 1, 'n', 10, want); /* 1 complete, and 2: the block's last chunk */
    eng_client_stats_get(c, &cs);
    CHECK(f.out.len[2] == 300 && cs.held == 0);
    CHECK_RC(r->d.ops->finish(&r->d, &f.out));
    store_check_free(&f, want);
}

/* A chunk whose stream ends with `tail` (a codec's end block): body of
 * `fill`, then tail; paid from the client's budget. */
static chunk *tail_chunk(eng_client *c, uint32_t p, char fill, size_t body, const char *tail)
{
    size_t t = strlen(tail), len = body + t;
    chunk *k = fill_chunk(c, p, fill, len);
    memcpy(k->data + body, tail, t);
    k->tail = (uint32_t)t;
    k->body_sum = checksum_update(MTS_CHECKSUM_CRC32C, checksum_init(MTS_CHECKSUM_CRC32C), k->data, body);
    k->checksum = checksum_update(MTS_CHECKSUM_CRC32C, k->body_sum, k->data + body, t);
    return k;
}

/* Streams joined: chunks whose streams end with the same bytes, spilled
 * (the run holds them without their ends), held, and put after the input
 * ended (the assembly writes partitions as they complete): each partition
 * with bytes is its chunks' bodies in arrival order and one end, with the
 * checksum of exactly that; an empty partition stays empty. */
static void test_store_ends(const char *dir)
{
    store_fixture f;
    store_setup(&f, dir, "ends", 5);
    static char want[5][4096];
    memset(want, 0, sizeof want);
    /* (job, partition, fill, body): partition 3 gets nothing. */
    static const struct { uint64_t job; uint32_t p; char fill; size_t body; } put[] = {
        {1, 0, 'a', 700}, {2, 1, 'b', 50}, {3, 2, 'c', 900}, {4, 4, 'e', 10}, /* spilled */
        {5, 1, 'B', 300}, {6, 4, 'E', 20},                                    /* held */
        {7, 0, 'x', 5}, {8, 1, 'y', 6}, {9, 2, 'z', 7}, {10, 4, 'w', 8}};      /* after the end */
    const size_t nput = sizeof put / sizeof put[0];
    for (size_t i = 0; i < nput; i++) runs_note_job(&f.r, put[i].p, put[i].job);
    for (size_t i = 0; i < nput; i++) {
        if (i == 4) CHECK_RC(runs_spill(&f.r));
        if (i == 6) runs_end_input(&f.r, &f.out);
        chunk *k = tail_chunk(&f.c, put[i].p, put[i].fill, put[i].body, "#END");
        memset(want[put[i].p] + strlen(want[put[i].p]), put[i].fill, put[i].body);
        CHECK_RC(f.r.d.ops->put(&f.r.d, &k, 1, put[i].job));
        if (i == 6) CHECK(f.out.len[0] == 705 + 4); /* partition 0 complete: written, with its end */
    }
    CHECK_RC(f.r.d.ops->finish(&f.r.d, &f.out));
    CHECK(f.io.bytes_spilled == 700 + 50 + 900 + 10); /* bodies only */
    for (uint32_t p = 0; p < 5; p++)
        if (want[p][0]) strcat(want[p], "#END");
    store_check_free(&f, want);
}

int main(void)
{
    test_init_seed("test_files");
    uint64_t s = test_seed;
    char *dir = test_tmpdir("files");
    const uint32_t n = 200;
    uint64_t *offs = malloc((n + 1) * sizeof *offs);
    unsigned char *data = malloc(n * 40000);
    mts_writer_options o;
    mts_writer_stats st;

    /* One batch: only the data, index and checksum files (under temp names,
     * then renamed) are ever created. No partition or run file. */
    watch(dir);
    mts_writer *w = make(dir, n, 8 << 20, &o);
    fill_batch(&s, data, offs, n, 40000);
    CHECK_RC(mts_writer_add_batch(w, data, offs));
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    CHECK_RC(mts_writer_get_stats(w, &st));
    CHECK(st.bytes_spilled == 0 && st.bytes_merged == 0 && st.runs == 1);
    mts_writer_free(w);
    const char *finals[] = {".data", ".index", ".checksum.ADLER32"};
    int other, events = drain_events(finals, 3, &other);
    CHECK(other == 0);
    CHECK(events == 6); /* three temp files created, three renamed into place */
    CHECK(dir_count(dir) == 3);
    rm_rf(dir);
    mkdir(dir, 0755);
    inotify_rm_watch(watch_fd, watch_wd);
    close(watch_fd);

    /* Several batches that fit the budget: held in memory, no spill; the
     * first run (streamed before the id went down) is merged by copy. */
    w = make(dir, n, 64 << 20, &o);
    for (int b = 0; b < 4; b++) {
        fill_batch(&s, data, offs, n, 10000);
        CHECK_RC(mts_writer_add_batch(w, data, offs));
    }
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    CHECK_RC(mts_writer_get_stats(w, &st));
    CHECK(st.runs == 4 && st.bytes_spilled == 0 && st.bytes_merged > 0 && st.bytes_merged < st.bytes_out / 2);
    mts_writer_free(w);
    rm_rf(dir);
    mkdir(dir, 0755);

    /* The same with a small budget: now the budget forces spills, and the
     * cap still holds. */
    w = make(dir, n, 256 << 10, &o);
    for (int b = 0; b < 4; b++) {
        fill_batch(&s, data, offs, n, 10000);
        CHECK_RC(mts_writer_add_batch(w, data, offs));
    }
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    CHECK_RC(mts_writer_get_stats(w, &st));
    CHECK(st.bytes_spilled > 0 && st.peak_bytes_held <= (256 << 10));
    mts_writer_free(w);
    CHECK(dir_count(dir) == 3);
    rm_rf(dir);
    mkdir(dir, 0755);

    /* Baseline: one file per non-empty partition, then concatenation. */
    watch(dir);
    o = test_options(dir, n);
    o.strategy = MTS_STRATEGY_BASELINE;
    w = test_writer(&o);
    fill_batch(&s, data, offs, n, 4000);
    CHECK_RC(mts_writer_add_batch(w, data, offs));
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    mts_writer_free(w);
    const char *any[] = {""};
    events = drain_events(any, 1, &other);
    CHECK(events == 6 + (int)n); /* the outputs plus one file per partition */
    CHECK(dir_count(dir) == 3);
    inotify_rm_watch(watch_fd, watch_wd);
    close(watch_fd);

    /* A real I/O error (files capped by RLIMIT_FSIZE: write fails with EFBIG)
     * in the ordered writer, in a spill and in a baseline partition file: the
     * error comes back with errno kept and the file named, the budget is
     * released, no file is left, and every later call says the same. */
    rm_rf(dir);
    mkdir(dir, 0755);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, cap = {256 << 10, 0};
    getrlimit(RLIMIT_FSIZE, &old);
    cap.rlim_max = old.rlim_max;
    for (int scenario = 0; scenario < 3; scenario++) {
        o = test_options(dir, n);
        o.codec = MTS_CODEC_NONE;
        o.max_bytes_in_flight = scenario == 1 ? (512 << 10) : (16 << 20);
        o.strategy = scenario == 2 ? MTS_STRATEGY_BASELINE : MTS_STRATEGY_STREAMING;
        w = test_writer(&o);
        CHECK(setrlimit(RLIMIT_FSIZE, &cap) == 0);
        int rc = 0;
        for (int b = 0; b < 4 && rc == 0; b++) {
            fill_batch(&s, data, offs, n, scenario == 2 ? 40000 : 10000);
            rc = mts_writer_add_batch(w, data, offs);
        }
        if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
        printf("scenario %d: %s\n", scenario, mts_writer_error(w));
        CHECK(rc == -EFBIG);
        CHECK(strstr(mts_writer_error(w), dir) != NULL && strstr(mts_writer_error(w), "File too large"));
        CHECK(writer_bytes_held(w) == 0);
        CHECK(mts_writer_append(w, 0, "x", 1) == -EFBIG && mts_writer_commit(w, NULL, NULL, NULL) == -EFBIG);
        CHECK(dir_count(dir) == 0);
        mts_writer_free(w);
    }

    test_store_assembly(dir, 0);
    test_store_assembly(dir, 1);
    test_store_block(dir);
    test_store_ends(dir);

    /* Both copy paths, on one filesystem and across two (tmpfs to disk). */
    copy_paths(dir, dir, 0);
    copy_paths(dir, dir, 1);
    struct stat shm;
    if (stat("/dev/shm", &shm) == 0 && access("/dev/shm", W_OK) == 0) {
        copy_paths("/dev/shm", dir, 0);
        copy_paths("/dev/shm", dir, 1);
    }
    rm_rf(dir);
    free(dir);
    free(offs);
    free(data);
    TEST_DONE("test_files");
}

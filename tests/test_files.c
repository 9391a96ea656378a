/* What the writer does on the filesystem: the files a single batch creates
 * (watched with inotify), runs that stay in memory, spills the budget forces,
 * and both ways of copying runs (copy_file_range and pread/pwrite, across
 * filesystems too). */
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <time.h>

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

/* A full disk for real: a 2 MiB tmpfs mounted for the test (as root, or in
 * a user and mount namespace of its own where the kernel allows one; a skip,
 * with the reason, where neither can mount). Writers run out of space in the
 * streamed data file, a spill, a partition file and the merge: each returns
 * -ENOSPC naming the file and the step, releases its budget and leaves
 * nothing. */
#include <sched.h>
#include <sys/mount.h>
#include <time.h>

#include "testutil.h"

static char *dir;

static void unmount_dir(void)
{
    if (!dir) return;
    umount(dir);
    rmdir(dir);
}

/* Mounts a 2 MiB tmpfs on dir: directly, or in new user and mount namespaces. */
static int mount_small(char *why, size_t len)
{
    if (mount("tmpfs", dir, "tmpfs", 0, "size=2m") == 0) return 0;
    int first = errno;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 && mount("tmpfs", dir, "tmpfs", 0, "size=2m") == 0) return 0;
    snprintf(why, len, "cannot mount a tmpfs on %s: %s; in a new user namespace: %s", dir, strerror(first),
             strerror(errno));
    return -1;
}

int main(void)
{
    test_init_seed("test_enospc");
    uint64_t s = test_seed;
    dir = test_tmpdir("enospc");
    char why[600];
    if (mount_small(why, sizeof why) < 0) {
        rmdir(dir);
        TEST_SKIP("%s", why);
    }
    atexit(unmount_dir); /* also when a CHECK fails */
    const uint32_t n = 50;
    uint64_t offs[51];
    unsigned char *data = malloc(n * 20000);
    offs[0] = 0;
    for (uint32_t p = 0; p < n; p++) offs[p + 1] = offs[p] + 20000;
    for (uint64_t i = 0; i < offs[n]; i++) data[i] = (unsigned char)rng_next(&s); /* incompressible */
    /* scenario: where it runs out, and what the message must name */
    static const struct {
        mts_strategy strategy;
        uint64_t budget;
        mts_codec codec;
        int batches;
        const char *step;
    } sc[] = {
        {MTS_STRATEGY_STREAMING, 16 << 20, MTS_CODEC_LZ4, 1, "write data file"},   /* one batch, streamed */
        {MTS_STRATEGY_STREAMING, 16 << 20, MTS_CODEC_LZ4, 6, ""},                  /* held, then merge */
        {MTS_STRATEGY_STREAMING, 256 << 10, MTS_CODEC_LZ4, 6, ""},                 /* spills */
        {MTS_STRATEGY_BASELINE, 16 << 20, MTS_CODEC_LZ4, 6, "partition file"},
        {MTS_STRATEGY_STREAMING, 16 << 20, MTS_CODEC_ZSTD, 6, ""},
    };
    for (int k = 0; k < (int)(sizeof sc / sizeof sc[0]); k++) {
        mts_writer_options o = test_options(dir, n);
        o.strategy = sc[k].strategy;
        o.max_bytes_in_flight = sc[k].budget;
        o.codec = sc[k].codec;
        mts_writer *w = test_writer(&o);
        int rc = 0;
        /* one batch: 3 MiB of incompressible bytes in one call */
        uint64_t big[51];
        for (uint32_t p = 0; p <= n; p++) big[p] = sc[k].batches == 1 ? offs[p] * 3 : offs[p];
        unsigned char *input = data;
        if (sc[k].batches == 1) {
            input = malloc(big[n]);
            for (uint64_t i = 0; i < big[n]; i++) input[i] = (unsigned char)rng_next(&s);
        }
        for (int b = 0; b < sc[k].batches && rc == 0; b++) rc = mts_writer_add_batch(w, input, big);
        if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
        printf("scenario %d: %d (%s): %s\n", k, rc, mts_strerror(rc), mts_writer_error(w));
        CHECK(rc == -ENOSPC);
        CHECK(strstr(mts_writer_error(w), dir) != NULL && strstr(mts_writer_error(w), sc[k].step) != NULL);
        CHECK(writer_bytes_held(w) == 0);
        mts_writer_free(w);
        CHECK(dir_count(dir) == 0);
        if (input != data) free(input);
    }
    /* And a small task still fits and commits once the space is free. */
    mts_writer_options o = test_options(dir, n);
    mts_writer *w = test_writer(&o);
    CHECK_RC(mts_writer_append(w, 3, data, 1000));
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    mts_writer_free(w);
    CHECK(dir_count(dir) == 3);
    rm_rf(dir); /* the files; unmount_dir() at exit removes the mount point */
    free(data);
    TEST_DONE("test_enospc");
}

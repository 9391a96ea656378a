/* A full disk for real: a 2 MiB tmpfs mounted for the test (root only; exit
 * 77 where mounting is not allowed). Writers of every strategy run out of
 * space in the data file, a spill, a partition file or the merge: each
 * returns -ENOSPC naming the file, releases its budget and leaves nothing. */
#include <sys/mount.h>
#include <time.h>

#include "internal.h"
#include "testutil.h"

int main(void)
{
    test_init_seed("test_enospc");
    uint64_t s = test_seed;
    char *dir = test_tmpdir("enospc");
    if (mount("tmpfs", dir, "tmpfs", 0, "size=2m") != 0) {
        printf("cannot mount a tmpfs here (%s): skipped\n", strerror(errno));
        rmdir(dir);
        free(dir);
        return 77;
    }
    const uint32_t n = 50;
    uint64_t offs[51];
    unsigned char *data = malloc(n * 20000);
    offs[0] = 0;
    for (uint32_t p = 0; p < n; p++) offs[p + 1] = offs[p] + 20000;
    for (uint64_t i = 0; i < offs[n]; i++) data[i] = (unsigned char)rng_next(&s); /* incompressible */
    for (int scenario = 0; scenario < 4; scenario++) {
        mts_writer_options o;
        mts_writer_options_init(&o);
        o.dir = dir;
        o.num_partitions = n;
        o.strategy = scenario == 2 ? MTS_STRATEGY_BASELINE : MTS_STRATEGY_STREAMING;
        o.max_bytes_in_flight = scenario == 1 ? (256 << 10) : (16 << 20);
        o.codec = scenario == 3 ? MTS_CODEC_ZSTD : MTS_CODEC_LZ4;
        mts_writer *w;
        char err[256];
        CHECK_RC(mts_writer_create(&o, &w, err, sizeof err));
        int rc = 0;
        for (int b = 0; b < 6 && rc == 0; b++) rc = mts_writer_add_batch(w, data, offs);
        if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
        printf("scenario %d: %d (%s): %s\n", scenario, rc, mts_strerror(rc), mts_writer_error(w));
        CHECK(rc == -ENOSPC);
        CHECK(strstr(mts_writer_error(w), dir) != NULL);
        CHECK(writer_bytes_held(w) == 0);
        mts_writer_free(w);
        CHECK(dir_count(dir) == 0);
    }
    /* And a small task still fits and commits once the space is free. */
    mts_writer_options o;
    mts_writer_options_init(&o);
    o.dir = dir;
    o.num_partitions = n;
    mts_writer *w;
    char err[256];
    CHECK_RC(mts_writer_create(&o, &w, err, sizeof err));
    CHECK_RC(mts_writer_append(w, 3, data, 1000));
    CHECK_RC(mts_writer_commit(w, NULL, NULL, NULL));
    mts_writer_free(w);
    CHECK(dir_count(dir) == 3);
    umount(dir);
    rmdir(dir);
    free(dir);
    free(data);
    TEST_DONE("test_enospc");
}

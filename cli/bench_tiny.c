/* mtshuffle bench's tiny contenders: a stage of map tasks that write one
 * row each (Spark's 200-task stage over a tiny table), through the library
 * on a shared engine or on private ones, and the floor: the three files of
 * each output created, written and renamed with plain system calls. Each
 * output is shuffle 1, map t, in dir. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"

/* One row of 100 bytes, as a map task of a tiny stage writes it. */
static const unsigned char tiny_row[100] = "a row of a tiny map task";

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench: %s: %s\n", what, msg);
    exit(1);
}

void tiny_remove(const char *dir, uint32_t writers)
{
    char name[256], path[4096];
    for (uint32_t t = 0; t < writers; t++) {
        const int kinds[] = {'d', 'i', 'c'};
        for (int k = 0; k < 3; k++) {
            mts_output_name(name, sizeof name, 1, t, kinds[k], MTS_CHECKSUM_ADLER32);
            snprintf(path, sizeof path, "%s/%s", dir, name);
            unlink(path);
        }
    }
}

void tiny_writers(const char *dir, const mts_writer_options *base, mts_engine *engine, uint32_t writers)
{
    for (uint32_t t = 0; t < writers; t++) {
        mts_writer_options o = *base;
        o.dir = dir;
        o.shuffle_id = 1;
        o.map_id = t;
        o.engine = engine;
        mts_writer *w;
        char err[600];
        if (mts_writer_create(&o, &w, err, sizeof err) < 0) die("create", err);
        int rc = mts_writer_append(w, t % o.num_partitions, tiny_row, sizeof tiny_row);
        if (rc == 0) rc = mts_writer_commit(w, NULL, NULL, NULL);
        if (rc < 0) die("tiny", mts_writer_error(w));
        mts_writer_free(w);
    }
}

void tiny_files(const char *dir, uint32_t num_partitions, uint32_t writers)
{
    size_t ilen = ((size_t)num_partitions + 1) * 8;
    unsigned char *index = calloc(1, ilen);
    if (!index) die("tiny", "out of memory");
    for (uint32_t t = 0; t < writers; t++) {
        const int kinds[] = {'d', 'i', 'c'};
        const void *bufs[] = {tiny_row, index, index};
        const size_t lens[] = {sizeof tiny_row, ilen, ilen - 8};
        for (int k = 0; k < 3; k++) {
            char name[256], final[4096], tmp[4200];
            mts_output_name(name, sizeof name, 1, t, kinds[k], MTS_CHECKSUM_ADLER32);
            snprintf(final, sizeof final, "%s/%s", dir, name);
            snprintf(tmp, sizeof tmp, "%s.0", final);
            int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, bufs[k], lens[k]) != (ssize_t)lens[k]) die(tmp, strerror(errno));
            close(fd);
            if (rename(tmp, final) != 0) die(final, strerror(errno));
        }
    }
    free(index);
}

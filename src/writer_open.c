/* A writer's options, names and files: everything mts_writer_create() sets
 * up before the first record, and the defaults and limits of the options. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commit.h"
#include "fileio.h"
#include "layout.h"
#include "writer_int.h"

#define DEFAULT_THREADS 2u
#define DEFAULT_BUDGET (64ull << 20)
#define DEFAULT_JOB_SIZE (1u << 20)
#define MIN_JOB_SIZE MTS_MIN_JOB_SIZE
#define ARENA_MAX (32ull << 20)
#define ARENA_MIN (4u << 10)
#define MAX_WRITERS_AT_ONCE 65536u
#define PAGE_MAX (64u << 10) /* arena pages */
#define PAGE_MIN 256u

void mts_writer_options_init(mts_writer_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->num_partitions = 1;
    o->codec = MTS_CODEC_LZ4;
    o->level = 1;
    o->block_size = LZ4J_DEFAULT_BLOCK;
    o->checksum = MTS_CHECKSUM_ADLER32;
    o->strategy = MTS_STRATEGY_STREAMING;
    o->threads = DEFAULT_THREADS;
    o->max_bytes_in_flight = DEFAULT_BUDGET;
    o->job_size = DEFAULT_JOB_SIZE;
}

int writer_validate(const mts_writer_options *o, char *err, size_t len)
{
#define CHECK(cond, ...) do { if (!(cond)) return mts_msg(err, len, MTS_E_ARG, __VA_ARGS__); } while (0)
    CHECK((o->dir && *o->dir) || (o->data_path && *o->data_path), "options: dir is required");
    CHECK(!o->data_path || (*o->data_path && strlen(o->data_path) < MTS_PATH_CAP - 64),
          "options: data_path is empty or too long");
    CHECK(!o->dir || strlen(o->dir) < MTS_PATH_CAP - 128, "options: dir is too long");
    CHECK(o->shuffle_id >= 0, "options: shuffle_id %d is negative", o->shuffle_id);
    CHECK(o->map_id >= 0, "options: map_id %lld is negative", (long long)o->map_id);
    CHECK(o->num_partitions >= 1 && o->num_partitions <= MTS_MAX_PARTITIONS,
          "options: num_partitions %u is not in 1..%u", o->num_partitions, MTS_MAX_PARTITIONS);
    CHECK(codec_get(o->codec), "options: unknown codec %d", (int)o->codec);
    CHECK(o->codec != MTS_CODEC_ZSTD || (o->level >= 1 && o->level <= CODEC_ZSTD_MAX_LEVEL),
          "options: zstd level %d is not in 1..%d", o->level, CODEC_ZSTD_MAX_LEVEL);
    CHECK(o->block_size >= LZ4J_MIN_BLOCK && o->block_size <= LZ4J_MAX_BLOCK,
          "options: block_size %u is not in %u..%u", o->block_size, LZ4J_MIN_BLOCK, LZ4J_MAX_BLOCK);
    CHECK(mts_checksum_name(o->checksum), "options: unknown checksum %d", (int)o->checksum);
    CHECK(o->strategy == MTS_STRATEGY_STREAMING || o->strategy == MTS_STRATEGY_BASELINE,
          "options: unknown strategy %d", (int)o->strategy);
    CHECK(o->engine || (o->threads >= 1 && o->threads <= MTS_MAX_THREADS), "options: threads %u is not in 1..%u",
          o->threads, MTS_MAX_THREADS);
    CHECK(o->engine || o->max_bytes_in_flight >= MTS_MIN_BYTES_IN_FLIGHT,
          "options: max_bytes_in_flight %llu is below the minimum %u", (unsigned long long)o->max_bytes_in_flight,
          MTS_MIN_BYTES_IN_FLIGHT);
    CHECK(o->job_size >= MIN_JOB_SIZE, "options: job_size %u is below %u", o->job_size, MIN_JOB_SIZE);
    CHECK(o->writers_at_once <= MAX_WRITERS_AT_ONCE, "options: writers_at_once %u is above %u", o->writers_at_once,
          MAX_WRITERS_AT_ONCE);
    CHECK(o->reserved32 == 0, "options: reserved32 must be 0");
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        CHECK(o->reserved[i] == 0, "options: reserved[%zu] must be 0", i);
    struct stat st;
    CHECK(!o->dir || (fio_stat(o->dir, &st) == 0 && S_ISDIR(st.st_mode)), "options: dir %s is not a directory", o->dir);
#undef CHECK
    return 0;
}

/* Final names, the data file's temp name (final name + random token, as
 * Spark names its temp files) and the run file beside it. */
/* Final names; in data_path mode the caller's data path and a run file
 * beside it. The data file's temp name comes with the attempt slot, at
 * open_outputs(). */
int writer_build_names(mts_writer *w)
{
    if (w->o.data_path) { /* the caller names the data file and commits */
        char tmp[MTS_PATH_CAP];
        FORWARD_IF_ERROR(fio_temp_name(tmp, sizeof tmp, "x"));
        memcpy(w->token, tmp + 2, TOKEN_LEN + 1);
        snprintf(w->out.path, sizeof w->out.path, "%s", w->o.data_path);
        snprintf(w->runs.path, sizeof w->runs.path, "%s.%s.run", w->o.data_path, w->token);
        return 0;
    }
    char name[256];
    int kinds[3] = {LAYOUT_DATA, LAYOUT_INDEX, LAYOUT_CHECKSUM};
    char *dst[3] = {w->data_final, w->index_final, w->sum_final};
    for (int i = 0; i < 3; i++) {
        dst[i][0] = 0;
        if (kinds[i] == LAYOUT_CHECKSUM && w->o.checksum == MTS_CHECKSUM_NONE) continue;
        FORWARD_IF_ERROR(mts_output_name(name, sizeof name, w->o.shuffle_id, w->o.map_id, kinds[i], w->o.checksum));
        if (snprintf(dst[i], MTS_PATH_CAP, "%s/%s", w->dir, name) >= MTS_PATH_CAP - 32) return -ENAMETOOLONG;
    }
    return 0;
}

/* Job and job charge sizes fitted to the engine's budget. */
void writer_fit_sizes(mts_writer *w, uint64_t cap)
{
    w->job_size = MTS_MAX(MIN_JOB_SIZE, MTS_MIN((uint64_t)w->o.job_size, cap / 16));
    w->job_charge_cap = 2 * w->job_size + 4096;
}

/* The arena for a budget shared by `sharers` writers and readers. An arena's
 * reservation is about twice the arena (its pages and their compressed
 * bound) and a writer keeps one filling while its last compresses, so each
 * sharer's arenas take about 4 x arena: with an arena of budget / (4 x
 * sharers), that many writers can all be filling at once instead of the
 * later ones waiting for the budget while their callers' cores idle. */
void writer_fit_arena(mts_writer *w, uint64_t cap, uint32_t sharers)
{
    w->arena_sharers = sharers;
    uint64_t arena = MTS_MAX(ARENA_MIN, MTS_MIN(ARENA_MAX, cap / (4ull * sharers)));
    /* Pages: a power of two, at most a job; one in every partition fills at
     * most 7/8 of the arena, so that most pages are full when it is. */
    uint32_t page = PAGE_MAX;
    while (page > PAGE_MIN && (page > w->job_size || (uint64_t)page * w->o.num_partitions > arena / 8 * 7)) page /= 2;
    w->page = page;
    w->npages = (uint32_t)MTS_MAX(2, arena / page);
    w->arena_cap = (uint64_t)w->npages * page;
    w->arena_bytes = w->arena_cap + (uint64_t)w->npages * sizeof(uint32_t);
}

int writer_open_outputs(mts_writer *w, const char **what)
{
    if (w->o.data_path) {
        *what = "create the data file";
        snprintf(w->parts.base, sizeof w->parts.base, "%s.%s", w->out.path, w->token); /* as the run file */
        return out_create(&w->out);
    }
    /* Under the directory lock: claim an attempt slot, clearing what dead
     * attempts of this map output left; the slot's anchor is our data file. */
    *what = "lock the directory";
    int dfd = dir_lock(w->dir);
    if (dfd < 0) return dfd;
    *what = "claim an attempt slot (create the data file)";
    uint32_t slot, removed;
    int fd = attempt_claim(w->data_final, w->index_final, &slot, w->out.path, sizeof w->out.path, &removed);
    dir_unlock(dfd);
    if (fd < 0) return fd;
    w->out.fd = fd;
    w->stale_removed = removed;
    snprintf(w->token, sizeof w->token, "%u", slot);
    snprintf(w->runs.path, sizeof w->runs.path, "%s.run", w->out.path);
    if (w->o.strategy == MTS_STRATEGY_BASELINE) snprintf(w->parts.base, sizeof w->parts.base, "%s", w->out.path);
    return 0;
}

/* The writer's internal state. Shared between writer.c (intake, state
 * machine, commit), merge.c (run files and the final merge) and baseline.c.
 *
 * Threads: the caller's thread ("producer") runs the API; pool workers run
 * compression jobs; the pool's drain thread ("ordered writer") consumes jobs
 * in submission order. Each field says who writes it.
 *
 * Lock order: writer.mu, then limiter.mu or pool.mu (never the reverse);
 * callbacks run with no lock held. */
#ifndef MTS_WRITER_H
#define MTS_WRITER_H

#include <pthread.h>
#include <stdint.h>

#include "codec.h"
#include "limiter.h"
#include "mtshuffle.h"
#include "pool.h"

#define PATH_CAP 4096
#define TOKEN_LEN 32

/* One complete codec stream of one partition, held in memory. */
typedef struct chunk {
    struct chunk *next;
    uint64_t len;      /* bytes in data */
    uint64_t charge;   /* budget this chunk holds */
    uint32_t checksum; /* over data[0, len) */
    unsigned char data[];
} chunk;

/* One partition's stretch in one run of the run file: 16 bytes. A run holds
 * its partitions contiguously in partition order from its base offset. */
typedef struct run_entry {
    uint32_t partition;
    uint32_t checksum;
    uint64_t len;
} run_entry;

typedef struct run_index {
    uint64_t base;  /* offset of the run in the run file */
    uint32_t count; /* non-empty partitions in the run */
    run_entry *entries;
} run_index;

/* Input shared by the jobs cut from it. */
typedef struct inbuf {
    unsigned char *mem;        /* owned memory; NULL when borrowed from the caller */
    const unsigned char *base; /* where the bytes are */
    uint64_t charge;           /* budget held for mem */
    int refs;                  /* guarded by writer.mu; one per job plus the producer's */
} inbuf;

typedef enum {
    DEST_DATA = 0, /* append to the data file (partition-ordered input) */
    DEST_HOLD = 1, /* keep as chunks of their partitions (unordered input) */
    DEST_PART = 2  /* append to the partition's own file (baseline) */
} job_dest;

typedef struct seg {
    uint32_t partition;
    uint64_t off, len; /* in the job's inbuf */
    chunk *out;        /* set by the worker */
} seg;

typedef struct job {
    pool_job base;
    job_dest dest;
    inbuf *in;
    uint64_t struct_charge; /* budget for this struct */
    uint32_t nsegs;
    seg segs[];
} job;

/* Per-partition state: O(num_partitions), 48 bytes each. */
typedef struct part {
    uint64_t len;       /* bytes in the data file (DEST_DATA) or partition file; ordered writer */
    uint32_t checksum;  /* over those bytes; ordered writer */
    int fd;             /* baseline partition file, -1 if none; ordered writer */
    chunk *held, *held_tail;   /* DEST_HOLD chunks; ordered writer, producer when idle */
} part;

typedef enum { MODE_STREAM, MODE_HELD } writer_mode;
typedef enum { ST_OPEN, ST_COMMITTED, ST_FAILED, ST_ABORTED } writer_state;

struct mts_writer {
    mts_writer_options o; /* const after create (o.dir points at dir) */
    codec_params cp;
    const codec_vtable *codec;
    uint64_t job_size;    /* input bytes per job, fitted to the budget */
    uint64_t job_charge_cap;

    char dir[PATH_CAP];
    char data_final[PATH_CAP], index_final[PATH_CAP], sum_final[PATH_CAP];
    char path_a[PATH_CAP], path_b[PATH_CAP];
    char *data_tmp, *run_tmp; /* point at path_a / path_b; swapped when the data file becomes the run file */
    char token[TOKEN_LEN + 1];

    limiter lim;
    pool pool;
    int pool_up;
    void **cctx; /* one codec context per worker; worker i uses cctx[i] */

    pthread_mutex_t mu;
    pthread_cond_t cv;  /* borrowed inbuf released */
    int err;            /* guarded by mu; first error, also read atomically */
    char msg[512];      /* guarded by mu */

    writer_state state; /* producer */
    writer_mode mode;   /* producer; read by no one else */
    job_dest held_dest; /* where unordered input goes: HOLD (streaming) or PART (baseline) */
    part *parts;

    int data_fd;        /* ordered writer while streaming; producer at commit */
    uint64_t data_off;  /* ordered writer */
    int run_fd;         /* producer */
    uint64_t run_off;   /* producer */
    run_index *runs;    /* producer: the runs in the run file, oldest first */
    uint32_t nruns, runs_cap;

    /* producer intake */
    int64_t cur_part;   /* last partition seen, -1 before any input */
    inbuf *stage;       /* partition-ordered append buffer */
    uint64_t stage_used;
    unsigned char *arena; /* unordered records: [u32 partition][u32 len][bytes] */
    uint64_t arena_cap, arena_used, arena_charge;
    uint64_t *counts;   /* num_partitions+1, for the arena's counting sort */
    seg *plan;          /* scratch for planning one job's segments */
    int have_held;      /* ordered writer sets, producer clears after a spill */
    uint32_t stale_removed; /* temp files of dead earlier attempts removed at create */

    mts_writer_stats st; /* producer fields; the rest updated atomically */
};

/* writer.c */
void writer_fail(mts_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int writer_failed(mts_writer *w);
int writer_budget_acquire(mts_writer *w, uint64_t n);

/* merge.c */
int run_file_open(mts_writer *w);
int spill_held(mts_writer *w);
int data_becomes_run(mts_writer *w);
int merge_into_data(mts_writer *w);
int open_data_tmp(mts_writer *w);

/* baseline.c */
int part_file_append(mts_writer *w, uint32_t p, const void *buf, uint64_t len);
int concat_part_files(mts_writer *w);
void remove_part_files(mts_writer *w);

#endif

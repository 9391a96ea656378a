/* Where compressed bytes go. The ordered writer hands every job's chunks to
 * a destination, in submission order:
 *
 *   out_file    the data file itself (stream: partition-ordered input)
 *   run_store   held in memory, spilled to a run file when the budget asks,
 *               merged into the data file once (runs.c)
 *   part_files  one temp file per partition, concatenated at the end
 *               (baseline.c: the pre-optimisation strategy)
 *
 * Destinations know nothing of the writer: what they need from it (the
 * budget their chunks hold, where to report a failure, counters) comes in a
 * dest_env. */
#ifndef MTS_DEST_H
#define MTS_DEST_H

#include <stdint.h>

#include "engine.h"
#include "internal.h"

/* The chunks of one job share one allocation: this header, their headers,
 * then their bytes. It goes (and its budget with it) with its last chunk. */
typedef struct chunk_block {
    uint64_t charge; /* budget the block holds: its size */
    uint32_t refs;   /* chunks not yet freed; any thread may free one */
} chunk_block;

/* One complete codec stream of one partition. */
typedef struct chunk {
    struct chunk *next;
    unsigned char *data;
    chunk_block *block; /* the allocation it is in; NULL: its own, data after it */
    uint64_t len;
    uint64_t charge;    /* budget this chunk holds (within its block's, if any) */
    uint32_t partition;
    uint32_t checksum;  /* over data[0, len) */
    uint32_t tail;      /* the stream's end, data[len - tail, len) (codec end_len); 0: none */
    uint32_t body_sum;  /* with a tail: the checksum over data[0, len - tail) */
} chunk;

/* The stream without its end, and that part's checksum. */
static inline uint64_t chunk_body_len(const chunk *c) { return c->len - c->tail; }
static inline uint32_t chunk_body_sum(const chunk *c) { return c->tail ? c->body_sum : c->checksum; }

typedef struct io_stats { /* updated atomically */
    uint64_t write_ns;      /* time in write/copy/fsync calls */
    uint64_t bytes_spilled; /* written to run files */
    uint64_t bytes_merged;  /* copied from run or partition files into the data file */
} io_stats;

typedef struct dest_env {
    eng_client *budget;   /* chunks' charges go back here */
    mts_checksum algo;
    uint32_t nparts;
    io_stats *io;
    /* Records the first failure (message already built); any thread. */
    void (*fail)(void *ctx, int code, const char *msg);
    int (*failed)(void *ctx); /* the recorded code, 0 if none */
    void *ctx;
} dest_env;

/* Builds the message (fmt + ": " + mts_strerror(code)), reports it, returns code. */
int dest_fail(const dest_env *env, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees a chunk, and its block if it was the block's last: returns the
 * budget to give back now (its block's charge then, else 0; a chunk of its
 * own, its charge). */
uint64_t chunk_free(chunk *c);
/* Frees the chunk and the chunks linked after it, and gives their budget back. */
void chunk_free_list(const dest_env *env, chunk *c);
/* Checksum of a||b given checksum(a), and b as a chunk or a stored stretch. */
uint32_t dest_combine(const dest_env *env, uint32_t sum, uint32_t b_sum, uint64_t b_len);

struct out_file;
typedef struct destination destination;
typedef struct dest_ops {
    /* Takes chunks[0..n) of one job (in partition order) and their ownership,
     * also on failure. Runs on the ordered writer (one thread at a time), job
     * by job in submission order; job is the job's number in that order. */
    int (*put)(destination *d, chunk **chunks, uint32_t n, uint64_t job);
    /* Moves everything held into out, partition by partition, after what out
     * already has of each partition. Producer thread, no job in flight. */
    int (*finish)(destination *d, struct out_file *out);
    /* Frees what is held and removes temp files; the destination stays usable
     * (empty). Idempotent. */
    void (*discard)(destination *d);
} dest_ops;

struct destination {
    const dest_ops *ops;
};

/* ---- the data file (datafile.c) ----------------------------------------------- */
typedef struct out_file {
    destination d;       /* put: append to the file; finish/discard: nothing */
    const dest_env *env;
    char path[MTS_PATH_CAP];
    int fd;              /* -1 when not open */
    uint64_t off;        /* bytes written */
    uint64_t *len;       /* per partition: its bytes in the file */
    uint32_t *sum;       /* per partition: their checksum */
} out_file;

int out_init(out_file *o, const dest_env *env);
/* Creates (truncating) and locks o->path: the lock marks the attempt as
 * alive for the clean-up of dead attempts (commit.c). */
int out_create(out_file *o);
/* Appends stored bytes of partition p from fd at off (copy_file_range, or
 * pread/pwrite where the kernel refuses). */
int out_copy(out_file *o, uint32_t p, int fd, uint64_t off, uint64_t len, uint32_t sum);
/* Counts len bytes of partition p, checksum sum, as written at the end of o
 * by the caller. */
void out_appended(out_file *o, uint32_t p, uint64_t len, uint32_t sum);
/* The same for bytes merged from a run or partition file (out_copy's, or
 * written by the caller), also counted in io->bytes_merged. */
void out_merged(out_file *o, uint32_t p, uint64_t len, uint32_t sum);
/* Forgets the per-partition lengths (the file became a run file). */
void out_forget(out_file *o);
void out_close(out_file *o);
void out_free(out_file *o);

/* ---- runs.c ------------------------------------------------------------------ */
typedef struct run_index run_index;
typedef struct run_store {
    destination d;           /* put: hold (once the input has ended, also write out
                                the partitions it completes); finish: merge; discard */
    const dest_env *env;
    uint64_t *last_job;      /* per partition: the number of the last job bound here
                                with a segment of it (runs_note_job, producer) */
    pthread_mutex_t mu;      /* guards everything below: the ordered writer
                                (put), the producer (spill, finish) and other
                                clients' threads (reclaim) */
    chunk **head, **tail;    /* per partition: held chunks in arrival order */
    uint64_t held;           /* their charges */
    char path[MTS_PATH_CAP + 16];
    int fd;
    uint64_t off;
    run_index *runs;         /* oldest first */
    uint32_t nruns, runs_cap;
    uint64_t spill_min;      /* const: the least held that put() spills */
    uint64_t early_spills;   /* spills put() made because someone waited */
    /* the assembly into the data file */
    struct out_file *out;
    struct iov_batch *batch; /* its writev batch; NULL until it starts */
    uint32_t read_size;      /* each run's read buffer, set when it starts */
    uint32_t begun;          /* partitions before this one have begun */
    int ended;               /* no job comes after those submitted (runs_end_input) */
    /* A partition's streams are joined into one: the run file and the
     * assembly take each chunk without its end, and the assembly closes the
     * partition with one end, the codec's (the same for every chunk). */
    unsigned char end[32];   /* those bytes, from the first chunk that has them */
    uint32_t end_len, end_sum; /* their length (0: none yet) and checksum */
    int end_open;            /* the partition being assembled has bytes without their end */
} run_store;

int runs_init(run_store *r, const dest_env *env);
void runs_free(run_store *r);
/* What out holds becomes the first run: out's file is renamed to r->path
 * (no copy), out forgets it and creates an empty file under its name (the
 * attempt's anchor stays). */
int runs_adopt(run_store *r, out_file *out);
/* A job numbered `job` bound for the store has a segment of partition p.
 * Producer thread, before runs_end_input. */
static inline void runs_note_job(run_store *r, uint32_t p, uint64_t job)
{
    r->last_job[p] = job;
}
/* No more jobs will be bound for the store: from here on, the drain of each
 * job writes out the partitions whose last job it was (and those before
 * them) into out, while later jobs compress; finish writes the rest. */
void runs_end_input(run_store *r, struct out_file *out);
/* Writes every held chunk to the run file as one new run. Any thread. */
int runs_spill(run_store *r);

/* ---- baseline.c ---------------------------------------------------------------- */
typedef struct part_files {
    destination d;           /* put: append to partition files; finish: concatenate */
    const dest_env *env;
    char base[MTS_PATH_CAP + 48]; /* partition p's file is "<base>.p<p>" */
    int *fd;                 /* per partition: -1 none, FD_CLOSED, or open */
    uint64_t *len;
    uint32_t *sum;
} part_files;

int part_files_init(part_files *pf, const dest_env *env, const char *base);
void part_files_free(part_files *pf);

#endif

/*
 * mtshuffle: the map side of a Spark-style shuffle.
 *
 * Records tagged with a reduce-partition id go in; one data file, one index
 * file and one checksum file come out, in the layout an unmodified Spark
 * reducer and Spark's external shuffle service read:
 *
 *   shuffle_<shuffle>_<map>_0.data           partition bytes, partition order
 *   shuffle_<shuffle>_<map>_0.index          (N+1) big-endian int64 offsets
 *   shuffle_<shuffle>_<map>_0.checksum.ALGO  N big-endian int64 checksums
 *
 * Each partition's bytes are one or more complete codec streams back to back
 * (lz4-java block streams, zstd frames, or raw bytes), which Spark decodes as
 * one concatenated stream.
 *
 * Error convention
 *   Every function that can fail returns an int: 0 on success, a negative
 *   code on failure. I/O failures return -errno (e.g. -ENOSPC), so nothing is
 *   lost; library failures return one of the MTS_E_* codes below, which lie
 *   outside the errno range. mts_strerror() names a code; mts_writer_error()
 *   gives the handle's message, which names the operation, the file and the
 *   partition involved.
 *
 *   After any failure other than MTS_E_ARG / MTS_E_RANGE (which reject one
 *   call and change nothing), a writer is "failed": every later call returns
 *   the same code, its budget is released, its temp files are removed and
 *   only mts_writer_free() (or mts_writer_abort()) remains useful.
 *
 * Engine and threads
 *   Compression and decompression run on an engine (mts_engine): a pool of
 *   worker threads and one hard bytes-in-flight budget. Many writers and
 *   readers can share one engine (one per process, as in a Spark executor):
 *   creating a writer or reader on it starts no thread, the sum of the bytes
 *   they hold never exceeds the engine's budget, and their jobs interleave on
 *   the workers while each writer's output stays in its own order. A writer
 *   or reader created without an engine makes a private one from its own
 *   threads and max_bytes_in_flight options.
 *
 *   One writer's or reader's API is not thread-safe: one thread at a time
 *   calls it. Different handles may be used from different threads at once,
 *   on one engine or not. mts_writer_get_stats, mts_reader_get_stats and the
 *   engine's functions may be called from any thread at any time;
 *   mts_writer_error from the writer's thread, or from any thread once the
 *   writer has failed (its message is then fixed).
 */
#ifndef MTSHUFFLE_H
#define MTSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MTS_VERSION_MAJOR 0
#define MTS_VERSION_MINOR 1
#define MTS_VERSION_PATCH 0
#define MTS_VERSION_NUMBER \
    (MTS_VERSION_MAJOR * 10000 + MTS_VERSION_MINOR * 100 + MTS_VERSION_PATCH)

#if defined(MTS_BUILDING_LIBRARY) && defined(__GNUC__)
#define MTS_API __attribute__((visibility("default")))
#else
#define MTS_API
#endif

/* ---- error codes (all negative; -errno is used for I/O errors) ---------- */
enum {
    MTS_OK = 0,
    MTS_E_ARG = -10001,        /* NULL pointer or invalid option value */
    MTS_E_RANGE = -10002,      /* partition id out of range */
    MTS_E_STATE = -10003,      /* call not allowed in the handle's state */
    MTS_E_OVERFLOW = -10004,   /* a length or offset would overflow */
    MTS_E_CODEC = -10005,      /* the compression library failed */
    MTS_E_CORRUPT = -10006,    /* malformed input data or file */
    MTS_E_ABORTED = -10007,    /* the writer was aborted */
    MTS_E_NOMEM = -10008,      /* allocation failed */
    MTS_E_UNSUPPORTED = -10009 /* feature not available here */
};

MTS_API const char *mts_strerror(int code);
MTS_API unsigned mts_version_number(void);
MTS_API const char *mts_version_string(void);

/* ---- options ------------------------------------------------------------ */
typedef enum { MTS_CODEC_NONE = 0, MTS_CODEC_LZ4 = 1, MTS_CODEC_ZSTD = 2 } mts_codec;

typedef enum {
    MTS_CHECKSUM_NONE = 0, /* no checksum file is written */
    MTS_CHECKSUM_ADLER32 = 1,
    MTS_CHECKSUM_CRC32 = 2,
    MTS_CHECKSUM_CRC32C = 3
} mts_checksum;

typedef enum {
    /* Compress in parallel into memory, write in partition order straight into
     * the data file; input that is not partition-ordered is kept in memory as
     * compressed chunks, spilled to run files only when the budget forces. */
    MTS_STRATEGY_STREAMING = 0,
    /* The pre-optimisation design: one temp file per partition, then the temp
     * files concatenated into the data file. The benchmark reference. */
    MTS_STRATEGY_BASELINE = 1
} mts_strategy;

#define MTS_MAX_PARTITIONS (1u << 24) /* Spark's serialized-shuffle limit */
#define MTS_MIN_BYTES_IN_FLIGHT (64u << 10)
#define MTS_MAX_ZSTD_LEVEL 19
#define MTS_MIN_JOB_SIZE 1024u
#define MTS_LZ4_MIN_BLOCK 64u
#define MTS_LZ4_MAX_BLOCK (32u << 20)

/* ---- engine: shared worker pool and budget ------------------------------- */
typedef struct mts_engine mts_engine;

#define MTS_MAX_THREADS 256u /* workers per engine */

/* Starts `threads` workers (1..256) under a budget of max_bytes_in_flight
 * bytes (>= MTS_MIN_BYTES_IN_FLIGHT). Thread creation failures return
 * -errno (e.g. -EAGAIN). */
MTS_API int mts_engine_create(uint32_t threads, uint64_t max_bytes_in_flight, mts_engine **out,
                              char *errbuf, size_t errbuf_len);
/* Drops the caller's reference. The engine stops (its threads are joined)
 * when the last writer or reader created on it is freed too, so it may be
 * called while they still run. Accepts NULL. Must not be called from a
 * callback of the engine's own threads. */
MTS_API void mts_engine_free(mts_engine *e);

typedef struct mts_engine_stats {
    uint32_t threads;         /* workers */
    uint32_t threads_busy;    /* workers running a job right now */
    uint32_t clients;         /* writers and readers on the engine now */
    uint64_t jobs;            /* jobs run */
    uint64_t busy_ns;         /* summed over workers */
    uint64_t bytes_held;      /* budget held now, all clients */
    uint64_t peak_bytes_held; /* high-water mark; never above budget */
    uint64_t budget;          /* the cap */
    uint64_t budget_wait_ns;  /* summed over every blocked acquisition */
    uint64_t reclaims;        /* times a waiter made a holder spill */
    uint64_t bytes_cached;    /* part of bytes_held: freed buffers kept for reuse, given back
                                 as soon as a writer or reader waits for budget */
    uint32_t cpus;            /* compression jobs that run at once at most (workers and
                                 waiting callers together): threads, or the CPUs this
                                 process may use where fewer (its affinity mask, its
                                 cgroup's CPU quota; MTS_CPUS=N overrides) */
} mts_engine_stats;

MTS_API int mts_engine_get_stats(const mts_engine *e, mts_engine_stats *stats);

typedef struct mts_writer_options {
    const char *dir;               /* output directory; required, must exist */
    int32_t shuffle_id;            /* >= 0; default 0 */
    int64_t map_id;                /* >= 0; default 0 */
    uint32_t num_partitions;       /* 1 .. MTS_MAX_PARTITIONS; default 1 */
    mts_codec codec;               /* default MTS_CODEC_LZ4 (Spark's default) */
    int level;                     /* zstd level 1..MTS_MAX_ZSTD_LEVEL, default 1; lz4/none ignore it */
    uint32_t block_size;           /* lz4 block size, MTS_LZ4_MIN_BLOCK .. MTS_LZ4_MAX_BLOCK,
                                      default 32 KiB */
    mts_checksum checksum;         /* default MTS_CHECKSUM_ADLER32 (Spark's default) */
    mts_strategy strategy;         /* default MTS_STRATEGY_STREAMING */
    mts_engine *engine;            /* NULL (default): a private engine of `threads`
                                      workers and `max_bytes_in_flight` bytes. Set:
                                      the writer runs on that engine (threads and
                                      max_bytes_in_flight are then ignored) */
    uint32_t threads;              /* compression workers 1..MTS_MAX_THREADS; default 2 */
    uint64_t max_bytes_in_flight;  /* hard cap on bytes held, >= 64 KiB; default 64 MiB */
    uint32_t job_size;             /* input bytes per compression job, >= MTS_MIN_JOB_SIZE, default 1 MiB;
                                      lowered automatically to fit the budget */
    int fsync;                     /* 1: fsync files and directory at commit; default 0 */
    const char *data_path;         /* NULL (default): the writer names, writes and commits
                                      its three files in dir. Set: the data file is written
                                      to exactly this path (e.g. Spark's temp name for the
                                      final data file), mts_writer_finish() ends the task and
                                      the caller commits index and checksums (Spark's
                                      IndexShuffleBlockResolver); dir may then be NULL and
                                      defaults to the path's directory. */
    uint32_t writers_at_once;      /* writers and readers expected on the engine at once (a
                                      Spark executor's task slots). Records out of partition
                                      order are held in an arena fitted to its budget divided
                                      by 4 x this, so that each of them can fill one while
                                      its last compresses. Default 0: the writers and readers
                                      on the engine as each arena is taken, this one
                                      included, and at least 2 */
    uint32_t reserved32;           /* must be zero */
    uint64_t reserved[7];          /* must be zero */
} mts_writer_options;

/* Fills *opts with the defaults written above. */
MTS_API void mts_writer_options_init(mts_writer_options *opts);

/* ---- writer ------------------------------------------------------------- */
typedef struct mts_writer mts_writer;

/* Creates a writer. On failure *out is NULL and the code says why; where a
 * message helps, it is written to errbuf (may be NULL). */
MTS_API int mts_writer_create(const mts_writer_options *opts, mts_writer **out,
                              char *errbuf, size_t errbuf_len);

/* Appends one serialized record to a partition. Records may come in any
 * partition order; bytes are copied before the call returns. len may be 0. */
MTS_API int mts_writer_append(mts_writer *w, uint32_t partition, const void *bytes,
                              size_t len);

/* Appends a buffer of tagged records in any partition order, each a
 * big-endian uint32 partition, a big-endian uint32 length and that many
 * bytes (the layout the JNI binding's direct buffers carry): the same as one
 * mts_writer_append per record, in one call. Each header is checked as its
 * record is taken, so a malformed buffer fails the writer (the records before
 * the bad header may be taken; nothing is committed, the writer can only be
 * aborted or freed): a cut-off header or a length past the end (MTS_E_ARG),
 * a partition out of range (MTS_E_RANGE), the message giving the offset. */
MTS_API int mts_writer_append_tagged(mts_writer *w, const void *buf, size_t len);

/* Adds one batch already grouped by partition: partition p's bytes are
 * data[offsets[p], offsets[p+1]), offsets has num_partitions+1 entries,
 * offsets[0] == 0 and non-decreasing. data may be freed once the call returns. */
MTS_API int mts_writer_add_batch(mts_writer *w, const void *data, const uint64_t *offsets);

/* Called once the writer no longer reads a batch of mts_writer_add_batch_async.
 * It runs on an engine thread or on the caller's, inside a call on this writer
 * (add_batch_async itself among them). Keep it short: it must not block or call
 * into the library, since other writers' and readers' jobs wait for the engine
 * thread it runs on. */
typedef void (*mts_batch_done)(void *ctx);

/* As mts_writer_add_batch, but returns once the batch is cut into compression
 * jobs, without waiting for them to read it: the batch compresses in place
 * while the caller prepares the next. data must stay valid and unchanged until
 * done(ctx) is called; offsets are read before the call returns. On success
 * done is called exactly once, at the latest before mts_writer_finish, _commit,
 * _abort or _free returns; on an error return it is not called and the writer
 * no longer reads data. done may be NULL (data must then stay valid until one
 * of those calls returns). Both calls compress a batch in place, each
 * partition's slice of it a stream of its own (a partition's streams are
 * joined in the data file where the codec allows); add_batch waits for those
 * jobs before it returns. */
MTS_API int mts_writer_add_batch_async(mts_writer *w, const void *data, const uint64_t *offsets,
                                       mts_batch_done done, void *ctx);

typedef struct mts_commit_result {
    int adopted;  /* 1: an earlier attempt's complete output was kept instead */
    uint64_t data_bytes;
} mts_commit_result;

/* Finishes the output and commits it atomically (not for a writer created
 * with data_path: see mts_writer_finish). lengths and checksums (each
 * num_partitions entries, either may be NULL) receive the committed partition
 * lengths and checksums (those of the adopted output when adopted). */
MTS_API int mts_writer_commit(mts_writer *w, uint64_t *lengths, uint64_t *checksums,
                              mts_commit_result *result);

/* For a writer created with data_path: completes the data file there and
 * returns the partition lengths and checksums (num_partitions each; either
 * may be NULL) without writing an index or committing anything. The file is
 * then the caller's. MTS_E_STATE on a writer without data_path. */
MTS_API int mts_writer_finish(mts_writer *w, uint64_t *lengths, uint64_t *checksums);

/* Stops all work and removes every file this writer made. Idempotent; after
 * commit it does nothing and returns MTS_E_STATE. */
MTS_API int mts_writer_abort(mts_writer *w);

/* Aborts if needed and frees. Accepts NULL. */
MTS_API void mts_writer_free(mts_writer *w);

/* The handle's last error message ("" when none). Valid until the next call. */
MTS_API const char *mts_writer_error(const mts_writer *w);

typedef struct mts_writer_stats {
    uint64_t bytes_in;        /* uncompressed bytes accepted */
    uint64_t bytes_out;       /* bytes in the committed data file */
    uint64_t records;         /* records appended (mts_writer_append, _append_tagged) */
    uint64_t batches;         /* mts_writer_add_batch and _add_batch_async calls */
    uint64_t runs;            /* maximal partition-ordered stretches of input */
    uint64_t jobs;            /* compression jobs run */
    uint64_t bytes_spilled;   /* compressed bytes written to run files */
    uint64_t bytes_merged;    /* bytes copied from run/partition files into the data file */
    uint64_t compress_ns;     /* summed over workers */
    uint64_t write_ns;        /* time in write/copy/fsync calls */
    uint64_t budget_wait_ns;  /* time the caller waited on the budget */
    uint64_t peak_bytes_held; /* high-water mark of this writer's bytes held */
    uint64_t budget;          /* the cap of its engine's budget */
    uint64_t bytes_held;      /* bytes held now */
} mts_writer_stats;

MTS_API int mts_writer_get_stats(const mts_writer *w, mts_writer_stats *stats);

/* ---- reader (the reduce side) ---------------------------------------------
 * Opens a set of map outputs and, for one reduce partition or a contiguous
 * range of them (Spark's batch fetch), yields the decompressed bytes of every
 * map's segment, in map order. Decompression runs on an engine's threads,
 * piece by piece, each piece paid from its budget before it is decoded and
 * given back when the caller moves past it; with codec none the bytes are
 * handed out straight from the mapped data file (zero-copy). A reader that
 * stops early (mts_reader_start of another range, mts_reader_free) gives
 * everything back.
 *
 * Every offset and length is checked against the file sizes when the outputs
 * are opened; a checksum mismatch, a corrupt lz4 block or zstd frame ends the
 * current read with MTS_E_CORRUPT and a message naming file, partition and
 * offset (MTS_VERIFY_* says when the checksum file is read). Unlike a
 * writer, a reader is not poisoned by an error: the next mts_reader_start()
 * begins a fresh read. */
typedef struct mts_reader mts_reader;

/* Detect the codec per segment from its first bytes: a convenience for tools.
 * Output written with MTS_CODEC_NONE can begin with a codec's magic by chance,
 * so a reader that knows its codec (as a Spark reducer does from its
 * configuration) must set it. */
#define MTS_CODEC_AUTO ((mts_codec)-1)

/* When a reader checks partitions against the map output's checksum file.
 * AUTO: before decoding where the codec cannot catch damage itself (none;
 * zstd, whose frames as Spark writes them carry no checksum), and where it
 * can (lz4: lz4-java's XXH32 of every block's decoded bytes) only once it
 * has, to tell in the message whether the stored bytes changed since they
 * were written (as Spark's reducer diagnoses a corrupt block). With AUTO and
 * lz4, the pieces of a damaged partition before its bad block may have been
 * handed out when the read fails, as with NEVER; with ALWAYS no piece of a
 * partition is handed out before its checksum matched. */
#define MTS_VERIFY_NEVER 0
#define MTS_VERIFY_ALWAYS 1
#define MTS_VERIFY_AUTO 2

typedef struct mts_reader_options {
    mts_codec codec;              /* default MTS_CODEC_AUTO; set it as Spark's config says */
    mts_engine *engine;           /* NULL (default): a private engine of `threads` and
                                     `max_bytes_in_flight`; set: decode on that engine */
    uint32_t threads;             /* a private engine's decompression threads 1..256; default 2 */
    uint64_t max_bytes_in_flight; /* a private engine's hard cap on decoded bytes held, >= 64 KiB
                                     and two pieces; default 64 MiB. The budget must also hold
                                     one piece plus one whole lz4 block of the data read */
    uint32_t piece_size;          /* decoded bytes per piece handed out, default 1 MiB */
    int verify_checksums;         /* MTS_VERIFY_*: when partitions are checked against the
                                     checksum file; default MTS_VERIFY_AUTO */
    uint64_t reserved[8];         /* must be zero */
} mts_reader_options;

MTS_API void mts_reader_options_init(mts_reader_options *opts);

/* Opens the map outputs whose data files are data_paths[0..n) (index and
 * checksum files beside them), in map order. All must have the same number
 * of partitions. */
MTS_API int mts_reader_open(const mts_reader_options *opts, const char *const *data_paths, uint32_t n,
                            mts_reader **out, char *errbuf, size_t errbuf_len);
/* Opens every committed map output of one shuffle in dir, ordered by map id. */
MTS_API int mts_reader_open_dir(const mts_reader_options *opts, const char *dir, int32_t shuffle_id,
                                mts_reader **out, char *errbuf, size_t errbuf_len);

/* A block reader: no map outputs; it decodes the blocks the caller hands over
 * with mts_reader_add_block (a reducer that fetches blocks itself, as Spark's
 * fetch machinery does), in the order given, on the engine, under its budget.
 * mts_reader_start and mts_reader_queue are refused. */
MTS_API int mts_reader_open_blocks(const mts_reader_options *opts, mts_reader **out, char *errbuf,
                                   size_t errbuf_len);
/* Appends a block: len stored bytes (codec streams, concatenated) at data,
 * which the caller keeps alive and unchanged until the reader has moved past
 * the block (next() handed out a piece of a later block, or returned 0 or an
 * error), or until mts_reader_free. Its pieces carry `tag` as their range.
 * Decoding may start at once. Begins a read if none is active (after next()
 * returned 0 or failed). */
MTS_API int mts_reader_add_block(mts_reader *r, const void *data, size_t len, uint32_t tag);

MTS_API uint32_t mts_reader_num_maps(const mts_reader *r);
MTS_API uint32_t mts_reader_num_partitions(const mts_reader *r);
MTS_API const char *mts_reader_map_path(const mts_reader *r, uint32_t map);
/* Stored (compressed) bytes of partitions [start, end) of one map; 0 if out of range. */
MTS_API uint64_t mts_reader_segment_length(const mts_reader *r, uint32_t map, uint32_t start, uint32_t end);

typedef struct mts_read_piece {
    uint32_t map;      /* index into the opened outputs */
    const void *data;  /* valid until the next mts_reader_next/start/queue/free */
    size_t len;        /* > 0 */
    uint32_t range;    /* which range of the read: 0 for start's, then one more per queue */
} mts_read_piece;

/* Begins reading reduce partitions [start, end) of every map (ends any read
 * in progress). */
MTS_API int mts_reader_start(mts_reader *r, uint32_t start, uint32_t end);
/* Appends partitions [start, end) to the read in progress (begins one if
 * none is, e.g. after next() returned 0 or failed): its pieces follow the
 * earlier ranges', and decoding runs on across the boundary instead of
 * starting again per range, as a reducer's fetches of many blocks do. */
MTS_API int mts_reader_queue(mts_reader *r, uint32_t start, uint32_t end);
/* 1: *piece holds the next bytes (range order, then map order, then stream
 * order); 0: every queued range is complete; < 0: the read failed (see
 * mts_reader_error). */
MTS_API int mts_reader_next(mts_reader *r, mts_read_piece *piece);
MTS_API const char *mts_reader_error(const mts_reader *r);

typedef struct mts_reader_stats {
    uint64_t bytes_stored;    /* segment bytes read from data files */
    uint64_t bytes_decoded;   /* bytes handed out */
    uint64_t decode_ns;       /* summed over threads */
    uint64_t wait_ns;         /* time next() waited for a piece */
    uint64_t peak_bytes_held; /* high-water mark of the budget */
    uint64_t pieces_here;     /* pieces next() decoded on the caller's thread: no worker
                                 had started them when the caller needed them, or the
                                 caller decoded ahead rather than wait (below) */
    uint64_t pieces_ahead_here; /* of those, pieces of later cursors decoded while the
                                 caller's own was on a worker */
} mts_reader_stats;

MTS_API int mts_reader_get_stats(const mts_reader *r, mts_reader_stats *stats);
/* Accepts NULL. */
MTS_API void mts_reader_free(mts_reader *r);

/* ---- codecs, one stream at a time ------------------------------------------
 * The writer's codecs on their own: for tools and benchmarks that need the
 * exact streams the writer makes (compress) or reads (decompress). */
typedef struct mts_cctx mts_cctx;

MTS_API int mts_cctx_create(mts_codec codec, int level, uint32_t block_size, mts_cctx **out);
/* Largest output of one mts_cctx_compress() call for n input bytes. */
MTS_API size_t mts_cctx_bound(const mts_cctx *c, size_t n);
/* Compresses src into one complete stream (lz4-java block stream with its end
 * mark, one zstd frame, or a copy). */
MTS_API int mts_cctx_compress(mts_cctx *c, const void *src, size_t n, void *dst, size_t cap, size_t *out_len);
MTS_API void mts_cctx_free(mts_cctx *c); /* accepts NULL */

/* Receives decoded bytes in order; returning a negative code stops decoding. */
typedef int (*mts_sink_fn)(void *ctx, const void *buf, size_t len);
/* Decodes a concatenation of streams; MTS_E_CORRUPT with *bad_offset (may be
 * NULL) at the block or frame that failed. */
MTS_API int mts_decompress(mts_codec codec, const void *src, size_t n, mts_sink_fn sink, void *ctx,
                           uint64_t *bad_offset);

/* ---- one committed map output, read-only -----------------------------------
 * The layout as Spark writes it, decoded: for tools (the CLI's inspect) and
 * tests. Opening checks that the files are well formed; unless
 * MTS_OUTPUT_LENIENT is given, also that the index agrees with the data file
 * (offsets start at 0, never go down, end at the data file's size). */
typedef struct mts_output mts_output;

typedef struct mts_output_info {
    const char *data_path;
    uint32_t num_partitions;
    uint64_t data_bytes;       /* size of the data file (0 if it is missing) */
    const uint64_t *offsets;   /* num_partitions + 1 offsets, as the index stores them */
    mts_checksum checksum;     /* the checksum file's algorithm; NONE if there is none */
    const uint64_t *checksums; /* num_partitions stored values, NULL without a checksum file */
    mts_codec codec;           /* of the first non-empty partition, by its magic (NONE:
                                  raw); MTS_CODEC_AUTO when every partition is empty */
} mts_output_info;

#define MTS_OUTPUT_LENIENT 1u

/* path: the output's .data, .index or .checksum.ALGO file. */
MTS_API int mts_output_open(const char *path, unsigned flags, mts_output **out, char *errbuf,
                            size_t errbuf_len);
MTS_API const mts_output_info *mts_output_get_info(const mts_output *o);
/* Partition p's stored bytes (valid until close); MTS_E_CORRUPT if its
 * offsets are out of order or past the data (lenient opens only). */
MTS_API int mts_output_partition(const mts_output *o, uint32_t p, const void **bytes, uint64_t *len);
MTS_API void mts_output_close(mts_output *o); /* accepts NULL */

/* ---- file names --------------------------------------------------------- */
/* Writes the final name ("shuffle_S_M_0.data", ".index", ".checksum.ALGO") of
 * kind 'd', 'i' or 'c' into buf. Returns the length, or MTS_E_ARG. */
MTS_API int mts_output_name(char *buf, size_t len, int32_t shuffle_id, int64_t map_id,
                            int kind, mts_checksum algo);
MTS_API const char *mts_checksum_name(mts_checksum algo); /* "ADLER32", ... */
/* Parses "ADLER32", "CRC32", "CRC32C" (any case); MTS_E_ARG if unknown. */
MTS_API int mts_checksum_parse(const char *name, mts_checksum *out);
/* The checksum Spark stores: the value of a fresh java.util.zip object
 * (1 for ADLER32, 0 otherwise), continued over buf. */
MTS_API uint32_t mts_checksum_initial(mts_checksum algo);
MTS_API uint32_t mts_checksum_update(mts_checksum algo, uint32_t sum, const void *buf, size_t len);
MTS_API const char *mts_codec_name(mts_codec codec);     /* "lz4", ... */

#ifdef __cplusplus
}
#endif
#endif /* MTSHUFFLE_H */

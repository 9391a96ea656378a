/* Shared by the CLI's commands. The CLI uses only the public header. */
#ifndef MTS_CLI_H
#define MTS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "mtshuffle.h"

int cmd_write(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Strict option values: the whole string is one number (no sign on an
 * unsigned value, no trailing characters, no wrap) within [min, max].
 * On a bad value they print "CMD: --OPT: 'VALUE' ..." to stderr and return
 * -1; commands then exit 2 before doing any work. */
int cli_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cli_u32(const char *cmd, const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_i32(const char *cmd, const char *opt, const char *s, int32_t min, int32_t max, int32_t *out);
int cli_double(const char *cmd, const char *opt, const char *s, double min, double max, double *out);
/* A size given in units (MiB, KiB) as a decimal, converted to bytes within
 * [min, max] bytes. */
int cli_size(const char *cmd, const char *opt, const char *s, double unit, uint64_t min, uint64_t max,
             uint64_t *out);

/* bench_input.c: a task's rows to a writer in each input shape */
enum { IN_BATCH, IN_RECORDS, IN_UNSORTED, IN_TAGGED, IN_ASYNC };
struct wl_batch;
/* The batch's rows in generation order as tagged records (malloc'd). */
unsigned char *bench_tagged(const struct wl_batch *bt);
/* Frees the copies of the batch's rows that a writer given them in this
 * input shape does not read (keep_grouped: something else still reads the
 * rows grouped by partition), so that every shape holds about one copy of
 * its input: on a virtual machine whose host takes back the guest's free
 * memory, a process holding more is given page cache pages that the
 * host must back first more often (BENCHMARKS.md, "What a first write
 * to memory costs on this machine"). */
void bench_trim_input(struct wl_batch *bt, int input, int keep_grouped);
/* IN_TAGGED pauses produce_us before each buffer (the task making its
 * rows). IN_ASYNC counts the batches given back in *batches_done
 * (atomically: from engine threads), all of them once the writer has
 * committed. */
int bench_feed(mts_writer *w, int input, const struct wl_batch *batches, uint32_t nbatches,
               unsigned char *const *tagged, uint32_t produce_us, uint32_t *batches_done);

/* bench_tiny.c: mtshuffle bench's tiny-* contenders */
void tiny_writers(const char *dir, const mts_writer_options *base, mts_engine *engine, uint32_t writers);
void tiny_files(const char *dir, uint32_t num_partitions, uint32_t writers);
void tiny_remove(const char *dir, uint32_t writers);

double cli_now(void);
/* CPU time so far (user + system, seconds) and minor page faults of every
 * thread of this process and of the children it has waited for. */
void cli_usage(double *cpu_seconds, uint64_t *minor_faults);
/* Parses "lz4" / "zstd" / "none"; -1 if unknown. */
int cli_parse_codec(const char *s);
/* mkdir -p: 0, or -1 with errno set. */
int cli_mkdirs(const char *path);
/* Human-readable byte count into buf. */
const char *cli_bytes(char *buf, size_t len, double bytes);
/* Peak and current resident set size of this process, in bytes. */
uint64_t cli_peak_rss(void);
/* Restarts the peak at the current RSS (Linux clear_refs 5); -1 if unsupported. */
int cli_reset_peak_rss(void);
uint64_t cli_current_rss(void);

#endif

/* Shared by the CLI's commands. The CLI uses only the public header. */
#ifndef MTS_CLI_H
#define MTS_CLI_H

#include <stddef.h>
#include <stdint.h>

int cmd_write(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);

double cli_now(void);
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

/* Shared by the fuzz targets: a private scratch directory in tmpfs and the
 * input format that packs a map output's three files into one buffer:
 *   u8 flags | u32 LE index length | index | u32 LE data length | data | checksum file
 * flags: bits 0-1 codec (0 auto, 1 lz4, 2 zstd, 3 none), bit 2 skip checksum
 * verification, bits 3-4 which checksum algorithm names the checksum file. */
#ifndef MTS_FUZZ_COMMON_H
#define MTS_FUZZ_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[256];

static void fuzz_remove_scratch(void);

static inline const char *fuzz_scratch(void)
{
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/mts-fuzz-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
                 (int)getpid());
        mkdir(fuzz_dir, 0755);
        atexit(fuzz_remove_scratch); /* libFuzzer ends its runs with exit() */
    }
    return fuzz_dir;
}

static inline void fuzz_clear(void)
{
    DIR *d = opendir(fuzz_scratch());
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
}

static void fuzz_remove_scratch(void)
{
    fuzz_clear();
    rmdir(fuzz_dir);
}

static inline void fuzz_put(const char *name, const uint8_t *b, size_t n)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", fuzz_scratch(), name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    if (n && write(fd, b, n) != (ssize_t)n) { /* a short scratch write only shrinks the case */ }
    close(fd);
}

static inline uint32_t fuzz_le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Unpacks an input into shuffle_0_0_0.{index,data,checksum.X}; returns flags. */
static inline int fuzz_unpack(const uint8_t *b, size_t n)
{
    static const char *algos[] = {"ADLER32", "CRC32", "CRC32C", "ADLER32"};
    fuzz_clear();
    if (n < 9) return -1;
    int flags = b[0];
    size_t o = 1, il = fuzz_le32(b + o);
    o += 4;
    if (il > n - o) il = n - o;
    fuzz_put("shuffle_0_0_0.index", b + o, il);
    o += il;
    size_t dl = n - o >= 4 ? fuzz_le32(b + o) : 0;
    o += n - o >= 4 ? 4 : n - o;
    if (dl > n - o) dl = n - o;
    fuzz_put("shuffle_0_0_0.data", b + o, dl);
    o += dl;
    if (o < n) {
        char name[64];
        snprintf(name, sizeof name, "shuffle_0_0_0.checksum.%s", algos[(flags >> 3) & 3]);
        fuzz_put(name, b + o, n - o);
    }
    return flags;
}

#endif

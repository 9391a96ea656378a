/* Internal helpers shared by every source file. Not installed. */
#ifndef MTS_INTERNAL_H
#define MTS_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "mtshuffle.h"

/* One allocator hook for the whole library (malloc/realloc/free by default);
 * tests swap it to inject allocation failures. */
typedef struct mts_allocator {
    void *(*malloc_fn)(size_t);
    void *(*realloc_fn)(void *, size_t);
    void (*free_fn)(void *);
} mts_allocator;

extern mts_allocator mts__alloc;
void mts__set_allocator(const mts_allocator *a); /* NULL restores libc */

static inline void *mts_malloc(size_t n) { return mts__alloc.malloc_fn(n ? n : 1); }
static inline void *mts_realloc(void *p, size_t n) { return mts__alloc.realloc_fn(p, n ? n : 1); }
static inline void mts_free(void *p) { if (p) mts__alloc.free_fn(p); }
void *mts_calloc(size_t count, size_t size); /* NULL on overflow too */

static inline uint64_t mts_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define MTS_MSG_CAP 512    /* a handle's message buffer */
#define MTS_PATH_CAP 4096  /* longest path the library builds */

/* The one way messages are built: fmt, then ": " and mts_strerror(code),
 * into buf (truncated to fit). Returns code, so a caller can write
 * `return mts_msg(err, len, MTS_E_ARG, "options: ...")`. */
int mts_msg(char *buf, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int mts_vmsg(char *buf, size_t len, int code, const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/* Whether the environment sets switch `name` (MTS_DISABLE_...): set, not
 * empty and not "0". */
int mts_env_flag(const char *name);

/* The CPUs this process may run on: its affinity mask, fewer where a cgroup
 * CPU quota of its own or an ancestor's allows fewer (rounded up), at least
 * 1. MTS_CPUS=N in the environment overrides it (N >= 1). */
unsigned mts_cpu_count(void);
/* The smallest CPU quota, in whole CPUs rounded up, of the cgroups named in
 * self_cgroup (the format of /proc/self/cgroup) and their ancestors, found
 * where mountinfo (that of /proc/self/mountinfo) mounts them: cgroup v2's
 * cpu.max, v1's cpu.cfs_quota_us over cpu.cfs_period_us, either or both (a
 * hybrid layout). 0 where none is set or the files cannot be read. */
unsigned mts_cgroup_cpus(const char *self_cgroup, const char *mountinfo);

#define MTS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MTS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Forward a failing call's code; keeps the call site short. */
#define FORWARD_IF_ERROR(expr)                                                           \
    do {                                                                                 \
        int forward_rc_ = (expr);                                                        \
        if (forward_rc_ < 0) return forward_rc_;                                         \
    } while (0)

static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) { p[i] = (unsigned char)v; v >>= 8; }
}
static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}
static inline void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}
static inline uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif

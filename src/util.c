#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

mts_allocator mts__alloc = {malloc, realloc, free};

void mts__set_allocator(const mts_allocator *a)
{
    static const mts_allocator libc = {malloc, realloc, free};
    mts__alloc = a ? *a : libc;
}

void *mts_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = mts_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

int mts_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* The quota in dir/cpu.max as whole CPUs, rounded up; 0 if none. */
static unsigned cgroup_quota(const char *dir)
{
    char path[PATH_MAX + 32], line[64];
    if ((size_t)snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/cpu.max", PATH_MAX, dir) >= sizeof path) return 0;
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    unsigned long long quota = 0, period = 0;
    int got = fgets(line, sizeof line, f) && sscanf(line, "%llu %llu", &quota, &period) == 2; /* "max P": none */
    fclose(f);
    return got && quota && period ? (unsigned)MTS_MIN((quota + period - 1) / period, (unsigned long long)UINT_MAX) : 0;
}

/* The smallest quota of the cgroup (v2) this process is in and of its
 * ancestors; 0 if none. */
static unsigned cgroup_cpus(void)
{
    char line[PATH_MAX + 8];
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return 0;
    unsigned best = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue; /* the v2 hierarchy's line */
        char *dir = line + 3;
        dir[strcspn(dir, "\n")] = 0;
        for (;;) {
            unsigned q = cgroup_quota(dir);
            if (q && (!best || q < best)) best = q;
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir) break;
            *slash = 0;
        }
        break;
    }
    fclose(f);
    return best;
}

unsigned mts_cpu_count(void)
{
    const char *v = getenv("MTS_CPUS");
    if (v && *v) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (!*end && n >= 1 && n <= UINT_MAX) return (unsigned)n;
    }
    long n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN); /* more CPUs than a cpu_set_t holds */
    if (n < 1) n = 1;
    unsigned q = cgroup_cpus();
    return q && q < (unsigned long)n ? q : (unsigned)n;
}

int mts_vmsg(char *buf, size_t len, int code, const char *fmt, va_list ap)
{
    if (!buf || !len) return code;
    int n = vsnprintf(buf, len, fmt, ap);
    if (n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, ": %s", mts_strerror(code));
    return code;
}

int mts_msg(char *buf, size_t len, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mts_vmsg(buf, len, code, fmt, ap);
    va_end(ap);
    return code;
}

const char *mts_strerror(int code)
{
    switch (code) {
    case MTS_OK: return "success";
    case MTS_E_ARG: return "invalid argument";
    case MTS_E_RANGE: return "partition id out of range";
    case MTS_E_STATE: return "call not allowed in this state";
    case MTS_E_OVERFLOW: return "length or offset overflow";
    case MTS_E_CODEC: return "compression library error";
    case MTS_E_CORRUPT: return "corrupt data";
    case MTS_E_ABORTED: return "aborted";
    case MTS_E_NOMEM: return "out of memory";
    case MTS_E_UNSUPPORTED: return "unsupported";
    default:
        if (code < 0 && code > -4096) return strerror(-code);
        return "unknown error";
    }
}

unsigned mts_version_number(void) { return MTS_VERSION_NUMBER; }

const char *mts_version_string(void)
{
#define MTS_STR2(x) #x
#define MTS_STR(x) MTS_STR2(x)
    return MTS_STR(MTS_VERSION_MAJOR) "." MTS_STR(MTS_VERSION_MINOR) "." MTS_STR(MTS_VERSION_PATCH);
}

const char *mts_checksum_name(mts_checksum algo)
{
    switch (algo) {
    case MTS_CHECKSUM_NONE: return "NONE";
    case MTS_CHECKSUM_ADLER32: return "ADLER32";
    case MTS_CHECKSUM_CRC32: return "CRC32";
    case MTS_CHECKSUM_CRC32C: return "CRC32C";
    }
    return NULL;
}

const char *mts_codec_name(mts_codec codec)
{
    switch (codec) {
    case MTS_CODEC_NONE: return "none";
    case MTS_CODEC_LZ4: return "lz4";
    case MTS_CODEC_ZSTD: return "zstd";
    }
    return NULL;
}

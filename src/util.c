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

/* ---- CPU quotas of cgroups ------------------------------------------------------- */

/* Whether comma-separated list (up to its end or a space) has token. */
static int has_token(const char *list, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = list; *p && *p != ' ' && *p != '\n';) {
        size_t len = strcspn(p, ", \n");
        if (len == n && strncmp(p, token, n) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

/* The next space-separated field of the line at *s, cut out in place
 * (mountinfo's octal escapes, "\040" for a space, undone: the field only
 * shrinks); NULL at the line's end. */
static char *next_field(char **s)
{
    char *p = *s;
    while (*p == ' ') p++;
    if (!*p || *p == '\n') return NULL;
    char *field = p, *out = p;
    for (; *p && *p != ' ' && *p != '\n'; p++) {
        char c = *p;
        if (c == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
            c = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
            p += 3;
        }
        *out++ = c;
    }
    *s = *p ? p + 1 : p;
    *out = 0;
    return field;
}

/* One cgroup file's first line as two numbers (a missing second one is 0):
 * 1 if read; "max" or a negative reads as no quota. */
static int read_quota(const char *dir, const char *name, unsigned long long *a, unsigned long long *b)
{
    char path[PATH_MAX + 64], line[64];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return 0;
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    long long x = -1, y = 0;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || sscanf(line, "%lld %lld", &x, &y) < 1 || x <= 0) return 0; /* "max ...", "-1": none */
    *a = (unsigned long long)x;
    *b = y > 0 ? (unsigned long long)y : 0;
    return 1;
}

/* The quota set in one cgroup directory as whole CPUs, rounded up; 0 if none.
 * v2: cpu.max ("QUOTA PERIOD" or "max PERIOD"); v1: cpu.cfs_quota_us (-1:
 * none) over cpu.cfs_period_us. */
static unsigned dir_quota(const char *dir, int v2)
{
    unsigned long long quota = 0, period = 0;
    if (v2) {
        if (!read_quota(dir, "cpu.max", &quota, &period)) return 0;
    } else {
        unsigned long long unused;
        if (!read_quota(dir, "cpu.cfs_quota_us", &quota, &unused) ||
            !read_quota(dir, "cpu.cfs_period_us", &period, &unused))
            return 0;
    }
    if (!period) return 0;
    return (unsigned)MTS_MIN((quota + period - 1) / period, (unsigned long long)UINT_MAX);
}

/* The smallest quota along the path from the process's cgroup up to the
 * hierarchy's mount point: mount + (path less the mount's root). */
static unsigned hierarchy_quota(const char *mount, const char *root, const char *path, int v2)
{
    char dir[PATH_MAX];
    size_t rl = strlen(root);
    const char *rel = path; /* the cgroup below the mount's root */
    if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == 0))
        rel = path + rl; /* a mount of a subtree (a container's own cgroup) that holds the path */
    if (strcmp(rel, "/") == 0) rel = "";
    if ((size_t)snprintf(dir, sizeof dir, "%s%s", mount, rel) >= sizeof dir) return 0;
    if (*rel && access(dir, F_OK) != 0) {
        /* Not there: a cgroup namespace names the path from its own root,
         * which need not be the mount's; the mount's own quota still holds. */
        snprintf(dir, sizeof dir, "%s", mount);
    }
    size_t floor = strlen(mount);
    unsigned best = 0;
    for (;;) {
        unsigned q = dir_quota(dir, v2);
        if (q && (!best || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < floor) break;
        *slash = 0;
    }
    return best;
}

unsigned mts_cgroup_cpus(const char *self_cgroup, const char *mountinfo)
{
    /* Where the v2 hierarchy and v1's cpu controller are mounted (in a
     * hybrid layout both are: v2 at .../unified), and their roots. */
    char *v2_mount = NULL, *v2_root = NULL, *v1_mount = NULL, *v1_root = NULL, *line = NULL;
    size_t cap = 0;
    unsigned best = 0;
    FILE *f = fopen(mountinfo, "re");
    while (f && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char *dash = strstr(line, " - "), *p = line, *root = NULL, *mount = NULL;
        if (!dash) continue;
        *dash = 0;
        for (int k = 0; k < 5 && p; k++) {
            char *field = next_field(&p);
            if (k == 3) root = field;
            if (k == 4) mount = field;
            if (!field) p = NULL;
        }
        p = dash + 3;
        char *fstype = next_field(&p), *source = fstype ? next_field(&p) : NULL;
        if (!mount || !source) continue;
        char **m = NULL, **r = NULL;
        if (strcmp(fstype, "cgroup2") == 0 && !v2_mount) m = &v2_mount, r = &v2_root;
        else if (strcmp(fstype, "cgroup") == 0 && !v1_mount && has_token(p, "cpu")) m = &v1_mount, r = &v1_root;
        if (m && (!(*m = strdup(mount)) || !(*r = strdup(root)))) goto out;
    }
    if (f) fclose(f);
    f = NULL;
    if (!v2_mount && !v1_mount) goto out;
    if (!(f = fopen(self_cgroup, "re"))) goto out;
    while (getline(&line, &cap, f) > 0) {
        /* HIERARCHY:CONTROLLERS:PATH; v2's is "0::PATH" */
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *controllers = c1 + 1, *path = c2 + 1;
        unsigned q = 0;
        if (strcmp(line, "0") == 0 && !*controllers && v2_mount)
            q = hierarchy_quota(v2_mount, v2_root, path, 1);
        else if (v1_mount && has_token(controllers, "cpu"))
            q = hierarchy_quota(v1_mount, v1_root, path, 0);
        if (q && (!best || q < best)) best = q;
    }
out:
    if (f) fclose(f);
    free(line);
    free(v2_mount);
    free(v2_root);
    free(v1_mount);
    free(v1_root);
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
    unsigned q = mts_cgroup_cpus("/proc/self/cgroup", "/proc/self/mountinfo");
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

/* Helpers shared by the CLI's commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"

int cli_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    if (*p < '0' || *p > '9') {
        fprintf(stderr, "%s: --%s: '%s' is not a non-negative integer\n", cmd, opt, s);
        return -1;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE || *end) {
        fprintf(stderr, "%s: --%s: '%s' is not a non-negative integer%s\n", cmd, opt, s,
                errno == ERANGE ? " that fits 64 bits" : "");
        return -1;
    }
    if (v < min || v > max) {
        fprintf(stderr, "%s: --%s: %llu is not in %llu..%llu\n", cmd, opt, v, (unsigned long long)min,
                (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_u32(const char *cmd, const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t v;
    if (cli_u64(cmd, opt, s, min, max, &v) < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

int cli_i32(const char *cmd, const char *opt, const char *s, int32_t min, int32_t max, int32_t *out)
{
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE) {
        fprintf(stderr, "%s: --%s: '%s' is not an integer\n", cmd, opt, s);
        return -1;
    }
    if (v < min || v > max) {
        fprintf(stderr, "%s: --%s: %lld is not in %d..%d\n", cmd, opt, v, min, max);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

int cli_double(const char *cmd, const char *opt, const char *s, double min, double max, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || v != v) {
        fprintf(stderr, "%s: --%s: '%s' is not a number\n", cmd, opt, s);
        return -1;
    }
    if (v < min || v > max) {
        fprintf(stderr, "%s: --%s: %s is not in %.10g..%.10g\n", cmd, opt, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_size(const char *cmd, const char *opt, const char *s, double unit, uint64_t min, uint64_t max,
             uint64_t *out)
{
    double v;
    if (cli_double(cmd, opt, s, (double)min / unit, (double)max / unit, &v) < 0) return -1;
    *out = (uint64_t)(v * unit);
    if (*out < min) *out = min; /* rounding at the lower edge */
    return 0;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_usage(double *cpu_seconds, uint64_t *minor_faults)
{
    static const int who[2] = {RUSAGE_SELF, RUSAGE_CHILDREN};
    struct rusage r;
    *cpu_seconds = 0;
    *minor_faults = 0;
    for (int i = 0; i < 2; i++) {
        if (getrusage(who[i], &r) != 0) continue;
        *cpu_seconds += (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
                        (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
        *minor_faults += (uint64_t)r.ru_minflt;
    }
}

int cli_parse_codec(const char *s)
{
    if (!strcmp(s, "lz4")) return MTS_CODEC_LZ4;
    if (!strcmp(s, "zstd")) return MTS_CODEC_ZSTD;
    if (!strcmp(s, "none")) return MTS_CODEC_NONE;
    return -1;
}

const char *cli_bytes(char *buf, size_t len, double b)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) { b /= 1024; u++; }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

/* VmHWM from /proc/self/status: the peak since start or the last reset. */
uint64_t cli_peak_rss(void)
{
    char line[256];
    uint64_t kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %llu kB", (unsigned long long *)&kb) == 1) break;
        fclose(f);
    }
    if (!kb) { /* no procfs: the lifetime peak */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = (uint64_t)ru.ru_maxrss;
    }
    return kb * 1024;
}

int cli_reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

uint64_t cli_current_rss(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}


int cli_mkdirs(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

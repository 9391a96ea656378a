#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "internal.h"

#define BOUNCE_SIZE (256u << 10)

/* Calls that glibc added after 2.17 (getrandom in 2.25, copy_file_range in
 * 2.27) or gave new symbol versions (stat and fstat in 2.33) go to the kernel
 * directly on x86-64, so that the plugin jar's copy of the library loads on
 * glibc 2.17 and later (glibc_floor.h); glibc's struct stat is the kernel's
 * there. Elsewhere, the C library's. */
#if defined(__GLIBC__) && defined(__x86_64__)
#define sys_stat(path, st) syscall(SYS_stat, (path), (st))
#define sys_fstat(fd, st) syscall(SYS_fstat, (fd), (st))
#define sys_copy_file_range(in, in_off, out, out_off, len, flags) \
    syscall(SYS_copy_file_range, (in), (in_off), (out), (out_off), (len), (flags))
#define sys_getrandom(buf, len, flags) syscall(SYS_getrandom, (buf), (len), (flags))
#else
#define sys_stat stat
#define sys_fstat fstat
#define sys_copy_file_range copy_file_range
#define sys_getrandom getrandom
#endif

static int force_fallback = -1; /* -1: not decided yet */
static uint64_t fallback_copies;

static uint64_t fault_left[MTS_FAULT_KINDS]; /* 0: disarmed; else calls until the failure */
static uint64_t fault_calls[MTS_FAULT_KINDS];
static int fault_err[MTS_FAULT_KINDS];

void mts__fault_arm(int kind, uint64_t nth, int err)
{
    __atomic_store_n(&fault_err[kind], err, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_calls[kind], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_left[kind], nth, __ATOMIC_RELEASE);
}

uint64_t mts__fault_calls(int kind) { return __atomic_load_n(&fault_calls[kind], __ATOMIC_RELAXED); }

/* 0, or the -errno an armed fault injects into this call. */
static int fault(int kind)
{
    __atomic_add_fetch(&fault_calls[kind], 1, __ATOMIC_RELAXED);
    uint64_t left = __atomic_load_n(&fault_left[kind], __ATOMIC_ACQUIRE);
    while (left) {
        if (__atomic_compare_exchange_n(&fault_left[kind], &left, left - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return left == 1 ? -__atomic_load_n(&fault_err[kind], __ATOMIC_RELAXED) : 0;
    }
    return 0;
}

int fio_open(const char *path, int flags, int mode)
{
    int rc = fault(MTS_FAULT_OPEN);
    if (rc) return rc;
    int fd = open(path, flags | O_CLOEXEC, mode);
    return fd >= 0 ? fd : -errno;
}

int fio_rename(const char *from, const char *to)
{
    int rc = fault(MTS_FAULT_RENAME);
    if (rc) return rc;
    return rename(from, to) == 0 ? 0 : -errno;
}

int fio_link(const char *from, const char *to)
{
    int rc = fault(MTS_FAULT_RENAME);
    if (rc) return rc;
    return link(from, to) == 0 ? 0 : -errno;
}

int fio_fsync(int fd)
{
    int rc = fault(MTS_FAULT_FSYNC);
    if (rc) return rc;
    return fsync(fd) == 0 ? 0 : -errno;
}

int fio_write_all(int fd, const void *buf, size_t len)
{
    FORWARD_IF_ERROR(fault(MTS_FAULT_WRITE));
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    FORWARD_IF_ERROR(fault(MTS_FAULT_PWRITE));
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int fio_writev_all(int fd, struct iovec *iov, int n)
{
    FORWARD_IF_ERROR(fault(MTS_FAULT_WRITE));
    while (n > 0) {
        ssize_t w = writev(fd, iov, MTS_MIN(n, IOV_MAX));
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (w == 0) return -EIO;
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

int fio_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO; /* the file is shorter than its index says */
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

void fio_force_copy_fallback(int on) { __atomic_store_n(&force_fallback, on ? 1 : 0, __ATOMIC_RELAXED); }

uint64_t fio_fallback_copies(void) { return __atomic_load_n(&fallback_copies, __ATOMIC_RELAXED); }

static int use_fallback(void)
{
    int f = __atomic_load_n(&force_fallback, __ATOMIC_RELAXED);
    if (f < 0) {
        f = mts_env_flag("MTS_DISABLE_COPY_FILE_RANGE");
        __atomic_store_n(&force_fallback, f, __ATOMIC_RELAXED);
    }
    return f;
}

static int copy_bounce(int in_fd, uint64_t in_off, int out_fd, uint64_t len)
{
    __atomic_add_fetch(&fallback_copies, 1, __ATOMIC_RELAXED);
    size_t cap = (size_t)MTS_MIN((uint64_t)BOUNCE_SIZE, len);
    char *buf = mts_malloc(cap);
    if (!buf) return MTS_E_NOMEM;
    int rc = 0;
    off_t out_off = lseek(out_fd, 0, SEEK_CUR);
    if (out_off < 0) rc = -errno;
    while (len && !rc) {
        size_t n = (size_t)MTS_MIN((uint64_t)cap, len);
        rc = fio_pread_all(in_fd, buf, n, in_off);
        if (!rc) rc = fio_pwrite_all(out_fd, buf, n, (uint64_t)out_off);
        in_off += n;
        out_off += (off_t)n;
        len -= n;
    }
    if (!rc && lseek(out_fd, out_off, SEEK_SET) < 0) rc = -errno;
    mts_free(buf);
    return rc;
}

int fio_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t len)
{
    if (!len) return 0;
    if (use_fallback()) return copy_bounce(in_fd, in_off, out_fd, len);
    loff_t off = (loff_t)in_off;
    FORWARD_IF_ERROR(fault(MTS_FAULT_COPY));
    while (len) {
        ssize_t n = sys_copy_file_range(in_fd, &off, out_fd, NULL, (size_t)MTS_MIN(len, 1ull << 30), 0u);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
                return copy_bounce(in_fd, (uint64_t)off, out_fd, len);
            return -errno;
        }
        if (n == 0) return -EIO; /* source shorter than expected */
        len -= (uint64_t)n;
    }
    return 0;
}

int fio_temp_name(char *buf, size_t len, const char *base)
{
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = sys_getrandom(r + got, sizeof r - got, 0u);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        got += (size_t)n;
    }
    int n = snprintf(buf, len, "%s.", base);
    if (n < 0 || (size_t)n + 33 > len) return -ENAMETOOLONG;
    for (int i = 0; i < 16; i++) sprintf(buf + n + 2 * i, "%02x", r[i]);
    return 0;
}

int fio_stat(const char *path, struct stat *st)
{
    return sys_stat(path, st) == 0 ? 0 : -errno;
}

int fio_fstat(int fd, struct stat *st)
{
    return sys_fstat(fd, st) == 0 ? 0 : -errno;
}

int fio_fsync_dir(const char *dir)
{
    int fd = fio_open(dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) return fd;
    int rc = fio_fsync(fd);
    close(fd);
    return rc;
}

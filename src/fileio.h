/* File primitives: full writes, in-kernel range copies with a portable
 * fallback, temp names. Every call returns 0 or -errno. */
#ifndef MTS_FILEIO_H
#define MTS_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Every open, write, fsync, rename, link and copy of the library goes through these
 * wrappers, so tests can make the n-th call of a kind fail (fault injection). */
enum {
    MTS_FAULT_WRITE = 0,  /* write/writev */
    MTS_FAULT_PWRITE = 1, /* the writes of the pread/pwrite fallback copy, pwrite */
    MTS_FAULT_FSYNC = 2,
    MTS_FAULT_RENAME = 3, /* rename and link */
    MTS_FAULT_COPY = 4,   /* copy_file_range */
    MTS_FAULT_OPEN = 5,
    MTS_FAULT_KINDS = 6
};
/* Arms kind: its nth call from now (1-based) fails with -err; nth 0 disarms.
 * Also resets the kind's call counter. Process-wide; for tests. */
void mts__fault_arm(int kind, uint64_t nth, int err);
uint64_t mts__fault_calls(int kind); /* calls of kind since it was last armed */

int fio_open(const char *path, int flags, int mode); /* fd, or -errno */
int fio_rename(const char *from, const char *to);
int fio_link(const char *from, const char *to);
int fio_fsync(int fd);
int fio_write_all(int fd, const void *buf, size_t len);
int fio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Writes every byte of iov[0..n) (updates iov in place). */
int fio_writev_all(int fd, struct iovec *iov, int n);
int fio_pread_all(int fd, void *buf, size_t len, uint64_t off);

/* Copies len bytes from in_fd at in_off to out_fd at its current offset.
 * copy_file_range first; where the kernel or filesystem refuses it (EXDEV,
 * EOPNOTSUPP, ENOSYS, EINVAL), pread/pwrite through a bounce buffer. */
int fio_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t len);
/* 1: copy_file_range is never tried (the portable path). Process-wide; also
 * set by MTS_DISABLE_COPY_FILE_RANGE=1 in the environment. */
void fio_force_copy_fallback(int on);
uint64_t fio_fallback_copies(void); /* how many copies took the fallback */

/* "<base>.<32 hex digits>" : Spark's temp name shape (final name + UUID). */
int fio_temp_name(char *buf, size_t len, const char *base);
int fio_fsync_dir(const char *dir);
/* stat and fstat: 0 or -errno. */
struct stat;
int fio_stat(const char *path, struct stat *st);
int fio_fstat(int fd, struct stat *st);

#endif

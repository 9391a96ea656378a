/* File primitives: full writes, in-kernel range copies with a portable
 * fallback, temp names. Every call returns 0 or -errno. */
#ifndef MTS_FILEIO_H
#define MTS_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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

#endif

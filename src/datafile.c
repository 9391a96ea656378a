/* The data file as a destination, and what every destination shares. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checksum.h"
#include "dest.h"
#include "fileio.h"

#define MAX_IOV 1024

int dest_fail(const dest_env *env, int code, const char *fmt, ...)
{
    char msg[MTS_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    mts_vmsg(msg, sizeof msg, code, fmt, ap);
    va_end(ap);
    env->fail(env->ctx, code, msg);
    return code;
}

uint64_t chunk_free(chunk *c)
{
    chunk_block *b = c->block;
    if (!b) {
        uint64_t charge = c->charge;
        mts_free(c);
        return charge;
    }
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return 0;
    uint64_t charge = b->charge;
    mts_free(b);
    return charge;
}

void chunk_free_list(const dest_env *env, chunk *c)
{
    uint64_t charge = 0;
    while (c) {
        chunk *next = c->next;
        charge += chunk_free(c);
        c = next;
    }
    eng_release(env->budget, charge);
}

uint32_t dest_combine(const dest_env *env, uint32_t sum, uint32_t b_sum, uint64_t b_len)
{
    return env->algo == MTS_CHECKSUM_NONE ? 0 : checksum_combine(env->algo, sum, b_sum, b_len);
}

static void free_chunks(const dest_env *env, chunk **c, uint32_t n)
{
    uint64_t charge = 0;
    for (uint32_t i = 0; i < n; i++) charge += chunk_free(c[i]);
    eng_release(env->budget, charge);
}

static int out_put(destination *d, chunk **c, uint32_t n, uint64_t job)
{
    (void)job;
    out_file *o = (out_file *)d;
    const dest_env *env = o->env;
    struct iovec iov[MAX_IOV];
    int rc = 0;
    uint64_t t0 = mts_now_ns();
    for (uint32_t i = 0; i < n && rc == 0;) {
        uint32_t k = 0;
        for (; k < MAX_IOV && i + k < n; k++) iov[k] = (struct iovec){c[i + k]->data, c[i + k]->len};
        rc = fio_writev_all(o->fd, iov, (int)k);
        if (rc < 0) {
            dest_fail(env, rc, "write data file %s at offset %llu (partition %u)", o->path,
                      (unsigned long long)o->off, c[i]->partition);
            break;
        }
        for (uint32_t j = i; j < i + k; j++) out_appended(o, c[j]->partition, c[j]->len, c[j]->checksum);
        i += k;
    }
    __atomic_add_fetch(&env->io->write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    free_chunks(env, c, n);
    return rc;
}

static int out_finish(destination *d, out_file *out)
{
    (void)d;
    (void)out;
    return 0;
}

static void out_discard(destination *d) { (void)d; }

static const dest_ops out_ops = {out_put, out_finish, out_discard};

int out_init(out_file *o, const dest_env *env)
{
    memset(o, 0, sizeof *o);
    o->d.ops = &out_ops;
    o->env = env;
    o->fd = -1;
    o->len = mts_calloc(env->nparts, sizeof *o->len);
    o->sum = mts_malloc((size_t)env->nparts * sizeof *o->sum);
    if (!o->len || !o->sum) return MTS_E_NOMEM;
    out_forget(o);
    return 0;
}

void out_forget(out_file *o)
{
    uint32_t init = checksum_init(o->env->algo);
    for (uint32_t p = 0; p < o->env->nparts; p++) {
        o->len[p] = 0;
        o->sum[p] = init;
    }
    o->off = 0;
}

int out_create(out_file *o)
{
    if (o->fd >= 0) return 0;
    int fd = fio_open(o->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fd;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* a fresh file: cannot be contended */
        int rc = -errno;
        close(fd);
        return rc;
    }
    o->fd = fd;
    o->off = 0;
    return 0;
}

int out_copy(out_file *o, uint32_t p, int fd, uint64_t off, uint64_t len, uint32_t sum)
{
    uint64_t t0 = mts_now_ns();
    int rc = fio_copy_range(fd, off, o->fd, len);
    __atomic_add_fetch(&o->env->io->write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    if (rc < 0) return rc;
    out_merged(o, p, len, sum);
    return 0;
}

void out_appended(out_file *o, uint32_t p, uint64_t len, uint32_t sum)
{
    o->sum[p] = dest_combine(o->env, o->sum[p], sum, len);
    o->len[p] += len;
    o->off += len;
}

void out_merged(out_file *o, uint32_t p, uint64_t len, uint32_t sum)
{
    __atomic_add_fetch(&o->env->io->bytes_merged, len, __ATOMIC_RELAXED);
    out_appended(o, p, len, sum);
}

void out_close(out_file *o)
{
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
}

void out_free(out_file *o)
{
    out_close(o);
    mts_free(o->len);
    mts_free(o->sum);
    o->len = NULL;
    o->sum = NULL;
}

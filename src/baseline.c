/* The pre-optimisation strategy, kept as the benchmark reference: every
 * partition's compressed streams are appended to a temp file of its own (one
 * file per non-empty partition per map task, as Spark's bypass-merge writer and
 * the multithreaded writer before streaming did), and at the end the files are
 * concatenated in partition order into the data file with in-kernel copies
 * (Spark's transferTo). Compression, jobs and budget are the same as in the
 * streaming strategy; only where the bytes go differs. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "dest.h"
#include "fileio.h"

#define FD_CLOSED (-2) /* the file exists but its descriptor was closed */

static void part_name(const part_files *pf, uint32_t p, char *buf, size_t len)
{
    snprintf(buf, len, "%s.p%u", pf->base, p);
}

static int open_part(part_files *pf, uint32_t p)
{
    char name[MTS_PATH_CAP + 80];
    part_name(pf, p, name, sizeof name);
    int flags = O_RDWR | O_CREAT | O_APPEND | (pf->fd[p] == FD_CLOSED ? 0 : O_TRUNC);
    int fd = fio_open(name, flags, 0644);
    if (fd == -EMFILE) { /* out of descriptors: close the others */
        for (uint32_t i = 0; i < pf->env->nparts; i++)
            if (pf->fd[i] >= 0) {
                close(pf->fd[i]);
                pf->fd[i] = FD_CLOSED;
            }
        fd = fio_open(name, flags, 0644);
    }
    if (fd < 0) return dest_fail(pf->env, fd, "create partition file %s (partition %u)", name, p);
    pf->fd[p] = fd;
    return 0;
}

static int pf_put(destination *d, chunk **c, uint32_t n, uint64_t job)
{
    (void)job;
    part_files *pf = (part_files *)d;
    const dest_env *env = pf->env;
    int rc = 0;
    uint64_t t0 = mts_now_ns(), charge = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = c[i]->partition;
        if (rc == 0 && pf->fd[p] < 0) rc = open_part(pf, p);
        if (rc == 0 && (rc = fio_write_all(pf->fd[p], c[i]->data, c[i]->len)) < 0) {
            char name[MTS_PATH_CAP + 80];
            part_name(pf, p, name, sizeof name);
            dest_fail(env, rc, "write partition file %s (partition %u)", name, p);
        }
        if (rc == 0) {
            pf->sum[p] = dest_combine(env, pf->sum[p], c[i]->checksum, c[i]->len);
            pf->len[p] += c[i]->len;
        }
        charge += chunk_free(c[i]);
    }
    eng_release(env->budget, charge);
    __atomic_add_fetch(&env->io->write_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    return rc;
}

static int pf_finish(destination *d, out_file *out)
{
    part_files *pf = (part_files *)d;
    const dest_env *env = pf->env;
    int rc = out_create(out); /* normally open since the writer started */
    if (rc < 0) return dest_fail(env, rc, "create data file %s", out->path);
    char name[MTS_PATH_CAP + 80];
    for (uint32_t p = 0; p < env->nparts; p++) {
        if (pf->fd[p] == -1) continue;
        part_name(pf, p, name, sizeof name);
        if (pf->fd[p] == FD_CLOSED) {
            int fd = fio_open(name, O_RDONLY, 0);
            if (fd < 0) return dest_fail(env, fd, "reopen partition file %s (partition %u)", name, p);
            pf->fd[p] = fd;
        }
        if ((rc = out_copy(out, p, pf->fd[p], 0, pf->len[p], pf->sum[p])) < 0)
            return dest_fail(env, rc, "copy partition file %s (partition %u) into %s", name, p, out->path);
        close(pf->fd[p]);
        pf->fd[p] = -1;
        unlink(name);
    }
    return 0;
}

static void pf_discard(destination *d)
{
    part_files *pf = (part_files *)d;
    char name[MTS_PATH_CAP + 80];
    for (uint32_t p = 0; pf->fd && p < pf->env->nparts; p++) {
        if (pf->fd[p] == -1) continue;
        if (pf->fd[p] >= 0) close(pf->fd[p]);
        part_name(pf, p, name, sizeof name);
        unlink(name);
        pf->fd[p] = -1;
    }
}

static const dest_ops pf_ops = {pf_put, pf_finish, pf_discard};

int part_files_init(part_files *pf, const dest_env *env, const char *base)
{
    memset(pf, 0, sizeof *pf);
    pf->d.ops = &pf_ops;
    pf->env = env;
    snprintf(pf->base, sizeof pf->base, "%s", base);
    pf->fd = mts_malloc((size_t)env->nparts * sizeof *pf->fd);
    pf->len = mts_calloc(env->nparts, sizeof *pf->len);
    pf->sum = mts_malloc((size_t)env->nparts * sizeof *pf->sum);
    if (!pf->fd || !pf->len || !pf->sum) return MTS_E_NOMEM;
    uint32_t init = checksum_init(env->algo);
    for (uint32_t p = 0; p < env->nparts; p++) {
        pf->fd[p] = -1;
        pf->sum[p] = init;
    }
    return 0;
}

void part_files_free(part_files *pf)
{
    if (!pf->d.ops) return;
    pf_discard(&pf->d);
    mts_free(pf->fd);
    mts_free(pf->len);
    mts_free(pf->sum);
    memset(pf, 0, sizeof *pf);
}

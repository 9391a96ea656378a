#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "fileio.h"
#include "internal.h"
#include "layout.h"

/* ---- names ------------------------------------------------------------------ */

int mts_output_name(char *buf, size_t len, int32_t shuffle_id, int64_t map_id, int kind, mts_checksum algo)
{
    if (!buf || shuffle_id < 0 || map_id < 0) return MTS_E_ARG;
    int n;
    switch (kind) {
    case LAYOUT_DATA: n = snprintf(buf, len, "shuffle_%d_%lld_0.data", shuffle_id, (long long)map_id); break;
    case LAYOUT_INDEX: n = snprintf(buf, len, "shuffle_%d_%lld_0.index", shuffle_id, (long long)map_id); break;
    case LAYOUT_CHECKSUM:
        if (algo == MTS_CHECKSUM_NONE || !mts_checksum_name(algo)) return MTS_E_ARG;
        n = snprintf(buf, len, "shuffle_%d_%lld_0.checksum.%s", shuffle_id, (long long)map_id,
                     mts_checksum_name(algo));
        break;
    default: return MTS_E_ARG;
    }
    if (n < 0 || (size_t)n >= len) return MTS_E_ARG;
    return n;
}

/* Length of "dir/shuffle_S_M_0" in path, or 0 if path is not an output file. */
static size_t base_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int s, used = 0;
    long long m;
    if (sscanf(name, "shuffle_%d_%lld_0%n", &s, &m, &used) != 2 || used == 0 || s < 0 || m < 0) return 0;
    const char *suffix = name + used;
    if (strcmp(suffix, ".data") && strcmp(suffix, ".index") && strncmp(suffix, ".checksum.", 10)) return 0;
    return (size_t)(suffix - path);
}

mts_checksum layout_checksum_in_name(const char *path)
{
    size_t b = base_len(path);
    mts_checksum algo = MTS_CHECKSUM_NONE;
    if (b && !strncmp(path + b, ".checksum.", 10) && mts_checksum_parse(path + b + 10, &algo) < 0)
        algo = MTS_CHECKSUM_NONE;
    return algo;
}

int layout_sibling(char *buf, size_t len, const char *path, int kind, mts_checksum algo)
{
    size_t b = base_len(path);
    if (!b) return MTS_E_ARG;
    int n;
    switch (kind) {
    case LAYOUT_DATA: n = snprintf(buf, len, "%.*s.data", (int)b, path); break;
    case LAYOUT_INDEX: n = snprintf(buf, len, "%.*s.index", (int)b, path); break;
    case LAYOUT_CHECKSUM:
        if (!mts_checksum_name(algo) || algo == MTS_CHECKSUM_NONE) return MTS_E_ARG;
        n = snprintf(buf, len, "%.*s.checksum.%s", (int)b, path, mts_checksum_name(algo));
        break;
    default: return MTS_E_ARG;
    }
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

int layout_list_maps(const char *dir, int32_t shuffle_id, uint64_t **ids_out, uint32_t *n_out)
{
    *ids_out = NULL;
    *n_out = 0;
    int fd = fio_open(dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) return fd;
    DIR *d = fdopendir(fd);
    if (!d) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    uint64_t *ids = NULL;
    uint32_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int32_t s;
        long long mid;
        int used = 0;
        if (sscanf(e->d_name, "shuffle_%d_%lld_0.index%n", &s, &mid, &used) != 2 || e->d_name[used] ||
            s != shuffle_id || mid < 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            uint64_t *g = mts_realloc(ids, cap * sizeof *ids);
            if (!g) {
                rc = MTS_E_NOMEM;
                break;
            }
            ids = g;
        }
        ids[n++] = (uint64_t)mid;
    }
    closedir(d);
    if (rc < 0) {
        mts_free(ids);
        return rc;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

/* ---- index and checksum files ------------------------------------------------- */

int layout_index_encode(unsigned char *buf, const uint64_t *lengths, uint32_t n)
{
    uint64_t off = 0;
    put_be64(buf, 0);
    for (uint32_t i = 0; i < n; i++) {
        if (lengths[i] > (uint64_t)INT64_MAX - off) return MTS_E_OVERFLOW;
        off += lengths[i];
        put_be64(buf + 8 * ((size_t)i + 1), off);
    }
    return 0;
}

int layout_index_decode(const unsigned char *buf, uint64_t len, uint32_t want_n, uint64_t data_len,
                        uint64_t *offsets, uint32_t *n_out, const char *path, const char *data_path, char *err,
                        size_t errlen)
{
    if (len < 16 || len % 8 || len / 8 - 1 > MTS_MAX_PARTITIONS)
        return mts_msg(err, errlen, MTS_E_CORRUPT, "index %s: %llu bytes is not (N+1)*8 with 1 <= N <= %u", path,
                       (unsigned long long)len, MTS_MAX_PARTITIONS);
    uint32_t n = (uint32_t)(len / 8 - 1);
    if (want_n && n != want_n)
        return mts_msg(err, errlen, MTS_E_CORRUPT, "index %s: %u partitions, expected %u", path, n, want_n);
    if (n_out) *n_out = n;
    if (!offsets) return 0;
    for (uint32_t i = 0; i <= n; i++) offsets[i] = get_be64(buf + 8 * (size_t)i);
    if (data_len == UINT64_MAX) return 0; /* lenient: the caller checks */
    for (uint32_t i = 0; i <= n; i++) {
        const char *why = i == 0 && offsets[0] ? "not 0"
                          : i > 0 && offsets[i] < offsets[i - 1] ? "below the one before"
                          : offsets[i] > data_len ? "past the end of the data"
                          : NULL;
        if (why)
            return mts_msg(err, errlen, MTS_E_CORRUPT, "index %s: offset %u (%llu) is %s (data file%s%s has %llu bytes)",
                           path, i, (unsigned long long)offsets[i], why, data_path ? " " : "",
                           data_path ? data_path : "", (unsigned long long)data_len);
    }
    if (offsets[n] != data_len && data_path)
        return mts_msg(err, errlen, MTS_E_CORRUPT, "data %s: %llu bytes but its index %s ends at %llu", data_path,
                       (unsigned long long)data_len, path, (unsigned long long)offsets[n]);
    if (offsets[n] != data_len)
        return mts_msg(err, errlen, MTS_E_CORRUPT, "index %s: ends at %llu but the data file has %llu bytes", path,
                       (unsigned long long)offsets[n], (unsigned long long)data_len);
    return 0;
}

void layout_sums_encode(unsigned char *buf, const uint32_t *sums, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) put_be64(buf + 8 * (size_t)i, sums[i]);
}

int layout_sums_decode(const unsigned char *buf, uint64_t len, uint32_t n, uint64_t *sums, const char *path,
                       char *err, size_t errlen)
{
    if (len != (uint64_t)n * 8)
        return mts_msg(err, errlen, MTS_E_CORRUPT, "checksum %s: %llu bytes, expected %llu for %u partitions", path,
                       (unsigned long long)len, (unsigned long long)n * 8, n);
    for (uint32_t i = 0; i < n; i++) sums[i] = get_be64(buf + 8 * (size_t)i);
    return 0;
}

mts_codec layout_sniff(const void *p, uint64_t len)
{
    if (len >= LZ4J_MAGIC_LEN && !memcmp(p, LZ4J_MAGIC, LZ4J_MAGIC_LEN)) return MTS_CODEC_LZ4;
    if (len >= 4 && !memcmp(p, ZSTD_FRAME_MAGIC, 4)) return MTS_CODEC_ZSTD;
    return MTS_CODEC_NONE;
}

int layout_read_file(const char *path, unsigned char **buf, uint64_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = fio_open(path, O_RDONLY, 0);
    if (fd < 0) return fd;
    struct stat st;
    int rc = fio_fstat(fd, &st);
    uint64_t n = rc ? 0 : (uint64_t)st.st_size;
    unsigned char *b = rc ? NULL : mts_malloc((size_t)n);
    if (!rc && !b) rc = MTS_E_NOMEM;
    if (!rc) rc = fio_pread_all(fd, b, (size_t)n, 0);
    close(fd);
    if (rc) {
        mts_free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int layout_index_read(const char *path, uint32_t num_partitions, uint64_t data_len, uint64_t *offsets, char *err,
                      size_t errlen)
{
    unsigned char *buf;
    uint64_t len;
    FORWARD_IF_ERROR(layout_read_file(path, &buf, &len));
    int rc = layout_index_decode(buf, len, num_partitions, data_len, offsets, NULL, path, NULL, err, errlen);
    mts_free(buf);
    return rc;
}

/* ---- one map output ------------------------------------------------------------- */

int map_output_open(map_output *m, const char *path, uint32_t want_n, unsigned flags, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    char side[MTS_PATH_CAP];
    size_t cap = strlen(path) + 32;
    if (layout_sibling(side, sizeof side, path, LAYOUT_DATA, MTS_CHECKSUM_NONE) < 0)
        return mts_msg(err, errlen, MTS_E_ARG, "open %s: not named shuffle_S_M_0.data, .index or .checksum.ALGO", path);
    m->data_path = mts_malloc(cap);
    if (!m->data_path) return mts_msg(err, errlen, MTS_E_NOMEM, "open %s", path);
    snprintf(m->data_path, cap, "%s", side);

    /* Data: a missing file is empty, as Spark's File.length() reads it. */
    int rc = fio_open(m->data_path, O_RDONLY, 0);
    if (rc < 0 && rc != -ENOENT) return mts_msg(err, errlen, rc, "open data %s", m->data_path);
    m->fd = rc < 0 ? -1 : rc;
    struct stat st;
    if (m->fd >= 0 && (rc = fio_fstat(m->fd, &st)) != 0) return mts_msg(err, errlen, rc, "stat data %s", m->data_path);
    m->size = m->fd >= 0 ? (uint64_t)st.st_size : 0;

    layout_sibling(side, sizeof side, path, LAYOUT_INDEX, MTS_CHECKSUM_NONE);
    unsigned char *buf;
    uint64_t len;
    if ((rc = layout_read_file(side, &buf, &len)) < 0) return mts_msg(err, errlen, rc, "read index %s", side);
    uint32_t n = 0;
    rc = layout_index_decode(buf, len, want_n, 0, NULL, &n, side, m->data_path, err, errlen);
    if (rc == 0) {
        m->nparts = n;
        m->off = mts_malloc(((size_t)n + 1) * sizeof *m->off);
        rc = m->off ? layout_index_decode(buf, len, n, flags & MAP_LENIENT ? UINT64_MAX : m->size, m->off, NULL, side,
                                          m->data_path, err, errlen)
                    : mts_msg(err, errlen, MTS_E_NOMEM, "decode index %s", side);
    }
    mts_free(buf);
    if (rc < 0) return rc;

    /* The checksum file, of whichever algorithm is there (or the one named). */
    static const mts_checksum algos[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    mts_checksum named = layout_checksum_in_name(path);
    for (int k = 0; k < 3 && !m->sums; k++) {
        if (named != MTS_CHECKSUM_NONE && named != algos[k]) continue;
        layout_sibling(side, sizeof side, path, LAYOUT_CHECKSUM, algos[k]);
        rc = layout_read_file(side, &buf, &len);
        if (rc == -ENOENT) continue;
        if (rc < 0) return mts_msg(err, errlen, rc, "read checksum %s", side);
        m->sums = mts_malloc((size_t)n * sizeof *m->sums + 1);
        rc = m->sums ? layout_sums_decode(buf, len, n, m->sums, side, err, errlen)
                     : mts_msg(err, errlen, MTS_E_NOMEM, "decode checksum %s", side);
        mts_free(buf);
        if (rc < 0) return rc;
        m->algo = algos[k];
    }
    if (m->size) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
        if (p == MAP_FAILED) return mts_msg(err, errlen, -errno, "map data %s", m->data_path);
        m->base = p;
        madvise(p, m->size, MADV_SEQUENTIAL);
    }
    return 0;
}

void map_output_close(map_output *m)
{
    if (m->base) munmap((void *)(uintptr_t)m->base, m->size);
    if (m->fd >= 0) close(m->fd);
    mts_free(m->data_path);
    mts_free(m->off);
    mts_free(m->sums);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

/* ---- the public read-only view ---------------------------------------------------- */

struct mts_output {
    map_output m;
    mts_output_info info;
};

int mts_output_open(const char *path, unsigned flags, mts_output **out, char *err, size_t errlen)
{
    char scratch[MTS_MSG_CAP];
    if (!err) { err = scratch; errlen = sizeof scratch; }
    if (errlen) err[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!path) return mts_msg(err, errlen, MTS_E_ARG, "open: NULL path");
    if (flags & ~MTS_OUTPUT_LENIENT) return mts_msg(err, errlen, MTS_E_ARG, "open: unknown flags 0x%x", flags);
    mts_output *o = mts_calloc(1, sizeof *o);
    if (!o) return mts_msg(err, errlen, MTS_E_NOMEM, "open %s", path);
    int rc = map_output_open(&o->m, path, 0, flags & MTS_OUTPUT_LENIENT ? MAP_LENIENT : 0, err, errlen);
    if (rc < 0) {
        mts_output_close(o);
        return rc;
    }
    map_output *m = &o->m;
    mts_codec codec = MTS_CODEC_AUTO;
    for (uint32_t p = 0; p < m->nparts && codec == MTS_CODEC_AUTO; p++)
        if (m->off[p + 1] > m->off[p] && m->off[p + 1] <= m->size)
            codec = layout_sniff(m->base + m->off[p], m->off[p + 1] - m->off[p]);
    o->info = (mts_output_info){m->data_path, m->nparts, m->size, m->off, m->algo, m->sums, codec};
    *out = o;
    return 0;
}

const mts_output_info *mts_output_get_info(const mts_output *o) { return o ? &o->info : NULL; }

int mts_output_partition(const mts_output *o, uint32_t p, const void **bytes, uint64_t *len)
{
    if (!o || !bytes || !len || p >= o->m.nparts) return MTS_E_ARG;
    uint64_t a = o->m.off[p], b = o->m.off[p + 1];
    if (b < a || b > o->m.size) return MTS_E_CORRUPT;
    *bytes = b > a ? o->m.base + a : NULL;
    *len = b - a;
    return 0;
}

void mts_output_close(mts_output *o)
{
    if (!o) return;
    map_output_close(&o->m);
    mts_free(o);
}

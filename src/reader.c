/* The reduce side: reading one partition range of many map outputs.
 *
 * Each map's data file is mapped read-only. A read of partitions [start, end)
 * is one job per map; workers take jobs in map order, verify the segment's
 * checksums, decode it as one concatenated stream (as Spark's batch fetch
 * does) into pieces, and queue the pieces on the map's slot. The caller's
 * thread hands pieces out in map order.
 *
 * Budget: every decoded piece is charged until the caller moves past it. A
 * worker whose map is not the frontier (the map being handed out) may only
 * take budget that leaves one piece free, so the frontier can always make
 * progress and no decoding ahead can starve it.
 *
 * All shared state is guarded by reader.mu; workers decode without it. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "codec.h"
#include "commit.h"
#include "fileio.h"
#include "internal.h"

#define DEFAULT_PIECE (1u << 20)
#define MSG_CAP 512

typedef struct piece {
    struct piece *next;
    const unsigned char *data; /* buf, or the mapped file (codec none) */
    size_t len, cap;
    uint64_t charge;
    unsigned char buf[];
} piece;

typedef struct map_out {
    char *path;                /* data file */
    int fd;
    const unsigned char *base; /* mapping of the data file; NULL if empty */
    uint64_t size;
    uint64_t *off;             /* num_partitions + 1 */
    uint32_t *sums;            /* num_partitions, or NULL without a checksum file */
    mts_checksum algo;
} map_out;

typedef struct slot {
    piece *head, *tail;
    int done, err;
    char msg[MSG_CAP];
} slot;

struct mts_reader {
    mts_reader_options o;
    map_out *maps;
    uint32_t nmaps, nparts;
    pthread_t *threads;
    unsigned started;

    pthread_mutex_t mu;
    pthread_cond_t work_cv, piece_cv, budget_cv;
    uint64_t gen;          /* bumped by every start: stale work is dropped */
    int active, stop;
    uint32_t start, end, next_job, frontier;
    slot *slots;
    uint64_t held, peak;
    piece *current;        /* handed to the caller; released on the next call */
    piece *spare;          /* idle decode pieces for reuse (uncharged), at most nspare_cap */
    uint32_t nspare, nspare_cap;
    int err;
    char msg[MSG_CAP];
    mts_reader_stats st;   /* bytes_* and wait_ns: caller; decode_ns: atomic */
};

void mts_reader_options_init(mts_reader_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->codec = MTS_CODEC_AUTO;
    o->threads = 2;
    o->max_bytes_in_flight = 64ull << 20;
    o->piece_size = DEFAULT_PIECE;
    o->verify_checksums = 1;
}

/* ---- opening ---------------------------------------------------------------- */

static int errf(char *err, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t len, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return code;
}

static int read_whole(const char *path, unsigned char **buf, uint64_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    *len = rc ? 0 : (uint64_t)st.st_size;
    *buf = rc ? NULL : mts_malloc(*len);
    if (!rc && !*buf) rc = -ENOMEM;
    if (!rc) rc = fio_pread_all(fd, *buf, *len, 0);
    close(fd);
    if (rc) { mts_free(*buf); *buf = NULL; }
    return rc;
}

static int open_map(map_out *m, const char *data_path, uint32_t *nparts, char *err, size_t errlen)
{
    m->fd = -1;
    size_t plen = strlen(data_path);
    if (plen < 5 || strcmp(data_path + plen - 5, ".data") != 0)
        return errf(err, errlen, MTS_E_ARG, "open %s: not a .data file", data_path);
    m->path = mts_malloc(plen + 32);
    if (!m->path) return MTS_E_NOMEM;
    memcpy(m->path, data_path, plen + 1);
    char *side = mts_malloc(plen + 32);
    if (!side) return MTS_E_NOMEM;
    memcpy(side, data_path, plen - 5);

    /* Index: (N+1) big-endian longs, 0 first, non-decreasing. */
    strcpy(side + plen - 5, ".index");
    unsigned char *ib;
    uint64_t ilen;
    int rc = read_whole(side, &ib, &ilen);
    if (rc < 0) { errf(err, errlen, rc, "open index %s: %s", side, mts_strerror(rc)); goto out; }
    if (ilen < 16 || ilen % 8) {
        rc = errf(err, errlen, MTS_E_CORRUPT, "index %s: %llu bytes is not (N+1)*8 with N >= 1", side,
                  (unsigned long long)ilen);
        mts_free(ib);
        goto out;
    }
    uint32_t n = (uint32_t)(ilen / 8 - 1);
    if (*nparts && n != *nparts) {
        rc = errf(err, errlen, MTS_E_CORRUPT, "index %s: %u partitions, other outputs have %u", side, n, *nparts);
        mts_free(ib);
        goto out;
    }
    *nparts = n;
    m->off = mts_malloc(((size_t)n + 1) * 8);
    if (!m->off) { rc = MTS_E_NOMEM; mts_free(ib); goto out; }
    for (uint32_t i = 0; i <= n; i++) m->off[i] = get_be64(ib + 8 * i);
    mts_free(ib);

    /* Data: its size must be the index's last offset (a missing file is empty). */
    m->fd = open(data_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (m->fd < 0 && errno != ENOENT) { rc = errf(err, errlen, -errno, "open data %s: %s", data_path, strerror(errno)); goto out; }
    m->size = m->fd >= 0 && fstat(m->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    for (uint32_t i = 0; i <= n; i++) {
        if ((i == 0 && m->off[0] != 0) || (i > 0 && m->off[i] < m->off[i - 1]) || m->off[i] > m->size) {
            rc = errf(err, errlen, MTS_E_CORRUPT,
                      "index %s: offset %u (%llu) is %s (data file %s has %llu bytes)", side, i,
                      (unsigned long long)m->off[i],
                      i == 0 && m->off[0] ? "not 0" : m->off[i] > m->size ? "past the end of the data" : "below the one before",
                      data_path, (unsigned long long)m->size);
            goto out;
        }
    }
    if (m->off[n] != m->size) {
        rc = errf(err, errlen, MTS_E_CORRUPT, "data %s: %llu bytes but its index ends at %llu", data_path,
                  (unsigned long long)m->size, (unsigned long long)m->off[n]);
        goto out;
    }
    if (m->size) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
        if (p == MAP_FAILED) { rc = errf(err, errlen, -errno, "map data %s: %s", data_path, strerror(errno)); goto out; }
        m->base = p;
        madvise(p, m->size, MADV_SEQUENTIAL);
    }

    /* Checksums, when a checksum file is there. */
    static const mts_checksum algos[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    for (int k = 0; k < 3 && !m->sums; k++) {
        sprintf(side + plen - 5, ".checksum.%s", mts_checksum_name(algos[k]));
        unsigned char *cb;
        uint64_t clen;
        rc = read_whole(side, &cb, &clen);
        if (rc == -ENOENT) { rc = 0; continue; }
        if (rc < 0) { errf(err, errlen, rc, "open checksum %s: %s", side, mts_strerror(rc)); goto out; }
        if (clen != (uint64_t)n * 8) {
            rc = errf(err, errlen, MTS_E_CORRUPT, "checksum %s: %llu bytes, expected %u for %u partitions", side,
                      (unsigned long long)clen, n * 8, n);
            mts_free(cb);
            goto out;
        }
        m->sums = mts_malloc((size_t)n * 4 + 4);
        if (!m->sums) { mts_free(cb); rc = MTS_E_NOMEM; goto out; }
        for (uint32_t i = 0; i < n; i++) m->sums[i] = (uint32_t)get_be64(cb + 8 * i);
        m->algo = algos[k];
        mts_free(cb);
    }
out:
    mts_free(side);
    return rc;
}

static void close_map(map_out *m)
{
    if (m->base) munmap((void *)m->base, m->size);
    if (m->fd >= 0) close(m->fd);
    mts_free(m->path);
    mts_free(m->off);
    mts_free(m->sums);
}

/* ---- pieces and budget -------------------------------------------------------- */

/* Releases a piece's budget. Decode pieces are kept for reuse (a fresh
 * 1 MiB buffer per piece would be mapped and faulted in each time); views
 * into the mapped file are freed. */
static void piece_free_locked(mts_reader *r, piece *p)
{
    r->held -= p->charge;
    pthread_cond_broadcast(&r->budget_cv);
    if (p->cap && r->nspare < r->nspare_cap) {
        p->next = r->spare;
        r->spare = p;
        r->nspare++;
    } else {
        mts_free(p);
    }
}

/* A new piece for map j of read gen, in *out; MTS_E_ABORTED if the read was
 * ended, MTS_E_NOMEM. */
static int piece_new(mts_reader *r, uint32_t j, uint64_t gen, piece **out)
{
    uint64_t charge = sizeof(piece) + r->o.piece_size;
    uint64_t reserve = charge; /* what a map behind the frontier must leave free */
    pthread_mutex_lock(&r->mu);
    while (!r->stop && r->gen == gen &&
           !(r->held + charge <= r->o.max_bytes_in_flight &&
             (j == r->frontier || r->held + charge + reserve <= r->o.max_bytes_in_flight)))
        pthread_cond_wait(&r->budget_cv, &r->mu);
    int live = !r->stop && r->gen == gen;
    piece *p = NULL;
    if (live) {
        r->held += charge;
        if (r->held > r->peak) r->peak = r->held;
        if ((p = r->spare)) {
            r->spare = p->next;
            r->nspare--;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!live) return MTS_E_ABORTED;
    if (!p) p = mts_malloc(charge);
    if (!p) {
        pthread_mutex_lock(&r->mu);
        r->held -= charge;
        pthread_cond_broadcast(&r->budget_cv);
        pthread_mutex_unlock(&r->mu);
        return MTS_E_NOMEM;
    }
    *p = (piece){NULL, p->buf, 0, r->o.piece_size, charge};
    *out = p;
    return 0;
}

/* Queues a piece on map j's slot; 0, or MTS_E_ABORTED if the read ended. */
static int publish(mts_reader *r, uint32_t j, uint64_t gen, piece *p)
{
    pthread_mutex_lock(&r->mu);
    int live = !r->stop && r->gen == gen;
    if (live) {
        slot *s = &r->slots[j];
        if (s->tail) s->tail->next = p;
        else s->head = p;
        s->tail = p;
        pthread_cond_broadcast(&r->piece_cv);
    } else {
        piece_free_locked(r, p);
    }
    pthread_mutex_unlock(&r->mu);
    return live ? 0 : MTS_E_ABORTED;
}

static void finish(mts_reader *r, uint32_t j, uint64_t gen, int err, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (!r->stop && r->gen == gen) {
        slot *s = &r->slots[j];
        s->done = 1;
        s->err = err;
        if (err) snprintf(s->msg, sizeof s->msg, "%s", msg);
        pthread_cond_broadcast(&r->piece_cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- decoding ----------------------------------------------------------------- */

typedef struct sink_ctx {
    mts_reader *r;
    uint32_t j;
    uint64_t gen;
    piece *cur;
} sink_ctx;

static int sink(void *ctx, const void *buf, size_t len)
{
    sink_ctx *s = ctx;
    const unsigned char *b = buf;
    while (len) {
        if (!s->cur) FORWARD_IF_ERROR(piece_new(s->r, s->j, s->gen, &s->cur));
        size_t n = MTS_MIN(len, s->cur->cap - s->cur->len);
        memcpy(s->cur->buf + s->cur->len, b, n);
        s->cur->len += n;
        b += n;
        len -= n;
        if (s->cur->len == s->cur->cap) {
            piece *p = s->cur;
            s->cur = NULL;
            FORWARD_IF_ERROR(publish(s->r, s->j, s->gen, p));
        }
    }
    return 0;
}

static uint32_t partition_at(const map_out *m, uint32_t start, uint32_t end, uint64_t off)
{
    uint32_t p = start;
    while (p + 1 < end && m->off[p + 1] <= off) p++;
    return p;
}

static mts_codec detect(const unsigned char *p, uint64_t len)
{
    if (len >= LZ4J_MAGIC_LEN && !memcmp(p, LZ4J_MAGIC, LZ4J_MAGIC_LEN)) return MTS_CODEC_LZ4;
    if (len >= 4 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD) return MTS_CODEC_ZSTD;
    return MTS_CODEC_NONE;
}

static void run_job(mts_reader *r, uint32_t j, uint64_t gen, uint32_t start, uint32_t end)
{
    map_out *m = &r->maps[j];
    char msg[MSG_CAP];
    uint64_t a = m->off[start], b = m->off[end];
    if (a == b) { finish(r, j, gen, 0, NULL); return; }
    const unsigned char *seg = m->base + a;
    uint64_t t0 = mts_now_ns();
    if (r->o.verify_checksums && m->sums) {
        for (uint32_t p = start; p < end; p++) {
            uint32_t got = checksum_update(m->algo, checksum_init(m->algo), m->base + m->off[p], m->off[p + 1] - m->off[p]);
            if (got != m->sums[p]) {
                snprintf(msg, sizeof msg, "%s: partition %u at offset %llu (%llu bytes): %s checksum %u, stored %u",
                         m->path, p, (unsigned long long)m->off[p], (unsigned long long)(m->off[p + 1] - m->off[p]),
                         mts_checksum_name(m->algo), got, m->sums[p]);
                finish(r, j, gen, MTS_E_CORRUPT, msg);
                return;
            }
        }
    }
    mts_codec codec = r->o.codec == MTS_CODEC_AUTO ? detect(seg, b - a) : r->o.codec;
    int rc;
    uint64_t bad = 0;
    if (codec == MTS_CODEC_NONE) {
        /* Zero-copy: the piece points into the mapped file. */
        piece *p = mts_malloc(sizeof *p);
        if (!p) { finish(r, j, gen, MTS_E_NOMEM, "allocate a piece"); return; }
        *p = (piece){NULL, seg, (size_t)(b - a), 0, 0};
        rc = publish(r, j, gen, p);
    } else {
        sink_ctx sc = {r, j, gen, NULL};
        rc = codec_get(codec)->decode(seg, b - a, sink, &sc, &bad);
        if (rc == 0 && sc.cur) {
            rc = publish(r, j, gen, sc.cur);
            sc.cur = NULL;
        }
        if (sc.cur) {
            pthread_mutex_lock(&r->mu);
            piece_free_locked(r, sc.cur);
            pthread_mutex_unlock(&r->mu);
        }
    }
    __atomic_add_fetch(&r->st.decode_ns, mts_now_ns() - t0, __ATOMIC_RELAXED);
    if (rc == MTS_E_CORRUPT) {
        uint32_t p = partition_at(m, start, end, a + bad);
        snprintf(msg, sizeof msg, "%s: partition %u: corrupt %s stream at offset %llu (partition starts at %llu)",
                 m->path, p, mts_codec_name(codec), (unsigned long long)(a + bad), (unsigned long long)m->off[p]);
    } else if (rc < 0) {
        snprintf(msg, sizeof msg, "%s: partitions %u..%u: %s", m->path, start, end - 1, mts_strerror(rc));
    }
    if (rc != MTS_E_ABORTED) finish(r, j, gen, rc < 0 ? rc : 0, msg);
}

static void *worker_main(void *arg)
{
    mts_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && !(r->active && r->next_job < r->nmaps)) pthread_cond_wait(&r->work_cv, &r->mu);
        if (r->stop) break;
        uint32_t j = r->next_job++, start = r->start, end = r->end;
        uint64_t gen = r->gen;
        pthread_mutex_unlock(&r->mu);
        run_job(r, j, gen, start, end);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- API ---------------------------------------------------------------------- */

static int validate(const mts_reader_options *o, char *err, size_t len)
{
    if (o->codec != MTS_CODEC_AUTO && !codec_get(o->codec)) return errf(err, len, MTS_E_ARG, "options: unknown codec %d", (int)o->codec);
    if (o->threads < 1 || o->threads > 256) return errf(err, len, MTS_E_ARG, "options: threads %u is not in 1..256", o->threads);
    if (o->piece_size < 4096) return errf(err, len, MTS_E_ARG, "options: piece_size %u is below 4096", o->piece_size);
    if (o->max_bytes_in_flight < MTS_MIN_BYTES_IN_FLIGHT ||
        o->max_bytes_in_flight < 2 * ((uint64_t)o->piece_size + sizeof(piece)))
        return errf(err, len, MTS_E_ARG, "options: max_bytes_in_flight %llu is below 64 KiB or two pieces",
                    (unsigned long long)o->max_bytes_in_flight);
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        if (o->reserved[i]) return errf(err, len, MTS_E_ARG, "options: reserved[%zu] must be 0", i);
    return 0;
}

int mts_reader_open(const mts_reader_options *opts, const char *const *paths, uint32_t n, mts_reader **out,
                    char *err, size_t errlen)
{
    char scratch[MSG_CAP];
    if (!err) { err = scratch; errlen = sizeof scratch; }
    if (errlen) err[0] = 0;
    if (!out) return MTS_E_ARG;
    *out = NULL;
    mts_reader_options defaults;
    mts_reader_options_init(&defaults);
    if (!opts) opts = &defaults;
    if (!paths && n) return errf(err, errlen, MTS_E_ARG, "open: NULL paths");
    FORWARD_IF_ERROR(validate(opts, err, errlen));
    mts_reader *r = mts_calloc(1, sizeof *r);
    if (!r) return MTS_E_NOMEM;
    r->o = *opts;
    r->nspare_cap = opts->threads + 2;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->work_cv, NULL);
    pthread_cond_init(&r->piece_cv, NULL);
    pthread_cond_init(&r->budget_cv, NULL);
    int rc = 0;
    r->maps = mts_calloc(MTS_MAX(n, 1u), sizeof(map_out));
    r->slots = mts_calloc(MTS_MAX(n, 1u), sizeof(slot));
    r->threads = mts_calloc(opts->threads, sizeof(pthread_t));
    if (!r->maps || !r->slots || !r->threads) { rc = errf(err, errlen, MTS_E_NOMEM, "open: out of memory"); goto fail; }
    for (uint32_t i = 0; i < n; i++) {
        r->maps[i].fd = -1;
        if (!paths[i]) { rc = errf(err, errlen, MTS_E_ARG, "open: NULL path %u", i); goto fail; }
        r->nmaps = i + 1;
        if ((rc = open_map(&r->maps[i], paths[i], &r->nparts, err, errlen)) < 0) goto fail;
    }
    for (unsigned t = 0; t < opts->threads; t++) {
        if (pthread_create(&r->threads[t], NULL, worker_main, r)) {
            rc = errf(err, errlen, MTS_E_NOMEM, "open: cannot start thread %u", t);
            goto fail;
        }
        r->started++;
    }
    *out = r;
    return 0;
fail:
    mts_reader_free(r);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int mts_reader_open_dir(const mts_reader_options *opts, const char *dir, int32_t shuffle_id, mts_reader **out,
                        char *err, size_t errlen)
{
    char scratch[MSG_CAP];
    if (!err) { err = scratch; errlen = sizeof scratch; }
    if (!out) return MTS_E_ARG;
    *out = NULL;
    if (!dir) return errf(err, errlen, MTS_E_ARG, "open: NULL dir");
    DIR *d = opendir(dir);
    if (!d) return errf(err, errlen, -errno, "open %s: %s", dir, strerror(errno));
    uint64_t *ids = NULL;
    uint32_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        int32_t s;
        long long mid;
        int used = 0;
        if (sscanf(e->d_name, "shuffle_%d_%lld_0.index%n", &s, &mid, &used) != 2 || e->d_name[used] || s != shuffle_id || mid < 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            uint64_t *g = mts_realloc(ids, cap * sizeof *ids);
            if (!g) { rc = MTS_E_NOMEM; break; }
            ids = g;
        }
        ids[n++] = (uint64_t)mid;
    }
    closedir(d);
    if (rc == 0 && n == 0) rc = errf(err, errlen, -ENOENT, "open %s: no map outputs of shuffle %d", dir, shuffle_id);
    char **paths = rc ? NULL : mts_calloc(n, sizeof *paths);
    if (rc == 0 && !paths) rc = MTS_E_NOMEM;
    if (rc == 0) {
        qsort(ids, n, sizeof *ids, cmp_u64);
        for (uint32_t i = 0; i < n && rc == 0; i++) {
            size_t len = strlen(dir) + 64;
            if (!(paths[i] = mts_malloc(len))) rc = MTS_E_NOMEM;
            else snprintf(paths[i], len, "%s/shuffle_%d_%llu_0.data", dir, shuffle_id, (unsigned long long)ids[i]);
        }
    }
    if (rc == 0) rc = mts_reader_open(opts, (const char *const *)paths, n, out, err, errlen);
    for (uint32_t i = 0; paths && i < n; i++) mts_free(paths[i]);
    mts_free(paths);
    mts_free(ids);
    return rc;
}

uint32_t mts_reader_num_maps(const mts_reader *r) { return r ? r->nmaps : 0; }
uint32_t mts_reader_num_partitions(const mts_reader *r) { return r ? r->nparts : 0; }

const char *mts_reader_map_path(const mts_reader *r, uint32_t map)
{
    return r && map < r->nmaps ? r->maps[map].path : NULL;
}

uint64_t mts_reader_segment_length(const mts_reader *r, uint32_t map, uint32_t start, uint32_t end)
{
    if (!r || map >= r->nmaps || start > end || end > r->nparts) return 0;
    return r->maps[map].off[end] - r->maps[map].off[start];
}

/* Drops the read in progress: stale workers see the new generation and stop. */
static void end_read_locked(mts_reader *r)
{
    r->gen++;
    r->active = 0;
    if (r->current) {
        piece_free_locked(r, r->current);
        r->current = NULL;
    }
    for (uint32_t j = 0; j < r->nmaps; j++) {
        slot *s = &r->slots[j];
        for (piece *p = s->head, *next; p; p = next) {
            next = p->next;
            piece_free_locked(r, p);
        }
        memset(s, 0, sizeof *s);
    }
    pthread_cond_broadcast(&r->budget_cv);
}

int mts_reader_start(mts_reader *r, uint32_t start, uint32_t end)
{
    if (!r) return MTS_E_ARG;
    if (start >= end || end > r->nparts) {
        snprintf(r->msg, sizeof r->msg, "start: partitions [%u, %u) are not a range within 0..%u", start, end, r->nparts);
        return MTS_E_RANGE;
    }
    pthread_mutex_lock(&r->mu);
    end_read_locked(r);
    r->start = start;
    r->end = end;
    r->next_job = 0;
    r->frontier = 0;
    r->err = 0;
    r->msg[0] = 0;
    r->active = 1;
    pthread_cond_broadcast(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int mts_reader_next(mts_reader *r, mts_read_piece *out)
{
    if (!r || !out) return MTS_E_ARG;
    pthread_mutex_lock(&r->mu);
    if (r->current) {
        piece_free_locked(r, r->current);
        r->current = NULL;
    }
    int rc = 0;
    uint64_t t0 = 0;
    while (r->active) {
        if (r->frontier == r->nmaps) {
            r->active = 0;
            break;
        }
        slot *s = &r->slots[r->frontier];
        if (s->head) {
            piece *p = s->head;
            s->head = p->next;
            if (!s->head) s->tail = NULL;
            r->current = p;
            *out = (mts_read_piece){r->frontier, p->data, p->len};
            r->st.bytes_decoded += p->len;
            rc = 1;
            break;
        }
        if (s->done) {
            if (s->err) {
                rc = r->err = s->err;
                snprintf(r->msg, sizeof r->msg, "%s", s->msg);
                end_read_locked(r);
                break;
            }
            map_out *m = &r->maps[r->frontier];
            r->st.bytes_stored += m->off[r->end] - m->off[r->start];
            r->frontier++;
            pthread_cond_broadcast(&r->budget_cv); /* a new frontier may go on */
            continue;
        }
        if (!t0) t0 = mts_now_ns();
        pthread_cond_wait(&r->piece_cv, &r->mu);
    }
    if (!r->active && rc == 0 && r->err) rc = r->err;
    if (t0) r->st.wait_ns += mts_now_ns() - t0;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

const char *mts_reader_error(const mts_reader *r) { return r ? r->msg : "NULL reader"; }

int mts_reader_get_stats(const mts_reader *r, mts_reader_stats *st)
{
    if (!r || !st) return MTS_E_ARG;
    mts_reader *mr = (mts_reader *)r;
    pthread_mutex_lock(&mr->mu);
    *st = r->st;
    st->peak_bytes_held = r->peak;
    pthread_mutex_unlock(&mr->mu);
    st->decode_ns = __atomic_load_n(&mr->st.decode_ns, __ATOMIC_RELAXED);
    return 0;
}

void mts_reader_free(mts_reader *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    end_read_locked(r);
    r->stop = 1;
    pthread_cond_broadcast(&r->work_cv);
    pthread_cond_broadcast(&r->budget_cv);
    pthread_mutex_unlock(&r->mu);
    for (unsigned t = 0; t < r->started; t++) pthread_join(r->threads[t], NULL);
    pthread_mutex_lock(&r->mu);
    end_read_locked(r); /* pieces published before the threads saw stop */
    pthread_mutex_unlock(&r->mu);
    for (uint32_t j = 0; j < r->nmaps; j++) close_map(&r->maps[j]);
    while (r->spare) {
        piece *next = r->spare->next;
        mts_free(r->spare);
        r->spare = next;
    }
    mts_free(r->maps);
    mts_free(r->slots);
    mts_free(r->threads);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->piece_cv);
    pthread_cond_destroy(&r->budget_cv);
    pthread_mutex_destroy(&r->mu);
    mts_free(r);
}

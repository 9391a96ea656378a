/* JNI binding of org.mtshuffle.NativeEngine, NativeShuffleWriter and
 * NativeBlockReader over the public API.
 *
 * The JVM serialises records into large direct buffers, each record an int
 * partition id and an int length (big-endian, as DataOutputStream writes
 * them) followed by its bytes, and hands a whole buffer over in one call:
 * there is no JNI call per record. Errors become java.io.IOException with
 * the writer's message; bad arguments become IllegalArgumentException.
 *
 * Nothing from Java is trusted: the handle knows its partition count, and
 * every buffer length, array length and offset is checked against it and
 * against the buffer's capacity before the library sees it. */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtshuffle.h"
#include "org_mtshuffle_NativeEngine.h" /* javac -h: the native methods' prototypes */
#include "org_mtshuffle_NativeShuffleWriter.h"
#include "org_mtshuffle_NativeBlockReader.h"

/* What a Java handle points at. */
typedef struct jni_writer {
    mts_writer *w;
    uint32_t nparts;
} jni_writer;

static void throw_named(JNIEnv *env, const char *cls, const char *msg)
{
    jclass c = (*env)->FindClass(env, cls);
    if (c) (*env)->ThrowNew(env, c, msg);
}

static void throw_rc(JNIEnv *env, mts_writer *w, int rc, const char *what)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "mtshuffle %s: %s (%s, code %d)", what, w ? mts_writer_error(w) : "", mts_strerror(rc), rc);
    throw_named(env, rc == MTS_E_ARG || rc == MTS_E_RANGE ? "java/lang/IllegalArgumentException" : "java/io/IOException", msg);
}

static const unsigned char *direct(JNIEnv *env, jobject buf, jlong *cap, const char *what);

/* ---- org.mtshuffle.NativeEngine ------------------------------------------ */

JNIEXPORT jlong JNICALL Java_org_mtshuffle_NativeEngine_create(JNIEnv *env, jclass cls, jint threads, jlong budget)
{
    (void)cls;
    if (threads < 1 || (uint32_t)threads > MTS_MAX_THREADS || budget < (jlong)MTS_MIN_BYTES_IN_FLIGHT) {
        char msg[200];
        snprintf(msg, sizeof msg, "mtshuffle engine: threads %d must be in 1..%u and maxBytesInFlight %lld at least %u",
                 (int)threads, MTS_MAX_THREADS, (long long)budget, MTS_MIN_BYTES_IN_FLIGHT);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return 0;
    }
    mts_engine *e = NULL;
    char err[512];
    int rc = mts_engine_create((uint32_t)threads, (uint64_t)budget, &e, err, sizeof err);
    if (rc < 0) {
        char msg[640];
        snprintf(msg, sizeof msg, "mtshuffle engine: %s (%s, code %d)", err, mts_strerror(rc), rc);
        throw_named(env, "java/io/IOException", msg);
        return 0;
    }
    return (jlong)(intptr_t)e;
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeEngine_stats(JNIEnv *env, jclass cls, jlong h)
{
    (void)cls;
    mts_engine_stats st;
    if (!h || mts_engine_get_stats((mts_engine *)(intptr_t)h, &st) < 0) return NULL;
    jlong v[12] = {st.threads, st.threads_busy, st.clients, (jlong)st.jobs, (jlong)st.busy_ns, (jlong)st.bytes_held,
                   (jlong)st.peak_bytes_held, (jlong)st.budget, (jlong)st.budget_wait_ns, (jlong)st.reclaims,
                   (jlong)st.bytes_cached, st.cpus};
    jlongArray out = (*env)->NewLongArray(env, 12);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, 12, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeEngine_free(JNIEnv *env, jclass cls, jlong h)
{
    (void)env;
    (void)cls;
    mts_engine_free((mts_engine *)(intptr_t)h); /* writers on it keep it running until they are freed */
}

/* ---- org.mtshuffle.NativeShuffleWriter ------------------------------------ */

JNIEXPORT jlong JNICALL Java_org_mtshuffle_NativeShuffleWriter_bufferAddress(JNIEnv *env, jclass cls, jobject buf)
{
    (void)cls;
    jlong cap;
    const unsigned char *b = direct(env, buf, &cap, "address");
    return b ? (jlong)(intptr_t)b : 0;
}

JNIEXPORT jlong JNICALL Java_org_mtshuffle_NativeShuffleWriter_create(JNIEnv *env, jclass cls, jlong engine,
    jstring data_path, jint partitions, jint codec, jint level, jint block_size, jint checksum, jint threads, jlong budget,
    jint writers_at_once, jint strategy, jboolean fsync)
{
    (void)cls;
    if (!data_path) {
        throw_named(env, "java/lang/NullPointerException", "dataPath");
        return 0;
    }
    if (partitions < 1 || threads < 1 || budget < 0 || block_size < 0 || writers_at_once < 0) {
        char msg[240];
        snprintf(msg, sizeof msg, "mtshuffle create: numPartitions %d, threads %d, maxBytesInFlight %lld, blockSize %d, "
                 "writersAtOnce %d: none may be negative, partitions and threads at least 1 (num_partitions)",
                 (int)partitions, (int)threads, (long long)budget, (int)block_size, (int)writers_at_once);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return 0;
    }
    const char *path = (*env)->GetStringUTFChars(env, data_path, NULL);
    if (!path) return 0;
    mts_writer_options o;
    mts_writer_options_init(&o);
    o.data_path = path;
    o.num_partitions = (uint32_t)partitions;
    o.codec = (mts_codec)codec;
    o.level = level;
    o.block_size = (uint32_t)block_size;
    o.checksum = (mts_checksum)checksum;
    o.engine = (mts_engine *)(intptr_t)engine; /* 0: a private engine of threads and budget */
    o.threads = (uint32_t)threads;
    o.max_bytes_in_flight = (uint64_t)budget;
    o.writers_at_once = (uint32_t)writers_at_once;
    o.strategy = (mts_strategy)strategy;
    o.fsync = fsync ? 1 : 0;
    mts_writer *w = NULL;
    char err[1024];
    int rc = mts_writer_create(&o, &w, err, sizeof err);
    (*env)->ReleaseStringUTFChars(env, data_path, path);
    if (rc < 0) {
        char msg[1200];
        snprintf(msg, sizeof msg, "mtshuffle create: %s", err);
        throw_named(env, rc == MTS_E_ARG ? "java/lang/IllegalArgumentException" : "java/io/IOException", msg);
        return 0;
    }
    jni_writer *jw = malloc(sizeof *jw);
    if (!jw) {
        mts_writer_free(w);
        throw_named(env, "java/lang/OutOfMemoryError", "mtshuffle create");
        return 0;
    }
    *jw = (jni_writer){w, (uint32_t)partitions};
    return (jlong)(intptr_t)jw;
}

static jni_writer *handle(JNIEnv *env, jlong h, const char *what)
{
    jni_writer *jw = (jni_writer *)(intptr_t)h;
    if (!jw) {
        char msg[120];
        snprintf(msg, sizeof msg, "%s: the writer is closed", what);
        throw_named(env, "java/lang/IllegalStateException", msg);
    }
    return jw;
}

/* The direct buffer's address and capacity, or an exception. */
static const unsigned char *direct(JNIEnv *env, jobject buf, jlong *cap, const char *what)
{
    const unsigned char *b = buf ? (*env)->GetDirectBufferAddress(env, buf) : NULL;
    *cap = buf ? (*env)->GetDirectBufferCapacity(env, buf) : -1;
    if (!b || *cap < 0) {
        char msg[120];
        snprintf(msg, sizeof msg, "%s: the buffer must be a direct ByteBuffer", what);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return NULL;
    }
    return b;
}


JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_writeTagged(JNIEnv *env, jclass cls, jlong h,
    jobject buf, jint length)
{
    (void)cls;
    jni_writer *jw = handle(env, h, "writeTagged");
    jlong cap;
    const unsigned char *b = jw ? direct(env, buf, &cap, "writeTagged") : NULL;
    if (!b) return;
    mts_writer *w = jw->w;
    if (length < 0 || length > cap) {
        char msg[160];
        snprintf(msg, sizeof msg, "writeTagged: length %d is not within the buffer's capacity %lld", (int)length,
                 (long long)cap);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return;
    }
    int rc = mts_writer_append_tagged(w, b, (size_t)length); /* checks every header */
    if (rc < 0) throw_rc(env, w, rc, "writeTagged");
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_addBatch(JNIEnv *env, jclass cls, jlong h, jobject buf,
    jlongArray offsets)
{
    (void)cls;
    jni_writer *jw = handle(env, h, "addBatch");
    jlong cap;
    const unsigned char *b = jw ? direct(env, buf, &cap, "addBatch") : NULL;
    if (!b) return;
    jsize n = offsets ? (*env)->GetArrayLength(env, offsets) : -1;
    if (n != (jsize)jw->nparts + 1) {
        char msg[160];
        snprintf(msg, sizeof msg, "addBatch: %d offsets, expected numPartitions+1 = %u", (int)n, jw->nparts + 1);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return;
    }
    jlong *offs = (*env)->GetLongArrayElements(env, offsets, NULL);
    if (!offs) return;
    /* Each offset within [0, capacity]: the library checks the order. */
    jsize bad = -1;
    for (jsize i = 0; i < n && bad < 0; i++)
        if (offs[i] < 0 || offs[i] > cap) bad = i;
    int rc = bad >= 0 ? MTS_E_ARG : mts_writer_add_batch(jw->w, b, (const uint64_t *)offs);
    jlong bad_value = bad >= 0 ? offs[bad] : 0;
    (*env)->ReleaseLongArrayElements(env, offsets, offs, JNI_ABORT);
    if (bad >= 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "addBatch: offsets[%d] = %lld is not within the buffer's capacity %lld", (int)bad,
                 (long long)bad_value, (long long)cap);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
    } else if (rc < 0) {
        throw_rc(env, jw->w, rc, "addBatch");
    }
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeShuffleWriter_finish(JNIEnv *env, jclass cls, jlong h,
    jlongArray checksums_out)
{
    (void)cls;
    jni_writer *jw = handle(env, h, "finish");
    if (!jw) return NULL;
    jsize n = (jsize)jw->nparts;
    if (checksums_out && (*env)->GetArrayLength(env, checksums_out) < n) {
        char msg[160];
        snprintf(msg, sizeof msg, "finish: the checksums array has %d entries, fewer than %d partitions",
                 (int)(*env)->GetArrayLength(env, checksums_out), (int)n);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return NULL;
    }
    uint64_t *lens = calloc((size_t)n + 1, 8), *sums = calloc((size_t)n + 1, 8);
    if (!lens || !sums) {
        free(lens);
        free(sums);
        throw_named(env, "java/lang/OutOfMemoryError", "finish");
        return NULL;
    }
    int rc = mts_writer_finish(jw->w, lens, sums);
    jlongArray out = NULL;
    if (rc < 0) {
        throw_rc(env, jw->w, rc, "finish");
    } else {
        out = (*env)->NewLongArray(env, n);
        if (out) (*env)->SetLongArrayRegion(env, out, 0, n, (const jlong *)lens);
        if (checksums_out) (*env)->SetLongArrayRegion(env, checksums_out, 0, n, (const jlong *)sums);
    }
    free(lens);
    free(sums);
    return out;
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeShuffleWriter_stats(JNIEnv *env, jclass cls, jlong h)
{
    (void)cls;
    jni_writer *jw = handle(env, h, "stats");
    mts_writer_stats st;
    if (!jw || mts_writer_get_stats(jw->w, &st) < 0) return NULL;
    jlong v[10] = {(jlong)st.bytes_in, (jlong)st.bytes_out, (jlong)st.records, (jlong)st.compress_ns, (jlong)st.write_ns,
                   (jlong)st.budget_wait_ns, (jlong)st.peak_bytes_held, (jlong)st.bytes_spilled, (jlong)st.runs,
                   (jlong)st.bytes_merged};
    jlongArray out = (*env)->NewLongArray(env, 10);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, 10, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_abort(JNIEnv *env, jclass cls, jlong h)
{
    (void)cls;
    jni_writer *jw = handle(env, h, "abort");
    if (jw) mts_writer_abort(jw->w);
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_free(JNIEnv *env, jclass cls, jlong h)
{
    (void)env;
    (void)cls;
    jni_writer *jw = (jni_writer *)(intptr_t)h;
    if (!jw) return;
    mts_writer_free(jw->w);
    free(jw);
}

/* ---- org.mtshuffle.NativeBlockReader ------------------------------------- */

static mts_reader *reader_handle(JNIEnv *env, jlong h, const char *what)
{
    mts_reader *r = (mts_reader *)(intptr_t)h;
    if (!r) {
        char msg[120];
        snprintf(msg, sizeof msg, "%s: the block reader is closed", what);
        throw_named(env, "java/lang/IllegalStateException", msg);
    }
    return r;
}

static void throw_reader(JNIEnv *env, mts_reader *r, int rc, const char *what)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "mtshuffle %s: %s (%s, code %d)", what, mts_reader_error(r), mts_strerror(rc), rc);
    throw_named(env, rc == MTS_E_ARG ? "java/lang/IllegalArgumentException" : "java/io/IOException", msg);
}

JNIEXPORT jlong JNICALL Java_org_mtshuffle_NativeBlockReader_open(JNIEnv *env, jclass cls, jlong engine, jint codec,
    jint piece_size)
{
    (void)cls;
    if (!engine || codec < MTS_CODEC_NONE || codec > MTS_CODEC_ZSTD || piece_size < 4096) {
        char msg[200];
        snprintf(msg, sizeof msg, "mtshuffle block reader: engine %s, codec %d (0..2), pieceSize %d (>= 4096)",
                 engine ? "set" : "missing", (int)codec, (int)piece_size);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return 0;
    }
    mts_reader_options o;
    mts_reader_options_init(&o);
    o.engine = (mts_engine *)(intptr_t)engine;
    o.codec = (mts_codec)codec;
    o.piece_size = (uint32_t)piece_size;
    o.verify_checksums = MTS_VERIFY_NEVER; /* a block carries no checksum file; codec checks still apply */
    mts_reader *r = NULL;
    char err[1024];
    int rc = mts_reader_open_blocks(&o, &r, err, sizeof err);
    if (rc < 0) {
        char msg[1200];
        snprintf(msg, sizeof msg, "mtshuffle block reader: %s", err);
        throw_named(env, rc == MTS_E_ARG ? "java/lang/IllegalArgumentException" : "java/io/IOException", msg);
        return 0;
    }
    return (jlong)(intptr_t)r;
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeBlockReader_add(JNIEnv *env, jclass cls, jlong h, jobject buf,
    jint length, jint tag)
{
    (void)cls;
    mts_reader *r = reader_handle(env, h, "add");
    jlong cap;
    const unsigned char *b = r ? direct(env, buf, &cap, "add") : NULL;
    if (!b) return;
    if (length < 0 || length > cap || tag < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "add: length %d is not within the buffer's capacity %lld, or tag %d < 0", (int)length,
                 (long long)cap, (int)tag);
        throw_named(env, "java/lang/IllegalArgumentException", msg);
        return;
    }
    int rc = mts_reader_add_block(r, b, (size_t)length, (uint32_t)tag);
    if (rc < 0) throw_reader(env, r, rc, "add");
}

JNIEXPORT jobject JNICALL Java_org_mtshuffle_NativeBlockReader_next(JNIEnv *env, jclass cls, jlong h, jintArray tag)
{
    (void)cls;
    mts_reader *r = reader_handle(env, h, "next");
    if (!r) return NULL;
    if (!tag || (*env)->GetArrayLength(env, tag) < 1) {
        throw_named(env, "java/lang/IllegalArgumentException", "next: tag must be an int[1]");
        return NULL;
    }
    mts_read_piece pc;
    int rc = mts_reader_next(r, &pc);
    if (rc < 0) {
        throw_reader(env, r, rc, "read block");
        return NULL;
    }
    if (rc == 0) return NULL;
    jint t = (jint)pc.range;
    (*env)->SetIntArrayRegion(env, tag, 0, 1, &t);
    return (*env)->NewDirectByteBuffer(env, (void *)(uintptr_t)pc.data, (jlong)pc.len);
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeBlockReader_stats(JNIEnv *env, jclass cls, jlong h)
{
    (void)cls;
    mts_reader *r = reader_handle(env, h, "stats");
    mts_reader_stats st;
    if (!r || mts_reader_get_stats(r, &st) < 0) return NULL;
    jlong v[6] = {(jlong)st.bytes_stored, (jlong)st.bytes_decoded, (jlong)st.decode_ns, (jlong)st.wait_ns,
                  (jlong)st.peak_bytes_held, (jlong)st.pieces_here};
    jlongArray out = (*env)->NewLongArray(env, 6);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, 6, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeBlockReader_free(JNIEnv *env, jclass cls, jlong h)
{
    (void)env;
    (void)cls;
    mts_reader_free((mts_reader *)(intptr_t)h);
}

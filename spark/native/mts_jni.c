/* JNI binding of org.mtshuffle.NativeShuffleWriter over the public API.
 *
 * The JVM serialises records into large direct buffers, each record an int
 * partition id and an int length (big-endian, as DataOutputStream writes
 * them) followed by its bytes, and hands a whole buffer over in one call:
 * there is no JNI call per record. Errors become java.io.IOException with
 * the writer's message; bad arguments become IllegalArgumentException. */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtshuffle.h"

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

JNIEXPORT jlong JNICALL Java_org_mtshuffle_NativeShuffleWriter_create(JNIEnv *env, jclass cls, jstring data_path,
    jint partitions, jint codec, jint level, jint block_size, jint checksum, jint threads, jlong budget,
    jint strategy, jboolean fsync)
{
    (void)cls;
    if (!data_path) {
        throw_named(env, "java/lang/NullPointerException", "dataPath");
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
    o.threads = (uint32_t)threads;
    o.max_bytes_in_flight = (uint64_t)budget;
    o.strategy = (mts_strategy)strategy;
    o.fsync = fsync ? 1 : 0;
    mts_writer *w = NULL;
    char err[1024];
    int rc = mts_writer_create(&o, &w, err, sizeof err);
    (*env)->ReleaseStringUTFChars(env, data_path, path);
    if (rc < 0) {
        char msg[1200];
        snprintf(msg, sizeof msg, "mtshuffle create: %s (%s)", err, mts_strerror(rc));
        throw_named(env, rc == MTS_E_ARG ? "java/lang/IllegalArgumentException" : "java/io/IOException", msg);
        return 0;
    }
    return (jlong)(intptr_t)w;
}

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_writeTagged(JNIEnv *env, jclass cls, jlong h,
    jobject buf, jint length)
{
    (void)cls;
    mts_writer *w = (mts_writer *)(intptr_t)h;
    const unsigned char *b = buf ? (*env)->GetDirectBufferAddress(env, buf) : NULL;
    jlong cap = buf ? (*env)->GetDirectBufferCapacity(env, buf) : -1;
    if (!w || !b || length < 0 || length > cap) {
        throw_named(env, "java/lang/IllegalArgumentException", "writeTagged: a direct buffer and 0 <= length <= capacity");
        return;
    }
    size_t o = 0, n = (size_t)length;
    while (o < n) {
        if (n - o < 8) {
            throw_named(env, "java/lang/IllegalArgumentException", "writeTagged: a record header is cut off");
            return;
        }
        uint32_t p = be32(b + o), len = be32(b + o + 4);
        if (len > n - o - 8) {
            char msg[160];
            snprintf(msg, sizeof msg, "writeTagged: record at %zu claims %u bytes, %zu left", o, len, n - o - 8);
            throw_named(env, "java/lang/IllegalArgumentException", msg);
            return;
        }
        int rc = mts_writer_append(w, p, b + o + 8, len);
        if (rc < 0) {
            throw_rc(env, w, rc, "append");
            return;
        }
        o += 8 + (size_t)len;
    }
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_addBatch(JNIEnv *env, jclass cls, jlong h, jobject buf,
    jlongArray offsets)
{
    (void)cls;
    mts_writer *w = (mts_writer *)(intptr_t)h;
    const unsigned char *b = buf ? (*env)->GetDirectBufferAddress(env, buf) : NULL;
    jlong cap = buf ? (*env)->GetDirectBufferCapacity(env, buf) : -1;
    jsize n = offsets ? (*env)->GetArrayLength(env, offsets) : 0;
    if (!w || !b || n < 2) {
        throw_named(env, "java/lang/IllegalArgumentException", "addBatch: a direct buffer and numPartitions+1 offsets");
        return;
    }
    jlong *offs = (*env)->GetLongArrayElements(env, offsets, NULL);
    if (!offs) return;
    int bad = offs[n - 1] > cap;
    int rc = bad ? MTS_E_ARG : mts_writer_add_batch(w, b, (const uint64_t *)offs);
    (*env)->ReleaseLongArrayElements(env, offsets, offs, JNI_ABORT);
    if (bad) throw_named(env, "java/lang/IllegalArgumentException", "addBatch: offsets go past the buffer");
    else if (rc < 0) throw_rc(env, w, rc, "addBatch");
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeShuffleWriter_finish(JNIEnv *env, jclass cls, jlong h,
    jint partitions, jlongArray checksums_out)
{
    (void)cls;
    mts_writer *w = (mts_writer *)(intptr_t)h;
    uint64_t *lens = calloc((size_t)partitions + 1, 8), *sums = calloc((size_t)partitions + 1, 8);
    if (!w || !lens || !sums) {
        free(lens);
        free(sums);
        throw_named(env, "java/lang/OutOfMemoryError", "finish");
        return NULL;
    }
    int rc = mts_writer_finish(w, lens, sums);
    jlongArray out = NULL;
    if (rc < 0) {
        throw_rc(env, w, rc, "finish");
    } else {
        out = (*env)->NewLongArray(env, partitions);
        if (out) (*env)->SetLongArrayRegion(env, out, 0, partitions, (const jlong *)lens);
        if (checksums_out && (*env)->GetArrayLength(env, checksums_out) >= partitions)
            (*env)->SetLongArrayRegion(env, checksums_out, 0, partitions, (const jlong *)sums);
    }
    free(lens);
    free(sums);
    return out;
}

JNIEXPORT jlongArray JNICALL Java_org_mtshuffle_NativeShuffleWriter_stats(JNIEnv *env, jclass cls, jlong h)
{
    (void)cls;
    mts_writer_stats st;
    if (mts_writer_get_stats((mts_writer *)(intptr_t)h, &st) < 0) return NULL;
    jlong v[9] = {(jlong)st.bytes_in, (jlong)st.bytes_out, (jlong)st.records, (jlong)st.compress_ns, (jlong)st.write_ns,
                  (jlong)st.budget_wait_ns, (jlong)st.peak_bytes_held, (jlong)st.bytes_spilled, (jlong)st.runs};
    jlongArray out = (*env)->NewLongArray(env, 9);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, 9, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_abort(JNIEnv *env, jclass cls, jlong h)
{
    (void)env;
    (void)cls;
    mts_writer_abort((mts_writer *)(intptr_t)h);
}

JNIEXPORT void JNICALL Java_org_mtshuffle_NativeShuffleWriter_free(JNIEnv *env, jclass cls, jlong h)
{
    (void)env;
    (void)cls;
    mts_writer_free((mts_writer *)(intptr_t)h);
}

package org.mtshuffle;

import java.io.IOException;

/**
 * A libmtshuffle engine: the worker threads and the hard budget of bytes in
 * flight that every writer created on it shares. Meant to be one per process
 * (a Spark executor's); writers keep it alive until they are closed, so
 * close() may be called while they still run. Thread-safe.
 */
public final class NativeEngine implements AutoCloseable {
    static {
        NativeLibrary.load();
    }

    private long handle;

    /** threads: 1..256 workers; maxBytesInFlight: >= 64 KiB, the cap on bytes every writer on it holds. */
    public NativeEngine(int threads, long maxBytesInFlight) throws IOException {
        handle = create(threads, maxBytesInFlight);
    }

    /** threads, threads busy, clients, jobs, busy ns, bytes held, peak bytes held, budget, budget wait ns,
     *  reclaims, bytes cached. */
    public synchronized long[] stats() {
        if (handle == 0) throw new IllegalStateException("NativeEngine is closed");
        return stats(handle);
    }

    synchronized long handle() {
        if (handle == 0) throw new IllegalStateException("NativeEngine is closed");
        return handle;
    }

    @Override
    public synchronized void close() {
        if (handle != 0) {
            free(handle);
            handle = 0;
        }
    }

    private static native long create(int threads, long maxBytesInFlight) throws IOException;
    private static native long[] stats(long h);
    private static native void free(long h);
}

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
    private final int writersAtOnce;

    /** threads: 1..256 workers; maxBytesInFlight: >= 64 KiB, the cap on bytes every writer on it holds;
     *  writers sized to the writers and readers on it as they go. */
    public NativeEngine(int threads, long maxBytesInFlight) throws IOException {
        this(threads, maxBytesInFlight, 0);
    }

    /** As above, writers sized so that writersAtOnce of them (a Spark executor's task slots; 0: those
     *  on the engine as they go) can each hold their unsorted records at once. */
    public NativeEngine(int threads, long maxBytesInFlight, int writersAtOnce) throws IOException {
        if (writersAtOnce < 0) throw new IllegalArgumentException("writersAtOnce " + writersAtOnce + " is negative");
        this.writersAtOnce = writersAtOnce;
        handle = create(threads, maxBytesInFlight);
    }

    /** What writers created on this engine are sized for (0: the writers and readers on it as they go). */
    public int writersAtOnce() {
        return writersAtOnce;
    }

    /** threads, threads busy, clients, jobs, busy ns, bytes held, peak bytes held, budget, budget wait ns,
     *  reclaims, bytes cached, and how many compression jobs run at once at most (the threads, or the
     *  CPUs this process may use where fewer: its affinity mask, its cgroup's CPU quota). */
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

package org.mtshuffle;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * One map task's shuffle output, written by libmtshuffle. The caller chooses
 * the data file (Spark: a temp name next to the final data file) and commits
 * the returned lengths and checksums itself (Spark: through
 * IndexShuffleBlockResolver.writeMetadataFileAndCommit).
 *
 * Records go in as whole direct buffers: each record an int partition id and
 * an int length, big-endian, then its bytes. Not thread-safe: one thread at a
 * time, like a Spark task.
 */
public final class NativeShuffleWriter implements AutoCloseable {
    public static final int CODEC_NONE = 0, CODEC_LZ4 = 1, CODEC_ZSTD = 2;
    public static final int CHECKSUM_NONE = 0, CHECKSUM_ADLER32 = 1, CHECKSUM_CRC32 = 2, CHECKSUM_CRC32C = 3;
    public static final int STRATEGY_STREAMING = 0, STRATEGY_BASELINE = 1;
    /** Size of the header before each record's bytes in writeTagged. */
    public static final int RECORD_HEADER = 8;

    static {
        NativeLibrary.load();
    }

    private long handle;

    /** A writer on its own private engine of threads workers and maxBytesInFlight bytes. */
    public NativeShuffleWriter(String dataPath, int numPartitions, int codec, int level, int blockSize,
                               int checksum, int threads, long maxBytesInFlight, int strategy, boolean fsync)
            throws IOException {
        this.handle = create(0, dataPath, numPartitions, codec, level, blockSize, checksum, threads,
                maxBytesInFlight, 0, strategy, fsync);
    }

    /** A writer on a shared engine: its threads and budget serve every writer on it; sized for the
     *  engine's writersAtOnce(). */
    public NativeShuffleWriter(NativeEngine engine, String dataPath, int numPartitions, int codec, int level,
                               int blockSize, int checksum, int strategy, boolean fsync) throws IOException {
        this.handle = create(engine.handle(), dataPath, numPartitions, codec, level, blockSize, checksum, 1, 0,
                engine.writersAtOnce(), strategy, fsync);
    }

    /** The native address of a direct buffer's first byte (for copies into it with Spark's Platform). */
    public static long address(ByteBuffer direct) {
        return bufferAddress(direct);
    }

    /** Writes the tagged records in buf[0, length); buf must be direct. */
    public void writeTagged(ByteBuffer buf, int length) throws IOException {
        writeTagged(live(), buf, length);
    }

    /** One batch grouped by partition: partition p is buf[offsets[p], offsets[p+1]). */
    public void addBatch(ByteBuffer buf, long[] offsets) throws IOException {
        addBatch(live(), buf, offsets);
    }

    /** Completes the data file; returns its partition lengths, fills checksums (may be null). */
    public long[] finish(long[] checksums) throws IOException {
        return finish(live(), checksums);
    }

    /** bytes in, bytes out, records, compress ns, write ns, budget wait ns, peak bytes held, bytes spilled, runs,
     *  bytes merged (mts_writer_stats). */
    public long[] stats() {
        return stats(live());
    }

    /** Stops and removes the data file; close() still needs calling. */
    public void abort() {
        if (handle != 0) abort(handle);
    }

    @Override
    public void close() {
        if (handle != 0) {
            free(handle);
            handle = 0;
        }
    }

    private long live() {
        if (handle == 0) throw new IllegalStateException("NativeShuffleWriter is closed");
        return handle;
    }

    private static native long create(long engine, String dataPath, int numPartitions, int codec, int level, int blockSize,
                                      int checksum, int threads, long maxBytesInFlight, int writersAtOnce,
                                      int strategy, boolean fsync)
            throws IOException;
    private static native void writeTagged(long h, ByteBuffer buf, int length) throws IOException;
    private static native void addBatch(long h, ByteBuffer buf, long[] offsets) throws IOException;
    private static native long[] finish(long h, long[] checksums) throws IOException;
    private static native long[] stats(long h);
    private static native void abort(long h);
    private static native void free(long h);
    private static native long bufferAddress(ByteBuffer buf);
}

package org.apache.spark.shuffle.mtshuffle;

import java.io.File;
import java.io.OutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.api.ShufflePartitionWriter;
import org.apache.spark.shuffle.api.SingleSpillShuffleMapOutputWriter;
import org.apache.spark.shuffle.api.WritableByteChannelWrapper;
import org.apache.spark.util.Utils;
import org.mtshuffle.NativeShuffleWriter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One map task. Records are serialised into a direct buffer, each tagged with
 * its partition, and whole buffers go to the native writer (one JNI call per
 * buffer) on the executor's engine, which compresses, orders and writes the
 * data file under a temp name. Spark SQL's rows (UnsafeRowSerializer) are
 * copied straight from the row's memory into the buffer; other serializers go
 * through their serialization stream. The file is committed through Spark's
 * shuffle I/O plugin. Every error names the shuffle and map.
 */
final class MtsShuffleWriter<K, V> extends ShuffleWriter<K, V> {
    private static final Logger LOG = LoggerFactory.getLogger(MtsShuffleWriter.class);
    private static final long LOG_WRITE_BYTES = 64L << 20; /* a map task writing this much logs its stats at info */

    private final MtsShuffleManager manager;
    private final MtsConf c;
    private final IndexShuffleBlockResolver resolver;
    private final int shuffleId;
    private final long mapId;
    private final ShuffleDependency<K, V, ?> dep;
    private final ShuffleWriteMetricsReporter metrics;
    private long[] lengths;
    private MapStatus status;
    private File tmp;
    private NativeShuffleWriter nw;

    MtsShuffleWriter(MtsShuffleManager manager, MtsConf c, IndexShuffleBlockResolver resolver, int shuffleId,
                     long mapId, ShuffleDependency<K, V, ?> dep, ShuffleWriteMetricsReporter metrics) {
        this.manager = manager;
        this.c = c;
        this.resolver = resolver;
        this.shuffleId = shuffleId;
        this.mapId = mapId;
        this.dep = dep;
        this.metrics = metrics;
    }

    /* One direct buffer per task thread, reused by its later tasks: allocating
     * (and zeroing) 8 MiB per map task costs more than a small task's write. */
    private static final ThreadLocal<ByteBuffer> BUFFERS = new ThreadLocal<>();

    private static ByteBuffer taskBuffer(int size) {
        ByteBuffer b = BUFFERS.get();
        if (b == null || b.capacity() != size) {
            b = ByteBuffer.allocateDirect(size);
            BUFFERS.set(b);
        }
        b.clear();
        return b;
    }

    private IOException failure(String what, Exception e) {
        return new IOException("mtshuffle: shuffle " + shuffleId + " map " + mapId + ": " + what + ": "
                + e.getMessage(), e);
    }

    @Override
    public void write(Iterator<Product2<K, V>> records) throws IOException {
        /* Write time as Spark counts it: time spent handing bytes to the
         * writer and committing, not producing the records upstream. */
        long writeNs = 0, t0 = System.nanoTime();
        Partitioner partitioner = dep.partitioner();
        int n = partitioner.numPartitions();
        tmp = Utils.tempFileWith(resolver.getDataFile(shuffleId, mapId));
        try {
            nw = new NativeShuffleWriter(manager.engine(), tmp.getAbsolutePath(), n, c.codec, c.zstdLevel,
                    c.lz4BlockSize, c.checksum, c.strategy, c.sync);
        } catch (IOException | IllegalArgumentException e) {
            throw failure("creating the writer", e);
        }
        writeNs += System.nanoTime() - t0;
        long[] handed = new long[1];
        NativeShuffleWriter w = nw;
        Object[] rowChecksums = SparkCompat.rowChecksums(dep);
        TaggedRecords tagged = new TaggedRecords(taskBuffer(c.bufferSize), (buf, len) -> {
            long t1 = System.nanoTime();
            w.writeTagged(buf, len);
            handed[0] += System.nanoTime() - t1;
        }, rowChecksums);
        try {
            if (dep.serializer().getClass().getName().equals(TaggedRecords.UNSAFE_ROW_SERIALIZER))
                tagged.writeRows(records, partitioner);
            else
                tagged.writeSerialized(records, partitioner, dep.serializer().newInstance());
        } catch (IOException | IllegalArgumentException e) {
            throw failure("writing records", e);
        }
        writeNs += handed[0];
        long count = tagged.records;
        long t2 = System.nanoTime();
        long[] sums = new long[n];
        try {
            tagged.flush();
            lengths = nw.finish(sums);
        } catch (IOException | IllegalArgumentException e) {
            throw failure("finishing the data file", e);
        }
        logStats(nw.stats(), handed[0], System.nanoTime() - t2);
        nw.close();
        nw = null;
        commit(n, c.checksum == NativeShuffleWriter.CHECKSUM_NONE ? new long[0] : sums);
        long bytes = 0;
        for (long l : lengths) bytes += l;
        metrics.incBytesWritten(bytes);
        metrics.incRecordsWritten(count);
        metrics.incWriteTime(writeNs + System.nanoTime() - t2);
        status = SparkCompat.mapStatus(SparkEnv.get().blockManager().shuffleServerId(), lengths, mapId, rowChecksums);
    }

    /** Where a map task's write went: at info for a large task, else at debug. st: NativeShuffleWriter.stats(). */
    private void logStats(long[] st, long handedNs, long finishNs) {
        if (st == null || st.length < 10 || (st[0] < LOG_WRITE_BYTES && !LOG.isDebugEnabled())) return;
        String line = "mtshuffle: shuffle {} map {} wrote {} records, {} bytes in, {} bytes out; handing buffers over "
                + "took this task {} ms and the commit {} ms ({} ms of them waiting for budget); compression {} ms on the "
                + "engine's threads, writes {} ms; {} bytes spilled, {} bytes merged, peak {} bytes held, {} runs";
        Object[] args = {shuffleId, mapId, st[2], st[0], st[1], handedNs / 1_000_000, finishNs / 1_000_000,
                st[5] / 1_000_000, st[3] / 1_000_000, st[4] / 1_000_000, st[7], st[9], st[6], st[8]};
        if (st[0] >= LOG_WRITE_BYTES) LOG.info(line, args);
        else LOG.debug(line, args);
    }

    /** Commits tmp through Spark's shuffle I/O plugin; lengths end up as committed (an earlier
     *  attempt's, where Spark keeps that one). */
    private void commit(int n, long[] sums) throws IOException {
        ShuffleExecutorComponents sc = manager.components();
        Optional<SingleSpillShuffleMapOutputWriter> single = sc.createSingleFileMapOutputWriter(shuffleId, mapId);
        if (single.isPresent()) {
            try {
                single.get().transferMapSpillFile(tmp, lengths, sums);
            } catch (IOException e) {
                throw failure("committing the data file", e);
            }
            return;
        }
        /* The plugin takes partitions one by one: copy each range of the data file into its writer. */
        ShuffleMapOutputWriter mw = sc.createMapOutputWriter(shuffleId, mapId, n);
        try (FileChannel in = FileChannel.open(tmp.toPath(), StandardOpenOption.READ)) {
            long off = 0;
            for (int p = 0; p < n; p++) {
                ShufflePartitionWriter pw = mw.getPartitionWriter(p);
                Optional<WritableByteChannelWrapper> ch = pw.openChannelWrapper();
                if (ch.isPresent()) {
                    try (WritableByteChannelWrapper w = ch.get()) {
                        transfer(in, off, lengths[p], w.channel());
                    }
                } else {
                    try (OutputStream os = pw.openStream()) {
                        ByteBuffer b = ByteBuffer.allocate((int) Math.min(lengths[p], 1 << 16));
                        for (long done = 0; done < lengths[p];) {
                            b.clear().limit((int) Math.min(b.capacity(), lengths[p] - done));
                            int got = in.read(b, off + done);
                            if (got < 0) throw new IOException("the data file ends before partition " + p + " does");
                            os.write(b.array(), 0, got);
                            done += got;
                        }
                    }
                }
                off += lengths[p];
            }
            lengths = mw.commitAllPartitions(sums).getPartitionLengths();
        } catch (IOException | RuntimeException e) {
            try {
                mw.abort(e);
            } catch (IOException | RuntimeException e2) {
                e.addSuppressed(e2);
            }
            throw failure("committing through " + sc.getClass().getName(), e);
        } finally {
            tmp.delete();
        }
    }

    private static void transfer(FileChannel in, long off, long len, WritableByteChannel out) throws IOException {
        for (long done = 0; done < len;) {
            long got = in.transferTo(off + done, len - done, out);
            if (got <= 0) throw new IOException("the data file ends at " + (off + done) + ", before " + (off + len));
            done += got;
        }
    }

    @Override
    public Option<MapStatus> stop(boolean success) {
        if (nw != null) {
            nw.abort();
            nw.close();
            nw = null;
        }
        if (success && status != null) return Option.apply(status);
        if (tmp != null && tmp.exists()) tmp.delete();
        return Option.empty();
    }

    @Override
    public long[] getPartitionLengths() {
        return lengths;
    }
}

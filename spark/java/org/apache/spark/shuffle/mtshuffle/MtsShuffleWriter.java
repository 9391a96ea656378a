package org.apache.spark.shuffle.mtshuffle;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Locale;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.util.Utils;
import org.mtshuffle.NativeShuffleWriter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Serialises records with the dependency's serializer into a direct buffer,
 * each tagged with its partition, and hands full buffers to the native writer
 * (one JNI call per buffer). The native writer compresses, orders and writes
 * the data file to Spark's temp name for it; the commit goes through
 * IndexShuffleBlockResolver.writeMetadataFileAndCommit.
 */
final class MtsShuffleWriter<K, V> extends ShuffleWriter<K, V> {
    /* What Spark's own writers pass: records are written as Any. */
    @SuppressWarnings("unchecked")
    private static final ClassTag<Object> ANY = (ClassTag<Object>) (ClassTag<?>) ClassTag$.MODULE$.Any();
    private final SparkConf conf;
    private final IndexShuffleBlockResolver resolver;
    private final int shuffleId;
    private final long mapId;
    private final ShuffleDependency<K, V, ?> dep;
    private final ShuffleWriteMetricsReporter metrics;
    private long[] lengths;
    private MapStatus status;
    private File tmp;
    private NativeShuffleWriter nw;

    MtsShuffleWriter(SparkConf conf, IndexShuffleBlockResolver resolver, int shuffleId, long mapId,
                     ShuffleDependency<K, V, ?> dep, TaskContext context, ShuffleWriteMetricsReporter metrics) {
        this.conf = conf;
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

    /** A growable byte array the serialization stream writes into. */
    private static final class RecordSink extends OutputStream {
        byte[] buf = new byte[4096];
        int len;

        @Override
        public void write(int b) {
            if (len == buf.length) buf = Arrays.copyOf(buf, buf.length * 2);
            buf[len++] = (byte) b;
        }

        @Override
        public void write(byte[] b, int off, int n) {
            if (len + n > buf.length) buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + n));
            System.arraycopy(b, off, buf, len, n);
            len += n;
        }
    }

    private int codec() {
        if (!conf.getBoolean("spark.shuffle.compress", true)) return NativeShuffleWriter.CODEC_NONE;
        String c = conf.get("spark.io.compression.codec", "lz4").toLowerCase(Locale.ROOT);
        return c.contains("zstd") ? NativeShuffleWriter.CODEC_ZSTD : NativeShuffleWriter.CODEC_LZ4;
    }

    private int checksum() {
        if (!conf.getBoolean("spark.shuffle.checksum.enabled", true)) return NativeShuffleWriter.CHECKSUM_NONE;
        switch (conf.get("spark.shuffle.checksum.algorithm", "ADLER32").toUpperCase(Locale.ROOT)) {
            case "CRC32": return NativeShuffleWriter.CHECKSUM_CRC32;
            case "CRC32C": return NativeShuffleWriter.CHECKSUM_CRC32C;
            default: return NativeShuffleWriter.CHECKSUM_ADLER32;
        }
    }

    @Override
    public void write(Iterator<Product2<K, V>> records) throws IOException {
        /* Write time as Spark counts it: time spent handing bytes to the
         * writer and committing, not producing the records upstream. */
        long writeNs = 0, t0 = System.nanoTime();
        Partitioner partitioner = dep.partitioner();
        int n = partitioner.numPartitions();
        File dataFile = resolver.getDataFile(shuffleId, mapId);
        tmp = Utils.tempFileWith(dataFile);
        int sum = checksum();
        nw = new NativeShuffleWriter(tmp.getAbsolutePath(), n, codec(),
                conf.getInt("spark.io.compression.zstd.level", 1),
                (int) conf.getSizeAsBytes("spark.io.compression.lz4.blockSize", "32k"), sum,
                conf.getInt("spark.mtshuffle.threads", 2),
                conf.getSizeAsBytes("spark.mtshuffle.maxBytesInFlight", "64m"),
                "baseline".equals(conf.get("spark.mtshuffle.strategy", "streaming"))
                        ? NativeShuffleWriter.STRATEGY_BASELINE : NativeShuffleWriter.STRATEGY_STREAMING,
                false);
        writeNs += System.nanoTime() - t0;
        ByteBuffer buf = taskBuffer((int) conf.getSizeAsBytes("spark.mtshuffle.bufferSize", "8m"));
        RecordSink sink = new RecordSink();
        SerializationStream ss = dep.serializer().newInstance().serializeStream(sink);
        long count = 0;
        while (records.hasNext()) {
            Product2<K, V> r = records.next();
            int p = partitioner.getPartition(r._1());
            sink.len = 0;
            ss.writeKey(r._1(), ANY);
            ss.writeValue(r._2(), ANY);
            ss.flush();
            int need = NativeShuffleWriter.RECORD_HEADER + sink.len;
            if (need > buf.remaining()) {
                long t1 = System.nanoTime();
                nw.writeTagged(buf, buf.position());
                writeNs += System.nanoTime() - t1;
                buf.clear();
                if (need > buf.capacity()) buf = ByteBuffer.allocateDirect(need); /* one huge record */
            }
            buf.putInt(p).putInt(sink.len).put(sink.buf, 0, sink.len);
            count++;
        }
        ss.close();
        long t2 = System.nanoTime();
        if (buf.position() > 0) nw.writeTagged(buf, buf.position());
        long[] sums = new long[n];
        lengths = nw.finish(sums);
        nw.close();
        nw = null;
        resolver.writeMetadataFileAndCommit(shuffleId, mapId, lengths,
                sum == NativeShuffleWriter.CHECKSUM_NONE ? new long[0] : sums, tmp);
        long bytes = 0;
        for (long l : lengths) bytes += l;
        metrics.incBytesWritten(bytes);
        metrics.incRecordsWritten(count);
        metrics.incWriteTime(writeNs + System.nanoTime() - t2);
        status = MapStatus$.MODULE$.apply(SparkEnv.get().blockManager().shuffleServerId(), lengths, mapId);
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

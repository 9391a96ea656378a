package org.apache.spark.shuffle.mtshuffle;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.spark.Partitioner;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;
import org.mtshuffle.NativeShuffleWriter;
import scala.Product2;
import scala.collection.Iterator;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * A map task's records as the native writer takes them: in a direct buffer,
 * each a big-endian int partition id, a big-endian int length and the record
 * as the dependency's serializer writes it; a full buffer goes to a Sink.
 * Two paths fill it: Spark SQL's rows (UnsafeRowSerializer: the row's length
 * as a big-endian int, then its bytes) are copied once, from the row's memory
 * into the buffer; any other serializer writes each record through its
 * serialization stream into a byte array that is then copied in. Both give
 * the same bytes for the same rows.
 */
final class TaggedRecords {
    /* What Spark's own writers pass: records are written as Any. */
    @SuppressWarnings("unchecked")
    private static final ClassTag<Object> ANY = (ClassTag<Object>) (ClassTag<?>) ClassTag$.MODULE$.Any();
    static final String UNSAFE_ROW_SERIALIZER = "org.apache.spark.sql.execution.UnsafeRowSerializer";

    /** Takes buf[0, length) of tagged records. */
    interface Sink {
        void take(ByteBuffer buf, int length) throws IOException;
    }

    private ByteBuffer buf;
    private long addr;
    private final Sink sink;
    /* The dependency's row-based checksums, one per partition (Spark 4.1 and later, where asked
     * for), or null: each record goes into its partition's as Spark's writers give it. */
    private final Object[] rowChecksums;
    long records;

    TaggedRecords(ByteBuffer direct, Sink sink, Object[] rowChecksums) {
        this.buf = direct;
        this.addr = NativeShuffleWriter.address(direct);
        this.sink = sink;
        this.rowChecksums = rowChecksums;
    }

    /** Room for need more bytes: hands the full buffer over first; a record larger than the
     *  buffer gets a buffer of its own, used from then on. */
    private void room(int need) throws IOException {
        if (need <= buf.remaining()) return;
        if (buf.position() > 0) sink.take(buf, buf.position());
        buf.clear();
        if (need > buf.capacity()) {
            buf = ByteBuffer.allocateDirect(need);
            addr = NativeShuffleWriter.address(buf);
        }
    }

    /** Spark SQL's exchange: each record (partition id key, UnsafeRow value). */
    <K, V> void writeRows(Iterator<Product2<K, V>> it, Partitioner partitioner) throws IOException {
        while (it.hasNext()) {
            Product2<K, V> r = it.next();
            UnsafeRow row = (UnsafeRow) r._2();
            int size = row.getSizeInBytes(), p = partitioner.getPartition(r._1());
            if (rowChecksums != null) SparkCompat.updateRowChecksum(rowChecksums[p], r._1(), row);
            room(NativeShuffleWriter.RECORD_HEADER + 4 + size);
            int pos = buf.position();
            buf.putInt(p).putInt(4 + size).putInt(size);
            Platform.copyMemory(row.getBaseObject(), row.getBaseOffset(), null, addr + pos + 12, size);
            buf.position(pos + 12 + size);
            records++;
        }
    }

    /** Any serializer that supports relocation: key and value through its stream. */
    <K, V> void writeSerialized(Iterator<Product2<K, V>> it, Partitioner partitioner, SerializerInstance ser)
            throws IOException {
        ArraySink bytes = new ArraySink();
        SerializationStream ss = ser.serializeStream(bytes);
        while (it.hasNext()) {
            Product2<K, V> r = it.next();
            int p = partitioner.getPartition(r._1());
            if (rowChecksums != null) SparkCompat.updateRowChecksum(rowChecksums[p], r._1(), r._2());
            bytes.len = 0;
            ss.writeKey(r._1(), ANY);
            ss.writeValue(r._2(), ANY);
            ss.flush();
            room(NativeShuffleWriter.RECORD_HEADER + bytes.len);
            buf.putInt(p).putInt(bytes.len).put(bytes.buf, 0, bytes.len);
            records++;
        }
        ss.close();
    }

    /** Hands over what the buffer still holds. */
    void flush() throws IOException {
        if (buf.position() > 0) sink.take(buf, buf.position());
        buf.clear();
    }

    /** A growable byte array the serialization stream writes into. */
    private static final class ArraySink extends OutputStream {
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
}

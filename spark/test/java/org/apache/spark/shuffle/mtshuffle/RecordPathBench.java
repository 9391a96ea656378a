package org.apache.spark.shuffle.mtshuffle;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.spark.Partitioner;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.execution.UnsafeRowSerializer;
import org.apache.spark.serializer.SerializerInstance;
import scala.Product2;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The JVM side of a map task, without the native writer: rows of the seed's
 * shape (7 int columns, some null) put into the direct buffer by the plugin's
 * two paths (TaggedRecords): the UnsafeRow copy and the serialization stream
 * of Spark's UnsafeRowSerializer. First checks that both give the same bytes,
 * then times each, interleaved. Prints one JSON line.
 *
 *   RecordPathBench ROWS REPS
 */
public final class RecordPathBench {
    public static void main(String[] args) throws Exception {
        int rows = Integer.parseInt(args[0]), reps = Integer.parseInt(args[1]);
        Random r = new Random(7);
        UnsafeRowWriter w = new UnsafeRowWriter(7);
        List<Product2<Object, Object>> recs = new ArrayList<>(rows);
        for (int i = 0; i < rows; i++) {
            w.reset();
            w.zeroOutNullBytes();
            for (int c = 0; c < 7; c++) {
                if (r.nextInt(1000) < 45) w.setNullAt(c);
                else w.write(c, r.nextInt(2000000));
            }
            UnsafeRow row = w.getRow().copy();
            recs.add(new Tuple2<>(r.nextInt(200), row));
        }
        Partitioner byKey = new Partitioner() {
            @Override
            public int numPartitions() {
                return 200;
            }

            @Override
            public int getPartition(Object key) {
                return (Integer) key;
            }
        };
        SerializerInstance ser = new UnsafeRowSerializer(7, null).newInstance();
        ByteBuffer direct = ByteBuffer.allocateDirect(8 << 20);

        /* the same bytes from both paths */
        byte[][] got = new byte[2][];
        for (int path = 0; path < 2; path++) {
            java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
            TaggedRecords t = new TaggedRecords(direct, (b, len) -> {
                byte[] x = new byte[len];
                b.duplicate().position(0).get(x, 0, len);
                all.write(x);
            }, null);
            if (path == 0) t.writeRows(CollectionConverters.asScala(recs.iterator()), byKey);
            else t.writeSerialized(CollectionConverters.asScala(recs.iterator()), byKey, ser);
            t.flush();
            got[path] = all.toByteArray();
        }
        if (!Arrays.equals(got[0], got[1]))
            throw new AssertionError("the UnsafeRow path and the serializer path give different bytes");

        /* timing, interleaved; the sink only drops the buffer */
        long[][] ns = new long[2][reps];
        for (int rep = 0; rep < reps; rep++)
            for (int path = 0; path < 2; path++) {
                TaggedRecords t = new TaggedRecords(direct, (b, len) -> { }, null);
                long t0 = System.nanoTime();
                if (path == 0) t.writeRows(CollectionConverters.asScala(recs.iterator()), byKey);
                else t.writeSerialized(CollectionConverters.asScala(recs.iterator()), byKey, ser);
                t.flush();
                ns[path][rep] = System.nanoTime() - t0;
            }
        double rowNs = median(ns[0]) / rows, serNs = median(ns[1]) / rows;
        System.out.printf("{\"rows\": %d, \"reps\": %d, \"bytes\": %d, \"unsafe_row_ns_per_record\": %.2f, "
                + "\"serializer_ns_per_record\": %.2f, \"identical\": true}%n", rows, reps, got[0].length, rowNs, serNs);
    }

    static double median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2.0;
    }
}

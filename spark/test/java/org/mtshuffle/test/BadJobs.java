package org.mtshuffle.test;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.ShuffledRDD;
import org.apache.spark.serializer.KryoSerializer;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Jobs that hand the writer malformed input from the JVM side, called from
 * the e2e driver through py4j. Each returns the job's failure message, or
 * "no failure".
 */
public final class BadJobs {
    private BadJobs() {}

    /** A partitioner that returns numPartitions for every tenth key: out of range. The shuffle is
     *  Kryo-serialised (relocatable), so mtshuffle's writer takes it. */
    public static String partitionOutOfRange(SparkContext sc) {
        List<Tuple2<Integer, Integer>> data = new ArrayList<>();
        for (int i = 0; i < 20000; i++) data.add(new Tuple2<>(i, i));
        RDD<Tuple2<Integer, Integer>> rdd = new JavaSparkContext(sc).parallelize(data, 4).rdd();
        Partitioner bad = new Partitioner() {
            @Override
            public int numPartitions() {
                return 16;
            }

            @Override
            public int getPartition(Object key) {
                int k = (Integer) key;
                return k % 10 == 0 ? 16 : k % 16;
            }
        };
        ClassTag<Integer> it = ClassTag$.MODULE$.apply(Integer.class);
        ShuffledRDD<Integer, Integer, Integer> s = new ShuffledRDD<>(rdd, bad, it, it, it);
        s.setSerializer(new KryoSerializer(sc.getConf()));
        try {
            long n = s.count();
            return "no failure (" + n + " records)";
        } catch (Exception e) {
            return String.valueOf(e.getMessage());
        }
    }
}

package org.mtshuffle.test;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkStageInfo;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.mtshuffle.MtsShuffleManager;
import scala.Tuple2;

/**
 * What each executor's engine holds between jobs, called from the e2e driver
 * through py4j: a job of many small tasks, each reporting its executor's
 * engine counters. Each distinct line is "executor clients held cached peak
 * budget threads cpus" (cpus: compression jobs at once at most), or "executor
 * none" where no engine was started; how the
 * reduce side took its blocks; and a reduce stage killed while its tasks read.
 */
public final class EngineProbe {
    private EngineProbe() {}

    public static List<String> stats(SparkContext sc, int tasks) {
        List<Integer> xs = new ArrayList<>();
        for (int i = 0; i < tasks; i++) xs.add(i);
        return new JavaSparkContext(sc).parallelize(xs, tasks).map(i -> {
            String id = SparkEnv.get().executorId();
            ShuffleManager m = SparkEnv.get().shuffleManager();
            long[] st = m instanceof MtsShuffleManager ? ((MtsShuffleManager) m).engineStats() : null;
            return st == null ? id + " none"
                    : id + " " + st[2] + " " + st[5] + " " + st[10] + " " + st[6] + " " + st[7] + " " + st[0] + " " + st[11];
        }).distinct().collect();
    }

    /**
     * How each executor's reduce tasks took the blocks they read, "executor mapped copied streamed
     * batches" (MtsShuffleManager.readerBlockAccess), one line per executor that ran a probe task.
     */
    public static List<String> blockAccess(SparkContext sc, int tasks) {
        List<Integer> xs = new ArrayList<>();
        for (int i = 0; i < tasks; i++) xs.add(i);
        return new JavaSparkContext(sc).parallelize(xs, tasks).map(i -> {
            ShuffleManager m = SparkEnv.get().shuffleManager();
            long[] n = m instanceof MtsShuffleManager ? ((MtsShuffleManager) m).readerBlockAccess() : new long[4];
            return SparkEnv.get().executorId() + " " + n[0] + " " + n[1] + " " + n[2] + " " + n[3];
        }).distinct().collect();
    }

    /**
     * A job whose 16 reduce tasks read slowly (a sleep every 100 records) is cancelled, with its
     * tasks interrupted, once they are reading; returns the job's failure message.
     */
    public static String killedReduce(SparkContext sc) throws Exception {
        JavaSparkContext jsc = new JavaSparkContext(sc);
        List<Tuple2<Integer, Long>> data = new ArrayList<>();
        for (int i = 0; i < 400000; i++) data.add(new Tuple2<>(i, (long) i * 7919));
        /* Java-serialised records: mtshuffle's writer leaves this shuffle to Spark's, its reader reads it */
        JavaPairRDD<Integer, Long> shuffled = jsc.parallelizePairs(data, 4).partitionBy(new HashPartitioner(16));
        String[] failure = {"no failure"};
        Thread job = new Thread(() -> {
            jsc.setJobGroup("mts-killed-reduce", "a reduce stage killed while reading", true);
            try {
                shuffled.mapPartitions((Iterator<Tuple2<Integer, Long>> it) -> {
                    long n = 0;
                    while (it.hasNext()) {
                        it.next();
                        if (++n % 100 == 0) Thread.sleep(5);
                    }
                    List<Long> out = new ArrayList<>();
                    out.add(n);
                    return out.iterator();
                }).count();
            } catch (Exception e) {
                failure[0] = String.valueOf(e.getMessage());
            }
        });
        job.start();
        long deadline = System.currentTimeMillis() + 120_000;
        boolean reading = false;
        while (!reading && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
            for (int id : sc.statusTracker().getActiveStageIds()) {
                scala.Option<SparkStageInfo> info = sc.statusTracker().getStageInfo(id);
                if (info.isDefined() && info.get().numTasks() == 16 && info.get().numActiveTasks() > 0) reading = true;
            }
        }
        Thread.sleep(1000);
        sc.cancelJobGroup("mts-killed-reduce");
        job.join(120_000);
        return (reading ? "" : "the reduce stage never ran: ") + failure[0];
    }
}

package org.mtshuffle.test;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.mtshuffle.MtsShuffleManager;

/**
 * What each executor's engine holds between jobs, called from the e2e driver
 * through py4j: a job of many small tasks, each reporting its executor's
 * engine counters. Each distinct line is "executor clients held cached peak
 * budget", or "executor none" where no engine was started.
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
            return st == null ? id + " none" : id + " " + st[2] + " " + st[5] + " " + st[10] + " " + st[6] + " " + st[7];
        }).distinct().collect();
    }
}

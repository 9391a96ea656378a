package org.mtshuffle.test;

import java.io.IOException;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A shuffle I/O plugin (spark.shuffle.sort.io.plugin.class) that offers no
 * single-file map output writer: Spark's local disk plugin with
 * createSingleFileMapOutputWriter left at the API's default (empty), so a
 * writer must commit partition by partition. Logs each map output it takes.
 * With spark.shuffle.plugin.__config__.commitPauseMs=N, an executor's first
 * commit pauses N ms after logging "commit paused", so a test can kill the
 * executor while a map output is being committed.
 */
public class PartitionWritersDataIO implements ShuffleDataIO {
    private static final Logger LOG = LoggerFactory.getLogger(PartitionWritersDataIO.class);
    private final LocalDiskShuffleDataIO local;

    public PartitionWritersDataIO(SparkConf conf) {
        local = new LocalDiskShuffleDataIO(conf);
    }

    @Override
    public ShuffleDriverComponents driver() {
        return local.driver();
    }

    @Override
    public ShuffleExecutorComponents executor() {
        ShuffleExecutorComponents inner = local.executor();
        return new ShuffleExecutorComponents() {
            private long pauseMs;
            private boolean paused;

            @Override
            public void initializeExecutor(String appId, String execId, Map<String, String> extraConfigs) {
                pauseMs = Long.parseLong(extraConfigs.getOrDefault("commitPauseMs", "0"));
                inner.initializeExecutor(appId, execId, extraConfigs);
            }

            @Override
            public ShuffleMapOutputWriter createMapOutputWriter(int shuffleId, long mapTaskId, int numPartitions)
                    throws IOException {
                LOG.info("PartitionWritersDataIO: map output shuffle {} map {} through partition writers", shuffleId,
                        mapTaskId);
                if (pauseMs > 0 && !paused) {
                    paused = true;
                    LOG.info("PartitionWritersDataIO: commit paused: shuffle {} map {}", shuffleId, mapTaskId);
                    try {
                        Thread.sleep(pauseMs);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IOException("interrupted while paused", e);
                    }
                }
                return inner.createMapOutputWriter(shuffleId, mapTaskId, numPartitions);
            }
        };
    }
}

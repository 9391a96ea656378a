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
            @Override
            public void initializeExecutor(String appId, String execId, Map<String, String> extraConfigs) {
                inner.initializeExecutor(appId, execId, extraConfigs);
            }

            @Override
            public ShuffleMapOutputWriter createMapOutputWriter(int shuffleId, long mapTaskId, int numPartitions)
                    throws IOException {
                LOG.info("PartitionWritersDataIO: map output shuffle {} map {} through partition writers", shuffleId,
                        mapTaskId);
                return inner.createMapOutputWriter(shuffleId, mapTaskId, numPartitions);
            }
        };
    }
}

package org.apache.spark.shuffle.mtshuffle;

import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * spark.shuffle.manager=org.apache.spark.shuffle.mtshuffle.MtsShuffleManager
 *
 * Map outputs are written by libmtshuffle (compression, ordering, budget and
 * file writing in C) in Spark's own format, and committed through Spark's
 * IndexShuffleBlockResolver, so Spark's attempt rules and index checks apply
 * and Spark's own reader (and the external shuffle service) read them. What
 * it cannot serve (map-side combine, a serializer whose records cannot be
 * relocated, IO encryption, a codec other than lz4/zstd) goes to Spark's sort
 * shuffle, with a log line saying why.
 */
public class MtsShuffleManager extends SortShuffleManager {
    private static final Logger LOG = LoggerFactory.getLogger(MtsShuffleManager.class);
    private final SparkConf conf;
    private final ConcurrentHashMap<Integer, Set<Long>> ourMaps = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, Boolean> reported = new ConcurrentHashMap<>();

    public MtsShuffleManager(SparkConf conf) {
        super(conf);
        this.conf = conf;
    }

    /** Why a dependency cannot be served natively, or null. */
    String refusal(ShuffleDependency<?, ?, ?> dep) {
        if (dep.mapSideCombine()) return "map-side combine";
        if (!dep.serializer().supportsRelocationOfSerializedObjects())
            return "serializer " + dep.serializer().getClass().getName() + " does not support relocation";
        if (conf.getBoolean("spark.io.encryption.enabled", false)) return "IO encryption is on";
        if (dep.partitioner().numPartitions() > (1 << 24)) return "more than 2^24 partitions";
        if (conf.getBoolean("spark.shuffle.compress", true)) {
            String codec = conf.get("spark.io.compression.codec", "lz4").toLowerCase(Locale.ROOT);
            if (!codec.equals("lz4") && !codec.equals("zstd")
                    && !codec.equals("org.apache.spark.io.lz4compressioncodec")
                    && !codec.equals("org.apache.spark.io.zstdcompressioncodec"))
                return "codec " + codec + " is not lz4 or zstd";
        }
        return null;
    }

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
                                                ShuffleWriteMetricsReporter metrics) {
        ShuffleDependency<?, ?, ?> dep = ((BaseShuffleHandle<?, ?, ?>) handle).dependency();
        String why = refusal(dep);
        if (why != null) {
            if (reported.putIfAbsent(handle.shuffleId(), Boolean.TRUE) == null)
                LOG.warn("mtshuffle: shuffle {} uses Spark's sort shuffle: {}", handle.shuffleId(), why);
            return super.getWriter(handle, mapId, context, metrics);
        }
        if (reported.putIfAbsent(handle.shuffleId(), Boolean.TRUE) == null)
            LOG.info("mtshuffle: shuffle {} is written by libmtshuffle ({} partitions)", handle.shuffleId(),
                    dep.partitioner().numPartitions());
        ourMaps.computeIfAbsent(handle.shuffleId(), k -> ConcurrentHashMap.newKeySet()).add(mapId);
        @SuppressWarnings("unchecked")
        ShuffleDependency<K, V, ?> d = (ShuffleDependency<K, V, ?>) dep;
        return new MtsShuffleWriter<>(conf, (IndexShuffleBlockResolver) shuffleBlockResolver(), handle.shuffleId(),
                mapId, d, context, metrics);
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        Set<Long> maps = ourMaps.remove(shuffleId);
        if (maps != null)
            for (long m : maps) ((IndexShuffleBlockResolver) shuffleBlockResolver()).removeDataByMap(shuffleId, m);
        reported.remove(shuffleId);
        return super.unregisterShuffle(shuffleId);
    }
}

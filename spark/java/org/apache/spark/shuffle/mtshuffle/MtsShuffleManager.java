package org.apache.spark.shuffle.mtshuffle;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleDataIOUtils;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.mtshuffle.NativeEngine;
import org.mtshuffle.NativeLibrary;
import org.mtshuffle.NativeShuffleWriter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;

/**
 * spark.shuffle.manager=org.apache.spark.shuffle.mtshuffle.MtsShuffleManager
 *
 * Map outputs are written by libmtshuffle (compression, ordering, budget and
 * file writing in C) in Spark's own format, on one engine per executor: its
 * threads and its budget (MtsConf) serve every task the executor runs, so a
 * task starts no thread and an idle executor's cores help its stragglers.
 * The engine starts with the first map task and stops with the executor
 * (stop()). Outputs are committed through Spark's shuffle I/O plugin
 * (ShuffleExecutorComponents, spark.shuffle.sort.io.plugin.class): the single
 * file writer where the plugin offers one, the per-partition writers where it
 * does not; Spark's attempt rules and index checks apply, and Spark's reader
 * and the external shuffle service read the result. What it cannot serve
 * (map-side combine, a serializer whose records cannot be relocated, IO
 * encryption, a codec other than lz4/zstd, an executor that cannot load the
 * native library) goes to Spark's sort shuffle, with a log line saying why. Reduce tasks read through MtsShuffleReader (blocks
 * fetched by Spark, decompressed on the same engine) unless
 * spark.mtshuffle.reader.enabled is false or it cannot serve (IO encryption,
 * a codec other than lz4/zstd, uncompressed shuffle output, push-based
 * shuffle's merged blocks, no native library): then Spark's reader, again
 * with a log line.
 * Everything else (unregistering, the resolver) is Spark's sort shuffle.
 */
public class MtsShuffleManager extends SortShuffleManager {
    private static final Logger LOG = LoggerFactory.getLogger(MtsShuffleManager.class);
    private final SparkConf conf;
    private final ConcurrentHashMap<Integer, Boolean> reported = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, Boolean> readReported = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, Set<Long>> ourMaps = new ConcurrentHashMap<>();
    private final AtomicLongArray readerBlocks = new AtomicLongArray(4); /* readerBlockAccess() */
    private MtsConf settings;                    /* guarded by this */
    private NativeEngine engine;                 /* guarded by this: the executor's, from the first task */
    private ShuffleExecutorComponents components; /* guarded by this */
    private boolean stopped;                     /* guarded by this */

    public MtsShuffleManager(SparkConf conf) {
        super(conf);
        this.conf = conf;
    }

    private synchronized MtsConf settings() {
        if (settings == null) settings = new MtsConf(conf);
        return settings;
    }

    /** The executor's engine, started on first use. */
    synchronized NativeEngine engine() throws IOException {
        if (stopped) throw new IOException("mtshuffle: the shuffle manager is stopped");
        if (engine == null) {
            MtsConf c = settings();
            engine = new NativeEngine(c.threads, c.maxBytesInFlight, c.taskSlots);
            LOG.info("mtshuffle: executor engine started: {} threads, {} of them compressing at once at most (the "
                    + "CPUs this process may use), {} bytes in flight at most, writers sized for {} task slots, native "
                    + "library from {}", c.threads, engine.stats()[11], c.maxBytesInFlight, c.taskSlots,
                    NativeLibrary.loadedFrom());
        }
        return engine;
    }

    /**
     * The executor engine's counters (NativeEngine.stats(): threads, threads busy, clients, jobs,
     * busy ns, bytes held, peak bytes held, budget, budget wait ns, reclaims, bytes cached, jobs at
     * once at most), or null before its first task: for monitoring and tests.
     */
    public synchronized long[] engineStats() {
        return engine == null ? null : engine.stats();
    }

    /**
     * How this executor's reduce tasks took the blocks they read (spark.mtshuffle.reader.blockAccess):
     * mapped, copied from Spark's buffer, read through Spark's stream; and of them, how many held
     * several contiguous partitions of one map output (Spark's batch fetch, as adaptive execution's
     * coalesced reads ask for it); counted when a read ends.
     */
    public long[] readerBlockAccess() {
        return new long[] {readerBlocks.get(0), readerBlocks.get(1), readerBlocks.get(2), readerBlocks.get(3)};
    }

    void countReaderBlocks(int mapped, int copied, int streamed, int batches) {
        readerBlocks.addAndGet(0, mapped);
        readerBlocks.addAndGet(1, copied);
        readerBlocks.addAndGet(2, streamed);
        readerBlocks.addAndGet(3, batches);
    }

    /** Spark's shuffle I/O plugin on this executor, initialised as Spark's sort shuffle does. */
    synchronized ShuffleExecutorComponents components() {
        if (components == null) {
            ShuffleExecutorComponents c = ShuffleDataIOUtils.loadShuffleDataIO(conf).executor();
            Map<String, String> extra = new HashMap<>();
            for (Tuple2<String, String> kv : conf.getAllWithPrefix(ShuffleDataIOUtils.SHUFFLE_SPARK_CONF_PREFIX()))
                extra.put(kv._1(), kv._2());
            c.initializeExecutor(conf.getAppId(), SparkEnv.get().executorId(), extra);
            components = c;
        }
        return components;
    }

    /** Why a dependency cannot be served natively, or null. */
    String refusal(ShuffleDependency<?, ?, ?> dep) {
        if (dep.mapSideCombine()) return "map-side combine";
        if (!dep.serializer().supportsRelocationOfSerializedObjects())
            return "serializer " + dep.serializer().getClass().getName() + " does not support relocation";
        if (conf.getBoolean("spark.io.encryption.enabled", false)) return "IO encryption is on";
        if (dep.partitioner().numPartitions() > (1 << 24)) return "more than 2^24 partitions";
        if (settings().codec < 0) return "codec " + settings().codecName + " is not lz4 or zstd";
        if (SparkCompat.unsupported() != null) return SparkCompat.unsupported();
        return nativeRefusal();
    }

    /** Why this executor cannot load the native library, or null: its tasks then use Spark's writer and
     *  reader rather than fail (a platform the jar carries no library for, a C library too old). */
    private static String nativeRefusal() {
        String why = NativeLibrary.tryLoad();
        return why == null ? null : "its native library cannot be loaded: " + why;
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
            LOG.info("mtshuffle: shuffle {} is written by libmtshuffle ({} partitions, codec {})", handle.shuffleId(),
                    dep.partitioner().numPartitions(), settings().codecName);
        ourMaps.computeIfAbsent(handle.shuffleId(), k -> ConcurrentHashMap.newKeySet()).add(mapId);
        @SuppressWarnings("unchecked")
        ShuffleDependency<K, V, ?> d = (ShuffleDependency<K, V, ?>) dep;
        return new MtsShuffleWriter<>(this, settings(), (IndexShuffleBlockResolver) shuffleBlockResolver(),
                handle.shuffleId(), mapId, d, metrics);
    }

    /** Why reduce tasks of a dependency cannot read through the engine, or null. */
    String readerRefusal(ShuffleDependency<?, ?, ?> dep) {
        if (!settings().readerEnabled) return MtsConf.READER_ENABLED + " is false";
        if (conf.getBoolean("spark.io.encryption.enabled", false)) return "IO encryption is on";
        if (settings().codec != NativeShuffleWriter.CODEC_LZ4 && settings().codec != NativeShuffleWriter.CODEC_ZSTD)
            return "codec " + settings().codecName + " is not lz4 or zstd";
        if (dep.isShuffleMergeFinalizedMarked()) return "push-based shuffle's merged blocks";
        if (SparkCompat.readerUnsupported() != null) return SparkCompat.readerUnsupported();
        return nativeRefusal();
    }

    @Override
    public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex,
                                                int startPartition, int endPartition, TaskContext context,
                                                ShuffleReadMetricsReporter metrics) {
        @SuppressWarnings("unchecked")
        BaseShuffleHandle<K, ?, C> h = (BaseShuffleHandle<K, ?, C>) handle;
        String why = readerRefusal(h.dependency());
        boolean first = readReported.putIfAbsent(handle.shuffleId(), Boolean.TRUE) == null;
        if (why != null) {
            if (first) LOG.warn("mtshuffle: shuffle {} is read by Spark's reader: {}", handle.shuffleId(), why);
            return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        if (first)
            LOG.info("mtshuffle: shuffle {} is read through the executor engine (codec {})", handle.shuffleId(),
                    settings().codecName);
        return new MtsShuffleReader<>(this, settings(), h, SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(
                handle.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition), context, metrics,
                SortShuffleManager.canUseBatchFetch(startPartition, endPartition, context));
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        Set<Long> maps = ourMaps.remove(shuffleId);
        if (maps != null)
            for (long m : maps) ((IndexShuffleBlockResolver) shuffleBlockResolver()).removeDataByMap(shuffleId, m);
        reported.remove(shuffleId);
        readReported.remove(shuffleId);
        return super.unregisterShuffle(shuffleId);
    }

    /** The executor is stopping: the engine stops once its last writer is closed. */
    @Override
    public void stop() {
        synchronized (this) {
            stopped = true;
            if (engine != null) {
                long[] st = engine.stats();
                LOG.info("mtshuffle: executor engine stopping: {} jobs, {} ms busy over {} threads, peak {} of {} bytes "
                        + "held, {} ms waited for budget, {} spills asked by waiters", st[3], st[4] / 1000000, st[0],
                        st[6], st[7], st[8] / 1000000, st[9]);
                engine.close();
                engine = null;
            }
        }
        super.stop();
    }
}

package org.apache.spark.shuffle.mtshuffle;

import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.io.CompressionCodec$;
import org.mtshuffle.NativeShuffleWriter;

/**
 * Every setting the plugin reads, with its default, in one place. Spark's
 * own keys decide the format (codec, lz4 block size, zstd level, checksum,
 * sync); the spark.mtshuffle.* keys size the executor's engine.
 *
 * <pre>
 * spark.mtshuffle.threads           compression threads per executor; default: the executor's cores
 *                                   (executorCores())
 * spark.mtshuffle.maxBytesInFlight  hard cap on the bytes the executor's engine holds (input held,
 *                                   compressed output waiting to be written); default 32m per task
 *                                   slot (taskSlots()), at least 64m
 * spark.mtshuffle.bufferSize        each running task's direct buffer of serialized records; default 8m
 * spark.mtshuffle.strategy          streaming (default) or baseline (a temp file per partition, then
 *                                   one copy: the design mtshuffle replaces, kept to compare)
 * spark.mtshuffle.reader.enabled    reduce side: fetched blocks decompressed on the executor's engine
 *                                   (MtsShuffleReader); default true
 * spark.mtshuffle.reader.lookAhead  stored bytes of fetched blocks each reduce task copies out of
 *                                   Spark's fetch buffers and hands to the engine ahead of the block
 *                                   it deserialises; default 8m
 * spark.mtshuffle.reader.pieceSize  decoded bytes per piece the engine hands a reduce task; default 256k
 * spark.mtshuffle.reader.blockAccess  how a reduce task takes a fetched block's stored bytes: map
 *                                   (default: a block in a file, local or fetched to disk, of at least
 *                                   spark.storage.memoryMapThreshold (Spark's, 2m) is mapped, any other
 *                                   copied once from Spark's buffer), copy (every block copied once), or
 *                                   stream (read through Spark's stream of the block, as its reader does)
 * </pre>
 * Off-heap memory this needs, which spark.executor.memoryOverhead must cover:
 * maxBytesInFlight + bufferSize x (tasks running at once) + 4 MiB x (tasks
 * running at once) + 1 MiB x threads (README.md, "The Spark plugin"); a
 * reduce task holds reader.lookAhead of stored bytes (plus one block, when a
 * block is larger; mapped blocks are page cache) outside the budget, and
 * decoded pieces inside it.
 */
final class MtsConf {
    static final String THREADS = "spark.mtshuffle.threads";
    static final String MAX_BYTES_IN_FLIGHT = "spark.mtshuffle.maxBytesInFlight";
    /** The default budget: this much per task slot, and at least MIN_DEFAULT_BYTES_IN_FLIGHT. */
    static final long BYTES_IN_FLIGHT_PER_SLOT = 32L << 20;
    static final long MIN_DEFAULT_BYTES_IN_FLIGHT = 64L << 20;
    static final String BUFFER_SIZE = "spark.mtshuffle.bufferSize";
    static final String BUFFER_SIZE_DEFAULT = "8m";
    static final String STRATEGY = "spark.mtshuffle.strategy";
    static final String READER_ENABLED = "spark.mtshuffle.reader.enabled";
    static final String READER_LOOK_AHEAD = "spark.mtshuffle.reader.lookAhead";
    static final String READER_PIECE_SIZE = "spark.mtshuffle.reader.pieceSize";
    static final String READER_BLOCK_ACCESS = "spark.mtshuffle.reader.blockAccess";

    final int threads;
    /** Tasks the executor runs at once: its cores over spark.task.cpus. Writers are sized so that this
     *  many can each hold their unsorted records in the budget at once. */
    final int taskSlots;
    final long maxBytesInFlight;
    final int bufferSize;
    final int strategy;
    /** Spark's short name of the shuffle codec ("lz4", "zstd", ...), or "none" when shuffle output is not compressed. */
    final String codecName;
    final int codec; /* NativeShuffleWriter.CODEC_*, -1 if not served */
    final int zstdLevel;
    final int lz4BlockSize;
    final int checksum;
    final boolean sync;
    final boolean readerEnabled;
    final long readerLookAhead;
    final int readerPieceSize;
    /** Blocks in a file of at least this many bytes are mapped; Long.MAX_VALUE: none are. */
    final long readerMapBytes;
    /** Blocks are copied from the buffer Spark fetched them into, not read through its stream. */
    final boolean readerCopyBuffers;
    /** Spark's name of the checksum algorithm, null when checksums are off. */
    final String checksumName;

    /** The executor's task slots: spark.executor.cores where set; else the --cores its backend was
     *  started with (standalone, YARN and Kubernetes executors all get one); else the JVM's processors. */
    static int executorCores(SparkConf conf) {
        if (conf.contains("spark.executor.cores")) return Math.max(1, conf.getInt("spark.executor.cores", 1));
        String[] cmd = System.getProperty("sun.java.command", "").split(" ");
        if (cmd.length > 0 && cmd[0].endsWith("CoarseGrainedExecutorBackend"))
            for (int i = 1; i + 1 < cmd.length; i++)
                if (cmd[i].equals("--cores")) {
                    try {
                        return Math.max(1, Integer.parseInt(cmd[i + 1]));
                    } catch (NumberFormatException e) {
                        break;
                    }
                }
        return Runtime.getRuntime().availableProcessors();
    }

    MtsConf(SparkConf conf) {
        int cores = executorCores(conf);
        threads = conf.getInt(THREADS, cores);
        if (threads < 1 || threads > 256)
            throw new IllegalArgumentException(THREADS + " = " + threads + ": must be in 1..256");
        taskSlots = Math.max(1, cores / Math.max(1, conf.getInt("spark.task.cpus", 1)));
        maxBytesInFlight = conf.contains(MAX_BYTES_IN_FLIGHT) ? conf.getSizeAsBytes(MAX_BYTES_IN_FLIGHT)
                : Math.max(MIN_DEFAULT_BYTES_IN_FLIGHT, BYTES_IN_FLIGHT_PER_SLOT * taskSlots);
        if (maxBytesInFlight < (64 << 10))
            throw new IllegalArgumentException(MAX_BYTES_IN_FLIGHT + " = " + maxBytesInFlight + ": must be at least 64k");
        long buf = conf.getSizeAsBytes(BUFFER_SIZE, BUFFER_SIZE_DEFAULT);
        if (buf < 4096 || buf > (1L << 30))
            throw new IllegalArgumentException(BUFFER_SIZE + " = " + buf + ": must be in 4k..1g");
        bufferSize = (int) buf;
        String s = conf.get(STRATEGY, "streaming").toLowerCase(Locale.ROOT);
        if (!s.equals("streaming") && !s.equals("baseline"))
            throw new IllegalArgumentException(STRATEGY + " = " + s + ": must be streaming or baseline");
        strategy = s.equals("baseline") ? NativeShuffleWriter.STRATEGY_BASELINE : NativeShuffleWriter.STRATEGY_STREAMING;
        if (!conf.getBoolean("spark.shuffle.compress", true)) {
            codecName = "none";
            codec = NativeShuffleWriter.CODEC_NONE;
        } else {
            /* Spark's own resolution: a short name or a codec class name. */
            codecName = CompressionCodec$.MODULE$.getShortName(conf.get("spark.io.compression.codec", "lz4"));
            codec = codecName.equals("lz4") ? NativeShuffleWriter.CODEC_LZ4
                    : codecName.equals("zstd") ? NativeShuffleWriter.CODEC_ZSTD : -1;
        }
        zstdLevel = conf.getInt("spark.io.compression.zstd.level", 1);
        lz4BlockSize = (int) conf.getSizeAsBytes("spark.io.compression.lz4.blockSize", "32k");
        if (!conf.getBoolean("spark.shuffle.checksum.enabled", true)) {
            checksum = NativeShuffleWriter.CHECKSUM_NONE;
            checksumName = null;
        } else {
            String a = conf.get("spark.shuffle.checksum.algorithm", "ADLER32").toUpperCase(Locale.ROOT);
            checksumName = a;
            switch (a) {
                case "ADLER32": checksum = NativeShuffleWriter.CHECKSUM_ADLER32; break;
                case "CRC32": checksum = NativeShuffleWriter.CHECKSUM_CRC32; break;
                case "CRC32C": checksum = NativeShuffleWriter.CHECKSUM_CRC32C; break;
                default: throw new IllegalArgumentException("spark.shuffle.checksum.algorithm = " + a
                        + ": mtshuffle writes ADLER32, CRC32 or CRC32C");
            }
        }
        sync = conf.getBoolean("spark.shuffle.sync", false);
        readerEnabled = conf.getBoolean(READER_ENABLED, true);
        readerLookAhead = conf.getSizeAsBytes(READER_LOOK_AHEAD, "8m");
        if (readerLookAhead < 0 || readerLookAhead > (1L << 31))
            throw new IllegalArgumentException(READER_LOOK_AHEAD + " = " + readerLookAhead + ": must be in 0..2g");
        long piece = conf.getSizeAsBytes(READER_PIECE_SIZE, "256k");
        if (piece < 4096 || piece > (64L << 20) || piece * 2 > maxBytesInFlight)
            throw new IllegalArgumentException(READER_PIECE_SIZE + " = " + piece
                    + ": must be in 4k..64m and at most half of " + MAX_BYTES_IN_FLIGHT);
        readerPieceSize = (int) piece;
        String access = conf.get(READER_BLOCK_ACCESS, "map").toLowerCase(Locale.ROOT);
        if (!access.equals("map") && !access.equals("copy") && !access.equals("stream"))
            throw new IllegalArgumentException(READER_BLOCK_ACCESS + " = " + access + ": must be map, copy or stream");
        readerMapBytes = access.equals("map")
                ? Math.max(1, conf.getSizeAsBytes("spark.storage.memoryMapThreshold", "2m")) : Long.MAX_VALUE;
        readerCopyBuffers = !access.equals("stream");
    }
}

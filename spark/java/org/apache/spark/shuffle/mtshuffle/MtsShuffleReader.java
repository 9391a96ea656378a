package org.apache.spark.shuffle.mtshuffle;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.zip.Checksum;
import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.internal.config.package$;
import org.apache.spark.network.buffer.FileSegmentManagedBuffer;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.checksum.Cause;
import org.apache.spark.network.shuffle.checksum.ShuffleChecksumHelper;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockFetcherIterator;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.storage.StorageUtils;
import org.apache.spark.util.SystemClock;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.collection.ExternalSorter;
import org.mtshuffle.NativeBlockReader;
import org.mtshuffle.NativeEngine;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.math.Ordering;
import scala.runtime.AbstractFunction2;

/**
 * The reduce side on the executor's engine. Blocks are fetched by Spark's own
 * machinery (ShuffleBlockFetcherIterator: local and remote blocks, the external
 * shuffle service, retries, fetch-to-disk of large blocks, fetch failures), with
 * no decompression in it: each fetched block's stored bytes are taken from
 * Spark's buffer (which goes back to the fetcher at once): mapped where it is
 * a large file segment, else copied once (spark.mtshuffle.reader.blockAccess),
 * and handed to a {@link NativeBlockReader}, which decompresses them on the engine's threads
 * under its budget. The task thread keeps up to spark.mtshuffle.reader.lookAhead
 * bytes of later blocks handed over while it deserialises the current one, so
 * decompression runs on other cores; blocks are deserialised in fetch order
 * with the dependency's serializer, then aggregated and sorted as Spark's
 * BlockStoreShuffleReader does.
 *
 * A block the engine finds corrupt ends the task with Spark's
 * FetchFailedException (the stage is retried), with Spark's diagnosis where
 * shuffle checksums are on: the stored bytes' checksum is sent to the block's
 * server, which compares it with the map output's checksum file. Everything
 * is given back when the task ends, however it ends (a limit that stops
 * reading early, a kill).
 */
final class MtsShuffleReader<K, C> implements ShuffleReader<K, C> {
    private static final Logger LOG = LoggerFactory.getLogger(MtsShuffleReader.class);
    private static final int READ_CHUNK = 64 << 10;
    private static final int POOL_BUFFERS = 8;             /* block buffers a task keeps for reuse */
    private static final int POOL_BUFFER_MAX = 4 << 20;    /* larger ones are freed when done */
    private static final long LOG_READ_BYTES = 64L << 20;  /* a read decoding this much logs its stats at info */
    /* How a block's stored bytes were taken (spark.mtshuffle.reader.blockAccess). */
    private static final int MAPPED = 0, COPIED = 1, STREAMED = 2;
    private static final String[] ACCESS = {"mapped", "copied from Spark's buffer", "read through Spark's stream"};

    private final MtsShuffleManager manager;
    private final MtsConf settings;
    private final BaseShuffleHandle<K, ?, C> handle;
    private final Iterator<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> blocksByAddress;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter readMetrics;
    private final boolean shouldBatchFetch;

    MtsShuffleReader(MtsShuffleManager manager, MtsConf settings, BaseShuffleHandle<K, ?, C> handle,
                     Iterator<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> blocksByAddress,
                     TaskContext context, ShuffleReadMetricsReporter readMetrics, boolean shouldBatchFetch) {
        this.manager = manager;
        this.settings = settings;
        this.handle = handle;
        this.blocksByAddress = blocksByAddress;
        this.context = context;
        this.readMetrics = readMetrics;
        this.shouldBatchFetch = shouldBatchFetch;
    }

    @SuppressWarnings("unchecked")
    private static <T> T conf(SparkConf conf, org.apache.spark.internal.config.ConfigEntry<?> e) {
        return (T) conf.get(e);
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public Iterator<Product2<K, C>> read() {
        SparkEnv env = SparkEnv.get();
        SparkConf conf = env.conf();
        BlockManager bm = env.blockManager();
        MapOutputTracker tracker = env.mapOutputTracker();
        package$ cfg = package$.MODULE$;

        /* Where each map's blocks come from, for the fetch-failure path. */
        List<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> all = new ArrayList<>();
        Map<Long, Tuple2<BlockManagerId, Integer>> origin = new HashMap<>();
        Map<BlockId, Long> sizes = new HashMap<>(); /* as the map statuses record them: exact above Spark's
                                                       accurate-block threshold, else an average */
        while (blocksByAddress.hasNext()) {
            Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>> t = blocksByAddress.next();
            all.add(t);
            Iterator<Tuple3<BlockId, Object, Object>> it = t._2().iterator();
            while (it.hasNext()) {
                Tuple3<BlockId, Object, Object> b = it.next();
                if (b._1() instanceof ShuffleBlockId)
                    origin.put(((ShuffleBlockId) b._1()).mapId(), new Tuple2<>(t._1(), (Integer) b._3()));
                sizes.put(b._1(), (Long) b._2());
            }
        }
        /* Batch fetch as Spark's reader decides it: contiguous partitions of one map in one block,
         * which our decoder reads as one concatenation of streams. */
        boolean batch = shouldBatchFetch && handle.dependency().serializer().supportsRelocationOfSerializedObjects()
                && !(Boolean) conf(conf, cfg.IO_ENCRYPTION_ENABLED())
                && !(Boolean) conf(conf, cfg.SHUFFLE_USE_OLD_FETCH_PROTOCOL());

        ShuffleBlockFetcherIterator fetcher = new ShuffleBlockFetcherIterator(context, bm.blockStoreClient(), bm,
                tracker, CollectionConverters.asScala(all.iterator()),
                new AbstractFunction2<BlockId, InputStream, InputStream>() {
                    /* A stream of its own (not the fetched one), so that Spark's
                     * BufferReleasingInputStream turns a read error of the stored
                     * bytes into a fetch failure, as it does for a decompressing
                     * stream; the bytes pass through unchanged. */
                    @Override
                    public InputStream apply(BlockId id, InputStream in) {
                        return new FilterInputStream(in) {};
                    }
                },
                (Long) conf(conf, cfg.REDUCER_MAX_SIZE_IN_FLIGHT()) * 1024 * 1024,
                (Integer) conf(conf, cfg.REDUCER_MAX_REQS_IN_FLIGHT()),
                (Integer) conf(conf, cfg.REDUCER_MAX_BLOCKS_IN_FLIGHT_PER_ADDRESS()),
                (Long) conf(conf, cfg.MAX_REMOTE_BLOCK_SIZE_FETCH_TO_MEM()),
                (Integer) conf(conf, cfg.SHUFFLE_MAX_ATTEMPTS_ON_NETTY_OOM()),
                (Boolean) conf(conf, cfg.SHUFFLE_DETECT_CORRUPT()),
                (Boolean) conf(conf, cfg.SHUFFLE_DETECT_CORRUPT_MEMORY()),
                (Boolean) conf(conf, cfg.SHUFFLE_CHECKSUM_ENABLED()),
                (String) conf(conf, cfg.SHUFFLE_CHECKSUM_ALGORITHM()),
                readMetrics, batch, new SystemClock());

        Blocks blocks;
        try {
            blocks = new Blocks(manager.engine(), fetcher, origin, sizes, bm);
        } catch (IOException e) {
            fetcher.cleanup();
            throw new RuntimeException("mtshuffle: shuffle " + handle.shuffleId() + ": start the block reader", e);
        }
        context.addTaskCompletionListener((TaskCompletionListener) ctx -> blocks.close());

        SerializerInstance ser = handle.dependency().serializer().newInstance();
        TaskMetrics taskMetrics = context.taskMetrics();
        Iterator<Tuple2<Object, Object>> records = new AbstractIterator<Tuple2<Object, Object>>() {
            private Iterator<Tuple2<Object, Object>> cur = scala.collection.Iterator$.MODULE$.<Tuple2<Object, Object>>empty();
            private boolean merged;

            @Override
            public boolean hasNext() {
                while (!cur.hasNext()) {
                    InputStream next = blocks.nextBlock();
                    if (next == null) {
                        if (!merged) { /* once, when the last record was read */
                            merged = true;
                            blocks.close(); /* the budget and buffers back now, not at the task's end */
                            taskMetrics.mergeShuffleReadMetrics();
                        }
                        return false;
                    }
                    cur = ser.deserializeStream(next).asKeyValueIterator();
                }
                return true;
            }

            @Override
            public Tuple2<Object, Object> next() {
                if (!hasNext()) throw new java.util.NoSuchElementException("mtshuffle reader: no more records");
                readMetrics.incRecordsRead(1);
                return cur.next();
            }
        };
        Iterator interruptible = new InterruptibleIterator<>(context, records);

        Iterator<Product2<K, C>> aggregated;
        Option<Aggregator<K, Object, C>> agg = (Option) handle.dependency().aggregator();
        if (agg.isDefined()) {
            aggregated = handle.dependency().mapSideCombine()
                    ? (Iterator) agg.get().combineCombinersByKey(interruptible, context)
                    : (Iterator) agg.get().combineValuesByKey(interruptible, context);
        } else {
            aggregated = interruptible;
        }
        Option<Ordering<K>> ord = handle.dependency().keyOrdering();
        if (ord.isEmpty())
            return aggregated instanceof InterruptibleIterator ? aggregated
                    : new InterruptibleIterator<>(context, aggregated);
        ExternalSorter<K, C, C> sorter = new ExternalSorter<>(context, Option.empty(), Option.empty(), ord,
                handle.dependency().serializer());
        sorter.insertAll((Iterator) aggregated);
        taskMetrics.incMemoryBytesSpilled(sorter.memoryBytesSpilled());
        taskMetrics.incDiskBytesSpilled(sorter.diskBytesSpilled());
        taskMetrics.incPeakExecutionMemory(sorter.peakMemoryUsedBytes());
        context.addTaskCompletionListener((TaskCompletionListener) ctx -> sorter.stop());
        Iterator<Product2<K, C>> sorted = sorter.iterator();
        Iterator<Product2<K, C>> stopping = new AbstractIterator<Product2<K, C>>() {
            private boolean stopped;

            @Override
            public boolean hasNext() {
                boolean more = sorted.hasNext();
                if (!more && !stopped) {
                    stopped = true;
                    sorter.stop();
                }
                return more;
            }

            @Override
            public Product2<K, C> next() {
                return sorted.next();
            }
        };
        return new InterruptibleIterator<>(context, stopping);
    }

    /** One fetched block: its id, stored bytes (a direct buffer of ours) and length. */
    private static final class Fetched {
        final BlockId id;
        final ByteBuffer bytes;
        final int length;
        final int tag;
        final int access; /* MAPPED, COPIED or STREAMED */

        Fetched(BlockId id, ByteBuffer bytes, int length, int tag, int access) {
            this.id = id;
            this.bytes = bytes;
            this.length = length;
            this.tag = tag;
            this.access = access;
        }
    }

    /**
     * The fetched blocks, decoded: one InputStream per block, in fetch order. Owns
     * the native reader and the direct buffers of the stored bytes.
     */
    private final class Blocks {
        private final ShuffleBlockFetcherIterator fetcher;
        private final Queue<?> fetched; /* the fetcher's results: non-empty, next() won't wait */
        private final Map<Long, Tuple2<BlockManagerId, Integer>> origin;
        private final Map<BlockId, Long> sizes;
        private final BlockManager bm;
        private final NativeBlockReader reader;
        private final ArrayDeque<Fetched> ahead = new ArrayDeque<>(); /* handed over, not yet read */
        private final ArrayDeque<ByteBuffer> pool = new ArrayDeque<>(); /* buffers to reuse */
        private final byte[] chunk = new byte[READ_CHUNK];
        private long aheadBytes;
        private long fetchNs; /* this thread's time in the fetcher and copying stored bytes */
        private final int[] taken = new int[3]; /* blocks taken each way: MAPPED, COPIED, STREAMED */
        private int batches;                    /* blocks of several contiguous partitions (batch fetch) */
        private int nextTag;
        private boolean fetcherDone, closed;
        /* The piece last taken from the reader (for the block whose tag it has), and its tag. */
        private ByteBuffer piece;
        private int pieceTag = -1;
        private Throwable failure; /* the read failed at block failedTag */
        private int failedTag = -1;

        Blocks(NativeEngine engine, ShuffleBlockFetcherIterator fetcher,
               Map<Long, Tuple2<BlockManagerId, Integer>> origin, Map<BlockId, Long> sizes, BlockManager bm)
                throws IOException {
            this.fetcher = fetcher;
            this.sizes = sizes;
            this.fetched = SparkCompat.fetchResults(fetcher);
            this.origin = origin;
            this.bm = bm;
            this.reader = new NativeBlockReader(engine, settings.codec, settings.readerPieceSize);
        }

        /** The next block's decoded stream, or null after the last. */
        InputStream nextBlock() {
            if (ahead.isEmpty() && !fetchOne()) return null;
            Fetched f = ahead.pollFirst();
            aheadBytes -= f.length;
            topUp();
            return new BlockStream(f);
        }

        /** Hands over more blocks while the look-ahead allows and the fetcher has them ready. */
        void topUp() {
            if (failure != null) return; /* the failed block's bytes stay as they are, for its diagnosis */
            while (!closed && aheadBytes < settings.readerLookAhead && !fetched.isEmpty() && fetchOne()) {}
        }

        /** Takes the fetcher's next block into a buffer of ours; false when there is none. */
        private boolean fetchOne() {
            if (fetcherDone || closed || !fetcher.hasNext()) {
                fetcherDone = true;
                return false;
            }
            long t0 = System.nanoTime();
            Object head = settings.readerCopyBuffers ? nextResult() : null; /* what next() takes now */
            Tuple2<BlockId, InputStream> t = fetcher.next();
            long hint = sizes.getOrDefault(t._1(), 0L); /* a batch block is not in the map: grown as read */
            ManagedBuffer src = head instanceof ShuffleBlockFetcherIterator.SuccessFetchResult
                    && ((ShuffleBlockFetcherIterator.SuccessFetchResult) head).blockId().equals(t._1())
                    ? ((ShuffleBlockFetcherIterator.SuccessFetchResult) head).buf() : null;
            ByteBuffer buf = null;
            int n = -1, access = MAPPED;
            try (InputStream in = t._2()) {
                if (src != null && src.size() >= settings.readerMapBytes) buf = map(src);
                if (buf != null) {
                    n = buf.capacity();
                } else {
                    if (src != null) hint = src.size();
                    buf = pool.pollFirst();
                    if (buf == null || buf.capacity() < hint)
                        buf = ByteBuffer.allocateDirect((int) Math.min(Integer.MAX_VALUE - 8, Math.max(hint, READ_CHUNK * 4)));
                    access = COPIED;
                    if (src != null) n = copyFrom(src, buf);
                }
                if (n < 0) {
                    access = STREAMED;
                    n = 0;
                    for (int r; (r = in.read(chunk)) > 0; n += r) {
                        if (n + r > buf.capacity()) buf = grow(buf, n, (long) n + r);
                        buf.put(n, chunk, 0, r);
                    }
                }
            } catch (IOException e) {
                /* Spark's stream turns read errors into FetchFailedException; anything else is ours. */
                throw new RuntimeException("mtshuffle: shuffle " + handle.shuffleId() + ": read block " + t._1(), e);
            }
            Fetched f = new Fetched(t._1(), buf, n, nextTag++, access);
            taken[access]++;
            if (t._1() instanceof ShuffleBlockBatchId) batches++;
            try {
                reader.add(buf, n, f.tag);
            } catch (IOException e) {
                throw new RuntimeException("mtshuffle: shuffle " + handle.shuffleId() + ": hand over block " + t._1(), e);
            }
            ahead.addLast(f);
            aheadBytes += n;
            fetchNs += System.nanoTime() - t0;
            return true;
        }

        /**
         * The fetcher's next result, once there is one (a remote block may still be
         * on the network: Spark's reader would wait in next() too), so that its
         * buffer can be read directly; null if the task is killed meanwhile. The
         * fetcher has no wait that leaves the result in its queue, so this polls,
         * at most every 200 us, and reports the wait as Spark's fetch wait time.
         */
        private Object nextResult() {
            Object head = fetched.peek();
            if (head != null) return head;
            long t0 = System.nanoTime();
            for (long pause = 10_000; (head = fetched.peek()) == null && !context.isInterrupted(); ) {
                LockSupport.parkNanos(pause);
                pause = Math.min(2 * pause, 200_000);
            }
            readMetrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
            return head;
        }

        /**
         * A large block in a file (a local block, or a remote one Spark fetched to
         * disk), mapped read-only: the engine's threads decode it from the page cache
         * and this thread copies nothing (a copy of a skewed block costs this task
         * as much as its decoding). Null where it cannot be mapped: the caller copies.
         * Committed shuffle files are replaced by rename, never truncated, so the
         * mapping stays valid until it is unmapped when the reader is past it.
         */
        private ByteBuffer map(ManagedBuffer src) {
            if (!(src instanceof FileSegmentManagedBuffer) || src.size() > Integer.MAX_VALUE - 8) return null;
            FileSegmentManagedBuffer seg = (FileSegmentManagedBuffer) src;
            try (FileChannel ch = FileChannel.open(seg.getFile().toPath(), StandardOpenOption.READ)) {
                if (seg.getOffset() + seg.getLength() > ch.size()) return null; /* shorter than its index says */
                return ch.map(FileChannel.MapMode.READ_ONLY, seg.getOffset(), seg.getLength());
            } catch (IOException | RuntimeException e) {
                return null;
            }
        }

        /**
         * The stored bytes straight from the buffer Spark fetched them into, in one
         * copy: a file segment read into dst by the kernel, an in-memory one copied
         * once. The stream Spark made of the same buffer would pass them through a
         * heap array and its checksum (which only a corrupt block needs, and ours
         * computes then from dst). -1 where this cannot serve (any error): the caller
         * reads the stream, untouched so far, and Spark's own error path applies.
         */
        private int copyFrom(ManagedBuffer src, ByteBuffer dst) {
            long len = src.size();
            if (len > dst.capacity()) return -1;
            try {
                if (src instanceof FileSegmentManagedBuffer) {
                    FileSegmentManagedBuffer seg = (FileSegmentManagedBuffer) src;
                    try (FileChannel ch = FileChannel.open(seg.getFile().toPath(), StandardOpenOption.READ)) {
                        ByteBuffer d = dst.duplicate().position(0).limit((int) len);
                        while (d.hasRemaining())
                            if (ch.read(d, seg.getOffset() + d.position()) < 0) return -1; /* shorter than its index says */
                    }
                } else {
                    ByteBuffer b = src.nioByteBuffer();
                    if (b.remaining() != len) return -1;
                    dst.put(0, b, b.position(), (int) len);
                }
                return (int) len;
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }

        private ByteBuffer grow(ByteBuffer buf, int used, long need) {
            if (need > Integer.MAX_VALUE - 8)
                throw new IllegalStateException("mtshuffle: a fetched block over 2 GiB");
            long cap = Math.min(Integer.MAX_VALUE - 8, Math.max(need, 2L * buf.capacity()));
            ByteBuffer g = ByteBuffer.allocateDirect((int) cap);
            g.put(0, buf, 0, used);
            return g;
        }

        /** Buffers the reader is past go back to the pool (a few small ones are kept); the others are
         *  freed now rather than at some later garbage collection (a skewed block's can be 100 MB). */
        private void recycle() {
            for (ByteBuffer b; (b = reader.takeReleased()) != null; ) {
                if (!b.isReadOnly() && pool.size() < POOL_BUFFERS && b.capacity() <= POOL_BUFFER_MAX) pool.addLast(b);
                else StorageUtils.dispose(b);
            }
        }

        /**
         * The next piece of block tag; null at its end. Pieces of earlier blocks (a
         * stream left unread) are skipped.
         */
        ByteBuffer pieceOf(Fetched f) {
            for (;;) {
                if (piece != null && pieceTag == f.tag && piece.hasRemaining()) return piece;
                if (piece != null && pieceTag > f.tag) return null; /* f is complete */
                if (failure != null) {
                    if (failedTag == f.tag) throw fetchFailed(f, failure);
                    if (failedTag > f.tag) return null;
                }
                topUp();
                try {
                    piece = reader.next();
                } catch (IOException e) {
                    piece = null;
                    failure = e;
                    failedTag = failedBlock(e.getMessage(), f.tag);
                    continue;
                } finally {
                    if (failure == null) recycle();
                }
                if (piece == null) {
                    pieceTag = -1;
                    /* Everything handed over is read: f ended, or f is still to come (not possible: f was
                     * handed over before its stream was made). */
                    return null;
                }
                pieceTag = reader.tag();
            }
        }

        /** The tag in the native message ("... block N (...): ..."), else the block being read. */
        private int failedBlock(String msg, int reading) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("block (\\d+) \\(").matcher(msg == null ? "" : msg);
            return m.find() ? Integer.parseInt(m.group(1)) : reading;
        }

        /** Spark's fetch failure for a block the engine could not decode, with Spark's diagnosis. */
        private RuntimeException fetchFailed(Fetched f, Throwable cause) {
            long mapId;
            int reduceId;
            if (f.id instanceof ShuffleBlockId) {
                mapId = ((ShuffleBlockId) f.id).mapId();
                reduceId = ((ShuffleBlockId) f.id).reduceId();
            } else if (f.id instanceof ShuffleBlockBatchId) {
                mapId = ((ShuffleBlockBatchId) f.id).mapId();
                reduceId = ((ShuffleBlockBatchId) f.id).startReduceId();
            } else {
                return new IllegalStateException("mtshuffle: corrupt block " + f.id + " of an unexpected kind", cause);
            }
            Tuple2<BlockManagerId, Integer> o = origin.get(mapId);
            BlockManagerId address = o != null ? o._1() : bm.blockManagerId();
            int mapIndex = o != null ? o._2() : -1;
            String msg = cause.getMessage() + " (its stored bytes " + ACCESS[f.access] + ")";
            if (f.id instanceof ShuffleBlockId && settings.checksumName != null) msg = diagnose(f, address) + "; " + msg;
            return sneaky(new FetchFailedException(address, handle.shuffleId(), mapId, mapIndex, reduceId, msg, cause));
        }

        /** As Spark's fetcher diagnoses a corrupt block: the stored bytes' checksum, judged by their server. */
        private String diagnose(Fetched f, BlockManagerId address) {
            ShuffleBlockId id = (ShuffleBlockId) f.id;
            Cause cause;
            try {
                Checksum sum = ShuffleChecksumHelper.getChecksumByAlgorithm(settings.checksumName);
                sum.update(f.bytes.duplicate().position(0).limit(f.length));
                cause = bm.blockStoreClient().diagnoseCorruption(address.host(), address.port(), address.executorId(),
                        id.shuffleId(), id.mapId(), id.reduceId(), sum.getValue(), settings.checksumName);
            } catch (Exception e) {
                LOG.warn("mtshuffle: could not diagnose the corrupt block {}", id, e);
                cause = Cause.UNKNOWN_ISSUE;
            }
            switch (cause) {
                case UNSUPPORTED_CHECKSUM_ALGORITHM:
                    return "Block " + id + " is corrupted but corruption diagnosis failed due to unsupported checksum "
                            + "algorithm: " + settings.checksumName;
                case CHECKSUM_VERIFY_PASS:
                    return "Block " + id + " is corrupted but checksum verification passed";
                case UNKNOWN_ISSUE:
                    return "Block " + id + " is corrupted but the cause is unknown";
                default:
                    return "Block " + id + " is corrupted due to " + cause;
            }
        }

        void close() {
            if (closed) return;
            closed = true;
            piece = null;
            logStats();
            manager.countReaderBlocks(taken[MAPPED], taken[COPIED], taken[STREAMED], batches);
            reader.close(); /* every block buffer is released now */
            for (ByteBuffer b; (b = reader.takeReleased()) != null; ) StorageUtils.dispose(b);
            for (ByteBuffer b : pool) StorageUtils.dispose(b);
            pool.clear();
            ahead.clear();
            fetcher.cleanup();
        }

        /** Where a read's time went: at info for a large read (a skewed partition), else at debug. */
        private void logStats() {
            long[] st;
            try {
                st = reader.stats();
            } catch (RuntimeException e) {
                return; /* a failed reader: its failure is reported already */
            }
            if (st == null || (st[1] < LOG_READ_BYTES && !LOG.isDebugEnabled())) return;
            String line = "mtshuffle: shuffle {} read {} blocks ({} mapped, {} copied from Spark's buffer, the others "
                    + "read from its stream): {} bytes stored, {} decoded; fetching them took this task {} ms; decoding "
                    + "took {} ms (engine threads and this one), this task waited {} ms for pieces and decoded {} itself";
            Object[] args = {handle.shuffleId(), nextTag, taken[MAPPED], taken[COPIED], st[0], st[1], fetchNs / 1_000_000,
                    st[2] / 1_000_000, st[3] / 1_000_000, st[5]};
            if (st[1] >= LOG_READ_BYTES) LOG.info(line, args);
            else LOG.debug(line, args);
        }

        /** One block's decoded bytes. */
        private final class BlockStream extends InputStream {
            private final Fetched f;
            private boolean ended;

            BlockStream(Fetched f) {
                this.f = f;
            }

            private ByteBuffer current() {
                if (ended) return null;
                ByteBuffer p = pieceOf(f);
                if (p == null) ended = true;
                return p;
            }

            @Override
            public int read() {
                ByteBuffer p = current();
                return p == null ? -1 : p.get() & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) {
                if (len == 0) return 0;
                ByteBuffer p = current();
                if (p == null) return -1;
                int n = Math.min(len, p.remaining());
                p.get(b, off, n);
                return n;
            }

            @Override
            public int available() {
                return ended || piece == null || pieceTag != f.tag ? 0 : piece.remaining();
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable t) throws E {
        throw (E) t; /* Spark's own streams throw FetchFailedException the same way (Scala has no checked exceptions) */
    }
}

package org.apache.spark.shuffle.mtshuffle;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Queue;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockFetcherIterator;

/**
 * What differs between the Spark 4 releases the plugin runs on, looked up once. The jar is
 * compiled against Spark 4.0; Spark 4.1 gave MapStatus.apply a fourth parameter (the map
 * output's row-based checksum, with a default) and ShuffleDependency rowBasedChecksums(), which
 * Spark's own writers update with every record when a query asks for them, and made the
 * fetcher's queue of results a deque. Where a dependency asks for row-based checksums (Spark
 * SQL's exchanges, spark.sql.shuffle.orderIndependentChecksum.enabled), the plugin's writer
 * updates them with every record as Spark's writers do and hands their aggregate to the map
 * status; otherwise the map status gets Spark's default.
 */
final class SparkCompat {
    private static final MethodHandle MAP_STATUS;      /* (BlockManagerId, long[], long, long) -> MapStatus */
    private static final long NO_CHECKSUM;             /* the last argument where the dependency asks for none */
    private static final MethodHandle ROW_CHECKSUMS;   /* (ShuffleDependency) -> Object[], or null before 4.1 */
    private static final MethodHandle ROW_UPDATE;      /* (RowBasedChecksum, key, value) -> void */
    private static final MethodHandle ROW_AGGREGATE;   /* (RowBasedChecksum[]) -> long */
    private static final String UNSUPPORTED;           /* why this Spark's map status cannot be made, or null */
    private static final MethodHandle RESULTS;         /* (ShuffleBlockFetcherIterator) -> Queue, or null */
    private static final String NO_RESULTS;            /* why not, or null */

    static {
        MethodHandles.Lookup l = MethodHandles.publicLookup();
        MethodHandle status = null, checksums = null, update = null, aggregate = null;
        long none = 0;
        String why = null;
        try { /* Spark 4.1 and later: the row-based checksum last */
            status = l.findVirtual(MapStatus$.class, "apply", MethodType.methodType(MapStatus.class,
                    BlockManagerId.class, long[].class, long.class, long.class)).bindTo(MapStatus$.MODULE$);
            none = (long) l.findVirtual(MapStatus$.class, "apply$default$4", MethodType.methodType(long.class))
                    .invoke(MapStatus$.MODULE$);
            Class<?> rbc = Class.forName("org.apache.spark.shuffle.checksum.RowBasedChecksum");
            Class<?> rbcs = Class.forName("[Lorg.apache.spark.shuffle.checksum.RowBasedChecksum;");
            checksums = l.findVirtual(ShuffleDependency.class, "rowBasedChecksums", MethodType.methodType(rbcs))
                    .asType(MethodType.methodType(Object[].class, ShuffleDependency.class));
            update = l.findVirtual(rbc, "update", MethodType.methodType(void.class, Object.class, Object.class))
                    .asType(MethodType.methodType(void.class, Object.class, Object.class, Object.class));
            aggregate = l.findStatic(rbc, "getAggregatedChecksumValue", MethodType.methodType(long.class, rbcs))
                    .asType(MethodType.methodType(long.class, Object[].class));
        } catch (Throwable e4) {
            status = checksums = update = aggregate = null;
            try { /* Spark 4.0 */
                status = MethodHandles.dropArguments(l.findVirtual(MapStatus$.class, "apply",
                        MethodType.methodType(MapStatus.class, BlockManagerId.class, long[].class, long.class))
                        .bindTo(MapStatus$.MODULE$), 3, long.class);
            } catch (ReflectiveOperationException e3) {
                why = "this Spark's MapStatus.apply takes neither (BlockManagerId, long[], long, long) nor "
                        + "(BlockManagerId, long[], long): " + e4 + "; " + e3;
            }
        }
        MAP_STATUS = status;
        NO_CHECKSUM = none;
        ROW_CHECKSUMS = checksums;
        ROW_UPDATE = update;
        ROW_AGGREGATE = aggregate;
        UNSUPPORTED = why;
        MethodHandle results = null;
        String noResults = null;
        try { /* a LinkedBlockingQueue in Spark 4.0, a LinkedBlockingDeque since 4.1: a Queue either way */
            results = l.unreflectGetter(ShuffleBlockFetcherIterator.class.getField(
                    "org$apache$spark$storage$ShuffleBlockFetcherIterator$$results"))
                    .asType(MethodType.methodType(Queue.class, ShuffleBlockFetcherIterator.class));
        } catch (ReflectiveOperationException | RuntimeException e) {
            noResults = "this Spark's ShuffleBlockFetcherIterator has no queue of results the reader can see: " + e;
        }
        RESULTS = results;
        NO_RESULTS = noResults;
    }

    private SparkCompat() {}

    /** Why the plugin cannot write map outputs on this Spark, or null. */
    static String unsupported() {
        return UNSUPPORTED;
    }

    /** Why the plugin's reader cannot read on this Spark, or null. */
    static String readerUnsupported() {
        return NO_RESULTS;
    }

    /** The fetcher's queue of fetched blocks (what its next() takes next is at the head). */
    static Queue<?> fetchResults(ShuffleBlockFetcherIterator fetcher) {
        if (RESULTS == null) throw new IllegalStateException("mtshuffle: " + NO_RESULTS);
        try {
            return (Queue<?>) RESULTS.invokeExact(fetcher);
        } catch (Throwable t) {
            throw unchecked("reading the fetcher's results", t);
        }
    }

    /** The dependency's row-based checksums, one per partition, or null where it asks for none
     *  (or Spark is 4.0). */
    static Object[] rowChecksums(ShuffleDependency<?, ?, ?> dep) {
        if (ROW_CHECKSUMS == null) return null;
        try {
            Object[] c = (Object[]) ROW_CHECKSUMS.invokeExact(dep);
            return c != null && c.length > 0 ? c : null;
        } catch (Throwable t) {
            throw unchecked("ShuffleDependency.rowBasedChecksums()", t);
        }
    }

    /** One record into its partition's row-based checksum, as Spark's writers give it. */
    static void updateRowChecksum(Object checksum, Object key, Object value) {
        try {
            ROW_UPDATE.invokeExact(checksum, key, value);
        } catch (Throwable t) {
            throw unchecked("RowBasedChecksum.update", t);
        }
    }

    /** MapStatus.apply(loc, lengths, mapId[, checksum]): the aggregate of rowChecksums (as
     *  rowChecksums() gave them), Spark's default where they are null. */
    static MapStatus mapStatus(BlockManagerId loc, long[] lengths, long mapId, Object[] rowChecksums) {
        if (MAP_STATUS == null) throw new IllegalStateException("mtshuffle: " + UNSUPPORTED);
        try {
            long sum = rowChecksums == null ? NO_CHECKSUM : (long) ROW_AGGREGATE.invokeExact(rowChecksums);
            return (MapStatus) MAP_STATUS.invokeExact(loc, lengths, mapId, sum);
        } catch (Throwable t) {
            throw unchecked("MapStatus.apply", t);
        }
    }

    /** What a method handle threw, as the caller may throw it: unchecked as it was, else wrapped.
     *  (The handles reach only methods that declare no checked exception.) */
    private static RuntimeException unchecked(String call, Throwable t) {
        if (t instanceof RuntimeException) return (RuntimeException) t;
        if (t instanceof Error) throw (Error) t;
        return new IllegalStateException("mtshuffle: " + call + " failed", t);
    }
}

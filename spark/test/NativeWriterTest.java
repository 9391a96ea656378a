import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import java.util.zip.*;
import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;
import org.mtshuffle.NativeBlockReader;
import org.mtshuffle.NativeEngine;
import org.mtshuffle.NativeLibrary;
import org.mtshuffle.NativeShuffleWriter;

/**
 * The JNI binding, end to end without Spark: records serialised into direct
 * buffers in random partition order (and batches grouped by partition) go to
 * the native writer; the data file it leaves is decoded partition by
 * partition with lz4-java and zstd-jni and compared with what went in, its
 * checksums with java.util.zip. Errors surface as exceptions with messages;
 * abort removes the data file. Usage: NativeWriterTest DIR
 */
public class NativeWriterTest {
    static int checks = 0;

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError(what);
    }

    static InputStream decoder(int codec, InputStream raw) throws IOException {
        if (codec == NativeShuffleWriter.CODEC_LZ4)
            return new LZ4BlockInputStream(raw, LZ4Factory.fastestInstance().fastDecompressor(),
                    XXHashFactory.fastestInstance().newStreamingHash32(0x9747B28C).asChecksum(), false);
        if (codec == NativeShuffleWriter.CODEC_ZSTD) return new ZstdInputStreamNoFinalizer(raw);
        return raw;
    }

    interface Call {
        void run() throws Exception;
    }

    /** The call must throw IllegalArgumentException whose message contains want. */
    static void rejects(String what, String want, Call c) throws Exception {
        try {
            c.run();
            check(false, what + ": no exception");
        } catch (IllegalArgumentException e) {
            check(e.getMessage() != null && e.getMessage().contains(want), what + ": message '" + e.getMessage() + "'");
        }
    }

    /**
     * Malformed buffers and arrays from the JVM side: each is an
     * IllegalArgumentException with a message, never a crash; a rejected call
     * leaves the writer usable (what it wrote before is committed intact).
     */
    static void malformed(Path dir) throws Exception {
        int n = 8;
        rejects("negative partitions", "num_partitions", () ->
                new NativeShuffleWriter(dir.resolve("m0.data").toString(), -3, 1, 1, 32768, 1, 1, 1 << 20, 0, false));
        rejects("negative budget", "maxBytesInFlight", () ->
                new NativeShuffleWriter(dir.resolve("m0.data").toString(), n, 1, 1, 32768, 1, 1, -1, 0, false));
        rejects("unknown codec", "codec", () ->
                new NativeShuffleWriter(dir.resolve("m0.data").toString(), n, 7, 1, 32768, 1, 1, 1 << 20, 0, false));
        Path data = dir.resolve("malformed.data");
        try (NativeShuffleWriter w = new NativeShuffleWriter(data.toString(), n, NativeShuffleWriter.CODEC_LZ4, 1, 32768,
                NativeShuffleWriter.CHECKSUM_ADLER32, 2, 1 << 20, 0, false)) {
            ByteBuffer good = ByteBuffer.allocateDirect(64);
            good.putInt(3).putInt(4).put(new byte[] {9, 8, 7, 6});
            w.writeTagged(good, good.position());
            ByteBuffer heap = ByteBuffer.allocate(64);
            rejects("heap buffer", "direct", () -> w.writeTagged(heap, 8));
            rejects("null buffer", "direct", () -> w.writeTagged(null, 0));
            ByteBuffer b = ByteBuffer.allocateDirect(32);
            rejects("length past capacity", "capacity", () -> w.writeTagged(b, 33));
            rejects("negative length", "capacity", () -> w.writeTagged(b, -1));
            ByteBuffer batch = ByteBuffer.allocateDirect(100);
            rejects("offsets too short", "offsets", () -> w.addBatch(batch, new long[n]));
            rejects("offsets too long", "offsets", () -> w.addBatch(batch, new long[n + 2]));
            rejects("null offsets", "offsets", () -> w.addBatch(batch, null));
            long[] neg = new long[n + 1];
            neg[3] = -5;
            rejects("negative offset", "offsets[3]", () -> w.addBatch(batch, neg));
            long[] past = new long[n + 1];
            Arrays.fill(past, 1, n + 1, 101);
            rejects("offset past the buffer", "capacity", () -> w.addBatch(batch, past));
            long[] down = new long[n + 1];
            Arrays.fill(down, 1, n + 1, 50);
            down[4] = 10;
            rejects("decreasing offsets", "offsets", () -> w.addBatch(batch, down));
            long[] first = new long[n + 1];
            Arrays.fill(first, 7);
            rejects("offsets[0] not 0", "offsets[0]", () -> w.addBatch(batch, first));
            rejects("checksums array too short", "checksums", () -> w.finish(new long[n - 1]));
            long[] sums = new long[n];
            long[] lengths = w.finish(sums);
            check(lengths.length == n && lengths[3] > 0 && Files.size(data) == Arrays.stream(lengths).sum(),
                    "the writer still commits what came before the bad calls");
            byte[] got = decoder(NativeShuffleWriter.CODEC_LZ4,
                    new ByteArrayInputStream(Files.readAllBytes(data), (int) (lengths[0] + lengths[1] + lengths[2]),
                            (int) lengths[3])).readAllBytes();
            check(Arrays.equals(got, new byte[] {9, 8, 7, 6}), "partition 3 intact");
        }
        Files.deleteIfExists(data);
        /* A tagged buffer whose records are malformed fails its writer at the
         * bad header (records are taken as their headers are checked): an
         * IllegalArgumentException naming the offset, then every call fails
         * and closing leaves nothing behind. */
        String[][] cases = {{"header cut off", "cut off"}, {"record longer than the buffer", "claims"},
                {"negative record length", "claims"}, {"negative partition", "out of range"},
                {"partition == numPartitions", "out of range"}};
        for (int k = 0; k < cases.length; k++) {
            Path d = dir.resolve("malformed-tagged.data");
            try (NativeShuffleWriter w = new NativeShuffleWriter(d.toString(), n, NativeShuffleWriter.CODEC_LZ4, 1,
                    32768, NativeShuffleWriter.CHECKSUM_ADLER32, 2, 1 << 20, 0, false)) {
                ByteBuffer b = ByteBuffer.allocateDirect(64);
                b.putInt(3).putInt(4).put(new byte[] {9, 8, 7, 6}); /* a good record first, at offset 0 */
                switch (k) {
                case 0: b.putInt(1).put((byte) 0); break;
                case 1: b.putInt(1).putInt(1000).put(new byte[4]); break;
                case 2: b.putInt(1).putInt(-2).put(new byte[4]); break;
                case 3: b.putInt(-1).putInt(1).put((byte) 1); break;
                default: b.putInt(n).putInt(1).put((byte) 1); break;
                }
                int len = b.position();
                rejects(cases[k][0], cases[k][1], () -> w.writeTagged(b, len));
                rejects(cases[k][0] + " (the message)", "offset 12", () -> w.writeTagged(b, len));
                boolean failed = false;
                try {
                    w.finish(new long[n]);
                } catch (IllegalArgumentException | IOException e) {
                    failed = true;
                }
                check(failed, cases[k][0] + ": the writer still finished");
            }
            check(!Files.exists(d), cases[k][0] + ": the failed writer left its data file");
        }
        System.out.println("malformed input: every call rejected with IllegalArgumentException; a malformed tagged"
                + " buffer fails its writer");
    }

    /** Random records into one writer; returns what each partition must decode to. */
    static byte[][] fill(NativeShuffleWriter w, int n, long seed, int rounds) throws IOException {
        Random r = new Random(seed);
        ByteArrayOutputStream[] want = new ByteArrayOutputStream[n];
        for (int p = 0; p < n; p++) want[p] = new ByteArrayOutputStream();
        ByteBuffer buf = ByteBuffer.allocateDirect(1 << 18);
        for (int round = 0; round < rounds; round++) {
            buf.clear();
            while (buf.remaining() > 2000) {
                int p = r.nextInt(n), len = r.nextInt(400);
                byte[] rec = new byte[len];
                for (int i = 0; i < len; i++) rec[i] = (byte) (seed + p + i / 5);
                buf.putInt(p).putInt(len).put(rec);
                want[p].write(rec);
            }
            w.writeTagged(buf, buf.position());
        }
        byte[][] out = new byte[n][];
        for (int p = 0; p < n; p++) out[p] = want[p].toByteArray();
        return out;
    }

    static void verify(Path data, long[] lengths, long[] sums, byte[][] want) throws IOException {
        byte[] bytes = Files.readAllBytes(data);
        long off = 0;
        for (int p = 0; p < want.length; p++) {
            Adler32 a = new Adler32();
            a.update(bytes, (int) off, (int) lengths[p]);
            check(a.getValue() == sums[p], data + ": checksum of partition " + p);
            byte[] got = decoder(NativeShuffleWriter.CODEC_LZ4,
                    new ByteArrayInputStream(bytes, (int) off, (int) lengths[p])).readAllBytes();
            check(Arrays.equals(got, want[p]), data + ": partition " + p + " decodes to what went in");
            off += lengths[p];
        }
        check(off == bytes.length, data + ": lengths add up to the data file");
    }

    /**
     * One engine shared by writers on several threads, as in an executor: every output right, the
     * budget never exceeded, no client left at the end; the engine closed while a writer still runs
     * keeps serving it; bad engine arguments are rejected.
     */
    static void sharedEngine(Path dir) throws Exception {
        rejects("engine with 0 threads", "threads", () -> new NativeEngine(0, 1 << 20));
        rejects("engine with a tiny budget", "maxBytesInFlight", () -> new NativeEngine(2, 1000));
        int n = 40, writers = 6;
        NativeEngine e = new NativeEngine(2, 2 << 20);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < writers; t++) {
            final int id = t;
            threads.add(new Thread(() -> {
                Path data = dir.resolve("shared_" + id + ".data");
                try (NativeShuffleWriter w = new NativeShuffleWriter(e, data.toString(), n, NativeShuffleWriter.CODEC_LZ4,
                        1, 32768, NativeShuffleWriter.CHECKSUM_ADLER32, NativeShuffleWriter.STRATEGY_STREAMING, false)) {
                    byte[][] want = fill(w, n, id, 12);
                    long[] sums = new long[n];
                    long[] lengths = w.finish(sums);
                    verify(data, lengths, sums, want);
                    long[] ws = w.stats();
                    check(ws.length == 10 && ws[1] == Files.size(data) && ws[9] <= ws[1] && (ws[7] == 0 || ws[9] > 0),
                          "stats: bytes out is the file's size, what was spilled was merged into it: " + Arrays.toString(ws));
                    Files.delete(data);
                } catch (Throwable x) {
                    errors.add(x);
                }
            }));
        }
        for (Thread t : threads) t.start();
        for (Thread t : threads) t.join();
        if (!errors.isEmpty()) throw new AssertionError("a writer on the shared engine failed", errors.get(0));
        long[] st = e.stats();
        check(st[0] == 2 && st[2] == 0, "engine: 2 threads, no client left: " + Arrays.toString(st));
        check(st[6] > 0 && st[6] <= st[7] && st[7] == (2 << 20), "engine: peak held within the budget: " + Arrays.toString(st));
        check(st[3] > writers, "engine: its workers ran the jobs of every writer: " + Arrays.toString(st));
        /* closed while a writer runs: that writer still completes */
        Path data = dir.resolve("outlives.data");
        try (NativeShuffleWriter w = new NativeShuffleWriter(e, data.toString(), n, NativeShuffleWriter.CODEC_LZ4, 1,
                32768, NativeShuffleWriter.CHECKSUM_ADLER32, NativeShuffleWriter.STRATEGY_STREAMING, false)) {
            e.close();
            byte[][] want = fill(w, n, 99, 6);
            long[] sums = new long[n];
            verify(data, w.finish(sums), sums, want);
        }
        Files.delete(data);
        try {
            e.stats();
            check(false, "stats of a closed engine must throw");
        } catch (IllegalStateException x) {
            check(true, "closed engine");
        }
        System.out.println("shared engine: " + writers + " writers on 2 threads and a 2 MiB budget, ok");
        slots(dir);
    }

    /**
     * An engine sized for 8 task slots: 8 writers of unsorted records, opened one after another on
     * one thread and all holding their records before any finishes, fit its 16 MiB budget together
     * (sized for the writers on the engine as each is created, the sixth would wait for the budget
     * that only the others' finish gives back: here, for ever).
     */
    static void slots(Path dir) throws Exception {
        rejects("engine with negative slots", "writersAtOnce", () -> new NativeEngine(2, 1 << 20, -1));
        int n = 20, writers = 8;
        NativeEngine e = new NativeEngine(2, 16 << 20, writers);
        check(e.writersAtOnce() == writers, "engine: writers sized for its slots");
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        Thread t = new Thread(() -> {
            List<NativeShuffleWriter> ws = new ArrayList<>();
            try {
                List<byte[][]> want = new ArrayList<>();
                for (int k = 0; k < writers; k++) {
                    ws.add(new NativeShuffleWriter(e, dir.resolve("slot_" + k + ".data").toString(), n,
                            NativeShuffleWriter.CODEC_LZ4, 1, 32768, NativeShuffleWriter.CHECKSUM_ADLER32,
                            NativeShuffleWriter.STRATEGY_STREAMING, false));
                    want.add(fill(ws.get(k), n, 200 + k, 1));
                }
                for (int k = 0; k < writers; k++) {
                    long[] sums = new long[n];
                    Path data = dir.resolve("slot_" + k + ".data");
                    verify(data, ws.get(k).finish(sums), sums, want.get(k));
                    Files.delete(data);
                }
            } catch (Throwable x) {
                errors.add(x);
            } finally {
                for (NativeShuffleWriter w : ws) w.close();
            }
        });
        t.setDaemon(true);
        t.start();
        t.join(120_000);
        check(!t.isAlive(), "8 writers sized for 8 slots hold their records at once (one waits for the budget)");
        if (!errors.isEmpty()) throw new AssertionError("a writer sized for the engine's slots failed", errors.get(0));
        long[] st = e.stats();
        check(st[6] <= (16 << 20) && st[2] == 0, "engine: peak held within the budget: " + Arrays.toString(st));
        e.close();
        System.out.println("engine slots: " + writers + " writers of unsorted records on a 16 MiB budget at once, ok");
    }

    /**
     * The reduce side: every partition of a written data file handed to a NativeBlockReader as a
     * block (a few ahead of what is read, as the Spark reader does), decoded on a shared engine to
     * what went in, each piece tagged with its block; block buffers come back once read; a block
     * with a flipped byte fails naming it, and the reader serves the next read.
     */
    static void blockReader(Path dir) throws Exception {
        int n = 30;
        NativeEngine e = new NativeEngine(2, 4 << 20);
        Path data = dir.resolve("blocks.data");
        for (int codec : new int[] {NativeShuffleWriter.CODEC_LZ4, NativeShuffleWriter.CODEC_ZSTD}) {
            byte[][] want;
            long[] lengths;
            try (NativeShuffleWriter w = new NativeShuffleWriter(e, data.toString(), n, codec, 1, 32768,
                    NativeShuffleWriter.CHECKSUM_ADLER32, NativeShuffleWriter.STRATEGY_STREAMING, false)) {
                want = fill(w, n, 5, 10);
                lengths = w.finish(new long[n]);
            }
            byte[] bytes = Files.readAllBytes(data);
            rejects("block reader without a codec", "codec", () -> new NativeBlockReader(e, 7, 65536));
            try (NativeBlockReader r = new NativeBlockReader(e, codec, 16384)) {
                ByteArrayOutputStream[] got = new ByteArrayOutputStream[n];
                int added = 0, returned = 0;
                long off = 0;
                for (int p = 0; p < n; p++) got[p] = new ByteArrayOutputStream();
                while (true) {
                    while (added < n && added < returned + 4 + 3) { /* a few blocks ahead */
                        ByteBuffer b = ByteBuffer.allocateDirect((int) Math.max(1, lengths[added]));
                        b.put(bytes, (int) off, (int) lengths[added]);
                        r.add(b, (int) lengths[added], added);
                        off += lengths[added++];
                    }
                    ByteBuffer piece = r.next();
                    while (r.takeReleased() != null) returned++;
                    if (piece == null) {
                        if (added == n) break;
                        continue;
                    }
                    check(r.tag() >= 0 && r.tag() < added, "piece tagged with a block handed over: " + r.tag());
                    byte[] chunk = new byte[piece.remaining()];
                    piece.get(chunk);
                    got[r.tag()].write(chunk);
                }
                while (r.takeReleased() != null) returned++;
                check(returned == n, "every block buffer came back: " + returned);
                for (int p = 0; p < n; p++)
                    check(Arrays.equals(got[p].toByteArray(), want[p]), "block " + p + " decodes to what went in");
                int p = 0;
                while (lengths[p] < 64) p++;
                long at = 0;
                for (int i = 0; i < p; i++) at += lengths[i];
                ByteBuffer bad = ByteBuffer.allocateDirect((int) lengths[p]);
                bad.put(bytes, (int) at, (int) lengths[p]);
                bad.put((int) lengths[p] / 2, (byte) (bad.get((int) lengths[p] / 2) ^ 0x5a));
                r.add(bad, (int) lengths[p], 41);
                try {
                    while (r.next() != null) {}
                    /* lz4-java blocks carry a checksum; Spark's zstd frames do not, so a flipped
                     * literal may decode */
                    check(codec == NativeShuffleWriter.CODEC_ZSTD, "a corrupt lz4 block must fail");
                } catch (IOException x) {
                    check(x.getMessage().contains("block 41"), "the failure names the block: " + x.getMessage());
                }
                check(r.takeReleased() == bad, "the corrupt block's buffer came back");
                ByteBuffer good = ByteBuffer.allocateDirect((int) lengths[p]);
                good.put(bytes, (int) at, (int) lengths[p]);
                r.add(good, (int) lengths[p], 42);
                ByteArrayOutputStream again = new ByteArrayOutputStream();
                for (ByteBuffer piece; (piece = r.next()) != null; ) {
                    byte[] chunk = new byte[piece.remaining()];
                    piece.get(chunk);
                    again.write(chunk);
                }
                check(Arrays.equals(again.toByteArray(), want[p]), "the next read after a failure");
                long[] st = r.stats();
                check(st[4] > 0 && st[4] <= (4 << 20), "block reader: peak held within the budget: " + Arrays.toString(st));
            }
            Files.delete(data);
        }
        e.close();
        System.out.println("block reader: " + n + " blocks per codec decoded on a shared engine, corrupt block named, ok");
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        int n = 50;
        Random r = new Random(11);
        for (int codec : new int[] {NativeShuffleWriter.CODEC_LZ4, NativeShuffleWriter.CODEC_ZSTD, NativeShuffleWriter.CODEC_NONE}) {
            for (int strategy : new int[] {NativeShuffleWriter.STRATEGY_STREAMING, NativeShuffleWriter.STRATEGY_BASELINE}) {
                Path data = dir.resolve("shuffle_0_" + (codec * 2 + strategy) + "_0.data.tmp");
                ByteArrayOutputStream[] want = new ByteArrayOutputStream[n];
                for (int p = 0; p < n; p++) want[p] = new ByteArrayOutputStream();
                long[] lengths, sums = new long[n];
                try (NativeShuffleWriter w = new NativeShuffleWriter(data.toString(), n, codec, 1, 32 * 1024,
                        NativeShuffleWriter.CHECKSUM_ADLER32, 2, 1 << 20, strategy, false)) {
                    ByteBuffer buf = ByteBuffer.allocateDirect(1 << 20);
                    for (int round = 0; round < 8; round++) {
                        buf.clear();
                        while (buf.remaining() > 2000) { /* records in random partition order */
                            int p = r.nextInt(n), len = r.nextInt(r.nextInt(10) == 0 ? 1500 : 100);
                            byte[] rec = new byte[len];
                            for (int i = 0; i < len; i++) rec[i] = (byte) (p + i / 7);
                            buf.putInt(p).putInt(len).put(rec);
                            want[p].write(rec);
                        }
                        w.writeTagged(buf, buf.position());
                    }
                    /* a batch grouped by partition, as a columnar engine hands it over */
                    long[] offs = new long[n + 1];
                    buf.clear();
                    for (int p = 0; p < n; p++) {
                        byte[] rec = new byte[r.nextInt(3000)];
                        Arrays.fill(rec, (byte) p);
                        buf.put(rec);
                        want[p].write(rec);
                        offs[p + 1] = buf.position();
                    }
                    w.addBatch(buf, offs);
                    lengths = w.finish(sums);
                    long[] st = w.stats();
                    check(st[0] > 0 && st[1] == Files.size(data), "stats: bytes in and out");
                }
                byte[] bytes = Files.readAllBytes(data);
                long off = 0;
                for (int p = 0; p < n; p++) {
                    Adler32 a = new Adler32();
                    a.update(bytes, (int) off, (int) lengths[p]);
                    check(a.getValue() == sums[p], "checksum of partition " + p);
                    byte[] got = decoder(codec, new ByteArrayInputStream(bytes, (int) off, (int) lengths[p])).readAllBytes();
                    check(Arrays.equals(got, want[p].toByteArray()), "partition " + p + " decodes to what went in");
                    off += lengths[p];
                }
                check(off == bytes.length, "lengths add up to the data file");
                System.out.println("codec " + codec + ", strategy " + strategy + ": " + n + " partitions, "
                        + bytes.length + " bytes, ok");
                Files.delete(data);
            }
        }
        /* abort: the data file is gone */
        Path data = dir.resolve("aborted.data");
        try (NativeShuffleWriter w = new NativeShuffleWriter(data.toString(), 4, 1, 1, 32768, 1, 1, 1 << 20, 0, false)) {
            ByteBuffer buf = ByteBuffer.allocateDirect(64);
            buf.putInt(2).putInt(3).put(new byte[] {1, 2, 3});
            w.writeTagged(buf, buf.position());
            w.abort();
        }
        check(!Files.exists(data), "abort removes the data file");
        try {
            new NativeShuffleWriter(dir.resolve("x.data").toString(), 0, 1, 1, 32768, 1, 1, 1 << 20, 0, false);
            check(false, "0 partitions must throw");
        } catch (IllegalArgumentException e) {
            check(e.getMessage().contains("num_partitions"), e.getMessage());
        }
        malformed(dir);
        sharedEngine(dir);
        blockReader(dir);
        String from = NativeLibrary.loadedFrom();
        if (args.length > 1) check(from.startsWith(args[1]), "native library from " + from + ", expected " + args[1]);
        if (from.startsWith("jar:")) { /* extracted: gone already, so that a killed JVM leaves nothing */
            int at = from.indexOf("extracted to ");
            check(at > 0, "the extraction directory is named: " + from);
            String tmp = from.substring(at + 13).split("[,)]")[0];
            check(!Files.exists(Paths.get(tmp)), "the extraction directory " + tmp + " is removed once loaded");
        }
        System.out.println("native library: " + from);
        System.out.println("NativeWriterTest: " + checks + " checks passed");
    }
}

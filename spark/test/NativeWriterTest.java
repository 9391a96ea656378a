import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import java.util.zip.*;
import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;
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
                    try {
                        buf.clear();
                        buf.putInt(n + 3).putInt(1).put((byte) 1);
                        w.writeTagged(buf, buf.position());
                        check(false, "a partition out of range must throw");
                    } catch (IllegalArgumentException e) {
                        check(e.getMessage().contains("out of range"), "message: " + e.getMessage());
                    }
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
        System.out.println("NativeWriterTest: " + checks + " checks passed");
    }
}

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.*;
import java.nio.file.*;
import java.util.*;
import java.util.zip.*;
import com.github.luben.zstd.ZstdOutputStreamNoFinalizer;
import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4BlockOutputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;

/**
 * Reads mtshuffle's map outputs the way Spark does: index and checksum files
 * with DataInputStream, checksums with java.util.zip, partitions decoded with
 * lz4-java's LZ4BlockInputStream (stopOnEmptyBlock=false, as Spark 3.5/4.0
 * build it) and zstd-jni's ZstdInputStreamNoFinalizer. Every partition alone
 * and contiguous ranges of partitions (Spark's batch fetch) must decode to the
 * bytes the C generator put in. Usage: CompatTest DIR
 *
 * "CompatTest write DIR" does the reverse: it writes map outputs the way Spark
 * does (one LZ4BlockOutputStream or ZstdOutputStreamNoFinalizer per
 * partition, some partitions two streams back to back as after a spill merge,
 * index and checksum files through DataOutputStream) for the C reader.
 */
public class CompatTest {
    static int checks = 0, outputs = 0;

    static long[] readLongs(Path p) throws IOException {
        long size = Files.size(p);
        if (size % 8 != 0) throw new AssertionError(p + ": size " + size + " is not a multiple of 8");
        long[] v = new long[(int) (size / 8)];
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(p)))) {
            for (int i = 0; i < v.length; i++) v[i] = in.readLong();
        }
        return v;
    }

    static InputStream decoder(String codec, InputStream raw) throws IOException {
        switch (codec) {
            case "lz4":
                return new LZ4BlockInputStream(raw, LZ4Factory.fastestInstance().fastDecompressor(),
                        XXHashFactory.fastestInstance().newStreamingHash32(0x9747B28C).asChecksum(), false);
            case "zstd":
                return new BufferedInputStream(new ZstdInputStreamNoFinalizer(raw), 32 * 1024);
            default:
                return raw;
        }
    }

    static byte[] decode(String codec, byte[] data, long from, long to) throws IOException {
        InputStream in = decoder(codec, new ByteArrayInputStream(data, (int) from, (int) (to - from)));
        return in.readAllBytes();
    }

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError(what);
    }

    static String codecOf(byte[] data, long[] idx) {
        for (int p = 0; p + 1 < idx.length; p++) {
            if (idx[p + 1] > idx[p]) {
                int o = (int) idx[p];
                if (data.length - o >= 8 && new String(data, o, 8).equals("LZ4Block")) return "lz4";
                if ((data[o] & 0xff) == 0x28 && (data[o + 1] & 0xff) == 0xB5) return "zstd";
                return "none";
            }
        }
        return "none";
    }

    static OutputStream encoder(String codec, OutputStream out) throws IOException {
        if (codec.equals("lz4"))
            return new LZ4BlockOutputStream(out, 32 * 1024, LZ4Factory.fastestInstance().fastCompressor(),
                    XXHashFactory.fastestInstance().newStreamingHash32(0x9747B28C).asChecksum(), false);
        return new BufferedOutputStream(new ZstdOutputStreamNoFinalizer(out).setLevel(1), 32 * 1024);
    }

    static void writeLongs(Path p, long[] v) throws IOException {
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(p)))) {
            for (long x : v) out.writeLong(x);
        }
    }

    static void writeOutputs(Path dir) throws IOException {
        String[] codecs = {"lz4", "zstd"};
        Random r = new Random(7);
        for (int map = 0; map < 4; map++) {
            String codec = codecs[map % 2];
            int n = 13;
            ByteArrayOutputStream data = new ByteArrayOutputStream(), plain = new ByteArrayOutputStream();
            long[] idx = new long[n + 1], pidx = new long[n + 1], sums = new long[n];
            for (int p = 0; p < n; p++) {
                int streams = p % 5 == 4 ? 0 : p % 3 == 0 ? 2 : 1; /* some empty, some two streams */
                ByteArrayOutputStream part = new ByteArrayOutputStream();
                for (int k = 0; k < streams; k++) {
                    OutputStream enc = encoder(codec, part);
                    int records = 1 + r.nextInt(400);
                    for (int i = 0; i < records; i++) {
                        byte[] rec = new byte[r.nextInt(100) == 0 ? 70000 : r.nextInt(200)];
                        for (int b = 0; b < rec.length; b++) rec[b] = (byte) (b / 9 + p + i);
                        enc.write(rec);
                        plain.write(rec);
                    }
                    enc.close();
                }
                byte[] bytes = part.toByteArray();
                Adler32 a = new Adler32();
                a.update(bytes);
                sums[p] = a.getValue();
                data.write(bytes);
                idx[p + 1] = data.size();
                pidx[p + 1] = plain.size();
            }
            String base = dir + "/shuffle_2_" + map + "_0";
            Files.write(Paths.get(base + ".data"), data.toByteArray());
            writeLongs(Paths.get(base + ".index"), idx);
            writeLongs(Paths.get(base + ".checksum.ADLER32"), sums);
            Files.write(Paths.get(base + ".plain"), plain.toByteArray());
            writeLongs(Paths.get(base + ".plainindex"), pidx);
            System.out.println("wrote " + base + ": " + n + " partitions, " + codec + ", " + data.size() + " bytes");
        }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("write")) {
            writeOutputs(Paths.get(args[1]));
            return;
        }
        Path dir = Paths.get(args[0]);
        List<Path> indexes = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "shuffle_*_0.index")) {
            for (Path p : ds) indexes.add(p);
        }
        Collections.sort(indexes);
        check(!indexes.isEmpty(), "no outputs in " + dir);
        for (Path ip : indexes) {
            String base = ip.toString().substring(0, ip.toString().length() - ".index".length());
            long[] idx = readLongs(ip);
            byte[] data = Files.readAllBytes(Paths.get(base + ".data"));
            long[] pidx = readLongs(Paths.get(base + ".plainindex"));
            byte[] plain = Files.readAllBytes(Paths.get(base + ".plain"));
            int n = idx.length - 1;
            check(idx[0] == 0 && idx[n] == data.length, base + ": index does not span the data file");
            check(pidx.length == n + 1, base + ": partition count");
            String codec = codecOf(data, idx);
            String algo = null;
            for (String a : new String[] {"ADLER32", "CRC32", "CRC32C"})
                if (Files.exists(Paths.get(base + ".checksum." + a))) algo = a;
            check(algo != null, base + ": no checksum file");
            long[] sums = readLongs(Paths.get(base + ".checksum." + algo));
            check(sums.length == n, base + ": checksum file has " + sums.length + " values for " + n + " partitions");
            for (int p = 0; p < n; p++) {
                check(idx[p + 1] >= idx[p], base + ": index not monotonic at " + p);
                Checksum c = algo.equals("ADLER32") ? new Adler32() : algo.equals("CRC32") ? new CRC32() : new CRC32C();
                c.update(data, (int) idx[p], (int) (idx[p + 1] - idx[p]));
                check(c.getValue() == sums[p], base + ": partition " + p + " checksum " + sums[p] + " != " + c.getValue());
                byte[] got = decode(codec, data, idx[p], idx[p + 1]);
                byte[] want = Arrays.copyOfRange(plain, (int) pidx[p], (int) pidx[p + 1]);
                check(Arrays.equals(got, want), base + ": partition " + p + " decodes to " + got.length
                        + " bytes, expected " + want.length);
            }
            /* Batch fetch: contiguous partitions decoded as one stream. */
            Random r = new Random(n);
            for (int t = 0; t < 5; t++) {
                int a = r.nextInt(n), b = a + 1 + r.nextInt(n - a);
                byte[] got = decode(codec, data, idx[a], idx[b]);
                byte[] want = Arrays.copyOfRange(plain, (int) pidx[a], (int) pidx[b]);
                check(Arrays.equals(got, want), base + ": partitions [" + a + "," + b + ") as one stream");
            }
            outputs++;
            System.out.println(ip.getFileName() + ": " + n + " partitions, " + codec + ", " + algo + ", ok");
        }
        System.out.println("CompatTest: " + outputs + " outputs, " + checks + " checks passed");
    }
}

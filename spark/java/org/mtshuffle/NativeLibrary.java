package org.mtshuffle;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Loads libmtshuffle's JNI library once per JVM, from the first of:
 * <ol>
 * <li>the system property {@code mtshuffle.native.library}: a path to the library;</li>
 * <li>the jar: {@code org/mtshuffle/native/<os>-<arch>/}, whose files (the JNI library and the
 *     shared libraries it needs, found through its $ORIGIN run path) are extracted into a fresh
 *     directory and loaded from there; the directory is removed as soon as the load returns (the
 *     loaded libraries stay mapped), so that a JVM killed later, as executors are, leaves nothing
 *     behind. The directory is made under {@code mtshuffle.native.tmpdir} if that property is
 *     set, else under {@code java.io.tmpdir}; where nothing loads from there (a temporary
 *     directory mounted noexec, as hardened hosts do, refuses to map libraries), under the JVM's
 *     working directory (a Spark executor's is its work directory);</li>
 * <li>{@code java.library.path}: {@code System.loadLibrary("mtshuffle_jni")}.</li>
 * </ol>
 * A failure names every place tried.
 */
public final class NativeLibrary {
    /** The JNI library's file name, in the jar and on disk. */
    public static final String LIBRARY = "libmtshuffle_jni.so";
    /** The list of files under the platform's directory in the jar, one name per line. */
    public static final String MANIFEST = "files.txt";
    private static boolean loaded;
    private static String from;
    private static String failure; /* why the first load failed: every later one gives the same answer */

    private NativeLibrary() {}

    /** The platform directory's name in the jar, e.g. linux-x86_64. */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("amd64")) arch = "x86_64";
        if (arch.equals("arm64")) arch = "aarch64";
        return (os.startsWith("linux") ? "linux" : os.replace(' ', '_')) + "-" + arch;
    }

    /** Where the library was loaded from, or null before load(). */
    public static synchronized String loadedFrom() {
        return from;
    }

    /** Loads the library unless it is loaded; null then, else why it cannot be (the same answer every time,
     *  without trying again). */
    public static synchronized String tryLoad() {
        try {
            load();
            return null;
        } catch (UnsatisfiedLinkError e) {
            return e.getMessage();
        }
    }

    public static synchronized void load() {
        if (loaded) return;
        if (failure != null) throw new UnsatisfiedLinkError(failure);
        try {
            loadOnce();
        } catch (UnsatisfiedLinkError e) {
            failure = e.getMessage();
            throw e;
        }
    }

    private static void loadOnce() {
        List<String> tried = new ArrayList<>();
        String path = System.getProperty("mtshuffle.native.library");
        if (path != null) {
            System.load(path); /* an explicit choice: its failure is the answer */
            finish(path);
            return;
        }
        String dir = "org/mtshuffle/native/" + platform() + "/";
        for (String parent : extractionParents()) {
            Path tmp = null;
            try {
                tmp = Files.createTempDirectory(Paths.get(parent), "mtshuffle-native-");
                Path p = extract(dir, tmp);
                if (p == null) {
                    tried.add("the jar has no " + dir + MANIFEST);
                    break;
                }
                System.load(p.toString());
                finish("jar:" + dir + LIBRARY + " (extracted to " + tmp + ", removed after loading"
                        + (tried.isEmpty() ? "" : "; before that, " + String.join("; ", tried)) + ")");
                return;
            } catch (IOException | UnsatisfiedLinkError | InvalidPathException e) {
                tried.add("extracting " + dir + " under " + parent + ": " + e.getMessage());
            } finally {
                if (tmp != null) remove(tmp);
            }
        }
        if (tried.isEmpty()) tried.add("no directory to extract the jar's files into");
        try {
            System.loadLibrary("mtshuffle_jni");
            finish("java.library.path");
        } catch (UnsatisfiedLinkError e) {
            throw new UnsatisfiedLinkError("mtshuffle: cannot load its native library for " + platform() + ": "
                    + String.join("; ", tried) + "; java.library.path: " + e.getMessage()
                    + " (or set -Dmtshuffle.native.library=/path/to/" + LIBRARY + ")");
        }
    }

    /** Where the jar's files may be extracted, in the order tried: mtshuffle.native.tmpdir or
     *  java.io.tmpdir, then the working directory. */
    private static List<String> extractionParents() {
        List<String> dirs = new ArrayList<>();
        String first = System.getProperty("mtshuffle.native.tmpdir");
        if (first == null || first.isEmpty()) first = System.getProperty("java.io.tmpdir");
        for (String d : new String[] {first, System.getProperty("user.dir")}) {
            if (d == null || d.isEmpty()) continue;
            String abs;
            try {
                abs = Paths.get(d).toAbsolutePath().normalize().toString();
            } catch (InvalidPathException e) {
                abs = d; /* creating the directory under it fails, and says why */
            }
            if (!dirs.contains(abs)) dirs.add(abs);
        }
        return dirs;
    }

    private static void finish(String where) {
        loaded = true;
        from = where;
    }

    /** Copies the platform's files out of the jar into tmp; null if the jar has none. */
    private static Path extract(String dir, Path tmp) throws IOException {
        ClassLoader cl = NativeLibrary.class.getClassLoader();
        String[] names;
        try (InputStream in = cl.getResourceAsStream(dir + MANIFEST)) {
            if (in == null) return null;
            names = new String(in.readAllBytes(), "UTF-8").trim().split("\\s+");
        }
        Path lib = null;
        for (String name : names) {
            if (name.isEmpty() || name.contains("/")) throw new IOException("bad file name '" + name + "' in " + MANIFEST);
            Path out = tmp.resolve(name);
            try (InputStream in = cl.getResourceAsStream(dir + name)) {
                if (in == null) throw new IOException(dir + name + " is listed in " + MANIFEST + " but missing");
                Files.copy(in, out, StandardCopyOption.REPLACE_EXISTING);
            }
            if (name.equals(LIBRARY)) lib = out;
        }
        if (lib == null) throw new IOException(dir + MANIFEST + " does not list " + LIBRARY);
        return lib;
    }

    /** Removes the extraction directory and its files. What cannot be removed now (not expected on
     *  Linux, where a loaded library may be unlinked) is left to the JVM's exit: the directory
     *  registered first, so that its files, deleted in the reverse order, go before it. */
    private static void remove(Path tmp) {
        File[] files = tmp.toFile().listFiles();
        if (files == null) files = new File[0];
        boolean all = true;
        for (File f : files) all &= f.delete();
        if (all && tmp.toFile().delete()) return;
        tmp.toFile().deleteOnExit();
        for (File f : files) f.deleteOnExit();
    }
}

package org.mtshuffle;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;

/**
 * Decodes blocks of a shuffle's data (the stored bytes of one or more
 * partitions of one map output, as a reducer fetches them) on an engine's
 * threads, under its budget, and hands the decoded bytes out in the order the
 * blocks were added, piece by piece. The caller adds blocks ahead of what it
 * reads, so decoding runs on other cores while it deserialises.
 *
 * A block's buffer is the reader's until the reader has moved past it (its
 * last piece was read and the next call made), then it comes back through
 * {@link #takeReleased()}. Not thread-safe: one thread at a time, like a
 * Spark task.
 */
public final class NativeBlockReader implements AutoCloseable {
    static {
        NativeLibrary.load();
    }

    private long handle;
    private final int[] tagOut = new int[1];
    private int tag = -1;
    /* Blocks added, oldest first, with their tags; and those the reader is past. */
    private final ArrayDeque<ByteBuffer> held = new ArrayDeque<>();
    private final ArrayDeque<Integer> heldTags = new ArrayDeque<>();
    private final ArrayDeque<ByteBuffer> released = new ArrayDeque<>();

    /** codec: NativeShuffleWriter.CODEC_*; pieceSize: decoded bytes per piece (>= 4096). */
    public NativeBlockReader(NativeEngine engine, int codec, int pieceSize) throws IOException {
        handle = open(engine.handle(), codec, pieceSize);
    }

    /** Hands over bytes [0, length) of a direct buffer as the next block, called tag. */
    public void add(ByteBuffer block, int length, int tag) throws IOException {
        add(live(), block, length, tag);
        held.addLast(block);
        heldTags.addLast(tag);
    }

    /**
     * The next decoded piece (a direct buffer over native memory, valid until the
     * next call of next() or close(); add() leaves it alone), or null once every block added so far is decoded
     * and read. {@link #tag()} says whose block it is. A corrupt block fails with
     * an IOException naming it; blocks added after that start a fresh read.
     */
    public ByteBuffer next() throws IOException {
        ByteBuffer piece;
        try {
            piece = next(live(), tagOut);
        } catch (IOException | RuntimeException e) {
            releaseAll(); /* the read is over: nothing refers to the blocks any more */
            throw e;
        }
        if (piece == null) {
            releaseAll();
            tag = -1;
            return null;
        }
        tag = tagOut[0];
        while (!heldTags.isEmpty() && heldTags.peekFirst() != tag) { /* blocks before it are done */
            heldTags.removeFirst();
            released.addLast(held.removeFirst());
        }
        return piece;
    }

    /** The tag of the block the last piece came from; -1 after null. */
    public int tag() {
        return tag;
    }

    /** A block buffer the reader no longer needs, or null. */
    public ByteBuffer takeReleased() {
        return released.pollFirst();
    }

    private void releaseAll() {
        released.addAll(held);
        held.clear();
        heldTags.clear();
    }

    /**
     * bytes stored, bytes decoded, decode ns (all threads), ns next() waited, peak bytes held,
     * pieces next() decoded on the calling thread (no worker had started them).
     */
    public long[] stats() {
        return stats(live());
    }

    private long live() {
        if (handle == 0) throw new IllegalStateException("NativeBlockReader is closed");
        return handle;
    }

    /** Gives everything back (blocks being decoded are dropped); idempotent. */
    @Override
    public void close() {
        if (handle != 0) {
            free(handle);
            handle = 0;
        }
        releaseAll();
    }

    private static native long open(long engine, int codec, int pieceSize) throws IOException;
    private static native void add(long h, ByteBuffer block, int length, int tag) throws IOException;
    private static native ByteBuffer next(long h, int[] tag) throws IOException;
    private static native long[] stats(long h);
    private static native void free(long h);
}

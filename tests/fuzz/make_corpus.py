#!/usr/bin/env python3
"""Builds the committed seed corpus of the fuzz targets from real outputs:
small map outputs written by `mtshuffle write` (every codec and checksum),
packed in the format of fuzz_common.h; and a few writer call sequences.
    tests/fuzz/make_corpus.py build/mtshuffle"""
import os, struct, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
mts = sys.argv[1]
codec_bits = {"lz4": 1, "zstd": 2, "none": 3}
algo_bits = {"ADLER32": 0, "CRC32": 1, "CRC32C": 2}
for target in ("reader", "inspect", "writer"):
    os.makedirs(os.path.join(here, "corpus", target), exist_ok=True)
k = 0
with tempfile.TemporaryDirectory() as tmp:
    for codec in ("lz4", "zstd", "none"):
        for algo in ("ADLER32", "CRC32", "CRC32C"):
            for parts in (1, 3, 7):
                d = os.path.join(tmp, "%s-%s-%d" % (codec, algo, parts))
                subprocess.run([mts, "write", "--dir", d, "--tasks", "1", "--task-mib", "0.004", "--partitions",
                                str(parts), "--codec", codec, "--checksum", algo, "--block-kib", "0.0625",
                                "--batches", "2", "--no-progress", "--seed", str(k)], check=True, capture_output=True)
                base = os.path.join(d, "shuffle_0_0_0")
                idx = open(base + ".index", "rb").read()
                data = open(base + ".data", "rb").read()
                sums = open(base + ".checksum." + algo, "rb").read()
                flags = codec_bits[codec] | (algo_bits[algo] << 3) | (0x80 if parts == 3 else 0)
                blob = bytes([flags]) + struct.pack("<I", len(idx)) + idx + struct.pack("<I", len(data)) + data + sums
                for target in ("reader", "inspect"):
                    with open(os.path.join(here, "corpus", target, "%s-%s-%d" % (codec, algo, parts)), "wb") as f:
                        f.write(blob)
                k += 1
# writer: options bytes, then (op, arg, payload) steps
seqs = {
    "sorted": bytes([7, 0, 0x12, 3]) + b"".join(bytes([0, p * 6 + 1]) + bytes(range(p * 6 + 1 & 63)) for p in range(6)),
    "batches": bytes([12, 1, 0x21, 5]) + (bytes([3, 40]) + bytes(range(40))) * 3,
    "unsorted": bytes([30, 2, 0x30, 2]) + b"".join(bytes([1, (p * 37) % 250]) + b"x" * ((p * 37) % 250 % 64) for p in range(40)),
    "big": bytes([3, 9, 0x00, 1]) + bytes([5, 40, 0, 2]) + b"ab",
    "abort": bytes([5, 0, 0, 0]) + bytes([0, 3]) + b"abc" + bytes([7, 0]),
    "baseline": bytes([9, 4 | 8, 0x11, 4]) + (bytes([2, 20]) + b"y" * 20 + bytes([4, 1])) * 5,
}
for name, blob in seqs.items():
    with open(os.path.join(here, "corpus", "writer", name), "wb") as f:
        f.write(blob)
print("corpus: %d outputs for reader and inspect, %d writer sequences" % (k, len(seqs)))

#!/usr/bin/env python3
"""Fetches zstd's source for the plugin jar's native library (CMake's
MTS_ZSTD_SOURCE_DIR): Debian's upstream tarball of the zstd that Debian 12
ships, checked against its SHA-256, unpacked under DEST. Prints the source
directory. Built into the JNI library as position-independent code, it spares
the jar Debian's libzstd.so.1, which needs glibc 2.34 (README, "Spark plugin").

    fetch_zstd.py DEST
"""
import hashlib, os, shutil, sys, tarfile, tempfile, urllib.request

VERSION = "1.5.4"
URL = "http://deb.debian.org/debian/pool/main/libz/libzstd/libzstd_1.5.4+dfsg2.orig.tar.xz"
SHA256 = "8cf4bbb65e77ec348d052c8d6230eba66d435bddf64c8b5be2fcb16880c19953"


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    dest = os.path.abspath(sys.argv[1])
    src = os.path.join(dest, "zstd-" + VERSION)
    if os.path.isfile(os.path.join(src, "lib", "zstd.h")) and os.path.isfile(os.path.join(src, ".mts-sha256")):
        print(src)
        return
    os.makedirs(dest, exist_ok=True)
    try:
        with urllib.request.urlopen(URL, timeout=60) as r:
            data = r.read()
    except OSError as e:
        raise SystemExit("fetch_zstd: cannot download %s: %s" % (URL, e))
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256:
        raise SystemExit("fetch_zstd: %s has SHA-256 %s, expected %s" % (URL, got, SHA256))
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        path = os.path.join(tmp, "zstd.tar.xz")
        with open(path, "wb") as f:
            f.write(data)
        with tarfile.open(path) as t:
            top = "zstd-%s/" % VERSION
            members = [m for m in t.getmembers() if m.name.startswith(top + "lib/") and (m.isfile() or m.isdir())]
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            t.extractall(tmp, members=members, **safe)
        with open(os.path.join(tmp, top, ".mts-sha256"), "w") as f:
            f.write(SHA256 + "\n")
        if os.path.isdir(src):
            shutil.rmtree(src)
        os.rename(os.path.join(tmp, top), src)
    print(src)


if __name__ == "__main__":
    main()

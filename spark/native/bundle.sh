#!/usr/bin/env bash
# Completes the plugin jar's native directory around the JNI library LIB: the
# shared libraries it needs beyond the C library are copied next to it (it
# finds them through its $ORIGIN run path) and files.txt lists what
# org.mtshuffle.NativeLibrary extracts. Usage: bundle.sh LIB
set -euo pipefail
lib=$(realpath "$1")
dir=$(dirname "$lib")
names=$(basename "$lib")
# glibc's own libraries stay the system's: they must match the JVM's.
while read -r name _ path _; do
  case "$name" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*) continue ;;
  esac
  [ -f "$path" ] || { echo "bundle.sh: $name of $lib not found" >&2; exit 1; }
  [ "$(dirname "$(realpath "$path")")" = "$dir" ] || cp -L "$path" "$dir/$name"
  names="$names $name"
done < <(ldd "$lib" | grep '=>')
printf '%s\n' $names > "$dir/files.txt"
# A library an earlier build carried and this one does not need goes, so that the jar holds only what it lists.
for f in "$dir"/*; do
  base=$(basename "$f")
  [ "$base" = files.txt ] || [[ " $names " == *" $base "* ]] || rm -f "$f"
done

#!/usr/bin/env bash
# The plugin jar's native directory loads on glibc FLOOR (default 2.17) and
# later: no library listed in its files.txt asks for a newer glibc symbol
# version, and none of them is one that glibc itself provides. Exit 77 where
# the directory was built without zstd's source (MTS_ZSTD_SOURCE_DIR), so
# that it carries Debian's libzstd.so.1 and needs glibc 2.34: then it cannot
# meet the floor, and says why. Usage: check_jar_glibc.sh DIR [FLOOR]
set -euo pipefail
dir=$1
floor=${2:-2.17}
command -v objdump >/dev/null || { echo "objdump not found (binutils)"; exit 77; }
[ -f "$dir/files.txt" ] || { echo "no files.txt in $dir"; exit 1; }
if grep -qx 'libzstd.so.1' "$dir/files.txt"; then
  echo "SKIP: $dir carries Debian's libzstd.so.1 (built without MTS_ZSTD_SOURCE_DIR), which needs glibc 2.34"
  exit 77
fi
bad=0
while read -r name; do
  [ -n "$name" ] || continue
  case "$name" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) echo "$name is glibc's own: it must not be carried"; bad=1 ;;
  esac
  newest=$(objdump -T "$dir/$name" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ -n "$newest" ] && [ "$(printf '%s\n%s\n' "$newest" "$floor" | sort -V | tail -1)" != "$floor" ]; then
    echo "$name needs glibc $newest (above $floor) for:"
    objdump -T "$dir/$name" | grep -E "GLIBC_${newest//./\\.}([) ]|\$)" | sed 's/^/  /'
    bad=1
  else
    echo "$name: newest glibc symbol version ${newest:-none} (floor $floor)"
  fi
done < "$dir/files.txt"
exit $bad

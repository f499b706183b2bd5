#!/usr/bin/env bash
# Checks that a wheel runs on a machine without packoracle's build dependencies: every ELF file in it (the
# extension packoracle._core, the `packoracle` command) may need only libraries of the manylinux set (glibc's
# libc, libm, libpthread, libdl, librt and its loader; libstdc++; libgcc_s), never one that only the -dev
# packages or their runtime packages bring (as libsimdjson.so did: third_party/simdjson/README.md).
# Usage: scripts/wheel_check.sh WHEEL   (exit 0 when every NEEDED entry is allowed; each file's list printed)
set -euo pipefail
wheel=${1:?usage: $0 WHEEL}
allowed='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 -m zipfile -e "$wheel" "$dir"
status=0
elves=0
while IFS= read -r -d '' file; do
  [ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  elves=$((elves + 1))
  needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "wheel_check: ${file#"$dir"/} needs: $(echo $needed)"
  for library in $needed; do
    if ! [[ $library =~ $allowed ]]; then
      echo "wheel_check: ${file#"$dir"/} needs $library, outside the manylinux set" >&2
      status=1
    fi
  done
done < <(find "$dir" -type f -print0)
if ((elves == 0)); then
  echo "wheel_check: no ELF file in $wheel (no extension module?)" >&2
  exit 1
fi
exit $status

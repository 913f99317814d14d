#!/usr/bin/env bash
# ccvm's compressed RAM filesystem against tmpfs on the same tree: memory
# used, and the time to copy the tree in and to read it all back.
# Usage: bench/ramfs/compare.sh [TREE] [CODEC]    (as root; default /usr/include, lz4)
set -euo pipefail
tree=${1:-/usr/include}
codec=${2:-lz4}
cd "$(dirname "$0")/../.."
cargo build --release -q
ccvm=target/release/ccvm
t=$(mktemp -d /tmp/ccvm-tmpfs.XXXX)
c=$(mktemp -d /tmp/ccvm-ramfs.XXXX)
log=$(mktemp)
cleanup() { umount "$t" 2>/dev/null || true; umount "$c" 2>/dev/null || true; rmdir "$t" "$c"; rm -f "$log"; }
trap cleanup EXIT
mount -t tmpfs -o size=2G tmpfs "$t"
"$ccvm" mount "$c" --size 2G --codec "$codec" 2>"$log" &
while ! grep -q " $c fuse" /proc/mounts; do sleep 0.05; done
now() { date +%s.%N; }
for dir in "$t" "$c"; do
  a=$(now); cp -r "$tree" "$dir/"; b=$(now)
  sync; echo 3 > /proc/sys/vm/drop_caches
  c0=$(now); tar cf - -C "$dir" . | wc -c > /dev/null; d=$(now)
  printf '%-6s copy in %6.2f s, read back %6.2f s\n' "$([ "$dir" = "$t" ] && echo tmpfs || echo ccvm)" \
    "$(awk "BEGIN{print $b - $a}")" "$(awk "BEGIN{print $d - $c0}")"
done
echo "tmpfs: $(df -B1 --output=used "$t" | tail -1 | tr -d ' ') bytes of memory (df)"
umount "$c"; wait
tail -1 "$log"

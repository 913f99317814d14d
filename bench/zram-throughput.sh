#!/usr/bin/env bash
# The kernel's side of `ccvm bench store --threads N`: the corpus pages
# written to a zram device with 4 KiB O_DIRECT writes, then read back the
# same way, one stream (dd), ROUNDS rounds, megabytes (10^6 bytes) per
# second of each phase printed per round. Needs root; resets /dev/zram0
# before and after (leave nothing else using it).
#
#   bench/zram-throughput.sh [ALGORITHM]     (default lzo-rle; e.g. lz4)
set -euo pipefail
alg=${1:-lzo-rle}
ROUNDS=${ROUNDS:-5}
cd "$(dirname "$0")/.."
pages=$(mktemp /tmp/ccvm-zram-pages.XXXXXX)
trap 'rm -f "$pages"; echo 1 > /sys/block/zram0/reset' EXIT
for f in corpus/pages/*.pages.zst; do zstd -dcq "$f"; done > "$pages"
bytes=$(stat -c %s "$pages")
rate() { python3 -c "import sys; print(f'{$bytes / 1e6 / float(sys.argv[1]):.0f}')" "$1"; }
for r in $(seq "$ROUNDS"); do
  echo 1 > /sys/block/zram0/reset
  echo "$alg" > /sys/block/zram0/comp_algorithm
  echo $((bytes * 2)) > /sys/block/zram0/disksize
  t0=$(date +%s.%N); dd if="$pages" of=/dev/zram0 bs=4096 oflag=direct status=none; t1=$(date +%s.%N)
  dd if=/dev/zram0 of=/dev/null bs=4096 count=$((bytes / 4096)) iflag=direct status=none; t2=$(date +%s.%N)
  w=$(python3 -c "print($t1 - $t0)"); rd=$(python3 -c "print($t2 - $t1)")
  echo "round $r: $alg write $(rate "$w") MB/s, read $(rate "$rd") MB/s ($(awk '{print $1, $2}' /sys/block/zram0/mm_stat) orig/compr bytes)"
done

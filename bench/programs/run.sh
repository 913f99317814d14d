#!/usr/bin/env bash
# Runs real programs through `ccvm exec` at 50% and 25% of their heap and
# checks that each prints or writes exactly what it does unpaged.
#
#   bench/programs/run.sh [CCVM] [PROGRAM...]
#
# CCVM is the ccvm binary (default target/release/ccvm); PROGRAMs are any of
# gnuplot ghostscript gcc python sqlite (default: all). Inputs are generated
# into $WORK (default /tmp/ccvm-programs). Install the programs first with
# bench/programs/install.sh. Prints one line per run:
#   program heap_MiB unpaged_s ram_MiB policy wall_s slowdown cache_faults disk_faults output
set -euo pipefail
HERE=$(dirname "$(realpath "$0")")
# shellcheck source=bench/programs/inputs.sh
source "$HERE/inputs.sh"
read_args "$@"
POLICIES=${POLICIES:-"adaptive fixed"}
WORK=${WORK:-/tmp/ccvm-programs}
mkdir -p "$WORK"
cd "$WORK"

outputs_of() {
  case $1 in
    gnuplot) echo "plot.png surface.png" ;;
    ghostscript) echo page-*.ppm ;;
    gcc) echo "big.s" ;;
    *) echo "" ;;
  esac
}

# Hash of stdout plus the files the program wrote.
digest() {
  local prog=$1 out=$2
  { cat "$out"; for f in $(outputs_of "$prog"); do cat "$f"; done; } | sha256sum | cut -c1-16
}

write_inputs full
[ "${INPUTS_ONLY:-0}" = 1 ] && exit 0
for prog in "${PROGRAMS[@]}"; do
  cmd=$(command_of "$prog")
  rm -f page-*.ppm plot.png surface.png big.s
  start=$(date +%s.%N)
  $cmd > out.txt 2>/dev/null
  plain_s=$(echo "$(date +%s.%N) - $start" | bc)
  want=$(digest "$prog" out.txt)
  # The heap each process needs, from a run with room to spare.
  "$CCVM" exec --ram 16G --report peak.json -- $cmd > /dev/null 2>&1
  heap=$(python3 -c "import json; print(max(p['heap_peak_bytes'] for p in json.load(open('peak.json'))['processes']))")
  for share in 2 4; do
    ram=$((heap / share))
    for policy in $POLICIES; do
      rm -f page-*.ppm plot.png surface.png big.s
      "$CCVM" exec --ram "$ram" --policy "$policy" --report run.json -- $cmd > out.txt 2>/dev/null
      got=$(digest "$prog" out.txt)
      python3 - "$prog" "$heap" "$plain_s" "$ram" "$policy" "$([ "$got" = "$want" ] && echo same || echo DIFFERENT)" <<'PY'
import json, sys
prog, heap, plain, ram, policy, same = sys.argv[1:]
r = json.load(open("run.json"))
cache = sum(p["stats"]["faults_cache"] for p in r["processes"])
disk = sum(p["stats"]["faults_disk"] for p in r["processes"])
print(f"{prog:12} {int(heap) / 2**20:8.1f} {float(plain):7.2f} {int(ram) / 2**20:7.1f} {policy:9} "
      f"{r['wall_s']:8.2f} {r['wall_s'] / float(plain):7.1f}x {cache:9} {disk:8} {same}")
PY
    done
  done
done

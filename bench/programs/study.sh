#!/usr/bin/env bash
# Redoes paper 000's trace-driven study on real programs: traces gnuplot,
# ghostscript, gcc (cc1), CPython and sqlite3 through `ccvm trace --exec`,
# then sweeps them at the paper's CPU speed and at this machine's.
#
#   bench/programs/study.sh [CCVM] [PROGRAM...]
#
# CCVM is the ccvm binary (default target/release/ccvm); PROGRAMs are any of
# gnuplot ghostscript gcc python sqlite (default: all). Traces go to
# $TRACES (default /tmp/ccvm-traces; a trace is 20-300 MB, too large to
# keep in the repository), sweeps to $OUT (default docs/programs).
# STEP=trace or STEP=sweep runs one half only.
#
# The inputs are smaller than run.sh's: a trace records every reference
# outside a 64-page window and every page image that leaves it, so a
# traced run costs about 30 us per reference; these inputs keep each trace
# near a million references (a few minutes each).
set -euo pipefail
HERE=$(dirname "$(realpath "$0")")
# shellcheck source=bench/programs/inputs.sh
source "$HERE/inputs.sh"
read_args "$@"
TRACES=${TRACES:-/tmp/ccvm-traces}
OUT=$(realpath -m "${OUT:-docs/programs}")
STEP=${STEP:-all}
mkdir -p "$TRACES"
cd "$TRACES"


if [ "$STEP" != sweep ]; then
  write_inputs trace
  for prog in "${PROGRAMS[@]}"; do
    # shellcheck disable=SC2046
    "$CCVM" trace --exec --window 64 -o "$prog.trace" -- $(command_of "$prog")
  done
fi
[ "$STEP" = trace ] && exit 0

traces=()
for prog in "${PROGRAMS[@]}"; do traces+=("$TRACES/$prog.trace"); done
P="--policy adaptive --policy adaptive-safe --policy adaptive-fine --policy fixed3 --policy fixed6 --policy fixed10
   --policy fixed23 --policy fixed37 --policy fixed50 --policy zswap --policy douglis"
# The paper's CPU: codec times and the programs' own run times x 100.
# shellcheck disable=SC2086
"$CCVM" sim sweep "${traces[@]}" --out "$OUT/paper-cpu" --cpu-factor 100 --runs 1 \
  --disk-ms 0.625,1.25,2.5,5,10 --codec wkdm --codec lzo1x-1 --codec lz4 $P
# This machine's CPU, with today's SSD-like disks as well.
# shellcheck disable=SC2086
"$CCVM" sim sweep "${traces[@]}" --out "$OUT/this-cpu" --runs 1 $P
"$CCVM" sim report "$OUT/paper-cpu" > "$OUT/paper-cpu/report.txt"
"$CCVM" sim report "$OUT/this-cpu" > "$OUT/this-cpu/report.txt"

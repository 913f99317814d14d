#!/usr/bin/env bash
# Fuzzes decoders for SECONDS each (default 600), one after another, and
# prints each target's final libFuzzer status line (executions, coverage).
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   (needs: rustup nightly, cargo-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
mkdir -p fuzz/logs
for t in "${targets[@]}"; do
  cargo +nightly fuzz run -O "$t" -- -max_total_time="$secs" -max_len=20000 -print_final_stats=1 \
    > "fuzz/logs/$t.log" 2>&1 || { echo "$t: FAILED (see fuzz/logs/$t.log)"; continue; }
  echo "$t: $(grep -E '^stat::number_of_executed_units' "fuzz/logs/$t.log" | awk '{print $2}') executions in ${secs}s, $(grep -E '^#[0-9]+.*(DONE|pulse)' "fuzz/logs/$t.log" | tail -1)"
done

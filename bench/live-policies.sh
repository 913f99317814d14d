#!/usr/bin/env bash
# Live policies against paging without a cache: built-in workloads paged
# by `ccvm run` under each policy, ROUNDS rounds with the policies
# interleaved in each (the machine is shared and noisy), medians printed.
#
#   bench/live-policies.sh [CCVM]
#
# CCVM is the ccvm binary (default target/release/ccvm, built with
# `cargo build --release`). Environment: ROUNDS (default 3), POLICIES
# (default "none adaptive adaptive-safe"), CASES (default below: workload,
# size, RAM per case, ';'-separated). Raw rows go to $OUT (default
# /tmp/ccvm-live-policies.jsonl). Prints per case and policy: the median
# wall time and its ratio to `none`'s median, the median paging time (wall
# less the same process's unpaged run of the workload) and its ratio to
# `none`'s, the rounds' wall times, and the median cache, disk and
# watched-page faults.
set -euo pipefail
CCVM=${1:-target/release/ccvm}
ROUNDS=${ROUNDS:-3}
POLICIES=${POLICIES:-"none adaptive adaptive-safe"}
CASES=${CASES:-"graph 128M 100M;graph 128M 120M;sortmerge 128M 80M;hashindex 64M 32M;matmul 96M 64M"}
OUT=${OUT:-/tmp/ccvm-live-policies.jsonl}
: >"$OUT"
IFS=';' read -r -a cases <<<"$CASES"
for round in $(seq "$ROUNDS"); do
  for c in "${cases[@]}"; do
    read -r w size ram <<<"$c"
    for p in $POLICIES; do
      json=$("$CCVM" run --json --workload "$w" --size "$size" --ram "$ram" --policy "$p" 2>/dev/null)
      python3 - "$json" "$round" "$w" "$size" "$ram" "$p" >>"$OUT" <<'PY'
import json, sys
text, rnd, w, size, ram, p = sys.argv[1:]
d = json.loads(text[text.index('{'):text.rindex('}') + 1])
s = d['stats']
print(json.dumps(dict(round=int(rnd), case=f"{w} {size} {ram}", policy=p, wall=d['wall_s'], plain=d['plain_s'],
                      ok=d['checksum_ok'], cache=s['faults_cache'], disk=s['faults_disk'],
                      watch=s.get('faults_watch', 0))))
PY
    done
  done
done
python3 - "$OUT" <<'PY'
import collections, json, statistics as st, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = collections.defaultdict(list)
cases = []
for r in rows:
    by[(r['case'], r['policy'])].append(r)
    if r['case'] not in cases:
        cases.append(r['case'])
print(f"{'case':<20} {'policy':<14} {'median s':>8} {'/none':>6} {'paging s':>8} {'/none':>6}  {'rounds':<22} {'cache':>8} {'disk':>8} {'watch':>8} ok")
paging = lambda x: x['wall'] - x.get('plain', 0.0)
for c in cases:
    none = by.get((c, 'none'))
    base = st.median(x['wall'] for x in none) if none else None
    pbase = st.median(paging(x) for x in none) if none else None
    for (case, p), xs in by.items():
        if case != c:
            continue
        m = st.median(x['wall'] for x in xs)
        ratio = f"{m / base:.2f}" if base else "-"
        pm = st.median(paging(x) for x in xs)
        pratio = f"{pm / pbase:.2f}" if pbase and pbase > 0 else "-"
        walls = ' '.join(f"{x['wall']:.2f}" for x in xs)
        med = lambda k: int(st.median(x[k] for x in xs))
        print(f"{c:<20} {p:<14} {m:8.2f} {ratio:>6} {pm:8.2f} {pratio:>6}  {walls:<22} {med('cache'):8d} {med('disk'):8d} {med('watch'):8d} "
              f"{all(x['ok'] for x in xs)}")
PY

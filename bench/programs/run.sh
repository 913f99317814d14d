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
CCVM=$(realpath "${1:-target/release/ccvm}")
shift || true
PROGRAMS=("${@:-gnuplot ghostscript gcc python sqlite}")
PROGRAMS=(${PROGRAMS[@]})
POLICIES=${POLICIES:-"adaptive fixed"}
WORK=${WORK:-/tmp/ccvm-programs}
mkdir -p "$WORK"
cd "$WORK"

inputs() {
  # gnuplot: a 3-million-point curve and a 300x300 pm3d surface, as PNG.
  cat > plot.gp <<'GP'
set terminal png size 1600,1200
set output 'plot.png'
set samples 3000000
plot [0:100] sin(x)*exp(-x/50) + 0.3*sin(37*x) with lines
set output 'surface.png'
set samples 300,300
set isosamples 300,300
set pm3d
splot [-3:3][-3:3] sin(x*y)*exp(-(x*x+y*y)/4) with pm3d
GP
  # ghostscript: 12 pages of filled, stroked and lettered shapes at 450 dpi,
  # each page rendered whole in memory (MaxBitmap).
  cat > doc.ps <<'PS'
%!PS
/Helvetica findfont 9 scalefont setfont
1 1 12 {
  /page exch def
  0 1 3999 {
    /i exch def
    /x i 37 mul page 11 mul add 580 mod 16 add def
    /y i 53 mul page 7 mul add 760 mod 16 add def
    i 13 mod 13 div page 12 div 0.5 sethsbcolor
    newpath x y i 7 mod 3 add 0 360 arc
    gsave fill grestore 0 setgray stroke
    i 5 mod 0 eq { x y moveto (ccvm) show } if
  } for
  showpage
} for
PS
  # gcc: a file of 80 functions with long bodies, compiled at -O2.
  python3 - <<'PY'
with open("big.c", "w") as f:
    for k in range(80):
        f.write(f"int f{k}(int *a, int n) {{\n  int s = {k};\n")
        for j in range(40):
            f.write(f"  for (int i = 0; i < n; i++) s += a[i] * {j + k} ^ (s >> {j % 7 + 1});\n")
        f.write("  return s;\n}\n")
PY
  # CPython: a large dict of lists, strings and tuples, then a sort.
  cat > dicts.py <<'PY'
d = {f"key{i}": [i, str(i * 7), (i, -i)] for i in range(700000)}
keys = sorted(d, key=lambda k: d[k][1])
print(len(d), keys[:3], keys[-3:], sum(len(v[1]) for v in d.values()))
PY
  # sqlite3: 600k rows with an index, in memory, with a large page cache.
  cat > db.sql <<'SQL'
PRAGMA cache_size = -400000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600000)
INSERT INTO t SELECT i, printf('key-%08d-%s', (i * 7919) % 600000, hex(i * 31)), i * 0.5 FROM n;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(v), min(k), max(k) FROM t;
SELECT k FROM t ORDER BY k LIMIT 3 OFFSET 300000;
SELECT substr(k, 1, 9), count(*), avg(v) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5;
SQL
}

# The command of each program, and the files it writes besides stdout.
command_of() {
  case $1 in
    gnuplot) echo "gnuplot plot.gp" ;;
    ghostscript) echo "gs -q -dNOPAUSE -dBATCH -dSAFER -r450 -dMaxBitmap=400000000 -sDEVICE=ppmraw -sOutputFile=page-%02d.ppm doc.ps" ;;
    gcc) echo "gcc -O2 -S -o big.s big.c" ;;
    python) echo "/usr/bin/python3 dicts.py" ;;
    sqlite) echo "sqlite3 :memory: -init db.sql .quit" ;;
  esac
}
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

inputs
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

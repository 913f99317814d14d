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
CCVM=$(realpath "${1:-target/release/ccvm}")
shift || true
PROGRAMS=("${@:-gnuplot ghostscript gcc python sqlite}")
PROGRAMS=(${PROGRAMS[@]})
TRACES=${TRACES:-/tmp/ccvm-traces}
OUT=$(realpath -m "${OUT:-docs/programs}")
STEP=${STEP:-all}
mkdir -p "$TRACES"
cd "$TRACES"

inputs() {
  cat > plot.gp <<'GP'
set terminal png size 1200,900
set output 'plot.png'
set samples 400000
plot [0:100] sin(x)*exp(-x/50) + 0.3*sin(37*x) with lines
set output 'surface.png'
set samples 120,120
set isosamples 120,120
set pm3d
splot [-3:3][-3:3] sin(x*y)*exp(-(x*x+y*y)/4) with pm3d
GP
  cat > doc.ps <<'PS'
%!PS
/Helvetica findfont 9 scalefont setfont
1 1 3 {
  /page exch def
  0 1 1999 {
    /i exch def
    /x i 37 mul page 11 mul add 580 mod 16 add def
    /y i 53 mul page 7 mul add 760 mod 16 add def
    i 13 mod 13 div page 3 div 0.5 sethsbcolor
    newpath x y i 7 mod 3 add 0 360 arc
    gsave fill grestore 0 setgray stroke
    i 5 mod 0 eq { x y moveto (ccvm) show } if
  } for
  showpage
} for
PS
  python3 - <<'PY'
with open("big.c", "w") as f:
    for k in range(12):
        f.write(f"int f{k}(int *a, int n) {{\n  int s = {k};\n")
        for j in range(40):
            f.write(f"  for (int i = 0; i < n; i++) s += a[i] * {j + k} ^ (s >> {j % 7 + 1});\n")
        f.write("  return s;\n}\n")
PY
  cat > dicts.py <<'PY'
d = {f"key{i}": [i, str(i * 7), (i, -i)] for i in range(120000)}
keys = sorted(d, key=lambda k: d[k][1])
print(len(d), keys[:3], keys[-3:], sum(len(v[1]) for v in d.values()))
PY
  cat > db.sql <<'SQL'
PRAGMA cache_size = -100000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO t SELECT i, printf('key-%08d-%s', (i * 7919) % 100000, hex(i * 31)), i * 0.5 FROM n;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(v), min(k), max(k) FROM t;
SELECT substr(k, 1, 9), count(*), avg(v) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5;
SQL
}

command_of() {
  case $1 in
    gnuplot) echo "gnuplot plot.gp" ;;
    ghostscript) echo "gs -q -dNOPAUSE -dBATCH -dSAFER -r200 -dMaxBitmap=100000000 -sDEVICE=ppmraw -sOutputFile=page-%02d.ppm doc.ps" ;;
    gcc) echo "gcc -O2 -S -o big.s big.c" ;;
    python) echo "/usr/bin/python3 dicts.py" ;;
    sqlite) echo "sqlite3 :memory: -init db.sql .quit" ;;
  esac
}

if [ "$STEP" != sweep ]; then
  inputs
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

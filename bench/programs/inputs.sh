# Inputs and commands of the real programs, sourced by run.sh (live runs at
# full size) and study.sh (traces, smaller). `write_inputs SIZE` writes them
# into the current folder; `command_of PROGRAM` prints a program's command
# line for the last SIZE written. SIZE is `full` or `trace`.

# read_args ARGS...: the ccvm binary (first argument, default
# target/release/ccvm) into CCVM, and the programs (the rest, default all
# five) into the array PROGRAMS.
read_args() {
  CCVM=$(realpath "${1:-target/release/ccvm}")
  shift || true
  # shellcheck disable=SC2206
  PROGRAMS=(${@:-gnuplot ghostscript gcc python sqlite})
}

write_inputs() {
  # Per size: gnuplot samples, surface side, PNG width x height; gs pages,
  # shapes per page, dpi, MaxBitmap; gcc functions; CPython dict entries;
  # sqlite rows, cache KiB; whether sqlite also runs the OFFSET query.
  case $1 in
    full) set -- 3000000 300 1600,1200 12 4000 450 400000000 80 700000 600000 400000 1 ;;
    trace) set -- 400000 120 1200,900 3 2000 200 100000000 12 120000 100000 100000 0 ;;
    *) echo "write_inputs: unknown size '$1' (full or trace)" >&2; return 1 ;;
  esac
  GS_DPI=$6 GS_BITMAP=$7
  # gnuplot: a long curve and a pm3d surface, as PNG.
  cat > plot.gp <<GP
set terminal png size $3
set output 'plot.png'
set samples $1
plot [0:100] sin(x)*exp(-x/50) + 0.3*sin(37*x) with lines
set output 'surface.png'
set samples $2,$2
set isosamples $2,$2
set pm3d
splot [-3:3][-3:3] sin(x*y)*exp(-(x*x+y*y)/4) with pm3d
GP
  # ghostscript: pages of filled, stroked and lettered shapes, each page
  # rendered whole in memory (MaxBitmap).
  cat > doc.ps <<PS
%!PS
/Helvetica findfont 9 scalefont setfont
1 1 $4 {
  /page exch def
  0 1 $(($5 - 1)) {
    /i exch def
    /x i 37 mul page 11 mul add 580 mod 16 add def
    /y i 53 mul page 7 mul add 760 mod 16 add def
    i 13 mod 13 div page $4 div 0.5 sethsbcolor
    newpath x y i 7 mod 3 add 0 360 arc
    gsave fill grestore 0 setgray stroke
    i 5 mod 0 eq { x y moveto (ccvm) show } if
  } for
  showpage
} for
PS
  # gcc: a file of functions with long bodies, compiled at -O2.
  python3 - "$8" <<'PY'
import sys
with open("big.c", "w") as f:
    for k in range(int(sys.argv[1])):
        f.write(f"int f{k}(int *a, int n) {{\n  int s = {k};\n")
        for j in range(40):
            f.write(f"  for (int i = 0; i < n; i++) s += a[i] * {j + k} ^ (s >> {j % 7 + 1});\n")
        f.write("  return s;\n}\n")
PY
  # CPython: a large dict of lists, strings and tuples, then a sort.
  cat > dicts.py <<PY
d = {f"key{i}": [i, str(i * 7), (i, -i)] for i in range($9)}
keys = sorted(d, key=lambda k: d[k][1])
print(len(d), keys[:3], keys[-3:], sum(len(v[1]) for v in d.values()))
PY
  # sqlite3: rows with an index, in memory, with a large page cache.
  local rows=${10} offset=""
  [ "${12}" = 1 ] && offset=$'\n'"SELECT k FROM t ORDER BY k LIMIT 3 OFFSET $((rows / 2));"
  cat > db.sql <<SQL
PRAGMA cache_size = -${11};
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
INSERT INTO t SELECT i, printf('key-%08d-%s', (i * 7919) % $rows, hex(i * 31)), i * 0.5 FROM n;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(v), min(k), max(k) FROM t;$offset
SELECT substr(k, 1, 9), count(*), avg(v) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5;
SQL
}

command_of() {
  case $1 in
    gnuplot) echo "gnuplot plot.gp" ;;
    ghostscript) echo "gs -q -dNOPAUSE -dBATCH -dSAFER -r$GS_DPI -dMaxBitmap=$GS_BITMAP -sDEVICE=ppmraw -sOutputFile=page-%02d.ppm doc.ps" ;;
    gcc) echo "gcc -O2 -S -o big.s big.c" ;;
    python) echo "/usr/bin/python3 dicts.py" ;;
    sqlite) echo "sqlite3 :memory: -init db.sql .quit" ;;
  esac
}

#!/usr/bin/env bash
# Records the line traces of docs/hardware.md's cache study: real programs
# under Valgrind's Lackey, and ccvm's built-in workloads, each stopped after
# LIMIT data references (default 30 million).
#
#   bench/cachesim/record.sh OUT_DIR [LIMIT]
#
# Needs valgrind (apt-get install valgrind). Takes about 3 minutes a trace.
set -euo pipefail
out=${1:?usage: record.sh OUT_DIR [LIMIT]}
limit=${2:-30000000}
here=$(cd "$(dirname "$0")/../.." && pwd)
ccvm="$here/target/release/ccvm"
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
[ -x "$ccvm" ] || (cd "$here" && cargo build --release --quiet)
mkdir -p "$out/input"
# Inputs: text from the system's package database and manuals, repeated.
for i in 1 2 3 4; do cat /var/lib/dpkg/status; done > "$out/input/text"
python=$( [ -x /usr/bin/python3.11 ] && echo /usr/bin/python3.11 || command -v python3)

rec() {
    local name=$1
    shift
    [ -s "$out/$name.cclt" ] && { echo "$name: kept"; return; }
    "$ccvm" sim record-lines --limit "$limit" -o "$out/$name.cclt" "$@" > /dev/null
}

# A dictionary-heavy interpreter: word counts and a sort of a 2.5 MB text.
rec python -- "$python" -c "
import collections, sys
words = open(sys.argv[1]).read().split()
c = collections.Counter(words)
index = {w: [i for i, x in enumerate(words[:200000]) if x == w][:4] for w in list(c)[:3000]}
print(len(c), sorted(c.items(), key=lambda kv: -kv[1])[:3], len(index))
" "$out/input/text"
# LZMA at its largest dictionary: binary-tree match finding over megabytes.
rec xz -- xz -9e -T1 -c "$out/input/text"
# A relational database: inserts through an index, then joins.
rec sqlite -- sqlite3 :memory: "
create table t(a integer primary key, b text, c integer);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 200000)
  insert into t select i, hex(randomblob(12)), abs(random()) % 1000 from n;
create index tc on t(c);
select count(*), sum(length(b)) from t x join t y on x.c = y.c and x.a < y.a + 3 and x.a > y.a;
select c, count(*) from t group by c order by 2 desc limit 3;"
# A compiler: cc1 on a file that includes much of the C library's headers.
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n#include <pthread.h>\n#include <sys/socket.h>\n#include <netinet/in.h>\nint main(void){return 0;}\n' > "$out/input/prog.c"
# (cc1 itself: Valgrind does not follow the gcc driver's children.)
cc1=$(gcc -print-prog-name=cc1)
rec gcc -- "$cc1" -quiet -imultiarch "$(gcc -print-multiarch)" -O2 "$out/input/prog.c" -o /dev/null
# Perl: regular expressions and hashes over the same text.
rec perl -- perl -e 'my %h; while (<>) { $h{$1}++ while /(\w+)/g } print scalar(keys %h), "\n"' "$out/input/text"
# ccvm's built-in workloads in 8 MiB.
for w in graph objheap hashindex sortmerge matmul; do
    rec "$w" --workload "$w" --size 8M
done
ls -la "$out"

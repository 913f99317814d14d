#!/usr/bin/env python3
"""Capture real memory pages from real programs for ccvm's codec corpus.

Each source program is started, left to do real work until its heap is
large, then frozen with SIGSTOP. Its writable anonymous mappings (the heap
and anonymous maps) are read through /proc/PID/maps, /proc/PID/pagemap and
/proc/PID/mem; only pages present in RAM (pagemap bit 63) are kept. Up to
--pages pages are taken per program, evenly spread over all present pages
in address order, and written as a plain concatenation of 4096-byte pages
compressed with the zstd command-line tool: <name>.pages.zst.

Must run as root (pagemap's present bit and /proc/PID/mem of another
process need it). Needs python3, gcc, node, java/javac and sqlite3.
The byte-oriented sources need vim and zstd as well.

The Go, Rust and Perl sources need go, rustc and perl as well.
Usage: sudo python3 corpus/capture.py [--out corpus/pages] [--pages 1024] [--only NAME]...
"""

import argparse
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

PAGE = 4096

PY_DICT = r"""
import random, sys
random.seed(7)
class Rec:
    __slots__ = ("name", "id", "score", "tags", "parent")
    def __init__(s, name, i, score, tags, parent):
        s.name, s.id, s.score, s.tags, s.parent = name, i, score, tags, parent
words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma", "tau"]
table = {}
prev = None
for i in range(600000):
    key = "%s_%d_%s" % (random.choice(words), i, random.choice(words))
    r = Rec(key, i, random.random() * 100, [random.randint(0, 999) for _ in range(3)], prev)
    table[key] = r
    prev = r if i % 7 else None
index = {}
for k, r in table.items():
    index.setdefault(r.tags[0], []).append(k)
print("ready", flush=True)
sys.stdin.read()
"""

NODE_HEAP = r"""
let seed = 12345;
function rnd() { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; }
const users = new Map();
const posts = [];
for (let i = 0; i < 300000; i++) {
  const u = { id: i, name: "user" + i, email: "user" + i + "@example.org", karma: Math.floor(rnd() * 1000),
              created: new Date(1500000000000 + i * 1000).toISOString(), friends: [] };
  users.set(u.id, u);
  if (i > 10) for (let f = 0; f < 3; f++) u.friends.push(users.get(Math.floor(rnd() * i)));
  if (i % 2 === 0) posts.push({ author: u, title: "post about " + (i % 97), body: JSON.stringify({ n: i, v: rnd() }), votes: new Array(4).fill(i & 255) });
}
console.log("ready");
process.stdin.resume();
"""

JAVA_HEAP = r"""
import java.util.*;
public class Heap {
  static final class Order { long id; String customer; double amount; int[] items; Order next;
    Order(long id, String c, double a, int[] it, Order n) { this.id = id; customer = c; amount = a; items = it; next = n; } }
  public static void main(String[] args) throws Exception {
    Random r = new Random(42);
    HashMap<String, Order> byKey = new HashMap<>();
    TreeMap<Long, List<Order>> byDay = new TreeMap<>();
    Order prev = null;
    for (int i = 0; i < 700000; i++) {
      int[] items = new int[1 + r.nextInt(6)];
      for (int j = 0; j < items.length; j++) items[j] = r.nextInt(5000);
      Order o = new Order(i, "customer-" + r.nextInt(50000), r.nextDouble() * 500, items, prev);
      byKey.put("order:" + i, o);
      byDay.computeIfAbsent((long) (i / 1000), k -> new ArrayList<>()).add(o);
      prev = (i % 5 == 0) ? null : o;
    }
    System.out.println("ready");
    System.in.read();
  }
}
"""

NUMERIC_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <unistd.h>
/* Heat diffusion on a float64 grid (Jacobi iterations) plus an n-body step:
   the kind of dense floating-point state numeric programs hold. */
int main(void) {
    const int n = 1400;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            a[i * n + j] = (i == 0 || j == 0) ? 100.0 : 20.0 + 0.001 * ((i * 31 + j * 17) % 1000);
    for (int it = 0; it < 60; it++) {
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                b[i * n + j] = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] + a[i * n + j + 1]);
        double *t = a; a = b; b = t;
    }
    const int m = 60000;
    double *pos = malloc(sizeof(double) * 3 * m), *vel = calloc(3 * m, sizeof(double));
    for (int i = 0; i < 3 * m; i++) pos[i] = sin(i * 0.37) * 1000.0;
    for (int i = 0; i < m; i++)
        for (int k = 0; k < 3; k++) vel[3 * i + k] += 0.01 * cos(pos[3 * i + k] * 0.001);
    printf("ready %f\n", a[n * n / 2] + vel[7]);
    fflush(stdout);
    pause();
    return 0;
}
"""

SQLITE_SCRIPT = """PRAGMA cache_size=-120000;
CREATE TABLE items(id INTEGER PRIMARY KEY, sku TEXT, title TEXT, price REAL, qty INTEGER, category TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000)
INSERT INTO items SELECT x, printf('SKU-%08d', x * 7919 % 1000003), 'item number ' || x || ' of the catalogue',
  (x % 1000) / 7.0, x % 97, 'cat' || (x % 31) FROM c;
CREATE INDEX items_sku ON items(sku);
CREATE INDEX items_cat ON items(category, price);
SELECT category, count(*), sum(price) FROM items GROUP BY category ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM items WHERE sku LIKE 'SKU-0001%';
.print ready
"""


GO_SERVICE = r"""
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// A session store and response cache, as a web service keeps in memory.
type Event struct {
	At     time.Time
	Kind   string
	Path   string
	Status int
	Bytes  int64
}

type Session struct {
	ID      string
	User    string
	Roles   []string
	Created time.Time
	Seen    time.Time
	Events  []Event
	Attrs   map[string]string
}

func main() {
	seed := uint64(12345)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int((seed >> 33) % uint64(n)) }
	paths := []string{"/api/v1/items", "/api/v1/users", "/login", "/static/app.js", "/api/v1/orders", "/health"}
	kinds := []string{"GET", "POST", "PUT", "DELETE"}
	roles := []string{"admin", "editor", "viewer", "billing", "support"}
	sessions := make(map[string]*Session)
	cache := make(map[string][]byte)
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 120000; i++ {
		s := &Session{
			ID:      fmt.Sprintf("%016x-%04x", seed^uint64(i)*0x9E3779B97F4A7C15, i&0xffff),
			User:    fmt.Sprintf("user%d@example.com", rnd(50000)),
			Created: base.Add(time.Duration(i) * time.Second),
			Attrs:   map[string]string{"locale": []string{"en-US", "de-DE", "fr-FR"}[rnd(3)], "plan": []string{"free", "pro"}[rnd(2)]},
		}
		s.Roles = append(s.Roles, roles[rnd(len(roles))])
		for e := 0; e < 3+rnd(6); e++ {
			s.Events = append(s.Events, Event{At: s.Created.Add(time.Duration(e*rnd(900)) * time.Millisecond),
				Kind: kinds[rnd(len(kinds))], Path: paths[rnd(len(paths))], Status: []int{200, 200, 200, 304, 404, 500}[rnd(6)], Bytes: int64(rnd(1 << 16))})
		}
		s.Seen = s.Events[len(s.Events)-1].At
		sessions[s.ID] = s
		if i%3 == 0 {
			body, _ := json.Marshal(s)
			cache[strings.ToUpper(s.ID[:8])+paths[i%len(paths)]] = body
		}
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println(len(sessions), len(cache))
}
"""

# Byte-oriented sources: text the project generates (a seeded word model and
# log-line templates; no user data), held by an editor, a compressor, a
# database with text keys and a browser-like string heap.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so no will more what up out can said about "
    "other into than its time only could new them man some these then two first may any like now my such make "
    "over our even most me state after also made many did must before back see through way where get much go well "
    "your know should down work year because come people just say each those take day good how long little use "
    "memory page cache compressed swap kernel fault program process thread buffer queue server request response "
    "client session user account order invoice payment customer product price total report module function value "
    "error warning debug info connection timeout retry database index table column query result status config"
).split()


def text_lines(seed, count):
    """Yield `count` generated lines: prose sentences and log records."""
    import random
    rnd = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    paths = ["/api/v1/users", "/api/v1/orders", "/static/app.js", "/login", "/search", "/cart/checkout"]
    for i in range(count):
        if rnd.random() < 0.45:
            n = rnd.randint(6, 24)
            words = rnd.choices(WORDS, weights, k=n)
            line = " ".join(words).capitalize() + rnd.choice([".", ".", ".", "?", ";"])
        else:
            line = (f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:"
                    f"{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}.{rnd.randint(0, 999):03d}Z "
                    f"{rnd.choice(['INFO', 'INFO', 'WARN', 'DEBUG', 'ERROR'])} "
                    f"10.{rnd.randint(0, 255)}.{rnd.randint(0, 255)}.{rnd.randint(1, 254)} "
                    f"\"{rnd.choice(['GET', 'GET', 'POST', 'PUT'])} {rnd.choice(paths)}?id={rnd.randint(1, 99999)}\" "
                    f"{rnd.choice([200, 200, 200, 304, 404, 500])} {rnd.randint(100, 90000)} "
                    f"user={rnd.choice(WORDS)}{rnd.randint(1, 5000)} "
                    + " ".join(rnd.choices(WORDS, weights, k=rnd.randint(2, 8))))
        yield line + "\n"


def write_text(path, seed, count):
    with open(path, "w") as f:
        f.writelines(text_lines(seed, count))


SQLITE_TEXT = """PRAGMA cache_size=-160000;
CREATE TABLE pages(url TEXT PRIMARY KEY, title TEXT, author TEXT, body TEXT) WITHOUT ROWID;
.import --csv {csv} pages
CREATE INDEX pages_title ON pages(title);
CREATE INDEX pages_author ON pages(author, url);
SELECT count(*), sum(length(body)) FROM pages;
SELECT url FROM pages WHERE title LIKE 'memory%' LIMIT 3;
.print ready
"""


def write_sqlite_csv(path, seed, rows):
    import csv
    import random
    rnd = random.Random(seed + 1)
    lines = text_lines(seed, rows * 3)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for i in range(rows):
            title = next(lines).strip()[:60]
            body = next(lines).strip() + " " + next(lines).strip()
            url = f"https://{rnd.choice(WORDS)}.example.org/{rnd.choice(WORDS)}/{i * 7919 % 1000003}/{rnd.choice(WORDS)}.html"
            w.writerow([url, title, f"{rnd.choice(WORDS).title()} {rnd.choice(WORDS).title()}", body])


NODE_STRINGS = r"""
const fs = require("fs");
const lines = fs.readFileSync(process.argv[1], "latin1").split("\n");
const docs = new Map();
const dom = [];
for (let i = 0; i + 4 < lines.length; i += 4) {
  const url = "https://site" + (i % 97) + ".example.org/doc/" + i;
  const html = "<article id=\"a" + i + "\"><h2>" + lines[i] + "</h2><p class=\"lead\">" + lines[i + 1] +
    "</p><p>" + lines[i + 2] + "</p><footer>" + lines[i + 3] + "</footer></article>";
  docs.set(url, html);
  if (i % 8 === 0) dom.push({ tag: "li", text: lines[i + 1].slice(0, 40), href: url });
}
console.log("ready");
process.stdin.resume();
"""


# A generated crate for rustc to compile: many items, generics and strings,
# so that its arenas, interners and query caches fill its heap.
def rust_source(n):
    out = ["use std::collections::BTreeMap;\n"]
    for i in range(n):
        out.append(
            f"#[derive(Debug, Clone, PartialEq)] pub struct S{i} {{ pub a: u{8 << (i % 4)}, pub name: String, pub v: Vec<i64> }}\n"
            f"impl S{i} {{ pub fn score(&self, k: i64) -> i64 {{ self.v.iter().map(|x| x * k + {i}).sum::<i64>() + self.name.len() as i64 }} }}\n"
            f"pub fn f{i}<T: Into<i64> + Copy>(m: &mut BTreeMap<String, i64>, t: T) -> i64 {{ "
            f"let s = S{i} {{ a: {i % 200}, name: format!(\"s{i}-{{}}\", t.into()), v: vec![{i}, {i % 7}, t.into()] }}; "
            f"*m.entry(s.name.clone()).or_insert(0) += s.score({i % 11}); s.score(1) }}\n"
        )
    out.append("pub fn all(m: &mut BTreeMap<String, i64>) -> i64 { let mut t = 0;\n")
    out.extend(f"  t += f{i}(m, {i}i32);\n" for i in range(n))
    out.append("  t }\n")
    return "".join(out)


PERL_HASH = r"""
use strict;
srand(7);
my @words = qw(alpha beta gamma delta kappa omega sigma tau);
my %index;
my @records;
for my $i (0 .. 400000) {
    my $k = $words[rand @words] . "_" . $i;
    my $r = { id => $i, key => $k, score => int(rand(10000)) / 100, tags => [ map { $words[rand @words] } 1 .. 3 ] };
    push @records, $r;
    push @{ $index{ $words[$i % @words] } }, $r;
}
$| = 1;
print "ready
";
<STDIN>;
"""


def present_pages(pid):
    """Yield addresses of present pages in writable anonymous mappings."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            perms = parts[1]
            path = parts[5] if len(parts) > 5 else ""
            if "w" not in perms or path not in ("", "[heap]"):
                continue
            npages = (hi - lo) // PAGE
            pm.seek(lo // PAGE * 8)
            entries = pm.read(npages * 8)
            for i in range(len(entries) // 8):
                (e,) = struct.unpack_from("<Q", entries, i * 8)
                if e >> 63 & 1:
                    yield lo + i * PAGE


def dump(pid, limit):
    addrs = list(present_pages(pid))
    if not addrs:
        raise RuntimeError(f"pid {pid}: no present anonymous pages")
    step = max(1, len(addrs) / limit)
    chosen = [addrs[int(i * step)] for i in range(min(limit, len(addrs)))]
    out = bytearray()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for a in chosen:
            mem.seek(a)
            out += mem.read(PAGE)
    return bytes(out), len(addrs)


def wait_ready(proc):
    line = proc.stdout.readline()
    if not line.startswith(b"ready"):
        raise RuntimeError(f"{proc.args}: expected 'ready', got {line!r}")


def capture_ready(cmd, limit, **kw):
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kw)
    try:
        wait_ready(proc)
        os.kill(proc.pid, signal.SIGSTOP)
        return dump(proc.pid, limit)
    finally:
        proc.kill()
        proc.wait()


def capture_sqlite(limit, script=SQLITE_SCRIPT):
    """Run `script` in an in-memory sqlite3 shell; dump it at its 'ready'."""
    proc = subprocess.Popen(["sqlite3", ":memory:"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write(script.encode())
        proc.stdin.flush()
        while not proc.stdout.readline().startswith(b"ready"):
            pass
        os.kill(proc.pid, signal.SIGSTOP)
        return dump(proc.pid, limit)
    finally:
        proc.kill()
        proc.wait()


def capture_growing(cmd, name, limit, rss_bytes, **kw):
    """Run `cmd`; freeze the process called `name` among it and its
    children once its resident set passes `rss_bytes`, and dump it."""
    top = subprocess.Popen(cmd, **kw)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    with open(f"/proc/{p}/stat") as st:
                        fields = st.read().split()
                    if fields[1] == f"({name})" and (int(p) == top.pid or int(fields[3]) == top.pid):
                        if int(fields[23]) * PAGE > rss_bytes:
                            os.kill(int(p), signal.SIGSTOP)
                            try:
                                return dump(int(p), limit)
                            finally:
                                os.kill(int(p), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError, IndexError):
                    continue
            time.sleep(0.05)
        raise RuntimeError(f"{name} never reached {rss_bytes >> 20} MiB")
    finally:
        top.kill()
        top.wait()


def capture_cc1(work, limit):
    """Compile a large generated C file; freeze cc1 in the middle of -O2."""
    src = os.path.join(work, "big.c")
    with open(src, "w") as f:
        f.write("#include <string.h>\nstruct node { int key; double w; struct node *l, *r; char name[24]; };\n")
        for i in range(6000):
            f.write(
                f"static int f{i}(struct node *n, int k) {{ int s = {i}; "
                f"for (int j = 0; j < k; j++) {{ if (n && n->key > j) s += n->key * {i % 13 + 1}; "
                f"else s ^= j << {i % 7}; if (n) n = (j & 1) ? n->l : n->r; }} "
                f"return s + (int)strlen(\"f{i}\"); }}\n"
            )
        f.write("int all(struct node *n) { int s = 0;\n")
        for i in range(6000):
            f.write(f"  s += f{i}(n, {i % 17});\n")
        f.write("  return s; }\n")
    return capture_growing(["gcc", "-O2", "-c", src, "-o", os.path.join(work, "big.o")], "cc1", limit, 150 << 20)


def capture_go(work, limit):
    exe = os.path.join(work, "service")
    env = dict(os.environ, GOCACHE=os.path.join(work, "gocache"), GO111MODULE="off")
    subprocess.check_call(["go", "build", "-o", exe, os.path.join(work, "service.go")], env=env)
    return capture_ready([exe], limit)


def capture_vim(work, limit):
    """An editor holding a generated 120 MiB document in its buffer."""
    path = os.path.join(work, "document.txt")
    write_text(path, 11, 1_100_000)
    import pty
    main_fd, term = pty.openpty()  # vim's Ex mode quits at once without a terminal
    try:
        return capture_growing(["vim", "-u", "NONE", "-i", "NONE", "-N", "-n", "-es", "-c", "sleep 600", path],
                               "vim", limit, 80 << 20, stdin=term, stdout=term, stderr=term)
    finally:
        os.close(term)
        os.close(main_fd)


def capture_zstd(work, limit):
    """A compressor's own buffers: zstd with a 128 MiB window over generated text."""
    path = os.path.join(work, "stream.txt")
    write_text(path, 13, 1_400_000)
    return capture_growing(["zstd", "-q", "-5", "--long=27", "-T1", "-c", "-f", path], "zstd", limit, 110 << 20,
                           stdout=subprocess.DEVNULL)


def capture_sqlite_text(work, limit):
    """A database with text keys: an in-memory table of pages keyed by URL."""
    csv_path = os.path.join(work, "pages.csv")
    write_sqlite_csv(csv_path, 17, 300_000)
    return capture_sqlite(limit, SQLITE_TEXT.format(csv=csv_path))


def capture_node_strings(work, limit):
    """A browser-like string heap: generated HTML fragments keyed by URL."""
    path = os.path.join(work, "lines.txt")
    write_text(path, 19, 900_000)
    return capture_ready(["node", "-e", NODE_STRINGS, path], limit)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "pages"))
    ap.add_argument("--pages", type=int, default=1024)
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="capture only this source (repeatable); default: all")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "numeric.c"), "w") as f:
            f.write(NUMERIC_C)
        subprocess.check_call(["gcc", "-O2", "-o", os.path.join(work, "numeric"), os.path.join(work, "numeric.c"), "-lm"])
        with open(os.path.join(work, "Heap.java"), "w") as f:
            f.write(JAVA_HEAP)
        subprocess.check_call(["javac", "-d", work, os.path.join(work, "Heap.java")])
        with open(os.path.join(work, "service.go"), "w") as f:
            f.write(GO_SERVICE)
        with open(os.path.join(work, "big.rs"), "w") as f:
            f.write(rust_source(4000))
        sources = {
            "python-dict": lambda: capture_ready([sys.executable, "-c", PY_DICT], args.pages),
            "gcc-cc1": lambda: capture_cc1(work, args.pages),
            "node-heap": lambda: capture_ready(["node", "-e", NODE_HEAP], args.pages),
            "jvm-heap": lambda: capture_ready(["java", "-Xmx512m", "-cp", work, "Heap"], args.pages),
            "sqlite-cache": lambda: capture_sqlite(args.pages),
            "float64-numeric": lambda: capture_ready([os.path.join(work, "numeric")], args.pages),
            "go-service": lambda: capture_go(work, args.pages),
            "rustc-compile": lambda: capture_growing(
                ["rustc", "--edition", "2021", "--crate-type", "lib", "-O", "-o", os.path.join(work, "big.rlib"),
                 os.path.join(work, "big.rs")], "rustc", args.pages, 400 << 20),
            "perl-hash": lambda: capture_ready(["perl", "-e", PERL_HASH], args.pages),
            "vim-document": lambda: capture_vim(work, args.pages),
            "zstd-window": lambda: capture_zstd(work, args.pages),
            "sqlite-text": lambda: capture_sqlite_text(work, args.pages),
            "node-strings": lambda: capture_node_strings(work, args.pages),
        }
        unknown = [n for n in args.only if n not in sources]
        if unknown:
            sys.exit(f"unknown source {unknown[0]}: choose from {', '.join(sources)}")
        for name, run in sources.items():
            if args.only and name not in args.only:
                continue
            data, present = run()
            pages = len(data) // PAGE
            zeros = sum(1 for i in range(pages) if not any(data[i * PAGE:(i + 1) * PAGE]))
            path = os.path.join(args.out, f"{name}.pages.zst")
            subprocess.run(["zstd", "-19", "-q", "-f", "-o", path], input=data, check=True)
            print(f"{name}: {pages} pages of {present} present, {zeros} zero ({100.0 * zeros / pages:.1f}%), "
                  f"{os.path.getsize(path)} bytes compressed")


if __name__ == "__main__":
    main()

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

Usage: sudo python3 corpus/capture.py [--out corpus/pages] [--pages 1024]
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


def capture_sqlite(limit):
    proc = subprocess.Popen(["sqlite3", ":memory:"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write(SQLITE_SCRIPT.encode())
        proc.stdin.flush()
        while not proc.stdout.readline().startswith(b"ready"):
            pass
        os.kill(proc.pid, signal.SIGSTOP)
        return dump(proc.pid, limit)
    finally:
        proc.kill()
        proc.wait()


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
    gcc = subprocess.Popen(["gcc", "-O2", "-c", src, "-o", os.path.join(work, "big.o")])
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    with open(f"/proc/{p}/stat") as st:
                        fields = st.read().split()
                    if fields[1] == "(cc1)" and int(fields[3]) == gcc.pid:
                        rss_pages = int(fields[23])
                        if rss_pages * PAGE > 150 << 20:
                            os.kill(int(p), signal.SIGSTOP)
                            try:
                                return dump(int(p), limit)
                            finally:
                                os.kill(int(p), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError, IndexError):
                    continue
            time.sleep(0.05)
        raise RuntimeError("cc1 never reached 150 MiB")
    finally:
        gcc.kill()
        gcc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "pages"))
    ap.add_argument("--pages", type=int, default=1024)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "numeric.c"), "w") as f:
            f.write(NUMERIC_C)
        subprocess.check_call(["gcc", "-O2", "-o", os.path.join(work, "numeric"), os.path.join(work, "numeric.c"), "-lm"])
        with open(os.path.join(work, "Heap.java"), "w") as f:
            f.write(JAVA_HEAP)
        subprocess.check_call(["javac", "-d", work, os.path.join(work, "Heap.java")])
        sources = {
            "python-dict": lambda: capture_ready([sys.executable, "-c", PY_DICT], args.pages),
            "gcc-cc1": lambda: capture_cc1(work, args.pages),
            "node-heap": lambda: capture_ready(["node", "-e", NODE_HEAP], args.pages),
            "jvm-heap": lambda: capture_ready(["java", "-Xmx512m", "-cp", work, "Heap"], args.pages),
            "sqlite-cache": lambda: capture_sqlite(args.pages),
            "float64-numeric": lambda: capture_ready([os.path.join(work, "numeric")], args.pages),
        }
        for name, run in sources.items():
            data, present = run()
            pages = len(data) // PAGE
            zeros = sum(1 for i in range(pages) if not any(data[i * PAGE:(i + 1) * PAGE]))
            path = os.path.join(args.out, f"{name}.pages.zst")
            subprocess.run(["zstd", "-19", "-q", "-f", "-o", path], input=data, check=True)
            print(f"{name}: {pages} pages of {present} present, {zeros} zero ({100.0 * zeros / pages:.1f}%), "
                  f"{os.path.getsize(path)} bytes compressed")


if __name__ == "__main__":
    main()

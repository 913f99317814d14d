"""A forking worker pool over a large in-memory table, as data-processing
scripts use `multiprocessing`: the parent builds 400k records (about
110 MiB of heap), then four workers forked from it (the default start
method on Linux) each score a quarter of the records against the whole
table. Prints a checksum of the scores. Used in docs/results.md to
measure forked children paged by `ccvm exec`."""
import multiprocessing as mp
import random
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
rng = random.Random(3)
records = [
    {"id": i, "name": "item-%d-%x" % (i, rng.getrandbits(40)), "tags": [rng.randrange(500) for _ in range(6)]}
    for i in range(N)
]


def score(part):
    """Scores records part, part+4, ...: each against a few others."""
    r = random.Random(part)
    total = 0
    for i in range(part, N, 4):
        a = records[i]
        b = records[r.randrange(N)]
        total += sum(t for t in a["tags"] if t in b["tags"]) + len(a["name"]) % 7
    return total % 1_000_000_007


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        print(sum(pool.map(score, range(4))) % 1_000_000_007)

"""A service-like key-value cache: profiles in a dict, looked up with a
skew (nine lookups in ten go to a tenth of the keys), so that most of the
memory is cold, as in production caches. Prints a checksum of what it read.
Used by `ccvm bench kernel --program` (docs/kernel.md)."""
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
lookups = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
rng = random.Random(1)
profiles = {}
for i in range(n):
    profiles["user%d" % i] = {
        "id": i,
        "name": "name-%d-%x" % (i, rng.getrandbits(32)),
        "tags": [rng.randrange(1000) for _ in range(8)],
        "score": rng.random(),
    }
hot = n // 10
total = 0
for _ in range(lookups):
    k = rng.randrange(hot) if rng.random() < 0.9 else rng.randrange(n)
    p = profiles["user%d" % k]
    total = (total + p["tags"][k % 8] + len(p["name"])) % 1_000_000_007
print(total)

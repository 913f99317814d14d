"""Writes the text that `sort` and `xz` read in docs/results.md's section
"Two programs the project had not run": 1.5 million lines of eight
words each, drawn from 50,000 made-up words with a fixed seed (84 MB,
the same bytes on every machine).

    python3 docs/programs/lines.py /tmp/lines.txt
"""

import random
import sys

rng = random.Random(7)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(50000)]
with open(sys.argv[1], "w") as out:
    for _ in range(1500000):
        out.write(" ".join(rng.choice(words) for _ in range(8)) + "\n")

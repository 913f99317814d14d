"""Writes 400k JSON records (a list of objects with an id, a name, five
tags and a score) to the file given, the same bytes everywhere (seed 5):
the input of the jq run in docs/results.md.

usage: records.py FILE"""
import json
import random
import sys

rng = random.Random(5)
records = [
    {"id": i, "name": "n%x" % rng.getrandbits(40), "tags": [rng.randrange(100) for _ in range(5)], "score": rng.random()}
    for i in range(400_000)
]
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(records))
    f.write("\n")

"""A pre-fork server, as web servers and database front ends are built:
the parent loads a table of 300k records (about 150 MiB of heap), opens a
listening socket and forks four workers that inherit both; each worker
accepts connections and answers lookups of keys, one line per key, until a
connection asks it to quit. The parent then acts as the clients: eight
connections of 25k lookups each (usage: prefork.py [RECORDS [LOOKUPS]]), with keys drawn from a skewed
distribution (most lookups hit a few records, as in production caches).
Prints a checksum of every answer. Used in docs/results.md and by
`tests/exec.rs` to check that a pre-fork server's workers are paged by
`ccvm exec` and answer as they do unpaged."""
import os
import random
import socket
import sys
import zlib

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
WORKERS = 4
CONNECTIONS = 8
LOOKUPS = int(sys.argv[2]) if len(sys.argv) > 2 else 25_000

rng = random.Random(11)
table = {
    "user:%d" % i: {
        "id": i,
        "name": "name-%d-%x" % (i, rng.getrandbits(48)),
        "visits": [rng.randrange(10_000) for _ in range(8)],
    }
    for i in range(N)
}


def answer(key):
    """One line: the record's name and the sum of its visits."""
    r = table.get(key)
    if r is None:
        return "%s -\n" % key
    return "%s %s %d\n" % (key, r["name"], sum(r["visits"]))


def serve(listener):
    """Answers connections until one says QUIT; never returns."""
    while True:
        conn, _ = listener.accept()
        with conn, conn.makefile("r") as lines, conn.makefile("w") as out:
            for line in lines:
                key = line.strip()
                if key == "QUIT":
                    out.flush()
                    conn.close()
                    os._exit(0)
                out.write(answer(key))


def ask(port, keys):
    """Sends every key on one connection and returns the answers."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall("".join(k + "\n" for k in keys).encode())
        c.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode()


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    workers = []
    for _ in range(WORKERS):
        pid = os.fork()
        if pid == 0:
            serve(listener)
        workers.append(pid)
    listener.close()
    ask_rng = random.Random(5)
    total = 0
    for _ in range(CONNECTIONS):
        keys = ["user:%d" % min(int(ask_rng.paretovariate(1.2)) * 7 % N, N - 1) for _ in range(LOOKUPS)]
        keys += ["user:%d" % ask_rng.randrange(N) for _ in range(LOOKUPS // 4)]
        for line in ask(port, keys).splitlines():
            total = (total * 31 + zlib.crc32(line.encode())) % 1_000_000_007
    # A worker that ended before its QUIT is named, with how it ended.
    for pid in workers:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sys.exit("worker %d ended early: %s" % (pid, ended(status)))
    for _ in range(WORKERS):
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(b"QUIT\n")
            c.recv(1)
    for pid in workers:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("worker %d: %s" % (pid, ended(status)))
    print(total)


def ended(status):
    """How a child ended, from its wait status."""
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status %d" % os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    main()

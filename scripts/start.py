#!/usr/bin/env python3
"""Times capvault's start on the wire: spawns `capvault serve VAULT [OPTIONS]` (the release
binary, or $CAPVAULT_BIN) $RUNS times (default 30), writes `initialize` at once, then
`notifications/initialized` and `tools/list`, over raw JSON-RPC on stdio, and prints the p50,
p95 and max milliseconds from the spawn to each answer. Each process ends when its stdin closes,
before the next starts. No SDK: what a client waits for, and nothing the client itself adds
(Python's own spawn is in the figures: about 0.7 ms here).

COLD=1 empties the kernel's page cache before each run (root only: writes
/proc/sys/vm/drop_caches), as on a user's first launch of the day: the binary's pages and the
index cache are read from the disk again.

  scripts/start.py target/bench-vaults/synthetic-100000-seed42
  COLD=1 RUNS=5 scripts/start.py ../shared/vaults/obsidian-hub
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CAPVAULT_BIN", os.path.join(ROOT, "target", "release", "capvault"))

INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "start.py", "version": "1"}},
}) + "\n"
THEN = ('{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')


def one(vault, extra):
    if os.environ.get("COLD"):
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    t0 = time.perf_counter()
    p = subprocess.Popen([BIN, "serve", vault, *extra], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(INITIALIZE.encode())
    p.stdin.flush()
    if not p.stdout.readline():
        sys.exit("capvault exited before answering initialize")
    t1 = time.perf_counter()
    p.stdin.write(THEN.encode())
    p.stdin.flush()
    if not p.stdout.readline():
        sys.exit("capvault exited before answering tools/list")
    t2 = time.perf_counter()
    p.stdin.close()
    p.wait()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3


def summary(name, xs):
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"{name} p50 {statistics.median(xs):.2f} p95 {p95:.2f} max {xs[-1]:.2f} ms"


def main():
    vault, extra = sys.argv[1], sys.argv[2:]
    runs = int(os.environ.get("RUNS", "30"))
    times = [one(vault, extra) for _ in range(runs)]
    print(f"{os.path.basename(os.path.normpath(vault))}, {runs} starts"
          f"{' with a cold page cache' if os.environ.get('COLD') else ''}: "
          f"{summary('initialize', [t[0] for t in times])}; "
          f"{summary('tools/list', [t[1] for t in times])}")


if __name__ == "__main__":
    main()

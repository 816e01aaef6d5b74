#!/usr/bin/env python3
"""Times a start: spawns `capvault serve VAULT [MORE_VAULTS...] --no-index-cache` (the release
binary, or $CAPVAULT_BIN) and prints the milliseconds from the spawn to (1) the first answer of
`read_note` on `Readme.md` of the first vault, and (2) the first ranked search of the first vault
answered by its index (`served_by: index`), polling every 5 ms. With more vaults the calls name
the first one's `vault` ($FIRST_NAME, default `A`): whether a large second vault delays a small
first one.

  scripts/first_answer.py /tmp/A                 # the vault alone
  scripts/first_answer.py /tmp/A /tmp/B          # beside another
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CAPVAULT_BIN", os.path.join(ROOT, "target", "release", "capvault"))


def main():
    vaults = sys.argv[1:]
    several = len(vaults) > 1
    first = os.environ.get("FIRST_NAME", "A")
    t0 = time.perf_counter()
    p = subprocess.Popen([BIN, "serve", *vaults, "--no-index-cache"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def send(m):
        p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()

    def call(i, name, args):
        if several:
            args["vault"] = first
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": name, "arguments": args}})
        return json.loads(p.stdout.readline())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "first_answer", "version": "1"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call(1, "read_note", {"path": "Readme.md"})
    t1 = time.perf_counter()
    i = 2
    while True:
        r = call(i, "search_notes", {"query": "obsidian"})
        i += 1
        if r["result"]["structuredContent"]["served_by"] == "index":
            break
        time.sleep(0.005)
    t2 = time.perf_counter()
    p.stdin.close()
    p.wait()
    print(f"first answer {1000 * (t1 - t0):.0f} ms, first vault's index serving "
          f"{1000 * (t2 - t0):.0f} ms")


if __name__ == "__main__":
    main()

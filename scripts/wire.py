#!/usr/bin/env python3
"""Times calls on the wire: spawns `capvault serve VAULT [OPTIONS]` (the release binary, or
$CAPVAULT_BIN), waits until vault_info says the index is ready, then sends each case of $CASES
(a JSON list of [label, method, params]) 7 times over raw JSON-RPC on stdio and prints the p50,
min and max in milliseconds and the reply's size. No SDK: what a client waits for, and nothing
the client itself adds. $SETTLE (seconds, default 0) waits that long after the index is ready,
for the work that follows a build (the text cache, the watcher) to finish first, and makes one
untimed call per case before the timed ones; $RUNS (default 7) sets the calls per case;
$WIRE_LOG names a file for the server's log (with CAPVAULT_LOG=capvault=debug, say).

  CASES='[["read", "tools/call", {"name": "read_note", "arguments": {"path": "Home"}}]]' \\
    scripts/wire.py examples/vault --no-index-cache

Several vaults: more folders after the first (`scripts/wire.py A B --no-index-cache`); the calls
then name `vault` where they need one.
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CAPVAULT_BIN", os.path.join(ROOT, "target", "release", "capvault"))


def main():
    vault, extra = sys.argv[1], sys.argv[2:]
    p = subprocess.Popen([BIN, "serve", vault, *extra], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=open(os.environ["WIRE_LOG"], "w") if os.environ.get("WIRE_LOG") else subprocess.DEVNULL)
    n = 0

    def rpc(method, params=None):
        nonlocal n
        n += 1
        m = {"jsonrpc": "2.0", "id": n, "method": method}
        if params is not None:
            m["params"] = params
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit("capvault exited")
            r = json.loads(line)
            if r.get("id") == n:
                return r, len(line)

    rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "wire.py", "version": "1"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    while True:
        r, _ = rpc("tools/call", {"name": "vault_info", "arguments": {}})
        info = json.loads(r["result"]["content"][0]["text"])
        # Several vaults (VAULT names the first; more follow as arguments): every one ready.
        states = [v["index"] for v in info["vaults"]] if "vaults" in info else [
            info.get("index", {}).get("state")]
        if all(s == "ready" for s in states):
            break
        time.sleep(0.2)
    time.sleep(float(os.environ.get("SETTLE", "0")))
    for label, method, params in json.loads(os.environ["CASES"]):
        times = []
        if "SETTLE" in os.environ:
            # Settled figures: one call first, not timed (it touches what later calls find warm).
            rpc(method, params)
        for _ in range(int(os.environ.get("RUNS", "7"))):
            t = time.perf_counter()
            r, size = rpc(method, params)
            times.append((time.perf_counter() - t) * 1000)
            if "error" in r or r.get("result", {}).get("isError"):
                sys.exit(f"{label}: {str(r)[:300]}")
        times.sort()
        print(f"{label}: p50 {statistics.median(times):.1f} ms, min {times[0]:.1f}, "
              f"max {times[-1]:.1f}, reply {size} bytes")
    p.kill()


if __name__ == "__main__":
    main()

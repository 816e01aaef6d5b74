#!/usr/bin/env python3
"""The change feed on the wire (raw JSON-RPC over stdio): `changes_since` over 1,000 changes,
the cost of keeping the change log, and the time from an edit to its notification.

    cargo build --release
    python3 scripts/gen_vault.py --notes 100000   # once: target/bench-vaults/...
    python3 scripts/changes_bench.py --vault target/bench-vaults/synthetic-100000-seed42

The vault is copied to a scratch folder first (the script edits notes). Figures go to stdout;
docs/performance.md keeps them with the command that made them.
"""

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Server:
    def __init__(self, exe, vault, cache):
        self.p = subprocess.Popen(
            [exe, "serve", vault, "--index-cache", cache],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=dict(os.environ, CAPVAULT_LOG="capvault=warn"),
        )
        self.buf = b""
        self.next_id = 0
        self.notes = []
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, v):
        self.p.stdin.write((json.dumps(v) + "\n").encode())
        self.p.stdin.flush()

    def line(self, timeout):
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.p.stdout], [], [], timeout)
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def rpc(self, method, params):
        self.next_id += 1
        i = self.next_id
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        while True:
            m = self.line(600)
            if m is None:
                raise RuntimeError(f"no answer to {method}")
            if m.get("id") == i:
                return m
            self.notes.append((time.perf_counter(), m))

    def tool(self, name, args):
        r = self.rpc("tools/call", {"name": name, "arguments": args})["result"]
        if r.get("isError"):
            raise RuntimeError(r["content"][0]["text"])
        return r["structuredContent"]

    def rss_mb(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=120)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(s, name, args, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        r = s.tool(name, args)
        out.append(1000 * (time.perf_counter() - t))
    return out, r


def log_files(cache):
    sizes = {}
    for d, _, files in os.walk(cache):
        for f in files:
            if f.startswith("changes."):
                sizes[f] = os.path.getsize(os.path.join(d, f))
    return sizes


def edit_notes(vault, paths, tag):
    for p in paths:
        with open(os.path.join(vault, p), "a") as f:
            f.write(f"\nedited {tag}\n")


def wait_logged(s, cursor, n, timeout=300):
    """Waits until the log holds `n` entries after `cursor` (pages of 200, no diffs)."""
    until = time.time() + timeout
    while time.time() < until:
        total, c = 0, cursor
        while True:
            r = s.tool("changes_since", {"cursor": c, "limit": 200, "diffs": False})
            total += len(r["changes"])
            c = r["cursor"]
            if not r["more"]:
                break
        if total >= n:
            return
        time.sleep(0.5)
    raise RuntimeError(f"only {total} of {n} changes logged")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "capvault"))
    ap.add_argument("--vault", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--notifications", type=int, default=50)
    a = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="capvault-changes-")
    vault = os.path.join(scratch, "vault")
    cache = os.path.join(scratch, "cache")
    print(f"copying {a.vault} ...", file=sys.stderr)
    shutil.copytree(a.vault, vault, symlinks=True)
    notes = sorted(
        os.path.relpath(os.path.join(d, f), vault)
        for d, _, fs in os.walk(vault) if "/." not in d
        for f in fs if f.endswith(".md")
    )
    print(f"{len(notes)} notes", file=sys.stderr)
    s = Server(a.bin, vault, cache)
    try:
        for _ in range(6000):
            info = s.tool("vault_info", {})
            if info["index"]["state"] == "ready" and info["notes"] is not None:
                break
            time.sleep(0.1)
        time.sleep(2)
        rss0 = s.rss_mb()
        cursor0 = s.tool("vault_info", {})["changes_cursor"]

        # 1,000 notes edited by another program, in bursts of 100.
        picked = notes[:: max(1, len(notes) // 1000)][:1000]
        for i in range(0, 1000, 100):
            edit_notes(vault, picked[i:i + 100], "a")
            time.sleep(0.3)
        wait_logged(s, cursor0, 1000)
        rss1 = s.rss_mb()
        files1 = log_files(cache)

        print(f"changes_since over 1,000 changes ({len(notes)} notes), {a.runs} runs each:")
        for label, args in [
            ("first page (200 notes) with diffs", {"cursor": cursor0, "limit": 200}),
            ("first page (200 notes), no diffs", {"cursor": cursor0, "limit": 200, "diffs": False}),
            ("50 notes (default) with diffs", {"cursor": cursor0}),
            ("kinds=deleted (scans all 1,000, returns none)", {"cursor": cursor0, "kinds": ["deleted"]}),
            ("folder filter (scans all 1,000)", {"cursor": cursor0, "folder": "no-such-folder"}),
            ("since 1h, 50 notes", {"since": "1h"}),
        ]:
            ms, r = timed(s, "changes_since", args, a.runs)
            size = len(json.dumps(r))
            print(f"  {label}: p50 {statistics.median(ms):.2f} ms, p95 {pct(ms, 0.95):.2f} ms, "
                  f"{len(r['changes'])} items, {size} bytes")

        # 10,000 changes: the log's cost.
        for round_ in range(9):
            for i in range(0, 1000, 250):
                edit_notes(vault, picked[i:i + 250], f"r{round_}")
                time.sleep(0.3)
        def seq(c):
            return int(c.rsplit(".", 1)[1])

        for _ in range(600):
            if seq(s.tool("vault_info", {})["changes_cursor"]) - seq(cursor0) >= 10000:
                break
            time.sleep(0.5)
        entries = seq(s.tool("vault_info", {})["changes_cursor"]) - seq(cursor0)
        time.sleep(2)
        rss2 = s.rss_mb()
        files2 = log_files(cache)
        print(f"the log after 1,000 changes: files {files1}; RSS {rss0:.0f} -> {rss1:.0f} MB")
        print(f"after {entries} changes: files {files2}; RSS {rss2:.0f} MB "
              "(RSS includes the reconciles' own growth: index segments, allocator)")

        # Edit-to-notification latency.
        target = picked[0]
        uri = "capvault:///" + "/".join(
            __import__("urllib.parse").parse.quote(c) for c in target.split("/"))
        s.rpc("resources/subscribe", {"uri": uri})
        time.sleep(1)
        s.notes.clear()
        lat = []
        for i in range(a.notifications):
            t = time.perf_counter()
            with open(os.path.join(vault, target), "a") as f:
                f.write(f"\nlatency {i}\n")
            got = None
            while got is None:
                m = s.line(10)
                if m is None:
                    break
                if m.get("method") == "notifications/resources/updated" and m["params"]["uri"] == uri:
                    got = time.perf_counter()
            if got is None:
                print("  no notification within 10 s")
                continue
            lat.append(1000 * (got - t))
            time.sleep(0.25)
        if lat:
            print(f"edit to notifications/resources/updated ({len(lat)} edits): "
                  f"p50 {statistics.median(lat):.0f} ms, p95 {pct(lat, 0.95):.0f} ms, "
                  f"max {max(lat):.0f} ms")
    finally:
        s.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

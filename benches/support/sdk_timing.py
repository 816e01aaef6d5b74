"""Times tool calls through the official MCP Python SDK (client-side validation included).

Usage: sdk_timing.py BIN VAULT RUNS CALLS_JSON [SERVE_ARGS_JSON], where CALLS_JSON is a list of
[label, tool, arguments, target_ms] and SERVE_ARGS_JSON the server's options (default
["--no-index-cache"]; with "--index-pdfs" the calls wait for the PDFs' first pass). Called by
benches/wire.rs; prints one table.
"""

import json
import sys
import time
from importlib.metadata import version

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def structured(res):
    """The structured part of a tool result (`structuredContent` in SDK 1.x, snake case in 2.x)."""
    return getattr(res, "structuredContent", None) or getattr(res, "structured_content", None)


def is_error(res):
    return getattr(res, "isError", None) or getattr(res, "is_error", False)


async def main(bin_path, vault, runs, calls, serve_args):
    params = StdioServerParameters(
        command=bin_path, args=["serve", vault, *serve_args], env={"CAPVAULT_LOG": "capvault=warn"}
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()  # the SDK validates results against these schemas
            while True:
                info = structured(await s.call_tool("vault_info", {}))
                pdfs_wanted = "--index-pdfs" in serve_args
                pdfs_ready = not pdfs_wanted or "first_pass_ms" in (info.get("pdfs") or {})
                if info["index"]["state"] == "ready" and info["notes"] is not None and pdfs_ready:
                    break
                await anyio.sleep(0.05)
            await anyio.sleep(20 if info["notes"] >= 50_000 else 3)
            print(f"through the Python SDK (mcp {version('mcp')}), same vault")
            print(f"{'call':<28} {'p50 ms':>9} {'p95 ms':>9} {'target':>9}")
            for label, tool, args, target in calls:
                times = []
                for i in range(runs + 1):
                    t = time.perf_counter()
                    res = await s.call_tool(tool, args)
                    dt = (time.perf_counter() - t) * 1e3
                    assert not is_error(res), (tool, res.content)
                    if i:
                        times.append(dt)
                times.sort()
                p50 = times[round((len(times) - 1) * 0.5)]
                p95 = times[round((len(times) - 1) * 0.95)]
                print(f"{label:<28} {p50:>9.2f} {p95:>9.2f} {target:>9.1f}")


serve_args = json.loads(sys.argv[5]) if len(sys.argv) > 5 else ["--no-index-cache"]
anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), serve_args)

"""Times tool calls through the official MCP Python SDK (client-side validation included).

Usage: sdk_timing.py BIN VAULT RUNS CALLS_JSON, where CALLS_JSON is a list of
[label, tool, arguments, target_ms]. Called by benches/wire.rs; prints one table.
"""

import json
import sys
import time
from importlib.metadata import version

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(bin_path, vault, runs, calls):
    params = StdioServerParameters(
        command=bin_path, args=["serve", vault, "--no-index-cache"], env={"CAPVAULT_LOG": "capvault=warn"}
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()  # the SDK validates results against these schemas
            while True:
                info = (await s.call_tool("vault_info", {})).structuredContent
                if info["index"]["state"] == "ready" and info["notes"] is not None:
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
                    assert not res.isError, (tool, res.content)
                    if i:
                        times.append(dt)
                times.sort()
                p50 = times[round((len(times) - 1) * 0.5)]
                p95 = times[round((len(times) - 1) * 0.95)]
                print(f"{label:<28} {p50:>9.2f} {p95:>9.2f} {target:>9.1f}")


anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))

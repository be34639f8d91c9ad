"""The overhead of an MCP tool call through carryall, against the bare `mcp` client.

One server process (tests/fixtures/mcp_hostile_server.py, its `pid` tool: a
round trip that does almost nothing), two clients side by side in this one
process: carryall's `McpToolbox` tool, called as the agent calls it
(`Tool.invoke` from a plain thread: argument check, hop to the MCP loop,
result mapped to a `ToolOutput`), and an `mcp.ClientSession` awaited
directly on its own event loop. Blocks of calls alternate between the two.
Each call is timed as CPU of this whole process (`time.process_time`: the
client's loop thread works for both) and as wall time, collector on;
median and mean are printed per call.

    .venv/bin/python benchmarks/mcp_call.py [--calls 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import statistics
import sys
import threading
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from carryall.config import McpServer
from carryall.mcp import McpToolbox

Timings = tuple[list[float], list[float]]
"""CPU and wall seconds of each call of a block."""

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "mcp_hostile_server.py"


class Bare:
    """The bare SDK client: one session held by one task on a loop of its own.

    The SDK's contexts must be left in the task that entered them, so that
    task also runs each block of calls, handed to it through a queue.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.queue: asyncio.Queue[tuple[int, concurrent.futures.Future[Timings]] | None]
        self.queue = asyncio.Queue()
        self.done = asyncio.run_coroutine_threadsafe(self._hold(), self.loop)

    async def _hold(self) -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            while (job := await self.queue.get()) is not None:
                calls, answer = job
                cpu, wall = [], []
                for _ in range(calls):
                    c, w = time.process_time(), time.perf_counter()
                    await session.call_tool("pid", {})
                    cpu.append(time.process_time() - c)
                    wall.append(time.perf_counter() - w)
                answer.set_result((cpu, wall))

    def block(self, calls: int) -> Timings:
        answer: concurrent.futures.Future[Timings] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (calls, answer))
        return answer.result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        self.done.result()
        self.loop.call_soon_threadsafe(self.loop.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--rounds", type=int, default=5, help="blocks per contender")
    args = parser.parse_args()

    server = McpServer(command=sys.executable, args=[str(FIXTURE)])
    times: dict[str, Timings] = {"carryall": ([], []), "bare mcp": ([], [])}
    bare = Bare()
    with McpToolbox({"bench": server}) as box:
        box.start()
        (tool,) = [t for t in box.tools if t.name == "bench__pid"]
        for _ in range(20):  # warm both: imports, caches, the server's first calls
            tool.invoke({})
            bare.block(1)
        for _ in range(args.rounds):
            cpu, wall = times["carryall"]
            for _ in range(args.calls):
                c, w = time.process_time(), time.perf_counter()
                tool.invoke({})
                cpu.append(time.process_time() - c)
                wall.append(time.perf_counter() - w)
            b_cpu, b_wall = bare.block(args.calls)
            times["bare mcp"][0].extend(b_cpu)
            times["bare mcp"][1].extend(b_wall)
    bare.close()

    n = args.calls * args.rounds
    print(f"MCP tool call, stdio round trip, {n} calls each (per call, microseconds)")
    print(
        f"{'client':<10} {'cpu median':>11} {'cpu mean':>9} {'wall median':>12} {'wall mean':>10}"
    )
    for name, (cpu, wall) in times.items():
        print(
            f"{name:<10} {statistics.median(cpu) * 1e6:>11.0f} {statistics.mean(cpu) * 1e6:>9.0f}"
            f" {statistics.median(wall) * 1e6:>12.0f} {statistics.mean(wall) * 1e6:>10.0f}"
        )
    ours, theirs = times["carryall"], times["bare mcp"]
    cpu_ratio = statistics.median(ours[0]) / statistics.median(theirs[0])
    wall_ratio = statistics.median(ours[1]) / statistics.median(theirs[1])
    print(f"carryall / bare: cpu median {cpu_ratio:.2f}x, wall median {wall_ratio:.2f}x")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures CPU-bound sync functions on a Python worker: threads (the
default: every slot's function shares the process's GIL) against worker
processes (processes=N), on a three-node cluster of bin/barista on this
machine (docs/sdk-python.md, "CPU-bound functions and the GIL").

    make build
    /usr/bin/python3 sdk/python/bench/cpu_bound.py [--jobs 120] [--cpu-ms 150] [--slots 4] [--processes 0,2,4]

For each setting of processes it queues --jobs jobs of --cpu-ms of CPU
each (a busy loop on the thread's CPU clock), starts a worker of --slots
slots, and measures the wall time from the worker's start until the
cluster says every job completed, with the CPU the cluster billed. The
servers run on the same cores: what the jobs get is what the machine
has free (run nothing else beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

import barista  # noqa: E402
from cluster import ADMIN_TOKEN, ROOT, WORKER_TOKEN, Cluster  # noqa: E402
from typed_jobs import Crunch, crunch  # noqa: E402


async def measure(addrs: list, tenant: str, jobs: int, cpu_ms: int, slots: int, processes: int) -> tuple:
    async with barista.Client(addrs, token=ADMIN_TOKEN) as c:
        await c.upsert_tenant(tenant, tier="gold")
        await c.submit_many([{"payload": Crunch(cpu_ms=cpu_ms), "tenant": tenant, "cost": 1} for _ in range(jobs)])
        worker = barista.Worker(addrs, token=WORKER_TOKEN, concurrency=slots, processes=processes, id=tenant)
        worker.register(None, crunch)
        start = time.monotonic()
        task = asyncio.get_running_loop().create_task(worker.run(handle_signals=False))
        while (await c.usage(tenant=tenant)).completed < jobs:
            await asyncio.sleep(0.05)
        wall = time.monotonic() - start
        billed = (await c.usage(tenant=tenant)).cpu_billed
        await worker.stop(grace=10)
        await task
    return wall, billed.total_seconds()


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=120)
    p.add_argument("--cpu-ms", type=int, default=150)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--processes", default="0,2,4")
    args = p.parse_args()
    binary = Path(os.environ.get("BARISTA_BIN") or ROOT / "bin" / "barista")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(binary, Path(tmp), 3)
        try:
            cluster.start()
            print(f"{args.jobs} jobs of {args.cpu_ms} ms CPU on {args.slots} slots, {os.cpu_count()} cores:")
            for i, n in enumerate(int(x) for x in args.processes.split(",")):
                wall, billed = await measure(cluster.addrs, f"cpu-{i}", args.jobs, args.cpu_ms, args.slots, n)
                how = "threads (one GIL)" if n == 0 else f"processes={n}"
                print(f"  {how:<18} {wall:6.1f} s wall, {args.jobs * args.cpu_ms / 1000 / wall:4.2f} CPU-seconds of jobs "
                      f"a second, {billed:6.1f} s billed")
        finally:
            cluster.stop()


if __name__ == "__main__":
    asyncio.run(main())

#!/usr/bin/env python3
"""Measures how many zero-length jobs per second a Python worker of this
SDK runs on 4 slots, against three servers of bin/barista on this
machine (BENCHMARKS.md, "The Python SDK's worker").

    make build
    /usr/bin/python3 sdk/python/bench/worker_throughput.py [--jobs 3000] [--rounds 3] [--slots 4] [--go]

For each kind of worker and each round: it queues --jobs jobs of a
tenant of its own (batch submits, before the worker starts), starts the
worker, waits until the cluster says every job completed, stops the
worker, and reads the tenant's events: the rate is the completed events
after the first --warmup, over the leader's wall clock between them. The
kinds: a Python worker of a sync function (run in its slot's thread), of
an async one (run in the event loop), and, with --go, the reference: as
many processes of examples/go-worker (Go functions of the typed SDK,
its jobs of kind count-words) as there are slots. The servers run with fsync, on the same cores as the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

import barista  # noqa: E402
from cluster import ADMIN_TOKEN, ROOT, WORKER_TOKEN, Cluster, Process  # noqa: E402


async def python_worker(addrs, name: str, kind: str, slots: int):
    """Starts an in-process worker of a zero-length function; returns its
    stop."""
    worker = barista.Worker(addrs, token=WORKER_TOKEN, concurrency=slots, id=name)
    if kind == "python-sync":
        worker.register(kind, lambda ctx: None)
    else:
        async def zero(ctx):
            return None
        worker.register(kind, zero)
    task = asyncio.get_running_loop().create_task(worker.run(handle_signals=False))

    async def stop():
        await worker.stop(grace=10)
        await task
    return stop


async def go_workers(addrs, name: str, slots: int, binary: Path, logs: Path):
    """Starts slots processes of examples/go-worker; returns their stop."""
    env = dict(os.environ, BARISTA_TOKEN=WORKER_TOKEN)
    procs = [Process(f"{name}-{k}", [str(binary), "--server", ",".join(addrs), "--id", f"{name}-{k}"],
                     logs / f"{name}-{k}.log", env=env) for k in range(1, slots + 1)]

    async def stop():
        for p in procs:
            p.kill()
    return stop


async def one_round(addrs, tenant: str, kind: str, args, go_bin) -> float:
    payload = b'{"text": ""}' if kind == "go-func" else b""
    job_kind = "count-words" if kind == "go-func" else kind  # the kind examples/go-worker registers
    async with barista.Client(addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant(tenant, tier="gold")
        for start in range(0, args.jobs, 1000):
            res = await admin.submit_many([{"key": f"{tenant}-{i}"} for i in range(start, min(args.jobs, start + 1000))],
                                          tenant=tenant, kind=job_kind, cost=0.001, payload=payload)
            bad = [r for r in res if not isinstance(r, barista.Job)]
            assert not bad, bad[:3]
        cpu0 = _cpu()
        if kind == "go-func":
            stop = await go_workers(addrs, f"bench-{tenant}", args.slots, go_bin, args.logs)
        else:
            stop = await python_worker(addrs, f"bench-{tenant}", kind, args.slots)
        try:
            deadline = time.monotonic() + 600
            while (u := await admin.usage(tenant=tenant)).completed < args.jobs:
                assert time.monotonic() < deadline, u
                await asyncio.sleep(0.1)
            assert (u.completed, u.failures) == (args.jobs, 0), u
            cpu = _cpu() - cpu0
        finally:
            await stop()
        ends = sorted([ev.at async for ev in admin.watch(tenant=tenant, from_oldest=True, until_idle=True)
                       if ev.kind == "completed"])
        assert len(ends) == args.jobs
        rate = (args.jobs - args.warmup) / (ends[-1] - ends[args.warmup - 1]).total_seconds()
        # This process's CPU per job while the worker ran (for a Python
        # worker, the worker's; for go-func, only the polling).
        return rate, 1000 * cpu / args.jobs


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build_go_worker(out: Path) -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    binary = out / "go-worker"
    subprocess.run([go, "build", "-o", str(binary), "./go-worker"], cwd=ROOT / "examples", check=True)
    return binary


async def main_async(args) -> dict:
    binary = Path(os.environ.get("BARISTA_BIN") or ROOT / "bin" / "barista")
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: run make build")
    with tempfile.TemporaryDirectory(prefix="barista-pybench-") as d:
        args.logs = Path(d)
        kinds = ["python-sync", "python-async"] + (["go-func"] if args.go else [])
        go_bin = build_go_worker(Path(d)) if args.go else None
        c = Cluster(binary, Path(d) / "cluster", 3)
        try:
            await asyncio.get_running_loop().run_in_executor(None, c.start)
            out = {k: [] for k in kinds}
            cpu = {k: [] for k in kinds}
            # Rounds interleave the kinds, so that a slower moment of the
            # machine does not fall on one kind alone.
            for r in range(args.rounds):
                for kind in kinds:
                    rate, ms = await one_round(c.addrs, f"{kind}-{r}", kind, args, go_bin)
                    out[kind].append(rate)
                    cpu[kind].append(ms)
                    print(f"{kind} round {r + 1}: {rate:,.0f} jobs/s, {ms:.3f} ms of this process's CPU a job",
                          file=sys.stderr)
            return {k: {"median": statistics.median(v), "rounds": v, "cpu_ms_per_job": statistics.median(cpu[k])}
                    for k, v in out.items()}
        finally:
            c.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300, help="completed jobs not timed at the start of each round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--go", action="store_true", help="also measure examples/go-worker, one process per slot (needs go)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a line per kind")
    args = p.parse_args()
    if not 0 < args.warmup < args.jobs:
        p.error("--warmup must be between 0 and --jobs")
    res = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps({"slots": args.slots, "jobs": args.jobs, **res}))
    else:
        for kind, r in res.items():
            rounds = " ".join(f"{x:,.0f}" for x in r["rounds"])
            print(f"{kind}, {args.slots} slots: {r['median']:,.0f} zero-length jobs/s (median of [{rounds}]); "
                  f"{r['cpu_ms_per_job']:.3f} ms of this process's CPU a job")
    return 0


if __name__ == "__main__":
    sys.exit(main())

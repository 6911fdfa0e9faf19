"""Typed payloads: a dataclass (or any JSON value) submitted by the client
comes to the worker's function as the same type; a payload that is not
that type fails its job for good; sync functions in worker processes
(processes=N) — against a real three-node cluster."""

from __future__ import annotations

import os
from typing import Dict, List

import barista
from cluster import ACME_TOKEN, WORKER_TOKEN, running
from typed_jobs import Box, Crunch, Resize, crunch


async def ended(c: barista.Client, job: barista.Job) -> barista.Job:
    async for _ in c.watch(job):
        pass
    return await c.get(job)


async def test_a_dataclass_payload_reaches_the_function_as_itself(cluster) -> None:
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, id="py-typed")
    seen: List[Resize] = []

    @worker.job()  # the kind is Resize.kind
    def resize(ctx: barista.JobContext[Resize]) -> str:
        seen.append(ctx.args)
        crop = ctx.args.crop
        assert crop is not None
        return f"{ctx.args.image} {ctx.args.width} {crop.w}x{crop.h} {','.join(ctx.args.tags)}"

    @worker.job("sum")
    async def total(ctx: barista.JobContext[List[int]]) -> str:
        return str(sum(ctx.args))

    @worker.job("raw")
    def raw(ctx: barista.JobContext[bytes]) -> bytes:
        return ctx.args[::-1]

    @worker.job("labels", args=dict)
    def labels(ctx: barista.JobContext[Dict[str, str]]) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(ctx.args.items()))

    assert worker.kinds == ["labels", "raw", "resize-typed", "sum"]
    sent = Resize(image="a.png", width=640, crop=Box(0, 0, 10, 20), tags=["x", "y"])
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker):
        job = await c.submit(sent, cost=1)
        assert job.kind == "resize-typed" and job.form == "function"
        got = await ended(c, job)
        assert (got.state, got.result) == ("completed", "a.png 640 10x20 x,y")
        assert seen == [sent] and type(seen[0]) is Resize and type(seen[0].crop) is Box
        assert got.args(Resize) == sent

        for payload, kind, result in (([1, 2, 39], "sum", "42"), (b"abc", "raw", "cba"),
                                      ({"b": "2", "a": "1"}, "labels", "a=1,b=2")):
            got = await ended(c, await c.submit(payload, kind=kind, cost=1))
            assert (got.state, got.result) == ("completed", result), got

        # Not a Resize: failed at once, no retry, saying why.
        for payload, why in ((b"not json", "not JSON"), ({"image": "b.png"}, "no field 'width'"),
                             ({"image": "b.png", "width": "wide"}, "payload.width: the string 'wide' where int is wanted")):
            bad = await ended(c, await c.submit(payload, kind="resize-typed", cost=1, max_attempts=3))
            assert (bad.state, bad.attempt, bad.failures) == ("failed", 1, 1), bad
            assert bad.error.startswith(f"job {bad.id}: its payload is not the arguments of kind 'resize-typed' (Resize): ")
            assert why in bad.error, bad.error
        assert len(seen) == 1


async def test_sync_functions_in_worker_processes(cluster) -> None:
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, id="py-procs", concurrency=4, processes=2)
    worker.register(None, crunch)  # kind crunch, arguments Crunch, both from the function's type
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker):
        jobs = [await c.submit(Crunch(cpu_ms=200), cost=1) for _ in range(6)]
        done = [await ended(c, j) for j in jobs]
    assert [j.state for j in done] == ["completed"] * 6, done
    pids = {int(j.result.split()[0]) for j in done}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2, pids
    assert all(j.result.split()[1:] == ["Crunch", str(j.id)] for j in done)
    # Billed the call's CPU in its process: the 200 ms it burnt.
    assert all(200 <= j.cpu.total_seconds() * 1000 < 600 for j in done), [j.cpu for j in done]

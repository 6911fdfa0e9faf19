"""The in-process worker against a real three-node cluster: routing by
kind, results and CPU, four slots at once, cancels."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest

import barista
from cluster import ACME_TOKEN, WORKER_TOKEN, running


async def follow(c: barista.Client, job) -> list:
    """The kinds of job's events until its end."""
    return [ev.kind async for ev in c.watch(job)]


def burn(seconds: float) -> int:
    """Spends about that much CPU of this thread."""
    end, n = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        n += 1
    return n


async def test_python_functions_run_routed_by_kind_with_result_and_cpu(cluster):
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, size="md", id="py-route")

    @worker.job("upper")
    def upper(ctx):
        burn(0.3)
        return ctx.payload.upper()

    @worker.job("greet")
    async def greet(ctx):
        await asyncio.sleep(0.25)
        return f"hello {ctx.tenant}, job {ctx.job_id} attempt {ctx.attempt} kind {ctx.kind} on {ctx.worker_id}"

    @worker.job("broken")
    def broken(ctx):
        raise ValueError("the payload is not a photo")

    @worker.job("refuse")
    def refuse(ctx):
        raise barista.Unrunnable("version 3 payloads are not supported")

    assert worker.kinds == ["broken", "greet", "refuse", "upper"]
    assert worker.worker_ids == ["py-route-1"]
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker, stop_within=10):
        up = await c.submit(b"shout", kind="upper", size="md", cost=1)
        hi = await c.submit(b"", kind="greet", cost=1)
        assert await follow(c, up) == ["queued", "assigned", "started", "completed"]
        assert await follow(c, hi) == ["queued", "assigned", "started", "completed"]
        up, hi = await c.get(up), await c.get(hi)
        assert (up.state, up.result, up.error, up.exit_code, up.attempt, up.worker_id) == (
            "completed", "SHOUT", "", 0, 1, "py-route-1")
        # A sync function is billed its thread's CPU: the 300 ms it burnt,
        # and not much more.
        assert timedelta(milliseconds=300) <= up.cpu < timedelta(milliseconds=600), up.cpu
        assert hi.result == f"hello acme, job {hi.id} attempt 1 kind greet on py-route-1"
        # An async one, the wall time it took.
        assert timedelta(milliseconds=250) <= hi.cpu < timedelta(seconds=2), hi.cpu

        bad = await c.submit(b"", kind="broken", cost=1, max_attempts=2)
        assert await follow(c, bad) == ["queued", "assigned", "started", "requeued", "assigned", "started", "failed"]
        bad = await c.get(bad)
        assert (bad.state, bad.attempt, bad.failures, bad.exit_code) == ("failed", 2, 2, 1)
        assert bad.error.startswith("Traceback (most recent call last):")
        assert bad.error.endswith("ValueError: the payload is not a photo\n")

        # Unrunnable, or a kind without a function in a job of no form (a
        # client of an earlier build; any worker is given it): failed at
        # once, no retry. (A function job of that kind is never given to
        # this worker: test_kinds.py.)
        no = await c.submit(b"", kind="refuse", cost=1, max_attempts=3)
        assert (await follow(c, no))[-1] == "failed"
        no = await c.get(no)
        assert (no.state, no.attempt, no.error) == ("failed", 1, "version 3 payloads are not supported")
        odd = await c.submit(b"", kind="thumbnail", cost=1, max_attempts=3, form="any")
        assert (await follow(c, odd))[-1] == "failed"
        odd = await c.get(odd)
        assert (odd.state, odd.attempt, odd.exit_code) == ("failed", 1, 127)
        assert odd.error == ("no function for kind 'thumbnail' on this worker (worker py-route-1, pool default); "
                             "its functions are for the kinds 'broken', 'greet', 'refuse', 'upper'")


async def test_four_slots_run_four_jobs_at_once(cluster):
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, concurrency=4, id="py-four")
    # Each run waits at the barrier for the three others: the jobs end
    # only if four run at the same time.
    barrier = threading.Barrier(4, timeout=30)
    inside = []

    @worker.job("together")
    def together(ctx):
        inside.append(ctx.worker_id)
        return str(barrier.wait())

    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker, stop_within=10):
        jobs = [await c.submit(b"", kind="together", cost=1, key=f"together-{i}") for i in range(4)]
        for j in jobs:
            assert (await follow(c, j))[-1] == "completed"
        done = [await c.get(j) for j in jobs]
        assert sorted(j.result for j in done) == ["0", "1", "2", "3"]
        assert sorted(j.worker_id for j in done) == ["py-four-1", "py-four-2", "py-four-3", "py-four-4"]
        assert sorted(inside) == ["py-four-1", "py-four-2", "py-four-3", "py-four-4"]


async def test_cancel_reaches_a_running_function(cluster):
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, concurrency=2, id="py-cancel")
    seen = {}

    @worker.job("wait-sync")
    def wait_sync(ctx):
        stopped = ctx.cancelled.wait(30)
        seen["sync"] = (stopped, ctx.cancel_reason)
        return "stopped" if stopped else "not stopped"

    @worker.job("wait-async")
    async def wait_async(ctx):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen["async"] = ctx.cancel_reason
            raise
        return "slept"

    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker, stop_within=10):
        for kind in ("wait-sync", "wait-async"):
            job = await c.submit(b"", kind=kind, cost=1)
            kinds = []
            async for ev in c.watch(job):
                kinds.append(ev.kind)
                if ev.kind == "started":
                    assert await c.cancel(job) == barista.Cancel(state="running", requested=True)
            assert kinds == ["queued", "assigned", "started", "cancel_requested", "cancelled"]
            got = await c.get(job)
            assert got.state == "cancelled"
            assert got.cpu < timedelta(seconds=5)
        assert seen == {"sync": (True, "requested"), "async": "requested"}


async def test_snooze_runs_the_job_again_later_without_a_failure(cluster):
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, id="py-snooze")
    runs = []

    @worker.job("later")
    def later(ctx):
        runs.append((ctx.attempt, time.monotonic()))
        if ctx.attempt == 1:
            raise barista.Snooze(timedelta(seconds=1))
        return "woke"

    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c, running(worker, stop_within=10):
        job = await c.submit(b"", kind="later", cost=1, max_attempts=1)
        events = [(ev.kind, ev.reason, ev.attempt) async for ev in c.watch(job)]
        # Snoozed, the job waits scheduled, then runs again, no failure
        # counted (max_attempts 1 would have failed it).
        assert events == [("queued", "", 0), ("assigned", "", 1), ("started", "", 1), ("scheduled", "snoozed", 1),
                          ("released", "", 1), ("assigned", "", 2), ("started", "", 2), ("completed", "", 2)]
        got = await c.get(job)
        assert (got.state, got.result, got.attempt, got.failures, got.snoozes) == ("completed", "woke", 2, 0, 0)
        assert [a for a, _ in runs] == [1, 2]
        assert runs[1][1] - runs[0][1] >= 1.0


async def test_a_worker_the_cluster_refuses_for_good_stops(cluster):
    # A pool the cluster does not hold, a token it does not know: run()
    # raises the refusal instead of retrying for ever.
    nowhere = barista.Worker(cluster.addrs, token=WORKER_TOKEN, pool="nowhere", id="py-nowhere")
    nowhere.register("x", lambda ctx: None)
    with pytest.raises(barista.NotFound) as e:
        await asyncio.wait_for(nowhere.run(handle_signals=False), 20)
    assert e.value.code == "NOT_FOUND"
    assert e.value.message.startswith("worker 'py-nowhere-1': ")
    assert "nowhere" in e.value.message
    stranger = barista.Worker(cluster.addrs, token="not-a-token", id="py-stranger")
    stranger.register("x", lambda ctx: None)
    with pytest.raises(barista.Unauthenticated):
        await asyncio.wait_for(stranger.run(handle_signals=False), 20)

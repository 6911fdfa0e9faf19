"""A worker of many slots on one stream against a real cluster: fifty
slots on one connection and one stream run fifty jobs at once, and a
kill -9 of the leader with twenty slots running loses no job and runs
none twice."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections import Counter

import barista
from barista import worker as worker_module
from barista._proto import worker_pb2, worker_pb2_grpc
from cluster import ACME_TOKEN, ADMIN_TOKEN, WORKER_TOKEN, running


def grpc_connections(node) -> float:
    """The node's open gRPC connections (barista_connections{listener="grpc"})."""
    with urllib.request.urlopen(f"http://{node.http_addr}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('barista_connections{listener="grpc"}'):
                return float(line.split()[-1])
    raise AssertionError("no barista_connections{listener=\"grpc\"} in the metrics")


def steady_connections(node) -> float:
    """The node's gRPC connections once they stop moving (connections of
    earlier tests may still be closing)."""
    last, since = grpc_connections(node), time.monotonic()
    while time.monotonic() - since < 0.5:
        time.sleep(0.1)
        now = grpc_connections(node)
        if now != last:
            last, since = now, time.monotonic()
    return last


def sessions(node, prefix: str) -> Counter:
    """The states of the leader's connected worker sessions whose ID starts
    with prefix."""
    resp = worker_pb2_grpc.WorkerStub(node.channel()).ListWorkers(worker_pb2.ListWorkersRequest(), metadata=node.md(),
                                                                   timeout=5)
    return Counter(w.state for w in resp.workers if w.connected and w.worker_id.startswith(prefix))


def count_streams(monkeypatch) -> list:
    """Counts the worker streams (Connect calls) the SDK opens from now on."""
    opened: list = []

    class Counting(worker_pb2_grpc.WorkerStub):
        def __init__(self, channel):
            super().__init__(channel)
            connect = self.Connect

            def counted(*args, **kwargs):
                opened.append(1)
                return connect(*args, **kwargs)

            self.Connect = counted

    monkeypatch.setattr(worker_module.worker_pb2_grpc, "WorkerStub", Counting)
    return opened


def holding(worker: barista.Worker, kind: str, want: int):
    """Registers a function for kind that holds every run until release is
    set; returns (runs per job, all started, release)."""
    runs: Counter = Counter()
    started, release = asyncio.Event(), asyncio.Event()

    @worker.job(kind)
    async def hold(ctx):
        runs[ctx.job_id] += 1
        if sum(runs.values()) == want:
            started.set()
        await release.wait()
        return f"held {ctx.job_id}"

    return runs, started, release


async def completed(c: barista.Client, jobs) -> list:
    """(state, attempt, result) of each job once it has ended."""
    out = []
    for j in jobs:
        async for _ in c.watch(j):
            pass
        j = await c.get(j)
        out.append((j.state, j.attempt, j.result))
    return out


async def with_acme(c) -> list:
    """The addresses of cluster c, its leader's first, once it has tenant acme."""
    leader = c.wait_leader()
    async with barista.Client(c.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("acme", tier="gold")
    return [leader.grpc_addr] + [n.grpc_addr for n in c.nodes if n is not leader]


async def test_fifty_slots_on_one_stream_run_fifty_jobs_at_once(own_cluster, monkeypatch):
    """On a cluster of its own, so that the leader's connections are only
    the test's."""
    order = await with_acme(own_cluster)
    leader = own_cluster.wait_leader()
    loop = asyncio.get_running_loop()
    async with barista.Client(order, token=ACME_TOKEN) as c:
        jobs = await c.submit_many([{"payload": b"", "kind": "fifty", "cost": 1}] * 50)
    # (The client is closed first: gRPC would give a worker in this
    # process the client's connection to the same node.)
    assert await loop.run_in_executor(None, sessions, leader, "py-fifty-") == Counter()
    before = await loop.run_in_executor(None, steady_connections, leader)
    streams = count_streams(monkeypatch)
    w = barista.Worker(order, token=WORKER_TOKEN, id="py-fifty", concurrency=50)
    runs, started, release = holding(w, "fifty", 50)
    async with running(w):
        await asyncio.wait_for(started.wait(), 30)
        assert w.busy() == 50
        assert await loop.run_in_executor(None, sessions, leader, "py-fifty-") == Counter(busy=50)
        assert await loop.run_in_executor(None, grpc_connections, leader) == before + 1
        assert len(streams) == 1
        release.set()
        async with barista.Client(order, token=ACME_TOKEN) as c:
            assert await completed(c, jobs) == [("completed", 1, f"held {j.id}") for j in jobs]
    assert sorted(runs) == sorted(j.id for j in jobs) and set(runs.values()) == {1}


async def test_kill_9_of_the_leader_with_twenty_slots_running(own_cluster):
    c = own_cluster
    order = await with_acme(c)
    old = c.wait_leader()
    loop = asyncio.get_running_loop()
    async with barista.Client(order, token=ACME_TOKEN) as client:
        jobs = await client.submit_many([{"payload": b"", "kind": "hold", "cost": 1}] * 20)
        w = barista.Worker(order, token=WORKER_TOKEN, id="py-fo", concurrency=20)
        runs, started, release = holding(w, "hold", 20)
        async with running(w):
            await asyncio.wait_for(started.wait(), 30)
            assert [c.addr for c in w._dialer.conns.values()] == [old.grpc_addr]
            await loop.run_in_executor(None, old.kill)
            new = await loop.run_in_executor(None, c.wait_leader, 20)
            assert new is not old
            # The slots find the new leader and resume their runs there.
            deadline = time.monotonic() + 30
            while await loop.run_in_executor(None, sessions, new, "py-fo-") != Counter(busy=20):
                assert time.monotonic() < deadline, "the slots did not resume their runs at the new leader"
                await asyncio.sleep(0.1)
            assert [c.addr for c in w._dialer.conns.values()] == [new.grpc_addr]
            release.set()
            assert await completed(client, jobs) == [("completed", 1, f"held {j.id}") for j in jobs]
        assert sorted(runs) == sorted(j.id for j in jobs) and set(runs.values()) == {1}

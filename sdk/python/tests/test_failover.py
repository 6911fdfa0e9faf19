"""kill -9 of the leader while keyed submits go on, and a watch across
it: no job lost, none made twice, no event missed or seen twice."""

from __future__ import annotations

import asyncio

import barista
from cluster import ACME_TOKEN, ADMIN_TOKEN

JOBS = 300
SENDERS = 8


async def test_kill_9_of_the_leader_during_300_keyed_submits(own_cluster):
    c = own_cluster
    leader = c.wait_leader()
    async with barista.Client(c.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("acme", tier="gold")
    # The client asks the leader first, so that the kill breaks calls in
    # flight there.
    order = [leader.grpc_addr] + [n.grpc_addr for n in c.nodes if n is not leader]
    async with barista.Client(order, token=ACME_TOKEN) as client, \
            barista.Client(order, token=ACME_TOKEN) as watcher:
        seen = []
        all_queued = asyncio.Event()

        async def watch():
            async for ev in watcher.watch(from_oldest=True):
                seen.append(ev)
                if sum(1 for e in seen if e.kind == "queued") == JOBS:
                    all_queued.set()
                    return

        watching = asyncio.get_running_loop().create_task(watch())
        answers = {}
        keys = asyncio.Queue()
        for i in range(JOBS):
            keys.put_nowait(i)
        killed = asyncio.Event()

        async def sender():
            while not keys.empty():
                i = keys.get_nowait()
                job = await client.submit(f"job {i}".encode(), kind="failover", cost=1, key=f"order-{i}")
                answers[i] = job
                if len(answers) == JOBS // 3 and not killed.is_set():
                    killed.set()
                    leader.kill()  # SIGKILL, then wait for the process to end

        await asyncio.gather(*(sender() for _ in range(SENDERS)))
        assert killed.is_set()
        new_leader = await asyncio.get_running_loop().run_in_executor(None, c.wait_leader, 20)
        assert new_leader is not leader

        # Every submit was answered, each key with a job of its own.
        assert sorted(answers) == list(range(JOBS))
        assert len({j.id for j in answers.values()}) == JOBS
        # The cluster holds exactly those jobs: none lost, none twice.
        listed = [j async for j in client.jobs(page_size=1000)]
        assert len(listed) == JOBS
        assert sorted(j.key for j in listed) == sorted(f"order-{i}" for i in range(JOBS))
        assert {j.key: j.id for j in listed} == {f"order-{i}": answers[i].id for i in range(JOBS)}
        assert {j.payload for j in listed} == {None}
        # The watch went on through the kill: every job's queued event,
        # once, in order.
        await asyncio.wait_for(all_queued.wait(), 30)
        await watching
        seqs = [e.seq for e in seen]
        assert seqs == sorted(set(seqs))
        assert sorted(e.job_id for e in seen if e.kind == "queued") == sorted(j.id for j in answers.values())

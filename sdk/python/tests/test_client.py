"""The client against a real three-node cluster."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import barista
import pytest
from cluster import ACME_TOKEN, ADMIN_TOKEN, WORKER_TOKEN


async def test_submit_through_a_follower_and_watch_to_the_end(cluster):
    # The client knows only a follower: the submit is forwarded to the
    # leader, the watch is served by the follower from its own state.
    follower = cluster.followers()[0]
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, size="md", id="py-follow")
    worker.register("render", lambda ctx: b"rendered " + ctx.payload)
    before = datetime.now(timezone.utc)
    async with barista.Client([follower.grpc_addr], token=ACME_TOKEN) as c:
        job = await c.submit(b"follow me", kind="render", size="md", cost=timedelta(seconds=2), key="follow-1")
        assert job.created is True
        assert job.state == "queued"
        assert (job.kind, job.size, job.pool, job.key, job.cost) == ("render", "md", "default", "follow-1", timedelta(seconds=2))
        running = asyncio.get_running_loop().create_task(worker.run(handle_signals=False))
        try:
            events = [ev async for ev in c.watch(job)]
        finally:
            await worker.stop(grace=5)
            await running
        assert [ev.kind for ev in events] == ["queued", "assigned", "started", "completed"]
        assert {(ev.job_id, ev.tenant) for ev in events} == {(job.id, "acme")}
        assert [ev.worker_id for ev in events] == ["", "py-follow-1", "py-follow-1", ""]
        seqs = [ev.seq for ev in events]
        assert seqs == sorted(seqs)
        for ev in events:
            assert before - timedelta(seconds=1) <= ev.at <= datetime.now(timezone.utc) + timedelta(seconds=1)
        got = await c.get(job.id)
        assert (got.id, got.state, got.tenant, got.kind, got.size, got.payload, got.result) == (
            job.id, "completed", "acme", "render", "md", b"follow me", "rendered follow me")
        assert (got.cost, got.cost_source, got.attempt, got.exit_code) == (timedelta(seconds=2), "submitted", 1, 0)
        assert got.submitted_at is not None and before - timedelta(seconds=1) <= got.submitted_at
        assert got.ended_at is not None and got.ended_at >= got.submitted_at
        assert got.done


async def test_a_keyed_resend_answers_the_same_job(cluster):
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c:
        first = await c.submit(b"invoice 2291", kind="render", cost=1.5, key="invoice-2291")
        again = await c.submit(b"invoice 2291", kind="render", cost=1.5, key="invoice-2291")
        assert first.created is True and first.state == "queued"
        assert again.id == first.id
        assert again.created is False and again.state is None
        # Through another node, the same.
        other = barista.Client(list(reversed(cluster.addrs)), token=ACME_TOKEN)
        try:
            third = await other.submit(b"invoice 2291", kind="render", cost=1.5, key="invoice-2291")
        finally:
            await other.close()
        assert (third.id, third.created) == (first.id, False)
        await c.cancel(first)


async def test_jobs_lists_every_page_and_explain_says_why(cluster):
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("pager", tier="free")
        jobs = await admin.submit_many([{"payload": f"p{i}", "key": f"page-{i}"} for i in range(7)],
                                       tenant="pager", kind="list", cost=1, pool="default")
        assert [type(j) for j in jobs] == [barista.Job] * 7
        assert [j.created for j in jobs] == [True] * 7
        ids = [j.id for j in jobs]
        assert ids == sorted(ids)
        # Newest first, unless asked otherwise.
        listed = [j async for j in admin.jobs(tenant="pager", page_size=3)]
        assert [j.id for j in listed] == list(reversed(ids))
        assert [j.key for j in listed] == [f"page-{i}" for i in reversed(range(7))]
        assert all(j.payload is None for j in listed)
        oldest = [j async for j in admin.jobs(tenant="pager", page_size=2, oldest_first=True, include_payload=True)]
        assert [j.id for j in oldest] == ids
        assert [j.payload for j in oldest] == [f"p{i}".encode() for i in range(7)]
        why = await admin.explain(ids[1], tenant="pager")
        assert (why.job_id, why.reason, why.position) == (ids[1], "behind", 1)
        assert why.text != ""
        usage = await admin.usage(tenant="pager")
        assert (usage.tenant, usage.tier, usage.queued, usage.queued_by_size, usage.submitted) == (
            "pager", "free", 7, {"sm": 7, "md": 0, "lg": 0}, 7)
        for j in ids:
            await admin.cancel(j, tenant="pager")
        assert [j.state async for j in admin.jobs(tenant="pager")] == ["cancelled"] * 7


async def test_times_durations_and_a_deadline(cluster):
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
        t = await admin.upsert_tenant("timely", tier="gold", allow_deadlines=True, max_queued=50)
        assert (t.name, t.tier, t.allow_deadlines, t.max_queued, t.created) == ("timely", "gold", True, 50, True)
        # A field left out keeps its value: an upgrade changes the tier alone.
        t = await admin.upsert_tenant("timely", tier="diamond")
        assert (t.tier, t.allow_deadlines, t.max_queued, t.created) == ("diamond", True, 50, False)
        t = await admin.get_tenant("timely")
        assert (t.tier, t.allow_deadlines, t.max_queued, t.created) == ("diamond", True, 50, False)
        before = datetime.now(timezone.utc)
        job = await admin.submit(b"", tenant="timely", cost=timedelta(milliseconds=250), delay=timedelta(minutes=10),
                                 expire=3600, deadline=timedelta(hours=2), timeout=90, max_attempts=2)
        assert job.state == "scheduled"
        got = await admin.get(job, tenant="timely")
        assert got.state == "scheduled"
        assert got.cost == timedelta(milliseconds=250)
        assert got.timeout == timedelta(seconds=90)
        assert got.max_attempts == 2
        # Times to come, as wall times: within the submit's second.
        assert abs(got.due_at - (before + timedelta(minutes=10))) < timedelta(seconds=2)
        assert abs(got.expire_at - (before + timedelta(hours=1))) < timedelta(seconds=2)
        assert abs(got.deadline_at - (before + timedelta(hours=2))) < timedelta(seconds=2)
        why = await admin.explain(job, tenant="timely")
        assert why.reason == "scheduled"
        assert abs(why.due_at - got.due_at) < timedelta(seconds=1)
        await admin.cancel(job, tenant="timely")
        sub = await admin.set_subscription("timely", "default", 3)
        assert (sub.tenant, sub.pool, sub.burst, sub.changed) == ("timely", "default", 3, True)
        sub = await admin.delete_subscription("timely", "default")
        assert (sub.burst, sub.changed) == (None, True)
        sub = await admin.delete_subscription("timely", "default")
        assert (sub.burst, sub.changed) == (None, False)
        await admin.delete_tenant("timely")
        try:
            await admin.get_tenant("timely")
        except barista.NotFound as e:
            assert e.code == "NOT_FOUND"
        else:
            raise AssertionError("a deleted tenant was found")


async def test_place_in_line_statement_and_certificate(cluster):
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("ledger", tier="bronze")
        jobs = await admin.submit_many([{"payload": f"l{i}"} for i in range(3)], tenant="ledger", kind="ledger", size="lg", cost=1)
        # No lg worker: the third waits behind the first two of its own.
        job = await admin.get(jobs[2], tenant="ledger")
        assert job.place is not None and (job.place.ahead, job.place.own_ahead, job.place.complete) == (2, 2, True)
        why = await admin.explain(jobs[2], tenant="ledger")
        assert why.place is not None and (why.place.ahead, why.place.own_ahead) == (2, 2)
        doc = await admin.usage_statement(tenant="ledger")
        st = await admin.statement(tenant="ledger")
        assert st["tenant"] == "ledger" and st["version"] == 1 and doc.startswith("{")
        assert st["window"]["open"] is True and st["cpu"] == []
        csv = await admin.usage_statement(tenant="ledger", format="csv")
        assert csv.splitlines()[0] == "section,pool,size,class,metric,value"
        cert = await admin.certificate(tenant="ledger")
        rep = barista.verify_certificate(cert)
        assert rep.ok and rep.lines == 0
        with pytest.raises(barista.InvalidArgument):
            await admin.usage_statement(tenant="ledger", format="xml")
        for j in jobs:
            await admin.cancel(j, tenant="ledger")

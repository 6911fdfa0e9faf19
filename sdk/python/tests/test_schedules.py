"""Schedules through the client against a real three-node cluster: a
schedule of a dataclass fires function jobs a Python worker runs; pause,
resume, run-now with a key, get, list and delete; refusals as typed
errors naming their field."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import ClassVar, List

import pytest

import barista
from cluster import ACME_TOKEN, ADMIN_TOKEN, GLOBEX_TOKEN, WORKER_TOKEN, running


@dataclass
class Report:
    kind: ClassVar[str] = "report-py"
    day: str


async def until(c: barista.Client, name: str, what: str, cond, timeout: float = 20) -> barista.Schedule:
    """Reads the schedule until cond holds of it."""
    deadline = time.monotonic() + timeout
    while True:
        s = await c.get_schedule(name)
        if cond(s):
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {s}")
        await asyncio.sleep(0.1)


async def first_fire(c: barista.Client) -> barista.Event:
    async for ev in c.watch(from_oldest=True):
        if ev.kind == "schedule_fired":
            return ev
    raise AssertionError("the watch ended")


def definition(s: barista.Schedule) -> barista.Schedule:
    """s without its times (each answer turns cluster times into wall
    times by its own clock, a few ms apart between answers)."""
    return dataclasses.replace(s, since=None, created_at=None, last_slot=None, next_slots=(), next_fire=None)


async def test_a_schedule_fires_jobs_a_python_worker_runs(cluster) -> None:
    worker = barista.Worker(cluster.addrs, token=WORKER_TOKEN, size="md", id="py-sched")
    ran: List[Report] = []

    @worker.job()
    def report(ctx: barista.JobContext[Report]) -> str:
        ran.append(ctx.args)
        return f"report of {ctx.args.day}"

    # A client token: its own tenant's schedules (globex).
    async with barista.Client(cluster.addrs, token=GLOBEX_TOKEN) as c:
        before = datetime.now(timezone.utc)
        s = await c.set_schedule("py-report", "@every 1s", Report(day="today"), overlap=barista.Overlap.ALLOW,
                                 catchup=30, size="md", cost=timedelta(milliseconds=500), group="reports",
                                 priority="low", max_attempts=2, timeout=10, retry_backoff=0, expire=600)
        job = barista.ScheduleJob(kind="report-py", form="function", pool="", size="md", priority="low", group="reports",
                                  cost=timedelta(milliseconds=500), expire=timedelta(minutes=10), max_attempts=2,
                                  timeout=timedelta(seconds=10), retry_backoff=timedelta(0), payload=b'{"day":"today"}')
        assert definition(s) == barista.Schedule(
            tenant="globex", name="py-report", spec="@every 1s", zone="UTC", overlap=barista.Overlap.ALLOW,
            catchup=timedelta(seconds=30), jitter=None, paused=False, job=job, version=s.version)
        assert s.version >= 1 and s.kind == "report-py" and s.args(Report) == Report(day="today")
        assert s.last_slot is None and (s.fired, s.skipped, s.missed, s.refused, s.last_job, s.live_jobs) == (0, 0, 0, 0, 0, ())
        # The next five slots, a second apart, the first fired at its slot
        # (no jitter).
        assert len(s.next_slots) == 5 and s.next_fire == s.next_slots[0]
        assert [b - a for a, b in zip(s.next_slots, s.next_slots[1:])] == [timedelta(seconds=1)] * 4
        assert s.created_at is not None and abs(s.created_at - before) < timedelta(seconds=2)
        assert s.next_slots[0] - s.created_at <= timedelta(seconds=1, milliseconds=50)
        # Setting it to what it is changes nothing.
        again = await c.set_schedule("py-report", "@every 1s", Report(day="today"), overlap="allow", catchup=30,
                                     size="md", cost=0.5, group="reports", priority="low", max_attempts=2, timeout=10,
                                     retry_backoff=0, expire=600)
        assert (again.version, again.job, again.overlap, again.catchup) == (s.version, job, barista.Overlap.ALLOW,
                                                                            timedelta(seconds=30))

        async with running(worker):
            s = await until(c, "py-report", "two fires", lambda s: s.fired >= 2)
            fired = await c.get(s.last_job)
            assert (fired.tenant, fired.kind, fired.form, fired.size, fired.priority, fired.group, fired.max_attempts) == (
                "globex", "report-py", "function", "md", "low", "reports", 2)
            assert fired.payload == b'{"day":"today"}' and fired.args(Report) == Report(day="today")
            assert fired.key is not None and fired.key.startswith("schedule/py-report/")
            slot_ms = int(fired.key.rsplit("/", 1)[1])
            assert slot_ms % 1000 == 0  # @every 1s: the multiples of a second
            why = await c.explain(fired)
            assert why.schedule == "py-report" and why.schedule_run_key == ""
            assert why.schedule_slot is not None and s.last_slot is not None
            assert abs(why.schedule_slot - s.last_slot) < timedelta(milliseconds=50)
            async for _ in c.watch(fired):
                pass
            done = await c.get(fired)
            assert (done.state, done.result) == ("completed", "report of today")
            assert Report(day="today") in ran

            # Paused: no slot fires, and none is missed (the definition, its
            # version, stays).
            p = await c.pause_schedule("py-report")
            assert (p.paused, p.next_slots, p.next_fire, p.version) == (True, (), None, s.version)
            await asyncio.sleep(2.5)
            q = await c.get_schedule("py-report")
            assert (q.paused, q.fired, q.missed, q.skipped, q.refused) == (True, p.fired, 0, 0, 0)

            # Run now, with a key: twice, one job.
            r1 = await c.run_schedule_now("py-report", "deploy-7")
            r2 = await c.run_schedule_now("py-report", "deploy-7")
            assert (r1.created, r2.created, r2.id) == (True, False, r1.id)
            assert (r1.key, r1.kind, r1.tenant, r1.payload) == (
                "schedule/py-report/run/deploy-7", "report-py", "globex", b'{"day":"today"}')
            why = await c.explain(r1)
            assert (why.schedule, why.schedule_slot, why.schedule_run_key) == ("py-report", None, "deploy-7")
            # Without a key: one made here, a job each time.
            r3 = await c.run_schedule_now("py-report")
            r4 = await c.run_schedule_now("py-report")
            assert r3.created and r4.created and len({r1.id, r3.id, r4.id}) == 3
            assert r3.key is not None and len(r3.key) == len("schedule/py-report/run/") + 16
            q = await c.get_schedule("py-report")
            assert (q.paused, q.fired, q.last_job) == (True, p.fired + 3, r4.id)

            # The list: the one schedule, as get has it.
            listed = await c.list_schedules()
            one = await c.get_schedule("py-report", next=1)
            assert [definition(x) for x in listed] == [definition(one)]
            assert listed[0].next_slots == ()  # paused

            # Resumed: the slots after the resume fire.
            r = await c.resume_schedule("py-report")
            assert (r.paused, len(r.next_slots), r.version) == (False, 5, s.version)
            assert r.since is not None and r.next_slots[0] > r.since
            after = await until(c, "py-report", "a fire after the resume", lambda x: x.fired >= q.fired + 1)
            assert after.missed == 0 and after.last_slot is not None and after.last_slot > r.since

        # Its fires are events of the tenant: the first, of a slot.
        ev = await asyncio.wait_for(first_fire(c), 10)
        assert (ev.kind, ev.schedule, ev.tenant, ev.reason) == ("schedule_fired", "py-report", "globex", "")
        assert ev.job_id > 0 and ev.slot is not None and s.created_at is not None and ev.slot >= s.created_at

        await c.delete_schedule("py-report")
        with pytest.raises(barista.NotFound) as e:
            await c.get_schedule("py-report")
        assert e.value.field == "name"
        with pytest.raises(barista.NotFound):
            await c.delete_schedule("py-report")
        assert await c.list_schedules() == []
        # Its jobs stay.
        assert (await c.get(r1)).id == r1.id
        async for j in c.jobs(state="queued"):
            await c.cancel(j)


async def test_a_refused_schedule_is_a_typed_error_naming_its_field(cluster) -> None:
    async with barista.Client(cluster.addrs, token=GLOBEX_TOKEN) as c:
        for spec, zone, field in (("61 * * * *", None, "spec"), ("@every 500ms", None, "spec"),
                                  ("0 0 30 2 *", None, "spec"), ("30 2 * * *", "Mars/Olympus_Mons", "zone")):
            with pytest.raises(barista.InvalidArgument) as e:
                await c.set_schedule("bad", spec, b"", zone=zone, cost=1)
            assert (type(e.value), e.value.code, e.value.field) == (barista.InvalidArgument, "INVALID_ARGUMENT", field)
            assert e.value.message.startswith(f"{field}: "), e.value.message
        with pytest.raises(barista.InvalidArgument) as e:
            await c.set_schedule("bad", "@every 1s", b"", catchup=0, cost=1)
        assert (e.value.code, e.value.field) == ("INVALID_ARGUMENT", "catchup_ms")
        # Checked before anything is sent.
        with pytest.raises(barista.InvalidArgument) as e:
            await c.set_schedule("bad", "@hourly", b"", overlap="sometimes", cost=1)
        assert e.value.field == "overlap"
        with pytest.raises(barista.InvalidArgument) as e:
            await c.set_schedule("bad", "@hourly", b"", deadline=datetime.now(timezone.utc), cost=1)
        assert e.value.field == "deadline"
        with pytest.raises(barista.InvalidArgument) as e:
            await c.set_schedule("bad", "", b"", cost=1)
        assert e.value.field == "spec"
        with pytest.raises(barista.InvalidArgument) as e:
            await c.run_schedule_now("bad", "")
        assert e.value.field == "key"
        # Nothing was made.
        with pytest.raises(barista.NotFound):
            await c.get_schedule("bad")
        with pytest.raises(barista.NotFound):
            await c.run_schedule_now("bad", "k")
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as acme:
        # Another tenant's schedules are not a client token's.
        with pytest.raises(barista.PermissionDenied):
            await acme.set_schedule("theirs", "@hourly", b"", tenant="globex", cost=1)
        with pytest.raises(barista.PermissionDenied):
            await acme.list_schedules(tenant="globex")


async def test_an_admin_sets_a_tenants_cron_schedule_with_every_option(cluster) -> None:
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("sched-py", tier="bronze", allow_deadlines=True)
        s = await admin.set_schedule("nightly", "30 2 * * *", {"since": "yesterday"}, kind="nightly", tenant="sched-py",
                                     zone="UTC", overlap=barista.Overlap.BUFFER_ONE, catchup=timedelta(minutes=10),
                                     jitter=timedelta(minutes=5), paused=True, pool="default", size="lg", cost=300,
                                     priority="high", deadline=timedelta(hours=1), delay=2, form="function")
        job = barista.ScheduleJob(kind="nightly", form="function", pool="default", size="lg", priority="high",
                                  cost=timedelta(minutes=5), deadline=timedelta(hours=1), delay=timedelta(seconds=2),
                                  payload=b'{"since":"yesterday"}')
        assert definition(s) == barista.Schedule(
            tenant="sched-py", name="nightly", spec="30 2 * * *", zone="UTC", overlap=barista.Overlap.BUFFER_ONE,
            catchup=timedelta(minutes=10), jitter=timedelta(minutes=5), paused=True, job=job, version=s.version)
        assert (s.next_slots, s.next_fire, s.last_slot) == ((), None, None)  # paused
        r = await admin.resume_schedule("nightly", tenant="sched-py")
        # Five nights, a day apart, each fired within its jitter.
        assert len(r.next_slots) == 5 and r.next_fire is not None
        assert [b - a for a, b in zip(r.next_slots, r.next_slots[1:])] == [timedelta(days=1)] * 4
        assert timedelta(0) <= r.next_fire - r.next_slots[0] < timedelta(minutes=5)
        first = r.next_slots[0]
        assert first - datetime.now(timezone.utc) <= timedelta(days=1)
        assert abs(first - first.replace(hour=2, minute=30, second=0, microsecond=0)) < timedelta(seconds=5)
        got = await admin.get_schedule("nightly", tenant="sched-py", next=100)
        assert definition(got) == definition(r) and len(got.next_slots) == 100
        assert [x.name for x in await admin.list_schedules(tenant="sched-py")] == ["nightly"]
        # A changed definition: a new version, the same name.
        changed = await admin.set_schedule("nightly", "@daily", {"since": "yesterday"}, kind="nightly",
                                           tenant="sched-py", size="lg", cost=300)
        assert (changed.version > r.version, changed.spec, changed.overlap, changed.paused, changed.jitter) == (
            True, "@daily", barista.Overlap.SKIP, False, None)
        await admin.delete_schedule("nightly", tenant="sched-py")
        assert await admin.list_schedules(tenant="sched-py") == []
        await admin.delete_tenant("sched-py")

"""The worker's side of the protocol against a scripted leader in this
process (a gRPC server whose every message the test writes): snoozes,
redirects, rejects, the self-kill, Started held back with a Ready
folded into the Finished, cancels pending at Welcome, and a reconnect
that resumes the run; the slots of a Worker on one stream, and a stream
each against a leader that does not multiplex."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import grpc
import grpc.aio

import barista
from barista._proto import rpc_status_pb2
from barista._proto import types_pb2 as cpb
from barista._proto import worker_pb2 as wpb
from barista._proto import worker_pb2_grpc


class Session:
    """One stream a worker opened: what it sent, and what to send it."""

    def __init__(self):
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.hello = None
        self.slot = 0  # the slot of the first Hello (a multiplexed stream's)

    def send(self, **msg) -> None:
        self.outbox.put_nowait(wpb.LeaderMessage(**msg))

    def close(self) -> None:
        """Ends the stream from the leader's side."""
        self.outbox.put_nowait(None)

    async def expect(self, kind: str, timeout: float = 5.0, skip=("heartbeat",)):
        """The next message of the worker that is not one of skip: it must
        be of kind."""
        while True:
            m = await asyncio.wait_for(self.inbox.get(), timeout)
            which = m.WhichOneof("msg") if m is not None else "end of stream"
            if which in skip:
                continue
            assert which == kind, f"got {which}: {m}, want {kind}"
            return getattr(m, kind)


class ScriptedLeader(worker_pb2_grpc.WorkerServicer):
    def __init__(self):
        self.sessions: asyncio.Queue = asyncio.Queue()
        self.server = grpc.aio.server()
        worker_pb2_grpc.add_WorkerServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.addr = f"127.0.0.1:{self.port}"

    async def Connect(self, request_iterator, context):
        s = Session()
        first = await context.read()
        s.hello, s.slot = first.hello, first.slot
        self.sessions.put_nowait(s)

        async def read():
            while True:
                m = await context.read()
                if m is grpc.aio.EOF:
                    s.inbox.put_nowait(None)
                    return
                s.inbox.put_nowait(m)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                m = await s.outbox.get()
                if m is None:
                    return
                await context.write(m)
        finally:
            reader.cancel()

    async def session(self, timeout: float = 5.0) -> Session:
        return await asyncio.wait_for(self.sessions.get(), timeout)


@contextlib.asynccontextmanager
async def leaders(n: int = 1):
    ls = [ScriptedLeader() for _ in range(n)]
    for lead in ls:
        await lead.server.start()
    try:
        yield ls
    finally:
        for lead in ls:
            await lead.server.stop(None)


@contextlib.asynccontextmanager
async def serving(worker: barista.Worker):
    task = asyncio.get_running_loop().create_task(worker.run(handle_signals=False))
    try:
        yield
    finally:
        await worker.stop(grace=1)
        await asyncio.wait_for(task, 10)


def welcome(hb_ms=60_000, self_kill_ms=120_000, **kw) -> wpb.Welcome:
    kw.setdefault("job_types", True)
    kw.setdefault("snooze", True)
    return wpb.Welcome(heartbeat_interval_ms=hb_ms, self_kill_after_ms=self_kill_ms, leader_id="fake", **kw)


def assign(job: int, kind: str, payload: bytes = b"", attempt: int = 1) -> wpb.Assign:
    return wpb.Assign(job=job, attempt=attempt, job_type=kind, payload=payload, tenant="acme", size=cpb.SM, credit=1)


async def test_a_snooze_is_reported_with_its_delay(tmp_path):
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-snooze", size="md", pool="gpu")

        @w.job("later")
        def later(ctx):
            raise barista.Snooze(1.5)

        async with serving(w):
            s = await lead.session()
            assert (s.hello.worker_id, s.hello.size, s.hello.pool, s.hello.version) == ("proto-snooze-1", cpb.MD, "gpu", "python-1")
            s.send(welcome=welcome())
            ready = await s.expect("ready")
            s.send(assign=assign(7, "later"))
            started = await s.expect("started")
            assert (started.job, started.attempt) == (7, 1)
            fin = await s.expect("finished")
            assert (fin.job, fin.attempt, fin.outcome, fin.snooze_ms, fin.exit_code, fin.permanent) == (7, 1, cpb.SNOOZED, 1500, 0, False)
            assert (fin.start_unreported, fin.ready_credit) == (False, 0)
            s.send(finished_ack=wpb.FinishedAck(job=7, attempt=1))
            again = await s.expect("ready")
            assert again.credit == ready.credit + 1


async def test_a_leader_of_an_earlier_build():
    """A leader whose Welcome does not name kinds gets no Ready (the
    worker waits for another); one that cannot snooze gets a snoozed run
    as failed, saying so."""
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-old", size="md")

        @w.job("later")
        def later(ctx):
            raise barista.Snooze(5)

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome(job_types=False))
            assert await asyncio.wait_for(s.inbox.get(), 5) is None  # the worker ended the stream, offering nothing
            s = await lead.session(timeout=10)
            s.send(welcome=welcome(snooze=False))
            await s.expect("ready")
            s.send(assign=assign(8, "later"))
            await s.expect("started")
            fin = await s.expect("finished")
            assert (fin.outcome, fin.snooze_ms, fin.exit_code) == (cpb.FAILED, 0, 1)
            assert "cannot snooze a job" in fin.stderr_tail
            s.send(finished_ack=wpb.FinishedAck(job=8, attempt=1))


async def test_started_held_back_and_the_ready_folded_into_the_finished():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-fold")

        @w.job("quick")
        def quick(ctx):
            return ctx.payload[::-1]

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome(finish_ready=True, started_delay_ms=1000))
            ready = await s.expect("ready")
            s.send(assign=assign(9, "quick", b"abc"))
            # A run that ends within the delay sends no Started: its
            # Finished says so, and carries the next Ready.
            fin = await s.expect("finished")
            assert (fin.job, fin.outcome, fin.stdout_tail, fin.start_unreported) == (9, cpb.OK, "cba", True)
            assert fin.ready_credit == ready.credit + 1
            # The leader's Assign acknowledges the run and gives the next.
            s.send(assign=wpb.Assign(job=10, attempt=1, job_type="quick", payload=b"xy", credit=fin.ready_credit,
                                     finished=wpb.FinishedAck(job=9, attempt=1)))
            fin = await s.expect("finished")
            assert (fin.job, fin.stdout_tail, fin.ready_credit) == (10, "yx", ready.credit + 2)
            s.send(finished_ack=wpb.FinishedAck(job=10, attempt=1))


async def test_heartbeats_carry_the_cpu_of_the_run_so_far():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-hb")
        release = threading.Event()

        @w.job("burn")
        def burn(ctx):
            end = time.thread_time() + 0.4
            while time.thread_time() < end:
                pass
            release.wait(10)

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome(hb_ms=100, self_kill_ms=5000))
            idle = await s.expect("heartbeat", skip=("ready",))
            assert (idle.job, idle.attempt, idle.cpu_ms) == (0, 0, 0)
            s.send(heartbeat_ack=wpb.HeartbeatAck(seq=idle.seq))
            s.send(assign=assign(14, "burn"))
            await s.expect("started", skip=("heartbeat", "ready"))
            # Once the function has burnt its CPU (and waits), the
            # heartbeats report it: 400 ms of its thread's CPU.
            while True:
                hb = await s.expect("heartbeat", skip=())
                s.send(heartbeat_ack=wpb.HeartbeatAck(seq=hb.seq))
                assert (hb.job, hb.attempt) == (14, 1)
                if hb.cpu_ms >= 400:
                    break
            release.set()
            fin = await s.expect("finished")
            assert fin.outcome == cpb.OK
            assert 400 <= fin.cpu_ms < 600 and hb.cpu_ms <= fin.cpu_ms, (hb.cpu_ms, fin.cpu_ms)
            s.send(finished_ack=wpb.FinishedAck(job=14, attempt=1))
            await s.expect("ready")


async def test_a_follower_redirects_the_worker_to_the_leader():
    async with leaders(2) as (follower, lead):
        w = barista.Worker([follower.addr], id="proto-redirect")
        w.register("x", lambda ctx: None)
        async with serving(w):
            s = await follower.session()
            s.send(redirect=wpb.Redirect(leader_id="n2", leader_addr=lead.addr))
            s.close()
            s2 = await lead.session()
            assert s2.hello.worker_id == "proto-redirect-1"
            s2.send(welcome=welcome())
            await s2.expect("ready")


async def test_reject_stops_the_run_and_drops_its_result():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-reject")
        seen = []

        @w.job("wait")
        def wait(ctx):
            seen.append(ctx.cancelled.wait(10))
            seen.append(ctx.cancel_reason)
            return "finished anyway"

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome())
            await s.expect("ready")
            s.send(assign=assign(11, "wait"))
            await s.expect("started")
            s.send(reject=wpb.Reject(job=11, attempt=1, reason="stale attempt"))
            # No Finished: the next message is the slot's new Ready.
            await s.expect("ready")
            assert seen == [True, "rejected by the leader: stale attempt"]


async def test_a_cut_off_worker_stops_its_run_after_self_kill_after():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-selfkill")
        stopped = threading.Event()
        reason = []

        @w.job("wait")
        def wait(ctx):
            if ctx.cancelled.wait(10):
                reason.append(ctx.cancel_reason)
                stopped.set()

        async with serving(w):
            s = await lead.session()
            # Heartbeats every 100 ms, never acknowledged.
            s.send(welcome=welcome(hb_ms=100, self_kill_ms=600))
            await s.expect("ready")
            s.send(assign=assign(12, "wait"))
            await s.expect("started")
            await asyncio.get_running_loop().run_in_executor(None, stopped.wait, 5)
            assert stopped.is_set()
            assert reason[0].startswith("no contact with the cluster for ") and reason[0].endswith("(self_kill_after 0.6s)")


async def test_a_reconnect_resumes_the_run_and_a_pending_cancel_reaches_it():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-resume")
        go_on = threading.Event()

        @w.job("wait")
        def wait(ctx):
            go_on.wait(10)
            ctx.cancelled.wait(10)
            return "done"

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome())
            await s.expect("ready")
            s.send(assign=assign(13, "wait", attempt=2))
            await s.expect("started")
            s.close()  # the leader goes away
            s2 = await lead.session()
            assert [(r.job, r.attempt, r.finished) for r in s2.hello.running] == [(13, 2, False)]
            # The new leader has a cancel of the run pending.
            s2.send(welcome=welcome(pending_cancels=[wpb.CancelOrder(job=13, attempt=2, reason="requested", grace_ms=1000)]))
            go_on.set()
            fin = await s2.expect("finished", skip=("heartbeat", "ready"))
            assert (fin.job, fin.attempt, fin.outcome) == (13, 2, cpb.CANCELLED)
            s2.send(finished_ack=wpb.FinishedAck(job=13, attempt=2))
            await s2.expect("ready")


async def test_a_started_held_back_goes_to_the_next_leader():
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-held")
        release = threading.Event()

        @w.job("wait")
        def wait(ctx):
            release.wait(10)

        async with serving(w):
            s = await lead.session()
            s.send(welcome=welcome(started_delay_ms=5000))
            await s.expect("ready")
            s.send(assign=assign(15, "wait"))
            s.close()  # before the run has lasted its delay: no Started yet
            s2 = await lead.session()
            assert [(r.job, r.finished) for r in s2.hello.running] == [(15, False)]
            # A leader that lets Started wait 200 ms gets it once the run
            # has lasted that long.
            s2.send(welcome=welcome(started_delay_ms=200))
            started = await s2.expect("started", skip=("heartbeat",))
            assert (started.job, started.attempt) == (15, 1)
            release.set()
            fin = await s2.expect("finished", skip=("heartbeat",))
            assert (fin.job, fin.outcome, fin.start_unreported) == (15, cpb.OK, False)
            s2.send(finished_ack=wpb.FinishedAck(job=15, attempt=1))
            await s2.expect("ready")


async def slot_messages(s: Session, n: int, kinds=("hello", "ready"), timeout: float = 5.0) -> list:
    """The next n messages of the worker on s of kinds, as (slot, kind,
    message), in the order they came."""
    got = []
    while len(got) < n:
        m = await asyncio.wait_for(s.inbox.get(), timeout)
        assert m is not None, "the worker ended the stream"
        which = m.WhichOneof("msg")
        if which in kinds:
            got.append((m.slot, which, getattr(m, which)))
    return got


async def test_the_slots_of_a_worker_share_one_stream():
    """Three slots: one stream, a Hello (with mux) per slot, each slot's
    messages stamped with its slot; a slot the leader ends says Hello
    again on the same stream; when the stream breaks, every slot moves to
    one new stream."""
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-mux", concurrency=3)
        w.register("x", lambda ctx: None)
        async with serving(w):
            s = await lead.session()
            assert s.hello.mux and s.slot in (1, 2, 3) and s.hello.worker_id == f"proto-mux-{s.slot}"
            s.send(welcome=welcome(mux=True), slot=s.slot)
            got = await slot_messages(s, 3)
            hellos = {k: m for k, kind, m in got if kind == "hello"}
            assert sorted(hellos) == sorted({1, 2, 3} - {s.slot})
            assert all(m.mux and m.worker_id == f"proto-mux-{k}" for k, m in hellos.items())
            assert [(k, kind) for k, kind, _ in got if kind == "ready"] == [(s.slot, "ready")]
            for k in hellos:
                s.send(welcome=welcome(mux=True), slot=k)
            assert sorted(k for k, _, _ in await slot_messages(s, 2, kinds=("ready",))) == sorted(hellos)
            # The leader ends slot 2's session (another session of its ID):
            # slot 2 says Hello again, on this stream.
            st = rpc_status_pb2.Status(code=grpc.StatusCode.ABORTED.value[0], message="worker proto-mux-2 is connected")
            s.send(end=wpb.SlotEnd(status=st.SerializeToString()), slot=2)
            [(k, kind, hello)] = await slot_messages(s, 1, kinds=("hello",))
            assert (k, hello.worker_id, hello.mux) == (2, "proto-mux-2", True)
            s.send(welcome=welcome(mux=True), slot=2)
            assert [(k, kind) for k, kind, _ in await slot_messages(s, 1, kinds=("ready",))] == [(2, "ready")]
            # The stream breaks: the three reconnect on one new stream.
            s.close()
            s2 = await lead.session()
            s2.send(welcome=welcome(mux=True), slot=s2.slot)
            got = await slot_messages(s2, 2, kinds=("hello",))
            assert sorted([s2.slot] + [k for k, _, _ in got]) == [1, 2, 3]
            assert lead.sessions.empty()


async def test_slots_against_a_leader_that_does_not_multiplex_open_a_stream_each():
    """A leader of an earlier build answers the first slot's Hello (mux)
    with a Welcome that does not say mux: the stream is that slot's, and
    every other slot opens a stream of its own."""
    async with leaders() as (lead,):
        w = barista.Worker([lead.addr], id="proto-plain", concurrency=3)
        w.register("x", lambda ctx: None)
        async with serving(w):
            first = await lead.session()
            assert first.hello.mux
            first.send(welcome=welcome())
            await first.expect("ready")
            others = [await lead.session(), await lead.session()]
            ids = sorted(s.hello.worker_id for s in [first, *others])
            assert ids == ["proto-plain-1", "proto-plain-2", "proto-plain-3"]
            assert [(s.hello.mux, s.slot) for s in others] == [(False, 0), (False, 0)]
            for s in others:
                s.send(welcome=welcome())
                ready = await s.expect("ready")
                assert ready.credit > 0
            await asyncio.sleep(0.3)
            assert lead.sessions.empty()

"""A worker that runs Python functions in this process, routed by the
job's kind, with the worker protocol of docs/workers.md: a session per
slot with the leader (the slots of a Worker of many sharing one stream,
_mux.py), Ready with a credit, Assign, Started, heartbeats with
the CPU so far, Finished; cancel orders, rejects, redirects to the
leader, and the self-kill of a run cut off from the cluster."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
import concurrent.futures
import multiprocessing
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

import grpc
import grpc.aio

from . import _conn, _mux, _payload, errors
from . import _convert as cv
from ._proto import types_pb2 as cpb
from ._proto import worker_pb2, worker_pb2_grpc
from ._run import Function, JobContext, JobFunction, Result, Run, SlotThread, args_type

log = logging.getLogger("barista.worker")

F = TypeVar("F", bound=Callable[..., Any])

# A slot's session's events: ("msg", m), ("done", run), ("wake",) ...
_Queue = asyncio.Queue[Tuple[Any, ...]]

VERSION = "python-1"

# The reconnect backoff: 100 ms doubling to 2 s, from the start again
# after a session that got its Welcome.
MIN_BACKOFF, MAX_BACKOFF = 0.1, 2.0
# How long a server has to answer Hello with Welcome or Redirect.
HANDSHAKE_TIMEOUT = 3.0
# How long a stopping worker waits for the cluster to acknowledge the
# results of the runs it stopped past its grace.
STOP_REPORT_WAIT = 5.0


# The refusals of a session that no retry can change: a token the cluster
# does not know, one that may not be this worker (its worker_id
# binding), a pool the cluster does not hold, a Hello it does not take
# (an ID or a size). Worker.run() raises them.
_REFUSALS = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
             grpc.StatusCode.INVALID_ARGUMENT)


class _Redirect(Exception):
    def __init__(self, leader_id: str, addr: str):
        super().__init__(f"redirected to {leader_id} at {addr}")
        self.leader_id, self.addr = leader_id, addr


class _Drained(Exception):
    """Ends a session once a stopping slot is empty."""


def silence_limit(interval: float, self_kill: float) -> float:
    """How long a session may go without an acknowledged heartbeat before
    the slot gives up on it: four heartbeats (at least a second), and at
    most half the self-kill deadline, so that a slot cut off from a
    leader finds the next one before it stops its run."""
    limit = max(4 * interval, 1.0)
    if self_kill > 0:
        limit = min(limit, self_kill / 2)
    return limit


class _Job:
    """A slot's one job: its Assign, its run, and what was reported."""

    __slots__ = ("assign", "run", "cancelling", "finished", "dropped", "start_sent", "start_timer", "abandoned")

    def __init__(self, assign: worker_pb2.Assign):
        self.assign = assign
        self.run: Optional[Run] = None
        self.cancelling = False
        self.finished: Optional[worker_pb2.JobFinished] = None  # sent, not yet acknowledged
        self.dropped = False  # rejected or cut off: no result is reported
        self.start_sent = False
        self.start_timer: Optional[asyncio.TimerHandle] = None
        self.abandoned = False  # reported failed when the worker stopped past its grace


class _Slot:
    """One slot: one session at a time with the leader, one job at most."""

    def __init__(self, worker: "Worker", worker_id: str, k: int):
        self.w = worker
        self.id = worker_id
        self.k = k  # the slot's number on a shared stream, 1..N
        self.cur: Optional[_Job] = None
        self.credit = time.time_ns()
        self.seq = 0
        self.sent_at: Dict[int, float] = {}
        self.contact = 0.0
        self.failed = ""  # the server of the last failed session
        self.leader = ""  # the address of the last Redirect
        self.interval = 5.0
        self.self_kill = 25.0
        self.welcomes = 0
        self.fold_ready = False
        self.offered = False
        self.start_delay = 0.0
        self.snooze_ok = False  # this session's leader takes a snoozed run (Welcome.snooze)
        self.kinds_ok = False  # this session's leader routes by kind and takes unknown_kind (Welcome.kinds)
        self._q: Optional[_Queue] = None  # the live session's events
        self.thread = SlotThread(f"barista-{worker_id}")  # runs the slot's sync functions

    # -- the slot's life -------------------------------------------------

    def notify(self, ev: Tuple[Any, ...]) -> None:
        if self._q is not None:
            self._q.put_nowait(ev)

    def poke(self) -> None:
        self.notify(("wake",))

    def done_draining(self) -> bool:
        return self.w._draining and self.cur is None

    def next_server(self, i: int) -> str:
        if self.leader:
            addr, self.leader = self.leader, ""
            return addr
        servers = self.w._servers
        addr = servers[i % len(servers)]
        if addr == self.failed and len(servers) > 1:
            addr = servers[(i + 1) % len(servers)]
        return addr

    async def serve(self) -> None:
        """Connects and serves until the worker stops and the slot is
        empty. A failed session is retried with backoff (ABORTED too:
        another session of this ID is still live), but a refusal no
        retry can change (_REFUSALS), which is raised."""
        watchdog = asyncio.get_running_loop().create_task(self.watchdog())
        backoff = MIN_BACKOFF
        i = 0
        try:
            while not self.done_draining():
                addr = self.next_server(i)
                i += 1
                welcomes = self.welcomes
                err: Optional[BaseException] = None
                try:
                    await self.session_until_drained(addr)
                except _Drained:
                    pass
                except Exception as e:  # noqa: BLE001 - a failed session is retried, whatever broke it
                    err = e
                self.failed = addr if err is not None else ""
                if self.welcomes != welcomes:
                    backoff = MIN_BACKOFF
                if self.done_draining():
                    return
                code = err.code() if isinstance(err, grpc.aio.AioRpcError) else None
                if code in _REFUSALS:
                    # No retry can change it: run() raises it.
                    refusal = errors.from_rpc_error(err)
                    refusal.message = f"worker {self.id!r}: {addr} refuses it: {refusal.message}"
                    raise refusal
                wait = backoff
                if isinstance(err, _Redirect):
                    log.info("redirected to the leader: leader=%s addr=%s", err.leader_id, err.addr)
                    wait = 0.05
                elif isinstance(err, grpc.aio.AioRpcError) and errors.is_not_leader(err):
                    # A leadership handed over, or a leader stopping: the
                    # cluster goes on, this worker with it.
                    log.info("the leader changed; reconnecting: worker=%s server=%s reason=%s retry_in=%.1fs",
                             self.id, addr, err.details(), wait)
                    backoff = min(2 * backoff, MAX_BACKOFF)
                else:
                    why = err.details() if isinstance(err, grpc.aio.AioRpcError) else (err or "the session ended")
                    log.warning("stream to the cluster ended; reconnecting: worker=%s server=%s error=%s retry_in=%.1fs",
                                self.id, addr, why, wait)
                    backoff = min(2 * backoff, MAX_BACKOFF)
                await self.w._sleep(wait)
        finally:
            watchdog.cancel()
            self.thread.close()

    async def session_until_drained(self, addr: str) -> None:
        """Runs a session, and ends it at once when the worker stops while
        the slot is empty (the session may be waiting for a server that
        does not answer)."""
        loop = asyncio.get_running_loop()
        session = loop.create_task(self.session(addr))
        assert self.w._draining_event is not None  # run() made it
        drained = loop.create_task(self.w._draining_event.wait())
        try:
            await asyncio.wait({session, drained}, return_when=asyncio.FIRST_COMPLETED)
            if not session.done() and self.cur is None:
                session.cancel()
                await asyncio.gather(session, return_exceptions=True)
                raise _Drained()
            await session
        finally:
            drained.cancel()
            if not session.done():
                session.cancel()
                await asyncio.gather(session, return_exceptions=True)

    async def watchdog(self) -> None:
        """Stops the run when contact is older than self_kill_after, whether
        or not a stream is up: its result is dropped, and the slot is held
        until the function returns."""
        last = time.monotonic()
        while True:
            period = max(self.self_kill / 20, 0.01)
            paused = time.monotonic() - last > 5 * period + 0.5
            last = time.monotonic()
            j = self.cur
            if j is not None and j.finished is None and not j.dropped and j.run is not None and self.contact and not paused:
                stale = time.monotonic() - self.contact
                if stale > self.self_kill and not j.run.done:
                    self.drop(f"no contact with the cluster for {stale:.1f}s (self_kill_after {self.self_kill:g}s)")
            await asyncio.sleep(period)

    def drop(self, reason: str) -> None:
        """Stops the current run at once and drops its result (a Reject, or
        no contact): the slot frees once the function returns."""
        j = self.cur
        if j is None or j.dropped or j.finished is not None:
            return
        j.dropped = True
        log.warning("stopping job, its result dropped: job=%d attempt=%d reason=%s", j.assign.job, j.assign.attempt, reason)
        if j.run is None or j.run.done:
            self.cur = None
            self.poke()
        else:
            j.run.cancel(reason)

    def run_done(self, run: Run) -> None:
        """A call ended: a dropped run frees the slot at once, with or
        without a session; another is reported by the session."""
        j = self.cur
        if j is not None and j.run is run and j.dropped:
            self.cur = None
            self.poke()
            return
        self.notify(("done", run))

    # -- one session -----------------------------------------------------

    async def session(self, addr: str) -> None:
        call = await self.w._open(addr, self.k)
        reader: Optional[asyncio.Task[None]] = None
        ticker: Optional[asyncio.Task[None]] = None
        failed: Optional[BaseException] = None
        try:
            # What it runs: the function jobs of its kinds (a function
            # registered for "", the jobs of no type, is for jobs any
            # worker runs, which need no naming).
            hello = worker_pb2.Hello(worker_id=self.id, size=self.w._size, version=VERSION, pool=self.w.pool or "",
                                     kinds=[k for k in self.w.kinds if k])
            j = self.cur
            if j is not None and not j.dropped:
                hello.running.append(worker_pb2.RunningJob(job=j.assign.job, attempt=j.assign.attempt,
                                                           cpu_ms=j.run.cpu_ms() if j.run else 0,
                                                           finished=j.finished is not None))
            try:
                await asyncio.wait_for(call.write(worker_pb2.WorkerMessage(hello=hello)), HANDSHAKE_TIMEOUT)
                first = await asyncio.wait_for(call.read(), HANDSHAKE_TIMEOUT)
            except asyncio.TimeoutError:
                raise _mux.Silent(f"no answer from {addr} within {HANDSHAKE_TIMEOUT:g}s") from None
            if first is grpc.aio.EOF:
                raise ConnectionError(f"{addr} closed the stream at Hello")
            which = first.WhichOneof("msg")
            if which == "redirect":
                self.leader = first.redirect.leader_addr
                raise _Redirect(first.redirect.leader_id, first.redirect.leader_addr)
            if which != "welcome":
                raise ConnectionError("the leader's first message is not Welcome")
            w = first.welcome
            self.interval = w.heartbeat_interval_ms / 1000 or 5.0
            self.self_kill = w.self_kill_after_ms / 1000 or 25.0
            self.contact = time.monotonic()
            self.welcomes += 1
            self.fold_ready, self.offered = w.finish_ready, False
            self.start_delay = max(0, w.started_delay_ms) / 1000
            self.snooze_ok = w.snooze
            self.kinds_ok = w.kinds
            if not w.job_types:
                # An earlier build's leader does not name a job's kind:
                # no job could be routed. Wait for a leader that does.
                raise ConnectionError("the leader is of an earlier build: its assignments do not name a job's kind, "
                                      "which this worker routes by; waiting for an upgraded leader")
            log.info("connected: worker=%s server=%s leader=%s pool=%s heartbeat=%gs self_kill_after=%gs "
                     "ready_with_finished=%s started_delay=%gs", self.id, addr, w.leader_id, self.w.pool or "default",
                     self.interval, self.self_kill, self.fold_ready, self.start_delay)

            q: _Queue = asyncio.Queue()
            self._q = q
            reader = asyncio.get_running_loop().create_task(self._read(call, q))
            ticker = asyncio.get_running_loop().create_task(self._tick(q))

            for c in w.pending_cancels:
                self.cancel(c)
            # A run whose Started has not gone out: it goes now if this
            # leader lets it wait no more (or the run has lasted its
            # delay), else when the delay is up. Then resend an
            # unacknowledged result, or offer the slot.
            j = self.cur
            if j is not None and not j.start_sent and not j.dropped and j.run is not None:
                if j.start_timer is not None:
                    j.start_timer.cancel()
                    j.start_timer = None
                left = self.start_delay - (time.monotonic() - j.run.started)
                if self.start_delay == 0 or (left <= 0 and j.finished is None):
                    # (A reported run keeps its start_unreported for a
                    # leader that takes it.)
                    j.start_sent = True
                    await call.write(_started(j.assign))
                elif j.finished is None:
                    j.start_timer = asyncio.get_running_loop().call_later(left, self.notify, ("start_due", j))
            if j is not None and j.finished is not None:
                await call.write(self.report(j))
            elif j is not None and j.run is not None and j.run.done and not j.dropped:
                q.put_nowait(("done", j.run))
            self.poke()

            silence = silence_limit(self.interval, self.self_kill)
            while True:
                ev = await q.get()
                kind = ev[0]
                if kind == "end":
                    if ev[1] is None:
                        raise ConnectionError("the leader closed the stream")
                    raise ev[1]
                if kind == "msg":
                    await self.handle(ev[1], call)
                elif kind == "hb":
                    quiet = time.monotonic() - self.contact
                    if quiet > silence:
                        # The stream may look open while the leader is gone
                        # or cut off: reconnect well before the self-kill.
                        raise _mux.Silent(f"no heartbeat acknowledged for {quiet:.1f}s (limit {silence:g}s)")
                    await call.write(self.heartbeat())
                elif kind == "start_due":
                    j = self.cur
                    if j is not None and j is ev[1] and not j.start_sent and j.finished is None and not j.dropped:
                        j.start_sent = True
                        await call.write(_started(j.assign))
                elif kind == "done":
                    await self.finish(ev[1], call)
                elif kind == "wake":
                    await self.offer(call)
        except BaseException as e:
            failed = e
            raise
        finally:
            self._q = None
            for t in (reader, ticker):
                if t is not None:
                    t.cancel()
            call.close(None if isinstance(failed, _Drained) else failed)

    async def _read(self, call: Any, q: _Queue) -> None:
        try:
            while True:
                m = await call.read()
                if m is grpc.aio.EOF:
                    q.put_nowait(("end", None))
                    return
                q.put_nowait(("msg", m))
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - the session ends with it
            q.put_nowait(("end", e))

    async def _tick(self, q: _Queue) -> None:
        d = self.w._dialer
        while True:
            # The slots of a shared stream beat together, at the Worker's
            # phase, so that their heartbeats leave in one go.
            await asyncio.sleep(d.until_beat(self.interval) if d is not None else self.interval)
            q.put_nowait(("hb",))

    # -- messages --------------------------------------------------------

    def next_credit(self) -> int:
        self.credit += 1
        self.offered = True
        return self.credit

    async def offer(self, call: Any) -> None:
        """Sends Ready if the slot is free; a stopping slot that is empty
        ends its session instead."""
        if self.w._draining and self.cur is None:
            raise _Drained()
        if self.cur is not None or self.w._draining or self.offered:
            return
        await call.write(worker_pb2.WorkerMessage(ready=worker_pb2.Ready(credit=self.next_credit())))

    def report(self, j: _Job) -> worker_pb2.WorkerMessage:
        """The message that reports j's result: with the next Ready folded
        in when the leader takes it and the slot is not stopping, and
        marked start_unreported when no Started of the run went out."""
        if j.start_timer is not None:
            j.start_timer.cancel()
        fin = worker_pb2.JobFinished()
        fin.CopyFrom(j.finished)
        fin.start_unreported = not j.start_sent
        fin.ready_credit = 0
        if self.fold_ready and not self.w._draining and not self.offered:
            fin.ready_credit = self.next_credit()
        return worker_pb2.WorkerMessage(finished=fin)

    def heartbeat(self) -> worker_pb2.WorkerMessage:
        self.seq += 1
        hb = worker_pb2.JobHeartbeat(seq=self.seq)
        j = self.cur
        if j is not None and j.finished is None and not j.dropped and j.run is not None:
            hb.job, hb.attempt, hb.cpu_ms = j.assign.job, j.assign.attempt, j.run.cpu_ms()
        self.sent_at[self.seq] = time.monotonic()
        for s in [s for s in self.sent_at if s + 64 < self.seq]:
            del self.sent_at[s]
        return worker_pb2.WorkerMessage(heartbeat=hb)

    async def handle(self, m: worker_pb2.LeaderMessage, call: Any) -> None:
        which = m.WhichOneof("msg")
        if which == "assign":
            await self.start(m.assign, call)
        elif which == "cancel":
            self.cancel(m.cancel)
        elif which == "heartbeat_ack":
            t = self.sent_at.get(m.heartbeat_ack.seq)
            if t is not None and t > self.contact:
                self.contact = t
        elif which == "reject":
            r = m.reject
            j = self.cur
            if j is not None and j.assign.job == r.job and j.assign.attempt == r.attempt:
                if j.finished is not None:
                    log.warning("the leader rejected this run's result; dropping it: job=%d attempt=%d reason=%s",
                                r.job, r.attempt, r.reason)
                    self.cur = None
                else:
                    self.drop("rejected by the leader: " + r.reason)
                self.poke()
        elif which == "finished_ack":
            self.acked(m.finished_ack)
            self.poke()
        elif which in ("welcome", "redirect"):
            raise ConnectionError("unexpected Welcome or Redirect within a session")

    def acked(self, f: worker_pb2.FinishedAck) -> None:
        j = self.cur
        if j is not None and j.finished is not None and j.assign.job == f.job and j.assign.attempt == f.attempt:
            self.cur = None

    def cancel(self, c: worker_pb2.CancelOrder) -> None:
        j = self.cur
        if (j is None or j.assign.job != c.job or j.assign.attempt != c.attempt or j.cancelling
                or j.finished is not None or j.dropped or j.run is None):
            return
        j.cancelling = True
        log.info("cancelling job: job=%d attempt=%d reason=%s", c.job, c.attempt, c.reason)
        j.run.cancel(c.reason or "requested")

    async def start(self, a: worker_pb2.Assign, call: Any) -> None:
        if a.HasField("finished"):
            self.acked(a.finished)  # the Assign answers a Finished with a folded Ready
        self.offered = False
        if self.cur is not None:
            log.error("assigned a job while busy; ignoring it: job=%d", a.job)
            return
        j = _Job(a)
        self.cur = j
        spec = self.w._functions.get(a.job_type)
        if spec is None or (a.form == cpb.COMMAND and self.kinds_ok):
            msg, fin = unrunnable(a, self.w, self.id, self.kinds_ok)
            await self.end_unstarted(j, fin, msg, call)
            return
        try:
            args = spec.decode(bytes(a.payload))
        except _payload.PayloadError as e:
            # No run of it can succeed: failed, with no retry (as a Go
            # worker's payload that does not decode).
            msg = f"job {a.job}: its payload is not the arguments of kind {a.job_type!r} ({spec.args_name}): {e}"
            fin = worker_pb2.JobFinished(job=a.job, attempt=a.attempt, outcome=cpb.FAILED, exit_code=1,
                                         stderr_tail=cv.output_tail(msg), permanent=True)
            await self.end_unstarted(j, fin, msg, call)
            return
        j.run = Run(spec.fn, JobContext.of(a, self.id, args), self.run_done, self.thread, self.w._pool)
        j.run.start()
        log.info("job started: job=%d attempt=%d tenant=%s kind=%s", a.job, a.attempt, a.tenant, a.job_type)
        if self.start_delay > 0:
            j.start_timer = asyncio.get_running_loop().call_later(self.start_delay, self.notify, ("start_due", j))
            return
        j.start_sent = True
        await call.write(_started(a))

    async def end_unstarted(self, j: _Job, fin: worker_pb2.JobFinished, msg: str, call: Any) -> None:
        """Reports the end of a job whose function never ran (fin)."""
        log.warning("job could not start: job=%d outcome=%s %s", j.assign.job, cpb.Outcome.Name(fin.outcome).lower(), msg)
        if self.start_delay == 0:
            j.start_sent = True
            await call.write(_started(j.assign))
        j.finished = fin
        await call.write(self.report(j))

    async def finish(self, run: Run, call: Any) -> None:
        """Reports a run that ended (or frees the slot of a dropped one)."""
        j = self.cur
        if j is None or j.run is not run or j.finished is not None or run.result is None:
            return
        if j.dropped:
            self.cur = None  # its result is not the cluster's any more
            self.poke()
            return
        res = run.result
        if j.cancelling:
            outcome = cpb.CANCELLED
        elif res.snooze_ms and self.snooze_ok:
            outcome = cpb.SNOOZED
        elif res.snooze_ms:
            # An earlier build's leader cannot snooze a job (it would
            # reject the outcome): the run counts as failed, saying so.
            res.error += ("\nthe run asked to be snoozed %gs, but the leader (an earlier build) cannot snooze a job: "
                          "the run counts as failed" % (res.snooze_ms / 1000))
            outcome = cpb.FAILED
        elif res.ok:
            outcome = cpb.OK
        else:
            outcome = cpb.FAILED
        j.finished = worker_pb2.JobFinished(
            job=j.assign.job, attempt=j.assign.attempt, outcome=outcome, cpu_ms=res.cpu_ms,
            exit_code=0 if res.ok or outcome == cpb.SNOOZED else 1, stderr_tail=res.error, stdout_tail=res.output,
            permanent=res.permanent and outcome == cpb.FAILED, snooze_ms=res.snooze_ms if outcome == cpb.SNOOZED else 0)
        log.info("job ended: job=%d attempt=%d outcome=%s cpu_ms=%d", j.assign.job, j.assign.attempt,
                 cpb.Outcome.Name(outcome).lower(), res.cpu_ms)
        await call.write(self.report(j))

    def abandon(self, grace: float) -> None:
        """Ends the current run as failed now (the worker stops and its
        grace has passed): the function is asked to stop, the run is
        reported with its CPU so far, and whatever the function does later
        is dropped."""
        j = self.cur
        if j is None or j.run is None or j.finished is not None or j.dropped:
            return
        j.abandoned = True
        msg = f"the worker stopped: its grace of {grace:g}s ended before the run did"
        cpu_ms = j.run.cpu_ms()
        j.run.cancel("worker stopping")
        j.run._finish(Result(ok=False, error=msg, cpu_ms=cpu_ms))


def unrunnable(a: worker_pb2.Assign, worker: "Worker", slot_id: str, kinds_ok: bool) -> Tuple[str, worker_pb2.JobFinished]:
    """The end of a job this worker does not run (a function job of a
    kind it has no function for, a command job), and why. To a leader that
    routes by kind (Welcome.kinds) it is not a run of the job: outcome
    unknown_kind, and the cluster gives the job to a worker that runs it.
    A job of no form (a client of an earlier build), or any job of a leader
    that does not route by kind, fails with no retry, as before kinds: no
    run of it can succeed here."""
    if a.form == cpb.COMMAND:
        msg = (f"job {a.job} is a command job, which this worker of Python functions does not run "
               f"(worker {slot_id}, pool {worker.pool or 'default'})")
    else:
        kinds = ", ".join(repr(k) for k in worker.kinds) or "none"
        msg = (f"no function for kind {a.job_type!r} on this worker (worker {slot_id}, "
               f"pool {worker.pool or 'default'}); its functions are for the kinds {kinds}")
    if kinds_ok and a.form != cpb.JOB_FORM_UNSPECIFIED:
        return msg, worker_pb2.JobFinished(job=a.job, attempt=a.attempt, outcome=cpb.UNKNOWN_KIND, cpu_ms=0,
                                           stderr_tail=cv.output_tail(msg))
    return msg, worker_pb2.JobFinished(job=a.job, attempt=a.attempt, outcome=cpb.FAILED, exit_code=127,
                                       stderr_tail=cv.output_tail(msg), permanent=True)


def _started(a: worker_pb2.Assign) -> worker_pb2.WorkerMessage:
    return worker_pb2.WorkerMessage(started=worker_pb2.JobStarted(job=a.job, attempt=a.attempt))


def _default_id() -> str:
    host = socket.gethostname().split(".")[0] or "python"
    return f"{host}-{os.getpid()}"


class Worker:
    """A worker that runs Python functions in this process: ``concurrency``
    slots (1 to 1,024), each a session of its own with the cluster's
    leader (worker IDs ``ID-1`` .. ``ID-N``; ``id`` defaults to
    ``HOST-PID``), all on one stream per server address (a stream each
    against a leader of an earlier build), serving the jobs of ``pool``
    (None: the pool default) up to ``size``.

        worker = barista.Worker(["n1:7400", "n2:7400"], token=token, size="md", concurrency=4)

        @worker.job("resize")
        def resize(ctx):                 # runs in a thread of its own
            return do_resize(ctx.payload)

        @worker.job("notify")
        async def notify(ctx):           # runs in the event loop
            await post(ctx.payload)

        await worker.run()               # until stop(), SIGTERM or SIGINT

    A function reads its job's arguments as a type of the program's — a
    dataclass, or any value JSON carries — by naming it: as the type of its
    context, ``JobContext[T]`` (or ``args=T``). The payload is then read as
    a T (``ctx.args``), the same type the client submitted
    (``client.submit(T(...))``): a dataclass is built field by field, its
    own dataclasses too; a payload that is not a T fails the job at once,
    with no retry, saying why. A function that names no type gets the
    payload's bytes (``ctx.args`` is ``ctx.payload``). A dataclass with a
    class attribute ``kind: ClassVar[str]`` names its kind: ``@worker.job()``
    and ``client.submit`` then need none.

        @dataclass
        class Resize:
            kind: ClassVar[str] = "resize"
            image: str
            width: int

        @worker.job()
        def resize(ctx: barista.JobContext[Resize]) -> str:
            return make_thumbnail(ctx.args.image, ctx.args.width)

    Sync functions run in a thread of their slot, and share the process's
    GIL: CPU-bound functions get one core between them, however many
    slots. ``processes=N`` runs them in a pool of N worker processes
    instead (each call in one, with its own GIL; async functions stay in
    the event loop): the function must then be defined at a module's top
    level (it is pickled by name), its arguments and results must pickle,
    and it is not told of a cancel (``ctx.cancelled`` stays unset; the run
    ends when it returns). The processes start with the worker (``spawn``:
    each imports the function's module afresh) and stop with it.

    The worker tells the cluster the kinds it has functions for, and a
    cluster at feature level 8 gives it only jobs of those kinds (and jobs
    submitted with no form, which any worker runs). A job it is handed
    anyway that it does not run (a function job of another kind, a command
    job) ends its run ``unknown_kind``: the job goes back to the queue for
    a worker that runs it, with no failure counted. A job of no form whose
    kind has no function, or any such job from a cluster below level 8,
    fails at once, with no retry, its error naming the kind and the kinds
    the worker has. With a token and
    no ``tls``, a server that is not on this machine is refused
    (InvalidArgument) unless ``insecure_grpc=True``; the token is never
    shown (``repr``, errors, logs).
    """

    def __init__(self, servers: Union[str, Sequence[str]], *, token: Optional[str] = None, size: str = "sm",
                 pool: Optional[str] = None, concurrency: int = 1, tls: _conn.TLS = None, id: Optional[str] = None,
                 insecure_grpc: bool = False, processes: int = 0):
        self._servers = _conn.parse_servers(servers)
        self._token = token
        self._creds = _conn.channel_credentials(tls)
        _conn.check_token_transport(self._servers, token, self._creds, insecure_grpc)
        self._size = cv.size(size)
        self.size = cv.size_name(self._size)
        if pool is not None and pool != "default":
            _check_pool(pool)
        self.pool = pool if pool not in (None, "default") else None
        if (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1
                or concurrency > _mux.MAX_SLOTS):
            raise errors.InvalidArgument(f"concurrency: {concurrency!r} (want 1 to {_mux.MAX_SLOTS})", field="concurrency")
        self.concurrency = concurrency
        if not isinstance(processes, int) or isinstance(processes, bool) or processes < 0:
            raise errors.InvalidArgument(f"processes: {processes!r} (want 0, sync functions in threads, or more)",
                                         field="processes")
        self.processes = processes
        self._pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
        self.id = id or _default_id()
        _check_id(self.id)
        self._functions: Dict[str, Function] = {}
        self._slots = [_Slot(self, f"{self.id}-{k}", k) for k in range(1, concurrency + 1)]
        self._channels: Dict[str, grpc.aio.Channel] = {}
        # The slots of a worker of many share a stream per server address.
        self._dialer = _mux.Dialer(self._connect, HANDSHAKE_TIMEOUT) if concurrency > 1 else None
        self._draining = False
        self._draining_event: Optional[asyncio.Event] = None
        self._tasks: List[asyncio.Task[None]] = []
        self._running = False
        self._ran = False
        self._stopped: Optional[asyncio.Event] = None  # set when stop() gives up waiting
        self._done: Optional[asyncio.Event] = None  # set when run() returns
        self._stop_task: Optional[asyncio.Task[None]] = None

    def __repr__(self) -> str:
        # Never the token.
        return f"barista.Worker(servers={self._servers!r}, id={self.id!r}, size={self.size!r})"

    @property
    def worker_ids(self) -> List[str]:
        """The worker IDs of the slots (``ID-1`` .. ``ID-N``)."""
        return [s.id for s in self._slots]

    @property
    def kinds(self) -> List[str]:
        return sorted(self._functions)

    def job(self, kind: Optional[str] = None, *, args: Optional[Type[Any]] = None) -> Callable[[F], F]:
        """Registers the decorated function (``def f(ctx)`` or ``async def
        f(ctx)``) for the jobs of ``kind`` (None: its arguments' type's
        ``kind``), their payloads read as ``args`` (None: the type its
        context names, ``JobContext[T]``, else the bytes)."""
        def register(fn: F) -> F:
            self.register(kind, fn, args=args)
            return fn
        return register

    def register(self, kind: Optional[str], fn: JobFunction, *, args: Optional[Type[Any]] = None) -> None:
        """Registers fn for the jobs of kind (as ``@worker.job(kind)``)."""
        if not callable(fn):
            raise errors.InvalidArgument(f"the function for kind {kind!r} is not callable", field="kind")
        if args is None:
            args = args_type(fn)
        if kind is None:
            kind = _payload.kind_of(args) if args is not None else None
            if kind is None:
                raise errors.InvalidArgument(f"{getattr(fn, '__name__', fn)!r}: no kind given, and its arguments' type "
                                             "names none (a class attribute kind)", field="kind")
        if not isinstance(kind, str):
            raise errors.InvalidArgument(f"kind: {kind!r} is not a string", field="kind")
        if kind in self._functions:
            raise errors.InvalidArgument(f"kind {kind!r} already has a function", field="kind")
        self._functions[kind] = Function(fn, args)

    def _channel(self, addr: str) -> grpc.aio.Channel:
        ch = self._channels.get(addr)
        if ch is None:
            ch = self._channels[addr] = _conn.open_channel(addr, self._creds)
        return ch

    def _connect(self, addr: str) -> Any:
        """Opens a stream (the Connect call) to addr."""
        md = [("authorization", "Bearer " + self._token)] if self._token else None
        return worker_pb2_grpc.WorkerStub(self._channel(addr)).Connect(metadata=md)

    async def _open(self, addr: str, k: int) -> _mux.Stream:
        """Slot k's stream to addr: its slot of the shared stream, or a
        stream of its own for a worker of one slot."""
        if self._dialer is None:
            return _mux.PlainStream(self._connect(addr))
        return await self._dialer.open(addr, k)

    async def _sleep(self, seconds: float) -> None:
        """Sleeps, or less if the worker stops meanwhile."""
        assert self._stopped is not None  # run() made it
        try:
            await asyncio.wait_for(self._stopped.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def busy(self) -> int:
        """How many slots hold a job."""
        return sum(1 for s in self._slots if s.cur is not None)

    async def run(self, *, handle_signals: bool = True, grace: float = 30.0) -> None:
        """Serves jobs until ``stop()``. With ``handle_signals`` (and when
        run in the main thread), SIGTERM and SIGINT stop the worker
        gracefully with ``grace`` seconds: it takes no new job, lets the
        running ones finish, and fails (for a retry elsewhere) those still
        running at the end of the grace; a second signal stops it at once.
        Raises the cluster's refusal when it refuses the worker in a way
        no retry can change: Unauthenticated (a token it does not know),
        PermissionDenied (the token's worker_id binding does not cover the
        slots' IDs), NotFound (a pool it does not hold), InvalidArgument
        (an ID or size it does not take)."""
        if not self._functions:
            raise errors.InvalidArgument("the worker has no function: register one with @worker.job(kind)")
        if self._running or self._ran:
            raise RuntimeError("a Worker runs once: make a new one to run again")
        self._running = self._ran = True
        self._stopped, self._done = asyncio.Event(), asyncio.Event()
        self._draining_event = asyncio.Event()
        if self._draining:
            self._draining_event.set()
        loop = asyncio.get_running_loop()
        signals: List[signal.Signals] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig, grace)
                    signals.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        if self.processes > 0:
            # spawn, not fork: a forked child of a process with gRPC's
            # threads may hang.
            self._pool = concurrent.futures.ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"))
        log.info("worker starting: slots=%s size=%s pool=%s kinds=%s processes=%d", ",".join(self.worker_ids), self.size,
                 self.pool or "default", ",".join(self.kinds), self.processes)
        self._tasks = [loop.create_task(s.serve()) for s in self._slots]
        try:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                exc = None if t.cancelled() else t.exception()
                if exc is not None:
                    raise exc
        finally:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for sig in signals:
                loop.remove_signal_handler(sig)
            if self._dialer is not None:
                self._dialer.close()
            for ch in self._channels.values():
                await ch.close()
            self._channels.clear()
            if self._pool is not None:
                # A call still running in a process (past the grace) is
                # not waited for.
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            self._stopped.set()
            self._running = False
            self._done.set()
            if self._stop_task is not None:
                await asyncio.gather(self._stop_task, return_exceptions=True)
            log.info("worker stopped")

    def _on_signal(self, sig: int, grace: float) -> None:
        if self._stop_task is None:
            log.info("signal %s: stopping; the running jobs have %gs to finish (a second signal stops them now)",
                     signal.Signals(sig).name, grace)
            self._stop_task = asyncio.get_running_loop().create_task(self.stop(grace=grace))
        else:
            log.info("second signal %s: stopping the running jobs now", signal.Signals(sig).name)
            self._grace_over(0)

    def _grace_over(self, grace: float) -> None:
        for s in self._slots:
            s.abandon(grace)

    async def stop(self, grace: float = 30.0) -> None:
        """Stops the worker: no slot takes a new job; the running jobs have
        ``grace`` seconds to finish and be reported; those still running
        then are asked to stop (``ctx.cancelled``, or CancelledError) and
        reported failed, to be retried (a sync function that goes on runs
        on in its thread, its result dropped). Returns once ``run()`` has
        returned."""
        self._draining = True
        if not self._running:
            return
        assert self._draining_event is not None and self._stopped is not None and self._done is not None  # run() made them
        self._draining_event.set()
        for s in self._slots:
            s.poke()
        _, pending = await asyncio.wait(self._tasks, timeout=grace) if self._tasks else (set(), set())
        if pending:
            self._grace_over(grace)
            _, pending = await asyncio.wait(pending, timeout=STOP_REPORT_WAIT)
            for t in pending:
                t.cancel()
        self._stopped.set()
        await self._done.wait()


def _check_id(worker_id: str) -> None:
    """A worker ID is 1..256 bytes of UTF-8 with no space or control
    character (the cluster checks every rule again)."""
    raw = worker_id.encode("utf-8", "surrogatepass")
    if not worker_id or len(raw) + 4 > 256:
        raise errors.InvalidArgument(f"id: {worker_id!r} (want 1..251 bytes: its slots add -N)", field="id")
    for i, ch in enumerate(worker_id):
        if ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            raise errors.InvalidArgument(f"id: {worker_id!r} has {ch!r} at character {i}", field="id")


def _check_pool(pool: str) -> None:
    ok = 0 < len(pool) <= 63 and all(c.isascii() and (c.islower() or c.isdigit() or (c == "-" and i > 0))
                                     for i, c in enumerate(pool))
    if not ok:
        raise errors.InvalidArgument(f"pool: {pool!r} (want 1 to 63 of a-z, 0-9 and -, not starting with -)", field="pool")

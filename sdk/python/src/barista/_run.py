"""One call of a job's function: in a thread of its own for a sync
function (its CPU is that thread's CPU time), as a task of the event loop
for an async one (its CPU is the wall time it took)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import time
import traceback
from datetime import timedelta
from typing import Any, Awaitable, Callable, Optional, Union

from . import _convert as cv
from ._limits import MAX_SNOOZE_MS, MIN_SNOOZE_MS

log = logging.getLogger("barista.worker")

class Snooze(Exception):
    """Raised by a job's function to end its run "snoozed": the job waits,
    scheduled, for ``delay`` (a timedelta or seconds) and is tried again,
    without counting a failure (a downstream service said "not yet"). A
    delay outside the cluster's bounds (1 s .. 24 h) is held to them, and
    the worker's log says so, as the Go worker does. A job snoozed
    ``max_snoozes`` times in a row (100) fails."""

    def __init__(self, delay: Union[timedelta, int, float]):
        asked = cv.millis(delay, "snooze")
        ms = min(max(asked, MIN_SNOOZE_MS), MAX_SNOOZE_MS)
        if ms != asked:
            log.warning("snooze held to the cluster's bounds: asked=%dms snooze=%dms", asked, ms)
        super().__init__(f"snoozed for {ms / 1000:g}s")
        self.delay = timedelta(milliseconds=ms)
        self.ms = ms


class Unrunnable(Exception):
    """Raised by a job's function when no run of the job can ever succeed,
    on this worker or any other (its payload is not one the function can
    read): the job fails at once, with no retry, the message as its
    error."""


class JobContext:
    """What a job's function is given: the job and its cancellation.

    ``payload`` (bytes), ``job_id``, ``attempt`` (1 for the first run; a
    retried job runs again with a higher one), ``tenant``, ``kind`` (the
    job's type), ``pool``, ``size``, ``timeout`` (a timedelta, or None),
    ``worker_id`` (the slot's). ``cancelled`` is a threading.Event set when
    the run must stop: the cluster cancelled the job (a cancel, or its
    timeout), rejected the run, the worker lost contact with the cluster
    for self_kill_after, or the worker stops past its grace;
    ``cancel_reason`` says which. A sync function checks it (or waits on
    it); an async function is cancelled with asyncio.CancelledError.
    """

    __slots__ = ("payload", "job_id", "attempt", "tenant", "kind", "pool", "size", "timeout", "worker_id",
                 "cancelled", "cancel_reason")

    def __init__(self, assign, worker_id: str):
        self.payload: bytes = bytes(assign.payload)
        self.job_id: int = assign.job
        self.attempt: int = assign.attempt
        self.tenant: str = assign.tenant
        self.kind: str = assign.job_type
        self.pool: str = assign.pool or "default"
        self.size: str = cv.size_name(assign.size)
        self.timeout: Optional[timedelta] = cv.opt_ms(assign.timeout_ms)
        self.worker_id: str = worker_id
        self.cancelled = threading.Event()
        self.cancel_reason: str = ""

    def __repr__(self) -> str:
        return f"JobContext(job_id={self.job_id}, attempt={self.attempt}, tenant={self.tenant!r}, kind={self.kind!r})"


JobFunction = Callable[[JobContext], Union[Any, Awaitable[Any]]]


class Result:
    """How a call ended."""

    __slots__ = ("ok", "output", "error", "snooze_ms", "permanent", "cpu_ms")

    def __init__(self, *, ok: bool, output: str = "", error: str = "", snooze_ms: int = 0, permanent: bool = False,
                 cpu_ms: int = 0):
        self.ok, self.output, self.error = ok, output, error
        self.snooze_ms, self.permanent, self.cpu_ms = snooze_ms, permanent, cpu_ms


def _returned(value: Any, cpu_ms: int) -> Result:
    if value is None:
        return Result(ok=True, cpu_ms=cpu_ms)
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        return Result(ok=True, output=cv.output_tail(value if isinstance(value, str) else bytes(value)), cpu_ms=cpu_ms)
    return Result(ok=False, error=f"the function returned a {type(value).__name__}: it must return bytes, str or None",
                  cpu_ms=cpu_ms)


def _raised(exc: BaseException, cpu_ms: int) -> Result:
    if isinstance(exc, Snooze):
        return Result(ok=False, snooze_ms=exc.ms, cpu_ms=cpu_ms)
    if isinstance(exc, Unrunnable):
        return Result(ok=False, error=cv.output_tail(str(exc) or "unrunnable"), permanent=True, cpu_ms=cpu_ms)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Result(ok=False, error=cv.output_tail(text), cpu_ms=cpu_ms)


class Run:
    """One call of a function for one job. ``on_done(run)`` is called in
    the event loop once the call ended; ``result`` is then set."""

    def __init__(self, fn: JobFunction, ctx: JobContext, on_done: Callable[["Run"], None],
                 thread: Optional["SlotThread"] = None):
        self.fn, self.ctx, self.on_done = fn, ctx, on_done
        self.thread = thread
        self.is_async = inspect.iscoroutinefunction(fn)
        self.loop = asyncio.get_running_loop()
        self.started = time.monotonic()
        self.result: Optional[Result] = None
        self._task: Optional[asyncio.Task] = None
        # A sync call's thread: its CPU clock while it runs (None before
        # and after, under _lock, so that nobody reads the clock of a
        # thread that is gone), its CPU time at the start, and at the end.
        self._lock = threading.Lock()
        self._clock: Optional[int] = None
        self._cpu0 = 0.0
        self._cpu_end: Optional[float] = None

    @property
    def done(self) -> bool:
        return self.result is not None

    def start(self) -> None:
        if self.is_async:
            self._task = self.loop.create_task(self._call_async())
        elif self.thread is not None:
            self.thread.call(self._call_sync)
        else:
            threading.Thread(target=self._call_sync, name=f"barista-job-{self.ctx.job_id}", daemon=True).start()

    def cpu_ms(self) -> int:
        """The CPU so far: the thread's CPU time of a sync call, the wall
        time of an async one."""
        if self.result is not None:
            return self.result.cpu_ms
        if self.is_async:
            return int((time.monotonic() - self.started) * 1000)
        with self._lock:
            if self._cpu_end is not None:
                return int(self._cpu_end * 1000)
            if self._clock is None:
                return 0
            try:
                return int((time.clock_gettime(self._clock) - self._cpu0) * 1000)
            except OSError:
                return 0

    def cancel(self, reason: str) -> None:
        """Asks the call to stop: sets ctx.cancelled, and cancels an async
        call's task."""
        if not self.ctx.cancelled.is_set():
            self.ctx.cancel_reason = reason
            self.ctx.cancelled.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _finish(self, result: Result) -> None:
        if self.result is None:
            self.result = result
            self.on_done(self)

    async def _call_async(self) -> None:
        try:
            value = await self.fn(self.ctx)
        except asyncio.CancelledError as e:
            result = Result(ok=False, error="cancelled: " + (self.ctx.cancel_reason or "the task was cancelled"))
            del e
        except BaseException as e:  # noqa: BLE001 - every failure of the function is its run's
            result = _raised(e, 0)
        else:
            result = _returned(value, 0)
        result.cpu_ms = int((time.monotonic() - self.started) * 1000)
        self._finish(result)

    def _call_sync(self) -> None:
        with self._lock:
            # The thread's CPU clock, for heartbeats while it runs (a
            # platform without it reports the CPU at the end only).
            getclock = getattr(time, "pthread_getcpuclockid", None)
            self._clock = getclock(threading.get_ident()) if getclock is not None else None
            self._cpu0 = time.thread_time()
        try:
            value = self.fn(self.ctx)
            if inspect.isawaitable(value):
                raise TypeError("the function returned an awaitable: register it as an async def")
        except BaseException as e:  # noqa: BLE001
            outcome = ("raised", e)
        else:
            outcome = ("returned", value)
        cpu = time.thread_time() - self._cpu0
        with self._lock:
            self._clock, self._cpu_end = None, cpu
        cpu_ms = int(cpu * 1000)
        result = _raised(outcome[1], cpu_ms) if outcome[0] == "raised" else _returned(outcome[1], cpu_ms)
        try:
            self.loop.call_soon_threadsafe(self._finish, result)
        except RuntimeError:
            pass  # the loop is gone: the worker stopped without it


class SlotThread:
    """The thread that runs a slot's sync functions, one call after the
    other (a slot holds one job at a time, and takes the next only once
    the function of the last has returned): started at the first call,
    a daemon, so that a function that never returns does not hold the
    process at exit."""

    def __init__(self, name: str):
        self.name = name
        self._calls: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None

    def call(self, fn: Callable[[], None]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        self._calls.put(fn)

    def _serve(self) -> None:
        while True:
            fn = self._calls.get()
            if fn is None:
                return
            fn()

    def close(self) -> None:
        """Ends the thread once its current call (if any) returns."""
        if self._thread is not None:
            self._calls.put(None)
            self._thread = None

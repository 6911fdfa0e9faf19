"""One call of a job's function: in a thread of its own for a sync
function (its CPU is that thread's CPU time), in a worker process of the
Worker's pool for a sync function when it has one (``processes=N``: its
CPU is that call's CPU time in the process), as a task of the event loop
for an async one (its CPU is the wall time it took)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import queue
import threading
import time
import traceback
import typing
from datetime import timedelta
from typing import Any, Awaitable, Callable, Generic, Optional, Tuple, Type, TypeVar, Union

from . import _convert as cv
from . import _payload
from ._limits import MAX_SNOOZE_MS, MIN_SNOOZE_MS
from ._proto import worker_pb2

log = logging.getLogger("barista.worker")

T = TypeVar("T")


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


class JobContext(Generic[T]):
    """What a job's function is given: the job, its arguments and its
    cancellation.

    ``args`` is the payload read as the function's type (a
    ``JobContext[Resize]`` gets a ``Resize``: see ``Worker.job``), or the
    payload's bytes for a function that names no type; ``payload`` is
    always the bytes. ``job_id``, ``attempt`` (1 for the first run; every
    later run of the job — a retry, the run after a snooze — has a higher
    one), ``tenant``, ``kind`` (the job's type), ``pool``, ``size``,
    ``timeout`` (a timedelta, or None), ``worker_id`` (the slot's).
    ``cancelled`` is a threading.Event set when the run must stop: the
    cluster cancelled the job (a cancel, or its timeout), rejected the
    run, the worker lost contact with the cluster for self_kill_after, or
    the worker stops past its grace; ``cancel_reason`` says which. A sync
    function checks it (or waits on it); an async function is cancelled
    with asyncio.CancelledError. (A function run in a worker process,
    ``processes=N``, is not told: its run ends when it returns.)
    """

    __slots__ = ("args", "payload", "job_id", "attempt", "tenant", "kind", "pool", "size", "timeout", "worker_id",
                 "cancelled", "cancel_reason")

    def __init__(self, *, args: T, payload: bytes, job_id: int, attempt: int, tenant: str, kind: str, pool: str,
                 size: str, timeout: Optional[timedelta], worker_id: str):
        self.args: T = args
        self.payload: bytes = payload
        self.job_id: int = job_id
        self.attempt: int = attempt
        self.tenant: str = tenant
        self.kind: str = kind
        self.pool: str = pool
        self.size: str = size
        self.timeout: Optional[timedelta] = timeout
        self.worker_id: str = worker_id
        self.cancelled = threading.Event()
        self.cancel_reason: str = ""

    @staticmethod
    def of(assign: worker_pb2.Assign, worker_id: str, args: Any) -> "JobContext[Any]":
        return JobContext(args=args, payload=bytes(assign.payload), job_id=assign.job, attempt=assign.attempt,
                          tenant=assign.tenant, kind=assign.job_type, pool=assign.pool or "default",
                          size=cv.size_name(assign.size), timeout=cv.opt_ms(assign.timeout_ms), worker_id=worker_id)

    def __repr__(self) -> str:
        return f"JobContext(job_id={self.job_id}, attempt={self.attempt}, tenant={self.tenant!r}, kind={self.kind!r})"

    def __reduce__(self) -> Tuple[Any, ...]:
        # To a worker process: the fields, not the Event (a new, unset one).
        return (_context, (self.args, self.payload, self.job_id, self.attempt, self.tenant, self.kind, self.pool,
                           self.size, self.timeout, self.worker_id))


def _context(args: Any, payload: bytes, job_id: int, attempt: int, tenant: str, kind: str, pool: str, size: str,
             timeout: Optional[timedelta], worker_id: str) -> "JobContext[Any]":
    return JobContext(args=args, payload=payload, job_id=job_id, attempt=attempt, tenant=tenant, kind=kind, pool=pool,
                      size=size, timeout=timeout, worker_id=worker_id)


JobFunction = Callable[[JobContext[Any]], Any]


class Function:
    """A registered function: fn, and the type its jobs' payloads are read
    as (None: the bytes)."""

    __slots__ = ("fn", "args", "is_async")

    def __init__(self, fn: JobFunction, args: Optional[Type[Any]]):
        self.fn, self.args = fn, args
        self.is_async = inspect.iscoroutinefunction(fn)

    def decode(self, payload: bytes) -> Any:
        """The payload as the function reads it; _payload.PayloadError if
        it does not decode."""
        return _payload.decode(payload, self.args)

    @property
    def args_name(self) -> str:
        return getattr(self.args, "__name__", None) or str(self.args)


def args_type(fn: Callable[..., Any]) -> Optional[Type[Any]]:
    """The type T of fn's first parameter when it is annotated
    JobContext[T] (None: it names none, or bytes)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError):
        return None
    if not params:
        return None
    hint = hints.get(params[0].name)
    if typing.get_origin(hint) is JobContext:
        (arg,) = typing.get_args(hint)
        if arg is not Any and not isinstance(arg, TypeVar):
            return typing.cast(Type[Any], arg)
    return None


class Result:
    """How a call ended."""

    __slots__ = ("ok", "output", "error", "snooze_ms", "permanent", "cpu_ms")

    def __init__(self, *, ok: bool, output: str = "", error: str = "", snooze_ms: int = 0, permanent: bool = False,
                 cpu_ms: int = 0):
        self.ok, self.output, self.error = ok, output, error
        self.snooze_ms, self.permanent, self.cpu_ms = snooze_ms, permanent, cpu_ms

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_result, (self.ok, self.output, self.error, self.snooze_ms, self.permanent, self.cpu_ms))


def _result(ok: bool, output: str, error: str, snooze_ms: int, permanent: bool, cpu_ms: int) -> Result:
    return Result(ok=ok, output=output, error=error, snooze_ms=snooze_ms, permanent=permanent, cpu_ms=cpu_ms)


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


def call_sync(fn: JobFunction, ctx: JobContext[Any]) -> Result:
    """A sync call of fn, with its thread's CPU: what a worker process
    runs (processes=N)."""
    cpu0 = time.thread_time()
    try:
        value = fn(ctx)
        if inspect.isawaitable(value):
            raise TypeError("the function returned an awaitable: register it as an async def")
    except BaseException as e:  # noqa: BLE001 - every failure of the function is its run's
        return _raised(e, int((time.thread_time() - cpu0) * 1000))
    return _returned(value, int((time.thread_time() - cpu0) * 1000))


class Run:
    """One call of a function for one job. ``on_done(run)`` is called in
    the event loop once the call ended; ``result`` is then set."""

    def __init__(self, fn: JobFunction, ctx: JobContext[Any], on_done: Callable[["Run"], None],
                 thread: Optional["SlotThread"] = None, processes: Optional[concurrent.futures.Executor] = None):
        self.fn, self.ctx, self.on_done = fn, ctx, on_done
        self.thread = thread
        self.processes = processes
        self.is_async = inspect.iscoroutinefunction(fn)
        self.loop = asyncio.get_running_loop()
        self.started = time.monotonic()
        self.result: Optional[Result] = None
        self._task: Optional[asyncio.Task[None]] = None
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

    @property
    def in_process(self) -> bool:
        """The call runs in a worker process (its CPU is known at its end)."""
        return self.processes is not None and not self.is_async

    def start(self) -> None:
        if self.is_async:
            self._task = self.loop.create_task(self._call_async())
        elif self.processes is not None:
            try:
                future = self.processes.submit(call_sync, self.fn, self.ctx)
            except Exception as e:  # noqa: BLE001 - a pool that cannot take it (broken, shut down) fails the run
                self._finish(Result(ok=False, error=cv.output_tail(f"the worker processes cannot run the call: {e!r}")))
                return
            future.add_done_callback(self._process_done)
        elif self.thread is not None:
            self.thread.call(self._call_sync)
        else:
            threading.Thread(target=self._call_sync, name=f"barista-job-{self.ctx.job_id}", daemon=True).start()

    def cpu_ms(self) -> int:
        """The CPU so far: the thread's CPU time of a sync call, the wall
        time of an async one or of one in a worker process."""
        if self.result is not None:
            return self.result.cpu_ms
        if self.is_async or self.in_process:
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

    def _process_done(self, future: "concurrent.futures.Future[Result]") -> None:
        """A worker process's call ended (in the pool's thread)."""
        try:
            result = future.result()
        except BaseException as e:  # noqa: BLE001 - the process died, or the call's result did not pickle
            result = Result(ok=False, error=cv.output_tail(f"the worker process failed the call: {e!r}"),
                            cpu_ms=int((time.monotonic() - self.started) * 1000))
        try:
            self.loop.call_soon_threadsafe(self._finish, result)
        except RuntimeError:
            pass  # the loop is gone: the worker stopped without it

    async def _call_async(self) -> None:
        try:
            value = await typing.cast(Awaitable[Any], self.fn(self.ctx))
        except asyncio.CancelledError:
            result = Result(ok=False, error="cancelled: " + (self.ctx.cancel_reason or "the task was cancelled"))
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
            getclock: Optional[Callable[[int], int]] = getattr(time, "pthread_getcpuclockid", None)
            self._clock = getclock(threading.get_ident()) if getclock is not None else None
            self._cpu0 = time.thread_time()
        outcome: Tuple[bool, Any]
        try:
            value = self.fn(self.ctx)
            if inspect.isawaitable(value):
                raise TypeError("the function returned an awaitable: register it as an async def")
        except BaseException as e:  # noqa: BLE001
            outcome = (False, e)
        else:
            outcome = (True, value)
        cpu = time.thread_time() - self._cpu0
        with self._lock:
            self._clock, self._cpu_end = None, cpu
        cpu_ms = int(cpu * 1000)
        result = _returned(outcome[1], cpu_ms) if outcome[0] else _raised(outcome[1], cpu_ms)
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
        self._calls: "queue.SimpleQueue[Optional[Callable[[], None]]]" = queue.SimpleQueue()
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

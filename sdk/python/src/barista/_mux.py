"""The streams of a worker's slots: slots of one stream per server address
shared by the slots of one Worker (Hello.mux, docs/workers.md "Many slots
on one stream"), or a stream of one session against a leader of an
earlier build, which does not multiplex."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Dict, Optional, Set

import grpc
import grpc.aio
from ._proto import rpc_status_pb2, worker_pb2

log = logging.getLogger("barista.worker")

# The slots of a multiplexed stream (the leader's bound), and how many
# leader messages one slot may have waiting: a slot reads its own at once,
# so one that has this many is stuck, and its session ends (the others go
# on).
MAX_SLOTS = 1024
SLOT_INBOX = 64
# How long an address whose leader did not multiplex a stream (an
# earlier build) gets streams of one session before the next tries again.
PLAIN_FOR = 60.0

_CODES = {c.value[0]: c for c in grpc.StatusCode}
_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class Silent(ConnectionError):
    """A session ended for want of an answer from its server (no Welcome
    in time, heartbeats not acknowledged): the stream may look open while
    its server is gone."""


class Stream:
    """A slot's stream to a server: its writes, its reads (a LeaderMessage,
    grpc.aio.EOF at a normal end, or the end's error raised), and close."""

    async def write(self, m: worker_pb2.WorkerMessage) -> None:
        raise NotImplementedError

    async def read(self) -> Any:
        raise NotImplementedError

    def close(self, err: Optional[BaseException]) -> None:
        """Ends the slot's use of the stream; err is why its session ended
        (None: it did not fail)."""
        raise NotImplementedError


class PlainStream(Stream):
    """A stream of one session."""

    def __init__(self, call: Any):
        self.call = call

    async def write(self, m: worker_pb2.WorkerMessage) -> None:
        await self.call.write(m)

    async def read(self) -> Any:
        return await self.call.read()

    def close(self, err: Optional[BaseException]) -> None:
        self.call.cancel()


class RedirectOnly(Stream):
    """What a slot gets that waited for a shared stream whose server
    redirected it: that Redirect, then the stream's end."""

    def __init__(self, m: worker_pb2.LeaderMessage):
        self.m: Optional[worker_pb2.LeaderMessage] = m

    async def write(self, m: worker_pb2.WorkerMessage) -> None:
        pass

    async def read(self) -> Any:
        m, self.m = self.m, None
        return m if m is not None else grpc.aio.EOF

    def close(self, err: Optional[BaseException]) -> None:
        pass


def rpc_error(code: grpc.StatusCode, details: str, status: bytes = b"") -> BaseException:
    """A gRPC error as a stream's end would raise it, with the serialized
    google.rpc.Status of its details when there is one."""
    trailing = grpc.aio.Metadata((_STATUS_DETAILS_KEY, status)) if status else grpc.aio.Metadata()
    err: BaseException = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details)
    return err


def slot_end_error(e: worker_pb2.SlotEnd) -> Optional[BaseException]:
    """The error a SlotEnd from the leader ends its slot's session with (a
    gRPC error with the status's details, as a stream's end would carry);
    None for a normal end."""
    if not e.status:
        return None
    st = rpc_status_pb2.Status()
    try:
        st.ParseFromString(e.status)
    except Exception:  # noqa: BLE001 - a status that does not decode ends the slot all the same
        return rpc_error(grpc.StatusCode.INTERNAL, "the leader ended the slot with a status that does not decode")
    if st.code == 0:
        return None
    return rpc_error(_CODES.get(st.code, grpc.StatusCode.UNKNOWN), st.message, bytes(e.status))


async def _first(*events: asyncio.Event) -> None:
    """Waits until one of events is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


class Dialer:
    """Gives the slots of one Worker their streams: slots of one shared
    stream per server address, opened by the first slot that connects and
    closed when the last leaves. The first slot's Hello asks for a
    multiplexed stream; a leader of an earlier build serves it as that
    slot's session alone (its Welcome does not say mux), and the other
    slots then open streams of their own, as before."""

    def __init__(self, connect: Callable[[str], Any], handshake: float):
        self.connect = connect  # opens a gRPC stream (a call) to an address
        self.handshake = handshake
        self.born = time.monotonic()
        self.conns: Dict[str, Conn] = {}
        self.plain: Dict[str, float] = {}  # address -> when its leader did not multiplex
        self.opened = 0  # shared streams opened (for the tests)

    def until_beat(self, interval: float) -> float:
        """The time from now to the slots' next heartbeat of interval: the
        slots' heartbeats go together, at the Worker's own phase."""
        if interval <= 0:
            return 1.0
        return interval - (time.monotonic() - self.born) % interval

    async def open(self, addr: str, slot: int) -> Stream:
        while True:
            at = self.plain.get(addr)
            if at is not None and time.monotonic() - at < PLAIN_FOR:
                return PlainStream(self.connect(addr))
            c = self.conns.get(addr)
            if c is None:
                c = Conn(self, addr, self.connect(addr))
                self.conns[addr] = c
                self.opened += 1
                s = c.attach(slot)
                c.owner = s
                c.start()
                return s
            # Wait for the leader's first answer, or the stream's end.
            await _first(c.decided, c.done)
            if c.done.is_set() and not c.decided.is_set():
                raise c.err if c.err is not None else ConnectionError(f"{addr} closed the stream at Hello")
            if c.redirect is not None:
                return RedirectOnly(c.redirect)
            if not c.mux:
                continue  # the address is marked plain, or the stream is gone
            old = c.slots.get(slot)
            if old is None:
                if self.conns.get(addr) is c and not c.done.is_set():
                    return c.attach(slot)
                continue
            # The slot's previous session is still closing on this stream.
            await _first(old.released, c.done)

    def close(self) -> None:
        for c in list(self.conns.values()):
            c.close()
        self.conns.clear()


class Conn:
    """One shared stream."""

    def __init__(self, d: Dialer, addr: str, call: Any):
        self.d, self.addr, self.call = d, addr, call
        self.send_lock = asyncio.Lock()
        self.decided = asyncio.Event()  # the leader's first answer said whether it multiplexes
        self.done = asyncio.Event()  # the stream ended, err saying why
        self.mux = False
        self.redirect: Optional[worker_pb2.LeaderMessage] = None
        self.err: Optional[BaseException] = None
        self.last_recv = time.monotonic()
        self.slots: Dict[int, SlotStream] = {}
        # The slot that opened the stream, while the leader has not
        # answered, and for good if it did not multiplex (the stream is
        # then that slot's alone).
        self.owner: Optional[SlotStream] = None
        self.refs = 0
        self.tasks: Set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self.spawn(self.read())

    def spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def attach(self, slot: int) -> "SlotStream":
        s = SlotStream(self, slot)
        self.slots[slot] = s
        self.refs += 1
        return s

    async def send(self, m: worker_pb2.WorkerMessage) -> None:
        async with self.send_lock:
            if self.done.is_set():
                raise self.err if self.err is not None else ConnectionError("the stream is closed")
            await self.call.write(m)

    async def read(self) -> None:
        """Hands the stream's messages to the slots until it ends."""
        err: Optional[BaseException] = None
        try:
            while True:
                m = await self.call.read()
                if m is grpc.aio.EOF:
                    break
                self.last_recv = time.monotonic()
                self.route(m)
        except asyncio.CancelledError:
            err = ConnectionError(f"the stream to {self.addr} is closed")
        except Exception as e:  # noqa: BLE001 - every slot's session ends with it
            err = e
        self.end(err)

    def route(self, m: worker_pb2.LeaderMessage) -> None:
        """Hands m to its slot; the leader's first answer decides whether
        the stream is multiplexed."""
        which = m.WhichOneof("msg")
        if not self.decided.is_set():
            self.mux = (which == "welcome" and m.welcome.mux) or which == "end"
            if not self.mux:
                if which == "redirect":
                    self.redirect = m
                else:
                    log.info("the leader does not multiplex slots on one stream (an earlier build): each slot opens "
                             "a stream of its own: server=%s", self.addr)
                    self.d.plain[self.addr] = time.monotonic()
                self.forget()
            else:
                self.owner = None
            self.decided.set()
        s = self.owner if self.owner is not None else self.slots.get(m.slot)
        if s is None:
            return  # a message that crossed its slot's end
        if which == "end" and self.owner is None:
            s.end(slot_end_error(m.end))
            self.leave(s)
            return
        if s.ended:
            return  # a message that crossed the slot's end
        if s.inbox.qsize() >= SLOT_INBOX:
            s.end(rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"slot {s.slot} has {SLOT_INBOX} messages of the leader waiting: its session is closed"))
            return
        s.inbox.put_nowait(m)

    def leave(self, s: "SlotStream") -> None:
        """The leader's session of s is over: the slot may open again."""
        s.left = True
        if self.slots.get(s.slot) is s:
            del self.slots[s.slot]
        s.released.set()

    def forget(self) -> None:
        if self.d.conns.get(self.addr) is self:
            del self.d.conns[self.addr]

    def end(self, err: Optional[BaseException]) -> None:
        """Ends every slot with the stream's error."""
        if self.done.is_set():
            return
        self.forget()
        self.err = err
        for s in list(self.slots.values()):
            s.end(err)
            self.leave(s)
        self.done.set()

    def close(self) -> None:
        """Ends the shared stream."""
        self.forget()
        self.call.cancel()
        self.end(ConnectionError(f"the stream to {self.addr} is closed"))


class SlotStream(Stream):
    """One slot's part of a shared stream."""

    def __init__(self, c: Conn, slot: int):
        self.c, self.slot = c, slot
        self.inbox: asyncio.Queue[Optional[worker_pb2.LeaderMessage]] = asyncio.Queue()
        self.err: Optional[BaseException] = None
        # ended: the inbox is closed. left: the leader's session of the
        # slot is over (its SlotEnd came, or the stream ended). closing:
        # the slot left and its SlotEnd went out, the leader's answer is
        # awaited. released is set when the slot may open again.
        self.ended = False
        self.left = False
        self.closing = False
        self.released = asyncio.Event()

    def end(self, err: Optional[BaseException]) -> None:
        if self.ended:
            return
        self.ended, self.err = True, err
        self.inbox.put_nowait(None)

    async def write(self, m: worker_pb2.WorkerMessage) -> None:
        """Writes m as the slot's: every Hello asks for a multiplexed stream."""
        if m.WhichOneof("msg") == "hello":
            m.hello.mux = True
        m.slot = self.slot
        await self.c.send(m)

    async def read(self) -> Any:
        m = await self.inbox.get()
        if m is not None:
            return m
        self.inbox.put_nowait(None)  # the end, for every later read
        if self.err is not None:
            raise self.err
        return grpc.aio.EOF

    def close(self, err: Optional[BaseException]) -> None:
        """Leaves the stream: a slot whose session the leader has not ended
        sends SlotEnd, and the slot is free again once the leader answers.
        The last slot to leave closes the stream, and so does a slot whose
        session ended for want of an answer when nothing has come on the
        stream for a handshake's time (the stream looks open, but its
        server is gone or cut off: every slot reconnects)."""
        c = self.c
        quiet = isinstance(err, Silent) and time.monotonic() - c.last_recv > c.d.handshake
        if quiet and not c.done.is_set():
            log.warning("nothing from the server on the slots' stream: closing it: server=%s slot=%d error=%s",
                        c.addr, self.slot, err)
        owned = c.owner is self
        if owned:
            # A stream of this slot alone (or not shared yet): it closes.
            if not self.left:
                c.leave(self)
        elif not self.left and not self.closing:
            self.end(None)
            self.closing = True
            c.spawn(self._send_end())
        c.refs -= 1
        if c.refs == 0 or owned or quiet:
            c.close()

    async def _send_end(self) -> None:
        try:
            await self.c.send(worker_pb2.WorkerMessage(end=worker_pb2.SlotEnd(), slot=self.slot))
        except Exception:  # noqa: BLE001 - the stream's end ends the slot too
            pass

"""The shared worker stream's edges, without a cluster: a slot's inbox
bound, and a silent slot closing a quiet stream."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from barista import _mux
from barista._proto import worker_pb2


class FakeCall:
    """A gRPC stream that is never read: the test routes its messages."""

    def __init__(self) -> None:
        self.cancelled = False
        self.sent: list = []

    async def write(self, m) -> None:
        self.sent.append(m)

    async def read(self):
        await asyncio.Event().wait()

    def cancel(self) -> None:
        self.cancelled = True


def shared(*slots: int):
    """A decided, multiplexed stream of a Dialer with slots attached."""
    call = FakeCall()
    d = _mux.Dialer(lambda addr: call, handshake=3.0)
    c = _mux.Conn(d, "leader:1", call)
    d.conns["leader:1"] = c
    c.mux = True
    c.decided.set()
    return d, c, call, [c.attach(k) for k in slots]


async def read(s):
    """A slot's next message, within a second (a test that fails does
    not hang)."""
    return await asyncio.wait_for(s.read(), 1.0)


def cancel(slot: int, job: int) -> worker_pb2.LeaderMessage:
    return worker_pb2.LeaderMessage(slot=slot, cancel=worker_pb2.CancelOrder(job=job))


async def test_a_slot_holds_at_most_64_messages_of_the_leader():
    _, c, _, (one, two) = shared(1, 2)
    for i in range(_mux.SLOT_INBOX + 1):
        c.route(cancel(1, i + 1))
    c.route(cancel(2, 7))
    for i in range(_mux.SLOT_INBOX):
        m = await read(one)
        assert m.cancel.job == i + 1
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await read(one)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await read(two)).cancel.job == 7
    c.route(cancel(1, 99))  # after the slot's end: dropped
    with pytest.raises(grpc.aio.AioRpcError):
        await read(one)


@pytest.mark.parametrize("err, quiet_for, closes", [
    (_mux.Silent("no heartbeat acknowledged"), 4.0, True),
    (_mux.Silent("no heartbeat acknowledged"), 1.0, False),
    (ConnectionError("the job's session ended"), 4.0, False),
])
async def test_a_silent_slot_closes_a_quiet_stream(err, quiet_for, closes):
    d, c, call, (one, _) = shared(1, 2)
    c.last_recv = time.monotonic() - quiet_for
    one.close(err)
    await asyncio.sleep(0)
    assert call.cancelled is closes
    assert ("leader:1" in d.conns) is (not closes)

"""The connections of a Client (or a Worker) to the nodes of a cluster:
one gRPC channel per node, the token, the cluster's message size and
keepalive, failover from node to node and the rules of what may be sent
twice (those of the Go client, client/client.go)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from . import errors
from ._limits import MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES

HEADER_INDEX = "x-barista-index"
HEADER_MIN_INDEX = "x-barista-min-index"
HEADER_WATCH_CURSOR = "x-barista-watch-cursor"

# Defaults, as the Go client's.
CALL_TIMEOUT = 15.0
CONNECT_TIMEOUT = 2.0
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 2.0

log = logging.getLogger("barista.client")

_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

TLS = Union[None, bool, str, grpc.ChannelCredentials]


def channel_credentials(tls: TLS) -> Optional[grpc.ChannelCredentials]:
    """The credentials of ``tls``: None for plaintext, True for TLS with the
    system's roots, a path for TLS with that CA file (PEM), or credentials
    made with ``barista.tls_credentials`` (client certificates)."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    if isinstance(tls, str):
        with open(tls, "rb") as f:
            return grpc.ssl_channel_credentials(root_certificates=f.read())
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    raise errors.InvalidArgument(f"tls: {tls!r} (want None, True, a CA file's path or grpc.ChannelCredentials)", field="tls")


def channel_options(extra: Sequence[Tuple[str, Any]] = ()) -> List[Tuple[str, Any]]:
    """The options of every connection to a node: the cluster's message
    size, keepalive pings that notice a vanished node (every 10 s, 5 s to
    answer; the nodes accept them), and quick reconnects (100 ms doubling
    to 2 s) so that a node that restarts is used again soon."""
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2_000),
        ("grpc.enable_retries", 0),
        *extra,
    ]


def open_channel(addr: str, creds: Optional[grpc.ChannelCredentials], extra: Sequence[Tuple[str, Any]] = ()) -> grpc.aio.Channel:
    if creds is None:
        return grpc.aio.insecure_channel(addr, options=channel_options(extra))
    return grpc.aio.secure_channel(addr, creds, options=channel_options(extra))


async def wait_ready(ch: grpc.aio.Channel, timeout: float) -> bool:
    """Connects ch and waits up to timeout for it to be ready; a connection
    that is refused (or still failing) returns False at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    state = ch.get_state(try_to_connect=True)
    while state != grpc.ChannelConnectivity.READY:
        if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
            return False
        left = deadline - loop.time()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(ch.wait_for_state_change(state), left)
        except asyncio.TimeoutError:
            return False
        state = ch.get_state(try_to_connect=True)
    return True


def on_this_machine(target: str) -> bool:
    """Whether a gRPC target is this machine's: a Unix socket, or a host
    that is a loopback IP address or "localhost" (other names are not
    resolved: they count as the network's), as the Go client's rule."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "passthrough:///", "dns:"):
        if target.startswith(scheme):
            target = target[len(scheme):]
    host = target
    if target.startswith("["):
        host = target[1:target.find("]")] if "]" in target else target[1:]
    elif target.count(":") == 1:
        host = target.rsplit(":", 1)[0]
    host = host.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def check_token_transport(addrs: Sequence[str], token: Optional[str], creds: Optional[grpc.ChannelCredentials],
                          insecure_grpc: bool) -> None:
    """Refuses to send a token in clear over a network: with a token and
    no TLS, a node that is not on this machine is refused (InvalidArgument
    naming ``insecure_grpc``) unless ``insecure_grpc`` says to send it
    anyway, as a server refuses a plaintext non-loopback --grpc-addr
    without --insecure-grpc."""
    if not token or creds is not None or insecure_grpc:
        return
    for a in addrs:
        if not on_this_machine(a):
            raise errors.InvalidArgument(
                f"servers: {a} is not on this machine and tls is not set: the token would cross the network in clear; "
                "set tls, or insecure_grpc=True to send it anyway", field="insecure_grpc")


def parse_servers(servers: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(servers, str):
        servers = servers.split(",")
    addrs = [s.strip() for s in servers if s and s.strip()]
    if not addrs:
        raise errors.InvalidArgument("servers: no node address given", field="servers")
    return addrs


class Nodes:
    """The channels to a cluster's nodes and the call loop through them.
    Channels open lazily, in the event loop of the first call."""

    def __init__(self, servers: Union[str, Sequence[str]], token: Optional[str], tls: TLS, *,
                 call_timeout: float = CALL_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT, insecure_grpc: bool = False):
        self.addrs = parse_servers(servers)
        self.token = token
        self._creds = channel_credentials(tls)
        check_token_transport(self.addrs, token, self._creds, insecure_grpc)
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self._channels: List[Optional[grpc.aio.Channel]] = [None] * len(self.addrs)
        self._next = 0  # the node tried first: the last that answered, or the one after the last that failed
        self._closed = False
        # The highest log index this client's writes were answered with;
        # every call carries it, so that a node that serves a read from
        # its own state (a watch) answers only once it holds them.
        self.last_index = 0

    def __repr__(self) -> str:
        # Never the token.
        return f"Nodes({self.addrs!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    def channel(self, i: int) -> grpc.aio.Channel:
        if self._closed:
            raise errors.ClientClosed("the client is closed")
        ch = self._channels[i]
        if ch is None:
            ch = self._channels[i] = open_channel(self.addrs[i], self._creds)
        return ch

    def metadata(self) -> List[Tuple[str, str]]:
        md = []
        if self.token:
            md.append(("authorization", "Bearer " + self.token))
        if self.last_index:
            md.append((HEADER_MIN_INDEX, str(self.last_index)))
        return md

    def note_index(self, md: Optional[Sequence[Tuple[str, str]]]) -> None:
        """Keeps the index a write's answer names (its header)."""
        for key, value in md or ():
            if key == HEADER_INDEX:
                try:
                    self.last_index = max(self.last_index, int(value))
                except ValueError:
                    pass

    def order(self) -> List[int]:
        n = len(self.addrs)
        return [(self._next + k) % n for k in range(n)]

    def prefer(self, i: int) -> None:
        self._next = i

    def skip(self, i: int) -> None:
        if self._next == i:
            self._next = (i + 1) % len(self.addrs)

    async def call(self, invoke: Callable[[grpc.aio.Channel, List[Tuple[str, str]], float], Any], *,
                   idempotent: bool, timeout: Optional[float] = None) -> Any:
        """Runs one unary call through the nodes, from the one that answered
        last: a node whose connection is not ready is skipped; a call that
        failed after it went out (UNAVAILABLE, DEADLINE_EXCEEDED) is sent
        again to the next node, in rounds with backoff until the call's
        time is up, only when it is idempotent or the node said it no
        longer leads (it did nothing). ``invoke(channel, metadata,
        timeout)`` returns an awaitable call."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.call_timeout if timeout is None else timeout)
        pause = BACKOFF_FIRST
        last: Optional[BaseException] = None
        while True:
            for i in self.order():
                left = deadline - loop.time()
                if left <= 0:
                    break
                ch = self.channel(i)
                if not await wait_ready(ch, min(self.connect_timeout, left)):
                    last = errors.Unavailable(f"cannot connect to {self.addrs[i]}")
                    self.skip(i)
                    continue
                call = invoke(ch, self.metadata(), max(deadline - loop.time(), 0.001))
                try:
                    resp = await call
                except grpc.aio.AioRpcError as e:
                    if e.code() not in _RETRYABLE:
                        self.prefer(i)  # the node answered
                        raise errors.from_rpc_error(e) from None
                    last = e
                    self.skip(i)
                    if not idempotent and not errors.is_not_leader(e):
                        # It may have been served: repeating it could do it twice.
                        raise errors.from_rpc_error(e) from None
                    log.debug("call failed on %s, trying the next node: %s: %s", self.addrs[i], e.code().name, e.details())
                    continue
                self.prefer(i)
                try:
                    self.note_index(await call.initial_metadata())
                except Exception:
                    pass
                return resp
            left = deadline - loop.time()
            if left <= 0:
                break
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, BACKOFF_MAX)
        if isinstance(last, grpc.aio.AioRpcError):
            raise errors.from_rpc_error(last) from None
        if isinstance(last, errors.BaristaError):
            raise last
        raise errors.DeadlineExceeded("no node answered in time")

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = self._channels, [None] * len(self.addrs)
        for ch in channels:
            if ch is not None:
                await ch.close()

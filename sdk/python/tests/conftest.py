"""Fixtures of the SDK's tests: a three-node cluster of bin/barista with
tokens (one per session) and its tenants. ``async def`` tests run under
pytest-asyncio (asyncio_mode auto, pyproject.toml), each in an event loop
of its own; every test is bounded in time."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Iterator, Optional

import pytest

import barista
from cluster import ADMIN_TOKEN, ROOT, Cluster

TEST_TIMEOUT = float(os.environ.get("BARISTA_PYTEST_TIMEOUT", "90"))


def barista_bin() -> Path:
    return Path(os.environ.get("BARISTA_BIN") or ROOT / "bin" / "barista")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Bounds each test to TEST_TIMEOUT seconds (SIGALRM, in the main
    thread): a test that hangs fails, naming itself, instead of holding
    the run."""
    def expired(signum: int, frame: Optional[FrameType]) -> None:
        raise TimeoutError(f"{item.nodeid} ran over {TEST_TIMEOUT:g}s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# Settings of the shared cluster: heartbeats every second, so that a run
# of a few seconds reports its CPU in heartbeats too, and retries of
# failed runs without a wait.
SCHEDULER = """
heartbeat_interval = "1s"
self_kill_after = "8s"
lease_timeout = "10s"
retry_backoff = "0s"
"""


def _serving(directory: Path, scheduler: str = "", tenants: bool = False) -> Iterator[Cluster]:
    """A three-node cluster in directory for the body of a fixture: its
    nodes' logs printed if it fails, its processes stopped at the end."""
    binary = barista_bin()
    if not binary.exists():
        pytest.skip(f"{binary} is missing: run make build")
    c = Cluster(binary, directory, 3, scheduler=scheduler)
    try:
        c.start()
        if tenants:
            asyncio.run(_tenants(c.addrs))
        yield c
    except BaseException:
        print(c.logs(), file=sys.stderr)
        raise
    finally:
        c.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    yield from _serving(tmp_path_factory.mktemp("cluster"), SCHEDULER, tenants=True)


async def _tenants(addrs):
    async with barista.Client(addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("acme", tier="gold")
        await admin.upsert_tenant("globex", tier="silver")


@pytest.fixture
def own_cluster(tmp_path):
    """A three-node cluster of the test's own, for a test that kills a node."""
    yield from _serving(tmp_path / "failover")

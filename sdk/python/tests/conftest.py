"""Fixtures of the SDK's tests: a three-node cluster of bin/barista with
tokens (one per session), its tenants, and a runner for ``async def``
tests (each runs in an event loop of its own, bounded in time)."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import barista  # noqa: E402
from cluster import ADMIN_TOKEN, ROOT, Cluster  # noqa: E402

ASYNC_TEST_TIMEOUT = float(os.environ.get("BARISTA_PYTEST_TIMEOUT", "90"))


def barista_bin() -> Path:
    return Path(os.environ.get("BARISTA_BIN") or ROOT / "bin" / "barista")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs an ``async def`` test in a new event loop, within
    ASYNC_TEST_TIMEOUT seconds."""
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(fn(**args), ASYNC_TEST_TIMEOUT))
    return True


# Settings of the shared cluster: heartbeats every second, so that a run
# of a few seconds reports its CPU in heartbeats too, and retries of
# failed runs without a wait.
SCHEDULER = """
heartbeat_interval = "1s"
self_kill_after = "8s"
lease_timeout = "10s"
retry_backoff = "0s"
"""


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    binary = barista_bin()
    if not binary.exists():
        pytest.skip(f"{binary} is missing: run make build")
    c = Cluster(binary, tmp_path_factory.mktemp("cluster"), 3, scheduler=SCHEDULER)
    try:
        c.start()
        asyncio.run(_tenants(c.addrs))
        yield c
    except BaseException:
        print(c.logs(), file=sys.stderr)
        raise
    finally:
        c.stop()


async def _tenants(addrs):
    async with barista.Client(addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("acme", tier="gold")
        await admin.upsert_tenant("globex", tier="silver")

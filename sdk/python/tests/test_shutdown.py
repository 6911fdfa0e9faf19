"""examples/python-worker as a process of its own: its jobs, and SIGTERM,
which lets a running job finish and takes no new one."""

from __future__ import annotations

import asyncio
import signal
import subprocess

import pytest

import barista
from cluster import ACME_TOKEN, PYTHON, ROOT, WORKER_TOKEN, Process, python_env

EXAMPLE = ROOT / "examples" / "python-worker"


@pytest.fixture
def example_worker(cluster, tmp_path):
    """Starts examples/python-worker/worker.py (one slot, ID py-example);
    kills it by PID at the end whatever happened."""
    procs = []

    def start(worker_id: str, *args: str) -> Process:
        env = python_env()
        env["BARISTA_TOKEN"] = WORKER_TOKEN
        p = Process(worker_id, [PYTHON, str(EXAMPLE / "worker.py"), "--server", ",".join(cluster.addrs), "--id", worker_id, *args],
                    tmp_path / f"{worker_id}.log", env=env)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()


async def test_the_example_worker_and_submit_script(cluster, example_worker):
    proc = example_worker("py-example", "--concurrency", "2")
    env = python_env()
    env["BARISTA_TOKEN"] = ACME_TOKEN
    text = "one two three\nfour five\n"

    def submit(*args: str):
        return subprocess.run([PYTHON, str(EXAMPLE / "submit.py"), "--server", ",".join(cluster.addrs), *args],
                              env=env, capture_output=True, text=True, timeout=60)

    out = await asyncio.get_running_loop().run_in_executor(None, lambda: submit("--key", "essay-1", text))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("job ") and lines[0].endswith(" submitted")
    assert [line.split()[1] for line in lines[1:-1]] == ["queued", "assigned", "started", "completed"]
    assert lines[-1] == '{"words": 5, "lines": 2}'
    again = await asyncio.get_running_loop().run_in_executor(None, lambda: submit("--key", "essay-1", text))
    assert again.stdout.splitlines()[0] == lines[0].replace("submitted", "exists")
    bad = await asyncio.get_running_loop().run_in_executor(None, lambda: submit("--kind", "wait", "soon"))
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[-1] == "failed: payload: b'soon' is not a number of seconds"
    assert proc.running()


async def test_sigterm_lets_the_running_job_finish_and_takes_no_new_one(cluster, example_worker):
    proc = example_worker("py-term", "--grace", "20")
    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c:
        long = await c.submit(b"2", kind="wait", cost=2)
        async for ev in c.watch(long):
            if ev.kind == "started":
                break
        queued = await c.submit(b"0", kind="wait", cost=1)
        proc.signal(signal.SIGTERM)
        # The running job ends as it would have: completed, its result kept.
        assert [ev.kind async for ev in c.watch(long)][-1] == "completed"
        code = await asyncio.get_running_loop().run_in_executor(None, proc.wait, 15)
        assert code == 0, proc.tail()
        got = await c.get(long)
        assert (got.state, got.result, got.worker_id) == ("completed", "waited 2s", "py-term-1")
        # The worker took no other job: the next one is still queued,
        # never dispatched, and no worker is left for it.
        nxt = await c.get(queued)
        assert (nxt.state, nxt.attempt) == ("queued", 0)
        assert (await c.explain(queued)).reason == "no_worker"
        await c.cancel(queued)
    log = proc.tail(200)
    assert "signal SIGTERM: stopping; the running jobs have 20s to finish" in log
    assert "worker stopped" in log

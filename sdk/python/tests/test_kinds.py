"""Kinds (SPEC §3 "Kinds"): the worker says the kinds it registered, a
cluster gives it only jobs of those kinds (and the command worker only
command jobs), and a job it is handed that it does not run ends
unknown_kind. Against a scripted leader (what the
worker sends) and against the real three-node cluster (what the cluster
does with it)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import barista
from barista._proto import types_pb2 as cpb
from barista._proto import worker_pb2 as wpb
from cluster import ACME_TOKEN, ADMIN_TOKEN, WORKER_TOKEN, Process
from test_protocol import assign, leaders, serving, welcome
from test_worker import running


def _digest_resize_worker(addrs, worker_id: str, **kw) -> barista.Worker:
    w = barista.Worker(addrs, id=worker_id, **kw)

    @w.job("resize")
    def resize(ctx):
        return b"resized " + ctx.payload

    @w.job("digest")
    async def digest(ctx):
        return f"digest of {ctx.payload.decode()} on {ctx.worker_id}"

    return w


async def test_hello_names_the_kinds_and_a_job_it_does_not_run_ends_unknown_kind():
    async with leaders() as (lead,):
        w = _digest_resize_worker([lead.addr], "proto-kinds")
        async with serving(w):
            s = await lead.session()
            assert list(s.hello.kinds) == ["digest", "resize"]
            assert s.hello.commands is False
            s.send(welcome=welcome(kinds=True))
            await s.expect("ready")

            # A function job of a kind it has no function for: not a run
            # of the job (unknown_kind, no CPU, not permanent).
            s.send(assign=wpb.Assign(job=7, attempt=1, job_type="thumbnail", form=cpb.FUNCTION, tenant="acme", size=cpb.SM))
            assert (await s.expect("started")).job == 7
            fin = await s.expect("finished")
            assert (fin.job, fin.attempt, fin.outcome, fin.cpu_ms, fin.exit_code, fin.permanent) == (
                7, 1, cpb.UNKNOWN_KIND, 0, 0, False)
            assert fin.stderr_tail == ("no function for kind 'thumbnail' on this worker (worker proto-kinds-1, pool default); "
                                       "its functions are for the kinds 'digest', 'resize'")
            s.send(finished_ack=wpb.FinishedAck(job=7, attempt=1))
            await s.expect("ready")

            # A command job, even of a type it has a function for.
            s.send(assign=wpb.Assign(job=8, attempt=1, job_type="digest", form=cpb.COMMAND, tenant="acme", size=cpb.SM))
            await s.expect("started")
            fin = await s.expect("finished")
            assert (fin.job, fin.outcome, fin.cpu_ms, fin.exit_code, fin.permanent) == (8, cpb.UNKNOWN_KIND, 0, 0, False)
            assert fin.stderr_tail == ("job 8 is a command job, which this worker of Python functions does not run "
                                       "(worker proto-kinds-1, pool default)")
            s.send(finished_ack=wpb.FinishedAck(job=8, attempt=1))
            await s.expect("ready")

            # A job of no form (a client of an earlier build) of a kind it
            # has no function for: failed for good, as before kinds.
            s.send(assign=assign(9, "thumbnail"))
            await s.expect("started")
            fin = await s.expect("finished")
            assert (fin.job, fin.outcome, fin.exit_code, fin.permanent) == (9, cpb.FAILED, 127, True)
            s.send(finished_ack=wpb.FinishedAck(job=9, attempt=1))
            await s.expect("ready")

            # A function job of its kind runs.
            s.send(assign=wpb.Assign(job=10, attempt=1, job_type="digest", form=cpb.FUNCTION, payload=b"x", tenant="acme",
                                     size=cpb.SM))
            await s.expect("started")
            fin = await s.expect("finished")
            assert (fin.job, fin.outcome, fin.stdout_tail) == (10, cpb.OK, "digest of x on proto-kinds-1")
            s.send(finished_ack=wpb.FinishedAck(job=10, attempt=1))


async def test_a_leader_that_does_not_route_by_kind_gets_failed_runs_as_before():
    # A Welcome without kinds (a cluster below feature level 8): a job of
    # a kind the worker has no function for fails for good, whatever its
    # form, as before kinds.
    async with leaders() as (lead,):
        w = _digest_resize_worker([lead.addr], "proto-old")
        async with serving(w):
            s = await lead.session()
            assert list(s.hello.kinds) == ["digest", "resize"]
            s.send(welcome=welcome())
            await s.expect("ready")
            s.send(assign=wpb.Assign(job=3, attempt=1, job_type="thumbnail", form=cpb.FUNCTION, tenant="acme", size=cpb.SM))
            await s.expect("started")
            fin = await s.expect("finished")
            assert (fin.job, fin.outcome, fin.exit_code, fin.permanent) == (3, cpb.FAILED, 127, True)
            s.send(finished_ack=wpb.FinishedAck(job=3, attempt=1))


def test_submit_forms():
    req = barista.Client._submit_request(b"", kind="digest", cost=1)
    assert req.form == cpb.FUNCTION
    assert barista.Client._submit_request(b"", cost=1).form == cpb.JOB_FORM_UNSPECIFIED
    assert barista.Client._submit_request(b'{"argv": ["true"]}', kind="render", form="command", cost=1).form == cpb.COMMAND
    assert barista.Client._submit_request(b"", kind="digest", form="any", cost=1).form == cpb.JOB_FORM_UNSPECIFIED
    for bad, msg in ((dict(form="function"), "form: a function job names its kind"),
                     (dict(kind="x", form="lambda"), "form: 'lambda' (want function, command or any)")):
        try:
            barista.Client._submit_request(b"", cost=1, **bad)
        except barista.InvalidArgument as e:
            assert (e.field, e.message) == ("form", msg)
        else:
            raise AssertionError(f"{bad} was taken")


async def _until(c: barista.Client, job, pred, timeout: float = 20.0) -> barista.Job:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        j = await c.get(job)
        if pred(j):
            return j
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"job {j.id}: {j.state} after {timeout}s")
        await asyncio.sleep(0.1)


async def test_a_worker_is_given_only_the_kinds_it_registered(cluster, tmp_path):
    # The jobs and workers of this test have a pool of their own, so that
    # no other test's job or worker takes part. The README's command
    # worker (barista worker) serves it too.
    cluster.pool_set("kinds")
    command = Process("cmd-kinds", [str(cluster.bin), "worker", "--size", "sm", "--pool", "kinds", "--id", "cmd-kinds",
                                    "--server", ",".join(cluster.addrs), "--token", WORKER_TOKEN,
                                    "--log-dir", str(tmp_path / "logs"), "--work-dir", str(tmp_path / "work")],
                      tmp_path / "cmd-kinds.log")
    try:
        await _only_their_kinds(cluster)
    except BaseException:
        print(f"---- barista worker\n{command.tail()}")
        raise
    finally:
        command.kill()


async def _only_their_kinds(cluster) -> None:
    kinds = _digest_resize_worker(cluster.addrs, "py-kinds", token=WORKER_TOKEN, pool="kinds")
    thumbs = barista.Worker(cluster.addrs, token=WORKER_TOKEN, pool="kinds", id="py-thumbs")

    @thumbs.job("thumbnail")
    def thumbnail(ctx):
        return b"thumbnail of " + ctx.payload

    async with barista.Client(cluster.addrs, token=ACME_TOKEN) as c:
        async with running(kinds):
            # A command job goes to the command worker.
            cmd = await c.submit(json.dumps({"argv": ["echo", "ran"]}), kind="digest", pool="kinds", cost=1, form="command")
            got = await _until(c, cmd, lambda j: j.done)
            assert (got.state, got.result, got.worker_id, got.form) == ("completed", "ran\n", "cmd-kinds", "command")

            thumb = await c.submit(b"t.png", kind="thumbnail", pool="kinds", cost=1, max_attempts=1)
            digest = await c.submit(b"d.txt", kind="digest", pool="kinds", cost=1)
            resize = await c.submit(b"r.png", kind="resize", pool="kinds", cost=1)
            assert (thumb.form, digest.form, resize.form) == ("function", "function", "function")
            for job, result in ((digest, "digest of d.txt on py-kinds-1"), (resize, "resized r.png")):
                got = await _until(c, job, lambda j: j.done)
                assert (got.state, got.result, got.worker_id, got.attempt, got.form) == (
                    "completed", result, "py-kinds-1", 1, "function")
            # The worker ran the two jobs behind the thumbnail, and was
            # never given it: it waits queued, no run, no failure.
            await asyncio.sleep(1.5)
            got = await c.get(thumb)
            assert (got.state, got.attempt, got.failures, got.worker_id, got.form) == ("queued", 0, 0, "", "function")
            # What the cluster holds of the workers: what their Hellos named.
            workers = {w["worker_id"]: (w["commands"], w["all_kinds"], w["kinds"]) for w in _workers(cluster)
                       if w["worker_id"] in ("py-kinds-1", "cmd-kinds")}
            assert workers == {"py-kinds-1": (False, False, ["digest", "resize"]), "cmd-kinds": (True, False, [])}

            # A job of that kind submitted with no form (as a client of an
            # earlier build does) goes to any worker, which fails it for
            # good (neither runs it), as before kinds.
            old = await c.submit(b"", kind="thumbnail", pool="kinds", cost=1, max_attempts=3, form="any")
            got = await _until(c, old, lambda j: j.done)
            assert (got.state, got.attempt, got.failures, got.exit_code, got.form) == ("failed", 1, 1, 127, "any")

            # A worker that registered thumbnail connects: the job runs
            # there, at its first attempt.
            async with running(thumbs):
                got = await _until(c, thumb, lambda j: j.done)
                assert (got.state, got.result, got.worker_id, got.attempt, got.failures) == (
                    "completed", "thumbnail of t.png", "py-thumbs-1", 1, 0)


def _workers(cluster) -> list:
    """barista workers --json on the leader: one object a line."""
    lead = cluster.wait_leader()
    out = subprocess.run([str(cluster.bin), "workers", "--server", lead.grpc_addr, "--token", ADMIN_TOKEN, "--json"],
                         capture_output=True, timeout=10, check=True)
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]

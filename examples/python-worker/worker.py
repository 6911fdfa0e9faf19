#!/usr/bin/env python3
"""An example worker of Python functions (the barista SDK, sdk/python):
it runs each job it is given as a call of a function of this process,
chosen by the job's kind, and reports the function's answer as the job's
result.

    PYTHONPATH=sdk/python/src python3 examples/python-worker/worker.py \\
        --server 10.0.0.1:7400,10.0.0.2:7400 --token-file worker.token --id words --concurrency 4

Its kinds:
  wordcount  the payload is UTF-8 text; the result {"words": N, "lines": N}.
             A sync function: it runs in a thread of its own and is billed
             that thread's CPU. A payload that is not UTF-8 can never run:
             the job fails at once, with no retry.
  wait       the payload is a number of seconds; the function sleeps that
             long and answers "waited Ns". An async function: billed the
             wall time it took. A cancel interrupts its sleep.

The worker tells the cluster these two kinds: it is given only jobs of
them (and jobs submitted with no form), never a command job or a job of
another kind, which wait for a worker that runs them.

The first SIGINT or SIGTERM stops the worker gracefully: it takes no new
job, lets the running ones finish within --grace seconds, and exits 0; a
second signal stops the running ones at once (they are retried
elsewhere).
"""

import argparse
import asyncio
import json
import logging
import os
import sys

import barista


def build(args) -> barista.Worker:
    token = os.environ.get("BARISTA_TOKEN")
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    worker = barista.Worker(args.server, token=token, size=args.size, pool=args.pool,
                            concurrency=args.concurrency, tls=args.tls_ca, id=args.id,
                            insecure_grpc=args.insecure_grpc)

    @worker.job("wordcount")
    def wordcount(ctx: barista.JobContext) -> str:
        try:
            text = ctx.payload.decode("utf-8")
        except UnicodeDecodeError as e:
            raise barista.Unrunnable(f"payload: not UTF-8 text ({e})") from None
        words = lines = 0
        for line in text.splitlines():
            if ctx.cancelled.is_set():
                raise RuntimeError("cancelled")  # reported cancelled whatever is raised
            lines += 1
            words += len(line.split())
        print(f"job {ctx.job_id} of {ctx.tenant}: {words} words", flush=True)
        return json.dumps({"words": words, "lines": lines})

    @worker.job("wait")
    async def wait(ctx: barista.JobContext) -> str:
        try:
            seconds = float(ctx.payload)
        except ValueError:
            raise barista.Unrunnable(f"payload: {ctx.payload[:40]!r} is not a number of seconds") from None
        await asyncio.sleep(seconds)
        return f"waited {seconds:g}s"

    return worker


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.environ.get("BARISTA_ADDR", "127.0.0.1:7400"),
                   help="gRPC ADDR[,ADDR...] of any nodes")
    p.add_argument("--token-file", help="read the worker token from FILE (otherwise $BARISTA_TOKEN)")
    p.add_argument("--tls-ca", default=os.environ.get("BARISTA_TLS_CA"), help="verify the nodes with this CA FILE (enables TLS)")
    p.add_argument("--insecure-grpc", action="store_true",
                   help="send the token without TLS to a server that is not on this machine (refused otherwise)")
    p.add_argument("--id", help="worker ID; its slots are ID-1..ID-N (default HOST-PID)")
    p.add_argument("--size", default="sm", help="largest job size it runs: sm, md or lg")
    p.add_argument("--pool", help="the pool it serves (default: the pool default)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs run at once (one slot each)")
    p.add_argument("--grace", type=float, default=30, help="seconds a running job has to finish after SIGTERM")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        worker = build(args)
    except barista.InvalidArgument as e:
        print(e, file=sys.stderr)
        return 2
    try:
        asyncio.run(worker.run(grace=args.grace))
    except barista.BaristaError as e:
        # The cluster refuses this worker for good (a token it does not
        # know, a binding that does not cover the ID, no such pool).
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Submits one job to the example worker and follows it to its end:

    PYTHONPATH=sdk/python/src python3 examples/python-worker/submit.py \\
        --server 10.0.0.1:7400 --kind wordcount --key essay-1 "the text to count"

It prints each event of the job, then its result (or its error), and
exits 0 if the job completed, 1 otherwise. With --key, running it again
finds the same job instead of making another.
"""

import argparse
import asyncio
import os
import sys

import barista


async def run(args) -> int:
    async with barista.Client(args.server, token=os.environ.get("BARISTA_TOKEN"), tls=args.tls_ca,
                              insecure_grpc=args.insecure_grpc) as c:
        job = await c.submit(args.payload.encode(), kind=args.kind, tenant=args.tenant, cost=args.cost, key=args.key)
        print(f"job {job.id} {'submitted' if job.created else 'exists'}")
        async for ev in c.watch(job):
            print(f"{ev.at:%H:%M:%S.%f} {ev.kind} {ev.worker_id}".rstrip())
        job = await c.get(job)
        print(job.result if job.state == "completed" else f"{job.state}: {job.error}")
        return 0 if job.state == "completed" else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.environ.get("BARISTA_ADDR", "127.0.0.1:7400"))
    p.add_argument("--tls-ca", default=os.environ.get("BARISTA_TLS_CA"))
    p.add_argument("--insecure-grpc", action="store_true",
                   help="send the token without TLS to a server that is not on this machine (refused otherwise)")
    p.add_argument("--tenant", help="the tenant (an admin token; a client token has its own)")
    p.add_argument("--kind", default="wordcount")
    p.add_argument("--cost", type=float, default=1.0, help="estimated CPU seconds")
    p.add_argument("--key", help="idempotency key")
    p.add_argument("payload")
    args = p.parse_args()
    try:
        return asyncio.run(run(args))
    except barista.BaristaError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

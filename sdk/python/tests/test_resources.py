"""Resources (SPEC §3 "Resources"): a job submitted with ``uses`` reads
back the resources and units it uses, from the submit and from the real
three-node cluster; bad uses are refused with the field named."""

from __future__ import annotations

import pytest

import barista
from cluster import ADMIN_TOKEN


async def test_a_job_with_uses_reads_back_its_uses(cluster):
    cluster.resource_set("openai", capacity=4)
    cluster.resource_set("vector-db", capacity=2)
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
        await admin.upsert_tenant("llm", tier="free")
        # A pool without workers: the jobs stay queued.
        cluster.pool_set("llm-idle")
        job = await admin.submit(b"summarize doc-17", tenant="llm", pool="llm-idle", cost=20,
                                 uses={"vector-db": 2, "openai": 1})
        assert job.created is True
        assert job.uses == {"openai": 1, "vector-db": 2}
        got = await admin.get(job.id, tenant="llm")
        assert (got.state, got.uses) == ("queued", {"openai": 1, "vector-db": 2})

        plain, shared = await admin.submit_many([{"payload": "plain"}, {"payload": "shared", "uses": {"openai": 3}}],
                                                tenant="llm", pool="llm-idle", cost=1)
        assert isinstance(plain, barista.Job) and isinstance(shared, barista.Job)
        assert (await admin.get(plain.id, tenant="llm")).uses == {}
        assert (await admin.get(shared.id, tenant="llm")).uses == {"openai": 3}

        with pytest.raises(barista.ResourceUnknown) as unknown:
            await admin.submit(b"x", tenant="llm", pool="llm-idle", cost=1, uses={"anthropic": 1})
        assert str(unknown.value) == 'NOT_FOUND: resource: unknown resource "anthropic"'
        with pytest.raises(barista.InvalidArgument) as over:
            await admin.submit(b"x", tenant="llm", pool="llm-idle", cost=1, uses={"vector-db": 3})
        assert over.value.field == "uses"
        assert str(over.value) == "INVALID_ARGUMENT: uses: 3 units of resource vector-db, whose capacity is 2"
        with pytest.raises(barista.InvalidArgument) as zero:
            await admin.submit(b"x", tenant="llm", pool="llm-idle", cost=1, uses={"openai": 0})
        assert (zero.value.field, str(zero.value)) == ("uses", "INVALID_ARGUMENT: uses: 'openai': 0 (want a resource name and at least 1 unit)")

        for j in (job, plain, shared):
            await admin.cancel(j, tenant="llm")

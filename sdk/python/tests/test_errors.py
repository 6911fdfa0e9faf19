"""Each exception from a real refusal of the cluster."""

from __future__ import annotations

from datetime import timedelta

import pytest

import barista
from cluster import ACME_TOKEN, ADMIN_TOKEN, free_port


async def refused(call, cls):
    """The exception call raises, which must be exactly of class cls."""
    try:
        await call
    except barista.BaristaError as e:
        assert type(e) is cls, f"{type(e).__name__} ({e}), want {cls.__name__}"
        return e
    raise AssertionError(f"no {cls.__name__} raised")


async def test_each_exception_from_a_real_refusal(cluster):
    async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin, \
            barista.Client(cluster.addrs, token=ACME_TOKEN) as acme:
        await admin.upsert_tenant("errors", tier="bronze", max_queued=1)

        e = await refused(acme.get(987654321), barista.NotFound)
        assert (e.code, e.reason, str(e)) == ("NOT_FOUND", None, "NOT_FOUND: job 987654321 not found")

        e = await refused(admin.submit(b"", tenant="nobody", cost=1), barista.TenantUnknown)
        assert (e.code, e.reason, e.message) == ("NOT_FOUND", "TENANT_UNKNOWN", 'unknown tenant "nobody"')
        assert isinstance(e, barista.NotFound)

        e = await refused(acme.submit(b"", pool="nowhere", cost=1), barista.PoolUnknown)
        assert (e.code, e.reason, e.message) == ("NOT_FOUND", "POOL_UNKNOWN", 'unknown pool "nowhere"')

        e = await refused(acme.submit(b"", tenant="globex", cost=1), barista.PermissionDenied)
        assert (e.code, e.reason) == ("PERMISSION_DENIED", None)

        e = await refused(acme.submit(b"", priority="critical", cost=1), barista.MaxClass)
        assert (e.code, e.reason, e.message) == ("PERMISSION_DENIED", "MAX_CLASS", "class critical is above tenant acme's max_class normal")
        assert isinstance(e, barista.PermissionDenied)

        e = await refused(acme.submit(b"", deadline=timedelta(minutes=5), cost=1), barista.DeadlinesNotAllowed)
        assert e.reason == "DEADLINES_NOT_ALLOWED"

        async with barista.Client(cluster.addrs, token="not-a-token") as stranger:
            e = await refused(stranger.get(1), barista.Unauthenticated)
            assert e.code == "UNAUTHENTICATED"

        first = await admin.submit(b"one", tenant="errors", cost=1, key="q-1")
        e = await refused(admin.submit(b"two", tenant="errors", cost=1, key="q-2"), barista.QuotaExceeded)
        assert (e.code, e.reason, e.message) == ("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", 'tenant "errors" has 1 queued jobs, its max_queued quota')
        assert isinstance(e, barista.ResourceExhausted)
        # A keyed resend of the job that exists is answered with it, at
        # the quota too.
        again = await admin.submit(b"one", tenant="errors", cost=1, key="q-1")
        assert (again.id, again.created) == (first.id, False)

        e = await refused(admin.submit(b"other", tenant="errors", cost=1, key="q-1"), barista.KeyConflict)
        assert (e.code, e.reason) == ("ALREADY_EXISTS", "KEY_CONFLICT")
        assert isinstance(e, barista.AlreadyExists)

        # The key of a job that was purged stays taken: KEY_JOB_GONE.
        gone = await acme.submit(b"short-lived", cost=1, key="gone-1")
        await acme.cancel(gone)
        cluster.purge("acme", gone.id)
        e = await refused(acme.submit(b"short-lived", cost=1, key="gone-1"), barista.KeyJobGone)
        assert (e.code, e.reason) == ("NOT_FOUND", "KEY_JOB_GONE")
        assert e.message.startswith(f'idempotency key "gone-1" of tenant "acme" was used for job {gone.id}, which no longer exists')

        # A pool that admits only subscribers.
        cluster.pool_set("gated", subscriptions_required=True)
        e = await refused(acme.submit(b"", pool="gated", cost=1), barista.SubscriptionRequired)
        assert (e.code, e.reason, e.message) == (
            "FAILED_PRECONDITION", "SUBSCRIPTION_REQUIRED", "tenant acme has no subscription in pool gated, which requires one")
        await admin.set_subscription("acme", "gated", 1)
        gated = await acme.submit(b"", pool="gated", cost=1)
        await acme.cancel(gated)
        await admin.delete_subscription("acme", "gated")

        # A new group beyond the tenant's max_groups.
        await admin.upsert_tenant("grouped", tier="free", max_groups=1)
        one = await admin.submit(b"", tenant="grouped", group="store-1", cost=1)
        e = await refused(admin.submit(b"", tenant="grouped", group="store-2", cost=1), barista.MaxGroups)
        assert (e.code, e.reason) == ("RESOURCE_EXHAUSTED", "MAX_GROUPS")
        await admin.cancel(one, tenant="grouped")

        e = await refused(admin.delete_tenant("errors"), barista.FailedPrecondition)
        assert e.code == "FAILED_PRECONDITION"
        await admin.cancel(first, tenant="errors")

        e = await refused(acme.submit(b"x" * (1024 * 1024 + 1), cost=1), barista.TooLarge)
        assert (e.code, e.reason, e.message) == (
            "INVALID_ARGUMENT", "TOO_LARGE", "payload: 1048577 bytes, over the cluster's limit of 1048576 (max_payload_bytes)")
        assert isinstance(e, barista.InvalidArgument) and isinstance(e, ValueError)

        # A job no request can carry is refused before it is sent.
        e = await refused(acme.submit(b"x" * (5 << 20), cost=1), barista.TooLarge)
        assert (e.code, e.reason, e.field) == ("INVALID_ARGUMENT", "TOO_LARGE", "payload")
        assert e.message.startswith("payload: 5242880 bytes: the job would be a 524")
        results = await acme.submit_many([{"payload": b"x" * (5 << 20), "cost": 1}])
        assert type(results[0]) is barista.TooLarge

        e = await refused(acme.submit(b"", group="a/b", cost=1), barista.InvalidArgument)
        assert (e.code, e.reason, e.field) == ("INVALID_ARGUMENT", None, "group")

        # What the SDK checks itself is refused before anything is sent.
        e = await refused(acme.submit(b"", size="xl", cost=1), barista.InvalidArgument)
        assert (e.field, str(e)) == ("size", "INVALID_ARGUMENT: size: 'xl' (want sm, md or lg)")
        e = await refused(acme.submit(b"", cost=-1), barista.InvalidArgument)
        assert e.field == "cost"

        # A batch reports each job's refusal by its code.
        results = await acme.submit_many([{"payload": b"fine", "cost": 1}, {"payload": b"", "group": "a/b", "cost": 1}])
        assert type(results[0]) is barista.Job and results[0].created is True
        assert type(results[1]) is barista.InvalidArgument
        assert str(results[1]).startswith("INVALID_ARGUMENT: group")
        await acme.cancel(results[0])

    # No node listens there: the client gives up after its call timeout.
    async with barista.Client([f"127.0.0.1:{free_port()}"], token=ACME_TOKEN, call_timeout=1) as gone:
        e = await refused(gone.get(1), barista.Unavailable)
        assert e.code == "UNAVAILABLE"
    with pytest.raises(barista.ClientClosed):
        await gone.get(1)


async def test_rate_limited_says_when_to_retry(cluster):
    cluster.set_config(submit_rate_n=1, submit_rate_period_ms=60_000, submit_burst=1)
    try:
        async with barista.Client(cluster.addrs, token=ADMIN_TOKEN) as admin:
            await admin.upsert_tenant("rated", tier="free")
            job = await admin.submit(b"", tenant="rated", cost=1)
            e = await refused(admin.submit(b"", tenant="rated", cost=1), barista.RateLimited)
            assert (e.code, e.reason) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")
            assert isinstance(e, barista.ResourceExhausted)
            assert timedelta(seconds=50) < e.retry_after <= timedelta(seconds=60), e.retry_after
            assert e.message.startswith('submit_rate: tenant "rated" may submit 1/1m0s (bursts of 1); retry in ')
            await admin.cancel(job, tenant="rated")
    finally:
        cluster.set_config(submit_rate_n=0, submit_rate_period_ms=0, submit_burst=0)

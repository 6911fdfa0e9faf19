"""The SDK's conversions and error decoding, without a cluster."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
import pytest

import barista
from barista import _convert as cv
from barista import errors
from barista._proto import client_pb2, rpc_status_pb2, types_pb2


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailing=()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


def status_trailer(*details) -> tuple:
    st = rpc_status_pb2.Status(code=8, message="m")
    for name, msg in details:
        st.details.add(type_url="type.googleapis.com/" + name, value=msg.SerializeToString())
    return (("grpc-status-details-bin", st.SerializeToString()),)


def test_a_refusal_becomes_the_exception_of_its_cause():
    trailer = status_trailer(
        ("google.rpc.RetryInfo", rpc_status_pb2.RetryInfo(retry_delay=rpc_status_pb2.Duration(seconds=1, nanos=250_000_000))),
        ("google.rpc.ErrorInfo", rpc_status_pb2.ErrorInfo(reason="RATE_LIMITED", domain="barista")))
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", trailer))
    assert type(e) is barista.RateLimited
    assert (e.code, e.message, e.reason, e.retry_after, str(e)) == (
        "RESOURCE_EXHAUSTED", "slow down", "RATE_LIMITED", timedelta(seconds=1.25), "RESOURCE_EXHAUSTED: slow down")

    info = rpc_status_pb2.ErrorInfo(reason="FEATURE_LEVEL", domain="barista", metadata={"field": "pool"})
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "later", status_trailer(("google.rpc.ErrorInfo", info))))
    assert type(e) is barista.FeatureLevel and e.field == "pool" and e.metadata == {"field": "pool"}

    # A reason of another domain, or sent with another code, is not ours
    # to read: the code's class.
    other = rpc_status_pb2.ErrorInfo(reason="QUOTA_EXCEEDED", domain="elsewhere")
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "x", status_trailer(("google.rpc.ErrorInfo", other))))
    assert type(e) is barista.ResourceExhausted and e.reason is None
    mismatched = rpc_status_pb2.ErrorInfo(reason="QUOTA_EXCEEDED", domain="barista")
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x", status_trailer(("google.rpc.ErrorInfo", mismatched))))
    assert type(e) is barista.NotFound and e.reason == "QUOTA_EXCEEDED"

    bad = rpc_status_pb2.BadRequest()
    bad.field_violations.add(field="group", description="no")
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "group: no", status_trailer(("google.rpc.BadRequest", bad))))
    assert type(e) is barista.InvalidArgument and e.field == "group"

    # A trailer that does not decode says nothing.
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down", (("grpc-status-details-bin", b"\xff\xff"),)))
    assert type(e) is barista.Unavailable and e.reason is None

    not_leader = status_trailer(("google.rpc.ErrorInfo", rpc_status_pb2.ErrorInfo(reason="NOT_LEADER", domain="barista")))
    assert errors.is_not_leader(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "", not_leader))
    assert not errors.is_not_leader(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "", ()))


def test_a_batch_result_becomes_the_exception_of_its_cause():
    assert errors.from_result(client_pb2.SubmitResult(job_id=1)) is None
    st = rpc_status_pb2.Status(code=8, message="tenant \"acme\" has 3 queued jobs, its max_queued quota")
    info = rpc_status_pb2.ErrorInfo(reason="QUOTA_EXCEEDED", domain="barista")
    info.metadata["field"] = "tenant"
    st.details.add(type_url="type.googleapis.com/google.rpc.ErrorInfo", value=info.SerializeToString())
    retry = rpc_status_pb2.RetryInfo(retry_delay=rpc_status_pb2.Duration(seconds=2))
    st.details.add(type_url="type.googleapis.com/google.rpc.RetryInfo", value=retry.SerializeToString())
    # The plain fields say otherwise: the status alone decides.
    e = errors.from_result(client_pb2.SubmitResult(status=st.SerializeToString(), error="INVALID_ARGUMENT: no"))
    assert type(e) is barista.QuotaExceeded and e.code == "RESOURCE_EXHAUSTED"
    assert (e.reason, e.field, e.retry_after) == ("QUOTA_EXCEEDED", "tenant", timedelta(seconds=2))
    assert e.message == 'tenant "acme" has 3 queued jobs, its max_queued quota'
    # A server that sends no status (an earlier build): its text, unread.
    e = errors.from_result(client_pb2.SubmitResult(error="NOT_FOUND: from an earlier build"))
    assert type(e) is barista.Unknown and e.message == "NOT_FOUND: from an earlier build"


def test_every_cause_is_a_subclass_of_its_code():
    assert {name: cls.__mro__[1].__name__ for name, cls in errors.BY_REASON.items()} == {
        "QUOTA_EXCEEDED": "ResourceExhausted", "RATE_LIMITED": "ResourceExhausted", "MAX_GROUPS": "ResourceExhausted",
        "KEY_CONFLICT": "AlreadyExists", "KEY_JOB_GONE": "NotFound", "TENANT_UNKNOWN": "NotFound",
        "POOL_UNKNOWN": "NotFound", "RESOURCE_UNKNOWN": "NotFound", "TOO_LARGE": "InvalidArgument", "MAX_CLASS": "PermissionDenied",
        "DEADLINES_NOT_ALLOWED": "PermissionDenied", "SUBSCRIPTION_REQUIRED": "FailedPrecondition",
        "FEATURE_LEVEL": "FailedPrecondition", "NOT_LEADER": "Unavailable"}


def test_durations_and_times():
    assert cv.millis(None, "cost") == 0
    assert cv.millis(1.5, "cost") == 1500
    assert cv.millis(timedelta(minutes=2), "cost") == 120_000
    with pytest.raises(barista.InvalidArgument, match="under a millisecond"):
        cv.millis(0.0004, "cost")
    with pytest.raises(barista.InvalidArgument, match="negative"):
        cv.millis(timedelta(seconds=-1), "delay")
    with pytest.raises(barista.InvalidArgument, match="not a timedelta"):
        cv.millis("5s", "delay")
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    assert cv.deadline_millis(now + timedelta(minutes=5), now) == 300_000
    assert cv.deadline_millis(timedelta(seconds=90), now) == 90_000
    with pytest.raises(barista.InvalidArgument, match="naive"):
        cv.deadline_millis(datetime(2026, 12, 4, 13, 0), now)
    with pytest.raises(barista.InvalidArgument, match="has passed"):
        cv.deadline_millis(now - timedelta(seconds=1), now)
    clock = client_pb2.ClockNow(cluster_ms=10_000, wall_ms=1_800_000_000_000)
    assert cv.cluster_to_wall(clock, 70_000) == datetime.fromtimestamp(1_800_000_060, tz=timezone.utc)
    assert cv.cluster_to_wall(clock, 0) is None
    assert cv.cluster_to_wall(None, 70_000) is None


def test_output_tails_keep_the_last_4_kib_of_valid_utf8():
    assert cv.output_tail(None) == ""
    assert cv.output_tail(b"ok") == "ok"
    assert cv.output_tail(b"a\xffb") == "a\ufffdb"
    tail = cv.output_tail("é" * 3000)  # 6000 bytes
    assert tail == "é" * 2048 and len(tail.encode()) == 4096
    tail = cv.output_tail("x" + "é" * 2048)  # 4097 bytes: the x goes
    assert tail == "é" * 2048
    tail = cv.output_tail("é" * 2047 + "xyz")  # 4097 bytes: cut inside the first é
    assert tail == "é" * 2046 + "xyz"


def test_snooze_bounds_and_worker_settings():
    assert barista.Snooze(1).ms == 1000
    assert barista.Snooze(timedelta(hours=24)).delay == timedelta(hours=24)
    # Outside the cluster's bounds a snooze is held to them, as in Go.
    assert barista.Snooze(0.5).ms == 1000
    assert barista.Snooze(timedelta(hours=24, milliseconds=1)).ms == 86_400_000
    with pytest.raises(barista.InvalidArgument, match="size"):
        barista.Worker(["127.0.0.1:1"], size="xl")
    with pytest.raises(barista.InvalidArgument, match="pool"):
        barista.Worker(["127.0.0.1:1"], pool="GPU")
    with pytest.raises(barista.InvalidArgument, match="concurrency"):
        barista.Worker(["127.0.0.1:1"], concurrency=0)
    with pytest.raises(barista.InvalidArgument, match="id"):
        barista.Worker(["127.0.0.1:1"], id="two words")
    w = barista.Worker("127.0.0.1:1,127.0.0.1:2", id="w", concurrency=3)
    assert w.worker_ids == ["w-1", "w-2", "w-3"]
    w.register("a", lambda ctx: None)
    with pytest.raises(barista.InvalidArgument, match="already has a function"):
        w.register("a", lambda ctx: None)


def test_a_token_is_never_sent_in_clear_over_a_network():
    token = "s3cr3t-client-0003"
    # On this machine, or over TLS, or without a token: allowed.
    barista.Client(["127.0.0.1:7400", "[::1]:7400", "localhost:7400"], token=token)
    barista.Client("10.0.0.2:7400")
    barista.Client("10.0.0.2:7400", token=token, insecure_grpc=True)
    barista.Worker("10.0.0.2:7400", token=token, insecure_grpc=True)
    for make in (lambda: barista.Client(["127.0.0.1:7400", "10.0.0.2:7400"], token=token),
                 lambda: barista.Client("barista.internal:7400", token=token),
                 lambda: barista.Worker("10.0.0.2:7400", token=token)):
        with pytest.raises(errors.InvalidArgument) as e:
            make()
        assert "insecure_grpc" in str(e.value) and token not in str(e.value)
        assert e.value.field == "insecure_grpc"


def test_a_token_is_never_shown():
    token = "s3cr3t-client-0004"
    c = barista.Client("10.0.0.2:7400", token=token, insecure_grpc=True)
    w = barista.Worker("10.0.0.2:7400", token=token, insecure_grpc=True, id="w")
    for shown in (repr(c), str(c), repr(c._nodes), repr(w), str(w)):
        assert token not in shown
    assert repr(c) == "barista.Client(servers=['10.0.0.2:7400'])"


def test_a_schedule_from_the_wire():
    # Cluster times are shown at the wall time the answer's clock gives.
    now = client_pb2.ClockNow(cluster_ms=1_000_000, wall_ms=1_700_000_000_000)
    job = client_pb2.SubmitRequest(job_type="report", form=types_pb2.FUNCTION, size=types_pb2.MD,
                                   est_cost_ms=1500, payload=b'{"day":"x"}', deadline_ms=60_000, retry_backoff_ms=0)
    pb = client_pb2.Schedule(tenant="acme", name="r", spec="@every 1s", zone="UTC",
                             overlap=types_pb2.OVERLAP_BUFFER_ONE, catchup_ms=60_000, jitter_ms=250,
                             job=job, version=3, since_ms=990_000, last_slot_ms=999_000,
                             next_slots_ms=[1_000_000, 1_001_000], next_fire_ms=1_000_100, fired=7, skipped=2, missed=1,
                             refused=4, last_job_id=42, live_job_ids=[41, 42], created_at_ms=900_000, now=now)
    s = barista.Schedule._from_pb(pb)
    at = datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)  # wall_ms 1,700,000,000,000
    assert s == barista.Schedule(
        tenant="acme", name="r", spec="@every 1s", zone="UTC", overlap=barista.Overlap.BUFFER_ONE,
        catchup=timedelta(minutes=1), jitter=timedelta(milliseconds=250), paused=False,
        job=barista.ScheduleJob(kind="report", form="function", size="md", cost=timedelta(milliseconds=1500),
                                deadline=timedelta(minutes=1), retry_backoff=timedelta(0), payload=b'{"day":"x"}'),
        version=3, since=at - timedelta(seconds=10), created_at=at - timedelta(seconds=100),
        last_slot=at - timedelta(seconds=1), next_slots=(at, at + timedelta(seconds=1)),
        next_fire=at + timedelta(milliseconds=100), fired=7, skipped=2, missed=1, refused=4, last_job=42, live_jobs=(41, 42))
    assert (s.kind, s.payload, s.args(dict)) == ("report", b'{"day":"x"}', {"day": "x"})
    # Unspecified is skip; a name or the enum is taken, anything else refused.
    assert barista.Schedule._from_pb(client_pb2.Schedule()).overlap is barista.Overlap.SKIP
    assert barista.Overlap.ALLOW == "allow"
    with pytest.raises(barista.InvalidArgument) as e:
        barista.models.overlap("never")
    assert e.value.field == "overlap"

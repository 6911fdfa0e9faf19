"""The values the client returns: jobs, events, usage, explanations,
tenants and schedules, in Python's types (datetime in UTC, timedelta, size and priority
names), built from the wire's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

from . import _convert as cv
from . import _payload
from ._proto import admin_pb2, client_pb2
from ._proto import types_pb2 as cpb
from .errors import InvalidArgument

T = TypeVar("T")

# The states in which a job has ended (a redrive may queue it again).
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "timed_out", "expired"})


@dataclass(frozen=True)
class Job:
    """A job as the cluster holds it.

    From ``get`` and ``jobs`` every field is the cluster's. From ``submit``
    only what the submit knows is set: ``id``, ``created`` (True when this
    submit made the job, False when its key found an existing one), and the
    fields the submit named; ``state`` is "queued" (or "scheduled", with a
    delay) for a job it made and None for an existing one (``get`` reads
    it).
    """

    id: int
    created: Optional[bool] = None
    state: Optional[str] = None
    tenant: str = ""
    kind: str = ""
    #: which workers run it: "function" (a worker that registered its
    #: kind), "command" (a worker that runs command lines) or "any".
    form: str = "any"
    pool: str = ""
    size: str = "sm"
    priority: str = "normal"
    group: str = ""
    key: Optional[str] = None
    attempt: int = 0
    failures: int = 0
    max_attempts: int = 0
    cost: Optional[timedelta] = None
    cost_source: str = ""
    cpu: timedelta = timedelta(0)
    cpu_source: str = ""
    timeout: Optional[timedelta] = None
    submitted_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None
    deadline_at: Optional[datetime] = None
    deadline_missed: bool = False
    due_at: Optional[datetime] = None
    expire_at: Optional[datetime] = None
    worker_id: str = ""
    exit_code: int = 0
    #: the run's result: what the function returned (a worker of Python
    #: functions), or the last 4 KiB of a process's stdout.
    result: str = ""
    #: the last 4 KiB of the run's stderr: a function's exception.
    error: str = ""
    failure: str = ""
    #: the job's runs snoozed in a row so far (0: its last run did not
    #: snooze).
    snoozes: int = 0
    cancel: str = "none"
    payload: Optional[bytes] = None
    #: a queued job's place in line (from ``get``; None when it has none).
    place: Optional["Place"] = None
    #: the resources the job uses and the units of each, by name
    #: (docs/resources.md); empty: none.
    uses: Dict[str, int] = field(default_factory=dict, hash=False)

    @property
    def done(self) -> bool:
        """Whether the job has ended (completed, failed, cancelled, timed
        out or expired)."""
        return self.state in TERMINAL_STATES

    def args(self, cls: Type[T]) -> T:
        """The job's payload read as a cls, as a worker's function of that
        type reads it (a dataclass, a JSON value, str, bytes; see
        ``Worker.job``). Needs the payload: a job from ``get``, or from
        ``jobs`` with ``include_payload``."""
        if self.payload is None:
            raise InvalidArgument(f"job {self.id} was read without its payload (get reads it)", field="payload")
        try:
            return _payload.decode(self.payload, cls)
        except _payload.PayloadError as e:
            raise InvalidArgument(f"job {self.id}: its payload is not a {getattr(cls, '__name__', cls)}: {e}",
                                  field="payload") from None

    @classmethod
    def _from_pb(cls, j: client_pb2.Job, *, with_payload: bool = False) -> "Job":
        return cls(
            id=j.job_id, state=j.state, tenant=j.tenant, kind=j.job_type, form=cv.form_name(j.form), pool=j.pool,
            size=cv.size_name(j.size), priority=cv.priority_name(getattr(j, "class")), group=j.group,
            key=j.idempotency_key or None, attempt=j.attempt, failures=j.failures, max_attempts=j.max_attempts,
            cost=cv.opt_ms(j.est_cost_ms), cost_source=j.est_source, cpu=cv.from_ms(j.cpu_ms), cpu_source=j.cpu_source,
            timeout=cv.opt_ms(j.timeout_ms), submitted_at=cv.wall(j.submitted_wall_ms), ended_at=cv.wall(j.ended_wall_ms),
            deadline_at=cv.cluster_to_wall(j.now if j.HasField("now") else None, j.deadline_at_ms),
            deadline_missed=j.deadline_missed,
            due_at=cv.cluster_to_wall(j.now if j.HasField("now") else None, j.due_at_ms),
            expire_at=cv.cluster_to_wall(j.now if j.HasField("now") else None, j.expire_at_ms),
            worker_id=j.worker_id, exit_code=j.exit_code, result=j.stdout_tail, error=j.stderr_tail,
            failure=j.failure, snoozes=j.snoozes, cancel=j.cancel or "none", payload=bytes(j.payload) if with_payload else None,
            place=Place._from_pb(j.place if j.HasField("place") else None, j.now if j.HasField("now") else None),
            uses={u.resource: u.units for u in j.uses})


@dataclass(frozen=True)
class Place:
    """A queued job's place in line in its pool (docs/fairness.md):
    ``ahead`` jobs would go to the workers of its size before it,
    ``own_ahead`` of them its own tenant's; ``complete`` False means the
    count stopped at 10,000 (a lower bound). ``estimated_start`` is an
    estimate (None: nothing ran in the pool in the last 10 minutes) from
    the work ahead and the pace of the last 10 minutes;
    ``rate_per_minute`` is the pool's recent dispatches a minute and
    ``share`` the tenant's entitled share of its class."""

    ahead: int
    own_ahead: int
    complete: bool
    estimated_start: Optional[datetime] = None
    rate_per_minute: float = 0.0
    share: float = 0.0

    @classmethod
    def _from_pb(cls, x: Optional[client_pb2.PlaceInLine], now: Optional[client_pb2.ClockNow]) -> Optional["Place"]:
        if x is None:
            return None
        return cls(ahead=x.ahead, own_ahead=x.own_ahead, complete=x.complete,
                   estimated_start=cv.cluster_to_wall(now, x.estimated_start_ms),
                   rate_per_minute=x.rate_per_minute, share=x.share)


@dataclass(frozen=True)
class Event:
    """One event of a tenant's stream: ``kind`` is queued, scheduled,
    released, assigned, started, requeued, completed, failed,
    cancel_requested, cancelled, timed_out, expired, redriven, (for the
    tenant itself, ``job_id`` 0) paused and resumed, or of a schedule
    (``schedule`` names it): schedule_fired, schedule_refused and
    schedule_missed."""

    seq: int
    kind: str
    job_id: int
    at: Optional[datetime]
    tenant: str = ""
    attempt: int = 0
    worker_id: str = ""
    cpu: timedelta = timedelta(0)
    exit_code: int = 0
    reason: str = ""
    pool: str = ""
    group: str = ""
    #: a schedule event's schedule, its slot (of schedule_missed: the
    #: newest slot missed) and how many slots schedule_missed counts.
    schedule: str = ""
    slot: Optional[datetime] = None
    slots: int = 0

    @property
    def terminal(self) -> bool:
        """Whether the event ends its job (for now: a redrive may queue it
        again)."""
        return self.kind in TERMINAL_STATES

    @classmethod
    def _from_pb(cls, e: client_pb2.Event) -> "Event":
        return cls(seq=e.seq, kind=e.kind, job_id=e.job_id, at=cv.wall(e.wall_ms), tenant=e.tenant, attempt=e.attempt,
                   worker_id=e.worker_id, cpu=cv.from_ms(e.cpu_ms), exit_code=e.exit_code, reason=e.reason,
                   pool=e.pool, group=e.group, schedule=e.schedule,
                   slot=cv.wall(e.wall_ms + (e.slot_ms - e.at_ms)) if e.slot_ms and e.wall_ms else None, slots=e.slots)


@dataclass(frozen=True)
class Cancel:
    """The answer to a cancel: the job's state after it, and whether its
    worker is being told to stop (a live job)."""

    state: str
    requested: bool


@dataclass(frozen=True)
class GroupUsage:
    name: str
    running: int
    queued: int
    limit: int


@dataclass(frozen=True)
class Usage:
    """A tenant's jobs and what it was billed (``TenantUsage``)."""

    tenant: str
    tier: str
    running: int
    running_by_size: Dict[str, int]
    queued: int
    queued_by_size: Dict[str, int]
    scheduled: int
    inflight_cpu: timedelta
    cpu_billed: timedelta
    weight: float
    submitted: int
    dispatches: int
    completed: int
    failed: int
    cancelled: int
    timed_out: int
    failures: int
    requeues: int
    paused: str
    rate: str
    groups: List[GroupUsage] = field(default_factory=list)
    group_count: int = 0

    @classmethod
    def _from_pb(cls, u: client_pb2.TenantUsageResponse) -> "Usage":
        def by_size(v: Sequence[int]) -> Dict[str, int]:
            return {name: (v[i] if i < len(v) else 0) for i, name in enumerate(("sm", "md", "lg"))}
        return cls(
            tenant=u.tenant, tier=cv.tier_name(u.tier), running=u.running, running_by_size=by_size(u.running_by_size),
            queued=u.queued, queued_by_size=by_size(u.queued_by_size), scheduled=u.scheduled,
            inflight_cpu=cv.from_ms(u.inflight_cpu_ms), cpu_billed=cv.from_ms(u.cpu_billed_ms), weight=u.weight,
            submitted=u.submitted, dispatches=u.dispatches, completed=u.completed, failed=u.failed,
            cancelled=u.cancelled, timed_out=u.timed_out, failures=u.failures, requeues=u.requeues,
            paused=u.paused, rate=u.rate,
            groups=[GroupUsage(g.name, g.running, g.queued, g.limit) for g in u.groups], group_count=u.group_count)


@dataclass(frozen=True)
class Explanation:
    """Why a job is where it is (``ExplainJob``): ``reason`` (scheduled,
    paused, behind, cap, rate, held, group_turn, higher_class, no_worker,
    waiting, assigned, running, or the terminal state), ``text`` one
    readable paragraph, and the reason's own fields."""

    job_id: int
    reason: str
    text: str
    size: str
    priority: str
    group: str = ""
    position: int = 0
    vertex: str = ""
    current: int = 0
    limit: int = 0
    ahead: int = 0
    worker_id: str = ""
    due_at: Optional[datetime] = None
    eligible_at: Optional[datetime] = None
    fitting_workers: int = 0
    workers_busy: bool = False
    place: Optional[Place] = None
    #: the schedule whose fire submitted the job ("": none), the slot it
    #: fired (None for a run-now) and a run-now's key.
    schedule: str = ""
    schedule_slot: Optional[datetime] = None
    schedule_run_key: str = ""

    @classmethod
    def _from_pb(cls, x: client_pb2.ExplainJobResponse) -> "Explanation":
        now = x.now if x.HasField("now") else None
        return cls(job_id=x.job_id, reason=x.reason, text=x.text, size=cv.size_name(x.size),
                   priority=cv.priority_name(getattr(x, "class")), group=x.group, position=x.position,
                   vertex=x.vertex, current=x.current, limit=x.limit, ahead=x.ahead, worker_id=x.worker_id,
                   due_at=cv.cluster_to_wall(now, x.due_ms), eligible_at=cv.cluster_to_wall(now, x.eligible_at_ms),
                   fitting_workers=x.fitting_workers, workers_busy=x.workers_busy,
                   place=Place._from_pb(x.place if x.HasField("place") else None, now),
                   schedule=x.schedule, schedule_slot=cv.cluster_to_wall(now, x.schedule_slot_ms),
                   schedule_run_key=x.schedule_run_key)


@dataclass(frozen=True)
class Tenant:
    """A tenant's settings (admin calls). Caps of 0 are none;
    ``max_priority`` is its max_class."""

    name: str
    tier: str
    multiplier: int = 1
    max_running: int = 0
    max_running_sm: int = 0
    max_running_md: int = 0
    max_running_lg: int = 0
    max_inflight_cpu: Optional[timedelta] = None
    max_queued: int = 0
    max_running_critical: int = 0
    max_running_high: int = 0
    max_running_deadline: int = 0
    max_priority: str = "normal"
    allow_deadlines: bool = False
    group_cap: int = 0
    group_order: str = "fifo"
    max_groups: int = 0
    rate: str = ""
    rate_burst: int = 0
    export_metrics: bool = False
    paused: str = ""
    created: bool = False

    @classmethod
    def _from_pb(cls, t: admin_pb2.Tenant) -> "Tenant":
        c = t.caps
        return cls(name=t.name, tier=cv.tier_name(t.tier), multiplier=t.multiplier or 1, max_running=c.max_running,
                   max_running_sm=c.max_running_sm, max_running_md=c.max_running_md, max_running_lg=c.max_running_lg,
                   max_inflight_cpu=cv.opt_ms(c.max_inflight_cpu_ms), max_queued=c.max_queued,
                   max_running_critical=c.max_running_critical, max_running_high=c.max_running_high,
                   max_running_deadline=c.max_running_deadline,
                   max_priority=cv.priority_name(t.max_class), allow_deadlines=t.allow_deadlines,
                   group_cap=t.group_cap, group_order=cv.group_order_name(t.group_order), max_groups=t.max_groups,
                   rate=t.rate, rate_burst=t.rate_burst, export_metrics=t.export_metrics,
                   paused=t.paused, created=t.created)


@dataclass(frozen=True)
class Subscription:
    """A tenant's subscription in a pool: at most ``burst`` of its jobs
    assigned or running there; None once removed."""

    tenant: str
    pool: str
    burst: Optional[int]
    running: int = 0
    changed: bool = False


class Overlap(str, Enum):
    """What a schedule's slot does while the schedule's previous job has
    not ended (docs/schedules.md, "Overlap"). A str: ``Overlap.SKIP ==
    "skip"``, and a call takes either."""

    #: no fire while a job of the schedule is scheduled, queued, assigned
    #: or running (the slot is counted skipped).
    SKIP = "skip"
    #: no fire while a job of the schedule waits to start (scheduled or
    #: queued): one may wait while another runs.
    BUFFER_ONE = "buffer_one"
    #: every slot fires.
    ALLOW = "allow"


OVERLAPS: Dict[Overlap, cpb.Overlap] = {Overlap.SKIP: cpb.OVERLAP_SKIP, Overlap.BUFFER_ONE: cpb.OVERLAP_BUFFER_ONE,
                                        Overlap.ALLOW: cpb.OVERLAP_ALLOW}


def overlap(value: object) -> cpb.Overlap:
    """The wire's Overlap of an ``Overlap`` or its name."""
    try:
        return OVERLAPS[Overlap(value)]
    except ValueError:
        raise InvalidArgument(f"overlap: {value!r} (want skip, buffer_one or allow)", field="overlap") from None


def overlap_of(value: int) -> Overlap:
    """The ``Overlap`` of the wire's (unspecified: skip)."""
    for k, v in OVERLAPS.items():
        if v == value:
            return k
    return Overlap.SKIP


@dataclass(frozen=True)
class ScheduleJob:
    """The job each fire of a schedule submits: the options of ``submit``
    (its tenant and key are the schedule's), and ``deadline`` as a
    duration from the fire."""

    kind: str = ""
    form: str = "any"
    pool: str = ""
    size: str = "sm"
    priority: str = "normal"
    group: str = ""
    cost: Optional[timedelta] = None
    deadline: Optional[timedelta] = None
    delay: Optional[timedelta] = None
    expire: Optional[timedelta] = None
    max_attempts: int = 0
    timeout: Optional[timedelta] = None
    #: None: the cluster's (or the kind's) backoff.
    retry_backoff: Optional[timedelta] = None
    payload: bytes = b""

    @classmethod
    def _from_pb(cls, r: client_pb2.SubmitRequest) -> "ScheduleJob":
        return cls(kind=r.job_type, form=cv.form_name(r.form), pool=r.pool, size=cv.size_name(r.size),
                   priority=cv.priority_name(getattr(r, "class")), group=r.group, cost=cv.opt_ms(r.est_cost_ms),
                   deadline=cv.opt_ms(r.deadline_ms), delay=cv.opt_ms(r.delay_ms), expire=cv.opt_ms(r.expire_ms),
                   max_attempts=r.max_attempts, timeout=cv.opt_ms(r.timeout_ms),
                   retry_backoff=cv.from_ms(r.retry_backoff_ms) if r.HasField("retry_backoff_ms") else None,
                   payload=bytes(r.payload))


@dataclass(frozen=True)
class Schedule:
    """A tenant's schedule as the cluster holds it (docs/schedules.md):
    its definition, where its slots stand and what its fires did.

    Times are wall times (UTC) of the cluster times the answer gave, by
    its clock: ``last_slot`` the newest slot spent (fired, skipped,
    refused or missed; None: none yet), ``next_slots`` the next slots
    (none while paused; five from ``get_schedule``, one from
    ``list_schedules`` unless asked), ``next_fire`` when the first of them
    fires (its slot plus its jitter). ``fired`` counts the slots that
    submitted a job (and run-nows), ``skipped`` those the overlap policy
    dropped, ``missed`` those further behind than ``catchup``, ``refused``
    the fires whose submit was refused (a quota, ...). ``last_job`` is the
    ID of the newest job it fired (0: none), ``live_jobs`` its jobs not yet
    ended as the overlap policy sees them (none under allow).
    ``spec_error`` says why the answering node cannot compute the slots
    ("": it can)."""

    tenant: str
    name: str
    spec: str
    zone: str
    overlap: Overlap
    catchup: timedelta
    jitter: Optional[timedelta]
    paused: bool
    job: ScheduleJob
    version: int
    since: Optional[datetime] = None
    created_at: Optional[datetime] = None
    last_slot: Optional[datetime] = None
    next_slots: Tuple[datetime, ...] = ()
    next_fire: Optional[datetime] = None
    fired: int = 0
    skipped: int = 0
    missed: int = 0
    refused: int = 0
    last_job: int = 0
    live_jobs: Tuple[int, ...] = ()
    spec_error: str = ""

    @property
    def kind(self) -> str:
        """The kind of the jobs it fires."""
        return self.job.kind

    @property
    def payload(self) -> bytes:
        """The payload of the jobs it fires."""
        return self.job.payload

    def args(self, cls: Type[T]) -> T:
        """The payload of its jobs read as a cls, as a worker's function of
        that type reads it (``Job.args``)."""
        try:
            return _payload.decode(self.job.payload, cls)
        except _payload.PayloadError as e:
            raise InvalidArgument(f"schedule {self.name}: its payload is not a {getattr(cls, '__name__', cls)}: {e}",
                                  field="payload") from None

    @classmethod
    def _from_pb(cls, s: client_pb2.Schedule) -> "Schedule":
        now = s.now if s.HasField("now") else None
        slots = (cv.cluster_to_wall(now, t) for t in s.next_slots_ms)
        return cls(tenant=s.tenant, name=s.name, spec=s.spec, zone=s.zone, overlap=overlap_of(s.overlap),
                   catchup=cv.from_ms(s.catchup_ms), jitter=cv.opt_ms(s.jitter_ms), paused=s.paused,
                   job=ScheduleJob._from_pb(s.job), version=s.version, since=cv.cluster_to_wall(now, s.since_ms),
                   created_at=cv.cluster_to_wall(now, s.created_at_ms), last_slot=cv.cluster_to_wall(now, s.last_slot_ms),
                   next_slots=tuple(t for t in slots if t is not None), next_fire=cv.cluster_to_wall(now, s.next_fire_ms),
                   fired=s.fired, skipped=s.skipped, missed=s.missed, refused=s.refused, last_job=s.last_job_id,
                   live_jobs=tuple(s.live_job_ids), spec_error=s.spec_error)

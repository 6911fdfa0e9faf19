from barista._proto import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BulkJobsRequest(_message.Message):
    __slots__ = ["dry_run", "filter", "job_ids", "max_attempts", "page_token", "request_key", "since_ms", "tenant"]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_KEY_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    filter: _types_pb2.JobFilter
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    max_attempts: int
    page_token: str
    request_key: str
    since_ms: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., job_ids: _Optional[_Iterable[int]] = ..., filter: _Optional[_Union[_types_pb2.JobFilter, _Mapping]] = ..., since_ms: _Optional[int] = ..., page_token: _Optional[str] = ..., max_attempts: _Optional[int] = ..., request_key: _Optional[str] = ..., dry_run: bool = ...) -> None: ...

class BulkJobsResponse(_message.Message):
    __slots__ = ["done", "duplicate", "items", "next_page_token", "skipped", "stopped", "submitted_from_ms"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FROM_MS_FIELD_NUMBER: _ClassVar[int]
    done: int
    duplicate: bool
    items: _containers.RepeatedCompositeFieldContainer[_types_pb2.BulkItem]
    next_page_token: str
    skipped: int
    stopped: str
    submitted_from_ms: int
    def __init__(self, items: _Optional[_Iterable[_Union[_types_pb2.BulkItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., done: _Optional[int] = ..., skipped: _Optional[int] = ..., duplicate: bool = ..., stopped: _Optional[str] = ..., submitted_from_ms: _Optional[int] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ["job_id", "tenant"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., job_id: _Optional[int] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ["cancel_requested", "state"]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    state: str
    def __init__(self, state: _Optional[str] = ..., cancel_requested: bool = ...) -> None: ...

class ClockNow(_message.Message):
    __slots__ = ["cluster_ms", "wall_ms"]
    CLUSTER_MS_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_ms: int
    wall_ms: int
    def __init__(self, cluster_ms: _Optional[int] = ..., wall_ms: _Optional[int] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["name", "tenant"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["at_ms", "attempt", "cpu_ms", "exit_code", "group", "job_id", "kind", "pool", "reason", "schedule", "seq", "slot_ms", "slots", "tenant", "wall_ms", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CPU_MS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    attempt: int
    cpu_ms: int
    exit_code: int
    group: str
    job_id: int
    kind: str
    pool: str
    reason: str
    schedule: str
    seq: int
    slot_ms: int
    slots: int
    tenant: str
    wall_ms: int
    worker_id: str
    def __init__(self, seq: _Optional[int] = ..., job_id: _Optional[int] = ..., tenant: _Optional[str] = ..., attempt: _Optional[int] = ..., kind: _Optional[str] = ..., at_ms: _Optional[int] = ..., worker_id: _Optional[str] = ..., cpu_ms: _Optional[int] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., wall_ms: _Optional[int] = ..., group: _Optional[str] = ..., pool: _Optional[str] = ..., schedule: _Optional[str] = ..., slot_ms: _Optional[int] = ..., slots: _Optional[int] = ...) -> None: ...

class EvidenceWindow(_message.Message):
    __slots__ = ["by_time", "from_index", "from_ms", "to_index", "to_ms"]
    BY_TIME_FIELD_NUMBER: _ClassVar[int]
    FROM_INDEX_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_INDEX_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    by_time: bool
    from_index: int
    from_ms: int
    to_index: int
    to_ms: int
    def __init__(self, from_index: _Optional[int] = ..., to_index: _Optional[int] = ..., by_time: bool = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ...) -> None: ...

class ExplainJobRequest(_message.Message):
    __slots__ = ["job_id", "tenant"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., job_id: _Optional[int] = ...) -> None: ...

class ExplainJobResponse(_message.Message):
    __slots__ = ["ahead", "capacity", "current", "due_ms", "eligible_at_ms", "fitting_workers", "group", "group_order", "held", "job_id", "kind", "limit", "now", "place", "position", "reason", "reserved_job_id", "resource", "schedule", "schedule_run_key", "schedule_slot_ms", "size", "tag_ms", "tenant_held", "tenant_max", "text", "vertex", "vnow_ms", "worker_id", "workers_busy"]
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    DUE_MS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FITTING_WORKERS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_ORDER_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PLACE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESERVED_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TAG_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_HELD_FIELD_NUMBER: _ClassVar[int]
    TENANT_MAX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    VERTEX_FIELD_NUMBER: _ClassVar[int]
    VNOW_MS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_BUSY_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ahead: int
    capacity: int
    current: int
    due_ms: int
    eligible_at_ms: int
    fitting_workers: int
    group: str
    group_order: str
    held: int
    job_id: int
    kind: str
    limit: int
    now: ClockNow
    place: PlaceInLine
    position: int
    reason: str
    reserved_job_id: int
    resource: str
    schedule: str
    schedule_run_key: str
    schedule_slot_ms: int
    size: _types_pb2.Size
    tag_ms: str
    tenant_held: int
    tenant_max: int
    text: str
    vertex: str
    vnow_ms: str
    worker_id: str
    workers_busy: bool
    def __init__(self, job_id: _Optional[int] = ..., reason: _Optional[str] = ..., text: _Optional[str] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., position: _Optional[int] = ..., vertex: _Optional[str] = ..., current: _Optional[int] = ..., limit: _Optional[int] = ..., ahead: _Optional[int] = ..., tag_ms: _Optional[str] = ..., vnow_ms: _Optional[str] = ..., worker_id: _Optional[str] = ..., due_ms: _Optional[int] = ..., eligible_at_ms: _Optional[int] = ..., group: _Optional[str] = ..., group_order: _Optional[str] = ..., fitting_workers: _Optional[int] = ..., workers_busy: bool = ..., place: _Optional[_Union[PlaceInLine, _Mapping]] = ..., kind: _Optional[str] = ..., schedule: _Optional[str] = ..., schedule_slot_ms: _Optional[int] = ..., schedule_run_key: _Optional[str] = ..., resource: _Optional[str] = ..., held: _Optional[int] = ..., capacity: _Optional[int] = ..., tenant_held: _Optional[int] = ..., tenant_max: _Optional[int] = ..., reserved_job_id: _Optional[int] = ..., now: _Optional[_Union[ClockNow, _Mapping]] = ..., **kwargs) -> None: ...

class FairnessCertificateRequest(_message.Message):
    __slots__ = ["tenant", "window"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    window: EvidenceWindow
    def __init__(self, tenant: _Optional[str] = ..., window: _Optional[_Union[EvidenceWindow, _Mapping]] = ...) -> None: ...

class FairnessCertificateResponse(_message.Message):
    __slots__ = ["digest", "document"]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    digest: str
    document: str
    def __init__(self, document: _Optional[str] = ..., digest: _Optional[str] = ...) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ["group", "read", "tenant"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    group: str
    read: ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., group: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ["job_id", "read", "tenant"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    read: ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., job_id: _Optional[int] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ["name", "next", "read", "tenant"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    next: int
    read: ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., next: _Optional[int] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ["cap", "limit", "name", "now", "paused", "queued", "rate", "rate_burst", "rate_eligible_at_ms", "running", "tenant", "tenant_cap"]
    CAP_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RATE_BURST_FIELD_NUMBER: _ClassVar[int]
    RATE_ELIGIBLE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TENANT_CAP_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    cap: str
    limit: int
    name: str
    now: ClockNow
    paused: str
    queued: int
    rate: str
    rate_burst: int
    rate_eligible_at_ms: int
    running: int
    tenant: str
    tenant_cap: int
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., cap: _Optional[str] = ..., tenant_cap: _Optional[int] = ..., limit: _Optional[int] = ..., running: _Optional[int] = ..., queued: _Optional[int] = ..., rate: _Optional[str] = ..., rate_burst: _Optional[int] = ..., rate_eligible_at_ms: _Optional[int] = ..., paused: _Optional[str] = ..., now: _Optional[_Union[ClockNow, _Mapping]] = ...) -> None: ...

class GroupUsage(_message.Message):
    __slots__ = ["limit", "name", "queued", "running"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    limit: int
    name: str
    queued: int
    running: int
    def __init__(self, name: _Optional[str] = ..., running: _Optional[int] = ..., queued: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ["attempt", "cancel", "cpu_ms", "cpu_source", "deadline_at_ms", "deadline_missed", "due_at_ms", "ended_at_ms", "ended_wall_ms", "est_cost_ms", "est_source", "exit_code", "expire_at_ms", "failure", "failures", "form", "group", "has_result", "idempotency_key", "job_id", "job_type", "max_attempts", "now", "payload", "place", "pool", "size", "snoozes", "start_tag_ms", "state", "stderr_tail", "stdout_tail", "submitted_at_ms", "submitted_wall_ms", "tenant", "timeout_ms", "uses", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    CPU_MS_FIELD_NUMBER: _ClassVar[int]
    CPU_SOURCE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MISSED_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENDED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
    EST_COST_MS_FIELD_NUMBER: _ClassVar[int]
    EST_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    HAS_RESULT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PLACE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SNOOZES_FIELD_NUMBER: _ClassVar[int]
    START_TAG_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    cancel: str
    cpu_ms: int
    cpu_source: str
    deadline_at_ms: int
    deadline_missed: bool
    due_at_ms: int
    ended_at_ms: int
    ended_wall_ms: int
    est_cost_ms: int
    est_source: str
    exit_code: int
    expire_at_ms: int
    failure: str
    failures: int
    form: _types_pb2.JobForm
    group: str
    has_result: bool
    idempotency_key: str
    job_id: int
    job_type: str
    max_attempts: int
    now: ClockNow
    payload: bytes
    place: PlaceInLine
    pool: str
    size: _types_pb2.Size
    snoozes: int
    start_tag_ms: str
    state: str
    stderr_tail: str
    stdout_tail: str
    submitted_at_ms: int
    submitted_wall_ms: int
    tenant: str
    timeout_ms: int
    uses: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResourceUse]
    worker_id: str
    def __init__(self, job_id: _Optional[int] = ..., tenant: _Optional[str] = ..., state: _Optional[str] = ..., attempt: _Optional[int] = ..., failures: _Optional[int] = ..., max_attempts: _Optional[int] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., est_cost_ms: _Optional[int] = ..., cpu_ms: _Optional[int] = ..., job_type: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., submitted_at_ms: _Optional[int] = ..., ended_at_ms: _Optional[int] = ..., worker_id: _Optional[str] = ..., exit_code: _Optional[int] = ..., stderr_tail: _Optional[str] = ..., cancel: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., start_tag_ms: _Optional[str] = ..., payload: _Optional[bytes] = ..., has_result: bool = ..., submitted_wall_ms: _Optional[int] = ..., ended_wall_ms: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., cpu_source: _Optional[str] = ..., failure: _Optional[str] = ..., snoozes: _Optional[int] = ..., deadline_at_ms: _Optional[int] = ..., est_source: _Optional[str] = ..., deadline_missed: bool = ..., group: _Optional[str] = ..., due_at_ms: _Optional[int] = ..., expire_at_ms: _Optional[int] = ..., pool: _Optional[str] = ..., place: _Optional[_Union[PlaceInLine, _Mapping]] = ..., form: _Optional[_Union[_types_pb2.JobForm, str]] = ..., uses: _Optional[_Iterable[_Union[_types_pb2.ResourceUse, _Mapping]]] = ..., now: _Optional[_Union[ClockNow, _Mapping]] = ..., **kwargs) -> None: ...

class KindPolicy(_message.Message):
    __slots__ = ["kind", "max_attempts", "retry_backoff_max_ms", "retry_backoff_ms", "tenant", "timeout_ms"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MAX_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    max_attempts: int
    retry_backoff_max_ms: int
    retry_backoff_ms: int
    tenant: str
    timeout_ms: int
    def __init__(self, tenant: _Optional[str] = ..., kind: _Optional[str] = ..., max_attempts: _Optional[int] = ..., retry_backoff_ms: _Optional[int] = ..., retry_backoff_max_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "read", "tenant"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    read: ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ["groups", "next_page_token"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    next_page_token: str
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ["include_payload", "newest_first", "oldest_first", "page_size", "page_token", "pool", "read", "state", "tenant"]
    INCLUDE_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    OLDEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    include_payload: bool
    newest_first: bool
    oldest_first: bool
    page_size: int
    page_token: str
    pool: str
    read: ReadOptions
    state: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., state: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., include_payload: bool = ..., newest_first: bool = ..., oldest_first: bool = ..., pool: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ["jobs", "next_page_token"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListKindPoliciesRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class ListKindPoliciesResponse(_message.Message):
    __slots__ = ["policies"]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[KindPolicy]
    def __init__(self, policies: _Optional[_Iterable[_Union[KindPolicy, _Mapping]]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ["next", "page_size", "page_token", "read", "tenant"]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    next: int
    page_size: int
    page_token: str
    read: ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., next: _Optional[int] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["next_page_token", "schedules"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ["group", "resume", "tenant"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    group: str
    resume: bool
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., group: _Optional[str] = ..., resume: bool = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ["changed", "paused"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    paused: str
    def __init__(self, paused: _Optional[str] = ..., changed: bool = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ["name", "resume", "tenant"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    resume: bool
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., resume: bool = ...) -> None: ...

class PlaceInLine(_message.Message):
    __slots__ = ["ahead", "complete", "estimated_start_ms", "own_ahead", "rate_per_minute", "share"]
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_START_MS_FIELD_NUMBER: _ClassVar[int]
    OWN_AHEAD_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    ahead: int
    complete: bool
    estimated_start_ms: int
    own_ahead: int
    rate_per_minute: float
    share: float
    def __init__(self, ahead: _Optional[int] = ..., own_ahead: _Optional[int] = ..., complete: bool = ..., estimated_start_ms: _Optional[int] = ..., rate_per_minute: _Optional[float] = ..., share: _Optional[float] = ...) -> None: ...

class ReadOptions(_message.Message):
    __slots__ = ["stale"]
    STALE_FIELD_NUMBER: _ClassVar[int]
    stale: bool
    def __init__(self, stale: bool = ...) -> None: ...

class RunJobNowRequest(_message.Message):
    __slots__ = ["job_id", "tenant"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., job_id: _Optional[int] = ...) -> None: ...

class RunJobNowResponse(_message.Message):
    __slots__ = ["state"]
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...

class RunScheduleNowRequest(_message.Message):
    __slots__ = ["key", "name", "tenant"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    key: str
    name: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class RunScheduleNowResponse(_message.Message):
    __slots__ = ["created", "job_id", "key"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    created: bool
    job_id: int
    key: str
    def __init__(self, job_id: _Optional[int] = ..., created: bool = ..., key: _Optional[str] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["catchup_ms", "created_at_ms", "fired", "jitter_ms", "job", "last_job_id", "last_slot_ms", "live_job_ids", "missed", "name", "next_fire_ms", "next_slots_ms", "now", "overlap", "paused", "refused", "since_ms", "skipped", "spec", "spec_error", "tenant", "version", "zone"]
    CATCHUP_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    LAST_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    LIVE_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_SLOTS_MS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SPEC_ERROR_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    catchup_ms: int
    created_at_ms: int
    fired: int
    jitter_ms: int
    job: SubmitRequest
    last_job_id: int
    last_slot_ms: int
    live_job_ids: _containers.RepeatedScalarFieldContainer[int]
    missed: int
    name: str
    next_fire_ms: int
    next_slots_ms: _containers.RepeatedScalarFieldContainer[int]
    now: ClockNow
    overlap: _types_pb2.Overlap
    paused: bool
    refused: int
    since_ms: int
    skipped: int
    spec: str
    spec_error: str
    tenant: str
    version: int
    zone: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[str] = ..., zone: _Optional[str] = ..., overlap: _Optional[_Union[_types_pb2.Overlap, str]] = ..., catchup_ms: _Optional[int] = ..., jitter_ms: _Optional[int] = ..., paused: bool = ..., job: _Optional[_Union[SubmitRequest, _Mapping]] = ..., version: _Optional[int] = ..., since_ms: _Optional[int] = ..., last_slot_ms: _Optional[int] = ..., next_slots_ms: _Optional[_Iterable[int]] = ..., next_fire_ms: _Optional[int] = ..., fired: _Optional[int] = ..., skipped: _Optional[int] = ..., missed: _Optional[int] = ..., refused: _Optional[int] = ..., last_job_id: _Optional[int] = ..., live_job_ids: _Optional[_Iterable[int]] = ..., created_at_ms: _Optional[int] = ..., spec_error: _Optional[str] = ..., now: _Optional[_Union[ClockNow, _Mapping]] = ...) -> None: ...

class SetGroupRequest(_message.Message):
    __slots__ = ["burst", "cap", "group", "rate", "tenant"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    burst: int
    cap: str
    group: str
    rate: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., group: _Optional[str] = ..., cap: _Optional[str] = ..., rate: _Optional[str] = ..., burst: _Optional[int] = ...) -> None: ...

class SetKindPolicyRequest(_message.Message):
    __slots__ = ["kind", "max_attempts", "remove", "retry_backoff_max_ms", "retry_backoff_ms", "tenant", "timeout_ms"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MAX_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    max_attempts: int
    remove: bool
    retry_backoff_max_ms: int
    retry_backoff_ms: int
    tenant: str
    timeout_ms: int
    def __init__(self, tenant: _Optional[str] = ..., kind: _Optional[str] = ..., max_attempts: _Optional[int] = ..., retry_backoff_ms: _Optional[int] = ..., retry_backoff_max_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., remove: bool = ...) -> None: ...

class SetScheduleRequest(_message.Message):
    __slots__ = ["catchup_ms", "jitter_ms", "job", "name", "overlap", "paused", "spec", "tenant", "zone"]
    CATCHUP_MS_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    catchup_ms: int
    jitter_ms: int
    job: SubmitRequest
    name: str
    overlap: _types_pb2.Overlap
    paused: bool
    spec: str
    tenant: str
    zone: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[str] = ..., zone: _Optional[str] = ..., overlap: _Optional[_Union[_types_pb2.Overlap, str]] = ..., catchup_ms: _Optional[int] = ..., jitter_ms: _Optional[int] = ..., paused: bool = ..., job: _Optional[_Union[SubmitRequest, _Mapping]] = ...) -> None: ...

class SubmitBatchRequest(_message.Message):
    __slots__ = ["jobs"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[SubmitRequest]
    def __init__(self, jobs: _Optional[_Iterable[_Union[SubmitRequest, _Mapping]]] = ...) -> None: ...

class SubmitBatchResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitResult, _Mapping]]] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ["deadline_ms", "delay_ms", "est_cost_ms", "expire_ms", "form", "group", "idempotency_key", "job_type", "max_attempts", "payload", "pool", "retry_backoff_ms", "return_job", "size", "tenant", "timeout_ms", "uses"]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    EST_COST_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_MS_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    RETURN_JOB_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    deadline_ms: int
    delay_ms: int
    est_cost_ms: int
    expire_ms: int
    form: _types_pb2.JobForm
    group: str
    idempotency_key: str
    job_type: str
    max_attempts: int
    payload: bytes
    pool: str
    retry_backoff_ms: int
    return_job: bool
    size: _types_pb2.Size
    tenant: str
    timeout_ms: int
    uses: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResourceUse]
    def __init__(self, tenant: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., job_type: _Optional[str] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., est_cost_ms: _Optional[int] = ..., payload: _Optional[bytes] = ..., max_attempts: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., deadline_ms: _Optional[int] = ..., group: _Optional[str] = ..., delay_ms: _Optional[int] = ..., expire_ms: _Optional[int] = ..., retry_backoff_ms: _Optional[int] = ..., pool: _Optional[str] = ..., form: _Optional[_Union[_types_pb2.JobForm, str]] = ..., return_job: bool = ..., uses: _Optional[_Iterable[_Union[_types_pb2.ResourceUse, _Mapping]]] = ..., **kwargs) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ["created", "job", "job_id"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    created: bool
    job: Job
    job_id: int
    def __init__(self, job_id: _Optional[int] = ..., created: bool = ..., job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class SubmitResult(_message.Message):
    __slots__ = ["created", "error", "field", "job_id", "reason", "retry_after_ms", "status"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    created: bool
    error: str
    field: str
    job_id: int
    reason: str
    retry_after_ms: int
    status: bytes
    def __init__(self, job_id: _Optional[int] = ..., created: bool = ..., status: _Optional[bytes] = ..., error: _Optional[str] = ..., reason: _Optional[str] = ..., retry_after_ms: _Optional[int] = ..., field: _Optional[str] = ...) -> None: ...

class TenantUsageRequest(_message.Message):
    __slots__ = ["read", "tenant", "top_groups"]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOP_GROUPS_FIELD_NUMBER: _ClassVar[int]
    read: ReadOptions
    tenant: str
    top_groups: int
    def __init__(self, tenant: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., top_groups: _Optional[int] = ...) -> None: ...

class TenantUsageResponse(_message.Message):
    __slots__ = ["cancelled", "completed", "cpu_billed_ms", "dispatches", "failed", "failures", "finish_tag_ms", "group_count", "groups", "inflight_cpu_ms", "now", "paused", "queued", "queued_by_size", "rate", "rate_burst", "rate_eligible_at_ms", "requeues", "running", "running_by_size", "scheduled", "submitted", "tenant", "tier", "timed_out", "usage_ms", "virtual_now_ms", "weight", "zombie_cpu_ms"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    CPU_BILLED_MS_FIELD_NUMBER: _ClassVar[int]
    DISPATCHES_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    FINISH_TAG_MS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    GROUP_COUNT_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_BY_SIZE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RATE_BURST_FIELD_NUMBER: _ClassVar[int]
    RATE_ELIGIBLE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    REQUEUES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_BY_SIZE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_MS_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ZOMBIE_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    completed: int
    cpu_billed_ms: int
    dispatches: int
    failed: int
    failures: int
    finish_tag_ms: str
    group_count: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupUsage]
    inflight_cpu_ms: int
    now: ClockNow
    paused: str
    queued: int
    queued_by_size: _containers.RepeatedScalarFieldContainer[int]
    rate: str
    rate_burst: int
    rate_eligible_at_ms: int
    requeues: int
    running: int
    running_by_size: _containers.RepeatedScalarFieldContainer[int]
    scheduled: int
    submitted: int
    tenant: str
    tier: _types_pb2.Tier
    timed_out: int
    usage_ms: int
    virtual_now_ms: str
    weight: float
    zombie_cpu_ms: int
    def __init__(self, tenant: _Optional[str] = ..., tier: _Optional[_Union[_types_pb2.Tier, str]] = ..., running: _Optional[int] = ..., running_by_size: _Optional[_Iterable[int]] = ..., queued: _Optional[int] = ..., queued_by_size: _Optional[_Iterable[int]] = ..., inflight_cpu_ms: _Optional[int] = ..., cpu_billed_ms: _Optional[int] = ..., zombie_cpu_ms: _Optional[int] = ..., weight: _Optional[float] = ..., finish_tag_ms: _Optional[str] = ..., virtual_now_ms: _Optional[str] = ..., usage_ms: _Optional[int] = ..., submitted: _Optional[int] = ..., dispatches: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ..., timed_out: _Optional[int] = ..., failures: _Optional[int] = ..., requeues: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupUsage, _Mapping]]] = ..., group_count: _Optional[int] = ..., paused: _Optional[str] = ..., rate: _Optional[str] = ..., rate_burst: _Optional[int] = ..., rate_eligible_at_ms: _Optional[int] = ..., scheduled: _Optional[int] = ..., now: _Optional[_Union[ClockNow, _Mapping]] = ...) -> None: ...

class UsageStatementRequest(_message.Message):
    __slots__ = ["format", "tenant", "window"]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    format: str
    tenant: str
    window: EvidenceWindow
    def __init__(self, tenant: _Optional[str] = ..., window: _Optional[_Union[EvidenceWindow, _Mapping]] = ..., format: _Optional[str] = ...) -> None: ...

class UsageStatementResponse(_message.Message):
    __slots__ = ["document", "format"]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    document: str
    format: str
    def __init__(self, document: _Optional[str] = ..., format: _Optional[str] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ["from_oldest", "from_seq", "job_id", "tenant", "until_idle"]
    FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    UNTIL_IDLE_FIELD_NUMBER: _ClassVar[int]
    from_oldest: bool
    from_seq: int
    job_id: int
    tenant: str
    until_idle: bool
    def __init__(self, tenant: _Optional[str] = ..., from_seq: _Optional[int] = ..., job_id: _Optional[int] = ..., from_oldest: bool = ..., until_idle: bool = ...) -> None: ...

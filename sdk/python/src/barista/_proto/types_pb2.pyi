from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Optional as _Optional, Union as _Union

ACTIVATION: Clamp
AUTO: Estimate
BRONZE: Tier
CANCELLED: Outcome
CLAMP_UNSPECIFIED: Clamp
CLASS_UNSPECIFIED: Class
COMMAND: JobForm
CPU_SOURCE_CGROUP: CpuSource
CPU_SOURCE_PROC: CpuSource
CPU_SOURCE_UNSPECIFIED: CpuSource
CRITICAL: Class
DEADLINES_NOT_ALLOWED: Reason
DESCRIPTOR: _descriptor.FileDescriptor
DIAMOND: Tier
DISPATCH: Clamp
ESTIMATE_UNSPECIFIED: Estimate
FAILED: Outcome
FEATURE_LEVEL: Reason
FREE: Tier
FUNCTION: JobForm
GOLD: Tier
GROUP_FAIR: GroupOrder
GROUP_FIFO: GroupOrder
GROUP_ORDER_UNSPECIFIED: GroupOrder
HIGH: Class
JOB_FORM_UNSPECIFIED: JobForm
KEY_CONFLICT: Reason
KEY_JOB_GONE: Reason
LG: Size
LOW: Class
MAX_CLASS: Reason
MAX_GROUPS: Reason
MD: Size
NORMAL: Class
NOT_LEADER: Reason
OK: Outcome
OOM_KILLED: RunFailure
OUTCOME_UNSPECIFIED: Outcome
OVERLAP_ALLOW: Overlap
OVERLAP_BUFFER_ONE: Overlap
OVERLAP_SKIP: Overlap
OVERLAP_UNSPECIFIED: Overlap
POLICY_UNSPECIFIED: Policy
POOL_UNKNOWN: Reason
PREFER_FIT: Policy
QUOTA_EXCEEDED: Reason
RATE_LIMITED: Reason
REASON_UNSPECIFIED: Reason
RESERVE: Policy
RESOURCE_UNKNOWN: Reason
RUN_FAILURE_UNSPECIFIED: RunFailure
SILVER: Tier
SIZE_UNSPECIFIED: Size
SM: Size
SNOOZED: Outcome
SUBMITTED: Estimate
SUBSCRIPTION_REQUIRED: Reason
TENANT_UNKNOWN: Reason
TIER_UNSPECIFIED: Tier
TOO_LARGE: Reason
UNKNOWN_KIND: Outcome

class BulkItem(_message.Message):
    __slots__ = ["done", "job_id", "reason", "state"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    job_id: int
    reason: str
    state: str
    def __init__(self, job_id: _Optional[int] = ..., done: bool = ..., state: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Caps(_message.Message):
    __slots__ = ["max_inflight_cpu_ms", "max_queued", "max_running", "max_running_critical", "max_running_deadline", "max_running_high", "max_running_lg", "max_running_md", "max_running_sm"]
    MAX_INFLIGHT_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_CRITICAL_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_HIGH_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_LG_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_MD_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_SM_FIELD_NUMBER: _ClassVar[int]
    max_inflight_cpu_ms: int
    max_queued: int
    max_running: int
    max_running_critical: int
    max_running_deadline: int
    max_running_high: int
    max_running_lg: int
    max_running_md: int
    max_running_sm: int
    def __init__(self, max_running: _Optional[int] = ..., max_running_sm: _Optional[int] = ..., max_running_md: _Optional[int] = ..., max_running_lg: _Optional[int] = ..., max_inflight_cpu_ms: _Optional[int] = ..., max_queued: _Optional[int] = ..., max_running_critical: _Optional[int] = ..., max_running_high: _Optional[int] = ..., max_running_deadline: _Optional[int] = ...) -> None: ...

class JobFilter(_message.Message):
    __slots__ = ["group", "job_type", "pool", "states", "submitted_from_ms", "submitted_to_ms"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FROM_MS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_TO_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    job_type: str
    pool: str
    states: _containers.RepeatedScalarFieldContainer[str]
    submitted_from_ms: int
    submitted_to_ms: int
    def __init__(self, states: _Optional[_Iterable[str]] = ..., job_type: _Optional[str] = ..., group: _Optional[str] = ..., submitted_from_ms: _Optional[int] = ..., submitted_to_ms: _Optional[int] = ..., pool: _Optional[str] = ...) -> None: ...

class ResourceUse(_message.Message):
    __slots__ = ["resource", "units"]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    resource: str
    units: int
    def __init__(self, resource: _Optional[str] = ..., units: _Optional[int] = ...) -> None: ...

class SchedulerConfig(_message.Message):
    __slots__ = ["ack_timeout_ms", "cancel_grace_ms", "clamp", "clock_tick_ms", "dead_letter_max_bytes", "dead_letter_max_jobs", "dead_letter_retention_ms", "decay", "decay_half_life_ms", "decay_norm_ms", "dedupe_window_ms", "default_cost_ms", "default_max_attempts", "default_max_queued", "default_tenant", "estimate", "event_retention_count", "event_retention_ms", "event_retention_per_tenant", "feature_level", "heartbeat_interval_ms", "implicit_tenants", "job_retention_ms", "lease_timeout_ms", "max_payload_bytes", "max_pools", "max_queued_bytes", "max_resources", "max_schedules", "max_snoozes", "max_total_queued_bytes", "max_worker_records", "policy", "reserve_margin_us", "resource_reserve_after_ms", "retry_backoff_max_ms", "retry_backoff_ms", "self_kill_after_ms", "submit_burst", "submit_rate_n", "submit_rate_period_ms", "tier_weights"]
    ACK_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    CLAMP_FIELD_NUMBER: _ClassVar[int]
    CLOCK_TICK_MS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    DECAY_HALF_LIFE_MS_FIELD_NUMBER: _ClassVar[int]
    DECAY_NORM_MS_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_COST_MS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MAX_QUEUED_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TENANT_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    EVENT_RETENTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    EVENT_RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    EVENT_RETENTION_PER_TENANT_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    IMPLICIT_TENANTS_FIELD_NUMBER: _ClassVar[int]
    JOB_RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_POOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    MAX_SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    MAX_SNOOZES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_QUEUED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WORKER_RECORDS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RESERVE_MARGIN_US_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_RESERVE_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MAX_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    SELF_KILL_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_BURST_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_RATE_N_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_RATE_PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    TIER_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    ack_timeout_ms: int
    cancel_grace_ms: int
    clamp: Clamp
    clock_tick_ms: int
    dead_letter_max_bytes: int
    dead_letter_max_jobs: int
    dead_letter_retention_ms: int
    decay: bool
    decay_half_life_ms: int
    decay_norm_ms: int
    dedupe_window_ms: int
    default_cost_ms: int
    default_max_attempts: int
    default_max_queued: int
    default_tenant: str
    estimate: Estimate
    event_retention_count: int
    event_retention_ms: int
    event_retention_per_tenant: int
    feature_level: int
    heartbeat_interval_ms: int
    implicit_tenants: Tier
    job_retention_ms: int
    lease_timeout_ms: int
    max_payload_bytes: int
    max_pools: int
    max_queued_bytes: int
    max_resources: int
    max_schedules: int
    max_snoozes: int
    max_total_queued_bytes: int
    max_worker_records: int
    policy: Policy
    reserve_margin_us: int
    resource_reserve_after_ms: int
    retry_backoff_max_ms: int
    retry_backoff_ms: int
    self_kill_after_ms: int
    submit_burst: int
    submit_rate_n: int
    submit_rate_period_ms: int
    tier_weights: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tier_weights: _Optional[_Iterable[int]] = ..., policy: _Optional[_Union[Policy, str]] = ..., reserve_margin_us: _Optional[int] = ..., clamp: _Optional[_Union[Clamp, str]] = ..., decay: bool = ..., decay_half_life_ms: _Optional[int] = ..., decay_norm_ms: _Optional[int] = ..., ack_timeout_ms: _Optional[int] = ..., lease_timeout_ms: _Optional[int] = ..., default_max_attempts: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., self_kill_after_ms: _Optional[int] = ..., cancel_grace_ms: _Optional[int] = ..., job_retention_ms: _Optional[int] = ..., event_retention_count: _Optional[int] = ..., event_retention_ms: _Optional[int] = ..., dedupe_window_ms: _Optional[int] = ..., max_payload_bytes: _Optional[int] = ..., estimate: _Optional[_Union[Estimate, str]] = ..., default_cost_ms: _Optional[int] = ..., feature_level: _Optional[int] = ..., submit_rate_n: _Optional[int] = ..., submit_rate_period_ms: _Optional[int] = ..., submit_burst: _Optional[int] = ..., retry_backoff_ms: _Optional[int] = ..., retry_backoff_max_ms: _Optional[int] = ..., dead_letter_retention_ms: _Optional[int] = ..., dead_letter_max_jobs: _Optional[int] = ..., dead_letter_max_bytes: _Optional[int] = ..., default_max_queued: _Optional[int] = ..., max_queued_bytes: _Optional[int] = ..., max_pools: _Optional[int] = ..., implicit_tenants: _Optional[_Union[Tier, str]] = ..., default_tenant: _Optional[str] = ..., clock_tick_ms: _Optional[int] = ..., max_snoozes: _Optional[int] = ..., max_total_queued_bytes: _Optional[int] = ..., event_retention_per_tenant: _Optional[int] = ..., max_worker_records: _Optional[int] = ..., max_schedules: _Optional[int] = ..., resource_reserve_after_ms: _Optional[int] = ..., max_resources: _Optional[int] = ...) -> None: ...

class Size(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Tier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobForm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Overlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CpuSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RunFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Class(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class GroupOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Policy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Clamp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Estimate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

from barista._proto import types_pb2 as _types_pb2
from barista._proto import client_pb2 as _client_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CapsUpdate(_message.Message):
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

class DeleteTenantRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTenantResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FairWindow(_message.Message):
    __slots__ = ["busy_ms", "charged_ms", "class_charged_ms", "entitled", "ratio", "share", "span_ms", "window"]
    BUSY_MS_FIELD_NUMBER: _ClassVar[int]
    CHARGED_MS_FIELD_NUMBER: _ClassVar[int]
    CLASS_CHARGED_MS_FIELD_NUMBER: _ClassVar[int]
    ENTITLED_FIELD_NUMBER: _ClassVar[int]
    RATIO_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    SPAN_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    busy_ms: int
    charged_ms: int
    class_charged_ms: int
    entitled: float
    ratio: float
    share: float
    span_ms: int
    window: str
    def __init__(self, window: _Optional[str] = ..., span_ms: _Optional[int] = ..., charged_ms: _Optional[int] = ..., class_charged_ms: _Optional[int] = ..., busy_ms: _Optional[int] = ..., share: _Optional[float] = ..., entitled: _Optional[float] = ..., ratio: _Optional[float] = ...) -> None: ...

class FairnessError(_message.Message):
    __slots__ = ["defined", "entitled", "error", "pool", "share", "tenant", "window"]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    DEFINED_FIELD_NUMBER: _ClassVar[int]
    ENTITLED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    defined: bool
    entitled: float
    error: float
    pool: str
    share: float
    tenant: str
    window: str
    def __init__(self, pool: _Optional[str] = ..., window: _Optional[str] = ..., defined: bool = ..., error: _Optional[float] = ..., tenant: _Optional[str] = ..., share: _Optional[float] = ..., entitled: _Optional[float] = ..., **kwargs) -> None: ...

class GetConfigRequest(_message.Message):
    __slots__ = ["read"]
    READ_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    def __init__(self, read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class GetTenantRequest(_message.Message):
    __slots__ = ["name", "read"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    name: str
    read: _client_pb2.ReadOptions
    def __init__(self, name: _Optional[str] = ..., read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ["read"]
    READ_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    def __init__(self, read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ["tenants"]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ...) -> None: ...

class PauseDispatchRequest(_message.Message):
    __slots__ = ["pool", "resume"]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    pool: str
    resume: bool
    def __init__(self, resume: bool = ..., pool: _Optional[str] = ...) -> None: ...

class PauseDispatchResponse(_message.Message):
    __slots__ = ["changed", "paused"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    paused: bool
    def __init__(self, paused: bool = ..., changed: bool = ...) -> None: ...

class Pool(_message.Message):
    __slots__ = ["created", "name", "now", "paused", "queued", "running", "scheduled", "subscriptions_required", "tenants", "virtual_now_ms", "weights", "workers"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    created: bool
    name: str
    now: _client_pb2.ClockNow
    paused: bool
    queued: int
    running: int
    scheduled: int
    subscriptions_required: bool
    tenants: int
    virtual_now_ms: _containers.RepeatedScalarFieldContainer[str]
    weights: str
    workers: int
    def __init__(self, name: _Optional[str] = ..., weights: _Optional[str] = ..., subscriptions_required: bool = ..., paused: bool = ..., scheduled: _Optional[int] = ..., queued: _Optional[int] = ..., running: _Optional[int] = ..., tenants: _Optional[int] = ..., workers: _Optional[int] = ..., virtual_now_ms: _Optional[_Iterable[str]] = ..., created: bool = ..., now: _Optional[_Union[_client_pb2.ClockNow, _Mapping]] = ...) -> None: ...

class PoolDeleteRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PoolDeleteResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PoolGetRequest(_message.Message):
    __slots__ = ["name", "read"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    name: str
    read: _client_pb2.ReadOptions
    def __init__(self, name: _Optional[str] = ..., read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class PoolListRequest(_message.Message):
    __slots__ = ["read"]
    READ_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    def __init__(self, read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class PoolListResponse(_message.Message):
    __slots__ = ["pools"]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    def __init__(self, pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ...) -> None: ...

class PoolSetRequest(_message.Message):
    __slots__ = ["name", "subscriptions_required", "weights"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    subscriptions_required: bool
    weights: str
    def __init__(self, name: _Optional[str] = ..., weights: _Optional[str] = ..., subscriptions_required: bool = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ["blocked", "capacity", "created", "held", "name", "now", "queued", "reserved_job_id", "tenant_max", "tenants", "users"]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RESERVED_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    TENANT_MAX_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    blocked: int
    capacity: int
    created: bool
    held: int
    name: str
    now: _client_pb2.ClockNow
    queued: int
    reserved_job_id: int
    tenant_max: int
    tenants: _containers.RepeatedCompositeFieldContainer[ResourceTenant]
    users: int
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[int] = ..., tenant_max: _Optional[int] = ..., held: _Optional[int] = ..., users: _Optional[int] = ..., queued: _Optional[int] = ..., reserved_job_id: _Optional[int] = ..., tenants: _Optional[_Iterable[_Union[ResourceTenant, _Mapping]]] = ..., created: bool = ..., blocked: _Optional[int] = ..., now: _Optional[_Union[_client_pb2.ClockNow, _Mapping]] = ...) -> None: ...

class ResourceDeleteRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResourceDeleteResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResourceGetRequest(_message.Message):
    __slots__ = ["name", "read"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    name: str
    read: _client_pb2.ReadOptions
    def __init__(self, name: _Optional[str] = ..., read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class ResourceListRequest(_message.Message):
    __slots__ = ["read"]
    READ_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    def __init__(self, read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class ResourceListResponse(_message.Message):
    __slots__ = ["resources"]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[Resource]
    def __init__(self, resources: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ...) -> None: ...

class ResourceSetRequest(_message.Message):
    __slots__ = ["capacity", "max", "name", "tenant", "tenant_max"]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TENANT_MAX_FIELD_NUMBER: _ClassVar[int]
    capacity: int
    max: int
    name: str
    tenant: str
    tenant_max: int
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[int] = ..., tenant_max: _Optional[int] = ..., tenant: _Optional[str] = ..., max: _Optional[int] = ...) -> None: ...

class ResourceTenant(_message.Message):
    __slots__ = ["held", "max", "tenant"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    held: int
    max: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., max: _Optional[int] = ..., held: _Optional[int] = ...) -> None: ...

class SetConfigRequest(_message.Message):
    __slots__ = ["config"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _types_pb2.SchedulerConfig
    def __init__(self, config: _Optional[_Union[_types_pb2.SchedulerConfig, _Mapping]] = ...) -> None: ...

class Subscription(_message.Message):
    __slots__ = ["burst", "pool", "running", "tenant"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    burst: int
    pool: str
    running: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., pool: _Optional[str] = ..., burst: _Optional[int] = ..., running: _Optional[int] = ...) -> None: ...

class SubscriptionDeleteRequest(_message.Message):
    __slots__ = ["pool", "tenant"]
    POOL_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    pool: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., pool: _Optional[str] = ...) -> None: ...

class SubscriptionListRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "pool", "read", "tenant"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    pool: str
    read: _client_pb2.ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., pool: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class SubscriptionListResponse(_message.Message):
    __slots__ = ["next_page_token", "subscriptions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    subscriptions: _containers.RepeatedCompositeFieldContainer[Subscription]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[Subscription, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SubscriptionSetRequest(_message.Message):
    __slots__ = ["burst", "pool", "tenant"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    burst: int
    pool: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., pool: _Optional[str] = ..., burst: _Optional[int] = ...) -> None: ...

class SubscriptionSetResponse(_message.Message):
    __slots__ = ["changed", "subscription"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    subscription: Subscription
    def __init__(self, subscription: _Optional[_Union[Subscription, _Mapping]] = ..., changed: bool = ...) -> None: ...

class Tenant(_message.Message):
    __slots__ = ["allow_deadlines", "caps", "created", "export_metrics", "group_cap", "group_order", "groups", "max_class", "max_groups", "multiplier", "name", "now", "paused", "rate", "rate_burst", "rate_eligible_at_ms", "tier"]
    ALLOW_DEADLINES_FIELD_NUMBER: _ClassVar[int]
    CAPS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    EXPORT_METRICS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    GROUP_CAP_FIELD_NUMBER: _ClassVar[int]
    GROUP_ORDER_FIELD_NUMBER: _ClassVar[int]
    MAX_CLASS_FIELD_NUMBER: _ClassVar[int]
    MAX_GROUPS_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    RATE_BURST_FIELD_NUMBER: _ClassVar[int]
    RATE_ELIGIBLE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    allow_deadlines: bool
    caps: _types_pb2.Caps
    created: bool
    export_metrics: bool
    group_cap: int
    group_order: _types_pb2.GroupOrder
    groups: int
    max_class: _types_pb2.Class
    max_groups: int
    multiplier: int
    name: str
    now: _client_pb2.ClockNow
    paused: str
    rate: str
    rate_burst: int
    rate_eligible_at_ms: int
    tier: _types_pb2.Tier
    def __init__(self, name: _Optional[str] = ..., tier: _Optional[_Union[_types_pb2.Tier, str]] = ..., multiplier: _Optional[int] = ..., caps: _Optional[_Union[_types_pb2.Caps, _Mapping]] = ..., created: bool = ..., export_metrics: bool = ..., max_class: _Optional[_Union[_types_pb2.Class, str]] = ..., allow_deadlines: bool = ..., group_cap: _Optional[int] = ..., group_order: _Optional[_Union[_types_pb2.GroupOrder, str]] = ..., max_groups: _Optional[int] = ..., groups: _Optional[int] = ..., rate: _Optional[str] = ..., rate_burst: _Optional[int] = ..., rate_eligible_at_ms: _Optional[int] = ..., paused: _Optional[str] = ..., now: _Optional[_Union[_client_pb2.ClockNow, _Mapping]] = ...) -> None: ...

class TenantResource(_message.Message):
    __slots__ = ["held", "max", "resource"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    held: int
    max: int
    resource: str
    def __init__(self, resource: _Optional[str] = ..., held: _Optional[int] = ..., max: _Optional[int] = ...) -> None: ...

class TenantShare(_message.Message):
    __slots__ = ["dispatched_cost_ms", "dispatches", "eligible", "entitled_share", "groups", "job_class", "lag_cpu_ms", "name", "paused", "pool", "queued", "rate", "resources", "running", "share", "tier", "weight", "windows"]
    DISPATCHED_COST_MS_FIELD_NUMBER: _ClassVar[int]
    DISPATCHES_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_FIELD_NUMBER: _ClassVar[int]
    ENTITLED_SHARE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    LAG_CPU_MS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    dispatched_cost_ms: int
    dispatches: int
    eligible: bool
    entitled_share: float
    groups: _containers.RepeatedCompositeFieldContainer[_client_pb2.GroupUsage]
    job_class: _types_pb2.Class
    lag_cpu_ms: int
    name: str
    paused: str
    pool: str
    queued: int
    rate: str
    resources: _containers.RepeatedCompositeFieldContainer[TenantResource]
    running: int
    share: float
    tier: _types_pb2.Tier
    weight: float
    windows: _containers.RepeatedCompositeFieldContainer[FairWindow]
    def __init__(self, name: _Optional[str] = ..., tier: _Optional[_Union[_types_pb2.Tier, str]] = ..., weight: _Optional[float] = ..., queued: _Optional[int] = ..., running: _Optional[int] = ..., dispatches: _Optional[int] = ..., dispatched_cost_ms: _Optional[int] = ..., share: _Optional[float] = ..., entitled_share: _Optional[float] = ..., job_class: _Optional[_Union[_types_pb2.Class, str]] = ..., windows: _Optional[_Iterable[_Union[FairWindow, _Mapping]]] = ..., eligible: bool = ..., lag_cpu_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[_client_pb2.GroupUsage, _Mapping]]] = ..., paused: _Optional[str] = ..., rate: _Optional[str] = ..., pool: _Optional[str] = ..., resources: _Optional[_Iterable[_Union[TenantResource, _Mapping]]] = ...) -> None: ...

class TopRequest(_message.Message):
    __slots__ = ["read", "window_ms"]
    READ_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    window_ms: int
    def __init__(self, read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ..., window_ms: _Optional[int] = ...) -> None: ...

class TopResponse(_message.Message):
    __slots__ = ["applied_index", "cluster_time_ms", "fairness_errors", "fairness_since_ms", "leader_id", "pools", "resources", "tenants", "window_ms"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_ERRORS_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    cluster_time_ms: int
    fairness_errors: _containers.RepeatedCompositeFieldContainer[FairnessError]
    fairness_since_ms: int
    leader_id: str
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    resources: _containers.RepeatedCompositeFieldContainer[Resource]
    tenants: _containers.RepeatedCompositeFieldContainer[TenantShare]
    window_ms: int
    def __init__(self, leader_id: _Optional[str] = ..., applied_index: _Optional[int] = ..., cluster_time_ms: _Optional[int] = ..., window_ms: _Optional[int] = ..., tenants: _Optional[_Iterable[_Union[TenantShare, _Mapping]]] = ..., fairness_since_ms: _Optional[int] = ..., pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ..., fairness_errors: _Optional[_Iterable[_Union[FairnessError, _Mapping]]] = ..., resources: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ...) -> None: ...

class UpsertTenantRequest(_message.Message):
    __slots__ = ["allow_deadlines", "caps", "export_metrics", "group_cap", "group_order", "max_class", "max_groups", "multiplier", "name", "rate", "rate_burst", "tier"]
    ALLOW_DEADLINES_FIELD_NUMBER: _ClassVar[int]
    CAPS_FIELD_NUMBER: _ClassVar[int]
    EXPORT_METRICS_FIELD_NUMBER: _ClassVar[int]
    GROUP_CAP_FIELD_NUMBER: _ClassVar[int]
    GROUP_ORDER_FIELD_NUMBER: _ClassVar[int]
    MAX_CLASS_FIELD_NUMBER: _ClassVar[int]
    MAX_GROUPS_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RATE_BURST_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    allow_deadlines: bool
    caps: CapsUpdate
    export_metrics: bool
    group_cap: int
    group_order: _types_pb2.GroupOrder
    max_class: _types_pb2.Class
    max_groups: int
    multiplier: int
    name: str
    rate: str
    rate_burst: int
    tier: _types_pb2.Tier
    def __init__(self, name: _Optional[str] = ..., tier: _Optional[_Union[_types_pb2.Tier, str]] = ..., multiplier: _Optional[int] = ..., caps: _Optional[_Union[CapsUpdate, _Mapping]] = ..., export_metrics: bool = ..., max_class: _Optional[_Union[_types_pb2.Class, str]] = ..., allow_deadlines: bool = ..., group_cap: _Optional[int] = ..., group_order: _Optional[_Union[_types_pb2.GroupOrder, str]] = ..., max_groups: _Optional[int] = ..., rate: _Optional[str] = ..., rate_burst: _Optional[int] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ["acked_at_ms", "cursor", "gap_from_seq", "gap_to_seq", "kinds", "now", "previous_secret_until_ms", "previous_secret_version", "secret_version", "tenant", "url"]
    ACKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    GAP_FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    GAP_TO_SEQ_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_VERSION_FIELD_NUMBER: _ClassVar[int]
    SECRET_VERSION_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    acked_at_ms: int
    cursor: int
    gap_from_seq: int
    gap_to_seq: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    now: _client_pb2.ClockNow
    previous_secret_until_ms: int
    previous_secret_version: int
    secret_version: int
    tenant: str
    url: str
    def __init__(self, tenant: _Optional[str] = ..., url: _Optional[str] = ..., kinds: _Optional[_Iterable[str]] = ..., secret_version: _Optional[int] = ..., previous_secret_version: _Optional[int] = ..., previous_secret_until_ms: _Optional[int] = ..., cursor: _Optional[int] = ..., acked_at_ms: _Optional[int] = ..., gap_from_seq: _Optional[int] = ..., gap_to_seq: _Optional[int] = ..., now: _Optional[_Union[_client_pb2.ClockNow, _Mapping]] = ...) -> None: ...

class WebhookDeleteRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class WebhookDeleteResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class WebhookGetRequest(_message.Message):
    __slots__ = ["read", "tenant"]
    READ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    read: _client_pb2.ReadOptions
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., read: _Optional[_Union[_client_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class WebhookReplayRequest(_message.Message):
    __slots__ = ["from_seq", "tenant"]
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    from_seq: int
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., from_seq: _Optional[int] = ...) -> None: ...

class WebhookSetRequest(_message.Message):
    __slots__ = ["grace_ms", "kinds", "rotate", "tenant", "url"]
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    ROTATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    grace_ms: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    rotate: bool
    tenant: str
    url: str
    def __init__(self, tenant: _Optional[str] = ..., url: _Optional[str] = ..., kinds: _Optional[_Iterable[str]] = ..., rotate: bool = ..., grace_ms: _Optional[int] = ...) -> None: ...

class WebhookSetResponse(_message.Message):
    __slots__ = ["created", "previous_secret_kept", "secret", "webhook"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_KEPT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    created: bool
    previous_secret_kept: bool
    secret: str
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., created: bool = ..., secret: _Optional[str] = ..., previous_secret_kept: bool = ...) -> None: ...

class WebhookStatusRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class WebhookStatusResponse(_message.Message):
    __slots__ = ["backlog", "delivered_seq", "failures", "last_error", "last_error_ms", "last_success_ms", "leader_id", "next_retry_ms", "webhook"]
    BACKLOG_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_SEQ_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_MS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_RETRY_MS_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    backlog: int
    delivered_seq: int
    failures: int
    last_error: str
    last_error_ms: int
    last_success_ms: int
    leader_id: str
    next_retry_ms: int
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., backlog: _Optional[int] = ..., leader_id: _Optional[str] = ..., delivered_seq: _Optional[int] = ..., last_success_ms: _Optional[int] = ..., last_error: _Optional[str] = ..., last_error_ms: _Optional[int] = ..., next_retry_ms: _Optional[int] = ..., failures: _Optional[int] = ...) -> None: ...

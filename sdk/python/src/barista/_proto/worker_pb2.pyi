from barista._proto import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Assign(_message.Message):
    __slots__ = ["attempt", "credit", "est_cost_ms", "finished", "form", "job", "job_type", "payload", "pool", "size", "tenant", "timeout_ms"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    EST_COST_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    credit: int
    est_cost_ms: int
    finished: FinishedAck
    form: _types_pb2.JobForm
    job: int
    job_type: str
    payload: bytes
    pool: str
    size: _types_pb2.Size
    tenant: str
    timeout_ms: int
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., payload: _Optional[bytes] = ..., tenant: _Optional[str] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., credit: _Optional[int] = ..., est_cost_ms: _Optional[int] = ..., finished: _Optional[_Union[FinishedAck, _Mapping]] = ..., job_type: _Optional[str] = ..., pool: _Optional[str] = ..., form: _Optional[_Union[_types_pb2.JobForm, str]] = ...) -> None: ...

class CancelOrder(_message.Message):
    __slots__ = ["attempt", "grace_ms", "job", "reason"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    grace_ms: int
    job: int
    reason: str
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ..., grace_ms: _Optional[int] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ["create", "undrain", "worker_id"]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    UNDRAIN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    create: bool
    undrain: bool
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., undrain: bool = ..., create: bool = ...) -> None: ...

class DrainResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FinishedAck(_message.Message):
    __slots__ = ["attempt", "job"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    job: int
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class HeartbeatAck(_message.Message):
    __slots__ = ["seq"]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["commands", "kinds", "mux", "pool", "running", "size", "version", "worker_id"]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    MUX_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    commands: bool
    kinds: _containers.RepeatedScalarFieldContainer[str]
    mux: bool
    pool: str
    running: _containers.RepeatedCompositeFieldContainer[RunningJob]
    size: _types_pb2.Size
    version: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., running: _Optional[_Iterable[_Union[RunningJob, _Mapping]]] = ..., version: _Optional[str] = ..., pool: _Optional[str] = ..., commands: bool = ..., kinds: _Optional[_Iterable[str]] = ..., mux: bool = ...) -> None: ...

class JobFinished(_message.Message):
    __slots__ = ["attempt", "cpu_ms", "cpu_source", "exit_code", "failure", "job", "outcome", "permanent", "ready_credit", "snooze_ms", "start_unreported", "stderr_tail", "stdout_tail"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CPU_MS_FIELD_NUMBER: _ClassVar[int]
    CPU_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_FIELD_NUMBER: _ClassVar[int]
    READY_CREDIT_FIELD_NUMBER: _ClassVar[int]
    SNOOZE_MS_FIELD_NUMBER: _ClassVar[int]
    START_UNREPORTED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    cpu_ms: int
    cpu_source: _types_pb2.CpuSource
    exit_code: int
    failure: _types_pb2.RunFailure
    job: int
    outcome: _types_pb2.Outcome
    permanent: bool
    ready_credit: int
    snooze_ms: int
    start_unreported: bool
    stderr_tail: str
    stdout_tail: str
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., outcome: _Optional[_Union[_types_pb2.Outcome, str]] = ..., cpu_ms: _Optional[int] = ..., exit_code: _Optional[int] = ..., stderr_tail: _Optional[str] = ..., stdout_tail: _Optional[str] = ..., ready_credit: _Optional[int] = ..., start_unreported: bool = ..., permanent: bool = ..., cpu_source: _Optional[_Union[_types_pb2.CpuSource, str]] = ..., failure: _Optional[_Union[_types_pb2.RunFailure, str]] = ..., snooze_ms: _Optional[int] = ...) -> None: ...

class JobHeartbeat(_message.Message):
    __slots__ = ["attempt", "cpu_ms", "job", "seq"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CPU_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    cpu_ms: int
    job: int
    seq: int
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., cpu_ms: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class JobStarted(_message.Message):
    __slots__ = ["attempt", "job"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    job: int
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class LeaderMessage(_message.Message):
    __slots__ = ["assign", "cancel", "end", "finished_ack", "heartbeat_ack", "redirect", "reject", "slot", "welcome"]
    ASSIGN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    FINISHED_ACK_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_ACK_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    assign: Assign
    cancel: CancelOrder
    end: SlotEnd
    finished_ack: FinishedAck
    heartbeat_ack: HeartbeatAck
    redirect: Redirect
    reject: Reject
    slot: int
    welcome: Welcome
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., redirect: _Optional[_Union[Redirect, _Mapping]] = ..., assign: _Optional[_Union[Assign, _Mapping]] = ..., cancel: _Optional[_Union[CancelOrder, _Mapping]] = ..., heartbeat_ack: _Optional[_Union[HeartbeatAck, _Mapping]] = ..., reject: _Optional[_Union[Reject, _Mapping]] = ..., finished_ack: _Optional[_Union[FinishedAck, _Mapping]] = ..., end: _Optional[_Union[SlotEnd, _Mapping]] = ..., slot: _Optional[int] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ["leader_id", "workers"]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    leader_id: str
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ..., leader_id: _Optional[str] = ...) -> None: ...

class Ready(_message.Message):
    __slots__ = ["credit"]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    credit: int
    def __init__(self, credit: _Optional[int] = ...) -> None: ...

class Redirect(_message.Message):
    __slots__ = ["leader_addr", "leader_id"]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    leader_addr: str
    leader_id: str
    def __init__(self, leader_id: _Optional[str] = ..., leader_addr: _Optional[str] = ...) -> None: ...

class Reject(_message.Message):
    __slots__ = ["attempt", "job", "reason"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    job: int
    reason: str
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class RunningJob(_message.Message):
    __slots__ = ["attempt", "cpu_ms", "finished", "job"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CPU_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    cpu_ms: int
    finished: bool
    job: int
    def __init__(self, job: _Optional[int] = ..., attempt: _Optional[int] = ..., cpu_ms: _Optional[int] = ..., finished: bool = ...) -> None: ...

class SlotEnd(_message.Message):
    __slots__ = ["status"]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: bytes
    def __init__(self, status: _Optional[bytes] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ["finish_ready", "heartbeat_interval_ms", "job_types", "kinds", "leader_id", "mux", "pending_cancels", "self_kill_after_ms", "snooze", "started_delay_ms"]
    FINISH_READY_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MUX_FIELD_NUMBER: _ClassVar[int]
    PENDING_CANCELS_FIELD_NUMBER: _ClassVar[int]
    SELF_KILL_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    SNOOZE_FIELD_NUMBER: _ClassVar[int]
    STARTED_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    finish_ready: bool
    heartbeat_interval_ms: int
    job_types: bool
    kinds: bool
    leader_id: str
    mux: bool
    pending_cancels: _containers.RepeatedCompositeFieldContainer[CancelOrder]
    self_kill_after_ms: int
    snooze: bool
    started_delay_ms: int
    def __init__(self, heartbeat_interval_ms: _Optional[int] = ..., self_kill_after_ms: _Optional[int] = ..., pending_cancels: _Optional[_Iterable[_Union[CancelOrder, _Mapping]]] = ..., leader_id: _Optional[str] = ..., finish_ready: bool = ..., started_delay_ms: _Optional[int] = ..., job_types: bool = ..., snooze: bool = ..., kinds: bool = ..., mux: bool = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ["all_kinds", "attempt", "commands", "connected", "drained", "job", "kinds", "last_heartbeat_ms", "not_kinds", "pool", "size", "state", "worker_id"]
    ALL_KINDS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    NOT_KINDS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    all_kinds: bool
    attempt: int
    commands: bool
    connected: bool
    drained: bool
    job: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    last_heartbeat_ms: int
    not_kinds: _containers.RepeatedScalarFieldContainer[str]
    pool: str
    size: _types_pb2.Size
    state: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., size: _Optional[_Union[_types_pb2.Size, str]] = ..., state: _Optional[str] = ..., job: _Optional[int] = ..., attempt: _Optional[int] = ..., last_heartbeat_ms: _Optional[int] = ..., drained: bool = ..., connected: bool = ..., pool: _Optional[str] = ..., commands: bool = ..., kinds: _Optional[_Iterable[str]] = ..., all_kinds: bool = ..., not_kinds: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerMessage(_message.Message):
    __slots__ = ["end", "finished", "heartbeat", "hello", "ready", "slot", "started"]
    END_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    end: SlotEnd
    finished: JobFinished
    heartbeat: JobHeartbeat
    hello: Hello
    ready: Ready
    slot: int
    started: JobStarted
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., ready: _Optional[_Union[Ready, _Mapping]] = ..., started: _Optional[_Union[JobStarted, _Mapping]] = ..., heartbeat: _Optional[_Union[JobHeartbeat, _Mapping]] = ..., finished: _Optional[_Union[JobFinished, _Mapping]] = ..., end: _Optional[_Union[SlotEnd, _Mapping]] = ..., slot: _Optional[int] = ...) -> None: ...

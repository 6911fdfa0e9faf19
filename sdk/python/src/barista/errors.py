"""The exceptions of the SDK: one class per gRPC code, and one per cause
the cluster names (the reason of a refusal's google.rpc.ErrorInfo), each a
subclass of its code's class.

    try:
        job = await client.submit(payload, key="order-42")
    except barista.RateLimited as e:
        await asyncio.sleep(e.retry_after.total_seconds())
    except barista.QuotaExceeded:
        ...                      # the tenant holds its max_queued jobs
    except barista.NotFound:
        ...                      # an unknown tenant or pool (TenantUnknown, PoolUnknown), ...

Every exception is a BaristaError: ``code`` is the gRPC code's name
("NOT_FOUND"), ``message`` the server's words, ``reason`` the cause it
names (None when it names none), ``field`` the request field at fault when
the server says which. ``str(e)`` is "CODE_NAME: message", as the Go client
and the command line print it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, Iterable, Optional, Tuple, Type

import grpc

from ._proto import client_pb2, rpc_status_pb2

# The domain of the ErrorInfo details barista sends; a reason from
# another domain is not ours to interpret.
ERROR_DOMAIN = "barista"

# The reason of an UNAVAILABLE refusal by a node that no longer leads and
# did nothing with the call: any call may be sent again to another node.
REASON_NOT_LEADER = "NOT_LEADER"

# The key of an ErrorInfo's metadata that names the request field at
# fault.
FIELD_KEY = "field"

_STATUS_DETAILS_KEY = "grpc-status-details-bin"
_TYPE_PREFIX = "type.googleapis.com/"


class BaristaError(Exception):
    """A call the cluster refused, or that failed on the way to it."""

    #: The gRPC code's canonical name this class stands for.
    code_name = "UNKNOWN"

    def __init__(self, message: str, *, code: Optional[str] = None, reason: Optional[str] = None,
                 field: Optional[str] = None, metadata: Optional[Dict[str, str]] = None,
                 retry_after: Optional[timedelta] = None):
        super().__init__(message)
        self.code: str = code or self.code_name
        self.message: str = message
        self.reason: Optional[str] = reason
        self.field: Optional[str] = field
        self.metadata: Dict[str, str] = dict(metadata or {})
        self.retry_after: Optional[timedelta] = retry_after

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        extra = f", reason={self.reason!r}" if self.reason else ""
        return f"{type(self).__name__}({self.message!r}{extra})"


class Cancelled(BaristaError):
    code_name = "CANCELLED"


class Unknown(BaristaError):
    code_name = "UNKNOWN"


class InvalidArgument(BaristaError, ValueError):
    """A field of the request breaks a rule (the message names it). The SDK
    raises it too, before sending anything, for an argument it can check
    itself (a size that is not sm, md or lg, a negative duration)."""
    code_name = "INVALID_ARGUMENT"


class DeadlineExceeded(BaristaError):
    code_name = "DEADLINE_EXCEEDED"


class NotFound(BaristaError):
    """No such job (or one of another tenant, which looks the same), tenant,
    pool or group."""
    code_name = "NOT_FOUND"


class AlreadyExists(BaristaError):
    code_name = "ALREADY_EXISTS"


class PermissionDenied(BaristaError):
    """The token may not do this: another tenant's name, a class above the
    tenant's max_class, an admin call with a client token, ..."""
    code_name = "PERMISSION_DENIED"


class ResourceExhausted(BaristaError):
    code_name = "RESOURCE_EXHAUSTED"


class FailedPrecondition(BaristaError):
    code_name = "FAILED_PRECONDITION"


class Aborted(BaristaError):
    code_name = "ABORTED"


class OutOfRange(BaristaError):
    code_name = "OUT_OF_RANGE"


class Unimplemented(BaristaError):
    code_name = "UNIMPLEMENTED"


class Internal(BaristaError):
    code_name = "INTERNAL"


class Unavailable(BaristaError):
    """No node could be reached, or the call failed on its way and was not
    safe to send again (a submit without a key may or may not have made
    its job)."""
    code_name = "UNAVAILABLE"


class DataLoss(BaristaError):
    code_name = "DATA_LOSS"


class Unauthenticated(BaristaError):
    """No token, or one the cluster does not know."""
    code_name = "UNAUTHENTICATED"


class ClientClosed(BaristaError):
    """A call on a Client after close()."""
    code_name = "CANCELLED"


# The causes: the reasons of internal/text/refusal.go, each under the
# code the cluster sends it with.

class QuotaExceeded(ResourceExhausted):
    """The tenant holds its max_queued jobs (or the cluster's
    default_max_queued), or its max_queued_bytes of payloads."""


class RateLimited(ResourceExhausted):
    """A rate limit refused the call (the tenant's submit_rate, or a
    caller's write_rate): ``retry_after`` says how long to wait before
    trying again. The SDK never retries it on its own."""


class MaxGroups(ResourceExhausted):
    """A job of a new group would pass the tenant's max_groups."""


class KeyConflict(AlreadyExists):
    """The idempotency key was used for a job with other content."""


class KeyJobGone(NotFound):
    """The idempotency key names a job that no longer exists (purged or
    pruned) within the key's dedupe window."""


class TenantUnknown(NotFound):
    """The tenant does not exist (and the cluster makes none implicitly)."""


class PoolUnknown(NotFound):
    """The pool does not exist."""


class ResourceUnknown(NotFound):
    """The resource a job uses, or a command names, is not declared."""


class TooLarge(InvalidArgument):
    """The payload is larger than the cluster's max_payload_bytes: no retry
    makes it fit."""


class MaxClass(PermissionDenied):
    """The job's priority is above the tenant's max_class."""


class DeadlinesNotAllowed(PermissionDenied):
    """The tenant may not submit jobs with a deadline."""


class SubscriptionRequired(FailedPrecondition):
    """The pool admits only tenants with a subscription there."""


class FeatureLevel(FailedPrecondition):
    """The call needs a higher cluster feature level (a cluster still being
    upgraded)."""


class NotLeader(Unavailable):
    """The node does not lead and did nothing with the call: the SDK asks
    another node itself; a caller sees it only when no node could serve
    the call."""


_BY_CODE: Dict[str, Type[BaristaError]] = {
    cls.code_name: cls for cls in (
        Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
        PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
        Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}

#: The class of each reason the cluster names.
BY_REASON: Dict[str, Type[BaristaError]] = {
    "QUOTA_EXCEEDED": QuotaExceeded,
    "RATE_LIMITED": RateLimited,
    "MAX_GROUPS": MaxGroups,
    "KEY_CONFLICT": KeyConflict,
    "KEY_JOB_GONE": KeyJobGone,
    "TENANT_UNKNOWN": TenantUnknown,
    "POOL_UNKNOWN": PoolUnknown,
    "RESOURCE_UNKNOWN": ResourceUnknown,
    "TOO_LARGE": TooLarge,
    "MAX_CLASS": MaxClass,
    "DEADLINES_NOT_ALLOWED": DeadlinesNotAllowed,
    "SUBSCRIPTION_REQUIRED": SubscriptionRequired,
    "FEATURE_LEVEL": FeatureLevel,
    "NOT_LEADER": NotLeader,
}


def error_class(code: str, reason: Optional[str]) -> Type[BaristaError]:
    """The class of a refusal: its reason's, when the reason is one the SDK
    knows and comes with the code it is sent with, else its code's."""
    base = _BY_CODE.get(code, Unknown)
    cls = BY_REASON.get(reason or "")
    if cls is not None and issubclass(cls, base):
        return cls
    return base


def _status_details(raw: bytes) -> Tuple[Optional[rpc_status_pb2.ErrorInfo], Optional[timedelta], Optional[str]]:
    """The ErrorInfo (of barista's domain), the RetryInfo's delay and the
    first field named (the ErrorInfo's, else a BadRequest's) of a
    google.rpc.Status in wire form."""
    st = rpc_status_pb2.Status()
    try:
        st.ParseFromString(bytes(raw))
    except Exception:  # a malformed status says nothing we can use
        return None, None, None
    info, delay, field = None, None, None
    for d in st.details:
        name = d.type_url[len(_TYPE_PREFIX):] if d.type_url.startswith(_TYPE_PREFIX) else d.type_url
        try:
            if name == "google.rpc.ErrorInfo":
                i = rpc_status_pb2.ErrorInfo.FromString(d.value)
                if i.domain == ERROR_DOMAIN and info is None:
                    info = i
            elif name == "google.rpc.RetryInfo":
                r = rpc_status_pb2.RetryInfo.FromString(d.value)
                delay = timedelta(seconds=r.retry_delay.seconds, microseconds=r.retry_delay.nanos // 1000)
            elif name == "google.rpc.BadRequest":
                b = rpc_status_pb2.BadRequest.FromString(d.value)
                if b.field_violations and field is None:
                    field = b.field_violations[0].field
        except Exception:
            continue
    if info is not None and info.metadata.get(FIELD_KEY):
        field = info.metadata[FIELD_KEY]
    return info, delay, field


def _details(trailing: Optional[Iterable[Tuple[str, Any]]]) -> Tuple[Optional[rpc_status_pb2.ErrorInfo], Optional[timedelta], Optional[str]]:
    """What the status of a failed call's trailing metadata says
    (_status_details)."""
    raw = None
    for key, value in trailing or ():
        if key == _STATUS_DETAILS_KEY:
            raw = value
    if not raw:
        return None, None, None
    return _status_details(raw)


def _error(code: str, message: str, info: Optional[rpc_status_pb2.ErrorInfo], delay: Optional[timedelta],
           field: Optional[str]) -> BaristaError:
    reason = info.reason if info is not None else None
    meta = dict(info.metadata) if info is not None else {}
    cls = error_class(code, reason)
    return cls(message, code=code, reason=reason, field=field, metadata=meta, retry_after=delay)


def from_rpc_error(err: grpc.RpcError) -> BaristaError:
    """The BaristaError of a failed gRPC call: its code's class, or its
    cause's when the status names one."""
    code = err.code().name if err.code() is not None else "UNKNOWN"
    info, delay, field = _details(err.trailing_metadata())
    return _error(code, err.details() or "", info, delay, field)


def is_not_leader(err: grpc.RpcError) -> bool:
    """Whether a call was refused by a node that no longer leads, before it
    did anything: another node may be asked, whatever the call."""
    if err.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    info, _, _ = _details(err.trailing_metadata())
    return info is not None and info.reason == REASON_NOT_LEADER


def from_result(result: client_pb2.SubmitResult) -> Optional[BaristaError]:
    """The error of one refused job of a batch (a SubmitResult), read from
    its status as a single call's is: its code's or its cause's class,
    with reason, field and retry_after. None for an accepted job. A result
    of a server that sends no status (an earlier build) is an Unknown
    error with its text as the message: its code is not read out of the
    text."""
    if result.status:
        st = rpc_status_pb2.Status()
        try:
            st.ParseFromString(result.status)
        except Exception:
            return Internal("a batch result with a malformed status")
        code = _CODE_NAMES.get(st.code, "UNKNOWN")
        info, delay, field = _status_details(result.status)
        return _error(code, st.message, info, delay, field)
    if result.error:
        return Unknown(result.error)
    return None


# The canonical name of each gRPC code number (google.rpc.Code).
_CODE_NAMES: Dict[int, str] = {c.value[0]: c.name for c in grpc.StatusCode}

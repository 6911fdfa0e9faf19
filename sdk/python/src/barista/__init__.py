"""barista: the Python SDK of the barista job dispatcher.

A client that submits, reads, lists, cancels, explains and watches jobs,
manages schedules (periodic jobs kept in the cluster's log) and makes the
admin calls a SaaS makes at sign-up; and a worker that runs Python
functions in this process, routed by the job's kind. Both
are asyncio, on grpc.aio; see docs/sdk-python.md.

    import barista

    async with barista.Client(["10.0.0.1:7400", "10.0.0.2:7400"], token=token) as c:
        job = await c.submit(b"photo-17.jpg", kind="resize", size="md", cost=30, key="photo-17")
        async for ev in c.watch(job):
            print(ev.kind, ev.at)
"""

from typing import Any, Optional

from ._conn import MAX_MESSAGE_BYTES
from ._version import __version__
from ._run import JobContext, Snooze, Unrunnable
from .client import Client
from .errors import (
    Aborted,
    AlreadyExists,
    BaristaError,
    Cancelled,
    ClientClosed,
    DataLoss,
    DeadlineExceeded,
    DeadlinesNotAllowed,
    FailedPrecondition,
    FeatureLevel,
    Internal,
    InvalidArgument,
    KeyConflict,
    KeyJobGone,
    MaxClass,
    MaxGroups,
    NotFound,
    NotLeader,
    OutOfRange,
    PermissionDenied,
    PoolUnknown,
    ResourceUnknown,
    QuotaExceeded,
    RateLimited,
    ResourceExhausted,
    SubscriptionRequired,
    TenantUnknown,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from .evidence import CertificateReport, verify_certificate
from .models import (Cancel, Event, Explanation, GroupUsage, Job, Overlap, Place, Schedule, ScheduleJob, Subscription,
                     Tenant, Usage)
from .worker import Worker


def tls_credentials(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                    key_file: Optional[str] = None) -> Any:
    """TLS credentials for ``tls=``: the cluster's CA (a PEM file; None:
    the system's roots) and, for mutual TLS, this program's certificate
    and key."""
    import grpc

    def read(path: Optional[str]) -> Optional[bytes]:
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(root_certificates=read(ca_file), private_key=read(key_file),
                                        certificate_chain=read(cert_file))


__all__ = [
    "Aborted", "AlreadyExists", "BaristaError", "Cancel", "Cancelled", "CertificateReport", "Client", "ClientClosed", "DataLoss",
    "DeadlineExceeded", "DeadlinesNotAllowed", "Event", "Explanation", "FailedPrecondition", "FeatureLevel",
    "GroupUsage", "Internal", "InvalidArgument", "Job", "JobContext", "KeyConflict", "KeyJobGone",
    "MAX_MESSAGE_BYTES", "MaxClass", "MaxGroups", "NotFound", "NotLeader", "OutOfRange", "Overlap", "PermissionDenied",
    "PoolUnknown", "Place", "QuotaExceeded", "RateLimited", "ResourceExhausted", "ResourceUnknown", "Schedule", "ScheduleJob", "Snooze",
    "Subscription", "SubscriptionRequired",
    "Tenant", "TenantUnknown", "TooLarge", "Unauthenticated", "Unavailable", "Unimplemented", "Unknown",
    "Unrunnable", "Usage", "Worker", "__version__", "tls_credentials", "verify_certificate",
]

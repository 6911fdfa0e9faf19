"""The client of a barista cluster: submit, read, list, cancel, explain,
watch, usage, schedules, and the admin calls a SaaS makes at sign-up."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from google.protobuf.message import Message

import grpc

from . import _conn, _payload, errors
from . import _convert as cv
from ._proto import admin_pb2, admin_pb2_grpc, client_pb2, client_pb2_grpc, types_pb2
from .models import Cancel, Event, Explanation, Job, Overlap, Schedule, Subscription, Tenant, Usage, overlap as overlap_pb

from ._limits import MAX_BATCH, MAX_BATCH_BYTES

# A watch's reconnect backoff once every node failed (as the Go client's).
WATCH_BACKOFF_FIRST, WATCH_BACKOFF_MAX = 0.3, 10.0
_WATCH_RETRY_NEXT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_WATCH_RETRY_LATER = (grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED)

JobRef = Union[int, Job]


def _job_id(job: JobRef) -> int:
    jid = job.id if isinstance(job, Job) else job
    if not isinstance(jid, int) or isinstance(jid, bool) or jid <= 0:
        raise errors.InvalidArgument(f"job: {job!r} is not a job ID", field="job")
    return jid


def _payload_bytes(payload: object) -> bytes:
    """A submit's payload (barista._payload: bytes as they are, a str as
    its text, a dataclass or any other JSON value as JSON)."""
    try:
        return _payload.encode(payload)
    except _payload.PayloadError as e:
        raise errors.InvalidArgument(f"payload: {e}", field="payload") from None


class Client:
    """A client of a barista cluster, through any of its nodes.

    ``servers`` are the gRPC addresses (HOST:PORT) of any nodes of one
    cluster, as a list or a comma-separated string; ``token`` the bearer
    token (a client token acts on its own tenant, an admin token names the
    tenant of each call); ``tls`` None for plaintext, True for TLS with the
    system's roots, a CA file's path, or credentials from
    ``barista.tls_credentials``. With a token and no TLS, a server that is
    not on this machine is refused (InvalidArgument) unless
    ``insecure_grpc=True``: the token would cross the network in clear.
    ``call_timeout`` bounds each call, its retries included (15 s). A
    Client never shows its token (``repr``, errors, logs).

    A Client connects lazily and is used from one event loop; close it
    with ``await client.close()`` or use it as ``async with``.
    """

    def __init__(self, servers: Union[str, Sequence[str]], *, token: Optional[str] = None, tls: _conn.TLS = None,
                 call_timeout: float = _conn.CALL_TIMEOUT, connect_timeout: float = _conn.CONNECT_TIMEOUT,
                 insecure_grpc: bool = False):
        self._nodes = _conn.Nodes(servers, token, tls, call_timeout=call_timeout, connect_timeout=connect_timeout,
                                  insecure_grpc=insecure_grpc)

    def __repr__(self) -> str:
        return f"barista.Client(servers={self._nodes.addrs!r})"

    @property
    def servers(self) -> List[str]:
        return list(self._nodes.addrs)

    @property
    def last_index(self) -> int:
        """The highest log index this client's writes were answered with
        (0 before the first); every call carries it, so that any node
        answers only once it holds those writes."""
        return self._nodes.last_index

    async def close(self) -> None:
        """Closes the connections; later calls raise ClientClosed."""
        await self._nodes.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls ---------------------------------------------------------

    async def _client_call(self, method: str, request: Message, *, idempotent: bool, timeout: Optional[float] = None) -> Any:
        def invoke(ch: grpc.aio.Channel, md: List[Tuple[str, str]], t: float) -> Any:
            return getattr(client_pb2_grpc.ClientStub(ch), method)(request, metadata=md, timeout=t)
        return await self._nodes.call(invoke, idempotent=idempotent, timeout=timeout)

    async def _admin_call(self, method: str, request: Message, *, idempotent: bool, timeout: Optional[float] = None) -> Any:
        def invoke(ch: grpc.aio.Channel, md: List[Tuple[str, str]], t: float) -> Any:
            return getattr(admin_pb2_grpc.AdminStub(ch), method)(request, metadata=md, timeout=t)
        return await self._nodes.call(invoke, idempotent=idempotent, timeout=timeout)

    # -- jobs ----------------------------------------------------------

    @staticmethod
    def _submit_request(payload: object = b"", *, kind: Optional[str] = None, tenant: Optional[str] = None,
                        pool: Optional[str] = None, size: str = "sm", cost: Optional[cv.Duration] = None,
                        key: Optional[str] = None, group: Optional[str] = None, priority: Optional[str] = None,
                        deadline: Union[datetime, cv.Duration, None] = None, delay: Optional[cv.Duration] = None,
                        expire: Optional[cv.Duration] = None, max_attempts: Optional[int] = None,
                        timeout: Optional[cv.Duration] = None, retry_backoff: Optional[cv.Duration] = None,
                        form: Optional[str] = None, uses: Optional[Mapping[str, int]] = None) -> client_pb2.SubmitRequest:
        if kind is None:
            kind = _payload.kind_of(payload)  # a dataclass that names its kind
        req = client_pb2.SubmitRequest(
            tenant=tenant or "", job_type=kind or "", form=cv.job_form(form, kind or ""), size=cv.size(size),
            est_cost_ms=cv.millis(cost, "cost"),
            payload=_payload_bytes(payload), group=group or "", pool=pool or "",
            deadline_ms=cv.deadline_millis(deadline, datetime.now(timezone.utc)),
            delay_ms=cv.millis(delay, "delay"), expire_ms=cv.millis(expire, "expire"),
            timeout_ms=cv.millis(timeout, "timeout"))
        setattr(req, "class", cv.priority(priority))
        if key is not None:
            if not isinstance(key, str) or not key:
                raise errors.InvalidArgument(f"key: {key!r} (want a non-empty string)", field="key")
            req.idempotency_key = key
        if max_attempts is not None:
            if not isinstance(max_attempts, int) or max_attempts < 0:
                raise errors.InvalidArgument(f"max_attempts: {max_attempts!r} (want 0..1000)", field="max_attempts")
            req.max_attempts = max_attempts
        if retry_backoff is not None:
            req.retry_backoff_ms = cv.millis(retry_backoff, "retry_backoff")
        if uses:
            req.uses.extend(_uses(uses))
        return req

    @staticmethod
    def _submitted(req: client_pb2.SubmitRequest, job_id: int, created: bool) -> Job:
        state = None
        if created:
            state = "scheduled" if req.delay_ms else "queued"
        return Job(id=job_id, created=created, state=state, tenant=req.tenant, kind=req.job_type, form=cv.form_name(req.form),
                   pool=req.pool or "default", size=cv.size_name(req.size), priority=cv.priority_name(getattr(req, "class")),
                   group=req.group, key=req.idempotency_key if req.HasField("idempotency_key") else None,
                   max_attempts=req.max_attempts, cost=cv.opt_ms(req.est_cost_ms), timeout=cv.opt_ms(req.timeout_ms),
                   uses={u.resource: u.units for u in req.uses})

    async def submit(self, payload: object = b"", *, kind: Optional[str] = None,
                     tenant: Optional[str] = None, pool: Optional[str] = None, size: str = "sm",
                     cost: Optional[cv.Duration] = None, key: Optional[str] = None, group: Optional[str] = None,
                     priority: Optional[str] = None, deadline: Union[datetime, cv.Duration, None] = None,
                     delay: Optional[cv.Duration] = None, expire: Optional[cv.Duration] = None,
                     max_attempts: Optional[int] = None, timeout: Optional[cv.Duration] = None,
                     retry_backoff: Optional[cv.Duration] = None, form: Optional[str] = None,
                     uses: Optional[Mapping[str, int]] = None) -> Job:
        """Submits one job and returns it (``Job.id``; ``Job.created`` False
        when ``key`` found an existing job with the same content).

        ``payload`` is bytes (sent as they are), a str (its UTF-8 text),
        a dataclass (the JSON object of its fields) or any other value
        ``json`` writes (a dict, a list, a number ...): a worker's function
        that names the same type reads it back as one (``Worker.job``).
        A dataclass with a class attribute ``kind`` names the job's kind.

        ``kind`` is the job's type: a job of a kind is a function job,
        which only a worker that registered the kind (``@worker.job``) is
        given; ``form`` "command" makes it a command line instead (a
        payload ``{"argv": [...]}`` for ``barista worker``), "any" a job
        any worker may be given (a job without a kind is one); ``size`` sm, md or lg; ``cost`` its estimated CPU (a
        timedelta or seconds; left out only while the cluster's estimate is
        auto); ``priority`` critical, high, normal or low; ``deadline`` a
        datetime or a duration from now; ``delay``, ``expire``, ``timeout``
        and ``retry_backoff`` durations. ``uses`` names the resources the
        job holds units of while it runs (``{"openai": 1}``: at most 8, each
        at least 1 unit; docs/resources.md): it is dispatched only when
        each has room for it. With a ``key`` the submit is sent
        again to another node when one fails: the key finds the same job.
        Without one it is sent once, and an Unavailable error means the job
        may or may not exist.
        """
        req = self._submit_request(payload, kind=kind, tenant=tenant, pool=pool, size=size, cost=cost, key=key,
                                   group=group, priority=priority, deadline=deadline, delay=delay, expire=expire,
                                   max_attempts=max_attempts, timeout=timeout, retry_backoff=retry_backoff, form=form,
                                   uses=uses)
        too_large = _too_large(req, req.ByteSize())
        if too_large is not None:
            raise too_large
        resp = await self._client_call("Submit", req, idempotent=req.HasField("idempotency_key"))
        return self._submitted(req, resp.job_id, resp.created)

    async def submit_many(self, jobs: Iterable[Mapping[str, Any]], **defaults: Any) -> List[Union[Job, errors.BaristaError]]:
        """Submits many jobs, up to 1,000 (and 3 MiB) a request, each one
        log entry's worth applied on its own: one result per job, in order,
        a ``Job`` or the ``BaristaError`` that refused it (a refused job
        stops no other; a batch's error carries its code, not its cause).
        Each job is a mapping of ``submit``'s keyword arguments (with
        ``payload``); ``defaults`` apply to every job that does not name
        them. A request whose every job has a key is sent again to another
        node when one fails."""
        reqs = [self._submit_request(**{**defaults, **dict(j)}) for j in jobs]
        out: List[Union[Job, errors.BaristaError, None]] = [None] * len(reqs)
        # A job no request can carry is refused here, alone.
        sendable = []
        for i, r in enumerate(reqs):
            too_large = _too_large(r, r.ByteSize() + 8)
            if too_large is not None:
                out[i] = too_large
            else:
                sendable.append(i)
        for start, end in _chunks([reqs[i] for i in sendable]):
            idx = sendable[start:end]
            chunk = [reqs[i] for i in idx]
            keyed = all(r.HasField("idempotency_key") for r in chunk)
            resp = await self._client_call("SubmitBatch", client_pb2.SubmitBatchRequest(jobs=chunk), idempotent=keyed)
            for i, req, res in zip(idx, chunk, resp.results):
                err = errors.from_result(res)
                out[i] = err if err is not None else self._submitted(req, res.job_id, res.created)
        return [r for r in out if r is not None]

    async def get(self, job: JobRef, *, tenant: Optional[str] = None, stale: bool = False) -> Job:
        """The job, with its payload. ``stale`` reads this node's state
        without asking the leader (faster, maybe behind)."""
        req = client_pb2.GetJobRequest(tenant=tenant or "", job_id=_job_id(job), read=client_pb2.ReadOptions(stale=stale))
        return Job._from_pb(await self._client_call("GetJob", req, idempotent=True), with_payload=True)

    async def jobs(self, *, tenant: Optional[str] = None, state: Optional[str] = None, pool: Optional[str] = None,
                   page_size: int = 100, oldest_first: bool = False, include_payload: bool = False,
                   stale: bool = False) -> AsyncIterator[Job]:
        """The tenant's jobs from the newest down (``oldest_first``: in ID
        order from the oldest up), of one ``state`` and ``pool`` if given,
        fetched a page at a time (``page_size``, at most 1,000)."""
        token = ""
        while True:
            req = client_pb2.ListJobsRequest(tenant=tenant or "", state=state or "", pool=pool or "", page_size=page_size,
                                             page_token=token, include_payload=include_payload, oldest_first=oldest_first,
                                             read=client_pb2.ReadOptions(stale=stale))
            resp = await self._client_call("ListJobs", req, idempotent=True)
            for j in resp.jobs:
                yield Job._from_pb(j, with_payload=include_payload)
            token = resp.next_page_token
            if not token:
                return

    async def cancel(self, job: JobRef, *, tenant: Optional[str] = None) -> Cancel:
        """Cancels a job: a queued or scheduled one at once, a live one by
        asking its worker (``Cancel.requested``). Sent once: a cancel is
        not repeated after a failure on the way."""
        resp = await self._client_call("CancelJob", client_pb2.CancelJobRequest(tenant=tenant or "", job_id=_job_id(job)),
                                       idempotent=False)
        return Cancel(state=resp.state, requested=resp.cancel_requested)

    async def explain(self, job: JobRef, *, tenant: Optional[str] = None) -> Explanation:
        """Why the job is where it is: its reason, with one readable
        paragraph (``text``)."""
        resp = await self._client_call("ExplainJob", client_pb2.ExplainJobRequest(tenant=tenant or "", job_id=_job_id(job)),
                                       idempotent=True)
        return Explanation._from_pb(resp)

    async def usage(self, *, tenant: Optional[str] = None, top_groups: int = 0, stale: bool = False) -> Usage:
        """The tenant's running and queued jobs, CPU billed and counters."""
        req = client_pb2.TenantUsageRequest(tenant=tenant or "", top_groups=top_groups, read=client_pb2.ReadOptions(stale=stale))
        return Usage._from_pb(await self._client_call("TenantUsage", req, idempotent=True))

    @staticmethod
    def _window(from_index: int, to_index: int, from_ms: Optional[int], to_ms: Optional[int]) -> client_pb2.EvidenceWindow:
        if (from_ms is not None or to_ms is not None) and (from_index or to_index):
            raise ValueError("give log indexes or cluster times, not both")
        if from_ms is not None or to_ms is not None:
            return client_pb2.EvidenceWindow(by_time=True, from_ms=from_ms or 0, to_ms=to_ms or 0)
        return client_pb2.EvidenceWindow(from_index=from_index, to_index=to_index)

    async def usage_statement(self, *, tenant: Optional[str] = None, from_index: int = 0, to_index: int = 0,
                              from_ms: Optional[int] = None, to_ms: Optional[int] = None, format: str = "json") -> str:
        """The tenant's usage statement over a window of the log, as its
        document (``format`` "json" or "csv"; docs/fairness.md): by log
        index (0: the oldest the node can replay, the last it applied) or
        by cluster time (``from_ms`` inclusive, ``to_ms`` exclusive). The
        answering node replays the window from its own log: every node
        gives the same bytes for the same closed window."""
        req = client_pb2.UsageStatementRequest(tenant=tenant or "", window=self._window(from_index, to_index, from_ms, to_ms),
                                               format=format)
        resp: client_pb2.UsageStatementResponse = await self._client_call("UsageStatement", req, idempotent=True)
        return resp.document

    async def statement(self, **window: Any) -> Dict[str, Any]:
        """``usage_statement`` parsed from its JSON."""
        doc: Dict[str, Any] = json.loads(await self.usage_statement(format="json", **window))
        return doc

    async def certificate(self, *, tenant: Optional[str] = None, from_index: int = 0, to_index: int = 0,
                          from_ms: Optional[int] = None, to_ms: Optional[int] = None) -> str:
        """The tenant's certificate of fairness over a window of the log,
        as its JSON document, for ``barista.verify_certificate`` (or
        ``barista verify``)."""
        req = client_pb2.FairnessCertificateRequest(tenant=tenant or "", window=self._window(from_index, to_index, from_ms, to_ms))
        resp: client_pb2.FairnessCertificateResponse = await self._client_call("FairnessCertificate", req, idempotent=True)
        return resp.document

    async def watch(self, job: Optional[JobRef] = None, *, from_oldest: bool = True, from_seq: Optional[int] = None,
                    until_idle: bool = False, tenant: Optional[str] = None) -> AsyncIterator[Event]:
        """The tenant's events, in order, as they come: of one ``job`` if
        given (ending after its terminal event), from the oldest retained
        (``from_oldest``), or from ``from_seq``, or, with neither, from the
        next new one. ``until_idle`` ends once the tenant has nothing
        queued or running, nor a job scheduled to run again (a retry
        backing off, a snooze).

        The watch follows the events across failures: when its stream
        breaks or its node fails it moves to the next node at once (and
        backs off, 0.3 s doubling to 10 s, once every node failed), and
        resumes after the last event it gave: no gap, no event twice. It
        raises what retrying cannot clear (PermissionDenied, NotFound,
        OutOfRange: events pruned before they were read, ...).
        """
        job_id = _job_id(job) if job is not None else 0
        nxt, oldest = (from_seq, False) if from_seq else (0, from_oldest)
        wait = WATCH_BACKOFF_FIRST
        nodes = self._nodes
        while True:
            for i in nodes.order():
                ch = nodes.channel(i)
                if not await _conn.wait_ready(ch, nodes.connect_timeout):
                    nodes.skip(i)
                    continue
                req = client_pb2.WatchEventsRequest(tenant=tenant or "", from_seq=nxt, from_oldest=oldest,
                                                    job_id=job_id, until_idle=until_idle)
                call = client_pb2_grpc.ClientStub(ch).WatchEvents(req, metadata=nodes.metadata())
                try:
                    md = await call.initial_metadata()
                    if nxt == 0 or oldest:
                        # Where the stream starts: resume from there if it
                        # breaks before an event comes.
                        for key, value in md or ():
                            if key == _conn.HEADER_WATCH_CURSOR and value.isdigit() and int(value) > 0:
                                nxt, oldest = int(value), False
                    while True:
                        ev = await call.read()
                        if ev is grpc.aio.EOF:
                            break
                        if ev.seq < nxt:
                            continue  # delivered before the reconnect
                        nodes.prefer(i)
                        nxt, oldest = ev.seq + 1, False
                        wait = WATCH_BACKOFF_FIRST
                        yield Event._from_pb(ev)
                except grpc.aio.AioRpcError as e:
                    if e.code() in _WATCH_RETRY_NEXT:
                        _conn.log.debug("watch broke on %s at seq %d, resuming on the next node: %s: %s",
                                        nodes.addrs[i], nxt, e.code().name, e.details())
                        nodes.skip(i)
                        continue  # the next node, at once
                    if e.code() in _WATCH_RETRY_LATER:
                        break  # turned away for load: after the backoff
                    raise errors.from_rpc_error(e) from None
                finally:
                    call.cancel()
                # The stream ended by itself.
                if job_id or until_idle:
                    return  # the job ended, or the tenant is idle
                break  # the node ended it (it is stopping): reconnect
            await asyncio.sleep(wait)
            wait = min(2 * wait, WATCH_BACKOFF_MAX)

    # -- schedules -----------------------------------------------------

    async def set_schedule(self, name: str, spec: str, payload: object = b"", *, kind: Optional[str] = None,
                           tenant: Optional[str] = None, zone: Optional[str] = None,
                           overlap: Union[Overlap, str] = Overlap.SKIP, catchup: Optional[cv.Duration] = None,
                           jitter: Optional[cv.Duration] = None, paused: bool = False, pool: Optional[str] = None,
                           size: str = "sm", cost: Optional[cv.Duration] = None, group: Optional[str] = None,
                           priority: Optional[str] = None, deadline: Optional[cv.Duration] = None,
                           delay: Optional[cv.Duration] = None, expire: Optional[cv.Duration] = None,
                           max_attempts: Optional[int] = None, timeout: Optional[cv.Duration] = None,
                           retry_backoff: Optional[cv.Duration] = None, form: Optional[str] = None) -> Schedule:
        """Creates or replaces the schedule ``name`` (docs/schedules.md):
        at each slot of ``spec`` — five cron fields (minute hour
        day-of-month month day-of-week) read in ``zone`` (an IANA name;
        None: UTC), a macro such as "@daily", or "@every D" (the multiples
        of D since the Unix epoch) — the cluster submits a job of
        ``payload``, as ``submit`` would, under the tenant's quotas and fair
        share, with the key ``schedule/NAME/SLOT``. A change takes effect
        for the slots after it; setting a schedule to what it is changes
        nothing (so the call is sent again to another node after a failure
        on the way).

        ``payload``, ``kind`` and ``form`` and the job's options are
        submit's (a dataclass payload names its kind), but for ``key``
        (the schedule's) and ``deadline``, a duration from each fire.
        ``overlap`` (an ``Overlap`` or its name) says what a slot does
        while the previous job lives; ``catchup`` how far behind cluster
        time a slot still fires after no leader could fire it (None: 60 s);
        ``jitter`` spreads the fires over that long after each slot;
        ``paused`` makes (or keeps) it paused."""
        for what, value in (("name", name), ("spec", spec)):
            if not isinstance(value, str) or not value:
                raise errors.InvalidArgument(f"{what}: {value!r} (want a non-empty string)", field=what)
        if isinstance(deadline, datetime):
            raise errors.InvalidArgument("deadline: a schedule's job takes its deadline as a duration from each fire, "
                                         "not a datetime", field="deadline")
        job = self._submit_request(payload, kind=kind, pool=pool, size=size, cost=cost, group=group, priority=priority,
                                   delay=delay, expire=expire, max_attempts=max_attempts, timeout=timeout,
                                   retry_backoff=retry_backoff, form=form)
        job.deadline_ms = cv.millis(deadline, "deadline")
        req = client_pb2.SetScheduleRequest(tenant=tenant or "", name=name, spec=spec, zone=zone or "",
                                            overlap=overlap_pb(overlap), jitter_ms=cv.millis(jitter, "jitter"),
                                            paused=paused, job=job)
        if catchup is not None:
            req.catchup_ms = cv.millis(catchup, "catchup")
        too_large = _too_large(job, req.ByteSize())
        if too_large is not None:
            raise too_large
        return Schedule._from_pb(await self._client_call("SetSchedule", req, idempotent=True))

    async def get_schedule(self, name: str, *, tenant: Optional[str] = None, next: int = 5,
                           stale: bool = False) -> Schedule:
        """A schedule with its ``next`` next slots (at most 100);
        NotFound if there is none."""
        req = client_pb2.GetScheduleRequest(tenant=tenant or "", name=name, next=next,
                                            read=client_pb2.ReadOptions(stale=stale))
        return Schedule._from_pb(await self._client_call("GetSchedule", req, idempotent=True))

    async def list_schedules(self, *, tenant: Optional[str] = None, next: int = 1, stale: bool = False) -> List[Schedule]:
        """The tenant's schedules by name (at most its ``max_schedules``),
        each with its ``next`` next slots, fetched a page of 1,000 at a
        time."""
        out: List[Schedule] = []
        token = ""
        while True:
            req = client_pb2.ListSchedulesRequest(tenant=tenant or "", page_size=1000, page_token=token, next=next,
                                                  read=client_pb2.ReadOptions(stale=stale))
            resp = await self._client_call("ListSchedules", req, idempotent=True)
            out.extend(Schedule._from_pb(s) for s in resp.schedules)
            token = resp.next_page_token
            if not token:
                return out

    async def pause_schedule(self, name: str, *, tenant: Optional[str] = None) -> Schedule:
        """Pauses a schedule: no slot fires, and none is counted missed,
        until ``resume_schedule``."""
        return await self._pause_schedule(name, tenant, False)

    async def resume_schedule(self, name: str, *, tenant: Optional[str] = None) -> Schedule:
        """Resumes a paused schedule: the slots after the resume fire
        (those slept through do not)."""
        return await self._pause_schedule(name, tenant, True)

    async def _pause_schedule(self, name: str, tenant: Optional[str], resume: bool) -> Schedule:
        req = client_pb2.PauseScheduleRequest(tenant=tenant or "", name=name, resume=resume)
        return Schedule._from_pb(await self._client_call("PauseSchedule", req, idempotent=True))

    async def run_schedule_now(self, name: str, key: Optional[str] = None, *, tenant: Optional[str] = None) -> Job:
        """Fires a schedule once, now, whatever its spec, pause and overlap
        policy, and returns the job it submitted (read back: ``get``'s
        fields), with the key ``schedule/NAME/run/KEY``. ``key`` (None: a
        random one made here) makes the call safe to send again: the same
        key fires once, and a second call with it answers the same job
        with ``created`` False."""
        if key is None:
            key = secrets.token_hex(8)
        elif not isinstance(key, str) or not key:
            raise errors.InvalidArgument(f"key: {key!r} (want a non-empty string, or None for one made here)", field="key")
        req = client_pb2.RunScheduleNowRequest(tenant=tenant or "", name=name, key=key)
        resp: client_pb2.RunScheduleNowResponse = await self._client_call("RunScheduleNow", req, idempotent=True)
        try:
            job = await self.get(resp.job_id, tenant=tenant)
        except errors.BaristaError as e:
            raise type(e)(f"schedule {name} fired job {resp.job_id}, but reading it back failed: {e.message}",
                          code=e.code, reason=e.reason, field=e.field, metadata=e.metadata,
                          retry_after=e.retry_after) from e
        return dataclasses.replace(job, created=resp.created)

    async def delete_schedule(self, name: str, *, tenant: Optional[str] = None) -> None:
        """Deletes a schedule; the jobs it fired stay. NotFound if there
        is none. Sent once."""
        await self._client_call("DeleteSchedule", client_pb2.DeleteScheduleRequest(tenant=tenant or "", name=name),
                                idempotent=False)

    # -- admin ---------------------------------------------------------

    async def upsert_tenant(self, name: str, *, tier: Optional[str] = None, multiplier: Optional[int] = None,
                            max_running: Optional[int] = None, max_running_sm: Optional[int] = None,
                            max_running_md: Optional[int] = None, max_running_lg: Optional[int] = None,
                            max_inflight_cpu: Optional[cv.Duration] = None, max_queued: Optional[int] = None,
                            max_running_critical: Optional[int] = None, max_running_high: Optional[int] = None,
                            max_running_deadline: Optional[int] = None, max_priority: Optional[str] = None,
                            allow_deadlines: Optional[bool] = None, group_cap: Optional[int] = None,
                            group_order: Optional[str] = None, max_groups: Optional[int] = None,
                            rate: Optional[str] = None, rate_burst: Optional[int] = None,
                            export_metrics: Optional[bool] = None) -> Tenant:
        """Creates a tenant (``tier`` is required then) or changes one (an
        admin token): a field left out (None) keeps its value (a new
        tenant: its default), a field given sets it, 0, False and ""
        included: a cap of 0 is no cap, a ``rate`` of "none" no rate
        limit. ``Tenant.created`` says it is new. Sent again to another
        node after a failure on the way: it sets values."""
        caps = admin_pb2.CapsUpdate()
        for field, value in (("max_running", max_running), ("max_running_sm", max_running_sm),
                             ("max_running_md", max_running_md), ("max_running_lg", max_running_lg),
                             ("max_queued", max_queued), ("max_running_critical", max_running_critical),
                             ("max_running_high", max_running_high), ("max_running_deadline", max_running_deadline)):
            if value is not None:
                setattr(caps, field, value)
        if max_inflight_cpu is not None:
            caps.max_inflight_cpu_ms = cv.millis(max_inflight_cpu, "max_inflight_cpu")
        req = admin_pb2.UpsertTenantRequest(name=name, caps=caps)
        if tier is not None:
            req.tier = cv.tier(tier)
        if max_priority is not None:
            req.max_class = cv.priority(max_priority)
        if group_order is not None:
            req.group_order = cv.group_order(group_order)
        settings: Tuple[Tuple[str, Union[int, bool, str, None]], ...] = (
            ("multiplier", multiplier), ("allow_deadlines", allow_deadlines), ("group_cap", group_cap),
            ("max_groups", max_groups), ("rate", rate), ("rate_burst", rate_burst), ("export_metrics", export_metrics))
        for field, setting in settings:
            if setting is not None:
                setattr(req, field, setting)
        return Tenant._from_pb(await self._admin_call("UpsertTenant", req, idempotent=True))

    async def get_tenant(self, name: str, *, stale: bool = False) -> Tenant:
        """A tenant's settings (an admin token); NotFound if there is none."""
        req = admin_pb2.GetTenantRequest(name=name, read=client_pb2.ReadOptions(stale=stale))
        return Tenant._from_pb(await self._admin_call("GetTenant", req, idempotent=True))

    async def delete_tenant(self, name: str) -> None:
        """Deletes a tenant (an admin token): refused (FailedPrecondition)
        while it has queued or running jobs. Sent once."""
        await self._admin_call("DeleteTenant", admin_pb2.DeleteTenantRequest(name=name), idempotent=False)

    async def set_subscription(self, tenant: str, pool: str, burst: int) -> Subscription:
        """Sets a tenant's subscription in a pool (an admin token): at most
        ``burst`` of its jobs assigned or running there (0 keeps them
        queued)."""
        req = admin_pb2.SubscriptionSetRequest(tenant=tenant, pool=pool, burst=burst)
        return _subscription(tenant, pool, await self._admin_call("SubscriptionSet", req, idempotent=True))

    async def delete_subscription(self, tenant: str, pool: str) -> Subscription:
        """Removes a tenant's subscription in a pool (an admin token);
        ``changed`` is False if it had none."""
        req = admin_pb2.SubscriptionDeleteRequest(tenant=tenant, pool=pool)
        return _subscription(tenant, pool, await self._admin_call("SubscriptionDelete", req, idempotent=True))


def _subscription(tenant: str, pool: str, resp: admin_pb2.SubscriptionSetResponse) -> Subscription:
    if resp.HasField("subscription"):
        s = resp.subscription
        return Subscription(tenant=s.tenant, pool=s.pool, burst=s.burst, running=s.running, changed=resp.changed)
    return Subscription(tenant=tenant, pool=pool, burst=None, changed=resp.changed)


def _uses(uses: Mapping[str, int]) -> List[types_pb2.ResourceUse]:
    """The resources a job uses, sorted by name; a unit count below 1 (or
    not an int) is refused here, the rest by the cluster."""
    out = []
    for name in sorted(uses):
        units = uses[name]
        if not isinstance(name, str) or isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise errors.InvalidArgument(f"uses: {name!r}: {units!r} (want a resource name and at least 1 unit)", field="uses")
        out.append(types_pb2.ResourceUse(resource=name, units=units))
    return out


def _too_large(req: client_pb2.SubmitRequest, size: int) -> Optional[errors.TooLarge]:
    """The refusal of a job whose request (size bytes) no server takes
    (over the largest message): said here, with the size and the limit,
    as the permanent refusal it is. A job that fits a message but whose
    payload is over the cluster's max_payload_bytes is the cluster's to
    refuse (TooLarge too)."""
    if size <= _conn.MAX_MESSAGE_BYTES:
        return None
    return errors.TooLarge(
        f"payload: {len(req.payload)} bytes: the job would be a {size}-byte request, over the largest a server "
        f"takes ({_conn.MAX_MESSAGE_BYTES} bytes; the cluster's max_payload_bytes is lower still)",
        code="INVALID_ARGUMENT", reason="TOO_LARGE", field="payload")


def _chunks(reqs: List[client_pb2.SubmitRequest]) -> Iterator[Tuple[int, int]]:
    """Cuts jobs into the chunks of a batch: at most MAX_BATCH jobs and
    MAX_BATCH_BYTES of them each; a larger job goes alone."""
    start, size = 0, 0
    for i, r in enumerate(reqs):
        n = r.ByteSize() + 8
        if i > start and (i - start == MAX_BATCH or size + n > MAX_BATCH_BYTES):
            yield start, i
            start, size = i, 0
        size += n
    if start < len(reqs):
        yield start, len(reqs)

/**
 * The values the client returns: jobs, events, usage, explanations,
 * tenants and subscriptions, in the SDK's types (milliseconds, Dates,
 * size and priority names), made from the wire's messages.
 */

import type { Tenant as PbTenant, SubscriptionSetResponse } from "./gen/admin_pb.js";
import type {
  ClockNow,
  Event as PbEvent,
  ExplainJobResponse,
  Job as PbJob,
  PlaceInLine,
  Schedule as PbSchedule,
  TenantUsageResponse,
} from "./gen/client_pb.js";
import * as cv from "./convert.js";

/** The states in which a job has ended (a redrive may queue it again). */
export const TERMINAL_STATES: ReadonlySet<string> = new Set(["completed", "failed", "cancelled", "timed_out", "expired"]);

/**
 * A job as the cluster holds it. From `get` and `jobs` every field is the
 * cluster's; from `submit`, what the submit knows (see `Submitted`).
 * Durations are milliseconds; times are Dates.
 */
export interface Job<T = unknown> {
  id: number;
  /** scheduled, queued, assigned, running, completed, failed, cancelled, timed_out, expired. */
  state: string;
  tenant: string;
  kind: string;
  /** Which workers run it: function (a worker that registered its kind), command, or any. */
  form: cv.FormName;
  pool: string;
  size: cv.SizeName;
  priority: cv.Priority;
  group: string;
  key: string | undefined;
  attempt: number;
  failures: number;
  maxAttempts: number;
  /** The estimated CPU (ms), and where it came from (submitted, ema, default). */
  cost: number | undefined;
  costSource: string;
  /** The CPU billed for its last run (ms), and how the worker measured it. */
  cpu: number;
  cpuSource: string;
  timeout: number | undefined;
  submittedAt: Date | undefined;
  endedAt: Date | undefined;
  deadlineAt: Date | undefined;
  deadlineMissed: boolean;
  dueAt: Date | undefined;
  expireAt: Date | undefined;
  workerId: string;
  exitCode: number;
  /** What the run's function returned (a worker of functions), or a process's last 4 KiB of stdout. */
  result: string;
  /** What the run's function threw (its stack), or a process's last 4 KiB of stderr. */
  error: string;
  failure: string;
  /** Its runs snoozed in a row so far (0: its last run did not snooze). */
  snoozes: number;
  /** none, requested, timeout. */
  cancel: string;
  /** The payload's bytes (from `get`, or `jobs` with includePayload). */
  raw: Uint8Array | undefined;
  /** The payload decoded as JSON (undefined when it was not read, or is empty); throws if it is not JSON. */
  readonly payload: T;
  /** Whether the job has ended. */
  readonly done: boolean;
  /** A queued job's place in line (from `get`; undefined when it has none). */
  place: Place | undefined;
  /** The resources it uses and the units of each, by name (docs/resources.md); empty: none. */
  uses: Record<string, number>;
}

/**
 * A queued job's place in line in its pool (docs/fairness.md): `ahead`
 * jobs would go to the workers of its size before it, `ownAhead` of them
 * its own tenant's; `complete` false means the count stopped at 10,000 (a
 * lower bound). `estimatedStart` is an estimate (undefined: nothing ran
 * in the pool in the last 10 minutes) from the work ahead and the pace of
 * the last 10 minutes; `ratePerMinute` is the pool's recent dispatches a
 * minute and `share` the tenant's entitled share of its class.
 */
export interface Place {
  ahead: number;
  ownAhead: number;
  complete: boolean;
  estimatedStart: Date | undefined;
  ratePerMinute: number;
  share: number;
}

export function placeFromPb(x: PlaceInLine | undefined, now: ClockNow | undefined): Place | undefined {
  if (x === undefined) return undefined;
  return {
    ahead: Number(x.ahead),
    ownAhead: Number(x.ownAhead),
    complete: x.complete,
    estimatedStart: cv.clusterToWall(now, x.estimatedStartMs),
    ratePerMinute: x.ratePerMinute,
    share: x.share,
  };
}

/** The answer to a submit: the job's ID, and whether this submit made it. */
export interface Submitted {
  id: number;
  /** True: this submit made the job; false: its key found one that exists. */
  created: boolean;
  /** queued (scheduled with a delay) for a job it made; undefined for one that exists (`get` reads it). */
  state: string | undefined;
  tenant: string;
  kind: string;
  /** The form the submit sent (a cluster below feature level 8 ignores it). */
  form: cv.FormName;
  pool: string;
  size: cv.SizeName;
  priority: cv.Priority;
  group: string;
  key: string | undefined;
  /** The resources the submit named, and the units of each. */
  uses: Record<string, number>;
}

function payloadGetter<T>(raw: Uint8Array | undefined): () => T {
  let done = false;
  let value: T;
  return () => {
    if (!done) {
      value = raw === undefined ? (undefined as T) : cv.decodePayload<T>(raw);
      done = true;
    }
    return value;
  };
}

export function jobFromPb<T>(j: PbJob, withPayload: boolean): Job<T> {
  const raw = withPayload ? j.payload : undefined;
  const payload = payloadGetter<T>(raw);
  const job = {
    id: cv.num(j.jobId, "job_id"),
    state: j.state,
    tenant: j.tenant,
    kind: j.jobType,
    form: cv.formName(j.form),
    pool: j.pool,
    size: cv.sizeName(j.size),
    priority: cv.priorityName(j.class),
    group: j.group,
    key: j.idempotencyKey || undefined,
    attempt: j.attempt,
    failures: j.failures,
    maxAttempts: j.maxAttempts,
    cost: cv.optMs(j.estCostMs),
    costSource: j.estSource,
    cpu: Number(j.cpuMs),
    cpuSource: j.cpuSource,
    timeout: cv.optMs(j.timeoutMs),
    submittedAt: cv.wall(j.submittedWallMs),
    endedAt: cv.wall(j.endedWallMs),
    deadlineAt: cv.clusterToWall(j.now, j.deadlineAtMs),
    deadlineMissed: j.deadlineMissed,
    dueAt: cv.clusterToWall(j.now, j.dueAtMs),
    expireAt: cv.clusterToWall(j.now, j.expireAtMs),
    workerId: j.workerId,
    exitCode: j.exitCode,
    result: j.stdoutTail,
    error: j.stderrTail,
    failure: j.failure,
    snoozes: j.snoozes,
    cancel: j.cancel || "none",
    raw,
    place: placeFromPb(j.place, j.now),
    uses: Object.fromEntries(j.uses.map((u) => [u.resource, u.units])),
  };
  Object.defineProperty(job, "payload", { get: payload, enumerable: false });
  Object.defineProperty(job, "done", { get: () => TERMINAL_STATES.has(job.state), enumerable: false });
  return job as Job<T>;
}

/**
 * One event of a tenant's stream: `kind` is queued, scheduled, released,
 * assigned, started, requeued, completed, failed, cancel_requested,
 * cancelled, timed_out, expired, redriven, or (for the tenant itself,
 * jobId 0) paused and resumed.
 */
export interface Event {
  seq: number;
  kind: string;
  jobId: number;
  /** The leader's wall clock when it happened. */
  at: Date | undefined;
  tenant: string;
  attempt: number;
  workerId: string;
  cpu: number;
  exitCode: number;
  reason: string;
  pool: string;
  group: string;
  /** Whether the event ends its job (for now: a redrive may queue it again). */
  terminal: boolean;
  /** schedule_fired, schedule_refused, schedule_missed: the schedule, its slot (cluster ms) and, for a miss, how many slots. */
  schedule: string;
  slotMs: number;
  slots: number;
}

export function eventFromPb(e: PbEvent): Event {
  return {
    seq: cv.num(e.seq, "seq"),
    kind: e.kind,
    jobId: cv.num(e.jobId, "job_id"),
    at: cv.wall(e.wallMs),
    tenant: e.tenant,
    attempt: e.attempt,
    workerId: e.workerId,
    cpu: Number(e.cpuMs),
    exitCode: e.exitCode,
    reason: e.reason,
    pool: e.pool,
    group: e.group,
    terminal: TERMINAL_STATES.has(e.kind),
    schedule: e.schedule,
    slotMs: Number(e.slotMs),
    slots: Number(e.slots),
  };
}

/** The answer to a cancel: the job's state after it, and whether its worker is told to stop (a live job). */
export interface Cancel {
  state: string;
  requested: boolean;
}

/**
 * Why a job is where it is: `reason` (scheduled, paused, behind, cap,
 * rate, held, group_turn, higher_class, no_worker, waiting, assigned,
 * running, or the terminal state), `text` one readable paragraph, and the
 * reason's own fields.
 */
export interface Explanation {
  jobId: number;
  reason: string;
  text: string;
  size: cv.SizeName;
  priority: cv.Priority;
  group: string;
  position: number;
  vertex: string;
  current: number;
  limit: number;
  ahead: number;
  workerId: string;
  dueAt: Date | undefined;
  eligibleAt: Date | undefined;
  fittingWorkers: number;
  workersBusy: boolean;
  place: Place | undefined;
  /** The schedule that fired the job ("": none), its slot (cluster ms; 0 for a run-now) and a run-now's key. */
  schedule: string;
  scheduleSlotMs: number;
  scheduleRunKey: string;
}

export function explanationFromPb(x: ExplainJobResponse): Explanation {
  return {
    jobId: cv.num(x.jobId, "job_id"),
    reason: x.reason,
    text: x.text,
    size: cv.sizeName(x.size),
    priority: cv.priorityName(x.class),
    group: x.group,
    position: Number(x.position),
    vertex: x.vertex,
    current: Number(x.current),
    limit: Number(x.limit),
    ahead: Number(x.ahead),
    workerId: x.workerId,
    dueAt: cv.clusterToWall(x.now, x.dueMs),
    eligibleAt: cv.clusterToWall(x.now, x.eligibleAtMs),
    fittingWorkers: x.fittingWorkers,
    workersBusy: x.workersBusy,
    place: placeFromPb(x.place, x.now),
    schedule: x.schedule,
    scheduleSlotMs: Number(x.scheduleSlotMs),
    scheduleRunKey: x.scheduleRunKey,
  };
}

/** One group's jobs in a tenant's usage. */
export interface GroupUsage {
  name: string;
  running: number;
  queued: number;
  limit: number;
}

/** A tenant's jobs and what it was billed. */
export interface Usage {
  tenant: string;
  tier: cv.TierName | "";
  running: number;
  runningBySize: Record<cv.SizeName, number>;
  queued: number;
  queuedBySize: Record<cv.SizeName, number>;
  scheduled: number;
  inflightCpu: number;
  cpuBilled: number;
  weight: number;
  submitted: number;
  dispatches: number;
  completed: number;
  failed: number;
  cancelled: number;
  timedOut: number;
  failures: number;
  requeues: number;
  paused: string;
  rate: string;
  groups: GroupUsage[];
  groupCount: number;
}

export function usageFromPb(u: TenantUsageResponse): Usage {
  const bySize = (v: number[]): Record<cv.SizeName, number> => ({ sm: v[0] ?? 0, md: v[1] ?? 0, lg: v[2] ?? 0 });
  return {
    tenant: u.tenant,
    tier: cv.tierName(u.tier),
    running: u.running,
    runningBySize: bySize(u.runningBySize),
    queued: u.queued,
    queuedBySize: bySize(u.queuedBySize),
    scheduled: u.scheduled,
    inflightCpu: Number(u.inflightCpuMs),
    cpuBilled: Number(u.cpuBilledMs),
    weight: u.weight,
    submitted: Number(u.submitted),
    dispatches: Number(u.dispatches),
    completed: Number(u.completed),
    failed: Number(u.failed),
    cancelled: Number(u.cancelled),
    timedOut: Number(u.timedOut),
    failures: Number(u.failures),
    requeues: Number(u.requeues),
    paused: u.paused,
    rate: u.rate,
    groups: u.groups.map((g) => ({ name: g.name, running: g.running, queued: g.queued, limit: g.limit })),
    groupCount: u.groupCount,
  };
}

/** A tenant's settings (admin calls). Caps of 0 are none; `maxPriority` is its max_class. */
export interface Tenant {
  name: string;
  tier: cv.TierName | "";
  multiplier: number;
  maxRunning: number;
  maxRunningSm: number;
  maxRunningMd: number;
  maxRunningLg: number;
  maxInflightCpu: number | undefined;
  maxQueued: number;
  maxRunningCritical: number;
  maxRunningHigh: number;
  maxRunningDeadline: number;
  maxPriority: cv.Priority;
  allowDeadlines: boolean;
  groupCap: number;
  groupOrder: cv.GroupOrderName;
  maxGroups: number;
  rate: string;
  rateBurst: number;
  exportMetrics: boolean;
  paused: string;
  /** Set by upsertTenant: the tenant is new. */
  created: boolean;
}

export function tenantFromPb(t: PbTenant): Tenant {
  const c = t.caps;
  return {
    name: t.name,
    tier: cv.tierName(t.tier),
    multiplier: t.multiplier || 1,
    maxRunning: c?.maxRunning ?? 0,
    maxRunningSm: c?.maxRunningSm ?? 0,
    maxRunningMd: c?.maxRunningMd ?? 0,
    maxRunningLg: c?.maxRunningLg ?? 0,
    maxInflightCpu: c ? cv.optMs(c.maxInflightCpuMs) : undefined,
    maxQueued: c?.maxQueued ?? 0,
    maxRunningCritical: c?.maxRunningCritical ?? 0,
    maxRunningHigh: c?.maxRunningHigh ?? 0,
    maxRunningDeadline: c?.maxRunningDeadline ?? 0,
    maxPriority: cv.priorityName(t.maxClass),
    allowDeadlines: t.allowDeadlines,
    groupCap: t.groupCap,
    groupOrder: cv.groupOrderName(t.groupOrder),
    maxGroups: t.maxGroups,
    rate: t.rate,
    rateBurst: t.rateBurst,
    exportMetrics: t.exportMetrics,
    paused: t.paused,
    created: t.created,
  };
}

/** A tenant's subscription in a pool: at most `burst` of its jobs assigned or running there; undefined once removed. */
export interface Subscription {
  tenant: string;
  pool: string;
  burst: number | undefined;
  running: number;
  /** False: it already was so. */
  changed: boolean;
}

export function subscriptionFromPb(tenant: string, pool: string, r: SubscriptionSetResponse): Subscription {
  const s = r.subscription;
  if (s) return { tenant: s.tenant, pool: s.pool, burst: s.burst, running: s.running, changed: r.changed };
  return { tenant, pool, burst: undefined, running: 0, changed: r.changed };
}

/** A schedule as the cluster holds it (docs/schedules.md); times are wall times, by the answer's clock. */
export interface Schedule<T = unknown> {
  tenant: string;
  name: string;
  /** Five cron fields, a macro or "@every D". */
  spec: string;
  /** The IANA zone the cron fields read. */
  zone: string;
  overlap: cv.OverlapName;
  /** How late (ms) a slot still fires after a time without a leader. */
  catchup: number;
  /** Slot T fires at T plus a fixed share of this (ms). */
  jitter: number;
  paused: boolean;
  /** The kind and payload of the job each fire submits. */
  kind: string;
  payload: () => T;
  size: cv.SizeName;
  /** Moves on with every change of the schedule. */
  version: number;
  /** The newest slot spent (undefined: none yet). */
  lastSlot: Date | undefined;
  /** The next slots, as the answering node computes them. */
  nextSlots: Date[];
  /** When the next slot fires (with its jitter). */
  nextFire: Date | undefined;
  /** Slots that submitted a job (and run-nows). */
  fired: number;
  /** Slots the overlap policy skipped. */
  skipped: number;
  /** Slots further behind than catchup: never fired. */
  missed: number;
  /** Fires whose submit was refused (the tenant's quota, ...). */
  refused: number;
  /** The newest job it fired (0: none). */
  lastJob: number;
  /** Its jobs the overlap policy still sees. */
  liveJobs: number[];
  /** Why the answering node cannot compute its slots ("": it can). */
  specError: string;
}

export function scheduleFromPb<T>(x: PbSchedule): Schedule<T> {
  const at = (ms: bigint) => cv.clusterToWall(x.now, ms);
  return {
    tenant: x.tenant,
    name: x.name,
    spec: x.spec,
    zone: x.zone,
    overlap: cv.overlapName(x.overlap),
    catchup: Number(x.catchupMs),
    jitter: Number(x.jitterMs),
    paused: x.paused,
    kind: x.job?.jobType ?? "",
    payload: payloadGetter<T>(x.job?.payload),
    size: cv.sizeName(x.job?.size ?? 0),
    version: cv.num(x.version, "version"),
    lastSlot: at(x.lastSlotMs),
    nextSlots: x.nextSlotsMs.map(at).filter((d): d is Date => d !== undefined),
    nextFire: at(x.nextFireMs),
    fired: Number(x.fired),
    skipped: Number(x.skipped),
    missed: Number(x.missed),
    refused: Number(x.refused),
    lastJob: cv.num(x.lastJobId, "last_job_id"),
    liveJobs: x.liveJobIds.map((id) => cv.num(id, "live_job_ids")),
    specError: x.specError,
  };
}

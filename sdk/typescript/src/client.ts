/**
 * The client of a barista cluster: submit, read, list, cancel, explain,
 * watch, usage, and the admin calls a SaaS makes at sign-up.
 */

import { randomBytes } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Admin, CapsUpdateSchema, UpsertTenantRequestSchema } from "./gen/admin_pb.js";
import {
  Client as ClientService,
  SubmitRequestSchema,
  type SubmitRequest,
  type SubmitResponse,
} from "./gen/client_pb.js";
import { HEADER_WATCH_CURSOR, Nodes, transportError, type Logger, type NodesOptions, type Tls } from "./conn.js";
import * as cv from "./convert.js";
import { BaristaError, InvalidArgument, TooLarge, fromError, fromResult } from "./errors.js";
import { MAX_BATCH, MAX_BATCH_BYTES, MAX_MESSAGE_BYTES } from "./limits.js";
import {
  eventFromPb,
  explanationFromPb,
  jobFromPb,
  scheduleFromPb,
  subscriptionFromPb,
  tenantFromPb,
  usageFromPb,
  type Cancel,
  type Event,
  type Explanation,
  type Job,
  type Schedule,
  type Submitted,
  type Subscription,
  type Tenant,
  type Usage,
} from "./models.js";
import { sleep } from "./util.js";

/** A window of the log for a statement or certificate: log indexes, or cluster times (not both). */
export interface EvidenceOptions {
  tenant?: string;
  fromIndex?: number;
  toIndex?: number;
  fromMs?: number;
  toMs?: number;
}

function evidenceWindow(o: EvidenceOptions) {
  const byTime = o.fromMs !== undefined || o.toMs !== undefined;
  if (byTime && (o.fromIndex || o.toIndex)) throw new InvalidArgument("give log indexes or cluster times, not both");
  if (byTime) return { byTime: true, fromMs: BigInt(o.fromMs ?? 0), toMs: BigInt(o.toMs ?? 0), fromIndex: 0n, toIndex: 0n };
  return { byTime: false, fromMs: 0n, toMs: 0n, fromIndex: BigInt(o.fromIndex ?? 0), toIndex: BigInt(o.toIndex ?? 0) };
}

/** A watch's reconnect backoff once every node failed (ms, as the Go client's). */
export const WATCH_BACKOFF_FIRST = 300;
export const WATCH_BACKOFF_MAX = 10_000;

/**
 * The payload type of each kind a program submits: `new Client<MyKinds>()`
 * types `submit(kind, payload)` by it.
 *
 *     interface MyKinds { resize: { image: string; width: number }; notify: { user: string } }
 */
export type JobTypes = object;

/** The kinds of a Client or Worker not given a JobTypes: any kind, any payload. */
export type AnyKinds = Record<string, unknown>;

/** A job: its ID, or a job the client returned. */
export type JobRef = number | { id: number };

export interface ClientOptions {
  /** The gRPC addresses (HOST:PORT) of any nodes of one cluster: a list, or a comma-separated string. */
  servers: string | readonly string[];
  /** The bearer token: a client token acts on its own tenant, an admin token names the tenant of each call. */
  token?: string;
  /** undefined: plaintext; true: TLS with the system's roots; or the CA (and a client certificate). */
  tls?: Tls;
  /** Bounds each call, its retries included (ms, default 15,000). */
  callTimeout?: number;
  /** Bounds the wait for one node's connection before the next node is tried (ms, default 2,000). */
  connectTimeout?: number;
  /** Where the client logs (failovers at debug). */
  logger?: Logger;
}

/** The options of one submit. Durations are milliseconds. */
export interface SubmitOptions {
  /** The job's tenant: an admin's submit names it; a client token's is its own. */
  tenant?: string;
  /** The pool whose workers run it (default: default). */
  pool?: string;
  size?: cv.SizeName;
  /** Its estimated CPU (ms); may be left out only while the cluster's estimate is auto. */
  cost?: number;
  /** Idempotency key: the same key and content answer the same job (created false). A keyed submit is retried across failover. */
  key?: string;
  group?: string;
  priority?: cv.Priority;
  /** Its deadline: a Date, or ms from now (1 s .. 1 year), for a tenant with deadlines allowed. */
  deadline?: Date | number;
  /** Keep it scheduled that long before it queues (ms). */
  delay?: number;
  /** Drop it if not dispatched that long after the submit (ms). */
  expire?: number;
  /** Failed runs before it fails (default: the cluster's). */
  maxAttempts?: number;
  /** A run longer than this is cancelled and the job ends timed_out (ms). */
  timeout?: number;
  /** This job's wait before a failed run's retry (ms; 0: at once; default: the cluster's). */
  retryBackoff?: number;
  /**
   * Which workers run it (default: a function job of its kind, which only
   * a worker that registered the kind is given; "any" for an empty kind):
   * "command" for a command line (`{argv: [...]}`, run by `barista
   * worker`), "any" for a job every worker may be given, as a client of an
   * earlier build submits.
   */
  form?: cv.FormName;
  /**
   * The resources it holds units of while it runs (`{openai: 1}`: at most
   * 8, each at least 1 unit; docs/resources.md): it is dispatched only
   * when each has room for it.
   */
  uses?: Record<string, number>;
}

/**
 * A schedule's options (docs/schedules.md) and those of the job each fire
 * submits (submit's, but for key: each job's key is schedule/NAME/SLOT;
 * and deadline, which is deadlineAfter, from each fire).
 */
export interface ScheduleOptions extends Omit<SubmitOptions, "key" | "deadline"> {
  /** The IANA zone the cron fields read (default UTC; not used by "@every"). */
  zone?: string;
  /** skip (default), buffer_one or allow. */
  overlap?: cv.OverlapName;
  /** How late (ms) a slot still fires after a time without a leader (default 60 s). */
  catchup?: number;
  /** Slot T fires at T plus a share of this, fixed for that slot (ms; default none). */
  jitter?: number;
  /** The schedule is made (or stays) paused. */
  paused?: boolean;
  /** Each job's deadline, this long after its fire (ms). */
  deadlineAfter?: number;
}

/** The job a run-now fired: created is false when its key had fired it already. */
export interface RunNow {
  job: number;
  created: boolean;
  key: string;
}

/** One job of submitMany: its kind, its payload (typed by the kind) and its options. */
export type JobSpec<K extends JobTypes = AnyKinds> = {
  [N in keyof K & string]: SubmitOptions & { kind: N; payload?: K[N] };
}[keyof K & string];

/** What a read may ask: stale reads the answering node's state without asking the leader. */
export interface ReadOptions {
  tenant?: string;
  stale?: boolean;
}

export interface JobsOptions extends ReadOptions {
  state?: string;
  pool?: string;
  /** At most 1,000 (default 100). */
  pageSize?: number;
  oldestFirst?: boolean;
  includePayload?: boolean;
}

export interface WatchOptions {
  tenant?: string;
  /** From the oldest retained event (the default). */
  fromOldest?: boolean;
  /** From this event's sequence number. */
  fromSeq?: number;
  /** End once the tenant has nothing queued or running, nor a job scheduled to run again (a retry backing off, a snooze). */
  untilIdle?: boolean;
  /** Stops the watch (the iteration ends). */
  signal?: AbortSignal;
}

/** The fields of upsertTenant: a field left out keeps its value (a new tenant: its default). */
export interface TenantSettings {
  tier?: cv.TierName;
  multiplier?: number;
  maxRunning?: number;
  maxRunningSm?: number;
  maxRunningMd?: number;
  maxRunningLg?: number;
  /** ms. */
  maxInflightCpu?: number;
  maxQueued?: number;
  maxRunningCritical?: number;
  maxRunningHigh?: number;
  maxRunningDeadline?: number;
  maxPriority?: cv.Priority;
  allowDeadlines?: boolean;
  groupCap?: number;
  groupOrder?: cv.GroupOrderName;
  maxGroups?: number;
  /** "N/PERIOD" ("100/1m"), or "none". */
  rate?: string;
  rateBurst?: number;
  exportMetrics?: boolean;
}

function uint(v: number | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v) || v < 0 || v > 0xffffffff) {
    throw new InvalidArgument(`${what}: ${v} (want a whole number 0..4294967295)`, { field: what });
  }
  return v;
}

/** The request of one submit. */
export function submitRequest(kind: string, payload: unknown, o: SubmitOptions = {}, now = Date.now()): SubmitRequest {
  if (typeof kind !== "string") throw new InvalidArgument(`kind: ${String(kind)} is not a string`, { field: "kind" });
  if (o.key !== undefined && (typeof o.key !== "string" || o.key === "")) {
    throw new InvalidArgument(`key: ${JSON.stringify(o.key)} (want a non-empty string)`, { field: "key" });
  }
  return create(SubmitRequestSchema, {
    tenant: o.tenant ?? "",
    jobType: kind,
    form: cv.jobForm(o.form, kind),
    size: cv.size(o.size ?? "sm"),
    estCostMs: cv.millis(o.cost, "cost"),
    payload: cv.encodePayload(payload),
    group: o.group ?? "",
    pool: o.pool ?? "",
    class: cv.priority(o.priority),
    deadlineMs: cv.deadlineMillis(o.deadline, now),
    delayMs: cv.millis(o.delay, "delay"),
    expireMs: cv.millis(o.expire, "expire"),
    timeoutMs: cv.millis(o.timeout, "timeout"),
    maxAttempts: uint(o.maxAttempts, "maxAttempts") ?? 0,
    idempotencyKey: o.key,
    retryBackoffMs: o.retryBackoff === undefined ? undefined : cv.millis(o.retryBackoff, "retryBackoff"),
    uses: usesOf(o.uses),
  });
}

/** The resources a job uses, sorted by name; fewer than 1 unit (or not an integer) is refused here, the rest by the cluster. */
function usesOf(uses: Record<string, number> | undefined): { resource: string; units: number }[] {
  if (uses === undefined) return [];
  return Object.keys(uses)
    .sort()
    .map((resource) => {
      const units = uses[resource];
      if (typeof units !== "number" || !Number.isInteger(units) || units < 1 || units > 0xffffffff) {
        throw new InvalidArgument(`uses: ${JSON.stringify(resource)}: ${String(units)} (want at least 1 unit)`, { field: "uses" });
      }
      return { resource, units };
    });
}

function submitted(req: SubmitRequest, r: { jobId: bigint; created: boolean }): Submitted {
  return {
    id: cv.num(r.jobId, "job_id"),
    created: r.created,
    state: r.created ? (req.delayMs > 0n ? "scheduled" : "queued") : undefined,
    tenant: req.tenant,
    kind: req.jobType,
    form: cv.formName(req.form),
    pool: req.pool || "default",
    size: cv.sizeName(req.size),
    priority: cv.priorityName(req.class),
    group: req.group,
    key: req.idempotencyKey,
    uses: Object.fromEntries(req.uses.map((u) => [u.resource, u.units])),
  };
}

/**
 * The refusal of a job whose request (size bytes) no node takes (over the
 * largest message): said here, as the permanent refusal it is.
 */
function tooLarge(req: SubmitRequest, size: number): TooLarge | undefined {
  if (size <= MAX_MESSAGE_BYTES) return undefined;
  return new TooLarge(
    `payload: ${req.payload.length} bytes: the job would be a ${size}-byte request, over the largest a node ` +
      `takes (${MAX_MESSAGE_BYTES} bytes; the cluster's max_payload_bytes is lower still)`,
    { code: "INVALID_ARGUMENT", reason: "TOO_LARGE", field: "payload" },
  );
}

/**
 * A client of a barista cluster, through any of its nodes. It connects
 * lazily; close it with close().
 */
export class Client<K extends JobTypes = AnyKinds> {
  private readonly nodes: Nodes;

  constructor(opts: ClientOptions) {
    const n: NodesOptions = {
      token: opts.token,
      tls: opts.tls,
      callTimeout: opts.callTimeout,
      connectTimeout: opts.connectTimeout,
      logger: opts.logger,
    };
    this.nodes = new Nodes(opts.servers, n);
  }

  /** The node addresses, in the order given. */
  get servers(): string[] {
    return [...this.nodes.addrs];
  }

  /** The highest log index this client's writes were answered with (0n before the first). */
  get lastIndex(): bigint {
    return this.nodes.lastIndex;
  }

  /** Closes the connections; later calls throw ClientClosed. */
  close(): void {
    this.nodes.close();
  }

  // -- jobs ------------------------------------------------------------

  /**
   * Submits one job of kind with payload (sent as its JSON; a Uint8Array
   * as its bytes): a function job of that kind, which only a worker that
   * registered the kind is given (opts.form says otherwise). With a key it is sent again to another node when one
   * fails on the way: the same key finds the same job. Without one it is
   * sent once, and an Unavailable error means the job may or may not exist.
   */
  async submit<N extends keyof K & string>(kind: N, payload: K[N], opts: SubmitOptions = {}): Promise<Submitted> {
    const req = submitRequest(kind, payload, opts);
    const big = tooLarge(req, toBinary(SubmitRequestSchema, req).length);
    if (big) throw big;
    const resp: SubmitResponse = await this.nodes.call((node, o) => node.client(ClientService).submit(req, o), {
      idempotent: req.idempotencyKey !== undefined,
    });
    return submitted(req, resp);
  }

  /**
   * Submits many jobs, up to 1,000 (and 3 MiB) a request, each applied on
   * its own: one result per job, in order, a Submitted or the BaristaError
   * that refused it (a refused job stops no other). `defaults` apply to
   * every job that does not name them. A request whose every job has a key
   * is sent again to another node when one fails.
   */
  async submitMany(jobs: Iterable<JobSpec<K>>, defaults: SubmitOptions = {}): Promise<(Submitted | BaristaError)[]> {
    const reqs: SubmitRequest[] = [];
    for (const j of jobs) {
      const { kind, payload, ...o } = j;
      reqs.push(submitRequest(kind, payload, { ...defaults, ...o }));
    }
    const out: (Submitted | BaristaError | undefined)[] = new Array(reqs.length).fill(undefined);
    const sizes = reqs.map((r) => toBinary(SubmitRequestSchema, r).length + 8);
    const sendable: number[] = [];
    reqs.forEach((r, i) => {
      const big = tooLarge(r, sizes[i]);
      if (big) out[i] = big;
      else sendable.push(i);
    });
    let start = 0;
    while (start < sendable.length) {
      let end = start;
      let bytes = 0;
      while (end < sendable.length && end - start < MAX_BATCH && (end === start || bytes + sizes[sendable[end]] <= MAX_BATCH_BYTES)) {
        bytes += sizes[sendable[end]];
        end++;
      }
      const idx = sendable.slice(start, end);
      const chunk = idx.map((i) => reqs[i]);
      const keyed = chunk.every((r) => r.idempotencyKey !== undefined);
      const resp = await this.nodes.call((node, o) => node.client(ClientService).submitBatch({ jobs: chunk }, o), {
        idempotent: keyed,
      });
      idx.forEach((i, k) => {
        const res = resp.results[k];
        out[i] = res === undefined ? new BaristaError("no result for this job in the batch's answer") : (fromResult(res) ?? submitted(reqs[i], res));
      });
      start = end;
    }
    return out as (Submitted | BaristaError)[];
  }

  /** The job, with its payload. */
  async get<T = unknown>(job: JobRef, opts: ReadOptions = {}): Promise<Job<T>> {
    const req = { tenant: opts.tenant ?? "", jobId: cv.jobId(job), read: { stale: opts.stale ?? false } };
    const j = await this.nodes.call((node, o) => node.client(ClientService).getJob(req, o), { idempotent: true });
    return jobFromPb<T>(j, true);
  }

  /**
   * The tenant's jobs from the newest down (oldestFirst: in ID order from
   * the oldest up), of one state and pool if given, fetched a page at a
   * time.
   */
  async *jobs<T = unknown>(opts: JobsOptions = {}): AsyncGenerator<Job<T>> {
    let pageToken = "";
    for (;;) {
      const req = {
        tenant: opts.tenant ?? "",
        state: opts.state ?? "",
        pool: opts.pool ?? "",
        pageSize: uint(opts.pageSize, "pageSize") ?? 100,
        pageToken,
        includePayload: opts.includePayload ?? false,
        oldestFirst: opts.oldestFirst ?? false,
        read: { stale: opts.stale ?? false },
      };
      const resp = await this.nodes.call((node, o) => node.client(ClientService).listJobs(req, o), { idempotent: true });
      for (const j of resp.jobs) yield jobFromPb<T>(j, opts.includePayload ?? false);
      pageToken = resp.nextPageToken;
      if (!pageToken) return;
    }
  }

  /**
   * Cancels a job: a queued or scheduled one at once, a live one by asking
   * its worker (requested). Sent once.
   */
  async cancel(job: JobRef, opts: { tenant?: string } = {}): Promise<Cancel> {
    const req = { tenant: opts.tenant ?? "", jobId: cv.jobId(job) };
    const resp = await this.nodes.call((node, o) => node.client(ClientService).cancelJob(req, o), { idempotent: false });
    return { state: resp.state, requested: resp.cancelRequested };
  }

  /** Why the job is where it is: its reason, with one readable paragraph (text). */
  async explain(job: JobRef, opts: { tenant?: string } = {}): Promise<Explanation> {
    const req = { tenant: opts.tenant ?? "", jobId: cv.jobId(job) };
    return explanationFromPb(await this.nodes.call((node, o) => node.client(ClientService).explainJob(req, o), { idempotent: true }));
  }

  /**
   * The tenant's usage statement over a window of the log, as its document
   * (format "json" or "csv"; docs/fairness.md): by log index (0: the
   * oldest the node can replay, the last it applied) or by cluster time
   * (fromMs inclusive, toMs exclusive). The answering node replays the
   * window from its own log: every node gives the same bytes for the same
   * closed window.
   */
  async usageStatement(opts: EvidenceOptions & { format?: "json" | "csv" } = {}): Promise<string> {
    const req = { tenant: opts.tenant ?? "", window: evidenceWindow(opts), format: opts.format ?? "json" };
    return (await this.nodes.call((node, o) => node.client(ClientService).usageStatement(req, o), { idempotent: true })).document;
  }

  /** usageStatement parsed from its JSON. */
  async statement(opts: EvidenceOptions = {}): Promise<Record<string, unknown>> {
    return JSON.parse(await this.usageStatement({ ...opts, format: "json" })) as Record<string, unknown>;
  }

  /** The tenant's certificate of fairness over a window of the log, as its JSON document (for verifyCertificate, or barista verify). */
  async certificate(opts: EvidenceOptions = {}): Promise<string> {
    const req = { tenant: opts.tenant ?? "", window: evidenceWindow(opts) };
    return (await this.nodes.call((node, o) => node.client(ClientService).fairnessCertificate(req, o), { idempotent: true })).document;
  }

  /** The tenant's running and queued jobs, CPU billed and counters. */
  async usage(opts: ReadOptions & { topGroups?: number } = {}): Promise<Usage> {
    const req = { tenant: opts.tenant ?? "", topGroups: uint(opts.topGroups, "topGroups") ?? 0, read: { stale: opts.stale ?? false } };
    return usageFromPb(await this.nodes.call((node, o) => node.client(ClientService).tenantUsage(req, o), { idempotent: true }));
  }

  /**
   * The tenant's events, in order, as they come: of one job if given
   * (ending after its terminal event), from the oldest retained
   * (fromOldest, the default), from fromSeq, or with fromOldest false from
   * the next new one. untilIdle ends once the tenant has nothing queued or
   * running, nor a job scheduled to run again (a retry backing off, a
   * snooze).
   *
   * The watch follows the events across failures: when its stream breaks
   * or its node fails it moves to the next node at once (and backs off,
   * 0.3 s doubling to 10 s, once every node failed), and resumes after the
   * last event it gave: no gap, no event twice. It throws what retrying
   * cannot clear (PermissionDenied, NotFound, OutOfRange: events pruned
   * before they were read, ...).
   */
  async *watch(job?: JobRef, opts: WatchOptions = {}): AsyncGenerator<Event> {
    const nodes = this.nodes;
    const jobId = job === undefined ? 0n : cv.jobId(job);
    let next = opts.fromSeq ? BigInt(opts.fromSeq) : 0n;
    let oldest = opts.fromSeq ? false : (opts.fromOldest ?? true);
    const untilIdle = opts.untilIdle ?? false;
    let wait = WATCH_BACKOFF_FIRST;
    for (;;) {
      nodes.check();
      if (opts.signal?.aborted) return;
      for (const i of nodes.order()) {
        const node = nodes.nodes[i];
        if (!(await node.ready(nodes.connectTimeout))) {
          nodes.skip(i);
          continue;
        }
        const abort = new AbortController();
        const onAbort = () => abort.abort();
        opts.signal?.addEventListener("abort", onAbort, { once: true });
        const req = { tenant: opts.tenant ?? "", fromSeq: next, fromOldest: oldest, jobId, untilIdle };
        let ended = false;
        try {
          const stream = node.client(ClientService).watchEvents(req, {
            headers: nodes.headers(),
            signal: abort.signal,
            timeoutMs: 0,
            onHeader: (h) => {
              const cursor = h.get(HEADER_WATCH_CURSOR);
              // Where the stream starts: resume from there if it breaks
              // before an event comes.
              if ((next === 0n || oldest) && cursor && /^\d+$/.test(cursor) && BigInt(cursor) > 0n) {
                next = BigInt(cursor);
                oldest = false;
              }
            },
          });
          for await (const ev of stream) {
            if (ev.seq < next) continue; // delivered before the reconnect
            nodes.prefer(i);
            next = ev.seq + 1n;
            oldest = false;
            wait = WATCH_BACKOFF_FIRST;
            yield eventFromPb(ev);
          }
          ended = true;
        } catch (err) {
          if (opts.signal?.aborted) return;
          nodes.check();
          const e = transportError(err);
          if (e instanceof ConnectError && (e.code === Code.Unavailable || e.code === Code.DeadlineExceeded)) {
            nodes.log("debug", `watch broke on ${node.addr} at seq ${next}, resuming on the next node: ${e.message}`);
            nodes.skip(i);
            continue; // the next node, at once
          }
          if (e instanceof ConnectError && (e.code === Code.Aborted || e.code === Code.ResourceExhausted)) {
            break; // turned away for load: after the backoff
          }
          throw fromError(e);
        } finally {
          opts.signal?.removeEventListener("abort", onAbort);
          abort.abort();
        }
        if (ended && (jobId !== 0n || untilIdle)) return; // the job ended, or the tenant is idle
        break; // the node ended the stream (it is stopping): reconnect
      }
      await sleep(wait, opts.signal);
      wait = Math.min(2 * wait, WATCH_BACKOFF_MAX);
    }
  }

  // -- schedules -------------------------------------------------------

  /**
   * Creates or replaces the schedule name (docs/schedules.md): at each
   * slot of spec (five cron fields in opts.zone, a macro such as "@daily",
   * or "@every D" at the multiples of D since the Unix epoch) the cluster
   * submits a job of kind with payload, under the tenant's quotas and fair
   * share, with the key schedule/NAME/SLOT, once per slot whichever node
   * leads. A change takes effect for the slots after it. Sent again to
   * another node after a failure on the way: it sets values.
   */
  async setSchedule<N extends keyof K & string>(name: string, spec: string, kind: N, payload: K[N], opts: ScheduleOptions = {}): Promise<Schedule<K[N]>> {
    const job = submitRequest(kind, payload, { ...opts, key: undefined, deadline: undefined });
    job.tenant = "";
    job.deadlineMs = cv.millis(opts.deadlineAfter, "deadlineAfter");
    const req = {
      tenant: opts.tenant ?? "",
      name,
      spec,
      zone: opts.zone ?? "",
      overlap: cv.overlap(opts.overlap),
      catchupMs: opts.catchup === undefined ? undefined : cv.millis(opts.catchup, "catchup"),
      jitterMs: cv.millis(opts.jitter, "jitter"),
      paused: opts.paused ?? false,
      job,
    };
    return scheduleFromPb(await this.nodes.call((node, o) => node.client(ClientService).setSchedule(req, o), { idempotent: true }));
  }

  /** A schedule, with its next slots (next: how many, default 5). */
  async getSchedule<T = unknown>(name: string, opts: ReadOptions & { next?: number } = {}): Promise<Schedule<T>> {
    const req = { tenant: opts.tenant ?? "", name, next: uint(opts.next, "next") ?? 0, read: { stale: opts.stale ?? false } };
    return scheduleFromPb(await this.nodes.call((node, o) => node.client(ClientService).getSchedule(req, o), { idempotent: true }));
  }

  /** The tenant's schedules by name, fetched a page at a time. */
  async *schedules<T = unknown>(opts: ReadOptions & { pageSize?: number } = {}): AsyncGenerator<Schedule<T>> {
    let pageToken = "";
    for (;;) {
      const req = { tenant: opts.tenant ?? "", pageSize: uint(opts.pageSize, "pageSize") ?? 100, pageToken, read: { stale: opts.stale ?? false } };
      const resp = await this.nodes.call((node, o) => node.client(ClientService).listSchedules(req, o), { idempotent: true });
      for (const s of resp.schedules) yield scheduleFromPb<T>(s);
      pageToken = resp.nextPageToken;
      if (!pageToken) return;
    }
  }

  /** Pauses a schedule: no slot fires, and none is counted missed, until resumeSchedule. */
  async pauseSchedule(name: string, opts: { tenant?: string } = {}): Promise<Schedule> {
    return this.pauseOrResume(name, opts.tenant ?? "", false);
  }

  /** Resumes a schedule: the slots after the resume fire. */
  async resumeSchedule(name: string, opts: { tenant?: string } = {}): Promise<Schedule> {
    return this.pauseOrResume(name, opts.tenant ?? "", true);
  }

  private async pauseOrResume(name: string, tenant: string, resume: boolean): Promise<Schedule> {
    const req = { tenant, name, resume };
    return scheduleFromPb(await this.nodes.call((node, o) => node.client(ClientService).pauseSchedule(req, o), { idempotent: true }));
  }

  /**
   * Fires a schedule once, now, whatever its spec, pause and overlap
   * policy. The key (made here when none is given, before the first try)
   * makes it safe to retry: the same key fires once, and answers the same
   * job with created false.
   */
  async runScheduleNow(name: string, opts: { tenant?: string; key?: string } = {}): Promise<RunNow> {
    if (opts.key !== undefined && (typeof opts.key !== "string" || opts.key === "")) {
      throw new InvalidArgument(`key: ${JSON.stringify(opts.key)} (want a non-empty string)`, { field: "key" });
    }
    const req = { tenant: opts.tenant ?? "", name, key: opts.key ?? randomBytes(8).toString("hex") };
    const resp = await this.nodes.call((node, o) => node.client(ClientService).runScheduleNow(req, o), { idempotent: true });
    return { job: cv.num(resp.jobId, "job_id"), created: resp.created, key: resp.key };
  }

  /** Deletes a schedule; the jobs it fired stay. Sent once. */
  async deleteSchedule(name: string, opts: { tenant?: string } = {}): Promise<void> {
    const req = { tenant: opts.tenant ?? "", name };
    await this.nodes.call((node, o) => node.client(ClientService).deleteSchedule(req, o), { idempotent: false });
  }

  // -- admin -----------------------------------------------------------

  /**
   * Creates a tenant (tier is required then) or changes one (an admin
   * token): a field left out keeps its value (a new tenant: its default),
   * a field given sets it, 0, false and "" included. Tenant.created says it
   * is new. Sent again to another node after a failure on the way: it
   * sets values.
   */
  async upsertTenant(name: string, s: TenantSettings = {}): Promise<Tenant> {
    const caps = create(CapsUpdateSchema, {
      maxRunning: uint(s.maxRunning, "maxRunning"),
      maxRunningSm: uint(s.maxRunningSm, "maxRunningSm"),
      maxRunningMd: uint(s.maxRunningMd, "maxRunningMd"),
      maxRunningLg: uint(s.maxRunningLg, "maxRunningLg"),
      maxQueued: uint(s.maxQueued, "maxQueued"),
      maxRunningCritical: uint(s.maxRunningCritical, "maxRunningCritical"),
      maxRunningHigh: uint(s.maxRunningHigh, "maxRunningHigh"),
      maxRunningDeadline: uint(s.maxRunningDeadline, "maxRunningDeadline"),
      maxInflightCpuMs: s.maxInflightCpu === undefined ? undefined : cv.millis(s.maxInflightCpu, "maxInflightCpu"),
    });
    const req = create(UpsertTenantRequestSchema, {
      name,
      caps,
      tier: s.tier === undefined ? undefined : cv.tier(s.tier),
      maxClass: s.maxPriority === undefined ? undefined : cv.priority(s.maxPriority),
      groupOrder: s.groupOrder === undefined ? undefined : cv.groupOrder(s.groupOrder),
      multiplier: uint(s.multiplier, "multiplier"),
      allowDeadlines: s.allowDeadlines,
      groupCap: uint(s.groupCap, "groupCap"),
      maxGroups: uint(s.maxGroups, "maxGroups"),
      rate: s.rate,
      rateBurst: uint(s.rateBurst, "rateBurst"),
      exportMetrics: s.exportMetrics,
    });
    return tenantFromPb(await this.nodes.call((node, o) => node.client(Admin).upsertTenant(req, o), { idempotent: true }));
  }

  /** A tenant's settings (an admin token); NotFound if there is none. */
  async getTenant(name: string, opts: { stale?: boolean } = {}): Promise<Tenant> {
    const req = { name, read: { stale: opts.stale ?? false } };
    return tenantFromPb(await this.nodes.call((node, o) => node.client(Admin).getTenant(req, o), { idempotent: true }));
  }

  /** Deletes a tenant (an admin token): FailedPrecondition while it has jobs. Sent once. */
  async deleteTenant(name: string): Promise<void> {
    await this.nodes.call((node, o) => node.client(Admin).deleteTenant({ name }, o), { idempotent: false });
  }

  /** Sets a tenant's subscription in a pool (an admin token): at most burst of its jobs assigned or running there. */
  async setSubscription(tenant: string, pool: string, burst: number): Promise<Subscription> {
    const req = { tenant, pool, burst: uint(burst, "burst") };
    return subscriptionFromPb(tenant, pool, await this.nodes.call((node, o) => node.client(Admin).subscriptionSet(req, o), { idempotent: true }));
  }

  /** Removes a tenant's subscription in a pool (an admin token); changed is false if it had none. */
  async deleteSubscription(tenant: string, pool: string): Promise<Subscription> {
    const req = { tenant, pool };
    return subscriptionFromPb(tenant, pool, await this.nodes.call((node, o) => node.client(Admin).subscriptionDelete(req, o), { idempotent: true }));
  }
}


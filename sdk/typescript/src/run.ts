/**
 * One call of a job's function: the job as the function sees it, its
 * context (the AbortSignal of a cancel, snooze), and how the call ended.
 */

import type { Assign } from "./gen/worker_pb.js";
import * as cv from "./convert.js";
import { InvalidArgument } from "./errors.js";
import { MAX_SNOOZE_MS, MIN_SNOOZE_MS } from "./limits.js";


/**
 * Thrown by a job's function (or by ctx.snooze) to end its run "snoozed":
 * the job waits, scheduled, for ms and is tried again, without counting a
 * failure (a downstream service said "not yet"). A delay outside the
 * cluster's bounds (1 s .. 24 h) is held to them, and the worker's log
 * says so, as the Go and Python workers do. A job snoozed max_snoozes
 * times in a row (100) fails.
 */
export class Snooze extends Error {
  /** The delay the run waits, in whole ms, within the bounds. */
  readonly ms: number;
  /** The delay asked for, in whole ms (ms unless it was held to the bounds). */
  readonly asked: number;
  constructor(ms: number) {
    if (typeof ms !== "number" || Number.isNaN(ms) || ms < 0) {
      throw new InvalidArgument(`snooze: ${String(ms)} is not a number of milliseconds`, { field: "snooze" });
    }
    const asked = Math.round(ms);
    const held = Math.min(Math.max(asked, MIN_SNOOZE_MS), MAX_SNOOZE_MS);
    super(`snoozed for ${held / 1000}s`);
    this.name = "Snooze";
    this.ms = held;
    this.asked = asked;
  }
}

/**
 * Thrown by a job's function when no run of the job can ever succeed, on
 * this worker or any other (a payload it cannot read): the job fails at
 * once, with no retry, the message as its error.
 */
export class Unrunnable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "Unrunnable";
  }
}

/** A job as its function is given it. */
export interface WorkerJob<T = unknown> {
  readonly id: number;
  /** 1 for the first run; a retried or snoozed job runs again with a higher one. */
  readonly attempt: number;
  readonly tenant: string;
  /** The job's kind (its job_type). */
  readonly kind: string;
  readonly pool: string;
  readonly size: cv.SizeName;
  /** Its estimated CPU and its timeout (ms; undefined: none). */
  readonly cost: number | undefined;
  readonly timeout: number | undefined;
  /** The payload's bytes. */
  readonly raw: Uint8Array;
  /** The payload decoded as JSON (an empty payload: undefined); a payload that is not JSON fails the job at once. */
  readonly payload: T;
}

/** What a job's function is given besides the job. */
export interface JobContext {
  /**
   * Aborted when the run must stop: the cluster cancelled the job (a
   * cancel: reason "requested", or its timeout: "timeout"), rejected the
   * run, the worker lost contact with the cluster for self_kill_after, or
   * the worker stops past its grace. `signal.reason` says which (a string).
   */
  readonly signal: AbortSignal;
  /** The worker ID of the slot the job runs on. */
  readonly workerId: string;
  /** Ends the run snoozed for ms (held to 1 s .. 24 h): throws a Snooze. */
  snooze(ms: number): never;
}

/** A job's function: what it returns is the job's result; what it throws, its error. */
export type Handler<T = unknown> = (job: WorkerJob<T>, ctx: JobContext) => unknown;

/** How a call ended. */
export interface Result {
  ok: boolean;
  output: string;
  error: string;
  snoozeMs: number;
  /** The snooze the function asked for, when it was held to the bounds (ms). */
  snoozeAsked?: number;
  permanent: boolean;
  cpuMs: number;
}

function returned(value: unknown): Omit<Result, "cpuMs"> {
  const r = { ok: true, output: "", error: "", snoozeMs: 0, permanent: false };
  if (value === undefined || value === null) return r;
  if (typeof value === "string" || value instanceof Uint8Array) return { ...r, output: cv.outputTail(value) };
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    return { ...r, ok: false, error: `the function returned a value JSON cannot encode: ${(e as Error).message}` };
  }
  if (text === undefined) return { ...r, ok: false, error: `the function returned a ${typeof value}: it must return a string, bytes, a JSON value or nothing` };
  return { ...r, output: cv.outputTail(text) };
}

function thrown(e: unknown): Omit<Result, "cpuMs"> {
  const r = { ok: false, output: "", error: "", snoozeMs: 0, permanent: false };
  if (e instanceof Snooze) return { ...r, snoozeMs: e.ms, ...(e.asked !== e.ms ? { snoozeAsked: e.asked } : {}) };
  if (e instanceof Unrunnable) return { ...r, error: cv.outputTail(e.message || "unrunnable"), permanent: true };
  const text = e instanceof Error ? e.stack || `${e.name}: ${e.message}` : `thrown: ${String(e)}`;
  return { ...r, error: cv.outputTail(text) };
}

/** The job of an Assign, as its function sees it. */
export function workerJob<T>(a: Assign): WorkerJob<T> {
  let decoded = false;
  let value: T;
  const job = {
    id: cv.num(a.job, "job"),
    attempt: a.attempt,
    tenant: a.tenant,
    kind: a.jobType,
    pool: a.pool || "default",
    size: cv.sizeName(a.size),
    cost: cv.optMs(a.estCostMs),
    timeout: cv.optMs(a.timeoutMs),
    raw: a.payload,
  };
  Object.defineProperty(job, "payload", {
    enumerable: true,
    get(): T {
      if (!decoded) {
        try {
          value = cv.decodePayload<T>(a.payload);
        } catch (e) {
          throw new Unrunnable(`job ${a.job}: its payload is not JSON (${(e as Error).message})`);
        }
        decoded = true;
      }
      return value;
    },
  });
  return job as WorkerJob<T>;
}

/**
 * One call of a function for one job: onDone(run) is called once the
 * call ended (result is then set). The CPU of a call is the wall time it
 * took: its own CPU cannot be told apart from the rest of the process's.
 */
export class Run {
  readonly started = performance.now();
  result: Result | undefined;
  private readonly ctrl = new AbortController();

  constructor(
    fn: Handler<never>,
    job: WorkerJob<unknown>,
    workerId: string,
    private readonly onDone: (run: Run) => void,
  ) {
    const ctx: JobContext = {
      signal: this.ctrl.signal,
      workerId,
      snooze(ms: number): never {
        throw new Snooze(ms);
      },
    };
    Promise.resolve()
      .then(() => fn(job as WorkerJob<never>, ctx))
      .then(returned, thrown)
      .then((r) => this.finish({ ...r, cpuMs: this.cpuMs() }));
  }

  get done(): boolean {
    return this.result !== undefined;
  }

  /** The CPU so far (the wall time of the call), ms. */
  cpuMs(): number {
    if (this.result) return this.result.cpuMs;
    return Math.floor(performance.now() - this.started);
  }

  /** Asks the call to stop: aborts ctx.signal with the reason. */
  cancel(reason: string): void {
    if (!this.ctrl.signal.aborted) this.ctrl.abort(reason);
  }

  get cancelReason(): string {
    return this.ctrl.signal.aborted ? String(this.ctrl.signal.reason) : "";
  }

  /** Ends the call with result (the first end counts; what the function does later is dropped). */
  finish(result: Result): void {
    if (this.result !== undefined) return;
    this.result = result;
    this.onDone(this);
  }
}

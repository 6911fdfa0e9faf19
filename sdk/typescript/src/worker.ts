/**
 * A worker that runs functions of this process, routed by the job's kind:
 * `concurrency` slots, each a session of its own with the cluster's
 * leader (see slot.ts), all on one stream per server address (mux.ts),
 * run until stop() or SIGTERM.
 */

import { hostname } from "node:os";
import type { Size } from "./gen/types_pb.js";
import { NodeConn, defaultLogger, parseServers, type Logger, type Tls } from "./conn.js";
import type { AnyKinds, JobTypes } from "./client.js";
import * as cv from "./convert.js";
import { InvalidArgument } from "./errors.js";
import type { Handler } from "./run.js";
import { Dialer, MAX_SLOTS, openPlain, type LeaderStream } from "./mux.js";
import { HANDSHAKE_TIMEOUT, Slot } from "./slot.js";
import { within } from "./util.js";

/**
 * How long a stopping worker waits for the cluster to acknowledge the
 * results of the runs it stopped past its grace (ms).
 */
export const STOP_REPORT_WAIT = 5_000;

export interface WorkerOptions<K extends JobTypes = AnyKinds> {
  /** The gRPC addresses (HOST:PORT) of any nodes of the cluster: a list, or a comma-separated string. */
  servers: string | readonly string[];
  /** A worker token whose worker_id binding covers the slots' IDs. */
  token?: string;
  tls?: Tls;
  /** The pool it serves (default: the pool default); a pool the cluster does not hold stops it (NotFound). */
  pool?: string;
  /** The largest job size it runs (default sm). */
  size?: cv.SizeName;
  /**
   * The jobs it runs at once (default 1, at most 1,024): slots ID-1 .. ID-N,
   * each a worker of its own to the cluster, on one stream per server address.
   */
  concurrency?: number;
  /** The worker's ID (default HOST-PID); its slots are ID-1 .. ID-N. */
  id?: string;
  /** Functions by kind, as register() adds them. */
  kinds?: { [N in keyof K & string]?: Handler<K[N]> };
  /** Where the worker logs (console at warn and above by default). */
  logger?: Logger;
}

export interface RunOptions {
  /**
   * Whether SIGTERM and SIGINT stop the worker (default true): the first
   * stops it gracefully with `grace`, a second stops the running jobs at
   * once.
   */
  handleSignals?: boolean;
  /** The grace a signal gives the running jobs (ms, default 30,000). */
  grace?: number;
}

function checkId(id: string): void {
  const bytes = Buffer.byteLength(id, "utf8");
  if (!id || bytes + 4 > 256) throw new InvalidArgument(`id: ${JSON.stringify(id)} (want 1..251 bytes: its slots add -N)`, { field: "id" });
  for (const [i, ch] of [...id].entries()) {
    const c = ch.codePointAt(0) as number;
    if (/\s/u.test(ch) || c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
      throw new InvalidArgument(`id: ${JSON.stringify(id)} has ${JSON.stringify(ch)} at character ${i}`, { field: "id" });
    }
  }
}

function checkPool(pool: string): void {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(pool)) {
    throw new InvalidArgument(`pool: ${JSON.stringify(pool)} (want 1 to 63 of a-z, 0-9 and -, not starting with -)`, { field: "pool" });
  }
}

/**
 * A worker that runs functions of this process, routed by the job's kind.
 *
 *     const worker = new Worker<MyKinds>({ servers, token, size: "md", concurrency: 4 });
 *     worker.register("resize", async (job, ctx) => resize(job.payload, ctx.signal));
 *     await worker.run();     // until worker.stop() or SIGTERM
 *
 * The worker tells the cluster the kinds it has functions for, and a
 * cluster at feature level 8 gives it only jobs of those kinds (and jobs
 * submitted with no form, which any worker runs). A job it is handed anyway
 * that it does not run (a function job of another kind, a command job)
 * ends its run unknown_kind: the job goes back to the queue for a worker
 * that runs it, with no failure counted. A job of no form whose kind has
 * no function, or any such job from a cluster below level 8, fails at
 * once, with no retry, its error naming the kind and the kinds the worker
 * has.
 */
export class Worker<K extends JobTypes = AnyKinds> {
  readonly servers: string[];
  readonly token: string | undefined;
  readonly pool: string | undefined;
  readonly size: cv.SizeName;
  readonly wireSize: Size;
  readonly id: string;
  readonly log: Logger;
  private readonly tls: Tls;
  private readonly functions = new Map<string, Handler<never>>();
  private readonly conns = new Map<string, NodeConn>();
  /** The slots: one session each (the one place that decides how slots map to sessions). */
  private readonly slots: Slot[];
  private readonly dialer: Dialer | undefined;
  private drainingFlag = false;
  private readonly stopCtrl = new AbortController();
  private readonly drainCtrl = new AbortController();
  private running: Promise<void> | undefined;
  private ran = false;

  constructor(opts: WorkerOptions<K>) {
    this.servers = parseServers(opts.servers);
    this.token = opts.token || undefined;
    this.tls = opts.tls;
    this.wireSize = cv.size(opts.size ?? "sm");
    this.size = cv.sizeName(this.wireSize);
    if (opts.pool !== undefined && opts.pool !== "default") checkPool(opts.pool);
    this.pool = opts.pool === undefined || opts.pool === "default" ? undefined : opts.pool;
    const n = opts.concurrency ?? 1;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SLOTS) {
      throw new InvalidArgument(`concurrency: ${n} (want 1 to ${MAX_SLOTS})`, { field: "concurrency" });
    }
    this.id = opts.id ?? `${hostname().split(".")[0] || "node"}-${process.pid}`;
    checkId(this.id);
    this.log = opts.logger ?? defaultLogger;
    this.slots = Array.from({ length: n }, (_, k) => new Slot(this as Worker, `${this.id}-${k + 1}`, k + 1));
    // The slots of a worker of many share a stream per server address.
    this.dialer = n > 1 ? new Dialer(HANDSHAKE_TIMEOUT, this.log) : undefined;
    for (const [kind, fn] of Object.entries(opts.kinds ?? {})) {
      if (fn !== undefined) this.register(kind as keyof K & string, fn as Handler<K[keyof K & string]>);
    }
  }

  /** The worker IDs of the slots (ID-1 .. ID-N). */
  get workerIds(): string[] {
    return this.slots.map((s) => s.id);
  }

  /** The kinds it has functions for, sorted. */
  get kinds(): string[] {
    return [...this.functions.keys()].sort();
  }

  /** How many slots hold a job. */
  get busy(): number {
    return this.slots.filter((s) => s.cur !== undefined).length;
  }

  get draining(): boolean {
    return this.drainingFlag;
  }

  get stopped(): boolean {
    return this.stopCtrl.signal.aborted;
  }

  /** Aborted when the worker gives up on its slots (after the grace and the wait for results, or a refusal). */
  get stopSignal(): AbortSignal {
    return this.stopCtrl.signal;
  }

  /** Aborted when the worker starts to stop (and when it gives up). */
  get drainSignal(): AbortSignal {
    return this.drainCtrl.signal;
  }

  private giveUp(): void {
    this.drainCtrl.abort();
    this.stopCtrl.abort();
    for (const s of this.slots) s.halt();
  }

  /**
   * Makes fn run every job of kind. What fn returns (a string, bytes, a
   * JSON value, or nothing) is the job's result; what it throws fails the
   * run (retried as max_attempts allows), but Snooze (ctx.snooze) and
   * Unrunnable (failed with no retry).
   */
  register<N extends keyof K & string>(kind: N, fn: Handler<K[N]>): this {
    if (typeof kind !== "string") throw new InvalidArgument(`kind: ${String(kind)} is not a string`, { field: "kind" });
    if (this.functions.has(kind)) throw new InvalidArgument(`kind '${kind}' already has a function`, { field: "kind" });
    if (typeof fn !== "function") throw new InvalidArgument(`the function for kind '${kind}' is not a function`, { field: "kind" });
    this.functions.set(kind, fn as Handler<never>);
    return this;
  }

  /** The function of a kind. */
  handler(kind: string): Handler<never> | undefined {
    return this.functions.get(kind);
  }

  /** The connection to a node (a server of the list, or the leader a Redirect names). */
  node(addr: string): NodeConn {
    let c = this.conns.get(addr);
    if (c === undefined) {
      c = new NodeConn(addr, this.tls);
      this.conns.set(addr, c);
    }
    return c;
  }

  /**
   * Slot k's stream to node: its slot of the shared stream, or a stream of
   * its own for a worker of one slot; the wait for it ends when signal
   * aborts.
   */
  open(node: NodeConn, k: number, headers: Record<string, string>, signal: AbortSignal): Promise<LeaderStream> {
    if (this.dialer === undefined) return Promise.resolve(openPlain(node, headers));
    return this.dialer.open(node, k, headers, signal);
  }

  /** The time (ms) to the slots' next heartbeat of interval: at once for all slots of a shared stream. */
  untilBeat(interval: number): number {
    return this.dialer !== undefined ? this.dialer.untilBeat(interval) : interval;
  }

  /**
   * Serves jobs until stop(). With handleSignals (the default), SIGTERM
   * and SIGINT stop the worker gracefully with `grace`: it takes no new
   * job, lets the running ones finish, and fails (for a retry elsewhere)
   * those still running at the end of the grace; a second signal does
   * that at once. Rejects with the cluster's refusal when it refuses the
   * worker in a way no retry can change: Unauthenticated, PermissionDenied
   * (the token's worker_id binding does not cover the slots' IDs),
   * NotFound (a pool it does not hold), InvalidArgument.
   */
  run(opts: RunOptions = {}): Promise<void> {
    if (this.functions.size === 0) {
      return Promise.reject(new InvalidArgument("the worker has no function: register one with worker.register(kind, fn)"));
    }
    if (this.ran) return Promise.reject(new Error("a Worker runs once: make a new one to run again"));
    this.ran = true;
    const grace = opts.grace ?? 30_000;
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      signals++;
      if (signals === 1) {
        this.log("info", `signal ${sig}: stopping; the running jobs have ${grace / 1000}s to finish (a second signal stops them now)`);
        void this.stop({ grace });
      } else {
        this.log("info", `second signal ${sig}: stopping the running jobs now`);
        this.graceOver(0);
      }
    };
    const handle = opts.handleSignals ?? true;
    if (handle) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    this.log("info", `worker starting: slots=${this.workerIds.join(",")} size=${this.size} pool=${this.pool ?? "default"} kinds=${this.kinds.join(",")}`);
    this.running = (async () => {
      try {
        const serving = this.slots.map((s) => s.serve());
        try {
          await Promise.all(serving);
        } catch (e) {
          // A refusal no retry changes: the other slots stop too.
          this.giveUp();
          await Promise.allSettled(serving);
          throw e;
        }
      } finally {
        if (handle) {
          process.off("SIGTERM", onSignal);
          process.off("SIGINT", onSignal);
        }
        this.drainCtrl.abort();
        this.stopCtrl.abort();
        this.dialer?.close();
        for (const c of this.conns.values()) c.close();
        this.conns.clear();
        this.log("info", "worker stopped");
      }
    })();
    return this.running;
  }

  private graceOver(grace: number): void {
    for (const s of this.slots) s.abandon(grace);
  }

  /**
   * Stops the worker: no slot takes a new job; the running jobs have
   * `grace` ms (default 30,000) to finish and be reported; those still
   * running then are asked to stop (ctx.signal) and reported failed, to be
   * retried. Resolves once run() has returned.
   */
  async stop(opts: { grace?: number } = {}): Promise<void> {
    const grace = opts.grace ?? 30_000;
    this.drainingFlag = true;
    this.drainCtrl.abort();
    const running = this.running;
    if (running === undefined) return;
    const done = running.then(() => true, () => true);
    for (const s of this.slots) s.poke();
    if (!(await within(done, grace))) {
      this.graceOver(grace);
      const reported = await within(done, STOP_REPORT_WAIT);
      if (!reported) this.giveUp();
    }
    await done;
  }
}

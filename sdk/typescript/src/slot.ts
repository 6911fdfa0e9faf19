/**
 * One slot of a Worker: one session at a time with the cluster's leader
 * and one job at most, speaking the worker protocol of docs/workers.md
 * ("Protocol"): Hello, Welcome or Redirect, Ready with a credit, Assign,
 * Started, heartbeats with the CPU so far, Finished; cancel orders,
 * rejects, and the self-kill of a run cut off from the cluster.
 */

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { JobForm, Outcome } from "./gen/types_pb.js";
import {
  JobFinishedSchema,
  type Assign,
  type CancelOrder,
  type FinishedAck,
  type JobFinished,
  type LeaderMessage,
} from "./gen/worker_pb.js";
import * as cv from "./convert.js";
import { fromError, isNotLeader, makeError } from "./errors.js";
import { MAX_SNOOZE_MS, MIN_SNOOZE_MS } from "./limits.js";
import { Silent, type LeaderStream, type Out } from "./mux.js";
import { Run, workerJob } from "./run.js";
import { sleep } from "./util.js";
import type { Worker } from "./worker.js";

/** The reconnect backoff (ms): 100 ms doubling to 2 s, from the start again after a session that got its Welcome. */
export const MIN_BACKOFF = 100;
export const MAX_BACKOFF = 2_000;
/** How long a server has to answer Hello with Welcome or Redirect (ms). */
export const HANDSHAKE_TIMEOUT = 3_000;

/** The version a slot's Hello names. */
export const VERSION = "typescript-1";

/**
 * The refusals of a session that no retry can change: a token the cluster
 * does not know, one that may not be this worker, a pool the cluster does
 * not hold, a Hello it does not take. Worker.run() throws them.
 */
const REFUSALS = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.NotFound, Code.InvalidArgument]);

class Redirect extends Error {
  constructor(readonly leaderId: string, readonly addr: string) {
    super(`redirected to ${leaderId} at ${addr}`);
  }
}

/** Ends a session once a stopping slot is empty. */
class Drained extends Error {}

/**
 * How long a session may go without an acknowledged heartbeat before the
 * slot gives up on it (ms): four heartbeats (at least a second), and at
 * most half the self-kill deadline, so that a slot cut off from a leader
 * finds the next one before it stops its run.
 */
export function silenceLimit(interval: number, selfKill: number): number {
  let limit = Math.max(4 * interval, 1000);
  if (selfKill > 0) limit = Math.min(limit, selfKill / 2);
  return limit;
}

/** A slot's one job: its Assign, its run, and what was reported. */
class SlotJob {
  run: Run | undefined;
  cancelling = false;
  /** Sent, not yet acknowledged. */
  finished: JobFinished | undefined;
  /** Rejected or cut off: no result is reported. */
  dropped = false;
  startSent = false;
  startTimer: NodeJS.Timeout | undefined;

  constructor(readonly assign: Assign) {}
}

export class Slot {
  cur: SlotJob | undefined;
  private credit = BigInt(Date.now()) * 1_000_000n;
  private seq = 0n;
  private readonly sentAt = new Map<bigint, number>();
  private contact = 0;
  private failed = "";
  private leader = "";
  private interval = 5_000;
  private selfKill = 25_000;
  private welcomes = 0;
  private foldReady = false;
  private offered = false;
  private startDelay = 0;
  private snoozeOk = false;
  /** This session's leader routes by kind and takes unknown_kind (Welcome.kinds). */
  private kindsOk = false;
  /** The live session's writer, once it is welcomed. */
  private send: ((m: Out) => void) | undefined;
  /** Ends the live session (welcomed or not) with an error. */
  private end: ((err: Error) => void) | undefined;

  /** k: the slot's number on a shared stream, 1..N. */
  constructor(private readonly w: Worker, readonly id: string, readonly k: number) {}

  private doneDraining(): boolean {
    return this.w.draining && this.cur === undefined;
  }

  /** Wakes the slot: offers it (Ready), or ends the session of a stopping empty slot. */
  poke(): void {
    if (this.doneDraining()) {
      this.end?.(new Drained());
      return;
    }
    if (this.send) this.offer();
  }

  private nextServer(i: number): string {
    if (this.leader) {
      const addr = this.leader;
      this.leader = "";
      return addr;
    }
    const servers = this.w.servers;
    let addr = servers[i % servers.length];
    if (addr === this.failed && servers.length > 1) addr = servers[(i + 1) % servers.length];
    return addr;
  }

  /**
   * Connects and serves until the worker stops and the slot is empty. A
   * failed session is retried with backoff (ABORTED too: another session
   * of this ID is still live), but a refusal no retry can change, which is
   * thrown.
   */
  async serve(): Promise<void> {
    const watchdog = setInterval(() => this.watchdog(), Math.max(this.selfKill / 20, 10));
    let backoff = MIN_BACKOFF;
    let i = 0;
    try {
      while (!this.doneDraining() && !this.w.stopped) {
        const addr = this.nextServer(i++);
        const welcomes = this.welcomes;
        let err: unknown;
        try {
          await this.session(addr);
        } catch (e) {
          if (!(e instanceof Drained)) err = e;
        }
        this.failed = err !== undefined ? addr : "";
        if (this.welcomes !== welcomes) backoff = MIN_BACKOFF;
        if (this.doneDraining() || this.w.stopped) return;
        if (err instanceof ConnectError && REFUSALS.has(err.code)) {
          const refusal = fromError(err);
          throw makeError(refusal.code, `worker '${this.id}': ${addr} refuses it: ${refusal.rawMessage}`, {
            reason: refusal.reason, field: refusal.field, metadata: refusal.metadata, cause: err,
          });
        }
        let wait = backoff;
        if (err instanceof Redirect) {
          this.w.log("info", `redirected to the leader: leader=${err.leaderId} addr=${err.addr}`);
          wait = 50;
        } else if (isNotLeader(err)) {
          this.w.log("info", `the leader changed; reconnecting: worker=${this.id} server=${addr} retry_in=${wait / 1000}s`);
          backoff = Math.min(2 * backoff, MAX_BACKOFF);
        } else {
          const why = err instanceof Error ? err.message : "the session ended";
          this.w.log("warn", `stream to the cluster ended; reconnecting: worker=${this.id} server=${addr} error=${why} retry_in=${wait / 1000}s`);
          backoff = Math.min(2 * backoff, MAX_BACKOFF);
        }
        // An empty slot of a stopping worker stops waiting at once.
        await sleep(wait, this.cur === undefined ? this.w.drainSignal : this.w.stopSignal);
      }
    } finally {
      clearInterval(watchdog);
    }
  }

  /** Stops the run when contact is older than self_kill_after, whether or not a stream is up. */
  private watchdog(): void {
    const j = this.cur;
    if (j && j.finished === undefined && !j.dropped && j.run && this.contact && !j.run.done) {
      const stale = performance.now() - this.contact;
      if (stale > this.selfKill) {
        this.drop(`no contact with the cluster for ${(stale / 1000).toFixed(1)}s (self_kill_after ${this.selfKill / 1000}s)`);
      }
    }
  }

  /** Stops the current run at once and drops its result (a Reject, or no contact): the slot frees once the function returns. */
  private drop(reason: string): void {
    const j = this.cur;
    if (!j || j.dropped || j.finished !== undefined) return;
    j.dropped = true;
    this.w.log("warn", `stopping job, its result dropped: job=${j.assign.job} attempt=${j.assign.attempt} reason=${reason}`);
    if (!j.run || j.run.done) {
      this.cur = undefined;
      this.poke();
    } else {
      j.run.cancel(reason);
    }
  }

  /** A call ended: a dropped run frees the slot at once; another is reported by the live session (or the next). */
  private runDone(run: Run): void {
    const j = this.cur;
    if (!j || j.run !== run) return;
    if (j.dropped) {
      this.cur = undefined;
      this.poke();
      return;
    }
    if (this.send) this.finish(run);
  }

  // -- one session -----------------------------------------------------

  /**
   * The Hello of a session: who the slot is, the kinds it has functions
   * for (a function for "", the jobs of no type, needs no naming: every
   * worker is given jobs of no form), and the job it still runs.
   */
  private hello(): Out {
    const running = [];
    const j = this.cur;
    if (j && !j.dropped) {
      running.push({ job: j.assign.job, attempt: j.assign.attempt, cpuMs: BigInt(j.run ? j.run.cpuMs() : 0), finished: j.finished !== undefined });
    }
    return {
      msg: {
        case: "hello",
        value: {
          workerId: this.id, size: this.w.wireSize, version: VERSION, pool: this.w.pool ?? "", running,
          kinds: this.w.kinds.filter((k) => k !== ""),
        },
      },
    };
  }

  private async session(addr: string): Promise<void> {
    const node = this.w.node(addr);
    const abort = new AbortController();
    let endErr: Error | undefined;
    let stream: LeaderStream | undefined;
    this.end = (err: Error) => {
      if (endErr === undefined) endErr = err;
      abort.abort(err);
      stream?.interrupt(err);
    };
    const headers: Record<string, string> = this.w.token ? { authorization: "Bearer " + this.w.token } : {};
    let ticker: NodeJS.Timeout | undefined;
    let failed: unknown;
    try {
      if (this.doneDraining()) throw new Drained();
      stream = await this.w.open(node, this.k, headers, abort.signal);
      if (endErr !== undefined) throw endErr;
      const s = stream;
      s.send(this.hello());
      let timer: NodeJS.Timeout | undefined;
      const first = await Promise.race([
        s.next(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Silent(`no answer from ${addr} within ${HANDSHAKE_TIMEOUT / 1000}s`)), HANDSHAKE_TIMEOUT);
        }),
      ]).finally(() => clearTimeout(timer));
      if (first.done) throw new Error(`${addr} closed the stream at Hello`);
      const m = first.value.msg;
      if (m.case === "redirect") {
        this.leader = m.value.leaderAddr;
        throw new Redirect(m.value.leaderId, m.value.leaderAddr);
      }
      if (m.case !== "welcome") throw new Error("the leader's first message is not Welcome");
      const w = m.value;
      if (!w.jobTypes) {
        // An earlier build's leader does not name a job's kind: no job
        // could be routed. Wait for a leader that does.
        throw new Error("the leader is of an earlier build: its assignments do not name a job's kind, which this worker routes by; waiting for an upgraded leader");
      }
      this.interval = Number(w.heartbeatIntervalMs) || 5_000;
      this.selfKill = Number(w.selfKillAfterMs) || 25_000;
      this.contact = performance.now();
      this.welcomes++;
      this.foldReady = w.finishReady;
      this.offered = false;
      this.startDelay = Math.max(0, Number(w.startedDelayMs));
      this.snoozeOk = w.snooze;
      this.kindsOk = w.kinds;
      this.w.log("info", `connected: worker=${this.id} server=${addr} leader=${w.leaderId} pool=${this.w.pool ?? "default"} ` +
        `heartbeat=${this.interval / 1000}s self_kill_after=${this.selfKill / 1000}s`);
      this.send = (msg: Out) => s.send(msg);

      for (const c of w.pendingCancels) this.cancel(c);
      this.resume();

      const silence = silenceLimit(this.interval, this.selfKill);
      // The slots of a shared stream beat together, at the Worker's
      // phase, so that their heartbeats leave in one go.
      const untilBeat = () => this.w.untilBeat(this.interval);
      const beat = () => {
        const quiet = performance.now() - this.contact;
        if (quiet > silence) {
          // The stream may look open while the leader is gone or cut
          // off: reconnect well before the self-kill.
          this.end?.(new Silent(`no heartbeat acknowledged for ${(quiet / 1000).toFixed(1)}s (limit ${silence / 1000}s)`));
          return;
        }
        this.send?.(this.heartbeat());
        ticker = setTimeout(beat, untilBeat());
      };
      ticker = setTimeout(beat, untilBeat());

      this.poke();
      for (;;) {
        const r = await s.next();
        if (r.done) throw new Error("the leader closed the stream");
        this.handle(r.value);
      }
    } catch (e) {
      failed = endErr ?? e;
      throw failed;
    } finally {
      clearTimeout(ticker);
      this.send = undefined;
      this.end = undefined;
      stream?.close(failed instanceof Drained ? undefined : failed);
      abort.abort();
    }
  }

  /**
   * After a Welcome: a run whose Started has not gone out sends it now if
   * this leader lets it wait no more (or the run has lasted its delay),
   * else when the delay is up; then an unacknowledged result is sent again.
   */
  private resume(): void {
    const j = this.cur;
    if (!j || !this.send) return;
    if (!j.startSent && !j.dropped && j.run) {
      clearTimeout(j.startTimer);
      j.startTimer = undefined;
      const left = this.startDelay - (performance.now() - j.run.started);
      if (this.startDelay === 0 || (left <= 0 && j.finished === undefined)) {
        // (A reported run keeps its startUnreported for a leader that takes it.)
        j.startSent = true;
        this.send(started(j.assign));
      } else if (j.finished === undefined) {
        j.startTimer = setTimeout(() => this.startDue(j), left);
      }
    }
    if (j.finished !== undefined) this.send(this.report(j));
    else if (j.run?.done && !j.dropped) this.finish(j.run);
  }

  private startDue(j: SlotJob): void {
    if (this.cur === j && !j.startSent && j.finished === undefined && !j.dropped && this.send) {
      j.startSent = true;
      this.send(started(j.assign));
    }
  }

  private nextCredit(): bigint {
    this.credit += 1n;
    this.offered = true;
    return this.credit;
  }

  /** Sends Ready if the slot is free. */
  private offer(): void {
    if (this.cur !== undefined || this.w.draining || this.offered || !this.send) return;
    this.send({ msg: { case: "ready", value: { credit: this.nextCredit() } } });
  }

  /**
   * The message that reports j's result: with the next Ready folded in
   * when the leader takes it and the slot is not stopping, and marked
   * start_unreported when no Started of the run went out.
   */
  private report(j: SlotJob): Out {
    clearTimeout(j.startTimer);
    const fin = create(JobFinishedSchema, { ...(j.finished as JobFinished), startUnreported: !j.startSent, readyCredit: 0n });
    if (this.foldReady && !this.w.draining && !this.offered) fin.readyCredit = this.nextCredit();
    return { msg: { case: "finished", value: fin } };
  }

  private heartbeat(): Out {
    this.seq++;
    const hb = { seq: this.seq, job: 0n, attempt: 0, cpuMs: 0n };
    const j = this.cur;
    if (j && j.finished === undefined && !j.dropped && j.run) {
      hb.job = j.assign.job;
      hb.attempt = j.assign.attempt;
      hb.cpuMs = BigInt(j.run.cpuMs());
    }
    this.sentAt.set(this.seq, performance.now());
    for (const s of this.sentAt.keys()) if (s + 64n < this.seq) this.sentAt.delete(s);
    return { msg: { case: "heartbeat", value: hb } };
  }

  private handle(m: LeaderMessage): void {
    switch (m.msg.case) {
      case "assign":
        this.start(m.msg.value);
        break;
      case "cancel":
        this.cancel(m.msg.value);
        break;
      case "heartbeatAck": {
        const t = this.sentAt.get(m.msg.value.seq);
        if (t !== undefined && t > this.contact) this.contact = t;
        break;
      }
      case "reject": {
        const r = m.msg.value;
        const j = this.cur;
        if (j && j.assign.job === r.job && j.assign.attempt === r.attempt) {
          if (j.finished !== undefined) {
            this.w.log("warn", `the leader rejected this run's result; dropping it: job=${r.job} attempt=${r.attempt} reason=${r.reason}`);
            this.cur = undefined;
          } else {
            this.drop("rejected by the leader: " + r.reason);
          }
          this.poke();
        }
        break;
      }
      case "finishedAck":
        this.acked(m.msg.value);
        this.poke();
        break;
      case "welcome":
      case "redirect":
        throw new Error("unexpected Welcome or Redirect within a session");
    }
  }

  private acked(f: FinishedAck): void {
    const j = this.cur;
    if (j && j.finished !== undefined && j.assign.job === f.job && j.assign.attempt === f.attempt) this.cur = undefined;
  }

  private cancel(c: CancelOrder): void {
    const j = this.cur;
    if (!j || j.assign.job !== c.job || j.assign.attempt !== c.attempt || j.cancelling || j.finished !== undefined || j.dropped || !j.run) {
      return;
    }
    j.cancelling = true;
    this.w.log("info", `cancelling job: job=${c.job} attempt=${c.attempt} reason=${c.reason}`);
    j.run.cancel(c.reason || "requested");
  }

  private start(a: Assign): void {
    if (a.finished) this.acked(a.finished); // the Assign answers a Finished with a folded Ready
    this.offered = false;
    if (this.cur !== undefined) {
      this.w.log("error", `assigned a job while busy; ignoring it: job=${a.job}`);
      return;
    }
    const j = new SlotJob(a);
    this.cur = j;
    const fn = this.w.handler(a.jobType);
    if (fn === undefined || (a.form === JobForm.COMMAND && this.kindsOk)) {
      const { msg, finished } = unrunnable(a, this.w, this.id, this.kindsOk);
      this.w.log("warn", `job could not start: job=${a.job} outcome=${Outcome[finished.outcome].toLowerCase()} ${msg}`);
      if (this.startDelay === 0) {
        j.startSent = true;
        this.send?.(started(a));
      }
      j.finished = finished;
      this.send?.(this.report(j));
      return;
    }
    j.run = new Run(fn, workerJob(a), this.id, (run) => this.runDone(run));
    this.w.log("info", `job started: job=${a.job} attempt=${a.attempt} tenant=${a.tenant} kind=${a.jobType}`);
    if (this.startDelay > 0) {
      j.startTimer = setTimeout(() => this.startDue(j), this.startDelay);
      return;
    }
    j.startSent = true;
    this.send?.(started(a));
  }

  /** Reports a run that ended. */
  private finish(run: Run): void {
    const j = this.cur;
    if (!j || j.run !== run || j.finished !== undefined || !run.result) return;
    if (j.dropped) {
      this.cur = undefined; // its result is not the cluster's any more
      this.poke();
      return;
    }
    const res = { ...run.result };
    let outcome: Outcome;
    if (j.cancelling) outcome = Outcome.CANCELLED;
    else if (res.snoozeMs && this.snoozeOk) {
      outcome = Outcome.SNOOZED;
      if (res.snoozeAsked !== undefined) {
        this.w.log("warn", `snooze held to the cluster's bounds: job=${j.assign.job} asked=${res.snoozeAsked}ms snooze=${res.snoozeMs}ms ` +
          `min=${MIN_SNOOZE_MS}ms max=${MAX_SNOOZE_MS}ms`);
      }
    } else if (res.snoozeMs) {
      // An earlier build's leader cannot snooze a job: the run counts as
      // failed, saying so.
      res.error += `\nthe run asked to be snoozed ${res.snoozeMs / 1000}s, but the leader (an earlier build) cannot snooze a job: the run counts as failed`;
      outcome = Outcome.FAILED;
    } else outcome = res.ok ? Outcome.OK : Outcome.FAILED;
    j.finished = create(JobFinishedSchema, {
      job: j.assign.job,
      attempt: j.assign.attempt,
      outcome,
      cpuMs: BigInt(res.cpuMs),
      exitCode: res.ok || outcome === Outcome.SNOOZED ? 0 : 1,
      stderrTail: res.error,
      stdoutTail: res.output,
      permanent: res.permanent && outcome === Outcome.FAILED,
      snoozeMs: outcome === Outcome.SNOOZED ? BigInt(res.snoozeMs) : 0n,
    });
    this.w.log("info", `job ended: job=${j.assign.job} attempt=${j.assign.attempt} outcome=${Outcome[outcome].toLowerCase()} cpu_ms=${res.cpuMs}`);
    this.send?.(this.report(j));
  }

  /**
   * Ends the current run as failed now (the worker stops and its grace has
   * passed): the function is asked to stop, the run is reported with its
   * CPU so far, and whatever the function does later is dropped.
   */
  abandon(grace: number): void {
    const j = this.cur;
    if (!j || !j.run || j.finished !== undefined || j.dropped) return;
    const cpuMs = j.run.cpuMs();
    j.run.cancel("worker stopping");
    j.run.finish({ ok: false, output: "", error: `the worker stopped: its grace of ${grace / 1000}s ended before the run did`, snoozeMs: 0, permanent: false, cpuMs });
  }

  /** Ends the live session at once (the worker gives up waiting). */
  halt(): void {
    this.end?.(new Drained());
  }
}

/**
 * The end of a job this worker does not run (a function job of a kind it
 * has no function for, a command job), and why. To a leader that routes
 * by kind (Welcome.kinds) it is not a run of the job: outcome
 * unknown_kind, and the cluster gives the job to a worker that runs it. A
 * job of no form (a client of an earlier build), or any job of a leader
 * that does not route by kind, fails with no retry, as before kinds: no
 * run of it can succeed here.
 */
export function unrunnable(a: Assign, w: { kinds: string[]; pool: string | undefined }, slotId: string, kindsOk: boolean): { msg: string; finished: JobFinished } {
  let msg: string;
  if (a.form === JobForm.COMMAND) {
    msg = `job ${a.job} is a command job, which this worker of functions does not run (worker ${slotId}, pool ${w.pool ?? "default"})`;
  } else {
    const kinds = w.kinds.map((k) => `'${k}'`).join(", ") || "none";
    msg = `no function for kind '${a.jobType}' on this worker (worker ${slotId}, pool ${w.pool ?? "default"}); its functions are for the kinds ${kinds}`;
  }
  const finished = kindsOk && a.form !== JobForm.JOB_FORM_UNSPECIFIED
    ? create(JobFinishedSchema, { job: a.job, attempt: a.attempt, outcome: Outcome.UNKNOWN_KIND, cpuMs: 0n, stderrTail: cv.outputTail(msg) })
    : create(JobFinishedSchema, { job: a.job, attempt: a.attempt, outcome: Outcome.FAILED, exitCode: 127, stderrTail: cv.outputTail(msg), permanent: true });
  return { msg, finished };
}

function started(a: Assign): Out {
  return { msg: { case: "started", value: { job: a.job, attempt: a.attempt } } };
}

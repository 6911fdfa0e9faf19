/**
 * The worker's side of the protocol against a scripted leader in this
 * process (a gRPC server whose every message the test writes): snoozes,
 * redirects, rejects, the self-kill, Started held back with a Ready folded
 * into the Finished, cancels pending at Welcome, and a reconnect that
 * resumes the run; the slots of a Worker on one stream, and a stream each
 * against a leader that does not multiplex.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { StatusSchema } from "../src/gen/rpc_status_pb.js";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { JobForm, Outcome, Size } from "../src/gen/types_pb.js";
import {
  LeaderMessageSchema,
  Worker as WorkerService,
  type Hello,
  type LeaderMessage,
  type WorkerMessage,
} from "../src/gen/worker_pb.js";
import { Snooze, Worker } from "../src/index.js";
import { Queue } from "../src/util.js";
import { sleep } from "./cluster.js";

type LeaderInit = MessageInitShape<typeof LeaderMessageSchema>["msg"];

/** One stream a worker opened: what it sent, and what to send it. */
class Session {
  readonly inbox = new Queue<WorkerMessage | null>();
  readonly outbox = new Queue<LeaderMessage | null>();
  /** slot: the first Hello's (a multiplexed stream's). */
  constructor(readonly hello: Hello, readonly slot = 0) {}

  send(msg: LeaderInit, slot = 0): void {
    this.outbox.push(create(LeaderMessageSchema, { msg, slot }));
  }

  /** Ends the stream from the leader's side. */
  close(): void {
    this.outbox.push(null);
  }

  /** The next message of the worker that is not one of skip: it must be of kind. */
  async expect<K extends NonNullable<WorkerMessage["msg"]["case"]>>(kind: K, skip: string[] = ["heartbeat"], timeout = 5000) {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const r = await Promise.race([
        this.inbox.next(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no ${kind} within ${timeout} ms`)), timeout);
        }),
      ]).finally(() => clearTimeout(timer));
      const m = r.done ? null : r.value;
      const which = m === null ? "end of stream" : (m.msg.case ?? "nothing");
      if (skip.includes(which)) continue;
      assert.equal(which, kind, `got ${which}, want ${kind}`);
      return (m as WorkerMessage).msg.value as Extract<WorkerMessage["msg"], { case: K }>["value"];
    }
  }
}

class ScriptedLeader {
  readonly sessions = new Queue<Session>();
  private server!: http2.Http2Server;
  addr = "";

  async start(): Promise<this> {
    const routes = (router: ConnectRouter) =>
      router.service(WorkerService, {
        connect: (reqs: AsyncIterable<WorkerMessage>) => this.connect(reqs),
      });
    this.server = http2.createServer(connectNodeAdapter({ routes }));
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private async *connect(reqs: AsyncIterable<WorkerMessage>): AsyncGenerator<LeaderMessage> {
    const it = reqs[Symbol.asyncIterator]();
    const first = await it.next();
    if (first.done || first.value.msg.case !== "hello") return;
    const s = new Session(first.value.msg.value, first.value.slot);
    this.sessions.push(s);
    void (async () => {
      try {
        for (;;) {
          const r = await it.next();
          if (r.done) break;
          s.inbox.push(r.value);
        }
      } catch {
        // the stream ended
      }
      s.inbox.push(null);
    })();
    for await (const m of s.outbox) {
      if (m === null) return;
      yield m;
    }
  }

  async session(timeout = 5000): Promise<Session> {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      this.sessions.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("no session")), timeout);
      }),
    ]).finally(() => clearTimeout(timer));
    return r.value as Session;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => {
      this.server.close(() => r());
      (this.server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
    });
  }
}

async function leaders(n: number, body: (ls: ScriptedLeader[]) => Promise<void>): Promise<void> {
  const ls = await Promise.all(Array.from({ length: n }, () => new ScriptedLeader().start()));
  try {
    await body(ls);
  } finally {
    for (const l of ls) void l.stop();
  }
}

async function serving(w: Worker<any>, body: () => Promise<void>): Promise<void> {
  const run = w.run({ handleSignals: false });
  try {
    await body();
  } finally {
    await w.stop({ grace: 1000 });
    await run;
  }
}

interface WelcomeInit {
  mux?: boolean;
  heartbeatIntervalMs?: bigint;
  selfKillAfterMs?: bigint;
  finishReady?: boolean;
  startedDelayMs?: bigint;
  jobTypes?: boolean;
  snooze?: boolean;
  kinds?: boolean;
  pendingCancels?: { job: bigint; attempt: number; reason: string; graceMs: bigint }[];
}

function welcome(init: WelcomeInit = {}): LeaderInit {
  return {
    case: "welcome",
    value: { heartbeatIntervalMs: 60_000n, selfKillAfterMs: 120_000n, leaderId: "fake", jobTypes: true, snooze: true, ...init },
  };
}

function assign(job: number, kind: string, payload = "", attempt = 1): LeaderInit {
  return {
    case: "assign",
    value: { job: BigInt(job), attempt, jobType: kind, payload: new TextEncoder().encode(payload), tenant: "acme", size: Size.SM, credit: 1n },
  };
}

const ack = (job: number, attempt = 1): LeaderInit => ({ case: "finishedAck", value: { job: BigInt(job), attempt } });

function assignForm(job: number, kind: string, form: JobForm, payload = ""): LeaderInit {
  return {
    case: "assign",
    value: { job: BigInt(job), attempt: 1, jobType: kind, form, payload: new TextEncoder().encode(payload), tenant: "acme", size: Size.SM, credit: 1n },
  };
}

function digestResizeWorker(addr: string, id: string): Worker {
  const w = new Worker({ servers: [addr], id, logger: quiet });
  w.register("resize", () => "resized");
  w.register("digest", (job, ctx) => `digest of ${String(job.payload)} on ${ctx.workerId}`);
  return w;
}

test("the Hello names the kinds; a job the worker does not run ends unknown_kind", async () => {
  await leaders(1, async ([lead]) => {
    const w = digestResizeWorker(lead.addr, "proto-kinds");
    await serving(w, async () => {
      const s = await lead.session();
      assert.deepEqual([s.hello.kinds, s.hello.commands], [["digest", "resize"], false]);
      s.send(welcome({ kinds: true }));
      await s.expect("ready");

      // A function job of a kind it has no function for: not a run of the
      // job (unknown_kind, no CPU, not permanent).
      s.send(assignForm(7, "thumbnail", JobForm.FUNCTION));
      assert.equal((await s.expect("started")).job, 7n);
      let fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.attempt, fin.outcome, fin.cpuMs, fin.exitCode, fin.permanent], [7n, 1, Outcome.UNKNOWN_KIND, 0n, 0, false]);
      assert.equal(fin.stderrTail, "no function for kind 'thumbnail' on this worker (worker proto-kinds-1, pool default); " +
        "its functions are for the kinds 'digest', 'resize'");
      s.send(ack(7));
      await s.expect("ready");

      // A command job, even of a type it has a function for.
      s.send(assignForm(8, "digest", JobForm.COMMAND));
      await s.expect("started");
      fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.cpuMs, fin.exitCode, fin.permanent], [8n, Outcome.UNKNOWN_KIND, 0n, 0, false]);
      assert.equal(fin.stderrTail, "job 8 is a command job, which this worker of functions does not run (worker proto-kinds-1, pool default)");
      s.send(ack(8));
      await s.expect("ready");

      // A job of no form (a client of an earlier build) of a kind it has
      // no function for: failed for good, as before kinds.
      s.send(assign(9, "thumbnail"));
      await s.expect("started");
      fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.exitCode, fin.permanent], [9n, Outcome.FAILED, 127, true]);
      s.send(ack(9));
      await s.expect("ready");

      // A function job of its kind runs.
      s.send(assignForm(10, "digest", JobForm.FUNCTION, JSON.stringify("x")));
      await s.expect("started");
      fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.stdoutTail], [10n, Outcome.OK, "digest of x on proto-kinds-1"]);
      s.send(ack(10));
    });
  });
});

test("a leader that does not route by kind gets a job the worker does not run as a failed run, as before", async () => {
  await leaders(1, async ([lead]) => {
    const w = digestResizeWorker(lead.addr, "proto-old");
    await serving(w, async () => {
      const s = await lead.session();
      assert.deepEqual(s.hello.kinds, ["digest", "resize"]);
      s.send(welcome());
      await s.expect("ready");
      s.send(assignForm(3, "thumbnail", JobForm.FUNCTION));
      await s.expect("started");
      const fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.exitCode, fin.permanent], [3n, Outcome.FAILED, 127, true]);
      s.send(ack(3));
    });
  });
});
const quiet = () => undefined;

test("a snooze is reported with its delay; one outside the bounds is held to them, with a log line", async () => {
  await leaders(1, async ([lead]) => {
    const warnings: string[] = [];
    const w = new Worker({ servers: [lead.addr], id: "proto-snooze", size: "md", pool: "gpu", logger: (level, msg) => {
      if (level === "warn") warnings.push(msg);
    } });
    w.register("later", () => {
      throw new Snooze(1500);
    });
    w.register("soon", (_job, ctx) => ctx.snooze(10));
    await serving(w, async () => {
      const s = await lead.session();
      assert.deepEqual([s.hello.workerId, s.hello.size, s.hello.pool, s.hello.version], ["proto-snooze-1", Size.MD, "gpu", "typescript-1"]);
      s.send(welcome());
      const ready = await s.expect("ready");
      s.send(assign(7, "later"));
      const started = await s.expect("started");
      assert.deepEqual([started.job, started.attempt], [7n, 1]);
      const fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.attempt, fin.outcome, fin.snoozeMs, fin.exitCode, fin.permanent], [7n, 1, Outcome.SNOOZED, 1500n, 0, false]);
      assert.deepEqual([fin.startUnreported, fin.readyCredit], [false, 0n]);
      s.send(ack(7));
      const again = await s.expect("ready");
      assert.equal(again.credit, ready.credit + 1n);
      assert.deepEqual(warnings, []);
      s.send(assign(8, "soon"));
      await s.expect("started");
      const held = await s.expect("finished");
      assert.deepEqual([held.job, held.outcome, held.snoozeMs, held.exitCode], [8n, Outcome.SNOOZED, 1000n, 0]);
      assert.deepEqual(warnings, ["snooze held to the cluster's bounds: job=8 asked=10ms snooze=1000ms min=1000ms max=86400000ms"]);
      s.send(ack(8));
    });
  });
});

test("a leader of an earlier build: no Ready without kinds named, a snoozed run failed without snooze", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-old", size: "md", logger: quiet });
    w.register("later", (_job, ctx) => ctx.snooze(5000));
    await serving(w, async () => {
      let s = await lead.session();
      s.send(welcome({ jobTypes: false }));
      assert.equal((await s.inbox.next()).value, null); // the worker ended the stream, offering nothing
      s = await lead.session(10_000);
      s.send(welcome({ snooze: false }));
      await s.expect("ready");
      s.send(assign(8, "later"));
      await s.expect("started");
      const fin = await s.expect("finished");
      assert.deepEqual([fin.outcome, fin.snoozeMs, fin.exitCode], [Outcome.FAILED, 0n, 1]);
      assert.ok(fin.stderrTail.includes("cannot snooze a job"), fin.stderrTail);
      s.send(ack(8));
    });
  });
});

test("Started held back, and the Ready folded into the Finished", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-fold", logger: quiet });
    w.register("quick", (job) => new TextDecoder().decode(job.raw).split("").reverse().join(""));
    await serving(w, async () => {
      const s = await lead.session();
      s.send(welcome({ finishReady: true, startedDelayMs: 1000n }));
      const ready = await s.expect("ready");
      s.send(assign(9, "quick", "abc"));
      // A run that ends within the delay sends no Started: its Finished
      // says so, and carries the next Ready.
      let fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.stdoutTail, fin.startUnreported], [9n, Outcome.OK, "cba", true]);
      assert.equal(fin.readyCredit, ready.credit + 1n);
      // The leader's Assign acknowledges the run and gives the next.
      s.send({ case: "assign", value: { job: 10n, attempt: 1, jobType: "quick", payload: new TextEncoder().encode("xy"), credit: fin.readyCredit, finished: { job: 9n, attempt: 1 } } });
      fin = await s.expect("finished");
      assert.deepEqual([fin.job, fin.stdoutTail, fin.readyCredit], [10n, "yx", ready.credit + 2n]);
      s.send(ack(10));
    });
  });
});

test("heartbeats carry the run's CPU so far", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-hb", logger: quiet });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    w.register("burn", async () => {
      await sleep(400);
      await released;
    });
    await serving(w, async () => {
      const s = await lead.session();
      s.send(welcome({ heartbeatIntervalMs: 100n, selfKillAfterMs: 5000n }));
      const idle = await s.expect("heartbeat", ["ready"]);
      assert.deepEqual([idle.job, idle.attempt, idle.cpuMs], [0n, 0, 0n]);
      s.send({ case: "heartbeatAck", value: { seq: idle.seq } });
      s.send(assign(14, "burn"));
      await s.expect("started", ["heartbeat", "ready"]);
      let hb;
      for (;;) {
        hb = await s.expect("heartbeat", []);
        s.send({ case: "heartbeatAck", value: { seq: hb.seq } });
        assert.deepEqual([hb.job, hb.attempt], [14n, 1]);
        if (hb.cpuMs >= 400n) break;
      }
      release();
      const fin = await s.expect("finished");
      assert.equal(fin.outcome, Outcome.OK);
      assert.ok(fin.cpuMs >= hb.cpuMs && fin.cpuMs < 2000n, `${hb.cpuMs} ${fin.cpuMs}`);
      s.send(ack(14));
      await s.expect("ready");
    });
  });
});

test("a follower redirects the worker to the leader", async () => {
  await leaders(2, async ([follower, lead]) => {
    const w = new Worker({ servers: [follower.addr], id: "proto-redirect", logger: quiet });
    w.register("x", () => undefined);
    await serving(w, async () => {
      const s = await follower.session();
      s.send({ case: "redirect", value: { leaderId: "n2", leaderAddr: lead.addr } });
      s.close();
      const s2 = await lead.session();
      assert.equal(s2.hello.workerId, "proto-redirect-1");
      s2.send(welcome());
      await s2.expect("ready");
    });
  });
});

test("a Reject stops the run and drops its result", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-reject", logger: quiet });
    const seen: string[] = [];
    w.register("wait", async (_job, ctx) => {
      await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r(), { once: true }));
      seen.push(String(ctx.signal.reason));
      return "finished anyway";
    });
    await serving(w, async () => {
      const s = await lead.session();
      s.send(welcome());
      await s.expect("ready");
      s.send(assign(11, "wait"));
      await s.expect("started");
      s.send({ case: "reject", value: { job: 11n, attempt: 1, reason: "stale attempt" } });
      // No Finished: the next message is the slot's new Ready.
      await s.expect("ready");
      assert.deepEqual(seen, ["rejected by the leader: stale attempt"]);
    });
  });
});

test("a worker cut off from the cluster stops its run after self_kill_after", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-selfkill", logger: quiet });
    let stopped!: (reason: string) => void;
    const reason = new Promise<string>((r) => (stopped = r));
    w.register("wait", async (_job, ctx) => {
      await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r(), { once: true }));
      stopped(String(ctx.signal.reason));
    });
    await serving(w, async () => {
      const s = await lead.session();
      // Heartbeats every 100 ms, never acknowledged.
      s.send(welcome({ heartbeatIntervalMs: 100n, selfKillAfterMs: 600n }));
      await s.expect("ready");
      s.send(assign(12, "wait"));
      await s.expect("started");
      const why = await Promise.race([reason, sleep(5000).then(() => "not stopped")]);
      assert.match(why, /^no contact with the cluster for \d+\.\d+s \(self_kill_after 0\.6s\)$/);
    });
  });
});

test("a reconnect resumes the run, and a cancel pending at Welcome reaches it", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-resume", logger: quiet });
    let goOn!: () => void;
    const going = new Promise<void>((r) => (goOn = r));
    w.register("wait", async (_job, ctx) => {
      await going;
      await new Promise<void>((r) => (ctx.signal.aborted ? r() : ctx.signal.addEventListener("abort", () => r(), { once: true })));
      return "done";
    });
    await serving(w, async () => {
      const s = await lead.session();
      s.send(welcome());
      await s.expect("ready");
      s.send(assign(13, "wait", "", 2));
      await s.expect("started");
      s.close(); // the leader goes away
      const s2 = await lead.session();
      assert.deepEqual(s2.hello.running.map((r) => [r.job, r.attempt, r.finished]), [[13n, 2, false]]);
      // The new leader has a cancel of the run pending.
      s2.send(welcome({ pendingCancels: [{ job: 13n, attempt: 2, reason: "requested", graceMs: 1000n }] }));
      goOn();
      const fin = await s2.expect("finished", ["heartbeat", "ready"]);
      assert.deepEqual([fin.job, fin.attempt, fin.outcome], [13n, 2, Outcome.CANCELLED]);
      s2.send(ack(13, 2));
      await s2.expect("ready");
    });
  });
});

test("a Started held back goes to the next leader", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-held", logger: quiet });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    w.register("wait", () => released);
    await serving(w, async () => {
      const s = await lead.session();
      s.send(welcome({ startedDelayMs: 5000n }));
      await s.expect("ready");
      s.send(assign(15, "wait"));
      await sleep(100);
      s.close(); // before the run has lasted its delay: no Started yet
      const s2 = await lead.session();
      assert.deepEqual(s2.hello.running.map((r) => [r.job, r.finished]), [[15n, false]]);
      // A leader that lets Started wait 200 ms gets it once the run has lasted that long.
      s2.send(welcome({ startedDelayMs: 200n }));
      const started = await s2.expect("started");
      assert.deepEqual([started.job, started.attempt], [15n, 1]);
      release();
      const fin = await s2.expect("finished");
      assert.deepEqual([fin.job, fin.outcome, fin.startUnreported], [15n, Outcome.OK, false]);
      s2.send(ack(15));
      await s2.expect("ready");
    });
  });
});

/** The next n messages of the worker on s of kinds, as [slot, kind, message], in the order they came. */
async function slotMessages(s: Session, n: number, kinds = ["hello", "ready"]): Promise<[number, string, WorkerMessage][]> {
  const got: [number, string, WorkerMessage][] = [];
  while (got.length < n) {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      s.inbox.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no ${kinds.join(" or ")} within 5 s`)), 5000);
      }),
    ]).finally(() => clearTimeout(timer));
    assert.ok(!r.done && r.value !== null, "the worker ended the stream");
    const m = r.value as WorkerMessage;
    if (kinds.includes(m.msg.case ?? "")) got.push([m.slot, m.msg.case as string, m]);
  }
  return got;
}

test("the slots of a worker share one stream; a slot the leader ends says Hello again on it; a break moves all to one new stream", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-mux", concurrency: 3, logger: quiet });
    w.register("x", () => "");
    await serving(w, async () => {
      const s = await lead.session();
      assert.ok(s.hello.mux && [1, 2, 3].includes(s.slot));
      assert.equal(s.hello.workerId, `proto-mux-${s.slot}`);
      s.send(welcome({ mux: true }), s.slot);
      const got = await slotMessages(s, 3);
      const hellos = got.filter(([, kind]) => kind === "hello");
      const others = [1, 2, 3].filter((k) => k !== s.slot);
      assert.deepEqual(hellos.map(([k]) => k).sort(), others);
      for (const [k, , m] of hellos) {
        const h = m.msg.value as Hello;
        assert.deepEqual([h.mux, h.workerId], [true, `proto-mux-${k}`]);
      }
      assert.deepEqual(got.filter(([, kind]) => kind === "ready").map(([k]) => k), [s.slot]);
      for (const k of others) s.send(welcome({ mux: true }), k);
      assert.deepEqual((await slotMessages(s, 2, ["ready"])).map(([k]) => k).sort(), others);
      // The leader ends slot 2's session (another session of its ID): it
      // says Hello again, on this stream.
      const st = toBinary(StatusSchema, create(StatusSchema, { code: 10, message: "worker proto-mux-2 is connected" }));
      s.send({ case: "end", value: { status: st } }, 2);
      const [[k, , again]] = await slotMessages(s, 1, ["hello"]);
      assert.deepEqual([k, (again.msg.value as Hello).workerId, (again.msg.value as Hello).mux], [2, "proto-mux-2", true]);
      s.send(welcome({ mux: true }), 2);
      assert.deepEqual((await slotMessages(s, 1, ["ready"])).map(([k]) => k), [2]);
      // The stream breaks: the three reconnect on one new stream.
      s.close();
      const s2 = await lead.session();
      s2.send(welcome({ mux: true }), s2.slot);
      const hellos2 = await slotMessages(s2, 2, ["hello"]);
      assert.deepEqual([s2.slot, ...hellos2.map(([k]) => k)].sort(), [1, 2, 3]);
      await assert.rejects(lead.session(300));
    });
  });
});

test("slots against a leader that does not multiplex open a stream each", async () => {
  await leaders(1, async ([lead]) => {
    const w = new Worker({ servers: [lead.addr], id: "proto-plain", concurrency: 3, logger: quiet });
    w.register("x", () => "");
    await serving(w, async () => {
      const first = await lead.session();
      assert.equal(first.hello.mux, true);
      first.send(welcome());
      await first.expect("ready");
      const others = [await lead.session(), await lead.session()];
      assert.deepEqual([first, ...others].map((s) => s.hello.workerId).sort(), ["proto-plain-1", "proto-plain-2", "proto-plain-3"]);
      assert.deepEqual(others.map((s) => [s.hello.mux, s.slot]), [[false, 0], [false, 0]]);
      for (const s of others) {
        s.send(welcome());
        assert.ok((await s.expect("ready")).credit > 0n);
      }
      await assert.rejects(lead.session(300));
    });
  });
});

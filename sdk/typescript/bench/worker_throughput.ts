/**
 * Measures how many zero-length jobs per second a worker of this SDK runs
 * on 4 slots, against three servers of bin/barista on this machine, beside
 * the Go and Python workers measured the same way (BENCHMARKS.md, "The
 * TypeScript SDK's worker").
 *
 *     make build && make test-typescript   # builds dist/
 *     node sdk/typescript/dist/bench/worker_throughput.js [--jobs 3000] [--rounds 3] [--slots 4] [--go] [--python]
 *
 * For each kind of worker and each round: it queues --jobs jobs of a
 * tenant of its own (batch submits, before the worker starts), starts the
 * worker, waits until the cluster says every job completed, stops the
 * worker, and reads the tenant's events: the rate is the completed events
 * after the first --warmup, over the leader's wall clock between them. The
 * kinds: a worker of this SDK in this process (an async function that
 * returns at once); with --go, as many processes of examples/go-worker (a
 * Go worker.Register function, one slot each) as there are slots; with
 * --python, a worker of the Python SDK (an async function, --slots slots)
 * in a process of its own (/usr/bin/python3 with Debian's grpcio). Rounds
 * interleave the kinds. The servers run with fsync, on the same cores.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Client, Worker } from "../src/index.js";
import { ADMIN_TOKEN, Cluster, Proc, ROOT, WORKER_TOKEN, sleep } from "../test/cluster.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "3000" },
    warmup: { type: "string", default: "300" },
    rounds: { type: "string", default: "3" },
    slots: { type: "string", default: "4" },
    go: { type: "boolean", default: false },
    python: { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  },
});
const JOBS = Number(values.jobs);
const WARMUP = Number(values.warmup);
const ROUNDS = Number(values.rounds);
const SLOTS = Number(values.slots);
if (!(WARMUP > 0 && WARMUP < JOBS)) throw new Error("--warmup must be between 0 and --jobs");

const PYTHON_WORKER = `
import asyncio, sys
import barista
async def main():
    w = barista.Worker(sys.argv[1], token=sys.argv[2], concurrency=int(sys.argv[3]), id=sys.argv[4])
    async def zero(ctx):
        return None
    w.register(sys.argv[5], zero)
    await w.run()
asyncio.run(main())
`;

type Stop = () => Promise<void>;

async function tsWorker(addrs: string[], name: string, kind: string): Promise<Stop> {
  const worker = new Worker({ servers: addrs, token: WORKER_TOKEN, concurrency: SLOTS, id: name });
  worker.register(kind, async () => undefined);
  const run = worker.run({ handleSignals: false });
  return async () => {
    await worker.stop({ grace: 10_000 });
    await run;
  };
}

function procs(argvs: string[][], name: string, logs: string, env: NodeJS.ProcessEnv): Stop {
  const ps = argvs.map((argv, k) => new Proc(`${name}-${k + 1}`, argv, join(logs, `${name}-${k + 1}.log`), env));
  return async () => {
    for (const p of ps) await p.kill();
  };
}

async function oneRound(c: Cluster, tenant: string, kind: string, logs: string, goBin: string): Promise<[number, number]> {
  const jobKind = kind === "go" ? "count-words" : kind;
  const payload = kind === "go" ? { text: "" } : undefined;
  const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
  try {
    await admin.upsertTenant(tenant, { tier: "gold" });
    for (let start = 0; start < JOBS; start += 1000) {
      const specs = [];
      for (let i = start; i < Math.min(JOBS, start + 1000); i++) specs.push({ kind: jobKind, payload, key: `${tenant}-${i}` });
      const res = await admin.submitMany(specs, { tenant, cost: 1 });
      const bad = res.filter((r) => r instanceof Error);
      if (bad.length > 0) throw bad[0];
    }
    const cpu0 = process.cpuUsage();
    const name = `bench-${tenant}`;
    let stop: Stop;
    if (kind === "typescript") stop = await tsWorker(c.addrs, name, jobKind);
    else if (kind === "go") {
      stop = procs(Array.from({ length: SLOTS }, (_, k) => [goBin, "--server", c.addrs.join(","), "--id", `${name}-${k + 1}`]), name, logs,
        { ...process.env, BARISTA_TOKEN: WORKER_TOKEN });
    } else {
      stop = procs([["/usr/bin/python3", "-c", PYTHON_WORKER, c.addrs.join(","), WORKER_TOKEN, String(SLOTS), name, jobKind]], name, logs,
        { ...process.env, PYTHONPATH: join(ROOT, "sdk", "python", "src") });
    }
    let cpu: NodeJS.CpuUsage;
    try {
      const deadline = Date.now() + 600_000;
      for (;;) {
        const u = await admin.usage({ tenant });
        if (u.completed >= JOBS) {
          if (u.completed !== JOBS || u.failures !== 0) throw new Error(`completed ${u.completed}, failures ${u.failures}`);
          break;
        }
        if (Date.now() > deadline) throw new Error(`only ${u.completed} of ${JOBS} completed`);
        await sleep(100);
      }
      cpu = process.cpuUsage(cpu0);
    } finally {
      await stop();
    }
    const ends: number[] = [];
    for await (const ev of admin.watch(undefined, { tenant, fromOldest: true, untilIdle: true })) {
      if (ev.kind === "completed") ends.push(ev.at!.getTime());
    }
    ends.sort((a, b) => a - b);
    if (ends.length !== JOBS) throw new Error(`${ends.length} completed events, want ${JOBS}`);
    const rate = (JOBS - WARMUP) / ((ends[JOBS - 1] - ends[WARMUP - 1]) / 1000);
    // This process's CPU a job while the worker ran (for the TypeScript
    // worker, the worker's; for the others, only the polling).
    return [rate, (cpu.user + cpu.system) / 1000 / JOBS];
  } finally {
    admin.close();
  }
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const dir = mkdtempSync(join(tmpdir(), "barista-tsbench-"));
const c = new Cluster(3, "", join(dir, "cluster"));
try {
  const kinds = ["typescript", ...(values.go ? ["go"] : []), ...(values.python ? ["python"] : [])];
  let goBin = "";
  if (values.go) {
    goBin = join(dir, "go-worker");
    execFileSync(process.env.GO ?? "/usr/local/go/bin/go", ["build", "-o", goBin, "./go-worker"], { cwd: join(ROOT, "examples"), stdio: "inherit" });
  }
  await c.start();
  const out: Record<string, { rates: number[]; cpu: number[] }> = {};
  for (const k of kinds) out[k] = { rates: [], cpu: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const k of kinds) {
      const [rate, ms] = await oneRound(c, `${k}-${r}`, k, dir, goBin);
      out[k].rates.push(rate);
      out[k].cpu.push(ms);
      console.error(`${k} round ${r + 1}: ${rate.toFixed(0)} jobs/s, ${ms.toFixed(3)} ms of this process's CPU a job`);
    }
  }
  if (values.json) {
    console.log(JSON.stringify({ slots: SLOTS, jobs: JOBS, ...Object.fromEntries(kinds.map((k) => [k, { median: median(out[k].rates), rounds: out[k].rates, cpu_ms_per_job: median(out[k].cpu) }])) }));
  } else {
    for (const k of kinds) {
      console.log(`${k}, ${SLOTS} slots: ${median(out[k].rates).toFixed(0)} zero-length jobs/s (median of [${out[k].rates.map((x) => x.toFixed(0)).join(" ")}]); ` +
        `${median(out[k].cpu).toFixed(3)} ms of this process's CPU a job`);
    }
  }
} finally {
  await c.stop();
  rmSync(dir, { recursive: true, force: true });
}

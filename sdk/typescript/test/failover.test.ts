/**
 * kill -9 of the leader while keyed submits go on, and a watch across it:
 * no job lost, none made twice, no event missed or seen twice.
 */

import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Client, Worker, type Event, type Submitted } from "../src/index.js";
import { ACME_TOKEN, ADMIN_TOKEN, Cluster, WORKER_TOKEN, sleep, waitFor } from "./cluster.js";

const JOBS = 300;
const SENDERS = 8;

const skip = Cluster.available() ? false : "bin/barista is missing: run make build";
let c: Cluster | undefined;
after(async () => {
  await c?.stop();
  c?.remove();
});
let wc: Cluster | undefined;
after(async () => {
  await wc?.stop();
  wc?.remove();
});

test("kill -9 of the leader during 300 keyed submits, and a watch across it", { skip, timeout: 90_000 }, async () => {
  c = new Cluster(3);
  await c.start();
  const leader = await c.waitLeader();
  const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
  await admin.upsertTenant("acme", { tier: "gold" });
  admin.close();
  // The clients ask the leader first, so that the kill breaks calls in
  // flight there.
  const order = [leader.grpcAddr, ...c.nodes.filter((n) => n !== leader).map((n) => n.grpcAddr)];
  const client = new Client({ servers: order, token: ACME_TOKEN });
  const watcher = new Client({ servers: order, token: ACME_TOKEN });
  try {
    const seen: Event[] = [];
    const watching = (async () => {
      for await (const ev of watcher.watch(undefined, { fromOldest: true })) {
        seen.push(ev);
        if (seen.filter((e) => e.kind === "queued").length === JOBS) return;
      }
    })();
    const answers = new Map<number, Submitted>();
    let nextKey = 0;
    let killed: Promise<void> | undefined;
    const sender = async () => {
      while (nextKey < JOBS) {
        const i = nextKey++;
        answers.set(i, await client.submit("failover", `job ${i}`, { cost: 1, key: `order-${i}` }));
        if (answers.size === JOBS / 3 && killed === undefined) killed = leader.kill(); // SIGKILL, then wait for it to end
      }
    };
    await Promise.all(Array.from({ length: SENDERS }, sender));
    assert.ok(killed !== undefined);
    await killed;
    const newLeader = await c.waitLeader(20_000);
    assert.notEqual(newLeader, leader);

    // Every submit was answered, each key with a job of its own.
    assert.equal(answers.size, JOBS);
    const ids = new Set([...answers.values()].map((j) => j.id));
    assert.equal(ids.size, JOBS);
    // The cluster holds exactly those jobs: none lost, none twice.
    const listed = [];
    for await (const j of client.jobs({ pageSize: 1000 })) listed.push(j);
    assert.equal(listed.length, JOBS);
    assert.deepEqual(
      Object.fromEntries(listed.map((j) => [j.key, j.id])),
      Object.fromEntries([...answers].map(([i, j]) => [`order-${i}`, j.id])),
    );
    // The watch went on through the kill: every job's queued event, once, in order.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([watching, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("the watch did not see every job")), 30_000);
    })]).finally(() => clearTimeout(timer));
    const seqs = seen.map((e) => e.seq);
    assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b));
    assert.deepEqual(
      seen.filter((e) => e.kind === "queued").map((e) => e.jobId).sort((a, b) => a - b),
      [...ids].sort((a, b) => a - b),
    );
  } catch (e) {
    console.error(c.logs(20));
    throw e;
  } finally {
    client.close();
    watcher.close();
  }
});

test("a worker's slots follow the leader across its kill -9: every job completes", { skip, timeout: 90_000 }, async () => {
  wc = new Cluster(3, 'heartbeat_interval = "1s"\nself_kill_after = "8s"\nlease_timeout = "10s"\n');
  await wc.start();
  const admin = new Client({ servers: wc.addrs, token: ADMIN_TOKEN });
  await admin.upsertTenant("acme", { tier: "gold" });
  admin.close();
  const worker = new Worker({ servers: wc.addrs, token: WORKER_TOKEN, concurrency: 4, id: "ts-failover" });
  const runs = new Map<number, number>();
  worker.register("step", async (job) => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    await sleep(200);
    return `step ${String(job.payload)}`;
  });
  const client = new Client({ servers: wc.addrs, token: ACME_TOKEN });
  const run = worker.run({ handleSignals: false });
  try {
    const jobs = (await client.submitMany(Array.from({ length: 60 }, (_, i) => ({ kind: "step", payload: i, key: `step-${i}`, cost: 1 })))) as Submitted[];
    await waitFor(() => runs.size >= 8, 20_000, "the first runs");
    await (await wc.waitLeader()).kill();
    await waitFor(async () => (await client.usage()).completed === 60, 60_000, "every job completed", 200);
    for (const [i, j] of jobs.entries()) {
      const got = await client.get(j);
      assert.deepEqual([got.state, got.result], ["completed", `step ${i}`]);
    }
    assert.equal(runs.size, 60);
  } catch (e) {
    console.error(wc.logs(20));
    throw e;
  } finally {
    await worker.stop({ grace: 5_000 });
    await run;
    client.close();
  }
});

/**
 * A worker of many slots on one stream against a real cluster of its own
 * (so that the leader's connections are the test's alone): fifty slots on
 * one connection and one stream run fifty jobs at once.
 */

import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Worker as WorkerService } from "../src/gen/worker_pb.js";
import { Client, Worker, type Submitted } from "../src/index.js";
import { ACME_TOKEN, Cluster, WORKER_TOKEN, waitFor, type ServerNode } from "./cluster.js";
import { sharedCluster } from "./helpers.js";

const skip = Cluster.available() ? false : "bin/barista is missing: run make build";
let c: Cluster | undefined;
after(async () => {
  await c?.stop();
  c?.remove();
});

/** The node's open gRPC connections (barista_connections{listener="grpc"}). */
async function grpcConnections(n: ServerNode): Promise<number> {
  const text = await (await fetch(`http://${n.httpAddr}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith('barista_connections{listener="grpc"}'));
  assert.ok(line, 'no barista_connections{listener="grpc"} in the metrics');
  return Number(line.split(" ").pop());
}

test("fifty slots on one connection and one stream run fifty jobs at once", { skip, timeout: 90_000 }, async () => {
  c = await sharedCluster();
  const leader = await c.waitLeader();
  const order = [leader.grpcAddr, ...c.nodes.filter((n) => n !== leader).map((n) => n.grpcAddr)];
  const client = new Client({ servers: order, token: ACME_TOKEN });
  try {
    const jobs = (await client.submitMany(Array.from({ length: 50 }, () => ({ kind: "fifty", payload: "", cost: 1 })))) as Submitted[];
    await c.workers(); // the test's own connection to the leader, opened before the count
    const before = await grpcConnections(leader);
    const w = new Worker({ servers: order, token: WORKER_TOKEN, id: "ts-fifty", concurrency: 50 });
    // Count the streams the worker opens.
    const svc = w.node(leader.grpcAddr).client(WorkerService);
    const connect = svc.connect.bind(svc);
    let streams = 0;
    svc.connect = ((...args: Parameters<typeof connect>) => {
      streams++;
      return connect(...args);
    }) as typeof svc.connect;
    const runs = new Map<number, number>();
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    w.register("fifty", async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      await released;
      return `held ${job.id}`;
    });
    const run = w.run({ handleSignals: false });
    try {
      await waitFor(() => runs.size === 50, 30_000, "fifty runs at once");
      assert.equal(w.busy, 50);
      const sessions = (await c.workers()).filter((x) => x.connected && x.workerId.startsWith("ts-fifty-"));
      assert.deepEqual([sessions.length, sessions.filter((x) => x.state === "busy").length], [50, 50]);
      assert.equal(await grpcConnections(leader), before + 1);
      assert.equal(streams, 1);
      release();
      for (const j of jobs) {
        const got = await waitFor(async () => {
          const x = await client.get(j);
          return x.state === "completed" || x.state === "failed" ? x : undefined;
        }, 30_000, `job ${j.id} ended`, 100);
        assert.deepEqual([got.state, got.attempt, got.result], ["completed", 1, `held ${j.id}`]);
      }
      assert.deepEqual([...runs.values()], Array(50).fill(1));
    } finally {
      await w.stop({ grace: 5_000 });
      await run;
    }
  } catch (e) {
    console.error(c.logs(20));
    throw e;
  } finally {
    client.close();
  }
});

/** What the tests share: the shared cluster's settings, a worker run for a block, refusals. */

import assert from "node:assert/strict";
import { BaristaError, Client, Worker, type Event, type JobRef } from "../src/index.js";
import { ADMIN_TOKEN, Cluster } from "./cluster.js";

/**
 * Settings of the shared cluster: heartbeats every second, so that a run
 * of a few seconds reports its CPU in heartbeats too, and retries of
 * failed runs without a wait.
 */
export const SCHEDULER = `
heartbeat_interval = "1s"
self_kill_after = "8s"
lease_timeout = "10s"
retry_backoff = "0s"
`;

/** Starts the shared cluster, with the tenants acme (gold) and globex (silver). */
export async function sharedCluster(): Promise<Cluster> {
  const c = new Cluster(3, SCHEDULER);
  try {
    await c.start();
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      await admin.upsertTenant("acme", { tier: "gold" });
      await admin.upsertTenant("globex", { tier: "silver" });
    } finally {
      admin.close();
    }
  } catch (e) {
    console.error(c.logs());
    await c.stop();
    throw e;
  }
  return c;
}

/** Runs worker for the body, then stops it and checks that run() returned cleanly. */
export async function running<T>(worker: Worker<any>, body: () => Promise<T>): Promise<T> {
  const run = worker.run({ handleSignals: false });
  try {
    return await body();
  } finally {
    await worker.stop({ grace: 5_000 });
    await run;
  }
}

/** The kinds of job's events until its end. */
export async function follow(c: Client<any>, job: JobRef): Promise<string[]> {
  const kinds: string[] = [];
  for await (const ev of c.watch(job)) kinds.push(ev.kind);
  return kinds;
}

/** All of job's events until its end. */
export async function events(c: Client<any>, job: JobRef): Promise<Event[]> {
  const out: Event[] = [];
  for await (const ev of c.watch(job)) out.push(ev);
  return out;
}

/** The error call throws, which must be exactly of class cls. */
export async function refused(call: Promise<unknown>, cls: abstract new (...a: never[]) => BaristaError): Promise<BaristaError> {
  try {
    await call;
  } catch (e) {
    assert.ok(e instanceof BaristaError, `not a BaristaError: ${String(e)}`);
    assert.equal(e.constructor, cls, `${e.constructor.name} (${e.message}), want ${cls.name}`);
    return e;
  }
  assert.fail(`no ${cls.name} thrown`);
}

/**
 * The client and the worker against one real three-node cluster of
 * bin/barista: submits through a follower, keyed resends, pages, explain,
 * times, the tenant admin calls, every error class from a real refusal,
 * functions routed by kind, four slots at once, cancel, snooze, a worker
 * refused for good, and the example worker's graceful stop on SIGTERM.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import {
  AlreadyExists,
  BaristaError,
  Client,
  ClientClosed,
  DeadlinesNotAllowed,
  FailedPrecondition,
  InvalidArgument,
  KeyConflict,
  KeyJobGone,
  MaxClass,
  MaxGroups,
  NotFound,
  PermissionDenied,
  PoolUnknown,
  QuotaExceeded,
  RateLimited,
  ResourceExhausted,
  Snooze,
  SubscriptionRequired,
  TenantUnknown,
  TooLarge,
  Unauthenticated,
  Unavailable,
  Unrunnable,
  Worker,
  verifyCertificate,
  type Job,
  type Submitted,
} from "../src/index.js";
import { ACME_TOKEN, ADMIN_TOKEN, Cluster, Proc, ROOT, WORKER_TOKEN, freePort, sleep } from "./cluster.js";
import { events, follow, refused, running, sharedCluster } from "./helpers.js";

const skip = Cluster.available() ? false : "bin/barista is missing: run make build";
let c: Cluster;

before(async () => {
  if (!skip) c = await sharedCluster();
});
after(async () => {
  await c?.stop();
  c?.remove();
});

describe("the client", { skip, timeout: 60_000 }, () => {
  test("a submit through a follower, and a watch to the end", async () => {
    // The client knows only a follower: the submit is forwarded to the
    // leader, the watch is served by the follower from its own state.
    const [follower] = await c.followers();
    const worker = new Worker({ servers: c.addrs, token: WORKER_TOKEN, size: "md", id: "ts-follow" });
    worker.register("render", (job) => "rendered " + String(job.payload));
    const before = Date.now();
    const client = new Client({ servers: [follower.grpcAddr], token: ACME_TOKEN });
    try {
      const job = await client.submit("render", "follow me", { size: "md", cost: 2000, key: "follow-1" });
      assert.deepEqual(
        [job.created, job.state, job.kind, job.size, job.pool, job.key],
        [true, "queued", "render", "md", "default", "follow-1"],
      );
      const evs = await running(worker, () => events(client, job));
      assert.deepEqual(evs.map((e) => e.kind), ["queued", "assigned", "started", "completed"]);
      assert.deepEqual(evs.map((e) => [e.jobId, e.tenant]), evs.map(() => [job.id, "acme"]));
      assert.deepEqual(evs.map((e) => e.workerId), ["", "ts-follow-1", "ts-follow-1", ""]);
      const seqs = evs.map((e) => e.seq);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
      for (const e of evs) assert.ok(e.at && e.at.getTime() >= before - 1000 && e.at.getTime() <= Date.now() + 1000);
      const got = await client.get<string>(job.id);
      assert.deepEqual(
        [got.id, got.state, got.tenant, got.kind, got.size, got.payload, got.result, got.cost, got.costSource, got.attempt, got.exitCode, got.done],
        [job.id, "completed", "acme", "render", "md", "follow me", "rendered follow me", 2000, "submitted", 1, 0, true],
      );
      assert.equal(new TextDecoder().decode(got.raw), '"follow me"');
      assert.ok(got.submittedAt && got.submittedAt.getTime() >= before - 1000);
      assert.ok(got.endedAt && got.endedAt >= got.submittedAt);
    } finally {
      client.close();
    }
  });

  test("a keyed resend answers the same job, through any node", async () => {
    const a = new Client({ servers: c.addrs, token: ACME_TOKEN });
    const b = new Client({ servers: [...c.addrs].reverse(), token: ACME_TOKEN });
    try {
      const first = await a.submit("render", { invoice: 2291 }, { cost: 1500, key: "invoice-2291" });
      const again = await a.submit("render", { invoice: 2291 }, { cost: 1500, key: "invoice-2291" });
      const third = await b.submit("render", { invoice: 2291 }, { cost: 1500, key: "invoice-2291" });
      assert.deepEqual([first.created, first.state], [true, "queued"]);
      assert.deepEqual([again.id, again.created, again.state], [first.id, false, undefined]);
      assert.deepEqual([third.id, third.created], [first.id, false]);
      await a.cancel(first);
    } finally {
      a.close();
      b.close();
    }
  });

  test("a job with uses reads back its uses", async () => {
    await c.resourceSet("ts-api", 4);
    await c.resourceSet("ts-db", 2);
    await c.poolSet("ts-idle"); // no workers: the jobs stay queued
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      await admin.upsertTenant("ts-llm", { tier: "free" });
      const job = await admin.submit("summarize", "doc-17", { tenant: "ts-llm", pool: "ts-idle", cost: 20_000, uses: { "ts-db": 2, "ts-api": 1 } });
      assert.deepEqual(job.uses, { "ts-api": 1, "ts-db": 2 });
      const got = await admin.get(job.id, { tenant: "ts-llm" });
      assert.deepEqual([got.state, got.uses], ["queued", { "ts-api": 1, "ts-db": 2 }]);
      const plain = await admin.submit("plain", undefined, { tenant: "ts-llm", pool: "ts-idle", cost: 1 });
      assert.deepEqual((await admin.get(plain.id, { tenant: "ts-llm" })).uses, {});
      const e = await refused(admin.submit("x", undefined, { tenant: "ts-llm", pool: "ts-idle", cost: 1, uses: { "ts-api": 0 } }), InvalidArgument);
      assert.deepEqual([e.field, e.rawMessage], ["uses", 'uses: "ts-api": 0 (want at least 1 unit)']);
      await admin.cancel(job, { tenant: "ts-llm" });
      await admin.cancel(plain, { tenant: "ts-llm" });
    } finally {
      await admin.close();
    }
  });

  test("jobs lists every page, explain says why, usage counts", async () => {
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      await admin.upsertTenant("pager", { tier: "free" });
      const jobs = (await admin.submitMany(
        Array.from({ length: 7 }, (_, i) => ({ kind: "list", payload: `p${i}`, key: `page-${i}` })),
        { tenant: "pager", cost: 1000, pool: "default" },
      )) as Submitted[];
      assert.deepEqual(jobs.map((j) => j.created), Array(7).fill(true));
      const ids = jobs.map((j) => j.id);
      assert.deepEqual(ids, [...ids].sort((x, y) => x - y));
      const listed = [];
      for await (const j of admin.jobs({ tenant: "pager", pageSize: 3 })) listed.push(j);
      assert.deepEqual(listed.map((j) => j.id), [...ids].reverse());
      assert.deepEqual(listed.map((j) => j.key), ids.map((_, i) => `page-${6 - i}`));
      assert.deepEqual(listed.map((j) => j.raw), Array(7).fill(undefined));
      const oldest = [];
      for await (const j of admin.jobs<string>({ tenant: "pager", pageSize: 2, oldestFirst: true, includePayload: true })) oldest.push(j);
      assert.deepEqual(oldest.map((j) => j.id), ids);
      assert.deepEqual(oldest.map((j) => j.payload), ids.map((_, i) => `p${i}`));
      const why = await admin.explain(ids[1], { tenant: "pager" });
      assert.deepEqual([why.jobId, why.reason, why.position], [ids[1], "behind", 1]);
      assert.notEqual(why.text, "");
      const u = await admin.usage({ tenant: "pager" });
      assert.deepEqual([u.tenant, u.tier, u.queued, u.queuedBySize, u.submitted], ["pager", "free", 7, { sm: 7, md: 0, lg: 0 }, 7]);
      for (const id of ids) await admin.cancel(id, { tenant: "pager" });
      const states = [];
      for await (const j of admin.jobs({ tenant: "pager" })) states.push(j.state);
      assert.deepEqual(states, Array(7).fill("cancelled"));
    } finally {
      admin.close();
    }
  });

  test("a job's place in line, a usage statement and a certificate that verifies", async () => {
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      await admin.upsertTenant("ledger", { tier: "bronze" });
      const jobs = (await admin.submitMany(
        Array.from({ length: 3 }, (_, i) => ({ kind: "ledger", payload: `l${i}` })),
        { tenant: "ledger", cost: 1000, size: "lg" },
      )) as Submitted[];
      // No lg worker: the third waits behind the first two of its own.
      const job = await admin.get(jobs[2], { tenant: "ledger" });
      assert.deepEqual([job.place?.ahead, job.place?.ownAhead, job.place?.complete], [2, 2, true]);
      const why = await admin.explain(jobs[2], { tenant: "ledger" });
      assert.deepEqual([why.place?.ahead, why.place?.ownAhead], [2, 2]);
      const st = await admin.statement({ tenant: "ledger" });
      assert.deepEqual([st.tenant, st.version, st.cpu], ["ledger", 1, []]);
      const csv = await admin.usageStatement({ tenant: "ledger", format: "csv" });
      assert.equal(csv.split("\n")[0], "section,pool,size,class,metric,value");
      const rep = verifyCertificate(await admin.certificate({ tenant: "ledger" }));
      assert.deepEqual([rep.ok, rep.lines], [true, 0]);
      await assert.rejects(admin.usageStatement({ tenant: "ledger", fromIndex: 1, fromMs: 5 }), InvalidArgument);
      for (const j of jobs) await admin.cancel(j, { tenant: "ledger" });
    } finally {
      admin.close();
    }
  });

  test("times, durations, a deadline, and the tenant admin calls", async () => {
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      let t = await admin.upsertTenant("timely", { tier: "gold", allowDeadlines: true, maxQueued: 50 });
      assert.deepEqual([t.name, t.tier, t.allowDeadlines, t.maxQueued, t.created], ["timely", "gold", true, 50, true]);
      // A field left out keeps its value: an upgrade changes the tier alone.
      t = await admin.upsertTenant("timely", { tier: "diamond" });
      assert.deepEqual([t.tier, t.allowDeadlines, t.maxQueued, t.created], ["diamond", true, 50, false]);
      t = await admin.getTenant("timely");
      assert.deepEqual([t.tier, t.allowDeadlines, t.maxQueued, t.created], ["diamond", true, 50, false]);
      const before = Date.now();
      const job = await admin.submit("later", undefined, {
        tenant: "timely", cost: 250, delay: 600_000, expire: 3_600_000, deadline: 7_200_000, timeout: 90_000, maxAttempts: 2,
      });
      assert.equal(job.state, "scheduled");
      const got = await admin.get(job, { tenant: "timely" });
      assert.deepEqual([got.state, got.cost, got.timeout, got.maxAttempts, got.payload], ["scheduled", 250, 90_000, 2, undefined]);
      // Times to come, as wall times: within the submit's second.
      assert.ok(Math.abs(got.dueAt!.getTime() - (before + 600_000)) < 2000);
      assert.ok(Math.abs(got.expireAt!.getTime() - (before + 3_600_000)) < 2000);
      assert.ok(Math.abs(got.deadlineAt!.getTime() - (before + 7_200_000)) < 2000);
      const why = await admin.explain(job, { tenant: "timely" });
      assert.equal(why.reason, "scheduled");
      assert.ok(Math.abs(why.dueAt!.getTime() - got.dueAt!.getTime()) < 1000);
      assert.deepEqual(await admin.cancel(job, { tenant: "timely" }), { state: "cancelled", requested: false });
      let sub = await admin.setSubscription("timely", "default", 3);
      assert.deepEqual(sub, { tenant: "timely", pool: "default", burst: 3, running: 0, changed: true });
      sub = await admin.deleteSubscription("timely", "default");
      assert.deepEqual([sub.burst, sub.changed], [undefined, true]);
      sub = await admin.deleteSubscription("timely", "default");
      assert.deepEqual([sub.burst, sub.changed], [undefined, false]);
      await admin.deleteTenant("timely");
      const e = await refused(admin.getTenant("timely"), TenantUnknown);
      assert.deepEqual([e.code, e.reason, e.field, e.rawMessage], ["NOT_FOUND", "TENANT_UNKNOWN", "tenant", 'tenant: "timely" not found']);
      assert.ok(e instanceof NotFound);
    } finally {
      admin.close();
    }
  });
});

describe("errors", { skip, timeout: 60_000 }, () => {
  test("each error class from a real refusal", async () => {
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    const acme = new Client({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await admin.upsertTenant("errors", { tier: "bronze", maxQueued: 1 });

      let e = await refused(acme.get(987654321), NotFound);
      assert.deepEqual([e.code, e.reason, e.message], ["NOT_FOUND", undefined, "NOT_FOUND: job 987654321 not found"]);

      e = await refused(admin.submit("x", undefined, { tenant: "nobody", cost: 1 }), TenantUnknown);
      assert.deepEqual([e.code, e.reason, e.rawMessage], ["NOT_FOUND", "TENANT_UNKNOWN", 'unknown tenant "nobody"']);
      assert.ok(e instanceof NotFound);

      e = await refused(acme.submit("x", undefined, { pool: "nowhere", cost: 1 }), PoolUnknown);
      assert.deepEqual([e.code, e.reason, e.rawMessage], ["NOT_FOUND", "POOL_UNKNOWN", 'unknown pool "nowhere"']);

      e = await refused(acme.submit("x", undefined, { tenant: "globex", cost: 1 }), PermissionDenied);
      assert.deepEqual([e.code, e.reason], ["PERMISSION_DENIED", undefined]);

      e = await refused(acme.submit("x", undefined, { priority: "critical", cost: 1 }), MaxClass);
      assert.deepEqual([e.code, e.reason, e.rawMessage], ["PERMISSION_DENIED", "MAX_CLASS", "class critical is above tenant acme's max_class normal"]);
      assert.ok(e instanceof PermissionDenied);

      e = await refused(acme.submit("x", undefined, { deadline: 300_000, cost: 1 }), DeadlinesNotAllowed);
      assert.equal(e.reason, "DEADLINES_NOT_ALLOWED");

      const stranger = new Client({ servers: c.addrs, token: "not-a-token" });
      e = await refused(stranger.get(1), Unauthenticated);
      assert.equal(e.code, "UNAUTHENTICATED");
      stranger.close();

      const first = await admin.submit("x", "one", { tenant: "errors", cost: 1, key: "q-1" });
      e = await refused(admin.submit("x", "two", { tenant: "errors", cost: 1, key: "q-2" }), QuotaExceeded);
      assert.deepEqual([e.code, e.reason, e.rawMessage], ["RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", 'tenant "errors" has 1 queued jobs, its max_queued quota']);
      assert.ok(e instanceof ResourceExhausted);
      // A keyed resend of the job that exists is answered with it, at the quota too.
      const again = await admin.submit("x", "one", { tenant: "errors", cost: 1, key: "q-1" });
      assert.deepEqual([again.id, again.created], [first.id, false]);

      e = await refused(admin.submit("x", "other", { tenant: "errors", cost: 1, key: "q-1" }), KeyConflict);
      assert.deepEqual([e.code, e.reason], ["ALREADY_EXISTS", "KEY_CONFLICT"]);
      assert.ok(e instanceof AlreadyExists);

      // The key of a job that was purged stays taken: KEY_JOB_GONE.
      const gone = await acme.submit("x", "short-lived", { cost: 1, key: "gone-1" });
      await acme.cancel(gone);
      await c.purge("acme", gone.id);
      e = await refused(acme.submit("x", "short-lived", { cost: 1, key: "gone-1" }), KeyJobGone);
      assert.deepEqual([e.code, e.reason], ["NOT_FOUND", "KEY_JOB_GONE"]);
      assert.ok(e.rawMessage.startsWith(`idempotency key "gone-1" of tenant "acme" was used for job ${gone.id}, which no longer exists`));

      // A pool that admits only subscribers.
      await c.poolSet("gated", { subscriptionsRequired: true });
      e = await refused(acme.submit("x", undefined, { pool: "gated", cost: 1 }), SubscriptionRequired);
      assert.deepEqual([e.code, e.reason, e.rawMessage], [
        "FAILED_PRECONDITION", "SUBSCRIPTION_REQUIRED", "tenant acme has no subscription in pool gated, which requires one"]);
      await admin.setSubscription("acme", "gated", 1);
      await acme.cancel(await acme.submit("x", undefined, { pool: "gated", cost: 1 }));
      await admin.deleteSubscription("acme", "gated");

      // A new group beyond the tenant's max_groups.
      await admin.upsertTenant("grouped", { tier: "free", maxGroups: 1 });
      const one = await admin.submit("x", undefined, { tenant: "grouped", group: "store-1", cost: 1 });
      e = await refused(admin.submit("x", undefined, { tenant: "grouped", group: "store-2", cost: 1 }), MaxGroups);
      assert.deepEqual([e.code, e.reason], ["RESOURCE_EXHAUSTED", "MAX_GROUPS"]);
      await admin.cancel(one, { tenant: "grouped" });

      e = await refused(admin.deleteTenant("errors"), FailedPrecondition);
      assert.equal(e.code, "FAILED_PRECONDITION");
      await admin.cancel(first, { tenant: "errors" });

      e = await refused(acme.submit("x", new Uint8Array(1024 * 1024 + 1), { cost: 1 }), TooLarge);
      assert.deepEqual([e.code, e.reason, e.rawMessage], [
        "INVALID_ARGUMENT", "TOO_LARGE", "payload: 1048577 bytes, over the cluster's limit of 1048576 (max_payload_bytes)"]);
      assert.ok(e instanceof InvalidArgument);

      // A job no request can carry is refused before it is sent.
      e = await refused(acme.submit("x", new Uint8Array(5 << 20), { cost: 1 }), TooLarge);
      assert.deepEqual([e.code, e.reason, e.field], ["INVALID_ARGUMENT", "TOO_LARGE", "payload"]);
      assert.ok(e.rawMessage.startsWith("payload: 5242880 bytes: the job would be a 524"));
      const big = await acme.submitMany([{ kind: "x", payload: new Uint8Array(5 << 20), cost: 1 }]);
      assert.equal(big[0].constructor, TooLarge);

      e = await refused(acme.submit("x", undefined, { group: "a/b", cost: 1 }), InvalidArgument);
      assert.deepEqual([e.code, e.reason, e.field], ["INVALID_ARGUMENT", undefined, "group"]);

      // What the SDK checks itself is refused before anything is sent.
      e = await refused(acme.submit("x", undefined, { size: "xl" as never, cost: 1 }), InvalidArgument);
      assert.deepEqual([e.field, e.message], ["size", 'INVALID_ARGUMENT: size: "xl" (want sm, md or lg)']);
      e = await refused(acme.submit("x", undefined, { cost: -1 }), InvalidArgument);
      assert.equal(e.field, "cost");

      // A batch reports each job's refusal from its status: its code,
      // its reason and its field, as a single call's.
      const results = await admin.submitMany([
        { kind: "x", payload: "fine", cost: 1, tenant: "acme" },
        { kind: "x", cost: 1, group: "a/b", tenant: "acme" },
        { kind: "x", cost: 1, tenant: "nobody" },
        { kind: "x", cost: 1, tenant: "acme", pool: "nowhere" },
      ]);
      assert.equal((results[0] as Submitted).created, true);
      const [bad, unknown, nowhere] = results.slice(1) as BaristaError[];
      assert.equal(bad.constructor, InvalidArgument);
      assert.deepEqual([bad.code, bad.reason, bad.field], ["INVALID_ARGUMENT", undefined, "group"]);
      assert.ok(bad.message.startsWith("INVALID_ARGUMENT: group"), bad.message);
      assert.equal(unknown.constructor, TenantUnknown);
      assert.deepEqual([unknown.code, unknown.reason, unknown.rawMessage], ["NOT_FOUND", "TENANT_UNKNOWN", 'unknown tenant "nobody"']);
      assert.equal(nowhere.constructor, PoolUnknown);
      assert.deepEqual([nowhere.code, nowhere.reason, nowhere.rawMessage], ["NOT_FOUND", "POOL_UNKNOWN", 'unknown pool "nowhere"']);
      await acme.cancel(results[0] as Submitted);
    } finally {
      admin.close();
      acme.close();
    }

    // No node listens there: the client gives up after its call timeout.
    const nowhere = new Client({ servers: [`127.0.0.1:${await freePort()}`], token: ACME_TOKEN, callTimeout: 1000 });
    const e = await refused(nowhere.get(1), Unavailable);
    assert.equal(e.code, "UNAVAILABLE");
    nowhere.close();
    await refused(nowhere.get(1), ClientClosed);
  });

  test("RateLimited says when to retry", async () => {
    await c.setConfig({ submitRateN: 1, submitRatePeriodMs: 60_000n, submitBurst: 1 });
    const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN });
    try {
      await admin.upsertTenant("rated", { tier: "free" });
      const job = await admin.submit("x", undefined, { tenant: "rated", cost: 1 });
      const e = await refused(admin.submit("x", undefined, { tenant: "rated", cost: 1 }), RateLimited);
      assert.deepEqual([e.code, e.reason], ["RESOURCE_EXHAUSTED", "RATE_LIMITED"]);
      assert.ok(e instanceof ResourceExhausted);
      assert.ok(e.retryAfter! > 50_000 && e.retryAfter! <= 60_000, String(e.retryAfter));
      assert.ok(e.rawMessage.startsWith('submit_rate: tenant "rated" may submit 1/1m0s (bursts of 1); retry in '));
      // A batch item's refusal says it too, from its status.
      const [item] = await admin.submitMany([{ kind: "x", cost: 1, tenant: "rated" }]);
      assert.equal(item.constructor, RateLimited);
      const r = item as RateLimited;
      assert.deepEqual([r.code, r.reason], ["RESOURCE_EXHAUSTED", "RATE_LIMITED"]);
      assert.ok(r.retryAfter! > 50_000 && r.retryAfter! <= 60_000, String(r.retryAfter));
      assert.ok(r.rawMessage.startsWith('submit_rate: tenant "rated" may submit 1/1m0s (bursts of 1); retry in '), r.rawMessage);
      await admin.cancel(job, { tenant: "rated" });
    } finally {
      await c.setConfig({ submitRateN: 0, submitRatePeriodMs: 0n, submitBurst: 0 });
      admin.close();
    }
  });
});

interface TestKinds {
  upper: string;
  greet: undefined;
  broken: undefined;
  refuse: undefined;
  later: undefined;
  together: undefined;
  hold: undefined;
}

interface KindsOfTest {
  digest: string;
  resize: string;
  thumbnail: string;
}

describe("the worker", { skip, timeout: 60_000 }, () => {
  test("functions routed by kind, with their results, errors and CPU", async () => {
    const worker = new Worker<TestKinds>({
      servers: c.addrs, token: WORKER_TOKEN, size: "md", id: "ts-route",
      kinds: { upper: (job) => job.payload.toUpperCase() },
    });
    worker
      .register("greet", async (job, ctx) => {
        await sleep(250);
        return `hello ${job.tenant}, job ${job.id} attempt ${job.attempt} kind ${job.kind} on ${ctx.workerId}`;
      })
      .register("broken", () => {
        throw new Error("the payload is not a photo");
      })
      .register("refuse", () => {
        throw new Unrunnable("version 3 payloads are not supported");
      });
    assert.deepEqual(worker.kinds, ["broken", "greet", "refuse", "upper"]);
    assert.deepEqual(worker.workerIds, ["ts-route-1"]);
    const client = new Client<TestKinds & { thumbnail: undefined }>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await running(worker, async () => {
        const up = await client.submit("upper", "shout", { size: "md", cost: 1 });
        const hi = await client.submit("greet", undefined, { cost: 1 });
        assert.deepEqual(await follow(client, up), ["queued", "assigned", "started", "completed"]);
        assert.deepEqual(await follow(client, hi), ["queued", "assigned", "started", "completed"]);
        const u = await client.get(up);
        assert.deepEqual([u.state, u.result, u.error, u.exitCode, u.attempt, u.workerId], ["completed", "SHOUT", "", 0, 1, "ts-route-1"]);
        const h = await client.get(hi);
        assert.equal(h.result, `hello acme, job ${hi.id} attempt 1 kind greet on ts-route-1`);
        // A function is billed the wall time it took.
        assert.ok(h.cpu >= 250 && h.cpu < 2000, String(h.cpu));

        const bad = await client.submit("broken", undefined, { cost: 1, maxAttempts: 2 });
        assert.deepEqual(await follow(client, bad), ["queued", "assigned", "started", "requeued", "assigned", "started", "failed"]);
        const b = await client.get(bad);
        assert.deepEqual([b.state, b.attempt, b.failures, b.exitCode], ["failed", 2, 2, 1]);
        assert.ok(b.error.startsWith("Error: the payload is not a photo\n    at "), b.error);

        // Unrunnable, or a kind without a function in a job of no form (a
        // client of an earlier build; any worker is given it): failed at
        // once, no retry. (A function job of that kind is never given to
        // this worker: "a worker is given only the kinds it registered".)
        const no = await client.submit("refuse", undefined, { cost: 1, maxAttempts: 3 });
        assert.equal((await follow(client, no)).at(-1), "failed");
        const n = await client.get(no);
        assert.deepEqual([n.state, n.attempt, n.error], ["failed", 1, "version 3 payloads are not supported"]);
        const odd = await client.submit("thumbnail", undefined, { cost: 1, maxAttempts: 3, form: "any" });
        assert.equal((await follow(client, odd)).at(-1), "failed");
        const o = await client.get(odd);
        assert.deepEqual([o.state, o.attempt, o.exitCode], ["failed", 1, 127]);
        assert.equal(o.error, "no function for kind 'thumbnail' on this worker (worker ts-route-1, pool default); " +
          "its functions are for the kinds 'broken', 'greet', 'refuse', 'upper'");
        // A payload that is not JSON cannot be read by a typed function: failed at once.
        const raw = await client.submit("upper", new TextEncoder().encode("not json") as never, { cost: 1, maxAttempts: 3 });
        assert.equal((await follow(client, raw)).at(-1), "failed");
        const r = await client.get(raw);
        assert.deepEqual([r.attempt, r.error], [1, `job ${raw.id}: its payload is not JSON (Unexpected token 'o', "not json" is not valid JSON)`]);
      });
    } finally {
      client.close();
    }
  });

  test("a worker is given only the kinds it registered; a job of another kind waits for a worker of its own", async () => {
    // The jobs and workers of this test have a pool of their own, so that
    // no other test's job or worker takes part.
    await c.poolSet("kinds");
    const kinds = new Worker<KindsOfTest>({ servers: c.addrs, token: WORKER_TOKEN, pool: "kinds", id: "ts-kinds" });
    kinds.register("digest", (job, ctx) => `digest of ${job.payload} on ${ctx.workerId}`).register("resize", (job) => `resized ${job.payload}`);
    const thumbs = new Worker<KindsOfTest>({ servers: c.addrs, token: WORKER_TOKEN, pool: "kinds", id: "ts-thumbs" });
    thumbs.register("thumbnail", (job) => `thumbnail of ${job.payload}`);
    const client = new Client<KindsOfTest>({ servers: c.addrs, token: ACME_TOKEN });
    const until = async (id: number, pred: (j: Job) => boolean, timeout = 20_000): Promise<Job> => {
      const deadline = Date.now() + timeout;
      for (;;) {
        const j = await client.get(id);
        if (pred(j)) return j;
        if (Date.now() > deadline) assert.fail(`job ${id}: ${j.state} after ${timeout} ms`);
        await sleep(100);
      }
    };
    try {
      await running(kinds, async () => {
        const thumb = await client.submit("thumbnail", "t.png", { pool: "kinds", cost: 1, maxAttempts: 1 });
        const digest = await client.submit("digest", "d.txt", { pool: "kinds", cost: 1 });
        const resize = await client.submit("resize", "r.png", { pool: "kinds", cost: 1 });
        assert.deepEqual([thumb.form, digest.form, resize.form], ["function", "function", "function"]);
        for (const [job, result] of [[digest, "digest of d.txt on ts-kinds-1"], [resize, "resized r.png"]] as const) {
          const j = await until(job.id, (j) => j.done);
          assert.deepEqual([j.state, j.result, j.workerId, j.attempt, j.form], ["completed", result, "ts-kinds-1", 1, "function"]);
        }
        // The worker ran the two jobs behind the thumbnail, and was never
        // given it: it waits queued, no run, no failure.
        await sleep(1500);
        const t = await client.get(thumb);
        assert.deepEqual([t.state, t.attempt, t.failures, t.workerId, t.form], ["queued", 0, 0, "", "function"]);
        // What the cluster holds of the worker: the kinds its Hello named.
        const seen = (await c.workers()).filter((w) => w.workerId === "ts-kinds-1").map((w) => [w.commands, w.allKinds, w.kinds]);
        assert.deepEqual(seen, [[false, false, ["digest", "resize"]]]);

        // A job of that kind submitted with no form (as a client of an
        // earlier build does) goes to any worker: this one fails it for
        // good, as before kinds.
        const old = await client.submit("thumbnail", "", { pool: "kinds", cost: 1, maxAttempts: 3, form: "any" });
        const o = await until(old.id, (j) => j.done);
        assert.deepEqual([o.state, o.attempt, o.failures, o.exitCode, o.form], ["failed", 1, 1, 127, "any"]);

        // A worker that registered thumbnail connects: the job runs there,
        // at its first attempt.
        await running(thumbs, async () => {
          const j = await until(thumb.id, (j) => j.done);
          assert.deepEqual([j.state, j.result, j.workerId, j.attempt, j.failures], ["completed", "thumbnail of t.png", "ts-thumbs-1", 1, 0]);
        });
      });
    } finally {
      client.close();
    }
  });

  test("a schedule fires its job, which a worker runs; pause, run-now with a key, list and delete", async () => {
    const worker = new Worker<{ report: { day: string } }>({ servers: c.addrs, token: WORKER_TOKEN, size: "sm", id: "ts-sched" });
    worker.register("report", (job) => `report for ${job.payload.day}`);
    const client = new Client<{ report: { day: string } }>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await running(worker, async () => {
        const s = await client.setSchedule("ts-every", "@every 1s", "report", { day: "today" }, { cost: 1, overlap: "allow" });
        assert.deepEqual(
          [s.tenant, s.name, s.spec, s.zone, s.overlap, s.catchup, s.jitter, s.paused, s.kind, s.payload(), s.size, s.fired, s.specError],
          ["acme", "ts-every", "@every 1s", "UTC", "allow", 60_000, 0, false, "report", { day: "today" }, "sm", 0, ""],
        );
        assert.equal(s.nextSlots.length, 5);
        assert.equal(s.nextSlots[1].getTime() - s.nextSlots[0].getTime(), 1000);
        // Its first fire's job, run by the worker.
        let got = s;
        for (let i = 0; i < 100 && got.lastJob === 0; i++) {
          await sleep(100);
          got = await client.getSchedule("ts-every");
        }
        assert.ok(got.fired >= 1 && got.lastJob > 0, `fired ${got.fired}, last job ${got.lastJob}`);
        assert.deepEqual(await follow(client, got.lastJob), ["queued", "schedule_fired", "assigned", "started", "completed"]);
        const j = await client.get(got.lastJob);
        assert.equal(j.result, "report for today");
        const why = await client.explain(got.lastJob);
        assert.equal(why.schedule, "ts-every");
        assert.equal(j.key, `schedule/ts-every/${why.scheduleSlotMs}`);

        const paused = await client.pauseSchedule("ts-every");
        assert.equal(paused.paused, true);
        const a = await client.runScheduleNow("ts-every", { key: "deploy-1" });
        const b = await client.runScheduleNow("ts-every", { key: "deploy-1" });
        assert.deepEqual([a.created, b.created, b.job], [true, false, a.job]);
        assert.equal((await client.get(a.job)).key, "schedule/ts-every/run/deploy-1");
        const whyNow = await client.explain(a.job);
        assert.deepEqual([whyNow.schedule, whyNow.scheduleSlotMs, whyNow.scheduleRunKey], ["ts-every", 0, "deploy-1"]);
        const fresh = await client.runScheduleNow("ts-every");
        assert.ok(fresh.created && fresh.job !== a.job);
        assert.equal((await client.resumeSchedule("ts-every")).paused, false);

        const names: string[] = [];
        for await (const x of client.schedules()) names.push(x.name);
        assert.ok(names.includes("ts-every"), names.join(","));
        await client.deleteSchedule("ts-every");
        await refused(client.getSchedule("ts-every"), NotFound);
        const bad = await refused(client.setSchedule("ts-bad", "61 * * * *", "report", { day: "x" }, { cost: 1 }), InvalidArgument);
        assert.equal(bad.field, "spec");
        await refused(client.setSchedule("ts-bad", "@daily", "report", { day: "x" }, { cost: 1, overlap: "sometimes" as never }), InvalidArgument);
      });
    } finally {
      client.close();
    }
  });

  test("four slots run four jobs at once", async () => {
    const worker = new Worker<TestKinds>({ servers: c.addrs, token: WORKER_TOKEN, concurrency: 4, id: "ts-four" });
    // Each run waits for the three others: the jobs end only if four run at the same time.
    const inside: string[] = [];
    let release!: () => void;
    const all = new Promise<void>((r) => (release = r));
    worker.register("together", async (_job, ctx) => {
      inside.push(ctx.workerId);
      if (inside.length === 4) release();
      await all;
      return String(inside.indexOf(ctx.workerId));
    });
    const client = new Client<TestKinds>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await running(worker, async () => {
        const jobs = [];
        for (let i = 0; i < 4; i++) jobs.push(await client.submit("together", undefined, { cost: 1, key: `together-${i}` }));
        for (const j of jobs) assert.equal((await follow(client, j)).at(-1), "completed");
        const done = await Promise.all(jobs.map((j) => client.get(j)));
        assert.deepEqual(done.map((j) => j.result).sort(), ["0", "1", "2", "3"]);
        assert.deepEqual(done.map((j) => j.workerId).sort(), ["ts-four-1", "ts-four-2", "ts-four-3", "ts-four-4"]);
        assert.deepEqual([...inside].sort(), ["ts-four-1", "ts-four-2", "ts-four-3", "ts-four-4"]);
      });
    } finally {
      client.close();
    }
  });

  test("a cancel aborts ctx.signal", async () => {
    const worker = new Worker<TestKinds>({ servers: c.addrs, token: WORKER_TOKEN, id: "ts-cancel" });
    const seen: string[] = [];
    worker.register("hold", async (_job, ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      seen.push(String(ctx.signal.reason));
      return "stopped";
    });
    const client = new Client<TestKinds>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await running(worker, async () => {
        const job = await client.submit("hold", undefined, { cost: 1 });
        const kinds = [];
        for await (const ev of client.watch(job)) {
          kinds.push(ev.kind);
          if (ev.kind === "started") assert.deepEqual(await client.cancel(job), { state: "running", requested: true });
        }
        assert.deepEqual(kinds, ["queued", "assigned", "started", "cancel_requested", "cancelled"]);
        const got = await client.get(job);
        assert.equal(got.state, "cancelled");
        assert.ok(got.cpu < 5000);
      });
      assert.deepEqual(seen, ["requested"]);
    } finally {
      client.close();
    }
  });

  test("snooze runs the job again later without a failure (a snooze under 1 s held to it)", async () => {
    const warnings: string[] = [];
    const worker = new Worker<TestKinds>({ servers: c.addrs, token: WORKER_TOKEN, id: "ts-snooze", logger: (level, msg) => {
      if (level === "warn" && msg.startsWith("snooze")) warnings.push(msg);
    } });
    const runs: [number, number][] = [];
    worker.register("later", (job, ctx) => {
      runs.push([job.attempt, performance.now()]);
      if (job.attempt === 1) ctx.snooze(300);
      return "woke";
    });
    const client = new Client<TestKinds>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      await running(worker, async () => {
        const job = await client.submit("later", undefined, { cost: 1, maxAttempts: 1 });
        const evs = (await events(client, job)).map((e) => [e.kind, e.reason, e.attempt]);
        // Snoozed, the job waits scheduled, then runs again, no failure
        // counted (maxAttempts 1 would have failed it).
        assert.deepEqual(evs, [["queued", "", 0], ["assigned", "", 1], ["started", "", 1], ["scheduled", "snoozed", 1],
          ["released", "", 1], ["assigned", "", 2], ["started", "", 2], ["completed", "", 2]]);
        const got = await client.get(job);
        assert.deepEqual([got.state, got.result, got.attempt, got.failures, got.snoozes], ["completed", "woke", 2, 0, 0]);
        assert.deepEqual(runs.map(([a]) => a), [1, 2]);
        assert.ok(runs[1][1] - runs[0][1] >= 1000, `ran again after ${runs[1][1] - runs[0][1]} ms`);
        assert.deepEqual(warnings, [`snooze held to the cluster's bounds: job=${job.id} asked=300ms snooze=1000ms min=1000ms max=86400000ms`]);
      });
    } finally {
      client.close();
    }
    assert.throws(() => new Snooze(-1), InvalidArgument);
  });

  test("heartbeats carry a long run's CPU; stop({grace}) fails a run that outlasts it, for a retry", async () => {
    const worker = new Worker<TestKinds>({ servers: c.addrs, token: WORKER_TOKEN, id: "ts-grace" });
    const reasons: string[] = [];
    worker.register("hold", async (_job, ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      reasons.push(String(ctx.signal.reason));
      return "too late";
    });
    const client = new Client<TestKinds>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      const run = worker.run({ handleSignals: false });
      const job = await client.submit("hold", undefined, { cost: 1, maxAttempts: 3 });
      for await (const ev of client.watch(job)) if (ev.kind === "started") break;
      // Heartbeats (every second on this cluster) report the CPU so far.
      const cpu = await (async () => {
        for (let k = 0; k < 60; k++) {
          const j = await client.get(job);
          if (j.cpu > 0) return j.cpu;
          await sleep(100);
        }
        return 0;
      })();
      assert.ok(cpu >= 500 && cpu < 5000, String(cpu));
      const t0 = performance.now();
      await worker.stop({ grace: 500 });
      await run;
      assert.ok(performance.now() - t0 < 5000);
      assert.deepEqual(reasons, ["worker stopping"]);
      const got = await client.get(job);
      assert.deepEqual([got.state, got.failures, got.attempt], ["queued", 1, 1]);
      assert.equal(got.error, "the worker stopped: its grace of 0.5s ended before the run did");
      await client.cancel(job);
    } finally {
      client.close();
    }
  });

  test("a worker the cluster refuses for good stops", async () => {
    // A pool the cluster does not hold, a token it does not know: run()
    // rejects with the refusal instead of retrying for ever.
    const nowhere = new Worker({ servers: c.addrs, token: WORKER_TOKEN, pool: "nowhere", id: "ts-nowhere" });
    nowhere.register("x", () => undefined);
    const e = await refused(nowhere.run({ handleSignals: false }), NotFound);
    assert.equal(e.code, "NOT_FOUND");
    assert.ok(e.rawMessage.startsWith("worker 'ts-nowhere-1': "), e.rawMessage);
    assert.ok(e.rawMessage.includes("nowhere"));
    const stranger = new Worker({ servers: c.addrs, token: "not-a-token", id: "ts-stranger" });
    stranger.register("x", () => undefined);
    await refused(stranger.run({ handleSignals: false }), Unauthenticated);
  });
});

const EXAMPLE = join(ROOT, "examples", "typescript-worker");

describe("examples/typescript-worker", { skip, timeout: 60_000 }, () => {
  const procs: Proc[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.kill();
  });
  const start = (id: string, ...args: string[]) => {
    const p = new Proc(id, [process.execPath, join(EXAMPLE, "dist", "worker.js"), "--server", c.addrs.join(","), "--id", id, ...args],
      join(c.dir, `${id}.log`), { ...process.env, BARISTA_TOKEN: WORKER_TOKEN });
    procs.push(p);
    return p;
  };

  test("the example worker and submit program", async () => {
    const proc = start("ts-example", "--concurrency", "2");
    const submit = (...args: string[]) => {
      try {
        return { code: 0, out: execFileSync(process.execPath, [join(EXAMPLE, "dist", "submit.js"), "--server", c.addrs.join(","), ...args],
          { env: { ...process.env, BARISTA_TOKEN: ACME_TOKEN }, encoding: "utf8", timeout: 60_000 }) };
      } catch (e) {
        const err = e as { status: number; stdout: string };
        return { code: err.status, out: err.stdout };
      }
    };
    const first = submit("--key", "essay-1", "one two three\nfour five\n");
    assert.equal(first.code, 0, first.out);
    const lines = first.out.trimEnd().split("\n");
    assert.match(lines[0], /^job \d+ submitted$/);
    assert.deepEqual(lines.slice(1, -1).map((l) => l.split(" ")[1]), ["queued", "assigned", "started", "completed"]);
    assert.equal(lines.at(-1), '{"words":5,"lines":2}');
    const again = submit("--key", "essay-1", "one two three\nfour five\n");
    assert.equal(again.out.split("\n")[0], lines[0].replace("submitted", "exists"));
    assert.ok(proc.running());
  });

  test("SIGTERM lets the running job finish and takes no new one", async () => {
    const proc = start("ts-term", "--grace", "20");
    const client = new Client<{ wait: { seconds: number } }>({ servers: c.addrs, token: ACME_TOKEN });
    try {
      const long = await client.submit("wait", { seconds: 2 }, { cost: 2000 });
      for await (const ev of client.watch(long)) if (ev.kind === "started") break;
      const queued = await client.submit("wait", { seconds: 0 }, { cost: 1000 });
      proc.signal("SIGTERM");
      // The running job ends as it would have: completed, its result kept.
      assert.equal((await follow(client, long)).at(-1), "completed");
      assert.equal(await proc.wait(15_000), 0, proc.tail());
      const got = await client.get(long);
      assert.deepEqual([got.state, got.result, got.workerId], ["completed", "waited 2s", "ts-term-1"]);
      // The worker took no other job: the next one is still queued, never
      // dispatched, and no worker is left for it.
      const next = await client.get(queued);
      assert.deepEqual([next.state, next.attempt], ["queued", 0]);
      assert.equal((await client.explain(queued)).reason, "no_worker");
      await client.cancel(queued);
    } finally {
      client.close();
    }
    const log = proc.tail(200);
    assert.ok(log.includes("signal SIGTERM: stopping; the running jobs have 20s to finish"), log);
    assert.ok(log.includes("worker stopped"), log);
  });
});

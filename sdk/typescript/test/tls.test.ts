/**
 * A cluster that serves gRPC over TLS: the client and the worker with its
 * CA (and a client certificate), and a plaintext client refused.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { Client, Unavailable, Worker } from "../src/index.js";
import { ACME_TOKEN, ADMIN_TOKEN, Cluster, WORKER_TOKEN } from "./cluster.js";
import { follow, refused, running } from "./helpers.js";

const skip = Cluster.available() ? false : "bin/barista is missing: run make build";
let c: Cluster | undefined;
after(async () => {
  await c?.stop();
  c?.remove();
});

test("the client and the worker over TLS", { skip, timeout: 60_000 }, async () => {
  c = new Cluster(1).withTls();
  await c.start();
  const tls = c.tls()!;
  const admin = new Client({ servers: c.addrs, token: ADMIN_TOKEN, tls });
  await admin.upsertTenant("acme", { tier: "gold" });
  admin.close();
  // A client certificate too (mutual TLS).
  const dir = c.tlsDir!;
  const client = new Client({
    servers: c.addrs, token: ACME_TOKEN,
    tls: { ca: tls.ca, cert: readFileSync(join(dir, "client.pem")), key: readFileSync(join(dir, "client-key.pem")) },
  });
  const worker = new Worker({ servers: c.addrs, token: WORKER_TOKEN, tls, id: "ts-tls", logger: () => undefined });
  worker.register("echo", (job) => `echo ${String(job.payload)}`);
  try {
    await running(worker, async () => {
      const job = await client.submit("echo", "over tls", { cost: 1 });
      assert.deepEqual(await follow(client, job), ["queued", "assigned", "started", "completed"]);
      assert.equal((await client.get(job)).result, "echo over tls");
    });
  } finally {
    client.close();
  }
  // Plaintext to a TLS listener: no answer the client can read.
  const plain = new Client({ servers: c.addrs, token: ACME_TOKEN, callTimeout: 1000 });
  const e = await refused(plain.get(1), Unavailable);
  assert.equal(e.code, "UNAVAILABLE");
  plain.close();
});

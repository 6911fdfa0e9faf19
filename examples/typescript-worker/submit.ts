// Submits one job to the example worker and follows it to its end:
//
//   BARISTA_TOKEN=... node dist/submit.js --server 10.0.0.1:7400 --kind wordcount --key essay-1 "the text to count"
//
// It prints each event of the job, then its result (or its error), and
// exits 0 if the job completed, 1 otherwise. With --key, running it again
// finds the same job instead of making another.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { BaristaError, Client } from "@baristahq/barista";
import type { Kinds } from "./kinds.js";

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    server: { type: "string", default: process.env.BARISTA_ADDR ?? "127.0.0.1:7400" },
    "tls-ca": { type: "string", default: process.env.BARISTA_TLS_CA },
    tenant: { type: "string" },
    kind: { type: "string", default: "wordcount" },
    cost: { type: "string", default: "1000" },
    key: { type: "string" },
  },
});

const client = new Client<Kinds>({
  servers: args.server!,
  token: process.env.BARISTA_TOKEN,
  tls: args["tls-ca"] ? { ca: readFileSync(args["tls-ca"]) } : undefined,
});
const text = positionals.join(" ");
const opts = { tenant: args.tenant, cost: Number(args.cost), key: args.key };
try {
  const job = args.kind === "wait"
    ? await client.submit("wait", { seconds: Number(text) }, opts)
    : await client.submit("wordcount", { text }, opts);
  console.log(`job ${job.id} ${job.created ? "submitted" : "exists"}`);
  for await (const ev of client.watch(job)) console.log(`${ev.at?.toISOString()} ${ev.kind} ${ev.workerId}`.trimEnd());
  const done = await client.get(job);
  console.log(done.state === "completed" ? done.result : `${done.state}: ${done.error}`);
  process.exitCode = done.state === "completed" ? 0 : 1;
} catch (e) {
  console.error(e instanceof BaristaError ? e.message : String(e));
  process.exitCode = 1;
} finally {
  client.close();
}

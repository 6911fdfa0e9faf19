// An example worker of TypeScript functions (the barista SDK,
// sdk/typescript): it runs each job it is given as a call of a function of
// this process, chosen by the job's kind, and reports what the function
// returns as the job's result.
//
//   npm ci && npm run build
//   BARISTA_TOKEN=... node dist/worker.js --server 10.0.0.1:7400,10.0.0.2:7400 --id words --concurrency 4
//
// Its kinds (kinds.ts):
//   wordcount  {text}: the result {"words": N, "lines": N}. A text that is
//              not a string can never run: the job fails at once, no retry.
//   wait       {seconds}: waits that long and answers "waited Ns"; a
//              cancel stops the wait (the job ends cancelled). A wait of
//              more than an hour is snoozed for 10 s first.
//
// The worker tells the cluster these two kinds: it is given only jobs of
// them (and jobs submitted with no form), never a command job or a job of
// another kind, which wait for a worker that runs them.
//
// The first SIGINT or SIGTERM stops the worker gracefully: it takes no new
// job, lets the running ones finish within --grace seconds, and exits 0; a
// second signal stops the running ones at once (they are retried
// elsewhere).

import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";
import { BaristaError, Unrunnable, Worker, type SizeName } from "@baristahq/barista";
import type { Kinds } from "./kinds.js";

const { values: args } = parseArgs({
  options: {
    server: { type: "string", default: process.env.BARISTA_ADDR ?? "127.0.0.1:7400" },
    "token-file": { type: "string" },
    "tls-ca": { type: "string", default: process.env.BARISTA_TLS_CA },
    id: { type: "string" },
    size: { type: "string", default: "sm" },
    pool: { type: "string" },
    concurrency: { type: "string", default: "1" },
    grace: { type: "string", default: "30" },
  },
});

const token = args["token-file"] ? readFileSync(args["token-file"], "utf8").trim() : process.env.BARISTA_TOKEN;
const log = (level: string, msg: string) => console.log(`${new Date().toISOString()} ${level} ${msg}`);

let worker: Worker<Kinds>;
try {
  worker = new Worker<Kinds>({
    servers: args.server!,
    token,
    tls: args["tls-ca"] ? { ca: readFileSync(args["tls-ca"]) } : undefined,
    id: args.id,
    size: args.size as SizeName,
    pool: args.pool,
    concurrency: Number(args.concurrency),
    logger: log,
  });
} catch (e) {
  console.error(String(e));
  process.exit(2);
}

worker.register("wordcount", (job) => {
  const { text } = job.payload;
  if (typeof text !== "string") throw new Unrunnable(`payload: text is a ${typeof text}, not a string`);
  const lines = text.split("\n").filter((l) => l !== "");
  const words = lines.reduce((n, l) => n + l.split(/\s+/).filter((w) => w !== "").length, 0);
  console.log(`job ${job.id} of ${job.tenant}: ${words} words`);
  return { words, lines: lines.length };
});

worker.register("wait", async (job, ctx) => {
  const { seconds } = job.payload;
  if (typeof seconds !== "number" || !(seconds >= 0)) throw new Unrunnable(`payload: ${JSON.stringify(job.payload)} has no number of seconds`);
  if (seconds > 3600 && job.attempt === 1) ctx.snooze(10_000);
  await delay(seconds * 1000, undefined, { signal: ctx.signal }); // a cancel rejects it
  return `waited ${seconds}s`;
});

try {
  await worker.run({ grace: Number(args.grace) * 1000 });
} catch (e) {
  // The cluster refuses this worker for good (a token it does not know, a
  // binding that does not cover the ID, no such pool).
  console.error(e instanceof BaristaError ? e.message : String(e));
  process.exit(1);
}

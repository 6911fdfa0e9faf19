/**
 * barista: the TypeScript SDK of the barista job dispatcher. A client that
 * submits, reads, lists, cancels, explains and watches jobs (and makes the
 * admin calls a SaaS makes at sign-up), and a worker that runs functions
 * of this process, routed by the job's kind. See docs/sdk-typescript.md.
 *
 *     import { Client } from "@baristahq/barista";
 *
 *     const c = new Client({ servers: ["10.0.0.1:7400", "10.0.0.2:7400"], token });
 *     const job = await c.submit("resize", { image: "photo-17.jpg" }, { size: "md", cost: 30_000, key: "photo-17" });
 *     for await (const ev of c.watch(job)) console.log(ev.kind, ev.at);
 */

export { Client } from "./client.js";
export type { AnyKinds, ClientOptions, EvidenceOptions, JobRef, JobSpec, JobTypes, JobsOptions, ReadOptions, RunNow, ScheduleOptions, SubmitOptions, TenantSettings, WatchOptions } from "./client.js";
export type { Logger, Tls, TlsOptions } from "./conn.js";
export type { FormName, GroupOrderName, OverlapName, Priority, SizeName, TierName } from "./convert.js";
export * from "./errors.js";
export { REASONS, ERROR_DOMAIN } from "./reasons.js";
export type { CodeName, Reason } from "./reasons.js";
export { TERMINAL_STATES } from "./models.js";
export type { Cancel, Event, Explanation, GroupUsage, Job, Place, Schedule, Submitted, Subscription, Tenant, Usage } from "./models.js";
export { CERTIFICATE_REASONS, CERTIFICATE_VERSION, certificateDigest, verifyCertificate } from "./evidence.js";
export type { Certificate, CertificateFailure, CertificateKey, CertificateLine, CertificateReport } from "./evidence.js";
export { Worker, STOP_REPORT_WAIT } from "./worker.js";
export type { RunOptions, WorkerOptions } from "./worker.js";
export { Snooze, Unrunnable } from "./run.js";
export { MAX_BATCH, MAX_BATCH_BYTES, MAX_MESSAGE_BYTES, MAX_SNOOZE_MS, MIN_SNOOZE_MS } from "./limits.js";
export type { Handler, JobContext, WorkerJob } from "./run.js";

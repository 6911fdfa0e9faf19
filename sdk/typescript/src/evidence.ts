/**
 * The evidence of fairness (docs/fairness.md): a certificate's verifier,
 * the port of the Go client's (internal/evidence), held to the same
 * answers by the vectors both read (internal/evidence/testdata/vectors).
 * It needs no cluster: anyone holding a certificate can check it.
 *
 *     const report = verifyCertificate(readFileSync("cert.json", "utf8"));
 *     if (!report.ok) for (const f of report.failures) console.log(f.line, f.index, f.why);
 */

import { createHash } from "node:crypto";

/** The certificate format this verifier reads. */
export const CERTIFICATE_VERSION = 1;

/** The reasons a candidate was not chosen, in the order a certificate gives the first that holds. */
export const CERTIFICATE_REASONS = ["size", "class", "deadline", "key", "fit", "reserve"] as const;

/** A job's key in a certificate. start is a decimal string (virtual µs; it may pass 2^53). */
export interface CertificateKey {
  tenant?: string;
  job: number;
  class: string;
  size: string;
  deadline_at_ms: number;
  start: string;
  tier: number;
  reason?: string;
}

/** One dispatch of a certificate. */
export interface CertificateLine {
  index: number;
  at_ms: number;
  pool: string;
  worker_size: string;
  chosen: CertificateKey;
  mine: CertificateKey[];
}

/** A certificate of fairness (its JSON document, parsed). */
export interface Certificate {
  version: number;
  tenant: string;
  window: { from_index: number; to_index: number; from_ms: number; to_ms: number; open: boolean; start_hash: string; end_hash: string };
  policy: string;
  margin_us: number;
  clamp: string;
  lines: CertificateLine[];
  digest: string;
}

/** A check a certificate failed: line (its position in lines, -1 for the whole certificate), its log index and job (0: none), and why. */
export interface CertificateFailure {
  line: number;
  index: number;
  job: number;
  why: string;
}

/** What verifyCertificate found: the lines and candidates checked, and every failure (none: it holds). */
export interface CertificateReport {
  lines: number;
  candidates: number;
  failures: CertificateFailure[];
  readonly ok: boolean;
}

const SIZE: Record<string, number> = { sm: 0, md: 1, lg: 2 };
const CLASS: Record<string, number> = { critical: 3, high: 2, normal: 1, low: 0 }; // higher goes first

class Bad extends Error {}

function holds(cert: Certificate, reason: string, ws: string, c: CertificateKey, m: CertificateKey): boolean {
  const w = SIZE[ws], cs = SIZE[c.size], ms = SIZE[m.size], cc = CLASS[c.class], mc = CLASS[m.class];
  if (w === undefined || cs === undefined || ms === undefined || cc === undefined || mc === undefined) {
    throw new Bad(`size or class of job ${c.job} or ${m.job}`);
  }
  let cStart: bigint, mStart: bigint;
  try {
    cStart = BigInt(c.start);
    mStart = BigInt(m.start);
  } catch {
    throw new Bad(`start of job ${c.job} or ${m.job}`);
  }
  const margin = BigInt(cert.margin_us ?? 0);
  const cdl = (c.deadline_at_ms ?? 0) !== 0, mdl = (m.deadline_at_ms ?? 0) !== 0;
  const same = cc === mc;
  switch (reason) {
    case "size":
      return ms > w;
    case "class":
      return cc > mc;
    case "deadline":
      return same && cdl && !mdl;
    case "key":
      if (!same) return false;
      if (cdl && mdl) return c.deadline_at_ms < m.deadline_at_ms || (c.deadline_at_ms === m.deadline_at_ms && c.job < m.job);
      if (cdl || mdl || (cs === w) !== (ms === w)) return false;
      if (cStart !== mStart) return cStart < mStart;
      if (c.tier !== m.tier) return c.tier > m.tier;
      if (cs !== ms) return cs > ms;
      return c.job < m.job;
    case "fit":
      if (!same || cdl || mdl || cs !== w || ms >= w) return false;
      if (cert.policy === "prefer-fit") return true;
      if (cert.policy === "reserve") return cStart - mStart <= margin;
      throw new Bad(`policy ${JSON.stringify(cert.policy)}`);
    case "reserve":
      if (!same || cdl || mdl || cs >= w || ms !== w || cert.policy !== "reserve") return false;
      return mStart - cStart > margin;
  }
  throw new Bad(`unknown reason ${JSON.stringify(reason)}`);
}

/** The first reason that lets c go before m on a worker of size ws, or "" when none does. */
export function reasonFor(cert: Certificate, ws: string, c: CertificateKey, m: CertificateKey): string {
  for (const r of CERTIFICATE_REASONS) {
    try {
      if (holds(cert, r, ws, c, m)) return r;
    } catch {
      return "";
    }
  }
  return "";
}

function canon(parts: (string | number | boolean)[]): string {
  return parts.map((p) => `${p}\n`).join("");
}

function keyParts(k: CertificateKey): (string | number)[] {
  return [k.tenant ?? "", k.job, k.class, k.size, k.deadline_at_ms ?? 0, k.start, k.tier, k.reason ?? ""];
}

/** The digest a certificate carries: SHA-256 over the header's canonical text, then over each line's, chained. */
export function certificateDigest(cert: Certificate): string {
  const w = cert.window;
  let h = createHash("sha256")
    .update(canon(["barista-certificate", cert.version, cert.tenant, w.from_index, w.to_index, w.from_ms, w.to_ms, w.open ? "true" : "false",
      w.start_hash, w.end_hash, cert.policy, cert.margin_us, cert.clamp]))
    .digest();
  for (const line of cert.lines) {
    const parts: (string | number)[] = [line.index, line.at_ms, line.pool, line.worker_size, ...keyParts(line.chosen), line.mine.length];
    for (const m of line.mine) parts.push(...keyParts(m));
    h = createHash("sha256").update(h).update(canon(parts)).digest();
  }
  return h.toString("hex");
}

function opaque(name: string): boolean {
  return /^t[1-9][0-9]*$/.test(name);
}

function keyText(k: CertificateKey): string {
  let s = `${k.class} ${k.size} start ${k.start} tier ${k.tier}`;
  if (k.deadline_at_ms) s += ` deadline ${k.deadline_at_ms}`;
  return s;
}

/**
 * Checks a certificate (its JSON document, or the parsed object): its
 * digest, that its lines are in log and time order inside its window, and
 * that every dispatch went to a job with a lower key or a rule of the
 * order that outranks each of the tenant's candidates (a higher class, a
 * deadline, a worker that could not take it). Throws TypeError for a
 * document that is not a certificate of this version.
 */
export function verifyCertificate(doc: string | Certificate): CertificateReport {
  const cert: Certificate = typeof doc === "string" ? JSON.parse(doc) : doc;
  if (cert === null || typeof cert !== "object" || cert.version !== CERTIFICATE_VERSION) {
    throw new TypeError(`not a certificate of version ${CERTIFICATE_VERSION}`);
  }
  const failures: CertificateFailure[] = [];
  const fail = (line: number, index: number, job: number, why: string) => failures.push({ line, index, job, why });
  const got = certificateDigest(cert);
  if (got !== cert.digest) fail(-1, 0, 0, `the digest is ${cert.digest} but the certificate's content hashes to ${got}: it was changed after it was issued`);
  if (cert.policy !== "prefer-fit" && cert.policy !== "reserve") fail(-1, 0, 0, `unknown policy ${JSON.stringify(cert.policy)}`);
  const w = cert.window;
  let candidates = 0;
  let prev: CertificateLine | undefined;
  cert.lines.forEach((line, i) => {
    const idx = line.index, at = line.at_ms;
    if (idx < w.from_index || idx > w.to_index) fail(i, idx, 0, `index ${idx} is outside the window ${w.from_index}..${w.to_index}`);
    if (at < w.from_ms || at > w.to_ms) fail(i, idx, 0, `time ${at} is outside the window ${w.from_ms}..${w.to_ms}`);
    if (prev !== undefined && (idx < prev.index || at < prev.at_ms)) {
      fail(i, idx, 0, `out of order: index ${idx} at ${at} ms after index ${prev.index} at ${prev.at_ms} ms`);
    }
    prev = line;
    const c = line.chosen, ws = line.worker_size;
    if (c.tenant !== "self" && !opaque(c.tenant ?? "")) fail(i, idx, c.job, `the chosen job's tenant ${JSON.stringify(c.tenant)} is neither "self" nor an opaque name`);
    if ((SIZE[c.size] ?? 0) > (SIZE[ws] ?? 0)) fail(i, idx, c.job, `a ${ws} worker was given the ${c.size} job ${c.job}`);
    if (line.mine.length === 0 && c.tenant !== "self") fail(i, idx, c.job, "a line without a candidate of the tenant's");
    for (const m of line.mine) {
      candidates++;
      if (m.job === c.job) {
        fail(i, idx, m.job, `job ${m.job} is both chosen and a candidate not chosen`);
        continue;
      }
      const reason = m.reason ?? "";
      let ok = false;
      try {
        ok = reason !== "" && holds(cert, reason, ws, c, m);
      } catch (e) {
        fail(i, idx, m.job, `candidate job ${m.job}: ${(e as Error).message}`);
        continue;
      }
      if (ok) continue;
      if (reason === "") {
        fail(i, idx, m.job, `job ${c.job} (${keyText(c)}) went before candidate job ${m.job} (${keyText(m)}) and no rule of the order lets it`);
      } else {
        const r = reasonFor(cert, ws, c, m);
        const why = r ? `the rule that does is ${r}` : "no rule of the order lets it";
        fail(i, idx, m.job, `job ${c.job} (${keyText(c)}) went before candidate job ${m.job} (${keyText(m)}) for reason ${JSON.stringify(reason)}, which does not hold: ${why}`);
      }
    }
  });
  return { lines: cert.lines.length, candidates, failures, get ok() { return failures.length === 0; } };
}

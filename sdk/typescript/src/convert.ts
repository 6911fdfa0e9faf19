/**
 * Conversions between the SDK's values (milliseconds, Dates, size and
 * priority names, payloads) and the wire's (int64 milliseconds, uint64
 * IDs, enums, bytes).
 */

import { Class, GroupOrder, JobForm, Overlap, Size, Tier } from "./gen/types_pb.js";
import type { ClockNow } from "./gen/client_pb.js";
import { InvalidArgument, Internal } from "./errors.js";

/** A job's size class: the smallest worker size that may run it. */
export type SizeName = "sm" | "md" | "lg";
/** A job's priority class. */
export type Priority = "critical" | "high" | "normal" | "low";
/** A tenant's tier. */
export type TierName = "free" | "bronze" | "silver" | "gold" | "diamond";
/** The order of a tenant's groups. */
export type GroupOrderName = "fifo" | "fair";
/**
 * Which workers run a job (SPEC §3 "Kinds"): a function job only a worker
 * that registered its kind, a command job a worker that runs command
 * lines, a job of form any every worker.
 */
export type FormName = "function" | "command" | "any";
/**
 * What a schedule's slot does while its previous job has not ended
 * (docs/schedules.md): skip (no fire while one waits or runs),
 * buffer_one (no fire while one waits to start), allow (every slot fires).
 */
export type OverlapName = "skip" | "buffer_one" | "allow";

const OVERLAPS: Record<OverlapName, Overlap> = { skip: Overlap.SKIP, buffer_one: Overlap.BUFFER_ONE, allow: Overlap.ALLOW };

const SIZES: Record<SizeName, Size> = { sm: Size.SM, md: Size.MD, lg: Size.LG };
const PRIORITIES: Record<Priority, Class> = {
  critical: Class.CRITICAL,
  high: Class.HIGH,
  normal: Class.NORMAL,
  low: Class.LOW,
};
const FORMS: Record<FormName, JobForm> = {
  any: JobForm.JOB_FORM_UNSPECIFIED,
  command: JobForm.COMMAND,
  function: JobForm.FUNCTION,
};
const TIERS: Record<TierName, Tier> = {
  free: Tier.FREE,
  bronze: Tier.BRONZE,
  silver: Tier.SILVER,
  gold: Tier.GOLD,
  diamond: Tier.DIAMOND,
};

function lookup<K extends string, V>(table: Record<K, V>, value: unknown, what: string, want: string): V {
  if (typeof value === "string" && Object.prototype.hasOwnProperty.call(table, value.toLowerCase())) {
    return table[value.toLowerCase() as K];
  }
  throw new InvalidArgument(`${what}: ${JSON.stringify(value)} (want ${want})`, { field: what });
}

function nameOf<K extends string, V>(table: Record<K, V>, value: V, dflt: K): K {
  for (const k of Object.keys(table) as K[]) if (table[k] === value) return k;
  return dflt;
}

export const size = (v: unknown, what = "size"): Size => lookup(SIZES, v, what, "sm, md or lg");
export const sizeName = (v: Size): SizeName => nameOf(SIZES, v, "sm");
export const priority = (v: unknown): Class =>
  v === undefined ? Class.CLASS_UNSPECIFIED : lookup(PRIORITIES, v, "priority", "critical, high, normal or low");
export const priorityName = (v: Class): Priority => nameOf(PRIORITIES, v, "normal");
/** The form of a submit: undefined is a function job of its kind when it names one, else a job any worker runs. */
export function jobForm(v: unknown, kind: string): JobForm {
  if (v === undefined) return kind ? JobForm.FUNCTION : JobForm.JOB_FORM_UNSPECIFIED;
  const form = lookup(FORMS, v, "form", "function, command or any");
  if (form === JobForm.FUNCTION && !kind) throw new InvalidArgument("form: a function job names its kind", { field: "form" });
  return form;
}
export const formName = (v: JobForm): FormName => nameOf(FORMS, v, "any");
export const tier = (v: unknown): Tier => lookup(TIERS, v, "tier", "free, bronze, silver, gold or diamond");
export const tierName = (v: Tier): TierName | "" => (v === Tier.TIER_UNSPECIFIED ? "" : nameOf(TIERS, v, "free"));
export const groupOrder = (v: unknown): GroupOrder =>
  lookup({ fifo: GroupOrder.GROUP_FIFO, fair: GroupOrder.GROUP_FAIR }, v, "group_order", "fifo or fair");
export const overlap = (v: unknown): Overlap =>
  v === undefined ? Overlap.UNSPECIFIED : lookup(OVERLAPS, v, "overlap", "skip, buffer_one or allow");
export const overlapName = (v: Overlap): OverlapName => nameOf(OVERLAPS, v, "skip");
export const groupOrderName = (v: GroupOrder): GroupOrderName => (v === GroupOrder.GROUP_FAIR ? "fair" : "fifo");

/**
 * A duration in milliseconds, as the wire's int64: whole milliseconds
 * (rounded to the nearest); undefined is 0 (left out). A negative one, one
 * that is not a finite number, or a positive one under half a millisecond
 * is refused: the wire would read 0 as "none".
 */
export function millis(value: number | undefined, what: string): bigint {
  if (value === undefined) return 0n;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new InvalidArgument(`${what}: ${String(value)} is not a number of milliseconds`, { field: what });
  }
  if (value < 0) throw new InvalidArgument(`${what}: ${value} is negative`, { field: what });
  const ms = Math.round(value);
  if (value > 0 && ms === 0) throw new InvalidArgument(`${what}: ${value} is under a millisecond`, { field: what });
  return BigInt(ms);
}

/** A deadline (a Date, or milliseconds from now) as milliseconds from the submit, rounded up. */
export function deadlineMillis(value: Date | number | undefined, now: number): bigint {
  if (value === undefined) return 0n;
  if (value instanceof Date) {
    const left = value.getTime() - now;
    if (!Number.isFinite(left)) throw new InvalidArgument("deadline: an invalid Date", { field: "deadline" });
    if (left <= 0) throw new InvalidArgument(`deadline: ${value.toISOString()} has passed`, { field: "deadline" });
    return BigInt(Math.ceil(left));
  }
  return millis(value, "deadline");
}

/** A uint64 or int64 of the wire as a number; one past 2^53 cannot be one. */
export function num(v: bigint, what = "value"): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Internal(`${what}: ${v} is beyond the integers a number holds exactly`);
  return n;
}

/** A duration of the wire (ms, 0 = none) as milliseconds or undefined. */
export const optMs = (v: bigint): number | undefined => (v === 0n ? undefined : Number(v));

/** A wall clock of the wire (ms since the epoch, 0 = none) as a Date. */
export const wall = (ms: bigint): Date | undefined => (ms === 0n ? undefined : new Date(Number(ms)));

/**
 * The wall time of a cluster time of an answer, by the answer's ClockNow
 * (cluster time pauses while no leader runs, so it is not a wall time
 * itself); undefined for 0 or an answer without one.
 */
export function clusterToWall(now: ClockNow | undefined, clusterMs: bigint): Date | undefined {
  if (clusterMs === 0n || now === undefined || now.wallMs === 0n) return undefined;
  return new Date(Number(now.wallMs + (clusterMs - now.clusterMs)));
}

/** A job ID (a number, or a job) as the wire's. */
export function jobId(job: number | bigint | { id: number }): bigint {
  const id = typeof job === "object" && job !== null ? job.id : job;
  if (typeof id === "bigint" && id > 0n) return id;
  if (typeof id === "number" && Number.isSafeInteger(id) && id > 0) return BigInt(id);
  throw new InvalidArgument(`job: ${String(id)} is not a job ID`, { field: "job" });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A payload's bytes: a Uint8Array (a Buffer too) as it is; anything else
 * as its JSON (undefined: none). A value JSON cannot encode is refused.
 */
export function encodePayload(payload: unknown): Uint8Array {
  if (payload === undefined) return new Uint8Array(0);
  if (payload instanceof Uint8Array) return payload;
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (e) {
    throw new InvalidArgument(`payload: not JSON: ${(e as Error).message}`, { field: "payload" });
  }
  if (text === undefined) throw new InvalidArgument(`payload: a ${typeof payload} has no JSON`, { field: "payload" });
  return encoder.encode(text);
}

/** A payload's JSON value (an empty payload: undefined). */
export function decodePayload<T>(bytes: Uint8Array): T {
  if (bytes.length === 0) return undefined as T;
  return JSON.parse(decoder.decode(bytes)) as T;
}

/** The bound of a job's output tails (internal/text.MaxOutputTail). */
export const MAX_OUTPUT_TAIL = 4096;

/**
 * The last 4 KiB of an output as valid UTF-8, cut at a character boundary
 * (what a Finished's tails hold).
 */
export function outputTail(text: string | Uint8Array): string {
  let data = typeof text === "string" ? encoder.encode(text) : text;
  if (data.length <= MAX_OUTPUT_TAIL) return typeof text === "string" ? text : decoder.decode(data);
  data = data.subarray(data.length - 4 * MAX_OUTPUT_TAIL);
  data = encoder.encode(decoder.decode(data)); // invalid sequences become U+FFFD
  data = data.subarray(Math.max(0, data.length - MAX_OUTPUT_TAIL));
  let i = 0;
  while (i < data.length && (data[i] & 0xc0) === 0x80) i++; // start at a character's first byte
  return decoder.decode(data.subarray(i));
}

/**
 * What needs no cluster: the table of reasons against the enum, the
 * error classes made from it, the conversions, and the committed generated
 * code against what make proto-typescript makes.
 */

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import * as sdk from "../src/index.js";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema, StatusSchema } from "../src/gen/rpc_status_pb.js";
import { JobForm, ReasonSchema } from "../src/gen/types_pb.js";
import { submitRequest } from "../src/client.js";
import { BaristaError, errorClass, fromResult, makeError } from "../src/errors.js";
import { REASONS, type Reason } from "../src/reasons.js";
import * as cv from "../src/convert.js";
import { silenceLimit } from "../src/slot.js";
import { ROOT } from "./cluster.js";

test("the table of reasons is the enum Reason (proto/types.proto), in its order", () => {
  const names = ReasonSchema.values.filter((v) => v.number !== 0).map((v) => v.name);
  assert.ok(names.length >= 13, `only ${names.length} reasons in the enum`);
  assert.deepEqual(Object.keys(REASONS), names);
});

test("docs/sdk-typescript.md lists each reason's class", () => {
  const doc = readFileSync(join(ROOT, "docs", "sdk-typescript.md"), "utf8");
  for (const [reason, row] of Object.entries(REASONS)) {
    assert.ok(doc.includes(`| \`${row.className}\` (`) && doc.includes(`| \`${reason}\``), `${row.className} (${reason}) is not in the docs' table`);
  }
});

test("each reason has its class, a subclass of its code's, exported by its name", () => {
  const exported = sdk as unknown as Record<string, typeof BaristaError>;
  for (const [reason, row] of Object.entries(REASONS)) {
    const cls = exported[row.className];
    assert.ok(cls, `${row.className} is not exported`);
    assert.equal(cls.name, row.className);
    assert.equal(errorClass(row.code, reason), cls);
    const e = makeError(row.code, "why", { reason });
    assert.ok(e instanceof cls && e instanceof BaristaError && e instanceof Error);
    assert.deepEqual([e.code, e.reason, e.message, e.rawMessage, e.name], [row.code, reason, `${row.code}: why`, "why", row.className]);
    const codeClass = errorClass(row.code);
    assert.ok(e instanceof codeClass && cls !== codeClass);
    // A reason sent with another code than its own is only its code's.
    const other = row.code === "NOT_FOUND" ? "INTERNAL" : "NOT_FOUND";
    assert.equal(makeError(other, "x", { reason }).constructor, errorClass(other));
  }
  // A class per code, exported by its name.
  for (const [code, name] of [["NOT_FOUND", "NotFound"], ["INVALID_ARGUMENT", "InvalidArgument"], ["UNAVAILABLE", "Unavailable"],
    ["RESOURCE_EXHAUSTED", "ResourceExhausted"], ["UNAUTHENTICATED", "Unauthenticated"]] as const) {
    assert.equal(errorClass(code), exported[name]);
    assert.equal(new exported[name]("m").code, code);
  }
  assert.equal(errorClass("NO_SUCH_CODE"), sdk.Unknown);
  assert.equal(new sdk.ClientClosed("closed").code, "CANCELLED");
  const reasons: Reason[] = ["QUOTA_EXCEEDED", "RATE_LIMITED"];
  assert.ok(reasons.every((r) => r in REASONS));
});

/** A google.rpc.Status in wire form, as a SubmitResult's status holds it. */
function statusBytes(code: number, message: string, details: { type: string; value: Uint8Array }[]): Uint8Array {
  const any = details.map((d) => ({ typeUrl: "type.googleapis.com/" + d.type, value: d.value }));
  return toBinary(StatusSchema, create(StatusSchema, { code, message, details: any }));
}

test("a batch item's refusal is read from its status: its reason's class, field and retry delay", () => {
  const info = (reason: string, metadata: Record<string, string> = {}, domain = "barista") =>
    ({ type: "google.rpc.ErrorInfo", value: toBinary(ErrorInfoSchema, create(ErrorInfoSchema, { reason, domain, metadata })) });
  const retry = (ms: number) => ({
    type: "google.rpc.RetryInfo",
    value: toBinary(RetryInfoSchema, create(RetryInfoSchema, { retryDelay: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 } })),
  });
  const bad = (field: string) => ({
    type: "google.rpc.BadRequest",
    value: toBinary(BadRequestSchema, create(BadRequestSchema, { fieldViolations: [{ field, description: "no" }] })),
  });

  // The plain fields are for JSON readers: what the status says wins.
  const rate = fromResult({ status: statusBytes(8, "submit_rate: tenant t may submit 1/1m0s", [info("RATE_LIMITED"), retry(5500)]), error: "ignored" });
  assert.ok(rate instanceof sdk.RateLimited && rate instanceof sdk.ResourceExhausted);
  assert.deepEqual([rate.code, rate.reason, rate.retryAfter, rate.rawMessage, rate.field], ["RESOURCE_EXHAUSTED", "RATE_LIMITED", 5500, "submit_rate: tenant t may submit 1/1m0s", undefined]);

  // The field: the ErrorInfo's metadata, else a BadRequest's.
  const pool = fromResult({ status: statusBytes(5, "pool: unknown pool \"gpu\"", [info("POOL_UNKNOWN", { field: "pool" })]), error: "" });
  assert.ok(pool instanceof sdk.PoolUnknown);
  assert.deepEqual([pool.code, pool.reason, pool.field, pool.metadata, pool.retryAfter], ["NOT_FOUND", "POOL_UNKNOWN", "pool", { field: "pool" }, undefined]);
  const size = fromResult({ status: statusBytes(3, "size: want sm, md or lg", [bad("size")]), error: "" });
  assert.deepEqual([size!.constructor, size!.code, size!.reason, size!.field], [sdk.InvalidArgument, "INVALID_ARGUMENT", undefined, "size"]);
  const both = fromResult({ status: statusBytes(3, "x", [bad("jobs[0].size"), info("TOO_LARGE", { field: "payload" })]), error: "" });
  assert.deepEqual([both!.constructor, both!.field], [sdk.TooLarge, "payload"]);

  // A reason of another domain, or sent with another code than its own, is only its code's.
  const foreign = fromResult({ status: statusBytes(8, "x", [info("RATE_LIMITED", {}, "example.com")]), error: "" });
  assert.deepEqual([foreign!.constructor, foreign!.reason], [sdk.ResourceExhausted, undefined]);
  const odd = fromResult({ status: statusBytes(5, "x", [info("RATE_LIMITED")]), error: "" });
  assert.deepEqual([odd!.constructor, odd!.reason], [sdk.NotFound, "RATE_LIMITED"]);

  // An accepted job; a server of an earlier build (no status): Unknown, its text not parsed.
  assert.equal(fromResult({ status: new Uint8Array(0), error: "" }), undefined);
  const old = fromResult({ status: new Uint8Array(0), error: "RESOURCE_EXHAUSTED: tenant t has 5 queued jobs" });
  assert.deepEqual([old!.constructor, old!.code, old!.reason, old!.rawMessage], [sdk.Unknown, "UNKNOWN", undefined, "RESOURCE_EXHAUSTED: tenant t has 5 queued jobs"]);
  const broken = fromResult({ status: new Uint8Array([0xff, 0xff, 0xff]), error: "" });
  assert.deepEqual([broken!.constructor, broken!.rawMessage], [sdk.Internal, "a batch result with a malformed status"]);
});

test("durations, deadlines, payloads and output tails", () => {
  assert.equal(cv.millis(undefined, "d"), 0n);
  assert.equal(cv.millis(1.5, "d"), 2n);
  assert.equal(cv.millis(90_000, "d"), 90_000n);
  assert.throws(() => cv.millis(-1, "cost"), (e: BaristaError) => e instanceof sdk.InvalidArgument && e.field === "cost");
  assert.throws(() => cv.millis(0.2, "delay"), /delay: 0.2 is under a millisecond/);
  assert.throws(() => cv.millis(Number.NaN, "delay"), /not a number of milliseconds/);
  assert.equal(cv.deadlineMillis(new Date(10_500), 10_000), 500n);
  assert.throws(() => cv.deadlineMillis(new Date(9_000), 10_000), /has passed/);
  assert.deepEqual(cv.encodePayload({ a: [1, "x"] }), new TextEncoder().encode('{"a":[1,"x"]}'));
  assert.deepEqual(cv.encodePayload("hi"), new TextEncoder().encode('"hi"'));
  assert.deepEqual(cv.encodePayload(undefined), new Uint8Array(0));
  const raw = new Uint8Array([0, 255]);
  assert.equal(cv.encodePayload(raw), raw);
  assert.throws(() => cv.encodePayload(() => 1), /has no JSON/);
  assert.deepEqual(cv.decodePayload(new TextEncoder().encode('{"a":1}')), { a: 1 });
  assert.equal(cv.decodePayload(new Uint8Array(0)), undefined);
  assert.equal(cv.outputTail("short"), "short");
  const long = "é".repeat(3000); // 6,000 bytes
  const tail = cv.outputTail(long);
  assert.equal(Buffer.byteLength(tail), 4096);
  assert.equal(tail, "é".repeat(2048));
  const odd = "€".repeat(2000); // 6,000 bytes: the last 4,096 start inside a character
  assert.equal(cv.outputTail(odd), "€".repeat(1365));
  assert.equal(cv.jobId(7), 7n);
  assert.equal(cv.jobId({ id: 9 }), 9n);
  assert.throws(() => cv.jobId(0), /not a job ID/);
  assert.throws(() => cv.num(2n ** 60n, "job_id"), /beyond the integers/);
  assert.equal(cv.size("MD"), 2);
  assert.throws(() => cv.size("xl"), /size: "xl" \(want sm, md or lg\)/);
});

test("a snooze outside the cluster's bounds is held to them", () => {
  const held = (ms: number) => {
    const z = new sdk.Snooze(ms);
    return [z.ms, z.asked];
  };
  assert.deepEqual(held(1500), [1500, 1500]);
  assert.deepEqual(held(1500.4), [1500, 1500]);
  assert.deepEqual(held(500), [1000, 500]);
  assert.deepEqual(held(0), [1000, 0]);
  assert.deepEqual(held(sdk.MAX_SNOOZE_MS), [86_400_000, 86_400_000]);
  assert.deepEqual(held(2 * sdk.MAX_SNOOZE_MS), [86_400_000, 172_800_000]);
  assert.deepEqual(held(Infinity), [86_400_000, Infinity]);
  assert.equal(new sdk.Snooze(500).message, "snoozed for 1s");
  for (const bad of [-1, Number.NaN, "5" as unknown as number]) {
    assert.throws(() => new sdk.Snooze(bad), (e: BaristaError) => e instanceof sdk.InvalidArgument && e.field === "snooze");
  }
});

test("a slot's silence limit", () => {
  assert.equal(silenceLimit(5_000, 25_000), 12_500);
  assert.equal(silenceLimit(1_000, 8_000), 4_000);
  assert.equal(silenceLimit(100, 0), 1_000);
});

test("the committed generated code is what make proto-typescript makes", (t) => {
  if (spawnSync("protoc", ["--version"]).status !== 0) {
    t.skip("protoc is missing (apt-get install protobuf-compiler)");
    return;
  }
  const out = mkdtempSync(join(tmpdir(), "barista-ts-gen-"));
  try {
    execFileSync("make", ["--no-print-directory", "-C", ROOT, "proto-typescript", `TS_PROTO_OUT=${out}`], { stdio: "pipe", timeout: 60_000 });
    const committed = join(ROOT, "sdk", "typescript", "src", "gen");
    const made = readdirSync(out).sort();
    assert.deepEqual(made, readdirSync(committed).filter((f) => f.endsWith("_pb.ts")).sort());
    const stale = made.filter((f) => readFileSync(join(out, f), "utf8") !== readFileSync(join(committed, f), "utf8"));
    assert.deepEqual(stale, [], `run make proto: ${stale.join(", ")} differ from what the .proto files make`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("a submit of a kind is a function job; form says otherwise", () => {
  const form = (kind: string, o: sdk.SubmitOptions = {}) => submitRequest(kind, undefined, { cost: 1, ...o }).form;
  assert.deepEqual(
    [form("digest"), form(""), form("render", { form: "command" }), form("digest", { form: "any" })],
    [JobForm.FUNCTION, JobForm.JOB_FORM_UNSPECIFIED, JobForm.COMMAND, JobForm.JOB_FORM_UNSPECIFIED],
  );
  for (const [kind, o, msg] of [
    ["", { form: "function" }, "form: a function job names its kind"],
    ["x", { form: "lambda" }, 'form: "lambda" (want function, command or any)'],
  ] as const) {
    assert.throws(() => form(kind, o as sdk.SubmitOptions), (e: unknown) => e instanceof sdk.InvalidArgument && e.field === "form" && e.rawMessage === msg);
  }
});

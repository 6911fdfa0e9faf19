/**
 * The shared worker stream's edges, without a cluster: a slot's inbox
 * bound, and a silent slot closing a quiet stream.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { LeaderMessageSchema, type LeaderMessage } from "../src/gen/worker_pb.js";
import type { NodeConn } from "../src/conn.js";
import { Dialer, SLOT_INBOX, Silent, type LeaderStream } from "../src/mux.js";

/** A node whose worker stream never answers: the test routes its messages. */
const quietNode = {
  addr: "leader:1",
  client: () => ({
    connect: () => ({ [Symbol.asyncIterator]: () => ({ next: () => new Promise<IteratorResult<LeaderMessage>>(() => {}) }) }),
  }),
} as unknown as NodeConn;

interface Routable {
  route(m: LeaderMessage): void;
  lastRecv: number;
  done: { done: boolean };
}

/** A decided, multiplexed stream with slots 1 and 2 on it. */
async function shared(): Promise<{ d: Dialer; c: Routable; one: LeaderStream; two: LeaderStream }> {
  const d = new Dialer(3000, () => {});
  const signal = new AbortController().signal;
  const one = await d.open(quietNode, 1, {}, signal);
  const c = d.conns.get("leader:1") as unknown as Routable;
  c.route(create(LeaderMessageSchema, { slot: 1, msg: { case: "welcome", value: { mux: true } } }));
  const two = await d.open(quietNode, 2, {}, signal);
  return { d, c, one, two };
}

function cancel(slot: number, job: number): LeaderMessage {
  return create(LeaderMessageSchema, { slot, msg: { case: "cancel", value: { job: BigInt(job) } } });
}

/** The slot's next message, within a second. */
async function next(s: LeaderStream): Promise<IteratorResult<LeaderMessage>> {
  return Promise.race([s.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no message within 1 s")), 1000).unref())]);
}

test("a slot holds at most 64 messages of the leader: the 65th ends its session RESOURCE_EXHAUSTED, the other slot goes on", async () => {
  const { c, one, two } = await shared();
  assert.equal((await next(one)).value?.msg.case, "welcome");
  for (let i = 0; i < SLOT_INBOX + 1; i++) c.route(cancel(1, i + 1));
  c.route(cancel(2, 7));
  for (let i = 0; i < SLOT_INBOX; i++) {
    const r = await next(one);
    assert.equal(r.value?.msg.case === "cancel" && r.value.msg.value.job, BigInt(i + 1));
  }
  await assert.rejects(next(one), (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted);
  const r = await next(two);
  assert.equal(r.value?.msg.case === "cancel" && r.value.msg.value.job, 7n);
  c.route(cancel(1, 99)); // after the slot's end: dropped
  await assert.rejects(next(one), (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted);
});

for (const [name, err, quietFor, closes] of [
  ["silent, nothing for 4 s: the stream closes", new Silent("no heartbeat acknowledged"), 4000, true],
  ["silent, a message 1 s ago: the stream stays", new Silent("no heartbeat acknowledged"), 1000, false],
  ["another end, nothing for 4 s: the stream stays", new Error("the job's session ended"), 4000, false],
] as const) {
  test(`a slot leaving a shared stream: ${name}`, async () => {
    const { d, c, one } = await shared();
    c.lastRecv = performance.now() - quietFor;
    one.close(err);
    assert.equal(c.done.done, closes);
    assert.equal(d.conns.has("leader:1"), !closes);
  });
}

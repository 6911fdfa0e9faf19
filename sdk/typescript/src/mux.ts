/**
 * The streams of a worker's slots: slots of one stream per server address
 * shared by the slots of one Worker (Hello.mux, docs/workers.md "Many
 * slots on one stream"), or a stream of one session against a leader of
 * an earlier build, which does not multiplex.
 */

import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { StatusSchema } from "./gen/rpc_status_pb.js";
import { Worker as WorkerService, WorkerMessageSchema, type LeaderMessage, type SlotEnd } from "./gen/worker_pb.js";
import type { Logger, NodeConn } from "./conn.js";
import { Queue } from "./util.js";

export type Out = MessageInitShape<typeof WorkerMessageSchema>;

/**
 * The slots of a multiplexed stream (the leader's bound), and how many
 * leader messages one slot may have waiting: a slot reads its own at
 * once, so one that has this many is stuck, and its session ends (the
 * others go on).
 */
export const MAX_SLOTS = 1024;
export const SLOT_INBOX = 64;
/** How long an address whose leader did not multiplex a stream (an earlier build) gets streams of one session (ms). */
export const PLAIN_FOR = 60_000;

/**
 * A session that ended for want of an answer from its server (no Welcome
 * in time, heartbeats not acknowledged): the stream may look open while
 * its server is gone.
 */
export class Silent extends Error {}

/** A slot's stream to a server. */
export interface LeaderStream {
  send(m: Out): void;
  /** The next message; done at a normal end; rejects with the end's error. */
  next(): Promise<IteratorResult<LeaderMessage>>;
  /** Ends the reads now with err (the session ends). */
  interrupt(err: Error): void;
  /** Ends the slot's use of the stream; err is why its session ended (undefined: it did not fail). */
  close(err: unknown): void;
}

/** Opens a gRPC stream of the worker service on a node. */
function connect(node: NodeConn, out: Queue<Out>, headers: Record<string, string>, signal: AbortSignal): AsyncIterator<LeaderMessage> {
  return node.client(WorkerService).connect(out, { headers, signal, timeoutMs: 0 })[Symbol.asyncIterator]();
}

/** A stream of one session to node. */
export function openPlain(node: NodeConn, headers: Record<string, string>): LeaderStream {
  return new PlainStream(node, headers);
}

/** A stream of one session. */
class PlainStream implements LeaderStream {
  private readonly out = new Queue<Out>();
  private readonly abort = new AbortController();
  private readonly it: AsyncIterator<LeaderMessage>;

  constructor(node: NodeConn, headers: Record<string, string>) {
    this.it = connect(node, this.out, headers, this.abort.signal);
  }

  send(m: Out): void {
    this.out.push(m);
  }

  next(): Promise<IteratorResult<LeaderMessage>> {
    return this.it.next();
  }

  interrupt(): void {
    this.abort.abort();
  }

  close(): void {
    this.out.end();
    this.abort.abort();
  }
}

/** What a slot gets that waited for a shared stream whose server redirected it: that Redirect, then the end. */
class RedirectOnly implements LeaderStream {
  constructor(private m: LeaderMessage | undefined) {}
  send(): void {}
  interrupt(): void {
    this.m = undefined;
  }
  close(): void {}
  next(): Promise<IteratorResult<LeaderMessage>> {
    const m = this.m;
    this.m = undefined;
    return Promise.resolve(m !== undefined ? { value: m, done: false } : { value: undefined, done: true });
  }
}

/**
 * The error a SlotEnd from the leader ends its slot's session with (the
 * status's code, message and details, as a stream's end carries them);
 * undefined for a normal end.
 */
export function slotEndError(e: SlotEnd): Error | undefined {
  if (e.status.length === 0) return undefined;
  let st;
  try {
    st = fromBinary(StatusSchema, e.status);
  } catch {
    return new ConnectError("the leader ended the slot with a status that does not decode", Code.Internal);
  }
  if (st.code === 0) return undefined;
  const err = new ConnectError(st.message, st.code in Code ? (st.code as Code) : Code.Unknown);
  for (const a of st.details) err.details.push({ type: a.typeUrl.slice(a.typeUrl.lastIndexOf("/") + 1), value: a.value });
  return err;
}

/** A promise with its resolve. */
class Signal {
  done = false;
  private resolveFn!: () => void;
  readonly wait = new Promise<void>((r) => {
    this.resolveFn = r;
  });
  set(): void {
    this.done = true;
    this.resolveFn();
  }
}

/** Rejects when signal aborts. */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(signal.reason instanceof Error ? signal.reason : new Error("the session ended"));
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}

/**
 * Gives the slots of one Worker their streams: slots of one shared stream
 * per server address, opened by the first slot that connects and closed
 * when the last leaves. The first slot's Hello asks for a multiplexed
 * stream; a leader of an earlier build serves it as that slot's session
 * alone (its Welcome does not say mux), and the other slots then open
 * streams of their own, as before.
 */
export class Dialer {
  private readonly born = performance.now();
  readonly conns = new Map<string, Conn>();
  readonly plain = new Map<string, number>();

  constructor(readonly handshake: number, readonly log: Logger) {}

  /** The time (ms) from now to the slots' next heartbeat of interval: they beat together, at the Worker's phase. */
  untilBeat(interval: number): number {
    if (interval <= 0) return 1000;
    return interval - ((performance.now() - this.born) % interval);
  }

  /** Slot's stream to a node; the wait for it ends when signal aborts. */
  async open(node: NodeConn, slot: number, headers: Record<string, string>, signal: AbortSignal): Promise<LeaderStream> {
    const addr = node.addr;
    const stop = aborted(signal);
    stop.catch(() => {});
    for (;;) {
      if (signal.aborted) throw new Error("the session ended");
      const at = this.plain.get(addr);
      if (at !== undefined && performance.now() - at < PLAIN_FOR) return new PlainStream(node, headers);
      const c = this.conns.get(addr);
      if (c === undefined) {
        const n = new Conn(this, addr, node, headers);
        this.conns.set(addr, n);
        const s = n.attach(slot);
        n.owner = s;
        n.start();
        return s;
      }
      // Wait for the leader's first answer, or the stream's end.
      await Promise.race([c.decided.wait, c.done.wait, stop]);
      if (c.done.done && !c.decided.done) throw c.err ?? new Error(`${addr} closed the stream at Hello`);
      if (c.redirect !== undefined) return new RedirectOnly(c.redirect);
      if (!c.mux) continue; // the address is marked plain, or the stream is gone
      const old = c.slots.get(slot);
      if (old === undefined) {
        if (this.conns.get(addr) === c && !c.done.done) return c.attach(slot);
        continue;
      }
      // The slot's previous session is still closing on this stream.
      await Promise.race([old.released.wait, c.done.wait, stop]);
    }
  }

  close(): void {
    for (const c of [...this.conns.values()]) c.close();
    this.conns.clear();
  }
}

/** One shared stream. */
class Conn {
  private readonly out = new Queue<Out>();
  private readonly abort = new AbortController();
  private readonly it: AsyncIterator<LeaderMessage>;
  readonly decided = new Signal();
  readonly done = new Signal();
  mux = false;
  redirect: LeaderMessage | undefined;
  err: Error | undefined;
  lastRecv = performance.now();
  readonly slots = new Map<number, SlotStream>();
  /** The slot that opened the stream, while the leader has not answered, and for good if it did not multiplex. */
  owner: SlotStream | undefined;
  refs = 0;

  constructor(private readonly d: Dialer, readonly addr: string, node: NodeConn, headers: Record<string, string>) {
    this.it = connect(node, this.out, headers, this.abort.signal);
  }

  start(): void {
    void this.read();
  }

  attach(slot: number): SlotStream {
    const s = new SlotStream(this, slot);
    this.slots.set(slot, s);
    this.refs++;
    return s;
  }

  send(m: Out): void {
    this.out.push(m);
  }

  /** Hands the stream's messages to the slots until it ends. */
  private async read(): Promise<void> {
    let err: Error | undefined;
    try {
      for (;;) {
        const r = await this.it.next();
        if (r.done) break;
        this.lastRecv = performance.now();
        this.route(r.value);
      }
    } catch (e) {
      err = e instanceof Error ? e : new Error(String(e));
    }
    this.end(err);
  }

  /** Hands m to its slot; the leader's first answer decides whether the stream is multiplexed. */
  private route(m: LeaderMessage): void {
    const which = m.msg.case;
    if (!this.decided.done) {
      this.mux = (which === "welcome" && m.msg.value.mux) || which === "end";
      if (!this.mux) {
        if (which === "redirect") this.redirect = m;
        else {
          this.d.log("info", `the leader does not multiplex slots on one stream (an earlier build): each slot opens a stream of its own: server=${this.addr}`);
          this.d.plain.set(this.addr, performance.now());
        }
        this.forget();
      } else {
        this.owner = undefined;
      }
      this.decided.set();
    }
    const s = this.owner ?? this.slots.get(m.slot);
    if (s === undefined) return; // a message that crossed its slot's end
    if (m.msg.case === "end" && this.owner === undefined) {
      s.end(slotEndError(m.msg.value));
      this.leave(s);
      return;
    }
    if (s.ended) return; // a message that crossed the slot's end
    if (s.waiting >= SLOT_INBOX) {
      s.end(new ConnectError(`slot ${s.slot} has ${SLOT_INBOX} messages of the leader waiting: its session is closed`, Code.ResourceExhausted));
      return;
    }
    s.push(m);
  }

  /** The leader's session of s is over: the slot may open again. */
  leave(s: SlotStream): void {
    s.left = true;
    if (this.slots.get(s.slot) === s) this.slots.delete(s.slot);
    s.released.set();
  }

  private forget(): void {
    if (this.d.conns.get(this.addr) === this) this.d.conns.delete(this.addr);
  }

  /** Ends every slot with the stream's error. */
  private end(err: Error | undefined): void {
    if (this.done.done) return;
    this.forget();
    this.err = err;
    for (const s of [...this.slots.values()]) {
      s.end(err);
      this.leave(s);
    }
    this.done.set();
  }

  /** Ends the shared stream. */
  close(): void {
    this.forget();
    this.out.end();
    this.abort.abort();
    this.end(new Error(`the stream to ${this.addr} is closed`));
  }

  /** Whether the slot's session ended for want of an answer on a stream that has been silent for a handshake's time. */
  quiet(err: unknown): boolean {
    return err instanceof Silent && performance.now() - this.lastRecv > this.d.handshake;
  }

  warn(msg: string): void {
    this.d.log("warn", msg);
  }
}

/** One slot's part of a shared stream. */
class SlotStream implements LeaderStream {
  private readonly inbox = new Queue<LeaderMessage>();
  waiting = 0;
  private err: Error | undefined;
  /** The inbox is closed. */
  ended = false;
  /** The leader's session of the slot is over (its SlotEnd came, or the stream ended). */
  left = false;
  /** The slot left and its SlotEnd went out; the leader's answer is awaited. */
  private closing = false;
  readonly released = new Signal();

  constructor(private readonly c: Conn, readonly slot: number) {}

  push(m: LeaderMessage): void {
    this.waiting++;
    this.inbox.push(m);
  }

  end(err: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.err = err;
    this.inbox.end();
  }

  /** Writes m as the slot's: every Hello asks for a multiplexed stream. */
  send(m: Out): void {
    const w = create(WorkerMessageSchema, m);
    w.slot = this.slot;
    if (w.msg.case === "hello") w.msg.value.mux = true;
    this.c.send(w);
  }

  async next(): Promise<IteratorResult<LeaderMessage>> {
    const r = await this.inbox.next();
    if (!r.done) {
      this.waiting--;
      return r;
    }
    if (this.err !== undefined) throw this.err;
    return r;
  }

  interrupt(err: Error): void {
    this.end(err);
  }

  /**
   * Leaves the stream: a slot whose session the leader has not ended sends
   * SlotEnd, and the slot is free again once the leader answers. The last
   * slot to leave closes the stream, and so does a slot whose session
   * ended for want of an answer when nothing has come on the stream for a
   * handshake's time (the stream looks open, but its server is gone or cut
   * off: every slot reconnects).
   */
  close(err: unknown): void {
    const c = this.c;
    const quiet = c.quiet(err);
    if (quiet && !c.done.done) {
      c.warn(`nothing from the server on the slots' stream: closing it: server=${c.addr} slot=${this.slot} error=${(err as Error).message}`);
    }
    const owned = c.owner === this;
    if (owned) {
      // A stream of this slot alone (or not shared yet): it closes.
      if (!this.left) c.leave(this);
    } else if (!this.left && !this.closing) {
      this.end(undefined);
      this.closing = true;
      if (!c.done.done) c.send({ msg: { case: "end", value: {} }, slot: this.slot });
    }
    c.refs--;
    if (c.refs === 0 || owned || quiet) c.close();
  }
}

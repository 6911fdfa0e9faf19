/**
 * The connections of a Client (or a Worker) to the nodes of a cluster: one
 * HTTP/2 connection per node (gRPC protocol), the token, the cluster's
 * message size and keepalive, failover from node to node and the rules of
 * what may be sent twice (those of the Go and Python clients).
 */

import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type CallOptions, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { SecureClientSessionOptions } from "node:http2";
import { BaristaError, ClientClosed, DeadlineExceeded, InvalidArgument, Unavailable, fromError, isNotLeader } from "./errors.js";
import { MAX_MESSAGE_BYTES } from "./limits.js";
import { Session } from "./session.js";
import { sleep } from "./util.js";


export const HEADER_INDEX = "x-barista-index";
export const HEADER_MIN_INDEX = "x-barista-min-index";
export const HEADER_WATCH_CURSOR = "x-barista-watch-cursor";

/** Defaults, as the Go client's (ms). */
export const CALL_TIMEOUT = 15_000;
export const CONNECT_TIMEOUT = 2_000;
export const BACKOFF_FIRST = 100;
export const BACKOFF_MAX = 2_000;

/**
 * TLS to the nodes: the cluster's CA (PEM; left out: the system's roots)
 * and, for mutual TLS, this program's certificate and key (PEM).
 */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name the nodes' certificates are checked against (default: the address's host). */
  serverName?: string;
}

/** No TLS (undefined, false), TLS with the system's roots (true), or TlsOptions. */
export type Tls = undefined | boolean | TlsOptions;

/** Where log lines go: a function of a level and a line (console by default at warn and above). */
export type Logger = (level: "debug" | "info" | "warn" | "error", msg: string) => void;

export const defaultLogger: Logger = (level, msg) => {
  if (level === "warn" || level === "error") console.error(`barista ${level}: ${msg}`);
};

/** The addresses of a `servers` option: a list, or a comma-separated string. */
export function parseServers(servers: string | readonly string[]): string[] {
  const list = typeof servers === "string" ? servers.split(",") : [...servers];
  const addrs = list.map((s) => String(s).trim()).filter((s) => s !== "");
  if (addrs.length === 0) throw new InvalidArgument("servers: no node address given", { field: "servers" });
  return addrs;
}

/** One node: its HTTP/2 connection and its gRPC transport. */
export class NodeConn {
  readonly session: Session;
  readonly transport: Transport;
  private readonly clients = new Map<DescService, unknown>();

  constructor(readonly addr: string, tls: Tls) {
    const url = `${tls ? "https" : "http"}://${addr}`;
    const nodeOptions: SecureClientSessionOptions = {};
    if (tls && typeof tls === "object") {
      if (tls.ca !== undefined) nodeOptions.ca = tls.ca;
      if (tls.cert !== undefined) nodeOptions.cert = tls.cert;
      if (tls.key !== undefined) nodeOptions.key = tls.key;
      if (tls.serverName !== undefined) nodeOptions.servername = tls.serverName;
    }
    this.session = new Session(url, nodeOptions);
    this.transport = createGrpcTransport({
      baseUrl: url,
      sessionManager: this.session,
      readMaxBytes: MAX_MESSAGE_BYTES,
      writeMaxBytes: MAX_MESSAGE_BYTES,
    });
  }

  /** The typed client of a service on this node. */
  client<S extends DescService>(service: S): RpcClient<S> {
    let c = this.clients.get(service) as RpcClient<S> | undefined;
    if (c === undefined) {
      c = createClient(service, this.transport);
      this.clients.set(service, c);
    }
    return c;
  }

  /**
   * Connects and waits up to ms for the connection to be open; a refused
   * connection returns false at once.
   */
  async ready(ms: number): Promise<boolean> {
    if (this.session.open) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(ms, 1));
    });
    try {
      return await Promise.race([this.session.connect().then(() => true, () => false), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    this.session.close();
  }
}

/**
 * A failure of the connection as UNAVAILABLE. A node answers with a
 * grpc-status; an error without one is this side's: a connection reset
 * (ECONNRESET, which the transport calls ABORTED), a stream reset as the
 * node died (CANCEL), a broken HTTP/2 session (INTERNAL).
 */
export function transportError(e: unknown): unknown {
  const local = [Code.Canceled, Code.Aborted, Code.Internal, Code.Unknown];
  if (e instanceof ConnectError && local.includes(e.code) && !e.metadata.has("grpc-status")) {
    return new ConnectError(`the connection broke: ${e.rawMessage}`, Code.Unavailable, e.metadata, undefined, e);
  }
  return e;
}

/** Whether a failed attempt may succeed elsewhere: the node or the connection failed, or time ran out. */
export function retryable(err: unknown): boolean {
  return err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded);
}

export interface NodesOptions {
  token?: string;
  tls?: Tls;
  /** Bounds each call, its retries included (ms, 15 s). */
  callTimeout?: number;
  /** Bounds the wait for one node's connection before the next is tried (ms, 2 s). */
  connectTimeout?: number;
  logger?: Logger;
}

/** The nodes of a cluster and the call loop through them. */
export class Nodes {
  readonly addrs: string[];
  readonly nodes: NodeConn[];
  readonly callTimeout: number;
  readonly connectTimeout: number;
  readonly log: Logger;
  private readonly token: string | undefined;
  /** The node tried first: the last that answered, or the one after the last that failed. */
  private next = 0;
  private closedFlag = false;
  /**
   * The highest log index this client's writes were answered with; every
   * call carries it, so that a node that serves a read from its own state
   * (a watch) answers only once it holds them.
   */
  lastIndex = 0n;

  constructor(servers: string | readonly string[], opts: NodesOptions = {}) {
    this.addrs = parseServers(servers);
    this.token = opts.token || undefined;
    this.callTimeout = opts.callTimeout ?? CALL_TIMEOUT;
    this.connectTimeout = opts.connectTimeout ?? CONNECT_TIMEOUT;
    this.log = opts.logger ?? defaultLogger;
    this.nodes = this.addrs.map((a) => new NodeConn(a, opts.tls));
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  check(): void {
    if (this.closedFlag) throw new ClientClosed("the client is closed");
  }

  headers(): Record<string, string> {
    const h: Record<string, string> = {};
    if (this.token) h.authorization = "Bearer " + this.token;
    if (this.lastIndex > 0n) h[HEADER_MIN_INDEX] = this.lastIndex.toString();
    return h;
  }

  /** Keeps the index a write's answer names (its header). */
  noteIndex(h: Headers): void {
    const v = h.get(HEADER_INDEX);
    if (v && /^\d+$/.test(v)) {
      const i = BigInt(v);
      if (i > this.lastIndex) this.lastIndex = i;
    }
  }

  order(): number[] {
    const n = this.nodes.length;
    return Array.from({ length: n }, (_, k) => (this.next + k) % n);
  }

  prefer(i: number): void {
    this.next = i;
  }

  skip(i: number): void {
    if (this.next === i) this.next = (i + 1) % this.nodes.length;
  }

  /**
   * Runs one unary call through the nodes, from the one that answered
   * last: a node whose connection is not open is skipped; a call that
   * failed after it went out (UNAVAILABLE, DEADLINE_EXCEEDED) is sent again
   * to the next node, in rounds with backoff until the call's time is up,
   * only when it is idempotent or the node said it no longer leads (it did
   * nothing).
   */
  async call<T>(
    invoke: (node: NodeConn, opts: CallOptions) => Promise<T>,
    { idempotent, timeout }: { idempotent: boolean; timeout?: number },
  ): Promise<T> {
    this.check();
    const deadline = Date.now() + (timeout ?? this.callTimeout);
    let pause = BACKOFF_FIRST;
    let last: unknown;
    for (;;) {
      for (const i of this.order()) {
        this.check();
        const left = deadline - Date.now();
        if (left <= 0) break;
        const node = this.nodes[i];
        if (!(await node.ready(Math.min(this.connectTimeout, left)))) {
          last = new Unavailable(`cannot connect to ${node.addr}`);
          this.skip(i);
          continue;
        }
        let resp: T;
        try {
          resp = await invoke(node, {
            headers: this.headers(),
            timeoutMs: Math.max(deadline - Date.now(), 1),
            onHeader: (h) => this.noteIndex(h),
          });
        } catch (err) {
          if (this.closedFlag) throw new ClientClosed("the client is closed", { cause: err });
          const e = transportError(err);
          if (!retryable(e)) {
            this.prefer(i); // the node answered
            throw fromError(e);
          }
          last = e;
          this.skip(i);
          if (!idempotent && !isNotLeader(e)) {
            // It may have been served: repeating it could do it twice.
            throw fromError(e);
          }
          this.log("debug", `call failed on ${node.addr}, trying the next node: ${(e as Error).message}`);
          continue;
        }
        this.prefer(i);
        return resp;
      }
      const left = deadline - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(pause, left));
      pause = Math.min(2 * pause, BACKOFF_MAX);
    }
    if (last instanceof BaristaError) throw last;
    if (last !== undefined) throw fromError(last);
    throw new DeadlineExceeded("no node answered in time");
  }

  close(): void {
    this.closedFlag = true;
    for (const n of this.nodes) n.close();
  }
}

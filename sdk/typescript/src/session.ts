/**
 * One HTTP/2 connection to a node, as the gRPC transport's session
 * manager: opened on first use and again after it breaks, kept alive with
 * PING frames (a node that vanished is noticed in 15 s), and unreferenced
 * while no stream is open, so that an idle client never holds the process.
 */

import * as http2 from "node:http2";

/** Keepalive: a PING after 10 s without a read, 5 s to answer (the nodes accept one every 5 s or slower). */
export const PING_INTERVAL = 10_000;
export const PING_TIMEOUT = 5_000;

export class Session {
  /** The origin the connection goes to (the transport checks every request's against it). */
  readonly authority: string;
  private conn: http2.ClientHttp2Session | undefined;
  private connecting: Promise<http2.ClientHttp2Session> | undefined;
  private streams = 0;
  private lastRead = 0;
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(url: string, private readonly options: http2.SecureClientSessionOptions) {
    this.authority = new URL(url).origin;
  }

  /** Whether a connection is open now. */
  get open(): boolean {
    const c = this.conn;
    return c !== undefined && !c.destroyed && !c.closed;
  }

  /** The open connection, or a new one. */
  connect(): Promise<http2.ClientHttp2Session> {
    if (this.closed) return Promise.reject(new Error(`the connection to ${this.authority} is closed`));
    const c = this.conn;
    if (c !== undefined && !c.destroyed && !c.closed) return Promise.resolve(c);
    if (this.connecting) return this.connecting;
    this.connecting = new Promise<http2.ClientHttp2Session>((resolve, reject) => {
      const conn = http2.connect(this.authority, this.options);
      conn.unref();
      conn.on("error", () => {}); // the streams see it, and "close" follows: never an unhandled "error"
      const onError = (e: Error) => {
        conn.destroy();
        reject(e);
      };
      conn.once("error", onError);
      conn.once("connect", () => {
        conn.off("error", onError);
        if (this.closed) {
          conn.destroy();
          reject(new Error(`the connection to ${this.authority} is closed`));
          return;
        }
        this.conn = conn;
        this.lastRead = Date.now();
        conn.on("goaway", () => {
          // The node takes no new stream on it: the next one opens another.
          if (this.conn === conn) this.conn = undefined;
        });
        conn.once("close", () => {
          if (this.conn === conn) this.conn = undefined;
        });
        this.keepalive();
        resolve(conn);
      });
    }).finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  async request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream> {
    const conn = await this.connect();
    const stream = conn.request({ ...headers, ":method": method, ":path": path }, options);
    if (this.streams++ === 0) conn.ref();
    stream.once("close", () => {
      if (--this.streams === 0 && !conn.destroyed) conn.unref();
    });
    return stream;
  }

  notifyResponseByteRead(): void {
    this.lastRead = Date.now();
  }

  /** PINGs the connection when it has been silent for PING_INTERVAL; one unanswered in PING_TIMEOUT ends it. */
  private keepalive(): void {
    if (this.pingTimer !== undefined) return;
    this.pingTimer = setInterval(() => {
      const conn = this.conn;
      if (conn === undefined || conn.destroyed || conn.closed) return;
      if (Date.now() - this.lastRead < PING_INTERVAL) return;
      const timeout = setTimeout(() => conn.destroy(new Error("PING timed out")), PING_TIMEOUT);
      timeout.unref();
      try {
        conn.ping((err) => {
          clearTimeout(timeout);
          if (!err) this.lastRead = Date.now();
        });
      } catch {
        clearTimeout(timeout); // the connection ended meanwhile
      }
    }, PING_INTERVAL / 2);
    this.pingTimer.unref();
  }

  /** Closes the connection and its streams; the session opens no other. */
  close(): void {
    this.closed = true;
    clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    this.conn?.destroy();
    this.conn = undefined;
  }
}

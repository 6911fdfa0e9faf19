/**
 * Real barista servers for the SDK's tests: bin/barista processes on
 * 127.0.0.1 ports chosen at run time, with tokens of every role. Every
 * process started here is tracked by PID and killed when its cluster
 * stops (and when this process exits), whatever the test's outcome.
 */

import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create } from "@bufbuild/protobuf";
import { Admin } from "../src/gen/admin_pb.js";
import { SchedulerConfigSchema, type SchedulerConfig } from "../src/gen/types_pb.js";
import { Client as ClientService } from "../src/gen/client_pb.js";
import { Worker as WorkerService, type WorkerInfo } from "../src/gen/worker_pb.js";
import { NodeConn } from "../src/conn.js";

/** The repository's root (this file is dist/test/cluster.js in sdk/typescript). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const BIN = process.env.BARISTA_BIN || join(ROOT, "bin", "barista");

export const ADMIN_TOKEN = "admin-secret-ts01";
export const ACME_TOKEN = "acme-secret-ts01";
export const GLOBEX_TOKEN = "globex-secret-ts01";
export const WORKER_TOKEN = "worker-secret-ts01";

const TOKEN_CONFIG = `
[[auth.tokens]]
role = "admin"
token = "${ADMIN_TOKEN}"
[[auth.tokens]]
role = "client"
tenant = "acme"
token = "${ACME_TOKEN}"
[[auth.tokens]]
role = "client"
tenant = "globex"
token = "${GLOBEX_TOKEN}"
[[auth.tokens]]
role = "worker"
token = "${WORKER_TOKEN}"
`;

const run = promisify(execFile);

const given = new Set<number>();

/**
 * A TCP port of 127.0.0.1 that was free a moment ago, from below the
 * ephemeral range (so that no outbound connection takes it before the
 * server binds it), never the same twice in this process.
 */
export async function freePort(): Promise<number> {
  for (let k = 0; k < 200; k++) {
    const p = 20000 + Math.floor(Math.random() * 12000);
    if (given.has(p)) continue;
    const ok = await new Promise<boolean>((res) => {
      const s = createServer();
      s.once("error", () => res(false));
      s.listen(p, "127.0.0.1", () => s.close(() => res(true)));
    });
    if (ok) {
      given.add(p);
      return p;
    }
  }
  throw new Error("no free TCP port on 127.0.0.1");
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls cond until it returns a truthy value (returned), or fails after timeout naming what it waited for. */
export async function waitFor<T>(cond: () => Promise<T> | T, timeout: number, what: string, every = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeout;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    await sleep(every);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}` + (last ? ` (last error: ${String(last)})` : ""));
}

const live = new Set<ChildProcess>();
function killAll(): void {
  for (const p of live) {
    try {
      if (p.pid) process.kill(p.pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
}
process.on("exit", killAll);
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.once(sig, () => {
    killAll();
    process.exit(1);
  });
}

/** A child process with its log file, killed by PID. */
export class Proc {
  readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;
  code: number | null | undefined;

  constructor(readonly name: string, argv: string[], readonly logPath: string, env?: NodeJS.ProcessEnv) {
    const fd = openSync(logPath, "a");
    this.child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", fd, fd], env: env ?? process.env, detached: true });
    closeSync(fd);
    live.add(this.child);
    this.exited = new Promise((res) => {
      this.child.once("exit", (code, signal) => {
        live.delete(this.child);
        this.code = code ?? (signal ? -1 : null);
        res(code);
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  running(): boolean {
    return this.code === undefined;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.running() && this.pid) {
      try {
        process.kill(this.pid, sig);
      } catch {
        // gone already
      }
    }
  }

  /** Waits up to ms for the process to end: its exit code, or undefined if it still runs. */
  async wait(ms: number): Promise<number | null | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const t = new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), ms);
    });
    const got = await Promise.race([this.exited, t]);
    clearTimeout(timer);
    return got === undefined && this.running() ? undefined : this.code;
  }

  /** SIGKILL, then waits for the process to end. */
  async kill(): Promise<void> {
    this.signal("SIGKILL");
    await this.wait(10_000);
  }

  tail(lines = 40): string {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines - 1).join("\n");
    } catch {
      return "";
    }
  }
}

export class ServerNode {
  raftAddr = "";
  grpcAddr = "";
  httpAddr = "";
  proc: Proc | undefined;
  private conn: NodeConn | undefined;

  constructor(readonly c: Cluster, readonly id: string) {}

  async ports(): Promise<void> {
    this.raftAddr = `127.0.0.1:${await freePort()}`;
    this.grpcAddr = `127.0.0.1:${await freePort()}`;
    this.httpAddr = `127.0.0.1:${await freePort()}`;
  }

  start(...args: string[]): void {
    const argv = [BIN, "server", "--node-id", this.id, "--data-dir", join(this.c.dir, this.id), "--raft-addr", this.raftAddr,
      "--grpc-addr", this.grpcAddr, "--http-addr", this.httpAddr, "--log-level", "info", "--config", this.c.config, ...args];
    if (this.c.tlsDir) {
      argv.push("--tls-cert", join(this.c.tlsDir, `${this.id}.pem`), "--tls-key", join(this.c.tlsDir, `${this.id}-key.pem`),
        "--tls-ca", join(this.c.tlsDir, "ca.pem"));
    }
    this.proc = new Proc(this.id, argv, join(this.c.dir, `${this.id}.log`));
    this.c.procs.push(this.proc);
  }

  running(): boolean {
    return this.proc !== undefined && this.proc.running();
  }

  node(): NodeConn {
    if (!this.conn) this.conn = new NodeConn(this.grpcAddr, this.c.tls());
    return this.conn;
  }

  md() {
    return { headers: { authorization: "Bearer " + ADMIN_TOKEN }, timeoutMs: 2000 };
  }

  /**
   * One barista command against this node alone, its --json answer: the
   * nodes' own service is the servers' (the SDK speaks only the client,
   * worker and admin services).
   */
  async ask(...args: string[]): Promise<Record<string, unknown>> {
    const argv = [...args, "--server", this.grpcAddr, "--token", ADMIN_TOKEN, "--rpc-timeout", "2s", "--json"];
    if (this.c.tlsDir) argv.push("--tls-ca", join(this.c.tlsDir, "ca.pem"));
    try {
      const { stdout } = await run(BIN, argv, { timeout: 10_000 });
      return JSON.parse(stdout) as Record<string, unknown>;
    } catch (e) {
      const err = e as { stderr?: string; message: string };
      throw new Error(`barista ${args.join(" ")} on ${this.id}: ${(err.stderr || err.message).trim()}`);
    }
  }

  /** The node's view: who leads, and its own state ("leader", "follower", ...). */
  async status(): Promise<{ leaderId: string; state: string }> {
    const st = await this.ask("status");
    return { leaderId: String(st.leader_id ?? ""), state: String(st.state ?? "") };
  }

  async kill(): Promise<void> {
    await this.proc?.kill();
    this.close();
  }

  close(): void {
    this.conn?.close();
    this.conn = undefined;
  }
}

/** n servers: the first bootstraps, the others join it. */
export class Cluster {
  readonly dir: string;
  readonly config: string;
  readonly procs: Proc[] = [];
  readonly nodes: ServerNode[];
  /** With TLS: the directory of `barista tls init`'s CA and certificates. */
  tlsDir: string | undefined;

  constructor(n = 3, scheduler = "", dir?: string) {
    this.dir = dir ?? mkdtempSync(join(tmpdir(), "barista-ts-"));
    mkdirSync(this.dir, { recursive: true });
    this.config = join(this.dir, "barista.toml");
    writeFileSync(this.config, TOKEN_CONFIG + (scheduler ? "\n[scheduler]\n" + scheduler : ""));
    this.nodes = Array.from({ length: n }, (_, i) => new ServerNode(this, `n${i + 1}`));
  }

  static available(): boolean {
    return existsSync(BIN);
  }

  /**
   * Serves gRPC over TLS from the next start: a CA, a certificate per
   * node (for 127.0.0.1) and one for a client, made by barista tls init.
   */
  withTls(): this {
    this.tlsDir = join(this.dir, "tls");
    execFileSync(BIN, ["tls", "init", "--dir", this.tlsDir, "--ca-key-dir", join(this.dir, "tls-ca"),
      "--names", this.nodes.map((n) => n.id).join(","), "--clients", "client", "--hosts", "127.0.0.1"], { stdio: "pipe" });
    return this;
  }

  /** The client side's TLS of this cluster: its CA (undefined without TLS). */
  tls(): { ca: Buffer } | undefined {
    return this.tlsDir ? { ca: readFileSync(join(this.tlsDir, "ca.pem")) } : undefined;
  }

  get addrs(): string[] {
    return this.nodes.map((n) => n.grpcAddr);
  }

  async start(): Promise<this> {
    for (const n of this.nodes) await n.ports();
    const first = this.nodes[0];
    first.start("--bootstrap");
    await this.waitLeader(20_000);
    for (const n of this.nodes.slice(1)) n.start("--join", first.grpcAddr);
    await this.waitVoters(this.nodes.length, 30_000);
    return this;
  }

  running(): ServerNode[] {
    return this.nodes.filter((n) => n.running());
  }

  /** The node every running node names as leader, if they agree. */
  async leader(): Promise<ServerNode | undefined> {
    const ids = new Set<string>();
    for (const n of this.running()) {
      const st = await n.status();
      if (!st.leaderId) return undefined;
      ids.add(st.leaderId);
    }
    if (ids.size !== 1) return undefined;
    const [lid] = ids;
    for (const n of this.running()) {
      if (n.id === lid && (await n.status()).state === "leader") return n;
    }
    return undefined;
  }

  waitLeader(timeout = 20_000): Promise<ServerNode> {
    return waitFor(() => this.leader(), timeout, "an agreed leader");
  }

  async followers(): Promise<ServerNode[]> {
    const lead = await this.waitLeader();
    return this.running().filter((n) => n !== lead);
  }

  async waitVoters(count: number, timeout: number): Promise<void> {
    await waitFor(async () => {
      const lead = await this.leader();
      if (!lead) return false;
      const { peers } = (await lead.ask("operator", "raft", "list-peers")) as { peers: { voter?: boolean }[] };
      return peers.filter((p) => p.voter).length === count;
    }, timeout, `${count} voters`);
  }

  private async admin() {
    const lead = await this.waitLeader();
    return { admin: lead.node().client(Admin), client: lead.node().client(ClientService), md: lead.md() };
  }

  /** Creates or changes a pool (the SDK has no call for it). */
  async poolSet(name: string, fields: { subscriptionsRequired?: boolean } = {}): Promise<void> {
    const { admin, md } = await this.admin();
    await admin.poolSet({ name, ...fields }, md);
  }

  /** Declares or changes a resource (the SDK has no call for it). */
  async resourceSet(name: string, capacity: number): Promise<void> {
    const { admin, md } = await this.admin();
    await admin.resourceSet({ name, capacity }, md);
  }

  /** The workers the leader knows (barista workers; the SDK has no call for it). */
  async workers(): Promise<WorkerInfo[]> {
    const lead = await this.waitLeader();
    return (await lead.node().client(WorkerService).listWorkers({}, lead.md())).workers;
  }

  /** Deletes ended jobs of a tenant (the SDK has no call for it). */
  async purge(tenant: string, ...jobIds: number[]): Promise<void> {
    const { client, md } = await this.admin();
    await client.purgeJobs({ tenant, jobIds: jobIds.map(BigInt) }, md);
  }

  /** Sets fields of the replicated scheduler configuration (get it, change it, put it back whole). */
  async setConfig(fields: Partial<SchedulerConfig>): Promise<void> {
    const { admin, md } = await this.admin();
    const cfg = await admin.getConfig({}, md);
    await admin.setConfig({ config: create(SchedulerConfigSchema, { ...cfg, ...fields }) }, md);
  }

  /** Kills every process this cluster started, by PID, and waits for each. */
  async stop(): Promise<void> {
    for (const n of this.nodes) n.close();
    for (const p of this.procs) p.signal("SIGKILL");
    for (const p of this.procs) await p.wait(10_000);
  }

  logs(lines = 40): string {
    return this.procs.map((p) => `---- ${p.name} (last ${lines} lines)\n${p.tail(lines)}`).join("\n");
  }

  /** Removes the cluster's directory (after stop). */
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

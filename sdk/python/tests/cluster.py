"""Real barista servers for the SDK's tests: bin/barista processes on
127.0.0.1 ports chosen at run time, with tokens of every role. Every
process started here is tracked by PID and killed when its cluster
stops, whatever the test's outcome."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import AsyncIterator, Callable, List, Optional

import json
from types import SimpleNamespace

import grpc

import barista
from barista._proto import admin_pb2, admin_pb2_grpc, client_pb2, client_pb2_grpc

ROOT = Path(__file__).resolve().parents[3]
SDK_SRC = ROOT / "sdk" / "python" / "src"

ADMIN_TOKEN = "admin-secret-py01"
ACME_TOKEN = "acme-secret-py01"
GLOBEX_TOKEN = "globex-secret-py01"
WORKER_TOKEN = "worker-secret-py01"

TOKEN_CONFIG = f"""
[[auth.tokens]]
role = "admin"
token = "{ADMIN_TOKEN}"
[[auth.tokens]]
role = "client"
tenant = "acme"
token = "{ACME_TOKEN}"
[[auth.tokens]]
role = "client"
tenant = "globex"
token = "{GLOBEX_TOKEN}"
[[auth.tokens]]
role = "worker"
token = "{WORKER_TOKEN}"
"""

_ports_given = set()


@contextlib.asynccontextmanager
async def running(worker: barista.Worker, stop_within: float = 20) -> AsyncIterator[barista.Worker]:
    """Runs worker for the body of the block, then stops it (a grace of
    5 s) and checks that run() returned cleanly within stop_within
    seconds."""
    task = asyncio.get_running_loop().create_task(worker.run(handle_signals=False))
    try:
        yield worker
    finally:
        await worker.stop(grace=5)
        await asyncio.wait_for(task, stop_within)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago, from below the
    ephemeral range (so that no outbound connection takes it before the
    server binds it), never the same twice in this process."""
    for _ in range(200):
        p = random.randint(20000, 32000)
        if p in _ports_given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        _ports_given.add(p)
        return p
    raise RuntimeError("no free TCP port on 127.0.0.1")


def wait_for(cond: Callable[[], object], timeout: float, what: str, every: float = 0.05):
    """Polls cond until it returns a true value (returned), or fails after
    timeout naming what it waited for."""
    deadline = time.monotonic() + timeout
    last_err: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - the condition may fail while it is not met
            last_err = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_err})" if last_err else ""))


class Process:
    """A child process with its log file, killed by PID."""

    def __init__(self, name: str, argv: List[str], log_path: Path, env: Optional[dict] = None):
        self.name, self.argv, self.log_path = name, argv, log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.log.close()

    def wait(self, timeout: float) -> Optional[int]:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Node:
    def __init__(self, cluster: "Cluster", node_id: str):
        self.c, self.id = cluster, node_id
        self.data_dir = cluster.dir / node_id
        self.raft_addr = f"127.0.0.1:{free_port()}"
        self.grpc_addr = f"127.0.0.1:{free_port()}"
        self.http_addr = f"127.0.0.1:{free_port()}"
        self.proc: Optional[Process] = None
        self._channel: Optional[grpc.Channel] = None

    def start(self, *args: str) -> None:
        argv = [str(self.c.bin), "server", "--node-id", self.id, "--data-dir", str(self.data_dir),
                "--raft-addr", self.raft_addr, "--grpc-addr", self.grpc_addr, "--http-addr", self.http_addr,
                "--log-level", "info", "--config", str(self.c.config), *args]
        self.proc = Process(self.id, argv, self.c.dir / f"{self.id}.log")
        self.c.procs.append(self.proc)

    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def channel(self) -> grpc.Channel:
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.grpc_addr)
        return self._channel

    def md(self):
        return (("authorization", "Bearer " + ADMIN_TOKEN),)

    def ask(self, *args: str) -> dict:
        """One barista command against this node alone, as JSON: the
        nodes' own service is the servers' (the SDK speaks only the
        client, worker and admin services)."""
        out = subprocess.run([str(self.c.bin), *args, "--server", self.grpc_addr, "--token", ADMIN_TOKEN,
                              "--rpc-timeout", "2s", "--json"], capture_output=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(f"barista {' '.join(args)} on {self.id}: {out.stderr.decode(errors='replace').strip()}")
        return json.loads(out.stdout)

    def status(self) -> SimpleNamespace:
        st = self.ask("status")
        return SimpleNamespace(leader_id=st.get("leader_id", ""), state=st.get("state", ""))

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        self.close()

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


class Cluster:
    """n servers: the first bootstraps, the others join it."""

    def __init__(self, binary: Path, directory: Path, n: int = 3, scheduler: str = ""):
        self.bin, self.dir = binary, directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "barista.toml"
        self.config.write_text(TOKEN_CONFIG + ("\n[scheduler]\n" + scheduler if scheduler else ""))
        self.procs: List[Process] = []
        self.nodes = [Node(self, f"n{i}") for i in range(1, n + 1)]

    @property
    def addrs(self) -> List[str]:
        return [n.grpc_addr for n in self.nodes]

    def start(self) -> "Cluster":
        first = self.nodes[0]
        first.start("--bootstrap")
        self.wait_leader(20)
        for n in self.nodes[1:]:
            n.start("--join", first.grpc_addr)
        self.wait_voters(len(self.nodes), 30)
        return self

    def running(self) -> List[Node]:
        return [n for n in self.nodes if n.running()]

    def leader(self) -> Optional[Node]:
        """The node every running node names as leader, if they agree."""
        ids = set()
        for n in self.running():
            st = n.status()
            if not st.leader_id:
                return None
            ids.add(st.leader_id)
        if len(ids) != 1:
            return None
        lid = ids.pop()
        for n in self.running():
            if n.id == lid and n.status().state == "leader":
                return n
        return None

    def wait_leader(self, timeout: float = 20) -> Node:
        return wait_for(self.leader, timeout, "an agreed leader")

    def followers(self) -> List[Node]:
        lead = self.wait_leader()
        return [n for n in self.running() if n is not lead]

    def wait_voters(self, count: int, timeout: float) -> None:
        def voters():
            lead = self.leader()
            if lead is None:
                return False
            peers = lead.ask("operator", "raft", "list-peers")["peers"]
            return sum(1 for p in peers if p.get("voter")) == count
        wait_for(voters, timeout, f"{count} voters")

    def admin(self):
        lead = self.wait_leader()
        return admin_pb2_grpc.AdminStub(lead.channel()), lead.md()

    def pool_set(self, name: str, **fields) -> None:
        """Creates or changes a pool (the SDK has no call for it)."""
        stub, md = self.admin()
        stub.PoolSet(admin_pb2.PoolSetRequest(name=name, **fields), metadata=md, timeout=5)

    def resource_set(self, name: str, **fields) -> None:
        """Declares or changes a resource (the SDK has no call for it)."""
        stub, md = self.admin()
        stub.ResourceSet(admin_pb2.ResourceSetRequest(name=name, **fields), metadata=md, timeout=5)

    def purge(self, tenant: str, *job_ids: int) -> None:
        """Deletes ended jobs of a tenant (the SDK has no call for it)."""
        lead = self.wait_leader()
        client_pb2_grpc.ClientStub(lead.channel()).PurgeJobs(
            client_pb2.BulkJobsRequest(tenant=tenant, job_ids=list(job_ids)), metadata=lead.md(), timeout=5)

    def set_config(self, **fields) -> None:
        """Sets fields of the replicated scheduler configuration (get it,
        change it, put it back whole)."""
        stub, md = self.admin()
        cfg = stub.GetConfig(admin_pb2.GetConfigRequest(), metadata=md, timeout=5)
        for k, v in fields.items():
            setattr(cfg, k, v)
        stub.SetConfig(admin_pb2.SetConfigRequest(config=cfg), metadata=md, timeout=5)

    def stop(self) -> None:
        """Kills every process this cluster started, by PID, and waits for
        each."""
        for n in self.nodes:
            n.close()
        for p in self.procs:
            p.signal(signal.SIGKILL)
        for p in self.procs:
            p.wait(10)
            if not p.log.closed:
                p.log.close()

    def logs(self, lines: int = 40) -> str:
        return "\n".join(f"---- {p.name} (last {lines} lines)\n{p.tail(lines)}" for p in self.procs)


def python_env() -> dict:
    """The environment of a Python child process that imports the SDK from
    this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SDK_SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable

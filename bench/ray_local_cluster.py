"""A real Ray cluster of separate node processes on 127.0.0.1, for benchmarks (and anyone who needs one).

Each node is one ``ray start --block`` process (the head, then ``--address`` for the others) with its own
temp dir under ``root`` and its own free ports, so clusters that other people run on the same machine are
never touched: ``stop`` ends only the processes whose command line names ``root`` (Ray's daemons and workers
all carry their session folder in theirs) and the ``ray start`` process groups it began, never ``ray stop``
(which ends every Ray process of the machine). Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

READY = "Ray runtime started"  # what `ray start` prints once its node runs
NODE_PORTS = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port")
WORKER_PORTS = 40  # each node's range of worker ports
SOCKET_TAIL = len("/n0/session_2026-12-07_11-16-36_957171_32271/sockets/plasma_store")  # what Ray adds to root
MAX_SOCKET_PATH = 107  # AF_UNIX: Ray refuses a node whose socket path is longer


def free_port() -> int:
    """A port nobody listens on now (the kernel's pick for port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_range(size: int, taken: set[int]) -> int:
    """The first port of ``size`` consecutive free ports, at random in the unprivileged range."""
    for _ in range(200):
        first = random.randrange(20_000, 60_000 - size)
        ports = range(first, first + size)
        if taken.isdisjoint(ports) and all(_is_free(p) for p in ports):
            taken.update(ports)
            return first
    raise RuntimeError(f"no {size} consecutive free ports found")


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ray_environment() -> dict[str, str]:
    """This process's environment, without usage stats and without a RAY_ADDRESS that points elsewhere.

    Token authentication off for every process of the cluster and its drivers: left unset, Ray 2.60 turns it
    on for a head that finds a token in ``~/.ray`` (anyone's, on a shared machine) but not for a node joining
    with ``--address``, which is then refused. The cluster listens on 127.0.0.1 only."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    return env


@dataclass
class LocalRayCluster:
    """``nodes`` Ray nodes of ``cpus_per_node`` CPUs each, as separate processes; ``address`` once started."""

    root: Path
    nodes: int = 2
    cpus_per_node: int = 1
    object_store_bytes: int = 256 * 2**20  # small: the plan's pieces are all it holds
    ray: str = field(default_factory=lambda: str(Path(sys.executable).with_name("ray")))
    address: str = ""
    _started: list[subprocess.Popen] = field(default_factory=list)
    _taken: set[int] = field(default_factory=set)

    def start(self, timeout: float = 120.0) -> str:
        """Start the head and the other nodes; wait until every node has joined; the head's host:port."""
        if len(str(self.root)) + SOCKET_TAIL > MAX_SOCKET_PATH:
            raise ValueError(f"{self.root}: too long for Ray's socket paths (at most "
                             f"{MAX_SOCKET_PATH - SOCKET_TAIL} characters); use a short folder such as a temp dir")
        self.root.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        try:
            for node in range(self.nodes):
                where = ["--head", "--port", str(port), "--ray-client-server-port", str(free_port()),
                         "--include-dashboard=false"] if node == 0 else ["--address", self.address]
                self._start_node(node, where, timeout)
            self._wait_for_nodes(timeout)
        except BaseException:
            self.stop()
            raise
        return self.address

    def _start_node(self, node: int, where: list[str], timeout: float) -> None:
        first = _free_range(WORKER_PORTS, self._taken)
        ports = [arg for flag in NODE_PORTS for arg in (flag, str(free_port()))]
        command = [self.ray, "start", "--block", *where, "--node-ip-address", "127.0.0.1",
                   "--num-cpus", str(self.cpus_per_node), "--object-store-memory", str(self.object_store_bytes),
                   "--min-worker-port", str(first), "--max-worker-port", str(first + WORKER_PORTS - 1), *ports,
                   "--temp-dir", str(self.root / f"n{node}"), "--disable-usage-stats"]
        log = self.root / f"node{node}.log"
        with log.open("wb") as sink:  # the child keeps its own descriptor
            self._started.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                                  env=ray_environment(), start_new_session=True))
        deadline = time.monotonic() + timeout
        while READY not in log.read_text(errors="replace"):
            if self._started[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray node {node} did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    def _wait_for_nodes(self, timeout: float) -> None:
        """Until the cluster counts every node as alive (a driver's view, from a short subprocess)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False); "
                 "print(sum(n['Alive'] for n in ray.nodes())); ray.shutdown()")
        deadline = time.monotonic() + timeout
        while True:
            done = subprocess.run([sys.executable, "-c", probe, self.address], capture_output=True, text=True,
                                  env=ray_environment(), timeout=timeout)
            alive = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
            if alive == [str(self.nodes)]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster has {alive or '?'} of {self.nodes} nodes: {done.stderr[-2000:]}")
            time.sleep(1.0)

    def pids(self) -> list[int]:
        """Every process whose command line names this cluster's root (its daemons and workers)."""
        mine, root = [], str(self.root)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if root in (entry / "cmdline").read_bytes().decode(errors="replace"):
                        mine.append(int(entry.name))
                except OSError:  # it ended while we looked
                    continue
        return mine

    def stop(self, grace: float = 10.0) -> None:
        """End this cluster's processes only: the ``ray start`` groups, then whatever still names ``root``."""
        for process in self._started:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (any(p.poll() is None for p in self._started) or self.pids()):
            time.sleep(0.2)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
        for process in self._started:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        self._started.clear()

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pid: int, signal_number: int) -> None:
    try:
        os.killpg(pid, signal_number)
    except OSError:  # the group is gone already
        pass

"""A real two-node Ray cluster on this machine: ``ray start --head`` and a second ``ray start --address``.

Each node is its own ``ray start --block`` launcher, started in a new session: ``--block`` keeps the launcher in
the foreground, and Ray starts the node's processes (GCS, raylet, agents, log monitor) and the raylet its
workers without a session of their own, so the launcher's process group holds the whole node. Killing that group
(SIGKILL) is how a node dies on a cluster, and how teardown leaves nothing behind without ``ray stop`` (which
would stop every Ray process of the machine, other users' too). Every port is chosen here; each node has its
own ``--temp-dir`` (short: Unix socket paths stay under 107 bytes).

Ray turns ``--node-ip-address 127.0.0.1`` into the machine's own interface address on Linux
(``resolve_ip_for_localhost``); the traffic stays on this machine either way.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 80 * 2**20  # the tests move kilobytes; Ray's default is 30% of the machine's memory
WORKER_PORTS = 40  # per node: a few workers each, one port each
# The GCS marks a silent node dead after period x threshold (about 3 s) instead of Ray's 15 s: the node-loss
# tests wait for it; a loaded 2-core machine still answers a health check within the 2 s timeout.
HEALTH_CHECK = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000",
                "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "1000"}
# Never the machine's AWS setup or the instance metadata service: the S3 tests pass moto's endpoint explicitly.
AWS_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL")
NODES_ALIVE = """import sys, time, ray
ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, logging_level="ERROR")
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    alive = sum(node["Alive"] for node in ray.nodes())
    if want < 0 or alive == want or time.monotonic() > deadline:
        break
    time.sleep(0.3)
print(alive)
ray.shutdown()
"""


def cluster_env() -> dict[str, str]:
    """The environment of the nodes and of drivers: no usage stats, no RAY_ADDRESS or AWS setup from outside, and
    a token of the cluster's own: the nodes listen on the machine's address, and Ray would otherwise take up
    whatever token ``~/.ray/auth_token`` holds (a user's other cluster) or none."""
    env = {name: value for name, value in os.environ.items()
           if name not in AWS_NAMES and not name.startswith(("RAY_ADDRESS", "RAY_AUTH", "RAY_health_check"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),RAY_USAGE_STATS_ENABLED="0", AWS_EC2_METADATA_DISABLED="true", AWS_DEFAULT_REGION="us-east-1",
               AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_CONFIG_FILE=os.devnull)
    return env


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("", port))  # every interface: Ray binds its servers on the machine's address too
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports, below the kernel's ephemeral range (32768+) so that no
    outgoing connection takes one before Ray binds it."""
    while True:
        first = random.randint(20000, 32000 - count)
        if all(_is_free(port) for port in range(first, first + count)):
            return first


class RayNode:
    """One ``ray start --block`` launcher and its process group."""

    def __init__(self, temp_dir: Path, args: list[str], env: dict[str, str], cpus: int = 1) -> None:
        self.temp_dir = temp_dir
        first = free_ports(6)
        ports = iter(range(first, first + 6))
        first_worker = free_ports(WORKER_PORTS)
        command = [RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
                   "--temp-dir", str(temp_dir), "--disable-usage-stats", "--object-store-memory",
                   str(OBJECT_STORE_BYTES), "--node-manager-port", str(next(ports)),
                   "--object-manager-port", str(next(ports)), "--dashboard-agent-listen-port", str(next(ports)),
                   "--dashboard-agent-grpc-port", str(next(ports)), "--metrics-export-port", str(next(ports)),
                   "--runtime-env-agent-port", str(next(ports)), "--min-worker-port", str(first_worker),
                   "--max-worker-port", str(first_worker + WORKER_PORTS - 1), *args]
        self.log = temp_dir.with_suffix(".log")
        with open(self.log, "ab") as log:
            self.launcher = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL to the node's whole process group (launcher, raylet, agents, workers), then reap the launcher."""
        try:
            os.killpg(self.launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.launcher.wait(timeout=30)
        deadline = time.monotonic() + 30
        while group_members(self.launcher.pid) and time.monotonic() < deadline:
            time.sleep(0.1)  # orphans are reaped by init, a moment after the signal


def ask_nodes(address: str, env: dict[str, str], want: int, timeout: float) -> int:
    """The live nodes at ``address`` once ``want`` are alive or ``timeout`` passed (``ray.nodes()`` of a short
    driver; ``want`` < 0: now)."""
    done = subprocess.run([sys.executable, "-c", NODES_ALIVE, address, str(want), str(timeout)],
                          env=env, capture_output=True, text=True, timeout=timeout + 120)
    if done.returncode != 0:
        raise RuntimeError(f"ray.nodes() at {address} failed: {done.stderr.strip()[-2000:]}")
    return int(done.stdout.split()[-1])


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


class LocalRayCluster:
    """A head node and a second node, each with one CPU; ``address`` is the head's GCS ("127.0.0.1:PORT")."""

    def __init__(self, root: Path) -> None:
        started = time.monotonic()
        self.root = root
        self.env = cluster_env()
        self.node_env = {**self.env, **HEALTH_CHECK}
        gcs_port = free_ports(1)
        self.address = f"127.0.0.1:{gcs_port}"
        extra = free_ports(2)
        self.head = RayNode(root / "h", ["--head", "--port", str(gcs_port), "--include-dashboard=false",
                                         "--ray-client-server-port", str(extra), "--dashboard-port", str(extra + 1)],
                            self.node_env)
        self.second: RayNode | None = None
        self.restarts = 0
        try:
            self.restart_second_node()
        except BaseException:
            self.close()  # a cluster that never came up leaves nothing behind either
            raise
        self.start_seconds = time.monotonic() - started

    def restart_second_node(self, timeout: float = 120) -> None:
        """A fresh second node (its own temp dir), once the cluster counts two live nodes."""
        self.restarts += 1
        resources = json.dumps({"second_node": 1})  # a task asks for it to run on the second node
        self.second = RayNode(self.root / f"s{self.restarts}", ["--address", self.address, "--resources", resources],
                              self.node_env)
        self.wait_nodes(2, timeout)

    def kill_second_node(self, timeout: float = 60) -> None:
        """SIGKILL every process of the second node, then wait until the GCS counts one live node."""
        assert self.second is not None
        self.second.kill()
        self.wait_nodes(1, timeout)

    def nodes_alive(self) -> int:
        """How many nodes the GCS counts alive now (``ray.nodes()`` from a short driver)."""
        return self._ask_nodes(-1, 0)

    def wait_nodes(self, count: int, timeout: float) -> None:
        alive = self._ask_nodes(count, timeout)
        if alive != count:
            raise RuntimeError(f"the Ray cluster at {self.address} has {alive} live nodes after {timeout:.0f} s, "
                               f"not {count}; node logs: {self.root}")

    def _ask_nodes(self, want: int, timeout: float) -> int:
        return ask_nodes(self.address, self.env, want, timeout)

    def processes(self) -> list[int]:
        """Every live process the cluster started (the launchers' process groups)."""
        nodes = [self.head] + ([self.second] if self.second else [])
        return [pid for node in nodes for pid in group_members(node.launcher.pid)]

    def close(self) -> list[str]:
        """Kill the second node, then the head (only the process groups started here), and wait for them; returns
        what ``ps`` still shows of the cluster (its groups, or its temp dir on a command line): nothing, normally."""
        if self.second is not None:
            self.second.kill()
        self.head.kill()
        groups = {str(node.launcher.pid) for node in (self.head, self.second) if node is not None}
        return [" ".join(fields) for fields in ps_lines() if fields[2][0] != "Z"  # a zombie is dead already
                and (fields[1] in groups or str(self.root) in fields[3])]


def ps_lines() -> list[list[str]]:
    """``ps`` of every process, whole command lines (``-ww``), as [pid, pgid, state, args]."""
    ps = subprocess.run(["ps", "-eww", "-o", "pid=,pgid=,stat=,args="], capture_output=True, text=True).stdout
    return [line.split(None, 3) for line in ps.splitlines() if len(line.split(None, 3)) == 4]

"""One Ray head node of two CPUs for the whole pytest worker (``ray_head`` in tests/conftest.py): the Ray CLI
tests connect to it with ``--ray-address HOST:PORT`` instead of each starting a local Ray (10-20 s per start on
a loaded 2-core machine). Started with tests/cluster/ray_nodes.py's launcher (its own ports, temp dir and
process group, no ``ray stop``), and killed the same way."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from tests.cluster.ray_nodes import RayNode, ask_nodes, cluster_env, free_ports, ps_lines

# Token authentication off for the head and every driver: the pytest process's own Ray (tests/plan connects
# in-process) read its auth mode once, at import, without a token; a driver and the head must agree.
DRIVER_AUTH = {"RAY_AUTH_MODE": "disabled"}
HEAD_CPUS = 2


def driver_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment by default) as a driver of ``ray_head`` needs it: no token, no
    RAY_ADDRESS pointing elsewhere, no usage stats."""
    env = {name: value for name, value in (os.environ if base is None else base).items()
           if name not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
    return {**env, **DRIVER_AUTH, "RAY_USAGE_STATS_ENABLED": "0"}


class LocalRayHead:
    """A single ``ray start --head`` node; ``address`` is its GCS ("127.0.0.1:PORT")."""

    def __init__(self) -> None:
        started = time.monotonic()
        self.root = Path(tempfile.mkdtemp(prefix="r44h"))  # short: Ray's socket paths stay under 107 bytes
        self.env = {name: value for name, value in cluster_env().items() if name != "RAY_AUTH_TOKEN"}
        self.env.update(DRIVER_AUTH)
        gcs_port, extra = free_ports(1), free_ports(2)
        self.address = f"127.0.0.1:{gcs_port}"
        self.node = RayNode(self.root / "h", ["--head", "--port", str(gcs_port), "--include-dashboard=false",
                                              "--ray-client-server-port", str(extra),
                                              "--dashboard-port", str(extra + 1)], self.env, cpus=HEAD_CPUS)
        try:
            alive = ask_nodes(self.address, self.env, 1, 120)
            if alive != 1:
                raise RuntimeError(f"the Ray head at {self.address} is not alive after 120 s; log: {self.node.log}")
        except BaseException:
            self.close()  # a head that never came up leaves nothing behind either
            raise
        self.start_seconds = time.monotonic() - started

    def close(self) -> list[str]:
        """Kill the head's process group, remove its temp dir; returns what ``ps`` still shows of it (nothing)."""
        self.node.kill()
        group = str(self.node.launcher.pid)
        left = [" ".join(fields) for fields in ps_lines() if fields[2][0] != "Z"
                and (fields[1] == group or str(self.root) in fields[3])]
        shutil.rmtree(self.root, ignore_errors=True)
        return left

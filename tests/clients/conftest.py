"""Clients' own code (open_clip, timm, torchvision, HF transformers) run as subprocesses over dataio.

The Makefile installs them into ``.venv/clients`` without their dependencies; ``site/sitecustomize.py`` makes
torchvision's Python importable on the CPU torch. Both go on PYTHONPATH of the subprocess only: the pytest process
never imports torchvision, so the library's other tests keep seeing a machine without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CLIENTS = Path(sys.prefix) / "clients"
UPSTREAM = HERE / "upstream"


@pytest.fixture(scope="session")
def client_env() -> dict[str, str]:
    """The environment of a subprocess running clients' code: their folder and the torchvision shim first."""
    if not (CLIENTS / "open_clip").is_dir():
        pytest.fail(f"{CLIENTS} holds no clients: `make venv` installs them (open_clip, timm, torchvision, ...)")
    path = os.pathsep.join([str(HERE / "site"), str(CLIENTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def run_client(args: list[str], env: dict[str, str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` (a script or ``-m module``) outside the clone, so the installed library is imported."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)

"""Helpers for issue 45: a Python subprocess as a user runs one (its own environment, OMP_NUM_THREADS=1 on the 2
shared cores), the scripts of ``scripts/``, and the PYTHONPATH that makes timm importable (tests/clients)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
CLIENTS = Path(sys.prefix) / "clients"


def run(args: list, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120,
        drop: tuple[str, ...] = ("DATAIO_CPU_TIER",)) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``cwd`` with this environment less ``drop``, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**base, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **(env or {})})


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Exit 0 and no traceback."""
    assert done.returncode == 0 and "Traceback" not in done.stderr, \
        f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="session")
def timm_env() -> dict[str, str]:
    """PYTHONPATH with the clients' folder (timm) and the torchvision shim, as tests/clients run them."""
    if not (CLIENTS / "timm").is_dir():
        pytest.skip(f"{CLIENTS} holds no timm (`make venv` installs the clients)")
    site = ROOT / "tests" / "clients" / "site"
    return {"PYTHONPATH": os.pathsep.join([str(site), str(CLIENTS), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.fixture(scope="session")
def cpu_highest() -> str:
    """This CPU's highest tier (read only: the pytest process's tier is left as it is); skips without the
    extension (no tiers: PIL resizes)."""
    from dataio.formats.jpeg import cpu_tier

    if cpu_tier._jpeg_codec is None:
        pytest.skip("dataio.formats.jpeg._jpeg_codec not built: no crop-resize tiers")
    return cpu_tier.cpu_tier()

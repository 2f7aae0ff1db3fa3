"""Helpers for issue 46: a Python subprocess run as a user runs a script (no DATAIO_CPU_TIER, OMP_NUM_THREADS=1 on
the 2 shared cores), the scripts of ``scripts/``, a free TCP port for gloo, and this CPU's highest tier."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def run(args: list, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``cwd`` with this environment less DATAIO_CPU_TIER, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k != "DATAIO_CPU_TIER"}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**base, "OMP_NUM_THREADS": "1", **(env or {})})


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Exit 0 and no traceback."""
    assert done.returncode == 0 and "Traceback" not in done.stderr, \
        f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def capped() -> str:
    """The tier ``use_tier("avx2")`` gives here (avx2 on any CPU with AVX2); skips where nothing lies below the
    CPU's highest (no extension, or a CPU without AVX-512: no cap to carry)."""
    from dataio.formats.jpeg import cpu_tier  # lazy: read only in the tests that need the extension

    if cpu_tier._jpeg_codec is None or cpu_tier.cpu_tier() not in ("avx512", "vbmi"):
        pytest.skip("this CPU has no tier above avx2: an avx2 cap is its own tier, nothing is carried")
    return "avx2"

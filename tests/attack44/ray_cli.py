"""``dataio`` as a user runs it for the issue 44 attack: a subprocess, connected to the worker's Ray head
(``ray_head``, tests/conftest.py) with ``--ray-address HOST:PORT``, Ray's session files under a short temporary
folder; not a test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from tests.cluster.ray_head import driver_env

CHECKOUT = Path(__file__).resolve().parents[2]


def dataio(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m dataio ARGS``; a run past ``timeout`` seconds is returned with returncode None (a hang)."""
    temp = tempfile.mkdtemp(prefix="r44")  # short: Ray's socket paths must stay under 107 bytes
    environ = {**driver_env(), "RAY_TMPDIR": temp, "DATAIO_NUM_WORKERS": "1", **(env or {})}
    process = subprocess.Popen([sys.executable, "-m", "dataio", *args], cwd=CHECKOUT, env=environ, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)  # this run's own process group only (its local Ray included)
        out, err = process.communicate()
        code = None
    shutil.rmtree(temp, ignore_errors=True)
    return subprocess.CompletedProcess(args, code, out, err)


def ray_args(head, *more: str) -> tuple[str, ...]:
    """The engine flags of a run on ``head`` (the ``ray_head`` fixture), then ``more``."""
    return ("--engine", "ray", "--ray-address", head.address, *more)


def image_tree(root: Path, classes: int = 3, per_class: int = 3, pad_to: int | None = None) -> Path:
    """Class folders of tiny JPEGs, each a colour of its own; ``pad_to``: every file padded with zeros past its
    EOI to that many bytes (decoders ignore it), so every file has the same size."""
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            colour = (40 * c + 10 * i, 200 - 50 * c, 30 * i)
            path = folder / f"img{i}.jpg"
            Image.fromarray(np.full((16, 16, 3), colour, np.uint8)).save(path, quality=95)
            if pad_to:
                with open(path, "ab") as f:
                    f.write(b"\0" * (pad_to - path.stat().st_size))
    return root


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr[-3000:]
    return lines[0]

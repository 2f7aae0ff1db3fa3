"""Helpers for issue 44 as a user meets it: the CLI in a subprocess, the worker's Ray head (``ray_head``) or,
once, a local Ray, a moto S3 on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster.ray_head import driver_env

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m dataio ARGS` as a user runs it; Ray's session files (when asked for) in a short tmp dir."""
    env = driver_env()
    env.update(RAY_TMPDIR=tempfile.mkdtemp(prefix="r44", dir="/tmp"), RAY_USAGE_STATS_ENABLED="0",
               AWS_EC2_METADATA_DISABLED="true", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


RAY_LOCAL = ("--engine", "ray", "--ray-address", "local", "--items", "2", "--no-progress")  # the laptop path


def ray_flags(head) -> tuple[str, ...]:
    """The engine flags of a run on ``head`` (the ``ray_head`` fixture)."""
    return ("--engine", "ray", "--ray-address", head.address, "--items", "2", "--no-progress")


@pytest.fixture(scope="session")
def s3():
    pytest.importorskip("s3fs")
    from tests.remote.conftest import S3

    server = S3()
    yield server
    server.stop()


def s3_flags(s3) -> list[str]:
    return ["--storage-option", f"client_kwargs.endpoint_url={s3.endpoint}",
            "--storage-option", "key=testing-key", "--storage-option", "secret=testing-secret"]


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imgs") / "src"
    ok(cli("synth", str(root), "--classes", "2", "--per-class", "4"))
    return root


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    ok(cli("synth-text", str(path), "--documents", "60", "--mean-words", "20"))
    return path

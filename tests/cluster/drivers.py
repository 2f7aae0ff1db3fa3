"""Drivers of the cluster tests: ``python -m dataio ...`` as a subprocess, whole or killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_driver(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m dataio ARGS`` with the cluster's environment; its exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "dataio", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def kill_driver_when(args: list[str], env: dict[str, str], cwd: Path, condition: Callable[[], bool],
                     timeout: float = 300, poll: float = 0.2) -> tuple[int, str]:
    """Start the driver in its own process group and SIGKILL the whole group once ``condition()`` holds (a driver
    killed mid-job: no handler of its own runs). Returns (exit code, stderr so far); raises if the driver exits or
    ``timeout`` passes before the condition held, since the test would then prove nothing."""
    log = cwd / f"driver-{time.monotonic_ns()}.err"
    with open(log, "wb") as stderr:
        driver = subprocess.Popen([sys.executable, "-m", "dataio", *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not condition():
            if driver.poll() is not None:
                raise AssertionError(f"the driver exited ({driver.returncode}) before the condition held: "
                                     f"{log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the condition did not hold within {timeout:.0f} s: {log.read_text()[-2000:]}")
            time.sleep(poll)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        driver.wait(timeout=30)
    return driver.returncode, log.read_text()


def parts_with_manifest(folder: Path, name: str = "manifest.json") -> int:
    """How many part folders directly under ``folder`` hold a manifest."""
    return sum(1 for part in folder.glob(f"*/{name}")) if folder.is_dir() else 0
